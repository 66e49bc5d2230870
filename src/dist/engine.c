/* engine.c: the communication thread. Requests arrive on a FIFO (so every
 * rank starts the collectives of a group in the order its program made
 * them); the thread starts each with a non-blocking MPI call and drives all
 * of them with MPI_Test, spinning only while something is in flight and
 * sleeping on a condition variable otherwise. Each request has a deadline
 * (CFT_DIST_TIMEOUT, default 300 s): on expiry the thread reports the
 * collective, its sequence number, the group and the elapsed time, makes
 * the group's error sticky and, unless the program asked for errors
 * (cft_dist_set_abort_on_timeout(false)), aborts the job with MPI_Abort,
 * since MPI 4.1 cannot cancel a collective. With CFT_DIST_DEBUG=detail,
 * every collective first exchanges a signature (kind, sequence number,
 * dtype, count, root) and a mismatch is reported by rank. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array/array.h"
#include "core/error.h"
#include "core/profile.h"
#include "dist/dist.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER; /* the engine waits for requests */
static pthread_cond_t done = PTHREAD_COND_INITIALIZER; /* callers wait for completions */
/* static roots: the GC sees every queued, running and abandoned request */
static dist_req *pending, *pending_tail, *running, *abandoned;
static pthread_t thread;
static bool started, stopping;
static _Atomic int queued;    /* requests submitted and not yet taken by the engine */
static _Atomic int inflight;  /* requests submitted and not finished */
static _Atomic int unstarted; /* requests submitted and not yet started by the engine */
/* whoever calls MPI holds this: the engine, or a caller running a blocking
 * collective itself while the engine is idle (no hand-off to wait for) */
static pthread_mutex_t mpi_mu = PTHREAD_MUTEX_INITIALIZER;

/* Spin this long for a handoff before sleeping on a condition variable: a
 * woken thread pays tens of microseconds on a VM, more than a small
 * collective takes. */
#define SPIN_SECONDS 200e-6
#ifndef WAIT_SPIN
#define WAIT_SPIN 20e-6
#endif

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    void (*fn)(void *);
    void *arg;
    bool done;
} call_on_comm;
static call_on_comm *calls; /* one at a time (guarded by mu) */

static const char *kind_name(req_kind k) {
    static const char *const names[] = {"all_reduce",     "broadcast",  "all_gather",
                                        "reduce_scatter", "all_to_all", "barrier",
                                        "send",           "recv",       "ppermute"};
    return names[k];
}

