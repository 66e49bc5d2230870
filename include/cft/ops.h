/* cft/ops.h: the operations on arrays.
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

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise unary (float dtypes unless noted) ---- */
cft_array *cft_neg(cft_array *x);        /**< -x (any numeric dtype) */
cft_array *cft_exp(cft_array *x);        /**< e^x */
cft_array *cft_log(cft_array *x);        /**< natural log */
cft_array *cft_log1p(cft_array *x);      /**< log(1+x), accurate near 0 */
cft_array *cft_expm1(cft_array *x);      /**< e^x - 1, accurate near 0 */
cft_array *cft_sin(cft_array *x);        /**< sine */
cft_array *cft_cos(cft_array *x);        /**< cosine */
cft_array *cft_tan(cft_array *x);        /**< tangent */
cft_array *cft_tanh(cft_array *x);       /**< hyperbolic tangent */
cft_array *cft_logistic(cft_array *x);   /**< 1/(1+e^-x) (sigmoid) */
cft_array *cft_sqrt(cft_array *x);       /**< square root */
cft_array *cft_rsqrt(cft_array *x);      /**< 1/sqrt(x) */
cft_array *cft_abs(cft_array *x);        /**< |x| (any numeric dtype) */
cft_array *cft_sign(cft_array *x);       /**< -1, 0 or 1 (any numeric dtype) */
cft_array *cft_floor(cft_array *x);      /**< round down (zero derivative) */
cft_array *cft_ceil(cft_array *x);       /**< round up (zero derivative) */
cft_array *cft_round(cft_array *x);      /**< round half away from zero */
cft_array *cft_erf(cft_array *x);        /**< error function */
cft_array *cft_square(cft_array *x);     /**< x*x (any numeric dtype) */
cft_array *cft_reciprocal(cft_array *x); /**< 1/x */
cft_array *cft_logical_not(cft_array *x); /**< !x, bool -> bool */

/* ---- elementwise binary: broadcasting, promoting ---- */
cft_array *cft_add(cft_array *a, cft_array *b);      /**< a + b */
cft_array *cft_sub(cft_array *a, cft_array *b);      /**< a - b */
cft_array *cft_mul(cft_array *a, cft_array *b);      /**< a * b */
cft_array *cft_div(cft_array *a, cft_array *b);      /**< a / b (C division for ints) */
cft_array *cft_pow(cft_array *a, cft_array *b);      /**< a ^ b (floats) */
cft_array *cft_maximum(cft_array *a, cft_array *b);  /**< elementwise max; ties split the gradient */
cft_array *cft_minimum(cft_array *a, cft_array *b);  /**< elementwise min */
cft_array *cft_atan2(cft_array *a, cft_array *b);    /**< atan2(a, b) (floats) */
cft_array *cft_eq(cft_array *a, cft_array *b);       /**< a == b -> bool */
cft_array *cft_ne(cft_array *a, cft_array *b);       /**< a != b -> bool */
cft_array *cft_lt(cft_array *a, cft_array *b);       /**< a < b -> bool */
cft_array *cft_le(cft_array *a, cft_array *b);       /**< a <= b -> bool */
cft_array *cft_gt(cft_array *a, cft_array *b);       /**< a > b -> bool */
cft_array *cft_ge(cft_array *a, cft_array *b);       /**< a >= b -> bool */
cft_array *cft_logical_and(cft_array *a, cft_array *b); /**< bool and */
cft_array *cft_logical_or(cft_array *a, cft_array *b);  /**< bool or */
/** a + s, a * s with a scalar s of a's dtype. */
cft_array *cft_add_s(cft_array *a, double s);
cft_array *cft_mul_s(cft_array *a, double s);
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

/* ---- reductions (axes NULL/naxes 0: all axes) ---- */
cft_array *cft_sum(cft_array *x, const int *axes, int naxes, bool keepdims);  /**< sum */
cft_array *cft_prod(cft_array *x, const int *axes, int naxes, bool keepdims); /**< product */
cft_array *cft_max(cft_array *x, const int *axes, int naxes, bool keepdims);  /**< max */
cft_array *cft_min(cft_array *x, const int *axes, int naxes, bool keepdims);  /**< min */
cft_array *cft_mean(cft_array *x, const int *axes, int naxes, bool keepdims); /**< mean */
/** Variance with `ddof` delta degrees of freedom. */
cft_array *cft_var(cft_array *x, const int *axes, int naxes, int ddof, bool keepdims);
/** Index (i32) of the first max / min along `axis`. */
cft_array *cft_argmax(cft_array *x, int axis, bool keepdims);
cft_array *cft_argmin(cft_array *x, int axis, bool keepdims);

/* ---- contractions ---- */
/** General dot product (jax.lax.dot_general): contract lhs dims lc[i] with
 *  rhs dims rc[i], batch over lb[i] / rb[i]. Output dims: batch, lhs free,
 *  rhs free. Float GEMM work goes to OpenBLAS. */
cft_array *cft_dot_general(cft_array *a, cft_array *b, const int *lc, const int *rc, int nc,
                           const int *lb, const int *rb, int nb);
/** NumPy matmul: 1-d and n-d operands, broadcast batch dims. */
cft_array *cft_matmul(cft_array *a, cft_array *b);

/* ---- nn composites (plain C over the primitives) ---- */
cft_array *cft_relu(cft_array *x);                  /**< max(x, 0) */
/** GELU: exact (erf) or the tanh approximation. */
cft_array *cft_gelu(cft_array *x, bool approximate);
cft_array *cft_softmax(cft_array *x, int axis);     /**< stable softmax */
cft_array *cft_log_softmax(cft_array *x, int axis); /**< stable log-softmax */
/** log(sum(exp(x))) over axes, stable. */
cft_array *cft_logsumexp(cft_array *x, const int *axes, int naxes, bool keepdims);
/** One-hot encoding of integer labels: shape labels.shape + [n], dtype. */
cft_array *cft_one_hot(cft_array *labels, int64_t n, cft_dtype dtype);
/** Softmax cross-entropy of logits [..., C] with integer labels [...]:
 *  per-example losses of shape [...]. */
cft_array *cft_cross_entropy(cft_array *logits, cft_array *labels);
/** Mean squared error, a scalar. */
cft_array *cft_mse(cft_array *pred, cft_array *target);

#ifdef __cplusplus
}
#endif
#endif
