/* control.c: the scan primitive, scan[@body, #length, #reverse, #nconsts,
 * #ncarry](consts, carry, xs) -> (carry, ys), and the public loops built on
 * it. The body is a closed IR held in parameter slot 0. Its rules:
 *   jvp       a scan of the body's jvp over (primals, tangents);
 *   vmap      a scan of the vmapped body (carries batched, xs batched at
 *             axis 1 since axis 0 is the scan axis);
 *   partial   reverse mode: the body is split by partial evaluation into a
 *             known scan that also emits each step's residuals as extra ys,
 *             and an unknown scan that reads them as extra xs;
 *   transpose the unknown scan is linear in its unknown inputs; its
 *             transpose is a reverse scan of the body's transpose (a vjp),
 *             accumulating the cotangents of loop-invariant inputs in the
 *             carry.
 * The rules use the public transforms on the body, not their internals. */
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"
#include "trace/fn.h"
#include "trace/ir.h"

enum { P_BODY, P_LEN, P_REV, P_NC, P_NCAR };

extern const cft_prim cft_p_scan;

static cft_ir *body_of(const cft_params *p) {
    return (cft_ir *)(uintptr_t)p->v[P_BODY][0];
}

static cft_params scan_params(cft_ir *body, int64_t len, bool rev, int nc, int ncar) {
    cft_params p;
    memset(&p, 0, sizeof p);
    cft__param_set1(&p, P_BODY, (int64_t)(uintptr_t)body);
    cft__param_set1(&p, P_LEN, len);
    cft__param_set1(&p, P_REV, rev);
    cft__param_set1(&p, P_NC, nc);
    cft__param_set1(&p, P_NCAR, ncar);
    return p;
}

static cft_aval stacked(const cft_aval *a, int64_t len) {
    cft_aval r = *a;
    for (int d = a->ndim; d > 0; d--)
        r.shape[d] = a->shape[d - 1];
    r.shape[0] = len;
    r.ndim++;
    return r;
}

static cft_array *scan_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    const cft_ir *b = body_of(p);
    int nc = (int)p->v[P_NC][0], ncar = (int)p->v[P_NCAR][0];
    int64_t len = p->v[P_LEN][0];
    if (nin != b->nin || b->nout < ncar)
        return cft__fail(CFT_E_ARG,
                         "scan: %d inputs for a body of %d inputs, %d outputs (%d carries)", nin,
                         b->nin, b->nout, ncar);
    for (int i = 0; i < nin; i++) {
        cft_aval want = i < nc + ncar ? b->invars[i]->aval : stacked(&b->invars[i]->aval, len);
        if (!cft__aval_eq(&in[i], &want))
            return cft__fail(CFT_E_SHAPE, "scan: input %d is %s, the body needs %s", i,
                             cft__av(&in[i]), cft__av(&want));
    }
    for (int j = 0; j < b->nout; j++) {
        if (j < ncar && !cft__aval_eq(&b->outvars[j]->aval, &b->invars[nc + j]->aval))
            return cft__fail(CFT_E_SHAPE,
                             "scan: the body returns carry %d as %s but takes it as %s", j,
                             cft__av(&b->outvars[j]->aval), cft__av(&b->invars[nc + j]->aval));
        out[j] = j < ncar ? b->outvars[j]->aval : stacked(&b->outvars[j]->aval, len);
    }
    return NULL;
}

static cft_array *scan_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    const cft_ir *b = body_of(p);
    int nc = (int)p->v[P_NC][0], ncar = (int)p->v[P_NCAR][0], ny = b->nout - ncar;
    int64_t len = p->v[P_LEN][0];
    bool rev = p->v[P_REV][0];
    cft_array *args[nin > 0 ? nin : 1], *res[b->nout];
    for (int i = 0; i < nc + ncar; i++)
        args[i] = in[i];
    cft_array **ys = CFT_NEWN(cft_array *, (size_t)(ny * len) + 1);
    for (int64_t t = 0; t < len; t++) {
        int64_t i = rev ? len - 1 - t : t;
        for (int k = nc + ncar; k < nin; k++)
            args[k] = cft_index(in[k], i);
        if (cft_ir_eval(b, args, res) != CFT_OK)
            return res[0];
        for (int j = 0; j < ncar; j++)
            args[nc + j] = res[j];
        for (int j = 0; j < ny; j++)
            ys[j * len + i] = res[ncar + j];
    }
    for (int j = 0; j < ncar; j++)
        out[j] = args[nc + j];
    for (int j = 0; j < ny; j++) {
        if (len == 0) {
            cft_aval a = stacked(&b->outvars[ncar + j]->aval, 0);
            out[ncar + j] = cft__zeros_aval(&a);
        } else {
            out[ncar + j] = cft__contig(cft_stack(ys + j * len, (int)len, 0));
        }
        if (cft_failed(out[ncar + j]))
            return out[ncar + j];
    }
    return NULL;
}

/* ---- jvp: scan over (consts, tconsts ; carry, tcarry ; xs, txs) ---- */

typedef struct {
    cft_ir *body;
    int nc, ncar, nx, ny;
} body_env;

static cft_status jvp_body_cb(void *envp, int nin, cft_array *const *in, int nout,
                              cft_array **out) {
    body_env *e = envp;
    (void)nin, (void)nout;
    int n = e->body->nin, nc = e->nc, ncar = e->ncar, nx = e->nx, ny = e->ny;
    cft_array *args[2 * n + 1], *res[2 * e->body->nout];
    /* in: c, tc, h, th, x, tx -> jvp fn wants primals then tangents */
    for (int i = 0; i < nc; i++)
        args[i] = in[i], args[n + i] = in[nc + i];
    for (int i = 0; i < ncar; i++)
        args[nc + i] = in[2 * nc + i], args[n + nc + i] = in[2 * nc + ncar + i];
    for (int i = 0; i < nx; i++)
        args[nc + ncar + i] = in[2 * (nc + ncar) + i],
                         args[n + nc + ncar + i] = in[2 * (nc + ncar) + nx + i];
    cft_status st = cft_fn_call(cft_jvp(cft_ir_fn(e->body)), args, res);
    if (st != CFT_OK)
        return st;
    int m = e->body->nout; /* res: h', y, th', ty -> out: h', th', y, ty */
    for (int j = 0; j < ncar; j++)
        out[j] = res[j], out[ncar + j] = res[m + j];
    for (int j = 0; j < ny; j++)
        out[2 * ncar + j] = res[ncar + j], out[2 * ncar + ny + j] = res[m + ncar + j];
    return CFT_OK;
}

static cft_array *scan_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)y;
    cft_ir *b = body_of(p);
    body_env *e = CFT_NEW(body_env);
    e->body = b, e->nc = (int)p->v[P_NC][0], e->ncar = (int)p->v[P_NCAR][0];
    e->nx = nin - e->nc - e->ncar, e->ny = b->nout - e->ncar;
    int nc = e->nc, ncar = e->ncar, nx = e->nx, ny = e->ny;
    cft_aval *av = CFT_NEWN(cft_aval, 2 * nin + 1);
    cft_array *args[2 * nin + 1];
    int k = 0;
    for (int g = 0, base = 0; g < 3; g++) { /* each group: primals then tangents */
        int cnt = g == 0 ? nc : g == 1 ? ncar : nx;
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < cnt; i++, k++) {
                av[k] = b->invars[base + i]->aval;
                args[k] = r ? cft__inst(t[base + i], &x[base + i]->aval) : x[base + i];
            }
        base += cnt;
    }
    cft_ir *jb = cft_make_ir(cft_fn_new(jvp_body_cb, e, 2 * nin, 2 * b->nout), av);
    if (!jb)
        return cft__fail(cft_last_error(), "scan jvp: %s", cft_last_error_message());
    cft_params q = scan_params(jb, p->v[P_LEN][0], p->v[P_REV][0], 2 * nc, 2 * ncar);
    cft_array *res[2 * b->nout];
    cft_array *err = cft__bind(&cft_p_scan, &q, 2 * nin, args, 2 * b->nout, res);
    if (err)
        return err;
    for (int j = 0; j < ncar; j++)
        ty[j] = res[ncar + j];
    for (int j = 0; j < ny; j++)
        ty[ncar + j] = res[2 * ncar + ny + j];
    return NULL;
}

/* ---- vmap ---- */

static cft_array *scan_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    cft_ir *b = body_of(p);
    int nc = (int)p->v[P_NC][0], ncar = (int)p->v[P_NCAR][0];
    int in_axes[nin > 0 ? nin : 1], out_axes[b->nout];
    cft_aval av[nin > 0 ? nin : 1];
    cft_array *args[nin > 0 ? nin : 1];
    for (int i = 0; i < nin; i++) {
        av[i] = b->invars[i]->aval;
        bool carry = i >= nc && i < nc + ncar;
        if (carry || bdim[i] >= 0) { /* carries are always batched: the body may batch them */
            in_axes[i] = 0;
            av[i] = stacked(&av[i], size);
            args[i] = i < nc + ncar ? cft__batch_at(x[i], bdim[i], size, 0)
                                    : cft__moveaxis_b(x[i], bdim[i], 1);
        } else {
            in_axes[i] = CFT_NOT_BATCHED;
            args[i] = x[i];
        }
    }
    for (int j = 0; j < b->nout; j++)
        out_axes[j] = 0;
    cft_ir *vb = cft_make_ir(cft_vmap(cft_ir_fn(b), in_axes, out_axes), av);
    if (!vb)
        return cft__fail(cft_last_error(), "scan vmap: %s", cft_last_error_message());
    cft_params q = scan_params(vb, p->v[P_LEN][0], p->v[P_REV][0], nc, ncar);
    for (int j = 0; j < b->nout; j++)
        ybdim[j] = j < ncar ? 0 : 1;
    return cft__bind(&cft_p_scan, &q, nin, args, b->nout, y);
}

