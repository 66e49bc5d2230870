/* losses.c: the loss functions with PyTorch's reductions: cross-entropy
 * (integer labels, label smoothing), NLL, MSE, L1, Huber and a stable
 * binary cross-entropy on logits. */
#include <math.h>

#include "nn/nn_internal.h"
#include "prims/labels.h"

cft_array *cft__nn_reduce(const char *op, cft_array *l, cft_reduction red) {
    switch (red) {
    case CFT_REDUCE_MEAN:
        return cft_mean(l, NULL, 0, false);
    case CFT_REDUCE_SUM:
        return cft_sum(l, NULL, 0, false);
    case CFT_REDUCE_NONE:
        return l;
    }
    return cft__fail(CFT_E_ARG, "%s: unknown reduction %d", op, (int)red);
}

/* logits / log-probs [..., C] against integer labels [...] */
static cft_array *check_labels(const char *op, cft_array *x, cft_array *labels) {
    int nx = cft_array_ndim(x), ny = cft_array_ndim(labels);
    bool ok = nx == ny + 1 && cft_dtype_is_float(cft_array_dtype(x)) &&
              !cft_dtype_is_float(cft_array_dtype(labels)) && cft_array_dtype(labels) != CFT_BOOL;
    for (int i = 0; ok && i < ny; i++)
        ok = cft_array_dim(x, i) == cft_array_dim(labels, i);
    if (ok)
        return NULL;
    return cft__fail(CFT_E_SHAPE, "%s: inputs %s do not fit integer labels %s (classes last)", op,
                     cft__nn_av(x), cft__nn_av(labels));
}

cft_array *cft_loss_nll(cft_array *logp, cft_array *labels, cft_reduction red) {
    CFT_PROPAGATE("cft_loss_nll", logp, labels);
    cft_array *e = check_labels("cft_loss_nll", logp, labels);
    if (e)
        return e;
    return cft__nn_reduce("cft_loss_nll", cft__label_nll("cft_loss_nll", logp, labels), red);
}

cft_array *cft_loss_cross_entropy(cft_array *logits, cft_array *labels, double label_smoothing,
                                  cft_reduction red) {
    CFT_PROPAGATE("cft_loss_cross_entropy", logits, labels);
    cft_array *e = check_labels("cft_loss_cross_entropy", logits, labels);
    if (e)
        return e;
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        return cft__fail(CFT_E_ARG, "cft_loss_cross_entropy: label_smoothing %g is not in [0, 1]",
                         label_smoothing);
    int axis = -1;
    cft_array *logp = cft_log_softmax(logits, -1);
    cft_array *l = cft__label_nll("cft_loss_cross_entropy", logp, labels);
    if (label_smoothing > 0) {
        cft_array *smooth = cft_neg(cft_mean(logp, &axis, 1, false));
        l = cft_add(cft_mul_s(l, 1 - label_smoothing), cft_mul_s(smooth, label_smoothing));
    }
    return cft__nn_reduce("cft_loss_cross_entropy", l, red);
}

static cft_array *diff(const char *op, cft_array *pred, cft_array *target) {
    if (!cft_dtype_is_float(cft_promote(cft_array_dtype(pred), cft_array_dtype(target))))
        return cft__fail(CFT_E_DTYPE, "%s: needs float inputs, got %s and %s", op, cft__nn_av(pred),
                         cft__nn_av(target));
    cft_array *d = cft_sub(pred, target);
    if (cft_failed(d))
        return cft__fail(cft_error_code(d), "%s: %s and %s do not broadcast", op, cft__nn_av(pred),
                         cft__nn_av(target));
    return d;
}

cft_array *cft_loss_mse(cft_array *pred, cft_array *target, cft_reduction red) {
    CFT_PROPAGATE("cft_loss_mse", pred, target);
    return cft__nn_reduce("cft_loss_mse", cft_square(diff("cft_loss_mse", pred, target)), red);
}

cft_array *cft_loss_l1(cft_array *pred, cft_array *target, cft_reduction red) {
    CFT_PROPAGATE("cft_loss_l1", pred, target);
    return cft__nn_reduce("cft_loss_l1", cft_abs(diff("cft_loss_l1", pred, target)), red);
}

cft_array *cft_loss_huber(cft_array *pred, cft_array *target, double delta, cft_reduction red) {
    CFT_PROPAGATE("cft_loss_huber", pred, target);
    if (!(delta > 0))
        return cft__fail(CFT_E_ARG, "cft_loss_huber: delta %g must be positive", delta);
    cft_array *d = diff("cft_loss_huber", pred, target);
    if (cft_failed(d))
        return d;
    cft_array *a = cft_abs(d);
    cft_array *quad = cft_mul_s(cft_square(d), 0.5);
    cft_array *lin = cft_mul_s(cft_add_s(a, -0.5 * delta), delta);
    return cft__nn_reduce("cft_loss_huber", cft_where(cft_lt(a, cft__nn_sc(a, delta)), quad, lin),
                          red);
}

cft_array *cft_loss_bce_with_logits(cft_array *logits, cft_array *targets, cft_array *pos_weight,
                                    cft_reduction red) {
    CFT_PROPAGATE("cft_loss_bce_with_logits", logits, targets);
    if (pos_weight && cft_failed(pos_weight))
        return pos_weight;
    cft_array *x = logits;
    if (!cft_dtype_is_float(cft_array_dtype(x)))
        return cft__fail(CFT_E_DTYPE, "cft_loss_bce_with_logits: logits must be float, got %s",
                         cft__nn_av(x));
    cft_array *y = cft_astype(targets, cft_array_dtype(x));
    /* log(1 + e^-x) for any x: log1p(e^-|x|) + max(-x, 0) */
    cft_array *log1pexp_neg =
        cft_add(cft_log1p(cft_exp(cft_neg(cft_abs(x)))), cft_maximum(cft_neg(x), cft__nn_sc(x, 0)));
    cft_array *one_minus_y = cft_sub(cft__nn_sc(y, 1), y);
    cft_array *coef =
        pos_weight
            ? cft_add(
                  cft__nn_sc(y, 1),
                  cft_mul(cft_sub(cft_astype(pos_weight, cft_array_dtype(x)), cft__nn_sc(x, 1)), y))
            : cft_ones_like(y);
    cft_array *l = cft_add(cft_mul(one_minus_y, x), cft_mul(coef, log1pexp_neg));
    if (cft_failed(l))
        return cft__fail(cft_error_code(l),
                         "cft_loss_bce_with_logits: logits %s, targets %s, pos_weight %s: %s",
                         cft__nn_av(x), cft__nn_av(targets),
                         pos_weight ? cft__nn_av(pos_weight) : "none", cft_error_message(l));
    return cft__nn_reduce("cft_loss_bce_with_logits", l, red);
}
