/* shape.c: the structural primitives: convert_element_type,
 * broadcast_in_dim, reshape, transpose, squeeze, expand_dims, slice, pad,
 * concatenate, iota and stop_gradient, each one record with all its rules,
 * followed by its public op. Eager implementations of the movement ops are
 * O(1) views where the layout allows it. */
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"
#include "trace/ir.h"

#define UNUSED4 (void)nin, (void)p, (void)x, (void)in

static int norm_axis(int a, int ndim) {
    return a < 0 ? a + ndim : a;
}

/* Copy a contiguous src of `shape` into a strided destination. */
static void strided_assign(char *dst, const int64_t *dstr, const char *src, const int64_t *shape,
                           int ndim, size_t es) {
    int64_t n = cft__numel(shape, ndim), idx[CFT_MAX_NDIM] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int d = 0; d < ndim; d++)
            off += idx[d] * dstr[d];
        memcpy(dst + off * (int64_t)es, src + i * (int64_t)es, es);
        for (int d = ndim - 1; d >= 0; d--) {
            if (++idx[d] < shape[d])
                break;
            idx[d] = 0;
        }
    }
}

/* ======== convert_element_type[dtype] ======== */

static cft_array *convert_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    if ((uint64_t)p->v[0][0] >= CFT_NDTYPES)
        return cft__fail(CFT_E_DTYPE, "convert_element_type: bad dtype %lld",
                         (long long)p->v[0][0]);
    *out = in[0];
    out->dtype = (cft_dtype)p->v[0][0];
    return NULL;
}
static cft_array *convert_impl(cft_array *const *in, int nin, const cft_params *p,
                               cft_array **out) {
    (void)nin;
    cft_array *x = cft__contig(in[0]);
    cft_array *y = cft__alloc((cft_dtype)p->v[0][0], x->aval.shape, x->aval.ndim);
    if (cft_failed(y))
        return y;
    cft__cast(cft__ptr(x), x->aval.dtype, y->data, y->aval.dtype,
              cft__numel(x->aval.shape, x->aval.ndim));
    cft__keep(x);
    out[0] = y;
    return NULL;
}
/* float or complex -> float or complex: the tangent converts too (complex to
 * real keeps the real part); to or from ints: zero */
static cft_array *convert_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)nin;
    bool ff = cft_dtype_is_inexact(x[0]->aval.dtype) && cft_dtype_is_inexact(y[0]->aval.dtype);
    ty[0] = ff && t[0] ? cft__convert(t[0], (cft_dtype)p->v[0][0]) : NULL;
    return NULL;
}
static cft_array *convert_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                    int nin, const cft_params *p, cft_array **ct_in) {
    UNUSED4;
    ct_in[0] = cft__convert(ct[0], in[0].dtype);
    return NULL;
}
static cft_array *convert_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                               const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    y[0] = cft__convert(x[0], (cft_dtype)p->v[0][0]);
    ybdim[0] = bdim[0];
    return NULL;
}
/* DP-SGD's questions (trace/prim.h's batch_sqnorm / batch_wsum) pass a
 * widening conversion of half values (autocast's products, bf16 / f16, back
 * to f32 or f64): the producer answers from its factors in f32, and the
 * answer is converted to this output's dtype (the sums are f32's, as the
 * conversion's consumer would form them). */
static bool widens_half(const cft_eqn *q) {
    cft_dtype o = q->out[0]->aval.dtype;
    return cft_dtype_is_half(q->in[0]->aval.dtype) && (o == CFT_F32 || o == CFT_F64);
}
static bool convert_batch_sqnorm(const cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                                 cft_array **out) {
    if (!widens_half(q) || !cft__batch_sqnorm_of(c, q->in[0]->id, axis, nb, out))
        return false;
    if (c->value)
        *out = cft_astype(*out, q->out[0]->aval.dtype);
    return true;
}
static bool convert_batch_wsum(const cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                               cft_array *w, cft_array **out) {
    if (!widens_half(q) || !cft__batch_wsum_of(c, q->in[0]->id, axis, nb, w, out))
        return false;
    if (c->value)
        *out = cft_astype(*out, q->out[0]->aval.dtype);
    return true;
}
const cft_prim cft_p_convert_element_type = {
    .name = "convert_element_type",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_ELEMENTWISE | CFT_PRIM_CONVERT,
    .pnames = {"dtype"},
    .shape = convert_shape,
    .impl = convert_impl,
    .jvp = convert_jvp,
    .transpose = convert_transpose,
    .vmap = convert_vmap,
    .batch_sqnorm = convert_batch_sqnorm,
    .batch_wsum = convert_batch_wsum,
    .c_expr = "(T)x",
};
cft_array *cft__convert(cft_array *x, cft_dtype dt) {
    if (!cft_failed(x) && x->aval.dtype == dt)
        return x;
    cft_params p = {0};
    cft__param_set1(&p, 0, dt);
    return cft__bind1(&cft_p_convert_element_type, &p, 1, &x);
}
cft_array *cft_astype(cft_array *x, cft_dtype dtype) {
    CFT_PROPAGATE("cft_astype", x);
    if ((unsigned)dtype >= CFT_NDTYPES)
        return cft__fail(CFT_E_DTYPE, "cft_astype: bad dtype %d", (int)dtype);
    return cft__convert(x, dtype);
}

/* ======== broadcast_in_dim[shape, dims] ======== */