/* ---- partial evaluation ---- */

static cft_irvar *fresh(int *next_id, const cft_aval *a) {
    cft_irvar *v = CFT_NEW(cft_irvar);
    v->id = (*next_id)++;
    v->aval = *a;
    return v;
}

static bool scan_partial_eval(const cft_eqn *q, const bool *in_known, int *next_id, cft_eqn *kq,
                              cft_eqn *uq, bool *out_known) {
    const cft_params *p = &q->params;
    cft_ir *b = body_of(p);
    int nc = (int)p->v[P_NC][0], ncar = (int)p->v[P_NCAR][0], nin = q->nin, nout = q->nout;
    int64_t len = p->v[P_LEN][0];
    bool *bk = CFT_NEWN(bool, nin + 1), *want = CFT_NEWN(bool, nout + 1),
         *ok = CFT_NEWN(bool, nout + 1);
    memcpy(bk, in_known, sizeof(bool) * (size_t)nin);
    cft_ir_split *s = NULL;
    for (int iter = 0; iter <= ncar;
         iter++) { /* a carry is known only if the body keeps it known */
        s = cft__split_ir(b, bk, NULL, ok);
        if (!s)
            return false;
        bool changed = false;
        for (int j = 0; j < ncar; j++)
            if (bk[nc + j] && !ok[j])
                bk[nc + j] = false, changed = true;
        if (!changed)
            break;
    }
    for (int j = 0; j < nout; j++)
        want[j] = j < ncar ? !bk[nc + j] : !ok[j];
    s = cft__split_ir(b, bk, want, ok);
    if (!s)
        return false;
    int kc = 0, kcar = 0, uc = 0, ucar = 0;
    for (int i = 0; i < nc; i++)
        *(bk[i] ? &kc : &uc) += 1;
    for (int i = 0; i < ncar; i++)
        *(bk[nc + i] ? &kcar : &ucar) += 1;
    int nres = s->nres;
    /* the known scan: known inputs -> known outputs + stacked residuals */
    memset(kq, 0, sizeof *kq);
    kq->prim = &cft_p_scan;
    kq->params = scan_params(s->known, len, p->v[P_REV][0], kc, kcar);
    kq->in = CFT_NEWN(cft_irvar *, nin + 1);
    for (int i = 0; i < nin; i++)
        if (bk[i])
            kq->in[kq->nin++] = q->in[i];
    kq->out = CFT_NEWN(cft_irvar *, nout + nres + 1);
    for (int j = 0; j < nout; j++)
        if (ok[j])
            kq->out[kq->nout++] = q->out[j];
    cft_irvar **R = CFT_NEWN(cft_irvar *, nres + 1);
    for (int r = 0; r < nres; r++) {
        cft_aval a = stacked(&s->known->outvars[s->known->nout - nres + r]->aval, len);
        R[r] = fresh(next_id, &a);
        kq->out[kq->nout++] = R[r];
    }
    /* the unknown scan: body inputs reordered from (res, uc, ucar, ux) to (uc, ucar, res, ux) */
    cft_ir *u = s->unknown;
    cft_ir ur = *u;
    ur.invars = CFT_NEWN(cft_irvar *, u->nin + 1);
    int k = 0;
    for (int i = 0; i < uc + ucar; i++)
        ur.invars[k++] = u->invars[nres + i];
    for (int r = 0; r < nres; r++)
        ur.invars[k++] = u->invars[r];
    for (int i = nres + uc + ucar; i < u->nin; i++)
        ur.invars[k++] = u->invars[i];
    memset(uq, 0, sizeof *uq);
    uq->prim = &cft_p_scan;
    uq->params = scan_params(cft__ir_finish(&ur), len, p->v[P_REV][0], uc, ucar);
    uq->in = CFT_NEWN(cft_irvar *, nin + nres + 1);
    for (int i = 0; i < nc + ncar; i++)
        if (!bk[i])
            uq->in[uq->nin++] = q->in[i];
    for (int r = 0; r < nres; r++)
        uq->in[uq->nin++] = R[r];
    for (int i = nc + ncar; i < nin; i++)
        if (!bk[i])
            uq->in[uq->nin++] = q->in[i];
    uq->out = CFT_NEWN(cft_irvar *, nout + 1);
    for (int j = 0; j < nout; j++)
        if (!ok[j])
            uq->out[uq->nout++] = q->out[j];
    memcpy(out_known, ok, sizeof(bool) * (size_t)nout);
    return true;
}

/* ---- transpose: a reverse scan of the body's transpose ---- */

typedef struct {
    cft_ir *body;
    int nin, nc, ncar;
    const bool *lin;   /* per body input: linear (true) or known */
    cft_array **known; /* per body input: its value when known (set per call) */
} lin_body_env;

/* the body as a function of its linear inputs only */
static cft_status lin_body_cb(void *envp, int nin, cft_array *const *in, int nout,
                              cft_array **out) {
    lin_body_env *e = envp;
    (void)nin, (void)nout;
    cft_array *args[e->nin + 1];
    for (int i = 0, k = 0; i < e->nin; i++)
        args[i] = e->lin[i] ? in[k++] : e->known[i];
    return cft_fn_call(cft_ir_fn(e->body), args, out);
}

typedef struct {
    lin_body_env *lb;
    int nkc, nlc, ncar, nkx, nlx, ny;
    cft_aval *lin_avals; /* avals of the linear body inputs, in order */
} tbody_env;

/* (known consts, ct carry, acc of linear consts, known x slices, ct y slices)
 *   -> (ct carry before the step, acc + ct of linear consts, ct of linear x slices) */
static cft_status tbody_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    tbody_env *e = envp;
    lin_body_env *lb = e->lb;
    (void)nin, (void)nout;
    lin_body_env *env = CFT_NEW(lin_body_env);
    *env = *lb;
    env->known = CFT_NEWN(cft_array *, lb->nin + 1);
    int ic = 0, ix = e->nkc + e->ncar + e->nlc;
    for (int i = 0; i < lb->nin; i++) {
        bool isconst = i < lb->nc, isx = i >= lb->nc + lb->ncar;
        if (!lb->lin[i])
            env->known[i] = isconst ? in[ic++] : isx ? in[ix++] : NULL;
    }
    int nlin = e->nlc + e->ncar + e->nlx, m = lb->body->nout;
    cft_fn *f = cft_fn_new(lin_body_cb, env, nlin, m);
    cft_array *zeros[nlin + 1], *vals[m], *cts[m], *ctl[nlin + 1];
    for (int i = 0; i < nlin; i++)
        zeros[i] = cft__zeros_aval(&e->lin_avals[i]);
    cft_fn *pb;
    cft_status st = cft_vjp(f, zeros, vals, &pb); /* linear: the transpose at any point */
    if (st != CFT_OK)
        return st;
    cft_array *const *ct_h = in + e->nkc, *const *acc = in + e->nkc + e->ncar;
    cft_array *const *ct_y = in + e->nkc + e->ncar + e->nlc + e->nkx;
    for (int j = 0; j < e->ncar; j++)
        cts[j] = ct_h[j];
    for (int j = 0; j < e->ny; j++)
        cts[e->ncar + j] = ct_y[j];
    st = cft_fn_call(pb, cts, ctl);
    if (st != CFT_OK)
        return st;
    /* ctl: linear consts, carry, linear xs (body order) */
    for (int j = 0; j < e->ncar; j++)
        out[j] = ctl[e->nlc + j];
    for (int j = 0; j < e->nlc; j++)
        out[e->ncar + j] = cft_add(acc[j], ctl[j]);
    for (int j = 0; j < e->nlx; j++)
        out[e->ncar + e->nlc + j] = ctl[e->nlc + e->ncar + j];
    return CFT_OK;
}

