/* per_sample_grads.c (bench): per-sample gradients of the MLP 64-128-128-10
 * for B in {64, 256, 1024}, single-threaded: cft_vmap(cft_grad(loss)),
 * interpreted and compiled (cft_jit), against a C loop of single-example
 * cft_grad calls and against the plain batched gradient (grad of the mean
 * loss, interpreted and compiled), all in the same process. Prints one JSON
 * object per line; ratios are against the loop measured here. The first
 * call of the compiled function (trace, transforms, plan, compile or cache
 * load) is reported too, and automatic dynamic shapes (one jitted function
 * called at new batch sizes after its retrace with B symbolic: no trace per
 * size; see dynamic_bench). Then model "cnn" (conv 3x3, 8 channels -> relu
 * -> linear on 1x8x8 digits, B = 256; see cnn_bench) with the same
 * methods, without the first-call timings. */
#include <cblas.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "../examples/mlp.h"
#include "bench.h"
#include "cnn.h"

typedef struct {
    cft_fn *f;
    cft_array *in[8];
    int B;
    const digits *d;
} job;

static void run_vmap(void *p) {
    job *j = p;
    cft_array *out[MLP_NPARAMS];
    cft_fn_call(j->f, j->in, out);
}
static void run_loop(void *p) {
    job *j = p;
    cft_array *in[8], *out[MLP_NPARAMS];
    memcpy(in, j->in, sizeof(cft_array *) * MLP_NPARAMS);
    for (int i = 0; i < j->B; i++) {
        in[6] = cft_from_f32(j->d->x + (i % j->d->n) * 64, (int64_t[]){64}, 1);
        in[7] = cft_from_i32(j->d->y + (i % j->d->n), NULL, 0);
        cft_fn_call(j->f, in, out);
    }
}

/* writing wbuf_bytes: to fresh pages (mapped, written, unmapped: the page
 * faults a fresh output costs) and to one buffer written before (hot) */
