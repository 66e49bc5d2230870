/* test_prims.c: the per-primitive test suite. One table row per primitive
 * (some primitives have several rows: dtypes, parameter shapes). A row names
 * the primitive, builds it from its inputs with public ops (a cft_fn
 * callback), gives the input avals and domains, and a reference: a scalar C
 * function in double for elementwise rows, hand-written loops for the rest.
 * For every row, with inputs from a fixed seed:
 *   impl      eager result vs the reference (f64: rtol 1e-12; f32: 1e-5)
 *   jvp       cft_jvp vs central finite differences in f64 (zero for
 *             nondifferentiable rows)
 *   vjp       the dot-product test <J t, c> = <t, J^T c> (cft_jvp, cft_vjp)
 *   vmap      cft_vmap at every in_axis (and mixes with CFT_NOT_BATCHED) vs a
 *             loop over the batch
 *   ir        cft_make_ir + cft_ir_eval vs the eager call, cft_ir_typecheck
 *   jvp2      jvp of jvp vs finite differences of the jvp (rows marked O2)
 * plus registry coverage (every primitive has a row whose IR contains it),
 * the "double where" gradient, and the random primitives' own properties.
 * Usage: test_prims [substring of test names].
 *
 * With CFT_TEST_DEVICE=<device> ("test:1": the test backend of
 * tests/support, which the host cannot read behind its table; "cuda:0"),
 * every row instead runs with its inputs on that device: the eager result,
 * the function call, its vjp (the cotangents) and the jit, each on the
 * device (results follow their inputs) and equal to the host's (f64: 1e-12, f32: 1e-5 relative, for
 * a backend computing them its own way). A device that cannot be used here (no GPU) skips the whole
 * run: exit code 77. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "support/test_backend.h"
#include "trace/prim.h"
#include "prims/qlinear.h"
#include "prims/special_fns.h"

/* ---------------------------------------------------------------- table */

enum { F, B, I, K };               /* input kinds: float, bool, int32, random key */
enum { SIGNED = 1, DISCRETE = 2 }; /* input flags: random sign; integers in [lo, hi] */
enum {
    NONDIFF = 1,       /* zero derivative (or integer/bool inputs): the tangent must be 0 */
    O2 = 2,            /* check the jvp of the jvp */
    LINEAR_FD = 4,     /* jvp checked as J t = f(t) exactly (f linear; FD through an f32
                          rounding is meaningless) */
    ANY_DTYPE = 8,     /* the f32 variant's output dtype need not be f32 */
    FORWARD_ONLY = 16, /* no reverse mode (an unbounded loop): vjp must be an error naming it */
    BLAS_SHAPES = 32,  /* vmap vs loop at 1e-13: the batched op runs BLAS at other matrix sizes,
                          whose kernels may sum in another order (conv's folded GEMMs) */
    STE = 64,          /* the jvp is a straight-through estimator: checked against central
                          differences of the row's `ste` function (the op without its rounding) */
};

typedef struct {
    int kind, ndim;
    int64_t shape[4];
    double lo, hi;
    int flags;
} in_spec;

typedef struct row row;
struct row {
    const char *prim;  /* primitive under test (a cft__prims name) */
    const char *label; /* test name (NULL: prim) */
    cft_fn_cb fn;      /* builds the op; env is the row */
    int nin;
    in_spec in[3];
    int out_nd; /* -1: the shape of input 0 */
    int64_t out_shape[4];
    double (*ew)(const double *v); /* elementwise reference, or: */
    void (*ref)(const row *r, double *const *x, const cft_aval *av, const cft_aval *o, double *y);
    int p[10]; /* parameters shared by fn and ref */
    int flags;
    cft_fn_cb ste; /* STE rows: the smooth function whose derivative the jvp is */
};

#define FN(NAME)                                                                                   \
    static cft_status NAME(void *env, int nin, cft_array *const *in, int nout, cft_array **out)
#define UNUSED_FN (void)env, (void)nin, (void)nout
#define ENV_ROW const row *r = env

/* unary rows: name, input kind, op of x, reference of a, domain, input flags, row flags */
#define UNARY_ROWS(X)                                                                              \
    X(neg, F, cft_neg(x), -a, -2, 2, 0, O2)                                                        \
    X(exp, F, cft_exp(x), exp(a), -2, 2, 0, O2)                                                    \
    X(log, F, cft_log(x), log(a), 0.1, 3, 0, O2)                                                   \
    X(log1p, F, cft_log1p(x), log1p(a), -0.5, 2, 0, O2)                                            \
    X(expm1, F, cft_expm1(x), expm1(a), -2, 2, 0, O2)                                              \
    X(sin, F, cft_sin(x), sin(a), -3, 3, 0, O2)                                                    \
    X(cos, F, cft_cos(x), cos(a), -3, 3, 0, O2)                                                    \
    X(tan, F, cft_tan(x), tan(a), -1.2, 1.2, 0, O2)                                                \
    X(tanh, F, cft_tanh(x), tanh(a), -3, 3, 0, O2)                                                 \
    X(logistic, F, cft_logistic(x), 0.5 * (1 + tanh(0.5 * a)), -4, 4, 0, O2)                       \
    X(sqrt, F, cft_sqrt(x), sqrt(a), 0.1, 3, 0, O2)                                                \
    X(rsqrt, F, cft_rsqrt(x), pow(a, -0.5), 0.1, 3, 0, O2)                                         \
    X(abs, F, cft_abs(x), fabs(a), 0.1, 2, SIGNED, O2)                                             \
    X(sign, F, cft_sign(x), (a > 0) - (a < 0), -1, 1, DISCRETE, NONDIFF)                           \
    X(floor, F, cft_floor(x), floor(a), -3, 3, 0, NONDIFF)                                         \
    X(ceil, F, cft_ceil(x), ceil(a), -3, 3, 0, NONDIFF)                                            \
    X(round, F, cft_round(x), round(a), -3, 3, 0, NONDIFF)                                         \
    X(erf, F, cft_erf(x), erf(a), -2, 2, 0, O2)                                                    \
    /* special functions (special.h; references: special_fns.h, libm) */                           \
    X(erfc, F, cft_erfc(x), erfc(a), -2, 2, 0, O2)                                                 \
    X(erfcx, F, cft_erfcx(x), cft_sf_erfcx(a), -2, 3, 0, O2)                                       \
    X(erfinv, F, cft_erfinv(x), cft_sf_erfinv(a), -0.9, 0.9, 0, O2)                                \
    X(lgamma, F, cft_lgamma(x), lgamma(a), 0.5, 4, 0, O2)                                          \
    X(digamma, F, cft_digamma(x), cft_sf_digamma(a), 0.5, 4, 0, O2)                                \
    X(i0, F, cft_i0(x), cft_sf_i0(a), -3, 3, 0, O2)                                                \
    X(i0e, F, cft_i0e(x), cft_sf_i0e(a), 0.2, 3, SIGNED, O2)                                       \
    X(i1, F, cft_i1(x), cft_sf_i1(a), -3, 3, 0, O2)                                                \
    X(i1e, F, cft_i1e(x), cft_sf_i1e(a), 0.2, 3, SIGNED, O2)                                       \
    X(ndtr, F, cft_ndtr(x), cft_sf_ndtr(a), -3, 3, 0, O2)                                          \
    X(ndtri, F, cft_ndtri(x), cft_sf_ndtri(a), 0.05, 0.95, 0, O2)                                  \
    X(log_ndtr, F, cft_log_ndtr(x), cft_sf_log_ndtr(a), -6, 3, 0, O2)                              \
    X(exp2, F, cft_exp2(x), exp2(a), -3, 3, 0, O2)                                                 \
    X(bessel_j0, F, cft_bessel_j0(x), j0(a), -5, 5, 0, O2)                                         \
    X(bessel_j1, F, cft_bessel_j1(x), j1(a), -5, 5, 0, O2)                                         \
    X(square, F, cft_square(x), a *a, -2, 2, 0, O2)                                                \
    X(reciprocal, F, cft_reciprocal(x), 1 / a, 0.3, 2, SIGNED, O2)                                 \
    X(sinh, F, cft_sinh(x), sinh(a), -2, 2, 0, O2)                                                 \
    X(cosh, F, cft_cosh(x), cosh(a), -2, 2, 0, O2)                                                 \
    X(asin, F, cft_asin(x), asin(a), -0.8, 0.8, 0, O2)                                             \
    X(acos, F, cft_acos(x), acos(a), -0.8, 0.8, 0, O2)                                             \
    X(atan, F, cft_atan(x), atan(a), -3, 3, 0, O2)                                                 \
    X(asinh, F, cft_asinh(x), asinh(a), -3, 3, 0, O2)                                              \
    X(acosh, F, cft_acosh(x), acosh(a), 1.2, 3, 0, O2)                                             \
    X(atanh, F, cft_atanh(x), atanh(a), -0.8, 0.8, 0, O2)                                          \
    X(log2, F, cft_log2(x), log2(a), 0.1, 3, 0, O2)                                                \
    X(log10, F, cft_log10(x), log10(a), 0.1, 3, 0, O2)                                             \
    X(cbrt, F, cft_cbrt(x), cbrt(a), 0.2, 3, SIGNED, O2)                                           \
    X(trunc, F, cft_trunc(x), trunc(a), -3, 3, 0, NONDIFF)                                         \
    X(rint, F, cft_rint(x), nearbyint(a), -3, 3, 0, NONDIFF)                                       \
    X(logical_not, B, cft_logical_not(x), !a, 0, 1, 0, NONDIFF)

/* binary rows: name, kind, op of x y, reference of a b, domain of a, of b, row flags */
#define BINARY_ROWS(X)                                                                             \
    X(add, F, cft_add(x, y), a + b, -2, 2, 0, -2, 2, 0, O2)                                        \
    X(sub, F, cft_sub(x, y), a - b, -2, 2, 0, -2, 2, 0, O2)                                        \
    X(mul, F, cft_mul(x, y), a *b, -2, 2, 0, -2, 2, 0, O2)                                         \
    X(div, F, cft_div(x, y), a / b, -2, 2, 0, 0.5, 2, SIGNED, O2)                                  \
    X(pow, F, cft_pow(x, y), exp(b *log(a)), 0.5, 2, 0, -2, 2, 0, O2)                              \
    X(max, F, cft_maximum(x, y), a > b ? a : b, -2, 2, 0, -2, 2, 0, O2)                            \
    X(min, F, cft_minimum(x, y), a < b ? a : b, -2, 2, 0, -2, 2, 0, O2)                            \
    X(atan2, F, cft_atan2(x, y), atan2(a, b), -2, 2, 0, -2, 2, 0, O2)                              \
    /* special: first operand an integer through round (no derivative in it) */                    \
    X(zeta, F, cft_zeta(cft_round(x), y), cft_sf_zeta(round(a), b), 2, 5, DISCRETE, 0.5, 3, 0, O2) \
    X(polygamma, F, cft_polygamma(cft_round(x), y), cft_sf_polygamma(round(a), b), 0, 3, DISCRETE, \
      0.5, 3, 0, O2)                                                                               \
    X(gammainc, F, cft_gammainc(cft_round(x), y), cft_sf_gammainc(round(a), b), 1, 5, DISCRETE,    \
      0.2, 6, 0, O2)                                                                               \
    X(gammaincc, F, cft_gammaincc(cft_round(x), y), cft_sf_gammaincc(round(a), b), 1, 5, DISCRETE, \
      0.2, 6, 0, O2)                                                                               \
    X(copysign, F, cft_copysign(x, y), copysign(a, b), 0.3, 2, SIGNED, 0.3, 2, SIGNED, O2)         \
    X(eq, F, cft_eq(x, y), a == b, 0, 2, DISCRETE, 0, 2, DISCRETE, NONDIFF)                        \
    X(ne, F, cft_ne(x, y), a != b, 0, 2, DISCRETE, 0, 2, DISCRETE, NONDIFF)                        \
    X(lt, F, cft_lt(x, y), a < b, 0, 2, DISCRETE, 0, 2, DISCRETE, NONDIFF)                         \
    X(le, F, cft_le(x, y), a <= b, 0, 2, DISCRETE, 0, 2, DISCRETE, NONDIFF)                        \
    X(gt, F, cft_gt(x, y), a > b, 0, 2, DISCRETE, 0, 2, DISCRETE, NONDIFF)                         \
    X(ge, F, cft_ge(x, y), a >= b, 0, 2, DISCRETE, 0, 2, DISCRETE, NONDIFF)                        \
    X(and, B, cft_logical_and(x, y), a &&b, 0, 1, 0, 0, 1, 0, NONDIFF)                             \
    /* complex intermediates (complex.h): real in, real out, so every check applies as is */       \
    X(complex, F, cft_real(cft_log(cft_complex(x, y))), 0.5 * log(a * a + b * b), 0.5, 2, SIGNED,  \
      -2, 2, 0, O2)                                                                                \
    X(real, F, cft_real(cft_square(cft_complex(x, y))), a *a - b * b, -2, 2, 0, -2, 2, 0, O2)      \
    X(imag, F, cft_imag(cft_square(cft_complex(x, y))), 2 * a * b, -2, 2, 0, -2, 2, 0, O2)         \
    X(conj, F, cft_imag(cft_mul(cft_conj(cft_complex(x, y)), cft_exp(cft_complex(y, x)))),         \
      exp(b) * (a * sin(a) - b * cos(a)), -2, 2, 0, -2, 2, 0, O2)                                  \
    X(cabs, F, cft_abs(cft_complex(x, y)), hypot(a, b), 0.5, 2, SIGNED, -2, 2, 0, O2)              \
    X(or, B, cft_logical_or(x, y), a || b, 0, 1, 0, 0, 1, 0, NONDIFF)

#define DEF_UNARY(NAME, KIND, OP, REF, LO, HI, IFL, FL)                                            \
    FN(fn_##NAME) {                                                                                \
        UNUSED_FN;                                                                                 \
        cft_array *x = in[0];                                                                      \
        out[0] = OP;                                                                               \
        return CFT_OK;                                                                             \
    }                                                                                              \
    static double ref_##NAME(const double *v) {                                                    \
        double a = v[0];                                                                           \
        return REF;                                                                                \
    }
#define DEF_BINARY(NAME, KIND, OP, REF, ALO, AHI, AFL, BLO, BHI, BFL, FL)                          \
    FN(fn_##NAME) {                                                                                \
        UNUSED_FN;                                                                                 \
        cft_array *x = in[0], *y = in[1];                                                          \
        out[0] = OP;                                                                               \
        return CFT_OK;                                                                             \
    }                                                                                              \
    static double ref_##NAME(const double *v) {                                                    \
        double a = v[0], b = v[1];                                                                 \
        return REF;                                                                                \
    }
UNARY_ROWS(DEF_UNARY)
BINARY_ROWS(DEF_BINARY)

#define ROW_UNARY(NAME, KIND, OP, REF, LO, HI, IFL, FL)                                            \
    {.prim = #NAME,                                                                                \
     .fn = fn_##NAME,                                                                              \
     .nin = 1,                                                                                     \
     .in = {{KIND, 2, {2, 3}, LO, HI, IFL}},                                                       \
     .out_nd = -1,                                                                                 \
     .ew = ref_##NAME,                                                                             \
     .flags = FL},
#define ROW_BINARY(NAME, KIND, OP, REF, ALO, AHI, AFL, BLO, BHI, BFL, FL)                          \
    {.prim = #NAME,                                                                                \
     .fn = fn_##NAME,                                                                              \
     .nin = 2,                                                                                     \
     .in = {{KIND, 2, {2, 3}, ALO, AHI, AFL}, {KIND, 2, {2, 3}, BLO, BHI, BFL}},                   \
     .out_nd = -1,                                                                                 \
     .ew = ref_##NAME,                                                                             \
     .flags = FL},

/* ---- elementwise references and ops that do not fit the two lists ---- */

static double ref_idiv(const double *v) {
    return trunc(v[0] / v[1]);
}
static double ref_select(const double *v) {
    return v[0] ? v[1] : v[2];
}
static double ref_to_other_float(const double *v) {
    return (float)v[0];
}
static double ref_toward_zero(const double *v) {
    return trunc(v[0]);
}
static double ref_id(const double *v) {
    return v[0];
}

FN(fn_select) {
    UNUSED_FN;
    out[0] = cft_where(in[0], in[1], in[2]);
    return CFT_OK;
}
FN(fn_convert_float) { /* f64 -> f32, f32 -> f64 */
    UNUSED_FN;
    out[0] = cft_astype(in[0], cft_array_dtype(in[0]) == CFT_F64 ? CFT_F32 : CFT_F64);
    return CFT_OK;
}
FN(fn_convert_i32) {
    UNUSED_FN;
    out[0] = cft_astype(in[0], CFT_I32);
    return CFT_OK;
}
FN(fn_convert_f64) {
    UNUSED_FN;
    out[0] = cft_astype(in[0], CFT_F64);
    return CFT_OK;
}
FN(fn_stop_gradient) {
    UNUSED_FN;
    out[0] = cft_stop_gradient(in[0]);
    return CFT_OK;
}

