/* linalg.c (bench): cft's overhead over LAPACK for batched factorisations.
 * Batched Cholesky (potrf) and batched solve (LU, 16 right-hand sides) of
 * SPD matrices, f64 and f32, batches of n = 64, 128 and 256 (all but batch
 * 64 of n = 64 take over 1 ms), single-threaded: cft eagerly
 * (cft_linalg_cholesky / cft_linalg_solve) and through cft_jit of a
 * function calling them, against two C loops over the batch that call
 * LAPACK directly on the same data in the same process. Both copy the
 * inputs (LAPACK works in place; cft leaves its inputs alone) and produce
 * cft's result (Cholesky: L with its upper triangle zeroed), into buffers
 * they reuse from call to call:
 *  - lapacke_loop, the baseline: the plain loop of row-major
 *    LAPACKE_?potrf / LAPACKE_?gesv calls (LAPACKE copies each matrix to
 *    column-major and back inside);
 *  - lapacke_colmajor, a hand-tuned loop for reference: no layout copies,
 *    since a row-major matrix is its transpose read column-major. potrf of
 *    the symmetric A column-major in a scratch matrix, L copied out of the
 *    factor's upper triangle in 16 x 16 tiles; getrf of A^T, then the two
 *    triangular solves (CBLAS row-major) and row interchanges that solve
 *    A X = B with A^T's factors. This is cft's kernel without the
 *    symmetrisation (A + A^T)/2 that cft_linalg_cholesky does, and writing
 *    into a hot buffer where cft returns a fresh array.
 * Prints one JSON object per line: overhead_ratio = median / lapacke_loop's
 * median (1.0 = no overhead), ratio_vs_colmajor = median / lapacke_colmajor's
 * median, max_abs_diff against lapacke_loop's result, and work_over_1ms
 * (lapacke_loop takes over 1 ms). */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cft/cft.h>

#include "bench.h"

enum { NRHS = 16 };

typedef struct {
    bool solve, f64, colmajor;
    int64_t B, n;
    void *A, *R;     /* inputs as C buffers (A [B,n,n], R [B,n,NRHS]) */
    void *wa, *wr;   /* LAPACK results (and work copies) */
    void *sc;        /* one n x n scratch matrix (colmajor) */
    lapack_int *piv; /* [n] */
    cft_fn *f;       /* cft function (NULL: eager) */
    cft_array *in[2];
    cft_array *out;
} job;

