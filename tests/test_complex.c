/* test_complex.c: complex dtypes (c64, c128): creation, promotion and
 * printing; every complex elementwise op against C99's <complex.h> in
 * double; conjugate views and complex GEMM; derivatives under JAX's
 * convention (jvp against finite differences along complex directions, the
 * dot-product test Re<ct, J t> = Re<J^T ct, t> with the non-conjugating
 * product, grad = df/dx - i df/dy for real-valued f, holomorphic grads and
 * Jacobians); vmap against a loop; the jit against the interpreter.
 * Tolerances: c128 results are compared at 1e-12 relative (a few ulp per op
 * through libm's complex functions); c64 at 2e-5 (float eps 1.2e-7 times
 * the condition of cexp/ctan on |z| <= 2); finite differences at 1e-6 in
 * c128 (central differences with h = 1e-5 have O(h^2) error). */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 88172645463325252ull;
static double urand(void) { /* in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* a random complex array with parts in [lo, hi) (signs random when lo >= 0
 * and `sign`) */
static cft_array *crand(cft_dtype dt, const int64_t *shape, int nd, double lo, double hi,
                        bool sign) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    double buf[2 * n + 2];
    for (int64_t i = 0; i < 2 * n; i++) {
        double u = 0.5 * (urand() + 1);
        buf[i] = lo + (hi - lo) * u;
        if (sign && urand() < 0)
            buf[i] = -buf[i];
    }
    cft_array *x = cft_from_data(buf, CFT_C128, shape, nd);
    return dt == CFT_C128 ? x : cft_astype(x, dt);
}

static double complex citem(const cft_array *x, int64_t i) {
    double re = NAN, im = NAN;
    cft_item_complex_at(x, i, &re, &im);
    return CMPLX(re, im);
}

static bool cclose(double complex a, double complex b, double rtol, double atol) {
    return cabs(a - b) <= atol + rtol * cabs(b);
}

/* x and y hold the same complex values (y may be real) */
static bool arrays_close(const cft_array *x, const cft_array *y, double rtol, double atol) {
    if (cft_failed(x) || cft_failed(y) || cft_array_size(x) != cft_array_size(y))
        return false;
    for (int64_t i = 0; i < cft_array_size(x); i++)
        if (!cclose(citem(x, i), citem(y, i), rtol, atol))
            return false;
    return true;
}

/* ---- elementwise table ---- */
typedef struct {
    const char *name;
    cft_array *(*op)(cft_array *);
    double complex (*ref)(double complex);
    double lo, hi; /* |parts| range */
} urow;

static double complex r_neg(double complex z) {
    return -z;
}
static double complex r_log1p(double complex z) {
    return clog(1 + z);
}
static double complex r_expm1(double complex z) {
    return cexp(z) - 1;
}
static double complex r_logistic(double complex z) {
    return 1 / (1 + cexp(-z));
}
static double complex r_rsqrt(double complex z) {
    return 1 / csqrt(z);
}
static double complex r_square(double complex z) {
    return z * z;
}
static double complex r_recip(double complex z) {
    return 1 / z;
}

static const urow urows[] = {
    {"neg", cft_neg, r_neg, 0, 2},          {"exp", cft_exp, cexp, 0, 2},
    {"log", cft_log, clog, 0.2, 2},         {"log1p", cft_log1p, r_log1p, 0, 0.5},
    {"expm1", cft_expm1, r_expm1, 0, 2},    {"sin", cft_sin, csin, 0, 2},
    {"cos", cft_cos, ccos, 0, 2},           {"tan", cft_tan, ctan, 0, 1},
    {"tanh", cft_tanh, ctanh, 0, 1},        {"logistic", cft_logistic, r_logistic, 0, 1},
    {"sqrt", cft_sqrt, csqrt, 0.2, 2},      {"rsqrt", cft_rsqrt, r_rsqrt, 0.2, 2},
    {"square", cft_square, r_square, 0, 2}, {"reciprocal", cft_reciprocal, r_recip, 0.2, 2},
};
#define NU ((int)(sizeof urows / sizeof urows[0]))

/* ---- functions for the transforms ---- */
#define FN(NAME)                                                                                   \
    static cft_status NAME(void *env, int nin, cft_array *const *in, int nout, cft_array **out)

