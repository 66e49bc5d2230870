/* rpc.c: an RPC program outside the source tree, against an installed cft
 * and its distributed library, run by scripts/test-consumer.sh under
 * mpirun -np 2: every worker registers "axpy" (2x + y), then worker 0
 * calls it on worker 1 synchronously, asynchronously and through an RRef.
 * Exits 0 when every answer is right. */
#include <cft/cft.h>
#include <cft/dist.h>
#include <cft/rpc.h>
#include <stdio.h>

static cft_status axpy(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(cft_mul_s(in[0], 2), in[1]);
    return CFT_OK;
}

int main(int argc, char **argv) {
    if (cft_dist_init(&argc, &argv) != CFT_OK || cft_rpc_init(NULL) != CFT_OK) {
        fprintf(stderr, "init: %s\n", cft_last_error_message());
        return 1;
    }
    int me = cft_rpc_worker_id();
    int bad = cft_rpc_register("axpy", cft_fn_new(axpy, NULL, 2, 1)) != CFT_OK;
    /* every worker has registered before anyone calls */
    bad |= cft_dist_barrier(cft_dist_world()) != CFT_OK;
    if (!bad && me == 0) {
        cft_array *x = cft_arange(0, 5, 1, CFT_F32), *y = cft_ones(CFT_F32, (int64_t[]){5}, 1);
        cft_array *want = cft_add(cft_mul_s(x, 2), y), *out[1];
        bad |= cft_rpc_sync(1, "axpy", 2, (cft_array *[]){x, y}, 1, out) != CFT_OK ||
               !cft_allclose(out[0], want, 0, 0, false);
        cft_future *fut = cft_rpc_async(1, "axpy", 2, (cft_array *[]){x, y});
        bad |= cft_future_wait(fut, 1, out) != CFT_OK || !cft_allclose(out[0], want, 0, 0, false);
        cft_rref *r = cft_rpc_remote(1, "axpy", 2, (cft_array *[]){x, y});
        bad |= !cft_allclose(cft_rref_to_here(r), want, 0, 0, false);
        bad |= cft_rref_release(r) != CFT_OK;
        if (bad)
            fprintf(stderr, "worker 0: %s\n", cft_last_error_message());
    }
    bad |= cft_rpc_shutdown() != CFT_OK;
    cft_dist_finalize();
    if (!bad)
        printf("rpc consumer ok (worker %d)\n", me);
    return bad;
}
