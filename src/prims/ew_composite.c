/* ew_composite.c: elementwise functions of jax.numpy built from primitives
 * (they need no rules of their own: grad, vmap and the jit see the
 * primitives). Written to stay finite where a naive formula overflows, and
 * so that the untaken side of each select has a finite derivative (a NaN
 * there would leak into gradients through the select's transpose). */
#include <math.h>

#include "prims/rules.h"

cft_array *cft_deg2rad(cft_array *x) {
    CFT_PROPAGATE("cft_deg2rad", x);
    return cft_mul_s(x, M_PI / 180);
}

cft_array *cft_rad2deg(cft_array *x) {
    CFT_PROPAGATE("cft_rad2deg", x);
    return cft_mul_s(x, 180 / M_PI);
}

/* log(sigmoid(x)) = min(x, 0) - log1p(e^-|x|) */
cft_array *cft_log_sigmoid(cft_array *x) {
    CFT_PROPAGATE("cft_log_sigmoid", x);
    cft_array *zero = cft_zeros_like(x);
    return cft_sub(cft_minimum(x, zero), cft_log1p(cft_exp(cft_neg(cft_abs(x)))));
}

/* max(a, b) + log1p(e^-|a-b|); equal infinities: a itself (a - b is NaN) */
cft_array *cft_logaddexp(cft_array *a, cft_array *b) {
    CFT_PROPAGATE("cft_logaddexp", a, b);
    cft_array *d = cft_sub(a, b);
    cft_array *same_inf = cft_logical_and(cft_eq(a, b), cft_logical_not(cft_is_finite(a)));
    cft_array *safe_d = cft_where(same_inf, cft_zeros_like(d), d);
    cft_array *r = cft_add(cft_maximum(a, b), cft_log1p(cft_exp(cft_neg(cft_abs(safe_d)))));
    return cft_where(same_inf, cft_add(a, cft_zeros_like(r)), r);
}

cft_array *cft_logaddexp2(cft_array *a, cft_array *b) {
    CFT_PROPAGATE("cft_logaddexp2", a, b);
    return cft_mul_s(cft_logaddexp(cft_mul_s(a, M_LN2), cft_mul_s(b, M_LN2)), 1 / M_LN2);
}

/* m sqrt((a/m)^2 + (b/m)^2), m = max(|a|, |b|); 0 (with gradient 0) at m = 0 */
cft_array *cft_hypot(cft_array *a, cft_array *b) {
    CFT_PROPAGATE("cft_hypot", a, b);
    cft_array *m = cft_maximum(cft_abs(a), cft_abs(b));
    cft_array *zero = cft_eq(m, cft_zeros_like(m));
    cft_array *ms = cft_where(zero, cft_ones_like(m), m);
    cft_array *s = cft_add(cft_square(cft_div(a, ms)), cft_square(cft_div(b, ms)));
    cft_array *ss = cft_where(zero, cft_ones_like(s), s);
    return cft_where(zero, cft_zeros_like(m), cft_mul(m, cft_sqrt(ss)));
}

/* 0 below zero, b at zero, 1 above */
cft_array *cft_heaviside(cft_array *a, cft_array *b) {
    CFT_PROPAGATE("cft_heaviside", a, b);
    cft_array *z = cft_zeros_like(a);
    cft_array *r = cft_where(cft_gt(a, z), cft_ones_like(b), b);
    return cft_where(cft_lt(a, z), cft_zeros_like(r), r);
}
