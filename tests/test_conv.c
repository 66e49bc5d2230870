/* test_conv.c: convolution and pooling beyond their rows in test_prims.
 *
 *   - conv2d / conv_general_dilated (1-, 2-, 3-d; strides, padding incl.
 *     negative, lhs and rhs dilation, feature and batch groups; transposed
 *     views as operands; shapes on both sides of the direct-loop / GEMM
 *     threshold) against a naive loop written from the definition, f64 and
 *     f32;
 *   - the gradient of conv2d (both operands, grouped, dilated, strided)
 *     against central finite differences, element by element; 3-d and
 *     batch-grouped convs by jvp vs finite differences and the vjp
 *     dot-product test; vmap of 3-d and batch-grouped convs against loops;
 *     second order (jacfwd of jacrev) against finite differences of grad;
 *   - cft_conv_padding against jax's SAME / VALID values;
 *   - max_pool2d / avg_pool2d against naive loops, their gradients against
 *     finite differences;
 *   - a small CNN (conv 3x3 8 channels, relu, max-pool 2, linear to 10) on the digits data,
 *     1x8x8 inputs: cft_vmap(cft_grad(loss)) per-sample gradients equal a
 *     loop of single-sample gradients, interpreted and through cft_jit;
 *   - errors name the call and the shapes.
 * Tolerances are stated where used. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define FN(name)                                                                                   \
    static cft_status name(void *env, int nin, cft_array *const *in, int nout, cft_array **out)
#define UNUSED_ARGS (void)env, (void)nin, (void)nout

/* ---------------------------------------------------------------- helpers */

static int64_t numel(const int64_t *s, int nd) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= s[i];
    return n;
}
static double *values(const cft_array *x) {
    int64_t n = cft_failed(x) ? 0 : cft_array_size(x);
    double *v = calloc((size_t)n + 1, sizeof(double));
    if (n)
        cft_copy_to(x, CFT_F64, v);
    return v;
}
static uint64_t seed_ctr = 1;
/* uniform in [-1, 1], f32-representable so f32 and f64 see the same values */
static cft_array *rnd(const int64_t *shape, int nd, cft_dtype dt) {
    cft_array *u = cft_random_uniform(cft_random_key(seed_ctr++), CFT_F32, shape, nd, -1, 1);
    return cft_astype(u, dt);
}
static cft_array *rnd_like(cft_array *x) {
    return rnd(cft_array_shape(x), cft_array_ndim(x), cft_array_dtype(x));
}
static double dot(const cft_array *a, const cft_array *b) {
    double *x = values(a), *y = values(b), s = 0;
    for (int64_t i = 0; i < cft_array_size(a); i++)
        s += x[i] * y[i];
    free(x);
    free(y);
    return s;
}
static double max_abs(const cft_array *x) {
    double *v = values(x), m = 0;
    for (int64_t i = 0; i < cft_array_size(x); i++)
        m = fmax(m, fabs(v[i]));
    free(v);
    return m;
}

/* ---------------------------------------------------------------- conv reference */

typedef struct {
    int nsp;
    int64_t lhs[5], rhs[5];
    int64_t s[3], pad[6], ld[3], rd[3];
    int64_t G, B;
} cfg;

static int64_t dil(int64_t n, int64_t d) {
    return n == 0 ? 0 : (n - 1) * d + 1;
}

static void ref_out_shape(const cfg *c, int64_t *o) {
    o[0] = c->lhs[0] / c->B, o[1] = c->rhs[0];
    for (int i = 0; i < c->nsp; i++) {
        int64_t p = dil(c->lhs[2 + i], c->ld[i]) + c->pad[2 * i] + c->pad[2 * i + 1],
                k = dil(c->rhs[2 + i], c->rd[i]);
        o[2 + i] = p >= k ? (p - k) / c->s[i] + 1 : 0;
    }
}

/* the definition: y[n, o, p] = sum_{ci, tap} x[b*N/B + n, g*I + ci, pos(p, tap)] w[o, ci, tap] */
static void conv_ref(const cfg *c, const double *x, const double *w, double *y) {
    int nsp = c->nsp, nd = nsp + 2;
    int64_t os[5], N = c->lhs[0], C = c->lhs[1], O = c->rhs[0], I = c->rhs[1];
    ref_out_shape(c, os);
    int64_t ny = numel(os, nd), nk = numel(c->rhs + 2, nsp);
    for (int64_t i = 0; i < ny; i++) {
        int64_t idx[5], r = i;
        for (int d = nd - 1; d >= 0; d--)
            idx[d] = r % os[d], r /= os[d];
        int64_t n = idx[0], o = idx[1];
        int64_t g = c->G > 1 ? o / (O / c->G) : 0, b = c->B > 1 ? o / (O / c->B) : 0;
        int64_t sample = b * (N / c->B) + n;
        double acc = 0;
        for (int64_t ci = 0; ci < I; ci++)
            for (int64_t t = 0; t < nk; t++) {
                int64_t tap[3], rt = t, xoff = sample * C + g * I + ci;
                for (int d = nsp - 1; d >= 0; d--)
                    tap[d] = rt % c->rhs[2 + d], rt /= c->rhs[2 + d];
                bool ok = true;
                for (int d = 0; d < nsp && ok; d++) {
                    int64_t pos = idx[2 + d] * c->s[d] + tap[d] * c->rd[d] - c->pad[2 * d];
                    ok = pos >= 0 && pos % c->ld[d] == 0 && pos / c->ld[d] < c->lhs[2 + d];
                    xoff = xoff * c->lhs[2 + d] + (ok ? pos / c->ld[d] : 0);
                }
                if (ok)
                    acc += x[xoff] * w[(o * I + ci) * nk + t];
            }
        y[i] = acc;
    }
}

static cft_array *conv_lib(const cfg *c, cft_array *x, cft_array *w) {
    return cft_conv_general_dilated(x, w, c->s, c->pad, c->ld, c->rd, c->G, c->B);
}

