/* array.c: concrete arrays: creation from data and constants, O(1) views,
 * contiguous copies, element access and comparison. The ops that make
 * views under transforms are primitives (src/prims/shape.c); this file is
 * what their eager implementations use. */
#include "array/array.h"
#include "array/device.h"

#include <math.h>
#include <string.h>

#include "array/dim.h"
#include "core/error.h"
#include "core/mem.h"

/* the element count of a shape with symbolic dims: a symbolic product */
static int64_t numel_sym(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim && n != CFT_DIM_INVALID; i++)
        n = cft_dim_mul(n, shape[i]);
    return n;
}

int64_t cft__numel(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (cft__dim_maybe_sym(shape[i]))
            return numel_sym(shape, ndim);
        n *= shape[i];
    }
    return n;
}

cft_array *(*cft__full_sym)(double value, cft_dtype dt, const int64_t *shape, int ndim);

bool cft__aval_eq(const cft_aval *a, const cft_aval *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

cft_aval cft__aval(cft_dtype dt, const int64_t *shape, int ndim) {
    cft_aval a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    a.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        a.shape[i] = shape[i];
    return a;
}

void cft__row_major(const int64_t *shape, int ndim, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i];
    }
}

cft_array *cft__check_size(const char *call, cft_dtype dt, const int64_t *shape, int ndim,
                           int64_t *numel, size_t *bytes) {
    if ((unsigned)dt >= CFT_NDTYPES)
        return cft__fail(CFT_E_DTYPE, "%s: unknown dtype %d", call, (int)dt);
    if (ndim < 0 || ndim > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "%s: ndim %d out of range [0, %d]", call, ndim, CFT_MAX_NDIM);
    if (ndim > 0 && !shape)
        return cft__fail(CFT_E_ARG, "%s: shape is NULL", call);
    int64_t n = 1;
    bool sym = false, overflow = false;
    for (int i = 0; i < ndim; i++) {
        int64_t d = shape[i];
        if (cft_dim_is_symbolic(d)) {
            sym = true;
            continue;
        }
        if (d < 0 || d >= CFT_DIM_MAX_CONCRETE)
            return cft__fail(CFT_E_SHAPE,
                             "%s: dim %d of the shape is %lld; dims must be in [0, 2^40)", call, i,
                             (long long)d);
        overflow |= __builtin_mul_overflow(n, d, &n);
    }
    int64_t es = (int64_t)cft_dtype_size(dt), nb = 0;
    /* the product over all dims must fit, even when a later dim is 0 */
    int64_t nz = 1;
    bool big = false;
    for (int i = 0; i < ndim; i++)
        if (!cft_dim_is_symbolic(shape[i]) && shape[i] > 0)
            big |= __builtin_mul_overflow(nz, shape[i], &nz);
    if (overflow || big || __builtin_mul_overflow(nz, es, &nb) || nb > CFT_MAX_BYTES) {
        char buf[256];
        int k = snprintf(buf, sizeof buf, "[");
        for (int i = 0; i < ndim && k < (int)sizeof buf - 32; i++)
            k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%s", i ? ", " : "",
                          cft__dim_s(shape[i]));
        snprintf(buf + k, sizeof buf - (size_t)k, "]");
        return cft__fail(CFT_E_SHAPE,
                         "%s: shape %s of %s is too large: more than 2^62 bytes (the product of "
                         "the dims overflows)",
                         call, buf, cft_dtype_name(dt));
    }
    if (numel)
        *numel = sym ? -1 : n;
    if (bytes)
        *bytes = sym ? 0 : (size_t)(n * es);
    return NULL;
}

static cft_array *check_shape(const char *op, cft_dtype dt, const int64_t *shape, int ndim) {
    return cft__check_size(op, dt, shape, ndim, NULL, NULL);
}

