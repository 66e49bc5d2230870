/* solver.c: cholesky, eigh, qr and svd on cuSOLVER in the CUDA backend, as
 * cuda/solver_map.h maps it: a kernel writes the symmetric part of each
 * matrix into the output, cusolverDn<S|D>potrfBatched factors its
 * column-major upper triangle in place (the row-major lower one), and a
 * second kernel zeroes the row-major upper triangle; the per-matrix info
 * comes back to name a matrix that is not positive definite. cuSOLVER is
 * opened at run time from the toolkit the backend was built with
 * (CFT_CUSOLVER_PATH), after the trust check; one handle per device, used
 * under that device's lock. eigh: syevjBatched (Jacobi, up to 32 rows) on
 * a copy of A, then a kernel that writes V row-major (cft_eigh_map_op).
 * qr: geqrf and orgqr per matrix between kernels that change the layout
 * (cft_qr_map_op); svd: gesvd per matrix likewise (cft_svd_map_op).
 * Written against cuSOLVER 12 (CUDA 13); not yet run on a GPU (the
 * mappings run in test_device_linalg through the test backend, and
 * test_cuda_plugin loads every symbol and compiles the kernels). */
#include <cusolverDn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_plugin.h"
#include "cuda/solver_map.h"

static struct {
    void *lib;
    cusolverStatus_t (*create)(cusolverDnHandle_t *);
    cusolverStatus_t (*set_stream)(cusolverDnHandle_t, cudaStream_t);
    cusolverStatus_t (*spotrf)(cusolverDnHandle_t, cublasFillMode_t, int, float *[], int, int *,
                               int);
    cusolverStatus_t (*dpotrf)(cusolverDnHandle_t, cublasFillMode_t, int, double *[], int, int *,
                               int);
    cusolverStatus_t (*create_syevj)(syevjInfo_t *);
    cusolverStatus_t (*destroy_syevj)(syevjInfo_t);
    cusolverStatus_t (*ssyevj_size)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int,
                                    const float *, int, const float *, int *, syevjInfo_t, int);
    cusolverStatus_t (*dsyevj_size)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int,
                                    const double *, int, const double *, int *, syevjInfo_t, int);
    cusolverStatus_t (*ssyevj)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int,
                               float *, int, float *, float *, int, int *, syevjInfo_t, int);
    cusolverStatus_t (*dsyevj)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int,
                               double *, int, double *, double *, int, int *, syevjInfo_t, int);
    cusolverStatus_t (*sgeqrf_size)(cusolverDnHandle_t, int, int, float *, int, int *);
    cusolverStatus_t (*dgeqrf_size)(cusolverDnHandle_t, int, int, double *, int, int *);
    cusolverStatus_t (*sgeqrf)(cusolverDnHandle_t, int, int, float *, int, float *, float *, int,
                               int *);
    cusolverStatus_t (*dgeqrf)(cusolverDnHandle_t, int, int, double *, int, double *, double *, int,
                               int *);
    cusolverStatus_t (*sorgqr_size)(cusolverDnHandle_t, int, int, int, const float *, int,
                                    const float *, int *);
    cusolverStatus_t (*dorgqr_size)(cusolverDnHandle_t, int, int, int, const double *, int,
                                    const double *, int *);
    cusolverStatus_t (*sorgqr)(cusolverDnHandle_t, int, int, int, float *, int, const float *,
                               float *, int, int *);
    cusolverStatus_t (*dorgqr)(cusolverDnHandle_t, int, int, int, double *, int, const double *,
                               double *, int, int *);
    cusolverStatus_t (*sgesvd_size)(cusolverDnHandle_t, int, int, int *);
    cusolverStatus_t (*dgesvd_size)(cusolverDnHandle_t, int, int, int *);
    cusolverStatus_t (*sgesvd)(cusolverDnHandle_t, signed char, signed char, int, int, float *, int,
                               float *, float *, int, float *, int, float *, int, float *, int *);
    cusolverStatus_t (*dgesvd)(cusolverDnHandle_t, signed char, signed char, int, int, double *,
                               int, double *, double *, int, double *, int, double *, int, double *,
                               int *);
    cusolverDnHandle_t handle[CFT_CUDA_MAX_DEV];
    pthread_mutex_t mu[CFT_CUDA_MAX_DEV];
} so;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_err[1200];

