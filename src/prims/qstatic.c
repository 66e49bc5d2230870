/* qstatic.c: the int8 products of statically quantized programs
 * (cft_quant_convert). Calibration froze a per-tensor affine scale and
 * zero point for the activation x and per-channel symmetric scales for
 * the weight; these primitives compute what the fake-quantized f32 program
 * computes, on integers:
 *
 *   qlinear_quantize(W, scale)[lo, hi] -> words: W [..., N, K] rounded to
 *       clamp(round(W / scale[n]), lo, hi) (half to even, the division in
 *       W's dtype, as cft_fake_quantize divides), s8 packed four to an i32
 *       word as qlinear_pack packs (qlinear.h). No derivative.
 *   dot_qstatic(x, words, wscale, xscale, xzp)[k, xlo, xhi] -> y [M, N]:
 *       xq = clamp(round(x / xscale) + xzp, xlo, xhi) as u8 (0 <= xlo <=
 *       xhi <= 255), acc = (xq - xzp) wq^T in int32 on oneDNN's u8s8s32
 *       GEMM, y = xscale wscale[n] acc. The integers are exact; y differs
 *       from the fake-quantized f32 program only by that program's f32
 *       rounding. Where oneDNN's GEMM would saturate (no VNNI and xhi above
 *       127: qlinear.h), the integers go through an f32 GEMM instead, exact
 *       while partial sums stay below 2^24. A NaN in a row of x makes that
 *       row of y NaN, as in the f32 program. Its jvp is the straight-through
 *       estimator of cft_fake_quantize: x's tangent passes where x lies
 *       inside the grid, times the dequantized weight; wscale's is x (as
 *       if not rounded) times the weight's integers, as dot_qlinear's;
 *       xscale and xzp are constants of the program (zero tangents).
 *   dot_qint(xq, words, wscale, xscale, xzp)[same]: the same product with
 *       x already on the grid (xq = clamp(round(x / xscale) + xzp)),
 *       written so by the jit's rewrite of dot_qstatic into the
 *       elementwise kernel before it; the kernel rounds and clamps xq
 *       again (nothing changes for such xq; any float stays defined).
 *   dot_qwords(xw, words, wscale, xscale, xzp)[same] -> y [M, N] in
 *       xscale's dtype: xw [M, ceil(k / 4)] i32 holds x's u8 grid values
 *       four to a word (as conv_qact packs them, qconv_act.c), read as
 *       they are (no rounding, no NaN rows). Linear in wscale (its jvp in
 *       public ops); the words carry no tangent.
 * Products of up to CFT_QMATMUL_MAX_N outputs round, multiply and scale
 * each thread's block of rows in one parallel region (qblocks). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cft/quant.h"
#include "core/mem.h"
#include "core/par.h"
#include "core/vec.h"
#include "prims/qlinear.h"
#include "prims/qmatmul_dnnl.h"
#include "prims/rules.h"
#include "trace/ir.h"

extern const cft_prim cft_p_qlinear_quantize, cft_p_dot_qstatic, cft_p_dot_qint, cft_p_dot_qwords,
    cft_p_reshape;

enum { K_, XLO, XHI };

/* ---- shapes ---- */

static cft_array *quantize_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    const cft_aval *w = &in[0], *s = &in[1];
    int64_t lo = p->v[0][0], hi = p->v[1][0];
    if (lo < -128 || hi > 127 || lo > hi)
        return cft__fail(CFT_E_ARG, "qlinear_quantize: range [%lld, %lld] is not within s8",
                         (long long)lo, (long long)hi);
    bool ok = w->ndim >= 2 && cft__qreal_float(w->dtype) && cft__qreal_float(s->dtype) &&
              s->ndim == w->ndim - 1;
    for (int d = 0; ok && d < s->ndim; d++)
        ok = s->shape[d] == w->shape[d];
    if (!ok)
        return cft__fail(CFT_E_SHAPE,
                         "qlinear_quantize: weight %s and scale %s do not fit (want f32 or f64 "
                         "[..., N, K] and [..., N])",
                         cft__av(w), cft__av(s));
    if (cft__dim_maybe_sym(w->shape[w->ndim - 1]))
        return cft__fail(CFT_E_SHAPE, "qlinear_quantize: K of %s must be concrete", cft__av(w));
    out[0] = *w, out[0].dtype = CFT_I32;
    out[0].shape[w->ndim - 1] = cft__qwords(w->shape[w->ndim - 1]);
    return NULL;
}

