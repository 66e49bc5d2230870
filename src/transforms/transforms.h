/* Internal entry points shared by the transforms. */
#ifndef CFT_TRANSFORMS_H
#define CFT_TRANSFORMS_H

#include "trace/fn.h"

/* Push a jvp trace and apply f to (primals, tangents); tangents may be NULL
 * entries (zero) or a NULL array; output tangents may come back NULL. */
cft_status cft__jvp_apply(cft_fn *f, cft_array *const *primals, cft_array *const *tangents,
                          cft_array **outs, cft_array **tangents_out);

/* A linearization: f's jvp, staged, split into a known (primal) part that
 * was evaluated and a part linear in the tangents, kept as an IR with its
 * residual values. */
typedef struct cft_lin {
    cft_ir *lin; /* inputs: residuals, then tangents of the diff inputs */
    int nres;
    cft_array **res;      /* residual values */
    int nin, nout;        /* of f */
    bool *diff;           /* which inputs have tangents */
    cft_aval *in_avals;   /* f's input avals */
    cft_aval *out_avals;  /* f's output avals */
    int *tan_of;          /* linear output k is the tangent of f's output tan_of[k] */
    const char **res_src; /* per residual: the primitive that made it ("input", "const") */
} cft_lin;

/* Linearize f at primals: writes f's outputs and the linearization.
 * need_tangent[j] (NULL: all) says which output tangents will be used. */
cft_status cft__linearize(cft_fn *f, cft_array *const *primals, const bool *diff,
                          const bool *need_tangent, cft_array **outs, cft_lin **lin);
/* The backward pass: cotangents of f's inputs (NULL for inputs without
 * tangents or with zero cotangent) from cotangents of its outputs (NULL:
 * zero). */
cft_status cft__backward(const cft_lin *lin, cft_array *const *cts, cft_array **ct_in);

/* Wrapping traces (wrap.c): a tracer holding the value below in
 * u.cast.val; lift boxes a lower value; apply runs f on boxed inputs under
 * a new trace of vt (errors name `call`) and unboxes the outputs. */
struct cft_trace;
struct cft_trace_vt;
cft_array *cft__wrap_box(struct cft_trace *t, cft_array *v);
cft_array *cft__wrap_lift(struct cft_trace *t, cft_array *x);
cft_status cft__wrap_apply(const struct cft_trace_vt *vt, void *state, cft_fn *f, const char *call,
                           int nin, cft_array *const *in, int nout, cft_array **out);

#endif
