// np: 2 3
/* test_collectives.c (mpirun, 2 and 3 ranks): the collectives on arrays
 * against what each rank can compute alone. Rank r holds x_r = r + 1 + k/8
 * (k the element index), so every reduction has a closed form. Exact
 * comparisons: the sums are of small dyadic numbers, exact in f32. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cft/cft.h"
#include "cft/dist.h"
#include "check.h"

static int rank, size;

/* rank r's array: (r + 1) + k/8, k = 0..n-1 */
static cft_array *local(int r, cft_dtype dt, const int64_t *shape, int nd) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    cft_array *k = cft_reshape(cft_arange(0, (double)n, 1, CFT_F64), shape, nd);
    return cft_astype(cft_add_s(cft_mul_s(k, 1.0 / 8), r + 1), dt);
}

int main(int argc, char **argv) {
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    cft_dist_group *w = cft_dist_world();
    rank = cft_dist_rank(w), size = cft_dist_size(w);
    const int64_t sh[2] = {3, 4};
    static const cft_dtype dts[] = {CFT_F32, CFT_F64, CFT_I32, CFT_I64, CFT_F16, CFT_BF16, CFT_C64};

    TEST("rank %d of %d: the ranks of one machine share its cores (threads = cores / ranks)", rank,
         size) {
        cpu_set_t set;
        int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
        int want = cores / size > 0 ? cores / size : 1; /* ctest starts every rank here */
        if (!getenv("CFT_NUM_THREADS"))
            CHECK_EQ(cft_get_num_threads(), want);
    }
    TEST("rank %d of %d: all_reduce sum, mean, max, min, prod in every dtype", rank, size) {
        for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
            cft_dtype dt = dts[i];
            cft_array *x = local(rank, dt, sh, 2);
            cft_array *sum = local(0, CFT_F64, sh, 2), *mx = local(size - 1, CFT_F64, sh, 2);
            cft_array *prod = local(0, CFT_F64, sh, 2);
            for (int r = 1; r < size; r++) {
                sum = cft_add(sum, local(r, CFT_F64, sh, 2));
                prod = cft_mul(prod, local(r, CFT_F64, sh, 2));
            }
            bool integral = dt == CFT_I32 || dt == CFT_I64;
            if (integral) { /* the integer parts only */
                sum = cft_full(0, CFT_F64, sh, 2), prod = cft_full(1, CFT_F64, sh, 2);
                for (int r = 0; r < size; r++) {
                    sum = cft_add(sum, cft_astype(local(r, dt, sh, 2), CFT_F64));
                    prod = cft_mul(prod, cft_astype(local(r, dt, sh, 2), CFT_F64));
                }
                mx = cft_astype(local(size - 1, dt, sh, 2), CFT_F64);
            }
            double tol = cft_dtype_is_half(dt) ? 2e-2 : 0; /* halves round their inputs */
            cft_array *got = cft_dist_all_reduce(w, x, CFT_DIST_SUM);
            CHECK_EQ(cft_array_dtype(got), dt);
            CHECK_ARRAY_CLOSE(cft_astype(got, CFT_F64), sum, tol, tol);
            got = cft_dist_all_reduce(w, x, CFT_DIST_MEAN);
            CHECK_ARRAY_CLOSE(cft_astype(cft_real(got), CFT_F64), cft_mul_s(sum, 1.0 / size),
                              tol + 1e-7, 1e-7);
            if (dt != CFT_C64) {
                got = cft_dist_all_reduce(w, x, CFT_DIST_MAX);
                CHECK_ARRAY_CLOSE(cft_astype(got, CFT_F64), mx, tol, tol);
                got = cft_dist_all_reduce(w, x, CFT_DIST_MIN);
                CHECK_ARRAY_CLOSE(cft_astype(got, CFT_F64),
                                  integral ? cft_astype(local(0, dt, sh, 2), CFT_F64)
                                           : local(0, CFT_F64, sh, 2),
                                  tol, tol);
            }
            got = cft_dist_all_reduce(w, x, CFT_DIST_PROD);
            CHECK_ARRAY_CLOSE(cft_astype(cft_real(got), CFT_F64), prod, tol ? 5e-2 : 1e-6, 0);
        }
    }
    TEST("rank %d: broadcast from every root", rank) {
        for (int root = 0; root < size; root++) {
            cft_array *got = cft_dist_broadcast(w, local(rank, CFT_F32, sh, 2), root);
            CHECK_ARRAY_CLOSE(got, local(root, CFT_F32, sh, 2), 0, 0);
        }
    }
    TEST("rank %d: all_gather stacked and concatenated; reduce_scatter; all_to_all", rank) {
        cft_array *x = local(rank, CFT_F64, sh, 2);
        cft_array *parts[8];
        for (int r = 0; r < size; r++)
            parts[r] = local(r, CFT_F64, sh, 2);
        CHECK_ARRAY_CLOSE(cft_dist_all_gather(w, x, true), cft_stack(parts, size, 0), 0, 0);
        CHECK_ARRAY_CLOSE(cft_dist_all_gather(w, x, false), cft_concatenate(parts, size, 0), 0, 0);
        /* reduce_scatter of [size*2, 4]: rank r keeps rows 2r, 2r+1 of the sum */
        const int64_t big[2] = {2 * size, 4};
        cft_array *sum = local(0, CFT_F64, big, 2);
        for (int r = 1; r < size; r++)
            sum = cft_add(sum, local(r, CFT_F64, big, 2));
        cft_array *rs = cft_dist_reduce_scatter(w, local(rank, CFT_F64, big, 2), CFT_DIST_SUM);
        CHECK_ARRAY_CLOSE(
            rs, cft_slice(sum, (int64_t[]){2 * rank, 0}, (int64_t[]){2 * rank + 2, 4}, NULL), 0, 0);
        /* all_to_all: block j of rank r's x goes to rank j */
        cft_array *a2a = cft_dist_all_to_all(w, local(rank, CFT_F64, big, 2));
        cft_array *want[8];
        for (int r = 0; r < size; r++)
            want[r] = cft_slice(local(r, CFT_F64, big, 2), (int64_t[]){2 * rank, 0},
                                (int64_t[]){2 * rank + 2, 4}, NULL);
        CHECK_ARRAY_CLOSE(a2a, cft_concatenate(want, size, 0), 0, 0);
    }
    TEST("rank %d: send / recv around a ring, and a barrier", rank) {
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        if (rank % 2 == 0) {
            CHECK_EQ(cft_dist_send(w, local(rank, CFT_I64, sh, 2), next, 3), CFT_OK);
            cft_array *got = cft_dist_recv(w, CFT_I64, sh, 2, prev, 3);
            CHECK_ARRAY_CLOSE(got, local(prev, CFT_I64, sh, 2), 0, 0);
        } else {
            cft_array *got = cft_dist_recv(w, CFT_I64, sh, 2, prev, 3);
            CHECK_EQ(cft_dist_send(w, local(rank, CFT_I64, sh, 2), next, 3), CFT_OK);
            CHECK_ARRAY_CLOSE(got, local(prev, CFT_I64, sh, 2), 0, 0);
        }
        CHECK_EQ(cft_dist_barrier(w), CFT_OK);
    }
    TEST("rank %d: three async all_reduces in flight, waited in reverse order", rank) {
        cft_dist_work *h[3];
        for (int i = 0; i < 3; i++)
            h[i] = cft_dist_all_reduce_async(w, cft_full(i + rank, CFT_F32, (int64_t[]){1000}, 1),
                                             CFT_DIST_SUM);
        for (int i = 2; i >= 0; i--) {
            double want = 0;
            for (int r = 0; r < size; r++)
                want += i + r;
            cft_array *got = cft_dist_wait(h[i]);
            CHECK(cft_dist_is_completed(h[i]));
            CHECK_ARRAY_CLOSE(got, cft_full(want, CFT_F32, (int64_t[]){1000}, 1), 0, 0);
        }
    }
    TEST("rank %d: async collectives in flight around blocking ones, on two groups", rank) {
        /* blocking calls run as MPI's blocking collectives on the caller;
         * they must come after the async ones started before them, while
         * those keep moving (rank 0 waits late, the last rank early) */
        int ends[2] = {0, size - 1};
        cft_dist_group *pair = cft_dist_new_group(ends, 2);
        int64_t n[1] = {100000};
        for (int rep = 0; rep < 20; rep++) {
            cft_dist_work *a =
                cft_dist_all_reduce_async(w, cft_full(1, CFT_F32, n, 1), CFT_DIST_SUM);
            cft_dist_work *b = NULL;
            if (cft_dist_rank(pair) >= 0)
                b = cft_dist_broadcast_async(pair, cft_full(rank, CFT_F32, n, 1), 1);
            if (rank == size - 1)
                CHECK_ARRAY_CLOSE(cft_dist_wait(a), cft_full(size, CFT_F32, n, 1), 0, 0);
            cft_array *s =
                cft_dist_all_reduce(w, cft_full(rank, CFT_F64, (int64_t[]){7}, 1), CFT_DIST_MAX);
            CHECK_ARRAY_CLOSE(s, cft_full(size - 1, CFT_F64, (int64_t[]){7}, 1), 0, 0);
            CHECK_ARRAY_CLOSE(cft_dist_wait(a), cft_full(size, CFT_F32, n, 1), 0, 0);
            if (b)
                CHECK_ARRAY_CLOSE(cft_dist_wait(b), cft_full(size - 1, CFT_F32, n, 1), 0, 0);
        }
    }
    TEST("rank %d: donated all_reduce reduces in x's buffer and gives x up", rank) {
        cft_array *x = local(rank, CFT_F32, sh, 2);
        cft_array *want = local(0, CFT_F32, sh, 2);
        for (int r = 1; r < size; r++)
            want = cft_add(want, local(r, CFT_F32, sh, 2));
        cft_array *y = cft_dist_all_reduce_donated(w, x, CFT_DIST_SUM);
        CHECK_ARRAY_CLOSE(y, want, 0, 0);
        CHECK(cft_failed(x)); /* given up: using it is an error naming the call */
        CHECK(strstr(cft_error_message(x), "cft_dist_all_reduce_donated") != NULL);
        CHECK(cft_failed(cft_add(x, x)));
        y = cft_dist_all_reduce_donated(w, cft_astype(local(rank, CFT_F64, sh, 2), CFT_F64),
                                        CFT_DIST_MEAN);
        CHECK_ARRAY_CLOSE(y, cft_astype(cft_mul_s(want, 1.0 / size), CFT_F64), 1e-12, 0);
        /* nothing to take over: a transposed view, halves, an integer mean */
        cft_array *v = local(rank, CFT_F32, sh, 2), *t = cft_transpose(v, NULL);
        y = cft_dist_all_reduce_donated(w, t, CFT_DIST_SUM);
        CHECK_ARRAY_CLOSE(y, cft_transpose(want, NULL), 0, 0);
        CHECK(!cft_failed(v) && !cft_failed(t));
        CHECK_ARRAY_CLOSE(v, local(rank, CFT_F32, sh, 2), 0, 0);
        y = cft_dist_all_reduce_donated(w, local(rank, CFT_BF16, sh, 2), CFT_DIST_SUM);
        CHECK_EQ(cft_array_dtype(y), CFT_BF16);
        y = cft_dist_all_reduce_donated(w, local(rank, CFT_I32, sh, 2), CFT_DIST_MEAN);
        CHECK_EQ(cft_array_dtype(y), CFT_F32);
        CHECK(
            cft_failed(cft_dist_all_reduce_donated(w, local(rank, CFT_BOOL, sh, 2), CFT_DIST_SUM)));
    }
    TEST("rank %d: a sub-group of ranks {0, last}", rank) {
        int members[2] = {0, size - 1};
        cft_dist_group *g = cft_dist_new_group(members, 2);
        CHECK(g != NULL);
        bool in = rank == 0 || rank == size - 1;
        CHECK_EQ(cft_dist_rank(g), in ? (rank == 0 ? 0 : 1) : -1);
        cft_array *got = cft_dist_all_reduce(g, cft_scalar(rank, CFT_F64), CFT_DIST_SUM);
        if (in)
            CHECK_CLOSE(cft_item(got), size - 1, 0, 0);
        else
            CHECK(cft_failed(got) && strstr(cft_error_message(got), "not a member"));
        CHECK_EQ(cft_dist_barrier(w), CFT_OK);
    }
    TEST("rank %d: bad arguments are errors naming the call", rank) {
        cft_array *e = cft_dist_all_reduce(w, cft_full(1, CFT_BOOL, sh, 2), CFT_DIST_SUM);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_dist_all_reduce"));
        e = cft_dist_broadcast(w, local(rank, CFT_F32, sh, 2), size);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "root"));
        e = cft_dist_all_reduce(NULL, local(rank, CFT_F32, sh, 2), CFT_DIST_SUM);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "group is NULL"));
        e = cft_dist_all_reduce(
            w, cft_complex(local(rank, CFT_F32, sh, 2), local(0, CFT_F32, sh, 2)), CFT_DIST_MAX);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "not ordered"));
        e = cft_dist_reduce_scatter(w, cft_zeros(CFT_F32, (int64_t[]){size + 1}, 1), CFT_DIST_SUM);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "divide"));
        CHECK(cft_dist_new_group((int[]){0, 0}, 2) == NULL);
        CHECK(strstr(cft_last_error_message(), "repeated") != NULL);
        CHECK(cft_failed(cft_dist_wait(NULL)));
        CHECK_EQ(cft_dist_group_status(w), CFT_OK); /* argument errors are not sticky */
    }
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    return check_summary();
}
