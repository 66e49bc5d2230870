/* test_nn_attention.c: scaled dot-product attention against a plain C
 * reference (bool masks, additive masks, causal, broadcasting batch dims),
 * a hand-computed two-key example, fully masked rows (zeros, finite
 * gradients); multi-head attention against a per-head composition and, with
 * identity projections, against plain attention; and vmap(grad) through a
 * Linear + LayerNorm + MHA model against a loop of single-example gradients
 * and against central finite differences (all f64). */
#include <math.h>
#include <string.h>

#include "check.h"

static cft_array *randn(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F64, shape, nd);
}
static double *values(cft_array *x) {
    double *v = malloc(sizeof(double) * (size_t)(cft_array_size(x) + 1));
    cft_copy_to(x, CFT_F64, v);
    return v;
}

/* C reference: q [B,L,E], k [B,S,E], v [B,S,F], allowed [L,S] (NULL: all) */
static cft_array *ref_attention(cft_array *q, cft_array *k, cft_array *v, const bool *allowed,
                                const double *add) {
    int64_t B = cft_array_dim(q, 0), L = cft_array_dim(q, 1), E = cft_array_dim(q, 2),
            S = cft_array_dim(k, 1), F = cft_array_dim(v, 2);
    double *qv = values(q), *kv = values(k), *vv = values(v),
           *out = calloc((size_t)(B * L * F), sizeof(double));
    double *s = malloc(sizeof(double) * (size_t)S);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < L; i++) {
            double m = -INFINITY, z = 0;
            for (int64_t j = 0; j < S; j++) {
                double d = 0;
                for (int64_t e = 0; e < E; e++)
                    d += qv[(b * L + i) * E + e] * kv[(b * S + j) * E + e];
                s[j] = d / sqrt((double)E) + (add ? add[i * S + j] : 0);
                if (allowed && !allowed[i * S + j])
                    s[j] = -INFINITY;
                if (s[j] > m)
                    m = s[j];
            }
            for (int64_t j = 0; j < S; j++)
                z += s[j] == -INFINITY ? 0 : exp(s[j] - m);
            for (int64_t j = 0; j < S; j++) {
                double p = z > 0 && s[j] != -INFINITY ? exp(s[j] - m) / z : 0;
                for (int64_t f = 0; f < F; f++)
                    out[(b * L + i) * F + f] += p * vv[(b * S + j) * F + f];
            }
        }
    cft_array *r = cft_from_f64(out, (int64_t[]){B, L, F}, 3);
    free(qv), free(kv), free(vv), free(out), free(s);
    return r;
}

static cft_status masked_rows_cb(void *env, int nin, cft_array *const *in, int nout,
                                 cft_array **out) {
    (void)nin, (void)nout;
    out[0] =
        cft_sum(cft_scaled_dot_product_attention(in[0], in[1], in[2], env, false), NULL, 0, false);
    return CFT_OK;
}

/* ---- the model: Linear -> LayerNorm -> MHA (causal) -> mean, squared error ---- */
typedef struct {
    cft_module *fc, *ln, *attn;
} model;

static cft_array *model_fwd(const model *m, const cft_tree *p, cft_array *x) {
    cft_array *h = cft_module_apply(m->fc, cft_tree_subtree(p, "fc"), NULL, x, true, NULL, NULL);
    h = cft_module_apply(m->ln, cft_tree_subtree(p, "ln"), NULL, cft_gelu(h, true), true, NULL,
                         NULL);
    return cft_mha_apply(m->attn, cft_tree_subtree(p, "attn"), h, h, h, NULL, true);
}
static cft_status model_loss(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                             cft_array **out) {
    (void)nin, (void)nout;
    cft_array *y = model_fwd(env, p, in[0]);
    out[0] = cft_square(cft_sub(cft_mean(y, NULL, 0, false), in[1]));
    return CFT_OK;
}

