/* qconv.c: the int8 convolution of statically quantized programs
 * (cft_quant_convert), the convolution's counterpart of qstatic.c's
 * dot_qstatic:
 *
 *   conv_qstatic(x, words, wscale, xscale, xzp)[strides, padding,
 *       lhs_dilation, rhs_dilation, xrange, wshape] -> y [N, O, out...]:
 *       x [N, C, in...] rounded to u8 as dot_qstatic rounds it (per tensor,
 *       xrange = [xlo, xhi] within [0, 255]); the weight W [O, C, k...]
 *       (wshape = [C, k...]) given as qlinear_quantize's words of its rows
 *       W[o] flattened; one feature and one batch group, no lhs dilation.
 *       Each sample's windows are laid out as rows of C * taps u8 values
 *       (padding holds the zero point, which stands for 0), and
 *       (rows - zp) W^T runs on cft__qgemm, the integer GEMM, or where that
 *       would saturate (8-bit x on a CPU without VNNI) on an f32 GEMM of
 *       the integers; y = xscale wscale[o] acc (an f32 y: g = xscale
 *       wscale[o] in double rounded to f32 once, then g * acc in f32, by
 *       every kernel below alike; an f64 y in double). Where it cannot saturate
 *       and x has 4 channels or more, oneDNN's own int8 convolution
 *       (conv_dnnl.c: VNNI or AMX where the CPU has them, no rows formed)
 *       computes the sums with padding read as 0; each output position's
 *       missing zp * (sum of its weights over the taps inside) is
 *       subtracted, so the integers, and the bits of y, are the gather's.
 *       The sums arrive as [N, O, P] (in an f32 y's own memory, then
 *       scaled in place along the positions).
 *       Where it would saturate, or under 4 channels (oneDNN's kernels sum
 *       4 channels an instruction: the digits CNN's 1 -> 8 channels took
 *       222 us there, 63 us as below, 36 us in f32), up to 514 taps run as
 *       conv_general_dilated's f32 convolution of the integers, exact;
 *       under 4 channels at stride 1, as qconv_direct.c's direct kernel
 *       (the same sums, each sample in f32 in a buffer of its thread; the
 *       digits CNN's in its jitted program: 83 us before it, about 30 us
 *       now).
 *       Its result is the fake-quantized f32 program's up to that
 *       program's rounding. A NaN
 *       in a sample makes the sample's whole output NaN. Its jvp is the
 *       straight-through estimator, as dot_qstatic's.
 *   conv_qint(xq, ...)[same]: the same convolution with x already on the
 *       grid (xq = clamp(round(x / xs) + zp)), written so by the jit's
 *       rewrite into the elementwise kernel before it, as dot_qint; where
 *       that kernel is a bias and a ReLU after another of these
 *       convolutions, the rewrite fuses the three into conv_qact
 *       (qconv_act.c), whose epilogue runs in these kernels (cft__qepi). */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cft/quant.h"
#include "core/mem.h"
#include "core/par.h"
#include "core/vec.h"
#include "prims/conv_dnnl.h"
#include "prims/qconv_direct.h"
#include "prims/qlinear.h"
#include "prims/rules.h"
#include "trace/ir.h"

extern const cft_prim cft_p_conv_qstatic, cft_p_conv_qint, cft_p_conv_general_dilated;

enum { QS, QP, QLD, QRD, QX, QW }; /* parameter slots; 0-3 as conv_general_dilated's */
enum { CONV_FG = 4, CONV_BG = 5 }; /* conv_general_dilated's group slots */
enum { MAXSP = 3 };

/* the conv_general_dilated params of these (one group of each kind) */
static cft_params conv_params(const cft_params *p) {
    cft_params c = {0};
    for (int s = QS; s <= QRD; s++)
        cft__param_set(&c, s, p->v[s], p->n[s]);
    cft__param_set1(&c, 4, 1);
    cft__param_set1(&c, 5, 1);
    return c;
}

/* the weight's aval [O, C, k...] (f32) for words [O, KW] */
static cft_aval weight_aval(const cft_params *p, const cft_aval *words) {
    cft_aval w = cft__aval(CFT_F32, NULL, 0);
    w.ndim = 1 + p->n[QW];
    w.shape[0] = words->shape[0];
    for (int i = 0; i < p->n[QW]; i++)
        w.shape[1 + i] = p->v[QW][i];
    return w;
}

/* C * kernel taps; CFT_QMAX_K + 1 once beyond CFT_QMAX_K (a hostile wshape cannot
 * wrap the product around) */
static int64_t taps_of(const cft_params *p) {
    int64_t k = 1;
    for (int i = 0; i < p->n[QW]; i++) {
        int64_t v = p->v[QW][i];
        if (v < 1 || v > CFT_QMAX_K || k * v > CFT_QMAX_K)
            return CFT_QMAX_K + 1;
        k *= v;
    }
    return k;
}

