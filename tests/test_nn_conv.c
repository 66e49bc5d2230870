/* test_nn_conv.c: the nn layer's convolution modules (nn.h): Conv2d
 * (PyTorch's initialisation bound, names and shapes; outputs against
 * hand-computed values and a direct loop over stride / padding / dilation /
 * groups; [C, H, W] inputs), MaxPool2d and AvgPool2d (by hand, padding,
 * count_include_pad), Flatten (cft_flatten), a CNN Sequential's names and
 * its equality with the composition of the ops, bad configurations, and
 * gradients: against central finite differences in f64 (params and input),
 * vmap(grad) against a loop of single-example gradients, and cft_jit
 * against the interpreter. */
#include <math.h>
#include <string.h>

#include "check.h"

static cft_array *f64(const double *v, const int64_t *shape, int nd) {
    return cft_from_f64(v, shape, nd);
}

static bool has(cft_array *e, const char *s) {
    return cft_failed(e) && strstr(cft_error_message(e), s) != NULL;
}

/* A direct conv2d (PyTorch semantics) over doubles: x [N, C, H, W],
 * w [O, C/g, kh, kw], b [O] or NULL -> y [N, O, OH, OW]; returns the array. */
static cft_array *ref_conv2d(cft_array *xa, cft_array *wa, cft_array *ba, const int64_t *st,
                             const int64_t *pd, const int64_t *dl, int64_t g) {
    int64_t N = cft_array_dim(xa, 0), C = cft_array_dim(xa, 1), H = cft_array_dim(xa, 2),
            W = cft_array_dim(xa, 3), O = cft_array_dim(wa, 0), kh = cft_array_dim(wa, 2),
            kw = cft_array_dim(wa, 3), I = C / g;
    int64_t OH = (H + 2 * pd[0] - dl[0] * (kh - 1) - 1) / st[0] + 1,
            OW = (W + 2 * pd[1] - dl[1] * (kw - 1) - 1) / st[1] + 1;
    double *x = malloc(sizeof(double) * (size_t)cft_array_size(xa)),
           *w = malloc(sizeof(double) * (size_t)cft_array_size(wa)),
           *b = malloc(sizeof(double) * (size_t)O),
           *y = malloc(sizeof(double) * (size_t)(N * O * OH * OW));
    cft_copy_to(xa, CFT_F64, x);
    cft_copy_to(wa, CFT_F64, w);
    for (int64_t o = 0; o < O; o++)
        b[o] = 0;
    if (ba)
        cft_copy_to(ba, CFT_F64, b);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double s = b[o];
                    int64_t grp = o / (O / g);
                    for (int64_t c = 0; c < I; c++)
                        for (int64_t p = 0; p < kh; p++)
                            for (int64_t q = 0; q < kw; q++) {
                                int64_t r = i * st[0] - pd[0] + p * dl[0],
                                        t = j * st[1] - pd[1] + q * dl[1];
                                if (r < 0 || r >= H || t < 0 || t >= W)
                                    continue;
                                s += x[((n * C + grp * I + c) * H + r) * W + t] *
                                     w[((o * I + c) * kh + p) * kw + q];
                            }
                    y[((n * O + o) * OH + i) * OW + j] = s;
                }
    cft_array *ya = f64(y, (int64_t[]){N, O, OH, OW}, 4);
    free(x), free(w), free(b), free(y);
    return ya;
}

/* sum(c * model(x)) over (params..., x, c) */
typedef struct {
    cft_module *m;
} model_env;
static cft_status sum_cb(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                         cft_array **out) {
    (void)nin, (void)nout;
    model_env *e = env;
    cft_array *y = cft_module_apply(e->m, p, NULL, in[0], false, NULL, NULL);
    out[0] = cft_sum(cft_mul(y, in[1]), NULL, 0, false);
    return CFT_OK;
}

/* cross-entropy of one example x [1, 8, 8] (as [1, 1, 8, 8]) with label y [] */
static cft_status ce_cb(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                        cft_array **out) {
    (void)nin, (void)nout;
    model_env *e = env;
    cft_array *x = cft_expand_dims(in[0], 0);
    cft_array *logits = cft_module_apply(e->m, p, NULL, x, false, NULL, NULL);
    out[0] = cft_loss_cross_entropy(logits, cft_expand_dims(in[1], 0), 0, CFT_REDUCE_MEAN);
    return CFT_OK;
}

