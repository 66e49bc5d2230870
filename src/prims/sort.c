/* sort.c: sorting along one axis and top_k, with the two small gather
 * primitives their derivatives need.
 *
 *   sort[#axis, #descending](x0, ..., xn-1) -> (x0 sorted, x1..xn-1 permuted
 *       alike, the permutation i32): sorts several same-shaped arrays by the
 *       first (a variadic-output primitive: n + 1 outputs)
 *   top_k[#k](x) -> (values [..., k], indices i32 [..., k]) along the last axis
 *   gather_along[#axis](x, idx): out[.., j, ..] = x[.., idx[.., j, ..], ..]
 *   scatter_add_along[#axis, #n](u, idx): its transpose (adds u into a
 *       zero array of length n along axis at idx)
 *
 * sort always returns its permutation: argsort is that output, and the jvp
 * gathers each operand's tangent with it (JAX instead sorts again with an
 * iota operand). top_k's jvp gathers the tangent at its indices. The
 * gathers are linear (gather_along's transpose is scatter_add_along and
 * vice versa), so jvp, vjp, vmap and higher orders compose. Indices outside
 * [0, n) are clamped (only internal callers).
 *
 * Order: keys map to order-preserving 64-bit codes (floats by their bits,
 * -0.0 as 0.0, every NaN to the largest code; ints with the sign bit
 * flipped), and (code, index) pairs are merge sorted, so NaNs come last (as
 * NumPy) and ties keep their order. Descending sorts invert the codes: the
 * reverse order (NaNs first) with ties still in order. top_k keeps the k
 * best pairs in a heap (O(n log k)), or sorts the line when k > n/8. */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"

/* ---- order codes ---- */

static uint64_t fcode(double v) {
    if (v != v)
        return UINT64_MAX;
    if (v == 0)
        v = 0; /* -0.0 == 0.0 */
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u >> 63 ? ~u : u | (1ull << 63);
}

/* the order code of element i of a line at p with element stride s */
static uint64_t code_at(const char *p, cft_dtype dt, int64_t i) {
    switch (dt) {
    case CFT_F32:
        return fcode(((const float *)p)[i]);
    case CFT_F64:
        return fcode(((const double *)p)[i]);
    case CFT_I32:
        return (uint64_t)(int64_t)((const int32_t *)p)[i] ^ (1ull << 63);
    case CFT_I64:
        return (uint64_t)((const int64_t *)p)[i] ^ (1ull << 63);
    default:
        return ((const uint8_t *)p)[i];
    }
}

/* (order code, index) pairs, ordered lexicographically: a total order, so
 * any sort of them is stable with respect to the codes */
typedef struct {
    uint64_t key;
    int64_t idx;
} kv;
static inline bool kv_less(kv a, kv b) {
    return a.key < b.key || (a.key == b.key && a.idx < b.idx);
}

/* merge sort of a[0..n) (tmp: n/2 + 1 scratch) */
static void msort(kv *a, kv *tmp, int64_t n) {
    if (n <= 16) {
        for (int64_t i = 1; i < n; i++) {
            kv v = a[i];
            int64_t j = i;
            for (; j > 0 && kv_less(v, a[j - 1]); j--)
                a[j] = a[j - 1];
            a[j] = v;
        }
        return;
    }
    int64_t m = n / 2;
    msort(a, tmp, m);
    msort(a + m, tmp, n - m);
    if (!kv_less(a[m], a[m - 1]))
        return; /* already in order */
    memcpy(tmp, a, sizeof(kv) * (size_t)m);
    int64_t i = 0, j = m, o = 0;
    while (i < m && j < n)
        a[o++] = kv_less(a[j], tmp[i]) ? a[j++] : tmp[i++];
    while (i < m)
        a[o++] = tmp[i++];
}

static int norm_axis(int a, int nd) {
    return a < 0 ? a + nd : a;
}

/* ======== sort: n operands sorted by the first, plus the permutation ======== */

static int sort_nout(const cft_params *p, int nin) {
    (void)p;
    return nin + 1;
}

