/* rewrite.c: the IR pass that applies the primitives' rewrite rules, each of
 * which may replace one equation by several (a simplify rule replaces one
 * by one). The IR is staged again, equation by equation: where a rule
 * applies, its outputs are built with the public ops from the values of
 * the old IR's vars; elsewhere the equation is bound as it was. Dead
 * equations (the per-sample gradients a DP-SGD step no longer needs) go
 * with DCE afterwards. The pass changes nothing when no rule applies, and
 * gives the original IR back if staging fails. CFT_JIT_REWRITE=0 turns it
 * off (to compare with the materialised program). */
#include <stdlib.h>
#include <string.h>

#include "cft/ops.h"
#include "core/error.h"
#include "core/mem.h"
#include "trace/ir.h"

typedef struct {
    const cft_ir *ir;
    int *producer;   /* var -> eqn index, -1 */
    int *uses;       /* var -> reads by equations and the outputs */
    cft_array **val; /* var -> value in the new IR; NULL while checking */
} rw_impl;

static const cft_eqn *producer_of(const cft_rewrite_ctx *c, int var) {
    const rw_impl *r = c->impl;
    return var >= 0 && var < r->ir->nvars && r->producer[var] >= 0 ? &r->ir->eqns[r->producer[var]]
                                                                   : NULL;
}

static int uses_of(const cft_rewrite_ctx *c, int var) {
    const rw_impl *r = c->impl;
    return var >= 0 && var < r->ir->nvars ? r->uses[var] : 0;
}

static cft_array *value_of(const cft_rewrite_ctx *c, int var) {
    const rw_impl *r = c->impl;
    return r->val[var];
}

/* the producer of var, when its output 0 has `nb` examples along `axis` */
static const cft_eqn *batch_producer(const cft_rewrite_ctx *c, int var, int axis, int64_t nb) {
    const cft_eqn *q = c->producer(c, var);
    if (!q || q->nout != 1 || axis < 0 || axis >= q->out[0]->aval.ndim || nb < 1)
        return NULL;
    int64_t n = q->out[0]->aval.shape[axis];
    return n == nb || (n > 0 && n % nb == 0) ? q : NULL;
}

bool cft__batch_sqnorm_of(const cft_rewrite_ctx *c, int var, int axis, int64_t nb,
                          cft_array **out) {
    const cft_eqn *q = batch_producer(c, var, axis, nb);
    return q && q->prim->batch_sqnorm && q->prim->batch_sqnorm(q, c, axis, nb, out);
}

bool cft__batch_wsum_of(const cft_rewrite_ctx *c, int var, int axis, int64_t nb, cft_array *w,
                        cft_array **out) {
    const cft_eqn *q = batch_producer(c, var, axis, nb);
    return q && q->prim->batch_wsum && q->prim->batch_wsum(q, c, axis, nb, w, out);
}

cft_array *cft__rewrite_value_f32(const cft_rewrite_ctx *c, int var) {
    cft_array *x = c->value(c, var);
    return cft_dtype_is_half(cft_array_dtype(x)) ? cft_astype(x, CFT_F32) : x;
}

static bool enabled(void) {
    const char *s = getenv("CFT_JIT_REWRITE");
    return !s || strcmp(s, "0") != 0;
}

static cft_ir *rewrite(const cft_ir *ir) {
    rw_impl r = {ir, CFT_NEWN(int, ir->nvars + 1), CFT_NEWN(int, ir->nvars + 1), NULL};
    cft_rewrite_ctx c = {producer_of, NULL, uses_of, &r}; /* value NULL: only checking */
    bool *apply = CFT_NEWN(bool, ir->neqn + 1), any = false;
    if (!r.producer || !r.uses || !apply)
        return (cft_ir *)ir;
    for (int v = 0; v < ir->nvars; v++)
        r.producer[v] = -1, r.uses[v] = 0;
    for (int k = 0; k < ir->neqn; k++)
        for (int i = 0; i < ir->eqns[k].nin; i++)
            r.uses[ir->eqns[k].in[i]->id]++;
    for (int i = 0; i < ir->nout; i++)
        r.uses[ir->outvars[i]->id]++;
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        for (int o = 0; o < q->nout; o++)
            r.producer[q->out[o]->id] = k;
        apply[k] = q->prim->rewrite && q->prim->rewrite(q, &c, NULL);
        any |= apply[k];
    }
    if (!any)
        return (cft_ir *)ir;
    r.val = CFT_NEWN(cft_array *, ir->nvars + 1);
    c.value = value_of;
    cft_array **outs = CFT_NEWN(cft_array *, ir->nout + 1);
    cft_stage *s = cft__stage_begin(NULL);
    if (!r.val || !outs || !s)
        return (cft_ir *)ir;
    for (int i = 0; i < ir->nconst; i++)
        r.val[ir->constvars[i]->id] = ir->constvals[i];
    for (int i = 0; i < ir->nin; i++)
        r.val[ir->invars[i]->id] = cft__stage_input(s, &ir->invars[i]->aval);
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        cft_array *res[q->nout];
        bool done = apply[k] && q->prim->rewrite(q, &c, res);
        for (int o = 0; o < q->nout && done; o++) /* a rule's result must fit the old var */
            done = res[o] && !cft_failed(res[o]) && cft__aval_eq(&res[o]->aval, &q->out[o]->aval);
        if (!done) {
            cft_array *args[q->nin > 0 ? q->nin : 1];
            for (int i = 0; i < q->nin; i++)
                args[i] = r.val[q->in[i]->id];
            cft_array *e = cft__bind(q->prim, &q->params, q->nin, args, q->nout, res);
            if (e) {
                cft__stage_abort(s);
                return (cft_ir *)ir;
            }
        }
        for (int o = 0; o < q->nout; o++)
            r.val[q->out[o]->id] = res[o];
    }
    for (int i = 0; i < ir->nout; i++)
        outs[i] = r.val[ir->outvars[i]->id];
    cft_ir *n = cft__stage_end(s, ir->nout, outs);
    return n ? cft__ir_dce_outputs(n, NULL) : (cft_ir *)ir;
}

cft_ir *cft__ir_rewrite(const cft_ir *ir) {
    return enabled() ? rewrite(ir) : (cft_ir *)ir;
}

cft_ir *cft_ir_rewrite(const cft_ir *ir) {
    CFT_API("cft_ir_rewrite");
    if (!ir) {
        cft__set_last(cft__fail(CFT_E_ARG, "cft_ir_rewrite: NULL ir"));
        return NULL;
    }
    return rewrite(ir);
}

cft_status cft_ir_eqn_out_aval(const cft_ir *ir, int i, int k, cft_aval *out) {
    CFT_API("cft_ir_eqn_out_aval");
    if (!ir || !out || i < 0 || i >= ir->neqn || k < 0 || k >= ir->eqns[i].nout)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_ir_eqn_out_aval: no output %d of equation %d (the IR "
                                       "has %d equations)",
                                       k, i, ir ? ir->neqn : 0));
    *out = ir->eqns[i].out[k]->aval;
    return CFT_OK;
}
