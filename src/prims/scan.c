/* scan.c: cumulative reductions along one axis, as jax.lax: cumsum,
 * cumprod, cummax, cummin and cumlogsumexp, parameters #axis and #reverse
 * (scan from the end). Each is one record with all its rules, followed by
 * the public ops. cumsum is linear (its transpose is the reverse cumsum).
 * The other jvps are linear recurrences h_i = a_i h_{i-1} + b_i in scan
 * order, solved with a log-depth (Hillis-Steele) scan written with pad,
 * mul and add, so they are exact where a closed form is not (cumprod at
 * zeros), numerically stable (cumlogsumexp's a_i and b_i lie in [0, 1]),
 * differentiable again, and transposable for reverse mode. Kernels walk
 * each line along the axis with strides; float sums and products
 * accumulate in double. */
#include <math.h>

#include "core/error.h"
#include "prims/rules.h"

enum { C_SUM, C_PROD, C_MAX, C_MIN, C_LSE };

int64_t *cft__line_offsets(const cft_aval *a, const int64_t *strides, int axis, int64_t *count) {
    int64_t m = 1, idx[CFT_MAX_NDIM] = {0};
    for (int d = 0; d < a->ndim; d++)
        if (d != axis)
            m *= a->shape[d];
    *count = m;
    int64_t *offs = cft__new_data(sizeof(int64_t) * (size_t)(m > 0 ? m : 1));
    if (!offs)
        return NULL;
    for (int64_t i = 0; i < m; i++) {
        int64_t off = 0;
        for (int d = 0; d < a->ndim; d++)
            off += idx[d] * strides[d];
        offs[i] = off;
        for (int d = a->ndim - 1; d >= 0; d--) { /* next index, skipping the axis */
            if (d == axis)
                continue;
            if (++idx[d] < a->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return offs;
}

/* ---- shape ---- */

static const char *const cum_names[] = {"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"};
static const int cum_classes[] = {CFT_DT_NUM, CFT_DT_NUM, CFT_DT_ANY, CFT_DT_ANY, CFT_DT_FLOAT};

static cft_array *cum_shape(int op, const cft_aval *in, const cft_params *p, cft_aval *out) {
    int64_t ax = p->v[0][0];
    if (ax < 0 || ax >= in[0].ndim)
        return cft__fail(CFT_E_ARG, "%s: axis %lld out of range for %s", cum_names[op],
                         (long long)ax, cft__av(&in[0]));
    if (!cft__dtype_in(in[0].dtype, cum_classes[op]))
        return cft__fail(CFT_E_DTYPE, "%s: dtype %s not supported (%s)", cum_names[op],
                         cft_dtype_name(in[0].dtype), cft__av(&in[0]));
    *out = in[0];
    return NULL;
}

/* ---- kernels ---- */

/* log(e^a + e^b) without overflow; NaN propagates */
static double logaddexp(double a, double b) {
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    double m = a > b ? a : b;
    if (m == INFINITY)
        return m;
    return m + log1p(exp(-fabs(a - b)));
}

#define FMAX(acc, v) ((v) > (acc) || (v) != (v) ? (v) : (acc))
#define FMIN(acc, v) ((v) < (acc) || (v) != (v) ? (v) : (acc))
#define IMAX(acc, v) ((v) > (acc) ? (v) : (acc))
#define IMIN(acc, v) ((v) < (acc) ? (v) : (acc))

/* one line: n elements at xs[k*sx], written to ys[k*sy], k in scan order;
 * the first element starts the accumulator */
#define CUM_LINE(T, ACC, STEP)                                                                     \
    {                                                                                              \
        const T *xs = (const T *)cft__ptr(x) + xoff[l];                                            \
        T *ys = (T *)y->data + yoff[l];                                                            \
        ACC acc = 0;                                                                               \
        for (int64_t j = 0; j < n; j++) {                                                          \
            int64_t k = rev ? n - 1 - j : j;                                                       \
            ACC v = (ACC)xs[k * sx];                                                               \
            acc = j ? (ACC)(STEP) : v;                                                             \
            ys[k * sy] = (T)acc;                                                                   \
        }                                                                                          \
    }                                                                                              \
    break

static cft_array *cum_run(int op, cft_array *const *in, const cft_params *p, cft_array **out) {
    cft_array *x = in[0];
    const cft_aval *a = &x->aval;
    int ax = (int)p->v[0][0];
    bool rev = p->v[1][0] != 0;
    cft_array *y = cft__alloc(a->dtype, a->shape, a->ndim);
    if (cft_failed(y))
        return y;
    int64_t ystr[CFT_MAX_NDIM], nl;
    cft__row_major(a->shape, a->ndim, ystr);
    int64_t *xoff = cft__line_offsets(a, x->strides, ax, &nl);
    int64_t *yoff = cft__line_offsets(a, ystr, ax, &nl);
    if (!xoff || !yoff)
        return cft__oom();
    int64_t n = a->shape[ax], sx = x->strides[ax], sy = ystr[ax];
    for (int64_t l = 0; l < nl; l++) {
        switch (op * 8 + (int)a->dtype) {
        case C_SUM * 8 + CFT_F32:
            CUM_LINE(float, double, acc + v);
        case C_SUM * 8 + CFT_F64:
            CUM_LINE(double, double, acc + v);
        case C_SUM * 8 + CFT_I32:
            CUM_LINE(int32_t, uint64_t, acc + v);
        case C_SUM * 8 + CFT_I64:
            CUM_LINE(int64_t, uint64_t, acc + v);
        case C_PROD * 8 + CFT_F32:
            CUM_LINE(float, double, acc *v);
        case C_PROD * 8 + CFT_F64:
            CUM_LINE(double, double, acc *v);
        case C_PROD * 8 + CFT_I32:
            CUM_LINE(int32_t, uint64_t, acc * v);
        case C_PROD * 8 + CFT_I64:
            CUM_LINE(int64_t, uint64_t, acc * v);
        case C_MAX * 8 + CFT_F32:
            CUM_LINE(float, float, FMAX(acc, v));
        case C_MAX * 8 + CFT_F64:
            CUM_LINE(double, double, FMAX(acc, v));
        case C_MAX * 8 + CFT_I32:
            CUM_LINE(int32_t, int32_t, IMAX(acc, v));
        case C_MAX * 8 + CFT_I64:
            CUM_LINE(int64_t, int64_t, IMAX(acc, v));
        case C_MAX * 8 + CFT_BOOL:
            CUM_LINE(uint8_t, uint8_t, IMAX(acc, v));
        case C_MIN * 8 + CFT_F32:
            CUM_LINE(float, float, FMIN(acc, v));
        case C_MIN * 8 + CFT_F64:
            CUM_LINE(double, double, FMIN(acc, v));
        case C_MIN * 8 + CFT_I32:
            CUM_LINE(int32_t, int32_t, IMIN(acc, v));
        case C_MIN * 8 + CFT_I64:
            CUM_LINE(int64_t, int64_t, IMIN(acc, v));
        case C_MIN * 8 + CFT_BOOL:
            CUM_LINE(uint8_t, uint8_t, IMIN(acc, v));
        case C_LSE * 8 + CFT_F32:
            CUM_LINE(float, double, logaddexp(acc, v));
        case C_LSE * 8 + CFT_F64:
            CUM_LINE(double, double, logaddexp(acc, v));
        default:
            break;
        }
    }
    cft__keep(x);
    out[0] = y;
    return NULL;
}

/* ---- rules shared by the five ---- */

static cft_array *cum_bind(const cft_prim *prim, cft_array *x, int axis, bool reverse) {
    cft_params p = {0};
    cft__param_set1(&p, 0, axis);
    cft__param_set1(&p, 1, reverse);
    return cft__bind1(prim, &p, 1, &x);
}

/* the axis moves past the batch axis */
static cft_array *cum_vmap(const cft_prim *prim, cft_array *const *x, const int *bdim,
                           const cft_params *p, cft_array **y, int *ybdim) {
    cft_params q = *p;
    if (bdim[0] <= q.v[0][0])
        q.v[0][0]++;
    y[0] = cft__bind1(prim, &q, 1, x);
    ybdim[0] = bdim[0];
    return NULL;
}

/* x shifted by s along axis in scan order (element i gets element i - s,
 * or i + s when reversed), the vacated end filled with `fill` */
static cft_array *shift(cft_array *x, int64_t s, int axis, bool rev, double fill) {
    int64_t lo[CFT_MAX_NDIM] = {0}, hi[CFT_MAX_NDIM] = {0};
    lo[axis] = rev ? -s : s;
    hi[axis] = rev ? s : -s;
    return cft_pad(x, cft_scalar(fill, x->aval.dtype), lo, hi, NULL);
}

/* h_i = a_i h_{i-1} + b_i in scan order with h_{-1} = 0. Log-depth scan:
 * after the step of span s, (a_i, b_i) is the composition of the affine
 * maps over the last 2s elements up to i. Linear in b (NULL: zero). */
static cft_array *linrec(cft_array *a, cft_array *b, int axis, bool rev) {
    if (!b)
        return NULL;
    int64_t n = b->aval.shape[axis];
    if (cft_dim_is_symbolic(n)) /* the steps below are unrolled over n */
        return cft__fail(CFT_E_SHAPE,
                         "cumulative scan: the derivative along a symbolic axis (%s of %s) is "
                         "not supported",
                         cft__dim_s(n), cft__av(&b->aval));
    for (int64_t s = 1; s < n; s *= 2) {
        b = cft_add(b, cft_mul(a, shift(b, s, axis, rev, 0)));
        if (2 * s < n)
            a = cft_mul(a, shift(a, s, axis, rev, 1));
    }
    return b;
}

#define CUM_RECORD(NAME, OP)                                                                       \
    static cft_array *NAME##_shape(const cft_aval *in, int nin, const cft_params *p,               \
                                   cft_aval *out) {                                                \
        (void)nin;                                                                                 \
        return cum_shape(OP, in, p, out);                                                          \
    }                                                                                              \
    static cft_array *NAME##_impl(cft_array *const *in, int nin, const cft_params *p,              \
                                  cft_array **out) {                                               \
        (void)nin;                                                                                 \
        return cum_run(OP, in, p, out);                                                            \
    }                                                                                              \
    static cft_array *NAME##_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,     \
                                  const cft_params *p, cft_array **y, int *ybdim) {                \
        (void)size, (void)nin;                                                                     \
        return cum_vmap(&cft_p_##NAME, x, bdim, p, y, ybdim);                                      \
    }

CUM_RECORD(cumsum, C_SUM)
CUM_RECORD(cumprod, C_PROD)
CUM_RECORD(cummax, C_MAX)
CUM_RECORD(cummin, C_MIN)
CUM_RECORD(cumlogsumexp, C_LSE)

#define AXIS(p) ((int)(p)->v[0][0])
#define REV(p) ((p)->v[1][0] != 0)

/* ---- cumsum: linear ---- */

static cft_array *cumsum_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    ty[0] = t[0] ? cft__bind1(&cft_p_cumsum, p, 1, t) : NULL;
    return NULL;
}
/* the transpose of a prefix sum is the suffix sum */
static cft_array *cumsum_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                   int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin;
    ct_in[0] = cum_bind(&cft_p_cumsum, ct[0], AXIS(p), !REV(p));
    return NULL;
}

