/* vmap.c: the vectorizing map. A batch tracer carries a value and the axis
 * of it that is the batch (or none); its aval is the per-example one.
 * Processing a primitive calls its batching rule, which moves or inserts
 * axes with the public ops. A primitive without a rule is an error naming
 * it: there is no silent per-example loop. */
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"
#include "trace/fn.h"
#include "trace/ir.h"
#include "transforms/transforms.h"

typedef struct {
    int64_t size;
    int randomness; /* CFT_RANDOMNESS_* */
    int busy;       /* > 0 while a batching rule runs: its binds are below this trace */
} batch_state;

static cft_array *batch_tracer(cft_trace *t, cft_array *val, int bdim) {
    if (cft_failed(val))
        return val;
    cft_aval a = bdim >= 0 ? cft__aval_drop(&val->aval, bdim) : val->aval;
    cft_array *x = cft__tracer(t, &a);
    if (cft_failed(x))
        return x;
    x->u.batch.val = val;
    x->u.batch.bdim = bdim;
    return x;
}

static cft_array *batch_lift(cft_trace *t, cft_array *x) {
    return batch_tracer(t, x, -1);
}

static cft_array *batch_process(cft_trace *t, const cft_prim *p, const cft_params *par, int nin,
                                cft_array *const *in, cft_array **out) {
    batch_state *s = t->state;
    int nout = cft__nout(p, par, nin);
    cft_array *x[nin > 0 ? nin : 1], *y[nout];
    int bd[nin > 0 ? nin : 1], ybd[nout];
    bool any = false;
    for (int i = 0; i < nin; i++) {
        x[i] = in[i]->u.batch.val;
        bd[i] = in[i]->u.batch.bdim;
        any |= bd[i] >= 0;
    }
    cft_array *e;
    if (!any) { /* nothing batched: run it once */
        e = cft__bind(p, par, nin, x, nout, y);
        for (int i = 0; i < nout; i++)
            ybd[i] = -1;
    } else {
        if (!p->vmap)
            return cft__fail(CFT_E_TRACE, "vmap: primitive %s has no batching rule", p->name);
        s->busy++;
        e = p->vmap(s->size, x, bd, nin, par, y, ybd);
        s->busy--;
    }
    if (e)
        return e;
    for (int i = 0; i < nout; i++) {
        out[i] = batch_tracer(t, y[i], ybd[i]);
        if (cft_failed(out[i]))
            return out[i];
    }
    return NULL;
}

/* functorch's randomness: a draw from a key that is the same for every
 * batch element gives the same numbers ('same', JAX's way), is refused
 * ('error', functorch's default), or gets one key per element, split from
 * it ('different'). Keys from traces above this one are left alone (they
 * were handled when they entered them). */
static cft_array *batch_random_key(cft_trace *t, cft_array *key) {
    batch_state *s = t->state;
    if (s->randomness == CFT_RANDOMNESS_SAME || s->busy)
        return key; /* busy: a draw made by a batching rule, already batched */
    bool mine = cft__is_tracer_of(key, t);
    if (key->kind == CFT_K_TRACER && !mine && key->trace->level > t->level)
        return key;
    if (mine && key->u.batch.bdim >= 0)
        return key; /* batched: one key per element already */
    if (s->randomness == CFT_RANDOMNESS_ERROR)
        return cft__fail(CFT_E_ARG,
                         "cft_vmap: a random draw from a key that is the same for every batch "
                         "element (randomness 'error'); batch the key, or make the vmap with "
                         "cft_vmap_ex and CFT_RANDOMNESS_DIFFERENT or CFT_RANDOMNESS_SAME");
    cft_array *base = mine ? key->u.batch.val : key;
    s->busy++; /* the split below is this trace's own, not the user's */
    cft_array *keys = cft_random_split(base, s->size);
    s->busy--;
    return batch_tracer(t, keys, 0);
}

static const cft_trace_vt batch_vt = {"vmap", batch_process, batch_lift, batch_random_key};

typedef struct {
    cft_fn *f;
    int *in_axes, *out_axes;
    int randomness;
} vmap_env;