static void load(void) {
    for (int i = 0; i < CFT_CUDA_MAX_DEV; i++)
        pthread_mutex_init(&so.mu[i], NULL);
    static const char *const sonames[] = {"libcusolver.so.12", "libcusolver.so.11", NULL};
#ifdef CFT_CUSOLVER_PATH
    const char *built = CFT_CUSOLVER_PATH; /* the build machine's, tried last */
#else
    const char *built = NULL;
#endif
    void **const slots[] = {
        (void **)&so.create,      (void **)&so.spotrf,       (void **)&so.dpotrf,
        (void **)&so.set_stream,  (void **)&so.create_syevj, (void **)&so.destroy_syevj,
        (void **)&so.ssyevj_size, (void **)&so.dsyevj_size,  (void **)&so.ssyevj,
        (void **)&so.dsyevj,      (void **)&so.sgeqrf_size,  (void **)&so.dgeqrf_size,
        (void **)&so.sgeqrf,      (void **)&so.dgeqrf,       (void **)&so.sorgqr_size,
        (void **)&so.dorgqr_size, (void **)&so.sorgqr,       (void **)&so.dorgqr,
        (void **)&so.sgesvd_size, (void **)&so.dgesvd_size,  (void **)&so.sgesvd,
        (void **)&so.dgesvd};
    static const char *const names[] = {"cusolverDnCreate",
                                        "cusolverDnSpotrfBatched",
                                        "cusolverDnDpotrfBatched",
                                        "cusolverDnSetStream",
                                        "cusolverDnCreateSyevjInfo",
                                        "cusolverDnDestroySyevjInfo",
                                        "cusolverDnSsyevjBatched_bufferSize",
                                        "cusolverDnDsyevjBatched_bufferSize",
                                        "cusolverDnSsyevjBatched",
                                        "cusolverDnDsyevjBatched",
                                        "cusolverDnSgeqrf_bufferSize",
                                        "cusolverDnDgeqrf_bufferSize",
                                        "cusolverDnSgeqrf",
                                        "cusolverDnDgeqrf",
                                        "cusolverDnSorgqr_bufferSize",
                                        "cusolverDnDorgqr_bufferSize",
                                        "cusolverDnSorgqr",
                                        "cusolverDnDorgqr",
                                        "cusolverDnSgesvd_bufferSize",
                                        "cusolverDnDgesvd_bufferSize",
                                        "cusolverDnSgesvd",
                                        "cusolverDnDgesvd"};
    so.lib = cft_cuda_find_lib(sonames, built, "cuSOLVER", slots, names,
                               (int)(sizeof names / sizeof *names), load_err, sizeof load_err);
}

static const char *chol_src = CFT_CHOL_KERNELS CFT_EIGH_KERNELS CFT_QR_KERNELS CFT_SVD_KERNELS;

/* whether cuSOLVER takes an operation on dev: 1 yes, 0 not loaded (the
 * caller's way), -1 the device has failed (the error set) */
static int ready(int dev, const char *what) {
    return cft_cuda_lib_ready(&once, load, load_err, dev, what);
}

/* dev's handle, made on first use, on this thread's stream (a capture's,
 * while capturing); the caller holds dev's lock after, and unlocks */
static cusolverStatus_t lock_handle(int dev) {
    pthread_mutex_lock(&so.mu[dev]);
    cusolverStatus_t s = CUSOLVER_STATUS_SUCCESS;
    if (!so.handle[dev])
        s = so.create(&so.handle[dev]);
    if (s == CUSOLVER_STATUS_SUCCESS)
        s = so.set_stream(so.handle[dev], (cudaStream_t)cft_cuda_stream(dev));
    return s;
}

/* step `which` ("sym" / "zero") of solver_map.h over the batch */
static int chol_step(int dev, const char *which, void *y, const void *a, const cft_chol_desc *d) {
    char entry[32];
    snprintf(entry, sizeof entry, "cft_chol_%s_%c", which, d->dbl ? 'd' : 'f');
    struct {
        void *y;
        const void *a;
        long long n, total;
    } p = {y, a, (long long)d->n, (long long)(d->batch * d->n * d->n)};
    return cft_cuda_launch(dev, chol_src, entry, &p, sizeof p, p.total);
}

