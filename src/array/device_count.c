/* device_count.c: what cft asks of a device backend, counted and seen.
 * cft_register_backend keeps the table it is given and registers a table
 * of shims in its place (ctx: the shim's record), so every call cft makes
 * of any backend, the CUDA plugin and a test's own alike, passes here:
 * each is counted per device (kernels, primitives, graph replays, copies
 * each way with bytes, waits, allocations, collectives), and while the
 * profiler records, each is an event on the device's own track
 * ("cuda:0" in the Chrome trace) and a row of the table. A device step
 * (kernel, primitive, graph replay) gets its device time from the
 * backend's markers where it has them (abi 5: CUDA events): one queued
 * before the step and one after, nothing waited for; when the recording
 * stops, the markers are read and each step becomes an event lasting
 * the device time between them, starting at the later of its launch and
 * the end of the previous step on that device (one queue per device, in
 * launch order). A backend without markers is waited for after each step
 * while the profiler records: the event then spans launch and execution
 * (the device's work serialised meanwhile, as with CUDA_LAUNCH_BLOCKING=1). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/device.h"
#include "core/error.h"
#include "core/profile.h"

enum { SLOTS = 16, DEVS = 64, TRACK0 = 1 << 20 };
enum {
    K_KERNELS,
    K_OPS,
    K_GRAPHS,
    K_H2D,
    K_H2D_B,
    K_D2H,
    K_D2H_B,
    K_D2D,
    K_D2D_B,
    K_SYNCS,
    K_ALLOCS,
    K_ALLOC_B,
    K_RELEASES,
    K_COLL,
    K_N
};

typedef struct {
    cft_backend orig; /* the backend's own table */
    int slot;
    _Atomic uint64_t c[DEVS][K_N];
    _Atomic int named[DEVS]; /* its profiler track has a name */
} shim;

static shim shims[SLOTS];
/* this thread is recording a graph (between begin_capture and end_capture):
 * nothing runs, and waiting would end the capture */
static _Thread_local int capturing;

static void bump(shim *s, int dev, int k, uint64_t by) {
    atomic_fetch_add_explicit(&s->c[dev < 0 || dev >= DEVS ? DEVS - 1 : dev][k], by,
                              memory_order_relaxed);
}

static int track(shim *s, int dev) {
    int d = dev < 0 || dev >= DEVS ? DEVS - 1 : dev, tid = TRACK0 + s->slot * DEVS + d;
    if (!atomic_exchange(&s->named[d], 1)) {
        char name[64];
        snprintf(name, sizeof name, "%s:%d", s->orig.name, dev);
        cft__prof_track_name(tid, name);
    }
    return tid;
}

/* device steps bracketed by markers, resolved when the recording stops */
typedef struct {
    shim *s;
    int dev;
    char *name, *args;
    double t0;
    void *m0, *m1;
} pending;
static pthread_mutex_t pend_mu = PTHREAD_MUTEX_INITIALIZER;
static pending *pend;
static size_t npend, cappend;
static double track_end[SLOTS][DEVS]; /* the last resolved step's end, per device */
enum { PEND_MAX = 1 << 14 };          /* resolved early past this many */

/* each pending step's event from its markers' device time */
static void flush_pending(void) {
    pthread_mutex_lock(&pend_mu);
    pending *p = pend;
    size_t n = npend;
    pend = NULL, npend = cappend = 0;
    for (size_t i = 0; i < n; i++) {
        shim *s = p[i].s;
        int d = p[i].dev < 0 || p[i].dev >= DEVS ? DEVS - 1 : p[i].dev;
        double ms = 0;
        bool ok = s->orig.elapsed(s->orig.ctx, p[i].dev, p[i].m0, p[i].m1, &ms) == 0;
        double *end = &track_end[s->slot][d], start = p[i].t0 > *end ? p[i].t0 : *end,
               dur = ok && ms > 0 ? ms * 1e3 : 0;
        *end = start + dur;
        char a[256];
        snprintf(a, sizeof a, "%s%s\"device_us\": %.3f, \"queued_us\": %.3f",
                 p[i].args ? p[i].args : "", p[i].args ? ", " : "", dur, start - p[i].t0);
        cft__prof_event_span(track(s, p[i].dev), p[i].name, "device", start, dur, a);
        s->orig.drop_mark(s->orig.ctx, p[i].dev, p[i].m0);
        s->orig.drop_mark(s->orig.ctx, p[i].dev, p[i].m1);
        free(p[i].name), free(p[i].args);
    }
    pthread_mutex_unlock(&pend_mu);
    free(p);
}

/* a marker before a device step, where the backend has them (not while
 * recording a graph: nothing runs then) */
static void *step_begin(shim *s, int dev) {
    return s->orig.mark && !capturing ? s->orig.mark(s->orig.ctx, dev) : NULL;
}

/* the event of a device step launched at t0: with the marker m0 from
 * step_begin, one more marker after it and the event resolved later;
 * else after waiting for the device */
