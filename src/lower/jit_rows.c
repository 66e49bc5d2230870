/* jit_rows.c: row-parallel segments of a plan. A batched plan (vmap over
 * T tasks, models or examples) is mostly steps that compute rows of axis 0
 * from the same rows of earlier results: fused kernels whose outputs keep
 * axis 0, batched GEMMs, views. Where such steps follow one another, each
 * thread runs all of them on its own rows, with one fork and join for the
 * run instead of one per step, and its rows stay in its own cache. Which
 * equations compute rows is said by each primitive (split_rows); a kernel
 * does when no output reduces axis 0. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "core/error.h"
#include "core/mem.h"
#include "core/par.h"
#include "lower/lower.h"
#include "trace/prim.h"
#include "trace/trace.h"

/* Fewer elements written than this in a segment: one thread's steps are
 * cheaper than a fork (a step's own threads still run) */
#define ROWS_MIN_WORK 65536.0
/* Fewer steps of work than this: the fork per step that they save does
 * not pay for the segment's own bookkeeping */
#define ROWS_MIN_STEPS 4

enum { REJECT = -1, WHOLE = 0, ROWS = 1, SUM = 2 };

/* a sum over the rows can be added up from the threads' shares */
static bool summable(cft_dtype dt) {
    return dt == CFT_F32 || dt == CFT_F64;
}

/* a view of its input (or, for a reshape of a strided one, a copy): no
 * arena buffer, cheap to make on every thread and again after */
static bool is_view(const cft_prim *p) {
    return (p->flags & (CFT_PRIM_VIEW | CFT_PRIM_VIEW_CONTIG)) != 0;
}

/* how equation q runs in a segment of T rows (T: 0 when none is open: then
 * its output's axis 0) given which vars are split and which are sums not
 * yet added up (pend); *T_out its T */
static int eqn_rows(const cft_eqn *q, const bool *split, const bool *pend, const bool *has_slot,
                    int64_t T, int64_t *T_out) {
    const cft_prim *p = q->prim;
    bool any = false, sp[CFT_KMAX_OPS] = {0}, slice[CFT_KMAX_OPS], open = T > 0;
    if (q->nout != 1 || q->nin > CFT_KMAX_OPS || (p->flags & (CFT_PRIM_EFFECT | CFT_PRIM_EARLY)))
        return REJECT;
    for (int i = 0; i < q->nin; i++) {
        any |= sp[i] = split[q->in[i]->id];
        if (pend[q->in[i]->id])
            return REJECT;
    }
    const cft_aval *o = &q->out[0]->aval;
    if (!T && o->ndim > 0)
        T = o->shape[0];
    bool into = p->impl_into && cft__into_ok(q), slot = has_slot[q->out[0]->id];
    if (p->split_rows && T > 1) {
        cft_aval in[CFT_KMAX_OPS];
        for (int i = 0; i < q->nin; i++)
            in[i] = q->in[i]->aval;
        cft_params qp;
        int r = p->split_rows(&q->params, in, q->nin, sp, T, T, slice, &qp);
        if (r == ROWS && o->ndim > 0 && o->shape[0] == T && (is_view(p) || (into && slot))) {
            *T_out = T;
            return ROWS;
        }
        if (r == SUM && open && into && !is_view(p) && summable(o->dtype)) { /* any place */
            *T_out = T;
            return SUM;
        }
    }
    return !any && is_view(p) ? WHOLE : REJECT;
}

/* whether group g's reduction sums over axis 0 (its output a sum over the rows) */
static bool group_sums_rows(const cft_ir *ir, const cft_group *g) {
    if (!g->reduce)
        return false;
    const cft_eqn *red = &ir->eqns[g->eqns[g->neqn - 1]];
    for (int i = 0; i < red->params.n[0]; i++)
        if (red->params.v[0][i] == 0)
            return true;
    return false;
}

/* whether group g runs on rows of T (T: 0 when none is open; a group
 * that sums over the rows only joins an open segment) */
