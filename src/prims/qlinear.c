/* qlinear.c: int8 linear layers (torch's dynamically quantized Linear).
 * A weight W [..., N, K] is stored as s8 values, row n symmetric with
 * scale[n] = max|W[n]| / 127, packed four to an i32 word (byte b of word j
 * is column 4j + b, in memory order, so the words of a row are the row's
 * bytes). The product quantizes each row of x on the fly, symmetric in
 * [-63, 63] (per token, so rows are independent and a batch folds into
 * them), multiplies u8 (x + 64) by s8 in int32 on oneDNN's integer GEMM
 * (VNNI, AMX-INT8 or AVX2 as the CPU has; a C loop without oneDNN), and
 * scales back: y[m, n] = xs[m] scale[n] acc[m, n]. Seven bits for x, as
 * torch's reduce_range: a CPU without VNNI adds pairs of u8 * s8 products
 * in 16 bits (vpmaddubsw), which saturate at 2 * 255 * 127; with u8 below
 * 128 they cannot, so every CPU computes the same exact integers.
 *
 * Primitives, each with its rules:
 *   qlinear_pack(W)            -> (words, scale); no derivative
 *   qlinear_unpack(words, scale) the f32 weight back; linear in scale
 *   dot_qlinear(x, words, scale) the product. Its jvp is the straight-
 *                              through estimator: the derivative of x
 *                              times the unpacked weight, as if x were
 *                              not rounded. */
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

#ifdef CFT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

extern const cft_prim cft_p_qlinear_pack, cft_p_qlinear_unpack, cft_p_dot_qlinear;

#define words_of cft__qwords
#define is_real_float cft__qreal_float

/* ---- shapes ---- */

static cft_array *pack_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    const cft_aval *w = &in[0];
    if (w->ndim < 2 || !cft_dtype_is_float(w->dtype))
        return cft__fail(CFT_E_SHAPE, "qlinear_pack: the weight %s must be a float [..., N, K]",
                         cft__av(w));
    if (cft__dim_maybe_sym(w->shape[w->ndim - 1]))
        return cft__fail(CFT_E_SHAPE, "qlinear_pack: K of %s must be concrete", cft__av(w));
    out[0] = *w, out[0].dtype = CFT_I32;
    out[0].shape[w->ndim - 1] = words_of(w->shape[w->ndim - 1]);
    out[1] = *w, out[1].dtype = CFT_F32, out[1].ndim = w->ndim - 1;
    return NULL;
}

cft_array *cft__qcheck_packed(const char *op, const cft_aval *q, const cft_aval *s, int64_t k) {
    if (k < 0 || k > (INT64_C(1) << 40))
        return cft__fail(CFT_E_SHAPE, "%s: K = %lld is not a size", op, (long long)k);
    bool ok = q->dtype == CFT_I32 && is_real_float(s->dtype) && q->ndim >= 2 &&
              s->ndim == q->ndim - 1 && q->shape[q->ndim - 1] == words_of(k);
    for (int d = 0; ok && d < s->ndim; d++)
        ok = s->shape[d] == q->shape[d];
    if (!ok)
        return cft__fail(CFT_E_SHAPE,
                         "%s: packed weight %s and scale %s do not fit (want i32 [..., N, %lld] "
                         "and f32 or f64 [..., N] for K = %lld)",
                         op, cft__av(q), cft__av(s), (long long)words_of(k), (long long)k);
    return NULL;
}

static cft_array *unpack_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    int64_t k = p->v[0][0];
    cft_array *e = cft__qcheck_packed("qlinear_unpack", &in[0], &in[1], k);
    if (e)
        return e;
    out[0] = in[0], out[0].dtype = in[1].dtype, out[0].shape[in[0].ndim - 1] = k;
    return NULL;
}

