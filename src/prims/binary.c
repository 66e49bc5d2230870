/* binary.c: the elementwise binary primitives, expanded from binary.def,
 * plus select (the ternary `cond ? a : b`). Kernels run on contiguous or
 * scalar-broadcast operands without copying them; other strided operands are
 * made contiguous first. Batching uses the family's generic rule. */
#include <complex.h>
#include <stdint.h>
#include <tgmath.h>

#include "prims/rules.h"
#include "prims/special_fns.h"

/* ---- rules that do not fit on a row ---- */

/* d a^b = b a^(b-1) da + log(a) a^b db, with the usual guards at a = 0 */
static cft_array *pow_tangent(cft_array *a, cft_array *b, cft_array *y, cft_array *ta,
                              cft_array *tb) {
    cft_array *r = NULL;
    if (ta) {
        cft_array *zb = cft_eq(b, cft_zeros_like(b));
        cft_array *d = cft_mul(b, cft_pow(a, cft_where(zb, cft_ones_like(b), cft_add_s(b, -1))));
        r = cft_mul(ta, cft_where(zb, cft_zeros_like(d), d));
    }
    if (tb) {
        cft_array *za = cft_eq(a, cft_zeros_like(a));
        cft_array *la = cft_log(cft_where(za, cft_ones_like(a), a));
        r = cft__tadd(r, cft_mul(tb, cft_mul(la, y)));
    }
    return r;
}

/* max: the larger operand's tangent; ties share it half and half (as JAX) */
static cft_array *minmax_tangent(cft_array *a, cft_array *b, cft_array *ta, cft_array *tb,
                                 bool is_max) {
    cft_dtype dt = a->aval.dtype;
    cft_array *wa = cft_add(cft_astype(is_max ? cft_gt(a, b) : cft_lt(a, b), dt),
                            cft_mul_s(cft_astype(cft_eq(a, b), dt), 0.5));
    cft_array *wb = cft_add_s(cft_neg(wa), 1);
    return cft__tadd(cft__tmul(ta, wa), cft__tmul(tb, wb));
}

/* rem(a, b) = a - b trunc(a/b): d/da = 1, d/db = -trunc(a/b) (as JAX);
 * zero for integer operands */
static cft_array *rem_tangent(cft_array *a, cft_array *b, cft_array *ta, cft_array *tb) {
    if (!cft_dtype_is_float(a->aval.dtype))
        return NULL;
    if (!tb)
        return ta;
    cft_array *q = cft_div(a, b);
    return cft__tsub(ta, cft_mul(tb, cft_mul(cft_sign(q), cft_floor(cft_abs(q)))));
}

static cft_array *add_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin, (void)p;
    ct_in[0] = x[0] ? NULL : ct[0];
    ct_in[1] = x[1] ? NULL : ct[0];
    return NULL;
}
static cft_array *sub_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin, (void)p;
    ct_in[0] = x[0] ? NULL : ct[0];
    ct_in[1] = x[1] ? NULL : cft_neg(ct[0]);
    return NULL;
}
/* mul is linear in one operand at a time: ct_a = ct * b */
static cft_array *mul_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin, (void)p;
    if (!x[0] && !x[1])
        return cft__fail(CFT_E_TRACE, "mul: transpose of a product of two linear values");
    ct_in[0] = x[0] ? NULL : cft_mul(ct[0], x[1]);
    ct_in[1] = x[1] ? NULL : cft_mul(x[0], ct[0]);
    return NULL;
}
/* div is linear in its numerator: ct_a = ct / b, except that a zero
 * cotangent stays zero where b is 0. Derivatives that divide (sqrt, log,
 * rsqrt, reciprocal, pow) are infinite where b is 0; when a select routes
 * no cotangent there (grad of where(x > 0, sqrt(x), 0) at 0), 0/0 would
 * otherwise turn that zero into NaN, the "double where" trap. */
