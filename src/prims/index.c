/* index.c: the indexing primitives: gather, scatter and scatter_add in the
 * general dimension-number form of XLA / jax.lax, dynamic_slice and
 * dynamic_update_slice (start indices as an array), each one record with
 * all its rules, followed by the public ops and the conveniences built on
 * them (take, take_along_axis, at_set, at_add).
 *
 * Out-of-range indices follow a cft_index_mode (ops.h): CLIP clamps each
 * window's start so that the window lies inside the operand; FILL_OR_DROP
 * gathers zeros for, and drops the updates of, a window that does not. The
 * transpose of a gather is a scatter_add in the matching mode (CLIP <-> CLIP,
 * FILL <-> DROP), so gradients of clamped or filled reads are exact.
 *
 * Batching adds the batch dimension to the dimension numbers, as jax.lax
 * does: a batched operand gets a full-size window dimension, batched
 * indices a batch dimension, and when both are batched an iota column
 * joins the index vectors and selects each example's slice. So vmap of
 * indexing stays one gather or scatter. Index arrays (i32 or i64) have no
 * derivative. */
#include <complex.h>
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"

enum { G_OFF, G_COL, G_SIM, G_SS, G_IVD, G_MODE }; /* gather parameter slots */
enum { S_UWD, S_IWD, S_SDOD, S_IVD, S_MODE };      /* scatter parameter slots */

/* ======== shared: dimension checks, geometry, the window kernel ======== */

static bool is_index_dtype(cft_dtype dt) {
    return dt == CFT_I32 || dt == CFT_I64;
}

/* n dims in [0, bound), unique, and increasing when `sorted` */
static bool dims_ok(const int64_t *v, int n, int bound, bool sorted) {
    bool seen[CFT_MAX_NDIM] = {0};
    if (n < 0 || n > CFT_MAX_NDIM || bound > CFT_MAX_NDIM)
        return false;
    for (int i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= bound || seen[v[i]] || (sorted && i && v[i] <= v[i - 1]))
            return false;
        seen[v[i]] = true;
    }
    return true;
}
static bool contains(const int64_t *v, int n, int64_t d) {
    for (int i = 0; i < n; i++)
        if (v[i] == d)
            return true;
    return false;
}

/* The geometry both gather and scatter share. The "outer" array is the
 * gather's output or the scatter's updates: its dims are batch dims (one per
 * index vector position) and window dims (one per operand dim that is not
 * collapsed / inserted). */
typedef struct {
    int nb, nw, nsim, ivd;
    int64_t bshape[CFT_MAX_NDIM]; /* batch sizes */
    int bouter[CFT_MAX_NDIM];     /* outer dim of batch dim k */
    int bidx[CFT_MAX_NDIM];       /* indices dim of batch dim k */
    int wop[CFT_MAX_NDIM];        /* operand dim of window dim j */
    int wouter[CFT_MAX_NDIM];     /* outer dim of window dim j */
    int64_t wshape[CFT_MAX_NDIM]; /* window sizes */
    int64_t size[CFT_MAX_NDIM];   /* window size per operand dim (1: collapsed) */
    int64_t sim[CFT_MAX_NDIM];    /* operand dim of index component k */
} geom;

/* the batch dims of the indices: every dim but index_vector_dim */
static int index_batch_dims(const cft_aval *ix, int ivd, int *dims, int64_t *shape) {
    int n = 0;
    for (int d = 0; d < ix->ndim; d++)
        if (d != ivd)
            dims[n] = d, shape[n] = ix->shape[d], n++;
    return n;
}

static cft_array *check_mode(const char *name, const cft_params *p, int slot) {
    int64_t m = p->v[slot][0];
    if (m != CFT_INDEX_CLIP && m != CFT_INDEX_FILL_OR_DROP)
        return cft__fail(CFT_E_ARG, "%s: bad index mode %lld", name, (long long)m);
    return NULL;
}

static cft_array *gather_geom(const cft_aval *x, const cft_aval *ix, const cft_params *p, geom *g,
                              cft_aval *out) {
    memset(g, 0, sizeof *g);
    if (!is_index_dtype(ix->dtype))
        return cft__fail(CFT_E_DTYPE, "gather: indices must be i32 or i64, got %s (operand %s)",
                         cft__av(ix), cft__av(x));
    cft_array *e = check_mode("gather", p, G_MODE);
    if (e)
        return e;
    int ivd = (int)p->v[G_IVD][0], noff = p->n[G_OFF], ncol = p->n[G_COL];
    if (ivd < 0 || ivd > ix->ndim)
        return cft__fail(CFT_E_ARG, "gather: index_vector_dim %d out of range for indices %s", ivd,
                         cft__av(ix));
    int64_t K = ivd < ix->ndim ? ix->shape[ivd] : 1;
    int nb = index_batch_dims(ix, ivd, g->bidx, g->bshape);
    int ond = nb + noff;
    if (ond > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "gather: result rank %d too large (operand %s, indices %s)",
                         ond, cft__av(x), cft__av(ix));
    if (p->n[G_SS] != x->ndim)
        return cft__fail(CFT_E_ARG, "gather: %d slice sizes for operand %s", p->n[G_SS],
                         cft__av(x));
    if (noff + ncol != x->ndim)
        return cft__fail(
            CFT_E_ARG,
            "gather: %d offset dims + %d collapsed dims must equal the rank of operand %s", noff,
            ncol, cft__av(x));
    if (!dims_ok(p->v[G_OFF], noff, ond, true))
        return cft__fail(CFT_E_ARG,
                         "gather: offset_dims must increase within [0,%d) (operand %s, indices %s)",
                         ond, cft__av(x), cft__av(ix));
    if (!dims_ok(p->v[G_COL], ncol, x->ndim, true))
        return cft__fail(CFT_E_ARG,
                         "gather: collapsed_slice_dims must increase within [0,%d) (operand %s)",
                         x->ndim, cft__av(x));
    if (p->n[G_SIM] != K || !dims_ok(p->v[G_SIM], p->n[G_SIM], x->ndim, false))
        return cft__fail(CFT_E_ARG,
                         "gather: start_index_map needs %lld unique operand dims (operand %s, "
                         "indices %s, index_vector_dim %d), got %d",
                         (long long)K, cft__av(x), cft__av(ix), ivd, p->n[G_SIM]);
    for (int d = 0; d < x->ndim; d++) {
        int64_t s = p->v[G_SS][d];
        bool col = contains(p->v[G_COL], ncol, d);
        if (!cft_dim_valid(s) || !cft__dim_ge(x->shape[d], s) || (col && s != 1))
            return cft__fail(
                CFT_E_SHAPE, "gather: slice size %s on dim %d does not fit operand %s%s",
                cft__dim_s(s), d, cft__av(x), col ? " (a collapsed dim needs size 1)" : "");
        g->size[d] = s;
        if (!col)
            g->wop[g->nw++] = d;
    }
    g->nb = nb, g->ivd = ivd, g->nsim = (int)K;
    for (int k = 0; k < K; k++)
        g->sim[k] = p->v[G_SIM][k];
    *out = cft__aval(x->dtype, NULL, 0);
    out->ndim = ond;
    for (int j = 0; j < noff; j++) {
        g->wouter[j] = (int)p->v[G_OFF][j];
        g->wshape[j] = g->size[g->wop[j]];
        out->shape[g->wouter[j]] = g->wshape[j];
    }
    for (int d = 0, k = 0; d < ond; d++)
        if (!contains(p->v[G_OFF], noff, d)) {
            g->bouter[k] = d;
            out->shape[d] = g->bshape[k++];
        }
    return NULL;
}

