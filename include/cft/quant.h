/** @file
 * cft/quant.h: quantization as a transform (FX graph mode / PT2E's
 * prepare, calibrate, convert; quantization-aware training).
 *
 * A quantizer (plain data, cft_quantizer_x86 gives PT2E's X86 defaults)
 * names the primitives whose operands are quantized, which operand is the
 * weight and its channel axis, and how activations and weights are
 * quantized (bits, affine or symmetric, per tensor or per channel, which
 * observer). cft_quant_prepare(f, quantizer) makes a record whose
 * functions are f with every such operand ("site", numbered in the order
 * f binds them) handled:
 *
 *     cft_quant *q = cft_quant_prepare(loss_or_logits, &qz);
 *     cft_fn *obs = cft_quant_observer_fn(q);   // calibrate: call it on data
 *     ... cft_fn_call(obs, batch, out) for some batches ...
 *     cft_fn *int8 = cft_quant_convert(q);      // int8 products
 *     cft_export(int8, avals, "model.cftx");    // registry primitives: cft-run runs it
 *
 * Observers (min-max, moving-average min-max, percentile of a histogram)
 * read concrete values, so they record when the function runs eagerly
 * (also under grad and vmap, which see every example's values); under
 * cft_jit they are traced once and record nothing. cft_quant_qat_fn is
 * quantization-aware training: every site fake-quantized with the
 * straight-through estimator (cft_fake_quantize) using the observers'
 * current ranges, which it keeps updating when run eagerly; it composes
 * with grad, vmap and jit. Under vmap over a batch of samples the batch
 * shares each site's observer (its range is the batch's); an ensemble of
 * QAT models, whose members need ranges of their own, is prepared with
 * cft_quant_prepare_ensemble: its functions take the member index first,
 * and vmapped over a vector of indices each member reads and updates its
 * own observers:
 *
 *     cft_quant *q = cft_quant_prepare_ensemble(logits, &qz, 8);
 *     cft_fn *v = cft_vmap_n(cft_quant_qat_fn(q), axes, n, NULL, 0);
 *     // axes: 0 for the member index (cft_arange(0, 8, 1, CFT_I32)) and
 *     // the stacked weights, CFT_NOT_BATCHED for shared data
 *     cft_fn *int8_3 = cft_quant_convert_member(q, 3); cft_quant_convert freezes the ranges into
 * constants. A plain matrix product x [M, K] @ W [K, N] whose activation is
 * quantized per tensor within u8 and whose weight symmetric within s8
 * (per channel along N, or per tensor), as cft_quantizer_x86's, becomes an
 * int8 product: W rounded to s8 (the jit does it once when W is a
 * constant), x to u8 on the fly, the sums in int32 on oneDNN's integer GEMM
 * (VNNI or AMX where the CPU has them), scaled back to f32. Its result is
 * the fake-quantized f32 program's up to that program's f32 rounding. On a
 * CPU without VNNI, 8-bit activations would saturate that GEMM's 16-bit
 * pair sums: there their integers run on an f32 GEMM (exact below 2^24),
 * and 7-bit activations (activation.bits = 7, torch's reduce_range) keep
 * the integer GEMM. Convolutions (one group, no lhs dilation) become int8
 * convolutions the same way (the weight per channel along O): oneDNN's
 * int8 convolution where its sums cannot saturate (7-bit activations, or
 * VNNI / AMX), else each window a row of the integer GEMM; both give the
 * same integers. Other sites (grouped convolutions,
 * per-channel activations) stay fake-quantized on f32 kernels.
 */
#ifndef CFT_QUANT_H
#define CFT_QUANT_H

/** @addtogroup lowbits
 *  @{ */

#include "core.h"
#include "fn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How an observer turns the values it saw into a range. */
typedef enum cft_observer {
    CFT_OBS_MINMAX = 0,     /**< the smallest and largest value seen (MinMaxObserver) */
    CFT_OBS_MOVING_AVERAGE, /**< min and max averaged over calls (MovingAverageMinMaxObserver) */
    CFT_OBS_PERCENTILE      /**< |x|'s percentile from a histogram: outliers clipped */
} cft_observer;

/** How one kind of operand is quantized. */
typedef struct cft_quant_spec {
    int bits;              /**< 2 to 16; 8 for int8 */
    bool symmetric;        /**< zero point 0, range [-2^(b-1), 2^(b-1)-1]; else affine [0, 2^b-1] */
    bool per_channel;      /**< one scale per channel (weights), else per tensor */
    cft_observer observer; /**< how the range is found */
    double averaging;      /**< CFT_OBS_MOVING_AVERAGE: the new call's weight (0.01) */
    double percentile;     /**< CFT_OBS_PERCENTILE: in (0, 100] (99.99) */
} cft_quant_spec;

