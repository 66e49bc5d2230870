/* test_transforms.c: composition of the transforms of fn.h, in f64 against
 * analytic derivatives, loops and finite differences: hessian of known
 * functions; vmap(grad) of an MLP loss vs a loop; grad(grad) of scalar
 * functions; jacfwd(jacrev) = jacrev(jacfwd) = jacrev(jacrev) = hessian;
 * vmap(vmap) vs a double loop; vmap(jacrev) vs a loop; jacrev vs jacfwd vs
 * jvp on a non-square map; value_and_grad with has_aux and several argnums;
 * a vjp pullback reused and vmapped; in_axes / out_axes at non-zero and
 * negative positions and CFT_NOT_BATCHED; symbolic-zero edges (identity,
 * constant, unused inputs, duplicated outputs, empty batches); and a
 * mini-MAML (grad of a vmap over tasks of two inner SGD steps that call
 * cft_grad) against central finite differences.
 *
 * Tolerances: everything is f64. Results that are the same arithmetic in a
 * different order (batched vs looped BLAS, transposed vs forward rules) are
 * compared at rtol 1e-12; analytic formulas at 1e-12 to 1e-11 (a few dozen
 * ulps of O(1) values); finite differences as stated where used. */
#include <math.h>
#include <string.h>

#include "check.h"

#define UNUSED_ARGS (void)env, (void)nin, (void)nout
#define FN(name)                                                                                   \
    static cft_status name(void *env, int nin, cft_array *const *in, int nout, cft_array **out)

static cft_array *v64(const double *v, int64_t n) {
    return cft_from_f64(v, &n, 1);
}
static cft_array *m64(const double *v, int64_t r, int64_t c) {
    return cft_from_f64(v, (int64_t[]){r, c}, 2);
}
static cft_array *s64(double v) {
    return cft_scalar(v, CFT_F64);
}
static cft_array *randn(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F64, shape, nd);
}
static cft_array *at(cft_array *x, int64_t i) {
    return cft_index(x, i);
}

/* ---------------- functions ---------------- */

/* sum(x^3) + x0 * x1 */
FN(cubic) {
    UNUSED_ARGS;
    cft_array *x = in[0];
    out[0] =
        cft_add(cft_sum(cft_mul(cft_square(x), x), NULL, 0, false), cft_mul(at(x, 0), at(x, 1)));
    return CFT_OK;
}
FN(lse) {
    UNUSED_ARGS;
    out[0] = cft_logsumexp(in[0], NULL, 0, false);
    return CFT_OK;
}
FN(sum_tanh) {
    UNUSED_ARGS;
    out[0] = cft_sum(cft_tanh(in[0]), NULL, 0, false);
    return CFT_OK;
}
FN(f_sin) {
    UNUSED_ARGS;
    out[0] = cft_sin(in[0]);
    return CFT_OK;
}
FN(f_cube) {
    UNUSED_ARGS;
    out[0] = cft_mul(cft_square(in[0]), in[0]);
    return CFT_OK;
}
FN(f_tanh) {
    UNUSED_ARGS;
    out[0] = cft_tanh(in[0]);
    return CFT_OK;
}

/* a tiny MLP's loss on one example:
 * (sum(tanh(x @ w1 + b1) * w2) + b2 - y)^2, w1[4,8] b1[8] w2[8] b2[] x[4] y[] */
FN(mlp_loss) {
    UNUSED_ARGS;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[4], in[0]), in[1]));
    cft_array *pred = cft_add(cft_sum(cft_mul(h, in[2]), NULL, 0, false), in[3]);
    out[0] = cft_square(cft_sub(pred, in[5]));
    return CFT_OK;
}

/* R^3 -> R^2: (x0 x1 x2, sin(x0) + x2^2) */
FN(nonsquare) {
    UNUSED_ARGS;
    cft_array *x = in[0];
    cft_array *a = cft_mul(cft_mul(at(x, 0), at(x, 1)), at(x, 2));
    cft_array *b = cft_add(cft_sin(at(x, 0)), cft_square(at(x, 2)));
    out[0] = cft_stack((cft_array *[]){a, b}, 2, 0);
    return CFT_OK;
}
static void nonsquare_jac(const double *x, double J[2][3]) {
    J[0][0] = x[1] * x[2], J[0][1] = x[0] * x[2], J[0][2] = x[0] * x[1];
    J[1][0] = cos(x[0]), J[1][1] = 0, J[1][2] = 2 * x[2];
}

/* (x[n], y[n]) -> sum(x * y) + sin(x0) * y1 */
FN(pair) {
    UNUSED_ARGS;
    out[0] = cft_add(cft_sum(cft_mul(in[0], in[1]), NULL, 0, false),
                     cft_mul(cft_sin(at(in[0], 0)), at(in[1], 1)));
    return CFT_OK;
}

/* (a[3], b[3], c[]) -> (loss = sum(a*b)*c + c^2, aux1 = a+b, aux2 = c*2) */
FN(with_aux) {
    UNUSED_ARGS;
    cft_array *a = in[0], *b = in[1], *c = in[2];
    out[0] = cft_add(cft_mul(cft_sum(cft_mul(a, b), NULL, 0, false), c), cft_square(c));
    out[1] = cft_add(a, b);
    out[2] = cft_mul_s(c, 2);
    return CFT_OK;
}

/* two outputs: (x * w summed over x's axis -> [2], sum(w)); x[3], w[3,2] */
FN(xw) {
    UNUSED_ARGS;
    out[0] = cft_matmul(in[0], in[1]);
    out[1] = cft_sum(in[1], NULL, 0, false);
    return CFT_OK;
}

/* two outputs for vjp: (sin(x) * y, sum(x^2)) with x[3], y[3] */
FN(two_outs) {
    UNUSED_ARGS;
    out[0] = cft_mul(cft_sin(in[0]), in[1]);
    out[1] = cft_sum(cft_square(in[0]), NULL, 0, false);
    return CFT_OK;
}

