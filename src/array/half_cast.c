/* half_cast.c: the f32 <-> f16 and f32 <-> bf16 casts of cft__cast
 * (array/dtype.c), which autocast makes at every product, as vector loops. They are
 * array/half_fns.h's conversions; this file is compiled with -O3
 * -fno-trapping-math (CMakeLists.txt): with the default trapping math GCC
 * will not evaluate the conversions' float operations for every element
 * and select (the branches of a scalar loop remain), and under the
 * optimize attribute of CFT_VEC it does not vectorize these mixed-width
 * loops at all. Neither changes a value: results are the scalar code's
 * bits (test_jit_f16). The half outer products of autocast's per-sample
 * gradients (dot.c) are here for the same reason. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "array/array.h"
#include "array/half_fns.h"
#include "core/vec.h"

CFT_CLONES static void f32_to_f16(const float *s, uint16_t *d, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        d[i] = cft_f2h(s[i]);
}

CFT_CLONES static void f16_to_f32(const uint16_t *s, float *d, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        d[i] = cft_h2f(s[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
/* F16C (every AVX2 CPU has it): vcvtps2ph rounds to nearest-even with
 * subnormals and keeps a NaN quiet with its payload's top bits, as
 * cft_f2h does, and vcvtph2ps is exact: the same bits, 8 at a time (the
 * portable code spends several integer and float operations on each;
 * f16 autocast converts at every product). test_jit_f16 checks every f16
 * value and 2^16 f32 patterns against the compiler's binary16. */
__attribute__((target("avx2,f16c"))) static void f32_to_f16_f16c(const float *s, uint16_t *d,
                                                                 int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        d[i] = cft_f2h(s[i]);
}
__attribute__((target("avx2,f16c"))) static void f16_to_f32_f16c(const uint16_t *s, float *d,
                                                                 int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++)
        d[i] = cft_h2f(s[i]);
}
/* the half outer products (below) by F16C: z stored as f16 (STORE_H), or
 * as f32 values rounded to f16 (STORE_W: the jit's fold of a product and
 * its conversion back; through vcvtps2ph and back, which is cft_hr's
 * value) */
#define STORE_H(d, p)                                                                              \
    _mm_storeu_si128((__m128i *)(d), _mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT))
#define STORE_W(d, p)                                                                              \
    _mm256_storeu_ps(d, _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT)))
#define OUTER_F16C(NAME, ZT, STORE, TAIL)                                                          \
    __attribute__((target("avx2,f16c"))) static void NAME(const uint16_t *restrict x,              \
                                                          const uint16_t *restrict y,              \
                                                          ZT *restrict z, int64_t M, int64_t N) {  \
        for (int64_t i = 0; i < M; i++) {                                                          \
            float a = cft_h2f(x[i]);                                                               \
            __m256 va = _mm256_set1_ps(a);                                                         \
            int64_t j = 0;                                                                         \
            for (; j + 8 <= N; j += 8)                                                             \
                STORE(z + i * N + j,                                                               \
                      _mm256_mul_ps(va,                                                            \
                                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + j)))));  \
            for (; j < N; j++)                                                                     \
                z[i * N + j] = TAIL(a * cft_h2f(y[j]));                                            \
        }                                                                                          \
    }
OUTER_F16C(outer_f16_f16c, uint16_t, STORE_H, cft_f2h)
OUTER_F16C(outer_f16_wide_f16c, float, STORE_W, cft_hr)
/* f32 values rounded to f16 in place */
__attribute__((target("avx2,f16c"))) static void round_f16_f16c(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                                                _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++)
        x[i] = cft_hr(x[i]);
}
static bool has_f16c(void) {
    static _Atomic int v = -1; /* two threads asking first store the same answer */
    int r = atomic_load_explicit(&v, memory_order_relaxed);
    if (r < 0) {
        unsigned a, b, c, d; /* F16C: cpuid leaf 1, ecx bit 29 (clang 14 has no "f16c" string) */
        r = __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u);
        atomic_store_explicit(&v, r, memory_order_relaxed);
    }
    return r;
}
#else
static bool has_f16c(void) {
    return false;
}
#define f32_to_f16_f16c f32_to_f16
#define f16_to_f32_f16c f16_to_f32
#define outer_f16_f16c outer_f16
#define outer_f16_wide_f16c outer_f16_wide
#define round_f16_f16c round_f16
#endif

void cft__f32_to_f16(const float *s, uint16_t *d, int64_t n) {
    if (has_f16c())
        f32_to_f16_f16c(s, d, n);
    else
        f32_to_f16(s, d, n);
}

void cft__f16_to_f32(const uint16_t *s, float *d, int64_t n) {
    if (has_f16c())
        f16_to_f32_f16c(s, d, n);
    else
        f16_to_f32(s, d, n);
}

CFT_CLONES void cft__f32_to_bf16(const float *s, uint16_t *d, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        d[i] = cft_f2bf(s[i]);
}

