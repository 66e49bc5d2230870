/* test_custom.c: custom ops (cft/custom.h): a C kernel with custom_jvp,
 * custom_vjp and the three batching choices, under every transform, against
 * references and finite differences in f64; and the errors: no batching
 * rule, forward mode of a custom_vjp op, a failing kernel, a bad definition. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

/* cube: y = x^3 elementwise, in a C loop */
static cft_status cube_kernel(void *env, cft_array *const *in, cft_array **out) {
    int *calls = env;
    if (calls)
        (*calls)++;
    int64_t n = cft_array_size(in[0]);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    cft_status st = cft_copy_to(in[0], CFT_F64, v);
    for (int64_t i = 0; i < n; i++)
        v[i] = v[i] * v[i] * v[i];
    out[0] = cft_astype(cft_from_f64(v, cft_array_shape(in[0]), cft_array_ndim(in[0])),
                        cft_array_dtype(in[0]));
    free(v);
    return st;
}
static cft_status fail_kernel(void *env, cft_array *const *in, cft_array **out) {
    (void)env, (void)in, (void)out;
    return CFT_E_FOREIGN;
}
static cft_status same(void *env, const cft_aval *in, cft_aval *out) {
    (void)env;
    out[0] = in[0];
    return cft_dtype_is_float(in[0].dtype) ? CFT_OK : CFT_E_DTYPE;
}
static cft_fn *cube_jvp_op;
static cft_status cube_jvp(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout; /* 3 x^2 t */
    out[0] = cft_mul(cft_mul_s(cft_square(in[0]), 3), in[1]);
    return CFT_OK;
}
static cft_status cube_fwd(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_fn_call1(cube_jvp_op, in);
    out[1] = cft_mul_s(cft_square(in[0]), 3);
    return CFT_OK;
}
static cft_status cube_bwd(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul(in[0], in[1]);
    return CFT_OK;
}

static int kernel_calls;
static cft_custom_def d_jvp = {.name = "cube",
                               .nin = 1,
                               .nout = 1,
                               .shape = same,
                               .impl = cube_kernel,
                               .env = &kernel_calls,
                               .rank_polymorphic = true};
static cft_custom_def d_vjp = {.name = "cube_vjp",
                               .nin = 1,
                               .nout = 1,
                               .shape = same,
                               .impl = cube_kernel,
                               .nres = 1,
                               .rank_polymorphic = true};
static cft_custom_def d_seq = {.name = "cube_seq",
                               .nin = 1,
                               .nout = 1,
                               .shape = same,
                               .impl = cube_kernel,
                               .sequential_vmap = true};
static cft_custom_def d_nobatch = {
    .name = "cube_nobatch", .nin = 1, .nout = 1, .shape = same, .impl = cube_kernel};
static cft_custom_def d_fail = {
    .name = "broken", .nin = 1, .nout = 1, .shape = same, .impl = fail_kernel};

static cft_fn *op; /* the op the loss uses */
/* loss(x) = sum(sin(op(x))) */
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_sin(cft_fn_call1(op, in)), NULL, 0, false);
    return CFT_OK;
}

