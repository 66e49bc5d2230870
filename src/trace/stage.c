/* stage.c: the staging trace, which records every primitive applied to its
 * tracers as an equation instead of running it. Values from below (concrete
 * arrays, tracers of enclosing transforms) are lifted into constants: that
 * is the closure conversion that makes the IR closed. */
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "trace/ir.h"

struct cft_stage {
    cft_trace *trace;
    int nvars;
    int nconst, capconst;
    cft_irvar **constvars;
    cft_array **constvals;
    int nin, capin;
    cft_irvar **invars;
    int neqn, capeqn;
    cft_eqn *eqns;
};

static cft_irvar *new_var(cft_stage *s, const cft_aval *aval) {
    cft_irvar *v = CFT_NEW(cft_irvar);
    if (!v)
        return NULL;
    v->id = s->nvars++;
    v->aval = *aval;
    return v;
}

static cft_array *stage_lift(cft_trace *t, cft_array *x) {
    cft_stage *s = t->state;
    for (int i = 0; i < s->nconst; i++) /* one constant per captured value */
        if (s->constvals[i] == x) {
            cft_array *tr = cft__tracer(t, &x->aval);
            if (!cft_failed(tr))
                tr->u.stage.var = s->constvars[i];
            return tr;
        }
    if (s->nconst == s->capconst) {
        s->capconst = s->capconst ? 2 * s->capconst : 16;
        s->constvars = cft__realloc(s->constvars, sizeof(cft_irvar *) * (size_t)s->capconst);
        s->constvals = cft__realloc(s->constvals, sizeof(cft_array *) * (size_t)s->capconst);
        if (!s->constvars || !s->constvals)
            return cft__oom();
    }
    cft_irvar *v = new_var(s, &x->aval);
    if (!v)
        return cft__oom();
    s->constvars[s->nconst] = v;
    s->constvals[s->nconst++] = x;
    cft_array *tr = cft__tracer(t, &x->aval);
    if (!cft_failed(tr))
        tr->u.stage.var = v;
    return tr;
}

static cft_array *stage_process(cft_trace *t, const cft_prim *p, const cft_params *par, int nin,
                                cft_array *const *in, cft_array **out) {
    cft_stage *s = t->state;
    int nout = cft__nout(p, par, nin);
    cft_aval avs[nin > 0 ? nin : 1], oav[nout];
    for (int i = 0; i < nin; i++)
        avs[i] = in[i]->aval;
    cft_array *e = cft__abstract_eval(p, par, nin, avs, oav);
    if (e)
        return e;
    if (s->neqn == s->capeqn) {
        s->capeqn = s->capeqn ? 2 * s->capeqn : 64;
        s->eqns = cft__realloc(s->eqns, sizeof(cft_eqn) * (size_t)s->capeqn);
        if (!s->eqns)
            return cft__oom();
    }
    cft_eqn *q = &s->eqns[s->neqn];
    memset(q, 0, sizeof *q);
    q->prim = p;
    q->params = *par;
    q->nin = nin;
    q->nout = nout;
    q->in = CFT_NEWN(cft_irvar *, nin > 0 ? nin : 1);
    q->out = CFT_NEWN(cft_irvar *, nout);
    if (!q->in || !q->out)
        return cft__oom();
    for (int i = 0; i < nin; i++)
        q->in[i] = in[i]->u.stage.var;
    for (int i = 0; i < nout; i++) {
        q->out[i] = new_var(s, &oav[i]);
        out[i] = cft__tracer(t, &oav[i]);
        if (!q->out[i] || cft_failed(out[i]))
            return cft__oom();
        out[i]->u.stage.var = q->out[i];
    }
    s->neqn++;
    return NULL;
}

static const cft_trace_vt stage_vt = {"stage", stage_process, stage_lift, NULL};

bool cft__is_stage_trace(const cft_trace *t) {
    return t && t->vt == &stage_vt;
}

cft_stage *cft__stage_begin(cft_trace **trace) {
    cft_stage *s = CFT_NEW(cft_stage);
    if (!s)
        return NULL;
    s->trace = cft__trace_push(&stage_vt, s);
    if (!s->trace)
        return NULL;
    if (trace)
        *trace = s->trace;
    return s;
}

cft_array *cft__stage_input(cft_stage *s, const cft_aval *aval) {
    if (s->nin == s->capin) {
        s->capin = s->capin ? 2 * s->capin : 16;
        s->invars = cft__realloc(s->invars, sizeof(cft_irvar *) * (size_t)s->capin);
        if (!s->invars)
            return cft__oom();
    }
    cft_irvar *v = new_var(s, aval);
    if (!v)
        return cft__oom();
    s->invars[s->nin++] = v;
    cft_array *tr = cft__tracer(s->trace, aval);
    if (!cft_failed(tr))
        tr->u.stage.var = v;
    return tr;
}

void cft__stage_abort(cft_stage *s) {
    cft__trace_pop(s->trace);
}

cft_ir *cft__stage_end(cft_stage *s, int nout, cft_array *const *outs) {
    cft_ir *ir = CFT_NEW(cft_ir);
    cft_irvar **ov = CFT_NEWN(cft_irvar *, nout > 0 ? nout : 1);
    if (!ir || !ov) {
        cft__stage_abort(s);
        cft__set_last(cft__oom());
        return NULL;
    }
    for (int i = 0; i < nout; i++) {
        cft_array *o = outs[i];
        if (cft_failed(o)) {
            cft__stage_abort(s);
            cft__set_last(o ? o : cft__fail(CFT_E_ARG, "cft_make_ir: output %d is NULL", i));
            return NULL;
        }
        if (!cft__is_tracer_of(o, s->trace))
            o = stage_lift(s->trace, o);
        if (cft_failed(o)) {
            cft__stage_abort(s);
            cft__set_last(o);
            return NULL;
        }
        ov[i] = o->u.stage.var;
    }
    cft__trace_pop(s->trace);
    ir->nconst = s->nconst;
    ir->constvars = s->constvars;
    ir->constvals = s->constvals;
    ir->nin = s->nin;
    ir->invars = s->invars;
    ir->neqn = s->neqn;
    ir->eqns = s->eqns;
    ir->nout = nout;
    ir->outvars = ov;
    ir->nvars = s->nvars;
    return cft__ir_finish(ir);
}