/* the plain loop */
#define PLAIN(T, POTRF, GESV)                                                                      \
    do {                                                                                           \
        for (int64_t b = 0; b < j->B; b++) {                                                       \
            T *a = (T *)j->wa + b * mm, *r = (T *)j->wr + b * mr;                                  \
            if (j->solve) {                                                                        \
                GESV(LAPACK_ROW_MAJOR, ln, NRHS, a, ln, j->piv, r, NRHS);                          \
            } else {                                                                               \
                POTRF(LAPACK_ROW_MAJOR, 'L', ln, a, ln);                                           \
                for (int64_t i = 0; i < n; i++)                                                    \
                    memset(a + i * n + i + 1, 0, sizeof(T) * (size_t)(n - i - 1));                 \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* the loop without layout copies */
#define COLMAJOR(T, POTRF, GETRF, TRSM)                                                            \
    do {                                                                                           \
        T *sc = j->sc;                                                                             \
        for (int64_t b = 0; b < j->B; b++) {                                                       \
            T *a = (T *)j->wa + b * mm, *r = (T *)j->wr + b * mr;                                  \
            memcpy(sc, (const T *)j->A + b * mm, sizeof(T) * (size_t)mm);                          \
            if (j->solve) {                                                                        \
                GETRF(LAPACK_COL_MAJOR, ln, ln, sc, ln, j->piv); /* A^T = P L U */                 \
                TRSM(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, ln, NRHS,   \
                     1, sc, ln, r, NRHS); /* U^-T */                                               \
                TRSM(CblasRowMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasUnit, ln, NRHS, 1,   \
                     sc, ln, r, NRHS);               /* L^-T */                                    \
                for (int64_t i = n - 1; i >= 0; i--) /* P */                                       \
                    if (j->piv[i] - 1 != i) {                                                      \
                        T *p = r + i * NRHS, *q = r + (j->piv[i] - 1) * NRHS;                      \
                        for (int c = 0; c < NRHS; c++) {                                           \
                            T t = p[c];                                                            \
                            p[c] = q[c];                                                           \
                            q[c] = t;                                                              \
                        }                                                                          \
                    }                                                                              \
            } else {                                                                               \
                POTRF(LAPACK_COL_MAJOR, 'L', ln, sc, ln); /* A symmetric: A^T = A */               \
                for (int64_t i0 = 0; i0 < n; i0 += 16) {  /* L = the factor's upper^T */           \
                    int64_t ie = i0 + 16 < n ? i0 + 16 : n;                                        \
                    memset(a + i0 * n, 0, sizeof(T) * (size_t)((ie - i0) * n));                    \
                    for (int64_t k0 = 0; k0 <= i0; k0 += 16) /* 16 x 16 tiles */                   \
                        for (int64_t i = i0; i < ie; i++)                                          \
                            for (int64_t k = k0; k <= i && k < k0 + 16; k++)                       \
                                a[i * n + k] = sc[k * n + i];                                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void run_lapacke(void *p) {
    job *j = p;
    size_t esz = j->f64 ? sizeof(double) : sizeof(float);
    int64_t n = j->n, mm = n * n, mr = n * NRHS;
    lapack_int ln = (lapack_int)n;
    if (!j->colmajor)
        memcpy(j->wa, j->A, esz * (size_t)(j->B * mm));
    if (j->solve)
        memcpy(j->wr, j->R, esz * (size_t)(j->B * mr));
    if (j->colmajor && j->f64)
        COLMAJOR(double, LAPACKE_dpotrf_work, LAPACKE_dgetrf_work, cblas_dtrsm);
    else if (j->colmajor)
        COLMAJOR(float, LAPACKE_spotrf_work, LAPACKE_sgetrf_work, cblas_strsm);
    else if (j->f64)
        PLAIN(double, LAPACKE_dpotrf, LAPACKE_dgesv);
    else
        PLAIN(float, LAPACKE_spotrf, LAPACKE_sgesv);
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

/* a LAPACK loop's result as an array */
static cft_array *lapacke_result(const job *j) {
    int64_t shape[3] = {j->B, j->n, j->solve ? NRHS : j->n};
    void *buf = j->solve ? j->wr : j->wa;
    return j->f64 ? cft_from_f64(buf, shape, 3) : cft_from_f32(buf, shape, 3);
}

static void emit(const job *j, const char *method, double med, double mn, double base,
                 double colmajor, double diff) {
    printf("{\"bench\": \"linalg\", \"config\": {\"op\": \"%s\", \"dtype\": \"%s\", \"batch\": "
           "%lld, \"n\": %lld%s}, \"method\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, "
           "\"threads\": 1, \"baseline\": \"lapacke_loop\", \"baseline_median_ms\": %.4f, "
           "\"overhead_ratio\": %.3f, \"colmajor_median_ms\": %.4f, \"ratio_vs_colmajor\": %.3f, "
           "\"work_over_1ms\": %s, \"max_abs_diff\": %.2e}\n",
           j->solve ? "solve" : "cholesky", j->f64 ? "f64" : "f32", (long long)j->B,
           (long long)j->n, j->solve ? ", \"nrhs\": 16" : "", method, med, mn, base, med / base,
           colmajor, med / colmajor, base > 1.0 ? "true" : "false", diff);
    fflush(stdout);
}

/* Times the methods in rounds (machines running other work drift in speed:
 * every method sees the same drift). Each round runs every method PER + 1
 * times in a row and measures the last PER calls, so each is timed in its
 * own steady state (a cft call leaves fresh output memory in the caches
 * that the LAPACK loops' reused buffers would not). Median and min over the
 * measured calls; the rounds fill about 0.6 s per method (at least 2 and at
 * most 75 rounds), after one warm-up call each that traces and compiles. */
enum { NMETHOD = 4, PER = 4 };
static void time_methods(work_fn *fs, void **args, double *med, double *min) {
    double one = 0;
    for (int m = 0; m < NMETHOD; m++) {
        fs[m](args[m]);
        double t0 = now_ms();
        fs[m](args[m]);
        one += (now_ms() - t0) / NMETHOD;
    }
    int rounds = one > 0 ? (int)(600 / (PER * one)) : 75;
    rounds = rounds < 2 ? 2 : rounds > 75 ? 75 : rounds;
    double *ts = malloc(sizeof(double) * (size_t)(NMETHOD * rounds * PER));
    for (int r = 0; r < rounds; r++)
        for (int m = 0; m < NMETHOD; m++) {
            fs[m](args[m]);
            for (int k = 0; k < PER; k++) {
                double t0 = now_ms();
                fs[m](args[m]);
                ts[(m * rounds + r) * PER + k] = now_ms() - t0;
            }
        }
    for (int m = 0; m < NMETHOD; m++)
        bench_stats(ts + m * rounds * PER, rounds * PER, &med[m], &min[m]);
    free(ts);
}

static void bench_case(bool solve, bool f64, int64_t B, int64_t n) {
    cft_dtype dt = f64 ? CFT_F64 : CFT_F32;
    size_t esz = f64 ? sizeof(double) : sizeof(float);
    cft_array *keys = cft_random_split(cft_random_key((uint64_t)(n * 1000 + B)), 2);
    cft_array *M = cft_random_normal(cft_index(keys, 0), CFT_F64, (int64_t[]){B, n, n}, 3);
    cft_array *A = cft_add(cft_matmul(M, cft_mT(M)), cft_mul_s(cft_eye(n, CFT_F64), (double)n));
    A = cft_mul_s(cft_add(A, cft_mT(A)), 0.5); /* exactly symmetric */
    cft_array *R = cft_random_normal(cft_index(keys, 1), CFT_F64, (int64_t[]){B, n, NRHS}, 3);
    A = cft_astype(A, dt);
    R = cft_astype(R, dt);

    job j = {.solve = solve, .f64 = f64, .B = B, .n = n};
    j.A = malloc(esz * (size_t)(B * n * n));
    j.wa = malloc(esz * (size_t)(B * n * n));
    j.R = malloc(esz * (size_t)(B * n * NRHS));
    j.wr = malloc(esz * (size_t)(B * n * NRHS));
    j.sc = malloc(esz * (size_t)(n * n));
    j.piv = malloc(sizeof(lapack_int) * (size_t)n);
    cft_copy_to(A, dt, j.A);
    cft_copy_to(R, dt, j.R);
    j.in[0] = A;
    j.in[1] = R;

    job jc = j, jj = j;
    jc.colmajor = true;
    jj.f = cft_jit(cft_fn_new(solve ? solve_fn : chol_fn, NULL, solve ? 2 : 1, 1));
    work_fn fs[NMETHOD] = {run_lapacke, run_lapacke, run_cft, run_cft};
    void *args[NMETHOD] = {&j, &jc, &j, &jj};
    double med[NMETHOD], mn[NMETHOD];
    time_methods(fs, args, med, mn);
    run_lapacke(&j);
    cft_array *ref = lapacke_result(&j);
    run_lapacke(&jc);
    double cdiff = cft_max_abs_diff(lapacke_result(&jc), ref);
    double ediff = cft_max_abs_diff(j.out, ref), jdiff = cft_max_abs_diff(jj.out, ref);

    emit(&j, "lapacke_loop", med[0], mn[0], med[0], med[1], 0.0);
    emit(&j, "lapacke_colmajor", med[1], mn[1], med[0], med[1], cdiff);
    emit(&j, "cft_eager", med[2], mn[2], med[0], med[1], ediff);
    emit(&j, "cft_jit", med[3], mn[3], med[0], med[1], jdiff);
    free(j.A);
    free(j.wa);
    free(j.R);
    free(j.wr);
    free(j.sc);
    free(j.piv);
}

int main(void) {
    openblas_set_num_threads(1);
    cft_init();
    cft_set_num_threads(1);
    const int64_t sizes[][2] = {{64, 64}, {256, 64}, {64, 128}, {32, 256}}; /* {batch, n} */
    for (int op = 0; op < 2; op++)
        for (int d = 0; d < 2; d++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
                bench_case(op == 1, d == 0, sizes[s][0], sizes[s][1]);
    return 0;
}