/* the two products' shape rule, its errors naming op */
static cft_array *dot_check(const char *op, const cft_aval *in, const cft_params *p,
                            cft_aval *out) {
    const cft_aval *x = &in[0];
    int64_t k = p->v[K_][0], lo = p->v[XLO][0], hi = p->v[XHI][0];
    if (x->ndim != 2 || !cft__qreal_float(x->dtype) || in[1].ndim != 2)
        return cft__fail(CFT_E_SHAPE, "%s: x %s must be f32 or f64 [M, K] and the weight [N, KW]",
                         op, cft__av(x));
    if (x->shape[1] != k)
        return cft__fail(CFT_E_SHAPE, "%s: x %s does not fit a weight of K = %lld", op, cft__av(x),
                         (long long)k);
    if (lo < 0 || hi > 255 || lo > hi)
        return cft__fail(CFT_E_ARG, "%s: activation range [%lld, %lld] is not within u8", op,
                         (long long)lo, (long long)hi);
    if (k > CFT_QMAX_K)
        return cft__fail(CFT_E_SHAPE,
                         "%s: K = %lld would overflow the int32 accumulation (at most "
                         "%lld products of u8 and s8)",
                         op, (long long)k, (long long)CFT_QMAX_K);
    if (in[3].ndim != 0 || !cft__qreal_float(in[3].dtype))
        return cft__fail(CFT_E_SHAPE, "%s: the activation's scale %s must be a float scalar", op,
                         cft__av(&in[3]));
    if (in[4].ndim != 0 || !(cft__qreal_float(in[4].dtype) || in[4].dtype == CFT_I32))
        return cft__fail(CFT_E_SHAPE,
                         "%s: the activation's zero point %s must be a scalar (f32, f64 "
                         "or i32)",
                         op, cft__av(&in[4]));
    cft_array *e = cft__qcheck_packed(op, &in[1], &in[2], k);
    if (e)
        return e;
    *out = cft__aval(x->dtype, (int64_t[]){x->shape[0], in[1].shape[0]}, 2);
    return NULL;
}

static cft_array *dot_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    return dot_check("dot_qstatic", in, p, out);
}
static cft_array *qint_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    return dot_check("dot_qint", in, p, out);
}
/* dot_qwords: x the u8 grid values, four to an i32 word */
static cft_array *qwords_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    const cft_aval *x = &in[0];
    int64_t k = p->v[K_][0];
    if (x->ndim != 2 || x->dtype != CFT_I32 || k < 1 || x->shape[1] != cft__qwords(k))
        return cft__fail(CFT_E_SHAPE,
                         "dot_qwords: x %s must be i32 [M, %lld]: K = %lld u8 values, four a "
                         "word",
                         cft__av(x), (long long)cft__qwords(k > 0 ? k : 0), (long long)k);
    /* the output in xscale's dtype (f32 or f64) */
    cft_dtype dt = cft__qreal_float(in[3].dtype) ? in[3].dtype : CFT_F32;
    cft_aval a[5] = {cft__aval(dt, (int64_t[]){x->shape[0], k}, 2), in[1], in[2], in[3], in[4]};
    return dot_check("dot_qwords", a, p, out);
}

/* ---- kernels ---- */

typedef struct {
    const void *w;
    bool dbl;
    int64_t k, kw;
    const double *sc;
    double lo, hi;
    int8_t *q;
} wrows;

/* a row: clamp(round(w / sc), lo, hi), half to even, the division in w's
 * dtype as cft_fake_quantize's (a NaN becomes 0) */
#define WROW(T, RINT)                                                                              \
    for (int64_t j = 0; j < k; j++) {                                                              \
        T v = RINT(w[j] / sc);                                                                     \
        v = v == v ? v : 0;                                                                        \
        v = v < hi ? v : hi;                                                                       \
        v = v > lo ? v : lo;                                                                       \
        q[j] = (int8_t)(int32_t)v;                                                                 \
    }
