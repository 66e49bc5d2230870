/* Internal helpers shared by the primitive files: NULL-aware tangent
 * arithmetic (NULL is a symbolic zero), batching helpers, axis checks, the
 * elementwise family's generic shape/vmap rules, and the internal binders of
 * primitives that have no public op of the same form. */
#ifndef CFT_RULES_H
#define CFT_RULES_H

#include "array/dim.h"
#include "cft/cft.h"
#include "core/error.h"
#include "core/mem.h"
#include "trace/trace.h"

/* tangents: NULL = zero */
cft_array *cft__tadd(cft_array *a, cft_array *b);
cft_array *cft__tsub(cft_array *a, cft_array *b);
cft_array *cft__tneg(cft_array *a);
cft_array *cft__tmul(cft_array *t, cft_array *y); /* t*y, NULL if t is */
cft_array *cft__tdiv(cft_array *t, cft_array *y); /* t/y, NULL if t is */
cft_array *cft__zeros_aval(const cft_aval *a);
cft_array *cft__inst(cft_array *t, const cft_aval *a); /* zeros if NULL */

/* batching */
cft_array *cft__moveaxis_b(cft_array *x, int from, int to); /* x if from == to */
/* make x batched at position `to`: move its bdim there, or broadcast a
 * new axis of `size` there if not batched */
cft_array *cft__batch_at(cft_array *x, int bdim, int64_t size, int to);
/* true for a dot_general that is a plain a [M, K] @ b [K, N] (dynamic
 * quantization rewrites those) */
bool cft__is_matmul(const cft_prim *p, const cft_params *par, const cft_aval *a, const cft_aval *b);
/* dot_general with nothing to sum (outer products) as one elementwise
 * kernel on a device that runs kernels (dot_device.c: the prim's
 * dev_kernel), and its CUDA C for test_cuda_plugin's NVRTC check */
bool cft__dot_dev_kernel(cft_array *const *in, int nin, const cft_params *p, cft_array *const *out,
                         cft_dev_kernel *k);
const char *cft__dot_kernel_source(void);
/* the 2:4 primitives' device kernels (sparse24_device.c: dot_sparse24,
 * sparse24_gather, sparse24_densify and sparse24_meta in f32 / f64), and
 * their CUDA C for test_cuda_plugin's NVRTC check */
bool cft__s24dot_dev_kernel(cft_array *const *in, int nin, const cft_params *p,
                            cft_array *const *out, cft_dev_kernel *k);
bool cft__s24gather_dev_kernel(cft_array *const *in, int nin, const cft_params *p,
                               cft_array *const *out, cft_dev_kernel *k);
bool cft__s24densify_dev_kernel(cft_array *const *in, int nin, const cft_params *p,
                                cft_array *const *out, cft_dev_kernel *k);
bool cft__s24meta_dev_kernel(cft_array *const *in, int nin, const cft_params *p,
                             cft_array *const *out, cft_dev_kernel *k);
const char *cft__sparse24_kernel_source(void);
/* i32 words of 2:4 metadata for a row of k values (8 groups of 4 a word) */
int64_t cft__s24_meta_words(int64_t k);
/* dot_general of concrete a and b on oneDNN's matmul (matmul_dnnl.c) in
 * dtype code (0 f32, 1 bf16, 2 f16; a's and b's dtype): the operands copied
 * to [batch, M, K] and [batch, K, N] where they are not already so. NULL
 * (not an error) where oneDNN declines, or each matrix product (M N K)
 * has fewer than min_work multiply-adds. dot_general's rule for bf16 / f16 operands; the
 * tests call it with f32. */
cft_array *cft__dot_dnnl(cft_array *a, cft_array *b, const cft_params *p, int code,
                         double min_work);
/* x [..., K] as a matrix [rows, K], rows the product of the leading dims
 * (x itself when 2-d): how row-wise products (2:4, int8) take any leading
 * dims, and how their vmap rules fold a batch into the rows */
cft_array *cft__as_rows(cft_array *x);
/* y [rows, N] back to the leading dims of `like` (x's aval): [..., N] */
cft_array *cft__from_rows(cft_array *y, const cft_aval *like);
/* aval with one axis removed / inserted */
cft_aval cft__aval_drop(const cft_aval *a, int axis);

/* elementwise family */
cft_array *cft__ew_shape(const char *name, const cft_aval *in, int nin, cft_aval *out);
cft_array *cft__ew_vmap(const cft_prim *p, int64_t size, cft_array *const *x, const int *bdim,
                        int nin, const cft_params *par, cft_array **y, int *ybdim);
/* the dtype classes an elementwise op accepts */
enum {
    CFT_DT_FLOAT = 1,
    CFT_DT_INT = 2,
    CFT_DT_BOOL = 4,
    CFT_DT_NUM = 3,
    CFT_DT_ANY = 7, /* every real dtype */
    CFT_DT_COMPLEX = 8,
    CFT_DT_INEXACT = 9, /* float and complex */
};
/* unary.def rows only, in the flags column: the output is bool (is_finite);
 * masked out of the record's flags */