static void check_conv_cfg(const cfg *c, cft_dtype dt, bool transposed_view) {
    int nd = c->nsp + 2;
    cft_array *x = rnd(c->lhs, nd, dt), *w = rnd(c->rhs, nd, dt);
    cft_array *xa = x;
    if (transposed_view) { /* the same values reached through a transposed view */
        int perm[5] = {1, 0, 2, 3, 4};
        cft_array *xt = cft_add_s(cft_transpose(x, perm), 0); /* a contiguous [C, N, ...] */
        xa = cft_transpose(xt, perm);
    }
    double *xv = values(x), *wv = values(w);
    int64_t os[5];
    ref_out_shape(c, os);
    double *ref = calloc((size_t)numel(os, nd) + 1, sizeof(double));
    conv_ref(c, xv, wv, ref);
    cft_array *want = cft_from_f64(ref, os, nd), *got = conv_lib(c, xa, w);
    CHECK_MSG(!cft_failed(got), "conv failed: %s", cft_error_message(got));
    /* f64: the same sums in another order, 1e-12. f32: sums of up to ~150
     * products of values in [-1, 1]: rounding <= 150 * 2^-24 ~ 1e-5 absolute */
    if (dt == CFT_F64)
        CHECK_ARRAY_CLOSE(got, want, 1e-12, 1e-12);
    else
        CHECK_ARRAY_CLOSE(got, want, 1e-5, 1e-5);
    if (!cft_failed(got))
        CHECK_EQ(cft_array_dtype(got), dt);
    free(xv), free(wv), free(ref);
}

