/* reduce.c: reductions over axes (reduce_sum, reduce_max, reduce_min,
 * reduce_prod) and argmax/argmin along one axis, each one record with all
 * its rules, then the public ops (sum, max, min, prod, mean, var, argmax,
 * argmin). Kernels lay the reduced axes last and contiguous, then reduce
 * rows; float sums accumulate in double. */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"
#include "trace/ir.h"

/* ---- shared ---- */

static cft_array *axes_shape(const char *name, const cft_aval *in, const cft_params *p,
                             cft_aval *out) {
    bool drop[CFT_MAX_NDIM] = {0};
    if (cft_dtype_is_complex(in[0].dtype) && strcmp(name, "reduce_sum") != 0 &&
        strcmp(name, "reduce_prod") != 0) /* complex numbers have no order */
        return cft__fail(CFT_E_DTYPE, "%s: complex operands are not ordered (%s)", name,
                         cft__av(&in[0]));
    for (int i = 0; i < p->n[0]; i++) {
        int64_t a = p->v[0][i];
        if (a < 0 || a >= in[0].ndim || drop[a])
            return cft__fail(CFT_E_ARG, "%s: bad axis %lld for %s", name, (long long)a,
                             cft__av(&in[0]));
        drop[a] = true;
    }
    *out = cft__aval(in[0].dtype, NULL, 0);
    for (int i = 0; i < in[0].ndim; i++)
        if (!drop[i])
            out->shape[out->ndim++] = in[0].shape[i];
    return NULL;
}

/* x laid out as [kept..., reduced...] and contiguous: M rows of K */
static cft_array *rows(cft_array *x, const cft_params *p, int64_t *M, int64_t *K) {
    bool red[CFT_MAX_NDIM] = {0};
    int perm[CFT_MAX_NDIM], k = 0, nd = x->aval.ndim;
    for (int i = 0; i < p->n[0]; i++)
        red[p->v[0][i]] = true;
    *M = *K = 1;
    for (int i = 0; i < nd; i++)
        if (!red[i])
            perm[k++] = i, *M *= x->aval.shape[i];
    for (int i = 0; i < nd; i++)
        if (red[i])
            perm[k++] = i, *K *= x->aval.shape[i];
    int64_t shape[CFT_MAX_NDIM], st[CFT_MAX_NDIM];
    for (int i = 0; i < nd; i++)
        shape[i] = x->aval.shape[perm[i]], st[i] = x->strides[perm[i]];
    return cft__contig(cft__view(x, shape, nd, st, x->offset));
}

enum { R_SUM, R_MAX, R_MIN, R_PROD };

#define RED_LOOP(T, ACC, INIT, STEP)                                                               \
    {                                                                                              \
        const T *xs = cft__ptr(r);                                                                 \
        T *ys = (T *)y->data;                                                                      \
        for (int64_t m = 0; m < M; m++) {                                                          \
            ACC acc = INIT;                                                                        \
            const T *row = xs + m * K;                                                             \
            for (int64_t k = 0; k < K; k++) {                                                      \
                T v = row[k];                                                                      \
                STEP;                                                                              \
            }                                                                                      \
            ys[m] = (T)acc;                                                                        \
        }                                                                                          \
    }                                                                                              \
    break

#define FMAX_STEP                                                                                  \
    if (v > acc || v != v)                                                                         \
    acc = v
#define FMIN_STEP                                                                                  \
    if (v < acc || v != v)                                                                         \
    acc = v
#define IMAX_STEP                                                                                  \
    if (v > acc)                                                                                   \
    acc = v
#define IMIN_STEP                                                                                  \
    if (v < acc)                                                                                   \
    acc = v