static CFT_VEC void wrow_f32(const float *w, float sc, float lo, float hi, int8_t *q, int64_t k) {
    WROW(float, nearbyintf)
}
static CFT_VEC void wrow_f64(const double *w, double sc, double lo, double hi, int8_t *q,
                             int64_t k) {
    WROW(double, nearbyint)
}
static void wrows_body(void *ctx, int64_t lo, int64_t hi) {
    const wrows *c = ctx;
    for (int64_t i = lo; i < hi; i++) {
        if (c->dbl)
            wrow_f64((const double *)c->w + i * c->k, c->sc[i], c->lo, c->hi, c->q + i * c->kw * 4,
                     c->k);
        else
            wrow_f32((const float *)c->w + i * c->k, (float)c->sc[i], (float)c->lo, (float)c->hi,
                     c->q + i * c->kw * 4, c->k);
    }
}

static cft_array *quantize_impl(cft_array *const *in, int nin, const cft_params *p,
                                cft_array **out) {
    (void)nin;
    cft_array *w = cft__contig(in[0]), *s = cft__contig(in[1]);
    if (cft_failed(w) || cft_failed(s))
        return cft_failed(w) ? w : s;
    cft_aval oa;
    cft_array *e = quantize_shape((cft_aval[]){w->aval, s->aval}, 2, p, &oa);
    if (e)
        return e;
    int64_t r = cft__numel(w->aval.shape, w->aval.ndim - 1), k = w->aval.shape[w->aval.ndim - 1],
            kw = cft__qwords(k);
    double lo = (double)p->v[0][0], hi = (double)p->v[1][0];
    cft_array *q = cft__alloc(CFT_I32, oa.shape, oa.ndim);
    if (cft_failed(q))
        return q;
    int8_t *qb = cft__ptr(q);
    memset(qb, 0, (size_t)(r * kw * 4));
    for (int64_t i = 0; i < r; i++) {
        double sc = cft__get(cft__ptr(s), s->aval.dtype, i);
        if (!(sc > 0) || isinf(sc))
            return cft__fail(CFT_E_ARG,
                             "qlinear_quantize: scale[%lld] = %g is not a positive number",
                             (long long)i, sc);
    }
    double *sc = cft__new_data(sizeof(double) * (size_t)(r > 0 ? r : 1));
    if (!sc)
        return cft__oom();
    cft__cast(cft__ptr(s), s->aval.dtype, sc, CFT_F64, r);
    wrows c = {cft__ptr(w), w->aval.dtype == CFT_F64, k, kw, sc, lo, hi, qb};
    cft__par_for(r, 4.0 * (double)k, wrows_body, &c);
    out[0] = q;
    return NULL;
}

/* A product of few outputs (a classifier: N <= CFT_QMATMUL_MAX_N) in
 * one parallel region rather than three: each thread rounds its block of
 * rows to u8, multiplies it on oneDNN's matmul primitive (run inside the
 * region, on that thread) and scales it, while the rows are in its cache.
 * The same integers and scaling as the three passes. */
typedef struct {
    const void *x;
    bool dbl, grid;
    int64_t M, N, K, rows, ldw;
    double xs, zp, lo, hi;
    uint8_t *xq, *nan;
    const int8_t *wq;
    int32_t *acc;
    double *xsr;
    const double *sc;
    void *y;
    bool rows_ready; /* xq and nan hold the u8 rows already (dot_qwords) */
    _Atomic bool fail;
} qblocks;

static void qblocks_body(void *ctx, int64_t lo, int64_t hi) {
    qblocks *c = ctx;
    for (int64_t b = lo; b < hi; b++) {
        int64_t m0 = b * c->rows, m1 = m0 + c->rows < c->M ? m0 + c->rows : c->M;
        if (!c->rows_ready)
            cft__qrows_range(c->x, c->dbl, c->K, c->xs, c->zp, c->lo, c->hi, c->grid, c->xq, c->nan,
                             m0, m1);
        if (!cft__qmatmul_dnnl(m1 - m0, c->N, c->K, c->xq + m0 * c->K, (int32_t)c->zp, c->wq,
                               c->ldw, c->acc + m0 * c->N)) {
            c->fail = true; /* declined: the caller runs the three passes */
            continue;
        }
        for (int64_t m = m0; m < m1; m++)
            c->xsr[m] = c->nan[m] ? NAN : c->xs;
        cft__qscale_range(c->acc, c->xsr, c->sc, c->y, c->N, c->dbl, m0, m1);
    }
}

