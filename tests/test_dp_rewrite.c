/* test_dp_rewrite.c: DP-SGD's clipped gradient sum without per-sample
 * gradients. The rewrite pass (cft_ir_rewrite, applied by cft_jit) turns
 * per-example norms and clipped sums of dense layers' per-example outer
 * products into norms and GEMMs of their factors. Checked: the rewritten
 * IR has no equation of the per-sample gradient's size left; it, the jit,
 * cft_dp_clipped_grad_sum and the materialised program agree (f32: rtol
 * 1e-5, atol 1e-6 -- the same sums in another order, a few ulps); with B
 * symbolic (new batch sizes after the first call, including 1 and 0);
 * programs that also return the per-sample gradients keep them;
 * convolutions' per-example gradients are not formed either (sums by one
 * convolution, norms by a scan over chunks of examples; several
 * geometries, chunked or not); what does not factor (a norm over part of
 * an example) is left as it was; bf16 / f16 autocast's half products
 * (through their conversion to f32) are rewritten too; bad arguments to
 * the library call. */
#include <math.h>
#include <stdlib.h>

#include "cft/cft.h"
#include "check.h"

enum { IN = 6, HID = 7, OUT = 3 };

/* (w1 [IN,HID], b1 [HID], w2 [HID,OUT], b2 [OUT], x [IN], y []) -> CE */
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[4], in[0]), in[1]));
    out[0] =
        cft_mean(cft_cross_entropy(cft_add(cft_matmul(h, in[2]), in[3]), in[5]), NULL, 0, false);
    return CFT_OK;
}

static cft_fn *psg_fn(void) {
    return cft_vmap(
        cft_grad(cft_fn_new(loss, NULL, 6, 1), (int[]){0, 1, 2, 3}, 4),
        (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL);
}

/* the obvious program: (params, x, y) -> clipped sums [, per-sample grads] */
static bool also_psg;
static cft_status dp_step(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_fn *psg = env;
    cft_array *g[4];
    cft_status st = cft_fn_call(psg, in, g);
    if (st != CFT_OK)
        return st;
    int64_t B = cft_array_dim(g[0], 0);
    cft_array *sq = NULL;
    for (int l = 0; l < 4; l++) {
        int nd = cft_array_ndim(g[l]), axes[2] = {1, 2};
        cft_array *s = cft_sum(cft_square(g[l]), axes, nd - 1, false);
        sq = sq ? cft_add(sq, s) : s;
    }
    cft_array *scale = cft_minimum(
        cft_scalar(1, CFT_F32), cft_div(cft_scalar(0.5, CFT_F32), cft_add_s(cft_sqrt(sq), 1e-6)));
    for (int l = 0; l < 4; l++) {
        int nd = cft_array_ndim(g[l]);
        out[l] = cft_sum(cft_mul(g[l], cft_reshape(scale, (int64_t[]){B, 1, 1}, nd)), (int[]){0}, 1,
                         false);
        if (also_psg)
            out[4 + l] = g[l];
    }
    return CFT_OK;
}

/* (x [B,5,4]) -> sum of squares over axis 1 only */
static cft_status partial_norm(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_square(in[0]), (int[]){1}, 1, false);
    return CFT_OK;
}

/* a convolution's geometry: w [co, ci, 3, 3], x [b, ci, hw, hw] */
typedef struct {
    int64_t co, ci, hw, b, stride, pad;
} conv_cfg;

/* (w, x [ci,hw,hw]) -> sum of squares of conv(x, w) */
static cft_status conv_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    const conv_cfg *c = env;
    cft_array *x = cft_expand_dims(in[1], 0);
    int64_t st[2] = {c->stride, c->stride}, pad[2] = {c->pad, c->pad};
    out[0] = cft_sum(cft_square(cft_conv2d(x, in[0], st, pad, NULL, 1)), NULL, 0, false);
    return CFT_OK;
}

