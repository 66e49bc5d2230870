// np: 2 3
/* test_rpc_module.c (mpirun, 2 and 3 ranks): RemoteModule, distributed
 * autograd and the distributed optimizer against the same model held
 * locally. Each rank makes a Linear(4, 3) on the next worker, computes
 * loss(w, x) = sum(lin(x @ w)^2) with the layer remote, and checks: the
 * parameters and forward equal a local instance from the same key; within
 * a context, the local gradient (w) and the remote parameters' gradients
 * (kept on the owner) equal cft_grad of the local model; an SGD step on the
 * owner equals the local update. Tolerance 1e-5 relative (f32: the owner
 * runs the same kernels; its backward may sum in another order). */
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "cft/dist.h"
#include "cft/rpc.h"
#include "check.h"

static cft_remote_module *rm;
static cft_module *lin;

static cft_status remote_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y;
    cft_status st = cft_remote_module_forward(rm, cft_matmul(in[1], in[0]), &y);
    out[0] = st == CFT_OK ? cft_sum(cft_mul(y, y), NULL, 0, false) : y;
    return st;
}
/* the same with the layer's parameters as inputs: (weight, bias, w, x) */
static cft_tree *like;
static cft_status local_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_tree *p = cft_tree_unflatten(like, in);
    cft_array *y = cft_module_apply(lin, p, NULL, cft_matmul(in[3], in[2]), false, NULL, NULL);
    out[0] = cft_sum(cft_mul(y, y), NULL, 0, false);
    return CFT_OK;
}

