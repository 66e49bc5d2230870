/** @file
 * cft/cft.h: the whole public API.
 *
 * cft brings JAX/functorch-style composable function transforms to C:
 * immutable n-d arrays (array.h), operations (ops.h) that run eagerly or are
 * traced, pure C functions as values with jvp, vjp, grad, vmap, jacrev,
 * jacfwd and hessian over them (fn.h), a printable closure IR (ir.h), and
 * counter-based random numbers (random.h); plus neural-network layers,
 * losses, optimizers and safetensors files over parameter trees (nn.h).
 * A per-sample gradient:
 *
 *     static cft_status loss(void *env, int nin, cft_array *const *in,
 *                            int nout, cft_array **out) {
 *         cft_array *pred = cft_matmul(in[1], in[0]);        // x @ w
 *         out[0] = cft_mse(pred, in[2]);
 *         return CFT_OK;
 *     }
 *     cft_fn *g = cft_grad(cft_fn_new(loss, NULL, 3, 1), NULL, 0); // d/dw
 *     cft_fn *psg = cft_vmap(g, (int[]){CFT_NOT_BATCHED, 0, 0}, NULL);
 *     cft_array *grads;
 *     cft_fn_call(psg, (cft_array *[]){w, xs, ys}, &grads);  // [B, ...w]
 *
 * No call returns NULL, no call aborts on bad input, nothing needs freeing:
 * see core.h for the error model.
 */
#ifndef CFT_H
#define CFT_H

#include "amp.h"
#include "array.h"
#include "core.h"
#include "device.h"
#include "complex.h"
#include "control.h"
#include "custom.h"
#include "export.h"
#include "fft.h"
#include "fn.h"
#include "ir.h"
#include "nn.h"
#include "jit.h"
#include "linalg.h"
#include "ops.h"
#include "privacy.h"
#include "profile.h"
#include "quant.h"
#include "random.h"
#include "shape.h"
#include "sparse.h"
#include "special.h"
#include "timer.h"

#endif
