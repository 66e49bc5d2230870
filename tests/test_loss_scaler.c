/* test_loss_scaler.c: the dynamic loss scale (cft_loss_scaler_*, cft/amp.h)
 * against GradScaler's rules: scaling the loss, unscaling and the inf/NaN
 * check, a finite step equal to cft_optim_update on the unscaled gradients,
 * a skipped step that changes nothing and backs the scale off, growth after
 * growth_interval good steps, the whole step traced and jitted against the
 * eager one (twice), an f16 training loop under autocast that recovers from
 * an overflowing scale, and bad inputs.
 *
 * Tolerances: the scale is a power of two, so scaling and unscaling f32
 * gradients is exact (compared bitwise); the jitted step may contract
 * a*b + c into a fused multiply-add (rtol 1e-6 relative, f32). */
#include <math.h>
#include <string.h>

#include "check.h"

static const char *names[2] = {"w", "b"};

static cft_tree *tree2(cft_array *a, cft_array *b) {
    cft_array *xs[2] = {a, b};
    return cft_tree_from(names, xs, 2);
}

static cft_array *vec(const float *v, int64_t n) {
    return cft_from_data(v, CFT_F32, (int64_t[]){n}, 1);
}

/* the jitted step: (w, b, gw, gb, m_w, m_b, scale, tracker, step) ->
 * (w, b, m_w, m_b, scale, tracker, skipped) */
static cft_loss_scaler hyper;
static cft_optim opt;
static cft_status step_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    const char *sn[2] = {"scale", "growth_tracker"};
    const char *mn[2] = {"momentum_buffer.w", "momentum_buffer.b"};
    cft_tree *p = tree2(in[0], in[1]), *g = tree2(in[2], in[3]);
    cft_tree *st = cft_tree_from(mn, in + 4, 2), *sc = cft_tree_from(sn, in + 6, 2);
    cft_tree *np, *ns, *nsc;
    cft_array *skipped;
    cft_status s =
        cft_loss_scaler_step(&hyper, &opt, g, sc, st, p, in[8], NULL, &np, &ns, &nsc, &skipped);
    if (s != CFT_OK)
        return s;
    cft_tree_flatten(np, out);
    cft_tree_flatten(ns, out + 2);
    cft_tree_flatten(nsc, out + 4);
    out[6] = skipped;
    return CFT_OK;
}

/* f16 regression: the scaled loss (w, b, x, y, scale) -> scale * mse(x w + b, y),
 * run under f16 autocast so the backward products round to f16 */
