/* window.c: windowed reductions (jax.lax.reduce_window for sum and max) and
 * the two primitives max's derivatives need, then the pooling ops.
 *
 *   reduce_window_sum / reduce_window_max [window, strides, padding, window_dilation](x)
 *   select_and_gather_add[...](t, x): per window, t at the position of x's max
 *   select_and_scatter_add[...](s, x): per window, s added at x's max position
 *
 * Every dim of x has a window size, stride, lo/hi padding and window
 * dilation (holes between window taps); padding positions never win a max
 * and add nothing. Windows pick the first maximum in row-major window order
 * (NaN wins, as in reduce_max). Rules as jax.lax: sum is linear and its
 * transpose pads the cotangent (stride-1 interior zeros) and sums windows
 * again; max's jvp is select_and_gather_add, whose transpose is
 * select_and_scatter_add and back; vmap adds a window dim of size 1.
 *
 * Kernels: a dtype-free pass lists the input offset of every (output, tap)
 * pair of one plane (the dims past the leading ones whose window is
 * trivial; -1 for padding), then a per-dtype loop reduces each plane
 * through that table. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"

extern const cft_prim cft_p_reduce_window_sum, cft_p_reduce_window_max, cft_p_select_and_gather_add,
    cft_p_select_and_scatter_add;

enum { WW, WS, WP, WD }; /* parameter slots: window, strides, padding (lo, hi pairs), dilation */

typedef struct {
    int nd;
    int64_t in[CFT_MAX_NDIM], win[CFT_MAX_NDIM], s[CFT_MAX_NDIM], lo[CFT_MAX_NDIM],
        hi[CFT_MAX_NDIM], wd[CFT_MAX_NDIM], out[CFT_MAX_NDIM];
} wgeom;

static int64_t dilate(int64_t n, int64_t d) {
    return n == 0 ? 0 : (n - 1) * d + 1;
}

static cft_array *wgeometry(const char *nm, const cft_aval *a, const cft_params *p, wgeom *g) {
    int nd = a->ndim;
    if (p->n[WW] != nd || p->n[WS] != nd || p->n[WP] != 2 * nd || p->n[WD] != nd)
        return cft__fail(CFT_E_SHAPE, "%s: window parameters for rank %d, operand %s", nm, p->n[WW],
                         cft__av(a));
    memset(g, 0, sizeof *g);
    g->nd = nd;
    for (int d = 0; d < nd; d++) {
        g->in[d] = a->shape[d], g->win[d] = p->v[WW][d], g->s[d] = p->v[WS][d];
        g->lo[d] = p->v[WP][2 * d], g->hi[d] = p->v[WP][2 * d + 1], g->wd[d] = p->v[WD][d];
        if (g->win[d] < 1 || g->s[d] < 1 || g->wd[d] < 1)
            return cft__fail(CFT_E_ARG,
                             "%s: window %lld, stride %lld, dilation %lld on dim %d of %s "
                             "(all must be >= 1)",
                             nm, (long long)g->win[d], (long long)g->s[d], (long long)g->wd[d], d,
                             cft__av(a));
        if (cft_dim_is_symbolic(g->in[d])) { /* a batch dim under vmap: a unit window */
            if (g->win[d] != 1 || g->s[d] != 1 || g->lo[d] || g->hi[d])
                return cft__fail(CFT_E_SHAPE,
                                 "%s: dim %d of %s is symbolic: only a unit window (size 1, "
                                 "stride 1, no padding) can slide along it",
                                 nm, d, cft__av(a));
            g->out[d] = g->in[d];
            continue;
        }
        int64_t padded = g->in[d] + g->lo[d] + g->hi[d], kd = dilate(g->win[d], g->wd[d]);
        if (padded < 0)
            return cft__fail(CFT_E_SHAPE, "%s: negative padding %lld,%lld larger than dim %d of %s",
                             nm, (long long)g->lo[d], (long long)g->hi[d], d, cft__av(a));
        g->out[d] = padded >= kd ? (padded - kd) / g->s[d] + 1 : 0;
    }
    return NULL;
}