/* the two convolutions' shape rule, its errors naming op */
cft_array *cft__qconv_check(const char *op, const cft_aval *in, const cft_params *p,
                            cft_aval *out) {
    const cft_aval *x = &in[0];
    int nsp = x->ndim - 2;
    if (x->ndim < 3 || x->ndim > 5 || !cft__qreal_float(x->dtype) || in[1].ndim != 2 ||
        p->n[QW] != nsp + 1 || p->n[QX] != 2)
        return cft__fail(CFT_E_SHAPE,
                         "%s: x %s must be f32 or f64 [N, C, 1 to 3 spatial dims] and the "
                         "weight [O, KW] with wshape [C, k...]",
                         op, cft__av(x));
    for (int i = 0; i < p->n[QLD]; i++)
        if (p->v[QLD][i] != 1)
            return cft__fail(CFT_E_ARG, "%s: lhs dilation is not supported", op);
    int64_t lo = p->v[QX][0], hi = p->v[QX][1], k = taps_of(p);
    if (lo < 0 || hi > 255 || lo > hi)
        return cft__fail(CFT_E_ARG, "%s: activation range [%lld, %lld] is not within u8", op,
                         (long long)lo, (long long)hi);
    for (int i = 0; i < p->n[QW]; i++)
        if (p->v[QW][i] < 1)
            return cft__fail(CFT_E_SHAPE, "%s: wshape entry %lld is not a size", op,
                             (long long)p->v[QW][i]);
    if (k > CFT_QMAX_K)
        return cft__fail(CFT_E_SHAPE,
                         "%s: more than %lld taps would overflow the int32 accumulation", op,
                         (long long)CFT_QMAX_K);
    if (in[3].ndim != 0 || !cft__qreal_float(in[3].dtype) || in[4].ndim != 0 ||
        !(cft__qreal_float(in[4].dtype) || in[4].dtype == CFT_I32))
        return cft__fail(CFT_E_SHAPE,
                         "%s: the activation's scale %s and zero point %s must be "
                         "scalars",
                         op, cft__av(&in[3]), cft__av(&in[4]));
    cft_array *e = cft__qcheck_packed(op, &in[1], &in[2], k);
    if (e)
        return e;
    cft_params c = conv_params(p);
    cft_aval av[2] = {*x, weight_aval(p, &in[1])};
    av[1].dtype = x->dtype;
    return cft_p_conv_general_dilated.shape(av, 2, &c, out);
}

static cft_array *qconv_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    return cft__qconv_check("conv_qstatic", in, p, out);
}
static cft_array *qint_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    return cft__qconv_check("conv_qint", in, p, out);
}

/* ---- the kernel ---- */

/* Each output position's windows as offsets into a sample's u8 values
 * (-1: padding), [P, C * taps], made once per call; then a row of the GEMM
 * is a gather through its position's offsets. */
static void window_table(int nsp, int64_t C, int64_t T, const int64_t *in, const int64_t *out,
                         const int64_t *k, const int64_t *s, const int64_t *lo, const int64_t *d,
                         int64_t P, int32_t *tab) {
    int64_t insz = 1;
    for (int i = 0; i < nsp; i++)
        insz *= in[i];
    for (int64_t pos = 0; pos < P; pos++) {
        int64_t o[MAXSP] = {0}, rem = pos;
        for (int i = nsp - 1; i >= 0; i--)
            o[i] = rem % out[i], rem /= out[i];
        for (int64_t t = 0; t < T; t++) {
            int64_t tt = t, off = 0, mul = 1;
            bool inside = true;
            for (int i = nsp - 1; i >= 0; i--) {
                int64_t ti = tt % k[i];
                tt /= k[i];
                int64_t ii = o[i] * s[i] - lo[i] + ti * d[i];
                inside &= ii >= 0 && ii < in[i];
                off += ii * mul;
                mul *= in[i];
            }
            for (int64_t ch = 0; ch < C; ch++)
                tab[pos * C * T + ch * T + t] = inside ? (int32_t)(ch * insz + off) : -1;
        }
    }
}

typedef struct {
    const uint8_t *xq; /* [N, per] */
    uint8_t *rows;     /* [n * P, K] for samples [n0, n0 + n) */
    const int32_t *tab;
    int64_t n0, P, K, per;
    uint8_t zp;
} im2row;

static void im2row_body(void *ctx, int64_t lo, int64_t hi) {
    const im2row *c = ctx;
    for (int64_t r = lo; r < hi; r++) {
        const uint8_t *src = c->xq + (c->n0 + r / c->P) * c->per;
        const int32_t *tab = c->tab + (r % c->P) * c->K;
        uint8_t *dst = c->rows + r * c->K;
        for (int64_t j = 0; j < c->K; j++)
            dst[j] = tab[j] >= 0 ? src[tab[j]] : c->zp;
    }
}

