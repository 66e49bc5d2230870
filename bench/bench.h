/* bench.h: what every benchmark shares: a monotonic clock in milliseconds,
 * median/min of samples, the thread count of the run, and timeit, which
 * is cft_timer_blocked_autorange (cft/timer.h) in milliseconds. */
#ifndef CFT_BENCH_H
#define CFT_BENCH_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cft/cft.h"
#include "cft/device.h"
#include "cft/profile.h"
#ifdef CFT_BENCH_TEST_BACKEND
#include "support/test_backend.h"
#endif

/* cft_init, and the thread count of this run: --threads N on the command
 * line, else cft's default (CFT_NUM_THREADS, else the cores this process
 * may use). Every JSON line carries it as "threads". */
static int bench_nthreads = 1;

/* --load N: N CPU-bound helper processes beside the measured calls (a
 * busy machine: another tenant, a compile, a second job), started here and
 * killed at exit (and by the kernel if the bench dies: PR_SET_PDEATHSIG).
 * Every JSON line of bench_scaling carries "load": N. */
static int bench_load_n = 0;
static pid_t bench_load_pids[256];
static void bench_load_stop(void) {
    for (int i = 0; i < bench_load_n; i++)
        if (bench_load_pids[i] > 0) {
            kill(bench_load_pids[i], SIGKILL);
            waitpid(bench_load_pids[i], NULL, 0);
        }
    bench_load_n = 0;
}
static inline void bench_load_start(int n) {
    n = n > 256 ? 256 : n;
    for (int i = 0; i < n; i++) {
        fflush(stdout);
        pid_t p = fork();
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            volatile double x = 1;
            for (;;)
                x = x * 1.0000001 + 1e-9;
        }
        bench_load_pids[bench_load_n++] = p;
    }
    atexit(bench_load_stop);
}

static inline int bench_threads(int argc, char **argv) {
    cft_init();
    const char *s = NULL;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--threads"))
            s = argv[i + 1];
        if (!strcmp(argv[i], "--load") && atoi(argv[i + 1]) > 0)
            bench_load_start(atoi(argv[i + 1]));
    }
    if (s)
        cft_set_num_threads(atoi(s) > 0 ? atoi(s) : 1);
    bench_nthreads = cft_get_num_threads();
    return bench_nthreads;
}

static inline double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median and min of n samples (sorts them) */
static inline void bench_stats(double *ts, int n, double *median, double *min) {
    qsort(ts, (size_t)n, sizeof(double), bench_cmp);
    *median = ts[n / 2];
    *min = ts[0];
}

typedef void (*work_fn)(void *);

/* median and min per call: cft_timer_blocked_autorange (torch's
 * blocked_autorange: a warm-up call, blocks of at least 10 us, 0.6 s of
 * blocks in all) */
/* With CFT_BENCH_PROFILE set, each measurement is followed by 100 calls
 * under cft's profiler, whose table goes to stderr (before the JSON line
 * of that measurement). */
static inline void timeit(work_fn w, void *arg, double *median, double *min) {
    cft_measurement m;
    if (cft_timer_blocked_autorange(w, arg, 0.6, &m) != CFT_OK) {
        *median = *min = -1;
        return;
    }
    *median = m.median * 1e3, *min = m.min * 1e3;
    if (getenv("CFT_BENCH_PROFILE")) {
        static int nth;
        cft_profile_start();
        for (int i = 0; i < 100; i++)
            w(arg);
        cft_profile_stop(NULL);
        fprintf(stderr, "-- measurement %d: median %.4f ms; 100 calls profiled:\n", ++nth, *median);
        cft_profile_table(stderr, 25);
    }
}

/* median time per call of a and b, `rounds` rounds alternating. Each
 * side is first warmed up (alternately, 50 ms or 1000 calls each: a
 * process's first few hundred calls of a small program run slower while
 * the collector's heap grows, which 5-call rounds from the start counted:
 * the digits CNN's int8 forward read 0.52-0.64x f32 there against
 * 0.46-0.51 in steady state). Each round is one untimed call, then enough
 * calls for about 1 ms (5 at least), timed */
