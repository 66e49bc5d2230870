/** @file
 * cft/control.h: loops that transform well.
 *
 * cft_scan runs a body function over the leading axis of its xs, threading
 * a carry, and stacks the per-step outputs: the loop stays one primitive in
 * the IR (no unrolling), and jvp, grad (storing residuals per step, then a
 * reverse scan of the transposed body), vmap (over any inputs) and their
 * compositions apply to it. cft_fori_loop is a scan with a static trip
 * count. Values the body captures from outside, tracers of an enclosing
 * transform included, become explicit inputs of the loop.
 */
#ifndef CFT_CONTROL_H
#define CFT_CONTROL_H

/** @addtogroup transforms
 *  @{ */

#include "fn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Scan. body: (consts[nconsts], carry[ncarry], x[nx]) -> (carry'[ncarry],
 *  y[ny]), where x are slices of the xs along axis 0. in = consts ++ initial
 *  carry ++ xs (nx = body's nin - nconsts - ncarry; each xs has leading dim
 *  `length`); out = final carry ++ ys (each of leading dim `length`).
 *  reverse runs from the last slice to the first (ys keep slice order).
 *  Errors (mismatched carry avals, wrong lengths) name cft_scan. */
cft_status cft_scan(cft_fn *body, int nconsts, int ncarry, int64_t length, bool reverse,
                    cft_array *const *in, cft_array **out);

/** For i in [lo, hi): carry = body(i, consts[nconsts], carry[ncarry]) with i
 *  an i32 scalar; body returns the new carry[ncarry]. in = consts ++ carry;
 *  out = final carry. A scan underneath: reverse-differentiable. */
cft_status cft_fori_loop(cft_fn *body, int nconsts, int ncarry, int64_t lo, int64_t hi,
                         cft_array *const *in, cft_array **out);

/** Switch: run branches[clamp(index, 0, nbranches-1)](ops) (index an
 *  integer scalar, at most 16 branches; every branch takes the same nops
 *  inputs and returns the same outputs). Only the chosen branch runs. Under
 *  vmap with a batched index every branch runs on the whole batch and each
 *  lane selects its result (a select, as JAX does); with an unbatched index
 *  it stays one switch. grad stores the chosen branch's residuals. */
cft_status cft_switch(cft_array *index, cft_fn *const *branches, int nbranches, int nops,
                      cft_array *const *ops, cft_array **out);
/** cond: pred (bool scalar) ? on_true(ops) : on_false(ops). */
cft_status cft_cond(cft_array *pred, cft_fn *on_true, cft_fn *on_false, int nops,
                    cft_array *const *ops, cft_array **out);

/** What cft_checkpoint keeps for the backward pass. */
typedef enum cft_remat_policy {
    CFT_SAVE_NOTHING = 0,     /**< recompute everything inside f from its inputs */
    CFT_SAVE_CONTRACTIONS = 1 /**< keep the outputs of dot_general/conv, recompute the rest */
} cft_remat_policy;

/** Rematerialization (gradient checkpointing): f with the same values, but
 *  under reverse mode the values computed inside f are not stored as
 *  residuals: the backward pass recomputes them from f's inputs (and, with
 *  CFT_SAVE_CONTRACTIONS, from the saved GEMM/conv outputs). Trades compute
 *  for memory; see cft_print_saved_residuals. */
cft_fn *cft_checkpoint(cft_fn *f, cft_remat_policy policy);

/** While loop: carry = body(consts, carry) while cond(consts, carry), where
 *  cond returns a bool scalar. in = consts[nconsts] ++ carry[ncarry]; out =
 *  final carry. jvp and vmap apply (under vmap, lanes whose condition turned
 *  false keep their carry while the others run: the loop runs until every
 *  lane is done). Reverse mode needs a bound: cft_while_loop_bounded. */
cft_status cft_while_loop(cft_fn *cond, cft_fn *body, int nconsts, int ncarry, cft_array *const *in,
                          cft_array **out);

/** A while loop of at most max_steps steps, written as a scan of masked
 *  steps (a finished loop keeps its carry): reverse-differentiable, at the
 *  cost of always running max_steps steps. */
cft_status cft_while_loop_bounded(cft_fn *cond, cft_fn *body, int nconsts, int ncarry,
                                  int64_t max_steps, cft_array *const *in, cft_array **out);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
