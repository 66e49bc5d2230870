/* linalg_ops.c: the public torch.linalg-style ops of cft/linalg.h. The
 * factorisations bind linalg.c's primitives after broadcasting batch dims
 * and checking shapes; the rest (inv, det, eigvalsh, pinv, lstsq, norms,
 * matrix_power, cross, matrix_exp) are composites of ops, so they
 * differentiate and batch through the primitives' rules. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "prims/linalg_prims.h"

static cft_array *need_float_mat(const char *name, cft_array *A, bool square) {
    const cft_aval *a = &A->aval;
    if (!cft_dtype_is_float(a->dtype))
        return cft__fail(CFT_E_DTYPE, "%s: needs a float matrix, got %s", name, cft__av(a));
    if (a->ndim < 2)
        return cft__fail(CFT_E_SHAPE, "%s: needs a matrix (rank >= 2), got %s", name, cft__av(a));
    if (square && a->shape[a->ndim - 1] != a->shape[a->ndim - 2])
        return cft__fail(CFT_E_SHAPE, "%s: needs square matrices, got %s", name, cft__av(a));
    return NULL;
}

/* broadcast the batch dims (all but the last two) of A and B together, and
 * promote their dtypes */
static cft_array *bcast_pair(const char *name, cft_array **A, cft_array **B) {
    const cft_aval *a = &(*A)->aval, *b = &(*B)->aval;
    if (a->ndim < 2 || b->ndim < 2) /* never read shape[-1] */
        return cft__fail(CFT_E_SHAPE, "%s: needs matrices (rank >= 2), got %s, %s", name,
                         cft__av(a), cft__av(b));
    int na = a->ndim - 2, nb = b->ndim - 2, n = na > nb ? na : nb;
    int64_t sa[CFT_MAX_NDIM], sb[CFT_MAX_NDIM];
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return cft__fail(CFT_E_SHAPE, "%s: batch dims do not broadcast: %s, %s", name,
                             cft__av(a), cft__av(b));
        sa[i] = sb[i] = da == 1 ? db : da; /* da may be symbolic */
    }
    sa[n] = a->shape[na], sa[n + 1] = a->shape[na + 1];
    sb[n] = b->shape[nb], sb[n + 1] = b->shape[nb + 1];
    cft_dtype dt = cft_promote(a->dtype, b->dtype);
    *A = cft_astype(cft_broadcast_to(*A, sa, n + 2), dt);
    *B = cft_astype(cft_broadcast_to(*B, sb, n + 2), dt);
    return NULL;
}

cft_array *cft_linalg_cholesky(cft_array *A) {
    CFT_PROPAGATE("cft_linalg_cholesky", A);
    cft_array *e = need_float_mat("cft_linalg_cholesky", A, true);
    if (e)
        return e;
    return cft__cholesky(A); /* the primitive factors (A + A^T)/2 */
}

cft_array *cft_linalg_solve_triangular(cft_array *A, cft_array *B, bool upper, bool left,
                                       bool transpose, bool unitriangular) {
    CFT_PROPAGATE("cft_linalg_solve_triangular", A, B);
    cft_array *e = need_float_mat("cft_linalg_solve_triangular", A, true);
    if (!e && B->aval.ndim < 2)
        e = cft__fail(CFT_E_SHAPE, "cft_linalg_solve_triangular: B must be a matrix, got %s",
                      cft__av(&B->aval));
    if (!e)
        e = bcast_pair("cft_linalg_solve_triangular", &A, &B);
    if (e)
        return e;
    return cft__triangular_solve(A, B, left, !upper, transpose, unitriangular);
}

