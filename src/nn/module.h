/* Internal: the module record shared by the module files (module.c makes
 * and describes modules, module_init.c initialises their parameters and
 * state, module_apply.c applies them). */
#ifndef CFT_NN_MODULE_H
#define CFT_NN_MODULE_H

#include "nn/nn_internal.h"

enum {
    CFT_M_LINEAR,
    CFT_M_LAYER_NORM,
    CFT_M_BATCH_NORM,
    CFT_M_DROPOUT,
    CFT_M_EMBEDDING,
    CFT_M_ACTIVATION,
    CFT_M_MHA,
    CFT_M_CONV, /* Conv1d/2d/3d and ConvTranspose1d/2d/3d (nsp, transposed) */
    CFT_M_MAX_POOL2D,
    CFT_M_AVG_POOL2D,
    CFT_M_FLATTEN,
    CFT_M_SEQUENTIAL
};

struct cft_module {
    int kind;
    cft_array *err; /* a bad configuration: init and apply return it */
    int64_t a, b;   /* Linear / Conv2d in/out, BatchNorm features, Embedding num/dim, MHA
                       embed/heads, Flatten start/end dims */
    bool flag;      /* Linear / MHA / Conv2d bias, LayerNorm / BatchNorm affine, AvgPool2d
                       count_include_pad */
    /* Conv and pooling: kernel, stride, padding, dilation (nsp values; 2 for pooling),
     * ConvTranspose's output_padding, Conv groups */
    int64_t kernel[3], stride[3], padding[3], dilation[3], output_padding[3], groups;
    int nsp;                     /* Conv: spatial dims, 1 to 3 */
    bool transposed;             /* Conv: ConvTranspose (weight [in, out/groups, *kernel]) */
    int64_t shape[CFT_MAX_NDIM]; /* LayerNorm normalised shape */
    int nshape;
    double eps, momentum, p;
    cft_activation_kind act;
    cft_module **layers; /* Sequential */
    int nlayers;
    const char *desc;
};

#endif
