/* jit_lanes.c: a jitted vmap run as a loop over its lanes, each lane
 * through a jit of the function it maps, when a lane's intermediates stay
 * in cache and the batched plan's would not (ensembles, not per-sample
 * gradients); the lanes shared among the threads, each thread with its
 * own jit of the lane function, each lane writing its outputs straight
 * into its rows of the stacked results. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cft/ops.h"
#include "core/error.h"
#include "core/mem.h"
#include "core/par.h"
#include "lower/jit_plan.h"

/* Loop when one lane computes a megaflop or more and touches 256 KB or
 * more, and the whole batch 8 MB or more: then the batched plan streams its
 * intermediates through memory while a lane's stay in cache, and a lane has
 * enough work to pay for its call (ensembles, not per-sample gradients).
 * With several threads the lanes are shared among them, each running its
 * own jit of the lane function (measured on the ensemble at 2 threads:
 * 1.55x of one thread's loop with the batched plan, see run_lanes). Kept
 * per input signature. CFT_JIT_VMAP_LOOP=0 / 1: never / always. */
bool cft__jit_loop_pays(jit_env *J, int nin, cft_array *const *in, int64_t *size) {
    const bool *b = J->f->map_batched;
    *size = -1;
    for (int i = 0; i < nin; i++)
        if (b[i] && in[i]->aval.ndim > 0 && *size < 0)
            *size = in[i]->aval.shape[0];
    if (*size < 1)
        return false;
    const char *env = getenv("CFT_JIT_VMAP_LOOP");
    if (env && (env[0] == '0' || env[0] == '1'))
        return env[0] == '1';
    bool same = J->loop_sig != NULL;
    for (int i = 0; same && i < nin; i++)
        same = cft__aval_eq(&J->loop_sig[i], &in[i]->aval);
    if (same)
        return J->loop_yes;
    cft_aval *sig = CFT_NEWN(cft_aval, nin + 1), *one = CFT_NEWN(cft_aval, nin + 1);
    for (int i = 0; i < nin; i++) {
        sig[i] = in[i]->aval;
        one[i] = in[i]->aval;
        if (b[i]) { /* a lane's aval: axis 0 dropped */
            one[i].ndim--;
            memmove(one[i].shape, one[i].shape + 1, sizeof(int64_t) * (size_t)one[i].ndim);
        }
    }
    double flops, per = (double)cft__fn_cost(J->f->mapped, one, &flops);
    J->loop_yes = flops >= 1e6 && per >= 256e3 && per * (double)*size >= 8e6;
    J->loop_sig = sig;
    return J->loop_yes;
}

/* lanes [lo, hi) through fn, their results into rows of out (allocated) */
typedef struct {
    jit_env *J;
    cft_fn **fns;
    int nin, nout, nth;
    int64_t size;
    cft_array *const *in;
    cft_array **out;
    cft_array *_Atomic err; /* the first failure */
} lanes_job;

/* out[k] = r, out's rows being r's size; r's error, or NULL */
static cft_array *store_row(cft_array *out, int64_t k, cft_array *r) {
    int64_t n = cft__numel(r->aval.shape, r->aval.ndim);
    if (r->data == out->data && r->offset == out->offset + k * n && cft__is_contig(r))
        return NULL; /* the lane wrote it in place (out_dest) */
    r = cft__contig(r);
    if (cft_failed(r))
        return r;
    size_t row = cft_dtype_size(r->aval.dtype) * (size_t)n;
    memcpy((char *)cft__ptr(out) + (size_t)k * row, cft__ptr(r), row);
    return NULL;
}

/* x[k], a view (x concrete, k in range: the lane loop's own indexing) */
static cft_array *row(cft_array *x, int64_t k) {
    return cft__view(x, x->aval.shape + 1, x->aval.ndim - 1, x->strides + 1,
                     x->offset + k * x->strides[0]);
}

/* row k of each output, as the lane's destinations */
static void lane_dest(lanes_job *L, int64_t k, cft_array **dst, out_dest *od) {
    for (int j = 0; j < L->nout; j++) {
        dst[j] = row(L->out[j], k);
        if (cft_failed(dst[j]))
            dst[j] = NULL;
    }
    od->dst = dst, od->n = L->nout;
}

