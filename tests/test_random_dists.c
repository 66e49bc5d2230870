/* test_random_dists.c: the distributions of random_dists.c. Moments of
 * 20,000 draws against the distributions' (tolerances about 5 standard
 * errors, so a correct sampler fails with probability ~1e-6), supports and
 * bounds, a permutation being one, choice without replacement never
 * repeating, the same key giving the same draws, and vmap over keys equal
 * to a loop (exact). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

enum { N = 20000 };

static double mean(cft_array *x) {
    return cft_item(cft_mean(cft_astype(x, CFT_F64), NULL, 0, false));
}
static double var(cft_array *x) {
    double m = mean(x);
    return cft_item(cft_mean(cft_square(cft_add_s(cft_astype(x, CFT_F64), -m)), NULL, 0, false));
}

/* a few draws of each kind from one key, summed into one vector */
static cft_status draw(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *ks = cft_random_split(in[0], 3);
    int64_t s = 6;
    cft_array *a = cft_random_gumbel(cft_index(ks, 0), CFT_F64, &s, 1);
    cft_array *b = cft_astype(cft_random_randint(cft_index(ks, 1), &s, 1, 0, 9, CFT_I32), CFT_F64);
    cft_array *c = cft_random_truncated_normal(cft_index(ks, 2), CFT_F64, &s, 1, -1, 1);
    out[0] = cft_add(cft_add(a, b), c);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    int64_t n = N;
    TEST("randint: the range, the mean, every value") {
        cft_array *r = cft_random_randint(cft_random_key(1), &n, 1, -3, 5, CFT_I32);
        CHECK_EQ(cft_array_dtype(r), CFT_I32);
        CHECK_EQ(cft_item(cft_min(r, NULL, 0, false)), -3);
        CHECK_EQ(cft_item(cft_max(r, NULL, 0, false)), 4);
        CHECK_CLOSE(mean(r), 0.5, 0, 0.08);
        CHECK(cft_failed(cft_random_randint(cft_random_key(1), &n, 1, 5, 5, CFT_I32)));
    }
    TEST("gumbel and exponential moments") {
        cft_array *g = cft_random_gumbel(cft_random_key(2), CFT_F64, &n, 1);
        CHECK_CLOSE(mean(g), 0.5772156649, 0, 0.05);
        CHECK_CLOSE(var(g), M_PI * M_PI / 6, 0, 0.12);
        cft_array *e = cft_random_exponential(cft_random_key(3), CFT_F32, &n, 1);
        CHECK_CLOSE(mean(e), 1, 0, 0.04);
        CHECK_CLOSE(var(e), 1, 0, 0.12);
        CHECK(cft_item(cft_min(e, NULL, 0, false)) >= 0);
    }
    TEST("categorical frequencies follow the softmax") {
        double lv[4] = {0, 1, -1, 0.5}, z = 0, p[4];
        for (int i = 0; i < 4; i++)
            z += exp(lv[i]);
        for (int i = 0; i < 4; i++)
            p[i] = exp(lv[i]) / z;
        cft_array *logits =
            cft_broadcast_to(cft_from_data(lv, CFT_F64, (int64_t[]){4}, 1), (int64_t[]){N, 4}, 2);
        cft_array *c = cft_random_categorical(cft_random_key(4), logits, -1);
        CHECK_EQ(cft_array_ndim(c), 1);
        for (int i = 0; i < 4; i++) {
            double f = mean(cft_eq(c, cft_scalar(i, cft_array_dtype(c))));
            CHECK_CLOSE(f, p[i], 0, 0.02);
        }
    }
    TEST("truncated normal: inside the bounds, with the right mean") {
        double a = -0.5, b = 2;
        cft_array *t = cft_random_truncated_normal(cft_random_key(5), CFT_F64, &n, 1, a, b);
        CHECK(cft_item(cft_min(t, NULL, 0, false)) >= a);
        CHECK(cft_item(cft_max(t, NULL, 0, false)) <= b);
        double phi_a = exp(-a * a / 2) / sqrt(2 * M_PI), phi_b = exp(-b * b / 2) / sqrt(2 * M_PI);
        double Z = 0.5 * (erfc(-b / sqrt(2.0)) - erfc(-a / sqrt(2.0)));
        CHECK_CLOSE(mean(t), (phi_a - phi_b) / Z, 0, 0.03);
    }
    TEST("permutation and choice") {
        cft_array *p = cft_random_permutation(cft_random_key(6), 50);
        cft_array *s = cft_sort(p, 0, false);
        CHECK_ARRAY_CLOSE(cft_astype(s, CFT_F64), cft_arange(0, 50, 1, CFT_F64), 0, 0);
        cft_array *q = cft_random_permutation(cft_random_key(7), 50); /* another key */
        CHECK(mean(cft_eq(p, q)) < 0.5);
        cft_array *a = cft_arange(0, 10, 1, CFT_F64);
        cft_array *c = cft_random_choice(cft_random_key(8), a, 10, false);
        CHECK_ARRAY_CLOSE(cft_sort(c, 0, false), a, 0, 0);
        cft_array *w = cft_random_choice(cft_random_key(9), a, 1000, true);
        CHECK_EQ(cft_array_size(w), 1000);
        CHECK(cft_item(cft_max(w, NULL, 0, false)) <= 9);
        CHECK(cft_failed(cft_random_choice(cft_random_key(9), a, 11, false)));
    }
    TEST("multivariate normal: the sample covariance") {
        double cv[4] = {2, 0.6, 0.6, 1}, mv[2] = {1, -2};
        cft_array *cov = cft_from_data(cv, CFT_F64, (int64_t[]){2, 2}, 2);
        cft_array *mu = cft_from_data(mv, CFT_F64, (int64_t[]){2}, 1);
        cft_array *x = cft_random_multivariate_normal(cft_random_key(10), mu, cov, &n, 1);
        CHECK_EQ(cft_array_aval(x).shape[1], 2);
        cft_array *c = cft_sub(x, cft_mean(x, (int[]){0}, 1, true));
        cft_array *s = cft_mul_s(cft_matmul(cft_transpose(c, (int[]){1, 0}), c), 1.0 / N);
        CHECK_ARRAY_CLOSE(s, cov, 0, 0.1);
        CHECK_ARRAY_CLOSE(cft_mean(x, (int[]){0}, 1, false), mu, 0, 0.06);
    }
    TEST("gamma (alpha above and below 1), beta and dirichlet moments") {
        double alphas[3] = {0.5, 2, 7.5};
        for (int i = 0; i < 3; i++) {
            cft_array *g = cft_random_gamma(cft_random_key(20 + i), alphas[i], CFT_F64, &n, 1);
            CHECK(cft_item(cft_min(g, NULL, 0, false)) > 0);
            double se = sqrt(alphas[i] / N);
            CHECK_CLOSE(mean(g), alphas[i], 0, 5 * se);
            CHECK_CLOSE(var(g), alphas[i], 0.1, 0);
        }
        cft_array *b = cft_random_beta(cft_random_key(30), 2, 5, CFT_F32, &n, 1);
        CHECK_CLOSE(mean(b), 2.0 / 7, 0, 0.01);
        double al[3] = {1, 2, 3};
        cft_array *d = cft_random_dirichlet(cft_random_key(31), al, 3, CFT_F64, &n, 1);
        CHECK_EQ(cft_array_aval(d).shape[1], 3);
        cft_array *rows = cft_sum(d, (int[]){1}, 1, false);
        CHECK_ARRAY_CLOSE(rows, cft_ones_like(rows), 1e-12, 1e-12);
        CHECK_ARRAY_CLOSE(
            cft_mean(d, (int[]){0}, 1, false),
            cft_from_data((double[]){1. / 6, 2. / 6, 3. / 6}, CFT_F64, (int64_t[]){3}, 1), 0, 0.01);
        CHECK(cft_failed(cft_random_gamma(cft_random_key(1), -1, CFT_F64, &n, 1)));
    }
    TEST("the same key, the same draws; vmap over keys equals a loop") {
        cft_array *k = cft_random_key(11);
        CHECK_ARRAY_CLOSE(cft_random_gumbel(k, CFT_F32, (int64_t[]){7}, 1),
                          cft_random_gumbel(k, CFT_F32, (int64_t[]){7}, 1), 0, 0);
        cft_array *keys = cft_random_split(k, 5);
        cft_fn *f = cft_vmap(cft_fn_new(draw, NULL, 1, 1), NULL, NULL);
        cft_array *v = cft_fn_call1(f, &keys);
        for (int64_t i = 0; i < 5; i++) {
            cft_array *ki = cft_index(keys, i), *o[1];
            draw(NULL, 1, &ki, 1, o);
            CHECK_ARRAY_CLOSE(cft_index(v, i), o[0], 0, 0);
        }
    }
    return check_summary();
}
