/* autocast.c (bench): the flagship programs under bf16 (or f16) autocast
 * against f32, in one run. Each pair is jitted and timed in alternation
 * (bench_alternate: each side warmed up, then rounds of about 1 ms a
 * side), so a busy machine falls on both alike; ratio_to_baseline =
 * autocast / f32 (below 1: autocast is faster). Programs:
 *   - per-sample gradients: vmap(grad(loss)) of the MLP 64-128-128-10,
 *     B = 256;
 *   - DP-SGD: cft_dp_clipped_grad_sum of the same loss (clip 1), B = 256,
 *     and of the digits CNN of cnn.h;
 *   - ensemble: value_and_grad of K = 32 MLPs 64-128-10 under vmap, each
 *     on its own batch of 256;
 *   - MAML: the second-order meta-step of examples/maml.h (MLP 1-40-40-1,
 *     25 tasks, 5 inner steps, Adam);
 *   - a larger training step, where the products dominate: value_and_grad
 *     of the MLP 784-1024-1024-10 at B = 256.
 * The data are random (times do not depend on them); the accuracies of the
 * digits examples under autocast are examples/dp_sgd_digits --bf16 and
 * examples/ensemble_digits --bf16, and bench/lowbits's.
 *
 *   build/bench/autocast [--dtype bf16|f16] [--rounds R] [--threads N]
 *                        [--program per_sample_grads|dp_sgd|ensemble|maml|training_step]
 *
 * A product runs in the low dtype where oneDNN has kernels for it on this
 * CPU (AMX, AVX512-BF16 / AVX512-FP16, AVX-512); elsewhere it is computed
 * in f32 from rounded operands (said once on stderr), and the ratio shows
 * what autocast's casts cost there. CFT_BENCH_PROFILE=1 prints the
 * profiler's table of 20 calls of each side after each line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cft/cft.h>

#include "../examples/maml.h"
#include "bench.h"
#include "cnn.h"

/* ---- an MLP of nl layers: params (w, b) per layer, relu between ---- */

typedef struct {
    int nl;
} mlp_cfg;

static cft_array *logits_of(int nl, cft_array *const *p, cft_array *x) {
    cft_array *h = x;
    for (int l = 0; l < nl; l++) {
        h = cft_add(cft_matmul(h, p[2 * l]), p[2 * l + 1]);
        if (l + 1 < nl)
            h = cft_relu(h);
    }
    return h;
}

/* (params[2 nl], x, y) -> mean cross-entropy; env: mlp_cfg */
static cft_status ce_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    int nl = ((const mlp_cfg *)env)->nl;
    out[0] =
        cft_mean(cft_cross_entropy(logits_of(nl, in, in[2 * nl]), in[2 * nl + 1]), NULL, 0, false);
    return CFT_OK;
}

/* params of an MLP with layer sizes sz[0..nl] (torch's default init); k > 0:
 * k models stacked along a first dim */
static void make_mlp(const int64_t *sz, int nl, int64_t k, uint64_t seed, cft_array **p) {
    cft_array *keys = cft_random_split(cft_random_key(seed), 2 * nl);
    for (int l = 0; l < nl; l++) {
        double bd = 1 / sqrt((double)sz[l]);
        int64_t ws[3] = {k, sz[l], sz[l + 1]};
        int lead = k > 0;
        p[2 * l] =
            cft_random_uniform(cft_index(keys, 2 * l), CFT_F32, ws + 1 - lead, 2 + lead, -bd, bd);
        p[2 * l + 1] = cft_random_uniform(cft_index(keys, 2 * l + 1), CFT_F32,
                                          (int64_t[]){k, sz[l + 1]} + 1 - lead, 1 + lead, -bd, bd);
    }
}

/* random inputs [b, f] and labels [b] in 0..9 (k > 0: [k, b, f], [k, b]) */
static void make_data(int64_t k, int64_t b, int64_t f, uint64_t seed, cft_array **x,
                      cft_array **y) {
    int lead = k > 0;
    int64_t xs[3] = {k, b, f}, ys[2] = {k, b};
    *x = cft_random_normal(cft_random_key(seed), CFT_F32, xs + 1 - lead, 2 + lead);
    *y = cft_random_randint(cft_random_key(seed + 1), ys + 1 - lead, 1 + lead, 0, 10, CFT_I32);
}

/* ---- timing ---- */

typedef struct {
    cft_fn *f;
    cft_array **in;
} call_t;

static void call(void *arg) {
    call_t *c = arg;
    cft_array *out[32];
    if (cft_fn_call(c->f, c->in, out) != CFT_OK) {
        fprintf(stderr, "autocast: %s\n", cft_error_message(out[0]));
        exit(1);
    }
    (void)cft_item_at(out[0], 0);
}

static const char *low_name = "bf16";
static cft_dtype low = CFT_BF16;
static int rounds = 15;
static const char *only; /* --program NAME: that program alone */

/* one line: the plain program against the one built over autocast, both
 * jitted, on the same inputs */
static void pair(const char *config, cft_fn *plain, cft_fn *autocast, cft_array **in) {
    if (only && !strstr(config, only))
        return;
    call_t a = {cft_jit(plain), in}, b = {cft_jit(autocast), in};
    double ma, mb;
    bench_alternate(call, &a, call, &b, rounds, &ma, &mb);
    bench_profile_pair(call, &a, call, &b, "", "f32", low_name,
                       20); /* where autocast's time goes */
    printf("{\"bench\": \"autocast\", \"config\": {%s, \"threads\": %d, \"rounds\": %d}, "
           "\"method\": \"%s_autocast\", \"median_ms\": %.4f, \"baseline\": \"f32\", "
           "\"baseline_ms\": %.4f, \"ratio_to_baseline\": %.3f}\n",
           config, bench_nthreads, rounds, low_name, mb, ma, mb / ma);
    fflush(stdout);
}

