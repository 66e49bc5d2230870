/* test_privacy.c: the DP-SGD accountant and Poisson sampler of
 * include/cft/privacy.h. References: the RDP values published with Google's
 * dp_accounting (rdp_privacy_accountant_test: q = 0.01, sigma = 2.5, 50
 * steps, orders 1.5, 2.5, 5, 50, 100; five significant digits, so rtol
 * 1e-4); A_alpha by numerical integration here (trapezoid on a fine grid,
 * independent of the library's series; rtol 1e-6); the Gaussian
 * mechanism's exact RDP alpha / (2 sigma^2) and exact (epsilon, delta)
 * curve (Balle and Wang 2018), which the RDP conversion must bound from
 * above without being loose (within 1.5x). */
#include <math.h>

#include "cft/cft.h"
#include "check.h"

/* A_alpha = E_{z ~ N(0, s^2)} [((1 - q) + q exp((2z - 1) / (2 s^2)))^alpha] */
static double rdp_by_quadrature(double q, double s, double alpha) {
    double lo = -30 * s, hi = 30 * s + 30, h = 1e-4 * s, sum = 0;
    for (double z = lo; z <= hi; z += h) {
        double w = exp(-z * z / (2 * s * s)) / (s * sqrt(2 * M_PI));
        double r = (1 - q) + q * exp((2 * z - 1) / (2 * s * s));
        sum += w * pow(r, alpha) * h;
    }
    return log(sum) / (alpha - 1);
}

static double Phi(double x) {
    return 0.5 * erfc(-x / M_SQRT2);
}

