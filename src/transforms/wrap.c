/* wrap.c: tracers that wrap the value below them (u.cast.val) without a
 * payload of their own: autocast's and quantization's. Processing a
 * primitive changes its operands and binds it below; these are the parts
 * such traces share: boxing, lifting, and applying f under the trace. */
#include "core/error.h"
#include "transforms/transforms.h"
#include "trace/trace.h"

cft_array *cft__wrap_box(cft_trace *t, cft_array *v) {
    if (cft_failed(v))
        return v;
    cft_array *x = cft__tracer(t, &v->aval);
    if (cft_failed(x))
        return x;
    x->u.cast.val = v;
    return x;
}

cft_array *cft__wrap_lift(cft_trace *t, cft_array *x) {
    return cft__wrap_box(t, x);
}

cft_status cft__wrap_apply(const cft_trace_vt *vt, void *state, cft_fn *f, const char *call,
                           int nin, cft_array *const *in, int nout, cft_array **out) {
    cft_trace *t = cft__trace_push(vt, state);
    if (!t)
        return cft__fail_outs(cft__fail(CFT_E_TRACE, "%s: trace stack full", call), nout, out);
    cft_array *x[nin > 0 ? nin : 1], *res[nout > 0 ? nout : 1];
    for (int i = 0; i < nin; i++)
        x[i] = cft__wrap_box(t, in[i]);
    cft_status st = cft__fn_apply(f, x, res);
    cft__trace_pop(t);
    for (int j = 0; j < nout; j++)
        out[j] = cft__is_tracer_of(res[j], t) ? res[j]->u.cast.val : res[j];
    return st;
}
