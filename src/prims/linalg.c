/* linalg.c: the linear-algebra primitives, each one record with all its
 * rules: cholesky, triangular_solve, solve (LU), slogdet, eigh, qr, svd.
 * They take matrices with leading batch dims (equal across operands), so
 * every vmap rule moves the batch axis to the front. Kernels copy each
 * operand once and call LAPACKE / CBLAS per matrix (cholesky and the LU
 * solves pick layouts so LAPACK makes no copies of its own); a failure
 * (a matrix that is not positive definite, a singular one) is an error
 * array naming the primitive, the aval and the batch element. Rules are
 * written with public ops and these primitives, so they compose under
 * every transform (higher derivatives included). */
#include <cblas.h>
#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "prims/linalg_prims.h"

/* ======== shared ======== */

static cft_array *need_mat(const char *name, const cft_aval *a, bool square) {
    if (!cft__dtype_in(a->dtype, CFT_DT_FLOAT))
        return cft__fail(CFT_E_DTYPE, "%s: needs float matrices, got %s", name, cft__av(a));
    if (a->ndim < 2)
        return cft__fail(CFT_E_SHAPE, "%s: needs matrices (rank >= 2), got %s", name, cft__av(a));
    if (square && a->shape[a->ndim - 1] != a->shape[a->ndim - 2])
        return cft__fail(CFT_E_SHAPE, "%s: needs square matrices, got %s", name, cft__av(a));
    return NULL;
}

/* b's leading dims (all but its last `bcore`) equal a's leading dims */
static cft_array *same_batch(const char *name, const cft_aval *a, const cft_aval *b) {
    if (a->dtype != b->dtype)
        return cft__fail(CFT_E_DTYPE, "%s: dtypes differ: %s, %s", name, cft__av(a), cft__av(b));
    bool ok = a->ndim == b->ndim;
    for (int i = 0; ok && i < a->ndim - 2; i++)
        ok = a->shape[i] == b->shape[i];
    if (!ok)
        return cft__fail(CFT_E_SHAPE, "%s: batch dims differ: %s, %s", name, cft__av(a),
                         cft__av(b));
    return NULL;
}

static int64_t nbatch(const cft_aval *a, int core) {
    int64_t n = 1;
    for (int i = 0; i < a->ndim - core; i++)
        n *= a->shape[i];
    return n;
}

/* "the matrix" or "batch element [i, j]" for flat batch index k */
static const char *batch_el(const cft_aval *a, int core, int64_t k, char *buf, size_t len) {
    int nb = a->ndim - core;
    if (nb <= 0)
        return "the matrix";
    int64_t idx[CFT_MAX_NDIM];
    for (int i = nb - 1; i >= 0; i--)
        idx[i] = k % a->shape[i], k /= a->shape[i];
    size_t o = (size_t)snprintf(buf, len, "batch element [");
    for (int i = 0; i < nb && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)idx[i]);
    if (o < len)
        snprintf(buf + o, len - o, "]");
    return buf;
}

/* a fresh contiguous copy of x (LAPACK overwrites its operands) */
static cft_array *fresh(cft_array *x) {
    cft_array *c = cft__contig(x);
    if (cft_failed(c))
        return c;
    cft_array *y = cft__alloc(x->aval.dtype, x->aval.shape, x->aval.ndim);
    if (cft_failed(y))
        return y;
    memcpy(cft__ptr(y), cft__ptr(c),
           (size_t)cft__numel(x->aval.shape, x->aval.ndim) * cft_dtype_size(x->aval.dtype));
    cft__keep(c);
    return y;
}

static cft_aval with_last(const cft_aval *a, int core, const int64_t *last, int nlast) {
    cft_aval o = *a;
    o.ndim = a->ndim - core + nlast;
    for (int i = 0; i < nlast; i++)
        o.shape[a->ndim - core + i] = last[i];
    return o;
}

/* vmap: every operand batched at the front (unbatched ones broadcast) */
static cft_array *front_vmap(const cft_prim *prim, int64_t size, cft_array *const *x,
                             const int *bdim, int nin, const cft_params *p, cft_array **y,
                             int *ybdim) {
    cft_array *args[4];
    for (int i = 0; i < nin; i++)
        args[i] = cft__batch_at(x[i], bdim[i], size, 0);
    int nout = cft__nout(prim, p, nin);
    for (int i = 0; i < nout; i++)
        ybdim[i] = 0;
    return cft__bind(prim, p, nin, args, nout, y);
}
#define FRONT_VMAP(NAME)                                                                           \
    static cft_array *NAME##_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,     \
                                  const cft_params *p, cft_array **y, int *ybdim) {                \
        return front_vmap(&cft_p_##NAME, size, x, bdim, nin, p, y, ybdim);                         \
    }

/* ---- ops helpers ---- */

static cft_array *tri_mask(cft_array *x, int k, bool lower) {
    if (cft_failed(x))
        return x;
    int nd = x->aval.ndim;
    int64_t sh[2] = {x->aval.shape[nd - 2], x->aval.shape[nd - 1]};
    cft_array *r = cft_iota(CFT_I64, sh, 2, 0), *c = cft_iota(CFT_I64, sh, 2, 1);
    cft_array *d = cft_sub(c, r); /* j - i */
    cft_array *m = lower ? cft_le(d, cft_scalar(k, CFT_I64)) : cft_ge(d, cft_scalar(k, CFT_I64));
    return cft_where(m, x, cft_scalar(0, x->aval.dtype));
}
cft_array *cft__tril(cft_array *x, int k) {
    return tri_mask(x, k, true);
}
cft_array *cft__triu(cft_array *x, int k) {
    return tri_mask(x, k, false);
}
cft_array *cft__eye_like(cft_array *x) {
    if (cft_failed(x))
        return x;
    return cft_eye(x->aval.shape[x->aval.ndim - 1], x->aval.dtype);
}
cft_array *cft__diagonal(cft_array *x) {
    return cft_sum(cft_mul(x, cft__eye_like(x)), (int[]){-1}, 1, false);
}
cft_array *cft__diag_embed(cft_array *v) {
    return cft_mul(cft_expand_dims(v, -2), cft__eye_like(v));
}
/* the symmetric matrix whose lower triangle is x's (what kernels that read
 * the lower triangle see) */
static cft_array *sym_lower(cft_array *x) {
    cft_array *l = cft__tril(x, 0);
    return cft_add(l, cft_mT(cft__tril(x, -1)));
}
static cft_array *trace(cft_array *x) {
    return cft_sum(cft__diagonal(x), (int[]){-1}, 1, false);
}

/* ======== cholesky ======== */

/* cholesky(A): the lower Cholesky factor of (A + A^T)/2 (the public op's
 * semantics, JAX's symmetrize_input), its upper triangle zero */

static cft_array *chol_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    cft_array *e = need_mat("cholesky", &in[0], true);
    if (e)
        return e;
    out[0] = in[0];
    return NULL;
}

