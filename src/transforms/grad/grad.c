/* grad.c: the reverse-mode API: vjp (with a reusable, transformable
 * pullback), grad and value_and_grad (argnums, has_aux). All of them are
 * linearize + backward (transforms.h). */
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"
#include "transforms/transforms.h"

static cft_status pullback_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    cft_lin *lin = env;
    for (int j = 0; j < nin; j++)
        if (!cft__aval_eq(&in[j]->aval, &lin->out_avals[j]))
            return cft__fail_outs(cft__fail(CFT_E_SHAPE,
                                            "pullback: cotangent %d is %s, the output is %s", j,
                                            cft__av(&in[j]->aval), cft__av(&lin->out_avals[j])),
                                  nout, out);
    cft_status st = cft__backward(lin, in, out);
    if (st != CFT_OK)
        return st;
    for (int i = 0; i < nout; i++)
        out[i] = cft__inst(out[i], &lin->in_avals[i]);
    return CFT_OK;
}

cft_status cft_vjp(cft_fn *f, cft_array *const *primals, cft_array **outs, cft_fn **pullback) {
    CFT_API("cft_vjp");
    if (!f || !primals || !outs || !pullback)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_vjp: NULL argument"));
    *pullback = NULL;
    bool diff[f->nin > 0 ? f->nin : 1];
    for (int i = 0; i < f->nin; i++) {
        if (cft_failed(primals[i]))
            return cft__fail_outs(
                primals[i] ? primals[i] : cft__fail(CFT_E_ARG, "cft_vjp: primal %d is NULL", i),
                f->nout, outs);
        diff[i] = cft_dtype_is_inexact(primals[i]->aval.dtype);
    }
    cft_lin *lin;
    cft_status st = cft__linearize(f, primals, diff, NULL, outs, &lin);
    if (st != CFT_OK)
        return st;
    *pullback = cft_fn_named(cft_fn_new(pullback_cb, lin, f->nout, f->nin), "pullback");
    return CFT_OK;
}

int cft_print_saved_residuals(cft_fn *f, cft_array *const *primals, FILE *out) {
    CFT_API("cft_print_saved_residuals");
    cft_array *outs[f ? f->nout : 1];
    cft_fn *pb;
    if (!f || cft_vjp(f, primals, outs, &pb) != CFT_OK)
        return -1;
    const cft_lin *lin = pb->env;
    char buf[96];
    fprintf(out, "%d residuals saved for the backward pass:\n", lin->nres);
    for (int r = 0; r < lin->nres; r++)
        fprintf(out, "  %-24s from %s\n", cft_aval_str(&lin->res[r]->aval, buf), lin->res_src[r]);
    return lin->nres;
}

typedef struct {
    cft_fn *f;
    int *argnums;
    int nargs;
    bool with_value, has_aux, holomorphic;
} grad_env;

