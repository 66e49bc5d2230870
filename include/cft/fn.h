/** @file
 * cft/fn.h: functions as values, and the transforms over them.
 *
 * A cft_fn is a pure C function over arrays: a callback plus an environment
 * pointer, with a fixed number of inputs and outputs. Transforms take cft_fn
 * and return cft_fn, so they compose by application:
 *
 *     cft_fn *loss = cft_fn_new(mlp_loss, NULL, 8, 1);   // w1 b1 w2 b2 w3 b3 x y
 *     cft_fn *g    = cft_grad(loss, (int[]){0,1,2,3,4,5}, 6);
 *     int in_axes[8] = {CFT_NOT_BATCHED, ..., 0, 0};
 *     cft_fn *psg  = cft_vmap(g, in_axes, NULL);         // per-sample gradients
 *     cft_fn_call(psg, inputs, grads);
 *
 * The callback must compute its outputs with cft ops only (it is traced): no
 * reading of array values, no side effects that matter. On the first call
 * with new input shapes a function is traced once into the IR (ir.h) and
 * later calls with the same shapes and dtypes run that IR, never re-tracing.
 * So, as under jax.jit, whatever the callback reads from its environment
 * (a learning rate in a struct, a captured array) is fixed at that trace:
 * pass values that change between calls as inputs, or mark the function
 * with cft_fn_uncached.
 */
#ifndef CFT_FN_H
#define CFT_FN_H

/** @addtogroup transforms
 *  @{ */

#include <stdio.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The callback of a cft_fn: read in[0..nin), write out[0..nout). Return
 *  CFT_OK, or an error status (an error array in an output also counts). */
typedef cft_status (*cft_fn_cb)(void *env, int nin, cft_array *const *in, int nout,
                                cft_array **out);

/** A function over arrays (opaque, GC-managed). */
typedef struct cft_fn cft_fn;

/** The most inputs or outputs a function may have. */
#define CFT_FN_MAX_ARGS 4096

/** Marks an input or output as not batched in cft_vmap. */
#define CFT_NOT_BATCHED (-1000)

/** Wrap a C callback as a function with nin inputs and nout outputs. `env` is
 *  passed back to every call. It must stay valid and, if it holds arrays or
 *  functions, be visible to the GC: static, or from cft_alloc (not malloc). */
cft_fn *cft_fn_new(cft_fn_cb cb, void *env, int nin, int nout);
/** cft_fn_new with the function's name, which errors raised while tracing
 *  it ("while tracing 'loss' under grad under vmap") and the IR printer
 *  use. In programs using cft, cft_fn_new is a macro passing the
 *  callback's own name here. */
cft_fn *cft_fn_new_named(cft_fn_cb cb, void *env, int nin, int nout, const char *name);
#ifndef CFT_INTERNAL_BUILD
/** cft_fn_new_named with the callback's name. */
#define cft_fn_new(cb, env, nin, nout) cft_fn_new_named(cb, env, nin, nout, #cb)
#endif
/** Give a function a name (used in the IR printer and errors). Returns f. */
cft_fn *cft_fn_named(cft_fn *f, const char *name);
/** Never cache f's trace: every top-level call runs the callback again (op
 *  by op), so changes to what it reads from its environment take effect.
 *  Slower; transforms of f still trace it. Returns f. */
cft_fn *cft_fn_uncached(cft_fn *f);
/** Functions never come back NULL: a call that cannot make one (a bad
 *  argnum, a NULL function, ...) returns an *error function*, which carries
 *  the message; calling it fails every output with that error, and
 *  transforms of it return it unchanged, so one check at the end suffices.
 *  True for an error function (or NULL). */
bool cft_fn_failed(const cft_fn *f);
/** The message of an error function ("" for a usable one). */
const char *cft_fn_error_message(const cft_fn *f);
/** @{ */
/** Number of inputs / outputs. */
int cft_fn_nin(const cft_fn *f);
int cft_fn_nout(const cft_fn *f);
/** @} */
/** Call f: in[nin] -> out[nout]. Outputs are always set (error arrays on
 *  failure); returns CFT_OK or the first error code (also cft_last_error). */
cft_status cft_fn_call(cft_fn *f, cft_array *const *in, cft_array **out);
/** Call a function with one output and return it (an error array on failure). */
cft_array *cft_fn_call1(cft_fn *f, cft_array *const *in);

/** Forward mode: a function of (primals[nin], tangents[nin]) returning
 *  (outputs[nout], output tangents[nout]). Tangents have the primals' avals. */
cft_fn *cft_jvp(cft_fn *f);
/** jvp with has_aux: (primals, tangents) -> (outputs, aux outputs, tangents
 *  of the non-aux outputs); f's last naux outputs are auxiliary. */
