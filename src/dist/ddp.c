/* ddp.c: DistributedDataParallel in functional form (PyTorch 1.8-1.11's
 * DDP): parameters broadcast from rank 0, gradients of the local batch
 * packed into buckets in reverse parameter order and averaged over the
 * group. With the default hook the step is one jitted function: the
 * backward pass, then per bucket ddp_start (its all_reduce) and ddp_wait;
 * the jit moves each ddp_start to just after the bucket's last gradient, so
 * the all_reduce runs on the communication thread while the rest of the
 * backward pass computes (PyTorch's reducer, done by scheduling the plan).
 * A user hook gets each bucket in turn after the backward pass. no_sync
 * skips communication so gradients can accumulate. */
#include <string.h>

#include "array/array.h"
#include "cft/cft.h"
#include "core/error.h"
#include "core/mem.h"
#include "dist/dist.h"
#include "nn/nn_internal.h"

struct cft_ddp {
    cft_dist_group *g;
    cft_fn *vg;       /* jitted value_and_grad of the loss over every parameter */
    cft_fn *plain;    /* the same, not jitted (traced into the fused steps) */
    cft_fn *fused[2]; /* jitted backward + overlapped all_reduces (1: + accumulated) */
    int nbatch;
    int np;                   /* parameters */
    int nb;                   /* buckets */
    int *start, *len, *order; /* bucket b: leaves order[start[b] .. +len[b]) */
    cft_ddp_hook hook;
    void *hook_state;
    bool no_sync;
    double bytes;
};

/* the fused step: (params..., batch... [, accumulated...]) -> (loss, averaged
 * grads...), with every bucket's all_reduce started as early as it can be */
static cft_status fused_cb(cft_ddp *d, bool acc, cft_array *const *in, cft_array **out) {
    cft_array **vo = CFT_NEWN(cft_array *, d->np + 2);
    cft_status st = cft_fn_call(d->plain, in, vo);
    if (st != CFT_OK) { /* the outputs carry the error */
        for (int i = 0; i <= d->np; i++)
            out[i] = vo[0];
        return st;
    }
    cft_array **g = vo + 1, **bg = CFT_NEWN(cft_array *, d->np + 1),
              **h = CFT_NEWN(cft_array *, d->nb + 1);
    if (acc)
        for (int i = 0; i < d->np; i++)
            g[i] = cft_add(g[i], in[d->np + d->nbatch + i]);
    for (int b = 0; b < d->nb; b++) {
        for (int k = 0; k < d->len[b]; k++)
            bg[k] = g[d->order[d->start[b] + k]];
        /* the last bucket is ready when the backward ends: nothing is left
         * to overlap it with, so it runs as a blocking call (no hand-off) */
        h[b] = cft__ddp_start(d->g, bg, d->len[b], b == d->nb - 1);
    }
    cft_array **avg = CFT_NEWN(cft_array *, d->np + 1);
    for (int b = 0; b < d->nb; b++) {
        for (int k = 0; k < d->len[b]; k++)
            bg[k] = g[d->order[d->start[b] + k]];
        st = cft__ddp_wait(h[b], bg, d->len[b], avg);
        if (st != CFT_OK) {
            for (int i = 0; i <= d->np; i++)
                out[i] = avg[0];
            return st;
        }
        for (int k = 0; k < d->len[b]; k++)
            out[1 + d->order[d->start[b] + k]] = avg[k];
    }
    out[0] = vo[0];
    return CFT_OK;
}
static cft_status fused_plain_cb(void *env, int nin, cft_array *const *in, int nout,
                                 cft_array **out) {
    (void)nin, (void)nout;
    return fused_cb(env, false, in, out);
}
static cft_status fused_acc_cb(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)nin, (void)nout;
    return fused_cb(env, true, in, out);
}

