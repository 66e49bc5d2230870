/* fft_ops.c: the public numpy.fft-style functions of cft/fft.h. Each
 * promotes its input (JAX's rule), crops or zero-pads the transformed axes
 * to the requested lengths, moves them to the end (a view: the kernel reads
 * any strides), binds the fft primitive over up to 3 of them at a time, and
 * moves the axes back. The norm modes become the primitive's #scale. hfft
 * and ihfft are NumPy's compositions with conj; fftfreq, rfftfreq,
 * fftshift and ifftshift are plain array ops. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "prims/fft_prims.h"

/* the input converted to what a transform of `type` computes in: complex
 * (c128 from f64 and c128, else c64) or, for rfft, f32 / f64 */
static cft_array *promote(const char *name, cft_array *x, int type) {
    cft_dtype dt = x->aval.dtype;
    if (type == CFT_RFFT_R2C) {
        if (cft_dtype_is_complex(dt))
            return cft__fail(CFT_E_DTYPE, "%s: needs a real input, got %s", name,
                             cft__av(&x->aval));
        return cft_astype(x, dt == CFT_F64 ? CFT_F64 : CFT_F32);
    }
    return cft_astype(x, dt == CFT_F64 || dt == CFT_C128 ? CFT_C128 : CFT_C64);
}

/* #scale (N^(-k/2)) of a transform direction under a norm mode */
static int scale_k(int type, cft_fft_norm norm) {
    bool inverse = type == CFT_IFFT_C2C || type == CFT_IRFFT_C2R;
    if (norm == CFT_FFT_ORTHO)
        return 1;
    return (norm == CFT_FFT_BACKWARD) == inverse ? 2 : 0;
}

/* one primitive call over axes ax[0..r-1] (moved to the end and back) */
static cft_array *apply(cft_array *x, int type, const int *ax, const int64_t *len, int r,
                        int scale) {
    if (cft_failed(x))
        return x;
    int nd = x->aval.ndim, perm[CFT_MAX_NDIM], inv[CFT_MAX_NDIM], j = 0;
    bool used[CFT_MAX_NDIM] = {0}, ident = true;
    for (int i = 0; i < r; i++)
        used[ax[i]] = true;
    for (int d = 0; d < nd; d++)
        if (!used[d])
            perm[j++] = d;
    for (int i = 0; i < r; i++)
        perm[j++] = ax[i];
    for (int d = 0; d < nd; d++) {
        ident &= perm[d] == d;
        inv[perm[d]] = d;
    }
    cft_array *y = cft__fft(ident ? x : cft_transpose(x, perm), type, len, r, scale);
    return ident ? y : cft_transpose(y, inv);
}

/* transform x of `type` over the k axes `axes` with lengths s (entries -1
 * or s NULL: the default) */
