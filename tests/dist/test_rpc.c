// np: 2 3
/* test_rpc.c (mpirun, 2 and 3 ranks): RPC between workers. Calls and their
 * results against the same function run locally (exact: the same kernels
 * on the same inputs), many calls in flight, callbacks, errors raised
 * remotely arriving named, RRefs (made, fetched, passed as arguments,
 * released; 10,000 of them leave nothing behind), a stalled worker ending
 * in a timeout error, and a graceful shutdown. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cft/cft.h"
#include "cft/dist.h"
#include "cft/rpc.h"
#include "check.h"

static cft_status affine(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(cft_matmul(in[0], in[1]), cft_full(1, CFT_F32, NULL, 0));
    out[1] = cft_sum(in[0], NULL, 0, false);
    return CFT_OK;
}
static cft_status make(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul_s(in[0], 2.0);
    return CFT_OK;
}
static cft_status nap(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    sleep(3);
    out[0] = in[0];
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

/* every worker has handled what was sent to it before (a call to each,
 * answered in order), and every rank got here */
static void settle(cft_dist_group *w) {
    for (int to = 0; to < cft_dist_size(w); to++)
        CHECK_EQ(cft_rpc_sync(to, "whoami", 0, NULL, 0, NULL), CFT_OK);
    cft_dist_barrier(w);
}

/* the values all workers own once everything sent has been handled */
static int64_t owned_after_settling(cft_dist_group *w) {
    settle(w);
    cft_array *n =
        cft_dist_all_reduce(w, cft_scalar((double)cft_rpc_owned_count(), CFT_I64), CFT_DIST_SUM);
    return (int64_t)cft_item(n);
}

/* hand (owner, id) of mine to every rank; t gets rank from's */
static void previous_token(cft_dist_group *w, cft_rref *mine, int from, int64_t t[2]) {
    cft_array *tok = cft_from_data((int64_t[]){cft_rref_owner(mine), cft_rref_id(mine)}, CFT_I64,
                                   (int64_t[]){2}, 1);
    cft_array *all = cft_dist_all_gather(w, tok, true);
    CHECK_EQ(cft_copy_to(cft_index(all, from), CFT_I64, t), CFT_OK);
}