int cft_cuda_cholesky(int dev, const cft_dev_op *op) {
    cft_chol_desc d;
    if (dev < 0 || dev >= CFT_CUDA_MAX_DEV || !cft_chol_map_op(&cft_cuda_core->op, op, &d))
        return 0;
    int go = ready(dev, "cholesky (cuSOLVER)");
    if (go <= 0)
        return go; /* no cuSOLVER: the caller's way */
    cft_dev_buf a = cft_cuda_core->op.in(op, 0), y = cft_cuda_core->op.out(op, 0);
    size_t es = d.dbl ? sizeof(double) : sizeof(float);
    if (chol_step(dev, "sym", y.ptr, a.ptr, &d))
        return -1;
    CUdeviceptr ptrs = cft_cuda_ptr_array(y.ptr, d.n * d.n, es, d.batch), info = 0;
    int *hinfo = malloc(sizeof(int) * (size_t)d.batch);
    if (!ptrs || !hinfo || cft_cu.alloc(&info, sizeof(int) * (size_t)d.batch) != CUDA_SUCCESS) {
        if (ptrs)
            cft_cu.free(ptrs);
        free(hinfo);
        cft_cuda_fail("cholesky on cuda:%d: out of memory for a batch of %lld", dev,
                      (long long)d.batch);
        return -1;
    }
    cusolverStatus_t s = lock_handle(dev);
    if (s == CUSOLVER_STATUS_SUCCESS)
        s = d.dbl ? so.dpotrf(so.handle[dev], CUBLAS_FILL_MODE_UPPER, (int)d.n,
                              (double **)(uintptr_t)ptrs, (int)d.n, (int *)(uintptr_t)info,
                              (int)d.batch)
                  : so.spotrf(so.handle[dev], CUBLAS_FILL_MODE_UPPER, (int)d.n,
                              (float **)(uintptr_t)ptrs, (int)d.n, (int *)(uintptr_t)info,
                              (int)d.batch);
    pthread_mutex_unlock(&so.mu[dev]);
    /* the infos after the factorisation, on the device's stream */
    CUresult r =
        cft_cu.dtoh_async(hinfo, info, sizeof(int) * (size_t)d.batch, cft_cuda_stream(dev));
    if (r == CUDA_SUCCESS)
        r = cft_cu.stream_sync(cft_cuda_stream(dev));
    cft_cu.free(ptrs);
    cft_cu.free(info);
    int rc = 1;
    if (s != CUSOLVER_STATUS_SUCCESS || r != CUDA_SUCCESS) {
        cft_cuda_fail("cholesky on cuda:%d: cuSOLVER potrfBatched (n %lld, batch %lld): %s %d", dev,
                      (long long)d.n, (long long)d.batch,
                      s != CUSOLVER_STATUS_SUCCESS ? "status" : "reading its info:", (int)s);
        rc = -1;
    }
    for (int64_t k = 0; k < d.batch && rc > 0; k++)
        if (hinfo[k] != 0) {
            cft_cuda_fail("cholesky on cuda:%d: batch element %lld is not positive definite "
                          "(leading minor of order %d)",
                          dev, (long long)k, hinfo[k]);
            rc = -1;
        }
    free(hinfo);
    if (rc > 0 && chol_step(dev, "zero", y.ptr, y.ptr, &d))
        rc = -1;
    return rc;
}

/* eigh as solver_map.h maps it: syevjBatched (Jacobi; matrices of up to
 * 32 rows, larger ones go to the caller's way) on a copy of A with 'U',
 * the eigenvalues straight into the output, then the kernel that writes V
 * row-major; a batch element that does not converge is named */
