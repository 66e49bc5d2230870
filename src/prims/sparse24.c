/* sparse24.c: 2:4 semi-structured sparsity (torch's
 * to_sparse_semi_structured). A weight W [..., N, K] whose every group of
 * four consecutive entries along K (the reduction dim) keeps at most two is
 * stored as its kept values [..., N, K/2] and their positions: two 2-bit
 * indices per group, a group per 4 bits, 8 groups per i32 word, so the
 * metadata is [..., N, ceil(K/32)] i32 (K/4 bytes per row, as the values of
 * an f32 row take 2K). Any i32 word is valid metadata: a group whose two
 * indices coincide holds the sum of its two values there.
 *
 * Four primitives, each with every rule:
 *   sparse24_meta(W)                the positions of each group's two
 *                                   largest magnitudes (ties: the lower
 *                                   index); no derivative
 *   sparse24_gather(W, meta)        the values at those positions; linear
 *   sparse24_densify(values, meta)  the dense W back (zeros elsewhere);
 *                                   linear, the transpose of gather
 *   dot_sparse24(x, values, meta)   x [M, K] times W^T: [M, N] (F.linear's
 *                                   convention); bilinear, with the mask
 *                                   fixed: the gradient of the values is
 *                                   the dense one gathered at the kept
 *                                   positions
 * The product's kernel skips the zeros: rows of x are taken sixteen at a
 * time, transposed so that the sixteen values of one column are contiguous,
 * and each kept weight is a broadcast multiply-add on them. */
#include <stdlib.h>
#include <string.h>

#include "cft/sparse.h"
#include "core/mem.h"
#include "core/par.h"
#include "prims/rules.h"

extern const cft_prim cft_p_sparse24_meta, cft_p_sparse24_gather, cft_p_sparse24_densify,
    cft_p_dot_sparse24;

int64_t cft__s24_meta_words(int64_t k) {
    return (k / 4 + 7) / 8;
}

/* index j (0 or 1) of group g in a row's metadata */
static inline int meta_at(const int32_t *m, int64_t g, int j) {
    return (int)(((uint32_t)m[g / 8] >> (4 * (g % 8) + 2 * j)) & 3u);
}

/* ---- shape rules ---- */

static cft_array *check_k(const char *op, int64_t k, const cft_aval *a) {
    if (cft__dim_maybe_sym(k))
        return cft__fail(CFT_E_SHAPE, "%s: the reduction dim of %s must be concrete", op,
                         cft__av(a));
    if (k % 4)
        return cft__fail(CFT_E_SHAPE,
                         "%s: the reduction dim of %s is %lld, not a multiple of 4 (2:4 groups)",
                         op, cft__av(a), (long long)k);
    return NULL;
}

static cft_array *check_float(const char *op, const cft_aval *a) {
    if (!cft_dtype_is_float(a->dtype))
        return cft__fail(CFT_E_DTYPE, "%s: %s must be float", op, cft__av(a));
    return NULL;
}

/* meta [..., N, words] must match the rows of a [..., N, *] and k */
static cft_array *check_meta(const char *op, const cft_aval *a, const cft_aval *m, int64_t k) {
    if (m->dtype != CFT_I32)
        return cft__fail(CFT_E_DTYPE, "%s: the metadata %s must be i32", op, cft__av(m));
    bool ok = m->ndim == a->ndim && m->ndim >= 1 && m->shape[m->ndim - 1] == cft__s24_meta_words(k);
    for (int d = 0; ok && d < a->ndim - 1; d++)
        ok = m->shape[d] == a->shape[d];
    if (!ok)
        return cft__fail(CFT_E_SHAPE,
                         "%s: metadata %s does not fit %s (want its leading dims and %lld words "
                         "for K = %lld)",
                         op, cft__av(m), cft__av(a), (long long)cft__s24_meta_words(k),
                         (long long)k);
    return NULL;
}

/* a float weight [..., K] with K a concrete multiple of 4: *k = K */
static cft_array *check_weight(const char *op, const cft_aval *a, int64_t *k) {
    *k = 0;
    if (a->ndim < 1)
        return cft__fail(CFT_E_SHAPE, "%s: %s has no reduction dim", op, cft__av(a));
    *k = a->shape[a->ndim - 1];
    cft_array *e = check_float(op, a);
    return e ? e : check_k(op, *k, a);
}

