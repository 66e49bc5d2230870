/* agent.c: the RPC agent of one worker. Messages go on a communicator of
 * their own: a header (wire.c) with tag REQ or REP, then one message per
 * array with tag REQ_DATA / REP_DATA, sent straight from the arrays and
 * received straight into fresh ones. A header is matched with
 * MPI_Improbe/MPI_Mrecv and its data receives are posted under the same
 * hold of the MPI lock, so a sender's data messages meet their own header's
 * receives in order. The server thread takes requests, runs the registered
 * function and sends the reply; a caller waiting for a reply drives MPI
 * itself (no hand-off on the calling side). Deadlines: every future has
 * one; a late reply to a future that gave up is received and dropped. */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array/array.h"
#include "core/error.h"
#include "core/profile.h"
#include "core/mem.h"
#include "dist/rpc/rpc.h"

enum { TAG_REQ = 1, TAG_REP, TAG_REQ_DATA, TAG_REP_DATA };
#define MAX_FUNCS 256
#define IDLE_SPIN 200e-6 /* the server spins this long after work, then naps */

static MPI_Comm rcomm = MPI_COMM_NULL;
static int me = -1, nworkers;
static char (*names)[RPC_MAX_NAME + 1];
static _Atomic bool active;
static double timeout_s;

/* registry */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char name[RPC_MAX_NAME + 1];
    cft_fn *f;
} funcs[MAX_FUNCS];
static int nfuncs;

/* under the MPI lock; static roots, so the GC keeps what they hold */
/* (sized by their arguments: small GC objects are several times cheaper
 * to allocate than ones of a few KB) */
typedef struct sendq {
    MPI_Request *req;
    int n;
    uint8_t *hdr; /* malloc'd */
    cft_array **keep;
    struct sendq *next;
} sendq;
typedef struct job {
    rpc_header *h; /* malloc'd (no GC pointers, not zeroed): freed when served */
    int src;
    cft_array **args;
    MPI_Request *req;
    int nreq;
    struct job *next;
} job;
static sendq *sending;
#define WAIT_BUCKETS 4096
static cft_future *waiting[WAIT_BUCKETS]; /* futures expecting a reply, by id */
static int64_t nwaiting;
/* requests in arrival order: a job is ready only when it and every job
 * before it have their data (a DELETE must not overtake the REMOTE its
 * sender made first) */
static job *receiving, *receiving_tail, *ready, *ready_tail;
/* done futures with callbacks to run: changed under the MPI lock, read
 * without it as a hint (atomic: another thread may be changing it) */
static cft_future *_Atomic fired;
static uint64_t next_call;
static _Atomic int64_t next_rref;

static pthread_t server;
static _Atomic bool server_stop;
static _Atomic int waiters; /* callers driving MPI for their replies */
/* set on the server thread: while it waits for a reply of its own (an RRef
 * argument fetched from its owner) it keeps serving, or two servers
 * fetching from each other would wait forever */
static _Thread_local bool serving;
static void serve_ready(void);

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static cft_array *not_active(const char *call) {
    if (atomic_load(&active))
        return NULL;
    return cft__fail(CFT_E_ARG, "%s: RPC is not running (cft_rpc_init first)", call);
}

int cft_rpc_worker_id(void) {
    return me;
}
int cft_rpc_num_workers(void) {
    return nworkers;
}
const char *cft_rpc_worker_name(int id) {
    return names && id >= 0 && id < nworkers ? names[id] : NULL;
}
int cft_rpc_worker_by_name(const char *name) {
    for (int i = 0; names && name && i < nworkers; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}
void cft_rpc_set_timeout(double seconds) {
    timeout_s = seconds;
    cft__dist_rearm();
}
static double deadline(void) {
    return timeout_s > 0 ? timeout_s : cft__dist_timeout();
}

cft_status cft_rpc_register(const char *name, cft_fn *f) {
    CFT_API("cft_rpc_register");
    if (!name || !f || !*name || strlen(name) > RPC_MAX_NAME)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_rpc_register: needs a function and a name of 1 to "
                                       "%d bytes",
                                       RPC_MAX_NAME));
    pthread_mutex_lock(&reg_mu);
    int i = 0;
    while (i < nfuncs && strcmp(funcs[i].name, name) != 0)
        i++;
    if (i == MAX_FUNCS) {
        pthread_mutex_unlock(&reg_mu);
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_rpc_register: more than %d functions", MAX_FUNCS));
    }
    snprintf(funcs[i].name, sizeof funcs[i].name, "%s", name);
    funcs[i].f = f;
    if (i == nfuncs)
        nfuncs++;
    pthread_mutex_unlock(&reg_mu);
    cft__rpc_spec_forget(); /* transformed versions of the old one */
    return CFT_OK;
}