static size_t wbuf_bytes;
static char *wbuf;
static void write_fresh(void *arg) {
    (void)arg;
    char *p = mmap(NULL, wbuf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
    memset(p, 1, wbuf_bytes);
    munmap(p, wbuf_bytes);
}
static void write_hot(void *arg) {
    (void)arg;
    memset(wbuf, 2, wbuf_bytes);
    __asm__ volatile("" ::"r"(wbuf) : "memory");
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static void emit(const char *method, int B, double med, double mn, double base_med,
                 const char *base) {
    printf("{\"bench\": \"per_sample_grads\", \"config\": {\"model\": \"mlp\", \"B\": %d}, "
           "\"method\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, \"threads\": %d, "
           "\"baseline\": \"%s\", \"baseline_median_ms\": %.4f, \"speedup_vs_baseline\": %.2f, "
           "\"ratio_to_baseline\": %.3f, \"peak_rss_mb\": %.1f}\n",
           B, method, med, mn, bench_nthreads, base, base_med, base_med / med, med / base_med,
           peak_rss_mb());
    fflush(stdout);
}

/* ---- model "cnn" (cnn.h), B = 256 (functorch 1.13 reference: 1.78 ms
 * per-sample, 0.76 ms batched) ---- */

static void run_loop_cnn(void *p) {
    job *j = p;
    cft_array *in[6], *out[CNN_NPARAMS];
    memcpy(in, j->in, sizeof(cft_array *) * CNN_NPARAMS);
    for (int i = 0; i < j->B; i++) {
        in[4] = cft_from_f32(j->d->x + (i % j->d->n) * 64, (int64_t[]){1, 8, 8}, 3);
        in[5] = cft_from_i32(j->d->y + (i % j->d->n), NULL, 0);
        cft_fn_call(j->f, in, out);
    }
}

static void emit_cnn(const char *method, int B, double med, double mn, double base_med) {
    printf("{\"bench\": \"per_sample_grads\", \"config\": {\"model\": \"cnn\", \"B\": %d}, "
           "\"method\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, \"threads\": %d, "
           "\"baseline\": \"loop_of_grad\", \"baseline_median_ms\": %.4f, \"speedup_vs_baseline\": "
           "%.2f, \"ratio_to_baseline\": %.3f, "
           "\"peak_rss_mb\": %.1f}\n",
           B, method, med, mn, bench_nthreads, base_med, base_med / med, med / base_med,
           peak_rss_mb());
    fflush(stdout);
}

static void cnn_bench(const digits *d, int B) {
    cft_array *p[CNN_NPARAMS];
    cnn_init(p);
    cft_fn *loss = cft_fn_new(cnn_loss, NULL, 6, 1);
    int argnums[CNN_NPARAMS] = {0, 1, 2, 3};
    int in_axes[6] = {CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0};
    float *x = malloc(sizeof(float) * 64 * (size_t)B);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)B);
    for (int i = 0; i < B; i++) {
        memcpy(x + i * 64, d->x + (i % d->n) * 64, sizeof(float) * 64);
        y[i] = d->y[i % d->n];
    }
    job j = {.B = B, .d = d};
    memcpy(j.in, p, sizeof p);
    j.in[4] = cft_from_f32(x, (int64_t[]){B, 1, 8, 8}, 4);
    j.in[5] = cft_from_i32(y, (int64_t[]){B}, 1);
    double vm, vmin, jm, jmin, lm, lmin, bm, bmin, jbm, jbmin;
    job jv = j, jj = j, jl = j, jb = j, jjb = j;
    jv.f = cft_vmap(cft_grad(loss, argnums, CNN_NPARAMS), in_axes, NULL);
    timeit(run_vmap, &jv, &vm, &vmin);
    jj.f = cft_jit(cft_vmap(cft_grad(loss, argnums, CNN_NPARAMS), in_axes, NULL));
    timeit(run_vmap, &jj, &jm, &jmin);
    jl.f = cft_grad(loss, argnums, CNN_NPARAMS);
    timeit(run_loop_cnn, &jl, &lm, &lmin);
    jb.f = cft_grad(loss, argnums, CNN_NPARAMS);
    timeit(run_vmap, &jb, &bm, &bmin);
    jjb.f = cft_jit(cft_grad(loss, argnums, CNN_NPARAMS));
    timeit(run_vmap, &jjb, &jbm, &jbmin);
    emit_cnn("loop_of_grad", B, lm, lmin, lm);
    emit_cnn("cft_vmap_grad", B, vm, vmin, lm);
    emit_cnn("cft_jit_vmap_grad", B, jm, jmin, lm);
    emit_cnn("batched_grad", B, bm, bmin, lm);
    emit_cnn("cft_jit_batched_grad", B, jbm, jbmin, lm);
    free(x);
    free(y);
}

/* ---- automatic dynamic shapes: one jitted vmap(grad) called at B = 64
 * (trace, compile), at 128 (retrace with B symbolic, compile), then at 8
 * new sizes from 256: each first call there costs a memory plan and a run
 * without the arena, no trace; against the first call of a fresh jit at
 * the same sizes, and the steady state of both plans at 256 ---- */

static void fill_job(job *j, const digits *d, cft_array *const *params, int B) {
    float *x = malloc(sizeof(float) * 64 * (size_t)B);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)B);
    for (int i = 0; i < B; i++) {
        memcpy(x + i * 64, d->x + (i % d->n) * 64, sizeof(float) * 64);
        y[i] = d->y[i % d->n];
    }
    memcpy(j->in, params, sizeof(cft_array *) * MLP_NPARAMS);
    j->in[6] = cft_from_f32(x, (int64_t[]){B, 64}, 2);
    j->in[7] = cft_from_i32(y, (int64_t[]){B}, 1);
    j->B = B;
    j->d = d;
    free(x);
    free(y);
}

static double first_call(job *j) {
    double t0 = now_ms();
    run_vmap(j);
    return now_ms() - t0;
}

