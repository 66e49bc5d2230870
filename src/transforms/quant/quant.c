/* quant.c: quantization as a transform. A quant tracer wraps the value
 * below it (as autocast's does); processing a primitive that the
 * quantizer names numbers its float operands as sites (in bind order, per
 * call), passes each through its observer (an effect primitive,
 * observe.c, which records whenever the function runs), and in QAT and
 * converted functions replaces the operand by its fake-quantized value
 * before binding the primitive below. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cft/ops.h"
#include "cft/quant.h"
#include "core/error.h"
#include "core/mem.h"
#include "prims/qlinear.h"
#include "prims/rules.h"
#include "trace/fn.h"
#include "trace/trace.h"
#include "transforms/quant/quant_internal.h"
#include "transforms/transforms.h"

enum { OBSERVE, QAT, CONVERT, DYNAMIC };

/* a converted function's frozen parameters */
typedef struct {
    int n;
    cft_array **scale, **zp;
    int64_t *qmin, *qmax;
    int *axis;
} frozen;

typedef struct {
    cft_quant *q;
    int mode;
    const frozen *fz;
    int next;          /* the next site's number in this call */
    cft_array *member; /* the member index of this call (i32 0 for a plain record) */
} qstate;

static const cft_quant_op *op_of(const cft_quant *q, const cft_prim *p) {
    for (int i = 0; i < q->qz.nops; i++)
        if (q->qz.ops[i].prim && !strcmp(q->qz.ops[i].prim, p->name))
            return &q->qz.ops[i];
    return NULL;
}

/* operand x (value below) of site k: observed (OBSERVE, QAT), and in QAT
 * and converted functions replaced by its fake-quantized value */
static cft_array *handle(qstate *st, const cft_prim *p, const cft_quant_op *o, int arg,
                         cft_array *x, cft_array **y) {
    cft_quant *q = st->q;
    int k = st->next++;
    bool weight = arg == o->weight_arg;
    const cft_quant_spec *sp = weight ? &q->qz.weight : &q->qz.activation;
    int axis = -1;
    if (sp->per_channel && x->aval.ndim > 0) {
        axis = o->channel_axis < 0 ? o->channel_axis + x->aval.ndim : o->channel_axis;
        if (axis < 0 || axis >= x->aval.ndim)
            return cft__fail(CFT_E_ARG, "cft_quant: channel axis %d out of range for %s's %s",
                             o->channel_axis, p->name, cft__av(&x->aval));
    }
    *y = x;
    if (st->mode == CONVERT) {
        if (k >= st->fz->n || !st->fz->scale[k])
            return cft__fail(CFT_E_ARG,
                             "cft_quant_convert: site %d (%s operand %d) was never observed: "
                             "calibrate first",
                             k, p->name, arg);
        *y = cft_fake_quantize(x, st->fz->scale[k], st->fz->zp[k], st->fz->axis[k], st->fz->qmin[k],
                               st->fz->qmax[k]);
        return cft_failed(*y) ? *y : NULL;
    }
    int64_t nch = axis >= 0 ? x->aval.shape[axis] : 1;
    if (cft__dim_maybe_sym(nch))
        return cft__fail(CFT_E_SHAPE, "cft_quant: %s's channel dim of %s must be concrete", p->name,
                         cft__av(&x->aval));
    cft__qsite *s;
    pthread_mutex_lock(&q->mu);
    cft_array *e = cft__qsite_at(q, k, p->name, weight, axis, nch, &s);
    pthread_mutex_unlock(&q->mu);
    if (e)
        return e;
    *y = cft__qobserve(q, k, x, st->member, axis);
    if (cft_failed(*y) || st->mode != QAT)
        return cft_failed(*y) ? *y : NULL;
    cft_array *scale, *zp;
    e = cft__qparams_of(q, k, axis >= 0 ? nch : 0, *y, st->member, &scale, &zp);
    if (e)
        return e;
    *y = cft_fake_quantize(*y, scale, zp, axis, cft__qlo(sp), cft__qhi(sp));
    return cft_failed(*y) ? *y : NULL;
}

