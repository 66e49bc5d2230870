/* layers.c: the layers as functions of arrays (torch.nn.functional):
 * linear, layer_norm, batch_norm with explicit running statistics,
 * inverted dropout with an explicit key, embedding (a gather of table
 * rows) and flatten (torch.flatten). Public ops only, so every transform
 * applies. */
#include <math.h>

#include "core/error.h"
#include "nn/nn_internal.h"

cft_array *cft_linear(cft_array *x, cft_array *weight, cft_array *bias) {
    CFT_PROPAGATE("cft_linear", x, weight);
    if (bias && cft_failed(bias))
        return bias;
    int nd = cft_array_ndim(x);
    if (cft_array_ndim(weight) != 2 || nd < 1 || cft_array_dim(x, -1) != cft_array_dim(weight, 1))
        return cft__fail(CFT_E_SHAPE, "cft_linear: input %s does not fit weight %s ([out, in])",
                         cft__nn_av(x), cft__nn_av(weight));
    if (bias && (cft_array_ndim(bias) != 1 || cft_array_dim(bias, 0) != cft_array_dim(weight, 0)))
        return cft__fail(CFT_E_SHAPE, "cft_linear: bias %s does not fit weight %s",
                         cft__nn_av(bias), cft__nn_av(weight));
    cft_array *y = cft_dot_general(x, weight, (int[]){nd - 1}, (int[]){1}, 1, NULL, NULL, 0);
    return bias ? cft_add(y, bias) : y;
}

cft_array *cft_layer_norm(cft_array *x, int nnorm, cft_array *weight, cft_array *bias, double eps) {
    CFT_PROPAGATE("cft_layer_norm", x);
    if (weight && cft_failed(weight))
        return weight;
    if (bias && cft_failed(bias))
        return bias;
    int nd = cft_array_ndim(x);
    if (!(eps >= 0) || !isfinite(eps))
        return cft__fail(CFT_E_ARG, "cft_layer_norm: eps = %g (must be finite and >= 0)", eps);
    if (nnorm < 1 || nnorm > nd || !cft_dtype_is_float(cft_array_dtype(x)))
        return cft__fail(CFT_E_ARG, "cft_layer_norm: cannot normalise the last %d dims of %s",
                         nnorm, cft__nn_av(x));
    cft_array *affine[2] = {weight, bias};
    for (int k = 0; k < 2; k++) {
        cft_array *a = affine[k];
        if (!a)
            continue;
        bool ok = cft_array_ndim(a) == nnorm;
        for (int i = 0; ok && i < nnorm; i++)
            ok = cft_array_dim(a, i) == cft_array_dim(x, nd - nnorm + i);
        if (!ok)
            return cft__fail(CFT_E_SHAPE,
                             "cft_layer_norm: %s %s does not match the last %d dims of %s",
                             k ? "bias" : "weight", cft__nn_av(a), nnorm, cft__nn_av(x));
    }
    int axes[CFT_MAX_NDIM];
    for (int i = 0; i < nnorm; i++)
        axes[i] = nd - nnorm + i;
    cft_array *mean = cft_mean(x, axes, nnorm, true);
    cft_array *var = cft_var(x, axes, nnorm, 0, true);
    cft_array *y = cft_mul(cft_sub(x, mean), cft_rsqrt(cft_add_s(var, eps)));
    if (weight)
        y = cft_mul(y, weight);
    if (bias)
        y = cft_add(y, bias);
    return y;
}

/* a [C] vector reshaped to [1, C, 1, ...] for an input of rank nd */
static cft_array *per_channel(cft_array *a, int nd) {
    int64_t shape[CFT_MAX_NDIM];
    for (int i = 0; i < nd; i++)
        shape[i] = 1;
    shape[1] = cft_array_dim(a, 0);
    return cft_reshape(a, shape, nd);
}

