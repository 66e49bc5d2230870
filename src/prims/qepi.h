/* Internal: the epilogue of conv_qact (qconv_act.c), the int8
 * convolution fused with the bias, the ReLU and the requantisation that
 * follow it; the convolution kernels (qconv.c, qconv_direct.c) run it on
 * each output row while the row is in cache. */
#ifndef CFT_QEPI_H
#define CFT_QEPI_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const float *bias; /* [O, P]: the bias of each output row laid out over it */
    float floor;       /* act: u > floor ? u : floor (a ReLU's 0) */
    bool act;
    float os, ozp; /* the next product's activation scale and zero point */
    float lo, hi;  /* its range */
    uint8_t *q8;   /* packed output: sample n's values at q8 + n q8_stride as bytes; NULL:
                      the values replace y's */
    int64_t q8_stride;
} cft__qepi;

/* n consecutive values y of the output of sample `sample`, from position
 * `at` of its [O, P] (a whole sample, or one row), in f32 as the elementwise kernel
 * it replaces: u = y + bias[at + i]; u = act ? (u > floor ? u : floor) :
 * u; y = clamp(rint(u / os) + ozp, lo, hi) (rint: half to even) */
void cft__qepi_span(const cft__qepi *e, int64_t sample, int64_t at, float *y, int64_t n);

#endif
