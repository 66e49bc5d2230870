/* linalg.c (bench): cft's overhead over LAPACK for batched factorisations.
 * Batched Cholesky (potrf) and batched solve (gesv, 16 right-hand sides) of
 * SPD matrices, f64 and f32, batch 64 of n = 64 and batch 16 of n = 256,
 * single-threaded: cft eagerly (cft_linalg_cholesky / cft_linalg_solve) and
 * through cft_jit of a function calling them, against a C loop of LAPACKE
 * calls over the batch on the same data in the same process (copying the
 * inputs first, as LAPACK works in place). Prints one JSON object per line;
 * overhead_ratio = cft median / LAPACKE-loop median (1.0 = no overhead),
 * and max_abs_diff between cft's result and LAPACKE's. */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cft/cft.h>

#include "bench.h"

enum { NRHS = 16 };

typedef struct {
    bool solve, f64;
    int64_t B, n;
    void *A, *R;     /* inputs as C buffers (A [B,n,n], R [B,n,NRHS]) */
    void *wa, *wr;   /* LAPACKE work copies */
    lapack_int *piv; /* [n] */
    cft_fn *f;       /* cft function (NULL: eager) */
    cft_array *in[2];
    cft_array *out;
} job;

static void run_lapacke(void *p) {
    job *j = p;
    size_t esz = j->f64 ? sizeof(double) : sizeof(float);
    int64_t n = j->n, mm = n * n, mr = n * NRHS;
    memcpy(j->wa, j->A, esz * (size_t)(j->B * mm));
    if (j->solve)
        memcpy(j->wr, j->R, esz * (size_t)(j->B * mr));
    lapack_int ln = (lapack_int)n;
    for (int64_t b = 0; b < j->B; b++) {
        if (j->f64) {
            double *a = (double *)j->wa + b * mm, *r = (double *)j->wr + b * mr;
            if (j->solve)
                LAPACKE_dgesv(LAPACK_ROW_MAJOR, ln, NRHS, a, ln, j->piv, r, NRHS);
            else
                LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', ln, a, ln);
        } else {
            float *a = (float *)j->wa + b * mm, *r = (float *)j->wr + b * mr;
            if (j->solve)
                LAPACKE_sgesv(LAPACK_ROW_MAJOR, ln, NRHS, a, ln, j->piv, r, NRHS);
            else
                LAPACKE_spotrf(LAPACK_ROW_MAJOR, 'L', ln, a, ln);
        }
    }
}

static void run_cft(void *p) {
    job *j = p;
    if (j->f)
        j->out = cft_fn_call1(j->f, j->in);
    else
        j->out = j->solve ? cft_linalg_solve(j->in[0], j->in[1]) : cft_linalg_cholesky(j->in[0]);
}

static cft_status chol_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_linalg_cholesky(in[0]);
    return CFT_OK;
}
static cft_status solve_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_linalg_solve(in[0], in[1]);
    return CFT_OK;
}

/* LAPACKE's result as an array (Cholesky: the lower triangle only) */
static cft_array *lapacke_result(const job *j) {
    int64_t n = j->n;
    cft_array *r;
    if (j->solve) {
        int64_t shape[3] = {j->B, n, NRHS};
        r = j->f64 ? cft_from_f64(j->wr, shape, 3) : cft_from_f32(j->wr, shape, 3);
    } else {
        int64_t shape[3] = {j->B, n, n};
        r = j->f64 ? cft_from_f64(j->wa, shape, 3) : cft_from_f32(j->wa, shape, 3);
        double *mask = malloc(sizeof(double) * (size_t)(n * n));
        for (int64_t i = 0; i < n; i++)
            for (int64_t k = 0; k < n; k++)
                mask[i * n + k] = k <= i;
        r = cft_mul(r, cft_astype(cft_from_f64(mask, (int64_t[]){n, n}, 2), cft_array_dtype(r)));
        free(mask);
    }
    return r;
}

static void emit(const job *j, const char *method, double med, double mn, double base,
                 double diff) {
    printf("{\"bench\": \"linalg\", \"config\": {\"op\": \"%s\", \"dtype\": \"%s\", \"batch\": "
           "%lld, \"n\": %lld%s}, \"method\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, "
           "\"threads\": 1, \"baseline\": \"lapacke_loop\", \"baseline_median_ms\": %.4f, "
           "\"overhead_ratio\": %.3f, \"max_abs_diff\": %.2e}\n",
           j->solve ? "solve" : "cholesky", j->f64 ? "f64" : "f32", (long long)j->B,
           (long long)j->n, j->solve ? ", \"nrhs\": 16" : "", method, med, mn, base, med / base,
           diff);
    fflush(stdout);
}

static void bench_case(bool solve, bool f64, int64_t B, int64_t n) {
    cft_dtype dt = f64 ? CFT_F64 : CFT_F32;
    size_t esz = f64 ? sizeof(double) : sizeof(float);
    cft_array *keys = cft_random_split(cft_random_key((uint64_t)(n * 1000 + B)), 2);
    cft_array *M = cft_random_normal(cft_index(keys, 0), CFT_F64, (int64_t[]){B, n, n}, 3);
    cft_array *A = cft_add(cft_matmul(M, cft_mT(M)), cft_mul_s(cft_eye(n, CFT_F64), (double)n));
    cft_array *R = cft_random_normal(cft_index(keys, 1), CFT_F64, (int64_t[]){B, n, NRHS}, 3);
    A = cft_astype(A, dt);
    R = cft_astype(R, dt);

    job j = {.solve = solve, .f64 = f64, .B = B, .n = n};
    j.A = malloc(esz * (size_t)(B * n * n));
    j.wa = malloc(esz * (size_t)(B * n * n));
    j.R = malloc(esz * (size_t)(B * n * NRHS));
    j.wr = malloc(esz * (size_t)(B * n * NRHS));
    j.piv = malloc(sizeof(lapack_int) * (size_t)n);
    cft_copy_to(A, dt, j.A);
    cft_copy_to(R, dt, j.R);
    j.in[0] = A;
    j.in[1] = R;

    double lm, lmin, em, emin, jm, jmin;
    timeit(run_lapacke, &j, &lm, &lmin);
    cft_array *ref = lapacke_result(&j);
    timeit(run_cft, &j, &em, &emin);
    double ediff = cft_max_abs_diff(j.out, ref);
    job jj = j;
    jj.f = cft_jit(cft_fn_new(solve ? solve_fn : chol_fn, NULL, solve ? 2 : 1, 1));
    timeit(run_cft, &jj, &jm, &jmin);
    double jdiff = cft_max_abs_diff(jj.out, ref);

    emit(&j, "lapacke_loop", lm, lmin, lm, 0.0);
    emit(&j, "cft_eager", em, emin, lm, ediff);
    emit(&j, "cft_jit", jm, jmin, lm, jdiff);
    free(j.A);
    free(j.wa);
    free(j.R);
    free(j.wr);
    free(j.piv);
}

int main(void) {
    openblas_set_num_threads(1);
    cft_init();
    cft_set_num_threads(1);
    const int64_t sizes[2][2] = {{64, 64}, {16, 256}}; /* {batch, n} */
    for (int op = 0; op < 2; op++)
        for (int d = 0; d < 2; d++)
            for (int s = 0; s < 2; s++)
                bench_case(op == 1, d == 0, sizes[s][0], sizes[s][1]);
    return 0;
}