static void dynamic_bench(const digits *d, cft_array *const *params, cft_fn *loss,
                          const int *argnums, const int *in_axes) {
    enum { NEW = 8 };
    job j;
    cft_fn *f = cft_jit(cft_vmap(cft_grad(loss, argnums, MLP_NPARAMS), in_axes, NULL));
    fill_job(&j, d, params, 64);
    j.f = f;
    double first = first_call(&j);
    fill_job(&j, d, params, 128);
    double retrace = first_call(&j);
    double tn[NEW], tf[NEW], nm, nmin, fm, fmin;
    for (int k = 0; k < NEW; k++) {
        fill_job(&j, d, params, 256 + 8 * k);
        j.f = f;
        tn[k] = first_call(&j);
        j.f = cft_jit(cft_vmap(cft_grad(loss, argnums, MLP_NPARAMS), in_axes, NULL));
        tf[k] = first_call(&j);
    }
    bench_stats(tn, NEW, &nm, &nmin); /* medians: a GC collection lands on some calls */
    bench_stats(tf, NEW, &fm, &fmin);
    double sm, smin, cm, cmin;
    fill_job(&j, d, params, 256);
    j.f = f;
    timeit(run_vmap, &j, &sm, &smin);
    j.f = cft_jit(cft_vmap(cft_grad(loss, argnums, MLP_NPARAMS), in_axes, NULL));
    timeit(run_vmap, &j, &cm, &cmin);
    cft_jit_stats st;
    cft_jit_stats_of(f, &st);
    const char *fmt = "{\"bench\": \"per_sample_grads\", \"config\": {\"model\": \"mlp\", "
                      "\"B\": \"%s\", \"calls\": \"%s\"}, \"method\": \"%s\", \"median_ms\": %.3f, "
                      "\"min_ms\": %.3f, \"threads\": %d, \"baseline\": \"%s\", "
                      "\"baseline_median_ms\": %.3f, \"traces\": %d}\n";
    printf(fmt, "64", "64", "cft_jit_vmap_grad_first_call", first, first, bench_nthreads, "none",
           0.0, 1);
    printf(fmt, "128", "64,128", "cft_jit_vmap_grad_symbolic_retrace", retrace, retrace,
           bench_nthreads, "cft_jit_vmap_grad_first_call", first, 2);
    printf(fmt, "256..312", "64,128,then each size once",
           "cft_jit_vmap_grad_new_size_after_retrace", nm, nmin, bench_nthreads,
           "cft_jit_vmap_grad_first_call_fresh_jit", fm, st.traces);
    printf(fmt, "256", "64,128,256,...", "cft_jit_vmap_grad_symbolic_plan", sm, smin,
           bench_nthreads, "cft_jit_vmap_grad_specialised_plan", cm, st.traces);
    fflush(stdout);
}

/* an MLP w[0] -> w[1] -> w[2] -> w[3] as mlp.h initialises its own */
static void sized_mlp(const int64_t *w, cft_array **p) {
    cft_array *keys = cft_random_split(cft_random_key(3), 6);
    for (int l = 0; l < 3; l++) {
        double bound = 1.0 / sqrt((double)w[l]);
        p[2 * l] = cft_random_uniform(cft_index(keys, 2 * l), CFT_F32, (int64_t[]){w[l], w[l + 1]},
                                      2, -bound, bound);
        p[2 * l + 1] =
            cft_random_uniform(cft_index(keys, 2 * l + 1), CFT_F32, &w[l + 1], 1, -bound, bound);
    }
}

