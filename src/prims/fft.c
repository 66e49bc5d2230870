/* fft.c: the fft primitive (jax.lax.fft) and its FFTW kernel.
 *
 * fft[#fft_type, fft_lengths, #scale](x) transforms the trailing
 * len(fft_lengths) (1 to 3) axes of x; the leading axes are a batch, done by
 * one FFTW guru plan whose "howmany" loops cover them. Types: c2c forward
 * (e^-2 pi i jk/n) and backward (e^+), r2c (real to the half spectrum
 * [..., n/2+1]) and c2r (its inverse, unnormalised: FFTW's c2r, which ignores
 * the imaginary parts that a Hermitian spectrum cannot have). The result is
 * multiplied by N^(-k/2) (N = prod(fft_lengths), k = #scale), so the norm
 * modes of the public functions cost no extra op.
 *
 * Kernel: inputs are read through their strides (FFTW's guru interface), so
 * axis moves and slices of the public functions copy nothing; the output is
 * a fresh contiguous array. c2r destroys its input in FFTW, so its input
 * goes through a per-thread scratch buffer in cache-sized chunks of the
 * batch (the copy applies the scale and a pending conjugate). A
 * conjugate view as c2c input runs the transform of the other sign and
 * conjugates the result: FFT(conj x) = conj(IFFT(x)). Plans are cached
 * process-wide, keyed by the whole geometry (type, precision, dims and
 * strides, batch loops and strides, the alignments of both arrays and the
 * planner flags) and run with FFTW's new-array execute functions, which are
 * thread-safe; planning (FFTW's planner is not) holds a second mutex.
 * FFTW_ESTIMATE unless CFT_FFTW_PLANNER=measure (or patient).
 *
 * Rules (JAX's convention: transposes never conjugate; for real-linear maps
 * between real and complex values the pairing is Re(sum(ct * y))):
 * - jvp: the same transform of the tangent (the primitive is linear);
 * - transpose: c2c of either sign is its own transpose (the DFT matrix is
 *   symmetric), with the same scale; r2c^T(ct) = c2r(conj(ct) / m) and
 *   c2r^T(ct) = conj(m * r2c(ct)), m = [1, 2, ..., 2, (1 if n even)] along
 *   the last axis (the multiplicities of the half spectrum's bins). Both are
 *   transforms of the half size, and each is the other's transpose;
 * - vmap: the batch axis moves to the front (one more batch dim). */
#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "prims/fft_prims.h"

static const char *const type_names[] = {"fft", "ifft", "rfft", "irfft"};

/* ======== plan cache ======== */

enum { CACHE_SIZE = 128 };

typedef struct {
    int32_t type, dbl, rank, hrank, ain, aout, flags, pad_;
    int64_t d[3][3];
    int64_t h[CFT_MAX_NDIM][3];
} plan_key;

typedef struct {
    plan_key key;
    uint64_t hash, used;
    void *plan; /* fftw_plan or fftwf_plan */
    int refs;
} plan_entry;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER, plan_mu = PTHREAD_MUTEX_INITIALIZER;
static plan_entry cache[CACHE_SIZE];
static int ncache;
static uint64_t clock_;

