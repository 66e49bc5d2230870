/* test_backend.c: the "test" device backend, for test_device. Two devices
 * whose memory is kept apart from the host: every allocation is a mapping
 * of its own with no access at all (PROT_NONE), opened only for the
 * moment the backend itself copies in or out. Host code that read or
 * wrote device memory behind the table's back would crash. Every
 * allocation, release, copy and operation is counted. dot_general runs
 * here as the CUDA backend runs it on cuBLAS: mapped to a strided batched
 * GEMM by src/cuda/gemm_map.h, then OpenBLAS on the opened device memory
 * (f16, bf16 and reduced-precision f32 widened to f32 and rounded as
 * cuBLAS's GemmEx does), so every product of the per-primitive tests
 * checks that mapping; fft likewise runs as the batched transform of
 * src/cuda/fft_map.h (what the CUDA backend gives cuFFT) with FFTW, and
 * cholesky and triangular_solve as the column-major batched calls of
 * src/cuda/solver_map.h (cuSOLVER's potrf, cuBLAS's trsm) with LAPACK and
 * CBLAS per matrix. A
 * jitted function's fused kernels run here too
 * (run_kernel): their CUDA C compiled for the host (host_kernels.c) and
 * run on the opened mappings of their operands. Other operations run on
 * the host through cft_dev_op_run_on_host, which moves the operands
 * through this same table. TEST_BACKEND_KERNELS=0 leaves run_kernel out
 * (the jit then runs its plans primitive by primitive). */
#include "test_backend.h"

#include <cblas.h>
#include <fftw3.h>
#include <lapacke.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cft/cft.h"
#include "array/half_fns.h"
#include "cuda/fft_map.h"
#include "cuda/gemm_map.h"
#include "cuda/solver_map.h"
#include "host_kernels.h"
#include "test_graph.h"

enum { MAX_LIVE = 1 << 16 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static test_backend_counts counts;
static struct {
    char *ptr;
    size_t size;
} live[MAX_LIVE];
static int nlive;
static long live_bytes;
static _Thread_local char err[256];

static size_t page_round(size_t n) {
    return (n + 4095) & ~(size_t)4095;
}

/* the mapping holding [p, p + n), under mu; NULL if none */
static char *region(const void *p, size_t n, size_t *size) {
    for (int i = 0; i < nlive; i++)
        if ((const char *)p >= live[i].ptr && (const char *)p + n <= live[i].ptr + live[i].size) {
            *size = live[i].size;
            return live[i].ptr;
        }
    return NULL;
}

static int count(void *ctx) {
    (void)ctx;
    return 2;
}

static long limit_bytes; /* 0: none */

void test_backend_set_limit(long bytes) {
    pthread_mutex_lock(&mu);
    limit_bytes = bytes;
    pthread_mutex_unlock(&mu);
}

static void *alloc(void *ctx, int dev, size_t bytes) {
    (void)ctx, (void)dev;
    size_t size = page_round(bytes);
    pthread_mutex_lock(&mu);
    bool over = limit_bytes && live_bytes + (long)size > limit_bytes;
    if (over)
        snprintf(err, sizeof err, "out of memory (%ld live, %zu more, limit %ld)", live_bytes, size,
                 limit_bytes);
    pthread_mutex_unlock(&mu);
    if (over)
        return NULL;
    char *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    pthread_mutex_lock(&mu);
    if (nlive == MAX_LIVE) {
        pthread_mutex_unlock(&mu);
        munmap(p, size);
        return NULL;
    }
    live[nlive].ptr = p, live[nlive].size = size, nlive++;
    counts.allocs++, live_bytes += (long)size;
    pthread_mutex_unlock(&mu);
    return p;
}

static void release(void *ctx, int dev, void *ptr) {
    (void)ctx, (void)dev;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nlive; i++)
        if (live[i].ptr == ptr) {
            munmap(live[i].ptr, live[i].size);
            live_bytes -= (long)live[i].size;
            live[i] = live[--nlive];
            counts.releases++;
            break;
        }
    pthread_mutex_unlock(&mu);
}

/* copy with the device side opened for the moment */
static int move(void *dst, const void *src, size_t bytes, const void *dev_side, bool in) {
    pthread_mutex_lock(&mu);
    size_t size;
    char *r = region(dev_side, bytes, &size);
    if (!r) {
        pthread_mutex_unlock(&mu);
        snprintf(err, sizeof err, "test backend: %zu bytes at %p are not device memory", bytes,
                 dev_side);
        return -1;
    }
    mprotect(r, size, PROT_READ | PROT_WRITE);
    memcpy(dst, src, bytes);
    mprotect(r, size, PROT_NONE);
    if (in)
        counts.to_device++, counts.bytes_to_device += (long)bytes;
    else
        counts.to_host++, counts.bytes_to_host += (long)bytes;
    pthread_mutex_unlock(&mu);
    return 0;
}

static int to_device(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    if (test_graph_recording())
        test_graph_spoil("a copy from the host");
    (void)ctx, (void)dev;
    return move(dst, src, bytes, dst, true);
}

static int to_host(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    if (test_graph_recording())
        test_graph_spoil("a copy to the host");
    (void)ctx, (void)dev;
    return move(dst, src, bytes, src, false);
}

static int copy_now(void *dst, const void *src, size_t bytes) {
    pthread_mutex_lock(&mu);
    size_t sd = 0, ss = 0;
    char *rd = region(dst, bytes, &sd), *rs = region(src, bytes, &ss);
    if (!rd || !rs) {
        pthread_mutex_unlock(&mu);
        snprintf(err, sizeof err, "test backend: a copy outside device memory");
        return -1;
    }
    mprotect(rd, sd, PROT_READ | PROT_WRITE);
    mprotect(rs, ss, PROT_READ | PROT_WRITE);
    memmove(dst, src, bytes);
    mprotect(rd, sd, PROT_NONE);
    mprotect(rs, ss, PROT_NONE);
    counts.copies++;
    pthread_mutex_unlock(&mu);
    return 0;
}