FN(fn_unary) { /* the table's op `env` */
    (void)nin, (void)nout;
    out[0] = ((const urow *)env)->op(in[0]);
    return CFT_OK;
}
/* a holomorphic map C^n -> C^n: z * exp(z) + sin(z)^2 / (1 + z) */
FN(fn_holo) {
    (void)env, (void)nin, (void)nout;
    cft_array *z = in[0];
    out[0] = cft_add(cft_mul(z, cft_exp(z)), cft_div(cft_square(cft_sin(z)), cft_add_s(z, 1)));
    return CFT_OK;
}
static double complex ref_holo_d(double complex z) { /* its derivative */
    return cexp(z) * (1 + z) +
           (2 * csin(z) * ccos(z) * (1 + z) - csin(z) * csin(z)) / ((1 + z) * (1 + z));
}
/* a holomorphic scalar: sum(holo(z)) */
FN(fn_holo_sum) {
    cft_array *y;
    fn_holo(env, nin, in, 1, &y);
    out[0] = cft_sum(y, NULL, 0, false);
    (void)nout;
    return CFT_OK;
}
/* real-valued and not holomorphic: sum(|z| real(z^2) + imag(exp(z)) + angle(z)) */
FN(fn_real_of_complex) {
    (void)env, (void)nin, (void)nout;
    cft_array *z = in[0];
    cft_array *t = cft_add(cft_mul(cft_abs(z), cft_real(cft_square(z))), cft_imag(cft_exp(z)));
    out[0] = cft_sum(cft_add(t, cft_angle(z)), NULL, 0, false);
    return CFT_OK;
}
static double ref_real_of_complex(double complex z) {
    return cabs(z) * creal(z * z) + cimag(cexp(z)) + carg(z);
}
/* C^n -> C^n, not holomorphic: conj(z) * z^2 + real(z) * i + |z| */
FN(fn_nonholo) {
    (void)env, (void)nin, (void)nout;
    cft_array *z = in[0];
    cft_array *i1 = cft_scalar_complex(0, 1, cft_array_dtype(z));
    out[0] =
        cft_add(cft_add(cft_mul(cft_conj(z), cft_square(z)), cft_mul(cft_real(z), i1)), cft_abs(z));
    return CFT_OK;
}
/* complex matmul with a conjugate-transposed operand: (A^H B) * exp(A^H B) */
FN(fn_matmul) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_matmul(cft_mT(cft_conj(in[0])), in[1]);
    out[0] = cft_mul(h, cft_exp(cft_mul_s(h, 0.1)));
    return CFT_OK;
}
/* indexing: gathers whose transposes scatter-add complex cotangents */
FN(fn_index) {
    (void)env, (void)nin, (void)nout;
    cft_array *z = in[0];
    cft_array *i1 = cft_from_i32((int32_t[]){2, 0, 2}, (int64_t[]){3}, 1);
    cft_array *i2 = cft_from_i32((int32_t[]){1, 1, 0, 2, 2, 0}, (int64_t[]){2, 3}, 2);
    out[0] = cft_mul(cft_take(z, i1, 1), cft_take_along_axis(z, i2, 1));
    return CFT_OK;
}
/* |z|^2 summed */
FN(fn_abs2) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_real(cft_mul(in[0], cft_conj(in[0]))), NULL, 0, false);
    return CFT_OK;
}

/* Re(sum(a * b)) with the plain product */
static double re_dot(cft_array *a, cft_array *b) {
    double s = 0;
    for (int64_t i = 0; i < cft_array_size(a); i++)
        s += creal(citem(a, i) * citem(b, i));
    return s;
}

/* jvp of f at z along t against central differences (c128) */
static void check_jvp_fd(cft_fn *f, cft_array *z, cft_array *t, const char *what) {
    cft_array *in[2] = {z, t}, *out[2];
    cft_status st = cft_fn_call(cft_jvp(f), in, out);
    CHECK_MSG(st == CFT_OK, "%s: %s", what, cft_last_error_message());
    const double h = 1e-5;
    cft_array *zp = cft_add(z, cft_mul_s(t, h)), *zm = cft_sub(z, cft_mul_s(t, h));
    cft_array *fp = cft_fn_call1(f, &zp), *fm = cft_fn_call1(f, &zm);
    cft_array *fd = cft_mul_s(cft_sub(fp, fm), 0.5 / h);
    CHECK_MSG(arrays_close(out[1], fd, 1e-6, 1e-7), "%s: jvp differs from finite differences",
              what);
}