/* The kernel never lets LAPACKE change layouts (its row-major entry points
 * copy every matrix to column-major and back): S = (A + A^T)/2 goes into a
 * scratch matrix as its upper triangle, which read column-major is the
 * lower triangle of the same S; ?potrf factors that in place (the 'L'
 * variant: 'U' measured 1.4-1.6x slower in OpenBLAS 0.3.21), and L is the
 * scratch's upper triangle transposed into the output, whose upper
 * triangle is zeroed in the same pass. A is copied in whole first (a
 * strided read of A, likely out of cache, would not stream) and
 * symmetrised in the scratch, which stays in cache. The output is fresh
 * memory, likely out of cache: a matrix that fits in L1 has its output
 * lines prefetched before potrf (they arrive while it runs) and goes out
 * row by row; a larger one goes out in blocks of TILE rows, each zeroed by
 * one sequential memset (which brings its lines in faster than the
 * transposed tiles would) before the tiles land. */
enum { TILE = 16, SMALL_BYTES = 32768 };
#define DEF_CHOL(NAME, T, POTRF)                                                                   \
    static lapack_int NAME(const T *restrict a, T *restrict y, T *restrict sc, int64_t n,          \
                           int64_t nb, int64_t *bad) {                                             \
        bool small = (size_t)(n * n) * sizeof(T) <= SMALL_BYTES;                                   \
        for (int64_t k = 0; k < nb; k++) {                                                         \
            T *restrict o = y + k * n * n;                                                         \
            memcpy(sc, a + k * n * n, sizeof(T) * (size_t)(n * n));                                \
            /* S into sc's upper triangle, from its lower one (the diagonal                        \
             * stays: (a + a)/2 = a) */                                                            \
            for (int64_t i0 = 0; i0 < n; i0 += TILE)                                               \
                for (int64_t j0 = i0; j0 < n; j0 += TILE) {                                        \
                    if (j0 > i0 && j0 + TILE <= n) {                                               \
                        for (int64_t i = i0; i < i0 + TILE; i++)                                   \
                            for (int64_t j = j0; j < j0 + TILE; j++)                               \
                                sc[i * n + j] = (sc[i * n + j] + sc[j * n + i]) * (T)0.5;          \
                        continue;                                                                  \
                    }                                                                              \
                    int64_t ie = i0 + TILE < n ? i0 + TILE : n,                                    \
                            je = j0 + TILE < n ? j0 + TILE : n;                                    \
                    for (int64_t i = i0; i < ie; i++)                                              \
                        for (int64_t j = j0 > i ? j0 : i + 1; j < je; j++)                         \
                            sc[i * n + j] = (sc[i * n + j] + sc[j * n + i]) * (T)0.5;              \
                }                                                                                  \
            for (int64_t off = 0; small && off < n * n; off += 64 / (int64_t)sizeof(T))            \
                __builtin_prefetch(o + off, 1, 3);                                                 \
            lapack_int info = POTRF(LAPACK_COL_MAJOR, 'L', (lapack_int)n, sc, (lapack_int)n);      \
            if (info) {                                                                            \
                *bad = k;                                                                          \
                return info;                                                                       \
            }                                                                                      \
            if (small) {                                                                           \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    for (int64_t j = 0; j <= i; j++)                                               \
                        o[i * n + j] = sc[j * n + i];                                              \
                    memset(o + i * n + i + 1, 0, sizeof(T) * (size_t)(n - i - 1));                 \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t i0 = 0; i0 < n; i0 += TILE) { /* o's lower triangle: sc's upper^T */      \
                int64_t ie = i0 + TILE < n ? i0 + TILE : n;                                        \
                memset(o + i0 * n, 0, sizeof(T) * (size_t)((ie - i0) * n));                        \
                for (int64_t j0 = 0; j0 <= i0; j0 += TILE) {                                       \
                    if (j0 < i0 && ie == i0 + TILE) {                                              \
                        for (int64_t i = i0; i < i0 + TILE; i++)                                   \
                            for (int64_t j = j0; j < j0 + TILE; j++)                               \
                                o[i * n + j] = sc[j * n + i];                                      \
                        continue;                                                                  \
                    }                                                                              \
                    for (int64_t i = i0; i < ie; i++)                                              \
                        for (int64_t j = j0; j <= i && j < j0 + TILE; j++)                         \
                            o[i * n + j] = sc[j * n + i];                                          \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        return 0;                                                                                  \
    }
DEF_CHOL(chol_f32, float, LAPACKE_spotrf_work)
DEF_CHOL(chol_f64, double, LAPACKE_dpotrf_work)

static cft_array *chol_into(cft_array *const *in, int nin, const cft_params *p, cft_array *out) {
    (void)nin, (void)p;
    cft_array *A = cft__contig(in[0]);
    if (cft_failed(A))
        return A;
    const cft_aval *a = &in[0]->aval;
    int64_t n = a->shape[a->ndim - 1], nb = nbatch(a, 2), bad = 0;
    if (!n || !nb)
        return NULL;
    void *sc = cft__new_data((size_t)(n * n) * cft_dtype_size(a->dtype));
    if (!sc)
        return cft__fail(CFT_E_NOMEM, "cholesky: out of memory");
    lapack_int info = a->dtype == CFT_F32 ? chol_f32(cft__ptr(A), cft__ptr(out), sc, n, nb, &bad)
                                          : chol_f64(cft__ptr(A), cft__ptr(out), sc, n, nb, &bad);
    cft__keep(sc);
    cft__keep(A);
    char buf[128];
    if (info > 0)
        return cft__fail(CFT_E_ARG,
                         "cholesky: %s of %s is not positive definite (leading minor of order %d)",
                         batch_el(a, 2, bad, buf, sizeof buf), cft__av(a), (int)info);
    if (info < 0)
        return cft__fail(CFT_E_FOREIGN, "cholesky: LAPACK ?potrf failed (info %d)", (int)info);
    /* a NaN anywhere in a matrix makes its row's diagonal entry NaN, and
     * OpenBLAS's ?potrf does not report it (reference LAPACK does): the
     * diagonals are checked, n per matrix against its n^3 / 3 */
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < n; i++) {
            int64_t at = (b * n + i) * n + i;
            double d = a->dtype == CFT_F32 ? ((const float *)cft__ptr(out))[at]
                                           : ((const double *)cft__ptr(out))[at];
            if (!isfinite(d))
                return cft__fail(CFT_E_ARG,
                                 "cholesky: %s of %s is not finite (NaN or inf: its factor's "
                                 "diagonal entry %lld is %g)",
                                 batch_el(a, 2, b, buf, sizeof buf), cft__av(a), (long long)i, d);
        }
    return NULL;
}

static cft_array *chol_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    return cft__impl_by_into(&cft_p_cholesky, in, nin, p, out);
}

/* dL = L Phi(L^-1 dA L^-T), Phi: the lower triangle with the diagonal
 * halved; dA = (t + t^T)/2, the tangent of what the kernel factors */
static cft_array *chol_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)x, (void)nin, (void)p;
    ty[0] = NULL;
    if (!t[0])
        return NULL;
    cft_array *L = y[0], *dA = cft_mul_s(cft_add(t[0], cft_mT(t[0])), 0.5);
    cft_array *tmp = cft__triangular_solve(L, dA, false, true, true, false); /* dA L^-T */
    tmp = cft__triangular_solve(L, tmp, true, true, false, false);           /* L^-1 dA L^-T */
    cft_array *phi = cft_add(cft__tril(tmp, -1), cft_mul_s(cft_mul(tmp, cft__eye_like(tmp)), 0.5));
    ty[0] = cft_matmul(L, phi);
    return NULL;
}

