/* qconv_act.c: conv_qact, the int8 convolution of statically quantized
 * programs fused with what follows it up to the next int8 product: a bias
 * per output channel, a ReLU, and the rounding onto the next product's
 * grid, as PyTorch's quantized conv2d_relu and fbgemm's requantising
 * epilogue do. The jit makes it (cft__qact_grid, from the rewrite of
 * dot_qstatic or conv_qstatic whose x is that chain's value), so the
 * convolution's output rows get the bias, the ReLU and the rounding while
 * they are in cache, instead of an elementwise kernel reading and writing
 * them again:
 *
 *   conv_qact(x, words, wscale, xscale, xzp, bias, floor, oscale, ozp)
 *       [strides, padding, lhs_dilation, rhs_dilation, ranges, wshape]
 *       -> y f32 [N, O, out...]: with v = conv_qstatic(x, ...) (conv_qint
 *       where x is on its grid), bias [O], floor, oscale, ozp scalars,
 *       u = v + bias[o]; u = act ? (u > floor ? u : floor) : u;
 *       y = clamp(rint(u / oscale) + ozp, ylo, yhi), each op in f32 as the
 *       elementwise kernel it replaces, so the bits are that kernel's.
 *       ranges = (xlo, xhi, x on its grid, ylo, yhi, act, packed).
 *       Packed (after a ReLU whose floor is a number, so no NaN): y's
 *       values as u8, four to an i32 word, [N, ceil(O * P / 4)], zero past
 *       a sample's O * P bytes, for dot_qwords (qstatic.c); a NaN floor
 *       there is an error.
 *
 * The kernel it replaces spent its time on rows of 36 (a scalar tail and
 * the row's offsets each), not on its ops: with the bias laid out over
 * each channel's row, a sample is one loop of whole vectors (division
 * included: multiplying by 1 / oscale, with a check near ties, measured
 * 12.7 us over the digits CNN's 256 samples against the division's 7.9).
 * Its output is piecewise constant: no derivative (NONDIFF), as rint's. */
#include <math.h>
#include <string.h>

#include "cft/ops.h"
#include "core/vec.h"
#include "prims/qlinear.h"
#include "prims/rules.h"
#include "trace/ir.h"

extern const cft_prim cft_p_conv_qact, cft_p_conv_qstatic, cft_p_conv_qint, cft_p_add, cft_p_gt,
    cft_p_broadcast_in_dim;

enum { QR = 4 }; /* the ranges slot; the others as conv_qstatic's */
enum { RXLO, RXHI, RGRID, RYLO, RYHI, RACT, RPACK, NR }; /* its entries */

/* ---- the epilogue ---- */

/* the values w of y [n] from `at` of sample `sample`, stored by store */
#define EPI_LOOP(STORE)                                                                            \
    if (e->act)                                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float u = y[i] + bias[i];                                                              \
            u = u > fl ? u : fl;                                                                   \
            float w = nearbyintf(u / os) + z;                                                      \
            w = w < lo ? lo : w;                                                                   \
            w = w > hi ? hi : w;                                                                   \
            STORE;                                                                                 \
        }                                                                                          \
    else                                                                                           \
        for (int64_t i = 0; i < n; i++) {                                                          \
            float w = nearbyintf((y[i] + bias[i]) / os) + z;                                       \
            w = w < lo ? lo : w;                                                                   \
            w = w > hi ? hi : w;                                                                   \
            STORE;                                                                                 \
        }

void CFT_VEC cft__qepi_span(const cft__qepi *e, int64_t sample, int64_t at, float *restrict y,
                            int64_t n) {
    const float fl = e->floor, os = e->os, z = e->ozp, lo = e->lo, hi = e->hi;
    const float *restrict bias = e->bias + at;
    if (e->q8) { /* packed: w in [lo, hi] within u8 (no NaN: the rewrite's floor is a number) */
        uint8_t *restrict q = e->q8 + sample * e->q8_stride + at;
        EPI_LOOP(q[i] = (uint8_t)(int32_t)w)
    } else {
        EPI_LOOP(y[i] = w)
    }
}

/* ---- the primitive ---- */

/* p's ranges as conv_qstatic's xrange (the params of cft__qconv_check and
 * cft__qconv_run) */
static cft_params conv_of(const cft_params *p) {
    cft_params c = *p;
    cft__param_set(&c, QR, p->v[QR], 2);
    return c;
}

