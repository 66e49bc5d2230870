/* blas.c: dot_general on cuBLAS in the CUDA backend. A product whose
 * operands map to one strided batched GEMM (cuda/gemm_map.h: batch dims
 * leading, each operand plain or transposed) is one call on the device's
 * memory: cublas<S|D>gemmStridedBatched in f32 or f64, and
 * cublasGemmStridedBatchedEx on tensor cores, summing in f32, for f16 and
 * bf16 and for f32 issued under cft_set_float32_matmul_precision's HIGH
 * (TF32) or MEDIUM (bf16); anything else goes back to the caller. cuBLAS
 * is found where this machine has it (locate.c), after checking that no
 * other user can change it, so the plugin links nothing of CUDA. One
 * handle per device, used under that device's lock (a cuBLAS handle is
 * not for two threads at once). cft's arrays are row-major and cuBLAS's
 * column-major: C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T,
 * i.e. with the operands swapped. Written against cuBLAS 13; the mapping
 * runs in every per-primitive test through the test backend, which sums
 * half and reduced-precision products as GemmEx does. */
#include <cublas_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_plugin.h"
#include "cuda/gemm_map.h"
#include "cuda/solver_map.h"

static struct {
    void *lib;
    cublasStatus_t (*create)(cublasHandle_t *);
    const char *(*status)(cublasStatus_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const float *, const float *, int, long long, const float *, int,
                            long long, const float *, float *, int, long long, int);
    cublasStatus_t (*dgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const double *, const double *, int, long long, const double *, int,
                            long long, const double *, double *, int, long long, int);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                              const void *, const void *, cudaDataType, int, long long,
                              const void *, cudaDataType, int, long long, const void *, void *,
                              cudaDataType, int, long long, int, cublasComputeType_t,
                              cublasGemmAlgo_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*sgetrf)(cublasHandle_t, int, float *const[], int, int *, int *, int);
    cublasStatus_t (*dgetrf)(cublasHandle_t, int, double *const[], int, int *, int *, int);
    cublasStatus_t (*strsm)(cublasHandle_t, cublasSideMode_t, cublasFillMode_t, cublasOperation_t,
                            cublasDiagType_t, int, int, const float *, const float *const[], int,
                            float *const[], int, int);
    cublasStatus_t (*dtrsm)(cublasHandle_t, cublasSideMode_t, cublasFillMode_t, cublasOperation_t,
                            cublasDiagType_t, int, int, const double *, const double *const[], int,
                            double *const[], int, int);
    cublasHandle_t handle[CFT_CUDA_MAX_DEV];
    pthread_mutex_t mu[CFT_CUDA_MAX_DEV];
} bl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_err[1200];

static void load(void) {
    for (int i = 0; i < CFT_CUDA_MAX_DEV; i++)
        pthread_mutex_init(&bl.mu[i], NULL);
    static const char *const sonames[] = {"libcublas.so.13", "libcublas.so.12", NULL};
#ifdef CFT_CUBLAS_PATH
    const char *built = CFT_CUBLAS_PATH; /* the build machine's, tried last */
#else
    const char *built = NULL;
#endif
    void **const slots[] = {(void **)&bl.create,     (void **)&bl.status, (void **)&bl.sgemm,
                            (void **)&bl.dgemm,      (void **)&bl.strsm,  (void **)&bl.dtrsm,
                            (void **)&bl.set_stream, (void **)&bl.sgetrf, (void **)&bl.dgetrf,
                            (void **)&bl.gemm_ex};
    static const char *const names[] = {"cublasCreate_v2",           "cublasGetStatusString",
                                        "cublasSgemmStridedBatched", "cublasDgemmStridedBatched",
                                        "cublasStrsmBatched",        "cublasDtrsmBatched",
                                        "cublasSetStream_v2",        "cublasSgetrfBatched",
                                        "cublasDgetrfBatched",       "cublasGemmStridedBatchedEx"};
    bl.lib = cft_cuda_find_lib(sonames, built, "cuBLAS", slots, names,
                               (int)(sizeof names / sizeof *names), load_err, sizeof load_err);
}

/* whether cuBLAS takes an operation on dev: 1 yes, 0 not loaded (the
 * caller's way), -1 the device has failed (the error set) */