cft_fn *cft_jvp_with_aux(cft_fn *f, int naux);

/** Reverse mode: evaluate f at `primals`, store its outputs in outs[nout],
 *  and return in *pullback a function from output cotangents [nout] to input
 *  cotangents [nin], reusable any number of times (and itself transformable).
 *  Built by linearizing (jvp + partial evaluation) and transposing. */
cft_status cft_vjp(cft_fn *f, cft_array *const *primals, cft_array **outs, cft_fn **pullback);
/** vjp with has_aux: f's last naux outputs are auxiliary (returned in
 *  outs, not differentiated); the pullback takes cotangents of the other
 *  nout - naux outputs. */
cft_status cft_vjp_with_aux(cft_fn *f, int naux, cft_array *const *primals, cft_array **outs,
                            cft_fn **pullback);

/** Print what reverse mode of f at `primals` stores for the backward pass:
 *  one line per residual with its aval and the primitive that made it (like
 *  JAX's print_saved_residuals). Returns the number of residuals, -1 on error. */
int cft_print_saved_residuals(cft_fn *f, cft_array *const *primals, FILE *out);

/** Gradient of f's single scalar float output with respect to the inputs
 *  listed in argnums (NULL, 0: input 0). Outputs: one gradient per argnum. */
cft_fn *cft_grad(cft_fn *f, const int *argnums, int nargnums);
/** Flags of the _ex transforms. CFT_HOLOMORPHIC: f is holomorphic in its
 *  complex inputs, and the result is the complex derivative f'(z) (inputs
 *  must be complex, and for grad and jacrev the outputs too). Without it,
 *  grad needs a real output (complex inputs are allowed and get JAX's
 *  conjugate Wirtinger gradient, see complex.h), jacrev real inputs and
 *  outputs, jacfwd real inputs. */
enum { CFT_HOLOMORPHIC = 1 };
/** cft_grad with flags (CFT_HOLOMORPHIC: f's scalar output is complex and
 *  the result is f'(z)). */
cft_fn *cft_grad_ex(cft_fn *f, const int *argnums, int nargnums, unsigned flags);
/** Like cft_grad but also returns the value: outputs (value, aux..., grads...).
 *  With has_aux, f returns (loss, aux...) and only loss is differentiated. */
cft_fn *cft_value_and_grad(cft_fn *f, const int *argnums, int nargnums, bool has_aux);
/** grad with has_aux (jax.grad(f, has_aux=True)): f returns (loss, aux...);
 *  outputs (grads..., aux...), only loss differentiated. */
cft_fn *cft_grad_with_aux(cft_fn *f, const int *argnums, int nargnums);

/** Vectorizing map. in_axes[i] is the batched axis of input i (negative
 *  counts from the end) or CFT_NOT_BATCHED; NULL: axis 0 for all. out_axes[j]
 *  is where the batch axis goes in output j (NULL: 0); CFT_NOT_BATCHED there
 *  requires that output not to depend on the batch. Every primitive has a
 *  batching rule; there is no silent per-example loop. */
cft_fn *cft_vmap(cft_fn *f, const int *in_axes, const int *out_axes);
/** What a random draw inside a vmap does with a key that is the same for
 *  every batch element (functorch's `randomness`): SAME gives every element
 *  the same numbers (cft_vmap's behaviour, and JAX's), ERROR refuses
 *  (functorch's default), DIFFERENT splits the key into one per element.
 *  A batched key always gives each element its own numbers. */
typedef enum cft_randomness {
    CFT_RANDOMNESS_SAME = 0,
    CFT_RANDOMNESS_ERROR = 1,
    CFT_RANDOMNESS_DIFFERENT = 2
} cft_randomness;
/** cft_vmap with a randomness policy. */
cft_fn *cft_vmap_ex(cft_fn *f, const int *in_axes, const int *out_axes, cft_randomness randomness);
/** cft_vmap with the lengths of in_axes and out_axes given (each NULL, or
 *  exactly f's input / output count: a wrong length is an error rather
 *  than a read past the array's end). */
cft_fn *cft_vmap_n(cft_fn *f, const int *in_axes, int n_in, const int *out_axes, int n_out);
/** vmap over the batch in chunks of at most `chunk` (functorch's
 *  chunk_size): the same result as cft_vmap (outputs batched along axis
 *  0), with the memory of one chunk's intermediates at a time. */
cft_fn *cft_vmap_chunked(cft_fn *f, const int *in_axes, int64_t chunk);
/** vmap in chunks sized to a memory budget: the bytes one batch element's
 *  computation makes (f's IR at one element's avals, every intermediate
 *  counted) decide how many elements go in one chunk, so that a chunk's
 *  intermediates stay within `memory_budget` bytes (at least one element
 *  per chunk). Outputs batched along axis 0, as cft_vmap_chunked. */