/* ---- structural ops: the row's p[] holds their parameters ---- */

static int64_t numel(const int64_t *s, int nd) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= s[i];
    return n;
}
static void unravel(int64_t i, const int64_t *s, int nd, int64_t *idx) {
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = s[d] ? i % s[d] : 0;
        i = s[d] ? i / s[d] : 0;
    }
}
static int64_t ravel(const int64_t *idx, const int64_t *s, int nd) {
    int64_t k = 0;
    for (int d = 0; d < nd; d++)
        k = k * s[d] + idx[d];
    return k;
}

/* the same elements in the same order (reshape, squeeze, expand_dims) */
static void ref_copy(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                     double *y) {
    (void)r, (void)o;
    memcpy(y, x[0], sizeof(double) * (size_t)numel(av[0].shape, av[0].ndim));
}

FN(fn_broadcast_in_dim) { /* p: out ndim, out shape[3], dims[x ndim] */
    UNUSED_FN;
    ENV_ROW;
    int64_t shape[4];
    for (int i = 0; i < r->p[0]; i++)
        shape[i] = r->p[1 + i];
    out[0] = cft_broadcast_in_dim(in[0], shape, r->p[0], r->p + 4);
    return CFT_OK;
}
static void ref_broadcast_in_dim(const row *r, double *const *x, const cft_aval *av,
                                 const cft_aval *o, double *y) {
    int64_t oi[8] = {0}, xi[8] = {0};
    for (int64_t i = 0; i < numel(o->shape, o->ndim); i++) {
        unravel(i, o->shape, o->ndim, oi);
        for (int d = 0; d < av[0].ndim; d++)
            xi[d] = av[0].shape[d] == 1 ? 0 : oi[r->p[4 + d]];
        y[i] = x[0][ravel(xi, av[0].shape, av[0].ndim)];
    }
}

FN(fn_reshape) { /* p: ndim, shape */
    UNUSED_FN;
    ENV_ROW;
    int64_t shape[4];
    for (int i = 0; i < r->p[0]; i++)
        shape[i] = r->p[1 + i];
    out[0] = cft_reshape(in[0], shape, r->p[0]);
    return CFT_OK;
}

FN(fn_transpose) { /* p: perm */
    UNUSED_FN;
    ENV_ROW;
    out[0] = cft_transpose(in[0], r->p);
    return CFT_OK;
}
static void ref_transpose(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                          double *y) {
    int64_t oi[8] = {0}, xi[8] = {0};
    for (int64_t i = 0; i < numel(o->shape, o->ndim); i++) {
        unravel(i, o->shape, o->ndim, oi);
        for (int d = 0; d < o->ndim; d++)
            xi[r->p[d]] = oi[d];
        y[i] = x[0][ravel(xi, av[0].shape, av[0].ndim)];
    }
}

FN(fn_squeeze) { /* p: naxes, axes */
    UNUSED_FN;
    ENV_ROW;
    out[0] = cft_squeeze(in[0], r->p + 1, r->p[0]);
    return CFT_OK;
}
FN(fn_expand_dims) { /* p: axis */
    UNUSED_FN;
    ENV_ROW;
    out[0] = cft_expand_dims(in[0], r->p[0]);
    return CFT_OK;
}

FN(fn_slice) { /* p: start[2], limit[2], strides[2] (rank-2 input) */
    UNUSED_FN;
    ENV_ROW;
    int64_t s[2] = {r->p[0], r->p[1]}, l[2] = {r->p[2], r->p[3]}, st[2] = {r->p[4], r->p[5]};
    out[0] = cft_slice(in[0], s, l, st);
    return CFT_OK;
}
static void ref_slice(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                      double *y) {
    int64_t oi[8] = {0}, xi[8] = {0};
    for (int64_t i = 0; i < numel(o->shape, o->ndim); i++) {
        unravel(i, o->shape, o->ndim, oi);
        for (int d = 0; d < 2; d++)
            xi[d] = r->p[d] + oi[d] * r->p[4 + d];
        y[i] = x[0][ravel(xi, av[0].shape, 2)];
    }
}

FN(fn_pad) { /* p: lo[2], hi[2], interior[2] (rank-2 input, 0-d value) */
    UNUSED_FN;
    ENV_ROW;
    int64_t lo[2] = {r->p[0], r->p[1]}, hi[2] = {r->p[2], r->p[3]}, it[2] = {r->p[4], r->p[5]};
    out[0] = cft_pad(in[0], in[1], lo, hi, it);
    return CFT_OK;
}
static void ref_pad(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                    double *y) {
    int64_t n = numel(o->shape, o->ndim), xi[8], oi[8];
    for (int64_t i = 0; i < n; i++)
        y[i] = x[1][0];
    for (int64_t i = 0; i < numel(av[0].shape, 2); i++) {
        unravel(i, av[0].shape, 2, xi);
        bool inside = true;
        for (int d = 0; d < 2; d++) {
            oi[d] = r->p[d] + xi[d] * (r->p[4 + d] + 1);
            inside &= oi[d] >= 0 && oi[d] < o->shape[d];
        }
        if (inside)
            y[ravel(oi, o->shape, 2)] = x[0][i];
    }
}

FN(fn_concatenate) { /* p: axis */
    UNUSED_FN;
    ENV_ROW;
    out[0] = cft_concatenate(in, nin, r->p[0]);
    return CFT_OK;
}
static void ref_concatenate(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                            double *y) {
    int ax = r->p[0];
    int64_t oi[8] = {0};
    for (int64_t i = 0; i < numel(o->shape, o->ndim); i++) {
        unravel(i, o->shape, o->ndim, oi);
        int k = 0;
        while (oi[ax] >= av[k].shape[ax])
            oi[ax] -= av[k++].shape[ax];
        y[i] = x[k][ravel(oi, av[k].shape, av[k].ndim)];
    }
}

FN(fn_iota) { /* iota of x's dtype over x's shape along p[0]; x is otherwise unused */
    UNUSED_FN;
    ENV_ROW;
    cft_aval a = cft_array_aval(in[0]);
    out[0] = cft_iota(a.dtype, a.shape, a.ndim, r->p[0]);
    return CFT_OK;
}
static void ref_iota(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                     double *y) {
    (void)x, (void)av;
    int64_t oi[8] = {0};
    for (int64_t i = 0; i < numel(o->shape, o->ndim); i++) {
        unravel(i, o->shape, o->ndim, oi);
        y[i] = (double)oi[r->p[0]];
    }
}

/* reductions: p: naxes, axes */
#define DEF_REDUCE(NAME, OP)                                                                       \
    FN(fn_##NAME) {                                                                                \
        UNUSED_FN;                                                                                 \
        ENV_ROW;                                                                                   \
        out[0] = OP(in[0], r->p + 1, r->p[0], false);                                              \
        return CFT_OK;                                                                             \
    }
DEF_REDUCE(reduce_sum, cft_sum)
DEF_REDUCE(reduce_max, cft_max)
DEF_REDUCE(reduce_min, cft_min)
DEF_REDUCE(reduce_prod, cft_prod)
enum { RSUM, RMAX, RMIN, RPROD, RARGMAX, RARGMIN };
/* p[0..]: naxes, axes; p[9]: which reduction */
static void ref_reduce(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                       double *y) {
    bool red[8] = {0};
    for (int i = 0; i < r->p[0]; i++)
        red[r->p[1 + i]] = true;
    int64_t no = numel(o->shape, o->ndim), xi[8], oi[8];
    double *best = calloc((size_t)no + 1, sizeof(double));
    for (int64_t i = 0; i < no; i++)
        y[i] = r->p[9] == RSUM ? 0 : r->p[9] == RPROD ? 1 : r->p[9] == RMAX ? -INFINITY : INFINITY;
    for (int64_t i = 0; i < no; i++)
        best[i] = r->p[9] == RARGMAX ? -INFINITY : INFINITY;
    for (int64_t i = 0; i < numel(av[0].shape, av[0].ndim); i++) {
        unravel(i, av[0].shape, av[0].ndim, xi);
        int k = 0, ax = 0;
        for (int d = 0; d < av[0].ndim; d++)
            if (!red[d])
                oi[k++] = xi[d];
            else
                ax = d;
        int64_t j = ravel(oi, o->shape, o->ndim);
        double v = x[0][i];
        switch (r->p[9]) {
        case RSUM:
            y[j] += v;
            break;
        case RPROD:
            y[j] *= v;
            break;
        case RMAX:
            y[j] = v > y[j] ? v : y[j];
            break;
        case RMIN:
            y[j] = v < y[j] ? v : y[j];
            break;
        case RARGMAX:
            if (v > best[j])
                best[j] = v, y[j] = (double)xi[ax];
            break;
        default:
            if (v < best[j])
                best[j] = v, y[j] = (double)xi[ax];
        }
    }
    free(best);
}
FN(fn_argmax) {
    UNUSED_FN;
    ENV_ROW;
    out[0] = cft_argmax(in[0], r->p[1], false);
    return CFT_OK;
}
FN(fn_argmin) {
    UNUSED_FN;
    ENV_ROW;
    out[0] = cft_argmin(in[0], r->p[1], false);
    return CFT_OK;
}

/* while: x <- 0.9 x + 0.1 sin(x), 4 times (an i32 counter in the carry) */
static cft_status while_cond(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    UNUSED_FN;
    out[0] = cft_lt(in[1], cft_scalar(4, CFT_I32));
    return CFT_OK;
}
static cft_status while_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    UNUSED_FN;
    out[0] = cft_add(cft_mul_s(in[0], 0.9), cft_mul_s(cft_sin(in[0]), 0.1));
    out[1] = cft_add(in[1], cft_scalar(1, CFT_I32));
    return CFT_OK;
}
FN(fn_while) {
    UNUSED_FN;
    static cft_fn *c, *b;
    if (!c)
        c = cft_fn_new(while_cond, NULL, 2, 1), b = cft_fn_new(while_body, NULL, 2, 2);
    cft_array *args[2] = {in[0], cft_scalar(0, CFT_I32)}, *res[2];
    cft_status st = cft_while_loop(c, b, 0, 2, args, res);
    out[0] = res[0];
    return st;
}
static double ref_while(const double *v) {
    double x = v[0];
    for (int n = 0; n < 4; n++)
        x = 0.9 * x + 0.1 * sin(x);
    return x;
}

/* cond: sum(x) > 0 ? sin(x) : cos(x) (the predicate depends on the input) */
static cft_status cond_sin(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    UNUSED_FN;
    out[0] = cft_sin(in[0]);
    return CFT_OK;
}
static cft_status cond_cos(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    UNUSED_FN;
    out[0] = cft_cos(in[0]);
    return CFT_OK;
}
FN(fn_cond) {
    UNUSED_FN;
    static cft_fn *t, *f;
    if (!t)
        t = cft_fn_new(cond_sin, NULL, 1, 1), f = cft_fn_new(cond_cos, NULL, 1, 1);
    cft_array *pred =
        cft_gt(cft_sum(in[0], NULL, 0, false), cft_zeros(cft_array_dtype(in[0]), NULL, 0));
    return cft_cond(pred, t, f, 1, in, out);
}
static void ref_cond(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                     double *y) {
    (void)r, (void)o;
    double s = 0;
    for (int64_t i = 0; i < av[0].shape[0]; i++)
        s += x[0][i];
    for (int64_t i = 0; i < av[0].shape[0]; i++)
        y[i] = s > 0 ? sin(x[0][i]) : cos(x[0][i]);
}

/* checkpoint: a rematerialized tanh(x * y) + x */
static cft_status ckpt_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    UNUSED_FN;
    out[0] = cft_add(cft_tanh(cft_mul(in[0], in[1])), in[0]);
    return CFT_OK;
}
FN(fn_checkpoint) {
    UNUSED_FN;
    static cft_fn *c;
    if (!c)
        c = cft_checkpoint(cft_fn_new(ckpt_body, NULL, 2, 1), CFT_SAVE_NOTHING);
    return cft_fn_call(c, in, out);
}
static double ref_checkpoint(const double *v) {
    return tanh(v[0] * v[1]) + v[0];
}

/* scan: body (a, h, x) -> (h' = tanh(a*h + x), y = h'^2); the row returns ys */
static cft_status scan_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    UNUSED_FN;
    cft_array *h = cft_tanh(cft_add(cft_mul(in[0], in[1]), in[2]));
    out[0] = h;
    out[1] = cft_square(h);
    return CFT_OK;
}
FN(fn_scan) {
    UNUSED_FN;
    static cft_fn *body;
    if (!body)
        body = cft_fn_new(scan_body, NULL, 3, 2);
    cft_array *res[2];
    cft_status st = cft_scan(body, 1, 1, cft_array_dim(in[2], 0), false, in, res);
    out[0] = res[1];
    return st;
}
static void ref_scan(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                     double *y) {
    (void)r, (void)o;
    int64_t T = av[2].shape[0], n = av[2].shape[1];
    double h[8];
    for (int64_t j = 0; j < n; j++)
        h[j] = x[1][j];
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < n; j++) {
            h[j] = tanh(x[0][j] * h[j] + x[2][t * n + j]);
            y[t * n + j] = h[j] * h[j];
        }
}

/* dot_general: p: nc, lc[2], rc[2], nb, lb[2], rb[2] */
FN(fn_dot_general) {
    UNUSED_FN;
    ENV_ROW;
    const int *p = r->p;
    out[0] = cft_dot_general(in[0], in[1], p + 1, p + 3, p[0], p + 6, p + 8, p[5]);
    return CFT_OK;
}
static void ref_dot_general(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                            double *y) {
    const int *p = r->p;
    int nc = p[0], nb = p[5], fa[8], fb[8], na = 0, nfb = 0;
    bool ua[8] = {0}, ub[8] = {0};
    for (int i = 0; i < nc; i++)
        ua[p[1 + i]] = ub[p[3 + i]] = true;
    for (int i = 0; i < nb; i++)
        ua[p[6 + i]] = ub[p[8 + i]] = true;
    for (int d = 0; d < av[0].ndim; d++)
        if (!ua[d])
            fa[na++] = d;
    for (int d = 0; d < av[1].ndim; d++)
        if (!ub[d])
            fb[nfb++] = d;
    int64_t cshape[2], nk = 1, oi[8], ci[2], ai[8], bi[8];
    for (int i = 0; i < nc; i++)
        nk *= cshape[i] = av[0].shape[p[1 + i]];
    for (int64_t i = 0; i < numel(o->shape, o->ndim); i++) {
        unravel(i, o->shape, o->ndim, oi);
        for (int k = 0; k < nb; k++)
            ai[p[6 + k]] = bi[p[8 + k]] = oi[k];
        for (int k = 0; k < na; k++)
            ai[fa[k]] = oi[nb + k];
        for (int k = 0; k < nfb; k++)
            bi[fb[k]] = oi[nb + na + k];
        double acc = 0;
        for (int64_t c = 0; c < nk; c++) {
            unravel(c, cshape, nc, ci);
            for (int k = 0; k < nc; k++)
                ai[p[1 + k]] = bi[p[3 + k]] = ci[k];
            acc +=
                x[0][ravel(ai, av[0].shape, av[0].ndim)] * x[1][ravel(bi, av[1].shape, av[1].ndim)];
        }
        y[i] = acc;
    }
}

/* ---- random: an independent Threefry-2x32-20 (checked against Random123's
 * known answers below) and the library's documented stream layout ---- */

static void tf2x32(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1, uint32_t out[2]) {
    static const int R[8] = {13, 15, 26, 6, 17, 29, 16, 24};
    uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1}, x0 = c0 + k0, x1 = c1 + k1;
    for (int rd = 0; rd < 20; rd++) {
        x0 += x1;
        x1 = (x1 << R[rd % 8]) | (x1 >> (32 - R[rd % 8]));
        x1 ^= x0;
        if (rd % 4 == 3) {
            uint32_t s = (uint32_t)rd / 4 + 1;
            x0 += ks[s % 3];
            x1 += ks[(s + 1) % 3] + s;
        }
    }
    out[0] = x0, out[1] = x1;
}
static uint32_t word(double v) {
    return (uint32_t)(int32_t)v;
}
static double as_i32(uint32_t w) {
    return (double)(int32_t)w;
}
static uint32_t stream_word(uint32_t k0, uint32_t k1, uint64_t i) {
    uint32_t o[2];
    tf2x32(k0, k1, (uint32_t)(i >> 1), 0x6b43a9b5u, o);
    return o[i & 1];
}