cft_fn *cft__rpc_lookup(const char *name) {
    if (!strcmp(name, "__rref_fork"))
        return cft__rref_fork_fn();
    if (!strncmp(name, "__", 2)) /* the remote module service */
        return cft__rpc_module_fn(name);
    cft_fn *f = NULL;
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < nfuncs && !f; i++)
        if (strcmp(funcs[i].name, name) == 0)
            f = funcs[i].f;
    pthread_mutex_unlock(&reg_mu);
    return f;
}

int64_t cft__rpc_new_rref_id(void) {
    return ((int64_t)me << 40) | atomic_fetch_add(&next_rref, 1);
}

/* the fields of a header to send that its encoder reads (the struct is
 * large: zeroing it all cost more than the rest of a small call) */
static void header_init(rpc_header *h, int kind, uint64_t id, int64_t rref, int nargs) {
    h->kind = kind, h->id = id, h->rref = rref, h->nargs = nargs;
    h->name[0] = h->msg[0] = 0;
    h->inline_data = 0, h->data_off = 0;
    for (int i = 0; i < nargs; i++)
        h->arg_rref[i] = -1;
}

/* ---- sending (MPI lock held) ---- */

/* header + arrays (contiguous) to `to`; the sends complete in progress() */
static cft_array *send_locked(int to, int tag, int dtag, rpc_header *h, cft_array *const *xs) {
    sendq *q = CFT_NEW(sendq);
    size_t data = cft__rpc_data_bytes(h);
    h->inline_data = data <= RPC_INLINE_MAX;
    size_t n = cft__rpc_header_size(h), total = n + (h->inline_data ? data : 0);
    int nmsg = h->inline_data ? 1 : 1 + h->nargs;
    uint8_t *buf = q ? malloc(total) : NULL;
    if (q) {
        q->req = CFT_NEWN(MPI_Request, nmsg);
        q->keep = h->inline_data ? NULL : CFT_NEWN(cft_array *, h->nargs + 1);
    }
    if (!buf || !q->req || (!h->inline_data && !q->keep)) {
        free(buf);
        return cft__oom();
    }
    cft__rpc_encode(h, buf, n);
    q->hdr = buf;
    for (int i = 0; h->inline_data && i < h->nargs; i++) /* small: in the one message */
        if (h->arg_rref[i] < 0) {
            size_t bytes = (size_t)cft_array_size(xs[i]) * cft_dtype_size(h->avals[i].dtype);
            memcpy(buf + n, cft__ptr(xs[i]), bytes);
            n += bytes;
        }
    MPI_Isend(buf, (int)total, MPI_BYTE, to, tag, rcomm, &q->req[q->n++]);
    for (int i = 0; !h->inline_data && i < h->nargs; i++) {
        if (h->arg_rref[i] >= 0)
            continue;
        q->keep[i] = xs[i];
        size_t bytes = (size_t)cft_array_size(xs[i]) * cft_dtype_size(h->avals[i].dtype);
        MPI_Isend(cft__ptr(xs[i]), (int)bytes, MPI_BYTE, to, dtag, rcomm, &q->req[q->n++]);
    }
    q->next = sending;
    sending = q;
    return NULL;
}

/* an error reply for call h from src */
static void reply_error(int src, const rpc_header *in, const char *fmt, ...) {
    rpc_header h;
    header_init(&h, RPC_ERROR, in->id, -1, 0);
    int at = snprintf(h.msg, sizeof h.msg, "worker '%.100s' (%d), function '%.100s': ", names[me],
                      me, in->kind == RPC_FETCH ? "(to_here)" : in->name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h.msg + at, sizeof h.msg - (size_t)at, fmt, ap);
    va_end(ap);
    cft__dist_mpi_lock();
    send_locked(src, TAG_REP, TAG_REP_DATA, &h, NULL);
    cft__dist_mpi_unlock();
}

/* ---- receiving (MPI lock held) ---- */

/* the header of a matched message; false (and the message dropped) if the
 * bytes are not a header */
static bool recv_header(MPI_Message *m, MPI_Status *st, rpc_header *h, uint8_t **bytes) {
    int count = 0;
    MPI_Get_count(st, MPI_BYTE, &count);
    uint8_t *buf = malloc(count > 0 ? (size_t)count : 1);
    *bytes = buf;
    if (!buf) {
        MPI_Mrecv(NULL, 0, MPI_BYTE, m, MPI_STATUS_IGNORE); /* truncated: dropped */
        return false;
    }
    MPI_Mrecv(buf, count, MPI_BYTE, m, MPI_STATUS_IGNORE);
    cft_array *e = cft__rpc_decode(buf, (size_t)count, h);
    if (e) {
        free(buf);
        *bytes = NULL;
        fprintf(stderr, "cft_rpc: worker %d dropped a message from rank %d: %s\n", me,
                st->MPI_SOURCE, cft_error_message(e));
        return false;
    }
    return true;
}

/* fresh arrays for h's sent arguments: filled from the header's message
 * (inline data; frees it), or with their receives posted (the count) */