static int ready(int dev, const char *what) {
    return cft_cuda_lib_ready(&once, load, load_err, dev, what);
}

/* device dev's handle (made on first use), on this thread's stream for
 * dev (cft_cuda_stream: a capture stream while capturing), its lock taken
 * (released by the caller, whatever the status) */
static cublasStatus_t lock_handle(int dev) {
    pthread_mutex_lock(&bl.mu[dev]);
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (!bl.handle[dev])
        s = bl.create(&bl.handle[dev]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = bl.set_stream(bl.handle[dev], (cudaStream_t)cft_cuda_stream(dev));
    return s;
}

/* trsmBatched of pointer arrays pa (lda) and px (ldb), under the lock */
static cublasStatus_t trsm_batched(int dev, bool dbl, bool left, bool upper, bool trans, bool unit,
                                   int64_t m, int64_t n, CUdeviceptr pa, int64_t lda,
                                   CUdeviceptr px, int64_t ldb, int64_t batch) {
    cublasSideMode_t side = left ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT;
    cublasFillMode_t uplo = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
    cublasOperation_t tr = trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasDiagType_t diag = unit ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT;
    if (dbl) {
        const double one = 1;
        return bl.dtrsm(bl.handle[dev], side, uplo, tr, diag, (int)m, (int)n, &one,
                        (const double *const *)(uintptr_t)pa, (int)lda,
                        (double *const *)(uintptr_t)px, (int)ldb, (int)batch);
    }
    const float one = 1;
    return bl.strsm(bl.handle[dev], side, uplo, tr, diag, (int)m, (int)n, &one,
                    (const float *const *)(uintptr_t)pa, (int)lda, (float *const *)(uintptr_t)px,
                    (int)ldb, (int)batch);
}

int cft_cuda_gemm(int dev, const cft_dev_op *op) {
    cft_gemm_desc d;
    if (dev < 0 || dev >= CFT_CUDA_MAX_DEV || !cft_gemm_map_op(&cft_cuda_core->op, op, &d))
        return 0;
    int go = ready(dev, "dot_general (cuBLAS)");
    if (go <= 0)
        return go; /* no cuBLAS: the caller's way */
    cublasStatus_t s = lock_handle(dev);
    if (s == CUBLAS_STATUS_SUCCESS) {
        const cft_dev_op_api *api = &cft_cuda_core->op;
        cft_dev_buf a = api->in(op, 0), b = api->in(op, 1), c = api->out(op, 0);
        cublasOperation_t oa = d.ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                          ob = d.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        /* column-major C^T [n, m] = op(B)^T [n, k] op(A)^T [k, m] */
        cft_dtype dt = c.aval.dtype;
        int prec = dt == CFT_F32 ? cft_gemm_precision(&cft_cuda_core->op, op) : 0;
        if (dt != CFT_F64 && (dt != CFT_F32 || prec)) {
            /* tensor cores: f16 / bf16 operands, or f32 ones the precision
             * lets cuBLAS round to TF32 or bf16; sums in f32 */
            const float one = 1, zero = 0;
            cudaDataType t = dt == CFT_F16 ? CUDA_R_16F : dt == CFT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
            cublasComputeType_t ct = prec == 1   ? CUBLAS_COMPUTE_32F_FAST_TF32
                                     : prec == 2 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                 : CUBLAS_COMPUTE_32F;
            s = bl.gemm_ex(bl.handle[dev], ob, oa, (int)d.n, (int)d.m, (int)d.k, &one, b.ptr, t,
                           (int)d.ldb, d.sb, a.ptr, t, (int)d.lda, d.sa, &zero, c.ptr, t,
                           (int)d.ldc, d.sc, (int)d.batch, ct, CUBLAS_GEMM_DEFAULT);
        } else if (dt == CFT_F32) {
            const float one = 1, zero = 0;
            s = bl.sgemm(bl.handle[dev], ob, oa, (int)d.n, (int)d.m, (int)d.k, &one, b.ptr,
                         (int)d.ldb, d.sb, a.ptr, (int)d.lda, d.sa, &zero, c.ptr, (int)d.ldc, d.sc,
                         (int)d.batch);
        } else {
            const double one = 1, zero = 0;
            s = bl.dgemm(bl.handle[dev], ob, oa, (int)d.n, (int)d.m, (int)d.k, &one, b.ptr,
                         (int)d.ldb, d.sb, a.ptr, (int)d.lda, d.sa, &zero, c.ptr, (int)d.ldc, d.sc,
                         (int)d.batch);
        }
    }
    pthread_mutex_unlock(&bl.mu[dev]);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cft_cuda_fail("dot_general on cuda:%d: cuBLAS (m %lld, n %lld, k %lld, batch %lld): %s",
                      dev, (long long)d.m, (long long)d.n, (long long)d.k, (long long)d.batch,
                      bl.status(s));
        return -1;
    }
    return 1;
}

