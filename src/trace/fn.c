/* fn.c: functions as values. At top level (no transform active) a call is
 * staged: the function is traced once per distinct input signature into an
 * IR, which is cached on the function and interpreted on every later call,
 * so a transformed function is never re-traced per call. Under a transform
 * the callback runs on the tracers directly, which inlines it into the
 * enclosing trace. CFT_EAGER=1 turns staging off (op-by-op, for debugging). */
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "core/profile.h"
#include "trace/fn.h"
#include "array/device.h"
#include "trace/ir.h"
#include "trace/trace.h"

static cft_status error_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin;
    (void)in;
    return cft__fail_outs(env, nout, out);
}

/* preallocated: an error function when even that cannot be allocated */
static cft_fn oom_fn = {.cb = error_cb, .nin = 1, .nout = 1, .name = "error"};

cft_fn *cft__fn_error(cft_array *err, int nin, int nout) {
    cft_fn *f = CFT_NEW(cft_fn);
    if (!f) {
        oom_fn.env = oom_fn.err = cft__oom();
        return &oom_fn;
    }
    f->cb = error_cb;
    f->env = err;
    f->err = err;
    f->nin = nin < 0 ? 0 : nin;
    f->nout = nout < 1 ? 1 : nout;
    f->name = "error";
    f->direct = true;
    cft__set_last(err);
    return f;
}

cft_fn *cft__fn_fail(int nin, int nout, cft_status code, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cft__fn_error(cft__fail(code, "%s", buf), nin, nout);
}

cft_fn *cft__fn_check(const char *call, cft_fn *f) {
    if (!f)
        return cft__fn_fail(1, 1, CFT_E_ARG, "%s: the function is NULL", call);
    if (f->err) {
        cft__set_last(f->err);
        return f;
    }
    return NULL;
}

bool cft_fn_failed(const cft_fn *f) {
    return !f || f->err;
}

const char *cft_fn_error_message(const cft_fn *f) {
    if (!f)
        return "cft: NULL function";
    return f->err ? cft_error_message(f->err) : "";
}

cft_fn *cft_fn_new(cft_fn_cb cb, void *env, int nin, int nout) {
    CFT_API("cft_fn_new");
    if (!cb || nin < 0 || nout < 1 || nin > CFT_FN_MAX_ARGS || nout > CFT_FN_MAX_ARGS)
        return cft__fn_fail(nin, nout, CFT_E_ARG,
                            "cft_fn_new: %s (callback %s, nin=%d, nout=%d; counts must be in "
                            "[0, %d] and [1, %d])",
                            !cb ? "callback is NULL" : "bad input or output count",
                            cb ? "set" : "NULL", nin, nout, CFT_FN_MAX_ARGS, CFT_FN_MAX_ARGS);
    cft_fn *f = CFT_NEW(cft_fn);
    if (!f)
        return cft__fn_error(cft__oom(), nin, nout);
    f->cb = cb;
    f->env = env;
    f->nin = nin;
    f->nout = nout;
    f->name = "fn";
    return f;
}

cft_fn *cft_fn_new_named(cft_fn_cb cb, void *env, int nin, int nout, const char *name) {
    CFT_API("cft_fn_new");
    cft_fn *f = cft_fn_new(cb, env, nin, nout);
    if (!f->err && name && *name)
        f->name = cft__strdup(name);
    return f;
}

cft_fn *cft_fn_named(cft_fn *f, const char *name) {
    CFT_API("cft_fn_named");
    if (!f)
        return cft__fn_fail(1, 1, CFT_E_ARG, "cft_fn_named: the function is NULL");
    if (!f->err && name)
        f->name = cft__strdup(name);
    return f;
}