/* the int32 sums of samples [n0, n0 + n) scaled into y [N, O, P] */
typedef struct {
    const int32_t *acc;  /* [n, O, P] (may be y's own memory; scatter_body's:
                          * [n * P, O]), or NULL: */
    const float *accf;   /* the same sums in f32 (exact integers) */
    const int32_t *comp; /* [O, P] subtracted from each sample's sums, or NULL */
    const double *sc;
    const uint8_t *nan; /* [N] */
    void *y;            /* [N, O, P] */
    int64_t n0, P, O;
    double xs;
    bool dbl;
    const cft__qepi *ep; /* conv_qact's epilogue on each row of an f32 y, or NULL */
} scale_rows;

/* y[n0 + n, o, pos] = xs sc[o] acc[n P + pos, o] (the gather's sums,
 * channels last), samples
 * [lo, hi): a transposition, by tiles of TP positions and TO channels
 * turned in a local buffer, then scaled along the positions, where loads
 * and stores are contiguous */
enum { TP = 16, TO = 64 };
static CFT_VEC void scatter_body(void *ctx, int64_t lo, int64_t hi) {
    const scale_rows *c = ctx;
    const int64_t P = c->P, O = c->O;
    int32_t t[TO][TP];
    for (int64_t n = lo; n < hi; n++) {
        double f = c->nan[c->n0 + n] ? NAN : c->xs;
        for (int64_t p0 = 0; p0 < P; p0 += TP)
            for (int64_t o0 = 0; o0 < O; o0 += TO) {
                int64_t np = P - p0 < TP ? P - p0 : TP, no = O - o0 < TO ? O - o0 : TO;
                for (int64_t pos = 0; pos < np; pos++) {
                    const int32_t *a = c->acc + (n * P + p0 + pos) * O + o0;
                    for (int64_t o = 0; o < no; o++)
                        t[o][pos] = a[o];
                }
                for (int64_t o = 0; o < no; o++) {
                    double g = f * c->sc[o0 + o];
                    const float gf = (float)g;
                    int64_t base = ((c->n0 + n) * O + o0 + o) * P + p0;
                    if (c->dbl)
                        for (int64_t pos = 0; pos < np; pos++)
                            ((double *)c->y)[base + pos] = g * (double)t[o][pos];
                    else
                        for (int64_t pos = 0; pos < np; pos++)
                            ((float *)c->y)[base + pos] = gf * (float)t[o][pos];
                }
            }
        if (c->ep)
            cft__qepi_span(c->ep, c->n0 + n, 0, (float *)c->y + (c->n0 + n) * O * P, O * P);
    }
}

/* y[n0 + n, o, pos] = xs sc[o] (acc[n, o, pos] - comp[o, pos]) over rows
 * (n, o) in [lo, hi) (the gather's arithmetic); in place where acc is y's
 * f32 memory (the same element read, then written) */
static CFT_VEC void scale_rows_body(void *ctx, int64_t lo, int64_t hi) {
    const scale_rows *c = ctx;
    const int64_t P = c->P, O = c->O;
    for (int64_t r = lo; r < hi; r++) {
        int64_t n = r / O, o = r % O;
        double g = (c->nan[c->n0 + n] ? NAN : c->xs) * c->sc[o];
        const float gf = (float)g; /* f32 y: the scale rounded once, then f32 products */
        const int32_t *a = c->acc ? c->acc + r * P : NULL;
        const int32_t *cp = c->comp ? c->comp + o * P : NULL;
        int64_t at = (c->n0 * O + r) * P;
        if (c->accf) {
            const float *af = c->accf + r * P;
            if (c->dbl)
                for (int64_t pos = 0; pos < P; pos++)
                    ((double *)c->y)[at + pos] = g * (double)af[pos];
            else
                for (int64_t pos = 0; pos < P; pos++)
                    ((float *)c->y)[at + pos] = gf * af[pos];
        } else if (c->dbl) {
            double *y = (double *)c->y + at;
            for (int64_t pos = 0; pos < P; pos++)
                y[pos] = g * (double)(a[pos] - (cp ? cp[pos] : 0));
        } else if (cp) {
            float *y = (float *)c->y + at;
            for (int64_t pos = 0; pos < P; pos++)
                y[pos] = gf * (float)(a[pos] - cp[pos]);
        } else {
            float *y = (float *)c->y + at;
            for (int64_t pos = 0; pos < P; pos++)
                y[pos] = gf * (float)a[pos];
        }
        if (c->ep)
            cft__qepi_span(c->ep, c->n0 + n, o * P, (float *)c->y + at, P);
    }
}

_Atomic bool cft__qconv_dnnl_on = true;
_Atomic long cft__qconv_dnnl_runs, cft__qconv_f32_runs, cft__qconv_direct_runs;

/* comp [O, P] = zp * the sum of W[o]'s weights over the taps of position
 * pos inside the input (tab [P, T]: the window table of one channel); ws
 * [O, T] is scratch */
