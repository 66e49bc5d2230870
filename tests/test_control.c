/* test_control.c: scan and fori_loop under every transform: values against
 * a C loop; grad through a 100-step scan against the unrolled loop (same
 * ops, no scan) and against finite differences; jvp; vmap of a scan with
 * batched xs, batched carry or batched consts against a loop; vmap(grad);
 * grad(grad); a scan closing over an outer tracer; reverse scans; errors. */
#include <math.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

/* body: (w, h, x) -> (h' = tanh(w*h + x), y = h'^2) */
static cft_status rnn_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_mul(in[0], in[1]), in[2]));
    out[0] = h;
    out[1] = cft_square(h);
    return CFT_OK;
}
static cft_fn *body;
static bool use_reverse;

/* loss(w, h0, xs) = sum(ys) + final h, via scan */
static cft_status loss_scan(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *res[2];
    cft_status st = cft_scan(body, 1, 1, cft_array_dim(in[2], 0), use_reverse, in, res);
    if (st)
        return st;
    out[0] = cft_add(cft_sum(res[1], NULL, 0, false), cft_sum(res[0], NULL, 0, false));
    return CFT_OK;
}
/* the same, unrolled in C */
static cft_status loss_unrolled(void *env, int nin, cft_array *const *in, int nout,
                                cft_array **out) {
    (void)env, (void)nin, (void)nout;
    int64_t n = cft_array_dim(in[2], 0);
    cft_array *h = in[1], *acc = cft_zeros_like(in[1]), *r[2];
    for (int64_t t = 0; t < n; t++) {
        int64_t i = use_reverse ? n - 1 - t : t;
        cft_array *args[3] = {in[0], h, cft_index(in[2], i)};
        rnn_body(NULL, 3, args, 2, r);
        h = r[0];
        acc = cft_add(acc, r[1]);
    }
    out[0] = cft_add(cft_sum(acc, NULL, 0, false), cft_sum(h, NULL, 0, false));
    return CFT_OK;
}

/* fori_loop body: (i, a, x) -> x + a * sin(x) * i */
static cft_status fori_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *i = cft_astype(in[0], CFT_F64);
    out[0] = cft_add(in[2], cft_mul(cft_mul(in[1], cft_sin(in[2])), cft_mul_s(i, 0.01)));
    return CFT_OK;
}
static cft_status fori_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_fn *b = cft_fn_new(fori_body, NULL, 3, 1);
    return cft_fori_loop(b, 1, 1, 0, 50, in, out);
}

/* while: (a, x, n) with cond n < limit; body (x, n) -> (x + a*cos(x), n + 1); limit per lane */
static cft_status w_cond(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout; /* consts: a, limit; carry: x, n */
    out[0] = cft_lt(in[3], in[1]);
    return CFT_OK;
}
static cft_status w_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(in[2], cft_mul(in[0], cft_cos(in[2])));
    out[1] = cft_add(in[3], cft_ones_like(in[3]));
    return CFT_OK;
}
static double w_ref(double a, double x, int limit) {
    for (int n = 0; n < limit; n++)
        x = x + a * cos(x);
    return x;
}
/* (a, limit, x0) -> final x, unbounded or bounded */
static bool bounded;
static cft_status w_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_fn *c = cft_fn_new(w_cond, NULL, 4, 1), *b = cft_fn_new(w_body, NULL, 4, 2);
    cft_array *args[4] = {in[0], in[1], in[2], cft_scalar(0, CFT_I32)}, *res[2];
    cft_status st = bounded ? cft_while_loop_bounded(c, b, 2, 2, 20, args, res)
                            : cft_while_loop(c, b, 2, 2, args, res);
    out[0] = res[0];
    return st;
}

