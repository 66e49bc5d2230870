/* Internal: what the int8 products share (qlinear.c, qstatic.c): packed s8
 * weights (four to an i32 word, byte b of word j is column 4j + b) and
 * the integer GEMM. */
#ifndef CFT_QLINEAR_H
#define CFT_QLINEAR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "array/array.h"
#include "prims/qepi.h"
#include "trace/prim.h"

/* the longest reduction of u8 by s8 products whose int32 sum cannot
 * overflow (|acc| <= K * 255 * 128): static int8 products and
 * convolutions take K up to this */
#define CFT_QMAX_K (INT64_C(2147483647) / (255 * 128))

/* the words of a row of K values */
static inline int64_t cft__qwords(int64_t k) {
    return (k + 3) / 4;
}
static inline bool cft__qreal_float(cft_dtype dt) {
    return dt == CFT_F32 || dt == CFT_F64;
}

/* words [..., N, KW] and scale [..., N] agree, and K (a param) fits KW;
 * else an error naming op */
cft_array *cft__qcheck_packed(const char *op, const cft_aval *q, const cft_aval *s, int64_t k);

/* the weight the words stand for: q * scale[n], [..., N, K] (qlinear_unpack) */
cft_array *cft__qunpack(cft_array *q, cft_array *s, int64_t k);

/* acc [M, N] = (xq - ao) [M, K] times wq^T, in int32: oneDNN's u8s8s32 GEMM
 * (a C loop without oneDNN); wq rows ldw bytes apart. Without VNNI, oneDNN
 * adds pairs of u8 * s8 products in 16 bits, which saturate unless xq is
 * below 128: cft__qgemm_exact_u8 says whether all of u8 is exact here
 * (VNNI, AMX, or the C loop). */
void cft__qgemm(int64_t M, int64_t N, int64_t K, const uint8_t *xq, int32_t ao, const int8_t *wq,
                int64_t ldw, int32_t *acc);
bool cft__qgemm_exact_u8(void);
/* Whether cft__qgemm may send products of few outputs to oneDNN's matmul
 * primitive (qmatmul_dnnl.c) before its GEMM call: true unless a test
 * turns it off to compare the two */
extern _Atomic bool cft__qmatmul_dnnl_on;
/* the most outputs cft__qgemm sends to oneDNN's matmul primitive */
#define CFT_QMATMUL_MAX_N 64
/* the same integers through an f32 GEMM (qkernels.c), exact while sums
 * stay below 2^24: where cft__qgemm would saturate. False when out of
 * memory. */
bool cft__qgemm_f32(int64_t M, int64_t N, int64_t K, const uint8_t *xq, int32_t ao,
                    const int8_t *wq, int64_t ldw, int32_t *acc);
/* acc by whichever of the two is exact for activations up to xhi:
 * cft__qgemm where it cannot saturate (xhi below 128, or VNNI / AMX),
 * else cft__qgemm_f32. False when out of memory. */
bool cft__qgemm_exact(int64_t M, int64_t N, int64_t K, const uint8_t *xq, int32_t ao,
                      const int8_t *wq, int64_t ldw, int32_t *acc, double xhi);

/* Whether conv_qstatic / conv_qint may run on a convolution kernel
 * (qconv.c: oneDNN's int8 convolution, or where that would saturate the
 * f32 convolution of the integers) rather than the window gather on the
 * integer GEMM, which gives the same integers; true unless a test turns
 * it off to compare the two */
extern _Atomic bool cft__qconv_dnnl_on;
/* How many of those convolutions oneDNN's int8 kernel, the f32
 * convolution, and the direct kernel of few channels at stride 1
 * (qconv_direct.c) have computed (for the tests) */
extern _Atomic long cft__qconv_dnnl_runs, cft__qconv_f32_runs, cft__qconv_direct_runs;

/* dynamic quantization's rows (qdyn_rows.c): each row m of x [M, K] (f64
 * when dbl, else f32) rounded to 7 bits, xq = round(x * 63 / max|x|) +
 * 64 in [1, 127], xs[m] = max|x| / 63 (1 for a row of zeros or with an
 * infinity); rows shared among threads */
void cft__qdyn_rows(const void *x, bool dbl, int64_t M, int64_t K, uint8_t *xq, double *xs);

/* y [M, N] (f64 when dbl, else f32) = xs[m] sc[n] acc[m, n], rows shared
 * among threads */