static bool scalar_float(const cft_aval *a, bool i32) {
    return a->ndim == 0 && (cft__qreal_float(a->dtype) || (i32 && a->dtype == CFT_I32));
}

static cft_array *qact_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    if (p->n[QR] != NR)
        return cft__fail(CFT_E_ARG,
                         "conv_qact: ranges must be (xlo, xhi, grid, ylo, yhi, act, packed), "
                         "got %d entries",
                         p->n[QR]);
    const int64_t *r = p->v[QR];
    if ((r[RGRID] != 0 && r[RGRID] != 1) || (r[RACT] != 0 && r[RACT] != 1) ||
        (r[RPACK] != 0 && r[RPACK] != r[RACT]) || r[RYLO] < 0 || r[RYHI] > 255 || r[RYLO] > r[RYHI])
        return cft__fail(CFT_E_ARG,
                         "conv_qact: grid %lld and act %lld must be 0 or 1, packed %lld 0 or act "
                         "(a packed output holds no NaN), and the output range [%lld, %lld] "
                         "within u8",
                         (long long)r[RGRID], (long long)r[RACT], (long long)r[RPACK],
                         (long long)r[RYLO], (long long)r[RYHI]);
    cft_params c = conv_of(p);
    cft_array *e = cft__qconv_check("conv_qact", in, &c, out);
    if (e)
        return e;
    if (in[0].dtype != CFT_F32 || in[5].dtype != CFT_F32 || in[5].ndim != 1 ||
        in[5].shape[0] != out->shape[1] || in[6].dtype != CFT_F32 || in[6].ndim != 0 ||
        !scalar_float(&in[7], false) || !scalar_float(&in[8], true))
        return cft__fail(CFT_E_SHAPE,
                         "conv_qact: x %s must be f32, the bias %s f32 [%lld], the floor %s an "
                         "f32 scalar, the output's scale %s and zero point %s scalars",
                         cft__av(&in[0]), cft__av(&in[5]), (long long)out->shape[1],
                         cft__av(&in[6]), cft__av(&in[7]), cft__av(&in[8]));
    if (r[RPACK]) { /* [N, words of a sample's O * P bytes] */
        int64_t n = cft__numel(out->shape + 1, out->ndim - 1);
        if (cft__dim_maybe_sym(n))
            return cft__fail(CFT_E_SHAPE, "conv_qact: a packed output needs concrete sizes");
        *out = cft__aval(CFT_I32, (int64_t[]){out->shape[0], cft__qwords(n)}, 2);
    }
    return NULL;
}

static cft_array *qact_run(cft_array *const *in, const cft_params *p, cft_array *into,
                           cft_array **out) {
    cft_array *bias = cft__contig(in[5]);
    if (cft_failed(bias))
        return bias;
    /* the bias laid out over each channel's row of a sample, [O, P] */
    const cft_aval *x = &in[0]->aval;
    cft_aval oa;
    cft_params c = conv_of(p);
    cft_array *e = cft__qconv_check(
        "conv_qact", (cft_aval[]){*x, in[1]->aval, in[2]->aval, in[3]->aval, in[4]->aval}, &c, &oa);
    if (e)
        return e;
    const int64_t *r = p->v[QR];
    int64_t N = oa.shape[0], O = oa.shape[1], P = cft__numel(oa.shape + 2, oa.ndim - 2),
            W = cft__qwords(O * P);
    /* scratch (QY, the calling thread's, kept between calls): the bias
     * [O, P] | packed: the convolution's f32 values [N, O, P] */
    float *bl = cft__qscratch(CFT_SCRATCH_QY,
                              sizeof(float) * (size_t)(O * P + (r[RPACK] ? N * O * P : 0) + 1));
    if (!bl)
        return cft__oom();
    const float *b = cft__ptr(bias);
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < P; i++)
            bl[o * P + i] = b[o];
    /* packed: the convolution's f32 values in scratch, the epilogue's bytes
     * in words [N, W] (zero past a sample's O * P bytes) */
    cft_array *words = NULL, *yf = into;
    if (r[RPACK]) {
        words = into ? into : cft__alloc(CFT_I32, (int64_t[]){N, W}, 2);
        if (cft_failed(words))
            return words;
        if (W * 4 != O * P)
            memset(cft__ptr(words), 0, (size_t)(N * W) * 4);
        int64_t st[CFT_MAX_NDIM];
        cft__row_major(oa.shape, oa.ndim, st);
        cft_array scratch = {.kind = CFT_K_CONCRETE, .aval = oa, .data = (char *)(bl + O * P)};
        yf = cft__view(&scratch, oa.shape, oa.ndim, st, 0);
        if (cft_failed(yf))
            return yf;
    }
    const float floor = (float)cft__get(cft__ptr(in[6]), CFT_F32, 0);
    if (r[RPACK] && isnan(floor))
        return cft__fail(CFT_E_ARG, "conv_qact: a packed output needs a floor that is a number "
                                    "(a NaN would reach its bytes)");
    cft__qepi ep = {
        .bias = bl,
        .floor = floor,
        .act = r[RACT] != 0,
        .os = (float)cft__get(cft__ptr(in[7]), in[7]->aval.dtype, 0),
        .ozp = (float)cft__get(cft__ptr(in[8]), in[8]->aval.dtype, 0),
        .lo = (float)r[RYLO],
        .hi = (float)r[RYHI],
        .q8 = words ? cft__ptr(words) : NULL,
        .q8_stride = 4 * W,
    };
    e = cft__qconv_run(r[RGRID] != 0, in, &c, &ep, yf, out);
    if (!e && words)
        out[0] = words;
    return e;
}
static cft_array *qact_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    return qact_run(in, p, NULL, out);
}
static cft_array *qact_into(cft_array *const *in, int nin, const cft_params *p, cft_array *out) {
    (void)nin;
    cft_array *y;
    return qact_run(in, p, out, &y);
}

