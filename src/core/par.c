/* par.c: cft's parallel-for over OpenMP's thread team and its thread-count
 * setting. The team is the one the jit's kernels run on (libgomp), so a
 * GEMM loop and a fused kernel never bring two spinning pools onto the
 * same cores; OpenBLAS is pinned to one thread at start-up for the same
 * reason (measured on 2 cores: two pools turned a 0.26 ms step into 3.5 ms).
 *
 * Threads under load: libgomp's threads spin while they wait (for the next
 * region, at the barrier ending one), which is right on idle cores and
 * ruinous on busy ones: a worker that another process preempted holds up
 * the region while its partners spin through their time slices (the
 * per-sample-gradient bench at B = 64 with a CPU-bound process beside it:
 * 8.0 ms median against 0.11 ms). Every thread of a region counts the
 * involuntary context switches the kernel made on it (getrusage
 * RUSAGE_THREAD, about half a microsecond) since its last region and the
 * CPU time it got for its share against the wall time the share took; a
 * worker preempted while it waited and late to start (200 us), or a share
 * that ran off its core for a quarter of its time (and 100 us), means the
 * cores are not free (a kernel thread taking a waiting thread's core for
 * a moment on a quiet machine is neither), and cft then
 * runs on one thread for a while (10 ms, doubling while the next probe
 * finds the same, up to 1 s; halved again by each region that runs
 * undisturbed), so waiting threads stop spinning against the other
 * processes and the call costs what one thread costs under the same load.
 * The count set by cft_set_num_threads / CFT_NUM_THREADS is the most cft
 * uses; CFT_ADAPTIVE_THREADS=0 turns the adaptation off. */
#include "core/par.h"

#include "core/blas_core.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

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

int cft__num_threads_set(void) {
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

/* ---- threads under load ---- */

#define BUSY_FIRST_NS 10000000LL   /* one thread this long after a preempted region, */
#define BUSY_MAX_NS 1000000000LL   /* doubling up to this while probes find the same */
#define LATE_NS 200000LL           /* a worker starting this late was kept off its core */
static _Atomic int64_t busy_until; /* CLOCK_MONOTONIC ns; before it: one thread */
static _Atomic int64_t busy_for;   /* the current stretch (0: none yet) */
static _Atomic int64_t preempted_regions, regions_seen;
static _Thread_local int cap; /* cft__par_cap: this calling thread's limit (0: none) */
static _Thread_local long seen_nivcsw = -1; /* involuntary switches at the last look */

static int64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int64_t cpu_ns(void) { /* this thread's CPU time */
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static bool adaptive(void) {
    static _Atomic int on = -1;
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) {
        const char *s = getenv("CFT_ADAPTIVE_THREADS");
        v = !(s && s[0] == '0');
        atomic_store(&on, v);
    }
    return v;
}

/* whether this thread was preempted since it last looked */
static bool was_preempted(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return false;
    bool p = seen_nivcsw >= 0 && ru.ru_nivcsw > seen_nivcsw;
    seen_nivcsw = ru.ru_nivcsw;
    return p;
}

/* after a region of several threads: preempted ones mean busy cores */
static void after_region(int preempted) {
    atomic_fetch_add_explicit(&regions_seen, 1, memory_order_relaxed);
    int64_t f = atomic_load(&busy_for);
    if (preempted) {
        atomic_fetch_add_explicit(&preempted_regions, 1, memory_order_relaxed);
        f = f < BUSY_FIRST_NS ? BUSY_FIRST_NS : (f * 2 > BUSY_MAX_NS ? BUSY_MAX_NS : f * 2);
        atomic_store(&busy_for, f);
        atomic_store(&busy_until, mono_ns() + f);
    } else if (f > 0) {
        atomic_store(&busy_for, f / 2 < BUSY_FIRST_NS ? 0 : f / 2);
    }
}

bool cft__par_busy(void) {
    return adaptive() && atomic_load_explicit(&busy_until, memory_order_relaxed) > mono_ns();
}

void cft__par_load_stats(int64_t *regions, int64_t *preempted) {
    *regions = atomic_load(&regions_seen);
    *preempted = atomic_load(&preempted_regions);
}

int cft__par_cap(int n) {
    int old = cap;
    cap = n < 0 ? 0 : n;
    return old;
}

int cft__num_threads(void) {
    int n = cft__num_threads_set();
    if (cap > 0 && cap < n)
        n = cap;
    if (n > 1 && cft__par_busy())
        n = 1;
    return n;
}

void cft__set_num_threads(int n) {
    cft__num_threads_set(); /* OpenBLAS pinned before anything runs */
    atomic_store(&chosen, true);
    atomic_store(&nthreads, n < 1 ? 1 : (n > 1024 ? 1024 : n));
}

void cft__share_cores(int processes) {
    if (processes < 1 || atomic_load(&chosen))
        return;
    int n = omp_get_num_procs() / processes;
    cft__num_threads_set();
    if (!atomic_load(&chosen)) /* CFT_NUM_THREADS, read just now, wins */
        atomic_store(&nthreads, n < 1 ? 1 : n);
}

/* Under ThreadSanitizer cft's own regions run on the calling thread:
 * GCC's libgomp is not instrumented, so TSan cannot see a region's join,
 * and every body's reads of a context on the caller's stack read as races
 * once the caller reuses the slot. The sanitizer pass checks user threads
 * calling cft at once, which this leaves as it is. */
#if defined(__SANITIZE_THREAD__)
#define PAR_SERIAL 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PAR_SERIAL 1
#endif
#endif
#ifndef PAR_SERIAL
#define PAR_SERIAL 0
#endif

int cft__par_threads(int64_t n, double work_per_item) {
    if (PAR_SERIAL)
        return 1;
    int nth = cft__num_threads();
    if (nth > n)
        nth = (int)n;
    if (nth <= 1 || (double)n * work_per_item < PAR_MIN_WORK || omp_in_parallel())
        return 1;
    return nth;
}

int cft__par_threads_for(double work) {
    if (PAR_SERIAL)
        return 1;
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
    bool watch = adaptive();
    _Atomic int preempted = 0;
    int64_t t0 = watch ? mono_ns() : 0;
#pragma omp parallel num_threads(nth)
    {
        int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
        int64_t lo = n * t / k, hi = n * (t + 1) / k;
        /* a worker preempted while it waited for this region, and late to
         * start it: its core was taken (a preemption alone is no evidence:
         * a kernel thread or a shell takes a waiting thread's core for a
         * moment on a quiet machine too) */
        int64_t w0 = 0, c0 = 0;
        if (watch) { /* the clock first (vDSO): getrusage, a system call, only when late */
            w0 = mono_ns();
            if (t > 0 && w0 - t0 > LATE_NS && was_preempted())
                atomic_fetch_add_explicit(&preempted, 1, memory_order_relaxed);
            c0 = cpu_ns();
        }
        if (lo < hi)
            body(ctx, lo, hi);
        if (watch) { /* kept off its core for a good part of its share */
            int64_t wall = mono_ns() - w0;
            /* off the CPU by preemption, not by waiting (a lock, the GC's
             * stop-the-world: voluntary switches); a share shorter than
             * LATE_NS / 2 cannot have lost that much, and asks nothing */
            if (wall > LATE_NS / 2) {
                int64_t lost = wall - (cpu_ns() - c0);
                if (lost > LATE_NS / 2 && lost * 4 > wall && was_preempted())
                    atomic_fetch_add_explicit(&preempted, 1, memory_order_relaxed);
            }
        }
    }
    if (watch)
        after_region(atomic_load(&preempted));
}