static cft_array *meta_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    int64_t k = 0;
    cft_array *e = check_weight("sparse24_meta", &in[0], &k);
    if (e)
        return e;
    *out = in[0];
    out->dtype = CFT_I32;
    out->shape[out->ndim - 1] = cft__s24_meta_words(k);
    return NULL;
}

static cft_array *gather_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    const char *op = "sparse24_gather";
    int64_t k = 0;
    cft_array *e = check_weight(op, &in[0], &k);
    if (!e)
        e = check_meta(op, &in[0], &in[1], k);
    if (e)
        return e;
    *out = in[0];
    out->shape[out->ndim - 1] = k / 2;
    return NULL;
}

static cft_array *densify_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    const char *op = "sparse24_densify";
    if (in[0].ndim < 1)
        return cft__fail(CFT_E_SHAPE, "%s: %s has no kept-values dim", op, cft__av(&in[0]));
    int64_t h = in[0].shape[in[0].ndim - 1], k = 2 * h;
    cft_array *e = check_float(op, &in[0]);
    if (!e)
        e = check_k(op, cft__dim_maybe_sym(h) ? h : k, &in[0]);
    if (!e)
        e = check_meta(op, &in[0], &in[1], k);
    if (e)
        return e;
    *out = in[0];
    out->shape[out->ndim - 1] = k;
    return NULL;
}

static cft_array *dot_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    const char *op = "dot_sparse24";
    const cft_aval *x = &in[0], *v = &in[1];
    if (x->ndim != 2 || v->ndim != 2)
        return cft__fail(CFT_E_SHAPE, "%s: x %s and values %s must be matrices", op, cft__av(x),
                         cft__av(v));
    int64_t k = x->shape[1];
    cft_array *e = check_float(op, x);
    if (!e)
        e = check_float(op, v);
    if (!e && x->dtype != v->dtype)
        e = cft__fail(CFT_E_DTYPE, "%s: x %s and values %s differ in dtype", op, cft__av(x),
                      cft__av(v));
    if (!e)
        e = check_k(op, k, x);
    if (!e && v->shape[1] != k / 2)
        e = cft__fail(CFT_E_SHAPE, "%s: values %s do not fit x %s (want %lld kept per row)", op,
                      cft__av(v), cft__av(x), (long long)(k / 2));
    if (!e)
        e = check_meta(op, v, &in[2], k);
    if (e)
        return e;
    *out = cft__aval(x->dtype, (int64_t[]){x->shape[0], v->shape[0]}, 2);
    return NULL;
}

/* ---- kernels (f32 and f64; half inputs arrive widened to f32) ---- */

/* the magnitudes of n values of dtype dt, as doubles (one conversion pass,
 * not a dtype switch per element) */
static double *magnitudes(const void *w, cft_dtype dt, int64_t n) {
    double *m =
        cft__scratch(CFT_SCRATCH_S24, sizeof(double) * (size_t)(n > 0 ? n : 1), (size_t)1 << 28);
    if (!m)
        return NULL;
    cft__cast(w, dt, m, CFT_F64, n);
    for (int64_t i = 0; i < n; i++)
        m[i] = m[i] < 0 ? -m[i] : m[i];
    return m;
}

static cft_array *meta_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    cft_array *w = cft__contig(in[0]);
    if (cft_failed(w))
        return w;
    cft_aval oa;
    cft_array *e = meta_shape(&w->aval, 1, NULL, &oa);
    if (e)
        return e;
    cft_array *m = cft__alloc(CFT_I32, oa.shape, oa.ndim);
    if (cft_failed(m))
        return m;
    int64_t r = cft__numel(w->aval.shape, w->aval.ndim - 1), k = w->aval.shape[w->aval.ndim - 1],
            nw = cft__s24_meta_words(k);
    int32_t *mp = cft__ptr(m);
    memset(mp, 0, sizeof(int32_t) * (size_t)(r * nw));
    const double *mag = magnitudes(cft__ptr(w), w->aval.dtype, r * k);
    if (!mag)
        return cft__oom();
    for (int64_t i = 0; i < r; i++)
        for (int64_t g = 0; g < k / 4; g++) {
            const double *q = mag + i * k + 4 * g;
            int a = 0, b = 1; /* the two largest, the lower index first on ties */
            if (q[1] > q[0])
                a = 1, b = 0;
            for (int c = 2; c < 4; c++) {
                if (q[c] > q[a])
                    b = a, a = c;
                else if (q[c] > q[b])
                    b = c;
            }
            int lo = a < b ? a : b, hi = a < b ? b : a;
            mp[i * nw + g / 8] =
                (int32_t)((uint32_t)mp[i * nw + g / 8] | (uint32_t)(lo | hi << 2) << (4 * (g % 8)));
        }
    out[0] = m;
    return NULL;
}

