/* test_linalg.c: properties of cft/linalg.h beyond test_prims' per-primitive
 * rows: reconstructions on batches (L L^T = A, Q R = A, U S Vh = A, A x = b,
 * A inv(A) = I), gradients of log-determinants and eigenvalue sums against
 * finite differences, the Hessian of log|det A| against its closed form
 * -A^-T (x) A^-1, errors naming the batch element, and the composites
 * (pinv, lstsq, norms, matrix_power, cross, matrix_exp).
 * Usage: test_linalg [substring of test names]. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double unit(void) { /* splitmix64 in [-1, 1) */
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-52 - 1;
}
static cft_array *randn(const int64_t *shape, int nd) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = unit();
    cft_array *x = cft_from_f64(v, shape, nd);
    free(v);
    return x;
}
/* batch of SPD matrices x x^T + n I */
static cft_array *spd(const int64_t *shape, int nd) {
    cft_array *x = randn(shape, nd);
    return cft_add(cft_matmul(x, cft_mT(x)),
                   cft_mul_s(cft_eye(shape[nd - 1], CFT_F64), (double)shape[nd - 1]));
}
/* x + s I */
static cft_array *shifted(const int64_t *shape, int nd, double s) {
    return cft_add(randn(shape, nd), cft_mul_s(cft_eye(shape[nd - 1], CFT_F64), s));
}

static cft_status fn_logdet(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *l;
    cft_linalg_slogdet(in[0], NULL, &l);
    out[0] = l;
    return CFT_OK;
}
static cft_status fn_chol_logdet(void *env, int nin, cft_array *const *in, int nout,
                                 cft_array **out) {
    (void)env, (void)nin, (void)nout; /* log det A = 2 sum log diag L */
    cft_array *L = cft_linalg_cholesky(in[0]);
    int64_t n = cft_array_aval(in[0]).shape[0];
    out[0] =
        cft_mul_s(cft_sum(cft_log(cft_sum(cft_mul(L, cft_eye(n, CFT_F64)), (int[]){-1}, 1, false)),
                          NULL, 0, false),
                  2);
    return CFT_OK;
}
static cft_status fn_eigsum(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout; /* sum of w^3 (sum w alone is the trace) */
    out[0] = cft_sum(cft_integer_pow(cft_linalg_eigvalsh(in[0]), 3), NULL, 0, false);
    return CFT_OK;
}
static cft_status fn_expm_sum(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul(cft_linalg_matrix_exp(in[0]), cft_linalg_matrix_exp(in[0])), NULL, 0,
                     false);
    return CFT_OK;
}
static cft_status fn_nuc(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(cft_linalg_matrix_norm(in[0], CFT_NORM_NUC, false),
                     cft_linalg_matrix_norm(in[0], CFT_NORM_2, false));
    return CFT_OK;
}
static cft_status fn_cholesky(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_linalg_cholesky(in[0]);
    return CFT_OK;
}

static cft_status fn_eigvecs(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_linalg_eigh(in[0], NULL, &out[0]);
    return CFT_OK;
}
static cft_status fn_qr_r(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_linalg_qr(in[0], NULL, &out[0]);
    return CFT_OK;
}

/* grad of a scalar f at x against central differences, every entry */
static void check_grad_fd(cft_fn_cb cb, cft_array *x, double tol) {
    cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(cb, NULL, 1, 1), NULL, 0), &x);
    CHECK_MSG(!cft_failed(g), "grad: %s", cft_error_message(g));
    if (cft_failed(g))
        return;
    cft_aval a = cft_array_aval(x);
    int64_t n = cft_array_size(x);
    double *v = malloc(sizeof(double) * (size_t)n), *fd = malloc(sizeof(double) * (size_t)n),
           h = 1e-6;
    cft_copy_to(x, CFT_F64, v);
    cft_fn *f = cft_fn_new(cb, NULL, 1, 1);
    for (int64_t i = 0; i < n; i++) {
        double v0 = v[i];
        v[i] = v0 + h;
        cft_array *xp = cft_from_f64(v, a.shape, a.ndim);
        v[i] = v0 - h;
        cft_array *xm = cft_from_f64(v, a.shape, a.ndim);
        v[i] = v0;
        fd[i] = (cft_item(cft_fn_call1(f, &xp)) - cft_item(cft_fn_call1(f, &xm))) / (2 * h);
    }
    CHECK_ARRAY_CLOSE(g, cft_from_f64(fd, a.shape, a.ndim), tol, tol);
    free(v);
    free(fd);
}