static int copy(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    (void)ctx, (void)dev;
    return test_graph_recording() ? test_graph_copy(dst, src, bytes) : copy_now(dst, src, bytes);
}

static const cft_dev_op_api op_api = {cft_dev_op_name, cft_dev_op_nin, cft_dev_op_in,
                                      cft_dev_op_out, cft_dev_op_param};

/* a GEMM operand of `bytes` bytes of dt as f32: itself for f32 at full
 * precision, else a malloc'd copy widened from f16 / bf16 or rounded to
 * nearest-even TF32 (10 fraction bits, prec 1) or bf16 (7, prec 2) */
static float *as_f32(void *x, size_t bytes, cft_dtype dt, int prec) {
    if (dt == CFT_F32 && prec == 0)
        return x;
    size_t n = bytes / cft_dtype_size(dt);
    float *y = malloc(n * sizeof(float) + 1);
    for (size_t i = 0; y && i < n; i++)
        if (dt == CFT_F16)
            y[i] = cft_h2f(((const uint16_t *)x)[i]);
        else if (dt == CFT_BF16)
            y[i] = cft_bf2f(((const uint16_t *)x)[i]);
        else if (prec == 2)
            y[i] = cft_bfr(((const float *)x)[i]);
        else { /* TF32: the low 13 bits of the fraction rounded away */
            uint32_t u = cft_f2u(((const float *)x)[i]);
            if ((u & 0x7f800000u) != 0x7f800000u)
                u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
            y[i] = cft_u2f(u);
        }
    return y;
}

/* dot_general as the mapped GEMM on the operands' opened mappings; false
 * when the mapping does not apply (the host fallback runs it) */
static bool gemm(const cft_dev_op_api *api, const cft_dev_op *op) {
    if (strcmp(api->name(op), "dot_general"))
        return false;
    pthread_mutex_lock(&mu);
    counts.dots++;
    pthread_mutex_unlock(&mu);
    cft_gemm_desc d;
    if (!cft_gemm_map_op(api, op, &d))
        return false;
    cft_dev_buf a = api->in(op, 0), b = api->in(op, 1), c = api->out(op, 0);
    cft_dtype dt = c.aval.dtype;
    pthread_mutex_lock(&mu);
    size_t sz[3];
    char *r[3] = {region(a.ptr, a.bytes, &sz[0]), region(b.ptr, b.bytes, &sz[1]),
                  region(c.ptr, c.bytes, &sz[2])};
    if (!r[0] || !r[1] || !r[2]) {
        pthread_mutex_unlock(&mu);
        return false;
    }
    for (int i = 0; i < 3; i++)
        mprotect(r[i], sz[i], PROT_READ | PROT_WRITE);
    CBLAS_TRANSPOSE ta = d.ta ? CblasTrans : CblasNoTrans, tb = d.tb ? CblasTrans : CblasNoTrans;
    if (dt == CFT_F64)
        for (int64_t t = 0; t < d.batch; t++)
            cblas_dgemm(CblasRowMajor, ta, tb, (int)d.m, (int)d.n, (int)d.k, 1.0,
                        (const double *)a.ptr + t * d.sa, (int)d.lda,
                        (const double *)b.ptr + t * d.sb, (int)d.ldb, 0.0,
                        (double *)c.ptr + t * d.sc, (int)d.ldc);
    else { /* in f32, as cuBLAS's GemmEx sums: operands widened from f16 / bf16 or
            * rounded to the precision's TF32 / bf16, the output rounded to its dtype */
        int prec = dt == CFT_F32 ? cft_gemm_precision(api, op) : 0;
        float *fa = as_f32(a.ptr, a.bytes, dt, prec), *fb = as_f32(b.ptr, b.bytes, dt, prec),
              *fc = dt == CFT_F32 ? (float *)c.ptr : malloc(c.bytes / cft_dtype_size(dt) * 4);
        for (int64_t t = 0; t < d.batch && fa && fb && fc; t++)
            cblas_sgemm(CblasRowMajor, ta, tb, (int)d.m, (int)d.n, (int)d.k, 1.0f, fa + t * d.sa,
                        (int)d.lda, fb + t * d.sb, (int)d.ldb, 0.0f, fc + t * d.sc, (int)d.ldc);
        for (size_t i = 0; dt != CFT_F32 && fc && i < c.bytes / 2; i++)
            ((uint16_t *)c.ptr)[i] = dt == CFT_BF16 ? cft_f2bf(fc[i]) : cft_f2h(fc[i]);
        if (fa != a.ptr)
            free(fa);
        if (fb != b.ptr)
            free(fb);
        if (fc != c.ptr)
            free(fc);
    }
    for (int i = 0; i < 3; i++)
        mprotect(r[i], sz[i], PROT_NONE);
    counts.gemms++;
    pthread_mutex_unlock(&mu);
    return true;
}

/* fft as the mapped batched transform (cuda/fft_map.h), with FFTW on the
 * opened mappings; false when the mapping does not apply */
