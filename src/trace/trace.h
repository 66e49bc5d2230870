/* Internal: the interpreter stack. Every op goes through cft__bind, which
 * finds the innermost trace among its inputs (the highest level), lifts the
 * other inputs into it and lets that trace process the primitive; with no
 * tracer among the inputs the eager implementation runs. Transforms push a
 * trace, call the function on tracers, and pop it (autodidax's design). */
#ifndef CFT_TRACE_H
#define CFT_TRACE_H

#include "trace/prim.h"

typedef struct cft_trace cft_trace;

typedef struct cft_trace_vt {
    const char *name;
    /* run primitive p on inputs that are all tracers of this trace */
    cft_array *(*process)(cft_trace *t, const cft_prim *p, const cft_params *par, int nin,
                          cft_array *const *in, cft_array **out);
    /* box a value from below (concrete or a lower trace's tracer) */
    cft_array *(*lift)(cft_trace *t, cft_array *x);
    /* optional: the key a random draw (CFT_PRIM_RANDOM) made inside this
     * trace should use; vmap's randomness policy batches or refuses a key
     * that is the same for every batch element */
    cft_array *(*random_key)(cft_trace *t, cft_array *key);
} cft_trace_vt;

struct cft_trace {
    const cft_trace_vt *vt;
    int level;
    bool active;
    void *state;
};

/* Push a new trace on this thread's stack; pop it (it must be the top). */
cft_trace *cft__trace_push(const cft_trace_vt *vt, void *state);
void cft__trace_pop(cft_trace *t);
/* Current depth of the stack (0: eager). */
int cft__trace_depth(void);
/* A new tracer of trace t with the given aval (payload to be filled). */
cft_array *cft__tracer(cft_trace *t, const cft_aval *aval);
/* True if t is a staging trace (stage.c): the one that records a
 * primitive whose inputs are concrete but whose shapes are symbolic. */
bool cft__is_stage_trace(const cft_trace *t);
/* True if x is a tracer of t. */
static inline bool cft__is_tracer_of(const cft_array *x, const cft_trace *t) {
    return x && x->kind == CFT_K_TRACER && x->trace == t;
}

/* Apply primitive p to nin inputs, writing nout outputs. Returns NULL, or
 * the error (then every output is that error). */
cft_array *cft__bind(const cft_prim *p, const cft_params *par, int nin, cft_array *const *in,
                     int nout, cft_array **out);
/* Single-output convenience: returns the output (or the error). */
cft_array *cft__bind1(const cft_prim *p, const cft_params *par, int nin, cft_array *const *in);
/* e with the names of the active transforms appended (" [under a > b]"),
 * unless already there or no transform is active; e itself if not an error. */
cft_array *cft__annotate(cft_array *e);
/* Run p's eager implementation on concrete inputs whose avals passed the
 * shape rule (out_avals: what it promised). f16/bf16 are storage types:
 * half inputs are widened to f32 first, and outputs promised as half are
 * rounded to it on store, so no kernel needs half arithmetic. */
/* x, or a materialised copy when x is a conjugate view and p's impl does not
 * read those (CFT_PRIM_CONJ_AWARE) */
cft_array *cft__unconj(const cft_prim *p, cft_array *x);
cft_array *cft__run_impl(const cft_prim *p, const cft_params *par, int nin, cft_array *const *in,
                         int nout, const cft_aval *out_avals, cft_array **out);
/* Devices (device_op.c): an input is committed or on a device, so
 * cft__run_impl hands the primitive to cft__dev_run, which runs it on the
 * committed inputs' device (through its backend) or on the host with
 * committed results. */
bool cft__dev_involved(int nin, cft_array *const *in);
cft_array *cft__dev_run(const cft_prim *p, const cft_params *par, int nin, cft_array *const *in,
                        int nout, const cft_aval *out_avals, cft_array **out);
/* Eager kernels on a device (the backend's CFT_BACKEND_EAGER_KERNELS): the
 * lowering registers how (lower/jit_device.c: a one-operation jitted
 * function). It returns 1 with out set, -1 with an error in out[0], or 0
 * to decline (the backend's run then runs the operation). */
typedef int (*cft_dev_eager_fn)(const cft_prim *p, const cft_params *par, int nin,
                                cft_array *const *in, int nout, cft_array **out);
void cft__dev_set_eager(cft_dev_eager_fn f);
/* A contiguous copy of device array x made on its device (by a kernel:
 * lower/jit_device.c registers how): 1 with *y set, -1 with the error in
 * *y, 0 to decline (the copy then goes through the host). */
typedef int (*cft_dev_contig_fn)(cft_array *x, cft_array **y);
void cft__dev_set_contig(cft_dev_contig_fn f);
/* Abstract evaluation only: check and compute output avals. */
cft_array *cft__abstract_eval(const cft_prim *p, const cft_params *par, int nin, const cft_aval *in,
                              cft_aval *out);

/* The functions whose callbacks run on this thread (cft__fn_apply pushes
 * and pops their names), outermost first: errors made while tracing name
 * them ("while tracing 'loss' under grad under vmap"). */
void cft__fn_push(const char *name);
void cft__fn_pop(void);

#endif