static cft_array *scan_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                 int nin, const cft_params *p, cft_array **ct_in) {
    cft_ir *b = body_of(p);
    int nc = (int)p->v[P_NC][0], ncar = (int)p->v[P_NCAR][0], ny = b->nout - ncar;
    int64_t len = p->v[P_LEN][0];
    bool *lin = CFT_NEWN(bool, nin + 1);
    int nkc = 0, nlc = 0, nkx = 0, nlx = 0;
    for (int i = 0; i < nin; i++) {
        /* a carry is always in a linear slot: one that is known is an
         * instantiated zero tangent, which gets no cotangent */
        lin[i] = x[i] == NULL || (i >= nc && i < nc + ncar);
        if (i < nc)
            *(lin[i] ? &nlc : &nkc) += 1;
        else if (i >= nc + ncar)
            *(lin[i] ? &nlx : &nkx) += 1;
    }
    lin_body_env *lb = CFT_NEW(lin_body_env);
    lb->body = b, lb->nin = nin, lb->nc = nc, lb->ncar = ncar, lb->lin = lin;
    tbody_env *te = CFT_NEW(tbody_env);
    te->lb = lb, te->nkc = nkc, te->nlc = nlc, te->ncar = ncar, te->nkx = nkx, te->nlx = nlx,
    te->ny = ny;
    te->lin_avals = CFT_NEWN(cft_aval, nin + 1);
    for (int i = 0, k = 0; i < nin; i++)
        if (lin[i])
            te->lin_avals[k++] = b->invars[i]->aval;
    /* the transposed scan: consts = known consts; carry = ct carry, acc;
     * xs = known xs, ct ys */
    int tn = nkc + ncar + nlc + nkx + ny, tout = ncar + nlc + nlx;
    cft_aval *av = CFT_NEWN(cft_aval, tn + 1);
    cft_array **args = CFT_NEWN(cft_array *, tn + 1);
    int k = 0;
    for (int i = 0; i < nc; i++)
        if (!lin[i])
            av[k] = b->invars[i]->aval, args[k++] = x[i];
    for (int j = 0; j < ncar; j++)
        av[k] = b->invars[nc + j]->aval, args[k++] = cft__inst(ct[j], &in[nc + j]);
    for (int i = 0; i < nc; i++)
        if (lin[i])
            av[k] = b->invars[i]->aval, args[k++] = cft__zeros_aval(&in[i]);
    for (int i = nc + ncar; i < nin; i++)
        if (!lin[i])
            av[k] = b->invars[i]->aval, args[k++] = x[i];
    for (int j = 0; j < ny; j++) {
        cft_aval ya = stacked(&b->outvars[ncar + j]->aval, len);
        av[k] = b->outvars[ncar + j]->aval, args[k++] = cft__inst(ct[ncar + j], &ya);
    }
    cft_ir *tb = cft_make_ir(cft_fn_new(tbody_cb, te, tn, tout), av);
    if (!tb)
        return cft__fail(cft_last_error(), "scan transpose: %s", cft_last_error_message());
    cft_params q = scan_params(tb, len, !p->v[P_REV][0], nkc, ncar + nlc);
    cft_array **res = CFT_NEWN(cft_array *, tout + 1);
    cft_array *e = cft__bind(&cft_p_scan, &q, tn, args, tout, res);
    if (e)
        return e;
    int ic = 0, ix = 0;
    for (int i = 0; i < nin; i++) {
        ct_in[i] = NULL;
        if (!lin[i])
            continue;
        if (i < nc)
            ct_in[i] = res[ncar + ic++];
        else if (i < nc + ncar)
            ct_in[i] = x[i] ? NULL : res[i - nc];
        else
            ct_in[i] = res[ncar + nlc + ix++];
    }
    return NULL;
}

static int scan_nout(const cft_params *p, int nin) {
    (void)nin;
    return body_of(p)->nout;
}

const cft_prim cft_p_scan = {
    .name = "scan",
    .nin = -1,
    .nout = -1,
    .flags = CFT_PRIM_LINEAR,
    .nout_of = scan_nout,
    .pnames = {"@body", "#length", "#reverse", "#nconsts", "#ncarry"},
    .shape = scan_shape,
    .impl = scan_impl,
    .jvp = scan_jvp,
    .transpose = scan_transpose,
    .vmap = scan_vmap,
    .partial_eval = scan_partial_eval,
};

/* ---- while[@cond, @body, #nconsts](consts, carry) -> carry ----
 * cond and body both take (consts, carry); cond returns a bool scalar. */

extern const cft_prim cft_p_while;
enum { W_COND, W_BODY, W_NC };

static cft_params while_params(cft_ir *cond, cft_ir *body, int nc) {
    cft_params p;
    memset(&p, 0, sizeof p);
    cft__param_set1(&p, W_COND, (int64_t)(uintptr_t)cond);
    cft__param_set1(&p, W_BODY, (int64_t)(uintptr_t)body);
    cft__param_set1(&p, W_NC, nc);
    return p;
}
static cft_ir *wcond(const cft_params *p) {
    return (cft_ir *)(uintptr_t)p->v[W_COND][0];
}
static cft_ir *wbody(const cft_params *p) {
    return (cft_ir *)(uintptr_t)p->v[W_BODY][0];
}

static cft_array *while_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    cft_ir *c = wcond(p), *b = wbody(p);
    int nc = (int)p->v[W_NC][0], ncar = nin - nc;
    if (c->nin != nin || b->nin != nin || b->nout != ncar || c->nout != 1)
        return cft__fail(CFT_E_ARG,
                         "while_loop: cond takes %d, body takes %d and returns %d, for %d inputs",
                         c->nin, b->nin, b->nout, nin);
    const cft_aval *pa = &c->outvars[0]->aval;
    if (pa->dtype != CFT_BOOL || pa->ndim != 0)
        return cft__fail(CFT_E_SHAPE, "while_loop: cond returns %s, not a bool scalar",
                         cft__av(pa));
    for (int i = 0; i < nin; i++)
        if (!cft__aval_eq(&in[i], &b->invars[i]->aval) ||
            !cft__aval_eq(&in[i], &c->invars[i]->aval))
            return cft__fail(CFT_E_SHAPE, "while_loop: input %d is %s, the loop takes %s", i,
                             cft__av(&in[i]), cft__av(&b->invars[i]->aval));
    for (int j = 0; j < ncar; j++) {
        if (!cft__aval_eq(&b->outvars[j]->aval, &in[nc + j]))
            return cft__fail(CFT_E_SHAPE,
                             "while_loop: the body returns carry %d as %s but takes %s", j,
                             cft__av(&b->outvars[j]->aval), cft__av(&in[nc + j]));
        out[j] = in[nc + j];
    }
    return NULL;
}

static cft_array *while_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    cft_ir *c = wcond(p), *b = wbody(p);
    int nc = (int)p->v[W_NC][0], ncar = nin - nc;
    cft_array *args[nin > 0 ? nin : 1], *pr[1];
    memcpy(args, in, sizeof(cft_array *) * (size_t)nin);
    for (;;) {
        if (cft_ir_eval(c, args, pr) != CFT_OK)
            return pr[0];
        if (cft_item(pr[0]) == 0)
            break;
        if (cft_ir_eval(b, args, args + nc) != CFT_OK)
            return args[nc];
    }
    memcpy(out, args + nc, sizeof(cft_array *) * (size_t)ncar);
    return NULL;
}

static int while_nout(const cft_params *p, int nin) {
    return nin - (int)p->v[W_NC][0];
}

typedef struct {
    cft_ir *cond, *body;
    int nc, ncar;
} while_env;

/* jvp: cond' (consts, tconsts, carry, tcarry) -> cond(consts, carry) */
static cft_status wjvp_cond_cb(void *envp, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    while_env *e = envp;
    (void)nin, (void)nout;
    cft_array *args[e->nc + e->ncar + 1];
    memcpy(args, in, sizeof(cft_array *) * (size_t)e->nc);
    memcpy(args + e->nc, in + 2 * e->nc, sizeof(cft_array *) * (size_t)e->ncar);
    return cft_ir_eval(e->cond, args, out);
}
/* body' (consts, tconsts, carry, tcarry) -> (carry', tcarry') */
static cft_status wjvp_body_cb(void *envp, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    while_env *e = envp;
    (void)nout;
    int n = e->nc + e->ncar;
    cft_array *args[2 * n + 1];
    memcpy(args, in, sizeof(cft_array *) * (size_t)e->nc);                       /* consts */
    memcpy(args + e->nc, in + 2 * e->nc, sizeof(cft_array *) * (size_t)e->ncar); /* carry */
    memcpy(args + n, in + e->nc, sizeof(cft_array *) * (size_t)e->nc);           /* tconsts */
    memcpy(args + n + e->nc, in + 2 * e->nc + e->ncar,
           sizeof(cft_array *) * (size_t)e->ncar); /* tcarry */
    (void)nin;
    return cft_fn_call(cft_jvp(cft_ir_fn(e->body)), args, out);
}

static cft_array *while_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                            const cft_params *p, cft_array **ty) {
    (void)y;
    while_env *e = CFT_NEW(while_env);
    e->cond = wcond(p), e->body = wbody(p), e->nc = (int)p->v[W_NC][0], e->ncar = nin - e->nc;
    int nc = e->nc, ncar = e->ncar;
    cft_aval *av = CFT_NEWN(cft_aval, 2 * nin + 1);
    cft_array **args = CFT_NEWN(cft_array *, 2 * nin + 1);
    for (int g = 0, k = 0, base = 0; g < 2; g++) { /* (consts, tconsts, carry, tcarry) */
        int cnt = g ? ncar : nc;
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < cnt; i++, k++) {
                av[k] = x[base + i]->aval;
                args[k] = r ? cft__inst(t[base + i], &x[base + i]->aval) : x[base + i];
            }
        base += cnt;
    }
    cft_ir *c2 = cft_make_ir(cft_fn_new(wjvp_cond_cb, e, 2 * nin, 1), av);
    cft_ir *b2 = cft_make_ir(cft_fn_new(wjvp_body_cb, e, 2 * nin, 2 * ncar), av);
    if (!c2 || !b2)
        return cft__fail(cft_last_error(), "while_loop jvp: %s", cft_last_error_message());
    cft_params q = while_params(c2, b2, 2 * nc);
    cft_array **res = CFT_NEWN(cft_array *, 2 * ncar + 1);
    cft_array *err = cft__bind(&cft_p_while, &q, 2 * nin, args, 2 * ncar, res);
    if (err)
        return err;
    for (int j = 0; j < ncar; j++)
        ty[j] = res[ncar + j];
    return NULL;
}

/* vmap: every lane runs until all are done; finished lanes keep their carry */
typedef struct {
    cft_fn *vcond, *vbody; /* vmapped over (consts, carry), outputs batched at 0 */
    int nc, ncar;
} wvmap_env;

