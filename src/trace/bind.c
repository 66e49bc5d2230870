/* bind.c: the interpreter stack and cft__bind, the one path every op takes
 * (see trace.h). Errors are absorbing: bind returns its first errored input
 * unchanged. A tracer used after its transform returned is reported, not
 * dereferenced. Shape errors raised under transforms name the stack. */
#include <stdio.h>
#include <string.h>

#include "array/dim.h"
#include "core/error.h"
#include "core/profile.h"
#include "core/mem.h"
#include "trace/trace.h"

#define MAX_DEPTH 64

static _Thread_local cft_trace *stack[MAX_DEPTH];
static _Thread_local int depth;

cft_trace *cft__trace_push(const cft_trace_vt *vt, void *state) {
    if (depth >= MAX_DEPTH)
        return NULL;
    cft_trace *t = CFT_NEW(cft_trace);
    if (!t)
        return NULL;
    t->vt = vt;
    t->level = depth + 1;
    t->active = true;
    t->state = state;
    stack[depth++] = t;
    return t;
}

void cft__trace_pop(cft_trace *t) {
    if (depth > 0 && stack[depth - 1] == t) {
        t->active = false;
        stack[--depth] = NULL;
    }
}

int cft__trace_depth(void) {
    return depth;
}

cft_array *cft__tracer(cft_trace *t, const cft_aval *aval) {
    cft_array *x = CFT_NEW(cft_array);
    if (!x)
        return cft__oom();
    x->kind = CFT_K_TRACER;
    x->trace = t;
    x->aval = *aval;
    return x;
}

void cft__param_set(cft_params *p, int k, const int64_t *v, int n) {
    p->n[k] = (int8_t)n;
    for (int i = 0; i < n && i < CFT_PARAM_LEN; i++)
        p->v[k][i] = v[i];
}
void cft__param_set_int(cft_params *p, int k, const int *v, int n) {
    p->n[k] = (int8_t)n;
    for (int i = 0; i < n && i < CFT_PARAM_LEN; i++)
        p->v[k][i] = v[i];
}
void cft__param_set1(cft_params *p, int k, int64_t v) {
    p->n[k] = 1;
    p->v[k][0] = v;
}

#define FN_STACK 64
static _Thread_local const char *fn_stack[FN_STACK];
static _Thread_local int fn_depth;

void cft__fn_push(const char *name) {
    if (fn_depth < FN_STACK)
        fn_stack[fn_depth] = name;
    fn_depth++;
}
void cft__fn_pop(void) {
    fn_depth--;
}

/* the names transforms give the functions they make */
static bool is_transform(const char *name) {
    static const char *const t[] = {
        "grad",       "value_and_grad", "grad_with_aux",   "jvp", "vmap",
        "jacrev",     "jacfwd",         "hessian",         "jit", "pullback",
        "linearized", "checkpoint",     "linear_transpose"};
    for (size_t i = 0; name && i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(name, t[i]))
            return true;
    return false;
}

/* Say where an error made while tracing happened, in the user's terms: the
 * function being traced and the transforms (and functions) around it,
 * innermost first: " (while tracing 'loss' under grad under vmap)". */
static cft_array *annotate(cft_array *e) {
    if (depth == 0 || e->err_code == CFT_E_NOMEM || strstr(e->err_msg, " (while tracing "))
        return e;
    const char *const *fns = fn_stack;
    int n = fn_depth < FN_STACK ? fn_depth : FN_STACK, k = n - 1;
    while (k >= 0 && is_transform(fns[k])) /* the innermost user function */
        k--;
    if (k < 0)
        return e;
    char buf[600];
    int at = snprintf(buf, sizeof buf, " (while tracing '%s'", fns[k] ? fns[k] : "fn");
    for (int i = n - 1; i >= 0 && at < 500; i--) {
        if (i == k)
            continue;
        if (i > k) /* a transform applied inside the function: skip */
            continue;
        at += snprintf(buf + at, sizeof buf - (size_t)at,
                       is_transform(fns[i]) ? " under %s" : " in '%s'", fns[i] ? fns[i] : "fn");
    }
    snprintf(buf + at, sizeof buf - (size_t)at, ")");
    return cft__fail(e->err_code, "%s%s", e->err_msg, buf);
}

cft_array *cft__annotate(cft_array *e) {
    return e && cft_failed(e) ? annotate(e) : e;
}