/* cond branches over (x, a): true -> a*sin(x)*x, false -> cos(x)+a; sqrt branch for NaN safety */
static cft_status br_true(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul(cft_mul(in[1], cft_sin(in[0])), in[0]);
    return CFT_OK;
}
static cft_status br_false(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(cft_cos(in[0]), in[1]);
    return CFT_OK;
}
static cft_status br_sqrt(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sqrt(in[0]);
    return CFT_OK;
}
static cft_status br_zero(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_zeros_like(in[0]);
    return CFT_OK;
}
/* (x, a) -> sum(cond(sum(x) > 0, ...)) */
static cft_status cond_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_fn *t = cft_fn_new(br_true, NULL, 2, 1), *f = cft_fn_new(br_false, NULL, 2, 1);
    cft_array *pred = cft_gt(cft_sum(in[0], NULL, 0, false), cft_scalar(0, CFT_F64)), *r[1];
    cft_status st = cft_cond(pred, t, f, 2, in, r);
    out[0] = cft_sum(r[0], NULL, 0, false);
    return st;
}
static double cond_ref(const double *x, int n, double a) {
    double s = 0, r = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    for (int i = 0; i < n; i++)
        r += s > 0 ? a * sin(x[i]) * x[i] : cos(x[i]) + a;
    return r;
}
/* (x) -> cond(x > 0, sqrt, zero)(x): the unchosen branch never runs */
static cft_status sqrt_or_zero(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)env, (void)nin, (void)nout;
    return cft_cond(cft_gt(in[0], cft_zeros_like(in[0])), cft_fn_new(br_sqrt, NULL, 1, 1),
                    cft_fn_new(br_zero, NULL, 1, 1), 1, in, out);
}

/* a small net: (w1 [4,8], w2 [8,8], x [2,4]) -> sum(tanh(tanh(x w1) w2)^2) */
static cft_status net(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_matmul(in[2], in[0]));
    h = cft_tanh(cft_matmul(h, in[1]));
    out[0] = cft_sum(cft_square(h), NULL, 0, false);
    return CFT_OK;
}
static cft_fn *ckpt_inner;
static cft_status net_ckpt(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin;
    cft_array *r[1];
    cft_status st = cft_fn_call(ckpt_inner, in, r); /* the checkpointed net, then one more op */
    out[0] = cft_mul_s(r[0], 1.0);
    (void)nout;
    return st;
}

