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
 * compiled for runs eagerly; results never depend on which path ran. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/mem.h"
#include "lower/lower.h"
#include "trace/fn.h"

static int nthreads = 1;

void cft_set_num_threads(int n) {
    nthreads = n < 1 ? 1 : n;
    openblas_set_num_threads(nthreads);
}
int cft_get_num_threads(void) {
    return nthreads;
}
int cft__num_threads(void) {
    return nthreads;
}

int cft__debug(void) {
    static int level = -1;
    if (level < 0)
        level = getenv("CFT_DEBUG") ? atoi(getenv("CFT_DEBUG")) : 0;
    return level;
}

typedef struct plan {
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
    cft_array **hdr;        /* per var: its arena array */
    char *arena;
    size_t arena_bytes;
    bool busy;
} plan;

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
        bool all = q->nin > 0;
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

static cft_array *run_eqn(const cft_eqn *q, cft_array **env) {
    cft_array *args[q->nin > 0 ? q->nin : 1], *res[q->nout];
    for (int i = 0; i < q->nin; i++)
        args[i] = env[q->in[i]->id];
    cft_aval oav[q->nout];
    for (int o = 0; o < q->nout; o++)
        oav[o] = q->out[o]->aval;
    cft_array *e = cft__run_impl(q->prim, &q->params, q->nin, args, q->nout, oav, res);
    if (e)
        return e;
    for (int o = 0; o < q->nout; o++)
        env[q->out[o]->id] = res[o];
    return NULL;
}

/* operand strides over the group's iteration shape */
static void group_strides(const cft_ir *ir, const cft_group *g, cft_array *const *ops,
                          int64_t (*st)[CFT_MAX_NDIM]) {
    const cft_aval *it = &g->iter;
    int64_t rm[CFT_MAX_NDIM];
    cft__row_major(it->shape, it->ndim, rm);
    const cft_eqn *red = g->reduce ? &ir->eqns[g->eqns[g->neqn - 1]] : NULL;
    for (int k = 0; k < g->nin + g->nout; k++) {
        if (k < g->nin) {
            memcpy(st[k], ops[k]->strides, sizeof(int64_t) * (size_t)it->ndim);
        } else if (red && g->out[k - g->nin] == red->out[0]->id) {
            bool r[CFT_MAX_NDIM] = {0};
            for (int i = 0; i < red->params.n[0]; i++)
                r[red->params.v[0][i]] = true;
            int64_t s = 1;
            for (int d = it->ndim - 1; d >= 0; d--) {
                st[k][d] = r[d] ? 0 : s;
                if (!r[d])
                    s *= it->shape[d];
            }
        } else {
            memcpy(st[k], rm, sizeof rm);
        }
    }
}

static void fill(cft_array *a, const char *init) {
    double v = strtod(init, NULL);
    int64_t n = cft__numel(a->aval.shape, a->aval.ndim);
    if (a->aval.dtype == CFT_F32) {
        float *p = cft__ptr(a);
        for (int64_t i = 0; i < n; i++)
            p[i] = (float)v;
    } else {
        double *p = cft__ptr(a);
        for (int64_t i = 0; i < n; i++)
            p[i] = v;
    }
}

static cft_array *out_array(plan *P, int v, bool use_arena) {
    if (use_arena && P->slot && P->slot[v] >= 0)
        return P->hdr[v];
    const cft_aval *a = P->aval[v];
    return cft__alloc(a->dtype, a->shape, a->ndim);
}

static cft_array *run_group(plan *P, int gi, cft_array **env, bool use_arena, cft_loop *record) {
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
            ops[k] = record ? NULL : out_array(P, g->out[k - g->nin], use_arena);
        if (record) { /* outputs are contiguous: strides depend on the avals only */
            for (int k = g->nin; k < nops; k++)
                ops[k] = ops[0];
        }
        group_strides(ir, g, ops, st);
        cft_loop lp;
        cft__loop_of(&g->iter, st, nops, &lp);
        if (record) {
            *record = lp;
            memcpy(g->sig, lp.sig, sizeof g->sig);
        } else if (!strcmp(lp.sig, g->sig)) {
            for (int k = g->nin; k < nops; k++)
                if (cft_failed(ops[k]))
                    return ops[k];
            if (g->reduce) {
                const cft_eqn *red = &ir->eqns[g->eqns[g->neqn - 1]];
                for (int k = g->nin; k < nops; k++)
                    if (g->out[k - g->nin] == red->out[0]->id)
                        fill(ops[k], red->prim->c_init);
            }
            char *ptrs[CFT_KMAX_OPS];
            int64_t flat[CFT_KMAX_OPS * CFT_MAX_NDIM];
            for (int k = 0; k < nops; k++) {
                ptrs[k] = cft__ptr(ops[k]);
                for (int d = 0; d < lp.nd; d++)
                    flat[k * lp.nd + d] = lp.st[k][d];
            }
            if (cft__numel(g->iter.shape, g->iter.ndim) > 0)
                kern(ptrs, lp.dims, flat, nthreads);
            for (int k = g->nin; k < nops; k++)
                env[g->out[k - g->nin]] = ops[k];
            for (int k = 0; k < nops; k++)
                cft__keep(ops[k]);
            return NULL;
        }
    }
    for (int e = 0; e < g->neqn; e++) { /* eagerly, one equation at a time */
        cft_array *err = run_eqn(&ir->eqns[g->eqns[e]], env);
        if (err)
            return err;
    }
    return NULL;
}