static cft_status grad_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    grad_env *g = envp;
    cft_fn *f = g->f;
    bool diff[nin > 0 ? nin : 1], need[f->nout];
    memset(diff, 0, sizeof diff);
    for (int k = 0; k < g->nargs; k++) {
        int a = g->argnums[k];
        if (!cft_dtype_is_inexact(in[a]->aval.dtype))
            return cft__fail_outs(cft__fail(CFT_E_DTYPE,
                                            "cft_grad: input %d is %s; only float and complex "
                                            "inputs are differentiable",
                                            a, cft__av(&in[a]->aval)),
                                  nout, out);
        if (g->holomorphic && !cft_dtype_is_complex(in[a]->aval.dtype))
            return cft__fail_outs(cft__fail(CFT_E_DTYPE,
                                            "cft_grad: holomorphic differentiation needs complex "
                                            "inputs; input %d is %s",
                                            a, cft__av(&in[a]->aval)),
                                  nout, out);
        diff[a] = true;
    }
    for (int j = 0; j < f->nout; j++)
        need[j] = j == 0;
    cft_array *vals[f->nout];
    cft_lin *lin;
    cft_status st = cft__linearize(f, in, diff, need, vals, &lin);
    if (st != CFT_OK)
        return cft__fail_outs(vals[0], nout, out);
    const cft_aval *l = &vals[0]->aval;
    bool ok_dtype = g->holomorphic ? cft_dtype_is_complex(l->dtype) : cft_dtype_is_float(l->dtype);
    if (l->ndim != 0 || !ok_dtype)
        return cft__fail_outs(cft__fail(CFT_E_SHAPE,
                                        g->holomorphic
                                            ? "cft_grad: a holomorphic function must return a "
                                              "complex scalar (first output), got %s"
                                            : "cft_grad: the function must return a real float "
                                              "scalar (first output), got %s; for complex outputs "
                                              "use CFT_HOLOMORPHIC or cft_vjp",
                                        cft__av(l)),
                              nout, out);
    cft_array *cts[f->nout], *ct_in[nin > 0 ? nin : 1];
    cts[0] = cft_ones(l->dtype, NULL, 0);
    for (int j = 1; j < f->nout; j++)
        cts[j] = NULL;
    st = cft__backward(lin, cts, ct_in);
    if (st != CFT_OK)
        return cft__fail_outs(ct_in[0], nout, out);
    int k = 0;
    if (g->with_value)
        for (int j = 0; j < (g->has_aux ? f->nout : 1); j++)
            out[k++] = vals[j];
    for (int a = 0; a < g->nargs; a++) {
        int i = g->argnums[a];
        out[k++] = cft__inst(ct_in[i], &in[i]->aval);
    }
    return CFT_OK;
}

static cft_fn *make_grad(cft_fn *f, const int *argnums, int nargs, bool with_value, bool has_aux,
                         bool holomorphic) {
    static const int first[1] = {0};
    const char *who = with_value ? "cft_value_and_grad" : "cft_grad";
    cft_fn *bad = cft__fn_check(who, f);
    if (bad)
        return bad;
    if (nargs < 0 || nargs > f->nin || (nargs > 0 && !argnums))
        return cft__fn_fail(f->nin, 1, CFT_E_ARG, "%s: %d argnums for a function of %d inputs%s",
                            who, nargs, f->nin, nargs > 0 && !argnums ? " (argnums is NULL)" : "");
    if (!argnums || nargs <= 0) {
        argnums = first;
        nargs = 1;
    }
    if (!has_aux && f->nout != 1)
        return cft__fn_fail(f->nin, nargs, CFT_E_ARG,
                            "%s: the function has %d outputs; use "
                            "cft_value_and_grad with has_aux",
                            who, f->nout);
    grad_env *g = CFT_NEW(grad_env);
    g->f = f;
    g->argnums = CFT_NEWN(int, nargs);
    for (int k = 0; k < nargs; k++) {
        int a = argnums[k] < 0 ? argnums[k] + f->nin : argnums[k];
        if (a < 0 || a >= f->nin)
            return cft__fn_fail(f->nin, nargs, CFT_E_ARG,
                                "%s: argnum %d out of range for a function of %d inputs", who,
                                argnums[k], f->nin);
        for (int j = 0; j < k; j++)
            if (g->argnums[j] == a)
                return cft__fn_fail(f->nin, nargs, CFT_E_ARG, "%s: argnum %d repeated", who,
                                    argnums[k]);
        g->argnums[k] = a;
    }
    g->nargs = nargs;
    g->with_value = with_value;
    g->has_aux = has_aux;
    g->holomorphic = holomorphic;
    int nout = nargs + (with_value ? (has_aux ? f->nout : 1) : 0);
    return cft_fn_named(cft_fn_new(grad_cb, g, f->nin, nout),
                        with_value ? "value_and_grad" : "grad");
}

