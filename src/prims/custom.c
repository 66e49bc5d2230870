/* custom.c: custom ops (cft/custom.h), user C kernels made primitives at
 * run time. Each op gets its own record, named after it, whose rules are
 * trampolines into the definition (found through parameter slot 0): jvp
 * from the user's custom_jvp function, or from custom_vjp's forward plus a
 * second record, linear in the tangents, whose transpose is the user's
 * backward; batching by the kernel's rank polymorphism, a user batched
 * function, or an opted-in loop. */
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"
#include "trace/fn.h"

typedef struct custom_rec {
    cft_prim prim; /* the op */
    cft_prim lin;  /* custom_vjp: (residuals, tangents) -> output tangents */
    const cft_custom_def *def;
} custom_rec;

static custom_rec *rec_of(const cft_params *p) {
    return (custom_rec *)(uintptr_t)p->v[0][0];
}

static cft_params params_of(custom_rec *r) {
    cft_params p;
    memset(&p, 0, sizeof p);
    cft__param_set1(&p, 0, (int64_t)(uintptr_t)r);
    return p;
}

static cft_array *op_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    const cft_custom_def *d = rec_of(p)->def;
    cft_status st = d->shape(d->env, in, out);
    if (st != CFT_OK)
        return cft__fail(st, "%s: the shape rule rejected the inputs (first: %s)", d->name,
                         d->nin ? cft__av(&in[0]) : "none");
    return NULL;
}

static cft_array *op_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    const cft_custom_def *d = rec_of(p)->def;
    cft_aval want[d->nout], av[nin > 0 ? nin : 1];
    for (int i = 0; i < nin; i++)
        av[i] = in[i]->aval;
    cft_array *e = op_shape(av, nin, p, want);
    if (e)
        return e;
    for (int j = 0; j < d->nout; j++)
        out[j] = NULL;
    cft_status st = d->impl(d->env, in, out);
    for (int j = 0; j < d->nout; j++) {
        if (out[j] && cft_failed(out[j]))
            return out[j];
        if (st != CFT_OK || !out[j])
            return cft__fail(st ? st : CFT_E_ARG,
                             "%s: the kernel failed (status %d) or left output %d unset", d->name,
                             (int)st, j);
        if (out[j]->kind != CFT_K_CONCRETE || !cft__aval_eq(&out[j]->aval, &want[j]))
            return cft__fail(CFT_E_SHAPE,
                             "%s: the kernel made output %d as %s, its shape rule says %s", d->name,
                             j, cft__av(&out[j]->aval), cft__av(&want[j]));
    }
    return NULL;
}

static cft_array *call_fn(cft_fn *f, cft_array *const *in, cft_array **out) {
    cft_status st = cft_fn_call(f, in, out);
    return st == CFT_OK ? NULL : out[0];
}

static cft_array *op_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                         const cft_params *p, cft_array **ty) {
    (void)y;
    custom_rec *r = rec_of(p);
    const cft_custom_def *d = r->def;
    cft_array *args[d->nres + 2 * nin + 1];
    if (d->jvp) { /* custom_jvp */
        for (int i = 0; i < nin; i++)
            args[i] = x[i], args[nin + i] = cft__inst(t[i], &x[i]->aval);
        return call_fn(d->jvp, args, ty);
    }
    if (d->vjp_fwd) { /* custom_vjp: residuals now, the linear part for the backward pass */
        cft_array *fr[d->nout + d->nres];
        cft_array *e = call_fn(d->vjp_fwd, x, fr);
        if (e)
            return e;
        for (int k = 0; k < d->nres; k++)
            args[k] = fr[d->nout + k];
        for (int i = 0; i < nin; i++)
            args[d->nres + i] = cft__inst(t[i], &x[i]->aval);
        cft_params q = params_of(r);
        return cft__bind(&r->lin, &q, d->nres + nin, args, d->nout, ty);
    }
    return cft__fail(CFT_E_TRACE,
                     "%s: custom op without a jvp or vjp rule cannot be differentiated", d->name);
}

/* every input batched along axis 0, unbatched ones broadcast */
static void batch_front(int64_t size, cft_array *const *x, const int *bdim, int n, cft_array **xs) {
    for (int i = 0; i < n; i++)
        xs[i] = cft__batch_at(x[i], bdim[i], size, 0);
}

