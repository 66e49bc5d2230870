/* test_arrays.c: the array layer. Dtypes and the promotion table, creation
 * (copies, constants, ranges, eye), O(1) views that share the buffer
 * (reshape, transpose, broadcast, slice, squeeze, expand_dims), immutability
 * of created arrays, the NumPy-style printer (exact text), and allclose /
 * max_abs_diff. View sharing is checked on the internal record
 * (src/array/array.h): the public API cannot observe it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "check.h"

/* The printed form of x (cft_print), as a malloc'd string. */
static char *print_str(const cft_array *x, const char *name) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    if (name)
        cft_print_named(name, x, f);
    else
        cft_print(x, f);
    fclose(f);
    return buf;
}

static void check_print(const cft_array *x, const char *name, const char *want, const char *file,
                        int line) {
    char *got = print_str(x, name);
    if (!got || strcmp(got, want) != 0)
        check_fail_(file, line, "printer:\n--- want\n%s--- got\n%s---", want, got ? got : "(null)");
    free(got);
}
#define CHECK_PRINT(x, name, want) check_print((x), (name), (want), __FILE__, __LINE__)

/* Values of a concrete array as doubles, row-major (via cft_item_at). */
static int values_are(const cft_array *x, const double *want, int64_t n) {
    if (cft_failed(x) || cft_array_size(x) != n)
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (cft_item_at(x, i) != want[i])
            return 0;
    return 1;
}