int main(int argc, char **argv) {
    bench_threads(argc, argv); /* and cft_init */
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && atoi(argv[i + 1]) > 0)
            rounds = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--dtype") && !strcmp(argv[i + 1], "f16"))
            low = CFT_F16, low_name = "f16";
        if (!strcmp(argv[i], "--program"))
            only = argv[i + 1];
    }
    const int argn[6] = {0, 1, 2, 3, 4, 5};

    /* per-sample gradients and DP-SGD: MLP 64-128-128-10, B = 256 */
    static mlp_cfg c3 = {3};
    static const int64_t s3[4] = {64, 128, 128, 10};
    cft_array *in[8];
    make_mlp(s3, 3, 0, 1, in);
    make_data(0, 256, 64, 7, &in[6], &in[7]);
    cft_fn *loss = cft_fn_new(ce_loss, &c3, 8, 1), *low_loss = cft_autocast(loss, low);
    int ps_axes[8]; /* per sample: x and y */
    for (int i = 0; i < 8; i++)
        ps_axes[i] = i < 6 ? CFT_NOT_BATCHED : 0;
    pair("\"program\": \"per_sample_grads\", \"model\": \"mlp 64-128-128-10\", \"B\": 256",
         cft_vmap(cft_grad(loss, argn, 6), ps_axes, NULL),
         cft_vmap(cft_grad(low_loss, argn, 6), ps_axes, NULL), in);
    pair("\"program\": \"dp_sgd_clipped_grad_sum\", \"model\": \"mlp 64-128-128-10\", \"B\": "
         "256",
         cft_dp_clipped_grad_sum(loss, 6, 1.0), cft_dp_clipped_grad_sum(low_loss, 6, 1.0), in);

    /* DP-SGD on the digits CNN of cnn.h (conv 3x3 1->8, linear 288->10), B = 256 */
    cft_array *cin[6];
    cnn_init(cin);
    cin[4] = cft_random_normal(cft_random_key(13), CFT_F32, (int64_t[]){256, 1, 8, 8}, 4);
    cin[5] = cft_random_randint(cft_random_key(14), (int64_t[]){256}, 1, 0, 10, CFT_I32);
    cft_fn *closs = cft_fn_new(cnn_loss, NULL, 6, 1);
    pair("\"program\": \"dp_sgd_clipped_grad_sum\", \"model\": \"cnn conv3x3(1->8)-288-10\", "
         "\"B\": 256",
         cft_dp_clipped_grad_sum(closs, 4, 1.0),
         cft_dp_clipped_grad_sum(cft_autocast(closs, low), 4, 1.0), cin);

    /* ensemble: K = 32 MLPs 64-128-10, each on its own batch of 256 */
    static mlp_cfg c2 = {2};
    static const int64_t s2[3] = {64, 128, 10};
    cft_array *ein[6];
    make_mlp(s2, 2, 32, 2, ein);
    make_data(32, 256, 64, 9, &ein[4], &ein[5]);
    cft_fn *eloss = cft_fn_new(ce_loss, &c2, 6, 1);
    int e_axes[6] = {0, 0, 0, 0, 0, 0};
    pair("\"program\": \"ensemble_fwd_bwd\", \"model\": \"32 x mlp 64-128-10\", \"B\": 256",
         cft_vmap(cft_value_and_grad(eloss, argn, 4, false), e_axes, NULL),
         cft_vmap(cft_value_and_grad(cft_autocast(eloss, low), argn, 4, false), e_axes, NULL), ein);

    /* MAML: the second-order meta-step, 25 tasks of 10 + 10 points, 5
     * inner steps, Adam */
    cft_array *state[3 * NP + 6], *params[NP], *kx[4];
    mlp_init(1, params);
    for (int l = 0; l < NP; l++) {
        state[l] = params[l];
        state[NP + l] = state[2 * NP + l] = cft_zeros_like(params[l]);
    }
    state[3 * NP] = cft_scalar(1 / (1 - BETA1), CFT_F32);
    state[3 * NP + 1] = cft_scalar(1 / (1 - BETA2), CFT_F32);
    for (int i = 0; i < 4; i++)
        kx[i] = cft_random_uniform(cft_random_key(20 + (uint64_t)i), CFT_F32,
                                   (int64_t[]){META_BATCH, K_SHOT, 1}, 3, -5, 5);
    memcpy(state + 3 * NP + 2, kx, sizeof kx);
    cft_fn *meta = cft_fn_new(maml_objective, per_task_losses(5, false), NP + 4, 1);
    pair("\"program\": \"maml_meta_step\", \"model\": \"mlp 1-40-40-1\", \"T\": 25, "
         "\"n_inner\": 5",
         cft_fn_new(adam_step, cft_value_and_grad(meta, argn, NP, false), 3 * NP + 6, 3 * NP + 1),
         cft_fn_new(adam_step, cft_value_and_grad(cft_autocast(meta, low), argn, NP, false),
                    3 * NP + 6, 3 * NP + 1),
         state);

    /* a larger step, where the products dominate: MLP 784-1024-1024-10 */
    static const int64_t sb[4] = {784, 1024, 1024, 10};
    cft_array *bin[8];
    make_mlp(sb, 3, 0, 3, bin);
    make_data(0, 256, 784, 11, &bin[6], &bin[7]);
    pair("\"program\": \"training_step\", \"model\": \"mlp 784-1024-1024-10\", \"B\": 256",
         cft_value_and_grad(loss, argn, 6, false), cft_value_and_grad(low_loss, argn, 6, false),
         bin);
    return 0;
}
