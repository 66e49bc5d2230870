/* maml.h: the MAML pieces shared by examples/maml_sinusoid.c and
 * bench/maml.c: the MLP 1 -> 40 -> 40 -> 1, its MSE, the per-task loss
 * after n inner SGD steps (second order, or first order with stop_gradient),
 * its vmap over tasks, the meta-objective and one traced Adam step. */
#ifndef CFT_EXAMPLE_MAML_H
#define CFT_EXAMPLE_MAML_H

#include <math.h>
#include <string.h>

#include <cft/cft.h>

#define NP 6          /* parameter arrays: w1 b1 w2 b2 w3 b3 */
#define K_SHOT 10     /* support points per task */
#define META_BATCH 25 /* tasks per meta-step */
static const double INNER_LR = 0.01, OUTER_LR = 1e-3, BETA1 = 0.9, BETA2 = 0.999, ADAM_EPS = 1e-8;
static const int64_t sizes[4] = {1, 40, 40, 1};

/* ---- the model ---- */

/* PyTorch's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
static inline void mlp_init(uint64_t seed, cft_array **p) {
    cft_array *keys = cft_random_split(cft_random_key(seed), 2 * 3);
    for (int l = 0; l < 3; l++) {
        double bound = 1.0 / sqrt((double)sizes[l]);
        int64_t ws[2] = {sizes[l], sizes[l + 1]};
        p[2 * l] = cft_random_uniform(cft_index(keys, 2 * l), CFT_F32, ws, 2, -bound, bound);
        p[2 * l + 1] =
            cft_random_uniform(cft_index(keys, 2 * l + 1), CFT_F32, &ws[1], 1, -bound, bound);
    }
}

/* x [..., 1] -> y [..., 1] */
static inline cft_array *mlp(cft_array *const *p, cft_array *x) {
    cft_array *h = cft_relu(cft_add(cft_matmul(x, p[0]), p[1]));
    h = cft_relu(cft_add(cft_matmul(h, p[2]), p[3]));
    return cft_add(cft_matmul(h, p[4]), p[5]);
}

/* (params[6], x, y) -> mean squared error */
static inline cft_status mse_loss(void *env, int nin, cft_array *const *in, int nout,
                                  cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mse(mlp(in, in[NP]), in[NP + 1]);
    return CFT_OK;
}

/* ---- MAML ---- */

typedef struct {
    cft_fn *grad;     /* d mse_loss / d params */
    int n_inner;      /* inner SGD steps */
    bool first_order; /* stop gradients through the inner gradients (FOMAML) */
} inner_cfg;

/* (params[6], xs, ys, xq, yq) -> query loss after n_inner SGD steps on the
 * support points. Everything here is traced, so the outer gradient sees the
 * inner gradients as ordinary (differentiable) computation. */
static inline cft_status task_loss(void *env, int nin, cft_array *const *in, int nout,
                                   cft_array **out) {
    const inner_cfg *c = env;
    (void)nin, (void)nout;
    cft_array *a[NP + 2], *g[NP];
    memcpy(a, in, sizeof a); /* params, support x, support y */
    for (int s = 0; s < c->n_inner; s++) {
        cft_status st = cft_fn_call(c->grad, a, g);
        if (st != CFT_OK)
            return st;
        for (int l = 0; l < NP; l++) {
            if (c->first_order)
                g[l] = cft_stop_gradient(g[l]);
            a[l] = cft_sub(a[l], cft_mul_s(g[l], INNER_LR));
        }
    }
    a[NP] = in[NP + 2], a[NP + 1] = in[NP + 3];
    return mse_loss(NULL, NP + 2, a, 1, out);
}

/* task_loss with its inner gradient, and its vmap over tasks (params
 * shared): per-task losses [T].
 * A callback's env must be static or GC memory (the GC does not look
 * inside malloc'd blocks), hence a static table with one entry per n_inner. */
#define MAX_INNER 20
static inline cft_fn *task_fn(int n_inner, bool first_order) {
    static inner_cfg cfgs[2][MAX_INNER + 1];
    inner_cfg *c = &cfgs[first_order][n_inner];
    c->grad = cft_grad(cft_fn_new(mse_loss, NULL, NP + 2, 1), (int[]){0, 1, 2, 3, 4, 5}, NP);
    c->n_inner = n_inner;
    c->first_order = first_order;
    return cft_fn_new(task_loss, c, NP + 4, 1);
}

static inline cft_fn *per_task_losses(int n_inner, bool first_order) {
    int in_axes[NP + 4] = {CFT_NOT_BATCHED,
                           CFT_NOT_BATCHED,
                           CFT_NOT_BATCHED,
                           CFT_NOT_BATCHED,
                           CFT_NOT_BATCHED,
                           CFT_NOT_BATCHED,
                           0,
                           0,
                           0,
                           0};
    return cft_vmap(task_fn(n_inner, first_order), in_axes, NULL);
}

/* (params[6], xs, ys, xq, yq) -> mean over tasks; env: per_task_losses */
static inline cft_status maml_objective(void *env, int nin, cft_array *const *in, int nout,
                                        cft_array **out) {
    (void)nin, (void)nout;
    cft_array *losses;
    cft_status st = cft_fn_call(env, in, &losses);
    out[0] = cft_mean(losses, NULL, 0, false);
    return st;
}

/* ---- Adam, as one traced step ---- */

/* One Adam update: in = (params[6], m[6], v[6], c1, c2), grads[6] ->
 * out = (params, m, v); c1 = 1/(1-beta1^t), c2 = 1/(1-beta2^t). */
static inline void adam_update(cft_array *const *in, cft_array *const *grads, cft_array **out) {
    cft_array *c1 = in[3 * NP], *c2 = in[3 * NP + 1];
    for (int l = 0; l < NP; l++) {
        cft_array *g = grads[l];
        cft_array *m = cft_add(cft_mul_s(in[NP + l], BETA1), cft_mul_s(g, 1 - BETA1));
        cft_array *v =
            cft_add(cft_mul_s(in[2 * NP + l], BETA2), cft_mul_s(cft_square(g), 1 - BETA2));
        cft_array *upd = cft_div(cft_mul(m, c1), cft_add_s(cft_sqrt(cft_mul(v, c2)), ADAM_EPS));
        out[l] = cft_sub(in[l], cft_mul_s(upd, OUTER_LR));
        out[NP + l] = m;
        out[2 * NP + l] = v;
    }
}

/* (params[6], m[6], v[6], c1, c2, xs, ys, xq, yq) -> (params, m, v, loss),
 * with c1 = 1/(1-beta1^t), c2 = 1/(1-beta2^t) the bias corrections (inputs,
 * not constants, so the traced step is reused at every t). env: the
 * value_and_grad of an objective over (params[6], xs, ys, xq, yq). */
static inline cft_status adam_step(void *env, int nin, cft_array *const *in, int nout,
                                   cft_array **out) {
    (void)nin, (void)nout;
    cft_array *a[NP + 4], *vg[1 + NP];
    memcpy(a, in, sizeof(cft_array *) * NP);
    memcpy(a + NP, in + 3 * NP + 2, sizeof(cft_array *) * 4);
    cft_status st = cft_fn_call(env, a, vg);
    if (st != CFT_OK)
        return st;
    adam_update(in, vg + 1, out);
    out[3 * NP] = vg[0];
    return CFT_OK;
}

#endif
