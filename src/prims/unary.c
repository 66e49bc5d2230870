/* unary.c: the elementwise unary primitives, expanded from unary.def: for
 * each row a reference loop per dtype, the shape rule (dtype class check),
 * the jvp rule (the row's tangent), and the record. neg is the one linear
 * row; its transpose is neg. Batching uses the family's generic rule. Rows
 * flagged CFT_EW_BOOL_OUT (is_finite) give bool outputs. */
#include <complex.h>
#include <stdint.h>
#include <tgmath.h>

#include "prims/rules.h"
#include "prims/special_fns.h"

#define NOTNULL(e) (e)

/* one loop: elements of type ST read into x of type VT, written as OT. T
 * names the output type, as in the generated kernels (bitwise_not uses it
 * to tell bools from ints). Complex dtypes run the row's complex expression
 * (rows whose class has CFT_DT_COMPLEX). */
#define ULOOP(ST, VT, OT, EXPR)                                                                    \
    {                                                                                              \
        typedef OT T;                                                                              \
        const ST *xs = xp;                                                                         \
        T *ys = yp;                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                          \
            VT x = xs[i];                                                                          \
            (void)x;                                                                               \
            ys[i] = (T)(EXPR);                                                                     \
        }                                                                                          \
    }                                                                                              \
    break
/* rows flagged CFT_EW_BOOL_OUT write bool from float inputs */
#define BOOL_OUT(FLAGS) (((FLAGS)&CFT_EW_BOOL_OUT) != 0)

#define CFT_UNARY(NAME, FEXPR, IEXPR, CEXPR, CLS, FLAGS, TAN)                                      \
    static void NAME##_loop(const void *xp, void *yp, cft_dtype dt, int64_t n) {                   \
        switch (dt * 2 + BOOL_OUT(FLAGS)) {                                                        \
        case CFT_F32 * 2:                                                                          \
            ULOOP(float, float, float, FEXPR);                                                     \
        case CFT_F64 * 2:                                                                          \
            ULOOP(double, double, double, FEXPR);                                                  \
        case CFT_F32 * 2 + 1:                                                                      \
            ULOOP(float, float, uint8_t, FEXPR);                                                   \
        case CFT_F64 * 2 + 1:                                                                      \
            ULOOP(double, double, uint8_t, FEXPR);                                                 \
        case CFT_I32 * 2:                                                                          \
            ULOOP(int32_t, int32_t, int32_t, IEXPR);                                               \
        case CFT_I64 * 2:                                                                          \
            ULOOP(int64_t, int64_t, int64_t, IEXPR);                                               \
        case CFT_BOOL * 2:                                                                         \
            ULOOP(uint8_t, int, uint8_t, (IEXPR) != 0);                                            \
        case CFT_C64 * 2:                                                                          \
            ULOOP(float complex, float complex, float complex, CEXPR);                             \
        case CFT_C128 * 2:                                                                         \
            ULOOP(double complex, double complex, double complex, CEXPR);                          \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    static cft_array *NAME##_shape(const cft_aval *in, int nin, const cft_params *p,               \
                                   cft_aval *out) {                                                \
        (void)nin;                                                                                 \
        (void)p;                                                                                   \
        if (!cft__dtype_in(in[0].dtype, CLS))                                                      \
            return cft__fail(CFT_E_DTYPE, "%s: dtype %s not supported (%s)", #NAME,                \
                             cft_dtype_name(in[0].dtype), cft__av(&in[0]));                        \
        *out = in[0];                                                                              \
        if (BOOL_OUT(FLAGS))                                                                       \
            out->dtype = CFT_BOOL;                                                                 \
        return NULL;                                                                               \
    }                                                                                              \
    static cft_array *NAME##_impl(cft_array *const *in, int nin, const cft_params *p,              \
                                  cft_array **out) {                                               \
        (void)nin;                                                                                 \
        (void)p;                                                                                   \
        cft_array *x = cft__contig(in[0]);                                                         \
        if (cft_failed(x))                                                                         \
            return x;                                                                              \
        cft_array *y =                                                                             \
            cft__alloc(BOOL_OUT(FLAGS) ? CFT_BOOL : x->aval.dtype, x->aval.shape, x->aval.ndim);   \
        if (cft_failed(y))                                                                         \
            return y;                                                                              \
        NAME##_loop(cft__ptr(x), y->data, x->aval.dtype, cft__numel(x->aval.shape, x->aval.ndim)); \
        cft__keep(x);                                                                              \
        out[0] = y;                                                                                \
        return NULL;                                                                               \
    }                                                                                              \
    static cft_array *NAME##_tangent(cft_array *x, cft_array *y, cft_array *t) {                   \
        (void)x;                                                                                   \
        (void)y;                                                                                   \
        (void)t;                                                                                   \
        return TAN;                                                                                \
    }                                                                                              \
    static cft_array *NAME##_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,    \
                                 int nin, const cft_params *p, cft_array **ty) {                   \
        (void)nin;                                                                                 \
        (void)p;                                                                                   \
        ty[0] = t[0] ? NAME##_tangent(x[0], y[0], t[0]) : NULL;                                    \
        return NULL;                                                                               \
    }                                                                                              \
    static cft_array *NAME##_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,     \
                                  const cft_params *p, cft_array **y, int *ybdim);

#include "prims/unary.def"
#undef CFT_UNARY

/* d(-x)^T = -ct */
static cft_array *neg_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin, (void)p;
    ct_in[0] = cft_neg(ct[0]);
    return NULL;
}

#define TRANSPOSE_OF(NAME, FLAGS) ((FLAGS)&CFT_PRIM_LINEAR ? neg_transpose : NULL)
#define CFT_UNARY(NAME, FEXPR, IEXPR, CEXPR, CLS, FLAGS, TAN)                                      \
    const cft_prim cft_p_##NAME = {                                                                \
        .name = #NAME,                                                                             \
        .nin = 1,                                                                                  \
        .nout = 1,                                                                                 \
        .flags = ((FLAGS) & ~CFT_EW_BOOL_OUT) | CFT_PRIM_ELEMENTWISE,                              \
        .shape = NAME##_shape,                                                                     \
        .impl = NAME##_impl,                                                                       \
        .jvp = (FLAGS)&CFT_PRIM_NONDIFF ? NULL : NAME##_jvp,                                       \
        .transpose = TRANSPOSE_OF(NAME, FLAGS),                                                    \
        .vmap = NAME##_vmap,                                                                       \
        .c_expr = #FEXPR,                                                                          \
        .c_iexpr = #IEXPR,                                                                         \
    };                                                                                             \
    static cft_array *NAME##_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,     \
                                  const cft_params *p, cft_array **y, int *ybdim) {                \
        return cft__ew_vmap(&cft_p_##NAME, size, x, bdim, nin, p, y, ybdim);                       \
    }                                                                                              \
    cft_array *cft_##NAME(cft_array *x) {                                                          \
        CFT_PROPAGATE("cft_" #NAME, x);                                                            \
        return cft__bind1(&cft_p_##NAME, NULL, 1, &x);                                             \
    }
#define cft_abs cft__abs_real /* cft_abs itself dispatches on complex (complex.c) */
#include "prims/unary.def"
#undef cft_abs
#undef CFT_UNARY
