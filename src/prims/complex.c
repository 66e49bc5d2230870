/* complex.c: the primitives between real and complex arrays (real, imag,
 * conj, complex, and abs of a complex array), each with all its rules, and
 * the public ops of cft/complex.h. Derivatives follow JAX's convention:
 * transposes never conjugate, so real(x)'s transpose is complex(ct, 0),
 * imag(x)'s is complex(0, -ct) and complex(re, im)'s is (real(ct), -imag(ct)).
 * conj on a concrete array is an O(1) view (cft_array.conj); consumers that
 * do not read such views get them materialised by cft__run_impl. */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"

extern const cft_prim cft_p_real, cft_p_imag, cft_p_conj, cft_p_complex, cft_p_cabs;

/* ---- shape rules ---- */

static cft_array *to_real_shape(const char *name, const cft_aval *in, cft_aval *out) {
    if (!cft_dtype_is_complex(in[0].dtype))
        return cft__fail(CFT_E_DTYPE, "%s: expects a complex operand, got %s", name,
                         cft__av(&in[0]));
    *out = in[0];
    out->dtype = cft_dtype_real(in[0].dtype);
    return NULL;
}
#define TO_REAL_SHAPE(NAME)                                                                        \
    static cft_array *NAME##_shape(const cft_aval *in, int nin, const cft_params *p,               \
                                   cft_aval *out) {                                                \
        (void)nin, (void)p;                                                                        \
        return to_real_shape(#NAME, in, out);                                                      \
    }
TO_REAL_SHAPE(real)
TO_REAL_SHAPE(imag)
TO_REAL_SHAPE(cabs)

static cft_array *conj_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    if (!cft_dtype_is_complex(in[0].dtype))
        return cft__fail(CFT_E_DTYPE, "conj: expects a complex operand, got %s", cft__av(&in[0]));
    *out = in[0];
    return NULL;
}

static cft_array *complex_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    if (!cft__aval_eq(&in[0], &in[1]))
        return cft__fail(in[0].dtype != in[1].dtype ? CFT_E_DTYPE : CFT_E_SHAPE,
                         "complex: operands differ: %s vs %s", cft__av(&in[0]), cft__av(&in[1]));
    if (in[0].dtype != CFT_F32 && in[0].dtype != CFT_F64)
        return cft__fail(CFT_E_DTYPE, "complex: expects f32 or f64 parts, got %s", cft__av(&in[0]));
    *out = in[0];
    out->dtype = cft_dtype_complex(in[0].dtype);
    return NULL;
}

/* ---- kernels (contiguous operands; conjugate views arrive resolved) ---- */

enum { PART_RE, PART_IM, PART_ABS };

static cft_array *part_impl(cft_array *x, int part, cft_array **out) {
    x = cft__contig(x);
    if (cft_failed(x))
        return x;
    cft_dtype rdt = cft_dtype_real(x->aval.dtype);
    cft_array *y = cft__alloc(rdt, x->aval.shape, x->aval.ndim);
    if (cft_failed(y))
        return y;
    int64_t n = cft__numel(x->aval.shape, x->aval.ndim);
    if (rdt == CFT_F32) {
        const float complex *xs = cft__ptr(x);
        float *ys = (float *)y->data;
        for (int64_t i = 0; i < n; i++)
            ys[i] = part == PART_RE   ? crealf(xs[i])
                    : part == PART_IM ? cimagf(xs[i])
                                      : cabsf(xs[i]);
    } else {
        const double complex *xs = cft__ptr(x);
        double *ys = (double *)y->data;
        for (int64_t i = 0; i < n; i++)
            ys[i] = part == PART_RE ? creal(xs[i]) : part == PART_IM ? cimag(xs[i]) : cabs(xs[i]);
    }
    cft__keep(x);
    out[0] = y;
    return NULL;
}
static cft_array *real_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    return part_impl(in[0], PART_RE, out);
}
static cft_array *imag_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    return part_impl(in[0], PART_IM, out);
}
static cft_array *cabs_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    return part_impl(in[0], PART_ABS, out);
}

/* O(1): the same buffer with the conjugation flag flipped */
static cft_array *conj_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    const cft_array *x = in[0];
    cft_array *v = cft__view(x, x->aval.shape, x->aval.ndim, x->strides, x->offset);
    if (cft_failed(v))
        return v;
    v->conj = !x->conj;
    out[0] = v;
    return NULL;
}

