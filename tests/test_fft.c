/* test_fft.c: cft/fft.h against a naive DFT (complex double loops here),
 * for sizes that are not powers of two (1, 5, 6, 7, 12, 15, 16, 31), along
 * different axes, in 1 to 4 dims, every norm mode, f32 and f64; round trips;
 * hfft/ihfft against NumPy's definitions; fftfreq, rfftfreq and the shifts;
 * strided, broadcast and conjugate-view inputs; jvp against finite
 * differences; the dot-product test of every vjp (Re sum(ct * L t) ==
 * Re sum(L^T ct * t), the non-conjugating pairing of JAX's convention);
 * vmap against a loop; the gradient of a real loss through rfft -> filter
 * -> irfft; a Hessian; jit against the interpreter; errors; and the plan
 * cache under concurrent threads.
 *
 * Tolerances: errors are measured against the largest magnitude of the
 * reference. f64: 1e-12 (FFTW's error is about eps log2(N) times the
 * signal's norm, ~1e-15 here; the naive reference, reducing jk mod n before
 * the twiddle, is as good). f32: 2e-5 (eps_f32 = 6e-8 times log2(N) and the
 * ratio of the norm to the largest output, up to sqrt(N) ~ 15 for the
 * largest shapes, gives at most ~1e-5).
 * Usage: test_fft [substring of test names]. */
#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "prims/fft_prims.h"

typedef double complex dcx;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double unit(void) { /* splitmix64 in [-1, 1) */
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-52 - 1;
}

/* ---- host arrays of complex doubles ---- */

typedef struct {
    int nd;
    int64_t shape[CFT_MAX_NDIM];
    dcx *v;
} harr;

static int64_t hsize(const harr *h) {
    int64_t n = 1;
    for (int i = 0; i < h->nd; i++)
        n *= h->shape[i];
    return n;
}
static harr hnew(const int64_t *shape, int nd) {
    harr h = {.nd = nd};
    memcpy(h.shape, shape, sizeof(int64_t) * (size_t)nd);
    h.v = calloc((size_t)hsize(&h) + 1, sizeof(dcx));
    return h;
}
static harr hrand(const int64_t *shape, int nd, bool cplx) {
    harr h = hnew(shape, nd);
    for (int64_t i = 0; i < hsize(&h); i++)
        h.v[i] = unit() + (cplx ? unit() * I : 0);
    return h;
}
static harr hcopy(const harr *a) {
    harr h = hnew(a->shape, a->nd);
    memcpy(h.v, a->v, sizeof(dcx) * (size_t)hsize(a));
    return h;
}
static harr hfrom(cft_array *x) {
    cft_aval a = cft_array_aval(x);
    harr h = hnew(a.shape, a.ndim);
    cft_copy_to(x, CFT_C128, h.v);
    return h;
}
/* a cft array of dtype dt (real dtypes take the real parts) */
static cft_array *hto(const harr *h, cft_dtype dt) {
    cft_array *x = cft_from_data(h->v, CFT_C128, h->shape, h->nd);
    return dt == CFT_C128 ? x : cft_astype(x, dt);
}
/* strides and the offset of element idx */
static void hstrides(const harr *h, int64_t *st) {
    int64_t s = 1;
    for (int d = h->nd - 1; d >= 0; d--)
        st[d] = s, s *= h->shape[d];
}
/* crop or zero-pad axis to n */
static harr hresize(const harr *a, int axis, int64_t n) {
    int64_t sh[CFT_MAX_NDIM], sa[CFT_MAX_NDIM] = {0}, sb[CFT_MAX_NDIM] = {0},
                              idx[CFT_MAX_NDIM] = {0};
    memcpy(sh, a->shape, sizeof sh);
    sh[axis] = n;
    harr b = hnew(sh, a->nd);
    hstrides(a, sa), hstrides(&b, sb);
    for (int64_t i = 0; i < hsize(&b); i++) {
        int64_t r = i, oa = 0;
        for (int d = a->nd - 1; d >= 0; d--)
            idx[d] = r % sh[d], r /= sh[d];
        bool in = idx[axis] < a->shape[axis];
        for (int d = 0; d < a->nd; d++)
            oa += idx[d] * sa[d];
        b.v[i] = in ? a->v[oa] : 0;
    }
    (void)sb;
    return b;
}
/* naive DFT along axis with the sign's exponent, in place */
static void hdft(harr *h, int axis, int sign) {
    int64_t st[CFT_MAX_NDIM] = {0}, n = h->shape[axis], tot = hsize(h);
    hstrides(h, st);
    dcx *line = malloc(sizeof(dcx) * (size_t)n), *tw = malloc(sizeof(dcx) * (size_t)n);
    for (int64_t k = 0; k < n; k++)
        tw[k] = cexp(sign * 2 * M_PI * I * (double)k / (double)n);
    for (int64_t base = 0; base < tot; base++) {
        if ((base / st[axis]) % n)
            continue; /* not the first element of a line */
        for (int64_t k = 0; k < n; k++) {
            dcx s = 0;
            for (int64_t j = 0; j < n; j++)
                s += h->v[base + j * st[axis]] * tw[(j * k) % n];
            line[k] = s;
        }
        for (int64_t k = 0; k < n; k++)
            h->v[base + k * st[axis]] = line[k];
    }
    free(line), free(tw);
}
/* c2r along axis: the half spectrum (length n/2+1) to a real line of n */
static harr hc2r(const harr *a, int axis, int64_t n) {
    harr x = hresize(a, axis, n / 2 + 1);
    int64_t sh[CFT_MAX_NDIM];
    memcpy(sh, a->shape, sizeof sh);
    sh[axis] = n;
    harr y = hnew(sh, a->nd);
    int64_t sx[CFT_MAX_NDIM] = {0}, sy[CFT_MAX_NDIM] = {0};
    hstrides(&x, sx), hstrides(&y, sy);
    for (int64_t i = 0; i < hsize(&y); i++) {
        if ((i / sy[axis]) % n)
            continue;
        int64_t xb = (i / (sy[axis] * n)) * sx[axis] * (n / 2 + 1) + i % sy[axis];
        for (int64_t j = 0; j < n; j++) {
            double s = creal(x.v[xb]);
            for (int64_t k = 1; k <= n / 2; k++) {
                dcx e = cexp(2 * M_PI * I * (double)((j * k) % n) / (double)n);
                double w = (n % 2 == 0 && k == n / 2) ? 1 : 2;
                s += w * creal(x.v[xb + k * sx[axis]] * e);
            }
            y.v[i + j * sy[axis]] = s;
        }
    }
    free(x.v);
    return y;
}
static void hscale(harr *h, double s) {
    for (int64_t i = 0; i < hsize(h); i++)
        h->v[i] *= s;
}
static void hconj(harr *h) {
    for (int64_t i = 0; i < hsize(h); i++)
        h->v[i] = conj(h->v[i]);
}

