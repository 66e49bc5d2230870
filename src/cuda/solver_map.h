/* solver_map.h: cholesky, triangular_solve, solve, slogdet, eigh, qr and svd on
 * contiguous row-major operands as the batched column-major calls of a
 * LAPACK-style library: cuSOLVER's potrfBatched, syevjBatched, geqrf,
 * orgqr and gesvd and cuBLAS's trsmBatched and getrfBatched in the CUDA
 * backend, LAPACK's potrf, getrf, syevd, geqrf, orgqr and gesvd and
 * CBLAS's trsm per matrix in the test backend (tests/support), which
 * runs the same mapping on its own memory, so every one of them in the per-primitive tests checks
 * it without a GPU. A row-major matrix read column-major is its transpose.
 *
 * cholesky factors S = (A + A^T) / 2 (as the host kernel does): the output
 * first gets S (step 1, elementwise), which read column-major is S again;
 * potrf of its *upper* triangle gives U with S = U^T U, stored at column
 * j, row i <= j, that is row-major row j, column i: the lower triangle,
 * holding U(i, j) = L(j, i). Then the row-major strict upper triangle,
 * which potrf leaves as it was, is zeroed (step 2). potrf's info > 0 for a
 * batch element: not positive definite, as on the host.
 *
 * triangular_solve: X = op(A)^-1 B (left) or B op(A)^-1 (right), B [M, N].
 * Transposed, left is X^T op(A)^T = B^T: column-major, the solve from the
 * right with the column-major A (A^T), the same op, the other triangle;
 * right is the solve from the left. The output first gets a copy of B
 * (the call solves in place). */
#ifndef CFT_SOLVER_MAP_H
#define CFT_SOLVER_MAP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "array/device_plugin.h"

typedef struct {
    bool dbl;
    int64_t n, batch; /* batch matrices of [n, n] */
} cft_chol_desc;

typedef struct {
    bool dbl;
    bool left;        /* column-major side: op(A) X = B (else X op(A) = B) */
    bool upper;       /* column-major triangle of A read */
    bool trans, unit; /* op(A) = A^T; unit diagonal (not read) */
    int64_t m, n;     /* column-major X and B are [m, n] */
    int64_t lda, ldb; /* column-major leading dims */
    int64_t sa, sb;   /* elements between consecutive matrices */
    int64_t batch;
} cft_trsm_desc;

static inline bool cft_solver_float(const cft_aval *a, bool *dbl) {
    if (a->dtype != CFT_F32 && a->dtype != CFT_F64)
        return false;
    *dbl = a->dtype == CFT_F64;
    return true;
}

/* batch and matrix size of x's leading dims and its last two; false when
 * a size is 0 or exceeds an int (the libraries take ints) */
static inline bool cft_solver_batch(const cft_aval *x, int64_t *batch) {
    *batch = 1;
    for (int i = 0; i < x->ndim - 2; i++)
        *batch *= x->shape[i];
    return x->ndim >= 2 && *batch > 0 && *batch <= INT_MAX && x->shape[x->ndim - 1] > 0 &&
           x->shape[x->ndim - 1] <= INT_MAX && x->shape[x->ndim - 2] > 0 &&
           x->shape[x->ndim - 2] <= INT_MAX;
}

/* op is `name` on one f32 / f64 batch of matrices (cft_solver_batch's
 * sizes), its nout outputs of the input's dtype: the input in *a, the
 * outputs in out[], *dbl and *batch set */
static inline bool cft_solver_unary(const cft_dev_op_api *api, const cft_dev_op *op,
                                    const char *name, int nout, cft_dev_buf *a, cft_dev_buf *out,
                                    bool *dbl, int64_t *batch) {
    if (strcmp(api->name(op), name) || api->nin(op) != 1)
        return false;
    *a = api->in(op, 0);
    if (!cft_solver_float(&a->aval, dbl) || !cft_solver_batch(&a->aval, batch))
        return false;
    for (int j = 0; j < nout; j++)
        if ((out[j] = api->out(op, j)).aval.dtype != a->aval.dtype)
            return false;
    return true;
}

static inline bool cft_chol_map_op(const cft_dev_op_api *api, const cft_dev_op *op,
                                   cft_chol_desc *d) {
    cft_dev_buf a, y;
    if (!cft_solver_unary(api, op, "cholesky", 1, &a, &y, &d->dbl, &d->batch))
        return false;
    d->n = a.aval.shape[a.aval.ndim - 1];
    return a.aval.shape[a.aval.ndim - 2] == d->n && y.bytes == a.bytes;
}

