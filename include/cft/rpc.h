/** @file
 * cft/rpc.h: remote procedure calls between the ranks of an MPI job
 * (library cft::dist), as torch.distributed.rpc: every rank is a named
 * worker; functions are registered by name on every worker (never code
 * from the wire) and called on another worker with arrays in and out.
 *
 *     cft_rpc_init(NULL);                      // after cft_dist_init; collective
 *     cft_rpc_register("embed", embed_fn);     // a cft_fn, on every worker
 *     cft_array *out[1];
 *     cft_rpc_sync(1, "embed", 1, (cft_array *[]){ids}, out);
 *     cft_rref *t = cft_rpc_remote(0, "make_table", 0, NULL);   // value stays on worker 0
 *     cft_array *v = cft_rref_to_here(t);
 *     cft_rref_release(t);
 *     cft_rpc_shutdown();                      // collective: serves until all are done
 *
 * Requests travel on their own communicator as a header plus one message
 * per array (no copy on either side); each worker serves requests on a
 * server thread, and a caller waiting for its reply drives MPI itself.
 * Every call has a deadline (CFT_DIST_TIMEOUT, or cft_rpc_set_timeout):
 * a dead or stalled worker gives an error naming the worker, the function
 * and the elapsed time. Errors raised by the remote function come back as
 * error arrays naming the worker and the function. */
#ifndef CFT_RPC_H
#define CFT_RPC_H

/** @addtogroup rpc
 *  @{ */

#include <stdbool.h>

#include "cft/core.h"
#include "cft/fn.h"
#include "cft/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The result of an asynchronous call, to wait for (opaque). */
typedef struct cft_future cft_future;
/** A remote reference: a value owned by one worker (opaque). */
typedef struct cft_rref cft_rref;

/** Start RPC on every rank of the world (collective, after cft_dist_init):
 *  this worker is named `name` (NULL: "worker<rank>"); names must differ. */
cft_status cft_rpc_init(const char *name);
/** Graceful stop (collective): keeps serving until every worker has
 *  stopped making calls, then ends the server thread. Within the deadline;
 *  0.5 s once a call or collective of this process timed out (as
 *  cft_dist_finalize): the error then says the others did not stop. */
cft_status cft_rpc_shutdown(void);
/** @{ */
/** Workers: this one's id (its world rank), the count, a worker's name,
 *  the id of a name (-1 if none). */
int cft_rpc_worker_id(void);
int cft_rpc_num_workers(void);
const char *cft_rpc_worker_name(int id);
int cft_rpc_worker_by_name(const char *name);
/** @} */
/** Seconds a call may take (default: CFT_DIST_TIMEOUT, else 300); after
 *  a timeout, also the whole wait of cft_rpc_shutdown again. */
void cft_rpc_set_timeout(double seconds);

/** Register f under `name` on this worker (do it on every worker that may
 *  be called), before or after cft_rpc_init. Replacing a name is allowed.
 *  A call that reaches a worker before it registered the name waits there
 *  for it, up to 2 s (or half the RPC timeout if shorter), so init, then
 *  register, then call works on every worker without a barrier; past that
 *  the call fails with "no such function". A function that keeps state
 *  between calls keeps it in its env (cft_alloc'd memory, so the GC sees
 *  the arrays it holds), guarded by a lock of its own: requests to one
 *  worker are served one at a time, but the function may also be called
 *  locally. Register it as cft_fn_uncached(f): a plain cft_fn is traced
 *  once and replayed, so its callback would not run on later calls, and
 *  reading an input's value (cft_item) while tracing fails the call. */
cft_status cft_rpc_register(const char *name, cft_fn *f);

/** An argument: an array, or an RRef whose value the callee receives (no
 *  copy through the caller: the callee takes it from the owner). */
typedef struct cft_rpc_arg {
    cft_array *array; /**< an array sent with the call, or NULL */
    cft_rref *rref;   /**< else an RRef whose value the callee receives */
} cft_rpc_arg;

/** Call `name` on worker `to` with nin arrays; its nout results in out
 *  (error arrays on failure, as the status says). */
cft_status cft_rpc_sync(int to, const char *name, int nin, cft_array *const *in, int nout,
                        cft_array **out);
/** The same, returning at once with a future (never NULL). */
cft_future *cft_rpc_async(int to, const char *name, int nin, cft_array *const *in);
/** cft_rpc_async with arguments that may be RRefs. */
cft_future *cft_rpc_async_args(int to, const char *name, int nin, const cft_rpc_arg *args);
/** Wait for a future (its deadline applies); CFT_OK and its results, or
 *  the error (remote, or the timeout). out may be NULL; nout at most the
 *  function's. Waiting twice is fine. */
cft_status cft_future_wait(cft_future *f, int nout, cft_array **out);
/** Wait for several futures; the first error, if any. */
cft_status cft_future_wait_all(cft_future *const *fs, int n);
/** True once the future has its results (or its error). */
bool cft_future_done(cft_future *f);
/** Run cb(f, arg) once f is done: at once if it is, else on the thread
 *  that completes it (the server thread, or a waiting caller). */
cft_status cft_future_then(cft_future *f, void (*cb)(cft_future *f, void *arg), void *arg);

/** A remote call that transforms understand (inside traced functions, or
 *  eagerly): grad, vjp, jvp, vmap and jit of a function that calls it give
 *  what the single-process function gives. The worker `to` runs the
 *  transformed function (e.g. the vjp of `name` in the backward pass,
 *  recomputing its forward there; vmap of it under vmap). `name` must be
 *  registered on this worker too: shapes are computed here. */
