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

/* the percentile of |x| from the histogram */
static double percentile_of(const cft__qsite *s, double pct) {
    double total = 0, acc = 0;
    for (int i = 0; i < NBINS; i++)
        total += s->hist[i];
    for (int i = 0; i < NBINS; i++) {
        acc += s->hist[i];
        if (acc >= total * pct / 100)
            return s->absmax * (i + 1) / NBINS;
    }
    return s->absmax;
}

/* site i's range, channel c */
static void range_of(const cft_quant *q, const cft__qsite *s, int64_t c, double *mn, double *mx) {
    *mn = s->mn[c], *mx = s->mx[c];
    const cft_quant_spec *sp = cft__qspec(q, s);
    if (sp->observer == CFT_OBS_PERCENTILE && s->hist) {
        double clip = percentile_of(s, sp->percentile);
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

/* the site's observer takes in a call's ranges (and, for the percentile
 * observer, its values v, as doubles) */
static void observe(cft_quant *q, cft__qsite *s, const double *mn, const double *mx, double am,
                    const double *v, int64_t n) {
    const cft_quant_spec *sp = cft__qspec(q, s);
    for (int64_t c = 0; c < s->nch; c++) {
        if (!isfinite(mn[c]) || !isfinite(mx[c]))
            continue;
        if (!s->seen || sp->observer != CFT_OBS_MOVING_AVERAGE) {
            s->mn[c] = s->seen && mn[c] > s->mn[c] ? s->mn[c] : mn[c];
            s->mx[c] = s->seen && mx[c] < s->mx[c] ? s->mx[c] : mx[c];
        } else {
            s->mn[c] += sp->averaging * (mn[c] - s->mn[c]);
            s->mx[c] += sp->averaging * (mx[c] - s->mx[c]);
        }
    }
    if (v && s->hist && isfinite(am) && am > 0) {
        if (am > s->absmax) { /* widen: move the old counts into the new bins */
            double tmp[NBINS] = {0};
            for (int i = 0; i < NBINS; i++) {
                int j = (int)((i + 0.5) / NBINS * s->absmax / am * NBINS);
                tmp[j < NBINS ? j : NBINS - 1] += s->hist[i];
            }
            memcpy(s->hist, tmp, sizeof tmp);
            s->absmax = am;
        }
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(v[i]))
                continue;
            int j = (int)(fabs(v[i]) / s->absmax * NBINS);
            s->hist[j < NBINS ? j : NBINS - 1] += 1;
        }
    }
    s->seen = true;
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
    s->mn = cft__new_data(sizeof(double) * (size_t)nch);
    s->mx = cft__new_data(sizeof(double) * (size_t)nch);
    s->hist = pct ? cft__new_data(sizeof(double) * NBINS) : NULL;
    if (!s->mn || !s->mx || (pct && !s->hist))
        return cft__oom();
    if (pct)
        memset(s->hist, 0, sizeof(double) * NBINS);
    q->n++;
    *out = s;
    return NULL;
}