static bool fft(const cft_dev_op_api *api, const cft_dev_op *op) {
    cft_fft_desc d;
    if (!cft_fft_map_op(api, op, &d))
        return false;
    cft_dev_buf x = api->in(op, 0), y = api->out(op, 0);
    pthread_mutex_lock(&mu);
    size_t sx = 0, sy = 0;
    char *rx = region(x.ptr, x.bytes, &sx), *ry = region(y.ptr, y.bytes, &sy);
    void *tmp = malloc(x.bytes ? x.bytes : 1); /* c2r overwrites its input */
    if (!rx || !ry || !tmp) {
        pthread_mutex_unlock(&mu);
        free(tmp);
        return false;
    }
    mprotect(rx, sx, PROT_READ | PROT_WRITE);
    mprotect(ry, sy, PROT_READ | PROT_WRITE);
    memcpy(tmp, x.ptr, x.bytes);
    int sign = d.type == CFT_FFT_C2C_FWD ? FFTW_FORWARD : FFTW_BACKWARD, b = (int)d.batch;
    int id = (int)d.idist, od = (int)d.odist;
    /* FFTW's double and float interfaces differ only in their prefix */
#define RUN(P, T)                                                                                    \
    do {                                                                                             \
        P##_plan p =                                                                                 \
            d.type == CFT_FFT_R2C   ? P##_plan_many_dft_r2c(d.rank, d.n, b, tmp, NULL, 1, id, y.ptr, \
                                                            NULL, 1, od, FFTW_ESTIMATE)              \
            : d.type == CFT_FFT_C2R ? P##_plan_many_dft_c2r(d.rank, d.n, b, tmp, NULL, 1, id,        \
                                                            y.ptr, NULL, 1, od, FFTW_ESTIMATE)       \
                                    : P##_plan_many_dft(d.rank, d.n, b, tmp, NULL, 1, id, y.ptr,     \
                                                        NULL, 1, od, sign, FFTW_ESTIMATE);           \
        P##_execute(p);                                                                              \
        P##_destroy_plan(p);                                                                         \
        T *o = y.ptr;                                                                                \
        for (int64_t i = 0; i < reals && d.scale != 1.0; i++)                                        \
            o[i] = (T)(o[i] * d.scale);                                                              \
    } while (0)
    int64_t reals = d.out_numel * (d.type == CFT_FFT_C2R ? 1 : 2);
    if (d.dbl)
        RUN(fftw, double);
    else
        RUN(fftwf, float);
#undef RUN
    mprotect(rx, sx, PROT_NONE);
    mprotect(ry, sy, PROT_NONE);
    free(tmp);
    counts.ffts++;
    pthread_mutex_unlock(&mu);
    return true;
}

/* opens the mappings of n buffers (under mu): false if one is not device memory */
static bool open_all(const cft_dev_buf *b, int n, char **r, size_t *sz) {
    for (int i = 0; i < n; i++)
        if (!(r[i] = region(b[i].ptr, b[i].bytes, &sz[i])))
            return false;
    for (int i = 0; i < n; i++)
        mprotect(r[i], sz[i], PROT_READ | PROT_WRITE);
    return true;
}
static void close_all(int n, char **r, const size_t *sz) {
    for (int i = 0; i < n; i++)
        mprotect(r[i], sz[i], PROT_NONE);
}

/* cholesky as solver_map.h maps it (S, potrf of the column-major upper
 * triangle, the row-major upper zeroed): 1 done, 0 not mapped, -1 failed */
static int chol(const cft_dev_op *op) {
    cft_chol_desc d;
    if (!cft_chol_map_op(&op_api, op, &d))
        return 0;
    cft_dev_buf b[2] = {cft_dev_op_in(op, 0), cft_dev_op_out(op, 0)};
    char *r[2];
    size_t sz[2];
    pthread_mutex_lock(&mu);
    if (!open_all(b, 2, r, sz)) {
        pthread_mutex_unlock(&mu);
        return 0;
    }
    int64_t n = d.n, nn = n * n, bad = -1;
    int info = 0;
    /* steps 1 and 2 are the CUDA backend's own kernels, run on the host */
    struct {
        void *y;
        const void *a;
        long long n, total;
    } p = {b[1].ptr, b[0].ptr, (long long)n, (long long)(d.batch * nn)};
    char entry[32];
    snprintf(entry, sizeof entry, "cft_chol_sym_%c", d.dbl ? 'd' : 'f');
    int rc = host_kernel_run(CFT_CHOL_KERNELS, entry, &p, err, sizeof err);
    for (int64_t k = 0; k < d.batch && !info && !rc; k++)
        if ((info = d.dbl ? LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'U', (int)n,
                                           (double *)b[1].ptr + k * nn, (int)n)
                          : LAPACKE_spotrf(LAPACK_COL_MAJOR, 'U', (int)n,
                                           (float *)b[1].ptr + k * nn, (int)n)) != 0)
            bad = k;
    p.a = p.y;
    snprintf(entry, sizeof entry, "cft_chol_zero_%c", d.dbl ? 'd' : 'f');
    if (!rc && !info)
        rc = host_kernel_run(CFT_CHOL_KERNELS, entry, &p, err, sizeof err);
    close_all(2, r, sz);
    counts.solvers++;
    pthread_mutex_unlock(&mu);
    if (rc)
        return -1;
    if (info > 0)
        snprintf(err, sizeof err,
                 "cholesky on test: batch element %lld is not positive definite (leading minor "
                 "of order %d)",
                 (long long)bad, info);
    else if (info < 0)
        snprintf(err, sizeof err, "cholesky on test: potrf: info %d", info);
    return info ? -1 : 1;
}

/* solve as solver_map.h maps it (getrf on a copy of A, two column-major
 * right solves on a copy of B, the row swaps as the CUDA backend's
 * kernel): 1 done, 0 not mapped, -1 failed (singular) */