/* ---- mini-MAML ---- */
#define ALPHA 0.3
/* inner loss: mean((tanh(x @ w) - y)^2), w[d] x[n,d] y[n] */
FN(inner_loss) {
    UNUSED_ARGS;
    cft_array *pred = cft_tanh(cft_matmul(in[1], in[0]));
    out[0] = cft_mean(cft_square(cft_sub(pred, in[2])), NULL, 0, false);
    return CFT_OK;
}
/* one task: two SGD steps on (x, y) with grad(inner_loss), then the loss
 * on the query set (xq, yq) */
FN(task_loss) {
    UNUSED_ARGS;
    cft_fn *g = cft_grad(cft_fn_new(inner_loss, NULL, 3, 1), NULL, 0);
    cft_array *w = in[0];
    for (int step = 0; step < 2; step++) {
        cft_array *gw = cft_fn_call1(g, (cft_array *[]){w, in[1], in[2]});
        w = cft_sub(w, cft_mul_s(gw, ALPHA));
    }
    out[0] = cft_fn_call1(cft_fn_new(inner_loss, NULL, 3, 1), (cft_array *[]){w, in[3], in[4]});
    return CFT_OK;
}
/* meta loss: mean over tasks of task_loss, tasks vmapped */
FN(meta_loss) {
    UNUSED_ARGS;
    cft_fn *per_task =
        cft_vmap(cft_fn_new(task_loss, NULL, 5, 1), (int[]){CFT_NOT_BATCHED, 0, 0, 0, 0}, NULL);
    out[0] = cft_mean(cft_fn_call1(per_task, in), NULL, 0, false);
    return CFT_OK;
}