static cft_array *sort_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    if (nin < 1)
        return cft__fail(CFT_E_ARG, "sort: no operands");
    int64_t ax = p->v[0][0];
    if (ax < 0 || ax >= in[0].ndim)
        return cft__fail(CFT_E_ARG, "sort: axis %lld out of range for %s", (long long)ax,
                         cft__av(&in[0]));
    if (in[0].shape[ax] > INT32_MAX)
        return cft__fail(CFT_E_SHAPE, "sort: axis %lld of %s is longer than int32 indices",
                         (long long)ax, cft__av(&in[0]));
    for (int i = 0; i < nin; i++) /* complex keys have no order; no kernel moves complex payloads */
        if (cft_dtype_is_complex(in[i].dtype))
            return cft__fail(CFT_E_DTYPE, "sort: complex operands are not supported (%s)",
                             cft__av(&in[i]));
    for (int i = 0; i < nin; i++) {
        bool same = in[i].ndim == in[0].ndim;
        for (int d = 0; same && d < in[0].ndim; d++)
            same = in[i].shape[d] == in[0].shape[d];
        if (!same)
            return cft__fail(CFT_E_SHAPE, "sort: operand %d is %s, the keys are %s", i,
                             cft__av(&in[i]), cft__av(&in[0]));
        out[i] = in[i];
    }
    out[nin] = in[0];
    out[nin].dtype = CFT_I32;
    return NULL;
}

static cft_array *sort_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    const cft_aval *a = &in[0]->aval;
    int ax = (int)p->v[0][0];
    bool desc = p->v[1][0] != 0;
    cft_array *ix = cft__alloc(CFT_I32, a->shape, a->ndim);
    if (cft_failed(ix))
        return ix;
    for (int i = 0; i < nin; i++) {
        out[i] = cft__alloc(in[i]->aval.dtype, a->shape, a->ndim);
        if (cft_failed(out[i]))
            return out[i];
    }
    int64_t ostr[CFT_MAX_NDIM], nl, n = a->shape[ax];
    cft__row_major(a->shape, a->ndim, ostr);
    int64_t so = ostr[ax];
    int64_t *ooff = cft__line_offsets(a, ostr, ax, &nl), *xoff[nin];
    for (int i = 0; i < nin; i++)
        xoff[i] = cft__line_offsets(a, in[i]->strides, ax, &nl);
    kv *pairs = cft__new_data(sizeof(kv) * (size_t)(n + 1));
    kv *tmp = cft__new_data(sizeof(kv) * (size_t)(n / 2 + 1));
    if (!ooff || !pairs || !tmp)
        return cft__oom();
    for (int i = 0; i < nin; i++)
        if (!xoff[i])
            return cft__oom();
    for (int64_t l = 0; l < nl; l++) {
        const char *keys =
            (const char *)cft__ptr(in[0]) + xoff[0][l] * (int64_t)cft_dtype_size(a->dtype);
        for (int64_t j = 0; j < n; j++) {
            uint64_t c = code_at(keys, a->dtype, j * in[0]->strides[ax]);
            pairs[j] = (kv){desc ? ~c : c, j};
        }
        msort(pairs, tmp, n);
        for (int64_t j = 0; j < n; j++)
            ((int32_t *)ix->data)[ooff[l] + j * so] = (int32_t)pairs[j].idx;
        for (int i = 0; i < nin; i++) { /* every operand permuted alike */
            int64_t es = (int64_t)cft_dtype_size(in[i]->aval.dtype), sx = in[i]->strides[ax];
            const char *line = (const char *)cft__ptr(in[i]) + xoff[i][l] * es;
            char *o = out[i]->data + ooff[l] * es;
            for (int64_t j = 0; j < n; j++)
                memcpy(o + j * so * es, line + pairs[j].idx * sx * es, (size_t)es);
        }
    }
    for (int i = 0; i < nin; i++)
        cft__keep(in[i]);
    out[nin] = ix;
    return NULL;
}

static cft_array *gather_along(cft_array *x, cft_array *idx, int axis);

