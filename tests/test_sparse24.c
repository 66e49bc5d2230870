/* test_sparse24.c: 2:4 sparsity and pruning (cft/sparse.h) beyond the
 * per-primitive rows of test_prims: the 2:4 pattern and which entries it
 * keeps, the product against a dense product of the pruned weight (any
 * leading dims, f32/f64/bf16), gradients with the mask fixed, an ensemble
 * under vmap against a loop, the jit twice, export, threads, bad shapes;
 * the pruning masks against hand-counted expectations (fractions rounded
 * as torch, counts, masks combined as PruningContainer), structured and
 * global pruning, apply and remove.
 *
 * Tolerances: the sparse kernel sums the kept products in its own order
 * (lanes of eight rows), the dense reference in BLAS's: f32 rtol 1e-5,
 * f64 1e-12; bf16 inputs are rounded alike on both sides, the products
 * computed in f32 (rtol 1e-5 on the same rounded inputs). */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static cft_array *rnd(uint64_t seed, cft_dtype dt, const int64_t *shape, int nd) {
    return cft_astype(cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd), dt);
}

static double tol(cft_dtype dt) {
    return dt == CFT_F64 ? 1e-12 : 1e-5;
}

static cft_status lin_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = cft_sparse24_linear(in[0], (cft_sparse24){in[1], in[2]});
    out[0] = cft_sum(cft_tanh(y), NULL, 0, false);
    return CFT_OK;
}

static cft_status lin_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sparse24_linear(in[0], (cft_sparse24){in[1], in[2]});
    return CFT_OK;
}

/* the same loss as a function of the dense w, pruned and compressed inside */
static cft_status prune_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = cft_sparse24_linear(in[0], cft_sparse24_compress(in[1]));
    out[0] = cft_sum(cft_tanh(y), NULL, 0, false);
    return CFT_OK;
}

/* prune, compress and multiply in one traced function of the dense w */
static cft_status prune_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sparse24_linear(in[0], cft_sparse24_compress(in[1]));
    return CFT_OK;
}

typedef struct {
    cft_fn *f;
    cft_array **in, *ref;
    int bad;
} targ;

static void *thread_main(void *p) {
    targ *a = p;
    for (int r = 0; r < 10; r++) {
        cft_array *y = cft_fn_call1(a->f, a->in);
        if (cft_failed(y) || cft_item(cft_max(cft_abs(cft_sub(y, a->ref)), NULL, 0, false)) != 0)
            a->bad++;
    }
    return NULL;
}