static void describe_group(const cft_dist_group *g, char *buf, size_t n) {
    size_t k = g->id >= 0 ? (size_t)snprintf(buf, n, "group %d of %d ranks [", g->id, g->size)
                          : (size_t)snprintf(buf, n, "the world's %d ranks [", g->size);
    for (int i = 0; i < g->size && k < n - 16; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%d", i ? "," : "", g->world[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* the collective itself */
static void start_op(dist_req *r) {
    MPI_Comm c = r->g->comm;
    int n = (int)r->count;
    r->nmr = 1;
    switch (r->kind) {
    case REQ_ALLREDUCE:
        MPI_Iallreduce(r->send, r->recv, n, r->dt, r->op, c, &r->mr[0]);
        break;
    case REQ_BCAST:
        MPI_Ibcast(r->recv, n, r->dt, r->peer, c, &r->mr[0]);
        break;
    case REQ_ALLGATHER:
        MPI_Iallgather(r->send, n, r->dt, r->recv, n, r->dt, c, &r->mr[0]);
        break;
    case REQ_REDUCE_SCATTER:
        MPI_Ireduce_scatter_block(r->send, r->recv, n, r->dt, r->op, c, &r->mr[0]);
        break;
    case REQ_ALLTOALL:
        MPI_Ialltoall(r->send, n, r->dt, r->recv, n, r->dt, c, &r->mr[0]);
        break;
    case REQ_BARRIER:
        MPI_Ibarrier(c, &r->mr[0]);
        break;
    case REQ_SEND:
        MPI_Isend(r->send, n, r->dt, r->peer, r->tag, c, &r->mr[0]);
        break;
    case REQ_RECV:
        MPI_Irecv(r->recv, n, r->dt, r->peer, r->tag, c, &r->mr[0]);
        break;
    case REQ_PERMUTE:
        r->nmr = 0;
        if (r->peer >= 0)
            MPI_Isend(r->send, n, r->dt, r->peer, r->tag, c, &r->mr[r->nmr++]);
        if (r->peer2 >= 0)
            MPI_Irecv(r->recv, n, r->dt, r->peer2, r->tag, c, &r->mr[r->nmr++]);
        break;
    }
}

/* debug mode: everyone's signature first */
static void start(dist_req *r) {
    bool point = r->kind == REQ_SEND || r->kind == REQ_RECV || r->kind == REQ_PERMUTE;
    if (cft__dist_debug() && !point) {
        int64_t shape = 0; /* a hash of the input's shape */
        if (r->keep[0])
            for (int d = 0; d < r->keep[0]->aval.ndim; d++)
                shape = shape * 1000003 + r->keep[0]->aval.shape[d] + 1;
        int64_t sig[SIG] = {r->kind, (int64_t)r->seq, r->dtype_code, r->count, r->peer, shape};
        memcpy(r->sig, sig, sizeof sig);
        r->allsig = malloc(sizeof(int64_t) * SIG * (size_t)r->g->size);
        r->phase = 1;
        r->nmr = 1;
        MPI_Iallgather(r->sig, SIG, MPI_INT64_T, r->allsig, SIG, MPI_INT64_T, r->g->comm,
                       &r->mr[0]);
        return;
    }
    start_op(r);
}

/* the signatures agree? else a message naming the first rank that differs */
static bool check_sigs(dist_req *r) {
    const int64_t *s = r->allsig;
    for (int i = 1; i < r->g->size; i++)
        if (memcmp(&s[SIG * i], &s[0], sizeof(int64_t) * SIG) != 0) {
            char gb[160], sig[2][100];
            describe_group(r->g, gb, sizeof gb);
            for (int k = 0; k < 2; k++) {
                const int64_t *t = &s[SIG * (k ? i : 0)];
                snprintf(sig[k], sizeof sig[k], "%s #%lld of %lld %s elements (root %lld%s)",
                         kind_name((req_kind)t[0]), (long long)t[1], (long long)t[3],
                         cft_dtype_name((cft_dtype)t[2]), (long long)t[4],
                         t[5] != s[5] ? ", another shape" : "");
            }
            snprintf(r->err, sizeof r->err,
                     "%s: collective mismatch in %s (CFT_DIST_DEBUG): rank %d calls %s while "
                     "rank 0 calls %s",
                     r->name, gb, i, sig[1], sig[0]);
            return false;
        }
    return true;
}

static void timeout_message(dist_req *r, double now) {
    char gb[200], peer[48] = "";
    describe_group(r->g, gb, sizeof gb);
    cft__dist_note_peer_failure();
    if ((r->kind == REQ_SEND || r->kind == REQ_RECV) && r->peer >= 0 && r->peer < r->g->size)
        snprintf(peer, sizeof peer, " %s rank %d", r->kind == REQ_SEND ? "to" : "from",
                 r->g->world[r->peer]);
    snprintf(r->err, sizeof r->err,
             "%s: rank %d: %s%s #%llu on %s did not complete within %.1f s (CFT_DIST_TIMEOUT; "
             "%.2f s elapsed): a peer is dead or stalled, or called another collective",
             r->name, r->g->world[r->g->rank], kind_name(r->kind), peer, (unsigned long long)r->seq,
             gb, r->timeout, now - r->t0);
}

/* the blocking form of r's operation: MPI's own algorithms for it (Open
 * MPI's tuned collectives beat libnbc's schedules: 3.2 against 4.4 us for
 * a 4 KB all_reduce on two ranks), run by a caller while the engine is
 * idle, under the watchdog */
static void run_blocking(dist_req *r) {
    MPI_Comm c = r->g->comm;
    int n = (int)r->count;
    switch (r->kind) {
    case REQ_ALLREDUCE:
        MPI_Allreduce(r->send, r->recv, n, r->dt, r->op, c);
        break;
    case REQ_BCAST:
        MPI_Bcast(r->recv, n, r->dt, r->peer, c);
        break;
    case REQ_ALLGATHER:
        MPI_Allgather(r->send, n, r->dt, r->recv, n, r->dt, c);
        break;
    case REQ_REDUCE_SCATTER:
        MPI_Reduce_scatter_block(r->send, r->recv, n, r->dt, r->op, c);
        break;
    case REQ_ALLTOALL:
        MPI_Alltoall(r->send, n, r->dt, r->recv, n, r->dt, c);
        break;
    case REQ_BARRIER:
        MPI_Barrier(c);
        break;
    case REQ_SEND:
        MPI_Send(r->send, n, r->dt, r->peer, r->tag, c);
        break;
    case REQ_RECV:
        MPI_Recv(r->recv, n, r->dt, r->peer, r->tag, c, MPI_STATUS_IGNORE);
        break;
    case REQ_PERMUTE:
        MPI_Sendrecv(r->send, n, r->dt, r->peer >= 0 ? r->peer : MPI_PROC_NULL, r->tag, r->recv, n,
                     r->dt, r->peer2 >= 0 ? r->peer2 : MPI_PROC_NULL, r->tag, c, MPI_STATUS_IGNORE);
        break;
    }
}

/* fail r and make its group's error sticky; abort the job unless asked not to */
static void fail_group(dist_req *r) {
    cft_dist_group *g = r->g;
    if (!atomic_exchange(&g->failed, 1))
        snprintf(g->err, sizeof g->err, "%s", r->err);
    fprintf(stderr, "cft_dist: rank %d: %s\n", g->world[g->rank], r->err);
    if (cft_dist_abort_on_timeout()) {
        fprintf(stderr, "cft_dist: aborting the job (cft_dist_set_abort_on_timeout(false) "
                        "returns the error instead)\n");
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, CFT_DIST_ABORT_CODE);
    }
}

/* advance r: -1 started its collective (after the debug check), 0 still
 * running, 2 done, 3 failed (r->err says why); *flag: MPI is done with it.
 * now: seconds() for the deadline check, or 0 to skip it this time */
static int step_req(dist_req *r, double now, int *flag) {
    *flag = 0;
    if (r->nmr > 0)
        MPI_Testall(r->nmr, r->mr, flag, MPI_STATUSES_IGNORE);
    else
        *flag = 1;
    if (*flag && r->phase == 1) {
        r->phase = 0;
        bool ok = check_sigs(r);
        free(r->allsig);
        r->allsig = NULL;
        if (!ok)
            return 3;
        start_op(r);
        return -1;
    }
    if (*flag)
        return 2;
    if (now > 0 && now - r->t0 > r->timeout) { /* now 0: no clock read this time */
        timeout_message(r, now);
        return 3;
    }
    return 0;
}

/* r is over: record the failure, keep what MPI still owns, hand r back */
static void finish(dist_req *r, int result, int flag) {
    if (result == 3) {
        fail_group(r);
        if (r->nmr > 0 && !flag) { /* MPI still owns its buffers: never free them */
            pthread_mutex_lock(&mu);
            r->next = abandoned;
            abandoned = r;
            pthread_mutex_unlock(&mu);
        }
    }
    atomic_fetch_sub(&inflight, 1);
    pthread_mutex_lock(&mu);
    atomic_store(&r->state, result); /* after this the caller owns r */
    pthread_cond_broadcast(&done);
    pthread_mutex_unlock(&mu);
}

/* one pass over the running requests; true if any moved */
static bool progress(void) {
    bool any = false;
    double now = seconds();
    for (dist_req **pp = &running; *pp;) {
        dist_req *r = *pp;
        int flag, result = step_req(r, now, &flag);
        if (result <= 0) {
            any |= result < 0;
            pp = &r->next;
            continue;
        }
        *pp = r->next; /* off the running list */
        finish(r, result, flag);
        any = true;
    }
    return any;
}

static void *engine(void *arg) {
    (void)arg;
    for (;;) {
        if (!running) { /* idle: a short spin for the next request first */
            double t0 = seconds();
            while (!atomic_load(&queued) && seconds() - t0 < SPIN_SECONDS)
                sched_yield();
        }
        pthread_mutex_lock(&mu);
        while (!stopping && !pending && !running && !calls)
            pthread_cond_wait(&work, &mu);
        if (stopping && !pending && !running) {
            pthread_mutex_unlock(&mu);
            return NULL;
        }
        call_on_comm *c = calls;
        dist_req *fresh = pending;
        pending = pending_tail = NULL;
        atomic_store(&queued, 0);
        pthread_mutex_unlock(&mu);
        if (c) { /* a blocking setup call (group creation) */
            pthread_mutex_lock(&mpi_mu);
            c->fn(c->arg);
            pthread_mutex_unlock(&mpi_mu);
            pthread_mutex_lock(&mu);
            c->done = true;
            calls = NULL;
            pthread_cond_broadcast(&done);
            pthread_mutex_unlock(&mu);
        }
        while (fresh) { /* start in submission order, append to running */
            dist_req *r = fresh;
            fresh = r->next;
            r->next = NULL;
            atomic_store(&r->state, 1);
            if (atomic_load(&r->g->failed)) { /* sticky */
                snprintf(r->err, sizeof r->err, "%s: the group failed before: %.600s", r->name,
                         r->g->err);
                atomic_fetch_sub(&inflight, 1);
                atomic_fetch_sub(&unstarted, 1);
                pthread_mutex_lock(&mu);
                atomic_store(&r->state, 3);
                pthread_cond_broadcast(&done);
                pthread_mutex_unlock(&mu);
                continue;
            }
            pthread_mutex_lock(&mpi_mu);
            start(r);
            atomic_fetch_sub(&unstarted, 1);
            pthread_mutex_unlock(&mpi_mu);
            dist_req **tail = &running;
            while (*tail)
                tail = &(*tail)->next;
            *tail = r;
        }
        if (running) {
            pthread_mutex_lock(&mpi_mu);
            bool moved = progress();
            pthread_mutex_unlock(&mpi_mu);
            if (!moved)
                sched_yield();
        }
    }
}

/* The watchdog: a blocking call run by a caller (run_blocking) cannot
 * check its own deadline, so this thread looks at it every WATCH_PERIOD
 * seconds and, once it is past, reports it and aborts the job (the only
 * way out of a blocking MPI call; programs that asked for errors instead
 * never take that path). One atomic store per call, nothing else. */
#define WATCH_PERIOD 0.1
static _Atomic(dist_req *) watched;
static pthread_t watch_thread;
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cv = PTHREAD_COND_INITIALIZER;
static bool watch_stop, watch_started;

static void *watchdog(void *arg) {
    (void)arg;
    pthread_mutex_lock(&watch_mu);
    while (!watch_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(WATCH_PERIOD * 1e9);
        if (ts.tv_nsec >= 1000000000L)
            ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&watch_cv, &watch_mu, &ts);
        dist_req *r = atomic_load(&watched);
        double now = seconds();
        if (r && now - r->t0 > r->timeout) {
            timeout_message(r, now);
            fail_group(r);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, CFT_DIST_ABORT_CODE);
        }
    }
    pthread_mutex_unlock(&watch_mu);
    return NULL;
}