static inline bool cft_trsm_map_op(const cft_dev_op_api *api, const cft_dev_op *op,
                                   cft_trsm_desc *d) {
    int64_t left, lower, trans, unit, ba, bb;
    if (strcmp(api->name(op), "triangular_solve") || api->nin(op) != 2 ||
        api->param(op, "left_side", &left, 1) != 1 || api->param(op, "lower", &lower, 1) != 1 ||
        api->param(op, "transpose_a", &trans, 1) != 1 ||
        api->param(op, "unit_diagonal", &unit, 1) != 1)
        return false;
    cft_dev_buf a = api->in(op, 0), b = api->in(op, 1), x = api->out(op, 0);
    if (!cft_solver_float(&a.aval, &d->dbl) || b.aval.dtype != a.aval.dtype ||
        !cft_solver_batch(&a.aval, &ba) || !cft_solver_batch(&b.aval, &bb) || ba != bb ||
        x.bytes != b.bytes)
        return false;
    int nd = b.aval.ndim;
    int64_t M = b.aval.shape[nd - 2], N = b.aval.shape[nd - 1], m = a.aval.shape[nd - 1];
    if (a.aval.ndim != nd || m != (left ? M : N))
        return false;
    /* column-major: B^T is [N, M], A^T is [m, m] */
    d->left = !left, d->upper = lower != 0, d->trans = trans != 0, d->unit = unit != 0;
    d->m = N, d->n = M, d->lda = m, d->ldb = N;
    d->sa = m * m, d->sb = M * N, d->batch = ba;
    return true;
}

/* solve (LU with partial pivoting, as the host kernel does it): X = op(A)^-1
 * B, A [n, n], B [n, k]. A copy of A read column-major is A^T, and getrf
 * factors it: A^T = P L U (the host's LAPACK call, the same storage). On X
 * (a copy of B, row-major [n, k]), the host then runs two row-major
 * left triangular solves with the factor storage and swaps X's rows by
 * the pivots (backwards after the solves for A X = B, forwards before
 * them for A^T X = B). Column-major, X is [k, n] (ld k) and each of those
 * solves is a right solve with the other triangle, the same op and
 * diagonal (as triangular_solve above); the row swaps are
 * cft_lu_swap_<t>. getrf's info > 0 for a batch element: singular. */
typedef struct {
    bool dbl, tr;
    int64_t n, k, batch;
    struct {
        bool upper, trans, unit; /* column-major, side right, on the factor storage */
    } solve[2];
} cft_lu_desc;

static inline bool cft_lu_map_op(const cft_dev_op_api *api, const cft_dev_op *op, cft_lu_desc *d) {
    int64_t tr, ba, bb;
    if (strcmp(api->name(op), "solve") || api->nin(op) != 2 ||
        api->param(op, "transpose_a", &tr, 1) != 1)
        return false;
    cft_dev_buf a = api->in(op, 0), b = api->in(op, 1), x = api->out(op, 0);
    if (!cft_solver_float(&a.aval, &d->dbl) || b.aval.dtype != a.aval.dtype ||
        !cft_solver_batch(&a.aval, &ba) || !cft_solver_batch(&b.aval, &bb) || ba != bb ||
        x.bytes != b.bytes || a.aval.ndim != b.aval.ndim)
        return false;
    int nd = a.aval.ndim;
    d->tr = tr != 0, d->batch = ba;
    d->n = a.aval.shape[nd - 1], d->k = b.aval.shape[nd - 1];
    if (b.aval.shape[nd - 2] != d->n)
        return false;
    /* the host's row-major solves: U^T (lower, non-unit) then L^T (upper,
     * unit), or with tr: upper unit transposed, then lower non-unit
     * transposed; column-major, the other triangle */
    d->solve[0].upper = d->tr ? false : true, d->solve[0].trans = d->tr, d->solve[0].unit = d->tr;
    d->solve[1].upper = d->tr ? true : false, d->solve[1].trans = d->tr, d->solve[1].unit = !d->tr;
    return true;
}

/* the row swaps of X by getrf's (1-based) pivots, per matrix and column:
 * struct { T *x; const int *piv; long long n, k, batch, fwd; } */
#define CFT_LU_SWAP_KERNEL(T, t)                                                                   \
    "struct cft_lu_swap_" #t " { " #T " *x; const int *piv; long long n, k, batch, fwd; };\n"      \
    "extern \"C\" __global__ void cft_lu_swap_" #t "(const struct cft_lu_swap_" #t " a) {\n"       \
    "    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < a.batch * "      \
    "a.k;\n"                                                                                       \
    "         t += (long long)gridDim.x * blockDim.x) {\n"                                         \
    "        " #T " *x = a.x + t / a.k * a.n * a.k;\n"                                             \
    "        const int *p = a.piv + t / a.k * a.n;\n"                                              \
    "        long long c = t % a.k;\n"                                                             \
    "        for (long long s = 0; s < a.n; s++) {\n"                                              \
    "            long long i = a.fwd ? s : a.n - 1 - s, r = p[i] - 1;\n"                           \
    "            if (r != i) {\n"                                                                  \
    "                " #T " v = x[i * a.k + c];\n"                                                 \
    "                x[i * a.k + c] = x[r * a.k + c];\n"                                           \
    "                x[r * a.k + c] = v;\n            }\n        }\n    }\n}\n"
#define CFT_LU_KERNELS CFT_LU_SWAP_KERNEL(float, f) CFT_LU_SWAP_KERNEL(double, d)

/* slogdet: getrf of a copy of A (read column-major, A^T: the same
 * determinant), then per matrix the sign (the pivots' row exchanges and
 * the negative diagonal entries of U) and the sum of log|U_ii|,
 * accumulated in double as the host does; a singular matrix (getrf's
 * info > 0) gives sign 0 and logabsdet -inf, as on the host. */
typedef struct {
    bool dbl;
    int64_t n, batch;
} cft_slogdet_desc;

static inline bool cft_slogdet_map_op(const cft_dev_op_api *api, const cft_dev_op *op,
                                      cft_slogdet_desc *d) {
    cft_dev_buf a, o[2];
    if (!cft_solver_unary(api, op, "slogdet", 2, &a, o, &d->dbl, &d->batch))
        return false;
    cft_dev_buf s = o[0], l = o[1];
    size_t es = d->dbl ? sizeof(double) : sizeof(float);
    d->n = a.aval.shape[a.aval.ndim - 1];
    return a.aval.shape[a.aval.ndim - 2] == d->n && s.bytes == (size_t)d->batch * es &&
           l.bytes == s.bytes;
}

/* sign and logabsdet from getrf's factors (column-major [n, n] each),
 * (1-based) pivots and infos, a thread per matrix:
 * struct { const T *fac; const int *piv, *info; T *sign, *lad; long long n, batch; } */
#define CFT_SLOGDET_KERNEL(T, t)                                                                   \
    "struct cft_slogdet_" #t " { const " #T " *fac; const int *piv, *info; " #T " *sign, *lad; "   \
    "long long n, batch; };\n"                                                                     \
    "extern \"C\" __global__ void cft_slogdet_" #t "(const struct cft_slogdet_" #t " a) {\n"       \
    "    for (long long m = (long long)blockIdx.x * blockDim.x + threadIdx.x; m < a.batch;\n"      \
    "         m += (long long)gridDim.x * blockDim.x) {\n"                                         \
    "        const " #T " *u = a.fac + m * a.n * a.n;\n"                                           \
    "        double sign = 1, lad = 0;\n"                                                          \
    "        for (long long i = 0; i < a.n; i++) {\n"                                              \
    "            double d = u[i * a.n + i];\n"                                                     \
    "            if (a.piv[m * a.n + i] != i + 1) sign = -sign;\n"                                 \
    "            if (d < 0) sign = -sign;\n"                                                       \
    "            lad += log(fabs(d));\n        }\n"                                                \
    "        if (a.info[m] > 0) sign = 0, lad = log(0.0);\n"                                       \
    "        a.sign[m] = (" #T ")sign, a.lad[m] = (" #T ")lad;\n    }\n}\n"
#define CFT_SLOGDET_KERNELS CFT_SLOGDET_KERNEL(float, f) CFT_SLOGDET_KERNEL(double, d)

/* eigh: the eigenvalues (ascending) and eigenvectors (V's columns) of the
 * symmetric matrix that A's row-major lower triangle holds, as the host's
 * LAPACKE_?syevd(ROW_MAJOR, 'L'). Read column-major, that triangle is the
 * upper one of the same matrix, so a column-major solver given a copy of
 * A and 'U' sees the same numbers; it leaves V column-major (read
 * row-major, V^T), and cft_eigh_vt_<t> writes it row-major into the
 * output. An eigenvector is defined up to its sign: another solver
 * (cuSOLVER's Jacobi syevj) may give the other one. */
typedef struct {
    bool dbl;
    int64_t n, batch;
} cft_eigh_desc;

