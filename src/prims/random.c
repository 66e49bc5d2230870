/* random.c: counter-based random numbers (Threefry-2x32, 20 rounds, Salmon
 * et al. 2011). Keys are i32[..., 2] arrays of raw 32-bit words. Three
 * primitives take a batch of keys in their leading dims, so vmap over keys
 * is exact by construction (the batch moves to the front): random_uniform
 * (keys -> [..., *shape] floats in [0,1)), random_split (keys -> [..., n, 2])
 * and random_fold_in (keys -> [..., 2]). The public draws are composites. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "prims/rules.h"

static inline uint32_t rotl(uint32_t x, int r) {
    return (x << r) | (x >> (32 - r));
}

static void threefry2x32(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1, uint32_t out[2]) {
    static const int R[8] = {13, 15, 26, 6, 17, 29, 16, 24};
    uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu, ks[3] = {k0, k1, k2};
    uint32_t x0 = c0 + k0, x1 = c1 + k1;
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 4; j++) {
            x0 += x1;
            x1 = rotl(x1, R[(i % 2) * 4 + j]) ^ x0;
        }
        x0 += ks[(i + 1) % 3];
        x1 += ks[(i + 2) % 3] + (uint32_t)(i + 1);
    }
    out[0] = x0;
    out[1] = x1;
}

/* word i of the stream of key (k0, k1) */
static uint32_t stream(uint32_t k0, uint32_t k1, uint64_t i) {
    uint32_t o[2];
    threefry2x32(k0, k1, (uint32_t)(i >> 1), 0x6b43a9b5u, o);
    return o[i & 1];
}

static cft_array *key_check(const char *name, const cft_aval *k) {
    if (k->dtype != CFT_I32 || k->ndim < 1 || k->shape[k->ndim - 1] != 2)
        return cft__fail(CFT_E_ARG, "%s: keys must be i32[..., 2], got %s", name, cft__av(k));
    return NULL;
}

/* keys batched anywhere: move the batch to the front, the output's too */
static cft_array *keys_vmap(const cft_prim *prim, cft_array *const *x, const int *bdim,
                            const cft_params *p, cft_array **y, int *ybdim) {
    cft_array *k = cft__moveaxis_b(x[0], bdim[0], 0);
    y[0] = cft__bind1(prim, p, 1, &k);
    ybdim[0] = 0;
    return NULL;
}

/* ---- random_uniform[dtype, shape] ---- */

static cft_array *uni_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    cft_array *e = key_check("random_uniform", &in[0]);
    if (e)
        return e;
    int nb = in[0].ndim - 1;
    if (nb + p->n[1] > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "random_uniform: rank too large");
    if ((cft_dtype)p->v[0][0] != CFT_F32 && (cft_dtype)p->v[0][0] != CFT_F64)
        return cft__fail(CFT_E_DTYPE,
                         "random_uniform: dtype must be f32 or f64 (convert to a half type after)");
    *out = cft__aval((cft_dtype)p->v[0][0], in[0].shape, nb);
    for (int i = 0; i < p->n[1]; i++)
        out->shape[out->ndim++] = p->v[1][i];
    return NULL;
}
static cft_array *uni_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    cft_aval o;
    uni_shape(&in[0]->aval, nin, p, &o);
    cft_array *k = cft__contig(in[0]), *y = cft__alloc(o.dtype, o.shape, o.ndim);
    if (cft_failed(y))
        return y;
    int64_t nk = cft__numel(in[0]->aval.shape, in[0]->aval.ndim - 1),
            n = cft__numel(p->v[1], p->n[1]);
    const uint32_t *ks = cft__ptr(k);
    for (int64_t b = 0; b < nk; b++) {
        uint32_t k0 = ks[2 * b], k1 = ks[2 * b + 1];
        for (int64_t i = 0; i < n; i++) {
            if (o.dtype == CFT_F32) { /* 24 random bits */
                ((float *)y->data)[b * n + i] =
                    (float)(stream(k0, k1, (uint64_t)i) >> 8) * 0x1p-24f;
            } else { /* 53 random bits from two words */
                uint64_t hi = stream(k0, k1, 2 * (uint64_t)i),
                         lo = stream(k0, k1, 2 * (uint64_t)i + 1);
                ((double *)y->data)[b * n + i] = (double)(((hi << 32) | lo) >> 11) * 0x1p-53;
            }
        }
    }
    cft__keep(k);
    out[0] = y;
    return NULL;
}
static cft_array *uni_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    return keys_vmap(&cft_p_random_uniform, x, bdim, p, y, ybdim);
}
const cft_prim cft_p_random_uniform = {
    .name = "random_uniform",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_NONDIFF | CFT_PRIM_RANDOM,
    .pnames = {"dtype", "shape"},
    .shape = uni_shape,
    .impl = uni_impl,
    .vmap = uni_vmap,
};

