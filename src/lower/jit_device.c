/* jit_device.c: a jitted function's plan run on a device whose backend
 * runs kernels (cft_backend.run_kernel). The plan is the one the jit made
 * on the host (same fusion groups, same recorded loop signatures); its
 * equations go to the backend one by one through the usual dispatch
 * (cft__run_impl), and each fused group is one of the backend's kernels:
 * the group's CUDA C (lower/emit_cuda.c, emitted once per plan), its
 * outputs allocated on the device (a reduction's pre-filled with its
 * identity), and one argument struct of the operands' device pointers, the
 * collapsed loop's dims and the operands' strides. A group whose loop
 * differs from the recorded one at run time (a view with other strides)
 * runs as its equations instead, as on the host. Also here: eager
 * operations as kernels (the end of the file). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "array/device.h"
#include "cft/jit.h"
#include "core/error.h"
#include "core/mem.h"
#include "core/coop_fns.h"
#include "lower/lower.h"
#include "trace/fn.h"
#include "trace/trace.h"

/* the group's equations one by one (on the device, through dispatch) */
static cft_array *run_eqns(const cft_ir *ir, const cft_group *g, cft_array **env) {
    cft_array *e = NULL;
    for (int k = 0; k < g->neqn && !e; k++)
        e = cft__run_eqn(&ir->eqns[g->eqns[k]], env);
    return e;
}

struct cft_dev_consts {
    const cft_dev *d;
    cft_array **consts;   /* per constant of the IR: its copy on d (NULL: used as it is) */
    cft_array **inits;    /* per group: its reduction output's initial values on d, or NULL */
    _Atomic int runs;     /* calls on d so far */
    cft_dev_graph *graph; /* its recording there (jit_graph.c) */
    cft_dev_consts *next;
};
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;

/* the reduction output of group g (its var), or -1 */
static int red_var(const cft_ir *ir, const cft_group *g) {
    return g->reduce ? ir->eqns[g->eqns[g->neqn - 1]].out[0]->id : -1;
}

/* host constant c on d, in c's own layout where that is as small (a
 * broadcast scalar stays one element with zero strides): the kernels were
 * made for the strides the constants had on the host */
static cft_array *const_on(const cft_dev *d, cft_array *c) {
    const cft_aval *a = &c->aval;
    int64_t span = 1, n = cft__numel(a->shape, a->ndim);
    bool view = !c->conj && n > 0 && !cft__is_contig(c);
    for (int i = 0; i < a->ndim && view; i++) {
        view = c->strides[i] >= 0;
        span += (a->shape[i] - 1) * c->strides[i];
    }
    if (!view || span > n)
        return cft__dev_from_host(d, c, "cft_jit");
    cft_array *buf = cft__dev_alloc(d, "cft_jit", a->dtype, &span, 1);
    if (!cft_failed(buf))
        buf = cft__dev_write(buf, cft__ptr(c), "cft_jit"); /* the span c's elements lie in */
    cft__keep(c);
    return cft_failed(buf) ? buf : cft__view(buf, a->shape, a->ndim, c->strides, 0);
}

/* What the plan keeps on d, made on its first call there: each host
 * constant moved once (not once per call and group), each reduction's
 * initial values once (a call then copies them on the device). NULL with
 * *err on failure. */