/* lhs, rhs, strides, padding, lhs dil, rhs dil, G, B */
static const cfg conv_cfgs[] = {
    {2, {2, 3, 6, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, 1},
    {2, {2, 3, 7, 6}, {4, 3, 3, 2}, {2, 1}, {1, 2, 0, 1}, {1, 1}, {1, 1}, 1, 1},
    {2, {1, 2, 5, 5}, {3, 2, 3, 3}, {1, 2}, {1, 1, 2, 1}, {1, 1}, {2, 2}, 1, 1},
    {2, {2, 4, 6, 6}, {6, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 2, 1},
    {2, {2, 6, 5, 5}, {6, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 6, 1}, /* depthwise */
    {2, {4, 3, 5, 5}, {6, 3, 2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, 2}, /* batch groups */
    {2, {6, 2, 4, 4}, {3, 2, 3, 3}, {1, 1}, {1, 0, 0, 1}, {1, 1}, {1, 1}, 1, 3},
    {2, {1, 2, 4, 3}, {2, 2, 3, 2}, {1, 1}, {2, 2, 1, 1}, {2, 3}, {1, 1}, 1, 1}, /* lhs dilation */
    {2, {2, 2, 6, 6}, {2, 2, 2, 2}, {1, 1}, {-1, 1, 1, -2}, {1, 1}, {1, 1}, 1, 1}, /* negative pad
                                                                                    */
    {1, {2, 3, 9}, {4, 3, 3}, {2}, {2, 1}, {1}, {2}, 1, 1},
    {1, {2, 4, 8}, {4, 2, 2}, {1}, {0, 0}, {2}, {1}, 2, 1},
    {3,
     {2, 2, 4, 5, 4},
     {3, 2, 2, 3, 2},
     {1, 2, 1},
     {1, 0, 1, 1, 0, 1},
     {1, 1, 1},
     {1, 1, 2},
     1,
     1},
    {3,
     {2, 4, 3, 4, 3},
     {4, 2, 2, 2, 2},
     {1, 1, 1},
     {0, 0, 0, 0, 0, 0},
     {1, 1, 1},
     {1, 1, 1},
     2,
     1},
    {3,
     {2, 2, 3, 3, 3},
     {2, 2, 2, 2, 2},
     {1, 1, 1},
     {0, 1, 0, 0, 0, 0},
     {1, 1, 1},
     {1, 1, 1},
     1,
     2},
    /* large enough for im2col + GEMM, with chunked and single-sample paths */
    {2, {3, 8, 20, 20}, {16, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, 1},
    {2, {2, 8, 40, 40}, {8, 4, 3, 3}, {2, 1}, {1, 1, 0, 2}, {1, 1}, {2, 1}, 2, 1},
    {2, {1, 64, 70, 70}, {4, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, 1},
    {2, {8, 16, 12, 12}, {8, 16, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, 4},
    /* large enough for oneDNN where it is built in (conv_dnnl.c): strides,
     * uneven padding, rhs dilation, 1 and 3 spatial dims */
    {2, {4, 16, 20, 20}, {16, 16, 3, 3}, {2, 2}, {0, 1, 2, 1}, {1, 1}, {2, 1}, 1, 1},
    {1, {32, 16, 64}, {8, 16, 5}, {2}, {1, 3}, {1}, {2}, 1, 1},
    {3,
     {4, 8, 8, 8, 8},
     {8, 8, 3, 3, 3},
     {1, 2, 1},
     {1, 1, 0, 1, 1, 0},
     {1, 1, 1},
     {1, 1, 2},
     1,
     1},
};
#define NCFG ((int)(sizeof conv_cfgs / sizeof conv_cfgs[0]))

static const char *cfg_str(const cfg *c) {
    static char buf[256];
    int n = snprintf(buf, sizeof buf, "%dd lhs [", c->nsp);
    for (int i = 0; i < c->nsp + 2; i++)
        n += snprintf(buf + n, sizeof buf - n, "%s%lld", i ? "," : "", (long long)c->lhs[i]);
    n += snprintf(buf + n, sizeof buf - n, "] rhs [");
    for (int i = 0; i < c->nsp + 2; i++)
        n += snprintf(buf + n, sizeof buf - n, "%s%lld", i ? "," : "", (long long)c->rhs[i]);
    snprintf(buf + n, sizeof buf - n, "] G=%lld B=%lld s0=%lld ld0=%lld rd0=%lld", (long long)c->G,
             (long long)c->B, (long long)c->s[0], (long long)c->ld[0], (long long)c->rd[0]);
    return buf;
}

/* ---------------------------------------------------------------- derivative checks */

typedef struct {
    const cfg *c;
} conv_env;

/* (x, w) -> sum(tanh(conv(x, w)) * k), k fixed: a nonlinear scalar */
static cft_array *fixed_k;
FN(conv_loss) {
    (void)nin, (void)nout;
    const cfg *c = env;
    cft_array *y = conv_lib(c, in[0], in[1]);
    out[0] = cft_sum(cft_mul(cft_tanh(y), fixed_k), NULL, 0, false);
    return CFT_OK;
}
FN(conv_plain) {
    (void)nin, (void)nout;
    out[0] = conv_lib(env, in[0], in[1]);
    return CFT_OK;
}

/* element-by-element central differences of f at x (input `which`) */
static void check_grad_fd(cft_fn *f, cft_array **args, int which, cft_array *grad) {
    cft_array *x = args[which];
    int64_t n = cft_array_size(x);
    double *xv = values(x), *g = values(grad), h = 1e-6;
    const int64_t *shape = cft_array_shape(x);
    int nd = cft_array_ndim(x);
    for (int64_t i = 0; i < n; i++) {
        double v0 = xv[i], fp, fm;
        cft_array *a[2] = {args[0], args[1]};
        xv[i] = v0 + h;
        a[which] = cft_from_f64(xv, shape, nd);
        fp = cft_item(cft_fn_call1(f, a));
        xv[i] = v0 - h;
        a[which] = cft_from_f64(xv, shape, nd);
        fm = cft_item(cft_fn_call1(f, a));
        xv[i] = v0;
        double fd = (fp - fm) / (2 * h), d = fabs(fd - g[i]);
        /* truncation h^2 f''' ~ 1e-12, rounding 1e-16 |f| / h ~ 1e-9 (|f| ~ 10) */
        if (d > 1e-7 + 1e-6 * fabs(fd)) {
            CHECK_MSG(0, "d/d input %d [%lld]: grad %.12g vs fd %.12g", which, (long long)i, g[i],
                      fd);
            break;
        }
    }
    free(xv), free(g);
}

/* jvp vs central differences and the dot-product test, for any cfg */
static void check_jvp_vjp(const cfg *c) {
    int nd = c->nsp + 2;
    cft_array *x = rnd(c->lhs, nd, CFT_F64), *w = rnd(c->rhs, nd, CFT_F64);
    cft_array *tx = rnd_like(x), *tw = rnd_like(w);
    cft_fn *f = cft_fn_new(conv_plain, (void *)c, 2, 1);
    cft_array *o[2];
    CHECK_EQ(cft_fn_call(cft_jvp(f), (cft_array *[]){x, w, tx, tw}, o), CFT_OK);
    double h = 1e-6;
    cft_array *fp = conv_lib(c, cft_add(x, cft_mul_s(tx, h)), cft_add(w, cft_mul_s(tw, h)));
    cft_array *fm = conv_lib(c, cft_sub(x, cft_mul_s(tx, h)), cft_sub(w, cft_mul_s(tw, h)));
    cft_array *fd = cft_mul_s(cft_sub(fp, fm), 0.5 / h);
    /* bilinear: central differences are exact up to rounding ~ 1e-16 |f| / h */
    CHECK_ARRAY_CLOSE(o[1], fd, 1e-7, 1e-8);
    cft_array *ys, *ct[2];
    cft_fn *pb;
    CHECK_EQ(cft_vjp(f, (cft_array *[]){x, w}, &ys, &pb), CFT_OK);
    cft_array *cy = rnd_like(ys);
    CHECK_EQ(cft_fn_call(pb, &cy, ct), CFT_OK);
    double lhs = dot(o[1], cy), rhs = dot(tx, ct[0]) + dot(tw, ct[1]);
    CHECK_CLOSE(lhs, rhs, 1e-12, 1e-12);
}

/* vmap over lhs, rhs, both, against a loop */
static void check_vmap(const cfg *c, int ax0, int ax1) {
    int nd = c->nsp + 2, S = 3;
    cft_array *xs[3], *ws[3], *ys[3];
    for (int k = 0; k < S; k++) {
        xs[k] = rnd(c->lhs, nd, CFT_F64), ws[k] = rnd(c->rhs, nd, CFT_F64);
        if (ax0 == CFT_NOT_BATCHED)
            xs[k] = xs[0];
        if (ax1 == CFT_NOT_BATCHED)
            ws[k] = ws[0];
        ys[k] = conv_lib(c, xs[k], ws[k]);
    }
    cft_array *X = ax0 == CFT_NOT_BATCHED ? xs[0] : cft_stack(xs, S, ax0);
    cft_array *W = ax1 == CFT_NOT_BATCHED ? ws[0] : cft_stack(ws, S, ax1);
    int axes[2] = {ax0, ax1};
    cft_array *got = cft_fn_call1(cft_vmap(cft_fn_new(conv_plain, (void *)c, 2, 1), axes, NULL),
                                  (cft_array *[]){X, W});
    CHECK_ARRAY_CLOSE(got, cft_stack(ys, S, 0), 1e-12, 1e-12);
}

/* ---------------------------------------------------------------- pooling reference */

/* max / sum over 2-d windows of the last two dims (padding excluded) */
static void pool_ref(bool is_max, const double *x, int64_t NC, int64_t H, int64_t W,
                     const int64_t *k, const int64_t *s, const int64_t *p, const int64_t *d,
                     bool include_pad, double *y, int64_t *Ho, int64_t *Wo) {
    *Ho = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) / s[0] + 1;
    *Wo = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) / s[1] + 1;
    for (int64_t c = 0; c < NC; c++)
        for (int64_t i = 0; i < *Ho; i++)
            for (int64_t j = 0; j < *Wo; j++) {
                double acc = is_max ? -INFINITY : 0;
                int64_t cnt = 0;
                for (int64_t a = 0; a < k[0]; a++)
                    for (int64_t b = 0; b < k[1]; b++) {
                        int64_t r = i * s[0] + a * d[0] - p[0], q = j * s[1] + b * d[1] - p[1];
                        if (r < 0 || r >= H || q < 0 || q >= W)
                            continue;
                        double v = x[(c * H + r) * W + q];
                        acc = is_max ? fmax(acc, v) : acc + v;
                        cnt++;
                    }
                y[(c * *Ho + i) * *Wo + j] =
                    is_max ? acc : acc / (double)(include_pad ? k[0] * k[1] : cnt);
            }
}

typedef struct {
    int64_t k[2], s[2], p[2], d[2];
    bool is_max, include_pad;
} pool_cfg;

static cft_array *pool_lib(const pool_cfg *c, cft_array *x) {
    return c->is_max ? cft_max_pool2d(x, c->k, c->s, c->p, c->d)
                     : cft_avg_pool2d(x, c->k, c->s, c->p, c->include_pad);
}
FN(pool_loss) {
    UNUSED_ARGS;
    out[0] = cft_sum(cft_mul(cft_sin(pool_lib(env, in[0])), fixed_k), NULL, 0, false);
    return CFT_OK;
}

/* ---------------------------------------------------------------- the CNN */

#include "../examples/mlp.h" /* the digits loader */

/* (w1 [8,1,3,3], b1 [8], w2 [128,10], b2 [10], x [1,8,8] or [B,1,8,8], y [] or [B])
 * -> mean cross-entropy of conv 3x3 (pad 1) -> relu -> max-pool 2 -> linear */
FN(cnn_loss) {
    UNUSED_ARGS;
    cft_array *x = in[4];
    bool single = cft_array_ndim(x) == 3;
    cft_array *h = cft_conv2d(x, in[0], NULL, (int64_t[]){1, 1}, NULL, 1);
    h = cft_relu(cft_add(h, cft_reshape(in[1], (int64_t[]){8, 1, 1}, 3)));
    h = cft_max_pool2d(h, (int64_t[]){2, 2}, NULL, NULL, NULL);
    h = single ? cft_reshape(h, (int64_t[]){128}, 1) : cft_reshape(h, (int64_t[]){-1, 128}, 2);
    cft_array *logits = cft_add(cft_matmul(h, in[2]), in[3]);
    out[0] = cft_mean(cft_cross_entropy(logits, in[5]), NULL, 0, false);
    return CFT_OK;
}

static void cnn_tests(void) {
    enum { NS = 16 };
    cft_array *p[4] = {cft_mul_s(rnd((int64_t[]){8, 1, 3, 3}, 4, CFT_F32), 0.5),
                       cft_mul_s(rnd((int64_t[]){8}, 1, CFT_F32), 0.1),
                       cft_mul_s(rnd((int64_t[]){128, 10}, 2, CFT_F32), 0.2),
                       cft_mul_s(rnd((int64_t[]){10}, 1, CFT_F32), 0.1)};
    /* the first NS images and labels of the sklearn digits data set */
    digits d;
    if (digits_load(&d)) {
        TEST("cnn: the digits data set is available (run scripts/fetch-digits.sh)") CHECK(false);
        return;
    }
    cft_array *X = cft_from_f32(d.x, (int64_t[]){NS, 1, 8, 8}, 4);
    cft_array *Y = cft_from_i32(d.y, (int64_t[]){NS}, 1);
    cft_fn *loss = cft_fn_new(cnn_loss, NULL, 6, 1);
    int argnums[4] = {0, 1, 2, 3};
    int in_axes[6] = {CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0};
    cft_fn *g1 = cft_grad(loss, argnums, 4);
    cft_array *loop[4][NS];
    for (int i = 0; i < NS; i++) {
        cft_array *o[4];
        cft_fn_call(g1, (cft_array *[]){p[0], p[1], p[2], p[3], cft_index(X, i), cft_index(Y, i)},
                    o);
        for (int k = 0; k < 4; k++)
            loop[k][i] = o[k];
    }
    cft_array *want[4];
    for (int k = 0; k < 4; k++)
        want[k] = cft_stack(loop[k], NS, 0);
    /* f32 both ways; the per-sample sums run in another order (a grouped
     * conv over all samples instead of one conv per sample; GEMM blocking),
     * each gradient entry summing at most 64 products of O(1) f32 values:
     * rounding ~ 64 * 2^-24 relative to the largest term, ~ 4e-6; so rtol
     * 1e-4 and atol 1e-5 of the largest entry of that gradient. */
    cft_fn *psg = cft_vmap(cft_grad(loss, argnums, 4), in_axes, NULL);
    cft_fn *jpsg = cft_jit(cft_vmap(cft_grad(loss, argnums, 4), in_axes, NULL));
    const char *names[4] = {"conv weight", "conv bias", "linear weight", "linear bias"};
    for (int m = 0; m < 2; m++) {
        TEST("cnn: per-sample grads, %s vmap(grad) = loop of grad (%d samples)",
             m ? "cft_jit" : "interpreted", NS) {
            cft_array *o[4];
            for (int call = 0; call < (m ? 3 : 1);
                 call++) { /* jit: planning call, then compiled calls */
                CHECK_EQ(
                    cft_fn_call(m ? jpsg : psg, (cft_array *[]){p[0], p[1], p[2], p[3], X, Y}, o),
                    CFT_OK);
                for (int k = 0; k < 4; k++) {
                    CHECK_MSG(!cft_failed(o[k]), "%s: %s", names[k], cft_error_message(o[k]));
                    CHECK_ARRAY_CLOSE(o[k], want[k], 1e-4, 1e-5 * max_abs(want[k]));
                }
            }
        }
    }
    TEST("cnn: per-sample grads average to the batched grad") {
        cft_array *o[4];
        CHECK_EQ(cft_fn_call(cft_grad(loss, argnums, 4),
                             (cft_array *[]){p[0], p[1], p[2], p[3], X, Y}, o),
                 CFT_OK);
        for (int k = 0; k < 4; k++)
            CHECK_ARRAY_CLOSE(o[k], cft_mean(want[k], (int[]){0}, 1, false), 1e-4,
                              1e-5 * max_abs(o[k]));
    }
    TEST("cnn: the gradient of one sample in f64 matches finite differences") {
        cft_array *p64[4], *x0 = cft_astype(cft_index(X, 0), CFT_F64), *o[4];
        for (int k = 0; k < 4; k++)
            p64[k] = cft_astype(p[k], CFT_F64);
        CHECK_EQ(cft_fn_call(
                     g1, (cft_array *[]){p64[0], p64[1], p64[2], p64[3], x0, cft_index(Y, 0)}, o),
                 CFT_OK);
        double *w = values(p64[0]), *g = values(o[0]), h = 1e-6;
        for (int i = 0; i < 72; i++) {
            double v0 = w[i], f[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                w[i] = v0 + (sgn ? -h : h);
                cft_array *wi = cft_from_f64(w, (int64_t[]){8, 1, 3, 3}, 4);
                f[sgn] = cft_item(cft_fn_call1(
                    loss, (cft_array *[]){wi, p64[1], p64[2], p64[3], x0, cft_index(Y, 0)}));
            }
            w[i] = v0;
            CHECK_CLOSE(g[i], (f[0] - f[1]) / (2 * h), 1e-5, 1e-8);
        }
        free(w), free(g);
    }
}

/* ---------------------------------------------------------------- misc functions */

FN(max2_fn) { /* windows of 2, stride 1, over a vector */
    UNUSED_ARGS;
    out[0] = cft_reduce_window_max(in[0], (int64_t[]){2}, NULL, NULL, NULL);
    return CFT_OK;
}
FN(flip_fn) {
    UNUSED_ARGS;
    out[0] = cft_flip(in[0], (int[]){0, -1}, 2);
    return CFT_OK;
}

/* second order: (x, w) -> sum(tanh(conv(x, w)) * k); hessian over w */
FN(conv_loss_w) {
    (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul(cft_tanh(conv_lib(env, in[0], in[1])), fixed_k), NULL, 0, false);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    for (int i = 0; i < NCFG; i++) {
        const cfg *c = &conv_cfgs[i];
        TEST("conv vs naive loop, f64: %s", cfg_str(c)) {
            check_conv_cfg(c, CFT_F64, false);
        }
        TEST("conv vs naive loop, f32: %s", cfg_str(c)) {
            check_conv_cfg(c, CFT_F32, false);
        }
        TEST("conv vs naive loop, lhs a transposed view: %s", cfg_str(c)) {
            check_conv_cfg(c, CFT_F64, true);
        }
        if (numel(c->lhs, c->nsp + 2) > 3000)
            continue;
        TEST("conv jvp vs finite differences, vjp dot-product test: %s", cfg_str(c)) {
            check_jvp_vjp(c);
        }
        TEST("conv vmap over lhs, rhs, both vs a loop: %s", cfg_str(c)) {
            check_vmap(c, 0, CFT_NOT_BATCHED);
            check_vmap(c, CFT_NOT_BATCHED, 1);
            check_vmap(c, 2, 0);
            check_vmap(c, -1, c->nsp + 2);
        }
    }

    TEST("conv on i32 (direct loop) and mixed dtypes (promoted) vs the naive loop") {
        const cfg *c = &conv_cfgs[3]; /* grouped, strided, padded */
        cft_array *x = cft_astype(cft_mul_s(rnd(c->lhs, 4, CFT_F64), 5), CFT_I32);
        cft_array *w = cft_astype(cft_mul_s(rnd(c->rhs, 4, CFT_F64), 5), CFT_I32);
        int64_t os[4];
        ref_out_shape(c, os);
        double *xv = values(x), *wv = values(w),
               *ref = calloc((size_t)numel(os, 4), sizeof(double));
        conv_ref(c, xv, wv, ref);
        cft_array *yi = conv_lib(c, x, w), *want = cft_from_f64(ref, os, 4);
        CHECK_EQ(cft_array_dtype(yi), CFT_I32);
        CHECK_ARRAY_CLOSE(yi, want, 0, 0);
        cft_array *ym = conv_lib(c, x, cft_astype(w, CFT_F32)); /* i32 * f32 -> f32 */
        CHECK_EQ(cft_array_dtype(ym), CFT_F32);
        CHECK_ARRAY_CLOSE(ym, want, 1e-6, 1e-4);
        free(xv), free(wv), free(ref);
    }

    TEST("conv2d: groups and dilation vs the naive loop, unbatched [C, H, W] input") {
        cfg c = {2, {1, 4, 7, 7}, {6, 2, 3, 3}, {2, 1}, {1, 1, 2, 2}, {1, 1}, {2, 1}, 2, 1};
        cft_array *x = rnd(c.lhs, 4, CFT_F64), *w = rnd(c.rhs, 4, CFT_F64);
        cft_array *y = cft_conv2d(x, w, (int64_t[]){2, 1}, (int64_t[]){1, 2}, (int64_t[]){2, 1}, 2);
        cft_array *y3 = cft_conv2d(cft_index(x, 0), w, (int64_t[]){2, 1}, (int64_t[]){1, 2},
                                   (int64_t[]){2, 1}, 2);
        int64_t os[4];
        ref_out_shape(&c, os);
        double *xv = values(x), *wv = values(w),
               *ref = calloc((size_t)numel(os, 4), sizeof(double));
        conv_ref(&c, xv, wv, ref);
        CHECK_ARRAY_CLOSE(y, cft_from_f64(ref, os, 4), 1e-12, 1e-12);
        CHECK_ARRAY_CLOSE(y3, cft_from_f64(ref, os + 1, 3), 1e-12, 1e-12);
        free(xv), free(wv), free(ref);
    }

    /* grad of conv2d, element by element */
    static const cfg grad_cfgs[] = {
        {2, {2, 3, 5, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, 1},
        {2, {2, 4, 6, 5}, {4, 2, 3, 2}, {2, 1}, {1, 0, 0, 1}, {1, 1}, {1, 2}, 2, 1},
        {2, {1, 3, 7, 7}, {3, 1, 3, 3}, {2, 2}, {2, 2, 1, 1}, {1, 1}, {2, 2}, 3, 1},
    };
    for (int i = 0; i < 3; i++) {
        const cfg *c = &grad_cfgs[i];
        TEST("grad of conv2d vs finite differences, every element: %s", cfg_str(c)) {
            cft_array *x = rnd(c->lhs, 4, CFT_F64), *w = rnd(c->rhs, 4, CFT_F64);
            fixed_k = rnd_like(conv_lib(c, x, w));
            cft_fn *f = cft_fn_new(conv_loss, (void *)c, 2, 1);
            cft_array *g[2], *args[2] = {x, w};
            CHECK_EQ(cft_fn_call(cft_grad(f, (int[]){0, 1}, 2), args, g), CFT_OK);
            check_grad_fd(f, args, 0, g[0]);
            check_grad_fd(f, args, 1, g[1]);
        }
    }

    TEST("second order: jacfwd(jacrev) of a grouped strided conv loss vs finite differences of "
         "grad") {
        static const cfg c = {
            2, {2, 4, 5, 5}, {4, 2, 2, 2}, {2, 1}, {1, 0, 0, 1}, {1, 1}, {1, 2}, 2, 1};
        cft_array *x = rnd(c.lhs, 4, CFT_F64), *w = rnd(c.rhs, 4, CFT_F64);
        fixed_k = rnd_like(conv_lib(&c, x, w));
        cft_fn *f = cft_fn_new(conv_loss_w, (void *)&c, 2, 1);
        cft_fn *gw = cft_grad(f, (int[]){1}, 1);
        cft_array *H = cft_fn_call1(cft_jacfwd(cft_jacrev(f, (int[]){1}, 1), (int[]){1}, 1),
                                    (cft_array *[]){x, w});
        CHECK(!cft_failed(H));
        cft_array *v = rnd_like(w);
        double h = 1e-5;
        cft_array *gp = cft_fn_call1(gw, (cft_array *[]){x, cft_add(w, cft_mul_s(v, h))});
        cft_array *gm = cft_fn_call1(gw, (cft_array *[]){x, cft_sub(w, cft_mul_s(v, h))});
        cft_array *fd = cft_mul_s(cft_sub(gp, gm), 0.5 / h);
        cft_array *Hv = cft_sum(cft_mul(H, cft_reshape(v, (int64_t[]){1, 1, 1, 1, 4, 2, 2, 2}, 8)),
                                (int[]){4, 5, 6, 7}, 4, false);
        /* truncation h^2 |f'''| ~ 1e-10 */
        CHECK_ARRAY_CLOSE(Hv, fd, 1e-6, 1e-8);
        /* and grad of <grad_w f, v> over x: the transpose of the weight
         * gradient's batch-grouped conv, against finite differences */
        cft_fn *gx = cft_grad(f, (int[]){0}, 1);
        cft_array *gxp = cft_fn_call1(gx, (cft_array *[]){x, cft_add(w, cft_mul_s(v, h))});
        cft_array *gxm = cft_fn_call1(gx, (cft_array *[]){x, cft_sub(w, cft_mul_s(v, h))});
        cft_array *mixed = cft_mul_s(cft_sub(gxp, gxm), 0.5 / h); /* d/dw (grad_x f) . v */
        cft_array *Hxw =
            cft_fn_call1(cft_jacrev(gw, NULL, 0), (cft_array *[]){x, w}); /* [w shape, x shape] */
        cft_array *mix2 =
            cft_sum(cft_mul(Hxw, cft_reshape(v, (int64_t[]){4, 2, 2, 2, 1, 1, 1, 1}, 8)),
                    (int[]){0, 1, 2, 3}, 4, false);
        CHECK_ARRAY_CLOSE(mix2, mixed, 1e-6, 1e-8);
    }

    TEST("cft_conv_padding: SAME, SAME_LOWER and VALID as jax.lax.padtype_to_pads") {
        int64_t pads[6];
        /* in 5, window 3, stride 2: out 3, total (3-1)*2+3-5 = 2 -> (1, 1) */
        CHECK_EQ(cft_conv_padding(CFT_PAD_SAME, 1, (int64_t[]){5}, (int64_t[]){3}, (int64_t[]){2},
                                  NULL, pads),
                 CFT_OK);
        CHECK(pads[0] == 1 && pads[1] == 1);
        /* in 6, window 4, stride 1: total 3 -> SAME (1, 2), SAME_LOWER (2, 1) */
        cft_conv_padding(CFT_PAD_SAME, 1, (int64_t[]){6}, (int64_t[]){4}, NULL, NULL, pads);
        CHECK(pads[0] == 1 && pads[1] == 2);
        cft_conv_padding(CFT_PAD_SAME_LOWER, 1, (int64_t[]){6}, (int64_t[]){4}, NULL, NULL, pads);
        CHECK(pads[0] == 2 && pads[1] == 1);
        /* dilation 2 makes window 3 span 5: in 7, stride 1: total 4 -> (2, 2) */
        cft_conv_padding(CFT_PAD_SAME, 1, (int64_t[]){7}, (int64_t[]){3}, NULL, (int64_t[]){2},
                         pads);
        CHECK(pads[0] == 2 && pads[1] == 2);
        /* in 4, window 2, stride 3: out 2, total max(0, 3+2-4) = 1 -> (0, 1) */
        cft_conv_padding(CFT_PAD_SAME, 1, (int64_t[]){4}, (int64_t[]){2}, (int64_t[]){3}, NULL,
                         pads);
        CHECK(pads[0] == 0 && pads[1] == 1);
        CHECK_EQ(cft_conv_padding(CFT_PAD_VALID, 3, (int64_t[]){4, 5, 6}, (int64_t[]){2, 2, 2},
                                  NULL, NULL, pads),
                 CFT_OK);
        for (int i = 0; i < 6; i++)
            CHECK_EQ(pads[i], 0);
        /* SAME keeps ceil(in / stride) through a conv */
        int64_t pp[4];
        cft_conv_padding(CFT_PAD_SAME, 2, (int64_t[]){7, 8}, (int64_t[]){3, 4}, (int64_t[]){2, 3},
                         NULL, pp);
        cft_array *y = cft_conv_general_dilated(rnd((int64_t[]){1, 1, 7, 8}, 4, CFT_F32),
                                                rnd((int64_t[]){1, 1, 3, 4}, 4, CFT_F32),
                                                (int64_t[]){2, 3}, pp, NULL, NULL, 1, 1);
        CHECK_EQ(cft_array_dim(y, 2), 4);
        CHECK_EQ(cft_array_dim(y, 3), 3);
        CHECK_EQ(
            cft_conv_padding((cft_pad_mode)7, 1, (int64_t[]){4}, (int64_t[]){2}, NULL, NULL, pads),
            CFT_E_ARG);
    }

    TEST("cft_flip reverses the given axes, and its gradient flips back") {
        cft_array *x = cft_reshape(cft_arange(0, 24, 1, CFT_F64), (int64_t[]){2, 3, 4}, 3);
        double *v = values(cft_flip(x, (int[]){0, -1}, 2));
        CHECK_EQ((int)v[0], 15); /* x[1, 0, 3] */
        CHECK_EQ((int)v[23], 8); /* x[0, 2, 0] */
        free(v);
        cft_array *all = cft_flip(x, NULL, 0);
        CHECK_EQ((int)cft_item_at(all, 0), 23);
        cft_array *c = rnd_like(x), *ys, *ct;
        cft_fn *pb;
        cft_vjp(cft_fn_new(flip_fn, NULL, 1, 1), &x, &ys, &pb);
        ct = cft_fn_call1(pb, &c);
        CHECK_ARRAY_CLOSE(ct, cft_flip(c, (int[]){0, 2}, 2), 0, 0);
        CHECK(cft_failed(cft_flip(x, (int[]){0, 0}, 2)));
    }

    /* pooling */
    static const pool_cfg pools[] = {
        {{2, 2}, {2, 2}, {0, 0}, {1, 1}, true, true},
        {{3, 3}, {2, 1}, {1, 1}, {1, 1}, true, true},
        {{3, 2}, {1, 2}, {1, 1}, {2, 1}, true, true},
        {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false, true},
        {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false, true},
        {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false, false},
    };
    for (int i = 0; i < 6; i++) {
        const pool_cfg *pc = &pools[i];
        TEST("%s_pool2d k%lldx%lld s%lld,%lld p%lld d%lld%s vs naive loop, and grad vs finite "
             "differences",
             pc->is_max ? "max" : "avg", (long long)pc->k[0], (long long)pc->k[1],
             (long long)pc->s[0], (long long)pc->s[1], (long long)pc->p[0], (long long)pc->d[0],
             pc->is_max        ? ""
             : pc->include_pad ? " count_include_pad"
                               : " exclude pad") {
            int64_t shape[4] = {2, 3, 7, 6};
            cft_array *x = rnd(shape, 4, CFT_F64);
            double *xv = values(x), *ref = calloc(2 * 3 * 7 * 6, sizeof(double));
            int64_t Ho, Wo;
            pool_ref(pc->is_max, xv, 6, 7, 6, pc->k, pc->s, pc->p, pc->d, pc->include_pad, ref, &Ho,
                     &Wo);
            cft_array *got = pool_lib(pc, x);
            CHECK_ARRAY_CLOSE(got, cft_from_f64(ref, (int64_t[]){2, 3, Ho, Wo}, 4), 1e-14, 1e-14);
            cft_array *got3 = pool_lib(pc, cft_index(x, 1)); /* unbatched */
            CHECK_ARRAY_CLOSE(got3, cft_from_f64(ref + 3 * Ho * Wo, (int64_t[]){3, Ho, Wo}, 3),
                              1e-14, 1e-14);
            cft_array *got32 = pool_lib(pc, cft_astype(x, CFT_F32));
            CHECK_ARRAY_CLOSE(got32, cft_from_f64(ref, (int64_t[]){2, 3, Ho, Wo}, 4), 1e-6, 1e-6);
            fixed_k = rnd_like(got);
            cft_fn *f = cft_fn_new(pool_loss, (void *)pc, 1, 1);
            cft_array *g = cft_fn_call1(cft_grad(f, NULL, 0), &x), *args[2] = {x, x};
            check_grad_fd(f, args, 0, g);
            free(xv), free(ref);
        }
    }
    TEST("max_pool2d: the gradient goes to the first maximum of a window, once per window") {
        double v[16] = {1, 5, 5, 0, 2, 5, 3, 3, 0, 0, 7, 7, 0, 0, 7, 7};
        cft_array *x = cft_from_f64(v, (int64_t[]){1, 4, 4}, 3), *ys, *ct;
        cft_fn *pb;
        static const pool_cfg pc = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, true, true};
        fixed_k = cft_ones(CFT_F64, (int64_t[]){1, 2, 2}, 3);
        cft_vjp(cft_fn_new(pool_loss, (void *)&pc, 1, 1), &x, &ys, &pb);
        ct = cft_fn_call1(pb, (cft_array *[]){cft_scalar(1, CFT_F64)});
        double *c = values(ct);
        /* the windows' first maxima: (0,1) = 5, (0,2) = 5, (2,0) = 0 (all 0), (2,2) = 7 (all 7) */
        double want[16] = {0, cos(5), cos(5), 0, 0, 0, 0, 0, cos(0), 0, cos(7), 0, 0, 0, 0, 0};
        for (int i = 0; i < 16; i++)
            CHECK_CLOSE(c[i], want[i], 1e-15, 0);
        free(c);
    }
    TEST(
        "reduce_window: overlapping 1-d windows, strides, dilation, padding; all-padding windows") {
        double v[6] = {1, -2, 3, 4, -5, 6};
        cft_array *x = cft_from_f64(v, (int64_t[]){6}, 1);
        cft_array *s =
            cft_reduce_window_sum(x, (int64_t[]){3}, (int64_t[]){2}, (int64_t[]){1, 2}, NULL);
        double *sv = values(s); /* padded: 0 1 -2 3 4 -5 6 0 0: windows at 0, 2, 4, 6 */
        CHECK_EQ(cft_array_size(s), 4);
        CHECK(sv[0] == -1 && sv[1] == 5 && sv[2] == 5 && sv[3] == 6);
        free(sv);
        cft_array *m =
            cft_reduce_window_max(x, (int64_t[]){2}, NULL, (int64_t[]){0, 0}, (int64_t[]){3});
        double *mv = values(m); /* pairs (i, i+3) */
        CHECK_EQ(cft_array_size(m), 3);
        CHECK(mv[0] == 4 && mv[1] == -2 && mv[2] == 6);
        free(mv);
        cft_array *e =
            cft_reduce_window_max(x, (int64_t[]){1}, (int64_t[]){4}, (int64_t[]){3, 0}, NULL);
        CHECK_EQ(cft_array_size(e), 3); /* windows at -3 (padding), 1, 5 */
        CHECK(isinf(cft_item_at(e, 0)) && cft_item_at(e, 0) < 0);
        /* a NaN wins the max, and its tangent is that of the first NaN */
        double nv[4] = {1, NAN, 3, NAN}, tv[4] = {10, 20, 30, 40};
        cft_array *xn = cft_from_f64(nv, (int64_t[]){4}, 1), *o[2];
        CHECK_EQ(cft_fn_call(cft_jvp(cft_fn_new(max2_fn, NULL, 1, 1)),
                             (cft_array *[]){xn, cft_from_f64(tv, (int64_t[]){4}, 1)}, o),
                 CFT_OK);
        CHECK(isnan(cft_item_at(o[0], 0)) && isnan(cft_item_at(o[0], 1)) &&
              isnan(cft_item_at(o[0], 2)));
        CHECK(cft_item_at(o[1], 0) == 20 && cft_item_at(o[1], 1) == 20 &&
              cft_item_at(o[1], 2) == 40);
        cft_array *i32 =
            cft_reduce_window_max(cft_astype(x, CFT_I32), (int64_t[]){2}, NULL, NULL, NULL);
        CHECK_EQ(cft_array_dtype(i32), CFT_I32);
        CHECK_EQ((int)cft_item_at(i32, 3), 4);
    }

    TEST("degenerate sizes: empty outputs, empty inputs, and their gradients") {
        cft_array *x = rnd((int64_t[]){2, 3, 2, 2}, 4, CFT_F64),
                  *w = rnd((int64_t[]){4, 3, 3, 3}, 4, CFT_F64);
        cft_array *y = cft_conv2d(x, w, NULL, NULL, NULL, 1); /* kernel larger than the input */
        CHECK(!cft_failed(y) && cft_array_dim(y, 2) == 0 && cft_array_size(y) == 0);
        static const cfg c0 = {
            2, {2, 3, 2, 2}, {4, 3, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}, 1, 1};
        fixed_k = cft_zeros(CFT_F64, (int64_t[]){2, 4, 0, 0}, 4);
        cft_array *g[2];
        CHECK_EQ(cft_fn_call(cft_grad(cft_fn_new(conv_loss, (void *)&c0, 2, 1), (int[]){0, 1}, 2),
                             (cft_array *[]){x, w}, g),
                 CFT_OK);
        CHECK_ARRAY_CLOSE(g[0], cft_zeros_like(x), 0, 0);
        CHECK_ARRAY_CLOSE(g[1], cft_zeros_like(w), 0, 0);
        cft_array *e = cft_conv2d(cft_zeros(CFT_F32, (int64_t[]){0, 3, 5, 5}, 4),
                                  cft_astype(w, CFT_F32), NULL, (int64_t[]){1, 1}, NULL, 1);
        CHECK(!cft_failed(e) && cft_array_dim(e, 0) == 0 && cft_array_dim(e, 2) == 5);
        cft_array *z = cft_conv2d(cft_zeros(CFT_F32, (int64_t[]){1, 3, 0, 0}, 4),
                                  cft_astype(w, CFT_F32), NULL, (int64_t[]){2, 2}, NULL, 1);
        CHECK(!cft_failed(z) && cft_array_dim(z, 2) == 2);
        CHECK_ARRAY_CLOSE(z, cft_zeros(CFT_F32, (int64_t[]){1, 4, 2, 2}, 4), 0, 0);
        cft_array *m = cft_max_pool2d(cft_zeros(CFT_F32, (int64_t[]){0, 3, 4, 4}, 4),
                                      (int64_t[]){2, 2}, NULL, NULL, NULL);
        CHECK(!cft_failed(m) && cft_array_size(m) == 0);
    }

    TEST("f16 and bf16: conv2d, pooling and their grads compute in f32 and round on store") {
        cft_array *x = rnd((int64_t[]){2, 4, 6, 6}, 4, CFT_F32),
                  *w = rnd((int64_t[]){6, 2, 3, 3}, 4, CFT_F32);
        for (int h = 0; h < 2; h++) {
            cft_dtype dt = h ? CFT_BF16 : CFT_F16;
            cft_array *xh = cft_astype(x, dt), *wh = cft_astype(w, dt);
            cft_array *y = cft_conv2d(xh, wh, (int64_t[]){2, 1}, (int64_t[]){1, 1}, NULL, 2);
            CHECK_EQ(cft_array_dtype(y), dt);
            /* the same conv on the rounded inputs in f32, rounded once */
            cft_array *want =
                cft_astype(cft_conv2d(cft_astype(xh, CFT_F32), cft_astype(wh, CFT_F32),
                                      (int64_t[]){2, 1}, (int64_t[]){1, 1}, NULL, 2),
                           dt);
            CHECK_ARRAY_CLOSE(y, want, 0, 0);
            cft_array *m = cft_max_pool2d(xh, (int64_t[]){2, 2}, NULL, NULL, NULL);
            CHECK_EQ(cft_array_dtype(m), dt);
            CHECK_ARRAY_CLOSE(
                m, cft_max_pool2d(cft_astype(xh, CFT_F32), (int64_t[]){2, 2}, NULL, NULL, NULL), 0,
                0);
            static const cfg c = {
                2, {2, 4, 6, 6}, {6, 2, 3, 3}, {2, 1}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 2, 1};
            fixed_k = cft_astype(rnd((int64_t[]){2, 6, 3, 6}, 4, CFT_F32), dt);
            cft_fn *g = cft_grad(cft_fn_new(conv_loss, (void *)&c, 2, 1), (int[]){0, 1}, 2);
            cft_array *gh[2], *gj[2];
            CHECK_EQ(cft_fn_call(g, (cft_array *[]){xh, wh}, gh), CFT_OK);
            cft_fn *jg = cft_jit(g);
            for (int call = 0; call < 2; call++) /* the planning call, then the compiled plan */
                CHECK_EQ(cft_fn_call(jg, (cft_array *[]){xh, wh}, gj), CFT_OK);
            CHECK_EQ(cft_array_dtype(gh[1]), dt);
            CHECK_ARRAY_CLOSE(gj[0], gh[0], 0, 0);
            CHECK_ARRAY_CLOSE(gj[1], gh[1], 0, 0);
        }
    }

    cnn_tests();

    TEST("errors name the call and the shapes") {
        cft_array *x = rnd((int64_t[]){2, 3, 5, 5}, 4, CFT_F32);
        cft_array *e = cft_conv2d(x, rnd((int64_t[]){4, 2, 3, 3}, 4, CFT_F32), NULL, NULL, NULL, 1);
        CHECK(cft_failed(e));
        CHECK_MSG(strstr(cft_error_message(e), "conv_general_dilated") &&
                      strstr(cft_error_message(e), "f32[2,3,5,5]"),
                  "%s", cft_error_message(e));
        e = cft_conv2d(x, rnd((int64_t[]){6, 1, 3, 3}, 4, CFT_F32), NULL, NULL, NULL, 2);
        CHECK(cft_failed(e));
        e = cft_conv2d(cft_reshape(x, (int64_t[]){150}, 1), x, NULL, NULL, NULL, 1);
        CHECK_MSG(cft_failed(e) && strstr(cft_error_message(e), "cft_conv2d"), "%s",
                  cft_error_message(e));
        e = cft_conv_general_dilated(x, rnd((int64_t[]){4, 3, 3, 3}, 4, CFT_F32), NULL,
                                     (int64_t[]){-6, 0, 0, 0}, NULL, NULL, 1, 1);
        CHECK_MSG(cft_failed(e) && strstr(cft_error_message(e), "negative padding"), "%s",
                  cft_error_message(e));
        e = cft_conv_general_dilated(x, rnd((int64_t[]){4, 3, 3, 3}, 4, CFT_F32), (int64_t[]){0, 1},
                                     NULL, NULL, NULL, 1, 1);
        CHECK(cft_failed(e));
        e = cft_conv_general_dilated(x, rnd((int64_t[]){4, 3, 3, 3}, 4, CFT_F32), NULL, NULL, NULL,
                                     NULL, 1, 3);
        CHECK_MSG(cft_failed(e) && strstr(cft_error_message(e), "batch_group_count"), "%s",
                  cft_error_message(e));
        e = cft_max_pool2d(x, (int64_t[]){2, 2}, NULL, (int64_t[]){2, 0}, NULL);
        CHECK_MSG(cft_failed(e) && strstr(cft_error_message(e), "cft_max_pool2d"), "%s",
                  cft_error_message(e));
        e = cft_reduce_window_sum(x, (int64_t[]){1, 1, 0, 2}, NULL, NULL, NULL);
        CHECK_MSG(cft_failed(e) && strstr(cft_error_message(e), "reduce_window_sum"), "%s",
                  cft_error_message(e));
        e = cft_reduce_window_max(cft_astype(x, CFT_BOOL), (int64_t[]){1, 1, 2, 2}, NULL, NULL,
                                  NULL);
        CHECK(cft_failed(e));
    }
    return check_summary();
}