FN(fn_random_uniform) { /* p: dtype, ndim, shape */
    UNUSED_FN;
    ENV_ROW;
    int64_t shape[4];
    for (int i = 0; i < r->p[1]; i++)
        shape[i] = r->p[2 + i];
    out[0] = cft_random_uniform(in[0], (cft_dtype)r->p[0], shape, r->p[1], 0, 1);
    return CFT_OK;
}
static void ref_random_uniform(const row *r, double *const *x, const cft_aval *av,
                               const cft_aval *o, double *y) {
    (void)av;
    uint32_t k0 = word(x[0][0]), k1 = word(x[0][1]);
    for (int64_t i = 0; i < numel(o->shape, o->ndim); i++) {
        if (r->p[0] == CFT_F32) {
            y[i] = (double)(stream_word(k0, k1, (uint64_t)i) >> 8) * 0x1p-24;
        } else {
            uint64_t hi = stream_word(k0, k1, 2 * (uint64_t)i),
                     lo = stream_word(k0, k1, 2 * (uint64_t)i + 1);
            y[i] = (double)(((hi << 32) | lo) >> 11) * 0x1p-53;
        }
    }
}
FN(fn_random_split) { /* p: n */
    UNUSED_FN;
    ENV_ROW;
    out[0] = cft_random_split(in[0], r->p[0]);
    return CFT_OK;
}
static void ref_random_split(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                             double *y) {
    (void)av, (void)o;
    for (int i = 0; i < r->p[0]; i++) {
        uint32_t w[2];
        tf2x32(word(x[0][0]), word(x[0][1]), (uint32_t)i, 0x3c6ef372u, w);
        y[2 * i] = as_i32(w[0]), y[2 * i + 1] = as_i32(w[1]);
    }
}
FN(fn_random_fold_in) { /* p: data low 31 bits, data high bits */
    UNUSED_FN;
    ENV_ROW;
    out[0] = cft_random_fold_in(in[0], (int64_t)r->p[1] << 31 | r->p[0]);
    return CFT_OK;
}
static void ref_random_fold_in(const row *r, double *const *x, const cft_aval *av,
                               const cft_aval *o, double *y) {
    (void)av, (void)o;
    uint64_t d = (uint64_t)r->p[1] << 31 | (uint64_t)r->p[0];
    uint32_t w[2];
    tf2x32(word(x[0][0]), word(x[0][1]), (uint32_t)d, (uint32_t)(d >> 32) ^ 0xa54ff53au, w);
    y[0] = as_i32(w[0]), y[1] = as_i32(w[1]);
}

/* ---- 2:4 sparsity (sparse24.c): metadata i32 words, a group per 4 bits,
 * two 2-bit positions each; any word is valid (coinciding positions add) */
static int s24_pos(double word, int64_t g, int j) {
    uint32_t w = (uint32_t)(int32_t)word;
    return (int)((w >> (4 * (g % 8) + 2 * j)) & 3u);
}
FN(fn_s24_meta) {
    UNUSED_FN;
    out[0] = cft_sparse24_meta(in[0]);
    return CFT_OK;
}
static void ref_s24_meta(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                         double *y) { /* w [n, k] -> [n, ceil(k / 32)] */
    (void)r, (void)o;
    int64_t n = av[0].shape[0], k = av[0].shape[1], nw = (k / 4 + 7) / 8;
    for (int64_t i = 0; i < n; i++) {
        uint32_t words[4] = {0};
        for (int64_t g = 0; g < k / 4; g++) {
            const double *q = x[0] + i * k + 4 * g;
            int best[2] = {-1, -1}; /* the two largest |q|, the lower index on ties */
            for (int pass = 0; pass < 2; pass++)
                for (int c = 0; c < 4; c++)
                    if (c != best[0] && (best[pass] < 0 || fabs(q[c]) > fabs(q[best[pass]])))
                        best[pass] = c;
            int lo = best[0] < best[1] ? best[0] : best[1], hi = best[0] + best[1] - lo;
            words[g / 8] |= (uint32_t)(lo | hi << 2) << (4 * (g % 8));
        }
        for (int64_t w = 0; w < nw; w++)
            y[i * nw + w] = (double)(int32_t)words[w];
    }
}
FN(fn_s24_compress) { /* the kept values of w (meta and gather) */
    UNUSED_FN;
    out[0] = cft_sparse24_compress(in[0]).values;
    return CFT_OK;
}
static void ref_s24_compress(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                             double *y) { /* w [n, k] -> [n, k / 2] */
    int64_t n = av[0].shape[0], k = av[0].shape[1];
    double *m = malloc(sizeof(double) * (size_t)(n * 4));
    ref_s24_meta(r, x, av, o, m);
    for (int64_t i = 0; i < n; i++)
        for (int64_t g = 0; g < k / 4; g++)
            for (int j = 0; j < 2; j++)
                y[i * k / 2 + 2 * g + j] =
                    x[0][i * k + 4 * g + s24_pos(m[i * ((k / 4 + 7) / 8) + g / 8], g, j)];
    free(m);
}
FN(fn_s24_densify) {
    UNUSED_FN;
    out[0] = cft_sparse24_to_dense((cft_sparse24){in[0], in[1]});
    return CFT_OK;
}
static void s24_dense(const double *v, const double *meta, int64_t n, int64_t k, double *w) {
    int64_t nw = (k / 4 + 7) / 8;
    for (int64_t i = 0; i < n * k; i++)
        w[i] = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t g = 0; g < k / 4; g++)
            for (int j = 0; j < 2; j++)
                w[i * k + 4 * g + s24_pos(meta[i * nw + g / 8], g, j)] += v[i * k / 2 + 2 * g + j];
}
static void ref_s24_densify(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                            double *y) { /* values [n, k/2], meta -> [n, k] */
    (void)r, (void)o;
    s24_dense(x[0], x[1], av[0].shape[0], 2 * av[0].shape[1], y);
}
FN(fn_s24_linear) {
    UNUSED_FN;
    out[0] = cft_sparse24_linear(in[0], (cft_sparse24){in[1], in[2]});
    return CFT_OK;
}
static void ref_s24_linear(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                           double *y) { /* x [m, k], values [n, k/2], meta -> [m, n] */
    (void)r, (void)o;
    int64_t m = av[0].shape[0], k = av[0].shape[1], n = av[1].shape[0];
    double *w = malloc(sizeof(double) * (size_t)(n * k));
    s24_dense(x[1], x[2], n, k, w);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t q = 0; q < k; q++)
                acc += x[0][i * k + q] * w[j * k + q];
            y[i * n + j] = acc;
        }
    free(w);
}

/* ---- int8 linear (qlinear.c): packed s8 words, four per i32 */
static int8_t ql_byte(double word, int64_t b) {
    uint32_t w = (uint32_t)(int32_t)word;
    return (int8_t)(uint8_t)(w >> (8 * b));
}
FN(fn_ql_pack) { /* the packed words (as doubles) */
    UNUSED_FN;
    out[0] = cft_qlinear_pack(in[0]).w;
    return CFT_OK;
}
static void ref_ql_pack(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                        double *y) { /* w [n, k] -> words [n, ceil(k/4)] */
    (void)r, (void)o;
    int64_t n = av[0].shape[0], k = av[0].shape[1], kw = (k + 3) / 4;
    for (int64_t i = 0; i < n; i++) {
        double m = 0;
        for (int64_t j = 0; j < k; j++)
            m = fmax(m, fabs(x[0][i * k + j]));
        float sc = m > 0 ? (float)(m / 127) : 1.0f;
        for (int64_t w = 0; w < kw; w++) {
            uint32_t word = 0;
            for (int64_t b = 0; b < 4 && 4 * w + b < k; b++) {
                double q = nearbyint(x[0][i * k + 4 * w + b] / sc);
                word |= (uint32_t)(uint8_t)(int8_t)q << (8 * b);
            }
            y[i * kw + w] = (double)(int32_t)word;
        }
    }
}
FN(fn_ql_unpack) {
    UNUSED_FN;
    out[0] = cft_qlinear_unpack((cft_qlinear){in[0], in[1], 6});
    return CFT_OK;
}
static void ref_ql_unpack(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                          double *y) { /* words [n, 2], scale [n] -> [n, 6] */
    (void)r, (void)o;
    for (int64_t i = 0; i < av[0].shape[0]; i++)
        for (int64_t j = 0; j < 6; j++)
            y[i * 6 + j] = ql_byte(x[0][i * 2 + j / 4], j % 4) * x[1][i];
}
FN(fn_ql_dot) {
    UNUSED_FN;
    out[0] = cft_qlinear_apply(in[0], (cft_qlinear){in[1], in[2], 6});
    return CFT_OK;
}
FN(fn_ql_dot_smooth) { /* x times the unpacked weight, x not rounded */
    UNUSED_FN;
    out[0] = cft_matmul(in[0], cft_mT(cft_qlinear_unpack((cft_qlinear){in[1], in[2], 6})));
    return CFT_OK;
}
static void ref_ql_dot(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                       double *y) { /* x [m, 6], words [n, 2], scale [n] -> [m, n] */
    (void)r, (void)o;
    int64_t m = av[0].shape[0], n = av[1].shape[0];
    for (int64_t i = 0; i < m; i++) {
        double a = 0;
        for (int j = 0; j < 6; j++)
            a = fmax(a, fabs(x[0][i * 6 + j]));
        double xs = a > 0 ? a / 63 : 1, inv = a > 0 ? 63 / a : 1;
        for (int64_t c = 0; c < n; c++) {
            double acc = 0;
            for (int j = 0; j < 6; j++)
                acc += fmax(-63, fmin(63, nearbyint(x[0][i * 6 + j] * inv))) *
                       ql_byte(x[1][c * 2 + j / 4], j % 4);
            y[i * n + c] = xs * x[2][c] * acc;
        }
    }
}

/* ---- static int8 (qstatic.c): weights quantized with given scales;
 * x with the scale p[0] / 1000 and zero point p[1] on [0, 255] */
FN(fn_qs_quantize) {
    UNUSED_FN;
    out[0] = cft__qstatic_quantize(in[0], in[1], -128, 127);
    return CFT_OK;
}
static void ref_qs_quantize(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                            double *y) { /* w [n, 6], scale [n] -> words [n, 2] */
    (void)r, (void)o;
    for (int64_t i = 0; i < av[0].shape[0]; i++)
        for (int64_t w = 0; w < 2; w++) {
            uint32_t word = 0;
            for (int64_t b = 0; b < 4 && 4 * w + b < 6; b++) {
                double q = fmax(-128, fmin(127, nearbyint(x[0][i * 6 + 4 * w + b] / x[1][i])));
                word |= (uint32_t)(uint8_t)(int8_t)q << (8 * b);
            }
            y[i * 2 + w] = (double)(int32_t)word;
        }
}
/* dot_qstatic (p[2] 0) and dot_qint (p[2] 1: x on the grid already, its
 * zero point included; the kernel rounds and clamps it to [0, 255]) */
FN(fn_qs_dot) {
    UNUSED_FN;
    ENV_ROW;
    out[0] =
        cft__qdot_bind(in[0], in[1], in[2], cft_scalar(r->p[0] / 1000.0, cft_array_dtype(in[0])),
                       cft_scalar(r->p[1], CFT_I32), 6, 0, 255, r->p[2] != 0);
    return CFT_OK;
}
/* x [m, 6], words [n, 2], scale [n] -> [m, n]; x rounded onto the grid
 * with the scale p[0] / 1000 and zero point p[1], or already on it (p[2]) */
static void ref_qs_dot(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                       double *y) {
    (void)o;
    int64_t m = av[0].shape[0], n = av[1].shape[0];
    double xs = r->p[0] / 1000.0, zp = r->p[1];
    for (int64_t i = 0; i < m; i++)
        for (int64_t c = 0; c < n; c++) {
            double acc = 0;
            for (int j = 0; j < 6; j++) {
                double v = x[0][i * 6 + j];
                v = r->p[2] ? nearbyint(v) : nearbyint(v / xs) + zp;
                acc += (fmax(0, fmin(255, v)) - zp) * ql_byte(x[1][c * 2 + j / 4], j % 4);
            }
            y[i * n + c] = xs * x[2][c] * acc;
        }
}
/* dot_qwords: x [m, 2] words of 6 u8 values (the last word's top two
 * bytes past K), read as they are; the output in xscale's dtype (ws's) */
FN(fn_qw) {
    UNUSED_FN;
    (void)env;
    out[0] = cft__qdot_bind(in[0], in[1], in[2], cft_scalar(0.025, cft_array_dtype(in[2])),
                            cft_scalar(120, CFT_I32), 6, 0, 255, true);
    return CFT_OK;
}
static void ref_qw(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                   double *y) {
    (void)r, (void)o;
    int64_t m = av[0].shape[0], n = av[1].shape[0];
    for (int64_t i = 0; i < m; i++)
        for (int64_t c = 0; c < n; c++) {
            double acc = 0;
            for (int j = 0; j < 6; j++)
                acc += ((double)(uint8_t)ql_byte(x[0][i * 2 + j / 4], j % 4) - 120) *
                       ql_byte(x[1][c * 2 + j / 4], j % 4);
            y[i * n + c] = (av[2].dtype == CFT_F64 ? 0.025 : (double)0.025f) * x[2][c] * acc;
        }
}
FN(fn_qi_smooth) { /* dot_qint: (x - zp) xs times the unpacked weight, x not rounded */
    UNUSED_FN;
    ENV_ROW;
    cft_array *xd = cft_mul_s(cft_add_s(in[0], -r->p[1]), r->p[0] / 1000.0);
    out[0] = cft_matmul(xd, cft_mT(cft_qlinear_unpack((cft_qlinear){in[1], in[2], 6})));
    return CFT_OK;
}

/* conv_qstatic: x [2, 2, 5, 5], 3 output channels of 2 x 3 x 3 taps
 * (18: five words), stride 1, padding 1, x / 0.025 + 120 on [0, 255] */
static const int64_t qc_wshape[3] = {2, 3, 3}, qc_one[2] = {1, 1}, qc_pad[4] = {1, 1, 1, 1};
FN(fn_qc) {
    UNUSED_FN;
    ENV_ROW;
    out[0] = cft__qconv_bind(
        in[0], in[1], in[2], cft_scalar(r->p[0] / 1000.0, cft_array_dtype(in[0])),
        cft_scalar(r->p[1], CFT_I32), 0, 255, qc_wshape, 2, qc_one, qc_pad, qc_one, r->p[2] != 0);
    return CFT_OK;
}
FN(fn_qc_smooth) { /* the convolution of x (conv_qint: (x - zp) xs) with the dequantized weight */
    UNUSED_FN;
    ENV_ROW;
    cft_array *w = cft_reshape(cft_qlinear_unpack((cft_qlinear){in[1], in[2], 18}),
                               (int64_t[]){3, 2, 3, 3}, 4);
    cft_array *x = r->p[2] ? cft_mul_s(cft_add_s(in[0], -r->p[1]), r->p[0] / 1000.0) : in[0];
    out[0] = cft_conv_general_dilated(x, w, qc_one, qc_pad, NULL, qc_one, 1, 1);
    return CFT_OK;
}
/* the int32 sum of sample n, channel oc at position pos (of 5 x 5) of the
 * 3 x 3 convolution with padding 1 of rows [2, 2, 5, 5]: x's grid value
 * by grid(), clamped to [0, 255], less zp, times the weight's bytes */
static double qc_acc(const row *r, double *const *x, int n, int oc, int pos, double zp,
                     double (*grid)(const row *r, double v)) {
    int i = pos / 5, j = pos % 5;
    double acc = 0;
    for (int c = 0; c < 2; c++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                int ii = i - 1 + a, jj = j - 1 + b, t = c * 9 + a * 3 + b;
                if (ii < 0 || ii >= 5 || jj < 0 || jj >= 5)
                    continue;
                double v = grid(r, x[0][((n * 2 + c) * 5 + ii) * 5 + jj]);
                acc += (fmax(0, fmin(255, v)) - zp) * ql_byte(x[1][oc * 5 + t / 4], t % 4);
            }
    return acc;
}

/* conv_qact: fn_qc's convolution (x cast to f32: the primitive is f32's)
 * with a bias per channel, a ReLU and the rounding onto an output grid
 * (scale 0.05, zero point 3, [0, 200]) */
static const float qa_bias[3] = {0.3f, -0.2f, 0.1f};
FN(fn_qa) {
    UNUSED_FN;
    (void)env;
    cft_array *a[9] = {
        cft_astype(in[0], CFT_F32), in[1],
        cft_astype(in[2], CFT_F32), cft_scalar(0.025, CFT_F32),
        cft_scalar(120, CFT_I32),   cft_from_data(qa_bias, CFT_F32, (int64_t[]){3}, 1),
        cft_scalar(0, CFT_F32),     cft_scalar(0.05, CFT_F32),
        cft_scalar(3, CFT_F32)};
    out[0] = cft__qact_bind(a, (int64_t[]){0, 255, 0, 0, 200, 1, 0}, qc_wshape, 2, qc_one, qc_pad,
                            qc_one);
    return CFT_OK;
}
/* each op in f32, as the kernel: x / xs rounded, the sums exact, y =
 * (xs ws[o] rounded to f32) acc, then bias, ReLU, rounding, clamp */