int main(int argc, char **argv) {
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    cft_dist_group *w = cft_dist_world();
    int rank = cft_dist_rank(w), size = cft_dist_size(w);
    char name[32];
    snprintf(name, sizeof name, "trainer%d", rank);
    CHECK_EQ(cft_rpc_init(rank == 0 ? "ps" : name), CFT_OK);
    /* init, register, call with no barrier (rpc.h's order): the last
     * worker registers "late" 300 ms after init, and the others' calls
     * made at once wait for it there (they failed 3 times of 3) */
    if (rank == size - 1) {
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
        CHECK_EQ(cft_rpc_register("late", cft_fn_new(whoami, NULL, 0, 1)), CFT_OK);
    } else {
        cft_array *out[1];
        CHECK_MSG(cft_rpc_sync(size - 1, "late", 0, NULL, 1, out) == CFT_OK, "rank %d: %s", rank,
                  cft_last_error_message());
        CHECK(!cft_failed(out[0]) && cft_item(out[0]) == size - 1);
    }
    cft_fn *faff = cft_fn_new(affine, NULL, 2, 2);
    CHECK_EQ(cft_rpc_register("affine", faff), CFT_OK);
    CHECK_EQ(cft_rpc_register("make", cft_fn_new(make, NULL, 1, 1)), CFT_OK);
    CHECK_EQ(cft_rpc_register("nap", cft_fn_new(nap, NULL, 1, 1)), CFT_OK);
    CHECK_EQ(cft_rpc_register("whoami", cft_fn_new(whoami, NULL, 0, 1)), CFT_OK);
    cft_dist_barrier(w); /* everyone registered */
    int peer = (rank + 1) % size;

    TEST("rank %d: workers have their names", rank) {
        CHECK_EQ(cft_rpc_num_workers(), size);
        CHECK_EQ(cft_rpc_worker_id(), rank);
        CHECK(strcmp(cft_rpc_worker_name(0), "ps") == 0);
        CHECK_EQ(cft_rpc_worker_by_name("ps"), 0);
        CHECK_EQ(cft_rpc_worker_by_name("trainer1"), 1);
        CHECK_EQ(cft_rpc_worker_by_name("nobody"), -1);
    }
    TEST("rank %d: rpc_sync on every worker (itself too) equals the local call", rank) {
        cft_array *x =
            cft_random_normal(cft_random_key(3 + (uint64_t)rank), CFT_F32, (int64_t[]){5, 7}, 2);
        cft_array *m = cft_random_normal(cft_random_key(9), CFT_F32, (int64_t[]){7, 3}, 2);
        cft_array *want[2], *got[2];
        CHECK_EQ(cft_fn_call(faff, (cft_array *[]){x, m}, want), CFT_OK);
        for (int to = 0; to < size; to++) {
            CHECK_EQ(cft_rpc_sync(to, "affine", 2, (cft_array *[]){x, m}, 2, got), CFT_OK);
            CHECK_ARRAY_CLOSE(got[0], want[0], 0, 0);
            CHECK_ARRAY_CLOSE(got[1], want[1], 0, 0);
        }
        cft_array *id[1];
        CHECK_EQ(cft_rpc_sync(peer, "whoami", 0, NULL, 1, id), CFT_OK);
        CHECK_EQ((int)cft_item(id[0]), peer);
        /* a strided view goes as its elements */
        cft_array *t = cft_transpose(
            cft_random_normal(cft_random_key(4), CFT_F32, (int64_t[]){7, 5}, 2), NULL);
        CHECK_EQ(cft_fn_call(faff, (cft_array *[]){t, m}, want), CFT_OK);
        CHECK_EQ(cft_rpc_sync(peer, "affine", 2, (cft_array *[]){t, m}, 2, got), CFT_OK);
        CHECK_ARRAY_CLOSE(got[0], want[0], 0, 0);
    }
    TEST("rank %d: 64 async calls in flight, callbacks, wait_all", rank) {
        cft_future *fs[64];
        int called = 0;
        for (int i = 0; i < 64; i++) {
            fs[i] = cft_rpc_async((rank + 1 + i) % size, "make", 1,
                                  (cft_array *[]){cft_full(i, CFT_F64, (int64_t[]){i + 1}, 1)});
            CHECK_EQ(cft_future_then(fs[i], count_cb, &called), CFT_OK);
        }
        CHECK_EQ(cft_future_wait_all(fs, 64), CFT_OK);
        for (int i = 63; i >= 0; i--) {
            cft_array *y[1];
            CHECK(cft_future_done(fs[i]));
            CHECK_EQ(cft_future_wait(fs[i], 1, y), CFT_OK);
            CHECK_ARRAY_CLOSE(y[0], cft_full(2.0 * i, CFT_F64, (int64_t[]){i + 1}, 1), 0, 0);
        }
        CHECK_EQ(__atomic_load_n(&called, __ATOMIC_SEQ_CST), 64);
        int late = 0; /* a callback on a finished future runs at once */
        CHECK_EQ(cft_future_then(fs[0], count_cb, &late), CFT_OK);
        CHECK_EQ(late, 1);
    }
    TEST("rank %d: errors raised remotely come back named", rank) {
        cft_array *out[2];
        CHECK(cft_rpc_sync(peer, "missing", 0, NULL, 1, out) != CFT_OK);
        CHECK(cft_failed(out[0]));
        CHECK(strstr(cft_error_message(out[0]), "function 'missing'") != NULL);
        CHECK(strstr(cft_error_message(out[0]), "not registered") != NULL);
        char who[64];
        snprintf(who, sizeof who, "worker '%s'", cft_rpc_worker_name(peer));
        CHECK(strstr(cft_error_message(out[0]), who) != NULL);
        /* shapes that do not fit: the remote matmul's error, named */
        cft_array *a = cft_full(1, CFT_F32, (int64_t[]){2, 3}, 2);
        CHECK(cft_rpc_sync(peer, "affine", 2, (cft_array *[]){a, a}, 2, out) != CFT_OK);
        CHECK(strstr(cft_error_message(out[0]), "function 'affine'") != NULL);
        CHECK(strstr(cft_error_message(out[0]), "matmul") != NULL);
        CHECK(cft_rpc_sync(peer, "affine", 1, (cft_array *[]){a}, 2, out) != CFT_OK);
        CHECK(strstr(cft_error_message(out[0]), "1 arguments, takes 2") != NULL);
        /* refused before sending */
        CHECK(cft_rpc_sync(size + 3, "make", 1, (cft_array *[]){a}, 1, out) != CFT_OK);
        CHECK(strstr(cft_error_message(out[0]), "worker") != NULL);
        CHECK(cft_rpc_sync(peer, "make", 1, (cft_array *[]){NULL}, 1, out) != CFT_OK);
        CHECK(cft_future_wait(NULL, 0, NULL) != CFT_OK);
    }
    TEST("rank %d: RRefs: remote, to_here, as arguments, release", rank) {
        cft_array *x = cft_full(rank + 1, CFT_F32, (int64_t[]){4, 7}, 2);
        cft_rref *r = cft_rpc_remote(peer, "make", 1, (cft_array *[]){x});
        CHECK_EQ(cft_rref_owner(r), peer);
        CHECK_EQ(cft_rref_is_owner(r), peer == rank);
        cft_array *v = cft_rref_to_here(r);
        CHECK_ARRAY_CLOSE(v, cft_mul_s(x, 2.0), 0, 0);
        if (peer != rank)
            CHECK(cft_failed(cft_rref_local_value(r)));
        /* the RRef as an argument: on its owner, and on another worker */
        cft_array *m = cft_full(0.5, CFT_F32, (int64_t[]){7, 2}, 2), *want[2], *got[2];
        CHECK_EQ(cft_fn_call(faff, (cft_array *[]){v, m}, want), CFT_OK);
        for (int to = 0; to < size; to++) {
            cft_future *f =
                cft_rpc_async_args(to, "affine", 2, (cft_rpc_arg[]){{NULL, r}, {m, NULL}});
            CHECK_EQ(cft_future_wait(f, 2, got), CFT_OK);
            CHECK_ARRAY_CLOSE(got[0], want[0], 0, 0);
        }
        CHECK_EQ(cft_rref_release(r), CFT_OK);
        CHECK(cft_failed(cft_rref_to_here(r)));
        /* a failing creation shows when the value is asked for */
        cft_rref *bad = cft_rpc_remote(peer, "missing", 0, NULL);
        cft_array *e = cft_rref_to_here(bad);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "missing") != NULL);
    }
    TEST("rank %d: 10,000 remote values made and released leave nothing behind", rank) {
        cft_array *x = cft_full(1, CFT_F32, (int64_t[]){16}, 1);
        for (int i = 0; i < 10000; i++) {
            cft_rref *r = cft_rpc_remote((rank + i) % size, "make", 1, (cft_array *[]){x});
            CHECK_EQ(cft_rref_release(r), CFT_OK);
        }
        /* a call after the deletes on each worker: handled in order */
        CHECK_EQ(owned_after_settling(w), 0);
    }
    TEST("rank %d: an RRef forked to another worker outlives its creator's release", rank) {
        cft_array *x = cft_full(rank + 1, CFT_F32, (int64_t[]){3}, 1);
        cft_rref *mine = cft_rpc_remote(peer, "make", 1, (cft_array *[]){x});
        CHECK_EQ(cft_rref_fork(mine), CFT_OK);
        int from = (rank + size - 1) % size;
        int64_t t[2];
        previous_token(w, mine, from, t);
        CHECK_EQ(cft_rref_release(mine), CFT_OK); /* the creator lets go first */
        cft_dist_barrier(w);                      /* every creator has released */
        cft_rref *theirs = cft_rref_from_fork((int)t[0], t[1]);
        CHECK_ARRAY_CLOSE(cft_rref_to_here(theirs),
                          cft_full(2.0 * (from + 1), CFT_F32, (int64_t[]){3}, 1), 0, 0);
        CHECK_EQ(cft_rref_release(theirs), CFT_OK);
        CHECK_EQ(owned_after_settling(w), 0);
    }
    TEST("rank %d: a worker that never held an RRef cannot release it", rank) {
        /* every rank makes a value on its peer; the next rank, which was
         * never given a reference, claims one (cft_rref_from_fork with the
         * id) and releases it: the owner refuses (it dropped the value) */
        cft_array *x = cft_full(rank + 1, CFT_F32, (int64_t[]){3}, 1);
        cft_rref *mine = cft_rpc_remote(peer, "make", 1, (cft_array *[]){x});
        CHECK(!cft_failed(cft_rref_to_here(mine))); /* made */
        int64_t t[2];
        previous_token(w, mine, (rank + size - 1) % size, t);
        cft_rref_release(cft_rref_from_fork((int)t[0], t[1])); /* refused at the owner */
        settle(w);
        /* the creator's value is still there, and its own release frees it */
        CHECK_ARRAY_CLOSE(cft_rref_to_here(mine),
                          cft_full(2.0 * (rank + 1), CFT_F32, (int64_t[]){3}, 1), 0, 0);
        CHECK_EQ(cft_rref_release(mine), CFT_OK);
        CHECK_EQ(owned_after_settling(w), 0);
    }
    TEST("rank %d: a stalled worker is a timeout error, within the deadline", rank) {
        if (rank == 0) {
            cft_rpc_set_timeout(1.0);
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            cft_array *out[1];
            CHECK(cft_rpc_sync(1, "nap", 1, (cft_array *[]){cft_scalar(1, CFT_F32)}, 1, out) !=
                  CFT_OK);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
            CHECK_MSG(dt >= 1.0 && dt < 2.0, "gave up after %.2f s", dt);
            CHECK(strstr(cft_error_message(out[0]), "'nap'") != NULL);
            CHECK(strstr(cft_error_message(out[0]), "did not complete within") != NULL);
            cft_rpc_set_timeout(0);
        }
    }
    CHECK_EQ(cft_rpc_shutdown(), CFT_OK);
    CHECK(cft_rpc_sync(0, "whoami", 0, NULL, 0, NULL) != CFT_OK); /* stopped */
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    return check_summary();
}
