/** @file
 * cft/dist.h: process groups and collectives over MPI (library cft::dist).
 *
 * Launch the program with mpirun (or srun); every rank runs the same code:
 *
 *     cft_dist_init(&argc, &argv);
 *     cft_dist_group *world = cft_dist_world();
 *     cft_array *g = cft_dist_all_reduce(world, grad, CFT_DIST_MEAN);
 *     cft_dist_finalize();
 *
 * Asynchronous collectives run on one communication thread per process,
 * non-blocking underneath; a blocking collective called while that thread
 * is idle runs on the caller, as MPI's own blocking call under a watchdog
 * (or non-blocking, when errors are asked for instead of aborts). Every
 * one has a deadline (CFT_DIST_TIMEOUT seconds, default 300).
 * A collective that misses it (a dead or stalled peer, or ranks calling
 * different collectives) is reported with its name, sequence number, group
 * and elapsed time; the group's error becomes sticky and, by default, the
 * job is aborted cleanly (MPI_Abort), since MPI cannot cancel a collective;
 * cft_dist_set_abort_on_timeout(false) returns the error instead.
 * CFT_DIST_DEBUG=detail checks before each collective that all ranks call
 * the same one with the same dtype, size and root, and names the first rank
 * that does not.
 *
 * Collectives on arrays return new arrays (error arrays on failure, as
 * every cft call). Inside traced functions use the primitives (cft_psum,
 * cft_all_gather, ...), which grad, vmap and jit understand. */
#ifndef CFT_DIST_H
#define CFT_DIST_H

/** @addtogroup distributed
 *  @{ */

#include <stdbool.h>

#include "cft/checkpoint.h"
#include "cft/core.h"
#include "cft/fn.h"
#include "cft/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A process group: the ranks of an MPI communicator (opaque). */
typedef struct cft_dist_group cft_dist_group;
/** A collective in flight, started by a *_async call (opaque). */
typedef struct cft_dist_work cft_dist_work;

/** Reductions. MEAN divides the sum by the group size. */
typedef enum cft_dist_op {
    CFT_DIST_SUM = 0,
    CFT_DIST_MEAN,
    CFT_DIST_MAX,
    CFT_DIST_MIN,
    CFT_DIST_PROD
} cft_dist_op;

/** Start the distributed layer (MPI) from the environment mpirun / srun
 *  set; argc/argv may be NULL. Starts the communication thread. Calling it
 *  twice is harmless. */
cft_status cft_dist_init(int *argc, char ***argv);
/** Stop the communication thread and MPI (after the last collective). All
 *  ranks meet first, within the deadline (cft_dist_set_timeout): a rank
 *  that does not come (stalled or dead) gives CFT_E_FOREIGN and MPI is left
 *  unfinalized, since MPI_Finalize would wait for it for ever; the process
 *  should then exit. Once a collective or RPC of this process has timed
 *  out, the meeting waits only 0.5 s (a peer that did not answer then is
 *  taken as gone), unless a deadline was set again after that failure. */
cft_status cft_dist_finalize(void);
/** True between cft_dist_init and cft_dist_finalize. */
bool cft_dist_initialized(void);

/** The group of all ranks; NULL with cft_last_error set before
 *  cft_dist_init or after cft_dist_finalize (every call taking a group
 *  refuses NULL with an error naming itself). */
cft_dist_group *cft_dist_world(void);
/** A sub-group of the given world ranks (increasing or not; no repeats).
 *  Every rank of the world must call it with the same list (like
 *  torch.distributed.new_group); a rank outside it gets a group of which
 *  it is not a member (rank -1), usable only in queries. NULL on error
 *  (cft_last_error). */
cft_dist_group *cft_dist_new_group(const int *ranks, int n);
/** @{ */
/** This process's rank in g (-1 if not a member); the size of g. */
int cft_dist_rank(const cft_dist_group *g);
int cft_dist_size(const cft_dist_group *g);
/** @} */
/** The rank on this node (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID). */
int cft_dist_local_rank(void);