static bool group_rows(const cft_ir *ir, const cft_group *g, bool compiled, const bool *pend,
                       const bool *has_slot, int64_t T, int64_t *T_out) {
    if (!compiled || g->iter.ndim < 1 || g->iter.shape[0] < 2 || (T && g->iter.shape[0] != T) ||
        g->nin + g->nout > CFT_KMAX_OPS)
        return false;
    if (group_sums_rows(ir, g)) {
        const cft_eqn *red = &ir->eqns[g->eqns[g->neqn - 1]];
        if (!T || !red->prim->c_simd || strcmp(red->prim->c_simd, "+") ||
            !summable(red->out[0]->aval.dtype))
            return false;
    }
    for (int k = 0; k < g->nin; k++)
        if (pend[g->in[k]])
            return false;
    const cft_eqn *red = g->reduce ? &ir->eqns[g->eqns[g->neqn - 1]] : NULL;
    for (int k = 0; k < g->nout; k++) /* rows go to the arena; a sum goes anywhere */
        if (!has_slot[g->out[k]] && !(red && g->out[k] == red->out[0]->id && T))
            return false;
    *T_out = g->iter.shape[0];
    return true;
}

/* Greedy, in step order: a segment opens at a step that computes rows
 * (not a view) and takes every following step that computes rows of the
 * same T from what it holds in rows, or is a view of whole values; it
 * closes before any other step and ends at its last step of work. */
typedef struct {
    const cft_ir *ir;
    const cft_step *steps;
    const cft_group *groups;
    const cft_kernel_fn *kernels;
    const bool *has_slot;
    cft_rowseg *sv;
    int ns, nsteps, *seg_of, *made_at;
    bool *mark, *none, *pend; /* split, summed over the rows in the open segment; all false */
    bool *sum;                /* per var: a segment's sum over its rows */
    bool *late, *later;       /* per var, per step: deferred to after the open segment */
    int open, nwork, last_work;
    int64_t T;
    double work; /* elements the open segment's steps write */
} finder;

static void close_seg(finder *f) {
    if (f->open < 0)
        return;
    bool keep = f->nwork >= ROWS_MIN_STEPS && f->work >= ROWS_MIN_WORK;
    for (int v = 0; v < f->ir->nvars; v++)
        if (f->mark[v] || f->pend[v]) {
            if (keep && f->made_at[v] <= f->last_work && !f->late[v]) {
                f->seg_of[v] = f->ns;
                f->sum[v] = f->pend[v];
            }
            f->mark[v] = f->pend[v] = f->late[v] = false;
        }
    for (int s = f->open; s < f->nsteps; s++) /* deferred past the end: in their place */
        f->later[s] &= keep && s <= f->last_work;
    if (keep)
        f->sv[f->ns++] = (cft_rowseg){f->open, f->last_work, f->T, 0, 0, NULL};
    f->open = -1, f->nwork = 0, f->work = 0, f->T = 0;
}

/* Step s, which cannot run in rows, can run after the open segment when
 * it reads none of the segment's rows: deferred there, in step order, and
 * nothing in the segment may read what it makes. So a gradient's sum added
 * to another between two products over the rows does not end the
 * segment. */
static bool defer(finder *f, int s) {
    const cft_step *st = &f->steps[s];
    const cft_group *g = st->group >= 0 ? &f->groups[st->group] : NULL;
    const cft_eqn *q = g ? NULL : &f->ir->eqns[st->eqn];
    if (q && (q->prim->flags & (CFT_PRIM_EFFECT | CFT_PRIM_EARLY)))
        return false;
    int nin = g ? g->nin : q->nin, nout = g ? g->nout : q->nout;
    for (int i = 0; i < nin; i++)
        if (f->mark[g ? g->in[i] : q->in[i]->id])
            return false;
    for (int k = 0; k < nout; k++) {
        int v = g ? g->out[k] : q->out[k]->id;
        f->late[v] = f->pend[v] = true;
        f->made_at[v] = s;
    }
    f->later[s] = true;
    return true;
}

/* how step s runs in the open segment (or a new one when none is open) */
static int step_rows(finder *f, int s, int64_t *t) {
    const cft_step *st = &f->steps[s];
    int64_t T = f->open >= 0 ? f->T : 0;
    if (st->group >= 0)
        return group_rows(f->ir, &f->groups[st->group], f->kernels && f->kernels[st->group],
                          f->pend, f->has_slot, T, t)
                   ? ROWS
                   : REJECT;
    return eqn_rows(&f->ir->eqns[st->eqn], f->open >= 0 ? f->mark : f->none, f->pend, f->has_slot,
                    T, t);
}

