/** @file
 * cft/random.h: counter-based random numbers with explicit keys.
 *
 * A key is an i32[2] array (the two 32-bit words of a Threefry-2x32 key, as
 * bits). Functions of a key are pure: the same key gives the same numbers, and
 * vmap over a batch of keys gives exactly what a loop over the keys gives.
 * Never reuse a key for two draws: split it.
 */
#ifndef CFT_RANDOM_H
#define CFT_RANDOM_H

/** @addtogroup random
 *  @{ */

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A key from a 64-bit seed. */
cft_array *cft_random_key(uint64_t seed);
/** n new keys from `key`: shape [n, 2]; take one with cft_index(keys, i). */
cft_array *cft_random_split(cft_array *key, int64_t n);
/** A new key from `key` and an integer. */
cft_array *cft_random_fold_in(cft_array *key, int64_t data);
/** Uniform floats in [lo, hi) of the given float dtype and shape. */
cft_array *cft_random_uniform(cft_array *key, cft_dtype dtype, const int64_t *shape, int ndim,
                              double lo, double hi);
/** Standard normal floats (Box-Muller). */
cft_array *cft_random_normal(cft_array *key, cft_dtype dtype, const int64_t *shape, int ndim);
/** Booleans, true with probability p. */
cft_array *cft_random_bernoulli(cft_array *key, double p, const int64_t *shape, int ndim);

/* ---- distributions built on the draws above (jax.random's names) ---- */
/** Integers uniform in [lo, hi), dtype i32 or i64. */
cft_array *cft_random_randint(cft_array *key, const int64_t *shape, int ndim, int64_t lo,
                              int64_t hi, cft_dtype dtype);
/** Standard Gumbel draws. */
cft_array *cft_random_gumbel(cft_array *key, cft_dtype dtype, const int64_t *shape, int ndim);
/** Standard exponential draws (rate 1). */
cft_array *cft_random_exponential(cft_array *key, cft_dtype dtype, const int64_t *shape, int ndim);
/** Indices drawn from the softmax of logits along axis (Gumbel-max); the
 *  axis goes away. */
cft_array *cft_random_categorical(cft_array *key, cft_array *logits, int axis);
/** Standard normal draws conditioned on [lower, upper] (inverse CDF). */
cft_array *cft_random_truncated_normal(cft_array *key, cft_dtype dtype, const int64_t *shape,
                                       int ndim, double lower, double upper);
/** A random permutation of 0 .. n-1 (i32). */
cft_array *cft_random_permutation(cft_array *key, int64_t n);
/** k rows of a drawn uniformly, with or without replacement. */
cft_array *cft_random_choice(cft_array *key, cft_array *a, int64_t k, bool replace);
/** Draws of N(mean, cov): mean [d], cov [d, d] symmetric positive definite;
 *  result [batch..., d]. */
cft_array *cft_random_multivariate_normal(cft_array *key, cft_array *mean, cft_array *cov,
                                          const int64_t *batch, int nbatch);
/** Gamma(alpha, 1) draws (Marsaglia-Tsang, vectorised; alpha > 0). */
cft_array *cft_random_gamma(cft_array *key, double alpha, cft_dtype dtype, const int64_t *shape,
                            int ndim);
/** Beta(a, b) draws. */
cft_array *cft_random_beta(cft_array *key, double a, double b, cft_dtype dtype,
                           const int64_t *shape, int ndim);
/** Dirichlet(alpha[k]) draws: [batch..., k], rows summing to 1. */
cft_array *cft_random_dirichlet(cft_array *key, const double *alpha, int k, cft_dtype dtype,
                                const int64_t *batch, int nbatch);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
