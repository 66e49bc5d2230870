/** @file
 * cft/special.h: special functions with torch.special's names (f32 and
 * f64; integer and bool inputs are converted to f32 first), plus the
 * primitive ops underneath them.
 *
 * Most functions are one elementwise primitive each (fused by the jit like
 * exp or tanh; the scalar code is src/prims/special_fns.h); the rest are
 * short compositions of primitives. Every derivative is written with these
 * same ops, so grad, jvp, hessian and vmap compose to any order, except
 * where noted: zeta(s, q) has no derivative in s, gammainc/gammaincc(a, x)
 * none in a (asking for one is a CFT_E_TRACE error naming the op), and
 * polygamma's order n is an integer (no derivative). Accuracy against
 * mpmath is listed in docs/implementation.md and checked by
 * tests/test_special.c. Errors follow core.h: no call returns NULL. */
#ifndef CFT_SPECIAL_H
#define CFT_SPECIAL_H

/** @addtogroup numerics
 *  @{ */

#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- primitive ops (float inputs; binary ones broadcast and promote) ---- */
cft_array *cft_erfc(cft_array *x);      /**< 1 - erf(x), accurate in the tail */
cft_array *cft_erfcx(cft_array *x);     /**< exp(x^2) erfc(x) */
cft_array *cft_erfinv(cft_array *x);    /**< inverse of erf on (-1, 1) */
cft_array *cft_lgamma(cft_array *x);    /**< log |Gamma(x)| */
cft_array *cft_digamma(cft_array *x);   /**< psi(x) = d lgamma / dx; -inf at 0 */
cft_array *cft_i0(cft_array *x);        /**< modified Bessel I0 */
cft_array *cft_i0e(cft_array *x);       /**< exp(-|x|) I0(x) */
cft_array *cft_i1(cft_array *x);        /**< modified Bessel I1 */
cft_array *cft_i1e(cft_array *x);       /**< exp(-|x|) I1(x) */
cft_array *cft_ndtr(cft_array *x);      /**< standard normal CDF */
cft_array *cft_ndtri(cft_array *p);     /**< inverse of ndtr on (0, 1) */
cft_array *cft_log_ndtr(cft_array *x);  /**< log ndtr(x), accurate for x << 0 */
cft_array *cft_exp2(cft_array *x);      /**< 2^x */
cft_array *cft_bessel_j0(cft_array *x); /**< Bessel J0 (libm j0) */
cft_array *cft_bessel_j1(cft_array *x); /**< Bessel J1 (libm j1) */
/** Hurwitz zeta(s, q) = sum_k (q + k)^-s, s > 1 (NaN for s < 1). */
cft_array *cft_zeta(cft_array *s, cft_array *q);
/** polygamma(n, x), the n-th derivative of digamma; n a non-negative
 *  integer-valued float array (else NaN). */
cft_array *cft_polygamma(cft_array *n, cft_array *x);
/** Regularized lower incomplete gamma P(a, x), a > 0, x >= 0. */
cft_array *cft_gammainc(cft_array *a, cft_array *x);
/** Regularized upper incomplete gamma Q(a, x) = 1 - P(a, x). */
cft_array *cft_gammaincc(cft_array *a, cft_array *x);

/* ---- torch.special ---- */
cft_array *cft_special_erf(cft_array *x);     /**< erf */
cft_array *cft_special_erfc(cft_array *x);    /**< erfc */
cft_array *cft_special_erfinv(cft_array *x);  /**< inverse erf */
cft_array *cft_special_erfcx(cft_array *x);   /**< scaled erfc */
cft_array *cft_special_lgamma(cft_array *x);  /**< log |Gamma| */
cft_array *cft_special_gammaln(cft_array *x); /**< torch's name for lgamma */
cft_array *cft_special_digamma(cft_array *x); /**< psi */
cft_array *cft_special_psi(cft_array *x);     /**< alias of digamma */
/** polygamma(n, x) for an integer n >= 0 (n = 0: digamma). */
cft_array *cft_special_polygamma(int n, cft_array *x);
/** Multivariate log-gamma of dimension p >= 1:
 *  p(p-1)/4 log(pi) + sum_{i=1..p} lgamma(x - (i-1)/2). */
cft_array *cft_special_multigammaln(cft_array *x, int p);
cft_array *cft_special_gammainc(cft_array *a, cft_array *x);  /**< P(a, x) */
cft_array *cft_special_gammaincc(cft_array *a, cft_array *x); /**< Q(a, x) */
cft_array *cft_special_i0(cft_array *x);                      /**< I0 */
cft_array *cft_special_i0e(cft_array *x);                     /**< exp(-|x|) I0 */
cft_array *cft_special_i1(cft_array *x);                      /**< I1 */
cft_array *cft_special_i1e(cft_array *x);                     /**< exp(-|x|) I1 */
cft_array *cft_special_ndtr(cft_array *x);                    /**< normal CDF */
cft_array *cft_special_ndtri(cft_array *p);                   /**< normal quantile */
cft_array *cft_special_log_ndtr(cft_array *x);                /**< log normal CDF */
cft_array *cft_special_expit(cft_array *x);                   /**< logistic sigmoid */
/** log(x / (1 - x)); with eps >= 0 x is first clamped to [eps, 1 - eps]
 *  (torch's eps; pass a negative eps for none). */
cft_array *cft_special_logit(cft_array *x, double eps);
/** x log(y), 0 where x == 0 (unless y is NaN); broadcasts. */
cft_array *cft_special_xlogy(cft_array *x, cft_array *y);
/** x log1p(y), 0 where x == 0 (unless y is NaN); broadcasts. */
cft_array *cft_special_xlog1py(cft_array *x, cft_array *y);
/** sin(pi x) / (pi x), 1 at 0. Its derivative is exact everywhere, its
 *  second derivative at exactly x = 0 is 0 (true: -pi^2/3). */
cft_array *cft_special_sinc(cft_array *x);
/** -x log x for x > 0, 0 at 0, -inf below 0. */
cft_array *cft_special_entr(cft_array *x);
cft_array *cft_special_exp2(cft_array *x);  /**< 2^x */
cft_array *cft_special_expm1(cft_array *x); /**< exp(x) - 1 */
cft_array *cft_special_log1p(cft_array *x); /**< log(1 + x) */
/** Hurwitz zeta(x, q); differentiable in q only (d/dq = -x zeta(x+1, q)). */
cft_array *cft_special_zeta(cft_array *x, cft_array *q);
cft_array *cft_special_bessel_j0(cft_array *x);             /**< J0 */
cft_array *cft_special_bessel_j1(cft_array *x);             /**< J1 */
cft_array *cft_special_softmax(cft_array *x, int axis);     /**< softmax along axis */
cft_array *cft_special_log_softmax(cft_array *x, int axis); /**< log-softmax along axis */
/** log(sum(exp(x))) over axes (NULL, 0: all), stable. */
cft_array *cft_special_logsumexp(cft_array *x, const int *axes, int naxes, bool keepdims);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