static cft_array *reduce_run(int op, cft_array *const *in, const cft_params *p, const char *name,
                             cft_array **out) {
    cft_aval o;
    cft_array *e = axes_shape(name, &in[0]->aval, p, &o);
    if (e)
        return e;
    int64_t M, K;
    cft_array *r = rows(in[0], p, &M, &K);
    cft_array *y = cft__alloc(o.dtype, o.shape, o.ndim);
    if (cft_failed(r))
        return r;
    if (cft_failed(y))
        return y;
    switch (op * 16 + (int)o.dtype) {
    case R_SUM * 16 + CFT_F32:
        RED_LOOP(float, double, 0, acc += v);
    case R_SUM * 16 + CFT_F64:
        RED_LOOP(double, double, 0, acc += v);
    case R_SUM * 16 + CFT_I32:
        RED_LOOP(int32_t, int64_t, 0, acc += v);
    case R_SUM * 16 + CFT_I64:
        RED_LOOP(int64_t, int64_t, 0, acc += v);
    case R_SUM * 16 + CFT_BOOL:
        RED_LOOP(uint8_t, int, 0, acc |= v);
    case R_SUM * 16 + CFT_C64:
        RED_LOOP(float complex, double complex, 0, acc += v);
    case R_SUM * 16 + CFT_C128:
        RED_LOOP(double complex, double complex, 0, acc += v);
    case R_PROD * 16 + CFT_F32:
        RED_LOOP(float, double, 1, acc *= v);
    case R_PROD * 16 + CFT_F64:
        RED_LOOP(double, double, 1, acc *= v);
    case R_PROD * 16 + CFT_I32:
        RED_LOOP(int32_t, int64_t, 1, acc *= v);
    case R_PROD * 16 + CFT_I64:
        RED_LOOP(int64_t, int64_t, 1, acc *= v);
    case R_PROD * 16 + CFT_BOOL:
        RED_LOOP(uint8_t, int, 1, acc &= v);
    case R_PROD * 16 + CFT_C64:
        RED_LOOP(float complex, double complex, 1, acc *= v);
    case R_PROD * 16 + CFT_C128:
        RED_LOOP(double complex, double complex, 1, acc *= v);
    case R_MAX * 16 + CFT_F32:
        RED_LOOP(float, float, -INFINITY, FMAX_STEP);
    case R_MAX * 16 + CFT_F64:
        RED_LOOP(double, double, -INFINITY, FMAX_STEP);
    case R_MAX * 16 + CFT_I32:
        RED_LOOP(int32_t, int32_t, INT32_MIN, IMAX_STEP);
    case R_MAX * 16 + CFT_I64:
        RED_LOOP(int64_t, int64_t, INT64_MIN, IMAX_STEP);
    case R_MAX * 16 + CFT_BOOL:
        RED_LOOP(uint8_t, uint8_t, 0, IMAX_STEP);
    case R_MIN * 16 + CFT_F32:
        RED_LOOP(float, float, INFINITY, FMIN_STEP);
    case R_MIN * 16 + CFT_F64:
        RED_LOOP(double, double, INFINITY, FMIN_STEP);
    case R_MIN * 16 + CFT_I32:
        RED_LOOP(int32_t, int32_t, INT32_MAX, IMIN_STEP);
    case R_MIN * 16 + CFT_I64:
        RED_LOOP(int64_t, int64_t, INT64_MAX, IMIN_STEP);
    case R_MIN * 16 + CFT_BOOL:
        RED_LOOP(uint8_t, uint8_t, 1, IMIN_STEP);
    default:
        break;
    }
    cft__keep(r);
    out[0] = y;
    return NULL;
}

/* dims of x kept by the reduction, as broadcast_in_dim dims */
static int kept_dims(const cft_aval *in, const cft_params *p, int *dims) {
    bool red[CFT_MAX_NDIM] = {0};
    int k = 0;
    for (int i = 0; i < p->n[0]; i++)
        red[p->v[0][i]] = true;
    for (int i = 0; i < in->ndim; i++)
        if (!red[i])
            dims[k++] = i;
    return k;
}
static cft_array *bcast_back(cft_array *y, const cft_aval *in, const cft_params *p) {
    int dims[CFT_MAX_NDIM];
    kept_dims(in, p, dims);
    return cft_broadcast_in_dim(y, in->shape, in->ndim, dims);
}