static double qa_grid(const row *r, double v) {
    (void)r;
    return nearbyintf((float)v / 0.025f) + 120.0f;
}
static void ref_qa(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                   double *y) {
    (void)av, (void)o;
    for (int n = 0; n < 2; n++)
        for (int oc = 0; oc < 3; oc++)
            for (int pos = 0; pos < 25; pos++) {
                double acc = qc_acc(r, x, n, oc, pos, 120, qa_grid);
                float g = (float)((double)0.025f * (double)(float)x[2][oc]);
                float u = g * (float)acc + qa_bias[oc];
                u = u > 0 ? u : 0;
                float w = nearbyintf(u / 0.05f) + 3.0f;
                w = w < 0 ? 0 : w;
                y[(n * 3 + oc) * 25 + pos] = w > 200 ? 200 : w;
            }
}

/* p[2]: x on the grid (conv_qint) */
static double qc_grid(const row *r, double v) {
    return r->p[2] ? nearbyint(v) : nearbyint(v / (r->p[0] / 1000.0)) + r->p[1];
}
static void ref_qc(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                   double *y) {
    (void)av, (void)o;
    for (int n = 0; n < 2; n++)
        for (int oc = 0; oc < 3; oc++)
            for (int pos = 0; pos < 25; pos++)
                y[(n * 3 + oc) * 25 + pos] =
                    r->p[0] / 1000.0 * x[2][oc] * qc_acc(r, x, n, oc, pos, r->p[1], qc_grid);
}

/* ---- indexing (index.c): gather, scatter, scatter_add, dynamic_slice,
 * dynamic_update_slice. References follow the documented modes: take and
 * take_along_axis wrap negative indices, then clamp; CFT_INDEX_CLIP clamps
 * window starts; FILL_OR_DROP reads zeros / drops updates for windows not
 * inside; scatter applies updates in order (the last one wins). ---- */

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}
static int64_t wrap_clip(double v, int64_t n) { /* take: negative from the end, then clamp */
    int64_t i = (int64_t)v;
    return clampi(i < 0 ? i + n : i, 0, n - 1);
}
FN(fn_take0) {
    UNUSED_FN;
    out[0] = cft_take(in[0], in[1], 0);
    return CFT_OK;
}
static void ref_take0(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                      double *y) { /* x [n, d], idx [...] -> [..., d] */
    (void)r, (void)o;
    int64_t n = av[0].shape[0], d = av[0].shape[1], m = numel(av[1].shape, av[1].ndim);
    for (int64_t i = 0; i < m; i++)
        for (int64_t k = 0; k < d; k++)
            y[i * d + k] = x[0][wrap_clip(x[1][i], n) * d + k];
}
FN(fn_take_along1) {
    UNUSED_FN;
    out[0] = cft_take_along_axis(in[0], in[1], 1);
    return CFT_OK;
}
static void ref_take_along1(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                            double *y) { /* x [a, n], idx [a or 1, m] -> [a, m] */
    (void)r;
    int64_t n = av[0].shape[1], m = av[1].shape[1];
    for (int64_t i = 0; i < o->shape[0]; i++)
        for (int64_t j = 0; j < m; j++) {
            int64_t ii = av[1].shape[0] == 1 ? 0 : i;
            y[i * m + j] = x[0][i * n + wrap_clip(x[1][ii * m + j], n)];
        }
}
FN(fn_gather_points) { /* x [a, b, c] at points idx [p, 2] -> [p, c], FILL_OR_DROP */
    UNUSED_FN;
    cft_gather_dnums dn = {.offset_dims = {1},
                           .n_offset_dims = 1,
                           .collapsed_slice_dims = {0, 1},
                           .n_collapsed_slice_dims = 2,
                           .start_index_map = {0, 1},
                           .n_start_index_map = 2,
                           .index_vector_dim = 1};
    int64_t ss[3] = {1, 1, cft_array_dim(in[0], 2)};
    out[0] = cft_gather(in[0], in[1], &dn, ss, CFT_INDEX_FILL_OR_DROP);
    return CFT_OK;
}
static void ref_gather_points(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                              double *y) {
    (void)r, (void)o;
    int64_t a = av[0].shape[0], b = av[0].shape[1], c = av[0].shape[2];
    for (int64_t i = 0; i < av[1].shape[0]; i++) {
        int64_t p = (int64_t)x[1][2 * i], q = (int64_t)x[1][2 * i + 1];
        bool in = p >= 0 && p < a && q >= 0 && q < b;
        for (int64_t k = 0; k < c; k++)
            y[i * c + k] = in ? x[0][(p * b + q) * c + k] : 0;
    }
}
FN(fn_gather_windows) { /* x [a, b], idx [2, n] (index_vector_dim 0, components on dims 1, 0),
                           windows 2x3 -> [2, n, 3], CLIP */
    UNUSED_FN;
    cft_gather_dnums dn = {.offset_dims = {0, 2},
                           .n_offset_dims = 2,
                           .start_index_map = {1, 0},
                           .n_start_index_map = 2,
                           .index_vector_dim = 0};
    out[0] = cft_gather(in[0], in[1], &dn, (int64_t[]){2, 3}, CFT_INDEX_CLIP);
    return CFT_OK;
}
static void ref_gather_windows(const row *r, double *const *x, const cft_aval *av,
                               const cft_aval *o, double *y) {
    (void)r, (void)o;
    int64_t a = av[0].shape[0], b = av[0].shape[1], n = av[1].shape[1];
    for (int64_t k = 0; k < n; k++) {
        int64_t s1 = clampi((int64_t)x[1][k], 0, b - 3),
                s0 = clampi((int64_t)x[1][n + k], 0, a - 2);
        for (int64_t w0 = 0; w0 < 2; w0++)
            for (int64_t w1 = 0; w1 < 3; w1++)
                y[(w0 * n + k) * 3 + w1] = x[0][(s0 + w0) * b + s1 + w1];
    }
}
FN(fn_at_add0) {
    UNUSED_FN;
    out[0] = cft_at_add(in[0], in[1], in[2], 0);
    return CFT_OK;
}
static void ref_at_add0(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                        double *y) { /* x [n, d], idx [m], v [m, d] */
    (void)r, (void)o;
    int64_t n = av[0].shape[0], d = av[0].shape[1];
    memcpy(y, x[0], sizeof(double) * (size_t)(n * d));
    for (int64_t i = 0; i < av[1].shape[0]; i++) {
        int64_t j = (int64_t)x[1][i];
        j = j < 0 ? j + n : j;
        if (j >= 0 && j < n)
            for (int64_t k = 0; k < d; k++)
                y[j * d + k] += x[2][i * d + k];
    }
}
FN(fn_scatter_add_points) { /* x [a, b] += v [p] at points idx [p, 2], FILL_OR_DROP */
    UNUSED_FN;
    cft_scatter_dnums dn = {.inserted_window_dims = {0, 1},
                            .n_inserted_window_dims = 2,
                            .scatter_dims_to_operand_dims = {0, 1},
                            .n_scatter_dims_to_operand_dims = 2,
                            .index_vector_dim = 1};
    out[0] = cft_scatter_add(in[0], in[1], in[2], &dn, CFT_INDEX_FILL_OR_DROP);
    return CFT_OK;
}
static void ref_scatter_points(const row *r, double *const *x, const cft_aval *av,
                               const cft_aval *o, double *y) { /* p[0]: 1 add, 0 set */
    (void)o;
    int64_t a = av[0].shape[0], b = av[0].shape[1];
    memcpy(y, x[0], sizeof(double) * (size_t)(a * b));
    for (int64_t i = 0; i < av[1].shape[0]; i++) {
        int64_t p = (int64_t)x[1][2 * i], q = (int64_t)x[1][2 * i + 1];
        if (p >= 0 && p < a && q >= 0 && q < b)
            y[p * b + q] = (r->p[0] ? y[p * b + q] : 0) + x[2][i];
    }
}
FN(fn_at_set1) {
    UNUSED_FN;
    out[0] = cft_at_set(in[0], in[1], in[2], 1);
    return CFT_OK;
}
static void ref_at_set1(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                        double *y) { /* x [a, n], idx [m], v [a, m]: x[:, idx] = v */
    (void)r, (void)o;
    int64_t a = av[0].shape[0], n = av[0].shape[1], m = av[1].shape[0];
    memcpy(y, x[0], sizeof(double) * (size_t)(a * n));
    for (int64_t i = 0; i < m; i++) {
        int64_t j = (int64_t)x[1][i];
        j = j < 0 ? j + n : j;
        if (j >= 0 && j < n)
            for (int64_t k = 0; k < a; k++)
                y[k * n + j] = x[2][k * m + i];
    }
}
FN(fn_scatter_windows) { /* x [a, b], windows v [p, 2, 3] at starts idx [p, 2], CLIP */
    UNUSED_FN;
    cft_scatter_dnums dn = {.update_window_dims = {1, 2},
                            .n_update_window_dims = 2,
                            .scatter_dims_to_operand_dims = {0, 1},
                            .n_scatter_dims_to_operand_dims = 2,
                            .index_vector_dim = 1};
    out[0] = cft_scatter(in[0], in[1], in[2], &dn, CFT_INDEX_CLIP);
    return CFT_OK;
}
static void ref_scatter_windows(const row *r, double *const *x, const cft_aval *av,
                                const cft_aval *o, double *y) {
    (void)r, (void)o;
    int64_t a = av[0].shape[0], b = av[0].shape[1];
    memcpy(y, x[0], sizeof(double) * (size_t)(a * b));
    for (int64_t i = 0; i < av[1].shape[0]; i++) {
        int64_t s0 = clampi((int64_t)x[1][2 * i], 0, a - 2),
                s1 = clampi((int64_t)x[1][2 * i + 1], 0, b - 3);
        for (int64_t w0 = 0; w0 < 2; w0++)
            for (int64_t w1 = 0; w1 < 3; w1++)
                y[(s0 + w0) * b + s1 + w1] = x[2][(i * 2 + w0) * 3 + w1];
    }
}
FN(fn_dynamic_slice) { /* x [a, b] at start [2], sizes 2x3 */
    UNUSED_FN;
    out[0] = cft_dynamic_slice(in[0], in[1], (int64_t[]){2, 3});
    return CFT_OK;
}
static void ref_dynamic_slice(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                              double *y) {
    (void)r, (void)o;
    int64_t a = av[0].shape[0], b = av[0].shape[1];
    int64_t s0 = clampi((int64_t)x[1][0], 0, a - 2), s1 = clampi((int64_t)x[1][1], 0, b - 3);
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++)
            y[i * 3 + j] = x[0][(s0 + i) * b + s1 + j];
}
FN(fn_dynamic_update_slice) { /* x [a, b], update u [2, 3] at start [2] */
    UNUSED_FN;
    out[0] = cft_dynamic_update_slice(in[0], in[2], in[1]);
    return CFT_OK;
}
static void ref_dynamic_update_slice(const row *r, double *const *x, const cft_aval *av,
                                     const cft_aval *o, double *y) {
    (void)r, (void)o;
    int64_t a = av[0].shape[0], b = av[0].shape[1];
    int64_t s0 = clampi((int64_t)x[1][0], 0, a - 2), s1 = clampi((int64_t)x[1][1], 0, b - 3);
    memcpy(y, x[0], sizeof(double) * (size_t)(a * b));
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++)
            y[(s0 + i) * b + s1 + j] = x[2][i * 3 + j];
}
/* ---- end of indexing ---- */

/* ---- convolution (conv.c) and windows (window.c): the row's p[0] indexes
 * conv_ps / win_ps; references loop over the definitions ---- */