FRONT_VMAP(cholesky)

const cft_prim cft_p_cholesky = {
    .name = "cholesky",
    .nin = 1,
    .nout = 1,
    .shape = chol_shape,
    .impl = chol_impl,
    .jvp = chol_jvp,
    .impl_into = chol_into,
    .vmap = cholesky_vmap,
};

cft_array *cft__cholesky(cft_array *a) {
    return cft__bind1(&cft_p_cholesky, &(cft_params){0}, 1, &a);
}

/* ======== triangular_solve ======== */

enum { TS_LEFT, TS_LOWER, TS_TRANS, TS_UNIT };

static cft_array *ts_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    cft_array *e = need_mat("triangular_solve", &in[0], true);
    if (!e)
        e = need_mat("triangular_solve", &in[1], false);
    if (!e)
        e = same_batch("triangular_solve", &in[0], &in[1]);
    if (e)
        return e;
    int nd = in[1].ndim;
    int64_t m = in[0].shape[nd - 1],
            bm = p->v[TS_LEFT][0] ? in[1].shape[nd - 2] : in[1].shape[nd - 1];
    if (m != bm)
        return cft__fail(CFT_E_SHAPE, "triangular_solve: %s does not fit %s (%s side)",
                         cft__av(&in[0]), cft__av(&in[1]), p->v[TS_LEFT][0] ? "left" : "right");
    out[0] = in[1];
    return NULL;
}

static cft_array *ts_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    cft_array *A = cft__contig(in[0]), *X = fresh(in[1]);
    if (cft_failed(A))
        return A;
    if (cft_failed(X))
        return X;
    const cft_aval *b = &in[1]->aval;
    int nd = b->ndim;
    int64_t M = b->shape[nd - 2], N = b->shape[nd - 1], m = in[0]->aval.shape[nd - 1],
            nb = nbatch(b, 2);
    CBLAS_SIDE side = p->v[TS_LEFT][0] ? CblasLeft : CblasRight;
    CBLAS_UPLO uplo = p->v[TS_LOWER][0] ? CblasLower : CblasUpper;
    CBLAS_TRANSPOSE tr = p->v[TS_TRANS][0] ? CblasTrans : CblasNoTrans;
    CBLAS_DIAG dg = p->v[TS_UNIT][0] ? CblasUnit : CblasNonUnit;
    if (M * N > 0)
        for (int64_t k = 0; k < nb; k++) {
            if (b->dtype == CFT_F32)
                cblas_strsm(CblasRowMajor, side, uplo, tr, dg, (int)M, (int)N, 1.0f,
                            (const float *)cft__ptr(A) + k * m * m, (int)m,
                            (float *)cft__ptr(X) + k * M * N, (int)N);
            else
                cblas_dtrsm(CblasRowMajor, side, uplo, tr, dg, (int)M, (int)N, 1.0,
                            (const double *)cft__ptr(A) + k * m * m, (int)m,
                            (double *)cft__ptr(X) + k * M * N, (int)N);
        }
    cft__keep(A);
    out[0] = X;
    return NULL;
}

