/* bench.h: the timing harness every benchmark shares: a monotonic clock in
 * milliseconds, and median/min over repetitions that fill about 0.6 s (at
 * least 5, at most 300, after one warm-up call that traces and compiles). */
#ifndef CFT_BENCH_H
#define CFT_BENCH_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cft/cft.h"

/* cft_init, and the thread count of this run: --threads N on the command
 * line, else CFT_NUM_THREADS, else 1 (cft_set_num_threads). Every JSON line
 * carries it as "threads". */
static int bench_nthreads = 1;
static inline int bench_threads(int argc, char **argv) {
    cft_init();
    const char *s = getenv("CFT_NUM_THREADS");
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--threads"))
            s = argv[i + 1];
    int n = s ? atoi(s) : 1;
    bench_nthreads = n > 0 ? n : 1;
    cft_set_num_threads(bench_nthreads);
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

static inline void timeit(work_fn w, void *arg, double *median, double *min) {
    w(arg);
    double t0 = now_ms();
    w(arg);
    double one = now_ms() - t0;
    int reps = one > 0 ? (int)(600 / one) : 50;
    if (reps < 5)
        reps = 5;
    if (reps > 300)
        reps = 300;
    double *ts = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        t0 = now_ms();
        w(arg);
        ts[r] = now_ms() - t0;
    }
    bench_stats(ts, reps, median, min);
    free(ts);
}

#endif
