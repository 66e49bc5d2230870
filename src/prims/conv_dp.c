/* conv_dp.c: conv_general_dilated's rules for DP-SGD's clipping without
 * per-sample gradients (batch_sqnorm / batch_wsum, see trace/prim.h).
 *
 * Under vmap, the per-example weight gradient of a convolution is one
 * convolution with feature_group_count G = the batch: lhs [L, G*n, sp]
 * (each example's inputs, channels and samples swapped), rhs [G*Co, n, k]
 * (each example's output cotangent), out [L, G*Co, k'], example g's
 * gradient in output channels [g*Co, (g+1)*Co) (conv.c's conv_vmap).
 *
 * - The weighted sum over examples, sum_g w_g out_g, is one ungrouped
 *   convolution of the same lhs with rhs' [Co, G*n, k], rhs'[co, g*n + c] =
 *   w_g rhs[g*Co + co, c]: the ordinary batch weight gradient with each
 *   example's cotangent scaled.
 * - Each example's squared norm, by the cheaper of two forms. With T
 *   positions per example (n*prod(k): the terms of its sum), LS = L*prod(k')
 *   and M_g = X_g R_g (X_g [LS, T] the example's input patches, R_g [T, Co]
 *   its cotangent): the "ghost norm" ||M_g||^2 = <X_g^T X_g, R_g R_g^T>
 *   (two T x T Grams: Goodfellow 2015, Li et al. 2021), when
 *   T (2 LS + Co) < LS Co; else a scan over chunks of examples, each chunk's
 *   grouped convolution squared and summed per example, so that only a
 *   chunk's gradients (at most CHUNK_BYTES) exist at a time.
 *
 * Either norm plus the sum costs more arithmetic than forming the
 * gradients once (the sum is a second weight-gradient convolution), which
 * pays only where the gradients are large: the rules apply when the ghost
 * norm is cheap or the gradients would take more than FORM_BYTES.
 * CFT_DP_CONV=ghost|chunks|off forces a form (tests, comparisons).
 * Under autocast the gradients are half convolutions converted to f32; the
 * rules answer for them from the operands widened to f32. For
 * the examples' patches the ghost norm convolves each example's inputs
 * with an identity kernel (jax's conv_general_dilated_patches).
 */
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "array/dim.h"
#include "cft/control.h"
#include "core/mem.h"
#include "prims/conv_dp.h"
#include "prims/rules.h"
#include "trace/ir.h"

enum { CFG = 4, CBG = 5 }; /* conv.c's parameter slots */
enum { CHUNK_BYTES = 256 << 10 };
#define FORM_BYTES (64.0 * (1 << 20))

typedef enum { AUTO, GHOST, CHUNKS, OFF } mode;

/* CFT_DP_CONV, read when a rule runs: at rewrite (jit compile) time */
static mode forced(void) {
    const char *v = getenv("CFT_DP_CONV");
    if (!v)
        return AUTO;
    return !strcmp(v, "ghost")    ? GHOST
           : !strcmp(v, "chunks") ? CHUNKS
           : !strcmp(v, "off")    ? OFF
                                  : AUTO;
}

/* T, LS and Co of the comment above */
static void sizes(const cft_eqn *q, int64_t nb, double *T, double *LS, double *Co) {
    const cft_aval *r = &q->in[1]->aval, *o = &q->out[0]->aval;
    *T = (double)cft__numel(r->shape + 1, r->ndim - 1);
    *LS = (double)cft__numel(o->shape, o->ndim) / (double)o->shape[1];
    *Co = (double)(r->shape[0] / nb);
}

static bool ghost_cheaper(const cft_eqn *q, int64_t nb) {
    double T, LS, Co;
    sizes(q, nb, &T, &LS, &Co);
    return T * (2 * LS + Co) < LS * Co;
}

extern const cft_prim cft_p_conv_general_dilated;

/* the bytes of a gradient element: half ones (autocast's) are read, and
 * answered for, through their conversion to f32 */
static int64_t grad_bytes(cft_dtype dt) {
    return cft_dtype_is_half(dt) ? 4 : (int64_t)cft_dtype_size(dt);
}