cft_status cft_rpc_call(int to, const char *name, int nin, cft_array *const *in, int nout,
                        cft_array **out);

/** Run `name` on worker `to` and keep its first result there: a reference
 *  to it, returned at once (torch's rpc.remote). */
cft_rref *cft_rpc_remote(int to, const char *name, int nin, cft_array *const *in);
/** The worker that owns the value. */
int cft_rref_owner(const cft_rref *r);
/** True when this worker owns the value. */
bool cft_rref_is_owner(const cft_rref *r);
/** The value, copied here (waits for its creation). */
cft_array *cft_rref_to_here(cft_rref *r);
/** The value on its owner (an error elsewhere). */
cft_array *cft_rref_local_value(cft_rref *r);
/** Drop this reference: the owner frees the value when none is left. */
cft_status cft_rref_release(cft_rref *r);
/** Share r with another worker: the owner counts one more reference now
 *  (a synchronous call), so the value outlives r's release; pass
 *  (cft_rref_owner, cft_rref_id) by any means, and the other worker takes
 *  it with cft_rref_from_fork and releases it when done (PyTorch's fork:
 *  counted at the owner before the reference is in transit). */
cft_status cft_rref_fork(cft_rref *r);
/** The id of r at its owner. */
int64_t cft_rref_id(const cft_rref *r);
/** A reference to RRef `id` owned by `owner`, forked to this worker. */
cft_rref *cft_rref_from_fork(int owner, int64_t id);
/** Values this worker owns that some reference still holds. */
int64_t cft_rpc_owned_count(void);

/* ---- RemoteModule, distributed autograd, distributed optimizer ----
 *
 *     cft_rpc_register_module("embed", cft_nn_linear(64, 128, true)); // every worker
 *     cft_remote_module *rm = cft_remote_module_new(0, "embed", key);  // lives on worker 0
 *     // in the loss: cft_remote_module_forward(rm, x, &h) (traceable)
 *     cft_dist_autograd_ctx *ctx = cft_dist_autograd_ctx_new();
 *     cft_dist_autograd_grad(ctx, loss, in, argnums, n, local_grads);   // remote grads stay
 *     cft_dist_optimizer_step(opt, ctx);                               // ... and are applied there
 *     cft_dist_autograd_release(ctx);
 */
/** A module whose parameters live on another worker (opaque). */
typedef struct cft_remote_module cft_remote_module;
/** A distributed autograd context: gradients kept where they are (opaque). */
typedef struct cft_dist_autograd_ctx cft_dist_autograd_ctx;
/** An optimizer over parameters on several workers (opaque). */
typedef struct cft_dist_optimizer cft_dist_optimizer;

/** Register an nn module description under `name` (on every worker). */
cft_status cft_rpc_register_module(const char *name, const cft_module *m);
/** An instance of module `name` made on worker `to` from `key` (its
 *  parameters live there). Never NULL: a failed one makes every later call
 *  on it fail with the reason. */
cft_remote_module *cft_remote_module_new(int to, const char *name, cft_array *key);
/** A handle to instance `index` of module `name` on worker `owner`, made
 *  by another worker (share the index, e.g. with cft_dist_broadcast): the
 *  parameter server's shared model. */
cft_remote_module *cft_remote_module_attach(int owner, const char *name, int64_t index);
/** The instance's index on its owner (-1 for a failed one). */
int64_t cft_remote_module_index(const cft_remote_module *rm);
/** y = module(x) on the owner, as a remote call that transforms understand
 *  (the gradient flows back to x; within cft_dist_autograd_grad the
 *  parameters' gradients are kept on the owner, in the context). */
cft_status cft_remote_module_forward(cft_remote_module *rm, cft_array *x, cft_array **y);
/** The owner of the instance (-1 for a failed one). */
int cft_remote_module_owner(const cft_remote_module *rm);
/** The instance's current parameters, copied here. */
cft_tree *cft_remote_module_parameters(cft_remote_module *rm);

/** RRefs to the instance's parameters, one per leaf of
 *  cft_remote_module_parameters' tree, in its order: each holds the value
 *  the parameter had when it was made (cft arrays are immutable), on the
 *  owner; release them as any RRef. */
cft_status cft_remote_module_parameter_rrefs(cft_remote_module *rm, cft_rref **out);

/** A distributed autograd context (torch.distributed.autograd.context). */
cft_dist_autograd_ctx *cft_dist_autograd_ctx_new(void);
/** cft_grad of loss at in, with respect to argnums (the local inputs),
 *  within ctx: the gradients of remote modules' parameters used by loss are
 *  added to ctx on their owners. */
cft_status cft_dist_autograd_grad(cft_dist_autograd_ctx *ctx, cft_fn *loss, cft_array *const *in,
                                  const int *argnums, int nargnums, cft_array **grads);
/** The gradients ctx holds for a remote module's parameters (zeros if none). */
cft_tree *cft_dist_autograd_get_gradients(cft_dist_autograd_ctx *ctx, cft_remote_module *rm);
/** Forget ctx on every worker. */
cft_status cft_dist_autograd_release(cft_dist_autograd_ctx *ctx);

/** An nn.h optimizer over remote modules' parameters (DistributedOptimizer):
 *  each owner keeps the optimizer state of its instances. */
cft_dist_optimizer *cft_dist_optimizer_new(const cft_optim *o, cft_remote_module *const *mods,
                                           int n);
/** One step on every owner with the gradients ctx holds there (used once). */
cft_status cft_dist_optimizer_step(cft_dist_optimizer *d, cft_dist_autograd_ctx *ctx);

#ifdef __cplusplus
}
#endif

/** @} */

#endif
