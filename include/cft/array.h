/** @file
 * cft/array.h: creating, inspecting and printing arrays.
 *
 * Arrays are immutable once made. Views (reshape of contiguous data,
 * transpose, broadcast, slice, squeeze, expand_dims) share the buffer and
 * cost O(1). Creation copies the caller's data, so the caller's buffer may be
 * reused at once.
 */
#ifndef CFT_ARRAY_H
#define CFT_ARRAY_H

/** @addtogroup arrays
 *  @{ */

#include <stdio.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A new array of `dtype` and `shape` (ndim dims) holding a copy of `data`
 *  (row-major, ndim==0 for a scalar). */
cft_array *cft_from_data(const void *data, cft_dtype dtype, const int64_t *shape, int ndim);
/** Convenience: a copy of `n` floats as an f32 vector / matrix. */
cft_array *cft_from_f32(const float *data, const int64_t *shape, int ndim);
/** Convenience: a copy of f64 data. */
cft_array *cft_from_f64(const double *data, const int64_t *shape, int ndim);
/** Convenience: a copy of i32 data. */
cft_array *cft_from_i32(const int32_t *data, const int64_t *shape, int ndim);
/** An array filled with `value` (converted to dtype). */
cft_array *cft_full(double value, cft_dtype dtype, const int64_t *shape, int ndim);
/** Zeros of the given dtype and shape. */
cft_array *cft_zeros(cft_dtype dtype, const int64_t *shape, int ndim);
/** Ones of the given dtype and shape. */
cft_array *cft_ones(cft_dtype dtype, const int64_t *shape, int ndim);
/** A 0-d array holding `value`. */
cft_array *cft_scalar(double value, cft_dtype dtype);
/** @{ */
/** Zeros / ones / a constant with the dtype and shape of x (traced under
 *  transforms only through x's aval, never through its values). */
cft_array *cft_zeros_like(cft_array *x);
cft_array *cft_ones_like(cft_array *x);
cft_array *cft_full_like(cft_array *x, double value);
/** @} */
/** [start, start+step, ...) below stop: 1-d. */
cft_array *cft_arange(double start, double stop, double step, cft_dtype dtype);
/** n evenly spaced values from start to stop inclusive. */
cft_array *cft_linspace(double start, double stop, int64_t n, cft_dtype dtype);
/** n x n identity. */
cft_array *cft_eye(int64_t n, cft_dtype dtype);

/** dtype of x (CFT_F32 for error arrays). */
cft_dtype cft_array_dtype(const cft_array *x);
/** Number of dimensions. */
int cft_array_ndim(const cft_array *x);
/** Size of dimension `axis` (negative counts from the end); -1 if out of range. */
int64_t cft_array_dim(const cft_array *x, int axis);
/** Pointer to the shape (ndim entries). */
const int64_t *cft_array_shape(const cft_array *x);
/** Number of elements. */
int64_t cft_array_size(const cft_array *x);
/** The abstract value (dtype and shape) of x. */
cft_aval cft_array_aval(const cft_array *x);
/** True for a concrete array (not a tracer, not an error). */
bool cft_is_concrete(const cft_array *x);

/** Copy the elements of a concrete array, row-major, converted to `dtype`,
 *  into `out` (room for cft_array_size(x) elements). Returns a status. */
cft_status cft_copy_to(const cft_array *x, cft_dtype dtype, void *out);
/** Element at flat row-major index i, as a double (NaN on error, with
 *  cft_last_error set). Reading a traced array's value (inside a transform,
 *  cft_jit or a staged call) is an error that also fails the traced call,
 *  as JAX's ConcretizationTypeError: choose with cft_where / cft_cond. */
double cft_item_at(const cft_array *x, int64_t i);
/** The single element of a size-1 array, as a double (NaN on error, as
 *  cft_item_at). */
double cft_item(const cft_array *x);

/** Print x NumPy-style ("array([[1., 2.], ...], dtype=f32)") to `f`. A traced
 *  array's values are unknown: it prints its aval and, as cft_item, fails
 *  the traced call (print its shape with cft_aval_str instead). */
void cft_print(const cft_array *x, FILE *f);
/** Print "label: values" of x when the computation runs, also inside
 *  traced and jitted functions (jax.debug.print): under jit on every call,
 *  under vmap the whole batch, under grad/jvp the primal. Returns x (use
 *  it or not: the print is kept either way). Output to stderr, or the
 *  stream set by cft_debug_set_stream. */
cft_array *cft_debug_print(const char *label, cft_array *x);
/** Where cft_debug_print writes (NULL: stderr). */
void cft_debug_set_stream(FILE *f);
/** Print with a label: "name = array(...)". */
void cft_print_named(const char *name, const cft_array *x, FILE *f);
/** The aval as text, e.g. "f32[3,4]"; `buf` must hold 96 bytes. */
const char *cft_aval_str(const cft_aval *a, char *buf);

/** True when a and b have the same shape and |a-b| <= atol + rtol*|b|
 *  elementwise (NaNs equal only with equal_nan). False on error. */
bool cft_allclose(const cft_array *a, const cft_array *b, double rtol, double atol, bool equal_nan);
/** max |a-b| over elements (Inf if shapes differ or on error). */
double cft_max_abs_diff(const cft_array *a, const cft_array *b);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
