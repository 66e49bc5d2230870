/* test_parallel.c: results with several threads are those of one thread.
 * The GEMMs of dot_general are shared out by batch element, or cut into
 * row or column blocks when there are few products, or into two fixed
 * halves of K for a long sum into a small result; convolutions by sample
 * chunks; the jit's kernels by rows. Each case is checked against a naive
 * reference computed here in double, and 2 and 3 threads against 1 thread.
 * Tolerances: against the reference, rtol 1e-5 and atol 1e-6 * K (f32: K
 * products of N(0,1) numbers summed in float, each rounding ~6e-8 of a
 * partial sum of size up to ~sqrt(K)); between thread counts of one op, 0:
 * the blocks are cut by the product's shape alone (dot.c, cut_blocks), so
 * one thread makes the same library calls on the same data as several, on
 * any CPU and whatever kernels the library picked (a block is not the
 * whole product's bits in every library: OpenBLAS's AVX2 kernels differ
 * in the last rows of a block). Jitted programs: rtol 1e-5, atol 1e-6,
 * since a kernel's parallel and serial loops are compiled apart and may
 * contract a*b+c into an FMA differently (a few ulps), while a race or a
 * wrong block gives errors of order 1. Also: user threads calling a jitted
 * function at once while it uses several threads itself; a child forked
 * after a parallel region (it computes on one thread: libgomp's team is
 * not in the child); the default thread count (the cores the process may
 * use) and CFT_NUM_THREADS. */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cft/cft.h"
#include "check.h"

static cft_array *randn(uint64_t seed, cft_dtype dt, const int64_t *shape, int nd) {
    cft_array *x =
        cft_random_normal(cft_random_key(seed), dt == CFT_F64 ? CFT_F64 : CFT_F32, shape, nd);
    if (dt == CFT_I32) /* small integers: exact products and sums */
        x = cft_round(cft_mul_s(x, 3));
    return cft_astype(x, dt);
}

/* c[t] = a[t] @ b[t] in double, a [T, M, K], b [T, K, N] */
static cft_array *naive_bmm(cft_array *a, cft_array *b, int64_t T, int64_t M, int64_t K,
                            int64_t N) {
    double *x = malloc(sizeof(double) * (size_t)(T * M * K)),
           *y = malloc(sizeof(double) * (size_t)(T * K * N)),
           *z = calloc((size_t)(T * M * N), sizeof(double));
    cft_copy_to(a, CFT_F64, x);
    cft_copy_to(b, CFT_F64, y);
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++)
                for (int64_t j = 0; j < N; j++)
                    z[(t * M + i) * N + j] += x[(t * M + i) * K + k] * y[(t * K + k) * N + j];
    cft_array *r = cft_from_f64(z, (int64_t[]){T, M, N}, 3);
    free(x), free(y), free(z);
    return r;
}

/* the product at 1, 2 and 3 threads: all equal, and close to the reference */
static void check_bmm(const char *what, cft_dtype dt, int64_t T, int64_t M, int64_t K, int64_t N,
                      bool trans_a) {
    TEST("%s: %s [%lld] %lldx%lld @ %lldx%lld%s", what, cft_dtype_name(dt), (long long)T,
         (long long)M, (long long)K, (long long)K, (long long)N, trans_a ? " (a transposed)" : "") {
        cft_array *a = randn(1, dt, (int64_t[]){T, M, K}, 3),
                  *b = randn(2, dt, (int64_t[]){T, K, N}, 3);
        /* a transposed operand: the GEMM reads a [T, K, M] buffer with trans */
        cft_array *ain = trans_a ? cft_swapaxes(cft_add_s(cft_swapaxes(a, 1, 2), 0), 1, 2) : a;
        cft_array *ref = naive_bmm(a, b, T, M, K, N);
        cft_array *r[3];
        for (int n = 1; n <= 3; n++) {
            cft_set_num_threads(n);
            r[n - 1] = T == 1 ? cft_expand_dims(cft_matmul(cft_squeeze(ain, (int[]){0}, 1),
                                                           cft_squeeze(b, (int[]){0}, 1)),
                                                0)
                              : cft_matmul(ain, b);
        }
        cft_set_num_threads(1);
        CHECK(!cft_failed(r[0]));
        CHECK_ARRAY_CLOSE(cft_astype(r[0], CFT_F64), ref, 1e-5, 1e-6 * (double)K);
        CHECK_ARRAY_CLOSE(r[1], r[0], 0, 0);
        CHECK_ARRAY_CLOSE(r[2], r[0], 0, 0);
    }
}

static cft_status psg_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[2], in[0]), in[1]));
    out[0] = cft_sum(cft_square(h), NULL, 0, false);
    return CFT_OK;
}