static cft_array *dot_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    const cft_aval *x = &in[0];
    if (x->ndim != 2 || !is_real_float(x->dtype) || in[1].ndim != 2)
        return cft__fail(CFT_E_SHAPE,
                         "dot_qlinear: x %s must be f32 or f64 [M, K] and the weight [N, KW]",
                         cft__av(x));
    if (x->shape[1] != p->v[0][0])
        return cft__fail(CFT_E_SHAPE, "dot_qlinear: x %s does not fit a weight of K = %lld",
                         cft__av(x), (long long)p->v[0][0]);
    cft_array *e = cft__qcheck_packed("dot_qlinear", &in[1], &in[2], x->shape[1]);
    if (e)
        return e;
    *out = cft__aval(x->dtype, (int64_t[]){x->shape[0], in[1].shape[0]}, 2);
    return NULL;
}

/* ---- kernels ---- */

static cft_array *pack_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    cft_aval oa[2];
    cft_array *w = cft__contig(in[0]);
    if (cft_failed(w))
        return w;
    cft_array *e = pack_shape(&w->aval, 1, NULL, oa);
    if (e)
        return e;
    int64_t r = cft__numel(w->aval.shape, w->aval.ndim - 1), k = w->aval.shape[w->aval.ndim - 1],
            kw = words_of(k);
    cft_array *q = cft__alloc(CFT_I32, oa[0].shape, oa[0].ndim);
    cft_array *s = cft__alloc(CFT_F32, oa[1].shape, oa[1].ndim);
    if (cft_failed(q) || cft_failed(s))
        return cft_failed(q) ? q : s;
    int8_t *qb = cft__ptr(q);
    float *sp = cft__ptr(s);
    memset(qb, 0, (size_t)(r * kw * 4));
    for (int64_t i = 0; i < r; i++) {
        double m = 0;
        for (int64_t j = 0; j < k; j++)
            m = fmax(m, fabs(cft__get(cft__ptr(w), w->aval.dtype, i * k + j)));
        float sc = m > 0 ? (float)(m / 127) : 1.0f;
        sp[i] = sc;
        for (int64_t j = 0; j < k; j++) {
            double v = nearbyint(cft__get(cft__ptr(w), w->aval.dtype, i * k + j) / sc);
            qb[i * kw * 4 + j] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
    out[0] = q, out[1] = s;
    return NULL;
}

static cft_array *unpack_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    cft_array *q = cft__contig(in[0]), *s = cft__contig(in[1]);
    if (cft_failed(q) || cft_failed(s))
        return cft_failed(q) ? q : s;
    cft_aval oa;
    cft_array *e = unpack_shape((cft_aval[]){q->aval, s->aval}, 2, p, &oa);
    if (e)
        return e;
    cft_array *w = cft__alloc(oa.dtype, oa.shape, oa.ndim);
    if (cft_failed(w))
        return w;
    int64_t r = cft__numel(oa.shape, oa.ndim - 1), k = p->v[0][0], kw = words_of(k);
    const int8_t *qb = cft__ptr(q);
    for (int64_t i = 0; i < r; i++) {
        double sc = cft__get(cft__ptr(s), s->aval.dtype, i);
        for (int64_t j = 0; j < k; j++) {
            if (oa.dtype == CFT_F64)
                ((double *)cft__ptr(w))[i * k + j] = (double)qb[i * kw * 4 + j] * sc;
            else
                ((float *)cft__ptr(w))[i * k + j] = (float)qb[i * kw * 4 + j] * (float)sc;
        }
    }
    out[0] = w;
    return NULL;
}

typedef struct {
    const int32_t *acc;
    const double *xs, *sc;
    void *y;
    int64_t n;
    bool dbl;
} scale_rows;

/* y[m, n] = xs[m] sc[n] acc[m, n] */
static CFT_VEC void scale_body(void *ctx, int64_t lo, int64_t hi) {
    const scale_rows *c = ctx;
    for (int64_t m = lo; m < hi; m++) {
        const int32_t *a = c->acc + m * c->n;
        double f = c->xs[m];
        if (c->dbl)
            for (int64_t j = 0; j < c->n; j++)
                ((double *)c->y)[m * c->n + j] = f * c->sc[j] * (double)a[j];
        else
            for (int64_t j = 0; j < c->n; j++)
                ((float *)c->y)[m * c->n + j] = (float)(f * c->sc[j] * (double)a[j]);
    }
}