/* the module's input needs no gradient: (w, x4) -> sum(lin(x4)^2) + sum(w^2) */
static cft_status remote_loss2(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y;
    cft_status st = cft_remote_module_forward(rm, in[1], &y);
    out[0] = st == CFT_OK ? cft_add(cft_sum(cft_mul(y, y), NULL, 0, false),
                                    cft_sum(cft_mul(in[0], in[0]), NULL, 0, false))
                          : y;
    return st;
}
/* (weight, bias, x4) -> sum(lin(x4)^2) */
static cft_status local_loss2(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y =
        cft_module_apply(lin, cft_tree_unflatten(like, in), NULL, in[2], false, NULL, NULL);
    out[0] = cft_sum(cft_mul(y, y), NULL, 0, false);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    cft_dist_group *world = cft_dist_world();
    int rank = cft_dist_rank(world), size = cft_dist_size(world), peer = (rank + 1) % size;
    CHECK_EQ(cft_rpc_init(NULL), CFT_OK);
    lin = cft_nn_linear(4, 3, true);
    CHECK_EQ(cft_rpc_register_module("lin", lin), CFT_OK);
    cft_dist_barrier(world);
    cft_array *key = cft_random_key(40 + (uint64_t)rank);
    rm = cft_remote_module_new(peer, "lin", key);
    like = cft_module_init(lin, key, NULL);
    cft_array *w = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){5, 4}, 2);
    cft_array *x =
        cft_random_normal(cft_random_key(4 + (uint64_t)rank), CFT_F32, (int64_t[]){6, 5}, 2);

    TEST("rank %d: a RemoteModule on worker %d: parameters and forward", rank, peer) {
        CHECK_EQ(cft_remote_module_owner(rm), peer);
        cft_tree *p = cft_remote_module_parameters(rm);
        CHECK(!cft_tree_failed(p));
        CHECK_EQ(cft_tree_size(p), 2);
        for (int i = 0; i < 2; i++)
            CHECK_ARRAY_CLOSE(cft_tree_at(p, i), cft_tree_at(like, i), 0, 0);
        cft_array *y;
        cft_rref *pr[2];
        CHECK_EQ(cft_remote_module_parameter_rrefs(rm, pr), CFT_OK);
        for (int i = 0; i < 2; i++) {
            CHECK_EQ(cft_rref_owner(pr[i]), peer);
            CHECK_ARRAY_CLOSE(cft_rref_to_here(pr[i]), cft_tree_at(like, i), 0, 0);
            CHECK_EQ(cft_rref_release(pr[i]), CFT_OK);
        }
        CHECK(cft_remote_module_forward(rm, x, &y) != CFT_OK); /* [6,5]: the layer takes 4 */
        CHECK(cft_failed(y));
        CHECK_EQ(cft_remote_module_forward(rm, cft_matmul(x, w), &y), CFT_OK);
        CHECK_ARRAY_CLOSE(y, cft_module_apply(lin, like, NULL, cft_matmul(x, w), false, NULL, NULL),
                          1e-6, 1e-6);
    }
    TEST("rank %d: distributed autograd: local and remote gradients, then an SGD step", rank) {
        cft_array *lp[2];
        cft_tree_flatten(like, lp);
        cft_array *ref[4];
        CHECK_EQ(cft_fn_call(cft_grad(cft_fn_new(local_loss, NULL, 4, 1), (int[]){0, 1, 2}, 3),
                             (cft_array *[]){lp[0], lp[1], w, x}, ref),
                 CFT_OK);
        cft_dist_autograd_ctx *ctx = cft_dist_autograd_ctx_new();
        cft_array *g[1];
        CHECK_EQ(cft_dist_autograd_grad(ctx, cft_fn_new(remote_loss, NULL, 2, 1),
                                        (cft_array *[]){w, x}, (int[]){0}, 1, g),
                 CFT_OK);
        CHECK_ARRAY_CLOSE(g[0], ref[2], 1e-5, 1e-6);
        cft_tree *rg = cft_dist_autograd_get_gradients(ctx, rm);
        CHECK(!cft_tree_failed(rg));
        CHECK_ARRAY_CLOSE(cft_tree_at(rg, 0), ref[0], 1e-5, 1e-6);
        CHECK_ARRAY_CLOSE(cft_tree_at(rg, 1), ref[1], 1e-5, 1e-6);
        /* a second backward in the same context accumulates */
        CHECK_EQ(cft_dist_autograd_grad(ctx, cft_fn_new(remote_loss, NULL, 2, 1),
                                        (cft_array *[]){w, x}, (int[]){0}, 1, g),
                 CFT_OK);
        rg = cft_dist_autograd_get_gradients(ctx, rm);
        CHECK_ARRAY_CLOSE(cft_tree_at(rg, 0), cft_mul_s(ref[0], 2), 1e-5, 1e-6);
        /* the optimizer on the owner: p - 0.1 * (2 g) */
        cft_optim sgd = cft_sgd(0.1, 0, 0, false);
        cft_dist_optimizer *opt = cft_dist_optimizer_new(&sgd, &rm, 1);
        CHECK_EQ(cft_dist_optimizer_step(opt, ctx), CFT_OK);
        cft_tree *p = cft_remote_module_parameters(rm);
        for (int i = 0; i < 2; i++)
            CHECK_ARRAY_CLOSE(cft_tree_at(p, i), cft_sub(lp[i], cft_mul_s(ref[i], 0.2)), 1e-5,
                              1e-6);
        CHECK_EQ(cft_dist_autograd_release(ctx), CFT_OK);
        /* without a context, grad still reaches the local inputs */
        CHECK_EQ(cft_fn_call(cft_grad(cft_fn_new(remote_loss, NULL, 2, 1), NULL, 0),
                             (cft_array *[]){w, x}, g),
                 CFT_OK);
        CHECK(!cft_failed(g[0]));
    }
    TEST("rank %d: the remote parameters get gradients when the module's input needs none", rank) {
        cft_array *lp[2], *ref[2], *g[1];
        cft_tree_flatten(cft_remote_module_parameters(rm), lp);
        cft_array *x4 = cft_random_normal(cft_random_key(9), CFT_F32, (int64_t[]){6, 4}, 2);
        CHECK_EQ(cft_fn_call(cft_grad(cft_fn_new(local_loss2, NULL, 3, 1), (int[]){0, 1}, 2),
                             (cft_array *[]){lp[0], lp[1], x4}, ref),
                 CFT_OK);
        cft_dist_autograd_ctx *ctx = cft_dist_autograd_ctx_new();
        CHECK_EQ(cft_dist_autograd_grad(ctx, cft_fn_new(remote_loss2, NULL, 2, 1),
                                        (cft_array *[]){w, x4}, (int[]){0}, 1, g),
                 CFT_OK);
        CHECK_ARRAY_CLOSE(g[0], cft_mul_s(w, 2), 1e-6, 1e-6);
        cft_tree *rg = cft_dist_autograd_get_gradients(ctx, rm);
        CHECK_ARRAY_CLOSE(cft_tree_at(rg, 0), ref[0], 1e-5, 1e-6);
        CHECK_ARRAY_CLOSE(cft_tree_at(rg, 1), ref[1], 1e-5, 1e-6);
        CHECK_EQ(cft_dist_autograd_release(ctx), CFT_OK);
    }
    TEST("rank %d: a module that is not registered is an error naming it", rank) {
        cft_remote_module *bad = cft_remote_module_new(peer, "nope", key);
        cft_array *y;
        CHECK(cft_remote_module_forward(bad, x, &y) != CFT_OK);
        CHECK(strstr(cft_error_message(y), "'nope'") != NULL);
        CHECK_EQ(cft_remote_module_owner(bad), -1);
    }
    CHECK_EQ(cft_rpc_shutdown(), CFT_OK);
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    return check_summary();
}