static void run_range(lanes_job *L, cft_fn *fn, int64_t lo, int64_t hi) {
    const bool *b = L->J->f->map_batched;
    cft_array *args[L->nin > 0 ? L->nin : 1], *res[L->nout];
    for (int64_t k = lo; k < hi && !atomic_load(&L->err); k++) {
        for (int i = 0; i < L->nin; i++)
            args[i] = b[i] ? row(L->in[i], k) : L->in[i];
        cft_array *e = NULL, *dst[L->nout];
        out_dest od;
        lane_dest(L, k, dst, &od);
        cft__jit_next_dest = &od;
        cft_status st = cft_fn_call(fn, args, res);
        cft__jit_next_dest = NULL;
        if (st != CFT_OK)
            e = res[0] && cft_failed(res[0]) ? res[0]
                                             : cft__fail(CFT_E_ARG, "cft_jit: a lane failed");
        for (int j = 0; j < L->nout && !e; j++)
            e = store_row(L->out[j], k, res[j]);
        cft_array *none = NULL;
        if (e)
            atomic_compare_exchange_strong(&L->err, &none, e);
    }
}

/* chunk t of lanes [1, size) on thread t */
static void lanes_chunk(void *ctx, int64_t t0, int64_t t1) {
    lanes_job *L = ctx;
    for (int64_t t = t0; t < t1; t++)
        run_range(L, L->fns[t], 1 + (L->size - 1) * t / L->nth,
                  1 + (L->size - 1) * (t + 1) / L->nth);
}

cft_status cft__jit_run_lanes(jit_env *J, int64_t size, int nin, cft_array *const *in, int nout,
                              cft_array **out) {
    const bool *b = J->f->map_batched;
    cft_array *args[nin > 0 ? nin : 1], *res[nout];
    for (int i = 0; i < nin; i++) /* lane 0 here: it gives the outputs' avals */
        args[i] = b[i] ? cft_index(in[i], 0) : in[i];
    if (cft_fn_call(J->lane, args, res) != CFT_OK)
        return cft__fail_outs(res[0], nout, out);
    for (int j = 0; j < nout; j++) {
        const cft_aval *r = &res[j]->aval;
        int64_t shape[CFT_MAX_NDIM] = {size};
        if (r->ndim + 1 > CFT_MAX_NDIM)
            return cft__fail_outs(
                cft__fail(CFT_E_SHAPE, "cft_jit: a vmap output of rank above the limit"), nout,
                out);
        memcpy(shape + 1, r->shape, sizeof(int64_t) * (size_t)r->ndim);
        out[j] = cft__alloc(r->dtype, shape, r->ndim + 1);
        if (cft_failed(out[j]))
            return cft__fail_outs(out[j], nout, out);
    }
    int nth = cft__num_threads();
    if (nth > size - 1)
        nth = (int)(size - 1 > 0 ? size - 1 : 1);
    lanes_job L = {J, NULL, nin, nout, nth, size, in, out, NULL};
    L.fns = CFT_NEWN(cft_fn *, nth + 1);
    pthread_mutex_lock(&J->mu);
    if (J->nlanes < nth) { /* one jit of the lane function per further thread */
        cft_fn **more = CFT_NEWN(cft_fn *, nth + 1);
        for (int t = 0; t < nth; t++)
            more[t] = t == 0 ? J->lane : t < J->nlanes ? J->lanes[t] : cft_jit(J->f->mapped);
        J->lanes = more, J->nlanes = nth;
    }
    for (int t = 0; t < nth; t++)
        L.fns[t] = J->lanes[t];
    pthread_mutex_unlock(&J->mu);
    for (int j = 0; j < nout; j++) {
        cft_array *e = store_row(out[j], 0, res[j]);
        if (e)
            return cft__fail_outs(e, nout, out);
    }
    if (size > 1)
        cft__par_for(nth, 1e12, lanes_chunk, &L);
    cft_array *e = atomic_load(&L.err);
    return e ? cft__fail_outs(e, nout, out) : CFT_OK;
}
