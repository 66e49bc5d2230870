/* check_grads.c: eval_shape and check_grads (jax.eval_shape,
 * jax.test_util.check_grads). check_grads compares, at the given inputs,
 * forward mode with central differences along a random direction, and
 * reverse mode with forward mode by the dot-product test, for every
 * output; order 2 repeats the checks on the function's jvp along a fixed
 * direction (so second derivatives are checked too). A failure is an
 * error naming the mode, the order, the output and the two numbers. */
#include <math.h>
#include <stdio.h>

#include "cft/random.h"
#include "core/error.h"
#include "core/mem.h"
#include "prims/rules.h"
#include "trace/fn.h"
#include "trace/ir.h"

cft_status cft_eval_shape(cft_fn *f, const cft_aval *in, cft_aval *out) {
    CFT_API("cft_eval_shape");
    if (!f || cft_fn_failed(f) || (!in && cft_fn_nin(f)) || !out)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_eval_shape: a function and its avals"));
    cft_ir *ir = cft_make_ir(f, in);
    if (!ir)
        return cft_last_error();
    for (int j = 0; j < ir->nout; j++)
        out[j] = ir->outvars[j]->aval;
    return CFT_OK;
}

static double dot_all(cft_array *const *a, cft_array *const *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += cft_item(cft_sum(cft_astype(cft_mul(a[i], b[i]), CFT_F64), NULL, 0, false));
    return s;
}

/* (x, fixed tangents t) -> the output tangents: f's jvp along t, as a function */
typedef struct {
    cft_fn *f;
    cft_array **t;
} along;
static cft_status jvp_along(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    along *a = env;
    cft_array **args = CFT_NEWN(cft_array *, 2 * nin + 1),
              **res = CFT_NEWN(cft_array *, 2 * nout + 1);
    if (!args || !res)
        return cft__fail_outs(cft__oom(), nout, out);
    for (int i = 0; i < nin; i++)
        args[i] = in[i], args[nin + i] = a->t[i];
    cft_status st = cft_fn_call(cft_jvp(a->f), args, res);
    for (int j = 0; j < nout; j++)
        out[j] = res[nout + j];
    return st;
}

static cft_array **directions(uint64_t seed, cft_array *const *like, int n) {
    cft_array **t = CFT_NEWN(cft_array *, n + 1);
    cft_array *keys = cft_random_split(cft_random_key(seed), n > 0 ? n : 1);
    for (int i = 0; t && i < n; i++) {
        cft_aval a = cft_array_aval(like[i]);
        t[i] = cft_random_normal(cft_index(keys, i), a.dtype, a.shape, a.ndim);
    }
    return t;
}