static cft_aval out_aval(const cft_aval *a, const wgeom *g) {
    cft_aval o = cft__aval(a->dtype, g->out, g->nd);
    return o;
}

static bool dtype_ok(cft_dtype dt) { /* no ordering or kernel for bool and complex */
    return dt != CFT_BOOL && !cft_dtype_is_complex(dt);
}

static cft_array *rw_shape(const char *nm, const cft_aval *in, const cft_params *p, cft_aval *out) {
    wgeom g;
    cft_array *e = wgeometry(nm, &in[0], p, &g);
    if (e)
        return e;
    if (!dtype_ok(in[0].dtype))
        return cft__fail(CFT_E_DTYPE, "%s: bool operand %s", nm, cft__av(&in[0]));
    *out = out_aval(&in[0], &g);
    return NULL;
}
static cft_array *rws_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    return rw_shape("reduce_window_sum", in, p, out);
}
static cft_array *rwm_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    return rw_shape("reduce_window_max", in, p, out);
}
/* select_and_gather_add(t, x): t and x alike; output: x's windows */
static cft_array *sga_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    if (!cft__aval_eq(&in[0], &in[1]) || !cft_dtype_is_float(in[0].dtype))
        return cft__fail(CFT_E_SHAPE,
                         "select_and_gather_add: tangent %s and operand %s must be floats "
                         "of one shape",
                         cft__av(&in[0]), cft__av(&in[1]));
    return rw_shape("select_and_gather_add", &in[1], p, out);
}
/* select_and_scatter_add(s, x): s has the shape of x's windows; output: x's */
static cft_array *sas_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    cft_aval w;
    cft_array *e = rw_shape("select_and_scatter_add", &in[1], p, &w);
    if (e)
        return e;
    if (!cft__aval_eq(&in[0], &w) || !cft_dtype_is_float(in[1].dtype))
        return cft__fail(CFT_E_SHAPE,
                         "select_and_scatter_add: source %s does not fit the windows %s of "
                         "operand %s (floats)",
                         cft__av(&in[0]), cft__av(&w), cft__av(&in[1]));
    *out = in[1];
    return NULL;
}

/* ---- the walk ----
 * The leading dims whose window is trivial (size 1, stride 1, no padding)
 * are planes that all see the same windows: one table lists, for every
 * (output position, tap) of a plane, the input offset within the plane or
 * -1, and every plane reuses it. When that table would be too large, the
 * table covers the last dim only and is rebuilt per row of outputs, with
 * the offsets of the other dims folded in. */

enum { OP_SUM, OP_MAX, OP_GATHER, OP_SCATTER };
#define TABLE_MAX ((int64_t)1 << 20)

/* per-dim taps: tab[k * out + o] = input index (times stride st) or -1 */
static int64_t *dim_taps(const wgeom *g, int d, int64_t st) {
    int64_t n = g->win[d] * g->out[d], *t = cft__new_data(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!t)
        return NULL;
    for (int64_t k = 0; k < g->win[d]; k++)
        for (int64_t o = 0; o < g->out[d]; o++) {
            int64_t v = o * g->s[d] + k * g->wd[d] - g->lo[d];
            t[k * g->out[d] + o] = v >= 0 && v < g->in[d] ? v * st : -1;
        }
    return t;
}

/* table[pos * nw + j] over dims [f, nd) (pos, j row-major over those dims'
 * outputs and taps); base[j] (or NULL: 0) is added to valid entries, -1
 * marks a tap invalid for the whole table */