enum { SYEVJ_MAX_N = 32 };
int cft_cuda_eigh(int dev, const cft_dev_op *op) {
    cft_eigh_desc d;
    if (dev < 0 || dev >= CFT_CUDA_MAX_DEV || !cft_eigh_map_op(&cft_cuda_core->op, op, &d) ||
        d.n > SYEVJ_MAX_N)
        return 0;
    int go = ready(dev, "eigh (cuSOLVER)");
    if (go <= 0)
        return go; /* no cuSOLVER: the caller's way */
    const cft_dev_op_api *api = &cft_cuda_core->op;
    cft_dev_buf a = api->in(op, 0), w = api->out(op, 0), v = api->out(op, 1);
    size_t es = d.dbl ? sizeof(double) : sizeof(float);
    CUstream st = cft_cuda_stream(dev);
    CUdeviceptr fac = 0, info = 0, work = 0;
    int *hinfo = malloc(sizeof(int) * (size_t)d.batch), lwork = 0, n = (int)d.n,
        batch = (int)d.batch;
    bool ok = hinfo && cft_cu.alloc(&fac, a.bytes) == CUDA_SUCCESS &&
              cft_cu.alloc(&info, sizeof(int) * (size_t)d.batch) == CUDA_SUCCESS &&
              cft_cu.dtod_async(fac, (CUdeviceptr)(uintptr_t)a.ptr, a.bytes, st) == CUDA_SUCCESS;
    syevjInfo_t params = NULL;
    cusolverStatus_t s = CUSOLVER_STATUS_SUCCESS;
    cusolverEigMode_t job = CUSOLVER_EIG_MODE_VECTOR;
    cublasFillMode_t up = CUBLAS_FILL_MODE_UPPER;
    if (ok) {
        s = lock_handle(dev);
        if (s == CUSOLVER_STATUS_SUCCESS)
            s = so.create_syevj(&params);
        if (s == CUSOLVER_STATUS_SUCCESS)
            s = d.dbl ? so.dsyevj_size(so.handle[dev], job, up, n, (const double *)(uintptr_t)fac,
                                       n, (const double *)w.ptr, &lwork, params, batch)
                      : so.ssyevj_size(so.handle[dev], job, up, n, (const float *)(uintptr_t)fac, n,
                                       (const float *)w.ptr, &lwork, params, batch);
        if (s == CUSOLVER_STATUS_SUCCESS &&
            cft_cu.alloc(&work, (size_t)(lwork > 0 ? lwork : 1) * es) != CUDA_SUCCESS)
            ok = false;
        if (ok && s == CUSOLVER_STATUS_SUCCESS)
            s = d.dbl ? so.dsyevj(so.handle[dev], job, up, n, (double *)(uintptr_t)fac, n,
                                  (double *)w.ptr, (double *)(uintptr_t)work, lwork,
                                  (int *)(uintptr_t)info, params, batch)
                      : so.ssyevj(so.handle[dev], job, up, n, (float *)(uintptr_t)fac, n,
                                  (float *)w.ptr, (float *)(uintptr_t)work, lwork,
                                  (int *)(uintptr_t)info, params, batch);
        pthread_mutex_unlock(&so.mu[dev]);
        ok = ok && s == CUSOLVER_STATUS_SUCCESS &&
             cft_cu.dtoh_async(hinfo, info, sizeof(int) * (size_t)d.batch, st) == CUDA_SUCCESS &&
             cft_cu.stream_sync(st) == CUDA_SUCCESS;
    }
    int64_t bad = -1;
    for (int64_t m = 0; ok && m < d.batch && bad < 0; m++)
        if (hinfo[m] != 0)
            bad = m;
    struct {
        void *y;
        const void *x;
        long long n, total;
    } t = {v.ptr, (void *)(uintptr_t)fac, (long long)d.n, (long long)(d.batch * d.n * d.n)};
    int rc = ok && bad < 0
                 ? cft_cuda_launch(dev, chol_src, d.dbl ? "cft_eigh_vt_d" : "cft_eigh_vt_f", &t,
                                   sizeof t, t.total)
                 : 0;
    cft_cu.stream_sync(st); /* the scratch memory goes */
    if (params)
        so.destroy_syevj(params);
    CUdeviceptr scratch[3] = {fac, info, work};
    for (int i = 0; i < 3; i++)
        if (scratch[i])
            cft_cu.free(scratch[i]);
    if (!ok || s != CUSOLVER_STATUS_SUCCESS)
        cft_cuda_fail("eigh on cuda:%d: cuSOLVER syevjBatched (n %d, batch %d): %s %d", dev, n,
                      batch, s != CUSOLVER_STATUS_SUCCESS ? "status" : "out of device memory",
                      (int)s);
    else if (bad >= 0)
        cft_cuda_fail("eigh on cuda:%d: batch element %lld did not converge (info %d)", dev,
                      (long long)bad, hinfo[bad]);
    free(hinfo);
    return !ok || s != CUSOLVER_STATUS_SUCCESS || bad >= 0 || rc ? -1 : 1;
}

