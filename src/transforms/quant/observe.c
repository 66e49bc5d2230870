/* observe.c: the observers of quantization sites and the two effect
 * primitives that reach them from traced code: quant_observe (its output
 * is its input; running it records the input's range in the site's
 * observer) and quant_params (the site's scale and zero point as they are
 * when it runs). Being primitives with effects, they run whenever the
 * function runs, eagerly, replayed from its cached IR, or jitted, so
 * observers follow every call as torch's do. They refer to this process's
 * records and are not in the registry, so programs holding them do not
 * export (cft_quant_convert's programs hold neither). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "core/vec.h"
#include "prims/rules.h"
#include "transforms/quant/quant_internal.h"

#define NBINS 2048

int64_t cft__qlo(const cft_quant_spec *s) {
    return s->symmetric ? -(INT64_C(1) << (s->bits - 1)) : 0;
}
int64_t cft__qhi(const cft_quant_spec *s) {
    return s->symmetric ? (INT64_C(1) << (s->bits - 1)) - 1 : (INT64_C(1) << s->bits) - 1;
}

/* torch's _calculate_qparams for one channel */
void cft__qparams_d(double mn, double mx, const cft_quant_spec *s, double *scale, double *zp) {
    double lo = mn < 0 ? mn : 0, hi = mx > 0 ? mx : 0, eps = 1.1920928955078125e-07;
    int64_t a = cft__qlo(s), b = cft__qhi(s);
    if (s->symmetric) {
        double m = -lo > hi ? -lo : hi;
        *scale = m / ((double)(b - a) / 2);
        *zp = 0;
    } else {
        *scale = (hi - lo) / (double)(b - a);
    }
    if (!(*scale > eps))
        *scale = eps;
    if (!s->symmetric) {
        double z = (double)a - nearbyint(lo / *scale);
        *zp = z < (double)a ? (double)a : z > (double)b ? (double)b : z;
    }
}

const cft_quant_spec *cft__qspec(const cft_quant *q, const cft__qsite *s) {
    return s->weight ? &q->qz.weight : &q->qz.activation;
}

/* the percentile of |x| from member m's histogram */
static double percentile_of(const cft__qsite *s, int64_t m, double pct) {
    const double *h = s->hist + m * NBINS;
    double total = 0, acc = 0;
    for (int i = 0; i < NBINS; i++)
        total += h[i];
    for (int i = 0; i < NBINS; i++) {
        acc += h[i];
        if (acc >= total * pct / 100)
            return s->absmax[m] * (i + 1) / NBINS;
    }
    return s->absmax[m];
}

/* member m's range of a site, channel c */
static void range_of(const cft_quant *q, const cft__qsite *s, int64_t m, int64_t c, double *mn,
                     double *mx) {
    *mn = s->mn[m * s->nch + c], *mx = s->mx[m * s->nch + c];
    const cft_quant_spec *sp = cft__qspec(q, s);
    if (sp->observer == CFT_OBS_PERCENTILE && s->hist) {
        double clip = percentile_of(s, m, sp->percentile);
        *mn = *mn < -clip ? -clip : *mn;
        *mx = *mx > clip ? clip : *mx;
    }
}

/* per-channel min and max (mn, mx: nch each) and the largest |v| (am) of
 * values laid out [outer, nch, inner] (nch 1: per tensor), read in place
 * in their dtype; NaNs are skipped (a comparison with NaN is false), so
 * the selects below are the vector min / max instructions; tmp holds
 * 3 nch values of the dtype */