/** Seconds a collective may take before it is a timeout (default: the
 *  environment's CFT_DIST_TIMEOUT, else 300). Called after a timeout, it
 *  also gives cft_dist_finalize / cft_rpc_shutdown their whole deadline
 *  again (a program that expects a slow peer to come). */
void cft_dist_set_timeout(double seconds);
/** The exit status of a job cft aborts (MPI_Abort) after a timeout or a
 *  mismatch: 86, chosen to differ from the shell's and timeout(1)'s codes
 *  (124 was timeout's own: a job cft aborted looked like a killed one). */
#define CFT_DIST_ABORT_CODE 86
/** @{ */
/** On a timeout or mismatch: abort the job (true, the default; exit status
 *  CFT_DIST_ABORT_CODE) or return the error to the caller (and make the
 *  group's error sticky). */
void cft_dist_set_abort_on_timeout(bool abort_job);
bool cft_dist_abort_on_timeout(void);
/** @} */
/** Check before each collective that every rank calls the same one (kind,
 *  sequence number, dtype, size, root), as CFT_DIST_DEBUG=detail does; all
 *  ranks must set it alike. Costs one small all_gather per collective. */
void cft_dist_set_debug(bool on);
/** The group's sticky error (CFT_OK while it is healthy). */
cft_status cft_dist_group_status(const cft_dist_group *g);

/** Element-wise reduction of x over the group; every rank gets the result.
 *  Same shape and dtype on every rank. f16/bf16 reduce in f32; MAX/MIN
 *  reject complex values. */
cft_array *cft_dist_all_reduce(cft_dist_group *g, cft_array *x, cft_dist_op op);
/** cft_dist_all_reduce that may reduce in x's own buffer (in place, as
 *  torch.distributed.all_reduce; JAX's buffer donation): no new buffer,
 *  no copy. x is given up: from this call on it is an error array, and
 *  arrays sharing its buffer (views of it, or the array it views) see the
 *  result. When x has no buffer of its own to give (a strided or broadcast
 *  view, halves, an integer MEAN) this is cft_dist_all_reduce. */
cft_array *cft_dist_all_reduce_donated(cft_dist_group *g, cft_array *x, cft_dist_op op);
/** x of rank `root` on every rank (x gives the shape and dtype elsewhere). */
cft_array *cft_dist_broadcast(cft_dist_group *g, cft_array *x, int root);
/** Every rank's x: stacked along a new leading axis ([size, ...]) when
 *  `stack`, else concatenated along axis 0. */
cft_array *cft_dist_all_gather(cft_dist_group *g, cft_array *x, bool stack);
/** Reduce x over the group and give rank r the r-th of `size` equal blocks
 *  along axis 0 (x's leading dim must divide by the size). */
cft_array *cft_dist_reduce_scatter(cft_dist_group *g, cft_array *x, cft_dist_op op);
/** x's leading axis in `size` blocks: block j goes to rank j; the result
 *  holds the blocks received, in rank order (same shape as x). */
cft_array *cft_dist_all_to_all(cft_dist_group *g, cft_array *x);
/** Wait until every rank of g arrives. */
cft_status cft_dist_barrier(cft_dist_group *g);
/** @{ */
/** Point to point: send x to rank dst of g; receive an array of the given
 *  dtype and shape from rank src. tag >= 0. */
cft_status cft_dist_send(cft_dist_group *g, cft_array *x, int dst, int tag);
cft_array *cft_dist_recv(cft_dist_group *g, cft_dtype dtype, const int64_t *shape, int ndim,
                         int src, int tag);
/** @} */

/** @{ */
/** Asynchronous forms: start the collective and return a handle at once
 *  (never NULL: a failed start gives a handle whose wait fails). */
cft_dist_work *cft_dist_all_reduce_async(cft_dist_group *g, cft_array *x, cft_dist_op op);
cft_dist_work *cft_dist_broadcast_async(cft_dist_group *g, cft_array *x, int root);
cft_dist_work *cft_dist_all_gather_async(cft_dist_group *g, cft_array *x, bool stack);
/** @} */
/** Wait for a handle: the result (an error array on failure). */
cft_array *cft_dist_wait(cft_dist_work *w);
/** True once the work has finished (wait then returns at once). */
bool cft_dist_is_completed(const cft_dist_work *w);

