/* ddp_prims.c: the two primitives that let a jitted DDP step overlap its
 * gradient all_reduce with the backward pass.
 *
 *   h = ddp_start(g_1, ..., g_k)        pack the bucket, start its all_reduce
 *                                       (mean over the group); h: an i64 id
 *   a_1, ..., a_k = ddp_wait(h, g_1, ..., g_k)   wait, unpack (shapes of g)
 *
 * ddp_start is CFT_PRIM_EARLY, so the jit runs it right after the last of
 * its gradients is computed, and the all_reduce runs on the communication
 * thread while the rest of the backward pass computes; the waits stay at
 * the end. Both have effects (never folded or merged) and no derivative.
 * Gradients on a device whose backend has communicators are reduced there:
 * ddp_start copies them into one bucket on the device (the backend's device
 * to device copies) and starts its mean, ddp_wait waits and hands out views
 * of the reduced bucket, so a bucket is one collective there as on the
 * host (a gradient that is not contiguous, or on another device, makes the
 * bucket one collective per gradient); on other devices the bucket goes
 * through the host and the reduced gradients come back to the device. */
#include <pthread.h>
#include <string.h>

#include "array/device.h"
#include "core/vec.h"
#include "dist/dist.h"
#include "prims/rules.h"

#define NSLOTS 4096
static cft_dist_work *slots[NSLOTS];      /* static root: the GC sees the works */
static cft_dist_work **dev_slots[NSLOTS]; /* device buckets: one work per gradient */
static int64_t next_id;
static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;

static cft_dist_group *group_of(const cft_params *p) {
    return cft__dist_group_by_id((int)p->v[0][0]);
}

static cft_array *start_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    cft_array *e = cft__dist_check("ddp_start", group_of(p));
    if (e)
        return e;
    for (int i = 0; i < nin; i++)
        if (in[i].dtype != in[0].dtype || !cft_dtype_is_float(in[0].dtype))
            return cft__fail(CFT_E_DTYPE,
                             "ddp_start: a bucket holds one float dtype, got %s and %s",
                             cft__av(&in[0]), cft__av(&in[i]));
    out[0] = cft__aval(CFT_I64, NULL, 0);
    return NULL;
}

/* y = s x, vectorised (the library builds at -O2, which would not) */
CFT_VEC static void scale_f32(const float *restrict x, float s, float *restrict y, int64_t n) {
    for (int64_t j = 0; j < n; j++)
        y[j] = x[j] * s;
}
CFT_VEC static void scale_f64(const double *restrict x, double s, double *restrict y, int64_t n) {
    for (int64_t j = 0; j < n; j++)
        y[j] = x[j] * s;
}

/* xs copied into one vector, times s (s != 1: f32 / f64 only) */
static cft_array *pack_scaled(cft_array *const *xs, int n, double s) {
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += cft_array_size(xs[i]);
    cft_dtype dt = cft_array_dtype(xs[0]);
    cft_array *v = cft__alloc(dt, &total, 1);
    if (cft_failed(v))
        return v;
    size_t es = cft_dtype_size(dt), at = 0;
    for (int i = 0; i < n; i++) {
        cft_array *c = cft__contig(xs[i]);
        if (cft_failed(c))
            return c;
        int64_t k = cft_array_size(c);
        char *to = (char *)cft__ptr(v) + at;
        const void *from = cft__ptr(c);
        if (s == 1)
            memcpy(to, from, (size_t)k * es);
        else if (dt == CFT_F32)
            scale_f32(from, (float)s, (float *)to, k);
        else
            scale_f64(from, s, (double *)to, k);
        at += (size_t)k * es;
    }
    return v;
}

cft_array *cft__ddp_pack(cft_array *const *xs, int n) {
    return pack_scaled(xs, n, 1);
}