static cft_status vmap_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    vmap_env *env = envp;
    int64_t size = -1;
    int first = -1, ax[nin > 0 ? nin : 1];
    for (int i = 0; i < nin; i++) {
        int a = env->in_axes ? env->in_axes[i] : 0;
        if (a == CFT_NOT_BATCHED) {
            ax[i] = -1;
            continue;
        }
        int nd = in[i]->aval.ndim;
        ax[i] = a < 0 ? a + nd : a;
        if (ax[i] < 0 || ax[i] >= nd)
            return cft__fail_outs(cft__fail(CFT_E_ARG,
                                            "cft_vmap: in_axes[%d] = %d is out of range "
                                            "for input %s",
                                            i, a, cft__av(&in[i]->aval)),
                                  nout, out);
        int64_t n = in[i]->aval.shape[ax[i]]; /* may be symbolic (negative) */
        if (first < 0)
            size = n, first = i;
        else if (n != size)
            return cft__fail_outs(cft__fail(CFT_E_SHAPE,
                                            "cft_vmap: batch sizes differ: input %d "
                                            "has %s along axis %d, input %d has %s along axis %d",
                                            first, cft__dim_s(size), ax[first], i, cft__dim_s(n),
                                            ax[i]),
                                  nout, out);
    }
    if (first < 0)
        return cft__fail_outs(cft__fail(CFT_E_ARG, "cft_vmap: no input is batched"), nout, out);
    batch_state *s = CFT_NEW(batch_state);
    s->size = size;
    s->randomness = env->randomness;
    cft_trace *t = cft__trace_push(&batch_vt, s);
    if (!t)
        return cft__fail_outs(cft__fail(CFT_E_TRACE, "vmap: trace stack full"), nout, out);
    cft_array *bin[nin > 0 ? nin : 1], *res[nout];
    for (int i = 0; i < nin; i++)
        bin[i] = batch_tracer(t, in[i], ax[i]);
    cft_status st = cft__fn_apply(env->f, bin, res);
    cft_array *vals[nout];
    int bds[nout];
    for (int j = 0; j < nout && st == CFT_OK; j++) {
        if (cft__is_tracer_of(res[j], t)) {
            vals[j] = res[j]->u.batch.val;
            bds[j] = res[j]->u.batch.bdim;
        } else {
            vals[j] = res[j];
            bds[j] = -1;
        }
    }
    cft__trace_pop(t);
    if (st != CFT_OK)
        return cft__fail_outs(res[0], nout, out);
    for (int j = 0; j < nout; j++) {
        int oa = env->out_axes ? env->out_axes[j] : 0;
        if (oa == CFT_NOT_BATCHED) {
            if (bds[j] >= 0)
                return cft__fail_outs(cft__fail(CFT_E_ARG,
                                                "cft_vmap: output %d depends on the batch "
                                                "but out_axes[%d] is CFT_NOT_BATCHED",
                                                j, j),
                                      nout, out);
            out[j] = vals[j];
            continue;
        }
        int nd = vals[j]->aval.ndim + (bds[j] < 0);
        int a = oa < 0 ? oa + nd : oa;
        if (a < 0 || a >= nd)
            return cft__fail_outs(cft__fail(CFT_E_ARG,
                                            "cft_vmap: out_axes[%d] = %d out of range for "
                                            "rank %d",
                                            j, oa, nd),
                                  nout, out);
        out[j] = cft__batch_at(vals[j], bds[j], size, a);
        if (cft_failed(out[j]))
            return cft__fail_outs(out[j], nout, out);
    }
    return CFT_OK;
}

static cft_fn *vmap_make(cft_fn *f, const int *in_axes, const int *out_axes, int randomness);

cft_fn *cft_vmap(cft_fn *f, const int *in_axes, const int *out_axes) {
    CFT_API("cft_vmap");
    return vmap_make(f, in_axes, out_axes, CFT_RANDOMNESS_SAME);
}

cft_fn *cft_vmap_ex(cft_fn *f, const int *in_axes, const int *out_axes, cft_randomness randomness) {
    CFT_API("cft_vmap_ex");
    if ((unsigned)randomness > CFT_RANDOMNESS_DIFFERENT)
        return cft__fn_fail(f ? f->nin : 1, f ? f->nout : 1, CFT_E_ARG,
                            "cft_vmap_ex: randomness %d is none of CFT_RANDOMNESS_SAME, _ERROR "
                            "and _DIFFERENT",
                            (int)randomness);
    return vmap_make(f, in_axes, out_axes, randomness);
}