static cft_array *complex_impl(cft_array *const *in, int nin, const cft_params *p,
                               cft_array **out) {
    (void)nin, (void)p;
    cft_array *re = cft__contig(in[0]), *im = cft__contig(in[1]);
    if (cft_failed(re) || cft_failed(im))
        return cft_failed(re) ? re : im;
    cft_array *y = cft__alloc(cft_dtype_complex(re->aval.dtype), re->aval.shape, re->aval.ndim);
    if (cft_failed(y))
        return y;
    int64_t n = cft__numel(re->aval.shape, re->aval.ndim);
    if (re->aval.dtype == CFT_F32) {
        const float *a = cft__ptr(re), *b = cft__ptr(im);
        float *ys = (float *)y->data;
        for (int64_t i = 0; i < n; i++)
            ys[2 * i] = a[i], ys[2 * i + 1] = b[i];
    } else {
        const double *a = cft__ptr(re), *b = cft__ptr(im);
        double *ys = (double *)y->data;
        for (int64_t i = 0; i < n; i++)
            ys[2 * i] = a[i], ys[2 * i + 1] = b[i];
    }
    cft__keep(re), cft__keep(im);
    out[0] = y;
    return NULL;
}

/* ---- derivative rules ---- */

static cft_array *real_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin, (void)p;
    ty[0] = t[0] ? cft_real(t[0]) : NULL;
    return NULL;
}
static cft_array *real_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                 int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin, (void)p;
    ct_in[0] = cft_complex(ct[0], cft_zeros_like(ct[0]));
    return NULL;
}
static cft_array *imag_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin, (void)p;
    ty[0] = t[0] ? cft_imag(t[0]) : NULL;
    return NULL;
}
static cft_array *imag_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                 int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin, (void)p;
    ct_in[0] = cft_complex(cft_zeros_like(ct[0]), cft_neg(ct[0]));
    return NULL;
}
static cft_array *conj_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin, (void)p;
    ty[0] = t[0] ? cft_conj(t[0]) : NULL;
    return NULL;
}
static cft_array *conj_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                 int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin, (void)p;
    ct_in[0] = cft_conj(ct[0]);
    return NULL;
}
static cft_array *complex_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)y, (void)nin, (void)p;
    if (!t[0] && !t[1]) {
        ty[0] = NULL;
        return NULL;
    }
    ty[0] = cft_complex(cft__inst(t[0], &x[0]->aval), cft__inst(t[1], &x[1]->aval));
    return NULL;
}
static cft_array *complex_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                    int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin, (void)p;
    ct_in[0] = x[0] ? NULL : cft_real(ct[0]);
    ct_in[1] = x[1] ? NULL : cft_neg(cft_imag(ct[0]));
    return NULL;
}
/* d|z| = real(conj(z) dz) / |z|, and 0 at z = 0 (as JAX) */
static cft_array *cabs_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)nin, (void)p;
    if (!t[0]) {
        ty[0] = NULL;
        return NULL;
    }
    cft_array *zero = cft_zeros_like(y[0]);
    cft_array *isz = cft_eq(y[0], zero);
    cft_array *den = cft__select(isz, cft_ones_like(y[0]), y[0]);
    cft_array *d = cft_div(cft_real(cft_mul(cft_conj(x[0]), t[0])), den);
    ty[0] = cft__select(isz, zero, d);
    return NULL;
}