static cft_dev_consts *kept_on(const cft_dev *d, const cft_ir *ir, const cft_group *groups,
                               int ngroups, const cft_aval *const *aval, cft_dev_consts **list,
                               cft_array **err) {
    pthread_mutex_lock(&kept_mu);
    cft_dev_consts *k = *list;
    while (k && k->d != d)
        k = k->next;
    if (!k && (k = CFT_NEW(cft_dev_consts))) {
        k->d = d;
        k->consts = CFT_NEWN(cft_array *, ir->nconst + 1);
        k->inits = CFT_NEWN(cft_array *, ngroups + 1);
        for (int i = 0; i < ir->nconst && k->consts && !*err; i++) {
            cft_array *c = ir->constvals[i];
            if (c && c->kind == CFT_K_CONCRETE && !c->dev && !cft_failed(c)) {
                k->consts[i] = const_on(d, c);
                if (cft_failed(k->consts[i]))
                    *err = k->consts[i];
            }
        }
        for (int gi = 0; gi < ngroups && k->inits && !*err; gi++) {
            int v = red_var(ir, &groups[gi]);
            const cft_aval *a = v >= 0 ? aval[v] : NULL;
            if (!a)
                continue;
            cft_array *h = cft__alloc(a->dtype, a->shape, a->ndim);
            if (!cft_failed(h))
                cft__fill_init(h, ir->eqns[groups[gi].eqns[groups[gi].neqn - 1]].prim->c_init);
            k->inits[gi] = cft_failed(h) ? h : cft__dev_from_host(d, h, "cft_jit");
            if (cft_failed(k->inits[gi]))
                *err = k->inits[gi];
        }
        if (!k->consts || !k->inits)
            *err = cft__oom();
        if (!*err)
            k->next = *list, *list = k;
    }
    pthread_mutex_unlock(&kept_mu);
    if (!k && !*err)
        *err = cft__oom();
    return *err ? NULL : k;
}

static cft_array *run_group(const cft_dev *d, const cft_ir *ir, const cft_aval *const *aval,
                            const cft_group *g, int gi, const char *src, const cft_dev_consts *kp,
                            cft_array **env) {
    int nops = g->nin + g->nout;
    if (!src || nops > CFT_KMAX_OPS || !strchr(g->sig, ':')) /* no kernel recorded */
        return run_eqns(ir, g, env);
    cft_array *ops[CFT_KMAX_OPS];
    bool moved[CFT_KMAX_OPS] = {false};
    for (int k = 0; k < g->nin; k++) {
        cft_array *x = env[g->in[k]];
        if (x->kind != CFT_K_CONCRETE)
            return run_eqns(ir, g, env);
        if (!x->dev) /* a constant, or an uncommitted host input */
            x = cft__dev_from_host(d, x, "cft_jit"), moved[k] = true;
        else if (x->dev != d)
            return run_eqns(ir, g, env); /* the dispatch names both devices */
        if (cft_failed(x))
            return x;
        ops[k] = x;
    }
    const cft_eqn *red = g->reduce ? &ir->eqns[g->eqns[g->neqn - 1]] : NULL;
    int red_out = -1;
    for (int k = g->nin; k < nops; k++) {
        int v = g->out[k - g->nin];
        const cft_aval *a = aval[v];
        if (!a)
            return run_eqns(ir, g, env);
        ops[k] = cft__dev_alloc(d, "cft_jit", a->dtype, a->shape, a->ndim);
        if (cft_failed(ops[k]))
            return ops[k];
        if (red && v == red->out[0]->id) { /* pre-filled with the reduction's identity */
            red_out = k;
            const cft_array *init = kp->inits[gi];
            size_t bytes = (size_t)cft__numel(a->shape, a->ndim) * cft_dtype_size(a->dtype);
            if (!init || (bytes && d->b->copy(d->b->ctx, d->index, cft__ptr(ops[k]), cft__ptr(init),
                                              bytes) != 0))
                return cft__dev_fail(d, "cft_jit", "setting a reduction's initial values");
        }
    }
    int64_t st[CFT_KMAX_OPS][CFT_MAX_NDIM];
    cft__group_strides(ir, g, ops, st);
    cft_loop lp;
    if (!cft__loop_fit(&g->iter, st, nops, g->sig, &lp)) { /* the kernel cannot run these */
        for (int k = 0; k < nops; k++)
            if (k >= g->nin || moved[k])
                cft__dev_release(ops[k]);
        return run_eqns(ir, g, env);
    }
    /* the kernel's argument: struct { char *p[nops]; int64_t d[nd]; int64_t s[nops * nd]; } */
    size_t size = sizeof(void *) * (size_t)nops + sizeof(int64_t) * (size_t)(lp.nd * (nops + 1));
    char *args = cft__new(size);
    void **ptrs = CFT_NEWN(void *, nops);
    if (!args || !ptrs)
        return cft__oom();
    int64_t nslot = 1, *dims = (int64_t *)(args + sizeof(void *) * (size_t)nops),
            *strides = dims + lp.nd;
    for (int k = 0; k < nops; k++) {
        ptrs[k] = cft__ptr(ops[k]);
        memcpy(args + sizeof(void *) * (size_t)k, &ptrs[k], sizeof(void *));
        for (int i = 0; i < lp.nd; i++)
            strides[k * lp.nd + i] = lp.st[k][i];
    }
    int64_t nred = 1;
    for (int i = 0; i < lp.nd; i++) {
        dims[i] = lp.dims[i];
        if (red_out < 0 || lp.st[red_out][i] != 0)
            nslot *= lp.dims[i];
        else
            nred *= lp.dims[i];
    }
    if (red_out >= 0) /* tiles of outputs by shares, a block each (coop_fns.h) */
        nslot = cft_coop_threads(nslot, nred);
    char entry[32];
    snprintf(entry, sizeof entry, "cft_g%d", gi);
    cft_dev_kernel k = {src, entry, args, size, nslot, nops, ptrs};
    if (cft__numel(g->iter.shape, g->iter.ndim) > 0 &&
        d->b->run_kernel(d->b->ctx, d->index, &k) != 0)
        return cft__dev_fail(d, "cft_jit", "running a fused kernel");
    for (int k2 = g->nin; k2 < nops; k2++)
        env[g->out[k2 - g->nin]] = ops[k2];
    for (int k2 = 0; k2 < nops; k2++)
        cft__keep(ops[k2]);
    for (int k2 = 0; k2 < g->nin; k2++) /* the kernel's own copies of host operands */
        if (moved[k2])
            cft__dev_release(ops[k2]);
    return NULL;
}