cft_ddp *cft_ddp_new(cft_dist_group *g, cft_fn *loss, const cft_tree *params,
                     const cft_ddp_options *opt) {
    CFT_API("cft_ddp_new");
    cft_array *e = cft__dist_check("cft_ddp_new", g);
    if (!e && (!params || params->err || cft_fn_failed(loss)))
        e = cft__fail(CFT_E_ARG, "cft_ddp_new: %s",
                      !params       ? "params is NULL"
                      : params->err ? cft_error_message(params->err)
                                    : cft_fn_error_message(loss));
    if (!e && cft_fn_nin(loss) <= params->n)
        e = cft__fail(CFT_E_ARG,
                      "cft_ddp_new: the loss takes %d inputs, fewer than the %d parameters and a "
                      "batch (make it with cft_tree_fn_new over params)",
                      cft_fn_nin(loss), params->n);
    if (e) {
        cft__set_last(e);
        return NULL;
    }
    cft_ddp *d = CFT_NEW(cft_ddp);
    d->g = g;
    d->np = params->n;
    int *argnums = CFT_NEWN(int, d->np + 1);
    for (int i = 0; i < d->np; i++)
        argnums[i] = i;
    d->plain = cft_value_and_grad(loss, argnums, d->np, false);
    d->vg = cft_jit(d->plain);
    d->nbatch = cft_fn_nin(loss) - d->np;
    d->hook = opt && opt->hook ? opt->hook : NULL;
    d->hook_state = opt ? opt->hook_state : NULL;
    double cap = (opt && opt->bucket_mb > 0 ? opt->bucket_mb : 25) * 1048576.0;
    /* buckets in reverse parameter order, one dtype per bucket, up to cap */
    d->order = CFT_NEWN(int, d->np + 1);
    d->start = CFT_NEWN(int, d->np + 1);
    d->len = CFT_NEWN(int, d->np + 1);
    double fill = 0;
    cft_dtype dt = CFT_F32;
    for (int k = 0; k < d->np; k++) {
        int i = d->np - 1 - k;
        d->order[k] = i;
        cft_array *x = params->xs[i];
        double bytes = (double)cft_array_size(x) * (double)cft_dtype_size(cft_array_dtype(x));
        if (d->nb == 0 || fill + bytes > cap || cft_array_dtype(x) != dt) {
            d->start[d->nb] = k, d->len[d->nb] = 0, d->nb++;
            fill = 0;
            dt = cft_array_dtype(x);
        }
        d->len[d->nb - 1]++;
        fill += bytes;
    }
    int nin = d->np + d->nbatch;
    d->fused[0] = cft_jit(cft_fn_named(cft_fn_new(fused_plain_cb, d, nin, 1 + d->np), "ddp_step"));
    d->fused[1] =
        cft_jit(cft_fn_named(cft_fn_new(fused_acc_cb, d, nin + d->np, 1 + d->np), "ddp_step"));
    return d;
}

void cft_ddp_no_sync(cft_ddp *d, bool no_sync) {
    if (d)
        d->no_sync = no_sync;
}
double cft_ddp_bytes_sent(const cft_ddp *d) {
    return d ? d->bytes : 0;
}
int cft_ddp_num_buckets(const cft_ddp *d) {
    return d ? d->nb : 0;
}

cft_tree *cft_ddp_broadcast_params(cft_ddp *d, const cft_tree *params) {
    CFT_API("cft_ddp_broadcast_params");
    if (!d || !params || params->err)
        return cft__tree_err(params && params->err
                                 ? params->err
                                 : cft__fail(CFT_E_ARG, "cft_ddp_broadcast_params: NULL argument"));
    cft_dist_work **w = CFT_NEWN(cft_dist_work *, params->n + 1);
    for (int i = 0; i < params->n; i++) /* all started, then all waited */
        w[i] = cft_dist_broadcast_async(d->g, params->xs[i], 0);
    cft_array **xs = CFT_NEWN(cft_array *, params->n + 1);
    for (int i = 0; i < params->n; i++) {
        xs[i] = cft_dist_wait(w[i]);
        if (cft_failed(xs[i]))
            return cft__tree_err(xs[i]);
    }
    return cft_tree_from(params->names, xs, params->n);
}

/* compress to dt, average, back */
static cft_status hook_cast(cft_dtype dt, cft_dist_group *g, const cft_ddp_bucket *b,
                            cft_array **out) {
    cft_array *v = cft__ddp_pack(b->grads, b->n);
    cft_dtype orig = cft_array_dtype(v);
    cft_array *r = cft_dist_all_reduce(g, cft_astype(v, dt), CFT_DIST_MEAN);
    if (cft_failed(r))
        return cft__set_last(r);
    cft__ddp_unpack(cft_astype(r, orig), b->grads, b->n, out);
    return CFT_OK;
}
cft_status cft_ddp_hook_allreduce(void *state, cft_dist_group *g, const cft_ddp_bucket *b,
                                  cft_array **out) {
    (void)state;
    CFT_API("cft_ddp_hook_allreduce");
    return hook_cast(cft_array_dtype(b->grads[0]), g, b, out);
}
cft_status cft_ddp_hook_fp16(void *state, cft_dist_group *g, const cft_ddp_bucket *b,
                             cft_array **out) {
    (void)state;
    CFT_API("cft_ddp_hook_fp16");
    return hook_cast(CFT_F16, g, b, out);
}
cft_status cft_ddp_hook_bf16(void *state, cft_dist_group *g, const cft_ddp_bucket *b,
                             cft_array **out) {
    (void)state;
    CFT_API("cft_ddp_hook_bf16");
    return hook_cast(CFT_BF16, g, b, out);
}

