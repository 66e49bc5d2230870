/* transpose.c: reverse mode, step two. Walk the linear IR backwards,
 * handing each equation's output cotangents to its primitive's transpose
 * rule, and accumulate the input cotangents. Residuals are the known
 * operands; every other var is linear. Only linear primitives have
 * transpose rules; meeting another one here means a jvp rule was not linear
 * in its tangents, which is reported with the primitive's name. */
#include "prims/rules.h"
#include "transforms/transforms.h"

cft_status cft__backward(const cft_lin *lin, cft_array *const *cts, cft_array **ct_in) {
    const cft_ir *ir = lin->lin;
    cft_array **val = CFT_NEWN(cft_array *, ir->nvars + 1); /* residual values */
    cft_array **ct = CFT_NEWN(cft_array *, ir->nvars + 1);  /* accumulated cotangents */
    bool *isres = CFT_NEWN(bool, ir->nvars + 1);
    for (int r = 0; r < lin->nres; r++) {
        val[ir->invars[r]->id] = lin->res[r];
        isres[ir->invars[r]->id] = true;
    }
    for (int k = 0; k < ir->nout; k++) {
        int v = ir->outvars[k]->id;
        cft_array *c = cts[lin->tan_of[k]];
        if (!isres[v] && c)
            ct[v] = ct[v] ? cft_add(ct[v], c) : c;
    }
    for (int k = ir->neqn - 1; k >= 0; k--) {
        const cft_eqn *q = &ir->eqns[k];
        cft_array *cto[q->nout];
        bool any = false;
        for (int i = 0; i < q->nout; i++)
            any |= (cto[i] = ct[q->out[i]->id]) != NULL;
        if (!any)
            continue;
        for (int i = 0; i < q->nout; i++)
            cto[i] = cft__inst(cto[i], &q->out[i]->aval);
        if (!q->prim->transpose)
            return cft__fail_outs(cft__fail(CFT_E_TRACE,
                                            "grad: primitive %s has no transpose rule "
                                            "(it is not linear in the tangents)",
                                            q->prim->name),
                                  lin->nin, ct_in);
        cft_array *x[q->nin > 0 ? q->nin : 1], *cti[q->nin > 0 ? q->nin : 1];
        cft_aval av[q->nin > 0 ? q->nin : 1];
        for (int i = 0; i < q->nin; i++) {
            x[i] = isres[q->in[i]->id] ? val[q->in[i]->id] : NULL;
            av[i] = q->in[i]->aval;
            cti[i] = NULL;
        }
        cft_array *e = q->prim->transpose(cto, x, av, q->nin, &q->params, cti);
        if (e)
            return cft__fail_outs(e, lin->nin, ct_in);
        for (int i = 0; i < q->nin; i++) {
            if (x[i] || !cti[i])
                continue;
            if (cft_failed(cti[i]))
                return cft__fail_outs(cti[i], lin->nin, ct_in);
            int v = q->in[i]->id;
            ct[v] = ct[v] ? cft_add(ct[v], cti[i]) : cti[i];
        }
        for (int i = 0; i < q->nout; i++)
            ct[q->out[i]->id] = NULL;
    }
    for (int i = 0, k = 0; i < lin->nin; i++) {
        ct_in[i] = NULL;
        if (!lin->diff[i])
            continue;
        ct_in[i] = ct[ir->invars[lin->nres + k]->id];
        k++;
        if (ct_in[i] && cft_failed(ct_in[i]))
            return cft__fail_outs(ct_in[i], lin->nin, ct_in);
    }
    return CFT_OK;
}