#define GATHER_LOOP(T)                                                                             \
    for (int64_t i = 0; i < r; i++)                                                                \
        for (int64_t g = 0; g < k / 4; g++)                                                        \
            for (int j = 0; j < 2; j++)                                                            \
    ((T *)vp)[i * k / 2 + 2 * g + j] = ((const T *)wp)[i * k + 4 * g + meta_at(mp + i * nw, g, j)]

static cft_array *gather_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    cft_array *w = cft__contig(in[0]), *m = cft__contig(in[1]);
    if (cft_failed(w) || cft_failed(m))
        return cft_failed(w) ? w : m;
    cft_aval oa;
    cft_array *e = gather_shape((cft_aval[]){w->aval, m->aval}, 2, NULL, &oa);
    if (e)
        return e;
    cft_array *v = cft__alloc(oa.dtype, oa.shape, oa.ndim);
    if (cft_failed(v))
        return v;
    int64_t r = cft__numel(w->aval.shape, w->aval.ndim - 1), k = w->aval.shape[w->aval.ndim - 1],
            nw = cft__s24_meta_words(k);
    const int32_t *mp = cft__ptr(m);
    const void *wp = cft__ptr(w);
    void *vp = cft__ptr(v);
    if (oa.dtype == CFT_F64)
        GATHER_LOOP(double);
    else
        GATHER_LOOP(float);
    out[0] = v;
    return NULL;
}

#define DENSIFY_LOOP(T)                                                                            \
    for (int64_t i = 0; i < r; i++)                                                                \
        for (int64_t g = 0; g < k / 4; g++)                                                        \
            for (int j = 0; j < 2; j++)                                                            \
    ((T *)wp)[i * k + 4 * g + meta_at(mp + i * nw, g, j)] += ((const T *)vp)[i * k / 2 + 2 * g + j]

static cft_array *densify_impl(cft_array *const *in, int nin, const cft_params *p,
                               cft_array **out) {
    (void)nin, (void)p;
    cft_array *v = cft__contig(in[0]), *m = cft__contig(in[1]);
    if (cft_failed(v) || cft_failed(m))
        return cft_failed(v) ? v : m;
    cft_aval oa;
    cft_array *e = densify_shape((cft_aval[]){v->aval, m->aval}, 2, NULL, &oa);
    if (e)
        return e;
    cft_array *w = cft__alloc(oa.dtype, oa.shape, oa.ndim);
    if (cft_failed(w))
        return w;
    int64_t r = cft__numel(oa.shape, oa.ndim - 1), k = oa.shape[oa.ndim - 1],
            nw = cft__s24_meta_words(k);
    memset(cft__ptr(w), 0, cft_dtype_size(oa.dtype) * (size_t)(r * k));
    const int32_t *mp = cft__ptr(m);
    const void *vp = cft__ptr(v);
    void *wp = cft__ptr(w);
    if (oa.dtype == CFT_F64)
        DENSIFY_LOOP(double);
    else
        DENSIFY_LOOP(float);
    out[0] = w;
    return NULL;
}

/* y [M, N] = x [M, K] W^T, W given by its kept values and their absolute
 * columns idx [N, K/2]. Rows of x in blocks of two 32-byte vectors' worth
 * (16 f32, 8 f64): xt [K][lanes] holds the block transposed, so a kept
 * weight is two vector multiply-adds. GCC's vector types give one
 * instruction per vector in the AVX2/AVX-512 clones and two SSE ones in the
 * baseline (the loop vectorizer, left to itself, gathers instead). Four
 * outputs are summed at once: eight independent chains of multiply-adds
 * (two had left the FMA units waiting on each sum's latency), and the
 * four outputs' kept columns lie in the same groups of four rows of xt, so
 * the lines one loads serve the others. Each output's sum keeps its order
 * (q ascending), fused multiply-adds in the clones that have them (the
 * same bits in every call of one process; 256 x 512 by a 2:4 512 x 512,
 * Zen 4, 2 threads: 1.5x the dense GEMM's time with two chains and
 * separate multiplies and adds, 1.10x now). */