static void zp_comp(const int8_t *wq, int64_t ldw, int64_t O, int64_t C, int64_t T, int64_t P,
                    const int32_t *tab, int32_t zp, int32_t *ws, int32_t *comp) {
    for (int64_t o = 0; o < O; o++) /* ws [O, T]: W[o]'s taps summed along the channels */
        for (int64_t t = 0; t < T; t++) {
            int32_t v = 0;
            for (int64_t ch = 0; ch < C; ch++)
                v += wq[o * ldw + ch * T + t];
            ws[o * T + t] = v;
        }
    for (int64_t o = 0; o < O; o++)
        for (int64_t pos = 0; pos < P; pos++) {
            int32_t v = 0;
            for (int64_t t = 0; t < T; t++)
                v += tab[pos * T + t] >= 0 ? ws[o * T + t] : 0;
            comp[o * P + pos] = v * zp;
        }
}

/* The sums of samples [n0, n0 + nc) on oneDNN's int8 convolution into acc
 * [nc, O, P] (key: the geometry with N = nc); false where it declines */
static bool sums_dnnl(int64_t *key, int64_t nc, const uint8_t *xq, const int8_t *w, int32_t *acc) {
    key[1] = nc;
    return cft__conv_dnnl(key, 3, (void *)xq, (void *)w, acc);
}

/* samples per chunk: its rows at most CHUNK_BYTES */
#define CHUNK_BYTES ((int64_t)16 << 20)

static cft_array *conv_with(cft_array *x, cft_array *w, const cft_params *p);

/* Every partial sum of K products of integers |x - zp| <= 255, |w| <= 128
 * below 2^24: exact in f32, whatever the order */
#define F32_EXACT_K ((INT64_C(1) << 24) / (255 * 128))

typedef struct {
    const uint8_t *xq;
    float *xf;
    float zp;
} to_f32;

static CFT_VEC void to_f32_body(void *ctx, int64_t lo, int64_t hi) {
    const to_f32 *c = ctx;
    for (int64_t i = lo; i < hi; i++)
        c->xf[i] = (float)c->xq[i] - c->zp;
}

/* The sums as conv_general_dilated's f32 convolution of the integers xq -
 * zp (padding 0 stands for the zero point) and the weights (rows ldw bytes
 * apart), exact below F32_EXACT_K taps, scaled into y; for 8-bit x where
 * the integer kernels would saturate (no VNNI): one f32 convolution, no
 * rows of windows */
static cft_array *qconv_f32(const cft_aval *xa, const cft_aval *wa, const uint8_t *xq,
                            const uint8_t *nan, const int8_t *wq, int64_t ldw, const double *sc,
                            double xs, double zp, const cft_params *p, const cft__qepi *ep,
                            cft_array *y) {
    int64_t N = xa->shape[0], O = wa->shape[0], K = cft__numel(wa->shape + 1, wa->ndim - 1);
    cft_array *xf = cft__alloc(CFT_F32, xa->shape, xa->ndim),
              *wf = cft__alloc(CFT_F32, wa->shape, wa->ndim);
    if (cft_failed(xf) || cft_failed(wf))
        return cft_failed(xf) ? xf : wf;
    to_f32 tf = {xq, cft__ptr(xf), (float)zp};
    cft__par_for(cft__numel(xa->shape, xa->ndim), 1.0, to_f32_body, &tf);
    float *w = cft__ptr(wf);
    for (int64_t o = 0; o < O; o++)
        for (int64_t j = 0; j < K; j++)
            w[o * K + j] = (float)wq[o * ldw + j];
    cft_array *acc = cft__contig(conv_with(xf, wf, p));
    if (cft_failed(acc))
        return acc;
    int64_t P = cft__numel(y->aval.shape + 2, y->aval.ndim - 2);
    scale_rows sr = {
        NULL, cft__ptr(acc), NULL, sc, nan, cft__ptr(y), 0, P, O, xs, y->aval.dtype == CFT_F64, ep};
    cft__par_for(N * O, 2.0 * (double)P, scale_rows_body, &sr);
    return NULL;
}

/* the geometry key of conv_dnnl.h for x (n samples), the output shape oa
 * and p */
static void dnnl_key(const cft_aval *x, int64_t O, const cft_params *p, int64_t *key) {
    int nsp = x->ndim - 2;
    memset(key, 0, sizeof(int64_t) * 25);
    key[0] = nsp, key[1] = x->shape[0], key[2] = x->shape[1], key[3] = O, key[4] = x->shape[1];
    key[5] = 1;
    for (int i = 0; i < nsp; i++) {
        key[6 + i] = x->shape[2 + i], key[9 + i] = p->v[QW][1 + i];
        key[12 + i] = p->v[QS][i], key[15 + i] = p->v[QP][2 * i];
        key[18 + i] = p->v[QP][2 * i + 1], key[21 + i] = p->v[QRD][i];
    }
}