static cft_array *div_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin, (void)p;
    if (!x[1])
        return cft__fail(CFT_E_TRACE, "div: transpose with a linear denominator");
    cft_array *zero = cft_zeros_like(ct[0]);
    ct_in[0] = cft__select(cft_eq(ct[0], zero), zero, cft_div(ct[0], x[1]));
    ct_in[1] = NULL;
    return NULL;
}

/* ---- kernels: sa/sb are 1 for contiguous operands, 0 for broadcast scalars ---- */
#define LOOP(T, OT, EXPR)                                                                          \
    {                                                                                              \
        const T *as = ap, *bs = bp;                                                                \
        OT *os = op;                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = as[i * sa], y = bs[i * sb];                                                      \
            (void)x, (void)y;                                                                      \
            os[i] = (OT)(EXPR);                                                                    \
        }                                                                                          \
    }                                                                                              \
    break

#define CFT_BINARY(NAME, FEXPR, IEXPR, CEXPR, CLS, BOOLOUT, FLAGS, TAN, TRANS)                     \
    static void NAME##_loop(const void *ap, int64_t sa, const void *bp, int64_t sb, void *op,      \
                            cft_dtype dt, int64_t n) {                                             \
        if (BOOLOUT) {                                                                             \
            switch (dt) {                                                                          \
            case CFT_F32:                                                                          \
                LOOP(float, uint8_t, FEXPR);                                                       \
            case CFT_F64:                                                                          \
                LOOP(double, uint8_t, FEXPR);                                                      \
            case CFT_I32:                                                                          \
                LOOP(int32_t, uint8_t, IEXPR);                                                     \
            case CFT_I64:                                                                          \
                LOOP(int64_t, uint8_t, IEXPR);                                                     \
            case CFT_BOOL:                                                                         \
                LOOP(uint8_t, uint8_t, IEXPR);                                                     \
            case CFT_C64:                                                                          \
                LOOP(float complex, uint8_t, CEXPR);                                               \
            case CFT_C128:                                                                         \
                LOOP(double complex, uint8_t, CEXPR);                                              \
            default:                                                                               \
                break;                                                                             \
            }                                                                                      \
        } else {                                                                                   \
            switch (dt) {                                                                          \
            case CFT_F32:                                                                          \
                LOOP(float, float, FEXPR);                                                         \
            case CFT_F64:                                                                          \
                LOOP(double, double, FEXPR);                                                       \
            case CFT_I32:                                                                          \
                LOOP(int32_t, int32_t, IEXPR);                                                     \
            case CFT_I64:                                                                          \
                LOOP(int64_t, int64_t, IEXPR);                                                     \
            case CFT_BOOL:                                                                         \
                LOOP(uint8_t, uint8_t, (IEXPR) != 0);                                              \
            case CFT_C64:                                                                          \
                LOOP(float complex, float complex, CEXPR);                                         \
            case CFT_C128:                                                                         \
                LOOP(double complex, double complex, CEXPR);                                       \
            default:                                                                               \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static cft_array *NAME##_shape(const cft_aval *in, int nin, const cft_params *p,               \
                                   cft_aval *out) {                                                \
        (void)p;                                                                                   \
        cft_array *e = cft__ew_shape(#NAME, in, nin, out);                                         \
        if (e)                                                                                     \
            return e;                                                                              \
        if (!cft__dtype_in(in[0].dtype, CLS))                                                      \
            return cft__fail(CFT_E_DTYPE, "%s: dtype %s not supported (%s, %s)", #NAME,            \
                             cft_dtype_name(in[0].dtype), cft__av(&in[0]), cft__av(&in[1]));       \
        if (BOOLOUT)                                                                               \
            out->dtype = CFT_BOOL;                                                                 \
        return NULL;                                                                               \
    }                                                                                              \
    static cft_array *NAME##_impl(cft_array *const *in, int nin, const cft_params *p,              \
                                  cft_array **out) {                                               \
        (void)p;                                                                                   \
        cft_aval oav;                                                                              \
        NAME##_shape((cft_aval[]){in[0]->aval, in[1]->aval}, nin, p, &oav);                        \
        return binary_run(NAME##_loop, in[0], in[1], &oav, out);                                   \
    }                                                                                              \
    static cft_array *NAME##_jvp(cft_array *const *x, cft_array *const *yy, cft_array *const *t,   \
                                 int nin, const cft_params *p, cft_array **ty) {                   \
        (void)nin, (void)p;                                                                        \
        cft_array *a = x[0], *b = x[1], *y = yy[0], *ta = t[0], *tb = t[1];                        \
        (void)a, (void)b, (void)y, (void)ta, (void)tb;                                             \
        ty[0] = TAN;                                                                               \
        return NULL;                                                                               \
    }

typedef void (*bin_loop)(const void *, int64_t, const void *, int64_t, void *, cft_dtype, int64_t);

static bool all_zero_strides(const cft_array *x) {
    for (int i = 0; i < x->aval.ndim; i++)
        if (x->strides[i] != 0 && x->aval.shape[i] != 1)
            return false;
    return true;
}

static cft_array *binary_run(bin_loop loop, cft_array *a, cft_array *b, const cft_aval *oav,
                             cft_array **out) {
    int64_t sa = 1, sb = 1;
    if (all_zero_strides(a))
        sa = 0;
    else
        a = cft__contig(a);
    if (all_zero_strides(b))
        sb = 0;
    else
        b = cft__contig(b);
    if (cft_failed(a))
        return a;
    if (cft_failed(b))
        return b;
    cft_array *o = cft__alloc(oav->dtype, oav->shape, oav->ndim);
    if (cft_failed(o))
        return o;
    loop(cft__ptr(a), sa, cft__ptr(b), sb, o->data, a->aval.dtype,
         cft__numel(oav->shape, oav->ndim));
    cft__keep(a);
    cft__keep(b);
    out[0] = o;
    return NULL;
}

#include "prims/binary.def"
#undef CFT_BINARY

#define CFT_BINARY(NAME, FEXPR, IEXPR, CEXPR, CLS, BOOLOUT, FLAGS, TAN, TRANS)                     \
    static cft_array *NAME##_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,     \
                                  const cft_params *p, cft_array **y, int *ybdim);                 \
    const cft_prim cft_p_##NAME = {                                                                \
        .name = #NAME,                                                                             \
        .nin = 2,                                                                                  \
        .nout = 1,                                                                                 \
        .flags = (FLAGS) | CFT_PRIM_ELEMENTWISE,                                                   \
        .shape = NAME##_shape,                                                                     \
        .impl = NAME##_impl,                                                                       \
        .jvp = (FLAGS)&CFT_PRIM_NONDIFF ? NULL : NAME##_jvp,                                       \
        .transpose = TRANS,                                                                        \
        .vmap = NAME##_vmap,                                                                       \
        .c_expr = #FEXPR,                                                                          \
        .c_iexpr = #IEXPR,                                                                         \
    };                                                                                             \
    static cft_array *NAME##_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,     \
                                  const cft_params *p, cft_array **y, int *ybdim) {                \
        return cft__ew_vmap(&cft_p_##NAME, size, x, bdim, nin, p, y, ybdim);                       \
    }
#include "prims/binary.def"
#undef CFT_BINARY

/* ---- select(cond, a, b) = cond ? a : b ---- */

static cft_array *select_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    if (in[0].dtype != CFT_BOOL)
        return cft__fail(CFT_E_DTYPE, "select: condition must be bool, got %s", cft__av(&in[0]));
    if (!cft__aval_eq(&in[1], &in[2]))
        return cft__fail(CFT_E_SHAPE, "select: branches differ: %s vs %s", cft__av(&in[1]),
                         cft__av(&in[2]));
    cft_aval c = in[0];
    c.dtype = in[1].dtype;
    if (!cft__aval_eq(&c, &in[1]))
        return cft__fail(CFT_E_SHAPE, "select: condition %s does not match branches %s",
                         cft__av(&in[0]), cft__av(&in[1]));
    *out = in[1];
    return NULL;
}

