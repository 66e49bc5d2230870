/* test_nn_layers.c: the layers of nn.h against hand-computed values:
 * activations (values, stability at +-1000, derivatives), linear,
 * layer_norm, batch_norm (train / eval, running-stat updates with the
 * unbiased variance, [N, C, L] inputs), dropout (mask statistics, keys,
 * eval, vmap over keys), embedding (rows and gradient counts), and the
 * modules: PyTorch's initialisations and names, Sequential / MLP, BatchNorm
 * state threading, bad configurations. Gradients of layer_norm and
 * batch_norm are checked against central finite differences in f64. */
#include <math.h>
#include <string.h>

#include "check.h"

static cft_array *f64(const double *v, const int64_t *shape, int nd) {
    return cft_from_f64(v, shape, nd);
}
static cft_array *vec(const double *v, int64_t n) {
    return cft_from_f64(v, &n, 1);
}

/* d/dx sum(f(x) * c) at x by central differences, compared with grad */
typedef struct {
    int which; /* 0 layer_norm, 1 batch_norm (train) */
    cft_array *c;
} fd_env;

static cft_array *fd_fun(fd_env *e, cft_array *x) {
    if (e->which == 0)
        return cft_layer_norm(x, 1, NULL, NULL, 1e-5);
    cft_array *rm = cft_zeros(CFT_F64, (int64_t[]){cft_array_dim(x, 1)}, 1);
    return cft_batch_norm(x, rm, cft_ones_like(rm), NULL, NULL, true, 0.1, 1e-5, NULL, NULL);
}
static cft_status fd_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    fd_env *e = env;
    out[0] = cft_sum(cft_mul(fd_fun(e, in[0]), e->c), NULL, 0, false);
    return CFT_OK;
}
static double fd_check(fd_env *e, cft_array *x) {
    cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(fd_cb, e, 1, 1), NULL, 0), &x);
    int64_t n = cft_array_size(x);
    double *xv = malloc(sizeof(double) * (size_t)n), worst = 0, h = 1e-6;
    cft_copy_to(x, CFT_F64, xv);
    for (int64_t i = 0; i < n; i++) {
        double keep = xv[i], f[2];
        for (int s = 0; s < 2; s++) {
            xv[i] = keep + (s ? -h : h);
            cft_array *xi = cft_from_f64(xv, cft_array_shape(x), cft_array_ndim(x));
            cft_array *o;
            fd_cb(e, 1, &xi, 1, &o);
            f[s] = cft_item(o);
        }
        xv[i] = keep;
        double d = fabs((f[0] - f[1]) / (2 * h) - cft_item_at(g, i));
        if (!(d <= worst))
            worst = d;
    }
    free(xv);
    return worst;
}

static cft_status dropout_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_dropout(in[0], 0.5, true, in[1]);
    return CFT_OK;
}
static cft_status emb_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_embedding(in[1], in[0]), NULL, 0, false);
    return CFT_OK;
}
static cft_status act_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_sum(cft_activation(in[0], *(cft_activation_kind *)env), NULL, 0, false);
    return CFT_OK;
}

/* x [4, 3] -> Linear -> BatchNorm (train) -> SiLU -> Dropout(key) -> Linear -> softplus, summed
 * with an embedding lookup: every layer at once, for jacfwd vs jacrev */