int cft__dist_engine_start(void) {
    stopping = false;
    watch_stop = false;
    if (pthread_create(&thread, NULL, engine, NULL) != 0)
        return -1;
    started = true;
    watch_started = pthread_create(&watch_thread, NULL, watchdog, NULL) == 0;
    if (!watch_started) {
        cft__dist_engine_stop();
        return -1;
    }
    return 0;
}

void cft__dist_engine_stop(void) {
    if (!started)
        return;
    pthread_mutex_lock(&mu);
    stopping = true;
    pthread_cond_broadcast(&work);
    pthread_mutex_unlock(&mu);
    pthread_join(thread, NULL);
    if (watch_started) {
        pthread_mutex_lock(&watch_mu);
        watch_stop = true;
        pthread_cond_signal(&watch_cv);
        pthread_mutex_unlock(&watch_mu);
        pthread_join(watch_thread, NULL);
        watch_started = false;
    }
    started = false;
}

/* number r in its group's order and start its clock (mu held) */
static void stamp(dist_req *r) {
    cft__fault_point(r->name);
    bool coll = r->kind != REQ_SEND && r->kind != REQ_RECV;
    r->seq = coll ? ++r->g->seq : 0;
    r->t0 = seconds();
    if (r->timeout <= 0)
        r->timeout = cft__dist_timeout();
    atomic_fetch_add(&inflight, 1);
}

