/* test_qconv_act.c: conv_qact (prims/qconv_act.c), the int8 convolution
 * fused with a bias, a ReLU and the rounding onto the next product's
 * grid, against the elementwise ops it replaces, bitwise:
 *   - the epilogue alone near every tie of its rounding: values a few ulps
 *     either side of (k + 1/2) os for scales that are not powers of two,
 *     NaN, infinities, zeros, subnormals, huge and subnormal scales;
 *   - the primitive on each of the convolution kernels (the direct one,
 *     the f32 convolution of the integers, oneDNN's int8 one, the gather)
 *     against conv_qstatic followed by the ops, with and without the ReLU;
 *   - the packed output (u8 values four to an i32 word, for dot_qwords):
 *     the same values as bytes, the words' padding zero;
 *   - the jit's rewrite of a CNN with its bias as an input (a traced
 *     broadcast) and closed over (a constant): one conv_qact, packed, read
 *     by dot_qwords, the
 *     interpreter's bits and the unrewritten jit's, twice; a ReLU whose
 *     value is also returned keeps its kernel (nothing fused). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "prims/qlinear.h"

/* the reference: the ops of the elementwise kernel, in f32 */
static float want(float y, float b, bool act, float fl, float os, float z, float lo, float hi) {
    float u = y + b;
    u = act ? (u > fl ? u : fl) : u;
    float w = nearbyintf(u / os) + z;
    w = w < lo ? lo : w;
    return w > hi ? hi : w;
}

