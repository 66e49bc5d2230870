/* dp_accountant.c: the Renyi-DP accountant of DP-SGD (include/cft/privacy.h).
 * The sampled Gaussian mechanism's RDP at order alpha is log(A_alpha) /
 * (alpha - 1), A_alpha = E_{z ~ N(0, s^2)} [((1 - q) + q exp((2z - 1) /
 * (2 s^2)))^alpha] (Mironov, Talwar and Zhang 2019): a finite binomial sum
 * at integer orders, a series with erfc terms at fractional ones, both in
 * log space. The orders' sums convert to (epsilon, delta) by Balle et al.
 * (2020), Theorem 21, or to 0 where the KL bound delta >= sqrt(1 - e^-r)
 * already holds. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "cft/privacy.h"
#include "core/error.h"

static const double FRAC_STEP = 0.1; /* orders 1.1 .. 10.9, then 11 .. 64, 128, 256 */
#define NORDERS (99 + 54 + 2)

static double order_at(int k) {
    if (k < 99)
        return 1 + FRAC_STEP * (k + 1);
    if (k < 99 + 54)
        return 11 + (k - 99);
    return k == 99 + 54 ? 128 : 256;
}

static double log_add(double a, double b) {
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    double m = fmax(a, b);
    return m + log1p(exp(-fabs(a - b)));
}

/* log(e^a - e^b), a >= b */
static double log_sub(double a, double b) {
    if (b == -INFINITY)
        return a;
    if (b >= a)
        return -INFINITY;
    return a + log1p(-exp(b - a));
}

/* log(erfc(x)), also where erfc underflows (asymptotic series) */
static double log_erfc(double x) {
    if (x < 20)
        return log(erfc(x));
    double r = 1 / (x * x);
    return -x * x - log(x) - 0.5 * log(M_PI) + log1p(r * (-0.5 + r * (0.75 - 1.875 * r)));
}

/* log A_alpha at an integer order: sum_k C(alpha, k) (1-q)^(alpha-k) q^k e^((k^2 - k) / 2s^2) */
static double log_a_int(double q, double sigma, int alpha) {
    double log_a = -INFINITY;
    for (int k = 0; k <= alpha; k++) {
        double t = lgamma(alpha + 1.0) - lgamma(k + 1.0) - lgamma(alpha - k + 1.0) + k * log(q) +
                   (alpha - k) * log1p(-q) + ((double)k * k - k) / (2 * sigma * sigma);
        log_a = log_add(log_a, t);
    }
    return log_a;
}

/* log A_alpha at a fractional order: the series of Mironov et al. (2019),
 * Section 3.3, split at z0 where the two Gaussians' weights cross */
static double log_a_frac(double q, double sigma, double alpha) {
    double a0 = -INFINITY, a1 = -INFINITY, s2 = sigma * sigma;
    double z0 = s2 * log(1 / q - 1) + 0.5, logc = 0;
    int sign = 1;
    for (int i = 0; i < 100000; i++) {
        if (i > 0) { /* C(alpha, i) from C(alpha, i - 1) */
            double f = alpha - (i - 1);
            logc += log(fabs(f)) - log((double)i);
            if (f < 0)
                sign = -sign;
        }
        double j = alpha - i;
        double t0 = logc + i * log(q) + j * log1p(-q), t1 = logc + j * log(q) + i * log1p(-q);
        double e0 = log(0.5) + log_erfc((i - z0) / (M_SQRT2 * sigma));
        double e1 = log(0.5) + log_erfc((z0 - j) / (M_SQRT2 * sigma));
        double x0 = t0 + ((double)i * i - i) / (2 * s2) + e0, x1 = t1 + (j * j - j) / (2 * s2) + e1;
        if (sign > 0)
            a0 = log_add(a0, x0), a1 = log_add(a1, x1);
        else
            a0 = log_sub(a0, x0), a1 = log_sub(a1, x1);
        if (fmax(x0, x1) < -30)
            break;
    }
    return log_add(a0, a1);
}

static double rdp_one(double q, double sigma, double alpha) {
    if (q == 0)
        return 0;
    if (sigma == 0)
        return INFINITY;
    if (q == 1) /* the Gaussian mechanism itself */
        return alpha / (2 * sigma * sigma);
    if (alpha == floor(alpha) && alpha <= 1e4)
        return log_a_int(q, sigma, (int)alpha) / (alpha - 1);
    return log_a_frac(q, sigma, alpha) / (alpha - 1);
}

