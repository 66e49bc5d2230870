/* pipeline.c: pipeline parallelism. Stage s of S runs, per micro-batch m,
 * a forward (its input from s-1, or rank 0's slice of the batch; the
 * output sent to s+1) and later a backward (the output cotangent from s+1,
 * or 1/M on the last stage, whose output is the micro-batch's mean loss;
 * the input cotangent sent to s-1). A forward is cft_vjp of the stage's
 * function, so its pullback holds the residuals until the backward (with
 * recompute, only the input is kept and the vjp runs again then).
 *
 * Messages go point to point on the group: sends are non-blocking, started
 * on this thread (no hand-off to the communication thread) and finished at
 * the end of the step, receives blocking, each with the group's deadline, so a stalled stage is a
 * timeout error. The first activation of a step is preceded by a small
 * header (dtype and shape; the micro-batches share it); a cotangent has its
 * activation's shape. Tags: 0 for the header, 3m+1 for activations, 3m+2
 * for cotangents.
 *
 * Schedules: GPipe runs every forward then every backward; 1F1B runs
 * S-s-1 forwards first, then alternates one forward and one backward, then
 * finishes the backwards, so stage s keeps at most S-s micro-batches. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "array/array.h"
#include "cft/ops.h"
#include "cft/pipeline.h"
#include "core/error.h"
#include "core/mem.h"
#include "dist/dist.h"

struct cft_pipeline {
    cft_dist_group *g;
    cft_fn *stage;
    const cft_tree *like;
    cft_pipeline_options o;
    cft_pipeline_stats stats;
    cft_array *err;
};

typedef struct {
    cft_array *in; /* the stage's input (kept for recompute) */
    cft_fn *pb;    /* the pullback (NULL after the backward, or with recompute) */
    cft_aval out;  /* the output's aval (the cotangent's) */
    bool live;
} micro;

typedef struct {
    cft_pipeline *p;
    const cft_tree *params;
    cft_array **pv; /* params flattened */
    int np;
    cft_array *x, *target;
    int S, s, M;
    micro *mb;
    cft_array **grads; /* accumulated */
    cft_array *loss;
    dist_req **sends;
    /* receives posted ahead (activation m + 1 once m is in; the cotangent
     * of m once m's forward is done), so a message arriving while this
     * stage computes is taken in by its next MPI call instead of waited for */
    dist_req **act_req, **ct_req;
    cft_array **act_buf, **ct_buf;
    int nsends, live;
    double compute, wait;
    cft_aval in_aval; /* of the activations received */
} step_ctx;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

cft_pipeline *cft_pipeline_new(cft_dist_group *g, cft_fn *stage, const cft_tree *params,
                               const cft_pipeline_options *opt) {
    CFT_API("cft_pipeline_new");
    cft_pipeline *p = CFT_NEW(cft_pipeline);
    if (!p)
        return NULL;
    p->g = g, p->stage = stage, p->like = params;
    if (opt)
        p->o = *opt;
    if (p->o.micro_batches <= 0)
        p->o.micro_batches = 1;
    cft_array *e = cft__dist_check("cft_pipeline_new", g);
    if (!e && (!stage || cft_fn_failed(stage) || !params || cft_tree_failed(params)))
        e = cft__fail(CFT_E_ARG, "cft_pipeline_new: needs a stage function and its parameters");
    if (!e && (unsigned)p->o.schedule > CFT_PIPE_1F1B)
        e = cft__fail(CFT_E_ARG, "cft_pipeline_new: unknown schedule %d", (int)p->o.schedule);
    if (!e) {
        bool last = g->rank == g->size - 1;
        int want = cft_tree_size(params) + (last ? 2 : 1);
        if (cft_fn_nin(stage) != want || cft_fn_nout(stage) != 1)
            e = cft__fail(CFT_E_ARG,
                          "cft_pipeline_new: stage %d's function takes %d inputs and gives %d "
                          "outputs; a %s stage takes its %d parameters and %s, and gives 1",
                          g->rank, cft_fn_nin(stage), cft_fn_nout(stage),
                          last ? "last" : "non-last", cft_tree_size(params),
                          last ? "(x, target)" : "x");
    }
    p->err = e;
    if (e)
        cft__set_last(e);
    return p;
}