static cft_array *scatter_geom(const char *name, const cft_aval *x, const cft_aval *ix,
                               const cft_aval *u, const cft_params *p, geom *g) {
    memset(g, 0, sizeof *g);
    if (!is_index_dtype(ix->dtype))
        return cft__fail(CFT_E_DTYPE, "%s: indices must be i32 or i64, got %s (operand %s)", name,
                         cft__av(ix), cft__av(x));
    if (u->dtype != x->dtype)
        return cft__fail(CFT_E_DTYPE, "%s: updates %s and operand %s differ in dtype", name,
                         cft__av(u), cft__av(x));
    cft_array *e = check_mode(name, p, S_MODE);
    if (e)
        return e;
    int ivd = (int)p->v[S_IVD][0], nuw = p->n[S_UWD], niw = p->n[S_IWD];
    if (ivd < 0 || ivd > ix->ndim)
        return cft__fail(CFT_E_ARG, "%s: index_vector_dim %d out of range for indices %s", name,
                         ivd, cft__av(ix));
    int64_t K = ivd < ix->ndim ? ix->shape[ivd] : 1;
    int nb = index_batch_dims(ix, ivd, g->bidx, g->bshape);
    if (nuw + niw != x->ndim)
        return cft__fail(
            CFT_E_ARG,
            "%s: %d update window dims + %d inserted dims must equal the rank of operand %s", name,
            nuw, niw, cft__av(x));
    if (!dims_ok(p->v[S_UWD], nuw, u->ndim, true))
        return cft__fail(CFT_E_ARG,
                         "%s: update_window_dims must increase within [0,%d) (updates %s)", name,
                         u->ndim, cft__av(u));
    if (!dims_ok(p->v[S_IWD], niw, x->ndim, true))
        return cft__fail(CFT_E_ARG,
                         "%s: inserted_window_dims must increase within [0,%d) (operand %s)", name,
                         x->ndim, cft__av(x));
    if (p->n[S_SDOD] != K || !dims_ok(p->v[S_SDOD], p->n[S_SDOD], x->ndim, false))
        return cft__fail(CFT_E_ARG,
                         "%s: scatter_dims_to_operand_dims needs %lld unique operand dims "
                         "(operand %s, indices %s, index_vector_dim %d), got %d",
                         name, (long long)K, cft__av(x), cft__av(ix), ivd, p->n[S_SDOD]);
    if (u->ndim - nuw != nb)
        return cft__fail(CFT_E_SHAPE,
                         "%s: updates %s have %d scatter dims, indices %s have %d batch dims", name,
                         cft__av(u), u->ndim - nuw, cft__av(ix), nb);
    for (int d = 0, k = 0; d < u->ndim; d++) {
        if (contains(p->v[S_UWD], nuw, d))
            continue;
        if (u->shape[d] != g->bshape[k])
            return cft__fail(CFT_E_SHAPE,
                             "%s: updates %s dim %d (%s) does not match indices %s dim %d (%s)",
                             name, cft__av(u), d, cft__dim_s(u->shape[d]), cft__av(ix), g->bidx[k],
                             cft__dim_s(g->bshape[k]));
        g->bouter[k++] = d;
    }
    for (int d = 0, j = 0; d < x->ndim; d++) {
        if (contains(p->v[S_IWD], niw, d)) {
            g->size[d] = 1;
            /* CLIP could not place a window there (FILL_OR_DROP drops them all) */
            if (x->shape[d] == 0 && p->v[S_MODE][0] == CFT_INDEX_CLIP &&
                cft__numel(g->bshape, nb) > 0)
                return cft__fail(CFT_E_SHAPE,
                                 "%s: inserted dim %d of operand %s is empty (CLIP mode)", name, d,
                                 cft__av(x));
            continue;
        }
        int ud = (int)p->v[S_UWD][j];
        if (!cft__dim_ge(x->shape[d], u->shape[ud]))
            return cft__fail(CFT_E_SHAPE,
                             "%s: update window dim %d of %s (%s) exceeds operand %s dim %d", name,
                             ud, cft__av(u), cft__dim_s(u->shape[ud]), cft__av(x), d);
        g->wop[j] = d, g->wouter[j] = ud, g->wshape[j] = g->size[d] = u->shape[ud];
        j++;
    }
    g->nw = nuw, g->nb = nb, g->ivd = ivd, g->nsim = (int)K;
    for (int k = 0; k < K; k++)
        g->sim[k] = p->v[S_SDOD][k];
    return NULL;
}

static int64_t read_index(const char *base, cft_dtype dt, int64_t off) {
    return dt == CFT_I32 ? ((const int32_t *)base)[off] : ((const int64_t *)base)[off];
}

/* Clamp (CLIP) or check (FILL_OR_DROP) the window start on every operand
 * dim; false when the window is out of range in FILL_OR_DROP mode. */
static bool window_start(int mode, const int64_t *shape, const int64_t *size, int nd,
                         int64_t *start) {
    for (int d = 0; d < nd; d++) {
        int64_t hi = shape[d] - size[d];
        if (mode == CFT_INDEX_CLIP)
            start[d] = start[d] < 0 ? 0 : start[d] > hi ? hi : start[d];
        else if (start[d] < 0 || start[d] > hi)
            return false;
    }
    return true;
}

enum { K_GATHER, K_FILL, K_SET, K_ADD };

/* integers add as unsigned: they wrap (as in JAX) instead of overflowing */
#define ADD_CASE(DT, T, U)                                                                         \
    case DT:                                                                                       \
        for (int64_t i = 0; i < n; i++)                                                            \
            ((T *)xp)[i * xs] = (T)((U)((T *)xp)[i * xs] + (U)((const T *)op)[i * os]);            \
        break

/* one run of n elements: outer (stride os) and operand (stride xs) */
static void run(int kind, cft_dtype dt, size_t es, char *op, int64_t os, char *xp, int64_t xs,
                int64_t n) {
    switch (kind) {
    case K_GATHER:
        if (os == 1 && xs == 1) {
            memcpy(op, xp, (size_t)n * es);
            return;
        }
        for (int64_t i = 0; i < n; i++)
            memcpy(op + i * os * (int64_t)es, xp + i * xs * (int64_t)es, es);
        return;
    case K_FILL:
        for (int64_t i = 0; i < n; i++)
            memset(op + i * os * (int64_t)es, 0, es);
        return;
    case K_SET:
        if (os == 1 && xs == 1) {
            memcpy(xp, op, (size_t)n * es);
            return;
        }
        for (int64_t i = 0; i < n; i++)
            memcpy(xp + i * xs * (int64_t)es, op + i * os * (int64_t)es, es);
        return;
    default:
        switch (dt) {
            ADD_CASE(CFT_F32, float, float);
            ADD_CASE(CFT_F64, double, double);
            ADD_CASE(CFT_I32, int32_t, uint32_t);
            ADD_CASE(CFT_I64, int64_t, uint64_t);
            ADD_CASE(CFT_C64, float complex, float complex);
            ADD_CASE(CFT_C128, double complex, double complex);
        case CFT_BOOL:
            for (int64_t i = 0; i < n; i++)
                ((uint8_t *)xp)[i * xs] |= ((const uint8_t *)op)[i * os];
            break;
        default:
            break;
        }
    }
}