static void fill_table(const wgeom *g, int f, int64_t *const *tab, const int64_t *base, int64_t nw,
                       int64_t *table) {
    int nd = g->nd;
    int64_t npos = 1, o[CFT_MAX_NDIM] = {0}, k[CFT_MAX_NDIM];
    for (int d = f; d < nd; d++)
        npos *= g->out[d];
    for (int64_t pos = 0; pos < npos; pos++) {
        for (int d = f; d < nd; d++)
            k[d] = 0;
        for (int64_t j = 0; j < nw; j++) {
            int64_t off = base ? base[j] : 0;
            for (int d = f; d < nd && off >= 0; d++) {
                int64_t t = tab[d][k[d] * g->out[d] + o[d]];
                off = t < 0 ? -1 : off + t;
            }
            table[pos * nw + j] = off;
            for (int d = nd - 1; d >= f; d--) {
                if (++k[d] < g->win[d])
                    break;
                k[d] = 0;
            }
        }
        for (int d = nd - 1; d >= f; d--) {
            if (++o[d] < g->out[d])
                break;
            o[d] = 0;
        }
    }
}

/* One table's worth: on outputs of nw taps. SUM/MAX/GATHER: y[o] from x
 * (and t: GATHER) at the offsets. SCATTER: y (operand-shaped) += t[o] at
 * the first maximum of x. */
#define DEF_ROW(SUF, T, ACC, LOWEST)                                                               \
    static void row_##SUF(int op, int64_t nw, int64_t on, const int64_t *restrict row,             \
                          const T *restrict x, const T *t, T *y) {                                 \
        for (int64_t o = 0; o < on; o++) {                                                         \
            const int64_t *r = row + o * nw;                                                       \
            if (op == OP_SUM) {                                                                    \
                ACC acc = 0;                                                                       \
                for (int64_t j = 0; j < nw; j++)                                                   \
                    acc += r[j] >= 0 ? (ACC)x[r[j]] : (ACC)0;                                      \
                y[o] = (T)acc;                                                                     \
            } else if (op == OP_MAX) { /* branch-free max; a NaN wins */                           \
                T acc = LOWEST;                                                                    \
                int64_t nan = -1;                                                                  \
                for (int64_t j = 0; j < nw; j++) {                                                 \
                    if (r[j] < 0)                                                                  \
                        continue;                                                                  \
                    T v = x[r[j]];                                                                 \
                    acc = v > acc ? v : acc;                                                       \
                    nan = v != v ? r[j] : nan;                                                     \
                }                                                                                  \
                y[o] = nan >= 0 ? x[nan] : acc;                                                    \
            } else { /* the first maximum, branch-free (masks); a NaN: the first NaN */            \
                int64_t best = -1, j = 0;                                                          \
                while (j < nw && r[j] < 0)                                                         \
                    j++;                                                                           \
                if (j < nw) {                                                                      \
                    best = r[j];                                                                   \
                    T bv = x[best];                                                                \
                    bool nan = bv != bv;                                                           \
                    for (j++; j < nw; j++) {                                                       \
                        int64_t off = r[j];                                                        \
                        if (off < 0)                                                               \
                            continue;                                                              \
                        T v = x[off];                                                              \
                        int64_t m = -(int64_t)(v > bv);                                            \
                        best = (off & m) | (best & ~m);                                            \
                        bv = v > bv ? v : bv;                                                      \
                        nan |= v != v;                                                             \
                    }                                                                              \
                    for (j = 0; nan; j++) /* rare: rescan for the first NaN */                     \
                        if (r[j] >= 0 && x[r[j]] != x[r[j]])                                       \
                            best = r[j], nan = false;                                              \
                }                                                                                  \
                if (op == OP_GATHER)                                                               \
                    y[o] = best < 0 ? (T)0 : t[best];                                              \
                else if (best >= 0)                                                                \
                    y[best] += t[o];                                                               \
            }                                                                                      \
        }                                                                                          \
    }
DEF_ROW(f32, float, double, -INFINITY)
DEF_ROW(f64, double, double, -INFINITY)
DEF_ROW(i32, int32_t, int64_t, INT32_MIN)
DEF_ROW(i64, int64_t, int64_t, INT64_MIN)

