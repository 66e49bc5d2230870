/* ddp_ensemble_digits.c: an ensemble of K = 16 MLPs (mlp.h) split across
 * MPI ranks: rank r trains members r*K/p .. (r+1)*K/p - 1 at once with vmap
 * over their stacked parameters (each member its own data order), then
 * every rank's test logits are gathered (cft_dist_all_gather) and averaged
 * into the ensemble's prediction. Rank 0 prints each member's and the
 * ensemble's test accuracy; fails if the ensemble is below its best member
 * minus one point.
 *
 *     mpirun -np 2 build/examples/ddp_ensemble_digits */
#include <stdio.h>
#include <string.h>

#include "cft/dist.h"
#include "mlp.h"

enum { K = 16, BATCH = 32, EPOCHS = 6 };
static const double LR = 0.1;

/* (params[6], x [B,64], y [B]) -> params after one SGD step */
static cft_status sgd_step(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *r[1 + MLP_NPARAMS];
    cft_status st = cft_fn_call(env, in, r);
    for (int l = 0; l < MLP_NPARAMS && st == CFT_OK; l++)
        out[l] = cft_sub(in[l], cft_mul_s(r[1 + l], LR));
    return st;
}

/* (params[6], x [N,64]) -> logits [N,10] */
static cft_status logits_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = mlp_logits(in, in[MLP_NPARAMS]);
    return CFT_OK;
}

int main(int argc, char **argv) {
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK)
        return 1;
    cft_dist_group *world = cft_dist_world();
    int rank = cft_dist_rank(world), p = cft_dist_size(world);
    if (K % p) {
        if (rank == 0)
            fprintf(stderr, "%d members do not split over %d ranks\n", K, p);
        cft_dist_finalize();
        return 2;
    }
    cft_set_num_threads(1);
    digits d;
    if (digits_load(&d))
        return 1;
    digits_shuffle(&d, 7);
    int ntest = d.n / 5, ntrain = d.n - ntest, mine = K / p, first = rank * mine;

    /* this rank's members, stacked: params[l] is [mine, ...] */
    cft_array *stacked[MLP_NPARAMS], *one[MLP_NPARAMS], *layer[K];
    for (int l = 0; l < MLP_NPARAMS; l++) {
        for (int k = 0; k < mine; k++) {
            mlp_init(1000 + (uint64_t)(first + k), one);
            layer[k] = one[l];
        }
        stacked[l] = cft_stack(layer, mine, 0);
    }
    cft_fn *vg = cft_value_and_grad(cft_fn_new(mlp_loss, NULL, MLP_NPARAMS + 2, 1),
                                    (int[]){0, 1, 2, 3, 4, 5}, MLP_NPARAMS, false);
    cft_fn *step =
        cft_jit(cft_vmap(cft_fn_new(sgd_step, vg, MLP_NPARAMS + 2, MLP_NPARAMS), NULL, NULL));

    float *xb = malloc(sizeof(float) * (size_t)mine * BATCH * 64);
    int32_t *yb = malloc(sizeof(int32_t) * (size_t)mine * BATCH);
    for (int ep = 0; ep < EPOCHS; ep++) {
        digits orders[K];
        for (int k = 0; k < mine; k++) { /* each member its own order of the data */
            orders[k] = (digits){ntrain, malloc(sizeof(float) * 64 * (size_t)ntrain),
                                 malloc(sizeof(int32_t) * (size_t)ntrain)};
            memcpy(orders[k].x, d.x, sizeof(float) * 64 * (size_t)ntrain);
            memcpy(orders[k].y, d.y, sizeof(int32_t) * (size_t)ntrain);
            digits_shuffle(&orders[k], (uint64_t)(1 + ep * K + first + k));
        }
        for (int s = 0; s + BATCH <= ntrain; s += BATCH) {
            for (int k = 0; k < mine; k++) {
                memcpy(xb + (size_t)k * BATCH * 64, orders[k].x + (size_t)s * 64,
                       sizeof(float) * BATCH * 64);
                memcpy(yb + (size_t)k * BATCH, orders[k].y + s, sizeof(int32_t) * BATCH);
            }
            cft_array *in[MLP_NPARAMS + 2];
            memcpy(in, stacked, sizeof stacked);
            in[MLP_NPARAMS] = cft_from_f32(xb, (int64_t[]){mine, BATCH, 64}, 3);
            in[MLP_NPARAMS + 1] = cft_from_i32(yb, (int64_t[]){mine, BATCH}, 2);
            if (cft_fn_call(step, in, stacked) != CFT_OK) {
                fprintf(stderr, "rank %d: %s\n", rank, cft_last_error_message());
                return 1;
            }
        }
        for (int k = 0; k < mine; k++)
            free(orders[k].x), free(orders[k].y);
    }

    /* every member's test logits, gathered from all ranks: [K, ntest, 10] */
    cft_array *xt = cft_from_f32(d.x + (size_t)ntrain * 64, (int64_t[]){ntest, 64}, 2);
    cft_array *yt = cft_from_i32(d.y + ntrain, (int64_t[]){ntest}, 1);
    int in_axes[MLP_NPARAMS + 1] = {0, 0, 0, 0, 0, 0, CFT_NOT_BATCHED};
    cft_fn *all_logits = cft_vmap(cft_fn_new(logits_fn, NULL, MLP_NPARAMS + 1, 1), in_axes, NULL);
    cft_array *lin[MLP_NPARAMS + 1];
    memcpy(lin, stacked, sizeof stacked);
    lin[MLP_NPARAMS] = xt;
    cft_array *logits = cft_dist_all_gather(world, cft_fn_call1(all_logits, lin), false);
    double best = 0;
    for (int k = 0; k < K; k++) {
        double a = mlp_accuracy(cft_index(logits, k), yt);
        best = a > best ? a : best;
        if (rank == 0)
            printf("member %2d (rank %d)  test accuracy %.3f\n", k, k / mine, a);
    }
    double ens = mlp_accuracy(cft_mean(cft_softmax(logits, -1), (int[]){0}, 1, false), yt);
    if (rank == 0)
        printf("ensemble of %d members on %d ranks: test accuracy %.3f (best member %.3f)\n", K, p,
               ens, best);
    cft_dist_finalize();
    return ens >= best - 0.01 ? 0 : 1;
}