/* axes move past the batch axis, which stays where it is */
static cft_array *reduce_vmap(const cft_prim *prim, cft_array *const *x, const int *bdim,
                              const cft_params *p, cft_array **y, int *ybdim) {
    cft_params q = *p;
    int b = bdim[0], before = 0;
    for (int i = 0; i < q.n[0]; i++) {
        if (q.v[0][i] >= b)
            q.v[0][i]++;
        else
            before++;
    }
    y[0] = cft__bind1(prim, &q, 1, x);
    ybdim[0] = b - before;
    return NULL;
}

#define REDUCE_COMMON(NAME, OP)                                                                    \
    static cft_array *NAME##_shape(const cft_aval *in, int nin, const cft_params *p,               \
                                   cft_aval *out) {                                                \
        (void)nin;                                                                                 \
        return axes_shape(#NAME, in, p, out);                                                      \
    }                                                                                              \
    static cft_array *NAME##_impl(cft_array *const *in, int nin, const cft_params *p,              \
                                  cft_array **out) {                                               \
        (void)nin;                                                                                 \
        return reduce_run(OP, in, p, #NAME, out);                                                  \
    }                                                                                              \
    static cft_array *NAME##_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,     \
                                  const cft_params *p, cft_array **y, int *ybdim) {                \
        (void)size, (void)nin;                                                                     \
        return reduce_vmap(&cft_p_##NAME, x, bdim, p, y, ybdim);                                   \
    }

REDUCE_COMMON(reduce_sum, R_SUM)
REDUCE_COMMON(reduce_max, R_MAX)
REDUCE_COMMON(reduce_min, R_MIN)
REDUCE_COMMON(reduce_prod, R_PROD)

static cft_array *sum_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    ty[0] = t[0] ? cft__bind1(&cft_p_reduce_sum, p, 1, t) : NULL;
    return NULL;
}
/* sum^T: broadcast the cotangent back over the reduced axes */
static cft_array *sum_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)nin;
    ct_in[0] = bcast_back(ct[0], &in[0], p);
    return NULL;
}
/* max/min: the tangent at the extreme positions, averaged over ties */
static cft_array *extreme_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t,
                              int nin, const cft_params *p, cft_array **ty) {
    (void)nin;
    if (!t[0]) {
        ty[0] = NULL;
        return NULL;
    }
    cft_array *loc = cft_astype(cft_eq(x[0], bcast_back(y[0], &x[0]->aval, p)), x[0]->aval.dtype);
    cft_array *cnt = cft__bind1(&cft_p_reduce_sum, p, 1, &loc);
    cft_array *tl = cft_mul(t[0], loc);
    ty[0] = cft_div(cft__bind1(&cft_p_reduce_sum, p, 1, &tl), cnt);
    return NULL;
}
/* prod: the jvp of a balanced tree of multiplications over the reduced
 * elements (as JAX does): reduced axes first, flattened to [K, M], then
 * halve K by multiplying even and odd rows, carrying the product rule. A
 * polynomial in x, so it stays exact at zeros to every order (a rule with
 * "x == 0" masks is right only to first order: its hessian drops terms). */