typedef struct {
    const void *x, *v;
    const int32_t *idx;
    void *y;
    int64_t m, n, k;
    bool dbl;
    volatile bool oom; /* a thread could not get its scratch block */
} spmm_ctx;

#if defined(__clang__) || defined(__SANITIZE_THREAD__)
#define SPMM_CLONES
#else
#define SPMM_CLONES                                                                                \
    __attribute__((optimize("fp-contract=fast"),                                                   \
                   target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

#define SPMM_BLOCKS(NAME, T, VT)                                                                   \
    static SPMM_CLONES void NAME(spmm_ctx *c, int64_t lo, int64_t hi) {                            \
        enum { W = sizeof(VT) / sizeof(T), L = 2 * W, JB = 4 };                                    \
        const T *x = c->x, *v = c->v;                                                              \
        T *y = c->y;                                                                               \
        int64_t h = c->k / 2, k = c->k, n = c->n;                                                  \
        VT *xt = aligned_alloc(sizeof(VT), sizeof(VT) * 2 * (size_t)(k > 0 ? k : 1));              \
        if (!xt) {                                                                                 \
            c->oom = true;                                                                         \
            return;                                                                                \
        }                                                                                          \
        for (int64_t b = lo; b < hi; b++) {                                                        \
            int64_t r0 = b * L, nr = c->m - r0 < L ? c->m - r0 : L;                                \
            for (int64_t kk = 0; kk < k; kk++)                                                     \
                for (int l = 0; l < L; l++)                                                        \
                    xt[2 * kk + l / W][l % W] = l < nr ? x[(r0 + l) * k + kk] : 0;                 \
            for (int64_t j0 = 0; j0 < n; j0 += JB) {                                               \
                int nj = n - j0 < JB ? (int)(n - j0) : JB;                                         \
                VT a[JB][2];                                                                       \
                const T *vj[JB];                                                                   \
                const int32_t *ij[JB];                                                             \
                _Pragma("GCC unroll 4") for (int jj = 0; jj < JB; jj++) {                          \
                    int64_t j = j0 + (jj < nj ? jj : 0); /* past n: column j0 again, dropped */    \
                    vj[jj] = v + j * h, ij[jj] = c->idx + j * h;                                   \
                    a[jj][0] = (VT){0}, a[jj][1] = (VT){0};                                        \
                }                                                                                  \
                for (int64_t q = 0; q < h; q++)                                                    \
                    _Pragma("GCC unroll 4") for (int jj = 0; jj < JB; jj++) {                      \
                        const VT *col = xt + 2 * (int64_t)ij[jj][q];                               \
                        a[jj][0] += vj[jj][q] * col[0];                                            \
                        a[jj][1] += vj[jj][q] * col[1];                                            \
                    }                                                                              \
                for (int jj = 0; jj < nj; jj++)                                                    \
                    for (int l = 0; l < nr; l++)                                                   \
                        y[(r0 + l) * n + j0 + jj] = l < W ? a[jj][0][l] : a[jj][1][l - W];         \
            }                                                                                      \
        }                                                                                          \
        free(xt);                                                                                  \
    }

typedef float spmm_v8f __attribute__((vector_size(32)));
typedef double spmm_v4d __attribute__((vector_size(32)));
SPMM_BLOCKS(spmm_f32, float, spmm_v8f)
SPMM_BLOCKS(spmm_f64, double, spmm_v4d)

static void spmm_body(void *ctx, int64_t lo, int64_t hi) {
    spmm_ctx *c = ctx;
    if (c->dbl)
        spmm_f64(c, lo, hi);
    else
        spmm_f32(c, lo, hi);
}

static cft_array *dot_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    cft_array *x = cft__contig(in[0]), *v = cft__contig(in[1]), *m = cft__contig(in[2]);
    if (cft_failed(x) || cft_failed(v) || cft_failed(m))
        return cft_failed(x) ? x : cft_failed(v) ? v : m;
    cft_aval oa;
    cft_array *e = dot_shape((cft_aval[]){x->aval, v->aval, m->aval}, 3, NULL, &oa);
    if (e)
        return e;
    int64_t M = x->aval.shape[0], N = v->aval.shape[0], K = x->aval.shape[1], h = K / 2;
    cft_array *y = cft__alloc(oa.dtype, oa.shape, 2);
    if (cft_failed(y))
        return y;
    int32_t *idx = cft__new_data(sizeof(int32_t) * (size_t)(N * h > 0 ? N * h : 1));
    if (!idx)
        return cft__oom();
    const int32_t *mp = cft__ptr(m);
    int64_t nw = cft__s24_meta_words(K);
    for (int64_t j = 0; j < N; j++)
        for (int64_t g = 0; g < K / 4; g++)
            for (int s = 0; s < 2; s++)
                idx[j * h + 2 * g + s] = (int32_t)(4 * g + meta_at(mp + j * nw, g, s));
    spmm_ctx c = {cft__ptr(x), cft__ptr(v), idx, cft__ptr(y), M, N, K, oa.dtype == CFT_F64, false};
    int64_t lanes = oa.dtype == CFT_F64 ? 8 : 16;
    cft__par_for((M + lanes - 1) / lanes, (double)lanes * (double)N * (double)h, spmm_body, &c);
    if (c.oom)
        return cft__oom();
    out[0] = y;
    return NULL;
}

/* ---- differentiation ---- */

static cft_array *bind2(const cft_prim *p, cft_array *a, cft_array *b) {
    return cft__bind1(p, NULL, 2, (cft_array *[]){a, b});
}

static cft_array *gather_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)y, (void)nin, (void)p;
    ty[0] = t[0] ? bind2(&cft_p_sparse24_gather, t[0], x[1]) : NULL;
    return NULL;
}
static cft_array *gather_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                   int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin, (void)p;
    ct_in[0] = bind2(&cft_p_sparse24_densify, ct[0], x[1]);
    ct_in[1] = NULL;
    return NULL;
}
static cft_array *densify_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)y, (void)nin, (void)p;
    ty[0] = t[0] ? bind2(&cft_p_sparse24_densify, t[0], x[1]) : NULL;
    return NULL;
}
static cft_array *densify_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                    int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin, (void)p;
    ct_in[0] = bind2(&cft_p_sparse24_gather, ct[0], x[1]);
    ct_in[1] = NULL;
    return NULL;
}

