/* test_special.c: accuracy of include/cft/special.h against mpmath. The
 * reference values (tests/special_ref.h) come from tools/gen_special_ref.py
 * (mpmath at 256+ bits, rounded once to double). For each function:
 *   f64   error in units of the last place of the reference value,
 *         within the function's stated tolerance (the table below), or
 *         within its absolute tolerance for the few with zeros inside the
 *         domain (bessel_j0/j1, lgamma near 1 and 2, digamma near its roots)
 *   f32   on inputs exact in f32: within 2 f32 ulp of the rounded
 *         reference (the rows compute in double and round once)
 *   d2    second derivatives (grad of grad) where special.h promises them,
 *         against mpmath's numerical second derivative
 * CFT_SPECIAL_REPORT=1 prints each function's largest error in ulp.
 * Usage: test_special [substring of test names]. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "special_ref.h"

typedef cft_array *(*u_fn)(cft_array *);
typedef cft_array *(*b_fn)(cft_array *, cft_array *);

static cft_array *mgl3(cft_array *x) {
    return cft_special_multigammaln(x, 3);
}
static cft_array *logit_(cft_array *x) {
    return cft_special_logit(x, -1);
}

typedef struct {
    const char *name;
    u_fn u;
    b_fn b;
    const sref *ref;
    int n;
    double ulps; /* f64 tolerance in ulp of the reference */
    double atol; /* or an absolute one (0: none) */
    int f32;     /* run the f32 check */
} entry;

#define NREF(A) ((int)(sizeof A / sizeof *A))
#define U(NAME, FN, ULP, ATOL)                                                                     \
    { #NAME, FN, NULL, REF_##NAME, NREF(REF_##NAME), ULP, ATOL, 1 }
#define B(NAME, FN, ULP, ATOL)                                                                     \
    { #NAME, NULL, FN, REF_##NAME, NREF(REF_##NAME), ULP, ATOL, 1 }

/* f64 tolerances (ulp): libm-backed ones (erf, erfc, lgamma, expm1, log1p,
 * j0, j1) are glibc's; the rest are this library's code. */
static const entry table[] = {
    U(erf, cft_special_erf, 2, 0),
    U(erfc, cft_special_erfc, 2, 0),
    U(erfcx, cft_special_erfcx, 4, 0),
    U(erfinv, cft_special_erfinv, 2, 0),
    U(lgamma, cft_special_lgamma, 2, 1e-15),
    U(digamma, cft_special_digamma, 4, 1e-15),
    U(i0, cft_special_i0, 6, 0),
    U(i0e, cft_special_i0e, 6, 0),
    U(i1, cft_special_i1, 6, 0),
    U(i1e, cft_special_i1e, 6, 0),
    U(ndtr, cft_special_ndtr, 2, 0),
    U(ndtri, cft_special_ndtri, 3, 0),
    U(log_ndtr, cft_special_log_ndtr, 2, 0),
    U(expit, cft_special_expit, 2, 0),
    U(logit, logit_, 2, 0),
    U(sinc, cft_special_sinc, 2, 1e-16),
    U(entr, cft_special_entr, 2, 0),
    U(exp2, cft_special_exp2, 1, 0),
    U(expm1, cft_special_expm1, 2, 0),
    U(log1p, cft_special_log1p, 1, 0),
    U(bessel_j0, cft_special_bessel_j0, 4, 2e-16),
    U(bessel_j1, cft_special_bessel_j1, 4, 2e-16),
    U(multigammaln3, mgl3, 2, 0),
    B(zeta, cft_special_zeta, 3, 0),
    B(polygamma, cft_polygamma, 6, 0),
    B(gammainc, cft_special_gammainc, 6, 0),
    B(gammaincc, cft_special_gammaincc, 10, 0),
    B(xlogy, cft_special_xlogy, 1, 0),
    B(xlog1py, cft_special_xlog1py, 2, 0),
};

static double ulp_of(double w) {
    w = fabs(w);
    if (w < DBL_MIN)
        return 4.9406564584124654e-324;
    return nextafter(w, INFINITY) - w;
}
static double ulp_of_f(float w) {
    w = fabsf(w);
    if (w < FLT_MIN)
        return 1.401298464324817e-45;
    return (double)nextafterf(w, INFINITY) - w;
}

static cft_array *run(const entry *e, const double *x, const double *y, int n, cft_dtype dt) {
    int64_t sh[1] = {n};
    cft_array *ax = cft_astype(cft_from_f64(x, sh, 1), dt);
    if (e->u)
        return e->u(ax);
    return e->b(ax, cft_astype(cft_from_f64(y, sh, 1), dt));
}

static bool report;

static void check_f64(const entry *e) {
    int n = e->n;
    double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * n),
           *got = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++)
        x[i] = e->b ? e->ref[i].x : e->ref[i].x, y[i] = e->ref[i].y;
    cft_array *r = run(e, x, y, n, CFT_F64);
    CHECK_MSG(!cft_failed(r), "%s: %s", e->name, cft_error_message(r));
    if (cft_failed(r) || cft_copy_to(r, CFT_F64, got) != CFT_OK)
        return;
    double worst = 0, worst_abs = 0;
    int wi = 0;
    for (int i = 0; i < n; i++) {
        double w = e->ref[i].want, g = got[i];
        if (isnan(w) || isinf(w) || isinf(g)) {
            CHECK_MSG(g == w || (isnan(g) && isnan(w)), "%s(%.17g, %.17g) = %.17g, want %.17g",
                      e->name, x[i], y[i], g, w);
            continue;
        }
        double err = fabs(g - w) / ulp_of(w);
        bool abs_ok = e->atol > 0 && fabs(g - w) <= e->atol;
        if (fabs(g - w) > worst_abs)
            worst_abs = fabs(g - w);
        if (!abs_ok && !(err <= worst))
            worst = err, wi = i;
        CHECK_MSG(abs_ok || err <= e->ulps, "%s(%.17g, %.17g) = %.17g, want %.17g: %.1f ulp > %g",
                  e->name, x[i], y[i], g, w, err, e->ulps);
    }
    if (report)
        printf(
            "  %-14s f64 max %.2f ulp (tolerance %g) at (%.17g, %.17g), %d points; max abs err %.2g"
            "%s\n",
            e->name, worst, e->ulps, x[wi], y[wi], n, worst_abs,
            e->atol > 0 ? " (points within the atol not counted in ulp)" : "");
    free(x), free(y), free(got);
}

