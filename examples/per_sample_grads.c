/* per_sample_grads.c: DP-SGD on the sklearn digits data set with per-sample
 * gradients from cft_vmap(cft_grad(loss)).
 *
 * The model is an MLP 64 -> 128 -> 128 -> 10 (examples/mlp.h). Each step
 * takes the gradient of every example separately, clips each to L2 norm C,
 * sums them, adds Gaussian noise of standard deviation sigma*C, divides by
 * the expected batch size and takes an SGD step (Abadi et al. 2016). The
 * whole step is one function compiled by cft_jit with the batch size
 * symbolic: traced once, then replayed for batches of any size. Before
 * training the program checks the per-sample gradients against a loop of
 * single-example gradients.
 *
 * Batches are drawn by Poisson sampling (cft_dp_poisson_sample: each
 * example independently with probability q = B/N, so sizes vary around B),
 * and epsilon comes from the library's RDP accountant (cft_dp_epsilon), so
 * the printed (epsilon, delta) is a guarantee for the batches actually
 * used. --shuffle cuts a shuffled training set into fixed batches of B
 * instead, as most DP-SGD code does; the same number is then the customary
 * approximation, not a proof, and the program says so.
 *
 *   build/examples/per_sample_grads [--quick] [--epochs N] [--shuffle]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

#define BATCH 64
static const double CLIP = 1.0, SIGMA = 1.0, LR = 0.5, DELTA = 1e-5;

static cft_fn *per_sample_grad_fn(void) {
    cft_fn *loss = cft_fn_new(mlp_loss, NULL, 8, 1);
    cft_fn *grad = cft_grad(loss, (int[]){0, 1, 2, 3, 4, 5}, MLP_NPARAMS);
    int in_axes[8] = {CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED,
                      0,
                      0};
    return cft_vmap(grad, in_axes, NULL);
}

/* (params[6], x [B,64], y [B], key) -> (new params[6], mean loss); the
 * noisy sum is divided by the expected batch size BATCH (Poisson sampling's
 * unbiased mean; equal to B for fixed batches) */
static cft_status dp_step(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    cft_fn *psg = env;
    (void)nin, (void)nout;
    cft_array *g[MLP_NPARAMS];
    cft_status st = cft_fn_call(psg, in, g); /* each [B, ...param shape] */
    if (st != CFT_OK)
        return st;
    int64_t B = cft_array_dim(in[6], 0);
    /* per-example L2 norm over all parameters */
    cft_array *sq = cft_zeros(CFT_F32, &B, 1);
    for (int l = 0; l < MLP_NPARAMS; l++) {
        int nd = cft_array_ndim(g[l]), axes[2] = {1, 2};
        sq = cft_add(sq, cft_sum(cft_square(g[l]), axes, nd - 1, false));
    }
    cft_array *scale = cft_minimum(
        cft_scalar(1, CFT_F32), cft_div(cft_scalar(CLIP, CFT_F32), cft_add_s(cft_sqrt(sq), 1e-6)));
    cft_array *keys = cft_random_split(in[8], MLP_NPARAMS);
    for (int l = 0; l < MLP_NPARAMS; l++) {
        int nd = cft_array_ndim(g[l]);
        int64_t bshape[3] = {B, 1, 1};
        cft_array *clipped = cft_mul(g[l], cft_reshape(scale, bshape, nd));
        cft_array *sum = cft_sum(clipped, (int[]){0}, 1, false);
        cft_array *noise =
            cft_mul_s(cft_random_normal(cft_index(keys, l), CFT_F32, cft_array_shape(in[l]),
                                        cft_array_ndim(in[l])),
                      SIGMA * CLIP);
        cft_array *avg = cft_mul_s(cft_add(sum, noise), 1.0 / (double)BATCH);
        out[l] = cft_sub(in[l], cft_mul_s(avg, LR));
    }
    cft_array *loss;
    mlp_loss(NULL, 8, in, 1, &loss);
    out[MLP_NPARAMS] = loss;
    return CFT_OK;
}

static double accuracy(cft_array *const *p, const digits *d, int from, int to) {
    int64_t shape[2] = {to - from, 64};
    cft_array *logits = mlp_logits(p, cft_from_f32(d->x + from * 64, shape, 2));
    cft_array *pred = cft_argmax(logits, -1, false);
    int32_t *pv = malloc(sizeof(int32_t) * (size_t)(to - from));
    if (cft_copy_to(pred, CFT_I32, pv) != CFT_OK)
        return -1;
    int ok = 0;
    for (int i = 0; i < to - from; i++)
        ok += pv[i] == d->y[from + i];
    free(pv);
    return (double)ok / (to - from);
}

