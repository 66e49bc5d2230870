/** @file
 * cft/complex.h: complex numbers (dtypes c64 and c128).
 *
 * Complex arrays hold C99 float _Complex / double _Complex elements. The
 * elementwise ops of ops.h accept them where the math is defined for complex
 * numbers (add, sub, mul, div, neg, square, reciprocal, exp, log, log1p,
 * expm1, sqrt, rsqrt, sin, cos, tan, tanh, logistic, pow, eq, ne, where, sum,
 * dot/matmul/einsum); abs of a complex array is real.
 *
 * Derivatives follow JAX's convention. Tangents of complex values are
 * complex; transposes never conjugate (the transpose of t -> a*t is
 * c -> a*c). So cft_grad of a real-valued f(z) returns conj(df/dz*) * 2 in
 * Wirtinger terms, i.e. the conjugate of the steepest-ascent direction: for
 * f(z) = |z|^2 it returns 2 conj(z). Gradient descent therefore steps by
 * conj(grad). cft_grad needs a real output and cft_jacrev/cft_jacfwd real
 * inputs unless asked to be holomorphic (the CFT_HOLOMORPHIC flag of
 * cft_grad_ex, cft_jacrev_ex and cft_jacfwd_ex in fn.h): then, for a
 * holomorphic f, they return f'(z) and the complex Jacobian.
 */
#ifndef CFT_COMPLEX_H
#define CFT_COMPLEX_H

/** @addtogroup arrays
 *  @{ */

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A complex scalar re + i im of dtype c64 or c128. */
cft_array *cft_scalar_complex(double re, double im, cft_dtype dtype);
/** An array full of re + i im, of dtype c64 or c128. */
cft_array *cft_full_complex(double re, double im, cft_dtype dtype, const int64_t *shape, int ndim);
/** Element i (row-major) of x as a complex number; real arrays give im = 0.
 *  Returns a status (an error for error arrays, tracers, or i out of
 *  range). */
cft_status cft_item_complex_at(const cft_array *x, int64_t i, double *re, double *im);

/** re + i im: two real arrays (broadcast, promoted; f64 gives c128, other
 *  dtypes c64). */
cft_array *cft_complex(cft_array *re, cft_array *im);
/** Real part (a real array; real inputs are returned as they are). */
cft_array *cft_real(cft_array *x);
/** Imaginary part (a real array; zeros for real inputs). */
cft_array *cft_imag(cft_array *x);
/** Complex conjugate. On a concrete complex array an O(1) view: a flag that
 *  the consumers resolve (a GEMM reads it as its conjugate-transpose
 *  flag); real inputs are returned as they are. */
cft_array *cft_conj(cft_array *x);
/** Argument atan2(imag, real), in (-pi, pi]; 0 or pi for real inputs. */
cft_array *cft_angle(cft_array *x);
/** True when x is a concrete array whose conjugation is pending (a view made
 *  by cft_conj). */
bool cft_is_conj(const cft_array *x);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
