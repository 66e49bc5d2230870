/* fft_map.h: the fft primitive on contiguous operands as one batched
 * transform, as cuFFT's cufftPlanMany (and FFTW's plan_many) describe it:
 * the trailing `rank` axes transformed, the leading ones a batch of
 * contiguous transforms, then the result scaled by N^(-k/2). Shared by the
 * CUDA backend (cuFFT) and the test backend (tests/support), which runs
 * the same description with FFTW on its own memory, so every fft of the
 * per-primitive tests checks it without a GPU. */
#ifndef CFT_FFT_MAP_H
#define CFT_FFT_MAP_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "array/device_plugin.h"

enum { CFT_FFT_C2C_FWD, CFT_FFT_C2C_BWD, CFT_FFT_R2C, CFT_FFT_C2R };

typedef struct {
    int type;          /* CFT_FFT_* (the primitive's #fft_type) */
    bool dbl;          /* f64 / c128 */
    int rank;          /* 1 to 3 */
    int n[3];          /* the logical sizes (c2r: of the real output) */
    int64_t batch;     /* transforms */
    int64_t idist;     /* elements of one transform's input */
    int64_t odist;     /* and of its output */
    int64_t out_numel; /* batch * odist */
    double scale;      /* applied to the output; 1: none */
} cft_fft_desc;

static inline bool cft_fft_map_op(const cft_dev_op_api *api, const cft_dev_op *op,
                                  cft_fft_desc *d) {
    int64_t type, len[3], scale;
    if (strcmp(api->name(op), "fft") || api->nin(op) != 1)
        return false;
    int r = api->param(op, "fft_lengths", len, 3);
    if (api->param(op, "fft_type", &type, 1) != 1 || api->param(op, "scale", &scale, 1) != 1 ||
        r < 1 || r > 3 || type < 0 || type > 3 || scale < 0 || scale > 2)
        return false;
    cft_dev_buf x = api->in(op, 0), y = api->out(op, 0);
    if (x.aval.ndim < r)
        return false;
    cft_dtype re = type == CFT_FFT_R2C ? x.aval.dtype : y.aval.dtype;
    if (type != CFT_FFT_R2C && type != CFT_FFT_C2R)
        re = x.aval.dtype == CFT_C64 ? CFT_F32 : x.aval.dtype == CFT_C128 ? CFT_F64 : CFT_I32;
    if (re != CFT_F32 && re != CFT_F64)
        return false;
    d->type = (int)type, d->dbl = re == CFT_F64, d->rank = r;
    int64_t N = 1, half = 1;
    for (int i = 0; i < r; i++) {
        if (len[i] < 1 || len[i] > INT32_MAX)
            return false;
        d->n[i] = (int)len[i];
        N *= len[i];
        half *= i == r - 1 ? len[i] / 2 + 1 : len[i];
    }
    int nb = x.aval.ndim - r;
    d->batch = 1;
    for (int i = 0; i < nb; i++)
        d->batch *= x.aval.shape[i];
    d->idist = type == CFT_FFT_C2R ? half : N;
    d->odist = type == CFT_FFT_R2C ? half : N;
    d->out_numel = d->batch * d->odist;
    d->scale = scale ? pow((double)N, -0.5 * (double)scale) : 1.0;
    /* cufftPlanMany and FFTW's plan_many take ints */
    return d->batch >= 1 && d->batch <= INT32_MAX && N >= 1 && d->idist <= INT32_MAX &&
           d->odist <= INT32_MAX;
}

#endif