/* the site's parameters now, as arrays (scalars or [nch]) */
void cft__qparams_now(const cft_quant *q, const cft__qsite *s, cft_array **scale, cft_array **zp) {
    double sc[s->nch], z[s->nch];
    for (int64_t c = 0; c < s->nch; c++) {
        double mn, mx;
        range_of(q, s, c, &mn, &mx);
        cft__qparams_d(mn, mx, cft__qspec(q, s), &sc[c], &z[c]);
    }
    if (s->axis < 0) {
        *scale = cft_scalar(sc[0], CFT_F32), *zp = cft_scalar(z[0], CFT_F32);
    } else {
        *scale = cft_astype(cft_from_data(sc, CFT_F64, &s->nch, 1), CFT_F32);
        *zp = cft_astype(cft_from_data(z, CFT_F64, &s->nch, 1), CFT_F32);
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

/* ---- quant_observe: params id, site, axis ---- */

static cft_array *obs_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    out[0] = in[0];
    return NULL;
}

static cft_array *obs_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    (void)nin;
    cft_quant *q = record_of(p->v[0][0]);
    int k = (int)p->v[1][0], axis = (int)p->v[2][0];
    if (!q)
        return cft__fail(CFT_E_ARG, "quant_observe: no record %lld", (long long)p->v[0][0]);
    const cft_aval *av = &x[0]->aval;
    int64_t n = cft_array_size(x[0]), nch = axis >= 0 && axis < av->ndim ? av->shape[axis] : 1,
            inner = 1;
    for (int d = axis + 1; axis >= 0 && d < av->ndim; d++)
        inner *= av->shape[d];
    if (axis < 0) /* per tensor: one run of all values */
        inner = n;
    int64_t outer = nch * inner > 0 ? n / (nch * inner) : 0;
    pthread_mutex_lock(&q->mu);
    bool hist = k < q->n && q->s[k].hist && cft__qspec(q, &q->s[k])->observer == CFT_OBS_PERCENTILE;
    bool fits = k < q->n && q->s[k].nch == nch && !q->paused;
    pthread_mutex_unlock(&q->mu);
    if (!fits) {
        y[0] = x[0];
        return NULL;
    }
    cft_array *xc = cft__contig(x[0]);
    if (cft_failed(xc))
        return xc;
    double *mn = malloc(sizeof(double) * (size_t)(5 * nch + 1)), *mx = mn + nch, *tmp = mx + nch,
           am = 0;
    if (!mn)
        return cft__oom();
    /* the percentile observer bins every value: those as doubles, in
     * per-thread scratch, kept (a GC block per site per call was garbage
     * at every QAT step); other dtypes are read as doubles too */
    double *v = NULL;
    if (hist || (av->dtype != CFT_F32 && av->dtype != CFT_F64)) {
        v = cft__scratch(CFT_SCRATCH_QOBS, sizeof(double) * (size_t)(n > 0 ? n : 1),
                         (size_t)1 << 28);
        if (!v || cft_copy_to(xc, CFT_F64, v) != CFT_OK) {
            free(mn);
            return v ? cft__fail(CFT_E_ARG, "quant_observe: cannot read %s", cft__av(av))
                     : cft__oom();
        }
        ranges_f64(v, outer, nch, inner, mn, mx, &am, tmp);
    } else if (av->dtype == CFT_F32)
        ranges_f32(cft__ptr(xc), outer, nch, inner, mn, mx, &am, tmp);
    else
        ranges_f64(cft__ptr(xc), outer, nch, inner, mn, mx, &am, tmp);
    pthread_mutex_lock(&q->mu);
    if (k < q->n && q->s[k].nch == nch && !q->paused)
        observe(q, &q->s[k], mn, mx, am, hist ? v : NULL, n);
    pthread_mutex_unlock(&q->mu);
    free(mn);
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

/* the whole batch is observed: the channel axis moves past the batch's */
static cft_array *obs_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    cft_params q = *p;
    if (q.v[2][0] >= 0 && bdim[0] >= 0 && bdim[0] <= q.v[2][0])
        q.v[2][0]++;
    y[0] = cft__bind1(&cft_p_quant_observe, &q, 1, x);
    ybdim[0] = bdim[0];
    return cft_failed(y[0]) ? y[0] : NULL;
}

const cft_prim cft_p_quant_observe = {
    .name = "quant_observe",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_EFFECT,
    .pnames = {"record", "site", "axis"},
    .shape = obs_shape,
    .impl = obs_impl,
    .jvp = obs_jvp,
    .vmap = obs_vmap,
};

/* ---- quant_params: params id, site, nch (0: per tensor) ---- */

static cft_array *par_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)in, (void)nin;
    int64_t nch = p->v[2][0];
    out[0] = cft__aval(CFT_F32, &nch, nch > 0 ? 1 : 0);
    out[1] = out[0];
    return NULL;
}

static cft_array *par_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    (void)x, (void)nin;
    cft_quant *q = record_of(p->v[0][0]);
    int k = (int)p->v[1][0];
    if (!q)
        return cft__fail(CFT_E_ARG, "quant_params: no record %lld", (long long)p->v[0][0]);
    cft_array *e = NULL;
    pthread_mutex_lock(&q->mu);
    if (k >= q->n || !q->s[k].seen)
        e = cft__fail(CFT_E_ARG, "cft_quant: site %d has seen no finite values", k);
    else
        cft__qparams_now(q, &q->s[k], &y[0], &y[1]);
    pthread_mutex_unlock(&q->mu);
    return e;
}

/* one set of parameters for the whole batch */
static cft_array *par_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)bdim, (void)nin;
    cft_array *e = cft__bind(&cft_p_quant_params, p, 1, x, 2, y);
    ybdim[0] = ybdim[1] = -1;
    return e;
}

const cft_prim cft_p_quant_params = {
    .name = "quant_params",
    .nin = 1,
    .nout = 2,
    .flags = CFT_PRIM_EFFECT | CFT_PRIM_NONDIFF,
    .pnames = {"record", "site", "channels"},
    .shape = par_shape,
    .impl = par_impl,
    .vmap = par_vmap,
};

/* the parameters of both primitives: record, site, and axis or channels */
static bool params_for(cft_quant *q, int k, int64_t third, cft_params *p) {
    int id = handle_of(q);
    memset(p, 0, sizeof *p);
    cft__param_set1(p, 0, id);
    cft__param_set1(p, 1, k);
    cft__param_set1(p, 2, third);
    return id >= 0;
}

cft_array *cft__qobserve(cft_quant *q, int k, cft_array *x, int axis) {
    cft_params p;
    if (!params_for(q, k, axis, &p))
        return cft__oom();
    return cft__bind1(&cft_p_quant_observe, &p, 1, &x);
}

cft_array *cft__qparams_of(cft_quant *q, int k, int64_t nch, cft_array *x, cft_array **scale,
                           cft_array **zp) {
    cft_params p;
    if (!params_for(q, k, nch, &p))
        return cft__oom();
    cft_array *y[2];
    cft_array *e = cft__bind(&cft_p_quant_params, &p, 1, &x, 2, y);
    *scale = y[0], *zp = y[1];
    return e;
}
