/** @file
 * cft/fft.h: discrete Fourier transforms with numpy.fft / torch.fft's names,
 * differentiable and batchable.
 *
 * Every transform works along any axes, for any sizes (not only powers of
 * two), eagerly and under every transform (jvp, grad, vmap, jit, hessian).
 * Leading and batched axes are done by one FFTW call. Dtypes follow JAX:
 * f32 and c64 compute in single precision, f64 and c128 in double; bool,
 * ints, f16 and bf16 are converted to f32 (c64) first. Complex transforms
 * return c64/c128; rfft/ihfft need real input; irfft/hfft return real
 * arrays. Bad input (an axis out of range, n < 1 other than -1, a complex
 * input to rfft) gives an error array naming the call.
 *
 * n (1-d) and s (n-d): the transform length along each axis; the input is
 * cropped or zero-padded to it (NumPy's n and s). -1 (or s NULL) keeps the
 * input's length; for irfft/hfft the default output length is 2 (m - 1),
 * m the input's length, and the input is cropped or padded to n/2 + 1.
 *
 * norm (NumPy's, torch's): BACKWARD scales the inverse transforms by 1/n,
 * ORTHO both directions by 1/sqrt(n), FORWARD the forward ones by 1/n.
 *
 * Derivatives follow JAX's convention (see complex.h): the transforms are
 * linear, so their jvp is the transform of the tangent and their vjp the
 * transpose (never conjugating), e.g. the vjp of fft is fft itself.
 *
 * Plans: FFTW plans are made once per transform geometry and cached
 * process-wide (thread-safe). They use FFTW_ESTIMATE (fast planning, the
 * same results every run); CFT_FFTW_PLANNER=measure in the environment
 * makes measured plans instead: 25-40% faster transforms of large sizes,
 * for a planning cost of 0.1 to 10+ s per new geometry.
 */
#ifndef CFT_FFT_H
#define CFT_FFT_H

/** @addtogroup numerics
 *  @{ */

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Normalisation modes (NumPy's norm argument; 0 is the default). */
typedef enum cft_fft_norm {
    CFT_FFT_BACKWARD = 0, /**< forward unscaled, inverse 1/n */
    CFT_FFT_ORTHO = 1,    /**< both 1/sqrt(n): unitary */
    CFT_FFT_FORWARD = 2,  /**< forward 1/n, inverse unscaled */
} cft_fft_norm;

/** 1-d DFT along `axis`: y_k = sum_j x_j e^(-2 pi i jk/n). n: the length
 *  (-1: x's). */
cft_array *cft_fft_fft(cft_array *x, int64_t n, int axis, cft_fft_norm norm);
/** Inverse 1-d DFT: y_j = 1/n sum_k x_k e^(2 pi i jk/n) (backward norm). */
cft_array *cft_fft_ifft(cft_array *x, int64_t n, int axis, cft_fft_norm norm);
/** DFT of a real signal: the n/2 + 1 non-negative frequencies. */
cft_array *cft_fft_rfft(cft_array *x, int64_t n, int axis, cft_fft_norm norm);
/** Inverse of rfft: a real signal of length n (-1: 2 (m - 1)) from the half
 *  spectrum (the imaginary parts of the zero and, n even, the Nyquist bins
 *  are ignored, as NumPy). */
cft_array *cft_fft_irfft(cft_array *x, int64_t n, int axis, cft_fft_norm norm);
/** DFT of a Hermitian-symmetric signal given by its first half: a real
 *  spectrum of length n (-1: 2 (m - 1)). NumPy's: irfft(conj(x), n) with the
 *  norm's direction swapped. */
cft_array *cft_fft_hfft(cft_array *x, int64_t n, int axis, cft_fft_norm norm);
/** Inverse of hfft: conj(rfft(x, n)) with the norm's direction swapped (the
 *  n/2 + 1 bins of a real signal's inverse DFT). */
cft_array *cft_fft_ihfft(cft_array *x, int64_t n, int axis, cft_fft_norm norm);

/** @{ */
/** 2-d transforms over `axes` (2 entries; NULL: the last two), lengths `s`
 *  (2 entries, -1 keeps one; NULL: the input's). */
cft_array *cft_fft_fft2(cft_array *x, const int64_t *s, const int *axes, cft_fft_norm norm);
cft_array *cft_fft_ifft2(cft_array *x, const int64_t *s, const int *axes, cft_fft_norm norm);
cft_array *cft_fft_rfft2(cft_array *x, const int64_t *s, const int *axes, cft_fft_norm norm);
cft_array *cft_fft_irfft2(cft_array *x, const int64_t *s, const int *axes, cft_fft_norm norm);
/** @} */

/** @{ */
/** n-d transforms over `naxes` axes (`axes` NULL: the last naxes; naxes -1:
 *  all of x's axes, in order), lengths s (naxes entries or NULL). The real
 *  transforms halve the last of the axes. Axes may not repeat. */
cft_array *cft_fft_fftn(cft_array *x, const int64_t *s, const int *axes, int naxes,
                        cft_fft_norm norm);
cft_array *cft_fft_ifftn(cft_array *x, const int64_t *s, const int *axes, int naxes,
                         cft_fft_norm norm);
cft_array *cft_fft_rfftn(cft_array *x, const int64_t *s, const int *axes, int naxes,
                         cft_fft_norm norm);
cft_array *cft_fft_irfftn(cft_array *x, const int64_t *s, const int *axes, int naxes,
                          cft_fft_norm norm);
/** @} */

/** Sample frequencies of an n-point DFT with sample spacing d: [0, 1, ...,
 *  (n-1)/2, -(n/2), ..., -1] / (d n), of a float dtype. */
cft_array *cft_fft_fftfreq(int64_t n, double d, cft_dtype dtype);
/** The n/2 + 1 non-negative frequencies of rfft: [0, 1, ..., n/2] / (d n). */
cft_array *cft_fft_rfftfreq(int64_t n, double d, cft_dtype dtype);
/** Roll the zero frequency to the middle: each axis in `axes` (NULL: all)
 *  rolled by size/2. */
cft_array *cft_fft_fftshift(cft_array *x, const int *axes, int naxes);
/** Inverse of fftshift (rolls by -(size/2)). */
cft_array *cft_fft_ifftshift(cft_array *x, const int *axes, int naxes);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
