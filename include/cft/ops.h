/** @file
 * cft/ops.h: the operations on arrays.
 *
 * Every op works on concrete arrays (eagerly) and on tracers inside a
 * transform (recording the op), with the same code. Binary ops broadcast
 * NumPy-style and promote dtypes (cft_promote); the primitives underneath
 * are strict (same shape, same dtype), as in jax.lax. Axes may be negative.
 * Every op returns a GC-managed array, never NULL; on bad input an error
 * array naming the op and the shapes (see core.h).
 */
#ifndef CFT_OPS_H
#define CFT_OPS_H

/** @addtogroup arrays
 *  @{ */

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise unary (float dtypes unless noted) ---- */
cft_array *cft_neg(cft_array *x);         /**< -x (any numeric dtype) */
cft_array *cft_exp(cft_array *x);         /**< e^x */
cft_array *cft_log(cft_array *x);         /**< natural log */
cft_array *cft_log1p(cft_array *x);       /**< log(1+x), accurate near 0 */
cft_array *cft_expm1(cft_array *x);       /**< e^x - 1, accurate near 0 */
cft_array *cft_sin(cft_array *x);         /**< sine */
cft_array *cft_cos(cft_array *x);         /**< cosine */
cft_array *cft_tan(cft_array *x);         /**< tangent */
cft_array *cft_tanh(cft_array *x);        /**< hyperbolic tangent */
cft_array *cft_logistic(cft_array *x);    /**< 1/(1+e^-x) (sigmoid) */
cft_array *cft_sqrt(cft_array *x);        /**< square root */
cft_array *cft_rsqrt(cft_array *x);       /**< 1/sqrt(x) */
cft_array *cft_abs(cft_array *x);         /**< |x| (any numeric dtype) */
cft_array *cft_sign(cft_array *x);        /**< -1, 0 or 1 (any numeric dtype) */
cft_array *cft_floor(cft_array *x);       /**< round down (zero derivative) */
cft_array *cft_ceil(cft_array *x);        /**< round up (zero derivative) */
cft_array *cft_round(cft_array *x);       /**< round half away from zero */
cft_array *cft_rint(cft_array *x);        /**< round half to even (numpy.rint) */
cft_array *cft_erf(cft_array *x);         /**< error function */
cft_array *cft_square(cft_array *x);      /**< x*x (any numeric dtype) */
cft_array *cft_reciprocal(cft_array *x);  /**< 1/x */
cft_array *cft_logical_not(cft_array *x); /**< !x, bool -> bool */
cft_array *cft_sinh(cft_array *x);        /**< hyperbolic sine */
cft_array *cft_cosh(cft_array *x);        /**< hyperbolic cosine */
cft_array *cft_asin(cft_array *x);        /**< arcsine */
cft_array *cft_acos(cft_array *x);        /**< arccosine */
cft_array *cft_atan(cft_array *x);        /**< arctangent */
cft_array *cft_asinh(cft_array *x);       /**< inverse hyperbolic sine */
cft_array *cft_acosh(cft_array *x);       /**< inverse hyperbolic cosine */
cft_array *cft_atanh(cft_array *x);       /**< inverse hyperbolic tangent */
cft_array *cft_log2(cft_array *x);        /**< base-2 log (floats) */
cft_array *cft_log10(cft_array *x);       /**< base-10 log (floats) */
cft_array *cft_cbrt(cft_array *x);        /**< cube root (floats; negative x allowed) */
cft_array *cft_trunc(cft_array *x);       /**< round toward zero (zero derivative) */
cft_array *cft_deg2rad(cft_array *x);     /**< x * pi / 180 */
cft_array *cft_rad2deg(cft_array *x);     /**< x * 180 / pi */
/** log(sigmoid(x)) = -softplus(-x), computed without overflow. */
cft_array *cft_log_sigmoid(cft_array *x);
cft_array *cft_is_finite(cft_array *x); /**< not inf and not NaN, float -> bool */
/** ~x on ints, !x on bools. */
cft_array *cft_bitwise_not(cft_array *x);
/** Number of set bits of each int (of its two's complement), same dtype. */
cft_array *cft_population_count(cft_array *x);
/** x^n for a static integer n, by repeated squaring (x^-n = 1/x^n; ints
 *  need n >= 0, and wrap on overflow). Derivative n x^(n-1). A primitive
 *  with a parameter: cft_jit runs it eagerly, it is not fused. */