CFT_CLONES void cft__bf16_to_f32(const uint16_t *s, float *d, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        d[i] = cft_bf2f(s[i]);
}

/* Outer products z [M, N] = x (x) y whose rows are shorter than a vector
 * (a classifier's 10 outputs in per-sample gradients): each row computed
 * in CFT_OUTER_LANES lanes (y zero-padded), a fixed-length loop the
 * compiler vectorizes whole, and stored by CFT_OUTER_STORE: row i's lanes
 * go to z + i N and run into row i + 1, which the next row's store
 * overwrites; a row whose lanes would pass the end of z stores its N
 * values alone. Before, each such row was the vector loop's scalar tail:
 * per-sample gradients under bf16 autocast spent 30% less in their outer
 * products after it. The values are the row loop's: one product and
 * rounding per element. (f32's own loop, prims/dot.c, vectorizes its
 * tail, 8 lanes then scalars; these stores measured no faster there.) */
#define CFT_OUTER_LANES 16
/* before the lanes' loop: kept a loop (GCC would unroll it completely
 * first and leave the vectorizing to its straight-line pass, which keeps
 * the roundings' selects as branches, scalar), which the loop vectorizer
 * then turns into whole vectors */
#if defined(__GNUC__) && !defined(__clang__)
#define CFT_OUTER_LOOP _Pragma("GCC unroll 1")
#else
#define CFT_OUTER_LOOP
#endif
#define CFT_OUTER_STORE(z, t, i, M, N)                                                             \
    do {                                                                                           \
        if ((i) * (N) + CFT_OUTER_LANES <= (M) * (N))                                              \
            memcpy((z) + (i) * (N), (t), sizeof(t));                                               \
        else                                                                                       \
            memcpy((z) + (i) * (N), (t), sizeof(*(t)) * (size_t)(N));                              \
    } while (0)

/* z [M, N] = x (x) y, each product rounded to the half dtype and stored
 * as ZT (TO: the rounding, to the half's bits or to a float; FROM: the
 * half's conversion to f32) */
#define OUTER(NAME, ZT, TO, FROM)                                                                  \
    CFT_CLONES static void NAME(const uint16_t *restrict x, const uint16_t *restrict y,            \
                                ZT *restrict z, int64_t M, int64_t N) {                            \
        if (N < CFT_OUTER_LANES && M > 1) { /* short rows (above) */                               \
            float yf[CFT_OUTER_LANES] = {0};                                                       \
            for (int64_t j = 0; j < N; j++)                                                        \
                yf[j] = FROM(y[j]);                                                                \
            for (int64_t i = 0; i < M; i++) {                                                      \
                float a = FROM(x[i]);                                                              \
                ZT t[CFT_OUTER_LANES];                                                             \
                CFT_OUTER_LOOP                                                                     \
                for (int l = 0; l < CFT_OUTER_LANES; l++)                                          \
                    t[l] = TO(a * yf[l]);                                                          \
                CFT_OUTER_STORE(z, t, i, M, N);                                                    \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t i = 0; i < M; i++) {                                                          \
            float a = FROM(x[i]);                                                                  \
            for (int64_t j = 0; j < N; j++)                                                        \
                z[i * N + j] = TO(a * FROM(y[j]));                                                 \
        }                                                                                          \
    }
OUTER(outer_bf16, uint16_t, cft_f2bf, cft_bf2f)
OUTER(outer_f16, uint16_t, cft_f2h, cft_h2f)
/* stored as f32 values (the jit's fold of a product and its convert back
 * to f32) */
OUTER(outer_bf16_wide, float, cft_bfr, cft_bf2f)
OUTER(outer_f16_wide, float, cft_hr, cft_h2f)

void cft__outer_half_wide(int code, const uint16_t *x, const uint16_t *y, float *z, int64_t M,
                          int64_t N) {
    if (code == 1)
        outer_bf16_wide(x, y, z, M, N);
    else if (has_f16c())
        outer_f16_wide_f16c(x, y, z, M, N);
    else
        outer_f16_wide(x, y, z, M, N);
}

CFT_CLONES static void round_bf16(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = cft_bfr(x[i]);
}
CFT_CLONES static void round_f16(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = cft_hr(x[i]);
}
void cft__round_half(float *x, cft_dtype half, int64_t n) {
    if (half == CFT_BF16)
        round_bf16(x, n);
    else if (has_f16c())
        round_f16_f16c(x, n);
    else
        round_f16(x, n);
}

void cft__outer_half(int code, const uint16_t *x, const uint16_t *y, uint16_t *z, int64_t M,
                     int64_t N) {
    if (code == 1)
        outer_bf16(x, y, z, M, N);
    else if (has_f16c())
        outer_f16_f16c(x, y, z, M, N);
    else
        outer_f16(x, y, z, M, N);
}