/* dynamic quantization: a plain f32 x [M, K] @ W [K, N] becomes the int8
 * product */
static bool plain_matmul(const cft_prim *p, const cft_params *par, int nin, cft_array *const *x) {
    return nin == 2 && cft__is_matmul(p, par, &x[0]->aval, &x[1]->aval) &&
           x[0]->aval.dtype == CFT_F32 && x[1]->aval.dtype == CFT_F32 &&
           !cft__dim_maybe_sym(x[1]->aval.shape[0]);
}

/* the frozen sites of an int8 product (the next two: x, then W) fit its
 * kernels (qstatic.c, qconv.c): x per tensor within u8, W symmetric within
 * s8, per tensor or per channel along waxis (nch channels). Then W's
 * scales as [nch] (a per-tensor scalar broadcast), and the sites are used
 * up; else NULL, and the operands are fake-quantized as any site's. */
static cft_array *int8_sites(qstate *st, const cft_quant_op *o, int waxis, int64_t nch) {
    const frozen *fz = st->fz;
    int k = st->next;
    if (o->weight_arg != 1 || k + 1 >= fz->n || !fz->scale[k] || !fz->scale[k + 1] ||
        !st->q->qz.weight.symmetric || fz->axis[k] != -1 || fz->qmin[k] < 0 || fz->qmax[k] > 255 ||
        (fz->axis[k + 1] != waxis && fz->axis[k + 1] != -1) || fz->qmin[k + 1] < -128 ||
        fz->qmax[k + 1] > 127)
        return NULL;
    st->next += 2;
    cft_array *ws = fz->scale[k + 1];
    return fz->axis[k + 1] == -1 ? cft_broadcast_to(ws, &nch, 1) : ws;
}

/* a converted plain matmul x [..., K] @ W [K, N] on integers, W per
 * channel along N, K small enough for int32 sums; else NULL */
static cft_array *static_int8(qstate *st, const cft_quant_op *o, cft_array *const *x) {
    const frozen *fz = st->fz;
    int k = st->next;
    const cft_aval *xa = &x[0]->aval, *wa = &x[1]->aval;
    if (xa->ndim < 1 || wa->ndim != 2 || wa->shape[0] > CFT_QMAX_K)
        return NULL;
    cft_array *ws = int8_sites(st, o, 1, wa->shape[1]);
    return ws ? cft__qstatic_linear(x[0], cft_mT(x[1]), ws, fz->qmin[k + 1], fz->qmax[k + 1],
                                    fz->scale[k], fz->zp[k], fz->qmin[k], fz->qmax[k])
              : NULL;
}

/* a converted convolution that qconv.c takes (cft__qconv_fits: one group
 * of each kind, no lhs dilation, f32) on integers, W per channel along O */
static cft_array *static_conv(qstate *st, const cft_quant_op *o, const cft_params *par,
                              cft_array *const *x) {
    const frozen *fz = st->fz;
    int k = st->next;
    cft_array *ws = int8_sites(st, o, 0, x[1]->aval.shape[0]);
    return ws ? cft__qstatic_conv(x[0], x[1], ws, fz->qmin[k + 1], fz->qmax[k + 1], fz->scale[k],
                                  fz->zp[k], fz->qmin[k], fz->qmax[k], par)
              : NULL;
}

