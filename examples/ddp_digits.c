/* ddp_digits.c: DP-SGD on the digits data across MPI ranks.
 *
 *     mpirun -np 2 build/examples/ddp_digits [--epochs N] [--shuffle]   (tutorial: DDP and ZeRO)
 *
 * Every rank draws the same global batch by Poisson sampling
 * (cft_dp_poisson_sample with a key shared by all ranks: each example with
 * probability q = B/N) and takes its share of it (with --shuffle: fixed
 * batches of B cut from a shuffled training set). Each rank
 * computes its examples' gradients with vmap(grad) (the MLP of mlp.h),
 * clips each to norm C and sums them; the sums are added over the ranks
 * with one all_reduce per step. Gaussian noise of std sigma*C is what the
 * guarantee needs on the global sum: each rank adds an independent share of
 * std sigma*C/sqrt(p) (their sum has the full variance), so the privacy is
 * that of one process with batch B: the library's RDP accountant
 * (cft_dp_epsilon) at q = B/N, a guarantee for Poisson sampling and the
 * customary approximation for shuffled batches (the output says which).
 * Parameters start from rank 0's and every rank applies the same Adam
 * update (one jitted call, cft_optim_step) to the same averaged gradient,
 * so they stay equal (checked at the end). Prints the loss, the test
 * accuracy and epsilon per epoch. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cft/dist.h"
#include "mlp.h"

static const double DELTA = 1e-5;

typedef struct {
    cft_fn *psg; /* per-sample grads: vmap(grad(mlp_loss)) over (x, y) */
    double clip;
} env_t;

/* (params..., x [b,64], y [b]) -> clipped per-example gradients, summed */
static cft_status clipped_sum(void *envp, int nin, cft_array *const *in, int nout,
                              cft_array **out) {
    (void)nin, (void)nout;
    env_t *e = envp;
    cft_array *g[MLP_NPARAMS];
    cft_status st = cft_fn_call(e->psg, in, g);
    if (st != CFT_OK)
        return st;
    cft_array *sq = NULL;
    for (int l = 0; l < MLP_NPARAMS; l++) {
        int nd = cft_array_ndim(g[l]), axes[CFT_MAX_NDIM];
        for (int i = 1; i < nd; i++)
            axes[i - 1] = i;
        cft_array *s = cft_sum(cft_square(g[l]), axes, nd - 1, false);
        sq = sq ? cft_add(sq, s) : s;
    }
    cft_array *scale = cft_minimum(cft_scalar(1, CFT_F32), cft_div(cft_scalar(e->clip, CFT_F32),
                                                                   cft_add_s(cft_sqrt(sq), 1e-6)));
    for (int l = 0; l < MLP_NPARAMS; l++) {
        int nd = cft_array_ndim(g[l]);
        int64_t bs[CFT_MAX_NDIM] = {cft_array_dim(g[l], 0)};
        for (int i = 1; i < nd; i++)
            bs[i] = 1;
        out[l] = cft_sum(cft_mul(g[l], cft_reshape(scale, bs, nd)), (int[]){0}, 1, false);
    }
    return CFT_OK;
}

static double accuracy(cft_array *const *p, const digits *d, int from, int to) {
    cft_array *x = cft_from_f32(d->x + (size_t)from * 64, (int64_t[]){to - from, 64}, 2);
    return mlp_accuracy(mlp_logits(p, x), cft_from_i32(d->y + from, (int64_t[]){to - from}, 1));
}

