/* test_linearize.c: cft_linearize gives f's outputs and a function of the
 * tangents equal to cft_jvp's tangents (f64, 1e-13) that never runs f's
 * callback again; cft_linear_transpose of a linear map is its adjoint (the
 * dot-product identity, 1e-12) and equals the explicit transpose. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

static int calls;
static cft_status f(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    calls++;
    out[0] = cft_tanh(cft_matmul(in[1], in[0]));
    out[1] = cft_sum(cft_exp(in[0]), NULL, 0, false);
    return CFT_OK;
}
/* (x, W) -> (sum(exp x), tanh(W x)): a loss and an aux output */
static cft_status loss_aux(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_exp(in[0]), NULL, 0, false);
    out[1] = cft_tanh(cft_matmul(in[1], in[0]));
    return CFT_OK;
}
static cft_status loss_aux1(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_exp(in[0]), NULL, 0, false);
    return CFT_OK;
}
static cft_array *A;
static cft_status lin(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(cft_matmul(A, in[0]), cft_mul_s(in[0], 2)); /* A x + 2 x */
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_fn *fn = cft_fn_new(f, NULL, 2, 2);
    cft_array *x[2] = {cft_random_normal(cft_random_key(1), CFT_F64, (int64_t[]){3}, 1),
                       cft_random_normal(cft_random_key(2), CFT_F64, (int64_t[]){4, 3}, 2)};
    TEST("linearize: outputs, tangents as jvp's, and no second primal run") {
        cft_array *outs[2];
        cft_fn *j;
        CHECK_EQ(cft_linearize(fn, x, outs, &j), CFT_OK);
        cft_array *ref[2];
        CHECK_EQ(cft_fn_call(fn, x, ref), CFT_OK);
        CHECK_ARRAY_CLOSE(outs[0], ref[0], 1e-14, 1e-14);
        for (int k = 0; k < 3; k++) {
            cft_array *t[2] = {
                cft_random_normal(cft_random_key(10 + k), CFT_F64, (int64_t[]){3}, 1),
                cft_random_normal(cft_random_key(20 + k), CFT_F64, (int64_t[]){4, 3}, 2)};
            cft_array *args[4] = {x[0], x[1], t[0], t[1]}, *want[4], *got[2];
            CHECK_EQ(cft_fn_call(cft_jvp(fn), args, want), CFT_OK);
            int before = calls;
            CHECK_EQ(cft_fn_call(j, t, got), CFT_OK);
            CHECK_EQ(calls, before);
            CHECK_ARRAY_CLOSE(got[0], want[2], 1e-13, 1e-13);
            CHECK_ARRAY_CLOSE(got[1], want[3], 1e-13, 1e-13);
        }
        cft_array *wrong[2] = {x[1], x[1]}, *o[2];
        CHECK(cft_fn_call(j, wrong, o) != CFT_OK);
    }
    TEST("linear_transpose of a linear map is its adjoint") {
        A = cft_random_normal(cft_random_key(3), CFT_F64, (int64_t[]){3, 3}, 2);
        cft_aval in = {CFT_F64, 1, {3}};
        cft_fn *T = cft_linear_transpose(cft_fn_new(lin, NULL, 1, 1), &in);
        cft_array *ct = cft_random_normal(cft_random_key(4), CFT_F64, (int64_t[]){3}, 1);
        cft_array *got = cft_fn_call1(T, &ct);
        cft_array *want =
            cft_add(cft_matmul(cft_transpose(A, (int[]){1, 0}), ct), cft_mul_s(ct, 2));
        CHECK_ARRAY_CLOSE(got, want, 1e-13, 1e-13);
    }
    TEST("vmap_n checks the lengths of in_axes and out_axes") {
        cft_fn *v = cft_vmap_n(fn, (int[]){0, CFT_NOT_BATCHED}, 2, NULL, 0);
        CHECK(!cft_fn_failed(v));
        cft_array *xb = cft_random_normal(cft_random_key(7), CFT_F64, (int64_t[]){5, 3}, 2), *o[2];
        CHECK_EQ(cft_fn_call(v, (cft_array *[]){xb, x[1]}, o), CFT_OK);
        CHECK_EQ(cft_array_aval(o[0]).shape[0], 5);
        CHECK(cft_fn_failed(cft_vmap_n(fn, (int[]){0}, 1, NULL, 0)));
        CHECK(strstr(cft_fn_error_message(cft_vmap_n(fn, (int[]){0}, 1, NULL, 0)), "1 in_axes"));
        CHECK(cft_fn_failed(cft_vmap_n(fn, NULL, 0, (int[]){0, 0, 0}, 3)));
    }
    TEST("grad_with_aux: gradients, then the aux outputs untouched") {
        /* fn's outputs: (tanh(W x) vector, sum(exp x)): use a scalar loss + aux */
        cft_fn *g = cft_grad_with_aux(cft_fn_new(loss_aux, NULL, 2, 2), (int[]){0}, 1);
        cft_array *o[2];
        CHECK_EQ(cft_fn_call(g, x, o), CFT_OK);
        CHECK_ARRAY_CLOSE(o[0], cft_exp(x[0]), 1e-14, 1e-14); /* d sum(exp x) / dx */
        CHECK_ARRAY_CLOSE(o[1], cft_tanh(cft_matmul(x[1], x[0])), 1e-14, 1e-14);
    }
    TEST("vmap in chunks equals vmap (chunks dividing the batch or not)") {
        cft_array *xb = cft_random_normal(cft_random_key(8), CFT_F64, (int64_t[]){7, 3}, 2), *a[2],
                  *b[2];
        int ax[2] = {0, CFT_NOT_BATCHED};
        CHECK_EQ(cft_fn_call(cft_vmap(fn, ax, NULL), (cft_array *[]){xb, x[1]}, a), CFT_OK);
        for (int64_t chunk = 1; chunk <= 8; chunk += 3) {
            CHECK_EQ(cft_fn_call(cft_vmap_chunked(fn, ax, chunk), (cft_array *[]){xb, x[1]}, b),
                     CFT_OK);
            CHECK_ARRAY_CLOSE(b[0], a[0], 0, 0);
            CHECK_ARRAY_CLOSE(b[1], a[1], 0, 0);
        }
        CHECK(cft_fn_failed(cft_vmap_chunked(fn, ax, 0)));
        /* under grad and jit too */
        cft_array *g =
            cft_fn_call1(cft_jit(cft_vmap_chunked(
                             cft_grad(cft_fn_new(loss_aux1, NULL, 1, 1), NULL, 0), NULL, 2)),
                         &xb);
        CHECK_ARRAY_CLOSE(g, cft_exp(xb), 1e-14, 1e-14);
    }
    TEST("vjp and jvp with aux outputs") {
        cft_fn *la = cft_fn_new(loss_aux, NULL, 2, 2); /* (sum exp x, aux tanh(W x)) */
        cft_array *outs[2], *ct = cft_scalar(2, CFT_F64), *g[2];
        cft_fn *pb;
        CHECK_EQ(cft_vjp_with_aux(la, 1, x, outs, &pb), CFT_OK);
        CHECK_EQ(cft_fn_nin(pb), 1);
        CHECK_ARRAY_CLOSE(outs[1], cft_tanh(cft_matmul(x[1], x[0])), 1e-14, 1e-14);
        CHECK_EQ(cft_fn_call(pb, &ct, g), CFT_OK);
        CHECK_ARRAY_CLOSE(g[0], cft_mul_s(cft_exp(x[0]), 2), 1e-14, 1e-14);
        cft_fn *j = cft_jvp_with_aux(la, 1);
        CHECK_EQ(cft_fn_nout(j), 3);
        cft_array *t0 = cft_ones_like(x[0]), *t1 = cft_zeros_like(x[1]), *o[3];
        CHECK_EQ(cft_fn_call(j, (cft_array *[]){x[0], x[1], t0, t1}, o), CFT_OK);
        CHECK_CLOSE(cft_item(o[2]), cft_item(cft_sum(cft_exp(x[0]), NULL, 0, false)), 1e-13, 0);
        CHECK(cft_fn_failed(cft_jvp_with_aux(la, 2)));
    }
    return check_summary();
}