/* the exact delta of the Gaussian mechanism (sensitivity 1, noise s) at eps */
static double gaussian_delta(double eps, double s) {
    return Phi(-eps * s + 1 / (2 * s)) - exp(eps) * Phi(-eps * s - 1 / (2 * s));
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    TEST("RDP: dp_accounting's published values") {
        const double orders[5] = {1.5, 2.5, 5, 50, 100};
        const double want[5] = {6.5007e-04, 1.0854e-03, 2.1808e-03, 2.3846e-02, 1.6742e+02};
        for (int i = 0; i < 5; i++)
            CHECK_CLOSE(50 * cft_dp_rdp(0.01, 2.5, orders[i]), want[i], 1e-4, 0);
    }
    TEST("RDP: fractional and integer orders against quadrature") {
        const double qs[3] = {0.004, 0.05, 0.3}, ss[3] = {0.8, 1.1, 2.0};
        const double as[4] = {1.3, 2.5, 4.0, 7.7};
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 4; k++)
                CHECK_CLOSE(cft_dp_rdp(qs[i], ss[i], as[k]), rdp_by_quadrature(qs[i], ss[i], as[k]),
                            1e-6, 1e-12);
    }
    TEST("RDP: the fractional series meets the integer sum") {
        for (int a = 2; a <= 12; a += 5)
            CHECK_CLOSE(cft_dp_rdp(0.02, 1.2, a + 1e-9), cft_dp_rdp(0.02, 1.2, a), 1e-6, 1e-12);
    }
    TEST("RDP: q = 1 is the Gaussian mechanism, q = 0 costs nothing, sigma = 0 everything") {
        for (double a = 1.5; a < 70; a *= 2)
            CHECK_CLOSE(cft_dp_rdp(1, 1.3, a), a / (2 * 1.3 * 1.3), 1e-12, 0);
        CHECK_EQ(cft_dp_rdp(0, 1, 3), 0);
        CHECK(isinf(cft_dp_rdp(0.1, 0, 3)));
    }
    TEST("epsilon bounds the Gaussian mechanism's exact curve from above, tightly") {
        for (double s = 0.7; s < 5; s *= 1.6) {
            double eps, order;
            CHECK_EQ(cft_dp_epsilon(1, s, 1, 1e-5, &eps, &order), CFT_OK);
            CHECK(order > 1);
            double exact_delta = gaussian_delta(eps, s);
            CHECK_MSG(exact_delta <= 1e-5, "sigma %g: delta at eps %g is %g", s, eps, exact_delta);
            /* the exact eps at delta 1e-5: bisection on the exact curve */
            double lo = 0, hi = eps;
            for (int i = 0; i < 100; i++) {
                double mid = (lo + hi) / 2;
                if (gaussian_delta(mid, s) > 1e-5)
                    lo = mid;
                else
                    hi = mid;
            }
            CHECK_MSG(eps <= 1.5 * hi, "sigma %g: RDP eps %g vs exact %g", s, eps, hi);
        }
    }
    TEST("epsilon grows with steps and shrinks with noise; phases compose") {
        double e1, e2, e3, ep;
        cft_dp_epsilon(0.01, 1.1, 1000, 1e-5, &e1, NULL);
        cft_dp_epsilon(0.01, 1.1, 4000, 1e-5, &e2, NULL);
        cft_dp_epsilon(0.01, 2.0, 4000, 1e-5, &e3, NULL);
        CHECK(e1 < e2 && e3 < e2);
        /* two phases of 2000 equal one of 4000 */
        CHECK_EQ(cft_dp_epsilon_phases(2, (double[]){0.01, 0.01}, (double[]){1.1, 1.1},
                                       (int64_t[]){2000, 2000}, 1e-5, &ep, NULL),
                 CFT_OK);
        CHECK_CLOSE(ep, e2, 1e-12, 0);
        CHECK_EQ(cft_dp_epsilon(0.01, 1.1, 0, 1e-5, &e1, NULL), CFT_OK);
        CHECK_EQ(e1, 0);
    }
    TEST("noise multiplier inverts epsilon") {
        double s, e, e_less;
        CHECK_EQ(cft_dp_noise_multiplier(0.01, 5000, 2.0, 1e-5, &s), CFT_OK);
        cft_dp_epsilon(0.01, s, 5000, 1e-5, &e, NULL);
        cft_dp_epsilon(0.01, s * 0.99, 5000, 1e-5, &e_less, NULL);
        CHECK_MSG(e <= 2.0 && e_less > 2.0, "sigma %g: eps %g, at 0.99 sigma %g", s, e, e_less);
    }
    TEST("bad arguments name the call and the value") {
        double e = 0;
        CHECK_EQ(cft_dp_epsilon(1.5, 1, 10, 1e-5, &e, NULL), CFT_E_ARG);
        CHECK(strstr(cft_last_error_message(), "cft_dp_epsilon") &&
              strstr(cft_last_error_message(), "1.5"));
        CHECK_EQ(cft_dp_epsilon(0.1, -2, 10, 1e-5, &e, NULL), CFT_E_ARG);
        CHECK(strstr(cft_last_error_message(), "-2"));
        CHECK_EQ(cft_dp_epsilon(0.1, 1, -3, 1e-5, &e, NULL), CFT_E_ARG);
        CHECK_EQ(cft_dp_epsilon(0.1, 1, 10, 0, &e, NULL), CFT_E_ARG);
        CHECK_EQ(cft_dp_epsilon(0.1, 1, 10, 1e-5, NULL, NULL), CFT_E_ARG);
        CHECK(isnan(cft_dp_rdp(0.1, 1, 1.0)));
        CHECK(strstr(cft_last_error_message(), "cft_dp_rdp"));
        CHECK(isnan(cft_dp_rdp(NAN, 1, 2)));
        CHECK_EQ(cft_dp_noise_multiplier(0.5, 100000, 1e-9, 1e-5, &e), CFT_E_ARG);
        CHECK(strstr(cft_last_error_message(), "cft_dp_noise_multiplier"));
        cft_array *s = cft_dp_poisson_sample(cft_random_key(1), -4, 0.1);
        CHECK(cft_failed(s) && strstr(cft_error_message(s), "-4"));
        s = cft_dp_poisson_sample(cft_random_key(1), 10, 2);
        CHECK(cft_failed(s) && strstr(cft_error_message(s), "cft_dp_poisson_sample"));
    }
    TEST("Poisson sampling: binomial counts, ascending indices, pure in the key") {
        int64_t n = 100000;
        double q = 0.01;
        cft_array *a = cft_dp_poisson_sample(cft_random_key(3), n, q),
                  *b = cft_dp_poisson_sample(cft_random_key(3), n, q),
                  *c = cft_dp_poisson_sample(cft_random_key(4), n, q);
        CHECK(!cft_failed(a));
        CHECK_EQ(cft_array_dtype(a), CFT_I32);
        int64_t m = cft_array_size(a);
        double sd = sqrt(n * q * (1 - q)); /* 5 sd: fails by chance with p < 1e-6 */
        CHECK_MSG(fabs((double)m - n * q) < 5 * sd, "%lld kept of %lld", (long long)m,
                  (long long)n);
        CHECK(cft_allclose(a, b, 0, 0, false));
        CHECK(cft_array_size(c) != m || !cft_allclose(a, c, 0, 0, false));
        int32_t *v = malloc(sizeof(int32_t) * (size_t)(m ? m : 1));
        cft_copy_to(a, CFT_I32, v);
        bool ok = true;
        for (int64_t i = 0; i < m; i++)
            ok = ok && v[i] >= 0 && v[i] < n && (i == 0 || v[i] > v[i - 1]);
        CHECK(ok);
        free(v);
        CHECK_EQ(cft_array_size(cft_dp_poisson_sample(cft_random_key(5), 1000, 0)), 0);
        CHECK_EQ(cft_array_size(cft_dp_poisson_sample(cft_random_key(5), 1000, 1)), 1000);
        CHECK_EQ(cft_array_size(cft_dp_poisson_sample(cft_random_key(5), 0, 0.5)), 0);
    }
    return check_summary();
}
