/* Internal: the function record. */
#ifndef CFT_FN_IMPL_H
#define CFT_FN_IMPL_H

#include "cft/fn.h"
#include "trace/ir.h"

typedef struct fn_cache {
    cft_aval *avals;
    cft_ir *ir;
    struct fn_cache *next;
} fn_cache;

struct cft_fn {
    cft_fn_cb cb;
    void *env;
    int nin, nout;
    const char *name;
    const char *label; /* the profiler's name when not `name` (cft_jit: "jit(f)") */
    fn_cache *cache;
    bool direct;    /* never staged by cft_fn_call (cft_jit manages its own plans) */
    cft_array *err; /* an error function: every call fails with this */
    /* set by vmap: this function is `mapped` over axis 0 of the inputs
     * marked in map_batched (the others shared), its outputs stacked along
     * axis 0, one random key for all lanes; cft_jit may then run it as a
     * loop over the batch (lower/jit_lanes.c) */
    cft_fn *mapped;
    bool *map_batched;
};

/* An error function (as error arrays are for arrays): calling it fails
 * every output with err; transforms of it return it unchanged. */
cft_fn *cft__fn_error(cft_array *err, int nin, int nout);
/* NULL when f is usable by `call`; else the function `call` must return
 * (f itself when it is an error function, or a new one for NULL) */
cft_fn *cft__fn_check(const char *call, cft_fn *f);
/* an error function for `call` with a printf-style message */
cft_fn *cft__fn_fail(int nin, int nout, cft_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The bytes f's computation touches at these input avals (an upper bound:
 * every equation's outputs and the inputs, from its IR; 0 if tracing fails). */
size_t cft__fn_bytes(cft_fn *f, const cft_aval *avals);
/* The same bytes, and in *flops (may be NULL) an estimate of its arithmetic:
 * one per element computed, 2*M*K*N per contraction (CFT_PRIM_CONTRACTION). */
size_t cft__fn_cost(cft_fn *f, const cft_aval *avals, double *flops);
/* the same for an IR with concrete shapes */
size_t cft__ir_cost(const cft_ir *ir, double *flops);

/* Run f's callback directly (no staging), checking its outputs. */
cft_status cft__fn_apply(cft_fn *f, cft_array *const *in, cft_array **out);

/* Set every output to e and record it as the last error. */
cft_status cft__fail_outs(cft_array *e, int nout, cft_array **out);

#endif