static void step_event(shim *s, int dev, const char *what, double t0, const char *args, void *m0) {
    void *m1 = m0 ? s->orig.mark(s->orig.ctx, dev) : NULL;
    if (m1) {
        pthread_mutex_lock(&pend_mu);
        bool queued = false;
        if (npend == cappend) {
            size_t c = cappend ? 2 * cappend : 256;
            pending *g = realloc(pend, c * sizeof *g);
            if (g)
                pend = g, cappend = c;
        }
        if (npend < cappend) {
            pend[npend++] = (pending){s, dev, strdup(what), args ? strdup(args) : NULL, t0, m0, m1};
            queued = true;
        }
        bool full = npend >= PEND_MAX;
        pthread_mutex_unlock(&pend_mu);
        if (full)
            flush_pending();
        if (queued)
            return;
        s->orig.drop_mark(s->orig.ctx, dev, m1);
    }
    if (m0)
        s->orig.drop_mark(s->orig.ctx, dev, m0);
    if (!capturing)
        s->orig.synchronize(s->orig.ctx, dev);
    cft__prof_event_on(track(s, dev), what, "device", t0, args);
}

static int sh_count(void *ctx) {
    shim *s = ctx;
    return s->orig.device_count(s->orig.ctx);
}
static void *sh_alloc(void *ctx, int dev, size_t bytes) {
    shim *s = ctx;
    double t0 = cft__prof() ? cft__prof_now() : 0;
    void *p = s->orig.alloc(s->orig.ctx, dev, bytes);
    if (p) /* what the backend gave */
        bump(s, dev, K_ALLOCS, 1), bump(s, dev, K_ALLOC_B, bytes);
    if (t0) {
        char a[48];
        snprintf(a, sizeof a, "\"bytes\": %zu", bytes);
        cft__prof_event_on(track(s, dev), "device: alloc", "device", t0, a);
    }
    return p;
}
static void sh_release(void *ctx, int dev, void *ptr) {
    shim *s = ctx;
    bump(s, dev, K_RELEASES, 1);
    s->orig.release(s->orig.ctx, dev, ptr);
}
static int copy_counted(shim *s, int dev, int k, const char *what, size_t bytes,
                        int (*f)(void *, int, void *, const void *, size_t), void *dst,
                        const void *src) {
    double t0 = cft__prof() ? cft__prof_now() : 0;
    int rc = f(s->orig.ctx, dev, dst, src, bytes);
    bump(s, dev, k, 1), bump(s, dev, k + 1, bytes);
    if (t0) {
        char a[48];
        snprintf(a, sizeof a, "\"bytes\": %zu", bytes);
        cft__prof_event_on(track(s, dev), what, "device", t0, a);
    }
    return rc;
}
static int sh_h2d(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    shim *s = ctx;
    return copy_counted(s, dev, K_H2D, "device: copy to device", bytes, s->orig.to_device, dst,
                        src);
}
static int sh_d2h(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    shim *s = ctx;
    return copy_counted(s, dev, K_D2H, "device: copy to host", bytes, s->orig.to_host, dst, src);
}
static int sh_d2d(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    shim *s = ctx;
    return copy_counted(s, dev, K_D2D, "device: copy on device", bytes, s->orig.copy, dst, src);
}
static int sh_run(void *ctx, int dev, const cft_dev_op *op) {
    shim *s = ctx;
    double t0 = cft__prof() ? cft__prof_now() : 0;
    void *m0 = t0 ? step_begin(s, dev) : NULL;
    int rc = s->orig.run(s->orig.ctx, dev, op);
    bump(s, dev, K_OPS, 1);
    if (t0) {
        char name[96];
        snprintf(name, sizeof name, "device: %s", cft_dev_op_name(op));
        step_event(s, dev, name, t0, NULL, m0);
    }
    return rc;
}
static int sh_sync(void *ctx, int dev) {
    shim *s = ctx;
    double t0 = cft__prof() ? cft__prof_now() : 0;
    int rc = s->orig.synchronize(s->orig.ctx, dev);
    bump(s, dev, K_SYNCS, 1);
    if (t0)
        cft__prof_event_on(track(s, dev), "device: wait", "device", t0, NULL);
    return rc;
}
static const char *sh_last_error(void *ctx) {
    shim *s = ctx;
    return s->orig.last_error ? s->orig.last_error(s->orig.ctx) : NULL;
}
static int sh_kernel(void *ctx, int dev, const cft_dev_kernel *k) {
    shim *s = ctx;
    double t0 = cft__prof() ? cft__prof_now() : 0;
    void *m0 = t0 ? step_begin(s, dev) : NULL;
    int rc = s->orig.run_kernel(s->orig.ctx, dev, k);
    bump(s, dev, K_KERNELS, 1);
    if (t0) {
        char a[96];
        snprintf(a, sizeof a, "\"entry\": \"%.40s\", \"slots\": %lld", k->entry ? k->entry : "",
                 (long long)k->nslot);
        step_event(s, dev, "device: kernel", t0, a, m0);
    }
    return rc;
}
static int sh_begin(void *ctx, int dev) {
    shim *s = ctx;
    int rc = s->orig.begin_capture(s->orig.ctx, dev);
    capturing += rc == 0;
    return rc;
}
static int sh_end(void *ctx, int dev, void **graph) {
    shim *s = ctx;
    capturing -= capturing > 0;
    return s->orig.end_capture(s->orig.ctx, dev, graph);
}
static int sh_launch(void *ctx, int dev, void *graph) {
    shim *s = ctx;
    double t0 = cft__prof() ? cft__prof_now() : 0;
    void *m0 = t0 ? step_begin(s, dev) : NULL;
    int rc = s->orig.launch_graph(s->orig.ctx, dev, graph);
    bump(s, dev, K_GRAPHS, 1);
    if (t0)
        step_event(s, dev, "device: graph replay", t0, NULL, m0);
    return rc;
}
static void sh_release_graph(void *ctx, int dev, void *graph) {
    shim *s = ctx;
    s->orig.release_graph(s->orig.ctx, dev, graph);
}
static int sh_comm_id(void *ctx, void *id, size_t *size) {
    shim *s = ctx;
    return s->orig.comm_id(s->orig.ctx, id, size);
}
static int sh_comm_init(void *ctx, int dev, const void *id, size_t size, int nranks, int rank,
                        void **comm) {
    shim *s = ctx;
    return s->orig.comm_init(s->orig.ctx, dev, id, size, nranks, rank, comm);
}
static int sh_comm_poll(void *ctx, int dev, void *comm) {
    shim *s = ctx;
    return s->orig.comm_poll(s->orig.ctx, dev, comm);
}
static void sh_comm_abort(void *ctx, int dev, void *comm) {
    shim *s = ctx;
    s->orig.comm_abort(s->orig.ctx, dev, comm);
}
static int sh_collective(void *ctx, int dev, void *comm, int kind, const void *send, void *recv,
                         size_t count, cft_dtype dt, int op, int root) {
    shim *s = ctx;
    double t0 = cft__prof() ? cft__prof_now() : 0;
    int rc = s->orig.collective(s->orig.ctx, dev, comm, kind, send, recv, count, dt, op, root);
    bump(s, dev, K_COLL, 1);
    if (t0) /* not waited for: a collective completes with its peers (comm_poll) */
        cft__prof_event_on(track(s, dev), "device: collective", "device", t0, NULL);
    return rc;
}

