/* collectives.c: collectives on concrete arrays. The calling thread checks
 * the arguments, makes the input contiguous and allocates the output (GC
 * memory is only ever touched here), then hands raw buffers to the
 * communication thread and waits (or returns a handle). Halves are reduced
 * in f32; MEAN is a SUM scaled after the wait. */
#include <string.h>

#include "array/array.h"
#include "array/device.h"
#include "core/error.h"
#include "core/mem.h"
#include "dist/dist.h"
#include "prims/rules.h"

struct cft_dist_work {
    dist_req *r;
    cft_array *out, *err;
    cft_dist_op op;    /* MEAN: scale after the wait */
    cft_dtype back_to; /* halves: cast the f32 result back */
    int size;
    bool waited;
    cft_array *result;
    const cft_dev *dev;            /* the input's device: the result goes back there */
    cft_dist_dev_pending *devcoll; /* or: a collective running on that device's communicator */
};

static MPI_Op mpi_op(cft_dist_op op) {
    switch (op) {
    case CFT_DIST_MAX:
        return MPI_MAX;
    case CFT_DIST_MIN:
        return MPI_MIN;
    case CFT_DIST_PROD:
        return MPI_PROD;
    default:
        return MPI_SUM;
    }
}

static cft_dist_work *failed_work(cft_array *e) {
    cft_dist_work *w = CFT_NEW(cft_dist_work);
    if (!w)
        return NULL;
    w->err = e;
    w->waited = true;
    w->result = e;
    return w;
}

cft_dist_work *cft__dist_work_done(cft_array *result) {
    return failed_work(result);
}

/* checks shared by every collective; x made contiguous in *xc */
static cft_array *prepare(const char *call, cft_dist_group *g, cft_array *x, cft_array **xc) {
    cft_array *e = cft__dist_check(call, g);
    if (e)
        return e;
    if (!x)
        return cft__fail(CFT_E_ARG, "%s: the array is NULL", call);
    if (cft_failed(x))
        return x;
    if (x->kind != CFT_K_CONCRETE)
        return cft__fail(CFT_E_TRACE,
                         "%s: the array is a tracer; inside a traced function use the "
                         "primitives cft_psum, cft_all_gather, cft_psum_scatter, cft_ppermute",
                         call);
    *xc = cft__contig(x);
    return cft_failed(*xc) ? *xc : NULL;
}

static dist_req *new_req(req_kind k, const char *call, cft_dist_group *g, cft_array *in,
                         cft_array *out, int64_t count) {
    dist_req *r = CFT_NEW(dist_req);
    if (!r)
        return NULL;
    r->kind = k;
    r->name = call;
    r->g = g;
    r->keep[0] = in, r->keep[1] = out;
    r->send = in ? cft__ptr(in) : NULL;
    r->recv = out ? cft__ptr(out) : NULL;
    r->count = count;
    cft_dtype dt = in ? in->aval.dtype : out ? out->aval.dtype : CFT_F32;
    r->dt = cft__dist_mpi_type(dt);
    r->dtype_code = (int)dt;
    return r;
}

/* set by the blocking forms around their async twins: run the request on
 * the calling thread when the engine is idle (cft__dist_run) */
static _Thread_local bool run_now;

/* the blocking form of an asynchronous start: BLOCKING(start(...)) runs the
 * request on this thread when the engine is idle, and waits */
static cft_array *blocking_wait(cft_dist_work *w) {
    run_now = false;
    return cft_dist_wait(w);
}
#define BLOCKING(start) (run_now = true, blocking_wait(start))

/* start r; a work handle whose wait yields out (scaled / cast as asked) */
static cft_dist_work *launch(dist_req *r, cft_array *out, cft_dist_op op, cft_dtype back,
                             int size) {
    cft_dist_work *w = CFT_NEW(cft_dist_work);
    if (!r || !w)
        return failed_work(cft__oom());
    w->r = r, w->out = out, w->op = op, w->back_to = back, w->size = size;
    if (run_now)
        cft__dist_run(r); /* done (or failed) now: the wait reads its state */
    else
        cft__dist_submit(r);
    return w;
}

cft_array *cft_dist_wait(cft_dist_work *w) {
    CFT_API("cft_dist_wait");
    if (!w)
        return cft__fail(CFT_E_ARG, "cft_dist_wait: the handle is NULL");
    if (w->waited)
        return w->result;
    w->waited = true;
    if (w->devcoll)
        return w->result = cft__dist_device_coll_finish(w->devcoll);
    if (cft__dist_wait(w->r) != CFT_OK)
        return w->result = cft__fail(cft_last_error(), "%s", cft_last_error_message());
    cft_array *y = w->out;
    if (w->op == CFT_DIST_MEAN)
        y = cft_mul_s(y, 1.0 / w->size);
    if (w->back_to != y->aval.dtype)
        y = cft_astype(y, w->back_to);
    if (w->dev) /* a device array's collective ran on a host copy: back to its device */
        y = cft_device_put(y, w->dev);
    return w->result = y;
}

