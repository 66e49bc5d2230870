/* random_dists.c: jax.random's distributions built on the uniform and
 * normal draws (random.c) and ordinary ops, so a key gives the same numbers
 * everywhere and vmap over keys equals a loop, as for the base draws:
 * randint, gumbel, exponential, categorical (Gumbel-max), truncated normal
 * (inverse CDF), permutation (argsort of uniforms), choice with and without
 * replacement, and the multivariate normal (Cholesky factor). */
#include <math.h>
#include <string.h>

#include "cft/linalg.h"
#include "cft/random.h"
#include "cft/special.h"
#include "core/error.h"
#include "core/mem.h"
#include "prims/rules.h"

cft_array *cft_random_randint(cft_array *key, const int64_t *shape, int ndim, int64_t lo,
                              int64_t hi, cft_dtype dtype) {
    CFT_PROPAGATE("cft_random_randint", key);
    if (hi <= lo || (dtype != CFT_I32 && dtype != CFT_I64) ||
        (dtype == CFT_I32 && (lo < INT32_MIN || hi - 1 > INT32_MAX)))
        return cft__fail(CFT_E_ARG, "cft_random_randint: [%lld, %lld) as %s", (long long)lo,
                         (long long)hi, cft_dtype_name(dtype));
    /* floor of a uniform in [lo, hi): f64 is exact for spans below 2^53 */
    cft_array *u = cft_random_uniform(key, CFT_F64, shape, ndim, (double)lo, (double)hi);
    cft_array *r = cft_floor(u);
    /* a uniform rounding up to hi at the top of a huge range stays below it */
    r = cft_minimum(r, cft_full_like(r, (double)(hi - 1)));
    return cft_astype(r, dtype);
}

cft_array *cft_random_gumbel(cft_array *key, cft_dtype dtype, const int64_t *shape, int ndim) {
    CFT_PROPAGATE("cft_random_gumbel", key);
    /* -log(-log(u)), u in (0, 1): the uniform's 0 is nudged to the tiniest */
    cft_array *u = cft_random_uniform(key, dtype, shape, ndim, 0, 1);
    double tiny = dtype == CFT_F64 ? 2.2250738585072014e-308 : 1.17549435e-38;
    u = cft_maximum(u, cft_full_like(u, tiny));
    return cft_neg(cft_log(cft_neg(cft_log(u))));
}

cft_array *cft_random_exponential(cft_array *key, cft_dtype dtype, const int64_t *shape, int ndim) {
    CFT_PROPAGATE("cft_random_exponential", key);
    return cft_neg(cft_log1p(cft_neg(cft_random_uniform(key, dtype, shape, ndim, 0, 1))));
}

cft_array *cft_random_categorical(cft_array *key, cft_array *logits, int axis) {
    CFT_PROPAGATE("cft_random_categorical", key, logits);
    cft_aval a = cft_array_aval(logits);
    if (!cft_dtype_is_float(a.dtype) || a.ndim < 1)
        return cft__fail(CFT_E_ARG, "cft_random_categorical: float logits with an axis, got %s",
                         cft__av(&a));
    cft_array *g = cft_random_gumbel(key, a.dtype, a.shape, a.ndim);
    return cft_argmax(cft_add(cft_stop_gradient(logits), g), axis, false);
}

cft_array *cft_random_truncated_normal(cft_array *key, cft_dtype dtype, const int64_t *shape,
                                       int ndim, double lower, double upper) {
    CFT_PROPAGATE("cft_random_truncated_normal", key);
    if (!(lower < upper))
        return cft__fail(CFT_E_ARG, "cft_random_truncated_normal: bounds [%g, %g]", lower, upper);
    /* the inverse CDF of a uniform between the bounds' CDFs, in f64 */
    double pa = 0.5 * erfc(-lower / sqrt(2.0)), pb = 0.5 * erfc(-upper / sqrt(2.0));
    cft_array *u = cft_random_uniform(key, CFT_F64, shape, ndim, pa, pb);
    cft_array *z = cft_ndtri(u);
    z = cft_clamp(z, cft_scalar(lower, CFT_F64), cft_scalar(upper, CFT_F64));
    return cft_astype(z, dtype);
}

cft_array *cft_random_permutation(cft_array *key, int64_t n) {
    CFT_PROPAGATE("cft_random_permutation", key);
    if (n < 0)
        return cft__fail(CFT_E_ARG, "cft_random_permutation: n = %lld", (long long)n);
    /* argsort of n uniform 64-bit floats: ties have probability ~n^2 2^-53 */
    return cft_argsort(cft_random_uniform(key, CFT_F64, &n, 1, 0, 1), 0, false);
}

cft_array *cft_random_choice(cft_array *key, cft_array *a, int64_t k, bool replace) {
    CFT_PROPAGATE("cft_random_choice", key, a);
    cft_aval av = cft_array_aval(a);
    if (av.ndim < 1 || k < 0 || (!replace && k > av.shape[0]))
        return cft__fail(CFT_E_ARG, "cft_random_choice: %lld of the %s rows %s replacement",
                         (long long)k, cft__av(&av), replace ? "with" : "without");
    cft_array *idx =
        replace ? cft_random_randint(key, &k, 1, 0, av.shape[0], CFT_I64)
                : cft_slice(cft_random_permutation(key, av.shape[0]), (int64_t[]){0}, &k, NULL);
    return cft_take(a, idx, 0);
}