cft_array *cft_integer_pow(cft_array *x, int n);

/* ---- elementwise binary: broadcasting, promoting ---- */
cft_array *cft_add(cft_array *a, cft_array *b);     /**< a + b */
cft_array *cft_sub(cft_array *a, cft_array *b);     /**< a - b */
cft_array *cft_mul(cft_array *a, cft_array *b);     /**< a * b */
cft_array *cft_div(cft_array *a, cft_array *b);     /**< a / b (C division for ints) */
cft_array *cft_pow(cft_array *a, cft_array *b);     /**< a ^ b (floats) */
cft_array *cft_maximum(cft_array *a, cft_array *b); /**< elementwise max; ties split the gradient */
cft_array *cft_minimum(cft_array *a, cft_array *b); /**< elementwise min */
cft_array *cft_atan2(cft_array *a, cft_array *b);   /**< atan2(a, b) (floats) */
/** |a| with the sign of b (floats); derivative sign(a) sign(result) in a. */
cft_array *cft_copysign(cft_array *a, cft_array *b);
/** log(e^a + e^b), stable (max + log1p(e^-|a-b|)). */
cft_array *cft_logaddexp(cft_array *a, cft_array *b);
/** log2(2^a + 2^b), stable. */
cft_array *cft_logaddexp2(cft_array *a, cft_array *b);
/** sqrt(a^2 + b^2) without overflow (scaled by max(|a|, |b|)); its
 *  gradient at (0, 0) is 0 (the subgradient torch uses). */
cft_array *cft_hypot(cft_array *a, cft_array *b);
/** Heaviside step: 0 for a < 0, b where a == 0, 1 for a > 0 (jnp.heaviside). */
cft_array *cft_heaviside(cft_array *a, cft_array *b);
cft_array *cft_eq(cft_array *a, cft_array *b);          /**< a == b -> bool */
cft_array *cft_ne(cft_array *a, cft_array *b);          /**< a != b -> bool */
cft_array *cft_lt(cft_array *a, cft_array *b);          /**< a < b -> bool */
cft_array *cft_le(cft_array *a, cft_array *b);          /**< a <= b -> bool */
cft_array *cft_gt(cft_array *a, cft_array *b);          /**< a > b -> bool */
cft_array *cft_ge(cft_array *a, cft_array *b);          /**< a >= b -> bool */
cft_array *cft_logical_and(cft_array *a, cft_array *b); /**< bool and */
cft_array *cft_logical_or(cft_array *a, cft_array *b);  /**< bool or */
/** Remainder with the sign of a: C fmod for floats, % for ints (a % 0 = a).
 *  Derivative 1 in a, -trunc(a/b) in b. */
cft_array *cft_rem(cft_array *a, cft_array *b);
/** The next float after a toward b (floats); derivative 1 in a, 0 in b. */
cft_array *cft_nextafter(cft_array *a, cft_array *b);
/** @{ */
/** Bitwise and, or, xor of ints; logical on bools. */
cft_array *cft_bitwise_and(cft_array *a, cft_array *b);
cft_array *cft_bitwise_or(cft_array *a, cft_array *b);
cft_array *cft_bitwise_xor(cft_array *a, cft_array *b);
/** @} */
/** @{ */
/** Shifts of ints by b bits (b outside [0, bits): 0, or the sign fill for
 *  the arithmetic right shift, as XLA). The logical right shift fills with
 *  zeros, reading a as unsigned. */
cft_array *cft_shift_left(cft_array *a, cft_array *b);
cft_array *cft_shift_right_logical(cft_array *a, cft_array *b);
cft_array *cft_shift_right_arithmetic(cft_array *a, cft_array *b);
/** @} */
/** min(max(x, lo), hi) elementwise; the three broadcast together and
 *  promote. NaN in x stays NaN; lo > hi gives hi. The derivative follows
 *  that composition: hi's tangent where max(x, lo) > hi, else lo's where
 *  x < lo, else x's (x keeps it at ties, where JAX gives 0). */
cft_array *cft_clamp(cft_array *x, cft_array *lo, cft_array *hi);
/** @{ */
/** a + s, a * s with a scalar s of a's dtype. */
cft_array *cft_add_s(cft_array *a, double s);
cft_array *cft_mul_s(cft_array *a, double s);
/** @} */
/** cond ? a : b elementwise; cond is bool, all three broadcast together. */
cft_array *cft_where(cft_array *cond, cft_array *a, cft_array *b);