static uint64_t key_hash(const plan_key *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void destroy_plan(bool dbl, void *plan) {
    if (dbl)
        fftw_destroy_plan((fftw_plan)plan);
    else
        fftwf_destroy_plan((fftwf_plan)plan);
}

/* FFTW_ESTIMATE unless CFT_FFTW_PLANNER asks for measure or patient */
static int planner_flags(void) {
    const char *e = getenv("CFT_FFTW_PLANNER");
    if (e && !strcmp(e, "measure"))
        return FFTW_MEASURE;
    if (e && !strcmp(e, "patient"))
        return FFTW_PATIENT;
    return FFTW_ESTIMATE;
}

/* the elements an array spans with these dims: [*lo, *hi] offsets */
static void extent(int rank, const int64_t (*d)[3], int hrank, const int64_t (*h)[3], int which,
                   int64_t *lo, int64_t *hi) {
    *lo = *hi = 0;
    for (int i = 0; i < rank + hrank; i++) {
        const int64_t *r = i < rank ? d[i] : h[i - rank];
        int64_t span = (r[0] - 1) * r[which];
        if (span < 0)
            *lo += span;
        else
            *hi += span;
    }
}

/* make a plan for key k on arrays in/out (FFTW_ESTIMATE plans on the real
 * arrays, which it does not touch; measuring plans on scratch arrays of the
 * same extent and alignment) */
static void *make_plan(const plan_key *k, void *in, void *out) {
    fftw_iodim64 dims[3], hd[CFT_MAX_NDIM];
    for (int i = 0; i < k->rank; i++)
        dims[i] = (fftw_iodim64){k->d[i][0], k->d[i][1], k->d[i][2]};
    for (int i = 0; i < k->hrank; i++)
        hd[i] = (fftw_iodim64){k->h[i][0], k->h[i][1], k->h[i][2]};
    unsigned flags = (unsigned)k->flags;
    void *sin = NULL, *sout = NULL;
    if (flags != FFTW_ESTIMATE) {
        /* element sizes of each side: complex except r2c's input and c2r's
         * output */
        size_t re = k->dbl ? sizeof(double) : sizeof(float);
        size_t ein = k->type == CFT_RFFT_R2C ? re : 2 * re;
        size_t eout = k->type == CFT_IRFFT_C2R ? re : 2 * re;
        int64_t lo, hi, lo2, hi2;
        extent(k->rank, k->d, k->hrank, k->h, 1, &lo, &hi);
        extent(k->rank, k->d, k->hrank, k->h, 2, &lo2, &hi2);
        sin = fftw_malloc((size_t)(hi - lo + 1) * ein + 64);
        sout = fftw_malloc((size_t)(hi2 - lo2 + 1) * eout + 64);
        if (!sin || !sout) {
            fftw_free(sin);
            fftw_free(sout);
            return NULL;
        }
        in = (char *)sin + k->ain - lo * (int64_t)ein;
        out = (char *)sout + k->aout - lo2 * (int64_t)eout;
    }
    void *plan = NULL;
    int sign = k->type == CFT_FFT_C2C ? FFTW_FORWARD : FFTW_BACKWARD;
    if (k->dbl) {
        if (k->type <= CFT_IFFT_C2C)
            plan = fftw_plan_guru64_dft(k->rank, dims, k->hrank, hd, in, out, sign,
                                        flags | FFTW_PRESERVE_INPUT);
        else if (k->type == CFT_RFFT_R2C)
            plan = fftw_plan_guru64_dft_r2c(k->rank, dims, k->hrank, hd, in, out,
                                            flags | FFTW_PRESERVE_INPUT);
        else
            plan = fftw_plan_guru64_dft_c2r(k->rank, dims, k->hrank, hd, in, out,
                                            flags | FFTW_DESTROY_INPUT);
    } else {
        if (k->type <= CFT_IFFT_C2C)
            plan = fftwf_plan_guru64_dft(k->rank, dims, k->hrank, hd, in, out, sign,
                                         flags | FFTW_PRESERVE_INPUT);
        else if (k->type == CFT_RFFT_R2C)
            plan = fftwf_plan_guru64_dft_r2c(k->rank, dims, k->hrank, hd, in, out,
                                             flags | FFTW_PRESERVE_INPUT);
        else
            plan = fftwf_plan_guru64_dft_c2r(k->rank, dims, k->hrank, hd, in, out,
                                             flags | FFTW_DESTROY_INPUT);
    }
    if (sin) {
        fftw_free(sin);
        fftw_free(sout);
    }
    return plan;
}

/* the cached plan for k, its refs taken (cache_mu held); NULL if none */
static void *lookup(const plan_key *k, uint64_t h, int *slot) {
    for (int i = 0; i < ncache; i++)
        if (cache[i].hash == h && !memcmp(&cache[i].key, k, sizeof *k)) {
            cache[i].refs++;
            cache[i].used = ++clock_;
            *slot = i;
            return cache[i].plan;
        }
    return NULL;
}

/* a plan for k (the entry's refs held until release); *slot -1: a plan
 * outside the cache (every entry busy), to destroy after use. Lookups take
 * only cache_mu, so a long (measuring) planning in one thread does not
 * stall cached transforms in others; planning and destroying take plan_mu
 * (FFTW's planner is not thread-safe), always before cache_mu. */
static void *acquire(const plan_key *k, void *in, void *out, int *slot) {
    uint64_t h = key_hash(k);
    pthread_mutex_lock(&cache_mu);
    void *plan = lookup(k, h, slot);
    pthread_mutex_unlock(&cache_mu);
    if (plan)
        return plan;
    pthread_mutex_lock(&plan_mu);
    pthread_mutex_lock(&cache_mu); /* planned by another thread meanwhile? */
    plan = lookup(k, h, slot);
    pthread_mutex_unlock(&cache_mu);
    if (plan) {
        pthread_mutex_unlock(&plan_mu);
        return plan;
    }
    plan = make_plan(k, in, out);
    *slot = -1;
    plan_entry victim = {0};
    if (plan) {
        pthread_mutex_lock(&cache_mu);
        int s = -1;
        if (ncache < CACHE_SIZE)
            s = ncache++;
        else /* full: the least recently used idle entry */
            for (int i = 0; i < CACHE_SIZE; i++)
                if (!cache[i].refs && (s < 0 || cache[i].used < cache[s].used))
                    s = i;
        if (s >= 0) {
            victim = cache[s];
            cache[s] = (plan_entry){*k, h, ++clock_, plan, 1};
            *slot = s;
        }
        pthread_mutex_unlock(&cache_mu);
    }
    if (victim.plan)
        destroy_plan(victim.key.dbl, victim.plan);
    pthread_mutex_unlock(&plan_mu);
    return plan;
}

static void release(const plan_key *k, void *plan, int slot) {
    if (slot >= 0) {
        pthread_mutex_lock(&cache_mu);
        cache[slot].refs--;
        pthread_mutex_unlock(&cache_mu);
        return;
    }
    pthread_mutex_lock(&plan_mu);
    destroy_plan(k->dbl, plan);
    pthread_mutex_unlock(&plan_mu);
}

int cft__fft_cache_count(void) {
    pthread_mutex_lock(&cache_mu);
    int n = ncache;
    pthread_mutex_unlock(&cache_mu);
    return n;
}

bool cft__fft_exec(int type, bool dbl, int rank, const int64_t *n, const int64_t *is,
                   const int64_t *os, int hrank, const int64_t *hn, const int64_t *his,
                   const int64_t *hos, void *in, void *out) {
    plan_key k;
    memset(&k, 0, sizeof k);
    k.type = type, k.dbl = dbl, k.rank = rank, k.flags = planner_flags();
    for (int i = 0; i < rank; i++) {
        if (n[i] == 0)
            return true;
        k.d[i][0] = n[i], k.d[i][1] = is[i], k.d[i][2] = os[i];
    }
    /* batch loops: size-1 loops dropped, nested loops merged where both
     * sides' strides allow */
    int hr = 0;
    for (int i = 0; i < hrank; i++) {
        if (hn[i] == 0)
            return true;
        if (hn[i] == 1)
            continue;
        if (hr && k.h[hr - 1][1] == hn[i] * his[i] && k.h[hr - 1][2] == hn[i] * hos[i]) {
            k.h[hr - 1][0] *= hn[i], k.h[hr - 1][1] = his[i], k.h[hr - 1][2] = hos[i];
            continue;
        }
        k.h[hr][0] = hn[i], k.h[hr][1] = his[i], k.h[hr][2] = hos[i];
        hr++;
    }
    k.hrank = hr;
    if (dbl) {
        k.ain = fftw_alignment_of(in), k.aout = fftw_alignment_of(out);
    } else {
        k.ain = fftwf_alignment_of(in), k.aout = fftwf_alignment_of(out);
    }
    int slot;
    void *plan = acquire(&k, in, out, &slot);
    if (!plan)
        return false;
    if (dbl) {
        if (type <= CFT_IFFT_C2C)
            fftw_execute_dft(plan, in, out);
        else if (type == CFT_RFFT_R2C)
            fftw_execute_dft_r2c(plan, in, out);
        else
            fftw_execute_dft_c2r(plan, in, out);
    } else {
        if (type <= CFT_IFFT_C2C)
            fftwf_execute_dft(plan, in, out);
        else if (type == CFT_RFFT_R2C)
            fftwf_execute_dft_r2c(plan, in, out);
        else
            fftwf_execute_dft_c2r(plan, in, out);
    }
    release(&k, plan, slot);
    return true;
}

/* ======== the primitive ======== */

#define TYPE(p) ((int)(p)->v[FFT_P_TYPE][0])
#define RANK(p) ((int)(p)->n[FFT_P_LENGTHS])
#define LEN(p) ((p)->v[FFT_P_LENGTHS])
#define SCALE(p) ((int)(p)->v[FFT_P_SCALE][0])

static double scale_of(const cft_params *p) {
    double N = 1;
    for (int i = 0; i < RANK(p); i++)
        N *= (double)LEN(p)[i];
    switch (SCALE(p)) {
    case 1:
        return 1 / sqrt(N);
    case 2:
        return 1 / N;
    default:
        return 1;
    }
}

static cft_array *fft_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    int type = TYPE(p), r = RANK(p);
    if (type < 0 || type > 3 || p->n[FFT_P_TYPE] != 1)
        return cft__fail(CFT_E_ARG, "fft: bad fft_type %d", type);
    const char *nm = type_names[type];
    if (r < 1 || r > 3)
        return cft__fail(CFT_E_ARG, "fft: %s over %d axes (1 to 3)", nm, r);
    if (SCALE(p) < 0 || SCALE(p) > 2)
        return cft__fail(CFT_E_ARG, "fft: bad #scale %d (0, 1 or 2)", SCALE(p));
    for (int i = 0; i < r; i++)
        if (LEN(p)[i] < 1)
            return cft__fail(CFT_E_ARG, "fft: %s length %lld (must be positive)", nm,
                             (long long)LEN(p)[i]);
    const cft_aval *a = &in[0];
    bool real_in = type == CFT_RFFT_R2C;
    if (real_in ? (a->dtype != CFT_F32 && a->dtype != CFT_F64) : !cft_dtype_is_complex(a->dtype))
        return cft__fail(CFT_E_DTYPE, "fft: %s needs %s input, got %s", nm,
                         real_in ? "f32 or f64" : "c64 or c128", cft__av(a));
    if (a->ndim < r)
        return cft__fail(CFT_E_SHAPE, "fft: %s over %d axes of %s", nm, r, cft__av(a));
    int nb = a->ndim - r;
    *out = *a;
    for (int i = 0; i < r; i++) {
        int64_t L = LEN(p)[i], half = L / 2 + 1;
        bool last = i == r - 1;
        int64_t want = type == CFT_IRFFT_C2R && last ? half : L;
        if (a->shape[nb + i] != want)
            return cft__fail(CFT_E_SHAPE,
                             "fft: %s with lengths of %d axes: %s has %lld, not %lld "
                             "in axis %d",
                             nm, r, cft__av(a), (long long)a->shape[nb + i], (long long)want,
                             nb + i);
        out->shape[nb + i] = type == CFT_RFFT_R2C && last ? half : L;
    }
    if (type == CFT_RFFT_R2C)
        out->dtype = cft_dtype_complex(a->dtype);
    if (type == CFT_IRFFT_C2R)
        out->dtype = cft_dtype_real(a->dtype);
    return NULL;
}