cft_array *cft_linalg_solve(cft_array *A, cft_array *B) {
    CFT_PROPAGATE("cft_linalg_solve", A, B);
    cft_array *e = need_float_mat("cft_linalg_solve", A, true);
    if (e)
        return e;
    if (B->aval.ndim < 1)
        return cft__fail(CFT_E_SHAPE, "cft_linalg_solve: B is a scalar %s", cft__av(&B->aval));
    /* torch's rule: a vector (batch) when B is 1-d or has exactly A's shape
     * without its last dim */
    bool vec = B->aval.ndim == 1;
    if (!vec && B->aval.ndim == A->aval.ndim - 1) {
        vec = true;
        for (int i = 0; i < B->aval.ndim; i++)
            vec &= B->aval.shape[i] == A->aval.shape[i];
    }
    if (vec)
        B = cft_expand_dims(B, -1);
    e = bcast_pair("cft_linalg_solve", &A, &B);
    if (e)
        return e;
    cft_array *X = cft__solve(A, B, false);
    return vec ? cft_squeeze(X, (int[]){-1}, 1) : X;
}

cft_array *cft_linalg_inv(cft_array *A) {
    CFT_PROPAGATE("cft_linalg_inv", A);
    cft_array *e = need_float_mat("cft_linalg_inv", A, true);
    if (e)
        return e;
    return cft__solve(A, cft_broadcast_to(cft__eye_like(A), A->aval.shape, A->aval.ndim), false);
}

cft_status cft_linalg_slogdet(cft_array *A, cft_array **sign, cft_array **logabsdet) {
    CFT_API("cft_linalg_slogdet");
    cft_array *s, *l, *e = A ? NULL : cft__fail(CFT_E_ARG, "cft_linalg_slogdet: A is NULL");
    if (!e && cft_failed(A))
        e = A;
    if (!e)
        e = need_float_mat("cft_linalg_slogdet", A, true);
    if (!e)
        e = cft__slogdet(A, &s, &l);
    if (e)
        s = l = e;
    if (sign)
        *sign = s;
    if (logabsdet)
        *logabsdet = l;
    return e ? cft_error_code(e) : CFT_OK;
}

cft_array *cft_linalg_det(cft_array *A) {
    CFT_API("cft_linalg_det");
    cft_array *s, *l;
    cft_linalg_slogdet(A, &s, &l);
    return cft_mul(s, cft_exp(l));
}

cft_status cft_linalg_eigh(cft_array *A, cft_array **w, cft_array **V) {
    CFT_API("cft_linalg_eigh");
    cft_array *wv, *vv, *e = A ? NULL : cft__fail(CFT_E_ARG, "cft_linalg_eigh: A is NULL");
    if (!e && cft_failed(A))
        e = A;
    if (!e)
        e = need_float_mat("cft_linalg_eigh", A, true);
    if (!e)
        e = cft__eigh(cft_mul_s(cft_add(A, cft_mT(A)), 0.5), &wv, &vv);
    if (e)
        wv = vv = e;
    if (w)
        *w = wv;
    if (V)
        *V = vv;
    return e ? cft_error_code(e) : CFT_OK;
}

cft_array *cft_linalg_eigvalsh(cft_array *A) {
    CFT_API("cft_linalg_eigvalsh");
    cft_array *w;
    cft_linalg_eigh(A, &w, NULL);
    return w;
}

cft_status cft_linalg_qr(cft_array *A, cft_array **Q, cft_array **R) {
    CFT_API("cft_linalg_qr");
    cft_array *q, *r, *e = A ? NULL : cft__fail(CFT_E_ARG, "cft_linalg_qr: A is NULL");
    if (!e && cft_failed(A))
        e = A;
    if (!e)
        e = need_float_mat("cft_linalg_qr", A, false);
    if (!e)
        e = cft__qr(A, &q, &r);
    if (e)
        q = r = e;
    if (Q)
        *Q = q;
    if (R)
        *R = r;
    return e ? cft_error_code(e) : CFT_OK;
}