static int post_data(const rpc_header *h, uint8_t *msg, int src, int dtag, cft_array **xs,
                     MPI_Request *req) {
    int n = 0;
    size_t at = h->data_off;
    for (int i = 0; i < h->nargs; i++) {
        if (h->arg_rref[i] >= 0) {
            xs[i] = NULL;
            continue;
        }
        xs[i] = cft__alloc(h->avals[i].dtype, h->avals[i].shape, h->avals[i].ndim);
        if (h->inline_data) { /* decode checked that the bytes are all there */
            size_t bytes = (size_t)cft__numel(h->avals[i].shape, h->avals[i].ndim) *
                           cft_dtype_size(h->avals[i].dtype);
            if (!cft_failed(xs[i]))
                memcpy(cft__ptr(xs[i]), msg + at, bytes);
            at += bytes;
            continue;
        }
        void *p = cft_failed(xs[i]) ? NULL : cft__ptr(xs[i]);
        size_t bytes = p ? (size_t)cft_array_size(xs[i]) * cft_dtype_size(h->avals[i].dtype) : 0;
        /* out of memory: received into nothing (truncated), reported later */
        MPI_Irecv(p, (int)bytes, MPI_BYTE, src, dtag, rcomm, &req[n++]);
    }
    free(msg);
    return n;
}

static cft_future *take_waiting(uint64_t id, int src) {
    for (cft_future **pp = &waiting[id % WAIT_BUCKETS]; *pp; pp = &(*pp)->next)
        if ((*pp)->id == id && (*pp)->to == src) {
            cft_future *f = *pp;
            *pp = f->next;
            nwaiting--;
            return f;
        }
    return NULL;
}

static cft_future *receiving_futures;

static void finish_future(cft_future *f, int state) {
    atomic_store(&f->state, state);
    if (f->ncb) {
        f->next = atomic_load(&fired);
        atomic_store(&fired, f);
    }
}

static void on_reply(MPI_Message *m, MPI_Status *st) {
    rpc_header h;
    uint8_t *msg;
    if (!recv_header(m, st, &h, &msg))
        return;
    cft_future *f = take_waiting(h.id, st->MPI_SOURCE);
    if (!f) { /* it gave up: receive the data anyway, into a throwaway */
        f = CFT_NEW(cft_future);
        if (!f)
            return;
        f->id = h.id, f->to = -1;
    }
    if (h.kind == RPC_ERROR) {
        free(msg);
        f->err = cft__fail(CFT_E_FOREIGN, "%s", h.msg);
        if (f->to >= 0)
            finish_future(f, 3);
        return;
    }
    f->nout = h.nargs;
    f->out = CFT_NEWN(cft_array *, h.nargs + 1);
    f->req = CFT_NEWN(MPI_Request, h.nargs + 1);
    if (!f->out || !f->req) { /* the data are left unreceived: the call fails */
        free(msg);
        f->err = cft__oom();
        if (f->to >= 0)
            finish_future(f, 3);
        return;
    }
    f->nreq = post_data(&h, msg, st->MPI_SOURCE, TAG_REP_DATA, f->out, f->req);
    atomic_store(&f->state, 1);
    f->next = receiving_futures;
    receiving_futures = f;
}

static void on_request(MPI_Message *m, MPI_Status *st) {
    job *j = CFT_NEW(job);
    if (!j) {
        MPI_Mrecv(NULL, 0, MPI_BYTE, m, MPI_STATUS_IGNORE);
        return;
    }
    uint8_t *msg;
    j->h = malloc(sizeof *j->h);
    if (!j->h || !recv_header(m, st, j->h, &msg)) {
        free(j->h);
        return;
    }
    j->src = st->MPI_SOURCE;
    j->args = CFT_NEWN(cft_array *, j->h->nargs + 1);
    j->req = CFT_NEWN(MPI_Request, j->h->nargs + 1);
    if (!j->args || !j->req) {
        free(msg);
        free(j->h);
        return;
    }
    j->nreq = post_data(j->h, msg, j->src, TAG_REQ_DATA, j->args, j->req);
    j->next = NULL;
    if (receiving_tail)
        receiving_tail->next = j;
    else
        receiving = j;
    receiving_tail = j;
}

