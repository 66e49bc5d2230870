/* prims.c: collectives inside traced functions, as primitives with every
 * rule (DESIGN.md: communication is part of the IR). Each record carries
 * its group's id in parameter slot 0.
 *
 *   psum          y = sum over ranks of x           linear; transpose psum
 *                                                   (JAX's pmap semantics)
 *   all_gather    y = [x_0, ..., x_{p-1}]  ([p, ...])   transpose psum_scatter
 *   psum_scatter  y = (sum_r x_r)[rank]    (x [p, ...]) transpose all_gather
 *   ppermute      y_{perm[r]} = x_r, zeros where nothing arrives
 *                                                   transpose: inverse perm
 *
 * All are linear, so the jvp applies the primitive to the tangent. Under
 * vmap, psum and ppermute act elementwise (the batch axis stays where it
 * is); all_gather and psum_scatter work on the leading axis, so the batch
 * axis is moved last first. The eager impls are the array collectives. */
#include <string.h>

#include "dist/dist.h"
#include "prims/rules.h"

static cft_dist_group *group_of(const cft_params *p) {
    return cft__dist_group_by_id((int)p->v[0][0]);
}

static cft_array *check(const char *name, const cft_params *p) {
    cft_dist_group *g = group_of(p);
    return cft__dist_check(name, g);
}

/* ---- psum ---- */

static cft_array *psum_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    cft_array *e = check("psum", p);
    if (e)
        return e;
    if (in[0].dtype == CFT_BOOL)
        return cft__fail(CFT_E_DTYPE, "psum: bool arrays do not sum (cast first)");
    out[0] = in[0];
    return NULL;
}
static cft_array *psum_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    (void)nin;
    y[0] = cft_dist_all_reduce(group_of(p), x[0], CFT_DIST_SUM);
    return cft_failed(y[0]) ? y[0] : NULL;
}
extern const cft_prim cft_p_psum;
static cft_array *bind_same(const cft_prim *prim, cft_array *x, const cft_params *p) {
    return cft__bind1(prim, p, 1, &x);
}
/* every rule of a linear primitive applies one of them to a tangent or a
 * cotangent (NULL: a symbolic zero stays zero) */
static cft_array *apply(const cft_prim *prim, cft_array *v, const cft_params *p, cft_array **out) {
    *out = v ? bind_same(prim, v, p) : NULL;
    return *out && cft_failed(*out) ? *out : NULL;
}
static cft_array *psum_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    return apply(&cft_p_psum, t[0], p, &ty[0]);
}
static cft_array *psum_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                 int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin;
    return apply(&cft_p_psum, ct[0], p, &ct_in[0]);
}
/* elementwise across ranks: the batch axis stays */
static cft_array *same_axis_vmap(const cft_prim *prim, cft_array *const *x, const int *bdim,
                                 const cft_params *p, cft_array **y, int *ybdim) {
    y[0] = bind_same(prim, x[0], p);
    ybdim[0] = bdim[0];
    return cft_failed(y[0]) ? y[0] : NULL;
}
static cft_array *psum_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    return same_axis_vmap(&cft_p_psum, x, bdim, p, y, ybdim);
}

const cft_prim cft_p_psum = {
    .name = "psum",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_DEVICE_IMPL,
    .pnames = {"group"},
    .shape = psum_shape,
    .impl = psum_impl,
    .jvp = psum_jvp,
    .transpose = psum_transpose,
    .vmap = psum_vmap,
};

/* ---- all_gather and psum_scatter (each the other's transpose) ---- */

extern const cft_prim cft_p_all_gather, cft_p_psum_scatter;