static inline void bench_alternate(work_fn a, void *pa, work_fn b, void *pb, int rounds, double *ma,
                                   double *mb) {
    double *ta = malloc(sizeof(double) * (size_t)rounds),
           *tb = malloc(sizeof(double) * (size_t)rounds);
    int calls[2];
    for (int side = 0; side < 2; side++) {
        work_fn w = side ? b : a;
        void *p = side ? pb : pa;
        w(p); /* a first call: compiling, first allocations */
        double t0 = now_ms();
        int n = 0;
        while (n < 1000 && now_ms() - t0 < 50)
            w(p), n++;
        double per = (now_ms() - t0) / (n ? n : 1), c = per > 0 ? 1.0 / per : 1000;
        calls[side] = c < 5 ? 5 : c > 1000 ? 1000 : (int)c;
    }
    for (int r = 0; r < rounds; r++)
        for (int side = 0; side < 2; side++) {
            work_fn w = side ? b : a;
            void *p = side ? pb : pa;
            w(p);
            double t0 = now_ms();
            for (int i = 0; i < calls[side]; i++)
                w(p);
            (side ? tb : ta)[r] = (now_ms() - t0) / calls[side];
        }
    double mn;
    bench_stats(ta, rounds, ma, &mn);
    bench_stats(tb, rounds, mb, &mn);
    free(ta), free(tb);
}

/* Under CFT_BENCH_PROFILE, where each side's time goes: `calls` calls of
 * a, then of b, each under cft's profiler, its table on stderr headed by
 * what and the side's name */
static inline void bench_profile_pair(work_fn a, void *pa, work_fn b, void *pb, const char *what,
                                      const char *na, const char *nb, int calls) {
    if (!getenv("CFT_BENCH_PROFILE"))
        return;
    for (int side = 0; side < 2; side++) {
        cft_profile_start();
        for (int i = 0; i < calls; i++)
            (side ? b : a)(side ? pb : pa);
        cft_profile_stop(NULL);
        fprintf(stderr, "-- %s%s%s, %d calls:\n", what, *what ? ", " : "", side ? nb : na, calls);
        cft_profile_table(stderr, 25);
    }
}

/* The run's thread count against one thread, timed in alternation in this
 * process (the thread count switched between rounds): `rounds` rounds of
 * 5 calls at each count, each after 20 ms of untimed calls at its count
 * (timed right after the switch, two threads measured 1.04x where they
 * run 1.7x in a loop: the second core had idled through the one-thread
 * round). A second core that another tenant takes now and then falls on
 * both alike, where two separate runs' medians moved by 2x. With one
 * thread in the run, nothing is printed. Otherwise one JSON line: method
 * "<method>_threads_scaling", its time at bench_nthreads threads, baseline
 * "<method>_1_thread", the ratio n threads / 1 thread of the best rounds
 * (best_ratio) and of the median rounds (median_ratio), and
 * ratio_to_baseline: the best rounds' on a quiet run, the median rounds'
 * under --load (where a best round is one the helpers happened to leave
 * alone); parallel_regions and preempted_regions count cft's regions on
 * several threads meanwhile and those in which a thread was preempted
 * (what made cft fall back to one thread: core/par.c); config is the JSON
 * object's members. */
void cft__par_load_stats(int64_t *regions, int64_t *preempted); /* core/par.h */
static inline void bench_scaling(const char *bench, const char *config, const char *method,
                                 work_fn w, void *arg, int rounds) {
    int n = bench_nthreads;
    if (n < 2 || rounds < 1)
        return;
    int64_t reg0, pre0, reg1, pre1;
    cft__par_load_stats(&reg0, &pre0);
    double *t1 = malloc(sizeof(double) * (size_t)rounds),
           *tn = malloc(sizeof(double) * (size_t)rounds);
    for (int r = 0; r < rounds; r++)
        for (int pass = 0; pass < 2; pass++) {
            cft_set_num_threads(pass ? n : 1);
            double t0 = now_ms();
            do /* warm: a core idle for a while wakes slowly (a VM's vCPU more so) */
                w(arg);
            while (now_ms() - t0 < 20);
            t0 = now_ms();
            for (int i = 0; i < 5; i++)
                w(arg);
            (pass ? tn : t1)[r] = (now_ms() - t0) / 5;
        }
    cft_set_num_threads(n);
    cft__par_load_stats(&reg1, &pre1);
    double m1, b1, mn, bn;
    bench_stats(t1, rounds, &m1, &b1);
    bench_stats(tn, rounds, &mn, &bn);
    free(t1), free(tn);
    double ratio = bench_load_n ? mn / m1 : bn / b1;
    printf("{\"bench\": \"%s\", \"config\": {%s}, \"method\": \"%s_threads_scaling\", "
           "\"median_ms\": %.4f, \"min_ms\": %.4f, \"threads\": %d, \"load\": %d, "
           "\"baseline\": \"%s_1_thread\", \"baseline_median_ms\": %.4f, "
           "\"baseline_min_ms\": %.4f, \"ratio_to_baseline\": %.3f, \"best_ratio\": %.3f, "
           "\"median_ratio\": %.3f, \"speedup\": %.2f, \"rounds\": %d, "
           "\"parallel_regions\": %lld, \"preempted_regions\": %lld}\n",
           bench, config, method, mn, bn, n, bench_load_n, method, m1, b1, ratio, bn / b1, mn / m1,
           1 / ratio, rounds, (long long)(reg1 - reg0), (long long)(pre1 - pre0));
    fflush(stdout);
}