cft_fn *cft_grad(cft_fn *f, const int *argnums, int nargnums) {
    CFT_API("cft_grad");
    return make_grad(f, argnums, nargnums, false, false, false);
}
cft_fn *cft_grad_ex(cft_fn *f, const int *argnums, int nargnums, unsigned flags) {
    CFT_API("cft_grad_ex");
    return make_grad(f, argnums, nargnums, false, false, flags & CFT_HOLOMORPHIC);
}
cft_fn *cft_value_and_grad(cft_fn *f, const int *argnums, int nargnums, bool has_aux) {
    CFT_API("cft_value_and_grad");
    return make_grad(f, argnums, nargnums, true, has_aux, false);
}

/* value_and_grad(has_aux) reordered: (value, aux..., grads...) -> (grads..., aux...) */
typedef struct {
    cft_fn *vag;
    int naux, ngrad;
} aux_env;

static cft_status grad_aux_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    aux_env *a = env;
    (void)nin, (void)nout;
    cft_array **all = CFT_NEWN(cft_array *, 1 + a->naux + a->ngrad + 1);
    if (!all)
        return cft__fail_outs(cft__oom(), nout, out);
    cft_status st = cft_fn_call(a->vag, in, all);
    for (int k = 0; k < a->ngrad; k++)
        out[k] = all[1 + a->naux + k];
    for (int k = 0; k < a->naux; k++)
        out[a->ngrad + k] = all[1 + k];
    return st;
}

cft_fn *cft_grad_with_aux(cft_fn *f, const int *argnums, int nargnums) {
    CFT_API("cft_grad_with_aux");
    cft_fn *vag = make_grad(f, argnums, nargnums, true, true, false);
    if (cft_fn_failed(vag))
        return vag;
    aux_env *a = CFT_NEW(aux_env);
    if (!a)
        return cft__fn_error(cft__oom(), f->nin, 1);
    a->vag = vag;
    a->naux = f->nout - 1;
    a->ngrad = vag->nout - f->nout;
    return cft_fn_named(cft_fn_new(grad_aux_cb, a, f->nin, a->ngrad + a->naux), "grad_with_aux");
}

/* vjp with has_aux: f's last naux outputs are carried, not differentiated;
 * the pullback takes cotangents of the others (zeros go in for the aux) */
typedef struct {
    cft_fn *pb;
    int m, naux;
    cft_aval *aux;
} aux_pb;

static cft_status aux_pb_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    aux_pb *a = env;
    (void)nin;
    cft_array **cts = CFT_NEWN(cft_array *, a->m + a->naux + 1);
    if (!cts)
        return cft__fail_outs(cft__oom(), nout, out);
    for (int j = 0; j < a->m; j++)
        cts[j] = in[j];
    for (int j = 0; j < a->naux; j++)
        cts[a->m + j] = cft_zeros(a->aux[j].dtype, a->aux[j].shape, a->aux[j].ndim);
    return cft_fn_call(a->pb, cts, out);
}

cft_status cft_vjp_with_aux(cft_fn *f, int naux, cft_array *const *primals, cft_array **outs,
                            cft_fn **pullback) {
    CFT_API("cft_vjp_with_aux");
    if (!f || cft_fn_failed(f) || naux < 0 || naux >= f->nout || !pullback)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_vjp_with_aux: a function with more outputs than its "
                                       "%d aux outputs",
                                       naux));
    cft_fn *pb = NULL;
    cft_status st = cft_vjp(f, primals, outs, &pb);
    if (st != CFT_OK) {
        *pullback = pb;
        return st;
    }
    aux_pb *a = CFT_NEW(aux_pb);
    if (!a || !(a->aux = CFT_NEWN(cft_aval, naux + 1)))
        return cft__set_last(cft__oom());
    a->pb = pb, a->m = f->nout - naux, a->naux = naux;
    for (int j = 0; j < naux; j++)
        a->aux[j] = outs[a->m + j]->aval;
    *pullback = cft_fn_named(cft_fn_new(aux_pb_cb, a, a->m, f->nin), "pullback");
    return CFT_OK;
}
