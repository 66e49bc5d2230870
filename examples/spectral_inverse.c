/* spectral_inverse.c: FFTs, complex numbers, linear algebra and the
 * transforms together.
 *
 * The periodic advection-diffusion equation u_t + c u_x = nu u_xx on
 * [0, 2 pi) is solved exactly in Fourier space: each mode k of u(0) is
 * multiplied by exp((-nu k^2 - i c k) T), that is
 *
 *     u(T) = irfft(rfft(u(0)) * exp(complex(-nu k^2 T, -c k T)))
 *
 * Given S initial conditions and the states they reach at time T, we recover
 * theta = (log nu, c) by damped Newton steps: the gradient (cft_grad) and the
 * 2x2 Hessian (cft_hessian) of the mean squared misfit are differentiated
 * through rfft -> complex exp -> complex multiply -> irfft, and each step
 * solves (H + lambda I) d = g with cft_linalg_solve. Along the way it checks
 * the gradient against central differences, and per-sample gradients
 * (cft_vmap of cft_grad, jitted) against the full gradient: their mean must
 * equal it. All in f64; exits 1 when theta is not recovered to 1e-8 or a
 * check fails.
 *
 *   build/examples/spectral_inverse      (--quick is accepted and ignored)
 */
#define _XOPEN_SOURCE 700 /* M_PI under -std=c11 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cft/cft.h>

#define N 64    /* grid points */
#define S 8     /* initial conditions */
#define T_END 1 /* time */

/* (u0[N], theta[2]) -> u(T)[N] */
static cft_status solve_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *u0 = in[0], *theta = in[1];
    cft_array *nu = cft_exp(cft_index(theta, 0)), *c = cft_index(theta, 1);
    cft_array *k = cft_fft_rfftfreq(N, 1.0 / N, CFT_F64); /* wavenumbers 0 .. N/2 */
    cft_array *decay = cft_mul_s(cft_mul(nu, cft_square(k)), -T_END);
    cft_array *phase = cft_mul_s(cft_mul(c, k), -T_END);
    cft_array *mult = cft_exp(cft_complex(decay, phase));
    cft_array *uh = cft_fft_rfft(u0, N, -1, CFT_FFT_BACKWARD);
    out[0] = cft_fft_irfft(cft_mul(uh, mult), N, -1, CFT_FFT_BACKWARD);
    return CFT_OK;
}
static cft_fn *solve_fn, *batched_solve; /* batched over u0 */

/* (theta[2], U0[S,N], obs[S,N]) -> mean squared misfit */
static cft_status loss_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *args[2] = {in[1], in[0]}, *u;
    cft_status st = cft_fn_call(batched_solve, args, &u);
    if (st != CFT_OK)
        return st;
    out[0] = cft_mean(cft_square(cft_sub(u, in[2])), NULL, 0, false);
    return CFT_OK;
}

