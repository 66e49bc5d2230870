/* rules.c: helpers the primitive rules share (see rules.h): NULL-aware
 * tangent arithmetic, batching moves, and the elementwise family's shape and
 * batching rules (one rule serves every elementwise primitive). */
#include "prims/rules.h"

#include <string.h>

const char *cft__av(const cft_aval *a) {
    static _Thread_local char bufs[4][96];
    static _Thread_local int k;
    k = (k + 1) & 3;
    return cft_aval_str(a, bufs[k]);
}

cft_array *cft__tadd(cft_array *a, cft_array *b) {
    if (!a)
        return b;
    if (!b)
        return a;
    return cft_add(a, b);
}
cft_array *cft__tneg(cft_array *a) {
    return a ? cft_neg(a) : NULL;
}
cft_array *cft__tsub(cft_array *a, cft_array *b) {
    if (!b)
        return a;
    if (!a)
        return cft_neg(b);
    return cft_sub(a, b);
}
cft_array *cft__tmul(cft_array *t, cft_array *y) {
    return t ? cft_mul(t, y) : NULL;
}
cft_array *cft__tdiv(cft_array *t, cft_array *y) {
    return t ? cft_div(t, y) : NULL;
}
cft_array *cft__zeros_aval(const cft_aval *a) {
    return cft_zeros(a->dtype, a->shape, a->ndim);
}
cft_array *cft__inst(cft_array *t, const cft_aval *a) {
    return t ? t : cft__zeros_aval(a);
}

cft_aval cft__aval_drop(const cft_aval *a, int axis) {
    cft_aval r = *a;
    for (int i = axis; i < a->ndim - 1; i++)
        r.shape[i] = a->shape[i + 1];
    r.ndim--;
    r.shape[r.ndim] = 0;
    return r;
}

cft_array *cft__moveaxis_b(cft_array *x, int from, int to) {
    if (from == to)
        return x;
    return cft_moveaxis(x, from, to);
}

cft_array *cft__as_rows(cft_array *x) {
    const cft_aval *a = &x->aval;
    if (a->ndim == 2)
        return x;
    int64_t k = a->ndim ? a->shape[a->ndim - 1] : 1;
    return cft_reshape(x, (int64_t[]){cft__numel(a->shape, a->ndim - 1), k}, 2);
}

cft_array *cft__from_rows(cft_array *y, const cft_aval *like) {
    if (cft_failed(y) || like->ndim == 2)
        return y;
    int64_t s[CFT_MAX_NDIM];
    for (int d = 0; d + 1 < like->ndim; d++)
        s[d] = like->shape[d];
    s[like->ndim > 0 ? like->ndim - 1 : 0] = y->aval.shape[1];
    return cft_reshape(y, s, like->ndim > 0 ? like->ndim : 1);
}

cft_array *cft__batch_at(cft_array *x, int bdim, int64_t size, int to) {
    if (bdim >= 0)
        return cft__moveaxis_b(x, bdim, to);
    const cft_aval *a = &x->aval;
    int64_t shape[CFT_MAX_NDIM];
    int dims[CFT_MAX_NDIM];
    int k = 0;
    for (int i = 0; i <= a->ndim; i++) {
        if (i == to) {
            shape[i] = size;
            continue;
        }
        shape[i] = a->shape[k];
        dims[k] = i;
        k++;
    }
    return cft_broadcast_in_dim(x, shape, a->ndim + 1, dims);
}

bool cft__dtype_in(cft_dtype dt, int cls) {
    if (cft_dtype_is_complex(dt))
        return cls & CFT_DT_COMPLEX;
    if (cft_dtype_is_float(dt))
        return cls & CFT_DT_FLOAT;
    if (dt == CFT_BOOL)
        return cls & CFT_DT_BOOL;
    return cls & CFT_DT_INT;
}

cft_array *cft__ew_shape(const char *name, const cft_aval *in, int nin, cft_aval *out) {
    for (int i = 1; i < nin; i++)
        if (!cft__aval_eq(&in[0], &in[i]))
            return cft__fail(in[0].dtype != in[i].dtype ? CFT_E_DTYPE : CFT_E_SHAPE,
                             "%s: operands differ: %s vs %s", name, cft__av(&in[0]),
                             cft__av(&in[i]));
    *out = in[0];
    return NULL;
}

cft_array *cft__ew_vmap(const cft_prim *p, int64_t size, cft_array *const *x, const int *bdim,
                        int nin, const cft_params *par, cft_array **y, int *ybdim) {
    int common = -1;
    bool same = true;
    for (int i = 0; i < nin; i++) {
        if (bdim[i] < 0)
            continue;
        if (common < 0)
            common = bdim[i];
        else if (bdim[i] != common)
            same = false;
    }
    int target = same ? common : 0;
    cft_array *args[nin];
    for (int i = 0; i < nin; i++)
        args[i] = cft__batch_at(x[i], bdim[i], size, target);
    for (int i = 0; i < p->nout; i++)
        ybdim[i] = target;
    return cft__bind(p, par, nin, args, p->nout, y);
}

cft_array *cft__impl_by_into(const cft_prim *p, cft_array *const *in, int nin,
                             const cft_params *par, cft_array **out) {
    cft_aval av[nin > 0 ? nin : 1], o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < nin; i++)
        av[i] = in[i]->aval;
    cft_array *e = p->shape(av, nin, par, &o);
    if (e)
        return e;
    cft_array *y = cft__alloc(o.dtype, o.shape, o.ndim);
    if (cft_failed(y))
        return y;
    e = p->impl_into(in, nin, par, y);
    if (e)
        return e;
    out[0] = y;
    return NULL;
}