#define SELECT_LOOP(T)                                                                             \
    {                                                                                              \
        const T *as = (const T *)ap, *bs = (const T *)bp;                                          \
        T *os = (T *)o->data;                                                                      \
        for (int64_t i = 0; i < n; i++) { /* branch-free: conditions are often random */           \
            T m = (T)0 - (T)(cs[i * sc] != 0);                                                     \
            os[i] = (T)((as[i * sa] & m) | (bs[i * sb] & (T)~m));                                  \
        }                                                                                          \
    }                                                                                              \
    break

/* operands broadcast from one element are read with stride 0, not copied */
static cft_array *select_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    cft_array *c = in[0], *a = in[1], *b = in[2];
    int64_t sc = !all_zero_strides(c), sa = !all_zero_strides(a), sb = !all_zero_strides(b);
    if (sc)
        c = cft__contig(c);
    if (sa)
        a = cft__contig(a);
    if (sb)
        b = cft__contig(b);
    if (cft_failed(c) || cft_failed(a) || cft_failed(b))
        return cft_failed(c) ? c : cft_failed(a) ? a : b;
    const cft_aval *av = &in[1]->aval;
    cft_array *o = cft__alloc(av->dtype, av->shape, av->ndim);
    if (cft_failed(o))
        return o;
    int64_t n = cft__numel(av->shape, av->ndim);
    const uint8_t *cs = cft__ptr(c);
    const void *ap = cft__ptr(a), *bp = cft__ptr(b);
    switch (cft_dtype_size(av->dtype)) {
    case 1:
        SELECT_LOOP(uint8_t);
    case 4:
        SELECT_LOOP(uint32_t);
    case 16: { /* c128: two 8-byte halves */
        const uint64_t *as = ap, *bs = bp;
        uint64_t *os = (uint64_t *)o->data;
        for (int64_t i = 0; i < n; i++) {
            const uint64_t *s = cs[i * sc] ? as + 2 * i * sa : bs + 2 * i * sb;
            os[2 * i] = s[0], os[2 * i + 1] = s[1];
        }
    } break;
    default:
        SELECT_LOOP(uint64_t);
    }
    cft__keep(c), cft__keep(a), cft__keep(b);
    out[0] = o;
    return NULL;
}

