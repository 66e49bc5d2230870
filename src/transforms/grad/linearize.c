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
    if (!s)
        return cft__fail_outs(cft__fail(CFT_E_TRACE, "linearize: trace stack full"), m, outs);
    cft_array *P[n > 0 ? n : 1], *T[n > 0 ? n : 1], *y[m], *ty[m], *staged[2 * m];
    for (int i = 0; i < n; i++)
        P[i] = cft__stage_input(s, &primals[i]->aval);
    for (int i = 0; i < n; i++)
        T[i] = diff[i] ? cft__stage_input(s, &primals[i]->aval) : NULL;
    cft_status rc = cft__jvp_apply(f, P, T, y, ty);
    if (rc != CFT_OK) {
        cft__stage_abort(s);
        return cft__fail_outs(y[0], m, outs);
    }
    int nt = 0;
    int *tan_of = CFT_NEWN(int, m + 1); /* linear output k is f's output tan_of[k] */
    for (int j = 0; j < m; j++)
        staged[j] = y[j];
    for (int j = 0; j < m; j++)
        if (!need_tangent || need_tangent[j]) {
            tan_of[nt] = j;
            staged[m + nt++] = cft__inst(ty[j], &y[j]->aval);
        }
    cft_ir *ir = cft__stage_end(s, m + nt, staged);
    if (!ir)
        return cft__fail_outs(cft__fail(cft_last_error(), "%s", cft_last_error_message()), m, outs);

    /* partial evaluation: primals known, tangents not */
    int ndiff = 0;
    for (int i = 0; i < n; i++)
        ndiff += diff[i];
    bool *in_known = CFT_NEWN(bool, n + ndiff + 1), *want_u = CFT_NEWN(bool, m + nt + 1);
    bool *out_known = CFT_NEWN(bool, m + nt + 1);
    for (int i = 0; i < n; i++)
        in_known[i] = true;
    for (int k = 0; k < nt; k++)
        want_u[m + k] = true;
    cft_ir_split *sp = cft__split_ir(ir, in_known, want_u, out_known);
    if (!sp)
        return cft__fail_outs(cft__fail(CFT_E_TRACE, "linearize: %s", cft_last_error_message()), m,
                              outs);
    int nres = sp->nres;
    cft_ir *kir = sp->known;
    cft_array **vals = CFT_NEWN(cft_array *, m + nres + 1);
    rc = cft_ir_eval(kir, primals, vals);
    if (rc != CFT_OK)
        return cft__fail_outs(vals[0], m, outs);
    for (int j = 0; j < m; j++)
        outs[j] = vals[j];

    cft_lin *lin = CFT_NEW(cft_lin);
    lin->lin = sp->unknown;
    lin->nres = nres;
    lin->res = vals + m;
    lin->nin = n;
    lin->nout = m;
    lin->diff = CFT_NEWN(bool, n + 1);
    memcpy(lin->diff, diff, sizeof(bool) * (size_t)n);
    lin->in_avals = CFT_NEWN(cft_aval, n + 1);
    lin->out_avals = CFT_NEWN(cft_aval, m + 1);
    for (int i = 0; i < n; i++)
        lin->in_avals[i] = primals[i]->aval;
    for (int j = 0; j < m; j++)
        lin->out_avals[j] = outs[j]->aval;
    lin->tan_of = tan_of;
    lin->res_src = CFT_NEWN(const char *, nres + 1);
    for (int r = 0; r < nres;
         r++) { /* where each residual comes from, for cft_print_saved_residuals */
        const cft_irvar *v = kir->outvars[m + r];
        lin->res_src[r] = "input";
        for (int i = 0; i < kir->nconst; i++)
            if (kir->constvars[i] == v)
                lin->res_src[r] = "const";
        for (int k = 0; k < kir->neqn; k++)
            for (int o = 0; o < kir->eqns[k].nout; o++)
                if (kir->eqns[k].out[o] == v)
                    lin->res_src[r] = kir->eqns[k].prim->name;
    }
    *linp = lin;
    return CFT_OK;
}