/* one pass; true if anything moved */
static bool progress_locked(bool serve, bool replies) {
    bool moved = false;
    for (sendq **pp = &sending; *pp;) {
        int done = 0;
        MPI_Testall((*pp)->n, (*pp)->req, &done, MPI_STATUSES_IGNORE);
        if (done) {
            free((*pp)->hdr);
            *pp = (*pp)->next;
            moved = true;
        } else
            pp = &(*pp)->next;
    }
    for (int tag = TAG_REQ; tag <= TAG_REP; tag++) {
        if (tag == TAG_REQ && !serve)
            continue;
        if (tag == TAG_REP && !replies)
            continue;
        for (;;) {
            int flag = 0;
            MPI_Message m;
            MPI_Status st;
            MPI_Improbe(MPI_ANY_SOURCE, tag, rcomm, &flag, &m, &st);
            if (!flag)
                break;
            moved = true;
            if (tag == TAG_REQ)
                on_request(&m, &st);
            else
                on_reply(&m, &st);
        }
    }
    for (cft_future **pp = &receiving_futures; *pp;) {
        cft_future *f = *pp;
        int done = 0;
        MPI_Testall(f->nreq, f->req, &done, MPI_STATUSES_IGNORE);
        if (!done) {
            pp = &f->next;
            continue;
        }
        *pp = f->next;
        moved = true;
        if (f->to < 0)
            continue; /* a throwaway */
        for (int i = 0; i < f->nout; i++)
            if (cft_failed(f->out[i]))
                f->err = f->out[i];
        finish_future(f, f->err ? 3 : 2);
    }
    while (serve && receiving) {
        job *j = receiving;
        int done = 0;
        MPI_Testall(j->nreq, j->req, &done, MPI_STATUSES_IGNORE);
        if (!done)
            break;
        if (!(receiving = j->next))
            receiving_tail = NULL;
        j->next = NULL;
        if (ready_tail)
            ready_tail->next = j;
        else
            ready = j;
        ready_tail = j;
        moved = true;
    }
    return moved;
}

/* the callbacks of futures done since the last call (outside the lock) */
static void run_callbacks(void) {
    cft__dist_mpi_lock();
    cft_future *f = atomic_exchange(&fired, NULL);
    cft__dist_mpi_unlock();
    for (; f; f = f->next)
        for (int i = 0; i < f->ncb; i++)
            f->cb[i](f, f->cb_arg[i]);
}

/* one pass of progress from any thread; serve: also take requests. The
 * server loop takes replies only while no caller waits for one (they are
 * for futures nobody waits on: their callbacks), so it can go idle */
static bool poll_once(bool serve) {
    cft__dist_mpi_lock();
    bool moved = progress_locked(serve, !serve || !atomic_load(&waiters));
    cft__dist_mpi_unlock();
    if (atomic_load_explicit(&fired, memory_order_relaxed))
        run_callbacks();
    return moved;
}

/* ---- serving ---- */

/* argument i of j: sent, or the value of an RRef (here, or fetched) */
static cft_array *resolve(job *j, int i) {
    if (j->h->arg_rref[i] < 0)
        return j->args[i];
    if (j->h->arg_owner[i] == me) {
        cft_array *v = cft__rref_lookup(j->h->arg_rref[i]);
        return v ? v
                 : cft__fail(CFT_E_ARG, "argument %d: RRef %lld is not held here", i,
                             (long long)j->h->arg_rref[i]);
    }
    cft_future *f =
        cft__rpc_request("cft_rpc", RPC_FETCH, j->h->arg_owner[i], "", j->h->arg_rref[i], 0, NULL);
    cft_array *v[1] = {NULL};
    if (cft_future_wait(f, 1, v) != CFT_OK)
        return f->err;
    return v[0];
}

