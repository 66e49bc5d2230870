/* fft.c (bench): cft's overhead over FFTW for batched transforms, single
 * threaded, in the same run on the same data. Configurations (each over 1
 * ms of work): c2c c64 [256, 4096] along the last axis and along axis 0 of
 * [4096, 256] (a strided transform), c2c c128 [64, 16384], r2c f64
 * [64, 65536], r2c f32 [256, 4096] with norm "ortho" (a scaling pass), and
 * c2r f64 [64, 65536 / 2 + 1] -> [64, 65536] (irfft).
 *
 * Methods: cft_eager (cft_fft_* on an array), cft_jit (the same call in a
 * cft_jit function), and two baselines that execute the same FFTW plan
 * (same planner flags, one "many" plan over the batch, the same output
 * layout as cft's) on the same input buffer: fftw_direct allocates its
 * output each call (fftw_malloc/fftw_free), as cft does, and also does what cft's
 * result includes: the c2r input copy (FFTW destroys a c2r input) and the
 * 1/n (irfft) or 1/sqrt(n) (ortho) scaling; fftw_prealloc reuses one
 * output buffer. Allocating a buffer above glibc's mmap threshold (32 MiB
 * at most) faults its pages in on every call while the GC reuses its
 * blocks, so the baseline is the faster of the two. overhead_ratio = the
 * method's median / the baseline's. The methods run in interleaved rounds
 * (robust to other load on the machine). max_abs_diff compares each
 * result with FFTW's.
 *
 * Usage: fft [--planner estimate|measure] (cft's planner follows
 * CFT_FFTW_PLANNER; this sets it). */
#include <complex.h>
#include <fftw3.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cft/cft.h>

#include "bench.h"

enum { C2C, R2C, C2R };
static const char *const tnames[] = {"c2c", "r2c", "c2r"};

typedef struct {
    int type;
    bool dbl, axis0; /* axis0: c2c along axis 0 of [n, B] */
    int64_t B, n;
    cft_fft_norm norm;
    unsigned flags;
    /* FFTW side */
    void *plan;
    void *in;   /* the input (a copy of the cft array's values) */
    void *work; /* c2r: the destroyable copy */
    void *out;  /* prealloc output */
    size_t in_bytes, out_bytes;
    int64_t out_elems; /* reals or complexes, per out_cplx */
    bool prealloc;
    double scale;
    void *last; /* the last fftw_direct output (kept for the diff) */
    /* cft side */
    cft_array *x, *y;
    cft_fn *f;
} job;

static size_t rsz(const job *j) {
    return j->dbl ? sizeof(double) : sizeof(float);
}

static void scale_buf(void *p, int64_t nreal, bool dbl, double s) {
    if (dbl)
        for (int64_t i = 0; i < nreal; i++)
            ((double *)p)[i] *= s;
    else
        for (int64_t i = 0; i < nreal; i++)
            ((float *)p)[i] *= (float)s;
}

static void run_fftw(void *p) {
    job *j = p;
    void *out = j->prealloc ? j->out : fftw_malloc(j->out_bytes); /* the plan's alignment */
    if (j->type == C2R) { /* the copy FFTW's c2r needs, scaled by 1/n */
        int64_t nr = (int64_t)(j->in_bytes / rsz(j));
        if (j->dbl) {
            const double *s = j->in;
            double *d = j->work, sc = j->scale;
            for (int64_t i = 0; i < nr; i++)
                d[i] = sc * s[i];
        } else {
            const float *s = j->in;
            float *d = j->work, sc = (float)j->scale;
            for (int64_t i = 0; i < nr; i++)
                d[i] = sc * s[i];
        }
    }
    if (j->dbl) {
        if (j->type == C2C)
            fftw_execute_dft(j->plan, j->in, out);
        else if (j->type == R2C)
            fftw_execute_dft_r2c(j->plan, j->in, out);
        else
            fftw_execute_dft_c2r(j->plan, j->work, out);
    } else {
        if (j->type == C2C)
            fftwf_execute_dft(j->plan, j->in, out);
        else if (j->type == R2C)
            fftwf_execute_dft_r2c(j->plan, j->in, out);
        else
            fftwf_execute_dft_c2r(j->plan, j->work, out);
    }
    if (j->type != C2R && j->scale != 1)
        scale_buf(out, (int64_t)(j->out_bytes / rsz(j)), j->dbl, j->scale);
    if (!j->prealloc) {
        fftw_free(j->last);
        j->last = out;
    }
}

static cft_array *cft_op(const job *j, cft_array *x) {
    switch (j->type) {
    case C2C:
        return cft_fft_fft(x, -1, j->axis0 ? 0 : -1, j->norm);
    case R2C:
        return cft_fft_rfft(x, -1, -1, j->norm);
    default:
        return cft_fft_irfft(x, j->n, -1, j->norm);
    }
}
static cft_status op_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_op(env, in[0]);
    return CFT_OK;
}
static void run_cft(void *p) {
    job *j = p;
    j->y = j->f ? cft_fn_call1(j->f, &j->x) : cft_op(j, j->x);
}

