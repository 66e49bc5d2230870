/* special.c: the special-function side of the primitives: the public
 * binders of the binary special rows (zeta, polygamma, gammainc, gammaincc:
 * promote to a float dtype, broadcast, bind), the tangent helpers the
 * special rows of unary.def / binary.def call, and include/cft/special.h's
 * torch.special names, most of them one primitive, the rest short
 * compositions of primitives. */
#include <math.h>

#include "core/error.h"
#include "prims/rules.h"

extern const cft_prim cft_p_zeta, cft_p_polygamma, cft_p_gammainc, cft_p_gammaincc;

/* integer and bool inputs become f32 (as torch.special) */
static cft_array *fl(cft_array *x) {
    return cft_dtype_is_float(x->aval.dtype) ? x : cft__convert(x, CFT_F32);
}

/* promote a and b to one float dtype, broadcast, bind p */
static cft_array *bin(const char *op, const cft_prim *p, cft_array *a, cft_array *b) {
    CFT_PROPAGATE(op, a, b);
    cft_dtype dt = cft_promote(a->aval.dtype, b->aval.dtype);
    if (!cft_dtype_is_float(dt))
        dt = CFT_F32;
    cft_array *xs[2] = {cft__convert(a, dt), cft__convert(b, dt)};
    int nd = a->aval.ndim > b->aval.ndim ? a->aval.ndim : b->aval.ndim;
    int64_t shape[CFT_MAX_NDIM];
    for (int i = 0; i < nd; i++)
        shape[i] = 1;
    for (int k = 0; k < 2; k++) {
        const cft_aval *av = &xs[k]->aval;
        for (int i = 0; i < av->ndim; i++) {
            int64_t d = av->shape[i], *s = &shape[nd - av->ndim + i];
            if (d == *s || d == 1)
                continue;
            if (*s != 1)
                return cft__fail(CFT_E_SHAPE, "%s: shapes do not broadcast: %s and %s", op,
                                 cft__av(&a->aval), cft__av(&b->aval));
            *s = d;
        }
    }
    for (int k = 0; k < 2; k++)
        xs[k] = cft_broadcast_to(xs[k], shape, nd);
    return cft__bind1(p, NULL, 2, xs);
}

cft_array *cft_zeta(cft_array *s, cft_array *q) {
    CFT_API("cft_zeta");
    return bin("cft_zeta", &cft_p_zeta, s, q);
}
cft_array *cft_polygamma(cft_array *n, cft_array *x) {
    CFT_API("cft_polygamma");
    return bin("cft_polygamma", &cft_p_polygamma, n, x);
}
cft_array *cft_gammainc(cft_array *a, cft_array *x) {
    CFT_API("cft_gammainc");
    return bin("cft_gammainc", &cft_p_gammainc, a, x);
}
cft_array *cft_gammaincc(cft_array *a, cft_array *x) {
    CFT_API("cft_gammaincc");
    return bin("cft_gammaincc", &cft_p_gammaincc, a, x);
}

/* ---- tangents of the special rows ---- */

/* I1' = I0 - I1/x; (e^-|x| I1)' = i0e - i1e/x - sign(x) i1e; both 1/2 at
 * 0 (the division runs on a safe x, so no NaN reaches a cotangent) */
cft_array *cft__i1_deriv(cft_array *x, cft_array *y, bool scaled) {
    cft_array *zero = cft_eq(x, cft_zeros_like(x));
    cft_array *xs = cft_where(zero, cft_ones_like(x), x);
    cft_array *d = cft_sub(scaled ? cft_i0e(x) : cft_i0(x), cft_div(y, xs));
    if (scaled)
        d = cft_sub(d, cft_mul(cft_sign(x), y));
    return cft_where(zero, cft_full_like(x, 0.5), d);
}

/* J1' = J0 - J1/x, 1/2 at 0 */
cft_array *cft__j1_deriv(cft_array *x, cft_array *y) {
    cft_array *zero = cft_eq(x, cft_zeros_like(x));
    cft_array *xs = cft_where(zero, cft_ones_like(x), x);
    return cft_where(zero, cft_full_like(x, 0.5), cft_sub(cft_bessel_j0(x), cft_div(y, xs)));
}

