/* per_sample_grads.c (bench): per-sample gradients of the MLP 64-128-128-10
 * for B in {64, 256, 1024}, single-threaded: cft_vmap(cft_grad(loss)),
 * interpreted and compiled (cft_jit), against a C loop of single-example
 * cft_grad calls and against the plain batched gradient (grad of the mean
 * loss, interpreted and compiled), all in the same process. Prints one JSON
 * object per line; ratios are against the loop measured here. The first
 * call of the compiled function (trace, transforms, plan, compile or cache
 * load) is reported too. */
#include <cblas.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../examples/mlp.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*work_fn)(void *);

/* median and min over repetitions filling ~0.6 s (at least 5) */
static void timeit(work_fn w, void *arg, double *median, double *min) {
    w(arg); /* warm-up: traces and caches */
    double t0 = now_ms();
    w(arg);
    double one = now_ms() - t0;
    int reps = one > 0 ? (int)(600 / one) : 50;
    if (reps < 5) reps = 5;
    if (reps > 200) reps = 200;
    double *ts = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        t0 = now_ms();
        w(arg);
        ts[r] = now_ms() - t0;
    }
    qsort(ts, (size_t)reps, sizeof(double), cmp);
    *median = ts[reps / 2];
    *min = ts[0];
    free(ts);
}

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

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static void emit(const char *method, int B, double med, double mn, double base_med, const char *base) {
    printf("{\"bench\": \"per_sample_grads\", \"config\": {\"model\": \"mlp\", \"B\": %d}, "
           "\"method\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, \"threads\": 1, "
           "\"baseline\": \"%s\", \"baseline_median_ms\": %.4f, \"speedup_vs_baseline\": %.2f, "
           "\"peak_rss_mb\": %.1f}\n",
           B, method, med, mn, base, base_med, base_med / med, peak_rss_mb());
    fflush(stdout);
}

int main(void) {
    openblas_set_num_threads(1);
    cft_init();
    digits d;
    if (digits_load(&d)) return 1;
    cft_array *params[MLP_NPARAMS];
    mlp_init(1, params);
    cft_fn *loss = cft_fn_new(mlp_loss, NULL, 8, 1);
    int argnums[MLP_NPARAMS] = {0, 1, 2, 3, 4, 5};
    int in_axes[8] = {CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED,
                      CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0};
    int Bs[3] = {64, 256, 1024};
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

        emit("loop_of_grad", B, lm, lmin, lm, "loop_of_grad");
        emit("cft_vmap_grad", B, vm, vmin, lm, "loop_of_grad");
        emit("batched_grad", B, bm, bmin, lm, "loop_of_grad");
        emit("cft_jit_vmap_grad", B, jm, jmin, lm, "loop_of_grad");
        emit("cft_jit_batched_grad", B, jbm, jbmin, lm, "loop_of_grad");
        printf("{\"bench\": \"per_sample_grads\", \"config\": {\"model\": \"mlp\", \"B\": %d}, "
               "\"method\": \"cft_jit_vmap_grad_first_call\", \"median_ms\": %.3f, \"min_ms\": %.3f, "
               "\"threads\": 1}\n", B, jfirst, jfirst);
        printf("{\"bench\": \"per_sample_grads\", \"config\": {\"model\": \"mlp\", \"B\": %d}, "
               "\"method\": \"cft_vmap_grad_first_call\", \"median_ms\": %.3f, \"min_ms\": %.3f, "
               "\"threads\": 1}\n", B, first, first);
        free(x);
        free(y);
    }
    return 0;
}
