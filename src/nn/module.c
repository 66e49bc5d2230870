/* module.c: the module constructors (Linear, LayerNorm, BatchNorm, Dropout,
 * Embedding, activations, multi-head attention, Conv2d, MaxPool2d,
 * AvgPool2d, Flatten, Sequential, MLP), their
 * configuration checks and descriptions. A module holds hyperparameters
 * only; parameters and state live in trees (module_init.c, module_apply.c). */
#include <stdarg.h>
#include <stdio.h>

#include "core/error.h"
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
    CFT_API("cft_nn_linear");
    cft_module *m = make(CFT_M_LINEAR, "Linear(in=%lld, out=%lld, bias=%s)", (long long)in,
                         (long long)out, bias ? "true" : "false");
    m->a = in, m->b = out, m->flag = bias;
    return require(m,
                   in > 0 && out > 0 && in < CFT_DIM_MAX_CONCRETE && out < CFT_DIM_MAX_CONCRETE &&
                       in <= INT64_MAX / 8 / out,
                   "cft_nn_linear");
}

cft_module *cft_nn_layer_norm(const int64_t *shape, int nshape, double eps, bool affine) {
    CFT_API("cft_nn_layer_norm");
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
    CFT_API("cft_nn_batch_norm");
    cft_module *m =
        make(CFT_M_BATCH_NORM, "BatchNorm(features=%lld, eps=%g, momentum=%g, affine=%s)",
             (long long)num_features, eps, momentum, affine ? "true" : "false");
    m->a = num_features, m->eps = eps, m->momentum = momentum, m->flag = affine;
    return require(m, num_features > 0 && eps >= 0 && momentum >= 0 && momentum <= 1,
                   "cft_nn_batch_norm");
}

cft_module *cft_nn_dropout(double p) {
    CFT_API("cft_nn_dropout");
    cft_module *m = make(CFT_M_DROPOUT, "Dropout(p=%g)", p);
    m->p = p;
    return require(m, p >= 0 && p <= 1, "cft_nn_dropout");
}

cft_module *cft_nn_embedding(int64_t num, int64_t dim) {
    CFT_API("cft_nn_embedding");
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
    CFT_API("cft_nn_activation");
    cft_module *m = make(CFT_M_ACTIVATION, "%s", act_name(kind));
    m->act = kind;
    return require(m, (unsigned)kind <= CFT_ACT_SOFTPLUS, "cft_nn_activation");
}

cft_module *cft_nn_mha(int64_t embed_dim, int64_t num_heads, bool bias) {
    CFT_API("cft_nn_mha");
    cft_module *m = make(CFT_M_MHA, "MultiheadAttention(embed_dim=%lld, num_heads=%lld, bias=%s)",
                         (long long)embed_dim, (long long)num_heads, bias ? "true" : "false");
    m->a = embed_dim, m->b = num_heads, m->flag = bias;
    return require(m, embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, "cft_nn_mha");
}

/* copy 2 values (or the default d when v is NULL) into out; true if all >= lo */
static bool pair(int64_t *out, const int64_t *v, int64_t d, int64_t lo) {
    out[0] = v ? v[0] : d, out[1] = v ? v[1] : d;
    return out[0] >= lo && out[1] >= lo;
}

/* copy nsp values (or the default d when v is NULL) into out, as "[a,b]" into txt;
 * true if all >= lo */
static bool vals(int nsp, int64_t *out, const int64_t *v, int64_t d, int64_t lo, char *txt,
                 size_t cap) {
    bool ok = true;
    size_t w = (size_t)snprintf(txt, cap, "[");
    for (int i = 0; i < nsp; i++) {
        out[i] = v ? v[i] : d;
        ok = ok && out[i] >= lo;
        w += (size_t)snprintf(txt + w, w < cap ? cap - w : 0, "%s%lld", i ? "," : "",
                              (long long)out[i]);
    }
    snprintf(txt + w, w < cap ? cap - w : 0, "]");
    return ok;
}