static cft_array *process(cft_trace *t, const cft_prim *p, const cft_params *par, int nin,
                          cft_array *const *in, cft_array **out) {
    qstate *st = t->state;
    int nout = cft__nout(p, par, nin);
    cft_array *x[nin > 0 ? nin : 1], *y[nout > 0 ? nout : 1];
    for (int i = 0; i < nin; i++)
        x[i] = in[i]->u.cast.val;
    if (st->mode == DYNAMIC && plain_matmul(p, par, nin, x)) {
        y[0] = cft_qlinear_apply(x[0], cft_qlinear_pack(cft_mT(x[1])));
        out[0] = cft__wrap_box(t, y[0]);
        return cft_failed(out[0]) ? out[0] : NULL;
    }
    const cft_quant_op *o = st->mode == DYNAMIC ? NULL : op_of(st->q, p);
    if (st->mode == CONVERT && o && nin == 2) {
        y[0] = plain_matmul(p, par, nin, x)                        ? static_int8(st, o, x)
               : cft__qconv_fits(p, par, &x[0]->aval, &x[1]->aval) ? static_conv(st, o, par, x)
                                                                   : NULL;
        if (y[0]) {
            out[0] = cft__wrap_box(t, y[0]);
            return cft_failed(out[0]) ? out[0] : NULL;
        }
    }
    for (int i = 0; o && i < nin; i++) {
        if (!cft_dtype_is_float(x[i]->aval.dtype))
            continue;
        cft_array *e = handle(st, p, o, i, x[i], &x[i]);
        if (e)
            return e;
    }
    cft_array *e = cft__bind(p, par, nin, x, nout, y);
    if (e)
        return e;
    for (int j = 0; j < nout; j++) {
        out[j] = cft__wrap_box(t, y[j]);
        if (cft_failed(out[j]))
            return out[j];
    }
    return NULL;
}

static const cft_trace_vt quant_vt = {"quant", process, cft__wrap_lift, NULL};

typedef struct {
    cft_quant *q;
    int mode;
    frozen *fz;
} qenv;

static cft_status quant_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    qenv *a = env;
    cft_quant *q = a->q;
    if (q->err)
        return cft__fail_outs(q->err, nout, out);
    qstate st = {q, a->mode, a->fz, 0, q->member0};
    if (a->mode != CONVERT && q->members > 1) { /* an ensemble's: the member index first */
        const cft_aval *m = &in[0]->aval;
        if (m->ndim != 0 || cft_dtype_is_inexact(m->dtype) || m->dtype == CFT_BOOL)
            return cft__fail_outs(cft__fail(CFT_E_ARG,
                                            "cft_quant: an ensemble record's functions take the "
                                            "member index (an integer scalar) first, not %s",
                                            cft__av(m)),
                                  nout, out);
        st.member = in[0], in++, nin--;
    }
    return cft__wrap_apply(&quant_vt, &st, q->f, "cft_quant", nin, in, nout, out);
}

static cft_array *check_spec(const char *what, const cft_quant_spec *s) {
    if (s->bits < 2 || s->bits > 16)
        return cft__fail(CFT_E_ARG, "cft_quant_prepare: %s bits %d outside 2..16", what, s->bits);
    if ((unsigned)s->observer > CFT_OBS_PERCENTILE)
        return cft__fail(CFT_E_ARG, "cft_quant_prepare: %s observer %d unknown", what,
                         (int)s->observer);
    if (s->observer == CFT_OBS_MOVING_AVERAGE && !(s->averaging > 0 && s->averaging <= 1))
        return cft__fail(CFT_E_ARG, "cft_quant_prepare: %s averaging %g outside (0, 1]", what,
                         s->averaging);
    if (s->observer == CFT_OBS_PERCENTILE && !(s->percentile > 0 && s->percentile <= 100))
        return cft__fail(CFT_E_ARG, "cft_quant_prepare: %s percentile %g outside (0, 100]", what,
                         s->percentile);
    if (s->observer == CFT_OBS_PERCENTILE && s->per_channel)
        return cft__fail(CFT_E_ARG, "cft_quant_prepare: %s: the percentile observer is per tensor",
                         what);
    return NULL;
}

