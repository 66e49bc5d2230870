/* Internal: the primitive record. A primitive is defined once, in one file
 * under src/prims/, with every rule every layer needs; the trace layer and
 * the transforms call the rules through this record and never switch on
 * the primitive kind. Rules are written with the public ops, so they are
 * traced like user code and compose under every transform. All rules return
 * NULL on success or an error array. */
#ifndef CFT_PRIM_H
#define CFT_PRIM_H

#include "array/array.h"
#include "cft/device.h"

#define CFT_NPARAM 6     /* parameter slots per primitive */
#define CFT_PARAM_LEN 16 /* values per slot */

/* Parameters: up to CFT_NPARAM named integer vectors (names in the record).
 * Always zero-initialised, so they hash and compare bytewise. */
typedef struct cft_params {
    int8_t n[CFT_NPARAM];
    int64_t v[CFT_NPARAM][CFT_PARAM_LEN];
} cft_params;

enum {
    CFT_PRIM_LINEAR = 1u,         /* has a transpose rule (linear in some inputs) */
    CFT_PRIM_NONDIFF = 2u,        /* outputs have zero derivative: no jvp rule */
    CFT_PRIM_ELEMENTWISE = 4u,    /* same-shape inputs, output of that shape */
    CFT_PRIM_REDUCTION = 8u,      /* reduces over the axes in parameter slot 0 */
    CFT_PRIM_CONTRACTION = 16u,   /* GEMM-like work (dot, conv): what checkpoint policies save */
    CFT_PRIM_CONJ_AWARE = 32u,    /* impl reads conjugate views (cft_array.conj) itself; other
                                     impls get them materialised by cft__run_impl */
    CFT_PRIM_EFFECT = 64u,        /* has effects beyond its outputs (starts or finishes
                                     communication): never constant-folded or merged by CSE */
    CFT_PRIM_EARLY = 128u,        /* starts asynchronous work: the jit runs it as soon as its
                                     inputs exist, so the work overlaps what follows */
    CFT_PRIM_RANDOM = 256u,       /* uses its input 0, a key (draws, splits, folds): the traces
                                     on the stack may replace the key (vmap's randomness) */
    CFT_PRIM_VIEW = 512u,         /* impl returns a view of input 0 (strides, offset) and reads
                                     no data: on a device it runs as it is, a device view */
    CFT_PRIM_VIEW_CONTIG = 1024u, /* the same when input 0 is contiguous (reshape) */
    CFT_PRIM_DEVICE_IMPL = 2048u, /* impl takes device arrays itself and leaves its results on
                                     their device (the collectives): the dispatch calls it */
    CFT_PRIM_IDENTITY = 4096u,    /* output 0 is input 0 once differentiation is over
                                     (stop_gradient): a lowered plan reads the input */
    CFT_PRIM_AMP_LOW = 8192u,     /* autocast (transforms/autocast) runs it on operands cast
                                     to the low dtype (bf16/f16) and casts its outputs back:
                                     the matrix products and convolutions */
    CFT_PRIM_INTO_HALF = 16384u,  /* impl_into takes bf16 / f16 operands and a half output
                                     itself (the jit's plans and row segments call it then
                                     too, instead of the widening eager path) */
    CFT_PRIM_CONVERT = 32768u,    /* its output is its input's values in another dtype and
                                     nothing else (convert_element_type): the jit folds a half
                                     product's conversion to f32 into the product
                                     (impl_into_wide) */
};

struct cft_eqn;
struct cft_prim;

/* The producer of an IR variable, for simplification rules (NULL: none). */
typedef const struct cft_eqn *(*cft_producer_fn)(void *ctx, int var);

/* What a rewrite rule sees (src/trace/rewrite.c): the equation producing a
 * var of the old IR, and the var's value in the IR being built. While the
 * pass only checks whether a rule applies, value is NULL: rules must then
 * answer without building anything. */