static inline bool cft_eigh_map_op(const cft_dev_op_api *api, const cft_dev_op *op,
                                   cft_eigh_desc *d) {
    cft_dev_buf a, o[2];
    if (!cft_solver_unary(api, op, "eigh", 2, &a, o, &d->dbl, &d->batch))
        return false;
    cft_dev_buf w = o[0], v = o[1];
    size_t es = d->dbl ? sizeof(double) : sizeof(float);
    d->n = a.aval.shape[a.aval.ndim - 1];
    return a.aval.shape[a.aval.ndim - 2] == d->n && v.bytes == a.bytes &&
           w.bytes == (size_t)(d->batch * d->n) * es;
}

/* y = each n x n matrix of x transposed, over all batch * n * n elements:
 * struct { T *y; const T *x; long long n, total; } */
#define CFT_EIGH_KERNEL(T, t)                                                                      \
    "struct cft_eigh_vt_" #t " { " #T " *y; const " #T " *x; long long n, total; };\n"             \
    "extern \"C\" __global__ void cft_eigh_vt_" #t "(const struct cft_eigh_vt_" #t " a) {\n"       \
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.total;\n"      \
    "         i += (long long)gridDim.x * blockDim.x) {\n"                                         \
    "        long long nn = a.n * a.n, base = i / nn * nn, r = i % nn / a.n, c = i % a.n;\n"       \
    "        a.y[i] = a.x[base + c * a.n + r];\n    }\n}\n"
#define CFT_EIGH_KERNELS CFT_EIGH_KERNEL(float, f) CFT_EIGH_KERNEL(double, d)

/* qr (reduced, as the host's LAPACKE geqrf / orgqr): A [m, n] row-major
 * is first written column-major into a work buffer (cft_qr_in_<t>: the
 * same matrix, so the column-major geqrf and orgqr factor A itself, not
 * A^T), then R [k, n] (cft_qr_r_<t>: the upper triangle of geqrf's result)
 * and Q [m, k] (cft_qr_q_<t>: the first k columns orgqr leaves) are
 * written row-major, k = min(m, n). The libraries' calls are per matrix:
 * geqrf (with tau, k per matrix) and orgqr. */
typedef struct {
    bool dbl;
    int64_t m, n, k, batch;
} cft_qr_desc;

static inline bool cft_qr_map_op(const cft_dev_op_api *api, const cft_dev_op *op, cft_qr_desc *d) {
    cft_dev_buf a, o[2];
    if (!cft_solver_unary(api, op, "qr", 2, &a, o, &d->dbl, &d->batch))
        return false;
    cft_dev_buf q = o[0], r = o[1];
    size_t es = d->dbl ? sizeof(double) : sizeof(float);
    int nd = a.aval.ndim;
    d->m = a.aval.shape[nd - 2], d->n = a.aval.shape[nd - 1];
    d->k = d->m < d->n ? d->m : d->n;
    return q.bytes == (size_t)(d->batch * d->m * d->k) * es &&
           r.bytes == (size_t)(d->batch * d->k * d->n) * es;
}

/* over all batch * (rows * cols) elements of the output: struct { T *y;
 * const T *x; long long m, n, k, total; }. in: y (work, column-major
 * [m, n]) from x = A (row-major); r: y = R (row-major [k, n]) from x (the
 * work); q: y = Q (row-major [m, k]) from x (the work) */
#define CFT_QR_KERNEL(T, t)                                                                        \
    "struct cft_qr_" #t " { " #T " *y; const " #T " *x; long long m, n, k, total; };\n"            \
    "extern \"C\" __global__ void cft_qr_in_" #t "(const struct cft_qr_" #t " a) {\n"              \
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.total;\n"      \
    "         i += (long long)gridDim.x * blockDim.x) {\n"                                         \
    "        long long mn = a.m * a.n, b = i / mn, r = i % mn / a.n, c = i % a.n;\n"               \
    "        a.y[b * mn + c * a.m + r] = a.x[i];\n    }\n}\n"                                      \
    "extern \"C\" __global__ void cft_qr_r_" #t "(const struct cft_qr_" #t " a) {\n"               \
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.total;\n"      \
    "         i += (long long)gridDim.x * blockDim.x) {\n"                                         \
    "        long long kn = a.k * a.n, b = i / kn, r = i % kn / a.n, c = i % a.n;\n"               \
    "        a.y[i] = c >= r ? a.x[b * a.m * a.n + c * a.m + r] : (" #T ")0;\n    }\n}\n"          \
    "extern \"C\" __global__ void cft_qr_q_" #t "(const struct cft_qr_" #t " a) {\n"               \
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.total;\n"      \
    "         i += (long long)gridDim.x * blockDim.x) {\n"                                         \
    "        long long mk = a.m * a.k, b = i / mk, r = i % mk / a.k, c = i % a.k;\n"               \
    "        a.y[i] = a.x[b * a.m * a.n + c * a.m + r];\n    }\n}\n"
