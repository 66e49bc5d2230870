/* ew_extra.c: elementwise primitives that do not fit a unary.def or
 * binary.def row. clamp(lo, x, hi) is ternary (jax.lax.clamp's operand
 * order); it is fused by the jit like the rows (c_expr over c, x, y).
 * integer_pow[#y] takes its exponent as a parameter, which the elementwise
 * family's C expressions cannot carry, so it is a structural primitive with
 * its own loop: not flagged elementwise, and the jit runs it eagerly. */

#include "prims/rules.h"

/* ======== clamp(lo, x, hi) = min(max(x, lo), hi) ======== */

/* The one expression of the kernel and the generated code: c = lo, y = hi. */
#define CLAMP_EXPR ((x < c ? c : x) > y ? y : (x < c ? c : x))
#define STR_(e) #e
#define STR(e) STR_(e)

static cft_array *clamp_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)p;
    cft_array *e = cft__ew_shape("clamp", in, nin, out);
    if (e)
        return e;
    if (!cft__dtype_in(in[0].dtype, CFT_DT_NUM))
        return cft__fail(CFT_E_DTYPE, "clamp: dtype %s not supported (%s)",
                         cft_dtype_name(in[0].dtype), cft__av(&in[1]));
    return NULL;
}

static bool bcast_scalar(const cft_array *x) {
    for (int i = 0; i < x->aval.ndim; i++)
        if (x->strides[i] != 0 && x->aval.shape[i] != 1)
            return false;
    return true;
}

#define CLAMP_LOOP(T)                                                                              \
    {                                                                                              \
        const T *cs = cft__ptr(a[0]), *xs = cft__ptr(a[1]), *ys = cft__ptr(a[2]);                  \
        T *os = (T *)o->data;                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T c = cs[i * s[0]], x = xs[i * s[1]], y = ys[i * s[2]];                                \
            os[i] = (T)CLAMP_EXPR;                                                                 \
        }                                                                                          \
    }                                                                                              \
    break

/* operands broadcast from one element (scalar bounds) are read with stride 0 */
static cft_array *clamp_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    cft_array *a[3];
    int64_t s[3];
    for (int k = 0; k < 3; k++) {
        s[k] = !bcast_scalar(in[k]);
        a[k] = s[k] ? cft__contig(in[k]) : in[k];
        if (cft_failed(a[k]))
            return a[k];
    }
    const cft_aval *av = &in[1]->aval;
    cft_array *o = cft__alloc(av->dtype, av->shape, av->ndim);
    if (cft_failed(o))
        return o;
    int64_t n = cft__numel(av->shape, av->ndim);
    switch (av->dtype) {
    case CFT_F32:
        CLAMP_LOOP(float);
    case CFT_F64:
        CLAMP_LOOP(double);
    case CFT_I32:
        CLAMP_LOOP(int32_t);
    case CFT_I64:
        CLAMP_LOOP(int64_t);
    default:
        break;
    }
    cft__keep(a[0]), cft__keep(a[1]), cft__keep(a[2]);
    out[0] = o;
    return NULL;
}

/* the derivative of the composition: m = x < lo ? lo : x; m > hi ? hi : m */
static cft_array *clamp_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                            const cft_params *p, cft_array **ty) {
    (void)y, (void)nin, (void)p;
    ty[0] = NULL;
    if ((!t[0] && !t[1] && !t[2]) || !cft_dtype_is_float(x[1]->aval.dtype))
        return NULL;
    const cft_aval *av = &x[1]->aval;
    cft_array *below = cft_lt(x[1], x[0]);
    cft_array *above = cft_gt(cft__select(below, x[0], x[1]), x[2]);
    cft_array *tm = cft__select(below, cft__inst(t[0], av), cft__inst(t[1], av));
    ty[0] = cft__select(above, cft__inst(t[2], av), tm);
    return NULL;
}

static cft_array *clamp_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                             const cft_params *p, cft_array **y, int *ybdim) {
    return cft__ew_vmap(&cft_p_clamp, size, x, bdim, nin, p, y, ybdim);
}

const cft_prim cft_p_clamp = {
    .name = "clamp",
    .nin = 3,
    .nout = 1,
    .flags = CFT_PRIM_ELEMENTWISE,
    .shape = clamp_shape,
    .impl = clamp_impl,
    .jvp = clamp_jvp,
    .vmap = clamp_vmap,
    .c_expr = STR(CLAMP_EXPR),
};