static bool qblocks_run(qblocks *c) {
    int nth = cft__par_threads(c->M, 4.0 * (double)(c->N * c->K));
    if (!cft__qmatmul_dnnl_on || c->N > CFT_QMATMUL_MAX_N || nth < 2 ||
        !(c->hi <= 127 || cft__qgemm_exact_u8()))
        return false;
    c->rows = (c->M + nth - 1) / nth;
    cft__par_for((c->M + c->rows - 1) / c->rows, 4.0 * (double)(c->rows * c->N * c->K),
                 qblocks_body, c);
    return !c->fail;
}

/* dot_qstatic, dot_qint where x is on the grid, dot_qwords where x is
 * its u8 values in words; into: the jit's arena (impl_into), contiguous,
 * of y's aval; NULL: a fresh y */
static cft_array *dot_run(const cft_prim *prim, bool grid, cft_array *const *in,
                          const cft_params *p, cft_array *into, cft_array **out) {
    cft_array *xqs[3];
    cft_aval oa;
    double xs, zp, lo = (double)p->v[XLO][0], hi = (double)p->v[XHI][0];
    cft_array *e = cft__qoperands(prim, in, p, lo, hi, xqs, &oa, &xs, &zp);
    if (e)
        return e;
    cft_array *x = xqs[0], *q = xqs[1], *s = xqs[2];
    /* dot_qwords: x's rows are the u8 values themselves (i32 words) */
    const bool words = x->aval.dtype == CFT_I32;
    int64_t M = x->aval.shape[0], K = words ? p->v[K_][0] : x->aval.shape[1], N = q->aval.shape[0];
    cft_array *y = into ? into : cft__alloc(oa.dtype, oa.shape, 2);
    if (cft_failed(y))
        return y;
    /* scratch: acc [M, N] | xsr [M] | xq [M, K] | nan [M] */
    size_t oxs = ((size_t)(M * N) * 4 + 63) / 64 * 64, oxq = oxs + (size_t)M * 8,
           onan = oxq + (size_t)(M * K);
    char *buf = cft__qscratch(CFT_SCRATCH_QIN, onan + (size_t)M + 1);
    double *sc = cft__new_data(sizeof(double) * (size_t)(N > 0 ? N : 1));
    bool good = buf && sc;
    int32_t *acc = (int32_t *)buf;
    double *xsr = (double *)(buf + oxs);
    uint8_t *xq = (uint8_t *)(buf + oxq), *nan = (uint8_t *)(buf + onan);
    if (good && words) { /* rows of K bytes (a word's padding dropped), no NaN */
        const uint8_t *xb = cft__ptr(x);
        int64_t ld = 4 * x->aval.shape[1];
        if (ld == K)
            xq = (uint8_t *)xb;
        else
            for (int64_t m = 0; m < M; m++)
                memcpy(xq + m * K, xb + m * ld, (size_t)K);
        memset(nan, 0, (size_t)M);
    }
    if (good) {
        cft__cast(cft__ptr(s), s->aval.dtype, sc, CFT_F64, N);
        qblocks qb = {.x = cft__ptr(x),
                      .dbl = oa.dtype == CFT_F64,
                      .grid = grid,
                      .M = M,
                      .N = N,
                      .K = K,
                      .ldw = q->aval.shape[1] * 4,
                      .xs = xs,
                      .zp = zp,
                      .lo = lo,
                      .hi = hi,
                      .xq = xq,
                      .nan = nan,
                      .wq = cft__ptr(q),
                      .acc = acc,
                      .xsr = xsr,
                      .sc = sc,
                      .y = cft__ptr(y),
                      .rows_ready = words};
        if (qblocks_run(&qb)) {
            out[0] = y;
            return NULL;
        }
        if (!words)
            cft__qrows(cft__ptr(x), oa.dtype == CFT_F64, M, K, xs, zp, lo, hi, grid, xq, nan);
        good =
            cft__qgemm_exact(M, N, K, xq, (int32_t)zp, cft__ptr(q), q->aval.shape[1] * 4, acc, hi);
    }
    if (good) {
        for (int64_t m = 0; m < M; m++)
            xsr[m] = nan[m] ? NAN : xs;
        cft__qscale_rows(acc, xsr, sc, cft__ptr(y), M, N, oa.dtype == CFT_F64);
    }
    if (!good)
        return cft__oom();
    out[0] = y;
    return NULL;
}
static cft_array *dot_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    return dot_run(&cft_p_dot_qstatic, false, in, p, NULL, out);
}
static cft_array *dot_into(cft_array *const *in, int nin, const cft_params *p, cft_array *out) {
    (void)nin;
    cft_array *y;
    return dot_run(&cft_p_dot_qstatic, false, in, p, out, &y);
}
static cft_array *qint_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    return dot_run(&cft_p_dot_qint, true, in, p, NULL, out);
}
static cft_array *qint_into(cft_array *const *in, int nin, const cft_params *p, cft_array *out) {
    (void)nin;
    cft_array *y;
    return dot_run(&cft_p_dot_qint, true, in, p, out, &y);
}
static cft_array *qwords_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    return dot_run(&cft_p_dot_qwords, true, in, p, NULL, out);
}
static cft_array *qwords_into(cft_array *const *in, int nin, const cft_params *p, cft_array *out) {
    (void)nin;
    cft_array *y;
    return dot_run(&cft_p_dot_qwords, true, in, p, out, &y);
}