#define RANGES(T, ABS)                                                                             \
    enum { L = 16 }; /* lanes: the vector loops' independent accumulators */                       \
    T a = 0;                                                                                       \
    if (inner == 1) { /* channels along the last dim: across them */                               \
        T *restrict lo = (T *)tmp, *restrict hi = lo + nch, *restrict m = hi + nch;                \
        for (int64_t c = 0; c < nch; c++)                                                          \
            lo[c] = INFINITY, hi[c] = -INFINITY, m[c] = 0;                                         \
        for (int64_t o = 0; o < outer; o++) {                                                      \
            const T *restrict r = v + o * nch;                                                     \
            for (int64_t c = 0; c < nch; c++) {                                                    \
                T x = r[c], ax = ABS(x);                                                           \
                lo[c] = x < lo[c] ? x : lo[c];                                                     \
                hi[c] = x > hi[c] ? x : hi[c];                                                     \
                m[c] = ax > m[c] ? ax : m[c];                                                      \
            }                                                                                      \
        }                                                                                          \
        for (int64_t c = 0; c < nch; c++) {                                                        \
            mn[c] = lo[c], mx[c] = hi[c];                                                          \
            a = m[c] > a ? m[c] : a;                                                               \
        }                                                                                          \
    } else {                                                                                       \
        for (int64_t c = 0; c < nch; c++)                                                          \
            mn[c] = INFINITY, mx[c] = -INFINITY;                                                   \
        for (int64_t o = 0; o < outer; o++)                                                        \
            for (int64_t c = 0; c < nch; c++) {                                                    \
                const T *restrict r = v + (o * nch + c) * inner;                                   \
                T lo[L], hi[L], m[L];                                                              \
                for (int j = 0; j < L; j++)                                                        \
                    lo[j] = INFINITY, hi[j] = -INFINITY, m[j] = 0;                                 \
                int64_t i = 0;                                                                     \
                for (; i + L <= inner; i += L)                                                     \
                    for (int j = 0; j < L; j++) {                                                  \
                        T x = r[i + j], ax = ABS(x);                                               \
                        lo[j] = x < lo[j] ? x : lo[j];                                             \
                        hi[j] = x > hi[j] ? x : hi[j];                                             \
                        m[j] = ax > m[j] ? ax : m[j];                                              \
                    }                                                                              \
                for (; i < inner; i++) {                                                           \
                    T x = r[i], ax = ABS(x);                                                       \
                    lo[0] = x < lo[0] ? x : lo[0];                                                 \
                    hi[0] = x > hi[0] ? x : hi[0];                                                 \
                    m[0] = ax > m[0] ? ax : m[0];                                                  \
                }                                                                                  \
                for (int j = 0; j < L; j++) {                                                      \
                    mn[c] = lo[j] < mn[c] ? lo[j] : mn[c];                                         \
                    mx[c] = hi[j] > mx[c] ? hi[j] : mx[c];                                         \
                    a = m[j] > a ? m[j] : a;                                                       \
                }                                                                                  \
            }                                                                                      \
    }                                                                                              \
    *am = a
static CFT_VEC void ranges_f32(const float *v, int64_t outer, int64_t nch, int64_t inner,
                               double *mn, double *mx, double *am, void *tmp) {
    RANGES(float, fabsf);
}
static CFT_VEC void ranges_f64(const double *v, int64_t outer, int64_t nch, int64_t inner,
                               double *mn, double *mx, double *am, void *tmp) {
    RANGES(double, fabs);
}

/* member m's observer of a site takes in a call's ranges (and, for the
 * percentile observer, its values v, as doubles) */
static void observe(cft_quant *q, cft__qsite *s, int64_t m, const double *mn, const double *mx,
                    double am, const double *v, int64_t n) {
    const cft_quant_spec *sp = cft__qspec(q, s);
    double *smn = s->mn + m * s->nch, *smx = s->mx + m * s->nch;
    bool seen = s->seen[m];
    for (int64_t c = 0; c < s->nch; c++) {
        if (!isfinite(mn[c]) || !isfinite(mx[c]))
            continue;
        if (!seen || sp->observer != CFT_OBS_MOVING_AVERAGE) {
            smn[c] = seen && mn[c] > smn[c] ? smn[c] : mn[c];
            smx[c] = seen && mx[c] < smx[c] ? smx[c] : mx[c];
        } else {
            smn[c] += sp->averaging * (mn[c] - smn[c]);
            smx[c] += sp->averaging * (mx[c] - smx[c]);
        }
    }
    double *h = s->hist ? s->hist + m * NBINS : NULL;
    if (v && h && isfinite(am) && am > 0) {
        if (am > s->absmax[m]) { /* widen: move the old counts into the new bins */
            double tmp[NBINS] = {0};
            for (int i = 0; i < NBINS; i++) {
                int j = (int)((i + 0.5) / NBINS * s->absmax[m] / am * NBINS);
                tmp[j < NBINS ? j : NBINS - 1] += h[i];
            }
            memcpy(h, tmp, sizeof tmp);
            s->absmax[m] = am;
        }
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(v[i]))
                continue;
            int j = (int)(fabs(v[i]) / s->absmax[m] * NBINS);
            h[j < NBINS ? j : NBINS - 1] += 1;
        }
    }
    s->seen[m] = true;
}