/* ---- the operations under test and their references ---- */

enum { K_FFT, K_IFFT, K_RFFT, K_IRFFT, K_HFFT, K_IHFFT };
static const char *const knames[] = {"fft", "ifft", "rfft", "irfft", "hfft", "ihfft"};
enum { D_1, D_2, D_N }; /* 1-d, 2-d, n-d entry points */

typedef struct {
    int kind, dims; /* K_*, D_* */
    int k;          /* number of axes (D_N: -1 all) */
    int axes[CFT_MAX_NDIM];
    bool has_axes, has_s;
    int64_t s[CFT_MAX_NDIM];
    cft_fft_norm norm;
} op_t;

static cft_array *run_op(const op_t *o, cft_array *x) {
    const int64_t *s = o->has_s ? o->s : NULL;
    const int *ax = o->has_axes ? o->axes : NULL;
    int64_t n = o->has_s ? o->s[0] : -1;
    int axis = o->has_axes ? o->axes[0] : -1;
    if (o->dims == D_1)
        switch (o->kind) {
        case K_FFT:
            return cft_fft_fft(x, n, axis, o->norm);
        case K_IFFT:
            return cft_fft_ifft(x, n, axis, o->norm);
        case K_RFFT:
            return cft_fft_rfft(x, n, axis, o->norm);
        case K_IRFFT:
            return cft_fft_irfft(x, n, axis, o->norm);
        case K_HFFT:
            return cft_fft_hfft(x, n, axis, o->norm);
        default:
            return cft_fft_ihfft(x, n, axis, o->norm);
        }
    if (o->dims == D_2)
        switch (o->kind) {
        case K_FFT:
            return cft_fft_fft2(x, s, ax, o->norm);
        case K_IFFT:
            return cft_fft_ifft2(x, s, ax, o->norm);
        case K_RFFT:
            return cft_fft_rfft2(x, s, ax, o->norm);
        default:
            return cft_fft_irfft2(x, s, ax, o->norm);
        }
    switch (o->kind) {
    case K_FFT:
        return cft_fft_fftn(x, s, ax, o->k, o->norm);
    case K_IFFT:
        return cft_fft_ifftn(x, s, ax, o->k, o->norm);
    case K_RFFT:
        return cft_fft_rfftn(x, s, ax, o->k, o->norm);
    default:
        return cft_fft_irfftn(x, s, ax, o->k, o->norm);
    }
}
static cft_status op_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = run_op(env, in[0]);
    return CFT_OK;
}
static cft_fn *op_fn(const op_t *o) {
    op_t *e = cft_alloc(sizeof *e);
    *e = *o;
    return cft_fn_new(op_cb, e, 1, 1);
}

/* NumPy's result of op on host array x */
static harr ref_op(const op_t *o, const harr *x0) {
    int nd = x0->nd, k, ax[CFT_MAX_NDIM];
    if (o->dims == D_1)
        k = 1, ax[0] = o->has_axes ? o->axes[0] : -1;
    else if (o->dims == D_2) {
        k = 2;
        ax[0] = o->has_axes ? o->axes[0] : -2, ax[1] = o->has_axes ? o->axes[1] : -1;
    } else {
        k = o->k < 0 ? nd : o->k;
        for (int i = 0; i < k; i++)
            ax[i] = o->has_axes ? o->axes[i] : nd - k + i;
    }
    for (int i = 0; i < k; i++)
        ax[i] = ax[i] < 0 ? ax[i] + nd : ax[i];
    int kind = o->kind;
    cft_fft_norm norm = o->norm;
    harr x = hcopy(x0);
    if (kind == K_HFFT || kind == K_IHFFT) { /* NumPy: swapped direction */
        norm = norm == CFT_FFT_ORTHO      ? norm
               : norm == CFT_FFT_BACKWARD ? CFT_FFT_FORWARD
                                          : CFT_FFT_BACKWARD;
        if (kind == K_HFFT)
            hconj(&x);
    }
    bool c2r = kind == K_IRFFT || kind == K_HFFT, r2c = kind == K_RFFT || kind == K_IHFFT;
    bool inverse = kind == K_IFFT || c2r;
    if (r2c)
        for (int64_t i = 0; i < hsize(&x); i++)
            x.v[i] = creal(x.v[i]);
    int64_t len[CFT_MAX_NDIM];
    double N = 1;
    for (int i = 0; i < k; i++) {
        int64_t m = x.shape[ax[i]];
        len[i] = o->has_s && o->s[i] != -1 ? o->s[i] : c2r && i == k - 1 ? 2 * (m - 1) : m;
        N *= (double)len[i];
    }
    for (int i = 0; i < k; i++) {
        if (c2r && i == k - 1)
            continue;
        harr t = hresize(&x, ax[i], len[i]);
        free(x.v), x = t;
        hdft(&x, ax[i], inverse ? 1 : -1);
    }
    if (c2r) {
        harr t = hc2r(&x, ax[k - 1], len[k - 1]);
        free(x.v), x = t;
    }
    if (r2c) {
        harr t = hresize(&x, ax[k - 1], len[k - 1] / 2 + 1);
        free(x.v), x = t;
    }
    double sc = norm == CFT_FFT_ORTHO                   ? 1 / sqrt(N)
                : (norm == CFT_FFT_BACKWARD) == inverse ? 1 / N
                                                        : 1;
    hscale(&x, sc);
    if (kind == K_IHFFT)
        hconj(&x);
    return x;
}

