/* jit.c: cft_jit, the jitted function: its traces (one per input
 * signature, or one with symbolic dims for dims that change), their
 * instances per concrete shape, locks and caches, the checks of
 * CFT_JIT_REPEAT, and the dispatch to a device or the lane loop. The
 * pipeline, per input signature:
 *
 *   trace -> DCE, CSE, constant folding, simplification (jit_passes.c)
 *   -> fusion groups (fuse.c)
 *   -> first call: run through the eager kernels, recording each group's
 *      operand strides and which results alias which buffers (views)
 *   -> C for every group (emit.c), one compile per plan, cached (cc.c)
 *   -> memory plan: results of kernels and GEMMs that are not returned get
 *      slots in one arena, reused by liveness (a view keeps its base
 *      alive), and row-parallel segments (jit_memory.c, jit_rows.c)
 *   -> later calls: replay the steps (jit_exec.c): compiled kernels, GEMM
 *      into the arena or straight into the returned array, other
 *      primitives eagerly.
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

#include "array/device.h"
#include "array/dim.h"
#include "cft/jit.h"
#include "cft/ops.h"
#include "core/error.h"
#include "core/mem.h"
#include "core/par.h"
#include "core/profile.h"
#include "lower/jit_plan.h"
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

/* ---- tracing and lowering once per splan ---- */

/* flops per equation below which a plan runs on one thread (plan_threads) */
/* (measured with bench_scaling on 2 threads: MAML T = 5, 15-29k flops per
 * equation, ran 1.0-1.46x one thread's time; T = 25, 130-300k, 0.56-0.64x;
 * per-sample gradients of the MLP at B = 64, 145-640k, 0.73-0.83x) */
#define PLAN_PAR_MIN 65536.0

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
    ir = cft__jit_passes(ir);
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
        cft__jit_plan_memory(P);
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
        st = cft__jit_execute(P, in, out);
    } else {
        pthread_mutex_unlock(&J->mu);
        st = cft__jit_execute(P, in, out);
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
    out_dest *od = cft__jit_next_dest; /* the lane loop's rows, for this call only */
    cft__jit_next_dest = NULL;
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
        bool loop = cft__jit_loop_pays(J, nin, in, &size);
        pthread_mutex_unlock(&J->mu);
        if (loop)
            return cft__jit_run_lanes(J, size, nin, in, nout, out);
    }
    cft_array *o1[REPEAT_MAX], *o2[REPEAT_MAX];
    bool rep = jit_repeat() && !J->donate && !od && nout <= REPEAT_MAX;
    rep = rep && repeat_before(J, nin, in, nout, o1, o2);
    donation d = {.donate = J->donate, .in = in};
    donation *saved = cft__jit_donation;
    cft__jit_donation = J->donate ? &d : NULL;
    out_dest *saved_od = cft__jit_exec_dest;
    cft__jit_exec_dest = od;
    cft_status st = call_locked(J, nin, in, nout, out);
    cft__jit_exec_dest = saved_od;
    cft__jit_donation = saved;
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
                if (cft__jit_execute(P, in, out) == CFT_OK) {
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