static int64_t padded_bytes(const cft_aval *a) {
    int64_t b = cft__numel(a->shape, a->ndim) * (int64_t)cft_dtype_size(a->dtype);
    return (b + 63) / 64 * 64;
}

/* Each thread's own buffer for what segment si makes and reads only
 * inside it: first fit, in step order, by the steps that read it last
 * (views of it included), at the size of T rows (any thread's fewer rows
 * fit the same places). */
static void plan_scratch(const finder *f, int si, const int *last_step, const int *root,
                         const cft_aval *const *aval, int64_t *at) {
    cft_rowseg *g = &f->sv[si];
    int nv = f->ir->nvars;
    int *end = CFT_NEWN(int, nv + 1), *placed = CFT_NEWN(int, nv + 1), np = 0;
    bool *own = CFT_NEWN(bool, nv + 1);
    for (int v = 0; v < nv; v++)
        own[v] = f->seg_of[v] == si && f->has_slot[v] && root[v] == v;
    for (int v = 0; v < nv; v++) { /* read after the segment, itself or by a view: arena */
        int r = root[v];
        if (last_step[v] > g->last)
            own[r] = false;
        if (end[r] < last_step[v])
            end[r] = last_step[v];
    }
    for (int v = 0; v < nv; v++) /* each thread's share of a sum, kept to be added up after */
        if (f->sum[v] && f->seg_of[v] == si) {
            own[v] = true;
            if (end[v] < g->last)
                end[v] = g->last;
        }
    size_t total = 0;
    for (int s = g->first; s <= g->last; s++)
        for (int v = 0; v < nv; v++) {
            if (!own[v] || f->made_at[v] != s)
                continue;
            int64_t bytes = padded_bytes(aval[v]);
            int64_t off = 0;
            for (bool moved = true; moved;) {
                moved = false;
                for (int i = 0; i < np; i++) {
                    int w = placed[i];
                    int64_t wb = padded_bytes(aval[w]);
                    if (end[w] >= s && off < at[w] + wb && at[w] < off + bytes) {
                        off = at[w] + wb;
                        moved = true;
                    }
                }
            }
            at[v] = off;
            placed[np++] = v;
            if ((size_t)(off + bytes) > total)
                total = (size_t)(off + bytes);
        }
    g->scratch = total;
}

/* the views of segment g to make again after it: those a later or
 * deferred step reads, and the views they are made from */
static void plan_again(const finder *f, cft_rowseg *g, const int *last_step) {
    const cft_ir *ir = f->ir;
    bool *need = CFT_NEWN(bool, ir->nvars + 1);
    bool *again = CFT_NEWN(bool, g->last - g->first + 1);
    for (int s = g->last; s >= g->first; s--) {
        const cft_step *st = &f->steps[s];
        if (st->group >= 0) {
            const cft_group *gr = &f->groups[st->group];
            for (int k = 0; k < gr->nin && f->later[s]; k++)
                need[gr->in[k]] = true;
            continue;
        }
        const cft_eqn *q = &ir->eqns[st->eqn];
        bool view = is_view(q->prim) && !f->later[s], use = f->later[s];
        for (int k = 0; view && k < q->nout; k++)
            use |= last_step[q->out[k]->id] > g->last || need[q->out[k]->id];
        if (!use)
            continue;
        again[s - g->first] = view;
        for (int i = 0; i < q->nin; i++)
            need[q->in[i]->id] = true;
    }
    g->again = CFT_NEWN(int, g->last - g->first + 1);
    for (int s = g->first; s <= g->last; s++)
        if (again[s - g->first])
            g->again[g->nagain++] = s;
}

