/* jac.c: Jacobians and the Hessian, built from the other transforms:
 * jacrev is vmap of the pullback over basis cotangents (one row block per
 * output), jacfwd is vmap of jvp over basis tangents (one column block per
 * input), hessian is jacfwd(jacrev). */
#include "core/error.h"
#include "prims/rules.h"
#include "transforms/transforms.h"

typedef struct {
    cft_fn *f;
    int *argnums;
    int nargs;
    bool holomorphic;
    int naux;      /* f's last naux outputs: returned as they are, not differentiated */
    int64_t chunk; /* basis vectors per vmapped call (0: all at once) */
    size_t budget; /* or as many as fit in this many bytes */
} jac_env;

/* vmap of g over the basis (axis 0 of input `bin`, the others shared),
 * outputs batched along axis 0: at once, in chunks, or within the budget */
static cft_fn *basis_vmap(const jac_env *e, cft_fn *g, const int *in_axes) {
    if (e->budget)
        return cft_vmap_budget(g, in_axes, e->budget);
    if (e->chunk > 0)
        return cft_vmap_chunked(g, in_axes, e->chunk);
    return cft_vmap(g, in_axes, NULL);
}

/* the dtype check of JAX's jacrev/jacfwd: real values, or complex ones when
 * holomorphic; NULL when `a` passes */
static cft_array *check_dtype(const jac_env *e, const char *who, const char *what, int i,
                              const cft_aval *a) {
    bool ok = e->holomorphic ? cft_dtype_is_complex(a->dtype) : cft_dtype_is_float(a->dtype);
    if (ok)
        return NULL;
    return cft__fail(CFT_E_DTYPE,
                     e->holomorphic
                         ? "%s: holomorphic differentiation needs complex %ss; %s %d is %s"
                         : "%s: needs real float %ss; %s %d is %s (pass CFT_HOLOMORPHIC "
                           "for holomorphic functions of complex inputs)",
                     who, what, what, i, cft__av(a));
}

static jac_env *env_new(cft_fn *f, const int *argnums, int nargs, const char *who) {
    static const int first[1] = {0};
    if (nargs < 0 || nargs > f->nin || (nargs > 0 && !argnums)) {
        cft__set_last(cft__fail(CFT_E_ARG, "%s: %d argnums for a function of %d inputs%s", who,
                                nargs, f->nin, nargs > 0 && !argnums ? " (argnums is NULL)" : ""));
        return NULL;
    }
    if (!argnums || nargs <= 0)
        argnums = first, nargs = 1;
    jac_env *e = CFT_NEW(jac_env);
    e->f = f;
    e->nargs = nargs;
    e->argnums = CFT_NEWN(int, nargs);
    for (int k = 0; k < nargs; k++) {
        int a = argnums[k] < 0 ? argnums[k] + f->nin : argnums[k];
        if (a < 0 || a >= f->nin) {
            cft__set_last(cft__fail(CFT_E_ARG,
                                    "%s: argnum %d out of range for a function of %d inputs", who,
                                    argnums[k], f->nin));
            return NULL;
        }
        e->argnums[k] = a;
    }
    return e;
}

/* basis vectors of an aval, stacked: [size, *shape] */
static cft_array *basis(const cft_aval *a) {
    int64_t n = cft__numel(a->shape, a->ndim), shape[CFT_MAX_NDIM + 1];
    shape[0] = n;
    for (int i = 0; i < a->ndim; i++)
        shape[i + 1] = a->shape[i];
    return cft_reshape(cft_eye(n, a->dtype), shape, a->ndim + 1);
}

/* [*lead, *tail] */
static cft_array *reshape_joined(cft_array *x, const cft_aval *lead, const cft_aval *tail) {
    int64_t shape[2 * CFT_MAX_NDIM];
    int nd = 0;
    for (int i = 0; i < lead->ndim; i++)
        shape[nd++] = lead->shape[i];
    for (int i = 0; i < tail->ndim; i++)
        shape[nd++] = tail->shape[i];
    if (nd > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "jacobian: rank %d exceeds %d", nd, CFT_MAX_NDIM);
    return cft_reshape(x, shape, nd);
}