/* ---- dtype and shape ---- */
/** x converted to dtype (float->int truncates toward zero). */
cft_array *cft_astype(cft_array *x, cft_dtype dtype);
/** x broadcast to `shape`, mapping x's dim i to output dim dims[i]
 *  (jax.lax.broadcast_in_dim). */
cft_array *cft_broadcast_in_dim(cft_array *x, const int64_t *shape, int ndim, const int *dims);
/** NumPy broadcast of x to `shape`. */
cft_array *cft_broadcast_to(cft_array *x, const int64_t *shape, int ndim);
/** Same elements, new shape; one entry may be -1. A view when x is contiguous. */
cft_array *cft_reshape(cft_array *x, const int64_t *shape, int ndim);
/** Permute axes: output dim i is input dim perm[i]; perm NULL reverses. A view. */
cft_array *cft_transpose(cft_array *x, const int *perm);
/** Swap the last two axes (matrix transpose of a batch). */
cft_array *cft_mT(cft_array *x);
/** Move axis `src` to position `dst`. */
cft_array *cft_moveaxis(cft_array *x, int src, int dst);
/** Remove the given size-1 axes (naxes 0: all size-1 axes). */
cft_array *cft_squeeze(cft_array *x, const int *axes, int naxes);
/** Insert a size-1 axis at position `axis` of the result. */
cft_array *cft_expand_dims(cft_array *x, int axis);
/** x[start:limit:stride] per dim (strides NULL: 1). */
cft_array *cft_slice(cft_array *x, const int64_t *start, const int64_t *limit,
                     const int64_t *strides);
/** x[i] along axis 0 (removes that axis). */
cft_array *cft_index(cft_array *x, int64_t i);
/** Pad with `value` (a 0-d array): lo/hi per dim (may be negative), interior
 *  (NULL: none) inserts that many values between elements. */
cft_array *cft_pad(cft_array *x, cft_array *value, const int64_t *lo, const int64_t *hi,
                   const int64_t *interior);
/** Join n arrays along `axis`. */
cft_array *cft_concatenate(cft_array *const *xs, int n, int axis);
/** Stack n same-shaped arrays along a new axis. */
cft_array *cft_stack(cft_array *const *xs, int n, int axis);
/** 0, 1, ... along dim `dim` of an array of `shape`. */
cft_array *cft_iota(cft_dtype dtype, const int64_t *shape, int ndim, int dim);
/** x, with a zero derivative. */
cft_array *cft_stop_gradient(cft_array *x);

/* ---- indexing (jax.lax gather / scatter; never mutates: every update
 * returns a new array) ----
 * Index arrays are i32 or i64 and have no derivative; an index of another
 * dtype is an error. Out-of-range indices never crash: they follow a mode. A
 * *window* is the block one index vector reads (gather) or writes
 * (scatter). */
/** What gathers and scatters do with indices out of range. */
typedef enum cft_index_mode {
    /** Clamp each window start into [0, dim - window size] so the window
     *  lies inside the operand (JAX's GatherScatterMode.CLIP). */
    CFT_INDEX_CLIP = 0,
    /** Gather: a window not entirely inside the operand reads zeros.
     *  Scatter: such a window's updates are dropped (JAX's FILL_OR_DROP,
     *  with fill value 0). */
    CFT_INDEX_FILL_OR_DROP = 1,
} cft_index_mode;

/** Dimension numbers of a gather (jax.lax.GatherDimensionNumbers). The
 *  indices hold index vectors along `index_vector_dim` (== indices rank:
 *  an implicit trailing dim of size 1); their other dims are batch dims.
 *  Component k of a vector is the window start on operand dim
 *  start_index_map[k] (other dims start at 0). The output has the batch
 *  dims in order at the positions not in `offset_dims`, and at
 *  `offset_dims` (increasing) the window dims of the operand dims not in
 *  `collapsed_slice_dims` (increasing; their slice size must be 1). */
typedef struct cft_gather_dnums {
    int offset_dims[CFT_MAX_NDIM];          /**< output dims of the window */
    int n_offset_dims;                      /**< entries of offset_dims */
    int collapsed_slice_dims[CFT_MAX_NDIM]; /**< operand dims dropped from the window */
    int n_collapsed_slice_dims;             /**< entries of collapsed_slice_dims */
    int start_index_map[CFT_MAX_NDIM];      /**< operand dim of each index component */
    int n_start_index_map;                  /**< entries of start_index_map */
    int index_vector_dim;                   /**< the indices' dim holding the vectors */
} cft_gather_dnums;