static cft_status wv_cond_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    wvmap_env *e = envp;
    (void)nin, (void)nout;
    cft_array *pl[1];
    cft_status st = cft_fn_call(e->vcond, in, pl);
    if (st)
        return st;
    out[0] = cft_max(pl[0], NULL, 0, false); /* any lane still running */
    return CFT_OK;
}
static cft_status wv_body_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    wvmap_env *e = envp;
    (void)nin, (void)nout;
    cft_array *pl[1], *nb[e->ncar + 1];
    cft_status st = cft_fn_call(e->vcond, in, pl);
    if (st)
        return st;
    st = cft_fn_call(e->vbody, in, nb);
    if (st)
        return st;
    for (int j = 0; j < e->ncar; j++) {
        const cft_aval *a = &nb[j]->aval;
        out[j] = cft_where(cft_broadcast_in_dim(pl[0], a->shape, a->ndim, (int[]){0}), nb[j],
                           in[e->nc + j]);
    }
    return CFT_OK;
}

static cft_array *while_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                             const cft_params *p, cft_array **y, int *ybdim) {
    int nc = (int)p->v[W_NC][0], ncar = nin - nc;
    wvmap_env *e = CFT_NEW(wvmap_env);
    e->nc = nc, e->ncar = ncar;
    int *in_axes = CFT_NEWN(int, nin + 1), *out_axes = CFT_NEWN(int, ncar + 1);
    cft_aval *av = CFT_NEWN(cft_aval, nin + 1);
    cft_array **args = CFT_NEWN(cft_array *, nin + 1);
    for (int i = 0; i < nin; i++) {
        bool carry = i >= nc;
        if (carry || bdim[i] >= 0) {
            in_axes[i] = 0;
            args[i] = cft__batch_at(x[i], bdim[i], size, 0);
        } else {
            in_axes[i] = CFT_NOT_BATCHED;
            args[i] = x[i];
        }
        av[i] = args[i]->aval;
    }
    for (int j = 0; j < ncar; j++)
        out_axes[j] = 0;
    e->vcond = cft_vmap(cft_ir_fn(wcond(p)), in_axes, (int[]){0});
    e->vbody = cft_vmap(cft_ir_fn(wbody(p)), in_axes, out_axes);
    cft_ir *c2 = cft_make_ir(cft_fn_new(wv_cond_cb, e, nin, 1), av);
    cft_ir *b2 = cft_make_ir(cft_fn_new(wv_body_cb, e, nin, ncar), av);
    if (!c2 || !b2)
        return cft__fail(cft_last_error(), "while_loop vmap: %s", cft_last_error_message());
    cft_params q = while_params(c2, b2, nc);
    for (int j = 0; j < ncar; j++)
        ybdim[j] = 0;
    return cft__bind(&cft_p_while, &q, nin, args, ncar, y);
}

const cft_prim cft_p_while = {
    .name = "while",
    .nin = -1,
    .nout = -1,
    .nout_of = while_nout,
    .pnames = {"@cond", "@body", "#nconsts"},
    .shape = while_shape,
    .impl = while_impl,
    .jvp = while_jvp,
    .vmap = while_vmap,
};

/* ---- cond[@branches](index, ops) -> outs ---- */

extern const cft_prim cft_p_cond;

static int nbranches(const cft_params *p) {
    return p->n[0];
}
static cft_ir *branch(const cft_params *p, int k) {
    return (cft_ir *)(uintptr_t)p->v[0][k];
}
static cft_params cond_params(cft_ir *const *br, int n) {
    cft_params p;
    memset(&p, 0, sizeof p);
    p.n[0] = (int8_t)n;
    for (int k = 0; k < n; k++)
        p.v[0][k] = (int64_t)(uintptr_t)br[k];
    return p;
}

static cft_array *cond_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    if (in[0].ndim != 0 || cft_dtype_is_float(in[0].dtype) || in[0].dtype == CFT_BOOL)
        return cft__fail(CFT_E_DTYPE, "cond: the index must be an integer scalar, got %s",
                         cft__av(&in[0]));
    cft_ir *b0 = branch(p, 0);
    for (int k = 0; k < nbranches(p); k++) {
        cft_ir *b = branch(p, k);
        if (b->nin != nin - 1 || b->nout != b0->nout)
            return cft__fail(CFT_E_ARG,
                             "cond: branch %d takes %d and returns %d; expected %d and %d", k,
                             b->nin, b->nout, nin - 1, b0->nout);
        for (int i = 0; i < b->nin; i++)
            if (!cft__aval_eq(&b->invars[i]->aval, &in[1 + i]))
                return cft__fail(CFT_E_SHAPE, "cond: operand %d is %s, branch %d takes %s", i,
                                 cft__av(&in[1 + i]), k, cft__av(&b->invars[i]->aval));
        for (int j = 0; j < b->nout; j++)
            if (!cft__aval_eq(&b->outvars[j]->aval, &b0->outvars[j]->aval))
                return cft__fail(CFT_E_SHAPE,
                                 "cond: branch %d returns %s where branch 0 returns %s", k,
                                 cft__av(&b->outvars[j]->aval), cft__av(&b0->outvars[j]->aval));
    }
    for (int j = 0; j < b0->nout; j++)
        out[j] = b0->outvars[j]->aval;
    return NULL;
}

static int clamp_index(cft_array *i, int n) {
    double v = cft_item(i);
    return v < 0 ? 0 : v >= n ? n - 1 : (int)v;
}

static cft_array *cond_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    cft_ir *b = branch(p, clamp_index(in[0], nbranches(p)));
    return cft_ir_eval(b, in + 1, out) == CFT_OK ? NULL : out[0];
}

static int cond_nout(const cft_params *p, int nin) {
    (void)nin;
    return branch(p, 0)->nout;
}

/* a branch's jvp: (ops, tops) -> (outs, touts) */
static cft_array *cond_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)y;
    int n = nin - 1, nb = nbranches(p), m = branch(p, 0)->nout;
    cft_aval *av = CFT_NEWN(cft_aval, 2 * n + 1);
    cft_array **args = CFT_NEWN(cft_array *, 2 * n + 2);
    args[0] = x[0];
    for (int i = 0; i < n; i++) {
        av[i] = av[n + i] = x[1 + i]->aval;
        args[1 + i] = x[1 + i];
        args[1 + n + i] = cft__inst(t[1 + i], &x[1 + i]->aval);
    }
    cft_ir *jb[16];
    for (int k = 0; k < nb; k++) {
        jb[k] = cft_make_ir(cft_jvp(cft_ir_fn(branch(p, k))), av);
        if (!jb[k])
            return cft__fail(cft_last_error(), "cond jvp: %s", cft_last_error_message());
    }
    cft_params q = cond_params(jb, nb);
    cft_array **res = CFT_NEWN(cft_array *, 2 * m + 1);
    cft_array *e = cft__bind(&cft_p_cond, &q, 2 * n + 1, args, 2 * m, res);
    if (e)
        return e;
    for (int j = 0; j < m; j++)
        ty[j] = res[m + j];
    return NULL;
}

static cft_array *cond_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    int n = nin - 1, nb = nbranches(p), m = branch(p, 0)->nout;
    int *in_axes = CFT_NEWN(int, n + 1), *out_axes = CFT_NEWN(int, m + 1);
    cft_aval *av = CFT_NEWN(cft_aval, n + 1);
    cft_array **ops = CFT_NEWN(cft_array *, n + 1);
    bool any = false;
    for (int i = 0; i < n; i++)
        any |= bdim[1 + i] >= 0;
    for (int i = 0; i < n; i++) {
        in_axes[i] = bdim[1 + i] >= 0 ? 0 : CFT_NOT_BATCHED;
        ops[i] = bdim[1 + i] >= 0 ? cft__moveaxis_b(x[1 + i], bdim[1 + i], 0) : x[1 + i];
        av[i] = ops[i]->aval;
    }
    for (int j = 0; j < m; j++)
        out_axes[j] = 0, ybdim[j] = 0;
    cft_fn *vb[16]; /* each branch over the batch (or as is, when no operand is batched) */
    for (int k = 0; k < nb; k++)
        vb[k] =
            any ? cft_vmap(cft_ir_fn(branch(p, k)), in_axes, out_axes) : cft_ir_fn(branch(p, k));
    if (bdim[0] < 0) { /* one index for all lanes: still one cond */
        cft_ir *br[16];
        for (int k = 0; k < nb; k++) {
            br[k] = cft_make_ir(vb[k], av);
            if (!br[k])
                return cft__fail(cft_last_error(), "cond vmap: %s", cft_last_error_message());
        }
        cft_params q = cond_params(br, nb);
        cft_array **args = CFT_NEWN(cft_array *, nin + 1);
        args[0] = x[0];
        memcpy(args + 1, ops, sizeof(cft_array *) * (size_t)n);
        return cft__bind(&cft_p_cond, &q, nin, args, m, y);
    }
    /* an index per lane: every branch on the whole batch, then a select per lane */
    cft_array *idx = cft__moveaxis_b(x[0], bdim[0], 0);
    idx = cft_maximum(cft_minimum(idx, cft_full_like(idx, nb - 1)), cft_zeros_like(idx));
    cft_array **res = CFT_NEWN(cft_array *, m + 1);
    for (int k = 0; k < nb; k++) {
        if (cft_fn_call(vb[k], ops, res) != CFT_OK)
            return res[0];
        for (int j = 0; j < m; j++) {
            if (!any)
                res[j] = cft__batch_at(res[j], -1, size, 0);
            if (k == 0) {
                y[j] = res[j];
                continue;
            }
            const cft_aval *a = &res[j]->aval;
            cft_array *pick = cft_broadcast_in_dim(cft_eq(idx, cft_full_like(idx, k)), a->shape,
                                                   a->ndim, (int[]){0});
            y[j] = cft_where(pick, res[j], y[j]);
        }
    }
    return NULL;
}