_Static_assert(sizeof(lapack_int) == sizeof(int), "getrf's pivots as the kernel reads them");
static int lu(const cft_dev_op_api *api, const cft_dev_op *op) {
    cft_lu_desc d;
    if (!cft_lu_map_op(api, op, &d))
        return 0;
    cft_dev_buf b[3] = {api->in(op, 0), api->in(op, 1), api->out(op, 0)};
    int64_t n = d.n, k = d.k, nn = n * n;
    size_t es = d.dbl ? 8 : 4;
    char *fac = malloc((size_t)(d.batch * nn) * es);
    int *piv = malloc(sizeof(int) * (size_t)(d.batch * n));
    char *r[3];
    size_t sz[3];
    pthread_mutex_lock(&mu);
    if (!fac || !piv || !open_all(b, 3, r, sz)) {
        pthread_mutex_unlock(&mu);
        free(fac), free(piv);
        return 0;
    }
    memcpy(fac, b[0].ptr, (size_t)(d.batch * nn) * es);
    memcpy(b[2].ptr, b[1].ptr, b[1].bytes);
    int info = 0, rc = 0;
    int64_t bad = -1;
    for (int64_t m = 0; m < d.batch && !info; m++) {
        lapack_int *pv = (lapack_int *)(piv + m * n);
        info = d.dbl ? LAPACKE_dgetrf(LAPACK_COL_MAJOR, (int)n, (int)n, (double *)fac + m * nn,
                                      (int)n, pv)
                     : LAPACKE_sgetrf(LAPACK_COL_MAJOR, (int)n, (int)n, (float *)fac + m * nn,
                                      (int)n, pv);
        bad = info ? m : bad;
    }
    struct {
        void *x;
        const int *piv;
        long long n, k, batch, fwd;
    } sw = {b[2].ptr, piv, (long long)n, (long long)k, (long long)d.batch, 1};
    const char *entry = d.dbl ? "cft_lu_swap_d" : "cft_lu_swap_f";
    if (!info && d.tr && k)
        rc = host_kernel_run(CFT_LU_KERNELS, entry, &sw, err, sizeof err);
    for (int st = 0; st < 2 && !info && !rc && k; st++)
        for (int64_t m = 0; m < d.batch; m++) {
            CBLAS_UPLO up = d.solve[st].upper ? CblasUpper : CblasLower;
            CBLAS_TRANSPOSE tr = d.solve[st].trans ? CblasTrans : CblasNoTrans;
            CBLAS_DIAG dg = d.solve[st].unit ? CblasUnit : CblasNonUnit;
            if (d.dbl)
                cblas_dtrsm(CblasColMajor, CblasRight, up, tr, dg, (int)k, (int)n, 1.0,
                            (const double *)fac + m * nn, (int)n, (double *)b[2].ptr + m * n * k,
                            (int)k);
            else
                cblas_strsm(CblasColMajor, CblasRight, up, tr, dg, (int)k, (int)n, 1.0f,
                            (const float *)fac + m * nn, (int)n, (float *)b[2].ptr + m * n * k,
                            (int)k);
        }
    sw.fwd = 0;
    if (!info && !d.tr && !rc && k)
        rc = host_kernel_run(CFT_LU_KERNELS, entry, &sw, err, sizeof err);
    close_all(3, r, sz);
    counts.solvers++;
    pthread_mutex_unlock(&mu);
    free(fac), free(piv);
    if (info > 0)
        snprintf(err, sizeof err,
                 "solve on test: batch element %lld is singular (U[%d, %d] is zero)",
                 (long long)bad, info - 1, info - 1);
    else if (info < 0)
        snprintf(err, sizeof err, "solve on test: getrf: info %d", info);
    return info || rc ? -1 : 1;
}

/* slogdet as solver_map.h maps it (getrf on a copy of A, the CUDA
 * backend's kernel for the signs and logs): 1 done, 0 not mapped, -1
 * failed */
static int slogdet(const cft_dev_op_api *api, const cft_dev_op *op) {
    cft_slogdet_desc d;
    if (!cft_slogdet_map_op(api, op, &d))
        return 0;
    cft_dev_buf b[3] = {api->in(op, 0), api->out(op, 0), api->out(op, 1)};
    int64_t n = d.n, nn = n * n;
    size_t es = d.dbl ? 8 : 4;
    char *fac = malloc((size_t)(d.batch * nn) * es);
    int *piv = malloc(sizeof(int) * (size_t)(d.batch * n)),
        *info = malloc(sizeof(int) * (size_t)d.batch);
    char *r[3];
    size_t sz[3];
    pthread_mutex_lock(&mu);
    if (!fac || !piv || !info || !open_all(b, 3, r, sz)) {
        pthread_mutex_unlock(&mu);
        free(fac), free(piv), free(info);
        return 0;
    }
    memcpy(fac, b[0].ptr, (size_t)(d.batch * nn) * es);
    int bad = 0;
    for (int64_t m = 0; m < d.batch && !bad; m++) {
        lapack_int *pv = (lapack_int *)(piv + m * n);
        info[m] = d.dbl ? LAPACKE_dgetrf(LAPACK_COL_MAJOR, (int)n, (int)n, (double *)fac + m * nn,
                                         (int)n, pv)
                        : LAPACKE_sgetrf(LAPACK_COL_MAJOR, (int)n, (int)n, (float *)fac + m * nn,
                                         (int)n, pv);
        bad = info[m] < 0 ? info[m] : 0;
    }
    struct {
        const void *fac;
        const int *piv, *info;
        void *sign, *lad;
        long long n, batch;
    } p = {fac, piv, info, b[1].ptr, b[2].ptr, (long long)n, (long long)d.batch};
    int rc = bad ? 0
                 : host_kernel_run(CFT_SLOGDET_KERNELS, d.dbl ? "cft_slogdet_d" : "cft_slogdet_f",
                                   &p, err, sizeof err);
    close_all(3, r, sz);
    counts.solvers++;
    pthread_mutex_unlock(&mu);
    free(fac), free(piv), free(info);
    if (bad)
        snprintf(err, sizeof err, "slogdet on test: getrf: info %d", bad);
    return bad || rc ? -1 : 1;
}

/* eigh as solver_map.h maps it (column-major syevd 'U' on a copy of A,
 * the eigenvalues straight into the output, V transposed by the CUDA
 * backend's kernel): 1 done, 0 not mapped, -1 failed */