/* Walk every window: for each batch position, read the index vector, place
 * the window and apply `kind` to the (outer, operand) element pairs. */
static void index_kernel(int kind, int mode, const geom *g, char *outer, const int64_t *ost,
                         char *x, const int64_t *xshape, const int64_t *xst, int xnd,
                         const cft_array *ix, cft_dtype dt) {
    size_t es = cft_dtype_size(dt);
    const char *ib = cft__ptr(ix);
    int64_t ivs = g->ivd < ix->aval.ndim ? ix->strides[g->ivd] : 0;
    int64_t nbatch = cft__numel(g->bshape, g->nb), nwin = cft__numel(g->wshape, g->nw);
    if (nbatch == 0 || nwin == 0)
        return;
    int nw = g->nw;
    int64_t inner = nw ? g->wshape[nw - 1] : 1;
    int64_t ois = nw ? ost[g->wouter[nw - 1]] : 0, xis = nw ? xst[g->wop[nw - 1]] : 0;
    int64_t bi[CFT_MAX_NDIM] = {0};
    for (int64_t b = 0; b < nbatch; b++) {
        int64_t ioff = 0, oo = 0, xo = 0, start[CFT_MAX_NDIM] = {0};
        for (int k = 0; k < g->nb; k++)
            ioff += bi[k] * ix->strides[g->bidx[k]], oo += bi[k] * ost[g->bouter[k]];
        for (int k = 0; k < g->nsim; k++)
            start[g->sim[k]] = read_index(ib, ix->aval.dtype, ioff + k * ivs);
        bool inside = window_start(mode, xshape, g->size, xnd, start);
        /* FILL_OR_DROP outside: a gather reads zeros, a scatter drops the update */
        int wkind = inside ? kind : kind == K_GATHER ? K_FILL : -1;
        for (int d = 0; inside && d < xnd; d++)
            xo += start[d] * xst[d];
        int64_t wi[CFT_MAX_NDIM] = {0};
        for (int64_t w = 0; wkind >= 0 && w < nwin; w += inner) {
            int64_t o2 = oo, x2 = xo;
            for (int j = 0; j < nw - 1; j++)
                o2 += wi[j] * ost[g->wouter[j]], x2 += wi[j] * xst[g->wop[j]];
            run(wkind, dt, es, outer + o2 * (int64_t)es, ois, x + x2 * (int64_t)es, xis, inner);
            for (int j = nw - 2; j >= 0; j--) {
                if (++wi[j] < g->wshape[j])
                    break;
                wi[j] = 0;
            }
        }
        for (int k = g->nb - 1; k >= 0; k--) {
            if (++bi[k] < g->bshape[k])
                break;
            bi[k] = 0;
        }
    }
}

/* the dimension numbers of the gather that reads what a scatter writes, and back */
static void scatter_to_gather(const cft_params *s, const cft_aval *x, const cft_aval *u,
                              cft_params *g) {
    memset(g, 0, sizeof *g);
    int64_t ss[CFT_MAX_NDIM];
    for (int d = 0, j = 0; d < x->ndim; d++)
        ss[d] = contains(s->v[S_IWD], s->n[S_IWD], d) ? 1 : u->shape[s->v[S_UWD][j++]];
    cft__param_set(g, G_OFF, s->v[S_UWD], s->n[S_UWD]);
    cft__param_set(g, G_COL, s->v[S_IWD], s->n[S_IWD]);
    cft__param_set(g, G_SIM, s->v[S_SDOD], s->n[S_SDOD]);
    cft__param_set(g, G_SS, ss, x->ndim);
    cft__param_set1(g, G_IVD, s->v[S_IVD][0]);
    cft__param_set1(g, G_MODE, s->v[S_MODE][0]);
}
static void gather_to_scatter(const cft_params *g, cft_params *s) {
    memset(s, 0, sizeof *s);
    cft__param_set(s, S_UWD, g->v[G_OFF], g->n[G_OFF]);
    cft__param_set(s, S_IWD, g->v[G_COL], g->n[G_COL]);
    cft__param_set(s, S_SDOD, g->v[G_SIM], g->n[G_SIM]);
    cft__param_set1(s, S_IVD, g->v[G_IVD][0]);
    cft__param_set1(s, S_MODE, g->v[G_MODE][0]);
}

static cft_array *bind_gather(cft_array *x, cft_array *ix, const cft_params *p) {
    return cft__bind1(&cft_p_gather, p, 2, (cft_array *[]){x, ix});
}
static cft_array *bind_scatter(const cft_prim *prim, cft_array *x, cft_array *ix, cft_array *u,
                               const cft_params *p) {
    return cft__bind1(prim, p, 3, (cft_array *[]){x, ix, u});
}

/* dims list helpers for the batching rules: v + 1, optionally with `first` in front */
static void shift_slot(cft_params *q, int k, const cft_params *p, bool lead, int64_t first) {
    int n = p->n[k], o = lead ? 1 : 0;
    for (int i = 0; i < n; i++)
        q->v[k][i + o] = p->v[k][i] + 1;
    if (lead)
        q->v[k][0] = first;
    q->n[k] = (int8_t)(n + o);
}

/* Indices batched at axis 0 (of a batched rank r+1, index_vector_dim ivd
 * of the unbatched indices): prepend to every index vector the example's
 * number, so the vectors also select the operand's batch dim. */
static cft_array *prepend_iota(cft_array *ix, int ivd_unbatched, int rank_unbatched) {
    int ivd = ivd_unbatched + 1;
    if (ivd_unbatched == rank_unbatched)
        ix = cft_expand_dims(ix, ivd);
    if (cft_failed(ix))
        return ix;
    int64_t cs[CFT_MAX_NDIM];
    int nd = ix->aval.ndim;
    for (int d = 0; d < nd; d++)
        cs[d] = ix->aval.shape[d];
    cs[ivd] = 1;
    cft_array *counts = cft_iota(ix->aval.dtype, cs, nd, 0);
    return cft_concatenate((cft_array *[]){counts, ix}, 2, ivd);
}

/* ======== gather[offset_dims, collapsed_slice_dims, start_index_map,
 *                 slice_sizes, index_vector_dim, mode](operand, indices) ======== */