/* reverse mode: each branch split alike; the known cond also returns the
 * residuals of the branch taken, in that branch's slots (zeros elsewhere) */
typedef struct {
    cft_ir *ir;      /* a split half of one branch */
    int nres_before; /* residual slots of the branches before this one */
    int nres_total;
    cft_aval *slots; /* avals of all residual slots */
    int nres, nout;  /* this branch's residuals; known outputs */
} half_env;

static cft_status known_half_cb(void *envp, int nin, cft_array *const *in, int nout,
                                cft_array **out) {
    half_env *e = envp;
    (void)nin, (void)nout;
    cft_array **r = CFT_NEWN(cft_array *, e->nout + e->nres + 1);
    cft_status st = cft_ir_eval(e->ir, in, r);
    if (st)
        return st;
    for (int j = 0; j < e->nout; j++)
        out[j] = r[j];
    for (int s = 0; s < e->nres_total; s++) {
        int own = s - e->nres_before;
        out[e->nout + s] =
            own >= 0 && own < e->nres ? r[e->nout + own] : cft__zeros_aval(&e->slots[s]);
    }
    return CFT_OK;
}
static cft_status unknown_half_cb(void *envp, int nin, cft_array *const *in, int nout,
                                  cft_array **out) {
    half_env *e = envp;
    (void)nout;
    cft_array **args = CFT_NEWN(cft_array *, nin + 1);
    int k = 0;
    for (int r = 0; r < e->nres; r++)
        args[k++] = in[e->nres_before + r];
    for (int i = e->nres_total; i < nin; i++)
        args[k++] = in[i];
    return cft_ir_eval(e->ir, args, out);
}

static bool cond_partial_eval(const cft_eqn *q, const bool *in_known, int *next_id, cft_eqn *kq,
                              cft_eqn *uq, bool *out_known) {
    const cft_params *p = &q->params;
    int nb = nbranches(p), n = q->nin - 1, m = q->nout;
    if (!in_known[0])
        return false; /* an index that is not known: no split */
    bool *bk = CFT_NEWN(bool, n + 1), *ok = CFT_NEWN(bool, m + 1), *want = CFT_NEWN(bool, m + 1);
    memcpy(bk, in_known + 1, sizeof(bool) * (size_t)n);
    for (int j = 0; j < m; j++)
        out_known[j] = true;
    for (int k = 0; k < nb;
         k++) { /* an output is known if every branch computes it from known inputs */
        if (!cft__split_ir(branch(p, k), bk, NULL, ok))
            return false;
        for (int j = 0; j < m; j++)
            out_known[j] &= ok[j];
    }
    for (int j = 0; j < m; j++)
        want[j] = !out_known[j];
    cft_ir_split *sp[16];
    int total = 0, before[16], nkin = 0, nkout = 0;
    for (int i = 0; i < n; i++)
        nkin += bk[i];
    for (int j = 0; j < m; j++)
        nkout += out_known[j];
    for (int k = 0; k < nb; k++) {
        sp[k] = cft__split_ir(branch(p, k), bk, want, ok);
        if (!sp[k])
            return false;
        before[k] = total;
        total += sp[k]->nres;
    }
    cft_aval *slots = CFT_NEWN(cft_aval, total + 1);
    for (int k = 0; k < nb; k++)
        for (int r = 0; r < sp[k]->nres; r++)
            slots[before[k] + r] =
                sp[k]->known->outvars[sp[k]->known->nout - sp[k]->nres + r]->aval;
    cft_ir *kb[16], *ub[16];
    cft_aval *kav = CFT_NEWN(cft_aval, nkin + 1), *uav = CFT_NEWN(cft_aval, total + n + 1);
    for (int i = 0, a = 0; i < n; i++)
        if (bk[i])
            kav[a++] = q->in[1 + i]->aval;
    int nu = 0;
    for (int s = 0; s < total; s++)
        uav[nu++] = slots[s];
    for (int i = 0; i < n; i++)
        if (!bk[i])
            uav[nu++] = q->in[1 + i]->aval;
    for (int k = 0; k < nb; k++) {
        half_env *ke = CFT_NEW(half_env), *ue = CFT_NEW(half_env);
        *ke = (half_env){sp[k]->known, before[k], total, slots, sp[k]->nres, nkout};
        *ue = (half_env){sp[k]->unknown, before[k], total, slots, sp[k]->nres, m - nkout};
        kb[k] = cft_make_ir(cft_fn_new(known_half_cb, ke, nkin, nkout + total), kav);
        ub[k] = cft_make_ir(cft_fn_new(unknown_half_cb, ue, nu, m - nkout), uav);
        if (!kb[k] || !ub[k])
            return false;
    }
    cft_irvar **R = CFT_NEWN(cft_irvar *, total + 1);
    for (int s = 0; s < total; s++)
        R[s] = fresh(next_id, &slots[s]);
    memset(kq, 0, sizeof *kq);
    kq->prim = &cft_p_cond;
    kq->params = cond_params(kb, nb);
    kq->in = CFT_NEWN(cft_irvar *, nkin + 2);
    kq->in[kq->nin++] = q->in[0];
    for (int i = 0; i < n; i++)
        if (bk[i])
            kq->in[kq->nin++] = q->in[1 + i];
    kq->out = CFT_NEWN(cft_irvar *, nkout + total + 1);
    for (int j = 0; j < m; j++)
        if (out_known[j])
            kq->out[kq->nout++] = q->out[j];
    for (int s = 0; s < total; s++)
        kq->out[kq->nout++] = R[s];
    memset(uq, 0, sizeof *uq);
    uq->prim = &cft_p_cond;
    uq->params = cond_params(ub, nb);
    uq->in = CFT_NEWN(cft_irvar *, nu + 2);
    uq->in[uq->nin++] = q->in[0];
    for (int s = 0; s < total; s++)
        uq->in[uq->nin++] = R[s];
    for (int i = 0; i < n; i++)
        if (!bk[i])
            uq->in[uq->nin++] = q->in[1 + i];
    uq->out = CFT_NEWN(cft_irvar *, m - nkout + 1);
    for (int j = 0; j < m; j++)
        if (!out_known[j])
            uq->out[uq->nout++] = q->out[j];
    return true;
}

/* transpose: a cond over the branches' transposes (vjps of the linear branches) */
typedef struct {
    cft_ir *br;
    int n, m;        /* branch inputs, outputs */
    const bool *lin; /* per branch input */
    cft_aval *lin_av;
} tcond_env;

static cft_status tcond_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    tcond_env *e = envp;
    (void)nin, (void)nout;
    /* in: known branch inputs (in order), then output cotangents */
    lin_body_env *lb = CFT_NEW(lin_body_env);
    lb->body = e->br, lb->nin = e->n, lb->lin = e->lin;
    lb->known = CFT_NEWN(cft_array *, e->n + 1);
    int k = 0, nlin = 0;
    for (int i = 0; i < e->n; i++) {
        if (!e->lin[i])
            lb->known[i] = in[k++];
        else
            nlin++;
    }
    cft_fn *f = cft_fn_new(lin_body_cb, lb, nlin, e->m);
    cft_array **zeros = CFT_NEWN(cft_array *, nlin + 1), **vals = CFT_NEWN(cft_array *, e->m + 1);
    for (int i = 0; i < nlin; i++)
        zeros[i] = cft__zeros_aval(&e->lin_av[i]);
    cft_fn *pb;
    cft_status st = cft_vjp(f, zeros, vals, &pb);
    if (st)
        return st;
    return cft_fn_call(pb, in + k, out);
}

static cft_array *cond_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                 int nin, const cft_params *p, cft_array **ct_in) {
    int n = nin - 1, nb = nbranches(p), m = branch(p, 0)->nout;
    if (!x[0])
        return cft__fail(CFT_E_TRACE, "cond: transpose with an index that is not known");
    bool *lin = CFT_NEWN(bool, n + 1);
    int nlin = 0, nk = 0;
    for (int i = 0; i < n; i++)
        lin[i] = x[1 + i] == NULL, nlin += lin[i], nk += !lin[i];
    cft_aval *lav = CFT_NEWN(cft_aval, nlin + 1), *tav = CFT_NEWN(cft_aval, nk + m + 1);
    cft_array **args = CFT_NEWN(cft_array *, nk + m + 2);
    int a = 0, l = 0;
    args[0] = x[0];
    for (int i = 0; i < n; i++) {
        if (lin[i])
            lav[l++] = in[1 + i];
        else
            tav[a] = in[1 + i], args[1 + a++] = x[1 + i];
    }
    for (int j = 0; j < m; j++) {
        cft_aval oa = branch(p, 0)->outvars[j]->aval;
        tav[a] = oa, args[1 + a++] = cft__inst(ct[j], &oa);
    }
    cft_ir *tb[16];
    for (int k = 0; k < nb; k++) {
        tcond_env *e = CFT_NEW(tcond_env);
        *e = (tcond_env){branch(p, k), n, m, lin, lav};
        tb[k] = cft_make_ir(cft_fn_new(tcond_cb, e, nk + m, nlin), tav);
        if (!tb[k])
            return cft__fail(cft_last_error(), "cond transpose: %s", cft_last_error_message());
    }
    cft_params q = cond_params(tb, nb);
    cft_array **res = CFT_NEWN(cft_array *, nlin + 1);
    cft_array *e = cft__bind(&cft_p_cond, &q, 1 + nk + m, args, nlin, res);
    if (e)
        return e;
    ct_in[0] = NULL;
    for (int i = 0, r = 0; i < n; i++)
        ct_in[1 + i] = lin[i] ? res[r++] : NULL;
    return NULL;
}