static cft_quant *prepare(cft_fn *f, const cft_quantizer *qz, int members) {
    cft_quant *q = CFT_NEW(cft_quant);
    if (!q)
        return NULL;
    pthread_mutex_init(&q->mu, NULL);
    q->f = f;
    q->id = -1;
    q->members = members;
    q->member0 = cft_scalar(0, CFT_I32);
    if (cft_failed(q->member0))
        q->err = q->member0;
    else if (members < 1 || members > CFT_QUANT_MAX_MEMBERS)
        q->err = cft__fail(CFT_E_ARG, "cft_quant_prepare_ensemble: %d members (want 1 to %d)",
                           members, CFT_QUANT_MAX_MEMBERS);
    else if (!f)
        q->err = cft__fail(CFT_E_ARG, "cft_quant_prepare: NULL function");
    else if (cft_fn_failed(f))
        q->err = f->err;
    else if (!qz)
        q->err = cft__fail(CFT_E_ARG, "cft_quant_prepare: NULL quantizer");
    else if (qz->nops < 1 || qz->nops > 8)
        q->err = cft__fail(CFT_E_ARG, "cft_quant_prepare: %d ops (want 1 to 8)", qz->nops);
    else if (!(q->err = check_spec("activation", &qz->activation)))
        q->err = check_spec("weight", &qz->weight);
    if (qz)
        q->qz = *qz;
    for (int i = 0; !q->err && i < qz->nops; i++)
        if (!qz->ops[i].prim)
            q->err = cft__fail(CFT_E_ARG, "cft_quant_prepare: op %d has no primitive name", i);
    return q;
}

cft_quant *cft_quant_prepare(cft_fn *f, const cft_quantizer *qz) {
    CFT_API("cft_quant_prepare");
    return prepare(f, qz, 1);
}

cft_quant *cft_quant_prepare_ensemble(cft_fn *f, const cft_quantizer *qz, int members) {
    CFT_API("cft_quant_prepare_ensemble");
    return prepare(f, qz, members);
}

static cft_fn *quant_fn(cft_quant *q, int mode, frozen *fz, const char *name) {
    int nin = q->f ? q->f->nin : 0, nout = q->f ? q->f->nout : 1;
    if (mode != CONVERT && q->members > 1)
        nin++; /* the member index */
    if (q->err)
        return cft__fn_error(q->err, nin, nout > 0 ? nout : 1);
    qenv *a = CFT_NEW(qenv);
    if (!a)
        return cft__fn_error(cft__oom(), nin, nout);
    a->q = q, a->mode = mode, a->fz = fz;
    cft_fn *g = cft_fn_new(quant_cb, a, nin, nout);
    return cft_fn_named(g, name);
}

static cft_status dynamic_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    qstate st = {NULL, DYNAMIC, NULL, 0, NULL};
    return cft__wrap_apply(&quant_vt, &st, env, "cft_quant_dynamic", nin, in, nout, out);
}

cft_fn *cft_quant_dynamic(cft_fn *f) {
    CFT_API("cft_quant_dynamic");
    cft_fn *bad = cft__fn_check("cft_quant_dynamic", f);
    if (bad)
        return bad;
    return cft_fn_named(cft_fn_new(dynamic_cb, f, f->nin, f->nout), "quant_dynamic");
}

cft_fn *cft_quant_observer_fn(cft_quant *q) {
    CFT_API("cft_quant_observer_fn");
    if (!q)
        return cft__fn_fail(0, 1, CFT_E_ARG, "cft_quant_observer_fn: NULL record");
    return quant_fn(q, OBSERVE, NULL, "quant_observe");
}

cft_fn *cft_quant_qat_fn(cft_quant *q) {
    CFT_API("cft_quant_qat_fn");
    if (!q)
        return cft__fn_fail(0, 1, CFT_E_ARG, "cft_quant_qat_fn: NULL record");
    return quant_fn(q, QAT, NULL, "quant_qat");
}

