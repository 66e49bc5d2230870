/* jit_graph.c: a jitted plan on a device as one recorded graph (PyTorch's
 * CUDA graphs, made automatic). Once a plan has run twice on a device
 * whose backend captures, its third call records its steps there: the
 * inputs are first copied into buffers of the graph's own, then the steps
 * run with the backend recording instead of running (cft_backend.
 * begin_capture); every device array allocated meanwhile is kept, since
 * the recording points at its memory. Each call after that copies its
 * inputs into those buffers, replays the recording (launch_graph) and
 * copies the outputs out into fresh arrays: one launch instead of one per
 * kernel and library call. A plan whose capture fails (something ran on
 * the host, or copied to or from it) is not tried again; inputs that are
 * views, on the host or on another device run the plan's steps as usual,
 * and so does a call under another cft_matmul_precision than the
 * recording's (its products were recorded with that precision's math).
 * One call at a time replays a given graph (its buffers are shared).
 * The copies in and out cost what the launches they save cost only while
 * they are small: a recording whose inputs and outputs together exceed
 * CFT_GRAPH_BYTES_PER_STEP (4 MiB) per step of the plan is dropped and the
 * plan runs its steps (per-sample gradients of 1.9 GB were copied out of
 * the graph's buffers on every call: twice the memory traffic of the
 * kernels that wrote them). CFT_DEVICE_GRAPHS=0 turns graphs off,
 * CFT_DEVICE_GRAPHS=always keeps them whatever the bytes. The recording lives as long as
 * the plan: when the collector finds the plan's graph state unreachable,
 * the backend's release_graph is queued (array/device.c's release
 * queue). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/device.h"
#include "core/error.h"
#include "core/mem.h"
#include "lower/lower.h"

struct cft_dev_graph {
    pthread_mutex_t mu;
    const cft_dev *d;
    int state;     /* 0: not tried, 1: recorded, -1: not capturable */
    int precision; /* the cft_matmul_precision it was recorded under */
    void *graph;
    cft_array **in;       /* the recording's inputs */
    cft_array **out;      /* and outputs */
    cft_array **env;      /* the captured run's values */
    cft_dev_capture keep; /* every device array allocated while capturing */
};

static _Thread_local bool capturing;
static pthread_mutex_t make_mu = PTHREAD_MUTEX_INITIALIZER;

bool cft__graph_capturing(void) {
    return capturing;
}

/* 0: off, 1: on (for plans whose copies are small), 2: always */
static int graphs_on(void) {
    static _Atomic int on = -1;
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("CFT_DEVICE_GRAPHS");
        v = e && !strcmp(e, "0") ? 0 : e && !strcmp(e, "always") ? 2 : 1;
        atomic_store_explicit(&on, v, memory_order_relaxed);
    }
    return v;
}

#define CFT_GRAPH_BYTES_PER_STEP ((size_t)4 << 20)

static size_t nbytes(const cft_array *x) {
    return (size_t)cft__numel(x->aval.shape, x->aval.ndim) * cft_dtype_size(x->aval.dtype);
}

/* x's bytes into y (both contiguous on d, same aval), on the device */
static bool dev_copy(const cft_dev *d, cft_array *y, const cft_array *x) {
    size_t n = nbytes(x);
    return !n || d->b->copy(d->b->ctx, d->index, cft__ptr(y), cft__ptr(x), n) == 0;
}

static bool usable(const cft_dev *d, const cft_array *x) {
    return cft__on_device(x) && x->dev == d && !x->conj && cft__is_contig(x);
}

