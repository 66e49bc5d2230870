/* dp_accountant.h: the RDP accountant of the DP-SGD examples (single
 * process and DDP): the Poisson-subsampled Gaussian mechanism's Renyi DP
 * per step at integer orders (Mironov, Talwar and Zhang 2019), summed over
 * steps and converted to (epsilon, delta), checked against published
 * values. */
#ifndef CFT_EXAMPLE_DP_ACCOUNTANT_H
#define CFT_EXAMPLE_DP_ACCOUNTANT_H

#include <math.h>
#include <stdio.h>

#define ORDER_MIN 2
#define ORDER_MAX 64

/* ---------------------------------------------------------------------
 * RDP accountant for the Poisson-subsampled Gaussian mechanism
 * --------------------------------------------------------------------- */

static inline double log_add(double a, double b) {
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    double m = fmax(a, b);
    return m + log1p(exp(-fabs(a - b)));
}

/* RDP of one step at integer order alpha >= 2: sampling rate q, noise
 * multiplier sigma (noise std / sensitivity). */
static inline double rdp_step(double q, double sigma, int alpha) {
    if (q <= 0)
        return 0;
    if (sigma <= 0)
        return INFINITY;
    double log_a = -INFINITY;
    for (int k = 0; k <= alpha; k++) {
        if (q >= 1 && k < alpha)
            continue; /* (1-q)^(alpha-k) = 0 */
        double t = lgamma(alpha + 1.0) - lgamma(k + 1.0) - lgamma(alpha - k + 1.0) + k * log(q) +
                   (k < alpha ? (alpha - k) * log1p(-q) : 0) +
                   ((double)k * k - k) / (2 * sigma * sigma);
        log_a = log_add(log_a, t);
    }
    return log_a / (alpha - 1);
}

/* epsilon at delta after `steps` steps; *alpha gets the best order and
 * *eps_mironov the bound by Mironov's conversion at its own best order */
static inline double epsilon_spent(double q, double sigma, long steps, double delta, int *alpha,
                                   double *eps_mironov) {
    double best = INFINITY, best_m = INFINITY;
    *alpha = 0;
    for (int a = ORDER_MIN; a <= ORDER_MAX; a++) {
        double r = (double)steps * rdp_step(q, sigma, a), e;
        if (delta * delta + expm1(-r) > 0)
            e = 0; /* r so small that delta >= sqrt(1 - exp(-r)) already */
        else
            e = r + log1p(-1.0 / a) - log(delta * a) / (a - 1);
        if (e < best)
            best = e, *alpha = a;
        best_m = fmin(best_m, r + log(1 / delta) / (a - 1));
    }
    *eps_mironov = best_m;
    return fmax(best, 0);
}

/* the accountant against values published with Google's dp_accounting
 * (rdp_privacy_accountant_test: q = 0.01, sigma = 2.5, 50 steps) and the
 * Gaussian mechanism's exact RDP alpha / (2 sigma^2) at q = 1 */
static inline int check_accountant(void) {
    const int orders[3] = {5, 50, 100};
    const double want[3] = {2.18075656e-03, 2.38460375e-02, 1.67416308e02};
    double worst = 0;
    for (int i = 0; i < 3; i++)
        worst = fmax(worst, fabs(50 * rdp_step(0.01, 2.5, orders[i]) / want[i] - 1));
    for (int a = 2; a <= 64; a *= 2)
        worst = fmax(worst, fabs(rdp_step(1, 1.3, a) / (a / (2 * 1.3 * 1.3)) - 1));
    printf("RDP accountant vs published values: max rel diff %.1e %s\n", worst,
           worst < 1e-6 ? "(ok)" : "(MISMATCH)");
    return worst < 1e-6 ? 0 : -1;
}

#endif