static int eigh(const cft_dev_op_api *api, const cft_dev_op *op) {
    cft_eigh_desc d;
    if (!cft_eigh_map_op(api, op, &d))
        return 0;
    cft_dev_buf b[3] = {api->in(op, 0), api->out(op, 0), api->out(op, 1)};
    int64_t n = d.n, nn = n * n;
    char *work = malloc(b[0].bytes ? b[0].bytes : 1);
    char *r[3];
    size_t sz[3];
    pthread_mutex_lock(&mu);
    if (!work || !open_all(b, 3, r, sz)) {
        pthread_mutex_unlock(&mu);
        free(work);
        return 0;
    }
    memcpy(work, b[0].ptr, b[0].bytes);
    int info = 0, rc = 0;
    int64_t bad = -1;
    for (int64_t m = 0; m < d.batch && !info; m++) {
        info = d.dbl ? LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', (int)n, (double *)work + m * nn,
                                      (int)n, (double *)b[1].ptr + m * n)
                     : LAPACKE_ssyevd(LAPACK_COL_MAJOR, 'V', 'U', (int)n, (float *)work + m * nn,
                                      (int)n, (float *)b[1].ptr + m * n);
        bad = info ? m : bad;
    }
    struct {
        void *y;
        const void *x;
        long long n, total;
    } t = {b[2].ptr, work, (long long)n, (long long)(d.batch * nn)};
    if (!info)
        rc = host_kernel_run(CFT_EIGH_KERNELS, d.dbl ? "cft_eigh_vt_d" : "cft_eigh_vt_f", &t, err,
                             sizeof err);
    close_all(3, r, sz);
    counts.solvers++;
    pthread_mutex_unlock(&mu);
    free(work);
    if (info)
        snprintf(err, sizeof err, "eigh on test: syevd failed on batch element %lld (info %d)",
                 (long long)bad, info);
    return info || rc ? -1 : 1;
}

/* qr as solver_map.h maps it (A written column-major, geqrf and orgqr per
 * matrix, R and Q written row-major, all by the CUDA backend's kernels):
 * 1 done, 0 not mapped, -1 failed */
static int qr(const cft_dev_op_api *api, const cft_dev_op *op) {
    cft_qr_desc d;
    if (!cft_qr_map_op(api, op, &d))
        return 0;
    cft_dev_buf b[3] = {api->in(op, 0), api->out(op, 0), api->out(op, 1)};
    int64_t m = d.m, n = d.n, k = d.k, mn = m * n;
    size_t es = d.dbl ? 8 : 4;
    char *work = malloc(b[0].bytes ? b[0].bytes : 1), *tau = malloc((size_t)(k + 1) * es);
    char *r[3];
    size_t sz[3];
    pthread_mutex_lock(&mu);
    if (!work || !tau || !open_all(b, 3, r, sz)) {
        pthread_mutex_unlock(&mu);
        free(work), free(tau);
        return 0;
    }
    struct {
        void *y;
        const void *x;
        long long m, n, k, total;
    } t = {work, b[0].ptr, (long long)m, (long long)n, (long long)k, (long long)(d.batch * mn)};
    int info = 0, rc = host_kernel_run(CFT_QR_KERNELS, d.dbl ? "cft_qr_in_d" : "cft_qr_in_f", &t,
                                       err, sizeof err);
    for (int64_t e = 0; e < d.batch && k && !info && !rc; e++) {
        char *w = work + (size_t)(e * mn) * es;
        info = d.dbl ? LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (int)m, (int)n, (double *)w, (int)m,
                                      (double *)tau)
                     : LAPACKE_sgeqrf(LAPACK_COL_MAJOR, (int)m, (int)n, (float *)w, (int)m,
                                      (float *)tau);
        if (info)
            break;
        /* R before orgqr overwrites the triangle: this matrix's rows */
        struct {
            void *y;
            const void *x;
            long long m, n, k, total;
        } tr = {(char *)b[2].ptr + (size_t)(e * k * n) * es,
                w,
                (long long)m,
                (long long)n,
                (long long)k,
                (long long)(k * n)};
        rc = host_kernel_run(CFT_QR_KERNELS, d.dbl ? "cft_qr_r_d" : "cft_qr_r_f", &tr, err,
                             sizeof err);
        info = rc      ? 0
               : d.dbl ? LAPACKE_dorgqr(LAPACK_COL_MAJOR, (int)m, (int)k, (int)k, (double *)w,
                                        (int)m, (const double *)tau)
                       : LAPACKE_sorgqr(LAPACK_COL_MAJOR, (int)m, (int)k, (int)k, (float *)w,
                                        (int)m, (const float *)tau);
    }
    t.y = b[1].ptr, t.x = work, t.total = (long long)(d.batch * m * k);
    if (!info && !rc && k)
        rc = host_kernel_run(CFT_QR_KERNELS, d.dbl ? "cft_qr_q_d" : "cft_qr_q_f", &t, err,
                             sizeof err);
    close_all(3, r, sz);
    counts.solvers++;
    pthread_mutex_unlock(&mu);
    free(work), free(tau);
    if (info)
        snprintf(err, sizeof err, "qr on test: geqrf / orgqr: info %d", info);
    return info || rc ? -1 : 1;
}

/* svd as solver_map.h maps it (column-major gesvd 'S' on W, rows >= cols:
 * A as it lies when m < n, the outputs written in place; else A written
 * column-major and U, VT written row-major, all by the CUDA backend's
 * kernel): 1 done, 0 not mapped, -1 failed */
