/* test_device_linalg.c: cholesky and triangular_solve on a device, as the
 * test backend runs them (tests/support/test_backend.c): the batched
 * column-major calls of src/cuda/solver_map.h, what the CUDA backend gives
 * cuSOLVER (potrfBatched) and cuBLAS (trsmBatched), with LAPACK and CBLAS
 * on the backend's own memory. So a mistake in the mapping (a triangle,
 * a side, a leading dim, the output's zeroed half) fails here without a
 * GPU.
 *
 * Checked against the host (tolerances: f64 1e-10, the same LAPACK
 * routines on the other triangle round differently by a few ulps; f32
 * 2e-4 relative, matrices of condition ~10): cholesky of batched SPD
 * matrices in f32 and f64, and of a non-symmetric one (both factor
 * (A + A^T) / 2); every triangular_solve (left / right, upper / lower,
 * transposed or not, unit diagonal or not) on a batch, square and
 * rectangular right-hand sides; a matrix that is not positive definite an
 * error naming cholesky, the device and the batch element; solve (LU:
 * getrf, two right solves, the pivots' row swaps as the CUDA backend's
 * kernel) in f32/f64 on batches that need pivoting, a singular element
 * named, and the gradient of a solve (which solves with A^T); the gradient
 * of a log-determinant through cholesky and triangular solves on the
 * device; slogdet (getrf, the signs and logs as the CUDA backend's
 * kernel) on batches with pivoting and both signs, and of a singular
 * matrix (sign 0, -inf); eigh (syevd on the column-major upper triangle,
 * V transposed by the CUDA backend's kernel) of non-symmetric batches
 * (both read the lower triangle), eigenvalues to the host's and
 * eigenvectors up to sign; qr (A written column-major, geqrf, R, orgqr,
 * Q) of tall, wide and square batches against the host's Q and R and
 * their product; svd (gesvd on A as it lies when wide, else on A written
 * column-major) of the same shapes, singular values to the host's, U
 * diag(s) Vh = A, vectors up to sign; and that the backend ran each of
 * them itself (counts.solvers). *
 * With CFT_TEST_DEVICE=cuda:0 (ctest's gpu_linalg) the same checks run on a
 * GPU, on cuSOLVER and cuBLAS themselves (skipped, 77, without one). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "support/test_backend.h"

static cft_array *rnd(uint64_t seed, cft_dtype dt, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), dt, shape, nd);
}

/* batched SPD: X X^T / n + I */
static cft_array *spd(uint64_t seed, cft_dtype dt, int64_t b, int64_t n) {
    cft_array *x = rnd(seed, dt, (int64_t[]){b, n, n}, 3);
    cft_array *eye = cft_eye(n, dt);
    return cft_add(cft_mul_s(cft_matmul(x, cft_mT(x)), 1.0 / (double)n), eye);
}

static cft_array *to_host(cft_array *x) {
    return cft_device_put(x, cft_device("cpu"));
}

static bool on(const cft_array *x, const cft_dev *d) {
    return cft_device_of(x) == d;
}

/* sum(solve(A, b)^2): its gradient solves with A^T on the device */
static cft_status solve_sq(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_square(cft_linalg_solve(in[0], in[1])), NULL, 0, false);
    return CFT_OK;
}

/* 2 * sum(log(diag(cholesky(A)))) = log det A */
static cft_status logdet(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *L = cft_linalg_cholesky(in[0]);
    cft_array *y = cft_linalg_solve_triangular(L, in[1], false, true, false, false);
    out[0] = cft_add(cft_mul_s(cft_sum(cft_log(cft_diagonal(L, 0, -2, -1)), NULL, 0, false), 2.0),
                     cft_sum(cft_square(y), NULL, 0, false));
    return CFT_OK;
}

static const char *name; /* the device: CFT_TEST_DEVICE, default test:0 */
static long on_test;     /* 1 on the test backend, whose solver calls are counted */

/* the test backend's solver calls so far (0 elsewhere: the checks of
 * counts then expect none) */