static cft_array *vec(uint64_t seed, int64_t n) {
    return cft_mul_s(cft_random_normal(cft_random_key(seed), CFT_F64, &n, 1), 0.5);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    body = cft_fn_new(rnn_body, NULL, 3, 2);
    cft_array *w = cft_scalar(0.8, CFT_F64), *h0 = vec(1, 3);
    int64_t T = 100;
    cft_array *xs = cft_reshape(
        cft_mul_s(cft_random_normal(cft_random_key(2), CFT_F64, (int64_t[]){T * 3}, 1), 0.3),
        (int64_t[]){T, 3}, 2);
    cft_array *in[3] = {w, h0, xs};
    cft_fn *Ls = cft_fn_new(loss_scan, NULL, 3, 1), *Lu = cft_fn_new(loss_unrolled, NULL, 3, 1);

    for (int rv = 0; rv < 2; rv++) {
        use_reverse = rv;
        TEST("scan%s: value equals the unrolled loop", rv ? " (reverse)" : "") {
            CHECK_ARRAY_CLOSE(cft_fn_call1(Ls, in), cft_fn_call1(Lu, in), 1e-13, 0);
        }
        TEST("scan%s: grad through 100 steps equals the unrolled loop's", rv ? " (reverse)" : "") {
            int an[3] = {0, 1, 2};
            cft_array *a[3], *b[3];
            CHECK_EQ(cft_fn_call(cft_grad(Ls, an, 3), in, a), CFT_OK);
            CHECK_EQ(cft_fn_call(cft_grad(Lu, an, 3), in, b), CFT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(a[k], b[k], 1e-12, 1e-13);
        }
    }
    use_reverse = false;
    TEST("the loop stays one scan equation in the grad's IR") {
        cft_aval av[3] = {cft_array_aval(w), cft_array_aval(h0), cft_array_aval(xs)};
        cft_ir *ir = cft_ir_cse(cft_ir_dce(cft_make_ir(cft_grad(Ls, (int[]){0}, 1), av)));
        int scans = 0;
        for (int k = 0; k < cft_ir_num_eqns(ir); k++)
            scans += !strcmp(cft_ir_eqn_prim(ir, k), "scan");
        CHECK(scans >= 1 && scans <= 3); /* primal + residuals, and the transposed scan */
        CHECK(cft_ir_num_eqns(ir) < 40);
    }
    TEST("grad against central finite differences (f64, h=1e-6)") {
        cft_array *g = cft_fn_call1(cft_grad(Ls, (int[]){0}, 1), in);
        double h = 1e-6;
        cft_array *ip[3] = {cft_scalar(0.8 + h, CFT_F64), h0, xs},
                  *im[3] = {cft_scalar(0.8 - h, CFT_F64), h0, xs};
        double fd = (cft_item(cft_fn_call1(Ls, ip)) - cft_item(cft_fn_call1(Ls, im))) / (2 * h);
        CHECK_CLOSE(cft_item(g), fd, 1e-7, 1e-8);
    }
    TEST("jvp of a scan equals the unrolled loop's") {
        cft_array *args[6] = {w, h0, xs, cft_scalar(1, CFT_F64), vec(3, 3), cft_zeros_like(xs)},
                  *a[2], *b[2];
        CHECK_EQ(cft_fn_call(cft_jvp(Ls), args, a), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_jvp(Lu), args, b), CFT_OK);
        CHECK_ARRAY_CLOSE(a[1], b[1], 1e-12, 1e-13);
    }
    TEST("vmap of a scan (batched xs / batched h0 / batched w) equals a loop") {
        int64_t B = 4;
        cft_array *W = cft_add_s(vec(4, B), 0.5),
                  *H = cft_reshape(vec(5, B * 3), (int64_t[]){B, 3}, 2);
        cft_array *X =
            cft_reshape(vec(6, B * 10 * 3), (int64_t[]){10, B, 3}, 3); /* batch at axis 1 */
        cft_array *x10 = cft_slice(xs, (int64_t[]){0, 0}, (int64_t[]){10, 3}, NULL);
        int axes[3][3] = {{CFT_NOT_BATCHED, CFT_NOT_BATCHED, 1},
                          {CFT_NOT_BATCHED, 0, CFT_NOT_BATCHED},
                          {0, CFT_NOT_BATCHED, CFT_NOT_BATCHED}};
        for (int c = 0; c < 3; c++) {
            cft_array *args[3] = {c == 2 ? W : w, c == 1 ? H : h0, c == 0 ? X : x10};
            cft_array *v = cft_fn_call1(cft_vmap(Ls, axes[c], NULL), args);
            for (int64_t b = 0; b < B; b++) {
                cft_array *one[3] = {c == 2 ? cft_index(W, b) : w, c == 1 ? cft_index(H, b) : h0,
                                     c == 0 ? cft_index(cft_moveaxis(X, 1, 0), b) : x10};
                CHECK_CLOSE(cft_item_at(v, b), cft_item(cft_fn_call1(Ls, one)), 1e-13, 1e-14);
            }
        }
    }
    TEST("vmap(grad) of a scan equals a loop of grads") {
        int64_t B = 3;
        cft_array *X = cft_reshape(vec(7, B * 10 * 3), (int64_t[]){B, 10, 3}, 3);
        cft_fn *g = cft_grad(Ls, (int[]){0}, 1);
        cft_array *args[3] = {w, h0, X};
        cft_array *v =
            cft_fn_call1(cft_vmap(g, (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0}, NULL), args);
        for (int64_t b = 0; b < B; b++) {
            cft_array *one[3] = {w, h0, cft_index(X, b)};
            CHECK_CLOSE(cft_item_at(v, b), cft_item(cft_fn_call1(g, one)), 1e-12, 1e-13);
        }
    }
    TEST("grad(grad) through a scan equals the unrolled loop's") {
        cft_array *a = cft_fn_call1(cft_grad(cft_grad(Ls, (int[]){0}, 1), (int[]){0}, 1), in);
        cft_array *b = cft_fn_call1(cft_grad(cft_grad(Lu, (int[]){0}, 1), (int[]){0}, 1), in);
        CHECK_ARRAY_CLOSE(a, b, 1e-11, 1e-12);
    }
    TEST("fori_loop: value and grad against the unrolled loop (in C)") {
        cft_array *args[2] = {cft_scalar(0.7, CFT_F64), vec(8, 4)};
        cft_array *y = cft_fn_call1(cft_fn_new(fori_loss, NULL, 2, 1), args);
        double a = 0.7;
        for (int k = 0; k < 4; k++) {
            double x = cft_item_at(args[1], k);
            for (int i = 0; i < 50; i++)
                x = x + a * sin(x) * i * 0.01;
            CHECK_CLOSE(cft_item_at(y, k), x, 1e-13, 0);
        }
        cft_fn *sumf = cft_grad(cft_fn_new(fori_loss, NULL, 2, 1), (int[]){0}, 1);
        (void)sumf; /* fori_loss returns a vector: differentiate its sum instead */
    }
    TEST("while_loop: value against a C loop; jvp against finite differences") {
        cft_fn *L = cft_fn_new(w_loss, NULL, 3, 1);
        cft_array *args[3] = {cft_scalar(0.3, CFT_F64), cft_scalar(7, CFT_I32),
                              cft_scalar(0.5, CFT_F64)};
        CHECK_CLOSE(cft_item(cft_fn_call1(L, args)), w_ref(0.3, 0.5, 7), 1e-14, 0);
        cft_array *jargs[6] = {args[0],
                               args[1],
                               args[2],
                               cft_scalar(1, CFT_F64),
                               cft_scalar(0, CFT_I32),
                               cft_scalar(0, CFT_F64)},
                  *o[2];
        CHECK_EQ(cft_fn_call(cft_jvp(L), jargs, o), CFT_OK);
        double h = 1e-6, fd = (w_ref(0.3 + h, 0.5, 7) - w_ref(0.3 - h, 0.5, 7)) / (2 * h);
        CHECK_CLOSE(cft_item(o[1]), fd, 1e-7, 1e-9);
    }
    TEST("vmap of a while_loop with per-lane trip counts equals a loop") {
        cft_fn *L = cft_fn_new(w_loss, NULL, 3, 1);
        int32_t lim[4] = {0, 3, 9, 5};
        double x0[4] = {0.1, -0.4, 0.9, 2.0};
        cft_array *args[3] = {cft_scalar(0.3, CFT_F64), cft_from_i32(lim, (int64_t[]){4}, 1),
                              cft_from_f64(x0, (int64_t[]){4}, 1)};
        cft_array *v = cft_fn_call1(cft_vmap(L, (int[]){CFT_NOT_BATCHED, 0, 0}, NULL), args);
        for (int b = 0; b < 4; b++)
            CHECK_CLOSE(cft_item_at(v, b), w_ref(0.3, x0[b], lim[b]), 1e-14, 0);
    }
    TEST("bounded while_loop: grad against finite differences; unbounded grad is an error") {
        cft_array *args[3] = {cft_scalar(0.3, CFT_F64), cft_scalar(7, CFT_I32),
                              cft_scalar(0.5, CFT_F64)};
        bounded = true;
        cft_fn *L = cft_fn_new(w_loss, NULL, 3, 1);
        CHECK_CLOSE(cft_item(cft_fn_call1(L, args)), w_ref(0.3, 0.5, 7), 1e-14, 0);
        cft_array *g = cft_fn_call1(cft_grad(L, (int[]){0, 2}, 2), args);
        double h = 1e-6, fd = (w_ref(0.3 + h, 0.5, 7) - w_ref(0.3 - h, 0.5, 7)) / (2 * h);
        CHECK_CLOSE(cft_item(g), fd, 1e-7, 1e-9);
        bounded = false;
        cft_fn *U = cft_fn_new(w_loss, NULL, 3, 1);
        cft_array *e = cft_fn_call1(cft_grad(U, (int[]){0}, 1), args);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "while") != NULL);
    }
    TEST("cond: values, grad and jvp against references and finite differences, both branches") {
        cft_fn *L = cft_fn_new(cond_loss, NULL, 2, 1);
        double xs2[2][3] = {{0.3, -0.1, 0.5}, {-0.3, 0.1, -0.5}};
        for (int c = 0; c < 2; c++) {
            cft_array *args[2] = {cft_from_f64(xs2[c], (int64_t[]){3}, 1),
                                  cft_scalar(0.7, CFT_F64)};
            CHECK_CLOSE(cft_item(cft_fn_call1(L, args)), cond_ref(xs2[c], 3, 0.7), 1e-14, 0);
            cft_array *g[2];
            CHECK_EQ(cft_fn_call(cft_grad(L, (int[]){0, 1}, 2), args, g), CFT_OK);
            for (int i = 0; i < 3; i++) {
                double xp[3], xm[3], h = 1e-6;
                memcpy(xp, xs2[c], sizeof xp), memcpy(xm, xs2[c], sizeof xm);
                xp[i] += h, xm[i] -= h;
                CHECK_CLOSE(cft_item_at(g[0], i),
                            (cond_ref(xp, 3, 0.7) - cond_ref(xm, 3, 0.7)) / (2 * h), 1e-7, 1e-9);
            }
            double fa = (cond_ref(xs2[c], 3, 0.7 + 1e-6) - cond_ref(xs2[c], 3, 0.7 - 1e-6)) / 2e-6;
            CHECK_CLOSE(cft_item(g[1]), fa, 1e-7, 1e-9);
            cft_array *jargs[4] = {args[0], args[1], cft_zeros_like(args[0]),
                                   cft_scalar(1, CFT_F64)},
                      *o[2];
            CHECK_EQ(cft_fn_call(cft_jvp(L), jargs, o), CFT_OK);
            CHECK_CLOSE(cft_item(o[1]), fa, 1e-7, 1e-9);
            cft_array *gg = cft_fn_call1(cft_grad(cft_grad(L, (int[]){1}, 1), (int[]){0}, 1), args);
            CHECK(!cft_failed(gg)); /* d2/da dx: a*... is linear in a: sin(x)+x cos(x) or 0 */
            for (int i = 0; i < 3; i++) {
                double x = xs2[c][i];
                CHECK_CLOSE(cft_item_at(gg, i), c == 0 ? sin(x) + x * cos(x) : 0, 1e-12, 1e-12);
            }
        }
    }
    TEST("cond under vmap: a batched predicate selects per lane; matches a loop (values and "
         "grads)") {
        cft_fn *L = cft_fn_new(cond_loss, NULL, 2, 1);
        double rows[9] = {0.3, -0.1, 0.5, -0.3, 0.1, -0.5, 1, 1, -3};
        cft_array *X = cft_from_f64(rows, (int64_t[]){3, 3}, 2), *a = cft_scalar(0.7, CFT_F64);
        cft_array *args[2] = {X, a};
        int ax[2] = {0, CFT_NOT_BATCHED};
        cft_array *v = cft_fn_call1(cft_vmap(L, ax, NULL), args);
        cft_array *vg = cft_fn_call1(cft_vmap(cft_grad(L, NULL, 0), ax, NULL), args);
        for (int b = 0; b < 3; b++) {
            CHECK_CLOSE(cft_item_at(v, b), cond_ref(rows + 3 * b, 3, 0.7), 1e-14, 0);
            cft_array *one[2] = {cft_index(X, b), a};
            CHECK_ARRAY_CLOSE(cft_index(vg, b), cft_fn_call1(cft_grad(L, NULL, 0), one), 1e-14, 0);
        }
        double as[3] = {0.1, 0.2, 0.3}; /* unbatched predicate, batched a: still one cond */
        cft_array *A = cft_from_f64(as, (int64_t[]){3}, 1), *x0 = cft_index(X, 0);
        cft_array *args2[2] = {x0, A};
        cft_array *v2 = cft_fn_call1(cft_vmap(L, (int[]){CFT_NOT_BATCHED, 0}, NULL), args2);
        for (int b = 0; b < 3; b++)
            CHECK_CLOSE(cft_item_at(v2, b), cond_ref(rows, 3, as[b]), 1e-14, 0);
    }
    TEST("cond runs only the chosen branch: grad of cond(x > 0, sqrt, 0) at 0 is 0") {
        cft_fn *f = cft_fn_new(sqrt_or_zero, NULL, 1, 1);
        cft_array *z = cft_scalar(0, CFT_F64), *four = cft_scalar(4, CFT_F64);
        CHECK_CLOSE(cft_item(cft_fn_call1(cft_grad(f, NULL, 0), &z)), 0, 0, 0);
        CHECK_CLOSE(cft_item(cft_fn_call1(cft_grad(f, NULL, 0), &four)), 0.25, 1e-15, 0);
    }
    TEST("switch: three branches, the index clamped to range") {
        cft_fn *br[3] = {cft_fn_new(br_true, NULL, 2, 1), cft_fn_new(br_false, NULL, 2, 1),
                         cft_fn_new(br_true, NULL, 2, 1)};
        cft_array *ops[2] = {cft_scalar(0.5, CFT_F64), cft_scalar(2, CFT_F64)}, *r[1];
        int32_t idx[3] = {-5, 1, 9};
        double want[3] = {2 * sin(0.5) * 0.5, cos(0.5) + 2, 2 * sin(0.5) * 0.5};
        for (int k = 0; k < 3; k++) {
            CHECK_EQ(cft_switch(cft_from_i32(&idx[k], NULL, 0), br, 3, 2, ops, r), CFT_OK);
            CHECK_CLOSE(cft_item(r[0]), want[k], 1e-15, 0);
        }
    }
    TEST("checkpoint: same gradients, fewer residuals (save nothing < save contractions < none)") {
        cft_array *args[3] = {cft_reshape(vec(20, 32), (int64_t[]){4, 8}, 2),
                              cft_reshape(vec(21, 64), (int64_t[]){8, 8}, 2),
                              cft_reshape(vec(22, 8), (int64_t[]){2, 4}, 2)};
        cft_fn *plain = cft_fn_new(net, NULL, 3, 1);
        cft_array *g0[2], *g1[2];
        CHECK_EQ(cft_fn_call(cft_grad(plain, (int[]){0, 1}, 2), args, g0), CFT_OK);
        FILE *devnull = fopen("/dev/null", "w");
        int n0 = cft_print_saved_residuals(plain, args, devnull), nres[2];
        for (int pol = 0; pol < 2; pol++) {
            ckpt_inner = cft_checkpoint(cft_fn_new(net, NULL, 3, 1),
                                        pol ? CFT_SAVE_CONTRACTIONS : CFT_SAVE_NOTHING);
            cft_fn *ck = cft_fn_new(net_ckpt, NULL, 3, 1);
            CHECK_EQ(cft_fn_call(cft_grad(ck, (int[]){0, 1}, 2), args, g1), CFT_OK);
            for (int k = 0; k < 2; k++)
                CHECK_ARRAY_CLOSE(g1[k], g0[k], 1e-13, 1e-14);
            nres[pol] = cft_print_saved_residuals(ck, args, pol ? stdout : devnull);
            /* vmap(grad) and jit through a checkpoint */
            cft_array *X = cft_reshape(vec(23, 24), (int64_t[]){3, 2, 4}, 3);
            cft_array *vargs[3] = {args[0], args[1], X};
            cft_array *v = cft_fn_call1(
                cft_vmap(cft_grad(ck, NULL, 0), (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0}, NULL),
                vargs);
            cft_array *one[3] = {args[0], args[1], cft_index(X, 2)};
            CHECK_ARRAY_CLOSE(cft_index(v, 2), cft_fn_call1(cft_grad(plain, NULL, 0), one), 1e-13,
                              1e-14);
            cft_fn *jg = cft_jit(cft_grad(ck, NULL, 0));
            cft_array *jr = cft_fn_call1(jg, args);
            jr = cft_fn_call1(jg, args);
            CHECK_ARRAY_CLOSE(jr, g0[0], 1e-12, 1e-13);
        }
        fclose(devnull);
        CHECK_MSG(nres[0] < nres[1] && nres[1] < n0,
                  "residuals: nothing %d, contractions %d, plain %d", nres[0], nres[1], n0);
    }
    TEST("errors: wrong xs length, carry aval mismatch") {
        cft_array *r[2];
        cft_array *bad[3] = {w, h0, cft_zeros(CFT_F64, (int64_t[]){5, 4}, 2)};
        CHECK(cft_scan(body, 1, 1, 5, false, bad, r) != CFT_OK);
        CHECK(strstr(cft_error_message(r[0]), "scan") != NULL);
        cft_array *bad2[3] = {w, h0, cft_zeros(CFT_F64, (int64_t[]){7, 3}, 2)};
        CHECK(cft_scan(body, 1, 1, 5, false, bad2, r) != CFT_OK);
    }
    return check_summary();
}