cft_dist_work *cft__ddp_mean(cft_dist_group *g, cft_array *const *grads, int n, bool now,
                             double *bytes) {
    cft_dtype dt = cft_array_dtype(grads[0]);
    bool direct = dt == CFT_F32 || dt == CFT_F64;
    cft_array *v = pack_scaled(grads, n, direct ? 1.0 / g->size : 1);
    if (!cft_failed(v))
        *bytes += (double)cft_array_size(v) * (double)cft_dtype_size(dt);
    if (!cft_failed(v) && direct)
        return cft__dist_sum_in_place(g, v, now);
    if (now) /* an error, or a blocking MEAN */
        return cft__dist_work_done(cft_dist_all_reduce(g, v, CFT_DIST_MEAN));
    return cft_dist_all_reduce_async(g, v, CFT_DIST_MEAN);
}

/* views of the reduced bucket, shaped as the gradients (no copies: on a
 * device, a slice would go through the host) */
cft_array *cft__ddp_unpack(cft_array *v, cft_array *const *like, int n, cft_array **out) {
    if (!cft_failed(v) && !cft__is_contig(v))
        v = cft__contig(v);
    if (cft_failed(v)) { /* every output says why */
        for (int i = 0; i < n; i++)
            out[i] = v;
        return v;
    }
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t k = cft_array_size(like[i]), st[CFT_MAX_NDIM];
        cft_aval a = cft_array_aval(like[i]);
        if (at + k > cft_array_size(v)) {
            cft_array *e =
                cft__fail(CFT_E_SHAPE, "ddp: a reduced bucket of %lld elements, %lld needed",
                          (long long)cft_array_size(v), (long long)(at + k));
            for (int j = 0; j < n; j++)
                out[j] = e;
            return e;
        }
        cft__row_major(a.shape, a.ndim, st);
        out[i] = cft__view(v, a.shape, a.ndim, st, v->offset + at);
        at += k;
        if (cft_failed(out[i]))
            return out[i];
    }
    return NULL;
}

/* xs (contiguous, on device d) copied into one new vector on d; NULL when
 * they are not all such (the caller reduces them one by one), or the error */
static cft_array *device_bucket(const cft_dev *d, cft_array *const *xs, int n) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (xs[i]->dev != d || !cft__is_contig(xs[i]))
            return NULL;
        total += cft_array_size(xs[i]);
    }
    cft_dtype dt = cft_array_dtype(xs[0]);
    cft_array *v = cft__dev_alloc(d, "ddp_start", dt, &total, 1);
    if (cft_failed(v))
        return v;
    size_t es = cft_dtype_size(dt), at = 0;
    for (int i = 0; i < n; i++) {
        size_t k = (size_t)cft_array_size(xs[i]) * es;
        if (k && d->b->copy(d->b->ctx, d->index, (char *)cft__ptr(v) + at, cft__ptr(xs[i]), k))
            return cft__dev_fail(d, "ddp_start", "packing a bucket of gradients");
        at += k;
    }
    return v;
}

static cft_array *start_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    double bytes = 0; /* p->v[1]: run it now (a blocking call), the same on every rank */
    cft_dist_work *w = NULL, **reduced = NULL;
    cft_array *bucket = NULL;
    if (cft__on_device(x[0]) && x[0]->dev->b->collective) {
        /* gradients on a device with communicators: the bucket's mean
         * there, started now and waited for by ddp_wait, so it overlaps
         * what the device computes next */
        if (nin > 1 && (bucket = device_bucket(x[0]->dev, x, nin)) && cft_failed(bucket))
            return bucket;
        if (bucket) {
            w = cft_dist_all_reduce_async(group_of(p), bucket, CFT_DIST_MEAN);
        } else {
            if (!(reduced = CFT_NEWN(cft_dist_work *, nin)))
                return cft__oom();
            for (int i = 0; i < nin; i++)
                reduced[i] = cft_dist_all_reduce_async(group_of(p), x[i], CFT_DIST_MEAN);
        }
    } else
        w = cft__ddp_mean(group_of(p), x, nin, p->v[1][0] != 0, &bytes);
    pthread_mutex_lock(&slot_mu);
    int64_t id = next_id++;
    slots[id % NSLOTS] = w;
    dev_slots[id % NSLOTS] = reduced;
    pthread_mutex_unlock(&slot_mu);
    y[0] = cft_scalar((double)id, CFT_I64);
    return NULL;
}