/* n complex values from src (stride st) to dst (contiguous), the real
 * parts times s and the imaginary parts times si */
#define SCALED_COPY(T)                                                                             \
    static void copy_##T(const T *restrict src, int64_t st, T *restrict dst, int64_t n, T s,       \
                         T si) {                                                                   \
        if (st == 1)                                                                               \
            for (int64_t j = 0; j < n; j++)                                                        \
                dst[2 * j] = s * src[2 * j], dst[2 * j + 1] = si * src[2 * j + 1];                 \
        else                                                                                       \
            for (int64_t j = 0; j < n; j++)                                                        \
                dst[2 * j] = s * src[2 * j * st], dst[2 * j + 1] = si * src[2 * j * st + 1];       \
    }
SCALED_COPY(float)
SCALED_COPY(double)

/* copy elements [e0, e1) (row-major order; e0, e1 multiples of the last
 * dim) of complex x (any strides, a pending conjugate) contiguous into dst,
 * times s */
static void copy_scaled(const cft_array *x, void *dst, bool dbl, double s, int64_t e0, int64_t e1) {
    const cft_aval *a = &x->aval;
    int nd = a->ndim;
    double si = x->conj ? -s : s;
    /* row-major strides: one run */
    int64_t rm[CFT_MAX_NDIM], inner = a->shape[nd - 1], st = x->strides[nd - 1];
    cft__row_major(a->shape, nd, rm);
    bool flat = true;
    for (int d = 0; d < nd; d++)
        flat &= a->shape[d] == 1 || x->strides[d] == rm[d];
    if (flat)
        inner = e1 - e0, st = 1;
    for (int64_t done = e0; done < e1; done += inner) {
        int64_t off = x->offset + (flat ? e0 : 0);
        for (int64_t d = nd - 2, row = done / a->shape[nd - 1]; d >= 0 && !flat; d--)
            off += (row % a->shape[d]) * x->strides[d], row /= a->shape[d];
        if (dbl)
            copy_double((const double *)x->data + 2 * off, st, (double *)dst + 2 * (done - e0),
                        inner, s, si);
        else
            copy_float((const float *)x->data + 2 * off, st, (float *)dst + 2 * (done - e0), inner,
                       (float)s, (float)si);
    }
}

