/* linearize.c: reverse mode, step one. Stage f's jvp into an IR whose
 * inputs are the primals and the tangents, then split it by partial
 * evaluation: equations whose inputs are all known (constants, primals) form
 * the primal IR, evaluated now; the rest depend on tangents and, since jvp
 * rules are linear in tangents, form the linear IR that the backward pass
 * transposes. Known values the linear IR reads are its residuals. */
#include <string.h>

#include "prims/rules.h"
#include "transforms/transforms.h"

cft_status cft__linearize(cft_fn *f, cft_array *const *primals, const bool *diff,
                          const bool *need_tangent, cft_array **outs, cft_lin **linp) {
    int n = f->nin, m = f->nout;
    cft_trace *st;
    cft_stage *s = cft__stage_begin(&st);
    if (!s) return cft__fail_outs(cft__fail(CFT_E_TRACE, "linearize: trace stack full"), m, outs);
    cft_array *P[n > 0 ? n : 1], *T[n > 0 ? n : 1], *y[m], *ty[m], *staged[2 * m];
    for (int i = 0; i < n; i++) P[i] = cft__stage_input(s, &primals[i]->aval);
    for (int i = 0; i < n; i++) T[i] = diff[i] ? cft__stage_input(s, &primals[i]->aval) : NULL;
    cft_status rc = cft__jvp_apply(f, P, T, y, ty);
    if (rc != CFT_OK) {
        cft__stage_abort(s);
        return cft__fail_outs(y[0], m, outs);
    }
    int nt = 0;
    int *tan_of = CFT_NEWN(int, m + 1); /* linear output k is f's output tan_of[k] */
    for (int j = 0; j < m; j++) staged[j] = y[j];
    for (int j = 0; j < m; j++)
        if (!need_tangent || need_tangent[j]) {
            tan_of[nt] = j;
            staged[m + nt++] = cft__inst(ty[j], &y[j]->aval);
        }
    cft_ir *ir = cft__stage_end(s, m + nt, staged);
    if (!ir) return cft__fail_outs(cft__fail(cft_last_error(), "%s", cft_last_error_message()), m, outs);

    /* partial evaluation */
    bool *known = CFT_NEWN(bool, ir->nvars + 1), *res_mark = CFT_NEWN(bool, ir->nvars + 1);
    bool *keq = CFT_NEWN(bool, ir->neqn + 1);
    for (int i = 0; i < ir->nconst; i++) known[ir->constvars[i]->id] = true;
    for (int i = 0; i < n; i++) known[ir->invars[i]->id] = true;
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        bool all = true;
        for (int i = 0; i < q->nin; i++) all &= known[q->in[i]->id];
        keq[k] = all;
        for (int i = 0; i < q->nout; i++) known[q->out[i]->id] = all;
        if (!all)
            for (int i = 0; i < q->nin; i++)
                if (known[q->in[i]->id]) res_mark[q->in[i]->id] = true;
    }
    for (int k = 0; k < nt; k++)
        if (known[ir->outvars[m + k]->id]) res_mark[ir->outvars[m + k]->id] = true;
    for (int j = 0; j < m; j++)
        if (!known[ir->outvars[j]->id])
            return cft__fail_outs(cft__fail(CFT_E_TRACE, "linearize: output %d depends on tangents", j), m, outs);
    int nres = 0;
    cft_irvar **resv = CFT_NEWN(cft_irvar *, ir->nvars + 1);
    /* collect residual vars in a stable order: constants, primals, then eqn outputs */
    for (int i = 0; i < ir->nconst; i++)
        if (res_mark[ir->constvars[i]->id]) resv[nres++] = ir->constvars[i], res_mark[ir->constvars[i]->id] = false;
    for (int i = 0; i < n; i++)
        if (res_mark[ir->invars[i]->id]) resv[nres++] = ir->invars[i], res_mark[ir->invars[i]->id] = false;
    for (int k = 0; k < ir->neqn; k++)
        for (int i = 0; i < ir->eqns[k].nout; i++)
            if (res_mark[ir->eqns[k].out[i]->id]) resv[nres++] = ir->eqns[k].out[i], res_mark[ir->eqns[k].out[i]->id] = false;

    cft_ir kn = {0}, ln = {0};
    kn.nconst = ir->nconst, kn.constvars = ir->constvars, kn.constvals = ir->constvals;
    kn.nin = n, kn.invars = ir->invars;
    kn.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    ln.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    for (int k = 0; k < ir->neqn; k++) {
        if (keq[k])
            kn.eqns[kn.neqn++] = ir->eqns[k];
        else
            ln.eqns[ln.neqn++] = ir->eqns[k];
    }
    kn.nout = m + nres;
    kn.outvars = CFT_NEWN(cft_irvar *, m + nres + 1);
    for (int j = 0; j < m; j++) kn.outvars[j] = ir->outvars[j];
    for (int r = 0; r < nres; r++) kn.outvars[m + r] = resv[r];
    int ndiff = 0;
    for (int i = 0; i < n; i++) ndiff += diff[i];
    ln.nin = nres + ndiff;
    ln.invars = CFT_NEWN(cft_irvar *, ln.nin + 1);
    for (int r = 0; r < nres; r++) ln.invars[r] = resv[r];
    for (int i = 0, k = 0; i < n; i++)
        if (diff[i]) {
            ln.invars[nres + k] = ir->invars[n + k]; /* tangent inputs follow the primals */
            k++;
        }
    ln.nout = nt;
    ln.outvars = CFT_NEWN(cft_irvar *, nt + 1);
    for (int k = 0; k < nt; k++) ln.outvars[k] = ir->outvars[m + k];

    cft_ir *kir = cft__ir_finish(&kn);
    cft_array **vals = CFT_NEWN(cft_array *, m + nres + 1);
    rc = cft_ir_eval(kir, primals, vals);
    if (rc != CFT_OK) return cft__fail_outs(vals[0], m, outs);
    for (int j = 0; j < m; j++) outs[j] = vals[j];

    cft_lin *lin = CFT_NEW(cft_lin);
    lin->lin = cft__ir_dce_outputs(cft__ir_finish(&ln), NULL);
    lin->nres = nres;
    lin->res = vals + m;
    lin->nin = n;
    lin->nout = m;
    lin->diff = CFT_NEWN(bool, n + 1);
    memcpy(lin->diff, diff, sizeof(bool) * (size_t)n);
    lin->in_avals = CFT_NEWN(cft_aval, n + 1);
    lin->out_avals = CFT_NEWN(cft_aval, m + 1);
    for (int i = 0; i < n; i++) lin->in_avals[i] = primals[i]->aval;
    for (int j = 0; j < m; j++) lin->out_avals[j] = outs[j]->aval;
    lin->tan_of = tan_of;
    *linp = lin;
    return CFT_OK;
}