bool cft__dist_submit(dist_req *r) {
    pthread_mutex_lock(&mu);
    stamp(r);
    atomic_store(&r->state, 0);
    r->next = NULL;
    if (pending_tail)
        pending_tail->next = r;
    else
        pending = r;
    pending_tail = r;
    atomic_store(&queued, 1);
    atomic_fetch_add(&unstarted, 1);
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&mu);
    return true;
}

cft_status cft__dist_wait(dist_req *r) {
    double t0 = seconds(); /* a short spin before sleeping */
    while (atomic_load(&r->state) < 2 && seconds() - t0 < WAIT_SPIN)
        sched_yield();
    pthread_mutex_lock(&mu);
    while (atomic_load(&r->state) < 2)
        pthread_cond_wait(&done, &mu);
    pthread_mutex_unlock(&mu);
    if (atomic_load(&r->state) == 3)
        return cft__set_last(cft__fail(CFT_E_FOREIGN, "%s", r->err));
    return CFT_OK;
}

/* MPI's blocking call for r on this thread (the same on every rank, since
 * the choice depends only on the call and on settings all ranks share),
 * once every request submitted before it has been started: MPI matches
 * collectives by the order each rank calls them. Requests already in
 * flight keep moving, as a blocking MPI call drives the progress engine. */