cft_fn *cft_vmap_budget(cft_fn *f, const int *in_axes, size_t memory_budget);

/** @{ */
/** Jacobians of a function with respect to the inputs in argnums (NULL, 0:
 *  input 0). Output k*nargnums+j is d out[k] / d in[argnums[j]], of shape
 *  out_shape + in_shape. jacrev: vmap of vjp over basis cotangents; jacfwd:
 *  vmap of jvp over basis tangents. */
cft_fn *cft_jacrev(cft_fn *f, const int *argnums, int nargnums);
cft_fn *cft_jacfwd(cft_fn *f, const int *argnums, int nargnums);
/** @} */
/** @{ */
/** cft_jacrev / cft_jacfwd with flags: CFT_HOLOMORPHIC gives the complex
 *  Jacobian of a holomorphic f of complex inputs. Without it, jacrev needs
 *  real inputs and outputs and jacfwd real inputs (as JAX). */
cft_fn *cft_jacrev_ex(cft_fn *f, const int *argnums, int nargnums, unsigned flags);
cft_fn *cft_jacfwd_ex(cft_fn *f, const int *argnums, int nargnums, unsigned flags);
/** @} */
/** Modes of cft_jacobian. */
enum { CFT_JAC_AUTO = 0, CFT_JAC_REV = 1, CFT_JAC_FWD = 2 };
/** Options of cft_jacobian and cft_hessian_n (zero-initialise; all optional). */
typedef struct cft_jac_options {
    int mode;             /**< CFT_JAC_AUTO: reverse mode when the differentiated outputs
                               have no more elements than the inputs in argnums, else
                               forward mode (decided at each call from the shapes) */
    unsigned flags;       /**< CFT_HOLOMORPHIC */
    int naux;             /**< has_aux: f's last naux outputs are returned after the
                               Jacobians as they are, not differentiated */
    int64_t chunk_size;   /**< basis vectors per vmapped call (0: all at once) */
    size_t memory_budget; /**< or as many as keep one call's intermediates within this
                               many bytes (0: no budget); see cft_vmap_budget */
} cft_jac_options;
/** Jacobians with options: output k*nargnums+j is d out[k] / d in[argnums[j]]
 *  (out_shape + in_shape) for the nout - naux differentiated outputs, then
 *  the naux auxiliary outputs. opt NULL: automatic mode, no aux, no chunks. */
cft_fn *cft_jacobian(cft_fn *f, const int *argnums, int nargnums, const cft_jac_options *opt);

/** jax.linearize: evaluate f at primals (outs[nout]) and return in
 *  *jvp_fn its jvp there as a function of the input tangents [nin] ->
 *  output tangents [nout]; calling it evaluates only the linear part (no
 *  primal is computed again). Inputs that are not float or complex take
 *  tangents that are ignored. */
cft_status cft_linearize(cft_fn *f, cft_array *const *primals, cft_array **outs, cft_fn **jvp_fn);
/** jax.linear_transpose: for f linear in its inputs (of avals in_avals),
 *  the function from output cotangents [nout] to input cotangents [nin]. */
cft_fn *cft_linear_transpose(cft_fn *f, const cft_aval *in_avals);

/** Output avals of f at input avals `in`, without running it
 *  (jax.eval_shape); out gets cft_fn_nout(f) avals. */
cft_status cft_eval_shape(cft_fn *f, const cft_aval *in, cft_aval *out);

/** Modes of cft_check_grads. */
enum { CFT_CHECK_FWD = 1, CFT_CHECK_REV = 2 };
/** jax.test_util.check_grads: at inputs x (float; f64 recommended), check
 *  forward mode against central differences (step eps) along a random
 *  direction, and reverse mode against forward mode (the dot-product
 *  test), for every output; order 2 or 3 repeats the checks on the jvp
 *  along a fixed direction. eps, atol, rtol <= 0: 1e-4, 1e-5, 1e-5.
 *  CFT_OK, or an error naming the mode, order, output and numbers. */
cft_status cft_check_grads(cft_fn *f, cft_array *const *x, int order, unsigned modes, double eps,
                           double atol, double rtol);

/** Hessian of f's scalar output with respect to input `argnum`:
 *  jacfwd(jacrev(f)), shape in_shape + in_shape. */
cft_fn *cft_hessian(cft_fn *f, int argnum);
/** Hessian over several argnums (jax.hessian(f, argnums=(...))): output
 *  i*nargnums+j is d^2 f / d in[argnums[i]] d in[argnums[j]], shape
 *  in_i_shape + in_j_shape; opt's chunk_size / memory_budget apply to both
 *  Jacobians (mode, flags and naux are ignored). */
cft_fn *cft_hessian_n(cft_fn *f, const int *argnums, int nargnums, const cft_jac_options *opt);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
