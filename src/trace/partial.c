/* partial.c: partial evaluation of an IR. Given which inputs are known,
 * split it in two: the known IR computes everything that depends on known
 * values only, plus the residuals (known values the rest reads); the
 * unknown IR takes the residuals and the unknown inputs and computes the
 * rest. Reverse mode splits a staged jvp this way (primal part now, linear
 * part for the transpose), and control-flow primitives split their bodies.
 * An equation with both known and unknown inputs goes to the unknown side,
 * unless its primitive has a partial_eval rule that splits it (a loop into
 * a known loop emitting residuals and an unknown loop reading them). */
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "trace/ir.h"

static int max_var_id(const cft_ir *ir) {
    int m = ir->nvars;
    for (int k = 0; k < ir->neqn; k++)
        for (int o = 0; o < ir->eqns[k].nout; o++)
            if (ir->eqns[k].out[o]->id >= m)
                m = ir->eqns[k].out[o]->id + 1;
    return m;
}

cft_ir_split *cft__split_ir(const cft_ir *ir, const bool *in_known, const bool *want_unknown,
                            bool *out_known) {
    int cap = max_var_id(ir) + 64 * (ir->neqn + 1);
    int next_id = max_var_id(ir);
    bool *known = CFT_NEWN(bool, cap), *res_mark = CFT_NEWN(bool, cap);
    cft_eqn *keqs = CFT_NEWN(cft_eqn, 2 * ir->neqn + 1),
            *ueqs = CFT_NEWN(cft_eqn, 2 * ir->neqn + 1);
    int nk = 0, nu = 0;
    for (int i = 0; i < ir->nconst; i++)
        known[ir->constvars[i]->id] = true;
    for (int i = 0; i < ir->nin; i++)
        known[ir->invars[i]->id] = in_known[i];
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        bool all = true, any = false;
        for (int i = 0; i < q->nin; i++) {
            all &= known[q->in[i]->id];
            any |= known[q->in[i]->id];
        }
        if (all) {
            keqs[nk++] = *q;
            for (int o = 0; o < q->nout; o++)
                known[q->out[o]->id] = true;
            continue;
        }
        cft_eqn kq, uq;
        bool ok[q->nout], in_k[q->nin];
        for (int i = 0; i < q->nin; i++)
            in_k[i] = known[q->in[i]->id];
        if (any && q->prim->partial_eval && next_id + 64 < cap &&
            q->prim->partial_eval(q, in_k, &next_id, &kq, &uq, ok)) {
            keqs[nk++] = kq;
            for (int o = 0; o < kq.nout; o++)
                known[kq.out[o]->id] = true;
            ueqs[nu++] = uq;
            for (int o = 0; o < q->nout; o++)
                known[q->out[o]->id] = ok[o];
            for (int i = 0; i < uq.nin; i++)
                if (known[uq.in[i]->id])
                    res_mark[uq.in[i]->id] = true;
            continue;
        }
        ueqs[nu++] = *q;
        for (int o = 0; o < q->nout; o++)
            known[q->out[o]->id] = false;
        for (int i = 0; i < q->nin; i++)
            if (known[q->in[i]->id])
                res_mark[q->in[i]->id] = true;
    }
    for (int j = 0; j < ir->nout; j++) {
        bool k = known[ir->outvars[j]->id];
        bool to_unknown = want_unknown ? want_unknown[j] : !k;
        if (!to_unknown && !k) {
            cft__set_last(cft__fail(CFT_E_TRACE,
                                    "partial evaluation: output %d depends on unknown inputs", j));
            return NULL;
        }
        if (to_unknown && k)
            res_mark[ir->outvars[j]->id] = true; /* passed through */
        out_known[j] = !to_unknown;
    }
    /* residuals in a stable order: constants, inputs, then equation outputs */
    cft_irvar **resv = CFT_NEWN(cft_irvar *, cap);
    int nres = 0;
#define TAKE(v)                                                                                    \
    do {                                                                                           \
        if (res_mark[(v)->id])                                                                     \
            resv[nres++] = (v), res_mark[(v)->id] = false;                                         \
    } while (0)
    for (int i = 0; i < ir->nconst; i++)
        TAKE(ir->constvars[i]);
    for (int i = 0; i < ir->nin; i++)
        TAKE(ir->invars[i]);
    for (int k = 0; k < nk; k++)
        for (int o = 0; o < keqs[k].nout; o++)
            TAKE(keqs[k].out[o]);
#undef TAKE
    cft_ir kn = {0}, un = {0};
    kn.nconst = ir->nconst, kn.constvars = ir->constvars, kn.constvals = ir->constvals;
    kn.invars = CFT_NEWN(cft_irvar *, ir->nin + 1);
    un.invars = CFT_NEWN(cft_irvar *, nres + ir->nin + 1);
    for (int r = 0; r < nres; r++)
        un.invars[un.nin++] = resv[r];
    for (int i = 0; i < ir->nin; i++) {
        if (in_known[i])
            kn.invars[kn.nin++] = ir->invars[i];
        else
            un.invars[un.nin++] = ir->invars[i];
    }
    kn.eqns = keqs, kn.neqn = nk;
    un.eqns = ueqs, un.neqn = nu;
    kn.outvars = CFT_NEWN(cft_irvar *, ir->nout + nres + 1);
    un.outvars = CFT_NEWN(cft_irvar *, ir->nout + 1);
    for (int j = 0; j < ir->nout; j++) {
        if (out_known[j])
            kn.outvars[kn.nout++] = ir->outvars[j];
        else
            un.outvars[un.nout++] = ir->outvars[j];
    }
    for (int r = 0; r < nres; r++)
        kn.outvars[kn.nout++] = resv[r];
    cft_ir_split *s = CFT_NEW(cft_ir_split);
    s->known = cft__ir_finish(&kn);
    s->unknown = cft__ir_dce_outputs(cft__ir_finish(&un), NULL);
    s->nres = nres;
    return s;
}