/* every operand's tangent is permuted like the operand */
static cft_array *sort_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    ty[nin] = NULL;
    for (int i = 0; i < nin; i++)
        ty[i] = t[i] && cft_dtype_is_float(x[i]->aval.dtype)
                    ? gather_along(t[i], y[nin], (int)p->v[0][0])
                    : NULL;
    return NULL;
}

/* operands batched at one common axis keep it (the sort axis moves past
 * it); otherwise all are batched at the front */
static cft_array *sort_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    int b = bdim[0];
    for (int i = 1; i < nin; i++)
        if (bdim[i] != b)
            b = 0;
    if (b < 0)
        b = 0;
    cft_array *args[nin];
    for (int i = 0; i < nin; i++)
        args[i] = cft__batch_at(x[i], bdim[i], size, b);
    cft_params q = *p;
    if (b <= q.v[0][0])
        q.v[0][0]++;
    for (int i = 0; i <= nin; i++)
        ybdim[i] = b;
    return cft__bind(&cft_p_sort, &q, nin, args, nin + 1, y);
}

const cft_prim cft_p_sort = {
    .name = "sort",
    .nin = -1,
    .nout = -1,
    .nout_of = sort_nout,
    .pnames = {"#axis", "#descending"},
    .shape = sort_shape,
    .impl = sort_impl,
    .jvp = sort_jvp,
    .vmap = sort_vmap,
};

/* ======== top_k ======== */

static cft_array *topk_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    int64_t k = p->v[0][0];
    if (in[0].ndim < 1)
        return cft__fail(CFT_E_SHAPE, "top_k: needs at least one axis, got %s", cft__av(&in[0]));
    if (cft_dtype_is_complex(in[0].dtype))
        return cft__fail(CFT_E_DTYPE, "top_k: complex operands are not ordered (%s)",
                         cft__av(&in[0]));
    int64_t n = in[0].shape[in[0].ndim - 1];
    if (k < 0 || !cft__dim_ge(n, k))
        return cft__fail(CFT_E_ARG, "top_k: k = %lld out of range for %s", (long long)k,
                         cft__av(&in[0]));
    if (n > INT32_MAX)
        return cft__fail(CFT_E_SHAPE, "top_k: last axis of %s is longer than int32 indices",
                         cft__av(&in[0]));
    out[0] = in[0];
    out[0].shape[in[0].ndim - 1] = k;
    out[1] = out[0];
    out[1].dtype = CFT_I32;
    return NULL;
}

/* max-heap of the k best pairs so far, the worst at the top */
static void sift_down(kv *h, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && kv_less(h[m], h[l]))
            m = l;
        if (r < n && kv_less(h[m], h[r]))
            m = r;
        if (m == i)
            return;
        kv t = h[i];
        h[i] = h[m], h[m] = t;
        i = m;
    }
}

/* the k first pairs of a line in order: a heap when k is small against n,
 * else a full sort */
static void select_k(kv *a, kv *tmp, int64_t n, int64_t k) {
    if (k == 0)
        return;
    if (k * 8 > n) {
        msort(a, tmp, n);
        return;
    }
    for (int64_t i = k / 2; i-- > 0;)
        sift_down(a, k, i); /* heapify the first k */
    for (int64_t j = k; j < n; j++)
        if (kv_less(a[j], a[0])) { /* better than the worst kept */
            a[0] = a[j];
            sift_down(a, k, 0);
        }
    for (int64_t r = k - 1; r > 0; r--) { /* heap sort: the worst moves to the back */
        kv t = a[0];
        a[0] = a[r], a[r] = t;
        sift_down(a, r, 0);
    }
}

