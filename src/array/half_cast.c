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
#include <stdint.h>

#include "array/array.h"
#include "array/half_fns.h"
#include "core/vec.h"

CFT_CLONES void cft__f32_to_f16(const float *s, uint16_t *d, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        d[i] = cft_f2h(s[i]);
}

CFT_CLONES void cft__f16_to_f32(const uint16_t *s, float *d, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        d[i] = cft_h2f(s[i]);
}

CFT_CLONES void cft__f32_to_bf16(const float *s, uint16_t *d, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        d[i] = cft_f2bf(s[i]);
}

CFT_CLONES void cft__bf16_to_f32(const uint16_t *s, float *d, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        d[i] = cft_bf2f(s[i]);
}

/* z [M, N] = x (x) y, each product rounded to the half dtype (TO / FROM:
 * its conversions) */
#define OUTER(NAME, TO, FROM)                                                                      \
    CFT_CLONES static void NAME(const uint16_t *restrict x, const uint16_t *restrict y,            \
                                uint16_t *restrict z, int64_t M, int64_t N) {                      \
        for (int64_t i = 0; i < M; i++) {                                                          \
            float a = FROM(x[i]);                                                                  \
            for (int64_t j = 0; j < N; j++)                                                        \
                z[i * N + j] = TO(a * FROM(y[j]));                                                 \
        }                                                                                          \
    }
OUTER(outer_bf16, cft_f2bf, cft_bf2f)
OUTER(outer_f16, cft_f2h, cft_h2f)

void cft__outer_half(int code, const uint16_t *x, const uint16_t *y, uint16_t *z, int64_t M,
                     int64_t N) {
    if (code == 1)
        outer_bf16(x, y, z, M, N);
    else
        outer_f16(x, y, z, M, N);
}
