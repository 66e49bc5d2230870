/* Internal: the RPC agent (agent.c) and the RRef owner table (rref.c).
 * Everything the agent keeps is guarded by the MPI lock
 * (cft__dist_mpi_lock), under which every MPI call is made. */
#ifndef CFT_RPC_INTERNAL_H
#define CFT_RPC_INTERNAL_H

#include "cft/rpc.h"
#include "dist/dist.h"
#include "dist/rpc/wire.h"

struct cft_future {
    uint64_t id;
    int to;
    char fname[RPC_MAX_NAME + 1];
    double t0, timeout;
    _Atomic int state; /* 0 sent, 1 receiving results, 2 done, 3 failed */
    int nout;
    cft_array **out;  /* nout results (allocated when the reply comes) */
    MPI_Request *req; /* receives posted for them */
    int nreq;         /* 0: they came inline */
    cft_array *err;
    cft_rref **args; /* RRef arguments, alive until the reply (NULL: none) */
    void (*cb[4])(cft_future *, void *);
    void *cb_arg[4];
    int ncb;
    struct cft_future *next; /* on the agent's waiting list */
};

struct cft_rref {
    int owner;
    int64_t id;
    cft_future *created; /* the creating call (NULL: confirmed, or made here) */
    bool released;
};

/* send a request of kind k to worker `to` with arrays (RRef arguments by
 * reference); returns its future, registered to receive the reply (k that
 * expect none: a finished future) */
cft_future *cft__rpc_request(const char *call, int kind, int to, const char *name, int64_t rref,
                             int nin, const cft_rpc_arg *args);
/* a fresh RRef id, unique over the job (this worker's id in the top bits) */
int64_t cft__rpc_new_rref_id(void);
/* One line on stderr: the agent's queues and counts (a stall's evidence). */
void cft__rpc_dump_state(const char *why);

/* agent.c: the function registered under `name` here (NULL if none) */
cft_fn *cft__rpc_lookup(const char *name);
/* traced.c: the function a spec names, built here (cached until the next
 * registration); NULL with err written when it cannot be */
cft_fn *cft__rpc_spec_fn(const char *spec, char *err, size_t errn);
void cft__rpc_spec_forget(void);

/* this thread's distributed autograd context (-1 none); returns the old */
int64_t cft__rpc_set_context(int64_t ctx);
/* remote_module.c: the functions of the module service ("__new.<name>",
 * "__mod.<i>", "__p.<i>", "__g.<i>", "__step.<i>", "__drop"), NULL if
 * none; and running spec `spec` = f(in) within context ctx (a module's
 * "vjp/__mod.<i>" also adds its parameter gradients to the context) */
cft_fn *cft__rpc_module_fn(const char *name);
cft_status cft__rpc_module_call(const char *spec, int64_t ctx, cft_fn *f, cft_array *const *in,
                                cft_array **out);

/* rref.c: the owner table (under the MPI lock's partner, its own mutex) */
/* Worker src may make RRef id here: it is the id's creator and the id is
 * not taken. */
bool cft__rref_may_make(int64_t id, int src);
/* Keep src's new value under id (false: not src's id, or taken). */
bool cft__rref_store(int64_t id, int src, cft_array *value);
cft_array *cft__rref_lookup(int64_t id); /* NULL if unknown */
/* Drop one of the references worker src may hold (false: it holds none:
 * not the creator's and none forked). */
bool cft__rref_drop(int64_t id, int src);
void cft__rref_clear(void);
/* the owner's side of cft_rref_fork ("__rref_fork") */
cft_fn *cft__rref_fork_fn(void);

#endif