cft_pipeline_stats cft_pipeline_last_stats(const cft_pipeline *p) {
    cft_pipeline_stats z = {0};
    return p ? p->stats : z;
}

/* ---- messages ---- */

static cft_array *isend(step_ctx *c, cft_array *x, int to, int tag) {
    cft_array *e = NULL;
    dist_req *r = cft__dist_isend("cft_pipeline_step", c->p->g, x, to, tag, &e);
    if (r)
        c->sends[c->nsends++] = r;
    return e;
}

/* the header (dtype, shape) goes with micro-batch 0 only: the others have
 * the same shape (the batch splits evenly) */
static cft_array *send_activation(step_ctx *c, cft_array *y, int m) {
    cft_array *e = NULL;
    if (m == 0) {
        cft_aval a = cft_array_aval(y);
        int64_t h[2 + CFT_MAX_NDIM] = {a.dtype, a.ndim};
        memcpy(h + 2, a.shape, sizeof(int64_t) * (size_t)a.ndim);
        e = isend(c, cft_from_data(h, CFT_I64, (int64_t[]){2 + CFT_MAX_NDIM}, 1), c->s + 1, 0);
    }
    return e ? e : isend(c, y, c->s + 1, 3 * m + 1);
}

static cft_array *recv_activation_(step_ctx *c, int m);
static cft_array *recv_activation(step_ctx *c, int m) {
    double t0 = now_s();
    cft_array *x = recv_activation_(c, m);
    c->wait += now_s() - t0;
    return x;
}
/* post the receive of activation m (its aval known from micro-batch 0) */
static cft_array *post_activation(step_ctx *c, int m) {
    if (m >= c->M)
        return NULL;
    cft_array *e = NULL;
    c->act_req[m] =
        cft__dist_irecv("cft_pipeline_step", c->p->g, c->in_aval.dtype, c->in_aval.shape,
                        c->in_aval.ndim, c->s - 1, 3 * m + 1, &c->act_buf[m], &e);
    return e;
}

/* a posted receive, finished (NULL: not posted) */
static cft_array *take(dist_req *r, cft_array *buf) {
    if (cft__dist_finish_here(r) != CFT_OK)
        return cft__fail(cft_last_error(), "%s", cft_last_error_message());
    return buf;
}

static cft_array *recv_activation_(step_ctx *c, int m) {
    if (m > 0 && c->act_req[m]) {
        cft_array *x = take(c->act_req[m], c->act_buf[m]), *e = NULL;
        if (!cft_failed(x))
            e = post_activation(c, m + 1);
        return e ? e : x;
    }
    if (m == 0) {
        cft_array *h =
            cft_dist_recv(c->p->g, CFT_I64, (int64_t[]){2 + CFT_MAX_NDIM}, 1, c->s - 1, 0);
        if (cft_failed(h))
            return h;
        int64_t v[2 + CFT_MAX_NDIM];
        cft_copy_to(h, CFT_I64, v);
        if (v[0] < 0 || v[0] >= CFT_NDTYPES || v[1] < 0 || v[1] > CFT_MAX_NDIM)
            return cft__fail(CFT_E_IO, "cft_pipeline_step: a bad activation header from stage %d",
                             c->s - 1);
        c->in_aval = cft__aval((cft_dtype)v[0], v + 2, (int)v[1]);
    }
    cft_array *x = cft_dist_recv(c->p->g, c->in_aval.dtype, c->in_aval.shape, c->in_aval.ndim,
                                 c->s - 1, 3 * m + 1),
              *e = NULL;
    if (!cft_failed(x))
        e = post_activation(c, m + 1);
    return e ? e : x;
}

/* ---- one micro-batch ---- */

/* the stage's inputs for micro-batch m: params..., x_m (, target_m) */
static void stage_inputs(step_ctx *c, int m, cft_array *x, cft_array **in) {
    memcpy(in, c->pv, sizeof(cft_array *) * (size_t)c->np);
    in[c->np] = x;
    if (c->s == c->S - 1) {
        int64_t b = cft_array_aval(c->target).shape[0] / c->M;
        in[c->np + 1] = cft_slice(c->target, (int64_t[]){m * b}, (int64_t[]){(m + 1) * b}, NULL);
    }
}

