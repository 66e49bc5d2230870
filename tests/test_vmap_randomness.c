/* test_vmap_randomness.c: vmap's randomness policy (functorch's). A draw
 * from an unbatched key inside vmap: SAME gives every element the same
 * numbers, ERROR fails naming cft_vmap, DIFFERENT gives element i the
 * draw of key split(key, B)[i] -- checked exactly against that loop,
 * nested (split of split) and under jit and grad. A batched key gives each
 * element its own numbers under every policy. */
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

/* (x [3], key) -> x + uniform(key, [3]) */
static cft_status noisy(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(in[0], cft_random_uniform(in[1], CFT_F32, (int64_t[]){3}, 1, 0, 1));
    return CFT_OK;
}

/* (x [3], key) -> sum(x * normal(key, [3])) */
static cft_status noisy_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul(in[0], cft_random_normal(in[1], CFT_F32, (int64_t[]){3}, 1)), NULL, 0,
                     false);
    return CFT_OK;
}

static cft_array *row_loop(cft_fn *f, cft_array *x, cft_array *keys) {
    int64_t B = cft_array_dim(x, 0);
    cft_array *rows[16];
    for (int64_t i = 0; i < B; i++) {
        cft_array *in[2] = {cft_index(x, i), cft_index(keys, i)};
        cft_fn_call(f, in, &rows[i]);
    }
    return cft_stack(rows, (int)B, 0);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_fn *f = cft_fn_new(noisy, NULL, 2, 1);
    cft_array *x = cft_zeros(CFT_F32, (int64_t[]){4, 3}, 2), *key = cft_random_key(42);
    cft_array *in[2] = {x, key}, *out[1];
    int axes[2] = {0, CFT_NOT_BATCHED};
    TEST("SAME: every element the same numbers (cft_vmap's default)") {
        CHECK_EQ(cft_fn_call(cft_vmap_ex(f, axes, NULL, CFT_RANDOMNESS_SAME), in, out), CFT_OK);
        for (int i = 1; i < 4; i++)
            CHECK_ARRAY_CLOSE(cft_index(out[0], i), cft_index(out[0], 0), 0, 0);
        cft_array *d[1];
        CHECK_EQ(cft_fn_call(cft_vmap(f, axes, NULL), in, d), CFT_OK);
        CHECK_ARRAY_CLOSE(d[0], out[0], 0, 0);
    }
    TEST("ERROR: refused, naming cft_vmap") {
        CHECK(cft_fn_call(cft_vmap_ex(f, axes, NULL, CFT_RANDOMNESS_ERROR), in, out) != CFT_OK);
        CHECK_MSG(strstr(cft_error_message(out[0]), "cft_vmap") &&
                      strstr(cft_error_message(out[0]), "randomness 'error'"),
                  "%s", cft_error_message(out[0]));
    }
    TEST("DIFFERENT: element i draws from split(key, B)[i]") {
        cft_fn *v = cft_vmap_ex(f, axes, NULL, CFT_RANDOMNESS_DIFFERENT);
        CHECK_EQ(cft_fn_call(v, in, out), CFT_OK);
        CHECK_ARRAY_CLOSE(out[0], row_loop(f, x, cft_random_split(key, 4)), 0, 0);
        CHECK(!cft_allclose(cft_index(out[0], 0), cft_index(out[0], 1), 0, 0, false));
        cft_array *j[1]; /* and jitted */
        CHECK_EQ(cft_fn_call(cft_jit(v), in, j), CFT_OK);
        CHECK_ARRAY_CLOSE(j[0], out[0], 0, 0);
    }
    TEST("a batched key: each element its own, under every policy") {
        cft_array *keys = cft_random_split(key, 4), *kin[2] = {x, keys};
        cft_array *want = row_loop(f, x, keys);
        for (int r = 0; r < 3; r++) {
            cft_array *o[1];
            CHECK_EQ(cft_fn_call(cft_vmap_ex(f, NULL, NULL, (cft_randomness)r), kin, o), CFT_OK);
            CHECK_ARRAY_CLOSE(o[0], want, 0, 0);
        }
    }
    TEST("nested DIFFERENT vmaps: element (i, j) draws from split(split(key, 2)[i], 3)[j]") {
        cft_fn *inner = cft_vmap_ex(f, axes, NULL, CFT_RANDOMNESS_DIFFERENT);
        cft_fn *outer = cft_vmap_ex(inner, axes, NULL, CFT_RANDOMNESS_DIFFERENT);
        cft_array *x2 = cft_zeros(CFT_F32, (int64_t[]){2, 3, 3}, 3), *o[1];
        CHECK_EQ(cft_fn_call(outer, (cft_array *[]){x2, key}, o), CFT_OK);
        cft_array *k1 = cft_random_split(key, 2);
        for (int i = 0; i < 2; i++) {
            cft_array *want = row_loop(f, cft_index(x2, i), cft_random_split(cft_index(k1, i), 3));
            CHECK_ARRAY_CLOSE(cft_index(o[0], i), want, 0, 0);
        }
    }
    TEST("grad of a DIFFERENT vmap: each element's gradient is its own noise") {
        cft_fn *g = cft_vmap_ex(cft_grad(cft_fn_new(noisy_loss, NULL, 2, 1), NULL, 0), axes, NULL,
                                CFT_RANDOMNESS_DIFFERENT);
        cft_array *o[1];
        CHECK_EQ(cft_fn_call(g, in, o), CFT_OK);
        cft_array *keys = cft_random_split(key, 4);
        for (int i = 0; i < 4; i++)
            CHECK_ARRAY_CLOSE(cft_index(o[0], i),
                              cft_random_normal(cft_index(keys, i), CFT_F32, (int64_t[]){3}, 1), 0,
                              0);
    }
    TEST("a bad policy") {
        CHECK(cft_fn_failed(cft_vmap_ex(f, axes, NULL, (cft_randomness)7)));
    }
    return check_summary();
}