int main(int argc, char **argv) {
    bench_threads(argc, argv); /* and cft_init */
    digits d;
    if (digits_load(&d))
        return 1;
    cft_array *params[MLP_NPARAMS];
    mlp_init(1, params);
    cft_fn *loss = cft_fn_new(mlp_loss, NULL, 8, 1);
    int argnums[MLP_NPARAMS] = {0, 1, 2, 3, 4, 5};
    int in_axes[8] = {CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED,
                      0,
                      0};
    int Bs[3] = {64, 256, 1024};
    const cft_dev *dev = bench_device(argc, argv);
    /* --device: the jitted vmap(grad) and the plain batched gradient there,
     * for the MLP of the digits at B = 64, 256, 1024 and two wider MLPs on
     * random data (issue 32's table; bench/peers/jax_gpu.py runs the same) */
    for (int k = 0; k < 5 && dev; k++) {
        static const int64_t widths[5][4] = {{64, 128, 128, 10},
                                             {64, 128, 128, 10},
                                             {64, 128, 128, 10},
                                             {256, 512, 512, 10},
                                             {784, 1024, 1024, 10}};
        static const int Bk[5] = {64, 256, 1024, 1024, 256};
        const int64_t *w = widths[k];
        int B = Bk[k];
        cft_array *in[8];
        if (k < 3) { /* the digits */
            cft_array *xs = cft_from_f32(d.x, (int64_t[]){d.n, 64}, 2);
            memcpy(in, params, sizeof(cft_array *) * MLP_NPARAMS);
            int64_t lo[2] = {0, 0}, hi[2] = {B < d.n ? B : d.n, 64};
            in[6] = cft_slice(xs, lo, hi, NULL);
            in[7] = cft_slice(cft_from_i32(d.y, (int64_t[]){d.n}, 1), lo, hi, NULL);
        } else {
            sized_mlp(w, in);
            in[6] = cft_random_normal(cft_random_key(11), CFT_F32, (int64_t[]){B, w[0]}, 2);
            in[7] = cft_random_randint(cft_random_key(12), (int64_t[]){B}, 1, 0, w[3], CFT_I32);
        }
        char cfg[96];
        snprintf(cfg, sizeof cfg, "\"model\": \"mlp %lld-%lld-%lld-%lld\", \"B\": %d",
                 (long long)w[0], (long long)w[1], (long long)w[2], (long long)w[3], B);
        bench_on_device("per_sample_grads", cfg, "cft_jit_vmap_grad",
                        cft_vmap(cft_grad(loss, argnums, MLP_NPARAMS), in_axes, NULL), 8, in,
                        MLP_NPARAMS, dev);
        if (B == 1024)
            bench_on_device("per_sample_grads", cfg, "cft_jit_batched_grad",
                            cft_grad(loss, argnums, MLP_NPARAMS), 8, in, MLP_NPARAMS, dev);
    }
    if (dev)
        return 0;
    for (int k = 0; k < 3; k++) {
        int B = Bs[k];
        float *x = malloc(sizeof(float) * 64 * (size_t)B);
        int32_t *y = malloc(sizeof(int32_t) * (size_t)B);
        for (int i = 0; i < B; i++) {
            memcpy(x + i * 64, d.x + (i % d.n) * 64, sizeof(float) * 64);
            y[i] = d.y[i % d.n];
        }
        job j = {.B = B, .d = &d};
        memcpy(j.in, params, sizeof(cft_array *) * MLP_NPARAMS);
        j.in[6] = cft_from_f32(x, (int64_t[]){B, 64}, 2);
        j.in[7] = cft_from_i32(y, (int64_t[]){B}, 1);

        /* first call of a fresh vmap(grad): trace + transforms + first run */
        j.f = cft_vmap(cft_grad(loss, argnums, MLP_NPARAMS), in_axes, NULL);
        double t0 = now_ms();
        run_vmap(&j);
        double first = now_ms() - t0;

        double vm, vmin, lm, lmin, bm, bmin, jm, jmin, jbm, jbmin;
        timeit(run_vmap, &j, &vm, &vmin);
        job jj = j;
        jj.f = cft_jit(cft_vmap(cft_grad(loss, argnums, MLP_NPARAMS), in_axes, NULL));
        t0 = now_ms();
        run_vmap(&jj);
        double jfirst = now_ms() - t0;
        timeit(run_vmap, &jj, &jm, &jmin);
        job jjb = j;
        jjb.f = cft_jit(cft_grad(loss, argnums, MLP_NPARAMS));
        timeit(run_vmap, &jjb, &jbm, &jbmin);
        job jl = j;
        jl.f = cft_grad(loss, argnums, MLP_NPARAMS);
        timeit(run_loop, &jl, &lm, &lmin);
        job jb = j;
        jb.f = cft_grad(loss, argnums, MLP_NPARAMS);
        timeit(run_vmap, &jb, &bm, &bmin);

        { /* the bandwidth floor: writing the per-sample gradients' bytes */
            size_t bytes = 0;
            for (int l = 0; l < MLP_NPARAMS; l++)
                bytes += (size_t)cft_array_size(params[l]) * 4 * (size_t)B;
            double fresh, fmin, hot, hmin;
            wbuf_bytes = bytes;
            timeit(write_fresh, NULL, &fresh, &fmin);
            wbuf = malloc(bytes);
            memset(wbuf, 0, bytes);
            timeit(write_hot, NULL, &hot, &hmin);
            free(wbuf);
            printf("{\"bench\": \"per_sample_grads\", \"config\": {\"model\": \"mlp\", "
                   "\"B\": %d, \"bytes\": %zu}, \"method\": \"cft_jit_vmap_grad\", "
                   "\"median_ms\": %.4f, \"threads\": %d, \"baseline\": \"writing the same "
                   "bytes to fresh pages (mmap, memset, munmap)\", \"baseline_median_ms\": %.4f, "
                   "\"ratio_to_baseline\": %.3f, \"hot_memset_ms\": %.4f, "
                   "\"ratio_to_hot_memset\": %.3f}\n",
                   B, bytes, jm, bench_nthreads, fresh, jm / fresh, hot, jm / hot);
        }
        if (B == 256) { /* the profiler's cost when recording, same plan, same run */
            double on, onmin, off, offmin;
            timeit(run_vmap, &jj, &off, &offmin);
            cft_profile_start();
            timeit(run_vmap, &jj, &on, &onmin);
            cft_profile_stop(NULL);
            printf("{\"bench\": \"per_sample_grads\", \"config\": {\"model\": \"mlp\", "
                   "\"B\": %d}, \"method\": \"cft_jit_vmap_grad_profiled\", \"median_ms\": "
                   "%.4f, \"min_ms\": %.4f, \"threads\": %d, \"baseline\": "
                   "\"cft_jit_vmap_grad, profiler off\", \"baseline_median_ms\": %.4f, "
                   "\"ratio_to_baseline\": %.3f}\n",
                   B, on, onmin, bench_nthreads, off, on / off);
        }
        emit("loop_of_grad", B, lm, lmin, lm, "loop_of_grad");
        emit("cft_vmap_grad", B, vm, vmin, lm, "loop_of_grad");
        emit("batched_grad", B, bm, bmin, lm, "loop_of_grad");
        emit("cft_jit_vmap_grad", B, jm, jmin, lm, "loop_of_grad");
        emit("cft_jit_batched_grad", B, jbm, jbmin, lm, "loop_of_grad");
        char cfg[48];
        snprintf(cfg, sizeof cfg, "\"model\": \"mlp\", \"B\": %d", B);
        bench_scaling("per_sample_grads", cfg, "cft_jit_vmap_grad", run_vmap, &jj, 40);
        bench_scaling("per_sample_grads", cfg, "cft_jit_batched_grad", run_vmap, &jjb, 40);
        printf(
            "{\"bench\": \"per_sample_grads\", \"config\": {\"model\": \"mlp\", \"B\": %d}, "
            "\"method\": \"cft_jit_vmap_grad_first_call\", \"median_ms\": %.3f, \"min_ms\": %.3f, "
            "\"threads\": %d}\n",
            B, jfirst, jfirst, bench_nthreads);
        printf("{\"bench\": \"per_sample_grads\", \"config\": {\"model\": \"mlp\", \"B\": %d}, "
               "\"method\": \"cft_vmap_grad_first_call\", \"median_ms\": %.3f, \"min_ms\": %.3f, "
               "\"threads\": %d}\n",
               B, first, first, bench_nthreads);
        free(x);
        free(y);
    }
    dynamic_bench(&d, params, loss, argnums, in_axes);
    cnn_bench(&d, 256);
    return 0;
}