/* f32: inputs exact in f32, outputs normal floats */
static void check_f32(const entry *e) {
    int n = 0;
    double *x = malloc(sizeof(double) * e->n), *y = malloc(sizeof(double) * e->n),
           *w = malloc(sizeof(double) * e->n), *got = malloc(sizeof(double) * e->n);
    for (int i = 0; i < e->n; i++) {
        const sref *s = &e->ref[i];
        float wf = (float)s->want;
        if ((double)(float)s->x != s->x || (double)(float)s->y != s->y)
            continue;
        if (!isfinite(wf) || (wf != 0 && fabsf(wf) < FLT_MIN))
            continue;
        x[n] = s->x, y[n] = s->y, w[n] = s->want, n++;
    }
    cft_array *r = run(e, x, y, n, CFT_F32);
    CHECK_MSG(!cft_failed(r), "%s: %s", e->name, cft_error_message(r));
    if (cft_failed(r) || cft_copy_to(r, CFT_F64, got) != CFT_OK)
        return;
    CHECK(cft_array_dtype(r) == CFT_F32);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        float wf = (float)w[i];
        double err = fabs(got[i] - wf) / ulp_of_f(wf);
        bool abs_ok = e->atol > 0 && fabs(got[i] - w[i]) <= 1e-7;
        if (!abs_ok && err > worst)
            worst = err;
        CHECK_MSG(abs_ok || err <= 2, "%s f32(%.9g, %.9g) = %.9g, want %.9g: %.1f f32 ulp", e->name,
                  x[i], y[i], got[i], wf, err);
    }
    if (report)
        printf("  %-14s f32 max %.2f ulp over %d points\n", e->name, worst, n);
    free(x), free(y), free(w), free(got);
}

/* ---- second derivatives ---- */
typedef struct {
    const char *name;
    u_fn u;
    b_fn b;
    double a; /* the fixed first operand of b */
    const sref *ref;
    int n;
    double rtol;
} d2entry;

static cft_status scalar_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    const d2entry *e = env;
    out[0] = e->u ? e->u(in[0]) : e->b(cft_full_like(in[0], e->a), in[0]);
    return cft_failed(out[0]) ? CFT_E_ARG : CFT_OK;
}

static cft_array *pg1(cft_array *x) {
    return cft_special_polygamma(1, x);
}