void cft__qscale_rows(const int32_t *acc, const double *xs, const double *sc, void *y, int64_t M,
                      int64_t N, bool dbl);
/* the same for rows [lo, hi) on the calling thread */
void cft__qscale_range(const int32_t *acc, const double *xs, const double *sc, void *y, int64_t N,
                       bool dbl, int64_t lo, int64_t hi);

/* x [..., K] times W [N, K]^T as cft_quant_convert's int8 product
 * (qstatic.c): W quantized with per-row scales ws [N] to [wlo, whi]
 * (symmetric), x with the scalar scale xs and zero point zp to [xlo, xhi] */
cft_array *cft__qstatic_linear(cft_array *x, cft_array *w, cft_array *ws, int64_t wlo, int64_t whi,
                               cft_array *xs, cft_array *zp, int64_t xlo, int64_t xhi);
/* per-thread scratch of at least n bytes in slot (core/mem.h's
 * CFT_SCRATCH_Q*), kept between calls: fresh blocks of a few hundred KB
 * cost more in page faults than the int8 work done in them */
void *cft__qscratch(int slot, size_t n);

/* an int8 product's (x, words, wscale) made contiguous into xqs, its
 * output aval by prim's shape rule, and the activation's scale and zero
 * point checked (cft__qact) */
cft_array *cft__qoperands(const struct cft_prim *prim, cft_array *const *in, const cft_params *p,
                          double lo, double hi, cft_array **xqs, cft_aval *oa, double *xs,
                          double *zp);
/* the activation's scale and zero point (scalars) of op: *xs positive and
 * finite, *zp an integer in [lo, hi]; else an error naming op */
cft_array *cft__qact(const char *op, const cft_array *xs_a, const cft_array *zp_a, double lo,
                     double hi, double *xs, double *zp);
/* rows of k values of x (f32, or f64 when dbl) to u8: clamp(round(x / xs)
 * + zp, lo, hi), half to even, the division in x's dtype; where grid, x is
 * on the activation's grid already (xs and zp applied by the kernel that
 * wrote it) and is only rounded and clamped. nan[r] notes a row holding a
 * NaN. Rows shared among threads. */
void cft__qrows(const void *x, bool dbl, int64_t rows, int64_t k, double xs, double zp, double lo,
                double hi, bool grid, uint8_t *xq, uint8_t *nan);
/* the same for rows [r0, r1) on the calling thread */
void cft__qrows_range(const void *x, bool dbl, int64_t k, double xs, double zp, double lo,
                      double hi, bool grid, uint8_t *xq, uint8_t *nan, int64_t r0, int64_t r1);

/* the primitives of qstatic.c, bound (for the above, and tests):
 * dot_qstatic, or dot_qint where grid (x on the activation's grid:
 * clamp(round(x / xs) + zp, xlo, xhi) computed by the kernel before it),
 * or dot_qwords where x is i32 (x's u8 grid values four to a word, as
 * conv_qact packs them, read as they are) */
cft_array *cft__qdot_bind(cft_array *x, cft_array *words, cft_array *ws, cft_array *xs,
                          cft_array *zp, int64_t k, int64_t xlo, int64_t xhi, bool grid);
cft_array *cft__qstatic_quantize(cft_array *w, cft_array *ws, int64_t lo, int64_t hi);

/* the jit's requantisation rewrite of dot_qstatic and conv_qstatic: the
 * var whose value an elementwise equation computes, x itself or the input
 * of the reshape that makes x; -1 when x comes from elsewhere */
struct cft_eqn;
int cft__qgrid_source(const struct cft_eqn *q, const cft_rewrite_ctx *c);
/* x's place on the activation's grid, in ops: *q = clamp(round(x / xs)
 * + zp, lo, hi) (grid: clamp(round(x), lo, hi), x being on it already)
 * and *inside, where the unclamped value lies in [lo, hi] (x's dtype,
 * 0 / 1), the straight-through estimator's mask; either may be NULL. xs
 * and zp broadcast against x. */
void cft__qgrid_of(cft_array *x, cft_array *xs, cft_array *zp, bool grid, int64_t lo, int64_t hi,
                   cft_array **q, cft_array **inside);

/* The params of an int8 convolution (conv_qstatic, conv_qint, conv_qact)
 * into p: the geometry as conv_general_dilated's (lhs dilation 1), the
 * nranges ranges, the weight's shape [O, wshape...]; an error naming
 * `name` where nsp is not 1 to 3, else NULL */
