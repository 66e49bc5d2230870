/** @file
 * cft/ir.h: the closure IR, jaxpr-like and public.
 *
 * cft_make_ir traces a function at given input avals into an IR: typed
 * variables and a flat list of equations `outs = prim[params](ins)`. Values
 * captured from outside the function become constants (the part before `;`
 * in the printed form); tracers of an enclosing transform captured by the
 * function become such constants too, so the IR is closed. Example:
 *
 *   { lambda a:f32[64,10] ; b:f32[8,64] .
 *     let c:f32[8,10] = dot_general[lc=(1) rc=(0) lb=() rb=()] b a
 *         d:f32[] = reduce_sum[axes=(0,1)] c
 *     in (d) }
 */
#ifndef CFT_IR_H
#define CFT_IR_H

/** @addtogroup jit
 *  @{ */

#include <stdio.h>

#include "core.h"
#include "fn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A closed IR (opaque, GC-managed, immutable). */
typedef struct cft_ir cft_ir;

/** Trace f at the given input avals (nin of them). On a trace-time error
 *  returns NULL and sets cft_last_error(). Avals may hold symbolic dims
 *  (cft/shape.h: f32[B,64]); the IR then serves every size, and
 *  cft_ir_eval binds the symbols from its inputs' shapes. */
cft_ir *cft_make_ir(cft_fn *f, const cft_aval *in_avals);
/** Print the IR in its stable text form. */
void cft_ir_print(const cft_ir *ir, FILE *f);
/** The printed form as a GC string. */
const char *cft_ir_str(const cft_ir *ir);
/** Read the printed form back: *out gets an IR that prints as `text` did
 *  (print -> parse -> print is the identity) and evaluates as the original.
 *  Nested IRs (scan, while, cond, checkpoint bodies), symbolic dims (by
 *  name) and every parameter are read; the constants (the vars before `;`,
 *  in the IR and in nested IRs, in the order they appear in the text) take
 *  their values from consts[0 .. nconst), whose avals must match (get them
 *  from an IR with cft_ir_consts). Only primitives of cft's registry parse:
 *  custom_jvp/custom_vjp functions, debug prints and collectives refer to
 *  state of the process that traced them and are refused by name. Every
 *  equation is checked by its shape rule. Errors (CFT_E_ARG, *out NULL,
 *  last error set) give line, column and what was expected. */
cft_status cft_ir_parse(const char *text, int nconst, cft_array *const *consts, cft_ir **out);
/** The number of constants of ir, nested IRs' included, writing their
 *  values (out non-NULL, room for that many) in the text order that
 *  cft_ir_parse reads them in. */
int cft_ir_consts(const cft_ir *ir, cft_array **out);
/** Re-run every equation's shape rule and check the declared avals. */
cft_status cft_ir_typecheck(const cft_ir *ir);
/** Evaluate the IR on inputs (concrete arrays or tracers): in[nin] -> out[nout].
 *  For an IR with symbolic input dims, inputs of concrete shapes bind the
 *  symbols (inputs that disagree, e.g. x [4,64] and y [5] for B, are an
 *  error naming the symbol). */
cft_status cft_ir_eval(const cft_ir *ir, cft_array *const *in, cft_array **out);
/** A copy without equations whose outputs are unused. */
cft_ir *cft_ir_dce(const cft_ir *ir);
/** A copy in which equal equations (same primitive, params and inputs) are
 *  computed once. */
cft_ir *cft_ir_cse(const cft_ir *ir);
/** A copy in which the primitives' rewrite rules have been applied, as
 *  cft_jit applies them before lowering; today: DP-SGD's per-example
 *  gradient norms and clipped sums computed from the factors of per-example
 *  outer products (dense layers) instead of the [B, ...] gradients, which
 *  then drop out. The IR itself when no rule applies. */
cft_ir *cft_ir_rewrite(const cft_ir *ir);
/** @{ */
/** The aval of input i (resp. output i) of the IR (CFT_E_ARG when there is none). */
cft_status cft_ir_input_aval(const cft_ir *ir, int i, cft_aval *out);
cft_status cft_ir_output_aval(const cft_ir *ir, int i, cft_aval *out);
/** @} */
/** The aval of output k of equation i (CFT_E_ARG when there is none). */
cft_status cft_ir_eqn_out_aval(const cft_ir *ir, int i, int k, cft_aval *out);
/** The IR as a Graphviz DOT graph (render with `dot -Tsvg`): inputs,
 *  constants and outputs as ellipses, equations as boxes with their
 *  parameters, each value an edge labelled with its aval, nested IRs
 *  (loop and branch bodies) as clusters. */
cft_status cft_ir_to_dot(const cft_ir *ir, FILE *f);
/** The IR as a function (evaluates it). */
cft_fn *cft_ir_fn(cft_ir *ir);
/** @{ */
/** Counts, and the primitive name of equation i. */
int cft_ir_num_inputs(const cft_ir *ir);
int cft_ir_num_outputs(const cft_ir *ir);
int cft_ir_num_consts(const cft_ir *ir);
int cft_ir_num_eqns(const cft_ir *ir);
const char *cft_ir_eqn_prim(const cft_ir *ir, int i);
/** @} */
/** Print the IR that f has for the given input avals (convenience). */
cft_status cft_fn_print_ir(cft_fn *f, const cft_aval *in_avals, FILE *out);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
