/* test_tree_transforms.c: transforms addressed by tree. Per-sample
 * gradients (tree shared, batch along 0) and an ensemble's gradients (tree
 * stacked along 0, data shared) through cft_tree_vmap / cft_tree_grad /
 * cft_tree_call equal the same computations written with argnums and
 * in_axes arrays (exactly: the same primitives), and name each gradient
 * like its parameter; value_and_grad and has_aux keep their output order;
 * bad trees name the call. */
#include <string.h>

#include "cft/cft.h"
#include "check.h"

/* (params {w [4,3], b [3]}, x [4], y []) -> cross-entropy; aux: the logits */
static cft_status loss(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                       cft_array **out) {
    (void)env, (void)nin;
    cft_array *logits = cft_add(cft_matmul(in[0], cft_tree_get(p, "w")), cft_tree_get(p, "b"));
    out[0] = cft_mean(cft_cross_entropy(logits, in[1]), NULL, 0, false);
    if (nout > 1)
        out[1] = logits;
    return CFT_OK;
}

/* nested: (params {enc.w [4,4], enc.b [4], head.w [4,3], head.b [3]}, x [5,4], y [5]) */
static cft_status nested_loss(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                              cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_tree *enc = cft_tree_subtree(p, "enc"), *head = cft_tree_subtree(p, "head");
    cft_array *h =
        cft_relu(cft_add(cft_matmul(in[0], cft_tree_get(enc, "w")), cft_tree_get(enc, "b")));
    cft_array *logits = cft_add(cft_matmul(h, cft_tree_get(head, "w")), cft_tree_get(head, "b"));
    out[0] = cft_mean(cft_cross_entropy(logits, in[1]), NULL, 0, false);
    return CFT_OK;
}