cft_array *cft__qconv_params(const char *name, cft_params *p, const int64_t *ranges, int nranges,
                             const int64_t *wshape, int nsp, const int64_t *strides,
                             const int64_t *padding, const int64_t *rhs_dilation);
/* conv_qstatic (conv_qint where grid: x on the activation's grid) bound
 * on words (qlinear_quantize's, of W's rows flattened) for a weight of
 * shape [O, wshape...] with nsp spatial dims */
cft_array *cft__qconv_bind(cft_array *x, cft_array *words, cft_array *ws, cft_array *xs,
                           cft_array *zp, int64_t xlo, int64_t xhi, const int64_t *wshape, int nsp,
                           const int64_t *strides, const int64_t *padding,
                           const int64_t *rhs_dilation, bool grid);
/* Whether conv_qstatic takes primitive p with these params and operand
 * avals: conv_general_dilated of f32 operands, one group of each kind, no
 * lhs dilation, concrete weight dims, taps within int32 sums. */
bool cft__qconv_fits(const struct cft_prim *p, const cft_params *par, const cft_aval *x,
                     const cft_aval *w);
/* conv_general_dilated(x, W) with its params `conv` (cft__qconv_fits) as
 * cft_quant_convert's int8 convolution: W [O, C, k...] quantized with
 * per-output-channel scales ws [O] to [wlo, whi], x with the scalar scale
 * xs and zero point zp to [xlo, xhi] */
cft_array *cft__qstatic_conv(cft_array *x, cft_array *w, cft_array *ws, int64_t wlo, int64_t whi,
                             cft_array *xs, cft_array *zp, int64_t xlo, int64_t xhi,
                             const cft_params *conv);

/* qconv.c's pieces conv_qact (qconv_act.c) is made of: the shape rule of
 * conv_qstatic / conv_qint (errors naming op); their kernels (x on the
 * grid where grid) with the epilogue ep on each f32 output row (NULL:
 * none), into the contiguous array `into` of y's aval (the jit's arena;
 * NULL: a fresh one); their vmap rule for prim of nin inputs, x the first */
cft_array *cft__qconv_check(const char *op, const cft_aval *in, const cft_params *p, cft_aval *out);
cft_array *cft__qconv_run(bool grid, cft_array *const *in, const cft_params *p, const cft__qepi *ep,
                          cft_array *into, cft_array **out);
cft_array *cft__qconv_vmap(const struct cft_prim *prim, int nin, int64_t size, cft_array *const *x,
                           const int *bdim, const cft_params *p, cft_array **y, int *ybdim);
/* The jit's rewrite of a product whose x is the grid of var src (an
 * elementwise equation's value: cft__qgrid_source): where src is a
 * conv_qstatic or conv_qint, then a bias per output channel, then a ReLU
 * (each optional, each read by the next alone), one conv_qact computing
 * clamp(round(src / xs) + zp, lo, hi) in the convolution's epilogue
 * (qconv_act.c); NULL where the chain is another */
cft_array *cft__qact_grid(const struct cft_rewrite_ctx *c, int src, cft_array *xs, cft_array *zp,
                          int64_t lo, int64_t hi);
/* conv_qact bound on in = (x, words, wscale, xscale, xzp, bias, floor,
 * oscale, ozp) with ranges (xlo, xhi, grid, ylo, yhi, act, packed) and the
 * geometry of cft__qconv_bind (for the tests) */
cft_array *cft__qact_bind(cft_array *const *in, const int64_t *ranges, const int64_t *wshape,
                          int nsp, const int64_t *strides, const int64_t *padding,
                          const int64_t *rhs_dilation);
/* The same chain as cft__qact_grid's, for a product whose x (aval x, f32
 * [N, O * P]) flattens the convolution's output, where the chain ends in
 * a ReLU whose floor is a number: one conv_qact whose output is the grid
 * values as u8, four to an i32 word ([N, ceil(O P / 4)], as
 * qlinear_quantize packs weights), for dot_qwords; NULL otherwise */
cft_array *cft__qact_words(const struct cft_rewrite_ctx *c, int src, cft_array *xs, cft_array *zp,
                           int64_t lo, int64_t hi, const cft_aval *x);
/* the x a conv_qstatic or conv_qint equation q reads once the jit has
 * rewritten it: the grid of an elementwise x (*grid true: conv_qint's),
 * else x's value */
cft_array *cft__qconv_x(const struct cft_eqn *q, const struct cft_rewrite_ctx *c, bool *grid);

#endif