static void run_row(cft_dtype dt, int op, int64_t nw, int64_t on, const int64_t *row, const char *x,
                    const char *t, char *y) {
    switch (dt) {
    case CFT_F32:
        row_f32(op, nw, on, row, (const float *)x, (const float *)t, (float *)y);
        break;
    case CFT_F64:
        row_f64(op, nw, on, row, (const double *)x, (const double *)t, (double *)y);
        break;
    case CFT_I32:
        row_i32(op, nw, on, row, (const int32_t *)x, (const int32_t *)t, (int32_t *)y);
        break;
    default:
        row_i64(op, nw, on, row, (const int64_t *)x, (const int64_t *)t, (int64_t *)y);
        break;
    }
}

/* Run op. SUM/MAX: y = op over windows of x (t unused). GATHER: y[o] =
 * t[argmax]. SCATTER: y (x's shape, zeroed here) += t (windows' shape).
 * Row-major y; x and t are made contiguous. */
static cft_array *walk_run(int op, const wgeom *g0, cft_array *x, cft_array *t, cft_array *y) {
    wgeom g = *g0;
    if (g.nd == 0) { /* a scalar: one dim of size 1 */
        g.nd = 1;
        g.in[0] = g.win[0] = g.s[0] = g.wd[0] = g.out[0] = 1;
    }
    int nd = g.nd;
    x = cft__contig(x);
    if (t)
        t = cft__contig(t);
    if (cft_failed(x))
        return x;
    if (t && cft_failed(t))
        return t;
    cft_dtype dt = x->aval.dtype;
    if (cft_dtype_is_half(dt) || y->aval.dtype != dt) /* cft__run_impl widens halves first */
        return cft__fail(CFT_E_DTYPE, "reduce_window: no kernel for %s into %s", cft__av(&x->aval),
                         cft__av(&y->aval));
    size_t es = cft_dtype_size(dt);
    char *yp = cft__ptr(y);
    const char *xp = cft__ptr(x), *tp = t ? cft__ptr(t) : NULL;
    int64_t ny = cft__numel(y->aval.shape, y->aval.ndim), st[CFT_MAX_NDIM];
    if (op == OP_SCATTER)
        memset(yp, 0, es * (size_t)ny);
    if (cft__numel(g.out, nd) == 0)
        return NULL;
    cft__row_major(g.in, nd, st);
    int64_t *tab[CFT_MAX_NDIM];
    for (int d = 0; d < nd; d++)
        if (!(tab[d] = dim_taps(&g, d, st[d])))
            return cft__oom();
    /* planes: the leading trivial dims */
    int f = 0;
    while (f < nd - 1 && g.win[f] == 1 && g.s[f] == 1 && g.lo[f] == 0 && g.hi[f] == 0)
        f++;
    int64_t nw = 1, npos = 1, nplanes = 1;
    for (int d = f; d < nd; d++)
        nw *= g.win[d], npos *= g.out[d];
    for (int d = 0; d < f; d++)
        nplanes *= g.out[d];
    if (npos * nw <= TABLE_MAX) {
        int64_t *table = cft__new_data(sizeof(int64_t) * (size_t)(npos * nw));
        if (!table)
            return cft__oom();
        fill_table(&g, f, tab, NULL, nw, table);
        int64_t pin = st[f] * g.in[f], pout = npos; /* plane sizes, input and output */
        for (int64_t m = 0; m < nplanes; m++) {
            const char *xm = xp + es * (size_t)(m * pin);
            if (op == OP_SCATTER)
                run_row(dt, op, nw, npos, table, xm, tp + es * (size_t)(m * pout),
                        yp + es * (size_t)(m * pin));
            else
                run_row(dt, op, nw, npos, table, xm,
                        op == OP_GATHER ? tp + es * (size_t)(m * pin) : NULL,
                        yp + es * (size_t)(m * pout));
        }
        return NULL;
    }
    /* rows: the table covers the last dim; the others give per-tap bases */
    int L = nd - 1;
    nw = 1;
    for (int d = 0; d < nd; d++)
        nw *= g.win[d];
    int64_t on = g.out[L], nrows = cft__numel(g.out, L), idx[CFT_MAX_NDIM] = {0};
    int64_t *base = cft__new_data(sizeof(int64_t) * (size_t)nw);
    int64_t *row = cft__new_data(sizeof(int64_t) * (size_t)(nw * on));
    if (!base || !row)
        return cft__oom();
    for (int64_t r = 0; r < nrows; r++) {
        int64_t k[CFT_MAX_NDIM] = {0};
        for (int64_t j = 0; j < nw; j += g.win[L]) { /* taps of the leading dims */
            int64_t off = 0;
            for (int d = 0; d < L && off >= 0; d++) {
                int64_t v = tab[d][k[d] * g.out[d] + idx[d]];
                off = v < 0 ? -1 : off + v;
            }
            for (int64_t kl = 0; kl < g.win[L]; kl++)
                base[j + kl] = off;
            for (int d = L - 1; d >= 0; d--) {
                if (++k[d] < g.win[d])
                    break;
                k[d] = 0;
            }
        }
        /* the last dim's taps: table over dim L with those bases, taps of all dims */
        for (int64_t o = 0; o < on; o++)
            for (int64_t j = 0; j < nw; j++) {
                int64_t v = tab[L][(j % g.win[L]) * on + o];
                row[o * nw + j] = v < 0 || base[j] < 0 ? -1 : base[j] + v;
            }
        if (op == OP_SCATTER)
            run_row(dt, op, nw, on, row, xp, tp + es * (size_t)(r * on), yp);
        else
            run_row(dt, op, nw, on, row, xp, tp, yp + es * (size_t)(r * on));
        for (int d = L - 1; d >= 0; d--) {
            if (++idx[d] < g.out[d])
                break;
            idx[d] = 0;
        }
    }
    cft__keep(x);
    cft__keep(t);
    return NULL;
}