static bool same_bits(float a, float b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

static int count_prim(const cft_ir *ir, const char *name) {
    int n = 0;
    for (int i = 0; i < cft_ir_num_eqns(ir); i++)
        n += strcmp(cft_ir_eqn_prim(ir, i), name) == 0;
    return n;
}

typedef struct {
    int64_t C, O, in[2], s[2], pad[4];
} geom;

static cft_array *bias_w[4];

/* conv (w [8, C, 3, 3]) + bias, ReLU, flatten, linear; in = (w1, b1, w2, x)
 * or (x) with the weights closed over (bias_w) */
static cft_array *cnn(cft_array *const *w, cft_array *x) {
    cft_array *h = cft_conv2d(x, w[0], NULL, NULL, NULL, 1);
    h = cft_relu(cft_add(h, cft_reshape(w[1], (int64_t[]){8, 1, 1}, 3)));
    return cft_matmul(cft_reshape(h, (int64_t[]){-1, 8 * 6 * 6}, 2), w[2]);
}
static cft_status cnn_in(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cnn(in, in[3]);
    return CFT_OK;
}
static cft_status cnn_closed(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cnn(bias_w, in[0]);
    return CFT_OK;
}
/* the ReLU's value returned as well: its kernel must stay */
static cft_status cnn_two(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_relu(cft_add(cft_conv2d(in[3], in[0], NULL, NULL, NULL, 1),
                                    cft_reshape(in[1], (int64_t[]){8, 1, 1}, 3)));
    out[0] = cft_matmul(cft_reshape(h, (int64_t[]){-1, 8 * 6 * 6}, 2), in[2]);
    out[1] = h;
    return CFT_OK;
}

static cft_ir *rewritten(cft_fn *f, cft_array *const *in, int nin) {
    cft_aval av[4];
    for (int i = 0; i < nin; i++)
        av[i] = cft_array_aval(in[i]);
    return cft_ir_rewrite(cft_make_ir(f, av));
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    TEST("the epilogue: the elementwise kernel's bits a few ulps either side of every tie, for "
         "NaN, infinities, zeros and subnormals, huge and subnormal scales, with and without "
         "the ReLU") {
        static const float scales[] = {0.1f, 0.037f, 3.3f,  0.0123f, 7e-3f,
                                       1.7f, 0.3f,   3e38f, 1e-40f,  1.0f / 3};
        enum { NV = 2 * 64 * 49 + 16 };
        static float y[NV], y0[NV], bias[NV];
        for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++)
            for (int act = 0; act < 2; act++) {
                const float os = scales[s];
                int n = 0;
                for (int k = -64; k < 64; k++) {
                    float u = (float)((k + 0.5) * (double)os);
                    for (int d = 0; d < 24; d++)
                        u = nextafterf(u, -INFINITY);
                    for (int d = 0; d < 49; d++, u = nextafterf(u, INFINITY))
                        y[n++] = u;
                }
                const float odd[16] = {NAN,    -NAN,    INFINITY, -INFINITY, 0.0f,   -0.0f,
                                       1e-45f, -1e-45f, 1e-39f,   3e38f,     -3e38f, 1e30f,
                                       2e6f,   -2e6f,   0.5f,     -0.5f};
                memcpy(y + n, odd, sizeof odd);
                n += 16;
                for (int i = 0; i < n; i++)
                    bias[i] = (i % 7 == 0) ? 0.0f : 0.25f * (float)(i % 3) - 0.25f;
                memcpy(y0, y, sizeof(float) * (size_t)n);
                cft__qepi ep = {bias, 0.0f, act, os, 128.0f, 0.0f, 255.0f, NULL, 0};
                cft__qepi_span(&ep, 0, 0, y, n);
                int bad = 0;
                for (int i = 0; i < n; i++) {
                    float w = want(y0[i], bias[i], act, 0.0f, os, 128.0f, 0.0f, 255.0f);
                    if (!same_bits(y[i], w) && bad++ < 3)
                        CHECK_MSG(false, "os %g act %d value %a: %a, the division %a", os, act,
                                  y0[i], y[i], w);
                }
                CHECK_EQ(bad, 0);
            }
    }

    TEST("conv_qact on each convolution kernel (direct, f32, oneDNN, gather): conv_qstatic "
         "then bias, ReLU, rounding, clamp as ops, bitwise; with and without the ReLU, x on "
         "its grid or not; packed (after the ReLU) the same values as bytes, zero past a "
         "sample's") {
        static const geom gs[] = {
            {1, 8, {8, 8}, {1, 1}, {0, 0, 0, 0}}, /* the digits CNN's: the direct kernel */
            {2,
             5,
             {7, 7},
             {2, 1},
             {0, 0, 1, 1}}, /* stride 2: the f32 convolution; 105 bytes a sample */
            {8, 12, {7, 7}, {1, 1}, {1, 1, 1, 1}}, /* 8 channels: oneDNN (or the gather) */
        };
        for (size_t c = 0; c < sizeof gs / sizeof gs[0]; c++)
            for (int v = 0; v < 4; v++) {
                const geom *g = &gs[c];
                bool act = v & 1, grid = v & 2;
                int64_t N = 3, K = g->C * 9;
                cft_array *x = cft_random_normal(cft_random_key(5 + c), CFT_F32,
                                                 (int64_t[]){N, g->C, g->in[0], g->in[1]}, 4);
                cft_array *w =
                    cft_random_normal(cft_random_key(50 + c), CFT_F32, (int64_t[]){g->O, K}, 2);
                cft_array *ws = cft_mul_s(cft_max(cft_abs(w), (int[]){1}, 1, false), 1.0 / 127);
                cft_array *words = cft__qstatic_quantize(w, ws, -127, 127);
                cft_array *xs = cft_scalar(2.5 / 64, CFT_F32), *zp = cft_scalar(61, CFT_I32);
                if (grid) /* x on its grid: the integers themselves */
                    x = cft_clamp(cft_add(cft_rint(cft_div(x, xs)), cft_scalar(61, CFT_F32)),
                                  cft_scalar(0, CFT_F32), cft_scalar(127, CFT_F32));
                cft_array *bias =
                    cft_mul_s(cft_random_normal(cft_random_key(9), CFT_F32, &g->O, 1), 0.5);
                cft_array *os = cft_scalar(0.037, CFT_F32), *oz = cft_scalar(17, CFT_F32);
                const int64_t wsh[3] = {g->C, 3, 3}, one[2] = {1, 1};
                for (int dn = 0; dn < 2; dn++) {
                    cft__qconv_dnnl_on = dn;
                    cft_array *y = cft__qconv_bind(x, words, ws, xs, zp, 0, 127, wsh, 2, g->s,
                                                   g->pad, one, grid);
                    cft_array *u = cft_add(y, cft_reshape(bias, (int64_t[]){g->O, 1, 1}, 3));
                    if (act)
                        u = cft_relu(u);
                    cft_array *ref = cft_clamp(cft_add(cft_rint(cft_div(u, os)), oz),
                                               cft_scalar(0, CFT_F32), cft_scalar(255, CFT_F32));
                    cft_array *in[9] = {x, words, ws, xs, zp, bias, cft_scalar(0, CFT_F32), os, oz};
                    cft_array *got = cft__qact_bind(in, (int64_t[]){0, 127, grid, 0, 255, act, 0},
                                                    wsh, 2, g->s, g->pad, one);
                    CHECK_MSG(!cft_failed(got), "case %zu: %s", c, cft_error_message(got));
                    CHECK_ARRAY_CLOSE(got, ref, 0, 0);
                    if (!act)
                        continue;
                    /* packed: the same values as bytes, four to an i32 word */
                    cft_array *pk = cft__qact_bind(in, (int64_t[]){0, 127, grid, 0, 255, 1, 1}, wsh,
                                                   2, g->s, g->pad, one);
                    int64_t n = cft_array_size(ref), W = (n / N + 3) / 4;
                    CHECK_EQ(cft_array_dtype(pk), CFT_I32);
                    CHECK(cft_array_ndim(pk) == 2 && cft_array_shape(pk)[0] == N &&
                          cft_array_shape(pk)[1] == W);
                    float *rv = malloc(sizeof(float) * (size_t)n);
                    int32_t *pv = malloc(sizeof(int32_t) * (size_t)(N * W));
                    cft_copy_to(ref, CFT_F32, rv);
                    cft_copy_to(pk, CFT_I32, pv);
                    int64_t bad = 0, per = n / N;
                    for (int64_t s = 0; s < N; s++)
                        for (int64_t i = 0; i < 4 * W; i++) {
                            uint8_t b = ((const uint8_t *)(pv + s * W))[i];
                            bad += b != (i < per ? (uint8_t)rv[s * per + i] : 0);
                        }
                    CHECK_MSG(bad == 0, "case %zu: %lld packed bytes differ", c, (long long)bad);
                    free(rv), free(pv);
                    /* a NaN floor would reach the bytes: a clear error */
                    in[6] = cft_scalar(NAN, CFT_F32);
                    cft_array *e = cft__qact_bind(in, (int64_t[]){0, 127, grid, 0, 255, 1, 1}, wsh,
                                                  2, g->s, g->pad, one);
                    CHECK(cft_failed(e) && strstr(cft_error_message(e), "conv_qact") &&
                          strstr(cft_error_message(e), "floor"));
                }
                cft__qconv_dnnl_on = true;
            }
    }

    TEST("the jit fuses conv, bias (an input, or closed over) and ReLU into one conv_qact; the "
         "interpreter's bits and the unrewritten jit's, twice and on new inputs; a ReLU also "
         "returned is not fused") {
        cft_array *w[3] = {
            cft_mul_s(cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){8, 1, 3, 3}, 4),
                      0.3),
            cft_mul_s(cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){8}, 1), 0.2),
            cft_mul_s(cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){288, 10}, 2), 0.1)};
        cft_array *x =
            cft_random_uniform(cft_random_key(4), CFT_F32, (int64_t[]){17, 1, 8, 8}, 4, 0, 16);
        cft_array *in[4] = {w[0], w[1], w[2], x};
        memcpy(bias_w, w, sizeof w);
        for (int closed = 0; closed < 2; closed++) {
            cft_fn *f =
                closed ? cft_fn_new(cnn_closed, NULL, 1, 1) : cft_fn_new(cnn_in, NULL, 4, 1);
            cft_array *const *args = closed ? &in[3] : in;
            int nin = closed ? 1 : 4;
            cft_quantizer qz = cft_quantizer_x86();
            cft_quant *q = cft_quant_prepare(f, &qz);
            cft_fn_call1(cft_quant_observer_fn(q), args);
            cft_fn *c = cft_quant_convert(q);
            cft_ir *rw = rewritten(c, args, nin);
            CHECK_EQ(count_prim(rw, "conv_qact"), 1);
            CHECK_EQ(count_prim(rw, "conv_qstatic"), 0);
            CHECK_EQ(count_prim(rw, "select"), 0);
            CHECK_EQ(count_prim(rw, "dot_qwords"), 1);
            CHECK_EQ(count_prim(rw, "dot_qint"), 0);
            cft_array *y = cft_fn_call1(c, args);
            cft_fn *j = cft_jit(c);
            for (int r = 0; r < 2; r++)
                CHECK_ARRAY_CLOSE(cft_fn_call1(j, args), y, 0, 0);
            /* new inputs through the same plan: another x (and bias) */
            cft_array *in2[4] = {w[0], cft_mul_s(w[1], -1.5), w[2],
                                 cft_random_uniform(cft_random_key(5), CFT_F32,
                                                    (int64_t[]){17, 1, 8, 8}, 4, -2, 18)};
            cft_array *const *args2 = closed ? &in2[3] : in2;
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, args2), cft_fn_call1(c, args2), 0, 0);
            setenv("CFT_JIT_REWRITE", "0", 1);
            cft_fn *j0 = cft_jit(c);
            CHECK_ARRAY_CLOSE(cft_fn_call1(j0, args), y, 0, 0);
            unsetenv("CFT_JIT_REWRITE");
        }
        cft_fn *f2 = cft_fn_new(cnn_two, NULL, 4, 2);
        cft_quantizer qz = cft_quantizer_x86();
        cft_quant *q = cft_quant_prepare(f2, &qz);
        cft_array *o[2];
        cft_fn_call(cft_quant_observer_fn(q), in, o);
        cft_fn *c = cft_quant_convert(q);
        CHECK_EQ(count_prim(rewritten(c, in, 4), "conv_qact"), 0);
        cft_array *y[2], *yj[2];
        cft_fn_call(c, in, y);
        cft_fn_call(cft_jit(c), in, yj);
        CHECK_ARRAY_CLOSE(yj[0], y[0], 0, 0);
        CHECK_ARRAY_CLOSE(yj[1], y[1], 0, 0);
    }
    return check_summary();
}