static cft_array *prod_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    ty[0] = NULL;
    if (!t[0])
        return NULL;
    const cft_aval *a = &x[0]->aval;
    bool red[CFT_MAX_NDIM] = {0};
    int perm[CFT_MAX_NDIM] = {0}, k = 0, ond = 0;
    int64_t K = 1, M = 1, oshape[CFT_MAX_NDIM];
    for (int i = 0; i < p->n[0]; i++)
        red[p->v[0][i]] = true;
    for (int i = 0; i < a->ndim; i++)
        if (red[i])
            perm[k++] = i, K = cft_dim_mul(K, a->shape[i]);
    for (int i = 0; i < a->ndim; i++)
        if (!red[i])
            perm[k++] = i, M = cft_dim_mul(M, a->shape[i]), oshape[ond++] = a->shape[i];
    if (cft_dim_is_symbolic(K)) /* the tree below is unrolled over K */
        return cft__fail(CFT_E_SHAPE,
                         "reduce_prod: the derivative of a product over a symbolic dim (%s of "
                         "%s) is not supported",
                         cft__dim_s(K), cft__av(a));
    if (K == 0)
        return NULL; /* the empty product is 1: zero tangent */
    int64_t km[2] = {K, M};
    cft_array *v = cft__reshape(cft_transpose(x[0], perm), km, 2);
    cft_array *dv = cft__reshape(cft_transpose(t[0], perm), km, 2);
    while (K > 1) {
        if (K % 2) { /* one more row: 1 in v, 0 in dv */
            int64_t lo[2] = {0, 0}, hi[2] = {1, 0};
            v = cft_pad(v, cft_scalar(1, a->dtype), lo, hi, NULL);
            dv = cft_pad(dv, cft_scalar(0, a->dtype), lo, hi, NULL);
            K++;
        }
        int64_t s0[2] = {0, 0}, s1[2] = {1, 0}, l[2] = {K, M}, st[2] = {2, 1};
        cft_array *v0 = cft_slice(v, s0, l, st), *v1 = cft_slice(v, s1, l, st);
        cft_array *d0 = cft_slice(dv, s0, l, st), *d1 = cft_slice(dv, s1, l, st);
        dv = cft_add(cft_mul(d0, v1), cft_mul(v0, d1));
        if (K > 2)
            v = cft_mul(v0, v1);
        K /= 2;
    }
    ty[0] = cft__reshape(dv, oshape, ond);
    return NULL;
}

/* DP-SGD without per-sample gradients: a reduce_sum of square(X) over
 * every axis but the batch axis 0 (per-example squared norms), or of X * w
 * over the batch axis, w a per-example weight [B] broadcast over X (the
 * clipped sum), is asked of X's producer (batch_sqnorm / batch_wsum), which
 * answers from the factors when X holds one outer product per example. */
extern const cft_prim cft_p_square;

static bool axes_are(const cft_params *p, int from, int to) {
    if (p->n[0] != to - from)
        return false;
    bool seen[CFT_MAX_NDIM] = {false};
    for (int i = 0; i < p->n[0]; i++) {
        int64_t a = p->v[0][i];
        if (a < from || a >= to || seen[a])
            return false;
        seen[a] = true;
    }
    return true;
}

/* w [B] broadcast along axis 0 of an [B, ...] array: its [B] vector's var */
static int batch_weight(const cft_eqn *bc, int64_t B) {
    if (!bc || bc->prim != &cft_p_broadcast_in_dim)
        return -1;
    const cft_aval *v = &bc->in[0]->aval;
    if (v->ndim < 1 || v->shape[0] != B || bc->params.n[1] != v->ndim || bc->params.v[1][0] != 0)
        return -1;
    for (int i = 1; i < v->ndim; i++)
        if (v->shape[i] != 1)
            return -1;
    return bc->in[0]->id;
}

static bool sum_rewrite(const cft_eqn *q, const cft_rewrite_ctx *c, cft_array **out) {
    const cft_aval *in = &q->in[0]->aval;
    const cft_eqn *pr = c->producer(c, q->in[0]->id);
    int nd = in->ndim;
    if (!pr || nd < 2 || (in->dtype != CFT_F32 && in->dtype != CFT_F64))
        return false;
    if (pr->prim == &cft_p_square && axes_are(&q->params, 1, nd))
        return cft__batch_sqnorm_of(c, pr->in[0]->id, 0, in->shape[0], out);
    if (pr->prim != &cft_p_mul || !axes_are(&q->params, 0, 1))
        return false;
    for (int s = 0; s < 2; s++) {
        int wv = batch_weight(c->producer(c, pr->in[s]->id), in->shape[0]);
        if (wv < 0)
            continue;
        cft_array *w = NULL;
        if (c->value)
            w = cft_reshape(c->value(c, wv), &in->shape[0], 1);
        if (cft__batch_wsum_of(c, pr->in[1 - s]->id, 0, in->shape[0], w, out)) {
            if (c->value) /* [1, ...] -> [...] */
                *out = cft_reshape(*out, q->out[0]->aval.shape, q->out[0]->aval.ndim);
            return true;
        }
    }
    return false;
}