#define CFT_QR_KERNELS CFT_QR_KERNEL(float, f) CFT_QR_KERNEL(double, d)

/* svd (reduced, U [m, k], s [k], Vh [k, n], k = min(m, n), as the host's
 * gesdd 'S'; singular vectors up to sign). The column-major solver
 * (cuSOLVER's gesvd) needs rows >= cols, and gets W, a column-major
 * [rows, cols] copy: with m < n (tr), A itself as it lies (read
 * column-major, A^T: n x m), whose U (n x k, ld n) is Vh row-major and
 * whose VT (k x m, ld k) is U row-major, so the solver writes the outputs
 * in place; else A written column-major (cft_svd_t_<t> with rows n, cols
 * m: a row-major [m, n] is a column-major [n, m]), and U (m x k) and VT
 * (k x n) are written row-major by the same kernel after. */
typedef struct {
    bool dbl, tr;
    int64_t m, n, k, rows, cols, batch;
} cft_svd_desc;

static inline bool cft_svd_map_op(const cft_dev_op_api *api, const cft_dev_op *op,
                                  cft_svd_desc *d) {
    cft_dev_buf a, o[3];
    if (!cft_solver_unary(api, op, "svd", 3, &a, o, &d->dbl, &d->batch))
        return false;
    cft_dev_buf u = o[0], s = o[1], v = o[2];
    size_t es = d->dbl ? sizeof(double) : sizeof(float);
    int nd = a.aval.ndim;
    d->m = a.aval.shape[nd - 2], d->n = a.aval.shape[nd - 1];
    d->k = d->m < d->n ? d->m : d->n;
    d->tr = d->m < d->n;
    d->rows = d->tr ? d->n : d->m, d->cols = d->tr ? d->m : d->n;
    return u.bytes == (size_t)(d->batch * d->m * d->k) * es &&
           s.bytes == (size_t)(d->batch * d->k) * es &&
           v.bytes == (size_t)(d->batch * d->k * d->n) * es;
}

/* each matrix of x, column-major [rows, cols], written row-major into y,
 * over all batch * rows * cols elements:
 * struct { T *y; const T *x; long long rows, cols, total; } */
#define CFT_SVD_KERNEL(T, t)                                                                       \
    "struct cft_svd_t_" #t " { " #T " *y; const " #T " *x; long long rows, cols, total; };\n"      \
    "extern \"C\" __global__ void cft_svd_t_" #t "(const struct cft_svd_t_" #t " a) {\n"           \
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.total;\n"      \
    "         i += (long long)gridDim.x * blockDim.x) {\n"                                         \
    "        long long rc = a.rows * a.cols, b = i / rc, r = i % rc / a.cols, c = i % a.cols;\n"   \
    "        a.y[i] = a.x[b * rc + c * a.rows + r];\n    }\n}\n"
#define CFT_SVD_KERNELS CFT_SVD_KERNEL(float, f) CFT_SVD_KERNEL(double, d)

/* Steps 1 and 2 of cholesky as CUDA C kernels over all batch * n * n
 * elements (grid-stride loops; NVRTC in the CUDA backend): cft_chol_sym_<t>
 * writes S of a into y, cft_chol_zero_<t> zeroes y's strict upper
 * triangles. Their argument: struct { T *y; const T *a; long long n, total; }. */
#define CFT_CHOL_KERNEL(T, t)                                                                      \
    "struct cft_chol_" #t " { " #T " *y; const " #T " *a; long long n, total; };\n"                \
    "extern \"C\" __global__ void cft_chol_sym_" #t "(const struct cft_chol_" #t " p) {\n"         \
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.total;\n"      \
    "         i += (long long)gridDim.x * blockDim.x) {\n"                                         \
    "        long long nn = p.n * p.n, base = i / nn * nn, r = i % nn / p.n, c = i % p.n;\n"       \
    "        p.y[i] = r == c ? p.a[i]\n"                                                           \
    "                        : (p.a[base + r * p.n + c] + p.a[base + c * p.n + r]) * (" #T         \
    ")0.5;\n"                                                                                      \
    "    }\n}\n"                                                                                   \
    "extern \"C\" __global__ void cft_chol_zero_" #t "(const struct cft_chol_" #t " p) {\n"        \
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.total;\n"      \
    "         i += (long long)gridDim.x * blockDim.x)\n"                                           \
    "        if (i % p.n > i % (p.n * p.n) / p.n) p.y[i] = 0;\n}\n"
#define CFT_CHOL_KERNELS CFT_CHOL_KERNEL(float, f) CFT_CHOL_KERNEL(double, d)

#endif