static cft_status bad(const char *call, const char *fmt, double v) {
    char msg[160];
    snprintf(msg, sizeof msg, fmt, v);
    return cft__set_last(cft__fail(CFT_E_ARG, "%s: %s", call, msg));
}

static cft_status check_qs(const char *call, double q, double sigma) {
    if (!(q >= 0 && q <= 1))
        return bad(call, "the sampling rate q = %g is outside [0, 1]", q);
    if (!(sigma >= 0) || isinf(sigma))
        return bad(call, "the noise multiplier sigma = %g is not a finite number >= 0", sigma);
    return CFT_OK;
}

double cft_dp_rdp(double q, double sigma, double alpha) {
    CFT_API("cft_dp_rdp");
    if (check_qs("cft_dp_rdp", q, sigma) != CFT_OK)
        return NAN;
    if (!(alpha > 1) || isinf(alpha)) {
        bad("cft_dp_rdp", "the order alpha = %g is not a finite number > 1", alpha);
        return NAN;
    }
    return rdp_one(q, sigma, alpha);
}

/* epsilon from RDP r at order a (Balle et al. 2020, Thm 21; 0 under the KL bound) */
static double to_epsilon(double r, double a, double delta) {
    if (isinf(r))
        return INFINITY;
    if (delta * delta + expm1(-r) >= 0)
        return 0;
    double e = r + log1p(-1 / a) - (log(delta) + log(a)) / (a - 1);
    return e > 0 ? e : 0;
}

cft_status cft_dp_epsilon_phases(int n, const double *q, const double *sigma, const int64_t *steps,
                                 double delta, double *epsilon, double *order) {
    CFT_API("cft_dp_epsilon");
    const char *call = "cft_dp_epsilon";
    if (!epsilon || (n > 0 && (!q || !sigma || !steps)))
        return cft__set_last(cft__fail(CFT_E_ARG, "%s: NULL argument", call));
    if (n < 0)
        return bad(call, "the number of phases %g is negative", (double)n);
    if (!(delta > 0 && delta < 1))
        return bad(call, "delta = %g is outside (0, 1)", delta);
    for (int i = 0; i < n; i++) {
        cft_status st = check_qs(call, q[i], sigma[i]);
        if (st != CFT_OK)
            return st;
        if (steps[i] < 0)
            return bad(call, "the step count %g is negative", (double)steps[i]);
    }
    double best = INFINITY, best_order = order_at(0);
    for (int k = 0; k < NORDERS; k++) {
        double a = order_at(k), r = 0;
        for (int i = 0; i < n && r < INFINITY; i++)
            if (steps[i] > 0)
                r += (double)steps[i] * rdp_one(q[i], sigma[i], a);
        double e = to_epsilon(r, a, delta);
        if (e < best)
            best = e, best_order = a;
    }
    *epsilon = best;
    if (order)
        *order = best_order;
    return CFT_OK;
}

cft_status cft_dp_epsilon(double q, double sigma, int64_t steps, double delta, double *epsilon,
                          double *order) {
    CFT_API("cft_dp_epsilon");
    return cft_dp_epsilon_phases(1, &q, &sigma, &steps, delta, epsilon, order);
}

cft_status cft_dp_noise_multiplier(double q, int64_t steps, double epsilon, double delta,
                                   double *sigma) {
    CFT_API("cft_dp_noise_multiplier");
    const char *call = "cft_dp_noise_multiplier";
    if (!sigma)
        return cft__set_last(cft__fail(CFT_E_ARG, "%s: sigma is NULL", call));
    if (!(epsilon > 0) || isinf(epsilon))
        return bad(call, "the target epsilon = %g is not a finite number > 0", epsilon);
    double e;
    cft_status st = cft_dp_epsilon(q, 1e4, steps, delta, &e, NULL);
    if (st != CFT_OK)
        return st;
    if (e > epsilon)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "%s: even sigma = 1e4 spends epsilon = %g > %g at q = %g "
                                       "over %lld steps",
                                       call, e, epsilon, q, (long long)steps));
    double lo = 0, hi = 1e4; /* eps(hi) <= target; shrink to 0.1% */
    while (hi - lo > 1e-3 * hi) {
        double mid = lo > 0 ? sqrt(lo * hi) : hi / 64;
        if (lo == 0 && mid < 1e-6)
            break;
        cft_dp_epsilon(q, mid, steps, delta, &e, NULL);
        if (e <= epsilon)
            hi = mid;
        else
            lo = mid;
    }
    *sigma = hi;
    return CFT_OK;
}