cft_array *cft__abstract_eval(const cft_prim *p, const cft_params *par, int nin, const cft_aval *in,
                              cft_aval *out) {
    if (p->nin >= 0 && nin != p->nin)
        return cft__fail(CFT_E_ARG, "%s: expected %d inputs, got %d", p->name, p->nin, nin);
    int nout = cft__nout(p, par, nin);
    memset(out, 0, sizeof(cft_aval) * (size_t)nout);
    cft_array *e = p->shape(in, nin, par, out);
    if (e)
        return e;
    /* a dim computed with C arithmetic from a symbolic one is not a dim */
    for (int j = 0; j < nout; j++)
        for (int d = 0; d < out[j].ndim; d++)
            if (!cft_dim_valid(out[j].shape[d])) {
                char a[96], b[96];
                return cft__fail(CFT_E_SHAPE,
                                 "%s: cannot compute the output shape from %s%s%s: dim %d of "
                                 "output %d is not a size (%lld); is an input dim symbolic in "
                                 "a way this rule cannot express?",
                                 p->name, nin ? cft_aval_str(&in[0], a) : "no inputs",
                                 nin > 1 ? ", " : "", nin > 1 ? cft_aval_str(&in[1], b) : "", d, j,
                                 (long long)out[j].shape[d]);
            }
    for (int j = 0; j < nout; j++) { /* sizes that overflow are refused here, by name */
        e = cft__check_size(p->name, out[j].dtype, out[j].shape, out[j].ndim, NULL, NULL);
        if (e)
            return e;
    }
    return NULL;
}

/* True if a parameter holds a symbolic dim (such equations are staged even
 * when their inputs are concrete). */
static bool params_symbolic(const cft_params *par) {
    for (int k = 0; k < CFT_NPARAM; k++)
        for (int i = 0; i < par->n[k] && i < CFT_PARAM_LEN; i++)
            if (cft__dim_maybe_sym(par->v[k][i]) && cft_dim_is_symbolic(par->v[k][i]))
                return true;
    return false;
}

static cft_trace *innermost_stage(void) {
    for (int i = depth - 1; i >= 0; i--)
        if (cft__is_stage_trace(stack[i]))
            return stack[i];
    return NULL;
}

static cft_array *fail_all(cft_array *e, int nout, cft_array **out) {
    for (int i = 0; i < nout; i++)
        out[i] = e;
    return e;
}

cft_array *cft__unconj(const cft_prim *p, cft_array *x) {
    return x->kind == CFT_K_CONCRETE && x->conj && !(p->flags & CFT_PRIM_CONJ_AWARE)
               ? cft__contig(x)
               : x;
}

cft_array *cft__run_impl(const cft_prim *p, const cft_params *par, int nin, cft_array *const *in,
                         int nout, const cft_aval *out_avals, cft_array **out) {
    if (out_avals && cft__dev_involved(nin, in))
        return cft__dev_run(p, par, nin, in, nout, out_avals, out);
    bool conj = false;
    for (int i = 0; i < nin; i++)
        conj |= in[i]->kind == CFT_K_CONCRETE && in[i]->conj;
    if (conj && !(p->flags & CFT_PRIM_CONJ_AWARE)) { /* resolve pending conjugates */
        cft_array *res[nin];
        for (int i = 0; i < nin; i++) {
            res[i] = cft__unconj(p, in[i]);
            if (cft_failed(res[i]))
                return res[i];
        }
        return cft__run_impl(p, par, nin, res, nout, out_avals, out);
    }
    /* halves are widened for impls that compute; a view primitive
     * (reshape, transpose, broadcast, squeeze, expand_dims) only moves
     * strides, whatever the element, and runs on them as they are (widened,
     * it copied its input twice: 0.3 ms a reshape of a CNN's activations) */
    bool half = false;
    for (int i = 0; i < nin && !(p->flags & (CFT_PRIM_VIEW | CFT_PRIM_VIEW_CONTIG)); i++)
        half |= cft_dtype_is_half(in[i]->aval.dtype);
    for (int j = 0; j < nout && out_avals && !(p->flags & (CFT_PRIM_VIEW | CFT_PRIM_VIEW_CONTIG));
         j++)
        half |= cft_dtype_is_half(out_avals[j].dtype);
    if (!half) {
        if (!cft__prof() || cft__prof_in_plan)
            return p->impl(in, nin, par, out);
        double t0 = cft__prof_now(); /* an eager primitive (an FFT, a LAPACK call...) */
        cft_array *e = p->impl(in, nin, par, out);
        char args[256];
        size_t a = (size_t)snprintf(args, sizeof args, "\"inputs\": \"");
        for (int i = 0; i < nin && a + 100 < sizeof args; i++) {
            char av[96];
            a += (size_t)snprintf(args + a, sizeof args - a, "%s%s", i ? " " : "",
                                  cft_aval_str(&in[i]->aval, av));
        }
        snprintf(args + a, sizeof args - a, "\"");
        cft__prof_event(p->name, "op", t0, args);
        return e;
    }
    if (p->impl_low && out_avals && p->impl_low(in, nin, par, out_avals, out))
        return NULL;
    cft_array *wide[nin > 0 ? nin : 1];
    for (int i = 0; i < nin; i++) {
        cft_array *x = in[i];
        if (cft_dtype_is_half(x->aval.dtype)) {
            cft_array *c = cft__contig(x), *w = cft__alloc(CFT_F32, x->aval.shape, x->aval.ndim);
            if (cft_failed(c) || cft_failed(w))
                return cft_failed(c) ? c : w;
            cft__cast(cft__ptr(c), c->aval.dtype, w->data, CFT_F32,
                      cft__numel(x->aval.shape, x->aval.ndim));
            x = w;
        }
        wide[i] = x;
    }
    cft_array *e = p->impl(wide, nin, par, out);
    if (e)
        return e;
    for (int j = 0; j < nout && out_avals; j++) { /* round on store */
        cft_dtype want = out_avals[j].dtype;
        if (out[j]->aval.dtype == want)
            continue;
        cft_array *c = cft__contig(out[j]), *h = cft__alloc(want, c->aval.shape, c->aval.ndim);
        if (cft_failed(c) || cft_failed(h))
            return cft_failed(c) ? c : h;
        cft__cast(cft__ptr(c), c->aval.dtype, h->data, want,
                  cft__numel(c->aval.shape, c->aval.ndim));
        out[j] = h;
    }
    return NULL;
}