static cft_array *select_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)y, (void)nin, (void)p;
    if (!t[1] && !t[2]) {
        ty[0] = NULL;
        return NULL;
    }
    ty[0] = cft__select(x[0], cft__inst(t[1], &x[1]->aval), cft__inst(t[2], &x[2]->aval));
    return NULL;
}

/* linear in both branches: the cotangent goes to the chosen one. Zeros (not
 * the other branch's values) fill the rest, so an infinite derivative of the
 * unchosen branch cannot leak into the gradient as NaN through this rule. */
static cft_array *select_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                   int nin, const cft_params *p, cft_array **ct_in) {
    (void)nin, (void)p;
    if (!x[0])
        return cft__fail(CFT_E_TRACE, "select: transpose with a linear condition");
    cft_array *z = cft__zeros_aval(&in[1]);
    ct_in[0] = NULL;
    ct_in[1] = x[1] ? NULL : cft__select(x[0], ct[0], z);
    ct_in[2] = x[2] ? NULL : cft__select(x[0], z, ct[0]);
    return NULL;
}

static cft_array *select_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    return cft__ew_vmap(&cft_p_select, size, x, bdim, nin, p, y, ybdim);
}

const cft_prim cft_p_select = {
    .name = "select",
    .nin = 3,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_ELEMENTWISE,
    .shape = select_shape,
    .impl = select_impl,
    .jvp = select_jvp,
    .transpose = select_transpose,
    .vmap = select_vmap,
    .c_expr = "c ? x : y",
};

cft_array *cft__select(cft_array *c, cft_array *a, cft_array *b) {
    return cft__bind1(&cft_p_select, NULL, 3, (cft_array *[]){c, a, b});
}