/* records the plan's steps (under g->mu): g->state becomes 1 or -1 */
static void capture(cft_dev_graph *g, const cft_dev_plan *p, cft_dev_steps_fn steps,
                    cft_array *const *in) {
    const cft_dev *d = p->d;
    const cft_ir *ir = p->ir;
    g->state = -1;
    g->in = CFT_NEWN(cft_array *, ir->nin + 1);
    g->out = CFT_NEWN(cft_array *, ir->nout + 1);
    g->env = CFT_NEWN(cft_array *, ir->nvars + 1);
    if (!g->in || !g->out || !g->env)
        return;
    for (int i = 0; i < ir->nin; i++) {
        const cft_aval *a = &in[i]->aval;
        g->in[i] = cft__dev_alloc(d, "cft_jit", a->dtype, a->shape, a->ndim);
        if (cft_failed(g->in[i]) || !dev_copy(d, g->in[i], in[i]))
            return;
    }
    memset(&g->keep, 0, sizeof g->keep);
    if (d->b->begin_capture(d->b->ctx, d->index) != 0)
        return;
    capturing = true;
    cft__dev_capture(&g->keep);
    cft_array *err = steps(p, g->in, g->env);
    cft__dev_capture(NULL);
    capturing = false;
    void *graph = NULL;
    int rc = d->b->end_capture(d->b->ctx, d->index, &graph);
    bool ok = !err && rc == 0 && graph && !g->keep.failed;
    for (int i = 0; i < ir->nout && ok; i++) { /* (views are copied out by a kernel) */
        g->out[i] = g->env[ir->outvars[i]->id];
        ok = cft__on_device(g->out[i]) && g->out[i]->dev == d && !g->out[i]->conj;
    }
    if (!ok) {
        if (graph)
            d->b->release_graph(d->b->ctx, d->index, graph);
        if (cft__debug())
            fprintf(stderr, "cft: a plan's steps on %s are not recorded: %s\n", d->name,
                    err ? cft_error_message(err)
                    : rc && d->b->last_error && d->b->last_error(d->b->ctx)
                        ? d->b->last_error(d->b->ctx)
                        : "an output that is not an array of the device");
        return;
    }
    size_t bytes = 0; /* copied in and out on every replay */
    for (int i = 0; i < ir->nin; i++)
        bytes += nbytes(g->in[i]);
    for (int i = 0; i < ir->nout; i++)
        bytes += nbytes(g->out[i]);
    if (graphs_on() < 2 &&
        bytes > (size_t)(p->nsteps > 0 ? p->nsteps : 1) * CFT_GRAPH_BYTES_PER_STEP) {
        d->b->release_graph(d->b->ctx, d->index, graph);
        if (cft__debug())
            fprintf(stderr,
                    "cft: a plan's steps on %s are not replayed as a graph: %zu bytes to copy "
                    "in and out per call for %d steps\n",
                    d->name, bytes, p->nsteps);
        return;
    }
    g->graph = graph;
    g->state = 1;
}

static void collected(void *obj, void *arg) {
    (void)arg;
    cft_dev_graph *g = obj;
    if (g->state == 1)
        cft__dev_release_graph_later(g->d, g->graph);
}

int cft__graph_run(const cft_dev_plan *p, cft_dev_graph **gp, int runs, cft_dev_steps_fn steps,
                   cft_array *const *in, cft_array **out) {
    const cft_dev *d = p->d;
    const cft_ir *ir = p->ir;
    if (!d->b->launch_graph || capturing || runs < 2 || !graphs_on())
        return 0;
    for (int i = 0; i < ir->nin; i++)
        if (!usable(d, in[i]))
            return 0;
    pthread_mutex_lock(&make_mu);
    cft_dev_graph *g = *gp;
    if (!g && (g = CFT_NEW(cft_dev_graph))) {
        pthread_mutex_init(&g->mu, NULL);
        g->d = d;
        cft__on_collect(g, collected, NULL); /* the recording goes with the plan */
        *gp = g;
    }
    pthread_mutex_unlock(&make_mu);
    if (!g)
        return 0;
    pthread_mutex_lock(&g->mu);
    if (g->state == 0) {
        g->precision = (int)cft_float32_matmul_precision();
        capture(g, p, steps, in);
    }
    if (g->state != 1 || g->precision != (int)cft_float32_matmul_precision()) {
        pthread_mutex_unlock(&g->mu);
        return 0;
    }
    cft_array *err = NULL;
    for (int i = 0; i < ir->nin && !err; i++)
        if (!dev_copy(d, g->in[i], in[i]))
            err = cft__dev_fail(d, "cft_jit", "copying an input into a graph's buffer");
    if (!err && d->b->launch_graph(d->b->ctx, d->index, g->graph) != 0)
        err = cft__dev_fail(d, "cft_jit", "replaying a plan's graph");
    for (int i = 0; i < ir->nout && !err; i++) {
        const cft_aval *a = &g->out[i]->aval;
        if (!cft__is_contig(g->out[i])) { /* a view of the graph's memory */
            if (p->contig(g->out[i], &out[i]) <= 0)
                err = out[i] && cft_failed(out[i])
                          ? out[i]
                          : cft__dev_fail(d, "cft_jit", "copying a view out of a graph's buffer");
            continue;
        }
        out[i] = cft__dev_alloc(d, "cft_jit", a->dtype, a->shape, a->ndim);
        if (cft_failed(out[i]))
            err = out[i];
        else if (!dev_copy(d, out[i], g->out[i]))
            err = cft__dev_fail(d, "cft_jit", "copying an output out of a graph's buffer");
    }
    for (int i = 0; i < ir->nin; i++)
        cft__keep(in[i]);
    pthread_mutex_unlock(&g->mu);
    if (err) {
        for (int i = 0; i < ir->nout; i++)
            out[i] = err;
        return -1;
    }
    return 1;
}