static cft_array *gather_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    geom g;
    return gather_geom(&in[0], &in[1], p, &g, out);
}
static cft_array *gather_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    geom g;
    cft_aval o;
    cft_array *e = gather_geom(&in[0]->aval, &in[1]->aval, p, &g, &o);
    if (e)
        return e;
    cft_array *y = cft__alloc(o.dtype, o.shape, o.ndim);
    if (cft_failed(y))
        return y;
    int64_t yst[CFT_MAX_NDIM];
    cft__row_major(o.shape, o.ndim, yst);
    const cft_array *x = in[0];
    index_kernel(K_GATHER, (int)p->v[G_MODE][0], &g, y->data, yst, cft__ptr(x), x->aval.shape,
                 x->strides, x->aval.ndim, in[1], o.dtype);
    out[0] = y;
    return NULL;
}
static cft_array *gather_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                             const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] = t[0] ? bind_gather(t[0], x[1], p) : NULL;
    return NULL;
}
/* the cotangent goes back where it was read from: scatter_add into zeros */
static cft_array *gather_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                   int nin, const cft_params *p, cft_array **ct_in) {
    (void)nin;
    if (!x[1])
        return cft__fail(CFT_E_TRACE, "gather: transpose with linear indices");
    if (x[0])
        return NULL;
    cft_params s;
    gather_to_scatter(p, &s);
    ct_in[0] = bind_scatter(&cft_p_scatter_add, cft__zeros_aval(&in[0]), x[1], ct[0], &s);
    return NULL;
}

/* the batching rule on values x (bdim xb, <0: none) and ix (bdim ib) */
static cft_array *gather_batched(int64_t size, cft_array *x, int xb, cft_array *ix, int ib,
                                 const cft_params *p, cft_array **y, int *ybdim) {
    cft_params q = *p;
    ybdim[0] = 0;
    if (ib < 0) { /* operand only: the batch dim is a full-size window dim */
        x = cft__moveaxis_b(x, xb, 0);
        shift_slot(&q, G_OFF, p, true, 0);
        shift_slot(&q, G_COL, p, false, 0);
        shift_slot(&q, G_SIM, p, false, 0);
        memmove(&q.v[G_SS][1], &p->v[G_SS][0], sizeof(int64_t) * (size_t)p->n[G_SS]);
        q.v[G_SS][0] = size;
        q.n[G_SS] = (int8_t)(p->n[G_SS] + 1);
        y[0] = bind_gather(x, ix, &q);
        return NULL;
    }
    ix = cft__moveaxis_b(ix, ib, 0);
    int ivd = (int)p->v[G_IVD][0], rank = ix->aval.ndim - 1;
    q.v[G_IVD][0] = ivd + 1;
    shift_slot(&q, G_OFF, p, false, 0);
    if (xb < 0) { /* indices only: a new leading batch dim */
        y[0] = bind_gather(x, ix, &q);
        return NULL;
    }
    /* both: each example's index vectors also pick its slice of the operand */
    x = cft__moveaxis_b(x, xb, 0);
    if (size == 0) { /* no examples: nothing to read (a size-1 slice would not fit) */
        cft_aval av[2] = {cft__aval_drop(&x->aval, 0), cft__aval_drop(&ix->aval, 0)}, o;
        cft_array *e = gather_shape(av, 2, p, &o);
        if (e)
            return e;
        cft_aval ob = cft__aval(o.dtype, NULL, 0);
        ob.ndim = o.ndim + 1;
        for (int d = 0; d < o.ndim; d++)
            ob.shape[d + 1] = o.shape[d];
        y[0] = cft__zeros_aval(&ob);
        return NULL;
    }
    ix = prepend_iota(ix, ivd, rank);
    shift_slot(&q, G_COL, p, true, 0);
    shift_slot(&q, G_SIM, p, true, 0);
    memmove(&q.v[G_SS][1], &p->v[G_SS][0], sizeof(int64_t) * (size_t)p->n[G_SS]);
    q.v[G_SS][0] = 1;
    q.n[G_SS] = (int8_t)(p->n[G_SS] + 1);
    y[0] = bind_gather(x, ix, &q);
    return NULL;
}
static cft_array *gather_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return gather_batched(size, x[0], bdim[0], x[1], bdim[1], p, y, ybdim);
}
const cft_prim cft_p_gather = {
    .name = "gather",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"offset_dims", "collapsed_slice_dims", "start_index_map", "slice_sizes",
               "#index_vector_dim", "#mode"},
    .shape = gather_shape,
    .impl = gather_impl,
    .jvp = gather_jvp,
    .transpose = gather_transpose,
    .vmap = gather_vmap,
};

/* ======== scatter / scatter_add[update_window_dims, inserted_window_dims,
 *          scatter_dims_to_operand_dims, index_vector_dim, mode]
 *          (operand, indices, updates) ======== */

static cft_array *scatter_shape_named(const char *name, const cft_aval *in, const cft_params *p,
                                      cft_aval *out) {
    geom g;
    cft_array *e = scatter_geom(name, &in[0], &in[1], &in[2], p, &g);
    if (e)
        return e;
    *out = in[0];
    return NULL;
}
static cft_array *scatter_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    return scatter_shape_named("scatter", in, p, out);
}
static cft_array *scatter_add_shape(const cft_aval *in, int nin, const cft_params *p,
                                    cft_aval *out) {
    (void)nin;
    return scatter_shape_named("scatter_add", in, p, out);
}
/* a copy of the operand, then the updates in order (row-major over the
 * scatter dims of updates; each window row-major): for scatter, the last
 * update of an element wins */
static cft_array *scatter_run(const char *name, int kind, cft_array *const *in, const cft_params *p,
                              cft_array **out) {
    geom g;
    cft_array *e = scatter_geom(name, &in[0]->aval, &in[1]->aval, &in[2]->aval, p, &g);
    if (e)
        return e;
    const cft_aval *a = &in[0]->aval;
    cft_array *xc = cft__contig(in[0]), *y = cft__alloc(a->dtype, a->shape, a->ndim);
    if (cft_failed(xc))
        return xc;
    if (cft_failed(y))
        return y;
    memcpy(y->data, cft__ptr(xc), (size_t)cft__numel(a->shape, a->ndim) * cft_dtype_size(a->dtype));
    cft__keep(xc);
    const cft_array *u = in[2];
    index_kernel(kind, (int)p->v[S_MODE][0], &g, cft__ptr(u), u->strides, y->data, a->shape,
                 y->strides, a->ndim, in[1], a->dtype);
    out[0] = y;
    return NULL;
}
static cft_array *scatter_impl(cft_array *const *in, int nin, const cft_params *p,
                               cft_array **out) {
    (void)nin;
    return scatter_run("scatter", K_SET, in, p, out);
}
static cft_array *scatter_add_impl(cft_array *const *in, int nin, const cft_params *p,
                                   cft_array **out) {
    (void)nin;
    return scatter_run("scatter_add", K_ADD, in, p, out);
}

static cft_array *scatter_add_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                                  int nin, const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] =
        t[2] ? bind_scatter(&cft_p_scatter_add, cft__inst(t[0], &x[0]->aval), x[1], t[2], p) : t[0];
    return NULL;
}
/* linear in operand and updates: the operand's cotangent passes through,
 * the updates' is the gather of it */