/* ---- rules ---- */

void cft__qgrid_of(cft_array *x, cft_array *xs, cft_array *zp, bool grid, int64_t lo, int64_t hi,
                   cft_array **q, cft_array **inside) {
    cft_dtype dt = cft_array_dtype(x);
    cft_array *l = cft_scalar((double)lo, dt), *h = cft_scalar((double)hi, dt);
    cft_array *v =
        grid ? cft__round_half_even(x)
             : cft_add(cft__round_half_even(cft_div(x, cft_astype(xs, dt))), cft_astype(zp, dt));
    if (q)
        *q = cft_clamp(v, l, h);
    if (inside)
        *inside = cft_astype(cft_logical_and(cft_ge(v, l), cft_le(v, h)), dt);
}

/* the straight-through estimator of cft_fake_quantize: x's tangent passes
 * where x's grid value lies inside [xlo, xhi], times the dequantized
 * weight (dot_qint, x on the grid: and times xs); wscale's is x as if not
 * rounded (dot_qint: (x - zp) xs) times the weight's integers, as
 * dot_qlinear's; xscale and xzp are constants of the program */
static cft_array *qdot_jvp(bool grid, cft_array *const *x, cft_array *const *t, const cft_params *p,
                           cft_array **ty) {
    cft_dtype dt = x[0]->aval.dtype;
    int64_t k = p->v[K_][0];
    cft_array *xs = cft_astype(x[3], dt), *tx = NULL, *ts = NULL;
    if (t[0]) {
        cft_array *inside;
        cft__qgrid_of(x[0], x[3], x[4], grid, p->v[XLO][0], p->v[XHI][0], NULL, &inside);
        cft_array *tin = cft_mul(t[0], inside);
        tx = cft_matmul(grid ? cft_mul(tin, xs) : tin,
                        cft_mT(cft__qunpack(x[1], cft_astype(x[2], dt), k)));
    }
    if (t[2])
        ts = cft_matmul(grid ? cft_mul(cft_sub(x[0], cft_astype(x[4], dt)), xs) : x[0],
                        cft_mT(cft__qunpack(x[1], cft_astype(t[2], dt), k)));
    ty[0] = cft__tadd(tx, ts);
    return NULL;
}
static cft_array *dot_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    return qdot_jvp(false, x, t, p, ty);
}
static cft_array *qint_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    return qdot_jvp(true, x, t, p, ty);
}

int cft__qgrid_source(const cft_eqn *q, const cft_rewrite_ctx *c) {
    if (q->nin != 5)
        return -1;
    int src = q->in[0]->id;
    const cft_eqn *pr = c->producer(c, src);
    if (pr && pr->prim == &cft_p_reshape && pr->nin == 1) {
        src = pr->in[0]->id;
        pr = c->producer(c, src);
    }
    return pr && (pr->prim->flags & CFT_PRIM_ELEMENTWISE) ? src : -1;
}

/* the jit's rewrite (rewrite.c) of dot_qstatic whose x an elementwise
 * equation computes (a bias and an activation, say), directly or through
 * a reshape (a CNN's flatten): x's rounding onto the grid becomes ops
 * that the jit fuses into that equation's kernel (the requantisation
 * after it), and the product dot_qint, which only converts the integers
 * it reads. The same integers: the same result bits. An x from elsewhere
 * (an input, another product) keeps dot_qstatic, whose one pass rounds
 * it. */