const cft_prim cft_p_reduce_sum = {
    .name = "reduce_sum",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_REDUCTION,
    .pnames = {"axes"},
    .c_expr = "acc + x",
    .c_init = "0",
    .c_simd = "+",
    .shape = reduce_sum_shape,
    .impl = reduce_sum_impl,
    .jvp = sum_jvp,
    .transpose = sum_transpose,
    .vmap = reduce_sum_vmap,
    .rewrite = sum_rewrite,
};
const cft_prim cft_p_reduce_max = {
    .name = "reduce_max",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_REDUCTION,
    .pnames = {"axes"},
    .c_expr = "(x > acc || x != x) ? x : acc",
    .c_iexpr = "x > acc ? x : acc",
    .c_init = "-INFINITY",
    .c_simd = "max",
    .shape = reduce_max_shape,
    .impl = reduce_max_impl,
    .jvp = extreme_jvp,
    .vmap = reduce_max_vmap,
};
const cft_prim cft_p_reduce_min = {
    .name = "reduce_min",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_REDUCTION,
    .pnames = {"axes"},
    .c_expr = "(x < acc || x != x) ? x : acc",
    .c_iexpr = "x < acc ? x : acc",
    .c_init = "INFINITY",
    .c_simd = "min",
    .shape = reduce_min_shape,
    .impl = reduce_min_impl,
    .jvp = extreme_jvp,
    .vmap = reduce_min_vmap,
};
const cft_prim cft_p_reduce_prod = {
    .name = "reduce_prod",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_REDUCTION,
    .pnames = {"axes"},
    .c_expr = "acc * x",
    .c_init = "1",
    .c_simd = "*",
    .shape = reduce_prod_shape,
    .impl = reduce_prod_impl,
    .jvp = prod_jvp,
    .vmap = reduce_prod_vmap,
};

/* ---- argmax / argmin[#axis] -> i32 ---- */

static cft_array *arg_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    cft_array *e = axes_shape("argmax", in, p, out);
    if (e)
        return e;
    if (in[0].shape[p->v[0][0]] == 0)
        return cft__fail(CFT_E_SHAPE, "argmax: empty axis %lld of %s", (long long)p->v[0][0],
                         cft__av(&in[0]));
    out->dtype = CFT_I32;
    return NULL;
}
static cft_array *arg_run(cft_array *const *in, const cft_params *p, bool is_max, cft_array **out) {
    cft_aval o;
    cft_array *e = arg_shape(&in[0]->aval, 1, p, &o);
    if (e)
        return e;
    int64_t M, K;
    cft_array *r = rows(in[0], p, &M, &K), *y = cft__alloc(CFT_I32, o.shape, o.ndim);
    if (cft_failed(r))
        return r;
    if (cft_failed(y))
        return y;
    const char *base = cft__ptr(r);
    cft_dtype dt = r->aval.dtype;
    for (int64_t m = 0; m < M; m++) {
        int64_t best = 0;
        double bv = cft__get(base, dt, m * K);
        for (int64_t k = 1; k < K && !isnan(bv); k++) {
            double v = cft__get(base, dt, m * K + k);
            if (isnan(v) || (is_max ? v > bv : v < bv))
                best = k, bv = v;
        }
        ((int32_t *)y->data)[m] = (int32_t)best;
    }
    cft__keep(r);
    out[0] = y;
    return NULL;
}
static cft_array *argmax_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    return arg_run(in, p, true, out);
}
static cft_array *argmin_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    return arg_run(in, p, false, out);
}
static cft_array *argmax_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    return reduce_vmap(&cft_p_argmax, x, bdim, p, y, ybdim);
}
static cft_array *argmin_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                              const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    return reduce_vmap(&cft_p_argmin, x, bdim, p, y, ybdim);
}
const cft_prim cft_p_argmax = {
    .name = "argmax",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_NONDIFF,
    .pnames = {"axes"},
    .shape = arg_shape,
    .impl = argmax_impl,
    .vmap = argmax_vmap,
};
const cft_prim cft_p_argmin = {
    .name = "argmin",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_NONDIFF,
    .pnames = {"axes"},
    .shape = arg_shape,
    .impl = argmin_impl,
    .vmap = argmin_vmap,
};