static long solvers(void) {
    return on_test ? test_backend_counts_now().solvers : 0;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    name = getenv("CFT_TEST_DEVICE") ? getenv("CFT_TEST_DEVICE") : "test:0";
    on_test = !strncmp(name, "test", 4);
    if (on_test && test_backend_register() != 0)
        return 1;
    const cft_dev *d = cft_device(name);
    if (cft_device_error(d)) {
        printf("test_device_linalg on %s: skipped: %s\n", name,
               cft_error_message(cft_device_error(d)));
        return 77;
    }
    TEST("cholesky on a device: batched, f32 and f64, the host's factors") {
        for (int f = 0; f < 2; f++) {
            cft_dtype dt = f ? CFT_F64 : CFT_F32;
            double tol = f ? 1e-10 : 2e-4;
            for (int64_t n = 1; n <= 33; n += 8) {
                cft_array *A = spd(10 + (uint64_t)n, dt, 3, n);
                long c0 = solvers();
                cft_array *L = cft_linalg_cholesky(cft_device_put(A, d));
                CHECK_MSG(!cft_failed(L), "%s", cft_error_message(L));
                CHECK(on(L, d));
                CHECK_EQ(solvers() - c0, on_test);
                CHECK_ARRAY_CLOSE(to_host(L), cft_linalg_cholesky(A), tol, tol);
            }
        }
    }
    TEST("cholesky of a non-symmetric matrix factors its symmetric part, as on the host") {
        cft_array *A = spd(3, CFT_F64, 2, 6), *N = rnd(4, CFT_F64, (int64_t[]){2, 6, 6}, 3);
        cft_array *B = cft_add(A, cft_sub(N, cft_mT(N))); /* A plus an antisymmetric part */
        cft_array *L = cft_linalg_cholesky(cft_device_put(B, d));
        CHECK_ARRAY_CLOSE(to_host(L), cft_linalg_cholesky(B), 1e-10, 1e-10);
        CHECK_ARRAY_CLOSE(to_host(L), cft_linalg_cholesky(A), 1e-10, 1e-10);
    }
    TEST("every triangular_solve on a device: sides, triangles, op, unit diagonal") {
        for (int f = 0; f < 2; f++) {
            cft_dtype dt = f ? CFT_F64 : CFT_F32;
            double tol = f ? 1e-10 : 2e-4;
            /* well-conditioned triangles: a Cholesky factor of an SPD matrix */
            cft_array *T = cft_linalg_cholesky(spd(20, dt, 2, 5));
            cft_array *U = cft_mT(T), *Td = cft_device_put(T, d), *Ud = cft_device_put(U, d);
            for (int k = 0; k < 16; k++) {
                bool upper = k & 1, left = k & 2, tr = k & 4, unit = k & 8;
                int64_t bs[3] = {2, left ? 5 : 3, left ? 3 : 5};
                cft_array *Bm = rnd(30 + (uint64_t)k, dt, bs, 3);
                cft_array *A = upper ? U : T, *Ad = upper ? Ud : Td;
                long c0 = solvers();
                cft_array *X =
                    cft_linalg_solve_triangular(Ad, cft_device_put(Bm, d), upper, left, tr, unit);
                CHECK_MSG(!cft_failed(X), "%s", cft_error_message(X));
                CHECK(on(X, d));
                CHECK_MSG(solvers() - c0 == on_test,
                          "upper %d left %d transpose %d unit %d: not the backend's", upper, left,
                          tr, unit);
                cft_array *want = cft_linalg_solve_triangular(A, Bm, upper, left, tr, unit);
                CHECK_MSG(cft_max_abs_diff(to_host(X), want) <= tol * 10,
                          "upper %d left %d transpose %d unit %d (%s): off by %g", upper, left, tr,
                          unit, f ? "f64" : "f32", cft_max_abs_diff(to_host(X), want));
            }
        }
    }
    TEST("solve (LU) on a device: batched, f32 and f64, the host's solutions") {
        for (int f = 0; f < 2; f++) {
            cft_dtype dt = f ? CFT_F64 : CFT_F32;
            double tol = f ? 1e-10 : 1e-4;
            for (int64_t n = 1; n <= 17; n += 4) {
                /* well-conditioned, not symmetric, pivoting needed */
                cft_array *A = cft_add(rnd(50 + (uint64_t)n, dt, (int64_t[]){3, n, n}, 3),
                                       cft_mul_s(cft_eye(n, dt), 0.5 * (double)n));
                A = cft_flip(A, (int[]){1}, 1); /* rows reversed: the pivots move them back */
                cft_array *B = rnd(60 + (uint64_t)n, dt, (int64_t[]){3, n, 2}, 3);
                long c0 = solvers();
                cft_array *X = cft_linalg_solve(cft_device_put(A, d), cft_device_put(B, d));
                CHECK_MSG(!cft_failed(X), "%s", cft_error_message(X));
                CHECK(on(X, d));
                CHECK_EQ(solvers() - c0, on_test);
                CHECK_ARRAY_CLOSE(to_host(X), cft_linalg_solve(A, B), tol, tol);
            }
        }
    }
    TEST("a singular matrix: an error naming solve and the element") {
        cft_array *A = rnd(70, CFT_F64, (int64_t[]){2, 3, 3}, 3);
        cft_array *Z = cft_concatenate(
            (cft_array *[]){cft_slice(A, (int64_t[]){0, 0, 0}, (int64_t[]){1, 3, 3}, NULL),
                            cft_zeros(CFT_F64, (int64_t[]){1, 3, 3}, 3)},
            2, 0);
        cft_array *X = cft_linalg_solve(
            cft_device_put(Z, d), cft_device_put(rnd(71, CFT_F64, (int64_t[]){2, 3, 1}, 3), d));
        CHECK(cft_failed(X));
        const char *m = cft_error_message(X);
        CHECK_MSG(strstr(m, "solve") && strstr(m, name) && strstr(m, "singular") &&
                      strstr(m, "batch element 1"),
                  "%s", m);
    }
    TEST("a matrix that is not positive definite: an error naming cholesky and the element") {
        cft_array *A = spd(5, CFT_F64, 3, 4);
        cft_array *neg = cft_concatenate(
            (cft_array *[]){cft_slice(A, (int64_t[]){0, 0, 0}, (int64_t[]){1, 4, 4}, NULL),
                            cft_neg(cft_slice(A, (int64_t[]){1, 0, 0}, (int64_t[]){2, 4, 4}, NULL)),
                            cft_slice(A, (int64_t[]){2, 0, 0}, (int64_t[]){3, 4, 4}, NULL)},
            3, 0);
        cft_array *L = cft_linalg_cholesky(cft_device_put(neg, d));
        CHECK(cft_failed(L));
        const char *m = cft_error_message(L);
        CHECK_MSG(strstr(m, "cholesky") && strstr(m, name) && strstr(m, "not positive definite") &&
                      strstr(m, "batch element 1"),
                  "%s", m);
    }
    TEST("the gradient of a log-determinant through cholesky and solves, on a device") {
        cft_array *A = spd(7, CFT_F64, 1, 6), *b = rnd(8, CFT_F64, (int64_t[]){1, 6, 2}, 3);
        cft_fn *g = cft_grad(cft_fn_new(logdet, NULL, 2, 1), (int[]){0, 1}, 2);
        cft_array *host[2] = {A, b}, *dev[2] = {cft_device_put(A, d), cft_device_put(b, d)};
        cft_array *want[2], *got[2];
        CHECK_EQ(cft_fn_call(g, host, want), CFT_OK);
        long c0 = solvers();
        CHECK_EQ(cft_fn_call(g, dev, got), CFT_OK);
        CHECK(solvers() - c0 >= 3 * on_test);
        for (int k = 0; k < 2; k++) {
            CHECK(on(got[k], d));
            CHECK_ARRAY_CLOSE(to_host(got[k]), want[k], 1e-9, 1e-9);
        }
    }
    TEST("slogdet on a device: batched, f32 and f64, signs of both kinds, the host's values") {
        for (int f = 0; f < 2; f++) {
            cft_dtype dt = f ? CFT_F64 : CFT_F32;
            double tol = f ? 1e-10 : 1e-4;
            for (int64_t n = 1; n <= 17; n += 4) {
                /* rows reversed (pivoting; a sign from the row exchanges),
                 * negative and positive determinants in one batch */
                cft_array *A = cft_add(rnd(90 + (uint64_t)n, dt, (int64_t[]){4, n, n}, 3),
                                       cft_mul_s(cft_eye(n, dt), 0.5 * (double)n));
                A = cft_flip(A, (int[]){1}, 1);
                A = cft_mul(A,
                            cft_reshape(cft_from_f64((double[]){1, -1, 2, -0.5}, (int64_t[]){4}, 1),
                                        (int64_t[]){4, 1, 1}, 3));
                A = cft_astype(A, dt);
                cft_array *s, *l, *hs, *hl;
                long c0 = solvers();
                CHECK_EQ(cft_linalg_slogdet(cft_device_put(A, d), &s, &l), CFT_OK);
                CHECK_EQ(solvers() - c0, on_test);
                CHECK(on(s, d) && on(l, d));
                CHECK_EQ(cft_linalg_slogdet(A, &hs, &hl), CFT_OK);
                CHECK_ARRAY_CLOSE(to_host(s), hs, 0, 0);
                CHECK_ARRAY_CLOSE(to_host(l), hl, tol, tol);
            }
        }
    }
    TEST("slogdet of a singular matrix on a device: sign 0, logabsdet -inf, as on the host") {
        double v[2][9] = {{1, 2, 3, 2, 4, 6, 1, 0, 1}, {2, 0, 0, 0, 3, 0, 0, 0, -1}};
        cft_array *A = cft_from_f64(&v[0][0], (int64_t[]){2, 3, 3}, 3), *s, *l;
        CHECK_EQ(cft_linalg_slogdet(cft_device_put(A, d), &s, &l), CFT_OK);
        CHECK_ARRAY_CLOSE(to_host(s), cft_from_f64((double[]){0, -1}, (int64_t[]){2}, 1), 0, 0);
        CHECK_ARRAY_CLOSE(
            to_host(l), cft_from_f64((double[]){-INFINITY, log(6.0)}, (int64_t[]){2}, 1), 1e-12, 0);
    }
    TEST("eigh on a device: batched, f32 and f64, the host's values; vectors up to sign") {
        for (int f = 0; f < 2; f++) {
            cft_dtype dt = f ? CFT_F64 : CFT_F32;
            double tol = f ? 1e-9 : 2e-4;
            for (int64_t n = 1; n <= 17; n += 4) {
                /* not symmetric: both read the lower triangle */
                cft_array *A = rnd(100 + (uint64_t)n, dt, (int64_t[]){3, n, n}, 3), *w, *V, *hw,
                          *hV;
                long c0 = solvers();
                CHECK_EQ(cft_linalg_eigh(cft_device_put(A, d), &w, &V), CFT_OK);
                CHECK_EQ(solvers() - c0, on_test);
                CHECK(on(w, d) && on(V, d));
                CHECK_EQ(cft_linalg_eigh(A, &hw, &hV), CFT_OK);
                CHECK_ARRAY_CLOSE(to_host(w), hw, tol, tol);
                /* each column the host's, or its negative: |V^T hV| = I */
                cft_array *P = cft_abs(cft_matmul(cft_mT(to_host(V)), hV));
                CHECK_MSG(
                    cft_max_abs_diff(
                        P, cft_broadcast_to(cft_eye(n, dt), (int64_t[]){3, n, n}, 3)) <= tol * 10,
                    "n %lld (%s): eigenvectors off by %g", (long long)n, f ? "f64" : "f32",
                    cft_max_abs_diff(P, cft_broadcast_to(cft_eye(n, dt), (int64_t[]){3, n, n}, 3)));
            }
        }
    }
    TEST("qr on a device: batched, tall, wide and square, f32 and f64, the host's Q and R") {
        static const int64_t shapes[][2] = {{5, 3}, {3, 5}, {4, 4}, {1, 3}, {6, 1}, {17, 9}};
        for (int f = 0; f < 2; f++) {
            cft_dtype dt = f ? CFT_F64 : CFT_F32;
            double tol = f ? 1e-10 : 1e-4;
            for (int s = 0; s < 6; s++) {
                int64_t m = shapes[s][0], n = shapes[s][1];
                cft_array *A = rnd(120 + (uint64_t)s, dt, (int64_t[]){3, m, n}, 3), *Q, *R, *hQ,
                          *hR;
                long c0 = solvers();
                CHECK_EQ(cft_linalg_qr(cft_device_put(A, d), &Q, &R), CFT_OK);
                CHECK_EQ(solvers() - c0, on_test);
                CHECK(on(Q, d) && on(R, d));
                CHECK_EQ(cft_linalg_qr(A, &hQ, &hR), CFT_OK);
                CHECK_ARRAY_CLOSE(to_host(Q), hQ, tol, tol);
                CHECK_ARRAY_CLOSE(to_host(R), hR, tol, tol);
                CHECK_ARRAY_CLOSE(cft_matmul(to_host(Q), to_host(R)), A, tol * 10, tol * 10);
            }
        }
    }
    TEST("svd on a device: batched, tall, wide and square, f32 and f64; vectors up to sign") {
        static const int64_t shapes[][2] = {{5, 3}, {3, 5}, {4, 4}, {1, 3}, {6, 1}, {9, 17}};
        for (int f = 0; f < 2; f++) {
            cft_dtype dt = f ? CFT_F64 : CFT_F32;
            double tol = f ? 1e-9 : 2e-4;
            for (int sh = 0; sh < 6; sh++) {
                int64_t m = shapes[sh][0], n = shapes[sh][1], k = m < n ? m : n;
                cft_array *A = rnd(140 + (uint64_t)sh, dt, (int64_t[]){3, m, n}, 3), *U, *S, *Vh,
                          *hU, *hS, *hVh;
                long c0 = solvers();
                CHECK_EQ(cft_linalg_svd(cft_device_put(A, d), &U, &S, &Vh), CFT_OK);
                CHECK_EQ(solvers() - c0, on_test);
                CHECK(on(U, d) && on(S, d) && on(Vh, d));
                CHECK_EQ(cft_linalg_svd(A, &hU, &hS, &hVh), CFT_OK);
                U = to_host(U), S = to_host(S), Vh = to_host(Vh);
                CHECK_ARRAY_CLOSE(S, hS, tol, tol);
                /* U diag(s) Vh = A; each singular vector the host's or its
                 * negative (random matrices: distinct singular values) */
                CHECK_ARRAY_CLOSE(cft_matmul(cft_mul(U, cft_expand_dims(S, -2)), Vh), A, tol * 10,
                                  tol * 10);
                cft_array *I = cft_broadcast_to(cft_eye(k, dt), (int64_t[]){3, k, k}, 3);
                double du = cft_max_abs_diff(cft_abs(cft_matmul(cft_mT(U), hU)), I),
                       dv = cft_max_abs_diff(cft_abs(cft_matmul(Vh, cft_mT(hVh))), I);
                CHECK_MSG(du <= tol * 10 && dv <= tol * 10, "[%lld, %lld] %s: U off by %g, V by %g",
                          (long long)m, (long long)n, f ? "f64" : "f32", du, dv);
            }
        }
    }
    TEST("the gradient of a solve (A^T solves in its transpose) on a device") {
        cft_array *A = cft_add(rnd(80, CFT_F64, (int64_t[]){2, 5, 5}, 3),
                               cft_mul_s(cft_eye(5, CFT_F64), 3.0)),
                  *b = rnd(81, CFT_F64, (int64_t[]){2, 5, 3}, 3);
        cft_fn *g = cft_grad(cft_fn_new(solve_sq, NULL, 2, 1), (int[]){0, 1}, 2);
        cft_array *want[2], *got[2];
        CHECK_EQ(cft_fn_call(g, (cft_array *[]){A, b}, want), CFT_OK);
        long c0 = solvers();
        CHECK_EQ(cft_fn_call(g, (cft_array *[]){cft_device_put(A, d), cft_device_put(b, d)}, got),
                 CFT_OK);
        CHECK(solvers() - c0 >= 2 * on_test);
        for (int k = 0; k < 2; k++)
            CHECK_ARRAY_CLOSE(to_host(got[k]), want[k], 1e-9, 1e-9);
    }
    return check_summary();
}