static cft_array *twice(void *env, const char *name, cft_array *x) {
    (void)env, (void)name;
    return cft_mul_s(x, 2);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_tree *p = cft_tree_new();
    p = cft_tree_set(p, "w", cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){4, 3}, 2));
    p = cft_tree_set(p, "b", cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){3}, 1));
    cft_array *x = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){5, 4}, 2);
    cft_array *y = cft_astype(
        cft_mul_s(cft_random_uniform(cft_random_key(4), CFT_F32, (int64_t[]){5}, 1, 0, 1), 2.99),
        CFT_I32);
    cft_fn *f = cft_tree_fn_new(loss, NULL, p, 2, 1);
    TEST("per-sample gradients by tree equal the argnums / in_axes version") {
        cft_fn *psg = cft_tree_vmap(cft_tree_grad(f, p, false), p, CFT_NOT_BATCHED, NULL, NULL);
        cft_tree *g;
        CHECK_EQ(cft_tree_call(psg, p, (cft_array *[]){x, y}, p, &g, NULL), CFT_OK);
        cft_fn *flat = cft_vmap(cft_grad(f, (int[]){0, 1}, 2),
                                (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL);
        cft_array *want[2], *in[4];
        cft_tree_flatten(p, in);
        in[2] = x, in[3] = y;
        CHECK_EQ(cft_fn_call(flat, in, want), CFT_OK);
        CHECK_ARRAY_CLOSE(cft_tree_get(g, "w"), want[0], 0, 0);
        CHECK_ARRAY_CLOSE(cft_tree_get(g, "b"), want[1], 0, 0);
        CHECK_EQ(cft_array_dim(cft_tree_get(g, "w"), 0), 5);
    }
    TEST("an ensemble's gradients: the tree stacked along 0, the data shared") {
        cft_tree *p2 = cft_tree_map(p, twice, NULL); /* a second model */
        const cft_tree *two[2] = {p, p2};
        cft_tree *stacked = cft_tree_stack(two, 2);
        cft_fn *eg = cft_tree_vmap(cft_tree_grad(f, p, false), p, 0,
                                   (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED}, NULL);
        cft_tree *g, *g1;
        CHECK_EQ(cft_tree_call(eg, stacked, (cft_array *[]){x, y}, p, &g, NULL), CFT_OK);
        CHECK_EQ(cft_tree_call(cft_tree_grad(f, p, false), p2, (cft_array *[]){x, y}, p, &g1, NULL),
                 CFT_OK);
        /* vmap against one model is not bitwise (the batched products may be
         * blocked otherwise by the GEMM library): f32, sums of 5 terms, a few ulp */
        CHECK_ARRAY_CLOSE(cft_index(cft_tree_get(g, "w"), 1), cft_tree_get(g1, "w"), 1e-6, 1e-6);
    }
    TEST("value_and_grad and has_aux keep their output order") {
        cft_fn *fa = cft_tree_fn_new(loss, NULL, p, 2, 2);
        cft_array *rest[4]; /* value, aux (logits), then the two gradients: no out tree */
        cft_tree *g;
        CHECK_EQ(cft_tree_call(cft_tree_value_and_grad(fa, p, true), p, (cft_array *[]){x, y}, NULL,
                               NULL, rest),
                 CFT_OK);
        CHECK_EQ(cft_array_ndim(rest[0]), 0);
        CHECK_EQ(cft_array_dim(rest[1], 1), 3);
        cft_array *aux[1];
        CHECK_EQ(cft_tree_call(cft_tree_grad(fa, p, true), p, (cft_array *[]){x, y}, p, &g, aux),
                 CFT_OK);
        CHECK_ARRAY_CLOSE(aux[0], rest[1], 0, 0);
        CHECK_EQ(cft_tree_size(g), 2);
    }
    TEST("in_axes per subtree: a shared encoder, stacked heads with a shared bias") {
        cft_tree *enc = cft_tree_set(
            cft_tree_set(cft_tree_new(), "w",
                         cft_random_normal(cft_random_key(5), CFT_F32, (int64_t[]){4, 4}, 2)),
            "b", cft_random_normal(cft_random_key(6), CFT_F32, (int64_t[]){4}, 1));
        cft_tree *one = cft_tree_merge(cft_tree_merge(cft_tree_new(), "enc", enc), "head", p);
        cft_tree *heads = cft_tree_set(
            one, "head.w", cft_random_normal(cft_random_key(7), CFT_F32, (int64_t[]){3, 4, 3}, 3));
        cft_fn *nf = cft_tree_fn_new(nested_loss, NULL, one, 2, 1);
        const char *pre[3] = {"enc", "head", "head.b"};
        int ax[3] = {CFT_NOT_BATCHED, 0, CFT_NOT_BATCHED};
        cft_fn *v = cft_tree_vmap_prefix(nf, one, 3, pre, ax, 0,
                                         (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED}, NULL);
        cft_array *r[1];
        CHECK_EQ(cft_tree_call(v, heads, (cft_array *[]){x, y}, NULL, NULL, r), CFT_OK);
        CHECK_EQ(cft_array_dim(r[0], 0), 3);
        for (int k = 0; k < 3; k++) { /* the loop over heads it replaces */
            cft_tree *pk =
                cft_tree_set(heads, "head.w", cft_index(cft_tree_get(heads, "head.w"), k));
            cft_array *rk[1];
            CHECK_EQ(cft_tree_call(nf, pk, (cft_array *[]){x, y}, NULL, NULL, rk), CFT_OK);
            CHECK_ARRAY_CLOSE(rk[0], cft_index(r[0], k), 1e-6, 1e-6);
        }
        /* a prefix is a whole name or ends before a '.': "en" names nothing */
        const char *bad[1] = {"en"};
        cft_fn *e = cft_tree_vmap_prefix(nf, one, 1, bad, ax, 0, NULL, NULL);
        CHECK(cft_fn_failed(e));
        CHECK(strstr(cft_fn_error_message(e),
                     "cft_tree_vmap_prefix: the prefix \"en\" names no leaf") != NULL);
        CHECK(cft_fn_failed(cft_tree_vmap_prefix(nf, one, 1, NULL, ax, 0, NULL, NULL)));
    }
    TEST("bad trees name the call") {
        cft_fn *bad = cft_tree_grad(f, cft_tree_new(), false);
        CHECK(cft_fn_failed(bad) && strstr(cft_fn_error_message(bad), "cft_tree_grad") &&
              strstr(cft_fn_error_message(bad), "empty"));
        cft_tree *g;
        CHECK_EQ(cft_tree_call(f, NULL, NULL, p, &g, NULL), CFT_E_ARG);
        CHECK(cft_tree_failed(g));
    }
    return check_summary();
}