/* w's result goes back to the device x lives on (when it does) */
static cft_dist_work *to_dev_of(cft_dist_work *w, const cft_array *x) {
    if (w && !w->waited && cft__on_device(x))
        w->dev = x->dev;
    return w;
}

bool cft_dist_is_completed(const cft_dist_work *w) {
    if (!w || w->waited)
        return true;
    return w->devcoll ? cft__dist_device_coll_done(w->devcoll) : atomic_load(&w->r->state) >= 2;
}

/* an all_reduce's reduction and dtype agree? NULL, else the error */
static cft_array *check_reduction(const char *call, cft_dtype dt, cft_dist_op op) {
    if ((unsigned)op > CFT_DIST_PROD)
        return cft__fail(CFT_E_ARG, "%s: unknown reduction %d", call, (int)op);
    if (dt == CFT_BOOL)
        return cft__fail(CFT_E_DTYPE, "%s: bool arrays do not reduce (cast first)", call);
    if (cft_dtype_is_complex(dt) && (op == CFT_DIST_MAX || op == CFT_DIST_MIN))
        return cft__fail(CFT_E_DTYPE, "%s: complex values are not ordered (MAX/MIN)", call);
    return NULL;
}

/* the collective started on x's device communicator (device_coll.c), as
 * a work handle (cft_dist_wait finishes it); NULL when x is not a device
 * array that has one */
static cft_dist_work *on_device(const char *call, cft_dist_group *g, cft_array *x, int kind,
                                cft_dist_op op, int root, const int64_t *shape, int ndim,
                                int64_t count) {
    if (!g || !x || !cft__on_device(x) || (unsigned)op > CFT_DIST_PROD)
        return NULL;
    cft_dist_dev_pending *pend = NULL;
    cft_array *err = NULL;
    int r = cft__dist_device_coll_start(call, g, x, kind, op, root, shape, ndim, (size_t)count,
                                        &pend, &err);
    if (r <= 0)
        return r < 0 ? failed_work(err) : NULL; /* (a finished handle: its wait gives err) */
    cft_dist_work *w = CFT_NEW(cft_dist_work);
    if (!w)
        return failed_work(cft__oom());
    w->devcoll = pend; /* running: cft_dist_wait finishes it */
    return w;
}

cft_dist_work *cft_dist_all_reduce_async(cft_dist_group *g, cft_array *x, cft_dist_op op) {
    CFT_API("cft_dist_all_reduce");
    const char *call = "cft_dist_all_reduce";
    cft_dist_work *dw = x ? on_device(call, g, x, CFT_COLL_ALL_REDUCE, op, 0, x->aval.shape,
                                      x->aval.ndim, cft_array_size(x))
                          : NULL;
    if (dw)
        return dw;
    cft_array *xc = NULL, *e = prepare(call, g, x, &xc);
    if (e || (e = check_reduction(call, xc->aval.dtype, op)))
        return failed_work(e);
    cft_dtype dt = xc->aval.dtype;
    if ((dt == CFT_I32 || dt == CFT_I64) && op == CFT_DIST_MEAN)
        xc = cft_astype(xc, CFT_F32); /* as torch: a mean is a float */
    if (cft_dtype_is_half(dt))
        xc = cft_astype(xc, CFT_F32);
    cft_array *out = cft__alloc(xc->aval.dtype, xc->aval.shape, xc->aval.ndim);
    if (cft_failed(out))
        return failed_work(out);
    dist_req *r = new_req(REQ_ALLREDUCE, call, g, xc, out, cft_array_size(xc));
    if (r)
        r->op = mpi_op(op);
    return to_dev_of(launch(r, out, op, cft_dtype_is_half(dt) ? dt : out->aval.dtype, g->size), x);
}

cft_array *cft_dist_all_reduce(cft_dist_group *g, cft_array *x, cft_dist_op op) {
    CFT_API("cft_dist_all_reduce");
    return BLOCKING(cft_dist_all_reduce_async(g, x, op));
}