/* max |y - ref| / max |ref| <= tol, same shape */
static double rel_err(cft_array *y, const harr *r) {
    if (cft_failed(y)) {
        printf("    error: %s\n", cft_error_message(y));
        return INFINITY;
    }
    cft_aval a = cft_array_aval(y);
    bool same = a.ndim == r->nd;
    for (int i = 0; same && i < a.ndim; i++)
        same = a.shape[i] == r->shape[i];
    if (!same) {
        char b[96];
        printf("    shape %s differs from the reference's\n", cft_aval_str(&a, b));
        return INFINITY;
    }
    harr h = hfrom(y);
    double m = 0, e = 0;
    for (int64_t i = 0; i < hsize(r); i++) {
        m = fmax(m, cabs(r->v[i]));
        e = fmax(e, cabs(h.v[i] - r->v[i]));
        if (isnan(creal(h.v[i])) || isnan(cimag(h.v[i])))
            e = INFINITY;
    }
    free(h.v);
    return e / (m > 0 ? m : 1);
}

static bool kind_real_in(int kind) {
    return kind == K_RFFT || kind == K_IHFFT;
}
static cft_dtype out_dtype(int kind, bool dbl) {
    if (kind == K_IRFFT || kind == K_HFFT)
        return dbl ? CFT_F64 : CFT_F32;
    return dbl ? CFT_C128 : CFT_C64;
}

/* run op on a random input of `shape` in f32 and f64 against the reference */
static void check_op(const op_t *o, const int64_t *shape, int nd, const char *what) {
    static const char *const nn[] = {"backward", "ortho", "forward"};
    for (int dbl = 0; dbl < 2; dbl++) {
        bool real_in = kind_real_in(o->kind);
        harr x = hrand(shape, nd, !real_in);
        cft_dtype dt = real_in ? (dbl ? CFT_F64 : CFT_F32) : (dbl ? CFT_C128 : CFT_C64);
        harr xr = hfrom(hto(&x, dt)); /* what the input holds after rounding */
        TEST("%s %s %s %s", knames[o->kind], what, nn[o->norm], dbl ? "f64" : "f32") {
            cft_array *y = run_op(o, hto(&x, dt));
            harr r = ref_op(o, &xr);
            double e = rel_err(y, &r), tol = dbl ? 1e-12 : 2e-5;
            CHECK_MSG(e <= tol, "relative error %.3g > %.3g", e, tol);
            if (!cft_failed(y))
                CHECK_MSG(cft_array_dtype(y) == out_dtype(o->kind, dbl), "dtype %s",
                          cft_dtype_name(cft_array_dtype(y)));
            free(r.v);
        }
        free(x.v), free(xr.v);
    }
}

/* a and b (any dtypes, complex or real) agree to tol relative to max |b| */
static bool close_to(cft_array *a, cft_array *b, double tol) {
    if (cft_failed(b))
        return false;
    harr hb = hfrom(b);
    double e = rel_err(a, &hb);
    free(hb.v);
    if (e > tol)
        printf("    relative error %.3g > %.3g\n", e, tol);
    return e <= tol;
}

/* ---- dot-product test of the vjp ---- */

/* Re sum(a * b) (plain product) of two arrays of the same shape */
static double re_dot(cft_array *a, cft_array *b) {
    harr x = hfrom(a), y = hfrom(b);
    double s = 0;
    for (int64_t i = 0; i < hsize(&x); i++)
        s += creal(x.v[i] * y.v[i]);
    free(x.v), free(y.v);
    return s;
}

static void dot_test(const op_t *o, const int64_t *shape, int nd, const char *what) {
    TEST("vjp dot-product %s %s norm %d", knames[o->kind], what, (int)o->norm) {
        bool real_in = kind_real_in(o->kind);
        harr t = hrand(shape, nd, !real_in);
        cft_array *tx = hto(&t, real_in ? CFT_F64 : CFT_C128), *y;
        cft_fn *pb;
        CHECK_EQ(cft_vjp(op_fn(o), &tx, &y, &pb), CFT_OK);
        harr c =
            hrand(cft_array_shape(y), cft_array_ndim(y), cft_dtype_is_complex(cft_array_dtype(y)));
        cft_array *ct = hto(&c, cft_array_dtype(y)), *lt;
        CHECK_EQ(cft_fn_call(pb, &ct, &lt), CFT_OK);
        CHECK(cft_array_dtype(lt) == cft_array_dtype(tx));
        double lhs = re_dot(ct, y), rhs = re_dot(lt, tx);
        CHECK_CLOSE(rhs, lhs, 1e-12, 1e-12);
        free(t.v), free(c.v);
    }
}

/* ---- jvp against finite differences ---- */

static void jvp_test(const op_t *o, const int64_t *shape, int nd, const char *what) {
    TEST("jvp vs finite differences %s %s", knames[o->kind], what) {
        bool real_in = kind_real_in(o->kind);
        cft_dtype dt = real_in ? CFT_F64 : CFT_C128;
        harr x = hrand(shape, nd, !real_in), t = hrand(shape, nd, !real_in);
        cft_array *xs = hto(&x, dt), *ts = hto(&t, dt), *out[2];
        CHECK_EQ(cft_fn_call(cft_jvp(op_fn(o)), (cft_array *[]){xs, ts}, out), CFT_OK);
        double h = 1e-3;
        cft_array *fp = run_op(o, cft_add(xs, cft_mul_s(ts, h)));
        cft_array *fm = run_op(o, cft_sub(xs, cft_mul_s(ts, h)));
        harr fd = hfrom(cft_mul_s(cft_sub(fp, fm), 0.5 / h));
        CHECK_MSG(rel_err(out[1], &fd) < 1e-9, "jvp differs from central differences");
        harr r = hfrom(run_op(o, xs));
        CHECK_MSG(rel_err(out[0], &r) == 0, "jvp's primal output differs");
        free(x.v), free(t.v), free(fd.v), free(r.v);
    }
}