static cft_array *topk_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    cft_array *x = in[0];
    cft_aval o[2];
    topk_shape(&x->aval, 1, p, o);
    int ax = x->aval.ndim - 1;
    int64_t k = p->v[0][0], n = x->aval.shape[ax], sx = x->strides[ax], nl;
    cft_array *v = cft__alloc(o[0].dtype, o[0].shape, o[0].ndim);
    cft_array *ix = cft__alloc(CFT_I32, o[1].shape, o[1].ndim);
    if (cft_failed(v))
        return v;
    if (cft_failed(ix))
        return ix;
    int64_t *xoff = cft__line_offsets(&x->aval, x->strides, ax, &nl);
    kv *pairs = cft__new_data(sizeof(kv) * (size_t)(n + 1));
    kv *tmp = cft__new_data(sizeof(kv) * (size_t)(n / 2 + 1));
    if (!xoff || !pairs || !tmp)
        return cft__oom();
    int64_t es = (int64_t)cft_dtype_size(x->aval.dtype);
    const char *xp = cft__ptr(x);
    for (int64_t l = 0; l < nl; l++) {
        const char *line = xp + xoff[l] * es;
        for (int64_t j = 0; j < n; j++) /* largest first */
            pairs[j] = (kv){~code_at(line, x->aval.dtype, j * sx), j};
        select_k(pairs, tmp, n, k);
        for (int64_t j = 0; j < k; j++) {
            memcpy(v->data + (l * k + j) * es, line + pairs[j].idx * sx * es, (size_t)es);
            ((int32_t *)ix->data)[l * k + j] = (int32_t)pairs[j].idx;
        }
    }
    cft__keep(x);
    out[0] = v;
    out[1] = ix;
    return NULL;
}

static cft_array *topk_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)nin, (void)p;
    ty[0] = ty[1] = NULL;
    if (t[0] && cft_dtype_is_float(x[0]->aval.dtype))
        ty[0] = gather_along(t[0], y[1], x[0]->aval.ndim - 1);
    return NULL;
}

/* the last axis must stay last: a batch axis there moves to the front */
static cft_array *topk_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    int last = x[0]->aval.ndim - 1, b = bdim[0];
    cft_array *xb = x[0];
    if (b == last)
        xb = cft_moveaxis(xb, b, 0), b = 0;
    ybdim[0] = ybdim[1] = b;
    return cft__bind(&cft_p_top_k, p, 1, &xb, 2, y);
}

const cft_prim cft_p_top_k = {
    .name = "top_k",
    .nin = 1,
    .nout = 2,
    .pnames = {"#k"},
    .shape = topk_shape,
    .impl = topk_impl,
    .jvp = topk_jvp,
    .vmap = topk_vmap,
};

/* ======== gather_along / scatter_add_along ======== */

/* x (length n along axis) and idx (length m) agree on every other dim */
static cft_array *along_check(const char *name, const cft_aval *x, const cft_aval *idx,
                              int64_t ax) {
    if (ax < 0 || ax >= x->ndim)
        return cft__fail(CFT_E_ARG, "%s: axis %lld out of range for %s", name, (long long)ax,
                         cft__av(x));
    if (idx->dtype != CFT_I32 && idx->dtype != CFT_I64)
        return cft__fail(CFT_E_DTYPE, "%s: indices must be i32 or i64, got %s", name, cft__av(idx));
    bool ok = x->ndim == idx->ndim;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = d == ax || x->shape[d] == idx->shape[d];
    if (!ok)
        return cft__fail(CFT_E_SHAPE, "%s: operand %s and indices %s differ off axis %lld", name,
                         cft__av(x), cft__av(idx), (long long)ax);
    return NULL;
}

static cft_array *gather_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    int64_t ax = p->v[0][0];
    cft_array *e = along_check("gather_along", &in[0], &in[1], ax);
    if (e)
        return e;
    if (in[0].shape[ax] == 0 && in[1].shape[ax] != 0)
        return cft__fail(CFT_E_SHAPE, "gather_along: gathering from an empty axis of %s",
                         cft__av(&in[0]));
    out[0] = in[1];
    out[0].dtype = in[0].dtype;
    return NULL;
}