const cft_prim cft_p_cond = {
    .name = "cond",
    .nin = -1,
    .nout = -1,
    .flags = CFT_PRIM_LINEAR,
    .nout_of = cond_nout,
    .pnames = {"@branches"},
    .shape = cond_shape,
    .impl = cond_impl,
    .jvp = cond_jvp,
    .transpose = cond_transpose,
    .vmap = cond_vmap,
    .partial_eval = cond_partial_eval,
};

static cft_ir *hoist_consts(const cft_ir *ir);
static cft_ir *hoist_consts_fwd(const cft_ir *ir) {
    return hoist_consts(ir);
}

/* ---- remat[@body, #policy](ins) -> outs: checkpointing ----
 * Evaluates its body. Under reverse mode its partial evaluation saves only
 * what the policy allows (the known inputs, plus contraction outputs for
 * CFT_SAVE_CONTRACTIONS); the unknown half is the whole body again, so the
 * backward pass recomputes the rest. */

extern const cft_prim cft_p_remat;

static cft_params remat_params(cft_ir *body, int policy) {
    cft_params p;
    memset(&p, 0, sizeof p);
    cft__param_set1(&p, 0, (int64_t)(uintptr_t)body);
    cft__param_set1(&p, 1, policy);
    return p;
}
static cft_ir *rbody(const cft_params *p) {
    return (cft_ir *)(uintptr_t)p->v[0][0];
}

static cft_array *remat_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    cft_ir *b = rbody(p);
    if (nin != b->nin)
        return cft__fail(CFT_E_ARG, "checkpoint: %d inputs for a body of %d", nin, b->nin);
    for (int i = 0; i < nin; i++)
        if (!cft__aval_eq(&in[i], &b->invars[i]->aval))
            return cft__fail(CFT_E_SHAPE, "checkpoint: input %d is %s, the body takes %s", i,
                             cft__av(&in[i]), cft__av(&b->invars[i]->aval));
    for (int j = 0; j < b->nout; j++)
        out[j] = b->outvars[j]->aval;
    return NULL;
}
static cft_array *remat_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    return cft_ir_eval(rbody(p), in, out) == CFT_OK ? NULL : out[0];
}
static int remat_nout(const cft_params *p, int nin) {
    (void)nin;
    return rbody(p)->nout;
}
static cft_array *remat_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                            const cft_params *p, cft_array **ty) {
    (void)y;
    int m = rbody(p)->nout;
    cft_aval *av = CFT_NEWN(cft_aval, 2 * nin + 1);
    cft_array **args = CFT_NEWN(cft_array *, 2 * nin + 1), **res = CFT_NEWN(cft_array *, 2 * m + 1);
    for (int i = 0; i < nin; i++) {
        av[i] = av[nin + i] = x[i]->aval;
        args[i] = x[i];
        args[nin + i] = cft__inst(t[i], &x[i]->aval);
    }
    cft_ir *jb = cft_make_ir(cft_jvp(cft_ir_fn(rbody(p))), av);
    if (!jb)
        return cft__fail(cft_last_error(), "checkpoint jvp: %s", cft_last_error_message());
    cft_params q = remat_params(jb, (int)p->v[1][0]);
    cft_array *e = cft__bind(&cft_p_remat, &q, 2 * nin, args, 2 * m, res);
    if (e)
        return e;
    for (int j = 0; j < m; j++)
        ty[j] = res[m + j];
    return NULL;
}
static cft_array *remat_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                             const cft_params *p, cft_array **y, int *ybdim) {
    (void)size;
    int m = rbody(p)->nout;
    int *in_axes = CFT_NEWN(int, nin + 1), *out_axes = CFT_NEWN(int, m + 1);
    cft_aval *av = CFT_NEWN(cft_aval, nin + 1);
    cft_array **args = CFT_NEWN(cft_array *, nin + 1);
    for (int i = 0; i < nin; i++) {
        in_axes[i] = bdim[i] >= 0 ? 0 : CFT_NOT_BATCHED;
        args[i] = bdim[i] >= 0 ? cft__moveaxis_b(x[i], bdim[i], 0) : x[i];
        av[i] = args[i]->aval;
    }
    for (int j = 0; j < m; j++)
        out_axes[j] = 0, ybdim[j] = 0;
    cft_ir *vb = cft_make_ir(cft_vmap(cft_ir_fn(rbody(p)), in_axes, out_axes), av);
    if (!vb)
        return cft__fail(cft_last_error(), "checkpoint vmap: %s", cft_last_error_message());
    cft_params q = remat_params(vb, (int)p->v[1][0]);
    return cft__bind(&cft_p_remat, &q, nin, args, m, y);
}

static bool remat_partial_eval(const cft_eqn *q, const bool *in_known, int *next_id, cft_eqn *kq,
                               cft_eqn *uq, bool *out_known) {
    cft_ir *b = rbody(&q->params);
    int policy = (int)q->params.v[1][0], n = b->nin, m = b->nout;
    bool *known = CFT_NEWN(bool, b->nvars + 1), *keq = CFT_NEWN(bool, b->neqn + 1);
    bool *used_unknown = CFT_NEWN(bool, b->nvars + 1), *saved = CFT_NEWN(bool, b->nvars + 1);
    for (int i = 0; i < b->nconst; i++)
        known[b->constvars[i]->id] = true;
    for (int i = 0; i < n; i++)
        known[b->invars[i]->id] = in_known[i];
    for (int k = 0; k < b->neqn; k++) {
        const cft_eqn *e = &b->eqns[k];
        bool all = true;
        for (int i = 0; i < e->nin; i++)
            all &= known[e->in[i]->id];
        keq[k] = all;
        for (int o = 0; o < e->nout; o++)
            known[e->out[o]->id] = all;
        if (!all)
            for (int i = 0; i < e->nin; i++)
                used_unknown[e->in[i]->id] = true;
    }
    int nkin = 0, nkout = 0, nsaved = 0;
    for (int i = 0; i < n; i++)
        nkin += in_known[i];
    for (int j = 0; j < m; j++)
        nkout += out_known[j] = known[b->outvars[j]->id];
    if (nkout == m)
        return false; /* nothing for the backward pass: no split needed */
    cft_irvar **sv = CFT_NEWN(cft_irvar *, b->nvars + 1);
    for (int k = b->neqn - 1; k >= 0; k--) /* known values the unknown half needs, transitively */
        if (keq[k]) {
            bool need = false;
            for (int o = 0; o < b->eqns[k].nout; o++)
                need |= used_unknown[b->eqns[k].out[o]->id];
            if (need &&
                !(b->eqns[k].prim->flags & CFT_PRIM_CONTRACTION && policy == CFT_SAVE_CONTRACTIONS))
                for (int i = 0; i < b->eqns[k].nin; i++)
                    used_unknown[b->eqns[k].in[i]->id] = true;
        }
    for (int k = 0; k < b->neqn && policy == CFT_SAVE_CONTRACTIONS; k++)
        if (keq[k] && (b->eqns[k].prim->flags & CFT_PRIM_CONTRACTION) &&
            used_unknown[b->eqns[k].out[0]->id]) {
            saved[b->eqns[k].out[0]->id] = true;
            sv[nsaved++] = b->eqns[k].out[0];
        }
    /* known half: known inputs -> known outputs + saved values */
    cft_ir kn = *b;
    kn.invars = CFT_NEWN(cft_irvar *, nkin + 1);
    kn.nin = 0;
    for (int i = 0; i < n; i++)
        if (in_known[i])
            kn.invars[kn.nin++] = b->invars[i];
    kn.eqns = CFT_NEWN(cft_eqn, b->neqn + 1);
    kn.neqn = 0;
    for (int k = 0; k < b->neqn; k++)
        if (keq[k])
            kn.eqns[kn.neqn++] = b->eqns[k];
    kn.outvars = CFT_NEWN(cft_irvar *, nkout + nsaved + 1);
    kn.nout = 0;
    for (int j = 0; j < m; j++)
        if (out_known[j])
            kn.outvars[kn.nout++] = b->outvars[j];
    for (int r = 0; r < nsaved; r++)
        kn.outvars[kn.nout++] = sv[r];
    /* unknown half: the whole body again from (known inputs, saved, unknown inputs) */
    cft_ir un = *b;
    un.invars = CFT_NEWN(cft_irvar *, n + nsaved + 1);
    un.nin = 0;
    for (int i = 0; i < n; i++)
        if (in_known[i])
            un.invars[un.nin++] = b->invars[i];
    for (int r = 0; r < nsaved; r++)
        un.invars[un.nin++] = sv[r];
    for (int i = 0; i < n; i++)
        if (!in_known[i])
            un.invars[un.nin++] = b->invars[i];
    un.eqns = CFT_NEWN(cft_eqn, b->neqn + 1);
    un.neqn = 0;
    for (int k = 0; k < b->neqn; k++)
        if (!(b->eqns[k].nout == 1 && saved[b->eqns[k].out[0]->id]))
            un.eqns[un.neqn++] = b->eqns[k];
    un.outvars = CFT_NEWN(cft_irvar *, m - nkout + 1);
    un.nout = 0;
    for (int j = 0; j < m; j++)
        if (!out_known[j])
            un.outvars[un.nout++] = b->outvars[j];
    int policy_id = policy;
    memset(kq, 0, sizeof *kq);
    kq->prim = &cft_p_remat;
    kq->params = remat_params(cft__ir_dce_outputs(cft__ir_finish(&kn), NULL), policy_id);
    kq->in = CFT_NEWN(cft_irvar *, nkin + 1);
    for (int i = 0; i < n; i++)
        if (in_known[i])
            kq->in[kq->nin++] = q->in[i];
    kq->out = CFT_NEWN(cft_irvar *, nkout + nsaved + 1);
    for (int j = 0; j < m; j++)
        if (out_known[j])
            kq->out[kq->nout++] = q->out[j];
    cft_irvar **S = CFT_NEWN(cft_irvar *, nsaved + 1);
    for (int r = 0; r < nsaved; r++)
        kq->out[kq->nout++] = S[r] = fresh(next_id, &sv[r]->aval);
    memset(uq, 0, sizeof *uq);
    uq->prim = &cft_p_remat;
    uq->params = remat_params(cft__ir_dce_outputs(cft__ir_finish(&un), NULL), policy_id);
    uq->in = CFT_NEWN(cft_irvar *, n + nsaved + 1);
    for (int i = 0; i < n; i++)
        if (in_known[i])
            uq->in[uq->nin++] = q->in[i];
    for (int r = 0; r < nsaved; r++)
        uq->in[uq->nin++] = S[r];
    for (int i = 0; i < n; i++)
        if (!in_known[i])
            uq->in[uq->nin++] = q->in[i];
    uq->out = CFT_NEWN(cft_irvar *, m - nkout + 1);
    for (int j = 0; j < m; j++)
        if (!out_known[j])
            uq->out[uq->nout++] = q->out[j];
    return true;
}