static cft_status run_blocking_watched(dist_req *r) {
    for (;;) { /* mpi_mu first: nothing submitted after the stamp starts before r */
        pthread_mutex_lock(&mpi_mu);
        pthread_mutex_lock(&mu);
        if (atomic_load(&unstarted) == 0)
            break;
        pthread_mutex_unlock(&mu);
        pthread_mutex_unlock(&mpi_mu);
        sched_yield();
    }
    stamp(r);
    pthread_mutex_unlock(&mu);
    atomic_store(&r->state, 1);
    int result = 2;
    if (atomic_load(&r->g->failed)) {
        snprintf(r->err, sizeof r->err, "%s: the group failed before: %.600s", r->name, r->g->err);
        result = 3;
    } else {
        atomic_store(&watched, r);
        run_blocking(r);
        atomic_store(&watched, NULL);
    }
    pthread_mutex_unlock(&mpi_mu);
    finish(r, result, 1);
    return cft__dist_wait(r);
}

/* RPC serves requests on another thread, which must get at MPI while a
 * collective waits: set by cft_rpc_init / shutdown, on every rank at the
 * same point of its collectives, so the path below is chosen alike */
static _Atomic bool rpc_active;
void cft__dist_set_rpc_active(bool on) {
    atomic_store(&rpc_active, on);
}
void cft__dist_mpi_lock(void) {
    pthread_mutex_lock(&mpi_mu);
}
void cft__dist_mpi_unlock(void) {
    pthread_mutex_unlock(&mpi_mu);
}