static cft_array *scatter_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    int64_t ax = p->v[0][0], n = p->v[1][0];
    cft_array *e = along_check("scatter_add_along", &in[0], &in[1], ax);
    if (e)
        return e;
    if (in[0].shape[ax] != in[1].shape[ax])
        return cft__fail(CFT_E_SHAPE, "scatter_add_along: updates %s and indices %s differ",
                         cft__av(&in[0]), cft__av(&in[1]));
    if (!cft_dim_valid(n) || (n == 0 && in[0].shape[ax] != 0))
        return cft__fail(CFT_E_ARG, "scatter_add_along: bad length %lld for %s", (long long)n,
                         cft__av(&in[0]));
    out[0] = in[0];
    out[0].shape[ax] = n;
    return NULL;
}

static int64_t read_index(const cft_array *idx, int64_t off, int64_t n) {
    int64_t v = idx->aval.dtype == CFT_I32 ? ((const int32_t *)cft__ptr(idx))[off]
                                           : ((const int64_t *)cft__ptr(idx))[off];
    return v < 0 ? 0 : v >= n ? n - 1 : v;
}

/* walk the lines of the indices (length m along axis) with their x and
 * output lines: out is contiguous of aval oav, x strided */
#define ALONG_SETUP(XARR, OAV)                                                                     \
    const cft_aval *ia = &idx->aval;                                                               \
    int64_t ostr[CFT_MAX_NDIM], nl, m = ia->shape[ax];                                             \
    cft__row_major((OAV)->shape, (OAV)->ndim, ostr);                                               \
    int64_t *ioff = cft__line_offsets(ia, idx->strides, ax, &nl);                                  \
    int64_t *xoff = cft__line_offsets(&(XARR)->aval, (XARR)->strides, ax, &nl);                    \
    int64_t *ooff = cft__line_offsets(OAV, ostr, ax, &nl);                                         \
    if (!ioff || !xoff || !ooff)                                                                   \
        return cft__oom();                                                                         \
    int64_t si = idx->strides[ax], sx = (XARR)->strides[ax], so = ostr[ax];                        \
    size_t es = cft_dtype_size((XARR)->aval.dtype)

static cft_array *gather_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    cft_array *x = in[0], *idx = in[1];
    int ax = (int)p->v[0][0];
    cft_aval oav;
    cft_array *e = gather_shape((cft_aval[]){x->aval, idx->aval}, 2, p, &oav);
    if (e)
        return e;
    cft_array *y = cft__alloc(oav.dtype, oav.shape, oav.ndim);
    if (cft_failed(y))
        return y;
    ALONG_SETUP(x, &oav);
    int64_t n = x->aval.shape[ax];
    const char *xp = cft__ptr(x);
    for (int64_t l = 0; l < nl; l++)
        for (int64_t j = 0; j < m; j++) {
            int64_t k = read_index(idx, ioff[l] + j * si, n);
            memcpy(y->data + (ooff[l] + j * so) * (int64_t)es,
                   xp + (xoff[l] + k * sx) * (int64_t)es, es);
        }
    cft__keep(x), cft__keep(idx);
    out[0] = y;
    return NULL;
}

#define SCATTER_LOOP(T, ADD)                                                                       \
    {                                                                                              \
        const T *us = cft__ptr(u);                                                                 \
        T *ys = (T *)y->data;                                                                      \
        for (int64_t l = 0; l < nl; l++)                                                           \
            for (int64_t j = 0; j < m; j++) {                                                      \
                int64_t k = read_index(idx, ioff[l] + j * si, n);                                  \
                T *d = &ys[ooff[l] + k * so];                                                      \
                T s = us[xoff[l] + j * sx];                                                        \
                *d = (T)(ADD);                                                                     \
            }                                                                                      \
    }                                                                                              \
    break

