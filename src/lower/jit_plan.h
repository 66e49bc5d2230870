/* Internal: the plans of cft_jit, shared by the files of its pipeline:
 * jit.c (the jitted function: traces, instances, caches, locks), its IR
 * passes (jit_passes.c), memory plan and arenas (jit_memory.c), the
 * execution of a plan's steps (jit_exec.c), row-parallel segments
 * (jit_rows.c), a vmap run lane by lane (jit_lanes.c) and devices
 * (jit_device.c). */
#ifndef CFT_JIT_PLAN_H
#define CFT_JIT_PLAN_H

#include <pthread.h>
#include <stdatomic.h>

#include "array/dim.h"
#include "cft/jit.h"
#include "lower/lower.h"
#include "trace/fn.h"

struct splan;

/* A plan for one set of concrete input shapes (an instance of a traced
 * splan, below): the IR with concrete dims, memory plan, arena. */
typedef struct plan {
    struct splan *S;                 /* the traced plan it instantiates */
    int64_t symval[CFT_DIM_MAXSYMS]; /* the values of S's symbols */
    cft_ir *ir;
    cft_step *steps;
    int nsteps;
    cft_group *groups;
    int ngroups;
    int *last_step;        /* per var: last step reading it (nsteps: returned) */
    const cft_aval **aval; /* per var produced by an equation: its aval */
    int *root;             /* per var: the buffer it is a view of (first call) */
    int runs;
    cft_kernel_fn *kernels; /* per group, NULL entries: not compiled */
    int64_t *slot;          /* per var: arena offset in bytes, -1: none */
    cft_array **hdr;        /* per var: its arena array (data: offset only) */
    size_t arena_bytes;
    cft_dev_consts *on_devices; /* constants and reduction inits per device (jit_device.c) */
    cft_rowseg *segs;           /* row-parallel segments (jit_rows.c) */
    int nsegs;
    int *seg_of;         /* per var: the segment that makes it in rows, -1: none */
    int *seg_at;         /* per step: the segment that starts there, -1: none */
    int64_t *scratch_at; /* per var: its place in a segment's thread buffers, -1: none */
    bool *seg_sum;       /* per var: a segment's sum over its rows */
    bool *seg_later;     /* per step: run after its segment */
    /* per group: the operands' strides of the first run and the kernel's
     * loop over them, set by the first run (under the lock), read by the
     * later ones when their strides are the same (the loop is not fitted
     * again: dims merged, signature built and compared, per call) */
    int64_t **lst;
    cft_loop **lcl;
    int threads; /* the most threads a call uses (1: too little work to split), 0: any */
} plan;

/* An arena: one call's intermediates. A traced plan keeps a pool of them;
 * a call takes one (a concurrent or nested call gets another). */
typedef struct arena {
    char *mem;
    size_t bytes;
    const plan *for_plan; /* hdr is built for this instance */
    cft_array **hdr;      /* per var: its array in mem */
    /* per step: the view the step made last time (a view primitive's, of
     * one of hdr's arrays or of an array from outside: a lane's slice of a
     * batched input), with a copy of the header it viewed (vkey) and its
     * offset less that header's (vdelta). An input laid out alike (aval,
     * strides) gets the same header pointed at its data: an arena serves
     * one call at a time (no lock), the plan never hands such a header out
     * and no later call reads the old one */
    cft_array **vout, *vkey;
    int64_t *vdelta;
    struct arena *next;
} arena;

#define MAX_INSTANCES 8 /* concrete shapes kept per traced plan (the most recent) */

/* One trace of the function: at concrete input avals, or at avals with
 * symbolic dims (then it serves every value of its symbols). Lowered once:
 * fusion groups and kernels are shared by its instances. */
typedef struct splan {
    cft_aval *avals; /* input avals, symbols included */
    int nsym;        /* symbols, bound from the inputs in this order */
    int atom[CFT_DIM_MAXSYMS];
    cft_ir *ir; /* the lowered IR (dims may be symbolic) */
    cft_step *steps;
    int nsteps;
    cft_group *groups; /* iteration shapes may be symbolic; sig recorded once */
    int ngroups;
    int *last_step;
    bool compiled;       /* the first instance recorded the loops and compiled */
    int *root;           /* which results were views of which buffers in that run */
    arena *pool;         /* arenas not in use (guarded by *mu) */
    pthread_mutex_t *mu; /* the jitted function's lock */
    const char *fname;   /* the jitted function's name, for messages */
    bool *warned;        /* the jitted function said it interprets */
    cft_kernel_fn *kernels;
    bool cuda_kernels;         /* the kernels are CUDA C run on the host (cuda-host) */
    plan *inst[MAX_INSTANCES]; /* most recently used first */
    int ninst;
    cft_jit_stats *stats; /* the jitted function's counters */
    cft_loop *loops;      /* the loops recorded at compile time, per group */
    char *cuda_src;       /* its groups as CUDA C, once a device asks (jit_device.c) */
    /* per step, folds of a half product and its convert back to f32
     * (find_folds): the product's step writes the convert's output
     * widened (fold_w: that var, at both steps) and the convert's step
     * (fold_from: the product's step) is skipped; -1 elsewhere */
    int *fold_w, *fold_from;
    struct splan *next;
} splan;

