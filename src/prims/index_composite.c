/* index_composite.c: jax.numpy's data-dependent index functions with
 * static output sizes (as JAX requires under jit; here so that the jit and
 * vmap see fixed shapes), built from sort, cumsum, comparisons and
 * at_set / at_add: searchsorted, bincount, histogram, nonzero, argwhere and
 * unique. Positions past `size` are dropped and the rest padded with a
 * fill value. */
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"

cft_array *cft_searchsorted(cft_array *a, cft_array *v, bool right) {
    CFT_PROPAGATE("cft_searchsorted", a, v);
    if (cft_array_ndim(a) != 1)
        return cft__fail(CFT_E_SHAPE, "cft_searchsorted: a sorted vector, got %d dims",
                         cft_array_ndim(a));
    /* how many of a are below v (left) or not above it (right) */
    cft_array *ve = cft_expand_dims(v, cft_array_ndim(v));
    cft_array *below = right ? cft_le(a, ve) : cft_lt(a, ve);
    return cft_sum(cft_astype(below, CFT_I64), (int[]){-1}, 1, false);
}

cft_array *cft_bincount(cft_array *x, cft_array *weights, int64_t length) {
    CFT_PROPAGATE("cft_bincount", x);
    cft_dtype dt = cft_array_dtype(x);
    if ((dt != CFT_I32 && dt != CFT_I64) || cft_array_ndim(x) != 1 || length < 0)
        return cft__fail(CFT_E_ARG, "cft_bincount: a vector of ints and a length >= 0");
    if (weights && (cft_failed(weights) || cft_array_size(weights) != cft_array_size(x)))
        return weights && cft_failed(weights)
                   ? weights
                   : cft__fail(CFT_E_SHAPE, "cft_bincount: weights of x's length");
    /* values outside [0, length) land out of range and are dropped */
    cft_array *idx = cft_where(cft_lt(x, cft_zeros_like(x)), cft_full_like(x, (double)length), x);
    cft_array *w = weights ? weights : cft_ones_like(cft_astype(x, CFT_I64));
    cft_array *z = cft_zeros(cft_array_dtype(w), &length, 1);
    return cft_at_add(z, idx, w, 0);
}

cft_array *cft_histogram(cft_array *x, int64_t bins, double lo, double hi, cft_array *weights) {
    CFT_PROPAGATE("cft_histogram", x);
    if (bins < 1 || !(lo < hi) || !cft_dtype_is_float(cft_array_dtype(x)))
        return cft__fail(CFT_E_ARG, "cft_histogram: float values, bins >= 1 and lo < hi");
    cft_array *f = cft_reshape(x, (int64_t[]){cft_array_size(x)}, 1);
    cft_array *b = cft_floor(cft_mul_s(cft_add_s(f, -lo), (double)bins / (hi - lo)));
    b = cft_where(cft_eq(f, cft_full_like(f, hi)), cft_full_like(b, (double)(bins - 1)), b);
    cft_array *out =
        cft_logical_or(cft_lt(f, cft_full_like(f, lo)), cft_gt(f, cft_full_like(f, hi)));
    b = cft_where(out, cft_full_like(b, (double)bins), b); /* dropped */
    cft_array *w = weights ? cft_reshape(weights, (int64_t[]){cft_array_size(weights)}, 1) : NULL;
    return cft_bincount(cft_astype(b, CFT_I64), w, bins);
}

/* flat positions of x's nonzero entries, padded with fill to `size` */
static cft_array *flat_nonzero(cft_array *x, int64_t size, int64_t fill) {
    int64_t n = cft_array_size(x);
    cft_array *m = cft_ne(cft_reshape(x, &n, 1), cft_zeros(cft_array_dtype(x), NULL, 0));
    cft_array *pos = cft_add_s(cft_cumsum(cft_astype(m, CFT_I64), 0, false), -1);
    cft_array *target = cft_where(m, pos, cft_full_like(pos, (double)size));
    cft_array *out = cft_full(fill, CFT_I64, &size, 1);
    return cft_at_set(out, target, cft_iota(CFT_I64, &n, 1, 0), 0);
}

cft_array *cft_nonzero(cft_array *x, int64_t size, int64_t fill) {
    CFT_PROPAGATE("cft_nonzero", x);
    if (cft_array_ndim(x) != 1 || size < 0)
        return cft__fail(CFT_E_ARG,
                         "cft_nonzero: a vector and a size >= 0 (argwhere for more dims)");
    return flat_nonzero(x, size, fill);
}

cft_array *cft_argwhere(cft_array *x, int64_t size, int64_t fill) {
    CFT_PROPAGATE("cft_argwhere", x);
    cft_aval a = cft_array_aval(x);
    if (size < 0 || a.ndim < 1)
        return cft__fail(CFT_E_ARG, "cft_argwhere: an array of 1 or more dims and a size >= 0");
    cft_array *flat = flat_nonzero(x, size, -1), *cols[CFT_MAX_NDIM];
    cft_array *pad = cft_lt(flat, cft_zeros_like(flat));
    int64_t stride = 1;
    for (int d = a.ndim - 1; d >= 0; d--) { /* unravel the flat index */
        cft_array *c = cft_rem(cft_div(flat, cft_scalar((double)stride, CFT_I64)),
                               cft_scalar((double)a.shape[d], CFT_I64));
        cols[d] = cft_where(pad, cft_full_like(c, (double)fill), c);
        stride *= a.shape[d];
    }
    return cft_stack(cols, a.ndim, 1);
}

