/* bench/dist/ddp.c (mpirun -np 2, one thread per rank): a DDP step of the
 * per-sample-gradient example's MLP (64-128-128-10, mean cross-entropy)
 * against the same step on one rank with the per-rank batch and no
 * communication, in the same run; also the all_reduce of the gradients
 * alone, and how much of it the DDP step hides:
 *   hidden = 1 - (ddp - local) / all_reduce.
 * JSON lines; ratio_to_baseline = DDP step / local step (medians). */
#include <stdio.h>
#include <string.h>

#include "../../examples/mlp.h"
#include "../bench.h"
#include "cft/dist.h"

static cft_ddp *ddp;
static cft_fn *vg;
static cft_tree *params;
static cft_array *batch[2], *vg_in[MLP_NPARAMS + 2], *packed;
static cft_dist_group *world;

static void ddp_step(void *arg) {
    (void)arg;
    cft_tree *g;
    cft_ddp_step(ddp, params, batch, NULL, NULL, &g);
}
static void local_step(void *arg) {
    (void)arg;
    cft_array *out[MLP_NPARAMS + 1];
    cft_fn_call(vg, vg_in, out);
}
static void allreduce_only(void *arg) {
    (void)arg;
    cft_dist_all_reduce(world, packed, CFT_DIST_MEAN);
}

static double run(work_fn f) { /* fixed counts: every rank calls the collectives alike */
    double t[30], med, mn;
    for (int k = 0; k < 10; k++)
        f(NULL);
    for (int k = 0; k < 30; k++) {
        double t0 = now_ms();
        f(NULL);
        t[k] = now_ms() - t0;
    }
    bench_stats(t, 30, &med, &mn);
    return med;
}

int main(int argc, char **argv) {
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK)
        return 1;
    world = cft_dist_world();
    int rank = cft_dist_rank(world), p = cft_dist_size(world);
    cft_set_num_threads(1);
    cft_array *w[MLP_NPARAMS];
    mlp_init(1, w);
    params = cft_tree_from(mlp_names, w, MLP_NPARAMS);
    cft_fn *loss = cft_tree_fn_new(mlp_tree_loss, NULL, params, 2, 1);
    int argn[MLP_NPARAMS];
    for (int i = 0; i < MLP_NPARAMS; i++)
        argn[i] = i;
    vg = cft_jit(cft_value_and_grad(loss, argn, MLP_NPARAMS, false));
    int64_t sizes[2] = {64, 256};
    for (int s = 0; s < 2; s++) {
        int64_t B = sizes[s];
        batch[0] = cft_random_uniform(cft_random_key(10 + (uint64_t)rank), CFT_F32,
                                      (int64_t[]){B, 64}, 2, 0, 1);
        batch[1] = cft_astype(
            cft_mul_s(cft_random_uniform(cft_random_key(20), CFT_F32, (int64_t[]){B}, 1, 0, 1),
                      9.99),
            CFT_I32);
        memcpy(vg_in, w, sizeof w);
        vg_in[MLP_NPARAMS] = batch[0], vg_in[MLP_NPARAMS + 1] = batch[1];
        /* buckets of 32 KB (the model has 100 KB of gradients): several, so
         * the first all_reduces start while the backward pass goes on */
        ddp = cft_ddp_new(world, loss, params, &(cft_ddp_options){.bucket_mb = 1.0 / 32});
        int64_t n = 0;
        for (int i = 0; i < MLP_NPARAMS; i++)
            n += cft_array_size(w[i]);
        packed = cft_full(1, CFT_F32, (int64_t[]){n}, 1);
        packed = cft_add_s(packed, rank);
        double tl = run(local_step), td = run(ddp_step), ta = run(allreduce_only);
        double hidden = ta > 0 ? 1 - (td - tl) / ta : 0;
        if (rank == 0)
            printf("{\"bench\": \"ddp\", \"config\": {\"model\": \"mlp 64-128-128-10\", "
                   "\"batch_per_rank\": %lld, \"ranks\": %d, \"grad_bytes\": %lld}, \"method\": "
                   "\"cft_ddp_step\", \"median_ms\": %.3f, \"threads\": 1, \"baseline\": \"the "
                   "same step on one rank, no communication\", \"baseline_median_ms\": %.3f, "
                   "\"ratio_to_baseline\": %.3f, \"all_reduce_ms\": %.3f, "
                   "\"fraction_hidden\": %.2f}\n",
                   (long long)B, p, (long long)n * 4, td, tl, td / tl, ta, hidden);
    }
    cft_dist_finalize();
    return 0;
}