_Atomic bool cft__qmatmul_dnnl_on = true;

void cft__qgemm(int64_t M, int64_t N, int64_t K, const uint8_t *xq, int32_t ao, const int8_t *wq,
                int64_t ldw, int32_t *acc) {
#ifdef CFT_HAVE_DNNL
    /* few outputs (a classifier): oneDNN's matmul primitive, faster
     * there (qmatmul_dnnl.c); the GEMM call where it declines */
    if (cft__qmatmul_dnnl_on && N <= CFT_QMATMUL_MAX_N && ao >= 0 && ao <= 255 &&
        cft__qmatmul_dnnl(M, N, K, xq, ao, wq, ldw, acc))
        return;
    const int32_t co = 0;
    if (ao >= 0 && ao <= 255 &&
        dnnl_gemm_u8s8s32('N', 'T', 'F', M, N, K, 1.0f, xq, K, (uint8_t)ao, wq, ldw, 0, 0.0f, acc,
                          N, &co) == dnnl_success)
        return;
#endif
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            int32_t s = 0;
            for (int64_t j = 0; j < K; j++)
                s += ((int32_t)xq[m * K + j] - ao) * (int32_t)wq[n * ldw + j];
            acc[m * N + n] = s;
        }
}

bool cft__qgemm_exact_u8(void) {
#ifdef CFT_HAVE_DNNL
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_vnni || isa == dnnl_cpu_isa_avx512_core_bf16 ||
           isa == dnnl_cpu_isa_avx512_core_amx;
#else
    return true; /* the C loop */
#endif
}

void *cft__qscratch(int slot, size_t n) {
    return cft__scratch(slot, n, (size_t)1 << 28);
}

void cft__qscale_rows(const int32_t *acc, const double *xs, const double *sc, void *y, int64_t M,
                      int64_t N, bool dbl) {
    scale_rows sr = {acc, xs, sc, y, N, dbl};
    cft__par_for(M, 2.0 * (double)N, scale_body, &sr);
}
void cft__qscale_range(const int32_t *acc, const double *xs, const double *sc, void *y, int64_t N,
                       bool dbl, int64_t lo, int64_t hi) {
    scale_rows sr = {acc, xs, sc, y, N, dbl};
    scale_body(&sr, lo, hi);
}

static cft_array *dot_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    cft_array *x = cft__contig(in[0]), *q = cft__contig(in[1]), *s = cft__contig(in[2]);
    if (cft_failed(x) || cft_failed(q) || cft_failed(s))
        return cft_failed(x) ? x : cft_failed(q) ? q : s;
    cft_aval oa;
    cft_array *e = dot_shape((cft_aval[]){x->aval, q->aval, s->aval}, 3, p, &oa);
    if (e)
        return e;
    int64_t M = x->aval.shape[0], K = x->aval.shape[1], N = q->aval.shape[0];
    cft_array *y = cft__alloc(oa.dtype, oa.shape, 2);
    if (cft_failed(y))
        return y;
    /* scratch: acc [M, N] | xs [M] | xq [M, K] */
    size_t oxs = ((size_t)(M * N) * 4 + 63) / 64 * 64, oxq = oxs + (size_t)M * 8;
    char *buf = cft__qscratch(CFT_SCRATCH_QIN, oxq + (size_t)(M * K) + 1);
    if (!buf)
        return cft__oom();
    int32_t *acc = (int32_t *)buf;
    double *xs = (double *)(buf + oxs);
    uint8_t *xq = (uint8_t *)(buf + oxq);
    cft__qdyn_rows(cft__ptr(x), oa.dtype == CFT_F64, M, K, xq, xs);
    cft__qgemm(M, N, K, xq, 64, cft__ptr(q), q->aval.shape[1] * 4, acc);
    double *sc = cft__new_data(sizeof(double) * (size_t)(N > 0 ? N : 1));
    if (!sc)
        return cft__oom();
    cft__cast(cft__ptr(s), s->aval.dtype, sc, CFT_F64, N);
    cft__qscale_rows(acc, xs, sc, cft__ptr(y), M, N, oa.dtype == CFT_F64);
    out[0] = y;
    return NULL;
}

