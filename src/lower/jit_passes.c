/* jit_passes.c: the IR passes that cft_jit runs on a trace before it
 * lowers it: dead code and common subexpressions, the rewrites (e.g.
 * DP-SGD's clipping without per-sample gradients), equations of constants
 * evaluated once, identities dropped, each primitive's simplification
 * rule, and a schedule that runs cheap equations early. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "lower/jit_plan.h"

/* equations whose inputs are all constants are evaluated once, now */
static cft_ir *fold_constants(const cft_ir *ir) {
    cft_array **val = CFT_NEWN(cft_array *, ir->nvars + 1);
    for (int i = 0; i < ir->nconst; i++)
        val[ir->constvars[i]->id] = ir->constvals[i];
    cft_ir d = *ir;
    d.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    d.neqn = 0;
    d.constvars = CFT_NEWN(cft_irvar *, ir->nconst + ir->neqn + 1);
    d.constvals = CFT_NEWN(cft_array *, ir->nconst + ir->neqn + 1);
    memcpy(d.constvars, ir->constvars, sizeof(cft_irvar *) * (size_t)ir->nconst);
    memcpy(d.constvals, ir->constvals, sizeof(cft_array *) * (size_t)ir->nconst);
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        bool all = q->nin > 0 && !cft__eqn_symbolic(q) && /* symbolic: known when it runs */
                   !(q->prim->flags & CFT_PRIM_EFFECT);   /* communication runs every call */
        for (int i = 0; i < q->nin && all; i++)
            all = val[q->in[i]->id] && val[q->in[i]->id]->kind == CFT_K_CONCRETE;
        cft_array *args[q->nin > 0 ? q->nin : 1], *res[q->nout];
        if (all) {
            for (int i = 0; i < q->nin; i++)
                args[i] = val[q->in[i]->id];
            cft_aval oav[q->nout];
            for (int o = 0; o < q->nout; o++)
                oav[o] = q->out[o]->aval;
            if (!cft__run_impl(q->prim, &q->params, q->nin, args, q->nout, oav, res)) {
                for (int o = 0; o < q->nout; o++) {
                    val[q->out[o]->id] = res[o];
                    d.constvars[d.nconst] = q->out[o];
                    d.constvals[d.nconst++] = res[o];
                }
                continue;
            }
        }
        d.eqns[d.neqn++] = *q;
    }
    return cft__ir_dce_outputs(cft__ir_finish(&d), NULL);
}

/* Equations that start asynchronous work (CFT_PRIM_EARLY: a DDP bucket's
 * all_reduce) move to just after the last equation producing their inputs,
 * so the work overlaps everything after (the rest of the backward pass);
 * the others keep their order. */
static cft_ir *schedule_early(const cft_ir *ir) {
    bool any = false;
    for (int k = 0; k < ir->neqn; k++)
        any |= (ir->eqns[k].prim->flags & CFT_PRIM_EARLY) != 0;
    if (!any)
        return (cft_ir *)ir;
    bool *ready = CFT_NEWN(bool, ir->nvars + 1); /* inputs and constants, then as placed */
    bool *placed = CFT_NEWN(bool, ir->neqn + 1);
    for (int i = 0; i < ir->nin; i++)
        ready[ir->invars[i]->id] = true;
    for (int i = 0; i < ir->nconst; i++)
        ready[ir->constvars[i]->id] = true;
    cft_ir d = *ir;
    d.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    d.neqn = 0;
    /* after each equation, place every early one whose inputs now exist */
    for (int k = -1; k < ir->neqn; k++) {
        if (k >= 0 && !(ir->eqns[k].prim->flags & CFT_PRIM_EARLY)) {
            const cft_eqn *q = &ir->eqns[k];
            d.eqns[d.neqn++] = *q;
            placed[k] = true;
            for (int o = 0; o < q->nout; o++)
                ready[q->out[o]->id] = true;
        }
        for (int e = 0; e < ir->neqn; e++) {
            const cft_eqn *q = &ir->eqns[e];
            if (placed[e] || !(q->prim->flags & CFT_PRIM_EARLY))
                continue;
            bool go = true;
            for (int i = 0; i < q->nin && go; i++)
                go = ready[q->in[i]->id];
            if (go) {
                d.eqns[d.neqn++] = *q;
                placed[e] = true;
                for (int o = 0; o < q->nout; o++)
                    ready[q->out[o]->id] = true;
            }
        }
    }
    return cft__ir_finish(&d);
}

