/* test_quant.c: quantization (cft/quant.h). cft_fake_quantize against a
 * scalar reference (half-to-even rounding, clamping, per channel), its
 * straight-through derivative, vmap and jit; cft_quant_qparams against
 * torch's formulas worked by hand; the PTQ pipeline (prepare, calibrate,
 * convert) on an MLP, within a stated distance of f32, with operands on the
 * int8 grid; QAT under grad, jit (twice, against eager) and vmap (an
 * ensemble against a loop, sharing observers; an ensemble record, each
 * member its own, vmapped against a loop); export of a converted program; observers from
 * several threads; bad quantizers and an uncalibrated convert.
 *
 * Tolerances: fake quantization computes in the operand's dtype, so f64
 * values match the reference to 1e-12 relative. An int8 MLP's logits
 * differ from f32's by a few quantization steps per layer: the test asks
 * for a relative distance below 5% (measured: about 1%), and the same
 * argmax on at least 95% of the rows. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static double ref_fq(double x, double s, double z, double lo, double hi) {
    double q = nearbyint(x / s) + z;
    q = q < lo ? lo : q > hi ? hi : q;
    return (q - z) * s;
}

static cft_status fq_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_fake_quantize(in[0], in[1], in[2], 1, -8, 7);
    return CFT_OK;
}

/* logits of a 16-32-32-10 MLP: (w1, b1, w2, b2, w3, b3, x) */
static cft_status mlp(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = in[6];
    for (int l = 0; l < 3; l++) {
        h = cft_add(cft_matmul(h, in[2 * l]), in[2 * l + 1]);
        if (l < 2)
            h = cft_relu(h);
    }
    out[0] = h;
    return CFT_OK;
}

static cft_status mlp_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *lg;
    cft_status s = cft_fn_call(env, in, &lg);
    out[0] = cft_mean(cft_cross_entropy(lg, in[7]), NULL, 0, false);
    return s;
}

/* an ensemble's loss: (member, w1, b1, w2, b2, w3, b3, x, labels) through
 * the record's QAT function (env) */
static cft_status ens_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *lg;
    cft_status s = cft_fn_call(env, in, &lg);
    out[0] = cft_mean(cft_cross_entropy(lg, in[8]), NULL, 0, false);
    return s;
}

/* one linear layer: x @ w, (w [K, N], x [M, K]) */
static cft_status lin(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_matmul(in[1], in[0]);
    return CFT_OK;
}
static cft_status lin_sum(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_sum(cft_fn_call1(env, in), NULL, 0, false);
    return CFT_OK;
}

static int count_prim(const cft_ir *ir, const char *name) {
    int n = 0;
    for (int i = 0; i < cft_ir_num_eqns(ir); i++)
        n += !strcmp(cft_ir_eqn_prim(ir, i), name);
    return n;
}

/* the fake-quantized product of a converted layer: site 0 (x, per
 * tensor) and site 1 (w, per channel along N) as frozen */
static cft_array *fq_product(cft_quant *q, cft_array *w, cft_array *x, int64_t xhi) {
    cft_array *s0, *z0, *s1, *z1;
    cft_quant_site(q, 0, &s0, &z0, NULL, NULL);
    cft_quant_site(q, 1, &s1, &z1, NULL, NULL);
    return cft_matmul(cft_fake_quantize(x, s0, z0, 0, 0, xhi),
                      cft_fake_quantize(w, s1, z1, 1, -128, 127));
}

/* one convolution layer: conv(x, w), stride 1, padding 1 (w [O, C, 3, 3]) */
static cft_status conv_layer(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_conv2d(in[1], in[0], NULL, (int64_t[]){1, 1}, NULL, 1);
    return CFT_OK;
}

/* (w1 [4, 2, 3, 3], w2 [5, 4, 3, 3], w3 [180, 7], x [N, 2, 6, 6]) -> logits:
 * conv (padding 1), ReLU, conv (padding 1), ReLU, flatten, linear */
static cft_status cnn2(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_relu(cft_conv2d(in[3], in[0], NULL, (int64_t[]){1, 1}, NULL, 1));
    h = cft_relu(cft_conv2d(h, in[1], NULL, (int64_t[]){1, 1}, NULL, 1));
    out[0] = cft_matmul(cft_reshape(h, (int64_t[]){-1, 180}, 2), in[2]);
    return CFT_OK;
}

/* sum of the fake-quantized convolution (env: the record) */
static cft_status conv_ref_sum(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)nin, (void)nout;
    cft_array *s0, *z0, *s1, *z1;
    cft_quant_site(env, 0, &s0, &z0, NULL, NULL);
    cft_quant_site(env, 1, &s1, &z1, NULL, NULL);
    out[0] = cft_sum(cft_conv2d(cft_fake_quantize(in[1], s0, z0, 0, 0, 255),
                                cft_fake_quantize(in[0], s1, z1, 0, -128, 127), NULL,
                                (int64_t[]){1, 1}, NULL, 1),
                     NULL, 0, false);
    return CFT_OK;
}

static cft_array *P[8];
static void make(void) {
    const int64_t sz[4] = {16, 32, 32, 10};
    for (int l = 0; l < 3; l++) {
        P[2 * l] = cft_mul_s(
            cft_random_normal(cft_random_key(10 + l), CFT_F32, (int64_t[]){sz[l], sz[l + 1]}, 2),
            1 / sqrt((double)sz[l]));
        P[2 * l + 1] =
            cft_mul_s(cft_random_normal(cft_random_key(20 + l), CFT_F32, &sz[l + 1], 1), 0.1);
    }
    P[6] = cft_random_normal(cft_random_key(30), CFT_F32, (int64_t[]){64, 16}, 2);
    P[7] = cft_random_randint(cft_random_key(31), (int64_t[]){64}, 1, 0, 10, CFT_I32);
}

static double rel(cft_array *a, cft_array *b) {
    cft_array *d = cft_sub(cft_astype(a, CFT_F64), cft_astype(b, CFT_F64));
    double n = cft_item(cft_sqrt(cft_sum(cft_square(d), NULL, 0, false)));
    return n / cft_item(cft_sqrt(cft_sum(cft_square(cft_astype(b, CFT_F64)), NULL, 0, false)));
}