static cft_status dist_run(dist_req *r);

cft_status cft__dist_run(dist_req *r) { /* profiled: the collective as an event */
    if (!cft__prof())
        return dist_run(r);
    double t0 = cft__prof_now();
    const char *name = r->name, *kind = kind_name(r->kind);
    int64_t count = r->count;
    cft_status st = dist_run(r);
    char args[96];
    snprintf(args, sizeof args, "\"kind\": \"%s\", \"elements\": %lld", kind, (long long)count);
    cft__prof_event(name, "comm", t0, args);
    return st;
}

static cft_status dist_run(dist_req *r) {
    if (!cft__dist_debug() && cft_dist_abort_on_timeout() && !atomic_load(&rpc_active))
        return run_blocking_watched(r);
    /* errors asked for (or the debug check): non-blocking calls that can be
     * abandoned; on this thread when nothing is queued or running and MPI is
     * free (without two hand-offs), else through the engine */
    if (!atomic_load(&inflight) && pthread_mutex_trylock(&mpi_mu) == 0) {
        if (atomic_load(&inflight) == 0) {
            pthread_mutex_lock(&mu);
            stamp(r);
            pthread_mutex_unlock(&mu);
            atomic_store(&r->state, 1);
            int result, flag = 0;
            if (atomic_load(&r->g->failed)) {
                snprintf(r->err, sizeof r->err, "%s: the group failed before: %.600s", r->name,
                         r->g->err);
                result = 3;
            } else {
                start(r);
                /* the clock only every 64 polls: it costs as much as a poll;
                 * with RPC on, MPI is let go between polls (its server) */
                bool share = atomic_load(&rpc_active);
                for (unsigned k = 0; (result = step_req(r, k % 64 ? 0 : seconds(), &flag)) <= 0;
                     k++)
                    if (share) {
                        pthread_mutex_unlock(&mpi_mu);
                        sched_yield();
                        pthread_mutex_lock(&mpi_mu);
                    }
            }
            pthread_mutex_unlock(&mpi_mu);
            finish(r, result, flag);
            return cft__dist_wait(r);
        }
        pthread_mutex_unlock(&mpi_mu);
    }
    cft__dist_submit(r);
    return cft__dist_wait(r);
}

/* point to point, without the engine: start r here (a non-blocking send or
 * receive matches any kind of its peer's), finish it later here */
void cft__dist_start_here(dist_req *r) {
    pthread_mutex_lock(&mpi_mu);
    pthread_mutex_lock(&mu);
    stamp(r);
    pthread_mutex_unlock(&mu);
    atomic_store(&r->state, 1);
    if (atomic_load(&r->g->failed)) {
        snprintf(r->err, sizeof r->err, "%s: the group failed before: %.600s", r->name, r->g->err);
        r->nmr = -1; /* failed at the start */
    } else
        start_op(r);
    pthread_mutex_unlock(&mpi_mu);
}

cft_status cft__dist_finish_here(dist_req *r) {
    int result, flag = 0;
    if (r->nmr < 0)
        result = 3;
    else
        for (unsigned k = 0;; k++) {
            pthread_mutex_lock(&mpi_mu);
            result = step_req(r, k % 64 ? 0 : seconds(), &flag);
            pthread_mutex_unlock(&mpi_mu);
            if (result > 0)
                break;
            sched_yield();
        }
    finish(r, result, flag);
    return cft__dist_wait(r);
}

void cft__dist_run_on_comm(void (*fn)(void *), void *arg) {
    call_on_comm c = {fn, arg, false};
    pthread_mutex_lock(&mu);
    while (calls)
        pthread_cond_wait(&done, &mu);
    calls = &c;
    pthread_cond_signal(&work);
    while (!c.done)
        pthread_cond_wait(&done, &mu);
    pthread_mutex_unlock(&mu);
}