cft_array *cft__qsite_at(cft_quant *q, int k, const char *prim, bool weight, int axis, int64_t nch,
                         cft__qsite **out) {
    if (k < q->n) {
        cft__qsite *s = &q->s[k];
        if (strcmp(s->prim, prim) || s->weight != weight || s->nch != nch)
            return cft__fail(CFT_E_ARG,
                             "cft_quant: site %d was %s (%s, %lld channels), now %s (%s, %lld): "
                             "the function binds other operations than when it was observed",
                             k, s->prim, s->weight ? "weight" : "activation", (long long)s->nch,
                             prim, weight ? "weight" : "activation", (long long)nch);
        *out = s;
        return NULL;
    }
    if (k > q->n)
        return cft__fail(CFT_E_ARG, "cft_quant: site %d before site %d", k, q->n);
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 16;
        cft__qsite *ns = CFT_NEWN(cft__qsite, cap);
        if (!ns)
            return cft__oom();
        if (q->n)
            memcpy(ns, q->s, sizeof(cft__qsite) * (size_t)q->n);
        q->s = ns, q->cap = cap;
    }
    cft__qsite *s = &q->s[q->n];
    memset(s, 0, sizeof *s);
    s->prim = prim, s->weight = weight, s->axis = axis, s->nch = nch;
    bool pct = cft__qspec(q, s)->observer == CFT_OBS_PERCENTILE;
    size_t nm = (size_t)q->members;
    if (nch > INT64_MAX / 8 / q->members)
        return cft__fail(CFT_E_ARG, "cft_quant: %d members of %lld channels overflow", q->members,
                         (long long)nch);
    s->seen = cft__new_data(nm);
    s->mn = cft__new_data(sizeof(double) * nm * (size_t)nch);
    s->mx = cft__new_data(sizeof(double) * nm * (size_t)nch);
    s->absmax = cft__new_data(sizeof(double) * nm);
    s->hist = pct ? cft__new_data(sizeof(double) * NBINS * nm) : NULL;
    if (!s->seen || !s->mn || !s->mx || !s->absmax || (pct && !s->hist))
        return cft__oom();
    memset(s->seen, 0, nm);
    memset(s->absmax, 0, sizeof(double) * nm);
    if (pct)
        memset(s->hist, 0, sizeof(double) * NBINS * nm);
    q->n++;
    *out = s;
    return NULL;
}

void cft__qparams_vals(const cft_quant *q, const cft__qsite *s, int64_t m, double *sc, double *zp) {
    for (int64_t c = 0; c < s->nch; c++) {
        double mn, mx;
        range_of(q, s, m, c, &mn, &mx);
        cft__qparams_d(mn, mx, cft__qspec(q, s), &sc[c], &zp[c]);
    }
}

void cft__qparams_arrays(int axis, int64_t nch, const double *sc, const double *zp,
                         cft_array **scale, cft_array **zpa) {
    if (axis < 0) {
        *scale = cft_scalar(sc[0], CFT_F32), *zpa = cft_scalar(zp[0], CFT_F32);
    } else {
        *scale = cft_astype(cft_from_data(sc, CFT_F64, &nch, 1), CFT_F32);
        *zpa = cft_astype(cft_from_data(zp, CFT_F64, &nch, 1), CFT_F32);
    }
}

/* ---- the records the primitives refer to, by handle ---- */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static cft_quant **reg; /* GC block held by a static root */
static int nreg, capreg;

static int handle_of(cft_quant *q) {
    pthread_mutex_lock(&reg_mu);
    if (q->id < 0) {
        if (nreg == capreg) {
            int cap = capreg ? 2 * capreg : 64;
            cft_quant **nr = CFT_NEWN(cft_quant *, cap);
            if (nr && nreg)
                memcpy(nr, reg, sizeof(cft_quant *) * (size_t)nreg);
            if (nr)
                reg = nr, capreg = cap;
        }
        if (nreg < capreg)
            reg[nreg] = q, q->id = nreg++;
    }
    int id = q->id;
    pthread_mutex_unlock(&reg_mu);
    return id;
}

