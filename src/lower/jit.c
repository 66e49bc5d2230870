/* jit.c: cft_jit and the executable plan. The pipeline, per input
 * signature:
 *
 *   trace -> DCE, CSE, constant folding -> fusion groups (fuse.c)
 *   -> first call: run through the eager kernels, recording each group's
 *      operand strides and which results alias which buffers (views)
 *   -> C for every group (emit.c), one compile per plan, cached (cc.c)
 *   -> memory plan: results of kernels and GEMMs that are not returned get
 *      slots in one arena, reused by liveness (a view keeps its base alive)
 *   -> later calls: replay the steps: compiled kernels, GEMM into the arena
 *      or straight into the returned array, other primitives eagerly.
 * A group whose operands arrive with other stride classes than it was
 * compiled for runs eagerly; results never depend on which path ran.
 *
 * Threads: each jitted function has one (recursive) lock over its caches,
 * traces and first runs. A warm plan runs outside the lock in an arena
 * taken from its traced plan's pool, so callers of the same function on
 * several threads each get their own arena; results equal a serial run. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array/device.h"
#include "array/dim.h"
#include "cft/jit.h"
#include "cft/ops.h"
#include "core/error.h"
#include "core/mem.h"
#include "core/par.h"
#include "core/profile.h"
#include "lower/lower.h"
#include "trace/fn.h"

void cft_set_num_threads(int n) {
    cft__set_num_threads(n);
}
int cft_get_num_threads(void) {
    return cft__num_threads_set();
}

int cft__debug(void) {
    static _Atomic int level = -1;
    int l = atomic_load_explicit(&level, memory_order_relaxed);
    if (l < 0) {
        l = getenv("CFT_DEBUG") ? atoi(getenv("CFT_DEBUG")) : 0;
        atomic_store_explicit(&level, l, memory_order_relaxed);
    }
    return l;
}

struct splan;

/* A plan for one set of concrete input shapes (an instance of a traced
 * splan, below): the IR with concrete dims, memory plan, arena. */
typedef struct plan {
    struct splan *S;                 /* the traced plan it instantiates */
    int64_t symval[CFT_DIM_MAXSYMS]; /* the values of S's symbols */
    cft_ir *ir;
    cft_step *steps;
    int nsteps;
    cft_group *groups;
    int ngroups;
    int *last_step;        /* per var: last step reading it (nsteps: returned) */
    const cft_aval **aval; /* per var produced by an equation: its aval */
    int *root;             /* per var: the buffer it is a view of (first call) */
    int runs;
    cft_kernel_fn *kernels; /* per group, NULL entries: not compiled */
    int64_t *slot;          /* per var: arena offset in bytes, -1: none */
    cft_array **hdr;        /* per var: its arena array (data: offset only) */
    size_t arena_bytes;
    cft_dev_consts *on_devices; /* constants and reduction inits per device (jit_device.c) */
    cft_rowseg *segs;           /* row-parallel segments (jit_rows.c) */
    int nsegs;
    int *seg_of;         /* per var: the segment that makes it in rows, -1: none */
    int *seg_at;         /* per step: the segment that starts there, -1: none */
    int64_t *scratch_at; /* per var: its place in a segment's thread buffers, -1: none */
    bool *seg_sum;       /* per var: a segment's sum over its rows */
    bool *seg_later;     /* per step: run after its segment */
    /* per group: the operands' strides of the first run and the kernel's
     * loop over them, set by the first run (under the lock), read by the
     * later ones when their strides are the same (the loop is not fitted
     * again: dims merged, signature built and compared, per call) */
    int64_t **lst;
    cft_loop **lcl;
    int threads; /* the most threads a call uses (1: too little work to split), 0: any */
} plan;

/* flops per equation below which a plan runs on one thread (plan_threads) */
/* (measured with bench_scaling on 2 threads: MAML T = 5, 15-29k flops per
 * equation, ran 1.0-1.46x one thread's time; T = 25, 130-300k, 0.56-0.64x;
 * per-sample gradients of the MLP at B = 64, 145-640k, 0.73-0.83x) */
#define PLAN_PAR_MIN 65536.0

/* An arena: one call's intermediates. A traced plan keeps a pool of them;
 * a call takes one (a concurrent or nested call gets another). */
typedef struct arena {
    char *mem;
    size_t bytes;
    const plan *for_plan; /* hdr is built for this instance */
    cft_array **hdr;      /* per var: its array in mem */
    /* per step: the view the step made last time (a view primitive's, of
     * one of hdr's arrays or of an array from outside: a lane's slice of a
     * batched input), with a copy of the header it viewed (vkey) and its
     * offset less that header's (vdelta). An input laid out alike (aval,
     * strides) gets the same header pointed at its data: an arena serves
     * one call at a time (no lock), the plan never hands such a header out
     * and no later call reads the old one */
    cft_array **vout, *vkey;
    int64_t *vdelta;
    struct arena *next;
} arena;

#define MAX_INSTANCES 8 /* concrete shapes kept per traced plan (the most recent) */

/* One trace of the function: at concrete input avals, or at avals with
 * symbolic dims (then it serves every value of its symbols). Lowered once:
 * fusion groups and kernels are shared by its instances. */
typedef struct splan {
    cft_aval *avals; /* input avals, symbols included */
    int nsym;        /* symbols, bound from the inputs in this order */
    int atom[CFT_DIM_MAXSYMS];
    cft_ir *ir; /* the lowered IR (dims may be symbolic) */
    cft_step *steps;
    int nsteps;
    cft_group *groups; /* iteration shapes may be symbolic; sig recorded once */
    int ngroups;
    int *last_step;
    bool compiled;       /* the first instance recorded the loops and compiled */
    int *root;           /* which results were views of which buffers in that run */
    arena *pool;         /* arenas not in use (guarded by *mu) */
    pthread_mutex_t *mu; /* the jitted function's lock */
    const char *fname;   /* the jitted function's name, for messages */
    bool *warned;        /* the jitted function said it interprets */
    cft_kernel_fn *kernels;
    bool cuda_kernels;         /* the kernels are CUDA C run on the host (cuda-host) */
    plan *inst[MAX_INSTANCES]; /* most recently used first */
    int ninst;
    cft_jit_stats *stats; /* the jitted function's counters */
    cft_loop *loops;      /* the loops recorded at compile time, per group */
    char *cuda_src;       /* its groups as CUDA C, once a device asks (jit_device.c) */
    /* per step, folds of a half product and its convert back to f32
     * (find_folds): the product's step writes the convert's output
     * widened (fold_w: that var, at both steps) and the convert's step
     * (fold_from: the product's step) is skipped; -1 elsewhere */
    int *fold_w, *fold_from;
    struct splan *next;
} splan;

/* ---- passes before lowering ---- */

/* equations whose inputs are all constants are evaluated once, now */
static cft_ir *fold_constants(const cft_ir *ir) {
    cft_array **val = CFT_NEWN(cft_array *, ir->nvars + 1);
    for (int i = 0; i < ir->nconst; i++)
        val[ir->constvars[i]->id] = ir->constvals[i];
    cft_ir d = *ir;
    d.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    d.neqn = 0;
    d.constvars = CFT_NEWN(cft_irvar *, ir->nconst + ir->neqn + 1);
    d.constvals = CFT_NEWN(cft_array *, ir->nconst + ir->neqn + 1);
    memcpy(d.constvars, ir->constvars, sizeof(cft_irvar *) * (size_t)ir->nconst);
    memcpy(d.constvals, ir->constvals, sizeof(cft_array *) * (size_t)ir->nconst);
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        bool all = q->nin > 0 && !cft__eqn_symbolic(q) && /* symbolic: known when it runs */
                   !(q->prim->flags & CFT_PRIM_EFFECT);   /* communication runs every call */
        for (int i = 0; i < q->nin && all; i++)
            all = val[q->in[i]->id] && val[q->in[i]->id]->kind == CFT_K_CONCRETE;
        cft_array *args[q->nin > 0 ? q->nin : 1], *res[q->nout];
        if (all) {
            for (int i = 0; i < q->nin; i++)
                args[i] = val[q->in[i]->id];
            cft_aval oav[q->nout];
            for (int o = 0; o < q->nout; o++)
                oav[o] = q->out[o]->aval;
            if (!cft__run_impl(q->prim, &q->params, q->nin, args, q->nout, oav, res)) {
                for (int o = 0; o < q->nout; o++) {
                    val[q->out[o]->id] = res[o];
                    d.constvars[d.nconst] = q->out[o];
                    d.constvals[d.nconst++] = res[o];
                }
                continue;
            }
        }
        d.eqns[d.neqn++] = *q;
    }
    return cft__ir_dce_outputs(cft__ir_finish(&d), NULL);
}

/* Equations that start asynchronous work (CFT_PRIM_EARLY: a DDP bucket's
 * all_reduce) move to just after the last equation producing their inputs,
 * so the work overlaps everything after (the rest of the backward pass);
 * the others keep their order. */
static cft_ir *schedule_early(const cft_ir *ir) {
    bool any = false;
    for (int k = 0; k < ir->neqn; k++)
        any |= (ir->eqns[k].prim->flags & CFT_PRIM_EARLY) != 0;
    if (!any)
        return (cft_ir *)ir;
    bool *ready = CFT_NEWN(bool, ir->nvars + 1); /* inputs and constants, then as placed */
    bool *placed = CFT_NEWN(bool, ir->neqn + 1);
    for (int i = 0; i < ir->nin; i++)
        ready[ir->invars[i]->id] = true;
    for (int i = 0; i < ir->nconst; i++)
        ready[ir->constvars[i]->id] = true;
    cft_ir d = *ir;
    d.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    d.neqn = 0;
    /* after each equation, place every early one whose inputs now exist */
    for (int k = -1; k < ir->neqn; k++) {
        if (k >= 0 && !(ir->eqns[k].prim->flags & CFT_PRIM_EARLY)) {
            const cft_eqn *q = &ir->eqns[k];
            d.eqns[d.neqn++] = *q;
            placed[k] = true;
            for (int o = 0; o < q->nout; o++)
                ready[q->out[o]->id] = true;
        }
        for (int e = 0; e < ir->neqn; e++) {
            const cft_eqn *q = &ir->eqns[e];
            if (placed[e] || !(q->prim->flags & CFT_PRIM_EARLY))
                continue;
            bool go = true;
            for (int i = 0; i < q->nin && go; i++)
                go = ready[q->in[i]->id];
            if (go) {
                d.eqns[d.neqn++] = *q;
                placed[e] = true;
                for (int o = 0; o < q->nout; o++)
                    ready[q->out[o]->id] = true;
            }
        }
    }
    return cft__ir_finish(&d);
}

