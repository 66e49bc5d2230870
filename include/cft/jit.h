/** @file
 * cft/jit.h: compiling functions into fused CPU kernels.
 *
 * cft_jit(f) returns a function with f's results that runs much faster: on
 * its first call with new input shapes it traces f into the IR, simplifies
 * it, groups elementwise chains (with a trailing reduction) into fused
 * kernels, generates C for them, compiles it with the system C compiler
 * (cached on disk under $CFT_CACHE_DIR, default ~/.cache/cft) and plans
 * intermediate buffers in one arena reused by liveness. GEMM-like work goes
 * to OpenBLAS (small f32 products to libxsmm, convolutions to oneDNN where
 * the build has them and they are faster). Later calls replay the plan.
 * Without a compiler, or with CFT_JIT=0, the interpreter runs instead with
 * the same results.
 *
 * cft_jit of a cft_vmap (inputs mapped along axis 0 or shared, outputs
 * stacked on axis 0) runs the jitted mapped function once per lane when a
 * lane computes a megaflop or more and the batched intermediates would not
 * stay in cache (8 MB), the lanes shared among the threads: an ensemble of
 * models runs model by model, per-sample gradients stay batched.
 * CFT_JIT_VMAP_LOOP=0 / 1 forces either.
 *
 * Automatic dynamic shapes (as PyTorch 2): the first call specialises on
 * the shapes it sees. When a later call changes a dim, f is traced once
 * more with that dim symbolic (cft/shape.h; one symbol per changed dim,
 * shared by dims that were equal in both calls, so x[B,64] and y[B] get
 * the same B), and that one plan and its kernels serve every later size:
 * a new size costs a memory plan (microseconds), not a trace. Sizes 0 and 1
 * are never symbolic (they get their own trace). If f cannot be traced
 * with a symbol (a rule that cannot express it), the function falls back
 * to one trace per shape.
 *
 * CFT_DEBUG=1 says why each (re)trace happens (which input dim changed,
 * from what to what, the symbol it became) and prints the IR given to the
 * lowering; 2 adds the fusion groups and the memory plan, 3 the generated
 * source, 4 per-step timings.
 */
#ifndef CFT_JIT_H
#define CFT_JIT_H

/** @addtogroup jit
 *  @{ */

#include "fn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A compiled version of f (same inputs and outputs). Inside another
 *  transform it behaves as f itself; transforms of a jitted function see f. */
cft_fn *cft_jit(cft_fn *f);
/** cft_jit with buffer donation (JAX's donate_argnums): the buffers of the
 *  inputs in donate_argnums may hold outputs of the same dtype and shape,
 *  so a training step's new parameters are written where the old ones were
 *  instead of into new memory. After a call, each donated input is an
 *  error array ("donated ...") and its views must not be used either; use
 *  the outputs. A donated input that is a view, is passed twice, or is
 *  returned (or viewed) by an output keeps its buffer and stays valid.
 *  Inside another transform it behaves as f. */
cft_fn *cft_jit_donate(cft_fn *f, const int *donate_argnums, int n);
/** Outputs a function made by cft_jit_donate has written into donated
 *  buffers so far (-1 for other functions). */
int64_t cft_jit_donated_count(const cft_fn *jitted);

/** What a jitted function did so far (for tests and tuning). */
typedef struct cft_jit_stats {
    int traces;          /**< times f was traced and lowered */
    int symbolic_traces; /**< of those, with symbolic dims */
    int instances;       /**< concrete shapes planned (a trace's memory plan per shape) */
    int compiles;        /**< kernel files compiled or loaded from the disk cache */
    bool fallback;       /**< tracing with symbols failed: one trace per shape */
    int interpreted;     /**< plans whose kernels could not be compiled (run interpreted) */
} cft_jit_stats;

/** The counters of `jitted`, a function made by cft_jit; CFT_E_ARG for any
 *  other function. */
cft_status cft_jit_stats_of(const cft_fn *jitted, cft_jit_stats *out);

/** The lowered IR of a function made by cft_jit, as Graphviz DOT, with
 *  the equations of each fusion group (one compiled kernel) in one colour:
 *  the plan of its most recent call (CFT_E_ARG before the first call or
 *  for other functions). */
cft_status cft_jit_to_dot(cft_fn *jitted, FILE *f);

/** Threads cft uses for one call: its compiled kernels (above 65536
 *  elements), batched GEMMs (shared out by batch element, or one large GEMM
 *  cut into blocks) and convolutions (by sample chunks), all on one OpenMP
 *  team; OpenBLAS itself stays at one thread so that two pools never
 *  compete for cores. Default: CFT_NUM_THREADS from the environment, else
 *  the cores this process may run on (its affinity mask); under
 *  cft_dist_init, those cores divided by the ranks on the machine. Values
 *  below 1 mean 1. A forked child runs on one thread. A program that calls
 *  cft from several threads of its own at once may want 1 here. The count
 *  is the most a call uses: a jitted plan with too little work per step
 *  runs on one thread (CFT_PLAN_PAR_MIN), and while other processes hold
 *  the cores (a thread of cft's was preempted in a parallel region) cft
 *  runs on one thread for 10 ms to 1 s (CFT_ADAPTIVE_THREADS=0: never).
 *  Matrix products give the same bits at any count. */
void cft_set_num_threads(int n);
/** The thread count set (cft_set_num_threads, else the default). */
int cft_get_num_threads(void);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
