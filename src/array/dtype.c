/* dtype.c: element types: names, sizes, promotion and conversion loops. */
#include <complex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "array/array.h"
#include "array/half_fns.h"

static const char *names[CFT_NDTYPES] = {"bool", "i32",  "i64", "f32", "f64",
                                         "f16",  "bf16", "c64", "c128"};
static const size_t sizes[CFT_NDTYPES] = {1, 4, 8, 4, 8, 2, 2, 8, 16};

const char *cft_dtype_name(cft_dtype dt) {
    return (unsigned)dt < CFT_NDTYPES ? names[dt] : "?";
}
size_t cft_dtype_size(cft_dtype dt) {
    return (unsigned)dt < CFT_NDTYPES ? sizes[dt] : 1;
}
bool cft_dtype_is_float(cft_dtype dt) {
    return dt == CFT_F32 || dt == CFT_F64 || dt == CFT_F16 || dt == CFT_BF16;
}
bool cft_dtype_is_complex(cft_dtype dt) {
    CFT_API("cft_dtype_is_complex");
    return dt == CFT_C64 || dt == CFT_C128;
}
bool cft_dtype_is_inexact(cft_dtype dt) {
    CFT_API("cft_dtype_is_inexact");
    return cft_dtype_is_float(dt) || cft_dtype_is_complex(dt);
}
cft_dtype cft_dtype_real(cft_dtype dt) {
    CFT_API("cft_dtype_real");
    return dt == CFT_C64 ? CFT_F32 : dt == CFT_C128 ? CFT_F64 : dt;
}
cft_dtype cft_dtype_complex(cft_dtype dt) {
    CFT_API("cft_dtype_complex");
    return dt == CFT_F64 || dt == CFT_C128 ? CFT_C128 : CFT_C64;
}
bool cft_dtype_is_half(cft_dtype dt) {
    CFT_API("cft_dtype_is_half");
    return dt == CFT_F16 || dt == CFT_BF16;
}

/* ---- the half types: conversions in array/half_fns.h (shared with the
 * jit's kernels). Other dtypes reach f16 through f32, except f64, which
 * rounds once (cft_d2h); bf16 converts through f32 from every dtype. ---- */
/* f64 to f16 in one rounding: the f16 bits of x's magnitude from its
 * double bits, as cft_f2h from a float's */
static uint16_t cft_d2h(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    uint16_t s = (uint16_t)((u >> 48) & 0x8000u);
    uint64_t a = u & UINT64_C(0x7fffffffffffffff);
    if (a > UINT64_C(0x7ff0000000000000)) /* NaN: quiet, the payload's top bits */
        return (uint16_t)(s | 0x7e00u | ((a >> 42) & 0x3ffu));
    if (a >= UINT64_C(0x40effe0000000000)) /* 65520 and above: infinity */
        return (uint16_t)(s | 0x7c00u);
    if (a >= UINT64_C(0x3f10000000000000)) { /* 2^-14: normal */
        uint64_t r = a - UINT64_C(0x3f00000000000000);
        return (uint16_t)(s | ((r + UINT64_C(0x1ffffffffff) + ((r >> 42) & 1u)) >> 42));
    }
    double m;
    memcpy(&m, &a, 8);
    m *= 16777216.0;                                   /* units of 2^-24, exact */
    m = (m + 6755399441055744.0) - 6755399441055744.0; /* to an integer, half to even */
    return (uint16_t)(s | (uint16_t)m);
}

/* JAX's lattice restricted to {bool, i32, i64, f32, f64} is a chain, so the
 * join is the max in that order; f16 and bf16 sit between i64 and f32 and
 * join each other at f32:
 *        bool  i32  i64  f32  f64
 *  bool  bool  i32  i64  f32  f64
 *  i32   i32   i32  i64  f32  f64
 *  i64   i64   i64  i64  f32  f64
 *  f32   f32   f32  f32  f32  f64
 *  f64   f64   f64  f64  f64  f64 */
static int rank_of(cft_dtype d) { /* bool 0, i32 1, i64 2, halves 3, f32 4, f64 5, c64 6, c128 7 */
    static const int r[CFT_NDTYPES] = {0, 1, 2, 4, 5, 3, 3, 6, 7};
    return (unsigned)d < CFT_NDTYPES ? r[d] : 0;
}
cft_dtype cft_promote(cft_dtype a, cft_dtype b) {
    if (a == b)
        return a;
    if (cft_dtype_is_half(a) && cft_dtype_is_half(b))
        return CFT_F32;
    /* f64 with c64: c128 (the complex type of the wider precision) */
    if ((a == CFT_F64 && b == CFT_C64) || (a == CFT_C64 && b == CFT_F64))
        return CFT_C128;
    return rank_of(a) >= rank_of(b) ? a : b;
}

#define CAST_LOOP(ST, DT, CONV)                                                                    \
    do {                                                                                           \
        const ST *s = src;                                                                         \
        DT *d = dst;                                                                               \
        for (int64_t i = 0; i < n; i++)                                                            \
            d[i] = CONV(s[i]);                                                                     \
    } while (0)
#define ID(v) (v)
#define TOBOOL(v) ((v) != 0)