static cft_quant *record_of(int64_t id) {
    pthread_mutex_lock(&reg_mu);
    cft_quant *q = id >= 0 && id < nreg ? reg[id] : NULL;
    pthread_mutex_unlock(&reg_mu);
    return q;
}

extern const cft_prim cft_p_quant_observe, cft_p_quant_params;

/* the member indices of a call (nm of them, the member input's values),
 * each checked against the record's members */
static cft_array *members_of(const char *op, const cft_quant *q, cft_array *member, int64_t nm,
                             int64_t *mem) {
    if (cft_array_size(member) != nm || cft_copy_to(member, CFT_I64, mem) != CFT_OK)
        return cft__fail(CFT_E_ARG, "%s: member index %s does not give %lld members", op,
                         cft__av(&member->aval), (long long)nm);
    for (int64_t i = 0; i < nm; i++)
        if (mem[i] < 0 || mem[i] >= q->members)
            return cft__fail(CFT_E_ARG, "%s: member index %lld outside [0, %d)", op,
                             (long long)mem[i], q->members);
    return NULL;
}

/* ---- quant_observe (x, member): params record, site, axis (the channel
 * axis of x, -1 per tensor), maxis (-1: member is a scalar; else member is
 * 1-d and x's dim maxis runs over those members) ---- */

static cft_array *obs_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    out[0] = in[0];
    return NULL;
}

static cft_array *obs_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    (void)nin;
    cft_quant *q = record_of(p->v[0][0]);
    int k = (int)p->v[1][0], axis = (int)p->v[2][0], maxis = (int)p->v[3][0];
    if (!q)
        return cft__fail(CFT_E_ARG, "quant_observe: no record %lld", (long long)p->v[0][0]);
    const cft_aval *av = &x[0]->aval;
    int64_t nm = maxis >= 0 && maxis < av->ndim ? av->shape[maxis] : 1;
    int64_t *mem = malloc(sizeof(int64_t) * (size_t)(nm > 0 ? nm : 1)); /* a batch: not the stack */
    if (!mem)
        return cft__oom();
    cft_array *e = members_of("quant_observe", q, x[1], nm, mem);
    if (e) {
        free(mem);
        return e;
    }
    /* one member's values: x without its member dim (moved to the front) */
    int64_t shape[CFT_MAX_NDIM];
    int nd = 0, ax = maxis >= 0 && axis > maxis ? axis - 1 : axis;
    for (int d = 0; d < av->ndim; d++)
        if (d != maxis || maxis < 0)
            shape[nd++] = av->shape[d];
    int64_t n = 1, nch = ax >= 0 && ax < nd ? shape[ax] : 1, inner = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    for (int d = ax + 1; ax >= 0 && d < nd; d++)
        inner *= shape[d];
    if (ax < 0) /* per tensor: one run of all values */
        inner = n;
    int64_t outer = nch * inner > 0 ? n / (nch * inner) : 0;
    pthread_mutex_lock(&q->mu);
    bool hist = k < q->n && q->s[k].hist && cft__qspec(q, &q->s[k])->observer == CFT_OBS_PERCENTILE;
    bool fits = k < q->n && q->s[k].nch == nch && !q->paused;
    pthread_mutex_unlock(&q->mu);
    if (!fits || nm == 0) {
        free(mem);
        y[0] = x[0];
        return NULL;
    }
    cft_array *xc = cft__contig(maxis > 0 ? cft__moveaxis_b(x[0], maxis, 0) : x[0]);
    double *mn = cft_failed(xc) ? NULL : malloc(sizeof(double) * (size_t)(5 * nch + 1));
    if (!mn) {
        free(mem);
        return cft_failed(xc) ? xc : cft__oom();
    }
    double *mx = mn + nch, *tmp = mx + nch, am = 0;
    /* the percentile observer bins every value: those as doubles, in
     * per-thread scratch, kept (a GC block per site per call was garbage
     * at every QAT step); other dtypes are read as doubles too */
    double *v = NULL;
    bool asd = hist || (av->dtype != CFT_F32 && av->dtype != CFT_F64);
    if (asd) {
        int64_t all = n * nm;
        v = cft__scratch(CFT_SCRATCH_QOBS, sizeof(double) * (size_t)(all > 0 ? all : 1),
                         (size_t)1 << 28);
        if (!v || cft_copy_to(xc, CFT_F64, v) != CFT_OK) {
            free(mn), free(mem);
            return v ? cft__fail(CFT_E_ARG, "quant_observe: cannot read %s", cft__av(av))
                     : cft__oom();
        }
    }
    for (int64_t i = 0; i < nm; i++) {
        if (asd)
            ranges_f64(v + i * n, outer, nch, inner, mn, mx, &am, tmp);
        else if (av->dtype == CFT_F32)
            ranges_f32((const float *)cft__ptr(xc) + i * n, outer, nch, inner, mn, mx, &am, tmp);
        else
            ranges_f64((const double *)cft__ptr(xc) + i * n, outer, nch, inner, mn, mx, &am, tmp);
        pthread_mutex_lock(&q->mu);
        if (k < q->n && q->s[k].nch == nch && !q->paused)
            observe(q, &q->s[k], mem[i], mn, mx, am, hist ? v + i * n : NULL, n);
        pthread_mutex_unlock(&q->mu);
    }
    free(mn), free(mem);
    cft__keep(xc);
    y[0] = x[0];
    return NULL;
}

