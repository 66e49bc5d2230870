/** @file
 * cft/amp.h: mixed precision (torch.autocast and torch.cuda.amp.GradScaler).
 *
 * cft_autocast(f, CFT_BF16) is a transform like cft_grad or cft_vmap:
 * inside f, matrix products (dot_general: matmul, einsum, linear layers,
 * attention's products) and convolutions run on bf16 operands with f32
 * accumulation; everything else (sums and means, softmax and log-softmax,
 * normalisations, losses, elementwise operations) runs in the dtype it has
 * without autocast, f32. Which primitive runs low is a flag in each
 * primitive's record (CFT_PRIM_AMP_LOW; torch's autocast lists are the
 * model). A product's result is rounded to bf16, as torch's is, and handed
 * on in the dtype it has without autocast: autocast never changes an
 * operation's output dtype, so every consumer (the backward pass's IR, a
 * loop body, a custom rule) sees the avals it was traced with. (torch
 * keeps such results in bf16, which halves their memory; cft keeps them
 * f32 and gets the same numbers.) f16 and bf16 are storage types: every
 * kernel computes in f32 and rounds its result on store.
 *
 *     cft_fn *loss16 = cft_autocast(loss, CFT_BF16);
 *     cft_fn *g = cft_grad(loss16, argnums, 2);   // gradients are f32
 *     cft_fn *step = cft_jit(g);                  // casts are in the IR
 *
 * It composes with every transform (grad of autocast, where the backward
 * products run low too when autocast is outside grad; vmap; jit; export:
 * the casts are ordinary convert_element_type equations). f64 and complex
 * operands are left alone, as torch does. Operations inside f whose inputs
 * are all constants captured from outside (no traced value among them) are
 * not seen by the transform; nor are the bodies of cft_scan /
 * cft_while_loop / cft_cond, which are traced on their own.
 *
 * f16's range is small (6.5e4), so its gradients are scaled: the loss
 * scaler below is GradScaler's dynamic loss scale as pure functions over
 * trees, jit-friendly (the scale and the count of good steps are arrays).
 */
#ifndef CFT_AMP_H
#define CFT_AMP_H

/** @addtogroup lowbits
 *  @{ */

#include "core.h"
#include "fn.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** f under mixed precision: matrix products and convolutions on operands
 *  in `low` (CFT_BF16 or CFT_F16) with f32 accumulation, the rest in f32
 *  (see the file's comment). An error
 *  function (CFT_E_DTYPE naming cft_autocast and the dtype) for any other
 *  dtype; f itself if f is an error function. */
cft_fn *cft_autocast(cft_fn *f, cft_dtype low);

/** Hyperparameters of the dynamic loss scale (GradScaler's, same
 *  defaults: cft_loss_scaler_default). */
typedef struct cft_loss_scaler {
    double init_scale;     /**< the first scale (65536) */
    double growth_factor;  /**< the scale's factor after growth_interval good steps (2) */
    double backoff_factor; /**< the scale's factor after a step with inf/NaN (0.5) */
    int growth_interval;   /**< good steps in a row before the scale grows (2000) */
} cft_loss_scaler;

/** GradScaler's defaults: 65536, 2, 0.5, 2000. */
cft_loss_scaler cft_loss_scaler_default(void);
/** The scaler's state: a tree {"scale": f32[], "growth_tracker": i32[]}
 *  (the names torch's state_dict uses); an error tree on bad
 *  hyperparameters (a scale that is not positive and finite, a growth
 *  factor not above 1, a backoff not in (0, 1), an interval below 1). */
cft_tree *cft_loss_scaler_init(const cft_loss_scaler *s);
/** loss times the current scale (in f32, whatever loss's float dtype):
 *  differentiate this, then cft_loss_scaler_step with its gradients. */
cft_array *cft_loss_scale(const cft_tree *state, cft_array *loss);
/** The gradients divided by the scale (each in its own dtype, computed in
 *  f32), and in *found_inf (may be NULL) a bool scalar: true when any of
 *  them holds an inf or NaN. */
cft_tree *cft_loss_unscale(const cft_tree *state, const cft_tree *grads, cft_array **found_inf);
/** One optimizer step from scaled gradients, as scaler.step(optimizer)
 *  followed by scaler.update(): unscale; when every gradient is finite,
 *  cft_optim_update (same o, step, lr as there) and count a good step,
 *  growing the scale after growth_interval of them; otherwise keep
 *  params and opt_state unchanged and back the scale off. Writes the new
 *  parameters, optimizer state and scaler state (error trees on failure),
 *  and *skipped (may be NULL) a bool scalar saying whether the update was
 *  skipped (callers counting steps for Adam's bias correction should not
 *  count it, as torch does not). All of it is array arithmetic (select),
 *  so a step can be traced and jitted whole. */
cft_status cft_loss_scaler_step(const cft_loss_scaler *s, const cft_optim *o,
                                const cft_tree *scaled_grads, const cft_tree *scaler_state,
                                const cft_tree *opt_state, const cft_tree *params, cft_array *step,
                                cft_array *lr, cft_tree **new_params, cft_tree **new_opt_state,
                                cft_tree **new_scaler_state, cft_array **skipped);

#ifdef __cplusplus
}
#endif

/** @} */

#endif