/* the largest |finite difference - gradient| over every leaf of p and x */
static double fd_worst(cft_fn *f, const cft_tree *p, cft_array *x, cft_array *c) {
    int np = cft_tree_size(p), nin = np + 2;
    cft_array **in = malloc(sizeof(cft_array *) * (size_t)nin),
              **g = malloc(sizeof(cft_array *) * (size_t)(np + 1));
    cft_tree_flatten(p, in);
    in[np] = x, in[np + 1] = c;
    int argnums[64];
    for (int i = 0; i <= np; i++)
        argnums[i] = i;
    if (cft_fn_call(cft_grad(f, argnums, np + 1), in, g) != CFT_OK)
        return INFINITY;
    double worst = 0, h = 1e-6;
    for (int k = 0; k <= np; k++) {
        cft_array *leaf = in[k];
        int64_t n = cft_array_size(leaf);
        double *v = malloc(sizeof(double) * (size_t)n);
        cft_copy_to(leaf, CFT_F64, v);
        for (int64_t i = 0; i < n; i++) {
            double keep = v[i], fv[2];
            for (int s = 0; s < 2; s++) {
                v[i] = keep + (s ? -h : h);
                in[k] = f64(v, cft_array_shape(leaf), cft_array_ndim(leaf));
                fv[s] = cft_item(cft_fn_call1(f, in));
            }
            v[i] = keep;
            in[k] = leaf;
            double d = fabs((fv[0] - fv[1]) / (2 * h) - cft_item_at(g[k], i));
            if (!(d <= worst))
                worst = d;
        }
        free(v);
    }
    free(in), free(g);
    return worst;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    const int64_t k2[2] = {2, 2}, k3[2] = {3, 3};

    TEST("Conv2d: PyTorch's initialisation, names, shapes, description") {
        cft_module *c = cft_nn_conv2d(16, 32, k3, NULL, NULL, NULL, 1, true);
        cft_tree *p = cft_module_init(c, cft_random_key(1), NULL);
        CHECK_EQ(cft_tree_size(p), 2);
        CHECK(!strcmp(cft_tree_name(p, 0), "weight") && !strcmp(cft_tree_name(p, 1), "bias"));
        cft_array *w = cft_tree_get(p, "weight"), *b = cft_tree_get(p, "bias");
        CHECK_EQ(cft_array_ndim(w), 4);
        const int64_t ws[4] = {32, 16, 3, 3};
        for (int i = 0; i < 4; i++)
            CHECK_EQ(cft_array_dim(w, i), ws[i]);
        CHECK_EQ(cft_array_dtype(w), CFT_F32);
        CHECK_EQ(cft_array_ndim(b), 1);
        CHECK_EQ(cft_array_dim(b, 0), 32);
        double bound = 1 / sqrt(16 * 9.0); /* fan_in = in/groups * kh * kw */
        double wmax = cft_item(cft_max(cft_abs(w), NULL, 0, false));
        CHECK(wmax <= bound && wmax > 0.95 * bound);
        CHECK(cft_item(cft_max(cft_abs(b), NULL, 0, false)) <= bound);
        CHECK(cft_item(cft_max(cft_abs(b), NULL, 0, false)) > 0.5 * bound);
        CHECK_CLOSE(cft_item(cft_var(w, NULL, 0, 0, false)), bound * bound / 3, 0.1, 0);
        CHECK_CLOSE(cft_item(cft_mean(w, NULL, 0, false)), 0, 0, 0.05 * bound);
        CHECK(!strcmp(cft_module_describe(c),
                      "Conv2d(in=16, out=32, kernel=[3,3], stride=[1,1], padding=[0,0], "
                      "dilation=[1,1], groups=1, bias=true)"));
        /* groups: weight [out, in/groups, kh, kw], fan_in = 2 * 3 * 2 = 12 */
        cft_module *cg = cft_nn_conv2d(4, 6, (int64_t[]){3, 2}, (int64_t[]){2, 1},
                                       (int64_t[]){1, 0}, NULL, 2, false);
        cft_tree *pg = cft_module_init(cg, cft_random_key(2), NULL);
        CHECK_EQ(cft_tree_size(pg), 1);
        cft_array *wg = cft_tree_get(pg, "weight");
        const int64_t wgs[4] = {6, 2, 3, 2};
        for (int i = 0; i < 4; i++)
            CHECK_EQ(cft_array_dim(wg, i), wgs[i]);
        CHECK(cft_item(cft_max(cft_abs(wg), NULL, 0, false)) <= 1 / sqrt(12.0));
        CHECK(cft_item(cft_max(cft_abs(wg), NULL, 0, false)) > 0.7 / sqrt(12.0));
        /* different keys, different weights; same key, same weights */
        cft_tree *p2 = cft_module_init(c, cft_random_key(1), NULL);
        CHECK_ARRAY_CLOSE(cft_tree_get(p2, "weight"), w, 0, 0);
        CHECK(cft_max_abs_diff(cft_tree_get(cft_module_init(c, cft_random_key(3), NULL), "weight"),
                               w) > 0);
        cft_tree *e = cft_module_init(c, NULL, NULL);
        CHECK(cft_tree_failed(e) && strstr(cft_error_message(cft_tree_error(e)), "needs a key"));
        /* pooling and Flatten have no params and need no key */
        cft_module *nop[3] = {cft_nn_max_pool2d(k2, NULL, NULL, NULL),
                              cft_nn_avg_pool2d(k2, NULL, NULL, true), cft_nn_flatten(1, -1)};
        for (int i = 0; i < 3; i++) {
            cft_tree *st;
            cft_tree *pp = cft_module_init(nop[i], NULL, &st);
            CHECK(!cft_tree_failed(pp) && cft_tree_size(pp) == 0 && cft_tree_size(st) == 0);
        }
        CHECK(!strcmp(cft_module_describe(nop[0]),
                      "MaxPool2d(kernel=[2,2], stride=[2,2], padding=[0,0], dilation=[1,1])"));
        CHECK(!strcmp(cft_module_describe(nop[1]),
                      "AvgPool2d(kernel=[2,2], stride=[2,2], padding=[0,0], "
                      "count_include_pad=true)"));
        CHECK(!strcmp(cft_module_describe(nop[2]), "Flatten(start_dim=1, end_dim=-1)"));
    }

    TEST("Conv2d: outputs by hand (bias, padding, stride, [C, H, W] input)") {
        /* x = 1..9 as 3x3, w = [[1, 2], [3, 4]], bias 0.5:
         * y[i][j] = x[i][j] + 2 x[i][j+1] + 3 x[i+1][j] + 4 x[i+1][j+1] + 0.5 */
        cft_array *x = f64((double[]){1, 2, 3, 4, 5, 6, 7, 8, 9}, (int64_t[]){1, 1, 3, 3}, 4);
        cft_tree *p =
            cft_tree_from((const char *[]){"weight", "bias"},
                          (cft_array *[]){f64((double[]){1, 2, 3, 4}, (int64_t[]){1, 1, 2, 2}, 4),
                                          f64((double[]){0.5}, (int64_t[]){1}, 1)},
                          2);
        cft_module *c = cft_nn_conv2d(1, 1, k2, NULL, NULL, NULL, 1, true);
        cft_array *y = cft_module_apply(c, p, NULL, x, false, NULL, NULL);
        CHECK_ARRAY_CLOSE(y, f64((double[]){37.5, 47.5, 67.5, 77.5}, (int64_t[]){1, 1, 2, 2}, 4), 0,
                          0);
        /* [C, H, W] input gives [O, H', W'] */
        cft_array *y3 = cft_module_apply(c, p, NULL, cft_reshape(x, (int64_t[]){1, 3, 3}, 3), false,
                                         NULL, NULL);
        CHECK_ARRAY_CLOSE(y3, f64((double[]){37.5, 47.5, 67.5, 77.5}, (int64_t[]){1, 2, 2}, 3), 0,
                          0);
        /* padding 1, stride 2: taps at rows/cols -1, 1 (and 1, 3 out of range):
         * y[0][0] = 4 * x[0][0] = 4; y[0][1] = 3 x[0][1] + 4 x[0][2] = 6 + 12 = 18;
         * y[1][0] = 2 x[1][0] + 4 x[2][0] = 8 + 28 = 36; y[1][1] = x11 + 2 x12 + 3 x21 + 4 x22
         * = 5 + 12 + 24 + 36 = 77 (each + 0.5) */
        cft_module *cs =
            cft_nn_conv2d(1, 1, k2, (int64_t[]){2, 2}, (int64_t[]){1, 1}, NULL, 1, true);
        CHECK_ARRAY_CLOSE(cft_module_apply(cs, p, NULL, x, false, NULL, NULL),
                          f64((double[]){4.5, 18.5, 36.5, 77.5}, (int64_t[]){1, 1, 2, 2}, 4), 0, 0);
        /* no bias: the module ignores a "bias" entry it does not declare */
        cft_module *cn = cft_nn_conv2d(1, 1, k2, NULL, NULL, NULL, 1, false);
        CHECK_ARRAY_CLOSE(cft_module_apply(cn, p, NULL, x, false, NULL, NULL),
                          f64((double[]){37, 47, 67, 77}, (int64_t[]){1, 1, 2, 2}, 4), 0, 0);
    }

    TEST("Conv2d: stride, padding, dilation and groups against a direct loop") {
        struct {
            int64_t in, out, kh, kw, s[2], p[2], d[2], g, H, W;
        } cases[5] = {
            {3, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 6, 5},
            {4, 6, 3, 2, {2, 1}, {1, 0}, {1, 1}, 2, 7, 6},
            {2, 2, 2, 3, {1, 2}, {0, 2}, {2, 1}, 1, 6, 7},
            {4, 4, 3, 3, {1, 1}, {2, 2}, {2, 2}, 4, 5, 5}, /* depthwise */
            {6, 3, 1, 1, {3, 3}, {0, 0}, {1, 1}, 3, 7, 8},
        };
        for (int t = 0; t < 5; t++) {
            cft_module *c =
                cft_nn_conv2d(cases[t].in, cases[t].out, (int64_t[]){cases[t].kh, cases[t].kw},
                              cases[t].s, cases[t].p, cases[t].d, cases[t].g, true);
            cft_tree *p =
                cft_tree_astype(cft_module_init(c, cft_random_key(10 + t), NULL), CFT_F64);
            cft_array *x =
                cft_random_normal(cft_random_key(20 + t), CFT_F64,
                                  (int64_t[]){2, cases[t].in, cases[t].H, cases[t].W}, 4);
            cft_array *y = cft_module_apply(c, p, NULL, x, false, NULL, NULL);
            cft_array *want = ref_conv2d(x, cft_tree_get(p, "weight"), cft_tree_get(p, "bias"),
                                         cases[t].s, cases[t].p, cases[t].d, cases[t].g);
            CHECK_MSG(!cft_failed(y), "case %d: %s", t, cft_failed(y) ? cft_error_message(y) : "");
            CHECK_ARRAY_CLOSE(y, want, 1e-12, 1e-12);
            /* f32 params and input: same values to f32 rounding */
            cft_array *yf = cft_module_apply(c, cft_tree_astype(p, CFT_F32), NULL,
                                             cft_astype(x, CFT_F32), false, NULL, NULL);
            CHECK_EQ(cft_array_dtype(yf), CFT_F32);
            CHECK_ARRAY_CLOSE(yf, want, 1e-4, 1e-5);
        }
    }

    TEST("MaxPool2d and AvgPool2d: by hand") {
        /* x = 0..15 as 4x4 */
        cft_array *x = cft_reshape(cft_arange(0, 16, 1, CFT_F64), (int64_t[]){1, 1, 4, 4}, 4);
        cft_tree *none = cft_tree_new();
        cft_module *mp = cft_nn_max_pool2d(k2, NULL, NULL, NULL);
        CHECK_ARRAY_CLOSE(cft_module_apply(mp, none, NULL, x, false, NULL, NULL),
                          f64((double[]){5, 7, 13, 15}, (int64_t[]){1, 1, 2, 2}, 4), 0, 0);
        cft_module *ap = cft_nn_avg_pool2d(k2, NULL, NULL, true);
        CHECK_ARRAY_CLOSE(cft_module_apply(ap, none, NULL, x, false, NULL, NULL),
                          f64((double[]){2.5, 4.5, 10.5, 12.5}, (int64_t[]){1, 1, 2, 2}, 4), 0, 0);
        /* kernel 3, stride 2, padding 1: windows rows/cols {-1,0,1}, {1,2,3} */
        cft_module *mp3 = cft_nn_max_pool2d(k3, k2, (int64_t[]){1, 1}, NULL);
        CHECK_ARRAY_CLOSE(cft_module_apply(mp3, none, NULL, x, false, NULL, NULL),
                          f64((double[]){5, 7, 13, 15}, (int64_t[]){1, 1, 2, 2}, 4), 0, 0);
        /* negative values: padding never wins the max */
        cft_array *neg = cft_neg(cft_add_s(x, 1));
        CHECK_ARRAY_CLOSE(cft_module_apply(mp3, none, NULL, neg, false, NULL, NULL),
                          f64((double[]){-1, -2, -5, -6}, (int64_t[]){1, 1, 2, 2}, 4), 0, 0);
        /* avg, padding 1: top-left window holds 0, 1, 4, 5 (sum 10) of 9 cells */
        cft_module *api = cft_nn_avg_pool2d(k3, k2, (int64_t[]){1, 1}, true);
        cft_module *ape = cft_nn_avg_pool2d(k3, k2, (int64_t[]){1, 1}, false);
        /* window sums: (0,0): 0+1+4+5 = 10 (4 cells); (0,1): 1+2+3+5+6+7 = 24 (6);
         * (1,0): 4+5+8+9+12+13 = 51 (6); (1,1): 5+6+7+9+10+11+13+14+15 = 90 (9) */
        CHECK_ARRAY_CLOSE(
            cft_module_apply(api, none, NULL, x, false, NULL, NULL),
            f64((double[]){10 / 9.0, 24 / 9.0, 51 / 9.0, 10}, (int64_t[]){1, 1, 2, 2}, 4), 1e-15,
            0);
        CHECK_ARRAY_CLOSE(cft_module_apply(ape, none, NULL, x, false, NULL, NULL),
                          f64((double[]){2.5, 4, 8.5, 10}, (int64_t[]){1, 1, 2, 2}, 4), 1e-15, 0);
        /* dilation 2, kernel 2, stride 1: taps (i, j), (i, j+2), (i+2, j), (i+2, j+2) */
        cft_module *mpd = cft_nn_max_pool2d(k2, (int64_t[]){1, 1}, NULL, (int64_t[]){2, 2});
        CHECK_ARRAY_CLOSE(cft_module_apply(mpd, none, NULL, x, false, NULL, NULL),
                          f64((double[]){10, 11, 14, 15}, (int64_t[]){1, 1, 2, 2}, 4), 0, 0);
        /* [C, H, W] and several channels pool separately */
        cft_array *x2 = cft_concatenate((cft_array *[]){x, cft_neg(x)}, 2, 1);
        cft_array *y2 =
            cft_module_apply(mp, none, NULL, cft_squeeze(x2, (int[]){0}, 1), false, NULL, NULL);
        CHECK_ARRAY_CLOSE(
            y2, f64((double[]){5, 7, 13, 15, 0, -2, -8, -10}, (int64_t[]){2, 2, 2}, 3), 0, 0);
        /* errors name the op and the input */
        cft_array *e = cft_module_apply(mp, none, NULL, cft_ones(CFT_F32, (int64_t[]){4, 4}, 2),
                                        false, NULL, NULL);
        CHECK(has(e, "cft_max_pool2d") && has(e, "f32[4,4]"));
    }

    TEST("Flatten: cft_flatten and the module") {
        cft_array *x = cft_reshape(cft_arange(0, 120, 1, CFT_F32), (int64_t[]){2, 3, 4, 5}, 4);
        cft_array *y =
            cft_module_apply(cft_nn_flatten(1, -1), cft_tree_new(), NULL, x, false, NULL, NULL);
        CHECK_EQ(cft_array_ndim(y), 2);
        CHECK_EQ(cft_array_dim(y, 0), 2);
        CHECK_EQ(cft_array_dim(y, 1), 60);
        CHECK_ARRAY_CLOSE(y, cft_reshape(x, (int64_t[]){2, 60}, 2), 0, 0);
        cft_array *a = cft_flatten(x, 0, -1);
        CHECK(cft_array_ndim(a) == 1 && cft_array_dim(a, 0) == 120);
        cft_array *b = cft_flatten(x, 1, 2);
        CHECK(cft_array_ndim(b) == 3 && cft_array_dim(b, 1) == 12 && cft_array_dim(b, 2) == 5);
        cft_array *c = cft_flatten(x, -2, -1);
        CHECK(cft_array_ndim(c) == 3 && cft_array_dim(c, 2) == 20);
        CHECK(cft_flatten(x, 2, 2) != NULL && cft_array_ndim(cft_flatten(x, 2, 2)) == 4);
        cft_array *s = cft_flatten(cft_scalar(3, CFT_F32), 0, -1);
        CHECK(cft_array_ndim(s) == 1 && cft_item(s) == 3);
        cft_array *e = cft_flatten(x, 1, 4);
        CHECK(has(e, "cft_flatten") && has(e, "f32[2,3,4,5]"));
        CHECK(has(cft_flatten(x, 3, 1), "cft_flatten"));
        CHECK(has(cft_module_apply(cft_nn_flatten(2, 3), cft_tree_new(), NULL,
                                   cft_ones(CFT_F32, (int64_t[]){2, 3}, 2), false, NULL, NULL),
                  "out of range"));
    }

    TEST("CNN Sequential: PyTorch names, apply = composition of the ops") {
        cft_module *layers[5] = {cft_nn_conv2d(1, 8, k3, NULL, (int64_t[]){1, 1}, NULL, 1, true),
                                 cft_nn_activation(CFT_ACT_RELU),
                                 cft_nn_max_pool2d(k2, NULL, NULL, NULL), cft_nn_flatten(1, -1),
                                 cft_nn_linear(8 * 4 * 4, 10, true)};
        cft_module *cnn = cft_nn_sequential(layers, 5);
        cft_tree *p = cft_module_init(cnn, cft_random_key(4), NULL);
        const char *names[4] = {"0.weight", "0.bias", "4.weight", "4.bias"};
        CHECK_EQ(cft_tree_size(p), 4);
        for (int i = 0; i < 4 && i < cft_tree_size(p); i++)
            CHECK(!strcmp(cft_tree_name(p, i), names[i]));
        cft_array *x =
            cft_random_uniform(cft_random_key(5), CFT_F32, (int64_t[]){5, 1, 8, 8}, 4, 0, 1);
        cft_array *y = cft_module_apply(cnn, p, NULL, x, false, NULL, NULL);
        cft_array *h = cft_conv2d(x, cft_tree_get(p, "0.weight"), NULL, (int64_t[]){1, 1}, NULL, 1);
        h = cft_add(h, cft_reshape(cft_tree_get(p, "0.bias"), (int64_t[]){8, 1, 1}, 3));
        h = cft_max_pool2d(cft_relu(h), k2, NULL, NULL, NULL);
        h = cft_reshape(h, (int64_t[]){5, 128}, 2);
        h = cft_linear(h, cft_tree_get(p, "4.weight"), cft_tree_get(p, "4.bias"));
        CHECK(cft_array_ndim(y) == 2 && cft_array_dim(y, 0) == 5 && cft_array_dim(y, 1) == 10);
        CHECK_ARRAY_CLOSE(y, h, 0, 0);
        /* the wrong channel count is an error naming the module and the input */
        cft_array *e = cft_module_apply(cnn, p, NULL, cft_ones(CFT_F32, (int64_t[]){2, 3, 8, 8}, 4),
                                        false, NULL, NULL);
        CHECK(has(e, "Conv2d(in=1") && has(e, "f32[2,3,8,8]"));
        /* a missing or misshapen bias */
        CHECK(has(cft_module_apply(cnn, cft_tree_remove(p, "0.bias"), NULL, x, false, NULL, NULL),
                  "'bias'"));
        cft_tree *pb = cft_tree_set(p, "0.bias", cft_zeros(CFT_F32, (int64_t[]){3}, 1));
        CHECK(has(cft_module_apply(cnn, pb, NULL, x, false, NULL, NULL), "bias is f32[3]"));
        /* a misshapen weight: cft_conv2d's error */
        cft_tree *pw = cft_tree_set(p, "0.weight", cft_zeros(CFT_F32, (int64_t[]){8, 2, 3, 3}, 4));
        CHECK(has(cft_module_apply(cnn, pw, NULL, x, false, NULL, NULL), "f32[8,2,3,3]"));
    }

    TEST("bad configurations give errors naming them") {
        cft_module *bad[9] = {
            cft_nn_conv2d(3, 4, k3, NULL, NULL, NULL, 2, true),   /* in % groups */
            cft_nn_conv2d(4, 3, k3, NULL, NULL, NULL, 2, true),   /* out % groups */
            cft_nn_conv2d(1, 4, NULL, NULL, NULL, NULL, 1, true), /* no kernel */
            cft_nn_conv2d(1, 4, k3, NULL, (int64_t[]){-1, 0}, NULL, 1, true),
            cft_nn_conv2d(1, 4, k3, (int64_t[]){0, 1}, NULL, NULL, 1, true),
            cft_nn_max_pool2d(k2, NULL, (int64_t[]){2, 0}, NULL), /* padding > kernel/2 */
            cft_nn_max_pool2d(NULL, NULL, NULL, NULL),
            cft_nn_avg_pool2d((int64_t[]){0, 2}, NULL, NULL, true),
            cft_nn_flatten(3, 1),
        };
        for (int i = 0; i < 9; i++) {
            cft_tree *p = cft_module_init(bad[i], cft_random_key(1), NULL);
            CHECK_MSG(cft_tree_failed(p) &&
                          strstr(cft_error_message(cft_tree_error(p)), "bad configuration"),
                      "module %d: %s", i, cft_module_describe(bad[i]));
            cft_array *y =
                cft_module_apply(bad[i], cft_tree_new(), NULL,
                                 cft_ones(CFT_F32, (int64_t[]){1, 4, 6, 6}, 4), false, NULL, NULL);
            CHECK(cft_failed(y));
        }
        CHECK(has(cft_tree_error(cft_module_init(bad[0], cft_random_key(1), NULL)),
                  "cft_nn_conv2d: bad configuration Conv2d(in=3, out=4"));
        CHECK(has(cft_tree_error(cft_module_init(bad[5], NULL, NULL)), "cft_nn_max_pool2d"));
        CHECK(has(cft_tree_error(cft_module_init(bad[8], NULL, NULL)), "Flatten(start_dim=3"));
        cft_module *seq = cft_nn_sequential((cft_module *[]){cft_nn_flatten(1, -1), bad[2]}, 2);
        CHECK(cft_tree_failed(cft_module_init(seq, cft_random_key(1), NULL)));
    }

    TEST("gradients through Conv2d, pooling and Flatten vs finite differences (f64)") {
        /* grouped padded conv -> tanh -> max pool -> dilated strided conv -> avg pool (padded,
         * count_include_pad false) -> flatten -> linear */
        cft_module *layers[7] = {cft_nn_conv2d(2, 4, k3, NULL, (int64_t[]){1, 1}, NULL, 2, true),
                                 cft_nn_activation(CFT_ACT_TANH),
                                 cft_nn_max_pool2d(k2, (int64_t[]){1, 1}, NULL, NULL),
                                 cft_nn_conv2d(4, 3, k2, (int64_t[]){1, 2}, (int64_t[]){1, 1},
                                               (int64_t[]){2, 1}, 1, true),
                                 cft_nn_avg_pool2d(k2, (int64_t[]){1, 1}, (int64_t[]){1, 1}, false),
                                 cft_nn_flatten(1, -1),
                                 cft_nn_linear(3 * 6 * 4, 2, true)};
        model_env e = {cft_nn_sequential(layers, 7)};
        cft_tree *p = cft_tree_astype(cft_module_init(e.m, cft_random_key(7), NULL), CFT_F64);
        cft_array *x = cft_random_normal(cft_random_key(8), CFT_F64, (int64_t[]){2, 2, 6, 5}, 4);
        cft_array *c = cft_random_normal(cft_random_key(9), CFT_F64, (int64_t[]){2, 2}, 2);
        cft_fn *f = cft_tree_fn_new(sum_cb, &e, p, 2, 1);
        cft_array *y = cft_fn_call1(f, (cft_array *[]){cft_tree_at(p, 0), cft_tree_at(p, 1),
                                                       cft_tree_at(p, 2), cft_tree_at(p, 3),
                                                       cft_tree_at(p, 4), cft_tree_at(p, 5), x, c});
        CHECK_MSG(!cft_failed(y), "%s", cft_failed(y) ? cft_error_message(y) : "");
        double worst = fd_worst(f, p, x, c);
        CHECK_MSG(worst < 1e-7, "worst |fd - grad| = %.3g", worst);
    }

    TEST("per-sample gradients: vmap(grad) = loop of grad, and cft_jit = interpreter") {
        cft_module *layers[5] = {cft_nn_conv2d(1, 8, k3, NULL, (int64_t[]){1, 1}, NULL, 1, true),
                                 cft_nn_activation(CFT_ACT_RELU),
                                 cft_nn_max_pool2d(k2, NULL, NULL, NULL), cft_nn_flatten(1, -1),
                                 cft_nn_linear(8 * 4 * 4, 10, true)};
        model_env e = {cft_nn_sequential(layers, 5)};
        cft_tree *p = cft_tree_astype(cft_module_init(e.m, cft_random_key(11), NULL), CFT_F64);
        int np = cft_tree_size(p);
        cft_fn *loss = cft_tree_fn_new(ce_cb, &e, p, 2, 1);
        cft_fn *g = cft_grad(loss, (int[]){0, 1, 2, 3}, np);
        int axes[6] = {CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0};
        cft_fn *psg = cft_vmap(g, axes, NULL);
        const int B = 6;
        cft_array *x =
            cft_random_uniform(cft_random_key(12), CFT_F64, (int64_t[]){B, 1, 8, 8}, 4, 0, 1);
        cft_array *y = cft_from_i32((int32_t[]){3, 1, 4, 1, 5, 9}, (int64_t[]){B}, 1);
        cft_array *in[6], *gs[4], *gj[4], *gi[4];
        cft_tree_flatten(p, in);
        in[4] = x, in[5] = y;
        CHECK(cft_fn_call(psg, in, gs) == CFT_OK);
        CHECK(cft_fn_call(cft_jit(psg), in, gj) == CFT_OK);
        for (int l = 0; l < np; l++) {
            CHECK_EQ(cft_array_dim(gs[l], 0), B);
            CHECK_ARRAY_CLOSE(gj[l], gs[l], 1e-12, 1e-14);
        }
        double worst = 0;
        for (int i = 0; i < B; i++) {
            in[4] = cft_index(x, i), in[5] = cft_index(y, i);
            CHECK(cft_fn_call(g, in, gi) == CFT_OK);
            for (int l = 0; l < np; l++)
                worst = fmax(worst, cft_max_abs_diff(cft_index(gs[l], i), gi[l]));
        }
        CHECK_MSG(worst < 1e-13, "vmap(grad) vs loop: %.3g", worst);
        /* the gradients are not all zero */
        CHECK(cft_item(cft_max(cft_abs(gs[0]), NULL, 0, false)) > 1e-3);
    }

    TEST("Conv1d, Conv3d, ConvTranspose1d/2d/3d modules: params, init, apply, errors") {
        cft_module *ms[5] = {
            cft_nn_conv1d(4, 6, (int64_t[]){3}, (int64_t[]){2}, (int64_t[]){1}, NULL, 2, true),
            cft_nn_conv3d(2, 3, (int64_t[]){2, 2, 2}, NULL, NULL, NULL, 1, true),
            cft_nn_conv_transpose1d(4, 6, (int64_t[]){3}, (int64_t[]){2}, (int64_t[]){1},
                                    (int64_t[]){1}, NULL, 2, true),
            cft_nn_conv_transpose2d(3, 5, (int64_t[]){3, 2}, (int64_t[]){2, 1}, NULL, NULL, NULL, 1,
                                    true),
            cft_nn_conv_transpose3d(2, 2, (int64_t[]){2, 2, 2}, (int64_t[]){2, 2, 2}, NULL, NULL,
                                    NULL, 1, false)};
        const int64_t wshape[5][5] = {
            {6, 2, 3}, {3, 2, 2, 2, 2}, {4, 3, 3}, {3, 5, 3, 2}, {2, 2, 2, 2, 2}};
        const int64_t xshape[5][5] = {
            {2, 4, 9}, {1, 2, 4, 4, 4}, {2, 4, 5}, {1, 3, 4, 4}, {1, 2, 3, 3, 3}};
        const int nsp[5] = {1, 3, 1, 2, 3};
        const char *desc[5] = {"Conv1d(in=4, out=6, kernel=[3], stride=[2]", "Conv3d(in=2",
                               "ConvTranspose1d(in=4, out=6, kernel=[3], stride=[2], "
                               "padding=[1], output_padding=[1]",
                               "ConvTranspose2d(in=3, out=5", "ConvTranspose3d(in=2"};
        for (int k = 0; k < 5; k++) {
            CHECK_MSG(strstr(cft_module_describe(ms[k]), desc[k]), "%s",
                      cft_module_describe(ms[k]));
            cft_tree *p = cft_module_init(ms[k], cft_random_key(100 + (uint64_t)k), NULL);
            cft_array *w = cft_tree_get(p, "weight");
            CHECK_EQ(cft_array_ndim(w), nsp[k] + 2);
            for (int d = 0; d < nsp[k] + 2; d++)
                CHECK_EQ(cft_array_dim(w, d), wshape[k][d]);
            /* PyTorch's bound 1/sqrt(fan_in), fan_in = dim 1 * kernel */
            int64_t fan = wshape[k][1];
            for (int d = 2; d < nsp[k] + 2; d++)
                fan *= wshape[k][d];
            CHECK(cft_item(cft_max(cft_abs(w), NULL, 0, false)) <= 1 / sqrt((double)fan));
            cft_array *x = cft_random_normal(cft_random_key(200 + (uint64_t)k), CFT_F32, xshape[k],
                                             nsp[k] + 2);
            cft_array *y = cft_module_apply(ms[k], p, NULL, x, false, NULL, NULL);
            CHECK_MSG(!cft_failed(y), "%s", cft_error_message(y));
            /* the op with the module's settings, plus the bias per channel */
            cft_array *want =
                k == 0   ? cft_conv1d(x, w, (int64_t[]){2}, (int64_t[]){1}, NULL, 2)
                : k == 1 ? cft_conv3d(x, w, NULL, NULL, NULL, 1)
                : k == 2 ? cft_conv_transpose1d(x, w, (int64_t[]){2}, (int64_t[]){1},
                                                (int64_t[]){1}, NULL, 2)
                : k == 3 ? cft_conv_transpose2d(x, w, (int64_t[]){2, 1}, NULL, NULL, NULL, 1)
                         : cft_conv_transpose3d(x, w, (int64_t[]){2, 2, 2}, NULL, NULL, NULL, 1);
            cft_array *b = k < 4 ? cft_tree_get(p, "bias") : NULL; /* the last has none */
            if (b) {
                int64_t bs[4] = {cft_array_dim(b, 0), 1, 1, 1};
                want = cft_add(want, cft_reshape(b, bs, nsp[k] + 1));
            }
            CHECK_ARRAY_CLOSE(y, want, 0, 0);
            /* unbatched input */
            cft_array *y1 = cft_module_apply(ms[k], p, NULL, cft_index(x, 0), false, NULL, NULL);
            CHECK_ARRAY_CLOSE(y1, cft_index(y, 0), 0, 0);
        }
        /* ConvTranspose1d: output 2 * (5 - 1) - 2 + 2 + 1 + 1 = 10 */
        CHECK_EQ(cft_array_dim(cft_module_apply(
                                   ms[2], cft_module_init(ms[2], cft_random_key(1), NULL), NULL,
                                   cft_zeros(CFT_F32, (int64_t[]){1, 4, 5}, 3), false, NULL, NULL),
                               2),
                 10);
        cft_module *bad = cft_nn_conv_transpose2d(3, 5, (int64_t[]){3, 3}, (int64_t[]){2, 2}, NULL,
                                                  (int64_t[]){2, 0}, NULL, 1, true);
        cft_tree *bp = cft_module_init(bad, cft_random_key(1), NULL);
        CHECK(cft_tree_failed(bp) &&
              strstr(cft_error_message(cft_tree_error(bp)), "cft_nn_conv_transpose2d"));
        cft_tree *p1 = cft_module_init(ms[0], cft_random_key(1), NULL);
        cft_array *e = cft_module_apply(
            ms[0], p1, NULL, cft_zeros(CFT_F32, (int64_t[]){2, 3, 9}, 3), false, NULL, NULL);
        CHECK(cft_failed(e) && has(e, "Conv1d(in=4") && has(e, "[N, 4, L]"));
    }
    return check_summary();
}