/* ---- edge cases ---- */
FN(ab2) { /* (a, b) -> sum(a * b^2) */
    UNUSED_ARGS;
    out[0] = cft_sum(cft_mul(in[0], cft_square(in[1])), NULL, 0, false);
    return CFT_OK;
}
FN(ident) {
    UNUSED_ARGS;
    out[0] = in[0];
    return CFT_OK;
}
FN(constant) { /* ignores its input */
    UNUSED_ARGS;
    (void)in;
    out[0] = cft_scalar(3, CFT_F64);
    return CFT_OK;
}
FN(first_only) { /* (x, y) -> sum(sin x): y unused */
    UNUSED_ARGS;
    out[0] = cft_sum(cft_sin(in[0]), NULL, 0, false);
    return CFT_OK;
}
FN(times_f64) { /* an f32 input promoted to f64 inside */
    UNUSED_ARGS;
    out[0] = cft_sum(cft_mul(in[0], cft_scalar(2, CFT_F64)), NULL, 0, false);
    return CFT_OK;
}
FN(int_part) { /* sum(x * float(int(x))): the int part has zero derivative */
    UNUSED_ARGS;
    out[0] =
        cft_sum(cft_mul(in[0], cft_astype(cft_astype(in[0], CFT_I32), CFT_F64)), NULL, 0, false);
    return CFT_OK;
}
FN(sum_max) {
    UNUSED_ARGS;
    out[0] = cft_sum(cft_maximum(in[0], in[1]), NULL, 0, false);
    return CFT_OK;
}
FN(sum_sq) {
    UNUSED_ARGS;
    out[0] = cft_sum(cft_square(in[0]), NULL, 0, false);
    return CFT_OK;
}
FN(dup) { /* (x, x) */
    UNUSED_ARGS;
    out[0] = in[0];
    out[1] = in[0];
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    const double tol = 1e-12;

    /* ---------------- hessians ---------------- */

    TEST("hessian of sum(x^3) + x0 x1 is diag(6x) + E01 + E10") {
        double xv[3] = {0.5, -1.25, 2.0};
        cft_array *x = v64(xv, 3);
        cft_array *H = cft_fn_call1(cft_hessian(cft_fn_new(cubic, NULL, 1, 1), 0), &x);
        double want[9] = {0};
        for (int i = 0; i < 3; i++)
            want[i * 3 + i] = 6 * xv[i];
        want[1] = want[3] = 1;
        CHECK_ARRAY_CLOSE(H, m64(want, 3, 3), tol, tol);
    }

    TEST("hessian of log-sum-exp is diag(p) - p p^T") {
        double xv[4] = {0.3, -1.0, 2.0, 0.7};
        cft_array *x = v64(xv, 4);
        cft_array *H = cft_fn_call1(cft_hessian(cft_fn_new(lse, NULL, 1, 1), 0), &x);
        double p[4], z = 0, want[16];
        for (int i = 0; i < 4; i++)
            z += exp(xv[i]);
        for (int i = 0; i < 4; i++)
            p[i] = exp(xv[i]) / z;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                want[i * 4 + j] = (i == j ? p[i] : 0) - p[i] * p[j];
        CHECK_ARRAY_CLOSE(H, m64(want, 4, 4), tol, tol);
        /* the gradient is p */
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_grad(cft_fn_new(lse, NULL, 1, 1), NULL, 0), &x),
                          v64(p, 4), tol, tol);
    }

    TEST("hessian of a matrix input has shape in + in") {
        double wv[4] = {0.1, -0.4, 0.9, 1.6};
        cft_array *W = m64(wv, 2, 2);
        cft_array *H = cft_fn_call1(cft_hessian(cft_fn_new(sum_tanh, NULL, 1, 1), 0), &W);
        CHECK_EQ(cft_array_ndim(H), 4);
        double want[16] = {0};
        for (int i = 0; i < 4; i++) {
            double t = tanh(wv[i]);
            want[i * 4 + i] = -2 * t * (1 - t * t);
        }
        CHECK_ARRAY_CLOSE(H, cft_from_f64(want, (int64_t[]){2, 2, 2, 2}, 4), tol, tol);
    }

    TEST("hessian with respect to a later argument, and mixed partials") {
        double av[3] = {1.5, -2, 0.5}, bv[3] = {0.3, 1.2, -0.8};
        cft_array *a = v64(av, 3), *b = v64(bv, 3);
        cft_fn *f = cft_fn_new(ab2, NULL, 2, 1);
        double hb[9] = {0}, hab[9] = {0};
        for (int i = 0; i < 3; i++)
            hb[i * 4] = 2 * av[i], hab[i * 4] = 2 * bv[i];
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_hessian(f, 1), (cft_array *[]){a, b}), m64(hb, 3, 3),
                          tol, tol);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_hessian(f, 0), (cft_array *[]){a, b}),
                          cft_zeros(CFT_F64, (int64_t[]){3, 3}, 2), 0, 0);
        /* d/da of (d/db f) = diag(2b), via jacfwd of grad and jacrev of grad */
        cft_fn *gb = cft_grad(f, (int[]){1}, 1);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_jacfwd(gb, NULL, 0), (cft_array *[]){a, b}),
                          m64(hab, 3, 3), tol, tol);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_jacrev(gb, NULL, 0), (cft_array *[]){a, b}),
                          m64(hab, 3, 3), tol, tol);
        /* grad with two argnums */
        cft_array *g[2];
        cft_fn *gg = cft_grad(cft_fn_new(ab2, NULL, 2, 1), (int[]){0, 1}, 2);
        CHECK_EQ(cft_fn_call(gg, (cft_array *[]){a, b}, g), CFT_OK);
        CHECK_ARRAY_CLOSE(g[0], cft_square(b), tol, tol);
        CHECK_ARRAY_CLOSE(g[1], cft_mul_s(cft_mul(a, b), 2), tol, tol);
    }

    TEST("jacfwd(jacrev f) = jacrev(jacfwd f) = jacrev(jacrev f) = jacfwd(jacfwd f) = hessian") {
        cft_fn *fs[2] = {cft_fn_new(lse, NULL, 1, 1), cft_fn_new(cubic, NULL, 1, 1)};
        cft_array *x = v64((double[]){0.2, -0.7, 1.1}, 3);
        for (int k = 0; k < 2; k++) {
            cft_fn *f = fs[k];
            cft_array *h = cft_fn_call1(cft_hessian(f, 0), &x);
            cft_array *fr = cft_fn_call1(cft_jacfwd(cft_jacrev(f, NULL, 0), NULL, 0), &x);
            cft_array *rf = cft_fn_call1(cft_jacrev(cft_jacfwd(f, NULL, 0), NULL, 0), &x);
            cft_array *rr = cft_fn_call1(cft_jacrev(cft_jacrev(f, NULL, 0), NULL, 0), &x);
            cft_array *ff = cft_fn_call1(cft_jacfwd(cft_jacfwd(f, NULL, 0), NULL, 0), &x);
            CHECK_ARRAY_CLOSE(fr, h, tol, tol);
            CHECK_ARRAY_CLOSE(rf, h, tol, tol);
            CHECK_ARRAY_CLOSE(rr, h, tol, tol);
            CHECK_ARRAY_CLOSE(ff, h, tol, tol);
            /* symmetric */
            CHECK_ARRAY_CLOSE(cft_transpose(h, NULL), h, tol, tol);
        }
    }

    /* ---------------- grad(grad) ---------------- */

    TEST("grad(grad f) of sin, x^3 and tanh against analytic second derivatives") {
        cft_fn *f[3] = {cft_fn_new(f_sin, NULL, 1, 1), cft_fn_new(f_cube, NULL, 1, 1),
                        cft_fn_new(f_tanh, NULL, 1, 1)};
        double xs[5] = {-2.0, -0.5, 0.0, 0.3, 1.7};
        for (int k = 0; k < 3; k++) {
            cft_fn *d1 = cft_grad(f[k], NULL, 0), *d2 = cft_grad(d1, NULL, 0),
                   *d3 = cft_grad(d2, NULL, 0);
            for (int i = 0; i < 5; i++) {
                double x = xs[i], t = tanh(x);
                double w1[3] = {cos(x), 3 * x * x, 1 - t * t};
                double w2[3] = {-sin(x), 6 * x, -2 * t * (1 - t * t)};
                double w3[3] = {-cos(x), 6, (1 - t * t) * (6 * t * t - 2)};
                cft_array *xa = s64(x);
                CHECK_CLOSE(cft_item(cft_fn_call1(d1, &xa)), w1[k], tol, tol);
                CHECK_CLOSE(cft_item(cft_fn_call1(d2, &xa)), w2[k], tol, tol);
                CHECK_CLOSE(cft_item(cft_fn_call1(d3, &xa)), w3[k], tol, tol);
            }
            /* vmap of the second derivative over the points at once */
            cft_array *xv = v64(xs, 5), *d2v = cft_fn_call1(cft_vmap(d2, NULL, NULL), &xv);
            for (int i = 0; i < 5; i++) {
                cft_array *xa = s64(xs[i]);
                CHECK_CLOSE(cft_item_at(d2v, i), cft_item(cft_fn_call1(d2, &xa)), tol, tol);
            }
        }
    }

    /* ---------------- vmap(grad) of an MLP loss ---------------- */

    TEST("vmap(grad) of an MLP loss (params unbatched, x and y batched) equals a loop") {
        enum { B = 6 };
        cft_array *w1 = randn(10, (int64_t[]){4, 8}, 2), *b1 = randn(11, (int64_t[]){8}, 1);
        cft_array *w2 = randn(12, (int64_t[]){8}, 1), *b2 = randn(13, NULL, 0);
        cft_array *X = randn(14, (int64_t[]){B, 4}, 2), *Y = randn(15, (int64_t[]){B}, 1);
        cft_fn *loss = cft_fn_new(mlp_loss, NULL, 6, 1);
        cft_fn *g = cft_grad(loss, (int[]){0, 1, 2, 3}, 4);
        int nb = CFT_NOT_BATCHED;
        cft_fn *psg = cft_vmap(g, (int[]){nb, nb, nb, nb, 0, 0}, NULL);
        cft_array *batched[4], *one[4];
        CHECK_EQ(cft_fn_call(psg, (cft_array *[]){w1, b1, w2, b2, X, Y}, batched), CFT_OK);
        CHECK_EQ(cft_array_dim(batched[0], 0), B);
        CHECK_EQ(cft_array_ndim(batched[0]), 3);
        CHECK_EQ(cft_array_ndim(batched[3]), 1);
        for (int i = 0; i < B; i++) {
            CHECK_EQ(cft_fn_call(g, (cft_array *[]){w1, b1, w2, b2, at(X, i), at(Y, i)}, one),
                     CFT_OK);
            for (int k = 0; k < 4; k++)
                CHECK_ARRAY_CLOSE(at(batched[k], i), one[k], tol, 1e-14);
        }
        /* the mean of the per-example grads is the grad of the mean loss */
        cft_array *gsum = cft_sum(batched[0], (int[]){0}, 1, false);
        cft_array *acc = cft_zeros(CFT_F64, (int64_t[]){4, 8}, 2);
        for (int i = 0; i < B; i++) {
            cft_fn_call(g, (cft_array *[]){w1, b1, w2, b2, at(X, i), at(Y, i)}, one);
            acc = cft_add(acc, one[0]);
        }
        CHECK_ARRAY_CLOSE(gsum, acc, tol, 1e-14);
    }

    /* ---------------- vmap(vmap) ---------------- */

    TEST("vmap(vmap f) over two axes equals a double loop") {
        enum { I = 3, J = 4, N = 5 };
        cft_array *X = randn(20, (int64_t[]){I, N}, 2), *Y = randn(21, (int64_t[]){J, N}, 2);
        cft_fn *f = cft_fn_new(pair, NULL, 2, 1);
        cft_fn *inner = cft_vmap(f, (int[]){CFT_NOT_BATCHED, 0}, NULL);     /* x, Y -> [J] */
        cft_fn *outer = cft_vmap(inner, (int[]){0, CFT_NOT_BATCHED}, NULL); /* X, Y -> [I,J] */
        cft_array *R = cft_fn_call1(outer, (cft_array *[]){X, Y});
        CHECK_EQ(cft_array_dim(R, 0), I);
        CHECK_EQ(cft_array_dim(R, 1), J);
        for (int i = 0; i < I; i++)
            for (int j = 0; j < J; j++)
                CHECK_CLOSE(cft_item_at(R, i * J + j),
                            cft_item(cft_fn_call1(f, (cft_array *[]){at(X, i), at(Y, j)})), tol,
                            1e-14);
        /* both batched along the same axis at both levels: [I,J,N] x [I,J,N] */
        cft_array *A = randn(22, (int64_t[]){I, J, N}, 3), *Bm = randn(23, (int64_t[]){I, J, N}, 3);
        cft_array *R2 =
            cft_fn_call1(cft_vmap(cft_vmap(f, NULL, NULL), NULL, NULL), (cft_array *[]){A, Bm});
        for (int i = 0; i < I; i++)
            for (int j = 0; j < J; j++)
                CHECK_CLOSE(
                    cft_item_at(R2, i * J + j),
                    cft_item(cft_fn_call1(f, (cft_array *[]){at(at(A, i), j), at(at(Bm, i), j)})),
                    tol, 1e-14);
        /* the inner batch axis taken from axis 1 of the per-example value */
        cft_array *At = cft_moveaxis(A, 1, 2); /* [I,N,J] */
        cft_array *R3 = cft_fn_call1(cft_vmap(cft_vmap(f, (int[]){1, 0}, NULL), NULL, NULL),
                                     (cft_array *[]){At, Bm});
        CHECK_ARRAY_CLOSE(R3, R2, tol, 1e-14);
    }

    /* ---------------- Jacobians ---------------- */

    TEST("jacrev and jacfwd of a non-square map R^3 -> R^2, and jvp") {
        double xv[3] = {0.4, -1.3, 2.2}, J[2][3];
        nonsquare_jac(xv, J);
        cft_array *x = v64(xv, 3), *want = m64(&J[0][0], 2, 3);
        cft_fn *f = cft_fn_new(nonsquare, NULL, 1, 1);
        cft_array *jr = cft_fn_call1(cft_jacrev(f, NULL, 0), &x);
        cft_array *jf = cft_fn_call1(cft_jacfwd(f, NULL, 0), &x);
        CHECK_ARRAY_CLOSE(jr, want, tol, tol);
        CHECK_ARRAY_CLOSE(jf, want, tol, tol);
        /* jvp: J v */
        double vv[3] = {1.0, -2.0, 0.5};
        cft_array *io[2];
        CHECK_EQ(cft_fn_call(cft_jvp(f), (cft_array *[]){x, v64(vv, 3)}, io), CFT_OK);
        CHECK_ARRAY_CLOSE(io[0], cft_fn_call1(f, &x), 0, 0);
        for (int i = 0; i < 2; i++)
            CHECK_CLOSE(cft_item_at(io[1], i), J[i][0] * vv[0] + J[i][1] * vv[1] + J[i][2] * vv[2],
                        tol, tol);
        /* vjp: u^T J */
        cft_array *y[1];
        cft_fn *pb;
        CHECK_EQ(cft_vjp(f, &x, y, &pb), CFT_OK);
        double u[2] = {0.7, -1.1};
        cft_array *ct = cft_fn_call1(pb, (cft_array *[]){v64(u, 2)});
        for (int j = 0; j < 3; j++)
            CHECK_CLOSE(cft_item_at(ct, j), u[0] * J[0][j] + u[1] * J[1][j], tol, tol);
    }

    TEST("jacobians with several argnums and outputs") {
        /* xw: out0 = x @ w [2], out1 = sum(w) []; argnums (0, 1) */
        cft_array *x = v64((double[]){1, 2, 3}, 3);
        cft_array *w = m64((double[]){0.5, -1, 2, 0.25, -3, 1.5}, 3, 2);
        cft_fn *f = cft_fn_new(xw, NULL, 2, 2);
        cft_array *jr[4], *jf[4];
        CHECK_EQ(cft_fn_call(cft_jacrev(f, (int[]){0, 1}, 2), (cft_array *[]){x, w}, jr), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_jacfwd(f, (int[]){0, 1}, 2), (cft_array *[]){x, w}, jf), CFT_OK);
        /* d out0 / dx = w^T [2,3]; d out0 / dw [2,3,2] = delta(j,k) x_i;
         * d out1 / dx = 0 [3]; d out1 / dw = ones [3,2] */
        CHECK_ARRAY_CLOSE(jr[0], cft_transpose(w, NULL), 0, 0);
        double d0w[12] = {0};
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < 3; i++)
                d0w[j * 6 + i * 2 + j] = i + 1;
        CHECK_ARRAY_CLOSE(jr[1], cft_from_f64(d0w, (int64_t[]){2, 3, 2}, 3), 0, 0);
        CHECK_ARRAY_CLOSE(jr[2], cft_zeros(CFT_F64, (int64_t[]){3}, 1), 0, 0);
        CHECK_ARRAY_CLOSE(jr[3], cft_ones(CFT_F64, (int64_t[]){3, 2}, 2), 0, 0);
        for (int k = 0; k < 4; k++)
            CHECK_ARRAY_CLOSE(jf[k], jr[k], tol, tol);
    }

    TEST("vmap(jacrev f) equals a loop of jacrev") {
        enum { B = 5 };
        cft_array *X = randn(30, (int64_t[]){B, 3}, 2);
        cft_fn *jr = cft_jacrev(cft_fn_new(nonsquare, NULL, 1, 1), NULL, 0);
        cft_array *Jb = cft_fn_call1(cft_vmap(jr, NULL, NULL), &X);
        CHECK_EQ(cft_array_ndim(Jb), 3);
        CHECK_EQ(cft_array_dim(Jb, 0), B);
        for (int b = 0; b < B; b++) {
            cft_array *xb = at(X, b);
            CHECK_ARRAY_CLOSE(at(Jb, b), cft_fn_call1(jr, &xb), tol, tol);
            double xv[3], J[2][3];
            cft_copy_to(xb, CFT_F64, xv);
            nonsquare_jac(xv, J);
            CHECK_ARRAY_CLOSE(at(Jb, b), m64(&J[0][0], 2, 3), tol, tol);
        }
        /* and vmap(jacfwd), vmap(hessian) */
        cft_array *Jf = cft_fn_call1(
            cft_vmap(cft_jacfwd(cft_fn_new(nonsquare, NULL, 1, 1), NULL, 0), NULL, NULL), &X);
        CHECK_ARRAY_CLOSE(Jf, Jb, tol, tol);
        cft_fn *h = cft_hessian(cft_fn_new(lse, NULL, 1, 1), 0);
        cft_array *Hb = cft_fn_call1(cft_vmap(h, NULL, NULL), &X);
        for (int b = 0; b < B; b++) {
            cft_array *xb = at(X, b);
            CHECK_ARRAY_CLOSE(at(Hb, b), cft_fn_call1(h, &xb), tol, tol);
        }
    }

    /* ---------------- value_and_grad ---------------- */

    TEST("value_and_grad with has_aux and several argnums") {
        double av[3] = {1, 2, 3}, bv[3] = {-1, 0.5, 4}, c = 1.5;
        cft_array *a = v64(av, 3), *b = v64(bv, 3), *cs = s64(c);
        cft_fn *f = cft_fn_new(with_aux, NULL, 3, 3);
        cft_fn *vg = cft_value_and_grad(f, (int[]){0, 2}, 2, true);
        CHECK_EQ(cft_fn_nout(vg), 3 + 2);
        CHECK_EQ(cft_fn_nin(vg), 3);
        cft_array *o[5];
        CHECK_EQ(cft_fn_call(vg, (cft_array *[]){a, b, cs}, o), CFT_OK);
        double ab = 0;
        for (int i = 0; i < 3; i++)
            ab += av[i] * bv[i];
        CHECK_CLOSE(cft_item(o[0]), ab * c + c * c, tol, 0);          /* loss */
        CHECK_ARRAY_CLOSE(o[1], v64((double[]){0, 2.5, 7}, 3), 0, 0); /* aux1 = a+b */
        CHECK_CLOSE(cft_item(o[2]), 2 * c, 0, 0);                     /* aux2 */
        CHECK_ARRAY_CLOSE(o[3], cft_mul_s(b, c), tol, 0);             /* dL/da = b c */
        CHECK_CLOSE(cft_item(o[4]), ab + 2 * c, tol, 0);              /* dL/dc */
        /* negative argnums, and the plain grad of the same (loss only) */
        cft_array *o4[4];
        CHECK_EQ(
            cft_fn_call(cft_value_and_grad(f, (int[]){-2}, 1, true), (cft_array *[]){a, b, cs}, o4),
            CFT_OK);
        CHECK_ARRAY_CLOSE(o4[3], cft_mul_s(a, c), tol, 0); /* dL/db = a c */
        /* without aux: value and grads */
        cft_fn *vg1 = cft_value_and_grad(cft_fn_new(lse, NULL, 1, 1), NULL, 0, false);
        cft_array *o2[2];
        CHECK_EQ(cft_fn_call(vg1, &a, o2), CFT_OK);
        CHECK_CLOSE(cft_item(o2[0]), log(exp(1) + exp(2) + exp(3)), tol, 0);
        CHECK_ARRAY_CLOSE(o2[1], cft_softmax(a, 0), tol, tol);
        /* vmap of value_and_grad with aux over a batch of a */
        cft_array *A = randn(40, (int64_t[]){4, 3}, 2), *ob[5];
        int nb = CFT_NOT_BATCHED;
        CHECK_EQ(cft_fn_call(cft_vmap(vg, (int[]){0, nb, nb}, NULL), (cft_array *[]){A, b, cs}, ob),
                 CFT_OK);
        for (int i = 0; i < 4; i++) {
            CHECK_EQ(cft_fn_call(vg, (cft_array *[]){at(A, i), b, cs}, o), CFT_OK);
            for (int k = 0; k < 5; k++)
                CHECK_ARRAY_CLOSE(at(ob[k], i), o[k], tol, 1e-14);
        }
    }

    /* ---------------- vjp pullbacks ---------------- */

    TEST("a vjp pullback is reusable and itself transformable") {
        cft_array *x = v64((double[]){0.3, -1.2, 2.0}, 3), *y = v64((double[]){1.5, 0.5, -2.0}, 3);
        cft_fn *f = cft_fn_new(two_outs, NULL, 2, 2);
        cft_array *outs[2];
        cft_fn *pb;
        CHECK_EQ(cft_vjp(f, (cft_array *[]){x, y}, outs, &pb), CFT_OK);
        CHECK(pb != NULL);
        CHECK_EQ(cft_fn_nin(pb), 2);
        CHECK_EQ(cft_fn_nout(pb), 2);
        CHECK_ARRAY_CLOSE(outs[0], cft_mul(cft_sin(x), y), 0, 0);
        double xv[3], yv[3];
        cft_copy_to(x, CFT_F64, xv);
        cft_copy_to(y, CFT_F64, yv);
        /* ct = (u, s): dx = u cos(x) y + 2 s x, dy = u sin(x) */
        double us[2][3] = {{1, 0, 0}, {0.5, -1, 2}}, ss[2] = {0, -0.75};
        for (int r = 0; r < 2; r++) {
            cft_array *ct[2];
            CHECK_EQ(cft_fn_call(pb, (cft_array *[]){v64(us[r], 3), s64(ss[r])}, ct), CFT_OK);
            for (int i = 0; i < 3; i++) {
                CHECK_CLOSE(cft_item_at(ct[0], i),
                            us[r][i] * cos(xv[i]) * yv[i] + 2 * ss[r] * xv[i], tol, tol);
                CHECK_CLOSE(cft_item_at(ct[1], i), us[r][i] * sin(xv[i]), tol, tol);
            }
        }
        /* vmapped over a batch of cotangents (s unbatched): rows of the above */
        cft_array *U = m64(&us[0][0], 2, 3), *ctb[2];
        CHECK_EQ(cft_fn_call(cft_vmap(pb, (int[]){0, CFT_NOT_BATCHED}, NULL),
                             (cft_array *[]){U, s64(ss[1])}, ctb),
                 CFT_OK);
        for (int r = 0; r < 2; r++) {
            cft_array *ct[2];
            cft_fn_call(pb, (cft_array *[]){v64(us[r], 3), s64(ss[1])}, ct);
            CHECK_ARRAY_CLOSE(at(ctb[0], r), ct[0], tol, tol);
            CHECK_ARRAY_CLOSE(at(ctb[1], r), ct[1], tol, tol);
        }
        /* linear: pb(u1 + u2) = pb(u1) + pb(u2); and jvp of pb is pb */
        cft_array *c1[2], *c2[2], *c12[2];
        cft_array *u1 = v64(us[0], 3), *u2 = v64(us[1], 3), *z = s64(0);
        cft_fn_call(pb, (cft_array *[]){u1, z}, c1);
        cft_fn_call(pb, (cft_array *[]){u2, z}, c2);
        cft_fn_call(pb, (cft_array *[]){cft_add(u1, u2), z}, c12);
        CHECK_ARRAY_CLOSE(c12[0], cft_add(c1[0], c2[0]), tol, tol);
        cft_array *jo[4];
        CHECK_EQ(cft_fn_call(cft_jvp(pb), (cft_array *[]){u1, z, u2, z}, jo), CFT_OK);
        CHECK_ARRAY_CLOSE(jo[2], c2[0], tol, tol);
        CHECK_ARRAY_CLOSE(jo[3], c2[1], tol, tol);
        /* the pullback of grad: vjp of a grad function gives Hessian rows */
        cft_fn *g = cft_grad(cft_fn_new(lse, NULL, 1, 1), NULL, 0);
        cft_array *gx[1];
        cft_fn *gpb;
        CHECK_EQ(cft_vjp(g, &x, gx, &gpb), CFT_OK);
        cft_array *H = cft_fn_call1(cft_hessian(cft_fn_new(lse, NULL, 1, 1), 0), &x);
        cft_array *e1 = v64((double[]){0, 1, 0}, 3);
        CHECK_ARRAY_CLOSE(cft_fn_call1(gpb, &e1), at(H, 1), tol, tol);
    }

    /* ---------------- in_axes / out_axes ---------------- */

    TEST("in_axes / out_axes at non-zero and negative positions, CFT_NOT_BATCHED") {
        enum { B = 4 };
        cft_array *X = randn(50, (int64_t[]){3, B}, 2); /* batch along axis 1 */
        cft_array *W = randn(51, (int64_t[]){3, 2}, 2);
        cft_fn *f = cft_fn_new(xw, NULL, 2, 2);
        int nb = CFT_NOT_BATCHED;
        cft_array *ref[B][2];
        for (int b = 0; b < B; b++) {
            int64_t s0[2] = {0, b}, l0[2] = {3, b + 1};
            cft_array *xb = cft_reshape(cft_slice(X, s0, l0, NULL), (int64_t[]){3}, 1);
            cft_fn_call(f, (cft_array *[]){xb, W}, ref[b]);
        }
        int in_axes_list[2] = {1, -1};
        int out_axes_list[3] = {0, 1, -1};
        for (int ia = 0; ia < 2; ia++)
            for (int oa = 0; oa < 3; oa++) {
                cft_array *o[2];
                cft_fn *v =
                    cft_vmap(f, (int[]){in_axes_list[ia], nb}, (int[]){out_axes_list[oa], nb});
                CHECK_EQ(cft_fn_call(v, (cft_array *[]){X, W}, o), CFT_OK);
                /* output 1 does not depend on the batch: returned once */
                CHECK_ARRAY_CLOSE(o[1], ref[0][1], 0, 0);
                CHECK_EQ(cft_array_ndim(o[1]), 0);
                /* output 0 is [B,2] for out axis 0, [2,B] for 1 / -1 */
                cft_array *o0 = out_axes_list[oa] == 0 ? o[0] : cft_transpose(o[0], NULL);
                CHECK_EQ(cft_array_dim(o0, 0), B);
                CHECK_EQ(cft_array_dim(o0, 1), 2);
                for (int b = 0; b < B; b++)
                    CHECK_ARRAY_CLOSE(at(o0, b), ref[b][0], tol, 1e-14);
            }
        /* an unbatched output placed at a batch axis is broadcast */
        cft_array *o[2];
        CHECK_EQ(cft_fn_call(cft_vmap(f, (int[]){1, nb}, (int[]){0, -1}), (cft_array *[]){X, W}, o),
                 CFT_OK);
        CHECK_EQ(cft_array_ndim(o[1]), 1);
        CHECK_EQ(cft_array_dim(o[1], 0), B);
        CHECK_ARRAY_CLOSE(o[1], cft_full(cft_item(ref[0][1]), CFT_F64, (int64_t[]){B}, 1), 0, 0);
        /* a 3-d input batched in the middle, output batch last */
        cft_array *X3 = randn(52, (int64_t[]){2, B, 3}, 3); /* per example [2,3] */
        cft_fn *g = cft_fn_new(sum_tanh, NULL, 1, 1);
        cft_array *r = cft_fn_call1(cft_vmap(g, (int[]){-2}, (int[]){-1}), &X3);
        CHECK_EQ(cft_array_ndim(r), 1);
        for (int b = 0; b < B; b++) {
            int64_t s0[3] = {0, b, 0}, l0[3] = {2, b + 1, 3};
            cft_array *xb = cft_reshape(cft_slice(X3, s0, l0, NULL), (int64_t[]){2, 3}, 2);
            CHECK_CLOSE(cft_item_at(r, b), cft_item(cft_fn_call1(g, &xb)), tol, 1e-14);
        }
        /* grad through a vmap with non-zero axes */
        cft_fn *gv = cft_grad(cft_fn_new(sum_tanh, NULL, 1, 1), NULL, 0);
        cft_array *gr = cft_fn_call1(cft_vmap(gv, (int[]){1}, (int[]){1}), &X3);
        double xv[2 * B * 3];
        cft_copy_to(X3, CFT_F64, xv);
        for (int i = 0; i < 2 * B * 3; i++) {
            double t = tanh(xv[i]);
            CHECK_CLOSE(cft_item_at(gr, i), 1 - t * t, tol, 1e-14);
        }
    }

    /* ---------------- symbolic zeros and other edges ---------------- */

    TEST("identity, constant and unused-input functions under every transform") {
        cft_array *x = s64(2.0), *v = v64((double[]){1.5, -2.7, 0.3}, 3);
        cft_fn *id = cft_fn_new(ident, NULL, 1, 1), *k = cft_fn_new(constant, NULL, 1, 1);
        CHECK_CLOSE(cft_item(cft_fn_call1(cft_grad(id, NULL, 0), &x)), 1, 0, 0);
        CHECK_CLOSE(cft_item(cft_fn_call1(cft_grad(k, NULL, 0), &x)), 0, 0, 0);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_jacrev(id, NULL, 0), &v), cft_eye(3, CFT_F64), 0, 0);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_jacfwd(id, NULL, 0), &v), cft_eye(3, CFT_F64), 0, 0);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_jacrev(k, NULL, 0), &v),
                          cft_zeros(CFT_F64, (int64_t[]){3}, 1), 0, 0);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_jacfwd(k, NULL, 0), &v),
                          cft_zeros(CFT_F64, (int64_t[]){3}, 1), 0, 0);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_hessian(k, 0), &v),
                          cft_zeros(CFT_F64, (int64_t[]){3, 3}, 2), 0, 0);
        cft_array *jo[2];
        CHECK_EQ(cft_fn_call(cft_jvp(k), (cft_array *[]){x, x}, jo), CFT_OK);
        CHECK_CLOSE(cft_item(jo[1]), 0, 0, 0);
        /* an unused input has a zero gradient of its shape */
        cft_array *gu = cft_fn_call1(cft_grad(cft_fn_new(first_only, NULL, 2, 1), (int[]){1}, 1),
                                     (cft_array *[]){v, m64((double[]){1, 2}, 1, 2)});
        CHECK_ARRAY_CLOSE(gu, cft_zeros(CFT_F64, (int64_t[]){1, 2}, 2), 0, 0);
        /* an output used twice: the pullback adds both cotangents */
        cft_array *o2[2], *ct[1];
        cft_fn *pb;
        CHECK_EQ(cft_vjp(cft_fn_new(dup, NULL, 1, 2), &v, o2, &pb), CFT_OK);
        CHECK_EQ(cft_fn_call(pb, (cft_array *[]){v, cft_ones_like(v)}, ct), CFT_OK);
        CHECK_ARRAY_CLOSE(ct[0], cft_add_s(v, 1), 0, 0);
        /* vmap: identity moving the batch axis, a constant broadcast over the batch */
        cft_array *M = cft_reshape(cft_arange(0, 6, 1, CFT_F64), (int64_t[]){2, 3}, 2);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_vmap(id, (int[]){1}, NULL), &M), cft_transpose(M, NULL),
                          0, 0);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_vmap(k, NULL, NULL), &M),
                          cft_full(3, CFT_F64, (int64_t[]){2}, 1), 0, 0);
        /* hessian and jacrev at a 0-d input */
        cft_array *s = s64(1.5);
        cft_fn *sq = cft_fn_new(sum_sq, NULL, 1, 1);
        CHECK_CLOSE(cft_item(cft_fn_call1(cft_hessian(sq, 0), &s)), 2, 0, 0);
        CHECK_CLOSE(cft_item(cft_fn_call1(cft_jacrev(sq, NULL, 0), &s)), 3, 0, 0);
        CHECK_EQ(cft_array_ndim(cft_fn_call1(cft_hessian(sq, 0), &s)), 0);
    }

    TEST("gradient dtypes, integer casts, ties of maximum, an empty batch") {
        /* an f32 input used in f64 arithmetic gets an f32 gradient */
        cft_array *vf = cft_from_f32((float[]){1.5f, -2.5f, 0.5f}, (int64_t[]){3}, 1);
        cft_array *gf = cft_fn_call1(cft_grad(cft_fn_new(times_f64, NULL, 1, 1), NULL, 0), &vf);
        CHECK_EQ(cft_array_dtype(gf), CFT_F32);
        CHECK_ARRAY_CLOSE(gf, cft_full(2, CFT_F32, (int64_t[]){3}, 1), 0, 0);
        /* d/dx [x * int(x)] = int(x): the cast path carries no derivative */
        cft_array *v = v64((double[]){1.5, -2.7, 0.3}, 3);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_grad(cft_fn_new(int_part, NULL, 1, 1), NULL, 0), &v),
                          v64((double[]){1, -2, 0}, 3), 0, 0);
        /* maximum: ties split the gradient (ops.h) */
        cft_array *a = v64((double[]){1, 2, 3}, 3), *b = v64((double[]){1, 0, 5}, 3), *g[2];
        CHECK_EQ(cft_fn_call(cft_grad(cft_fn_new(sum_max, NULL, 2, 1), (int[]){0, 1}, 2),
                             (cft_array *[]){a, b}, g),
                 CFT_OK);
        CHECK_ARRAY_CLOSE(g[0], v64((double[]){0.5, 1, 0}, 3), 0, 0);
        CHECK_ARRAY_CLOSE(g[1], v64((double[]){0.5, 0, 1}, 3), 0, 0);
        /* vmap over an empty batch */
        cft_array *E = cft_zeros(CFT_F64, (int64_t[]){0, 3}, 2);
        cft_array *ge = cft_fn_call1(
            cft_vmap(cft_grad(cft_fn_new(sum_sq, NULL, 1, 1), NULL, 0), NULL, NULL), &E);
        CHECK_MSG(!cft_failed(ge), "%s", cft_error_message(ge));
        CHECK_EQ(cft_array_ndim(ge), 2);
        CHECK_EQ(cft_array_dim(ge, 0), 0);
        CHECK_EQ(cft_array_dim(ge, 1), 3);
    }

    /* ---------------- mini-MAML ---------------- */

    TEST("mini-MAML: grad of vmap over tasks of 2 inner SGD steps = finite differences") {
        enum { T = 3, N = 5, D = 4 };
        cft_array *w = cft_mul_s(randn(60, (int64_t[]){D}, 1), 0.5);
        cft_array *Xs = randn(61, (int64_t[]){T, N, D}, 3), *Ys = randn(62, (int64_t[]){T, N}, 2);
        cft_array *Xq = randn(63, (int64_t[]){T, N, D}, 3), *Yq = randn(64, (int64_t[]){T, N}, 2);
        cft_fn *meta = cft_fn_new(meta_loss, NULL, 5, 1);
        cft_array *args[5] = {w, Xs, Ys, Xq, Yq};
        cft_array *g = cft_fn_call1(cft_grad(meta, NULL, 0), args);
        CHECK_MSG(!cft_failed(g), "%s", cft_error_message(g));
        /* the vmapped meta loss equals a loop over tasks */
        double loop = 0;
        cft_fn *tl = cft_fn_new(task_loss, NULL, 5, 1);
        for (int t = 0; t < T; t++)
            loop += cft_item(
                cft_fn_call1(tl, (cft_array *[]){w, at(Xs, t), at(Ys, t), at(Xq, t), at(Yq, t)}));
        CHECK_CLOSE(cft_item(cft_fn_call1(meta, args)), loop / T, tol, 0);
        /* central differences, h = 1e-5: truncation ~ h^2 |f'''| ~ 1e-10 and
         * rounding ~ eps |f| / h ~ 1e-11 for this O(1) smooth loss, so 1e-7
         * absolute + relative is a loose bound that still catches any wrong
         * term (those are O(1e-2) or more) */
        double wv[D], h = 1e-5;
        cft_copy_to(w, CFT_F64, wv);
        for (int i = 0; i < D; i++) {
            double wp[D], wm[D];
            memcpy(wp, wv, sizeof wp);
            memcpy(wm, wv, sizeof wm);
            wp[i] += h, wm[i] -= h;
            args[0] = v64(wp, D);
            double fp = cft_item(cft_fn_call1(meta, args));
            args[0] = v64(wm, D);
            double fm = cft_item(cft_fn_call1(meta, args));
            CHECK_CLOSE(cft_item_at(g, i), (fp - fm) / (2 * h), 1e-7, 1e-7);
        }
        CHECK(cft_max_abs_diff(g, cft_zeros_like(g)) > 1e-6); /* not trivially zero */
    }

    return check_summary();
}