/* max |cft's result - FFTW's| */
static double diff(const job *j, cft_array *y, const void *ref) {
    if (j->axis0) /* FFTW's rows are the columns of cft's result */
        y = cft_transpose(y, NULL);
    int64_t n = cft_array_size(y);
    bool cplx = cft_dtype_is_complex(cft_array_dtype(y));
    double *v = malloc(sizeof(double) * (size_t)(2 * n));
    cft_copy_to(y, cplx ? CFT_C128 : CFT_F64, v);
    double m = 0;
    for (int64_t i = 0; i < (cplx ? 2 * n : n); i++) {
        double r = j->dbl ? ((const double *)ref)[i] : ((const float *)ref)[i];
        m = fmax(m, fabs(v[i] - r));
    }
    free(v);
    return m;
}

/* time k methods in interleaved rounds (each round in a rotated order), so
 * that load changes on a shared machine hit every method alike; medians and
 * minima per method */
static void time_interleaved(work_fn *w, void **a, int k, double *med, double *mn) {
    double one = 0;
    for (int i = 0; i < k; i++) { /* warm-up: plans, traces, compiles */
        w[i](a[i]);
        double t0 = now_ms();
        w[i](a[i]);
        one = fmax(one, now_ms() - t0);
    }
    int reps = one > 0 ? (int)(2000 / (one * k)) : 100;
    reps = reps < 7 ? 7 : reps > 200 ? 200 : reps;
    double *ts = malloc(sizeof(double) * (size_t)(k * reps));
    for (int r = 0; r < reps; r++)
        for (int q = 0; q < k; q++) {
            int i = (q + r) % k;
            double t0 = now_ms();
            w[i](a[i]);
            ts[i * reps + r] = now_ms() - t0;
        }
    for (int i = 0; i < k; i++)
        bench_stats(ts + i * reps, reps, &med[i], &mn[i]);
    free(ts);
}

static void emit(const job *j, const char *planner, const char *method, double med, double mn,
                 const char *base, double bmed, double d) {
    const char *dt = j->type == C2C ? (j->dbl ? "c128" : "c64") : j->dbl ? "f64" : "f32";
    static const char *const norms[] = {"backward", "ortho", "forward"};
    int64_t s0 = j->axis0 ? j->n : j->B, s1 = j->axis0         ? j->B
                                              : j->type == C2R ? j->n / 2 + 1
                                                               : j->n;
    printf("{\"bench\": \"fft\", \"config\": {\"transform\": \"%s\", \"dtype\": \"%s\", "
           "\"shape\": [%lld, %lld], \"axis\": %d, \"n\": %lld, \"norm\": \"%s\", \"planner\": "
           "\"%s\"}, \"method\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, \"threads\": 1, "
           "\"baseline\": \"%s\", \"baseline_median_ms\": %.4f, \"overhead_ratio\": "
           "%.3f, \"work_over_1ms\": %s, \"max_abs_diff\": %.2e}\n",
           tnames[j->type], dt, (long long)s0, (long long)s1, j->axis0 ? 0 : -1, (long long)j->n,
           norms[j->norm], planner, method, med, mn, base, bmed, med / bmed,
           bmed > 1.0 ? "true" : "false", d);
    fflush(stdout);
}