/* --device NAME (cuda:0, test:0): the device this run measures on instead
 * of its usual methods; NULL when not asked. A device that cannot be used
 * here is said on stderr and the run exits 77 (skipped). --matmul-precision
 * highest | high | medium sets cft_set_float32_matmul_precision (TF32 with
 * high, bf16 with medium) for the run; the device lines name it. */
static const char *bench_precision = "highest";
static inline const cft_dev *bench_device(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--matmul-precision")) {
            const char *p = argv[i + 1];
            int v = !strcmp(p, "highest")  ? 0
                    : !strcmp(p, "high")   ? 1
                    : !strcmp(p, "medium") ? 2
                                           : -1;
            if (v < 0 || cft_set_float32_matmul_precision((cft_matmul_precision)v) != CFT_OK) {
                fprintf(stderr, "--matmul-precision %s: highest, high or medium\n", p);
                exit(2);
            }
            bench_precision = p;
        }
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--device")) {
#ifdef CFT_BENCH_TEST_BACKEND /* test:N, the test backend (tests/support) */
            if (!strncmp(argv[i + 1], "test", 4))
                test_backend_register();
#endif
            const cft_dev *d = cft_device(argv[i + 1]);
            if (cft_device_error(d)) {
                fprintf(stderr, "%s: %s\n", argv[i + 1], cft_error_message(cft_device_error(d)));
                exit(77);
            }
            return d;
        }
    return NULL;
}

typedef struct {
    cft_fn *f;
    cft_array **in, *out[32];
    const cft_dev *d;
} bench_call;

static void bench_call_run(void *p) {
    bench_call *c = p;
    cft_fn_call(c->f, c->in, c->out);
    if (c->d) /* launches are asynchronous: the time is the device's */
        cft_device_synchronize(c->d);
}

/* One JSON line: jitted f on d (inputs copied there once) against the same
 * jitted f on the host in this run, with the largest difference of the
 * outputs and what one warm call asked of the device (per_call: kernels,
 * primitives, graph replays, copies each way and their bytes, waits,
 * allocations). config is the line's config object's body. */
static inline void bench_on_device(const char *bench, const char *config, const char *method,
                                   cft_fn *f, int nin, cft_array **in, int nout, const cft_dev *d) {
    cft_array *din[32];
    for (int i = 0; i < nin && i < 32; i++)
        din[i] = cft_device_put(in[i], d);
    bench_call h = {cft_jit(f), in, {0}, NULL}, g = {cft_jit(f), din, {0}, d};
    double hm, hmin, dm, dmin;
    timeit(bench_call_run, &h, &hm, &hmin);
    timeit(bench_call_run, &g, &dm, &dmin);
    double diff = 0;
    for (int k = 0; k < nout && k < 32; k++) {
        double e = cft_max_abs_diff(g.out[k], h.out[k]);
        diff = e > diff ? e : diff;
    }
    /* what one warm call asks of the device (cft_device_counters_of), over 20 calls */
    cft_device_counters c0, c1;
    cft_device_counters_of(d, &c0);
    for (int i = 0; i < 20; i++)
        bench_call_run(&g);
    cft_device_counters_of(d, &c1);
#define PER(f) ((double)(c1.f - c0.f) / 20)
    printf("{\"bench\": \"%s\", \"config\": {%s}, \"method\": \"%s\", \"device\": \"%s\", "
           "\"matmul_precision\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, \"threads\": %d, "
           "\"baseline\": \"%s on the "
           "host\", \"baseline_median_ms\": %.4f, \"ratio_to_baseline\": %.3f, "
           "\"max_abs_diff\": %.3g, \"per_call\": {\"kernels\": %g, \"ops\": %g, \"graphs\": %g, "
           "\"h2d\": %g, \"h2d_bytes\": %g, \"d2h\": %g, \"d2h_bytes\": %g, \"syncs\": %g, "
           "\"allocs\": %g, \"alloc_bytes\": %g}}\n",
           bench, config, method, cft_device_name(d), bench_precision, dm, dmin, bench_nthreads,
           method, hm, dm / hm, diff, PER(kernels), PER(ops), PER(graphs), PER(h2d), PER(h2d_bytes),
           PER(d2h), PER(d2h_bytes), PER(syncs), PER(allocs), PER(alloc_bytes));
#undef PER
    fflush(stdout);
}

#endif