static bool dot_rewrite(const cft_eqn *q, const cft_rewrite_ctx *c, cft_array **out) {
    int src = cft__qgrid_source(q, c);
    if (src < 0 || !c->value)
        return src >= 0;
    cft_array *x[5];
    for (int i = 0; i < 5; i++)
        x[i] = c->value(c, q->in[i]->id);
    const int64_t lo = q->params.v[XLO][0], hi = q->params.v[XHI][0];
    /* a flattened conv_qact whose bytes the product reads as they are */
    cft_array *w = cft__qact_words(c, src, x[3], x[4], lo, hi, &x[0]->aval);
    if (w) {
        out[0] = cft__bind1(&cft_p_dot_qwords, &q->params, 5,
                            (cft_array *[]){w, x[1], x[2], x[3], x[4]});
        return true;
    }
    cft_array *g = cft__qact_grid(c, src, x[3], x[4], lo, hi);
    if (!g)
        cft__qgrid_of(c->value(c, src), x[3], x[4], false, q->params.v[XLO][0], q->params.v[XHI][0],
                      &g, NULL);
    g = cft_reshape(g, x[0]->aval.shape, x[0]->aval.ndim);
    out[0] = cft__bind1(&cft_p_dot_qint, &q->params, 5, (cft_array *[]){g, x[1], x[2], x[3], x[4]});
    return true;
}

static cft_array *quantize_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                                const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    cft_array *w = cft__batch_at(x[0], bdim[0], size, 0),
              *s = cft__batch_at(x[1], bdim[1], size, 0);
    y[0] = cft__bind1(&cft_p_qlinear_quantize, p, 2, (cft_array *[]){w, s});
    ybdim[0] = 0;
    return cft_failed(y[0]) ? y[0] : NULL;
}

/* x batched alone: its batch joins the rows (the activation's scale is
 * one for all rows); anything else batched: the fake-quantized arithmetic
 * in ops, per example. dot_qint (grid) the same, its x already rounded:
 * (clamp(round(x)) - zp) xs times the dequantized weight. */
static cft_array *qdot_vmap(const cft_prim *prim, bool grid, int64_t size, cft_array *const *x,
                            const int *bdim, const cft_params *p, cft_array **y, int *ybdim) {
    ybdim[0] = 0;
    cft_array *xb = bdim[0] < 0 ? x[0] : cft__moveaxis_b(x[0], bdim[0], 0);
    if (bdim[1] < 0 && bdim[2] < 0 && bdim[3] < 0 && bdim[4] < 0) {
        cft_array *args[5] = {cft__as_rows(xb), x[1], x[2], x[3], x[4]};
        y[0] = cft__from_rows(cft__bind1(prim, p, 5, args), &xb->aval);
        return cft_failed(y[0]) ? y[0] : NULL;
    }
    cft_dtype dt = x[0]->aval.dtype;
    cft_array *xa = cft__batch_at(x[0], bdim[0], size, 0); /* [B, M, K] */
    cft_array *q = cft__batch_at(x[1], bdim[1], size, 0),
              *s = cft__batch_at(x[2], bdim[2], size, 0);
    int64_t b3[3] = {size, 1, 1};
    cft_array *xs = cft_reshape(cft__batch_at(x[3], bdim[3], size, 0), b3, 3),
              *zp = cft_reshape(cft__batch_at(x[4], bdim[4], size, 0), b3, 3);
    cft_array *g; /* the grid value, dequantized: (g - zp) xs */
    cft__qgrid_of(xa, xs, zp, grid, p->v[XLO][0], p->v[XHI][0], &g, NULL);
    cft_array *fq = cft_mul(cft_sub(g, cft_astype(zp, dt)), cft_astype(xs, dt));
    y[0] = cft_matmul(fq, cft_mT(cft__qunpack(q, cft_astype(s, dt), p->v[K_][0])));
    return cft_failed(y[0]) ? y[0] : NULL;
}
static cft_array *dot_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return qdot_vmap(&cft_p_dot_qstatic, false, size, x, bdim, p, y, ybdim);
}
static cft_array *qint_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return qdot_vmap(&cft_p_dot_qint, true, size, x, bdim, p, y, ybdim);
}