cft_status cft_linalg_svd(cft_array *A, cft_array **U, cft_array **S, cft_array **Vh) {
    CFT_API("cft_linalg_svd");
    cft_array *u, *s, *v, *e = A ? NULL : cft__fail(CFT_E_ARG, "cft_linalg_svd: A is NULL");
    if (!e && cft_failed(A))
        e = A;
    if (!e)
        e = need_float_mat("cft_linalg_svd", A, false);
    if (!e)
        e = cft__svd(A, &u, &s, &v);
    if (e)
        u = s = v = e;
    if (U)
        *U = u;
    if (S)
        *S = s;
    if (Vh)
        *Vh = v;
    return e ? cft_error_code(e) : CFT_OK;
}

cft_array *cft_linalg_svdvals(cft_array *A) {
    CFT_API("cft_linalg_svdvals");
    cft_array *s;
    cft_linalg_svd(A, NULL, &s, NULL);
    return s;
}

cft_array *cft_linalg_pinv(cft_array *A, double rcond) {
    CFT_API("cft_linalg_pinv");
    cft_array *U, *S, *Vh;
    if (cft_linalg_svd(A, &U, &S, &Vh) != CFT_OK)
        return S;
    const cft_aval *a = &A->aval;
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1];
    if (rcond <= 0)
        rcond = (double)(m > n ? m : n) * (a->dtype == CFT_F32 ? FLT_EPSILON : DBL_EPSILON);
    cft_array *cut = cft_mul_s(cft_max(S, (int[]){-1}, 1, true), rcond);
    cft_array *keep = cft_gt(S, cut);
    cft_array *sinv =
        cft_where(keep, cft_reciprocal(cft_where(keep, S, cft_ones_like(S))), cft_zeros_like(S));
    return cft_matmul(cft_mul(cft_mT(Vh), cft_expand_dims(sinv, -2)), cft_mT(U));
}

cft_array *cft_linalg_lstsq(cft_array *A, cft_array *B) {
    CFT_PROPAGATE("cft_linalg_lstsq", A, B);
    cft_array *e = need_float_mat("cft_linalg_lstsq", A, false);
    if (e)
        return e;
    return cft_matmul(cft_linalg_pinv(A, 0), B);
}

/* s^(1/p) for sums s >= 0, with the subgradient 0 where s = 0 (torch's
 * convention for a norm at the origin; sqrt's derivative there is
 * infinite, and JAX gives NaN): the root is taken of 1 there, and the
 * select keeps the untaken side's derivative finite */
static cft_array *root_at_zero_safe(cft_array *s, double p) {
    cft_array *zero = cft_eq(s, cft_zeros_like(s));
    cft_array *safe = cft_where(zero, cft_ones_like(s), s);
    cft_array *r = p == 2 ? cft_sqrt(safe) : cft_pow(safe, cft_scalar(1 / p, s->aval.dtype));
    return cft_where(zero, cft_zeros_like(s), r);
}

cft_array *cft_linalg_vector_norm(cft_array *x, double ord, const int *axes, int naxes,
                                  bool keepdims) {
    CFT_PROPAGATE("cft_linalg_vector_norm", x);
    if (!cft_dtype_is_float(x->aval.dtype))
        return cft__fail(CFT_E_DTYPE, "cft_linalg_vector_norm: needs floats, got %s",
                         cft__av(&x->aval));
    cft_array *ax = cft_abs(x);
    if (isinf(ord))
        return ord > 0 ? cft_max(ax, axes, naxes, keepdims) : cft_min(ax, axes, naxes, keepdims);
    if (ord == 0)
        return cft_sum(cft_astype(cft_ne(x, cft_scalar(0, x->aval.dtype)), x->aval.dtype), axes,
                       naxes, keepdims);
    if (ord == 2)
        return root_at_zero_safe(cft_sum(cft_square(x), axes, naxes, keepdims), 2);
    if (ord == 1)
        return cft_sum(ax, axes, naxes, keepdims);
    if (ord < 0 || isnan(ord))
        return cft__fail(CFT_E_ARG, "cft_linalg_vector_norm: unsupported ord %g for %s", ord,
                         cft__av(&x->aval));
    cft_array *p = cft_scalar(ord, x->aval.dtype);
    return root_at_zero_safe(cft_sum(cft_pow(ax, p), axes, naxes, keepdims), ord);
}