/* Conv1d/2d/3d and ConvTranspose1d/2d/3d, PyTorch's arguments and names */
static cft_module *conv_module(const char *call, int nsp, bool transposed, int64_t in, int64_t out,
                               const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                               const int64_t *output_padding, const int64_t *dilation,
                               int64_t groups, bool bias) {
    int64_t k[3] = {0, 0, 0}, s[3], p[3], op[3] = {0, 0, 0}, d[3];
    char tk[64] = "[]", ts[64], tp[64], top[96] = "", td[64];
    bool ok = kernel && vals(nsp, k, kernel, 0, 1, tk, sizeof tk);
    ok = vals(nsp, s, stride, 1, 1, ts, sizeof ts) && ok;
    ok = vals(nsp, p, padding, 0, 0, tp, sizeof tp) && ok;
    ok = vals(nsp, d, dilation, 1, 1, td, sizeof td) && ok;
    if (transposed) {
        char t[64];
        ok = vals(nsp, op, output_padding, 0, 0, t, sizeof t) && ok;
        for (int i = 0; i < nsp; i++) /* PyTorch: smaller than the stride or the dilation */
            ok = ok && (op[i] < s[i] || op[i] < d[i]);
        snprintf(top, sizeof top, ", output_padding=%s", t);
    }
    ok = ok && in > 0 && out > 0 && groups > 0 && in % groups == 0 && out % groups == 0;
    cft_module *m = make(CFT_M_CONV,
                         "%s%dd(in=%lld, out=%lld, kernel=%s, stride=%s, padding=%s%s, "
                         "dilation=%s, groups=%lld, bias=%s)",
                         transposed ? "ConvTranspose" : "Conv", nsp, (long long)in, (long long)out,
                         tk, ts, tp, top, td, (long long)groups, bias ? "true" : "false");
    m->a = in, m->b = out, m->groups = groups, m->flag = bias;
    m->nsp = nsp, m->transposed = transposed;
    for (int i = 0; i < nsp; i++)
        m->kernel[i] = k[i], m->stride[i] = s[i], m->padding[i] = p[i], m->dilation[i] = d[i],
        m->output_padding[i] = op[i];
    return require(m, ok, call);
}

cft_module *cft_nn_conv1d(int64_t in, int64_t out, const int64_t *kernel, const int64_t *stride,
                          const int64_t *padding, const int64_t *dilation, int64_t groups,
                          bool bias) {
    CFT_API("cft_nn_conv1d");
    return conv_module("cft_nn_conv1d", 1, false, in, out, kernel, stride, padding, NULL, dilation,
                       groups, bias);
}
cft_module *cft_nn_conv2d(int64_t in, int64_t out, const int64_t *kernel, const int64_t *stride,
                          const int64_t *padding, const int64_t *dilation, int64_t groups,
                          bool bias) {
    CFT_API("cft_nn_conv2d");
    return conv_module("cft_nn_conv2d", 2, false, in, out, kernel, stride, padding, NULL, dilation,
                       groups, bias);
}
cft_module *cft_nn_conv3d(int64_t in, int64_t out, const int64_t *kernel, const int64_t *stride,
                          const int64_t *padding, const int64_t *dilation, int64_t groups,
                          bool bias) {
    CFT_API("cft_nn_conv3d");
    return conv_module("cft_nn_conv3d", 3, false, in, out, kernel, stride, padding, NULL, dilation,
                       groups, bias);
}
cft_module *cft_nn_conv_transpose1d(int64_t in, int64_t out, const int64_t *kernel,
                                    const int64_t *stride, const int64_t *padding,
                                    const int64_t *output_padding, const int64_t *dilation,
                                    int64_t groups, bool bias) {
    CFT_API("cft_nn_conv_transpose1d");
    return conv_module("cft_nn_conv_transpose1d", 1, true, in, out, kernel, stride, padding,
                       output_padding, dilation, groups, bias);
}
cft_module *cft_nn_conv_transpose2d(int64_t in, int64_t out, const int64_t *kernel,
                                    const int64_t *stride, const int64_t *padding,
                                    const int64_t *output_padding, const int64_t *dilation,
                                    int64_t groups, bool bias) {
    CFT_API("cft_nn_conv_transpose2d");
    return conv_module("cft_nn_conv_transpose2d", 2, true, in, out, kernel, stride, padding,
                       output_padding, dilation, groups, bias);
}
cft_module *cft_nn_conv_transpose3d(int64_t in, int64_t out, const int64_t *kernel,
                                    const int64_t *stride, const int64_t *padding,
                                    const int64_t *output_padding, const int64_t *dilation,
                                    int64_t groups, bool bias) {
    CFT_API("cft_nn_conv_transpose3d");
    return conv_module("cft_nn_conv_transpose3d", 3, true, in, out, kernel, stride, padding,
                       output_padding, dilation, groups, bias);
}