static cft_status jacrev_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    jac_env *e = envp;
    int m = e->f->nout - e->naux, mall = e->f->nout;
    cft_array *vals[mall];
    cft_fn *pb;
    for (int a = 0; a < e->nargs; a++) {
        cft_array *bad =
            check_dtype(e, "cft_jacrev", "input", e->argnums[a], &in[e->argnums[a]]->aval);
        if (bad)
            return cft__fail_outs(bad, nout, out);
    }
    cft_status st =
        e->naux ? cft_vjp_with_aux(e->f, e->naux, in, vals, &pb) : cft_vjp(e->f, in, vals, &pb);
    if (st != CFT_OK)
        return cft__fail_outs(vals[0], nout, out);
    for (int k = 0; k < e->naux; k++)
        out[m * e->nargs + k] = vals[m + k];
    for (int j = 0; j < m; j++) {
        cft_array *bad = check_dtype(e, "cft_jacrev", "output", j, &vals[j]->aval);
        if (bad)
            return cft__fail_outs(bad, nout, out);
    }
    for (int j = 0; j < m; j++) {
        int in_axes[m];
        cft_array *cts[m], *res[nin];
        for (int k = 0; k < m; k++) {
            in_axes[k] = k == j ? 0 : CFT_NOT_BATCHED;
            cts[k] = k == j ? basis(&vals[j]->aval) : cft__zeros_aval(&vals[k]->aval);
        }
        st = cft_fn_call(basis_vmap(e, pb, in_axes), cts, res);
        if (st != CFT_OK)
            return cft__fail_outs(res[0], nout, out);
        for (int a = 0; a < e->nargs; a++) {
            int i = e->argnums[a];
            out[j * e->nargs + a] = reshape_joined(res[i], &vals[j]->aval, &in[i]->aval);
        }
    }
    return CFT_OK;
}

/* (primals..., tangent of input `a`) -> output tangents */
typedef struct {
    cft_fn *f;
    int a;
    int m; /* the outputs differentiated (f's first m) */
} partial_env;

static cft_status partial_jvp_cb(void *envp, int nin, cft_array *const *in, int nout,
                                 cft_array **out) {
    partial_env *p = envp;
    int n = p->f->nin, mall = p->f->nout;
    (void)nin, (void)nout;
    cft_array *t[n > 0 ? n : 1], *vals[mall], *tan[mall];
    for (int i = 0; i < n; i++)
        t[i] = i == p->a ? in[n] : NULL;
    cft_status st = cft__jvp_apply(p->f, in, t, vals, tan);
    if (st != CFT_OK)
        return cft__fail_outs(vals[0], p->m, out);
    for (int j = 0; j < p->m; j++)
        out[j] = cft__inst(tan[j], &vals[j]->aval);
    return CFT_OK;
}

static cft_status jacfwd_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    jac_env *e = envp;
    int m = e->f->nout - e->naux, mall = e->f->nout;
    if (e->naux) { /* the auxiliary outputs: f itself, once */
        cft_array *all[mall];
        cft_status st = cft_fn_call(e->f, in, all);
        if (st != CFT_OK)
            return cft__fail_outs(all[0], nout, out);
        for (int k = 0; k < e->naux; k++)
            out[m * e->nargs + k] = all[m + k];
    }
    for (int a = 0; a < e->nargs; a++) {
        int i = e->argnums[a];
        cft_array *bad = check_dtype(e, "cft_jacfwd", "input", i, &in[i]->aval);
        if (bad)
            return cft__fail_outs(bad, nout, out);
        partial_env *p = CFT_NEW(partial_env);
        p->f = e->f;
        p->a = i;
        p->m = m;
        cft_fn *pj = cft_fn_new(partial_jvp_cb, p, nin + 1, m);
        int in_axes[nin + 1];
        cft_array *args[nin + 1], *res[m];
        for (int k = 0; k < nin; k++)
            in_axes[k] = CFT_NOT_BATCHED, args[k] = in[k];
        in_axes[nin] = 0;
        args[nin] = basis(&in[i]->aval);
        cft_status st = cft_fn_call(basis_vmap(e, pj, in_axes), args, res);
        if (st != CFT_OK)
            return cft__fail_outs(res[0], nout, out);
        for (int j = 0; j < m; j++) { /* [basis, *out] -> [*out, *in] */
            cft_array *r = cft_moveaxis(res[j], 0, -1);
            cft_aval oav = cft__aval_drop(&r->aval, r->aval.ndim - 1);
            out[j * e->nargs + a] = reshape_joined(r, &oav, &in[i]->aval);
        }
    }
    return CFT_OK;
}

/* the sizes that choose the mode: elements of the differentiated outputs
 * and of the inputs in argnums */
static cft_status auto_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    jac_env *e = envp;
    int m = e->f->nout - e->naux;
    cft_aval av[nin > 0 ? nin : 1], oav[e->f->nout];
    for (int i = 0; i < nin; i++)
        av[i] = in[i]->aval;
    if (cft_eval_shape(e->f, av, oav) != CFT_OK)
        return cft__fail_outs(cft__fail(cft_last_error(), "%s", cft_last_error_message()), nout,
                              out);
    double nout_el = 0, nin_el = 0;
    for (int j = 0; j < m; j++)
        nout_el += (double)cft__numel(oav[j].shape, oav[j].ndim);
    for (int a = 0; a < e->nargs; a++)
        nin_el += (double)cft__numel(av[e->argnums[a]].shape, av[e->argnums[a]].ndim);
    /* reverse mode costs one pullback per output element, forward one jvp
     * per input element (JAX's advice, made automatic) */
    return nout_el <= nin_el ? jacrev_cb(envp, nin, in, nout, out)
                             : jacfwd_cb(envp, nin, in, nout, out);
}