/* conv_qstatic, and conv_qint where x is on the grid */
static cft_array *qconv_run(const cft_prim *prim, bool grid, bool try_dnnl, cft_array *const *in,
                            const cft_params *p, const cft__qepi *ep, cft_array *into,
                            cft_array **out) {
    cft_array *xqs[3];
    cft_aval oa;
    double xs, zp, lo = (double)p->v[QX][0], hi = (double)p->v[QX][1];
    cft_array *e = cft__qoperands(prim, in, p, lo, hi, xqs, &oa, &xs, &zp);
    if (e)
        return e;
    cft_array *x = xqs[0], *q = xqs[1], *s = xqs[2];
    /* into: the jit's arena (impl_into), contiguous, of y's aval */
    cft_array *y = into ? into : cft__alloc(oa.dtype, oa.shape, oa.ndim);
    if (cft_failed(y))
        return y;
    int nsp = x->aval.ndim - 2;
    int64_t N = x->aval.shape[0], C = x->aval.shape[1], O = q->aval.shape[0], K = taps_of(p),
            T = K / (C ? C : 1), P = cft__numel(oa.shape + 2, nsp), per = C;
    for (int i = 0; i < nsp; i++)
        per *= x->aval.shape[2 + i];
    if (cft__numel(oa.shape, oa.ndim) == 0)
        return out[0] = y, NULL;
    if (per > INT32_MAX) /* the window table's offsets are 32-bit */
        return cft__fail(CFT_E_SHAPE, "%s: a sample of %s has more than 2^31 values", prim->name,
                         cft__av(&x->aval));
    /* oneDNN's convolution where its sums cannot saturate; else (or where
     * it declines) the gather into rows of the integer GEMM */
    bool dn = try_dnnl && cft__qconv_dnnl_on && C >= 4 && (hi <= 127 || cft__qgemm_exact_u8()),
         f32 = !dn && try_dnnl && cft__qconv_dnnl_on && K <= F32_EXACT_K;
    /* scratch (QIN): xq [N * per] | nan [N] | table [P, K or T] | then
     * for the gather rows [chunk * P, K] | acc [chunk * P, O]; for
     * oneDNN ws [O, T] | comp [O, P] | w [O, K] | acc [chunk, O, P] (an
     * f64 y alone: an f32 one holds the sums itself); the f32 convolution
     * uses xq and nan alone */
    bool dbl = oa.dtype == CFT_F64;
    int64_t chunk = dn ? CHUNK_BYTES / (4 * P * O) : K * P > 0 ? CHUNK_BYTES / (K * P) : N;
    chunk = chunk < 1 ? 1 : chunk > N ? N : chunk;
    size_t otab = ((size_t)(N * per + N) + 63) / 64 * 64,
           orows = otab + (size_t)(P * (dn ? T : K)) * 4,
           oacc = ((orows + (dn ? (size_t)(O * T + P * O) * 4 + (size_t)(O * K)
                                : (size_t)(chunk * P * K))) +
                   63) /
                  64 * 64;
    char *buf =
        cft__qscratch(CFT_SCRATCH_QIN, f32          ? otab
                                       : dn && !dbl ? oacc + 64
                                                    : oacc + (size_t)(chunk * P * O) * 4 + 64);
    double *sc = cft__new_data(sizeof(double) * (size_t)(O > 0 ? O : 1));
    if (!buf || !sc)
        return cft__oom();
    uint8_t *xq = (uint8_t *)buf, *nan = xq + N * per, *rows = (uint8_t *)(buf + orows);
    int32_t *tab = (int32_t *)(buf + otab), *acc = (int32_t *)(buf + oacc);
    /* the direct kernel rounds an f32 x itself, sample by sample (no pass
     * over x before it, no u8 copy); the others read xq */
    const bool xraw = f32 && x->aval.dtype == CFT_F32;
    if (!xraw)
        cft__qrows(cft__ptr(x), x->aval.dtype == CFT_F64, N, per, xs, zp, lo, hi, grid, xq, nan);
    cft__cast(cft__ptr(s), s->aval.dtype, sc, CFT_F64, O);
    int64_t in_[MAXSP], out_[MAXSP], k_[MAXSP], s_[MAXSP], lo_[MAXSP], d_[MAXSP];
    for (int i = 0; i < nsp; i++) {
        in_[i] = x->aval.shape[2 + i], out_[i] = oa.shape[2 + i], k_[i] = p->v[QW][1 + i];
        s_[i] = p->v[QS][i], lo_[i] = p->v[QP][2 * i], d_[i] = p->v[QRD][i];
    }
    const int8_t *wq = cft__ptr(q);
    int64_t ldw = q->aval.shape[1] * 4, key[25];
    int32_t *comp = NULL;
    if (dn) {
        int32_t *ws = (int32_t *)rows, *cz = ws + O * T;
        int8_t *w = (int8_t *)(cz + P * O);
        for (int64_t o = 0; o < O; o++) /* rows of K bytes, [O, C, k...] */
            memcpy(w + o * K, wq + o * ldw, (size_t)K);
        if (zp != 0) { /* a zero point of 0 (x after a ReLU): padding reads as it should */
            window_table(nsp, 1, T, in_, out_, k_, s_, lo_, d_, P, tab);
            zp_comp(w, K, O, C, T, P, tab, (int32_t)zp, ws, cz);
            comp = cz;
        }
        dnnl_key(&x->aval, O, p, key);
        for (int64_t n0 = 0; dn && n0 < N; n0 += chunk) {
            int64_t nc = N - n0 < chunk ? N - n0 : chunk;
            /* an f32 y takes the sums in its own memory, scaled in place */
            int32_t *a = dbl ? acc : (int32_t *)cft__ptr(y) + n0 * O * P;
            if (!sums_dnnl(key, nc, xq + n0 * per, w, a)) {
                dn = false; /* declined, or out of memory in oneDNN: the gather below */
                break;
            }
            scale_rows sr = {a, NULL, comp, sc, nan, cft__ptr(y), n0, P, O, xs, dbl, ep};
            cft__par_for(nc * O, 2.0 * (double)P, scale_rows_body, &sr);
        }
        if (dn) {
            cft__qconv_dnnl_runs++;
            return out[0] = y, NULL;
        }
        /* declined (a geometry oneDNN has no int8 kernel for: remembered
         * per geometry), or oneDNN short of memory: the whole convolution
         * by the gather, with its own scratch */
        return qconv_run(prim, grid, false, in, p, ep, into, out);
    }
    if (f32) {
        cft__qdirect dg = {.nsp = nsp,
                           .N = N,
                           .C = C,
                           .O = O,
                           .in = in_,
                           .out = out_,
                           .k = k_,
                           .d = d_,
                           .s = s_,
                           .pad = p->v[QP],
                           .xq = xraw ? NULL : xq,
                           .nan = nan,
                           .xf = xraw ? cft__ptr(x) : NULL,
                           .grid = grid,
                           .lo = lo,
                           .hi = hi,
                           .zp = zp,
                           .wq = wq,
                           .ldw = ldw,
                           .sc = sc,
                           .xs = xs,
                           .y = cft__ptr(y),
                           .dbl = dbl,
                           .ep = ep};
        if (cft__qconv_direct(&dg)) {
            cft__qconv_direct_runs++;
            return out[0] = y, NULL;
        }
        if (xraw)
            cft__qrows(cft__ptr(x), false, N, per, xs, zp, lo, hi, grid, xq, nan);
        cft_aval wa = weight_aval(p, &q->aval);
        cft_array *r = qconv_f32(&x->aval, &wa, xq, nan, wq, ldw, sc, xs, zp, p, ep, y);
        if (r)
            return r;
        cft__qconv_f32_runs++;
        return out[0] = y, NULL;
    }
    window_table(nsp, C, T, in_, out_, k_, s_, lo_, d_, P, tab);
    im2row ir = {xq, rows, tab, 0, P, K, per, (uint8_t)zp};
    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
        int64_t nc = N - n0 < chunk ? N - n0 : chunk, M = nc * P;
        ir.n0 = n0;
        cft__par_for(M, (double)K, im2row_body, &ir);
        if (!cft__qgemm_exact(M, O, K, rows, (int32_t)zp, wq, ldw, acc, hi))
            return cft__oom();
        scale_rows sg = {acc, NULL, NULL, sc, nan, cft__ptr(y), n0, P, O, xs, dbl, ep};
        cft__par_for(nc, 2.0 * (double)(P * O), scatter_body, &sg);
    }
    out[0] = y;
    return NULL;
}
static cft_array *qconv_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    return qconv_run(&cft_p_conv_qstatic, false, true, in, p, NULL, NULL, out);
}
static cft_array *qconv_into(cft_array *const *in, int nin, const cft_params *p, cft_array *out) {
    (void)nin;
    cft_array *y;
    return qconv_run(&cft_p_conv_qstatic, false, true, in, p, NULL, out, &y);
}
static cft_array *qint_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    return qconv_run(&cft_p_conv_qint, true, true, in, p, NULL, NULL, out);
}
static cft_array *qint_into(cft_array *const *in, int nin, const cft_params *p, cft_array *out) {
    (void)nin;
    cft_array *y;
    return qconv_run(&cft_p_conv_qint, true, true, in, p, NULL, out, &y);
}
cft_array *cft__qconv_run(bool grid, cft_array *const *in, const cft_params *p, const cft__qepi *ep,
                          cft_array *into, cft_array **out) {
    return qconv_run(grid ? &cft_p_conv_qint : &cft_p_conv_qstatic, grid, true, in, p, ep, into,
                     out);
}