/* member m's converted function (whole: cft_quant_convert, for plain records) */
static cft_fn *convert(const char *op, cft_quant *q, int m, bool whole) {
    if (!q)
        return cft__fn_fail(0, 1, CFT_E_ARG, "%s: NULL record", op);
    if (q->err)
        return quant_fn(q, CONVERT, NULL, "quant_int8");
    if (whole && q->members > 1)
        return cft__fn_fail(q->f->nin, q->f->nout, CFT_E_ARG,
                            "%s: the record is an ensemble of %d members: convert one with "
                            "cft_quant_convert_member",
                            op, q->members);
    if (m < 0 || m >= q->members)
        return cft__fn_fail(q->f->nin, q->f->nout, CFT_E_ARG, "%s: member %d of a record of %d", op,
                            m, q->members);
    frozen *fz = CFT_NEW(frozen);
    if (!fz)
        return cft__fn_error(cft__oom(), q->f->nin, q->f->nout);
    pthread_mutex_lock(&q->mu);
    int n = q->n;
    fz->n = n;
    fz->scale = CFT_NEWN(cft_array *, n + 1), fz->zp = CFT_NEWN(cft_array *, n + 1);
    fz->qmin = CFT_NEWN(int64_t, n + 1), fz->qmax = CFT_NEWN(int64_t, n + 1);
    fz->axis = CFT_NEWN(int, n + 1);
    /* the values under the lock (another thread may add sites, moving
     * q->s), the arrays after it: site k's scales at v + off[k], its zero
     * points nch[k] further; nch 0 for a site member m has not seen */
    int64_t tot = 0, *off = CFT_NEWN(int64_t, 2 * (size_t)n + 1), *nch = off ? off + n : NULL;
    for (int k = 0; k < n; k++)
        tot += q->s[k].nch;
    double *v = cft__new_data(sizeof(double) * 2 * (size_t)(tot + 1));
    bool ok = fz->scale && fz->zp && fz->qmin && fz->qmax && fz->axis && v && off;
    int64_t at = 0;
    for (int k = 0; ok && k < n; k++) {
        const cft__qsite *s = &q->s[k];
        off[k] = at, nch[k] = s->seen[m] ? s->nch : 0, at += 2 * nch[k];
        if (!nch[k])
            continue;
        cft__qparams_vals(q, s, m, v + off[k], v + off[k] + s->nch);
        fz->qmin[k] = cft__qlo(cft__qspec(q, s)), fz->qmax[k] = cft__qhi(cft__qspec(q, s));
        fz->axis[k] = s->axis;
    }
    pthread_mutex_unlock(&q->mu);
    if (!ok)
        return cft__fn_error(cft__oom(), q->f->nin, q->f->nout);
    for (int k = 0; k < n; k++)
        if (nch[k])
            cft__qparams_arrays(fz->axis[k], nch[k], v + off[k], v + off[k] + nch[k], &fz->scale[k],
                                &fz->zp[k]);
    return quant_fn(q, CONVERT, fz, "quant_int8");
}

cft_fn *cft_quant_convert(cft_quant *q) {
    CFT_API("cft_quant_convert");
    return convert("cft_quant_convert", q, 0, true);
}

cft_fn *cft_quant_convert_member(cft_quant *q, int member) {
    CFT_API("cft_quant_convert_member");
    return convert("cft_quant_convert_member", q, member, false);
}

int cft_quant_num_sites(const cft_quant *q) {
    if (!q)
        return 0;
    pthread_mutex_lock((pthread_mutex_t *)&q->mu);
    int n = q->n;
    pthread_mutex_unlock((pthread_mutex_t *)&q->mu);
    return n;
}

cft_status cft_quant_set_observing(cft_quant *q, bool on) {
    CFT_API("cft_quant_set_observing");
    if (!q)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_quant_set_observing: NULL record"));
    pthread_mutex_lock(&q->mu);
    q->paused = !on;
    pthread_mutex_unlock(&q->mu);
    return CFT_OK;
}