/* complex to real keeps the real part (as NumPy, without its warning) */
#define RE(v) creal(v)
#define TOF16(v) (cft_d2h((double)(v)))
#define TOBF16(v) (cft_f2bf((float)(v)))
#define CAST_FROM(ST)                                                                              \
    switch (ddt) {                                                                                 \
    case CFT_F16:                                                                                  \
        CAST_LOOP(ST, uint16_t, TOF16);                                                            \
        break;                                                                                     \
    case CFT_BF16:                                                                                 \
        CAST_LOOP(ST, uint16_t, TOBF16);                                                           \
        break;                                                                                     \
    case CFT_BOOL:                                                                                 \
        CAST_LOOP(ST, uint8_t, TOBOOL);                                                            \
        break;                                                                                     \
    case CFT_I32:                                                                                  \
        CAST_LOOP(ST, int32_t, (int32_t));                                                         \
        break;                                                                                     \
    case CFT_I64:                                                                                  \
        CAST_LOOP(ST, int64_t, (int64_t));                                                         \
        break;                                                                                     \
    case CFT_F32:                                                                                  \
        CAST_LOOP(ST, float, (float));                                                             \
        break;                                                                                     \
    case CFT_F64:                                                                                  \
        CAST_LOOP(ST, double, (double));                                                           \
        break;                                                                                     \
    case CFT_C64:                                                                                  \
        CAST_LOOP(ST, float complex, (float complex));                                             \
        break;                                                                                     \
    case CFT_C128:                                                                                 \
        CAST_LOOP(ST, double complex, (double complex));                                           \
        break;                                                                                     \
    default:                                                                                       \
        break;                                                                                     \
    }

static void cast_any(const void *src, cft_dtype sdt, void *dst, cft_dtype ddt, int64_t n);

void cft__cast(const void *src, cft_dtype sdt, void *dst, cft_dtype ddt, int64_t n) {
    if (sdt == ddt) {
        memcpy(dst, src, (size_t)n * sizes[sdt]);
        return;
    }
    /* autocast's casts: vector loops (half_cast.c) */
    if (sdt == CFT_F32 && ddt == CFT_F16)
        cft__f32_to_f16(src, dst, n);
    else if (sdt == CFT_F16 && ddt == CFT_F32)
        cft__f16_to_f32(src, dst, n);
    else if (sdt == CFT_F32 && ddt == CFT_BF16)
        cft__f32_to_bf16(src, dst, n);
    else if (sdt == CFT_BF16 && ddt == CFT_F32)
        cft__bf16_to_f32(src, dst, n);
    else
        cast_any(src, sdt, dst, ddt, n);
}

/* the other casts, element by element */
static void cast_any(const void *src, cft_dtype sdt, void *dst, cft_dtype ddt, int64_t n) {
    switch (sdt) {
    case CFT_BOOL:
        CAST_FROM(uint8_t);
        break;
    case CFT_I32:
        CAST_FROM(int32_t);
        break;
    case CFT_I64:
        CAST_FROM(int64_t);
        break;
    case CFT_F32:
        CAST_FROM(float);
        break;
    case CFT_F64:
        CAST_FROM(double);
        break;
    case CFT_F16: {
        float *tmp = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        if (!tmp)
            return;
        cft__f16_to_f32(src, tmp, n);
        cft__cast(tmp, CFT_F32, dst, ddt, n);
        free(tmp);
    } break;
    case CFT_C64:
    case CFT_C128: {
        /* complex to real dtypes: the real part first, then the real cast */
        if (cft_dtype_is_complex(ddt)) {
            if (sdt == CFT_C64)
                CAST_LOOP(float complex, double complex, (double complex));
            else
                CAST_LOOP(double complex, float complex, (float complex));
            break;
        }
        double *tmp = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        if (!tmp)
            return;
        for (int64_t i = 0; i < n; i++)
            tmp[i] = sdt == CFT_C64 ? RE(((const float complex *)src)[i])
                                    : RE(((const double complex *)src)[i]);
        cft__cast(tmp, CFT_F64, dst, ddt, n);
        free(tmp);
    } break;
    case CFT_BF16: {
        float *tmp = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        if (!tmp)
            return;
        cft__bf16_to_f32(src, tmp, n);
        cft__cast(tmp, CFT_F32, dst, ddt, n);
        free(tmp);
    } break;
    default:
        break;
    }
}

double cft__get(const void *p, cft_dtype dt, int64_t i) {
    switch (dt) {
    case CFT_BOOL:
        return ((const uint8_t *)p)[i];
    case CFT_I32:
        return ((const int32_t *)p)[i];
    case CFT_I64:
        return (double)((const int64_t *)p)[i];
    case CFT_F32:
        return ((const float *)p)[i];
    case CFT_F64:
        return ((const double *)p)[i];
    case CFT_F16:
        return cft_h2f(((const uint16_t *)p)[i]);
    case CFT_BF16:
        return cft_bf2f(((const uint16_t *)p)[i]);
    case CFT_C64: /* the real part */
        return crealf(((const float complex *)p)[i]);
    case CFT_C128:
        return creal(((const double complex *)p)[i]);
    default:
        return 0;
    }
}

void cft__set(void *p, cft_dtype dt, int64_t i, double v) {
    switch (dt) {
    case CFT_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    case CFT_I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case CFT_I64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    case CFT_F32:
        ((float *)p)[i] = (float)v;
        break;
    case CFT_F64:
        ((double *)p)[i] = v;
        break;
    case CFT_F16:
        ((uint16_t *)p)[i] = cft_d2h(v);
        break;
    case CFT_BF16:
        ((uint16_t *)p)[i] = cft_f2bf((float)v);
        break;
    case CFT_C64:
        ((float complex *)p)[i] = (float)v;
        break;
    case CFT_C128:
        ((double complex *)p)[i] = v;
        break;
    default:
        break;
    }
}