#define D2U(NAME, FN, RTOL)                                                                        \
    { #NAME, FN, NULL, 0, D2_##NAME, NREF(D2_##NAME), RTOL }
#define D2B(NAME, FN, A, RTOL)                                                                     \
    { #NAME, NULL, FN, A, D2_##NAME, NREF(D2_##NAME), RTOL }
static const d2entry d2table[] = {
    D2U(lgamma, cft_special_lgamma, 1e-13),
    D2U(digamma, cft_special_digamma, 1e-13),
    D2U(erfinv, cft_special_erfinv, 1e-13),
    D2U(erfc, cft_special_erfc, 1e-13),
    D2U(erfcx, cft_special_erfcx, 1e-11),
    D2U(ndtr, cft_special_ndtr, 1e-13),
    D2U(ndtri, cft_special_ndtri, 1e-13),
    D2U(log_ndtr, cft_special_log_ndtr, 1e-12),
    D2U(i0, cft_special_i0, 1e-13),
    D2U(i0e, cft_special_i0e, 1e-11),
    D2U(i1, cft_special_i1, 1e-13),
    D2U(i1e, cft_special_i1e, 1e-11),
    D2U(bessel_j0, cft_special_bessel_j0, 1e-13),
    D2U(bessel_j1, cft_special_bessel_j1, 1e-13),
    D2U(exp2, cft_special_exp2, 1e-14),
    D2U(polygamma1, pg1, 1e-13),
    D2B(gammainc2_5, cft_special_gammainc, 2.5, 1e-13),
    D2B(gammaincc2_5, cft_special_gammaincc, 2.5, 1e-13),
    D2B(zeta3, cft_special_zeta, 3.0, 1e-13),
};

static void check_d2(const d2entry *e) {
    cft_fn *f = cft_fn_new(scalar_fn, (void *)e, 1, 1);
    cft_fn *h = cft_grad(cft_grad(f, NULL, 0), NULL, 0);
    double worst = 0;
    for (int i = 0; i < e->n; i++) {
        cft_array *x = cft_scalar(e->ref[i].x, CFT_F64), *out = NULL;
        cft_status st = cft_fn_call(h, &x, &out);
        CHECK_MSG(st == CFT_OK, "%s'' failed: %s", e->name, cft_last_error_message());
        if (st != CFT_OK)
            return;
        double g = 0, w = e->ref[i].want;
        cft_copy_to(out, CFT_F64, &g);
        double rel = w == 0 ? fabs(g) * 1e15 * e->rtol : fabs(g - w) / fabs(w);
        if (rel > worst)
            worst = rel;
        CHECK_MSG(rel <= e->rtol, "%s''(%.17g) = %.17g, want %.17g (rel %.2g)", e->name,
                  e->ref[i].x, g, w, rel);
    }
    if (report)
        printf("  %-14s d2 max rel err %.2g over %d points\n", e->name, worst, e->n);
}

static cft_status zeta_s_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_special_zeta(in[0], cft_full_like(in[0], 2.0));
    return cft_failed(out[0]) ? CFT_E_ARG : CFT_OK;
}
static cft_status gammainc_a_fn(void *env, int nin, cft_array *const *in, int nout,
                                cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_special_gammainc(in[0], cft_full_like(in[0], 2.0));
    return cft_failed(out[0]) ? CFT_E_ARG : CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    report = getenv("CFT_SPECIAL_REPORT") && atoi(getenv("CFT_SPECIAL_REPORT"));
    int nt = (int)(sizeof table / sizeof *table), nd = (int)(sizeof d2table / sizeof *d2table);
    for (int k = 0; k < nt; k++) {
        TEST("%s: f64 vs mpmath", table[k].name) {
            check_f64(&table[k]);
        }
        if (table[k].f32)
            TEST("%s: f32 vs mpmath", table[k].name) {
                check_f32(&table[k]);
            }
    }
    for (int k = 0; k < nd; k++)
        TEST("%s: second derivative vs mpmath", d2table[k].name) {
            check_d2(&d2table[k]);
        }
    TEST("zeta: no derivative in s, an error naming zeta") {
        cft_array *x = cft_scalar(3.0, CFT_F64), *out = NULL;
        cft_status st = cft_fn_call(cft_grad(cft_fn_new(zeta_s_fn, NULL, 1, 1), NULL, 0), &x, &out);
        CHECK(st != CFT_OK);
        CHECK_MSG(strstr(cft_last_error_message(), "zeta") != NULL, "%s", cft_last_error_message());
    }
    TEST("gammainc: no derivative in a, an error naming gammainc") {
        cft_array *x = cft_scalar(1.5, CFT_F64), *out = NULL;
        cft_status st =
            cft_fn_call(cft_grad(cft_fn_new(gammainc_a_fn, NULL, 1, 1), NULL, 0), &x, &out);
        CHECK(st != CFT_OK);
        CHECK_MSG(strstr(cft_last_error_message(), "gammainc") != NULL, "%s",
                  cft_last_error_message());
    }
    TEST("ints promote to f32; domain edges") {
        cft_array *i = cft_astype(cft_scalar(2, CFT_F64), CFT_I32);
        CHECK(cft_array_dtype(cft_special_i0(i)) == CFT_F32);
        double v[6];
        int64_t sh[1] = {6};
        double xs[6] = {-1, 1, 0, 2, -0.0, 1.5};
        cft_copy_to(cft_special_erfinv(cft_from_f64(xs, sh, 1)), CFT_F64, v);
        CHECK(v[0] == -INFINITY && v[1] == INFINITY && v[2] == 0 && isnan(v[3]));
        cft_copy_to(cft_special_ndtri(cft_from_f64(xs, sh, 1)), CFT_F64, v);
        CHECK(isnan(v[0]) && v[1] == INFINITY && v[2] == -INFINITY);
        cft_copy_to(cft_special_digamma(cft_from_f64(xs, sh, 1)), CFT_F64, v);
        CHECK(isnan(v[0]) && v[2] == -INFINITY);
        cft_copy_to(cft_special_entr(cft_from_f64(xs, sh, 1)), CFT_F64, v);
        CHECK(v[0] == -INFINITY && v[1] == 0 && v[2] == 0);
    }
    return check_summary();
}