/* ---- collectives inside traced functions (primitives with every rule) ---- */

/** Sum of x over the group (jax.lax.psum). Linear: its jvp is psum of the
 *  tangent and its transpose is psum (JAX's semantics: grad of
 *  psum(f(x)) on each rank is size * f'(x)). Batches elementwise. */
cft_array *cft_psum(cft_array *x, cft_dist_group *g);
/** psum divided by the group size. */
cft_array *cft_pmean(cft_array *x, cft_dist_group *g);
/** All ranks' x stacked along a new leading axis (jax.lax.all_gather);
 *  its transpose is cft_psum_scatter. */
cft_array *cft_all_gather(cft_array *x, cft_dist_group *g);
/** Sum over the group of x [size, ...], rank r keeping block r (shape
 *  x.shape[1:]); jax.lax.psum_scatter. Transpose: cft_all_gather. */
cft_array *cft_psum_scatter(cft_array *x, cft_dist_group *g);
/** Rank r sends x to perm[r] (perm: `size` entries, a permutation, -1 for
 *  none); a rank nobody sends to gets zeros (jax.lax.ppermute). Transpose:
 *  the inverse permutation. Groups of at most 16 ranks. */
cft_array *cft_ppermute(cft_array *x, cft_dist_group *g, const int *perm);

/* ---- DistributedDataParallel (functional) and ZeRO ---- */

/** A bucket of gradients handed to a communication hook: n leaves, in
 *  bucket order, with their names. */
typedef struct cft_ddp_bucket {
    int index;                /**< the bucket's index, from 0 */
    int n;                    /**< number of gradients */
    const char *const *names; /**< their parameter names */
    cft_array *const *grads;  /**< the local gradients */
} cft_ddp_bucket;
/** A communication hook (PyTorch's register_comm_hook): write to out[0..n)
 *  the gradients averaged over the group (or an approximation of them). */
typedef cft_status (*cft_ddp_hook)(void *state, cft_dist_group *g, const cft_ddp_bucket *b,
                                   cft_array **out);

/** DDP's options (zero-initialised: the defaults). */
typedef struct cft_ddp_options {
    double bucket_mb;  /**< bucket capacity in MiB (0: 25, PyTorch's default) */
    bool static_graph; /**< the bucket order is fixed once (always true here) */
    cft_ddp_hook hook; /**< NULL: all_reduce of each bucket, averaged */
    void *hook_state;  /**< passed to hook */
} cft_ddp_options;

/** A DistributedDataParallel wrapper of one loss (opaque, GC-managed). */
typedef struct cft_ddp cft_ddp;
/** DDP over group g for `loss`, a tree function (cft_tree_fn_new over
 *  params' names) of the parameters and nin batch arrays returning the
 *  mean loss of the local batch. Gradients are packed into buckets in
 *  reverse parameter order (as the backward pass produces them). NULL on
 *  error (cft_last_error). */
cft_ddp *cft_ddp_new(cft_dist_group *g, cft_fn *loss, const cft_tree *params,
                     const cft_ddp_options *opt);
/** Rank 0's parameters on every rank (call once before training). */
cft_tree *cft_ddp_broadcast_params(cft_ddp *d, const cft_tree *params);
/** One step: the local loss and gradients of the local batch, plus
 *  `accumulated` (gradients of earlier no_sync steps, or NULL), averaged
 *  over the group through the hook; with no_sync on, nothing is
 *  communicated and the local sum comes back. *loss gets the local loss. */
cft_status cft_ddp_step(cft_ddp *d, const cft_tree *params, cft_array *const *batch,
                        const cft_tree *accumulated, cft_array **loss, cft_tree **grads);
/** Gradient accumulation: skip communication until turned off again. */
void cft_ddp_no_sync(cft_ddp *d, bool no_sync);
/** Bytes this rank has put into collectives for gradients so far. */
double cft_ddp_bytes_sent(const cft_ddp *d);
/** Buckets (after cft_ddp_new). */
int cft_ddp_num_buckets(const cft_ddp *d);

