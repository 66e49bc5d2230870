/* optim_step.c: an optimizer step over all parameters as one jitted call
 * (torch's foreach / fused optimizers). The update equations are those of
 * cft_optim_update (optim.c), traced once into a function of (params,
 * grads, state, step, lr) and compiled by cft_jit, so every parameter's
 * update is a few fused kernels in one call instead of a dozen eager ops
 * per parameter; with donation the new parameters and state are written
 * into the old ones' buffers. */
#include <string.h>

#include "core/error.h"
#include "trace/fn.h"
#include "nn/nn_internal.h"

struct cft_optim_step {
    cft_optim opt;
    int n, m;            /* parameters; state buffers (nb * n) */
    const char **names;  /* the parameters' names, in order */
    const char **snames; /* the state's names, as cft_optim_init makes them */
    cft_aval *avals;     /* the parameters' dtypes and shapes */
    cft_fn *fn, *jitted; /* (params[n], grads[n], state[m], step, lr) -> (params, state) */
    cft_array *err;      /* set when the step could not be made */
};

/* the traced body: the trees rebuilt from the flat inputs, cft_optim_update */
static cft_status step_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    const cft_optim_step *s = env;
    int n = s->n, m = s->m;
    cft_tree *p = cft_tree_from(s->names, in, n), *g = cft_tree_from(s->names, in + n, n);
    cft_tree *st = cft_tree_from(s->snames, in + 2 * n, m);
    cft_tree *np = NULL, *ns = NULL;
    cft_status rc = cft_optim_update(&s->opt, g, st, p, in[2 * n + m], in[2 * n + m + 1], &np, &ns);
    if (rc != CFT_OK)
        return rc;
    for (int i = 0; i < n; i++)
        out[i] = np->xs[i];
    for (int j = 0; j < m; j++) {
        int k = cft__tree_find(ns, s->snames[j]);
        out[n + j] = k >= 0 ? ns->xs[k]
                            : cft__fail(CFT_E_ARG, "cft_optim_step: no state '%s'", s->snames[j]);
        if (cft_failed(out[n + j]))
            return cft__set_last(out[n + j]);
    }
    return CFT_OK;
}

static cft_optim_step *step_err(cft_array *e) {
    cft_optim_step *s = CFT_NEW(cft_optim_step);
    s->err = e;
    cft__set_last(e);
    return s;
}

cft_optim_step *cft_optim_step_new(const cft_optim *o, const cft_tree *params, unsigned flags) {
    CFT_API("cft_optim_step_new");
    const char *op = "cft_optim_step_new";
    if (!params)
        return step_err(cft__fail(CFT_E_ARG, "%s: NULL params", op));
    if (flags & ~(CFT_OPTIM_DONATE_PARAMS | CFT_OPTIM_DONATE_STATE))
        return step_err(cft__fail(CFT_E_ARG, "%s: unknown flags 0x%x", op, flags));
    cft_tree *st = cft_optim_init(o, params); /* checks o and params */
    if (st->err)
        return step_err(st->err);
    cft_optim_step *s = CFT_NEW(cft_optim_step);
    s->opt = *o;
    s->n = params->n;
    s->m = st->n;
    s->names = CFT_NEWN(const char *, s->n + 1);
    s->snames = CFT_NEWN(const char *, s->m + 1);
    s->avals = CFT_NEWN(cft_aval, s->n + 1);
    for (int i = 0; i < s->n; i++) {
        s->names[i] = params->names[i];
        cft_array *p = params->xs[i];
        if (!cft_dtype_is_float(cft_array_dtype(p)))
            return step_err(cft__fail(CFT_E_DTYPE, "%s: parameter '%s' is %s, not float", op,
                                      params->names[i], cft__nn_av(p)));
        s->avals[i] = cft_array_aval(p);
    }
    for (int j = 0; j < s->m; j++)
        s->snames[j] = st->names[j];
    if (s->n == 0) /* nothing to update: apply gives empty trees, there is no function */
        return s;
    int nin = 2 * s->n + s->m + 2, nout = s->n + s->m;
    s->fn = cft_fn_new_named(step_body, s, nin, nout, "optim_step");
    int *donate = CFT_NEWN(int, s->n + s->m + 1), nd = 0;
    if (flags & CFT_OPTIM_DONATE_PARAMS)
        for (int i = 0; i < s->n; i++)
            donate[nd++] = i;
    if (flags & CFT_OPTIM_DONATE_STATE)
        for (int j = 0; j < s->m; j++)
            donate[nd++] = 2 * s->n + j;
    s->jitted = nd ? cft_jit_donate(s->fn, donate, nd) : cft_jit(s->fn);
    return s;
}