/* the all_reduce of y in its own buffer (MPI_IN_PLACE), as a work handle */
static cft_dist_work *reduce_in_place(const char *call, cft_dist_group *g, cft_array *y,
                                      cft_dist_op op) {
    dist_req *r = new_req(REQ_ALLREDUCE, call, g, y, y, cft_array_size(y));
    if (r) {
        r->send = MPI_IN_PLACE;
        r->op = mpi_op(op);
    }
    return launch(r, y, CFT_DIST_SUM, y->aval.dtype, g->size);
}

cft_dist_work *cft__dist_sum_in_place(cft_dist_group *g, cft_array *v, bool now) {
    run_now = now;
    cft_dist_work *w = reduce_in_place("cft_ddp_step", g, v, CFT_DIST_SUM);
    run_now = false;
    return w;
}

cft_array *cft_dist_all_reduce_donated(cft_dist_group *g, cft_array *x, cft_dist_op op) {
    CFT_API("cft_dist_all_reduce_donated");
    const char *call = "cft_dist_all_reduce_donated";
    cft_array *xc = NULL, *e = prepare(call, g, x, &xc);
    if (e || (e = check_reduction(call, xc->aval.dtype, op)))
        return e;
    cft_dtype dt = xc->aval.dtype;
    bool scaled = op == CFT_DIST_MEAN && dt != CFT_F32 && dt != CFT_F64;
    bool whole = xc == x && x->offset == 0;        /* x's own contiguous buffer */
    if (!whole || cft_dtype_is_half(dt) || scaled) /* no buffer to take over */
        return BLOCKING(cft_dist_all_reduce_async(g, x, op));
    cft_array *y = cft__view(x, x->aval.shape, x->aval.ndim, x->strides, 0);
    if (cft_failed(y))
        return y;
    /* from here on x is the result's buffer: any later use of x is an error */
    x->kind = CFT_K_ERROR;
    x->err_code = CFT_E_ARG;
    x->err_msg = "this array was donated to cft_dist_all_reduce_donated; use its result";
    y = BLOCKING(reduce_in_place(call, g, y, op == CFT_DIST_MEAN ? CFT_DIST_SUM : op));
    if (!cft_failed(y) && op == CFT_DIST_MEAN) /* scaled in place */
        cft__dist_scale(y, 1.0 / g->size);
    return y;
}

void cft__dist_scale(cft_array *v, double s) {
    int64_t n = cft_array_size(v);
    if (v->aval.dtype == CFT_F32)
        for (float *p = cft__ptr(v), *end = p + n; p < end; p++)
            *p *= (float)s;
    else if (v->aval.dtype == CFT_F64)
        for (double *p = cft__ptr(v), *end = p + n; p < end; p++)
            *p *= s;
}

cft_dist_work *cft_dist_broadcast_async(cft_dist_group *g, cft_array *x, int root) {
    CFT_API("cft_dist_broadcast");
    const char *call = "cft_dist_broadcast";
    cft_dist_work *dw = x && g && root >= 0 && root < g->size
                            ? on_device(call, g, x, CFT_COLL_BROADCAST, CFT_DIST_SUM, root,
                                        x->aval.shape, x->aval.ndim, cft_array_size(x))
                            : NULL;
    if (dw)
        return dw;
    cft_array *xc = NULL, *e = prepare(call, g, x, &xc);
    if (e)
        return failed_work(e);
    if (root < 0 || root >= g->size)
        return failed_work(cft__fail(CFT_E_ARG, "%s: root %d not in [0, %d)", call, root, g->size));
    cft_array *out = cft__alloc(xc->aval.dtype, xc->aval.shape, xc->aval.ndim);
    if (cft_failed(out))
        return failed_work(out);
    if (g->rank == root)
        memcpy(cft__ptr(out), cft__ptr(xc),
               (size_t)cft_array_size(xc) * cft_dtype_size(xc->aval.dtype));
    dist_req *r = new_req(REQ_BCAST, call, g, xc, out, cft_array_size(xc));
    if (r)
        r->peer = root;
    return to_dev_of(launch(r, out, CFT_DIST_SUM, out->aval.dtype, g->size), x);
}

cft_array *cft_dist_broadcast(cft_dist_group *g, cft_array *x, int root) {
    CFT_API("cft_dist_broadcast");
    return BLOCKING(cft_dist_broadcast_async(g, x, root));
}

/* all_gather's output shape: [size, x...] (stack) or [size * x0, ...]; false if none */
static bool gather_shape(const cft_aval *a, int size, bool stack, int64_t *shape, int *nd) {
    if ((!stack && a->ndim == 0) || (stack && a->ndim == CFT_MAX_NDIM))
        return false;
    *nd = 0;
    if (stack)
        shape[(*nd)++] = size;
    for (int d = 0; d < a->ndim; d++)
        shape[(*nd)++] = a->shape[d];
    if (!stack)
        shape[0] *= size;
    return true;
}