static cft_array *scatter_impl(cft_array *const *in, int nin, const cft_params *p,
                               cft_array **out) {
    (void)nin;
    cft_array *u = in[0], *idx = in[1];
    int ax = (int)p->v[0][0];
    int64_t n = p->v[1][0];
    cft_aval oav;
    cft_array *e = scatter_shape((cft_aval[]){u->aval, idx->aval}, 2, p, &oav);
    if (e)
        return e;
    cft_array *y = cft__alloc(oav.dtype, oav.shape, oav.ndim);
    if (cft_failed(y))
        return y;
    memset(y->data, 0, cft_dtype_size(oav.dtype) * (size_t)cft__numel(oav.shape, oav.ndim));
    ALONG_SETUP(u, &oav);
    (void)es;
    switch (u->aval.dtype) {
    case CFT_F32:
        SCATTER_LOOP(float, *d + s);
    case CFT_F64:
        SCATTER_LOOP(double, *d + s);
    case CFT_I32:
        SCATTER_LOOP(int32_t, (uint32_t)*d + (uint32_t)s);
    case CFT_I64:
        SCATTER_LOOP(int64_t, (uint64_t)*d + (uint64_t)s);
    case CFT_C64:
        SCATTER_LOOP(float complex, *d + s);
    case CFT_C128:
        SCATTER_LOOP(double complex, *d + s);
    default:
        SCATTER_LOOP(uint8_t, *d | s);
    }
    cft__keep(u), cft__keep(idx);
    out[0] = y;
    return NULL;
}

static cft_array *gather_along(cft_array *x, cft_array *idx, int axis) {
    cft_params p = {0};
    cft__param_set1(&p, 0, axis);
    return cft__bind1(&cft_p_gather_along, &p, 2, (cft_array *[]){x, idx});
}
static cft_array *scatter_add_along(cft_array *u, cft_array *idx, int axis, int64_t n) {
    cft_params p = {0};
    cft__param_set1(&p, 0, axis);
    cft__param_set1(&p, 1, n);
    return cft__bind1(&cft_p_scatter_add_along, &p, 2, (cft_array *[]){u, idx});
}

/* both are linear in their first operand (the indices are never linear) */
static cft_array *gather_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] = t[0] ? gather_along(t[0], x[1], (int)p->v[0][0]) : NULL;
    return NULL;
}
static cft_array *gather_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                   int nin, const cft_params *p, cft_array **ct_in) {
    (void)nin;
    int ax = (int)p->v[0][0];
    if (!x[1])
        return cft__fail(CFT_E_TRACE, "gather_along: transpose with linear indices");
    ct_in[0] = scatter_add_along(ct[0], x[1], ax, in[0].shape[ax]);
    ct_in[1] = NULL;
    return NULL;
}
static cft_array *scatter_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] = t[0] ? scatter_add_along(t[0], x[1], (int)p->v[0][0], p->v[1][0]) : NULL;
    return NULL;
}
static cft_array *scatter_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                    int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin;
    if (!x[1])
        return cft__fail(CFT_E_TRACE, "scatter_add_along: transpose with linear indices");
    ct_in[0] = gather_along(ct[0], x[1], (int)p->v[0][0]);
    ct_in[1] = NULL;
    return NULL;
}

/* both operands batched at the front; the axis moves up by one */
static cft_array *along_vmap(const cft_prim *prim, int64_t size, cft_array *const *x,
                             const int *bdim, const cft_params *p, cft_array **y, int *ybdim) {
    cft_params q = *p;
    q.v[0][0]++;
    cft_array *args[2] = {cft__batch_at(x[0], bdim[0], size, 0),
                          cft__batch_at(x[1], bdim[1], size, 0)};
    ybdim[0] = 0;
    return cft__bind(prim, &q, 2, args, 1, y);
}
static cft_array *gather_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return along_vmap(&cft_p_gather_along, size, x, bdim, p, y, ybdim);
}
static cft_array *scatter_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                               const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return along_vmap(&cft_p_scatter_add_along, size, x, bdim, p, y, ybdim);
}

const cft_prim cft_p_gather_along = {
    .name = "gather_along",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"#axis"},
    .shape = gather_shape,
    .impl = gather_impl,
    .jvp = gather_jvp,
    .transpose = gather_transpose,
    .vmap = gather_vmap,
};
const cft_prim cft_p_scatter_add_along = {
    .name = "scatter_add_along",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"#axis", "#n"},
    .shape = scatter_shape,
    .impl = scatter_impl,
    .jvp = scatter_jvp,
    .transpose = scatter_transpose,
    .vmap = scatter_vmap,
};