typedef struct {
    cft_fn *f;
    int bad;
} targ;
static void *observe_many(void *p) {
    targ *a = p;
    for (int i = 0; i < 10; i++)
        if (cft_failed(cft_fn_call1(a->f, P)))
            a->bad++;
    return NULL;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    make();

    TEST("fake_quantize per channel equals the reference; ties round to even") {
        double xs[3][4] = {{0.25, -0.75, 3.9, 100}, {1.5, 2.5, -2.5, -100}, {0.05, 0.15, 0.2, 0.3}};
        double sc[4] = {0.5, 1, 1, 0.1}, zp[4] = {0, 1, -1, 0};
        cft_array *x = cft_from_data(xs, CFT_F64, (int64_t[]){3, 4}, 2);
        cft_array *s = cft_from_data(sc, CFT_F64, (int64_t[]){4}, 1);
        cft_array *z = cft_from_data(zp, CFT_F64, (int64_t[]){4}, 1);
        cft_array *y = cft_fake_quantize(x, s, z, 1, -8, 7);
        double want[12];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                want[i * 4 + j] = ref_fq(xs[i][j], sc[j], zp[j], -8, 7);
        CHECK_ARRAY_CLOSE(y, cft_from_data(want, CFT_F64, (int64_t[]){3, 4}, 2), 1e-12, 0);
        CHECK_CLOSE(want[5], 2, 0, 0);  /* 2.5 rounds to 2 (even), plus zp 1, minus 1 */
        CHECK_CLOSE(want[6], -2, 0, 0); /* -2.5 to -2, zp -1 */
        /* per tensor */
        cft_array *t =
            cft_fake_quantize(x, cft_scalar(0.5, CFT_F64), cft_scalar(3, CFT_F64), 0, 0, 15);
        CHECK_CLOSE(cft_item_at(t, 2), ref_fq(3.9, 0.5, 3, 0, 15), 0, 0);
    }

    TEST("fake_quantize's derivative is the straight-through estimator") {
        double xs[4] = {0.3, -3.0, 2.9, 10.0}; /* scale 0.5, range [-8, 7]: 10 and -3 ... */
        cft_array *x = cft_from_data(xs, CFT_F64, (int64_t[]){1, 4}, 2);
        cft_fn *f = cft_fn_new(fq_fn, NULL, 3, 1);
        cft_array *in[3] = {x, cft_full(0.5, CFT_F64, (int64_t[]){4}, 1),
                            cft_zeros(CFT_F64, (int64_t[]){4}, 1)};
        cft_array *tan[3] = {cft_ones_like(x), cft_zeros_like(in[1]), cft_zeros_like(in[2])}, *o[2];
        CHECK(cft_fn_call(cft_jvp(f), (cft_array *[]){in[0], in[1], in[2], tan[0], tan[1], tan[2]},
                          o) == CFT_OK);
        double want[4] = {1, 1, 1, 0}; /* -3/0.5 = -6 inside; 10/0.5 = 20 outside */
        CHECK_ARRAY_CLOSE(o[1], cft_from_data(want, CFT_F64, (int64_t[]){1, 4}, 2), 0, 0);
        cft_fn *j = cft_jit(f);
        for (int r = 0; r < 2; r++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, in), cft_fn_call1(f, in), 0, 0);
        cft_array *xb = cft_random_normal(cft_random_key(1), CFT_F64, (int64_t[]){5, 2, 4}, 3);
        cft_fn *v = cft_vmap_n(f, (int[]){0, CFT_NOT_BATCHED, CFT_NOT_BATCHED}, 3, NULL, 0);
        cft_array *yb = cft_fn_call1(v, (cft_array *[]){xb, in[1], in[2]});
        for (int b = 0; b < 5; b++)
            CHECK_ARRAY_CLOSE(cft_index(yb, b),
                              cft_fn_call1(f, (cft_array *[]){cft_index(xb, b), in[1], in[2]}), 0,
                              0);
        cft_array *e = cft_fake_quantize(x, in[1], in[2], 1, 5, 4);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_fake_quantize") != NULL);
    }

    TEST("qparams follow torch's formulas") {
        cft_quantizer qz = cft_quantizer_x86();
        cft_array *s, *z;
        int64_t lo, hi;
        CHECK(cft_quant_qparams(cft_scalar(-1, CFT_F32), cft_scalar(3, CFT_F32), &qz.activation, &s,
                                &z, &lo, &hi) == CFT_OK);
        CHECK(lo == 0 && hi == 255);
        CHECK_CLOSE(cft_item(s), 4.0 / 255, 1e-6, 0);
        CHECK_CLOSE(cft_item(z), 64, 0, 0); /* 0 - round(-1 / (4/255)) = round(63.75) */
        float mn[2] = {-1, 0.5f}, mx[2] = {3, 2};
        CHECK(cft_quant_qparams(cft_from_data(mn, CFT_F32, (int64_t[]){2}, 1),
                                cft_from_data(mx, CFT_F32, (int64_t[]){2}, 1), &qz.weight, &s, &z,
                                &lo, &hi) == CFT_OK);
        CHECK(lo == -128 && hi == 127);
        CHECK_CLOSE(cft_item_at(s, 0), 3 / 127.5, 1e-6, 0);
        CHECK_CLOSE(cft_item_at(s, 1), 2 / 127.5, 1e-6, 0);
        CHECK_CLOSE(cft_item_at(z, 1), 0, 0, 0);
        CHECK(cft_quant_qparams(cft_scalar(0, CFT_F32), cft_scalar(0, CFT_F32), &qz.activation, &s,
                                &z, NULL, NULL) == CFT_OK);
        CHECK(cft_item(s) > 0); /* never 0 */
    }

    TEST("min-max observers see each channel's range: a weight along its last dim, a "
         "convolution's along its first, an activation per tensor") {
        cft_quantizer qz = cft_quantizer_x86();
        qz.activation.observer = CFT_OBS_MINMAX;
        cft_array *w = cft_random_normal(cft_random_key(70), CFT_F32, (int64_t[]){37, 19}, 2);
        cft_array *x = cft_random_normal(cft_random_key(71), CFT_F32, (int64_t[]){5, 37}, 2);
        cft_array *wc = cft_random_normal(cft_random_key(72), CFT_F32, (int64_t[]){6, 3, 3, 3}, 4);
        cft_array *xc = cft_random_normal(cft_random_key(73), CFT_F32, (int64_t[]){2, 3, 5, 5}, 4);
        struct {
            cft_fn *f;
            cft_array *w, *x;
            int axis;
        } cases[2] = {{cft_fn_new(lin, NULL, 2, 1), w, x, 1},
                      {cft_fn_new(conv_layer, NULL, 2, 1), wc, xc, 0}};
        for (int c = 0; c < 2; c++) {
            cft_quant *q = cft_quant_prepare(cases[c].f, &qz);
            cft_array *half = cft_mul_s(cases[c].x, 0.5); /* a second call widens nothing */
            cft_fn_call1(cft_quant_observer_fn(q), (cft_array *[]){cases[c].w, half});
            cft_fn_call1(cft_quant_observer_fn(q), (cft_array *[]){cases[c].w, cases[c].x});
            /* site 0 is the activation, site 1 the weight */
            cft_array *s, *z, *ws, *wz, *rs, *rz;
            CHECK(cft_quant_site(q, 0, &s, &z, NULL, NULL) == CFT_OK);
            CHECK(cft_quant_site(q, 1, &ws, &wz, NULL, NULL) == CFT_OK);
            CHECK(cft_quant_qparams(cft_min(cases[c].x, NULL, 0, false),
                                    cft_max(cases[c].x, NULL, 0, false), &qz.activation, &rs, &rz,
                                    NULL, NULL) == CFT_OK);
            CHECK_ARRAY_CLOSE(s, rs, 1e-7, 0);
            CHECK_ARRAY_CLOSE(z, rz, 0, 0);
            int nd = cft_array_ndim(cases[c].w), red[4], nr = 0;
            for (int d = 0; d < nd; d++)
                if (d != cases[c].axis)
                    red[nr++] = d;
            CHECK(cft_quant_qparams(cft_min(cases[c].w, red, nr, false),
                                    cft_max(cases[c].w, red, nr, false), &qz.weight, &rs, &rz, NULL,
                                    NULL) == CFT_OK);
            CHECK_ARRAY_CLOSE(ws, rs, 1e-7, 0);
        }
    }

    cft_fn *logits = cft_fn_new(mlp, NULL, 7, 1);
    cft_array *ref = cft_fn_call1(logits, P);

    TEST("PTQ: calibrate, convert; int8 logits near f32's") {
        cft_quantizer qz = cft_quantizer_x86();
        cft_quant *q = cft_quant_prepare(logits, &qz);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_quant_observer_fn(q), P), ref, 0,
                          0); /* observing changes nothing */
        CHECK_EQ(cft_quant_num_sites(q), 6);
        cft_fn *c = cft_quant_convert(q);
        cft_array *y = cft_fn_call1(c, P);
        double e = rel(y, ref);
        CHECK_MSG(e < 0.05 && e > 0, "relative distance %g", e);
        double agree = cft_item(cft_mean(
            cft_astype(cft_eq(cft_argmax(y, -1, false), cft_argmax(ref, -1, false)), CFT_F32), NULL,
            0, false));
        CHECK_MSG(agree >= 0.95, "argmax agreement %g", agree);
        /* a weight site: per channel, its operand on the int8 grid */
        cft_array *s, *z;
        const char *prim;
        bool w;
        CHECK(cft_quant_site(q, 1, &s, &z, &prim, &w) == CFT_OK);
        CHECK(w && !strcmp(prim, "dot_general") && cft_array_ndim(s) == 1 &&
              cft_array_shape(s)[0] == 32);
        cft_array *wq = cft_div(cft_fake_quantize(P[0], s, z, 1, -128, 127),
                                cft_reshape(s, (int64_t[]){1, 32}, 2));
        CHECK_ARRAY_CLOSE(wq, cft_round(wq), 0, 1e-4);
        /* the converted program exports and loads */
        char path[64];
        snprintf(path, sizeof path, "/tmp/cft_quant_%d.cftx", (int)getpid());
        cft_aval av[7];
        for (int i = 0; i < 7; i++)
            av[i] = cft_array_aval(P[i]);
        CHECK(cft_export(c, av, path) == CFT_OK);
        cft_fn *back = cft_load_exported(path);
        CHECK_ARRAY_CLOSE(cft_fn_call1(back, P), y, 0, 0);
        unlink(path);
    }

    TEST("observers record in staged and jitted calls, and in a jitted QAT step") {
        cft_quantizer qz = cft_quantizer_x86();
        qz.activation.observer = CFT_OBS_MINMAX;
        cft_quant *a = cft_quant_prepare(logits, &qz), *b = cft_quant_prepare(logits, &qz);
        cft_fn *ja = cft_jit(cft_quant_observer_fn(a));
        for (int r = 0; r < 2; r++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(ja, P), ref, 1e-5, 1e-6);
        CHECK_EQ(cft_quant_num_sites(a), 6);
        cft_fn_call1(cft_quant_observer_fn(b), P); /* staged: traced once, replayed */
        cft_fn_call1(cft_quant_observer_fn(b), P);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_quant_convert(a), P),
                          cft_fn_call1(cft_quant_convert(b), P), 0, 0);
        /* the ranges grow when a jitted QAT step sees larger inputs */
        cft_array *s0, *z0, *s1, *z1;
        CHECK(cft_quant_site(a, 0, &s0, &z0, NULL, NULL) == CFT_OK);
        cft_array *big[7];
        memcpy(big, P, sizeof big);
        big[6] = cft_mul_s(P[6], 3);
        cft_fn *jq = cft_jit(cft_quant_qat_fn(a));
        cft_fn_call1(jq, big);
        CHECK(cft_quant_site(a, 0, &s1, &z1, NULL, NULL) == CFT_OK);
        CHECK(cft_item(s1) > 2.5 * cft_item(s0));
    }

    TEST("convert before calibration fails naming the site") {
        cft_quantizer qz = cft_quantizer_x86();
        cft_quant *q = cft_quant_prepare(logits, &qz);
        cft_array *y = cft_fn_call1(cft_quant_convert(q), P);
        CHECK(cft_failed(y) && strstr(cft_error_message(y), "never observed") != NULL);
    }

    TEST(
        "QAT: grad works, jit matches eager twice, the jitted ensemble under vmap matches a loop") {
        cft_quantizer qz = cft_quantizer_x86();
        qz.activation.observer = CFT_OBS_MINMAX; /* ranges that do not move on the same data */
        cft_quant *q = cft_quant_prepare(logits, &qz);
        /* prime the observers on every member's weights */
        cft_array *W =
            cft_stack((cft_array *[]){P[2], cft_mul_s(P[2], 0.9), cft_mul_s(P[2], 1.1)}, 3, 0);
        cft_array *in[7];
        memcpy(in, P, sizeof in);
        for (int m = 0; m < 3; m++) {
            in[2] = cft_index(W, m);
            cft_fn_call1(cft_quant_observer_fn(q), in);
        }
        cft_fn *qat = cft_quant_qat_fn(q);
        cft_fn *loss = cft_fn_new(mlp_loss, qat, 8, 1);
        const int argn[6] = {0, 1, 2, 3, 4, 5};
        cft_fn *g = cft_grad(loss, argn, 6), *jg = cft_jit(g);
        cft_array *ge[6], *gj[6];
        CHECK(cft_fn_call(g, P, ge) == CFT_OK);
        for (int r = 0; r < 2; r++) {
            CHECK(cft_fn_call(jg, P, gj) == CFT_OK);
            for (int i = 0; i < 6; i++)
                CHECK_ARRAY_CLOSE(gj[i], ge[i], 1e-5, 1e-6);
        }
        cft_array *gf[6];
        cft_fn_call(cft_grad(cft_fn_new(mlp_loss, logits, 8, 1), argn, 6), P, gf);
        CHECK(rel(ge[0], gf[0]) < 0.2); /* the STE gradient is near the f32 one */
        int axes[7] = {CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, CFT_NOT_BATCHED, CFT_NOT_BATCHED,
                       CFT_NOT_BATCHED, CFT_NOT_BATCHED};
        /* jitted, the observers are read once (eager QAT calls would move
         * minmax ranges as the fake-quantized activations change) */
        cft_fn *v = cft_jit(cft_vmap_n(qat, axes, 7, NULL, 0)), *one = cft_jit(qat);
        memcpy(in, P, sizeof in);
        in[2] = W;
        cft_array *yv = cft_fn_call1(v, in);
        for (int m = 0; m < 3; m++) {
            in[2] = cft_index(W, m);
            CHECK_ARRAY_CLOSE(cft_index(yv, m), cft_fn_call1(one, in), 1e-5, 1e-6);
        }
    }

    TEST("an ensemble record: QAT vmapped over the members keeps each member's observers, as a "
         "loop over members does; jit twice, grad, inner vmap over samples, convert_member, bad "
         "indices") {
        cft_quantizer qz = cft_quantizer_x86();
        qz.activation.observer = CFT_OBS_MINMAX;
        cft_quant *a = cft_quant_prepare_ensemble(logits, &qz, 3);
        cft_quant *b = cft_quant_prepare_ensemble(logits, &qz, 3);
        /* member m's weights are P's times 0.5, 1, 2: exact in f32, so its
         * weight scales are exactly the factor times member 1's */
        const double f[3] = {0.5, 1, 2};
        cft_array *S[6], *in[8], *one[8];
        for (int i = 0; i < 6; i++)
            S[i] = cft_stack((cft_array *[]){cft_mul_s(P[i], f[0]), cft_mul_s(P[i], f[1]),
                                             cft_mul_s(P[i], f[2])},
                             3, 0);
        in[0] = cft_arange(0, 3, 1, CFT_I32);
        memcpy(in + 1, S, sizeof S);
        in[7] = P[6];
        int axes[9] = {0, 0, 0, 0, 0, 0, 0, CFT_NOT_BATCHED, CFT_NOT_BATCHED};
        cft_fn *vobs = cft_vmap_n(cft_quant_observer_fn(a), axes, 8, NULL, 0);
        cft_fn *vqat = cft_vmap_n(cft_quant_qat_fn(a), axes, 8, NULL, 0);
        for (int i = 0; i < 6; i++)
            one[i] = cft_index(S[i], 2);
        one[6] = P[6];
        CHECK_ARRAY_CLOSE(cft_index(cft_fn_call1(vobs, in), 2), cft_fn_call1(logits, one), 1e-5,
                          1e-5);
        cft_array *yv = cft_fn_call1(vqat, in); /* eager: each member's observers move */
        CHECK(!cft_failed(yv));
        one[7] = P[6];
        for (int m = 0; m < 3; m++) {
            one[0] = cft_scalar(m, CFT_I32);
            for (int i = 0; i < 6; i++)
                one[i + 1] = cft_index(S[i], m);
            cft_fn_call1(cft_quant_observer_fn(b), one);
        }
        for (int m = 0; m < 3; m++) {
            one[0] = cft_scalar(m, CFT_I32);
            for (int i = 0; i < 6; i++)
                one[i + 1] = cft_index(S[i], m);
            CHECK_ARRAY_CLOSE(cft_index(yv, m), cft_fn_call1(cft_quant_qat_fn(b), one), 1e-4, 1e-4);
        }
        CHECK_EQ(cft_quant_num_sites(a), 6);
        for (int k = 0; k < 6; k++)
            for (int m = 0; m < 3; m++) {
                cft_array *sa, *za, *sb, *zb, *s1, *z1;
                CHECK(cft_quant_site_member(a, k, m, &sa, &za) == CFT_OK);
                CHECK(cft_quant_site_member(b, k, m, &sb, &zb) == CFT_OK);
                CHECK_ARRAY_CLOSE(sa, sb, 1e-5, 0);
                CHECK_ARRAY_CLOSE(za, zb, 0, 1);
                CHECK(cft_quant_site_member(a, k, 1, &s1, &z1) == CFT_OK);
                if (k % 2) /* weights: the member's own range, exactly */
                    CHECK_ARRAY_CLOSE(sa, cft_mul_s(s1, f[m]), 1e-7, 0);
            }
        /* jitted twice, against eager on ranges that no longer move */
        cft_array *ye = cft_fn_call1(vqat, in);
        cft_fn *jv = cft_jit(vqat);
        for (int r = 0; r < 2; r++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(jv, in), ye, 1e-5, 1e-5);
        /* grad of each member's loss, vmapped over the members, against the
         * loop; and per-sample gradients inside each member (a vmap over
         * samples nested in the vmap over members) */
        cft_fn *loss_a = cft_fn_new(ens_loss, cft_quant_qat_fn(a), 9, 1);
        cft_fn *loss_b = cft_fn_new(ens_loss, cft_quant_qat_fn(b), 9, 1);
        cft_array *gin[9];
        memcpy(gin, in, sizeof in);
        gin[8] = P[7];
        cft_array *gv =
            cft_fn_call1(cft_vmap_n(cft_grad(loss_a, (int[]){1}, 1), axes, 9, NULL, 0), gin);
        one[7] = P[6];
        cft_array *oneg[9];
        for (int m = 0; m < 3; m++) {
            memcpy(oneg, one, sizeof one);
            oneg[0] = cft_scalar(m, CFT_I32);
            for (int i = 0; i < 6; i++)
                oneg[i + 1] = cft_index(S[i], m);
            oneg[8] = P[7];
            CHECK_ARRAY_CLOSE(cft_index(gv, m), cft_fn_call1(cft_grad(loss_b, (int[]){1}, 1), oneg),
                              1e-4, 1e-5);
        }
        int sax[9]; /* samples: x and the labels */
        for (int i = 0; i < 9; i++)
            sax[i] = i < 7 ? CFT_NOT_BATCHED : 0;
        cft_fn *ps = cft_vmap_n(cft_grad(loss_a, (int[]){1}, 1), sax, 9, NULL, 0);
        cft_array *gps = cft_fn_call1(cft_vmap_n(ps, axes, 9, NULL, 0), gin);
        CHECK_EQ(cft_array_ndim(gps), 4); /* [members, samples, 16, 32] */
        CHECK_ARRAY_CLOSE(cft_mean(gps, (int[]){1}, 1, false), gv, 1e-4, 1e-5);
        /* member m converted: its int8 logits near its QAT logits */
        for (int m = 0; m < 3; m++) {
            for (int i = 0; i < 6; i++)
                one[i] = cft_index(S[i], m);
            one[6] = P[6];
            CHECK(rel(cft_fn_call1(cft_quant_convert_member(a, m), one), cft_index(ye, m)) < 0.01);
        }
        /* bad indices and calls */
        cft_array *bad[8];
        memcpy(bad, in, sizeof bad);
        bad[0] = cft_arange(1, 4, 1, CFT_I32);
        cft_array *y = cft_fn_call1(vqat, bad);
        CHECK(cft_failed(y) && strstr(cft_error_message(y), "outside [0, 3)") != NULL);
        memcpy(bad, one, sizeof one);
        memmove(bad + 1, bad, 7 * sizeof *bad);
        bad[0] = cft_scalar(1, CFT_F32);
        y = cft_fn_call1(cft_quant_qat_fn(a), bad);
        CHECK(cft_failed(y) && strstr(cft_error_message(y), "member index") != NULL);
        y = cft_fn_call1(cft_quant_convert(a), one);
        CHECK(cft_failed(y) && strstr(cft_error_message(y), "cft_quant_convert_member") != NULL);
        y = cft_fn_call1(cft_quant_convert_member(a, 3), one);
        CHECK(cft_failed(y) && strstr(cft_error_message(y), "member 3 of") != NULL);
        y = cft_fn_call1(cft_quant_qat_fn(cft_quant_prepare_ensemble(logits, &qz, 0)), in);
        CHECK(cft_failed(y) && strstr(cft_error_message(y), "0 members") != NULL);
        cft_array *s0, *z0;
        CHECK(cft_quant_site_member(a, 0, 7, &s0, &z0) == CFT_E_ARG);
        CHECK(strstr(cft_last_error_message(), "cft_quant_site_member") != NULL);
    }

    TEST("observers paused keep their ranges in observer, QAT and jitted QAT calls; resumed, "
         "they widen") {
        cft_quantizer qz = cft_quantizer_x86();
        qz.activation.observer = CFT_OBS_MINMAX;
        cft_quant *q = cft_quant_prepare(logits, &qz);
        cft_fn_call1(cft_quant_observer_fn(q), P);
        cft_array *s0, *z0, *s1, *z1;
        CHECK(cft_quant_site(q, 0, &s0, &z0, NULL, NULL) == CFT_OK);
        cft_array *in[7];
        memcpy(in, P, sizeof in);
        in[6] = cft_mul_s(P[6], 3); /* a wider input */
        CHECK(cft_quant_set_observing(q, false) == CFT_OK);
        cft_fn *jq = cft_jit(cft_quant_qat_fn(q));
        cft_fn_call1(cft_quant_observer_fn(q), in);
        cft_fn_call1(cft_quant_qat_fn(q), in);
        for (int r = 0; r < 2; r++)
            cft_fn_call1(jq, in);
        CHECK(cft_quant_site(q, 0, &s1, &z1, NULL, NULL) == CFT_OK);
        CHECK_ARRAY_CLOSE(s1, s0, 0, 0);
        CHECK_ARRAY_CLOSE(z1, z0, 0, 0);
        CHECK(cft_quant_set_observing(q, true) == CFT_OK);
        cft_fn_call1(jq, in);
        CHECK(cft_quant_site(q, 0, &s1, &z1, NULL, NULL) == CFT_OK);
        CHECK(cft_item(s1) > 2 * cft_item(s0));
        CHECK(cft_quant_set_observing(NULL, false) == CFT_E_ARG);
        CHECK(strstr(cft_last_error_message(), "cft_quant_set_observing") != NULL);
    }

    TEST("observers from 4 threads") {
        cft_quantizer qz = cft_quantizer_x86();
        qz.activation.observer = CFT_OBS_PERCENTILE;
        cft_quant *q = cft_quant_prepare(logits, &qz);
        pthread_t th[4];
        targ a[4];
        for (int i = 0; i < 4; i++) {
            a[i] = (targ){cft_quant_observer_fn(q), 0};
            pthread_create(&th[i], NULL, observe_many, &a[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            CHECK_EQ(a[i].bad, 0);
        }
        CHECK_EQ(cft_quant_num_sites(q), 6);
        CHECK(rel(cft_fn_call1(cft_quant_convert(q), P), ref) < 0.05);
    }

    TEST("dynamic quantization: int8 products near f32, jit twice, vmap, grad, export") {
        cft_fn *dq = cft_quant_dynamic(logits);
        cft_array *y = cft_fn_call1(dq, P);
        double e = rel(y, ref);
        CHECK_MSG(e < 0.05 && e > 0, "relative distance %g", e);
        cft_ir *ir = cft_make_ir(dq, (cft_aval[]){cft_array_aval(P[0]), cft_array_aval(P[1]),
                                                  cft_array_aval(P[2]), cft_array_aval(P[3]),
                                                  cft_array_aval(P[4]), cft_array_aval(P[5]),
                                                  cft_array_aval(P[6])});
        CHECK(ir && strstr(cft_ir_str(ir), "dot_qlinear") &&
              !strstr(cft_ir_str(ir), "dot_general"));
        cft_fn *j = cft_jit(dq);
        for (int r = 0; r < 2; r++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, P), y, 1e-6, 1e-6);
        /* rows are quantized one by one: a batch of inputs equals the loop */
        cft_array *xs = cft_random_normal(cft_random_key(40), CFT_F32, (int64_t[]){3, 64, 16}, 3);
        int axes[7] = {CFT_NOT_BATCHED,
                       CFT_NOT_BATCHED,
                       CFT_NOT_BATCHED,
                       CFT_NOT_BATCHED,
                       CFT_NOT_BATCHED,
                       CFT_NOT_BATCHED,
                       0};
        cft_array *in[7];
        memcpy(in, P, sizeof in);
        in[6] = xs;
        cft_array *yv = cft_fn_call1(cft_vmap_n(dq, axes, 7, NULL, 0), in);
        for (int b = 0; b < 3; b++) {
            in[6] = cft_index(xs, b);
            CHECK_ARRAY_CLOSE(cft_index(yv, b), cft_fn_call1(dq, in), 0, 0);
        }
        /* the straight-through gradient (with respect to x) is near f32's */
        const int argn[1] = {6};
        cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(mlp_loss, dq, 8, 1), argn, 1), P);
        cft_array *gf = cft_fn_call1(cft_grad(cft_fn_new(mlp_loss, logits, 8, 1), argn, 1), P);
        CHECK_MSG(rel(g, gf) < 0.2, "relative distance %g", rel(g, gf)); /* measured 0.11 */
        char path[64];
        snprintf(path, sizeof path, "/tmp/cft_qdyn_%d.cftx", (int)getpid());
        cft_aval av[7];
        for (int i = 0; i < 7; i++)
            av[i] = cft_array_aval(P[i]);
        CHECK(cft_export(dq, av, path) == CFT_OK);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_load_exported(path), P), y, 0, 0);
        unlink(path);
        /* bad inputs */
        cft_qlinear q = cft_qlinear_pack(cft_mT(P[0]));
        cft_array *bad = cft_qlinear_apply(cft_ones(CFT_F32, (int64_t[]){2, 15}, 2), q);
        CHECK(cft_failed(bad) && strstr(cft_error_message(bad), "cft_qlinear_apply") != NULL);
        cft_qlinear b1 = cft_qlinear_pack(cft_ones(CFT_F32, (int64_t[]){4}, 1));
        CHECK(cft_failed(b1.w) && cft_failed(b1.scale));
        CHECK(cft_fn_failed(cft_quant_dynamic(NULL)));
    }

    for (int bits = 8; bits >= 7; bits--)
        TEST("static int8 (%d-bit activations): dot_qstatic on integers, the fake-quantized "
             "product to f32 rounding; jit, vmap, grad",
             bits) {
            cft_array *w = cft_mul_s(
                cft_random_normal(cft_random_key(40), CFT_F32, (int64_t[]){64, 24}, 2), 0.2);
            cft_array *x = cft_random_normal(cft_random_key(41), CFT_F32, (int64_t[]){37, 64}, 2);
            cft_quantizer qz = cft_quantizer_x86();
            qz.activation.bits = bits;
            qz.activation.observer = CFT_OBS_MINMAX;
            cft_fn *f = cft_fn_new(lin, NULL, 2, 1);
            cft_quant *q = cft_quant_prepare(f, &qz);
            cft_fn_call1(cft_quant_observer_fn(q), (cft_array *[]){w, x});
            cft_fn *c = cft_quant_convert(q);
            cft_aval av[2] = {cft_array_aval(w), cft_array_aval(x)};
            cft_ir *ir = cft_make_ir(c, av);
            CHECK_EQ(count_prim(ir, "dot_qstatic"), 1);
            CHECK_EQ(count_prim(ir, "dot_general"), 0);
            int64_t xhi = (INT64_C(1) << bits) - 1;
            cft_array *y = cft_fn_call1(c, (cft_array *[]){w, x}), *ref = fq_product(q, w, x, xhi);
            /* integers exact; the reference's f32 GEMM rounds (K = 64) */
            CHECK_ARRAY_CLOSE(y, ref, 1e-5, 1e-5);
            CHECK(rel(y, cft_matmul(x, w)) < 0.05);
            cft_fn *j = cft_jit(c);
            for (int r = 0; r < 2; r++) /* the same kernels on the same integers */
                CHECK_ARRAY_CLOSE(cft_fn_call1(j, (cft_array *[]){w, x}), y, 0, 0);
            cft_array *x2 = cft_mul_s(x, 0.7); /* and on new inputs */
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, (cft_array *[]){w, x2}),
                              cft_fn_call1(c, (cft_array *[]){w, x2}), 0, 0);
            /* vmap over x: the batch joins the rows of one integer GEMM */
            cft_array *xb = cft_stack((cft_array *[]){x, cft_mul_s(x, 0.5), cft_neg(x)}, 3, 0);
            cft_fn *vx = cft_vmap_n(c, (int[]){CFT_NOT_BATCHED, 0}, 2, NULL, 0);
            cft_array *yv = cft_fn_call1(vx, (cft_array *[]){w, xb});
            for (int m = 0; m < 3; m++)
                CHECK_ARRAY_CLOSE(cft_index(yv, m),
                                  cft_fn_call1(c, (cft_array *[]){w, cft_index(xb, m)}), 0, 0);
            /* vmap over w (an ensemble): the fake-quantized arithmetic per member */
            cft_array *wb = cft_stack((cft_array *[]){w, cft_mul_s(w, 0.9)}, 2, 0);
            cft_fn *vw = cft_vmap_n(c, (int[]){0, CFT_NOT_BATCHED}, 2, NULL, 0);
            cft_array *yw = cft_fn_call1(vw, (cft_array *[]){wb, x});
            for (int m = 0; m < 2; m++)
                CHECK_ARRAY_CLOSE(cft_index(yw, m),
                                  cft_fn_call1(c, (cft_array *[]){cft_index(wb, m), x}), 1e-5,
                                  1e-5);
            /* grad w.r.t. x: the straight-through estimator, as fake quantization's */
            cft_fn *g = cft_grad(cft_fn_new(lin_sum, c, 2, 1), (int[]){1}, 1);
            cft_array *s0, *z0, *s1, *z1;
            cft_quant_site(q, 0, &s0, &z0, NULL, NULL);
            cft_quant_site(q, 1, &s1, &z1, NULL, NULL);
            cft_array *inside = cft_astype(
                cft_le(cft_add(cft_round(cft_div(x, s0)), z0), cft_scalar((double)xhi, CFT_F32)),
                CFT_F32);
            cft_array *gw = cft_sum(cft_fake_quantize(w, s1, z1, 1, -128, 127), (int[]){1}, 1,
                                    false); /* d sum(x W) / dx = row sums of W */
            cft_array *want = cft_mul(inside, cft_broadcast_to(gw, (int64_t[]){37, 64}, 2));
            CHECK_ARRAY_CLOSE(cft_fn_call1(g, (cft_array *[]){w, x}), want, 1e-5, 1e-5);
        }

    TEST("static int8 convolution: conv_qstatic on integers, the fake-quantized convolution to "
         "f32 rounding; jit, vmap, grad") {
        cft_array *w = cft_mul_s(
            cft_random_normal(cft_random_key(50), CFT_F32, (int64_t[]){6, 3, 3, 3}, 4), 0.3);
        cft_array *x = cft_random_normal(cft_random_key(51), CFT_F32, (int64_t[]){4, 3, 7, 6}, 4);
        cft_quantizer qz = cft_quantizer_x86();
        qz.activation.observer = CFT_OBS_MINMAX;
        cft_fn *f = cft_fn_new(conv_layer, NULL, 2, 1);
        cft_quant *q = cft_quant_prepare(f, &qz);
        cft_fn_call1(cft_quant_observer_fn(q), (cft_array *[]){w, x});
        cft_fn *c = cft_quant_convert(q);
        cft_aval av[2] = {cft_array_aval(w), cft_array_aval(x)};
        cft_ir *ir = cft_make_ir(c, av);
        CHECK_EQ(count_prim(ir, "conv_qstatic"), 1);
        CHECK_EQ(count_prim(ir, "conv_general_dilated"), 0);
        cft_array *s0, *z0, *s1, *z1;
        cft_quant_site(q, 0, &s0, &z0, NULL, NULL);
        cft_quant_site(q, 1, &s1, &z1, NULL, NULL);
        cft_array *ref = cft_conv2d(cft_fake_quantize(x, s0, z0, 0, 0, 255),
                                    cft_fake_quantize(w, s1, z1, 0, -128, 127), NULL,
                                    (int64_t[]){1, 1}, NULL, 1);
        cft_array *y = cft_fn_call1(c, (cft_array *[]){w, x});
        CHECK_ARRAY_CLOSE(y, ref, 1e-5, 1e-5); /* K = 27 */
        CHECK(rel(y, cft_fn_call1(f, (cft_array *[]){w, x})) < 0.05);
        cft_fn *j = cft_jit(c);
        for (int r = 0; r < 2; r++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, (cft_array *[]){w, x}), y, 0, 0);
        cft_array *x2 = cft_mul_s(x, -0.6); /* and on new inputs */
        CHECK_ARRAY_CLOSE(cft_fn_call1(j, (cft_array *[]){w, x2}),
                          cft_fn_call1(c, (cft_array *[]){w, x2}), 0, 0);
        cft_array *xb = cft_stack((cft_array *[]){x, cft_mul_s(x, 0.5)}, 2, 0);
        cft_array *yv = cft_fn_call1(cft_vmap_n(c, (int[]){CFT_NOT_BATCHED, 0}, 2, NULL, 0),
                                     (cft_array *[]){w, xb});
        for (int m = 0; m < 2; m++) /* the samples of both members in one call */
            CHECK_ARRAY_CLOSE(cft_index(yv, m),
                              cft_fn_call1(c, (cft_array *[]){w, cft_index(xb, m)}), 0, 0);
        cft_array *wb = cft_stack((cft_array *[]){w, cft_mul_s(w, 0.8)}, 2, 0);
        cft_array *yw = cft_fn_call1(cft_vmap_n(c, (int[]){0, CFT_NOT_BATCHED}, 2, NULL, 0),
                                     (cft_array *[]){wb, x});
        for (int m = 0; m < 2; m++)
            CHECK_ARRAY_CLOSE(cft_index(yw, m),
                              cft_fn_call1(c, (cft_array *[]){cft_index(wb, m), x}), 1e-5, 1e-5);
        /* grad w.r.t. x: fake quantization's straight-through estimator */
        cft_fn *g = cft_grad(cft_fn_new(lin_sum, c, 2, 1), (int[]){1}, 1);
        cft_fn *gr = cft_grad(cft_fn_new(conv_ref_sum, q, 2, 1), (int[]){1}, 1);
        CHECK_ARRAY_CLOSE(cft_fn_call1(g, (cft_array *[]){w, x}),
                          cft_fn_call1(gr, (cft_array *[]){w, x}), 1e-5, 1e-5);
    }

    TEST("static int8 MLP under the jit: each hidden layer's requantisation fused into its "
         "bias and ReLU kernel, dot_qint on the integers; the interpreter's bits, twice") {
        cft_quantizer qz = cft_quantizer_x86();
        cft_quant *q = cft_quant_prepare(logits, &qz);
        cft_fn_call1(cft_quant_observer_fn(q), P);
        cft_fn *c = cft_quant_convert(q);
        cft_aval av[7];
        for (int i = 0; i < 7; i++)
            av[i] = cft_array_aval(P[i]);
        cft_ir *ir = cft_make_ir(c, av);
        CHECK_EQ(count_prim(ir, "dot_qstatic"), 3);
        /* the jit's rewrite: layers 2 and 3 read what an elementwise kernel
         * wrote; layer 1 reads the input and keeps dot_qstatic */
        cft_ir *rw = cft_ir_rewrite(ir);
        CHECK_EQ(count_prim(rw, "dot_qstatic"), 1);
        CHECK_EQ(count_prim(rw, "dot_qint"), 2);
        CHECK_EQ(count_prim(rw, "rint"), 2);
        cft_array *y = cft_fn_call1(c, P);
        cft_fn *j = cft_jit(c);
        for (int r = 0; r < 2; r++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, P), y, 0, 0);
        cft_array *P2[7];
        memcpy(P2, P, sizeof P2);
        P2[6] = cft_mul_s(P[6], -1.3); /* new inputs: some rows clamp */
        CHECK_ARRAY_CLOSE(cft_fn_call1(j, P2), cft_fn_call1(c, P2), 0, 0);
        /* the plan: each rint shares its kernel with a ReLU's select */
        char *dot = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&dot, &n);
        CHECK(f && cft_jit_to_dot(j, f) == CFT_OK);
        if (f)
            fclose(f);
        int fused = 0;
        for (int g = 0; dot && g < 16; g++) {
            char tag[32];
            snprintf(tag, sizeof tag, "xlabel=\"group %d\"", g);
            bool has_rint = false, has_select = false;
            for (const char *p = dot; (p = strstr(p, tag)); p++) {
                /* the node's label line comes just before its group line */
                const char *l = p;
                while (l > dot && l[-1] != '\n')
                    l--;
                const char *prev = l - 1;
                while (prev > dot && prev[-1] != '\n')
                    prev--;
                has_rint |= strncmp(strstr(prev, "label=\"") + 7, "rint", 4) == 0;
                has_select |= strncmp(strstr(prev, "label=\"") + 7, "select", 6) == 0;
            }
            fused += has_rint && has_select;
        }
        CHECK_MSG(fused == 2, "%d kernels hold a rint and a select:\n%s", fused, dot);
        free(dot);
        /* CFT_JIT_REWRITE=0: the same bits without the rewrite */
        setenv("CFT_JIT_REWRITE", "0", 1);
        cft_fn *j0 = cft_jit(c);
        CHECK_ARRAY_CLOSE(cft_fn_call1(j0, P), y, 0, 0);
        unsetenv("CFT_JIT_REWRITE");
    }

    TEST("static int8 CNN under the jit: conv, ReLU, conv, ReLU, flatten, linear; each conv "
         "and its ReLU fused with the rounding onto the next product's grid (conv_qact), the "
         "second reading the first's grid, the linear the second's (dot_qint through the "
         "reshape); the interpreter's bits, twice") {
        cft_array *w1 = cft_mul_s(
            cft_random_normal(cft_random_key(80), CFT_F32, (int64_t[]){4, 2, 3, 3}, 4), 0.3);
        cft_array *w2 = cft_mul_s(
            cft_random_normal(cft_random_key(81), CFT_F32, (int64_t[]){5, 4, 3, 3}, 4), 0.2);
        cft_array *w3 = cft_mul_s(
            cft_random_normal(cft_random_key(82), CFT_F32, (int64_t[]){5 * 6 * 6, 7}, 2), 0.1);
        cft_array *x = cft_random_normal(cft_random_key(83), CFT_F32, (int64_t[]){9, 2, 6, 6}, 4);
        cft_array *in[4] = {w1, w2, w3, x};
        cft_quantizer qz = cft_quantizer_x86();
        qz.activation.observer = CFT_OBS_MINMAX;
        cft_quant *q = cft_quant_prepare(cft_fn_new(cnn2, NULL, 4, 1), &qz);
        cft_fn_call1(cft_quant_observer_fn(q), in);
        cft_fn *c = cft_quant_convert(q);
        cft_aval av[4];
        for (int i = 0; i < 4; i++)
            av[i] = cft_array_aval(in[i]);
        cft_ir *rw = cft_ir_rewrite(cft_make_ir(c, av));
        CHECK_EQ(count_prim(rw, "conv_qact"), 2);
        CHECK_EQ(count_prim(rw, "conv_qstatic"), 0);
        CHECK_EQ(count_prim(rw, "conv_qint"), 0);
        CHECK_EQ(count_prim(rw, "select"), 0);
        CHECK_EQ(count_prim(rw, "dot_qwords"), 1);
        CHECK_EQ(count_prim(rw, "dot_qint"), 0);
        CHECK_EQ(count_prim(rw, "dot_qstatic"), 0);
        cft_array *y = cft_fn_call1(c, in);
        CHECK(rel(y, cft_fn_call1(cft_fn_new(cnn2, NULL, 4, 1), in)) < 0.1);
        cft_fn *j = cft_jit(c);
        for (int r = 0; r < 2; r++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, in), y, 0, 0);
        in[3] = cft_mul_s(x, -0.6);
        CHECK_ARRAY_CLOSE(cft_fn_call1(j, in), cft_fn_call1(c, in), 0, 0);
    }

    TEST("dot_qint takes any float: off-grid values round, beyond the range clamp, a NaN row "
         "is NaN") {
        const char *src = "{ lambda ; a:f32[3,5] b:i32[2,2] c:f32[2] d:f32[] e:f32[] .\n"
                          "  let f:f32[3,2] = dot_qint[k=5 xlo=0 xhi=255] a b c d e\n"
                          "  in (f) }";
        cft_ir *ir = NULL;
        CHECK_EQ(cft_ir_parse(src, 0, NULL, &ir), CFT_OK);
        float xv[15] = {1e30f, -1e30f, 2.5f, 3.5f, 300, -7, INFINITY, -INFINITY,
                        0.49f, 254.5f, NAN,  1,    2,   3,  4};
        float gv[15] = {255, 0, 2, 4, 255, 0, 255, 0, 0, 254, 0, 1, 2, 3, 4}; /* on the grid */
        cft_array *x = cft_from_f32(xv, (int64_t[]){3, 5}, 2);
        cft_qlinear w =
            cft_qlinear_pack(cft_random_normal(cft_random_key(60), CFT_F32, (int64_t[]){2, 5}, 2));
        cft_array *in[5] = {x, w.w, w.scale, cft_scalar(0.1, CFT_F32), cft_scalar(3, CFT_F32)};
        cft_array *y = NULL;
        CHECK(ir && cft_ir_eval(ir, in, &y) == CFT_OK);
        cft_array *g = cft_from_f32(gv, (int64_t[]){3, 5}, 2);
        cft_array *want =
            cft_mul_s(cft_matmul(cft_add_s(g, -3), cft_mT(cft_qlinear_unpack(w))), 0.1);
        float yv[6] = {0}, wv[6] = {0};
        CHECK(y && cft_copy_to(y, CFT_F32, yv) == CFT_OK &&
              cft_copy_to(want, CFT_F32, wv) == CFT_OK);
        for (int i = 0; i < 4; i++) /* rows 0 and 1 */
            CHECK_MSG(fabsf(yv[i] - wv[i]) <= 1e-4f * fabsf(wv[i]) + 1e-5f, "y[%d] %g want %g", i,
                      yv[i], wv[i]);
        CHECK(isnan(yv[4]) && isnan(yv[5])); /* row 2 held a NaN */
        in[3] = cft_scalar(NAN, CFT_F32);
        CHECK(ir && cft_ir_eval(ir, in, &y) != CFT_OK);
        CHECK(y && strstr(cft_error_message(y), "dot_qint: the activation's scale") != NULL);
    }

    TEST("dot_qstatic and conv_qstatic refuse a bad scale, a zero point off the grid, a range "
         "beyond u8 and an int32-overflowing K, by name") {
        const char *good = "{ lambda ; a:f32[4,8] b:i32[3,2] c:f32[3] d:f32[] e:f32[] .\n"
                           "  let f:f32[4,3] = dot_qstatic[k=8 xlo=0 xhi=255] a b c d e\n"
                           "  in (f) }";
        cft_ir *ir = NULL;
        CHECK_EQ(cft_ir_parse(good, 0, NULL, &ir), CFT_OK);
        cft_array *in[5] = {
            cft_ones(CFT_F32, (int64_t[]){4, 8}, 2), cft_ones(CFT_I32, (int64_t[]){3, 2}, 2),
            cft_ones(CFT_F32, (int64_t[]){3}, 1), cft_scalar(0, CFT_F32), cft_scalar(3, CFT_F32)};
        cft_array *y = NULL;
        CHECK(ir && cft_ir_eval(ir, in, &y) != CFT_OK);
        CHECK_MSG(y &&
                      strstr(cft_error_message(y), "dot_qstatic: the activation's scale 0") != NULL,
                  "%s", y ? cft_error_message(y) : "(none)");
        in[3] = cft_scalar(0.1, CFT_F32), in[4] = cft_scalar(2.5, CFT_F32);
        CHECK(ir && cft_ir_eval(ir, in, &y) != CFT_OK);
        CHECK(y && strstr(cft_error_message(y), "zero point 2.5 is not an integer") != NULL);
        in[4] = cft_scalar(3, CFT_F32);
        CHECK(ir && cft_ir_eval(ir, in, &y) == CFT_OK);
        const char *conv =
            "{ lambda ; a:f32[2,2,5,5] b:i32[3,5] c:f32[3] d:f32[] e:f32[] .\n"
            "  let f:f32[2,3,5,5] = conv_qstatic[strides=(1,1) padding=(1,1,1,1) "
            "lhs_dilation=(1,1) rhs_dilation=(1,1) xrange=(0,255) wshape=(2,3,3)] a b c d e\n"
            "  in (f) }";
        cft_ir *cir = NULL;
        CHECK_EQ(cft_ir_parse(conv, 0, NULL, &cir), CFT_OK);
        cft_array *cin[5] = {
            cft_ones(CFT_F32, (int64_t[]){2, 2, 5, 5}, 4), cft_ones(CFT_I32, (int64_t[]){3, 5}, 2),
            cft_ones(CFT_F32, (int64_t[]){3}, 1), cft_scalar(-1, CFT_F32), cft_scalar(3, CFT_F32)};
        CHECK(cir && cft_ir_eval(cir, cin, &y) != CFT_OK);
        CHECK(y && strstr(cft_error_message(y), "conv_qstatic: the activation's scale -1") != NULL);
        cin[3] = cft_scalar(0.1, CFT_F32);
        CHECK(cir && cft_ir_eval(cir, cin, &y) == CFT_OK);
        const char *wide = "{ lambda ; a:f32[4,8] b:i32[3,2] c:f32[3] d:f32[] e:f32[] .\n"
                           "  let f:f32[4,3] = dot_qstatic[k=8 xlo=0 xhi=300] a b c d e\n"
                           "  in (f) }";
        cft_ir *bad = NULL;
        CHECK(cft_ir_parse(wide, 0, NULL, &bad) != CFT_OK && bad == NULL);
        CHECK(strstr(cft_last_error_message(), "not within u8") != NULL);
        const char *longk = "{ lambda ; a:f32[4,70000] b:i32[3,17500] c:f32[3] d:f32[] e:f32[] .\n"
                            "  let f:f32[4,3] = dot_qstatic[k=70000 xlo=0 xhi=255] a b c d e\n"
                            "  in (f) }";
        CHECK(cft_ir_parse(longk, 0, NULL, &bad) != CFT_OK);
        CHECK(strstr(cft_last_error_message(), "overflow the int32 accumulation") != NULL);
    }

    TEST("bad quantizers are refused by name") {
        cft_quantizer qz = cft_quantizer_x86();
        qz.weight.bits = 1;
        cft_array *y = cft_fn_call1(cft_quant_observer_fn(cft_quant_prepare(logits, &qz)), P);
        CHECK(cft_failed(y) && strstr(cft_error_message(y), "cft_quant_prepare") != NULL);
        qz = cft_quantizer_x86();
        qz.nops = 0;
        CHECK(cft_fn_failed(cft_quant_convert(cft_quant_prepare(logits, &qz))));
        qz = cft_quantizer_x86();
        qz.activation.averaging = 0;
        CHECK(cft_fn_failed(cft_quant_qat_fn(cft_quant_prepare(logits, &qz))));
        CHECK(cft_fn_failed(cft_quant_qat_fn(cft_quant_prepare(NULL, &qz))));
        cft_array *s, *z;
        CHECK(cft_quant_site(cft_quant_prepare(logits, &qz), 0, &s, &z, NULL, NULL) == CFT_E_ARG);
    }

    return check_summary();
}
