/* module.c: the module constructors (Linear, LayerNorm, BatchNorm, Dropout,
 * Embedding, activations, multi-head attention, Sequential, MLP), their
 * configuration checks and descriptions. A module holds hyperparameters
 * only; parameters and state live in trees (module_init.c, module_apply.c). */
#include <stdarg.h>
#include <stdio.h>

#include "nn/module.h"

static cft_module *make(int kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cft_module *make(int kind, const char *fmt, ...) {
    static cft_module oom_module;
    cft_module *m = CFT_NEW(cft_module);
    if (!m) {
        oom_module.err = cft__oom();
        oom_module.desc = "(out of memory)";
        return &oom_module;
    }
    m->kind = kind;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    m->desc = cft__strdup(buf);
    if (!m->desc)
        m->err = cft__oom(), m->desc = "";
    return m;
}

/* mark m bad unless ok, with a message naming the constructor */
static cft_module *require(cft_module *m, bool ok, const char *op) {
    if (!ok && !m->err)
        m->err = cft__fail(CFT_E_ARG, "%s: bad configuration %s", op, m->desc);
    return m;
}

cft_module *cft_nn_linear(int64_t in, int64_t out, bool bias) {
    cft_module *m = make(CFT_M_LINEAR, "Linear(in=%lld, out=%lld, bias=%s)", (long long)in,
                         (long long)out, bias ? "true" : "false");
    m->a = in, m->b = out, m->flag = bias;
    return require(m, in > 0 && out > 0, "cft_nn_linear");
}

cft_module *cft_nn_layer_norm(const int64_t *shape, int nshape, double eps, bool affine) {
    char dims[160] = "";
    int len = 0;
    bool ok = shape && nshape >= 1 && nshape <= CFT_MAX_NDIM && eps >= 0;
    for (int i = 0; ok && i < nshape; i++) {
        ok = shape[i] > 0;
        len += snprintf(dims + len, sizeof dims - (size_t)len, "%s%lld", i ? "," : "",
                        (long long)shape[i]);
        if (len >= (int)sizeof dims)
            len = (int)sizeof dims - 1;
    }
    cft_module *m = make(CFT_M_LAYER_NORM, "LayerNorm(shape=[%s], eps=%g, affine=%s)", dims, eps,
                         affine ? "true" : "false");
    m->nshape = ok ? nshape : 0;
    for (int i = 0; i < m->nshape; i++)
        m->shape[i] = shape[i];
    m->eps = eps, m->flag = affine;
    return require(m, ok, "cft_nn_layer_norm");
}

cft_module *cft_nn_batch_norm(int64_t num_features, double eps, double momentum, bool affine) {
    cft_module *m =
        make(CFT_M_BATCH_NORM, "BatchNorm(features=%lld, eps=%g, momentum=%g, affine=%s)",
             (long long)num_features, eps, momentum, affine ? "true" : "false");
    m->a = num_features, m->eps = eps, m->momentum = momentum, m->flag = affine;
    return require(m, num_features > 0 && eps >= 0 && momentum >= 0 && momentum <= 1,
                   "cft_nn_batch_norm");
}

cft_module *cft_nn_dropout(double p) {
    cft_module *m = make(CFT_M_DROPOUT, "Dropout(p=%g)", p);
    m->p = p;
    return require(m, p >= 0 && p <= 1, "cft_nn_dropout");
}

cft_module *cft_nn_embedding(int64_t num, int64_t dim) {
    cft_module *m =
        make(CFT_M_EMBEDDING, "Embedding(num=%lld, dim=%lld)", (long long)num, (long long)dim);
    m->a = num, m->b = dim;
    return require(m, num > 0 && dim > 0, "cft_nn_embedding");
}

static const char *act_name(cft_activation_kind k) {
    static const char *names[] = {"Identity", "ReLU", "GELU",    "GELU(tanh)",
                                  "SiLU",     "Tanh", "Sigmoid", "Softplus"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

cft_module *cft_nn_activation(cft_activation_kind kind) {
    cft_module *m = make(CFT_M_ACTIVATION, "%s", act_name(kind));
    m->act = kind;
    return require(m, (unsigned)kind <= CFT_ACT_SOFTPLUS, "cft_nn_activation");
}

cft_module *cft_nn_mha(int64_t embed_dim, int64_t num_heads, bool bias) {
    cft_module *m = make(CFT_M_MHA, "MultiheadAttention(embed_dim=%lld, num_heads=%lld, bias=%s)",
                         (long long)embed_dim, (long long)num_heads, bias ? "true" : "false");
    m->a = embed_dim, m->b = num_heads, m->flag = bias;
    return require(m, embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, "cft_nn_mha");
}

cft_module *cft_nn_sequential(cft_module *const *layers, int n) {
    cft_module *m = make(CFT_M_SEQUENTIAL, "Sequential(%d layers)", n);
    if (m->err)
        return m;
    if (!layers || n < 1)
        return require(m, false, "cft_nn_sequential");
    m->layers = CFT_NEWN(cft_module *, n);
    if (!m->layers) {
        m->err = cft__oom();
        return m;
    }
    m->nlayers = n;
    for (int i = 0; i < n; i++) {
        m->layers[i] = layers[i];
        if (!layers[i])
            return require(m, false, "cft_nn_sequential");
        if (layers[i]->err && !m->err)
            m->err = layers[i]->err;
    }
    return m;
}

cft_module *cft_nn_mlp(const int64_t *sizes, int nsizes, cft_activation_kind act, double dropout) {
    if (!sizes || nsizes < 2 || !(dropout >= 0 && dropout <= 1)) {
        cft_module *m = make(CFT_M_SEQUENTIAL, "MLP(%d sizes, dropout=%g)", nsizes, dropout);
        return require(m, false, "cft_nn_mlp");
    }
    int per = dropout > 0 ? 3 : 2, n = (nsizes - 2) * per + 1;
    cft_module **layers = CFT_NEWN(cft_module *, n);
    if (!layers)
        return cft_nn_sequential(NULL, 0);
    int k = 0;
    for (int i = 0; i + 1 < nsizes; i++) {
        layers[k++] = cft_nn_linear(sizes[i], sizes[i + 1], true);
        if (i + 2 < nsizes) {
            layers[k++] = cft_nn_activation(act);
            if (dropout > 0)
                layers[k++] = cft_nn_dropout(dropout);
        }
    }
    return cft_nn_sequential(layers, k);
}

const char *cft_module_describe(const cft_module *m) {
    return m ? m->desc : "(NULL module)";
}
