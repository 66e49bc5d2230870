/* Internal parallel-for: how cft's own library code (batched GEMMs, GEMMs
 * split by blocks, convolutions by sample chunks) uses several cores. One
 * thread team serves everything: OpenMP's, which the jit's generated
 * kernels also use; OpenBLAS is kept at one thread per call, so two pools
 * never compete for the same cores (DESIGN.md "Threads"). */
#ifndef CFT_PAR_H
#define CFT_PAR_H

#include <stdbool.h>
#include <stdint.h>

/* The threads to use now: the count set (cft__num_threads_set), at most
 * this calling thread's cap (cft__par_cap), and one while the cores are
 * busy with other work (par.c, "threads under load"). */
int cft__num_threads(void);
/* The thread count set by cft_set_num_threads, else CFT_NUM_THREADS,
 * else the cores this process may run on. */
int cft__num_threads_set(void);
/* Caps the threads of this calling thread's next calls at n (0: no cap);
 * returns the previous cap (a plan too small to split runs with cap 1). */
int cft__par_cap(int n);
/* True while cft runs on one thread because other work holds the cores. */
bool cft__par_busy(void);
/* Regions run on several threads so far, and those in which a thread was
 * preempted (the load detector's evidence). */
void cft__par_load_stats(int64_t *regions, int64_t *preempted);
void cft__set_num_threads(int n);
/* `processes` processes share this machine's cores (MPI ranks on one
 * node): the default becomes cores / processes, unless a count was chosen
 * (cft_set_num_threads, CFT_NUM_THREADS). */
void cft__share_cores(int processes);

/* body(ctx, lo, hi) for consecutive ranges covering [0, n), one range per
 * thread, on up to cft__num_threads() threads; serially when the total
 * work (n * work_per_item, in flops or bytes touched) is below what pays
 * for waking the team, or when already inside a parallel region. Bodies
 * must not allocate GC memory or call back into the public API. */
typedef void (*cft__par_body)(void *ctx, int64_t lo, int64_t hi);
void cft__par_for(int64_t n, double work_per_item, cft__par_body body, void *ctx);

/* The threads cft__par_for would use for this much work (1: serial). */
int cft__par_threads(int64_t n, double work_per_item);
/* The threads worth using for `work` in all, however it is cut (1: serial). */
int cft__par_threads_for(double work);

#endif