static cft_array *fft_core(const char *name, cft_array *x, int type, int k, const int *axes,
                           const int64_t *s, cft_fft_norm norm) {
    CFT_PROPAGATE(name, x);
    if ((unsigned)norm > CFT_FFT_FORWARD)
        return cft__fail(CFT_E_ARG, "%s: bad norm %d", name, (int)norm);
    const cft_aval *a = &x->aval;
    int nd = a->ndim, ax[CFT_MAX_NDIM];
    if (k == 0 && type >= CFT_RFFT_R2C)
        return cft__fail(CFT_E_ARG, "%s: needs at least one axis", name);
    bool seen[CFT_MAX_NDIM] = {0};
    int64_t len[CFT_MAX_NDIM];
    for (int i = 0; i < k; i++) {
        int v = axes[i];
        if (v < -nd || v >= nd)
            return cft__fail(CFT_E_ARG, "%s: axis %d out of range for %s", name, v, cft__av(a));
        ax[i] = v < 0 ? v + nd : v;
        if (seen[ax[i]])
            return cft__fail(CFT_E_ARG, "%s: axis %d repeated", name, v);
        seen[ax[i]] = true;
        int64_t want = s ? s[i] : -1, m = a->shape[ax[i]];
        if (want == -1)
            want = type == CFT_IRFFT_C2R && i == k - 1 ? 2 * (m - 1) : m;
        if (want < 1)
            return cft__fail(CFT_E_ARG, "%s: %s length %lld along axis %d of %s (must be >= 1)",
                             name, s && s[i] != -1 ? "bad" : "default", (long long)want, ax[i],
                             cft__av(a));
        len[i] = want;
    }
    x = promote(name, x, type);
    if (cft_failed(x) || k == 0)
        return x;
    /* crop or zero-pad each transformed axis to the length it reads */
    for (int i = 0; i < k; i++) {
        int64_t want = type == CFT_IRFFT_C2R && i == k - 1 ? len[i] / 2 + 1 : len[i];
        int64_t have = x->aval.shape[ax[i]];
        if (have == want)
            continue;
        int64_t lo[CFT_MAX_NDIM] = {0}, hi[CFT_MAX_NDIM] = {0};
        if (have > want) {
            int64_t lim[CFT_MAX_NDIM];
            memcpy(lim, x->aval.shape, sizeof(int64_t) * (size_t)nd);
            lim[ax[i]] = want;
            x = cft_slice(x, lo, lim, NULL);
        } else {
            hi[ax[i]] = want - have;
            x = cft_pad(x, cft_scalar(0, x->aval.dtype), lo, hi, NULL);
        }
    }
    /* groups of at most 3 axes; the real transforms' group holds the last
     * axis, done first by rfft and last by irfft */
    int first = k > 3 ? k - 3 : 0;
    if (type == CFT_IRFFT_C2R)
        for (int end = first; end > 0; end -= 3) {
            int st = end > 3 ? end - 3 : 0;
            x = apply(x, CFT_IFFT_C2C, ax + st, len + st, end - st, scale_k(CFT_IFFT_C2C, norm));
        }
    x = apply(x, type, ax + first, len + first, k - first, scale_k(type, norm));
    int other = type == CFT_RFFT_R2C ? CFT_FFT_C2C : type;
    if (type != CFT_IRFFT_C2R)
        for (int end = first; end > 0; end -= 3) {
            int st = end > 3 ? end - 3 : 0;
            x = apply(x, other, ax + st, len + st, end - st, scale_k(other, norm));
        }
    return x;
}

static cft_array *fft1(const char *name, cft_array *x, int type, int64_t n, int axis,
                       cft_fft_norm norm) {
    CFT_PROPAGATE(name, x);
    if (n < 1 && n != -1)
        return cft__fail(CFT_E_ARG, "%s: n = %lld (must be >= 1, or -1 for the default)", name,
                         (long long)n);
    return fft_core(name, x, type, 1, &axis, &n, norm);
}

static cft_fft_norm swap_norm(cft_fft_norm norm) {
    return norm == CFT_FFT_BACKWARD  ? CFT_FFT_FORWARD
           : norm == CFT_FFT_FORWARD ? CFT_FFT_BACKWARD
                                     : norm;
}

cft_array *cft_fft_fft(cft_array *x, int64_t n, int axis, cft_fft_norm norm) {
    CFT_API("cft_fft_fft");
    return fft1("cft_fft_fft", x, CFT_FFT_C2C, n, axis, norm);
}
cft_array *cft_fft_ifft(cft_array *x, int64_t n, int axis, cft_fft_norm norm) {
    CFT_API("cft_fft_ifft");
    return fft1("cft_fft_ifft", x, CFT_IFFT_C2C, n, axis, norm);
}
cft_array *cft_fft_rfft(cft_array *x, int64_t n, int axis, cft_fft_norm norm) {
    CFT_API("cft_fft_rfft");
    return fft1("cft_fft_rfft", x, CFT_RFFT_R2C, n, axis, norm);
}
cft_array *cft_fft_irfft(cft_array *x, int64_t n, int axis, cft_fft_norm norm) {
    CFT_API("cft_fft_irfft");
    return fft1("cft_fft_irfft", x, CFT_IRFFT_C2R, n, axis, norm);
}
cft_array *cft_fft_hfft(cft_array *x, int64_t n, int axis, cft_fft_norm norm) {
    CFT_PROPAGATE("cft_fft_hfft", x);
    if ((unsigned)norm > CFT_FFT_FORWARD)
        return cft__fail(CFT_E_ARG, "cft_fft_hfft: bad norm %d", (int)norm);
    return fft1("cft_fft_hfft", cft_conj(x), CFT_IRFFT_C2R, n, axis, swap_norm(norm));
}
cft_array *cft_fft_ihfft(cft_array *x, int64_t n, int axis, cft_fft_norm norm) {
    CFT_API("cft_fft_ihfft");
    if ((unsigned)norm > CFT_FFT_FORWARD)
        return cft__fail(CFT_E_ARG, "cft_fft_ihfft: bad norm %d", (int)norm);
    return cft_conj(fft1("cft_fft_ihfft", x, CFT_RFFT_R2C, n, axis, swap_norm(norm)));
}