static cft_array *scatter_add_transpose(cft_array *const *ct, cft_array *const *x,
                                        const cft_aval *in, int nin, const cft_params *p,
                                        cft_array **ct_in) {
    (void)nin;
    if (!x[1])
        return cft__fail(CFT_E_TRACE, "scatter_add: transpose with linear indices");
    ct_in[0] = x[0] ? NULL : ct[0];
    if (!x[2]) {
        cft_params g;
        scatter_to_gather(p, &in[0], &in[2], &g);
        ct_in[2] = bind_gather(ct[0], x[1], &g);
    }
    return NULL;
}
/* scatter is linear in (operand, updates) together: its tangent is the
 * scatter of the tangents, with the same winners */
static cft_array *scatter_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] = NULL;
    if (!t[0] && !t[2])
        return NULL;
    ty[0] = bind_scatter(&cft_p_scatter, cft__inst(t[0], &x[0]->aval), x[1],
                         cft__inst(t[2], &x[2]->aval), p);
    return NULL;
}
/* The operand's cotangent is ct where no update landed. An update's
 * cotangent is the gather of ct where that update won: scatter each
 * update's number (1, 2, ...) with the same indices, gather the numbers
 * back, and compare (dropped updates gather 0, so they get nothing). */
static cft_array *scatter_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                    int nin, const cft_params *p, cft_array **ct_in) {
    (void)nin;
    if (!x[1])
        return cft__fail(CFT_E_TRACE, "scatter: transpose with linear indices");
    cft_array *ix = x[1];
    if (!x[0]) {
        cft_array *kept = bind_scatter(&cft_p_scatter, cft_ones(CFT_BOOL, in[0].shape, in[0].ndim),
                                       ix, cft_zeros(CFT_BOOL, in[2].shape, in[2].ndim), p);
        ct_in[0] = cft__select(kept, ct[0], cft__zeros_aval(&in[0]));
    }
    if (!x[2]) {
        int64_t n = cft__numel(in[2].shape, in[2].ndim);
        cft_dtype idt = n < INT32_MAX ? CFT_I32 : CFT_I64;
        cft_array *ids =
            cft__reshape(cft_add_s(cft_iota(idt, &n, 1, 0), 1), in[2].shape, in[2].ndim);
        cft_array *owner =
            bind_scatter(&cft_p_scatter, cft_zeros(idt, in[0].shape, in[0].ndim), ix, ids, p);
        cft_params g;
        scatter_to_gather(p, &in[0], &in[2], &g);
        cft_array *won = cft_eq(bind_gather(owner, ix, &g), ids);
        ct_in[2] = cft__select(won, bind_gather(ct[0], ix, &g), cft__zeros_aval(&in[2]));
    }
    return NULL;
}

static cft_array *scatter_batched(const cft_prim *prim, int64_t size, cft_array *x, int xb,
                                  cft_array *ix, int ib, cft_array *u, int ub, const cft_params *p,
                                  cft_array **y, int *ybdim) {
    cft_params q = *p;
    ybdim[0] = 0;
    x = cft__batch_at(x, xb, size, 0);
    u = cft__batch_at(u, ub, size, 0);
    if (ib < 0) { /* the batch dim is a window dim of operand and updates */
        shift_slot(&q, S_UWD, p, true, 0);
        shift_slot(&q, S_IWD, p, false, 0);
        shift_slot(&q, S_SDOD, p, false, 0);
        y[0] = bind_scatter(prim, x, ix, u, &q);
        return NULL;
    }
    if (size == 0) { /* no examples, no updates */
        y[0] = x;
        return NULL;
    }
    ix = cft__moveaxis_b(ix, ib, 0);
    int ivd = (int)p->v[S_IVD][0], rank = ix->aval.ndim - 1;
    ix = prepend_iota(ix, ivd, rank);
    q.v[S_IVD][0] = ivd + 1;
    shift_slot(&q, S_UWD, p, false, 0);
    shift_slot(&q, S_IWD, p, true, 0);
    shift_slot(&q, S_SDOD, p, true, 0);
    y[0] = bind_scatter(prim, x, ix, u, &q);
    return NULL;
}
static cft_array *scatter_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                               const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return scatter_batched(&cft_p_scatter, size, x[0], bdim[0], x[1], bdim[1], x[2], bdim[2], p, y,
                           ybdim);
}
static cft_array *scatter_add_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                                   const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    return scatter_batched(&cft_p_scatter_add, size, x[0], bdim[0], x[1], bdim[1], x[2], bdim[2], p,
                           y, ybdim);
}
#define SCATTER_PNAMES                                                                             \
    {                                                                                              \
        "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",              \
            "#index_vector_dim", "#mode"                                                           \
    }
const cft_prim cft_p_scatter = {
    .name = "scatter",
    .nin = 3,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = SCATTER_PNAMES,
    .shape = scatter_shape,
    .impl = scatter_impl,
    .jvp = scatter_jvp,
    .transpose = scatter_transpose,
    .vmap = scatter_vmap,
};
const cft_prim cft_p_scatter_add = {
    .name = "scatter_add",
    .nin = 3,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = SCATTER_PNAMES,
    .shape = scatter_add_shape,
    .impl = scatter_add_impl,
    .jvp = scatter_add_jvp,
    .transpose = scatter_add_transpose,
    .vmap = scatter_add_vmap,
};

/* ======== dynamic_slice[slice_sizes](operand, start) ======== */

/* start: a 1-d index array with one entry per operand dim */
static cft_array *check_start(const char *name, const cft_aval *x, const cft_aval *s) {
    if (!is_index_dtype(s->dtype) || s->ndim != 1 || s->shape[0] != x->ndim)
        return cft__fail(
            is_index_dtype(s->dtype) ? CFT_E_SHAPE : CFT_E_DTYPE,
            "%s: start indices must be i32 or i64 of shape [%d] for operand %s, got %s", name,
            x->ndim, cft__av(x), cft__av(s));
    return NULL;
}
/* the clamped start (JAX clamps dynamic slices so they fit) */
static void read_start(const cft_array *s, const int64_t *shape, const int64_t *size, int nd,
                       int64_t *start) {
    const char *b = cft__ptr(s);
    for (int d = 0; d < nd; d++)
        start[d] = read_index(b, s->aval.dtype, d * s->strides[0]);
    window_start(CFT_INDEX_CLIP, shape, size, nd, start);
}