static cft_array *dot3(cft_array *x, cft_array *v, cft_array *m) {
    return cft__bind1(&cft_p_dot_sparse24, NULL, 3, (cft_array *[]){x, v, m});
}
static cft_array *dot_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)y, (void)nin, (void)p;
    ty[0] = cft__tadd(t[0] ? dot3(t[0], x[1], x[2]) : NULL, t[1] ? dot3(x[0], t[1], x[2]) : NULL);
    return NULL;
}
/* y = x W^T: ct_x = ct W; ct_W = ct^T x, of which the values get the kept
 * positions (the mask is fixed) */
static cft_array *dot_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin, (void)p;
    if (!x[0] && !x[1])
        return cft__fail(CFT_E_TRACE, "dot_sparse24: transpose of a product of two linear values");
    ct_in[0] = x[0] ? NULL : cft_matmul(ct[0], bind2(&cft_p_sparse24_densify, x[1], x[2]));
    ct_in[1] = x[1] ? NULL : bind2(&cft_p_sparse24_gather, cft_matmul(cft_mT(ct[0]), x[0]), x[2]);
    ct_in[2] = NULL;
    return NULL;
}

/* ---- batching ---- */

/* meta, gather, densify work on any leading dims: batch both at axis 0 */
static cft_array *rows_vmap(const cft_prim *p, int64_t size, cft_array *const *x, const int *bdim,
                            int nin, cft_array **y, int *ybdim) {
    cft_array *in[2];
    for (int i = 0; i < nin; i++) {
        in[i] = cft__batch_at(x[i], bdim[i], size, 0);
        if (cft_failed(in[i]))
            return in[i];
    }
    y[0] = cft__bind1(p, NULL, nin, in);
    ybdim[0] = 0;
    return cft_failed(y[0]) ? y[0] : NULL;
}
static cft_array *meta_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)p;
    return rows_vmap(&cft_p_sparse24_meta, size, x, bdim, nin, y, ybdim);
}
static cft_array *gather_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    (void)p;
    return rows_vmap(&cft_p_sparse24_gather, size, x, bdim, nin, y, ybdim);
}
static cft_array *densify_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                               const cft_params *p, cft_array **y, int *ybdim) {
    (void)p;
    return rows_vmap(&cft_p_sparse24_densify, size, x, bdim, nin, y, ybdim);
}

