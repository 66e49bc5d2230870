/* ensemble_digits.c: an ensemble of K MLPs trained together as one
 * cft_vmap over stacked parameters, on the sklearn digits data set.
 *
 * Each member is the MLP 64 -> 128 -> 128 -> 10 of examples/mlp.h with its own
 * initialisation key and its own order of the training data. One SGD step of
 * one model is a cft_fn; cft_vmap of it over a leading axis K of every
 * parameter and of the minibatch trains all K models in one call:
 *
 *     step    : (w1, b1, ..., b3, x [B,64], y [B])        -> (params', loss)
 *     vmap(step): (w1 [K,64,128], ..., x [K,B,64], y [K,B]) -> (params' [K,...], loss [K])
 *
 * The program then trains the same K models one after another with the
 * unbatched step (same data, same number of steps), checks that both give
 * the same models, and reports the speed of each. Expect about 1x here: a
 * batched dot_general still runs one (small) GEMM per model, so vmap saves
 * only the per-call overhead, which cft_jit already makes small. Finally it reports each
 * member's test accuracy and the ensemble's (averaged logits).
 *
 *   build/examples/ensemble_digits [--quick] [--models K] [--epochs N] [--bf16]
 *
 * --bf16 trains under cft_autocast(loss, CFT_BF16) (products on bf16
 * operands, gradients f32).
 *
 * Defaults: 16 models, 20 epochs. --quick (for ctest) trains 8 models for 8
 * epochs; both check that the two ways agree and that the ensemble is at
 * least as accurate as its mean member and above a floor (0.92 quick, 0.95).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mlp.h"

#define BATCH 32
#define MAX_MODELS 64
static const double LR = 0.1;

/* (params[6], x [B,64], y [B]) -> (params after one SGD step, loss) */
static cft_status sgd_step(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_fn *vg = env; /* value_and_grad of mlp_loss */
    cft_array *r[1 + MLP_NPARAMS];
    cft_status st = cft_fn_call(vg, in, r);
    if (st != CFT_OK)
        return st;
    for (int l = 0; l < MLP_NPARAMS; l++)
        out[l] = cft_sub(in[l], cft_mul_s(r[1 + l], LR));
    out[MLP_NPARAMS] = r[0];
    return CFT_OK;
}

/* (params[6], x [N,64]) -> logits [N,10] */
static cft_status logits_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = mlp_logits(in, in[MLP_NPARAMS]);
    return CFT_OK;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Model k's data order: a permutation of the training rows per epoch. */