/* identities (CFT_PRIM_IDENTITY: stop_gradient) dropped, their readers
 * reading the input: a plan differentiates nothing, and each was a kernel
 * that copied its input */
static cft_ir *drop_identities(const cft_ir *ir) {
    bool any = false;
    for (int k = 0; k < ir->neqn && !any; k++)
        any = (ir->eqns[k].prim->flags & CFT_PRIM_IDENTITY) && ir->eqns[k].nin == 1 &&
              ir->eqns[k].nout == 1;
    if (!any)
        return (cft_ir *)ir;
    cft_irvar **to = CFT_NEWN(cft_irvar *, ir->nvars + 1); /* var -> the var it stands for */
    cft_ir d = *ir;
    d.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    d.outvars = CFT_NEWN(cft_irvar *, ir->nout + 1);
    d.neqn = 0;
    for (int k = 0; k < ir->neqn; k++) {
        cft_eqn q = ir->eqns[k];
        cft_irvar **in = CFT_NEWN(cft_irvar *, q.nin + 1);
        for (int i = 0; i < q.nin; i++)
            in[i] = to[q.in[i]->id] ? to[q.in[i]->id] : q.in[i];
        q.in = in;
        if ((q.prim->flags & CFT_PRIM_IDENTITY) && q.nin == 1 && q.nout == 1 &&
            cft__aval_eq(&q.in[0]->aval, &q.out[0]->aval)) {
            to[q.out[0]->id] = q.in[0];
            continue;
        }
        d.eqns[d.neqn++] = q;
    }
    for (int j = 0; j < ir->nout; j++)
        d.outvars[j] = to[ir->outvars[j]->id] ? to[ir->outvars[j]->id] : ir->outvars[j];
    return cft__ir_finish(&d);
}

/* equations rewritten by their primitives' simplification rules */
typedef struct {
    const cft_ir *ir;
    int *producer; /* var -> eqn index, -1 */
} simp_ctx;

static const cft_eqn *producer_of(void *ctx, int var) {
    simp_ctx *c = ctx;
    return c->producer[var] >= 0 ? &c->ir->eqns[c->producer[var]] : NULL;
}

static cft_ir *simplify(const cft_ir *ir) {
    simp_ctx c = {ir, CFT_NEWN(int, ir->nvars + 1)};
    for (int v = 0; v < ir->nvars; v++)
        c.producer[v] = -1;
    cft_ir d = *ir;
    d.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    bool changed = false;
    for (int k = 0; k < ir->neqn; k++) {
        d.eqns[k] = ir->eqns[k];
        for (int o = 0; o < ir->eqns[k].nout; o++)
            c.producer[ir->eqns[k].out[o]->id] = k;
        cft_eqn repl;
        if (ir->eqns[k].prim->simplify &&
            ir->eqns[k].prim->simplify(&ir->eqns[k], producer_of, &c, &repl)) {
            d.eqns[k] = repl;
            changed = true;
        }
    }
    return changed ? cft__ir_dce_outputs(cft__ir_finish(&d), NULL) : (cft_ir *)ir;
}

/* ---- running steps ---- */

/* x is a host array laid out as key is (kind, aval, strides, conj) */
static bool rebase_fits(const cft_array *key, const cft_array *x) {
    if (x->kind != CFT_K_CONCRETE || key->kind != CFT_K_CONCRETE || x->dev || key->dev ||
        x->conj != key->conj || !x->data || !cft__aval_eq(&x->aval, &key->aval))
        return false;
    return !memcmp(x->strides, key->strides, sizeof(int64_t) * (size_t)x->aval.ndim);
}

static bool is_plan_output(const cft_ir *ir, int v) {
    for (int j = 0; j < ir->nout; j++)
        if (ir->outvars[j]->id == v)
            return true;
    return false;
}

/* The donation of the call being executed (set by jit_cb around it; the
 * step being run is set by execute): an output may be written into a
 * donated input's buffer when nothing reads that input (or a view of it)
 * after this step, or this step reads it only elementwise at the index it
 * writes (an elementwise group: same shape, contiguous). */
typedef struct {
    const bool *donate;
    cft_array *const *in;
    bool used[CFT_FN_MAX_ARGS];
    int64_t reused;
    int step;      /* the step running */
    bool elemwise; /* it is a fused elementwise group (no reduction) */
} donation;
static _Thread_local donation *cur_donation;

static cft_array *donated_output(plan *P, int v) {
    donation *d = cur_donation;
    const cft_ir *ir = P->ir;
    if (!is_plan_output(ir, v) || !P->root)
        return NULL;
    const cft_aval *a = P->aval[v];
    for (int k = 0; k < ir->nin && k < CFT_FN_MAX_ARGS; k++) {
        cft_array *x = d->in[k];
        if (!d->donate[k] || d->used[k] || x->kind != CFT_K_CONCRETE || x->offset != 0 || x->conj ||
            !cft__aval_eq(&x->aval, a) || !cft__is_contig(x))
            continue;
        bool ok = true;
        int id = ir->invars[k]->id;
        for (int w = 0; w < ir->nvars && ok; w++) /* the input and its views: read when? */
            if (P->root[w] == id)
                ok = P->last_step[w] < d->step || (P->last_step[w] == d->step && d->elemwise);
        for (int j = 0; j < ir->nout && ok; j++) /* an output that is (a view of) it */
            ok = P->root[ir->outvars[j]->id] != id;
        for (int j = 0; j < ir->nin && ok; j++) /* passed twice */
            ok = j == k || d->in[j] != x;
        if (!ok)
            continue;
        d->used[k] = true;
        d->reused++;
        return cft__view(x, a->shape, a->ndim, x->strides, 0);
    }
    return NULL;
}

/* Where a lane of the lane loop (run_range) wants its outputs: the rows of
 * the stacked results, so a plan output that a kernel or an impl_into
 * writes lands there and is not copied afterwards. run_range sets
 * next_dest for its call; jit_cb moves it to exec_dest around its own plan
 * run; execute takes it (and clears it, so no nested plan sees it). */
typedef struct {
    cft_array **dst; /* per output; taken (NULL) once used */
    int n;
} out_dest;
static _Thread_local out_dest *next_dest, *exec_dest;

static cft_array *dest_output(plan *P, int v, out_dest *od) {
    const cft_ir *ir = P->ir;
    for (int j = 0; j < ir->nout && j < od->n; j++)
        if (ir->outvars[j]->id == v && od->dst[j] && cft__aval_eq(&od->dst[j]->aval, P->aval[v])) {
            cft_array *d = od->dst[j];
            od->dst[j] = NULL;
            return d;
        }
    return NULL;
}

static cft_array *out_array(plan *P, int v, arena *A, out_dest *od) {
    if (A && P->slot && P->slot[v] >= 0)
        return A->hdr[v];
    cft_array *d = od ? dest_output(P, v, od) : NULL;
    if (d)
        return d;
    if (cur_donation && P->runs > 0) { /* a warm plan: a donated input's buffer, if one fits */
        cft_array *d = donated_output(P, v);
        if (d && !cft_failed(d))
            return d;
    }
    const cft_aval *a = P->aval[v];
    return cft__alloc(a->dtype, a->shape, a->ndim);
}

/* Whether a C kernel starts operand k, a reduction's output, from the
 * identity itself: each row reduced whole into its own element (the inner
 * dim reduced, every outer dim moving the output: emit.c's `own`), so the
 * executor need not fill it first. The CUDA kernels run on the host
 * (cuda-host) read what the output holds. */
static bool own_rows(const plan *P, const cft_loop *lp, int k) {
    if (P->S->cuda_kernels || lp->nd < 2 || lp->st[k][lp->nd - 1] != 0)
        return false;
    for (int d = 0; d < lp->nd; d++) /* no rows at all: no kernel runs, the identity stays */
        if (lp->dims[d] == 0)
            return false;
    for (int d = 0; d < lp->nd - 1; d++)
        if (lp->st[k][d] == 0)
            return false;
    return true;
}