static int svd(const cft_dev_op_api *api, const cft_dev_op *op) {
    cft_svd_desc d;
    if (!cft_svd_map_op(api, op, &d))
        return 0;
    cft_dev_buf b[4] = {api->in(op, 0), api->out(op, 0), api->out(op, 1), api->out(op, 2)};
    int64_t rows = d.rows, cols = d.cols, k = d.k, rc = rows * cols;
    size_t es = d.dbl ? 8 : 4;
    char *w = malloc(b[0].bytes), *u = malloc((size_t)(d.batch * rows * k) * es),
         *vt = malloc((size_t)(d.batch * k * cols) * es), *sup = malloc((size_t)(k + 1) * es);
    char *r[4];
    size_t sz[4];
    pthread_mutex_lock(&mu);
    if (!w || !u || !vt || !sup || !open_all(b, 4, r, sz)) {
        pthread_mutex_unlock(&mu);
        free(w), free(u), free(vt), free(sup);
        return 0;
    }
    struct {
        void *y;
        const void *x;
        long long rows, cols, total;
    } t = {w, b[0].ptr, (long long)d.n, (long long)d.m, (long long)(d.batch * rc)};
    const char *kern = d.dbl ? "cft_svd_t_d" : "cft_svd_t_f";
    int rcode = 0, info = 0;
    if (d.tr)
        memcpy(w, b[0].ptr, b[0].bytes);
    else
        rcode = host_kernel_run(CFT_SVD_KERNELS, kern, &t, err, sizeof err);
    /* with tr, U is Vh row-major and VT is U row-major: in place */
    char *U = d.tr ? b[3].ptr : u, *VT = d.tr ? b[1].ptr : vt;
    for (int64_t e = 0; e < d.batch && !rcode && !info; e++)
        info = d.dbl ? LAPACKE_dgesvd(LAPACK_COL_MAJOR, 'S', 'S', (int)rows, (int)cols,
                                      (double *)w + e * rc, (int)rows, (double *)b[2].ptr + e * k,
                                      (double *)U + e * rows * k, (int)rows,
                                      (double *)VT + e * k * cols, (int)k, (double *)sup)
                     : LAPACKE_sgesvd(LAPACK_COL_MAJOR, 'S', 'S', (int)rows, (int)cols,
                                      (float *)w + e * rc, (int)rows, (float *)b[2].ptr + e * k,
                                      (float *)U + e * rows * k, (int)rows,
                                      (float *)VT + e * k * cols, (int)k, (float *)sup);
    if (!d.tr && !rcode && !info) { /* U (m x k) and VT (k x n) row-major */
        t.y = b[1].ptr, t.x = u, t.rows = d.m, t.cols = k, t.total = (long long)(d.batch * d.m * k);
        rcode = host_kernel_run(CFT_SVD_KERNELS, kern, &t, err, sizeof err);
        t.y = b[3].ptr, t.x = vt, t.rows = k, t.cols = d.n,
        t.total = (long long)(d.batch * k * d.n);
        if (!rcode)
            rcode = host_kernel_run(CFT_SVD_KERNELS, kern, &t, err, sizeof err);
    }
    close_all(4, r, sz);
    counts.solvers++;
    pthread_mutex_unlock(&mu);
    free(w), free(u), free(vt), free(sup);
    if (info)
        snprintf(err, sizeof err, "svd on test: gesvd: info %d", info);
    return info || rcode ? -1 : 1;
}

/* triangular_solve as solver_map.h maps it (column-major trsm on a copy of
 * B): 1 done, 0 not mapped */
static int trsm(const cft_dev_op_api *api, const cft_dev_op *op) {
    cft_trsm_desc d;
    if (!cft_trsm_map_op(api, op, &d))
        return 0;
    cft_dev_buf b[3] = {api->in(op, 0), api->in(op, 1), api->out(op, 0)};
    char *r[3];
    size_t sz[3];
    pthread_mutex_lock(&mu);
    if (!open_all(b, 3, r, sz)) {
        pthread_mutex_unlock(&mu);
        return 0;
    }
    memcpy(b[2].ptr, b[1].ptr, b[1].bytes);
    CBLAS_SIDE side = d.left ? CblasLeft : CblasRight;
    CBLAS_UPLO uplo = d.upper ? CblasUpper : CblasLower;
    CBLAS_TRANSPOSE tr = d.trans ? CblasTrans : CblasNoTrans;
    CBLAS_DIAG diag = d.unit ? CblasUnit : CblasNonUnit;
    for (int64_t k = 0; k < d.batch; k++)
        if (d.dbl)
            cblas_dtrsm(CblasColMajor, side, uplo, tr, diag, (int)d.m, (int)d.n, 1.0,
                        (const double *)b[0].ptr + k * d.sa, (int)d.lda,
                        (double *)b[2].ptr + k * d.sb, (int)d.ldb);
        else
            cblas_strsm(CblasColMajor, side, uplo, tr, diag, (int)d.m, (int)d.n, 1.0f,
                        (const float *)b[0].ptr + k * d.sa, (int)d.lda,
                        (float *)b[2].ptr + k * d.sb, (int)d.ldb);
    close_all(3, r, sz);
    counts.solvers++;
    pthread_mutex_unlock(&mu);
    return 1;
}

/* the operations a recording replays (read through api): 1 done, 0 not
 * mapped (a recording could not replay it) */
static int run_mapped(const cft_dev_op_api *api, const cft_dev_op *op) {
    return gemm(api, op) || fft(api, op) || trsm(api, op) ? 1 : 0;
}

static int run(void *ctx, int dev, const cft_dev_op *op) {
    (void)ctx, (void)dev;
    pthread_mutex_lock(&mu);
    counts.runs++;
    pthread_mutex_unlock(&mu);
    if (test_graph_recording()) { /* what a replay can run is recorded; the rest spoils it */
        cft_gemm_desc g;
        cft_fft_desc f;
        cft_trsm_desc t;
        if (cft_gemm_map_op(&op_api, op, &g) || cft_fft_map_op(&op_api, op, &f) ||
            cft_trsm_map_op(&op_api, op, &t))
            test_graph_op(&op_api, op);
        else
            test_graph_spoil("an operation on the host");
        return 0;
    }
    if (run_mapped(&op_api, op))
        return 0;
    int done = chol(op);
    if (!done)
        done = lu(&op_api, op);
    if (!done)
        done = slogdet(&op_api, op);
    if (!done)
        done = eigh(&op_api, op);
    if (!done)
        done = qr(&op_api, op);
    if (!done)
        done = svd(&op_api, op);
    if (done)
        return done > 0 ? 0 : -1;
    if (cft_dev_op_run_on_host(op) != CFT_OK) {
        snprintf(err, sizeof err, "%s", cft_last_error_message());
        return -1;
    }
    return 0;
}