/* the body is linear in its linear inputs given the known ones: its
 * transpose is the vjp, which recomputes the known part now */
static cft_array *remat_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                  int nin, const cft_params *p, cft_array **ct_in) {
    cft_ir *b = rbody(p);
    int m = b->nout;
    bool *lin = CFT_NEWN(bool, nin + 1);
    int nlin = 0;
    for (int i = 0; i < nin; i++)
        lin[i] = x[i] == NULL, nlin += lin[i];
    lin_body_env *lb = CFT_NEW(lin_body_env);
    lb->body = b, lb->nin = nin, lb->lin = lin;
    lb->known = CFT_NEWN(cft_array *, nin + 1);
    cft_array **zeros = CFT_NEWN(cft_array *, nlin + 1), **vals = CFT_NEWN(cft_array *, m + 1);
    cft_array **cts = CFT_NEWN(cft_array *, m + 1), **res = CFT_NEWN(cft_array *, nlin + 1);
    for (int i = 0, k = 0; i < nin; i++) {
        if (lin[i])
            zeros[k++] = cft__zeros_aval(&in[i]);
        else
            lb->known[i] = x[i];
    }
    for (int j = 0; j < m; j++)
        cts[j] = cft__inst(ct[j], &b->outvars[j]->aval);
    cft_fn *pb;
    if (cft_vjp(cft_fn_new(lin_body_cb, lb, nlin, m), zeros, vals, &pb) != CFT_OK)
        return vals[0];
    if (cft_fn_call(pb, cts, res) != CFT_OK)
        return res[0];
    for (int i = 0, k = 0; i < nin; i++)
        ct_in[i] = lin[i] ? res[k++] : NULL;
    return NULL;
}

const cft_prim cft_p_remat = {
    .name = "checkpoint",
    .nin = -1,
    .nout = -1,
    .flags = CFT_PRIM_LINEAR,
    .nout_of = remat_nout,
    .pnames = {"@body", "#policy"},
    .shape = remat_shape,
    .impl = remat_impl,
    .jvp = remat_jvp,
    .transpose = remat_transpose,
    .vmap = remat_vmap,
    .partial_eval = remat_partial_eval,
};

typedef struct {
    cft_fn *f;
    int policy;
} remat_env;

static cft_status remat_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    remat_env *e = envp;
    cft_aval *av = CFT_NEWN(cft_aval, nin + 1);
    for (int i = 0; i < nin; i++)
        av[i] = in[i]->aval;
    cft_ir *ir = cft_make_ir(e->f, av);
    if (!ir)
        return cft__set_last(
            cft__fail(cft_last_error(), "cft_checkpoint: %s", cft_last_error_message()));
    int nh = ir->nconst;
    cft_array **args = CFT_NEWN(cft_array *, nh + nin + 1);
    memcpy(args, ir->constvals, sizeof(cft_array *) * (size_t)nh);
    memcpy(args + nh, in, sizeof(cft_array *) * (size_t)nin);
    cft_params q = remat_params(hoist_consts_fwd(ir), e->policy);
    cft_array *err = cft__bind(&cft_p_remat, &q, nh + nin, args, nout, out);
    return err ? cft_error_code(err) : CFT_OK;
}

cft_fn *cft_checkpoint(cft_fn *f, cft_remat_policy policy) {
    CFT_API("cft_checkpoint");
    cft_fn *bad = cft__fn_check("cft_checkpoint", f);
    if (bad)
        return bad;
    remat_env *e = CFT_NEW(remat_env);
    e->f = f, e->policy = (int)policy;
    return cft_fn_named(cft_fn_new(remat_cb, e, cft_fn_nin(f), cft_fn_nout(f)), "checkpoint");
}

/* ---- public loops ---- */

/* the body's constants become explicit inputs of the loop (closure
 * conversion), so enclosing transforms see what it captured */
static cft_ir *hoist_consts(const cft_ir *ir) {
    cft_ir d = *ir;
    d.invars = CFT_NEWN(cft_irvar *, ir->nconst + ir->nin + 1);
    memcpy(d.invars, ir->constvars, sizeof(cft_irvar *) * (size_t)ir->nconst);
    memcpy(d.invars + ir->nconst, ir->invars, sizeof(cft_irvar *) * (size_t)ir->nin);
    d.nin = ir->nconst + ir->nin;
    d.nconst = 0;
    d.constvars = NULL;
    d.constvals = NULL;
    return cft__ir_finish(&d);
}

cft_status cft_scan(cft_fn *body, int nconsts, int ncarry, int64_t length, bool reverse,
                    cft_array *const *in, cft_array **out) {
    CFT_API("cft_scan");
    int nin = cft_fn_nin(body), nout = cft_fn_nout(body);
    if (!body || !in || !out || nconsts < 0 || ncarry < 0 || nconsts + ncarry > nin ||
        ncarry > nout || length < 0)
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_scan: bad arguments (nconsts=%d, ncarry=%d, length=%lld)",
                      nconsts, ncarry, (long long)length));
    cft_aval *av = CFT_NEWN(cft_aval, nin + 1);
    for (int i = 0; i < nin; i++) {
        if (cft_failed(in[i])) {
            for (int j = 0; j < nout; j++)
                out[j] = in[i] ? in[i] : cft__fail(CFT_E_ARG, "cft_scan: input %d is NULL", i);
            return cft__set_last(out[0]);
        }
        av[i] = in[i]->aval;
        if (i >= nconsts + ncarry) {
            if (av[i].ndim < 1 || av[i].shape[0] != length) {
                cft_array *e =
                    cft__fail(CFT_E_SHAPE, "cft_scan: xs %d is %s, needs leading dim %lld",
                              i - nconsts - ncarry, cft__av(&av[i]), (long long)length);
                for (int j = 0; j < nout; j++)
                    out[j] = e;
                return cft__set_last(e);
            }
            av[i] = cft__aval_drop(&av[i], 0);
        }
    }
    cft_ir *ir = cft_make_ir(body, av);
    if (!ir) {
        cft_array *e = cft__fail(cft_last_error(), "cft_scan: %s", cft_last_error_message());
        for (int j = 0; j < nout; j++)
            out[j] = e;
        return cft__set_last(e);
    }
    int nh = ir->nconst;
    cft_array **args = CFT_NEWN(cft_array *, nh + nin + 1);
    memcpy(args, ir->constvals, sizeof(cft_array *) * (size_t)nh);
    memcpy(args + nh, in, sizeof(cft_array *) * (size_t)nin);
    cft_params q = scan_params(hoist_consts(ir), length, reverse, nh + nconsts, ncarry);
    cft_array *e = cft__bind(&cft_p_scan, &q, nh + nin, args, nout, out);
    return e ? cft__set_last(e) : CFT_OK;
}

typedef struct {
    cft_fn *body;
    int nconsts, ncarry;
} fori_env;

/* (consts, carry, i) -> carry, for a scan over i */
static cft_status fori_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    fori_env *e = envp;
    (void)nout;
    cft_array *args[nin];
    args[0] = in[nin - 1];
    for (int k = 0; k < nin - 1; k++)
        args[k + 1] = in[k];
    return cft_fn_call(e->body, args, out);
}

cft_status cft_fori_loop(cft_fn *body, int nconsts, int ncarry, int64_t lo, int64_t hi,
                         cft_array *const *in, cft_array **out) {
    CFT_API("cft_fori_loop");
    if (!body || cft_fn_nin(body) != 1 + nconsts + ncarry || cft_fn_nout(body) != ncarry || hi < lo)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_fori_loop: body must take (i, %d consts, %d carries) "
                                       "and return the carries; range [%lld, %lld)",
                                       nconsts, ncarry, (long long)lo, (long long)hi));
    fori_env *e = CFT_NEW(fori_env);
    e->body = body, e->nconsts = nconsts, e->ncarry = ncarry;
    cft_fn *f = cft_fn_new(fori_cb, e, nconsts + ncarry + 1, ncarry);
    cft_array **args = CFT_NEWN(cft_array *, nconsts + ncarry + 2);
    memcpy(args, in, sizeof(cft_array *) * (size_t)(nconsts + ncarry));
    args[nconsts + ncarry] = cft_add_s(cft_iota(CFT_I32, (int64_t[]){hi - lo}, 1, 0), (double)lo);
    if (hi == lo) {
        for (int j = 0; j < ncarry; j++)
            out[j] = in[nconsts + j];
        return CFT_OK;
    }
    return cft_scan(f, nconsts, ncarry, hi - lo, false, args, out);
}