static cft_array *bid_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    int nd = p->n[0];
    if (p->n[1] != in[0].ndim || nd < in[0].ndim)
        return cft__fail(CFT_E_SHAPE, "broadcast_in_dim: %s needs %d dims mapped into rank %d",
                         cft__av(&in[0]), in[0].ndim, nd);
    for (int i = 0; i < in[0].ndim; i++) {
        int64_t d = p->v[1][i];
        if (d < 0 || d >= nd || (i && d <= p->v[1][i - 1]))
            return cft__fail(CFT_E_SHAPE,
                             "broadcast_in_dim: dims must increase within [0,%d) for %s", nd,
                             cft__av(&in[0]));
        if (in[0].shape[i] != 1 && in[0].shape[i] != p->v[0][d])
            return cft__fail(CFT_E_SHAPE,
                             "broadcast_in_dim: cannot broadcast %s: dim %d (%lld) to %lld",
                             cft__av(&in[0]), i, (long long)in[0].shape[i], (long long)p->v[0][d]);
    }
    *out = cft__aval(in[0].dtype, p->v[0], nd);
    return NULL;
}
static cft_array *bid_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    const cft_array *x = in[0];
    int64_t st[CFT_MAX_NDIM] = {0};
    for (int i = 0; i < x->aval.ndim; i++)
        st[p->v[1][i]] = x->aval.shape[i] == p->v[0][p->v[1][i]] ? x->strides[i] : 0;
    out[0] = cft__view(x, p->v[0], p->n[0], st, x->offset);
    return NULL;
}
static cft_array *bid_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    ty[0] = t[0] ? cft__bind1(&cft_p_broadcast_in_dim, p, 1, t) : NULL;
    return NULL;
}
/* sum over the new dims and the stretched size-1 dims, then restore x's shape */
static cft_array *bid_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    UNUSED4;
    int axes[CFT_MAX_NDIM], na = 0, nd = p->n[0];
    bool mapped[CFT_MAX_NDIM] = {0};
    for (int i = 0; i < in[0].ndim; i++)
        if (in[0].shape[i] == p->v[0][p->v[1][i]])
            mapped[p->v[1][i]] = true;
    for (int d = 0; d < nd; d++)
        if (!mapped[d])
            axes[na++] = d;
    cft_array *s = na ? cft__reduce_sum(ct[0], axes, na) : ct[0];
    ct_in[0] = cft__reshape(s, in[0].shape, in[0].ndim);
    return NULL;
}
static cft_array *bid_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    cft_array *xb = cft__moveaxis_b(x[0], bdim[0], 0);
    cft_params q = {0};
    int64_t shape[CFT_MAX_NDIM], dims[CFT_MAX_NDIM];
    shape[0] = size;
    dims[0] = 0;
    for (int i = 0; i < p->n[0]; i++)
        shape[i + 1] = p->v[0][i];
    for (int i = 0; i < p->n[1]; i++)
        dims[i + 1] = p->v[1][i] + 1;
    cft__param_set(&q, 0, shape, p->n[0] + 1);
    cft__param_set(&q, 1, dims, p->n[1] + 1);
    y[0] = cft__bind1(&cft_p_broadcast_in_dim, &q, 1, &xb);
    ybdim[0] = 0;
    return NULL;
}
/* rows of axis 0 from rows of x's axis 0, mapped to it (the new shape's
 * axis 0 becomes n) */
static int bid_split_rows(const cft_params *p, const cft_aval *in, int nin, const bool *split,
                          int64_t T, int64_t n, bool *slice, cft_params *q) {
    (void)nin, (void)split;
    if (in[0].ndim < 1 || p->v[1][0] != 0 || in[0].shape[0] != T || p->v[0][0] != T)
        return -1;
    *q = *p;
    q->v[0][0] = n;
    slice[0] = true;
    return 1;
}
const cft_prim cft_p_broadcast_in_dim = {
    .name = "broadcast_in_dim",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_CONJ_AWARE | CFT_PRIM_VIEW,
    .pnames = {"shape", "dims"},
    .shape = bid_shape,
    .impl = bid_impl,
    .jvp = bid_jvp,
    .transpose = bid_transpose,
    .vmap = bid_vmap,
    .split_rows = bid_split_rows,
};
cft_array *cft_broadcast_in_dim(cft_array *x, const int64_t *shape, int ndim, const int *dims) {
    CFT_PROPAGATE("cft_broadcast_in_dim", x);
    if (ndim < 0 || ndim > CFT_MAX_NDIM || (ndim && !shape) || (x->aval.ndim && !dims))
        return cft__fail(CFT_E_ARG, "cft_broadcast_in_dim: bad shape or dims for %s",
                         cft__av(&x->aval));
    cft_params p = {0};
    cft__param_set(&p, 0, shape, ndim);
    cft__param_set_int(&p, 1, dims, x->aval.ndim);
    if (cft__aval_eq(&x->aval, &(cft_aval){0}) && 0)
        return x;
    return cft__bind1(&cft_p_broadcast_in_dim, &p, 1, &x);
}
cft_array *cft_broadcast_to(cft_array *x, const int64_t *shape, int ndim) {
    CFT_PROPAGATE("cft_broadcast_to", x);
    int n = x->aval.ndim;
    if (ndim > 0 && !shape)
        return cft__fail(CFT_E_ARG, "cft_broadcast_to: shape is NULL (rank %d)", ndim);
    if (ndim < n || ndim > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "cft_broadcast_to: cannot broadcast %s to rank %d",
                         cft__av(&x->aval), ndim);
    bool same = ndim == n;
    int dims[CFT_MAX_NDIM];
    for (int i = 0; i < n; i++) {
        dims[i] = ndim - n + i;
        same &= x->aval.shape[i] == shape[dims[i]];
    }
    if (same)
        return x;
    return cft_broadcast_in_dim(x, shape, ndim, dims);
}

/* ======== reshape[shape] ======== */

static cft_array *reshape_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    *out = cft__aval(in[0].dtype, p->v[0], p->n[0]);
    if (cft__numel(p->v[0], p->n[0]) != cft__numel(in[0].shape, in[0].ndim))
        return cft__fail(CFT_E_SHAPE, "reshape: cannot reshape %s to %s (sizes differ)",
                         cft__av(&in[0]), cft__av(out));
    return NULL;
}
static cft_array *reshape_impl(cft_array *const *in, int nin, const cft_params *p,
                               cft_array **out) {
    (void)nin;
    /* (a contiguous device array stays where it is: a device view) */
    cft_array *x = cft__is_contig(in[0]) ? in[0] : cft__contig(in[0]);
    int64_t st[CFT_MAX_NDIM];
    cft__row_major(p->v[0], p->n[0], st);
    out[0] = cft__view(x, p->v[0], p->n[0], st, x->offset);
    return NULL;
}
static cft_array *reshape_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    ty[0] = t[0] ? cft__reshape(t[0], p->v[0], p->n[0]) : NULL;
    return NULL;
}
static cft_array *reshape_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                    int nin, const cft_params *p, cft_array **ct_in) {
    UNUSED4;
    ct_in[0] = cft__reshape(ct[0], in[0].shape, in[0].ndim);
    return NULL;
}
static cft_array *reshape_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                               const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    int64_t shape[CFT_MAX_NDIM];
    shape[0] = size;
    for (int i = 0; i < p->n[0]; i++)
        shape[i + 1] = p->v[0][i];
    y[0] = cft__reshape(cft__moveaxis_b(x[0], bdim[0], 0), shape, p->n[0] + 1);
    ybdim[0] = 0;
    return NULL;
}
/* A reshape keeps the examples' blocks when the axes before the batch axis
 * hold as many elements on both sides: then the block of a flat offset is
 * the same in both views. The input axis that holds them, or -1. */
