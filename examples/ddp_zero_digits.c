/* ddp_zero_digits.c: data-parallel training of the digits MLP the way a
 * new user would set it up, twice from the same start: DDP with a jitted
 * loss and the jitted, donated optimizer step (cft_optim_step) on every
 * rank; then DDP with ZeRO stage 1 (each rank keeps the Adam state of the
 * parameters it owns and updates them; the new parameters are broadcast).
 * Both see the same batches, so they end with the same parameters (to
 * rounding). Prints the loss and test accuracy per epoch, the state each
 * rank holds, and the step times.
 *
 *     mpirun -np 2 build/examples/ddp_zero_digits [--epochs N] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cft/dist.h"
#include "mlp.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double accuracy(const cft_tree *t, const digits *d, int from, int to) {
    cft_array *p[MLP_NPARAMS];
    cft_tree_flatten(t, p);
    cft_array *x = cft_from_f32(d->x + (size_t)from * 64, (int64_t[]){to - from, 64}, 2);
    return mlp_accuracy(mlp_logits(p, x), cft_from_i32(d->y + from, (int64_t[]){to - from}, 1));
}

static cft_array *copy_leaf(void *env, const char *name, cft_array *x) {
    (void)env, (void)name;
    return cft_add_s(x, 0);
}

static int64_t tree_elems(const cft_tree *t) {
    int64_t n = 0;
    for (int i = 0; i < cft_tree_size(t); i++)
        n += cft_array_size(cft_tree_at(t, i));
    return n;
}

int main(int argc, char **argv) {
    //! [setup]
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK) /* first: MPI, the world group */
        return 1;
    cft_dist_group *world = cft_dist_world();
    int rank = cft_dist_rank(world), p = cft_dist_size(world);
    //! [setup]
    int epochs = 4;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--epochs"))
            epochs = atoi(argv[i + 1]) > 1 ? atoi(argv[i + 1]) : 2; /* the first is not timed */
    digits d;
    if (digits_load(&d))
        return 1;
    digits_shuffle(&d, 7);
    int ntest = d.n / 5, ntrain = d.n - ntest, batch = 64, local = batch / p;
    /* digits_shuffle permutes in place: both runs start from this order */
    float *x0 = malloc(sizeof(float) * 64 * (size_t)ntrain);
    int32_t *y0 = malloc(sizeof(int32_t) * (size_t)ntrain);
    memcpy(x0, d.x, sizeof(float) * 64 * (size_t)ntrain);
    memcpy(y0, d.y, sizeof(int32_t) * (size_t)ntrain);
    cft_array *w[MLP_NPARAMS];
    mlp_init(100 + (uint64_t)rank, w); /* different on each rank: the broadcast fixes it */

    //! [ddp]
    cft_tree *start = cft_tree_from(mlp_names, w, MLP_NPARAMS);
    cft_fn *loss = cft_jit(cft_tree_fn_new(mlp_tree_loss, NULL, start, 2, 1)); /* jitted loss */
    cft_ddp *ddp = cft_ddp_new(world, loss, start, NULL);
    start = cft_ddp_broadcast_params(ddp, start); /* rank 0's parameters everywhere */
    cft_optim adam = cft_adam(0.003);
    //! [ddp]

    cft_tree *final[2];
    double secs[2];
    for (int run = 0; run < 2; run++) {
        cft_tree *params = start, *state = NULL;
        cft_optim_step *update = NULL;
        cft_zero *zero = NULL;
        if (run == 0) {
            //! [optim_step]
            /* a fresh copy: a donated step gives up the arrays passed to it */
            params = cft_tree_map(start, copy_leaf, NULL);
            state = cft_optim_init(&adam, params);
            update =
                cft_optim_step_new(&adam, params, CFT_OPTIM_DONATE_PARAMS | CFT_OPTIM_DONATE_STATE);
            //! [optim_step]
        } else {
            //! [zero]
            zero = cft_zero_new(world, &adam, params); /* Adam's state sharded over ranks */
            //! [zero]
        }
        memcpy(d.x, x0, sizeof(float) * 64 * (size_t)ntrain);
        memcpy(d.y, y0, sizeof(int32_t) * (size_t)ntrain);
        double t0 = 0, lsum = 0;
        long step = 0, nb = 0, timed = 0;
        for (int ep = 0; ep < epochs; ep++) {
            if (ep == 1) /* timed from the second epoch: the first compiles */
                t0 = now_s(), timed = step;
            digits train = {ntrain, d.x, d.y};
            digits_shuffle(&train, 100 + (uint64_t)ep);
            lsum = 0, nb = 0;
            for (int s = 0; s + batch <= ntrain; s += batch, step++, nb++) {
                size_t row = (size_t)s + (size_t)rank * local; /* this rank's share */
                cft_array *b[2] = {cft_from_f32(train.x + row * 64, (int64_t[]){local, 64}, 2),
                                   cft_from_i32(train.y + row, (int64_t[]){local}, 1)};
                cft_array *l = NULL, *t = cft_scalar((double)step + 1, CFT_F32);
                cft_tree *g = NULL;
                //! [step]
                cft_status st = cft_ddp_step(ddp, params, b, NULL, &l, &g); /* averaged grads */
                if (st == CFT_OK && update)
                    st = cft_optim_step_apply(update, g, state, params, t, NULL, &params, &state);
                else if (st == CFT_OK)
                    st = cft_zero_step(zero, g, params, t, NULL, &params);
                //! [step]
                if (st != CFT_OK) {
                    fprintf(stderr, "rank %d: %s\n", rank, cft_last_error_message());
                    return 1;
                }
                lsum += cft_item(l);
            }
            if (rank == 0)
                printf("%s epoch %d: loss %.4f, test accuracy %.3f\n", run ? "ZeRO" : "DDP ",
                       ep + 1, lsum / (double)nb, accuracy(params, &d, ntrain, d.n));
        }
        secs[run] = (now_s() - t0) / (double)(step - timed);
        final[run] = params;
        if (zero) {
            int64_t mine = tree_elems(cft_zero_local_state(zero));
            printf("rank %d holds %lld of Adam's %lld state values under ZeRO\n", rank,
                   (long long)mine, (long long)(2 * tree_elems(params)));
        }
    }
    double diff = 0;
    for (int i = 0; i < MLP_NPARAMS; i++)
        diff = fmax(diff, cft_item(cft_max(
                              cft_abs(cft_sub(cft_tree_at(final[0], i), cft_tree_at(final[1], i))),
                              NULL, 0, false)));
    if (rank == 0)
        printf("DDP + jitted step %.2f ms per step, DDP + ZeRO %.2f ms; largest parameter "
               "difference %.1e\n",
               1e3 * secs[0], 1e3 * secs[1], diff);
    cft_dist_finalize();
    return diff < 1e-3 ? 0 : 1;
}