static void bench_case(int type, bool dbl, bool axis0, int64_t B, int64_t n, cft_fft_norm norm,
                       unsigned flags, const char *planner) {
    job j = {
        .type = type, .dbl = dbl, .axis0 = axis0, .B = B, .n = n, .norm = norm, .flags = flags};
    size_t r = rsz(&j);
    int64_t half = n / 2 + 1;
    /* input: random values, as a cft array and a host copy */
    cft_dtype rdt = dbl ? CFT_F64 : CFT_F32;
    cft_array *key = cft_random_key((uint64_t)(n + B + type));
    int64_t inner = type == C2R ? half : n;
    int64_t shape[2] = {axis0 ? n : B, axis0 ? B : inner};
    cft_array *re = cft_random_normal(key, rdt, shape, 2);
    cft_array *im = cft_random_normal(cft_random_fold_in(key, 1), rdt, shape, 2);
    j.x = type == R2C ? re : cft_complex(re, im);
    j.in_bytes = (size_t)(B * inner) * r * (type == R2C ? 1 : 2);
    j.in = fftw_malloc(j.in_bytes);
    j.out_bytes = (size_t)(B * (type == R2C ? half : n)) * r * (type == C2R ? 1 : 2);
    j.out = fftw_malloc(j.out_bytes);
    j.work = type == C2R ? fftw_malloc(j.in_bytes) : NULL;
    double N = (double)n;
    j.scale = norm == CFT_FFT_ORTHO                         ? 1 / sqrt(N)
              : (norm == CFT_FFT_BACKWARD) == (type == C2R) ? 1 / N
                                                            : 1;
    /* the FFTW plan: one transform of n repeated B times (made before the
     * input is written: measuring planners overwrite the arrays); along
     * axis 0 it reads strided and writes rows, the layout of cft's result
     * before its axes move back */
    int nn = (int)n;
    int dist_in = axis0 ? 1 : (int)inner, dist_out = (int)(type == R2C ? half : n);
    int stride = axis0 ? (int)B : 1;
    void *pin = type == C2R ? j.work : j.in;
    if (dbl) {
        if (type == C2C)
            j.plan = fftw_plan_many_dft(1, &nn, (int)B, pin, NULL, stride, dist_in, j.out, NULL, 1,
                                        dist_out, FFTW_FORWARD, flags | FFTW_PRESERVE_INPUT);
        else if (type == R2C)
            j.plan = fftw_plan_many_dft_r2c(1, &nn, (int)B, pin, NULL, 1, dist_in, j.out, NULL, 1,
                                            dist_out, flags | FFTW_PRESERVE_INPUT);
        else
            j.plan = fftw_plan_many_dft_c2r(1, &nn, (int)B, pin, NULL, 1, dist_in, j.out, NULL, 1,
                                            dist_out, flags | FFTW_DESTROY_INPUT);
    } else {
        if (type == C2C)
            j.plan = fftwf_plan_many_dft(1, &nn, (int)B, pin, NULL, stride, dist_in, j.out, NULL, 1,
                                         dist_out, FFTW_FORWARD, flags | FFTW_PRESERVE_INPUT);
        else if (type == R2C)
            j.plan = fftwf_plan_many_dft_r2c(1, &nn, (int)B, pin, NULL, 1, dist_in, j.out, NULL, 1,
                                             dist_out, flags | FFTW_PRESERVE_INPUT);
        else
            j.plan = fftwf_plan_many_dft_c2r(1, &nn, (int)B, pin, NULL, 1, dist_in, j.out, NULL, 1,
                                             dist_out, flags | FFTW_DESTROY_INPUT);
    }
    if (!j.plan) {
        fprintf(stderr, "fft bench: FFTW could not plan\n");
        exit(1);
    }
    cft_copy_to(j.x, cft_array_dtype(j.x), j.in);
    /* the four methods, timed in interleaved rounds */
    job jd = j, jp = j, je = j, jj = j;
    jp.prealloc = true;
    jj.f = cft_jit(cft_fn_new(op_cb, &jj, 1, 1));
    work_fn w[4] = {run_fftw, run_fftw, run_cft, run_cft};
    void *a[4] = {&jd, &jp, &je, &jj};
    double med[4], mn[4];
    time_interleaved(w, a, 4, med, mn);
    bool direct = med[0] <= med[1];
    const char *base = direct ? "fftw_direct" : "fftw_prealloc";
    double bm = direct ? med[0] : med[1];
    emit(&j, planner, "fftw_direct", med[0], mn[0], base, bm, 0);
    emit(&j, planner, "fftw_prealloc", med[1], mn[1], base, bm, 0);
    emit(&j, planner, "cft_eager", med[2], mn[2], base, bm, diff(&j, je.y, jd.last));
    emit(&j, planner, "cft_jit", med[3], mn[3], base, bm, diff(&j, jj.y, jd.last));
    fftw_free(jd.last);
    if (dbl)
        fftw_destroy_plan(j.plan);
    else
        fftwf_destroy_plan(j.plan);
    fftw_free(j.in);
    fftw_free(j.out);
    fftw_free(j.work);
}

int main(int argc, char **argv) {
    unsigned flags = FFTW_ESTIMATE;
    const char *planner = "estimate";
    if (argc > 2 && !strcmp(argv[1], "--planner") && !strcmp(argv[2], "measure")) {
        flags = FFTW_MEASURE;
        planner = "measure";
    }
    setenv("CFT_FFTW_PLANNER", planner, 1);
    cft_init();
    cft_set_num_threads(1);
    bench_case(C2C, false, false, 256, 4096, CFT_FFT_BACKWARD, flags, planner);
    bench_case(C2C, false, true, 256, 4096, CFT_FFT_BACKWARD, flags, planner);
    bench_case(C2C, true, false, 64, 16384, CFT_FFT_BACKWARD, flags, planner);
    bench_case(R2C, true, false, 64, 65536, CFT_FFT_BACKWARD, flags, planner);
    bench_case(R2C, false, false, 256, 4096, CFT_FFT_ORTHO, flags, planner);
    bench_case(C2R, true, false, 64, 65536, CFT_FFT_BACKWARD, flags, planner);
    return 0;
}