static cft_array *qact_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return cft__qconv_vmap(&cft_p_conv_qact, 9, size, x, bdim, p, y, ybdim);
}

const cft_prim cft_p_conv_qact = {
    .name = "conv_qact",
    .nin = 9,
    .nout = 1,
    .flags = CFT_PRIM_CONTRACTION | CFT_PRIM_NONDIFF,
    .pnames = {"strides", "padding", "lhs_dilation", "rhs_dilation", "ranges", "wshape"},
    .shape = qact_shape,
    .impl = qact_impl,
    .impl_into = qact_into,
    .vmap = qact_vmap,
};

/* ---- the jit's rewrite ---- */

/* var (of aval av, [N, O, ...]) as a value per output channel ([O], keep
 * 1) or one value ([], keep -1), where it is one: a constant whose strides
 * are 0 along every other axis, or a broadcast_in_dim of an operand that
 * varies along keep alone; else NULL */
static cft_array *along(const cft_rewrite_ctx *c, int var, const cft_aval *av, int keep) {
    cft_array *v = c->value(c, var);
    int64_t O = keep < 0 ? 1 : av->shape[keep];
    if (v && v->kind == CFT_K_CONCRETE && !v->dev && !v->conj && cft__aval_eq(&v->aval, av)) {
        for (int d = 0; d < av->ndim; d++)
            if (d != keep && v->strides[d] != 0 && av->shape[d] != 1)
                return NULL;
        return cft__view(v, &O, keep < 0 ? 0 : 1, keep < 0 ? NULL : &v->strides[keep], v->offset);
    }
    const cft_eqn *b = c->producer(c, var);
    if (!b || b->prim != &cft_p_broadcast_in_dim || b->nin != 1)
        return NULL;
    const cft_aval *oa = &b->in[0]->aval;
    if (b->params.n[1] != oa->ndim)
        return NULL;
    for (int i = 0; i < oa->ndim; i++)
        if (b->params.v[1][i] != keep && oa->shape[i] != 1)
            return NULL;
    cft_array *x = c->value(c, b->in[0]->id);
    int64_t n = cft__numel(oa->shape, oa->ndim);
    x = cft_reshape(x, &n, 1);
    return keep < 0 ? cft_reshape(x, NULL, 0) : cft_broadcast_to(x, &O, 1);
}

static bool is_qconv(const cft_eqn *q) {
    return q && (q->prim == &cft_p_conv_qstatic || q->prim == &cft_p_conv_qint) && q->nin == 5 &&
           q->out[0]->aval.dtype == CFT_F32;
}

/* the chain's conv_qact, packed where px (the product's x [N, O * P]) is
 * given and the chain allows it (a ReLU whose floor is a number: no NaN
 * can reach the bytes) */