/* MaxPool2d / AvgPool2d: stride defaults to the kernel, padding to 0 (at
 * most kernel/2, as PyTorch), dilation to 1 */
static cft_module *pool(int kind, const char *name, const int64_t *kernel, const int64_t *stride,
                        const int64_t *padding, const int64_t *dilation, bool count_include_pad) {
    int64_t k[2] = {0, 0}, s[2], p[2], d[2];
    bool ok = kernel && pair(k, kernel, 0, 1);
    ok = (stride ? pair(s, stride, 1, 1) : pair(s, k, 1, 1)) && ok;
    ok = pair(p, padding, 0, 0) && ok;
    ok = pair(d, dilation, 1, 1) && ok;
    ok = ok && 2 * p[0] <= k[0] && 2 * p[1] <= k[1];
    cft_module *m;
    if (kind == CFT_M_MAX_POOL2D)
        m = make(kind,
                 "MaxPool2d(kernel=[%lld,%lld], stride=[%lld,%lld], padding=[%lld,%lld], "
                 "dilation=[%lld,%lld])",
                 (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1],
                 (long long)p[0], (long long)p[1], (long long)d[0], (long long)d[1]);
    else
        m = make(kind,
                 "AvgPool2d(kernel=[%lld,%lld], stride=[%lld,%lld], padding=[%lld,%lld], "
                 "count_include_pad=%s)",
                 (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1],
                 (long long)p[0], (long long)p[1], count_include_pad ? "true" : "false");
    m->flag = count_include_pad;
    for (int i = 0; i < 2; i++)
        m->kernel[i] = k[i], m->stride[i] = s[i], m->padding[i] = p[i], m->dilation[i] = d[i];
    return require(m, ok, name);
}

cft_module *cft_nn_max_pool2d(const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                              const int64_t *dilation) {
    CFT_API("cft_nn_max_pool2d");
    return pool(CFT_M_MAX_POOL2D, "cft_nn_max_pool2d", kernel, stride, padding, dilation, false);
}

cft_module *cft_nn_avg_pool2d(const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                              bool count_include_pad) {
    CFT_API("cft_nn_avg_pool2d");
    return pool(CFT_M_AVG_POOL2D, "cft_nn_avg_pool2d", kernel, stride, padding, NULL,
                count_include_pad);
}

cft_module *cft_nn_flatten(int start_dim, int end_dim) {
    CFT_API("cft_nn_flatten");
    cft_module *m = make(CFT_M_FLATTEN, "Flatten(start_dim=%d, end_dim=%d)", start_dim, end_dim);
    m->a = start_dim, m->b = end_dim;
    /* the dims are checked against the input's rank when applied; here
     * only a pair that is wrong for every rank is refused */
    return require(m,
                   !(start_dim >= 0 && end_dim >= 0 && start_dim > end_dim) &&
                       !(start_dim < 0 && end_dim < 0 && start_dim > end_dim),
                   "cft_nn_flatten");
}

cft_module *cft_nn_sequential(cft_module *const *layers, int n) {
    CFT_API("cft_nn_sequential");
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
    CFT_API("cft_nn_mlp");
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
    CFT_API("cft_module_describe");
    return m ? m->desc : "(NULL module)";
}
