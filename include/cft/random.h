/* cft/random.h: counter-based random numbers with explicit keys.
 *
 * A key is an i32[2] array (the two 32-bit words of a Threefry-2x32 key, as
 * bits). Functions of a key are pure: the same key gives the same numbers, and
 * vmap over a batch of keys gives exactly what a loop over the keys gives.
 * Never reuse a key for two draws: split it.
 */
#ifndef CFT_RANDOM_H
#define CFT_RANDOM_H

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

#ifdef __cplusplus
}
#endif
#endif