static int wait_nout(const cft_params *p, int nin) {
    (void)p;
    return nin - 1;
}
static cft_array *wait_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)p;
    if (nin < 2 || in[0].dtype != CFT_I64 || in[0].ndim != 0)
        return cft__fail(CFT_E_ARG, "ddp_wait: needs a handle and the bucket's gradients");
    for (int i = 1; i < nin; i++)
        out[i - 1] = in[i];
    return NULL;
}
static cft_array *wait_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    (void)p;
    int64_t id = (int64_t)cft_item(x[0]);
    pthread_mutex_lock(&slot_mu);
    bool mine = id >= 0 && id < next_id && next_id - id <= NSLOTS;
    cft_dist_work *w = mine ? slots[id % NSLOTS] : NULL;
    cft_dist_work **reduced = mine ? dev_slots[id % NSLOTS] : NULL;
    if (mine)
        slots[id % NSLOTS] = NULL, dev_slots[id % NSLOTS] = NULL;
    pthread_mutex_unlock(&slot_mu);
    if (reduced) {
        cft_array *e = NULL;
        for (int i = 0; i < nin - 1; i++) /* (every one waited, an error or not) */
            if (cft_failed(y[i] = cft_dist_wait(reduced[i])) && !e)
                e = y[i];
        return e;
    }
    if (!w)
        return cft__fail(CFT_E_ARG, "ddp_wait: handle %lld is not a running all_reduce",
                         (long long)id);
    cft_array *r = cft_dist_wait(w);
    if (cft_failed(r))
        return r;
    cft_array *e = cft__ddp_unpack(r, x + 1, nin - 1, y);
    for (int i = 0; !e && i < nin - 1; i++) /* gradients of a device come back to it */
        if (cft__on_device(x[1 + i]) && cft_device_of(y[i]) != x[1 + i]->dev &&
            cft_failed(y[i] = cft_device_put(y[i], x[1 + i]->dev)))
            e = y[i];
    return e;
}

const cft_prim cft_p_ddp_start = {
    .name = "ddp_start",
    .nin = -1,
    .nout = 1,
    .flags = CFT_PRIM_NONDIFF | CFT_PRIM_EFFECT | CFT_PRIM_EARLY | CFT_PRIM_DEVICE_IMPL,
    .pnames = {"group", "now"},
    .shape = start_shape,
    .impl = start_impl,
};
const cft_prim cft_p_ddp_wait = {
    .name = "ddp_wait",
    .nin = -1,
    .nout = -1,
    .flags = CFT_PRIM_NONDIFF | CFT_PRIM_EFFECT | CFT_PRIM_DEVICE_IMPL,
    .shape = wait_shape,
    .impl = wait_impl,
    .nout_of = wait_nout,
};

cft_array *cft__ddp_start(cft_dist_group *g, cft_array *const *grads, int k, bool now) {
    cft_params p = {0};
    cft__param_set1(&p, 0, g->id);
    cft__param_set1(&p, 1, now);
    return cft__bind1(&cft_p_ddp_start, &p, k, grads);
}

cft_status cft__ddp_wait(cft_array *h, cft_array *const *grads, int k, cft_array **out) {
    cft_array **in = CFT_NEWN(cft_array *, k + 2);
    in[0] = h;
    memcpy(in + 1, grads, sizeof(cft_array *) * (size_t)k);
    cft_params p = {0};
    cft_array *e = cft__bind(&cft_p_ddp_wait, &p, k + 1, in, k, out);
    return e ? cft__set_last(e) : CFT_OK;
}