cft_array *cft_batch_norm(cft_array *x, cft_array *running_mean, cft_array *running_var,
                          cft_array *weight, cft_array *bias, bool train, double momentum,
                          double eps, cft_array **new_mean, cft_array **new_var) {
    CFT_API("cft_batch_norm");
    cft_array *y = NULL, *nm = running_mean, *nv = running_var;
    if (!x || !running_mean || !running_var)
        y = cft__fail(CFT_E_ARG, "cft_batch_norm: NULL input or running statistics");
    else if (cft_failed(x))
        y = x;
    else if (cft_failed(running_mean))
        y = running_mean;
    else if (cft_failed(running_var))
        y = running_var;
    else if (weight && cft_failed(weight))
        y = weight;
    else if (bias && cft_failed(bias))
        y = bias;
    int nd = y ? 0 : cft_array_ndim(x);
    int64_t C = nd >= 2 ? cft_array_dim(x, 1) : -1;
    if (!y && (nd < 2 || !cft_dtype_is_float(cft_array_dtype(x))))
        y = cft__fail(CFT_E_SHAPE, "cft_batch_norm: input must be float [N, C, ...], got %s",
                      cft__nn_av(x));
    cft_array *vecs[4] = {running_mean, running_var, weight, bias};
    for (int k = 0; !y && k < 4; k++)
        if (vecs[k] && (cft_array_ndim(vecs[k]) != 1 || cft_array_dim(vecs[k], 0) != C))
            y = cft__fail(CFT_E_SHAPE, "cft_batch_norm: %s %s does not fit %lld channels of %s",
                          (const char *[]){"running_mean", "running_var", "weight", "bias"}[k],
                          cft__nn_av(vecs[k]), (long long)C, cft__nn_av(x));
    int64_t n = y ? 0 : cft_dim_div(cft_array_size(x), C ? C : 1); /* may be symbolic */
    if (!y && train && !cft_dim_is_symbolic(n) && n < 2)
        y = cft__fail(CFT_E_SHAPE,
                      "cft_batch_norm: training needs more than 1 value per channel, got %s",
                      cft__nn_av(x));
    if (y) {
        if (new_mean)
            *new_mean = y;
        if (new_var)
            *new_var = y;
        return y;
    }
    cft_array *mean, *var;
    if (train) {
        int axes[CFT_MAX_NDIM], na = 0;
        for (int i = 0; i < nd; i++)
            if (i != 1)
                axes[na++] = i;
        mean = cft_mean(x, axes, na, false);
        var = cft_var(x, axes, na, 0, false);
        cft_array *unbiased =
            cft_dim_is_symbolic(n)
                ? cft_mul(cft_stop_gradient(var),
                          cft_div(cft_dim_value(n, cft_array_dtype(var)),
                                  cft_dim_value(cft_dim_sub(n, 1), cft_array_dtype(var))))
                : cft_mul_s(cft_stop_gradient(var), (double)n / (double)(n - 1));
        cft_dtype rdt = cft_array_dtype(running_mean);
        nm = cft_astype(cft_add(cft_mul_s(running_mean, 1 - momentum),
                                cft_mul_s(cft_astype(cft_stop_gradient(mean), rdt), momentum)),
                        rdt);
        rdt = cft_array_dtype(running_var);
        nv = cft_astype(cft_add(cft_mul_s(running_var, 1 - momentum),
                                cft_mul_s(cft_astype(unbiased, rdt), momentum)),
                        rdt);
    } else {
        mean = running_mean;
        var = running_var;
    }
    y = cft_mul(cft_sub(x, per_channel(mean, nd)), per_channel(cft_rsqrt(cft_add_s(var, eps)), nd));
    if (weight)
        y = cft_mul(y, per_channel(weight, nd));
    if (bias)
        y = cft_add(y, per_channel(bias, nd));
    if (new_mean)
        *new_mean = nm;
    if (new_var)
        *new_var = nv;
    return y;
}

cft_array *cft_dropout(cft_array *x, double p, bool train, cft_array *key) {
    CFT_PROPAGATE("cft_dropout", x);
    if (!(p >= 0 && p <= 1))
        return cft__fail(CFT_E_ARG, "cft_dropout: p = %g is not in [0, 1]", p);
    if (!train || p == 0)
        return x;
    if (!key)
        return cft__fail(CFT_E_ARG, "cft_dropout: training with p = %g needs a key", p);
    if (cft_failed(key))
        return key;
    if (!cft_dtype_is_float(cft_array_dtype(x)))
        return cft__fail(CFT_E_DTYPE, "cft_dropout: needs a float array, got %s", cft__nn_av(x));
    if (p == 1)
        return cft_zeros_like(x);
    cft_array *keep = cft_random_bernoulli(key, 1 - p, cft_array_shape(x), cft_array_ndim(x));
    return cft_where(keep, cft_mul_s(x, 1 / (1 - p)), cft_zeros_like(x));
}

cft_array *cft_embedding(cft_array *ids, cft_array *table) {
    CFT_PROPAGATE("cft_embedding", ids, table);
    if (cft_dtype_is_float(cft_array_dtype(ids)) || cft_array_ndim(table) != 2 ||
        cft_array_ndim(ids) + 1 > CFT_MAX_NDIM)
        return cft__fail(CFT_E_ARG,
                         "cft_embedding: need integer ids and a [num, dim] table, got %s and %s",
                         cft__nn_av(ids), cft__nn_av(table));
    /* table rows; FILL_OR_DROP gives ids outside [0, num) zero rows */
    int n = cft_array_ndim(ids);
    cft_gather_dnums dn = {.offset_dims = {n},
                           .n_offset_dims = 1,
                           .collapsed_slice_dims = {0},
                           .n_collapsed_slice_dims = 1,
                           .start_index_map = {0},
                           .n_start_index_map = 1,
                           .index_vector_dim = n};
    cft_array *ix = cft_array_dtype(ids) == CFT_BOOL ? cft_astype(ids, CFT_I32) : ids;
    return cft_gather(table, ix, &dn, (int64_t[]){1, cft_array_dim(table, 1)},
                      CFT_INDEX_FILL_OR_DROP);
}

cft_array *cft_flatten(cft_array *x, int start_dim, int end_dim) {
    CFT_PROPAGATE("cft_flatten", x);
    int nd = cft_array_ndim(x), r = nd ? nd : 1; /* a scalar counts as 1-d (as torch) */
    int s = start_dim < 0 ? start_dim + r : start_dim, e = end_dim < 0 ? end_dim + r : end_dim;
    if (s < 0 || e >= r || s > e)
        return cft__fail(CFT_E_ARG, "cft_flatten: dims %d..%d out of range for %s", start_dim,
                         end_dim, cft__nn_av(x));
    if (nd == 0)
        return cft_reshape(x, (int64_t[]){1}, 1);
    int64_t shape[CFT_MAX_NDIM];
    int k = 0;
    for (int i = 0; i < s; i++)
        shape[k++] = cft_array_dim(x, i);
    shape[k] = 1;
    for (int i = s; i <= e; i++)
        shape[k] *= cft_array_dim(x, i);
    k++;
    for (int i = e + 1; i < nd; i++)
        shape[k++] = cft_array_dim(x, i);
    return cft_reshape(x, shape, k);
}
