/* elementwise.c (bench): the fused elementwise chain gelu(x*a+b)*sigmoid(x)
 * over 1e7 f32, single-threaded: cft_jit against hand-written C compiled
 * into this benchmark (the same expression, one loop, output buffer
 * reused) and against the interpreter (one pass per op), in the same run.
 * Then a softmax over the rows of [4096, 256] and of [65536, 10] in bf16
 * and f16 against f32,
 * each jitted (its max and sum fused with the elementwise work; halves
 * read into floats, reduced in f32, rounded once), timed in alternation.
 * This file is built with -O3 -march=native -fopenmp-simd and libmvec (see
 * CMakeLists.txt), the flags the JIT compiles its kernels with. */
#include <cblas.h>
#include <math.h>
/* vector variants of libm from glibc's libmvec, as a C programmer would use */
float expf(float) __attribute__((simd("notinbranch")));
float erff(float) __attribute__((simd("notinbranch")));
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include <cft/cft.h>

#include "bench.h"

#define N 10000000

static cft_status chain(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *x = in[0];
    out[0] = cft_mul(cft_gelu(cft_add(cft_mul(x, in[1]), in[2]), false), cft_logistic(x));
    return CFT_OK;
}

/* the baseline: what a C programmer writes by hand */
static void hand(const float *restrict x, float *restrict y, float a, float b, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float u = x[i] * a + b;
        y[i] = 0.5f * u * (1.0f + erff(u * 0.70710678f)) * (1.0f / (1.0f + expf(-x[i])));
    }
}

static void emit(const char *method, double med, double mn, const char *base, double base_med) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"bench\": \"elementwise\", \"config\": {\"expr\": \"gelu(x*a+b)*sigmoid(x)\", \"n\": "
           "%d, "
           "\"dtype\": \"f32\"}, \"method\": \"%s\", \"median_ms\": %.3f, \"min_ms\": %.3f, "
           "\"threads\": 1, "
           "\"baseline\": \"%s\", \"ratio_to_baseline\": %.3f, \"peak_rss_mb\": %.1f}\n",
           N, method, med, mn, base, med / base_med, ru.ru_maxrss / 1024.0);
}

/* softmax over the last axis, in x's dtype */
static cft_status softmax_rows(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *e = cft_exp(cft_sub(in[0], cft_max(in[0], (int[]){1}, 1, true)));
    out[0] = cft_div(e, cft_sum(e, (int[]){1}, 1, true));
    return cft_failed(out[0]) ? cft_error_code(out[0]) : CFT_OK;
}
typedef struct {
    cft_fn *f;
    cft_array *x;
} call1;
static void run_call1(void *p) {
    call1 *c = p;
    cft_fn_call1(c->f, &c->x);
}

/* softmax in bf16 / f16 against f32, one line each, over long rows
 * ([4096, 256]: the row loop) and short ones ([65536, 10]: a classifier's
 * logits, the short-row path) */
static void half_softmax_lines(void) {
    cft_set_num_threads(1);
    const int64_t shapes[2][2] = {{4096, 256}, {65536, 10}};
    for (int s = 0; s < 2; s++) {
        cft_array *x = cft_random_normal(cft_random_key(3), CFT_F32, shapes[s], 2);
        cft_fn *f = cft_fn_new(softmax_rows, NULL, 1, 1);
        call1 base = {cft_jit(f), x};
        const cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        for (int d = 0; d < 2; d++) {
            call1 half = {cft_jit(f), cft_astype(x, dts[d])};
            double mh, mb;
            bench_alternate(run_call1, &half, run_call1, &base, 30, &mh, &mb);
            printf("{\"bench\": \"elementwise\", \"config\": {\"expr\": \"softmax(x, axis=1)\", "
                   "\"shape\": [%lld, %lld], \"dtype\": \"%s\"}, \"method\": \"cft_jit\", "
                   "\"median_ms\": %.3f, \"threads\": 1, \"baseline\": \"cft_jit_f32\", "
                   "\"baseline_ms\": %.3f, \"ratio_to_baseline\": %.3f}\n",
                   (long long)shapes[s][0], (long long)shapes[s][1], d ? "f16" : "bf16", mh, mb,
                   mh / mb);
        }
    }
}

int main(void) {
    openblas_set_num_threads(1);
    cft_init();
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    for (int64_t i = 0; i < N; i++)
        x[i] = (float)((i % 2000) - 1000) / 300.0f;
    int64_t n = N;
    cft_array *X = cft_from_f32(x, &n, 1), *A = cft_scalar(0.7, CFT_F32),
              *B = cft_scalar(0.1, CFT_F32);
    cft_array *in[3] = {X, A, B};
    cft_fn *f = cft_fn_new(chain, NULL, 3, 1), *jf = cft_jit(f);
    double ts[15], hm, hmin, jm, jmin, im, imin;
    hand(x, y, 0.7f, 0.1f, N);
    for (int r = 0; r < 15; r++) {
        double t0 = now_ms();
        hand(x, y, 0.7f, 0.1f, N);
        ts[r] = now_ms() - t0;
    }
    bench_stats(ts, 15, &hm, &hmin);
    cft_array *out = cft_fn_call1(jf, in);
    out = cft_fn_call1(jf, in);
    double maxdiff = 0;
    for (int64_t i = 0; i < N; i += 997) {
        double d = fabs(cft_item_at(out, i) - y[i]);
        if (d > maxdiff)
            maxdiff = d;
    }
    for (int r = 0; r < 15; r++) {
        double t0 = now_ms();
        out = cft_fn_call1(jf, in);
        ts[r] = now_ms() - t0;
    }
    bench_stats(ts, 15, &jm, &jmin);
    for (int r = 0; r < 3; r++) {
        double t0 = now_ms();
        out = cft_fn_call1(f, in);
        ts[r] = now_ms() - t0;
    }
    bench_stats(ts, 3, &im, &imin);
    emit("hand_written_c", hm, hmin, "hand_written_c", hm);
    emit("cft_jit", jm, jmin, "hand_written_c", hm);
    emit("cft_interpreter", im, imin, "hand_written_c", hm);
    fprintf(stderr, "max |jit - hand| = %.3g\n", maxdiff);
    half_softmax_lines();
    return 0;
}