/* ---- public ops ---- */

static int norm_axes(const char *op, const cft_array *x, const int *axes, int naxes, int64_t *out) {
    int nd = x->aval.ndim;
    bool mark[CFT_MAX_NDIM] = {0};
    if (naxes < 0 || naxes > CFT_MAX_NDIM || (naxes > 0 && !axes)) {
        cft__fail(CFT_E_ARG, "%s: %d axes%s for %s", op, naxes,
                  naxes > 0 && !axes ? " but axes is NULL" : " (must be in [0, 8])",
                  cft__av(&x->aval));
        return -1;
    }
    if (!axes || naxes == 0) {
        for (int i = 0; i < nd; i++)
            out[i] = i;
        return nd;
    }
    for (int i = 0; i < naxes; i++) {
        int a = axes[i] < 0 ? axes[i] + nd : axes[i];
        if (a < 0 || a >= nd) {
            cft__fail(CFT_E_ARG, "%s: axis %d out of range for %s", op, axes[i], cft__av(&x->aval));
            return -1;
        }
        if (mark[a]) {
            cft__fail(CFT_E_ARG, "%s: axis %d repeated in the axes of %s", op, axes[i],
                      cft__av(&x->aval));
            return -1;
        }
        mark[a] = true;
    }
    int k = 0;
    for (int i = 0; i < nd; i++)
        if (mark[i])
            out[k++] = i;
    return k;
}

static cft_array *reduce_op(const char *op, const cft_prim *prim, cft_array *x, const int *axes,
                            int naxes, bool keepdims) {
    CFT_PROPAGATE(op, x);
    int64_t ax[CFT_MAX_NDIM];
    int n = norm_axes(op, x, axes, naxes, ax);
    if (n < 0)
        return cft__fail(CFT_E_ARG, "%s", cft_last_error_message());
    cft_params p = {0};
    cft__param_set(&p, 0, ax, n);
    cft_array *y = cft__bind1(prim, &p, 1, &x);
    if (!keepdims || cft_failed(y))
        return y;
    int64_t shape[CFT_MAX_NDIM];
    for (int i = 0; i < x->aval.ndim; i++)
        shape[i] = x->aval.shape[i];
    for (int i = 0; i < n; i++)
        shape[ax[i]] = 1;
    return cft__reshape(y, shape, x->aval.ndim);
}

cft_array *cft__reduce_sum(cft_array *x, const int *axes, int naxes) {
    int64_t ax[CFT_MAX_NDIM];
    for (int i = 0; i < naxes; i++)
        ax[i] = axes[i];
    cft_params p = {0};
    cft__param_set(&p, 0, ax, naxes);
    return cft__bind1(&cft_p_reduce_sum, &p, 1, &x);
}
cft_array *cft__reduce_max(cft_array *x, const int *axes, int naxes) {
    return reduce_op("reduce_max", &cft_p_reduce_max, x, axes, naxes, false);
}