/* (w, x [B,ci,hw,hw]) -> the clipped sum of the per-example conv gradients */
static cft_status conv_step(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *g[1];
    cft_status st = cft_fn_call(env, in, g);
    if (st != CFT_OK)
        return st;
    int64_t B = cft_array_dim(g[0], 0);
    cft_array *sq = cft_sum(cft_square(g[0]), (int[]){1, 2, 3, 4}, 4, false);
    cft_array *scale = cft_minimum(
        cft_scalar(1, CFT_F32), cft_div(cft_scalar(0.5, CFT_F32), cft_add_s(cft_sqrt(sq), 1e-6)));
    out[0] = cft_sum(cft_mul(g[0], cft_reshape(scale, (int64_t[]){B, 1, 1, 1, 1}, 5)), (int[]){0},
                     1, false);
    return CFT_OK;
}

static void batch(uint64_t seed, int64_t B, cft_array **in) {
    in[0] = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){IN, HID}, 2);
    in[1] = cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){HID}, 1);
    in[2] = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){HID, OUT}, 2);
    in[3] = cft_random_normal(cft_random_key(4), CFT_F32, (int64_t[]){OUT}, 1);
    in[4] = cft_random_normal(cft_random_key(seed), CFT_F32, (int64_t[]){B, IN}, 2);
    in[5] = cft_astype(
        cft_mul_s(cft_random_uniform(cft_random_key(seed + 1), CFT_F32, (int64_t[]){B}, 1, 0, 1),
                  OUT - 0.01),
        CFT_I32);
}

/* the largest output of any equation, in elements */
static int64_t largest(const cft_ir *ir) {
    int64_t m = 0;
    for (int i = 0; i < cft_ir_num_eqns(ir); i++) {
        cft_aval a;
        for (int k = 0; cft_ir_eqn_out_aval(ir, i, k, &a) == CFT_OK; k++) {
            int64_t n = 1;
            for (int d = 0; d < a.ndim; d++)
                n *= a.shape[d];
            m = n > m ? n : m;
        }
    }
    return m;
}