static void *sh_mark(void *ctx, int dev) {
    shim *s = ctx;
    return s->orig.mark(s->orig.ctx, dev);
}
static int sh_elapsed(void *ctx, int dev, void *from, void *to, double *ms) {
    shim *s = ctx;
    return s->orig.elapsed(s->orig.ctx, dev, from, to, ms);
}
static void sh_drop_mark(void *ctx, int dev, void *m) {
    shim *s = ctx;
    s->orig.drop_mark(s->orig.ctx, dev, m);
}

void cft__dev_wrap(cft_backend *t, int slot) {
    cft__prof_set_flush(flush_pending);
    shim *s = &shims[slot];
    memset(s, 0, sizeof *s);
    s->orig = *t;
    s->slot = slot;
    t->ctx = s;
    t->device_count = sh_count, t->alloc = sh_alloc, t->release = sh_release;
    t->to_device = sh_h2d, t->to_host = sh_d2h, t->copy = sh_d2d, t->run = sh_run;
    t->synchronize = sh_sync, t->last_error = sh_last_error;
    if (t->run_kernel)
        t->run_kernel = sh_kernel;
    if (t->begin_capture)
        t->begin_capture = sh_begin, t->end_capture = sh_end, t->launch_graph = sh_launch,
        t->release_graph = sh_release_graph;
    if (t->comm_id)
        t->comm_id = sh_comm_id, t->comm_init = sh_comm_init, t->comm_poll = sh_comm_poll,
        t->comm_abort = sh_comm_abort, t->collective = sh_collective;
    if (t->mark)
        t->mark = sh_mark, t->elapsed = sh_elapsed, t->drop_mark = sh_drop_mark;
}

cft_status cft_device_counters_of(const cft_dev *d, cft_device_counters *out) {
    CFT_API("cft_device_counters_of");
    if (!d || !out)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_device_counters_of: NULL argument"));
    if (d->err)
        return cft__set_last(d->err);
    memset(out, 0, sizeof *out);
    if (!d->b) /* the host: nothing asked of a backend */
        return CFT_OK;
    const shim *s = d->b->ctx;
    int i = d->index < 0 || d->index >= DEVS ? DEVS - 1 : d->index;
    uint64_t v[K_N];
    for (int k = 0; k < K_N; k++)
        v[k] = atomic_load_explicit(&s->c[i][k], memory_order_relaxed);
    *out = (cft_device_counters){v[K_KERNELS], v[K_OPS],     v[K_GRAPHS],   v[K_H2D],   v[K_H2D_B],
                                 v[K_D2H],     v[K_D2H_B],   v[K_D2D],      v[K_D2D_B], v[K_SYNCS],
                                 v[K_ALLOCS],  v[K_ALLOC_B], v[K_RELEASES], v[K_COLL]};
    return CFT_OK;
}