static int batch_axis_in(const cft_eqn *q, int axis, int64_t nb) {
    const cft_aval *a = &q->in[0]->aval, *b = &q->out[0]->aval;
    if (axis == 0) /* nothing before it: symbolic sizes allowed */
        return a->ndim >= 1 && (a->shape[0] == nb || (a->shape[0] > 0 && a->shape[0] % nb == 0))
                   ? 0
                   : -1;
    if (cft__shape_symbolic(a->shape, a->ndim) || cft__shape_symbolic(b->shape, b->ndim))
        return -1;
    int64_t pb = 1, pa = 1;
    for (int i = 0; i < axis; i++)
        pb *= b->shape[i];
    for (int i = 0; i < a->ndim && pa <= pb && pa > 0; i++) {
        if (pa == pb && a->shape[i] > 0 && a->shape[i] % nb == 0)
            return i;
        pa *= a->shape[i];
    }
    return -1;
}
/* shape with axis k's size divided by nb */
static void per_block(const cft_aval *v, int k, int64_t nb, int64_t *out) {
    memcpy(out, v->shape, sizeof(int64_t) * (size_t)v->ndim);
    out[k] = v->shape[k] == nb ? 1 : v->shape[k] / nb;
}
static bool reshape_batch_sqnorm(const cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                                 cft_array **out) {
    int a = batch_axis_in(q, axis, nb);
    return a >= 0 && cft__batch_sqnorm_of(c, q->in[0]->id, a, nb, out);
}
static bool reshape_batch_wsum(const cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                               cft_array *w, cft_array **out) {
    int a = batch_axis_in(q, axis, nb);
    if (a < 0 || !cft__batch_wsum_of(c, q->in[0]->id, a, nb, w, out))
        return false;
    if (c->value) {
        int64_t shape[CFT_MAX_NDIM];
        per_block(&q->out[0]->aval, axis, nb, shape);
        *out = cft_reshape(*out, shape, q->out[0]->aval.ndim);
    }
    return true;
}

/* rows of a reshape that keeps axis 0 (the rest of each row reshaped) */
static int reshape_split_rows(const cft_params *p, const cft_aval *in, int nin, const bool *split,
                              int64_t T, int64_t n, bool *slice, cft_params *q) {
    (void)nin, (void)split, (void)n;
    if (in[0].ndim < 1 || p->n[0] < 1 || in[0].shape[0] != T || p->v[0][0] != T)
        return -1;
    *q = *p;
    q->v[0][0] = n;
    slice[0] = true;
    return 1;
}
const cft_prim cft_p_reshape = {
    .name = "reshape",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_VIEW_CONTIG,
    .pnames = {"shape"},
    .shape = reshape_shape,
    .impl = reshape_impl,
    .jvp = reshape_jvp,
    .transpose = reshape_transpose,
    .vmap = reshape_vmap,
    .split_rows = reshape_split_rows,
    .batch_sqnorm = reshape_batch_sqnorm,
    .batch_wsum = reshape_batch_wsum,
};
cft_array *cft__reshape(cft_array *x, const int64_t *shape, int ndim) {
    if (!cft_failed(x) && x->aval.ndim == ndim &&
        !memcmp(x->aval.shape, shape, sizeof(int64_t) * (size_t)ndim))
        return x;
    cft_params p = {0};
    cft__param_set(&p, 0, shape, ndim);
    return cft__bind1(&cft_p_reshape, &p, 1, &x);
}
cft_array *cft_reshape(cft_array *x, const int64_t *shape, int ndim) {
    CFT_PROPAGATE("cft_reshape", x);
    if (ndim < 0 || ndim > CFT_MAX_NDIM || (ndim && !shape))
        return cft__fail(CFT_E_ARG, "cft_reshape: bad target rank %d for %s", ndim,
                         cft__av(&x->aval));
    int64_t s[CFT_MAX_NDIM], known = 1;
    int neg = -1;
    for (int i = 0; i < ndim; i++) {
        s[i] = shape[i];
        if (s[i] == -1 && neg < 0)
            neg = i;
        else if (!cft_dim_valid(s[i]))
            return cft__fail(CFT_E_SHAPE, "cft_reshape: bad dim %s", cft__dim_s(s[i]));
        else
            known = cft_dim_mul(known, s[i]);
    }
    int64_t n = cft__numel(x->aval.shape, x->aval.ndim);
    if (neg >= 0) {
        int64_t q = known == 0 ? CFT_DIM_INVALID : cft_dim_div(n, known);
        if (q == CFT_DIM_INVALID)
            return cft__fail(CFT_E_SHAPE, "cft_reshape: cannot infer -1 reshaping %s (%s / %s)",
                             cft__av(&x->aval), cft__dim_s(n), cft__dim_s(known));
        s[neg] = q;
    }
    return cft__reshape(x, s, ndim);
}

/* ======== transpose[perm] ======== */

static cft_array *transpose_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    int nd = in[0].ndim;
    bool seen[CFT_MAX_NDIM] = {0};
    if (p->n[0] != nd)
        return cft__fail(CFT_E_ARG, "transpose: perm of length %d for %s", p->n[0],
                         cft__av(&in[0]));
    *out = in[0];
    for (int i = 0; i < nd; i++) {
        int64_t a = p->v[0][i];
        if (a < 0 || a >= nd || seen[a])
            return cft__fail(CFT_E_ARG, "transpose: perm is not a permutation of [0,%d) for %s", nd,
                             cft__av(&in[0]));
        seen[a] = true;
        out->shape[i] = in[0].shape[a];
    }
    return NULL;
}
static cft_array *transpose_impl(cft_array *const *in, int nin, const cft_params *p,
                                 cft_array **out) {
    (void)nin;
    const cft_array *x = in[0];
    int64_t shape[CFT_MAX_NDIM], st[CFT_MAX_NDIM];
    for (int i = 0; i < x->aval.ndim; i++) {
        shape[i] = x->aval.shape[p->v[0][i]];
        st[i] = x->strides[p->v[0][i]];
    }
    out[0] = cft__view(x, shape, x->aval.ndim, st, x->offset);
    return NULL;
}
static cft_array *transpose_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                                int nin, const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    ty[0] = t[0] ? cft__bind1(&cft_p_transpose, p, 1, t) : NULL;
    return NULL;
}
static cft_array *transpose_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                      int nin, const cft_params *p, cft_array **ct_in) {
    UNUSED4;
    int inv[CFT_MAX_NDIM];
    for (int i = 0; i < p->n[0]; i++)
        inv[p->v[0][i]] = i;
    ct_in[0] = cft_transpose(ct[0], inv);
    return NULL;
}
/* keep the batch axis in front; shift the permuted axes past it */
static cft_array *transpose_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                                 const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    int b = bdim[0], perm[CFT_MAX_NDIM];
    perm[0] = b;
    for (int i = 0; i < p->n[0]; i++) {
        int a = (int)p->v[0][i];
        perm[i + 1] = a >= b ? a + 1 : a;
    }
    y[0] = cft_transpose(x[0], perm);
    ybdim[0] = 0;
    return NULL;
}
/* a transpose of a result whose producer can emit it permuted goes away */
static bool transpose_simplify(const cft_eqn *q, cft_producer_fn producer, void *ctx,
                               cft_eqn *out) {
    const cft_eqn *pr = producer(ctx, q->in[0]->id);
    if (!pr || pr->nout != 1 || pr->nin != 2 || !pr->prim->fold_transpose)
        return false;
    cft_params np;
    bool swap = false;
    cft_aval in[2] = {pr->in[0]->aval, pr->in[1]->aval};
    if (!pr->prim->fold_transpose(&pr->params, q->params.v[0], q->params.n[0], in, &np, &swap))
        return false;
    *out = *pr;
    out->params = np;
    out->in = CFT_NEWN(cft_irvar *, 2);
    out->in[0] = pr->in[swap ? 1 : 0];
    out->in[1] = pr->in[swap ? 0 : 1];
    out->out = q->out;
    return true;
}

