/* mlp.h: the MLP shared by the per-sample-gradient example and benchmark:
 * 64 -> 128 -> 128 -> 10 with ReLU and softmax cross-entropy, PyTorch's
 * default initialisation (weights and biases U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in))), and a loader for the sklearn digits CSV. */
#ifndef CFT_EXAMPLE_MLP_H
#define CFT_EXAMPLE_MLP_H

#include <cft/cft.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MLP_NPARAMS 6
static const int64_t mlp_sizes[4] = {64, 128, 128, 10};

/* params: w1 [64,128], b1 [128], w2, b2, w3 [128,10], b3 [10] */
static inline void mlp_init(uint64_t seed, cft_array **params) {
    cft_array *keys = cft_random_split(cft_random_key(seed), 2 * 3);
    for (int l = 0; l < 3; l++) {
        double bound = 1.0 / sqrt((double)mlp_sizes[l]);
        int64_t ws[2] = {mlp_sizes[l], mlp_sizes[l + 1]};
        params[2 * l] = cft_random_uniform(cft_index(keys, 2 * l), CFT_F32, ws, 2, -bound, bound);
        params[2 * l + 1] =
            cft_random_uniform(cft_index(keys, 2 * l + 1), CFT_F32, &ws[1], 1, -bound, bound);
    }
}

/* logits of x ([..., 64]) */
static inline cft_array *mlp_logits(cft_array *const *p, cft_array *x) {
    cft_array *h = cft_relu(cft_add(cft_matmul(x, p[0]), p[1]));
    h = cft_relu(cft_add(cft_matmul(h, p[2]), p[3]));
    return cft_add(cft_matmul(h, p[4]), p[5]);
}

/* (w1, b1, w2, b2, w3, b3, x, y) -> mean cross-entropy; x [..., 64], y [...] i32.
 * With one example (x [64], y []) it is that example's loss. */
static inline cft_status mlp_loss(void *env, int nin, cft_array *const *in, int nout,
                                  cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mean(cft_cross_entropy(mlp_logits(in, in[6]), in[7]), NULL, 0, false);
    return CFT_OK;
}

/* the parameter names, for trees (cft_tree_from(mlp_names, params, 6)) */
static const char *const mlp_names[MLP_NPARAMS] = {"w1", "b1", "w2", "b2", "w3", "b3"};

/* mlp_loss as a tree function (cft_tree_fn_new over mlp_names): (params, x, y) */
static inline cft_status mlp_tree_loss(void *env, const cft_tree *p, int nin, cft_array *const *in,
                                       int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *a[MLP_NPARAMS + 2];
    cft_tree_flatten(p, a);
    a[MLP_NPARAMS] = in[0], a[MLP_NPARAMS + 1] = in[1];
    return mlp_loss(NULL, MLP_NPARAMS + 2, a, 1, out);
}

/* the fraction of rows whose largest logit is the label */
static inline double mlp_accuracy(cft_array *logits, cft_array *labels) {
    cft_array *hit = cft_eq(cft_argmax(logits, -1, false), labels);
    return cft_item(cft_mean(cft_astype(hit, CFT_F32), NULL, 0, false));
}

/* The digits data: n rows of 64 pixels (scaled to [0,1]) and a label. */
typedef struct {
    int n;
    float *x;
    int32_t *y;
} digits;

static inline int digits_load(digits *d) {
    const char *dir = getenv("CFT_DATA_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/digits.csv", dir ? dir : "data");
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s: run scripts/fetch-digits.sh first\n", path);
        return -1;
    }
    d->n = 0;
    d->x = malloc(sizeof(float) * 64 * 2000);
    d->y = malloc(sizeof(int32_t) * 2000);
    int v[65];
    while (d->n < 2000) {
        int k = 0;
        for (; k < 65; k++)
            if (fscanf(f, k ? ",%d" : "%d", &v[k]) != 1)
                break;
        if (k < 65)
            break;
        for (int j = 0; j < 64; j++)
            d->x[d->n * 64 + j] = (float)v[j] / 16.0f;
        d->y[d->n++] = v[64];
    }
    fclose(f);
    if (d->n < 100) {
        fprintf(stderr, "%s: only %d rows read\n", path, d->n);
        return -1;
    }
    return 0;
}

/* A deterministic shuffle (xorshift) of the rows. */
static inline void digits_shuffle(digits *d, uint64_t seed) {
    uint64_t s = seed * 2654435761u + 1;
    for (int i = d->n - 1; i > 0; i--) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int j = (int)(s % (uint64_t)(i + 1));
        for (int k = 0; k < 64; k++) {
            float t = d->x[i * 64 + k];
            d->x[i * 64 + k] = d->x[j * 64 + k];
            d->x[j * 64 + k] = t;
        }
        int32_t t = d->y[i];
        d->y[i] = d->y[j];
        d->y[j] = t;
    }
}

#endif