static double ref_loss(const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += sin(x[i] * x[i] * x[i]);
    return s;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    d_jvp.jvp = cft_fn_new(cube_jvp, NULL, 2, 1);
    cft_fn *cube = cft_custom_op(&d_jvp);
    cube_jvp_op = cube;
    d_vjp.vjp_fwd = cft_fn_new(cube_fwd, NULL, 1, 2);
    d_vjp.vjp_bwd = cft_fn_new(cube_bwd, NULL, 2, 1);
    cft_fn *cube_v = cft_custom_op(&d_vjp);
    double xv[3] = {0.3, -0.7, 1.1};
    cft_array *x = cft_from_f64(xv, (int64_t[]){3}, 1);
    cft_fn *L = cft_fn_new(loss, NULL, 1, 1);

    TEST("the kernel runs as a primitive (value, IR)") {
        op = cube;
        cft_array *y = cft_fn_call1(cube, &x);
        for (int i = 0; i < 3; i++)
            CHECK_CLOSE(cft_item_at(y, i), xv[i] * xv[i] * xv[i], 1e-15, 0);
        cft_ir *ir = cft_make_ir(L, (cft_aval[]){cft_array_aval(x)});
        CHECK(ir && strstr(cft_ir_str(ir), "= cube ") != NULL);
    }
    TEST("custom_jvp: grad against finite differences (f64, h=1e-6, rtol 1e-7)") {
        op = cube;
        cft_array *g = cft_fn_call1(cft_grad(L, NULL, 0), &x);
        for (int i = 0; i < 3; i++) {
            double xp[3], xm[3], h = 1e-6;
            memcpy(xp, xv, sizeof xp), memcpy(xm, xv, sizeof xm);
            xp[i] += h, xm[i] -= h;
            CHECK_CLOSE(cft_item_at(g, i), (ref_loss(xp, 3) - ref_loss(xm, 3)) / (2 * h), 1e-7,
                        1e-9);
        }
    }
    TEST("custom_jvp: hessian against the analytic one") {
        op = cube;
        cft_array *H = cft_fn_call1(cft_hessian(L, 0), &x);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) { /* d2/dx2 sin(x^3) = 6x cos(x^3) - 9x^4 sin(x^3) */
                double a = xv[i], c = a * a * a;
                double want = i == j ? 6 * a * cos(c) - 9 * a * a * a * a * sin(c) : 0;
                CHECK_CLOSE(cft_item_at(H, i * 3 + j), want, 1e-12, 1e-12);
            }
    }
    TEST(
        "vmap(grad) through a rank-polymorphic kernel equals a loop, and calls it once per batch") {
        op = cube;
        double rows[6] = {0.1, 0.2, -0.3, 0.4, 0.5, -0.6};
        cft_array *X = cft_from_f64(rows, (int64_t[]){3, 2}, 2);
        cft_fn *g = cft_grad(L, NULL, 0);
        cft_array *pg = cft_fn_call1(cft_vmap(g, NULL, NULL), &X);
        for (int b = 0; b < 3; b++) {
            cft_array *xb = cft_index(X, b);
            CHECK_ARRAY_CLOSE(cft_index(pg, b), cft_fn_call1(g, &xb), 1e-15, 0);
        }
        kernel_calls = 0;
        cft_fn_call1(cft_vmap(cube, NULL, NULL), &X);
        CHECK_EQ(kernel_calls, 1);
    }
    TEST("custom_vjp: grad equals custom_jvp's, and vmap(grad) works") {
        op = cube;
        cft_array *g1 = cft_fn_call1(cft_grad(L, NULL, 0), &x);
        op = cube_v;
        cft_fn *L2 = cft_fn_new(loss, NULL, 1, 1);
        cft_array *g2 = cft_fn_call1(cft_grad(L2, NULL, 0), &x);
        CHECK_ARRAY_CLOSE(g2, g1, 1e-15, 0);
        double rows[4] = {0.1, 0.2, -0.3, 0.4};
        cft_array *X = cft_from_f64(rows, (int64_t[]){2, 2}, 2);
        cft_array *pg = cft_fn_call1(cft_vmap(cft_grad(L2, NULL, 0), NULL, NULL), &X);
        CHECK(!cft_failed(pg));
        cft_array *x0 = cft_index(X, 1);
        CHECK_ARRAY_CLOSE(cft_index(pg, 1), cft_fn_call1(cft_grad(L2, NULL, 0), &x0), 1e-15, 0);
    }
    TEST("custom_vjp in forward mode is an error naming the op") {
        cft_array *out[2];
        cft_array *in[2] = {x, cft_ones_like(x)};
        CHECK(cft_fn_call(cft_jvp(cube_v), in, out) != CFT_OK);
        CHECK(strstr(cft_error_message(out[1]), "cube_vjp") != NULL);
    }
    TEST("sequential_vmap (opted in) loops; no batching rule is an error naming the op") {
        double rows[4] = {1, 2, 3, 4};
        cft_array *X = cft_from_f64(rows, (int64_t[]){2, 2}, 2);
        cft_array *y = cft_fn_call1(cft_vmap(cft_custom_op(&d_seq), (int[]){1}, NULL), &X);
        CHECK_CLOSE(cft_item_at(y, 1), 27, 0, 0); /* y[0][1] = X[1][0]^3 (batch along axis 1) */
        cft_array *e = cft_fn_call1(cft_vmap(cft_custom_op(&d_nobatch), NULL, NULL), &X);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cube_nobatch") != NULL);
    }
    TEST("a failing kernel, a rejected dtype and an incomplete definition are errors") {
        cft_array *e = cft_fn_call1(cft_custom_op(&d_fail), &x);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "broken") != NULL);
        cft_array *xi = cft_scalar(1, CFT_I32);
        e = cft_fn_call1(cube, &xi);
        CHECK(cft_failed(e) && cft_error_code(e) == CFT_E_DTYPE);
        cft_custom_def bad = {.name = "bad", .nin = 1, .nout = 1, .shape = same};
        CHECK(cft_fn_failed(cft_custom_op(&bad)));
        CHECK_EQ(cft_last_error(), CFT_E_ARG);
    }
    TEST("jit runs the kernel eagerly inside a compiled plan") {
        op = cube;
        cft_fn *j = cft_jit(cft_grad(L, NULL, 0));
        cft_array *a = cft_fn_call1(j, &x);
        a = cft_fn_call1(j, &x);
        CHECK_ARRAY_CLOSE(a, cft_fn_call1(cft_grad(L, NULL, 0), &x), 1e-14, 0);
    }
    return check_summary();
}