/* round half to even (the rint primitive: one instruction in a kernel) */
cft_array *cft__round_half_even(cft_array *x) {
    return cft_rint(x);
}

/* ---- rules ---- */

cft_array *cft__qunpack(cft_array *q, cft_array *s, int64_t k) {
    cft_params p = {0};
    cft__param_set1(&p, 0, k);
    return cft__bind1(&cft_p_qlinear_unpack, &p, 2, (cft_array *[]){q, s});
}

static cft_array *unpack_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] = t[1] ? cft__qunpack(x[0], t[1], p->v[0][0]) : NULL;
    return NULL;
}
/* y = q * s[n]: the scale's cotangent sums ct * q over each row */
static cft_array *unpack_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                   int nin, const cft_params *p, cft_array **ct_in) {
    (void)nin;
    ct_in[0] = NULL;
    cft_array *ones = cft_ones(in[1].dtype, in[1].shape, in[1].ndim);
    int ax = -1;
    ct_in[1] = cft_sum(cft_mul(ct[0], cft__qunpack(x[0], ones, p->v[0][0])), &ax, 1, false);
    return cft_failed(ct_in[1]) ? ct_in[1] : NULL;
}

static cft_array *dot3(cft_array *x, cft_array *q, cft_array *s, int64_t k) {
    cft_params p = {0};
    cft__param_set1(&p, 0, k);
    return cft__bind1(&cft_p_dot_qlinear, &p, 3, (cft_array *[]){x, q, s});
}

/* the straight-through estimator: the derivative of x W^T with W the
 * unpacked weight, as if x were not rounded */
static cft_array *dot_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)y, (void)nin, (void)p;
    cft_dtype dt = x[0]->aval.dtype;
    int64_t k = x[0]->aval.shape[1];
    cft_array *tx = NULL, *ts = NULL;
    if (t[0])
        tx = cft_matmul(t[0], cft_mT(cft__qunpack(x[1], cft_astype(x[2], dt), k)));
    if (t[2])
        ts = cft_matmul(x[0], cft_mT(cft__qunpack(x[1], cft_astype(t[2], dt), k)));
    ty[0] = cft__tadd(tx, ts);
    return NULL;
}

static cft_array *pack_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    cft_array *w = cft__moveaxis_b(x[0], bdim[0], 0);
    cft_array *e = cft__bind(&cft_p_qlinear_pack, p, 1, &w, 2, y);
    ybdim[0] = ybdim[1] = 0;
    return e;
}

static cft_array *unpack_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    cft_array *q = cft__batch_at(x[0], bdim[0], size, 0),
              *s = cft__batch_at(x[1], bdim[1], size, 0);
    y[0] = cft__qunpack(q, s, p->v[0][0]);
    ybdim[0] = 0;
    return cft_failed(y[0]) ? y[0] : NULL;
}

/* x batched alone: its batch joins the rows (each row is quantized on its
 * own, so this is the loop's result); batched weights: the same
 * arithmetic in ops, per example (integer products are exact in f32 up to
 * K = 1040, in f64 always) */