/* A jitted function (cft_jit's closure): its traced plans, the symbols of
 * its dims that changed, its lock, and the lane loop of a vmap */
typedef struct {
    cft_fn *f;
    splan *cache;
    int nin;
    cft_aval *ref;               /* the first call's avals: what a change is measured from */
    int8_t (*cls)[CFT_MAX_NDIM]; /* per input dim: its symbol (index into sym_names), -1 */
    int ncls;
    bool need_sym; /* dims became dynamic since the last symbolic trace */
    bool no_sym;   /* symbolic tracing failed: one trace per shape from now on */
    bool warned;   /* said on stderr that it cannot compile */
    cft_jit_stats stats;
    bool *donate;           /* per input: its buffer may hold an output (cft_jit_donate) */
    _Atomic int64_t reused; /* outputs written into donated buffers */
    pthread_mutex_t mu;     /* recursive: caches, traces, first runs */
    /* f is a vmap (fn->mapped): jit(the mapped function), run once per
     * lane when the batched intermediates would not stay in cache; the
     * decision is kept for the last input signature */
    cft_fn *lane;
    cft_fn **lanes; /* one more jit of it per further thread (a jit runs one call at a time) */
    int nlanes;
    cft_aval *loop_sig;
    bool loop_yes;
} jit_env;

/* The donation of the call being executed (set by jit_cb around it; the
 * step being run is set by cft__jit_execute): an output may be written into a
 * donated input's buffer when nothing reads that input (or a view of it)
 * after this step, or this step reads it only elementwise at the index it
 * writes (an elementwise group: same shape, contiguous). */
typedef struct {
    const bool *donate;
    cft_array *const *in;
    bool used[CFT_FN_MAX_ARGS];
    int64_t reused;
    int step;      /* the step running */
    bool elemwise; /* it is a fused elementwise group (no reduction) */
} donation;
extern _Thread_local donation *cft__jit_donation;

/* Where a lane of the lane loop (run_range) wants its outputs: the rows of
 * the stacked results, so a plan output that a kernel or an impl_into
 * writes lands there and is not copied afterwards. run_range sets
 * cft__jit_next_dest for its call; jit_cb moves it to cft__jit_exec_dest
 * around its own plan run; cft__jit_execute takes it (and clears it, so
 * no nested plan sees it). */
typedef struct {
    cft_array **dst; /* per output; taken (NULL) once used */
    int n;
} out_dest;
extern _Thread_local out_dest *cft__jit_next_dest, *cft__jit_exec_dest;

/* the IR passes before lowering (jit_passes.c): DCE, CSE, the rewrites,
 * constant folding, identities dropped, simplification, scheduling */
cft_ir *cft__jit_passes(cft_ir *ir);

/* P's memory plan (jit_memory.c): arena slots by liveness, row-parallel
 * segments; after its first run recorded which results view which buffers */
void cft__jit_plan_memory(plan *P);
/* an arena for one call of P, from its splan's pool or new (NULL: none,
 * run without one); and back to the pool (A NULL: nothing) */
arena *cft__jit_take_arena(plan *P);
void cft__jit_give_arena(splan *S, arena *A);

/* one run of P's steps (jit_exec.c); its first run records the loops,
 * compiles and plans memory (under the function's lock) */
cft_status cft__jit_execute(plan *P, cft_array *const *in, cft_array **out);

/* a vmapped function run lane by lane (jit_lanes.c): whether that pays for
 * these inputs (*size: the lanes; under J->mu), and the run */
bool cft__jit_loop_pays(jit_env *J, int nin, cft_array *const *in, int64_t *size);
cft_status cft__jit_run_lanes(jit_env *J, int64_t size, int nin, cft_array *const *in, int nout,
                              cft_array **out);

#endif