/* cond and body traced at the loop's avals, their constants hoisted into
 * the loop's consts (both IRs then take the union) */
cft_status cft_while_loop(cft_fn *cond, cft_fn *body, int nconsts, int ncarry, cft_array *const *in,
                          cft_array **out) {
    CFT_API("cft_while_loop");
    int nin = nconsts + ncarry;
    if (!cond || !body || !in || !out || cft_fn_nin(cond) != nin || cft_fn_nin(body) != nin ||
        cft_fn_nout(cond) != 1 || cft_fn_nout(body) != ncarry || ncarry < 1)
        return cft__set_last(
            cft__fail(CFT_E_ARG,
                      "cft_while_loop: cond and body must take (%d consts, %d carries); "
                      "cond returns a bool scalar, body the carries",
                      nconsts, ncarry));
    cft_aval *av = CFT_NEWN(cft_aval, nin + 1);
    for (int i = 0; i < nin; i++) {
        if (cft_failed(in[i])) {
            for (int j = 0; j < ncarry; j++)
                out[j] = in[i] ? in[i] : cft__fail(CFT_E_ARG, "cft_while_loop: NULL input");
            return cft__set_last(out[0]);
        }
        av[i] = in[i]->aval;
    }
    cft_ir *c = cft_make_ir(cond, av), *b = c ? cft_make_ir(body, av) : NULL;
    if (!b) {
        cft_array *e = cft__fail(cft_last_error(), "cft_while_loop: %s", cft_last_error_message());
        for (int j = 0; j < ncarry; j++)
            out[j] = e;
        return cft__set_last(e);
    }
    /* hoist both IRs' constants: loop inputs = cond consts, body consts, consts, carry */
    int hc = c->nconst, hb = b->nconst, nall = hc + hb + nin;
    cft_ir cd = *c, bd = *b;
    cd.invars = CFT_NEWN(cft_irvar *, nall + 1);
    bd.invars = CFT_NEWN(cft_irvar *, nall + 1);
    cft_aval *all = CFT_NEWN(cft_aval, nall + 1);
    cft_array **args = CFT_NEWN(cft_array *, nall + 1);
    int k = 0;
    for (int i = 0; i < hc; i++, k++)
        all[k] = c->constvars[i]->aval, args[k] = c->constvals[i];
    for (int i = 0; i < hb; i++, k++)
        all[k] = b->constvars[i]->aval, args[k] = b->constvals[i];
    for (int i = 0; i < nin; i++, k++)
        all[k] = av[i], args[k] = in[i];
    /* each IR gets fresh placeholder vars for the other's constants */
    int next_c = c->nvars, next_b = b->nvars;
    for (int i = 0; i < nall; i++) {
        bool cown = i < hc, bown = i >= hc && i < hc + hb, user = i >= hc + hb;
        if (cown)
            cd.invars[i] = c->constvars[i];
        else if (user)
            cd.invars[i] = c->invars[i - hc - hb];
        else
            cd.invars[i] = fresh(&next_c, &all[i]);
        if (bown)
            bd.invars[i] = b->constvars[i - hc];
        else if (user)
            bd.invars[i] = b->invars[i - hc - hb];
        else
            bd.invars[i] = fresh(&next_b, &all[i]);
    }
    cd.nin = bd.nin = nall;
    cd.nconst = bd.nconst = 0;
    cd.constvars = bd.constvars = NULL;
    cd.constvals = bd.constvals = NULL;
    cft_params q = while_params(cft__ir_finish(&cd), cft__ir_finish(&bd), hc + hb + nconsts);
    cft_array *e = cft__bind(&cft_p_while, &q, nall, args, ncarry, out);
    return e ? cft__set_last(e) : CFT_OK;
}

typedef struct {
    cft_fn *cond, *body;
    int nconsts, ncarry;
} bounded_env;

/* one masked step, as a scan body: (consts, carry) -> carry */
static cft_status bounded_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    bounded_env *e = envp;
    (void)nin, (void)nout;
    cft_array *pr[1], *nb[e->ncarry + 1];
    cft_status st = cft_fn_call(e->cond, in, pr);
    if (st)
        return st;
    st = cft_fn_call(e->body, in, nb);
    if (st)
        return st;
    for (int j = 0; j < e->ncarry; j++)
        out[j] = cft_where(pr[0], nb[j], in[e->nconsts + j]);
    return CFT_OK;
}

cft_status cft_while_loop_bounded(cft_fn *cond, cft_fn *body, int nconsts, int ncarry,
                                  int64_t max_steps, cft_array *const *in, cft_array **out) {
    CFT_API("cft_while_loop_bounded");
    if (!cond || !body || max_steps < 0 || ncarry < 1)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_while_loop_bounded: bad arguments (max_steps=%lld)",
                                       (long long)max_steps));
    bounded_env *e = CFT_NEW(bounded_env);
    e->cond = cond, e->body = body, e->nconsts = nconsts, e->ncarry = ncarry;
    cft_fn *step = cft_fn_new(bounded_cb, e, nconsts + ncarry, ncarry);
    return cft_scan(step, nconsts, ncarry, max_steps, false, in, out);
}

cft_status cft_switch(cft_array *index, cft_fn *const *branches, int nb, int nops,
                      cft_array *const *ops, cft_array **out) {
    CFT_API("cft_switch");
    int m = nb > 0 && branches && branches[0] ? cft_fn_nout(branches[0]) : 0;
    if (index && !cft_failed(index) &&
        (index->aval.ndim != 0 || cft_dtype_is_float(index->aval.dtype) ||
         cft_dtype_is_complex(index->aval.dtype)))
        return cft__set_last(cft__fail(CFT_E_DTYPE,
                                       "cft_switch: the index must be an integer scalar, got %s",
                                       cft__av(&index->aval)));
    if (!index || !branches || nb < 1 || nb > 16 || m < 1 || (nops && !ops))
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_switch: bad arguments (%d branches)", nb));
    cft_array *bad = cft_failed(index) ? index : NULL;
    for (int i = 0; i < nops && !bad; i++)
        if (cft_failed(ops[i]))
            bad = ops[i] ? ops[i] : cft__fail(CFT_E_ARG, "cft_switch: operand %d is NULL", i);
    if (bad) {
        for (int j = 0; j < m; j++)
            out[j] = bad;
        return cft__set_last(bad);
    }
    cft_aval *av = CFT_NEWN(cft_aval, nops + 1);
    for (int i = 0; i < nops; i++)
        av[i] = ops[i]->aval;
    cft_ir *ir[16];
    int nh = 0;
    for (int k = 0; k < nb; k++) {
        if (!branches[k] || cft_fn_nin(branches[k]) != nops || cft_fn_nout(branches[k]) != m)
            return cft__set_last(cft__fail(
                CFT_E_ARG, "cft_switch: branch %d must take %d and return %d", k, nops, m));
        ir[k] = cft_make_ir(branches[k], av);
        if (!ir[k]) {
            cft_array *e = cft__fail(cft_last_error(), "cft_switch: branch %d: %s", k,
                                     cft_last_error_message());
            for (int j = 0; j < m; j++)
                out[j] = e;
            return cft__set_last(e);
        }
        nh += ir[k]->nconst;
    }
    /* hoist every branch's constants: all branches take (all consts, ops) */
    cft_array **args = CFT_NEWN(cft_array *, nh + nops + 2);
    cft_aval *all = CFT_NEWN(cft_aval, nh + nops + 1);
    int h = 0;
    for (int k = 0; k < nb; k++)
        for (int i = 0; i < ir[k]->nconst; i++, h++)
            all[h] = ir[k]->constvars[i]->aval, args[1 + h] = ir[k]->constvals[i];
    for (int i = 0; i < nops; i++)
        all[nh + i] = av[i], args[1 + nh + i] = ops[i];
    for (int k = 0, at = 0; k < nb; k++) {
        cft_ir d = *ir[k];
        int next = ir[k]->nvars;
        d.invars = CFT_NEWN(cft_irvar *, nh + nops + 1);
        for (int i = 0; i < nh; i++)
            d.invars[i] = i >= at && i < at + ir[k]->nconst ? ir[k]->constvars[i - at]
                                                            : fresh(&next, &all[i]);
        for (int i = 0; i < nops; i++)
            d.invars[nh + i] = ir[k]->invars[i];
        at += ir[k]->nconst;
        d.nin = nh + nops, d.nconst = 0, d.constvars = NULL, d.constvals = NULL;
        ir[k] = cft__ir_finish(&d);
    }
    args[0] =
        cft__convert(index, cft_dtype_is_float(index->aval.dtype) || index->aval.dtype == CFT_BOOL
                                ? CFT_I32
                                : index->aval.dtype);
    cft_params q = cond_params(ir, nb);
    cft_array *e = cft__bind(&cft_p_cond, &q, 1 + nh + nops, args, m, out);
    return e ? cft__set_last(e) : CFT_OK;
}

cft_status cft_cond(cft_array *pred, cft_fn *on_true, cft_fn *on_false, int nops,
                    cft_array *const *ops, cft_array **out) {
    CFT_API("cft_cond");
    if (pred && !cft_failed(pred) && pred->aval.dtype != CFT_BOOL)
        return cft__set_last(cft__fail(CFT_E_DTYPE, "cft_cond: the predicate must be bool, got %s",
                                       cft__av(&pred->aval)));
    cft_fn *br[2] = {on_false, on_true};
    return cft_switch(pred, br, 2, nops, ops, out);
}