/* ---- cumprod: dy_i = x_i dy_{i-1} + y_{i-1} t_i ---- */

static cft_array *cumprod_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)nin;
    ty[0] = NULL;
    if (!t[0] || !cft_dtype_is_float(x[0]->aval.dtype))
        return NULL;
    int ax = AXIS(p);
    bool rev = REV(p);
    ty[0] = linrec(x[0], cft_mul(shift(y[0], 1, ax, rev, 1), t[0]), ax, rev);
    return NULL;
}

/* ---- cummax / cummin: the tangent of the running extreme ----
 * Element i is a record when it reaches the running extreme: !(x_i < y_{i-1})
 * for max (so NaN and the first element, against a NaN fill, are records).
 * dy_i = t_i at records, dy_{i-1} elsewhere: a = !record, b = record ? t : 0.
 * On ties the later element (in scan order) takes the tangent, as torch's
 * cummax routes its gradient to the last of the tied elements. */
static cft_array *extreme_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              const cft_params *p, bool is_max, cft_array **ty) {
    ty[0] = NULL;
    if (!t[0] || !cft_dtype_is_float(x[0]->aval.dtype))
        return NULL;
    int ax = AXIS(p);
    bool rev = REV(p);
    cft_array *prev = shift(y[0], 1, ax, rev, NAN);
    cft_array *keep = is_max ? cft_lt(x[0], prev) : cft_gt(x[0], prev);
    cft_array *a = cft__convert(keep, x[0]->aval.dtype);
    cft_array *b = cft__select(keep, cft_zeros_like(t[0]), t[0]);
    ty[0] = linrec(a, b, ax, rev);
    return NULL;
}
static cft_array *cummax_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)nin;
    return extreme_jvp(x, y, t, p, true, ty);
}
static cft_array *cummin_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)nin;
    return extreme_jvp(x, y, t, p, false, ty);
}