/* how many equation outputs hold n elements */
static int sized(const cft_ir *ir, int64_t n) {
    int m = 0;
    for (int i = 0; i < cft_ir_num_eqns(ir); i++) {
        cft_aval a;
        for (int k = 0; cft_ir_eqn_out_aval(ir, i, k, &a) == CFT_OK; k++) {
            int64_t e = 1;
            for (int d = 0; d < a.ndim; d++)
                e *= a.shape[d];
            m += e == n;
        }
    }
    return m;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    const int64_t B = 64;
    cft_fn *psg = psg_fn();
    cft_fn *step = cft_fn_new(dp_step, psg, 6, 4);
    cft_array *in[6], *want[4];
    batch(10, B, in);
    CHECK_EQ(cft_fn_call(step, in, want), CFT_OK);

    TEST("the rewritten IR forms no per-sample gradient and gives the same sums") {
        cft_aval av[6];
        for (int i = 0; i < 6; i++)
            av[i] = cft_array_aval(in[i]);
        cft_ir *ir = cft_ir_dce(cft_make_ir(step, av));
        cft_ir *rw = cft_ir_rewrite(ir);
        CHECK(ir && rw && rw != ir);
        /* before: B x IN x HID floats per-sample gradients; after: nothing
         * above B x HID (activations) */
        CHECK_EQ(largest(ir), B * IN * HID);
        CHECK_MSG(largest(rw) <= B * HID, "largest %lld", (long long)largest(rw));
        cft_array *got[4];
        CHECK_EQ(cft_ir_eval(rw, in, got), CFT_OK);
        for (int l = 0; l < 4; l++)
            CHECK_ARRAY_CLOSE(got[l], want[l], 1e-5, 1e-6);
    }
    TEST("jit and cft_dp_clipped_grad_sum equal the materialised program, B symbolic") {
        cft_fn *j = cft_jit(step);
        cft_fn *lib = cft_dp_clipped_grad_sum(cft_fn_new(loss, NULL, 6, 1), 4, 0.5);
        const int64_t sizes[6] = {64, 65, 128, 7, 1, 0};
        for (int s = 0; s < 6; s++) {
            cft_array *x[6], *ref[4], *a[4], *b[4];
            batch(20 + (uint64_t)s, sizes[s], x);
            CHECK_EQ(cft_fn_call(step, x, ref), CFT_OK);
            CHECK_EQ(cft_fn_call(j, x, a), CFT_OK);
            CHECK_EQ(cft_fn_call(lib, x, b), CFT_OK);
            for (int l = 0; l < 4; l++) {
                CHECK_ARRAY_CLOSE(a[l], ref[l], 1e-5, 1e-6);
                CHECK_ARRAY_CLOSE(b[l], ref[l], 1e-5, 1e-6);
            }
        }
        cft_jit_stats st;
        cft_jit_stats_of(j, &st);
        CHECK_MSG(st.traces <= 4, "%d traces", st.traces); /* symbolic B; 0 and 1 apart */
    }
    TEST("under bf16 and f16 autocast the per-sample gradients are not formed either; the sums "
         "agree with the materialised program") {
        /* autocast's products are half (bf16 x bf16 -> bf16, converted to
         * f32): the question passes the conversion and the factors answer
         * in f32. Tolerance: the materialised program rounds each example's
         * gradient to the half dtype (2^-9 relative for bf16, 2^-12 for
         * f16) before its norm and sum; the rewrite does not. */
        const cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        const double tol[2] = {2e-2, 4e-3};
        for (int k = 0; k < 2; k++) {
            cft_fn *apsg = cft_vmap(
                cft_grad(cft_autocast(cft_fn_new(loss, NULL, 6, 1), dts[k]), (int[]){0, 1, 2, 3},
                         4),
                (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0},
                NULL);
            cft_fn *astep = cft_fn_new(dp_step, apsg, 6, 4);
            cft_aval av[6];
            for (int i = 0; i < 6; i++)
                av[i] = cft_array_aval(in[i]);
            cft_ir *ir = cft_ir_dce(cft_make_ir(astep, av));
            cft_ir *rw = cft_ir_rewrite(ir);
            CHECK(ir && rw && rw != ir);
            CHECK_EQ(largest(ir), B * IN * HID);
            CHECK_MSG(largest(rw) <= B * HID, "%s: largest %lld", cft_dtype_name(dts[k]),
                      (long long)largest(rw));
            cft_array *ref[4], *got[4], *jg[4];
            CHECK_EQ(cft_fn_call(astep, in, ref), CFT_OK);
            CHECK_EQ(cft_ir_eval(rw, in, got), CFT_OK);
            cft_fn *j = cft_jit(astep);
            for (int r = 0; r < 2; r++) {
                CHECK_EQ(cft_fn_call(j, in, jg), CFT_OK);
                for (int l = 0; l < 4; l++) {
                    double m = cft_item(cft_max(cft_abs(ref[l]), NULL, 0, false));
                    CHECK_ARRAY_CLOSE(got[l], ref[l], tol[k], tol[k] * m);
                    CHECK_ARRAY_CLOSE(jg[l], ref[l], tol[k], tol[k] * m);
                }
            }
        }
    }
    TEST("the library call clips: each example's gradient at most `clip`") {
        /* one example: the sum is that example's gradient, clipped */
        cft_fn *lib = cft_dp_clipped_grad_sum(cft_fn_new(loss, NULL, 6, 1), 4, 1e-3);
        cft_array *x[6], *s[4];
        batch(40, 1, x);
        CHECK_EQ(cft_fn_call(lib, x, s), CFT_OK);
        double n2 = 0;
        for (int l = 0; l < 4; l++)
            n2 += cft_item(cft_sum(cft_square(s[l]), NULL, 0, false));
        CHECK_CLOSE(sqrt(n2), 1e-3, 1e-3, 0);
    }
    TEST("programs that return the per-sample gradients keep them") {
        also_psg = true;
        cft_fn *both = cft_fn_new(dp_step, psg, 6, 8);
        cft_array *a[8], *b[8];
        CHECK_EQ(cft_fn_call(both, in, a), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_jit(both), in, b), CFT_OK);
        for (int l = 0; l < 8; l++)
            CHECK_ARRAY_CLOSE(b[l], a[l], 1e-5, 1e-6);
        CHECK_EQ(cft_array_dim(b[4], 0), B);
        also_psg = false;
    }
    TEST("a sum of squares over part of an example is left alone") {
        cft_aval av = {CFT_F32, 3, {8, 5, 4}};
        cft_ir *ir = cft_make_ir(cft_fn_new(partial_norm, NULL, 1, 1), &av);
        CHECK(ir && cft_ir_rewrite(ir) == ir);
    }
    TEST("a convolution's per-sample gradients are not formed, and the sums agree") {
        /* small (norms at once); 8 chunks of 4 examples; a prime batch
         * (chunks of one), strided and padded */
        static conv_cfg cfg[3] = {{4, 1, 8, 16, 1, 0}, {64, 16, 8, 32, 1, 0}, {64, 32, 9, 7, 2, 1}};
        const char *modes[3] = {"ghost", "chunks", NULL};
        for (int k = 0; k < 3; k++)
            for (int m = 0; m < 3; m++) {
                const conv_cfg *c = &cfg[k];
                if (modes[m])
                    setenv("CFT_DP_CONV", modes[m], 1);
                else
                    unsetenv("CFT_DP_CONV"); /* the cost model's choice */
                cft_fn *cpsg =
                    cft_vmap(cft_grad(cft_fn_new(conv_loss, &cfg[k], 2, 1), (int[]){0}, 1),
                             (int[]){CFT_NOT_BATCHED, 0}, NULL);
                cft_fn *cstep = cft_fn_new(conv_step, cpsg, 2, 1);
                cft_array *x[2] = {cft_random_normal(cft_random_key(5), CFT_F32,
                                                     (int64_t[]){c->co, c->ci, 3, 3}, 4),
                                   cft_random_normal(cft_random_key(6), CFT_F32,
                                                     (int64_t[]){c->b, c->ci, c->hw, c->hw}, 4)};
                cft_aval av[2] = {cft_array_aval(x[0]), cft_array_aval(x[1])};
                cft_ir *ir = cft_ir_dce(cft_make_ir(cstep, av));
                cft_ir *rw = cft_ir_rewrite(ir);
                int64_t P = c->co * c->ci * 9;
                CHECK(ir && rw && sized(ir, c->b * P) >= 1);
                /* forced: the gradients are never formed whole (chunks of
                 * at most 256 KB; a batch within one chunk is one) */
                if (modes[m] && (m == 0 || c->b * P * 4 > 256 << 10))
                    CHECK_MSG(sized(rw, c->b * P) == 0, "config %d, %s: %d equations of B x P", k,
                              modes[m], sized(rw, c->b * P));
                cft_array *a[1], *b[1], *r[1];
                CHECK_EQ(cft_fn_call(cstep, x, a), CFT_OK);
                CHECK_EQ(cft_fn_call(cft_jit(cstep), x, b), CFT_OK);
                CHECK_EQ(cft_ir_eval(rw, x, r), CFT_OK);
                CHECK_ARRAY_CLOSE(b[0], a[0], 1e-5, 1e-5);
                CHECK_ARRAY_CLOSE(r[0], a[0], 1e-5, 1e-5);
            }
        unsetenv("CFT_DP_CONV");
    }
    TEST("under bf16 and f16 autocast a convolution's per-sample gradients are not formed "
         "either (ghost norms and chunks); the sums agree with the materialised program") {
        /* tolerance as for the MLP under autocast: the materialised program
         * rounds each example's gradient to the half dtype first */
        const cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        const double tol[2] = {2e-2, 4e-3};
        const char *modes[2] = {"ghost", "chunks"};
        static const conv_cfg cc = {64, 16, 8, 32, 1, 0};
        const conv_cfg *c = &cc;
        cft_array *x[2] = {
            cft_random_normal(cft_random_key(5), CFT_F32, (int64_t[]){c->co, c->ci, 3, 3}, 4),
            cft_random_normal(cft_random_key(6), CFT_F32, (int64_t[]){c->b, c->ci, c->hw, c->hw},
                              4)};
        cft_aval av[2] = {cft_array_aval(x[0]), cft_array_aval(x[1])};
        int64_t P = c->co * c->ci * 9;
        for (int k = 0; k < 2; k++)
            for (int m = 0; m < 2; m++) {
                setenv("CFT_DP_CONV", modes[m], 1);
                cft_fn *cpsg =
                    cft_vmap(cft_grad(cft_autocast(cft_fn_new(conv_loss, (void *)c, 2, 1), dts[k]),
                                      (int[]){0}, 1),
                             (int[]){CFT_NOT_BATCHED, 0}, NULL);
                cft_fn *cstep = cft_fn_new(conv_step, cpsg, 2, 1);
                cft_ir *ir = cft_ir_dce(cft_make_ir(cstep, av));
                cft_ir *rw = cft_ir_rewrite(ir);
                CHECK(ir && rw && sized(ir, c->b * P) >= 1);
                CHECK_MSG(sized(rw, c->b * P) == 0, "%s, %s: %d equations of B x P",
                          cft_dtype_name(dts[k]), modes[m], sized(rw, c->b * P));
                cft_array *a[1], *b[1], *r[1];
                CHECK_EQ(cft_fn_call(cstep, x, a), CFT_OK);
                CHECK_EQ(cft_ir_eval(rw, x, r), CFT_OK);
                double mx = cft_item(cft_max(cft_abs(a[0]), NULL, 0, false));
                CHECK_ARRAY_CLOSE(r[0], a[0], tol[k], tol[k] * mx);
                /* the jit: twice, the second time on new inputs */
                cft_fn *j = cft_jit(cstep);
                cft_array *x2[2] = {x[0], cft_mul_s(x[1], -0.7)}, *a2[1];
                CHECK_EQ(cft_fn_call(cstep, x2, a2), CFT_OK);
                double mx2 = cft_item(cft_max(cft_abs(a2[0]), NULL, 0, false));
                for (int call = 0; call < 2; call++) {
                    CHECK_EQ(cft_fn_call(j, call ? x2 : x, b), CFT_OK);
                    CHECK_ARRAY_CLOSE(b[0], call ? a2[0] : a[0], tol[k],
                                      tol[k] * (call ? mx2 : mx));
                }
            }
        unsetenv("CFT_DP_CONV");
    }
    TEST("the cost model: ghost norms for few positions and many channels, else as it was") {
        /* 2x2 output positions, 64 -> 64 channels: ghost; the benchmark's
         * 6x6 positions of 1 -> 8 channels: unchanged */
        static conv_cfg deep = {64, 64, 4, 16, 1, 0}, shallow = {8, 1, 8, 64, 1, 0};
        for (int k = 0; k < 2; k++) {
            const conv_cfg *c = k ? &shallow : &deep;
            cft_fn *cpsg = cft_vmap(cft_grad(cft_fn_new(conv_loss, (void *)c, 2, 1), (int[]){0}, 1),
                                    (int[]){CFT_NOT_BATCHED, 0}, NULL);
            cft_aval av[2] = {{CFT_F32, 4, {c->co, c->ci, 3, 3}},
                              {CFT_F32, 4, {c->b, c->ci, c->hw, c->hw}}};
            cft_ir *ir = cft_ir_dce(cft_make_ir(cft_fn_new(conv_step, cpsg, 2, 1), av));
            cft_ir *rw = cft_ir_rewrite(ir);
            CHECK(ir && rw && (k ? rw == ir : rw != ir));
        }
    }
    TEST("bad arguments to cft_dp_clipped_grad_sum") {
        cft_fn *l = cft_fn_new(loss, NULL, 6, 1);
        cft_fn *f = cft_dp_clipped_grad_sum(l, 6, 1.0);
        CHECK(cft_fn_failed(f) && strstr(cft_fn_error_message(f), "nparams = 6"));
        f = cft_dp_clipped_grad_sum(l, 4, -1);
        CHECK(cft_fn_failed(f) && strstr(cft_fn_error_message(f), "-1"));
        f = cft_dp_clipped_grad_sum(NULL, 4, 1);
        CHECK(cft_fn_failed(f) && strstr(cft_fn_error_message(f), "cft_dp_clipped_grad_sum"));
        cft_array *o[4];
        CHECK(cft_fn_call(cft_dp_clipped_grad_sum(l, 0, 1), in, o) != CFT_OK);
    }
    return check_summary();
}