cft_array *cft__alloc(cft_dtype dt, const int64_t *shape, int ndim) {
    if (cft__shape_symbolic(shape, ndim)) { /* never a garbage size */
        char b[96];
        cft_aval a = cft__aval(dt, shape, ndim);
        return cft__fail(CFT_E_SHAPE,
                         "cannot make a concrete %s: the shape is symbolic (its size is known "
                         "only when the traced function runs)",
                         cft_aval_str(&a, b));
    }
    size_t bytes;
    cft_array *e = cft__check_size("cft: allocating an array", dt, shape, ndim, NULL, &bytes);
    if (e)
        return e;
    cft_array *x = CFT_NEW(cft_array);
    if (!x)
        return cft__oom();
    x->kind = CFT_K_CONCRETE;
    x->aval = cft__aval(dt, shape, ndim);
    x->data = cft__new_data(bytes);
    if (!x->data)
        return cft__oom();
    cft__row_major(shape, ndim, x->strides);
    return x;
}

cft_array *cft__view(const cft_array *x, const int64_t *shape, int ndim, const int64_t *strides,
                     int64_t offset) {
    cft_array *v = CFT_NEW(cft_array);
    if (!v)
        return cft__oom();
    v->kind = CFT_K_CONCRETE;
    v->aval = cft__aval(x->aval.dtype, shape, ndim);
    v->data = x->data;
    v->offset = offset;
    v->conj = x->conj;
    v->dev = x->dev, v->owner = x->owner, v->committed = x->committed;
    for (int i = 0; i < ndim; i++)
        v->strides[i] = strides[i];
    return v;
}

bool cft__is_contig(const cft_array *x) {
    if (x->conj)
        return false;
    int64_t s = 1;
    for (int i = x->aval.ndim - 1; i >= 0; i--) {
        if (x->aval.shape[i] != 1 && x->strides[i] != s)
            return false;
        s *= x->aval.shape[i];
    }
    return true;
}

/* negate the imaginary parts of n complex elements */
static void conj_inplace(void *p, cft_dtype dt, int64_t n) {
    if (dt == CFT_C64)
        for (int64_t i = 0; i < n; i++)
            ((float *)p)[2 * i + 1] = -((float *)p)[2 * i + 1];
    else if (dt == CFT_C128)
        for (int64_t i = 0; i < n; i++)
            ((double *)p)[2 * i + 1] = -((double *)p)[2 * i + 1];
}

/* x's n elements row-major into dst, one row of its last dim at a time */
static void strided_copy(const cft_array *x, char *dst, int64_t n) {
    const cft_aval *a = &x->aval;
    size_t es = cft_dtype_size(a->dtype);
    int nd = a->ndim;
    int64_t inner = a->shape[nd - 1], istr = x->strides[nd - 1];
    int64_t idx[CFT_MAX_NDIM] = {0};
    for (int64_t done = 0; done < n; done += inner) {
        int64_t off = x->offset;
        for (int d = 0; d < nd - 1; d++)
            off += idx[d] * x->strides[d];
        const char *src = x->data + off * (int64_t)es;
        switch (es) {
        case 1:
            for (int64_t i = 0; i < inner; i++)
                dst[i] = src[i * istr];
            break;
        case 2:
            for (int64_t i = 0; i < inner; i++)
                ((int16_t *)dst)[i] = ((const int16_t *)src)[i * istr];
            break;
        case 4:
            for (int64_t i = 0; i < inner; i++)
                ((int32_t *)dst)[i] = ((const int32_t *)src)[i * istr];
            break;
        case 8:
            for (int64_t i = 0; i < inner; i++)
                ((int64_t *)dst)[i] = ((const int64_t *)src)[i * istr];
            break;
        default: /* c128 */
            for (int64_t i = 0; i < inner; i++)
                memcpy(dst + i * (int64_t)es, src + i * istr * (int64_t)es, es);
        }
        dst += inner * (int64_t)es;
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < a->shape[d])
                break;
            idx[d] = 0;
        }
    }
}