static int shape_is(const cft_array *x, int ndim, const int64_t *shape) {
    if (cft_failed(x) || cft_array_ndim(x) != ndim)
        return 0;
    for (int i = 0; i < ndim; i++)
        if (cft_array_shape(x)[i] != shape[i])
            return 0;
    return 1;
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    /* ---------------- dtypes ---------------- */

    TEST("dtype names, sizes, float-ness") {
        static const char *names[CFT_NDTYPES] = {"bool", "i32",  "i64", "f32", "f64",
                                                 "f16",  "bf16", "c64", "c128"};
        static const size_t sizes[CFT_NDTYPES] = {1, 4, 8, 4, 8, 2, 2, 8, 16};
        for (int d = 0; d < CFT_NDTYPES; d++) {
            CHECK(strcmp(cft_dtype_name((cft_dtype)d), names[d]) == 0);
            CHECK_EQ(cft_dtype_size((cft_dtype)d), sizes[d]);
            CHECK_EQ(cft_dtype_is_float((cft_dtype)d), d >= CFT_F32 && d <= CFT_BF16);
            CHECK_EQ(cft_dtype_is_complex((cft_dtype)d), d >= CFT_C64);
            CHECK_EQ(cft_dtype_is_inexact((cft_dtype)d), d >= CFT_F32);
        }
    }

    TEST("cft_promote: the full table of core.h (JAX's lattice on this set)") {
        /* rows a, columns b: bool < i32 < i64 < {f16, bf16} < f32 < f64; f16 v bf16 = f32;
         * c64 above f32, c128 above f64 and c64; f64 v c64 = c128 */
#define C1 CFT_C64
#define C2 CFT_C128
        static const cft_dtype want[CFT_NDTYPES][CFT_NDTYPES] = {
            /*          bool      i32      i64      f32      f64      f16      bf16 c64 c128 */
            /* bool */ {CFT_BOOL, CFT_I32, CFT_I64, CFT_F32, CFT_F64, CFT_F16, CFT_BF16, C1, C2},
            /* i32  */ {CFT_I32, CFT_I32, CFT_I64, CFT_F32, CFT_F64, CFT_F16, CFT_BF16, C1, C2},
            /* i64  */ {CFT_I64, CFT_I64, CFT_I64, CFT_F32, CFT_F64, CFT_F16, CFT_BF16, C1, C2},
            /* f32  */ {CFT_F32, CFT_F32, CFT_F32, CFT_F32, CFT_F64, CFT_F32, CFT_F32, C1, C2},
            /* f64  */ {CFT_F64, CFT_F64, CFT_F64, CFT_F64, CFT_F64, CFT_F64, CFT_F64, C2, C2},
            /* f16  */ {CFT_F16, CFT_F16, CFT_F16, CFT_F32, CFT_F64, CFT_F16, CFT_F32, C1, C2},
            /* bf16 */ {CFT_BF16, CFT_BF16, CFT_BF16, CFT_F32, CFT_F64, CFT_F32, CFT_BF16, C1, C2},
            /* c64  */ {C1, C1, C1, C1, C2, C1, C1, C1, C2},
            /* c128 */ {C2, C2, C2, C2, C2, C2, C2, C2, C2},
        };
#undef C1
#undef C2
        for (int a = 0; a < CFT_NDTYPES; a++)
            for (int b = 0; b < CFT_NDTYPES; b++)
                CHECK_MSG(cft_promote((cft_dtype)a, (cft_dtype)b) == want[a][b],
                          "promote(%s, %s) = %s, want %s", cft_dtype_name((cft_dtype)a),
                          cft_dtype_name((cft_dtype)b),
                          cft_dtype_name(cft_promote((cft_dtype)a, (cft_dtype)b)),
                          cft_dtype_name(want[a][b]));
    }

    TEST("binary ops promote their operands (i64 + f32 -> f32, as in JAX)") {
        for (int a = 0; a < CFT_NDTYPES; a++)
            for (int b = 0; b < CFT_NDTYPES; b++) {
                cft_array *x = cft_ones((cft_dtype)a, (int64_t[]){2}, 1);
                cft_array *y = cft_ones((cft_dtype)b, (int64_t[]){2}, 1);
                cft_array *z = cft_where(cft_scalar(1, CFT_BOOL), x, y); /* every dtype */
                CHECK_MSG(!cft_failed(z), "%s", cft_error_message(z));
                CHECK_EQ(cft_array_dtype(z), cft_promote((cft_dtype)a, (cft_dtype)b));
                CHECK_EQ(cft_item_at(z, 1), 1);
            }
    }

    /* ---------------- creation ---------------- */

    TEST("cft_from_data copies, for every dtype") {
        uint8_t b[3] = {1, 0, 1};
        int32_t i32[3] = {-7, 0, 2147483647};
        int64_t i64[3] = {-5, 1ll << 40, 3};
        float f32[3] = {1.5f, -2.25f, 1e-3f};
        double f64[3] = {0.1, -1e300, 3.0};
        uint16_t f16[3] = {0x3E00, 0xC080, 0x3400},
                 bf16[3] = {0x3FC0, 0xC010, 0x3E80}; /* raw bits */
        float c64[6] = {1.5f, 7, -2.25f, 0, 1e-3f, -1};
        double c128[6] = {0.1, 2, -1e300, 0, 3.0, 4};
        const void *src[CFT_NDTYPES] = {b, i32, i64, f32, f64, f16, bf16, c64, c128};
        double want[CFT_NDTYPES][3] = {{1, 0, 1},
                                       {-7, 0, 2147483647.0},
                                       {-5, 1099511627776.0, 3},
                                       {1.5, -2.25, (double)1e-3f},
                                       {0.1, -1e300, 3.0},
                                       {1.5, -2.25, 0.25},
                                       {1.5, -2.25, 0.25},
                                       {1.5, -2.25, (double)1e-3f}, /* real parts */
                                       {0.1, -1e300, 3.0}};
        for (int d = 0; d < CFT_NDTYPES; d++) {
            cft_array *x = cft_from_data(src[d], (cft_dtype)d, (int64_t[]){3}, 1);
            CHECK(cft_is_concrete(x));
            CHECK_EQ(cft_array_dtype(x), d);
            CHECK_EQ(cft_array_ndim(x), 1);
            CHECK_EQ(cft_array_size(x), 3);
            CHECK_MSG(values_are(x, want[d], 3), "dtype %s", cft_dtype_name((cft_dtype)d));
        }
        /* round trip through cft_copy_to, with and without conversion */
        cft_array *x = cft_from_f64(f64, (int64_t[]){3}, 1);
        double back[3];
        int32_t asint[3];
        CHECK_EQ(cft_copy_to(x, CFT_F64, back), CFT_OK);
        CHECK(memcmp(back, f64, sizeof back) == 0);
        cft_array *y = cft_from_f32((float[]){1.9f, -1.9f, 0.0f}, (int64_t[]){3}, 1);
        CHECK_EQ(cft_copy_to(y, CFT_I32, asint), CFT_OK); /* truncation toward zero */
        CHECK(asint[0] == 1 && asint[1] == -1 && asint[2] == 0);
    }

    TEST("immutability: changing the source buffer does not change the array") {
        float buf[6] = {1, 2, 3, 4, 5, 6};
        cft_array *x = cft_from_f32(buf, (int64_t[]){2, 3}, 2);
        cft_array *v = cft_transpose(x, NULL); /* a view made before the change */
        for (int i = 0; i < 6; i++)
            buf[i] = -100.0f;
        CHECK(values_are(x, (double[]){1, 2, 3, 4, 5, 6}, 6));
        CHECK(values_are(v, (double[]){1, 4, 2, 5, 3, 6}, 6));
        /* an op on x makes a new array and leaves x alone */
        cft_array *y = cft_add_s(x, 10);
        CHECK(values_are(y, (double[]){11, 12, 13, 14, 15, 16}, 6));
        CHECK(values_are(x, (double[]){1, 2, 3, 4, 5, 6}, 6));
    }

    TEST("a 0-d scalar and the shape accessors") {
        cft_array *s = cft_scalar(2.5, CFT_F64);
        CHECK_EQ(cft_array_ndim(s), 0);
        CHECK_EQ(cft_array_size(s), 1);
        CHECK_EQ(cft_item(s), 2.5);
        cft_array *x = cft_zeros(CFT_I64, (int64_t[]){2, 3, 4}, 3);
        CHECK_EQ(cft_array_dim(x, 0), 2);
        CHECK_EQ(cft_array_dim(x, -1), 4);
        CHECK_EQ(cft_array_dim(x, -3), 2);
        CHECK_EQ(cft_array_dim(x, 3), -1);
        CHECK_EQ(cft_array_dim(x, -4), -1);
        cft_aval a = cft_array_aval(x);
        char buf[96];
        CHECK(strcmp(cft_aval_str(&a, buf), "i64[2,3,4]") == 0);
        cft_aval sa = cft_array_aval(s);
        CHECK(strcmp(cft_aval_str(&sa, buf), "f64[]") == 0);
        CHECK(isnan(cft_item(x))); /* not size 1 */
        CHECK(isnan(cft_item_at(x, 24)));
        CHECK(isnan(cft_item_at(x, -1)));
    }

    TEST("zeros, ones, full, *_like") {
        int64_t sh[2] = {2, 3};
        for (int d = 0; d < CFT_NDTYPES; d++) {
            cft_dtype dt = (cft_dtype)d;
            cft_array *z = cft_zeros(dt, sh, 2), *o = cft_ones(dt, sh, 2);
            cft_array *f = cft_full(7, dt, sh, 2);
            CHECK(shape_is(z, 2, sh) && shape_is(o, 2, sh) && shape_is(f, 2, sh));
            CHECK(cft_array_dtype(z) == dt && cft_array_dtype(o) == dt && cft_array_dtype(f) == dt);
            for (int64_t i = 0; i < 6; i++) {
                CHECK_EQ(cft_item_at(z, i), 0);
                CHECK_EQ(cft_item_at(o, i), 1);
                CHECK_EQ(cft_item_at(f, i), dt == CFT_BOOL ? 1 : 7);
            }
        }
        cft_array *x = cft_from_f32((float[]){1, 2, 3}, (int64_t[]){3}, 1);
        cft_array *zl = cft_zeros_like(x), *ol = cft_ones_like(x), *fl = cft_full_like(x, -0.5);
        CHECK(values_are(zl, (double[]){0, 0, 0}, 3));
        CHECK(values_are(ol, (double[]){1, 1, 1}, 3));
        CHECK(values_are(fl, (double[]){-0.5, -0.5, -0.5}, 3));
        CHECK_EQ(cft_array_dtype(fl), CFT_F32);
        /* f32 rounding of the fill value */
        CHECK_EQ(cft_item(cft_scalar(0.1, CFT_F32)), (double)0.1f);
        /* a zero-sized array is fine */
        cft_array *e = cft_zeros(CFT_F32, (int64_t[]){0, 3}, 2);
        CHECK(!cft_failed(e));
        CHECK_EQ(cft_array_size(e), 0);
        /* a big full() costs one element (a broadcast view) */
        cft_array *big = cft_full(3, CFT_F64, (int64_t[]){1 << 20, 1 << 20}, 2);
        CHECK(!cft_failed(big));
        CHECK_EQ(cft_item_at(big, (1ll << 40) - 1), 3);
    }

    TEST("arange") {
        cft_array *a = cft_arange(0, 5, 1, CFT_I32);
        CHECK_EQ(cft_array_dtype(a), CFT_I32);
        CHECK(values_are(a, (double[]){0, 1, 2, 3, 4}, 5));
        CHECK(values_are(cft_arange(1, 2, 0.25, CFT_F64), (double[]){1, 1.25, 1.5, 1.75}, 4));
        CHECK(values_are(cft_arange(5, 0, -2, CFT_I64), (double[]){5, 3, 1}, 3));
        /* stop is excluded even when it is hit exactly; a fractional
         * remainder adds one element (ceil) */
        CHECK_EQ(cft_array_size(cft_arange(0, 1, 0.5, CFT_F32)), 2);
        CHECK_EQ(cft_array_size(cft_arange(0, 1.1, 0.5, CFT_F32)), 3);
        cft_array *empty = cft_arange(3, 1, 1, CFT_F32);
        CHECK(!cft_failed(empty));
        CHECK_EQ(cft_array_size(empty), 0);
        CHECK_EQ(cft_error_code(cft_arange(0, 1, 0, CFT_F32)), CFT_E_ARG);
        CHECK_EQ(cft_error_code(cft_arange(0, INFINITY, 1, CFT_F32)), CFT_E_ARG);
    }

    TEST("linspace") {
        cft_array *l = cft_linspace(0, 1, 5, CFT_F64);
        CHECK(values_are(l, (double[]){0, 0.25, 0.5, 0.75, 1}, 5));
        cft_array *r = cft_linspace(2, -2, 3, CFT_F32);
        CHECK(values_are(r, (double[]){2, 0, -2}, 3));
        CHECK(values_are(cft_linspace(3, 9, 1, CFT_F64), (double[]){3}, 1));
        CHECK_EQ(cft_array_size(cft_linspace(0, 1, 0, CFT_F64)), 0);
        /* the endpoint is exact */
        cft_array *t = cft_linspace(0.1, 0.7, 7, CFT_F64);
        CHECK_EQ(cft_item_at(t, 6), 0.7);
        CHECK(cft_failed(cft_linspace(0, 1, -1, CFT_F64)));
    }

    TEST("eye") {
        cft_array *e = cft_eye(3, CFT_F32);
        CHECK(shape_is(e, 2, (int64_t[]){3, 3}));
        CHECK(values_are(e, (double[]){1, 0, 0, 0, 1, 0, 0, 0, 1}, 9));
        cft_array *b = cft_eye(2, CFT_BOOL);
        CHECK_EQ(cft_array_dtype(b), CFT_BOOL);
        CHECK(values_are(b, (double[]){1, 0, 0, 1}, 4));
        CHECK_EQ(cft_array_size(cft_eye(0, CFT_F64)), 0);
    }

    /* ---------------- views ---------------- */

    TEST("reshape of a contiguous array is a view; of a strided one, a copy") {
        cft_array *x = cft_arange(0, 24, 1, CFT_F32);
        cft_array *r = cft_reshape(x, (int64_t[]){2, 3, 4}, 3);
        CHECK(shape_is(r, 3, (int64_t[]){2, 3, 4}));
        CHECK(r->data == x->data);
        for (int64_t i = 0; i < 24; i++)
            CHECK_EQ(cft_item_at(r, i), i);
        cft_array *r2 = cft_reshape(r, (int64_t[]){-1, 6}, 2); /* -1 inferred */
        CHECK(shape_is(r2, 2, (int64_t[]){4, 6}));
        CHECK(r2->data == x->data);
        /* the transpose is strided: reshaping it must copy, in row-major
         * order of the transposed values */
        cft_array *t = cft_transpose(cft_reshape(x, (int64_t[]){4, 6}, 2), NULL); /* [6,4] */
        cft_array *flat = cft_reshape(t, (int64_t[]){24}, 1);
        CHECK(!cft_failed(flat));
        CHECK(flat->data != x->data);
        for (int64_t i = 0; i < 24; i++)
            CHECK_EQ(cft_item_at(flat, i), (i % 4) * 6 + i / 4);
    }

    TEST("transpose is an O(1) view with permuted strides") {
        cft_array *x = cft_reshape(cft_arange(0, 24, 1, CFT_I32), (int64_t[]){2, 3, 4}, 3);
        cft_array *t = cft_transpose(x, (int[]){2, 0, 1}); /* [4,2,3]: t[k,i,j] = x[i,j,k] */
        CHECK(shape_is(t, 3, (int64_t[]){4, 2, 3}));
        CHECK(t->data == x->data);
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++)
                    CHECK_EQ(cft_item_at(t, (k * 2 + i) * 3 + j), (i * 3 + j) * 4 + k);
        cft_array *rev = cft_transpose(x, NULL); /* [4,3,2] */
        CHECK(shape_is(rev, 3, (int64_t[]){4, 3, 2}));
        CHECK_EQ(cft_item_at(rev, 1), 12); /* rev[0,0,1] = x[1,0,0] */
        cft_array *m = cft_mT(x);          /* [2,4,3] */
        CHECK(shape_is(m, 3, (int64_t[]){2, 4, 3}));
        CHECK_EQ(cft_item_at(m, 1), 4);         /* m[0,0,1] = x[0,1,0] */
        cft_array *mv = cft_moveaxis(x, 0, -1); /* [3,4,2] */
        CHECK(shape_is(mv, 3, (int64_t[]){3, 4, 2}));
        CHECK_EQ(cft_item_at(mv, 1), 12);
        CHECK(mv->data == x->data);
        /* a 1e6-element transpose does not touch the payload (strides only) */
        cft_array *big = cft_zeros(CFT_F32, (int64_t[]){1000, 1000}, 2);
        big = cft_add_s(big, 1); /* materialise a real buffer */
        cft_array *bt = cft_transpose(big, NULL);
        CHECK(bt->data == big->data);
        CHECK(bt->strides[0] == 1 && bt->strides[1] == 1000);
    }

    TEST("broadcast_to and broadcast_in_dim are zero-stride views") {
        cft_array *v = cft_from_f32((float[]){1, 2, 3}, (int64_t[]){3}, 1);
        cft_array *b = cft_broadcast_to(v, (int64_t[]){2, 3}, 2);
        CHECK(shape_is(b, 2, (int64_t[]){2, 3}));
        CHECK(b->data == v->data);
        CHECK_EQ(b->strides[0], 0);
        CHECK(values_are(b, (double[]){1, 2, 3, 1, 2, 3}, 6));
        cft_array *c = cft_broadcast_in_dim(v, (int64_t[]){3, 2}, 2, (int[]){0});
        CHECK(shape_is(c, 2, (int64_t[]){3, 2}));
        CHECK(c->data == v->data);
        CHECK(values_are(c, (double[]){1, 1, 2, 2, 3, 3}, 6));
        cft_array *col = cft_from_f32((float[]){10, 20}, (int64_t[]){2, 1}, 2);
        cft_array *s = cft_add(col, v); /* [2,1] + [3] -> [2,3] */
        CHECK(values_are(s, (double[]){11, 12, 13, 21, 22, 23}, 6));
        CHECK(cft_failed(cft_broadcast_to(v, (int64_t[]){2, 4}, 2)));
    }

    TEST("slice, index, squeeze, expand_dims are views") {
        cft_array *x = cft_reshape(cft_arange(0, 20, 1, CFT_F64), (int64_t[]){4, 5}, 2);
        cft_array *s = cft_slice(x, (int64_t[]){1, 0}, (int64_t[]){4, 5}, (int64_t[]){2, 2});
        /* rows 1, 3; cols 0, 2, 4 */
        CHECK(shape_is(s, 2, (int64_t[]){2, 3}));
        CHECK(s->data == x->data);
        CHECK(values_are(s, (double[]){5, 7, 9, 15, 17, 19}, 6));
        cft_array *row = cft_index(x, 2);
        CHECK(shape_is(row, 1, (int64_t[]){5}));
        CHECK(row->data == x->data);
        CHECK(values_are(row, (double[]){10, 11, 12, 13, 14}, 5));
        cft_array *e = cft_expand_dims(row, 0); /* [1,5] */
        CHECK(shape_is(e, 2, (int64_t[]){1, 5}));
        CHECK(e->data == x->data);
        cft_array *e2 = cft_expand_dims(e, -1); /* [1,5,1] */
        CHECK(shape_is(e2, 3, (int64_t[]){1, 5, 1}));
        cft_array *q = cft_squeeze(e2, NULL, 0); /* all size-1 axes */
        CHECK(shape_is(q, 1, (int64_t[]){5}));
        CHECK(q->data == x->data);
        CHECK(values_are(q, (double[]){10, 11, 12, 13, 14}, 5));
        cft_array *q1 = cft_squeeze(e2, (int[]){-1}, 1);
        CHECK(shape_is(q1, 2, (int64_t[]){1, 5}));
        /* a view of a view of a view keeps its offset right */
        cft_array *vv =
            cft_slice(cft_transpose(s, NULL), (int64_t[]){1, 1}, (int64_t[]){3, 2}, NULL);
        CHECK(shape_is(vv, 2, (int64_t[]){2, 1}));
        CHECK(values_are(vv, (double[]){17, 19}, 2));
        CHECK(vv->data == x->data);
        /* errors */
        CHECK(cft_failed(cft_squeeze(x, (int[]){0}, 1))); /* size 4, not 1 */
        CHECK(cft_failed(cft_index(x, 4)));
        CHECK(cft_failed(cft_expand_dims(x, 3)));
        CHECK(cft_failed(cft_slice(x, (int64_t[]){0, 0}, (int64_t[]){5, 5}, NULL)));
    }

    TEST("ops on views read the right elements") {
        cft_array *x = cft_reshape(cft_arange(0, 6, 1, CFT_F32), (int64_t[]){2, 3}, 2);
        cft_array *t = cft_transpose(x, NULL); /* [[0,3],[1,4],[2,5]] */
        cft_array *y = cft_add(t, cft_ones(CFT_F32, (int64_t[]){3, 2}, 2));
        CHECK(values_are(y, (double[]){1, 4, 2, 5, 3, 6}, 6));
        cft_array *p = cft_matmul(x, t); /* x x^T = [[5,14],[14,50]] */
        CHECK(values_are(p, (double[]){5, 14, 14, 50}, 4));
        cft_array *s = cft_sum(t, (int[]){0}, 1, false);
        CHECK(values_are(s, (double[]){3, 12}, 2));
    }

    /* ---------------- printer ---------------- */

    TEST("printer: 2x3 f32") {
        cft_array *x = cft_from_f32((float[]){1, 2.5f, -3, 4, 0, 6e-5f}, (int64_t[]){2, 3}, 2);
        CHECK_PRINT(x, NULL,
                    "array([[1., 2.5, -3.],\n"
                    "       [4., 0., 6e-05]], dtype=f32)\n");
        CHECK_PRINT(x, "x",
                    "x = array([[1., 2.5, -3.],\n"
                    "           [4., 0., 6e-05]], dtype=f32)\n");
    }

    TEST("printer: i32 vector, bool, scalars") {
        CHECK_PRINT(cft_from_i32((int32_t[]){1, -2, 300}, (int64_t[]){3}, 1), NULL,
                    "array([1, -2, 300], dtype=i32)\n");
        CHECK_PRINT(cft_from_data((uint8_t[]){1, 0}, CFT_BOOL, (int64_t[]){2}, 1), NULL,
                    "array([True, False], dtype=bool)\n");
        CHECK_PRINT(cft_scalar(1, CFT_BOOL), NULL, "array(True, dtype=bool)\n");
        CHECK_PRINT(cft_scalar(2.5, CFT_F64), NULL, "array(2.5, dtype=f64)\n");
        CHECK_PRINT(cft_scalar(-4, CFT_I64), NULL, "array(-4, dtype=i64)\n");
        CHECK_PRINT(cft_from_f64((double[]){NAN, INFINITY, -INFINITY}, (int64_t[]){3}, 1), NULL,
                    "array([nan, inf, -inf], dtype=f64)\n");
        CHECK_PRINT(cft_zeros(CFT_F32, (int64_t[]){0}, 1), NULL, "array([], dtype=f32)\n");
    }

    TEST("printer: a large array is summarised with ...") {
        /* over 1000 elements: 3 items at each end of every dim */
        CHECK_PRINT(cft_arange(0, 2000, 1, CFT_I32), NULL,
                    "array([0, 1, 2, ..., 1997, 1998, 1999], dtype=i32)\n");
        cft_array *m = cft_reshape(cft_arange(0, 2000, 1, CFT_F32), (int64_t[]){40, 50}, 2);
        CHECK_PRINT(m, NULL,
                    "array([[0., 1., 2., ..., 47., 48., 49.],\n"
                    "       [50., 51., 52., ..., 97., 98., 99.],\n"
                    "       [100., 101., 102., ..., 147., 148., 149.],\n"
                    "       ...,\n"
                    "       [1850., 1851., 1852., ..., 1897., 1898., 1899.],\n"
                    "       [1900., 1901., 1902., ..., 1947., 1948., 1949.],\n"
                    "       [1950., 1951., 1952., ..., 1997., 1998., 1999.]], dtype=f32)\n");
        /* exactly 1000 elements are printed in full */
        char *full = print_str(cft_arange(0, 1000, 1, CFT_I32), NULL);
        CHECK(full && !strstr(full, "..."));
        CHECK(full && strstr(full, ", 500, 501, "));
        free(full);
    }

    TEST("printer: a view prints its own elements; errors print as errors") {
        cft_array *x = cft_reshape(cft_arange(0, 6, 1, CFT_I32), (int64_t[]){2, 3}, 2);
        CHECK_PRINT(cft_transpose(x, NULL), NULL,
                    "array([[0, 3],\n"
                    "       [1, 4],\n"
                    "       [2, 5]], dtype=i32)\n");
        cft_array *e = cft_reshape(x, (int64_t[]){4}, 1);
        char *s = print_str(e, NULL);
        CHECK(s && strncmp(s, "<error: ", 8) == 0);
        free(s);
    }

    /* ---------------- comparisons ---------------- */

    TEST("cft_allclose: rtol and atol") {
        cft_array *a = cft_from_f64((double[]){1.0, 100.0}, (int64_t[]){2}, 1);
        cft_array *b = cft_from_f64((double[]){1.0 + 1e-6, 100.0 + 1e-3}, (int64_t[]){2}, 1);
        CHECK(cft_allclose(a, a, 0, 0, false));
        CHECK(!cft_allclose(a, b, 0, 0, false));
        CHECK(cft_allclose(a, b, 0, 1.1e-3, false));  /* atol covers both */
        CHECK(!cft_allclose(a, b, 0, 0.9e-3, false)); /* not the second */
        CHECK(cft_allclose(a, b, 1.1e-5, 0, false));  /* |d| <= rtol*|b| for both */
        CHECK(!cft_allclose(a, b, 0.9e-6, 0, false)); /* 1e-6 > 0.9e-6 * 1 */
        /* atol + rtol*|b|: 1e-3 <= 1.1e-4 + 9e-6*100.001, though neither term
         * alone covers it */
        CHECK(cft_allclose(a, b, 9e-6, 1.1e-4, false));
        CHECK(!cft_allclose(a, b, 9e-6, 0, false));
        CHECK(!cft_allclose(a, b, 0, 1.1e-4, false));
        /* the tolerance is relative to b: asymmetric, like numpy */
        cft_array *c = cft_from_f64((double[]){10.0}, (int64_t[]){1}, 1);
        cft_array *d = cft_from_f64((double[]){11.0}, (int64_t[]){1}, 1);
        CHECK(cft_allclose(c, d, 0.095, 0, false));  /* 1 <= 0.095*11 = 1.045 */
        CHECK(!cft_allclose(d, c, 0.095, 0, false)); /* 1 >  0.095*10 = 0.95 */
        /* mixed dtypes compare by value */
        cft_array *i = cft_from_i32((int32_t[]){1, 100}, (int64_t[]){2}, 1);
        CHECK(cft_allclose(i, a, 0, 0, false));
        CHECK_EQ(cft_max_abs_diff(a, b), cft_max_abs_diff(b, a));
        CHECK_CLOSE(cft_max_abs_diff(a, b), 1e-3, 1e-9, 0);
    }

    TEST("cft_allclose: NaN and infinities") {
        cft_array *n1 = cft_from_f64((double[]){1, NAN, INFINITY}, (int64_t[]){3}, 1);
        cft_array *n2 = cft_from_f64((double[]){1, NAN, INFINITY}, (int64_t[]){3}, 1);
        cft_array *n3 = cft_from_f64((double[]){1, 2, INFINITY}, (int64_t[]){3}, 1);
        cft_array *n4 = cft_from_f64((double[]){1, NAN, -INFINITY}, (int64_t[]){3}, 1);
        CHECK(!cft_allclose(n1, n2, 1e-5, 1e-8, false));
        CHECK(cft_allclose(n1, n2, 1e-5, 1e-8, true));
        CHECK(!cft_allclose(n1, n3, 1e-5, 1e-8, true)); /* NaN vs a number */
        CHECK(!cft_allclose(n3, n1, 1e-5, 1e-8, true));
        CHECK(!cft_allclose(n1, n4, 1e-5, 1e-8, true)); /* inf vs -inf */
        /* a finite value is never close to an infinity, whatever rtol */
        cft_array *f1 = cft_from_f64((double[]){1}, (int64_t[]){1}, 1);
        cft_array *f2 = cft_from_f64((double[]){INFINITY}, (int64_t[]){1}, 1);
        CHECK(!cft_allclose(f1, f2, 1e-5, 1e-8, false));
        CHECK(!cft_allclose(f2, f1, 1e-5, 1e-8, false));
        CHECK(cft_allclose(n3, n3, 0, 0, false)); /* equal infinities are close */
        CHECK(isnan(cft_max_abs_diff(n1, n2)));
    }

    TEST("cft_allclose: shape mismatch and errors are false") {
        cft_array *a = cft_zeros(CFT_F32, (int64_t[]){2, 3}, 2);
        cft_array *b = cft_zeros(CFT_F32, (int64_t[]){3, 2}, 2);
        cft_array *c = cft_zeros(CFT_F32, (int64_t[]){6}, 1);
        cft_array *d = cft_zeros(CFT_F32, (int64_t[]){1, 2, 3}, 3);
        CHECK(!cft_allclose(a, b, 1, 1, true));
        CHECK(!cft_allclose(a, c, 1, 1, true));
        CHECK(!cft_allclose(a, d, 1, 1, true));
        cft_array *e = cft_reshape(a, (int64_t[]){5}, 1);
        CHECK(cft_failed(e));
        CHECK(!cft_allclose(e, e, 1, 1, true));
        CHECK(!cft_allclose(a, NULL, 1, 1, true));
        CHECK(isinf(cft_max_abs_diff(a, d)));
        CHECK(isinf(cft_max_abs_diff(e, a)));
    }

    TEST("contiguous copies of transposed views (by tiles): every dtype size, batches with "
         "their own strides, sizes off the tile, negative and zero strides") {
        /* base: values 0..n-1 (bf16's exact up to 256 only, compared as
         * stored); views [B, R, Cn] with strides (sb, 1, cs):
         * element (b, r, c) is base[off + b sb + r + c cs] */
        const cft_dtype dts[] = {CFT_BOOL, CFT_BF16, CFT_F32, CFT_F64, CFT_C128};
        const int64_t geo[][6] = {/* B, R, Cn, sb, cs, off */
                                  {1, 70, 45, 0, 71, 0},       {3, 33, 40, 33 * 41, 33, 0},
                                  {2, 64, 64, 64 * 64, 64, 0}, {2, 5, 31, 200, 7, 3},
                                  {1, 40, 3, 0, -40, 80},      {2, 17, 9, 0, 0, 1}};
        for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
            for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) {
                const int64_t *q = geo[g];
                int64_t n = 8192;
                cft_array *base = cft_astype(cft_arange(0, (double)n, 1, CFT_F64), dts[t]);
                if (dts[t] == CFT_BOOL) /* bytes: a pattern of period 3 */
                    base = cft_eq(
                        cft_rem(cft_arange(0, (double)n, 1, CFT_F64), cft_scalar(3, CFT_F64)),
                        cft_scalar(0, CFT_F64));
                int64_t shape[3] = {q[0], q[1], q[2]}, st[3] = {q[3], 1, q[4]};
                cft_array *v = cft__view(base, shape, 3, st, q[5]);
                cft_array *c = cft__contig(v);
                CHECK(cft__is_contig(c));
                int bad = 0;
                for (int64_t b = 0; b < q[0]; b++)
                    for (int64_t r = 0; r < q[1]; r++)
                        for (int64_t k = 0; k < q[2]; k++) {
                            int64_t i = q[5] + b * q[3] + r + k * q[4];
                            double want = cft_item_at(base, i);
                            bad += cft_item_at(c, (b * q[1] + r) * q[2] + k) != want;
                        }
                CHECK_MSG(bad == 0, "%s, geometry %zu: %d wrong", cft_dtype_name(dts[t]), g, bad);
            }
    }

    return check_summary();
}
