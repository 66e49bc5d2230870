/* cnn.h: the CNN of the benchmarks (per_sample_grads, dp_sgd): conv 3x3
 * (1 -> 8 channels, no padding) -> relu -> linear (8*6*6 -> 10) on the
 * digits as 1x8x8 images, mean cross-entropy. Params as PyTorch's Conv2d /
 * Linear defaults: U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
#ifndef CFT_BENCH_CNN_H
#define CFT_BENCH_CNN_H

#include <math.h>
#include <stdbool.h>

#include "cft/cft.h"

enum { CNN_NPARAMS = 4 };

/* logits of (w1 [8,1,3,3], b1 [8], w2 [288,10], b2 [10]) at x [1,8,8] or [B,1,8,8] */
static inline cft_array *cnn_logits(cft_array *const *p, cft_array *x) {
    bool single = cft_array_ndim(x) == 3;
    cft_array *h = cft_conv2d(x, p[0], NULL, NULL, NULL, 1);
    h = cft_relu(cft_add(h, cft_reshape(p[1], (int64_t[]){8, 1, 1}, 3)));
    h = single ? cft_reshape(h, (int64_t[]){288}, 1) : cft_reshape(h, (int64_t[]){-1, 288}, 2);
    return cft_add(cft_matmul(h, p[2]), p[3]);
}

/* (w1, b1, w2, b2, x [1,8,8] or [B,1,8,8], y [] or [B]) -> mean CE */
static inline cft_status cnn_loss(void *env, int nin, cft_array *const *in, int nout,
                                  cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mean(cft_cross_entropy(cnn_logits(in, in[4]), in[5]), NULL, 0, false);
    return CFT_OK;
}

static inline void cnn_init(cft_array **p) {
    cft_array *keys = cft_random_split(cft_random_key(7), 4);
    double b1 = 1.0 / 3.0, b2 = 1.0 / sqrt(288.0); /* 1/sqrt(fan_in) */
    p[0] = cft_random_uniform(cft_index(keys, 0), CFT_F32, (int64_t[]){8, 1, 3, 3}, 4, -b1, b1);
    p[1] = cft_random_uniform(cft_index(keys, 1), CFT_F32, (int64_t[]){8}, 1, -b1, b1);
    p[2] = cft_random_uniform(cft_index(keys, 2), CFT_F32, (int64_t[]){288, 10}, 2, -b2, b2);
    p[3] = cft_random_uniform(cft_index(keys, 3), CFT_F32, (int64_t[]){10}, 1, -b2, b2);
}

#endif