/* x batched alone: its batch joins the rows (the sparse kernel runs once);
 * batched weights: densify them per example and multiply batched */
static cft_array *dot_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin, (void)p;
    ybdim[0] = 0;
    if (bdim[1] < 0 && bdim[2] < 0) {
        cft_array *xb = cft__moveaxis_b(x[0], bdim[0], 0);
        y[0] = cft__from_rows(dot3(cft__as_rows(xb), x[1], x[2]), &xb->aval);
        return cft_failed(y[0]) ? y[0] : NULL;
    }
    cft_array *v = cft__batch_at(x[1], bdim[1], size, 0),
              *m = cft__batch_at(x[2], bdim[2], size, 0);
    cft_array *w = bind2(&cft_p_sparse24_densify, v, m); /* [B, N, K] */
    cft_array *xb = bdim[0] < 0 ? x[0] : cft__moveaxis_b(x[0], bdim[0], 0);
    y[0] = cft_matmul(xb, cft_mT(w));
    return cft_failed(y[0]) ? y[0] : NULL;
}

/* ---- records ---- */

const cft_prim cft_p_sparse24_meta = {
    .name = "sparse24_meta",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_NONDIFF,
    .shape = meta_shape,
    .impl = meta_impl,
    .dev_kernel = cft__s24meta_dev_kernel,
    .vmap = meta_vmap,
};
const cft_prim cft_p_sparse24_gather = {
    .name = "sparse24_gather",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .shape = gather_shape,
    .impl = gather_impl,
    .dev_kernel = cft__s24gather_dev_kernel,
    .jvp = gather_jvp,
    .transpose = gather_transpose,
    .vmap = gather_vmap,
};
const cft_prim cft_p_sparse24_densify = {
    .name = "sparse24_densify",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .shape = densify_shape,
    .impl = densify_impl,
    .dev_kernel = cft__s24densify_dev_kernel,
    .jvp = densify_jvp,
    .transpose = densify_transpose,
    .vmap = densify_vmap,
};
const cft_prim cft_p_dot_sparse24 = {
    .name = "dot_sparse24",
    .nin = 3,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_CONTRACTION | CFT_PRIM_AMP_LOW,
    .shape = dot_shape,
    .impl = dot_impl,
    .dev_kernel = cft__s24dot_dev_kernel,
    .jvp = dot_jvp,
    .transpose = dot_transpose,
    .vmap = dot_vmap,
};

/* ---- public ops ---- */

cft_array *cft_sparse24_meta(cft_array *w) {
    CFT_PROPAGATE("cft_sparse24_meta", w);
    return cft__bind1(&cft_p_sparse24_meta, NULL, 1, &w);
}

cft_sparse24 cft_sparse24_compress(cft_array *w) {
    CFT_API("cft_sparse24_compress");
    cft_array *m = cft_sparse24_meta(w);
    cft_sparse24 s = {m, m};
    if (!cft_failed(m))
        s.values = bind2(&cft_p_sparse24_gather, w, m);
    if (cft_failed(s.values))
        s.meta = s.values;
    return s;
}

cft_array *cft_sparse24_to_dense(cft_sparse24 s) {
    CFT_PROPAGATE("cft_sparse24_to_dense", s.values, s.meta);
    return bind2(&cft_p_sparse24_densify, s.values, s.meta);
}

cft_array *cft_prune_24(cft_array *w) {
    CFT_API("cft_prune_24");
    return cft_sparse24_to_dense(cft_sparse24_compress(w));
}

cft_array *cft_sparse24_linear(cft_array *x, cft_sparse24 s) {
    CFT_PROPAGATE("cft_sparse24_linear", x, s.values, s.meta);
    const cft_aval *xa = &x->aval, *va = &s.values->aval;
    if (xa->ndim < 1 || va->ndim != 2)
        return cft__fail(CFT_E_SHAPE,
                         "cft_sparse24_linear: x %s needs a last dim and the values %s must be "
                         "[N, K/2]",
                         cft__av(xa), cft__av(va));
    cft_dtype dt = cft_promote(xa->dtype, va->dtype);
    cft_array *v = cft_astype(s.values, dt), *xx = cft_astype(x, dt);
    return cft__from_rows(dot3(cft__as_rows(xx), v, s.meta), xa);
}