int cft__rows_find(const cft_ir *ir, const cft_step *steps, int nsteps, const cft_group *groups,
                   const cft_kernel_fn *kernels, const cft_aval *const *aval, const bool *has_slot,
                   const int *last_step, const int *root, cft_rowseg **segs, int **seg_of,
                   bool **sum, bool **later, int64_t **scratch_at) {
    int nv = ir->nvars + 1;
    finder f = {.ir = ir,
                .steps = steps,
                .groups = groups,
                .kernels = kernels,
                .has_slot = has_slot,
                .sv = CFT_NEWN(cft_rowseg, nsteps + 1),
                .seg_of = CFT_NEWN(int, nv),
                .made_at = CFT_NEWN(int, nv),
                .mark = CFT_NEWN(bool, nv),
                .none = CFT_NEWN(bool, nv),
                .pend = CFT_NEWN(bool, nv),
                .sum = CFT_NEWN(bool, nv),
                .late = CFT_NEWN(bool, nv),
                .later = CFT_NEWN(bool, nsteps + 1),
                .nsteps = nsteps,
                .open = -1,
                .last_work = -1};
    for (int v = 0; v < nv; v++)
        f.seg_of[v] = f.made_at[v] = -1;
    for (int s = 0; s < nsteps; s++) {
        int64_t t = 0;
        int how = step_rows(&f, s, &t);
        if (how == REJECT && f.open >= 0) {
            if (defer(&f, s))
                continue;
            close_seg(&f);
            how = step_rows(&f, s, &t);
        }
        if (how != ROWS && how != SUM)
            continue; /* a view of whole values: inside a segment, every thread makes it */
        const cft_step *st = &steps[s];
        bool work = st->group >= 0 || !is_view(ir->eqns[st->eqn].prim);
        if (f.open < 0) {
            if (!work)
                continue;
            f.open = s, f.T = t;
        }
        const cft_group *g = st->group >= 0 ? &groups[st->group] : NULL;
        int nout = g ? g->nout : 1;
        const cft_eqn *red = g && g->reduce ? &ir->eqns[g->eqns[g->neqn - 1]] : NULL;
        for (int k = 0; k < nout; k++) {
            int v = g ? g->out[k] : ir->eqns[st->eqn].out[0]->id;
            bool sum = how == SUM || (red && v == red->out[0]->id && group_sums_rows(ir, g));
            f.pend[v] |= sum;
            f.mark[v] |= !sum;
            f.made_at[v] = s;
        }
        if (work) {
            const cft_aval *a = g ? &g->iter : &ir->eqns[st->eqn].out[0]->aval;
            f.work += (double)cft__numel(a->shape, a->ndim);
            f.nwork++, f.last_work = s;
        }
    }
    close_seg(&f);
    int64_t *at = CFT_NEWN(int64_t, nv);
    for (int v = 0; v < nv; v++)
        at[v] = -1;
    for (int i = 0; i < f.ns; i++) {
        plan_scratch(&f, i, last_step, root, aval, at);
        plan_again(&f, &f.sv[i], last_step);
    }
    *segs = f.sv;
    *seg_of = f.seg_of;
    *sum = f.sum;
    *later = f.later;
    *scratch_at = at;
    return f.ns;
}

/* ---- running a segment ---- */

typedef struct {
    const cft_rows_plan *rp;
    int si, nth;
    cft_array *const *env; /* the plan's values before the segment */
    char **bufs;           /* each thread's own buffer */
    cft_array *_Atomic err;
    _Atomic bool declined;
    /* the segment's sums over its rows: where each goes, and where its
     * share lies in each thread's buffer; added up by the threads, each
     * its own part of all their elements, after the segment */
    struct share_sum {
        int v;
        cft_array *dst;
        int64_t at, n;
    } * sums;
    int nsums;
    int64_t total; /* elements of all the sums */
    /* per var: the whole array a value made in rows goes to when the
     * arena does not hold it (no arena, or a value it has no slot for:
     * an output), allocated before the threads start (NULL: the arena's) */
    cft_array **made;
} rows_job;

/* elements [lo, hi) of all the sums, in thread order: y = share 0 + share
 * 1 + ... (the same sums for the same thread count) */
#define ADD_SHARES(T)                                                                              \
    {                                                                                              \
        T *y = (T *)cft__ptr(S->dst) + a;                                                          \
        memcpy(y, (const T *)(J->bufs[0] + S->at) + a, sizeof(T) * (size_t)(b - a));               \
        for (int t = 1; t < J->nth; t++) {                                                         \
            const T *x = (const T *)(J->bufs[t] + S->at) + a;                                      \
            for (int64_t i = 0; i < b - a; i++)                                                    \
                y[i] += x[i];                                                                      \
        }                                                                                          \
    }
static void add_shares(const rows_job *J, int64_t lo, int64_t hi) {
    int64_t base = 0;
    for (int k = 0; k < J->nsums; base += J->sums[k].n, k++) {
        const struct share_sum *S = &J->sums[k];
        int64_t a = lo > base ? lo - base : 0, b = hi - base < S->n ? hi - base : S->n;
        if (a >= b)
            continue;
        if (S->dst->aval.dtype == CFT_F32)
            ADD_SHARES(float)
        else
            ADD_SHARES(double)
    }
}

