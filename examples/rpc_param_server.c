/* rpc_param_server.c: a parameter server with RPC, as PyTorch's RPC
 * tutorials. Worker 0 holds the shared first layer of the digits MLP
 * (Linear 64 -> 128) as a RemoteModule; every other rank is a trainer with
 * its own head (ReLU, Linear 128 -> 10) and its shard of the training
 * data. A trainer's step runs the first layer on worker 0 (a remote call
 * that grad understands), takes gradients within a distributed autograd
 * context (its head's here, the shared layer's kept on worker 0), updates
 * its head with Adam and the shared layer with a distributed SGD step on
 * worker 0. Trainers step asynchronously (no barrier between them), as a
 * parameter server does. At the end each trainer prints its test accuracy
 * through the shared layer; the program fails below 85%.
 *
 *     mpirun -np 3 build/examples/rpc_param_server [--epochs N] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/dist.h"
#include "cft/rpc.h"
#include "mlp.h"

static cft_remote_module *shared;
static cft_module *head_m; /* ReLU then Linear(128, 10) */
static cft_tree *head_like;

static cft_array *head(cft_array *const *p, cft_array *h) {
    return cft_module_apply(head_m, cft_tree_unflatten(head_like, p), NULL, cft_relu(h), false,
                            NULL, NULL);
}

/* (head weight [10,128], head bias [10], x [B,64], y [B]) -> mean CE */
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h;
    cft_status st = cft_remote_module_forward(shared, in[2], &h);
    if (st != CFT_OK) {
        out[0] = h;
        return st;
    }
    out[0] = cft_mean(cft_cross_entropy(head(in, h), in[3]), NULL, 0, false);
    return CFT_OK;
}

//! [state]
/* Server state kept between calls: the examples the trainers have reported,
 * in the env of a registered function. The function is registered
 * uncached, so every request runs the callback with values (a plain
 * cft_fn is traced: cft_item of its input fails, and a later call would
 * replay the trace without running the update), and it locks its state:
 * requests are served one at a time, but a worker may also call it
 * locally. */
typedef struct {
    pthread_mutex_t mu;
    double seen;
} server_stats;

static cft_status report(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    server_stats *s = env;
    pthread_mutex_lock(&s->mu);
    s->seen += cft_item(in[0]);
    double total = s->seen;
    pthread_mutex_unlock(&s->mu);
    out[0] = cft_scalar(total, CFT_F64);
    return CFT_OK;
}
//! [state]

static double accuracy(cft_array *const *p, const digits *d, int from, int to) {
    cft_array *x = cft_from_f32(d->x + (size_t)from * 64, (int64_t[]){to - from, 64}, 2);
    cft_array *h;
    if (cft_remote_module_forward(shared, x, &h) != CFT_OK)
        return -1;
    return mlp_accuracy(head(p, h), cft_from_i32(d->y + from, (int64_t[]){to - from}, 1));
}

int main(int argc, char **argv) {
    int epochs = 10;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--epochs"))
            epochs = atoi(argv[i + 1]);
    //! [order]
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK || cft_rpc_init(NULL) != CFT_OK) {
        fprintf(stderr, "%s\n", cft_last_error_message());
        return 1;
    }
    cft_dist_group *world = cft_dist_world();
    int rank = cft_dist_rank(world), size = cft_dist_size(world);
    if (size < 2) {
        fprintf(stderr, "run with mpirun -np 2 or more (worker 0 serves, the others train)\n");
        return 1;
    }
    static server_stats stats = {PTHREAD_MUTEX_INITIALIZER, 0};
    cft_rpc_register("report", cft_fn_uncached(cft_fn_new(report, &stats, 1, 1)));
    cft_rpc_register_module("layer1", cft_nn_linear(64, 128, true));
    //! [order]
    /* worker 0 makes the shared layer and tells the trainers its index */
    int64_t index = 0;
    if (rank == 0) {
        shared = cft_remote_module_new(0, "layer1", cft_random_key(1));
        index = cft_remote_module_index(shared);
    }
    cft_array *ib = cft_dist_broadcast(world, cft_scalar((double)index, CFT_I64), 0);
    if (cft_failed(ib) || (rank == 0 && index < 0)) {
        fprintf(stderr, "rank %d: %s\n", rank, cft_last_error_message());
        return 1;
    }
    int status = 0;
    if (rank > 0) {
        shared = cft_remote_module_attach(0, "layer1", (int64_t)cft_item(ib));
        digits d;
        if (digits_load(&d) != 0)
            return 1;
        digits_shuffle(&d, 7);
        int ntrain = d.n * 4 / 5, trainers = size - 1, me = rank - 1;
        int from = ntrain * me / trainers, to = ntrain * (me + 1) / trainers, B = 32;
        head_m = cft_nn_linear(128, 10, true);
        cft_tree *params = cft_module_init(head_m, cft_random_key(100 + (uint64_t)rank), NULL);
        head_like = params;
        cft_optim adam = cft_adam(1e-2), sgd = cft_sgd(0.1, 0.9, 0, false);
        cft_tree *state = cft_optim_init(&adam, params);
        cft_dist_optimizer *server_opt = cft_dist_optimizer_new(&sgd, &shared, 1);
        cft_fn *f = cft_fn_new(loss, NULL, 4, 1);
        int step = 0;
        for (int e = 0; e < epochs; e++) {
            double total = 0;
            int batches = 0;
            for (int i = from; i + B <= to; i += B, batches++) {
                cft_array *p[2], *g[2], *l[1];
                cft_tree_flatten(params, p);
                cft_array *in[4] = {p[0], p[1],
                                    cft_from_f32(d.x + (size_t)i * 64, (int64_t[]){B, 64}, 2),
                                    cft_from_i32(d.y + i, (int64_t[]){B}, 1)};
                cft_dist_autograd_ctx *ctx = cft_dist_autograd_ctx_new();
                if (cft_dist_autograd_grad(ctx, f, in, (int[]){0, 1}, 2, g) != CFT_OK ||
                    cft_dist_optimizer_step(server_opt, ctx) != CFT_OK ||
                    cft_dist_autograd_release(ctx) != CFT_OK) {
                    fprintf(stderr, "trainer %d: %s\n", rank, cft_last_error_message());
                    return 1;
                }
                cft_optim_update(&adam, cft_tree_unflatten(params, g), state, params,
                                 cft_scalar(++step, CFT_F32), NULL, &params, &state);
                cft_fn_call(f, in, l);
                total += cft_item(l[0]);
            }
            cft_array *seen[1]; /* tell the server, which counts for everyone */
            if (cft_rpc_sync(0, "report", 1, (cft_array *[]){cft_scalar(batches * B, CFT_F64)}, 1,
                             seen) != CFT_OK) {
                fprintf(stderr, "trainer %d: %s\n", rank, cft_last_error_message());
                return 1;
            }
            if (rank == 1)
                printf("epoch %2d  trainer 1 loss %.4f  (examples the server has counted: %.0f)\n",
                       e + 1, total / batches, cft_item(seen[0]));
        }
        cft_array *p[2];
        cft_tree_flatten(params, p);
        double acc = accuracy(p, &d, ntrain, d.n);
        printf("trainer %d: test accuracy %.3f (%d test rows, shared layer on worker 0)\n", rank,
               acc, d.n - ntrain);
        status = acc < 0.85;
    }
    //! [shutdown]
    cft_rpc_shutdown(); /* worker 0 serves until every trainer is done */
    cft_dist_finalize();
    //! [shutdown]
    if (rank == 0)
        printf("worker 0 counted %.0f examples from %d trainers\n", stats.seen, size - 1);
    return status;
}