/* ---- cumlogsumexp: dy_i = e^(y_{i-1} - y_i) dy_{i-1} + e^(x_i - y_i) t_i ---- */

static cft_array *cumlogsumexp_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                                   int nin, const cft_params *p, cft_array **ty) {
    (void)nin;
    ty[0] = NULL;
    if (!t[0])
        return NULL;
    int ax = AXIS(p);
    bool rev = REV(p);
    cft_array *a = cft_exp(cft_sub(shift(y[0], 1, ax, rev, -INFINITY), y[0]));
    cft_array *b = cft_mul(t[0], cft_exp(cft_sub(x[0], y[0])));
    ty[0] = linrec(a, b, ax, rev);
    return NULL;
}

#define PNAMES                                                                                     \
    { "#axis", "#reverse" }
const cft_prim cft_p_cumsum = {
    .name = "cumsum",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = PNAMES,
    .shape = cumsum_shape,
    .impl = cumsum_impl,
    .jvp = cumsum_jvp,
    .transpose = cumsum_transpose,
    .vmap = cumsum_vmap,
};
const cft_prim cft_p_cumprod = {
    .name = "cumprod",
    .nin = 1,
    .nout = 1,
    .pnames = PNAMES,
    .shape = cumprod_shape,
    .impl = cumprod_impl,
    .jvp = cumprod_jvp,
    .vmap = cumprod_vmap,
};
const cft_prim cft_p_cummax = {
    .name = "cummax",
    .nin = 1,
    .nout = 1,
    .pnames = PNAMES,
    .shape = cummax_shape,
    .impl = cummax_impl,
    .jvp = cummax_jvp,
    .vmap = cummax_vmap,
};
const cft_prim cft_p_cummin = {
    .name = "cummin",
    .nin = 1,
    .nout = 1,
    .pnames = PNAMES,
    .shape = cummin_shape,
    .impl = cummin_impl,
    .jvp = cummin_jvp,
    .vmap = cummin_vmap,
};
const cft_prim cft_p_cumlogsumexp = {
    .name = "cumlogsumexp",
    .nin = 1,
    .nout = 1,
    .pnames = PNAMES,
    .shape = cumlogsumexp_shape,
    .impl = cumlogsumexp_impl,
    .jvp = cumlogsumexp_jvp,
    .vmap = cumlogsumexp_vmap,
};