/* qr as solver_map.h maps it: A written column-major into a work buffer,
 * then per matrix geqrf, R written row-major, orgqr; then Q written
 * row-major. The matrices go one by one (cuSOLVER has no batched geqrf
 * for every shape) on the device's stream. */
int cft_cuda_qr(int dev, const cft_dev_op *op) {
    cft_qr_desc d;
    if (dev < 0 || dev >= CFT_CUDA_MAX_DEV || !cft_qr_map_op(&cft_cuda_core->op, op, &d) ||
        d.m > INT_MAX / (d.n > 0 ? d.n : 1))
        return 0;
    int go = ready(dev, "qr (cuSOLVER)");
    if (go <= 0)
        return go; /* no cuSOLVER: the caller's way */
    const cft_dev_op_api *api = &cft_cuda_core->op;
    cft_dev_buf a = api->in(op, 0), q = api->out(op, 0), r = api->out(op, 1);
    size_t es = d.dbl ? sizeof(double) : sizeof(float);
    int m = (int)d.m, n = (int)d.n, k = (int)d.k, lw = 0, lw2 = 0, hinfo = 0;
    int64_t mn = d.m * d.n;
    CUstream st = cft_cuda_stream(dev);
    CUdeviceptr work = 0, tau = 0, info = 0, ws = 0;
    struct {
        void *y;
        const void *x;
        long long m, n, k, total;
    } t = {NULL, a.ptr, m, n, k, (long long)(d.batch * mn)};
    bool ok = cft_cu.alloc(&work, a.bytes ? a.bytes : es) == CUDA_SUCCESS &&
              cft_cu.alloc(&tau, (size_t)(k + 1) * es) == CUDA_SUCCESS &&
              cft_cu.alloc(&info, sizeof(int)) == CUDA_SUCCESS;
    int rc = 0;
    t.y = (void *)(uintptr_t)work;
    if (ok && k)
        rc = cft_cuda_launch(dev, chol_src, d.dbl ? "cft_qr_in_d" : "cft_qr_in_f", &t, sizeof t,
                             t.total);
    cusolverStatus_t s = lock_handle(dev);
    if (ok && !rc && k && s == CUSOLVER_STATUS_SUCCESS) {
        void *w0 = (void *)(uintptr_t)work, *tp = (void *)(uintptr_t)tau;
        s = d.dbl ? so.dgeqrf_size(so.handle[dev], m, n, w0, m, &lw)
                  : so.sgeqrf_size(so.handle[dev], m, n, w0, m, &lw);
        if (s == CUSOLVER_STATUS_SUCCESS)
            s = d.dbl ? so.dorgqr_size(so.handle[dev], m, k, k, w0, m, tp, &lw2)
                      : so.sorgqr_size(so.handle[dev], m, k, k, w0, m, tp, &lw2);
        lw = lw > lw2 ? lw : lw2;
        if (s == CUSOLVER_STATUS_SUCCESS)
            ok = cft_cu.alloc(&ws, (size_t)(lw > 0 ? lw : 1) * es) == CUDA_SUCCESS;
        void *wp = (void *)(uintptr_t)ws;
        int *ip = (int *)(uintptr_t)info;
        for (int64_t e = 0; ok && !rc && s == CUSOLVER_STATUS_SUCCESS && e < d.batch; e++) {
            char *w = (char *)(uintptr_t)work + (size_t)(e * mn) * es;
            s = d.dbl ? so.dgeqrf(so.handle[dev], m, n, (double *)w, m, tp, wp, lw, ip)
                      : so.sgeqrf(so.handle[dev], m, n, (float *)w, m, tp, wp, lw, ip);
            t.y = (char *)r.ptr + (size_t)(e * k * n) * es, t.x = w, t.total = (long long)k * n;
            if (s == CUSOLVER_STATUS_SUCCESS) /* R, before orgqr overwrites the triangle */
                rc = cft_cuda_launch(dev, chol_src, d.dbl ? "cft_qr_r_d" : "cft_qr_r_f", &t,
                                     sizeof t, t.total);
            if (s == CUSOLVER_STATUS_SUCCESS && !rc)
                s = d.dbl ? so.dorgqr(so.handle[dev], m, k, k, (double *)w, m, tp, wp, lw, ip)
                          : so.sorgqr(so.handle[dev], m, k, k, (float *)w, m, tp, wp, lw, ip);
        }
    }
    pthread_mutex_unlock(&so.mu[dev]);
    t.y = q.ptr, t.x = (void *)(uintptr_t)work, t.total = (long long)(d.batch * d.m * d.k);
    if (ok && !rc && s == CUSOLVER_STATUS_SUCCESS && k)
        rc = cft_cuda_launch(dev, chol_src, d.dbl ? "cft_qr_q_d" : "cft_qr_q_f", &t, sizeof t,
                             t.total);
    if (ok && info) /* the last call's info (an argument error: the first would stop them) */
        ok = cft_cu.dtoh_async(&hinfo, info, sizeof(int), st) == CUDA_SUCCESS;
    cft_cu.stream_sync(st); /* the scratch memory goes */
    CUdeviceptr scratch[4] = {work, tau, info, ws};
    for (int i = 0; i < 4; i++)
        if (scratch[i])
            cft_cu.free(scratch[i]);
    if (!ok || s != CUSOLVER_STATUS_SUCCESS || hinfo)
        cft_cuda_fail("qr on cuda:%d: cuSOLVER geqrf / orgqr (m %d, n %d, batch %lld): %s %d", dev,
                      m, n, (long long)d.batch,
                      !ok                            ? "out of device memory"
                      : s != CUSOLVER_STATUS_SUCCESS ? "status"
                                                     : "info",
                      s != CUSOLVER_STATUS_SUCCESS ? (int)s : hinfo);
    return !ok || s != CUSOLVER_STATUS_SUCCESS || hinfo || rc ? -1 : 1;
}

