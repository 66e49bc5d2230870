/* module_apply.c: applying a module to an input given its parameter and
 * state trees (returning the new state), and multi-head attention, the one
 * module with several inputs. Conv2d and the pooling modules call the
 * cft_conv2d / cft_max_pool2d / cft_avg_pool2d ops. */
#include <stdio.h>

#include "core/error.h"
#include "nn/module.h"

/* entry `name` of a params or state tree, or an error naming the module */
static cft_array *param(const cft_tree *p, const char *name, const cft_module *m) {
    if (cft_tree_has(p, name))
        return cft_tree_get(p, name);
    if (cft_tree_failed(p))
        return cft_tree_error(p);
    return cft__fail(CFT_E_ARG, "cft_module_apply: %s: no entry '%s' in its params or state",
                     m->desc, name);
}

/* split [3E, ...] into rows [i*E, (i+1)*E) */
static cft_array *rows(cft_array *w, int64_t E, int i) {
    int nd = cft_array_ndim(w);
    int64_t start[2] = {i * E, 0}, limit[2] = {(i + 1) * E, nd == 2 ? cft_array_dim(w, 1) : 0};
    return cft_slice(w, start, limit, NULL);
}

/* [..., L, E] -> [..., H, L, D] */
static cft_array *split_heads(cft_array *x, int64_t H) {
    int nd = cft_array_ndim(x);
    if (cft_failed(x))
        return x;
    if (nd + 1 > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "cft_mha_apply: rank of %s too high", cft__nn_av(x));
    int64_t shape[CFT_MAX_NDIM];
    for (int i = 0; i < nd - 1; i++)
        shape[i] = cft_array_dim(x, i);
    shape[nd - 1] = H;
    shape[nd] = cft_array_dim(x, -1) / H;
    return cft_moveaxis(cft_reshape(x, shape, nd + 1), -2, -3);
}

/* [..., H, L, D] -> [..., L, H*D] */
static cft_array *merge_heads(cft_array *x) {
    if (cft_failed(x))
        return x;
    x = cft_moveaxis(x, -3, -2);
    int nd = cft_array_ndim(x);
    int64_t shape[CFT_MAX_NDIM];
    for (int i = 0; i < nd - 2; i++)
        shape[i] = cft_array_dim(x, i);
    shape[nd - 2] = cft_array_dim(x, -2) * cft_array_dim(x, -1);
    return cft_reshape(x, shape, nd - 1);
}

