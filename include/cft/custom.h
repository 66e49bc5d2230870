/** @file
 * cft/custom.h: bringing your own C kernels into the transforms.
 *
 * A custom op wraps an opaque C function (a hand-written kernel that reads
 * and makes concrete arrays) as a primitive defined outside the library.
 * Its rules are what you give it:
 *
 * - shape: output avals from input avals (required);
 * - impl: the kernel, on concrete arrays (required);
 * - jvp (custom_jvp): a cft_fn (primals[nin], tangents[nin]) -> output
 *   tangents[nout], written with cft ops (it may call the op itself), linear
 *   in the tangents. Gives jvp, grad (by linearize + transpose), hessian.
 * - vjp_fwd / vjp_bwd (custom_vjp): fwd(primals) -> (outputs[nout],
 *   residuals[nres]); bwd(residuals, output cotangents) -> input cotangents.
 *   Reverse mode only, as in JAX: jvp/jacfwd of such an op is an error.
 * - batching: `rank_polymorphic` says the kernel maps leading batch dims
 *   through (an elementwise or row-wise kernel), so vmap calls the kernel on
 *   the batched arrays; or a `vmap` cft_fn taking every input batched along
 *   axis 0 and returning outputs batched along axis 0; or, only if you opt
 *   in with `sequential_vmap`, a loop of the kernel over the batch. With
 *   none of these, vmap of the op is an error naming it.
 *
 * The result composes with every transform like a built-in primitive.
 */
#ifndef CFT_CUSTOM_H
#define CFT_CUSTOM_H

/** @addtogroup transforms
 *  @{ */

#include "fn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The definition of a custom op. Keep it alive (static, or cft_alloc). */
typedef struct cft_custom_def {
    const char *name; /**< printed in the IR and in errors */
    int nin;          /**< number of inputs */
    int nout;         /**< number of outputs */
    /** output avals from input avals; return CFT_OK or an error status */
    cft_status (*shape)(void *env, const cft_aval *in, cft_aval *out);
    /** the kernel: concrete inputs -> outputs (made with cft_from_data etc.) */
    cft_status (*impl)(void *env, cft_array *const *in, cft_array **out);
    void *env;             /**< passed to shape and impl */
    cft_fn *jvp;           /**< custom_jvp rule, or NULL */
    cft_fn *vjp_fwd;       /**< custom_vjp forward, or NULL */
    cft_fn *vjp_bwd;       /**< custom_vjp backward, or NULL */
    int nres;              /**< number of residuals vjp_fwd returns */
    bool rank_polymorphic; /**< the kernel maps leading batch dims through */
    cft_fn *vmap;          /**< batched version, or NULL */
    bool sequential_vmap;  /**< opt in to a loop over the batch under vmap */
} cft_custom_def;

/** A function that applies the custom op (nin inputs, nout outputs). NULL
 *  (with cft_last_error set) when the definition is incomplete. */
cft_fn *cft_custom_op(const cft_custom_def *def);

/** custom_jvp for an ordinary traceable function (jax.custom_jvp + defjvp):
 *  f itself when evaluated, traced, jitted or vmapped; differentiated with
 *  `jvp` (primals[nin], tangents[nin]) -> output tangents[nout]. */
cft_fn *cft_custom_jvp(cft_fn *f, cft_fn *jvp);
/** custom_vjp for a traceable function: fwd (primals) -> (outputs[nout],
 *  residuals[nres]); bwd (residuals, output cotangents) -> input
 *  cotangents. Reverse mode only, as in JAX. */
cft_fn *cft_custom_vjp(cft_fn *f, cft_fn *fwd, cft_fn *bwd, int nres);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