/** Dimension numbers of a scatter (jax.lax.ScatterDimensionNumbers): the
 *  updates have window dims at `update_window_dims` (increasing; they map in
 *  order to the operand dims not in `inserted_window_dims`) and, elsewhere,
 *  scatter dims matching the indices' batch dims in order. Component k of
 *  an index vector is the window start on operand dim
 *  scatter_dims_to_operand_dims[k]. */
typedef struct cft_scatter_dnums {
    int update_window_dims[CFT_MAX_NDIM];           /**< updates' window dims */
    int n_update_window_dims;                       /**< entries of update_window_dims */
    int inserted_window_dims[CFT_MAX_NDIM];         /**< operand dims of window size 1 */
    int n_inserted_window_dims;                     /**< entries of inserted_window_dims */
    int scatter_dims_to_operand_dims[CFT_MAX_NDIM]; /**< operand dim of each component */
    int n_scatter_dims_to_operand_dims;             /**< entries of the above */
    int index_vector_dim;                           /**< the indices' dim holding the vectors */
} cft_scatter_dnums;

/** XLA/jax.lax gather: slices of x of `slice_sizes` (one per dim of x)
 *  starting at the index vectors in `indices`. */
cft_array *cft_gather(cft_array *x, cft_array *indices, const cft_gather_dnums *dn,
                      const int64_t *slice_sizes, cft_index_mode mode);
/** A copy of x with the windows of `updates` written at the index vectors
 *  (converted to x's dtype). Updates apply in row-major order of the
 *  updates' scatter dims; where windows overlap the last one wins. */
cft_array *cft_scatter(cft_array *x, cft_array *indices, cft_array *updates,
                       const cft_scatter_dnums *dn, cft_index_mode mode);
/** Like cft_scatter, but overlapping updates add up (onto x's values). */
cft_array *cft_scatter_add(cft_array *x, cft_array *indices, cft_array *updates,
                           const cft_scatter_dnums *dn, cft_index_mode mode);
/** x[start[0]:start[0]+sizes[0], ...] where `start` is an i32/i64 array of
 *  shape [ndim], known only at run time. Starts are clamped into
 *  [0, dim - size], as in JAX, so the slice always has `sizes`. */
cft_array *cft_dynamic_slice(cft_array *x, cft_array *start, const int64_t *sizes);
/** A copy of x with `update` (same rank, converted to x's dtype) written at
 *  `start` (shape [ndim], clamped into [0, dim - update dim] as in JAX). */
cft_array *cft_dynamic_update_slice(cft_array *x, cft_array *update, cft_array *start);
/** numpy.take: x indexed along `axis` by an index array of any shape;
 *  result shape x.shape[:axis] + indices.shape + x.shape[axis+1:]
 *  (x[idx] for axis 0: an embedding lookup). Negative indices count from the
 *  end; indices still out of range are clamped (CLIP). */
cft_array *cft_take(cft_array *x, cft_array *indices, int axis);
/** numpy.take_along_axis: indices of x's rank; along `axis` they pick
 *  elements, the other dims broadcast against x. Negative indices count from
 *  the end; out-of-range ones are clamped. */
cft_array *cft_take_along_axis(cft_array *x, cft_array *indices, int axis);
/** Functional x.at[..., indices, ...].set(values) along `axis`: a new array
 *  equal to x except at the taken positions (cft_take's result shape), which
 *  get `values` (broadcast to that shape, converted to x's dtype). Negative
 *  indices count from the end; updates at indices still out of range are
 *  dropped. With repeated indices the last value wins. */
cft_array *cft_at_set(cft_array *x, cft_array *indices, cft_array *values, int axis);
/** Functional x.at[..., indices, ...].add(values): as cft_at_set, but the
 *  values add onto x, repeated indices accumulating. */
cft_array *cft_at_add(cft_array *x, cft_array *indices, cft_array *values, int axis);

