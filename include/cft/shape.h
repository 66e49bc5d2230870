/** @file
 * cft/shape.h: symbolic dimensions.
 *
 * A dim in an aval is an int64_t: a size (0 <= d < 2^40), or a *symbolic
 * dim*, an expression over named symbols (B, N, B*64, B+1, ...) encoded as
 * a reserved negative value that indexes an interned table, so equal
 * expressions are equal integers and shape rules that compare or copy dims
 * work on them unchanged. Trace a function at avals that contain symbols
 * and the IR serves every size:
 *
 *     int64_t B = cft_dim_sym("B");
 *     cft_aval in[2] = {{CFT_F32, 2, {B, 64}}, {CFT_I32, 1, {B}}};
 *     cft_ir *ir = cft_make_ir(per_sample_grad, in);   // f32[B,64] ... in the text
 *     cft_ir_eval(ir, inputs, outputs);                // binds B from the inputs
 *
 * Expressions are polynomials with integer coefficients (sums, products,
 * exact division). Shape rules combine dims with the functions below; an
 * operation that cannot be expressed on a symbol (a convolution over a
 * symbolic spatial size, a jacobian of a symbolic number of elements) is an
 * error naming the symbol. cft_jit makes dims symbolic on its own when a
 * later call changes them (see jit.h). Never do C arithmetic on a dim that
 * may be symbolic: use cft_dim_add/mul/... */
#ifndef CFT_SHAPE_H
#define CFT_SHAPE_H

/** @addtogroup arrays
 *  @{ */

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The value every dim function returns for a result it cannot express
 *  (not a dim: cft_dim_valid is false). */
#define CFT_DIM_INVALID INT64_MIN
/** Concrete dims are below this bound. */
#define CFT_DIM_MAX_CONCRETE (INT64_C(1) << 40)

/** The symbolic dim named `name` (letters, digits and '_', not starting with
 *  a digit, at most 31 characters). The same name gives the same value.
 *  CFT_DIM_INVALID (and cft_last_error set) for a bad name. */
int64_t cft_dim_sym(const char *name);
/** True if d is a symbolic dim (an expression with at least one symbol). */
bool cft_dim_is_symbolic(int64_t d);
/** True if d is a dim: a size in [0, 2^40) or a symbolic expression. */
bool cft_dim_valid(int64_t d);
/** True if some dim of the aval is symbolic. */
bool cft_aval_is_symbolic(const cft_aval *a);
/** @{ */
/** a + b, a - b, a * b as dims (concrete when both are); CFT_DIM_INVALID
 *  if an operand is invalid or the result is too large to express. */
int64_t cft_dim_add(int64_t a, int64_t b);
int64_t cft_dim_sub(int64_t a, int64_t b);
int64_t cft_dim_mul(int64_t a, int64_t b);
/** @} */
/** a / b when b divides a exactly (as polynomials: (B*64)/64 = B,
 *  (B*N)/N = N); CFT_DIM_INVALID otherwise. */
int64_t cft_dim_div(int64_t a, int64_t b);
/** The text of a dim ("64", "B", "B*64+1") into buf (n bytes); returns buf. */
const char *cft_dim_str(int64_t d, char *buf, size_t n);
/** The value of a dim as a scalar array of `dtype`: a constant for a size;
 *  for a symbolic dim, inside a trace, a value computed when the traced
 *  function runs (jnp.array(x.shape[0]) in JAX), e.g. to divide a sum by a
 *  symbolic batch size. Error array for an invalid dim. */
cft_array *cft_dim_value(int64_t d, cft_dtype dtype);
/** The value of d when the symbols names[0..n) have values[0..n);
 *  CFT_DIM_INVALID if d uses a symbol not listed. */
int64_t cft_dim_eval(int64_t d, int n, const char *const *names, const int64_t *values);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