static cft_array *ts_bind(cft_array *a, cft_array *b, const cft_params *p) {
    return cft__bind1(&cft_p_triangular_solve, p, 2, (cft_array *[]){a, b});
}

/* X = op(A)^-1 B (left) or B op(A)^-1 (right):
 * dX = op(A)^-1 (dB - op(dA) X), or (dB - X op(dA)) op(A)^-1, where dA is
 * masked to the triangle the kernel reads (and no diagonal if unit) */
static cft_array *ts_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                         const cft_params *p, cft_array **ty) {
    (void)nin;
    cft_array *rhs = t[1];
    if (t[0]) {
        bool lower = p->v[TS_LOWER][0];
        cft_array *dA = lower ? cft__tril(t[0], p->v[TS_UNIT][0] ? -1 : 0)
                              : cft__triu(t[0], p->v[TS_UNIT][0] ? 1 : 0);
        if (p->v[TS_TRANS][0])
            dA = cft_mT(dA);
        cft_array *prod = p->v[TS_LEFT][0] ? cft_matmul(dA, y[0]) : cft_matmul(y[0], dA);
        rhs = cft__tsub(rhs, prod);
    }
    ty[0] = rhs ? ts_bind(x[0], rhs, p) : NULL;
    return NULL;
}

/* linear in b: B^T-bar = the solve with op(A) transposed */
static cft_array *ts_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                               int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin;
    if (!x[0])
        return cft__fail(
            CFT_E_TRACE,
            "triangular_solve: transpose with respect to the matrix (not linear in it)");
    cft_params q = *p;
    q.v[TS_TRANS][0] = !q.v[TS_TRANS][0];
    ct_in[0] = NULL;
    ct_in[1] = ct[0] ? ts_bind(x[0], ct[0], &q) : NULL;
    return NULL;
}

FRONT_VMAP(triangular_solve)

const cft_prim cft_p_triangular_solve = {
    .name = "triangular_solve",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"#left_side", "#lower", "#transpose_a", "#unit_diagonal"},
    .shape = ts_shape,
    .impl = ts_impl,
    .jvp = ts_jvp,
    .transpose = ts_transpose,
    .vmap = triangular_solve_vmap,
};

cft_array *cft__triangular_solve(cft_array *a, cft_array *b, bool left, bool lower, bool trans,
                                 bool unit) {
    cft_params p = {0};
    cft__param_set1(&p, TS_LEFT, left);
    cft__param_set1(&p, TS_LOWER, lower);
    cft__param_set1(&p, TS_TRANS, trans);
    cft__param_set1(&p, TS_UNIT, unit);
    return ts_bind(a, b, &p);
}

/* ======== LU: solve and slogdet ======== */

/* LU without layout copies: a row-major matrix is its transpose read
 * column-major, so ?getrf on a copy of A (column-major) factors
 * A^T = P L U; read row-major, the copy then holds U^T in its lower
 * triangle and L^T (unit diagonal) strictly above. det(A^T) = det(A), and
 * the solves below use the factors of A^T (CBLAS takes row-major operands
 * without copying). */
static lapack_int lu_factor(cft_dtype dt, void *m, int64_t n, lapack_int *ipiv) {
    if (!n)
        return 0;
    if (dt == CFT_F32)
        return LAPACKE_sgetrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n, m, (lapack_int)n,
                                   ipiv);
    return LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n, m, (lapack_int)n,
                               ipiv);
}

/* X (n x K, row-major) := op(A)^-1 X from lu_factor's copy `lu` and pivots.
 * With A^T = P L U: A X = B is X = P L^-T U^-T B (two triangular solves,
 * then the row interchanges backwards); A^T X = B is X = U^-1 L^-1 P^T B
 * (interchanges forwards, then the solves). */
#define DEF_LU_SOLVE(NAME, T, TRSM)                                                                \
    static void NAME(const T *lu, const lapack_int *ipiv, T *x, int64_t n, int64_t K, bool tr) {   \
        int in = (int)n, iK = (int)K;                                                              \
        if (tr)                                                                                    \
            for (int64_t i = 0; i < n; i++)                                                        \
                swap_rows_##T(x, i, ipiv[i] - 1, K);                                               \
        TRSM(CblasRowMajor, CblasLeft, tr ? CblasUpper : CblasLower,                               \
             tr ? CblasTrans : CblasNoTrans, tr ? CblasUnit : CblasNonUnit, in, iK, 1, lu, in, x,  \
             iK);                                                                                  \
        TRSM(CblasRowMajor, CblasLeft, tr ? CblasLower : CblasUpper,                               \
             tr ? CblasTrans : CblasNoTrans, tr ? CblasNonUnit : CblasUnit, in, iK, 1, lu, in, x,  \
             iK);                                                                                  \
        if (!tr)                                                                                   \
            for (int64_t i = n - 1; i >= 0; i--)                                                   \
                swap_rows_##T(x, i, ipiv[i] - 1, K);                                               \
    }