static cft_array *fft2(const char *name, cft_array *x, int type, const int64_t *s, const int *axes,
                       cft_fft_norm norm) {
    static const int last2[2] = {-2, -1};
    return fft_core(name, x, type, 2, axes ? axes : last2, s, norm);
}
cft_array *cft_fft_fft2(cft_array *x, const int64_t *s, const int *axes, cft_fft_norm norm) {
    CFT_API("cft_fft_fft2");
    return fft2("cft_fft_fft2", x, CFT_FFT_C2C, s, axes, norm);
}
cft_array *cft_fft_ifft2(cft_array *x, const int64_t *s, const int *axes, cft_fft_norm norm) {
    CFT_API("cft_fft_ifft2");
    return fft2("cft_fft_ifft2", x, CFT_IFFT_C2C, s, axes, norm);
}
cft_array *cft_fft_rfft2(cft_array *x, const int64_t *s, const int *axes, cft_fft_norm norm) {
    CFT_API("cft_fft_rfft2");
    return fft2("cft_fft_rfft2", x, CFT_RFFT_R2C, s, axes, norm);
}
cft_array *cft_fft_irfft2(cft_array *x, const int64_t *s, const int *axes, cft_fft_norm norm) {
    CFT_API("cft_fft_irfft2");
    return fft2("cft_fft_irfft2", x, CFT_IRFFT_C2R, s, axes, norm);
}

static cft_array *fftn(const char *name, cft_array *x, int type, const int64_t *s, const int *axes,
                       int naxes, cft_fft_norm norm) {
    CFT_PROPAGATE(name, x);
    int nd = x->aval.ndim, all[CFT_MAX_NDIM];
    if (naxes < -1 || naxes > nd || (naxes == -1 && axes))
        return cft__fail(CFT_E_ARG, "%s: naxes %d for %s%s", name, naxes, cft__av(&x->aval),
                         naxes == -1 ? " (-1, all axes, takes axes NULL)" : "");
    if (naxes == -1)
        naxes = nd;
    for (int i = 0; i < naxes; i++)
        all[i] = nd - naxes + i;
    return fft_core(name, x, type, naxes, axes ? axes : all, s, norm);
}
cft_array *cft_fft_fftn(cft_array *x, const int64_t *s, const int *axes, int naxes,
                        cft_fft_norm norm) {
    CFT_API("cft_fft_fftn");
    return fftn("cft_fft_fftn", x, CFT_FFT_C2C, s, axes, naxes, norm);
}
cft_array *cft_fft_ifftn(cft_array *x, const int64_t *s, const int *axes, int naxes,
                         cft_fft_norm norm) {
    CFT_API("cft_fft_ifftn");
    return fftn("cft_fft_ifftn", x, CFT_IFFT_C2C, s, axes, naxes, norm);
}
cft_array *cft_fft_rfftn(cft_array *x, const int64_t *s, const int *axes, int naxes,
                         cft_fft_norm norm) {
    CFT_API("cft_fft_rfftn");
    return fftn("cft_fft_rfftn", x, CFT_RFFT_R2C, s, axes, naxes, norm);
}
cft_array *cft_fft_irfftn(cft_array *x, const int64_t *s, const int *axes, int naxes,
                          cft_fft_norm norm) {
    CFT_API("cft_fft_irfftn");
    return fftn("cft_fft_irfftn", x, CFT_IRFFT_C2R, s, axes, naxes, norm);
}

/* ======== frequencies and shifts ======== */

