/* jvp.c: forward mode. A jvp tracer carries a primal and a tangent (NULL is
 * a symbolic zero, so derivatives of inputs that are not perturbed cost
 * nothing). Processing a primitive binds it on the primals and asks its jvp
 * rule for the output tangents; rules use the public ops, so whatever
 * trace sits below (staging, vmap, another jvp) sees ordinary ops. */
#include "core/error.h"
#include "prims/rules.h"
#include "trace/fn.h"
#include "transforms/transforms.h"

static cft_array *jvp_tracer(cft_trace *t, cft_array *primal, cft_array *tangent) {
    if (cft_failed(primal))
        return primal;
    if (tangent && cft_failed(tangent))
        return tangent;
    cft_array *x = cft__tracer(t, &primal->aval);
    if (cft_failed(x))
        return x;
    x->u.jvp.primal = primal;
    x->u.jvp.tangent = tangent;
    return x;
}

static cft_array *jvp_lift(cft_trace *t, cft_array *x) {
    return jvp_tracer(t, x, NULL);
}

static cft_array *jvp_process(cft_trace *t, const cft_prim *p, const cft_params *par, int nin,
                              cft_array *const *in, cft_array **out) {
    int nout = cft__nout(p, par, nin);
    cft_array *x[nin > 0 ? nin : 1], *dx[nin > 0 ? nin : 1], *y[nout], *dy[nout];
    bool any = false;
    for (int i = 0; i < nin; i++) {
        x[i] = in[i]->u.jvp.primal;
        dx[i] = in[i]->u.jvp.tangent;
        any |= dx[i] != NULL;
    }
    cft_array *e = cft__bind(p, par, nin, x, nout, y);
    if (e)
        return e;
    for (int i = 0; i < nout; i++)
        dy[i] = NULL;
    if (any && !(p->flags & CFT_PRIM_NONDIFF)) {
        if (!p->jvp)
            return cft__fail(CFT_E_TRACE, "%s: no jvp rule", p->name);
        e = p->jvp(x, y, dx, nin, par, dy);
        if (e)
            return e;
    }
    for (int i = 0; i < nout; i++) {
        out[i] = jvp_tracer(t, y[i], dy[i]);
        if (cft_failed(out[i]))
            return out[i];
    }
    return NULL;
}

static const cft_trace_vt jvp_vt = {"jvp", jvp_process, jvp_lift, NULL};

cft_status cft__jvp_apply(cft_fn *f, cft_array *const *primals, cft_array *const *tangents,
                          cft_array **outs, cft_array **tangents_out) {
    cft_trace *t = cft__trace_push(&jvp_vt, NULL);
    if (!t)
        return cft__fail_outs(cft__fail(CFT_E_TRACE, "jvp: trace stack full"), f->nout, outs);
    cft_array *in[f->nin > 0 ? f->nin : 1], *res[f->nout];
    for (int i = 0; i < f->nin; i++)
        in[i] = jvp_tracer(t, primals[i], tangents ? tangents[i] : NULL);
    cft_status st = cft__fn_apply(f, in, res);
    cft__trace_pop(t);
    if (st != CFT_OK) {
        for (int j = 0; j < f->nout; j++)
            outs[j] = tangents_out[j] = res[j];
        return st;
    }
    for (int j = 0; j < f->nout; j++) {
        if (cft__is_tracer_of(res[j], t)) {
            outs[j] = res[j]->u.jvp.primal;
            tangents_out[j] = res[j]->u.jvp.tangent; /* NULL: zero */
        } else {
            outs[j] = res[j];
            tangents_out[j] = NULL;
        }
    }
    return CFT_OK;
}

static cft_status jvp_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    cft_fn *f = env;
    (void)nin;
    int n = f->nin, m = f->nout;
    for (int i = 0; i < n; i++)
        if (!cft__aval_eq(&in[i]->aval, &in[n + i]->aval))
            return cft__fail_outs(cft__fail(CFT_E_SHAPE,
                                            "cft_jvp: tangent %d is %s, its primal is %s", i,
                                            cft__av(&in[n + i]->aval), cft__av(&in[i]->aval)),
                                  nout, out);
    cft_status st = cft__jvp_apply(f, in, in + n, out, out + m);
    if (st != CFT_OK)
        return st;
    for (int j = 0; j < m; j++)
        out[m + j] = cft__inst(out[m + j], &out[j]->aval);
    return CFT_OK;
}

cft_fn *cft_jvp(cft_fn *f) {
    CFT_API("cft_jvp");
    cft_fn *bad = cft__fn_check("cft_jvp", f);
    if (bad)
        return bad;
    if (2 * f->nin > CFT_FN_MAX_ARGS || 2 * f->nout > CFT_FN_MAX_ARGS)
        return cft__fn_fail(f->nin, f->nout, CFT_E_ARG, "cft_jvp: too many inputs (%d)", f->nin);
    return cft_fn_named(cft_fn_new(jvp_cb, f, 2 * f->nin, 2 * f->nout), "jvp");
}

/* jvp with has_aux: (primals, tangents) -> (outputs, aux..., output tangents) */
typedef struct {
    cft_fn *jvp;
    int m, naux;
} jvp_aux_env;

static cft_status jvp_aux_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    jvp_aux_env *a = env;
    (void)nin;
    int n = a->m + a->naux;
    cft_array **all = CFT_NEWN(cft_array *, 2 * n + 1);
    if (!all)
        return cft__fail_outs(cft__oom(), nout, out);
    cft_status st = cft_fn_call(a->jvp, in, all);
    for (int j = 0; j < n; j++) /* outputs and aux */
        out[j] = all[j];
    for (int j = 0; j < a->m; j++) /* tangents of the outputs only */
        out[n + j] = all[n + j];
    return st;
}

cft_fn *cft_jvp_with_aux(cft_fn *f, int naux) {
    CFT_API("cft_jvp_with_aux");
    cft_fn *bad = cft__fn_check("cft_jvp_with_aux", f);
    if (bad)
        return bad;
    if (naux < 0 || naux >= f->nout)
        return cft__fn_fail(2 * f->nin, f->nout, CFT_E_ARG,
                            "cft_jvp_with_aux: %d aux outputs of a function of %d outputs", naux,
                            f->nout);
    jvp_aux_env *a = CFT_NEW(jvp_aux_env);
    if (!a)
        return cft__fn_error(cft__oom(), 2 * f->nin, f->nout);
    a->jvp = cft_jvp(f), a->m = f->nout - naux, a->naux = naux;
    return cft_fn_named(cft_fn_new(jvp_aux_cb, a, 2 * f->nin, f->nout + a->m), "jvp");
}
