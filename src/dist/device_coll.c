/* device_coll.c: collectives of device arrays on the device's own
 * communicators (cft_backend.comm_*: NCCL's on cuda), so the data never
 * crosses the host. A group's communicator on a device is made on its
 * first collective there: rank 0's backend writes an id, the group
 * broadcasts it (over MPI, under the group's deadline), and every rank
 * joins without blocking (comm_init), polled until it forms. Each
 * collective is queued on the device and polled until it finishes. A
 * communicator that does not form, or a collective that does not finish,
 * within the group's deadline (cft_dist_set_timeout) is aborted
 * (comm_abort) and fails the group, as a missed MPI deadline does
 * (PyTorch's NCCL watchdog): the error names the call, the device and the
 * wait. Backends without communicators (and views, which would need a
 * copy first) take the host path (collectives.c). */
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "array/array.h"
#include "array/device.h"
#include "cft/ops.h"
#include "core/error.h"
#include "core/mem.h"
#include "dist/dist.h"

/* the communicators: one per (group, device), made on first use */
typedef struct comm_entry {
    const cft_dev *d;
    void *comm;
    struct comm_entry *next;
} comm_entry;
static comm_entry *comms[CFT_DIST_MAX_GROUPS]; /* malloc'd entries: no collected pointers */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* poll c until it is ready (1), failed (-1) or the deadline passed (0) */
static int wait_for(const cft_dev *d, void *c, double deadline) {
    for (;;) {
        int r = d->b->comm_poll(d->b->ctx, d->index, c);
        if (r != 0)
            return r;
        if (now_s() > deadline)
            return 0;
        struct timespec ts = {0, 50000}; /* 50 us */
        nanosleep(&ts, NULL);
    }
}

static const char *backend_says(const cft_dev *d) {
    const char *m = d->b->last_error ? d->b->last_error(d->b->ctx) : NULL;
    return m ? m : "no reason given";
}

/* the group fails for good (a missed deadline), as in the engine */
static cft_array *fail_group(cft_dist_group *g, cft_array *e) {
    if (!atomic_exchange(&g->failed, 1))
        snprintf(g->err, sizeof g->err, "%s", cft_error_message(e));
    fprintf(stderr, "cft_dist: rank %d: %s\n", g->world[g->rank], cft_error_message(e));
    if (cft_dist_abort_on_timeout()) {
        fprintf(stderr, "cft_dist: aborting the job (cft_dist_set_abort_on_timeout(false) "
                        "returns the error instead)\n");
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, CFT_DIST_ABORT_CODE);
    }
    return e;
}

/* g's communicator on d, made now if needed; NULL with *err */
static void *comm_of(const char *call, cft_dist_group *g, const cft_dev *d, cft_array **err) {
    pthread_mutex_lock(&mu);
    comm_entry *e = comms[g->id];
    while (e && e->d != d)
        e = e->next;
    pthread_mutex_unlock(&mu);
    if (e)
        return e->comm;
    /* rank 0's id, to everyone: [its size, its bytes] as int32s */
    enum { W = 1 + CFT_COMM_ID_BYTES / 4 };
    int32_t buf[W] = {0};
    size_t n = CFT_COMM_ID_BYTES;
    if (g->rank == 0 && d->b->comm_id(d->b->ctx, buf + 1, &n) != 0) {
        *err = cft__fail(CFT_E_FOREIGN, "%s: %s: no communicator id: %s", call, d->name,
                         backend_says(d));
        n = 0; /* the others still get the broadcast, and fail alike */
    }
    buf[0] = (int32_t)(g->rank == 0 ? n : 0);
    cft_array *got = cft_dist_broadcast(g, cft_from_i32(buf, (int64_t[]){W}, 1), 0);
    if (cft_failed(got) || cft_copy_to(got, CFT_I32, buf) != CFT_OK) {
        if (!*err)
            *err =
                cft_failed(got) ? got : cft__fail(cft_last_error(), "%s", cft_last_error_message());
        return NULL;
    }
    n = (size_t)buf[0];
    if (*err)
        return NULL;
    if (n == 0 || n > CFT_COMM_ID_BYTES) {
        *err = cft__fail(CFT_E_FOREIGN, "%s: %s: rank 0 made no communicator id", call, d->name);
        return NULL;
    }
    const void *id = buf + 1;
    void *c = NULL;
    double t = cft__dist_timeout();
    if (d->b->comm_init(d->b->ctx, d->index, id, n, g->size, g->rank, &c) != 0 || !c) {
        *err = cft__fail(CFT_E_FOREIGN, "%s: %s: joining the device communicator: %s", call,
                         d->name, backend_says(d));
        return NULL;
    }
    int r = wait_for(d, c, now_s() + t);
    if (r <= 0) {
        cft_array *e2 =
            r < 0 ? cft__fail(CFT_E_FOREIGN, "%s: %s: the device communicator failed: %s", call,
                              d->name, backend_says(d))
                  : cft__fail(CFT_E_FOREIGN,
                              "%s: %s: the device communicator of %d ranks did not form within "
                              "%g s (a peer did not join); aborted",
                              call, d->name, g->size, t);
        d->b->comm_abort(d->b->ctx, d->index, c);
        *err = fail_group(g, e2);
        return NULL;
    }
    comm_entry *ne = calloc(1, sizeof *ne);
    if (!ne) {
        *err = cft__oom();
        return NULL;
    }
    ne->d = d, ne->comm = c;
    pthread_mutex_lock(&mu);
    ne->next = comms[g->id], comms[g->id] = ne;
    pthread_mutex_unlock(&mu);
    return c;
}

