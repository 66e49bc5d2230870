/* test_nn_param.c: parametrizations. weight_norm reproduces the weight from
 * its (v, g) and matches a hand example; orthogonal (Householder) gives
 * Q^T Q = I to f32 tolerance for tall, wide, batched and sign-flipped raw
 * matrices, equals an explicit product of reflectors, and has gradients
 * that match finite differences; spectral_norm finds the top singular value
 * of a known matrix, keeps u, v in eval, and differentiates like w / (u^T W v)
 * with u, v held constant. */
#include <math.h>
#include <string.h>

#include "check.h"

static cft_array *m64(const double *v, int64_t r, int64_t c) {
    return cft_from_f64(v, (int64_t[]){r, c}, 2);
}

/* max |A^T A - I| (tall) or |A A^T - I| (wide), computed in f64 */
static double orth_err(cft_array *q) {
    cft_array *a = cft_astype(q, CFT_F64);
    bool wide = cft_array_dim(a, -2) < cft_array_dim(a, -1);
    cft_array *g = wide ? cft_matmul(a, cft_mT(a)) : cft_matmul(cft_mT(a), a);
    int64_t k = cft_array_dim(g, -1);
    return cft_item(cft_max(cft_abs(cft_sub(g, cft_eye(k, CFT_F64))), NULL, 0, false));
}

static cft_status orth_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul(cft_orthogonal(in[0]), env), NULL, 0, false);
    return CFT_OK;
}
static cft_status sn_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array **uv = env;
    out[0] = cft_sum(
        cft_mul(cft_spectral_norm(in[0], uv[0], uv[1], 1, 0, 1e-12, false, NULL, NULL), uv[2]),
        NULL, 0, false);
    return CFT_OK;
}
static cft_status wn_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_square(cft_weight_norm(in[0], in[1], 0)), NULL, 0, false);
    return CFT_OK;
}