cft_array *cft_linalg_matrix_norm(cft_array *A, cft_matrix_norm_ord ord, bool keepdims) {
    CFT_PROPAGATE("cft_linalg_matrix_norm", A);
    cft_array *e = need_float_mat("cft_linalg_matrix_norm", A, false);
    if (e)
        return e;
    cft_array *r;
    int ax2[2] = {-2, -1};
    switch (ord) {
    case CFT_NORM_FRO:
        return root_at_zero_safe(cft_sum(cft_square(A), ax2, 2, keepdims), 2);
    case CFT_NORM_NUC:
        r = cft_sum(cft_linalg_svdvals(A), (int[]){-1}, 1, false);
        break;
    case CFT_NORM_2:
        r = cft_max(cft_linalg_svdvals(A), (int[]){-1}, 1, false);
        break;
    case CFT_NORM_NEG2:
        r = cft_min(cft_linalg_svdvals(A), (int[]){-1}, 1, false);
        break;
    case CFT_NORM_1:
        r = cft_max(cft_sum(cft_abs(A), (int[]){-2}, 1, false), (int[]){-1}, 1, false);
        break;
    case CFT_NORM_NEG1:
        r = cft_min(cft_sum(cft_abs(A), (int[]){-2}, 1, false), (int[]){-1}, 1, false);
        break;
    case CFT_NORM_INF:
        r = cft_max(cft_sum(cft_abs(A), (int[]){-1}, 1, false), (int[]){-1}, 1, false);
        break;
    case CFT_NORM_NEGINF:
        r = cft_min(cft_sum(cft_abs(A), (int[]){-1}, 1, false), (int[]){-1}, 1, false);
        break;
    default:
        return cft__fail(CFT_E_ARG, "cft_linalg_matrix_norm: bad ord %d", (int)ord);
    }
    return keepdims ? cft_expand_dims(cft_expand_dims(r, -1), -1) : r;
}

cft_array *cft_linalg_matrix_power(cft_array *A, int n) {
    CFT_PROPAGATE("cft_linalg_matrix_power", A);
    cft_array *e = need_float_mat("cft_linalg_matrix_power", A, true);
    if (e)
        return e;
    if (n < 0)
        A = cft_linalg_inv(A), n = -n;
    cft_array *r = NULL, *p = A;
    for (; n; n >>= 1) {
        if (n & 1)
            r = r ? cft_matmul(r, p) : p;
        if (n > 1)
            p = cft_matmul(p, p);
    }
    return r ? r : cft_broadcast_to(cft__eye_like(A), A->aval.shape, A->aval.ndim);
}

cft_array *cft_linalg_cross(cft_array *a, cft_array *b, int dim) {
    CFT_PROPAGATE("cft_linalg_cross", a, b);
    int na = a->aval.ndim, nb = b->aval.ndim, n = na > nb ? na : nb;
    int64_t shape[CFT_MAX_NDIM];
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t da = ia >= 0 ? a->aval.shape[ia] : 1, db = ib >= 0 ? b->aval.shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return cft__fail(CFT_E_SHAPE, "cft_linalg_cross: shapes do not broadcast: %s, %s",
                             cft__av(&a->aval), cft__av(&b->aval));
        shape[i] = da == 1 ? db : da; /* da may be symbolic */
    }
    int d = dim < 0 ? dim + n : dim;
    if (d < 0 || d >= n || shape[d] != 3)
        return cft__fail(CFT_E_SHAPE, "cft_linalg_cross: dim %d of %s, %s is not of size 3", dim,
                         cft__av(&a->aval), cft__av(&b->aval));
    a = cft_broadcast_to(a, shape, n);
    b = cft_broadcast_to(b, shape, n);
    cft_array *ac[3], *bc[3];
    for (int i = 0; i < 3; i++) {
        int64_t lo[CFT_MAX_NDIM] = {0}, hi[CFT_MAX_NDIM];
        memcpy(hi, shape, sizeof(int64_t) * (size_t)n);
        lo[d] = i, hi[d] = i + 1;
        ac[i] = cft_slice(a, lo, hi, NULL);
        bc[i] = cft_slice(b, lo, hi, NULL);
    }
    cft_array *c[3];
    for (int i = 0; i < 3; i++) {
        int j = (i + 1) % 3, k = (i + 2) % 3;
        c[i] = cft_sub(cft_mul(ac[j], bc[k]), cft_mul(ac[k], bc[j]));
    }
    return cft_concatenate(c, 3, d);
}