/* A per-thread scratch buffer for c2r inputs, grown as needed and kept
 * (fresh blocks of this size cost page faults and cold caches). */
#define C2R_CHUNK ((size_t)4 << 20)
static void *scratch(size_t bytes) {
    return cft__scratch(CFT_SCRATCH_FFT, bytes, C2R_CHUNK);
}

/* c2r: FFTW destroys its input, so the batch goes through a scratch buffer
 * in chunks of about C2R_CHUNK bytes (the copy applies the scale and a
 * pending conjugate, and FFTW reads it back from the cache) */
static bool c2r_chunked(const cft_array *x, int r, const int64_t *n, const int64_t *os, double s,
                        bool dbl, char *y) {
    const cft_aval *a = &x->aval;
    int nb = a->ndim - r;
    int64_t per_in = cft__numel(a->shape + nb, r), per_out = 1, H = cft__numel(a->shape, nb);
    for (int i = 0; i < r; i++)
        per_out *= n[i];
    size_t eb = dbl ? 2 * sizeof(double) : 2 * sizeof(float);
    int64_t chunk = (int64_t)(C2R_CHUNK / ((size_t)per_in * eb));
    chunk = chunk < 1 ? 1 : chunk > H ? H : chunk;
    void *buf = scratch((size_t)(chunk * per_in) * eb);
    if (!buf)
        return false;
    int64_t is[3];
    cft__row_major(a->shape + nb, r, is);
    for (int64_t h = 0; h < H; h += chunk) {
        int64_t c = chunk < H - h ? chunk : H - h;
        copy_scaled(x, buf, dbl, s, h * per_in, (h + c) * per_in);
        if (!cft__fft_exec(CFT_IRFFT_C2R, dbl, r, n, is, os, 1, &c, &per_in, &per_out, buf,
                           y + (size_t)(h * per_out) * (eb / 2)))
            return false;
    }
    cft__keep(buf);
    return true;
}