#define DEF_SWAP_ROWS(T)                                                                           \
    static inline void swap_rows_##T(T *x, int64_t i, int64_t r, int64_t K) {                      \
        if (r == i)                                                                                \
            return;                                                                                \
        T *p = x + i * K, *q = x + r * K;                                                          \
        for (int64_t c = 0; c < K; c++) {                                                          \
            T t = p[c];                                                                            \
            p[c] = q[c];                                                                           \
            q[c] = t;                                                                              \
        }                                                                                          \
    }
DEF_SWAP_ROWS(float)
DEF_SWAP_ROWS(double)
DEF_LU_SOLVE(lu_solve_f32, float, cblas_strsm)
DEF_LU_SOLVE(lu_solve_f64, double, cblas_dtrsm)

static cft_array *solve_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    cft_array *e = need_mat("solve", &in[0], true);
    if (!e)
        e = need_mat("solve", &in[1], false);
    if (!e)
        e = same_batch("solve", &in[0], &in[1]);
    if (e)
        return e;
    int nd = in[0].ndim;
    if (in[1].shape[nd - 2] != in[0].shape[nd - 1])
        return cft__fail(CFT_E_SHAPE, "solve: %s does not fit %s", cft__av(&in[0]),
                         cft__av(&in[1]));
    out[0] = in[1];
    return NULL;
}

/* B is copied into the output once and solved in place; each A is copied
 * into one scratch matrix (in cache) and factored there */
static cft_array *solve_into(cft_array *const *in, int nin, const cft_params *p, cft_array *X) {
    (void)nin;
    cft_array *A = cft__contig(in[0]), *B = cft__contig(in[1]);
    if (cft_failed(A))
        return A;
    if (cft_failed(B))
        return B;
    const cft_aval *a = &in[0]->aval;
    int nd = a->ndim;
    int64_t n = a->shape[nd - 1], K = in[1]->aval.shape[nd - 1], nb = nbatch(a, 2);
    size_t es = cft_dtype_size(a->dtype);
    memcpy(cft__ptr(X), cft__ptr(B), (size_t)(nb * n * K) * es);
    if (!n || !nb)
        return NULL;
    void *lu = cft__new_data((size_t)(n * n) * es);
    lapack_int *ipiv = cft__new_data(sizeof(lapack_int) * (size_t)n);
    if (!lu || !ipiv)
        return cft__fail(CFT_E_NOMEM, "solve: out of memory");
    bool tr = p->v[0][0];
    char buf[128];
    cft_array *err = NULL;
    for (int64_t k = 0; k < nb && !err; k++) {
        memcpy(lu, (const char *)cft__ptr(A) + (size_t)(k * n * n) * es, (size_t)(n * n) * es);
        lapack_int info = lu_factor(a->dtype, lu, n, ipiv);
        if (info > 0)
            err = cft__fail(CFT_E_ARG, "solve: %s of %s is singular (U[%d, %d] is zero)",
                            batch_el(a, 2, k, buf, sizeof buf), cft__av(a), (int)info - 1,
                            (int)info - 1);
        else if (info < 0)
            err = cft__fail(CFT_E_FOREIGN, "solve: LAPACK ?getrf failed (info %d)", (int)info);
        else if (K && a->dtype == CFT_F32)
            lu_solve_f32(lu, ipiv, (float *)cft__ptr(X) + k * n * K, n, K, tr);
        else if (K)
            lu_solve_f64(lu, ipiv, (double *)cft__ptr(X) + k * n * K, n, K, tr);
    }
    cft__keep(lu);
    cft__keep(ipiv);
    cft__keep(A);
    cft__keep(B);
    return err;
}

static cft_array *solve_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    return cft__impl_by_into(&cft_p_solve, in, nin, p, out);
}

/* X = op(A)^-1 B: dX = op(A)^-1 (dB - op(dA) X), one solve */
static cft_array *solve_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                            const cft_params *p, cft_array **ty) {
    (void)nin;
    cft_array *rhs = t[1];
    if (t[0])
        rhs = cft__tsub(rhs, cft_matmul(p->v[0][0] ? cft_mT(t[0]) : t[0], y[0]));
    ty[0] = rhs ? cft__solve(x[0], rhs, p->v[0][0]) : NULL;
    return NULL;
}

static cft_array *solve_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                  int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin;
    if (!x[0])
        return cft__fail(CFT_E_TRACE,
                         "solve: transpose with respect to the matrix (not linear in it)");
    ct_in[0] = NULL;
    ct_in[1] = ct[0] ? cft__solve(x[0], ct[0], !p->v[0][0]) : NULL;
    return NULL;
}

FRONT_VMAP(solve)

const cft_prim cft_p_solve = {
    .name = "solve",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"#transpose_a"},
    .shape = solve_shape,
    .impl = solve_impl,
    .jvp = solve_jvp,
    .impl_into = solve_into,
    .transpose = solve_transpose,
    .vmap = solve_vmap,
};

cft_array *cft__solve(cft_array *a, cft_array *b, bool trans) {
    cft_params p = {0};
    cft__param_set1(&p, 0, trans);
    return cft__bind1(&cft_p_solve, &p, 2, (cft_array *[]){a, b});
}

static cft_array *slogdet_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    cft_array *e = need_mat("slogdet", &in[0], true);
    if (e)
        return e;
    out[0] = with_last(&in[0], 2, NULL, 0);
    out[1] = out[0];
    return NULL;
}

