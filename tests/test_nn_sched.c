/* test_nn_sched.c: learning-rate schedules against PyTorch's documented
 * examples and the exact targets of PyTorch's own scheduler tests
 * (test/optim/test_lrscheduler.py), which pin the chainable semantics:
 * StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR,
 * CosineAnnealingLR and ChainedScheduler compositions.
 *
 * Where the docstrings disagree with what PyTorch computes, the test follows
 * PyTorch's code (and its tests) and says so:
 *  - ChainedScheduler, old docstring: ConstantLR(factor=0.1, total_iters=2)
 *    + ExponentialLR(0.9), lr 1, "0.09, 0.081, 0.729, 0.6561, 0.59049";
 *    PyTorch gives 0.1, 0.09, 0.81, 0.729, 0.6561, 0.59049, ... (ExponentialLR
 *    does not decay at construction, and ConstantLR lifts its factor at
 *    epoch 2). The old numbers are neither this nor any shift of it.
 *  - ChainedScheduler, current docstring: ConstantLR(0.1, 20) +
 *    ExponentialLR(0.9) "lr = 0.05": 0.05, 0.0450, 0.0405, ..., 0.00675 (19),
 *    0.06078 (20), 0.05470 (21): exactly PyTorch's values for lr 0.5.
 *  - LinearLR, current docstring (lr 0.05, start_factor 0.05, 40 iters):
 *    0.003687, 0.004875, ... are PyTorch's values of epochs 1, 2, ...;
 *    epoch 0 is 0.0025. */
#include <math.h>
#include <string.h>

#include "check.h"