/* Copy a strided array into a contiguous one. */
cft_array *cft__contig(cft_array *x) {
    if (cft__on_device(x)) /* host code reading a device array: a copy on the host */
        x = cft__dev_to_host(x, "reading a device array");
    if (x->kind != CFT_K_CONCRETE || cft__is_contig(x))
        return x;
    const cft_aval *a = &x->aval;
    cft_array *y = cft__alloc(a->dtype, a->shape, a->ndim);
    if (cft_failed(y))
        return y;
    size_t es = cft_dtype_size(a->dtype);
    int nd = a->ndim;
    int64_t n = cft__numel(a->shape, nd);
    if (n == 0)
        return y;
    if (nd == 0) { /* a conjugated scalar */
        memcpy(y->data, cft__ptr(x), es);
        conj_inplace(y->data, a->dtype, 1);
        cft__keep(x);
        return y;
    }
    if (!cft__contig_turned(x, y->data)) /* a transposed matrix: by tiles */
        strided_copy(x, y->data, n);
    if (x->conj)
        conj_inplace(y->data, a->dtype, n);
    cft__keep(x);
    return y;
}

/* ---- creation ---- */

cft_array *cft_from_data(const void *data, cft_dtype dtype, const int64_t *shape, int ndim) {
    CFT_API("cft_from_data");
    cft_array *e = check_shape("cft_from_data", dtype, shape, ndim);
    if (e)
        return e;
    if (cft__shape_symbolic(shape, ndim))
        return cft__alloc(dtype, shape, ndim); /* the error */
    if (!data)
        return cft__fail(CFT_E_ARG, "cft_from_data: data is NULL");
    cft_array *x = cft__alloc(dtype, shape, ndim);
    if (cft_failed(x))
        return x;
    size_t n = (size_t)cft__numel(shape, ndim);
    if (dtype == CFT_BOOL) { /* outside bytes: any nonzero byte is true (stored as 1) */
        const unsigned char *src = data;
        uint8_t *dst = (uint8_t *)x->data;
        for (size_t i = 0; i < n; i++)
            dst[i] = src[i] != 0;
    } else {
        memcpy(x->data, data, n * cft_dtype_size(dtype));
    }
    return x;
}
cft_array *cft_from_f32(const float *d, const int64_t *s, int n) {
    CFT_API("cft_from_f32");
    return cft_from_data(d, CFT_F32, s, n);
}
cft_array *cft_from_f64(const double *d, const int64_t *s, int n) {
    CFT_API("cft_from_f64");
    return cft_from_data(d, CFT_F64, s, n);
}
cft_array *cft_from_i32(const int32_t *d, const int64_t *s, int n) {
    CFT_API("cft_from_i32");
    return cft_from_data(d, CFT_I32, s, n);
}

cft_array *cft_full(double value, cft_dtype dtype, const int64_t *shape, int ndim) {
    CFT_API("cft_full");
    cft_array *e = check_shape("cft_full", dtype, shape, ndim);
    if (e)
        return e;
    if (cft__shape_symbolic(shape, ndim)) { /* staged: a scalar broadcast to the shape */
        if (cft__full_sym)
            return cft__full_sym(value, dtype, shape, ndim);
        return cft__alloc(dtype, shape, ndim); /* the error */
    }
    /* one element broadcast with zero strides: O(1) whatever the shape */
    cft_array *one = cft__alloc(dtype, NULL, 0);
    if (cft_failed(one))
        return one;
    cft__set(one->data, dtype, 0, value);
    int64_t zs[CFT_MAX_NDIM] = {0};
    return cft__view(one, shape, ndim, zs, 0);
}
cft_array *cft_zeros(cft_dtype dt, const int64_t *s, int n) {
    CFT_API("cft_zeros");
    return cft_full(0, dt, s, n);
}
cft_array *cft_ones(cft_dtype dt, const int64_t *s, int n) {
    CFT_API("cft_ones");
    return cft_full(1, dt, s, n);
}
cft_array *cft_scalar(double v, cft_dtype dt) {
    CFT_API("cft_scalar");
    return cft_full(v, dt, NULL, 0);
}

cft_array *cft_full_like(cft_array *x, double v) {
    CFT_PROPAGATE("cft_full_like", x);
    return cft_full(v, x->aval.dtype, x->aval.shape, x->aval.ndim);
}
cft_array *cft_zeros_like(cft_array *x) {
    CFT_API("cft_zeros_like");
    return cft_full_like(x, 0);
}
cft_array *cft_ones_like(cft_array *x) {
    CFT_API("cft_ones_like");
    return cft_full_like(x, 1);
}