/* ---- rules ---- */

/* the dequantized weight [O, C, k...] of words and scales s */
static cft_array *weight_of(cft_array *words, cft_array *s, const cft_params *p) {
    cft_aval w = weight_aval(p, &words->aval);
    return cft_reshape(cft__qunpack(words, s, taps_of(p)), w.shape, w.ndim);
}

static cft_array *conv_with(cft_array *x, cft_array *w, const cft_params *p) {
    cft_params c = conv_params(p);
    int nsp = p->n[QS];
    int64_t pad[2 * MAXSP];
    for (int i = 0; i < 2 * nsp; i++)
        pad[i] = p->v[QP][i];
    return cft_conv_general_dilated(x, w, p->v[QS], pad, NULL, c.v[QRD], 1, 1);
}

/* the straight-through estimator: x's tangent where x's grid value lies
 * in the range (conv_qint: x is that value; its tangent is scaled by xs),
 * times the dequantized weight; wscale's with x as if not rounded */
static cft_array *jvp_of(bool grid, cft_array *const *x, cft_array *const *t, const cft_params *p,
                         cft_array **ty) {
    cft_dtype dt = x[0]->aval.dtype;
    cft_array *xs = cft_astype(x[3], dt), *zp = cft_astype(x[4], dt), *tx = NULL, *ts = NULL;
    if (t[0]) {
        cft_array *inside;
        cft__qgrid_of(x[0], xs, zp, grid, p->v[QX][0], p->v[QX][1], NULL, &inside);
        cft_array *tin = cft_mul(t[0], inside);
        tx = conv_with(grid ? cft_mul(tin, xs) : tin, weight_of(x[1], cft_astype(x[2], dt), p), p);
    }
    if (t[2])
        ts = conv_with(grid ? cft_mul(cft_sub(x[0], zp), xs) : x[0],
                       weight_of(x[1], cft_astype(t[2], dt), p), p);
    ty[0] = cft__tadd(tx, ts);
    return NULL;
}
static cft_array *qconv_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                            const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    return jvp_of(false, x, t, p, ty);
}
static cft_array *qint_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    return jvp_of(true, x, t, p, ty);
}

