/* jit_memory.c: a plan's memory. Results of kernels and products that
 * the plan does not return get slots in one arena, placed first fit by
 * liveness (a view keeps its base alive); row-parallel segments
 * (jit_rows.c) keep what only they read in their threads' own buffers. A
 * traced plan keeps a pool of arenas, so concurrent and nested calls each
 * take their own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "lower/jit_plan.h"

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

void cft__jit_plan_memory(plan *P) {
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

/* an arena for one call of P, from the pool or new (NULL: none, run
 * without one) */
arena *cft__jit_take_arena(plan *P) {
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

void cft__jit_give_arena(splan *S, arena *A) {
    if (!A)
        return;
    pthread_mutex_lock(S->mu);
    A->next = S->pool;
    S->pool = A;
    pthread_mutex_unlock(S->mu);
}