/* ---- loss through rfft -> filter -> irfft ---- */

static int64_t filt_n;
static cft_status filter_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *X = cft_fft_rfft(in[0], -1, -1, CFT_FFT_BACKWARD);
    cft_array *y = cft_fft_irfft(cft_mul(X, in[1]), filt_n, -1, CFT_FFT_ORTHO);
    out[0] = cft_sum(cft_mul(cft_square(y), cft_cos(y)), NULL, 0, false);
    return CFT_OK;
}
static double loss_at(cft_array *x, cft_array *w) {
    cft_array *o;
    cft_fn_call(cft_fn_new(filter_loss, NULL, 2, 1), (cft_array *[]){x, w}, &o);
    double v;
    cft_copy_to(o, CFT_F64, &v);
    return v;
}

/* energy: sum c_k |rfft2(x)_k|^2 (ortho), c_k the multiplicity of bin k of
 * the half spectrum: ||x||^2 by Parseval, so its Hessian is 2 I */
static int64_t energy_n;
static cft_status energy(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    int64_t n = energy_n, m = n / 2 + 1;
    double c[64];
    for (int64_t k = 0; k < m; k++)
        c[k] = k == 0 || (n % 2 == 0 && k == n / 2) ? 1 : 2;
    cft_array *X = cft_fft_rfft2(in[0], NULL, NULL, CFT_FFT_ORTHO);
    cft_array *p = cft_real(cft_mul(X, cft_conj(X)));
    out[0] = cft_sum(cft_mul(p, cft_from_f64(c, &m, 1)), NULL, 0, false);
    return CFT_OK;
}
/* several transforms in one function, for jit against the interpreter */
static cft_status mixed(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *x = in[0]; /* f64 [6, 5, 7] */
    cft_array *a = cft_fft_rfftn(x, (int64_t[]){8, 7}, (int[]){0, 2}, 2, CFT_FFT_ORTHO);
    cft_array *b = cft_fft_ifft(cft_mul(a, a), -1, 1, CFT_FFT_FORWARD);
    out[0] = cft_fft_irfftn(b, (int64_t[]){8, 7}, (int[]){0, 2}, 2, CFT_FFT_BACKWARD);
    out[1] = cft_fft_fftshift(cft_abs(cft_fft_fft(x, 9, 0, CFT_FFT_BACKWARD)), NULL, 0);
    return CFT_OK;
}
static cft_status mixed_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    cft_array *o[2];
    mixed(env, nin, in, 2, o);
    (void)nout;
    out[0] = cft_add(cft_sum(cft_square(o[0]), NULL, 0, false), cft_sum(o[1], NULL, 0, false));
    return CFT_OK;
}

/* ---- plan cache under threads ---- */

typedef struct {
    int id;
    int bad;
} thr_arg;
static void *thr_main(void *p) {
    thr_arg *a = p;
    for (int it = 0; it < 60; it++) {
        int64_t n = 3 + (it * 7 + a->id * 5) % 40, B = 1 + (it + a->id) % 5;
        int64_t one = 1, nn = n, half = n / 2 + 1;
        double *in = malloc(sizeof(double) * 2 * (size_t)(n * B)),
               *out = malloc(sizeof(double) * 2 * (size_t)(n * B)),
               *back = malloc(sizeof(double) * 2 * (size_t)(n * B));
        for (int64_t i = 0; i < n * B; i++)
            in[i] = sin(0.37 * (double)(i + a->id)); /* real signals */
        /* r2c then c2r of each row must give n * the input */
        bool ok = cft__fft_exec(CFT_RFFT_R2C, true, 1, &nn, &one, &one, 1, &B, &nn, &half, in, out);
        ok &= cft__fft_exec(CFT_IRFFT_C2R, true, 1, &nn, &one, &one, 1, &B, &half, &nn, out, back);
        for (int64_t i = 0; ok && i < n * B; i++)
            ok = fabs(back[i] / (double)n - in[i]) < 1e-12;
        a->bad += !ok;
        free(in), free(out), free(back);
    }
    return NULL;
}

