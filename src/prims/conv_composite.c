/* conv_composite.c: PyTorch's convolution conveniences on top of
 * conv_general_dilated: conv1d/2d/3d (symmetric padding, an optional
 * unbatched input) and conv_transpose1d/2d/3d, a convolution of the input
 * dilated by the stride with the kernel flipped and its channel roles
 * swapped per group, padded by dilation*(k-1) - padding on each side
 * (plus output_padding at the end). Built from primitives, so every
 * transform applies. */
#include "core/error.h"
#include "prims/rules.h"

/* x [N, C, *sp] or [C, *sp]: the batched form, and whether it was added */
static cft_array *batched(const char *call, cft_array *x, cft_array *w, int nsp, bool *added,
                          const char *layout) {
    int nd = x->aval.ndim;
    if ((nd != nsp + 1 && nd != nsp + 2) || w->aval.ndim != nsp + 2)
        return cft__fail(CFT_E_SHAPE, "%s: input %s must be [N, C, %s] or [C, %s] and weight %s %s",
                         call, cft__av(&x->aval),
                         nsp == 1   ? "L"
                         : nsp == 2 ? "H, W"
                                    : "D, H, W",
                         nsp == 1   ? "L"
                         : nsp == 2 ? "H, W"
                                    : "D, H, W",
                         cft__av(&w->aval), layout);
    *added = nd == nsp + 1;
    return *added ? cft_expand_dims(x, 0) : x;
}

static cft_array *conv_nd(const char *call, int nsp, cft_array *x, cft_array *w,
                          const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                          int64_t groups) {
    CFT_PROPAGATE(call, x, w);
    bool added;
    cft_array *xb = batched(call, x, w, nsp, &added, "[O, C/groups, *kernel]");
    if (cft_failed(xb))
        return xb;
    int64_t pad[2 * CFT_MAX_NDIM];
    for (int i = 0; i < nsp; i++) {
        int64_t v = padding ? padding[i] : 0;
        if (v < 0)
            return cft__fail(CFT_E_ARG, "%s: negative padding %lld for %s", call, (long long)v,
                             cft__av(&x->aval));
        pad[2 * i] = pad[2 * i + 1] = v;
    }
    cft_array *y = cft_conv_general_dilated(xb, w, stride, pad, NULL, dilation, groups, 1);
    return added ? cft_squeeze(y, (int[]){0}, 1) : y;
}

cft_array *cft_conv1d(cft_array *x, cft_array *w, const int64_t *stride, const int64_t *padding,
                      const int64_t *dilation, int64_t groups) {
    return conv_nd("cft_conv1d", 1, x, w, stride, padding, dilation, groups);
}
cft_array *cft_conv2d(cft_array *x, cft_array *w, const int64_t *stride, const int64_t *padding,
                      const int64_t *dilation, int64_t groups) {
    return conv_nd("cft_conv2d", 2, x, w, stride, padding, dilation, groups);
}
cft_array *cft_conv3d(cft_array *x, cft_array *w, const int64_t *stride, const int64_t *padding,
                      const int64_t *dilation, int64_t groups) {
    return conv_nd("cft_conv3d", 3, x, w, stride, padding, dilation, groups);
}

static cft_array *conv_transpose_nd(const char *call, int nsp, cft_array *x, cft_array *w,
                                    const int64_t *stride, const int64_t *padding,
                                    const int64_t *output_padding, const int64_t *dilation,
                                    int64_t groups) {
    CFT_PROPAGATE(call, x, w);
    bool added;
    cft_array *xb = batched(call, x, w, nsp, &added, "[C, O/groups, *kernel]");
    if (cft_failed(xb))
        return xb;
    int64_t C = xb->aval.shape[1];
    if (groups < 1 || C % groups || w->aval.shape[0] != C)
        return cft__fail(CFT_E_SHAPE,
                         "%s: weight %s needs [C, O/groups, *kernel] with C = %lld input "
                         "channels divisible by groups = %lld",
                         call, cft__av(&w->aval), (long long)C, (long long)groups);
    int64_t s[CFT_MAX_NDIM], d[CFT_MAX_NDIM], pad[2 * CFT_MAX_NDIM];
    for (int i = 0; i < nsp; i++) {
        s[i] = stride ? stride[i] : 1, d[i] = dilation ? dilation[i] : 1;
        int64_t p = padding ? padding[i] : 0, op = output_padding ? output_padding[i] : 0;
        int64_t k = w->aval.shape[2 + i];
        if (s[i] < 1 || d[i] < 1 || p < 0 || op < 0 || (op >= s[i] && op >= d[i]))
            return cft__fail(CFT_E_ARG,
                             "%s: stride %lld, dilation %lld, padding %lld, output_padding %lld "
                             "in spatial dim %d (output_padding must be smaller than the "
                             "stride or the dilation)",
                             call, (long long)s[i], (long long)d[i], (long long)p, (long long)op,
                             i);
        pad[2 * i] = d[i] * (k - 1) - p;
        pad[2 * i + 1] = d[i] * (k - 1) - p + op;
    }
    /* [C, O/G, *k] -> [G, C/G, O/G, *k] -> [G, O/G, C/G, *k] -> [O, C/G, *k], flipped */
    int64_t og = w->aval.shape[1], shape[CFT_MAX_NDIM + 1] = {groups, C / groups, og};
    int perm[CFT_MAX_NDIM + 1] = {0, 2, 1}, flip[CFT_MAX_NDIM];
    for (int i = 0; i < nsp; i++) {
        shape[3 + i] = w->aval.shape[2 + i];
        perm[3 + i] = 3 + i;
        flip[i] = 2 + i;
    }
    cft_array *wt = cft_transpose(cft_reshape(w, shape, nsp + 3), perm);
    int64_t oshape[CFT_MAX_NDIM] = {groups * og, C / groups};
    for (int i = 0; i < nsp; i++)
        oshape[2 + i] = w->aval.shape[2 + i];
    wt = cft_flip(cft_reshape(wt, oshape, nsp + 2), flip, nsp);
    cft_array *y = cft_conv_general_dilated(xb, wt, NULL, pad, s, d, groups, 1);
    return added ? cft_squeeze(y, (int[]){0}, 1) : y;
}

cft_array *cft_conv_transpose1d(cft_array *x, cft_array *w, const int64_t *stride,
                                const int64_t *padding, const int64_t *output_padding,
                                const int64_t *dilation, int64_t groups) {
    return conv_transpose_nd("cft_conv_transpose1d", 1, x, w, stride, padding, output_padding,
                             dilation, groups);
}
cft_array *cft_conv_transpose2d(cft_array *x, cft_array *w, const int64_t *stride,
                                const int64_t *padding, const int64_t *output_padding,
                                const int64_t *dilation, int64_t groups) {
    return conv_transpose_nd("cft_conv_transpose2d", 2, x, w, stride, padding, output_padding,
                             dilation, groups);
}
cft_array *cft_conv_transpose3d(cft_array *x, cft_array *w, const int64_t *stride,
                                const int64_t *padding, const int64_t *output_padding,
                                const int64_t *dilation, int64_t groups) {
    return conv_transpose_nd("cft_conv_transpose3d", 3, x, w, stride, padding, output_padding,
                             dilation, groups);
}