/* impl_into for all four: in[0] is x for the reductions, t / s for the
 * select primitives (whose in[1] is x) */
#define DEF_INTO(NAME, PRIM, OP)                                                                   \
    static cft_array *NAME##_into(cft_array *const *in, int nin, const cft_params *p,              \
                                  cft_array *y) {                                                  \
        (void)nin;                                                                                 \
        wgeom g;                                                                                   \
        cft_array *x = OP == OP_SUM || OP == OP_MAX ? in[0] : in[1];                               \
        cft_array *t = OP == OP_SUM || OP == OP_MAX ? NULL : in[0];                                \
        cft_array *e = wgeometry(PRIM.name, &x->aval, p, &g);                                      \
        return e ? e : walk_run(OP, &g, x, t, y);                                                  \
    }                                                                                              \
    static cft_array *NAME##_impl(cft_array *const *in, int nin, const cft_params *p,              \
                                  cft_array **out) {                                               \
        return cft__impl_by_into(&PRIM, in, nin, p, out);                                          \
    }
DEF_INTO(rws, cft_p_reduce_window_sum, OP_SUM)
DEF_INTO(rwm, cft_p_reduce_window_max, OP_MAX)
DEF_INTO(sga, cft_p_select_and_gather_add, OP_GATHER)
DEF_INTO(sas, cft_p_select_and_scatter_add, OP_SCATTER)

/* ---- rules ---- */

static cft_params wparams(int nd, const int64_t *win, const int64_t *s, const int64_t *pad,
                          const int64_t *wd) {
    cft_params q = {0};
    cft__param_set(&q, WW, win, nd);
    cft__param_set(&q, WS, s, nd);
    cft__param_set(&q, WP, pad, 2 * nd);
    cft__param_set(&q, WD, wd, nd);
    return q;
}

static cft_array *rws_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    ty[0] = t[0] ? cft__bind1(&cft_p_reduce_window_sum, p, 1, t) : NULL;
    return NULL;
}
/* pad the cotangent (strides as interior zeros, the transposed padding) and
 * sum its windows with stride 1: jax's _reduce_window_sum_transpose_rule */