typedef struct cft_rewrite_ctx {
    const struct cft_eqn *(*producer)(const struct cft_rewrite_ctx *c, int var);
    cft_array *(*value)(const struct cft_rewrite_ctx *c, int var);
    /* how many times the old IR reads var (equation inputs and outputs) */
    int (*uses)(const struct cft_rewrite_ctx *c, int var);
    void *impl;
} cft_rewrite_ctx;

typedef struct cft_prim {
    const char *name;
    int nin;  /* -1: variadic */
    int nout; /* -1: given by nout_of */
    unsigned flags;
    const char *pnames[CFT_NPARAM]; /* printed names of the parameter slots */
    /* abstract eval: output avals from input avals; errors name the op */
    cft_array *(*shape)(const cft_aval *in, int nin, const cft_params *p, cft_aval *out);
    /* eager CPU implementation on concrete arrays (shapes already checked) */
    cft_array *(*impl)(cft_array *const *in, int nin, const cft_params *p, cft_array **out);
    /* tangents out from primals x, outputs y and tangents t (NULL = zero);
     * an output tangent of NULL means zero */
    cft_array *(*jvp)(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                      const cft_params *p, cft_array **ty);
    /* linear primitives: input cotangents from output cotangents; x[i] is
     * NULL for the inputs the primitive is linear in (those get ct_in[i]),
     * the known value otherwise; in[] are all input avals */
    cft_array *(*transpose)(cft_array *const *ct, cft_array *const *x, const cft_aval *in, int nin,
                            const cft_params *p, cft_array **ct_in);
    /* batching: x[i] batched along bdim[i] (<0: not batched), batch `size` */
    cft_array *(*vmap)(int64_t size, cft_array *const *x, const int *bdim, int nin,
                       const cft_params *p, cft_array **y, int *ybdim);
    /* code generation. Elementwise: the scalar C expression of x (y for
     * binaries, c for select) for floats, and c_iexpr for ints and bools
     * (NULL: same as c_expr). Reductions: c_expr combines `acc` and `x`,
     * c_init is the identity, and c_simd names the OpenMP reduction that
     * c_expr is ("+", "max"), so a kernel's inner loop becomes a simd
     * reduction; where c_iexpr is set too (max, min), that loop combines
     * floats by c_iexpr and tracks NaN apart, as c_expr's NaN test would
     * keep the loop scalar. */
    const char *c_expr;
    const char *c_iexpr;
    const char *c_init;
    const char *c_simd;
    /* optional: write the output into `out`, a preallocated contiguous array
     * of the output aval (lets the lowering place results in its arena) */
    cft_array *(*impl_into)(cft_array *const *in, int nin, const cft_params *p, cft_array *out);
    /* optional, with CFT_PRIM_INTO_HALF: impl_into for an output of the
     * half dtype `half` written widened, into the f32 array `out` (each
     * value rounded to the half dtype, the bits its conversion to f32
     * gives): the jit folds a product and its convert back to f32 into it */
    cft_array *(*impl_into_wide)(cft_array *const *in, int nin, const cft_params *p, cft_dtype half,
                                 cft_array *out);
    /* optional simplification: rewrite equation q (looking at the equations
     * that produce its inputs) into *out, which computes the same outputs;
     * return false to keep q */
    bool (*simplify)(const struct cft_eqn *q, cft_producer_fn producer, void *ctx,
                     struct cft_eqn *out);
    /* outputs of a variadic-output primitive (nout -1) for these params */
    int (*nout_of)(const cft_params *p, int nin);
    /* optional partial evaluation (reverse mode of loops): with inputs
     * partly known, write a known equation (known inputs -> the outputs it
     * can compute, plus new residual vars numbered from *next_id) and an
     * unknown one (residuals and unknown inputs -> the other outputs);
     * out_known[j] says which side computes output j */
    bool (*partial_eval)(const struct cft_eqn *q, const bool *in_known, int *next_id,
                         struct cft_eqn *known, struct cft_eqn *unknown, bool *out_known);
    /* optional: can the output of this primitive, permuted by perm, be
     * produced directly? Writes the new params and whether the two operands
     * swap. (dot_general: a transpose of its result is a dot with swapped
     * operands.) */
    bool (*fold_transpose)(const cft_params *p, const int64_t *perm, int ndim, const cft_aval *in,
                           cft_params *out, bool *swap);
    /* optional rewrite of q into several equations (jit pass): writes q's
     * outputs, built with the public ops from the values of vars of the old
     * IR (c->value); only says whether it applies while c->value is NULL */
    bool (*rewrite)(const struct cft_eqn *q, const cft_rewrite_ctx *c, cft_array **out);
    /* optional: the operation as one CUDA C kernel (cft/device.h's
     * cft_dev_kernel, GC-allocated args) on a device whose backend runs
     * kernels, for contiguous device inputs `in` and allocated outputs
     * `out`; false when it has none for these operands (the backend's run
     * then takes it) */
    bool (*dev_kernel)(cft_array *const *in, int nin, const cft_params *p, cft_array *const *out,
                       cft_dev_kernel *k);
    /* optional, for outputs that hold one value per example and factor (an
     * outer product per example): the examples are `nb` equal contiguous
     * blocks along axis `axis` of output 0 (nb == shape[axis]: one index
     * each). batch_sqnorm gives each example's squared L2 norm, [nb];
     * batch_wsum the sum over examples weighted by w [nb], shaped as
     * output 0 with axis `axis` of size shape[axis] / nb. Both from other
     * vars, without forming the output (DP-SGD's clipping without
     * per-sample gradients). false: no such form */
    bool (*batch_sqnorm)(const struct cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                         cft_array **out);
    bool (*batch_wsum)(const struct cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                       cft_array *w, cft_array **out);
    /* optional, for the jit's row-parallel segments (jit_rows.c): can this
     * equation compute rows [lo, lo + n) of axis 0 of its output (of size T)
     * from rows of its inputs? split[i]: input i is at hand only as those
     * rows of its axis 0. Returns 1 when it can: slice[i] says which inputs
     * to cut to the rows (every split one, and whole ones the rows need),
     * *q the params for n rows; 2 when the output (not cut) is a sum over
     * the rows, so that the sums of each thread's rows add up to it; -1
     * when neither. (Without this rule, a view of whole inputs runs whole
     * on every thread.) */
    int (*split_rows)(const cft_params *p, const cft_aval *in, int nin, const bool *split,
                      int64_t T, int64_t n, bool *slice, cft_params *q);
    /* optional, for bf16/f16 operands (autocast's products): run them on
     * kernels that take those dtypes (oneDNN's), writing out[j] in
     * oav[j]'s dtype; false when there is none for these operands on this
     * CPU. cft__run_impl then widens them to f32 for impl and rounds the
     * outputs on store. */
    bool (*impl_low)(cft_array *const *in, int nin, const cft_params *p, const cft_aval *oav,
                     cft_array **out);
} cft_prim;

/* The batch_sqnorm / batch_wsum of var (through its producer's rule). */
bool cft__batch_sqnorm_of(const cft_rewrite_ctx *c, int var, int axis, int64_t nb, cft_array **out);
bool cft__batch_wsum_of(const cft_rewrite_ctx *c, int var, int axis, int64_t nb, cft_array *w,
                        cft_array **out);
/* var's value, half (bf16, f16) widened to f32: the rules that answer
 * for autocast's half products through their conversion to f32 (dot.c,
 * conv_dp.c) work in f32. */
cft_array *cft__rewrite_value_f32(const cft_rewrite_ctx *c, int var);

/* The number of outputs of p with these params and inputs. */
static inline int cft__nout(const cft_prim *p, const cft_params *par, int nin) {
    return p->nout >= 0 ? p->nout : p->nout_of(par, nin);
}

/* Set slot k of params to the n values v. */
void cft__param_set(cft_params *p, int k, const int64_t *v, int n);
void cft__param_set_int(cft_params *p, int k, const int *v, int n);
void cft__param_set1(cft_params *p, int k, int64_t v);

/* The registry: all primitives, NULL-terminated. */
extern const cft_prim *const cft__prims[];

#endif
