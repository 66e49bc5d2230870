/* Internal: conv_general_dilated's problem in a normalised form, shared by
 * its host implementation (conv.c) and its device kernel (conv_device.c). */
#ifndef CFT_PRIMS_CONV_GEOM_H
#define CFT_PRIMS_CONV_GEOM_H

#include "trace/prim.h"

#define CFT_CONV_MAXSP 3

/* spatial dims padded in front to 3 with size-1 dims that have no effect;
 * K = G * B groups of Oq output channels, Nq = N / B output samples */
typedef struct {
    int nsp;
    int64_t N, C, O, Ig, G, B, K, Oq, Nq, P, KK;
    int64_t in[CFT_CONV_MAXSP], k[CFT_CONV_MAXSP], out[CFT_CONV_MAXSP], s[CFT_CONV_MAXSP],
        lo[CFT_CONV_MAXSP], hi[CFT_CONV_MAXSP], ld[CFT_CONV_MAXSP], rd[CFT_CONV_MAXSP];
} cft_conv_geom;

/* the geometry of lhs a and rhs b under p; an error naming the primitive */
cft_array *cft__conv_geometry(const cft_aval *a, const cft_aval *b, const cft_params *p,
                              cft_conv_geom *g);

/* the convolution as one CUDA C kernel (the prim's dev_kernel) */
bool cft__conv_dev_kernel(cft_array *const *in, int nin, const cft_params *p, cft_array *const *out,
                          cft_dev_kernel *k);

/* its CUDA C (f32 and f64 kernels), for the NVRTC check of test_cuda_plugin */
const char *cft__conv_kernel_source(void);

#endif