cft_array *cft_clamp(cft_array *x, cft_array *lo, cft_array *hi) {
    CFT_PROPAGATE("cft_clamp", x, lo, hi);
    cft_dtype dt = cft_promote(x->aval.dtype, cft_promote(lo->aval.dtype, hi->aval.dtype));
    cft_array *xs[3] = {cft__convert(lo, dt), cft__convert(x, dt), cft__convert(hi, dt)};
    /* NumPy broadcast of the three shapes */
    int nd = 0;
    for (int k = 0; k < 3; k++)
        if (xs[k]->aval.ndim > nd)
            nd = xs[k]->aval.ndim;
    int64_t shape[CFT_MAX_NDIM];
    for (int i = 0; i < nd; i++)
        shape[i] = 1;
    for (int k = 0; k < 3; k++) {
        const cft_aval *a = &xs[k]->aval;
        for (int i = 0; i < a->ndim; i++) {
            int64_t d = a->shape[i], *sh = &shape[nd - a->ndim + i];
            if (d == *sh || d == 1)
                continue;
            if (*sh != 1)
                return cft__fail(CFT_E_SHAPE,
                                 "cft_clamp: shapes do not broadcast: x %s, lo %s, hi %s",
                                 cft__av(&x->aval), cft__av(&lo->aval), cft__av(&hi->aval));
            *sh = d;
        }
    }
    for (int k = 0; k < 3; k++)
        xs[k] = cft_broadcast_to(xs[k], shape, nd);
    return cft__bind1(&cft_p_clamp, NULL, 3, xs);
}

/* ======== integer_pow[#y] ======== */

static cft_array *ipow_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    if (!cft__dtype_in(in[0].dtype, CFT_DT_NUM | CFT_DT_COMPLEX))
        return cft__fail(CFT_E_DTYPE, "integer_pow: dtype %s not supported (%s)",
                         cft_dtype_name(in[0].dtype), cft__av(&in[0]));
    if (p->v[0][0] < 0 && !cft_dtype_is_inexact(in[0].dtype))
        return cft__fail(CFT_E_ARG, "integer_pow: negative exponent %lld for integer %s",
                         (long long)p->v[0][0], cft__av(&in[0]));
    *out = in[0];
    return NULL;
}

/* x^n by squaring, in T (as XLA's multiplication chain); ints wrap in
 * unsigned arithmetic */
#define IPOW_LOOP(T, W, NEG)                                                                       \
    {                                                                                              \
        const T *xs = cft__ptr(x);                                                                 \
        T *ys = (T *)y->data;                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                          \
            W b = (W)xs[i], acc = 1;                                                               \
            for (int64_t e = m; e; e >>= 1) {                                                      \
                if (e & 1)                                                                         \
                    acc *= b;                                                                      \
                b *= b;                                                                            \
            }                                                                                      \
            ys[i] = (T)(NEG ? 1 / acc : acc);                                                      \
        }                                                                                          \
    }                                                                                              \
    break

static cft_array *ipow_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    cft_array *x = cft__contig(in[0]);
    if (cft_failed(x))
        return x;
    cft_array *y = cft__alloc(x->aval.dtype, x->aval.shape, x->aval.ndim);
    if (cft_failed(y))
        return y;
    int64_t n = cft__numel(x->aval.shape, x->aval.ndim), k = p->v[0][0];
    bool neg = k < 0;
    int64_t m = neg ? -k : k;
    switch (x->aval.dtype) {
    case CFT_F32:
        IPOW_LOOP(float, float, neg);
    case CFT_F64:
        IPOW_LOOP(double, double, neg);
    case CFT_I32:
        IPOW_LOOP(int32_t, uint64_t, 0);
    case CFT_I64:
        IPOW_LOOP(int64_t, uint64_t, 0);
    case CFT_C64: /* holomorphic code written naturally: integer_pow(z, 3) */
        IPOW_LOOP(float _Complex, float _Complex, neg);
    case CFT_C128:
        IPOW_LOOP(double _Complex, double _Complex, neg);
    default:
        break;
    }
    cft__keep(x);
    out[0] = y;
    return NULL;
}

static cft_array *ipow_bind(cft_array *x, int64_t n) {
    cft_params p = {0};
    cft__param_set1(&p, 0, n);
    return cft__bind1(&cft_p_integer_pow, &p, 1, &x);
}

/* d x^n = n x^(n-1) dx (itself an integer_pow, so every order works) */
static cft_array *ipow_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    int64_t k = p->v[0][0];
    ty[0] = NULL;
    if (!t[0] || k == 0 || !cft_dtype_is_inexact(x[0]->aval.dtype))
        return NULL;
    if (k == 1) {
        ty[0] = t[0];
        return NULL;
    }
    cft_array *d = k == 2 ? x[0] : ipow_bind(x[0], k - 1);
    ty[0] = cft_mul(t[0], cft_mul_s(d, (double)k));
    return NULL;
}

static cft_array *ipow_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    y[0] = cft__bind1(&cft_p_integer_pow, p, 1, x);
    ybdim[0] = bdim[0];
    return NULL;
}

const cft_prim cft_p_integer_pow = {
    .name = "integer_pow",
    .nin = 1,
    .nout = 1,
    .flags = 0,
    .pnames = {"#y"},
    .shape = ipow_shape,
    .impl = ipow_impl,
    .jvp = ipow_jvp,
    .vmap = ipow_vmap,
};

cft_array *cft_integer_pow(cft_array *x, int n) {
    CFT_PROPAGATE("cft_integer_pow", x);
    return ipow_bind(x, n);
}
