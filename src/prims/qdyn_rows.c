/* qdyn_rows.c: the row quantization of dynamic int8 products (qlinear.c's
 * dot_qlinear): each row of x rounded to 7 bits with its own scale, on
 * every element of the activations of every call. This file is compiled
 * at -O3 with -fno-trapping-math (CMakeLists.txt), as array/half_cast.c
 * is: under CFT_VEC's optimize attribute GCC 12 leaves its mixed-width
 * loops (f32 read, f64 arithmetic, u8 stored) scalar. The row's largest
 * magnitude is found on the values' bits (the order of non-negative
 * floats is their bits' order), which vectorizes where a float max with
 * NaN operands does not; neither changes a value (test_qdyn_rows checks
 * the rows exactly against the scalar rule, test_quant and test_prims
 * the products against their references). */
#include <stdint.h>
#include <string.h>

#include "core/par.h"
#include "core/vec.h"
#include "prims/qlinear.h"

typedef struct {
    const void *x;
    bool dbl;
    int64_t k;
    uint8_t *xq; /* [M, K] */
    double *xs;  /* [M] */
} quant_rows;

/* nearbyint for |v| < 2^51 without a libm call: adding and subtracting
 * 1.5 * 2^52 rounds half to even in the default rounding mode */
static inline double rint_fast(double v) {
    const double big = 6755399441055744.0;
    return (v + big) - big;
}

/* the largest |x[j]| of a row, NaNs left out (a magnitude's bits above
 * infinity's are masked to 0). The masks are ands, not selects: GCC 12
 * vectorizes this reduction only so. The bits, sign cleared, compare as
 * signed integers (AVX2 has no unsigned 64-bit max). */
typedef int32_t __attribute__((may_alias)) i32a;
typedef int64_t __attribute__((may_alias)) i64a;

CFT_CLONES static double absmax_f32(const float *restrict x, int64_t k) {
    const i32a *xb = (const i32a *)x;
    int32_t a = 0;
    for (int64_t j = 0; j < k; j++) {
        int32_t b = xb[j] & INT32_C(0x7fffffff);
        b &= -(int32_t)(b <= INT32_C(0x7f800000));
        a = a > b ? a : b;
    }
    float f;
    memcpy(&f, &a, 4);
    return (double)f;
}
CFT_CLONES static double absmax_f64(const double *restrict x, int64_t k) {
    const i64a *xb = (const i64a *)x;
    int64_t a = 0;
    for (int64_t j = 0; j < k; j++) {
        int64_t b = xb[j] & INT64_C(0x7fffffffffffffff);
        b &= -(int64_t)(b <= INT64_C(0x7ff0000000000000));
        a = a > b ? a : b;
    }
    double f;
    memcpy(&f, &a, 8);
    return f;
}

/* one row: xs = max|x| / 63, xq = round(x * (63 / max|x|)) + 64. Written
 * without branches (min/max select), which random signs would
 * mispredict; a NaN clamps to 63, as fmin/fmax order it. */
#define QUANT_ROW(T, ABSMAX)                                                                       \
    do {                                                                                           \
        const int64_t k = c->k; /* a local: the u8 stores could alias c->k */                      \
        const T *restrict xr = (const T *)c->x + m * k;                                            \
        double a = ABSMAX(xr, k);                                                                  \
        bool ok = a > 0 && a <= 1.7e308;                                                           \
        double inv = ok ? 63 / a : 1;                                                              \
        c->xs[m] = ok ? a / 63 : 1;                                                                \
        uint8_t *restrict q = c->xq + m * k;                                                       \
        for (int64_t j = 0; j < k; j++) {                                                          \
            double v = rint_fast((double)xr[j] * inv);                                             \
            v = v < 63 ? v : 63;                                                                   \
            v = v > -63 ? v : -63;                                                                 \
            q[j] = (uint8_t)(int32_t)(v + 64);                                                     \
        }                                                                                          \
    } while (0)

CFT_CLONES static void quant_f32(quant_rows *c, int64_t lo, int64_t hi) {
    for (int64_t m = lo; m < hi; m++)
        QUANT_ROW(float, absmax_f32);
}
CFT_CLONES static void quant_f64(quant_rows *c, int64_t lo, int64_t hi) {
    for (int64_t m = lo; m < hi; m++)
        QUANT_ROW(double, absmax_f64);
}
static void quant_body(void *ctx, int64_t lo, int64_t hi) {
    quant_rows *c = ctx;
    if (c->dbl)
        quant_f64(c, lo, hi);
    else
        quant_f32(c, lo, hi);
}

void cft__qdyn_rows(const void *x, bool dbl, int64_t M, int64_t K, uint8_t *xq, double *xs) {
    quant_rows qr = {x, dbl, K, xq, xs};
    cft__par_for(M, 4.0 * (double)K, quant_body, &qr);
}