/* a singular matrix gives sign 0 and logabsdet -inf (as torch) */
static cft_array *slogdet_impl(cft_array *const *in, int nin, const cft_params *p,
                               cft_array **out) {
    (void)nin, (void)p;
    cft_array *A = cft__contig(in[0]);
    if (cft_failed(A))
        return A;
    const cft_aval *a = &in[0]->aval;
    cft_aval o = with_last(a, 2, NULL, 0);
    int64_t n = a->shape[a->ndim - 1], nb = nbatch(a, 2);
    size_t es = cft_dtype_size(a->dtype);
    cft_array *s = cft__alloc(o.dtype, o.shape, o.ndim), *l = cft__alloc(o.dtype, o.shape, o.ndim);
    if (cft_failed(s))
        return s;
    if (cft_failed(l))
        return l;
    void *lu = cft__new_data((size_t)(n * n) * es);
    lapack_int *ipiv = cft__new_data(sizeof(lapack_int) * (size_t)(n + 1));
    if (!lu || !ipiv)
        return cft__fail(CFT_E_NOMEM, "slogdet: out of memory");
    for (int64_t k = 0; k < nb; k++) {
        memcpy(lu, (const char *)cft__ptr(A) + (size_t)(k * n * n) * es, (size_t)(n * n) * es);
        lapack_int info = lu_factor(a->dtype, lu, n, ipiv);
        if (info < 0)
            return cft__fail(CFT_E_FOREIGN, "slogdet: LAPACK ?getrf failed (info %d)", (int)info);
        double sign = 1, lad = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = cft__get(lu, a->dtype, i * n + i);
            if (ipiv[i] != i + 1)
                sign = -sign;
            if (d < 0)
                sign = -sign;
            lad += log(fabs(d));
        }
        if (info > 0)
            sign = 0, lad = -INFINITY;
        cft__set(cft__ptr(s), o.dtype, k, sign);
        cft__set(cft__ptr(l), o.dtype, k, lad);
    }
    cft__keep(ipiv);
    cft__keep(lu);
    cft__keep(A);
    out[0] = s;
    out[1] = l;
    return NULL;
}

/* d sign = 0; d logabsdet = tr(A^-1 dA) */
static cft_array *slogdet_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)y, (void)nin, (void)p;
    ty[0] = ty[1] = NULL;
    if (t[0])
        ty[1] = trace(cft__solve(x[0], t[0], false));
    return NULL;
}

FRONT_VMAP(slogdet)

const cft_prim cft_p_slogdet = {
    .name = "slogdet",
    .nin = 1,
    .nout = 2,
    .shape = slogdet_shape,
    .impl = slogdet_impl,
    .jvp = slogdet_jvp,
    .vmap = slogdet_vmap,
};

cft_array *cft__slogdet(cft_array *a, cft_array **sign, cft_array **logabsdet) {
    cft_array *o[2];
    cft_array *e = cft__bind(&cft_p_slogdet, &(cft_params){0}, 1, &a, 2, o);
    *sign = o[0], *logabsdet = o[1];
    return e;
}

/* ======== eigh ======== */

static cft_array *eigh_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    cft_array *e = need_mat("eigh", &in[0], true);
    if (e)
        return e;
    out[0] = with_last(&in[0], 1, NULL, 0); /* [..., n] */
    out[1] = in[0];
    return NULL;
}

static cft_array *eigh_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    cft_array *V = fresh(in[0]);
    if (cft_failed(V))
        return V;
    const cft_aval *a = &in[0]->aval;
    cft_aval wa = with_last(a, 1, NULL, 0);
    cft_array *w = cft__alloc(wa.dtype, wa.shape, wa.ndim);
    if (cft_failed(w))
        return w;
    int64_t n = a->shape[a->ndim - 1], nb = nbatch(a, 2);
    char buf[128];
    for (int64_t k = 0; k < nb && n; k++) {
        lapack_int info;
        if (a->dtype == CFT_F32)
            info = LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'L', (lapack_int)n,
                                  (float *)cft__ptr(V) + k * n * n, (lapack_int)n,
                                  (float *)cft__ptr(w) + k * n);
        else
            info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'L', (lapack_int)n,
                                  (double *)cft__ptr(V) + k * n * n, (lapack_int)n,
                                  (double *)cft__ptr(w) + k * n);
        if (info)
            return cft__fail(CFT_E_FOREIGN, "eigh: LAPACK ?syevd failed on %s of %s (info %d)",
                             batch_el(a, 2, k, buf, sizeof buf), cft__av(a), (int)info);
    }
    out[0] = w;
    out[1] = V;
    return NULL;
}

/* 1/(x_j - x_i) over the last axis of x [..., n] -> [..., n, n], 0 on the
 * diagonal and wherever |x_j - x_i| <= n eps max|x| (degenerate pairs: their
 * eigenvectors are not unique, and the guard keeps the tangent finite) */
static cft_array *gap_inverse(cft_array *x) {
    if (cft_failed(x))
        return x;
    int64_t n = x->aval.shape[x->aval.ndim - 1];
    double eps = x->aval.dtype == CFT_F64 ? DBL_EPSILON : FLT_EPSILON;
    cft_array *d = cft_sub(cft_expand_dims(x, -2), cft_expand_dims(x, -1)); /* d_ij = x_j - x_i */
    cft_array *scale = cft_max(cft_abs(x), (int[]){-1}, 1, true);           /* [..., 1] */
    cft_array *tol = cft_mul_s(cft_expand_dims(scale, -1), (double)(n > 1 ? n : 1) * eps);
    cft_array *ok = cft_gt(cft_abs(d), tol);
    return cft_where(ok, cft_reciprocal(cft_where(ok, d, cft_scalar(1, x->aval.dtype))),
                     cft_scalar(0, x->aval.dtype));
}

/* M = V^T dA V; dw = diag(M); dV = V (F o M), F_ij = 1/(w_j - w_i) (0 for
 * i == j and degenerate pairs) */
static cft_array *eigh_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)x, (void)nin, (void)p;
    ty[0] = ty[1] = NULL;
    if (!t[0])
        return NULL;
    cft_array *w = y[0], *V = y[1];
    cft_array *M = cft_matmul(cft_mT(V), cft_matmul(sym_lower(t[0]), V));
    ty[0] = cft__diagonal(M);
    ty[1] = cft_matmul(V, cft_mul(gap_inverse(w), M));
    return NULL;
}

