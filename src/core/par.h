/* Internal parallel-for: how cft's own library code (batched GEMMs, GEMMs
 * split by blocks, convolutions by sample chunks) uses several cores. One
 * thread team serves everything: OpenMP's, which the jit's generated
 * kernels also use; OpenBLAS is kept at one thread per call, so two pools
 * never compete for the same cores (DESIGN.md "Threads"). */
#ifndef CFT_PAR_H
#define CFT_PAR_H

#include <stdint.h>

/* The thread count: set by cft_set_num_threads, else CFT_NUM_THREADS,
 * else the cores this process may run on. */
int cft__num_threads(void);
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