#define REGISTER_GRACE_S 2.0
static void nap(double seconds);
static void serve_job(job *j) {
    rpc_header *h = j->h;
    static const char *const point[] = {"", "rpc_call", "rpc_remote", "rpc_fetch", "rpc_delete"};
    if (h->kind >= RPC_CALL && h->kind <= RPC_DELETE)
        cft__fault_point(point[h->kind]);
    if (h->kind == RPC_DELETE) {
        /* a worker that holds no reference to it cannot drop it (no reply:
         * a DELETE is one-way; CFT_DIST_DEBUG says so) */
        if (!cft__rref_drop(h->rref, j->src) && getenv("CFT_DIST_DEBUG"))
            fprintf(stderr,
                    "cft_rpc: worker %d: a DELETE of RRef %lld from worker %d, which "
                    "holds no reference to it, was refused\n",
                    me, (long long)h->rref, j->src);
        return;
    }
    if (h->kind == RPC_REMOTE && !cft__rref_may_make(h->rref, j->src)) {
        reply_error(j->src, h,
                    "RRef %lld cannot be made by worker %d (another worker's id, or "
                    "one already taken)",
                    (long long)h->rref, j->src);
        return;
    }
    rpc_header r;
    header_init(&r, RPC_REPLY, h->id, -1, 0);
    cft_array *out[RPC_MAX_ARGS] = {0};
    if (h->kind == RPC_FETCH) {
        cft_array *v = cft__rref_lookup(h->rref);
        if (!v) {
            reply_error(j->src, h, "RRef %lld is not held by its owner (released, or never made)",
                        (long long)h->rref);
            return;
        }
        out[0] = v;
        r.nargs = 1;
    } else {
        char why[512];
        cft_fn *f = cft__rpc_spec_fn(h->name, why, sizeof why);
        /* a name not registered here yet: the caller may have raced this
         * worker's cft_rpc_register after init (the order rpc.h shows), so
         * the request waits for it, up to REGISTER_GRACE_S (or half the
         * RPC timeout, if shorter), before it is "no such function" */
        double t0 = now_s(),
               grace = deadline() / 2 < REGISTER_GRACE_S ? deadline() / 2 : REGISTER_GRACE_S;
        while (!f && !strchr(h->name, '/') && strncmp(h->name, "__", 2) &&
               !cft__rpc_lookup(h->name) && now_s() - t0 < grace && !atomic_load(&server_stop)) {
            nap(200e-6);
            f = cft__rpc_spec_fn(h->name, why, sizeof why);
        }
        if (!f) {
            if (!strchr(h->name, '/') && !cft__rpc_lookup(h->name))
                reply_error(j->src, h, "no such function: it is not registered there");
            else
                reply_error(j->src, h, "%s", why);
            return;
        }
        if (cft_fn_nin(f) != h->nargs) {
            reply_error(j->src, h, "called with %d arguments, takes %d", h->nargs, cft_fn_nin(f));
            return;
        }
        cft_array *in[RPC_MAX_ARGS];
        for (int i = 0; i < h->nargs; i++) {
            in[i] = resolve(j, i);
            if (cft_failed(in[i])) {
                reply_error(j->src, h, "%s", cft_error_message(in[i]));
                return;
            }
        }
        int nout = cft_fn_nout(f);
        if (nout > RPC_MAX_ARGS) {
            reply_error(j->src, h, "%d results (at most %d)", nout, RPC_MAX_ARGS);
            return;
        }
        /* a remote module's backward inside a distributed autograd
         * context also accumulates its parameters' gradients there */
        cft_status st = h->kind == RPC_CALL && h->rref >= 0
                            ? cft__rpc_module_call(h->name, h->rref, f, in, out)
                            : cft_fn_call(f, in, out);
        if (st != CFT_OK) {
            reply_error(j->src, h, "%s", cft_last_error_message());
            return;
        }
        for (int i = 0; i < nout; i++) {
            if (cft_failed(out[i])) {
                reply_error(j->src, h, "result %d: %s", i, cft_error_message(out[i]));
                return;
            }
            out[i] = cft__contig(out[i]);
        }
        r.nargs = nout;
        if (h->kind == RPC_REMOTE) { /* kept here; the reply confirms it */
            if (nout < 1) {
                reply_error(j->src, h, "returns nothing to keep");
                return;
            }
            if (!cft__rref_store(h->rref, j->src, out[0])) {
                reply_error(j->src, h, "RRef %lld was taken meanwhile", (long long)h->rref);
                return;
            }
            r.nargs = 0;
        }
    }
    for (int i = 0; i < r.nargs; i++) {
        r.arg_rref[i] = -1;
        r.avals[i] = cft_array_aval(out[i]);
        if ((double)cft_array_size(out[i]) * (double)cft_dtype_size(r.avals[i].dtype) > 2e9) {
            reply_error(j->src, h, "result %d is over 2 GB, more than one message holds", i);
            return;
        }
    }
    cft__dist_mpi_lock();
    cft_array *e = send_locked(j->src, TAG_REP, TAG_REP_DATA, &r, out);
    cft__dist_mpi_unlock();
    if (e)
        reply_error(j->src, h, "%s", cft_error_message(e));
}

static void nap(double seconds) {
    struct timespec ts = {0, (long)(seconds * 1e9)};
    nanosleep(&ts, NULL);
}

/* run the requests received so far, in order; true if there were any */
static bool serve_ready_jobs(void) {
    bool any = false;
    for (;;) {
        cft__dist_mpi_lock();
        job *j = ready;
        if (j && !(ready = j->next))
            ready_tail = NULL;
        cft__dist_mpi_unlock();
        if (!j)
            return any;
        serve_job(j);
        free(j->h);
        j->h = NULL;
        any = true;
    }
}
static void serve_ready(void) {
    serve_ready_jobs();
}

static void *serve(void *arg) {
    (void)arg;
    cft_init(); /* known to the GC: results are allocated here */
    serving = true;
    double last = now_s(), napping = 20e-6;
    while (!atomic_load(&server_stop)) {
        bool moved = poll_once(true);
        moved |= serve_ready_jobs();
        if (moved)
            last = now_s(), napping = 20e-6;
        else if (now_s() - last < IDLE_SPIN)
            ;  /* spin */
        else { /* idle: nap, longer and longer, up to 1 ms */
            nap(napping);
            napping = napping * 2 < 1e-3 ? napping * 2 : 1e-3;
        }
    }
    return NULL;
}

/* ---- the agent's state, for a stall (CFT_DIST_DEBUG, or on a deadline) ---- */