cft_array *cft_unique(cft_array *x, int64_t size, double fill) {
    CFT_PROPAGATE("cft_unique", x);
    if (size < 0)
        return cft__fail(CFT_E_ARG, "cft_unique: size %lld", (long long)size);
    int64_t n = cft_array_size(x);
    cft_array *s = cft_sort(cft_reshape(x, &n, 1), 0, false);
    cft_array *out = cft_full(fill, cft_array_dtype(x), &size, 1);
    if (n == 0)
        return out;
    /* the first of each run of equal values */
    int64_t n1 = n - 1;
    cft_array *first =
        cft_concatenate((cft_array *[]){cft_full(1, CFT_BOOL, (int64_t[]){1}, 1),
                                        cft_ne(cft_slice(s, (int64_t[]){1}, &n, NULL),
                                               cft_slice(s, (int64_t[]){0}, &n1, NULL))},
                        2, 0);
    cft_array *pos = cft_add_s(cft_cumsum(cft_astype(first, CFT_I64), 0, false), -1);
    cft_array *target = cft_where(first, pos, cft_full_like(pos, (double)size));
    return cft_at_set(out, target, s, 0);
}

/* the flat positions in x of indices along `axis` (the other coordinates
 * are the index array's own), for put_along_axis / scatter_add along axis */
static cft_array *flat_along(const char *call, cft_array *x, cft_array *idx, int axis,
                             int *ax_out) {
    cft_aval a = cft_array_aval(x), ia = cft_array_aval(idx);
    int ax = axis < 0 ? axis + a.ndim : axis;
    if (ia.ndim != a.ndim || ax < 0 || ax >= a.ndim || (ia.dtype != CFT_I32 && ia.dtype != CFT_I64))
        return cft__fail(CFT_E_ARG, "%s: int indices of x's rank (%s for x %s), axis %d", call,
                         cft__av(&ia), cft__av(&a), axis);
    for (int d = 0; d < a.ndim; d++)
        if (d != ax && ia.shape[d] > a.shape[d])
            return cft__fail(CFT_E_SHAPE, "%s: indices %s larger than x %s off the axis", call,
                             cft__av(&ia), cft__av(&a));
    cft_array *i64 = cft_astype(idx, CFT_I64);
    /* negative indices count from the end (numpy) */
    i64 = cft_where(cft_lt(i64, cft_zeros_like(i64)), cft_add_s(i64, (double)a.shape[ax]), i64);
    cft_array *flat = cft_zeros_like(i64);
    int64_t stride = 1;
    for (int d = a.ndim - 1; d >= 0; d--) {
        cft_array *c = d == ax ? i64 : cft_iota(CFT_I64, ia.shape, ia.ndim, d);
        flat = cft_add(flat, cft_mul_s(c, (double)stride));
        stride *= a.shape[d];
    }
    /* an index outside the axis goes out of range (dropped) */
    cft_array *bad = cft_logical_or(cft_lt(i64, cft_zeros_like(i64)),
                                    cft_ge(i64, cft_full_like(i64, (double)a.shape[ax])));
    *ax_out = ax;
    return cft_where(bad, cft_full_like(flat, (double)stride), flat);
}

static cft_array *along(const char *call, cft_array *x, cft_array *idx, cft_array *v, int axis,
                        bool add) {
    int ax;
    cft_array *flat = flat_along(call, x, idx, axis, &ax);
    if (cft_failed(flat))
        return flat;
    int64_t n = cft_array_size(x), m = cft_array_size(flat);
    cft_aval ia = cft_array_aval(idx);
    cft_array *vals = cft_broadcast_to(v, ia.shape, ia.ndim);
    cft_array *xf = cft_reshape(x, &n, 1), *ff = cft_reshape(flat, &m, 1),
              *vf = cft_reshape(vals, &m, 1);
    cft_array *r = add ? cft_at_add(xf, ff, vf, 0) : cft_at_set(xf, ff, vf, 0);
    cft_aval a = cft_array_aval(x);
    return cft_reshape(r, a.shape, a.ndim);
}

cft_array *cft_put_along_axis(cft_array *x, cft_array *indices, cft_array *values, int axis) {
    CFT_PROPAGATE("cft_put_along_axis", x, indices, values);
    return along("cft_put_along_axis", x, indices, values, axis, false);
}

cft_array *cft_scatter_add_along_axis(cft_array *x, cft_array *indices, cft_array *src, int axis) {
    CFT_PROPAGATE("cft_scatter_add_along_axis", x, indices, src);
    return along("cft_scatter_add_along_axis", x, indices, src, axis, true);
}