cft_dist_work *cft_dist_all_gather_async(cft_dist_group *g, cft_array *x, bool stack) {
    CFT_API("cft_dist_all_gather");
    const char *call = "cft_dist_all_gather";
    int64_t gs[CFT_MAX_NDIM];
    int gnd = 0;
    cft_dist_work *dw = x && g && gather_shape(&x->aval, g->size, stack, gs, &gnd)
                            ? on_device(call, g, x, CFT_COLL_ALL_GATHER, CFT_DIST_SUM, 0, gs, gnd,
                                        cft_array_size(x))
                            : NULL;
    if (dw)
        return dw;
    cft_array *xc = NULL, *e = prepare(call, g, x, &xc);
    if (e)
        return failed_work(e);
    const cft_aval *a = &xc->aval;
    if (!stack && a->ndim == 0)
        return failed_work(
            cft__fail(CFT_E_SHAPE, "%s: a scalar cannot be concatenated (stack it)", call));
    if (stack && a->ndim == CFT_MAX_NDIM)
        return failed_work(
            cft__fail(CFT_E_SHAPE, "%s: %d dims leave no room to stack", call, CFT_MAX_NDIM));
    int64_t shape[CFT_MAX_NDIM];
    int nd = 0;
    if (stack)
        shape[nd++] = g->size;
    for (int d = 0; d < a->ndim; d++)
        shape[nd++] = a->shape[d];
    if (!stack)
        shape[0] *= g->size;
    cft_array *out = cft__alloc(a->dtype, shape, nd);
    if (cft_failed(out))
        return failed_work(out);
    return to_dev_of(launch(new_req(REQ_ALLGATHER, call, g, xc, out, cft_array_size(xc)), out,
                            CFT_DIST_SUM, a->dtype, g->size),
                     x);
}

cft_array *cft_dist_all_gather(cft_dist_group *g, cft_array *x, bool stack) {
    CFT_API("cft_dist_all_gather");
    return BLOCKING(cft_dist_all_gather_async(g, x, stack));
}

