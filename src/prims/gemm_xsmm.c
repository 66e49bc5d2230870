/* gemm_xsmm.c: dot_general's small f32 GEMMs on libxsmm (Debian's
 * libxsmm-dev; built when CMake finds it, CFT_HAVE_XSMM). Its JIT kernels
 * measured 1.24-1.76x faster than OpenBLAS on the shapes of the ensemble
 * and MAML benchmarks (one GEMM per model or task: 256x64 @ 64x128,
 * 256x128 @ 128x10, 10x40 @ 40x40), slower only for one output column,
 * which stays on BLAS. libxsmm is column-major: the row-major C = A B is
 * its C' = B' A' with the operands swapped. Kernels are dispatched per
 * call (libxsmm caches them; thread-safe). CFT_XSMM=0 turns it off. */
#include "prims/gemm_xsmm.h"

#ifdef CFT_HAVE_XSMM
#include <libxsmm.h>

#include "core/mem.h"
#include <pthread.h>
#include <stdlib.h>

/* libxsmm's JIT pays off up to this size (its own default bound) */
enum { MAX_MNK = 128 * 128 * 128 };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool enabled;

static void read_env(void) {
    const char *v = getenv("CFT_XSMM");
    enabled = !(v && v[0] == '0');
}

bool cft__sgemm_small_fits(bool ta, int64_t m, int64_t n, int64_t k) {
    pthread_once(&once, read_env);
    if (!(enabled && n >= 4 && m >= 1 && k >= 1 && (double)m * (double)n * (double)k <= MAX_MNK))
        return false;
    /* Few output columns over a long sum: OpenBLAS measured faster, one
     * thread, m 40-128, n 4-32, k 10-1024 (docs/implementation.md): n = 4
     * from k = 64 on (2-10x); A as it lies from k = 256 on (1.3-3x); A^T
     * (a weight gradient over a batch) for k 64-256 and 64 rows or more
     * (1.15-1.8x: the ensemble's h^T dlogits, 128x256x10, 6.95 against
     * 8.97 us). libxsmm keeps the rest: equal or faster there (A^T over
     * k = 1024: 36 against 44-57 us). */
    if (n < 16 && k >= 64) {
        if (n <= 4)
            return false;
        if (!ta && k >= 256)
            return false;
        if (ta && k <= 256 && m >= 64)
            return false;
    }
    return true;
}

/* op(B) = B^T: libxsmm 1.17 has no kernel for a transposed left operand of
 * its own (column-major) product, so a small B^T is copied out first when
 * the product has rows enough to pay for the copy (an ensemble's
 * g2 @ W2^T, 256 rows: 1280 floats copied, against OpenBLAS taking 1.5x as
 * long; MAML's 10-row products were 17% slower with the copy, and stay on
 * BLAS) */
enum { MAX_COPY = 16384 };

/* T [k, n] = B^T, B [n, k] with row stride ldb, in tiles of 16 x 16 that
 * stay in L1 (row by row, a 128 x 128 B took 24.7 us: each write its own
 * line; tiled 5.6 us) */
static void transpose(const float *B, int n, int k, int ldb, float *T) {
    enum { TB = 16 };
    for (int i0 = 0; i0 < n; i0 += TB)
        for (int j0 = 0; j0 < k; j0 += TB) {
            int i1 = i0 + TB < n ? i0 + TB : n, j1 = j0 + TB < k ? j0 + TB : k;
            for (int j = j0; j < j1; j++)
                for (int i = i0; i < i1; i++)
                    T[(int64_t)j * n + i] = B[(int64_t)i * ldb + j];
        }
}

bool cft__sgemm_small(bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                      const float *B, int ldb, float *C, int ldc) {
    if (m < 1 || n < 1 || k < 1)
        return false;
    if (tb) { /* B is [n, k] (row stride ldb); op(B) = B^T, [k, n] */
        if ((int64_t)n * k > MAX_COPY || m < 64) /* the copy pays over many rows only */
            return false;
        float *bt_copy = cft__scratch(CFT_SCRATCH_GEMM, sizeof(float) * (size_t)n * (size_t)k,
                                      sizeof(float) * MAX_COPY);
        if (!bt_copy)
            return false;
        transpose(B, n, k, ldb, bt_copy);
        B = bt_copy, ldb = n, tb = false;
    }
    const float alpha = 1, beta = 0;
    /* column-major: C'[n x m] = op(B)' op(A)' */
    int flags = (tb ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
    libxsmm_blasint M = n, N = m, K = k, la = ldb, lb = lda, lc = ldc;
    libxsmm_smmfunction f =
        libxsmm_smmdispatch(M, N, K, &la, &lb, &lc, &alpha, &beta, &flags, NULL);
    if (!f)
        return false;
    f(B, A, C);
    return true;
}

void *cft__sgemm_small_kernel(bool ta, int m, int n, int k, int lda, int ldb, int ldc) {
    if (m < 1 || n < 1 || k < 1 || !cft__sgemm_small_fits(ta, m, n, k))
        return NULL;
    const float alpha = 1, beta = 0;
    int flags = ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0;
    libxsmm_blasint M = n, N = m, K = k, la = ldb, lb = lda, lc = ldc;
    libxsmm_smmfunction f =
        libxsmm_smmdispatch(M, N, K, &la, &lb, &lc, &alpha, &beta, &flags, NULL);
    return f ? *(void **)&f : NULL;
}

void cft__sgemm_small_run(void *kernel, const float *A, const float *B, float *C) {
    libxsmm_smmfunction f;
    *(void **)&f = kernel;
    f(B, A, C);
}

#else

void *cft__sgemm_small_kernel(bool ta, int m, int n, int k, int lda, int ldb, int ldc) {
    (void)ta, (void)m, (void)n, (void)k, (void)lda, (void)ldb, (void)ldc;
    return NULL;
}

void cft__sgemm_small_run(void *kernel, const float *A, const float *B, float *C) {
    (void)kernel, (void)A, (void)B, (void)C;
}

bool cft__sgemm_small_fits(bool ta, int64_t m, int64_t n, int64_t k) {
    (void)ta, (void)m, (void)n, (void)k;
    return false;
}

bool cft__sgemm_small(bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                      const float *B, int ldb, float *C, int ldc) {
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)A, (void)lda, (void)B, (void)ldb, (void)C,
        (void)ldc;
    return false;
}

#endif