typedef struct {
    int64_t s[3], pad[6], ld[3], rd[3], G, B;
} conv_p;
static const conv_p conv_ps[] = {
    {{1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, 1}, /* plain */
    {{2, 1}, {1, 2, 0, 1}, {1, 1}, {1, 1}, 1, 1}, /* strided, padded */
    {{1, 1}, {1, 0, 0, 1}, {2, 1}, {1, 2}, 1, 1}, /* lhs and rhs dilation */
    {{2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 2, 1}, /* feature groups */
    {{1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, 2}, /* batch groups */
    {{2}, {2, -1}, {1}, {2}, 1, 1},               /* 1-d, negative padding */
};
FN(fn_conv_general_dilated) {
    UNUSED_FN;
    ENV_ROW;
    const conv_p *c = &conv_ps[r->p[0]];
    out[0] = cft_conv_general_dilated(in[0], in[1], c->s, c->pad, c->ld, c->rd, c->G, c->B);
    return CFT_OK;
}
/* y[n, o, p] = sum_{ci, tap} x[b*N/B + n, g*I + ci, p*s + tap*rd - lo (/ ld)] w[o, ci, tap] */
static void ref_conv(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                     double *y) {
    const conv_p *c = &conv_ps[r->p[0]];
    int nd = o->ndim, nsp = nd - 2;
    int64_t N = av[0].shape[0], C = av[0].shape[1], O = av[1].shape[0], I = av[1].shape[1];
    int64_t nk = numel(av[1].shape + 2, nsp), oi[8], tap[8];
    for (int64_t i = 0; i < numel(o->shape, nd); i++) {
        unravel(i, o->shape, nd, oi);
        int64_t g = c->G > 1 ? oi[1] / (O / c->G) : 0, b = c->B > 1 ? oi[1] / (O / c->B) : 0;
        double acc = 0;
        for (int64_t ci = 0; ci < I; ci++)
            for (int64_t t = 0; t < nk; t++) {
                unravel(t, av[1].shape + 2, nsp, tap);
                int64_t off = (b * (N / c->B) + oi[0]) * C + g * I + ci;
                bool ok = true;
                for (int d = 0; d < nsp && ok; d++) {
                    int64_t pos = oi[2 + d] * c->s[d] + tap[d] * c->rd[d] - c->pad[2 * d];
                    ok = pos >= 0 && pos % c->ld[d] == 0 && pos / c->ld[d] < av[0].shape[2 + d];
                    off = off * av[0].shape[2 + d] + pos / c->ld[d];
                }
                if (ok)
                    acc += x[0][off] * x[1][(oi[1] * I + ci) * nk + t];
            }
        y[i] = acc;
    }
}

FN(fn_rev) { /* flip axes 0 and 2 */
    UNUSED_FN;
    out[0] = cft_flip(in[0], (int[]){0, 2}, 2);
    return CFT_OK;
}
static void ref_rev(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                    double *y) {
    (void)r, (void)av;
    int64_t oi[8];
    for (int64_t i = 0; i < numel(o->shape, o->ndim); i++) {
        unravel(i, o->shape, o->ndim, oi);
        oi[0] = o->shape[0] - 1 - oi[0];
        oi[2] = o->shape[2] - 1 - oi[2];
        y[i] = x[0][ravel(oi, o->shape, o->ndim)];
    }
}

typedef struct {
    int64_t win[4], s[4], pad[8], d[4];
} win_p;
static const win_p win_ps[] = {
    {{1, 2, 2, 3}, {1, 1, 2, 1}, {0, 0, 0, 1, 1, 0, 1, 1}, {1, 1, 1, 1}}, /* on [2, 3, 5, 4] */
    {{1, 3, 2}, {1, 2, 2}, {0, 0, 1, 1, 0, 0}, {1, 2, 3}},                /* on [3, 7, 6] */
};
enum { W_SUM, W_MAX, W_GATHER, W_SCATTER };
static cft_array *win_op(const row *r, cft_array *x, bool is_max) {
    const win_p *w = &win_ps[r->p[0]];
    return is_max ? cft_reduce_window_max(x, w->win, w->s, w->pad, w->d)
                  : cft_reduce_window_sum(x, w->win, w->s, w->pad, w->d);
}
FN(fn_reduce_window_sum) {
    UNUSED_FN;
    out[0] = win_op(env, in[0], false);
    return CFT_OK;
}
FN(fn_reduce_window_max) {
    UNUSED_FN;
    out[0] = win_op(env, in[0], true);
    return CFT_OK;
}
/* select_and_gather_add(t, x) is the jvp of reduce_window_max at x along t;
 * select_and_scatter_add(s, x) its vjp at x with cotangent s */
FN(fn_window_max_of_x) {
    UNUSED_FN;
    out[0] = win_op(env, in[0], true);
    return CFT_OK;
}
FN(fn_select_and_gather_add) {
    UNUSED_FN;
    cft_array *o[2];
    cft_fn *f = cft_fn_new(fn_window_max_of_x, env, 1, 1);
    cft_fn_call(cft_jvp(f), (cft_array *[]){in[1], in[0]}, o);
    out[0] = o[1];
    return CFT_OK;
}
FN(fn_select_and_scatter_add) {
    UNUSED_FN;
    cft_array *ys, *ct[1];
    cft_fn *pb = NULL;
    cft_vjp(cft_fn_new(fn_window_max_of_x, env, 1, 1), &in[1], &ys, &pb);
    if (!pb) {
        out[0] = ys;
        return CFT_OK;
    }
    cft_fn_call(pb, &in[0], ct);
    out[0] = ct[0];
    return CFT_OK;
}
/* p[1]: W_SUM, W_MAX (x = x[0]); W_GATHER (t = x[0], x = x[1]); W_SCATTER
 * (s = x[0], x = x[1]). Taps in row-major order; the first maximum wins. */
static void ref_window(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                       double *y) {
    const win_p *w = &win_ps[r->p[0]];
    int op = r->p[1];
    const cft_aval *xa = op >= W_GATHER ? &av[1] : &av[0];
    const double *xv = op >= W_GATHER ? x[1] : x[0];
    int nd = xa->ndim;
    int64_t os[8], oi[8], ki[8], xi[8];
    for (int d = 0; d < nd; d++) {
        int64_t pd = xa->shape[d] + w->pad[2 * d] + w->pad[2 * d + 1],
                kd = (w->win[d] - 1) * w->d[d] + 1;
        os[d] = pd >= kd ? (pd - kd) / w->s[d] + 1 : 0;
    }
    if (op == W_SCATTER)
        for (int64_t i = 0; i < numel(o->shape, o->ndim); i++)
            y[i] = 0;
    for (int64_t i = 0; i < numel(os, nd); i++) {
        unravel(i, os, nd, oi);
        double acc = op == W_MAX ? -INFINITY : 0;
        int64_t best = -1;
        for (int64_t k = 0; k < numel(w->win, nd); k++) {
            unravel(k, w->win, nd, ki);
            bool ok = true;
            for (int d = 0; d < nd; d++) {
                xi[d] = oi[d] * w->s[d] + ki[d] * w->d[d] - w->pad[2 * d];
                ok &= xi[d] >= 0 && xi[d] < xa->shape[d];
            }
            if (!ok)
                continue;
            int64_t j = ravel(xi, xa->shape, nd);
            if (op == W_SUM)
                acc += xv[j];
            else if (best < 0 || xv[j] > xv[best])
                best = j;
        }
        if (op == W_SUM)
            y[i] = acc;
        else if (op == W_MAX)
            y[i] = best < 0 ? -INFINITY : xv[best];
        else if (op == W_GATHER)
            y[i] = best < 0 ? 0 : x[0][best];
        else if (best >= 0)
            y[best] += x[0][i];
    }
}

#define EW23 .out_nd = -1
#define F23(lo, hi)                                                                                \
    { F, 2, {2, 3}, lo, hi, 0 }
#define X234                                                                                       \
    { F, 3, {2, 3, 4}, -2, 2, 0 }

#include "rows_scan_sort.h" /* scans, sorting, extra elementwise ops */
#include "rows_linalg.h"    /* linear algebra (definitions) */
#include "rows_fft.h"       /* fft (definitions) */

/* clang-format off */
static const row rows[] = {
    UNARY_ROWS(ROW_UNARY)
    BINARY_ROWS(ROW_BINARY)
    ROWS_SCAN_SORT
#include "rows_linalg.h" /* linear algebra (rows) */
#include "rows_fft.h"    /* fft (rows) */
    /* integer paths of the numeric elementwise rows (derivative zero) */
    {.prim = "neg", .label = "neg (i32)", .fn = fn_neg, .nin = 1, .in = {{I, 2, {2, 3}, -5, 5, 0}},
     EW23, .ew = ref_neg, .flags = NONDIFF},
    {.prim = "abs", .label = "abs (i32)", .fn = fn_abs, .nin = 1, .in = {{I, 2, {2, 3}, -5, 5, 0}},
     EW23, .ew = ref_abs, .flags = NONDIFF},
    {.prim = "sign", .label = "sign (i32)", .fn = fn_sign, .nin = 1,
     .in = {{I, 2, {2, 3}, -2, 2, 0}}, EW23, .ew = ref_sign, .flags = NONDIFF},
    {.prim = "square", .label = "square (i32)", .fn = fn_square, .nin = 1,
     .in = {{I, 2, {2, 3}, -5, 5, 0}}, EW23, .ew = ref_square, .flags = NONDIFF},
    {.prim = "add", .label = "add (i32)", .fn = fn_add, .nin = 2,
     .in = {{I, 2, {2, 3}, -9, 9, 0}, {I, 2, {2, 3}, -9, 9, 0}}, EW23, .ew = ref_add,
     .flags = NONDIFF},
    {.prim = "mul", .label = "mul (i32)", .fn = fn_mul, .nin = 2,
     .in = {{I, 2, {2, 3}, -9, 9, 0}, {I, 2, {2, 3}, -9, 9, 0}}, EW23, .ew = ref_mul,
     .flags = NONDIFF},
    {.prim = "div", .label = "div (i32, truncating)", .fn = fn_div, .nin = 2,
     .in = {{I, 2, {2, 3}, -9, 9, 0}, {I, 2, {2, 3}, 1, 4, SIGNED}}, EW23, .ew = ref_idiv,
     .flags = NONDIFF},
    {.prim = "max", .label = "max (i32)", .fn = fn_max, .nin = 2,
     .in = {{I, 2, {2, 3}, -3, 3, 0}, {I, 2, {2, 3}, -3, 3, 0}}, EW23, .ew = ref_max,
     .flags = NONDIFF},
    {.prim = "lt", .label = "lt (i32)", .fn = fn_lt, .nin = 2,
     .in = {{I, 2, {2, 3}, -2, 2, 0}, {I, 2, {2, 3}, -2, 2, 0}}, EW23, .ew = ref_lt,
     .flags = NONDIFF},
    /* select */
    {.prim = "select", .fn = fn_select, .nin = 3,
     .in = {{B, 2, {2, 3}, 0, 1, 0}, F23(-2, 2), F23(-2, 2)}, EW23, .ew = ref_select, .flags = O2},
    /* convert_element_type */
    {.prim = "convert_element_type", .label = "convert_element_type (float <-> float)",
     .fn = fn_convert_float, .nin = 1, .in = {F23(-3, 3)}, EW23, .ew = ref_to_other_float,
     .flags = LINEAR_FD | ANY_DTYPE},
    {.prim = "convert_element_type", .label = "convert_element_type (float -> i32)",
     .fn = fn_convert_i32, .nin = 1, .in = {F23(-3, 3)}, EW23, .ew = ref_toward_zero,
     .flags = NONDIFF | ANY_DTYPE},
    {.prim = "convert_element_type", .label = "convert_element_type (i32 -> f64)",
     .fn = fn_convert_f64, .nin = 1, .in = {{I, 2, {2, 3}, -9, 9, 0}}, EW23, .ew = ref_id,
     .flags = NONDIFF},
    {.prim = "convert_element_type", .label = "convert_element_type (bool -> f64)",
     .fn = fn_convert_f64, .nin = 1, .in = {{B, 2, {2, 3}, 0, 1, 0}}, EW23, .ew = ref_id,
     .flags = NONDIFF},
    /* shapes */
    {.prim = "broadcast_in_dim", .fn = fn_broadcast_in_dim, .nin = 1,
     .in = {{F, 2, {3, 1}, -2, 2, 0}}, .out_nd = 3, .out_shape = {2, 3, 4},
     .ref = ref_broadcast_in_dim, .p = {3, 2, 3, 4, 1, 2}, .flags = O2},
    {.prim = "broadcast_in_dim", .label = "broadcast_in_dim (scalar)", .fn = fn_broadcast_in_dim,
     .nin = 1, .in = {{F, 0, {0}, -2, 2, 0}}, .out_nd = 2, .out_shape = {2, 3},
     .ref = ref_broadcast_in_dim, .p = {2, 2, 3}, .flags = O2},
    {.prim = "reshape", .fn = fn_reshape, .nin = 1, .in = {X234}, .out_nd = 2, .out_shape = {4, 6},
     .ref = ref_copy, .p = {2, 4, 6}, .flags = O2},
    {.prim = "transpose", .fn = fn_transpose, .nin = 1, .in = {X234}, .out_nd = 3,
     .out_shape = {4, 2, 3}, .ref = ref_transpose, .p = {2, 0, 1}, .flags = O2},
    {.prim = "squeeze", .fn = fn_squeeze, .nin = 1, .in = {{F, 3, {2, 1, 3}, -2, 2, 0}},
     .out_nd = 2, .out_shape = {2, 3}, .ref = ref_copy, .p = {1, 1}, .flags = O2},
    {.prim = "expand_dims", .fn = fn_expand_dims, .nin = 1, .in = {F23(-2, 2)}, .out_nd = 3,
     .out_shape = {2, 1, 3}, .ref = ref_copy, .p = {1}, .flags = O2},
    {.prim = "slice", .fn = fn_slice, .nin = 1, .in = {{F, 2, {5, 6}, -2, 2, 0}}, .out_nd = 2,
     .out_shape = {2, 2}, .ref = ref_slice, .p = {1, 0, 5, 6, 2, 3}, .flags = O2},
    {.prim = "slice", .label = "slice (unit strides)", .fn = fn_slice, .nin = 1,
     .in = {{F, 2, {5, 6}, -2, 2, 0}}, .out_nd = 2, .out_shape = {3, 3}, .ref = ref_slice,
     .p = {1, 2, 4, 5, 1, 1}, .flags = O2},
    {.prim = "pad", .fn = fn_pad, .nin = 2, .in = {F23(-2, 2), {F, 0, {0}, -2, 2, 0}}, .out_nd = 2,
     .out_shape = {4, 4}, .ref = ref_pad, .p = {1, -1, 0, 2, 1, 0}, .flags = O2},
    {.prim = "concatenate", .fn = fn_concatenate, .nin = 3,
     .in = {F23(-2, 2), {F, 2, {2, 1}, -2, 2, 0}, {F, 2, {2, 2}, -2, 2, 0}}, .out_nd = 2,
     .out_shape = {2, 6}, .ref = ref_concatenate, .p = {1}, .flags = O2},
    {.prim = "concatenate", .label = "concatenate (axis 0)", .fn = fn_concatenate, .nin = 2,
     .in = {F23(-2, 2), {F, 2, {1, 3}, -2, 2, 0}}, .out_nd = 2, .out_shape = {3, 3},
     .ref = ref_concatenate, .p = {0}, .flags = O2},
    {.prim = "iota", .fn = fn_iota, .nin = 1, .in = {F23(-2, 2)}, EW23, .ref = ref_iota, .p = {1},
     .flags = NONDIFF},
    {.prim = "stop_gradient", .fn = fn_stop_gradient, .nin = 1, .in = {F23(-2, 2)}, EW23,
     .ew = ref_id, .flags = NONDIFF},
    /* reductions */
    {.prim = "reduce_sum", .fn = fn_reduce_sum, .nin = 1, .in = {X234}, .out_nd = 1,
     .out_shape = {3}, .ref = ref_reduce, .p = {2, 0, 2, [9] = RSUM}, .flags = O2},
    {.prim = "reduce_sum", .label = "reduce_sum (all axes)", .fn = fn_reduce_sum, .nin = 1,
     .in = {X234}, .out_nd = 0, .ref = ref_reduce, .p = {3, 0, 1, 2, [9] = RSUM}, .flags = O2},
    {.prim = "reduce_max", .fn = fn_reduce_max, .nin = 1, .in = {X234}, .out_nd = 2,
     .out_shape = {2, 4}, .ref = ref_reduce, .p = {1, 1, [9] = RMAX}, .flags = O2},
    {.prim = "reduce_min", .fn = fn_reduce_min, .nin = 1, .in = {X234}, .out_nd = 1,
     .out_shape = {3}, .ref = ref_reduce, .p = {2, 0, 2, [9] = RMIN}, .flags = O2},
    {.prim = "reduce_prod", .fn = fn_reduce_prod, .nin = 1,
     .in = {{F, 3, {2, 3, 4}, 0.5, 1.5, SIGNED}}, .out_nd = 2, .out_shape = {2, 3},
     .ref = ref_reduce, .p = {1, 2, [9] = RPROD}, .flags = O2},
    {.prim = "reduce_prod", .label = "reduce_prod (with zeros)", .fn = fn_reduce_prod, .nin = 1,
     .in = {{F, 3, {2, 3, 3}, -1, 1, DISCRETE}}, .out_nd = 2, .out_shape = {2, 3},
     .ref = ref_reduce, .p = {1, 2, [9] = RPROD}, .flags = O2},
    {.prim = "argmax", .fn = fn_argmax, .nin = 1, .in = {X234}, .out_nd = 2, .out_shape = {2, 4},
     .ref = ref_reduce, .p = {1, 1, [9] = RARGMAX}, .flags = NONDIFF | ANY_DTYPE},
    {.prim = "argmin", .fn = fn_argmin, .nin = 1, .in = {X234}, .out_nd = 2, .out_shape = {2, 3},
     .ref = ref_reduce, .p = {1, 2, [9] = RARGMIN}, .flags = NONDIFF | ANY_DTYPE},
    /* dot_general: p = nc, lc[2], rc[2], nb, lb[2], rb[2] */
    {.prim = "dot_general", .label = "dot_general (matmul)", .fn = fn_dot_general, .nin = 2,
     .in = {{F, 2, {3, 4}, -2, 2, 0}, {F, 2, {4, 5}, -2, 2, 0}}, .out_nd = 2, .out_shape = {3, 5},
     .ref = ref_dot_general, .p = {1, 1, 0, 0, 0, 0}, .flags = O2},
    {.prim = "dot_general", .label = "dot_general (batch dims)", .fn = fn_dot_general, .nin = 2,
     .in = {{F, 3, {2, 3, 4}, -2, 2, 0}, {F, 3, {2, 4, 5}, -2, 2, 0}}, .out_nd = 3,
     .out_shape = {2, 3, 5}, .ref = ref_dot_general, .p = {1, 2, 0, 1, 0, 1, 0, 0, 0, 0},
     .flags = O2},
    {.prim = "dot_general", .label = "dot_general (two contracting dims)", .fn = fn_dot_general,
     .nin = 2, .in = {{F, 3, {3, 4, 2}, -2, 2, 0}, {F, 3, {2, 4, 5}, -2, 2, 0}}, .out_nd = 2,
     .out_shape = {3, 5}, .ref = ref_dot_general, .p = {2, 1, 2, 1, 0, 0}, .flags = O2},
    /* scan over 4 steps of a carried vector: the loop primitive under every check */
    {.prim = "scan", .fn = fn_scan, .nin = 3,
     .in = {{F, 1, {3}, -1, 1, 0}, {F, 1, {3}, -1, 1, 0}, {F, 2, {4, 3}, -1, 1, 0}}, .out_nd = 2,
     .out_shape = {4, 3}, .ref = ref_scan, .flags = O2},
    /* an unbounded while loop: forward mode and vmap (reverse mode needs a bound) */
    {.prim = "while", .fn = fn_while, .nin = 1, .in = {{F, 1, {3}, -2, 2, 0}}, .out_nd = -1,
     .ew = ref_while, .flags = O2 | FORWARD_ONLY},
    /* cond with a data-dependent predicate (batched under vmap: a select per lane) */
    {.prim = "cond", .fn = fn_cond, .nin = 1, .in = {{F, 1, {4}, -2, 2, 0}}, .out_nd = -1,
     .ref = ref_cond, .flags = O2},
    /* checkpoint (rematerialization) of an elementwise body */
    {.prim = "checkpoint", .fn = fn_checkpoint, .nin = 2, .in = {{F, 2, {2, 3}, -2, 2, 0}, {F, 2, {2, 3}, -2, 2, 0}},
     .out_nd = -1, .ew = ref_checkpoint, .flags = O2},
    {.prim = "dot_general", .label = "dot_general (batch dims not leading)", .fn = fn_dot_general,
     .nin = 2, .in = {{F, 3, {4, 2, 3}, -2, 2, 0}, {F, 3, {5, 4, 2}, -2, 2, 0}}, .out_nd = 3,
     .out_shape = {2, 3, 5}, .ref = ref_dot_general, .p = {1, 0, 0, 1, 0, 1, 1, 0, 2, 0},
     .flags = O2},
    {.prim = "dot_general", .label = "dot_general (vector . vector)", .fn = fn_dot_general,
     .nin = 2, .in = {{F, 1, {4}, -2, 2, 0}, {F, 1, {4}, -2, 2, 0}}, .out_nd = 0,
     .ref = ref_dot_general, .p = {1, 0, 0, 0, 0, 0}, .flags = O2},
    {.prim = "dot_general", .label = "dot_general (transposed operands)", .fn = fn_dot_general,
     .nin = 2, .in = {{F, 2, {4, 3}, -2, 2, 0}, {F, 2, {5, 4}, -2, 2, 0}}, .out_nd = 2,
     .out_shape = {3, 5}, .ref = ref_dot_general, .p = {1, 0, 0, 1, 0, 0}, .flags = O2},
    {.prim = "dot_general", .label = "dot_general (i32, transposed operands)", .fn = fn_dot_general,
     .nin = 2, .in = {{I, 2, {4, 3}, -5, 5, 0}, {I, 2, {5, 4}, -5, 5, 0}}, .out_nd = 2,
     .out_shape = {3, 5}, .ref = ref_dot_general, .p = {1, 0, 0, 1, 0, 0}, .flags = NONDIFF},
    {.prim = "dot_general", .label = "dot_general (i32)", .fn = fn_dot_general, .nin = 2,
     .in = {{I, 2, {3, 4}, -5, 5, 0}, {I, 2, {4, 5}, -5, 5, 0}}, .out_nd = 2, .out_shape = {3, 5},
     .ref = ref_dot_general, .p = {1, 1, 0, 0, 0, 0}, .flags = NONDIFF},
    /* indexing: inputs are operand, indices (i32, ranges reaching out of bounds) [, updates] */
    {.prim = "gather", .label = "gather (embedding lookup x[idx], clip)", .fn = fn_take0, .nin = 2,
     .in = {{F, 2, {5, 3}, -2, 2, 0}, {I, 2, {2, 3}, -7, 6, 0}}, .out_nd = 3,
     .out_shape = {2, 3, 3}, .ref = ref_take0, .flags = O2},
    {.prim = "gather", .label = "gather (take_along_axis)", .fn = fn_take_along1, .nin = 2,
     .in = {{F, 2, {3, 4}, -2, 2, 0}, {I, 2, {3, 2}, -5, 4, 0}}, .out_nd = 2, .out_shape = {3, 2},
     .ref = ref_take_along1, .flags = O2},
    {.prim = "gather", .label = "gather (take_along_axis, broadcast indices)", .fn = fn_take_along1,
     .nin = 2, .in = {{F, 2, {3, 4}, -2, 2, 0}, {I, 2, {1, 2}, -5, 4, 0}}, .out_nd = 2,
     .out_shape = {3, 2}, .ref = ref_take_along1, .flags = O2},
    {.prim = "gather", .label = "gather (2-d points, fill)", .fn = fn_gather_points, .nin = 2,
     .in = {{F, 3, {4, 5, 3}, -2, 2, 0}, {I, 2, {6, 2}, -1, 5, 0}}, .out_nd = 2,
     .out_shape = {6, 3}, .ref = ref_gather_points, .flags = O2},
    {.prim = "gather", .label = "gather (2x3 windows, index_vector_dim 0, clip)",
     .fn = fn_gather_windows, .nin = 2, .in = {{F, 2, {6, 5}, -2, 2, 0}, {I, 2, {2, 3}, -2, 6, 0}},
     .out_nd = 3, .out_shape = {2, 3, 3}, .ref = ref_gather_windows, .flags = O2},
    {.prim = "scatter_add", .label = "scatter_add (x.at[idx].add, drop)", .fn = fn_at_add0,
     .nin = 3, .in = {{F, 2, {5, 3}, -2, 2, 0}, {I, 1, {4}, -7, 6, 0}, {F, 2, {4, 3}, -2, 2, 0}},
     .out_nd = 2, .out_shape = {5, 3}, .ref = ref_at_add0, .flags = O2},
    {.prim = "scatter_add", .label = "scatter_add (2-d points, drop)", .fn = fn_scatter_add_points,
     .nin = 3, .in = {{F, 2, {4, 5}, -2, 2, 0}, {I, 2, {6, 2}, -1, 5, 0}, {F, 1, {6}, -2, 2, 0}},
     .out_nd = 2, .out_shape = {4, 5}, .ref = ref_scatter_points, .p = {1}, .flags = O2},
    {.prim = "scatter", .label = "scatter (x.at[:, idx].set, drop)", .fn = fn_at_set1, .nin = 3,
     .in = {{F, 2, {3, 5}, -2, 2, 0}, {I, 1, {4}, -6, 6, 0}, {F, 2, {3, 4}, -2, 2, 0}},
     .out_nd = 2, .out_shape = {3, 5}, .ref = ref_at_set1, .flags = O2},
    {.prim = "scatter", .label = "scatter (2x3 windows, clip, overlapping)",
     .fn = fn_scatter_windows, .nin = 3,
     .in = {{F, 2, {6, 5}, -2, 2, 0}, {I, 2, {3, 2}, -2, 6, 0}, {F, 3, {3, 2, 3}, -2, 2, 0}},
     .out_nd = 2, .out_shape = {6, 5}, .ref = ref_scatter_windows, .flags = O2},
    {.prim = "dynamic_slice", .fn = fn_dynamic_slice, .nin = 2,
     .in = {{F, 2, {5, 6}, -2, 2, 0}, {I, 1, {2}, -2, 6, 0}}, .out_nd = 2, .out_shape = {2, 3},
     .ref = ref_dynamic_slice, .flags = O2},
    {.prim = "dynamic_update_slice", .fn = fn_dynamic_update_slice, .nin = 3,
     .in = {{F, 2, {5, 6}, -2, 2, 0}, {I, 1, {2}, -2, 6, 0}, {F, 2, {2, 3}, -2, 2, 0}},
     .out_nd = 2, .out_shape = {5, 6}, .ref = ref_dynamic_update_slice, .flags = O2},
    /* conv_general_dilated: p[0] indexes conv_ps */
    {.prim = "conv_general_dilated", .label = "conv_general_dilated (2-d)",
     .fn = fn_conv_general_dilated, .nin = 2,
     .in = {{F, 4, {2, 3, 5, 5}, -1, 1, 0}, {F, 4, {4, 3, 3, 3}, -1, 1, 0}}, .out_nd = 4,
     .out_shape = {2, 4, 3, 3}, .ref = ref_conv, .p = {0}, .flags = O2 | BLAS_SHAPES},
    {.prim = "conv_general_dilated", .label = "conv_general_dilated (strided, padded)",
     .fn = fn_conv_general_dilated, .nin = 2,
     .in = {{F, 4, {2, 2, 6, 5}, -1, 1, 0}, {F, 4, {3, 2, 3, 2}, -1, 1, 0}}, .out_nd = 4,
     .out_shape = {2, 3, 4, 5}, .ref = ref_conv, .p = {1}, .flags = O2 | BLAS_SHAPES},
    {.prim = "conv_general_dilated", .label = "conv_general_dilated (lhs and rhs dilation)",
     .fn = fn_conv_general_dilated, .nin = 2,
     .in = {{F, 4, {1, 2, 4, 4}, -1, 1, 0}, {F, 4, {2, 2, 2, 2}, -1, 1, 0}}, .out_nd = 4,
     .out_shape = {1, 2, 7, 3}, .ref = ref_conv, .p = {2}, .flags = O2 | BLAS_SHAPES},
    {.prim = "conv_general_dilated", .label = "conv_general_dilated (feature groups, strided)",
     .fn = fn_conv_general_dilated, .nin = 2,
     .in = {{F, 4, {2, 4, 5, 5}, -1, 1, 0}, {F, 4, {6, 2, 3, 3}, -1, 1, 0}}, .out_nd = 4,
     .out_shape = {2, 6, 3, 3}, .ref = ref_conv, .p = {3}, .flags = O2 | BLAS_SHAPES},
    {.prim = "conv_general_dilated", .label = "conv_general_dilated (batch groups)",
     .fn = fn_conv_general_dilated, .nin = 2,
     .in = {{F, 4, {4, 3, 4, 4}, -1, 1, 0}, {F, 4, {4, 3, 2, 2}, -1, 1, 0}}, .out_nd = 4,
     .out_shape = {2, 4, 3, 3}, .ref = ref_conv, .p = {4}, .flags = O2 | BLAS_SHAPES},
    {.prim = "conv_general_dilated", .label = "conv_general_dilated (1-d, negative padding)",
     .fn = fn_conv_general_dilated, .nin = 2,
     .in = {{F, 3, {2, 3, 7}, -1, 1, 0}, {F, 3, {4, 3, 3}, -1, 1, 0}}, .out_nd = 3,
     .out_shape = {2, 4, 2}, .ref = ref_conv, .p = {5}, .flags = O2 | BLAS_SHAPES},
    {.prim = "rev", .fn = fn_rev, .nin = 1, .in = {X234}, .out_nd = -1, .ref = ref_rev,
     .flags = O2},
    /* windows: p[0] indexes win_ps, p[1] the reference's op */
    {.prim = "reduce_window_sum", .fn = fn_reduce_window_sum, .nin = 1,
     .in = {{F, 4, {2, 3, 5, 4}, -2, 2, 0}}, .out_nd = 4, .out_shape = {2, 3, 3, 4},
     .ref = ref_window, .p = {0, W_SUM}, .flags = O2},
    {.prim = "reduce_window_sum", .label = "reduce_window_sum (window dilation)",
     .fn = fn_reduce_window_sum, .nin = 1, .in = {{F, 3, {3, 7, 6}, -2, 2, 0}}, .out_nd = 3,
     .out_shape = {3, 3, 2}, .ref = ref_window, .p = {1, W_SUM}, .flags = O2},
    {.prim = "reduce_window_max", .fn = fn_reduce_window_max, .nin = 1,
     .in = {{F, 4, {2, 3, 5, 4}, -2, 2, 0}}, .out_nd = 4, .out_shape = {2, 3, 3, 4},
     .ref = ref_window, .p = {0, W_MAX}, .flags = O2},
    {.prim = "reduce_window_max", .label = "reduce_window_max (window dilation)",
     .fn = fn_reduce_window_max, .nin = 1, .in = {{F, 3, {3, 7, 6}, -2, 2, 0}}, .out_nd = 3,
     .out_shape = {3, 3, 2}, .ref = ref_window, .p = {1, W_MAX}, .flags = O2},
    {.prim = "select_and_gather_add", .fn = fn_select_and_gather_add, .nin = 2,
     .in = {{F, 4, {2, 3, 5, 4}, -2, 2, 0}, {F, 4, {2, 3, 5, 4}, -2, 2, 0}}, .out_nd = 4,
     .out_shape = {2, 3, 3, 4}, .ref = ref_window, .p = {0, W_GATHER}, .flags = O2},
    {.prim = "select_and_scatter_add", .fn = fn_select_and_scatter_add, .nin = 2,
     .in = {{F, 4, {2, 3, 3, 4}, -2, 2, 0}, {F, 4, {2, 3, 5, 4}, -2, 2, 0}}, .out_nd = 4,
     .out_shape = {2, 3, 5, 4}, .ref = ref_window, .p = {0, W_SCATTER}, .flags = O2},
    {.prim = "select_and_scatter_add", .label = "select_and_scatter_add (window dilation)",
     .fn = fn_select_and_scatter_add, .nin = 2,
     .in = {{F, 3, {3, 3, 2}, -2, 2, 0}, {F, 3, {3, 7, 6}, -2, 2, 0}}, .out_nd = 3,
     .out_shape = {3, 7, 6}, .ref = ref_window, .p = {1, W_SCATTER}, .flags = O2},
    /* random */
    {.prim = "random_uniform", .label = "random_uniform (f64)", .fn = fn_random_uniform, .nin = 1,
     .in = {{K, 1, {2}, 0, 0, 0}}, .out_nd = 2, .out_shape = {2, 3}, .ref = ref_random_uniform,
     .p = {CFT_F64, 2, 2, 3}, .flags = NONDIFF},
    {.prim = "random_uniform", .label = "random_uniform (f32)", .fn = fn_random_uniform, .nin = 1,
     .in = {{K, 1, {2}, 0, 0, 0}}, .out_nd = 2, .out_shape = {2, 3}, .ref = ref_random_uniform,
     .p = {CFT_F32, 2, 2, 3}, .flags = NONDIFF},
    {.prim = "random_split", .fn = fn_random_split, .nin = 1, .in = {{K, 1, {2}, 0, 0, 0}},
     .out_nd = 2, .out_shape = {3, 2}, .ref = ref_random_split, .p = {3}, .flags = NONDIFF},
    {.prim = "random_fold_in", .fn = fn_random_fold_in, .nin = 1, .in = {{K, 1, {2}, 0, 0, 0}},
     .out_nd = 1, .out_shape = {2}, .ref = ref_random_fold_in, .p = {7, 0}, .flags = NONDIFF},
    {.prim = "random_fold_in", .label = "random_fold_in (data beyond 32 bits)",
     .fn = fn_random_fold_in, .nin = 1, .in = {{K, 1, {2}, 0, 0, 0}}, .out_nd = 1, .out_shape = {2},
     .ref = ref_random_fold_in, .p = {12345, 7}, .flags = NONDIFF},
    /* int8 linear: words span all of i32; positive scales */
    {.prim = "qlinear_pack", .fn = fn_ql_pack, .nin = 1, .in = {{F, 2, {3, 6}, -2, 2, 0}},
     .out_nd = 2, .out_shape = {3, 2}, .ref = ref_ql_pack, .flags = NONDIFF | ANY_DTYPE},
    {.prim = "qlinear_unpack", .fn = fn_ql_unpack, .nin = 2,
     .in = {{I, 2, {3, 2}, -2147483648.0, 2147483647.0, 0}, {F, 1, {3}, 0.01, 0.1, 0}},
     .out_nd = 2, .out_shape = {3, 6}, .ref = ref_ql_unpack, .flags = O2},
    {.prim = "dot_qlinear", .fn = fn_ql_dot, .nin = 3,
     .in = {{F, 2, {5, 6}, -2, 2, 0}, {I, 2, {3, 2}, -2147483648.0, 2147483647.0, 0},
            {F, 1, {3}, 0.01, 0.1, 0}},
     .out_nd = 2, .out_shape = {5, 3}, .ref = ref_ql_dot, .flags = STE | BLAS_SHAPES,
     .ste = fn_ql_dot_smooth},
    /* static int8: x / 0.025 + 120 stays inside [0, 255], where the STE is x's derivative */
    {.prim = "qlinear_quantize", .fn = fn_qs_quantize, .nin = 2,
     .in = {{F, 2, {3, 6}, -2, 2, 0}, {F, 1, {3}, 0.01, 0.1, 0}}, .out_nd = 2, .out_shape = {3, 2},
     .ref = ref_qs_quantize, .flags = NONDIFF | ANY_DTYPE},
    {.prim = "dot_qstatic", .fn = fn_qs_dot, .nin = 3,
     .in = {{F, 2, {5, 6}, -2, 2, 0}, {I, 2, {3, 2}, -2147483648.0, 2147483647.0, 0},
            {F, 1, {3}, 0.01, 0.1, 0}},
     .out_nd = 2, .out_shape = {5, 3}, .ref = ref_qs_dot, .p = {25, 120},
     .flags = STE | BLAS_SHAPES, .ste = fn_ql_dot_smooth},
    /* x on the grid: [40, 200] inside [0, 255], where the STE is x's derivative */
    {.prim = "dot_qint", .fn = fn_qs_dot, .nin = 3,
     .in = {{F, 2, {5, 6}, 40, 200, 0}, {I, 2, {3, 2}, -2147483648.0, 2147483647.0, 0},
            {F, 1, {3}, 0.01, 0.1, 0}},
     .out_nd = 2, .out_shape = {5, 3}, .ref = ref_qs_dot, .p = {25, 120, 1},
     .flags = STE | BLAS_SHAPES, .ste = fn_qi_smooth},
    {.prim = "dot_qwords", .fn = fn_qw, .nin = 3,
     .in = {{I, 2, {5, 2}, -2147483648.0, 2147483647.0, 0},
            {I, 2, {3, 2}, -2147483648.0, 2147483647.0, 0}, {F, 1, {3}, 0.01, 0.1, 0}},
     .out_nd = 2, .out_shape = {5, 3}, .ref = ref_qw, .flags = BLAS_SHAPES},
    {.prim = "conv_qstatic", .fn = fn_qc, .nin = 3,
     .in = {{F, 4, {2, 2, 5, 5}, -2, 2, 0}, {I, 2, {3, 5}, -2147483648.0, 2147483647.0, 0},
            {F, 1, {3}, 0.01, 0.1, 0}},
     .out_nd = 4, .out_shape = {2, 3, 5, 5}, .ref = ref_qc, .p = {25, 120},
     .flags = STE | BLAS_SHAPES, .ste = fn_qc_smooth},
    {.prim = "conv_qint", .fn = fn_qc, .nin = 3,
     .in = {{F, 4, {2, 2, 5, 5}, 40, 200, 0}, {I, 2, {3, 5}, -2147483648.0, 2147483647.0, 0},
            {F, 1, {3}, 0.01, 0.1, 0}},
     .out_nd = 4, .out_shape = {2, 3, 5, 5}, .ref = ref_qc, .p = {25, 120, 1},
     .flags = STE | BLAS_SHAPES, .ste = fn_qc_smooth},
    {.prim = "conv_qact", .fn = fn_qa, .nin = 3,
     .in = {{F, 4, {2, 2, 5, 5}, -2, 2, 0}, {I, 2, {3, 5}, -2147483648.0, 2147483647.0, 0},
            {F, 1, {3}, 0.01, 0.1, 0}},
     .out_nd = 4, .out_shape = {2, 3, 5, 5}, .ref = ref_qa, .flags = NONDIFF | ANY_DTYPE},
    /* 2:4 sparsity: metadata words span all of i32 (every word is valid) */
    {.prim = "sparse24_meta", .fn = fn_s24_meta, .nin = 1, .in = {{F, 2, {3, 40}, -2, 2, 0}},
     .out_nd = 2, .out_shape = {3, 2}, .ref = ref_s24_meta, .flags = NONDIFF | ANY_DTYPE},
    {.prim = "sparse24_gather", .label = "sparse24_gather (compress)", .fn = fn_s24_compress,
     .nin = 1, .in = {{F, 2, {3, 8}, -2, 2, 0}}, .out_nd = 2, .out_shape = {3, 4},
     .ref = ref_s24_compress, .flags = O2},
    {.prim = "sparse24_densify", .fn = fn_s24_densify, .nin = 2,
     .in = {{F, 2, {3, 4}, -2, 2, 0}, {I, 2, {3, 1}, -2147483648.0, 2147483647.0, 0}},
     .out_nd = 2, .out_shape = {3, 8}, .ref = ref_s24_densify, .flags = O2},
    {.prim = "dot_sparse24", .fn = fn_s24_linear, .nin = 3,
     .in = {{F, 2, {9, 8}, -2, 2, 0}, {F, 2, {3, 4}, -2, 2, 0},
            {I, 2, {3, 1}, -2147483648.0, 2147483647.0, 0}},
     .out_nd = 2, .out_shape = {9, 3}, .ref = ref_s24_linear, .flags = O2 | BLAS_SHAPES},
};
/* clang-format on */
#define NROWS ((int)(sizeof rows / sizeof rows[0]))

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_unit(void) {
    return (double)(rng_u64() >> 11) * 0x1p-53;
}

static const char *row_name(const row *r) {
    return r->label ? r->label : r->prim;
}
static bool is_float(cft_dtype dt) {
    return dt == CFT_F32 || dt == CFT_F64;
}
static cft_aval aval_of(const in_spec *s, cft_dtype fdt) {
    cft_aval a = {.dtype = s->kind == F ? fdt : s->kind == B ? CFT_BOOL : CFT_I32, .ndim = s->ndim};
    for (int i = 0; i < s->ndim; i++)
        a.shape[i] = s->shape[i];
    return a;
}
static cft_aval out_aval(const row *r, cft_dtype dt) {
    cft_aval a = {.dtype = dt, .ndim = r->out_nd};
    if (r->out_nd < 0) {
        a = aval_of(&r->in[0], dt);
        a.dtype = dt;
    }
    for (int i = 0; i < r->out_nd; i++)
        a.shape[i] = r->out_shape[i];
    return a;
}

/* Values are f32-representable, so the f32 variant sees the same inputs. */
static cft_array *make_input(const in_spec *s, cft_dtype fdt) {
    cft_aval a = aval_of(s, fdt);
    int64_t n = numel(a.shape, a.ndim);
    double *v = malloc(sizeof(double) * (size_t)(n + 2));
    for (int64_t i = 0; i < n; i++) {
        if (s->kind == B) {
            v[i] = (double)(rng_u64() >> 63);
        } else if (s->kind == K) {
            v[i] = as_i32((uint32_t)rng_u64());
        } else if (s->kind == I || (s->flags & DISCRETE)) {
            v[i] = floor(s->lo + rng_unit() * (s->hi - s->lo + 1));
        } else {
            v[i] = (double)(float)(s->lo + rng_unit() * (s->hi - s->lo));
        }
        if ((s->flags & SIGNED) && (rng_u64() >> 63))
            v[i] = -v[i];
    }
    cft_array *x = cft_astype(cft_from_f64(v, a.shape, a.ndim), a.dtype);
    free(v);
    return x;
}
/* random tangent / cotangent of an aval (zeros for non-float avals) */
static cft_array *random_like(const cft_aval *a) {
    if (!is_float(a->dtype))
        return cft_zeros(a->dtype, a->shape, a->ndim);
    in_spec s = {F, a->ndim, {0}, -1, 1, 0};
    for (int i = 0; i < a->ndim; i++)
        s.shape[i] = a->shape[i];
    return make_input(&s, a->dtype);
}
static double *values(const cft_array *x) {
    int64_t n = cft_failed(x) ? 0 : cft_array_size(x);
    double *v = calloc((size_t)n + 1, sizeof(double));
    if (n)
        cft_copy_to(x, CFT_F64, v);
    return v;
}
static double max_abs(const cft_array *x) {
    double *v = values(x), m = 0;
    for (int64_t i = 0; !cft_failed(x) && i < cft_array_size(x); i++)
        m = fmax(m, fabs(v[i]));
    free(v);
    return m;
}
static bool same_aval(const cft_aval *a, const cft_aval *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

/* Run the row's callback directly (eagerly, op by op). */
static cft_array *eager(const row *r, cft_array *const *x) {
    cft_array *y = NULL;
    cft_status st = r->fn((void *)r, r->nin, x, 1, &y);
    if (!y)
        return cft_astype(NULL, CFT_F32); /* an error array */
    (void)st;
    return y;
}
static cft_fn *row_fn(const row *r) {
    return cft_fn_named(cft_fn_new(r->fn, (void *)r, r->nin, 1), row_name(r));
}

/* x + h*t for the float inputs (the others unchanged) */
static void shifted(const row *r, cft_array *const *x, cft_array *const *t, double h,
                    cft_array **out) {
    for (int i = 0; i < r->nin; i++) {
        cft_dtype dt = cft_array_dtype(x[i]);
        out[i] = is_float(dt) ? cft_add(x[i], cft_mul_s(t[i], h)) : x[i];
    }
}

static bool has_float_input(const row *r) {
    for (int i = 0; i < r->nin; i++)
        if (r->in[i].kind == F)
            return true;
    return false;
}

static bool covered[256]; /* per registry index: some row's IR contains it */

/* ---------------------------------------------------------------- checks */

/* (a) impl against the reference */
static void check_impl(const row *r, cft_dtype fdt) {
    cft_array *x[3];
    cft_aval av[3];
    double *xv[3];
    for (int i = 0; i < r->nin; i++) {
        x[i] = make_input(&r->in[i], fdt);
        av[i] = cft_array_aval(x[i]);
        xv[i] = values(x[i]);
    }
    cft_array *y = eager(r, x);
    CHECK_MSG(!cft_failed(y), "error: %s", cft_error_message(y));
    if (cft_failed(y))
        return;
    cft_aval ya = cft_array_aval(y), want = out_aval(r, ya.dtype);
    char b1[96], b2[96];
    CHECK_MSG(same_aval(&ya, &want), "output %s, expected %s", cft_aval_str(&ya, b1),
              cft_aval_str(&want, b2));
    if (fdt == CFT_F32 && !(r->flags & ANY_DTYPE))
        CHECK_MSG(ya.dtype != CFT_F64, "f32 inputs gave an f64 output");
    int64_t n = numel(want.shape, want.ndim);
    double *ref = calloc((size_t)n + 1, sizeof(double));
    if (r->ew) {
        for (int64_t k = 0; k < n; k++) {
            double v[3];
            for (int i = 0; i < r->nin; i++)
                v[i] = xv[i][k];
            ref[k] = r->ew(v);
        }
    } else {
        r->ref(r, xv, av, &want, ref);
    }
    cft_array *expect = cft_from_f64(ref, want.shape, want.ndim);
    /* f64: libm against libm or an equivalent formula, a few ulp. f32: a
     * few f32 ulp (6e-8) relative; atol 1e-6 covers sums of O(1) terms that
     * cancel (dot products over K <= 8, reductions over <= 24 terms). */
    if (fdt == CFT_F64 || ya.dtype == CFT_F64)
        CHECK_ARRAY_CLOSE(y, expect, 1e-12, 0);
    else
        CHECK_ARRAY_CLOSE(y, expect, 1e-5, 1e-6);
    free(ref);
    for (int i = 0; i < r->nin; i++)
        free(xv[i]);
}

/* (b) jvp against central finite differences, (c) the vjp dot-product test */
static void check_jvp_vjp(const row *r, bool do_vjp) {
    cft_array *x[3], *t[3], *args[6], *outs[2];
    for (int i = 0; i < r->nin; i++) {
        x[i] = make_input(&r->in[i], CFT_F64);
        cft_aval a = cft_array_aval(x[i]);
        t[i] = random_like(&a);
        args[i] = x[i], args[r->nin + i] = t[i];
    }
    cft_array *y = eager(r, x);
    cft_status st = cft_fn_call(cft_jvp(row_fn(r)), args, outs);
    CHECK_MSG(st == CFT_OK, "jvp failed: %s", cft_error_message(outs[0]));
    if (st != CFT_OK)
        return;
    cft_aval ya = cft_array_aval(y), ta = cft_array_aval(outs[1]);
    CHECK_ARRAY_CLOSE(outs[0], y, 0, 0);
    CHECK(same_aval(&ya, &ta));
    bool diff = !(r->flags & NONDIFF);
    if (!do_vjp) {
        if (!diff) {
            CHECK_ARRAY_CLOSE(outs[1], cft_zeros_like(y), 0, 0);
        } else if (r->flags & LINEAR_FD) {
            CHECK_ARRAY_CLOSE(outs[1], eager(r, t), 0, 0);
        } else {
            const double h = 1e-6;
            cft_array *xp[3], *xm[3];
            shifted(r, x, t, h, xp);
            shifted(r, x, t, -h, xm);
            row smooth = *r;
            if (r->flags & STE)
                smooth.fn = r->ste;
            cft_array *fd = cft_mul_s(cft_sub(eager(&smooth, xp), eager(&smooth, xm)), 0.5 / h);
            /* truncation O(h^2 f''') ~ 1e-12; rounding ~ 1e-16 |f| / h = 1e-10 |f| */
            CHECK_ARRAY_CLOSE(outs[1], fd, 1e-6, 1e-9 * (1 + max_abs(y)));
        }
        return;
    }
    if (!is_float(ya.dtype))
        return;
    cft_array *c = random_like(&ya), *ct[3], *ys;
    cft_fn *pb = NULL;
    st = cft_vjp(row_fn(r), x, &ys, &pb);
    CHECK_MSG(st == CFT_OK && pb, "vjp failed: %s", cft_error_message(ys));
    if (st != CFT_OK || !pb)
        return;
    CHECK_ARRAY_CLOSE(ys, y, 0, 0);
    st = cft_fn_call(pb, &c, ct);
    CHECK_MSG(st == CFT_OK, "pullback failed: %s", cft_error_message(ct[0]));
    if (st != CFT_OK)
        return;
    for (int i = 0; i < r->nin; i++) {
        cft_aval a = cft_array_aval(x[i]), b = cft_array_aval(ct[i]);
        CHECK_MSG(same_aval(&a, &b), "cotangent %d has the wrong aval", i);
        if (!diff)
            CHECK_ARRAY_CLOSE(ct[i], cft_zeros_like(x[i]), 0, 0);
    }
    if (!diff)
        return;
    /* <J t, c> = <t, J^T c>, relative to the sum of the absolute terms */
    double lhs = 0, rhs = 0, scale = 0;
    double *jt = values(outs[1]), *cv = values(c);
    for (int64_t k = 0; k < cft_array_size(y); k++)
        lhs += jt[k] * cv[k], scale += fabs(jt[k] * cv[k]);
    for (int i = 0; i < r->nin; i++) {
        if (!is_float(cft_array_dtype(x[i])))
            continue;
        double *tv = values(t[i]), *cti = values(ct[i]);
        for (int64_t k = 0; k < cft_array_size(x[i]); k++)
            rhs += tv[k] * cti[k], scale += fabs(tv[k] * cti[k]);
        free(tv);
        free(cti);
    }
    CHECK_CLOSE(lhs, rhs, 0, 1e-10 * scale);
    free(jt);
    free(cv);
}

/* (d) vmap: axes[i] per input (CFT_NOT_BATCHED allowed) vs a loop */
enum { NB = 3 };
static void check_vmap(const row *r, const int *axes) {
    cft_array *ex[NB][3], *stacked[3], *ys[NB];
    for (int k = 0; k < NB; k++)
        for (int i = 0; i < r->nin; i++)
            ex[k][i] = axes[i] == CFT_NOT_BATCHED && k ? ex[0][i] : make_input(&r->in[i], CFT_F64);
    for (int i = 0; i < r->nin; i++) {
        if (axes[i] == CFT_NOT_BATCHED) {
            stacked[i] = ex[0][i];
            continue;
        }
        cft_array *col[NB];
        for (int k = 0; k < NB; k++)
            col[k] = ex[k][i];
        stacked[i] = cft_stack(col, NB, axes[i] < 0 ? axes[i] + r->in[i].ndim + 1 : axes[i]);
    }
    for (int k = 0; k < NB; k++)
        ys[k] = eager(r, ex[k]);
    cft_array *expect = cft_stack(ys, NB, 0);
    cft_array *got = cft_fn_call1(cft_vmap(row_fn(r), axes, NULL), stacked);
    /* never a bitwise promise: the batched op may be one library call over
     * the whole batch (a GEMM with another blocking, a reduction in another
     * order) where the loop makes one per example. f64: 1e-13 is ~450 ulp,
     * room for sums of up to ~100 terms reordered */
    CHECK_ARRAY_CLOSE(got, expect, 1e-13, 1e-13);
    if (!cft_failed(got) && !cft_failed(expect))
        CHECK(cft_array_dtype(got) == cft_array_dtype(expect));
}

/* (e) the traced IR evaluates to what the eager call gives */
static void check_ir(const row *r) {
    cft_array *x[3], *out[1];
    cft_aval av[3];
    for (int i = 0; i < r->nin; i++) {
        x[i] = make_input(&r->in[i], CFT_F64);
        av[i] = cft_array_aval(x[i]);
    }
    cft_ir *ir = cft_make_ir(row_fn(r), av);
    CHECK_MSG(ir, "cft_make_ir: %s", cft_last_error_message());
    if (!ir)
        return;
    CHECK_EQ(cft_ir_typecheck(ir), CFT_OK);
    CHECK_EQ(cft_ir_num_inputs(ir), r->nin);
    CHECK_EQ(cft_ir_eval(ir, x, out), CFT_OK);
    CHECK_ARRAY_CLOSE(out[0], eager(r, x), 0, 0);
    bool found = false;
    for (int k = 0; k < cft_ir_num_eqns(ir); k++) {
        const char *name = cft_ir_eqn_prim(ir, k);
        found |= !strcmp(name, r->prim);
        for (int j = 0; cft__prims[j]; j++)
            if (!strcmp(cft__prims[j]->name, name))
                covered[j] = true;
    }
    /* iota has no operands, so it runs at trace time and becomes a constant */
    if (strcmp(r->prim, "iota"))
        CHECK_MSG(found, "the IR has no %s equation:\n%s", r->prim, cft_ir_str(ir));
    else
        for (int j = 0; cft__prims[j]; j++)
            covered[j] |= !strcmp(cft__prims[j]->name, "iota");
}

/* (g) the compiled path (cft_jit: fused kernels, GEMM into planned
 * buffers) against the eager call, three calls: the first runs eagerly
 * while it plans, the second runs the compiled plan, the third runs it on
 * new inputs. Kernels
 * call libmvec's vector libm, within 4 ulp of scalar libm, and vectorised
 * sums add in another order: 1e-12 relative in f64, 1e-5 in f32. */
static void check_jit(const row *r, cft_dtype fdt) {
    cft_array *x[3], *out[1];
    for (int i = 0; i < r->nin; i++)
        x[i] = make_input(&r->in[i], fdt);
    cft_array *want = eager(r, x);
    cft_fn *j = cft_jit(row_fn(r));
    double tol = fdt == CFT_F64 ? 1e-12 : 1e-5;
    for (int call = 0; call < 2; call++) { /* cold (trace, plan, compile), then warm */
        CHECK_EQ(cft_fn_call(j, x, out), CFT_OK);
        CHECK_ARRAY_CLOSE(out[0], want, tol, tol);
    }
    /* warm with new inputs: other values in new buffers, the same plan */
    cft_array *y[3];
    for (int i = 0; i < r->nin; i++)
        y[i] = make_input(&r->in[i], fdt);
    CHECK_EQ(cft_fn_call(j, y, out), CFT_OK);
    CHECK_ARRAY_CLOSE(out[0], eager(r, y), tol, tol);
    /* and it did compile: a kernel that fails to build interprets, silently
     * right (bessel_j0 / j1 once clashed with the kernels' row bounds) */
    cft_jit_stats st;
    CHECK_EQ(cft_jit_stats_of(j, &st), CFT_OK);
    CHECK_MSG(st.interpreted == 0, "%s: the jit interpreted (its kernels did not compile)",
              row_name(r));
}

/* the row on device d: eager, vjp (where there is one) and jit, against the host */
static void check_device(const row *r, const cft_dev *d, cft_dtype fdt) {
    cft_array *x[3], *xd[3], *out[1], *outd[1];
    for (int i = 0; i < r->nin; i++) {
        x[i] = make_input(&r->in[i], fdt);
        xd[i] = cft_device_put(x[i], d);
    }
    double tol = fdt == CFT_F64 ? 1e-12 : 1e-5;
    /* eagerly, op by op; and as a function (whose outputs follow its inputs' device) */
    cft_array *want = eager(r, x), *got = eager(r, xd), *called[1];
    CHECK_MSG(!cft_failed(got), "%s", cft_error_message(got));
    CHECK_ARRAY_CLOSE(got, want, tol, tol);
    CHECK_EQ(cft_fn_call(row_fn(r), xd, called), CFT_OK);
    CHECK_MSG(!strcmp(cft_device_name(cft_device_of(called[0])), cft_device_name(d)),
              "result on %s", cft_device_name(cft_device_of(called[0])));
    CHECK_ARRAY_CLOSE(called[0], want, tol, tol);
    if (has_float_input(r) && !(r->flags & (NONDIFF | FORWARD_ONLY))) {
        cft_fn *pb, *pbd;
        cft_array *cts[3], *ctsd[3];
        CHECK_EQ(cft_vjp(row_fn(r), x, out, &pb), CFT_OK);
        CHECK_EQ(cft_vjp(row_fn(r), xd, outd, &pbd), CFT_OK);
        cft_aval oa = cft_array_aval(out[0]);
        cft_array *c = random_like(&oa), *cd = cft_device_put(c, d);
        CHECK_EQ(cft_fn_call(pb, &c, cts), CFT_OK);
        CHECK_EQ(cft_fn_call(pbd, &cd, ctsd), CFT_OK);
        for (int i = 0; i < r->nin; i++)
            if (is_float(cft_array_dtype(x[i]))) {
                CHECK(!strcmp(cft_device_name(cft_device_of(ctsd[i])), cft_device_name(d)));
                CHECK_ARRAY_CLOSE(ctsd[i], cts[i], tol, tol);
            }
    }
    CHECK_EQ(cft_fn_call(cft_jit(row_fn(r)), xd, outd), CFT_OK);
    CHECK(!strcmp(cft_device_name(cft_device_of(outd[0])), cft_device_name(d)));
    CHECK_ARRAY_CLOSE(outd[0], want, tol, tol);
}

static int device_run(const char *name) {
    if (!strncmp(name, "test", 4) && test_backend_register() != 0)
        return 1;
    cft_dev *d = cft_device(name);
    if (cft_device_error(d)) {
        printf("test_prims on %s: skipped: %s\n", name, cft_error_message(cft_device_error(d)));
        return 77;
    }
    for (int ri = 0; ri < NROWS; ri++) {
        const row *r = &rows[ri];
        TEST("%s on %s, f64", row_name(r), name) {
            check_device(r, d, CFT_F64);
        }
        if (has_float_input(r))
            TEST("%s on %s, f32", row_name(r), name) {
                check_device(r, d, CFT_F32);
            }
    }
    if (!strncmp(name, "test", 4)) /* the products ran as the backend's own GEMMs */
        TEST("dot_general as a strided batched GEMM on %s (cuda/gemm_map.h)", name) {
            test_backend_counts c = test_backend_counts_now();
            printf("  %ld of %ld dot_generals (%ld operations) ran as the backend's GEMMs; %ld "
                   "fused kernels and %ld ffts ran there\n",
                   c.gemms, c.dots, c.runs, c.kernels, c.ffts);
            CHECK_MSG(c.ffts >= 8, "%ld ffts", c.ffts);
            CHECK_MSG(c.gemms >= 40, "%ld GEMMs", c.gemms);
        }
    return check_summary();
}

/* FORWARD_ONLY rows: reverse mode is refused with an error naming the primitive */
static void check_no_vjp(const row *r) {
    cft_array *x[3], *out[1];
    for (int i = 0; i < r->nin; i++)
        x[i] = make_input(&r->in[i], CFT_F64);
    cft_fn *pb = NULL;
    cft_status st = cft_vjp(row_fn(r), x, out, &pb);
    if (st == CFT_OK) { /* linearizing works; transposing is what it cannot do */
        cft_array *ct = cft_ones_like(out[0]), *ctx[3];
        st = cft_fn_call(pb, &ct, ctx);
    }
    CHECK(st != CFT_OK);
    CHECK_MSG(strstr(cft_last_error_message(), r->prim) != NULL, "message: %s",
              cft_last_error_message());
}

/* (f) jvp of jvp against finite differences of the jvp */
static void check_jvp2(const row *r) {
    int n = r->nin;
    cft_array *x[3], *t[3], *s[3], *args[12], *outs[4];
    for (int i = 0; i < n; i++) {
        x[i] = make_input(&r->in[i], CFT_F64);
        cft_aval a = cft_array_aval(x[i]);
        t[i] = random_like(&a);
        s[i] = random_like(&a);
        args[i] = x[i], args[n + i] = t[i], args[2 * n + i] = s[i],
        args[3 * n + i] = cft_zeros_like(t[i]);
    }
    cft_fn *j1 = cft_jvp(row_fn(r));
    cft_status st = cft_fn_call(cft_jvp(j1), args, outs);
    CHECK_MSG(st == CFT_OK, "jvp of jvp failed: %s", cft_error_message(outs[0]));
    if (st != CFT_OK)
        return;
    const double h = 1e-6;
    cft_array *xp[6], *xm[6], *op[2], *om[2];
    shifted(r, x, s, h, xp);
    shifted(r, x, s, -h, xm);
    for (int i = 0; i < n; i++)
        xp[n + i] = xm[n + i] = t[i];
    CHECK_EQ(cft_fn_call(j1, xp, op), CFT_OK);
    CHECK_EQ(cft_fn_call(j1, xm, om), CFT_OK);
    cft_array *fd = cft_mul_s(cft_sub(op[1], om[1]), 0.5 / h);
    CHECK_ARRAY_CLOSE(outs[3], fd, 1e-6, 1e-9 * (1 + max_abs(outs[1])));
    /* the outer jvp's primal outputs are the inner jvp's outputs */
    cft_array *inner[2];
    CHECK_EQ(cft_fn_call(j1, args, inner), CFT_OK);
    CHECK_ARRAY_CLOSE(outs[0], inner[0], 0, 0);
    CHECK_ARRAY_CLOSE(outs[1], inner[1], 0, 0);
}

/* ---------------------------------------------------------------- other tests */

static cft_status fn_double_where(void *env, int nin, cft_array *const *in, int nout,
                                  cft_array **out) {
    UNUSED_FN;
    cft_array *x = in[0], *z = cft_zeros_like(x);
    out[0] = cft_where(cft_gt(x, z), cft_sqrt(x), z);
    return CFT_OK;
}

/* the tangent of f at x along t, for a one-input f */
static double jvp_at(cft_fn_cb cb, const double *x, const double *t, int64_t n) {
    cft_array *args[2] = {cft_from_f64(x, &n, 1), cft_from_f64(t, &n, 1)}, *o[2];
    if (cft_fn_call(cft_jvp(cft_fn_new(cb, NULL, 1, 1)), args, o) != CFT_OK)
        return NAN;
    return cft_item(o[1]);
}
FN(fn_max_all) {
    UNUSED_FN;
    out[0] = cft_max(in[0], NULL, 0, false);
    return CFT_OK;
}
FN(fn_maximum_halves) {
    UNUSED_FN;
    int64_t s0 = 0, s1 = 1, l1 = 1, l2 = 2;
    out[0] =
        cft_sum(cft_maximum(cft_slice(in[0], &s0, &l1, NULL), cft_slice(in[0], &s1, &l2, NULL)),
                NULL, 0, false);
    return CFT_OK;
}

static void tie_tests(void) {
    TEST("reduce_max: ties share the tangent equally") {
        CHECK_CLOSE(jvp_at(fn_max_all, (double[]){1, 3, 3}, (double[]){1, 2, 4}, 3), 3, 1e-15, 0);
        CHECK_CLOSE(jvp_at(fn_max_all, (double[]){1, 3, 2}, (double[]){1, 2, 4}, 3), 2, 1e-15, 0);
    }
    TEST("max: a tie splits the tangent half and half") {
        CHECK_CLOSE(jvp_at(fn_maximum_halves, (double[]){2, 2}, (double[]){1, 3}, 2), 2, 1e-15, 0);
        CHECK_CLOSE(jvp_at(fn_maximum_halves, (double[]){2, 1}, (double[]){1, 3}, 2), 1, 1e-15, 0);
    }
}

static cft_status fn_double_where_trick(void *env, int nin, cft_array *const *in, int nout,
                                        cft_array **out) {
    UNUSED_FN;
    cft_array *x = in[0], *z = cft_zeros_like(x), *pos = cft_gt(x, z);
    out[0] = cft_where(pos, cft_sqrt(cft_where(pos, x, cft_ones_like(x))), z);
    return CFT_OK;
}

static void random_tests(void) {
    TEST("threefry reference: Random123 known answers") {
        static const uint32_t kat[3][6] = {
            {0, 0, 0, 0, 0x6b200159u, 0x99ba4efeu},
            {~0u, ~0u, ~0u, ~0u, 0x1cb996fcu, 0xbb002be7u},
            {0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u, 0xc4923a9cu, 0x483df7a0u},
        }; /* key, counter, output */
        for (int i = 0; i < 3; i++) {
            uint32_t o[2];
            tf2x32(kat[i][0], kat[i][1], kat[i][2], kat[i][3], o);
            CHECK_EQ(o[0], kat[i][4]);
            CHECK_EQ(o[1], kat[i][5]);
        }
    }
    TEST("random_uniform: 20000 values in [0, 1), mean near 1/2") {
        for (int d = 0; d < 2; d++) {
            cft_array *u = cft_random_uniform(cft_random_key(42), d ? CFT_F64 : CFT_F32,
                                              (int64_t[]){100, 200}, 2, 0, 1);
            double *v = values(u), lo = 1, hi = 0, mean = 0;
            int64_t n = cft_array_size(u);
            CHECK_EQ(n, 20000);
            for (int64_t i = 0; i < n; i++)
                lo = fmin(lo, v[i]), hi = fmax(hi, v[i]), mean += v[i] / (double)n;
            CHECK(lo >= 0);
            CHECK(hi < 1);
            CHECK_CLOSE(mean, 0.5, 0, 0.01); /* sd of the mean: 0.29/sqrt(20000) = 0.002 */
            free(v);
        }
    }
    TEST("random_split / random_fold_in: deterministic, distinct") {
        cft_array *k = cft_random_key(7);
        CHECK_ARRAY_CLOSE(cft_random_split(k, 4), cft_random_split(k, 4), 0, 0);
        CHECK_ARRAY_CLOSE(cft_random_fold_in(k, 3), cft_random_fold_in(k, 3), 0, 0);
        CHECK(!cft_allclose(cft_random_fold_in(k, 3), cft_random_fold_in(k, 4), 0, 0, false));
        CHECK(!cft_allclose(cft_random_fold_in(k, 3), k, 0, 0, false));
        double *v = values(cft_random_split(k, 4));
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < i; j++)
                CHECK(v[2 * i] != v[2 * j] || v[2 * i + 1] != v[2 * j + 1]);
        free(v);
        CHECK_ARRAY_CLOSE(cft_random_uniform(k, CFT_F64, (int64_t[]){5}, 1, 0, 1),
                          cft_random_uniform(k, CFT_F64, (int64_t[]){5}, 1, 0, 1), 0, 0);
    }
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    if (getenv("CFT_TEST_DEVICE"))
        return device_run(getenv("CFT_TEST_DEVICE"));
    for (int ri = 0; ri < NROWS; ri++) {
        const row *r = &rows[ri];
        const char *nm = row_name(r), *jvp_what = "jvp vs finite differences";
        bool fin = has_float_input(r);
        if (r->flags & NONDIFF)
            jvp_what = "jvp tangent is zero";
        if (r->flags & LINEAR_FD)
            jvp_what = "jvp = f(t) (linear)";
        TEST("%s: impl f64 vs reference", nm) {
            check_impl(r, CFT_F64);
        }
        if (fin)
            TEST("%s: impl f32 vs reference", nm) {
                check_impl(r, CFT_F32);
            }
        TEST("%s: %s", nm, jvp_what) {
            check_jvp_vjp(r, false);
        }
        const char *vjp_what = r->flags & NONDIFF ? "cotangent is zero" : "dot-product test";
        if (fin && !(r->flags & FORWARD_ONLY))
            TEST("%s: vjp %s", nm, vjp_what) {
                check_jvp_vjp(r, true);
            }
        if (r->flags & FORWARD_ONLY)
            TEST("%s: vjp is an error naming it", nm) {
                check_no_vjp(r);
            }
        int maxnd = 0, axes[3];
        for (int i = 0; i < r->nin; i++)
            maxnd = r->in[i].ndim > maxnd ? r->in[i].ndim : maxnd;
        for (int b = -1; b <= maxnd; b++) { /* all inputs at b (at most their rank) */
            for (int i = 0; i < r->nin; i++)
                axes[i] = b > r->in[i].ndim ? r->in[i].ndim : b;
            TEST("%s: vmap in_axes %d", nm, b) {
                check_vmap(r, axes);
            }
        }
        if (r->nin > 1) { /* every input batched, at different axes */
            for (int i = 0; i < r->nin; i++)
                axes[i] = r->in[i].ndim > i ? r->in[i].ndim - i : 0;
            TEST("%s: vmap in_axes (%d,%d%s)", nm, axes[0], axes[1], r->nin > 2 ? ",..." : "") {
                check_vmap(r, axes);
            }
        }
        for (int mask = 1; r->nin > 1 && mask < (1 << r->nin) - 1; mask++) { /* some unbatched */
            char desc[64] = "";
            for (int i = 0; i < r->nin; i++) {
                axes[i] = mask >> i & 1 ? (i + mask) % (r->in[i].ndim + 1) : CFT_NOT_BATCHED;
                snprintf(desc + strlen(desc), sizeof desc - strlen(desc), "%s%s", i ? "," : "",
                         axes[i] == CFT_NOT_BATCHED ? "-" : (char[]){(char)('0' + axes[i]), 0});
            }
            TEST("%s: vmap in_axes (%s)", nm, desc) {
                check_vmap(r, axes);
            }
        }
        TEST("%s: IR eval and typecheck", nm) {
            check_ir(r);
        }
        TEST("%s: compiled (jit) vs eager, f64", nm) {
            check_jit(r, CFT_F64);
        }
        if (has_float_input(r))
            TEST("%s: compiled (jit) vs eager, f32", nm) {
                check_jit(r, CFT_F32);
            }
        if (r->flags & O2)
            TEST("%s: jvp of jvp vs finite differences", nm) {
                check_jvp2(r);
            }
    }

    TEST("every registry primitive has a row whose IR contains it") {
        for (int j = 0; cft__prims[j]; j++) {
            bool named = false;
            for (int ri = 0; ri < NROWS; ri++)
                named |= !strcmp(rows[ri].prim, cft__prims[j]->name);
            CHECK_MSG(named, "primitive %s has no row in test_prims", cft__prims[j]->name);
            if (!check_filter_)
                CHECK_MSG(covered[j], "no row's IR contains primitive %s", cft__prims[j]->name);
        }
    }
    TEST("every row names a registry primitive") {
        for (int ri = 0; ri < NROWS; ri++) {
            bool found = false;
            for (int j = 0; cft__prims[j]; j++)
                found |= !strcmp(rows[ri].prim, cft__prims[j]->name);
            CHECK_MSG(found, "row %s names no primitive", row_name(&rows[ri]));
        }
    }

    TEST("double where: grad of where(x > 0, sqrt(x), 0) at 0 is 0, not NaN") {
        cft_fn *g = cft_grad(cft_fn_new(fn_double_where, NULL, 1, 1), NULL, 0);
        cft_array *x0 = cft_scalar(0, CFT_F64);
        double v = cft_item(cft_fn_call1(g, &x0));
        CHECK_CLOSE(v, 0, 0, 0);
        cft_array *x1 = cft_scalar(4, CFT_F64); /* and 1/(2 sqrt 4) away from 0 */
        CHECK_CLOSE(cft_item(cft_fn_call1(g, &x1)), 0.25, 1e-15, 0);
    }
    TEST("double where trick: where(x > 0, sqrt(where(x > 0, x, 1)), 0) has gradient 0 at 0") {
        cft_fn *g = cft_grad(cft_fn_new(fn_double_where_trick, NULL, 1, 1), NULL, 0);
        cft_array *x0 = cft_scalar(0, CFT_F64), *x1 = cft_scalar(4, CFT_F64);
        CHECK_CLOSE(cft_item(cft_fn_call1(g, &x0)), 0, 0, 0);
        CHECK_CLOSE(cft_item(cft_fn_call1(g, &x1)), 0.25, 1e-15, 0);
    }
    tie_tests();
    random_tests();
    return check_summary();
}