static cft_array *bind5(const cft_prim *prim, cft_array *const *x, const cft_params *p) {
    return cft__bind1(prim, p, 5, (cft_array *[]){x[0], x[1], x[2], x[3], x[4]});
}

/* x batched alone: its batch joins the samples; anything else batched:
 * the product per example, stacked (conv_qact's too: its nin inputs) */
cft_array *cft__qconv_vmap(const cft_prim *prim, int nin, int64_t size, cft_array *const *x,
                           const int *bdim, const cft_params *p, cft_array **y, int *ybdim) {
    ybdim[0] = 0;
    cft_array *xb = bdim[0] < 0 ? x[0] : cft__moveaxis_b(x[0], bdim[0], 0);
    bool alone = true;
    for (int j = 1; j < nin; j++)
        alone &= bdim[j] < 0;
    if (alone) {
        const cft_aval *a = &xb->aval;
        int64_t fold[CFT_MAX_NDIM];
        fold[0] = a->shape[0] * a->shape[1];
        for (int i = 2; i < a->ndim; i++)
            fold[i - 1] = a->shape[i];
        cft_array *xs[nin];
        xs[0] = cft_reshape(xb, fold, a->ndim - 1);
        for (int j = 1; j < nin; j++)
            xs[j] = x[j];
        cft_array *r = cft__bind1(prim, p, nin, xs);
        if (cft_failed(r))
            return y[0] = r;
        int64_t un[CFT_MAX_NDIM];
        un[0] = a->shape[0], un[1] = a->shape[1];
        for (int i = 1; i < cft_array_ndim(r); i++)
            un[i + 1] = cft_array_shape(r)[i];
        y[0] = cft_reshape(r, un, cft_array_ndim(r) + 1);
        return cft_failed(y[0]) ? y[0] : NULL;
    }
    cft_array **each = cft__new(sizeof(cft_array *) * (size_t)(size > 0 ? size : 1));
    if (!each)
        return y[0] = cft__oom();
    for (int64_t i = 0; i < size; i++) {
        cft_array *a[nin];
        for (int j = 0; j < nin; j++)
            a[j] = bdim[j] < 0 ? x[j] : cft_index(cft__moveaxis_b(x[j], bdim[j], 0), i);
        each[i] = cft__bind1(prim, p, nin, a);
    }
    y[0] = cft_stack(each, (int)size, 0);
    return cft_failed(y[0]) ? y[0] : NULL;
}
static cft_array *qconv_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                             const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return cft__qconv_vmap(&cft_p_conv_qstatic, 5, size, x, bdim, p, y, ybdim);
}
static cft_array *qint_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return cft__qconv_vmap(&cft_p_conv_qint, 5, size, x, bdim, p, y, ybdim);
}

/* the jit's rewrite, as dot_qstatic's (qstatic.c): x from an elementwise
 * kernel is rounded onto the grid in that kernel (or in a conv_qact's
 * epilogue: cft__qact_grid), and conv_qint reads it */
cft_array *cft__qconv_x(const cft_eqn *q, const cft_rewrite_ctx *c, bool *grid) {
    cft_array *x = c->value(c, q->in[0]->id);
    int src = q->prim == &cft_p_conv_qstatic ? cft__qgrid_source(q, c) : -1;
    *grid = q->prim == &cft_p_conv_qint;
    if (src < 0)
        return x;
    cft_array *xs = c->value(c, q->in[3]->id), *zp = c->value(c, q->in[4]->id);
    const int64_t lo = q->params.v[QX][0], hi = q->params.v[QX][1];
    cft_array *g = cft__qact_grid(c, src, xs, zp, lo, hi);
    if (!g)
        cft__qgrid_of(c->value(c, src), xs, zp, false, lo, hi, &g, NULL);
    *grid = true;
    return cft_reshape(g, x->aval.shape, x->aval.ndim);
}