/* ---- reductions (axes NULL/naxes 0: all axes) ---- */
cft_array *cft_sum(cft_array *x, const int *axes, int naxes, bool keepdims);  /**< sum */
cft_array *cft_prod(cft_array *x, const int *axes, int naxes, bool keepdims); /**< product */
cft_array *cft_max(cft_array *x, const int *axes, int naxes, bool keepdims);  /**< max */
cft_array *cft_min(cft_array *x, const int *axes, int naxes, bool keepdims);  /**< min */
cft_array *cft_mean(cft_array *x, const int *axes, int naxes, bool keepdims); /**< mean */
/** Variance with `ddof` delta degrees of freedom. */
cft_array *cft_var(cft_array *x, const int *axes, int naxes, int ddof, bool keepdims);
/** @{ */
/** Index (i32) of the first max / min along `axis`. */
cft_array *cft_argmax(cft_array *x, int axis, bool keepdims);
cft_array *cft_argmin(cft_array *x, int axis, bool keepdims);
/** @} */

/* ---- scans and sorting (along one axis; negative axes count from the end) ---- */
/** Inclusive cumulative sum along `axis`; reverse: from the end (jax.lax
 *  cumsum). Bool inputs are summed as i32. */
cft_array *cft_cumsum(cft_array *x, int axis, bool reverse);
/** Cumulative product (bool as i32). The derivative is exact at zeros. */
cft_array *cft_cumprod(cft_array *x, int axis, bool reverse);
/** @{ */
/** Running max / min (NaN propagates). The tangent is that of the element
 *  holding the running extreme, the first one in scan order on ties. */
cft_array *cft_cummax(cft_array *x, int axis, bool reverse);
cft_array *cft_cummin(cft_array *x, int axis, bool reverse);
/** @} */
/** log(cumsum(exp(x))), stable (ints are converted to f32). */
cft_array *cft_cumlogsumexp(cft_array *x, int axis, bool reverse);
/** Stable sort along `axis`. Ascending order puts NaNs last (as NumPy);
 *  descending is the reverse order (NaNs first) with ties still in their
 *  original order. -0.0 and 0.0 compare equal. */
cft_array *cft_sort(cft_array *x, int axis, bool descending);
/** The stable sorting permutation (i32) along `axis`: x gathered with it
 *  along axis is cft_sort(x, axis, descending). */
cft_array *cft_argsort(cft_array *x, int axis, bool descending);
/** Sort n same-shaped arrays along `axis` by the first (stable): out[0] is
 *  xs[0] sorted, out[i] is xs[i] permuted the same way. On error every
 *  out[i] is the error array, also returned as the thread's last error. */
cft_status cft_sort_multi(cft_array *const *xs, int n, int axis, bool descending, cft_array **out);
/** The k largest entries along the last axis, largest first (NaN counts as
 *  largest; ties: lower index first): values [..., k] and their indices
 *  (i32). Either output pointer may be NULL. Derivative: the tangent at the
 *  chosen indices. */
cft_status cft_top_k(cft_array *x, int64_t k, cft_array **values, cft_array **indices);
/** cft_top_k returned by value (error arrays on failure). */
typedef struct cft_top_k_result {
    cft_array *values;  /**< the k largest, descending */
    cft_array *indices; /**< their indices (i32) */
} cft_top_k_result;
/** cft_top_k by value. */
cft_top_k_result cft_top_k_of(cft_array *x, int64_t k);

/* ---- contractions ---- */
/** General dot product (jax.lax.dot_general): contract lhs dims lc[i] with
 *  rhs dims rc[i], batch over lb[i] / rb[i]. Output dims: batch, lhs free,
 *  rhs free. Float GEMM work goes to OpenBLAS; bf16 / f16 operands to
 *  oneDNN (f32 accumulation) where the CPU has its kernels for them, else
 *  they are widened to f32 and the result rounded. */
cft_array *cft_dot_general(cft_array *a, cft_array *b, const int *lc, const int *rc, int nc,
                           const int *lb, const int *rb, int nb);
/** NumPy matmul: 1-d and n-d operands, broadcast batch dims. */
cft_array *cft_matmul(cft_array *a, cft_array *b);
/** Einstein summation (numpy.einsum / jnp.einsum) of n operands: spec as
 *  "Naf,Mbf->NMab" (labels a-z, A-Z; a label repeated in one operand takes
 *  its diagonal; without "->" the output is the labels used once, sorted).
 *  "..." stands for an operand's remaining dims, broadcast across operands
 *  as numpy does ("...ij,...jk->...ik"; implicit output: "..." first; one
 *  "..." per operand at most). Sizes may be symbolic (a traced batch).
 *  Contracted pairwise with dot_general, smallest intermediate first, so no
 *  outer product is built that a contraction can avoid. */