static void data_order(int *order, int n, int k, int epoch) {
    uint64_t s = ((uint64_t)k * 1000003u + (uint64_t)epoch) * 2654435761u + 17;
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int j = (int)(s % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
}

/* Copy minibatch `step` of model k's order into x (B*64 floats) and y. */
static void gather(const digits *d, const int *order, int step, float *x, int32_t *y) {
    for (int i = 0; i < BATCH; i++) {
        int r = order[step * BATCH + i];
        memcpy(x + i * 64, d->x + r * 64, sizeof(float) * 64);
        y[i] = d->y[r];
    }
}

/* Fraction of rows whose argmax of logits [N,10] equals the label. */
static double accuracy(cft_array *logits, const int32_t *labels, int n) {
    int32_t pred[2000];
    if (cft_copy_to(cft_argmax(logits, -1, false), CFT_I32, pred) != CFT_OK)
        return -1;
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += pred[i] == labels[i];
    return (double)ok / n;
}

int main(int argc, char **argv) {
    int K = 16, epochs = 20;
    bool quick = false, bf16 = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true, K = 8, epochs = 8;
        if (!strcmp(argv[i], "--models") && i + 1 < argc)
            K = atoi(argv[++i]);
        if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
            epochs = atoi(argv[++i]);
        if (!strcmp(argv[i], "--bf16"))
            bf16 = true;
    }
    if (K < 2 || K > MAX_MODELS || epochs < 1) {
        fprintf(stderr, "--models must be in 2..%d, --epochs positive\n", MAX_MODELS);
        return 2;
    }
    cft_init();
    cft_set_num_threads(1); /* small matrices: one thread is fastest */
    digits d;
    if (digits_load(&d))
        return 1;
    digits_shuffle(&d, 7);
    int ntest = d.n / 5, ntrain = d.n - ntest, steps = ntrain / BATCH;
    digits train = {ntrain, d.x, d.y};
    printf("digits: %d train, %d test examples; %d MLPs 64-128-128-10, SGD lr %.2f, batch %d, "
           "%d epochs of %d steps\n",
           ntrain, ntest, K, LR, BATCH, epochs, steps);

    /* K initialisations, stacked: params[l] is [K, ...shape of layer l] */
    cft_array *members[MAX_MODELS][MLP_NPARAMS], *stacked[MLP_NPARAMS];
    for (int k = 0; k < K; k++)
        mlp_init(1000 + (uint64_t)k, members[k]);
    for (int l = 0; l < MLP_NPARAMS; l++) {
        cft_array *layer[MAX_MODELS];
        for (int k = 0; k < K; k++)
            layer[k] = members[k][l];
        stacked[l] = cft_stack(layer, K, 0);
    }

    cft_fn *loss = cft_fn_new(mlp_loss, NULL, 8, 1);
    if (bf16)
        loss = cft_autocast(loss, CFT_BF16);
    cft_fn *vg = cft_value_and_grad(loss, (int[]){0, 1, 2, 3, 4, 5}, MLP_NPARAMS, false);
    cft_fn *step = cft_fn_new(sgd_step, vg, MLP_NPARAMS + 2, MLP_NPARAMS + 1);
    cft_fn *ens_step = cft_vmap(step, NULL, NULL); /* every input batched on axis 0 */
    /* compile both into fused kernels (CFT_JIT=0: interpret them instead) */
    step = cft_jit(step);
    ens_step = cft_jit(ens_step);

    int *order = malloc(sizeof(int) * (size_t)K * ntrain);
    float *xb = malloc(sizeof(float) * (size_t)K * BATCH * 64);
    int32_t *yb = malloc(sizeof(int32_t) * (size_t)K * BATCH);
    int64_t xs[3] = {K, BATCH, 64}, ys[2] = {K, BATCH};

    /* 0. one vmapped step equals K unbatched steps (up to f32 rounding) */
    double worst = 0;
    {
        cft_array *in[MLP_NPARAMS + 2], *out[MLP_NPARAMS + 1], *ink[MLP_NPARAMS + 2],
            *outk[MLP_NPARAMS + 1];
        for (int k = 0; k < K; k++) { /* each model's first minibatch */
            data_order(order, ntrain, k, 0);
            gather(&train, order, 0, xb + k * BATCH * 64, yb + k * BATCH);
        }
        memcpy(in, stacked, sizeof stacked);
        in[MLP_NPARAMS] = cft_from_f32(xb, xs, 3);
        in[MLP_NPARAMS + 1] = cft_from_i32(yb, ys, 2);
        cft_fn_call(ens_step, in, out);
        for (int k = 0; k < K; k++) {
            for (int i = 0; i < MLP_NPARAMS + 2; i++)
                ink[i] = cft_index(in[i], k);
            cft_fn_call(step, ink, outk);
            for (int l = 0; l <= MLP_NPARAMS; l++)
                worst = fmax(worst, cft_max_abs_diff(cft_index(out[l], k), outk[l]));
        }
        printf("one vmapped step vs %d unbatched steps: max abs diff %.2e %s\n", K, worst,
               worst < 1e-5 ? "(ok)" : "(MISMATCH)");
    }

    /* 1. all K models at once (reading the losses costs this side a little) */
    double t0 = now_s();
    for (int e = 0; e < epochs; e++) {
        for (int k = 0; k < K; k++)
            data_order(order + k * ntrain, ntrain, k, e);
        double loss = 0;
        for (int s = 0; s < steps; s++) {
            for (int k = 0; k < K; k++)
                gather(&train, order + k * ntrain, s, xb + k * BATCH * 64, yb + k * BATCH);
            cft_array *in[MLP_NPARAMS + 2], *out[MLP_NPARAMS + 1];
            memcpy(in, stacked, sizeof stacked);
            in[MLP_NPARAMS] = cft_from_f32(xb, xs, 3);
            in[MLP_NPARAMS + 1] = cft_from_i32(yb, ys, 2);
            if (cft_fn_call(ens_step, in, out) != CFT_OK) {
                fprintf(stderr, "ensemble step failed: %s\n", cft_last_error_message());
                return 1;
            }
            memcpy(stacked, out, sizeof stacked);
            loss += cft_item(cft_mean(out[MLP_NPARAMS], NULL, 0, false));
        }
        printf("epoch %2d  mean train loss over the %d models %.4f\n", e + 1, K, loss / steps);
    }
    double t_vmap = now_s() - t0;

    /* 2. the same K models one after another, with the unbatched step */
    t0 = now_s();
    for (int k = 0; k < K; k++) {
        for (int e = 0; e < epochs; e++) {
            data_order(order, ntrain, k, e);
            for (int s = 0; s < steps; s++) {
                gather(&train, order, s, xb, yb);
                cft_array *in[MLP_NPARAMS + 2], *out[MLP_NPARAMS + 1];
                memcpy(in, members[k], sizeof(cft_array *) * MLP_NPARAMS);
                in[MLP_NPARAMS] = cft_from_f32(xb, xs + 1, 2);
                in[MLP_NPARAMS + 1] = cft_from_i32(yb, ys + 1, 1);
                if (cft_fn_call(step, in, out) != CFT_OK) {
                    fprintf(stderr, "step failed: %s\n", cft_last_error_message());
                    return 1;
                }
                memcpy(members[k], out, sizeof(cft_array *) * MLP_NPARAMS);
            }
        }
    }
    double t_loop = now_s() - t0;
    printf("training time, %d models x %d steps: vmap over models %.2f s, models one after another "
           "%.2f s (speed-up of vmap %.2fx)\n",
           K, epochs * steps, t_vmap, t_loop, t_loop / t_vmap);

    /* test logits of every member, [K, N, 10], for both sets of models */
    int in_axes[MLP_NPARAMS + 1] = {0, 0, 0, 0, 0, 0, CFT_NOT_BATCHED};
    cft_fn *all_logits = cft_vmap(cft_fn_new(logits_fn, NULL, MLP_NPARAMS + 1, 1), in_axes, NULL);
    cft_array *in[MLP_NPARAMS + 1];
    memcpy(in, stacked, sizeof stacked);
    in[MLP_NPARAMS] = cft_from_f32(d.x + ntrain * 64, (int64_t[]){ntest, 64}, 2);
    cft_array *logits = cft_fn_call1(all_logits, in);
    for (int l = 0; l < MLP_NPARAMS; l++) {
        cft_array *layer[MAX_MODELS];
        for (int k = 0; k < K; k++)
            layer[k] = members[k][l];
        in[l] = cft_stack(layer, K, 0);
    }
    cft_array *loop_logits = cft_fn_call1(all_logits, in);

    /* Both ways train the same models, but rounding differences (~1e-7 a
     * step) grow over hundreds of SGD steps: compare their predictions. */
    double agree = cft_item(cft_mean(
        cft_astype(cft_eq(cft_argmax(logits, -1, false), cft_argmax(loop_logits, -1, false)),
                   CFT_F32),
        NULL, 0, false));
    double wdiff = 0;
    for (int l = 0; l < MLP_NPARAMS; l++)
        wdiff = fmax(wdiff, cft_max_abs_diff(stacked[l], in[l]));
    printf(
        "vmap-trained vs loop-trained models: max weight diff %.1e, same test prediction on %.2f%% "
        "(%s)\n",
        wdiff, 100 * agree, agree >= 0.98 ? "ok" : "MISMATCH");
    const int32_t *labels = d.y + ntrain;
    double mean_acc = 0, best = 0;
    printf("test accuracy of each model:");
    for (int k = 0; k < K; k++) {
        double a = accuracy(cft_index(logits, k), labels, ntest);
        printf(" %.3f", a);
        mean_acc += a / K;
        if (a > best)
            best = a;
    }
    double ens = accuracy(cft_mean(logits, (int[]){0}, 1, false), labels, ntest);
    printf("\nmean member %.3f, best member %.3f, ensemble (averaged logits) %.3f\n", mean_acc,
           best, ens);

    double floor = quick ? 0.92 : 0.95;
    int fail = 0;
    if (worst >= 1e-5 || agree < 0.98)
        fail = fprintf(stderr, "vmap and loop training disagree\n");
    if (ens < mean_acc)
        fail = fprintf(stderr, "the ensemble is worse than the mean member\n");
    if (ens < floor)
        fail = fprintf(stderr, "ensemble accuracy %.3f is below the floor %.2f\n", ens, floor);
    free(order), free(xb), free(yb);
    return fail ? 1 : 0;
}