/* a transpose moves the examples' axis and keeps each example's norm; the
 * weighted sum is permuted as the examples were */
static bool transpose_batch_sqnorm(const cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                                   cft_array **out) {
    return axis < q->params.n[0] &&
           cft__batch_sqnorm_of(c, q->in[0]->id, (int)q->params.v[0][axis], nb, out);
}
static bool transpose_batch_wsum(const cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                                 cft_array *w, cft_array **out) {
    int n = q->params.n[0], perm[CFT_MAX_NDIM];
    if (axis >= n || !cft__batch_wsum_of(c, q->in[0]->id, (int)q->params.v[0][axis], nb, w, out))
        return false;
    for (int i = 0; i < n; i++)
        perm[i] = (int)q->params.v[0][i];
    if (c->value)
        *out = cft_transpose(*out, perm);
    return true;
}

/* rows of a transpose that keeps axis 0 first */
static int transpose_split_rows(const cft_params *p, const cft_aval *in, int nin, const bool *split,
                                int64_t T, int64_t n, bool *slice, cft_params *q) {
    (void)nin, (void)split, (void)n;
    if (in[0].ndim < 1 || p->v[0][0] != 0 || in[0].shape[0] != T)
        return -1;
    *q = *p;
    slice[0] = true;
    return 1;
}
const cft_prim cft_p_transpose = {
    .name = "transpose",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_CONJ_AWARE | CFT_PRIM_VIEW,
    .pnames = {"perm"},
    .shape = transpose_shape,
    .impl = transpose_impl,
    .jvp = transpose_jvp,
    .transpose = transpose_transpose,
    .vmap = transpose_vmap,
    .split_rows = transpose_split_rows,
    .simplify = transpose_simplify,
    .batch_sqnorm = transpose_batch_sqnorm,
    .batch_wsum = transpose_batch_wsum,
};
cft_array *cft_transpose(cft_array *x, const int *perm) {
    CFT_PROPAGATE("cft_transpose", x);
    int nd = x->aval.ndim, pr[CFT_MAX_NDIM];
    bool ident = true;
    for (int i = 0; i < nd; i++) {
        pr[i] = perm ? norm_axis(perm[i], nd) : nd - 1 - i;
        ident &= pr[i] == i;
    }
    if (ident)
        return x;
    cft_params p = {0};
    cft__param_set_int(&p, 0, pr, nd);
    return cft__bind1(&cft_p_transpose, &p, 1, &x);
}
cft_array *cft_mT(cft_array *x) {
    CFT_PROPAGATE("cft_mT", x);
    int nd = x->aval.ndim, perm[CFT_MAX_NDIM];
    if (nd < 2)
        return cft__fail(CFT_E_SHAPE, "cft_mT: needs rank >= 2, got %s", cft__av(&x->aval));
    for (int i = 0; i < nd; i++)
        perm[i] = i;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    return cft_transpose(x, perm);
}
cft_array *cft_moveaxis(cft_array *x, int src, int dst) {
    CFT_PROPAGATE("cft_moveaxis", x);
    int nd = x->aval.ndim;
    src = norm_axis(src, nd);
    dst = norm_axis(dst, nd);
    if (src < 0 || src >= nd || dst < 0 || dst >= nd)
        return cft__fail(CFT_E_ARG, "cft_moveaxis: axes %d -> %d out of range for %s", src, dst,
                         cft__av(&x->aval));
    int perm[CFT_MAX_NDIM], k = 0;
    for (int i = 0; i < nd; i++)
        if (i != src)
            perm[k++] = i;
    for (int i = nd - 1; i > dst; i--)
        perm[i] = perm[i - 1];
    perm[dst] = src;
    return cft_transpose(x, perm);
}

/* ======== squeeze[axes] and expand_dims[axes]: reshapes that name axes ======== */

static cft_array *squeeze_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    bool drop[CFT_MAX_NDIM] = {0};
    for (int i = 0; i < p->n[0]; i++) {
        int64_t a = p->v[0][i];
        if (a < 0 || a >= in[0].ndim || in[0].shape[a] != 1)
            return cft__fail(CFT_E_SHAPE, "squeeze: axis %lld of %s is not of size 1", (long long)a,
                             cft__av(&in[0]));
        drop[a] = true;
    }
    *out = cft__aval(in[0].dtype, NULL, 0);
    for (int i = 0; i < in[0].ndim; i++)
        if (!drop[i])
            out->shape[out->ndim++] = in[0].shape[i];
    return NULL;
}
static cft_array *expand_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    int nd = in[0].ndim + p->n[0];
    if (nd > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "expand_dims: rank %d too large", nd);
    bool ins[CFT_MAX_NDIM] = {0};
    for (int i = 0; i < p->n[0]; i++) {
        int64_t a = p->v[0][i];
        if (a < 0 || a >= nd || ins[a])
            return cft__fail(CFT_E_ARG, "expand_dims: bad axis %lld for %s", (long long)a,
                             cft__av(&in[0]));
        ins[a] = true;
    }
    *out = cft__aval(in[0].dtype, NULL, 0);
    out->ndim = nd;
    for (int i = 0, k = 0; i < nd; i++)
        out->shape[i] = ins[i] ? 1 : in[0].shape[k++];
    return NULL;
}
/* both are views: drop unit dims from, or insert zero strides into, x's strides */
static cft_array *squeeze_impl(cft_array *const *in, int nin, const cft_params *p,
                               cft_array **out) {
    (void)nin;
    const cft_array *x = in[0];
    bool drop[CFT_MAX_NDIM] = {0};
    for (int i = 0; i < p->n[0]; i++)
        drop[p->v[0][i]] = true;
    int64_t shape[CFT_MAX_NDIM], st[CFT_MAX_NDIM];
    int k = 0;
    for (int i = 0; i < x->aval.ndim; i++)
        if (!drop[i]) {
            shape[k] = x->aval.shape[i];
            st[k++] = x->strides[i];
        }
    out[0] = cft__view(x, shape, k, st, x->offset);
    return NULL;
}
static cft_array *expand_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    const cft_array *x = in[0];
    int nd = x->aval.ndim + p->n[0];
    bool ins[CFT_MAX_NDIM] = {0};
    for (int i = 0; i < p->n[0]; i++)
        ins[p->v[0][i]] = true;
    int64_t shape[CFT_MAX_NDIM], st[CFT_MAX_NDIM];
    for (int i = 0, k = 0; i < nd; i++) {
        shape[i] = ins[i] ? 1 : x->aval.shape[k];
        st[i] = ins[i] ? 0 : x->strides[k++];
    }
    out[0] = cft__view(x, shape, nd, st, x->offset);
    return NULL;
}
static cft_array *unit_jvp(const cft_prim *prim, cft_array *const *t, const cft_params *p,
                           cft_array **ty) {
    ty[0] = t[0] ? cft__bind1(prim, p, 1, t) : NULL;
    return NULL;
}
static cft_array *squeeze_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    return unit_jvp(&cft_p_squeeze, t, p, ty);
}
static cft_array *expand_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    return unit_jvp(&cft_p_expand_dims, t, p, ty);
}
static cft_array *unit_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                 int nin, const cft_params *p, cft_array **ct_in) {
    UNUSED4;
    ct_in[0] = cft__reshape(ct[0], in[0].shape, in[0].ndim);
    return NULL;
}
static cft_array *unit_vmap(const cft_prim *prim, cft_array *const *x, const int *bdim,
                            const cft_params *p, cft_array **y, int *ybdim) {
    cft_params q = *p;
    for (int i = 0; i < q.n[0]; i++)
        q.v[0][i] += 1;
    cft_array *xb = cft__moveaxis_b(x[0], bdim[0], 0);
    y[0] = cft__bind1(prim, &q, 1, &xb);
    ybdim[0] = 0;
    return NULL;
}
static cft_array *squeeze_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                               const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    return unit_vmap(&cft_p_squeeze, x, bdim, p, y, ybdim);
}
static cft_array *expand_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    return unit_vmap(&cft_p_expand_dims, x, bdim, p, y, ybdim);
}
/* rows of a squeeze of other axes than 0, or of expand_dims putting new
 * axes after axis 0 (both: axes that are not 0) */