/* ======== public ops ======== */

/* bind sort on n operands: y gets n + 1 outputs (the last the permutation);
 * returns NULL or the error (then in every y[i]) */
static cft_array *sort_bind(const char *op, cft_array *const *xs, int n, int axis, bool desc,
                            cft_array **y) {
    cft_array *e = NULL;
    for (int i = 0; !e && i < n; i++) {
        if (!xs[i])
            e = cft__fail(CFT_E_ARG, "%s: argument %d is NULL", op, i);
        else if (cft_failed(xs[i]))
            e = xs[i];
        else if (xs[i]->aval.ndim != xs[0]->aval.ndim ||
                 memcmp(xs[i]->aval.shape, xs[0]->aval.shape,
                        sizeof(int64_t) * (size_t)xs[0]->aval.ndim))
            e = cft__fail(CFT_E_SHAPE, "%s: array %d is %s, the keys are %s", op, i,
                          cft__av(&xs[i]->aval), cft__av(&xs[0]->aval));
    }
    int a = e ? 0 : norm_axis(axis, xs[0]->aval.ndim);
    if (!e && (a < 0 || a >= xs[0]->aval.ndim))
        e = cft__fail(CFT_E_ARG, "%s: axis %d out of range for %s", op, axis,
                      cft__av(&xs[0]->aval));
    if (!e) {
        cft_params p = {0};
        cft__param_set1(&p, 0, a);
        cft__param_set1(&p, 1, desc);
        e = cft__bind(&cft_p_sort, &p, n, xs, n + 1, y);
    }
    if (e)
        for (int i = 0; i <= n; i++)
            y[i] = e;
    return e;
}

cft_array *cft_sort(cft_array *x, int axis, bool descending) {
    CFT_API("cft_sort");
    cft_array *y[2];
    sort_bind("cft_sort", &x, 1, axis, descending, y);
    return y[0];
}
cft_array *cft_argsort(cft_array *x, int axis, bool descending) {
    CFT_API("cft_argsort");
    cft_array *y[2];
    sort_bind("cft_argsort", &x, 1, axis, descending, y);
    return y[1];
}

cft_status cft_sort_multi(cft_array *const *xs, int n, int axis, bool descending, cft_array **out) {
    CFT_API("cft_sort_multi");
    if (!xs || !out || n < 1) {
        cft_array *e = cft__fail(CFT_E_ARG, "cft_sort_multi: no arrays (n = %d)", n);
        for (int i = 0; out && i < n; i++)
            out[i] = e;
        return cft__set_last(e);
    }
    cft_array *y[n + 1];
    cft_array *e = sort_bind("cft_sort_multi", xs, n, axis, descending, y);
    for (int i = 0; i < n; i++)
        out[i] = y[i];
    return e ? cft__set_last(e) : CFT_OK;
}

cft_status cft_top_k(cft_array *x, int64_t k, cft_array **values, cft_array **indices) {
    CFT_API("cft_top_k");
    cft_array *y[2], *e = NULL;
    if (!x)
        e = cft__fail(CFT_E_ARG, "cft_top_k: argument 0 is NULL");
    else if (cft_failed(x))
        e = x;
    else if (x->aval.ndim < 1 || k < 0 || !cft__dim_ge(x->aval.shape[x->aval.ndim - 1], k))
        e = cft__fail(CFT_E_ARG, "cft_top_k: k = %lld does not fit %s", (long long)k,
                      cft__av(&x->aval));
    if (!e) {
        cft_params p = {0};
        cft__param_set1(&p, 0, k);
        e = cft__bind(&cft_p_top_k, &p, 1, &x, 2, y);
    }
    if (e)
        y[0] = y[1] = e;
    if (values)
        *values = y[0];
    if (indices)
        *indices = y[1];
    return e ? cft__set_last(e) : CFT_OK;
}
