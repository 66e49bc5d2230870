/* Internal: the distributed layer. Only files under src/dist include MPI.
 *
 * One communication thread per process makes every MPI call after
 * cft_dist_init (Open MPI serialises its progress engine across threads, so
 * a blocking call on one thread stalls another's messages by 8-16 ms).
 * Callers enqueue requests; the thread starts each with a non-blocking MPI
 * call, drives them all with MPI_Test, and enforces each one's deadline. */
#ifndef CFT_DIST_INTERNAL_H
#define CFT_DIST_INTERNAL_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cft/dist.h"

#define CFT_DIST_MAX_GROUPS 64

struct cft_dist_group {
    int id;             /* index in the group table (what traced primitives carry) */
    MPI_Comm comm;      /* MPI_COMM_NULL on ranks outside the group */
    int rank, size;     /* in the group */
    int *world;         /* the world ranks of the group's members */
    uint64_t seq;       /* collectives enqueued so far (guarded by the queue lock) */
    _Atomic int failed; /* sticky: a collective timed out or mismatched */
    char err[800];
};

typedef enum {
    REQ_ALLREDUCE,
    REQ_BCAST,
    REQ_ALLGATHER,
    REQ_REDUCE_SCATTER,
    REQ_ALLTOALL,
    REQ_BARRIER,
    REQ_SEND,
    REQ_RECV,
    REQ_PERMUTE, /* send to dst, receive from src (either may be -1) */
} req_kind;

#define SIG 6 /* the debug-mode signature: kind, seq, dtype, count, root, shape hash */

/* A request. GC memory: in flight it is reachable from the engine's static
 * lists, so the buffers it points into stay alive until it completes. */
typedef struct dist_req {
    req_kind kind;
    const char *name; /* the public call, for messages */
    struct cft_dist_group *g;
    uint64_t seq;
    const void *send;
    void *recv;
    int64_t count; /* elements (per rank for gather/scatter/alltoall) */
    MPI_Datatype dt;
    MPI_Op op;
    int peer, peer2, tag; /* root / destination / source */
    int dtype_code;       /* cft dtype, for the debug signature */
    double timeout, t0;
    MPI_Request mr[2];
    int nmr;
    int phase;                 /* 1: exchanging debug signatures */
    int64_t sig[SIG], *allsig; /* kind, seq, dtype, count, root, shape hash; everyone's */
    cft_array *keep[2];        /* the input and output arrays */
    _Atomic int state;         /* 0 queued, 1 running, 2 done, 3 failed */
    char err[768];
    struct dist_req *next;
} dist_req;

/* Start the engine (after MPI_Init) / stop it (before MPI_Finalize). */
int cft__dist_engine_start(void);
void cft__dist_engine_stop(void);
/* Enqueue r (sets seq, t0, state); false if the group has failed. */
bool cft__dist_submit(dist_req *r);
/* Run r to completion: on the calling thread when nothing else is in
 * flight (no hand-off), else through the engine. CFT_OK or the error. */
cft_status cft__dist_run(dist_req *r);
/* A barrier on g under the deadline, named for `call` in its messages:
 * every member has arrived (before a blocking MPI call that has no
 * deadline of its own, such as MPI_Comm_split). */
cft_status cft__dist_arrival(cft_dist_group *g, const char *call);
/* A fault point named op (fault.c): with CFT_FAULT naming it, in a build
 * with CFT_FAULT_INJECTION, this rank kills or stops itself here. */
void cft__fault_point(const char *op);
/* A peer was found dead or stalled (a timed-out collective or RPC): the
 * rendezvous of cft_rpc_shutdown and cft_dist_finalize then wait a short
 * grace, not a whole deadline, so the survivors end soon after. */
void cft__dist_note_peer_failure(void);
/* The wait for a rendezvous at the end: `deadline`, or the grace (0.5 s)
 * if shorter, once a peer failure was seen. */
double cft__dist_end_wait(double deadline);
/* A deadline was set: the end waits its whole deadline again. */
void cft__dist_rearm(void);
/* Wait until the previous checkpoints that saves swapped out are removed
 * (checkpoint/save.c; cft_dist_finalize calls it). */
void cft__ckpt_reap_wait(void);
/* Wait for r; CFT_OK or the error (cft_last_error set, naming r->name). */
cft_status cft__dist_wait(dist_req *r);
/* RPC (src/dist/rpc): the lock every MPI call is made under, and the
 * switch that keeps blocking collectives from holding it while they wait */