/* rows [lo, lo + n) of x's axis 0 */
static cft_array *rows_of(const cft_array *x, int64_t lo, int64_t n) {
    int64_t shape[CFT_MAX_NDIM];
    memcpy(shape, x->aval.shape, sizeof(int64_t) * (size_t)x->aval.ndim);
    shape[0] = n;
    return cft__view(x, shape, x->aval.ndim, x->strides, x->offset + lo * x->strides[0]);
}

/* A thread's own buffer, kept for its next segment and freed when the
 * thread exits (a pthread key's destructor) */
static _Thread_local char *own_buf;
static _Thread_local size_t own_cap;
static pthread_key_t own_key;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;
static void own_key_make(void) {
    pthread_key_create(&own_key, free);
}
static char *own_scratch(size_t bytes) {
    if (bytes <= own_cap)
        return own_buf;
    size_t want = (bytes + bytes / 4 + 4095) / 4096 * 4096;
    char *p = aligned_alloc(64, want);
    if (!p)
        return NULL;
    pthread_once(&own_once, own_key_make);
    free(own_buf);
    own_buf = p, own_cap = want;
    pthread_setspecific(own_key, p);
    return p;
}

/* where var v's rows [lo, lo + n) go: the thread's buffer, or the arena */
static cft_array *out_rows(const rows_job *J, int v, char *buf, int64_t lo, int64_t n) {
    const cft_rows_plan *rp = J->rp;
    bool sum = rp->sum[v];
    if (rp->scratch_at[v] < 0)
        return rows_of(J->made[v] ? J->made[v] : rp->full[v], lo, n);
    cft_array *h = CFT_NEW(cft_array);
    h->kind = CFT_K_CONCRETE;
    h->aval = *rp->aval[v];
    if (!sum)
        h->aval.shape[0] = n;
    cft__row_major(h->aval.shape, h->aval.ndim, h->strides);
    h->data = buf;
    h->offset = rp->scratch_at[v] / (int64_t)cft_dtype_size(h->aval.dtype);
    return h;
}

/* group g's kernel on rows [lo, lo + n): whole inputs and arena outputs
 * from row lo, what the segment made as it is; false: the kernel cannot
 * take these strides (the segment is declined) */
static bool group_on_rows(const rows_job *J, const cft_group *g, int gi, cft_array **envt,
                          char *buf, int64_t lo, int64_t n) {
    const cft_rows_plan *rp = J->rp;
    int nops = g->nin + g->nout;
    cft_array *ops[CFT_KMAX_OPS];
    int64_t st[CFT_KMAX_OPS][CFT_MAX_NDIM];
    for (int k = 0; k < g->nin; k++) {
        ops[k] = envt[g->in[k]];
        if (ops[k]->kind != CFT_K_CONCRETE)
            return false;
    }
    for (int k = g->nin; k < nops; k++)
        ops[k] = envt[g->out[k - g->nin]] = out_rows(J, g->out[k - g->nin], buf, lo, n);
    cft__group_strides(rp->ir, g, ops, st); /* outputs: row-major over g->iter */
    cft_aval iter = g->iter;
    iter.shape[0] = n;
    cft_loop lp;
    if (!cft__loop_fit(&iter, st, nops, g->sig, &lp))
        return false;
    char *ptrs[CFT_KMAX_OPS];
    int64_t flat[CFT_KMAX_OPS * CFT_MAX_NDIM];
    for (int k = 0; k < nops; k++) {
        bool whole = k < g->nin && rp->seg_of[g->in[k]] != J->si;
        ptrs[k] = (char *)cft__ptr(ops[k]) +
                  (whole ? lo * st[k][0] * (int64_t)cft_dtype_size(ops[k]->aval.dtype) : 0);
        for (int d = 0; d < lp.nd; d++)
            flat[k * lp.nd + d] = lp.st[k][d];
    }
    cft_array *acc = NULL; /* a half reduction's f32 accumulator */
    int acc_k = -1;
    if (g->reduce) {
        const cft_eqn *red = &rp->ir->eqns[g->eqns[g->neqn - 1]];
        for (int k = g->nin; k < nops; k++) {
            if (g->out[k - g->nin] != red->out[0]->id)
                continue;
            if (!g->half_acc || rp->cuda_kernels) {
                cft__fill_init(ops[k], red->prim->c_init);
            } else {
                if (cft_failed(acc = cft__half_acc(ops[k], red->prim->c_init)))
                    return false;
                acc_k = k, ptrs[k] = cft__ptr(acc);
            }
        }
    }
    if (cft__numel(iter.shape, iter.ndim) > 0)
        rp->kernels[gi](ptrs, lp.dims, flat, 1);
    if (acc)
        cft__half_acc_store(acc, ops[acc_k]);
    return true;
}