/* ---- random_split[#n] ---- */

static cft_array *split_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    cft_array *e = key_check("random_split", &in[0]);
    if (e)
        return e;
    if (in[0].ndim + 1 > CFT_MAX_NDIM || (!cft_dim_is_symbolic(p->v[0][0]) && p->v[0][0] < 1))
        return cft__fail(CFT_E_ARG, "random_split: bad count %lld", (long long)p->v[0][0]);
    *out = in[0];
    out->shape[out->ndim - 1] = p->v[0][0];
    out->shape[out->ndim++] = 2;
    return NULL;
}
static cft_array *split_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    cft_aval o;
    split_shape(&in[0]->aval, nin, p, &o);
    cft_array *k = cft__contig(in[0]), *y = cft__alloc(CFT_I32, o.shape, o.ndim);
    if (cft_failed(y))
        return y;
    int64_t nk = cft__numel(in[0]->aval.shape, in[0]->aval.ndim - 1), n = p->v[0][0];
    const uint32_t *ks = cft__ptr(k);
    uint32_t *ys = (uint32_t *)y->data;
    for (int64_t b = 0; b < nk; b++)
        for (int64_t i = 0; i < n; i++)
            threefry2x32(ks[2 * b], ks[2 * b + 1], (uint32_t)i, 0x3c6ef372u, ys + 2 * (b * n + i));
    cft__keep(k);
    out[0] = y;
    return NULL;
}
static cft_array *split_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                             const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    return keys_vmap(&cft_p_random_split, x, bdim, p, y, ybdim);
}
const cft_prim cft_p_random_split = {
    .name = "random_split",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_NONDIFF | CFT_PRIM_RANDOM,
    .pnames = {"#n"},
    .shape = split_shape,
    .impl = split_impl,
    .vmap = split_vmap,
};

/* ---- random_fold_in[#data] ---- */

static cft_array *fold_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    cft_array *e = key_check("random_fold_in", &in[0]);
    if (e)
        return e;
    *out = in[0];
    return NULL;
}
static cft_array *fold_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    cft_array *k = cft__contig(in[0]),
              *y = cft__alloc(CFT_I32, in[0]->aval.shape, in[0]->aval.ndim);
    if (cft_failed(y))
        return y;
    int64_t nk = cft__numel(in[0]->aval.shape, in[0]->aval.ndim - 1);
    uint64_t d = (uint64_t)p->v[0][0];
    const uint32_t *ks = cft__ptr(k);
    for (int64_t b = 0; b < nk; b++)
        threefry2x32(ks[2 * b], ks[2 * b + 1], (uint32_t)d, (uint32_t)(d >> 32) ^ 0xa54ff53au,
                     (uint32_t *)y->data + 2 * b);
    cft__keep(k);
    out[0] = y;
    return NULL;
}
static cft_array *fold_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    return keys_vmap(&cft_p_random_fold_in, x, bdim, p, y, ybdim);
}
const cft_prim cft_p_random_fold_in = {
    .name = "random_fold_in",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_NONDIFF | CFT_PRIM_RANDOM,
    .pnames = {"#data"},
    .shape = fold_shape,
    .impl = fold_impl,
    .vmap = fold_vmap,
};