/* per-sample gradients against a loop of single-example gradients */
static int check_per_sample(cft_fn *psg, cft_array *const *params, const digits *d) {
    cft_fn *grad =
        cft_grad(cft_fn_new(mlp_loss, NULL, 8, 1), (int[]){0, 1, 2, 3, 4, 5}, MLP_NPARAMS);
    const int n = 16;
    cft_array *in[8], *g[MLP_NPARAMS], *gi[MLP_NPARAMS];
    memcpy(in, params, sizeof(cft_array *) * MLP_NPARAMS);
    in[6] = cft_from_f32(d->x, (int64_t[]){n, 64}, 2);
    in[7] = cft_from_i32(d->y, (int64_t[]){n}, 1);
    if (cft_fn_call(psg, in, g) != CFT_OK) {
        fprintf(stderr, "per-sample gradients failed: %s\n", cft_last_error_message());
        return -1;
    }
    double worst = 0;
    for (int i = 0; i < n; i++) {
        in[6] = cft_from_f32(d->x + i * 64, (int64_t[]){64}, 1);
        in[7] = cft_from_i32(d->y + i, NULL, 0);
        if (cft_fn_call(grad, in, gi) != CFT_OK)
            return -1;
        for (int l = 0; l < MLP_NPARAMS; l++) {
            cft_array *a = cft_index(g[l], i);
            double scale = cft_item(cft_max(cft_abs(gi[l]), NULL, 0, false));
            double diff = cft_max_abs_diff(a, gi[l]) / (scale > 1e-3 ? scale : 1e-3);
            if (!(diff <= worst))
                worst = diff;
        }
    }
    /* f32: both sides do the same float work in different orders; relative
     * differences of a few 1e-7 are rounding, 1e-5 leaves a wide margin */
    printf("per-sample gradients vs loop of %d single-example gradients: max rel diff %.2e %s\n", n,
           worst, worst < 1e-5 ? "(ok)" : "(MISMATCH)");
    return worst < 1e-5 ? 0 : -1;
}

/* the batch of step `step`: Poisson-sampled (indices drawn with rate q), or
 * the step-th fixed slice of the (reshuffled) training set */
static void batch_of(const digits *train, bool shuffle, cft_array *key, int step, int per_epoch,
                     cft_array **x, cft_array **y) {
    cft_array *xs = cft_from_f32(train->x, (int64_t[]){train->n, 64}, 2),
              *ys = cft_from_i32(train->y, (int64_t[]){train->n}, 1);
    if (shuffle) {
        int s = step % per_epoch;
        *x = cft_from_f32(train->x + s * BATCH * 64, (int64_t[]){BATCH, 64}, 2);
        *y = cft_from_i32(train->y + s * BATCH, (int64_t[]){BATCH}, 1);
        return;
    }
    cft_array *idx =
        cft_dp_poisson_sample(cft_random_fold_in(key, step), train->n, (double)BATCH / train->n);
    *x = cft_take(xs, idx, 0);
    *y = cft_take(ys, idx, 0);
}

int main(int argc, char **argv) {
    int epochs = 15;
    bool quick = false, shuffle = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true, epochs = 3;
        if (!strcmp(argv[i], "--shuffle"))
            shuffle = true;
        if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
            epochs = atoi(argv[++i]);
    }
    cft_init();
    digits d;
    if (digits_load(&d))
        return 1;
    digits_shuffle(&d, 7);
    int ntest = d.n / 5, ntrain = d.n - ntest;
    digits train = {ntrain, d.x, d.y};
    double q = (double)BATCH / ntrain;
    printf("digits: %d train, %d test examples; MLP 64-128-128-10; DP-SGD %s, clip C=%.1f, "
           "noise multiplier sigma=%.1f, lr %.2f\n",
           ntrain, ntest,
           shuffle ? "on shuffled fixed batches of 64" : "on Poisson-sampled batches (q = 64/N)",
           CLIP, SIGMA, LR);

    cft_array *params[MLP_NPARAMS + 1];
    mlp_init(42, params);
    cft_fn *psg = per_sample_grad_fn();
    if (check_per_sample(psg, params, &train))
        return 1;

    cft_fn *step = cft_jit(cft_fn_new(dp_step, psg, MLP_NPARAMS + 3, MLP_NPARAMS + 1));
    cft_array *key = cft_random_key(2024), *sample_key = cft_random_key(77);
    int steps_per_epoch = ntrain / BATCH, steps = 0;
    double acc = 0, eps = 0;
    for (int e = 0; e < epochs; e++) {
        if (shuffle)
            digits_shuffle(&train, 100 + (uint64_t)e);
        double loss_sum = 0;
        int64_t seen = 0;
        for (int s = 0; s < steps_per_epoch; s++, steps++) {
            cft_array *in[MLP_NPARAMS + 3], *out[MLP_NPARAMS + 1];
            memcpy(in, params, sizeof(cft_array *) * MLP_NPARAMS);
            batch_of(&train, shuffle, sample_key, steps, steps_per_epoch, &in[6], &in[7]);
            in[8] = cft_random_fold_in(key, steps);
            if (cft_fn_call(step, in, out) != CFT_OK) {
                fprintf(stderr, "step failed: %s\n", cft_last_error_message());
                return 1;
            }
            memcpy(params, out, sizeof(cft_array *) * MLP_NPARAMS);
            int64_t b = cft_array_dim(in[6], 0);
            seen += b;
            if (b > 0)
                loss_sum += cft_item(out[MLP_NPARAMS]) * (double)b;
        }
        acc = accuracy(params, &d, ntrain, d.n);
        if (cft_dp_epsilon(q, SIGMA, steps, DELTA, &eps, NULL) != CFT_OK) {
            fprintf(stderr, "accountant: %s\n", cft_last_error_message());
            return 1;
        }
        printf("epoch %2d  train loss %.4f  test accuracy %.3f  epsilon %.2f at delta=%g\n", e + 1,
               loss_sum / (double)(seen ? seen : 1), acc, eps, DELTA);
    }
    printf("(epsilon = %.2f, delta = %g) after %d steps at q = %d/%d, sigma %.1f (RDP accountant): "
           "%s\n",
           eps, DELTA, steps, BATCH, ntrain, SIGMA,
           shuffle ? "the customary approximation for shuffled fixed batches, not a guarantee"
                   : "a guarantee for the Poisson-sampled batches used");
    double floor = quick ? 0.6 : 0.85;
    if (acc < floor) {
        fprintf(stderr, "test accuracy %.3f is below the expected floor %.2f\n", acc, floor);
        return 1;
    }
    return 0;
}
