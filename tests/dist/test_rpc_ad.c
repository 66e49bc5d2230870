// np: 2 3
/* test_rpc_ad.c (mpirun, 2 and 3 ranks): transforms through remote calls.
 * A loss that calls a function on another worker (cft_rpc_call) against
 * the same loss calling it locally: values, grad, jvp, vmap, vmap of grad
 * (per-sample gradients), jit of grad and a Hessian (second order through
 * the wire). Tolerance 1e-5 relative in f32 (the remote worker runs the
 * same kernels on the same inputs; transposed and rematerialized programs
 * may sum in another order) and 1e-12 in f64. */
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "cft/dist.h"
#include "cft/rpc.h"
#include "check.h"

static int peer;

/* the remote layer: (w [4,3], x [..., 4]) -> tanh(x @ w) */
static cft_status layer(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_tanh(cft_matmul(in[1], in[0]));
    return CFT_OK;
}
static cft_fn *layer_fn;

/* loss(w, x) = sum(layer(w, x)^2) + sum(sin(w)), the layer remote or local */
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *h[1];
    cft_status st = env ? cft_rpc_call(peer, "layer", 2, in, 1, h) : cft_fn_call(layer_fn, in, h);
    if (st != CFT_OK) {
        out[0] = h[0];
        return st;
    }
    out[0] = cft_add(cft_sum(cft_mul(h[0], h[0]), NULL, 0, false),
                     cft_sum(cft_sin(in[0]), NULL, 0, false));
    return CFT_OK;
}

/* sum over the batch of a vmapped loss (env: the vmapped function) */
static cft_status batch_sum(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *y[1];
    cft_status st = cft_fn_call(env, in, y);
    out[0] = st == CFT_OK ? cft_sum(y[0], NULL, 0, false) : y[0];
    return st;
}