cft_array *cft_arange(double start, double stop, double step, cft_dtype dtype) {
    CFT_API("cft_arange");
    if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step))
        return cft__fail(CFT_E_ARG, "cft_arange: bad range start=%g stop=%g step=%g", start, stop,
                         step);
    double len = ceil((stop - start) / step);
    if (!(len < 0x1p40)) /* also NaN */
        return cft__fail(CFT_E_SHAPE,
                         "cft_arange: start=%g stop=%g step=%g gives %g elements; at most 2^40",
                         start, stop, step, len);
    int64_t n = len > 0 ? (int64_t)len : 0;
    cft_array *e = check_shape("cft_arange", dtype, &n, 1);
    if (e)
        return e;
    cft_array *x = cft__alloc(dtype, &n, 1);
    if (cft_failed(x))
        return x;
    for (int64_t i = 0; i < n; i++)
        cft__set(x->data, dtype, i, start + (double)i * step);
    return x;
}

cft_array *cft_linspace(double start, double stop, int64_t n, cft_dtype dtype) {
    CFT_API("cft_linspace");
    cft_array *e = check_shape("cft_linspace", dtype, &n, 1);
    if (e)
        return e;
    cft_array *x = cft__alloc(dtype, &n, 1);
    if (cft_failed(x))
        return x;
    for (int64_t i = 0; i < n; i++)
        cft__set(x->data, dtype, i,
                 n == 1 ? start : start + (stop - start) * (double)i / (double)(n - 1));
    return x;
}

cft_array *cft_eye(int64_t n, cft_dtype dtype) {
    CFT_API("cft_eye");
    int64_t s[2] = {n, n};
    cft_array *e = check_shape("cft_eye", dtype, s, 2);
    if (e)
        return e;
    cft_array *x = cft__alloc(dtype, s, 2);
    if (cft_failed(x))
        return x;
    for (int64_t i = 0; i < n * n; i++)
        cft__set(x->data, dtype, i, i / n == i % n);
    return x;
}

/* ---- inspection ---- */

cft_dtype cft_array_dtype(const cft_array *x) {
    return cft_failed(x) ? CFT_F32 : x->aval.dtype;
}
int cft_array_ndim(const cft_array *x) {
    return cft_failed(x) ? 0 : x->aval.ndim;
}
int64_t cft_array_dim(const cft_array *x, int axis) {
    CFT_API("cft_array_dim");
    if (cft_failed(x))
        return -1;
    if (axis < 0)
        axis += x->aval.ndim;
    if (axis < 0 || axis >= x->aval.ndim)
        return -1;
    return x->aval.shape[axis];
}
const int64_t *cft_array_shape(const cft_array *x) {
    CFT_API("cft_array_shape");
    return cft_failed(x) ? NULL : x->aval.shape;
}
int64_t cft_array_size(const cft_array *x) {
    return cft_failed(x) ? 0 : cft__numel(x->aval.shape, x->aval.ndim);
}
cft_aval cft_array_aval(const cft_array *x) {
    if (cft_failed(x))
        return cft__aval(CFT_F32, NULL, 0);
    return x->aval;
}
bool cft_is_concrete(const cft_array *x) {
    return x && x->kind == CFT_K_CONCRETE;
}

cft_status cft_copy_to(const cft_array *x, cft_dtype dtype, void *out) {
    CFT_API("cft_copy_to");
    if (cft_failed(x))
        return cft__set_last(x);
    if (x->kind != CFT_K_CONCRETE)
        return cft__set_last(cft__concretization_error("cft_copy_to", x));
    if ((unsigned)dtype >= CFT_NDTYPES)
        return cft__set_last(cft__fail(CFT_E_DTYPE, "cft_copy_to: unknown dtype %d", (int)dtype));
    if (!out)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_copy_to: out is NULL"));
    cft_array *c = cft__contig((cft_array *)x);
    if (cft_failed(c))
        return cft__set_last(c);
    cft__cast(cft__ptr(c), c->aval.dtype, out, dtype, cft__numel(c->aval.shape, c->aval.ndim));
    return CFT_OK;
}