static cft_array *run_group(plan *P, int gi, cft_array **env, arena *A, out_dest *od,
                            cft_loop *record) {
    cft_group *g = &P->groups[gi];
    const cft_ir *ir = P->ir;
    int nops = g->nin + g->nout;
    cft_array *ops[CFT_KMAX_OPS];
    bool fits = nops <= CFT_KMAX_OPS;
    for (int k = 0; k < g->nin && fits; k++)
        fits = env[g->in[k]]->kind == CFT_K_CONCRETE;
    cft_kernel_fn kern = P->kernels && fits ? P->kernels[gi] : NULL;
    if (fits && (kern || record)) {
        int64_t st[CFT_KMAX_OPS][CFT_MAX_NDIM];
        for (int k = 0; k < g->nin; k++)
            ops[k] = env[g->in[k]];
        for (int k = g->nin; k < nops; k++)
            ops[k] = record ? NULL : out_array(P, g->out[k - g->nin], A, od);
        if (record) { /* outputs are contiguous: strides depend on the avals only */
            for (int k = g->nin; k < nops; k++)
                ops[k] = ops[0];
        }
        cft__group_strides(ir, g, ops, st);
        cft_loop lp;
        const cft_loop *lq = &lp;
        int nd = g->iter.ndim;
        bool hit = !record && P->lcl && P->lcl[gi];
        for (int k = 0; k < nops && hit; k++)
            hit = !memcmp(st[k], P->lst[gi] + k * nd, sizeof(int64_t) * (size_t)nd);
        if (hit)
            lq = P->lcl[gi];
        bool fit = !record && (hit || cft__loop_fit(&g->iter, st, nops, g->sig, &lp));
        if (record) {
            cft__loop_of(&g->iter, st, nops, &lp);
            *record = lp;
            memcpy(g->sig, lp.sig, sizeof g->sig);
        }
        if ((record || fit) && !hit && P->runs == 0 && P->lcl) {
            /* the first run (recording, or with the kernels of an earlier
             * instance): kept for the next */
            P->lst[gi] = CFT_NEWN(int64_t, nops * nd + 1);
            for (int k = 0; k < nops; k++)
                memcpy(P->lst[gi] + k * nd, st[k], sizeof(int64_t) * (size_t)nd);
            P->lcl[gi] = CFT_NEW(cft_loop);
            *P->lcl[gi] = lp;
        }
        if (fit) {
            for (int k = g->nin; k < nops; k++)
                if (cft_failed(ops[k]))
                    return ops[k];
            cft_array *acc = NULL; /* a half reduction's f32 accumulator (C kernels) */
            int acc_k = -1;
            if (g->reduce) {
                const cft_eqn *red = &ir->eqns[g->eqns[g->neqn - 1]];
                for (int k = g->nin; k < nops; k++) {
                    if (g->out[k - g->nin] != red->out[0]->id)
                        continue;
                    const char *init = own_rows(P, lq, k) ? NULL : red->prim->c_init;
                    if (g->half_acc && !P->S->cuda_kernels) {
                        if (cft_failed(acc = cft__half_acc(ops[k], init)))
                            return acc;
                        acc_k = k;
                    } else if (init) {
                        cft__fill_init(ops[k], init);
                    }
                }
            }
            char *ptrs[CFT_KMAX_OPS];
            int64_t flat[CFT_KMAX_OPS * CFT_MAX_NDIM];
            for (int k = 0; k < nops; k++) {
                ptrs[k] = cft__ptr(k == acc_k ? acc : ops[k]);
                for (int d = 0; d < lq->nd; d++)
                    flat[k * lq->nd + d] = lq->st[k][d];
            }
            if (cft__numel(g->iter.shape, g->iter.ndim) > 0)
                kern(ptrs, lq->dims, flat, cft__num_threads());
            if (acc)
                cft__half_acc_store(acc, ops[acc_k]);
            for (int k = g->nin; k < nops; k++)
                env[g->out[k - g->nin]] = ops[k];
            for (int k = 0; k < nops; k++)
                cft__keep(ops[k]);
            return NULL;
        }
    }
    /* eagerly, one equation at a time; in a profile, said when a compiled
     * kernel was there but did not fit these operands' strides */
    double t0 = cft__prof() && kern && !record ? cft__prof_now() : 0;
    for (int e = 0; e < g->neqn; e++) {
        cft_array *err = cft__run_eqn(&ir->eqns[g->eqns[e]], env);
        if (err)
            return err;
    }
    if (t0)
        cft__prof_event("op by op: operand strides unlike the kernel's", "kernel", t0, NULL);
    return NULL;
}

/* ---- first call: record, compile, plan memory ---- */

/* CFT_JIT_KERNELS=cuda-host: run the CUDA kernels through their host shim
 * (emit_cuda.c), to test them without a GPU */
static bool cuda_host(void) {
    const char *k = getenv("CFT_JIT_KERNELS");
    return k && !strcmp(k, "cuda-host");
}

static void compile_plan(plan *P, cft_loop *loops) {
    size_t len = 0, cap = 4096;
    char *src;
    bool cxx = cuda_host();
    P->S->cuda_kernels = cxx;
    cft__cuda_dump(P->ir, P->groups, loops, P->ngroups);
    if (cxx) {
        src = cft__emit_cuda_source(P->ir, P->groups, loops, P->ngroups, true);
    } else {
        src = cft__new(cap);
        const char *pre = cft__emit_prelude();
        size_t pl = strlen(pre);
        if (pl + 1 > cap)
            cap = pl + 4096, src = cft__realloc(src, cap);
        memcpy(src, pre, pl + 1);
        len = pl;
        for (int g = 0; g < P->ngroups; g++)
            cft__emit_group(P->ir, &P->groups[g], &loops[g], g, &src, &len, &cap);
    }
    if (cft__debug() >= 3)
        fprintf(stderr, "cft: generated source:\n%s\n", src);
    cft_kernel_fn *k = CFT_NEWN(cft_kernel_fn, P->ngroups + 1);
    char why[768] = "";
    double p0 = cft__prof() ? cft__prof_now() : 0;
    bool compiled = P->ngroups && src && cft__compile(src, P->ngroups, cxx, k, why, sizeof why);
    if (p0)
        cft__prof_event("jit compile", "compile", p0, NULL);
    if (compiled)
        P->kernels = k;
    else if (P->ngroups && !*P->S->warned) {
        *P->S->warned = true;
        const char *quiet = getenv("CFT_JIT_QUIET");
        if (!(quiet && *quiet && strcmp(quiet, "0")) && strcmp(why, "CFT_JIT=0"))
            fprintf(stderr, "cft: cft_jit(%s): cannot compile kernels (%s); interpreting\n",
                    P->S->fname, why);
    }
}

/* The row-parallel segments (jit_rows.c), among the vars that could get
 * arena buffers. What a segment makes and only it reads lives in its
 * threads' own buffers (and in the arena as usual, for a run on one
 * thread, step by step); the rest of what it makes is live in the arena
 * from its first step on, since its threads run its steps at once and no
 * thread may write where another still reads. */
static void plan_rows(plan *P, int *def, int *end, const bool *cand, const bool *out_root) {
    const cft_ir *ir = P->ir;
    bool *slot = CFT_NEWN(bool, ir->nvars + 1);
    for (int v = 0; v < ir->nvars; v++)
        slot[v] = def[v] >= 0 && cand[v] && !out_root[v] && P->root[v] == v &&
                  cft__numel(P->aval[v]->shape, P->aval[v]->ndim) > 0;
    P->seg_at = CFT_NEWN(int, P->nsteps + 1);
    for (int s = 0; s < P->nsteps; s++)
        P->seg_at[s] = -1;
    const char *env = getenv("CFT_JIT_ROWS"); /* 0: no segments */
    if (env && env[0] == '0')
        return;
    P->nsegs =
        cft__rows_find(ir, P->steps, P->nsteps, P->groups, P->kernels, P->aval, slot, P->last_step,
                       P->root, &P->segs, &P->seg_of, &P->seg_sum, &P->seg_later, &P->scratch_at);
    for (int i = 0; i < P->nsegs; i++) {
        const cft_rowseg *g = &P->segs[i];
        P->seg_at[g->first] = i;
        for (int v = 0; v < ir->nvars; v++)
            if (P->scratch_at[v] >= 0 && !P->seg_sum[v]) {
                continue; /* an arena buffer too, for the segment run step by step */
            } else if (def[v] >= g->first && def[v] <= g->last) {
                def[v] = g->first;
                if (end[v] < g->last)
                    end[v] = g->last;
            }
    }
}

static void plan_memory(plan *P) {
    const cft_ir *ir = P->ir;
    int nv = ir->nvars;
    int *def = CFT_NEWN(int, nv + 1), *end = CFT_NEWN(int, nv + 1);
    bool *cand = CFT_NEWN(bool, nv + 1), *out_root = CFT_NEWN(bool, nv + 1);
    for (int v = 0; v < nv; v++)
        def[v] = -1, end[v] = P->last_step[v];
    for (int i = 0; i < ir->nout; i++)
        out_root[P->root[ir->outvars[i]->id]] = true;
    for (int s = 0; s < P->nsteps; s++) {
        const cft_step *st = &P->steps[s];
        if (st->group >= 0) {
            const cft_group *g = &P->groups[st->group];
            for (int k = 0; k < g->nout; k++)
                def[g->out[k]] = s, cand[g->out[k]] = P->kernels != NULL;
        } else {
            const cft_eqn *q = &ir->eqns[st->eqn];
            for (int o = 0; o < q->nout; o++) {
                def[q->out[o]->id] = s;
                cand[q->out[o]->id] = q->prim->impl_into != NULL;
            }
        }
    }
    for (int s = 0; s < P->nsteps; s++) /* a folded convert's output: made at the product */
        if (P->S->fold_w[s] >= 0 && P->S->fold_from[s] >= 0)
            def[P->S->fold_w[s]] = P->S->fold_from[s];
    plan_rows(P, def, end, cand, out_root);
    for (int v = 0; v < nv; v++) /* a view keeps its base alive */
        if (P->root[v] != v && end[v] > end[P->root[v]])
            end[P->root[v]] = end[v];
    P->slot = CFT_NEWN(int64_t, nv + 1);
    P->hdr = CFT_NEWN(cft_array *, nv + 1);
    int64_t *off = CFT_NEWN(int64_t, nv + 1), *size = CFT_NEWN(int64_t, nv + 1);
    int *placed = CFT_NEWN(int, nv + 1), np = 0;
    size_t total = 0;
    for (int s = 0; s < P->nsteps; s++)
        for (int v = 0; v < nv; v++) {
            if (def[v] != s)
                continue;
            P->slot[v] = -1;
            if (!cand[v] || out_root[v] || P->root[v] != v)
                continue;
            const cft_aval *av = P->aval[v];
            int64_t bytes = cft__numel(av->shape, av->ndim) * (int64_t)cft_dtype_size(av->dtype);
            if (bytes == 0)
                continue;
            bytes = (bytes + 63) / 64 * 64;
            int64_t at = 0; /* first fit among the blocks still live at step s */
            for (bool moved = true; moved;) {
                moved = false;
                for (int i = 0; i < np; i++) {
                    int w = placed[i];
                    if (end[w] < s)
                        continue;
                    if (at < off[w] + size[w] && off[w] < at + bytes) {
                        at = off[w] + size[w];
                        moved = true;
                    }
                }
            }
            off[v] = at;
            size[v] = bytes;
            placed[np++] = v;
            if ((size_t)(at + bytes) > total)
                total = (size_t)(at + bytes);
            P->slot[v] = at;
            cft_array *h = CFT_NEW(cft_array);
            h->kind = CFT_K_CONCRETE;
            h->aval = *av;
            cft__row_major(av->shape, av->ndim, h->strides);
            h->offset = at / (int64_t)cft_dtype_size(av->dtype);
            P->hdr[v] = h;
        }
    P->arena_bytes = total;
    if (cft__debug() >= 2) {
        size_t naive = 0;
        for (int i = 0; i < np; i++)
            naive += (size_t)size[placed[i]];
        fprintf(stderr,
                "cft: memory plan: %d buffers in an arena of %zu bytes (%zu without reuse)\n", np,
                total, naive);
    }
}