cft_array *cft_dist_reduce_scatter(cft_dist_group *g, cft_array *x, cft_dist_op op) {
    CFT_API("cft_dist_reduce_scatter");
    const char *call = "cft_dist_reduce_scatter";
    if (x && g && g->size > 0 && x->kind == CFT_K_CONCRETE && x->aval.ndim >= 1 &&
        x->aval.shape[0] % g->size == 0) {
        int64_t rs[CFT_MAX_NDIM];
        memcpy(rs, x->aval.shape, sizeof(int64_t) * (size_t)x->aval.ndim);
        rs[0] /= g->size;
        cft_dist_work *dw = on_device(call, g, x, CFT_COLL_REDUCE_SCATTER, op, 0, rs, x->aval.ndim,
                                      cft_array_size(x) / g->size);
        if (dw)
            return cft_dist_wait(dw);
    }
    cft_array *xc = NULL, *e = prepare(call, g, x, &xc);
    if (e || (e = check_reduction(call, xc->aval.dtype, op)))
        return e;
    const cft_aval *a = &xc->aval;
    if (a->ndim < 1 || a->shape[0] % g->size != 0)
        return cft__fail(CFT_E_SHAPE, "%s: the leading dim of %s does not divide by %d ranks", call,
                         cft__av(a), g->size);
    cft_dtype dt = a->dtype;
    int64_t shape[CFT_MAX_NDIM];
    memcpy(shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    shape[0] /= g->size;
    if (cft_dtype_is_half(dt) || ((dt == CFT_I32 || dt == CFT_I64) && op == CFT_DIST_MEAN))
        xc = cft_astype(xc, CFT_F32);
    cft_array *out = cft__alloc(xc->aval.dtype, shape, a->ndim);
    if (cft_failed(out))
        return out;
    dist_req *r = new_req(REQ_REDUCE_SCATTER, call, g, xc, out, cft_array_size(out));
    if (r)
        r->op = mpi_op(op);
    return BLOCKING(
        to_dev_of(launch(r, out, op, cft_dtype_is_half(dt) ? dt : out->aval.dtype, g->size), x));
}

cft_array *cft_dist_all_to_all(cft_dist_group *g, cft_array *x) {
    CFT_API("cft_dist_all_to_all");
    const char *call = "cft_dist_all_to_all";
    cft_array *xc = NULL, *e = prepare(call, g, x, &xc);
    if (e)
        return e;
    const cft_aval *a = &xc->aval;
    if (a->ndim < 1 || a->shape[0] % g->size != 0)
        return cft__fail(CFT_E_SHAPE, "%s: the leading dim of %s does not divide by %d ranks", call,
                         cft__av(a), g->size);
    cft_array *out = cft__alloc(a->dtype, a->shape, a->ndim);
    if (cft_failed(out))
        return out;
    return BLOCKING(
        to_dev_of(launch(new_req(REQ_ALLTOALL, call, g, xc, out, cft_array_size(xc) / g->size), out,
                         CFT_DIST_SUM, a->dtype, g->size),
                  x));
}

cft_status cft_dist_barrier(cft_dist_group *g) {
    CFT_API("cft_dist_barrier");
    cft_array *e = cft__dist_check("cft_dist_barrier", g);
    if (e)
        return cft__set_last(e);
    dist_req *r = new_req(REQ_BARRIER, "cft_dist_barrier", g, NULL, NULL, 0);
    if (!r)
        return cft__set_last(cft__oom());
    return cft__dist_run(r);
}

cft_status cft__dist_arrival(cft_dist_group *g, const char *call) {
    dist_req *r = new_req(REQ_BARRIER, call, g, NULL, NULL, 0);
    if (!r)
        return cft__set_last(cft__oom());
    return cft__dist_run(r);
}

/* a send request to dst, checked (NULL with *e set on bad arguments) */
static dist_req *send_req(const char *call, cft_dist_group *g, cft_array *x, int dst, int tag,
                          cft_array **e) {
    cft_array *xc = NULL;
    *e = prepare(call, g, x, &xc);
    if (!*e && (dst < 0 || dst >= g->size || tag < 0))
        *e = cft__fail(CFT_E_ARG, "%s: destination %d (group of %d) or tag %d out of range", call,
                       dst, g->size, tag);
    if (*e)
        return NULL;
    dist_req *r = new_req(REQ_SEND, call, g, xc, NULL, cft_array_size(xc));
    if (!r)
        *e = cft__oom();
    else
        r->peer = dst, r->tag = tag;
    return r;
}

cft_status cft_dist_send(cft_dist_group *g, cft_array *x, int dst, int tag) {
    CFT_API("cft_dist_send");
    cft_array *e;
    dist_req *r = send_req("cft_dist_send", g, x, dst, tag, &e);
    return r ? cft__dist_run(r) : cft__set_last(e);
}

dist_req *cft__dist_isend(const char *call, cft_dist_group *g, cft_array *x, int dst, int tag,
                          cft_array **err) {
    dist_req *r = send_req(call, g, x, dst, tag, err);
    if (r)
        cft__dist_start_here(r);
    return r;
}

/* a receive request from src into a fresh *out, checked (NULL with *e) */
static dist_req *recv_req(const char *call, cft_dist_group *g, cft_dtype dtype,
                          const int64_t *shape, int ndim, int src, int tag, cft_array **out,
                          cft_array **e) {
    *e = cft__dist_check(call, g);
    if (!*e && (src < 0 || src >= g->size || tag < 0))
        *e = cft__fail(CFT_E_ARG, "%s: source %d (group of %d) or tag %d out of range", call, src,
                       g->size, tag);
    if (!*e)
        *e = cft__check_size(call, dtype, shape, ndim, NULL, NULL);
    if (*e)
        return NULL;
    *out = cft__alloc(dtype, shape, ndim);
    if (cft_failed(*out)) {
        *e = *out;
        return NULL;
    }
    dist_req *r = new_req(REQ_RECV, call, g, NULL, *out, cft_array_size(*out));
    if (!r) {
        *e = cft__oom();
        return NULL;
    }
    r->peer = src, r->tag = tag;
    return r;
}

cft_array *cft_dist_recv(cft_dist_group *g, cft_dtype dtype, const int64_t *shape, int ndim,
                         int src, int tag) {
    CFT_API("cft_dist_recv");
    cft_array *out = NULL, *e = NULL;
    dist_req *r = recv_req("cft_dist_recv", g, dtype, shape, ndim, src, tag, &out, &e);
    if (!r)
        return e;
    if (cft__dist_run(r) != CFT_OK)
        return cft__fail(cft_last_error(), "%s", cft_last_error_message());
    return out;
}

dist_req *cft__dist_irecv(const char *call, cft_dist_group *g, cft_dtype dtype,
                          const int64_t *shape, int ndim, int src, int tag, cft_array **out,
                          cft_array **err) {
    dist_req *r = recv_req(call, g, dtype, shape, ndim, src, tag, out, err);
    if (r)
        cft__dist_start_here(r);
    return r;
}
