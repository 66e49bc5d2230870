/* nn_ops.c: public composites written in plain C over the primitives, so
 * every transform applies to them unchanged: relu, gelu, softmax,
 * log_softmax, logsumexp, one_hot, cross_entropy, mse. */
#include <math.h>

#include "array/device.h"
#include "prims/labels.h"
#include "prims/rules.h"

/* where(x > 0, x, 0): derivative 0 at 0, as in PyTorch and JAX */
cft_array *cft_relu(cft_array *x) {
    CFT_PROPAGATE("cft_relu", x);
    cft_array *z = cft_zeros_like(x);
    return cft_where(cft_gt(x, z), x, z);
}

cft_array *cft_gelu(cft_array *x, bool approximate) {
    CFT_PROPAGATE("cft_gelu", x);
    if (approximate) { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        cft_array *inner = cft_mul_s(cft_add(x, cft_mul_s(cft_mul(x, cft_square(x)), 0.044715)),
                                     0.7978845608028654);
        return cft_mul(cft_mul_s(x, 0.5), cft_add_s(cft_tanh(inner), 1));
    }
    return cft_mul(cft_mul_s(x, 0.5), cft_add_s(cft_erf(cft_mul_s(x, M_SQRT1_2)), 1));
}

/* x - max(x), with the max held constant under differentiation */
static cft_array *shifted(cft_array *x, int axis) {
    return cft_sub(x, cft_stop_gradient(cft_max(x, &axis, 1, true)));
}

cft_array *cft_softmax(cft_array *x, int axis) {
    CFT_PROPAGATE("cft_softmax", x);
    cft_array *e = cft_exp(shifted(x, axis));
    return cft_div(e, cft_sum(e, &axis, 1, true));
}

cft_array *cft_log_softmax(cft_array *x, int axis) {
    CFT_PROPAGATE("cft_log_softmax", x);
    cft_array *s = shifted(x, axis);
    return cft_sub(s, cft_log(cft_sum(cft_exp(s), &axis, 1, true)));
}

cft_array *cft_logsumexp(cft_array *x, const int *axes, int naxes, bool keepdims) {
    CFT_PROPAGATE("cft_logsumexp", x);
    cft_array *m = cft_stop_gradient(cft_max(x, axes, naxes, true));
    cft_array *finite = cft_lt(cft_abs(m), cft_full_like(m, INFINITY));
    m = cft_where(finite, m, cft_zeros_like(m)); /* all -inf rows stay -inf */
    cft_array *s = cft_log(cft_sum(cft_exp(cft_sub(x, m)), axes, naxes, true));
    cft_array *r = cft_add(s, m);
    return keepdims ? r : cft_squeeze(r, axes, axes ? naxes : 0);
}

cft_array *cft_one_hot(cft_array *labels, int64_t n, cft_dtype dtype) {
    CFT_PROPAGATE("cft_one_hot", labels);
    const cft_aval *a = &labels->aval;
    if (cft_dtype_is_float(a->dtype) || a->ndim + 1 > CFT_MAX_NDIM || n < 1)
        return cft__fail(CFT_E_ARG, "cft_one_hot: need integer labels and n >= 1, got %s, n=%lld",
                         cft__av(a), (long long)n);
    int64_t shape[CFT_MAX_NDIM];
    for (int i = 0; i < a->ndim; i++)
        shape[i] = a->shape[i];
    shape[a->ndim] = n;
    cft_array *classes = cft_iota(a->dtype, shape, a->ndim + 1, a->ndim);
    return cft_astype(cft_eq(cft_expand_dims(labels, -1), classes), dtype);
}

cft_array *cft_cross_entropy(cft_array *logits, cft_array *labels) {
    CFT_PROPAGATE("cft_cross_entropy", logits, labels);
    const cft_aval *l = &logits->aval, *y = &labels->aval;
    bool ok =
        l->ndim == y->ndim + 1 && cft_dtype_is_float(l->dtype) && !cft_dtype_is_float(y->dtype);
    for (int i = 0; ok && i < y->ndim; i++)
        ok = l->shape[i] == y->shape[i];
    if (!ok)
        return cft__fail(CFT_E_SHAPE, "cft_cross_entropy: logits %s do not fit integer labels %s",
                         cft__av(l), cft__av(y));
    return cft__label_nll("cft_cross_entropy", cft_log_softmax(logits, -1), labels);
}

cft_array *cft__label_nll(const char *op, cft_array *logp, cft_array *labels) {
    const cft_aval *y = &labels->aval;
    int64_t C = logp->aval.shape[logp->aval.ndim - 1];
    /* a label outside [0, C) has an all-zero one-hot row and gave a loss of
     * 0 without a word (torch raises): known labels are checked here (two
     * reductions over the labels, nothing over the logits); a traced one,
     * or one on a device (whose check would wait for the device), makes
     * its example's loss NaN */
    bool known = labels->kind == CFT_K_CONCRETE && !cft__on_device(labels);
    if (known && cft__numel(y->shape, y->ndim) > 0) {
        double lo = cft_item(cft_min(labels, NULL, 0, false)),
               hi = cft_item(cft_max(labels, NULL, 0, false));
        if (lo < 0 || hi >= (double)C)
            return cft__fail(CFT_E_ARG,
                             "%s: label %.0f is out of range for %lld classes (labels must lie "
                             "in [0, %lld))",
                             op, lo < 0 ? lo : hi, (long long)C, (long long)C);
    }
    cft_array *oh = cft_one_hot(labels, C, logp->aval.dtype);
    cft_array *loss = cft_neg(cft_sum(cft_mul(oh, logp), (int[]){-1}, 1, false));
    if (known)
        return loss;
    cft_array *in_range = cft_logical_and(cft_ge(labels, cft_zeros_like(labels)),
                                          cft_lt(labels, cft_full_like(labels, (double)C)));
    return cft_where(in_range, loss, cft_full_like(loss, NAN));
}

cft_array *cft_mse(cft_array *pred, cft_array *target) {
    CFT_PROPAGATE("cft_mse", pred, target);
    return cft_mean(cft_square(cft_sub(pred, target)), NULL, 0, false);
}