cft_status cft_ddp_step(cft_ddp *d, const cft_tree *params, cft_array *const *batch,
                        const cft_tree *accumulated, cft_array **loss, cft_tree **grads) {
    CFT_API("cft_ddp_step");
    cft_array *e = NULL;
    if (!d || !params || !grads)
        e = cft__fail(CFT_E_ARG, "cft_ddp_step: NULL argument");
    else if (params->err)
        e = params->err;
    else if (params->n != d->np)
        e = cft__fail(CFT_E_ARG, "cft_ddp_step: %d parameters, the DDP was made for %d", params->n,
                      d->np);
    else if (accumulated && (accumulated->err || accumulated->n != d->np))
        e = accumulated->err
                ? accumulated->err
                : cft__fail(CFT_E_ARG, "cft_ddp_step: accumulated has %d leaves", accumulated->n);
    if (e) {
        if (grads)
            *grads = cft__tree_err(e);
        if (loss)
            *loss = e;
        return cft__set_last(e);
    }
    int nin = cft_fn_nin(d->vg), nb_in = nin - d->np;
    cft_array **in = CFT_NEWN(cft_array *, nin + d->np + 1),
              **out = CFT_NEWN(cft_array *, d->np + 2);
    memcpy(in, params->xs, sizeof(cft_array *) * (size_t)d->np);
    for (int i = 0; i < nb_in; i++)
        in[d->np + i] = batch ? batch[i] : NULL;
    if (!d->hook && !d->no_sync) { /* the fused step: all_reduces overlap the backward */
        if (accumulated)
            memcpy(in + nin, accumulated->xs, sizeof(cft_array *) * (size_t)d->np);
        cft_status st = cft_fn_call(d->fused[accumulated != NULL], in, out);
        if (loss)
            *loss = out[0];
        if (st != CFT_OK) {
            *grads = cft__tree_err(out[0]);
            return st;
        }
        for (int b = 0; b < d->nb; b++)
            for (int k = 0; k < d->len[b]; k++) {
                cft_array *x = out[1 + d->order[d->start[b] + k]];
                d->bytes += (double)cft_array_size(x) * (double)cft_dtype_size(cft_array_dtype(x));
            }
        *grads = cft_tree_from(params->names, out + 1, d->np);
        return CFT_OK;
    }
    cft_status st = cft_fn_call(d->vg, in, out);
    if (loss)
        *loss = out[0];
    cft_array **g = out + 1; /* local gradients, in parameter order */
    if (st != CFT_OK) {
        *grads = cft__tree_err(out[0]);
        return st;
    }
    if (accumulated)
        for (int i = 0; i < d->np; i++)
            g[i] = cft_add(g[i], accumulated->xs[i]);
    if (d->no_sync) {
        *grads = cft_tree_from(params->names, g, d->np);
        return CFT_OK;
    }
    cft_array **avg = CFT_NEWN(cft_array *, d->np + 1);
    cft_array **bg = CFT_NEWN(cft_array *, d->np + 1), **bo = CFT_NEWN(cft_array *, d->np + 1);
    const char **bn = CFT_NEWN(const char *, d->np + 1);
    if (!d->hook) { /* every bucket in flight at once, then waited in order */
        cft_dist_work **w = CFT_NEWN(cft_dist_work *, d->nb + 1);
        for (int b = 0; b < d->nb; b++) {
            for (int k = 0; k < d->len[b]; k++)
                bg[k] = g[d->order[d->start[b] + k]];
            /* one bucket: the blocking call, driven on this thread */
            w[b] = cft__ddp_mean(d->g, bg, d->len[b], d->nb == 1, &d->bytes);
        }
        for (int b = 0; b < d->nb; b++) {
            cft_array *r = cft_dist_wait(w[b]);
            if (cft_failed(r)) {
                *grads = cft__tree_err(r);
                return cft__set_last(r);
            }
            for (int k = 0; k < d->len[b]; k++)
                bg[k] = g[d->order[d->start[b] + k]];
            cft__ddp_unpack(r, bg, d->len[b], bo);
            for (int k = 0; k < d->len[b]; k++)
                avg[d->order[d->start[b] + k]] = bo[k];
        }
    } else {
        for (int b = 0; b < d->nb; b++) {
            for (int k = 0; k < d->len[b]; k++) {
                int i = d->order[d->start[b] + k];
                bg[k] = g[i], bn[k] = params->names[i];
            }
            cft_ddp_bucket bucket = {b, d->len[b], bn, bg};
            st = d->hook(d->hook_state, d->g, &bucket, bo);
            if (st != CFT_OK) {
                *grads = cft__tree_err(cft__fail(st,
                                                 "cft_ddp_step: the hook failed on bucket "
                                                 "%d: %s",
                                                 b, cft_last_error_message()));
                return st;
            }
            for (int k = 0; k < d->len[b]; k++) {
                avg[d->order[d->start[b] + k]] = bo[k];
                d->bytes +=
                    (double)cft_array_size(bg[k]) * (double)cft_dtype_size(cft_array_dtype(bg[k]));
            }
        }
    }
    *grads = cft_tree_from(params->names, avg, d->np);
    return CFT_OK;
}