static int kernel_now(const cft_dev_kernel *k) {
    pthread_mutex_lock(&mu);
    size_t sz[64];
    char *r[64];
    int n = k->nptrs < 64 ? k->nptrs : 64, ok = k->nptrs <= 64;
    for (int i = 0; i < n && ok; i++) {
        r[i] = region(k->ptrs[i], 1, &sz[i]);
        ok = r[i] != NULL;
    }
    if (!ok) {
        pthread_mutex_unlock(&mu);
        snprintf(err, sizeof err, "test backend: %s: an operand outside device memory", k->entry);
        return -1;
    }
    for (int i = 0; i < n; i++)
        mprotect(r[i], sz[i], PROT_READ | PROT_WRITE);
    int rc = host_kernel_run(k->source, k->entry, k->args, err, sizeof err);
    for (int i = 0; i < n; i++)
        mprotect(r[i], sz[i], PROT_NONE);
    counts.kernels += rc == 0;
    pthread_mutex_unlock(&mu);
    return rc;
}

static int run_kernel(void *ctx, int dev, const cft_dev_kernel *k) {
    (void)ctx, (void)dev;
    if (test_graph_recording())
        return test_graph_kernel(k);
    return kernel_now(k);
}

static int begin_capture(void *ctx, int dev) {
    (void)ctx;
    return test_graph_begin(dev);
}
static int end_capture(void *ctx, int dev, void **graph) {
    (void)ctx, (void)dev;
    int rc = test_graph_end(graph);
    if (rc)
        snprintf(err, sizeof err, "test backend: not captured: %s", test_graph_why());
    return rc;
}
static int launch_graph(void *ctx, int dev, void *graph) {
    (void)ctx, (void)dev;
    static const test_graph_exec x = {kernel_now, run_mapped, copy_now};
    pthread_mutex_lock(&mu);
    counts.graphs++;
    pthread_mutex_unlock(&mu);
    return test_graph_launch(graph, &x);
}
static void release_graph(void *ctx, int dev, void *graph) {
    (void)ctx, (void)dev;
    pthread_mutex_lock(&mu);
    counts.graphs_released++;
    pthread_mutex_unlock(&mu);
    test_graph_release(graph);
}

#ifdef TEST_BACKEND_MPI
/* Communicators (abi 4) for the dist tests: non-blocking MPI collectives
 * on the world communicator over the opened device memory, which stays
 * open until the collective completes. TEST_BACKEND_COMM_STALL=1: a
 * communicator that never forms (the deadline test). */
#include "dist/dist.h" /* cft__dist_mpi_lock: every MPI call under cft_dist's lock */

enum { MAX_INFLIGHT = 64 };
typedef struct {
    int rank, nranks;
    bool stall;
    int n; /* collectives in flight, each with its two mappings open */
    MPI_Request req[MAX_INFLIGHT];
    char *r[MAX_INFLIGHT][2];
    size_t sz[MAX_INFLIGHT][2];
} test_comm;

static int comm_id(void *ctx, void *id, size_t *size) {
    (void)ctx;
    static const char tag[] = "test-comm";
    if (*size < sizeof tag)
        return -1;
    memcpy(id, tag, sizeof tag);
    *size = sizeof tag;
    return 0;
}

static int comm_init(void *ctx, int dev, const void *id, size_t size, int nranks, int rank,
                     void **comm) {
    (void)ctx, (void)dev;
    int world = 0;
    cft__dist_mpi_lock();
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    cft__dist_mpi_unlock();
    if (size != sizeof "test-comm" || memcmp(id, "test-comm", size) || nranks != world) {
        snprintf(err, sizeof err, "test backend: not rank 0's id, or not the world (%d of %d)",
                 nranks, world);
        return -1;
    }
    test_comm *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    const char *st = getenv("TEST_BACKEND_COMM_STALL");
    c->rank = rank, c->nranks = nranks, c->stall = st && !strcmp(st, "1");
    *comm = c;
    return 0;
}

static int comm_poll(void *ctx, int dev, void *comm) {
    (void)ctx, (void)dev;
    test_comm *c = comm;
    if (c->stall)
        return 0;
    if (!c->n)
        return 1;
    int done = 0;
    cft__dist_mpi_lock();
    MPI_Testall(c->n, c->req, &done, MPI_STATUSES_IGNORE);
    cft__dist_mpi_unlock();
    if (!done)
        return 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < c->n; i++)
        close_all(2, c->r[i], c->sz[i]);
    pthread_mutex_unlock(&mu);
    c->n = 0;
    return 1;
}

static void comm_abort(void *ctx, int dev, void *comm) {
    (void)ctx, (void)dev;
    test_comm *c = comm;
    if (!c->n) /* (an MPI collective in flight cannot be cancelled: it is left) */
        free(c);
}

