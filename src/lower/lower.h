/* Internal: the lowering of an IR into an executable plan (see jit.c for
 * the pipeline). */
#ifndef CFT_LOWER_H
#define CFT_LOWER_H

#include "trace/ir.h"

#define CFT_KMAX_OPS 64 /* operands (inputs + outputs) of one fused kernel (fuse.c keeps it) */
/* CUDA kernels (emit_cuda.c): the threads of a block; a reduction's
 * outputs and shares are tiled over them as coop_fns.h says */
#define CFT_COOP_THREADS 256
/* elements of a kernel below which its rows stay on one thread (16384: the
 * DP-SGD MLP step at B = 256, kernels of [256, 128], went from 1.00x to
 * 1.21x on 2 threads; with 32768 they stayed on one) */
#define CFT_KERNEL_PAR_MIN 16384

/* A fusion group: a chain of elementwise equations with one iteration
 * shape, optionally ending in a reduction over some of its axes. */
typedef struct cft_group {
    int neqn;
    int *eqns;     /* IR equation indices, in order */
    int nin, nout; /* external inputs, stored outputs (var ids) */
    int *in, *out;
    bool reduce;   /* the last equation is a reduction */
    bool half_acc; /* its reduction writes f16 / bf16: a C kernel accumulates it in an f32
                      array the executor hands it and then rounds (cft__half_acc) */
    cft_aval iter; /* iteration shape (the reduction's input shape) */
    /* the kernel, specialised to a stride signature (see emit.c) */
    char sig[64];
    int kernel_id; /* index into the plan's compiled kernels, -1: none */
} cft_group;

/* One step of a plan: an equation run by its implementation, or a group. */
typedef struct {
    int eqn;   /* >= 0: equation index */
    int group; /* >= 0: group index */
} cft_step;

/* group formation over an IR: fills steps/groups, returns the step count */
int cft__fuse(const cft_ir *ir, cft_step **steps, cft_group **groups, int *ngroups);

/* stride signature and collapsed loop of a group's operands at run time */
typedef struct {
    int nd;
    int64_t dims[CFT_MAX_NDIM];
    int64_t st[CFT_KMAX_OPS][CFT_MAX_NDIM];
    char sig[64];
} cft_loop;
/* collapse: st[k] are operand k's strides over the iteration shape */
void cft__loop_of(const cft_aval *iter, int64_t (*st)[CFT_MAX_NDIM], int nops, cft_loop *lp);
/* a loop over these strides that a kernel made for signature `sig` can
 * run: the collapsed one, else one with fewer dims merged; false if none */
bool cft__loop_fit(const cft_aval *iter, int64_t (*st)[CFT_MAX_NDIM], int nops, const char *sig,
                   cft_loop *lp);

/* C source of a kernel for group g with loop signature lp, named cft_k<id> */
void cft__emit_group(const cft_ir *ir, const cft_group *g, const cft_loop *lp, int id, char **buf,
                     size_t *len, size_t *cap);
/* the short-row path of a kernel reducing each row of a two-dim loop
 * (emit_short.c): emitted into cft_k<id>_run before its row loop when the
 * plan's strides allow it; false when not emitted */
bool cft__emit_short_rows(const cft_ir *ir, const cft_group *g, const cft_loop *lp, int red_out,
                          const char *acc_t, char **b, size_t *l, size_t *c);
/* ... and of a kernel reducing the rows into one row (a bias gradient over
 * a few classes): emitted into its loop over units, after a unit's rows */
bool cft__emit_short_cols(const cft_ir *ir, const cft_group *g, const cft_loop *lp, int red_out,
                          char **b, size_t *l, size_t *c);
/* ... and of an elementwise kernel whose operands keep its loop two-dim */
bool cft__emit_short_each(const cft_ir *ir, const cft_group *g, const cft_loop *lp, char **b,
                          size_t *l, size_t *c);
/* the prelude every generated file starts with */
const char *cft__emit_prelude(void);

/* pieces the C and CUDA emitters share: the C type of a dtype; printf
 * into a growing buffer; the statement that computes equation q's output
 * v<out> from named input values; the dtype of var v of ir; a group's
 * elementwise chain */