/* element i of x, or NaN with the last error set naming `call` */
static double item_at(const char *call, const cft_array *x, int64_t i) {
    if (!x) {
        cft__fail(CFT_E_ARG, "%s: the array is NULL", call);
        return NAN;
    }
    if (cft_failed(x)) {
        cft__set_last(x);
        return NAN;
    }
    if (x->kind != CFT_K_CONCRETE) {
        cft__concretization_error(call, x);
        return NAN;
    }
    const cft_aval *a = &x->aval;
    int64_t n = cft__numel(a->shape, a->ndim);
    if (i < 0 || i >= n) {
        char b[96];
        cft__fail(CFT_E_ARG, "%s: index %lld out of range for %s (%lld elements)", call,
                  (long long)i, cft_aval_str(a, b), (long long)n);
        return NAN;
    }
    int64_t off = x->offset, rem = i;
    for (int d = a->ndim - 1; d >= 0; d--) {
        off += (rem % a->shape[d]) * x->strides[d];
        rem /= a->shape[d];
    }
    if (cft__on_device(x)) { /* that one element, through the host */
        char elem[16];
        cft_array *e = cft__dev_read(x, off, elem, call);
        if (e) {
            cft__set_last(e);
            return NAN;
        }
        return cft__get(elem, a->dtype, 0);
    }
    return cft__get(x->data, a->dtype, off);
}

double cft_item_at(const cft_array *x, int64_t i) {
    CFT_API("cft_item_at");
    return item_at("cft_item_at", x, i);
}

cft_status cft_item_complex_at(const cft_array *x, int64_t i, double *re, double *im) {
    CFT_API("cft_item_complex_at");
    if (cft_failed(x))
        return cft__set_last(x);
    if (x->kind != CFT_K_CONCRETE)
        return cft__set_last(cft__concretization_error("cft_item_complex_at", x));
    if (cft__on_device(x)) { /* through the host */
        cft_array *h = cft__dev_to_host(x, "cft_item_complex_at");
        if (cft_failed(h))
            return cft__set_last(h);
        x = h;
    }
    const cft_aval *a = &x->aval;
    int64_t n = cft__numel(a->shape, a->ndim);
    if (i < 0 || i >= n)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_item_complex_at: index %lld out of [0, %lld)",
                                       (long long)i, (long long)n));
    int64_t off = x->offset, rem = i;
    for (int d = a->ndim - 1; d >= 0; d--) {
        off += (rem % a->shape[d]) * x->strides[d];
        rem /= a->shape[d];
    }
    double r = cft__get(x->data, a->dtype, off), m = 0;
    if (a->dtype == CFT_C64)
        m = ((const float *)x->data)[2 * off + 1];
    else if (a->dtype == CFT_C128)
        m = ((const double *)x->data)[2 * off + 1];
    if (re)
        *re = r;
    if (im)
        *im = x->conj ? -m : m;
    return CFT_OK;
}

/* element i as (re, im); im 0 for real dtypes and NaN for bad input */
static void item2(const cft_array *x, int64_t i, double *re, double *im) {
    if (cft_item_complex_at(x, i, re, im) != CFT_OK)
        *re = *im = NAN;
}

double cft_item(const cft_array *x) {
    CFT_API("cft_item");
    if (!cft_failed(x) && x->kind == CFT_K_CONCRETE && cft_array_size(x) != 1) {
        char b[96];
        cft__fail(CFT_E_SHAPE, "cft_item: needs an array of one element, got %s",
                  cft_aval_str(&x->aval, b));
        return NAN;
    }
    return item_at("cft_item", x, 0);
}

