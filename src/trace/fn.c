/* fn.c: functions as values. At top level (no transform active) a call is
 * staged: the function is traced once per distinct input signature into an
 * IR, which is cached on the function and interpreted on every later call,
 * so a transformed function is never re-traced per call. Under a transform
 * the callback runs on the tracers directly, which inlines it into the
 * enclosing trace. CFT_EAGER=1 turns staging off (op-by-op, for debugging). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "trace/fn.h"

cft_fn *cft_fn_new(cft_fn_cb cb, void *env, int nin, int nout) {
    if (!cb || nin < 0 || nout < 1) {
        cft__set_last(cft__fail(CFT_E_ARG, "cft_fn_new: bad callback or counts (nin=%d, nout=%d)",
                                nin, nout));
        return NULL;
    }
    cft_fn *f = CFT_NEW(cft_fn);
    if (!f)
        return NULL;
    f->cb = cb;
    f->env = env;
    f->nin = nin;
    f->nout = nout;
    f->name = "fn";
    return f;
}

cft_fn *cft_fn_named(cft_fn *f, const char *name) {
    if (f && name)
        f->name = cft__strdup(name);
    return f;
}

cft_fn *cft_fn_uncached(cft_fn *f) {
    if (f)
        f->direct = true;
    return f;
}

int cft_fn_nin(const cft_fn *f) {
    return f ? f->nin : 0;
}
int cft_fn_nout(const cft_fn *f) {
    return f ? f->nout : 0;
}

cft_status cft__fail_outs(cft_array *e, int nout, cft_array **out) {
    for (int i = 0; i < nout; i++)
        out[i] = e;
    return cft__set_last(e);
}

cft_status cft__fn_apply(cft_fn *f, cft_array *const *in, cft_array **out) {
    for (int i = 0; i < f->nout; i++)
        out[i] = NULL;
    cft_status st = f->cb(f->env, f->nin, in, f->nout, out);
    for (int i = 0; i < f->nout; i++) {
        if (!out[i])
            return cft__fail_outs(cft__fail(st ? st : CFT_E_ARG, "%s: output %d was not set%s",
                                            f->name, i,
                                            st ? " (the callback returned an error)" : ""),
                                  f->nout, out);
        /* errors made by public ops before any bind (cft_matmul's shape
         * checks, ...) get the transform stack here */
        if (cft_failed(out[i]))
            return cft__fail_outs(cft__annotate(out[i]), f->nout, out);
    }
    if (st != CFT_OK) {
        const char *m = cft_last_error() == st ? cft_last_error_message() : "";
        return cft__fail_outs(cft__fail(st, "%s: the callback returned error %d%s%s", f->name,
                                        (int)st, *m ? ": " : "", m),
                              f->nout, out);
    }
    return CFT_OK;
}

cft_ir *cft_make_ir(cft_fn *f, const cft_aval *avals) {
    if (!f) {
        cft__set_last(cft__fail(CFT_E_ARG, "cft_make_ir: NULL function"));
        return NULL;
    }
    cft_stage *s = cft__stage_begin(NULL);
    if (!s) {
        cft__set_last(cft__fail(CFT_E_TRACE, "cft_make_ir: trace stack full"));
        return NULL;
    }
    cft_array *in[f->nin > 0 ? f->nin : 1], *out[f->nout];
    for (int i = 0; i < f->nin; i++)
        in[i] = cft__stage_input(s, &avals[i]);
    if (cft__fn_apply(f, in, out) != CFT_OK) {
        cft__stage_abort(s);
        return NULL;
    }
    return cft__stage_end(s, f->nout, out);
}

static bool avals_match(const cft_aval *a, cft_array *const *in, int n) {
    for (int i = 0; i < n; i++)
        if (!cft__aval_eq(&a[i], &in[i]->aval))
            return false;
    return true;
}

static bool closed_over_concrete(const cft_ir *ir) {
    for (int i = 0; i < ir->nconst; i++)
        if (ir->constvals[i]->kind != CFT_K_CONCRETE)
            return false;
    return true;
}

cft_status cft_fn_call(cft_fn *f, cft_array *const *in, cft_array **out) {
    if (!f) {
        cft__set_last(cft__fail(CFT_E_ARG, "cft_fn_call: NULL function"));
        return CFT_E_ARG;
    }
    if (!out)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_fn_call: out is NULL"));
    bool concrete = true;
    for (int i = 0; i < f->nin; i++) {
        if (!in || !in[i])
            return cft__fail_outs(cft__fail(CFT_E_ARG, "%s: input %d is NULL", f->name, i), f->nout,
                                  out);
        if (cft_failed(in[i]))
            return cft__fail_outs(in[i], f->nout, out);
        concrete &= in[i]->kind == CFT_K_CONCRETE;
    }
    static int eager = -1;
    if (eager < 0)
        eager = getenv("CFT_EAGER") && atoi(getenv("CFT_EAGER")) != 0;
    if (!concrete || cft__trace_depth() > 0 || eager || f->direct)
        return cft__fn_apply(f, in, out);
    for (fn_cache *c = f->cache; c; c = c->next)
        if (avals_match(c->avals, in, f->nin))
            return cft_ir_eval(c->ir, in, out);
    cft_aval *avals = CFT_NEWN(cft_aval, f->nin + 1);
    for (int i = 0; i < f->nin; i++)
        avals[i] = in[i]->aval;
    cft_ir *ir = cft_make_ir(f, avals);
    if (!ir) {
        cft_status st = cft_last_error();
        return cft__fail_outs(cft__fail(st ? st : CFT_E_TRACE, "%s", cft_last_error_message()),
                              f->nout, out);
    }
    ir = cft_ir_cse(cft_ir_dce(ir));
    if (closed_over_concrete(ir)) {
        fn_cache *c = CFT_NEW(fn_cache);
        c->avals = avals;
        c->ir = ir;
        c->next = f->cache;
        f->cache = c;
    }
    return cft_ir_eval(ir, in, out);
}

cft_array *cft_fn_call1(cft_fn *f, cft_array *const *in) {
    if (!f)
        return cft__fail(CFT_E_ARG, "cft_fn_call1: NULL function");
    cft_array *out[f->nout];
    cft_fn_call(f, in, out);
    return out[0];
}

static cft_status ir_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin;
    (void)nout;
    return cft_ir_eval(env, in, out);
}

cft_fn *cft_ir_fn(cft_ir *ir) {
    if (!ir)
        return NULL;
    return cft_fn_named(cft_fn_new(ir_cb, ir, ir->nin, ir->nout), "ir");
}

cft_status cft_fn_print_ir(cft_fn *f, const cft_aval *avals, FILE *out) {
    cft_ir *ir = cft_make_ir(f, avals);
    if (!ir)
        return cft_last_error();
    cft_ir_print(ir, out);
    return CFT_OK;
}