static cft_array *ds_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    cft_array *e = check_start("dynamic_slice", &in[0], &in[1]);
    if (e)
        return e;
    if (p->n[0] != in[0].ndim)
        return cft__fail(CFT_E_ARG, "dynamic_slice: %d slice sizes for operand %s", p->n[0],
                         cft__av(&in[0]));
    *out = in[0];
    for (int d = 0; d < in[0].ndim; d++) {
        if (!cft_dim_valid(p->v[0][d]) || !cft__dim_ge(in[0].shape[d], p->v[0][d]))
            return cft__fail(CFT_E_SHAPE,
                             "dynamic_slice: slice size %s on dim %d does not fit operand %s",
                             cft__dim_s(p->v[0][d]), d, cft__av(&in[0]));
        out->shape[d] = p->v[0][d];
    }
    return NULL;
}
/* a view at the clamped start */
static cft_array *ds_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    const cft_array *x = in[0];
    int nd = x->aval.ndim;
    int64_t start[CFT_MAX_NDIM], off = x->offset;
    read_start(in[1], x->aval.shape, p->v[0], nd, start);
    for (int d = 0; d < nd; d++)
        off += start[d] * x->strides[d];
    out[0] = cft__view(x, p->v[0], nd, x->strides, off);
    return NULL;
}
static cft_array *bind_ds(cft_array *x, cft_array *start, const int64_t *sizes, int nd) {
    cft_params p = {0};
    cft__param_set(&p, 0, sizes, nd);
    return cft__bind1(&cft_p_dynamic_slice, &p, 2, (cft_array *[]){x, start});
}
static cft_array *bind_dus(cft_array *x, cft_array *u, cft_array *start) {
    return cft__bind1(&cft_p_dynamic_update_slice, NULL, 3, (cft_array *[]){x, u, start});
}
static cft_array *ds_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                         const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] = t[0] ? cft__bind1(&cft_p_dynamic_slice, p, 2, (cft_array *[]){t[0], x[1]}) : NULL;
    return NULL;
}
static cft_array *ds_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                               int nin, const cft_params *p, cft_array **ct_in) {
    (void)nin, (void)p;
    if (!x[1])
        return cft__fail(CFT_E_TRACE, "dynamic_slice: transpose with linear start indices");
    if (!x[0])
        ct_in[0] = bind_dus(cft__zeros_aval(&in[0]), ct[0], x[1]);
    return NULL;
}
/* the unbatched gather / scatter a dynamic slice / update is, on an index vector of nd starts */
static void ds_as_gather(const int64_t *sizes, int nd, cft_params *g) {
    int64_t all[CFT_MAX_NDIM];
    for (int d = 0; d < nd; d++)
        all[d] = d;
    memset(g, 0, sizeof *g);
    cft__param_set(g, G_OFF, all, nd);
    g->n[G_COL] = 0;
    cft__param_set(g, G_SIM, all, nd);
    cft__param_set(g, G_SS, sizes, nd);
    cft__param_set1(g, G_IVD, 0);
    cft__param_set1(g, G_MODE, CFT_INDEX_CLIP);
}
/* a zero start for a new leading dim */
static cft_array *lead_zero(cft_array *start) {
    return cft_concatenate((cft_array *[]){cft_zeros(start->aval.dtype, (int64_t[]){1}, 1), start},
                           2, 0);
}
/* batched starts become a gather (as in jax.lax); otherwise one more dim */
static cft_array *ds_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                          const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    int nd = p->n[0];
    if (bdim[1] >= 0) {
        cft_params g;
        ds_as_gather(p->v[0], nd, &g);
        return gather_batched(size, x[0], bdim[0], x[1], bdim[1], &g, y, ybdim);
    }
    int64_t sizes[CFT_MAX_NDIM];
    sizes[0] = size;
    for (int d = 0; d < nd; d++)
        sizes[d + 1] = p->v[0][d];
    y[0] = bind_ds(cft__moveaxis_b(x[0], bdim[0], 0), lead_zero(x[1]), sizes, nd + 1);
    ybdim[0] = 0;
    return NULL;
}
const cft_prim cft_p_dynamic_slice = {
    .name = "dynamic_slice",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"slice_sizes"},
    .shape = ds_shape,
    .impl = ds_impl,
    .jvp = ds_jvp,
    .transpose = ds_transpose,
    .vmap = ds_vmap,
};

/* ======== dynamic_update_slice(operand, update, start) ======== */

static cft_array *dus_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    const cft_aval *x = &in[0], *u = &in[1];
    cft_array *e = check_start("dynamic_update_slice", x, &in[2]);
    if (e)
        return e;
    if (u->dtype != x->dtype || u->ndim != x->ndim)
        return cft__fail(u->dtype != x->dtype ? CFT_E_DTYPE : CFT_E_SHAPE,
                         "dynamic_update_slice: update %s does not match operand %s", cft__av(u),
                         cft__av(x));
    for (int d = 0; d < x->ndim; d++)
        if (!cft__dim_ge(x->shape[d], u->shape[d]))
            return cft__fail(CFT_E_SHAPE,
                             "dynamic_update_slice: update %s does not fit in operand %s",
                             cft__av(u), cft__av(x));
    *out = *x;
    return NULL;
}
static cft_array *dus_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin, (void)p;
    const cft_aval *a = &in[0]->aval;
    int nd = a->ndim;
    cft_array *xc = cft__contig(in[0]), *y = cft__alloc(a->dtype, a->shape, nd);
    if (cft_failed(xc))
        return xc;
    if (cft_failed(y))
        return y;
    size_t es = cft_dtype_size(a->dtype);
    memcpy(y->data, cft__ptr(xc), (size_t)cft__numel(a->shape, nd) * es);
    cft__keep(xc);
    const cft_array *u = in[1];
    int64_t start[CFT_MAX_NDIM], off = 0, n = cft__numel(u->aval.shape, nd),
                                 idx[CFT_MAX_NDIM] = {0};
    read_start(in[2], a->shape, u->aval.shape, nd, start);
    for (int d = 0; d < nd; d++)
        off += start[d] * y->strides[d];
    const char *ub = cft__ptr(u);
    for (int64_t i = 0; i < n; i++) {
        int64_t yo = off, uo = 0;
        for (int d = 0; d < nd; d++)
            yo += idx[d] * y->strides[d], uo += idx[d] * u->strides[d];
        memcpy(y->data + yo * (int64_t)es, ub + uo * (int64_t)es, es);
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < u->aval.shape[d])
                break;
            idx[d] = 0;
        }
    }
    out[0] = y;
    return NULL;
}
static cft_array *dus_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)y, (void)nin, (void)p;
    ty[0] = NULL;
    if (!t[0] && !t[1])
        return NULL;
    ty[0] = bind_dus(cft__inst(t[0], &x[0]->aval), cft__inst(t[1], &x[1]->aval), x[2]);
    return NULL;
}
/* the operand's cotangent is ct with the window zeroed; the update's is the window */
static cft_array *dus_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)nin, (void)p;
    if (!x[2])
        return cft__fail(CFT_E_TRACE, "dynamic_update_slice: transpose with linear start indices");
    if (!x[0])
        ct_in[0] = bind_dus(ct[0], cft__zeros_aval(&in[1]), x[2]);
    if (!x[1])
        ct_in[1] = bind_ds(ct[0], x[2], in[1].shape, in[1].ndim);
    return NULL;
}
static cft_array *dus_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin, (void)p;
    int nd = bdim[0] >= 0 ? x[0]->aval.ndim - 1 : x[0]->aval.ndim;
    if (bdim[2] >= 0) { /* a scatter in CLIP mode clamps exactly as dynamic_update_slice does */
        int64_t all[CFT_MAX_NDIM];
        for (int d = 0; d < nd; d++)
            all[d] = d;
        cft_params s = {0};
        cft__param_set(&s, S_UWD, all, nd);
        cft__param_set(&s, S_SDOD, all, nd);
        cft__param_set1(&s, S_IVD, 0);
        cft__param_set1(&s, S_MODE, CFT_INDEX_CLIP);
        return scatter_batched(&cft_p_scatter, size, x[0], bdim[0], x[2], bdim[2], x[1], bdim[1],
                               &s, y, ybdim);
    }
    cft_array *xb = cft__batch_at(x[0], bdim[0], size, 0),
              *ub = cft__batch_at(x[1], bdim[1], size, 0);
    y[0] = bind_dus(xb, ub, lead_zero(x[2]));
    ybdim[0] = 0;
    return NULL;
}
const cft_prim cft_p_dynamic_update_slice = {
    .name = "dynamic_update_slice",
    .nin = 3,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .shape = dus_shape,
    .impl = dus_impl,
    .jvp = dus_jvp,
    .transpose = dus_transpose,
    .vmap = dus_vmap,
};

