// np: 3
/* test_rpc_stress.c (mpirun, 3 ranks): the RPC agent under churn, the
 * pattern that once stalled test_rpc_np3 under ASan in CI. Every worker, at
 * once, for CFT_RPC_STRESS_ROUNDS rounds (default 3; CI's sanitizer passes
 * run it too): 4,000 remote values made on random workers and released,
 * every 16th fetched (to_here) and every 32nd passed as the argument of a
 * call to a third worker, with asynchronous calls and callbacks in flight
 * between them. After each round, every worker owns nothing and each call's
 * value is right. A watchdog dumps every worker's agent state (its queues)
 * if a round takes longer than the deadline, so a stall leaves evidence. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cft/cft.h"
#include "cft/dist.h"
#include "cft/rpc.h"
#include "check.h"
#include "dist/rpc/rpc.h"

static cft_status make(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul_s(in[0], 2.0);
    return CFT_OK;
}
static cft_status whoami(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)in, (void)nout;
    out[0] = cft_scalar(cft_rpc_worker_id(), CFT_I32);
    return CFT_OK;
}

static void count_cb(cft_future *f, void *arg) {
    (void)f;
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static _Atomic int round_no;
static _Atomic bool finished;
static double limit_s = 60;

/* a round past the limit: dump this worker's agent state (once per round) */
static void *watchdog(void *arg) {
    (void)arg;
    int seen = -1;
    double since = 0;
    while (!atomic_load(&finished)) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double now = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
        int r = atomic_load(&round_no);
        if (r != seen)
            seen = r, since = now;
        else if (now - since > limit_s) {
            char why[64];
            snprintf(why, sizeof why, "round %d has run %.0f s", r, now - since);
            cft__rpc_dump_state(why);
            since = now;
        }
        usleep(100000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    cft_dist_group *w = cft_dist_world();
    int rank = cft_dist_rank(w), size = cft_dist_size(w);
    const char *e = getenv("CFT_RPC_STRESS_ROUNDS");
    int rounds = e && atoi(e) > 0 ? atoi(e) : 3;
    const char *t = getenv("CFT_DIST_TIMEOUT");
    if (t && atof(t) > 0)
        limit_s = atof(t);
    CHECK_EQ(cft_rpc_register("make", cft_fn_new(make, NULL, 1, 1)), CFT_OK);
    CHECK_EQ(cft_rpc_register("whoami", cft_fn_new(whoami, NULL, 0, 1)), CFT_OK);
    CHECK_EQ(cft_rpc_init(NULL), CFT_OK);
    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    cft_array *x = cft_full(rank + 1, CFT_F32, (int64_t[]){16}, 1);
    unsigned seed = 12345u + (unsigned)rank;
    for (int r = 0; r < rounds; r++) {
        atomic_store(&round_no, r);
        TEST("rank %d of %d: round %d: 4,000 RRefs made, fetched, passed on, released", rank, size,
             r) {
            int called = 0, bad = 0, nasync = 0;
            cft_future *fs[64];
            for (int i = 0; i < 4000; i++) {
                int to = (int)(rand_r(&seed) % (unsigned)size);
                cft_rref *ref = cft_rpc_remote(to, "make", 1, (cft_array *[]){x});
                if (i % 16 == 0) {
                    cft_array *v = cft_rref_to_here(ref);
                    bad += cft_failed(v) || !cft_allclose(v, cft_mul_s(x, 2.0), 0, 0, false);
                }
                if (i % 32 == 0) { /* the value, doubled again on a third worker */
                    int third = (to + 1) % size;
                    cft_array *out[1];
                    cft_rpc_arg a = {NULL, ref};
                    cft_status st =
                        cft_future_wait(cft_rpc_async_args(third, "make", 1, &a), 1, out);
                    bad += st != CFT_OK || !cft_allclose(out[0], cft_mul_s(x, 4.0), 0, 0, false);
                }
                if (i % 8 == 0 && nasync < 64) {
                    fs[nasync] = cft_rpc_async((to + 2) % size, "whoami", 0, NULL);
                    cft_future_then(fs[nasync++], count_cb, &called);
                }
                if (cft_rref_release(ref) != CFT_OK)
                    bad++;
                if (nasync == 64) {
                    CHECK_EQ(cft_future_wait_all(fs, nasync), CFT_OK);
                    nasync = 0;
                }
            }
            CHECK_EQ(cft_future_wait_all(fs, nasync), CFT_OK);
            CHECK_EQ(bad, 0);
            /* settled: a call to each worker (handled after everything sent
             * before it), then everyone; nothing is owned */
            for (int to = 0; to < size; to++)
                CHECK_EQ(cft_rpc_sync(to, "whoami", 0, NULL, 0, NULL), CFT_OK);
            CHECK_EQ(cft_dist_barrier(w), CFT_OK);
            cft_array *n = cft_dist_all_reduce(
                w, cft_scalar((double)cft_rpc_owned_count(), CFT_I64), CFT_DIST_SUM);
            CHECK_EQ((int64_t)cft_item(n), 0);
            /* every callback has run (on whichever thread took its reply) */
            for (int k = 0; __atomic_load_n(&called, __ATOMIC_SEQ_CST) < 4000 / 8 && k < 5000; k++)
                usleep(1000);
            CHECK_EQ(__atomic_load_n(&called, __ATOMIC_SEQ_CST), 4000 / 8);
        }
    }
    atomic_store(&finished, true);
    pthread_join(dog, NULL);
    CHECK_EQ(cft_rpc_shutdown(), CFT_OK);
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    return check_summary();
}