cft_fn *cft_fn_uncached(cft_fn *f) {
    CFT_API("cft_fn_uncached");
    if (!f)
        return cft__fn_fail(1, 1, CFT_E_ARG, "cft_fn_uncached: the function is NULL");
    if (!f->err)
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

static cft_status check_outputs(cft_fn *f, cft_status st, cft_array *outer, cft_array **out);

static cft_status follow_device(cft_fn *f, cft_array *const *in, cft_array **out);

cft_status cft__fn_apply(cft_fn *f, cft_array *const *in, cft_array **out) {
    for (int i = 0; i < f->nout; i++)
        out[i] = NULL;
    cft_array *outer = cft__poison_swap(NULL);
    cft_api_state api = cft__api_suspend(); /* the callback's calls are public calls */
    cft__fn_push(f->name); /* popped when the outputs are checked (errors name f) */
    cft_status st = f->cb(f->env, f->nin, in, f->nout, out);
    cft__api_resume(api);
    st = check_outputs(f, st, outer, out);
    if (st == CFT_OK)
        st = follow_device(f, in, out);
    cft__fn_pop();
    return st;
}

/* A function called on a device's (committed) inputs gives its outputs on
 * that device, as JAX places a computation's results: an output made
 * without meeting an input there (a zero cotangent, a constant) is moved. */
static cft_status follow_device(cft_fn *f, cft_array *const *in, cft_array **out) {
    const cft_dev *d = NULL;
    for (int i = 0; i < f->nin && !d; i++)
        if (cft__on_device(in[i]) && in[i]->committed)
            d = in[i]->dev;
    for (int j = 0; d && j < f->nout; j++)
        if (out[j]->kind == CFT_K_CONCRETE && !out[j]->dev && !out[j]->committed) {
            out[j] = cft__dev_from_host(d, out[j], f->name);
            if (cft_failed(out[j]))
                return cft__fail_outs(out[j], f->nout, out);
        }
    return CFT_OK;
}

/* f's outputs after its callback: errors annotated while f is on the stack */
static cft_status check_outputs(cft_fn *f, cft_status st, cft_array *outer, cft_array **out) {
    cft_array *read = cft__poison_swap(outer); /* a tracer's value was read */
    if (read)
        return cft__fail_outs(read, f->nout, out);
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
    CFT_API("cft_make_ir");
    if (!f) {
        cft__set_last(cft__fail(CFT_E_ARG, "cft_make_ir: NULL function"));
        return NULL;
    }
    if (f->err) {
        cft__set_last(f->err);
        return NULL;
    }
    if (f->nin > 0 && !avals) {
        cft__set_last(cft__fail(CFT_E_ARG, "cft_make_ir: avals is NULL for %d inputs", f->nin));
        return NULL;
    }
    for (int i = 0; i < f->nin; i++) { /* the one size check, on each input aval */
        cft_array *e = cft__check_size("cft_make_ir", avals[i].dtype, avals[i].shape, avals[i].ndim,
                                       NULL, NULL);
        if (e) {
            cft__set_last(cft__fail(CFT_E_ARG, "cft_make_ir: input %d: %s", i,
                                    cft_error_message(e) + strlen("cft_make_ir: ")));
            return NULL;
        }
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

static cft_status fn_call(cft_fn *f, cft_array *const *in, cft_array **out);

cft_status cft_fn_call(cft_fn *f, cft_array *const *in, cft_array **out) {
    CFT_API("cft_fn_call");
    if (!cft__prof())
        return fn_call(f, in, out);
    double t0 = cft__prof_now(); /* profiling: the call is an event named by the function */
    cft_status st = fn_call(f, in, out);
    cft__prof_event(!f ? "cft_fn_call" : f->label ? f->label : f->name, "fn", t0, NULL);
    return st;
}

static cft_status fn_call_inner(cft_fn *f, cft_array *const *in, cft_array **out);

/* the call, then its outputs placed on its inputs' device */
static cft_status fn_call(cft_fn *f, cft_array *const *in, cft_array **out) {
    cft_status st = fn_call_inner(f, in, out);
    return st == CFT_OK ? follow_device(f, in, out) : st;
}

static cft_status fn_call_inner(cft_fn *f, cft_array *const *in, cft_array **out) {
    if (!out)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_fn_call: out is NULL"));
    if (!f) /* the output count is unknown: out[0] gets the error */
        return cft__fail_outs(cft__fail(CFT_E_ARG, "cft_fn_call: the function is NULL"), 1, out);
    if (f->err)
        return cft__fail_outs(f->err, f->nout, out);
    bool concrete = true;
    for (int i = 0; i < f->nin; i++) {
        if (!in || !in[i])
            return cft__fail_outs(cft__fail(CFT_E_ARG, "%s: input %d is NULL", f->name, i), f->nout,
                                  out);
        if (cft_failed(in[i]))
            return cft__fail_outs(in[i], f->nout, out);
        concrete &= in[i]->kind == CFT_K_CONCRETE;
    }
    static _Atomic int eager_flag = -1;
    int eager = atomic_load_explicit(&eager_flag, memory_order_relaxed);
    if (eager < 0) {
        eager = getenv("CFT_EAGER") && atoi(getenv("CFT_EAGER")) != 0;
        atomic_store_explicit(&eager_flag, eager, memory_order_relaxed);
    }
    if (!concrete || cft__trace_depth() > 0 || eager || f->direct)
        return cft__fn_apply(f, in, out);
    fn_cache *head = __atomic_load_n(&f->cache, __ATOMIC_ACQUIRE);
    for (fn_cache *c = head; c; c = c->next)
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
        /* lock-free push: concurrent first calls each add their trace */
        c->next = __atomic_load_n(&f->cache, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&f->cache, &c->next, c, false, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED))
            ;
    }
    return cft_ir_eval(ir, in, out);
}

cft_array *cft_fn_call1(cft_fn *f, cft_array *const *in) {
    CFT_API("cft_fn_call1");
    if (!f)
        return cft__fail(CFT_E_ARG, "cft_fn_call1: the function is NULL");
    if (f->err)
        return f->err;
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
    CFT_API("cft_ir_fn");
    if (!ir)
        return cft__fn_fail(1, 1, CFT_E_ARG, "cft_ir_fn: the IR is NULL");
    return cft_fn_named(cft_fn_new(ir_cb, ir, ir->nin, ir->nout), "ir");
}

cft_status cft_fn_print_ir(cft_fn *f, const cft_aval *avals, FILE *out) {
    CFT_API("cft_fn_print_ir");
    if (!out)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_fn_print_ir: the stream is NULL"));
    cft_ir *ir = cft_make_ir(f, avals);
    if (!ir)
        return cft_last_error();
    cft_ir_print(ir, out);
    return CFT_OK;
}

/* an upper bound of the bytes f's computation touches at these input avals
 * (every equation's outputs and the inputs, from its IR), and optionally
 * its arithmetic: each element computed, plus for contractions (the
 * primitives flagged CFT_PRIM_CONTRACTION) sqrt(|a| |b| |out|), which is
 * M*K*N for one GEMM; 0 if tracing fails */
size_t cft__ir_cost(const cft_ir *ir, double *flops) {
    double b = 0, fl = 0;
    for (int i = 0; i < ir->neqn; i++) {
        const cft_eqn *q = &ir->eqns[i];
        for (int k = 0; k < q->nout; k++) {
            const cft_aval *a = &q->out[k]->aval;
            double n = (double)cft__numel(a->shape, a->ndim);
            b += n * (double)cft_dtype_size(a->dtype);
            fl += n;
        }
        if ((q->prim->flags & CFT_PRIM_CONTRACTION) && q->nin >= 2 && q->nout >= 1) {
            const cft_aval *x = &q->in[0]->aval, *y = &q->in[1]->aval, *z = &q->out[0]->aval;
            fl += 2 * sqrt((double)cft__numel(x->shape, x->ndim) *
                           (double)cft__numel(y->shape, y->ndim) *
                           (double)cft__numel(z->shape, z->ndim));
        }
    }
    for (int i = 0; i < ir->nin; i++) {
        const cft_aval *a = &ir->invars[i]->aval;
        b += (double)cft__numel(a->shape, a->ndim) * (double)cft_dtype_size(a->dtype);
    }
    if (flops)
        *flops = fl;
    return b > 1e18 ? (size_t)1e18 : (size_t)b;
}

size_t cft__fn_cost(cft_fn *f, const cft_aval *avals, double *flops) {
    if (flops)
        *flops = 0;
    cft_ir *ir = cft_make_ir(f, avals);
    if (!ir) {
        cft_clear_error();
        return 0;
    }
    return cft__ir_cost(ir, flops);
}

size_t cft__fn_bytes(cft_fn *f, const cft_aval *avals) {
    return cft__fn_cost(f, avals, NULL);
}