/* ---- first call: record, compile, plan memory ---- */

static void compile_plan(plan *P, cft_loop *loops) {
    size_t len = 0, cap = 4096;
    char *src = cft__new(cap);
    const char *pre = cft__emit_prelude();
    size_t pl = strlen(pre);
    if (pl + 1 > cap)
        cap = pl + 4096, src = cft__realloc(src, cap);
    memcpy(src, pre, pl + 1);
    len = pl;
    for (int g = 0; g < P->ngroups; g++)
        cft__emit_group(P->ir, &P->groups[g], &loops[g], g, &src, &len, &cap);
    if (cft__debug() >= 3)
        fprintf(stderr, "cft: generated source:\n%s\n", src);
    cft_kernel_fn *k = CFT_NEWN(cft_kernel_fn, P->ngroups + 1);
    if (P->ngroups && cft__compile(src, P->ngroups, k))
        P->kernels = k;
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

static cft_status execute(plan *P, cft_array *const *in, cft_array **out) {
    const cft_ir *ir = P->ir;
    bool first = P->runs == 0, use_arena = !first && !P->busy && P->slot;
    if (use_arena && !P->arena && P->arena_bytes) {
        P->arena = cft__new_data(P->arena_bytes);
        if (!P->arena)
            use_arena = false;
        for (int v = 0; v < ir->nvars && P->arena; v++)
            if (P->hdr[v])
                P->hdr[v]->data = P->arena;
    }
    if (use_arena)
        P->busy = true;
    cft_array **env = CFT_NEWN(cft_array *, ir->nvars + 1);
    for (int i = 0; i < ir->nconst; i++)
        env[ir->constvars[i]->id] = ir->constvals[i];
    for (int i = 0; i < ir->nin; i++)
        env[ir->invars[i]->id] = in[i];
    cft_loop *loops = first ? CFT_NEWN(cft_loop, P->ngroups + 1) : NULL;
    if (first) {
        P->root = CFT_NEWN(int, ir->nvars + 1);
        for (int v = 0; v < ir->nvars; v++)
            P->root[v] = v;
    }
    bool timing = cft__debug() >= 4;
    cft_array *err = NULL;
    for (int s = 0; s < P->nsteps && !err; s++) {
        const cft_step *st = &P->steps[s];
        double t0 = timing ? now_ms() : 0;
        if (st->group >= 0) {
            if (first)
                run_group(P, st->group, env, false, &loops[st->group]);
            err = run_group(P, st->group, env, use_arena, NULL);
        } else {
            const cft_eqn *q = &ir->eqns[st->eqn];
            int o = q->out[0]->id;
            /* halves: through the eager impls (computed in f32) */
            bool half = cft_dtype_is_half(q->out[0]->aval.dtype);
            for (int i = 0; i < q->nin; i++)
                half |= cft_dtype_is_half(q->in[i]->aval.dtype);
            if (q->prim->impl_into && q->nout == 1 && !first && !half) {
                cft_array *dst = out_array(P, o, use_arena), *args[q->nin > 0 ? q->nin : 1];
                for (int i = 0; i < q->nin; i++)
                    args[i] = cft__unconj(q->prim, env[q->in[i]->id]);
                err = cft_failed(dst) ? dst : q->prim->impl_into(args, q->nin, &q->params, dst);
                env[o] = dst;
            } else {
                err = run_eqn(q, env);
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
        /* drop what is no longer needed (arena slots are reused anyway) */
        if (st->group < 0) {
            const cft_eqn *q = &ir->eqns[st->eqn];
            for (int i = 0; i < q->nin; i++)
                if (P->last_step[q->in[i]->id] == s)
                    env[q->in[i]->id] = NULL;
        }
    }
    P->busy = false;
    if (err)
        return cft__fail_outs(err, ir->nout, out);
    for (int i = 0; i < ir->nout; i++) {
        out[i] = env[ir->outvars[i]->id];
        if (P->arena && out[i]->data == P->arena) { /* never hand out arena memory */
            const cft_aval *a = &out[i]->aval;
            cft_array *c = cft__contig(out[i]), *fresh = cft__alloc(a->dtype, a->shape, a->ndim);
            if (cft_failed(c) || cft_failed(fresh))
                return cft__fail_outs(cft_failed(c) ? c : fresh, ir->nout, out);
            memcpy(fresh->data, cft__ptr(c),
                   (size_t)cft__numel(a->shape, a->ndim) * cft_dtype_size(a->dtype));
            out[i] = fresh;
        }
    }
    if (first) {
        compile_plan(P, loops);
        plan_memory(P);
        if (cft__debug() >= 2)
            print_groups(P);
    }
    P->runs++;
    return CFT_OK;
}

static plan *build_plan(cft_ir *ir) {
    ir = cft_ir_cse(cft_ir_dce(ir));
    ir = fold_constants(ir);
    ir = simplify(ir);
    if (cft__debug() >= 1) {
        fprintf(stderr, "cft: lowering:\n");
        cft_ir_print(ir, stderr);
    }
    plan *P = CFT_NEW(plan);
    P->ir = ir;
    P->nsteps = cft__fuse(ir, &P->steps, &P->groups, &P->ngroups);
    P->last_step = CFT_NEWN(int, ir->nvars + 1);
    P->aval = CFT_NEWN(const cft_aval *, ir->nvars + 1);
    for (int k = 0; k < ir->neqn; k++)
        for (int o = 0; o < ir->eqns[k].nout; o++)
            P->aval[ir->eqns[k].out[o]->id] = &ir->eqns[k].out[o]->aval;
    for (int v = 0; v < ir->nvars; v++)
        P->last_step[v] = -1;
    for (int s = 0; s < P->nsteps; s++) {
        const cft_step *st = &P->steps[s];
        if (st->group >= 0) {
            const cft_group *g = &P->groups[st->group];
            for (int k = 0; k < g->nin; k++)
                P->last_step[g->in[k]] = s;
        } else {
            const cft_eqn *q = &ir->eqns[st->eqn];
            for (int i = 0; i < q->nin; i++)
                P->last_step[q->in[i]->id] = s;
        }
    }
    for (int i = 0; i < ir->nout; i++)
        P->last_step[ir->outvars[i]->id] = P->nsteps;
    return P;
}

/* ---- the jitted function ---- */

typedef struct jit_cache {
    cft_aval *avals;
    plan *plan;
    struct jit_cache *next;
} jit_cache;

typedef struct {
    cft_fn *f;
    jit_cache *cache;
} jit_env;

/* CFT_DEBUG: why this call plans (and compiles or loads) again */
static void explain(const jit_env *J, int nin, cft_array *const *in) {
    char a[96], b[96];
    if (!J->cache) {
        fprintf(stderr, "cft: jit of %s: first call, tracing and compiling\n", J->f->name);
        return;
    }
    const cft_aval *prev = J->cache->avals; /* the most recent signature */
    for (int i = 0; i < nin; i++) {
        if (cft__aval_eq(&prev[i], &in[i]->aval))
            continue;
        const cft_aval *p = &prev[i], *q = &in[i]->aval;
        if (p->dtype == q->dtype && p->ndim == q->ndim)
            for (int d = 0; d < p->ndim; d++)
                if (p->shape[d] != q->shape[d])
                    fprintf(stderr,
                            "cft: jit of %s: input %d dim %d changed %lld -> %lld: retracing "
                            "(kernels come from the cache when only sizes changed)\n",
                            J->f->name, i, d, (long long)p->shape[d], (long long)q->shape[d]);
        if (p->dtype != q->dtype || p->ndim != q->ndim)
            fprintf(stderr, "cft: jit of %s: input %d changed %s -> %s: retracing\n", J->f->name, i,
                    cft_aval_str(p, a), cft_aval_str(q, b));
        return;
    }
}

static cft_status jit_cb(void *envp, int nin, cft_array *const *in, int nout, cft_array **out) {
    jit_env *J = envp;
    bool concrete = true;
    for (int i = 0; i < nin; i++)
        concrete &= in[i]->kind == CFT_K_CONCRETE;
    if (!concrete || cft__trace_depth() > 0)
        return cft__fn_apply(J->f, in, out);
    jit_cache *c = J->cache;
    for (; c; c = c->next) {
        bool same = true;
        for (int i = 0; i < nin && same; i++)
            same = cft__aval_eq(&c->avals[i], &in[i]->aval);
        if (same)
            break;
    }
    if (!c) {
        if (cft__debug())
            explain(J, nin, in);
        cft_aval *avals = CFT_NEWN(cft_aval, nin + 1);
        for (int i = 0; i < nin; i++)
            avals[i] = in[i]->aval;
        cft_ir *ir = cft_make_ir(J->f, avals);
        if (!ir)
            return cft__fail_outs(cft__fail(cft_last_error(), "%s", cft_last_error_message()), nout,
                                  out);
        for (int i = 0; i < ir->nconst; i++)
            if (ir->constvals[i]->kind != CFT_K_CONCRETE)
                return cft__fn_apply(J->f, in, out);
        c = CFT_NEW(jit_cache);
        c->avals = avals;
        c->plan = build_plan(ir);
        c->next = J->cache;
        J->cache = c;
    }
    return execute(c->plan, in, out);
}

cft_fn *cft_jit(cft_fn *f) {
    if (!f)
        return NULL;
    static bool blas_set;
    if (!blas_set) { /* OpenBLAS follows cft's thread count (default 1) */
        openblas_set_num_threads(nthreads);
        blas_set = true;
    }
    jit_env *J = CFT_NEW(jit_env);
    J->f = f;
    cft_fn *g = cft_fn_named(cft_fn_new(jit_cb, J, f->nin, f->nout), "jit");
    if (g)
        g->direct = true;
    return g;
}