static double count_nonzero(cft_array *x) {
    return cft_item(cft_sum(cft_astype(cft_ne(x, cft_zeros_like(x)), CFT_F64), NULL, 0, false));
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    TEST("prune_24 keeps the two largest magnitudes of every group of four") {
        float w[2][8] = {{1, -5, 3, 0.5f, 0, 0, 2, -2}, {4, 4, 4, 4, -1, 2, -3, 0.1f}};
        cft_array *p = cft_prune_24(cft_from_data(w, CFT_F32, (int64_t[]){2, 8}, 2));
        float want[2][8] = {{0, -5, 3, 0, 0, 0, 2, -2}, {4, 4, 0, 0, 0, 2, -3, 0}};
        CHECK_ARRAY_CLOSE(p, cft_from_data(want, CFT_F32, (int64_t[]){2, 8}, 2), 0, 0);
        cft_sparse24 s = cft_sparse24_compress(cft_from_data(w, CFT_F32, (int64_t[]){2, 8}, 2));
        cft_aval va = cft_array_aval(s.values), ma = cft_array_aval(s.meta);
        CHECK(va.ndim == 2 && va.shape[0] == 2 && va.shape[1] == 4);
        CHECK(ma.dtype == CFT_I32 && ma.shape[0] == 2 && ma.shape[1] == 1);
        /* a big weight: exactly half the entries survive */
        cft_array *big = rnd(1, CFT_F32, (int64_t[]){64, 256}, 2);
        CHECK_CLOSE(count_nonzero(cft_prune_24(big)), 64 * 128, 0, 0);
    }

    cft_dtype dts[3] = {CFT_F32, CFT_F64, CFT_BF16};
    for (int t = 0; t < 3; t++) {
        cft_dtype dt = dts[t];
        TEST("sparse24_linear (%s, leading dims) equals the dense product of the pruned weight",
             cft_dtype_name(dt)) {
            cft_array *x = rnd(2, dt, (int64_t[]){2, 13, 64}, 3);
            cft_array *w = rnd(3, dt, (int64_t[]){40, 64}, 2);
            cft_sparse24 s = cft_sparse24_compress(w);
            cft_array *y = cft_sparse24_linear(x, s);
            cft_array *ref =
                cft_matmul(cft_astype(x, CFT_F64), cft_mT(cft_astype(cft_prune_24(w), CFT_F64)));
            CHECK(cft_array_dtype(y) == dt);
            CHECK_ARRAY_CLOSE(y, ref, dt == CFT_BF16 ? 8e-3 : tol(dt),
                              dt == CFT_BF16 ? 2e-2 : 1e-6);
            cft_array *y1 = cft_sparse24_linear(cft_index(cft_index(x, 1), 4), s); /* a vector */
            CHECK(cft_array_ndim(y1) == 1 && cft_array_shape(y1)[0] == 40);
            CHECK_ARRAY_CLOSE(y1, cft_index(cft_index(y, 1), 4), 0, 0);
            /* outputs past the kernel's blocks of four (10, 7, 1, 5), rows
             * past its blocks of 16 (37) */
            for (int n = 0; n < 4; n++) {
                const int64_t on[4] = {10, 7, 1, 5};
                cft_array *wn = rnd(20 + (uint64_t)n, dt, (int64_t[]){on[n], 64}, 2);
                cft_array *xn = rnd(30 + (uint64_t)n, dt, (int64_t[]){37, 64}, 2);
                cft_array *yn = cft_sparse24_linear(xn, cft_sparse24_compress(wn));
                cft_array *rn = cft_matmul(cft_astype(xn, CFT_F64),
                                           cft_mT(cft_astype(cft_prune_24(wn), CFT_F64)));
                CHECK_ARRAY_CLOSE(yn, rn, dt == CFT_BF16 ? 8e-3 : tol(dt),
                                  dt == CFT_BF16 ? 2e-2 : 1e-6);
            }
        }
    }

    cft_array *x = rnd(4, CFT_F32, (int64_t[]){24, 32}, 2);
    cft_array *w = rnd(5, CFT_F32, (int64_t[]){16, 32}, 2);
    cft_sparse24 s = cft_sparse24_compress(w);
    cft_array *in3[3] = {x, s.values, s.meta};

    TEST("gradients: x's is dense, the values' is the dense one at the kept positions") {
        cft_fn *f = cft_fn_new(lin_loss, NULL, 3, 1);
        cft_array *g[2];
        CHECK(cft_fn_call(cft_grad(f, (int[]){0, 1}, 2), in3, g) == CFT_OK);
        /* dense reference: d/dW sum tanh(x W^T) = (1 - y^2)^T x */
        cft_array *wd = cft_prune_24(w), *y = cft_tanh(cft_matmul(x, cft_mT(wd)));
        cft_array *gy = cft_sub(cft_ones_like(y), cft_square(y));
        CHECK_ARRAY_CLOSE(g[0], cft_matmul(gy, wd), 1e-5, 1e-5);
        cft_array *gw = cft_matmul(cft_mT(gy), x);
        /* the kept positions as a dense 0/1 mask */
        cft_array *mask = cft_sparse24_to_dense((cft_sparse24){cft_ones_like(s.values), s.meta});
        CHECK_ARRAY_CLOSE(cft_sparse24_to_dense((cft_sparse24){g[1], s.meta}), cft_mul(gw, mask),
                          1e-5, 1e-5);
        /* through compress: the dense w's gradient is zero where pruned */
        cft_array *gwd = cft_fn_call1(cft_grad(cft_fn_new(prune_loss, NULL, 2, 1), (int[]){1}, 1),
                                      (cft_array *[]){x, w});
        CHECK_ARRAY_CLOSE(gwd, cft_mul(gw, mask), 1e-5, 1e-5);
    }

    TEST("an ensemble of 2:4 weights under vmap equals a loop") {
        cft_array *ws = rnd(6, CFT_F32, (int64_t[]){3, 16, 32}, 3);
        cft_sparse24 se = cft_sparse24_compress(ws); /* batched compress */
        cft_fn *f = cft_fn_new(lin_fn, NULL, 3, 1);
        cft_fn *v = cft_vmap_n(f, (int[]){CFT_NOT_BATCHED, 0, 0}, 3, NULL, 0);
        cft_array *ys = cft_fn_call1(v, (cft_array *[]){x, se.values, se.meta});
        for (int m = 0; m < 3; m++) {
            cft_sparse24 sm = cft_sparse24_compress(cft_index(ws, m));
            CHECK_ARRAY_CLOSE(cft_index(se.values, m), sm.values, 0, 0);
            CHECK_ARRAY_CLOSE(cft_index(ys, m), cft_sparse24_linear(x, sm), 1e-5, 1e-6);
        }
        /* x batched alone: the rows join */
        cft_array *xs = rnd(7, CFT_F32, (int64_t[]){4, 5, 32}, 3);
        cft_fn *vx = cft_vmap_n(f, (int[]){0, CFT_NOT_BATCHED, CFT_NOT_BATCHED}, 3, NULL, 0);
        cft_array *yx = cft_fn_call1(vx, (cft_array *[]){xs, s.values, s.meta});
        for (int m = 0; m < 4; m++)
            CHECK_ARRAY_CLOSE(cft_index(yx, m), cft_sparse24_linear(cft_index(xs, m), s), 0, 0);
    }

    TEST("jit of prune-compress-multiply equals the interpreter, twice and on new inputs") {
        cft_fn *f = cft_fn_new(prune_fn, NULL, 2, 1), *j = cft_jit(f);
        cft_array *in[2] = {x, w}, *ref = cft_fn_call1(f, in);
        for (int r = 0; r < 2; r++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, in), ref, 0, 0);
        /* new inputs: the plan does not keep the first call's positions */
        cft_array *in2[2] = {cft_mul_s(x, -2), rnd(11, CFT_F32, (int64_t[]){16, 32}, 2)};
        CHECK_ARRAY_CLOSE(cft_fn_call1(j, in2), cft_fn_call1(f, in2), 0, 0);
    }

    TEST("a program with a 2:4 product exports and loads") {
        char path[64];
        snprintf(path, sizeof path, "/tmp/cft_s24_%d.cftx", (int)getpid());
        cft_fn *f = cft_fn_new(lin_fn, NULL, 3, 1);
        cft_aval av[3] = {cft_array_aval(x), cft_array_aval(s.values), cft_array_aval(s.meta)};
        CHECK(cft_export(f, av, path) == CFT_OK);
        cft_fn *back = cft_load_exported(path);
        CHECK_ARRAY_CLOSE(cft_fn_call1(back, in3), cft_fn_call1(f, in3), 0, 0);
        unlink(path);
    }

    TEST("4 threads multiply with one 2:4 weight") {
        cft_fn *f = cft_fn_new(lin_fn, NULL, 3, 1);
        cft_array *ref = cft_fn_call1(f, in3);
        pthread_t th[4];
        targ a[4];
        for (int i = 0; i < 4; i++) {
            a[i] = (targ){f, in3, ref, 0};
            pthread_create(&th[i], NULL, thread_main, &a[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            CHECK_EQ(a[i].bad, 0);
        }
    }

    TEST("bad shapes and dtypes are refused by name") {
        cft_array *w6 = rnd(8, CFT_F32, (int64_t[]){4, 6}, 2);
        cft_array *e = cft_prune_24(w6);
        CHECK(cft_failed(e));
        CHECK(strstr(cft_error_message(e), "cft_prune_24") != NULL);
        CHECK(strstr(cft_error_message(e), "not a multiple of 4") != NULL);
        e = cft_sparse24_linear(rnd(9, CFT_F32, (int64_t[]){3, 16}, 2), s); /* K 16 vs 32 */
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_sparse24_linear") != NULL);
        e = cft_sparse24_linear(x, (cft_sparse24){s.values, cft_astype(s.meta, CFT_F32)});
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "i32") != NULL);
        e = cft_sparse24_meta(cft_ones(CFT_I32, (int64_t[]){2, 4}, 2));
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "float") != NULL);
        cft_sparse24 bad = cft_sparse24_compress(NULL);
        CHECK(cft_failed(bad.values) && cft_failed(bad.meta));
    }

    /* ---- pruning ---- */
    float pw[2][4] = {{0.5f, -3, 1, 2}, {-0.1f, 4, -2, 0.3f}};
    cft_array *P = cft_from_data(pw, CFT_F32, (int64_t[]){2, 4}, 2);

    TEST("l1_unstructured: fractions round half to even, counts, masks combine") {
        float m1[8] = {0, 1, 1, 1, 0, 1, 1, 0}; /* 0.375 of 8 = 3 smallest: 0.1, 0.3, 0.5 */
        cft_array *m = cft_prune_l1_unstructured(P, 0.375, NULL);
        CHECK_ARRAY_CLOSE(cft_reshape(m, (int64_t[]){8}, 1),
                          cft_from_data(m1, CFT_F32, (int64_t[]){8}, 1), 0, 0);
        CHECK(cft_array_dtype(m) == CFT_F32);
        CHECK_CLOSE(count_nonzero(cft_prune_l1_unstructured(P, 0.3125, NULL)), 6, 0,
                    0); /* 2.5 -> 2 */
        CHECK_CLOSE(count_nonzero(cft_prune_l1_unstructured(P, 3, NULL)), 5, 0, 0);
        /* a second pass prunes half of the 5 left: round(2.5) = 2 more, 1 and then
         * 2 of the tie 2 / -2 (ties: the lower index first) */
        cft_array *m2 = cft_prune_l1_unstructured(P, 0.5, m);
        float want[8] = {0, 1, 0, 0, 0, 1, 1, 0};
        CHECK_ARRAY_CLOSE(cft_reshape(m2, (int64_t[]){8}, 1),
                          cft_from_data(want, CFT_F32, (int64_t[]){8}, 1), 0, 0);
        CHECK(cft_failed(cft_prune_l1_unstructured(P, 9, NULL)));
        CHECK(cft_failed(cft_prune_l1_unstructured(P, 1.5, NULL)));
        cft_array *e = cft_prune_l1_unstructured(P, -0.1, NULL);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_prune_l1_unstructured") != NULL);
    }

    TEST("random_unstructured prunes the asked count, the same for the same key") {
        cft_array *big = rnd(10, CFT_F32, (int64_t[]){50, 20}, 2);
        cft_array *a = cft_prune_random_unstructured(cft_random_key(3), big, 0.3, NULL);
        cft_array *b = cft_prune_random_unstructured(cft_random_key(3), big, 0.3, NULL);
        CHECK_CLOSE(count_nonzero(a), 700, 0, 0);
        CHECK_ARRAY_CLOSE(a, b, 0, 0);
        cft_array *c = cft_prune_random_unstructured(cft_random_key(4), big, 0.3, a);
        CHECK_CLOSE(count_nonzero(c), 490, 0, 0); /* 0.3 of the 700 left */
        CHECK_CLOSE(count_nonzero(cft_mul(c, cft_sub(cft_ones_like(a), a))), 0, 0, 0);
    }

    TEST("ln_structured prunes whole rows or columns by their norm") {
        /* rows' L2 norms: sqrt(14.25) < sqrt(20.1); columns' L1: 0.6, 7, 3, 2.3 */
        cft_array *r = cft_prune_ln_structured(P, 1, 2, 0, NULL);
        float wr[8] = {0, 0, 0, 0, 1, 1, 1, 1};
        CHECK_ARRAY_CLOSE(cft_reshape(r, (int64_t[]){8}, 1),
                          cft_from_data(wr, CFT_F32, (int64_t[]){8}, 1), 0, 0);
        cft_array *c = cft_prune_ln_structured(P, 0.5, 1, -1, NULL);
        float wc[8] = {0, 1, 1, 0, 0, 1, 1, 0};
        CHECK_ARRAY_CLOSE(cft_reshape(c, (int64_t[]){8}, 1),
                          cft_from_data(wc, CFT_F32, (int64_t[]){8}, 1), 0, 0);
        cft_array *ci =
            cft_prune_ln_structured(P, 1, INFINITY, 1, c); /* of the 2 left, max 4 vs 2 */
        float wi[8] = {0, 1, 0, 0, 0, 1, 0, 0};
        CHECK_ARRAY_CLOSE(cft_reshape(ci, (int64_t[]){8}, 1),
                          cft_from_data(wi, CFT_F32, (int64_t[]){8}, 1), 0, 0);
        CHECK(cft_failed(cft_prune_ln_structured(P, 1, 2, 2, NULL)));
    }

    TEST("global_unstructured, apply (zero gradients where pruned) and remove") {
        const char *names[2] = {"a", "b"};
        float bv[3] = {0.2f, -5, 0.05f};
        cft_array *xs[2] = {P, cft_from_data(bv, CFT_F32, (int64_t[]){3}, 1)};
        cft_tree *params = cft_tree_from(names, xs, 2);
        cft_tree *masks = cft_prune_global_unstructured(params, names, 2, 4, NULL);
        CHECK(!cft_tree_failed(masks));
        /* the 4 smallest of all 11: 0.05, 0.1, 0.2, 0.3 */
        float wb[3] = {0, 1, 0};
        CHECK_ARRAY_CLOSE(cft_tree_get(masks, "b"), cft_from_data(wb, CFT_F32, (int64_t[]){3}, 1),
                          0, 0);
        CHECK_CLOSE(count_nonzero(cft_tree_get(masks, "a")), 6, 0, 0);
        cft_tree *applied = cft_prune_apply(params, masks);
        CHECK_CLOSE(count_nonzero(cft_tree_get(applied, "a")), 6, 0, 0);
        cft_tree *left;
        cft_tree *kept = cft_prune_remove(params, masks, "a", &left);
        CHECK_ARRAY_CLOSE(cft_tree_get(kept, "a"), cft_tree_get(applied, "a"), 0, 0);
        CHECK_ARRAY_CLOSE(cft_tree_get(kept, "b"), xs[1], 0, 0);
        CHECK(cft_tree_size(left) == 1 && cft_tree_has(left, "b"));
        CHECK(cft_tree_failed(cft_prune_remove(params, left, "a", NULL)));
        CHECK(cft_tree_failed(
            cft_prune_global_unstructured(params, (const char *[]){"zz"}, 1, 0.5, NULL)));
    }

    return check_summary();
}