cft_array *cft_einsum(const char *spec, int n, cft_array *const *xs);
/** cft_einsum of two operands. */
cft_array *cft_einsum2(const char *spec, cft_array *a, cft_array *b);
/** Tensor dot: contract a's a_axes[i] with b's b_axes[i]; result dims: a's
 *  free dims, then b's (numpy.tensordot with axes given as two lists). */
cft_array *cft_tensordot(cft_array *a, cft_array *b, const int *a_axes, const int *b_axes,
                         int naxes);
/** numpy.tensordot(a, b, axes=n): a's last n dims with b's first n. */
cft_array *cft_tensordot_n(cft_array *a, cft_array *b, int n);
/** Outer product of the flattened a and b: [size(a), size(b)]. */
cft_array *cft_outer(cft_array *a, cft_array *b);
/** Sum of a square matrix's diagonal (jnp.trace of a matrix). */
cft_array *cft_matrix_trace(cft_array *x);
/** x with axes a and b exchanged (negative counts from the end). */
cft_array *cft_swapaxes(cft_array *x, int a, int b);

/* ---- shape and index helpers (jax.numpy), built from primitives ---- */
/** @{ */
/** x with the elements above (tril) / below (triu) diagonal k of the last
 *  two dims set to zero (k > 0: above the main diagonal). */
cft_array *cft_tril(cft_array *x, int k);
cft_array *cft_triu(cft_array *x, int k);
/** @} */
/** x shifted by `shift` along axis, wrapping around (numpy.roll). */
cft_array *cft_roll(cft_array *x, int64_t shift, int axis);
/** x repeated reps[d] times along each dim (right-aligned, numpy.tile). */
cft_array *cft_tile(cft_array *x, const int64_t *reps, int nreps);
/** Elements repeated along axis: counts[0] times each (ncounts 1), or
 *  counts[i] times element i (ncounts = the axis' length). total: the
 *  result's length along axis, or -1 (counts are static: jnp.repeat's
 *  total_repeat_length). */
cft_array *cft_repeat(cft_array *x, const int64_t *counts, int ncounts, int axis, int64_t total);
/** @{ */
/** Split x into `sections` equal parts along axis (out[sections]);
 *  array_split allows unequal ones (the first get one more). */
cft_status cft_split(cft_array *x, int sections, int axis, cft_array **out);
cft_status cft_array_split(cft_array *x, int sections, int axis, cft_array **out);
/** @} */
/** Diagonal `offset` of the dims axis1, axis2 (which go away; the diagonal
 *  becomes the last dim), numpy.diagonal. */
cft_array *cft_diagonal(cft_array *x, int offset, int axis1, int axis2);
/** Kronecker product of two matrices. */
cft_array *cft_kron(cft_array *a, cft_array *b);
/** Coordinate grids of vectors x [n] and y [m]: "xy" indexing ([m, n];
 *  ij false) or "ij" ([n, m]). */
cft_status cft_meshgrid(cft_array *x, cft_array *y, bool ij, cft_array **gx, cft_array **gy);

/* ---- data-dependent indices with static sizes (jax.numpy's size=) ---- */
/** Insertion points of v in the sorted vector a (i64, v's shape): before
 *  equal elements (right false) or after them (numpy.searchsorted). */
cft_array *cft_searchsorted(cft_array *a, cft_array *v, bool right);
/** Counts (or summed weights, NULL: counts) of each value 0 .. length-1
 *  in the int vector x; other values are ignored. */
cft_array *cft_bincount(cft_array *x, cft_array *weights, int64_t length);
/** Counts (or summed weights) of x's values in `bins` equal bins over
 *  [lo, hi] (the last bin closed, as numpy); values outside are ignored. */
cft_array *cft_histogram(cft_array *x, int64_t bins, double lo, double hi, cft_array *weights);
/** Positions (i64 [size]) of a vector's nonzero entries, padded with fill. */
cft_array *cft_nonzero(cft_array *x, int64_t size, int64_t fill);
/** Coordinates (i64 [size, ndim]) of x's nonzero entries in row-major
 *  order, padded with rows of fill. */
