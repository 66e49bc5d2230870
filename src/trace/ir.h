/* Internal: the IR records (see cft/ir.h for the public view). Vars are
 * numbered densely from 0 within one IR, so interpreters index arrays by
 * var id. An IR is immutable once built; passes build new ones. */
#ifndef CFT_IR_IMPL_H
#define CFT_IR_IMPL_H

#include "cft/ir.h"
#include "trace/trace.h"

typedef struct cft_irvar {
    int id;
    cft_aval aval;
} cft_irvar;

typedef struct cft_eqn {
    const cft_prim *prim;
    cft_params params;
    int nin, nout;
    cft_irvar **in;
    cft_irvar **out;
} cft_eqn;

struct cft_ir {
    int nconst, nin, neqn, nout, nvars;
    cft_irvar **constvars;
    cft_array **constvals; /* concrete arrays or tracers of an enclosing trace */
    cft_irvar **invars;
    cft_eqn *eqns;
    cft_irvar **outvars;
    int *last_use; /* per var: index of the last eqn reading it (neqn: an output) */
};

/* A trace that records equations: cft_make_ir uses it, and so does
 * linearize (to stage the jvp of a function). */
typedef struct cft_stage cft_stage;
cft_stage *cft__stage_begin(cft_trace **trace);
/* A new input variable of the staged function, returned as a tracer. */
cft_array *cft__stage_input(cft_stage *s, const cft_aval *aval);
/* Finish: outputs (any values: tracers of this trace, or lifted) become
 * outvars. Pops the trace. Returns NULL on error (last error set). */
cft_ir *cft__stage_end(cft_stage *s, int nout, cft_array *const *outs);
/* Abandon a staging (pops the trace). */
void cft__stage_abort(cft_stage *s);

/* Renumber vars densely and compute last uses: every IR builder ends here. */
cft_ir *cft__ir_finish(cft_ir *ir);
/* With CFT_IR_ROUNDTRIP=1: print, parse back and compare (aborts on a
 * difference: a printer or parser bug); cft__ir_finish calls it. */
void cft__ir_roundtrip_check(const cft_ir *ir);
/* The registry's primitive named by the n characters at s (NULL: none;
 * the parser reads only these). */
const cft_prim *cft__prim_named(const char *s, int n);
/* Turn the check off on this thread (the parser's own IRs); restore it. */
bool cft__ir_roundtrip_suspend(void);
void cft__ir_roundtrip_restore(bool was);
/* Evaluate with explicit const values (overriding ir->constvals). */
cft_status cft__ir_eval_with(const cft_ir *ir, cft_array *const *consts, cft_array *const *in,
                             cft_array **out);
/* Partial evaluation (partial.c): split `ir` by which inputs are known.
 * known: (known inputs) -> (outputs computed from them, in order; then the
 * nres residuals); unknown: (residuals, unknown inputs) -> (other outputs).
 * want_unknown[j] (NULL: where computed) sends output j to the unknown IR
 * (a known value passes through as a residual); out_known[j] gets where it
 * went. NULL (last error set) when a wanted known output is unknown. */
typedef struct cft_ir_split {
    cft_ir *known, *unknown;
    int nres;
} cft_ir_split;
cft_ir_split *cft__split_ir(const cft_ir *ir, const bool *in_known, const bool *want_unknown,
                            bool *out_known);

/* Symbolic dims: does the IR (an equation) have any, in avals or params
 * (nested IRs included)? */
bool cft__ir_symbolic(const cft_ir *ir);
bool cft__eqn_symbolic(const cft_eqn *q);
/* The IR with every symbolic dim (avals, params, nested IRs) evaluated
 * under env; same var ids and equation indices. NULL (last error set) if a
 * dim cannot be evaluated. */
struct cft_dimenv;
cft_ir *cft__ir_concretize(const cft_ir *ir, const struct cft_dimenv *env);

/* The primitives' rewrite rules applied (rewrite.c); the IR itself when
 * none applies. */
cft_ir *cft__ir_rewrite(const cft_ir *ir);

/* The IR as Graphviz DOT (ir_dot.c); group[k] >= 0 colours equation k by
 * its fusion group (NULL: no groups). */
cft_status cft__ir_dot(const cft_ir *ir, const int *group, FILE *f);

/* DCE keeping only the outputs marked in `keep` (NULL: all). */
cft_ir *cft__ir_dce_outputs(const cft_ir *ir, const bool *keep);

#endif
