/* test_ew_composite.c: the elementwise functions built from primitives
 * (ew_composite.c: deg2rad, rad2deg, log_sigmoid, logaddexp, logaddexp2,
 * hypot, heaviside). In f64, each against a libm reference (1e-13
 * relative), its jvp against central differences (h = 1e-5: error
 * O(h^2 f''') ~ 1e-10, tolerance 1e-7), its vjp by the dot-product test
 * against the jvp (1e-12), vmap against a loop over rows and the jit
 * against the interpreter (exact: the same kernels); then the values and
 * gradients at the points the formulas are written for (overflow,
 * infinities, hypot's gradient at the origin). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

typedef struct {
    const char *name;
    int nin;
    cft_array *(*f1)(cft_array *);
    cft_array *(*f2)(cft_array *, cft_array *);
    double (*ref)(double, double);
    double lo[2], hi[2];
} row;

static double r_deg2rad(double a, double b) {
    (void)b;
    return a * M_PI / 180;
}
static double r_rad2deg(double a, double b) {
    (void)b;
    return a * 180 / M_PI;
}
static double r_log_sigmoid(double a, double b) {
    (void)b;
    return -log1p(exp(-a));
}
static double r_logaddexp(double a, double b) {
    return log(exp(a) + exp(b));
}
static double r_logaddexp2(double a, double b) {
    return log2(exp2(a) + exp2(b));
}
static double r_hypot(double a, double b) {
    return hypot(a, b);
}
static double r_heaviside(double a, double b) {
    return a < 0 ? 0 : a > 0 ? 1 : b;
}

static const row rows[] = {
    {"deg2rad", 1, cft_deg2rad, NULL, r_deg2rad, {-400, 0}, {400, 0}},
    {"rad2deg", 1, cft_rad2deg, NULL, r_rad2deg, {-4, 0}, {4, 0}},
    {"log_sigmoid", 1, cft_log_sigmoid, NULL, r_log_sigmoid, {-6, 0}, {6, 0}},
    {"logaddexp", 2, NULL, cft_logaddexp, r_logaddexp, {-3, -3}, {3, 3}},
    {"logaddexp2", 2, NULL, cft_logaddexp2, r_logaddexp2, {-3, -3}, {3, 3}},
    {"hypot", 2, NULL, cft_hypot, r_hypot, {-3, -3}, {3, 3}},
    {"heaviside", 2, NULL, cft_heaviside, r_heaviside, {0.5, -2}, {3, 2}}, /* a away from 0 */
};

static cft_status call(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    const row *r = env;
    (void)nout;
    out[0] = nin == 1 ? r->f1(in[0]) : r->f2(in[0], in[1]);
    return cft_failed(out[0]) ? cft_last_error() : CFT_OK;
}

static cft_status cube(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_integer_pow(in[0], 3);
    return CFT_OK;
}