/* Re<ct, J t> == Re<J^T ct, t> */
static void check_vjp_dot(cft_fn *f, cft_array *z, cft_array *t, cft_array *ct, const char *what) {
    cft_array *in[2] = {z, t}, *jo[2], *outs[1];
    CHECK(cft_fn_call(cft_jvp(f), in, jo) == CFT_OK);
    cft_fn *pb;
    CHECK(cft_vjp(f, &z, outs, &pb) == CFT_OK);
    cft_array *jt_ct = cft_fn_call1(pb, &ct);
    CHECK_MSG(!cft_failed(jt_ct), "%s: %s", what, cft_error_message(jt_ct));
    double lhs = re_dot(ct, jo[1]), rhs = re_dot(jt_ct, t);
    CHECK_MSG(fabs(lhs - rhs) <= 1e-11 * (1 + fabs(lhs)),
              "%s: Re<ct, Jt> = %.15g, Re<J^T ct, t> = %.15g", what, lhs, rhs);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_init();
    const int64_t s23[2] = {2, 3}, s5[1] = {5};

    TEST("creation, items and printing") {
        cft_array *a = cft_scalar_complex(1.5, -2, CFT_C64);
        CHECK_EQ(cft_array_dtype(a), CFT_C64);
        CHECK(citem(a, 0) == CMPLX(1.5, -2));
        float data[4] = {1, 2, 3, -4};
        cft_array *b = cft_from_data(data, CFT_C64, (int64_t[]){2}, 1);
        CHECK(citem(b, 1) == CMPLX(3, -4));
        CHECK_EQ(cft_item_at(b, 1), 3); /* the real part */
        cft_array *f = cft_full_complex(0, 1, CFT_C128, s23, 2);
        CHECK(citem(f, 5) == CMPLX(0, 1));
        char buf[256] = {0};
        FILE *m = fmemopen(buf, sizeof buf, "w");
        cft_print(b, m);
        fclose(m);
        CHECK_MSG(strstr(buf, "1.+2.j") && strstr(buf, "3.-4.j"), "printed %s", buf);
        CHECK(cft_failed(cft_full_complex(1, 1, CFT_F32, s23, 2)));
        double re, im;
        CHECK(cft_item_complex_at(b, 7, &re, &im) != CFT_OK);
        /* copy_to a complex buffer, and to real (the real part) */
        double out[4];
        CHECK_EQ(cft_copy_to(b, CFT_C128, out), CFT_OK);
        CHECK(out[0] == 1 && out[1] == 2 && out[2] == 3 && out[3] == -4);
        CHECK_EQ(cft_copy_to(b, CFT_F64, out), CFT_OK);
        CHECK(out[0] == 1 && out[1] == 3);
    }

    TEST("promotion: f32 op c64 -> c64, f64 op c64 -> c128, ints -> c64") {
        cft_array *z = cft_scalar_complex(1, 1, CFT_C64);
        CHECK_EQ(cft_array_dtype(cft_add(z, cft_scalar(2, CFT_F32))), CFT_C64);
        CHECK_EQ(cft_array_dtype(cft_mul(z, cft_scalar(2, CFT_F64))), CFT_C128);
        CHECK_EQ(cft_array_dtype(cft_sub(cft_scalar(2, CFT_I32), z)), CFT_C64);
        cft_array *w = cft_mul(z, cft_scalar(2, CFT_F64));
        CHECK(citem(w, 0) == CMPLX(2, 2));
        CHECK_EQ(cft_array_dtype(cft_astype(cft_scalar(3, CFT_F64), CFT_C128)), CFT_C128);
        CHECK(citem(cft_astype(cft_scalar(3, CFT_F64), CFT_C128), 0) == CMPLX(3, 0));
    }

    TEST("elementwise unary ops against <complex.h> (c128 1e-12, c64 2e-5)") {
        for (int r = 0; r < NU; r++)
            for (int d = 0; d < 2; d++) {
                cft_dtype dt = d ? CFT_C64 : CFT_C128;
                cft_array *z = crand(CFT_C128, (int64_t[]){16}, 1, urows[r].lo, urows[r].hi, true);
                cft_array *y = urows[r].op(cft_astype(z, dt));
                CHECK_MSG(!cft_failed(y), "%s: %s", urows[r].name, cft_error_message(y));
                CHECK_EQ(cft_array_dtype(y), dt);
                double tol = d ? 2e-5 : 1e-12;
                for (int64_t i = 0; i < 16; i++) {
                    double complex want = urows[r].ref(citem(z, i)), got = citem(y, i);
                    CHECK_MSG(cclose(got, want, tol, tol * 1e-2),
                              "%s(%g%+gi) [%s] = %g%+gi, want %g%+gi", urows[r].name,
                              creal(citem(z, i)), cimag(citem(z, i)), cft_dtype_name(dt),
                              creal(got), cimag(got), creal(want), cimag(want));
                }
            }
    }

    TEST("elementwise binary ops, comparisons and where") {
        cft_array *a = crand(CFT_C128, s23, 2, 0.3, 2, true),
                  *b = crand(CFT_C128, s23, 2, 0.3, 2, true);
        cft_array *ys[5] = {cft_add(a, b), cft_sub(a, b), cft_mul(a, b), cft_div(a, b),
                            cft_pow(a, b)};
        for (int64_t i = 0; i < 6; i++) {
            double complex x = citem(a, i), y = citem(b, i);
            double complex want[5] = {x + y, x - y, x * y, x / y, cpow(x, y)};
            for (int k = 0; k < 5; k++)
                CHECK_MSG(cclose(citem(ys[k], i), want[k], 1e-12, 1e-14), "op %d at %lld", k,
                          (long long)i);
        }
        CHECK_EQ(cft_item_at(cft_sum(cft_astype(cft_eq(a, a), CFT_I32), NULL, 0, false), 0), 6);
        CHECK_EQ(cft_item_at(cft_sum(cft_astype(cft_ne(a, b), CFT_I32), NULL, 0, false), 0), 6);
        cft_array *w = cft_where(cft_eq(a, a), b, a);
        CHECK(arrays_close(w, b, 0, 0));
        CHECK(cft_failed(cft_lt(a, b))); /* no order on complex numbers */
        CHECK(cft_failed(cft_max(a, NULL, 0, false)));
        CHECK(cft_failed(cft_floor(a)));
        CHECK_MSG(strstr(cft_error_message(cft_floor(a)), "c128"), "%s",
                  cft_error_message(cft_floor(a)));
    }

    TEST("real, imag, conj, complex, abs, angle") {
        cft_array *z = crand(CFT_C128, s5, 1, 0.1, 2, true);
        cft_array *re = cft_real(z), *im = cft_imag(z), *cj = cft_conj(z), *ab = cft_abs(z),
                  *an = cft_angle(z);
        CHECK_EQ(cft_array_dtype(re), CFT_F64);
        CHECK_EQ(cft_array_dtype(ab), CFT_F64);
        for (int64_t i = 0; i < 5; i++) {
            double complex v = citem(z, i);
            CHECK(cft_item_at(re, i) == creal(v));
            CHECK(cft_item_at(im, i) == cimag(v));
            CHECK(citem(cj, i) == conj(v));
            CHECK_CLOSE(cft_item_at(ab, i), cabs(v), 1e-15, 0);
            CHECK_CLOSE(cft_item_at(an, i), carg(v), 1e-15, 1e-15);
        }
        CHECK(arrays_close(cft_complex(re, im), z, 0, 0));
        CHECK_EQ(cft_array_dtype(cft_complex(cft_astype(re, CFT_F32), im)), CFT_C128);
        CHECK_EQ(cft_array_dtype(cft_complex(cft_astype(re, CFT_F32), cft_scalar(0, CFT_F32))),
                 CFT_C64);
        /* real inputs */
        cft_array *x = cft_from_f64((double[]){-2, 3}, (int64_t[]){2}, 1);
        CHECK(cft_real(x) == x && cft_conj(x) == x);
        CHECK_EQ(cft_item_at(cft_imag(x), 1), 0);
        CHECK_CLOSE(cft_item_at(cft_angle(x), 0), M_PI, 1e-15, 0);
        CHECK(cft_failed(cft_complex(z, z)));
        CHECK(cft_failed(cft_complex(re, cft_ones(CFT_F64, (int64_t[]){3}, 1))));
    }

    TEST("shape and index ops move complex elements whole: op(re + i im) = op(re) + i op(im)") {
        cft_array *z = crand(CFT_C128, (int64_t[]){3, 4}, 2, 0, 2, true), *re = cft_real(z),
                  *im = cft_imag(z);
        cft_array *idx = cft_from_i32((int32_t[]){2, 0, 2}, (int64_t[]){3}, 1);
        cft_array *st = cft_from_i32((int32_t[]){1, 1}, (int64_t[]){2}, 1);
#define BY_PARTS(EXPR_OF)                                                                          \
    do {                                                                                           \
        cft_array *a_ = z, *got_;                                                                  \
        got_ = (EXPR_OF);                                                                          \
        a_ = re;                                                                                   \
        cft_array *r_ = (EXPR_OF);                                                                 \
        a_ = im;                                                                                   \
        cft_array *i_ = (EXPR_OF);                                                                 \
        CHECK_MSG(!cft_failed(got_) && arrays_close(got_, cft_complex(r_, i_), 0, 0), "%s: %s",    \
                  #EXPR_OF, cft_error_message(got_));                                              \
    } while (0)
        BY_PARTS(cft_transpose(a_, (int[]){1, 0}));
        BY_PARTS(cft_reshape(a_, (int64_t[]){2, 6}, 2));
        BY_PARTS(cft_slice(a_, (int64_t[]){1, 1}, (int64_t[]){3, 4}, NULL));
        BY_PARTS(cft_pad(a_, cft_scalar(0, cft_array_dtype(a_)), (int64_t[]){1, 0},
                         (int64_t[]){0, 2}, NULL));
        BY_PARTS(cft_concatenate((cft_array *[]){a_, a_}, 2, 1));
        BY_PARTS(cft_stack((cft_array *[]){a_, a_}, 2, 0));
        BY_PARTS(cft_take(a_, idx, 1));
        BY_PARTS(cft_flip(a_, (int[]){0}, 1));
        BY_PARTS(cft_dynamic_slice(a_, st, (int64_t[]){2, 2}));
        BY_PARTS(cft_dynamic_update_slice(
            a_, cft_slice(a_, (int64_t[]){0, 0}, (int64_t[]){2, 2}, NULL), st));
        BY_PARTS(cft_at_add(a_, idx, cft_take(a_, idx, 1), 1));
        BY_PARTS(cft_at_set(a_, idx, cft_zeros_like(cft_take(a_, idx, 1)), 1));
        BY_PARTS(cft_sum(a_, (int[]){0}, 1, false));
        BY_PARTS(cft_mean(a_, (int[]){1}, 1, true));
        /* var of complex values is real: var(re) + var(im) */
        cft_array *v = cft_var(z, (int[]){1}, 1, 1, false);
        CHECK_EQ(cft_array_dtype(v), CFT_F64);
        CHECK(arrays_close(
            v, cft_add(cft_var(re, (int[]){1}, 1, 1, false), cft_var(im, (int[]){1}, 1, 1, false)),
            1e-14, 1e-15));
        BY_PARTS(
            cft_take_along_axis(a_, cft_from_i32((int32_t[]){3, 3, 0}, (int64_t[]){3, 1}, 2), 1));
        BY_PARTS(cft_broadcast_to(a_, (int64_t[]){2, 3, 4}, 3));
#undef BY_PARTS
        /* ordered ops and kernels without a complex path: clear errors */
        CHECK(cft_failed(cft_sort(z, 1, false)));
        cft_array *tv, *ti;
        CHECK(cft_top_k(z, 2, &tv, &ti) != CFT_OK);
        CHECK(cft_failed(cft_argmax(z, 1, false)));
        CHECK(cft_failed(cft_cumsum(z, 1, false)));
        CHECK(cft_failed(cft_clamp(z, z, z)));
        cft_array *img = crand(CFT_C64, (int64_t[]){1, 1, 5, 5}, 4, 0, 1, true);
        cft_array *e = cft_conv2d(img, crand(CFT_C64, (int64_t[]){1, 1, 3, 3}, 4, 0, 1, true), NULL,
                                  NULL, NULL, 1);
        CHECK_MSG(cft_failed(e) && strstr(cft_error_message(e), "c64"), "%s", cft_error_message(e));
        CHECK(cft_failed(cft_max_pool2d(img, (int64_t[]){2, 2}, NULL, NULL, NULL)));
    }

    TEST("conj is an O(1) view resolved by its consumers") {
        cft_array *z = crand(CFT_C128, s23, 2, 0, 2, true);
        cft_array *c = cft_conj(z);
        CHECK(cft_is_conj(c));
        CHECK(!cft_is_conj(cft_conj(c)));
        CHECK(arrays_close(cft_conj(c), z, 0, 0));
        cft_array *t = cft_mT(c); /* a view of a view */
        CHECK(cft_is_conj(t));
        for (int64_t i = 0; i < 2; i++)
            for (int64_t j = 0; j < 3; j++)
                CHECK(citem(t, j * 2 + i) == conj(citem(z, i * 3 + j)));
        /* consumers: elementwise, reductions, copies */
        CHECK(arrays_close(cft_add(c, z),
                           cft_complex(cft_mul_s(cft_real(z), 2), cft_zeros(CFT_F64, s23, 2)),
                           1e-15, 0));
        double complex s = 0;
        for (int64_t i = 0; i < 6; i++)
            s += conj(citem(z, i));
        CHECK(cclose(citem(cft_sum(c, NULL, 0, false), 0), s, 1e-14, 0));
        double buf[12];
        CHECK_EQ(cft_copy_to(c, CFT_C128, buf), CFT_OK);
        CHECK(buf[1] == -cimag(citem(z, 0)));
    }

    TEST("complex matmul (cgemm/zgemm), conjugate-transposed operands read in place") {
        for (int d = 0; d < 2; d++) {
            cft_dtype dt = d ? CFT_C64 : CFT_C128;
            cft_array *a = crand(dt, (int64_t[]){4, 3}, 2, 0, 1, true),
                      *b = crand(dt, (int64_t[]){4, 5}, 2, 0, 1, true);
            cft_array *h = cft_matmul(cft_mT(cft_conj(a)), b); /* A^H B: ConjTrans */
            cft_array *g = cft_matmul(cft_conj(cft_mT(b)), a); /* B^H A */
            cft_array *n = cft_matmul(cft_conj(a), cft_mT(cft_ones(dt, (int64_t[]){2, 3}, 2)));
            CHECK_EQ(cft_array_dtype(h), dt);
            double tol = d ? 1e-5 : 1e-13;
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 5; j++) {
                    double complex w = 0, v = 0;
                    for (int k = 0; k < 4; k++) {
                        w += conj(citem(a, k * 3 + i)) * citem(b, k * 5 + j);
                        v += conj(citem(b, k * 5 + j)) * citem(a, k * 3 + i);
                    }
                    CHECK(cclose(citem(h, i * 5 + j), w, tol, tol));
                    CHECK(cclose(citem(g, j * 3 + i), v, tol, tol));
                }
            for (int i = 0; i < 4; i++) {
                double complex w = 0;
                for (int k = 0; k < 3; k++)
                    w += conj(citem(a, i * 3 + k));
                CHECK(cclose(citem(n, i * 2 + 1), w, tol, tol));
            }
        }
        /* batched */
        cft_array *a = crand(CFT_C128, (int64_t[]){3, 2, 4}, 3, 0, 1, true),
                  *b = crand(CFT_C128, (int64_t[]){3, 4, 2}, 3, 0, 1, true);
        cft_array *c = cft_matmul(a, b);
        for (int t = 0; t < 3; t++) {
            double complex w = 0;
            for (int k = 0; k < 4; k++)
                w += citem(a, t * 8 + 1 * 4 + k) * citem(b, t * 8 + k * 2 + 0);
            CHECK(cclose(citem(c, t * 4 + 2), w, 1e-13, 1e-14));
        }
        CHECK(cft_failed(cft_matmul(a, cft_ones(CFT_C128, (int64_t[]){3, 3, 2}, 3))));
    }

    TEST("jvp of every unary op against finite differences along complex directions") {
        for (int r = 0; r < NU; r++) {
            cft_array *z = crand(CFT_C128, s5, 1, urows[r].lo + 0.1, urows[r].hi, true),
                      *t = crand(CFT_C128, s5, 1, 0, 1, true);
            check_jvp_fd(cft_fn_new(fn_unary, (void *)&urows[r], 1, 1), z, t, urows[r].name);
        }
        cft_array *z = crand(CFT_C128, s5, 1, 0.2, 1, true),
                  *t = crand(CFT_C128, s5, 1, 0, 1, true);
        check_jvp_fd(cft_fn_new(fn_holo, NULL, 1, 1), z, t, "holomorphic map");
        check_jvp_fd(cft_fn_new(fn_nonholo, NULL, 1, 1), z, t, "non-holomorphic map");
        check_jvp_fd(cft_fn_new(fn_real_of_complex, NULL, 1, 1), z, t, "real-valued map");
    }

    TEST("vjp: the dot-product test Re<ct, J t> = Re<J^T ct, t>") {
        for (int r = 0; r < NU; r++) {
            cft_array *z = crand(CFT_C128, s5, 1, urows[r].lo + 0.1, urows[r].hi, true),
                      *t = crand(CFT_C128, s5, 1, 0, 1, true),
                      *ct = crand(CFT_C128, s5, 1, 0, 1, true);
            check_vjp_dot(cft_fn_new(fn_unary, (void *)&urows[r], 1, 1), z, t, ct, urows[r].name);
        }
        cft_array *z = crand(CFT_C128, s23, 2, 0.2, 1, true),
                  *t = crand(CFT_C128, s23, 2, 0, 1, true),
                  *ct = crand(CFT_C128, s23, 2, 0, 1, true);
        check_vjp_dot(cft_fn_new(fn_holo, NULL, 1, 1), z, t, ct, "holomorphic map");
        check_vjp_dot(cft_fn_new(fn_nonholo, NULL, 1, 1), z, t, ct, "non-holomorphic map");
        check_vjp_dot(cft_fn_new(fn_index, NULL, 1, 1), z, t, ct, "gathers and their scatter-adds");
        check_vjp_dot(cft_fn_new(fn_real_of_complex, NULL, 1, 1), z, t, cft_scalar(0.7, CFT_F64),
                      "real-valued map");
    }

    TEST("grad of a real function of complex inputs is JAX's: df/dx - i df/dy") {
        cft_array *z = cft_scalar_complex(3, 4, CFT_C128);
        cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(fn_abs2, NULL, 1, 1), NULL, 0), &z);
        CHECK_MSG(citem(g, 0) == CMPLX(6, -8), "grad |z|^2 at 3+4i = %g%+gi (want 6-8i)",
                  creal(citem(g, 0)), cimag(citem(g, 0)));
        cft_array *w = crand(CFT_C128, s5, 1, 0.2, 1.5, true);
        cft_array *gw =
            cft_fn_call1(cft_grad(cft_fn_new(fn_real_of_complex, NULL, 1, 1), NULL, 0), &w);
        CHECK_MSG(!cft_failed(gw), "%s", cft_error_message(gw));
        const double h = 1e-6;
        for (int64_t i = 0; i < 5; i++) {
            double complex v = citem(w, i);
            double dx = (ref_real_of_complex(v + h) - ref_real_of_complex(v - h)) / (2 * h);
            double dy = (ref_real_of_complex(v + h * I) - ref_real_of_complex(v - h * I)) / (2 * h);
            CHECK_MSG(cclose(citem(gw, i), CMPLX(dx, -dy), 1e-7, 1e-8), "element %lld",
                      (long long)i);
        }
        /* descent along conj(grad) decreases |z - w|^2 */
        cft_array *p = cft_scalar_complex(1, -1, CFT_C128);
        cft_fn *gf = cft_grad(cft_fn_new(fn_abs2, NULL, 1, 1), NULL, 0);
        for (int k = 0; k < 50; k++)
            p = cft_sub(p, cft_mul_s(cft_conj(cft_fn_call1(gf, &p)), 0.1));
        CHECK(cabs(citem(p, 0)) < 1e-4);
        /* complex outputs need CFT_HOLOMORPHIC */
        cft_array *e = cft_fn_call1(cft_grad(cft_fn_new(fn_holo_sum, NULL, 1, 1), NULL, 0), &w);
        CHECK(cft_failed(e));
        CHECK_MSG(strstr(cft_error_message(e), "CFT_HOLOMORPHIC"), "%s", cft_error_message(e));
    }

    TEST("holomorphic grad, jacrev and jacfwd give f'(z)") {
        cft_array *z = crand(CFT_C128, s5, 1, 0.2, 1, true);
        cft_array *g = cft_fn_call1(
            cft_grad_ex(cft_fn_new(fn_holo_sum, NULL, 1, 1), NULL, 0, CFT_HOLOMORPHIC), &z);
        CHECK_MSG(!cft_failed(g), "%s", cft_error_message(g));
        for (int64_t i = 0; i < 5; i++)
            CHECK(cclose(citem(g, i), ref_holo_d(citem(z, i)), 1e-12, 1e-13));
        cft_fn *f = cft_fn_new(fn_holo, NULL, 1, 1);
        cft_array *jr = cft_fn_call1(cft_jacrev_ex(f, NULL, 0, CFT_HOLOMORPHIC), &z);
        cft_array *jf = cft_fn_call1(cft_jacfwd_ex(f, NULL, 0, CFT_HOLOMORPHIC), &z);
        CHECK_MSG(!cft_failed(jr) && !cft_failed(jf), "%s %s", cft_error_message(jr),
                  cft_error_message(jf));
        for (int64_t i = 0; i < 5; i++)
            for (int64_t j = 0; j < 5; j++) {
                double complex want = i == j ? ref_holo_d(citem(z, i)) : 0;
                CHECK(cclose(citem(jr, i * 5 + j), want, 1e-12, 1e-13));
                CHECK(cclose(citem(jf, i * 5 + j), want, 1e-12, 1e-13));
            }
        /* without the flag: errors that say what to do */
        cft_array *e1 = cft_fn_call1(cft_jacrev(f, NULL, 0), &z),
                  *e2 = cft_fn_call1(cft_jacfwd(f, NULL, 0), &z);
        CHECK(cft_failed(e1) && cft_failed(e2));
        CHECK_MSG(strstr(cft_error_message(e1), "CFT_HOLOMORPHIC"), "%s", cft_error_message(e1));
        cft_array *x = cft_ones(CFT_F64, s5, 1);
        CHECK(cft_failed(cft_fn_call1(cft_jacrev_ex(f, NULL, 0, CFT_HOLOMORPHIC), &x)));
        /* jacfwd of real inputs into complex outputs is allowed (as JAX) */
        cft_array *jx = cft_fn_call1(cft_jacfwd(f, NULL, 0), &x);
        CHECK_MSG(!cft_failed(jx), "%s", cft_error_message(jx));
    }

    TEST("vmap of complex ops (matmul with A^H, exp) equals a loop") {
        cft_array *a = crand(CFT_C128, (int64_t[]){3, 4, 2}, 3, 0, 1, true),
                  *b = crand(CFT_C128, (int64_t[]){4, 3}, 2, 0, 1, true);
        cft_fn *f = cft_fn_new(fn_matmul, NULL, 2, 1);
        cft_array *in[2] = {a, b}, *y;
        CHECK(cft_fn_call(cft_vmap(f, (int[]){0, CFT_NOT_BATCHED}, NULL), in, &y) == CFT_OK);
        for (int64_t t = 0; t < 3; t++) {
            cft_array *args[2] = {cft_index(a, t), b};
            cft_array *yt = cft_fn_call1(f, args);
            CHECK_MSG(arrays_close(cft_index(y, t), yt, 1e-13, 1e-14), "batch %lld", (long long)t);
        }
        /* and its vjp through the batch */
        cft_array *z = crand(CFT_C128, s23, 2, 0.2, 1, true), *gz;
        cft_fn *g =
            cft_vmap(cft_grad(cft_fn_new(fn_real_of_complex, NULL, 1, 1), NULL, 0), NULL, NULL);
        CHECK(cft_fn_call(g, &z, &gz) == CFT_OK);
        for (int64_t t = 0; t < 2; t++) {
            cft_array *zt = cft_index(z, t);
            cft_array *gt =
                cft_fn_call1(cft_grad(cft_fn_new(fn_real_of_complex, NULL, 1, 1), NULL, 0), &zt);
            CHECK(arrays_close(cft_index(gz, t), gt, 1e-13, 1e-14));
        }
    }

    TEST("the jit gives the interpreter's results on complex functions") {
        cft_array *a = crand(CFT_C64, (int64_t[]){4, 2}, 2, 0, 1, true),
                  *b = crand(CFT_C64, (int64_t[]){4, 3}, 2, 0, 1, true);
        cft_fn *f = cft_fn_new(fn_matmul, NULL, 2, 1);
        cft_array *in[2] = {a, b};
        cft_array *want = cft_fn_call1(f, in);
        cft_array *got = cft_fn_call1(cft_jit(f), in);
        CHECK_MSG(arrays_close(got, want, 1e-6, 1e-7), "%s", cft_error_message(got));
        cft_array *z = crand(CFT_C128, s23, 2, 0.2, 1, true);
        cft_fn *gr = cft_grad(cft_fn_new(fn_real_of_complex, NULL, 1, 1), NULL, 0);
        CHECK(arrays_close(cft_fn_call1(cft_jit(gr), &z), cft_fn_call1(gr, &z), 1e-13, 1e-14));
    }

    return check_summary();
}
