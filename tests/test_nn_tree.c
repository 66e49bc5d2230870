/* test_nn_tree.c: parameter trees (nn.h): set/get/remove keep order and
 * never mutate; error trees absorb; subtree/merge by dotted prefix;
 * flatten/unflatten round trips; map, zip_map and map_n match by name;
 * astype; stack/index/unstack (stack_module_state), and an ensemble by vmap
 * over stacked MLP params against a loop; cft_tree_fn_new under grad. */
#include <string.h>

#include "check.h"

static cft_array *vec(double a, double b, double c) {
    double v[3] = {a, b, c};
    return cft_from_f64(v, (int64_t[]){3}, 1);
}

static cft_array *twice(void *env, const char *name, cft_array *x) {
    (void)env, (void)name;
    return cft_mul_s(x, 2);
}
static cft_array *minus(void *env, const char *name, cft_array *a, cft_array *b) {
    (void)env, (void)name;
    return cft_sub(a, b);
}
static cft_array *sum3(void *env, const char *name, cft_array *const *xs, int n) {
    (void)name;
    *(int *)env = n;
    return cft_add(cft_add(xs[0], xs[1]), xs[2]);
}
static cft_array *bad_leaf(void *env, const char *name, cft_array *x) {
    (void)env, (void)x;
    return strcmp(name, "b") == 0 ? cft_matmul(cft_scalar(1, CFT_F32), x) : x;
}

/* sum of squares of every leaf */
static cft_status sumsq(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                        cft_array **out) {
    (void)env, (void)nin, (void)in, (void)nout;
    cft_array *s = cft_scalar(0, CFT_F64);
    for (int i = 0; i < cft_tree_size(p); i++)
        s = cft_add(s, cft_sum(cft_square(cft_tree_at(p, i)), NULL, 0, false));
    out[0] = cft_mul(s, cft_sum(in[0], NULL, 0, false)); /* times sum(extra input) */
    return CFT_OK;
}

typedef struct {
    cft_module *m;
    cft_tree *like;
} mlp_env;