cft_fn *cft_optim_step_fn(const cft_optim_step *s) {
    CFT_API("cft_optim_step_fn");
    if (!s)
        return cft__fn_error(cft__fail(CFT_E_ARG, "cft_optim_step_fn: NULL step"), 0, 0);
    if (s->err)
        return cft__fn_error(s->err, 0, 0);
    if (!s->jitted)
        return cft__fn_error(
            cft__fail(CFT_E_ARG, "cft_optim_step_fn: the step has no parameters, so no function"),
            2, 0);
    return s->jitted;
}

cft_array *cft_optim_step_error(const cft_optim_step *s) {
    if (!s)
        return cft__fail(CFT_E_ARG, "cft_optim_step_error: NULL step");
    return s->err;
}

/* the entry of t named `name` whose aval is `want` (NULL: any), or an error */
static cft_array *pick(const char *op, const char *what, const cft_tree *t, const char *name,
                       const cft_aval *want) {
    int k = cft__tree_find(t, name);
    if (k < 0)
        return cft__fail(CFT_E_ARG, "%s: %s has no '%s'", op, what, name);
    cft_array *x = t->xs[k];
    if (cft_failed(x))
        return x;
    if (want) {
        cft_aval a = cft_array_aval(x);
        bool same = a.dtype == want->dtype && a.ndim == want->ndim &&
                    !memcmp(a.shape, want->shape, sizeof(int64_t) * (size_t)a.ndim);
        if (!same)
            return cft__fail(CFT_E_SHAPE, "%s: %s '%s' is %s; the step was made for another shape",
                             op, what, name, cft__nn_av(x));
    }
    return x;
}

static cft_status fail_step(cft_array *e, cft_tree **np, cft_tree **ns) {
    if (np)
        *np = cft__tree_err(e);
    if (ns)
        *ns = cft__tree_err(e);
    return cft__set_last(e);
}

cft_status cft_optim_step_apply(cft_optim_step *s, const cft_tree *grads, const cft_tree *state,
                                const cft_tree *params, cft_array *step, cft_array *lr,
                                cft_tree **new_params, cft_tree **new_state) {
    CFT_API("cft_optim_step_apply");
    const char *op = "cft_optim_step_apply";
    cft_array *e = NULL;
    if (!s || !grads || !state || !params || !step || !new_params || !new_state)
        e = cft__fail(CFT_E_ARG, "%s: NULL argument", op);
    else if (s->err)
        e = s->err;
    else if (grads->err || state->err || params->err)
        e = grads->err ? grads->err : state->err ? state->err : params->err;
    else if (params->n != s->n)
        e = cft__fail(CFT_E_ARG, "%s: %d parameters; the step was made for %d", op, params->n,
                      s->n);
    else if (cft_failed(step) || (lr && cft_failed(lr)))
        e = cft_failed(step) ? step : lr;
    else if (cft_array_ndim(step) != 0 || (lr && cft_array_ndim(lr) != 0))
        e = cft__fail(CFT_E_SHAPE, "%s: step %s and lr %s must be scalars", op, cft__nn_av(step),
                      lr ? cft__nn_av(lr) : "-");
    if (e)
        return fail_step(e, new_params, new_state);
    int n = s->n, m = s->m;
    if (n == 0) { /* nothing to update (a ZeRO rank that owns no parameter) */
        *new_params = cft_tree_new();
        *new_state = cft_tree_new();
        return CFT_OK;
    }
    cft_array **in = CFT_NEWN(cft_array *, 2 * n + m + 2);
    cft_array **out = CFT_NEWN(cft_array *, n + m + 1);
    for (int i = 0; i < n && !e; i++) {
        in[i] = pick(op, "params", params, s->names[i], &s->avals[i]);
        in[n + i] = cft_failed(in[i]) ? in[i] : pick(op, "grads", grads, s->names[i], NULL);
        if (cft_failed(in[n + i]))
            e = in[n + i];
    }
    for (int j = 0; j < m && !e; j++) {
        in[2 * n + j] = pick(op, "state", state, s->snames[j], NULL);
        if (cft_failed(in[2 * n + j]))
            e = in[2 * n + j];
    }
    if (e)
        return fail_step(e, new_params, new_state);
    in[2 * n + m] = step;
    in[2 * n + m + 1] = lr ? lr : cft_scalar(s->opt.lr, CFT_F64);
    cft_status rc = cft_fn_call(s->jitted, in, out);
    if (rc != CFT_OK) { /* outputs are error arrays then (there may be none) */
        cft_array *err = NULL;
        for (int k = 0; k < n + m && !err; k++)
            err = cft_failed(out[k]) ? out[k] : NULL;
        return fail_step(err ? err : cft__fail(rc, "%s: the jitted step failed", op), new_params,
                         new_state);
    }
    *new_params = cft_tree_from(s->names, out, n);
    *new_state = cft_tree_from(s->snames, out + n, m);
    return CFT_OK;
}