static cft_array *qact_chain(const cft_rewrite_ctx *c, int src, cft_array *xs, cft_array *zp,
                             int64_t lo, int64_t hi, const cft_aval *px) {
    if (!c->value || !c->uses || c->uses(c, src) != 1)
        return NULL;
    const cft_eqn *e = c->producer(c, src);
    int cur = src, floor_var = -1, bias_var = -1;
    /* a ReLU, as cft_relu traces it: select(gt(u, floor), u, floor) */
    if (e && e->prim == &cft_p_select && e->nin == 3) {
        const cft_eqn *g = c->producer(c, e->in[0]->id);
        if (!g || g->prim != &cft_p_gt || g->in[0]->id != e->in[1]->id ||
            g->in[1]->id != e->in[2]->id || c->uses(c, e->in[0]->id) != 1 ||
            c->uses(c, e->in[1]->id) != 2)
            return NULL;
        cur = e->in[1]->id, floor_var = e->in[2]->id;
        e = c->producer(c, cur);
    }
    /* a bias: add(v, bias) or add(bias, v), v the convolution's alone */
    if (e && e->prim == &cft_p_add && e->nin == 2) {
        for (int s = 0; s < 2 && bias_var < 0; s++) {
            const cft_eqn *cv = c->producer(c, e->in[s]->id);
            if (is_qconv(cv) && c->uses(c, e->in[s]->id) == 1)
                bias_var = e->in[1 - s]->id, cur = e->in[s]->id, e = cv;
        }
        if (bias_var < 0)
            return NULL;
    }
    if (!is_qconv(e) || (bias_var < 0 && floor_var < 0))
        return NULL;
    const cft_aval *av = &e->out[0]->aval;
    if (av->ndim < 3 || cft__dim_maybe_sym(av->shape[1]))
        return NULL;
    cft_array *bias =
                  bias_var >= 0 ? along(c, bias_var, av, 1) : cft_zeros(CFT_F32, &av->shape[1], 1),
              *floor = floor_var >= 0 ? along(c, floor_var, av, -1) : cft_scalar(0, CFT_F32);
    if (!bias || !floor || cft_failed(bias) || cft_failed(floor))
        return NULL;
    bool packed = false;
    if (px) {
        int64_t n = cft__numel(av->shape + 1, av->ndim - 1);
        if (floor_var < 0 || floor->kind != CFT_K_CONCRETE || isnan(cft_item(floor)) ||
            px->ndim != 2 || px->dtype != CFT_F32 || px->shape[0] != av->shape[0] ||
            px->shape[1] != n || cft__dim_maybe_sym(n))
            return NULL;
        packed = true;
    }
    cft_params p = e->params;
    const int64_t *xr = e->params.v[QR];
    cft_array *in[9];
    bool grid;
    in[0] = cft__qconv_x(e, c, &grid); /* a chain before it fused as well */
    for (int i = 1; i < 5; i++)
        in[i] = c->value(c, e->in[i]->id);
    int64_t ranges[NR] = {xr[0], xr[1], grid, lo, hi, floor_var >= 0, packed};
    cft__param_set(&p, QR, ranges, NR);
    in[5] = bias, in[6] = floor, in[7] = xs, in[8] = zp;
    cft_array *y = cft__bind1(&cft_p_conv_qact, &p, 9, in);
    return cft_failed(y) ? NULL : y;
}

cft_array *cft__qact_bind(cft_array *const *in, const int64_t *ranges, const int64_t *wshape,
                          int nsp, const int64_t *strides, const int64_t *padding,
                          const int64_t *rhs_dilation) {
    cft_params p;
    cft_array *e =
        cft__qconv_params("conv_qact", &p, ranges, NR, wshape, nsp, strides, padding, rhs_dilation);
    return e ? e : cft__bind1(&cft_p_conv_qact, &p, 9, in);
}

cft_array *cft__qact_grid(const cft_rewrite_ctx *c, int src, cft_array *xs, cft_array *zp,
                          int64_t lo, int64_t hi) {
    return qact_chain(c, src, xs, zp, lo, hi, NULL);
}

cft_array *cft__qact_words(const cft_rewrite_ctx *c, int src, cft_array *xs, cft_array *zp,
                           int64_t lo, int64_t hi, const cft_aval *x) {
    return qact_chain(c, src, xs, zp, lo, hi, x);
}
