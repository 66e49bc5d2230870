/* cft/jit.h: compiling functions into fused CPU kernels.
 *
 * cft_jit(f) returns a function with f's results that runs much faster: on
 * its first call with new input shapes it traces f into the IR, simplifies
 * it, groups elementwise chains (with a trailing reduction) into fused
 * kernels, generates C for them, compiles it with the system C compiler
 * (cached on disk under $CFT_CACHE_DIR, default ~/.cache/cft) and plans
 * intermediate buffers in one arena reused by liveness. GEMM-like work goes
 * to OpenBLAS. Later calls replay the plan. Without a compiler, or with
 * CFT_JIT=0, the interpreter runs instead with the same results.
 *
 * CFT_DEBUG=1 prints the IR given to the lowering, 2 adds the fusion groups
 * and the memory plan, 3 the generated source, 4 per-step timings.
 */
#ifndef CFT_JIT_H
#define CFT_JIT_H

#include "fn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A compiled version of f (same inputs and outputs). Inside another
 *  transform it behaves as f itself; transforms of a jitted function see f. */
cft_fn *cft_jit(cft_fn *f);

/** Threads used by compiled kernels (above 65536 elements) and by OpenBLAS;
 *  default 1 (the first cft_jit also sets OpenBLAS to this count). */
void cft_set_num_threads(int n);
/** The current thread count for kernels. */
int cft_get_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif
