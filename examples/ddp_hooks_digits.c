/* ddp_hooks_digits.c: the MLP of mlp.h trained on digits with DDP three
 * times, from the same start: gradients averaged by plain all_reduce, by
 * fp16 compression, and by PowerSGD (rank 2, after 20 plain steps). Prints
 * the test accuracy of each and the bytes PowerSGD sent against plain
 * all_reduce; fails if a compressed run ends more than 1 point of accuracy
 * below the plain one.
 *
 *     mpirun -np 2 build/examples/ddp_hooks_digits */
#include <stdio.h>
#include <string.h>

#include "cft/dist.h"
#include "mlp.h"

static double accuracy(const cft_tree *t, const digits *d, int from, int to) {
    cft_array *p[MLP_NPARAMS];
    cft_tree_flatten(t, p);
    cft_array *x = cft_from_f32(d->x + (size_t)from * 64, (int64_t[]){to - from, 64}, 2);
    return mlp_accuracy(mlp_logits(p, x), cft_from_i32(d->y + from, (int64_t[]){to - from}, 1));
}

int main(int argc, char **argv) {
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK)
        return 1;
    cft_dist_group *world = cft_dist_world();
    int rank = cft_dist_rank(world), p = cft_dist_size(world);
    cft_set_num_threads(1);
    digits d;
    if (digits_load(&d))
        return 1;
    digits_shuffle(&d, 7);
    int ntest = d.n / 5, ntrain = d.n - ntest, batch = 64, local = batch / p, epochs = 8;
    cft_array *w[MLP_NPARAMS];
    mlp_init(3, w);
    cft_tree *start = cft_tree_from(mlp_names, w, MLP_NPARAMS);
    cft_fn *loss = cft_tree_fn_new(mlp_tree_loss, NULL, start, 2, 1);
    cft_powersgd *ps = cft_powersgd_new(2, 20, 7);
    const char *label[3] = {"all_reduce", "fp16", "PowerSGD r=2"};
    cft_ddp_options opts[3] = {
        {0}, {.hook = cft_ddp_hook_fp16}, {.hook = cft_ddp_hook_powersgd, .hook_state = ps}};
    double acc[3];
    for (int h = 0; h < 3; h++) {
        cft_ddp *ddp = cft_ddp_new(world, loss, start, &opts[h]);
        cft_tree *params = cft_ddp_broadcast_params(ddp, start);
        cft_optim adam = cft_adam(0.003);
        cft_tree *state = cft_optim_init(&adam, params);
        long step = 0;
        for (int ep = 0; ep < epochs; ep++) {
            digits train = {ntrain, d.x, d.y};
            digits_shuffle(&train, 100 + (uint64_t)ep);
            for (int s = 0; s + batch <= ntrain; s += batch, step++) {
                size_t row = (size_t)s + (size_t)rank * local;
                cft_array *b[2] = {cft_from_f32(train.x + row * 64, (int64_t[]){local, 64}, 2),
                                   cft_from_i32(train.y + row, (int64_t[]){local}, 1)};
                cft_tree *g = NULL;
                if (cft_ddp_step(ddp, params, b, NULL, NULL, &g) != CFT_OK ||
                    cft_optim_update(&adam, g, state, params, cft_scalar((double)step + 1, CFT_F32),
                                     NULL, &params, &state) != CFT_OK) {
                    fprintf(stderr, "rank %d: %s\n", rank, cft_last_error_message());
                    return 1;
                }
            }
        }
        acc[h] = accuracy(params, &d, ntrain, d.n);
        if (rank == 0)
            printf("%-14s test accuracy %.3f  (%.0f gradient bytes to collectives)\n", label[h],
                   acc[h], cft_ddp_bytes_sent(ddp));
    }
    double plain, sent = cft_powersgd_bytes(ps, &plain);
    if (rank == 0)
        printf("PowerSGD sent %.0f bytes where all_reduce would send %.0f (%.2fx)\n", sent, plain,
               sent / plain);
    cft_dist_finalize();
    bool ok = acc[1] >= acc[0] - 0.01 && acc[2] >= acc[0] - 0.01 && acc[0] > 0.9;
    if (rank == 0 && !ok)
        fprintf(stderr, "a compressed run is more than 1 point below all_reduce\n");
    return ok ? 0 : 1;
}