#define CFT_EW_BOOL_OUT (1u << 30)
bool cft__dtype_in(cft_dtype dt, int cls);

/* broadcast n operands (2 or 3) to their common shape in place; NULL on
 * success, else an error naming `op` */
cft_array *cft__broadcast_all(const char *op, cft_array **xs, int n);
/* unary.c's public op of the abs row, for real arrays (cft_abs, in
 * complex.c, takes complex ones to the cabs primitive) */
cft_array *cft__abs_real(cft_array *x);

/* The impl of a one-output primitive with an impl_into: its shape rule on
 * the inputs' avals, a fresh output, then impl_into writes it. */
cft_array *cft__impl_by_into(const cft_prim *p, cft_array *const *in, int nin,
                             const cft_params *par, cft_array **out);
/* impl_into with half operands or output (half_into.c): p's impl_into on
 * the float operands widened to f32 in per-thread scratch, the f32 result
 * rounded once into out (contiguous); the eager widening path's
 * arithmetic without its allocations */
cft_array *cft__into_widened(const cft_prim *p, cft_array *const *in, int nin,
                             const cft_params *par, cft_array *out);
/* the same with its result left widened: out is an f32 array (contiguous)
 * that receives the f32 result, each value rounded to the half dtype's
 * values (the jit's fold of a half output's convert back to f32) */
cft_array *cft__into_widened_wide(const cft_prim *p, cft_array *const *in, int nin,
                                  const cft_params *par, cft_dtype half, cft_array *out);

/* internal binders (strict: no broadcasting or promotion) */
cft_array *cft__reduce_sum(cft_array *x, const int *axes, int naxes);
cft_array *cft__reduce_max(cft_array *x, const int *axes, int naxes);
cft_array *cft__select(cft_array *c, cft_array *a, cft_array *b);
cft_array *cft__convert(cft_array *x, cft_dtype dt);
cft_array *cft__reshape(cft_array *x, const int64_t *shape, int ndim);
/* x rounded half to even (IEEE's default; cft_round rounds half away), as
 * quantization rounds (qlinear.c) */
cft_array *cft__round_half_even(cft_array *x);

/* primitive records used by other prim files */
extern const cft_prim cft_p_select, cft_p_convert_element_type, cft_p_reduce_sum, cft_p_reduce_max,
    cft_p_reshape, cft_p_broadcast_in_dim, cft_p_transpose, cft_p_pad, cft_p_slice,
    cft_p_dot_general, cft_p_squeeze, cft_p_expand_dims, cft_p_concatenate, cft_p_iota,
    cft_p_stop_gradient, cft_p_reduce_min, cft_p_reduce_prod, cft_p_argmax, cft_p_argmin, cft_p_mul,
    cft_p_add, cft_p_random_uniform, cft_p_random_split, cft_p_random_fold_in;
extern const cft_prim cft_p_gather, cft_p_scatter, cft_p_scatter_add, cft_p_dynamic_slice,
    cft_p_dynamic_update_slice; /* index.c */

/* scans, sorting and the elementwise ops off the rows (scan.c, sort.c,
 * ew_extra.c) */
extern const cft_prim cft_p_cumsum, cft_p_cumprod, cft_p_cummax, cft_p_cummin, cft_p_cumlogsumexp,
    cft_p_sort, cft_p_top_k, cft_p_gather_along, cft_p_scatter_add_along, cft_p_clamp,
    cft_p_integer_pow;
/* The element offsets (from `strides`) of the first element of each line
 * along `axis` of an array of aval `a`, the lines in row-major order of the
 * other dims; *count gets their number. A GC buffer (never NULL unless out
 * of memory). */
int64_t *cft__line_offsets(const cft_aval *a, const int64_t *strides, int axis, int64_t *count);

/* conv.c, window.c */
extern const cft_prim cft_p_conv_general_dilated, cft_p_rev, cft_p_reduce_window_sum,
    cft_p_reduce_window_max, cft_p_select_and_gather_add, cft_p_select_and_scatter_add;

extern const cft_prim cft_p_scan, cft_p_while, cft_p_cond, cft_p_remat;

/* special.c: tangents of the special-function rows (NULL = zero) */
cft_array *cft__i1_deriv(cft_array *x, cft_array *y, bool scaled); /* d i1 (d i1e) / dx */
cft_array *cft__j1_deriv(cft_array *x, cft_array *y);              /* d bessel_j1 / dx */
cft_array *cft__zeta_tangent(cft_array *s, cft_array *q, cft_array *ts, cft_array *tq);
cft_array *cft__polygamma_tangent(cft_array *n, cft_array *x, cft_array *tn, cft_array *tx);
cft_array *cft__gammainc_tangent(cft_array *a, cft_array *x, cft_array *ta, cft_array *tx,
                                 bool upper);

/* the value of a dim as a scalar of dtype dt: a constant, or for a symbolic
 * dim a staged computation of it (a sum of ones) */
cft_array *cft__dim_value(int64_t d, cft_dtype dt);

/* format an aval into a static per-call buffer slot (up to 4 per message) */
const char *cft__av(const cft_aval *a);

#endif
