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
    CFT_M_SEQUENTIAL
};

struct cft_module {
    int kind;
    cft_array *err; /* a bad configuration: init and apply return it */
    int64_t a, b;   /* Linear in/out, BatchNorm features, Embedding num/dim, MHA embed/heads */
    bool flag;      /* Linear / MHA bias, LayerNorm / BatchNorm affine */
    int64_t shape[CFT_MAX_NDIM]; /* LayerNorm normalised shape */
    int nshape;
    double eps, momentum, p;
    cft_activation_kind act;
    cft_module **layers; /* Sequential */
    int nlayers;
    const char *desc;
};

#endif