static void print_groups(const plan *P) {
    for (int s = 0; s < P->nsteps; s++) {
        const cft_step *st = &P->steps[s];
        int si = P->seg_at ? P->seg_at[s] : -1;
        if (si >= 0)
            fprintf(stderr, "  rows %d: steps %d-%d over %lld rows, %zu bytes per thread\n", si, s,
                    P->segs[si].last, (long long)P->segs[si].T, P->segs[si].scratch);
        if (P->seg_later && P->seg_later[s])
            fprintf(stderr, "  (after its segment)");
        if (st->group < 0) {
            fprintf(stderr, "  step %d: %s\n", s, P->ir->eqns[st->eqn].prim->name);
            continue;
        }
        const cft_group *g = &P->groups[st->group];
        fprintf(stderr, "  step %d: group %d [%s] %s:", s, st->group, g->sig,
                cft_aval_str(&g->iter, (char[96]){0}));
        for (int e = 0; e < g->neqn; e++)
            fprintf(stderr, " %s", P->ir->eqns[g->eqns[e]].prim->name);
        fprintf(stderr, " (%d in, %d out)\n", g->nin, g->nout);
    }
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* a copy of x in fresh memory */
static cft_array *copy_out(cft_array *x) {
    if (!cft__is_contig(x))
        return cft__contig(x);
    const cft_aval *a = &x->aval;
    cft_array *y = cft__alloc(a->dtype, a->shape, a->ndim);
    if (!cft_failed(y))
        memcpy(y->data, cft__ptr(x),
               (size_t)cft__numel(a->shape, a->ndim) * cft_dtype_size(a->dtype));
    return y;
}

/* an arena for one call of P, from the pool or new (NULL: none, run
 * without one) */
static arena *take_arena(plan *P) {
    splan *S = P->S;
    pthread_mutex_lock(S->mu);
    arena **pp = &S->pool;
    while (*pp && (*pp)->bytes < P->arena_bytes)
        pp = &(*pp)->next;
    arena *A = *pp;
    if (A)
        *pp = A->next;
    pthread_mutex_unlock(S->mu);
    if (!A) {
        A = CFT_NEW(arena);
        /* room to grow: sizes that increase call by call reallocate rarely */
        size_t want = S->nsym ? P->arena_bytes + P->arena_bytes / 4 : P->arena_bytes;
        if (!A || !(A->mem = cft__new_data(want)))
            return NULL;
        A->bytes = want;
    }
    if (A->for_plan != P) {
        const cft_ir *ir = P->ir;
        A->hdr = CFT_NEWN(cft_array *, ir->nvars + 1);
        for (int v = 0; v < ir->nvars; v++)
            if (P->hdr[v]) {
                A->hdr[v] = CFT_NEW(cft_array);
                *A->hdr[v] = *P->hdr[v];
                A->hdr[v]->data = A->mem;
            }
        A->vout = CFT_NEWN(cft_array *, P->nsteps + 1);
        A->vkey = CFT_NEWN(cft_array, P->nsteps + 1);
        A->vdelta = CFT_NEWN(int64_t, P->nsteps + 1);
        A->for_plan = P;
    }
    return A;
}

static void give_arena(splan *S, arena *A) {
    if (!A)
        return;
    pthread_mutex_lock(S->mu);
    A->next = S->pool;
    S->pool = A;
    pthread_mutex_unlock(S->mu);
}

/* a plan step as a profiler event: a fused kernel named by its primitives,
 * an equation by its primitive, with the input avals */
static void profile_step(const plan *P, const cft_step *st, double t0) {
    char name[160], args[512];
    size_t w = 0, a = 0;
    const cft_eqn *q = st->group >= 0 ? NULL : &P->ir->eqns[st->eqn];
    if (!q) {
        const cft_group *g = &P->groups[st->group];
        w += (size_t)snprintf(name, sizeof name, "kernel[");
        for (int e = 0; e < g->neqn && w < sizeof name; e++)
            w += (size_t)snprintf(name + w, sizeof name - w, "%s%s", e ? "," : "",
                                  P->ir->eqns[g->eqns[e]].prim->name);
        if (w < sizeof name)
            snprintf(name + w, sizeof name - w, "]");
        char av[96];
        snprintf(args, sizeof args, "\"shape\": \"%s\"", cft_aval_str(&g->iter, av));
    } else {
        snprintf(name, sizeof name, "%s", q->prim->name);
        a += (size_t)snprintf(args, sizeof args, "\"inputs\": \"");
        for (int i = 0; i < q->nin && a + 100 < sizeof args; i++) {
            char av[96];
            a += (size_t)snprintf(args + a, sizeof args - a, "%s%s", i ? " " : "",
                                  cft_aval_str(&q->in[i]->aval, av));
        }
        snprintf(args + a, sizeof args - a, "\"");
    }
    cft__prof_event(name, q ? "op" : "kernel", t0, args);
}

static void profile_rows(const plan *P, int si, double t0) {
    const cft_rowseg *g = &P->segs[si];
    char name[64], args[64];
    snprintf(name, sizeof name, "rows[%d steps]", g->last - g->first + 1);
    snprintf(args, sizeof args, "\"rows\": %lld", (long long)g->T);
    cft__prof_event(name, "kernel", t0, args);
}

/* the var a product at step s writes widened (find_folds), or -1: none,
 * or its convert's step lies in a row-parallel segment, which would read
 * the product */
static int fold_here(const plan *P, int s) {
    int w = P->S->fold_w[s];
    if (w < 0 || P->S->fold_from[s] >= 0)
        return -1;
    for (int t = s + 1; t < P->nsteps; t++)
        if (P->S->fold_from[t] == s) {
            for (int i = 0; i < P->nsegs; i++)
                if (P->segs[i].first <= t && t <= P->segs[i].last)
                    return -1;
            return w;
        }
    return -1;
}

static cft_status execute(plan *P, cft_array *const *in, cft_array **out) {
    const cft_ir *ir = P->ir;
    splan *S = P->S;
    bool first = P->runs == 0;
    out_dest *od = exec_dest;
    exec_dest = NULL;
    arena *A = !first && P->slot && P->arena_bytes ? take_arena(P) : NULL;
    cft_array **env = CFT_NEWN(cft_array *, ir->nvars + 1);
    for (int i = 0; i < ir->nconst; i++)
        env[ir->constvars[i]->id] = ir->constvals[i];
    for (int i = 0; i < ir->nin; i++)
        env[ir->invars[i]->id] = in[i];
    /* the first run of the first instance records the loops and compiles;
     * later instances start with the kernels (no arena on their first run) */
    bool record = first && !P->S->compiled;
    cft_loop *loops = record ? CFT_NEWN(cft_loop, P->ngroups + 1) : NULL;
    if (first) {
        P->root = CFT_NEWN(int, ir->nvars + 1);
        P->lst = CFT_NEWN(int64_t *, P->ngroups + 1);
        P->lcl = CFT_NEWN(cft_loop *, P->ngroups + 1);
        for (int v = 0; v < ir->nvars; v++)
            P->root[v] = v;
    }
    bool timing = cft__debug() >= 4, prof = cft__prof();
    cft__prof_in_plan++;
    cft_array *err = NULL;
    int done_to = -1; /* the last step of the segment that ran (its deferred steps still to run) */
    for (int s = 0; s < P->nsteps && !err; s++) {
        const cft_step *st = &P->steps[s];
        if (s <= done_to && !P->seg_later[s])
            continue;
        if (S->fold_from[s] >= 0 && env[S->fold_w[s]]) /* written by the product's step */
            continue;
        double t0 = timing ? now_ms() : 0, p0 = prof ? cft__prof_now() : 0;
        if (cur_donation) {
            cur_donation->step = s;
            cur_donation->elemwise = st->group >= 0 && !P->groups[st->group].reduce;
        }
        int si = !first && (A || !P->arena_bytes) && P->seg_at && !cur_donation && !timing
                     ? P->seg_at[s]
                     : -1;
        if (si >= 0) { /* a row-parallel segment: all its steps at once */
            cft_rows_plan rp = {.ir = ir,
                                .steps = P->steps,
                                .groups = P->groups,
                                .kernels = P->kernels,
                                .cuda_kernels = P->S->cuda_kernels,
                                .segs = P->segs,
                                .seg_of = P->seg_of,
                                .sum = P->seg_sum,
                                .later = P->seg_later,
                                .scratch_at = P->scratch_at,
                                .aval = P->aval,
                                .full = A ? A->hdr : NULL};
            int r = cft__rows_run(&rp, si, env, &err);
            if (r != 0) {
                if (prof)
                    profile_rows(P, si, p0);
                done_to = P->segs[si].last;
                continue;
            }
        }
        if (st->group >= 0) {
            if (record)
                run_group(P, st->group, env, NULL, NULL, &loops[st->group]);
            err = run_group(P, st->group, env, A, od, NULL);
        } else {
            const cft_eqn *q = &ir->eqns[st->eqn];
            int o = q->out[0]->id;
            /* halves: through the eager impls (computed in f32) */
            if (q->prim->impl_into && q->nout == 1 && !first && cft__into_ok(q)) {
                int w = fold_here(P, s);
                cft_array *dst = out_array(P, w >= 0 ? w : o, A, od),
                          *args[q->nin > 0 ? q->nin : 1];
                for (int i = 0; i < q->nin; i++)
                    args[i] = cft__unconj(q->prim, env[q->in[i]->id]);
                if (cft_failed(dst))
                    err = dst;
                else if (w >= 0) /* the convert's output, widened; the product is not kept */
                    err = q->prim->impl_into_wide(args, q->nin, &q->params, q->out[0]->aval.dtype,
                                                  dst);
                else
                    err = q->prim->impl_into(args, q->nin, &q->params, dst);
                env[w >= 0 ? w : o] = dst;
            } else if (A && A->vout[s] && rebase_fits(&A->vkey[s], env[q->in[0]->id])) {
                cft_array *x = env[q->in[0]->id], *v = A->vout[s];
                v->data = x->data; /* the same view of an array laid out alike */
                v->offset = x->offset + A->vdelta[s];
                env[o] = v;
            } else {
                err = cft__run_eqn(q, env);
                /* a view primitive's view (no effect) of one array: kept. Of
                 * the arena, when the plan foresaw it (it shares its input's
                 * buffer); of an outside array, unless the plan returns it
                 * (the caller keeps that header) */
                bool view = (q->prim->flags & (CFT_PRIM_VIEW | CFT_PRIM_VIEW_CONTIG)) &&
                            !(q->prim->flags & CFT_PRIM_EFFECT) && q->nin == 1 && q->nout == 1;
                cft_array *x = view ? env[q->in[0]->id] : NULL, *v = env[o];
                if (!err && A && x && rebase_fits(x, x) && v != x && v->kind == CFT_K_CONCRETE &&
                    v->data == x->data && !v->dev &&
                    (x->data == A->mem ? P->root[o] == P->root[q->in[0]->id]
                                       : !is_plan_output(ir, o)))
                    A->vout[s] = v, A->vkey[s] = *x, A->vdelta[s] = v->offset - x->offset;
                if (!err && A) /* a view the plan did not foresee */
                    for (int k = 0; k < q->nout; k++) {
                        int v = q->out[k]->id;
                        if (env[v]->data == A->mem && P->root[v] == v && P->slot[v] < 0)
                            env[v] = copy_out(env[v]);
                    }
            }
            if (first && !err) /* views share their input's buffer */
                for (int k = 0; k < q->nout; k++)
                    for (int i = 0; i < q->nin; i++)
                        if (env[q->out[k]->id]->data == env[q->in[i]->id]->data)
                            P->root[q->out[k]->id] = P->root[q->in[i]->id];
        }
        if (timing) {
            const char *nm = st->group >= 0 ? "group" : ir->eqns[st->eqn].prim->name;
            fprintf(stderr, "cft: step %3d %-20s %8.3f ms\n", s, nm, now_ms() - t0);
        }
        if (prof)
            profile_step(P, st, p0);
        /* drop what is no longer needed (arena slots are reused anyway) */
        if (st->group < 0) {
            const cft_eqn *q = &ir->eqns[st->eqn];
            for (int i = 0; i < q->nin; i++)
                if (P->last_step[q->in[i]->id] == s)
                    env[q->in[i]->id] = NULL;
        }
    }
    cft__prof_in_plan--;
    if (err) {
        give_arena(S, A);
        return cft__fail_outs(err, ir->nout, out);
    }
    for (int i = 0; i < ir->nout; i++) {
        out[i] = env[ir->outvars[i]->id];
        if (A && out[i]->data == A->mem) { /* never hand out arena memory */
            const cft_aval *a = &out[i]->aval;
            cft_array *c = cft__contig(out[i]), *fresh = cft__alloc(a->dtype, a->shape, a->ndim);
            if (cft_failed(c) || cft_failed(fresh)) {
                give_arena(S, A);
                return cft__fail_outs(cft_failed(c) ? c : fresh, ir->nout, out);
            }
            memcpy(fresh->data, cft__ptr(c),
                   (size_t)cft__numel(a->shape, a->ndim) * cft_dtype_size(a->dtype));
            out[i] = fresh;
        }
    }
    give_arena(S, A);
    if (prof) { /* memory as counters: this plan's arena, the GC heap */
        cft__prof_counter("jit arena", (double)P->arena_bytes / 1048576.0);
        cft__prof_counter("GC heap", (double)cft__gc_heap_bytes() / 1048576.0);
    }
    if (first) {
        if (record) {
            compile_plan(P, loops);
            S->compiled = true;
            S->loops = loops;
            S->kernels = P->kernels;
            for (int g = 0; g < P->ngroups; g++)
                memcpy(S->groups[g].sig, P->groups[g].sig, sizeof S->groups[g].sig);
            S->root = P->root;
            S->stats->compiles += P->kernels != NULL;
            if (P->ngroups && !P->kernels)
                S->stats->interpreted++;
        }
        plan_memory(P);
        if (cft__debug() >= 2)
            print_groups(P);
    }
    if (first) /* under the function's lock (run_plan) */
        P->runs = 1;
    return CFT_OK;
}

/* ---- tracing and lowering once per splan ---- */

/* A product whose half output only a standalone convert back to f32
 * reads (autocast keeps f32 avals, so each of its products is followed by
 * one: a per-example weight gradient written in bf16, read and written
 * again in f32 at memory bandwidth) writes the convert's output itself,
 * widened (its primitive's impl_into_wide: the same bits), and the
 * convert's step is skipped. */
static void find_folds(splan *S) {
    const cft_ir *ir = S->ir;
    S->fold_w = CFT_NEWN(int, S->nsteps + 1);
    S->fold_from = CFT_NEWN(int, S->nsteps + 1);
    int *reads = CFT_NEWN(int, ir->nvars + 1), *made_at = CFT_NEWN(int, ir->nvars + 1);
    for (int s = 0; s < S->nsteps; s++)
        S->fold_w[s] = S->fold_from[s] = -1;
    for (int v = 0; v < ir->nvars; v++)
        made_at[v] = -1;
    for (int k = 0; k < ir->neqn; k++)
        for (int i = 0; i < ir->eqns[k].nin; i++)
            reads[ir->eqns[k].in[i]->id]++;
    for (int i = 0; i < ir->nout; i++)
        reads[ir->outvars[i]->id]++;
    for (int s = 0; s < S->nsteps; s++) {
        const cft_step *st = &S->steps[s];
        if (st->group < 0) {
            const cft_eqn *q = &ir->eqns[st->eqn];
            if (q->nout == 1 && q->prim->impl_into_wide && (q->prim->flags & CFT_PRIM_INTO_HALF) &&
                cft_dtype_is_half(q->out[0]->aval.dtype))
                made_at[q->out[0]->id] = s;
            continue;
        }
        const cft_group *g = &S->groups[st->group];
        if (g->neqn != 1 || g->reduce || g->nin != 1 || g->nout != 1)
            continue;
        const cft_eqn *c = &ir->eqns[g->eqns[0]];
        int v = c->in[0]->id;
        if (!(c->prim->flags & CFT_PRIM_CONVERT) || c->out[0]->aval.dtype != CFT_F32 ||
            made_at[v] < 0 || reads[v] != 1)
            continue;
        S->fold_w[made_at[v]] = S->fold_w[s] = c->out[0]->id;
        S->fold_from[s] = made_at[v];
    }
}

static splan *build_splan(cft_ir *ir, const cft_aval *avals, int nin, cft_jit_stats *stats) {
    ir = cft_ir_cse(cft_ir_dce(ir));
    ir = cft__ir_rewrite(ir); /* e.g. DP-SGD's clipping without per-sample gradients */
    ir = fold_constants(ir);
    ir = drop_identities(ir);
    ir = simplify(ir);
    ir = schedule_early(ir);
    if (cft__debug() >= 1) {
        fprintf(stderr, "cft: lowering:\n");
        cft_ir_print(ir, stderr);
    }
    splan *S = CFT_NEW(splan);
    S->stats = stats;
    S->avals = CFT_NEWN(cft_aval, nin + 1);
    memcpy(S->avals, avals, sizeof(cft_aval) * (size_t)nin);
    for (int i = 0; i < nin; i++)
        for (int d = 0; d < avals[i].ndim; d++) {
            int a = cft__dim_atom(avals[i].shape[d]);
            bool have = a < 0;
            for (int k = 0; k < S->nsym && !have; k++)
                have = S->atom[k] == a;
            if (!have && S->nsym < CFT_DIM_MAXSYMS)
                S->atom[S->nsym++] = a;
        }
    S->ir = ir;
    S->nsteps = cft__fuse(ir, &S->steps, &S->groups, &S->ngroups);
    S->last_step = CFT_NEWN(int, ir->nvars + 1);
    for (int v = 0; v < ir->nvars; v++)
        S->last_step[v] = -1;
    for (int s = 0; s < S->nsteps; s++) {
        const cft_step *st = &S->steps[s];
        if (st->group >= 0) {
            const cft_group *g = &S->groups[st->group];
            for (int k = 0; k < g->nin; k++)
                S->last_step[g->in[k]] = s;
        } else {
            const cft_eqn *q = &ir->eqns[st->eqn];
            for (int i = 0; i < q->nin; i++)
                S->last_step[q->in[i]->id] = s;
        }
    }
    for (int i = 0; i < ir->nout; i++)
        S->last_step[ir->outvars[i]->id] = S->nsteps;
    find_folds(S);
    return S;
}

/* The plan of S for concrete values of its symbols: the IR and the
 * groups' iteration shapes with those values (O(size of the IR), no
 * tracing), sharing S's steps and kernels. NULL (last error set) when a
 * dim cannot be evaluated. */
/* The threads a plan's calls may use, from its work: one when it has too
 * little arithmetic per step for any of them to pay for waking the team
 * (the fork/join of a step's region, the segment's barrier); 0: as many as
 * set. A plan's steps each decide for themselves only on their own work
 * (par.c, PAR_MIN_WORK), and a plan of many small steps lost to one thread:
 * 1.73x on MAML T = 5 with one inner step, 1.29x on the batched gradient
 * at B = 64 (2 threads, measured by bench_scaling on an Intel machine).
 * Its arithmetic is cft__ir_cost's estimate; CFT_PLAN_PAR_MIN sets the
 * flops per equation below which a plan runs on one thread (0: never). */
static int plan_threads(const cft_ir *ir) {
    static _Atomic double min_per_step = -1;
    double m = atomic_load_explicit(&min_per_step, memory_order_relaxed);
    if (m < 0) {
        const char *e = getenv("CFT_PLAN_PAR_MIN");
        m = e && *e ? atof(e) : PLAN_PAR_MIN;
        atomic_store(&min_per_step, m);
    }
    double flops;
    cft__ir_cost(ir, &flops);
    return flops < m * (double)(ir->neqn > 0 ? ir->neqn : 1) ? 1 : 0;
}

static plan *instantiate(splan *S, const int64_t *val) {
    cft_dimenv env = {0};
    for (int k = 0; k < S->nsym; k++)
        cft__dimenv_bind(&env, S->atom[k], val[k]);
    cft_ir *ir = S->nsym ? cft__ir_concretize(S->ir, &env) : S->ir;
    if (!ir)
        return NULL;
    plan *P = CFT_NEW(plan);
    P->S = S;
    memcpy(P->symval, val, sizeof(int64_t) * (size_t)S->nsym);
    P->ir = ir;
    P->steps = S->steps;
    P->nsteps = S->nsteps;
    P->last_step = S->last_step;
    P->ngroups = S->ngroups;
    P->groups = CFT_NEWN(cft_group, S->ngroups + 1);
    memcpy(P->groups, S->groups, sizeof(cft_group) * (size_t)S->ngroups);
    for (int g = 0; g < S->ngroups; g++)
        if (!cft__shape_eval(S->groups[g].iter.shape, S->groups[g].iter.ndim, &env,
                             P->groups[g].iter.shape)) {
            cft__set_last(cft__fail(CFT_E_SHAPE, "cft_jit: a fused loop has a symbolic size "
                                                 "that the inputs do not determine"));
            return NULL;
        }
    P->kernels = S->compiled ? S->kernels : NULL;
    P->aval = CFT_NEWN(const cft_aval *, ir->nvars + 1);
    for (int k = 0; k < ir->neqn; k++)
        for (int o = 0; o < ir->eqns[k].nout; o++)
            P->aval[ir->eqns[k].out[o]->id] = &ir->eqns[k].out[o]->aval;
    if (S->root) {
        /* Which results are views of which buffers does not depend on the
         * sizes: buffers in the arena are contiguous (kernel and GEMM
         * outputs), and the view primitives of contiguous arrays are always
         * views. So the first instance's record serves, the memory plan is
         * made now and even the first call runs in the arena (execute
         * copies out any view it did not foresee). */
        P->root = S->root;
        plan_memory(P);
        P->runs = 1;
    }
    P->threads = plan_threads(ir);
    S->stats->instances++;
    return P;
}

/* ---- the jitted function ---- */

/* symbol names given to dims that change, in order */
static const char *const sym_names[] = {"B", "N", "M", "K", "L", "P", "Q", "R",
                                        "S", "T", "U", "V", "W", "X", "Y", "Z"};

typedef struct {
    cft_fn *f;
    splan *cache;
    int nin;
    cft_aval *ref;               /* the first call's avals: what a change is measured from */
    int8_t (*cls)[CFT_MAX_NDIM]; /* per input dim: its symbol (index into sym_names), -1 */
    int ncls;
    bool need_sym; /* dims became dynamic since the last symbolic trace */
    bool no_sym;   /* symbolic tracing failed: one trace per shape from now on */
    bool warned;   /* said on stderr that it cannot compile */
    cft_jit_stats stats;
    bool *donate;           /* per input: its buffer may hold an output (cft_jit_donate) */
    _Atomic int64_t reused; /* outputs written into donated buffers */
    pthread_mutex_t mu;     /* recursive: caches, traces, first runs */
    /* f is a vmap (fn->mapped): jit(the mapped function), run once per
     * lane when the batched intermediates would not stay in cache; the
     * decision is kept for the last input signature */
    cft_fn *lane;
    cft_fn **lanes; /* one more jit of it per further thread (a jit runs one call at a time) */
    int nlanes;
    cft_aval *loop_sig;
    bool loop_yes;
} jit_env;

/* Does S serve these inputs? Binds S's symbols into val. Sizes 0 and 1
 * never bind a symbol (as PyTorch: they get their own specialisation). */
static bool matches(const splan *S, int nin, cft_array *const *in, int64_t *val) {
    for (int k = 0; k < S->nsym; k++)
        val[k] = -1;
    for (int i = 0; i < nin; i++) {
        const cft_aval *f = &S->avals[i], *x = &in[i]->aval;
        if (f->dtype != x->dtype || f->ndim != x->ndim)
            return false;
        for (int d = 0; d < f->ndim; d++) {
            int64_t fd = f->shape[d], xd = x->shape[d];
            if (!cft__dim_maybe_sym(fd)) {
                if (fd != xd)
                    return false;
                continue;
            }
            int a = cft__dim_atom(fd), k = 0;
            while (k < S->nsym && S->atom[k] != a)
                k++;
            if (k == S->nsym || xd < 2 || (val[k] >= 0 && val[k] != xd))
                return false;
            val[k] = xd;
        }
    }
    return true;
}

static plan *find_instance(splan *S, const int64_t *val) {
    for (int j = 0; j < S->ninst; j++)
        if (!memcmp(S->inst[j]->symval, val, sizeof(int64_t) * (size_t)S->nsym)) {
            plan *P = S->inst[j];
            memmove(&S->inst[1], &S->inst[0], sizeof(plan *) * (size_t)j);
            S->inst[0] = P;
            return P;
        }
    plan *P = instantiate(S, val);
    if (!P)
        return NULL;
    if (S->ninst < MAX_INSTANCES)
        S->ninst++;
    memmove(&S->inst[1], &S->inst[0], sizeof(plan *) * (size_t)(S->ninst - 1));
    S->inst[0] = P;
    return P;
}

static const char *fname(const jit_env *J) {
    return J->f->name ? J->f->name : "fn";
}

static void print_avals(const cft_aval *a, int n) {
    char b[96];
    for (int i = 0; i < n; i++)
        fprintf(stderr, "%s%s", i ? " " : "", cft_aval_str(&a[i], b));
}

/* Mark the dims that differ from the first call as symbolic (sharing a
 * symbol where they were equal to each other in both calls), and split a
 * symbol whose dims now differ. Returns true if that changed anything. */
static bool mark_dynamic(jit_env *J, int nin, cft_array *const *in) {
    bool changed = false;
    /* split: the dims of one symbol that now differ: one symbol per value
     * (the dims with the first value seen keep the old one) */
    const int maxc = (int)(sizeof sym_names / sizeof *sym_names);
    for (int c = 0, nc = J->ncls; c < nc; c++) {
        int64_t vals[CFT_MAX_NDIM * 8];
        int cls_of[CFT_MAX_NDIM * 8], nv = 0;
        for (int i = 0; i < nin; i++)
            for (int d = 0; d < J->ref[i].ndim; d++) {
                if (J->cls[i][d] != c)
                    continue;
                int64_t v = in[i]->aval.shape[d];
                int k = 0;
                while (k < nv && vals[k] != v)
                    k++;
                if (k == nv && nv < CFT_MAX_NDIM * 8) {
                    vals[nv] = v;
                    cls_of[nv] = nv == 0 ? c : J->ncls < maxc ? J->ncls++ : -1;
                    nv++;
                }
                if (k < nv && cls_of[k] >= 0 && cls_of[k] != c) {
                    J->cls[i][d] = (int8_t)cls_of[k], changed = true;
                    if (cft__debug())
                        fprintf(stderr,
                                "cft: cft_jit(%s): input %d dim %d is %lld, not %lld as the "
                                "other dims of %s: retracing with it symbolic (%s)\n",
                                fname(J), i, d, (long long)v, (long long)vals[0], sym_names[c],
                                sym_names[cls_of[k]]);
                }
            }
    }
    /* new dynamic dims, grouped by (first value, this value) */
    int base = J->ncls;
    for (int i = 0; i < nin; i++)
        for (int d = 0; d < J->ref[i].ndim; d++) {
            int64_t r = J->ref[i].shape[d], v = in[i]->aval.shape[d];
            if (J->cls[i][d] >= 0 || r == v)
                continue;
            int c = -1;
            for (int j = 0; j <= i && c < 0; j++)
                for (int e = 0; e < J->ref[j].ndim && c < 0; e++)
                    if ((j < i || e < d) && J->cls[j][e] >= base && J->ref[j].shape[e] == r &&
                        in[j]->aval.shape[e] == v)
                        c = J->cls[j][e];
            if (c < 0) {
                if (J->ncls == maxc)
                    continue; /* out of names: stays specialised */
                c = J->ncls++;
            }
            J->cls[i][d] = (int8_t)c;
            changed = true;
            if (cft__debug())
                fprintf(stderr,
                        "cft: cft_jit(%s): input %d dim %d changed %lld -> %lld: retracing with "
                        "dim symbolic (%s)\n",
                        fname(J), i, d, (long long)r, (long long)v, sym_names[c]);
        }
    return changed;
}

static cft_status fail_last(int nout, cft_array **out) {
    cft_status st = cft_last_error();
    return cft__fail_outs(cft__fail(st ? st : CFT_E_TRACE, "%s", cft_last_error_message()), nout,
                          out);
}

/* Trace f at avals (symbolic or not) into a new splan at the front of the
 * cache. NULL (last error set) on a trace error; *closed false when the IR
 * closes over tracers (then the caller runs f directly). */
static splan *trace(jit_env *J, const cft_aval *avals, bool *closed) {
    *closed = true;
    double p0 = cft__prof() ? cft__prof_now() : 0;
    cft_ir *ir = cft_make_ir(J->f, avals);
    if (p0)
        cft__prof_event("jit trace", "trace", p0, NULL);
    if (!ir)
        return NULL;
    for (int i = 0; i < ir->nconst; i++)
        if (ir->constvals[i]->kind != CFT_K_CONCRETE) {
            *closed = false;
            return NULL;
        }
    J->stats.traces++;
    splan *S = build_splan(ir, avals, J->nin, &J->stats);
    S->mu = &J->mu;
    S->fname = fname(J);
    S->warned = &J->warned;
    S->next = J->cache;
    J->cache = S;
    return S;
}

/* The inputs with every broadcast view (a zero stride along a dim of size
 * over 1: cft_zeros, cft_full, cft_zeros_like) made dense. Kernels are
 * compiled for the strides of the first run, and a group whose operands
 * later arrive with other strides runs op by op: a training step first
 * called with zero-initialised state would run eagerly ever after. */
static cft_array *const *dense_inputs(const plan *P, cft_array *const *in) {
    cft_array **d = NULL;
    for (int i = 0; i < P->ir->nin; i++) {
        const cft_array *x = in[i];
        bool bcast = false;
        for (int k = 0; x->kind == CFT_K_CONCRETE && !x->dev && k < x->aval.ndim; k++)
            bcast |= x->strides[k] == 0 && x->aval.shape[k] > 1;
        if (!bcast)
            continue;
        if (!d) {
            d = CFT_NEWN(cft_array *, P->ir->nin + 1);
            memcpy(d, in, sizeof(cft_array *) * (size_t)P->ir->nin);
        }
        d[i] = cft__contig(in[i]);
    }
    return d ? d : in;
}

/* Run P, called with J->mu held (once). A first run records and compiles,
 * so it stays under the lock; a warm plan runs outside it, in an arena of
 * its own. */
static cft_status run_plan(jit_env *J, plan *P, cft_array *const *in, cft_array **out) {
    in = dense_inputs(P, in);
    int cap = P->threads ? cft__par_cap(P->threads) : -1;
    cft_status st;
    if (P->runs == 0) {
        st = execute(P, in, out);
    } else {
        pthread_mutex_unlock(&J->mu);
        st = execute(P, in, out);
        pthread_mutex_lock(&J->mu);
    }
    if (cap >= 0)
        cft__par_cap(cap);
    return st;
}

/* f itself, outside the lock (user code may run long or call back) */
static cft_status apply_unlocked(jit_env *J, cft_array *const *in, cft_array **out) {
    pthread_mutex_unlock(&J->mu);
    cft_status st = cft__fn_apply(J->f, in, out);
    pthread_mutex_lock(&J->mu);
    return st;
}

static cft_status jit_locked(jit_env *J, int nin, cft_array *const *in, int nout, cft_array **out);

/* ---- a vmap run as a loop over its lanes ---- */

/* Loop when one lane computes a megaflop or more and touches 256 KB or
 * more, and the whole batch 8 MB or more: then the batched plan streams its
 * intermediates through memory while a lane's stay in cache, and a lane has
 * enough work to pay for its call (ensembles, not per-sample gradients).
 * With several threads the lanes are shared among them, each running its
 * own jit of the lane function (measured on the ensemble at 2 threads:
 * 1.55x of one thread's loop with the batched plan, see run_lanes). Kept
 * per input signature. CFT_JIT_VMAP_LOOP=0 / 1: never / always. */
static bool loop_pays(jit_env *J, int nin, cft_array *const *in, int64_t *size) {
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
        next_dest = &od;
        cft_status st = cft_fn_call(fn, args, res);
        next_dest = NULL;
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

static cft_status run_lanes(jit_env *J, int64_t size, int nin, cft_array *const *in, int nout,
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

/* The device of the committed inputs when they all sit on one device whose
 * backend runs kernels; NULL otherwise (the primitive-by-primitive path). */
static const cft_dev *kernel_device(int nin, cft_array *const *in) {
    const cft_dev *d = NULL;
    for (int i = 0; i < nin; i++) {
        const cft_array *x = in[i];
        if (!x->committed && !x->dev)
            continue;
        if (!x->dev || (d && x->dev != d)) /* committed to the host, or two devices */
            return NULL;
        d = x->dev;
    }
    return d && d->b && d->b->run_kernel && !d->err ? d : NULL;
}

/* A plan on a device (jit_device.c): found for the inputs' shapes, or made
 * by running the function once on host copies of them (trace, compile,
 * memory plan), then run there with the backend's kernels. */
static cft_status run_on_device(jit_env *J, const cft_dev *d, int nin, cft_array *const *in,
                                int nout, cft_array **out) {
    int64_t val[CFT_DIM_MAXSYMS];
    plan *P = NULL;
    pthread_mutex_lock(&J->mu);
    for (splan *S = J->cache; S && !P; S = S->next)
        if (matches(S, nin, in, val))
            P = find_instance(S, val);
    if (!P || !P->runs || !P->S->compiled) {
        cft_array *h[nin > 0 ? nin : 1], *tmp[nout > 0 ? nout : 1];
        cft_status st = CFT_OK;
        for (int i = 0; i < nin && st == CFT_OK; i++) {
            h[i] = in[i]->dev ? cft__dev_to_host(in[i], "cft_jit") : in[i];
            if (cft_failed(h[i]))
                st = cft__fail_outs(h[i], nout, out);
        }
        if (st == CFT_OK)
            st = jit_locked(J, nin, h, nout, tmp);
        P = NULL;
        for (splan *S = J->cache; S && !P && st == CFT_OK; S = S->next)
            if (matches(S, nin, in, val))
                P = find_instance(S, val);
        if (st != CFT_OK) {
            pthread_mutex_unlock(&J->mu);
            for (int j = 0; j < nout; j++)
                out[j] = tmp[j];
            return st;
        }
    }
    if (!P || !P->runs || !P->S->compiled) { /* not lowered (the function interprets) */
        pthread_mutex_unlock(&J->mu);
        return cft__fn_apply(J->f, in, out);
    }
    splan *S = P->S;
    if (!S->cuda_src && S->loops && P->kernels)
        S->cuda_src = cft__emit_cuda_source(P->ir, P->groups, S->loops, P->ngroups, false);
    const char *src = P->kernels ? S->cuda_src : NULL;
    pthread_mutex_unlock(&J->mu);
    return cft__plan_run_on_device(d, P->ir, P->steps, P->nsteps, P->groups, P->ngroups, P->aval,
                                   src, &P->on_devices, in, out);
}

/* CFT_JIT_REPEAT=1 (the jit's regression tests set it): every host call
 * of a jitted function runs its plan twice more first, with the same inputs
 * and with fresh copies of them (new buffers: caches keyed by address must
 * not answer), and the three results must agree: a second call that
 * crashes, or answers from stale state, fails the test that made it. The
 * thread count may change between calls (under load), so floats agree to
 * their dtype's rounding, not bit for bit. */
static bool jit_repeat(void) {
    static atomic_int v = -1;
    if (atomic_load(&v) < 0) {
        const char *e = getenv("CFT_JIT_REPEAT");
        atomic_store(&v, e && atoi(e) > 0);
    }
    return atomic_load(&v) > 0;
}

/* a and b agree: exactly for integers and booleans; for floats within
 * their dtype's rounding of the largest finite magnitude (a cold first call
 * runs other kernels than the warm plan, and sums of mixed signs may
 * cancel: relative error alone would flag rounding) */
static bool agree(cft_array *a, cft_array *b) {
    if (cft_failed(a) || cft_failed(b))
        return cft_failed(a) == cft_failed(b);
    cft_dtype dt = cft_array_dtype(a);
    if (!cft_dtype_is_inexact(dt))
        return cft_allclose(a, b, 0, 0, false);
    double tol = dt == CFT_F64 || dt == CFT_C128  ? 1e-12
                 : dt == CFT_F32 || dt == CFT_C64 ? 1e-5
                                                  : 1e-2;
    cft_array *m = cft__contig(cft_astype(cft_abs(b), CFT_F64));
    if (cft_failed(m))
        return false;
    const double *v = cft__ptr(m);
    double big = 0;
    for (int64_t i = 0, n = cft_array_size(m); i < n; i++)
        if (isfinite(v[i]) && v[i] > big)
            big = v[i];
    return cft_allclose(a, b, tol, tol * (big > 1 ? big : 1), true);
}

static cft_status call_locked(jit_env *J, int nin, cft_array *const *in, int nout,
                              cft_array **out) {
    pthread_mutex_lock(&J->mu);
    cft_status st = jit_locked(J, nin, in, nout, out);
    pthread_mutex_unlock(&J->mu);
    return st;
}

/* the two calls before the real one; false: no check this time (too many
 * arguments, an input that cannot be copied, a call that failed: the real
 * call reports it) */
#define REPEAT_MAX 64
static bool repeat_before(jit_env *J, int nin, cft_array *const *in, int nout, cft_array **o1,
                          cft_array **o2) {
    cft_array *copy[REPEAT_MAX];
    if (nin > REPEAT_MAX)
        return false;
    for (int i = 0; i < nin; i++) {
        cft_array *c = cft__contig(in[i]);
        if (cft_failed(c))
            return false;
        cft_aval a = cft_array_aval(c);
        copy[i] = cft__alloc(a.dtype, a.shape, a.ndim);
        if (cft_failed(copy[i]))
            return false;
        memcpy(cft__ptr(copy[i]), cft__ptr(c),
               (size_t)cft__numel(a.shape, a.ndim) * cft_dtype_size(a.dtype));
    }
    cft_status s1 = call_locked(J, nin, in, nout, o1);
    cft_status s2 = call_locked(J, nin, copy, nout, o2);
    return s1 == CFT_OK && s2 == CFT_OK;
}

static cft_status repeat_check(int nout, cft_array **o1, cft_array **o2, cft_array **out) {
    for (int k = 0; k < nout; k++)
        if (!agree(o1[k], out[k]) || !agree(o2[k], out[k])) {
            cft_array *e = cft__fail(CFT_E_ARG,
                                     "cft_jit: CFT_JIT_REPEAT: output %d of the third call "
                                     "differs from the %s call",
                                     k, agree(o1[k], out[k]) ? "second (fresh inputs)" : "first");
            for (int j = 0; j < nout; j++)
                out[j] = e;
            return cft__set_last(e);
        }
    return CFT_OK;
}

static cft_status jit_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    jit_env *J = envp;
    out_dest *od = next_dest; /* the lane loop's rows, for this call only */
    next_dest = NULL;
    bool concrete = true;
    for (int i = 0; i < nin; i++)
        concrete &= in[i]->kind == CFT_K_CONCRETE;
    /* on a device whose backend runs kernels: the plan there; on another
     * device (or committed to one): primitive by primitive through its backend */
    if (concrete && cft__trace_depth() == 0 && cft__dev_involved(nin, in)) {
        const cft_dev *d = kernel_device(nin, in);
        return d ? run_on_device(J, d, nin, in, nout, out) : cft__fn_apply(J->f, in, out);
    }
    if (!concrete || cft__trace_depth() > 0)
        return cft__fn_apply(J->f, in, out);
    if (J->lane && !J->donate) {
        int64_t size;
        pthread_mutex_lock(&J->mu);
        bool loop = loop_pays(J, nin, in, &size);
        pthread_mutex_unlock(&J->mu);
        if (loop)
            return run_lanes(J, size, nin, in, nout, out);
    }
    cft_array *o1[REPEAT_MAX], *o2[REPEAT_MAX];
    bool rep = jit_repeat() && !J->donate && !od && nout <= REPEAT_MAX;
    rep = rep && repeat_before(J, nin, in, nout, o1, o2);
    donation d = {.donate = J->donate, .in = in};
    donation *saved = cur_donation;
    cur_donation = J->donate ? &d : NULL;
    out_dest *saved_od = exec_dest;
    exec_dest = od;
    cft_status st = call_locked(J, nin, in, nout, out);
    exec_dest = saved_od;
    cur_donation = saved;
    if (rep && st == CFT_OK)
        return repeat_check(nout, o1, o2, out);
    if (J->donate && st == CFT_OK) { /* donated inputs are the outputs' now: invalid */
        atomic_fetch_add(&J->reused, d.reused);
        for (int k = 0; k < nin; k++) {
            /* as documented: a view, an input an output is or views, and one
             * passed twice keep their buffers and stay valid (never taken) */
            cft_array *x = in[k];
            bool keep = !J->donate[k] || x->kind != CFT_K_CONCRETE;
            if (!keep && !(k < CFT_FN_MAX_ARGS && d.used[k])) {
                keep = x->offset != 0 || x->conj || !cft__is_contig(x);
                for (int j = 0; j < nout && !keep; j++)
                    keep = out[j] == x || (!cft_failed(out[j]) && out[j]->data == x->data);
                for (int j = 0; j < nin && !keep; j++)
                    keep = j != k && in[j] == x;
            }
            if (keep)
                continue;
            x->kind = CFT_K_ERROR;
            x->err_code = CFT_E_ARG;
            x->err_msg = "this array was donated to a function made by cft_jit_donate; use "
                         "its outputs";
        }
    }
    return st;
}

static cft_status jit_locked(jit_env *J, int nin, cft_array *const *in, int nout, cft_array **out) {
    int64_t val[CFT_DIM_MAXSYMS];
    for (splan *S = J->cache; S; S = S->next)
        if (matches(S, nin, in, val)) {
            bool fresh = true;
            for (int j = 0; j < S->ninst && fresh; j++)
                fresh = memcmp(S->inst[j]->symval, val, sizeof(int64_t) * (size_t)S->nsym) != 0;
            plan *P = find_instance(S, val);
            if (!P)
                break; /* a size the symbolic plan cannot take: specialise below */
            if (fresh && S->nsym && cft__debug()) {
                fprintf(stderr, "cft: cft_jit(%s): new sizes", fname(J));
                for (int k = 0; k < S->nsym; k++)
                    fprintf(stderr, "%s %s = %lld", k ? "," : "", cft__dim_atom_name(S->atom[k]),
                            (long long)val[k]);
                fprintf(stderr, ": same trace and kernels, new memory plan\n");
            }
            return run_plan(J, P, in, out);
        }
    cft_aval *avals = CFT_NEWN(cft_aval, nin + 1);
    for (int i = 0; i < nin; i++)
        avals[i] = in[i]->aval;
    bool closed;
    splan *S = NULL;
    if (!J->ref) { /* first call: specialise on the shapes seen */
        J->ref = avals;
        J->cls = cft__new(sizeof(int8_t[CFT_MAX_NDIM]) * (size_t)(nin + 1));
        memset(J->cls, -1, sizeof(int8_t[CFT_MAX_NDIM]) * (size_t)(nin + 1));
        if (cft__debug()) {
            fprintf(stderr, "cft: cft_jit(%s): first call: tracing at ", fname(J));
            print_avals(avals, nin);
            fprintf(stderr, "\n");
        }
    } else {
        bool same_kind = true; /* dtypes and ranks as in the first call */
        for (int i = 0; i < nin; i++)
            same_kind &= avals[i].dtype == J->ref[i].dtype && avals[i].ndim == J->ref[i].ndim;
        bool small = false; /* a changed dim of size 0 or 1 */
        for (int i = 0; i < nin && same_kind; i++)
            for (int d = 0; d < avals[i].ndim; d++)
                small |= avals[i].shape[d] != J->ref[i].shape[d] && avals[i].shape[d] < 2;
        if (same_kind && !J->no_sym && !small)
            J->need_sym |= mark_dynamic(J, nin, in);
        if (same_kind && !J->no_sym && !small && J->need_sym) {
            cft_aval sav[nin > 0 ? nin : 1];
            for (int i = 0; i < nin; i++) {
                sav[i] = avals[i];
                for (int d = 0; d < avals[i].ndim; d++)
                    if (J->cls[i][d] >= 0)
                        sav[i].shape[d] = cft_dim_sym(sym_names[J->cls[i][d]]);
            }
            S = trace(J, sav, &closed);
            if (!S && !closed)
                return apply_unlocked(J, in, out);
            plan *P = S && matches(S, nin, in, val) ? find_instance(S, val) : NULL;
            if (P) {
                if (cft__debug()) {
                    fprintf(stderr, "cft: cft_jit(%s): traced once for every size: ", fname(J));
                    print_avals(sav, nin);
                    fprintf(stderr, "\n");
                }
                /* the first run decides: an error there (a rule that cannot
                 * take the symbols at run time) falls back to specialising,
                 * which reports the error again if it is the function's own */
                if (execute(P, in, out) == CFT_OK) {
                    J->need_sym = false;
                    J->stats.symbolic_traces++;
                    return CFT_OK;
                }
            }
            if (S) /* traced, but it cannot run: drop it */
                J->cache = S->next;
            J->no_sym = true;
            J->stats.fallback = true;
            if (cft__debug())
                fprintf(stderr,
                        "cft: cft_jit(%s): tracing with symbolic dims failed (%s): "
                        "specialising on every new shape from now on\n",
                        fname(J), cft_last_error_message());
            cft_clear_error();
        } else if (cft__debug()) {
            char a[96], b[96];
            for (int i = 0; i < nin; i++)
                if (!cft__aval_eq(&avals[i], &J->ref[i]))
                    fprintf(stderr, "cft: cft_jit(%s): input %d is %s (first call: %s): %s\n",
                            fname(J), i, cft_aval_str(&avals[i], a), cft_aval_str(&J->ref[i], b),
                            !same_kind ? "retracing for this dtype/rank"
                            : small    ? "retracing (sizes 0 and 1 are never symbolic)"
                                       : "retracing for these shapes");
        }
    }
    S = trace(J, avals, &closed);
    if (!S)
        return closed ? fail_last(nout, out) : apply_unlocked(J, in, out);
    plan *P = find_instance(S, val);
    if (!P)
        return fail_last(nout, out);
    return run_plan(J, P, in, out);
}

cft_fn *cft_jit(cft_fn *f) {
    CFT_API("cft_jit");
    cft_fn *bad = cft__fn_check("cft_jit", f);
    if (bad)
        return bad;
    jit_env *J = CFT_NEW(jit_env);
    if (!J)
        return cft__fn_error(cft__oom(), f->nin, f->nout);
    J->f = f;
    J->nin = f->nin;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&J->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    cft_fn *g = cft_fn_named(cft_fn_new(jit_cb, J, f->nin, f->nout), "jit");
    if (!cft_fn_failed(g) && f->name) { /* the profiler shows what was compiled */
        size_t n = strlen(f->name) + 8;
        char *label = cft__new(n);
        if (label)
            snprintf(label, n, "jit(%s)", f->name), g->label = label;
    }
    if (g)
        g->direct = true;
    if (!cft_fn_failed(g) && f->mapped) /* a vmap: its lanes may run one by one */
        J->lane = cft_jit(f->mapped);
    return g;
}

cft_status cft_jit_to_dot(cft_fn *jitted, FILE *f) {
    CFT_API("cft_jit_to_dot");
    if (!jitted || !f || jitted->cb != jit_cb)
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_jit_to_dot: not a function made by cft_jit"));
    jit_env *J = jitted->env;
    pthread_mutex_lock(&J->mu);
    splan *S = J->cache; /* the most recently used trace comes first */
    int *group = NULL;
    if (S) {
        group = CFT_NEWN(int, S->ir->neqn + 1);
        for (int k = 0; k < S->ir->neqn; k++)
            group[k] = -1;
        for (int g = 0; g < S->ngroups; g++)
            for (int e = 0; e < S->groups[g].neqn; e++)
                group[S->groups[g].eqns[e]] = g;
    }
    pthread_mutex_unlock(&J->mu);
    if (!S)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_jit_to_dot: the function has not been "
                                                  "called yet (nothing is lowered)"));
    return cft__ir_dot(S->ir, group, f);
}