/* forget g's communicator on d (aborted) */
static void drop(cft_dist_group *g, const cft_dev *d) {
    pthread_mutex_lock(&mu);
    for (comm_entry **p = &comms[g->id]; *p; p = &(*p)->next)
        if ((*p)->d == d) {
            comm_entry *e = *p;
            *p = e->next;
            free(e);
            break;
        }
    pthread_mutex_unlock(&mu);
}

struct cft_dist_dev_pending {
    const char *call;
    cft_dist_group *g;
    const cft_dev *d;
    void *comm;
    cft_array *x, *out;
    cft_dist_op op;
    double t, deadline;
};

int cft__dist_device_coll_start(const char *call, cft_dist_group *g, cft_array *x, int kind,
                                cft_dist_op op, int root, const int64_t *shape, int ndim,
                                size_t count, cft_dist_dev_pending **pend, cft_array **err) {
    const cft_dev *d = x->dev;
    if (!d->b->collective || !cft__is_contig(x) || x->conj)
        return 0;
    cft_dtype dt = x->aval.dtype;
    if (kind == CFT_COLL_ALL_REDUCE || kind == CFT_COLL_REDUCE_SCATTER) {
        if (dt == CFT_BOOL || cft_dtype_is_complex(dt) ||
            ((dt == CFT_I32 || dt == CFT_I64) && op == CFT_DIST_MEAN))
            return 0; /* the host path's promotions and errors */
    }
    *err = cft__dist_check(call, g);
    if (*err)
        return -1;
    void *c = comm_of(call, g, d, err);
    if (!c)
        return -1;
    cft_array *out = cft__dev_alloc(d, call, dt, shape, ndim);
    cft_dist_dev_pending *p = CFT_NEW(cft_dist_dev_pending);
    if (cft_failed(out) || !p) {
        *err = cft_failed(out) ? out : cft__oom();
        return -1;
    }
    static const int ops[] = {[CFT_DIST_SUM] = CFT_COLL_SUM,
                              [CFT_DIST_MEAN] = CFT_COLL_SUM,
                              [CFT_DIST_MAX] = CFT_COLL_MAX,
                              [CFT_DIST_MIN] = CFT_COLL_MIN,
                              [CFT_DIST_PROD] = CFT_COLL_PROD};
    if (d->b->collective(d->b->ctx, d->index, c, kind, cft__ptr(x), cft__ptr(out), count, dt,
                         ops[op], root) != 0) {
        *err = cft__fail(CFT_E_FOREIGN, "%s: %s: %s", call, d->name, backend_says(d));
        return -1;
    }
    double t = cft__dist_timeout();
    *p = (cft_dist_dev_pending){call, g, d, c, x, out, op, t, now_s() + t};
    *pend = p;
    return 1;
}

bool cft__dist_device_coll_done(const cft_dist_dev_pending *p) {
    return p->d->b->comm_poll(p->d->b->ctx, p->d->index, p->comm) != 0;
}

cft_array *cft__dist_device_coll_finish(cft_dist_dev_pending *p) {
    const cft_dev *d = p->d;
    int r = wait_for(d, p->comm, p->deadline);
    if (r <= 0) {
        cft_array *e2 = r < 0 ? cft__fail(CFT_E_FOREIGN, "%s: %s: the collective failed: %s",
                                          p->call, d->name, backend_says(d))
                              : cft__fail(CFT_E_FOREIGN,
                                          "%s: %s: the collective did not finish within %g s (a "
                                          "peer did not call it); the device communicator is "
                                          "aborted",
                                          p->call, d->name, p->t);
        d->b->comm_abort(d->b->ctx, d->index, p->comm);
        drop(p->g, d);
        return fail_group(p->g, e2);
    }
    cft__keep(p->x);
    return p->op == CFT_DIST_MEAN ? cft_mul_s(p->out, 1.0 / p->g->size) : p->out;
}