/* (params..., q, kv, keep [S]) -> mha(q, kv, kv, keep as [1, S]) */
static cft_status mha_masked(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                             cft_array **out) {
    (void)nin, (void)nout;
    int64_t S = cft_array_dim(in[2], 0);
    out[0] =
        cft_mha_apply(env, p, in[0], in[1], in[1], cft_reshape(in[2], (int64_t[]){1, S}, 2), false);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    TEST("sdpa: a two-key example by hand") {
        cft_array *q = cft_from_f64((double[]){1, 0}, (int64_t[]){1, 2}, 2);
        cft_array *k = cft_from_f64((double[]){1, 0, 0, 1}, (int64_t[]){2, 2}, 2);
        cft_array *v = cft_from_f64((double[]){1, 2, 3, 4}, (int64_t[]){2, 2}, 2);
        double a = exp(1 / sqrt(2.0)), p0 = a / (a + 1), p1 = 1 / (a + 1);
        cft_array *want =
            cft_from_f64((double[]){p0 * 1 + p1 * 3, p0 * 2 + p1 * 4}, (int64_t[]){1, 2}, 2);
        CHECK_ARRAY_CLOSE(cft_scaled_dot_product_attention(q, k, v, NULL, false), want, 1e-15, 0);
        /* masking key 0 leaves v[1] */
        cft_array *mask =
            cft_gt(cft_iota(CFT_I32, (int64_t[]){1, 2}, 2, 1), cft_scalar(0, CFT_I32));
        CHECK_ARRAY_CLOSE(cft_scaled_dot_product_attention(q, k, v, mask, false),
                          cft_from_f64((double[]){3, 4}, (int64_t[]){1, 2}, 2), 0, 0);
    }

    TEST("sdpa: against a C reference with bool, additive and causal masks") {
        cft_array *q = randn(1, (int64_t[]){2, 4, 3}, 3), *k = randn(2, (int64_t[]){2, 4, 3}, 3),
                  *v = randn(3, (int64_t[]){2, 4, 5}, 3);
        CHECK_ARRAY_CLOSE(cft_scaled_dot_product_attention(q, k, v, NULL, false),
                          ref_attention(q, k, v, NULL, NULL), 1e-13, 1e-14);
        bool allowed[16], causal[16], both[16];
        double add[16];
        for (int i = 0; i < 16; i++) {
            allowed[i] = (i * 7) % 3 != 0 || i % 4 == 0;
            causal[i] = i % 4 <= i / 4;
            both[i] = allowed[i] && causal[i];
            add[i] = 0.3 * (i % 5) - 0.5;
        }
        cft_array *bm =
            cft_astype(cft_from_data(allowed, CFT_BOOL, (int64_t[]){4, 4}, 2), CFT_BOOL);
        CHECK_ARRAY_CLOSE(cft_scaled_dot_product_attention(q, k, v, bm, false),
                          ref_attention(q, k, v, allowed, NULL), 1e-13, 1e-14);
        CHECK_ARRAY_CLOSE(cft_scaled_dot_product_attention(q, k, v, NULL, true),
                          ref_attention(q, k, v, causal, NULL), 1e-13, 1e-14);
        CHECK_ARRAY_CLOSE(cft_scaled_dot_product_attention(q, k, v, bm, true),
                          ref_attention(q, k, v, both, NULL), 1e-13, 1e-14);
        cft_array *am = cft_from_f64(add, (int64_t[]){4, 4}, 2);
        CHECK_ARRAY_CLOSE(cft_scaled_dot_product_attention(q, k, v, am, false),
                          ref_attention(q, k, v, NULL, add), 1e-13, 1e-14);
        /* an additive -inf mask is the bool mask */
        cft_array *inf = cft_where(bm, cft_zeros(CFT_F64, (int64_t[]){4, 4}, 2),
                                   cft_full(-INFINITY, CFT_F64, (int64_t[]){4, 4}, 2));
        CHECK_ARRAY_CLOSE(cft_scaled_dot_product_attention(q, k, v, inf, false),
                          cft_scaled_dot_product_attention(q, k, v, bm, false), 1e-15, 0);
        /* causal: row 0 sees only key 0 */
        CHECK_ARRAY_CLOSE(
            cft_index(cft_index(cft_scaled_dot_product_attention(q, k, v, NULL, true), 1), 0),
            cft_index(cft_index(v, 1), 0), 1e-15, 0);
        /* batch dims broadcast: k, v shared by a batch of queries */
        cft_array *y =
            cft_scaled_dot_product_attention(q, cft_index(k, 0), cft_index(v, 0), NULL, false);
        CHECK_ARRAY_CLOSE(cft_index(y, 1),
                          cft_scaled_dot_product_attention(cft_index(q, 1), cft_index(k, 0),
                                                           cft_index(v, 0), NULL, false),
                          1e-15, 0);
        cft_array *e =
            cft_scaled_dot_product_attention(q, randn(4, (int64_t[]){2, 4, 2}, 3), v, NULL, false);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_scaled_dot_product_attention"));
        CHECK(cft_failed(cft_scaled_dot_product_attention(
            q, k, v, cft_ones(CFT_BOOL, (int64_t[]){3, 3}, 2), false)));
    }

    TEST("sdpa: fully masked rows give zeros and finite gradients") {
        cft_array *q = randn(5, (int64_t[]){3, 2}, 2), *k = randn(6, (int64_t[]){4, 2}, 2),
                  *v = randn(7, (int64_t[]){4, 2}, 2);
        bool allowed[12] = {1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
        cft_array *m = cft_from_data(allowed, CFT_BOOL, (int64_t[]){3, 4}, 2);
        cft_array *y = cft_scaled_dot_product_attention(q, k, v, m, false);
        CHECK_ARRAY_CLOSE(cft_index(y, 1), cft_zeros(CFT_F64, (int64_t[]){2}, 1), 0, 0);
        cft_array *g[3];
        CHECK_EQ(cft_fn_call(cft_grad(cft_fn_new(masked_rows_cb, m, 3, 1), (int[]){0, 1, 2}, 3),
                             (cft_array *[]){q, k, v}, g),
                 CFT_OK);
        for (int i = 0; i < 3; i++)
            CHECK(isfinite(cft_item(cft_sum(g[i], NULL, 0, false))));
        CHECK_ARRAY_CLOSE(cft_index(g[0], 1), cft_zeros(CFT_F64, (int64_t[]){2}, 1), 0, 0);
    }

    TEST("mha: per-head composition, identity projections, key padding") {
        int64_t E = 6, H = 3, D = 2;
        cft_module *mha = cft_nn_mha(E, H, true);
        cft_tree *p = cft_tree_astype(cft_module_init(mha, cft_random_key(8), NULL), CFT_F64);
        p = cft_tree_set(p, "in_proj_bias", randn(9, (int64_t[]){3 * E}, 1)); /* non-zero biases */
        p = cft_tree_set(p, "out_proj.bias", randn(10, (int64_t[]){E}, 1));
        cft_array *q = randn(11, (int64_t[]){2, 3, E}, 3), *kv = randn(12, (int64_t[]){2, 5, E}, 3);
        cft_array *y = cft_mha_apply(mha, p, q, kv, kv, NULL, false);
        CHECK_EQ(cft_array_dim(y, 0), 2);
        CHECK_EQ(cft_array_dim(y, 1), 3);
        CHECK_EQ(cft_array_dim(y, 2), E);
        /* reference: each head h uses rows [h*D, (h+1)*D) of each projection */
        cft_array *W = cft_tree_get(p, "in_proj_weight"), *b = cft_tree_get(p, "in_proj_bias"),
                  *heads[3];
        for (int64_t h = 0; h < H; h++) {
            cft_array *proj[3];
            cft_array *src[3] = {q, kv, kv};
            for (int j = 0; j < 3; j++) {
                int64_t r0 = j * E + h * D;
                cft_array *w = cft_slice(W, (int64_t[]){r0, 0}, (int64_t[]){r0 + D, E}, NULL);
                cft_array *bb = cft_slice(b, (int64_t[]){r0}, (int64_t[]){r0 + D}, NULL);
                proj[j] = cft_add(cft_matmul(src[j], cft_mT(w)), bb);
            }
            heads[h] = ref_attention(proj[0], proj[1], proj[2], NULL, NULL);
        }
        cft_array *cat = cft_concatenate(heads, 3, -1);
        cft_array *want = cft_add(cft_matmul(cat, cft_mT(cft_tree_get(p, "out_proj.weight"))),
                                  cft_tree_get(p, "out_proj.bias"));
        CHECK_ARRAY_CLOSE(y, want, 1e-12, 1e-13);
        /* one head, identity projections, no bias: plain attention */
        cft_module *m1 = cft_nn_mha(4, 1, false);
        cft_array *I = cft_eye(4, CFT_F64);
        cft_tree *pi = cft_tree_set(cft_tree_set(cft_tree_new(), "in_proj_weight",
                                                 cft_concatenate((cft_array *[]){I, I, I}, 3, 0)),
                                    "out_proj.weight", I);
        cft_array *x = randn(13, (int64_t[]){5, 4}, 2);
        CHECK_ARRAY_CLOSE(cft_module_apply(m1, pi, NULL, x, false, NULL, NULL),
                          cft_scaled_dot_product_attention(x, x, x, NULL, false), 1e-14, 1e-15);
        /* key padding mask [B, 1, 1, S]: padded keys are ignored */
        bool keep[10] = {1, 1, 1, 0, 0, 1, 1, 1, 1, 1};
        cft_array *kp = cft_from_data(keep, CFT_BOOL, (int64_t[]){2, 1, 1, 5}, 4);
        cft_array *ym = cft_mha_apply(mha, p, q, kv, kv, kp, false);
        cft_array *kv0 = cft_slice(cft_index(kv, 0), (int64_t[]){0, 0}, (int64_t[]){3, E}, NULL);
        CHECK_ARRAY_CLOSE(cft_index(ym, 0),
                          cft_mha_apply(mha, p, cft_index(q, 0), kv0, kv0, NULL, false), 1e-12,
                          1e-13);
        CHECK_ARRAY_CLOSE(cft_index(ym, 1), cft_index(y, 1), 1e-12, 1e-13);
        /* vmap over examples with a per-example padding mask equals the batched call */
        cft_fn *fm = cft_tree_fn_new(mha_masked, mha, p, 3, 1);
        int np = cft_tree_size(p), axes[8];
        for (int i = 0; i < np; i++)
            axes[i] = CFT_NOT_BATCHED;
        axes[np] = axes[np + 1] = axes[np + 2] = 0;
        cft_array *vin[8];
        cft_tree_flatten(p, vin);
        vin[np] = q, vin[np + 1] = kv, vin[np + 2] = cft_reshape(kp, (int64_t[]){2, 5}, 2);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_vmap(fm, axes, NULL), vin), ym, 1e-13, 1e-14);
        cft_array *e = cft_mha_apply(mha, p, q, randn(1, (int64_t[]){2, 5, 4}, 3), kv, NULL, false);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_mha_apply"));
        CHECK(cft_failed(cft_mha_apply(cft_nn_linear(2, 2, true), p, q, kv, kv, NULL, false)));
    }

    TEST("vmap(grad) through Linear + LayerNorm + MHA equals a loop, and finite differences") {
        model m = {cft_nn_linear(6, 8, true), cft_nn_layer_norm((int64_t[]){8}, 1, 1e-5, true),
                   cft_nn_mha(8, 2, true)};
        cft_tree *p = cft_tree_new();
        p = cft_tree_merge(p, "fc", cft_module_init(m.fc, cft_random_key(20), NULL));
        p = cft_tree_merge(p, "ln", cft_module_init(m.ln, NULL, NULL));
        p = cft_tree_merge(p, "attn", cft_module_init(m.attn, cft_random_key(21), NULL));
        p = cft_tree_astype(p, CFT_F64);
        /* non-trivial LayerNorm affine and attention biases */
        p = cft_tree_set(p, "ln.weight", cft_add_s(randn(22, (int64_t[]){8}, 1), 1));
        p = cft_tree_set(p, "attn.in_proj_bias", randn(23, (int64_t[]){24}, 1));
        int n = cft_tree_size(p);
        CHECK_EQ(n, 8);
        cft_fn *loss = cft_tree_fn_new(model_loss, &m, p, 2, 1);
        int argnums[8], in_axes[10];
        for (int i = 0; i < n; i++)
            argnums[i] = i, in_axes[i] = CFT_NOT_BATCHED;
        in_axes[n] = 0, in_axes[n + 1] = 0;
        cft_fn *g = cft_grad(loss, argnums, n);
        cft_fn *psg = cft_vmap(g, in_axes, NULL);
        enum { B = 5 };
        cft_array *xs = randn(24, (int64_t[]){B, 4, 6}, 3), *ys = randn(25, (int64_t[]){B}, 1);
        cft_array *in[10], *gb[8], *gi[8];
        cft_tree_flatten(p, in);
        in[n] = xs, in[n + 1] = ys;
        CHECK_EQ(cft_fn_call(psg, in, gb), CFT_OK);
        for (int b = 0; b < B; b++) {
            in[n] = cft_index(xs, b), in[n + 1] = cft_index(ys, b);
            CHECK_EQ(cft_fn_call(g, in, gi), CFT_OK);
            for (int i = 0; i < n; i++)
                CHECK_ARRAY_CLOSE(cft_index(gb[i], b), gi[i], 1e-11, 1e-13);
        }
        /* the last example's gradient against central differences, a few entries per parameter */
        cft_tree *gt = cft_tree_unflatten(p, gi);
        double worst = 0, h = 1e-6;
        for (int i = 0; i < n; i++) {
            const char *name = cft_tree_name(p, i);
            cft_array *w = cft_tree_at(p, i);
            int64_t sz = cft_array_size(w);
            double *wv = values(w);
            for (int64_t j = 0; j < sz; j += sz / 3 + 1) {
                double keep = wv[j], f[2];
                for (int s = 0; s < 2; s++) {
                    wv[j] = keep + (s ? -h : h);
                    cft_tree *ps = cft_tree_set(
                        p, name, cft_from_f64(wv, cft_array_shape(w), cft_array_ndim(w)));
                    cft_array *o;
                    model_loss(&m, ps, 2, &in[n], 1, &o);
                    f[s] = cft_item(o);
                }
                wv[j] = keep;
                double d = fabs((f[0] - f[1]) / (2 * h) - cft_item_at(cft_tree_get(gt, name), j));
                if (!(d <= worst))
                    worst = d;
            }
            free(wv);
        }
        CHECK_MSG(worst < 1e-7, "max |grad - finite difference| = %g", worst);
        /* batched forward equals the layers applied to [B, L, E] directly */
        cft_array *yb = model_fwd(&m, p, xs);
        CHECK_ARRAY_CLOSE(cft_index(yb, 3), model_fwd(&m, p, cft_index(xs, 3)), 1e-13, 1e-14);
    }

    return check_summary();
}