cft_fn *cft_jit_donate(cft_fn *f, const int *donate_argnums, int n) {
    CFT_API("cft_jit_donate");
    cft_fn *g = cft_jit(f);
    if (cft_fn_failed(g))
        return g;
    if (n < 0 || (n > 0 && !donate_argnums) || f->nin > CFT_FN_MAX_ARGS)
        return cft__fn_fail(f->nin, f->nout, CFT_E_ARG, "cft_jit_donate: %d donate_argnums%s", n,
                            n > 0 && !donate_argnums ? " (NULL)" : "");
    jit_env *J = g->env;
    J->donate = CFT_NEWN(bool, f->nin + 1);
    if (!J->donate)
        return cft__fn_error(cft__oom(), f->nin, f->nout);
    for (int i = 0; i < n; i++) {
        int a = donate_argnums[i] < 0 ? donate_argnums[i] + f->nin : donate_argnums[i];
        if (a < 0 || a >= f->nin)
            return cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                                "cft_jit_donate: donate_argnums[%d] = %d is not one of the %d "
                                "inputs",
                                i, donate_argnums[i], f->nin);
        J->donate[a] = true;
    }
    return g;
}

int64_t cft_jit_donated_count(const cft_fn *jitted) {
    if (!jitted || jitted->cb != jit_cb)
        return -1;
    jit_env *J = jitted->env;
    return atomic_load(&J->reused);
}

cft_status cft_jit_stats_of(const cft_fn *jitted, cft_jit_stats *out) {
    CFT_API("cft_jit_stats_of");
    if (!jitted || !out || jitted->cb != jit_cb)
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_jit_stats_of: not a function made by cft_jit"));
    jit_env *J = jitted->env;
    pthread_mutex_lock(&J->mu);
    *out = J->stats;
    pthread_mutex_unlock(&J->mu);
    return CFT_OK;
}