/* identities (CFT_PRIM_IDENTITY: stop_gradient) dropped, their readers
 * reading the input: a plan differentiates nothing, and each was a kernel
 * that copied its input */
static cft_ir *drop_identities(const cft_ir *ir) {
    bool any = false;
    for (int k = 0; k < ir->neqn && !any; k++)
        any = (ir->eqns[k].prim->flags & CFT_PRIM_IDENTITY) && ir->eqns[k].nin == 1 &&
              ir->eqns[k].nout == 1;
    if (!any)
        return (cft_ir *)ir;
    cft_irvar **to = CFT_NEWN(cft_irvar *, ir->nvars + 1); /* var -> the var it stands for */
    cft_ir d = *ir;
    d.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    d.outvars = CFT_NEWN(cft_irvar *, ir->nout + 1);
    d.neqn = 0;
    for (int k = 0; k < ir->neqn; k++) {
        cft_eqn q = ir->eqns[k];
        cft_irvar **in = CFT_NEWN(cft_irvar *, q.nin + 1);
        for (int i = 0; i < q.nin; i++)
            in[i] = to[q.in[i]->id] ? to[q.in[i]->id] : q.in[i];
        q.in = in;
        if ((q.prim->flags & CFT_PRIM_IDENTITY) && q.nin == 1 && q.nout == 1 &&
            cft__aval_eq(&q.in[0]->aval, &q.out[0]->aval)) {
            to[q.out[0]->id] = q.in[0];
            continue;
        }
        d.eqns[d.neqn++] = q;
    }
    for (int j = 0; j < ir->nout; j++)
        d.outvars[j] = to[ir->outvars[j]->id] ? to[ir->outvars[j]->id] : ir->outvars[j];
    return cft__ir_finish(&d);
}

/* equations rewritten by their primitives' simplification rules */
typedef struct {
    const cft_ir *ir;
    int *producer; /* var -> eqn index, -1 */
} simp_ctx;

static const cft_eqn *producer_of(void *ctx, int var) {
    simp_ctx *c = ctx;
    return c->producer[var] >= 0 ? &c->ir->eqns[c->producer[var]] : NULL;
}

static cft_ir *simplify(const cft_ir *ir) {
    simp_ctx c = {ir, CFT_NEWN(int, ir->nvars + 1)};
    for (int v = 0; v < ir->nvars; v++)
        c.producer[v] = -1;
    cft_ir d = *ir;
    d.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    bool changed = false;
    for (int k = 0; k < ir->neqn; k++) {
        d.eqns[k] = ir->eqns[k];
        for (int o = 0; o < ir->eqns[k].nout; o++)
            c.producer[ir->eqns[k].out[o]->id] = k;
        cft_eqn repl;
        if (ir->eqns[k].prim->simplify &&
            ir->eqns[k].prim->simplify(&ir->eqns[k], producer_of, &c, &repl)) {
            d.eqns[k] = repl;
            changed = true;
        }
    }
    return changed ? cft__ir_dce_outputs(cft__ir_finish(&d), NULL) : (cft_ir *)ir;
}

cft_ir *cft__jit_passes(cft_ir *ir) {
    ir = cft_ir_cse(cft_ir_dce(ir));
    ir = cft__ir_rewrite(ir); /* e.g. DP-SGD's clipping without per-sample gradients */
    ir = fold_constants(ir);
    ir = drop_identities(ir);
    ir = simplify(ir);
    return schedule_early(ir);
}