/* sum(W * solve(A, B)), W = env */
static cft_status fn_wsolve(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul((cft_array *)env, cft_linalg_solve(in[0], in[1])), NULL, 0, false);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    const int64_t b34[3] = {2, 4, 4}, b23[3] = {2, 3, 3};

    TEST("cholesky: L L^T = A on a batch, L lower") {
        cft_array *A = spd(b34, 3), *L = cft_linalg_cholesky(A);
        CHECK_ARRAY_CLOSE(cft_matmul(L, cft_mT(L)), A, 1e-12, 1e-12);
        CHECK_ARRAY_CLOSE(cft_mul(L, cft_ones(CFT_F64, (int64_t[]){4, 4}, 2)), L, 0, 0);
        double *v = malloc(sizeof(double) * 32);
        cft_copy_to(L, CFT_F64, v);
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 4; i++)
                for (int j = i + 1; j < 4; j++)
                    CHECK(v[b * 16 + i * 4 + j] == 0);
        free(v);
    }
    TEST("cholesky: f32 batch reconstructs") {
        cft_array *A = cft_astype(spd(b34, 3), CFT_F32), *L = cft_linalg_cholesky(A);
        CHECK(cft_array_dtype(L) == CFT_F32);
        CHECK_ARRAY_CLOSE(cft_matmul(L, cft_mT(L)), A, 1e-5, 1e-5);
    }
    TEST("cholesky: factors (A + A^T)/2 of a non-symmetric A, from a transposed view too, at "
         "sizes past the kernel's tiles and L1 path (f32, f64)") {
        const int64_t ns[4] = {5, 40, 70, 100};
        for (int f = 0; f < 2; f++)
            for (int t = 0; t < 4; t++) {
                int64_t n = ns[t], s[3] = {3, n, n};
                cft_dtype dt = f ? CFT_F32 : CFT_F64;
                cft_array *S = spd(s, 3), *R = randn(s, 3);
                cft_array *A = cft_astype(cft_add(S, cft_sub(R, cft_mT(R))), dt); /* S + skew */
                cft_array *L = cft_linalg_cholesky(A);
                double tol = f ? 2e-5 * (double)n : 1e-12 * (double)n;
                CHECK_ARRAY_CLOSE(cft_matmul(L, cft_mT(L)), cft_astype(S, dt), tol, tol);
                CHECK_ARRAY_CLOSE(cft_linalg_cholesky(cft_mT(A)), L, 0, 0);
                double *v = malloc(sizeof(double) * (size_t)(3 * n * n));
                cft_copy_to(L, CFT_F64, v);
                bool upper_zero = true, diag_pos = true;
                for (int64_t b = 0; b < 3; b++)
                    for (int64_t i = 0; i < n; i++) {
                        diag_pos &= v[(b * n + i) * n + i] > 0;
                        for (int64_t j = i + 1; j < n; j++)
                            upper_zero &= v[(b * n + i) * n + j] == 0;
                    }
                CHECK_MSG(upper_zero && diag_pos, "n = %lld, %s", (long long)n, f ? "f32" : "f64");
                free(v);
            }
    }
    TEST("solve: residuals past the kernel's tiles, a strided B, and the transposed solve (vjp)") {
        for (int f = 0; f < 2; f++) {
            cft_dtype dt = f ? CFT_F32 : CFT_F64;
            double tol = f ? 1e-3 : 1e-10;
            cft_array *A = cft_astype(shifted((int64_t[]){2, 70, 70}, 3, 20), dt);
            cft_array *Bt = cft_astype(randn((int64_t[]){2, 5, 70}, 3), dt), *B = cft_mT(Bt);
            cft_array *X = cft_linalg_solve(A, B);
            CHECK_ARRAY_CLOSE(cft_matmul(A, X), B, tol, tol);
            /* d/dB sum(W * solve(A, B)) = A^-T W, by the transposed kernel */
            cft_array *W = cft_astype(randn((int64_t[]){2, 70, 5}, 3), dt);
            cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(fn_wsolve, W, 2, 1), (int[]){1}, 1),
                                        (cft_array *[]){A, B});
            CHECK_ARRAY_CLOSE(cft_matmul(cft_mT(A), g), W, tol, tol);
        }
    }
    TEST("qr: Q R = A, Q^T Q = I (tall and wide)") {
        for (int w = 0; w < 2; w++) {
            int64_t s[3] = {3, w ? 3 : 5, w ? 5 : 3};
            cft_array *A = randn(s, 3), *Q, *R;
            CHECK_EQ(cft_linalg_qr(A, &Q, &R), CFT_OK);
            CHECK_ARRAY_CLOSE(cft_matmul(Q, R), A, 1e-12, 1e-12);
            CHECK_ARRAY_CLOSE(cft_matmul(cft_mT(Q), Q),
                              cft_broadcast_to(cft_eye(3, CFT_F64), (int64_t[]){3, 3, 3}, 3), 1e-12,
                              1e-12);
        }
    }
    TEST("svd: U diag(S) Vh = A, S descending (tall and wide)") {
        for (int w = 0; w < 2; w++) {
            int64_t s[3] = {2, w ? 3 : 5, w ? 5 : 3};
            cft_array *A = randn(s, 3), *U, *S, *Vh;
            CHECK_EQ(cft_linalg_svd(A, &U, &S, &Vh), CFT_OK);
            CHECK_ARRAY_CLOSE(cft_matmul(cft_mul(U, cft_expand_dims(S, -2)), Vh), A, 1e-12, 1e-12);
            CHECK_ARRAY_CLOSE(cft_linalg_svdvals(A), S, 0, 0);
            CHECK(cft_item_at(S, 0) >= cft_item_at(S, 1) && cft_item_at(S, 1) >= cft_item_at(S, 2));
        }
    }
    TEST("eigh: V diag(w) V^T = A, w ascending") {
        cft_array *A = spd(b34, 3), *w, *V;
        CHECK_EQ(cft_linalg_eigh(A, &w, &V), CFT_OK);
        CHECK_ARRAY_CLOSE(cft_matmul(cft_mul(V, cft_expand_dims(w, -2)), cft_mT(V)), A, 1e-12,
                          1e-12);
        for (int i = 0; i < 3; i++)
            CHECK(cft_item_at(w, i) <= cft_item_at(w, i + 1));
    }
    TEST("solve: A x = b (matrix, vector, broadcast batch); inv") {
        cft_array *A = shifted(b34, 3, 3), *B = randn((int64_t[]){4, 2}, 2),
                  *b = randn((int64_t[]){2, 4}, 2);
        cft_array *X = cft_linalg_solve(A, B);
        CHECK_ARRAY_CLOSE(cft_matmul(A, X), cft_broadcast_to(B, (int64_t[]){2, 4, 2}, 3), 1e-12,
                          1e-12);
        cft_array *x = cft_linalg_solve(A, b);
        CHECK_ARRAY_CLOSE(cft_squeeze(cft_matmul(A, cft_expand_dims(x, -1)), (int[]){-1}, 1), b,
                          1e-12, 1e-12);
        CHECK_ARRAY_CLOSE(cft_matmul(A, cft_linalg_inv(A)),
                          cft_broadcast_to(cft_eye(4, CFT_F64), b34, 3), 1e-12, 1e-12);
    }
    TEST("solve_triangular: lower and upper, left and right") {
        cft_array *A = shifted(b34, 3, 3), *B = randn(b34, 3);
        cft_array *L = cft_linalg_cholesky(spd(b34, 3)), *U = cft_mT(L);
        CHECK_ARRAY_CLOSE(
            cft_matmul(L, cft_linalg_solve_triangular(L, B, false, true, false, false)), B, 1e-12,
            1e-12);
        CHECK_ARRAY_CLOSE(
            cft_matmul(cft_linalg_solve_triangular(U, B, true, false, false, false), U), B, 1e-12,
            1e-12);
        CHECK_ARRAY_CLOSE(
            cft_matmul(cft_mT(L), cft_linalg_solve_triangular(L, B, false, true, true, false)), B,
            1e-12, 1e-12);
        (void)A;
    }
    TEST("det / slogdet: det(A B) = det A det B; singular gives sign 0, -inf") {
        cft_array *A = shifted(b23, 3, 1), *B = shifted(b23, 3, 1);
        CHECK_ARRAY_CLOSE(cft_linalg_det(cft_matmul(A, B)),
                          cft_mul(cft_linalg_det(A), cft_linalg_det(B)), 1e-12, 1e-12);
        double z[9] = {1, 2, 3, 2, 4, 6, 0, 1, 1};
        cft_array *S = cft_from_f64(z, (int64_t[]){3, 3}, 2), *s, *l;
        CHECK_EQ(cft_linalg_slogdet(S, &s, &l), CFT_OK);
        CHECK_CLOSE(cft_item(s), 0, 0, 0);
        CHECK(isinf(cft_item(l)) && cft_item(l) < 0);
    }
    TEST("errors: cholesky of a non-PD batch element names it") {
        double v[2 * 2 * 4] = {2, 0, 0, 2, 1, 0, 0, 1,
                               4, 0, 0, 1, 1, 2, 2, 1}; /* [1][1] is indefinite */
        cft_array *A = cft_from_f64(v, (int64_t[]){2, 2, 2, 2}, 4), *L = cft_linalg_cholesky(A);
        CHECK(cft_failed(L));
        const char *m = cft_error_message(L);
        CHECK_MSG(strstr(m, "cholesky") && strstr(m, "batch element [1, 1]") &&
                      strstr(m, "not positive definite"),
                  "%s", m);
    }
    TEST("errors: solve with a singular batch element names it; inv too") {
        double v[3 * 4] = {1, 0, 0, 1, 2, 1, 1, 3, 1, 2, 2, 4}; /* element 2 is singular */
        cft_array *A = cft_from_f64(v, (int64_t[]){3, 2, 2}, 3),
                  *X = cft_linalg_solve(A, cft_ones(CFT_F64, (int64_t[]){3, 2}, 2));
        CHECK(cft_failed(X));
        CHECK_MSG(strstr(cft_error_message(X), "singular") &&
                      strstr(cft_error_message(X), "batch element [2]"),
                  "%s", cft_error_message(X));
        cft_array *I = cft_linalg_inv(A);
        CHECK_MSG(cft_failed(I) && strstr(cft_error_message(I), "batch element [2]"), "%s",
                  cft_error_message(I));
    }
    TEST("errors: shapes and dtypes are named") {
        cft_array *r = cft_linalg_cholesky(randn((int64_t[]){2, 3}, 2));
        CHECK_MSG(cft_failed(r) && strstr(cft_error_message(r), "square") &&
                      strstr(cft_error_message(r), "f64[2,3]"),
                  "%s", cft_error_message(r));
        r = cft_linalg_solve(shifted((int64_t[]){3, 3}, 2, 3), randn((int64_t[]){4, 2}, 2));
        CHECK_MSG(cft_failed(r) && strstr(cft_error_message(r), "solve"), "%s",
                  cft_error_message(r));
        r = cft_linalg_inv(cft_ones(CFT_I32, (int64_t[]){2, 2}, 2));
        CHECK_MSG(cft_failed(r) && strstr(cft_error_message(r), "float"), "%s",
                  cft_error_message(r));
    }
    TEST("errors: a non-PD matrix under vmap and grad names the batch element") {
        double v[2 * 4] = {2, 0, 0, 2, 1, 2, 2, 1};
        cft_array *A = cft_from_f64(v, (int64_t[]){2, 2, 2}, 3);
        cft_array *r =
            cft_fn_call1(cft_vmap(cft_fn_new(fn_cholesky, NULL, 1, 1), (int[]){0}, NULL), &A);
        CHECK_MSG(cft_failed(r) && strstr(cft_error_message(r), "batch element [1]"), "%s",
                  cft_error_message(r));
    }
    TEST("grad of log|det A| = A^-T, against finite differences") {
        cft_array *A = shifted((int64_t[]){4, 4}, 2, 2);
        check_grad_fd(fn_logdet, A, 1e-7);
        cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(fn_logdet, NULL, 1, 1), NULL, 0), &A);
        CHECK_ARRAY_CLOSE(g, cft_mT(cft_linalg_inv(A)), 1e-12, 1e-12);
    }
    TEST("grad of log det via cholesky (2 sum log diag L) = A^-1 (symmetric)") {
        cft_array *A = spd((int64_t[]){4, 4}, 2);
        check_grad_fd(fn_chol_logdet, A, 1e-7);
        cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(fn_chol_logdet, NULL, 1, 1), NULL, 0), &A);
        CHECK_ARRAY_CLOSE(g, cft_linalg_inv(A), 1e-10, 1e-12);
    }
    TEST("grad of the sum of cubed eigenvalues (3 A^2, symmetrised) vs finite differences") {
        cft_array *A = spd((int64_t[]){4, 4}, 2);
        check_grad_fd(fn_eigsum, A, 1e-6);
        cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(fn_eigsum, NULL, 1, 1), NULL, 0), &A);
        CHECK_ARRAY_CLOSE(g, cft_mul_s(cft_matmul(A, A), 3), 1e-10, 1e-10);
    }
    TEST("eigh: repeated eigenvalues keep the gradient finite (the degenerate guard)") {
        cft_array *A = cft_mul_s(cft_eye(4, CFT_F64), 2); /* w = 2, 2, 2, 2 */
        cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(fn_eigsum, NULL, 1, 1), NULL, 0), &A);
        CHECK_ARRAY_CLOSE(g, cft_mul_s(cft_eye(4, CFT_F64), 12), 1e-12, 1e-12);
        cft_array *w, *V, *t = cft_ones(CFT_F64, (int64_t[]){4, 4}, 2), *o[2];
        CHECK_EQ(cft_linalg_eigh(A, &w, &V), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_jvp(cft_fn_new(fn_eigvecs, NULL, 1, 1)), (cft_array *[]){A, t}, o),
                 CFT_OK);
        CHECK(cft_allclose(o[1], o[1], 0, 0, false)); /* no NaN */
    }
    TEST("hessian of log|det A| = -(A^-1)_jk (A^-1)_li") {
        int n = 3;
        cft_array *A = shifted((int64_t[]){3, 3}, 2, 2);
        cft_array *H = cft_fn_call1(cft_hessian(cft_fn_new(fn_logdet, NULL, 1, 1), 0), &A);
        CHECK_MSG(!cft_failed(H), "%s", cft_error_message(H));
        double Ai[9], h[81];
        cft_copy_to(cft_linalg_inv(A), CFT_F64, Ai);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                for (int k = 0; k < n; k++)
                    for (int l = 0; l < n; l++)
                        h[((i * n + j) * n + k) * n + l] = -Ai[j * n + k] * Ai[l * n + i];
        CHECK_ARRAY_CLOSE(H, cft_from_f64(h, (int64_t[]){3, 3, 3, 3}, 4), 1e-10, 1e-12);
    }
    TEST("vmap(grad(logdet)) matches the per-matrix grads") {
        cft_array *A = shifted(b23, 3, 2);
        cft_fn *g = cft_grad(cft_fn_new(fn_logdet, NULL, 1, 1), NULL, 0);
        cft_array *G = cft_fn_call1(cft_vmap(g, (int[]){0}, NULL), &A);
        CHECK_ARRAY_CLOSE(G, cft_mT(cft_linalg_inv(A)), 1e-12, 1e-12);
    }
    TEST("jit(vmap(grad(log det via cholesky))): compiled calls match eager, f32 and f64") {
        cft_fn *g = cft_jit(
            cft_vmap(cft_grad(cft_fn_new(fn_chol_logdet, NULL, 1, 1), NULL, 0), (int[]){0}, NULL));
        cft_array *A = spd(b34, 3), *want = cft_linalg_inv(A);
        for (int call = 0; call < 2; call++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(g, &A), want, 1e-10, 1e-12);
        cft_array *A32 = cft_astype(A, CFT_F32);
        for (int call = 0; call < 2; call++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(g, &A32), want, 1e-4, 1e-5);
    }
    TEST("matrix_norm: nuclear + 2 gradient vs finite differences; fro; 1; inf") {
        cft_array *A = randn((int64_t[]){4, 3}, 2);
        check_grad_fd(fn_nuc, A, 1e-6);
        CHECK_CLOSE(cft_item(cft_linalg_matrix_norm(A, CFT_NORM_FRO, false)),
                    cft_item(cft_linalg_vector_norm(A, 2, NULL, 0, false)), 1e-14, 0);
        double v[4] = {1, -2, 3, 4};
        cft_array *M = cft_from_f64(v, (int64_t[]){2, 2}, 2);
        CHECK_CLOSE(cft_item(cft_linalg_matrix_norm(M, CFT_NORM_1, false)), 6, 0, 0);
        CHECK_CLOSE(cft_item(cft_linalg_matrix_norm(M, CFT_NORM_INF, false)), 7, 0, 0);
        CHECK_CLOSE(cft_item(cft_linalg_matrix_norm(M, CFT_NORM_NEGINF, false)), 3, 0, 0);
    }
    TEST("vector_norm: ord 1, 2, 3, inf, -inf, 0") {
        double v[4] = {3, -4, 0, 1};
        cft_array *x = cft_from_f64(v, (int64_t[]){4}, 1);
        CHECK_CLOSE(cft_item(cft_linalg_vector_norm(x, 1, NULL, 0, false)), 8, 1e-15, 0);
        CHECK_CLOSE(cft_item(cft_linalg_vector_norm(x, 2, NULL, 0, false)), sqrt(26), 1e-15, 0);
        CHECK_CLOSE(cft_item(cft_linalg_vector_norm(x, 3, NULL, 0, false)), cbrt(27 + 64 + 1),
                    1e-14, 0);
        CHECK_CLOSE(cft_item(cft_linalg_vector_norm(x, INFINITY, NULL, 0, false)), 4, 0, 0);
        CHECK_CLOSE(cft_item(cft_linalg_vector_norm(x, -INFINITY, NULL, 0, false)), 0, 0, 0);
        CHECK_CLOSE(cft_item(cft_linalg_vector_norm(x, 0, NULL, 0, false)), 3, 0, 0);
    }
    TEST("pinv: A pinv(A) A = A; lstsq solves a tall system in least squares") {
        cft_array *A = randn((int64_t[]){5, 3}, 2), *P = cft_linalg_pinv(A, 0);
        CHECK_ARRAY_CLOSE(cft_matmul(cft_matmul(A, P), A), A, 1e-12, 1e-12);
        cft_array *b = randn((int64_t[]){5, 1}, 2), *x = cft_linalg_lstsq(A, b);
        /* normal equations: A^T (A x - b) = 0 */
        CHECK_ARRAY_CLOSE(cft_matmul(cft_mT(A), cft_sub(cft_matmul(A, x), b)),
                          cft_zeros(CFT_F64, (int64_t[]){3, 1}, 2), 0, 1e-12);
    }
    TEST("matrix_power: A^3, A^0 = I, A^-2 = inv(A)^2") {
        cft_array *A = shifted(b23, 3, 2);
        CHECK_ARRAY_CLOSE(cft_linalg_matrix_power(A, 3), cft_matmul(A, cft_matmul(A, A)), 1e-12,
                          1e-12);
        CHECK_ARRAY_CLOSE(cft_linalg_matrix_power(A, 0),
                          cft_broadcast_to(cft_eye(3, CFT_F64), b23, 3), 0, 0);
        cft_array *Ai = cft_linalg_inv(A);
        CHECK_ARRAY_CLOSE(cft_linalg_matrix_power(A, -2), cft_matmul(Ai, Ai), 1e-12, 1e-12);
    }
    TEST("cross: e_x x e_y = e_z; a x b orthogonal to both; along dim 0") {
        cft_array *a = randn((int64_t[]){4, 3}, 2), *b = randn((int64_t[]){4, 3}, 2),
                  *c = cft_linalg_cross(a, b, -1);
        CHECK_ARRAY_CLOSE(cft_sum(cft_mul(a, c), (int[]){-1}, 1, false),
                          cft_zeros(CFT_F64, (int64_t[]){4}, 1), 0, 1e-14);
        CHECK_ARRAY_CLOSE(cft_sum(cft_mul(b, c), (int[]){-1}, 1, false),
                          cft_zeros(CFT_F64, (int64_t[]){4}, 1), 0, 1e-14);
        CHECK_ARRAY_CLOSE(cft_linalg_cross(cft_mT(a), cft_mT(b), 0), cft_mT(c), 0, 0);
        double ex[3] = {1, 0, 0}, ey[3] = {0, 1, 0}, ez[3] = {0, 0, 1};
        CHECK_ARRAY_CLOSE(cft_linalg_cross(cft_from_f64(ex, (int64_t[]){3}, 1),
                                           cft_from_f64(ey, (int64_t[]){3}, 1), 0),
                          cft_from_f64(ez, (int64_t[]){3}, 1), 0, 0);
    }
    TEST("matrix_exp: a rotation generator, a diagonal, a large norm; exp(A) exp(-A) = I") {
        double t = 0.7, g[4] = {0, -t, t, 0}, r[4] = {cos(t), -sin(t), sin(t), cos(t)};
        CHECK_ARRAY_CLOSE(cft_linalg_matrix_exp(cft_from_f64(g, (int64_t[]){2, 2}, 2)),
                          cft_from_f64(r, (int64_t[]){2, 2}, 2), 1e-14, 1e-14);
        double d[4] = {1, 0, 0, -2}, ed[4] = {exp(1), 0, 0, exp(-2)};
        CHECK_ARRAY_CLOSE(cft_linalg_matrix_exp(cft_from_f64(d, (int64_t[]){2, 2}, 2)),
                          cft_from_f64(ed, (int64_t[]){2, 2}, 2), 1e-14, 1e-15);
        double T = 30, gl[4] = {0, -T, T, 0}, rl[4] = {cos(T), -sin(T), sin(T), cos(T)};
        CHECK_ARRAY_CLOSE(cft_linalg_matrix_exp(cft_from_f64(gl, (int64_t[]){2, 2}, 2)),
                          cft_from_f64(rl, (int64_t[]){2, 2}, 2), 1e-11, 1e-11);
        cft_array *A = randn(b34, 3);
        CHECK_ARRAY_CLOSE(cft_matmul(cft_linalg_matrix_exp(A), cft_linalg_matrix_exp(cft_neg(A))),
                          cft_broadcast_to(cft_eye(4, CFT_F64), b34, 3), 1e-12, 1e-12);
    }
    TEST("matrix_exp: gradient vs finite differences") {
        check_grad_fd(fn_expm_sum, cft_mul_s(randn((int64_t[]){3, 3}, 2), 2), 1e-6);
    }
    TEST("qr: the derivative of a wide matrix is an error naming qr") {
        cft_array *args[2] = {randn((int64_t[]){2, 3}, 2), randn((int64_t[]){2, 3}, 2)}, *o[2];
        cft_status st = cft_fn_call(cft_jvp(cft_fn_new(fn_qr_r, NULL, 1, 1)), args, o);
        CHECK(st != CFT_OK);
        CHECK_MSG(strstr(cft_last_error_message(), "qr") &&
                      strstr(cft_last_error_message(), "rows >= columns"),
                  "%s", cft_last_error_message());
    }
    return check_summary();
}