typedef struct {
    cft_fn *f;
    cft_array *in[3], *want;
    int bad;
} worker;

/* (a, b) [100,40,40] -> (tanh(a) * b + a: one contiguous row; sum over axis 1 of a * b) */
static cft_status kernels_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(cft_mul(cft_tanh(in[0]), in[1]), in[0]);
    out[1] = cft_sum(cft_mul(in[0], in[1]), (int[]){1}, 1, false);
    return CFT_OK;
}

static void *call_many(void *arg) {
    worker *w = arg;
    cft_thread_register();
    for (int i = 0; i < 20; i++) {
        cft_array *out[1];
        if (cft_fn_call(w->f, w->in, out) != CFT_OK ||
            !cft_allclose(out[0], w->want, 1e-5, 1e-6, false))
            w->bad++;
    }
    return NULL;
}

/* the cores this process may run on (its affinity mask) */
static int sysconf_cores(void) {
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

/* cft_get_num_threads() in a child started afresh (exec of this test with
 * --threads-child), CFT_NUM_THREADS set to env or unset */
static int default_threads_in_child(const char *env) {
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        if (env)
            setenv("CFT_NUM_THREADS", env, 1);
        else
            unsetenv("CFT_NUM_THREADS");
        execl("/proc/self/exe", "test_parallel", "--threads-child", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[32] = {0};
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    return n > 0 ? atoi(buf) : -1;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--threads-child")) {
        printf("%d\n", cft_get_num_threads());
        return 0;
    }
    check_init(argc, argv);
    /* many products: shared out by batch element */
    check_bmm("batched", CFT_F32, 64, 32, 48, 40, false);
    check_bmm("batched", CFT_F64, 33, 17, 64, 9, true);
    check_bmm("batched", CFT_C64, 16, 24, 32, 24, false);
    check_bmm("batched", CFT_I32, 40, 16, 16, 16, false);
    /* one large product: cut into row blocks, or column blocks when M is small */
    check_bmm("row blocks", CFT_F32, 1, 512, 256, 64, false);
    check_bmm("row blocks", CFT_F32, 1, 300, 200, 70, true);
    check_bmm("column blocks", CFT_F32, 1, 8, 256, 4096, false);
    check_bmm("column blocks", CFT_F64, 1, 4, 128, 1000, true);
    check_bmm("two products, blocks", CFT_F32, 2, 256, 128, 128, false);
    /* a long sum into a small result (weight gradients): cut along K into
     * fixed halves on any thread count, f32 and f64, a transposed */
    check_bmm("K halves", CFT_F32, 1, 128, 1024, 128, true);
    check_bmm("K halves", CFT_F64, 1, 64, 777, 96, false);
    /* outer products (K = 1), the per-sample gradients' case */
    check_bmm("outer products", CFT_F32, 256, 64, 1, 128, false);

    TEST("jitted per-sample gradients: 2 threads give 1 thread's") {
        int64_t B = 512;
        cft_array *w = randn(3, CFT_F32, (int64_t[]){64, 128}, 2),
                  *b = randn(4, CFT_F32, (int64_t[]){128}, 1),
                  *x = randn(5, CFT_F32, (int64_t[]){B, 64}, 2);
        cft_fn *f = cft_jit(cft_vmap(cft_grad(cft_fn_new(psg_loss, NULL, 3, 1), (int[]){0, 1}, 2),
                                     (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0}, NULL));
        cft_array *in[3] = {w, b, x}, *one[2], *two[2];
        /* the first call plans (its values come from the eager ops, whose
         * scalar tanh meets libmvec's vector one only to a few ulps, which
         * saturated units' 1 - tanh^2 shows as 1e-6 against 0); the second
         * runs the kernels, as the 2-thread call does */
        for (int call = 0; call < 2; call++)
            CHECK_EQ(cft_fn_call(f, in, one), CFT_OK);
        cft_set_num_threads(2);
        CHECK_EQ(cft_fn_call(f, in, two), CFT_OK);
        cft_set_num_threads(1);
        CHECK_EQ(cft_array_dim(two[0], 0), B);
        CHECK_ARRAY_CLOSE(two[0], one[0], 1e-5, 1e-6);
        CHECK_ARRAY_CLOSE(two[1], one[1], 1e-5, 1e-6);
    }

    TEST("kernels: a contiguous elementwise chain cut along its row, a reduction over a middle "
         "axis split by its first; 2 and 3 threads give 1 thread's (a few ulps: libmvec's "
         "vector and scalar tanh meet at other elements)") {
        cft_array *a = randn(8, CFT_F32, (int64_t[]){100, 40, 40}, 3),
                  *b = randn(9, CFT_F32, (int64_t[]){100, 40, 40}, 3);
        cft_fn *f = cft_jit(cft_fn_new(kernels_fn, NULL, 2, 2));
        cft_array *one[2], *more[2];
        CHECK_EQ(cft_fn_call(f, (cft_array *[]){a, b}, one), CFT_OK); /* compiles */
        CHECK_EQ(cft_fn_call(f, (cft_array *[]){a, b}, one), CFT_OK);
        for (int t = 2; t <= 3; t++) {
            cft_set_num_threads(t);
            CHECK_EQ(cft_fn_call(f, (cft_array *[]){a, b}, more), CFT_OK);
            CHECK_ARRAY_CLOSE(more[0], one[0], 1e-6, 1e-7);
            CHECK_ARRAY_CLOSE(more[1], one[1], 0, 0); /* each sum in the same order */
        }
        cft_set_num_threads(1);
        CHECK_ARRAY_CLOSE(one[1], cft_sum(cft_mul(a, b), (int[]){1}, 1, false), 1e-5, 1e-5);
    }

    TEST("convolution: 2 threads give 1 thread's") {
        cft_array *x = randn(6, CFT_F32, (int64_t[]){64, 3, 12, 12}, 4),
                  *w = randn(7, CFT_F32, (int64_t[]){8, 3, 3, 3}, 4);
        cft_array *a = cft_conv2d(x, w, NULL, (int64_t[]){1, 1}, NULL, 1);
        cft_set_num_threads(2);
        cft_array *b = cft_conv2d(x, w, NULL, (int64_t[]){1, 1}, NULL, 1);
        cft_set_num_threads(1);
        CHECK(!cft_failed(a));
        CHECK_ARRAY_CLOSE(b, a, 0, 0);
    }

    TEST("user threads call a jitted function that itself uses 2 threads") {
        cft_array *w = randn(8, CFT_F32, (int64_t[]){64, 128}, 2),
                  *b = randn(9, CFT_F32, (int64_t[]){128}, 1),
                  *x = randn(10, CFT_F32, (int64_t[]){256, 64}, 2);
        cft_fn *f = cft_jit(cft_vmap(cft_grad(cft_fn_new(psg_loss, NULL, 3, 1), (int[]){0}, 1),
                                     (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0}, NULL));
        worker ws[3];
        cft_array *want[1];
        cft_array *in[3] = {w, b, x};
        CHECK_EQ(cft_fn_call(f, in, want), CFT_OK);
        cft_set_num_threads(2);
        pthread_t th[3];
        for (int i = 0; i < 3; i++) {
            ws[i] = (worker){f, {w, b, x}, want[0], 0};
            pthread_create(&th[i], NULL, call_many, &ws[i]);
        }
        for (int i = 0; i < 3; i++) {
            pthread_join(th[i], NULL);
            CHECK_EQ(ws[i].bad, 0);
        }
        cft_set_num_threads(1);
    }

    TEST("a child forked after a parallel region computes (on one thread), never hangs") {
        cft_array *a = randn(8, CFT_F32, (int64_t[]){100, 40, 40}, 3),
                  *b = randn(9, CFT_F32, (int64_t[]){100, 40, 40}, 3);
        cft_fn *f = cft_jit(cft_fn_new(kernels_fn, NULL, 2, 2));
        cft_array *want[2], *got[2];
        cft_set_num_threads(2);
        CHECK_EQ(cft_fn_call(f, (cft_array *[]){a, b}, want), CFT_OK);
        CHECK_EQ(cft_fn_call(f, (cft_array *[]){a, b}, want), CFT_OK); /* the team exists */
        pid_t pid = fork();
        if (pid == 0) {
            alarm(60); /* a hang fails the test instead of the ctest timeout */
            bool ok = cft_get_num_threads() == 1 &&
                      cft_fn_call(f, (cft_array *[]){a, b}, got) == CFT_OK &&
                      cft_allclose(got[1], want[1], 0, 0, false) &&
                      cft_allclose(got[0], want[0], 1e-6, 1e-7, false);
            _exit(ok ? 0 : 3);
        }
        int status = -1;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
        cft_set_num_threads(1);
    }

    TEST("the default is the cores this process may use; CFT_NUM_THREADS overrides it") {
        /* a fresh process for each: the default is read once */
        CHECK_EQ(default_threads_in_child(NULL), sysconf_cores());
        CHECK_EQ(default_threads_in_child("3"), 3);
    }

    TEST("the thread count is clamped to at least one") {
        cft_set_num_threads(0);
        CHECK_EQ(cft_get_num_threads(), 1);
        cft_set_num_threads(-5);
        CHECK_EQ(cft_get_num_threads(), 1);
    }
    return check_summary();
}