static cft_array *obs_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin, (void)p;
    ty[0] = t[0]; /* the primal bind observed */
    return NULL;
}

/* a batch of samples (the member index not batched) is observed whole:
 * the channel and member axes move past the batch's; a batch of members
 * (the member index batched: an ensemble) observes each member's values
 * in its own observer, x's member dim first */
static cft_array *obs_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    cft_params q = *p;
    cft_array *in[2] = {x[0], x[1]};
    if (bdim[1] >= 0) {
        if (q.v[3][0] >= 0)
            return cft__fail(CFT_E_ARG, "cft_quant: the member index is batched twice (vmap over "
                                        "members nested in another vmap over members)");
        in[0] = cft__batch_at(x[0], bdim[0], size, 0);
        in[1] = cft__batch_at(x[1], bdim[1], size, 0);
        q.v[2][0] += q.v[2][0] >= 0;
        q.v[3][0] = 0;
        ybdim[0] = 0;
    } else {
        if (q.v[2][0] >= 0 && bdim[0] <= q.v[2][0])
            q.v[2][0]++;
        if (q.v[3][0] >= 0 && bdim[0] <= q.v[3][0])
            q.v[3][0]++;
        ybdim[0] = bdim[0];
    }
    y[0] = cft__bind1(&cft_p_quant_observe, &q, 2, in);
    return cft_failed(y[0]) ? y[0] : NULL;
}

const cft_prim cft_p_quant_observe = {
    .name = "quant_observe",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_EFFECT,
    .pnames = {"record", "site", "axis", "member_axis"},
    .shape = obs_shape,
    .impl = obs_impl,
    .jvp = obs_jvp,
    .vmap = obs_vmap,
};

/* ---- quant_params (x, member): params record, site, channels (0: per
 * tensor), stacked (member is 1-d: the outputs gain a leading member
 * dim); x only orders the call after x's observer ---- */

static cft_array *par_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    int64_t shape[2];
    int nd = 0;
    if (p->v[3][0]) {
        if (in[1].ndim != 1)
            return cft__fail(CFT_E_SHAPE, "quant_params: stacked member index %s is not 1-d",
                             cft__av(&in[1]));
        shape[nd++] = in[1].shape[0];
    }
    if (p->v[2][0] > 0)
        shape[nd++] = p->v[2][0];
    out[0] = cft__aval(CFT_F32, shape, nd);
    out[1] = out[0];
    return NULL;
}