FRONT_VMAP(eigh)

const cft_prim cft_p_eigh = {
    .name = "eigh",
    .nin = 1,
    .nout = 2,
    .shape = eigh_shape,
    .impl = eigh_impl,
    .jvp = eigh_jvp,
    .vmap = eigh_vmap,
};

cft_array *cft__eigh(cft_array *a, cft_array **w, cft_array **v) {
    cft_array *o[2];
    cft_array *e = cft__bind(&cft_p_eigh, &(cft_params){0}, 1, &a, 2, o);
    *w = o[0], *v = o[1];
    return e;
}

/* ======== qr (reduced) ======== */

static cft_array *qr_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    cft_array *e = need_mat("qr", &in[0], false);
    if (e)
        return e;
    int nd = in[0].ndim;
    int64_t m = in[0].shape[nd - 2], n = in[0].shape[nd - 1], k = m < n ? m : n;
    out[0] = with_last(&in[0], 2, (int64_t[]){m, k}, 2);
    out[1] = with_last(&in[0], 2, (int64_t[]){k, n}, 2);
    return NULL;
}

static cft_array *qr_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    cft_aval o[2];
    cft_array *e = qr_shape(&in[0]->aval, nin, p, o);
    if (e)
        return e;
    cft_array *A = fresh(in[0]);
    if (cft_failed(A))
        return A;
    const cft_aval *a = &in[0]->aval;
    int nd = a->ndim;
    int64_t m = a->shape[nd - 2], n = a->shape[nd - 1], k = m < n ? m : n, nb = nbatch(a, 2);
    cft_dtype dt = a->dtype;
    size_t es = cft_dtype_size(dt);
    cft_array *Q = cft__alloc(dt, o[0].shape, o[0].ndim),
              *R = cft__alloc(dt, o[1].shape, o[1].ndim);
    if (cft_failed(Q))
        return Q;
    if (cft_failed(R))
        return R;
    void *tau = cft__new_data(es * (size_t)(k + 1));
    if (!tau)
        return cft__fail(CFT_E_NOMEM, "qr: out of memory");
    char buf[128];
    for (int64_t b = 0; b < nb; b++) {
        char *mp = (char *)cft__ptr(A) + (size_t)(b * m * n) * es;
        char *qp = (char *)cft__ptr(Q) + (size_t)(b * m * k) * es,
             *rp = (char *)cft__ptr(R) + (size_t)(b * k * n) * es;
        lapack_int info = 0;
        if (k) {
            info = dt == CFT_F32 ? LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)n,
                                                  (float *)mp, (lapack_int)n, tau)
                                 : LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)n,
                                                  (double *)mp, (lapack_int)n, tau);
        }
        if (info)
            return cft__fail(CFT_E_FOREIGN, "qr: LAPACK ?geqrf failed on %s (info %d)",
                             batch_el(a, 2, b, buf, sizeof buf), (int)info);
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < n; j++)
                cft__set(rp, dt, i * n + j, j >= i ? cft__get(mp, dt, i * n + j) : 0);
        if (k) {
            info = dt == CFT_F32 ? LAPACKE_sorgqr(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)k,
                                                  (lapack_int)k, (float *)mp, (lapack_int)n, tau)
                                 : LAPACKE_dorgqr(LAPACK_ROW_MAJOR, (lapack_int)m, (lapack_int)k,
                                                  (lapack_int)k, (double *)mp, (lapack_int)n, tau);
        }
        if (info)
            return cft__fail(CFT_E_FOREIGN, "qr: LAPACK ?orgqr failed on %s (info %d)",
                             batch_el(a, 2, b, buf, sizeof buf), (int)info);
        for (int64_t i = 0; i < m; i++)
            memcpy(qp + (size_t)(i * k) * es, mp + (size_t)(i * n) * es, (size_t)k * es);
    }
    cft__keep(tau);
    cft__keep(A);
    out[0] = Q;
    out[1] = R;
    return NULL;
}

/* JAX's qr_jvp_rule (m >= n): with C = Q^T dA R^-1, Omega = tril(C, -1) -
 * tril(C, -1)^T: dQ = Q (Omega - C) + dA R^-1, dR = (C - Omega) R */
static cft_array *qr_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                         const cft_params *p, cft_array **ty) {
    (void)nin, (void)p;
    ty[0] = ty[1] = NULL;
    if (!t[0])
        return NULL;
    const cft_aval *a = &x[0]->aval;
    if (a->shape[a->ndim - 2] < a->shape[a->ndim - 1])
        return cft__fail(CFT_E_ARG, "qr: the derivative needs rows >= columns, got %s", cft__av(a));
    cft_array *Q = y[0], *R = y[1];
    cft_array *dx_rinv = cft__triangular_solve(R, t[0], false, false, false, false);
    cft_array *C = cft_matmul(cft_mT(Q), dx_rinv);
    cft_array *low = cft__tril(C, -1), *om = cft_sub(low, cft_mT(low));
    ty[0] = cft_add(cft_matmul(Q, cft_sub(om, C)), dx_rinv);
    ty[1] = cft_matmul(cft_sub(C, om), R);
    return NULL;
}

FRONT_VMAP(qr)

const cft_prim cft_p_qr = {
    .name = "qr",
    .nin = 1,
    .nout = 2,
    .shape = qr_shape,
    .impl = qr_impl,
    .jvp = qr_jvp,
    .vmap = qr_vmap,
};

cft_array *cft__qr(cft_array *a, cft_array **q, cft_array **r) {
    cft_array *o[2];
    cft_array *e = cft__bind(&cft_p_qr, &(cft_params){0}, 1, &a, 2, o);
    *q = o[0], *r = o[1];
    return e;
}