static bool shares(const cft_array *o, cft_array *const *xs, int n) {
    for (int i = 0; i < n; i++)
        if (xs[i] && (xs[i] == o || xs[i]->owner == o))
            return true;
    return false;
}

/* The call's intermediates on the device that share no buffer with an
 * input, a constant or an output go back to the device's cache now: the
 * next call reuses them, instead of the backend allocating afresh until
 * the GC finds them. */
static void release_intermediates(const cft_ir *ir, cft_array **env, cft_array *const *in,
                                  cft_array **out, const cft_dev_consts *kp) {
    for (int v = 0; v <= ir->nvars; v++) {
        cft_array *x = env[v];
        if (!cft__on_device(x) || !x->owner)
            continue;
        const cft_array *o = x->owner;
        if (!shares(o, in, ir->nin) && !shares(o, out, ir->nout) &&
            !shares(o, ir->constvals, ir->nconst) && !shares(o, kp->consts, ir->nconst))
            cft__dev_release(x->owner);
    }
}

/* A contiguous copy of a device view as one kernel of the backend
 * (array/device_copy.c) */
static int contig_kernel(cft_array *x, cft_array **y) {
    const cft_dev *d = x->dev;
    const cft_aval *a = &x->aval;
    size_t es = cft_dtype_size(a->dtype);
    if (x->conj || (es != 1 && es != 2 && es != 4 && es != 8 && es != 16))
        return 0;
    *y = cft__dev_alloc(d, "cft_jit", a->dtype, a->shape, a->ndim);
    if (cft_failed(*y))
        return -1;
    cft_dev_kernel kd;
    if (!cft__dev_copy_kernel(cft__ptr(*y), cft__ptr(x), es, a->shape, x->strides, a->ndim, &kd)) {
        *y = cft__oom();
        return -1;
    }
    if (kd.nslot > 0 && d->b->run_kernel(d->b->ctx, d->index, &kd) != 0) {
        *y = cft__dev_fail(d, "cft_jit", "copying a view into place");
        return -1;
    }
    cft__keep(x);
    return 1;
}

/* the plan's steps into env (inputs in, constants kept on d) */
static cft_array *run_steps(const cft_dev_plan *p, cft_array *const *in, cft_array **env) {
    const cft_ir *ir = p->ir;
    for (int i = 0; i < ir->nconst; i++)
        env[ir->constvars[i]->id] = p->kp->consts[i] ? p->kp->consts[i] : ir->constvals[i];
    for (int i = 0; i < ir->nin; i++)
        env[ir->invars[i]->id] = in[i];
    cft_array *err = NULL;
    for (int s = 0; s < p->nsteps && !err; s++) {
        int gi = p->steps[s].group;
        err = gi >= 0 ? run_group(p->d, ir, p->aval, &p->groups[gi], gi, p->cuda_src, p->kp, env)
                      : cft__run_eqn(&ir->eqns[p->steps[s].eqn], env);
    }
    return err;
}