/* Examples as feature groups: axis 1 of the output, one group each. */
static bool grouped_examples(const cft_eqn *q, int axis, int64_t nb) {
    const cft_aval *l = &q->in[0]->aval, *r = &q->in[1]->aval, *o = &q->out[0]->aval;
    if (axis != 1 || q->params.v[CFG][0] != nb || nb < 2 || q->params.v[CBG][0] != 1)
        return false;
    if ((l->dtype != CFT_F32 && l->dtype != CFT_F64 && !cft_dtype_is_half(l->dtype)) ||
        r->dtype != l->dtype)
        return false;
    if (cft__shape_symbolic(l->shape, l->ndim) || cft__shape_symbolic(r->shape, r->ndim) ||
        cft__numel(o->shape, o->ndim) == 0)
        return false;
    mode m = forced();
    if (m != AUTO)
        return m != OFF;
    double bytes = (double)cft__numel(o->shape, o->ndim) * (double)grad_bytes(o->dtype);
    return ghost_cheaper(q, nb) || bytes > FORM_BYTES;
}

static cft_array *conv(cft_array *lhs, cft_array *rhs, const cft_params *p, int64_t groups) {
    cft_params q = *p;
    cft__param_set1(&q, CFG, groups);
    return cft__bind1(&cft_p_conv_general_dilated, &q, 2, (cft_array *[]){lhs, rhs});
}

/* x's shape with its leading dim replaced by `lead` (nlead dims) */
static cft_array *relead(cft_array *x, const int64_t *lead, int nlead, int from) {
    int64_t s[CFT_MAX_NDIM];
    int k = 0, nd = cft_array_ndim(x);
    for (int i = 0; i < nlead; i++)
        s[k++] = lead[i];
    for (int i = from; i < nd; i++)
        s[k++] = cft_array_dim(x, i);
    return cft_reshape(x, s, k);
}

typedef struct {
    cft_params p;
    int64_t cs;
} chunk_env;

/* per example of a chunk: (lhs [L, cs*n, sp], rhs [cs*Co, n, k]) -> [cs] */
static cft_array *chunk_sqnorm(cft_array *lhs, cft_array *rhs, const cft_params *p, int64_t cs) {
    cft_array *y = conv(lhs, rhs, p, cs); /* [L, cs*Co, k'] */
    int64_t L = cft_array_dim(y, 0);
    y = cft_reshape(cft_square(y), (int64_t[]){L, cs, -1}, 3);
    return cft_sum(y, (int[]){0, 2}, 2, false);
}

static cft_status chunk_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    const chunk_env *e = env;
    out[0] = chunk_sqnorm(in[0], in[1], &e->p, e->cs);
    return CFT_OK; /* an error array carries its own error */
}

/* <X_g^T X_g, R_g R_g^T> per example g */
static cft_array *ghost_sqnorm(cft_array *lhs, cft_array *rhs, const cft_params *p, int64_t G) {
    int nd = cft_array_ndim(rhs);
    int64_t L = cft_array_dim(lhs, 0), n = cft_array_dim(rhs, 1), Co = cft_array_dim(rhs, 0) / G;
    int64_t T = cft_array_size(rhs) / cft_array_dim(rhs, 0), kshape[CFT_MAX_NDIM] = {T};
    for (int i = 1; i < nd; i++)
        kshape[i] = cft_array_dim(rhs, i);
    /* patches: [L, G*n, sp] -> [L*G, n, sp], convolved with the identity
     * [T, n, k] -> [L*G, T, S] -> [L, G, T, S] */
    cft_array *x = relead(lhs, (int64_t[]){L * G, n}, 2, 2);
    cft_array *id = cft_reshape(cft_eye(T, cft_array_dtype(rhs)), kshape, nd);
    x = conv(x, id, p, 1);
    x = relead(x, (int64_t[]){L, G, T, cft_array_size(x) / (L * G * T)}, 4, cft_array_ndim(x));
    cft_array *gx = cft_dot_general(x, x, (int[]){0, 3}, (int[]){0, 3}, 2, (int[]){1}, (int[]){1},
                                    1); /* [G, T, T] */
    cft_array *r = cft_reshape(rhs, (int64_t[]){G, Co, T}, 3);
    cft_array *gr = cft_dot_general(r, r, (int[]){1}, (int[]){1}, 1, (int[]){0}, (int[]){0}, 1);
    return cft_sum(cft_mul(gx, gr), (int[]){1, 2}, 2, false);
}