cft_array *cft_argwhere(cft_array *x, int64_t size, int64_t fill);
/** The sorted distinct values of x (flattened), [size], padded with fill. */
cft_array *cft_unique(cft_array *x, int64_t size, double fill);
/** numpy.put_along_axis, functional: x with values (broadcast to the
 *  indices' shape) written where indices (x's rank) point along axis; the
 *  last write wins. Negative indices count from the end; others outside
 *  the axis are dropped. */
cft_array *cft_put_along_axis(cft_array *x, cft_array *indices, cft_array *values, int axis);
/** torch's x.scatter_add_(axis, indices, src), functional: src's values
 *  added into x where indices (x's rank) point along axis. */
cft_array *cft_scatter_add_along_axis(cft_array *x, cft_array *indices, cft_array *src, int axis);

/* ---- convolution and pooling ----
 * Layouts are fixed (jax.lax dimension numbers NC<spatial>, OI<spatial>,
 * NC<spatial>): lhs [N, C, spatial...], rhs (kernel) [O, I, spatial...],
 * result [N / batch_group_count, O, spatial...]. Per spatial dim, the result
 * size is floor((in' + lo + hi - k') / stride) + 1 (0 if negative), with
 * in' = (in - 1) * lhs_dilation + 1 and k' = (k - 1) * rhs_dilation + 1.
 * Float work is im2col + OpenBLAS GEMM, or oneDNN's kernels (larger f32
 * layers; bf16 / f16 where the CPU has them). Every transform applies. */

/** General convolution (jax.lax.conv_general_dilated) with 1 to 3 spatial
 *  dims (nsp = rank - 2). strides, lhs_dilation, rhs_dilation: nsp values
 *  (NULL: 1); padding: nsp (lo, hi) pairs, negative crops (NULL: 0). lhs
 *  dilation inserts holes between input elements (a transposed conv); rhs
 *  dilation between kernel taps. feature_group_count G: C = G*I, O % G == 0,
 *  output channels [g*O/G, (g+1)*O/G) see input channels [g*I, (g+1)*I).
 *  batch_group_count B (C = I): N and O split into B groups (group-major),
 *  output channel group b sees samples [b*N/B, (b+1)*N/B), and the result
 *  has N/B samples. G and B are not both > 1. Dtypes promote. */
cft_array *cft_conv_general_dilated(cft_array *lhs, cft_array *rhs, const int64_t *strides,
                                    const int64_t *padding, const int64_t *lhs_dilation,
                                    const int64_t *rhs_dilation, int64_t feature_group_count,
                                    int64_t batch_group_count);
/** PyTorch's conv2d without bias: x [N, C, H, W] or [C, H, W], w [O, C/groups,
 *  kH, kW]; stride, padding (symmetric, >= 0), dilation: 2 values each
 *  (NULL: 1, 0, 1). Asymmetric or SAME padding: cft_conv_padding and
 *  cft_conv_general_dilated. */
cft_array *cft_conv2d(cft_array *x, cft_array *w, const int64_t *stride, const int64_t *padding,
                      const int64_t *dilation, int64_t groups);
/** @{ */
/** conv1d / conv3d as cft_conv2d: x [N, C, L] or [C, L] with w [O, C/groups, k],
 *  x [N, C, D, H, W] or [C, D, H, W] with w [O, C/groups, kD, kH, kW];
 *  stride, padding, dilation: 1 or 3 values each (NULL: 1, 0, 1). */
cft_array *cft_conv1d(cft_array *x, cft_array *w, const int64_t *stride, const int64_t *padding,
                      const int64_t *dilation, int64_t groups);
cft_array *cft_conv3d(cft_array *x, cft_array *w, const int64_t *stride, const int64_t *padding,
                      const int64_t *dilation, int64_t groups);
/** @} */
/** @{ */
/** PyTorch's conv_transpose1d/2d/3d without bias: x [N, C, *spatial] or
 *  [C, *spatial], w [C, O/groups, *kernel] (PyTorch's layout); per spatial
 *  dim the output is (in - 1) * stride - 2 * padding + dilation * (k - 1) +
 *  output_padding + 1, with output_padding < stride or < dilation. It is
 *  the gradient of the convolution with the same parameters with respect
 *  to its input. stride, padding, output_padding, dilation: one value per
 *  spatial dim (NULL: 1, 0, 0, 1). */