/** @{ */
/** Built-in hooks: the default all_reduce (state NULL), and fp16 / bf16
 *  compression (gradients sent as halves, averaged, cast back). */
cft_status cft_ddp_hook_allreduce(void *state, cft_dist_group *g, const cft_ddp_bucket *b,
                                  cft_array **out);
cft_status cft_ddp_hook_fp16(void *state, cft_dist_group *g, const cft_ddp_bucket *b,
                             cft_array **out);
cft_status cft_ddp_hook_bf16(void *state, cft_dist_group *g, const cft_ddp_bucket *b,
                             cft_array **out);
/** @} */
/** PowerSGD (Vogels et al. 2019) state: rank-r approximation of every
 *  gradient of two or more dims, with error feedback and warm-started Q;
 *  plain all_reduce before `start_iter` steps and for vectors. */
typedef struct cft_powersgd cft_powersgd;
/** PowerSGD state of rank `rank` (the approximation's), plain all_reduce
 *  for the first start_iter steps; seed draws the first Q. */
cft_powersgd *cft_powersgd_new(int rank, int start_iter, uint64_t seed);
/** The PowerSGD hook; state is a cft_powersgd. */
cft_status cft_ddp_hook_powersgd(void *state, cft_dist_group *g, const cft_ddp_bucket *b,
                                 cft_array **out);
/** PowerSGD's bytes sent against what plain all_reduce would have sent. */
double cft_powersgd_bytes(const cft_powersgd *p, double *uncompressed);

/** ZeRO stage 1 (ZeroRedundancyOptimizer): the optimizer state sharded
 *  over g; each rank owns whole parameters (greedy by size), updates them
 *  with `o`, and the updated parameters are broadcast from their owners. */
typedef struct cft_zero cft_zero;
/** ZeRO over g for optimizer o and params' names and shapes (NULL on
 *  error: cft_last_error). */
cft_zero *cft_zero_new(cft_dist_group *g, const cft_optim *o, const cft_tree *params);
/** One step: new parameters (the same on every rank). step, lr as
 *  cft_optim_update. */
cft_status cft_zero_step(cft_zero *z, const cft_tree *grads, const cft_tree *params,
                         cft_array *step, cft_array *lr, cft_tree **new_params);
/** The rank owning parameter i (in params' order). */
int cft_zero_owner(const cft_zero *z, int i);
/** This rank's shard of the optimizer state. */
cft_tree *cft_zero_local_state(const cft_zero *z);
/** The whole optimizer state gathered on rank `to` (consolidate_state_dict);
 *  other ranks get an empty tree. Collective. */
cft_tree *cft_zero_state_dict(cft_zero *z, int to);

/* ---- sharded checkpoints (loading: cft/checkpoint.h, no MPI needed) ---- */

/** A checkpoint save in flight (cft_dist_save_checkpoint_async). */
typedef struct cft_checkpoint_job cft_checkpoint_job;
/** Save every rank's `local` tree into checkpoint directory `dir`
 *  (collective over g; a file system all ranks share): the entries named in
 *  shards are row pieces of global arrays, the others whole values, written
 *  once. Files are written in parallel into <dir>.partial, metadata.json
 *  last, and the directory swapped in for the old one in one step, so an
 *  interrupted save leaves the previous checkpoint loadable. */
cft_status cft_checkpoint_save(cft_dist_group *g, const char *dir, const cft_tree *local,
                               const cft_shard *shards, int nshards);
/** The same, writing on a background thread: returns once the plan is
 *  agreed (collective); the step can go on (arrays are immutable). */
cft_checkpoint_job *cft_checkpoint_save_async(cft_dist_group *g, const char *dir,
                                              const cft_tree *local, const cft_shard *shards,
                                              int nshards);
/** Finish an asynchronous save (collective): commit it, or the error. */
cft_status cft_checkpoint_wait(cft_checkpoint_job *s);

#ifdef __cplusplus
}
#endif

/** @} */

#endif
