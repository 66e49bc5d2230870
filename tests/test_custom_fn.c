/* test_custom_fn.c: custom_jvp and custom_vjp of ordinary traceable
 * functions, in the few lines JAX needs. The custom jvp of
 * softplus(x) = log(1 + e^x), t * sigmoid(x), keeps the gradient finite at
 * x = 1000 (where the plain formula's e^x overflows); its values, vmap and
 * jit are f's own; the rule's jvp gives a Hessian. A custom vjp that clips
 * the cotangent (gradient clipping) changes grad and nothing else. f64,
 * exact or 1e-14. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "cft/custom.h"
#include "check.h"

static cft_status softplus(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_log1p(cft_exp(in[0]));
    return CFT_OK;
}
static cft_status softplus_jvp(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul(in[1], cft_logistic(in[0]));
    return CFT_OK;
}

static cft_status scale(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul_s(in[0], 3);
    return CFT_OK;
}
static cft_status scale_fwd(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul_s(in[0], 3);
    out[1] = in[0]; /* a residual (unused by bwd, kept to test nres) */
    return CFT_OK;
}
static cft_status scale_bwd(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_clamp(cft_mul_s(in[1], 3), cft_scalar(-1, CFT_F64), cft_scalar(1, CFT_F64));
    return CFT_OK;
}
static cft_fn *sumof(cft_fn *f);
static cft_status sum_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *y = cft_fn_call1(env, in);
    out[0] = cft_sum(y, NULL, 0, false);
    return cft_failed(y) ? cft_last_error() : CFT_OK;
}
static cft_fn *sumof(cft_fn *f) {
    return cft_fn_new(sum_cb, f, 1, 1);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_fn *plain = cft_fn_new(softplus, NULL, 1, 1);
    cft_fn *sp = cft_custom_jvp(plain, cft_fn_new(softplus_jvp, NULL, 2, 1));
    CHECK(!cft_fn_failed(sp));
    double v[4] = {-3, 0, 2, 1000};
    cft_array *x = cft_from_data(v, CFT_F64, (int64_t[]){4}, 1);
    TEST("custom_jvp: the rule differentiates, f evaluates") {
        cft_array *g = cft_fn_call1(cft_grad(sumof(sp), NULL, 0), &x);
        for (int i = 0; i < 4; i++)
            CHECK_CLOSE(cft_item_at(g, i), 1 / (1 + exp(-v[i])), 1e-14, 1e-14);
        cft_array *g0 = cft_fn_call1(cft_grad(sumof(plain), NULL, 0), &x);
        CHECK(isnan(cft_item_at(g0, 3)) || isinf(cft_item_at(g0, 3)) || cft_item_at(g0, 3) != 1);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_jit(sp), &x), cft_fn_call1(plain, &x), 0, 0);
        cft_array *xb = cft_reshape(cft_arange(-2, 4, 1, CFT_F64), (int64_t[]){2, 3}, 2);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_vmap(sp, NULL, NULL), &xb), cft_fn_call1(plain, &xb), 0,
                          0);
        /* second order through the rule: d/dx sigmoid(x) = s (1 - s) */
        cft_array *x1 = cft_scalar(0.5, CFT_F64);
        double s = 1 / (1 + exp(-0.5));
        CHECK_CLOSE(cft_item(cft_fn_call1(cft_hessian(sp, 0), &x1)), s * (1 - s), 1e-14, 1e-14);
        CHECK(cft_check_grads(sp, &x1, 2, CFT_CHECK_FWD | CFT_CHECK_REV, 0, 0, 0) == CFT_OK);
    }
    TEST("custom_vjp: a clipped cotangent changes grad only") {
        cft_fn *sc =
            cft_custom_vjp(cft_fn_new(scale, NULL, 1, 1), cft_fn_new(scale_fwd, NULL, 1, 2),
                           cft_fn_new(scale_bwd, NULL, 2, 1), 1);
        CHECK(!cft_fn_failed(sc));
        CHECK_ARRAY_CLOSE(cft_fn_call1(sc, &x), cft_mul_s(x, 3), 0, 0);
        cft_array *g = cft_fn_call1(cft_grad(sumof(sc), NULL, 0), &x); /* 3 clipped to 1 */
        CHECK_ARRAY_CLOSE(g, cft_ones_like(x), 0, 0);
        CHECK(cft_fn_failed(cft_custom_vjp(cft_fn_new(scale, NULL, 1, 1), NULL, NULL, 0)));
    }
    return check_summary();
}
