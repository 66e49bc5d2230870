/* Internal: conv_general_dilated's kernels on oneDNN (conv_dnnl.c). */
#ifndef CFT_CONV_DNNL_H
#define CFT_CONV_DNNL_H

#include <stdbool.h>
#include <stdint.h>

/* Run the convolution on oneDNN, row-major buffers x [N, C, in...],
 * w [O, I, k...], y [N, O, out...], all of one dtype: 0 f32, 1 bf16,
 * 2 f16 (those two accumulate in f32); or 3, int8: x u8, w s8 and y the
 * int32 sums [N, O, out...], with padding read as 0 (one
 * group, no weight gradient). geometry: nsp, N, C, O, I, G, then
 * per spatial dim (3 slots each, the first nsp used): in, k, strides,
 * padding lo, padding hi, rhs dilation; then 0, or 1 for a weight gradient
 * (w [O, I, k...] stored I-major, as [I, O, k...], written from x and the
 * output cotangent in y): 25 values. False (nothing written) when oneDNN
 * is not built in, is turned off (CFT_CONV_DNNL=0) or declines. */
bool cft__conv_dnnl(const int64_t *geometry, int dtype, void *x, void *w, void *y);

#endif
