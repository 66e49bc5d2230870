/* autocast.c: mixed precision as a transform (torch.autocast, JAX's
 * mixed-precision policies). An autocast tracer wraps the value below it;
 * processing a primitive reads the placement flag in the primitive's record
 * (CFT_PRIM_AMP_LOW: matrix products and convolutions), casts the operands
 * down, binds the primitive below and casts the results back. The casts
 * are ordinary convert_element_type operations, so grad differentiates
 * through them (gradients reach f32 inputs as f32), vmap batches them, and
 * the jit and export see them in the IR. Low-dtype operations accumulate
 * in f32 (f16 and bf16 are storage types: every kernel computes in f32 and
 * rounds on store). */
#include "cft/amp.h"
#include "cft/ops.h"
#include "core/error.h"
#include "core/mem.h"
#include "trace/fn.h"
#include "trace/trace.h"
#include "transforms/transforms.h"

typedef struct {
    cft_fn *f;
    cft_dtype low;
} autocast_env;

/* p under autocast to `low`: an AMP_LOW primitive runs on its f32 operands
 * cast to the low dtype (unless an f64 or complex operand says the caller
 * wants more precision: torch leaves doubles alone), and its outputs are
 * cast back to the dtypes they have without autocast, so that every
 * consumer (an IR evaluated equation by equation, a rule, a loop body)
 * sees the avals it was traced with. Other primitives run as they are. */
static cft_array *cast_process(cft_trace *t, const cft_prim *p, const cft_params *par, int nin,
                               cft_array *const *in, cft_array **out) {
    const autocast_env *a = t->state;
    int nout = cft__nout(p, par, nin);
    cft_array *x[nin > 0 ? nin : 1], *y[nout > 0 ? nout : 1];
    bool low = (p->flags & CFT_PRIM_AMP_LOW) != 0;
    for (int i = 0; i < nin; i++) {
        x[i] = in[i]->u.cast.val;
        cft_dtype dt = x[i]->aval.dtype;
        low &= dt != CFT_F64 && !cft_dtype_is_complex(dt);
    }
    cft_aval want[nout > 0 ? nout : 1];
    if (low) {
        cft_aval av[nin > 0 ? nin : 1];
        for (int i = 0; i < nin; i++)
            av[i] = x[i]->aval;
        cft_array *e = cft__abstract_eval(p, par, nin, av, want);
        if (e)
            return e;
        for (int i = 0; i < nin; i++)
            if (x[i]->aval.dtype == CFT_F32) {
                x[i] = cft_astype(x[i], a->low);
                if (cft_failed(x[i]))
                    return x[i];
            }
    }
    cft_array *e = cft__bind(p, par, nin, x, nout, y);
    if (e)
        return e;
    for (int j = 0; j < nout; j++) {
        if (low && y[j]->aval.dtype != want[j].dtype)
            y[j] = cft_astype(y[j], want[j].dtype);
        out[j] = cft__wrap_box(t, y[j]);
        if (cft_failed(out[j]))
            return out[j];
    }
    return NULL;
}

static const cft_trace_vt cast_vt = {"autocast", cast_process, cft__wrap_lift, NULL};

static cft_status autocast_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    autocast_env *a = env;
    return cft__wrap_apply(&cast_vt, a, a->f, "cft_autocast", nin, in, nout, out);
}

cft_fn *cft_autocast(cft_fn *f, cft_dtype low) {
    CFT_API("cft_autocast");
    cft_fn *bad = cft__fn_check("cft_autocast", f);
    if (bad)
        return bad;
    if (low != CFT_BF16 && low != CFT_F16)
        return cft__fn_fail(f->nin, f->nout, CFT_E_DTYPE,
                            "cft_autocast: the low dtype must be bf16 or f16, not %s",
                            (unsigned)low < CFT_NDTYPES ? cft_dtype_name(low) : "unknown");
    autocast_env *a = CFT_NEW(autocast_env);
    if (!a)
        return cft__fn_error(cft__oom(), f->nin, f->nout);
    a->f = f, a->low = low;
    return cft_fn_named(cft_fn_new(autocast_cb, a, f->nin, f->nout),
                        low == CFT_BF16 ? "autocast_bf16" : "autocast_f16");
}