int main(int argc, char **argv) {
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK) {
        fprintf(stderr, "%s\n", cft_last_error_message());
        return 1;
    }
    cft_dist_group *world = cft_dist_world();
    int rank = cft_dist_rank(world), p = cft_dist_size(world);
    int epochs = 15, batch = 128;
    double sigma = 1.0, clip = 1.0, lr = 0.01;
    bool shuffle = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
            epochs = atoi(argv[++i]);
        if (!strcmp(argv[i], "--shuffle"))
            shuffle = true;
    }
    if (batch % p) {
        if (rank == 0)
            fprintf(stderr, "the batch of %d does not split over %d ranks\n", batch, p);
        cft_dist_finalize();
        return 2;
    }
    cft_set_num_threads(1);
    digits d;
    if (digits_load(&d))
        return 1;
    digits_shuffle(&d, 7);
    int ntest = d.n / 5, ntrain = d.n - ntest, steps_per_epoch = ntrain / batch, local = batch / p;

    cft_array *params[MLP_NPARAMS];
    mlp_init(100 + (uint64_t)rank, params); /* different per rank: the broadcast fixes it */
    for (int l = 0; l < MLP_NPARAMS; l++)
        params[l] = cft_dist_broadcast(world, params[l], 0);
    cft_tree *pt = cft_tree_from(mlp_names, params, MLP_NPARAMS);
    cft_optim adam = cft_adam(lr);
    cft_tree *state = cft_optim_init(&adam, pt);
    /* the update as one jitted call, writing into the old buffers */
    cft_optim_step *update =
        cft_optim_step_new(&adam, pt, CFT_OPTIM_DONATE_PARAMS | CFT_OPTIM_DONATE_STATE);

    env_t e = {.clip = clip};
    int argnums[MLP_NPARAMS], in_axes[MLP_NPARAMS + 2];
    for (int i = 0; i < MLP_NPARAMS; i++)
        argnums[i] = i, in_axes[i] = CFT_NOT_BATCHED;
    in_axes[MLP_NPARAMS] = in_axes[MLP_NPARAMS + 1] = 0;
    e.psg = cft_vmap(cft_grad(cft_fn_new(mlp_loss, NULL, MLP_NPARAMS + 2, 1), argnums, MLP_NPARAMS),
                     in_axes, NULL);
    cft_fn *step_fn = cft_jit(cft_fn_new(clipped_sum, &e, MLP_NPARAMS + 2, MLP_NPARAMS));

    double q = (double)batch / ntrain;
    const char *holds = shuffle ? "the customary approximation for shuffled fixed batches, not a "
                                  "guarantee"
                                : "a guarantee for the Poisson-sampled batches used";
    cft_array *sample_key = cft_random_key(4048); /* the same on every rank */
    cft_array *xs = cft_from_f32(d.x, (int64_t[]){ntrain, 64}, 2),
              *ys = cft_from_i32(d.y, (int64_t[]){ntrain}, 1);
    if (rank == 0)
        printf("DDP DP-SGD on %d ranks: global batch %d (%d per rank), sigma %.2f, clip %.2f, "
               "q = %.4f, %d epochs\n",
               p, batch, local, sigma, clip, q, epochs);
    cft_array *key = cft_random_fold_in(cft_random_key(2024), rank); /* independent noise */
    long steps = 0;
    double acc = 0;
    for (int ep = 0; ep < epochs; ep++) {
        digits train = {ntrain, d.x, d.y};
        if (shuffle)
            digits_shuffle(&train, 100 + (uint64_t)ep); /* the same order on every rank */
        for (int s = 0; s < steps_per_epoch; s++, steps++) {
            size_t row = (size_t)s * batch + (size_t)rank * local;
            cft_array *in[MLP_NPARAMS + 2], *sums[MLP_NPARAMS];
            cft_tree_flatten(pt, in);
            if (shuffle) {
                in[MLP_NPARAMS] = cft_from_f32(train.x + row * 64, (int64_t[]){local, 64}, 2);
                in[MLP_NPARAMS + 1] = cft_from_i32(train.y + row, (int64_t[]){local}, 1);
            } else { /* the global Poisson sample, then this rank's share of it */
                cft_array *idx =
                    cft_dp_poisson_sample(cft_random_fold_in(sample_key, steps), ntrain, q);
                int64_t m = cft_array_size(idx), lo = m * rank / p, hi = m * (rank + 1) / p;
                idx = cft_slice(idx, (int64_t[]){lo}, (int64_t[]){hi}, NULL);
                in[MLP_NPARAMS] = cft_take(xs, idx, 0);
                in[MLP_NPARAMS + 1] = cft_take(ys, idx, 0);
            }
            if (cft_fn_call(step_fn, in, sums) != CFT_OK) {
                fprintf(stderr, "rank %d: %s\n", rank, cft_last_error_message());
                return 1;
            }
            cft_array *keys = cft_random_split(cft_random_fold_in(key, steps), MLP_NPARAMS);
            cft_dist_work *w[MLP_NPARAMS];
            for (int l = 0; l < MLP_NPARAMS; l++) {
                cft_array *noise = cft_random_normal(
                    cft_index(keys, l), CFT_F32, cft_array_shape(sums[l]), cft_array_ndim(sums[l]));
                w[l] = cft_dist_all_reduce_async(
                    world, cft_add(sums[l], cft_mul_s(noise, sigma * clip / sqrt((double)p))),
                    CFT_DIST_SUM);
            }
            cft_array *g[MLP_NPARAMS];
            for (int l = 0; l < MLP_NPARAMS; l++)
                g[l] = cft_mul_s(cft_dist_wait(w[l]), 1.0 / batch);
            cft_tree *np_ = NULL, *ns = NULL;
            if (cft_optim_step_apply(update, cft_tree_from(mlp_names, g, MLP_NPARAMS), state, pt,
                                     cft_scalar((double)steps + 1, CFT_F32), NULL, &np_,
                                     &ns) != CFT_OK) {
                fprintf(stderr, "rank %d: %s\n", rank, cft_last_error_message());
                return 1;
            }
            pt = np_, state = ns;
        }
        cft_array *cur[MLP_NPARAMS];
        cft_tree_flatten(pt, cur);
        acc = accuracy(cur, &d, ntrain, d.n);
        double eps = 0;
        cft_dp_epsilon(q, sigma, steps, DELTA, &eps, NULL);
        if (rank == 0)
            printf("epoch %2d  test accuracy %.3f  epsilon %.2f\n", ep + 1, acc, eps);
    }
    /* the ranks' parameters agree (the same update everywhere) */
    cft_array *cur[MLP_NPARAMS];
    cft_tree_flatten(pt, cur);
    double diff = 0;
    for (int l = 0; l < MLP_NPARAMS; l++) {
        cft_array *mx = cft_dist_all_reduce(world, cur[l], CFT_DIST_MAX);
        diff = fmax(diff, cft_max_abs_diff(mx, cur[l]));
    }
    double eps = 0;
    cft_dp_epsilon(q, sigma, steps, DELTA, &eps, NULL);
    if (rank == 0)
        printf("final: test accuracy %.3f, (epsilon = %.2f, delta = %g)-DP over %d ranks (%s); "
               "parameters equal on every rank (max diff %.1e)\n",
               acc, eps, DELTA, p, holds, diff);
    cft_dist_finalize();
    return diff == 0 && acc > 0.8 ? 0 : 1;
}