bool cft__conv_batch_sqnorm(const cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                            cft_array **out) {
    if (!grouped_examples(q, axis, nb))
        return false;
    if (!c->value)
        return true;
    cft_array *lhs = cft__rewrite_value_f32(c, q->in[0]->id),
              *rhs = cft__rewrite_value_f32(c, q->in[1]->id);
    mode m = forced();
    if (m == GHOST || (m == AUTO && ghost_cheaper(q, nb))) {
        *out = ghost_sqnorm(lhs, rhs, &q->params, nb);
        return true;
    }
    const cft_aval *o = &q->out[0]->aval;
    int64_t G = nb, per = cft__numel(o->shape, o->ndim) / G * grad_bytes(o->dtype);
    int64_t cs = 1; /* the largest divisor of G whose chunk fits the budget */
    for (int64_t d = 1; d <= G; d++)
        if (G % d == 0 && d * per <= CHUNK_BYTES)
            cs = d;
    if (cs == G) {
        *out = chunk_sqnorm(lhs, rhs, &q->params, G);
        return true;
    }
    int64_t L = cft_array_dim(lhs, 0), nc = G / cs, n = cft_array_dim(lhs, 1) / G;
    /* lhs [L, G*n, sp] -> [nc, L, cs*n, sp]; rhs [G*Co, n, k] -> [nc, cs*Co, n, k] */
    cft_array *xs[2];
    xs[0] = relead(lhs, (int64_t[]){L, nc, cs * n}, 3, 2);
    int perm[CFT_MAX_NDIM] = {1, 0};
    for (int i = 2; i < cft_array_ndim(xs[0]); i++)
        perm[i] = i;
    xs[0] = cft_transpose(xs[0], perm);
    xs[1] = relead(rhs, (int64_t[]){nc, cft_array_dim(rhs, 0) / nc}, 2, 1);
    chunk_env *e = CFT_NEW(chunk_env);
    if (!e)
        return false;
    e->p = q->params, e->cs = cs;
    cft_array *ys[1];
    if (cft_scan(cft_fn_new(chunk_body, e, 2, 1), 0, 0, nc, false, xs, ys) != CFT_OK)
        return false;
    *out = cft_reshape(ys[0], &G, 1);
    return true;
}

bool cft__conv_batch_wsum(const cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                          cft_array *w, cft_array **out) {
    if (!grouped_examples(q, axis, nb))
        return false;
    if (!c->value)
        return true;
    cft_array *lhs = cft__rewrite_value_f32(c, q->in[0]->id),
              *rhs = cft__rewrite_value_f32(c, q->in[1]->id);
    int nd = cft_array_ndim(rhs);
    int64_t G = nb, Co = cft_array_dim(rhs, 0) / G, n = cft_array_dim(rhs, 1);
    int64_t ws[CFT_MAX_NDIM] = {G};
    for (int i = 1; i <= nd; i++)
        ws[i] = 1;
    /* rhs [G*Co, n, k] -> [G, Co, n, k] * w -> [Co, G, n, k] -> [Co, G*n, k] */
    cft_array *r = cft_mul(relead(rhs, (int64_t[]){G, Co}, 2, 1), cft_reshape(w, ws, nd + 1));
    int perm[CFT_MAX_NDIM] = {1, 0};
    for (int i = 2; i <= nd; i++)
        perm[i] = i;
    r = relead(cft_transpose(r, perm), (int64_t[]){Co, G * n}, 2, 3);
    *out = conv(lhs, r, &q->params, 1); /* [L, Co, k'] */
    return true;
}