/* equation q on rows [lo, lo + n) (its output made in rows) or whole */
static cft_array *eqn_on_rows(const rows_job *J, const cft_eqn *q, cft_array **envt, char *buf,
                              int64_t lo, int64_t n) {
    const cft_rows_plan *rp = J->rp;
    const cft_prim *p = q->prim;
    int o = q->out[0]->id;
    if (rp->seg_of[o] != J->si)
        return cft__run_eqn(q, envt); /* a view of whole values */
    bool sp[CFT_KMAX_OPS], slice[CFT_KMAX_OPS];
    cft_aval in[CFT_KMAX_OPS];
    cft_array *args[CFT_KMAX_OPS];
    for (int i = 0; i < q->nin; i++) {
        sp[i] = rp->seg_of[q->in[i]->id] == J->si;
        in[i] = q->in[i]->aval;
    }
    cft_params qp;
    int how = p->split_rows(&q->params, in, q->nin, sp, rp->segs[J->si].T, n, slice, &qp);
    if (how != (rp->sum[o] ? SUM : ROWS))
        return cft__fail(CFT_E_ARG, "cft_jit: %s no longer computes rows", p->name);
    for (int i = 0; i < q->nin; i++) {
        cft_array *x = envt[q->in[i]->id];
        args[i] = slice[i] && !sp[i] ? rows_of(x, lo, n) : x;
    }
    if (is_view(p)) {
        cft_aval oav = q->out[0]->aval;
        oav.shape[0] = n;
        cft_array *res[1];
        cft_array *e = cft__run_impl(p, &qp, q->nin, args, 1, &oav, res);
        envt[o] = res[0];
        return e;
    }
    for (int i = 0; i < q->nin; i++)
        args[i] = cft__unconj(p, args[i]);
    cft_array *dst = envt[o] = out_rows(J, o, buf, lo, n);
    return p->impl_into(args, q->nin, &qp, dst);
}

static void rows_thread(void *ctx, int64_t t0, int64_t t1) {
    rows_job *J = ctx;
    const cft_rows_plan *rp = J->rp;
    const cft_rowseg *sg = &rp->segs[J->si];
    int nv = rp->ir->nvars + 1;
    for (int64_t t = t0; t < t1; t++) {
        int64_t lo = sg->T * t / J->nth, n = sg->T * (t + 1) / J->nth - lo;
        char *buf = J->bufs[t] = own_scratch(sg->scratch);
        if (!buf) {
            atomic_store(&J->declined, true);
            break;
        }
        cft_array **envt = CFT_NEWN(cft_array *, nv); /* GC-scanned: it holds the rows */
        memcpy(envt, J->env, sizeof(cft_array *) * (size_t)nv);
        for (int s = sg->first; s <= sg->last; s++) {
            if (atomic_load(&J->err) || atomic_load(&J->declined))
                break;
            const cft_step *st = &rp->steps[s];
            cft_array *e = NULL;
            if (rp->later[s])
                continue;
            if (st->group >= 0) {
                if (!group_on_rows(J, &rp->groups[st->group], st->group, envt, buf, lo, n))
                    atomic_store(&J->declined, true);
            } else {
                e = eqn_on_rows(J, &rp->ir->eqns[st->eqn], envt, buf, lo, n);
            }
            cft_array *none = NULL;
            if (e)
                atomic_compare_exchange_strong(&J->err, &none, e);
        }
    }
    /* every thread's shares are complete: each adds up its part of them.
     * Every thread of the team reaches the barrier, failed or not:
     * cft__par_for gives each of them a range of the nth threads' rows
     * (nth ranges, never more threads than ranges), and serially the
     * barrier is one of a team of one. */
#pragma omp barrier
    if (atomic_load(&J->err) || atomic_load(&J->declined))
        return;
    for (int64_t t = t0; t < t1; t++)
        add_shares(J, J->total * t / J->nth, J->total * (t + 1) / J->nth);
}