static cft_array *gather_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    cft_array *e = check("all_gather", p);
    if (e)
        return e;
    if (in[0].ndim == CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "all_gather: %s leaves no room for the rank axis",
                         cft__av(&in[0]));
    out[0] = in[0];
    out[0].ndim = in[0].ndim + 1;
    out[0].shape[0] = group_of(p)->size;
    memcpy(&out[0].shape[1], in[0].shape, sizeof(int64_t) * (size_t)in[0].ndim);
    return NULL;
}
static cft_array *gather_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    (void)nin;
    y[0] = cft_dist_all_gather(group_of(p), x[0], true);
    return cft_failed(y[0]) ? y[0] : NULL;
}
static cft_array *scatter_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    cft_array *e = check("psum_scatter", p);
    if (e)
        return e;
    int size = group_of(p)->size;
    if (in[0].ndim < 1 || in[0].shape[0] != size)
        return cft__fail(CFT_E_SHAPE, "psum_scatter: %s needs a leading axis of %d (the ranks)",
                         cft__av(&in[0]), size);
    if (in[0].dtype == CFT_BOOL)
        return cft__fail(CFT_E_DTYPE, "psum_scatter: bool arrays do not sum");
    out[0] = cft__aval_drop(&in[0], 0);
    return NULL;
}
static cft_array *scatter_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    (void)nin;
    cft_array *r = cft_dist_reduce_scatter(group_of(p), x[0], CFT_DIST_SUM);
    y[0] = cft_failed(r) ? r : cft_squeeze(r, (int[]){0}, 1);
    return cft_failed(y[0]) ? y[0] : NULL;
}
static cft_array *gather_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    return apply(&cft_p_all_gather, t[0], p, &ty[0]);
}
static cft_array *scatter_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    return apply(&cft_p_psum_scatter, t[0], p, &ty[0]);
}
static cft_array *gather_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                   int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin;
    return apply(&cft_p_psum_scatter, ct[0], p, &ct_in[0]);
}
static cft_array *scatter_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                    int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin;
    return apply(&cft_p_all_gather, ct[0], p, &ct_in[0]);
}
/* the rank axis is the leading one: move the batch axis last, run, and the
 * batch axis ends last in the result */
static cft_array *leading_axis_vmap(const cft_prim *prim, cft_array *const *x, const int *bdim,
                                    const cft_params *p, cft_array **y, int *ybdim) {
    int nd = x[0]->aval.ndim;
    cft_array *xm = cft__moveaxis_b(x[0], bdim[0], nd - 1);
    y[0] = bind_same(prim, xm, p);
    if (cft_failed(y[0]))
        return y[0];
    ybdim[0] = y[0]->aval.ndim - 1;
    return NULL;
}
static cft_array *gather_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    return leading_axis_vmap(&cft_p_all_gather, x, bdim, p, y, ybdim);
}
static cft_array *scatter_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                               const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    if (x[0]->aval.ndim < 2) /* [p] batched as [B, p] or [p, B]: the rank axis must stay */
        return cft__fail(CFT_E_SHAPE, "psum_scatter: under vmap the operand needs a rank axis");
    int nd = x[0]->aval.ndim;
    if (bdim[0] == 0) { /* keep the rank axis leading: move the batch axis last */
        cft_array *xm = cft__moveaxis_b(x[0], 0, nd - 1);
        y[0] = bind_same(&cft_p_psum_scatter, xm, p);
        ybdim[0] = nd - 2;
        return cft_failed(y[0]) ? y[0] : NULL;
    }
    y[0] = bind_same(&cft_p_psum_scatter, x[0], p);
    ybdim[0] = bdim[0] - 1;
    return cft_failed(y[0]) ? y[0] : NULL;
}

const cft_prim cft_p_all_gather = {
    .name = "all_gather",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_DEVICE_IMPL,
    .pnames = {"group"},
    .shape = gather_shape,
    .impl = gather_impl,
    .jvp = gather_jvp,
    .transpose = gather_transpose,
    .vmap = gather_vmap,
};
const cft_prim cft_p_psum_scatter = {
    .name = "psum_scatter",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_DEVICE_IMPL,
    .pnames = {"group"},
    .shape = scatter_shape,
    .impl = scatter_impl,
    .jvp = scatter_jvp,
    .transpose = scatter_transpose,
    .vmap = scatter_vmap,
};

/* ---- ppermute ---- */

extern const cft_prim cft_p_ppermute;