static cft_array *par_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    (void)nin;
    cft_quant *q = record_of(p->v[0][0]);
    int k = (int)p->v[1][0], stacked = (int)p->v[3][0];
    int64_t nch = p->v[2][0] > 0 ? p->v[2][0] : 1;
    if (!q)
        return cft__fail(CFT_E_ARG, "quant_params: no record %lld", (long long)p->v[0][0]);
    int64_t nm = stacked ? cft_array_size(x[1]) : 1;
    if (nm > 0 && nch > INT64_MAX / 16 / nm)
        return cft__fail(CFT_E_ARG, "quant_params: %lld members of %lld channels overflow",
                         (long long)nm, (long long)nch);
    /* the values under the lock, the arrays after it; mem: the indices */
    double *sc = malloc(sizeof(double) * 2 * (size_t)(nm * nch > 0 ? nm * nch : 1) +
                        sizeof(int64_t) * (size_t)(nm > 0 ? nm : 1)),
           *zp = sc + nm * nch;
    if (!sc)
        return cft__oom();
    int64_t *mem = (int64_t *)(zp + nm * nch);
    cft_array *e = members_of("quant_params", q, x[1], nm, mem);
    if (e) {
        free(sc);
        return e;
    }
    pthread_mutex_lock(&q->mu);
    for (int64_t i = 0; !e && i < nm; i++) {
        if (k >= q->n || !q->s[k].seen[mem[i]] || q->s[k].nch != nch)
            e = cft__fail(CFT_E_ARG, "cft_quant: site %d of member %lld has seen no finite values",
                          k, (long long)mem[i]);
        else
            cft__qparams_vals(q, &q->s[k], mem[i], sc + i * nch, zp + i * nch);
    }
    pthread_mutex_unlock(&q->mu);
    if (!e && stacked) {
        int64_t shape[2] = {nm, nch};
        int nd = p->v[2][0] > 0 ? 2 : 1;
        y[0] = cft_astype(cft_from_data(sc, CFT_F64, shape, nd), CFT_F32);
        y[1] = cft_astype(cft_from_data(zp, CFT_F64, shape, nd), CFT_F32);
    } else if (!e)
        cft__qparams_arrays(p->v[2][0] > 0 ? 0 : -1, nch, sc, zp, &y[0], &y[1]);
    free(sc);
    return e;
}

/* a batch of samples: one set of parameters for all of it; a batch of
 * members: one set each, stacked along the outputs' first dim */
static cft_array *par_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    cft_params q = *p;
    cft_array *in[2] = {x[0], x[1]};
    ybdim[0] = ybdim[1] = -1;
    if (bdim[1] >= 0) {
        if (q.v[3][0])
            return cft__fail(CFT_E_ARG, "cft_quant: the member index is batched twice (vmap over "
                                        "members nested in another vmap over members)");
        in[1] = cft__batch_at(x[1], bdim[1], size, 0);
        q.v[3][0] = 1;
        ybdim[0] = ybdim[1] = 0;
    }
    return cft__bind(&cft_p_quant_params, &q, 2, in, 2, y);
}

const cft_prim cft_p_quant_params = {
    .name = "quant_params",
    .nin = 2,
    .nout = 2,
    .flags = CFT_PRIM_EFFECT | CFT_PRIM_NONDIFF,
    .pnames = {"record", "site", "channels", "stacked"},
    .shape = par_shape,
    .impl = par_impl,
    .vmap = par_vmap,
};

/* the parameters of both primitives: record, site, axis or channels, and
 * the member axis or stacking (none) */
static bool params_for(cft_quant *q, int k, int64_t third, int64_t fourth, cft_params *p) {
    int id = handle_of(q);
    memset(p, 0, sizeof *p);
    cft__param_set1(p, 0, id);
    cft__param_set1(p, 1, k);
    cft__param_set1(p, 2, third);
    cft__param_set1(p, 3, fourth);
    return id >= 0;
}

cft_array *cft__qobserve(cft_quant *q, int k, cft_array *x, cft_array *member, int axis) {
    cft_params p;
    if (!params_for(q, k, axis, -1, &p))
        return cft__oom();
    return cft__bind1(&cft_p_quant_observe, &p, 2, (cft_array *[]){x, member});
}

cft_array *cft__qparams_of(cft_quant *q, int k, int64_t nch, cft_array *x, cft_array *member,
                           cft_array **scale, cft_array **zp) {
    cft_params p;
    if (!params_for(q, k, nch, 0, &p))
        return cft__oom();
    cft_array *y[2];
    cft_array *e = cft__bind(&cft_p_quant_params, &p, 2, (cft_array *[]){x, member}, 2, y);
    *scale = y[0], *zp = y[1];
    return e;
}