/* Higham's [13/13] Pade approximant with theta_13 = 5.37; the scaling
 * s = max(0, ceil(log2(|A|_1 / theta))) is a traced value, so the 24
 * squarings are R (k < s ? R : I), which keeps the op
 * differentiable and batchable with no data-dependent control flow. */
cft_array *cft_linalg_matrix_exp(cft_array *A) {
    CFT_PROPAGATE("cft_linalg_matrix_exp", A);
    cft_array *e = need_float_mat("cft_linalg_matrix_exp", A, true);
    if (e)
        return e;
    static const double b[14] = {64764752532480000.,
                                 32382376266240000.,
                                 7771770303897600.,
                                 1187353796428800.,
                                 129060195264000.,
                                 10559470521600.,
                                 670442572800.,
                                 33522128640.,
                                 1323241920.,
                                 40840800.,
                                 960960.,
                                 16380.,
                                 182.,
                                 1.};
    enum { MAXSQ = 24 };
    cft_dtype dt = A->aval.dtype;
    cft_array *nrm = cft_stop_gradient(cft_linalg_matrix_norm(A, CFT_NORM_1, true));
    cft_array *s =
        cft_maximum(cft_ceil(cft_div(cft_log(cft_div(nrm, cft_scalar(5.371920351148152, dt))),
                                     cft_scalar(log(2.0), dt))),
                    cft_scalar(0, dt));
    s = cft_minimum(s, cft_scalar(MAXSQ, dt));
    cft_array *X = cft_div(A, cft_pow(cft_scalar(2, dt), s));
    cft_array *I = cft_broadcast_to(cft__eye_like(A), A->aval.shape, A->aval.ndim);
    cft_array *X2 = cft_matmul(X, X), *X4 = cft_matmul(X2, X2), *X6 = cft_matmul(X4, X2);
    cft_array *Uin =
        cft_add(cft_add(cft_mul_s(X6, b[13]), cft_mul_s(X4, b[11])), cft_mul_s(X2, b[9]));
    cft_array *U = cft_matmul(X6, Uin);
    U = cft_add(U, cft_add(cft_add(cft_mul_s(X6, b[7]), cft_mul_s(X4, b[5])),
                           cft_add(cft_mul_s(X2, b[3]), cft_mul_s(I, b[1]))));
    U = cft_matmul(X, U);
    cft_array *Vin =
        cft_add(cft_add(cft_mul_s(X6, b[12]), cft_mul_s(X4, b[10])), cft_mul_s(X2, b[8]));
    cft_array *V = cft_matmul(X6, Vin);
    V = cft_add(V, cft_add(cft_add(cft_mul_s(X6, b[6]), cft_mul_s(X4, b[4])),
                           cft_add(cft_mul_s(X2, b[2]), cft_mul_s(I, b[0]))));
    cft_array *R = cft_linalg_solve(cft_sub(V, U), cft_add(V, U));
    for (int k = 0; k < MAXSQ; k++)
        R = cft_matmul(
            R, cft_where(cft_gt(s, cft_scalar(k, dt)), R, I)); /* R R, or R I: no overflow */
    return R;
}