static cft_array *perm_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    cft_array *e = check("ppermute", p);
    if (e)
        return e;
    out[0] = in[0];
    return NULL;
}
static cft_array *perm_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    (void)nin;
    cft_dist_group *g = group_of(p);
    int me = g->rank, dst = (int)p->v[1][me], src = -1;
    for (int r = 0; r < g->size; r++)
        if (p->v[1][r] == me)
            src = r;
    cft_array *xc = cft__contig(x[0]);
    cft_array *out = cft__alloc(xc->aval.dtype, xc->aval.shape, xc->aval.ndim);
    if (cft_failed(out))
        return out;
    size_t bytes = (size_t)cft_array_size(out) * cft_dtype_size(out->aval.dtype);
    memset(cft__ptr(out), 0, bytes); /* what a rank nobody sends to keeps */
    dist_req *r = CFT_NEW(dist_req);
    if (!r)
        return cft__oom();
    r->kind = REQ_PERMUTE, r->name = "cft_ppermute", r->g = g;
    r->keep[0] = xc, r->keep[1] = out;
    r->send = cft__ptr(xc), r->recv = cft__ptr(out);
    r->count = cft_array_size(out);
    r->dt = cft__dist_mpi_type(out->aval.dtype);
    r->peer = dst, r->peer2 = src, r->tag = 7;
    if (cft__dist_run(r) != CFT_OK)
        return cft__fail(cft_last_error(), "%s", cft_last_error_message());
    y[0] = out;
    return NULL;
}
static cft_params inverse(const cft_params *p) {
    cft_params q = *p;
    int n = p->n[1];
    for (int r = 0; r < n; r++)
        q.v[1][r] = -1;
    for (int r = 0; r < n; r++)
        if (p->v[1][r] >= 0)
            q.v[1][p->v[1][r]] = r;
    return q;
}
static cft_array *perm_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    return apply(&cft_p_ppermute, t[0], p, &ty[0]);
}
static cft_array *perm_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                 int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin;
    cft_params q = inverse(p);
    return apply(&cft_p_ppermute, ct[0], &q, &ct_in[0]);
}
static cft_array *perm_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    return same_axis_vmap(&cft_p_ppermute, x, bdim, p, y, ybdim);
}

const cft_prim cft_p_ppermute = {
    .name = "ppermute",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"group", "perm"},
    .shape = perm_shape,
    .impl = perm_impl,
    .jvp = perm_jvp,
    .transpose = perm_transpose,
    .vmap = perm_vmap,
};

/* ---- public ops ---- */

static cft_array *collective(const char *call, const cft_prim *prim, cft_array *x,
                             cft_dist_group *g) {
    CFT_PROPAGATE(call, x);
    cft_array *e = cft__dist_check(call, g);
    if (e)
        return e;
    cft_params p = {0};
    cft__param_set1(&p, 0, g->id);
    return cft__bind1(prim, &p, 1, &x);
}

cft_array *cft_psum(cft_array *x, cft_dist_group *g) {
    return collective("cft_psum", &cft_p_psum, x, g);
}
cft_array *cft_pmean(cft_array *x, cft_dist_group *g) {
    CFT_PROPAGATE("cft_pmean", x);
    cft_array *s = collective("cft_pmean", &cft_p_psum, x, g);
    return cft_failed(s) ? s : cft_mul_s(s, 1.0 / g->size);
}
cft_array *cft_all_gather(cft_array *x, cft_dist_group *g) {
    return collective("cft_all_gather", &cft_p_all_gather, x, g);
}
cft_array *cft_psum_scatter(cft_array *x, cft_dist_group *g) {
    return collective("cft_psum_scatter", &cft_p_psum_scatter, x, g);
}
cft_array *cft_ppermute(cft_array *x, cft_dist_group *g, const int *perm) {
    CFT_PROPAGATE("cft_ppermute", x);
    cft_array *e = cft__dist_check("cft_ppermute", g);
    if (e)
        return e;
    if (!perm)
        return cft__fail(CFT_E_ARG, "cft_ppermute: perm is NULL");
    if (g->size > CFT_PARAM_LEN)
        return cft__fail(CFT_E_ARG, "cft_ppermute: groups of at most %d ranks (this has %d)",
                         CFT_PARAM_LEN, g->size);
    bool seen[CFT_PARAM_LEN] = {0};
    int64_t v[CFT_PARAM_LEN];
    for (int r = 0; r < g->size; r++) {
        if (perm[r] < -1 || perm[r] >= g->size || (perm[r] >= 0 && seen[perm[r]]))
            return cft__fail(CFT_E_ARG,
                             "cft_ppermute: perm[%d] = %d is not a destination rank (each rank "
                             "at most once, -1 for none)",
                             r, perm[r]);
        if (perm[r] >= 0)
            seen[perm[r]] = true;
        v[r] = perm[r];
    }
    cft_params p = {0};
    cft__param_set1(&p, 0, g->id);
    cft__param_set(&p, 1, v, g->size);
    return cft__bind1(&cft_p_ppermute, &p, 1, &x);
}