const char *cft_aval_str(const cft_aval *a, char *buf) {
    if (!a || !buf)
        return buf ? (snprintf(buf, 96, "(NULL aval)"), buf) : "(NULL)";
    /* snprintf returns what it would have written: n is kept within buf,
     * and a shape too long for it ends in "...]" */
    int n = snprintf(buf, 96, "%s[", cft_dtype_name(a->dtype));
    for (int i = 0; i < a->ndim && i < CFT_MAX_NDIM && n < 80; i++) {
        char d[64];
        n += snprintf(buf + n, (size_t)(96 - n), i ? ",%s" : "%s",
                      cft_dim_str(a->shape[i], d, sizeof d));
        if (n >= 80 && (i + 1 < a->ndim || n >= 95))
            n = 80 + snprintf(buf + 80, 16, "...");
    }
    snprintf(buf + n, (size_t)(96 - n), "]");
    return buf;
}

bool cft_allclose(const cft_array *a, const cft_array *b, double rtol, double atol,
                  bool equal_nan) {
    CFT_API("cft_allclose");
    if (cft_failed(a) || cft_failed(b) || a->kind != CFT_K_CONCRETE || b->kind != CFT_K_CONCRETE)
        return false;
    if (a->aval.ndim != b->aval.ndim)
        return false;
    for (int i = 0; i < a->aval.ndim; i++)
        if (a->aval.shape[i] != b->aval.shape[i])
            return false;
    /* device arrays: one copy to the host each, not one per element (each
     * element's read copied the whole array: quadratic) */
    if (cft__on_device(a) && cft_failed(a = cft__dev_to_host(a, "cft_allclose")))
        return false;
    if (cft__on_device(b) && cft_failed(b = cft__dev_to_host(b, "cft_allclose")))
        return false;
    int64_t n = cft_array_size(a);
    for (int64_t i = 0; i < n; i++) {
        double x, y, xi, yi;
        item2(a, i, &x, &xi);
        item2(b, i, &y, &yi);
        if (xi != 0 || yi != 0) { /* complex: |x - y| <= atol + rtol |y| */
            if (isnan(x) || isnan(xi) || isnan(y) || isnan(yi)) {
                if (!(equal_nan && (isnan(x) || isnan(xi)) && (isnan(y) || isnan(yi))))
                    return false;
                continue;
            }
            if (x == y && xi == yi)
                continue;
            if (!(hypot(x - y, xi - yi) <= atol + rtol * hypot(y, yi)))
                return false;
            continue;
        }
        if (isnan(x) || isnan(y)) {
            if (!(equal_nan && isnan(x) && isnan(y)))
                return false;
            continue;
        }
        if (x == y)
            continue; /* equal infinities */
        if (isinf(x) || isinf(y))
            return false; /* else rtol*|inf| passes inf vs -inf */
        if (!(fabs(x - y) <= atol + rtol * fabs(y)))
            return false;
    }
    return true;
}

double cft_max_abs_diff(const cft_array *a, const cft_array *b) {
    CFT_API("cft_max_abs_diff");
    if (cft_failed(a) || cft_failed(b) || a->kind != CFT_K_CONCRETE || b->kind != CFT_K_CONCRETE)
        return INFINITY;
    if (cft_array_size(a) != cft_array_size(b) || a->aval.ndim != b->aval.ndim)
        return INFINITY;
    if (cft__on_device(a)) /* one copy to the host each, not one per element */
        a = cft__dev_to_host(a, "cft_max_abs_diff");
    if (cft__on_device(b))
        b = cft__dev_to_host(b, "cft_max_abs_diff");
    if (cft_failed(a) || cft_failed(b))
        return INFINITY;
    double m = 0;
    /* device arrays: one copy to the host each, not one per element (each
     * element's read copied the whole array: quadratic) */
    if (cft__on_device(a) && cft_failed(a = cft__dev_to_host(a, "cft_allclose")))
        return false;
    if (cft__on_device(b) && cft_failed(b = cft__dev_to_host(b, "cft_allclose")))
        return false;
    int64_t n = cft_array_size(a);
    for (int64_t i = 0; i < n; i++) {
        double x, y, xi, yi;
        item2(a, i, &x, &xi);
        item2(b, i, &y, &yi);
        double d = hypot(x - y, xi - yi);
        if (isnan(d))
            return NAN;
        if (d > m)
            m = d;
    }
    return m;
}