static cft_array *rnd(uint64_t seed, double lo, double hi) {
    return cft_random_uniform(cft_random_key(seed), CFT_F64, (int64_t[]){3, 4}, 2, lo, hi);
}
static double dot(cft_array *a, cft_array *b) {
    return cft_item(cft_sum(cft_mul(a, b), NULL, 0, false));
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        cft_fn *f = cft_fn_new(call, (void *)r, r->nin, 1);
        cft_array *x[2] = {0}, *t[2] = {0};
        for (int k = 0; k < r->nin; k++) {
            x[k] = rnd(10 + i * 7 + (uint64_t)k, r->lo[k], r->hi[k]);
            t[k] = rnd(50 + i * 7 + (uint64_t)k, -1, 1);
        }
        cft_array *y = cft_fn_call1(f, x);
        TEST("%s: values against libm", r->name) {
            double xv[2][12], yv[12];
            for (int k = 0; k < r->nin; k++)
                cft_copy_to(x[k], CFT_F64, xv[k]);
            cft_copy_to(y, CFT_F64, yv);
            for (int j = 0; j < 12; j++) {
                double want = r->ref(xv[0][j], r->nin > 1 ? xv[1][j] : 0);
                CHECK_CLOSE(yv[j], want, 1e-13, 1e-13);
            }
        }
        TEST("%s: jvp against central differences, vjp by the dot-product test", r->name) {
            cft_array *in[4], *out[2]; /* (primals, tangents) */
            for (int k = 0; k < r->nin; k++)
                in[k] = x[k], in[r->nin + k] = t[k];
            CHECK_EQ(cft_fn_call(cft_jvp(f), in, out), CFT_OK);
            cft_array *tan = out[1];
            double h = 1e-5;
            cft_array *xp[2], *xm[2];
            for (int k = 0; k < r->nin; k++) {
                xp[k] = cft_add(x[k], cft_mul_s(t[k], h));
                xm[k] = cft_sub(x[k], cft_mul_s(t[k], h));
            }
            cft_array *fd = cft_mul_s(cft_sub(cft_fn_call1(f, xp), cft_fn_call1(f, xm)), 0.5 / h);
            CHECK_ARRAY_CLOSE(tan, fd, 1e-7, 1e-7);
            cft_array *outs[1], *ct = rnd(90 + i, -1, 1), *cts[2];
            cft_fn *pb;
            CHECK_EQ(cft_vjp(f, x, outs, &pb), CFT_OK);
            CHECK_EQ(cft_fn_call(pb, &ct, cts), CFT_OK);
            double lhs = dot(ct, tan), rhs = 0;
            for (int k = 0; k < r->nin; k++)
                rhs += dot(cts[k], t[k]);
            CHECK_CLOSE(lhs, rhs, 1e-12, 1e-12);
        }
        TEST("%s: vmap against a loop over rows, jit against the interpreter", r->name) {
            cft_array *vy = cft_fn_call1(cft_vmap(f, NULL, NULL), x);
            for (int64_t j = 0; j < 3; j++) {
                cft_array *xr[2];
                for (int k = 0; k < r->nin; k++)
                    xr[k] = cft_index(x[k], j);
                CHECK_ARRAY_CLOSE(cft_index(vy, j), cft_fn_call1(f, xr), 0, 0);
            }
            /* the jit's kernels may call libm's vector variants (libmvec,
             * within 4 ulp), the eager ones its scalar functions: 8 ulp of f64 */
            CHECK_ARRAY_CLOSE(cft_fn_call1(cft_jit(f), x), y, 2e-15, 1e-300);
        }
    }
    TEST("integer_pow on complex numbers: z^3 = z z z, z^-2 = 1/(z z), holomorphic jvp") {
        cft_array *z =
            cft_complex(cft_random_normal(cft_random_key(5), CFT_F64, (int64_t[]){6}, 1),
                        cft_random_normal(cft_random_key(6), CFT_F64, (int64_t[]){6}, 1));
        CHECK_ARRAY_CLOSE(cft_real(cft_integer_pow(z, 3)), cft_real(cft_mul(cft_mul(z, z), z)),
                          1e-13, 1e-13);
        CHECK_ARRAY_CLOSE(cft_imag(cft_integer_pow(z, 3)), cft_imag(cft_mul(cft_mul(z, z), z)),
                          1e-13, 1e-13);
        CHECK_ARRAY_CLOSE(cft_imag(cft_integer_pow(z, -2)), cft_imag(cft_reciprocal(cft_mul(z, z))),
                          1e-12, 1e-12);
        cft_array *t = cft_complex(cft_ones_like(cft_real(z)), cft_zeros_like(cft_real(z))), *o[2];
        CHECK_EQ(cft_fn_call(cft_jvp(cft_fn_new(cube, NULL, 1, 1)), (cft_array *[]){z, t}, o),
                 CFT_OK);
        cft_array *want = cft_mul_s(cft_mul(z, z), 3); /* d z^3 = 3 z^2 t, t = 1 */
        CHECK_ARRAY_CLOSE(cft_real(o[1]), cft_real(want), 1e-12, 1e-12);
        CHECK_ARRAY_CLOSE(cft_imag(o[1]), cft_imag(want), 1e-12, 1e-12);
    }
    TEST("the edges the formulas are written for") {
        cft_array *big = cft_scalar(1e200, CFT_F64), *zero = cft_scalar(0, CFT_F64);
        cft_array *ninf = cft_scalar(-INFINITY, CFT_F64);
        CHECK_CLOSE(cft_item(cft_hypot(big, big)), 1e200 * sqrt(2.0), 1e-15, 0);
        CHECK_CLOSE(cft_item(cft_log_sigmoid(cft_scalar(-1000, CFT_F64))), -1000, 1e-15, 0);
        CHECK_CLOSE(cft_item(cft_log_sigmoid(cft_scalar(1000, CFT_F64))), 0, 0, 1e-300);
        CHECK(isinf(cft_item(cft_logaddexp(ninf, ninf))) &&
              cft_item(cft_logaddexp(ninf, ninf)) < 0);
        CHECK_CLOSE(cft_item(cft_logaddexp(cft_scalar(800, CFT_F64), cft_scalar(800, CFT_F64))),
                    800 + M_LN2, 1e-15, 0);
        CHECK_CLOSE(cft_item(cft_heaviside(zero, cft_scalar(0.5, CFT_F64))), 0.5, 0, 0);
        /* gradients: hypot at the origin is 0 (not NaN); logaddexp at a tie splits */
        cft_fn *h = cft_grad(cft_fn_new(call, (void *)&rows[5], 2, 1), (int[]){0, 1}, 2);
        cft_array *g[2];
        CHECK_EQ(cft_fn_call(h, (cft_array *[]){zero, zero}, g), CFT_OK);
        CHECK_CLOSE(cft_item(g[0]), 0, 0, 0);
        CHECK_CLOSE(cft_item(g[1]), 0, 0, 0);
        cft_fn *l = cft_grad(cft_fn_new(call, (void *)&rows[3], 2, 1), (int[]){0, 1}, 2);
        cft_array *one = cft_scalar(1, CFT_F64);
        CHECK_EQ(cft_fn_call(l, (cft_array *[]){one, one}, g), CFT_OK);
        CHECK_CLOSE(cft_item(g[0]), 0.5, 1e-15, 0);
        CHECK_CLOSE(cft_item(g[1]), 0.5, 1e-15, 0);
        CHECK(!isnan(
            cft_item(cft_fn_call1(cft_grad(cft_fn_new(call, (void *)&rows[2], 1, 1), NULL, 0),
                                  (cft_array *[]){cft_scalar(-1000, CFT_F64)}))));
        /* errors name the call */
        cft_array *e = cft_hypot(NULL, zero);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_hypot"));
    }
    return check_summary();
}
