/* Internal: the int8 convolution of few input channels at stride 1, run
 * directly on each sample (qconv_direct.c), for qconv.c. */
#ifndef CFT_QCONV_DIRECT_H
#define CFT_QCONV_DIRECT_H

#include <stdbool.h>
#include <stdint.h>

#include "prims/qepi.h"

typedef struct {
    int nsp;                 /* spatial dims, 1 to 3 */
    int64_t N, C, O;         /* samples, input and output channels */
    const int64_t *in, *out; /* [nsp] spatial sizes of x and y */
    const int64_t *k, *d;    /* [nsp] kernel sizes, rhs dilation */
    const int64_t *s, *pad;  /* [nsp] strides; [2 nsp] padding lo, hi */
    const uint8_t *xq;       /* [N, C, in...] on the grid, or NULL: */
    const uint8_t *nan;      /* [N]: the sample held a NaN */
    const float *xf;         /* x [N, C, in...] in f32, rounded here sample by sample as
                                cft__qrows rounds it (clamp(round(x / xs) + zp, lo, hi), or
                                clamp(round(x), lo, hi) where grid); nan unused */
    bool grid;
    double lo, hi;    /* the activation's range */
    double zp;        /* the zero point: xq - zp is the integer */
    const int8_t *wq; /* rows of C * taps weights, ldw bytes apart */
    int64_t ldw;
    const double *sc; /* [O] the weights' scales */
    double xs;        /* the activation's scale */
    void *y;          /* [N, O, out...] f32, or f64 where dbl */
    bool dbl;
    const cft__qepi *ep; /* conv_qact's epilogue on each sample's f32 rows, or NULL */
} cft__qdirect;

/* y[n, o, pos] = (xs sc[o]) * sum (xq - zp) w, the sums exact in f32
 * (the caller keeps C * taps within F32_EXACT_K of qconv.c), scaled by
 * qconv.c's rule (an f32 y: xs sc[o] rounded to f32 once, then f32
 * products; an f64 y in double), so the bits are those of the window
 * gather on the integer GEMM; false (nothing
 * written) where the geometry does not fit: 4 input channels or more
 * (where oneDNN's int8 kernel, or the f32 convolution's GEMM, does more
 * with each value it loads), a stride above 1, negative padding, or a
 * padded sample too large for the per-thread buffer (16 KiB). */
bool cft__qconv_direct(const cft__qdirect *g);

/* 1 (the default): the VNNI form where the CPU has AVX512-VNNI and VBMI
 * and x's integers are bytes; 0: the f32 sums everywhere (tests compare
 * the two). cft__qdirect_vnni_runs counts the calls that took it. */
extern _Atomic int cft__qdirect_vnni;
extern _Atomic long cft__qdirect_vnni_runs;

#endif