static void check_seq_(const cft_lr_schedule *s, double base, const double *want, int n, double tol,
                       double atol) {
    double got[64];
    CHECK_EQ(cft_lr_values(s, base, n, got), CFT_OK);
    for (int t = 0; t < n; t++) {
        CHECK_MSG(fabs(got[t] - want[t]) <= tol * fabs(want[t]) + atol, "epoch %d: %.17g vs %.17g",
                  t, got[t], want[t]);
        CHECK_CLOSE(cft_lr_at(s, base, t), got[t], 0, 0);
    }
}
static void check_seq(const cft_lr_schedule *s, double base, const double *want, int n,
                      double tol) {
    check_seq_(s, base, want, n, tol, 0);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    double want[64];

    TEST("ChainedScheduler: ConstantLR(0.1, 2) + ExponentialLR(0.9), lr 1") {
        cft_lr_schedule *s = cft_lr_chain(
            (cft_lr_schedule *[]){cft_lr_constant(0.1, 2), cft_lr_exponential(0.9)}, 2);
        const double seq[8] = {0.1, 0.09, 0.81, 0.729, 0.6561, 0.59049, 0.531441, 0.4782969};
        check_seq(s, 1, seq, 8, 1e-14);
    }

    TEST("ChainedScheduler: current docstring example (ConstantLR(0.1, 20) + ExponentialLR(0.9))") {
        cft_lr_schedule *s = cft_lr_chain(
            (cft_lr_schedule *[]){cft_lr_constant(0.1, 20), cft_lr_exponential(0.9)}, 2);
        const int at[6] = {0, 1, 2, 19, 20, 21};
        const double doc[6] = {0.05,    0.0450,  0.0405,
                               0.00675, 0.06078, 0.05470}; /* as printed, 4 digits */
        for (int i = 0; i < 6; i++) {
            double lr = cft_lr_at(s, 0.5, at[i]);
            CHECK_MSG(fabs(lr - doc[i]) <= 5e-6 + 1e-4 * doc[i], "epoch %d: %g vs documented %g",
                      at[i], lr, doc[i]);
            CHECK_CLOSE(lr, 0.5 * (at[i] < 20 ? 0.1 : 1) * pow(0.9, at[i]), 1e-13, 0);
        }
    }

    TEST("ChainedScheduler: PyTorch's test_chained_lr1..4 targets (lr 0.05)") {
        cft_lr_schedule *c1 = cft_lr_chain((cft_lr_schedule *[]){cft_lr_step(3, 0.1)}, 1);
        for (int t = 0; t < 12; t++)
            want[t] = 0.05 * pow(0.1, t / 3);
        check_seq(c1, 0.05, want, 12, 1e-13);
        cft_lr_schedule *c2 = cft_lr_chain((cft_lr_schedule *[]){cft_lr_linear(0.4, 1, 3)}, 1);
        const double t2[12] = {0.02, 0.03, 0.04, 0.05, 0.05, 0.05,
                               0.05, 0.05, 0.05, 0.05, 0.05, 0.05};
        check_seq(c2, 0.05, t2, 12, 1e-13);
        cft_lr_schedule *c3 =
            cft_lr_chain((cft_lr_schedule *[]){cft_lr_linear(0.4, 1, 3),
                                               cft_lr_multistep((int64_t[]){4, 8, 10}, 3, 0.1)},
                         2);
        const double t3[14] = {0.02,  0.03,   0.04,   0.05,    0.005,   0.005,   0.005,
                               0.005, 0.0005, 0.0005, 0.00005, 0.00005, 0.00005, 0.00005};
        check_seq(c3, 0.05, t3, 14, 1e-12);
        cft_lr_schedule *c4 =
            cft_lr_chain((cft_lr_schedule *[]){cft_lr_exponential(0.9), cft_lr_constant(0.2, 4),
                                               cft_lr_step(3, 0.1)},
                         3);
        for (int x = 0; x < 9; x++)
            want[x] = x < 3    ? 0.05 * 0.2 * pow(0.9, x)
                      : x == 3 ? 0.05 * 0.2 * pow(0.9, 3) * 0.1
                      : x < 6  ? 0.05 * pow(0.9, x) * 0.1
                               : 0.05 * pow(0.9, x) * 0.01;
        check_seq(c4, 0.05, want, 9, 1e-12);
    }

    TEST("StepLR and MultiStepLR: docstring examples") {
        for (int t = 0; t < 64; t++)
            want[t] = t < 30 ? 0.05 : t < 60 ? 0.005 : 0.0005;
        check_seq(cft_lr_step(30, 0.1), 0.05, want, 64, 1e-13);
        CHECK_CLOSE(cft_lr_at(cft_lr_step(30, 0.1), 0.05, 95), 0.00005, 1e-12, 0);
        for (int t = 0; t < 64; t++)
            want[t] = t < 30 ? 0.05 : 0.005;
        check_seq(cft_lr_multistep((int64_t[]){30, 80}, 2, 0.1), 0.05, want, 64, 1e-13);
        CHECK_CLOSE(cft_lr_at(cft_lr_multistep((int64_t[]){30, 80}, 2, 0.1), 0.05, 85), 0.0005,
                    1e-12, 0);
        /* PyTorch's test_multi_step_lr: milestones 2, 5, 9 */
        const double ms[12] = {0.05,   0.05,   0.005,  0.005,   0.005,   0.0005,
                               0.0005, 0.0005, 0.0005, 0.00005, 0.00005, 0.00005};
        check_seq(cft_lr_multistep((int64_t[]){2, 5, 9}, 3, 0.1), 0.05, ms, 12, 1e-12);
    }

    TEST("ConstantLR, LinearLR, ExponentialLR: docstring examples and PyTorch's targets") {
        for (int t = 0; t < 50; t++)
            want[t] = t < 40 ? 0.025 : 0.05;
        check_seq(cft_lr_constant(0.5, 40), 0.05, want, 50, 1e-14);
        /* LinearLR(start 0.5, 4 iters): the older docstring, correct */
        const double lin[6] = {0.025, 0.03125, 0.0375, 0.04375, 0.05, 0.05};
        check_seq(cft_lr_linear(0.5, 1, 4), 0.05, lin, 6, 1e-14);
        /* LinearLR(start 0.05, 40 iters): closed form; docstring numbers are epochs 1..4 */
        for (int t = 0; t < 45; t++)
            want[t] = 0.05 * (0.05 + 0.95 * (t < 40 ? t : 40) / 40.0);
        check_seq(cft_lr_linear(0.05, 1, 40), 0.05, want, 45, 1e-12);
        const double doc[4] = {0.003687, 0.004875, 0.006062, 0.00725};
        for (int i = 0; i < 4; i++)
            CHECK_CLOSE(cft_lr_at(cft_lr_linear(0.05, 1, 40), 0.05, i + 1), doc[i], 0, 1e-6);
        /* PyTorch's test_get_last_lr_linearlr: start 1/4, end 3/5, 4 iters */
        for (int t = 0; t < 10; t++)
            want[t] = 0.05 * (t < 4 ? 0.25 + t * (0.6 - 0.25) / 4 : 0.6);
        check_seq(cft_lr_linear(0.25, 0.6, 4), 0.05, want, 10, 1e-13);
        for (int t = 0; t < 20; t++)
            want[t] = 0.05 * pow(0.95, t);
        check_seq(cft_lr_exponential(0.95), 0.05, want, 20, 1e-13);
    }

    TEST("CosineAnnealingLR: closed form over several periods; composed with StepLR") {
        double eta = 1e-10;
        for (int t = 0; t < 30; t++)
            want[t] = eta + (0.05 - eta) * (1 + cos(M_PI * t / 10)) / 2;
        check_seq(cft_lr_cosine(10, eta), 0.05, want, 30, 1e-9);
        for (int t = 0; t < 25; t++)
            want[t] = 0.01 + (0.1 - 0.01) * (1 + cos(M_PI * t / 7)) / 2;
        check_seq(cft_lr_cosine(7, 0.01), 0.1, want, 25, 1e-12);
        /* PyTorch's test_compound_cosanneal_and_step_lr */
        cft_lr_schedule *c =
            cft_lr_chain((cft_lr_schedule *[]){cft_lr_cosine(10, eta), cft_lr_step(3, 0.1)}, 2);
        for (int t = 0; t < 10; t++)
            want[t] = (eta + (0.05 - eta) * (1 + cos(M_PI * t / 10)) / 2) * pow(0.1, t / 3);
        /* the recursive form applies eta_min to the already stepped-down lr:
         * the product differs from it by O(eta_min) (PyTorch's test: atol 1e-5) */
        check_seq_(c, 0.05, want, 10, 1e-9, 1e-10);
        /* warm-up then cosine, as a chain: lr = linear factor * cosine */
        cft_lr_schedule *w =
            cft_lr_chain((cft_lr_schedule *[]){cft_lr_linear(0.1, 1, 5), cft_lr_cosine(20, 0)}, 2);
        for (int t = 0; t < 20; t++)
            want[t] = 1.0 * (0.1 + 0.9 * (t < 5 ? t : 5) / 5.0) * (1 + cos(M_PI * t / 20)) / 2;
        check_seq(w, 1, want, 19, 1e-12);
    }

    TEST("bad schedules give NaN and an error") {
        cft_lr_schedule *bad[5] = {cft_lr_step(0, 0.1), cft_lr_constant(2, 3),
                                   cft_lr_linear(0, 1, 3), cft_lr_cosine(0, 0),
                                   cft_lr_multistep((int64_t[]){5, 2}, 2, 0.1)};
        for (int i = 0; i < 5; i++) {
            cft_clear_error();
            CHECK(isnan(cft_lr_at(bad[i], 0.1, 3)));
            CHECK(cft_last_error() == CFT_E_ARG && strstr(cft_last_error_message(), "cft_lr_"));
        }
        cft_lr_schedule *chain =
            cft_lr_chain((cft_lr_schedule *[]){cft_lr_exponential(0.5), bad[0]}, 2);
        CHECK(isnan(cft_lr_at(chain, 0.1, 1)));
        double out[3];
        CHECK(cft_lr_values(bad[3], 0.1, 3, out) != CFT_OK && isnan(out[2]));
        CHECK(isnan(cft_lr_at(cft_lr_exponential(0.5), 0.1, -1)));
        CHECK(isnan(cft_lr_at(NULL, 0.1, 1)));
    }

    return check_summary();
}
