/* dtype.c: element types: names, sizes, promotion and conversion loops. */
#include <stdint.h>
#include <string.h>

#include "array/array.h"

static const char *names[CFT_NDTYPES] = {"bool", "i32", "i64", "f32", "f64"};
static const size_t sizes[CFT_NDTYPES] = {1, 4, 8, 4, 8};

const char *cft_dtype_name(cft_dtype dt) {
    return (unsigned)dt < CFT_NDTYPES ? names[dt] : "?";
}
size_t cft_dtype_size(cft_dtype dt) { return (unsigned)dt < CFT_NDTYPES ? sizes[dt] : 1; }
bool cft_dtype_is_float(cft_dtype dt) { return dt == CFT_F32 || dt == CFT_F64; }

/* JAX's lattice restricted to {bool, i32, i64, f32, f64} is a chain, so the
 * join is the max in enum order:
 *        bool  i32  i64  f32  f64
 *  bool  bool  i32  i64  f32  f64
 *  i32   i32   i32  i64  f32  f64
 *  i64   i64   i64  i64  f32  f64
 *  f32   f32   f32  f32  f32  f64
 *  f64   f64   f64  f64  f64  f64 */
cft_dtype cft_promote(cft_dtype a, cft_dtype b) { return a > b ? a : b; }

#define CAST_LOOP(ST, DT, CONV)                                                                    \
    do {                                                                                           \
        const ST *s = src;                                                                         \
        DT *d = dst;                                                                               \
        for (int64_t i = 0; i < n; i++) d[i] = CONV(s[i]);                                         \
    } while (0)
#define ID(v) (v)
#define TOBOOL(v) ((v) != 0)

#define CAST_FROM(ST)                                                                              \
    switch (ddt) {                                                                                 \
    case CFT_BOOL: CAST_LOOP(ST, uint8_t, TOBOOL); break;                                          \
    case CFT_I32: CAST_LOOP(ST, int32_t, (int32_t)); break;                                        \
    case CFT_I64: CAST_LOOP(ST, int64_t, (int64_t)); break;                                        \
    case CFT_F32: CAST_LOOP(ST, float, (float)); break;                                            \
    case CFT_F64: CAST_LOOP(ST, double, (double)); break;                                          \
    default: break;                                                                                \
    }

void cft__cast(const void *src, cft_dtype sdt, void *dst, cft_dtype ddt, int64_t n) {
    if (sdt == ddt) {
        memcpy(dst, src, (size_t)n * sizes[sdt]);
        return;
    }
    switch (sdt) {
    case CFT_BOOL: CAST_FROM(uint8_t); break;
    case CFT_I32: CAST_FROM(int32_t); break;
    case CFT_I64: CAST_FROM(int64_t); break;
    case CFT_F32: CAST_FROM(float); break;
    case CFT_F64: CAST_FROM(double); break;
    default: break;
    }
}

double cft__get(const void *p, cft_dtype dt, int64_t i) {
    switch (dt) {
    case CFT_BOOL: return ((const uint8_t *)p)[i];
    case CFT_I32: return ((const int32_t *)p)[i];
    case CFT_I64: return (double)((const int64_t *)p)[i];
    case CFT_F32: return ((const float *)p)[i];
    case CFT_F64: return ((const double *)p)[i];
    default: return 0;
    }
}

void cft__set(void *p, cft_dtype dt, int64_t i, double v) {
    switch (dt) {
    case CFT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case CFT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case CFT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case CFT_F32: ((float *)p)[i] = (float)v; break;
    case CFT_F64: ((double *)p)[i] = v; break;
    default: break;
    }
}