/* device memory holding the batch's matrix pointers base + k * stride
 * elements (trsmBatched takes arrays of pointers); 0 when out of memory */
CUdeviceptr cft_cuda_ptr_array(void *base, int64_t stride, size_t elem, int64_t batch) {
    void **h = malloc(sizeof(void *) * (size_t)batch);
    CUdeviceptr p = 0;
    if (!h)
        return 0;
    for (int64_t k = 0; k < batch; k++)
        h[k] = (char *)base + (size_t)(k * stride) * elem;
    if (cft_cu.alloc(&p, sizeof(void *) * (size_t)batch) != CUDA_SUCCESS ||
        cft_cu.htod(p, h, sizeof(void *) * (size_t)batch) != CUDA_SUCCESS) {
        if (p)
            cft_cu.free(p);
        p = 0;
    }
    free(h);
    return p;
}

int cft_cuda_trsm(int dev, const cft_dev_op *op) {
    cft_trsm_desc d;
    if (dev < 0 || dev >= CFT_CUDA_MAX_DEV || !cft_trsm_map_op(&cft_cuda_core->op, op, &d))
        return 0;
    int go = ready(dev, "triangular_solve (cuBLAS)");
    if (go <= 0)
        return go; /* no cuBLAS: the caller's way */
    const cft_dev_op_api *api = &cft_cuda_core->op;
    cft_dev_buf a = api->in(op, 0), b = api->in(op, 1), x = api->out(op, 0);
    size_t es = d.dbl ? sizeof(double) : sizeof(float);
    CUdeviceptr pa = cft_cuda_ptr_array(a.ptr, d.sa, es, d.batch),
                px = cft_cuda_ptr_array(x.ptr, d.sb, es, d.batch);
    if (!pa || !px ||
        cft_cu.dtod_async((CUdeviceptr)(uintptr_t)x.ptr, (CUdeviceptr)(uintptr_t)b.ptr, b.bytes,
                          cft_cuda_stream(dev)) != CUDA_SUCCESS) { /* in place: X starts as B */
        if (pa)
            cft_cu.free(pa);
        if (px)
            cft_cu.free(px);
        cft_cuda_fail("triangular_solve on cuda:%d: no device memory for %lld matrix pointers", dev,
                      (long long)d.batch);
        return -1;
    }
    cublasStatus_t s = lock_handle(dev);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = trsm_batched(dev, d.dbl, d.left, d.upper, d.trans, d.unit, d.m, d.n, pa, d.lda, px,
                         d.ldb, d.batch);
    pthread_mutex_unlock(&bl.mu[dev]);
    cft_cu.stream_sync(cft_cuda_stream(dev)); /* the queued solve reads the pointer arrays */
    cft_cu.free(pa);
    cft_cu.free(px);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cft_cuda_fail("triangular_solve on cuda:%d: cuBLAS trsmBatched (m %lld, n %lld, batch "
                      "%lld): %s",
                      dev, (long long)d.m, (long long)d.n, (long long)d.batch, bl.status(s));
        return -1;
    }
    return 1;
}

static const char *lu_src = CFT_LU_KERNELS CFT_SLOGDET_KERNELS;

/* getrfBatched of a copy of the batch of [n, n] matrices a, on dev's
 * stream: sc gets the factors, (1-based) pivots, infos and the factors'
 * pointer array (the caller frees what is set); false when memory, a copy
 * or cuBLAS failed (*s: cuBLAS's status) */