static cft_array *forward(step_ctx *c, int m) {
    cft_array *x;
    if (c->s == 0) {
        cft_aval a = cft_array_aval(c->x);
        int64_t b = a.shape[0] / c->M, start[CFT_MAX_NDIM] = {m * b}, stop[CFT_MAX_NDIM];
        memcpy(stop, a.shape, sizeof stop);
        stop[0] = (m + 1) * b;
        x = cft_slice(c->x, start, stop, NULL);
    } else
        x = recv_activation(c, m);
    if (cft_failed(x))
        return x;
    double t0 = now_s();
    cft_array **in = CFT_NEWN(cft_array *, c->np + 2), *y[1];
    if (!in)
        return cft__oom();
    stage_inputs(c, m, x, in);
    cft_fn *pb = NULL;
    if (cft_vjp(c->p->stage, in, y, &pb) != CFT_OK)
        return y[0];
    c->compute += now_s() - t0;
    micro *u = &c->mb[m];
    u->in = x, u->out = cft_array_aval(y[0]), u->live = true;
    u->pb = c->p->o.recompute ? NULL : pb;
    if (++c->live > c->p->stats.peak_live)
        c->p->stats.peak_live = c->live;
    if (c->s == c->S - 1) {
        c->loss = c->loss ? cft_add(c->loss, y[0]) : y[0];
        return NULL;
    }
    cft_array *e = NULL; /* the cotangent of m, awaited from the next stage */
    c->ct_req[m] = cft__dist_irecv("cft_pipeline_step", c->p->g, u->out.dtype, u->out.shape,
                                   u->out.ndim, c->s + 1, 3 * m + 2, &c->ct_buf[m], &e);
    return e ? e : send_activation(c, y[0], m);
}

/* acc + g. The first micro-batch's gradient is copied into a buffer of the
 * step's own, which later ones are added into in place: no new buffer per
 * micro-batch and parameter (each is an allocation the collector counts,
 * and a collection on one stage stalls its neighbours in lockstep). */
static cft_array *accumulate(cft_array *acc, cft_array *g) {
    if (cft_failed(g) || (acc && cft_failed(acc)))
        return acc && cft_failed(acc) ? acc : g;
    cft_aval a = cft_array_aval(g);
    if (g->kind != CFT_K_CONCRETE || (a.dtype != CFT_F32 && a.dtype != CFT_F64))
        return acc ? cft_add(acc, g) : g;
    int64_t n = cft__numel(a.shape, a.ndim);
    if (!acc) {
        acc = cft__alloc(a.dtype, a.shape, a.ndim);
        if (!cft_failed(acc))
            cft_copy_to(g, a.dtype, acc->data);
        return acc;
    }
    cft_array *gc = cft__contig(g);
    if (cft_failed(gc))
        return gc;
    if (a.dtype == CFT_F32) {
        float *d = (float *)acc->data;
        const float *s = cft__ptr(gc);
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i];
    } else {
        double *d = (double *)acc->data;
        const double *s = cft__ptr(gc);
        for (int64_t i = 0; i < n; i++)
            d[i] += s[i];
    }
    cft__keep(gc);
    return acc;
}

static cft_array *backward(step_ctx *c, int m) {
    micro *u = &c->mb[m];
    cft_array *ct;
    if (c->s == c->S - 1) /* d(mean over micro-batches)/d(loss_m) */
        ct = cft_full(1.0 / c->M, u->out.dtype, u->out.shape, u->out.ndim);
    else {
        double t0 = now_s();
        ct = take(c->ct_req[m], c->ct_buf[m]);
        c->wait += now_s() - t0;
    }
    if (cft_failed(ct))
        return ct;
    double t0 = now_s();
    cft_fn *pb = u->pb;
    if (!pb) { /* recompute: the forward again, for its residuals */
        cft_array **in = CFT_NEWN(cft_array *, c->np + 2), *y[1];
        if (!in)
            return cft__oom();
        stage_inputs(c, m, u->in, in);
        if (cft_vjp(c->p->stage, in, y, &pb) != CFT_OK)
            return y[0];
    }
    cft_array **cts = CFT_NEWN(cft_array *, c->np + 2);
    if (!cts)
        return cft__oom();
    if (cft_fn_call(pb, &ct, cts) != CFT_OK)
        return cts[0];
    for (int i = 0; i < c->np; i++)
        c->grads[i] = accumulate(c->grads[i], cts[i]);
    c->compute += now_s() - t0;
    u->pb = NULL, u->live = false, u->in = NULL;
    c->live--;
    return c->s > 0 ? isend(c, cts[c->np], c->s - 1, 3 * m + 2) : NULL;
}