static cft_array *rws_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)nin;
    wgeom g;
    cft_array *e = wgeometry("reduce_window_sum", &in[0], p, &g);
    if (e)
        return e;
    int nd = g.nd;
    int64_t lo[CFT_MAX_NDIM], hi[CFT_MAX_NDIM], it[CFT_MAX_NDIM], one[CFT_MAX_NDIM],
        z[2 * CFT_MAX_NDIM] = {0};
    for (int d = 0; d < nd; d++) {
        one[d] = 1;
        if (cft_dim_is_symbolic(g.in[d])) { /* a unit window: nothing to pad */
            lo[d] = hi[d] = it[d] = 0;
            continue;
        }
        int64_t kd = dilate(g.win[d], g.wd[d]), od = dilate(g.out[d], g.s[d]);
        lo[d] = kd - g.lo[d] - 1;
        hi[d] = g.in[d] + kd - 1 - od - lo[d];
        it[d] = g.s[d] - 1;
        one[d] = 1;
    }
    cft_array *c = cft_pad(ct[0], cft_scalar(0, in[0].dtype), lo, hi, it);
    cft_params q = wparams(nd, p->v[WW], one, z, p->v[WD]);
    ct_in[0] = cft__bind1(&cft_p_reduce_window_sum, &q, 1, &c);
    return NULL;
}
static cft_array *rwm_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] =
        t[0] ? cft__bind1(&cft_p_select_and_gather_add, p, 2, (cft_array *[]){t[0], x[0]}) : NULL;
    return NULL;
}

/* d(select_and_gather_add(t, x)) = select_and_gather_add(dt, x): x only
 * chooses positions (zero derivative); likewise for scatter */
static cft_array *sga_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] =
        t[0] ? cft__bind1(&cft_p_select_and_gather_add, p, 2, (cft_array *[]){t[0], x[1]}) : NULL;
    return NULL;
}
static cft_array *sas_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] =
        t[0] ? cft__bind1(&cft_p_select_and_scatter_add, p, 2, (cft_array *[]){t[0], x[1]}) : NULL;
    return NULL;
}
static cft_array *sga_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin;
    if (!x[1] || x[0])
        return cft__fail(CFT_E_TRACE,
                         "select_and_gather_add: transpose needs a known operand and a "
                         "linear tangent");
    ct_in[0] = cft__bind1(&cft_p_select_and_scatter_add, p, 2, (cft_array *[]){ct[0], x[1]});
    return NULL;
}
static cft_array *sas_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)in, (void)nin;
    if (!x[1] || x[0])
        return cft__fail(CFT_E_TRACE,
                         "select_and_scatter_add: transpose needs a known operand and a "
                         "linear source");
    ct_in[0] = cft__bind1(&cft_p_select_and_gather_add, p, 2, (cft_array *[]){ct[0], x[1]});
    return NULL;
}

/* a size-1 window dim (stride 1, no padding) where the batch dim sits */
static cft_params with_unit_dim(const cft_params *p, int at) {
    int nd = p->n[WW];
    int64_t win[CFT_MAX_NDIM], s[CFT_MAX_NDIM], pad[2 * CFT_MAX_NDIM], wd[CFT_MAX_NDIM];
    for (int d = 0, k = 0; d <= nd; d++) {
        if (d == at) {
            win[d] = s[d] = wd[d] = 1, pad[2 * d] = pad[2 * d + 1] = 0;
            continue;
        }
        win[d] = p->v[WW][k], s[d] = p->v[WS][k], wd[d] = p->v[WD][k];
        pad[2 * d] = p->v[WP][2 * k], pad[2 * d + 1] = p->v[WP][2 * k + 1];
        k++;
    }
    return wparams(nd + 1, win, s, pad, wd);
}
static cft_array *unary_vmap(const cft_prim *prim, cft_array *const *x, const int *bdim,
                             const cft_params *p, cft_array **y, int *ybdim) {
    if (p->n[WW] + 1 > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "%s: vmap would need rank %d", prim->name, p->n[WW] + 1);
    cft_params q = with_unit_dim(p, bdim[0]);
    y[0] = cft__bind1(prim, &q, 1, x);
    ybdim[0] = bdim[0];
    return NULL;
}
static cft_array *binary_vmap(const cft_prim *prim, int64_t size, cft_array *const *x,
                              const int *bdim, const cft_params *p, cft_array **y, int *ybdim) {
    if (p->n[WW] + 1 > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "%s: vmap would need rank %d", prim->name, p->n[WW] + 1);
    int at = bdim[0] >= 0 && (bdim[1] < 0 || bdim[1] == bdim[0]) ? bdim[0]
             : bdim[1] >= 0 && bdim[0] < 0                       ? bdim[1]
                                                                 : 0;
    cft_array *a = cft__batch_at(x[0], bdim[0], size, at),
              *b = cft__batch_at(x[1], bdim[1], size, at);
    cft_params q = with_unit_dim(p, at);
    y[0] = cft__bind1(prim, &q, 2, (cft_array *[]){a, b});
    ybdim[0] = at;
    return NULL;
}
#define DEF_VMAP1(NAME, PRIM)                                                                      \
    static cft_array *NAME##_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,     \
                                  const cft_params *p, cft_array **y, int *ybdim) {                \
        (void)size, (void)nin;                                                                     \
        return unary_vmap(&PRIM, x, bdim, p, y, ybdim);                                            \
    }