int main(int argc, char **argv) {
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    cft_dist_group *w = cft_dist_world();
    int rank = cft_dist_rank(w), size = cft_dist_size(w);
    peer = (rank + 1) % size;
    CHECK_EQ(cft_rpc_init(NULL), CFT_OK);
    layer_fn = cft_fn_new(layer, NULL, 2, 1);
    CHECK_EQ(cft_rpc_register("layer", layer_fn), CFT_OK);
    cft_dist_barrier(w);
    cft_fn *remote = cft_fn_new(loss, (void *)1, 2, 1), *local = cft_fn_new(loss, NULL, 2, 1);
    cft_array *wt = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){4, 3}, 2);
    cft_array *x =
        cft_random_normal(cft_random_key(2 + (uint64_t)rank), CFT_F32, (int64_t[]){5, 4}, 2);
    cft_array *in[2] = {wt, x};

    TEST("rank %d: the value and the gradient through a remote call", rank) {
        cft_array *a[2], *b[2];
        CHECK_EQ(cft_fn_call(remote, in, a), CFT_OK);
        CHECK_EQ(cft_fn_call(local, in, b), CFT_OK);
        CHECK_ARRAY_CLOSE(a[0], b[0], 1e-5, 1e-6);
        int argn[2] = {0, 1};
        CHECK_EQ(cft_fn_call(cft_grad(remote, argn, 2), in, a), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_grad(local, argn, 2), in, b), CFT_OK);
        CHECK_ARRAY_CLOSE(a[0], b[0], 1e-5, 1e-6);
        CHECK_ARRAY_CLOSE(a[1], b[1], 1e-5, 1e-6);
    }
    TEST("rank %d: jvp through a remote call", rank) {
        cft_array *t0 = cft_random_normal(cft_random_key(5), CFT_F32, (int64_t[]){4, 3}, 2);
        cft_array *t1 = cft_random_normal(cft_random_key(6), CFT_F32, (int64_t[]){5, 4}, 2);
        cft_array *args[4] = {wt, x, t0, t1}, *a[2], *b[2];
        CHECK_EQ(cft_fn_call(cft_jvp(remote), args, a), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_jvp(local), args, b), CFT_OK);
        CHECK_ARRAY_CLOSE(a[1], b[1], 1e-5, 1e-6);
    }
    TEST("rank %d: vmap, and vmap of grad (per-sample gradients), through a remote call", rank) {
        cft_array *xs = cft_random_normal(cft_random_key(7), CFT_F32, (int64_t[]){6, 5, 4}, 3);
        int axes[2] = {CFT_NOT_BATCHED, 0};
        cft_array *a[1], *b[1];
        CHECK_EQ(cft_fn_call(cft_vmap(remote, axes, NULL), (cft_array *[]){wt, xs}, a), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_vmap(local, axes, NULL), (cft_array *[]){wt, xs}, b), CFT_OK);
        CHECK_ARRAY_CLOSE(a[0], b[0], 1e-5, 1e-6);
        cft_fn *psr = cft_vmap(cft_grad(remote, NULL, 0), axes, NULL);
        cft_fn *psl = cft_vmap(cft_grad(local, NULL, 0), axes, NULL);
        CHECK_EQ(cft_fn_call(psr, (cft_array *[]){wt, xs}, a), CFT_OK);
        CHECK_EQ(cft_fn_call(psl, (cft_array *[]){wt, xs}, b), CFT_OK);
        CHECK_EQ(cft_array_ndim(a[0]), 3);
        CHECK_ARRAY_CLOSE(a[0], b[0], 1e-5, 1e-6);
        /* grad of vmap: the batch inside the remote vjp ("vjp/vmap:../layer") */
        cft_fn *gr = cft_grad(cft_fn_new(batch_sum, cft_vmap(remote, axes, NULL), 2, 1), NULL, 0);
        cft_fn *gl = cft_grad(cft_fn_new(batch_sum, cft_vmap(local, axes, NULL), 2, 1), NULL, 0);
        CHECK_EQ(cft_fn_call(gr, (cft_array *[]){wt, xs}, a), CFT_OK);
        CHECK_EQ(cft_fn_call(gl, (cft_array *[]){wt, xs}, b), CFT_OK);
        CHECK_ARRAY_CLOSE(a[0], b[0], 1e-5, 1e-6);
    }
    TEST("rank %d: jit of grad through a remote call equals the interpreter", rank) {
        cft_fn *g = cft_grad(remote, NULL, 0);
        cft_array *a[1], *b[1];
        for (int k = 0; k < 3; k++) {
            CHECK_EQ(cft_fn_call(cft_jit(g), in, a), CFT_OK);
            CHECK_EQ(cft_fn_call(cft_grad(local, NULL, 0), in, b), CFT_OK);
            CHECK_ARRAY_CLOSE(a[0], b[0], 1e-5, 1e-6);
        }
    }
    TEST("rank %d: a Hessian through a remote call (second order on the owner)", rank) {
        cft_array *w64 = cft_astype(wt, CFT_F64), *x64 = cft_astype(x, CFT_F64), *a[1], *b[1];
        CHECK_EQ(cft_fn_call(cft_hessian(remote, 0), (cft_array *[]){w64, x64}, a), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_hessian(local, 0), (cft_array *[]){w64, x64}, b), CFT_OK);
        CHECK_EQ(cft_array_ndim(a[0]), 4);
        CHECK_ARRAY_CLOSE(a[0], b[0], 1e-12, 1e-12);
    }
    TEST("rank %d: errors name the remote call", rank) {
        cft_array *o[1];
        CHECK(cft_rpc_call(peer, "nothing", 2, in, 1, o) != CFT_OK);
        CHECK(strstr(cft_error_message(o[0]), "register") != NULL);
        CHECK(cft_rpc_call(peer, "a/b", 2, in, 1, o) != CFT_OK);
        CHECK(cft_rpc_call(size, "layer", 2, in, 1, o) != CFT_OK);
        /* a shape error is found here, before anything is sent */
        CHECK(cft_rpc_call(peer, "layer", 2, (cft_array *[]){x, x}, 1, o) != CFT_OK);
    }
    CHECK_EQ(cft_rpc_shutdown(), CFT_OK);
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    return check_summary();
}