/* ======== public ops ======== */

static bool dnum_count_ok(int n) {
    return n >= 0 && n <= CFT_MAX_NDIM;
}

static cft_array *check_indices(const char *op, const cft_array *x, const cft_array *ix) {
    if (!is_index_dtype(ix->aval.dtype))
        return cft__fail(CFT_E_DTYPE, "%s: indices must be i32 or i64, got %s (operand %s)", op,
                         cft__av(&ix->aval), cft__av(&x->aval));
    return NULL;
}
static cft_array *check_mode_arg(const char *op, cft_index_mode mode) {
    if (mode != CFT_INDEX_CLIP && mode != CFT_INDEX_FILL_OR_DROP)
        return cft__fail(CFT_E_ARG, "%s: bad index mode %d", op, (int)mode);
    return NULL;
}

cft_array *cft_gather(cft_array *x, cft_array *indices, const cft_gather_dnums *dn,
                      const int64_t *slice_sizes, cft_index_mode mode) {
    CFT_PROPAGATE("cft_gather", x, indices);
    cft_array *e = check_indices("cft_gather", x, indices);
    if (!e)
        e = check_mode_arg("cft_gather", mode);
    if (e)
        return e;
    if (!dn || (x->aval.ndim && !slice_sizes) || !dnum_count_ok(dn->n_offset_dims) ||
        !dnum_count_ok(dn->n_collapsed_slice_dims) || !dnum_count_ok(dn->n_start_index_map))
        return cft__fail(
            CFT_E_ARG,
            "cft_gather: bad dimension numbers or slice sizes for operand %s, indices %s",
            cft__av(&x->aval), cft__av(&indices->aval));
    cft_params p = {0};
    cft__param_set_int(&p, G_OFF, dn->offset_dims, dn->n_offset_dims);
    cft__param_set_int(&p, G_COL, dn->collapsed_slice_dims, dn->n_collapsed_slice_dims);
    cft__param_set_int(&p, G_SIM, dn->start_index_map, dn->n_start_index_map);
    cft__param_set(&p, G_SS, slice_sizes, x->aval.ndim);
    cft__param_set1(&p, G_IVD, dn->index_vector_dim);
    cft__param_set1(&p, G_MODE, mode);
    return bind_gather(x, indices, &p);
}

static cft_array *scatter_op(const char *op, const cft_prim *prim, cft_array *x, cft_array *indices,
                             cft_array *updates, const cft_scatter_dnums *dn, cft_index_mode mode) {
    CFT_PROPAGATE(op, x, indices, updates);
    cft_array *e = check_indices(op, x, indices);
    if (!e)
        e = check_mode_arg(op, mode);
    if (e)
        return e;
    if (!dn || !dnum_count_ok(dn->n_update_window_dims) ||
        !dnum_count_ok(dn->n_inserted_window_dims) ||
        !dnum_count_ok(dn->n_scatter_dims_to_operand_dims))
        return cft__fail(CFT_E_ARG,
                         "%s: bad dimension numbers for operand %s, indices %s, updates %s", op,
                         cft__av(&x->aval), cft__av(&indices->aval), cft__av(&updates->aval));
    cft_params p = {0};
    cft__param_set_int(&p, S_UWD, dn->update_window_dims, dn->n_update_window_dims);
    cft__param_set_int(&p, S_IWD, dn->inserted_window_dims, dn->n_inserted_window_dims);
    cft__param_set_int(&p, S_SDOD, dn->scatter_dims_to_operand_dims,
                       dn->n_scatter_dims_to_operand_dims);
    cft__param_set1(&p, S_IVD, dn->index_vector_dim);
    cft__param_set1(&p, S_MODE, mode);
    return bind_scatter(prim, x, indices, cft__convert(updates, x->aval.dtype), &p);
}
cft_array *cft_scatter(cft_array *x, cft_array *indices, cft_array *updates,
                       const cft_scatter_dnums *dn, cft_index_mode mode) {
    CFT_API("cft_scatter");
    return scatter_op("cft_scatter", &cft_p_scatter, x, indices, updates, dn, mode);
}
cft_array *cft_scatter_add(cft_array *x, cft_array *indices, cft_array *updates,
                           const cft_scatter_dnums *dn, cft_index_mode mode) {
    CFT_API("cft_scatter_add");
    return scatter_op("cft_scatter_add", &cft_p_scatter_add, x, indices, updates, dn, mode);
}

cft_array *cft_dynamic_slice(cft_array *x, cft_array *start, const int64_t *sizes) {
    CFT_PROPAGATE("cft_dynamic_slice", x, start);
    int nd = x->aval.ndim;
    if (nd && !sizes)
        return cft__fail(CFT_E_ARG, "cft_dynamic_slice: sizes NULL for operand %s",
                         cft__av(&x->aval));
    cft_array *e = check_start("cft_dynamic_slice", &x->aval, &start->aval);
    if (e)
        return e;
    return bind_ds(x, start, sizes, nd);
}
cft_array *cft_dynamic_update_slice(cft_array *x, cft_array *update, cft_array *start) {
    CFT_PROPAGATE("cft_dynamic_update_slice", x, update, start);
    cft_array *e = check_start("cft_dynamic_update_slice", &x->aval, &start->aval);
    if (e)
        return e;
    return bind_dus(x, cft__convert(update, x->aval.dtype), start);
}

/* ======== conveniences ======== */

/* NumPy's negative indices: i < 0 means i + n (adding n only to negative
 * indices, which cannot overflow) */
static cft_array *wrap_negative(cft_array *ix, int64_t n) {
    cft_dtype dt = ix->aval.dtype;
    if (dt == CFT_I32 && n > INT32_MAX)
        n = INT32_MAX;
    cft_array *zero = cft_scalar(0, dt);
    /* n may be symbolic: then its value is computed when the IR runs */
    return cft_add(ix, cft_where(cft_lt(ix, zero), cft__dim_value(n, dt), zero));
}

/* the checks of the axis conveniences; *ax gets the normalised axis */
static cft_array *axis_args(const char *op, const cft_array *x, const cft_array *ix, int axis,
                            int *ax) {
    cft_array *e = check_indices(op, x, ix);
    if (e)
        return e;
    int nd = x->aval.ndim;
    *ax = axis < 0 ? axis + nd : axis;
    if (nd < 1 || *ax < 0 || *ax >= nd)
        return cft__fail(CFT_E_ARG, "%s: axis %d out of range for %s", op, axis, cft__av(&x->aval));
    return NULL;
}

