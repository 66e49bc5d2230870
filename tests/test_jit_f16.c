/* test_jit_f16.c: f16 in the jit's fused kernels (lower/fuse.c, emit.c,
 * emit_cuda.c), as test_jit_bf16.c for bf16. Kernels and library convert
 * with the same integer routines (array/half_fns.h: no F16C, no
 * _Float16), checked here against the compiler's _Float16 and against
 * each other, bit for bit: every one of the 65536 f16 values to f32, f32
 * and f64 values to f16 (ties to even in the normal and subnormal ranges,
 * the overflow threshold, infinities, NaNs with payloads, and 2^16 random
 * bit patterns). Chains
 * of f16 arithmetic are single f32 operations rounded once on both sides
 * (bitwise); exp and tanh may differ by an f32 ulp between libm and the
 * kernels' vector library, one f16 ulp at most (rtol 2^-10). A
 * conversion from f64 to f16 runs eagerly (one rounding, as the
 * library's). Fusion is checked on the plan's DOT. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/half_fns.h" /* cft_hr, cft_hp: what kernels round and store with */
#include "check.h"
#include "support/half_chains.h"

/* the compiler's binary16, the reference (clang before 15 has it on x86
 * only as the storage type __fp16, which converts the same way) */
#if defined(__clang__) && __clang_major__ < 15
typedef __fp16 ref16;
#else
typedef _Float16 ref16;
#endif

/* in[0] as env's dtype (times 1: an equation the kernel computes) */
static cft_status to_dt(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_astype(cft_mul_s(in[0], 1), *(const cft_dtype *)env);
    return cft_failed(out[0]) ? cft_error_code(out[0]) : CFT_OK;
}

/* the stored bits of a and b (2 or 4 bytes each) agree; else the first
 * difference is reported */
static bool same_bits(cft_array *a, cft_array *b, int width, int64_t n) {
    void *x = malloc((size_t)(width * n)), *y = malloc((size_t)(width * n));
    cft_dtype dt = width == 2 ? CFT_F16 : CFT_F32;
    bool ok = x && y && cft_copy_to(a, dt, x) == CFT_OK && cft_copy_to(b, dt, y) == CFT_OK;
    for (int64_t i = 0; ok && i < n; i++) {
        uint32_t u = width == 2 ? ((uint16_t *)x)[i] : ((uint32_t *)x)[i];
        uint32_t v = width == 2 ? ((uint16_t *)y)[i] : ((uint32_t *)y)[i];
        if (u != v) {
            fprintf(stderr, "  element %lld: 0x%x against 0x%x\n", (long long)i, u, v);
            ok = false;
        }
    }
    free(x), free(y);
    return ok;
}

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* f32 values for the conversions: edge cases (ties to even in the normal
 * and subnormal ranges, the overflow threshold, infinities, zeros, NaNs
 * with payloads, subnormal f32), then random bit patterns; NCASE values,
 * malloc'd */