static bool getrf_copy(int dev, cft_dev_buf a, bool dbl, int64_t n, int64_t batch,
                       CUdeviceptr sc[4], cublasStatus_t *s) {
    size_t es = dbl ? sizeof(double) : sizeof(float);
    int64_t nn = n * n;
    if (cft_cu.alloc(&sc[0], (size_t)(batch * nn) * es) != CUDA_SUCCESS ||
        cft_cu.alloc(&sc[1], sizeof(int) * (size_t)(batch * n)) != CUDA_SUCCESS ||
        cft_cu.alloc(&sc[2], sizeof(int) * (size_t)batch) != CUDA_SUCCESS ||
        !(sc[3] = cft_cuda_ptr_array((void *)(uintptr_t)sc[0], nn, es, batch)) ||
        cft_cu.dtod_async(sc[0], (CUdeviceptr)(uintptr_t)a.ptr, a.bytes, cft_cuda_stream(dev)) !=
            CUDA_SUCCESS)
        return false;
    *s = lock_handle(dev);
    if (*s == CUBLAS_STATUS_SUCCESS)
        *s = dbl ? bl.dgetrf(bl.handle[dev], (int)n, (double *const *)(uintptr_t)sc[3], (int)n,
                             (int *)(uintptr_t)sc[1], (int *)(uintptr_t)sc[2], (int)batch)
                 : bl.sgetrf(bl.handle[dev], (int)n, (float *const *)(uintptr_t)sc[3], (int)n,
                             (int *)(uintptr_t)sc[1], (int *)(uintptr_t)sc[2], (int)batch);
    pthread_mutex_unlock(&bl.mu[dev]);
    return *s == CUBLAS_STATUS_SUCCESS;
}

/* solve as solver_map.h maps it: getrfBatched on a copy of A, the two
 * right solves on a copy of B, the pivots' row swaps as a kernel */
int cft_cuda_lu(int dev, const cft_dev_op *op) {
    cft_lu_desc d;
    if (dev < 0 || dev >= CFT_CUDA_MAX_DEV || !cft_lu_map_op(&cft_cuda_core->op, op, &d))
        return 0;
    int go = ready(dev, "solve (cuBLAS)");
    if (go <= 0)
        return go; /* no cuBLAS: the caller's way */
    const cft_dev_op_api *api = &cft_cuda_core->op;
    cft_dev_buf a = api->in(op, 0), b = api->in(op, 1), x = api->out(op, 0);
    size_t es = d.dbl ? sizeof(double) : sizeof(float);
    int64_t n = d.n, k = d.k;
    CUstream st = cft_cuda_stream(dev);
    CUdeviceptr sc[4] = {0}, px = 0; /* fac, piv, info, pf */
    CUdeviceptr fac, piv, info, pf;
    int *hinfo = malloc(sizeof(int) * (size_t)d.batch);
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    bool ok = hinfo && (px = cft_cuda_ptr_array(x.ptr, n * k, es, d.batch)) &&
              cft_cu.dtod_async((CUdeviceptr)(uintptr_t)x.ptr, (CUdeviceptr)(uintptr_t)b.ptr,
                                b.bytes, st) == CUDA_SUCCESS &&
              getrf_copy(dev, a, d.dbl, n, d.batch, sc, &s);
    fac = sc[0], piv = sc[1], info = sc[2], pf = sc[3];
    if (ok)
        ok = cft_cu.dtoh_async(hinfo, info, sizeof(int) * (size_t)d.batch, st) == CUDA_SUCCESS &&
             cft_cu.stream_sync(st) == CUDA_SUCCESS;
    int64_t bad = -1;
    for (int64_t m = 0; ok && m < d.batch && bad < 0; m++)
        if (hinfo[m] != 0)
            bad = m;
    struct {
        void *x;
        const void *piv;
        long long n, k, batch, fwd;
    } sw = {x.ptr, (void *)(uintptr_t)piv, (long long)n, (long long)k, (long long)d.batch, 1};
    const char *entry = d.dbl ? "cft_lu_swap_d" : "cft_lu_swap_f";
    int rc = 0;
    if (ok && bad < 0 && k) {
        if (d.tr)
            rc = cft_cuda_launch(dev, lu_src, entry, &sw, sizeof sw, d.batch * k);
        if (!rc && (s = lock_handle(dev)) == CUBLAS_STATUS_SUCCESS)
            for (int i = 0; i < 2 && s == CUBLAS_STATUS_SUCCESS; i++)
                s = trsm_batched(dev, d.dbl, false, d.solve[i].upper, d.solve[i].trans,
                                 d.solve[i].unit, k, n, pf, n, px, k, d.batch);
        if (!rc)
            pthread_mutex_unlock(&bl.mu[dev]);
        sw.fwd = 0;
        if (!rc && s == CUBLAS_STATUS_SUCCESS && !d.tr)
            rc = cft_cuda_launch(dev, lu_src, entry, &sw, sizeof sw, d.batch * k);
    }
    cft_cu.stream_sync(st); /* the scratch memory goes */
    CUdeviceptr scratch[5] = {fac, piv, info, pf, px};
    for (int i = 0; i < 5; i++)
        if (scratch[i])
            cft_cu.free(scratch[i]);
    if (!ok || s != CUBLAS_STATUS_SUCCESS)
        cft_cuda_fail("solve on cuda:%d: cuBLAS getrf/trsm batched (n %lld, batch %lld): %s", dev,
                      (long long)n, (long long)d.batch,
                      s != CUBLAS_STATUS_SUCCESS ? bl.status(s) : "out of device memory");
    else if (bad >= 0)
        cft_cuda_fail("solve on cuda:%d: batch element %lld is singular (U[%d, %d] is zero)", dev,
                      (long long)bad, hinfo[bad] - 1, hinfo[bad] - 1);
    free(hinfo);
    return !ok || s != CUBLAS_STATUS_SUCCESS || bad >= 0 || rc ? -1 : 1;
}