static int squeeze_split_rows(const cft_params *p, const cft_aval *in, int nin, const bool *split,
                              int64_t T, int64_t n, bool *slice, cft_params *q) {
    (void)nin, (void)split, (void)n;
    if (in[0].ndim < 1 || in[0].shape[0] != T)
        return -1;
    for (int i = 0; i < p->n[0]; i++)
        if (p->v[0][i] == 0)
            return -1;
    *q = *p;
    slice[0] = true;
    return 1;
}
const cft_prim cft_p_squeeze = {
    .name = "squeeze",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_VIEW,
    .pnames = {"axes"},
    .shape = squeeze_shape,
    .impl = squeeze_impl,
    .jvp = squeeze_jvp,
    .transpose = unit_transpose,
    .vmap = squeeze_vmap,
    .split_rows = squeeze_split_rows,
};
const cft_prim cft_p_expand_dims = {
    .name = "expand_dims",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_VIEW,
    .pnames = {"axes"},
    .shape = expand_shape,
    .impl = expand_impl,
    .jvp = expand_jvp,
    .transpose = unit_transpose,
    .vmap = expand_vmap,
    .split_rows = squeeze_split_rows,
};
cft_array *cft_squeeze(cft_array *x, const int *axes, int naxes) {
    CFT_PROPAGATE("cft_squeeze", x);
    int64_t ax[CFT_MAX_NDIM];
    int n = 0;
    bool mark[CFT_MAX_NDIM] = {0};
    if (naxes == 0) {
        for (int i = 0; i < x->aval.ndim; i++)
            if (x->aval.shape[i] == 1)
                mark[i] = true;
    } else {
        for (int i = 0; i < naxes; i++) {
            int a = norm_axis(axes[i], x->aval.ndim);
            if (a < 0 || a >= x->aval.ndim)
                return cft__fail(CFT_E_ARG, "cft_squeeze: axis %d out of range for %s", axes[i],
                                 cft__av(&x->aval));
            mark[a] = true;
        }
    }
    for (int i = 0; i < x->aval.ndim; i++)
        if (mark[i])
            ax[n++] = i;
    if (!n)
        return x;
    cft_params p = {0};
    cft__param_set(&p, 0, ax, n);
    return cft__bind1(&cft_p_squeeze, &p, 1, &x);
}
cft_array *cft_expand_dims(cft_array *x, int axis) {
    CFT_PROPAGATE("cft_expand_dims", x);
    int a = norm_axis(axis, x->aval.ndim + 1);
    if (a < 0 || a > x->aval.ndim)
        return cft__fail(CFT_E_ARG, "cft_expand_dims: axis %d out of range for %s", axis,
                         cft__av(&x->aval));
    cft_params p = {0};
    cft__param_set1(&p, 0, a);
    return cft__bind1(&cft_p_expand_dims, &p, 1, &x);
}

/* ======== slice[start, limit, strides] ======== */

static int64_t slice_len(int64_t s, int64_t l, int64_t st) {
    return l <= s ? 0 : (l - s + st - 1) / st;
}

/* the length of [s:l:st] on a dim n of which some may be symbolic;
 * CFT_DIM_INVALID when it is not provably in range or not expressible */
static int64_t slice_len_sym(int64_t n, int64_t s, int64_t l, int64_t st) {
    if (st < 1 || !cft_dim_valid(s) || !cft_dim_valid(l) || !cft__dim_ge(n, l) ||
        !cft__dim_ge(l, s))
        return CFT_DIM_INVALID;
    int64_t len = cft_dim_sub(l, s);
    if (!cft_dim_is_symbolic(len))
        return slice_len(s, l, st);
    return st == 1 ? len : cft_dim_div(cft_dim_add(len, st - 1), st);
}