static cft_fn *vmap_make(cft_fn *f, const int *in_axes, const int *out_axes, int randomness) {
    cft_fn *bad = cft__fn_check("cft_vmap", f);
    if (bad)
        return bad;
    bool any = !in_axes;
    for (int i = 0; in_axes && i < f->nin; i++) {
        int a = in_axes[i];
        any |= a != CFT_NOT_BATCHED;
        if (a != CFT_NOT_BATCHED && (a < -CFT_MAX_NDIM || a >= CFT_MAX_NDIM))
            return cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                                "cft_vmap: in_axes[%d] = %d is not an axis (nor CFT_NOT_BATCHED)",
                                i, a);
    }
    if (!any && f->nin > 0)
        return cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                            "cft_vmap: every in_axes entry is CFT_NOT_BATCHED; nothing to map");
    for (int i = 0; out_axes && i < f->nout; i++)
        if (out_axes[i] != CFT_NOT_BATCHED &&
            (out_axes[i] < -CFT_MAX_NDIM || out_axes[i] >= CFT_MAX_NDIM))
            return cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                                "cft_vmap: out_axes[%d] = %d is not an axis", i, out_axes[i]);
    vmap_env *env = CFT_NEW(vmap_env);
    if (in_axes) {
        env->in_axes = CFT_NEWN(int, f->nin + 1);
        for (int i = 0; i < f->nin; i++)
            env->in_axes[i] = in_axes[i];
    }
    if (out_axes) {
        env->out_axes = CFT_NEWN(int, f->nout + 1);
        for (int i = 0; i < f->nout; i++)
            env->out_axes[i] = out_axes[i];
    }
    env->f = f;
    env->randomness = randomness;
    cft_fn *v = cft_fn_named(cft_fn_new(vmap_cb, env, f->nin, f->nout), "vmap");
    /* f mapped over leading axes with the same key in every lane: what
     * cft_jit may run as a loop over the batch (lower/jit_lanes.c) */
    bool plain = !cft_fn_failed(v) && randomness == CFT_RANDOMNESS_SAME;
    for (int i = 0; plain && in_axes && i < f->nin; i++)
        plain = in_axes[i] == 0 || in_axes[i] == CFT_NOT_BATCHED;
    for (int j = 0; plain && out_axes && j < f->nout; j++)
        plain = out_axes[j] == 0;
    if (plain) {
        v->map_batched = CFT_NEWN(bool, f->nin + 1);
        for (int i = 0; v->map_batched && i < f->nin; i++)
            v->map_batched[i] = !in_axes || in_axes[i] == 0;
        if (v->map_batched)
            v->mapped = f;
    }
    return v;
}

cft_fn *cft_vmap_n(cft_fn *f, const int *in_axes, int n_in, const int *out_axes, int n_out) {
    CFT_API("cft_vmap_n");
    cft_fn *bad = cft__fn_check("cft_vmap_n", f);
    if (bad)
        return bad;
    if ((in_axes && n_in != f->nin) || (out_axes && n_out != f->nout))
        return cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                            "cft_vmap_n: %d in_axes and %d out_axes for a function of %d inputs "
                            "and %d outputs",
                            in_axes ? n_in : f->nin, out_axes ? n_out : f->nout, f->nin, f->nout);
    return cft_vmap(f, in_axes, out_axes);
}

/* vmap in chunks: the batch cut into pieces of at most `chunk`, vmap(f) on
 * each, the outputs joined along axis 0 (functorch's chunk_size: memory
 * bounded by a chunk) */
typedef struct {
    cft_fn *f, *v; /* f, and vmap(f, in_axes) */
    int *in_axes;
    int64_t chunk;
    size_t budget; /* > 0: the chunk follows from this many bytes per chunk */
} chunk_env;

/* the chunk that keeps one chunk's intermediates within c->budget: the
 * bytes of one batch element's computation, from f's IR at the avals of
 * one element (an upper bound: every equation's outputs counted) */
static int64_t chunk_for_budget(const chunk_env *c, int nin, cft_array *const *in, const int *ax) {
    cft_aval one[nin > 0 ? nin : 1];
    for (int i = 0; i < nin; i++)
        one[i] = ax[i] == CFT_NOT_BATCHED ? in[i]->aval : cft__aval_drop(&in[i]->aval, ax[i]);
    size_t per = cft__fn_bytes(c->f, one);
    int64_t k = per > 0 ? (int64_t)(c->budget / per) : INT64_MAX;
    return k < 1 ? 1 : k;
}