void cft__dist_mpi_lock(void);
void cft__dist_mpi_unlock(void);
void cft__dist_set_rpc_active(bool on);
/* Run fn(arg) on the communication thread and wait (group creation). */
void cft__dist_run_on_comm(void (*fn)(void *), void *arg);

/* A collective of device array x (contiguous) on its backend's
 * communicator (device_coll.c), started: 1 with *pend (finish it with
 * cft__dist_device_coll_finish: the result on x's device, shape/ndim as
 * the host path makes it; count elements per rank, as MPI's), -1 with
 * *err, or 0 when the backend has no communicators or the case is the
 * host path's. The deadline runs from the start; a missed one aborts the
 * communicator and fails the group. */
typedef struct cft_dist_dev_pending cft_dist_dev_pending;
int cft__dist_device_coll_start(const char *call, struct cft_dist_group *g, cft_array *x, int kind,
                                cft_dist_op op, int root, const int64_t *shape, int ndim,
                                size_t count, cft_dist_dev_pending **pend, cft_array **err);
cft_array *cft__dist_device_coll_finish(cft_dist_dev_pending *p);
/* whether it has finished (without waiting) */
bool cft__dist_device_coll_done(const cft_dist_dev_pending *p);
/* The group with this id (NULL if none). */
struct cft_dist_group *cft__dist_group_by_id(int id);
/* Error if the layer is not initialised or g is NULL/failed; else NULL. */
cft_array *cft__dist_check(const char *call, const cft_dist_group *g);
/* MPI datatype of a cft dtype for data movement (halves as 16-bit words) */
MPI_Datatype cft__dist_mpi_type(cft_dtype dt);
/* settings */
double cft__dist_timeout(void);
bool cft__dist_debug(void);

/* ddp_prims.c: start a bucket's mean all_reduce (an i64 handle, CFT_PRIM_EARLY,
 * so the jit starts it as soon as the gradients exist) and wait for it */
cft_array *cft__ddp_start(struct cft_dist_group *g, cft_array *const *grads, int k, bool now);
cft_status cft__ddp_wait(cft_array *h, cft_array *const *grads, int k, cft_array **out);
/* the sum over g of v, a fresh contiguous array nobody else holds, in
 * v's own buffer (collectives.c; for DDP's packed buckets); now: run it
 * as a blocking call (done when this returns) */
struct cft_dist_work *cft__dist_sum_in_place(struct cft_dist_group *g, cft_array *v, bool now);
/* point to point on the calling thread, without the engine (a
 * non-blocking send or receive matches any kind of its peer's): start r,
 * and later drive it to its end (deadline included) */
void cft__dist_start_here(dist_req *r);
cft_status cft__dist_finish_here(dist_req *r);
/* a send started on the calling thread (finish: cft__dist_finish_here);
 * NULL with *err on bad arguments */
dist_req *cft__dist_isend(const char *call, struct cft_dist_group *g, cft_array *x, int dst,
                          int tag, cft_array **err);
/* a receive into a fresh *out, started on the calling thread (finish:
 * cft__dist_finish_here, then *out holds the data); NULL with *err */
dist_req *cft__dist_irecv(const char *call, struct cft_dist_group *g, cft_dtype dtype,
                          const int64_t *shape, int ndim, int src, int tag, cft_array **out,
                          cft_array **err);
/* a finished work handle whose wait gives `result` */
struct cft_dist_work *cft__dist_work_done(cft_array *result);
/* v *= s in place (f32 and f64; others untouched) */
void cft__dist_scale(cft_array *v, double s);
/* a bucket's leaves (one dtype) copied into one vector, and back into
 * arrays shaped like `like` (views of v); unpack gives NULL or an error */
cft_array *cft__ddp_pack(cft_array *const *xs, int n);
/* start the mean over g of a bucket: packed and divided by the group size
 * in one pass, then summed in place (f32 / f64; other dtypes: a MEAN
 * all_reduce); now: as a blocking call. *bytes += the bytes sent */
struct cft_dist_work *cft__ddp_mean(struct cft_dist_group *g, cft_array *const *grads, int n,
                                    bool now, double *bytes);
cft_array *cft__ddp_unpack(cft_array *v, cft_array *const *like, int n, cft_array **out);

#endif