/* a random draw's key, as the traces on the stack want it (outermost
 * first, each seeing what the ones below made of it) */
static cft_array *random_key(cft_array *key) {
    for (int i = 0; i < depth; i++) {
        cft_trace *t = stack[i];
        if (t->active && t->vt->random_key && !cft_failed(key))
            key = t->vt->random_key(t, key);
    }
    return key;
}

cft_array *cft__bind(const cft_prim *p, const cft_params *par, int nin, cft_array *const *in,
                     int nout, cft_array **out) {
    cft_params zero;
    if (!par) {
        memset(&zero, 0, sizeof zero);
        par = &zero;
    }
    if ((p->flags & CFT_PRIM_RANDOM) && nin > 0 && depth > 0 && in[0] &&
        !cft_failed(in[0])) { /* vmap's randomness policy may batch the key */
        cft_array *k = random_key(in[0]);
        if (cft_failed(k))
            return fail_all(k, nout, out);
        if (k != in[0]) {
            cft_array *in2[nin];
            in2[0] = k;
            for (int i = 1; i < nin; i++)
                in2[i] = in[i];
            return cft__bind(p, par, nin, in2, nout, out);
        }
    }
    cft_trace *top = NULL;
    for (int i = 0; i < nin; i++) {
        if (!in[i])
            return fail_all(cft__fail(CFT_E_ARG, "%s: input %d is NULL", p->name, i), nout, out);
        if (in[i]->kind == CFT_K_ERROR)
            return fail_all(in[i], nout, out);
        if (in[i]->kind == CFT_K_TRACER) {
            if (!in[i]->trace->active)
                return fail_all(cft__fail(CFT_E_TRACE,
                                          "%s: input %d is a tracer of a %s transform that has "
                                          "already returned (a leaked tracer)",
                                          p->name, i, in[i]->trace->vt->name),
                                nout, out);
            if (!top || in[i]->trace->level > top->level)
                top = in[i]->trace;
        }
    }
    cft_array *e;
    cft_aval avs[nin > 0 ? nin : 1], oav[nout > 0 ? nout : 1];
    if (!top) {
        for (int i = 0; i < nin; i++)
            avs[i] = in[i]->aval;
        e = cft__abstract_eval(p, par, nin, avs, oav);
        if (e)
            return fail_all(annotate(e), nout, out);
        bool sym = params_symbolic(par);
        for (int i = 0; i < nout && !sym; i++)
            sym = cft__shape_symbolic(oav[i].shape, oav[i].ndim);
        /* concrete inputs, symbolic result (a constant broadcast to [B,64],
         * iota over B): staged into the innermost staging trace */
        if (sym)
            top = innermost_stage();
        if (sym && !top) {
            char a[96];
            return fail_all(cft__fail(CFT_E_SHAPE,
                                      "%s: symbolic shape %s outside a trace (symbolic dims "
                                      "exist only while a function is traced)",
                                      p->name, nout ? cft_aval_str(&oav[0], a) : "[]"),
                            nout, out);
        }
    }
    if (!top) {
        e = cft__run_impl(p, par, nin, in, nout, oav, out);
        if (e)
            return fail_all(annotate(e), nout, out);
        for (int i = 0; i < nout; i++)
            if (cft_failed(out[i]))
                return fail_all(out[i], nout, out);
        return NULL;
    }
    cft_array *lifted[nin > 0 ? nin : 1];
    for (int i = 0; i < nin; i++) {
        lifted[i] = cft__is_tracer_of(in[i], top) ? in[i] : top->vt->lift(top, in[i]);
        if (cft_failed(lifted[i]))
            return fail_all(lifted[i], nout, out);
    }
    e = top->vt->process(top, p, par, nin, lifted, out);
    if (e)
        return fail_all(annotate(e), nout, out);
    for (int i = 0; i < nout; i++)
        if (cft_failed(out[i]))
            return fail_all(out[i], nout, out);
    return NULL;
}

cft_array *cft__bind1(const cft_prim *p, const cft_params *par, int nin, cft_array *const *in) {
    cft_array *out[1];
    cft_array *e = cft__bind(p, par, nin, in, 1, out);
    return e ? e : out[0];
}
