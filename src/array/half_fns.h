/* half_fns.h: conversions between f32 and the half types, in integer and
 * float operations alone (no F16C, no _Float16, no CUDA header): bf16 is
 * the top half of an f32, rounded to nearest-even, a NaN kept quiet; f16
 * is IEEE binary16, rounded to nearest-even with subnormals, overflowing
 * to infinity, a NaN kept quiet with its payload's top bits (as x86's
 * vcvtps2ph and libgcc's conversions do). They serve the library
 * (array/dtype.c: every cast and element access) and the jit's kernels:
 * as special_fns.h, the body is one argument of CFT_HALF_EMIT, which
 * lower/emit.c and emit_cuda.c define to stringify it into the prelude of
 * every generated file, so that kernels and interpreter convert with the
 * very same code. The includer provides cft_u2f / cft_f2u (the bits of a
 * float): here, for the library; the preludes, for the kernels. No
 * preprocessor directives inside the body. cft_bfr / cft_hr round a
 * float to the half's values (cft_hr in the f32 format directly: the
 * 13 low bits of a normal value rounded off, a subnormal one rounded to
 * a multiple of 2^-24 in float arithmetic; the same bits as
 * cft_h2f(cft_f2h(f)) for all 2^32 inputs, and half its operations;
 * cft_bfr likewise in 32-bit lanes: the same bits as
 * cft_bf2f(cft_f2bf(f)) for all 2^32 inputs, with no narrowing to 16 bits
 * and widening back, which cost a bf16 outer product 1.4x f32's time);
 * cft_bfp / cft_hp pack a float rounded so already (a kernel's results)
 * without rounding again. The library used the
 * compiler's _Float16 before: without F16C (the library is built for any
 * x86-64) every conversion was a libgcc call that also raised the
 * floating-point flags, and f16 autocast spent a quarter of its step in
 * them. Written without branches (every case computed, one selected), so
 * that their loops vectorize. test_jit_f16 checks these against _Float16
 * on every f16 value and 2^16 f32 bit patterns. */
#ifndef CFT_HALF_FNS_H
#define CFT_HALF_FNS_H
#ifndef CFT_HALF_EMIT
#include <stdint.h>
#include <string.h>
#define CFT_HALF_EMIT(...) __VA_ARGS__
static inline float cft_u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t cft_f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
#endif

/* clang-format off */
CFT_HALF_EMIT(
static inline float cft_bf2f(uint16_t h) { return cft_u2f((uint32_t)h << 16); }
static inline uint16_t cft_f2bf(float f) {
    uint32_t u = cft_f2u(f);
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u
                                                       : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float cft_bfr(float f) {
    uint32_t u = cft_f2u(f);
    return cft_u2f(((u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u
                                                    : u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}
static inline uint16_t cft_bfp(float f) { return (uint16_t)(cft_f2u(f) >> 16); }
static inline float cft_h2f(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t naninf = s | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u);
    uint32_t sub = s | cft_f2u((float)(int32_t)m * 5.9604644775390625e-8f);
    uint32_t norm = s | ((e + 112u) << 23) | (m << 13);
    return cft_u2f(e == 0x1fu ? naninf : e == 0u ? sub : norm);
}
static inline uint16_t cft_f2h(float f) {
    uint32_t u = cft_f2u(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    uint32_t nan = s | 0x7e00u | ((a >> 13) & 0x3ffu), r = a - 0x38000000u;
    uint32_t norm = s | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
    float m = cft_u2f(a < 0x38800000u ? a : 0u) * 16777216.0f;
    m = (m + 12582912.0f) - 12582912.0f;
    uint32_t sub = s | (uint32_t)(int32_t)m;
    return (uint16_t)(a > 0x7f800000u ? nan : a >= 0x477ff000u ? s | 0x7c00u
                      : a >= 0x38800000u ? norm : sub);
}
static inline float cft_hr(float f) {
    uint32_t u = cft_f2u(f), s = u & 0x80000000u, a = u & 0x7fffffffu;
    uint32_t nan = (u & 0xffffe000u) | 0x400000u;
    uint32_t norm = s | ((a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u);
    float m = cft_u2f(a < 0x38800000u ? a : 0u) * 16777216.0f;
    m = (m + 12582912.0f) - 12582912.0f;
    uint32_t sub = s | cft_f2u(m * 5.9604644775390625e-8f);
    return cft_u2f(a > 0x7f800000u   ? nan
                   : a >= 0x477ff000u ? s | 0x7f800000u
                   : a >= 0x38800000u ? norm
                                      : sub);
}
static inline uint16_t cft_hp(float f) {
    uint32_t u = cft_f2u(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    uint32_t nan = s | 0x7e00u | ((a >> 13) & 0x3ffu), norm = s | ((a - 0x38000000u) >> 13);
    uint32_t sub = s | (uint32_t)(int32_t)(cft_u2f(a < 0x38800000u ? a : 0u) * 16777216.0f);
    return (uint16_t)(a > 0x7f800000u    ? nan
                      : a >= 0x7f800000u ? s | 0x7c00u
                      : a >= 0x38800000u ? norm
                                         : sub);
}
)
/* clang-format on */

#endif