/* max |grad - central difference| of a scalar fn of one f64 input */
static double fd(cft_fn *f, cft_array *x) {
    cft_array *g = cft_fn_call1(cft_grad(f, NULL, 0), &x);
    int64_t n = cft_array_size(x);
    double *v = malloc(sizeof(double) * (size_t)n), worst = 0, h = 1e-6;
    cft_copy_to(x, CFT_F64, v);
    for (int64_t i = 0; i < n; i++) {
        double keep = v[i], y[2];
        for (int s = 0; s < 2; s++) {
            v[i] = keep + (s ? -h : h);
            cft_array *xi = cft_from_f64(v, cft_array_shape(x), cft_array_ndim(x));
            y[s] = cft_item(cft_fn_call1(f, &xi));
        }
        v[i] = keep;
        double d = fabs((y[0] - y[1]) / (2 * h) - cft_item_at(g, i));
        if (!(d <= worst))
            worst = d;
    }
    free(v);
    return worst;
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    TEST("weight_norm: hand example, reproduces the weight, scale invariance") {
        cft_array *v = m64((double[]){3, 4, 0, 5}, 2, 2), *g = m64((double[]){2, 1}, 2, 1);
        CHECK_ARRAY_CLOSE(cft_weight_norm(v, g, 0), m64((double[]){1.2, 1.6, 0, 1}, 2, 2), 1e-15,
                          0);
        CHECK_ARRAY_CLOSE(cft_weight_norm(v, cft_from_f64((double[]){2, 1}, (int64_t[]){2}, 1), 0),
                          m64((double[]){1.2, 1.6, 0, 1}, 2, 2), 1e-15, 0);
        CHECK_ARRAY_CLOSE(cft_weight_norm(cft_mul_s(v, 7), g, 0), cft_weight_norm(v, g, 0), 1e-15,
                          0);
        /* dim 1 (columns) and a 4-d weight */
        cft_array *w = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){5, 3}, 2), *vv,
                  *gg;
        for (int dim = -1; dim <= 1; dim++) {
            CHECK_EQ(cft_weight_norm_init(w, dim, &vv, &gg), CFT_OK);
            CHECK_EQ(cft_array_dim(gg, dim == 0 ? 0 : 1), dim == 0 ? 5 : 3);
            CHECK_ARRAY_CLOSE(cft_weight_norm(vv, gg, dim), w, 1e-6, 1e-7);
        }
        cft_array *w4 = cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){4, 2, 3, 3}, 4);
        CHECK_EQ(cft_weight_norm_init(w4, 0, &vv, &gg), CFT_OK);
        CHECK_EQ(cft_array_ndim(gg), 4);
        CHECK_ARRAY_CLOSE(cft_weight_norm(vv, gg, 0), w4, 1e-6, 1e-7);
        /* d/dg sum(w^2) = 2 g (w's rows have norm g); d/dv = 0 for that loss */
        cft_array *gr[2];
        CHECK_EQ(cft_fn_call(cft_grad(cft_fn_new(wn_cb, NULL, 2, 1), (int[]){0, 1}, 2),
                             (cft_array *[]){v, g}, gr),
                 CFT_OK);
        CHECK_ARRAY_CLOSE(gr[1], m64((double[]){4, 2}, 2, 1), 1e-14, 0);
        CHECK_ARRAY_CLOSE(gr[0], cft_zeros(CFT_F64, (int64_t[]){2, 2}, 2), 0, 1e-14);
        CHECK(cft_failed(cft_weight_norm(v, m64((double[]){1, 2}, 1, 2), 0)));
        CHECK(cft_failed(cft_weight_norm(v, g, 2)));
        CHECK(cft_weight_norm_init(v, 5, &vv, &gg) != CFT_OK && cft_failed(vv) && cft_failed(gg));
    }

    TEST("orthogonal: Q^T Q = I to f32 tolerance (tall, square, wide, batched, signs)") {
        cft_array *key = cft_random_key(3);
        CHECK_MSG(orth_err(cft_orthogonal(cft_orthogonal_init(key, 6, 4, CFT_F32))) < 2e-6, "tall");
        CHECK_MSG(orth_err(cft_orthogonal(cft_orthogonal_init(key, 16, 16, CFT_F32))) < 5e-6,
                  "square");
        cft_array *wide = cft_orthogonal(cft_mT(cft_orthogonal_init(key, 5, 3, CFT_F32)));
        CHECK_EQ(cft_array_dim(wide, 0), 3);
        CHECK_EQ(cft_array_dim(wide, 1), 5);
        CHECK_MSG(orth_err(wide) < 2e-6, "wide");
        cft_array *batch =
            cft_stack((cft_array *[]){cft_orthogonal_init(cft_random_key(4), 5, 5, CFT_F32),
                                      cft_orthogonal_init(cft_random_key(5), 5, 5, CFT_F32)},
                      2, 0);
        cft_array *qb = cft_orthogonal(batch);
        CHECK_MSG(orth_err(cft_index(qb, 0)) < 2e-6 && orth_err(cft_index(qb, 1)) < 2e-6,
                  "batched");
        CHECK_ARRAY_CLOSE(cft_index(qb, 1), cft_orthogonal(cft_index(batch, 1)), 1e-6, 1e-7);
        /* a -1 on the diagonal flips that column */
        cft_array *x = cft_orthogonal_init(key, 4, 3, CFT_F64);
        cft_array *flip = cft_mul(x, cft_from_f64((double[]){1, -1, 1}, (int64_t[]){3}, 1));
        cft_array *flip_diag = cft_where(cft_eq(cft_iota(CFT_I32, (int64_t[]){4, 3}, 2, 0),
                                                cft_iota(CFT_I32, (int64_t[]){4, 3}, 2, 1)),
                                         flip, x); /* only the diagonal entry of column 1 negated */
        cft_array *q = cft_orthogonal(x), *qf = cft_orthogonal(flip_diag);
        CHECK(orth_err(qf) < 1e-14);
        CHECK_ARRAY_CLOSE(cft_slice(qf, (int64_t[]){0, 1}, (int64_t[]){4, 2}, NULL),
                          cft_neg(cft_slice(q, (int64_t[]){0, 1}, (int64_t[]){4, 2}, NULL)), 1e-14,
                          1e-15);
        CHECK(cft_failed(cft_orthogonal(cft_ones(CFT_F32, (int64_t[]){3}, 1))));
        CHECK(cft_failed(cft_orthogonal_init(key, 0, 3, CFT_F32)));
    }

    TEST("orthogonal: equals the explicit product of reflectors; gradient vs finite differences") {
        /* raw 3x2: strictly lower a, b, c; diagonal 1 */
        double a = 0.3, b = -1.2, c = 0.7;
        cft_array *x = m64((double[]){1, 0, a, 1, b, c}, 3, 2);
        double v1[3] = {1, a, b}, v2[3] = {0, 1, c}, H1[9], H2[9], Q[6];
        double t1 = 2 / (1 + a * a + b * b), t2 = 2 / (1 + c * c);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                H1[i * 3 + j] = (i == j) - t1 * v1[i] * v1[j];
                H2[i * 3 + j] = (i == j) - t2 * v2[i] * v2[j];
            }
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) {
                double s = 0;
                for (int l = 0; l < 3; l++)
                    s += H1[i * 3 + l] * H2[l * 3 + j];
                Q[i * 2 + j] = s;
            }
        CHECK_ARRAY_CLOSE(cft_orthogonal(x), m64(Q, 3, 2), 1e-15, 1e-16);
        cft_array *w = cft_random_normal(cft_random_key(6), CFT_F64, (int64_t[]){5, 3}, 2);
        cft_array *x0 = cft_orthogonal_init(cft_random_key(7), 5, 3, CFT_F64);
        CHECK_MSG(fd(cft_fn_new(orth_cb, w, 1, 1), x0) < 1e-8, "orthogonal gradient");
    }

    TEST("spectral_norm: top singular value, u/v state, gradient with u, v constant") {
        /* diag(3, 1, 0.5) rotated by a permutation: sigma = 3 */
        cft_array *W = m64((double[]){0, 1, 0, 3, 0, 0, 0, 0, 0.5}, 3, 3), *u, *v, *u2, *v2;
        CHECK_EQ(cft_spectral_norm_init(cft_random_key(8), W, 0, 1e-12, &u, &v), CFT_OK);
        cft_array *y = cft_spectral_norm(W, u, v, 1, 0, 1e-12, true, &u2, &v2);
        CHECK_ARRAY_CLOSE(y, cft_mul_s(W, 1 / 3.0), 1e-10, 1e-12);
        CHECK_ARRAY_CLOSE(cft_abs(u2), cft_from_f64((double[]){0, 1, 0}, (int64_t[]){3}, 1), 0,
                          1e-10);
        /* eval: u, v returned as given, sigma from them */
        cft_array *u3, *v3;
        cft_array *ye = cft_spectral_norm(W, u2, v2, 5, 0, 1e-12, false, &u3, &v3);
        CHECK(u3 == u2 && v3 == v2);
        CHECK_ARRAY_CLOSE(ye, y, 1e-15, 0);
        /* a random 6x4 matrix: sigma against the top eigenvalue of W^T W by long power iteration in
         * C */
        cft_array *R = cft_random_normal(cft_random_key(9), CFT_F64, (int64_t[]){6, 4}, 2);
        double r[24], ev[4] = {1, 1, 1, 1}, lam = 0;
        cft_copy_to(R, CFT_F64, r);
        for (int it = 0; it < 2000; it++) {
            double t[6] = {0}, z[4] = {0}, nz = 0;
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 4; j++)
                    t[i] += r[i * 4 + j] * ev[j];
            for (int j = 0; j < 4; j++)
                for (int i = 0; i < 6; i++)
                    z[j] += r[i * 4 + j] * t[i];
            for (int j = 0; j < 4; j++)
                nz += z[j] * z[j];
            nz = sqrt(nz);
            lam = nz;
            for (int j = 0; j < 4; j++)
                ev[j] = z[j] / nz;
        }
        CHECK_EQ(cft_spectral_norm_init(cft_random_key(10), R, 0, 1e-12, &u, &v), CFT_OK);
        cft_array *ys = cft_spectral_norm(R, u, v, 50, 0, 1e-12, true, &u2, &v2);
        CHECK_CLOSE(cft_item_at(R, 5) / cft_item_at(ys, 5), sqrt(lam), 1e-9, 0);
        /* f32 and a 4-d weight (dim 0 -> [4, 18]) */
        cft_array *w4 = cft_random_normal(cft_random_key(11), CFT_F32, (int64_t[]){4, 2, 3, 3}, 4);
        CHECK_EQ(cft_spectral_norm_init(cft_random_key(12), w4, 0, 1e-12, &u, &v), CFT_OK);
        CHECK_EQ(cft_array_dim(u, 0), 4);
        CHECK_EQ(cft_array_dim(v, 0), 18);
        CHECK(!cft_failed(cft_spectral_norm(w4, u, v, 1, 0, 1e-12, true, NULL, NULL)));
        /* 1-d: just normalized */
        cft_array *w1 = cft_from_f64((double[]){3, 4}, (int64_t[]){2}, 1);
        CHECK_ARRAY_CLOSE(cft_spectral_norm(w1, NULL, NULL, 1, 0, 1e-12, true, NULL, NULL),
                          cft_from_f64((double[]){0.6, 0.8}, (int64_t[]){2}, 1), 1e-15, 0);
        /* gradient: u, v constant, so d/dW sum(C * W / (u^T W v)) matches finite differences */
        CHECK_EQ(cft_spectral_norm_init(cft_random_key(13), R, 0, 1e-12, &u, &v), CFT_OK);
        cft_array *env[3] = {u, v,
                             cft_random_normal(cft_random_key(14), CFT_F64, (int64_t[]){6, 4}, 2)};
        CHECK_MSG(fd(cft_fn_new(sn_cb, env, 1, 1), R) < 1e-8, "spectral_norm gradient");
        CHECK(cft_failed(cft_spectral_norm(R, v, u, 1, 0, 1e-12, true, NULL, NULL)));
        CHECK(cft_spectral_norm_init(cft_random_key(1), w1, 0, 1e-12, &u, &v) != CFT_OK);
    }

    return check_summary();
}
