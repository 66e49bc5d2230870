/* test_half.c: the storage types f16 and bf16: rounding to nearest-even on
 * store (ties, overflow, subnormals), arithmetic computed in f32 and rounded
 * once, promotion, and the transforms and jit on half arrays. */
#include <math.h>
#include <string.h>

#include "array/array.h"
#include "cft/cft.h"
#include "check.h"

static cft_array *half(double v, cft_dtype dt) {
    return cft_astype(cft_scalar(v, CFT_F64), dt);
}

static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout; /* sum(tanh(x @ w)) */
    out[0] = cft_sum(cft_tanh(cft_matmul(in[1], in[0])), NULL, 0, false);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    TEST("bf16 rounds to nearest-even on store") {
        CHECK_EQ(cft_item(half(1 + 1.0 / 256, CFT_BF16)), 1.0);           /* a tie: to even */
        CHECK_EQ(cft_item(half(1 + 3.0 / 256, CFT_BF16)), 1 + 4.0 / 256); /* a tie: to even (up) */
        CHECK_EQ(cft_item(half(1 + 1.5 / 256, CFT_BF16)), 1 + 2.0 / 256); /* above half: up */
        CHECK(isnan(cft_item(half(NAN, CFT_BF16))));
        CHECK(isinf(cft_item(half(1e39, CFT_BF16))));
        CHECK_EQ(cft_array_dtype(half(1, CFT_BF16)), CFT_BF16);
    }
    TEST("f16: overflow to inf, subnormals, ties to even") {
        CHECK(isinf(cft_item(half(65520, CFT_F16))));
        CHECK_EQ(cft_item(half(65504, CFT_F16)), 65504.0);
        CHECK_EQ(cft_item(half(ldexp(1, -24), CFT_F16)),
                 ldexp(1, -24));                         /* the smallest subnormal */
        CHECK_EQ(cft_item(half(2049, CFT_F16)), 2048.0); /* a tie at spacing 2: to even */
        CHECK_EQ(cft_item(half(2051, CFT_F16)), 2052.0);
    }
    TEST("arithmetic computes in f32 and rounds once on store") {
        cft_array *a = half(2048, CFT_F16), *b = half(1, CFT_F16), *c = half(3, CFT_F16);
        CHECK_EQ(cft_item(cft_add(a, b)), 2048.0); /* 2049 rounds to even */
        CHECK_EQ(cft_item(cft_add(a, c)), 2052.0); /* 2051 rounds up */
        CHECK_EQ(cft_array_dtype(cft_add(a, b)), CFT_F16);
        cft_array *x = cft_astype(cft_linspace(-2, 2, 9, CFT_F32), CFT_BF16);
        cft_array *e = cft_exp(x), *ref = cft_astype(cft_exp(cft_astype(x, CFT_F32)), CFT_BF16);
        CHECK_ARRAY_CLOSE(e, ref, 0, 0);
    }
    TEST("promotion: f16 + f32 -> f32, f16 + bf16 -> f32, i32 + bf16 -> bf16") {
        CHECK_EQ(cft_array_dtype(cft_add(half(1, CFT_F16), cft_scalar(1, CFT_F32))), CFT_F32);
        CHECK_EQ(cft_array_dtype(cft_add(half(1, CFT_F16), half(1, CFT_BF16))), CFT_F32);
        CHECK_EQ(cft_array_dtype(cft_add(cft_scalar(1, CFT_I32), half(1, CFT_BF16))), CFT_BF16);
    }
    TEST("matmul, grad, vmap and jit on bf16 values match f32 within bf16's precision") {
        cft_array *w32 = cft_reshape(cft_linspace(-1, 1, 12, CFT_F32), (int64_t[]){4, 3}, 2);
        cft_array *x32 = cft_reshape(cft_linspace(-0.5, 1, 8, CFT_F32), (int64_t[]){2, 4}, 2);
        cft_array *w = cft_astype(w32, CFT_BF16), *x = cft_astype(x32, CFT_BF16);
        cft_fn *L = cft_fn_new(loss, NULL, 2, 1);
        cft_array *g = cft_fn_call1(cft_grad(L, NULL, 0), (cft_array *[]){w, x});
        CHECK_EQ(cft_array_dtype(g), CFT_BF16);
        cft_array *g32 = cft_fn_call1(
            cft_grad(L, NULL, 0), (cft_array *[]){cft_astype(w, CFT_F32), cft_astype(x, CFT_F32)});
        /* bf16 has 8 significant bits: each stored intermediate is within 2^-8 relative */
        CHECK_ARRAY_CLOSE(cft_astype(g, CFT_F32), g32, 0.03, 0.03);
        cft_array *v = cft_fn_call1(cft_vmap(L, (int[]){CFT_NOT_BATCHED, 0}, NULL),
                                    (cft_array *[]){w, cft_reshape(x, (int64_t[]){2, 1, 4}, 3)});
        for (int b = 0; b < 2; b++) {
            cft_array *one[2] = {w, cft_reshape(cft_index(x, b), (int64_t[]){1, 4}, 2)};
            CHECK_EQ(cft_item_at(v, b), cft_item(cft_fn_call1(L, one)));
        }
        cft_fn *j = cft_jit(cft_grad(L, NULL, 0));
        cft_array *jg = cft_fn_call1(j, (cft_array *[]){w, x});
        jg = cft_fn_call1(j, (cft_array *[]){w, x});
        CHECK_ARRAY_CLOSE(jg, g, 0, 0);
    }
    TEST("views of halves (reshape, transpose, broadcast, squeeze, expand_dims) share the "
         "input's memory, not a widened copy") {
        const cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        for (int d = 0; d < 2; d++) {
            cft_array *x = cft_astype(
                cft_random_normal(cft_random_key(9), CFT_F32, (int64_t[]){4, 1, 6}, 3), dts[d]);
            cft_array *v[5] = {cft_reshape(x, (int64_t[]){24}, 1),
                               cft_transpose(x, (int[]){2, 1, 0}),
                               cft_broadcast_to(x, (int64_t[]){3, 4, 5, 6}, 4),
                               cft_squeeze(x, (int[]){1}, 1), cft_expand_dims(x, 0)};
            for (int i = 0; i < 5; i++) {
                CHECK_EQ(cft_array_dtype(v[i]), dts[d]);
                CHECK_MSG(v[i]->data == x->data, "view %d of %s copied", i, cft_dtype_name(dts[d]));
            }
            CHECK_ARRAY_CLOSE(cft_reshape(v[0], (int64_t[]){4, 1, 6}, 3), x, 0, 0);
            CHECK_ARRAY_CLOSE(cft_transpose(v[1], (int[]){2, 1, 0}), x, 0, 0);
        }
    }

    TEST("f16 prints as floats") {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cft_print(half(1.5, CFT_F16), f);
        fclose(f);
        CHECK(strstr(buf, "1.5") && strstr(buf, "f16"));
        free(buf);
    }
    return check_summary();
}