/* scale n complex values in place by s (imaginary parts by si) */
static void scale_inplace(void *p, bool dbl, int64_t n, double s, double si) {
    if (dbl) {
        double *v = p;
        for (int64_t i = 0; i < n; i++)
            v[2 * i] *= s, v[2 * i + 1] *= si;
    } else {
        float *v = p, fs = (float)s, fi = (float)si;
        for (int64_t i = 0; i < n; i++)
            v[2 * i] *= fs, v[2 * i + 1] *= fi;
    }
}

/* the transform into y, a contiguous array of the output aval (the jit's
 * planned buffers come here) */
static cft_array *fft_into(cft_array *const *in, int nin, const cft_params *p, cft_array *y) {
    (void)nin;
    cft_aval o = y->aval;
    cft_array *x = in[0];
    int type = TYPE(p), r = RANK(p), nb = o.ndim - r;
    bool dbl = o.dtype == CFT_F64 || o.dtype == CFT_C128;
    double s = scale_of(p);
    if (!cft__numel(o.shape, o.ndim))
        return NULL;
    /* FFTW reads any strides but a transformed axis of stride 0 (a
     * broadcast): copy those */
    for (int i = 0; i < r; i++)
        if (!x->strides[nb + i] && x->aval.shape[nb + i] > 1) {
            x = cft__contig(x);
            if (cft_failed(x))
                return x;
            break;
        }
    int64_t n[3], is[3], os[3], ostr[CFT_MAX_NDIM];
    cft__row_major(o.shape, o.ndim, ostr);
    for (int i = 0; i < r; i++)
        n[i] = LEN(p)[i], is[i] = x->strides[nb + i], os[i] = ostr[nb + i];
    bool ok;
    if (type == CFT_IRFFT_C2R) {
        ok = c2r_chunked(x, r, n, os, s, dbl, cft__ptr(y));
    } else { /* FFT(conj x) = conj(IFFT x) */
        int kt = !x->conj ? type : type == CFT_FFT_C2C ? CFT_IFFT_C2C : CFT_FFT_C2C;
        ok = cft__fft_exec(kt, dbl, r, n, is, os, nb, o.shape, x->strides, ostr, cft__ptr(x),
                           cft__ptr(y));
        if (ok && (s != 1 || x->conj))
            scale_inplace(cft__ptr(y), dbl, cft__numel(o.shape, o.ndim), s, x->conj ? -s : s);
    }
    if (!ok)
        return cft__fail(CFT_E_FOREIGN, "fft: FFTW could not plan %s of %s", type_names[type],
                         cft__av(&x->aval));
    cft__keep(x);
    return NULL;
}