cft_array *cft_conv_transpose1d(cft_array *x, cft_array *w, const int64_t *stride,
                                const int64_t *padding, const int64_t *output_padding,
                                const int64_t *dilation, int64_t groups);
cft_array *cft_conv_transpose2d(cft_array *x, cft_array *w, const int64_t *stride,
                                const int64_t *padding, const int64_t *output_padding,
                                const int64_t *dilation, int64_t groups);
cft_array *cft_conv_transpose3d(cft_array *x, cft_array *w, const int64_t *stride,
                                const int64_t *padding, const int64_t *output_padding,
                                const int64_t *dilation, int64_t groups);
/** @} */
/** Padding modes for cft_conv_padding (as jax's "VALID", "SAME", "SAME_LOWER"). */
typedef enum cft_pad_mode { CFT_PAD_VALID = 0, CFT_PAD_SAME, CFT_PAD_SAME_LOWER } cft_pad_mode;
/** The (lo, hi) padding pairs of `mode` for nsp spatial dims of sizes in[],
 *  windows window[] (undilated), strides and dilations (NULL: 1), written to
 *  pads[2*nsp]. VALID: none. SAME: out = ceil(in / stride), the total padding
 *  split with the extra element at the end (SAME_LOWER: at the start). Works
 *  for convolutions and windows alike. Returns CFT_OK or CFT_E_ARG. */
cft_status cft_conv_padding(cft_pad_mode mode, int nsp, const int64_t *in, const int64_t *window,
                            const int64_t *strides, const int64_t *dilation, int64_t *pads);
/** Reverse the order of elements along the given axes (NULL/0: all). */
cft_array *cft_flip(cft_array *x, const int *axes, int naxes);
/** @{ */
/** Windowed sum / max over every dim of x (jax.lax.reduce_window):
 *  window[ndim] sizes, strides (NULL: 1), padding ndim (lo, hi) pairs (NULL:
 *  0; padding adds nothing and never wins a max), dilation between window
 *  taps (NULL: 1). Result dims as for a convolution. A window with no
 *  element gives 0 (sum) or -inf (max). max's derivative goes to the first
 *  maximum of each window. */
cft_array *cft_reduce_window_sum(cft_array *x, const int64_t *window, const int64_t *strides,
                                 const int64_t *padding, const int64_t *dilation);
cft_array *cft_reduce_window_max(cft_array *x, const int64_t *window, const int64_t *strides,
                                 const int64_t *padding, const int64_t *dilation);
/** @} */
/** PyTorch's max_pool2d over [N, C, H, W] or [C, H, W]: kernel[2], stride
 *  (NULL: kernel), padding (NULL: 0; at most kernel/2, never selected),
 *  dilation (NULL: 1). Floor mode. */
cft_array *cft_max_pool2d(cft_array *x, const int64_t *kernel, const int64_t *stride,
                          const int64_t *padding, const int64_t *dilation);
/** PyTorch's avg_pool2d: window sums divided by kH*kW (count_include_pad)
 *  or by the number of non-padding elements under the window. */
cft_array *cft_avg_pool2d(cft_array *x, const int64_t *kernel, const int64_t *stride,
                          const int64_t *padding, bool count_include_pad);

/* ---- nn composites (plain C over the primitives) ---- */
cft_array *cft_relu(cft_array *x); /**< max(x, 0) */
/** GELU: exact (erf) or the tanh approximation. */
cft_array *cft_gelu(cft_array *x, bool approximate);
cft_array *cft_softmax(cft_array *x, int axis);     /**< stable softmax */
cft_array *cft_log_softmax(cft_array *x, int axis); /**< stable log-softmax */
/** log(sum(exp(x))) over axes, stable. */
cft_array *cft_logsumexp(cft_array *x, const int *axes, int naxes, bool keepdims);
/** One-hot encoding of integer labels: shape labels.shape + [n], dtype. */
cft_array *cft_one_hot(cft_array *labels, int64_t n, cft_dtype dtype);
/** Softmax cross-entropy of logits [..., C] with integer labels [...]:
 *  per-example losses of shape [...]. A label outside [0, C) is an error
 *  when the labels are host data, and makes that example's loss NaN when
 *  they are traced (under jit, vmap, grad) or on a device. */
cft_array *cft_cross_entropy(cft_array *logits, cft_array *labels);
/** Mean squared error, a scalar. */
cft_array *cft_mse(cft_array *pred, cft_array *target);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