static cft_array *dot_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    ybdim[0] = 0;
    cft_array *xb = bdim[0] < 0 ? x[0] : cft__moveaxis_b(x[0], bdim[0], 0);
    if (bdim[1] < 0 && bdim[2] < 0) {
        y[0] = cft__from_rows(dot3(cft__as_rows(xb), x[1], x[2], p->v[0][0]), &xb->aval);
        return cft_failed(y[0]) ? y[0] : NULL;
    }
    cft_dtype dt = x[0]->aval.dtype;
    int64_t k = xb->aval.shape[xb->aval.ndim - 1];
    cft_array *q = cft__batch_at(x[1], bdim[1], size, 0),
              *s = cft__batch_at(x[2], bdim[2], size, 0);
    cft_array *wi = cft__qunpack(q, cft_ones_like(s), k); /* integer values, [B, N, K] */
    int ax = -1;
    cft_array *mx = cft_max(cft_abs(xb), &ax, 1, true);
    cft_array *zero = cft_eq(mx, cft_zeros_like(mx));
    cft_array *xs = cft_where(zero, cft_ones_like(mx), cft_div(mx, cft_scalar(63, dt)));
    cft_array *inv = cft_where(zero, cft_ones_like(mx), cft_div(cft_scalar(63, dt), mx));
    cft_array *xq =
        cft_clamp(cft__round_half_even(cft_mul(xb, inv)), cft_scalar(-63, dt), cft_scalar(63, dt));
    cft_array *acc = cft_matmul(xq, cft_mT(cft_astype(wi, dt)));
    int64_t bs[3] = {size, 1, s->aval.shape[1]};
    y[0] = cft_mul(cft_mul(xs, cft_astype(cft_reshape(s, bs, 3), dt)), acc);
    return cft_failed(y[0]) ? y[0] : NULL;
}

const cft_prim cft_p_qlinear_pack = {
    .name = "qlinear_pack",
    .nin = 1,
    .nout = 2,
    .flags = CFT_PRIM_NONDIFF,
    .shape = pack_shape,
    .impl = pack_impl,
    .vmap = pack_vmap,
};
const cft_prim cft_p_qlinear_unpack = {
    .name = "qlinear_unpack",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"#k"},
    .shape = unpack_shape,
    .impl = unpack_impl,
    .jvp = unpack_jvp,
    .transpose = unpack_transpose,
    .vmap = unpack_vmap,
};
const cft_prim cft_p_dot_qlinear = {
    .name = "dot_qlinear",
    .nin = 3,
    .nout = 1,
    .flags = CFT_PRIM_CONTRACTION,
    .pnames = {"#k"},
    .shape = dot_shape,
    .impl = dot_impl,
    .jvp = dot_jvp,
    .vmap = dot_vmap,
};

/* ---- public ops ---- */

cft_qlinear cft_qlinear_pack(cft_array *w) {
    CFT_API("cft_qlinear_pack");
    cft_qlinear q = {w, w, 0};
    if (!w || cft_failed(w)) {
        q.w = q.scale = w ? w : cft__fail(CFT_E_ARG, "cft_qlinear_pack: NULL weight");
        return q;
    }
    cft_array *y[2];
    cft_array *e = cft__bind(&cft_p_qlinear_pack, NULL, 1, &w, 2, y);
    q.w = e ? e : y[0], q.scale = e ? e : y[1];
    q.k = w->aval.ndim ? w->aval.shape[w->aval.ndim - 1] : 0;
    return q;
}

cft_array *cft_qlinear_unpack(cft_qlinear q) {
    CFT_PROPAGATE("cft_qlinear_unpack", q.w, q.scale);
    return cft__qunpack(q.w, q.scale, q.k);
}

cft_array *cft_qlinear_apply(cft_array *x, cft_qlinear q) {
    CFT_PROPAGATE("cft_qlinear_apply", x, q.w, q.scale);
    const cft_aval *xa = &x->aval;
    if (xa->ndim < 1 || q.w->aval.ndim != 2 || xa->shape[xa->ndim - 1] != q.k)
        return cft__fail(CFT_E_SHAPE,
                         "cft_qlinear_apply: x %s does not fit the int8 weight %s of K = %lld",
                         cft__av(xa), cft__av(&q.w->aval), (long long)q.k);
    cft_array *xx = is_real_float(xa->dtype) ? x : cft_astype(x, CFT_F32);
    return cft__from_rows(dot3(cft__as_rows(xx), q.w, q.scale, q.k), xa);
}