/* var v's whole value after the segment into env: its arena array, the
 * threads' shares added up there (or in a new array, for a sum the arena
 * does not hold: an output) when it is a sum, in thread order: the same
 * sums for the same thread count; nothing for what lived in the threads'
 * buffers. NULL, or the error. */
static cft_array *whole_value(const rows_job *J, int v, cft_array **env) {
    const cft_rows_plan *rp = J->rp;
    cft_array *d = J->made[v] ? J->made[v] : rp->full ? rp->full[v] : NULL;
    for (int k = 0; k < J->nsums && rp->sum[v]; k++)
        if (J->sums[k].v == v)
            d = J->sums[k].dst;
    if (rp->sum[v] || rp->scratch_at[v] < 0)
        env[v] = d;
    return NULL;
}

/* where the segment's sums go (their arena arrays, or new ones for sums
 * the arena does not hold: outputs), before the threads add them up, and
 * the whole arrays of values made in rows that the arena does not hold */
static cft_array *sum_places(rows_job *J) {
    const cft_rows_plan *rp = J->rp;
    const cft_rowseg *sg = &rp->segs[J->si];
    J->sums = CFT_NEWN(struct share_sum, rp->ir->nvars + 1);
    J->made = CFT_NEWN(cft_array *, rp->ir->nvars + 1);
    for (int s = sg->first; s <= sg->last; s++) {
        const cft_step *st = &rp->steps[s];
        if (rp->later[s] || (st->group < 0 && is_view(rp->ir->eqns[st->eqn].prim)))
            continue;
        const cft_group *g = st->group >= 0 ? &rp->groups[st->group] : NULL;
        int nout = g ? g->nout : 1;
        for (int k = 0; k < nout; k++) {
            int v = g ? g->out[k] : rp->ir->eqns[st->eqn].out[0]->id;
            const cft_aval *a = rp->aval[v];
            if (!rp->sum[v]) { /* rows written into a whole array: the arena's, or one made here */
                if (rp->scratch_at[v] < 0 && !(rp->full && rp->full[v]) &&
                    cft_failed(J->made[v] = cft__alloc(a->dtype, a->shape, a->ndim)))
                    return J->made[v];
                continue;
            }
            cft_array *d = rp->full ? rp->full[v] : NULL;
            if (!d && cft_failed(d = cft__alloc(a->dtype, a->shape, a->ndim)))
                return d;
            int64_t n = cft__numel(a->shape, a->ndim);
            J->sums[J->nsums++] = (struct share_sum){v, d, rp->scratch_at[v], n};
            J->total += n;
        }
    }
    return NULL;
}

int cft__rows_run(const cft_rows_plan *rp, int si, cft_array **env, cft_array **err) {
    const cft_rowseg *sg = &rp->segs[si];
    int nth = cft__par_threads(sg->T / 2, 1e12);
    if (nth < 2) /* one thread: step by step, each step's own threads (if any) */
        return 0;
    rows_job J = {rp, si, nth, env, CFT_NEWN(char *, nth), NULL, false, NULL, 0, 0, NULL};
    if ((*err = sum_places(&J)))
        return -1;
    cft__par_for(nth, 1e12, rows_thread, &J);
    if (atomic_load(&J.err)) {
        *err = atomic_load(&J.err);
        return -1;
    }
    if (atomic_load(&J.declined))
        return 0;
    /* what later steps read: arena arrays, and views made again from them
     * (what lived in the threads' buffers is read by no later step) */
    for (int s = sg->first; s <= sg->last; s++) {
        const cft_step *st = &rp->steps[s];
        if (rp->later[s])
            continue;
        if (st->group >= 0) {
            const cft_group *g = &rp->groups[st->group];
            for (int k = 0; k < g->nout; k++)
                if ((*err = whole_value(&J, g->out[k], env)))
                    return -1;
            continue;
        }
        const cft_eqn *q = &rp->ir->eqns[st->eqn];
        if (!is_view(q->prim) && (*err = whole_value(&J, q->out[0]->id, env)))
            return -1;
    }
    for (int i = 0; i < sg->nagain; i++)
        if ((*err = cft__run_eqn(&rp->ir->eqns[rp->steps[sg->again[i]].eqn], env)))
            return -1;
    return 1;
}