static cft_array *op_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                          const cft_params *p, cft_array **y, int *ybdim) {
    custom_rec *r = rec_of(p);
    const cft_custom_def *d = r->def;
    cft_array *xs[nin > 0 ? nin : 1];
    for (int j = 0; j < d->nout; j++)
        ybdim[j] = 0;
    if (d->rank_polymorphic) {
        batch_front(size, x, bdim, nin, xs);
        return cft__bind(&r->prim, p, nin, xs, d->nout, y);
    }
    if (d->vmap) {
        batch_front(size, x, bdim, nin, xs);
        return call_fn(d->vmap, xs, y);
    }
    if (!d->sequential_vmap)
        return cft__fail(CFT_E_TRACE,
                         "vmap: custom op %s has no batching rule (set rank_polymorphic, "
                         "vmap, or opt in to sequential_vmap)",
                         d->name);
    cft_array **cols = CFT_NEWN(cft_array *, (size_t)(d->nout * size) + 1), *xi[nin > 0 ? nin : 1];
    for (int64_t b = 0; b < size; b++) { /* the opted-in loop */
        for (int i = 0; i < nin; i++)
            xi[i] = bdim[i] < 0 ? x[i] : cft_index(cft__moveaxis_b(x[i], bdim[i], 0), b);
        cft_array *e = cft__bind(&r->prim, p, nin, xi, d->nout, cols + b * d->nout);
        if (e)
            return e;
    }
    for (int j = 0; j < d->nout; j++) {
        cft_array **col = CFT_NEWN(cft_array *, (size_t)size + 1);
        for (int64_t b = 0; b < size; b++)
            col[b] = cols[b * d->nout + j];
        y[j] = cft_stack(col, (int)size, 0);
    }
    return NULL;
}

/* ---- custom_vjp's linear part ---- */

static cft_array *lin_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    return op_shape(in + rec_of(p)->def->nres, rec_of(p)->def->nin, p, out);
}
static cft_array *lin_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)in, (void)nin, (void)out;
    return cft__fail(CFT_E_TRACE,
                     "%s: forward-mode differentiation (jvp, jacfwd) of a custom_vjp op is "
                     "not supported; use reverse mode or give a custom_jvp",
                     rec_of(p)->def->name);
}
/* the user's backward pass is the transpose */
static cft_array *lin_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin;
    const cft_custom_def *d = rec_of(p)->def;
    cft_array *args[d->nres + d->nout];
    for (int k = 0; k < d->nres; k++) {
        if (!x[k])
            return cft__fail(CFT_E_TRACE, "%s: residual %d is not known in the backward pass",
                             d->name, k);
        args[k] = x[k];
    }
    for (int j = 0; j < d->nout; j++)
        args[d->nres + j] = ct[j];
    for (int k = 0; k < d->nres; k++)
        ct_in[k] = NULL;
    return call_fn(d->vjp_bwd, args, ct_in + d->nres);
}
static cft_array *lin_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    custom_rec *r = rec_of(p);
    if (!r->def->rank_polymorphic)
        return cft__fail(CFT_E_TRACE,
                         "vmap: the linear part of custom_vjp op %s has no batching rule",
                         r->def->name);
    cft_array *xs[nin];
    batch_front(size, x, bdim, nin, xs);
    for (int j = 0; j < r->def->nout; j++)
        ybdim[j] = 0;
    return cft__bind(&r->lin, p, nin, xs, r->def->nout, y);
}

/* ---- the function ---- */

static cft_status op_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    custom_rec *r = env;
    cft_params q = params_of(r);
    cft_array *e = cft__bind(&r->prim, &q, nin, in, nout, out);
    return e ? cft_error_code(e) : CFT_OK;
}

cft_fn *cft_custom_op(const cft_custom_def *d) {
    CFT_API("cft_custom_op");
    if (!d || !d->name || !d->shape || !d->impl || d->nin < 0 || d->nout < 1 ||
        (!d->vjp_fwd != !d->vjp_bwd) || d->nres < 0) {
        return cft__fn_fail(d && d->nin > 0 ? d->nin : 1, d && d->nout > 0 ? d->nout : 1, CFT_E_ARG,
                            "cft_custom_op: %s: needs name, shape, impl, nin >= 0, nout >= 1, "
                            "and vjp_fwd with vjp_bwd",
                            d && d->name ? d->name : "(unnamed)");
    }
    custom_rec *r = CFT_NEW(custom_rec);
    r->def = d;
    r->prim = (cft_prim){.name = d->name,
                         .nin = d->nin,
                         .nout = d->nout,
                         .shape = op_shape,
                         .impl = op_impl,
                         .jvp = op_jvp,
                         .vmap = op_vmap};
    char *ln = cft__new(strlen(d->name) + 10);
    strcpy(ln, d->name);
    strcat(ln, "_vjp_lin");
    r->lin = (cft_prim){.name = ln,
                        .nin = d->nres + d->nin,
                        .nout = d->nout,
                        .flags = CFT_PRIM_LINEAR,
                        .shape = lin_shape,
                        .impl = lin_impl,
                        .transpose = lin_transpose,
                        .vmap = lin_vmap};
    return cft_fn_named(cft_fn_new(op_cb, r, d->nin, d->nout), d->name);
}