static cft_array *slice_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    *out = in[0];
    for (int i = 0; i < in[0].ndim; i++) {
        int64_t s = p->v[0][i], l = p->v[1][i], st = p->v[2][i];
        if (cft_dim_is_symbolic(in[0].shape[i]) || cft_dim_is_symbolic(s) ||
            cft_dim_is_symbolic(l)) {
            out->shape[i] = slice_len_sym(in[0].shape[i], s, l, st);
            if (out->shape[i] == CFT_DIM_INVALID)
                return cft__fail(CFT_E_ARG,
                                 "slice: cannot show that [%s:%s:%lld] is a range of dim %d of %s",
                                 cft__dim_s(s), cft__dim_s(l), (long long)st, i, cft__av(&in[0]));
            continue;
        }
        if (s < 0 || l > in[0].shape[i] || s > l || st < 1)
            return cft__fail(CFT_E_ARG, "slice: bad range [%lld:%lld:%lld] on dim %d of %s",
                             (long long)s, (long long)l, (long long)st, i, cft__av(&in[0]));
        out->shape[i] = slice_len(s, l, st);
    }
    return NULL;
}
static cft_array *slice_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    const cft_array *x = in[0];
    int64_t shape[CFT_MAX_NDIM], st[CFT_MAX_NDIM], off = x->offset;
    for (int i = 0; i < x->aval.ndim; i++) {
        shape[i] = slice_len(p->v[0][i], p->v[1][i], p->v[2][i]);
        st[i] = x->strides[i] * p->v[2][i];
        off += p->v[0][i] * x->strides[i];
    }
    out[0] = cft__view(x, shape, x->aval.ndim, st, off);
    return NULL;
}
static cft_array *slice_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                            const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    ty[0] = t[0] ? cft__bind1(&cft_p_slice, p, 1, t) : NULL;
    return NULL;
}
/* the cotangent lands back in place: pad it with zeros */
static cft_array *slice_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                  int nin, const cft_params *p, cft_array **ct_in) {
    UNUSED4;
    int64_t lo[CFT_MAX_NDIM], hi[CFT_MAX_NDIM], inter[CFT_MAX_NDIM];
    const cft_aval *o = &ct[0]->aval;
    if (cft__numel(o->shape, o->ndim) == 0) {
        ct_in[0] = cft__zeros_aval(&in[0]);
        return NULL;
    }
    for (int i = 0; i < in[0].ndim; i++) {
        lo[i] = p->v[0][i];
        inter[i] = p->v[2][i] - 1;
        /* n - lo - (m - 1) * stride - 1, symbolic dims included */
        hi[i] = cft_dim_sub(cft_dim_sub(in[0].shape[i], lo[i]),
                            cft_dim_add(cft_dim_mul(cft_dim_sub(o->shape[i], 1), p->v[2][i]), 1));
    }
    ct_in[0] = cft_pad(ct[0], cft_scalar(0, o->dtype), lo, hi, inter);
    return NULL;
}
static cft_array *slice_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                             const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    cft_params q = {0};
    int b = bdim[0], nd = p->n[0] + 1;
    for (int k = 0; k < 3; k++) {
        q.n[k] = (int8_t)nd;
        for (int i = 0, j = 0; i < nd; i++)
            q.v[k][i] = i == b ? (k == 0 ? 0 : k == 1 ? size : 1) : p->v[k][j++];
    }
    y[0] = cft__bind1(&cft_p_slice, &q, 1, x);
    ybdim[0] = b;
    return NULL;
}
const cft_prim cft_p_slice = {
    .name = "slice",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"start", "limit", "strides"},
    .shape = slice_shape,
    .impl = slice_impl,
    .jvp = slice_jvp,
    .transpose = slice_transpose,
    .vmap = slice_vmap,
};
cft_array *cft_slice(cft_array *x, const int64_t *start, const int64_t *limit,
                     const int64_t *strides) {
    CFT_PROPAGATE("cft_slice", x);
    int nd = x->aval.ndim;
    if (nd && (!start || !limit))
        return cft__fail(CFT_E_ARG, "cft_slice: start/limit NULL for %s", cft__av(&x->aval));
    cft_params p = {0};
    int64_t one[CFT_MAX_NDIM];
    for (int i = 0; i < nd; i++)
        one[i] = 1;
    cft__param_set(&p, 0, start, nd);
    cft__param_set(&p, 1, limit, nd);
    cft__param_set(&p, 2, strides ? strides : one, nd);
    return cft__bind1(&cft_p_slice, &p, 1, &x);
}
cft_array *cft_index(cft_array *x, int64_t i) {
    CFT_PROPAGATE("cft_index", x);
    if (x->aval.ndim < 1 || i < 0 || !cft__dim_gt(x->aval.shape[0], i))
        return cft__fail(CFT_E_ARG, "cft_index: index %lld out of range for %s", (long long)i,
                         cft__av(&x->aval));
    int64_t s[CFT_MAX_NDIM] = {0}, l[CFT_MAX_NDIM];
    for (int d = 0; d < x->aval.ndim; d++)
        l[d] = x->aval.shape[d];
    s[0] = i;
    l[0] = i + 1;
    return cft_squeeze(cft_slice(x, s, l, NULL), (int[]){0}, 1);
}

/* ======== pad[lo, hi, interior](x, value) ======== */

static cft_array *pad_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    if (in[1].ndim != 0 || in[1].dtype != in[0].dtype)
        return cft__fail(CFT_E_SHAPE, "pad: padding value must be a scalar of %s, got %s",
                         cft_dtype_name(in[0].dtype), cft__av(&in[1]));
    *out = in[0];
    for (int i = 0; i < in[0].ndim; i++) {
        int64_t n = in[0].shape[i], it = p->v[2][i];
        if (it < 0)
            return cft__fail(CFT_E_ARG, "pad: negative interior padding on dim %d", i);
        if (cft_dim_is_symbolic(n) || cft_dim_is_symbolic(p->v[0][i]) ||
            cft_dim_is_symbolic(p->v[1][i])) { /* symbols are >= 1 */
            int64_t m = cft_dim_add(cft_dim_add(p->v[0][i], p->v[1][i]),
                                    cft_dim_add(n, cft_dim_mul(cft_dim_sub(n, 1), it)));
            if (m == CFT_DIM_INVALID || !cft__dim_ge(m, 0))
                return cft__fail(CFT_E_SHAPE, "pad: cannot show dim %d of %s stays >= 0", i,
                                 cft__av(&in[0]));
            out->shape[i] = m;
            continue;
        }
        int64_t m = p->v[0][i] + p->v[1][i] + n + (n > 0 ? (n - 1) * it : 0);
        if (m < 0)
            return cft__fail(CFT_E_SHAPE, "pad: dim %d of %s would have size %lld", i,
                             cft__av(&in[0]), (long long)m);
        out->shape[i] = m;
    }
    return NULL;
}
static cft_array *pad_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    cft_aval o;
    pad_shape((cft_aval[]){in[0]->aval, in[1]->aval}, nin, p, &o);
    cft_array *x = cft__contig(in[0]), *y = cft__alloc(o.dtype, o.shape, o.ndim);
    if (cft_failed(y))
        return y;
    size_t es = cft_dtype_size(o.dtype);
    int64_t n = cft__numel(o.shape, o.ndim), nx = cft__numel(x->aval.shape, x->aval.ndim);
    const char *pv = cft__ptr(in[1]);
    for (int64_t i = 0; i < n; i++)
        memcpy(y->data + i * (int64_t)es, pv, es);
    int64_t idx[CFT_MAX_NDIM] = {0};
    const char *src = cft__ptr(x);
    for (int64_t i = 0; i < nx; i++) {
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < o.ndim; d++) {
            int64_t od = p->v[0][d] + idx[d] * (p->v[2][d] + 1);
            inside &= od >= 0 && od < o.shape[d];
            off = off * o.shape[d] + od;
        }
        if (inside)
            memcpy(y->data + off * (int64_t)es, src + i * (int64_t)es, es);
        for (int d = o.ndim - 1; d >= 0; d--) {
            if (++idx[d] < x->aval.shape[d])
                break;
            idx[d] = 0;
        }
    }
    cft__keep(x);
    out[0] = y;
    return NULL;
}
static cft_array *pad_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    if (!t[0] && !t[1]) {
        ty[0] = NULL;
        return NULL;
    }
    cft_array *a[2] = {cft__inst(t[0], &x[0]->aval), cft__inst(t[1], &x[1]->aval)};
    ty[0] = cft__bind1(&cft_p_pad, p, 2, a);
    return NULL;
}
/* undo negative padding by padding with zeros, then take every
 * (interior+1)-th element; the value's cotangent is what the operand's
 * elements did not take */