/* jacrev, jacfwd or the automatic choice, for the public call `who` */
static cft_fn *jac_make_opt(cft_fn *f, const int *argnums, int nargnums, const cft_jac_options *o,
                            const char *who) {
    cft_fn *bad = cft__fn_check(who, f);
    if (bad)
        return bad;
    jac_env *e = env_new(f, argnums, nargnums, who);
    if (!e)
        return cft__fn_error(cft__fail(cft_last_error(), "%s", cft_last_error_message()), f->nin,
                             f->nout);
    e->holomorphic = o->flags & CFT_HOLOMORPHIC;
    e->naux = o->naux, e->chunk = o->chunk_size, e->budget = o->memory_budget;
    if (o->naux < 0 || o->naux >= f->nout || o->chunk_size < 0 || (unsigned)o->mode > CFT_JAC_FWD)
        return cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                            "%s: naux %d (the function has %d outputs), chunk_size %lld, mode %d",
                            who, o->naux, f->nout, (long long)o->chunk_size, o->mode);
    int m = f->nout - o->naux;
    if ((int64_t)m * e->nargs + o->naux > CFT_FN_MAX_ARGS)
        return cft__fn_fail(f->nin, f->nout, CFT_E_ARG, "%s: too many outputs (%d x %d)", who, m,
                            e->nargs);
    cft_fn_cb cb = o->mode == CFT_JAC_REV   ? jacrev_cb
                   : o->mode == CFT_JAC_FWD ? jacfwd_cb
                                            : auto_cb;
    return cft_fn_named(cft_fn_new(cb, e, f->nin, m * e->nargs + o->naux),
                        o->mode == CFT_JAC_REV   ? "jacrev"
                        : o->mode == CFT_JAC_FWD ? "jacfwd"
                                                 : "jacobian");
}

static cft_fn *jac_make(cft_fn *f, const int *argnums, int nargnums, unsigned flags, bool rev,
                        const char *who) {
    cft_jac_options o = {.mode = rev ? CFT_JAC_REV : CFT_JAC_FWD, .flags = flags};
    return jac_make_opt(f, argnums, nargnums, &o, who);
}

cft_fn *cft_jacobian(cft_fn *f, const int *argnums, int nargnums, const cft_jac_options *opt) {
    CFT_API("cft_jacobian");
    cft_jac_options o = {0};
    if (opt)
        o = *opt;
    return jac_make_opt(f, argnums, nargnums, &o, "cft_jacobian");
}
cft_fn *cft_jacrev_ex(cft_fn *f, const int *argnums, int nargnums, unsigned flags) {
    CFT_API("cft_jacrev_ex");
    return jac_make(f, argnums, nargnums, flags, true, "cft_jacrev");
}
cft_fn *cft_jacfwd_ex(cft_fn *f, const int *argnums, int nargnums, unsigned flags) {
    CFT_API("cft_jacfwd_ex");
    return jac_make(f, argnums, nargnums, flags, false, "cft_jacfwd");
}
cft_fn *cft_jacrev(cft_fn *f, const int *argnums, int nargnums) {
    CFT_API("cft_jacrev");
    return cft_jacrev_ex(f, argnums, nargnums, 0);
}
cft_fn *cft_jacfwd(cft_fn *f, const int *argnums, int nargnums) {
    CFT_API("cft_jacfwd");
    return cft_jacfwd_ex(f, argnums, nargnums, 0);
}
cft_fn *cft_hessian(cft_fn *f, int argnum) {
    CFT_API("cft_hessian");
    cft_fn *bad = cft__fn_check("cft_hessian", f);
    if (bad)
        return bad;
    if (argnum < -f->nin || argnum >= f->nin)
        return cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                            "cft_hessian: argnum %d out of range for a function of %d inputs",
                            argnum, f->nin);
    return jac_make(jac_make(f, &argnum, 1, 0, true, "cft_hessian"), &argnum, 1, 0, false,
                    "cft_hessian");
}

cft_fn *cft_hessian_n(cft_fn *f, const int *argnums, int nargnums, const cft_jac_options *opt) {
    CFT_API("cft_hessian_n");
    cft_fn *bad = cft__fn_check("cft_hessian_n", f);
    if (bad)
        return bad;
    cft_jac_options inner = {.mode = CFT_JAC_REV}, outer = {.mode = CFT_JAC_FWD};
    if (opt) {
        inner.chunk_size = outer.chunk_size = opt->chunk_size;
        inner.memory_budget = outer.memory_budget = opt->memory_budget;
    }
    /* jacfwd over argnums of jacrev over argnums: output (i, j) is
     * d^2 f / d in[argnums[i]] d in[argnums[j]] */
    return jac_make_opt(jac_make_opt(f, argnums, nargnums, &inner, "cft_hessian_n"), argnums,
                        nargnums, &outer, "cft_hessian_n");
}