/* svd as solver_map.h maps it: gesvd ('S', 'S') one matrix at a time on W,
 * a column-major copy with rows >= cols (A as it lies when m < n, the
 * solver then writing the outputs in place; else A written column-major
 * and U and VT written row-major after) */
int cft_cuda_svd(int dev, const cft_dev_op *op) {
    cft_svd_desc d;
    if (dev < 0 || dev >= CFT_CUDA_MAX_DEV || !cft_svd_map_op(&cft_cuda_core->op, op, &d) ||
        d.rows > INT_MAX / d.cols)
        return 0;
    int go = ready(dev, "svd (cuSOLVER)");
    if (go <= 0)
        return go; /* no cuSOLVER: the caller's way */
    const cft_dev_op_api *api = &cft_cuda_core->op;
    cft_dev_buf a = api->in(op, 0), uo = api->out(op, 0), so_ = api->out(op, 1),
                vo = api->out(op, 2);
    size_t es = d.dbl ? sizeof(double) : sizeof(float);
    int rows = (int)d.rows, cols = (int)d.cols, k = (int)d.k, lw = 0;
    int *hinfo = malloc(sizeof(int) * (size_t)d.batch); /* gesvd's info, per matrix */
    int64_t ran = 0;                                    /* matrices gesvd returned from */
    int64_t rc = d.rows * d.cols;
    CUstream st = cft_cuda_stream(dev);
    CUdeviceptr w = 0, u = 0, vt = 0, info = 0, ws = 0;
    bool ok = hinfo && cft_cu.alloc(&w, a.bytes) == CUDA_SUCCESS &&
              cft_cu.alloc(&info, sizeof(int) * (size_t)d.batch) == CUDA_SUCCESS &&
              (d.tr || (cft_cu.alloc(&u, (size_t)(d.batch * d.rows * d.k) * es) == CUDA_SUCCESS &&
                        cft_cu.alloc(&vt, (size_t)(d.batch * d.k * d.cols) * es) == CUDA_SUCCESS));
    struct {
        void *y;
        const void *x;
        long long rows, cols, total;
    } t = {(void *)(uintptr_t)w, a.ptr, (long long)d.n, (long long)d.m, (long long)(d.batch * rc)};
    const char *kern = d.dbl ? "cft_svd_t_d" : "cft_svd_t_f";
    int rcode = 0;
    if (ok && d.tr)
        ok = cft_cu.dtod_async(w, (CUdeviceptr)(uintptr_t)a.ptr, a.bytes, st) == CUDA_SUCCESS;
    else if (ok)
        rcode = cft_cuda_launch(dev, chol_src, kern, &t, sizeof t, t.total);
    /* with tr, U is Vh row-major and VT is U row-major: in place */
    char *U = d.tr ? (char *)vo.ptr : (char *)(uintptr_t)u,
         *VT = d.tr ? (char *)uo.ptr : (char *)(uintptr_t)vt;
    cusolverStatus_t s = lock_handle(dev);
    if (ok && !rcode && s == CUSOLVER_STATUS_SUCCESS) {
        s = d.dbl ? so.dgesvd_size(so.handle[dev], rows, cols, &lw)
                  : so.sgesvd_size(so.handle[dev], rows, cols, &lw);
        if (s == CUSOLVER_STATUS_SUCCESS)
            ok = cft_cu.alloc(&ws, (size_t)(lw > 0 ? lw : 1) * es) == CUDA_SUCCESS;
        for (int64_t e = 0; ok && s == CUSOLVER_STATUS_SUCCESS && e < d.batch; e++, ran++) {
            int *ip = (int *)(uintptr_t)info + e;
            char *we = (char *)(uintptr_t)w + (size_t)(e * rc) * es,
                 *se = (char *)so_.ptr + (size_t)(e * k) * es,
                 *ue = U + (size_t)(e * d.rows * d.k) * es,
                 *ve = VT + (size_t)(e * d.k * d.cols) * es;
            s = d.dbl ? so.dgesvd(so.handle[dev], 'S', 'S', rows, cols, (double *)we, rows,
                                  (double *)se, (double *)ue, rows, (double *)ve, k,
                                  (double *)(uintptr_t)ws, lw, NULL, ip)
                      : so.sgesvd(so.handle[dev], 'S', 'S', rows, cols, (float *)we, rows,
                                  (float *)se, (float *)ue, rows, (float *)ve, k,
                                  (float *)(uintptr_t)ws, lw, NULL, ip);
        }
    }
    pthread_mutex_unlock(&so.mu[dev]);
    if (ok && !rcode && s == CUSOLVER_STATUS_SUCCESS && !d.tr) { /* U, VT row-major */
        t.y = uo.ptr, t.x = (void *)(uintptr_t)u, t.rows = d.m, t.cols = k;
        t.total = (long long)(d.batch * d.m * d.k);
        rcode = cft_cuda_launch(dev, chol_src, kern, &t, sizeof t, t.total);
        t.y = vo.ptr, t.x = (void *)(uintptr_t)vt, t.rows = k, t.cols = d.n;
        t.total = (long long)(d.batch * d.k * d.n);
        if (!rcode)
            rcode = cft_cuda_launch(dev, chol_src, kern, &t, sizeof t, t.total);
    }
    if (ok)
        ok = cft_cu.dtoh_async(hinfo, info, sizeof(int) * (size_t)d.batch, st) == CUDA_SUCCESS;
    cft_cu.stream_sync(st); /* the scratch memory goes */
    int64_t bad = -1;       /* the first matrix (of those factored) that did not converge */
    for (int64_t e = 0; ok && e < ran && bad < 0; e++)
        if (hinfo[e] != 0)
            bad = e;
    CUdeviceptr scratch[5] = {w, u, vt, info, ws};
    for (int i = 0; i < 5; i++)
        if (scratch[i])
            cft_cu.free(scratch[i]);
    if (!ok || s != CUSOLVER_STATUS_SUCCESS)
        cft_cuda_fail("svd on cuda:%d: cuSOLVER gesvd (m %lld, n %lld, batch %lld): %s %d", dev,
                      (long long)d.m, (long long)d.n, (long long)d.batch,
                      !ok ? "out of device memory" : "status", (int)s);
    else if (bad >= 0)
        cft_cuda_fail("svd on cuda:%d: gesvd did not converge on batch element %lld (info %d)", dev,
                      (long long)bad, hinfo[bad]);
    free(hinfo);
    return !ok || s != CUSOLVER_STATUS_SUCCESS || bad >= 0 || rcode ? -1 : 1;
}

/* for test_cuda_plugin: 0 when cuSOLVER is loaded and the kernels of
 * cholesky, eigh, qr and svd compile for sm_90, else -1 and why */

__attribute__((visibility("default"))) int cft_cuda_solver_check(char *err, size_t en) {
    pthread_once(&once, load);
    return cft_cuda_lib_kernel_check(load_err, chol_src, err, en);
}