cft_status cft_pipeline_step(cft_pipeline *p, const cft_tree *params, cft_array *x,
                             cft_array *target, cft_array **loss, cft_tree **grads) {
    CFT_API("cft_pipeline_step");
    if (loss)
        *loss = NULL;
    if (!p || p->err) {
        cft_array *e = p ? p->err : cft__fail(CFT_E_ARG, "cft_pipeline_step: NULL pipeline");
        if (grads)
            *grads = cft_tree_fail(e);
        return cft__set_last(e);
    }
    step_ctx c = {.p = p,
                  .params = params,
                  .S = p->g->size,
                  .s = p->g->rank,
                  .M = p->o.micro_batches,
                  .x = x,
                  .target = target};
    c.np = cft_tree_size(params);
    cft_array *e = NULL;
    if (!params || cft_tree_failed(params) || c.np != cft_tree_size(p->like))
        e = cft__fail(CFT_E_ARG, "cft_pipeline_step: parameters unlike the pipeline's");
    if (!e && c.s == 0 && (!x || cft_array_ndim(x) < 1 || cft_array_aval(x).shape[0] % c.M))
        e = cft__fail(CFT_E_SHAPE,
                      "cft_pipeline_step: rank 0 needs a batch whose leading dim "
                      "divides by %d micro-batches",
                      c.M);
    if (!e && c.s == c.S - 1 &&
        (!target || cft_array_ndim(target) < 1 || cft_array_aval(target).shape[0] % c.M))
        e = cft__fail(CFT_E_SHAPE,
                      "cft_pipeline_step: the last rank needs targets whose leading "
                      "dim divides by %d micro-batches",
                      c.M);
    c.pv = CFT_NEWN(cft_array *, c.np + 1);
    c.grads = CFT_NEWN(cft_array *, c.np + 1);
    c.mb = CFT_NEWN(micro, c.M);
    c.sends = CFT_NEWN(dist_req *, 4 * c.M + 1);
    c.act_req = CFT_NEWN(dist_req *, c.M + 1), c.ct_req = CFT_NEWN(dist_req *, c.M + 1);
    c.act_buf = CFT_NEWN(cft_array *, c.M + 1), c.ct_buf = CFT_NEWN(cft_array *, c.M + 1);
    if (!e && (!c.pv || !c.grads || !c.mb || !c.sends || !c.act_req || !c.ct_req || !c.act_buf ||
               !c.ct_buf))
        e = cft__oom();
    if (!e)
        cft_tree_flatten(params, c.pv);
    p->stats.peak_live = 0;
    double t0 = now_s();
    if (!e && p->o.schedule == CFT_PIPE_GPIPE) {
        for (int m = 0; m < c.M && !e; m++)
            e = forward(&c, m);
        for (int m = 0; m < c.M && !e; m++)
            e = backward(&c, m);
    } else if (!e) { /* 1F1B */
        int warm = c.S - c.s - 1 < c.M ? c.S - c.s - 1 : c.M, f = 0, b = 0;
        for (; f < warm && !e; f++)
            e = forward(&c, f);
        while (f < c.M && !e) {
            e = forward(&c, f++);
            if (!e)
                e = backward(&c, b++);
        }
        while (b < c.M && !e)
            e = backward(&c, b++);
    }
    for (int i = 0; i < c.nsends; i++) /* the sends, done (or failed: the deadline) */
        if (cft__dist_finish_here(c.sends[i]) != CFT_OK && !e)
            e = cft__fail(cft_last_error(), "%s", cft_last_error_message());
    p->stats.compute_s = c.compute;
    p->stats.wait_s = c.wait;
    p->stats.step_s = now_s() - t0;
    if (e) {
        if (grads)
            *grads = cft_tree_fail(e);
        return cft__set_last(e);
    }
    if (loss && c.s == c.S - 1)
        *loss = cft_mul_s(c.loss, 1.0 / c.M);
    if (grads)
        *grads = cft_tree_unflatten(params, c.grads);
    return CFT_OK;
}
