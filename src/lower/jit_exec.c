/* jit_exec.c: one run of a plan's steps. Fused kernels on their recorded
 * loops, products and other primitives into the arena (impl_into) or
 * straight into a returned array, a donated input's buffer or the lane
 * loop's rows, views made again cheaply, row-parallel segments
 * (jit_rows.c) all at once. The first run goes through the eager kernels,
 * records each group's operand strides and which results view which
 * buffers, then compiles the groups (emit.c, cc.c) and plans memory
 * (jit_memory.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array/device.h"
#include "cft/ops.h"
#include "core/error.h"
#include "core/mem.h"
#include "core/par.h"
#include "core/profile.h"
#include "lower/jit_plan.h"

_Thread_local donation *cft__jit_donation;
_Thread_local out_dest *cft__jit_next_dest, *cft__jit_exec_dest;

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

static cft_array *donated_output(plan *P, int v) {
    donation *d = cft__jit_donation;
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
    if (cft__jit_donation && P->runs > 0) { /* a warm plan: a donated input's buffer, if one fits */
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

cft_status cft__jit_execute(plan *P, cft_array *const *in, cft_array **out) {
    const cft_ir *ir = P->ir;
    splan *S = P->S;
    bool first = P->runs == 0;
    out_dest *od = cft__jit_exec_dest;
    cft__jit_exec_dest = NULL;
    arena *A = !first && P->slot && P->arena_bytes ? cft__jit_take_arena(P) : NULL;
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
        if (cft__jit_donation) {
            cft__jit_donation->step = s;
            cft__jit_donation->elemwise = st->group >= 0 && !P->groups[st->group].reduce;
        }
        int si = !first && (A || !P->arena_bytes) && P->seg_at && !cft__jit_donation && !timing
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
        cft__jit_give_arena(S, A);
        return cft__fail_outs(err, ir->nout, out);
    }
    for (int i = 0; i < ir->nout; i++) {
        out[i] = env[ir->outvars[i]->id];
        if (A && out[i]->data == A->mem) { /* never hand out arena memory */
            const cft_aval *a = &out[i]->aval;
            cft_array *c = cft__contig(out[i]), *fresh = cft__alloc(a->dtype, a->shape, a->ndim);
            if (cft_failed(c) || cft_failed(fresh)) {
                cft__jit_give_arena(S, A);
                return cft__fail_outs(cft_failed(c) ? c : fresh, ir->nout, out);
            }
            memcpy(fresh->data, cft__ptr(c),
                   (size_t)cft__numel(a->shape, a->ndim) * cft_dtype_size(a->dtype));
            out[i] = fresh;
        }
    }
    cft__jit_give_arena(S, A);
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
        cft__jit_plan_memory(P);
        if (cft__debug() >= 2)
            print_groups(P);
    }
    if (first) /* under the function's lock (run_plan) */
        P->runs = 1;
    return CFT_OK;
}
