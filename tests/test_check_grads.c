/* test_check_grads.c: eval_shape gives the avals without running (a
 * function whose callback counts its calls), and check_grads passes on
 * correct derivatives (orders 1 to 3, both modes) and catches a custom
 * rule with a wrong jvp (the check that must fail does fail, naming the
 * mode). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

static int calls;
static cft_status f(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    calls++;
    out[0] = cft_add(cft_sum(cft_exp(cft_matmul(in[1], in[0])), NULL, 0, false),
                     cft_sum(cft_mul(cft_sin(in[0]), in[0]), NULL, 0, false));
    out[1] = cft_tanh(cft_matmul(in[1], in[0]));
    return CFT_OK;
}

/* sin with a jvp that is off by a factor (a wrong rule to catch) */
static cft_status bad(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *x = in[0];
    /* y = x^3 computed as x * x * x, but "x^3" through a stop_gradient
     * pathway that loses one factor: d/dx = 2 x^2 instead of 3 x^2 */
    out[0] = cft_mul(cft_mul(x, x), cft_stop_gradient(x));
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_fn *fn = cft_fn_new(f, NULL, 2, 2);
    TEST("eval_shape: avals without running the function") {
        cft_aval in[2] = {{CFT_F32, 1, {3}}, {CFT_F32, 2, {4, 3}}}, out[2];
        calls = 0;
        CHECK_EQ(cft_eval_shape(fn, in, out), CFT_OK);
        CHECK_EQ(out[0].ndim, 0);
        CHECK_EQ(out[1].ndim, 1);
        CHECK_EQ(out[1].shape[0], 4);
        CHECK_EQ(out[1].dtype, CFT_F32);
        CHECK_EQ(calls, 1); /* traced once, on tracers: nothing computed */
        cft_aval badin[2] = {{CFT_F32, 1, {3}}, {CFT_F32, 2, {4, 5}}};
        CHECK(cft_eval_shape(fn, badin, out) != CFT_OK);
    }
    TEST("check_grads passes on correct derivatives, orders 1 to 3") {
        cft_array *x[2] = {
            cft_random_normal(cft_random_key(1), CFT_F64, (int64_t[]){3}, 1),
            cft_mul_s(cft_random_normal(cft_random_key(2), CFT_F64, (int64_t[]){4, 3}, 2), 0.3)};
        for (int order = 1; order <= 3; order++)
            CHECK_MSG(cft_check_grads(fn, x, order, CFT_CHECK_FWD | CFT_CHECK_REV, 1e-4, 1e-6,
                                      1e-5) == CFT_OK,
                      "order %d: %s", order, cft_last_error_message());
    }
    TEST("check_grads catches a wrong derivative") {
        cft_array *x = cft_random_normal(cft_random_key(3), CFT_F64, (int64_t[]){5}, 1);
        cft_fn *b = cft_fn_new(bad, NULL, 1, 1);
        CHECK(cft_check_grads(b, &x, 1, CFT_CHECK_FWD, 0, 0, 0) != CFT_OK);
        CHECK(strstr(cft_last_error_message(), "forward mode") != NULL);
        /* reverse against forward still agree (both use the same wrong rule) */
        CHECK_EQ(cft_check_grads(b, &x, 1, CFT_CHECK_REV, 0, 0, 0), CFT_OK);
        CHECK(cft_check_grads(b, &x, 1, 0, 0, 0, 0) != CFT_OK); /* no mode */
        cft_array *xi = cft_astype(x, CFT_I32);
        CHECK(cft_check_grads(b, &xi, 1, CFT_CHECK_FWD, 0, 0, 0) != CFT_OK);
    }
    return check_summary();
}
