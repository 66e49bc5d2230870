/* bench/dist/ddp.c (mpirun -np 2, one thread per rank): a DDP step against
 * the same step on one rank with the per-rank batch and no communication,
 * in the same run, for the models of bench/per_sample_grads: the MLP
 * (64-128-128-10) and the CNN (conv 3x3 1->8, relu, linear 288->10 on 8x8
 * images), mean cross-entropy. Also the all_reduce of the gradients alone
 * and how much of it the DDP step hides:
 *   hidden = 1 - (ddp - local) / all_reduce,
 * and PowerSGD's (rank 2) bytes sent against plain all_reduce's. The
 * no-overlap floor is the local step followed by MPI_Allreduce of the same
 * gradient bytes (hot buffers, on this thread): what DDP would cost with no
 * overlap and no library in the way.
 * JSON lines; ratio_to_baseline = DDP step / local step (medians). */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "../../examples/mlp.h"
#include "../bench.h"
#include "cft/dist.h"

static cft_ddp *ddp;
static cft_fn *vg;
static cft_tree *params;
static cft_array *batch[2], *vg_in[8], *packed;
static cft_dist_group *world;

static void ddp_step(void *arg) {
    (void)arg;
    cft_tree *g;
    cft_ddp_step(ddp, params, batch, NULL, NULL, &g);
}
static void local_step(void *arg) {
    (void)arg;
    cft_array *out[8];
    cft_fn_call(vg, vg_in, out);
}
static float *raw_in, *raw_out;
static int raw_n;
static void no_overlap_step(void *arg) {
    local_step(arg);
    MPI_Allreduce(raw_in, raw_out, raw_n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static void allreduce_only(void *arg) {
    (void)arg;
    cft_dist_all_reduce(world, packed, CFT_DIST_MEAN);
}

/* medians of several steps timed in interleaved rounds, so that drift (the
 * clock, the other rank, the heap) falls on all of them alike; fixed counts:
 * every rank calls the collectives alike */
enum { ROUNDS = 200, WARM = 20 };
static void run(int nf, const work_fn *f, double *med) {
    static double t[4][ROUNDS];
    for (int k = 0; k < WARM; k++)
        for (int j = 0; j < nf; j++)
            f[j](NULL);
    for (int k = 0; k < ROUNDS; k++)
        for (int j = 0; j < nf; j++) {
            double t0 = now_ms();
            f[j](NULL);
            t[j][k] = now_ms() - t0;
        }
    for (int j = 0; j < nf; j++) {
        double mn;
        bench_stats(t[j], ROUNDS, &med[j], &mn);
    }
}

/* the CNN as a tree function: (params, x [B,1,8,8], y [B]) -> mean CE */
static const char *const cnn_names[4] = {"conv_w", "conv_b", "fc_w", "fc_b"};
static cft_status cnn_tree_loss(void *env, const cft_tree *t, int nin, cft_array *const *in,
                                int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *p[4];
    cft_tree_flatten(t, p);
    cft_array *h = cft_conv2d(in[0], p[0], NULL, NULL, NULL, 1);
    h = cft_relu(cft_add(h, cft_reshape(p[1], (int64_t[]){8, 1, 1}, 3)));
    h = cft_reshape(h, (int64_t[]){-1, 288}, 2);
    out[0] = cft_mean(cft_cross_entropy(cft_add(cft_matmul(h, p[2]), p[3]), in[1]), NULL, 0, false);
    return CFT_OK;
}
static void cnn_init(cft_array **p) { /* PyTorch's defaults: U(-1/sqrt(fan_in), ..) */
    cft_array *k = cft_random_split(cft_random_key(7), 4);
    double b1 = 1.0 / 3.0, b2 = 1.0 / sqrt(288.0);
    p[0] = cft_random_uniform(cft_index(k, 0), CFT_F32, (int64_t[]){8, 1, 3, 3}, 4, -b1, b1);
    p[1] = cft_random_uniform(cft_index(k, 1), CFT_F32, (int64_t[]){8}, 1, -b1, b1);
    p[2] = cft_random_uniform(cft_index(k, 2), CFT_F32, (int64_t[]){288, 10}, 2, -b2, b2);
    p[3] = cft_random_uniform(cft_index(k, 3), CFT_F32, (int64_t[]){10}, 1, -b2, b2);
}

static void bench_model(const char *model, cft_tree_fn_cb cb, cft_array **w, int np,
                        const char *const *names, const int64_t *xshape, int xnd, int rank, int p) {
    params = cft_tree_from(names, w, np);
    cft_fn *loss = cft_tree_fn_new(cb, NULL, params, 2, 1);
    int argn[8];
    for (int i = 0; i < np; i++)
        argn[i] = i;
    vg = cft_jit(cft_value_and_grad(loss, argn, np, false));
    int64_t n = 0;
    for (int i = 0; i < np; i++)
        n += cft_array_size(w[i]);
    packed = cft_add_s(cft_full(1, CFT_F32, (int64_t[]){n}, 1), rank);
    raw_n = (int)n;
    raw_in = calloc((size_t)n, sizeof(float)), raw_out = calloc((size_t)n, sizeof(float));
    int64_t sizes[3] = {64, 256, 1024}; /* the batch sizes of bench/per_sample_grads */
    double caps[2] = {0, 1.0 / 32};     /* PyTorch's default 25 MiB (one bucket here), and 32 KB */
    for (int s = 0; s < 3; s++)
        for (int cb = 0; cb < 2; cb++) {
            int64_t B = sizes[s], shape[4];
            memcpy(shape, xshape, sizeof(int64_t) * (size_t)xnd);
            shape[0] = B;
            batch[0] =
                cft_random_uniform(cft_random_key(10 + (uint64_t)rank), CFT_F32, shape, xnd, 0, 1);
            batch[1] = cft_astype(
                cft_mul_s(cft_random_uniform(cft_random_key(20), CFT_F32, (int64_t[]){B}, 1, 0, 1),
                          9.99),
                CFT_I32);
            memcpy(vg_in, w, sizeof(cft_array *) * (size_t)np);
            vg_in[np] = batch[0], vg_in[np + 1] = batch[1];
            /* one bucket: the all_reduce after the backward, as a blocking call; 32 KB
             * buckets: the first all_reduces start while the backward goes on */
            ddp = cft_ddp_new(world, loss, params, &(cft_ddp_options){.bucket_mb = caps[cb]});
            double m[4];
            run(4, (work_fn[]){local_step, ddp_step, allreduce_only, no_overlap_step}, m);
            double tl = m[0], td = m[1], ta = m[2], tf = m[3];
            double hidden = ta > 0 ? 1 - (td - tl) / ta : 0;
            if (rank == 0)
                printf("{\"bench\": \"ddp\", \"config\": {\"model\": \"%s\", "
                       "\"batch_per_rank\": %lld, \"ranks\": %d, \"grad_bytes\": %lld, "
                       "\"bucket_mb\": %g, \"buckets\": %d}, \"method\": \"cft_ddp_step\", "
                       "\"median_ms\": %.3f, \"threads\": 1, \"baseline\": \"the same step on "
                       "one rank, no communication\", \"baseline_median_ms\": %.3f, "
                       "\"ratio_to_baseline\": %.3f, \"all_reduce_ms\": %.3f, "
                       "\"fraction_hidden\": %.2f, \"no_overlap_floor_ms\": %.3f, "
                       "\"ratio_to_no_overlap_floor\": %.3f}\n",
                       model, (long long)B, p, (long long)n * 4, caps[cb] ? caps[cb] : 25.0,
                       cft_ddp_num_buckets(ddp), td, tl, td / tl, ta, hidden, tf, td / tf);
        }
    /* PowerSGD (rank 2, from the first step) on the last batch size (1024) */
    cft_powersgd *ps = cft_powersgd_new(2, 0, 1);
    ddp = cft_ddp_new(
        world, loss, params,
        &(cft_ddp_options){.bucket_mb = 1.0 / 32, .hook = cft_ddp_hook_powersgd, .hook_state = ps});
    double m[2];
    run(2, (work_fn[]){local_step, ddp_step}, m);
    double tl = m[0], td = m[1], plain = 0;
    double sent = cft_powersgd_bytes(ps, &plain);
    if (rank == 0)
        printf("{\"bench\": \"ddp\", \"config\": {\"model\": \"%s\", \"batch_per_rank\": %lld, "
               "\"ranks\": %d, \"hook\": \"powersgd rank 2\"}, \"method\": \"cft_ddp_step\", "
               "\"median_ms\": %.3f, \"threads\": 1, \"baseline\": \"the same step on one rank, "
               "no communication\", \"baseline_median_ms\": %.3f, \"ratio_to_baseline\": %.3f, "
               "\"bytes_sent\": %.0f, \"bytes_plain_all_reduce\": %.0f, \"bytes_ratio\": %.3f}\n",
               model, (long long)sizes[2], p, td, tl, td / tl, sent, plain,
               plain > 0 ? sent / plain : 0);
    free(raw_in), free(raw_out);
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
    bench_model("mlp 64-128-128-10", mlp_tree_loss, w, MLP_NPARAMS, mlp_names, (int64_t[]){0, 64},
                2, rank, p);
    cft_array *c[4];
    cnn_init(c);
    bench_model("cnn conv3x3x8-relu-linear", cnn_tree_loss, c, 4, cnn_names,
                (int64_t[]){0, 1, 8, 8}, 4, rank, p);
    cft_dist_finalize();
    return 0;
}