typedef struct {
    cft_module *seq;
    cft_tree *p, *s;
    cft_array *key, *ids, *table;
} all_env;
static cft_status all_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    all_env *e = env;
    cft_array *y = cft_module_apply(e->seq, e->p, e->s, in[0], true, e->key, NULL);
    out[0] = cft_add(cft_softplus(y), cft_sum(cft_embedding(e->ids, e->table), NULL, 0, false));
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    const double xs5[5] = {-2, -0.5, 0, 0.5, 2};
    cft_array *x5 = vec(xs5, 5);

    TEST("activations: values") {
        double silu[5], sig[5], sp[5], relu[5], th[5];
        for (int i = 0; i < 5; i++) {
            double x = xs5[i], s = 1 / (1 + exp(-x));
            sig[i] = s, silu[i] = x * s, sp[i] = log(1 + exp(x)), relu[i] = x > 0 ? x : 0,
            th[i] = tanh(x);
        }
        CHECK_ARRAY_CLOSE(cft_silu(x5), vec(silu, 5), 1e-15, 1e-16);
        CHECK_ARRAY_CLOSE(cft_sigmoid(x5), vec(sig, 5), 1e-15, 1e-16);
        CHECK_ARRAY_CLOSE(cft_softplus(x5), vec(sp, 5), 1e-15, 1e-16);
        CHECK_ARRAY_CLOSE(cft_activation(x5, CFT_ACT_RELU), vec(relu, 5), 0, 0);
        CHECK_ARRAY_CLOSE(cft_activation(x5, CFT_ACT_TANH), vec(th, 5), 1e-15, 0);
        CHECK_ARRAY_CLOSE(cft_activation(x5, CFT_ACT_IDENTITY), x5, 0, 0);
        CHECK_ARRAY_CLOSE(cft_activation(x5, CFT_ACT_SIGMOID), vec(sig, 5), 1e-15, 1e-16);
        CHECK_ARRAY_CLOSE(cft_activation(x5, CFT_ACT_SILU), vec(silu, 5), 1e-15, 1e-16);
        CHECK_ARRAY_CLOSE(cft_activation(x5, CFT_ACT_SOFTPLUS), vec(sp, 5), 1e-15, 1e-16);
        /* GELU(1): exact Phi(1) = 0.841344746068543; tanh form 0.8411919906082768 */
        cft_array *one = cft_scalar(1, CFT_F64);
        CHECK_CLOSE(cft_item(cft_activation(one, CFT_ACT_GELU)), 0.8413447460685429, 1e-15, 0);
        CHECK_CLOSE(cft_item(cft_activation(one, CFT_ACT_GELU_TANH)), 0.8411919906082768, 1e-15, 0);
        CHECK(cft_failed(cft_activation(x5, (cft_activation_kind)99)));
    }

    TEST("activations: softplus and sigmoid stay finite at +-1000") {
        const double big[2] = {-1000, 1000};
        cft_array *b = vec(big, 2), *bf = cft_astype(b, CFT_F32);
        CHECK_ARRAY_CLOSE(cft_softplus(b), vec((double[]){0, 1000}, 2), 0, 0);
        CHECK_ARRAY_CLOSE(cft_softplus(bf), vec((double[]){0, 1000}, 2), 0, 0);
        CHECK_ARRAY_CLOSE(cft_sigmoid(b), vec((double[]){0, 1}, 2), 0, 0);
        CHECK_ARRAY_CLOSE(cft_silu(b), vec((double[]){0, 1000}, 2), 0, 0);
        cft_activation_kind k = CFT_ACT_SOFTPLUS;
        cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(act_cb, &k, 1, 1), NULL, 0), &b);
        CHECK_ARRAY_CLOSE(g, vec((double[]){0, 1}, 2), 0, 0);
    }

    TEST("activations: derivatives (softplus' = sigmoid, 0.5 at 0)") {
        cft_activation_kind kinds[4] = {CFT_ACT_SOFTPLUS, CFT_ACT_SILU, CFT_ACT_SIGMOID,
                                        CFT_ACT_RELU};
        for (int j = 0; j < 4; j++) {
            cft_array *g =
                cft_fn_call1(cft_grad(cft_fn_new(act_cb, &kinds[j], 1, 1), NULL, 0), &x5);
            double want[5];
            for (int i = 0; i < 5; i++) {
                double x = xs5[i], s = 1 / (1 + exp(-x));
                want[i] = j == 0   ? s
                          : j == 1 ? s * (1 + x * (1 - s))
                          : j == 2 ? s * (1 - s)
                                   : (x > 0);
            }
            CHECK_ARRAY_CLOSE(g, vec(want, 5), 1e-14, 1e-16);
        }
    }

    TEST("linear: x @ W^T + b by hand") {
        cft_array *x = f64((double[]){1, 2, 3, 4, 5, 6}, (int64_t[]){2, 3}, 2);
        cft_array *w = f64((double[]){1, 0, -1, 2, 1, 0}, (int64_t[]){2, 3}, 2);
        cft_array *b = vec((double[]){0.5, -1}, 2);
        CHECK_ARRAY_CLOSE(cft_linear(x, w, b),
                          f64((double[]){-1.5, 3, -1.5, 12}, (int64_t[]){2, 2}, 2), 0, 0);
        CHECK_ARRAY_CLOSE(cft_linear(x, w, NULL),
                          f64((double[]){-2, 4, -2, 13}, (int64_t[]){2, 2}, 2), 0, 0);
        CHECK_ARRAY_CLOSE(cft_linear(vec((double[]){1, 2, 3}, 3), w, b),
                          vec((double[]){-1.5, 3}, 2), 0, 0);
        cft_array *e = cft_linear(x, cft_mT(w), b);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_linear") &&
              strstr(cft_error_message(e), "f64[3,2]"));
        CHECK(cft_failed(cft_linear(x, w, vec((double[]){1, 2, 3}, 3))));
    }

    TEST("layer_norm: by hand, with affine, over two dims") {
        cft_array *x = vec((double[]){1, 2, 3, 4}, 4);
        double r = 1 / sqrt(1.25 + 1e-5), want[4], wa[4];
        const double w[4] = {1, 2, 1, 2}, b[4] = {0, 0, 1, 1};
        for (int i = 0; i < 4; i++)
            want[i] = (i + 1 - 2.5) * r, wa[i] = want[i] * w[i] + b[i];
        CHECK_ARRAY_CLOSE(cft_layer_norm(x, 1, NULL, NULL, 1e-5), vec(want, 4), 1e-14, 0);
        CHECK_ARRAY_CLOSE(cft_layer_norm(x, 1, vec(w, 4), vec(b, 4), 1e-5), vec(wa, 4), 1e-14, 0);
        /* rows normalised separately; nnorm 2 normalises the whole matrix */
        cft_array *m = f64((double[]){1, 2, 3, 4, 10, 20, 30, 40}, (int64_t[]){2, 4}, 2);
        cft_array *ln = cft_layer_norm(m, 1, NULL, NULL, 0);
        CHECK_CLOSE(cft_item_at(ln, 4), -1.5 / sqrt(1.25), 1e-14, 0);
        CHECK_CLOSE(cft_item_at(ln, 0), -1.5 / sqrt(1.25), 1e-14, 0);
        cft_array *ln2 = cft_layer_norm(m, 2, NULL, NULL, 0);
        double mean = 13.75, var = 0;
        const double mv[8] = {1, 2, 3, 4, 10, 20, 30, 40};
        for (int i = 0; i < 8; i++)
            var += (mv[i] - mean) * (mv[i] - mean) / 8;
        CHECK_CLOSE(cft_item_at(ln2, 7), (40 - mean) / sqrt(var), 1e-14, 0);
        CHECK(cft_failed(cft_layer_norm(m, 1, vec(w, 3), NULL, 1e-5)));
        CHECK(cft_failed(cft_layer_norm(m, 3, NULL, NULL, 1e-5)));
        fd_env e = {0, cft_random_normal(cft_random_key(1), CFT_F64, (int64_t[]){3, 5}, 2)};
        CHECK_MSG(fd_check(&e, cft_random_normal(cft_random_key(2), CFT_F64, (int64_t[]){3, 5},
                                                 2)) < 1e-8,
                  "layer_norm gradient vs finite differences");
    }

    TEST("batch_norm: train uses batch stats and updates running stats (unbiased var)") {
        /* channel 0: 1 2 3 4 (mean 2.5, var 1.25, unbiased 5/3); channel 1: 2 4 6 8 (5, 5, 20/3) */
        cft_array *x = f64((double[]){1, 2, 2, 4, 3, 6, 4, 8}, (int64_t[]){4, 2}, 2);
        cft_array *rm = vec((double[]){0, 0}, 2), *rv = vec((double[]){1, 1}, 2), *nm, *nv;
        cft_array *w = vec((double[]){2, 1}, 2), *b = vec((double[]){0, 1}, 2);
        cft_array *y = cft_batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5, &nm, &nv);
        double want[8];
        for (int i = 0; i < 4; i++) {
            want[2 * i] = 2 * (i + 1 - 2.5) / sqrt(1.25 + 1e-5);
            want[2 * i + 1] = (2 * (i + 1) - 5) / sqrt(5 + 1e-5) + 1;
        }
        CHECK_ARRAY_CLOSE(y, f64(want, (int64_t[]){4, 2}, 2), 1e-14, 1e-15);
        CHECK_ARRAY_CLOSE(nm, vec((double[]){0.25, 0.5}, 2), 1e-15, 0);
        CHECK_ARRAY_CLOSE(nv, vec((double[]){0.9 + 0.1 * 5 / 3.0, 0.9 + 0.1 * 20 / 3.0}, 2), 1e-15,
                          0);
        /* eval: running stats */
        cft_array *ye = cft_batch_norm(x, nm, nv, NULL, NULL, false, 0.1, 1e-5, &rm, &rv);
        CHECK_CLOSE(cft_item_at(ye, 3), (4 - 0.5) / sqrt(0.9 + 2 / 3.0 + 1e-5), 1e-14, 0);
        CHECK(rm == nm && rv == nv);
        /* [N, C, L]: statistics over N and L */
        cft_array *x3 = f64((double[]){1, 2, 10, 20, 3, 4, 30, 40}, (int64_t[]){2, 2, 2}, 3);
        cft_array *m3, *v3;
        cft_batch_norm(x3, vec((double[]){0, 0}, 2), vec((double[]){0, 0}, 2), NULL, NULL, true,
                       1.0, 0, &m3, &v3);
        CHECK_ARRAY_CLOSE(m3, vec((double[]){2.5, 25}, 2), 1e-15, 0);
        CHECK_ARRAY_CLOSE(v3, vec((double[]){5 / 3.0, 500 / 3.0}, 2), 1e-14, 0);
        cft_array *e = cft_batch_norm(f64((double[]){1, 2}, (int64_t[]){1, 2}, 2), rm, rv, NULL,
                                      NULL, true, 0.1, 1e-5, &nm, &nv);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "more than 1 value") && cft_failed(nm));
        CHECK(cft_failed(cft_batch_norm(x, vec((double[]){0, 0, 0}, 3), rv, NULL, NULL, false, 0.1,
                                        1e-5, NULL, NULL)));
        fd_env fe = {1, cft_random_normal(cft_random_key(3), CFT_F64, (int64_t[]){4, 3}, 2)};
        CHECK_MSG(fd_check(&fe, cft_random_normal(cft_random_key(4), CFT_F64, (int64_t[]){4, 3},
                                                  2)) < 1e-8,
                  "batch_norm (train) gradient vs finite differences");
    }

    TEST("dropout: mask statistics, scaling, keys, eval, vmap over keys") {
        int64_t n = 20000;
        cft_array *x = cft_ones(CFT_F32, &n, 1), *key = cft_random_key(11);
        cft_array *y = cft_dropout(x, 0.25, true, key);
        double kept =
            cft_item(cft_sum(cft_astype(cft_gt(y, cft_zeros_like(y)), CFT_F64), NULL, 0, false));
        CHECK_CLOSE(kept / n, 0.75, 0, 0.02);
        double mx = cft_item(cft_max(y, NULL, 0, false)), mn = cft_item(cft_min(y, NULL, 0, false));
        CHECK_CLOSE(mx, 1 / 0.75, 1e-6, 0);
        CHECK_CLOSE(mn, 0, 0, 0);
        CHECK_ARRAY_CLOSE(cft_dropout(x, 0.25, true, key), y, 0, 0); /* same key, same mask */
        CHECK(cft_max_abs_diff(cft_dropout(x, 0.25, true, cft_random_key(12)), y) > 0);
        CHECK(cft_dropout(x, 0.25, false, NULL) == x);
        CHECK(cft_dropout(x, 0, true, NULL) == x);
        CHECK_ARRAY_CLOSE(cft_dropout(x, 1, true, key), cft_zeros_like(x), 0, 0);
        cft_array *e = cft_dropout(x, 0.5, true, NULL);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "needs a key"));
        CHECK(cft_failed(cft_dropout(x, 1.5, true, key)));
        /* vmap over a batch of keys equals a loop */
        cft_array *keys = cft_random_split(key, 3), *xb = cft_ones(CFT_F32, (int64_t[]){3, 16}, 2);
        cft_array *yb = cft_fn_call1(cft_vmap(cft_fn_new(dropout_cb, NULL, 2, 1), NULL, NULL),
                                     (cft_array *[]){xb, keys});
        for (int i = 0; i < 3; i++)
            CHECK_ARRAY_CLOSE(cft_index(yb, i),
                              cft_dropout(cft_index(xb, i), 0.5, true, cft_index(keys, i)), 0, 0);
        CHECK(cft_max_abs_diff(cft_index(yb, 0), cft_index(yb, 1)) > 0);
    }

    TEST("embedding: rows of the table, gradient counts the ids") {
        cft_array *table = f64((double[]){0, 1, 10, 11, 20, 21, 30, 31}, (int64_t[]){4, 2}, 2);
        int32_t idv[4] = {0, 3, 2, 2};
        cft_array *ids = cft_from_i32(idv, (int64_t[]){2, 2}, 2);
        cft_array *e = cft_embedding(ids, table);
        CHECK_ARRAY_CLOSE(e, f64((double[]){0, 1, 30, 31, 20, 21, 20, 21}, (int64_t[]){2, 2, 2}, 3),
                          0, 0);
        CHECK_ARRAY_CLOSE(cft_embedding(cft_scalar(1, CFT_I32), table), vec((double[]){10, 11}, 2),
                          0, 0);
        cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(emb_cb, NULL, 2, 1), NULL, 0),
                                    (cft_array *[]){table, ids});
        CHECK_ARRAY_CLOSE(g, f64((double[]){1, 1, 0, 0, 2, 2, 1, 1}, (int64_t[]){4, 2}, 2), 0, 0);
        CHECK(cft_failed(cft_embedding(cft_astype(ids, CFT_F32), table)));
        CHECK(cft_failed(cft_embedding(ids, vec((double[]){1, 2}, 2))));
    }

    TEST("modules: PyTorch initialisations and names") {
        cft_module *lin = cft_nn_linear(50, 30, true);
        cft_tree *p = cft_module_init(lin, cft_random_key(5), NULL);
        CHECK_EQ(cft_tree_size(p), 2);
        CHECK(!strcmp(cft_tree_name(p, 0), "weight") && !strcmp(cft_tree_name(p, 1), "bias"));
        cft_array *w = cft_tree_get(p, "weight"), *b = cft_tree_get(p, "bias");
        CHECK_EQ(cft_array_dim(w, 0), 30);
        CHECK_EQ(cft_array_dim(w, 1), 50);
        CHECK_EQ(cft_array_dtype(w), CFT_F32);
        double bound = 1 / sqrt(50.0);
        CHECK(cft_item(cft_max(cft_abs(w), NULL, 0, false)) <= bound);
        CHECK(cft_item(cft_max(cft_abs(w), NULL, 0, false)) > 0.9 * bound);
        CHECK(cft_item(cft_max(cft_abs(b), NULL, 0, false)) <= bound);
        /* U(-a, a) has variance a^2 / 3 */
        CHECK_CLOSE(cft_item(cft_var(w, NULL, 0, 0, false)), bound * bound / 3, 0.1, 0);
        CHECK(!strcmp(cft_module_describe(lin), "Linear(in=50, out=30, bias=true)"));
        CHECK_EQ(
            cft_tree_size(cft_module_init(cft_nn_linear(3, 2, false), cft_random_key(1), NULL)), 1);
        cft_tree *emb = cft_module_init(cft_nn_embedding(100, 50), cft_random_key(6), NULL);
        cft_array *ew = cft_tree_get(emb, "weight");
        CHECK_CLOSE(cft_item(cft_mean(ew, NULL, 0, false)), 0, 0, 0.05);
        CHECK_CLOSE(cft_item(cft_var(ew, NULL, 0, 0, false)), 1, 0.1, 0);
        cft_tree *ln =
            cft_module_init(cft_nn_layer_norm((int64_t[]){4}, 1, 1e-5, true), NULL, NULL);
        CHECK_ARRAY_CLOSE(cft_tree_get(ln, "weight"), cft_ones(CFT_F32, (int64_t[]){4}, 1), 0, 0);
        CHECK_ARRAY_CLOSE(cft_tree_get(ln, "bias"), cft_zeros(CFT_F32, (int64_t[]){4}, 1), 0, 0);
        cft_tree *st;
        cft_tree *bn = cft_module_init(cft_nn_batch_norm(3, 1e-5, 0.1, true), NULL, &st);
        CHECK_EQ(cft_tree_size(bn), 2);
        CHECK_EQ(cft_tree_size(st), 3);
        CHECK(!strcmp(cft_tree_name(st, 2), "num_batches_tracked"));
        CHECK_EQ(cft_array_dtype(cft_tree_get(st, "num_batches_tracked")), CFT_I64);
        CHECK_ARRAY_CLOSE(cft_tree_get(st, "running_var"), cft_ones(CFT_F32, (int64_t[]){3}, 1), 0,
                          0);
        cft_tree *mha = cft_module_init(cft_nn_mha(8, 2, true), cft_random_key(7), NULL);
        const char *mn[4] = {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
        for (int i = 0; i < 4; i++)
            CHECK(!strcmp(cft_tree_name(mha, i), mn[i]));
        CHECK(cft_item(cft_max(cft_abs(cft_tree_get(mha, "in_proj_weight")), NULL, 0, false)) <=
              sqrt(6.0 / 32));
        CHECK_ARRAY_CLOSE(cft_tree_get(mha, "in_proj_bias"), cft_zeros(CFT_F32, (int64_t[]){24}, 1),
                          0, 0);
        cft_tree *e = cft_module_init(lin, NULL, NULL);
        CHECK(cft_tree_failed(e) && strstr(cft_error_message(cft_tree_error(e)), "needs a key"));
    }

    TEST("modules: Sequential / MLP names and apply = composition") {
        cft_module *mlp = cft_nn_mlp((int64_t[]){3, 5, 4, 2}, 4, CFT_ACT_GELU, 0);
        cft_tree *p = cft_tree_astype(cft_module_init(mlp, cft_random_key(8), NULL), CFT_F64);
        const char *names[6] = {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"};
        CHECK_EQ(cft_tree_size(p), 6);
        for (int i = 0; i < 6 && i < cft_tree_size(p); i++)
            CHECK(!strcmp(cft_tree_name(p, i), names[i]));
        cft_array *x = cft_random_normal(cft_random_key(9), CFT_F64, (int64_t[]){7, 3}, 2);
        cft_array *h =
            cft_gelu(cft_linear(x, cft_tree_get(p, "0.weight"), cft_tree_get(p, "0.bias")), false);
        h = cft_gelu(cft_linear(h, cft_tree_get(p, "2.weight"), cft_tree_get(p, "2.bias")), false);
        h = cft_linear(h, cft_tree_get(p, "4.weight"), cft_tree_get(p, "4.bias"));
        CHECK_ARRAY_CLOSE(cft_module_apply(mlp, p, NULL, x, false, NULL, NULL), h, 1e-14, 1e-14);
        /* with dropout: Linear, act, Dropout, Linear -> names 0 and 3 */
        cft_module *md = cft_nn_mlp((int64_t[]){3, 5, 2}, 3, CFT_ACT_RELU, 0.5);
        cft_tree *pd = cft_module_init(md, cft_random_key(1), NULL);
        CHECK(cft_tree_has(pd, "3.weight"));
        cft_array *xf = cft_astype(x, CFT_F32);
        cft_array *e = cft_module_apply(md, pd, NULL, xf, true, NULL, NULL);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "needs a key"));
        cft_array *y1 = cft_module_apply(md, pd, NULL, xf, true, cft_random_key(2), NULL);
        CHECK(!cft_failed(y1));
        CHECK_ARRAY_CLOSE(cft_module_apply(md, pd, NULL, xf, true, cft_random_key(2), NULL), y1, 0,
                          0);
        cft_array *ev = cft_module_apply(md, pd, NULL, xf, false, NULL, NULL);
        CHECK(!cft_failed(ev) && cft_max_abs_diff(ev, y1) > 0);
        cft_array *bad = cft_module_apply(mlp, p, NULL, cft_ones(CFT_F64, (int64_t[]){2, 4}, 2),
                                          false, NULL, NULL);
        CHECK(cft_failed(bad) && strstr(cft_error_message(bad), "cft_linear"));
        cft_array *miss =
            cft_module_apply(mlp, cft_tree_remove(p, "2.bias"), NULL, x, false, NULL, NULL);
        CHECK(cft_failed(miss) && strstr(cft_error_message(miss), "'bias'"));
    }

    TEST("modules: BatchNorm state threads through a Sequential") {
        cft_module *layers[3] = {cft_nn_linear(3, 2, true), cft_nn_batch_norm(2, 1e-5, 0.1, true),
                                 cft_nn_activation(CFT_ACT_RELU)};
        cft_module *seq = cft_nn_sequential(layers, 3);
        cft_tree *st, *ns, *ns2;
        cft_tree *p = cft_module_init(seq, cft_random_key(3), &st);
        CHECK_EQ(cft_tree_size(st), 3);
        CHECK(cft_tree_has(st, "1.running_mean") && cft_tree_has(p, "1.weight") &&
              cft_tree_has(p, "0.bias"));
        cft_array *x = cft_random_normal(cft_random_key(4), CFT_F32, (int64_t[]){6, 3}, 2);
        cft_array *y = cft_module_apply(seq, p, st, x, true, NULL, &ns);
        CHECK(!cft_failed(y));
        cft_array *h = cft_linear(x, cft_tree_get(p, "0.weight"), cft_tree_get(p, "0.bias"));
        cft_array *nm, *nv;
        cft_array *want = cft_relu(cft_batch_norm(
            h, cft_tree_get(st, "1.running_mean"), cft_tree_get(st, "1.running_var"),
            cft_tree_get(p, "1.weight"), cft_tree_get(p, "1.bias"), true, 0.1, 1e-5, &nm, &nv));
        CHECK_ARRAY_CLOSE(y, want, 1e-6, 1e-6);
        CHECK_ARRAY_CLOSE(cft_tree_get(ns, "1.running_mean"), nm, 1e-6, 1e-7);
        CHECK_ARRAY_CLOSE(cft_tree_get(ns, "1.running_var"), nv, 1e-6, 1e-7);
        CHECK_EQ((long long)cft_item(cft_tree_get(ns, "1.num_batches_tracked")), 1);
        cft_module_apply(seq, p, ns, x, true, NULL, &ns2);
        CHECK_EQ((long long)cft_item(cft_tree_get(ns2, "1.num_batches_tracked")), 2);
        CHECK_EQ(cft_array_dtype(cft_tree_get(ns2, "1.num_batches_tracked")), CFT_I64);
        cft_tree *es;
        cft_module_apply(seq, p, ns2, x, false, NULL, &es);
        CHECK(es == ns2);
        cft_array *nostate = cft_module_apply(seq, p, NULL, x, true, NULL, NULL);
        CHECK(cft_failed(nostate) && strstr(cft_error_message(nostate), "running_mean"));
    }

    TEST("modules: bad configurations give errors naming them") {
        cft_module *bad[6] = {cft_nn_linear(0, 3, true),
                              cft_nn_mha(10, 3, true),
                              cft_nn_dropout(2),
                              cft_nn_batch_norm(3, 1e-5, 1.5, true),
                              cft_nn_layer_norm(NULL, 0, 1e-5, true),
                              cft_nn_mlp((int64_t[]){3}, 1, CFT_ACT_RELU, 0)};
        for (int i = 0; i < 6; i++) {
            cft_tree *p = cft_module_init(bad[i], cft_random_key(1), NULL);
            CHECK_MSG(cft_tree_failed(p) &&
                          strstr(cft_error_message(cft_tree_error(p)), "bad configuration"),
                      "module %d: %s", i, cft_module_describe(bad[i]));
            cft_array *y =
                cft_module_apply(bad[i], cft_tree_new(), NULL,
                                 cft_ones(CFT_F32, (int64_t[]){2, 3}, 2), false, NULL, NULL);
            CHECK(cft_failed(y));
        }
        cft_module *seq = cft_nn_sequential((cft_module *[]){cft_nn_linear(3, 3, true), bad[0]}, 2);
        CHECK(cft_tree_failed(cft_module_init(seq, cft_random_key(1), NULL)));
        CHECK(strstr(cft_module_describe(bad[1]), "MultiheadAttention(embed_dim=10, num_heads=3") !=
              NULL);
    }

    TEST("transforms: jacfwd = jacrev through every layer (BatchNorm training, dropout with a "
         "key)") {
        cft_module *layers[5] = {cft_nn_linear(3, 4, true), cft_nn_batch_norm(4, 1e-5, 0.1, true),
                                 cft_nn_activation(CFT_ACT_SILU), cft_nn_dropout(0.3),
                                 cft_nn_linear(4, 2, true)};
        all_env e = {cft_nn_sequential(layers, 5),
                     NULL,
                     NULL,
                     cft_random_key(5),
                     cft_from_i32((int32_t[]){1, 0}, (int64_t[]){2}, 1),
                     NULL};
        e.p = cft_tree_astype(cft_module_init(e.seq, cft_random_key(4), &e.s), CFT_F64);
        e.s = cft_tree_astype(e.s, CFT_F64);
        e.table = cft_random_normal(cft_random_key(6), CFT_F64, (int64_t[]){3, 2}, 2);
        cft_fn *f = cft_fn_new(all_cb, &e, 1, 1);
        cft_array *x = cft_random_normal(cft_random_key(7), CFT_F64, (int64_t[]){4, 3}, 2);
        cft_array *jr = cft_fn_call1(cft_jacrev(f, NULL, 0), &x),
                  *jf = cft_fn_call1(cft_jacfwd(f, NULL, 0), &x);
        CHECK_EQ(cft_array_ndim(jr), 4);
        CHECK_ARRAY_CLOSE(jr, jf, 1e-12, 1e-13);
        CHECK(cft_item(cft_max(cft_abs(jr), NULL, 0, false)) > 0);
    }

    return check_summary();
}