/** One primitive whose operands are quantized. */
typedef struct cft_quant_op {
    const char *prim; /**< its name in the IR ("dot_general", "conv_general_dilated") */
    int weight_arg; /**< which operand is the weight (per-channel spec); the others are activations
                     */
    int channel_axis; /**< the weight's channel axis (negative: from the end) */
} cft_quant_op;

/** A quantizer: which primitives, and how (PT2E's Quantizer, as data). */
typedef struct cft_quantizer {
    int nops;                  /**< entries of ops used */
    cft_quant_op ops[8];       /**< the primitives quantized */
    cft_quant_spec activation; /**< their non-weight operands */
    cft_quant_spec weight;     /**< their weight operands */
} cft_quantizer;

/** PT2E's X86 defaults: matrix products (x @ W: W is operand 1, channels
 *  its last dim) and convolutions (W [O, I, ...]: channels dim 0);
 *  activations u8 affine per tensor with a moving-average min-max observer
 *  (a histogram's percentile 99.99 where outliers matter: set it),
 *  weights s8 symmetric per channel with min-max. */
cft_quantizer cft_quantizer_x86(void);

/** x fake-quantized: (clamp(round(x / scale) + zero_point, qmin, qmax) -
 *  zero_point) * scale, rounding half to even (torch's
 *  fake_quantize_per_tensor/channel_affine). scale and zero_point are
 *  scalars, or 1-d along x's `axis` (per channel; axis ignored for
 *  scalars). Its derivative is the straight-through estimator: 1 where
 *  round(x / scale) + zero_point lies in [qmin, qmax], 0 outside; none
 *  for scale and zero_point. CFT_E_ARG for qmin > qmax; a scale that is
 *  not positive makes the results NaN. */
cft_array *cft_fake_quantize(cft_array *x, cft_array *scale, cft_array *zero_point, int axis,
                             int64_t qmin, int64_t qmax);
/** The quantization parameters of a range (torch's _calculate_qparams):
 *  min and max (scalars or 1-d per channel) widened to include 0; scale =
 *  (max - min) / (qmax - qmin) (symmetric: max(|min|, max) / ((qmax -
 *  qmin) / 2)), at least f32's epsilon (as torch) so that it is never 0;
 *  zero_point rounds qmin - min / scale and clamps it into [qmin, qmax]
 *  (symmetric: 0). qmin and qmax (each may be NULL) get the integer range
 *  of spec. */
cft_status cft_quant_qparams(cft_array *min, cft_array *max, const cft_quant_spec *spec,
                             cft_array **scale, cft_array **zero_point, int64_t *qmin,
                             int64_t *qmax);

/** A linear layer's weight in int8 for dynamic quantization (torch's
 *  quantized dynamic Linear): W [N, K] (F.linear's layout: out, in) as s8
 *  values, row n symmetric with scale[n] = max|W[n]| / 127, packed four
 *  to an i32 word (byte b of word j is column 4j + b). */
typedef struct cft_qlinear {
    cft_array *w;     /**< i32 [N, ceil(K/4)]: the packed s8 values */
    cft_array *scale; /**< f32 [N]: row n's scale */
    int64_t k;        /**< K, the reduction dim (the words hold ceil(K/4) * 4 bytes) */
} cft_qlinear;
/** W [..., N, K] (float) packed to int8 (no derivative). On error both
 *  fields are the error. */
cft_qlinear cft_qlinear_pack(cft_array *w);
/** The weight [..., N, K] that q stands for (w times scale, in scale's
 *  dtype). */
cft_array *cft_qlinear_unpack(cft_qlinear q);
/** x [..., K] (f32 or f64; other floats as f32) times the int8 weight's
 *  transpose: [..., N]. Each row of x is quantized on the fly, symmetric
 *  in [-63, 63] (per token, so rows are independent: vmap and batching
 *  give the loop's result; 7 bits as torch's reduce_range, so that CPUs
 *  without VNNI cannot saturate), multiplied in int32 on oneDNN's integer
 *  GEMM (VNNI, AMX-INT8, AVX2: what the CPU has) and scaled back. Its jvp is
 *  the straight-through estimator: the derivative of x times the unpacked
 *  weight, as if x were not rounded. */
