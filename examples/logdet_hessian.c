/* logdet_hessian.c: linear algebra under the transforms.
 *
 * f(A) = log det A for symmetric positive-definite A, written twice: with
 * cft_linalg_slogdet, and through the Cholesky factor (2 sum log diag L).
 * Its gradient (cft_grad) is checked against the closed form A^-T, its
 * Hessian (cft_hessian, 3x3) against -(A^-1)_jk (A^-1)_li at [i,j,k,l], and
 * per-matrix gradients over a batch (cft_vmap of cft_grad, and the same
 * under cft_jit) against A_b^-T. The batch is A_b = M_b M_b^T + n I with M_b
 * drawn from random keys. All in f64; prints the max errors and exits 1 if
 * any exceeds its tolerance (1e-10 for values and gradients, 1e-9 for
 * Hessians, all absolute on entries of size about 1).
 *
 *   build/examples/logdet_hessian      (--quick is accepted and ignored)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cft/cft.h>

#define TOL_VAL 1e-10
#define TOL_HESS 1e-9

/* A -> log|det A| via slogdet */
static cft_status logdet_slogdet(void *env, int nin, cft_array *const *in, int nout,
                                 cft_array **out) {
    (void)env, (void)nin, (void)nout;
    return cft_linalg_slogdet(in[0], NULL, &out[0]);
}

/* A -> 2 sum_i log L_ii with L = cholesky(A) (the diagonal is sum(L * I) over the last axis) */
static cft_status logdet_cholesky(void *env, int nin, cft_array *const *in, int nout,
                                  cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *L = cft_linalg_cholesky(in[0]);
    int nd = cft_array_ndim(L);
    int64_t n = cft_array_shape(L)[nd - 1];
    int last = nd - 1;
    cft_array *diag = cft_sum(cft_mul(L, cft_eye(n, cft_array_dtype(L))), &last, 1, false);
    out[0] = cft_mul_s(cft_sum(cft_log(diag), NULL, 0, false), 2.0);
    return CFT_OK;
}

/* a batch [B, n, n] of SPD matrices M M^T + n I */
static cft_array *spd_batch(uint64_t seed, int64_t B, int64_t n) {
    cft_array *M = cft_random_normal(cft_random_key(seed), CFT_F64, (int64_t[]){B, n, n}, 3);
    return cft_add(cft_matmul(M, cft_mT(M)), cft_mul_s(cft_eye(n, CFT_F64), (double)n));
}

static int failures = 0;
static void report(const char *what, double err, double tol) {
    bool ok = err <= tol; /* false for NaN */
    printf("  %-46s max |err| = %.3e  (tol %.0e)  %s\n", what, err, tol, ok ? "ok" : "FAIL");
    if (!ok)
        failures++;
}

/* expected Hessian of log det at A (n x n): H[i,j,k,l] = -(A^-1)_jk (A^-1)_li; with `sym`,
 * that of log det((A + A^T)/2), i.e. H averaged over swapping i<->j and k<->l */
static cft_array *hessian_closed_form(cft_array *A, bool sym) {
    int64_t n = cft_array_shape(A)[0];
    double *Ai = malloc(sizeof(double) * (size_t)(n * n));
    double *H = malloc(sizeof(double) * (size_t)(n * n * n * n));
    cft_copy_to(cft_linalg_inv(A), CFT_F64, Ai);
#define H0(i, j, k, l) (-Ai[(j)*n + (k)] * Ai[(l)*n + (i)])
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t k = 0; k < n; k++)
                for (int64_t l = 0; l < n; l++)
                    H[((i * n + j) * n + k) * n + l] =
                        sym ? 0.25 * (H0(i, j, k, l) + H0(j, i, k, l) + H0(i, j, l, k) +
                                      H0(j, i, l, k))
                            : H0(i, j, k, l);
#undef H0
    cft_array *out = cft_from_f64(H, (int64_t[]){n, n, n, n}, 4);
    free(Ai);
    free(H);
    return out;
}

int main(int argc, char **argv) {
    (void)argc, (void)argv; /* --quick: the example is quick anyway */
    cft_init();
    const int64_t B = 16, n = 5;
    cft_fn *f_sl = cft_fn_named(cft_fn_new(logdet_slogdet, NULL, 1, 1), "logdet_slogdet");
    cft_fn *f_ch = cft_fn_named(cft_fn_new(logdet_cholesky, NULL, 1, 1), "logdet_cholesky");
    cft_array *As = spd_batch(42, B, n);
    cft_array *A0 = cft_index(As, 0);

    printf("log det of SPD A = M M^T + nI, f64 (batch %lld of %lldx%lld; Hessian at 3x3)\n",
           (long long)B, (long long)n, (long long)n);

    /* values: slogdet vs Cholesky, per matrix through vmap */
    cft_array *v_sl = cft_fn_call1(cft_vmap(f_sl, NULL, NULL), &As);
    cft_array *v_ch = cft_fn_call1(cft_vmap(f_ch, NULL, NULL), &As);
    printf("  log det A_0 = %.12f (slogdet), %.12f (Cholesky)\n", cft_item_at(v_sl, 0),
           cft_item_at(v_ch, 0));
    report("value: slogdet vs Cholesky (vmap, batch)", cft_max_abs_diff(v_sl, v_ch), TOL_VAL);

    /* gradient of one matrix: A^-T */
    cft_array *want0 = cft_mT(cft_linalg_inv(A0));
    report("grad slogdet vs A^-T",
           cft_max_abs_diff(cft_fn_call1(cft_grad(f_sl, NULL, 0), &A0), want0), TOL_VAL);
    report("grad Cholesky vs A^-T",
           cft_max_abs_diff(cft_fn_call1(cft_grad(f_ch, NULL, 0), &A0), want0), TOL_VAL);

    /* Hessian of a 3x3 matrix, [i,j,k,l] = d2f / dA_ij dA_kl */
    cft_array *A3 = cft_index(spd_batch(7, 1, 3), 0);
    cft_array *H_sl = cft_fn_call1(cft_hessian(f_sl, 0), &A3);
    report("hessian slogdet vs -(A^-1)_jk (A^-1)_li",
           cft_max_abs_diff(H_sl, hessian_closed_form(A3, false)), TOL_HESS);
    /* cholesky reads (A + A^T)/2, so its Hessian is the symmetrised one */
    cft_array *H_ch = cft_fn_call1(cft_hessian(f_ch, 0), &A3);
    report("hessian Cholesky vs symmetrised closed form",
           cft_max_abs_diff(H_ch, hessian_closed_form(A3, true)), TOL_HESS);

    /* per-matrix gradients over the batch, interpreted and compiled */
    cft_array *want = cft_mT(cft_linalg_inv(As));
    cft_fn *pg_sl = cft_vmap(cft_grad(f_sl, NULL, 0), NULL, NULL);
    cft_fn *pg_ch = cft_vmap(cft_grad(f_ch, NULL, 0), NULL, NULL);
    report("vmap(grad) slogdet vs A_b^-T", cft_max_abs_diff(cft_fn_call1(pg_sl, &As), want),
           TOL_VAL);
    report("vmap(grad) Cholesky vs A_b^-T", cft_max_abs_diff(cft_fn_call1(pg_ch, &As), want),
           TOL_VAL);
    report("jit(vmap(grad)) slogdet vs A_b^-T",
           cft_max_abs_diff(cft_fn_call1(cft_jit(pg_sl), &As), want), TOL_VAL);
    report("jit(vmap(grad)) Cholesky vs A_b^-T",
           cft_max_abs_diff(cft_fn_call1(cft_jit(pg_ch), &As), want), TOL_VAL);

    printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