static cft_array *fft_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    return cft__impl_by_into(&cft_p_fft, in, nin, p, out);
}

static cft_array *fft_bind(cft_array *x, const cft_params *p) {
    return cft__bind1(&cft_p_fft, p, 1, &x);
}

static cft_array *fft_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    ty[0] = t[0] ? fft_bind(t[0], p) : NULL;
    return NULL;
}

/* [1, 2, ..., 2, (1 if n even)]: the multiplicity of each bin of the half
 * spectrum of length n (m = n/2 + 1 entries), of the real dtype dt; its
 * inverse when inv */
static cft_array *half_mask(int64_t n, cft_dtype dt, bool inv) {
    int64_t m = n / 2 + 1;
    double *v = cft__new_data(sizeof(double) * (size_t)m);
    if (!v)
        return cft__oom();
    for (int64_t k = 0; k < m; k++) {
        bool single = k == 0 || (n % 2 == 0 && k == n / 2);
        v[k] = single ? 1 : inv ? 0.5 : 2;
    }
    return cft_astype(cft_from_f64(v, &m, 1), dt);
}

static cft_array *fft_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin;
    ct_in[0] = NULL;
    if (!ct[0])
        return NULL;
    int type = TYPE(p);
    int64_t n = LEN(p)[RANK(p) - 1];
    cft_params q = *p;
    cft_array *c = ct[0];
    cft_dtype rdt = cft_dtype_real(c->aval.dtype);
    switch (type) {
    case CFT_RFFT_R2C: /* c2r(conj(ct) / m) */
        q.v[FFT_P_TYPE][0] = CFT_IRFFT_C2R;
        ct_in[0] = fft_bind(cft_mul(cft_conj(c), half_mask(n, rdt, true)), &q);
        break;
    case CFT_IRFFT_C2R: /* conj(m * r2c(ct)) */
        q.v[FFT_P_TYPE][0] = CFT_RFFT_R2C;
        ct_in[0] = cft_conj(cft_mul(fft_bind(c, &q), half_mask(n, rdt, false)));
        break;
    default: /* the DFT matrix is symmetric */
        ct_in[0] = fft_bind(c, p);
    }
    return cft_failed(ct_in[0]) ? ct_in[0] : NULL;
}

static cft_array *fft_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    y[0] = fft_bind(cft__batch_at(x[0], bdim[0], size, 0), p);
    ybdim[0] = 0;
    return cft_failed(y[0]) ? y[0] : NULL;
}

const cft_prim cft_p_fft = {
    .name = "fft",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_CONJ_AWARE,
    .pnames = {"#fft_type", "fft_lengths", "#scale"},
    .shape = fft_shape,
    .impl = fft_impl,
    .impl_into = fft_into,
    .jvp = fft_jvp,
    .transpose = fft_transpose,
    .vmap = fft_vmap,
};

cft_array *cft__fft(cft_array *x, int type, const int64_t *lengths, int rank, int scale) {
    cft_params p = {0};
    cft__param_set1(&p, FFT_P_TYPE, type);
    cft__param_set(&p, FFT_P_LENGTHS, lengths, rank);
    cft__param_set1(&p, FFT_P_SCALE, scale);
    return fft_bind(x, &p);
}
