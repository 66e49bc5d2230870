/* activations.c: the activation functions of the nn layer (silu, sigmoid,
 * stable softplus) and the kind-dispatching cft_activation, written with
 * public ops so every transform applies. */
#include "nn/nn_internal.h"

cft_array *cft_silu(cft_array *x) {
    CFT_PROPAGATE("cft_silu", x);
    return cft_mul(x, cft_logistic(x));
}

cft_array *cft_sigmoid(cft_array *x) {
    CFT_PROPAGATE("cft_sigmoid", x);
    return cft_logistic(x);
}

/* max(x, 0) + log1p(exp(-|x|)): exp never overflows; maximum splits the
 * gradient at 0 and |x|'s derivative is 0 there, so d/dx at 0 is 0.5 */
cft_array *cft_softplus(cft_array *x) {
    CFT_PROPAGATE("cft_softplus", x);
    if (!cft_dtype_is_float(cft_array_dtype(x)))
        return cft__fail(CFT_E_DTYPE, "cft_softplus: needs a float array, got %s", cft__nn_av(x));
    return cft_add(cft_maximum(x, cft__nn_sc(x, 0)), cft_log1p(cft_exp(cft_neg(cft_abs(x)))));
}

cft_array *cft_activation(cft_array *x, cft_activation_kind kind) {
    CFT_PROPAGATE("cft_activation", x);
    switch (kind) {
    case CFT_ACT_IDENTITY:
        return x;
    case CFT_ACT_RELU:
        return cft_relu(x);
    case CFT_ACT_GELU:
        return cft_gelu(x, false);
    case CFT_ACT_GELU_TANH:
        return cft_gelu(x, true);
    case CFT_ACT_SILU:
        return cft_silu(x);
    case CFT_ACT_TANH:
        return cft_tanh(x);
    case CFT_ACT_SIGMOID:
        return cft_logistic(x);
    case CFT_ACT_SOFTPLUS:
        return cft_softplus(x);
    }
    return cft__fail(CFT_E_ARG, "cft_activation: unknown kind %d", (int)kind);
}