static bool qconv_rewrite(const cft_eqn *q, const cft_rewrite_ctx *c, cft_array **out) {
    int src = cft__qgrid_source(q, c);
    if (src < 0 || !c->value)
        return src >= 0;
    cft_array *x[5];
    bool grid;
    x[0] = cft__qconv_x(q, c, &grid);
    for (int i = 1; i < 5; i++)
        x[i] = c->value(c, q->in[i]->id);
    out[0] = bind5(&cft_p_conv_qint, x, &q->params);
    return true;
}

const cft_prim cft_p_conv_qstatic = {
    .name = "conv_qstatic",
    .nin = 5,
    .nout = 1,
    .flags = CFT_PRIM_CONTRACTION,
    .pnames = {"strides", "padding", "lhs_dilation", "rhs_dilation", "xrange", "wshape"},
    .shape = qconv_shape,
    .impl = qconv_impl,
    .impl_into = qconv_into,
    .jvp = qconv_jvp,
    .vmap = qconv_vmap,
    .rewrite = qconv_rewrite,
};
const cft_prim cft_p_conv_qint = {
    .name = "conv_qint",
    .nin = 5,
    .nout = 1,
    .flags = CFT_PRIM_CONTRACTION,
    .pnames = {"strides", "padding", "lhs_dilation", "rhs_dilation", "xrange", "wshape"},
    .shape = qint_shape,
    .impl = qint_impl,
    .impl_into = qint_into,
    .jvp = qint_jvp,
    .vmap = qint_vmap,
};

cft_array *cft__qconv_params(const char *name, cft_params *p, const int64_t *ranges, int nranges,
                             const int64_t *wshape, int nsp, const int64_t *strides,
                             const int64_t *padding, const int64_t *rhs_dilation) {
    int64_t ones[MAXSP] = {1, 1, 1};
    if (nsp < 1 || nsp > MAXSP)
        return cft__fail(CFT_E_SHAPE, "%s: %d spatial dims (1 to 3)", name, nsp);
    *p = (cft_params){0};
    cft__param_set(p, QS, strides, nsp);
    cft__param_set(p, QP, padding, 2 * nsp);
    cft__param_set(p, QLD, ones, nsp);
    cft__param_set(p, QRD, rhs_dilation, nsp);
    cft__param_set(p, QX, ranges, nranges);
    cft__param_set(p, QW, wshape, nsp + 1);
    return NULL;
}

cft_array *cft__qconv_bind(cft_array *x, cft_array *words, cft_array *ws, cft_array *xs,
                           cft_array *zp, int64_t xlo, int64_t xhi, const int64_t *wshape, int nsp,
                           const int64_t *strides, const int64_t *padding,
                           const int64_t *rhs_dilation, bool grid) {
    cft_params p;
    const cft_prim *prim = grid ? &cft_p_conv_qint : &cft_p_conv_qstatic;
    cft_array *e = cft__qconv_params(prim->name, &p, (int64_t[]){xlo, xhi}, 2, wshape, nsp, strides,
                                     padding, rhs_dilation);
    return e ? e : bind5(prim, (cft_array *[]){x, words, ws, xs, zp}, &p);
}

bool cft__qconv_fits(const cft_prim *p, const cft_params *par, const cft_aval *x,
                     const cft_aval *w) {
    if (p != &cft_p_conv_general_dilated || x->dtype != CFT_F32 || w->dtype != CFT_F32 ||
        w->ndim < 3 || w->ndim > 2 + MAXSP || par->n[QS] != w->ndim - 2 ||
        par->v[CONV_FG][0] != 1 || par->v[CONV_BG][0] != 1)
        return false;
    for (int i = 0; i < par->n[QLD]; i++)
        if (par->v[QLD][i] != 1)
            return false;
    int64_t k = 1;
    for (int d = 0; d < w->ndim; d++)
        if (cft__dim_maybe_sym(w->shape[d]))
            return false;
    for (int d = 1; d < w->ndim && k <= CFT_QMAX_K; d++)
        k *= w->shape[d];
    return k <= CFT_QMAX_K;
}

cft_array *cft__qstatic_conv(cft_array *x, cft_array *w, cft_array *ws, int64_t wlo, int64_t whi,
                             cft_array *xs, cft_array *zp, int64_t xlo, int64_t xhi,
                             const cft_params *conv) {
    const cft_aval *wa = &w->aval;
    int64_t O = wa->shape[0], k = cft__numel(wa->shape + 1, wa->ndim - 1);
    cft_array *words = cft__qstatic_quantize(cft_reshape(w, (int64_t[]){O, k}, 2), ws, wlo, whi);
    return cft__qconv_bind(x, words, ws, xs, zp, xlo, xhi, wa->shape + 1, wa->ndim - 2, conv->v[QS],
                           conv->v[QP], conv->v[QRD], false);
}