/* ---- public ---- */

cft_array *cft_random_key(uint64_t seed) {
    CFT_API("cft_random_key");
    uint32_t w[2] = {(uint32_t)(seed >> 32), (uint32_t)seed};
    return cft_from_data(w, CFT_I32, (int64_t[]){2}, 1);
}
cft_array *cft_random_split(cft_array *key, int64_t n) {
    CFT_PROPAGATE("cft_random_split", key);
    cft_params p = {0};
    cft__param_set1(&p, 0, n);
    return cft__bind1(&cft_p_random_split, &p, 1, &key);
}
cft_array *cft_random_fold_in(cft_array *key, int64_t data) {
    CFT_PROPAGATE("cft_random_fold_in", key);
    cft_params p = {0};
    cft__param_set1(&p, 0, data);
    return cft__bind1(&cft_p_random_fold_in, &p, 1, &key);
}
cft_array *cft_random_uniform(cft_array *key, cft_dtype dtype, const int64_t *shape, int ndim,
                              double lo, double hi) {
    CFT_PROPAGATE("cft_random_uniform", key);
    if (ndim < 0 || ndim > CFT_MAX_NDIM || (ndim && !shape))
        return cft__fail(CFT_E_ARG, "cft_random_uniform: bad shape (rank %d)", ndim);
    if (!(lo < hi) || !isfinite(lo) || !isfinite(hi))
        return cft__fail(CFT_E_ARG, "cft_random_uniform: need finite lo < hi, got [%g, %g)", lo,
                         hi);
    cft_params p = {0};
    cft__param_set1(&p, 0, dtype);
    cft__param_set(&p, 1, shape, ndim);
    cft_array *u = cft__bind1(&cft_p_random_uniform, &p, 1, &key);
    if (lo == 0 && hi == 1)
        return u;
    /* u*(hi-lo)+lo can round up to hi (u = 1-2^-24, lo = 1, hi = 2 gives 2 in
     * f32): clamp to the largest value of the dtype below hi */
    double top =
        dtype == CFT_F32 ? (double)nextafterf((float)hi, -INFINITY) : nextafter(hi, -INFINITY);
    return cft_minimum(cft_add_s(cft_mul_s(u, hi - lo), lo), cft_scalar(top, dtype));
}
/* Box-Muller on two independent uniform draws */
cft_array *cft_random_normal(cft_array *key, cft_dtype dtype, const int64_t *shape, int ndim) {
    CFT_PROPAGATE("cft_random_normal", key);
    cft_array *ks = cft_random_split(key, 2);
    cft_array *u1 = cft_random_uniform(cft_index(ks, 0), dtype, shape, ndim, 0, 1);
    cft_array *u2 = cft_random_uniform(cft_index(ks, 1), dtype, shape, ndim, 0, 1);
    cft_array *r =
        cft_sqrt(cft_mul_s(cft_log(cft_sub(cft_ones_like(u1), u1)), -2.0)); /* 1-u1 in (0,1] */
    return cft_mul(r, cft_cos(cft_mul_s(u2, 2 * M_PI)));
}
cft_array *cft_random_bernoulli(cft_array *key, double p, const int64_t *shape, int ndim) {
    CFT_PROPAGATE("cft_random_bernoulli", key);
    if (!(p >= 0 && p <= 1))
        return cft__fail(CFT_E_ARG, "cft_random_bernoulli: probability p = %g is not in [0, 1]", p);
    cft_array *u = cft_random_uniform(key, CFT_F32, shape, ndim, 0, 1);
    return cft_lt(u, cft_scalar(p, CFT_F32));
}