static cft_status vm_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout; /* per example [5, 6] */
    cft_array *a = cft_fft_rfft(in[0], 8, 0, CFT_FFT_BACKWARD);
    cft_array *b = cft_fft_fft2(cft_mul(a, a), NULL, NULL, CFT_FFT_ORTHO);
    out[0] = cft_fft_irfft(b, 7, 1, CFT_FFT_FORWARD);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    static const int64_t sizes[] = {1, 5, 6, 7, 12, 15, 16, 31};
    char what[128];

    /* 1-d along the last and the first axis, every norm */
    for (int kind = K_FFT; kind <= K_IHFFT; kind++)
        for (int si = 0; si < 8; si++)
            for (int norm = 0; norm < 3; norm++)
                for (int first = 0; first < 2; first++) {
                    int64_t n = sizes[si];
                    bool c2r = kind == K_IRFFT || kind == K_HFFT;
                    int64_t m = c2r ? n / 2 + 1 : n; /* input length */
                    op_t o = {.kind = kind,
                              .dims = D_1,
                              .norm = norm,
                              .has_axes = true,
                              .axes = {first ? 0 : -1},
                              .has_s = c2r,
                              .s = {n}};
                    int64_t shape[2] = {first ? m : 3, first ? 4 : m};
                    snprintf(what, sizeof what, "n=%lld axis %s", (long long)n, first ? "0" : "-1");
                    check_op(&o, shape, 2, what);
                }

    /* n crops and pads */
    for (int kind = K_FFT; kind <= K_IHFFT; kind++)
        for (int d = -2; d <= 3; d += 5) {
            op_t o = {.kind = kind, .dims = D_1, .has_s = true, .s = {12 + d}};
            snprintf(what, sizeof what, "input 12 n=%d", 12 + d);
            check_op(&o, (int64_t[]){2, 12}, 2, what);
        }
    /* default lengths of irfft and hfft: 2 (m - 1) */
    for (int kind = K_IRFFT; kind <= K_HFFT; kind++) {
        op_t o = {.kind = kind, .dims = D_1};
        check_op(&o, (int64_t[]){3, 7}, 2, "default n from m=7");
        o.axes[0] = 1, o.has_axes = true;
        check_op(&o, (int64_t[]){2, 4, 3}, 3, "default n from m=4, middle axis");
    }

    /* 2-d and n-d */
    for (int kind = K_FFT; kind <= K_IRFFT; kind++)
        for (int norm = 0; norm < 3; norm++) {
            bool c2r = kind == K_IRFFT;
            op_t o = {.kind = kind, .dims = D_2, .norm = norm};
            check_op(&o, (int64_t[]){5, c2r ? 4 : 6}, 2, "2-d 5x6");
            o.has_axes = true, o.axes[0] = 2, o.axes[1] = 0;
            check_op(&o, (int64_t[]){7, 3, c2r ? 3 : 15}, 3, "axes (2, 0) of 7x3x15");
            o.has_s = true, o.s[0] = 5, o.s[1] = 6;
            check_op(&o, (int64_t[]){7, 3, 4}, 3, "axes (2, 0), s (5, 6) of 7x3x4");
            op_t n3 = {.kind = kind, .dims = D_N, .k = -1, .norm = norm};
            check_op(&n3, (int64_t[]){5, 6, c2r ? 4 : 7}, 3, "3-d all axes 5x6x7");
            op_t n4 = {.kind = kind, .dims = D_N, .k = -1, .norm = norm};
            check_op(&n4, (int64_t[]){3, 4, 5, c2r ? 2 : 2}, 4, "4-d all axes 3x4x5x2");
            op_t n5 = {.kind = kind,
                       .dims = D_N,
                       .k = 4,
                       .norm = norm,
                       .has_axes = true,
                       .axes = {4, 0, 2, 1},
                       .has_s = true,
                       .s = {6, 2, -1, 5}};
            check_op(&n5, (int64_t[]){3, 4, 2, 2, 5}, 5, "5-d axes (4, 0, 2, 1) s (6, 2, -1, 5)");
            op_t n1 = {
                .kind = kind, .dims = D_N, .k = 2, .norm = norm, .has_s = true, .s = {31, 12}};
            check_op(&n1, (int64_t[]){2, 16, c2r ? 7 : 12}, 3, "last 2 axes s (31, 12)");
        }

    TEST("round trips") {
        for (int si = 0; si < 8; si++)
            for (int norm = 0; norm < 3; norm++) {
                int64_t n = sizes[si];
                harr h = hrand((int64_t[]){3, n}, 2, true);
                cft_array *x = hto(&h, CFT_C128), *xr = cft_real(x);
                cft_array *b = cft_fft_ifft(cft_fft_fft(x, -1, -1, norm), -1, -1, norm);
                CHECK(close_to(b, x, 1e-13));
                cft_array *r = cft_fft_irfft(cft_fft_rfft(xr, -1, -1, norm), n, -1, norm);
                CHECK(close_to(r, xr, 1e-13));
                cft_array *hh = cft_fft_hfft(cft_fft_ihfft(xr, -1, -1, norm), n, -1, norm);
                CHECK(close_to(hh, xr, 1e-13));
                cft_array *x3 = hto(&h, CFT_C64);
                cft_array *b3 =
                    cft_fft_ifftn(cft_fft_fftn(x3, NULL, NULL, -1, norm), NULL, NULL, -1, norm);
                CHECK(close_to(b3, x3, 1e-5));
                free(h.v);
            }
    }

    TEST("ihfft is conj(rfft)/n and hfft a real spectrum") {
        harr h = hrand((int64_t[]){9}, 1, false);
        cft_array *x = hto(&h, CFT_F64);
        cft_array *a = cft_fft_ihfft(x, -1, 0, CFT_FFT_BACKWARD);
        cft_array *b = cft_mul_s(cft_conj(cft_fft_rfft(x, -1, 0, CFT_FFT_BACKWARD)), 1.0 / 9);
        harr hb = hfrom(b);
        CHECK(rel_err(a, &hb) < 1e-15);
        CHECK(cft_array_dtype(cft_fft_hfft(a, 9, 0, CFT_FFT_BACKWARD)) == CFT_F64);
        free(h.v), free(hb.v);
    }

    TEST("dtypes: ints, halves and f32 compute in single precision, f64 in double") {
        cft_array *xi = cft_iota(CFT_I32, (int64_t[]){6}, 1, 0);
        CHECK(cft_array_dtype(cft_fft_fft(xi, -1, 0, 0)) == CFT_C64);
        CHECK(cft_array_dtype(cft_fft_rfft(xi, -1, 0, 0)) == CFT_C64);
        CHECK(cft_array_dtype(cft_fft_rfft(cft_astype(xi, CFT_F16), -1, 0, 0)) == CFT_C64);
        CHECK(cft_array_dtype(cft_fft_irfft(cft_astype(xi, CFT_F64), -1, 0, 0)) == CFT_F64);
        CHECK(cft_array_dtype(cft_fft_irfft(xi, -1, 0, 0)) == CFT_F32);
        CHECK(cft_array_dtype(cft_fft_fft(cft_astype(xi, CFT_BF16), -1, 0, 0)) == CFT_C64);
        /* rfft of 0..5: X_0 = 15, X_3 = -3 */
        cft_array *X = cft_fft_rfft(xi, -1, 0, 0);
        double re, im;
        CHECK_EQ(cft_item_complex_at(X, 0, &re, &im), CFT_OK);
        CHECK_CLOSE(re, 15, 1e-6, 0);
        CHECK_EQ(cft_item_complex_at(X, 3, &re, &im), CFT_OK);
        CHECK_CLOSE(re, -3, 1e-6, 1e-6);
        CHECK_CLOSE(im, 0, 0, 1e-6);
    }

    TEST("strided, broadcast and conjugate-view inputs") {
        harr h = hrand((int64_t[]){6, 7}, 2, true);
        cft_array *x = hto(&h, CFT_C128);
        /* a transposed view along its last axis */
        cft_array *xt = cft_transpose(x, NULL);
        harr ht = hfrom(xt);
        op_t o = {.kind = K_FFT, .dims = D_1};
        harr r = ref_op(&o, &ht);
        CHECK(rel_err(cft_fft_fft(xt, -1, -1, 0), &r) < 1e-12);
        free(r.v);
        /* a strided slice */
        cft_array *sl = cft_slice(x, (int64_t[]){1, 0}, (int64_t[]){6, 7}, (int64_t[]){2, 3});
        harr hs = hfrom(sl);
        r = ref_op(&o, &hs);
        CHECK(rel_err(cft_fft_fft(sl, -1, -1, 0), &r) < 1e-12);
        free(r.v), free(hs.v);
        /* broadcast along the transformed axis and along the batch */
        cft_array *bc = cft_broadcast_to(cft_reshape(cft_index(x, 0), (int64_t[]){7, 1}, 2),
                                         (int64_t[]){7, 5}, 2);
        harr hb = hfrom(bc);
        r = ref_op(&o, &hb);
        CHECK(rel_err(cft_fft_fft(bc, -1, -1, 0), &r) < 1e-12);
        free(r.v);
        o.axes[0] = 0, o.has_axes = true;
        r = ref_op(&o, &hb);
        CHECK(rel_err(cft_fft_fft(bc, -1, 0, 0), &r) < 1e-12);
        free(r.v), free(hb.v);
        /* conjugate views: fft, ifft and irfft read them */
        cft_array *cj = cft_conj(x);
        CHECK(cft_is_conj(cj));
        harr hc = hcopy(&h);
        hconj(&hc);
        for (int kind = K_FFT; kind <= K_IRFFT; kind++) {
            if (kind == K_RFFT)
                continue;
            op_t oc = {.kind = kind, .dims = D_1, .norm = CFT_FFT_ORTHO};
            r = ref_op(&oc, &hc);
            CHECK_MSG(rel_err(run_op(&oc, cj), &r) < 1e-12, "%s of a conj view", knames[kind]);
            free(r.v);
        }
        free(h.v), free(ht.v), free(hc.v);
    }

    TEST("fftfreq, rfftfreq") {
        double v[8];
        CHECK_EQ(cft_copy_to(cft_fft_fftfreq(5, 0.1, CFT_F64), CFT_F64, v), CFT_OK);
        double e5[] = {0, 2, 4, -4, -2};
        for (int i = 0; i < 5; i++)
            CHECK_CLOSE(v[i], e5[i], 1e-15, 1e-15);
        CHECK_EQ(cft_copy_to(cft_fft_fftfreq(6, 1, CFT_F32), CFT_F64, v), CFT_OK);
        double e6[] = {0, 1. / 6, 2. / 6, -3. / 6, -2. / 6, -1. / 6};
        for (int i = 0; i < 6; i++)
            CHECK_CLOSE(v[i], e6[i], 1e-7, 0);
        CHECK(cft_array_dtype(cft_fft_fftfreq(6, 1, CFT_F32)) == CFT_F32);
        cft_array *rf = cft_fft_rfftfreq(7, 0.5, CFT_F64);
        CHECK_EQ(cft_array_size(rf), 4);
        CHECK_EQ(cft_copy_to(rf, CFT_F64, v), CFT_OK);
        for (int i = 0; i < 4; i++)
            CHECK_CLOSE(v[i], i / 3.5, 1e-15, 0);
        CHECK_EQ(cft_array_size(cft_fft_rfftfreq(6, 1, CFT_F64)), 4);
        CHECK_EQ(cft_array_size(cft_fft_fftfreq(1, 1, CFT_F64)), 1);
    }

    TEST("fftshift, ifftshift") {
        double v[32];
        cft_array *x = cft_iota(CFT_F64, (int64_t[]){5}, 1, 0);
        CHECK_EQ(cft_copy_to(cft_fft_fftshift(x, NULL, 0), CFT_F64, v), CFT_OK);
        double e[] = {3, 4, 0, 1, 2};
        for (int i = 0; i < 5; i++)
            CHECK_EQ(v[i], e[i]);
        CHECK_EQ(cft_copy_to(cft_fft_ifftshift(x, NULL, 0), CFT_F64, v), CFT_OK);
        double ei[] = {2, 3, 4, 0, 1};
        for (int i = 0; i < 5; i++)
            CHECK_EQ(v[i], ei[i]);
        /* fftshift puts fftfreq's zero in the middle, ascending */
        CHECK_EQ(cft_copy_to(cft_fft_fftshift(cft_fft_fftfreq(6, 1, CFT_F64), NULL, 0), CFT_F64, v),
                 CFT_OK);
        for (int i = 0; i < 6; i++)
            CHECK_CLOSE(v[i], (i - 3) / 6.0, 1e-15, 1e-15);
        /* 2-d, one axis; ifftshift undoes fftshift */
        cft_array *m = cft_reshape(cft_iota(CFT_F64, (int64_t[]){24}, 1, 0), (int64_t[]){4, 6}, 2);
        cft_array *s1 = cft_fft_fftshift(m, (int[]){-1}, 1);
        CHECK_EQ(cft_copy_to(s1, CFT_F64, v), CFT_OK);
        CHECK_EQ(v[0], 3);
        CHECK_EQ(v[6], 9);
        CHECK(
            cft_allclose(cft_fft_ifftshift(cft_fft_fftshift(m, NULL, 0), NULL, 0), m, 0, 0, false));
        cft_array *s2 = cft_fft_fftshift(m, NULL, 0);
        CHECK_EQ(cft_copy_to(s2, CFT_F64, v), CFT_OK);
        CHECK_EQ(v[0], 2 * 6 + 3);
    }

    /* derivatives */
    for (int kind = K_FFT; kind <= K_IHFFT; kind++)
        for (int n = 6; n <= 7; n++) {
            bool c2r = kind == K_IRFFT || kind == K_HFFT;
            int64_t m = c2r ? n / 2 + 1 : n;
            for (int norm = 0; norm < 3; norm++) {
                op_t o = {.kind = kind, .dims = D_1, .norm = norm, .has_s = true, .s = {n}};
                snprintf(what, sizeof what, "1-d n=%d", n);
                dot_test(&o, (int64_t[]){3, m}, 2, what);
                if (!norm)
                    jvp_test(&o, (int64_t[]){3, m}, 2, what);
            }
            if (kind >= K_HFFT)
                continue;
            op_t o2 = {.kind = kind,
                       .dims = D_N,
                       .k = 3,
                       .norm = CFT_FFT_ORTHO,
                       .has_s = true,
                       .s = {4, 5, n}};
            snprintf(what, sizeof what, "3-d 4x5x%d", n);
            dot_test(&o2, (int64_t[]){2, 4, 5, m}, 4, what);
            jvp_test(&o2, (int64_t[]){2, 4, 5, m}, 4, what);
            op_t o4 = {.kind = kind,
                       .dims = D_N,
                       .k = 4,
                       .norm = CFT_FFT_BACKWARD,
                       .has_axes = true,
                       .axes = {1, 0, 3, 2},
                       .has_s = true,
                       .s = {3, 2, 5, n}};
            snprintf(what, sizeof what, "4-d axes (1, 0, 3, 2) last %d", n);
            dot_test(&o4, (int64_t[]){2, 3, m, 5}, 4, what);
            op_t o5 = {.kind = kind,
                       .dims = D_1,
                       .has_axes = true,
                       .axes = {0},
                       .has_s = true,
                       .s = {n + 2}};
            snprintf(what, sizeof what, "axis 0 padded to %d", n + 2);
            dot_test(&o5, (int64_t[]){m, 3}, 2, what);
        }

    TEST("vmap against a loop") {
        harr h = hrand((int64_t[]){5, 3, 6}, 3, false);
        cft_array *X = hto(&h, CFT_F64);
        cft_fn *f = cft_fn_new(vm_fn, NULL, 1, 1);
        cft_array *Y = cft_fn_call1(cft_vmap(f, (int[]){1}, NULL), &X);
        CHECK(!cft_failed(Y));
        for (int b = 0; b < 3; b++) {
            cft_array *xb = cft_index(cft_moveaxis(X, 1, 0), b);
            cft_array *yb = cft_fn_call1(f, &xb);
            CHECK(close_to(cft_index(Y, b), yb, 1e-12));
        }
        /* vmap of vmap, batch axes in the middle and at the end */
        harr h2 = hrand((int64_t[]){5, 2, 6, 3}, 4, false);
        cft_array *X2 = hto(&h2, CFT_F64);
        cft_array *Y2 =
            cft_fn_call1(cft_vmap(cft_vmap(f, (int[]){2}, NULL), (int[]){1}, NULL), &X2);
        CHECK(!cft_failed(Y2));
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 3; c++) {
                cft_array *xb = cft_index(cft_index(cft_transpose(X2, (int[]){1, 3, 0, 2}), b), c);
                cft_array *yb = cft_fn_call1(f, &xb);
                CHECK(close_to(cft_index(cft_index(Y2, b), c), yb, 1e-12));
            }
        free(h.v), free(h2.v);
    }

    for (filt_n = 7; filt_n <= 8; filt_n++)
        TEST("grad of a real loss through rfft -> filter -> irfft, n=%lld", (long long)filt_n) {
            int64_t n = filt_n, m = n / 2 + 1;
            harr hx = hrand((int64_t[]){3, n}, 2, false), hw = hrand((int64_t[]){m}, 1, true);
            cft_array *x = hto(&hx, CFT_F64), *w = hto(&hw, CFT_C128), *g[2];
            CHECK_EQ(cft_fn_call(cft_grad(cft_fn_new(filter_loss, NULL, 2, 1), (int[]){0, 1}, 2),
                                 (cft_array *[]){x, w}, g),
                     CFT_OK);
            harr gx = hfrom(g[0]), gw = hfrom(g[1]);
            CHECK(cft_array_dtype(g[0]) == CFT_F64 && cft_array_dtype(g[1]) == CFT_C128);
            double eps = 1e-5;
            for (int64_t i = 0; i < 3 * n; i++) {
                harr a = hcopy(&hx), b = hcopy(&hx);
                a.v[i] += eps, b.v[i] -= eps;
                double fd =
                    (loss_at(hto(&a, CFT_F64), w) - loss_at(hto(&b, CFT_F64), w)) / (2 * eps);
                CHECK_CLOSE(creal(gx.v[i]), fd, 1e-7, 1e-8);
                free(a.v), free(b.v);
            }
            /* JAX's convention: g = dl/d(re) - i dl/d(im) */
            for (int64_t k = 0; k < m; k++)
                for (int part = 0; part < 2; part++) {
                    harr a = hcopy(&hw), b = hcopy(&hw);
                    dcx d = part ? eps * I : eps;
                    a.v[k] += d, b.v[k] -= d;
                    double fd =
                        (loss_at(x, hto(&a, CFT_C128)) - loss_at(x, hto(&b, CFT_C128))) / (2 * eps);
                    double got = part ? -cimag(gw.v[k]) : creal(gw.v[k]);
                    CHECK_CLOSE(got, fd, 1e-7, 1e-8);
                    free(a.v), free(b.v);
                }
            free(hx.v), free(hw.v), free(gx.v), free(gw.v);
        }

    TEST("Hessian of the half spectrum's energy is 2 I") {
        for (int n = 5; n <= 6; n++) {
            energy_n = n;
            harr h = hrand((int64_t[]){3, n}, 2, false);
            cft_array *x = hto(&h, CFT_F64);
            cft_array *H = cft_fn_call1(cft_hessian(cft_fn_new(energy, NULL, 1, 1), 0), &x);
            cft_array *I2 =
                cft_reshape(cft_mul_s(cft_eye(3 * n, CFT_F64), 2), (int64_t[]){3, n, 3, n}, 4);
            CHECK(cft_allclose(H, I2, 1e-12, 1e-12, false));
            free(h.v);
        }
    }

    TEST("jit equals the interpreter") {
        harr h = hrand((int64_t[]){6, 5, 7}, 3, false);
        cft_array *x = hto(&h, CFT_F64), *a[2], *b[2];
        cft_fn *f = cft_fn_new(mixed, NULL, 1, 2);
        CHECK_EQ(cft_fn_call(f, &x, a), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_jit(f), &x, b), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_jit(f), &x, b), CFT_OK); /* the planned path */
        for (int i = 0; i < 2; i++)
            CHECK(close_to(b[i], a[i], 1e-12));
        cft_fn *g = cft_grad(cft_fn_new(mixed_loss, NULL, 1, 1), NULL, 0);
        cft_array *ga = cft_fn_call1(g, &x), *gj = cft_fn_call1(cft_jit(g), &x);
        gj = cft_fn_call1(cft_jit(g), &x);
        CHECK(close_to(gj, ga, 1e-12));
        free(h.v);
    }

    TEST("errors name the call and never abort") {
        cft_array *x = cft_zeros(CFT_F64, (int64_t[]){4, 5}, 2);
        cft_array *c = cft_zeros(CFT_C64, (int64_t[]){4, 5}, 2);
        struct {
            cft_array *y;
            const char *has;
        } cases[] = {
            {cft_fft_fft(x, -1, 2, 0), "cft_fft_fft: axis 2 out of range"},
            {cft_fft_ifft(x, -1, -3, 0), "cft_fft_ifft: axis -3 out of range"},
            {cft_fft_fft(x, 0, -1, 0), "cft_fft_fft: n = 0"},
            {cft_fft_rfft(x, -5, -1, 0), "cft_fft_rfft: n = -5"},
            {cft_fft_rfft(c, -1, -1, 0), "cft_fft_rfft: needs a real input"},
            {cft_fft_ihfft(c, -1, -1, 0), "cft_fft_ihfft: needs a real input"},
            {cft_fft_fft(x, -1, -1, (cft_fft_norm)7), "cft_fft_fft: bad norm 7"},
            {cft_fft_irfft(cft_zeros(CFT_C64, (int64_t[]){1}, 1), -1, 0, 0),
             "cft_fft_irfft: default length 0"},
            {cft_fft_fft2(x, NULL, (int[]){1, -1}, 0), "cft_fft_fft2: axis -1 repeated"},
            {cft_fft_fftn(x, NULL, NULL, 3, 0), "cft_fft_fftn: naxes 3"},
            {cft_fft_rfftn(x, NULL, NULL, 0, 0), "cft_fft_rfftn: needs at least one axis"},
            {cft_fft_fftn(x, (int64_t[]){3, 0}, NULL, 2, 0), "cft_fft_fftn: bad length 0"},
            {cft_fft_fft(cft_scalar(1, CFT_F32), -1, 0, 0), "cft_fft_fft: axis 0 out of range"},
            {cft_fft_fft(NULL, -1, 0, 0), "cft_fft_fft: argument 0 is NULL"},
            {cft_fft_fftfreq(0, 1, CFT_F64), "cft_fft_fftfreq: n = 0"},
            {cft_fft_rfftfreq(4, 0, CFT_F64), "cft_fft_rfftfreq: sample spacing"},
            {cft_fft_fftfreq(4, 1, CFT_I32), "cft_fft_fftfreq: dtype i32"},
            {cft_fft_fftshift(x, (int[]){5}, 1), "cft_fft_fftshift: axis 5 out of range"},
            {cft__fft(x, CFT_FFT_C2C, (int64_t[]){5}, 1, 0), "fft: fft needs c64 or c128 input"},
            {cft__fft(c, CFT_FFT_C2C, (int64_t[]){4}, 1, 0), "fft: fft with lengths"},
            {cft__fft(c, CFT_IRFFT_C2R, (int64_t[]){10}, 1, 0), "not 6"},
            {cft__fft(c, CFT_FFT_C2C, (int64_t[]){4, 5, 1, 1}, 4, 0), "over 4 axes"},
            {cft__fft(c, CFT_FFT_C2C, (int64_t[]){5}, 1, 3), "bad #scale 3"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            CHECK_MSG(cft_failed(cases[i].y), "case %zu did not fail", i);
            CHECK_MSG(strstr(cft_error_message(cases[i].y), cases[i].has), "case %zu: '%s'", i,
                      cft_error_message(cases[i].y));
        }
        /* errors are absorbing */
        cft_array *e = cases[0].y;
        CHECK(cft_fft_irfftn(cft_fft_rfft(e, -1, 0, 0), NULL, NULL, -1, 0) == e);
        CHECK(cft_fft_fftshift(e, NULL, 0) == e);
        /* under a trace: the shape error surfaces at trace time */
        op_t o = {.kind = K_FFT, .dims = D_1, .has_axes = true, .axes = {3}};
        cft_array *y = cft_fn_call1(cft_grad(op_fn(&o), NULL, 0), &x);
        CHECK(cft_failed(y) && strstr(cft_error_message(y), "axis 3 out of range"));
    }

    TEST("plan cache: concurrent threads") {
        pthread_t th[4];
        thr_arg args[4];
        for (int i = 0; i < 4; i++) {
            args[i] = (thr_arg){i, 0};
            pthread_create(&th[i], NULL, thr_main, &args[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            CHECK_EQ(args[i].bad, 0);
        }
        CHECK(cft__fft_cache_count() <= 128);
    }

    TEST("plans are reused") {
        harr h = hrand((int64_t[]){8, 9}, 2, true);
        cft_array *x = hto(&h, CFT_C128);
        cft_fft_fft(x, -1, -1, 0);
        int n0 = cft__fft_cache_count();
        for (int i = 0; i < 5; i++)
            cft_fft_fft(hto(&h, CFT_C128), -1, -1, 0);
        CHECK_EQ(cft__fft_cache_count(), n0);
        free(h.v);
    }
    return check_summary();
}
