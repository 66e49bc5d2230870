/* par.c: cft's parallel-for over OpenMP's thread team and its thread-count
 * setting. The team is the one the jit's kernels run on (libgomp), so a
 * GEMM loop and a fused kernel never bring two spinning pools onto the
 * same cores; OpenBLAS is pinned to one thread at start-up for the same
 * reason (measured on 2 cores: two pools turned a 0.26 ms step into 3.5 ms). */
#include "core/par.h"

#include "core/blas_core.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

/* Work (flops or bytes) below which one thread is faster than waking the
 * team: a fork/join costs a few microseconds. */
#define PAR_MIN_WORK (1 << 18)

static _Atomic int nthreads = 0;    /* 0: not yet read from the environment */
static _Atomic bool chosen = false; /* set by CFT_NUM_THREADS or cft_set_num_threads */

/* A forked child has none of the parent's OpenMP threads, and libgomp
 * would wait for them at its first parallel region: the child runs on one
 * thread (as PyTorch does after fork). */
static void after_fork_in_child(void) {
    atomic_store(&chosen, true);
    atomic_store(&nthreads, 1);
}

static void pin_blas(void) {
    cft__blas_match_cpu(); /* done at load time already; here it keeps a static link's copy */
    openblas_set_num_threads(1);
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

/* CFT_NUM_THREADS, else the cores this process may run on (its affinity
 * mask, as omp_get_num_procs reads it) */
static int env_threads(void) {
    const char *s = getenv("CFT_NUM_THREADS");
    if (s && *s)
        atomic_store(&chosen, true);
    int n = s && *s ? atoi(s) : omp_get_num_procs();
    return n > 0 ? (n > 1024 ? 1024 : n) : 1;
}

int cft__num_threads(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, pin_blas);
    int n = atomic_load_explicit(&nthreads, memory_order_relaxed);
    if (n == 0) {
        int want = env_threads(), expect = 0;
        atomic_compare_exchange_strong(&nthreads, &expect, want);
        n = atomic_load(&nthreads);
    }
    return n;
}

void cft__set_num_threads(int n) {
    cft__num_threads(); /* OpenBLAS pinned before anything runs */
    atomic_store(&chosen, true);
    atomic_store(&nthreads, n < 1 ? 1 : (n > 1024 ? 1024 : n));
}

void cft__share_cores(int processes) {
    if (processes < 1 || atomic_load(&chosen))
        return;
    int n = omp_get_num_procs() / processes;
    cft__num_threads();
    if (!atomic_load(&chosen)) /* CFT_NUM_THREADS, read just now, wins */
        atomic_store(&nthreads, n < 1 ? 1 : n);
}

int cft__par_threads(int64_t n, double work_per_item) {
    int nth = cft__num_threads();
    if (nth > n)
        nth = (int)n;
    if (nth <= 1 || (double)n * work_per_item < PAR_MIN_WORK || omp_in_parallel())
        return 1;
    return nth;
}

int cft__par_threads_for(double work) {
    int nth = cft__num_threads();
    return nth <= 1 || work < PAR_MIN_WORK || omp_in_parallel() ? 1 : nth;
}

void cft__par_for(int64_t n, double work_per_item, cft__par_body body, void *ctx) {
    if (n <= 0)
        return;
    int nth = cft__par_threads(n, work_per_item);
    if (nth == 1) {
        body(ctx, 0, n);
        return;
    }
#pragma omp parallel num_threads(nth)
    {
        int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
        int64_t lo = n * t / k, hi = n * (t + 1) / k;
        if (lo < hi)
            body(ctx, lo, hi);
    }
}