const cft_prim cft_p_qlinear_quantize = {
    .name = "qlinear_quantize",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_NONDIFF,
    .pnames = {"#lo", "#hi"},
    .shape = quantize_shape,
    .impl = quantize_impl,
    .vmap = quantize_vmap,
};
const cft_prim cft_p_dot_qstatic = {
    .name = "dot_qstatic",
    .nin = 5,
    .nout = 1,
    .flags = CFT_PRIM_CONTRACTION,
    .pnames = {"#k", "#xlo", "#xhi"},
    .shape = dot_shape,
    .impl = dot_impl,
    .impl_into = dot_into,
    .jvp = dot_jvp,
    .vmap = dot_vmap,
    .rewrite = dot_rewrite,
};
/* dot_qwords' output is linear in wscale: its tangent is x's values (the
 * words' bytes as u8: qlinear_unpack reads them as s8) less zp, times xs,
 * times the weight's integers scaled by the tangent, in public ops (so
 * reverse mode transposes them); the words and the activation's constants
 * carry none */
static cft_array *qwords_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] = NULL;
    if (!t[2])
        return NULL;
    int64_t k = p->v[K_][0], m = x[0]->aval.shape[0];
    cft_dtype dt = x[3]->aval.dtype;
    cft_array *s8 = cft__qunpack(x[0], cft_ones(dt, &m, 1), k);
    cft_array *u8 = cft_add(s8, cft_mul_s(cft_astype(cft_lt(s8, cft_scalar(0, dt)), dt), 256));
    cft_array *xd = cft_mul(cft_sub(u8, cft_astype(x[4], dt)), x[3]);
    ty[0] = cft_matmul(xd, cft_mT(cft__qunpack(x[1], cft_astype(t[2], dt), k)));
    return cft_failed(ty[0]) ? ty[0] : NULL;
}
/* x batched alone: its batch joins the rows; else the product per example
 * (the int8 convolutions' rule, which folds x's first two dims) */
static cft_array *qwords_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return cft__qconv_vmap(&cft_p_dot_qwords, 5, size, x, bdim, p, y, ybdim);
}

const cft_prim cft_p_dot_qint = {
    .name = "dot_qint",
    .nin = 5,
    .nout = 1,
    .flags = CFT_PRIM_CONTRACTION,
    .pnames = {"#k", "#xlo", "#xhi"},
    .shape = qint_shape,
    .impl = qint_impl,
    .impl_into = qint_into,
    .jvp = qint_jvp,
    .vmap = qint_vmap,
};
const cft_prim cft_p_dot_qwords = {
    .name = "dot_qwords",
    .nin = 5,
    .nout = 1,
    .flags = CFT_PRIM_CONTRACTION,
    .pnames = {"#k", "#xlo", "#xhi"},
    .shape = qwords_shape,
    .impl = qwords_impl,
    .impl_into = qwords_into,
    .jvp = qwords_jvp,
    .vmap = qwords_vmap,
};

/* ---- for cft_quant_convert ---- */

cft_array *cft__qdot_bind(cft_array *x, cft_array *words, cft_array *ws, cft_array *xs,
                          cft_array *zp, int64_t k, int64_t xlo, int64_t xhi, bool grid) {
    cft_params p = {0};
    cft__param_set1(&p, K_, k);
    cft__param_set1(&p, XLO, xlo);
    cft__param_set1(&p, XHI, xhi);
    const cft_prim *prim = cft_array_dtype(x) == CFT_I32 ? &cft_p_dot_qwords
                           : grid                        ? &cft_p_dot_qint
                                                         : &cft_p_dot_qstatic;
    return cft__bind1(prim, &p, 5, (cft_array *[]){x, words, ws, xs, zp});
}

cft_array *cft__qstatic_quantize(cft_array *w, cft_array *ws, int64_t lo, int64_t hi) {
    cft_params p = {0};
    cft__param_set1(&p, 0, lo);
    cft__param_set1(&p, 1, hi);
    return cft__bind1(&cft_p_qlinear_quantize, &p, 2, (cft_array *[]){w, ws});
}

cft_array *cft__qstatic_linear(cft_array *x, cft_array *w, cft_array *ws, int64_t wlo, int64_t whi,
                               cft_array *xs, cft_array *zp, int64_t xlo, int64_t xhi) {
    const cft_aval *xa = &x->aval;
    int64_t k = xa->shape[xa->ndim - 1];
    cft_array *words = cft__qstatic_quantize(w, ws, wlo, whi);
    return cft__from_rows(cft__qdot_bind(cft__as_rows(x), words, ws, xs, zp, k, xlo, xhi, false),
                          xa);
}