cft_status cft__plan_run_on_device(const cft_dev *d, const cft_ir *ir, const cft_step *steps,
                                   int nsteps, const cft_group *groups, int ngroups,
                                   const cft_aval *const *aval, const char *cuda_src,
                                   cft_dev_consts **kept, cft_array *const *in, cft_array **out) {
    cft_array *err = NULL;
    cft_dev_consts *kp = kept_on(d, ir, groups, ngroups, aval, kept, &err);
    if (err)
        return cft__fail_outs(err, ir->nout, out);
    cft_dev_plan p = {d, ir, steps, nsteps, groups, aval, cuda_src, kp, contig_kernel};
    int runs = atomic_fetch_add(&kp->runs, 1);
    int g = cft__graph_run(&p, &kp->graph, runs, run_steps, in, out);
    if (g)
        return g > 0 ? CFT_OK : cft__fail_outs(out[0], ir->nout, out);
    cft_array **env = CFT_NEWN(cft_array *, ir->nvars + 1);
    if (!env)
        return cft__fail_outs(cft__oom(), ir->nout, out);
    if ((err = run_steps(&p, in, env)))
        return cft__fail_outs(err, ir->nout, out);
    for (int i = 0; i < ir->nout; i++)
        out[i] = env[ir->outvars[i]->id];
    release_intermediates(ir, env, in, out, kp);
    return CFT_OK;
}

/* ---- eager operations as kernels (CFT_BACKEND_EAGER_KERNELS) ----
 * The dispatch (trace/device_op.c) hands an eager elementwise operation or
 * reduction on such a device to the hook registered here (the constructor
 * sits in this file, which every program with cft_jit links), which keeps
 * one jitted one-operation function per (primitive, parameters) and calls
 * it on the device inputs: its plan runs on the device, the operation as
 * one kernel. A thread-local flag sends the plan's own non-fused steps
 * back to the backend's run, so nothing recurses. */

/* one primitive with its parameters, jitted once */
typedef struct eager_op {
    const cft_prim *p;
    cft_params par;
    int nin, nout;
    cft_fn *jit;
    struct eager_op *next;
} eager_op;
static eager_op *eager_ops; /* static root: the GC sees it */
static pthread_mutex_t eager_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local bool in_eager;

static cft_status eager_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    const eager_op *o = env;
    cft_array *e = cft__bind(o->p, &o->par, nin, in, nout, out);
    return e ? cft__fail_outs(e, nout, out) : CFT_OK;
}

static int eager_kernel(const cft_prim *p, const cft_params *par, int nin, cft_array *const *in,
                        int nout, cft_array **out) {
    if (in_eager) /* the plan's own step of this operation: the backend runs it */
        return 0;
    pthread_mutex_lock(&eager_mu);
    eager_op *o = eager_ops;
    while (o && !(o->p == p && o->nin == nin && !memcmp(&o->par, par, sizeof *par)))
        o = o->next;
    if (!o && (o = CFT_NEW(eager_op))) {
        o->p = p, o->par = *par, o->nin = nin, o->nout = nout;
        o->jit = cft_jit(cft_fn_new(eager_body, o, nin, nout));
        o->next = eager_ops;
        eager_ops = o;
    }
    pthread_mutex_unlock(&eager_mu);
    if (!o)
        return 0;
    in_eager = true;
    cft_status st = cft_fn_call(o->jit, in, out);
    in_eager = false;
    return st == CFT_OK ? 1 : -1;
}

/* named at static link time (-u, cft-static.pc and CMake's cft_static) so
 * that this file, and its constructor below, is linked into every program */
const int cft__jit_device_linked = 1;

__attribute__((constructor)) static void register_eager(void) {
    cft__dev_set_eager(eager_kernel);
    cft__dev_set_contig(contig_kernel);
}