static cft_status check1(cft_fn *f, cft_array *const *x, int order, bool fwd, bool rev, double eps,
                         double atol, double rtol) {
    int nin = cft_fn_nin(f), nout = cft_fn_nout(f);
    cft_array **t = directions(1 + (uint64_t)order, x, nin);
    cft_array **args = CFT_NEWN(cft_array *, 2 * nin + 1),
              **res = CFT_NEWN(cft_array *, 2 * nout + 1);
    cft_array **xp = CFT_NEWN(cft_array *, nin + 1), **xm = CFT_NEWN(cft_array *, nin + 1);
    cft_array **yp = CFT_NEWN(cft_array *, nout + 1), **ym = CFT_NEWN(cft_array *, nout + 1);
    if (!t || !args || !res || !xp || !xm || !yp || !ym)
        return cft__set_last(cft__oom());
    for (int i = 0; i < nin; i++)
        args[i] = x[i], args[nin + i] = t[i];
    cft_status st = cft_fn_call(cft_jvp(f), args, res);
    if (st != CFT_OK)
        return st;
    cft_array **tan = res + nout;
    if (fwd) {
        for (int i = 0; i < nin; i++) {
            xp[i] = cft_add(x[i], cft_mul_s(t[i], eps));
            xm[i] = cft_sub(x[i], cft_mul_s(t[i], eps));
        }
        if ((st = cft_fn_call(f, xp, yp)) != CFT_OK || (st = cft_fn_call(f, xm, ym)) != CFT_OK)
            return st;
        for (int j = 0; j < nout; j++) {
            cft_array *fd = cft_mul_s(cft_sub(yp[j], ym[j]), 0.5 / eps);
            cft_array *err = cft_abs(cft_sub(fd, tan[j]));
            cft_array *lim = cft_add_s(cft_mul_s(cft_abs(fd), rtol), atol);
            double worst =
                cft_item(cft_max(cft_astype(cft_sub(err, lim), CFT_F64), NULL, 0, false));
            if (worst > 0) {
                double e = cft_item(cft_max(cft_astype(err, CFT_F64), NULL, 0, false));
                return cft__set_last(cft__fail(
                    CFT_E_ARG,
                    "cft_check_grads: order %d, forward mode: output %d's jvp differs from "
                    "central differences (eps %g) by up to %g (atol %g, rtol %g)",
                    order, j, eps, e, atol, rtol));
            }
        }
    }
    if (rev) {
        cft_array **ys = CFT_NEWN(cft_array *, nout + 1), **cts = CFT_NEWN(cft_array *, nin + 1);
        cft_fn *pb = NULL;
        if (!ys || !cts)
            return cft__set_last(cft__oom());
        if ((st = cft_vjp(f, x, ys, &pb)) != CFT_OK)
            return st;
        cft_array **ct = directions(100 + (uint64_t)order, ys, nout);
        if ((st = cft_fn_call(pb, ct, cts)) != CFT_OK)
            return st;
        double lhs = dot_all(ct, tan, nout), rhs = dot_all(cts, t, nin);
        if (fabs(lhs - rhs) > atol + rtol * fabs(lhs))
            return cft__set_last(cft__fail(
                CFT_E_ARG,
                "cft_check_grads: order %d, reverse mode: <ct, J t> = %.17g but <J^T ct, t> = "
                "%.17g (atol %g, rtol %g)",
                order, lhs, rhs, atol, rtol));
    }
    return CFT_OK;
}

cft_status cft_check_grads(cft_fn *f, cft_array *const *x, int order, unsigned modes, double eps,
                           double atol, double rtol) {
    CFT_API("cft_check_grads");
    if (!f || cft_fn_failed(f) || (!x && cft_fn_nin(f)) || order < 1 || order > 3 ||
        !(modes & (CFT_CHECK_FWD | CFT_CHECK_REV)))
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_check_grads: a function, its inputs, order 1 to 3 "
                                       "and at least one mode"));
    for (int i = 0; i < cft_fn_nin(f); i++)
        if (!x[i] || cft_failed(x[i]) || !cft_dtype_is_float(cft_array_dtype(x[i])))
            return cft__set_last(cft__fail(CFT_E_DTYPE,
                                           "cft_check_grads: input %d must be a float array (f64 "
                                           "recommended)",
                                           i));
    if (eps <= 0)
        eps = 1e-4;
    if (atol <= 0)
        atol = 1e-5;
    if (rtol <= 0)
        rtol = 1e-5;
    cft_fn *g = f;
    for (int k = 1; k <= order; k++) {
        cft_status st =
            check1(g, x, k, modes & CFT_CHECK_FWD, modes & CFT_CHECK_REV, eps, atol, rtol);
        if (st != CFT_OK)
            return st;
        if (k < order) { /* the next order: the jvp along a fixed direction */
            along *a = CFT_NEW(along);
            if (!a)
                return cft__set_last(cft__oom());
            a->f = g;
            a->t = directions(1000 + (uint64_t)k, x, cft_fn_nin(g));
            g = cft_fn_new(jvp_along, a, cft_fn_nin(g), cft_fn_nout(g));
        }
    }
    return CFT_OK;
}
