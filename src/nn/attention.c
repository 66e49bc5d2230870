/* attention.c: scaled dot-product attention (with boolean / additive masks,
 * causal masking and a softmax that gives fully masked rows zeros instead of
 * NaN) and the multi-head attention computation built on it. */
#include <math.h>

#include "nn/nn_internal.h"

/* softmax over the last axis that returns 0 for rows whose scores are all
 * -inf: the max is held constant (and replaced by 0 when not finite), and
 * the denominator by 1 when it is 0, so no NaN appears in values or in
 * gradients */
static cft_array *safe_softmax(cft_array *s) {
    int axis = -1;
    cft_array *m = cft_stop_gradient(cft_max(s, &axis, 1, true));
    cft_array *finite = cft_lt(cft_abs(m), cft_full_like(m, INFINITY));
    m = cft_where(finite, m, cft_zeros_like(m));
    cft_array *e = cft_exp(cft_sub(s, m));
    cft_array *d = cft_sum(e, &axis, 1, true);
    cft_array *zero = cft_zeros_like(d);
    return cft_div(e, cft_where(cft_gt(d, zero), d, cft_ones_like(d)));
}

cft_array *cft_scaled_dot_product_attention(cft_array *q, cft_array *k, cft_array *v,
                                            cft_array *mask, bool causal) {
    CFT_PROPAGATE("cft_scaled_dot_product_attention", q, k, v);
    if (mask && cft_failed(mask))
        return mask;
    int nq = cft_array_ndim(q), nk = cft_array_ndim(k), nv = cft_array_ndim(v);
    if (nq < 2 || nk < 2 || nv < 2 || !cft_dtype_is_float(cft_array_dtype(q)) ||
        cft_array_dim(q, -1) != cft_array_dim(k, -1) ||
        cft_array_dim(k, -2) != cft_array_dim(v, -2))
        return cft__fail(
            CFT_E_SHAPE,
            "cft_scaled_dot_product_attention: need q [..., L, E], k [..., S, E], v [..., S, Ev], "
            "got %s, %s, %s",
            cft__nn_av(q), cft__nn_av(k), cft__nn_av(v));
    int64_t L = cft_array_dim(q, -2), S = cft_array_dim(k, -2), E = cft_array_dim(q, -1);
    cft_array *s =
        cft_mul(cft_matmul(q, cft_mT(k)), cft__nn_sc(q, 1.0 / sqrt((double)(E ? E : 1))));
    cft_array *allowed = NULL;
    if (mask && cft_array_dtype(mask) == CFT_BOOL)
        allowed = mask;
    else if (mask)
        s = cft_add(s, cft_astype(mask, cft_array_dtype(s)));
    if (causal) {
        int64_t shape[2] = {L, S};
        cft_array *tril = cft_ge(cft_iota(CFT_I32, shape, 2, 0), cft_iota(CFT_I32, shape, 2, 1));
        allowed = allowed ? cft_logical_and(allowed, tril) : tril;
    }
    if (allowed)
        s = cft_where(allowed, s, cft_full_like(s, -INFINITY));
    cft_array *y = cft_matmul(safe_softmax(s), v);
    if (cft_failed(y))
        return cft__fail(cft_error_code(y),
                         "cft_scaled_dot_product_attention: q %s, k %s, v %s, mask %s: %s",
                         cft__nn_av(q), cft__nn_av(k), cft__nn_av(v),
                         mask ? cft__nn_av(mask) : "none", cft_error_message(y));
    return y;
}