#define EW_VMAP(NAME)                                                                              \
    static cft_array *NAME##_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,     \
                                  const cft_params *p, cft_array **y, int *ybdim) {                \
        return cft__ew_vmap(&cft_p_##NAME, size, x, bdim, nin, p, y, ybdim);                       \
    }
EW_VMAP(real)
EW_VMAP(imag)
EW_VMAP(conj)
EW_VMAP(complex)
EW_VMAP(cabs)

const cft_prim cft_p_real = {
    .name = "real",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .shape = real_shape,
    .impl = real_impl,
    .jvp = real_jvp,
    .transpose = real_transpose,
    .vmap = real_vmap,
};
const cft_prim cft_p_imag = {
    .name = "imag",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .shape = imag_shape,
    .impl = imag_impl,
    .jvp = imag_jvp,
    .transpose = imag_transpose,
    .vmap = imag_vmap,
};
const cft_prim cft_p_conj = {
    .name = "conj",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_CONJ_AWARE,
    .shape = conj_shape,
    .impl = conj_impl,
    .jvp = conj_jvp,
    .transpose = conj_transpose,
    .vmap = conj_vmap,
};
const cft_prim cft_p_complex = {
    .name = "complex",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .shape = complex_shape,
    .impl = complex_impl,
    .jvp = complex_jvp,
    .transpose = complex_transpose,
    .vmap = complex_vmap,
};
const cft_prim cft_p_cabs = {
    .name = "cabs",
    .nin = 1,
    .nout = 1,
    .flags = 0,
    .shape = cabs_shape,
    .impl = cabs_impl,
    .jvp = cabs_jvp,
    .vmap = cabs_vmap,
};

/* ---- public ops ---- */

cft_array *cft_real(cft_array *x) {
    CFT_PROPAGATE("cft_real", x);
    if (!cft_dtype_is_complex(x->aval.dtype))
        return x;
    return cft__bind1(&cft_p_real, NULL, 1, &x);
}
cft_array *cft_imag(cft_array *x) {
    CFT_PROPAGATE("cft_imag", x);
    if (!cft_dtype_is_complex(x->aval.dtype))
        return cft_zeros_like(x);
    return cft__bind1(&cft_p_imag, NULL, 1, &x);
}
cft_array *cft_conj(cft_array *x) {
    CFT_PROPAGATE("cft_conj", x);
    if (!cft_dtype_is_complex(x->aval.dtype))
        return x;
    return cft__bind1(&cft_p_conj, NULL, 1, &x);
}
cft_array *cft_complex(cft_array *re, cft_array *im) {
    CFT_PROPAGATE("cft_complex", re, im);
    if (cft_dtype_is_complex(re->aval.dtype) || cft_dtype_is_complex(im->aval.dtype))
        return cft__fail(CFT_E_DTYPE, "cft_complex: parts must be real, got %s and %s",
                         cft__av(&re->aval), cft__av(&im->aval));
    cft_dtype dt = cft_promote(re->aval.dtype, im->aval.dtype) == CFT_F64 ? CFT_F64 : CFT_F32;
    cft_array *b[2] = {cft__convert(re, dt), cft__convert(im, dt)};
    cft_array *e = cft__broadcast_all("cft_complex", b, 2);
    if (e)
        return e;
    return cft__bind1(&cft_p_complex, NULL, 2, b);
}
cft_array *cft_angle(cft_array *x) {
    CFT_PROPAGATE("cft_angle", x);
    if (!cft_dtype_is_inexact(x->aval.dtype))
        x = cft_astype(x, CFT_F32);
    return cft_atan2(cft_imag(x), cft_real(x));
}
/* abs: |z| for complex arrays, else the abs row of unary.def */
cft_array *cft_abs(cft_array *x) {
    CFT_PROPAGATE("cft_abs", x);
    if (!cft_dtype_is_complex(x->aval.dtype))
        return cft__abs_real(x);
    return cft__bind1(&cft_p_cabs, NULL, 1, &x);
}
bool cft_is_conj(const cft_array *x) {
    CFT_API("cft_is_conj");
    return x && x->kind == CFT_K_CONCRETE && x->conj;
}

cft_array *cft_scalar_complex(double re, double im, cft_dtype dtype) {
    CFT_API("cft_scalar_complex");
    return cft_full_complex(re, im, dtype, NULL, 0);
}
cft_array *cft_full_complex(double re, double im, cft_dtype dtype, const int64_t *shape, int ndim) {
    CFT_API("cft_full_complex");
    if (!cft_dtype_is_complex(dtype))
        return cft__fail(CFT_E_DTYPE, "cft_full_complex: dtype %s is not complex",
                         cft_dtype_name(dtype));
    cft_array *one = cft__alloc(dtype, NULL, 0);
    if (cft_failed(one))
        return one;
    if (dtype == CFT_C64)
        ((float *)one->data)[0] = (float)re, ((float *)one->data)[1] = (float)im;
    else
        ((double *)one->data)[0] = re, ((double *)one->data)[1] = im;
    if (ndim == 0)
        return one;
    return cft_broadcast_to(one, shape, ndim);
}