static cft_status reg_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *pred = cft_add(cft_matmul(in[2], in[0]), in[1]);
    out[0] = cft_mul(cft_mse(pred, in[3]), in[4]);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    hyper = cft_loss_scaler_default();
    opt = cft_sgd(0.1, 0.9, 0.0, false);
    const float w0[3] = {1, -2, 0.5f}, b0[1] = {0.25f}, gw[3] = {0.5f, 1, -3}, gb[1] = {2};

    TEST("defaults and the initial state are GradScaler's") {
        CHECK_CLOSE(hyper.init_scale, 65536.0, 0, 0);
        CHECK_CLOSE(hyper.growth_factor, 2.0, 0, 0);
        CHECK_CLOSE(hyper.backoff_factor, 0.5, 0, 0);
        CHECK_EQ(hyper.growth_interval, 2000);
        cft_tree *s = cft_loss_scaler_init(&hyper);
        CHECK(!cft_tree_failed(s));
        CHECK_CLOSE(cft_item(cft_tree_get(s, "scale")), 65536.0, 0, 0);
        CHECK(cft_array_dtype(cft_tree_get(s, "growth_tracker")) == CFT_I32);
    }

    TEST("scale and unscale are exact; inf and NaN are found") {
        cft_tree *s = cft_loss_scaler_init(&hyper);
        cft_array *l = cft_loss_scale(s, cft_scalar(1.5, CFT_F32));
        CHECK_CLOSE(cft_item(l), 1.5 * 65536, 0, 0);
        cft_tree *g = tree2(cft_mul_s(vec(gw, 3), 65536), cft_mul_s(vec(gb, 1), 65536));
        cft_array *inf;
        cft_tree *u = cft_loss_unscale(s, g, &inf);
        CHECK_ARRAY_CLOSE(cft_tree_get(u, "w"), vec(gw, 3), 0, 0);
        CHECK(!cft_item(inf));
        const float bad[3] = {1, INFINITY, 0}, nan[1] = {NAN};
        cft_loss_unscale(s, tree2(vec(bad, 3), vec(gb, 1)), &inf);
        CHECK(cft_item(inf));
        cft_loss_unscale(s, tree2(vec(gw, 3), vec(nan, 1)), &inf);
        CHECK(cft_item(inf));
        /* an f16 gradient is unscaled in f32 and stays f16 */
        cft_tree *h = tree2(cft_astype(cft_mul_s(vec(gw, 3), 1024), CFT_F16), vec(gb, 1));
        cft_tree *s2 = cft_loss_scaler_init(&(cft_loss_scaler){1024, 2, 0.5, 10});
        u = cft_loss_unscale(s2, h, &inf);
        CHECK(cft_array_dtype(cft_tree_get(u, "w")) == CFT_F16);
        CHECK_ARRAY_CLOSE(cft_tree_get(u, "w"), vec(gw, 3), 0, 0);
    }

    TEST("a finite step is cft_optim_update on the unscaled gradients") {
        cft_tree *p = tree2(vec(w0, 3), vec(b0, 1)), *st = cft_optim_init(&opt, p);
        cft_tree *sc = cft_loss_scaler_init(&hyper);
        cft_tree *g = tree2(vec(gw, 3), vec(gb, 1));
        cft_tree *gs = tree2(cft_mul_s(vec(gw, 3), 65536), cft_mul_s(vec(gb, 1), 65536));
        cft_array *one = cft_scalar(1, CFT_I32);
        cft_tree *rp, *rs, *np, *ns, *nsc;
        cft_array *skipped;
        CHECK(cft_optim_update(&opt, g, st, p, one, NULL, &rp, &rs) == CFT_OK);
        CHECK(cft_loss_scaler_step(&hyper, &opt, gs, sc, st, p, one, NULL, &np, &ns, &nsc,
                                   &skipped) == CFT_OK);
        CHECK(!cft_item(skipped));
        CHECK_ARRAY_CLOSE(cft_tree_get(np, "w"), cft_tree_get(rp, "w"), 0, 0);
        CHECK_ARRAY_CLOSE(cft_tree_get(np, "b"), cft_tree_get(rp, "b"), 0, 0);
        CHECK_ARRAY_CLOSE(cft_tree_get(ns, "momentum_buffer.w"),
                          cft_tree_get(rs, "momentum_buffer.w"), 0, 0);
        CHECK_CLOSE(cft_item(cft_tree_get(nsc, "scale")), 65536, 0, 0);
        CHECK_CLOSE(cft_item(cft_tree_get(nsc, "growth_tracker")), 1, 0, 0);
    }

    TEST("a step with inf changes nothing and halves the scale; growth after the interval") {
        cft_loss_scaler h = {8, 2, 0.5, 2};
        cft_tree *p = tree2(vec(w0, 3), vec(b0, 1)), *st = cft_optim_init(&opt, p);
        cft_tree *sc = cft_loss_scaler_init(&h);
        const float bad[3] = {1, INFINITY, 0};
        cft_tree *np, *ns, *nsc;
        cft_array *skipped, *one = cft_scalar(1, CFT_I32);
        CHECK(cft_loss_scaler_step(&h, &opt, tree2(vec(bad, 3), vec(gb, 1)), sc, st, p, one, NULL,
                                   &np, &ns, &nsc, &skipped) == CFT_OK);
        CHECK(cft_item(skipped));
        CHECK_ARRAY_CLOSE(cft_tree_get(np, "w"), vec(w0, 3), 0, 0);
        CHECK_ARRAY_CLOSE(cft_tree_get(np, "b"), vec(b0, 1), 0, 0);
        CHECK_CLOSE(cft_item(cft_tree_get(ns, "momentum_buffer.b")), 0, 0, 0);
        CHECK_CLOSE(cft_item(cft_tree_get(nsc, "scale")), 4, 0, 0);
        /* two good steps: tracker 1, then growth to 8 with the tracker reset */
        cft_tree *g = tree2(vec(gw, 3), vec(gb, 1));
        double want_scale[2] = {4, 8}, want_tr[2] = {1, 0};
        for (int k = 0; k < 2; k++) {
            CHECK(cft_loss_scaler_step(&h, &opt, g, nsc, ns, np, one, NULL, &np, &ns, &nsc,
                                       &skipped) == CFT_OK);
            CHECK(!cft_item(skipped));
            CHECK_CLOSE(cft_item(cft_tree_get(nsc, "scale")), want_scale[k], 0, 0);
            CHECK_CLOSE(cft_item(cft_tree_get(nsc, "growth_tracker")), want_tr[k], 0, 0);
        }
    }

    TEST("the whole step jits and matches the eager step, twice") {
        hyper = (cft_loss_scaler){16, 2, 0.5, 2};
        cft_fn *f = cft_fn_new(step_fn, NULL, 9, 7), *j = cft_jit(f);
        const float bad[3] = {1, NAN, 0};
        cft_array *in[9] = {vec(w0, 3),
                            vec(b0, 1),
                            vec(gw, 3),
                            vec(gb, 1),
                            cft_zeros(CFT_F32, (int64_t[]){3}, 1),
                            cft_zeros(CFT_F32, (int64_t[]){1}, 1),
                            cft_scalar(16, CFT_F32),
                            cft_scalar(0, CFT_I32),
                            cft_scalar(1, CFT_I32)};
        for (int r = 0; r < 3; r++) {
            if (r == 1)
                in[2] = vec(bad, 3);
            if (r == 2)
                in[2] = vec(gw, 3);
            cft_array *e[7], *o[7];
            CHECK(cft_fn_call(f, in, e) == CFT_OK);
            CHECK(cft_fn_call(j, in, o) == CFT_OK);
            for (int k = 0; k < 7; k++)
                CHECK_ARRAY_CLOSE(o[k], e[k], 1e-6, 1e-7);
            CHECK_EQ((int)cft_item(e[6]), r == 1);
            for (int k = 0; k < 6; k++) /* feed the state on */
                in[k < 2 ? k : k + 2] = e[k];
        }
        hyper = cft_loss_scaler_default();
    }

    TEST("f16 autocast training with a loss scale that starts too large recovers") {
        /* y = 3 x0 - 2 x1 + 1; the first scale (2^24) makes f16 products
         * overflow, so the first steps are skipped until it backs off */
        cft_array *x = cft_random_normal(cft_random_key(7), CFT_F32, (int64_t[]){64, 2}, 2);
        cft_array *y = cft_add_s(
            cft_matmul(x, cft_from_data((float[]){3, -2}, CFT_F32, (int64_t[]){2, 1}, 2)), 1);
        cft_loss_scaler h = {16777216.0, 2, 0.5, 1000};
        cft_optim sgd = cft_sgd(0.1, 0, 0, false);
        cft_tree *p =
            tree2(cft_zeros(CFT_F32, (int64_t[]){2, 1}, 2), cft_zeros(CFT_F32, (int64_t[]){1}, 1));
        cft_tree *st = cft_optim_init(&sgd, p), *sc = cft_loss_scaler_init(&h);
        cft_fn *lf = cft_autocast(cft_fn_new(reg_loss, NULL, 5, 1), CFT_F16);
        cft_fn *gf = cft_grad(lf, (int[]){0, 1}, 2);
        int skipped_n = 0, t = 1;
        for (int it = 0; it < 200; it++) {
            /* the gradient of the scaled loss; the products ran in f16, so a
             * scaled gradient above 65504 came back inf */
            cft_array *in[5] = {cft_tree_at(p, 0), cft_tree_at(p, 1), x, y,
                                cft_tree_get(sc, "scale")},
                      *g[2];
            CHECK(cft_fn_call(gf, in, g) == CFT_OK);
            cft_tree *gs = tree2(g[0], g[1]);
            cft_array *skipped;
            CHECK(cft_loss_scaler_step(&h, &sgd, gs, sc, st, p, cft_scalar(t, CFT_I32), NULL, &p,
                                       &st, &sc, &skipped) == CFT_OK);
            if (cft_item(skipped))
                skipped_n++;
            else
                t++;
        }
        CHECK(skipped_n >= 5 && skipped_n < 30);
        CHECK_CLOSE(cft_item(cft_index(cft_reshape(cft_tree_at(p, 0), (int64_t[]){2}, 1), 0)), 3,
                    2e-2, 0);
        CHECK_CLOSE(cft_item(cft_tree_at(p, 1)), 1, 2e-2, 0.02);
    }

    TEST("bad hyperparameters and states are refused by name") {
        cft_tree *s = cft_loss_scaler_init(&(cft_loss_scaler){0, 2, 0.5, 10});
        CHECK(cft_tree_failed(s));
        CHECK(strstr(cft_error_message(cft_tree_error(s)), "cft_loss_scaler_init") != NULL);
        CHECK(cft_tree_failed(cft_loss_scaler_init(&(cft_loss_scaler){8, 1, 0.5, 10})));
        CHECK(cft_tree_failed(cft_loss_scaler_init(&(cft_loss_scaler){8, 2, 1.5, 10})));
        CHECK(cft_tree_failed(cft_loss_scaler_init(&(cft_loss_scaler){8, 2, 0.5, 0})));
        CHECK(cft_tree_failed(cft_loss_scaler_init(NULL)));
        cft_array *l = cft_loss_scale(cft_tree_new(), cft_scalar(1, CFT_F32));
        CHECK(cft_failed(l) && strstr(cft_error_message(l), "growth_tracker") == NULL &&
              strstr(cft_error_message(l), "cft_loss_scale") != NULL);
        cft_tree *sc = cft_loss_scaler_init(&hyper);
        CHECK(cft_failed(cft_loss_scale(sc, cft_scalar(1, CFT_I32))));
        cft_tree *np, *ns, *nsc;
        cft_tree *p = tree2(vec(w0, 3), vec(b0, 1));
        CHECK(cft_loss_scaler_step(&hyper, &opt, tree2(vec(gw, 3), vec(gb, 1)), sc,
                                   cft_optim_init(&opt, p), p, cft_scalar(1, CFT_I32), NULL, NULL,
                                   &ns, &nsc, NULL) == CFT_E_ARG);
        cft_tree *ig = tree2(cft_scalar(1, CFT_I32), vec(gb, 1));
        CHECK(cft_loss_scaler_step(&hyper, &opt, ig, sc, cft_optim_init(&opt, p), p,
                                   cft_scalar(1, CFT_I32), NULL, &np, &ns, &nsc,
                                   NULL) == CFT_E_DTYPE);
        CHECK(cft_tree_failed(np) && cft_tree_failed(nsc));
    }

    return check_summary();
}