static cft_status chunk_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    chunk_env *c = env;
    int64_t size = -1;
    int ax[CFT_FN_MAX_ARGS > 64 ? 64 : CFT_FN_MAX_ARGS];
    if (nin > 64)
        return cft__fail_outs(cft__fail(CFT_E_ARG, "cft_vmap_chunked: at most 64 inputs"), nout,
                              out);
    for (int i = 0; i < nin; i++) {
        int a = c->in_axes ? c->in_axes[i] : 0;
        if (a != CFT_NOT_BATCHED && a < 0)
            a += in[i]->aval.ndim;
        ax[i] = a;
        if (a != CFT_NOT_BATCHED && size < 0)
            size = in[i]->aval.shape[a];
    }
    int64_t chunk = c->budget ? chunk_for_budget(c, nin, in, ax) : c->chunk;
    if (chunk > size && size > 0)
        chunk = size;
    int64_t nchunks = size <= 0 ? 1 : (size + chunk - 1) / chunk;
    cft_array **parts = CFT_NEWN(cft_array *, (size_t)(nout * nchunks) + 1);
    cft_array **args = CFT_NEWN(cft_array *, nin + 1), **res = CFT_NEWN(cft_array *, nout + 1);
    if (!parts || !args || !res)
        return cft__fail_outs(cft__oom(), nout, out);
    bool direct = nchunks > 1; /* concrete chunk results go straight into their rows */
    for (int i = 0; i < nin && direct; i++)
        direct = cft_is_concrete(in[i]);
    for (int64_t k = 0; k < nchunks; k++) {
        int64_t lo = k * chunk, hi = lo + chunk < size ? lo + chunk : size;
        for (int i = 0; i < nin; i++) {
            if (ax[i] == CFT_NOT_BATCHED || size <= 0) {
                args[i] = in[i];
                continue;
            }
            int64_t start[CFT_MAX_NDIM] = {0}, stop[CFT_MAX_NDIM];
            memcpy(stop, in[i]->aval.shape, sizeof(int64_t) * (size_t)in[i]->aval.ndim);
            start[ax[i]] = lo, stop[ax[i]] = hi;
            args[i] = cft_slice(in[i], start, stop, NULL);
        }
        cft_status st = cft_fn_call(c->v, args, res);
        if (st != CFT_OK)
            return cft__fail_outs(res[0], nout, out);
        for (int j = 0; j < nout && direct && k == 0; j++) /* decided by the first chunk */
            direct = cft_is_concrete(res[j]);
        if (direct) { /* out[j][lo:hi] = res[j]: no list of parts, no joining copy */
            for (int j = 0; j < nout; j++) {
                cft_array *r = cft__contig(res[j]);
                if (cft_failed(r))
                    return cft__fail_outs(r, nout, out);
                if (k == 0) {
                    cft_aval a = r->aval;
                    a.shape[0] = size;
                    out[j] = cft__alloc(a.dtype, a.shape, a.ndim);
                }
                if (cft_failed(out[j]))
                    return cft__fail_outs(out[j], nout, out);
                size_t row = cft_dtype_size(r->aval.dtype) *
                             (size_t)cft__numel(r->aval.shape + 1, r->aval.ndim - 1);
                memcpy((char *)cft__ptr(out[j]) + (size_t)lo * row, cft__ptr(r),
                       (size_t)(hi - lo) * row);
            }
            continue;
        }
        for (int j = 0; j < nout; j++)
            parts[(size_t)j * (size_t)nchunks + (size_t)k] = res[j];
    }
    if (direct)
        return CFT_OK;
    for (int j = 0; j < nout; j++)
        out[j] = nchunks == 1
                     ? parts[j]
                     : cft_concatenate(parts + (size_t)j * (size_t)nchunks, (int)nchunks, 0);
    return CFT_OK;
}

static cft_fn *chunked(cft_fn *f, const int *in_axes, int64_t chunk, size_t budget) {
    cft_fn *v = cft_vmap(f, in_axes, NULL);
    if (cft_fn_failed(v))
        return v;
    chunk_env *c = CFT_NEW(chunk_env);
    if (!c)
        return cft__fn_error(cft__oom(), f->nin, f->nout);
    c->f = f, c->v = v, c->chunk = chunk, c->budget = budget;
    if (in_axes) {
        c->in_axes = CFT_NEWN(int, f->nin + 1);
        for (int i = 0; c->in_axes && i < f->nin; i++)
            c->in_axes[i] = in_axes[i];
    }
    return cft_fn_named(cft_fn_new(chunk_cb, c, f->nin, f->nout), "vmap");
}

cft_fn *cft_vmap_chunked(cft_fn *f, const int *in_axes, int64_t chunk) {
    CFT_API("cft_vmap_chunked");
    cft_fn *bad = cft__fn_check("cft_vmap_chunked", f);
    if (bad)
        return bad;
    if (chunk < 1)
        return cft__fn_fail(f->nin, f->nout, CFT_E_ARG, "cft_vmap_chunked: chunk %lld < 1",
                            (long long)chunk);
    return chunked(f, in_axes, chunk, 0);
}

cft_fn *cft_vmap_budget(cft_fn *f, const int *in_axes, size_t memory_budget) {
    CFT_API("cft_vmap_budget");
    cft_fn *bad = cft__fn_check("cft_vmap_budget", f);
    if (bad)
        return bad;
    if (memory_budget == 0)
        return cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                            "cft_vmap_budget: a memory budget of 0 bytes");
    return chunked(f, in_axes, 0, memory_budget);
}