static cft_status site(const char *op, const cft_quant *q, int i, int m, cft_array **scale,
                       cft_array **zero_point, const char **prim, bool *is_weight) {
    if (!q || !scale || !zero_point)
        return cft__set_last(cft__fail(CFT_E_ARG, "%s: NULL argument", op));
    pthread_mutex_lock((pthread_mutex_t *)&q->mu);
    cft_array *e = NULL;
    int axis = -1;
    int64_t nch = 1;
    double *v = NULL;
    if (i < 0 || i >= q->n)
        e = cft__fail(CFT_E_ARG, "%s: site %d of %d", op, i, q->n);
    else if (m < 0 || m >= q->members)
        e = cft__fail(CFT_E_ARG, "%s: member %d of %d", op, m, q->members);
    else if (!q->s[i].seen[m])
        e = cft__fail(CFT_E_ARG, "%s: site %d of member %d was never observed", op, i, m);
    else if (!(v = malloc(sizeof(double) * 2 * (size_t)q->s[i].nch)))
        e = cft__oom();
    else {
        axis = q->s[i].axis, nch = q->s[i].nch;
        cft__qparams_vals(q, &q->s[i], m, v, v + nch);
        if (prim)
            *prim = q->s[i].prim;
        if (is_weight)
            *is_weight = q->s[i].weight;
    }
    pthread_mutex_unlock((pthread_mutex_t *)&q->mu);
    if (e) {
        *scale = *zero_point = e;
        return cft__set_last(e);
    }
    cft__qparams_arrays(axis, nch, v, v + nch, scale, zero_point);
    free(v);
    return cft_failed(*scale) ? cft__set_last(*scale) : CFT_OK;
}

cft_status cft_quant_site(const cft_quant *q, int i, cft_array **scale, cft_array **zero_point,
                          const char **prim, bool *is_weight) {
    CFT_API("cft_quant_site");
    return site("cft_quant_site", q, i, 0, scale, zero_point, prim, is_weight);
}

cft_status cft_quant_site_member(const cft_quant *q, int i, int member, cft_array **scale,
                                 cft_array **zero_point) {
    CFT_API("cft_quant_site_member");
    return site("cft_quant_site_member", q, i, member, scale, zero_point, NULL, NULL);
}

cft_status cft_quant_qparams(cft_array *min, cft_array *max, const cft_quant_spec *spec,
                             cft_array **scale, cft_array **zero_point, int64_t *qmin,
                             int64_t *qmax) {
    CFT_API("cft_quant_qparams");
    const char *op = "cft_quant_qparams";
    cft_array *e = NULL;
    if (!spec || !scale || !zero_point || !min || !max)
        e = cft__fail(CFT_E_ARG, "%s: NULL argument", op);
    else if (cft_failed(min) || cft_failed(max))
        e = cft_failed(min) ? min : max;
    else if (!(e = check_spec("spec", spec)) &&
             (cft_array_ndim(min) > 1 || cft_array_size(min) != cft_array_size(max) ||
              cft_array_ndim(min) != cft_array_ndim(max)))
        e = cft__fail(CFT_E_SHAPE, "%s: min %s and max %s must be scalars or equal 1-d", op,
                      cft__av(&min->aval), cft__av(&max->aval));
    int64_t n = e ? 0 : cft_array_size(min);
    double a[n > 0 ? n : 1], b[n > 0 ? n : 1], s[n > 0 ? n : 1], z[n > 0 ? n : 1];
    if (!e && (cft_copy_to(min, CFT_F64, a) != CFT_OK || cft_copy_to(max, CFT_F64, b) != CFT_OK))
        e = cft__fail(CFT_E_ARG, "%s: min and max must be concrete", op);
    if (e) {
        if (scale)
            *scale = e;
        if (zero_point)
            *zero_point = e;
        return cft__set_last(e);
    }
    for (int64_t i = 0; i < n; i++)
        cft__qparams_d(a[i], b[i], spec, &s[i], &z[i]);
    int nd = cft_array_ndim(min);
    *scale = cft_astype(cft_from_data(s, CFT_F64, &n, nd), CFT_F32);
    *zero_point = cft_astype(cft_from_data(z, CFT_F64, &n, nd), CFT_F32);
    if (qmin)
        *qmin = cft__qlo(spec);
    if (qmax)
        *qmax = cft__qhi(spec);
    return CFT_OK;
}
