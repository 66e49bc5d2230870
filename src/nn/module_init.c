/* module_init.c: fresh parameters and state of a module from a key, with
 * PyTorch's default initialisations: Linear weight and bias U(-1/sqrt(in),
 * 1/sqrt(in)); Embedding N(0, 1); LayerNorm / BatchNorm ones and zeros;
 * BatchNorm running statistics zeros / ones and num_batches_tracked 0;
 * MultiheadAttention in_proj_weight xavier_uniform, biases zero,
 * out_proj.weight as Linear; Conv2d weight and bias U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) with fan_in = in/groups * kH * kW. */
#include <math.h>

#include "core/error.h"
#include "nn/module.h"

static cft_array *uniform(cft_array *key, int64_t r, int64_t c, int nd, double bound) {
    int64_t shape[2] = {r, c};
    return cft_random_uniform(key, CFT_F32, shape, nd, -bound, bound);
}

static cft_tree *init_layer(const cft_module *m, cft_array *key, cft_tree **state) {
    cft_tree *p = cft_tree_new();
    *state = cft_tree_new();
    bool needs_key = m->kind == CFT_M_LINEAR || m->kind == CFT_M_EMBEDDING ||
                     m->kind == CFT_M_MHA || m->kind == CFT_M_CONV;
    if (needs_key && !key)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_module_init: %s needs a key", m->desc));
    if (needs_key && cft_failed(key))
        return cft__tree_err(key);
    switch (m->kind) {
    case CFT_M_LINEAR: {
        cft_array *keys = cft_random_split(key, 2);
        double bound = 1 / sqrt((double)m->a);
        p = cft_tree_set(p, "weight", uniform(cft_index(keys, 0), m->b, m->a, 2, bound));
        if (m->flag)
            p = cft_tree_set(p, "bias", uniform(cft_index(keys, 1), m->b, 0, 1, bound));
        return p;
    }
    case CFT_M_LAYER_NORM:
        if (!m->flag)
            return p;
        p = cft_tree_set(p, "weight", cft_ones(CFT_F32, m->shape, m->nshape));
        return cft_tree_set(p, "bias", cft_zeros(CFT_F32, m->shape, m->nshape));
    case CFT_M_BATCH_NORM:
        if (m->flag) {
            p = cft_tree_set(p, "weight", cft_ones(CFT_F32, &m->a, 1));
            p = cft_tree_set(p, "bias", cft_zeros(CFT_F32, &m->a, 1));
        }
        *state = cft_tree_set(*state, "running_mean", cft_zeros(CFT_F32, &m->a, 1));
        *state = cft_tree_set(*state, "running_var", cft_ones(CFT_F32, &m->a, 1));
        *state = cft_tree_set(*state, "num_batches_tracked", cft_scalar(0, CFT_I64));
        return p;
    case CFT_M_EMBEDDING:
        return cft_tree_set(p, "weight",
                            cft_random_normal(key, CFT_F32, (int64_t[]){m->a, m->b}, 2));
    case CFT_M_MHA: {
        int64_t E = m->a;
        cft_array *keys = cft_random_split(key, 2);
        p = cft_tree_set(p, "in_proj_weight",
                         uniform(cft_index(keys, 0), 3 * E, E, 2, sqrt(6.0 / (double)(4 * E))));
        if (m->flag)
            p = cft_tree_set(p, "in_proj_bias", cft_zeros(CFT_F32, (int64_t[]){3 * E}, 1));
        p = cft_tree_set(p, "out_proj.weight",
                         uniform(cft_index(keys, 1), E, E, 2, 1 / sqrt((double)E)));
        if (m->flag)
            p = cft_tree_set(p, "out_proj.bias", cft_zeros(CFT_F32, &m->a, 1));
        return p;
    }
    case CFT_M_CONV: {
        /* kaiming_uniform(a=sqrt(5)): gain sqrt(1/3) * sqrt(3 / fan_in), fan_in from the
         * weight's dim 1 (PyTorch's rule: in/groups for Conv, out/groups for
         * ConvTranspose) times the kernel */
        int64_t shape[5] = {m->transposed ? m->a : m->b,
                            m->transposed ? m->b / m->groups : m->a / m->groups};
        int64_t fan_in = shape[1];
        for (int i = 0; i < m->nsp; i++)
            shape[2 + i] = m->kernel[i], fan_in *= m->kernel[i];
        double bound = 1 / sqrt((double)fan_in);
        cft_array *keys = cft_random_split(key, 2);
        p = cft_tree_set(
            p, "weight",
            cft_random_uniform(cft_index(keys, 0), CFT_F32, shape, m->nsp + 2, -bound, bound));
        if (m->flag)
            p = cft_tree_set(p, "bias", uniform(cft_index(keys, 1), m->b, 0, 1, bound));
        return p;
    }
    default: /* Dropout, activations, pooling, Flatten: nothing */
        return p;
    }
}

cft_tree *cft_module_init(const cft_module *m, cft_array *key, cft_tree **state) {
    CFT_API("cft_module_init");
    cft_tree *st = NULL, *p;
    if (!m)
        p = cft__tree_err(cft__fail(CFT_E_ARG, "cft_module_init: NULL module"));
    else if (m->err)
        p = cft__tree_err(m->err);
    else if (m->kind != CFT_M_SEQUENTIAL)
        p = init_layer(m, key, &st);
    else {
        p = cft_tree_new();
        st = cft_tree_new();
        cft_array *keys = key && !cft_failed(key) ? cft_random_split(key, m->nlayers) : key;
        for (int i = 0; i < m->nlayers && !p->err && !st->err; i++) {
            char name[16];
            snprintf(name, sizeof name, "%d", i);
            cft_tree *si;
            cft_tree *pi = cft_module_init(m->layers[i], keys ? cft_index(keys, i) : NULL, &si);
            p = cft_tree_merge(p, name, pi);
            st = cft_tree_merge(st, name, si);
        }
        if (st->err && !p->err)
            p = st;
    }
    if (state)
        *state = p->err ? p : (st ? st : cft_tree_new());
    return p;
}