#define DEF_VMAP2(NAME, PRIM)                                                                      \
    static cft_array *NAME##_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,     \
                                  const cft_params *p, cft_array **y, int *ybdim) {                \
        (void)nin;                                                                                 \
        return binary_vmap(&PRIM, size, x, bdim, p, y, ybdim);                                     \
    }
DEF_VMAP1(rws, cft_p_reduce_window_sum)
DEF_VMAP1(rwm, cft_p_reduce_window_max)
DEF_VMAP2(sga, cft_p_select_and_gather_add)
DEF_VMAP2(sas, cft_p_select_and_scatter_add)

#define WPNAMES .pnames = {"window", "strides", "padding", "window_dilation"}
const cft_prim cft_p_reduce_window_sum = {
    .name = "reduce_window_sum",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    WPNAMES,
    .shape = rws_shape,
    .impl = rws_impl,
    .jvp = rws_jvp,
    .transpose = rws_transpose,
    .vmap = rws_vmap,
    .impl_into = rws_into,
};
const cft_prim cft_p_reduce_window_max = {
    .name = "reduce_window_max",
    .nin = 1,
    .nout = 1,
    WPNAMES,
    .shape = rwm_shape,
    .impl = rwm_impl,
    .jvp = rwm_jvp,
    .vmap = rwm_vmap,
    .impl_into = rwm_into,
};
const cft_prim cft_p_select_and_gather_add = {
    .name = "select_and_gather_add",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    WPNAMES,
    .shape = sga_shape,
    .impl = sga_impl,
    .jvp = sga_jvp,
    .transpose = sga_transpose,
    .vmap = sga_vmap,
    .impl_into = sga_into,
};
const cft_prim cft_p_select_and_scatter_add = {
    .name = "select_and_scatter_add",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    WPNAMES,
    .shape = sas_shape,
    .impl = sas_impl,
    .jvp = sas_jvp,
    .transpose = sas_transpose,
    .vmap = sas_vmap,
    .impl_into = sas_into,
};

/* ======== public ops ======== */