static cft_array *pad_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)nin, (void)x;
    int nd = in[0].ndim;
    int64_t lo[CFT_MAX_NDIM], hi[CFT_MAX_NDIM], z[CFT_MAX_NDIM] = {0}, s[CFT_MAX_NDIM],
                                                l[CFT_MAX_NDIM], st[CFT_MAX_NDIM];
    bool empty = false;
    for (int i = 0; i < nd; i++) {
        lo[i] = p->v[0][i] < 0 ? -p->v[0][i] : 0;
        hi[i] = p->v[1][i] < 0 ? -p->v[1][i] : 0;
        int64_t n = in[0].shape[i];
        s[i] = p->v[0][i] > 0 ? p->v[0][i] : 0;
        st[i] = p->v[2][i] + 1;
        l[i] = n ? cft_dim_add(s[i], cft_dim_add(cft_dim_mul(cft_dim_sub(n, 1), st[i]), 1)) : s[i];
        empty |= n == 0;
    }
    cft_array *c = cft_pad(ct[0], cft_scalar(0, ct[0]->aval.dtype), lo, hi, z);
    cft_array *cx = empty ? cft__zeros_aval(&in[0]) : cft_slice(c, s, l, st);
    ct_in[0] = x[0] ? NULL : cx;
    ct_in[1] = x[1] ? NULL : cft_sub(cft_sum(ct[0], NULL, 0, false), cft_sum(cx, NULL, 0, false));
    return NULL;
}
/* a batched padding value: pad with zero, then select the value into the
 * positions that are padding */
static cft_array *pad_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    cft_array *xb = cft__batch_at(x[0], bdim[0], size, 0);
    cft_params q = {0};
    for (int k = 0; k < 3; k++) {
        q.n[k] = (int8_t)(p->n[k] + 1);
        for (int i = 0; i < p->n[k]; i++)
            q.v[k][i + 1] = p->v[k][i];
    }
    ybdim[0] = 0;
    if (bdim[1] < 0) {
        y[0] = cft__bind1(&cft_p_pad, &q, 2, (cft_array *[]){xb, x[1]});
        return NULL;
    }
    cft_dtype dt = xb->aval.dtype;
    cft_array *padded = cft__bind1(&cft_p_pad, &q, 2, (cft_array *[]){xb, cft_scalar(0, dt)});
    cft_array *ones = cft_ones(CFT_BOOL, xb->aval.shape, xb->aval.ndim);
    cft_array *mask = cft__bind1(&cft_p_pad, &q, 2, (cft_array *[]){ones, cft_scalar(0, CFT_BOOL)});
    const cft_aval *o = &padded->aval;
    cft_array *v = cft_broadcast_in_dim(x[1], o->shape, o->ndim, (int[]){0});
    y[0] = cft__select(mask, padded, v);
    return NULL;
}
const cft_prim cft_p_pad = {
    .name = "pad",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"lo", "hi", "interior"},
    .shape = pad_shape,
    .impl = pad_impl,
    .jvp = pad_jvp,
    .transpose = pad_transpose,
    .vmap = pad_vmap,
};
cft_array *cft_pad(cft_array *x, cft_array *value, const int64_t *lo, const int64_t *hi,
                   const int64_t *interior) {
    CFT_PROPAGATE("cft_pad", x, value);
    int nd = x->aval.ndim;
    if (nd && (!lo || !hi))
        return cft__fail(CFT_E_ARG, "cft_pad: lo/hi NULL for %s", cft__av(&x->aval));
    int64_t z[CFT_MAX_NDIM] = {0};
    cft_params p = {0};
    cft__param_set(&p, 0, lo, nd);
    cft__param_set(&p, 1, hi, nd);
    cft__param_set(&p, 2, interior ? interior : z, nd);
    return cft__bind1(&cft_p_pad, &p, 2, (cft_array *[]){x, cft__convert(value, x->aval.dtype)});
}

/* ======== concatenate[axis] (variadic) ======== */

static cft_array *concat_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    int ax = (int)p->v[0][0];
    if (nin < 1)
        return cft__fail(CFT_E_ARG, "concatenate: no operands");
    if (ax < 0 || ax >= in[0].ndim)
        return cft__fail(CFT_E_ARG, "concatenate: axis %d out of range for %s", ax,
                         cft__av(&in[0]));
    *out = in[0];
    for (int k = 1; k < nin; k++) {
        bool ok = in[k].dtype == in[0].dtype && in[k].ndim == in[0].ndim;
        for (int i = 0; ok && i < in[0].ndim; i++)
            ok = i == ax || in[k].shape[i] == in[0].shape[i];
        if (!ok)
            return cft__fail(CFT_E_SHAPE,
                             "concatenate: operand %d %s does not fit %s along axis %d", k,
                             cft__av(&in[k]), cft__av(&in[0]), ax);
        out->shape[ax] = cft_dim_add(out->shape[ax], in[k].shape[ax]);
    }
    return NULL;
}
static cft_array *concat_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    cft_aval *avs = CFT_NEWN(cft_aval, nin > 0 ? nin : 1), o = {0};
    if (nin < 1 || !avs)
        return cft__fail(CFT_E_ARG, "concatenate: %d operands", nin);
    for (int k = 0; k < nin; k++)
        avs[k] = in[k]->aval;
    concat_shape(avs, nin, p, &o);
    cft_array *y = cft__alloc(o.dtype, o.shape, o.ndim);
    if (cft_failed(y))
        return y;
    int ax = (int)p->v[0][0];
    int64_t at = 0;
    size_t es = cft_dtype_size(o.dtype);
    for (int k = 0; k < nin; k++) {
        cft_array *x = cft__contig(in[k]);
        strided_assign(y->data + at * y->strides[ax] * (int64_t)es, y->strides, cft__ptr(x),
                       x->aval.shape, x->aval.ndim, es);
        cft__keep(x);
        at += x->aval.shape[ax];
    }
    out[0] = y;
    return NULL;
}
static cft_array *concat_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)y;
    bool any = false;
    cft_array *ts[nin];
    for (int k = 0; k < nin; k++) {
        any |= t[k] != NULL;
        ts[k] = cft__inst(t[k], &x[k]->aval);
    }
    ty[0] = any ? cft__bind1(&cft_p_concatenate, p, nin, ts) : NULL;
    return NULL;
}
static cft_array *concat_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                   int nin, const cft_params *p, cft_array **ct_in) {
    int ax = (int)p->v[0][0], nd = in[0].ndim;
    int64_t s[CFT_MAX_NDIM] = {0}, l[CFT_MAX_NDIM], at = 0;
    for (int k = 0; k < nin; k++) {
        for (int i = 0; i < nd; i++)
            l[i] = in[0].shape[i];
        s[ax] = at;
        l[ax] = cft_dim_add(at, in[k].shape[ax]);
        ct_in[k] = x[k] ? NULL : cft_slice(ct[0], s, l, NULL);
        at = l[ax];
    }
    return NULL;
}
static cft_array *concat_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    cft_array *xs[nin];
    for (int k = 0; k < nin; k++)
        xs[k] = cft__batch_at(x[k], bdim[k], size, 0);
    cft_params q = *p;
    q.v[0][0] += 1;
    y[0] = cft__bind1(&cft_p_concatenate, &q, nin, xs);
    ybdim[0] = 0;
    return NULL;
}
const cft_prim cft_p_concatenate = {
    .name = "concatenate",
    .nin = -1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"#axis"},
    .shape = concat_shape,
    .impl = concat_impl,
    .jvp = concat_jvp,
    .transpose = concat_transpose,
    .vmap = concat_vmap,
};
cft_array *cft_concatenate(cft_array *const *xs, int n, int axis) {
    CFT_API("cft_concatenate");
    if (!xs || n < 1)
        return cft__fail(CFT_E_ARG, "cft_concatenate: no arrays");
    for (int k = 0; k < n; k++) {
        if (!xs[k])
            return cft__fail(CFT_E_ARG, "cft_concatenate: array %d is NULL", k);
        if (cft_failed(xs[k]))
            return xs[k];
    }
    cft_dtype dt = xs[0]->aval.dtype;
    for (int k = 1; k < n; k++)
        dt = cft_promote(dt, xs[k]->aval.dtype);
    cft_array *ys[n];
    for (int k = 0; k < n; k++)
        ys[k] = cft__convert(xs[k], dt);
    if (n == 1)
        return ys[0];
    cft_params p = {0};
    cft__param_set1(&p, 0, norm_axis(axis, xs[0]->aval.ndim));
    return cft__bind1(&cft_p_concatenate, &p, n, ys);
}
cft_array *cft_stack(cft_array *const *xs, int n, int axis) {
    CFT_API("cft_stack");
    if (!xs || n < 1)
        return cft__fail(CFT_E_ARG, "cft_stack: no arrays");
    cft_array *ys[n];
    for (int k = 0; k < n; k++) {
        if (!xs[k])
            return cft__fail(CFT_E_ARG, "cft_stack: array %d is NULL", k);
        ys[k] = cft_expand_dims(xs[k], axis);
    }
    return cft_concatenate(ys, n, axis < 0 ? axis : axis);
}