const char *cft__emit_ctype(cft_dtype dt);
/* halves in kernels: stored as uint16_t (cft__emit_stype), read into a
 * float (cft__emit_ld: ref wrapped in the prelude's cft_bf2f or cft_h2f)
 * and stored (cft__emit_st: "cft_bfp(" or "cft_hp(" before the value,
 * ")" after; a value of the chain is rounded to nearest-even as
 * cft__cast converts already, so it is packed), the
 * prelude holds array/half_fns.h, the library's own conversions; every
 * other dtype is stored as computed */
const char *cft__emit_stype(cft_dtype dt);
const char *cft__emit_ld(cft_dtype dt, const char *ref);
const char *cft__emit_st(cft_dtype dt, bool open);
void cft__emit_put(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void cft__emit_eqn(char **b, size_t *l, size_t *c, const struct cft_eqn *q,
                   const char *const *names, int out);
cft_dtype cft__emit_var_dtype(const cft_ir *ir, int v);
/* the statements of g's elementwise equations (its reduction left out),
 * reading inputs by name[var] and naming each result v<var> in name */
void cft__emit_chain(char **b, size_t *l, size_t *c, const cft_ir *ir, const cft_group *g,
                     char **name);

/* equation q on the values in env (its outputs stored there); NULL or the error (plan_ops.c) */
cft_array *cft__run_eqn(const struct cft_eqn *q, cft_array **env);
/* operand strides over the group's iteration shape (plan_ops.c) */
void cft__group_strides(const cft_ir *ir, const cft_group *g, cft_array *const *ops,
                        int64_t (*st)[CFT_MAX_NDIM]);
/* whether equation q reads or writes halves (f16, bf16: those run through
 * the eager impls, computed in f32) */
bool cft__eqn_has_half(const struct cft_eqn *q);
/* whether q's impl_into may run it: no halves, or a primitive whose
 * impl_into takes them (CFT_PRIM_INTO_HALF) */
bool cft__into_ok(const struct cft_eqn *q);
/* every element of a (f32, f64, f16 or bf16) set to the reduction identity `init` */
void cft__fill_init(cft_array *a, const char *init);
/* A reduction with an f16 / bf16 output (cft_group.half_acc) accumulates
 * in f32, each element rounded once: the executor hands the C kernel, in
 * place of the output, an f32 array of its shape (filled with the
 * identity `init`, unless NULL: a kernel whose rows start from it
 * themselves), and then stores it rounded into the output (both
 * contiguous, as cft__group_strides lays out outputs). The array lies in
 * the calling thread's scratch (CFT_SCRATCH_HACC): valid until its next
 * cft__half_acc. */
cft_array *cft__half_acc(const cft_array *out, const char *init);
void cft__half_acc_store(const cft_array *acc, cft_array *out);

/* A lowered plan run on device d (jit_device.c): its equations through
 * the dispatch, its groups as d's kernels from cuda_src (NULL: as their
 * equations); aval[v] is the aval of each var an equation produces. */
/* A plan as it runs on a device (jit_device.c), and one run of its steps
 * into env: NULL, or the error. */
typedef struct cft_dev_consts cft_dev_consts;
typedef struct {
    const struct cft_dev *d;
    const cft_ir *ir;
    const cft_step *steps;
    int nsteps;
    const cft_group *groups;
    const cft_aval *const *aval;
    const char *cuda_src;
    const cft_dev_consts *kp;
    /* a contiguous copy of device view x on its device: 1 (*y set), -1
     * (the error in *y) or 0 (cannot) */
    int (*contig)(cft_array *x, cft_array **y);
} cft_dev_plan;
typedef cft_array *(*cft_dev_steps_fn)(const cft_dev_plan *p, cft_array *const *in,
                                       cft_array **env);

/* CUDA graphs (jit_graph.c): a plan's steps on a device whose backend
 * captures (cft_backend.begin_capture...) are recorded once, on buffers
 * of their own, and replayed: the inputs copied into the captured ones,
 * the outputs out of them. 1: done (out set); 0: declined (not capturable,
 * not yet warm, inputs that are views...: run the steps); -1: failed (the
 * error in out). *g is the plan's graph state on that device. */
typedef struct cft_dev_graph cft_dev_graph;
int cft__graph_run(const cft_dev_plan *p, cft_dev_graph **g, int runs, cft_dev_steps_fn steps,
                   cft_array *const *in, cft_array **out);
/* whether this thread is capturing (nested plans then run plainly) */
bool cft__graph_capturing(void);

/* What a plan keeps on a device it ran on (jit_device.c): its constants
 * and each reduction group's initial values, moved there on its first call
 * there (one list per plan, one entry per device). */
cft_status cft__plan_run_on_device(const struct cft_dev *d, const cft_ir *ir, const cft_step *steps,
                                   int nsteps, const cft_group *groups, int ngroups,
                                   const cft_aval *const *aval, const char *cuda_src,
                                   cft_dev_consts **kept, cft_array *const *in, cft_array **out);

/* CUDA C (emit_cuda.c). The prelude serves NVRTC and, with a shim that
 * runs a grid as loops, the host C++ compiler. A group's kernel is
 * `extern "C" __global__ void cft_g<id>(cft_a<id> a)`, its argument the
 * operands' pointers, the loop's dims and strides (as cft_kernel_fn's);
 * host adds the wrapper cft_k<id> of type cft_kernel_fn that runs it. */
const char *cft__emit_cuda_prelude(void);
void cft__emit_cuda_group(const cft_ir *ir, const cft_group *g, const cft_loop *lp, int id,
                          bool host, char **buf, size_t *len, size_t *cap);
/* CFT_CUDA_DUMP=dir: write the CUDA file of these groups to
 * dir/<hash of the source>.cu (tools/cft-cuda-check compiles them) */
void cft__cuda_dump(const cft_ir *ir, const cft_group *groups, const cft_loop *loops, int n);
/* the whole CUDA file of n groups */
char *cft__emit_cuda_source(const cft_ir *ir, const cft_group *groups, const cft_loop *loops, int n,
                            bool host);

typedef void (*cft_kernel_fn)(char *const *ptrs, const int64_t *dims, const int64_t *st, int nth);
/* Compile `src` (C, or C++ when cxx) (or load it from the private cache,
 * checked) and look up n kernels cft_k0..cft_k(n-1). Thread-safe. Returns
 * false, with the reason in err[0..en), when nothing could be compiled or
 * loaded. */
bool cft__compile(const char *src, int n, bool cxx, cft_kernel_fn *out, char *err, size_t en);

/* Row-parallel segments (jit_rows.c): runs of steps that each compute
 * rows of axis 0 (of size T, the vmapped axis of a batched plan) from the
 * same rows of what the run made before, so each thread can run the whole
 * run on its own rows with one fork and join (and keep its rows in its
 * own cache) instead of one per step. */
typedef struct {
    int first, last; /* steps */
    int64_t T;
    size_t scratch;     /* bytes of a thread's own buffer (for T rows) */
    int nagain, *again; /* its views made again after it, whole (what later steps read) */
} cft_rowseg;
/* The segments of a plan. has_slot[v]: var v can get a buffer (what the
 * threads write their rows into); last_step and root as the plan has
 * them. *seg_of gets, per var, the segment that makes it in rows (-1:
 * none); *sum, whether that var is a sum over the rows (each thread sums
 * its rows, the shares are added up after the segment); *scratch_at, for
 * a var that no step after its segment reads and for each share of a
 * sum, its place in each thread's own buffer (-1: none; the others need
 * the plan's arena); *later, per step, whether it is a step inside a
 * segment's range that runs after the segment instead (in step order: it
 * reads no rows, and the segment reads nothing it makes). Returns the
 * count. */
int cft__rows_find(const cft_ir *ir, const cft_step *steps, int nsteps, const cft_group *groups,
                   const cft_kernel_fn *kernels, const cft_aval *const *aval, const bool *has_slot,
                   const int *last_step, const int *root, cft_rowseg **segs, int **seg_of,
                   bool **sum, bool **later, int64_t **scratch_at);
/* Segment si of a plan over env (the plan's values; full[v] the arena
 * arrays), on as many threads as its rows allow: 1 done (env holds what
 * later steps read; the steps it defers are still to run), 0 declined (run its steps one by one:
 * one thread, or a kernel cannot take the rows' strides), -1 failed (*err set). */
typedef struct {
    const cft_ir *ir;
    const cft_step *steps;
    const cft_group *groups;
    const cft_kernel_fn *kernels;
    bool cuda_kernels; /* the kernels are CUDA C run on the host (no half_acc arrays) */
    const cft_rowseg *segs;
    const int *seg_of;
    const bool *sum, *later;
    const int64_t *scratch_at;
    const cft_aval *const *aval;
    cft_array *const *full;
} cft_rows_plan;
int cft__rows_run(const cft_rows_plan *rp, int si, cft_array **env, cft_array **err);

/* CFT_DEBUG level */
int cft__debug(void);
/* threads for generated kernels */

#endif
