/* linearize_public.c: jax.linearize and jax.linear_transpose. linearize
 * evaluates f once and returns its jvp at that point as a function of the
 * tangents alone: the linear IR with its residuals (cft__linearize), so a
 * later call computes no primal value again. linear_transpose of a
 * function linear in its inputs is its pullback at zero inputs. */
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "prims/rules.h"
#include "trace/fn.h"
#include "trace/ir.h"
#include "transforms/transforms.h"

/* tangents of f's inputs -> tangents of its outputs */
static cft_status lin_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    const cft_lin *lin = env;
    const cft_ir *ir = lin->lin;
    cft_array **args = CFT_NEWN(cft_array *, ir->nin + 1),
              **res = CFT_NEWN(cft_array *, ir->nout + 1);
    if (!args || !res)
        return cft__fail_outs(cft__oom(), nout, out);
    for (int i = 0; i < nin; i++)
        if (!cft__aval_eq(&in[i]->aval, &lin->in_avals[i]))
            return cft__fail_outs(cft__fail(CFT_E_SHAPE,
                                            "cft_linearize: tangent %d is %s, its primal is %s", i,
                                            cft__av(&in[i]->aval), cft__av(&lin->in_avals[i])),
                                  nout, out);
    memcpy(args, lin->res, sizeof(cft_array *) * (size_t)lin->nres);
    int k = lin->nres;
    for (int i = 0; i < nin; i++)
        if (lin->diff[i])
            args[k++] = in[i];
    cft_status st = cft__ir_eval_with(ir, ir->constvals, args, res);
    if (st != CFT_OK)
        return cft__fail_outs(cft__fail(st, "%s", cft_last_error_message()), nout, out);
    for (int j = 0; j < nout; j++)
        out[j] = NULL;
    for (int r = 0; r < ir->nout; r++) /* linear output r is output tan_of[r]'s tangent */
        out[lin->tan_of[r]] = res[r];
    for (int j = 0; j < nout; j++) /* outputs that do not depend on the inputs */
        out[j] = cft__inst(out[j], &lin->out_avals[j]);
    return CFT_OK;
}

cft_status cft_linearize(cft_fn *f, cft_array *const *primals, cft_array **outs, cft_fn **jvp_fn) {
    CFT_API("cft_linearize");
    cft_fn *bad = cft__fn_check("cft_linearize", f);
    if (bad || !jvp_fn || (!primals && f->nin)) {
        if (jvp_fn)
            *jvp_fn = bad ? bad : cft__fn_fail(1, 1, CFT_E_ARG, "cft_linearize: bad arguments");
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_linearize: a function and its primals"));
    }
    bool *diff = CFT_NEWN(bool, f->nin + 1);
    if (!diff)
        return cft__set_last(cft__oom());
    for (int i = 0; i < f->nin; i++) {
        if (!primals[i] || cft_failed(primals[i]))
            return cft__fail_outs(primals[i] ? primals[i]
                                             : cft__fail(CFT_E_ARG,
                                                         "cft_linearize: primal %d "
                                                         "is NULL",
                                                         i),
                                  f->nout, outs);
        diff[i] = cft_dtype_is_inexact(primals[i]->aval.dtype);
    }
    cft_lin *lin;
    cft_status st = cft__linearize(f, primals, diff, NULL, outs, &lin);
    if (st != CFT_OK) {
        *jvp_fn = cft__fn_fail(f->nin, f->nout, st, "%s", cft_last_error_message());
        return st;
    }
    *jvp_fn = cft_fn_named(cft_fn_new(lin_cb, lin, f->nin, f->nout), "linearized");
    return CFT_OK;
}

typedef struct {
    cft_fn *f;
    cft_aval *in;
} lt_env;

static cft_status lt_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    lt_env *e = env;
    (void)nin;
    cft_array **zeros = CFT_NEWN(cft_array *, nout + 1), **ys = CFT_NEWN(cft_array *, nin + 1);
    if (!zeros || !ys)
        return cft__fail_outs(cft__oom(), nout, out);
    for (int i = 0; i < nout; i++) /* the transpose's outputs: f's inputs */
        zeros[i] = cft_zeros(e->in[i].dtype, e->in[i].shape, e->in[i].ndim);
    cft_fn *pb;
    cft_status st = cft_vjp(e->f, zeros, ys, &pb);
    if (st != CFT_OK)
        return cft__fail_outs(cft__fail(st, "%s", cft_last_error_message()), nout, out);
    return cft_fn_call(pb, in, out);
}

cft_fn *cft_linear_transpose(cft_fn *f, const cft_aval *in_avals) {
    CFT_API("cft_linear_transpose");
    cft_fn *bad = cft__fn_check("cft_linear_transpose", f);
    if (bad)
        return bad;
    if (!in_avals && f->nin)
        return cft__fn_fail(f->nout, f->nin, CFT_E_ARG,
                            "cft_linear_transpose: the input avals are NULL");
    lt_env *e = CFT_NEW(lt_env);
    if (!e || !(e->in = CFT_NEWN(cft_aval, f->nin + 1)))
        return cft__fn_error(cft__oom(), f->nout, f->nin);
    memcpy(e->in, in_avals, sizeof(cft_aval) * (size_t)f->nin);
    e->f = f;
    return cft_fn_named(cft_fn_new(lt_cb, e, f->nout, f->nin), "linear_transpose");
}