/* ======== svd (reduced) ======== */

static cft_array *svd_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    cft_array *e = need_mat("svd", &in[0], false);
    if (e)
        return e;
    int nd = in[0].ndim;
    int64_t m = in[0].shape[nd - 2], n = in[0].shape[nd - 1], k = m < n ? m : n;
    out[0] = with_last(&in[0], 2, (int64_t[]){m, k}, 2);
    out[1] = with_last(&in[0], 2, (int64_t[]){k}, 1);
    out[2] = with_last(&in[0], 2, (int64_t[]){k, n}, 2);
    return NULL;
}

static cft_array *svd_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    cft_aval o[3];
    cft_array *e = svd_shape(&in[0]->aval, nin, p, o);
    if (e)
        return e;
    cft_array *A = fresh(in[0]);
    if (cft_failed(A))
        return A;
    const cft_aval *a = &in[0]->aval;
    int nd = a->ndim;
    int64_t m = a->shape[nd - 2], n = a->shape[nd - 1], k = m < n ? m : n, nb = nbatch(a, 2);
    cft_dtype dt = a->dtype;
    size_t es = cft_dtype_size(dt);
    cft_array *y[3];
    for (int i = 0; i < 3; i++) {
        y[i] = cft__alloc(dt, o[i].shape, o[i].ndim);
        if (cft_failed(y[i]))
            return y[i];
    }
    char buf[128];
    for (int64_t b = 0; b < nb && k; b++) {
        char *mp = (char *)cft__ptr(A) + (size_t)(b * m * n) * es;
        char *u = (char *)cft__ptr(y[0]) + (size_t)(b * m * k) * es,
             *s = (char *)cft__ptr(y[1]) + (size_t)(b * k) * es,
             *vt = (char *)cft__ptr(y[2]) + (size_t)(b * k * n) * es;
        lapack_int info =
            dt == CFT_F32 ? LAPACKE_sgesdd(LAPACK_ROW_MAJOR, 'S', (lapack_int)m, (lapack_int)n,
                                           (float *)mp, (lapack_int)n, (float *)s, (float *)u,
                                           (lapack_int)k, (float *)vt, (lapack_int)n)
                          : LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', (lapack_int)m, (lapack_int)n,
                                           (double *)mp, (lapack_int)n, (double *)s, (double *)u,
                                           (lapack_int)k, (double *)vt, (lapack_int)n);
        if (info)
            return cft__fail(CFT_E_FOREIGN, "svd: LAPACK ?gesdd failed on %s of %s (info %d)",
                             batch_el(a, 2, b, buf, sizeof buf), cft__av(a), (int)info);
    }
    cft__keep(A);
    for (int i = 0; i < 3; i++)
        out[i] = y[i];
    return NULL;
}

/* JAX's svd_jvp_rule (distinct, nonzero singular values). dS = U^T dA V:
 * ds = diag(dS); F_ij = 1/(s_j^2 - s_i^2) (0 where equal);
 * dU = U (F o (dS S + S dS^T) + (dS - dS^T)/2 S^-1) [+ (I - U U^T) dA V / s],
 * dV = V (F o (S dS + dS^T S)) [+ (I - V V^T) dA^T U / s] */
static cft_array *svd_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)nin, (void)p;
    ty[0] = ty[1] = ty[2] = NULL;
    if (!t[0])
        return NULL;
    cft_array *U = y[0], *s = y[1], *V = cft_mT(y[2]), *dA = t[0];
    const cft_aval *a = &x[0]->aval;
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1];
    cft_array *dS = cft_matmul(cft_mT(U), cft_matmul(dA, V));
    ty[1] = cft__diagonal(dS);
    cft_array *row = cft_expand_dims(s, -2); /* s_j at [i, j] */
    cft_array *col = cft_expand_dims(s, -1); /* s_i at [i, j] */
    cft_array *F = gap_inverse(cft_square(s));
    cft_array *dSS = cft_mul(row, dS), *SdS = cft_mul(col, dS);
    cft_array *sinv = cft_reciprocal(s);
    cft_array *diagpart = cft_mul(cft_mul_s(cft_sub(dS, cft_mT(dS)), 0.5), cft__diag_embed(sinv));
    cft_array *dU = cft_matmul(U, cft_add(cft_mul(F, cft_add(dSS, cft_mT(dSS))), diagpart));
    cft_array *dV = cft_matmul(V, cft_mul(F, cft_add(SdS, cft_mT(SdS))));
    if (m > n) {
        cft_array *dAV = cft_matmul(dA, V);
        dU = cft_add(dU, cft_div(cft_sub(dAV, cft_matmul(U, cft_matmul(cft_mT(U), dAV))), row));
    }
    if (n > m) {
        cft_array *dAU = cft_matmul(cft_mT(dA), U);
        dV = cft_add(dV, cft_div(cft_sub(dAU, cft_matmul(V, cft_matmul(cft_mT(V), dAU))), row));
    }
    ty[0] = dU;
    ty[2] = cft_mT(dV);
    return NULL;
}

FRONT_VMAP(svd)

const cft_prim cft_p_svd = {
    .name = "svd",
    .nin = 1,
    .nout = 3,
    .shape = svd_shape,
    .impl = svd_impl,
    .jvp = svd_jvp,
    .vmap = svd_vmap,
};

cft_array *cft__svd(cft_array *a, cft_array **u, cft_array **s, cft_array **vh) {
    cft_array *o[3];
    cft_array *e = cft__bind(&cft_p_svd, &(cft_params){0}, 1, &a, 3, o);
    *u = o[0], *s = o[1], *vh = o[2];
    return e;
}