cft_array *cft_mha_apply(const cft_module *m, const cft_tree *params, cft_array *q, cft_array *k,
                         cft_array *v, cft_array *mask, bool causal) {
    CFT_API("cft_mha_apply");
    if (!m)
        return cft__fail(CFT_E_ARG, "cft_mha_apply: NULL module");
    if (m->err)
        return m->err;
    if (m->kind != CFT_M_MHA)
        return cft__fail(CFT_E_ARG, "cft_mha_apply: %s is not multi-head attention", m->desc);
    CFT_PROPAGATE("cft_mha_apply", q, k, v);
    if (!params)
        return cft__fail(CFT_E_ARG, "cft_mha_apply: NULL params");
    if (cft_tree_failed(params))
        return cft_tree_error(params);
    int64_t E = m->a, H = m->b;
    cft_array *xs[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        if (cft_array_ndim(xs[i]) < 2 || cft_array_dim(xs[i], -1) != E)
            return cft__fail(CFT_E_SHAPE, "cft_mha_apply: %s: %c is %s, need [..., L, %lld]",
                             m->desc, "qkv"[i], cft__nn_av(xs[i]), (long long)E);
    cft_array *w = param(params, "in_proj_weight", m), *b = NULL;
    if (m->flag)
        b = param(params, "in_proj_bias", m);
    if (cft_failed(w))
        return w;
    if (b && cft_failed(b))
        return b;
    if (cft_array_ndim(w) != 2 || cft_array_dim(w, 0) != 3 * E || cft_array_dim(w, 1) != E)
        return cft__fail(CFT_E_SHAPE, "cft_mha_apply: %s: in_proj_weight is %s", m->desc,
                         cft__nn_av(w));
    cft_array *h[3];
    for (int i = 0; i < 3; i++)
        h[i] = split_heads(cft_linear(xs[i], rows(w, E, i), b ? rows(b, E, i) : NULL), H);
    cft_array *o = merge_heads(cft_scaled_dot_product_attention(h[0], h[1], h[2], mask, causal));
    cft_array *wo = param(params, "out_proj.weight", m),
              *bo = m->flag ? param(params, "out_proj.bias", m) : NULL;
    return cft_linear(o, wo, bo);
}

/* Conv / ConvTranspose: [N, in, *sp] or [in, *sp] -> [N, out, *sp'] or [out, *sp'] */
static cft_array *apply_conv(const cft_module *m, const cft_tree *p, cft_array *x) {
    int nd = cft_array_ndim(x), nsp = m->nsp;
    if ((nd != nsp + 1 && nd != nsp + 2) || cft_array_dim(x, -(nsp + 1)) != m->a)
        return cft__fail(CFT_E_SHAPE,
                         "cft_module_apply: %s does not fit input %s (needs [N, %lld, %s] or "
                         "[%lld, %s])",
                         m->desc, cft__nn_av(x), (long long)m->a,
                         nsp == 1   ? "L"
                         : nsp == 2 ? "H, W"
                                    : "D, H, W",
                         (long long)m->a,
                         nsp == 1   ? "L"
                         : nsp == 2 ? "H, W"
                                    : "D, H, W");
    cft_array *w = param(p, "weight", m), *y;
    if (m->transposed)
        y = nsp == 1   ? cft_conv_transpose1d(x, w, m->stride, m->padding, m->output_padding,
                                              m->dilation, m->groups)
            : nsp == 2 ? cft_conv_transpose2d(x, w, m->stride, m->padding, m->output_padding,
                                              m->dilation, m->groups)
                       : cft_conv_transpose3d(x, w, m->stride, m->padding, m->output_padding,
                                              m->dilation, m->groups);
    else
        y = nsp == 1   ? cft_conv1d(x, w, m->stride, m->padding, m->dilation, m->groups)
            : nsp == 2 ? cft_conv2d(x, w, m->stride, m->padding, m->dilation, m->groups)
                       : cft_conv3d(x, w, m->stride, m->padding, m->dilation, m->groups);
    if (!m->flag || cft_failed(y))
        return y;
    cft_array *b = param(p, "bias", m);
    if (cft_failed(b))
        return b;
    if (cft_array_ndim(b) != 1 || cft_array_dim(b, 0) != m->b)
        return cft__fail(CFT_E_SHAPE, "cft_module_apply: %s: bias is %s, need [%lld]", m->desc,
                         cft__nn_av(b), (long long)m->b);
    int64_t bs[4] = {m->b, 1, 1, 1};
    return cft_add(y, cft_reshape(b, bs, nsp + 1));
}

static cft_array *apply_layer(const cft_module *m, const cft_tree *p, const cft_tree *s,
                              cft_array *x, bool train, cft_array *key, cft_tree **ns) {
    *ns = (cft_tree *)s;
    switch (m->kind) {
    case CFT_M_LINEAR:
        return cft_linear(x, param(p, "weight", m), m->flag ? param(p, "bias", m) : NULL);
    case CFT_M_LAYER_NORM: {
        int nd = cft_array_ndim(x);
        bool ok = nd >= m->nshape;
        for (int i = 0; ok && i < m->nshape; i++)
            ok = cft_array_dim(x, nd - m->nshape + i) == m->shape[i];
        if (!ok)
            return cft__fail(CFT_E_SHAPE, "cft_module_apply: %s does not fit input %s", m->desc,
                             cft__nn_av(x));
        return cft_layer_norm(x, m->nshape, m->flag ? param(p, "weight", m) : NULL,
                              m->flag ? param(p, "bias", m) : NULL, m->eps);
    }
    case CFT_M_BATCH_NORM: {
        cft_array *rm = param(s, "running_mean", m), *rv = param(s, "running_var", m), *nm, *nv;
        cft_array *y = cft_batch_norm(x, rm, rv, m->flag ? param(p, "weight", m) : NULL,
                                      m->flag ? param(p, "bias", m) : NULL, train, m->momentum,
                                      m->eps, &nm, &nv);
        if (train && !cft_failed(y)) {
            cft_array *nbt = param(s, "num_batches_tracked", m);
            cft_tree *t = cft_tree_set(cft_tree_set(s, "running_mean", nm), "running_var", nv);
            *ns = cft_tree_set(t, "num_batches_tracked", cft_add(nbt, cft__nn_sc(nbt, 1)));
            if (cft_tree_failed(*ns))
                return cft_tree_error(*ns);
        }
        return y;
    }
    case CFT_M_DROPOUT:
        return cft_dropout(x, m->p, train, key);
    case CFT_M_EMBEDDING:
        return cft_embedding(x, param(p, "weight", m));
    case CFT_M_ACTIVATION:
        return cft_activation(x, m->act);
    case CFT_M_MHA:
        return cft_mha_apply(m, p, x, x, x, NULL, false);
    case CFT_M_CONV:
        return apply_conv(m, p, x);
    case CFT_M_MAX_POOL2D:
        return cft_max_pool2d(x, m->kernel, m->stride, m->padding, m->dilation);
    case CFT_M_AVG_POOL2D:
        return cft_avg_pool2d(x, m->kernel, m->stride, m->padding, m->flag);
    case CFT_M_FLATTEN:
        return cft_flatten(x, (int)m->a, (int)m->b);
    default:
        return cft__fail(CFT_E_ARG, "cft_module_apply: unknown module kind %d", m->kind);
    }
}

cft_array *cft_module_apply(const cft_module *m, const cft_tree *params, const cft_tree *state,
                            cft_array *x, bool train, cft_array *key, cft_tree **new_state) {
    CFT_API("cft_module_apply");
    cft_array *y = NULL;
    cft_tree *ns = NULL;
    if (!state)
        state = cft_tree_new();
    if (!m)
        y = cft__fail(CFT_E_ARG, "cft_module_apply: NULL module");
    else if (m->err)
        y = m->err;
    else if (!params)
        y = cft__fail(CFT_E_ARG, "cft_module_apply: NULL params");
    else if (cft_tree_failed(params))
        y = cft_tree_error(params);
    else if (cft_tree_failed(state))
        y = cft_tree_error(state);
    else if (!x)
        y = cft__fail(CFT_E_ARG, "cft_module_apply: NULL input");
    else if (cft_failed(x))
        y = x;
    else if (key && cft_failed(key))
        y = key;
    if (!y && m->kind != CFT_M_SEQUENTIAL) {
        y = apply_layer(m, params, state, x, train, key, &ns);
    } else if (!y) {
        ns = (cft_tree *)state;
        y = x;
        for (int i = 0; i < m->nlayers && !cft_failed(y); i++) {
            char name[16];
            snprintf(name, sizeof name, "%d", i);
            cft_tree *si;
            y = cft_module_apply(m->layers[i], cft_tree_subtree(params, name),
                                 cft_tree_subtree(state, name), y, train,
                                 key ? cft_random_fold_in(key, i) : NULL, &si);
            if (train && !cft_failed(y) && cft_tree_size(si))
                ns = cft_tree_merge(ns, name, si);
            if (cft_tree_failed(ns))
                y = cft_tree_error(ns);
        }
    }
    if (new_state)
        *new_state = cft_failed(y) ? cft__tree_err(y) : ns;
    return y;
}