static cft_array *reduce_window(const char *nm, const cft_prim *prim, cft_array *x,
                                const int64_t *window, const int64_t *strides,
                                const int64_t *padding, const int64_t *dilation) {
    CFT_PROPAGATE(nm, x);
    int nd = x->aval.ndim;
    if (nd && !window)
        return cft__fail(CFT_E_ARG, "%s: window is NULL for %s", nm, cft__av(&x->aval));
    int64_t s[CFT_MAX_NDIM], pad[2 * CFT_MAX_NDIM], wd[CFT_MAX_NDIM];
    for (int d = 0; d < nd; d++) {
        s[d] = strides ? strides[d] : 1;
        wd[d] = dilation ? dilation[d] : 1;
        pad[2 * d] = padding ? padding[2 * d] : 0;
        pad[2 * d + 1] = padding ? padding[2 * d + 1] : 0;
    }
    cft_params p = wparams(nd, window, s, pad, wd);
    return cft__bind1(prim, &p, 1, &x);
}
cft_array *cft_reduce_window_sum(cft_array *x, const int64_t *window, const int64_t *strides,
                                 const int64_t *padding, const int64_t *dilation) {
    CFT_API("cft_reduce_window_sum");
    return reduce_window("cft_reduce_window_sum", &cft_p_reduce_window_sum, x, window, strides,
                         padding, dilation);
}
cft_array *cft_reduce_window_max(cft_array *x, const int64_t *window, const int64_t *strides,
                                 const int64_t *padding, const int64_t *dilation) {
    CFT_API("cft_reduce_window_max");
    return reduce_window("cft_reduce_window_max", &cft_p_reduce_window_max, x, window, strides,
                         padding, dilation);
}

/* 2-d pooling over the last two dims of [N, C, H, W] or [C, H, W] */
static cft_array *pool2d(const char *nm, const cft_prim *prim, cft_array *x, const int64_t *kernel,
                         const int64_t *stride, const int64_t *padding, const int64_t *dilation) {
    CFT_PROPAGATE(nm, x);
    int nd = x->aval.ndim;
    if ((nd != 3 && nd != 4) || !kernel)
        return cft__fail(CFT_E_ARG,
                         "%s: input %s must be [N, C, H, W] or [C, H, W], kernel non-NULL", nm,
                         cft__av(&x->aval));
    int64_t win[4] = {1, 1, 1, 1}, s[4] = {1, 1, 1, 1}, pad[8] = {0}, wd[4] = {1, 1, 1, 1};
    for (int i = 0; i < 2; i++) {
        int d = nd - 2 + i;
        win[d] = kernel[i];
        s[d] = stride ? stride[i] : kernel[i];
        wd[d] = dilation ? dilation[i] : 1;
        int64_t pv = padding ? padding[i] : 0;
        if (pv < 0 || 2 * pv > kernel[i])
            return cft__fail(CFT_E_ARG,
                             "%s: padding %lld must be in [0, kernel/2] (kernel %lld) for %s", nm,
                             (long long)pv, (long long)kernel[i], cft__av(&x->aval));
        pad[2 * d] = pad[2 * d + 1] = pv;
    }
    return reduce_window(nm, prim, x, win, s, pad, wd);
}

cft_array *cft_max_pool2d(cft_array *x, const int64_t *kernel, const int64_t *stride,
                          const int64_t *padding, const int64_t *dilation) {
    CFT_API("cft_max_pool2d");
    return pool2d("cft_max_pool2d", &cft_p_reduce_window_max, x, kernel, stride, padding, dilation);
}

cft_array *cft_avg_pool2d(cft_array *x, const int64_t *kernel, const int64_t *stride,
                          const int64_t *padding, bool count_include_pad) {
    CFT_PROPAGATE("cft_avg_pool2d", x);
    if (!cft_dtype_is_float(x->aval.dtype))
        x = cft_astype(x, CFT_F32);
    cft_array *s =
        pool2d("cft_avg_pool2d", &cft_p_reduce_window_sum, x, kernel, stride, padding, NULL);
    if (cft_failed(s))
        return s;
    bool padded = padding && (padding[0] || padding[1]);
    if (count_include_pad || !padded)
        return cft_mul_s(s, 1.0 / (double)(kernel[0] * kernel[1]));
    /* the number of real elements under each window: a constant */
    int nd = x->aval.ndim;
    cft_array *ones = cft_ones(x->aval.dtype, x->aval.shape + nd - 2, 2);
    cft_array *cnt = pool2d("cft_avg_pool2d", &cft_p_reduce_window_sum, cft_expand_dims(ones, 0),
                            kernel, stride, padding, NULL);
    return cft_div(s, cft_squeeze(cnt, (int[]){0}, 1));
}