cft_array *cft_sum(cft_array *x, const int *axes, int naxes, bool keepdims) {
    CFT_API("cft_sum");
    return reduce_op("cft_sum", &cft_p_reduce_sum, x, axes, naxes, keepdims);
}
cft_array *cft_prod(cft_array *x, const int *axes, int naxes, bool keepdims) {
    CFT_API("cft_prod");
    return reduce_op("cft_prod", &cft_p_reduce_prod, x, axes, naxes, keepdims);
}
cft_array *cft_max(cft_array *x, const int *axes, int naxes, bool keepdims) {
    CFT_API("cft_max");
    return reduce_op("cft_max", &cft_p_reduce_max, x, axes, naxes, keepdims);
}
cft_array *cft_min(cft_array *x, const int *axes, int naxes, bool keepdims) {
    CFT_API("cft_min");
    return reduce_op("cft_min", &cft_p_reduce_min, x, axes, naxes, keepdims);
}
cft_array *cft_mean(cft_array *x, const int *axes, int naxes, bool keepdims) {
    CFT_PROPAGATE("cft_mean", x);
    if (!cft_dtype_is_inexact(x->aval.dtype))
        x = cft_astype(x, CFT_F32);
    int64_t ax[CFT_MAX_NDIM];
    int n = norm_axes("cft_mean", x, axes, naxes, ax);
    if (n < 0)
        return cft__fail(CFT_E_ARG, "%s", cft_last_error_message());
    int64_t cnt = 1;
    for (int i = 0; i < n; i++)
        cnt = cft_dim_mul(cnt, x->aval.shape[ax[i]]);
    if (cft_dim_is_symbolic(cnt)) /* the count is known when it runs */
        return cft_div(cft_sum(x, axes, naxes, keepdims),
                       cft__dim_value(cnt, cft_dtype_real(x->aval.dtype)));
    return cft_mul_s(cft_sum(x, axes, naxes, keepdims), 1.0 / (double)(cnt ? cnt : 1));
}
cft_array *cft_var(cft_array *x, const int *axes, int naxes, int ddof, bool keepdims) {
    CFT_PROPAGATE("cft_var", x);
    if (!cft_dtype_is_inexact(x->aval.dtype))
        x = cft_astype(x, CFT_F32);
    int64_t ax[CFT_MAX_NDIM];
    int n = norm_axes("cft_var", x, axes, naxes, ax);
    if (n < 0)
        return cft__fail(CFT_E_ARG, "%s", cft_last_error_message());
    int64_t cnt = 1;
    for (int i = 0; i < n; i++)
        cnt = cft_dim_mul(cnt, x->aval.shape[ax[i]]);
    if (ddof < 0 || (!cft_dim_is_symbolic(cnt) && ddof >= cnt))
        return cft__fail(CFT_E_ARG,
                         "cft_var: ddof %d for %lld elements per variance of %s (need 0 <= ddof "
                         "< n)",
                         ddof, (long long)cnt, cft__av(&x->aval));
    cft_array *d = cft_sub(x, cft_mean(x, axes, naxes, true));
    /* |d|^2: a real variance for complex x, as NumPy */
    cft_array *d2 =
        cft_dtype_is_complex(x->aval.dtype) ? cft_real(cft_mul(d, cft_conj(d))) : cft_square(d);
    if (cft_dim_is_symbolic(cnt))
        return cft_div(cft_sum(d2, axes, naxes, keepdims),
                       cft__dim_value(cft_dim_sub(cnt, ddof), d2->aval.dtype));
    return cft_mul_s(cft_sum(d2, axes, naxes, keepdims), 1.0 / (double)(cnt - ddof));
}
static cft_array *arg_op(const char *op, const cft_prim *prim, cft_array *x, int axis,
                         bool keepdims) {
    CFT_PROPAGATE(op, x);
    return reduce_op(op, prim, x, &axis, 1, keepdims);
}
cft_array *cft_argmax(cft_array *x, int axis, bool keepdims) {
    CFT_API("cft_argmax");
    return arg_op("cft_argmax", &cft_p_argmax, x, axis, keepdims);
}
cft_array *cft_argmin(cft_array *x, int axis, bool keepdims) {
    CFT_API("cft_argmin");
    return arg_op("cft_argmin", &cft_p_argmin, x, axis, keepdims);
}