/* d zeta(s, q) / dq = -s zeta(s + 1, q); none in s */
cft_array *cft__zeta_tangent(cft_array *s, cft_array *q, cft_array *ts, cft_array *tq) {
    if (ts)
        return cft__fail(CFT_E_TRACE, "zeta: no derivative with respect to s (the first operand) "
                                      "is provided; differentiate in q only");
    if (!tq)
        return NULL;
    return cft_mul(tq, cft_neg(cft_mul(s, cft_zeta(cft_add_s(s, 1), q))));
}

/* d polygamma(n, x) / dx = polygamma(n + 1, x); n is an integer order */
cft_array *cft__polygamma_tangent(cft_array *n, cft_array *x, cft_array *tn, cft_array *tx) {
    (void)tn;
    if (!tx)
        return NULL;
    return cft_mul(tx, cft_polygamma(cft_add_s(n, 1), x));
}

/* d P(a, x) / dx = x^(a-1) e^-x / Gamma(a) = -d Q / dx; none in a */
cft_array *cft__gammainc_tangent(cft_array *a, cft_array *x, cft_array *ta, cft_array *tx,
                                 bool upper) {
    if (ta)
        return cft__fail(CFT_E_TRACE,
                         "%s: no derivative with respect to a (the first operand) "
                         "is provided; differentiate in x only",
                         upper ? "gammaincc" : "gammainc");
    if (!tx)
        return NULL;
    cft_array *e = cft_sub(cft_special_xlogy(cft_add_s(a, -1), x), cft_add(x, cft_lgamma(a)));
    cft_array *d = cft_exp(e);
    return cft_mul(tx, upper ? cft_neg(d) : d);
}

/* ---- torch.special ---- */

#define ONE(NAME, EXPR)                                                                            \
    cft_array *cft_special_##NAME(cft_array *x) {                                                  \
        CFT_PROPAGATE("cft_special_" #NAME, x);                                                    \
        x = fl(x);                                                                                 \
        return EXPR;                                                                               \
    }
ONE(erf, cft_erf(x))
ONE(erfc, cft_erfc(x))
ONE(erfinv, cft_erfinv(x))
ONE(erfcx, cft_erfcx(x))
ONE(lgamma, cft_lgamma(x))
ONE(gammaln, cft_lgamma(x))
ONE(digamma, cft_digamma(x))
ONE(psi, cft_digamma(x))
ONE(i0, cft_i0(x))
ONE(i0e, cft_i0e(x))
ONE(i1, cft_i1(x))
ONE(i1e, cft_i1e(x))
ONE(ndtr, cft_ndtr(x))
ONE(ndtri, cft_ndtri(x))
ONE(log_ndtr, cft_log_ndtr(x))
ONE(expit, cft_logistic(x))
ONE(exp2, cft_exp2(x))
ONE(expm1, cft_expm1(x))
ONE(log1p, cft_log1p(x))
ONE(bessel_j0, cft_bessel_j0(x))
ONE(bessel_j1, cft_bessel_j1(x))

cft_array *cft_special_polygamma(int n, cft_array *x) {
    CFT_PROPAGATE("cft_special_polygamma", x);
    if (n < 0)
        return cft__fail(CFT_E_ARG, "cft_special_polygamma: order n = %d < 0", n);
    x = fl(x);
    return n == 0 ? cft_digamma(x) : cft_polygamma(cft_full_like(x, n), x);
}

cft_array *cft_special_multigammaln(cft_array *x, int p) {
    CFT_PROPAGATE("cft_special_multigammaln", x);
    if (p < 1)
        return cft__fail(CFT_E_ARG, "cft_special_multigammaln: p = %d < 1", p);
    x = fl(x);
    cft_array *r = cft_full_like(x, 0.25 * p * (p - 1) * 1.1447298858494002); /* log(pi) */
    for (int i = 0; i < p; i++)
        r = cft_add(r, cft_lgamma(cft_add_s(x, -0.5 * i)));
    return r;
}