/* One line on stderr: what this worker's agent holds. Printed when a call
 * times out with CFT_DIST_DEBUG set, and by cft__rpc_dump_state. */
void cft__rpc_dump_state(const char *why) {
    cft__dist_mpi_lock();
    int nsend = 0, nrecv = 0, nready = 0, nrecvf = 0, nfired = 0;
    for (sendq *q = sending; q; q = q->next)
        nsend++;
    for (job *j = receiving; j; j = j->next)
        nrecv++;
    for (job *j = ready; j; j = j->next)
        nready++;
    for (cft_future *f = receiving_futures; f; f = f->next)
        nrecvf++;
    for (cft_future *f = atomic_load(&fired); f; f = f->next)
        nfired++;
    int64_t nw = nwaiting;
    uint64_t calls = next_call;
    cft__dist_mpi_unlock();
    fprintf(stderr,
            "cft_rpc: worker %d (%s): agent state (%s): %d sends in flight, %lld calls waiting "
            "for a reply (of %llu made), %d replies receiving data, %d requests receiving data, "
            "%d requests ready to serve, %d futures with callbacks to run, %d callers waiting, "
            "server %s, %lld values owned\n",
            me, me >= 0 && names ? names[me] : "?", why, nsend, (long long)nw,
            (unsigned long long)calls, nrecvf, nrecv, nready, nfired, atomic_load(&waiters),
            atomic_load(&server_stop) ? "stopped" : "running", (long long)cft_rpc_owned_count());
    fflush(stderr);
}

/* ---- calling ---- */

static cft_future *failed_future(cft_array *e) {
    cft_future *f = CFT_NEW(cft_future);
    if (!f)
        f = CFT_NEW(cft_future); /* one more try; NULL only when memory is gone */
    if (f) {
        f->err = e;
        atomic_store(&f->state, 3);
    }
    return f;
}

cft_future *cft__rpc_request(const char *call, int kind, int to, const char *name, int64_t rref,
                             int nin, const cft_rpc_arg *args) {
    cft_array *e = not_active(call);
    if (e)
        return failed_future(e);
    if (to < 0 || to >= nworkers)
        return failed_future(
            cft__fail(CFT_E_ARG, "%s: worker %d does not exist (%d workers)", call, to, nworkers));
    if (!name || strlen(name) > RPC_MAX_NAME)
        return failed_future(
            cft__fail(CFT_E_ARG, "%s: a function name of at most %d bytes", call, RPC_MAX_NAME));
    if (nin < 0 || nin > RPC_MAX_ARGS || (nin > 0 && !args))
        return failed_future(
            cft__fail(CFT_E_ARG, "%s: %d arguments (0 to %d)", call, nin, RPC_MAX_ARGS));
    cft_future *f = CFT_NEW(cft_future);
    if (!f)
        return failed_future(cft__oom());
    rpc_header h;
    header_init(&h, kind, 0, rref, nin);
    snprintf(h.name, sizeof h.name, "%s", name);
    cft_array *xs[RPC_MAX_ARGS] = {0};
    for (int i = 0; i < nin; i++) {
        h.arg_rref[i] = -1;
        if (args[i].rref) {
            cft_rref *r = args[i].rref;
            if (r->released)
                return failed_future(
                    cft__fail(CFT_E_ARG, "%s: argument %d is a released RRef", call, i));
            if (r->created && cft_future_wait(r->created, 0, NULL) != CFT_OK)
                return failed_future(cft__fail(CFT_E_ARG, "%s: argument %d: %s", call, i,
                                               cft_error_message(r->created->err)));
            h.arg_rref[i] = r->id, h.arg_owner[i] = r->owner;
            if (!f->args && !(f->args = CFT_NEWN(cft_rref *, nin)))
                return failed_future(cft__oom());
            f->args[i] = r;
            continue;
        }
        cft_array *x = args[i].array;
        if (!x)
            return failed_future(cft__fail(CFT_E_ARG, "%s: argument %d is NULL", call, i));
        if (cft_failed(x))
            return failed_future(x);
        if (x->kind != CFT_K_CONCRETE)
            return failed_future(cft__fail(CFT_E_TRACE,
                                           "%s: argument %d is a tracer; RPC takes concrete "
                                           "arrays",
                                           call, i));
        xs[i] = cft__contig(x);
        if (cft_failed(xs[i]))
            return failed_future(xs[i]);
        h.avals[i] = cft_array_aval(xs[i]);
        if ((double)cft_array_size(xs[i]) * (double)cft_dtype_size(h.avals[i].dtype) > 2e9)
            return failed_future(cft__fail(
                CFT_E_ARG, "%s: argument %d is over 2 GB, more than one message holds", call, i));
    }
    f->to = to;
    snprintf(f->fname, sizeof f->fname, "%s", kind == RPC_FETCH ? "(to_here)" : name);
    f->timeout = deadline();
    f->t0 = now_s();
    cft__dist_mpi_lock();
    h.id = f->id = ++next_call;
    e = send_locked(to, TAG_REQ, TAG_REQ_DATA, &h, xs);
    if (!e && kind != RPC_DELETE) {
        f->next = waiting[f->id % WAIT_BUCKETS];
        waiting[f->id % WAIT_BUCKETS] = f;
        nwaiting++;
    }
    cft__dist_mpi_unlock();
    if (e)
        return failed_future(e);
    if (kind == RPC_DELETE)
        atomic_store(&f->state, 2);
    return f;
}