cft_array *cft_random_multivariate_normal(cft_array *key, cft_array *mean, cft_array *cov,
                                          const int64_t *batch, int nbatch) {
    CFT_PROPAGATE("cft_random_multivariate_normal", key, mean, cov);
    cft_aval m = cft_array_aval(mean), c = cft_array_aval(cov);
    if (m.ndim != 1 || c.ndim != 2 || c.shape[0] != m.shape[0] || c.shape[1] != m.shape[0] ||
        nbatch < 0 || nbatch + 1 > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE,
                         "cft_random_multivariate_normal: mean [d] and cov [d, d], got %s and %s",
                         cft__av(&m), cft__av(&c));
    int64_t shape[CFT_MAX_NDIM];
    if (nbatch)
        memcpy(shape, batch, sizeof(int64_t) * (size_t)nbatch);
    shape[nbatch] = m.shape[0];
    cft_array *z = cft_random_normal(key, m.dtype, shape, nbatch + 1);
    cft_array *L = cft_linalg_cholesky(cov);
    /* x = mean + z L^T (rows of z are the draws) */
    return cft_add(mean, cft_matmul(z, cft_transpose(L, (int[]){1, 0})));
}

/* Gamma(alpha, 1) by Marsaglia and Tsang's method, vectorised: TRIES
 * proposals per draw, the first accepted one kept (each is accepted with
 * probability > 0.95 for alpha >= 1, so all TRIES fail with probability
 * < 1e-10 per draw; that draw then keeps the last proposal, clamped
 * positive). alpha < 1 uses gamma(alpha + 1) * U^(1 / alpha). */
#define TRIES 8
cft_array *cft_random_gamma(cft_array *key, double alpha, cft_dtype dtype, const int64_t *shape,
                            int ndim) {
    CFT_PROPAGATE("cft_random_gamma", key);
    if (!(alpha > 0) || ndim < 0 || ndim + 1 > CFT_MAX_NDIM)
        return cft__fail(CFT_E_ARG, "cft_random_gamma: alpha %g (> 0), %d dims", alpha, ndim);
    double a = alpha < 1 ? alpha + 1 : alpha, d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
    int64_t sh[CFT_MAX_NDIM] = {TRIES};
    for (int i = 0; i < ndim; i++)
        sh[i + 1] = shape[i];
    cft_array *ks = cft_random_split(key, 3);
    cft_array *z = cft_random_normal(cft_index(ks, 0), CFT_F64, sh, ndim + 1);
    cft_array *u = cft_random_uniform(cft_index(ks, 1), CFT_F64, sh, ndim + 1, 0, 1);
    cft_array *v = cft_add_s(cft_mul_s(z, c), 1); /* (1 + c z)^3 */
    v = cft_mul(cft_mul(v, v), v);
    cft_array *pos = cft_gt(v, cft_zeros_like(v));
    cft_array *vs = cft_where(pos, v, cft_ones_like(v));
    /* accept when log u < z^2/2 + d - d v + d log v */
    cft_array *rhs = cft_add(cft_add_s(cft_mul_s(cft_square(z), 0.5), d),
                             cft_mul_s(cft_sub(cft_log(vs), vs), d));
    cft_array *ok = cft_logical_and(pos, cft_lt(cft_log(u), rhs));
    /* the first accepted try (argmax of the mask; none: the last) */
    cft_array *first = cft_argmax(cft_astype(ok, CFT_I32), 0, true);
    cft_array *any = cft_max(cft_astype(ok, CFT_I32), (int[]){0}, 1, true);
    first = cft_where(cft_gt(any, cft_zeros_like(any)), first, cft_full_like(first, TRIES - 1));
    cft_array *g = cft_squeeze(cft_take_along_axis(cft_mul_s(vs, d), first, 0), (int[]){0}, 1);
    if (alpha < 1) { /* boost: times U^(1/alpha) */
        cft_array *w = cft_random_uniform(cft_index(ks, 2), CFT_F64, shape, ndim, 0, 1);
        g = cft_mul(g, cft_exp(cft_mul_s(cft_log(w), 1 / alpha)));
    }
    return cft_astype(g, dtype);
}

cft_array *cft_random_beta(cft_array *key, double a, double b, cft_dtype dtype,
                           const int64_t *shape, int ndim) {
    CFT_PROPAGATE("cft_random_beta", key);
    cft_array *ks = cft_random_split(key, 2);
    cft_array *x = cft_random_gamma(cft_index(ks, 0), a, CFT_F64, shape, ndim);
    cft_array *y = cft_random_gamma(cft_index(ks, 1), b, CFT_F64, shape, ndim);
    return cft_astype(cft_div(x, cft_add(x, y)), dtype);
}

cft_array *cft_random_dirichlet(cft_array *key, const double *alpha, int k, cft_dtype dtype,
                                const int64_t *batch, int nbatch) {
    CFT_PROPAGATE("cft_random_dirichlet", key);
    if (k < 1 || !alpha || nbatch < 0 || nbatch + 1 > CFT_MAX_NDIM)
        return cft__fail(CFT_E_ARG, "cft_random_dirichlet: %d concentrations", k);
    cft_array *ks = cft_random_split(key, k), **g = CFT_NEWN(cft_array *, k);
    if (!g)
        return cft__oom();
    for (int i = 0; i < k; i++)
        g[i] = cft_random_gamma(cft_index(ks, i), alpha[i], CFT_F64, batch, nbatch);
    cft_array *s = cft_stack(g, k, nbatch); /* [batch..., k] */
    return cft_astype(cft_div(s, cft_sum(s, (int[]){-1}, 1, true)), dtype);
}
