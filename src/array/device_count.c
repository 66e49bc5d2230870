/* device_count.c: what cft asks of a device backend, counted and seen.
 * cft_register_backend keeps the table it is given and registers a table
 * of shims in its place (ctx: the shim's record), so every call cft makes
 * of any backend, the CUDA plugin and a test's own alike, passes here:
 * each is counted per device (kernels, primitives, graph replays, copies
 * each way with bytes, waits, allocations, collectives), and while the
 * profiler records, each is an event on the device's own track
 * ("cuda:0" in the Chrome trace) and a row of the table. To give a
 * device step its device time without a backend-specific timer, the
 * profiler waits for the device after each kernel, primitive, replay and
 * collective while it records: the event then spans the launch and the
 * execution (the device's work is serialised meanwhile, as with
 * CUDA_LAUNCH_BLOCKING=1). */
#include <stdatomic.h>
#include <stdio.h>
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

/* the event of a device step from t0, after waiting for the device */
static void step_event(shim *s, int dev, const char *what, double t0, const char *args) {
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
    int rc = s->orig.run(s->orig.ctx, dev, op);
    bump(s, dev, K_OPS, 1);
    if (t0) {
        char name[96];
        snprintf(name, sizeof name, "device: %s", cft_dev_op_name(op));
        step_event(s, dev, name, t0, NULL);
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
    int rc = s->orig.run_kernel(s->orig.ctx, dev, k);
    bump(s, dev, K_KERNELS, 1);
    if (t0) {
        char a[96];
        snprintf(a, sizeof a, "\"entry\": \"%.40s\", \"slots\": %lld", k->entry ? k->entry : "",
                 (long long)k->nslot);
        step_event(s, dev, "device: kernel", t0, a);
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
    int rc = s->orig.launch_graph(s->orig.ctx, dev, graph);
    bump(s, dev, K_GRAPHS, 1);
    if (t0)
        step_event(s, dev, "device: graph replay", t0, NULL);
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

void cft__dev_wrap(cft_backend *t, int slot) {
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