cft_array *cft_special_gammainc(cft_array *a, cft_array *x) {
    CFT_API("cft_special_gammainc");
    return cft_gammainc(a, x);
}
cft_array *cft_special_gammaincc(cft_array *a, cft_array *x) {
    CFT_API("cft_special_gammaincc");
    return cft_gammaincc(a, x);
}
cft_array *cft_special_zeta(cft_array *x, cft_array *q) {
    CFT_API("cft_special_zeta");
    return cft_zeta(x, q);
}

cft_array *cft_special_logit(cft_array *x, double eps) {
    CFT_PROPAGATE("cft_special_logit", x);
    x = fl(x);
    if (eps >= 0)
        x = cft_clamp(x, cft_full_like(x, eps), cft_full_like(x, 1 - eps));
    /* log(x / (1 - x)) below 1/4; above, log1p((2x - 1) / (1 - x)), whose
     * 2x - 1 is exact, so there is no cancellation near 1/2 */
    cft_array *om = cft_add_s(cft_neg(x), 1);
    cft_array *lo = cft_log(cft_div(x, om));
    cft_array *hi = cft_log1p(cft_div(cft_add_s(cft_mul_s(x, 2), -1), om));
    return cft_where(cft_lt(x, cft_full_like(x, 0.25)), lo, hi);
}

/* x f(y) with f's argument replaced where x == 0, so that neither the value
 * nor a cotangent sees log(0); NaN y stays NaN */
static cft_array *xlog_(const char *op, cft_array *x, cft_array *y, bool p1) {
    CFT_PROPAGATE(op, x, y);
    x = fl(x), y = fl(y);
    cft_array *zero = cft_eq(x, cft_zeros_like(x));
    cft_array *ys = cft_where(zero, p1 ? cft_zeros_like(y) : cft_ones_like(y), y);
    cft_array *r = cft_mul(x, p1 ? cft_log1p(ys) : cft_log(ys));
    return cft_where(cft_ne(y, y), cft_add(y, cft_zeros_like(x)), r);
}
cft_array *cft_special_xlogy(cft_array *x, cft_array *y) {
    CFT_API("cft_special_xlogy");
    return xlog_("cft_special_xlogy", x, y, false);
}
cft_array *cft_special_xlog1py(cft_array *x, cft_array *y) {
    CFT_API("cft_special_xlog1py");
    return xlog_("cft_special_xlog1py", x, y, true);
}

cft_array *cft_special_sinc(cft_array *x) {
    CFT_PROPAGATE("cft_special_sinc", x);
    x = fl(x);
    cft_array *zero = cft_eq(x, cft_zeros_like(x));
    cft_array *px = cft_mul_s(cft_where(zero, cft_ones_like(x), x), 3.14159265358979323846);
    return cft_where(zero, cft_ones_like(x), cft_div(cft_sin(px), px));
}

cft_array *cft_special_entr(cft_array *x) {
    CFT_PROPAGATE("cft_special_entr", x);
    x = fl(x);
    cft_array *pos = cft_gt(x, cft_zeros_like(x));
    cft_array *xs = cft_where(pos, x, cft_ones_like(x));
    cft_array *other = cft_where(cft_eq(x, cft_zeros_like(x)), cft_zeros_like(x),
                                 cft_where(cft_ne(x, x), x, cft_full_like(x, -INFINITY)));
    return cft_where(pos, cft_neg(cft_mul(xs, cft_log(xs))), other);
}

cft_array *cft_special_softmax(cft_array *x, int axis) {
    CFT_API("cft_special_softmax");
    return cft_softmax(fl(x), axis);
}
cft_array *cft_special_log_softmax(cft_array *x, int axis) {
    CFT_API("cft_special_log_softmax");
    return cft_log_softmax(fl(x), axis);
}
cft_array *cft_special_logsumexp(cft_array *x, const int *axes, int naxes, bool keepdims) {
    CFT_API("cft_special_logsumexp");
    return cft_logsumexp(fl(x), axes, naxes, keepdims);
}
