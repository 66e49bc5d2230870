// np: 2
/* test_faults.c (mpirun, 2 ranks): a peer that stalls instead of calling a
 * collective, and ranks that call different collectives, become errors
 * within the deadline, never hangs. With errors returned (not aborting):
 * rank 0's all_reduce times out after 1 s (deadline + at most 1 s, measured
 * here), the message names the collective, its sequence number and the
 * group, and the group's error is sticky. Rank 1 then makes the late call,
 * so the abandoned MPI operation completes and both ranks finish cleanly.
 * With CFT_DIST_DEBUG=detail a size mismatch is reported by rank on both.
 * Run with "abort" as argument: the default, where a timeout aborts the
 * job (ctest checks the message; the exit status is MPI_Abort's); with
 * "abort_group", the same for cft_dist_new_group, whose MPI_Comm_split has
 * no deadline of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cft/cft.h"
#include "cft/dist.h"
#include "check.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    bool abort_mode = argc > 1 && !strcmp(argv[1], "abort");
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    cft_dist_group *w = cft_dist_world();
    int rank = cft_dist_rank(w);
    cft_dist_group *spare = cft_dist_new_group((int[]){0, 1}, 2); /* for after the failure */
    cft_dist_set_timeout(1.0);
    bool abort_group = argc > 1 && !strcmp(argv[1], "abort_group");
    if (abort_mode || abort_group) { /* rank 1 never calls: rank 0 aborts the job */
        if (rank == 0 && abort_group)
            cft_dist_new_group((int[]){0, 1}, 2);
        else if (rank == 0)
            cft_dist_all_reduce(w, cft_ones(CFT_F32, (int64_t[]){4}, 1), CFT_DIST_SUM);
        else
            sleep(30);
        return 1; /* not reached: MPI_Abort took the job down */
    }
    cft_dist_set_abort_on_timeout(false);
    if (argc > 1 && !strcmp(argv[1], "finalize")) {
        /* errors returned, and rank 1 stalls (10 s) instead of making the
         * call: rank 0's cft_dist_finalize must return within the deadline
         * + 2 s with an error (MPI_Finalize waited for the stalled peer for
         * ever); ctest reads rank 0's line, since the job's exit status is
         * then mpirun's */
        double t0 = now();
        if (rank == 0) {
            cft_array *e =
                cft_dist_all_reduce(w, cft_ones(CFT_F32, (int64_t[]){4}, 1), CFT_DIST_SUM);
            cft_status st = cft_dist_finalize();
            double dt = now() - t0;
            printf("rank 0: cft_dist_finalize returned after %.2f s%s: %s\n", dt,
                   cft_failed(e) && dt < 3.0 ? " (in time)" : "",
                   st == CFT_OK ? "ok" : cft_last_error_message());
            fflush(stdout);
            return 0;
        }
        sleep(10);
        cft_dist_finalize();
        return 0;
    }

    TEST("rank %d: ranks calling different sizes are told so (CFT_DIST_DEBUG)", rank) {
        cft_dist_set_debug(true);
        cft_array *e =
            cft_dist_all_reduce(w, cft_ones(CFT_F32, (int64_t[]){4 + rank}, 1), CFT_DIST_SUM);
        CHECK(cft_failed(e));
        CHECK_MSG(strstr(cft_error_message(e), "mismatch") &&
                      strstr(cft_error_message(e), "rank 1"),
                  "%s", cft_error_message(e));
        CHECK_EQ(cft_dist_group_status(w), CFT_E_FOREIGN);
        /* the same element count in another shape is a mismatch too */
        cft_dist_group *g2 = cft_dist_new_group((int[]){0, 1}, 2);
        e = cft_dist_all_gather(
            g2, cft_zeros(CFT_F32, rank ? (int64_t[]){3, 2} : (int64_t[]){2, 3}, 2), true);
        CHECK_MSG(cft_failed(e) && strstr(cft_error_message(e), "another shape"), "%s",
                  cft_error_message(e));
        cft_dist_set_debug(false);
    }
    TEST("rank %d: a stalled peer is a timeout error within the deadline + 1 s", rank) {
        cft_dist_group *g = cft_dist_new_group((int[]){0, 1}, 2);
        if (rank == 0) {
            double t0 = now();
            cft_array *e =
                cft_dist_all_reduce(g, cft_ones(CFT_F32, (int64_t[]){1 << 16}, 1), CFT_DIST_SUM);
            double dt = now() - t0;
            CHECK(cft_failed(e));
            const char *m = cft_error_message(e);
            CHECK_MSG(strstr(m, "cft_dist_all_reduce") && strstr(m, "all_reduce #1") &&
                          strstr(m, "did not complete within") && strstr(m, "group"),
                      "%s", m);
            CHECK_MSG(dt >= 0.9 && dt < 2.0, "took %.2f s", dt);
            printf("  timeout reported after %.2f s (deadline 1 s)\n", dt);
            /* sticky: the next call fails at once */
            t0 = now();
            e = cft_dist_barrier(g) == CFT_OK ? NULL : cft_scalar(0, CFT_F32);
            CHECK(e != NULL && now() - t0 < 0.5);
            CHECK(strstr(cft_last_error_message(), "failed before") != NULL);
        } else {
            sleep(3); /* stalled; then the late call, which completes rank 0's */
            cft_dist_set_timeout(20);
            cft_array *late =
                cft_dist_all_reduce(g, cft_ones(CFT_F32, (int64_t[]){1 << 16}, 1), CFT_DIST_SUM);
            CHECK(!cft_failed(late));
        }
        cft_dist_set_timeout(20);
        CHECK_EQ(cft_dist_barrier(spare), CFT_OK); /* healthy groups still work */
    }
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    return check_summary();
}