enum { NCASE = 65536 + 64 };
static float *f32_cases(void) {
    float *v = malloc(sizeof(float) * NCASE);
    uint32_t s = 12345;
    int n = 0;
    const float edge[] = {1 + 1.0f / 2048,
                          1 + 3.0f / 2048,
                          1 + 1.0f / 4096,
                          65504,
                          65519.99f,
                          65520,
                          65536,
                          1e10f,
                          INFINITY,
                          -INFINITY,
                          NAN,
                          -NAN,
                          0.0f,
                          -0.0f,
                          6.103515625e-05f, /* 2^-14, the smallest normal */
                          6.0975552e-05f,   /* just below it */
                          5.9604645e-08f,   /* 2^-24 */
                          2.9802322e-08f,   /* 2^-25: ties to 0 */
                          2.9802326e-08f,   /* just above: to 2^-24 */
                          8.940697e-08f,    /* 1.5 * 2^-24: ties to 2 */
                          1.4901161e-07f,   /* 2.5 * 2^-24: ties to 2 */
                          1e-45f,
                          -3e-39f};
    for (size_t k = 0; k < sizeof edge / sizeof edge[0]; k++)
        v[n++] = edge[k];
    v[n++] = u2f(0x7f800001u);                           /* a signalling NaN */
    v[n++] = u2f(0xffc12345u);                           /* a quiet NaN with a payload */
    for (uint32_t m = 0x38000000u; n < 64; m += 0x1000u) /* subnormal-range halfway points */
        v[n++] = u2f(m | 0x800u);
    while (n < NCASE) { /* random bit patterns */
        s = s * 1664525u + 1013904223u;
        v[n++] = u2f(s ^ (s >> 7));
    }
    return v;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_array *x = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){96, 200}, 2);
    cft_array *w =
        cft_astype(cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){96, 200}, 2), CFT_F16);
    const cft_dtype F16 = CFT_F16, F32 = CFT_F32;

    TEST("an f16 chain: the interpreter's bits, twice, on new inputs, and one kernel") {
        cft_fn *f = cft_fn_new(half_chain, (void *)&F16, 2, 2), *j = cft_jit(f);
        cft_array *e[2], *g[2];
        CHECK(cft_fn_call(f, (cft_array *[]){x, w}, e) == CFT_OK);
        for (int r = 0; r < 2; r++) {
            CHECK(cft_fn_call(j, (cft_array *[]){x, w}, g) == CFT_OK);
            CHECK(cft_array_dtype(g[1]) == CFT_F16);
            CHECK(same_bits(g[0], e[0], 4, 96 * 200));
            CHECK(same_bits(g[1], e[1], 2, 96 * 200));
        }
        cft_array *x2 = cft_mul_s(x, -300), *w2 = cft_astype(cft_mul_s(w, 0.7), CFT_F16);
        CHECK(cft_fn_call(f, (cft_array *[]){x2, w2}, e) == CFT_OK);
        CHECK(cft_fn_call(j, (cft_array *[]){x2, w2}, g) == CFT_OK);
        CHECK(same_bits(g[0], e[0], 4, 96 * 200)); /* overflow to infinity included */
        CHECK(same_bits(g[1], e[1], 2, 96 * 200));
        int in0, other;
        half_plan_groups(j, &in0, &other);
        CHECK_MSG(in0 == 5 && other == 0, "%d equations in group 0, %d elsewhere", in0, other);
    }

    TEST("every f16 value to f32 in a kernel: the library's bits (NaN payloads, subnormals)") {
        uint16_t *h = malloc(sizeof(uint16_t) * 65536);
        for (int i = 0; h && i < 65536; i++)
            h[i] = (uint16_t)i;
        cft_array *a = cft_from_data(h, CFT_F16, (int64_t[]){65536}, 1);
        free(h);
        cft_fn *f = cft_fn_new(to_dt, (void *)&F32, 1, 1), *j = cft_jit(f);
        cft_array *e = cft_fn_call1(f, &a);
        for (int r = 0; r < 2; r++)
            CHECK(same_bits(cft_fn_call1(j, &a), e, 4, 65536));
    }

    TEST("the library's f16 conversions are IEEE's: the compiler's binary16 on every f16 value, "
         "2^16 + 64 f32 values and their f64 neighbours") {
        uint16_t *h = malloc(sizeof(uint16_t) * 65536);
        float *f = malloc(sizeof(float) * 65536);
        for (int i = 0; i < 65536; i++)
            h[i] = (uint16_t)i;
        CHECK(cft_copy_to(cft_from_data(h, CFT_F16, (int64_t[]){65536}, 1), CFT_F32, f) == CFT_OK);
        int bad = 0;
        for (int i = 0; i < 65536; i++) {
            ref16 r;
            memcpy(&r, &h[i], 2);
            float want = (float)r;
            bad += f2u(f[i]) != f2u(want);
        }
        CHECK_MSG(bad == 0, "%d f16 values convert otherwise", bad);
        float *v = f32_cases();
        uint16_t *got = malloc(sizeof(uint16_t) * NCASE);
        CHECK(cft_copy_to(cft_from_data(v, CFT_F32, (int64_t[]){NCASE}, 1), CFT_F16, got) ==
              CFT_OK);
        bad = 0;
        for (int i = 0; i < NCASE; i++) {
            ref16 r = (ref16)v[i];
            uint16_t want;
            memcpy(&want, &r, 2);
            bad += got[i] != want;
        }
        CHECK_MSG(bad == 0, "%d f32 values convert otherwise", bad);
        /* f64: each value nudged by a few ulps of f64, so that f32's
         * rounding would land on ties f64 does not (one rounding, not two) */
        double *d = malloc(sizeof(double) * NCASE);
        for (int i = 0; i < NCASE; i++)
            d[i] = (double)v[i] * (1 + (double)(i % 5 - 2) * 1e-15);
        CHECK(cft_copy_to(cft_from_data(d, CFT_F64, (int64_t[]){NCASE}, 1), CFT_F16, got) ==
              CFT_OK);
        bad = 0;
        for (int i = 0; i < NCASE; i++) {
            ref16 r = (ref16)d[i];
            uint16_t want;
            memcpy(&want, &r, 2);
            bad += got[i] != want;
        }
        CHECK_MSG(bad == 0, "%d f64 values convert otherwise", bad);
        free(h), free(f), free(v), free(got), free(d);
    }

    TEST("the kernels' f16 rounding (cft_hr) and packing (cft_hp) are the compiler's binary16 "
         "on 2^32 / 251 f32 bit patterns (CFT_TEST_EXHAUSTIVE=1: all 2^32)") {
        const char *ex = getenv("CFT_TEST_EXHAUSTIVE");
        const uint64_t step = ex && *ex && strcmp(ex, "0") ? 1 : 251;
        uint64_t bad_r = 0, bad_p = 0;
        for (uint64_t i = 0; i < (1ull << 32); i += step) {
            uint32_t u = (uint32_t)i;
            float x;
            memcpy(&x, &u, 4);
            ref16 r = (ref16)x;
            uint16_t want;
            memcpy(&want, &r, 2);
            float rounded = cft_hr(x), back = (float)r;
            bad_r += f2u(rounded) != f2u(back);
            bad_p += cft_hp(rounded) != want;
        }
        CHECK_MSG(bad_r == 0 && bad_p == 0, "%llu roundings and %llu packings differ",
                  (unsigned long long)bad_r, (unsigned long long)bad_p);
    }

    TEST(
        "the kernels' bf16 rounding (cft_bfr, in 32-bit lanes) is the packing and widening "
        "(cft_bf2f(cft_f2bf)) on 2^32 / 251 f32 bit patterns and every tie (CFT_TEST_EXHAUSTIVE=1: "
        "all 2^32)") {
        const char *ex = getenv("CFT_TEST_EXHAUSTIVE");
        const uint64_t step = ex && *ex && strcmp(ex, "0") ? 1 : 251;
        uint64_t bad = 0;
        for (uint64_t i = 0; i < (1ull << 32); i += step) {
            float x = u2f((uint32_t)i);
            bad += f2u(cft_bfr(x)) != f2u(cft_bf2f(cft_f2bf(x)));
        }
        for (uint32_t hi = 0; hi < 65536; hi++) /* each high half's tie and its neighbours */
            for (uint32_t lo = 0x7fff; lo <= 0x8001; lo++) {
                float x = u2f(hi << 16 | lo);
                bad += f2u(cft_bfr(x)) != f2u(cft_bf2f(cft_f2bf(x)));
            }
        CHECK_MSG(bad == 0, "%llu roundings differ", (unsigned long long)bad);
    }

    TEST("f32 to f16 in a kernel: ties to even (normal and subnormal), overflow, NaNs, random "
         "bits") {
        float *v = f32_cases();
        cft_array *a = cft_from_data(v, CFT_F32, (int64_t[]){NCASE}, 1);
        free(v);
        cft_fn *f = cft_fn_new(to_dt, (void *)&F16, 1, 1), *j = cft_jit(f);
        cft_array *e = cft_fn_call1(f, &a);
        for (int r = 0; r < 2; r++)
            CHECK(same_bits(cft_fn_call1(j, &a), e, 2, NCASE));
        int in0, other;
        half_plan_groups(j, &in0, &other);
        CHECK_MSG(in0 == 2 && other == 0, "%d equations in group 0, %d elsewhere", in0, other);
    }

    TEST("exp and tanh of f16 in a kernel: within one f16 ulp of the interpreter") {
        cft_fn *f = cft_fn_new(half_transc, NULL, 2, 1), *j = cft_jit(f);
        cft_array *e = cft_fn_call1(f, (cft_array *[]){x, w});
        for (int r = 0; r < 2; r++) {
            cft_array *g = cft_fn_call1(j, (cft_array *[]){x, w});
            CHECK(cft_array_dtype(g) == CFT_F16);
            CHECK_ARRAY_CLOSE(g, e, 1.0 / 1024, 0);
        }
    }

    TEST("f64 to f16 stays eager (one rounding, the library's), the rest fuses") {
        cft_array *d = cft_astype(cft_mul_s(x, 1000), CFT_F64);
        cft_fn *f = cft_fn_new(to_dt, (void *)&F16, 1, 1), *j = cft_jit(f);
        cft_array *e = cft_fn_call1(f, &d);
        for (int r = 0; r < 2; r++)
            CHECK(same_bits(cft_fn_call1(j, &d), e, 2, 96 * 200));
        int in0, other;
        half_plan_groups(j, &in0, &other);
        CHECK_MSG(in0 + other == 1, "%d equations in kernels", in0 + other);
    }
    return check_summary();
}
