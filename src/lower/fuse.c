/* fuse.c: fusion into groups. Walking the IR in order, elementwise
 * equations with one iteration shape join the open group; a float
 * reduction of the group's values ends it. An equation that cannot join
 * but does not read the open group (a view, a GEMM on other values) runs
 * before the group instead of closing it, so interleaved broadcasts do not
 * split chains. Anything else closes the group and runs on its own.
 * Elementwise equations on single elements that read only the program's
 * inputs, constants and each other (an optimizer's bias corrections, a
 * learning rate's conversion) are taken first, so they form one group of
 * their own instead of cutting the per-element chain they are written in.
 * A group never exceeds CFT_KMAX_OPS operands: its distinct outside inputs
 * plus its equations (each may be an output) are counted as it grows, and
 * an equation that would pass the bound starts a new group. */
#include <string.h>

#include "core/mem.h"
#include "lower/lower.h"

/* Complex values run eagerly (their kernels, complex rows and cgemm, are
 * the library's). Halves (f16, bf16) join elementwise groups: the kernels
 * read them into floats and round what they store (emit.c), and so do
 * their reductions: a reduction of halves, or of a group holding halves,
 * joins it and accumulates in f32, its half output rounded once at the
 * end (half_acc: lower.h). A conversion from f64 to f16 runs eagerly: the
 * library converts in one rounding, a kernel (in f32) would round twice. */
static bool eager_dtype(cft_dtype dt, bool half_ok) {
    return (cft_dtype_is_half(dt) && !half_ok) || cft_dtype_is_complex(dt);
}
static bool no_eager(const cft_eqn *q, bool half_ok) {
    bool f16_out = false, f64_in = false;
    for (int i = 0; i < q->nin; i++) {
        if (eager_dtype(q->in[i]->aval.dtype, half_ok))
            return false;
        f64_in |= q->in[i]->aval.dtype == CFT_F64;
    }
    for (int o = 0; o < q->nout; o++) {
        if (eager_dtype(q->out[o]->aval.dtype, half_ok))
            return false;
        f16_out |= q->out[o]->aval.dtype == CFT_F16;
    }
    return !(f16_out && f64_in);
}
static bool fusable_ew(const cft_eqn *q) {
    const cft_prim *p = q->prim;
    return (p->flags & CFT_PRIM_ELEMENTWISE) && p->c_expr && q->nout == 1 && no_eager(q, true);
}
static bool fusable_red(const cft_eqn *q) {
    const cft_prim *p = q->prim;
    return (p->flags & CFT_PRIM_REDUCTION) && p->c_init &&
           cft_dtype_is_float(q->in[0]->aval.dtype) && no_eager(q, true);
}

/* one element, by shape alone (a symbolic dim is not known to be 1) */
static bool one_element(const cft_irvar *v) {
    for (int d = 0; d < v->aval.ndim; d++)
        if (v->aval.shape[d] != 1)
            return false;
    return true;
}

/* outside inputs of q not yet among the open group's ext[0..*n) */
static int new_inputs(const cft_eqn *q, const int *owner, int open, const int *ext, int n) {
    int k = 0;
    for (int i = 0; i < q->nin; i++) {
        int v = q->in[i]->id;
        if (open >= 0 && owner[v] == open)
            continue;
        bool have = false;
        for (int j = 0; j < n && !have; j++)
            have = ext[j] == v;
        for (int j = 0; j < i && !have; j++)
            have = q->in[j]->id == v;
        k += !have;
    }
    return k;
}
static void add_inputs(const cft_eqn *q, const int *owner, int open, int *ext, int *n) {
    for (int i = 0; i < q->nin; i++) {
        int v = q->in[i]->id;
        if (open >= 0 && owner[v] == open)
            continue;
        bool have = false;
        for (int j = 0; j < *n && !have; j++)
            have = ext[j] == v;
        if (!have)
            ext[(*n)++] = v;
    }
}