static cft_array *freqs(const char *name, int64_t n, double d, cft_dtype dtype, bool half) {
    if (n < 1 || n >= CFT_DIM_MAX_CONCRETE)
        return cft__fail(CFT_E_ARG, "%s: n = %lld (must be in [1, 2^40))", name, (long long)n);
    if (!(d != 0) || !isfinite(d))
        return cft__fail(CFT_E_ARG, "%s: sample spacing d = %g (must be finite, nonzero)", name, d);
    if ((unsigned)dtype >= CFT_NDTYPES || !cft_dtype_is_float(dtype))
        return cft__fail(CFT_E_DTYPE, "%s: dtype %s is not a float dtype", name,
                         (unsigned)dtype < CFT_NDTYPES ? cft_dtype_name(dtype) : "?");
    int64_t m = half ? n / 2 + 1 : n;
    double *v = cft__new_data(sizeof(double) * (size_t)m);
    if (!v)
        return cft__oom();
    for (int64_t i = 0; i < m; i++) {
        int64_t k = i < (n + 1) / 2 || half ? i : i - n;
        v[i] = (double)k / ((double)n * d);
    }
    return cft_astype(cft_from_f64(v, &m, 1), dtype);
}
cft_array *cft_fft_fftfreq(int64_t n, double d, cft_dtype dtype) {
    CFT_API("cft_fft_fftfreq");
    return freqs("cft_fft_fftfreq", n, d, dtype, false);
}
cft_array *cft_fft_rfftfreq(int64_t n, double d, cft_dtype dtype) {
    CFT_API("cft_fft_rfftfreq");
    return freqs("cft_fft_rfftfreq", n, d, dtype, true);
}

/* y[i] = x[(i - shift) mod n] along axis: two slices joined */
static cft_array *roll(cft_array *x, int64_t shift, int axis) {
    int nd = x->aval.ndim;
    int64_t n = x->aval.shape[axis];
    shift = n ? ((shift % n) + n) % n : 0;
    if (!shift)
        return x;
    int64_t lo[CFT_MAX_NDIM] = {0}, mid[CFT_MAX_NDIM], hi[CFT_MAX_NDIM];
    memcpy(mid, x->aval.shape, sizeof(int64_t) * (size_t)nd);
    memcpy(hi, x->aval.shape, sizeof(int64_t) * (size_t)nd);
    int64_t start[CFT_MAX_NDIM] = {0};
    start[axis] = n - shift; /* the tail first */
    mid[axis] = n - shift;
    cft_array *parts[2] = {cft_slice(x, start, hi, NULL), cft_slice(x, lo, mid, NULL)};
    return cft_concatenate(parts, 2, axis);
}

static cft_array *shift(const char *name, cft_array *x, const int *axes, int naxes, bool inv) {
    CFT_PROPAGATE(name, x);
    int nd = x->aval.ndim;
    if (axes && (naxes < 0 || naxes > nd))
        return cft__fail(CFT_E_ARG, "%s: naxes %d for %s", name, naxes, cft__av(&x->aval));
    int k = axes ? naxes : nd;
    for (int i = 0; i < k && axes; i++)
        for (int j = 0; j < i; j++)
            if ((axes[i] + nd) % (nd ? nd : 1) == (axes[j] + nd) % (nd ? nd : 1))
                return cft__fail(CFT_E_ARG, "%s: axis %d repeated for %s", name, axes[i],
                                 cft__av(&x->aval));
    for (int i = 0; i < k; i++) {
        if (cft_failed(x))
            return x;
        int a = axes ? axes[i] : i;
        if (a < -nd || a >= nd)
            return cft__fail(CFT_E_ARG, "%s: axis %d out of range for %s", name, a,
                             cft__av(&x->aval));
        a = a < 0 ? a + nd : a;
        int64_t n = x->aval.shape[a];
        x = roll(x, inv ? -(n / 2) : n / 2, a);
    }
    return x;
}
cft_array *cft_fft_fftshift(cft_array *x, const int *axes, int naxes) {
    CFT_API("cft_fft_fftshift");
    return shift("cft_fft_fftshift", x, axes, naxes, false);
}
cft_array *cft_fft_ifftshift(cft_array *x, const int *axes, int naxes) {
    CFT_API("cft_fft_ifftshift");
    return shift("cft_fft_ifftshift", x, axes, naxes, true);
}