/* the distributed autograd context of this thread's calls (-1: none) */
static _Thread_local int64_t current_ctx = -1;
int64_t cft__rpc_set_context(int64_t ctx) {
    int64_t old = current_ctx;
    current_ctx = ctx;
    return old;
}

cft_future *cft_rpc_async_args(int to, const char *name, int nin, const cft_rpc_arg *args) {
    CFT_API("cft_rpc_async");
    return cft__rpc_request("cft_rpc_async", RPC_CALL, to, name, current_ctx, nin, args);
}

cft_future *cft_rpc_async(int to, const char *name, int nin, cft_array *const *in) {
    CFT_API("cft_rpc_async");
    cft_rpc_arg args[RPC_MAX_ARGS];
    if (nin < 0 || nin > RPC_MAX_ARGS || (nin > 0 && !in))
        return failed_future(
            cft__fail(CFT_E_ARG, "cft_rpc_async: %d arguments (0 to %d)", nin, RPC_MAX_ARGS));
    for (int i = 0; i < nin; i++)
        args[i] = (cft_rpc_arg){in[i], NULL};
    return cft__rpc_request("cft_rpc_async", RPC_CALL, to, name, current_ctx, nin, args);
}

bool cft_future_done(cft_future *f) {
    if (!f)
        return true;
    if (atomic_load(&f->state) < 2)
        poll_once(false);
    return atomic_load(&f->state) >= 2;
}

cft_status cft_future_wait(cft_future *f, int nout, cft_array **out) {
    CFT_API("cft_future_wait");
    if (!f)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_future_wait: the future is NULL"));
    atomic_fetch_add(&waiters, 1);
    for (unsigned k = 0; atomic_load(&f->state) < 2; k++) {
        if (serving) { /* the server waiting: replies, and requests too */
            cft__dist_mpi_lock();
            progress_locked(true, true);
            cft__dist_mpi_unlock();
            if (atomic_load_explicit(&fired, memory_order_relaxed))
                run_callbacks();
            serve_ready();
        } else
            poll_once(false);
        if (k % 64 == 0 && atomic_load(&f->state) < 2 && now_s() - f->t0 > f->timeout) {
            cft__dist_mpi_lock();
            bool mine = take_waiting(f->id, f->to) != NULL; /* else the reply is in */
            cft__dist_mpi_unlock();
            if (mine) {
                cft__dist_note_peer_failure();
                if (getenv("CFT_DIST_DEBUG"))
                    cft__rpc_dump_state("a call timed out");
                f->err = cft__fail(CFT_E_FOREIGN,
                                   "cft_future_wait: call of '%s' on worker '%s' (%d) did not "
                                   "complete within %.1f s (CFT_DIST_TIMEOUT): the worker is "
                                   "dead, stalled or busy",
                                   f->fname, names[f->to], f->to, now_s() - f->t0);
                atomic_store(&f->state, 3);
            }
        }
    }
    atomic_fetch_sub(&waiters, 1);
    for (int i = 0; out && i < nout; i++)
        out[i] = f->err        ? f->err
                 : i < f->nout ? f->out[i]
                               : cft__fail(CFT_E_ARG, "cft_future_wait: result %d of %d asked for",
                                           i, f->nout);
    if (f->err)
        return cft__set_last(f->err);
    return nout > f->nout && out ? cft__set_last(out[f->nout]) : CFT_OK;
}

cft_status cft_future_wait_all(cft_future *const *fs, int n) {
    CFT_API("cft_future_wait_all");
    cft_status first = CFT_OK;
    for (int i = 0; i < n; i++) {
        cft_status s = cft_future_wait(fs[i], 0, NULL);
        if (s != CFT_OK && first == CFT_OK)
            first = s;
    }
    return first;
}

cft_status cft_future_then(cft_future *f, void (*cb)(cft_future *, void *), void *arg) {
    CFT_API("cft_future_then");
    if (!f || !cb)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_future_then: NULL future or callback"));
    cft__dist_mpi_lock();
    bool now = atomic_load(&f->state) >= 2;
    if (!now && f->ncb == 4) {
        cft__dist_mpi_unlock();
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_future_then: at most 4 callbacks"));
    }
    if (!now) {
        f->cb[f->ncb] = cb, f->cb_arg[f->ncb] = arg;
        f->ncb++;
    }
    cft__dist_mpi_unlock();
    if (now)
        cb(f, arg);
    return CFT_OK;
}