static int collective(void *ctx, int dev, void *comm, int kind, const void *send, void *recv,
                      size_t count, cft_dtype dt, int op, int root) {
    (void)ctx, (void)dev;
    test_comm *c = comm;
    if (test_graph_recording()) { /* cft waits on it: it cannot be recorded (nor on CUDA) */
        test_graph_spoil("a collective");
        return -1;
    }
    static const MPI_Op ops[] = {[CFT_COLL_SUM] = MPI_SUM,
                                 [CFT_COLL_PROD] = MPI_PROD,
                                 [CFT_COLL_MAX] = MPI_MAX,
                                 [CFT_COLL_MIN] = MPI_MIN};
    bool red = kind == CFT_COLL_ALL_REDUCE || kind == CFT_COLL_REDUCE_SCATTER;
    MPI_Datatype t = dt == CFT_F32                               ? MPI_FLOAT
                     : dt == CFT_F64                             ? MPI_DOUBLE
                     : dt == CFT_I32                             ? MPI_INT32_T
                     : dt == CFT_I64                             ? MPI_INT64_T
                     : !red && (dt == CFT_F16 || dt == CFT_BF16) ? MPI_UINT16_T
                     : !red && dt == CFT_BOOL                    ? MPI_UINT8_T
                                                                 : MPI_DATATYPE_NULL;
    if (t == MPI_DATATYPE_NULL || op < 0 || op > CFT_COLL_MIN) {
        snprintf(err, sizeof err, "test backend: no collective of %s", cft_dtype_name(dt));
        return -1;
    }
    size_t es = cft_dtype_size(dt);
    size_t in_bytes = count * es * (kind == CFT_COLL_REDUCE_SCATTER ? (size_t)c->nranks : 1),
           out_bytes = count * es * (kind == CFT_COLL_ALL_GATHER ? (size_t)c->nranks : 1);
    cft_dev_buf b[2] = {{.ptr = (void *)send, .bytes = in_bytes},
                        {.ptr = recv, .bytes = out_bytes}};
    if (c->n == MAX_INFLIGHT) {
        snprintf(err, sizeof err, "test backend: %d collectives in flight", MAX_INFLIGHT);
        return -1;
    }
    int k = c->n;
    pthread_mutex_lock(&mu);
    if (!open_all(b, 2, c->r[k], c->sz[k])) {
        pthread_mutex_unlock(&mu);
        snprintf(err, sizeof err, "test backend: a collective outside device memory");
        return -1;
    }
    counts.collectives++;
    pthread_mutex_unlock(&mu);
    c->n++;
    int n = (int)count;
    MPI_Request *rq = &c->req[k];
    cft__dist_mpi_lock();
    if (kind == CFT_COLL_ALL_REDUCE)
        MPI_Iallreduce(send, recv, n, t, ops[op], MPI_COMM_WORLD, rq);
    else if (kind == CFT_COLL_BROADCAST) {
        if (c->rank == root)
            memcpy(recv, send, count * es);
        MPI_Ibcast(recv, n, t, root, MPI_COMM_WORLD, rq);
    } else if (kind == CFT_COLL_ALL_GATHER)
        MPI_Iallgather(send, n, t, recv, n, t, MPI_COMM_WORLD, rq);
    else
        MPI_Ireduce_scatter_block(send, recv, n, t, ops[op], MPI_COMM_WORLD, rq);
    cft__dist_mpi_unlock();
    return 0;
}
#endif

static int sync_(void *ctx, int dev) {
    (void)ctx, (void)dev;
    pthread_mutex_lock(&mu);
    counts.syncs++;
    pthread_mutex_unlock(&mu);
    return 0;
}

/* markers of device time (abi 5): every step here has finished when its
 * call returns, so a marker is the time it is made */
static void *mark(void *ctx, int dev) {
    (void)ctx, (void)dev;
    struct timespec *t = malloc(sizeof *t);
    if (t)
        clock_gettime(CLOCK_MONOTONIC, t);
    pthread_mutex_lock(&mu);
    counts.marks += t != NULL;
    pthread_mutex_unlock(&mu);
    return t;
}
static int elapsed(void *ctx, int dev, void *from, void *to, double *ms) {
    (void)ctx, (void)dev;
    const struct timespec *a = from, *b = to;
    *ms = (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) * 1e-6;
    return 0;
}
static void drop_mark(void *ctx, int dev, void *m) {
    (void)ctx, (void)dev;
    free(m);
}

static const char *last_error(void *ctx) {
    (void)ctx;
    return err[0] ? err : NULL;
}

int test_backend_register(void) {
    return test_backend_register_as("test", 0);
}

int test_backend_register_as(const char *name, unsigned flags) {
    const char *e = getenv("TEST_BACKEND_KERNELS");
    cft_backend b = {0};
    b.abi = CFT_BACKEND_ABI, b.name = name, b.device_count = count, b.alloc = alloc;
    b.release = release, b.to_device = to_device, b.to_host = to_host, b.copy = copy;
    b.run = run, b.synchronize = sync_, b.last_error = last_error;
    b.run_kernel = e && !strcmp(e, "0") ? NULL : run_kernel;
    b.flags = flags;
#ifdef TEST_BACKEND_MPI
    const char *cm = getenv("TEST_BACKEND_COMMS");
    if (!(cm && !strcmp(cm, "0")))
        b.comm_id = comm_id, b.comm_init = comm_init, b.comm_poll = comm_poll,
        b.comm_abort = comm_abort, b.collective = collective;
#endif
    const char *mk = getenv("TEST_BACKEND_MARKS");
    if (!(mk && !strcmp(mk, "0")))
        b.mark = mark, b.elapsed = elapsed, b.drop_mark = drop_mark;
    const char *g = getenv("TEST_BACKEND_GRAPHS");
    if (b.run_kernel && !(g && !strcmp(g, "0")))
        b.begin_capture = begin_capture, b.end_capture = end_capture, b.launch_graph = launch_graph,
        b.release_graph = release_graph;
    return cft_register_backend(&b) == CFT_OK ? 0 : -1;
}

int test_backend_register_abi1(const char *name) {
    /* a table as a backend built against abi 1 fills it: no run_kernel */
    struct {
        int abi;
        const char *name;
        void *ctx;
        void *fns[9];
    } t = {1, name, NULL, {0}};
    void *fns[9] = {(void *)count,     (void *)alloc,   (void *)release,
                    (void *)to_device, (void *)to_host, (void *)copy,
                    (void *)run,       (void *)sync_,   (void *)last_error};
    memcpy(t.fns, fns, sizeof fns);
    return cft_register_backend((const cft_backend *)&t) == CFT_OK ? 0 : -1;
}

test_backend_counts test_backend_counts_now(void) {
    pthread_mutex_lock(&mu);
    test_backend_counts c = counts;
    pthread_mutex_unlock(&mu);
    return c;
}

long test_backend_live_bytes(void) {
    pthread_mutex_lock(&mu);
    long n = live_bytes;
    pthread_mutex_unlock(&mu);
    return n;
}
