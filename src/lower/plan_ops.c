/* plan_ops.c: what running a lowered plan's steps needs, on the host
 * (jit_exec.c) or on a device (jit_device.c): an equation on the values of an
 * environment, a group's operand strides over its iteration shape, a
 * reduction's output pre-filled with its identity, and the f32 array a C
 * kernel accumulates a half reduction in. */
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "core/error.h"
#include "core/mem.h"
#include "lower/lower.h"
#include "trace/trace.h"

cft_array *cft__run_eqn(const cft_eqn *q, cft_array **env) {
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
void cft__group_strides(const cft_ir *ir, const cft_group *g, cft_array *const *ops,
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

void cft__fill_init(cft_array *a, const char *init) {
    /* the records' identities are static strings: the last few parsed are
     * kept per thread (strtod on every kernel call showed in profiles) */
    enum { NKEEP = 4 };
    static _Thread_local const char *kept[NKEEP];
    static _Thread_local double kept_v[NKEEP];
    static _Thread_local int next;
    double v = 0;
    int i = 0;
    while (i < NKEEP && kept[i] != init)
        i++;
    if (i < NKEEP) {
        v = kept_v[i];
    } else {
        v = strtod(init, NULL);
        kept[next] = init, kept_v[next] = v, next = (next + 1) % NKEEP;
    }
    int64_t n = cft__numel(a->aval.shape, a->aval.ndim);
    if (cft_dtype_is_half(a->aval.dtype)) { /* an identity (0, 1, +-inf) is exact in 16 bits */
        uint16_t h;
        cft__cast(&v, CFT_F64, &h, a->aval.dtype, 1);
        uint16_t *p = cft__ptr(a);
        for (int64_t i = 0; i < n; i++)
            p[i] = h;
    } else if (a->aval.dtype == CFT_F32) {
        float *p = cft__ptr(a);
        for (int64_t i = 0; i < n; i++)
            p[i] = (float)v;
    } else {
        double *p = cft__ptr(a);
        for (int64_t i = 0; i < n; i++)
            p[i] = v;
    }
}

cft_array *cft__half_acc(const cft_array *out, const char *init) {
    int64_t n = cft__numel(out->aval.shape, out->aval.ndim);
    float *buf =
        cft__scratch(CFT_SCRATCH_HACC, sizeof(float) * (size_t)(n > 0 ? n : 1), (size_t)1 << 28);
    if (!buf)
        return cft__oom();
    cft_array *acc = CFT_NEW(cft_array);
    acc->kind = CFT_K_CONCRETE;
    acc->aval = out->aval;
    acc->aval.dtype = CFT_F32;
    cft__row_major(acc->aval.shape, acc->aval.ndim, acc->strides);
    acc->data = (char *)buf;
    if (init)
        cft__fill_init(acc, init);
    return acc;
}

void cft__half_acc_store(const cft_array *acc, cft_array *out) {
    cft__cast(cft__ptr(acc), CFT_F32, cft__ptr(out), out->aval.dtype,
              cft__numel(out->aval.shape, out->aval.ndim));
}

bool cft__eqn_has_half(const cft_eqn *q) {
    bool h = cft_dtype_is_half(q->out[0]->aval.dtype);
    for (int i = 0; i < q->nin; i++)
        h |= cft_dtype_is_half(q->in[i]->aval.dtype);
    return h;
}

bool cft__into_ok(const cft_eqn *q) {
    return (q->prim->flags & CFT_PRIM_INTO_HALF) || !cft__eqn_has_half(q);
}