cft_status cft_rpc_sync(int to, const char *name, int nin, cft_array *const *in, int nout,
                        cft_array **out) {
    CFT_API("cft_rpc_sync");
    if (!cft__prof())
        return cft_future_wait(cft_rpc_async(to, name, nin, in), nout, out);
    double t0 = cft__prof_now(); /* the round trip as one event */
    cft_status st = cft_future_wait(cft_rpc_async(to, name, nin, in), nout, out);
    char ev[160], args[64];
    snprintf(ev, sizeof ev, "rpc %s", name ? name : "?");
    snprintf(args, sizeof args, "\"to\": %d", to);
    cft__prof_event(ev, "rpc", t0, args);
    return st;
}

/* ---- start and stop ---- */

cft_status cft_rpc_init(const char *name) {
    CFT_API("cft_rpc_init");
    if (atomic_load(&active))
        return CFT_OK;
    if (!cft_dist_initialized())
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_rpc_init: the distributed layer is not up (cft_dist_init)"));
    char mine[RPC_MAX_NAME + 1];
    cft_dist_group *w = cft_dist_world();
    me = cft_dist_rank(w), nworkers = cft_dist_size(w);
    if (name && (!*name || strlen(name) > RPC_MAX_NAME))
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_rpc_init: a name of 1 to %d bytes", RPC_MAX_NAME));
    memset(mine, 0, sizeof mine);
    if (name)
        snprintf(mine, sizeof mine, "%s", name);
    else
        snprintf(mine, sizeof mine, "worker%d", me);
    /* everyone's name, through a collective of the world group */
    cft_array *all =
        cft_dist_all_gather(w, cft_from_data(mine, CFT_I32, (int64_t[]){sizeof mine / 4}, 1), true);
    if (cft_failed(all))
        return cft__set_last(all);
    names = malloc(sizeof *names * (size_t)nworkers);
    if (!names)
        return cft__set_last(cft__oom());
    memcpy(names, cft__ptr(all), sizeof *names * (size_t)nworkers);
    for (int i = 0; i < nworkers; i++)
        for (int k = 0; k < i; k++)
            if (strcmp(names[i], names[k]) == 0)
                return cft__set_last(cft__fail(CFT_E_ARG,
                                               "cft_rpc_init: workers %d and %d are both named "
                                               "'%s'",
                                               k, i, names[i]));
    cft__dist_mpi_lock();
    MPI_Comm_dup(MPI_COMM_WORLD, &rcomm);
    cft__dist_mpi_unlock();
    atomic_store(&server_stop, false);
    atomic_store(&active, true);
    cft__dist_set_rpc_active(true);
    if (pthread_create(&server, NULL, serve, NULL) != 0) {
        atomic_store(&active, false);
        cft__dist_set_rpc_active(false);
        return cft__set_last(cft__fail(CFT_E_FOREIGN, "cft_rpc_init: no server thread"));
    }
    return CFT_OK;
}

cft_status cft_rpc_shutdown(void) {
    CFT_API("cft_rpc_shutdown");
    if (!atomic_load(&active))
        return CFT_OK;
    /* my calls first (their replies need the others' servers), then a
     * barrier that every worker reaches only when its calls are done,
     * while the server keeps answering */
    /* the deadline; a short grace once a peer timed out */
    double t0 = now_s(), limit = cft__dist_end_wait(deadline());
    for (;;) {
        cft__dist_mpi_lock();
        bool mine = nwaiting || receiving_futures || sending;
        cft__dist_mpi_unlock();
        if (!mine || now_s() - t0 > limit)
            break;
        if (!poll_once(false))
            sched_yield();
    }
    MPI_Request b;
    cft__dist_mpi_lock();
    MPI_Ibarrier(rcomm, &b);
    cft__dist_mpi_unlock();
    cft_status st = CFT_OK;
    for (int done = 0; !done;) {
        cft__dist_mpi_lock();
        MPI_Test(&b, &done, MPI_STATUS_IGNORE);
        cft__dist_mpi_unlock();
        if (!done && now_s() - t0 > limit) {
            st = cft__set_last(cft__fail(CFT_E_FOREIGN,
                                         "cft_rpc_shutdown: the other workers did not stop "
                                         "within %.1f s",
                                         now_s() - t0));
            break; /* the barrier stays posted: MPI cannot cancel it */
        }
        if (!done) /* the others may take long: nap, not spin */
            nap(1e-4);
    }
    atomic_store(&server_stop, true);
    pthread_join(server, NULL);
    atomic_store(&active, false);
    cft__dist_set_rpc_active(false);
    if (st == CFT_OK) {
        cft__dist_mpi_lock();
        MPI_Comm_free(&rcomm);
        cft__dist_mpi_unlock();
        cft__rref_clear();
    }
    return st;
}
