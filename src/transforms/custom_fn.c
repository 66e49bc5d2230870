/* custom_fn.c: custom_jvp and custom_vjp for ordinary traceable functions
 * (JAX's custom_jvp(f) + defjvp, custom_vjp(f) + defvjp): the function
 * becomes a custom op (prims/custom.c) whose shape rule traces f, whose
 * kernel calls f, whose batching is vmap(f), and whose derivative is the
 * rule given: a few lines where a hand-written kernel, shape function and
 * definition struct took twenty. */
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "trace/fn.h"
#include "cft/custom.h"

static cft_status shape_cb(void *env, const cft_aval *in, cft_aval *out) {
    return cft_eval_shape(env, in, out);
}
static cft_status impl_cb(void *env, cft_array *const *in, cft_array **out) {
    return cft_fn_call(env, in, out);
}

static cft_fn *make(const char *call, cft_fn *f, cft_fn *jvp, cft_fn *fwd, cft_fn *bwd, int nres) {
    cft_fn *bad = cft__fn_check(call, f);
    if (bad)
        return bad;
    cft_custom_def *d = CFT_NEW(cft_custom_def);
    if (!d)
        return cft__fn_error(cft__oom(), f->nin, f->nout);
    d->name = f->name ? f->name : call + 4; /* "custom_jvp" / "custom_vjp" */
    d->nin = f->nin, d->nout = f->nout;
    d->shape = shape_cb, d->impl = impl_cb, d->env = f;
    d->jvp = jvp, d->vjp_fwd = fwd, d->vjp_bwd = bwd, d->nres = nres;
    d->vmap = cft_vmap(f, NULL, NULL);
    cft_fn *op = cft_custom_op(d);
    return op ? op
              : cft__fn_fail(f->nin, f->nout, cft_last_error(), "%s: %s", call,
                             cft_last_error_message());
}

cft_fn *cft_custom_jvp(cft_fn *f, cft_fn *jvp) {
    CFT_API("cft_custom_jvp");
    if (!jvp || cft_fn_failed(jvp))
        return cft__fn_fail(f ? f->nin : 1, f ? f->nout : 1, CFT_E_ARG,
                            "cft_custom_jvp: needs a jvp rule (primals, tangents) -> tangents");
    return make("cft_custom_jvp", f, jvp, NULL, NULL, 0);
}

cft_fn *cft_custom_vjp(cft_fn *f, cft_fn *fwd, cft_fn *bwd, int nres) {
    CFT_API("cft_custom_vjp");
    if (!fwd || !bwd || cft_fn_failed(fwd) || cft_fn_failed(bwd) || nres < 0)
        return cft__fn_fail(f ? f->nin : 1, f ? f->nout : 1, CFT_E_ARG,
                            "cft_custom_vjp: needs fwd (primals -> outputs, residuals), bwd "
                            "(residuals, cotangents -> input cotangents) and nres >= 0");
    return make("cft_custom_vjp", f, NULL, fwd, bwd, nres);
}