/* ---- public ops ---- */

static cft_array *cum_op(const char *op, const cft_prim *prim, cft_array *x, int axis,
                         bool reverse) {
    CFT_PROPAGATE(op, x);
    int nd = x->aval.ndim, a = axis < 0 ? axis + nd : axis;
    if (a < 0 || a >= nd)
        return cft__fail(CFT_E_ARG, "%s: axis %d out of range for %s", op, axis, cft__av(&x->aval));
    return cum_bind(prim, x, a, reverse);
}

cft_array *cft_cumsum(cft_array *x, int axis, bool reverse) {
    CFT_API("cft_cumsum");
    if (x && !cft_failed(x) && x->aval.dtype == CFT_BOOL)
        x = cft__convert(x, CFT_I32);
    return cum_op("cft_cumsum", &cft_p_cumsum, x, axis, reverse);
}
cft_array *cft_cumprod(cft_array *x, int axis, bool reverse) {
    CFT_API("cft_cumprod");
    if (x && !cft_failed(x) && x->aval.dtype == CFT_BOOL)
        x = cft__convert(x, CFT_I32);
    return cum_op("cft_cumprod", &cft_p_cumprod, x, axis, reverse);
}
cft_array *cft_cummax(cft_array *x, int axis, bool reverse) {
    CFT_API("cft_cummax");
    return cum_op("cft_cummax", &cft_p_cummax, x, axis, reverse);
}
cft_array *cft_cummin(cft_array *x, int axis, bool reverse) {
    CFT_API("cft_cummin");
    return cum_op("cft_cummin", &cft_p_cummin, x, axis, reverse);
}
cft_array *cft_cumlogsumexp(cft_array *x, int axis, bool reverse) {
    CFT_API("cft_cumlogsumexp");
    if (x && !cft_failed(x) && !cft_dtype_is_float(x->aval.dtype))
        x = cft__convert(x, CFT_F32);
    return cum_op("cft_cumlogsumexp", &cft_p_cumlogsumexp, x, axis, reverse);
}
