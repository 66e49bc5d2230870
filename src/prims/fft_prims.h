/* Internal: the fft primitive of fft.c (jax.lax.fft) and its kernel, shared
 * with fft_ops.c (the public numpy.fft-style functions) and the tests. */
#ifndef CFT_FFT_PRIMS_H
#define CFT_FFT_PRIMS_H

#include "prims/rules.h"

/* fft_type: c2c forward (e^-i), c2c backward (e^+i), real to the half
 * spectrum (r2c), half spectrum to real (c2r). No type normalises by
 * itself: the #scale parameter does. */
enum { CFT_FFT_C2C = 0, CFT_IFFT_C2C = 1, CFT_RFFT_R2C = 2, CFT_IRFFT_C2R = 3 };

/* parameter slots: #fft_type, fft_lengths (1 to 3: the transformed
 * trailing axes), #scale k (the result is multiplied by N^(-k/2), N the
 * product of the lengths; k in 0, 1, 2) */
enum { FFT_P_TYPE = 0, FFT_P_LENGTHS = 1, FFT_P_SCALE = 2 };

extern const cft_prim cft_p_fft;

/* bind fft (strict: dtypes and trailing dims must fit the type) */
cft_array *cft__fft(cft_array *x, int type, const int64_t *lengths, int rank, int scale);

/* The kernel on raw buffers: a transform of `type` and precision (f64 when
 * dbl) over `rank` dims (n, is, os) repeated over `hrank` batch dims (hn,
 * his, hos), strides in elements of each side's type (real or complex).
 * Plans come from the process-wide cache (thread-safe). A c2r transform
 * overwrites `in`. Returns false when FFTW cannot plan it. */
bool cft__fft_exec(int type, bool dbl, int rank, const int64_t *n, const int64_t *is,
                   const int64_t *os, int hrank, const int64_t *hn, const int64_t *his,
                   const int64_t *hos, void *in, void *out);
/* number of plans in the cache (tests) */
int cft__fft_cache_count(void);

#endif