/* slogdet as solver_map.h maps it: getrfBatched on a copy of A, then a
 * kernel for each matrix's sign and logabsdet (a singular one: 0, -inf) */
int cft_cuda_slogdet(int dev, const cft_dev_op *op) {
    cft_slogdet_desc d;
    if (dev < 0 || dev >= CFT_CUDA_MAX_DEV || !cft_slogdet_map_op(&cft_cuda_core->op, op, &d))
        return 0;
    int go = ready(dev, "slogdet (cuBLAS)");
    if (go <= 0)
        return go; /* no cuBLAS: the caller's way */
    const cft_dev_op_api *api = &cft_cuda_core->op;
    cft_dev_buf a = api->in(op, 0), sg = api->out(op, 0), ld = api->out(op, 1);
    int64_t n = d.n;
    CUstream st = cft_cuda_stream(dev);
    CUdeviceptr sc[4] = {0}; /* fac, piv, info, pf */
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    bool ok = getrf_copy(dev, a, d.dbl, n, d.batch, sc, &s);
    struct {
        const void *fac;
        const void *piv, *info;
        void *sign, *lad;
        long long n, batch;
    } k = {(void *)(uintptr_t)sc[0],
           (void *)(uintptr_t)sc[1],
           (void *)(uintptr_t)sc[2],
           sg.ptr,
           ld.ptr,
           (long long)n,
           (long long)d.batch};
    int rc = ok && s == CUBLAS_STATUS_SUCCESS
                 ? cft_cuda_launch(dev, lu_src, d.dbl ? "cft_slogdet_d" : "cft_slogdet_f", &k,
                                   sizeof k, d.batch)
                 : 0;
    cft_cu.stream_sync(st); /* the scratch memory goes */
    for (int i = 0; i < 4; i++)
        if (sc[i])
            cft_cu.free(sc[i]);
    if (!ok || s != CUBLAS_STATUS_SUCCESS)
        cft_cuda_fail("slogdet on cuda:%d: cuBLAS getrf batched (n %lld, batch %lld): %s", dev,
                      (long long)n, (long long)d.batch,
                      s != CUBLAS_STATUS_SUCCESS ? bl.status(s) : "out of device memory");
    return !ok || s != CUBLAS_STATUS_SUCCESS || rc ? -1 : 1;
}

/* for test_cuda_plugin: the LU swap and slogdet kernels compile for sm_90 */
__attribute__((visibility("default"))) int cft_cuda_lu_check(char *err, size_t en) {
    return cft_cuda_lib_kernel_check(NULL, lu_src, err, en);
}

/* for test_cuda_plugin: 0 when cuBLAS is loaded, else -1 and why */
__attribute__((visibility("default"))) int cft_cuda_blas_check(char *err, size_t en) {
    pthread_once(&once, load);
    if (load_err[0] && err)
        snprintf(err, en, "%s", load_err);
    return load_err[0] ? -1 : 0;
}
