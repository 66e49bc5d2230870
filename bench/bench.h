/* bench.h: what every benchmark shares: a monotonic clock in milliseconds,
 * median/min of samples, the thread count of the run, and timeit, which
 * is cft_timer_blocked_autorange (cft/timer.h) in milliseconds. */
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

/* median and min per call: cft_timer_blocked_autorange (torch's
 * blocked_autorange: a warm-up call, blocks of at least 10 us, 0.6 s of
 * blocks in all) */
static inline void timeit(work_fn w, void *arg, double *median, double *min) {
    cft_measurement m;
    if (cft_timer_blocked_autorange(w, arg, 0.6, &m) != CFT_OK) {
        *median = *min = -1;
        return;
    }
    *median = m.median * 1e3, *min = m.min * 1e3;
}

#endif