int cft__fuse(const cft_ir *ir, cft_step **stepsp, cft_group **groupsp, int *ngroups) {
    cft_step *steps = CFT_NEWN(cft_step, ir->neqn + 1);
    cft_group *groups = CFT_NEWN(cft_group, ir->neqn + 1);
    int *owner = CFT_NEWN(int, ir->nvars + 1); /* var -> group that produces it, -1 */
    for (int v = 0; v < ir->nvars; v++)
        owner[v] = -1;
    int ns = 0, ng = 0, open = -1;
    int ext[CFT_KMAX_OPS + 8], next = 0; /* the open group's outside inputs */
    /* the order equations are taken in: the scalar ones first */
    int *order = CFT_NEWN(int, ir->neqn + 1), no = 0;
    bool *early = CFT_NEWN(bool, ir->nvars + 1), *taken = CFT_NEWN(bool, ir->neqn + 1);
    for (int v = 0; v < ir->nvars; v++)
        early[v] = true; /* until an equation produces it */
    for (int k = 0; k < ir->neqn; k++)
        for (int o = 0; o < ir->eqns[k].nout; o++)
            early[ir->eqns[k].out[o]->id] = false;
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        bool scalar = fusable_ew(q) && one_element(q->out[0]);
        for (int i = 0; i < q->nin && scalar; i++)
            scalar = early[q->in[i]->id] && one_element(q->in[i]);
        if (scalar) {
            early[q->out[0]->id] = true;
            taken[k] = true;
            order[no++] = k;
        }
    }
    for (int k = 0; k < ir->neqn; k++)
        if (!taken[k])
            order[no++] = k;
    for (int kk = 0; kk < ir->neqn; kk++) {
        int k = order[kk];
        const cft_eqn *q = &ir->eqns[k];
        /* would q keep the open group within CFT_KMAX_OPS operands? */
        bool room =
            open >= 0 &&
            next + new_inputs(q, owner, open, ext, next) + groups[open].neqn + 1 <= CFT_KMAX_OPS;
        bool reads_open = false;
        for (int i = 0; i < q->nin; i++)
            reads_open |= open >= 0 && owner[q->in[i]->id] == open;
        bool ew = fusable_ew(q), red = fusable_red(q);
        if (open >= 0 && ew) {
            cft_aval it = q->out[0]->aval;
            it.dtype = groups[open].iter.dtype;
            bool same =
                it.ndim == groups[open].iter.ndim &&
                !memcmp(it.shape, groups[open].iter.shape, sizeof(int64_t) * (size_t)it.ndim);
            if (same && room) {
                cft_group *g = &groups[open];
                add_inputs(q, owner, open, ext, &next);
                g->eqns[g->neqn++] = k;
                owner[q->out[0]->id] = open;
                continue;
            }
        }
        if (open >= 0 && red && reads_open && room) {
            cft_aval it = q->in[0]->aval;
            cft_group *g = &groups[open];
            if (it.ndim == g->iter.ndim &&
                !memcmp(it.shape, g->iter.shape, sizeof(int64_t) * (size_t)it.ndim)) {
                g->eqns[g->neqn++] = k;
                g->reduce = true;
                g->half_acc = cft_dtype_is_half(q->out[0]->aval.dtype);
                owner[q->out[0]->id] = open;
                open = -1;
                continue;
            }
        }
        if (open >= 0 && reads_open)
            open = -1; /* a consumer that cannot join closes it */
        if (ew || red) {
            if (open >= 0)
                open = -1;
            cft_group *g = &groups[ng];
            g->eqns = CFT_NEWN(int, CFT_KMAX_OPS + 1);
            next = 0;
            add_inputs(q, owner, -1, ext, &next);
            g->eqns[g->neqn++] = k;
            g->iter = red ? q->in[0]->aval : q->out[0]->aval;
            g->reduce = red;
            g->half_acc = red && cft_dtype_is_half(q->out[0]->aval.dtype);
            g->kernel_id = -1;
            owner[q->out[0]->id] = ng;
            steps[ns++] = (cft_step){-1, ng};
            open = red ? -1 : ng;
            ng++;
            continue;
        }
        /* runs on its own; if the open group does not feed it, it runs before the group */
        if (open >= 0 && !reads_open) {
            int gs = ns - 1;
            while (steps[gs].group != open)
                gs--;
            memmove(&steps[gs + 1], &steps[gs], sizeof(cft_step) * (size_t)(ns - gs));
            steps[gs] = (cft_step){k, -1};
            ns++;
        } else {
            steps[ns++] = (cft_step){k, -1};
        }
    }
    /* inputs: read but not produced inside; outputs: produced and read outside or returned */
    bool *used_out = CFT_NEWN(bool, ir->nvars + 1);
    for (int i = 0; i < ir->nout; i++)
        used_out[ir->outvars[i]->id] = true;
    for (int g = 0; g < ng; g++) {
        cft_group *G = &groups[g];
        G->in = CFT_NEWN(int, CFT_KMAX_OPS * 4);
        G->out = CFT_NEWN(int, CFT_KMAX_OPS * 4);
    }
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        int self = owner[q->out[0]->id];
        bool in_group = self >= 0 && q->nout == 1;
        for (int i = 0; i < q->nin; i++) {
            int v = q->in[i]->id, og = owner[v];
            if (og >= 0 && (!in_group || og != self))
                used_out[v] = true;
            if (in_group && og != self) {
                cft_group *G = &groups[self];
                bool have = false;
                for (int j = 0; j < G->nin; j++)
                    have |= G->in[j] == v;
                if (!have)
                    G->in[G->nin++] = v;
            }
        }
    }
    for (int g = 0; g < ng; g++) {
        cft_group *G = &groups[g];
        for (int e = 0; e < G->neqn; e++) {
            int v = ir->eqns[G->eqns[e]].out[0]->id;
            if (used_out[v] || (G->reduce && e == G->neqn - 1))
                G->out[G->nout++] = v;
        }
    }
    *stepsp = steps;
    *groupsp = groups;
    *ngroups = ng;
    return ns;
}