static cft_status mlp_fwd(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                          cft_array **out) {
    (void)nin, (void)nout;
    mlp_env *e = env;
    out[0] = cft_module_apply(e->m, p, NULL, in[0], false, NULL, NULL);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    TEST("set/get/has/remove keep insertion order and never mutate") {
        cft_tree *t0 = cft_tree_new();
        cft_tree *t1 = cft_tree_set(t0, "layers.0.weight", vec(1, 2, 3));
        cft_tree *t2 = cft_tree_set(t1, "layers.0.bias", vec(4, 5, 6));
        cft_tree *t3 = cft_tree_set(t2, "layers.0.weight", vec(7, 8, 9)); /* replace in place */
        CHECK_EQ(cft_tree_size(t0), 0);
        CHECK_EQ(cft_tree_size(t1), 1);
        CHECK_EQ(cft_tree_size(t3), 2);
        CHECK(!strcmp(cft_tree_name(t3, 0), "layers.0.weight"));
        CHECK(!strcmp(cft_tree_name(t3, 1), "layers.0.bias"));
        CHECK_CLOSE(cft_item_at(cft_tree_get(t3, "layers.0.weight"), 0), 7, 0, 0);
        CHECK_CLOSE(cft_item_at(cft_tree_get(t2, "layers.0.weight"), 0), 1, 0,
                    0); /* t2 unchanged */
        CHECK(cft_tree_has(t3, "layers.0.bias") && !cft_tree_has(t3, "layers.0"));
        cft_tree *t4 = cft_tree_remove(t3, "layers.0.weight");
        CHECK_EQ(cft_tree_size(t4), 1);
        CHECK_EQ(cft_tree_size(t3), 2);
        CHECK(!strcmp(cft_tree_name(t4, 0), "layers.0.bias"));
        CHECK(cft_tree_remove(t4, "absent") == t4);
        CHECK(cft_tree_name(t4, 5) == NULL);
        CHECK(cft_failed(cft_tree_at(t4, 5)));
        const char *names[2] = {"a", "b"};
        cft_array *xs[2] = {vec(1, 1, 1), vec(2, 2, 2)};
        cft_tree *tf = cft_tree_from(names, xs, 2);
        CHECK_EQ(cft_tree_size(tf), 2);
        CHECK(!strcmp(cft_tree_name(tf, 1), "b"));
    }

    TEST("error trees: missing names, error leaves, absorbing calls") {
        cft_tree *t = cft_tree_set(cft_tree_new(), "w", vec(1, 2, 3));
        cft_array *e = cft_tree_get(t, "nope");
        CHECK(cft_failed(e));
        CHECK(strstr(cft_error_message(e), "cft_tree_get") &&
              strstr(cft_error_message(e), "'nope'"));
        cft_array *bad =
            cft_matmul(vec(1, 2, 3), cft_from_f64((double[]){1, 2}, (int64_t[]){2}, 1));
        cft_tree *et = cft_tree_set(t, "x", bad);
        CHECK(cft_tree_failed(et));
        CHECK(cft_tree_error(et) == bad);
        CHECK(strstr(cft_error_message(cft_tree_error(et)), "cft_matmul") != NULL);
        CHECK(cft_tree_error(cft_tree_map(et, twice, NULL)) == bad);
        CHECK(cft_tree_error(cft_tree_set(et, "y", vec(0, 0, 0))) == bad);
        CHECK(cft_tree_get(et, "w") == bad);
        CHECK_EQ(cft_tree_size(et), 0);
        CHECK(cft_tree_failed(NULL));
        CHECK(cft_failed(cft_tree_error(NULL)));
        const char *dup[2] = {"a", "a"};
        cft_array *xs[2] = {vec(1, 1, 1), vec(2, 2, 2)};
        cft_tree *d = cft_tree_from(dup, xs, 2);
        CHECK(cft_tree_failed(d) && strstr(cft_error_message(cft_tree_error(d)), "duplicate"));
        cft_tree *mb = cft_tree_map(cft_tree_set(t, "b", vec(1, 2, 3)), bad_leaf, NULL);
        CHECK(cft_tree_failed(mb));
        CHECK(cft_tree_failed(cft_tree_set(t, "", vec(1, 2, 3))));
        CHECK(cft_tree_failed(cft_tree_set(t, "z", NULL)));
        cft_array *out[1];
        CHECK(cft_tree_flatten(et, out) != CFT_OK);
    }

    TEST("subtree and merge by dotted prefix") {
        cft_tree *enc = cft_tree_set(cft_tree_set(cft_tree_new(), "weight", vec(1, 2, 3)), "bias",
                                     vec(0, 0, 1));
        cft_tree *t = cft_tree_merge(cft_tree_new(), "enc.fc", enc);
        t = cft_tree_merge(t, "head", enc);
        t = cft_tree_set(t, "enc.fcx", vec(9, 9, 9));
        CHECK_EQ(cft_tree_size(t), 5);
        CHECK(!strcmp(cft_tree_name(t, 0), "enc.fc.weight"));
        CHECK(!strcmp(cft_tree_name(t, 3), "head.bias"));
        cft_tree *s = cft_tree_subtree(t, "enc.fc");
        CHECK_EQ(cft_tree_size(s), 2); /* not enc.fcx */
        CHECK(!strcmp(cft_tree_name(s, 0), "weight") && !strcmp(cft_tree_name(s, 1), "bias"));
        CHECK_EQ(cft_tree_size(cft_tree_subtree(t, "enc")), 3);
        CHECK_EQ(cft_tree_size(cft_tree_subtree(t, "nothing")), 0);
        cft_tree *m2 =
            cft_tree_merge(t, "head", cft_tree_set(cft_tree_new(), "bias", vec(5, 5, 5)));
        CHECK_EQ(cft_tree_size(m2), 5);
        CHECK_CLOSE(cft_item_at(cft_tree_get(m2, "head.bias"), 0), 5, 0, 0);
        CHECK_EQ(cft_tree_size(cft_tree_merge(cft_tree_new(), NULL, enc)), 2);
        FILE *f = tmpfile();
        char buf[256] = "";
        cft_tree_print(s, f);
        rewind(f);
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = 0;
        fclose(f);
        CHECK_MSG(!strcmp(buf, "weight: f64[3]\nbias: f64[3]\n"), "printed: %s", buf);
    }

    TEST("flatten / unflatten round trip; maps match by name") {
        cft_tree *a =
            cft_tree_set(cft_tree_set(cft_tree_new(), "x", vec(1, 2, 3)), "y", vec(4, 5, 6));
        cft_array *flat[2];
        CHECK_EQ(cft_tree_flatten(a, flat), CFT_OK);
        CHECK(flat[0] == cft_tree_get(a, "x") && flat[1] == cft_tree_get(a, "y"));
        cft_array *other[2] = {vec(0, 0, 0), vec(1, 1, 1)};
        cft_tree *u = cft_tree_unflatten(a, other);
        CHECK(!strcmp(cft_tree_name(u, 1), "y") && cft_tree_get(u, "y") == other[1]);
        cft_tree *m = cft_tree_map(a, twice, NULL);
        CHECK_ARRAY_CLOSE(cft_tree_get(m, "y"), vec(8, 10, 12), 0, 0);
        /* b has the same names in another order, plus an extra one */
        cft_tree *b = cft_tree_set(
            cft_tree_set(cft_tree_set(cft_tree_new(), "extra", vec(0, 0, 0)), "y", vec(1, 1, 1)),
            "x", vec(1, 1, 1));
        cft_tree *z = cft_tree_zip_map(a, b, minus, NULL);
        CHECK_EQ(cft_tree_size(z), 2);
        CHECK(!strcmp(cft_tree_name(z, 0), "x"));
        CHECK_ARRAY_CLOSE(cft_tree_get(z, "y"), vec(3, 4, 5), 0, 0);
        cft_tree *miss = cft_tree_zip_map(b, a, minus, NULL);
        CHECK(cft_tree_failed(miss) && strstr(cft_error_message(cft_tree_error(miss)), "'extra'"));
        int seen = 0;
        const cft_tree *three[3] = {a, b, a};
        cft_tree *s = cft_tree_map_n(three, 3, sum3, &seen);
        CHECK_EQ(seen, 3);
        CHECK_ARRAY_CLOSE(cft_tree_get(s, "x"), vec(3, 5, 7), 0, 0);
        cft_tree *f32 =
            cft_tree_astype(cft_tree_set(a, "i", cft_arange(0, 3, 1, CFT_I32)), CFT_F32);
        CHECK_EQ(cft_array_dtype(cft_tree_get(f32, "x")), CFT_F32);
        CHECK_EQ(cft_array_dtype(cft_tree_get(f32, "i")), CFT_I32);
        CHECK(cft_tree_failed(cft_tree_astype(a, CFT_I32)));
    }

    TEST("stack / index / unstack (stack_module_state)") {
        cft_tree *ts[3];
        for (int k = 0; k < 3; k++)
            ts[k] = cft_tree_set(cft_tree_set(cft_tree_new(), "w", vec(k, k + 1, k + 2)), "s",
                                 cft_scalar(10 * k, CFT_F64));
        cft_tree *st = cft_tree_stack((const cft_tree *const *)ts, 3);
        CHECK(!cft_tree_failed(st));
        CHECK_EQ(cft_array_dim(cft_tree_get(st, "w"), 0), 3);
        CHECK_EQ(cft_array_dim(cft_tree_get(st, "w"), 1), 3);
        CHECK_EQ(cft_array_ndim(cft_tree_get(st, "s")), 1);
        cft_tree *back[3];
        CHECK_EQ(cft_tree_unstack(st, 3, back), CFT_OK);
        for (int k = 0; k < 3; k++) {
            CHECK_ARRAY_CLOSE(cft_tree_get(back[k], "w"), cft_tree_get(ts[k], "w"), 0, 0);
            CHECK_ARRAY_CLOSE(cft_tree_get(back[k], "s"), cft_tree_get(ts[k], "s"), 0, 0);
        }
        CHECK_ARRAY_CLOSE(cft_tree_get(cft_tree_index(st, 2), "w"), vec(2, 3, 4), 0, 0);
        CHECK(cft_tree_unstack(st, 2, back) != CFT_OK);
        CHECK(cft_tree_failed(back[0]));
        cft_tree *odd[2] = {ts[0], cft_tree_set(ts[1], "w", vec(1, 2, 3))};
        odd[1] = cft_tree_set(odd[1], "w", cft_zeros(CFT_F64, (int64_t[]){4}, 1));
        cft_tree *bad = cft_tree_stack((const cft_tree *const *)odd, 2);
        CHECK(cft_tree_failed(bad) && strstr(cft_error_message(cft_tree_error(bad)), "'w'"));
    }

    TEST("ensemble: vmap over stacked MLP params equals a loop") {
        cft_module *m = cft_nn_mlp((int64_t[]){4, 8, 3}, 3, CFT_ACT_TANH, 0);
        enum { K = 4 };
        cft_tree *ps[K];
        for (int k = 0; k < K; k++)
            ps[k] = cft_tree_astype(cft_module_init(m, cft_random_key(100 + k), NULL), CFT_F64);
        cft_tree *st = cft_tree_stack((const cft_tree *const *)ps, K);
        mlp_env env = {m, ps[0]};
        cft_fn *f = cft_tree_fn_new(mlp_fwd, &env, ps[0], 1, 1);
        int n = cft_tree_size(st);
        int in_axes[8];
        for (int i = 0; i < n; i++)
            in_axes[i] = 0;
        in_axes[n] = CFT_NOT_BATCHED;
        cft_fn *ens = cft_vmap(f, in_axes, NULL);
        cft_array *x = cft_random_normal(cft_random_key(7), CFT_F64, (int64_t[]){5, 4}, 2);
        cft_array *in[8];
        cft_tree_flatten(st, in);
        in[n] = x;
        cft_array *y = cft_fn_call1(ens, in); /* [K, 5, 3] */
        CHECK_EQ(cft_array_dim(y, 0), K);
        for (int k = 0; k < K; k++)
            CHECK_ARRAY_CLOSE(cft_index(y, k),
                              cft_module_apply(m, ps[k], NULL, x, false, NULL, NULL), 1e-12, 1e-12);
    }

    TEST("cft_tree_fn_new: grad over the flat leaves comes back unflattenable") {
        cft_tree *p = cft_tree_set(cft_tree_set(cft_tree_new(), "a.w", vec(1, 2, 3)), "b",
                                   cft_scalar(-2, CFT_F64));
        cft_fn *f = cft_tree_fn_new(sumsq, NULL, p, 1, 1);
        CHECK_EQ(cft_fn_nin(f), 3);
        cft_fn *g = cft_grad(f, (int[]){0, 1}, 2);
        cft_array *in[3] = {cft_tree_at(p, 0), cft_tree_at(p, 1), vec(1, 1, 1)}, *gr[2];
        CHECK_EQ(cft_fn_call(g, in, gr), CFT_OK);
        cft_tree *gt = cft_tree_unflatten(p, gr);
        CHECK_ARRAY_CLOSE(cft_tree_get(gt, "a.w"), vec(6, 12, 18), 1e-15, 0); /* 2 * 3 * w */
        CHECK_CLOSE(cft_item(cft_tree_get(gt, "b")), -12, 1e-15, 0);
        cft_fn *bad = cft_tree_fn_new(
            sumsq, NULL, cft_tree_set(p, "e", cft_matmul(vec(1, 2, 3), cft_eye(2, CFT_F64))), 1, 1);
        CHECK(cft_fn_call(bad, in, gr) != CFT_OK);
    }

    return check_summary();
}