/* take / at_*: the shape x.shape[:axis] + indices.shape + x.shape[axis+1:] */
static cft_array *taken_shape(const char *op, const cft_array *x, const cft_array *ix, int ax,
                              cft_aval *o) {
    int nd = x->aval.ndim, ni = ix->aval.ndim;
    if (nd - 1 + ni > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "%s: result rank %d too large for %s indexed by %s", op,
                         nd - 1 + ni, cft__av(&x->aval), cft__av(&ix->aval));
    *o = cft__aval(x->aval.dtype, NULL, 0);
    for (int d = 0; d < ax; d++)
        o->shape[o->ndim++] = x->aval.shape[d];
    for (int d = 0; d < ni; d++)
        o->shape[o->ndim++] = ix->aval.shape[d];
    for (int d = ax + 1; d < nd; d++)
        o->shape[o->ndim++] = x->aval.shape[d];
    return NULL;
}

cft_array *cft_take(cft_array *x, cft_array *indices, int axis) {
    CFT_PROPAGATE("cft_take", x, indices);
    int ax;
    cft_aval o;
    cft_array *e = axis_args("cft_take", x, indices, axis, &ax);
    if (!e)
        e = taken_shape("cft_take", x, indices, ax, &o);
    if (e)
        return e;
    int nd = x->aval.ndim, ni = indices->aval.ndim;
    int64_t n = x->aval.shape[ax];
    if (n == 0) {
        if (cft__numel(indices->aval.shape, ni) == 0)
            return cft__zeros_aval(&o);
        return cft__fail(CFT_E_SHAPE, "cft_take: cannot take from the empty axis %d of %s", ax,
                         cft__av(&x->aval));
    }
    cft_gather_dnums dn = {
        .n_collapsed_slice_dims = 1, .n_start_index_map = 1, .index_vector_dim = ni};
    dn.collapsed_slice_dims[0] = dn.start_index_map[0] = ax;
    int64_t ss[CFT_MAX_NDIM];
    for (int d = 0; d < nd; d++) {
        ss[d] = d == ax ? 1 : x->aval.shape[d];
        if (d != ax)
            dn.offset_dims[dn.n_offset_dims++] = d < ax ? d : d - 1 + ni;
    }
    return cft_gather(x, wrap_negative(indices, n), &dn, ss, CFT_INDEX_CLIP);
}

cft_array *cft_take_along_axis(cft_array *x, cft_array *indices, int axis) {
    CFT_PROPAGATE("cft_take_along_axis", x, indices);
    int ax;
    cft_array *e = axis_args("cft_take_along_axis", x, indices, axis, &ax);
    if (e)
        return e;
    int nd = x->aval.ndim;
    const cft_aval *ia = &indices->aval;
    if (ia->ndim != nd)
        return cft__fail(CFT_E_SHAPE, "cft_take_along_axis: indices %s and array %s differ in rank",
                         cft__av(ia), cft__av(&x->aval));
    /* broadcast the other dims together; x only where indices are wider */
    int64_t xs[CFT_MAX_NDIM];
    for (int d = 0; d < nd; d++) {
        int64_t a = x->aval.shape[d], b = ia->shape[d];
        xs[d] = a;
        if (d == ax || a == b || b == 1)
            continue;
        if (a != 1)
            return cft__fail(
                CFT_E_SHAPE,
                "cft_take_along_axis: indices %s do not broadcast with array %s on dim %d",
                cft__av(ia), cft__av(&x->aval), d);
        xs[d] = b;
    }
    x = cft_broadcast_to(x, xs, nd);
    if (cft_failed(x))
        return x;
    int64_t n = xs[ax];
    if (n == 0 || cft__numel(ia->shape, nd) == 0) {
        cft_aval o = x->aval;
        for (int d = 0; d < nd; d++)
            if (d == ax || ia->shape[d] != 1)
                o.shape[d] = ia->shape[d];
        if (cft__numel(o.shape, nd) == 0)
            return cft__zeros_aval(&o);
        return cft__fail(CFT_E_SHAPE,
                         "cft_take_along_axis: cannot take from the empty axis %d of %s", ax,
                         cft__av(&x->aval));
    }
    /* dims where indices vary (and the axis) are indexed: the axis by the
     * indices, the others by an iota; the rest are whole windows */
    cft_gather_dnums dn = {0};
    int64_t ss[CFT_MAX_NDIM], ishape[CFT_MAX_NDIM];
    int m = 0;
    for (int d = 0; d < nd; d++) {
        bool indexed = d == ax || ia->shape[d] != 1;
        ss[d] = indexed ? 1 : xs[d];
        if (indexed) {
            dn.collapsed_slice_dims[dn.n_collapsed_slice_dims++] = d;
            dn.start_index_map[dn.n_start_index_map++] = d;
            ishape[m++] = ia->shape[d];
        } else {
            dn.offset_dims[dn.n_offset_dims++] = d;
        }
    }
    cft_array *ix = cft__reshape(wrap_negative(indices, n), ishape, m), *cols[CFT_MAX_NDIM];
    for (int k = 0; k < m; k++)
        cols[k] = dn.start_index_map[k] == ax ? ix : cft_iota(ia->dtype, ishape, m, k);
    dn.index_vector_dim = m;
    return cft_gather(x, cft_stack(cols, m, m), &dn, ss, CFT_INDEX_CLIP);
}

static cft_array *at_op(const char *op, const cft_prim *prim, cft_array *x, cft_array *indices,
                        cft_array *values, int axis) {
    CFT_PROPAGATE(op, x, indices, values);
    int ax;
    cft_aval o;
    cft_array *e = axis_args(op, x, indices, axis, &ax);
    if (!e)
        e = taken_shape(op, x, indices, ax, &o);
    if (e)
        return e;
    int nd = x->aval.ndim, ni = indices->aval.ndim;
    cft_array *u = cft_broadcast_to(cft__convert(values, x->aval.dtype), o.shape, o.ndim);
    if (cft_failed(u))
        return cft__fail(CFT_E_SHAPE, "%s: values %s do not broadcast to %s (array %s, indices %s)",
                         op, cft__av(&values->aval), cft__av(&o), cft__av(&x->aval),
                         cft__av(&indices->aval));
    cft_scatter_dnums dn = {
        .n_inserted_window_dims = 1, .n_scatter_dims_to_operand_dims = 1, .index_vector_dim = ni};
    dn.inserted_window_dims[0] = dn.scatter_dims_to_operand_dims[0] = ax;
    for (int d = 0; d < nd; d++)
        if (d != ax)
            dn.update_window_dims[dn.n_update_window_dims++] = d < ax ? d : d - 1 + ni;
    return scatter_op(op, prim, x, wrap_negative(indices, x->aval.shape[ax]), u, &dn,
                      CFT_INDEX_FILL_OR_DROP);
}
cft_array *cft_at_set(cft_array *x, cft_array *indices, cft_array *values, int axis) {
    CFT_API("cft_at_set");
    return at_op("cft_at_set", &cft_p_scatter, x, indices, values, axis);
}
cft_array *cft_at_add(cft_array *x, cft_array *indices, cft_array *values, int axis) {
    CFT_API("cft_at_add");
    return at_op("cft_at_add", &cft_p_scatter_add, x, indices, values, axis);
}