/* ======== constants of symbolic shape ======== */

/* cft_full of a symbolic shape: the scalar broadcast to it, which bind
 * stages (its result has a symbolic shape) */
static cft_array *full_sym(double value, cft_dtype dt, const int64_t *shape, int ndim) {
    return cft_broadcast_in_dim(cft_scalar(value, dt), shape, ndim, NULL);
}
__attribute__((constructor)) static void set_full_sym(void) {
    cft__full_sym = full_sym;
}

cft_array *cft__dim_value(int64_t d, cft_dtype dt) {
    if (!cft_dim_is_symbolic(d))
        return cft_scalar((double)d, dt);
    /* the count of ones in a vector of d elements: computed when it runs */
    return cft__reduce_sum(cft_ones(dt, &d, 1), (int[]){0}, 1);
}
cft_array *cft_dim_value(int64_t d, cft_dtype dtype) {
    if (!cft_dim_valid(d))
        return cft__fail(CFT_E_ARG, "cft_dim_value: %s is not a dim", cft__dim_s(d));
    if ((unsigned)dtype >= CFT_NDTYPES)
        return cft__fail(CFT_E_DTYPE, "cft_dim_value: bad dtype %d", (int)dtype);
    return cft__dim_value(d, dtype);
}

/* ======== iota[dtype, shape, dim] ======== */

static cft_array *iota_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)in, (void)nin;
    if ((uint64_t)p->v[0][0] >= CFT_NDTYPES || p->v[2][0] < 0 || p->v[2][0] >= p->n[1])
        return cft__fail(CFT_E_ARG, "iota: bad dtype or dim %lld for rank %d",
                         (long long)p->v[2][0], p->n[1]);
    *out = cft__aval((cft_dtype)p->v[0][0], p->v[1], p->n[1]);
    return NULL;
}
static cft_array *iota_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)in, (void)nin;
    cft_array *y = cft__alloc((cft_dtype)p->v[0][0], p->v[1], p->n[1]);
    if (cft_failed(y))
        return y;
    int d = (int)p->v[2][0];
    int64_t n = cft__numel(p->v[1], p->n[1]);
    for (int64_t i = 0; i < n; i++)
        cft__set(y->data, y->aval.dtype, i, (double)((i / y->strides[d]) % p->v[1][d]));
    out[0] = y;
    return NULL;
}
static cft_array *iota_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)x, (void)bdim, (void)nin;
    y[0] = cft__bind1(&cft_p_iota, p, 0, NULL); /* no operands: never batched */
    ybdim[0] = -1;
    return NULL;
}
const cft_prim cft_p_iota = {
    .name = "iota",
    .nin = 0,
    .nout = 1,
    .flags = CFT_PRIM_NONDIFF,
    .pnames = {"dtype", "shape", "#dim"},
    .shape = iota_shape,
    .impl = iota_impl,
    .vmap = iota_vmap,
};
cft_array *cft_iota(cft_dtype dtype, const int64_t *shape, int ndim, int dim) {
    CFT_API("cft_iota");
    if (ndim < 1 || ndim > CFT_MAX_NDIM || !shape)
        return cft__fail(CFT_E_ARG, "cft_iota: bad rank %d", ndim);
    cft_params p = {0};
    cft__param_set1(&p, 0, dtype);
    cft__param_set(&p, 1, shape, ndim);
    cft__param_set1(&p, 2, norm_axis(dim, ndim));
    return cft__bind1(&cft_p_iota, &p, 0, NULL);
}

/* ======== stop_gradient ======== */

static cft_array *sg_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    *out = in[0];
    return NULL;
}
static cft_array *sg_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    out[0] = in[0];
    return NULL;
}
static cft_array *sg_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                          const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    y[0] = cft__bind1(&cft_p_stop_gradient, p, 1, x);
    ybdim[0] = bdim[0];
    return NULL;
}
const cft_prim cft_p_stop_gradient = {
    .name = "stop_gradient",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_NONDIFF | CFT_PRIM_ELEMENTWISE | CFT_PRIM_IDENTITY,
    .shape = sg_shape,
    .impl = sg_impl,
    .vmap = sg_vmap,
    .c_expr = "x",
};
cft_array *cft_stop_gradient(cft_array *x) {
    CFT_PROPAGATE("cft_stop_gradient", x);
    return cft__bind1(&cft_p_stop_gradient, NULL, 1, &x);
}