int main(void) {
    cft_init();
    solve_fn = cft_fn_named(cft_fn_new(solve_cb, NULL, 2, 1), "solve");
    batched_solve = cft_vmap(solve_fn, (int[]){0, CFT_NOT_BATCHED}, NULL);
    cft_fn *loss = cft_fn_named(cft_fn_new(loss_cb, NULL, 3, 1), "loss");

    /* data: smooth random initial conditions, the states they reach under
     * the true parameters */
    srand48(7);
    static double u0[S][N];
    for (int s = 0; s < S; s++)
        for (int m = 1; m <= 3; m++) {
            double a = drand48() + 0.2, ph = 2 * M_PI * drand48();
            for (int j = 0; j < N; j++)
                u0[s][j] += a * cos(m * 2 * M_PI * j / N + ph);
        }
    cft_array *U0 = cft_from_f64(&u0[0][0], (int64_t[]){S, N}, 2);
    const double nu_true = 0.05, c_true = 0.7;
    cft_array *theta_true = cft_from_f64((double[]){log(nu_true), c_true}, (int64_t[]){2}, 1);
    cft_array *obs = cft_fn_call1(batched_solve, (cft_array *[]){U0, theta_true});
    if (cft_failed(obs)) {
        fprintf(stderr, "solve: %s\n", cft_error_message(obs));
        return 1;
    }

    cft_fn *grad = cft_jit(cft_grad(loss, NULL, 0));
    cft_fn *hess = cft_jit(cft_hessian(loss, 0));
    int fails = 0;

    /* the gradient against central differences at a start point */
    cft_array *theta = cft_from_f64((double[]){log(0.1), 0.45}, (int64_t[]){2}, 1);
    cft_array *g = cft_fn_call1(grad, (cft_array *[]){theta, U0, obs});
    if (cft_failed(g)) {
        fprintf(stderr, "grad: %s\n", cft_error_message(g));
        return 1;
    }
    double fd_err = 0;
    for (int i = 0; i < 2; i++) {
        const double h = 1e-6;
        double e[2] = {0, 0};
        e[i] = h;
        cft_array *dp = cft_from_f64(e, (int64_t[]){2}, 1);
        double lp = cft_item(cft_fn_call1(loss, (cft_array *[]){cft_add(theta, dp), U0, obs}));
        double lm = cft_item(cft_fn_call1(loss, (cft_array *[]){cft_sub(theta, dp), U0, obs}));
        fd_err = fmax(fd_err, fabs((lp - lm) / (2 * h) - cft_item_at(g, i)));
    }
    printf("gradient vs central differences: max error %.2e\n", fd_err);
    fails += !(fd_err < 1e-7);

    /* per-sample gradients: the loss of one initial condition, vmapped over
     * (u0, obs) and jitted; their mean is the full gradient */
    cft_fn *per_sample =
        cft_jit(cft_vmap(cft_grad(loss, NULL, 0), (int[]){CFT_NOT_BATCHED, 0, 0}, NULL));
    cft_array *U0r = cft_reshape(U0, (int64_t[]){S, 1, N}, 3),
              *obsr = cft_reshape(obs, (int64_t[]){S, 1, N}, 3);
    cft_array *gs = cft_fn_call1(per_sample, (cft_array *[]){theta, U0r, obsr});
    double ps_err = cft_max_abs_diff(cft_mean(gs, (int[]){0}, 1, false), g);
    printf("mean of %d per-sample gradients vs the full gradient: max error %.2e\n", S, ps_err);
    fails += !(ps_err < 1e-12);

    /* damped Newton (Levenberg-Marquardt on the exact Hessian) */
    double lambda = 1e-3, l = cft_item(cft_fn_call1(loss, (cft_array *[]){theta, U0, obs}));
    printf("%4s %12s %10s %10s %9s\n", "step", "loss", "nu", "c", "lambda");
    for (int it = 0; it < 40 && l > 1e-26; it++) {
        cft_array *args[3] = {theta, U0, obs};
        cft_array *gk = cft_fn_call1(grad, args), *H = cft_fn_call1(hess, args);
        cft_array *Hd = cft_add(H, cft_mul_s(cft_eye(2, CFT_F64), lambda));
        cft_array *d = cft_linalg_solve(Hd, cft_reshape(gk, (int64_t[]){2, 1}, 2));
        if (cft_failed(d)) {
            fprintf(stderr, "newton step: %s\n", cft_error_message(d));
            return 1;
        }
        cft_array *cand = cft_sub(theta, cft_reshape(d, (int64_t[]){2}, 1));
        double lc = cft_item(cft_fn_call1(loss, (cft_array *[]){cand, U0, obs}));
        if (lc < l) {
            theta = cand, l = lc, lambda = fmax(lambda / 10, 1e-12);
        } else {
            lambda *= 10;
        }
        printf("%4d %12.4e %10.6f %10.6f %9.1e\n", it, l, exp(cft_item_at(theta, 0)),
               cft_item_at(theta, 1), lambda);
    }
    double err_nu = fabs(exp(cft_item_at(theta, 0)) - nu_true),
           err_c = fabs(cft_item_at(theta, 1) - c_true);
    printf("recovered nu = %.10f (true %.2f), c = %.10f (true %.2f): errors %.1e, %.1e\n",
           exp(cft_item_at(theta, 0)), nu_true, cft_item_at(theta, 1), c_true, err_nu, err_c);
    fails += !(err_nu < 1e-8 && err_c < 1e-8);
    printf(fails ? "FAILED\n" : "ok\n");
    return fails ? 1 : 0;
}