cft_array *cft_qlinear_apply(cft_array *x, cft_qlinear q);
/** Dynamic quantization of f (quantize_dynamic): every matrix product of
 *  f of the form x [M, K] @ W [K, N] (f32, x a value, W a weight) becomes
 *  cft_qlinear_apply(x, cft_qlinear_pack(W^T)); other operations are
 *  untouched. When W is a constant of f (weights closed over), the packing
 *  runs once, when f is traced; when it is an input, on every call. For
 *  inference, as torch's: no gradient reaches W through the packing;
 *  gradients with respect to x are the straight-through estimator. */
cft_fn *cft_quant_dynamic(cft_fn *f);

/** A function being quantized: f, its quantizer and each site's observer
 *  state. Opaque, GC-managed; its functions may be called from many
 *  threads (observers update under a lock). */
typedef struct cft_quant cft_quant;

/** The most members an ensemble record may have. */
#define CFT_QUANT_MAX_MEMBERS 65536

/** Prepare f for quantization (copies the quantizer). NULL only when out
 *  of memory: a bad quantizer (no ops, bits outside 2..16, a moving-average
 *  weight outside (0, 1], a percentile outside (0, 100]) or an error
 *  function gives a record whose functions fail with CFT_E_ARG naming the
 *  call. */
cft_quant *cft_quant_prepare(cft_fn *f, const cft_quantizer *qz);
/** Prepare an ensemble of `members` copies of f for quantization, each
 *  with observers of its own (torch: one prepared model per member). The
 *  record's observer and QAT functions take one more input, first: the
 *  member index, an integer scalar in [0, members), then f's inputs. Called
 *  with one index, they are member m's model; vmapped with the index
 *  batched (a vector of indices along the batch, with the members' stacked
 *  weights), each member's values update and are quantized by its own
 *  observers, as a loop over the members would (the same ranges, the same
 *  results); a batch of samples inside a member shares that member's
 *  observers. Convert one member with cft_quant_convert_member. members
 *  outside 1..CFT_QUANT_MAX_MEMBERS gives a record whose functions fail
 *  with CFT_E_ARG; so does an index outside the range or not an integer
 *  scalar, naming it. */
cft_quant *cft_quant_prepare_ensemble(cft_fn *f, const cft_quantizer *qz, int members);
/** f with observers on every site (calibration): same outputs as f. */
cft_fn *cft_quant_observer_fn(cft_quant *q);
/** Quantization-aware training: f with every site fake-quantized by the
 *  observers' current ranges, the observers updating first (eager calls).
 *  A site never observed yet passes through unchanged. */
cft_fn *cft_quant_qat_fn(cft_quant *q);
/** The converted function: every site quantized by the ranges observed so
 *  far, frozen into constants (later observing does not change it); plain
 *  matrix products run on int8 kernels (above), the other sites
 *  fake-quantized. A site never observed fails its calls with CFT_E_ARG
 *  ("site k was never observed: calibrate first"). */
cft_fn *cft_quant_convert(cft_quant *q);
/** Member `member`'s converted function (cft_quant_convert for one member
 *  of an ensemble record; it takes f's inputs, no index). A member outside
 *  the record's gives a function that fails with CFT_E_ARG. For a plain
 *  record, member 0 is cft_quant_convert; cft_quant_convert of an ensemble
 *  record fails with CFT_E_ARG pointing here. */
cft_fn *cft_quant_convert_member(cft_quant *q, int member);
/** Observers on (the default) or off (torch.ao.quantization's
 *  enable_observer / disable_observer): while off, calls of q's functions
 *  (observer, QAT; eager, staged or jitted) leave every site's range as it
 *  is, so that the last epochs of QAT train against fixed quantization
 *  parameters. A site first met while off is made but stays unobserved.
 *  CFT_E_ARG for a NULL record. */
cft_status cft_quant_set_observing(cft_quant *q, bool on);
/** Sites observed so far. */
int cft_quant_num_sites(const cft_quant *q);
/** Site i's quantization parameters now (scalars, or 1-d per channel) and
 *  the name of its primitive and whether it is a weight (member 0's, for an
 *  ensemble record). */
cft_status cft_quant_site(const cft_quant *q, int i, cft_array **scale, cft_array **zero_point,
                          const char **prim, bool *is_weight);
/** Site i's quantization parameters now for member `member` of the record
 *  (CFT_E_ARG for a site or member outside the record's, or a site that
 *  member has not observed). */
cft_status cft_quant_site_member(const cft_quant *q, int i, int member, cft_array **scale,
                                 cft_array **zero_point);

#ifdef __cplusplus
}
#endif

/** @} */

#endif
