/* Internal: the lowering of an IR into an executable plan (see jit.c for
 * the pipeline). */
#ifndef CFT_LOWER_H
#define CFT_LOWER_H

#include "trace/ir.h"

#define CFT_KMAX_OPS 64 /* operands (inputs + outputs) of one fused kernel (fuse.c keeps it) */
/* elements of a kernel below which its rows stay on one thread */
#define CFT_KERNEL_PAR_MIN 32768

/* A fusion group: a chain of elementwise equations with one iteration
 * shape, optionally ending in a reduction over some of its axes. */
typedef struct cft_group {
    int neqn;
    int *eqns;     /* IR equation indices, in order */
    int nin, nout; /* external inputs, stored outputs (var ids) */
    int *in, *out;
    bool reduce;   /* the last equation is a reduction */
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

/* C source of a kernel for group g with loop signature lp, named cft_k<id> */
void cft__emit_group(const cft_ir *ir, const cft_group *g, const cft_loop *lp, int id, char **buf,
                     size_t *len, size_t *cap);
/* the prelude every generated file starts with */
const char *cft__emit_prelude(void);

typedef void (*cft_kernel_fn)(char *const *ptrs, const int64_t *dims, const int64_t *st, int nth);
/* Compile `src` (or load it from the private cache, checked) and look up n
 * kernels cft_k0..cft_k(n-1). Thread-safe. Returns false, with the reason
 * in err[0..en), when nothing could be compiled or loaded. */
bool cft__compile(const char *src, int n, cft_kernel_fn *out, char *err, size_t en);
/* the kernel cache directory in use (made private), NULL if none */
const char *cft__cache_dir(void);

/* CFT_DEBUG level */
int cft__debug(void);
/* threads for generated kernels */

#endif
