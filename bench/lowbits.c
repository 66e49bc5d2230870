/* lowbits.c: fewer bits, measured in one run. Times (JSON lines, each
 * with ratio_to_baseline against f32, the sides alternated in rounds):
 *   - a training step (value_and_grad, jitted) of the MLP 256-512-512-10
 *     at batch 256: f32 against cft_autocast(bf16), and against the
 *     quantization-aware step (cft_quant_qat_fn: fake-quantized operands);
 *   - one linear layer at 256-512-512 (x [256, 512] times W^T, W
 *     [512, 512]): the dense product against the 2:4 weight's product;
 *   - the same layer with an int8 weight (cft_qlinear_apply: rows of x
 *     quantized on the fly, oneDNN's integer GEMM);
 *   - the MLP's forward at batch 256: f32 against the static int8 program
 *     of cft_quant_convert (integer GEMMs; 8- and 7-bit activations), and
 *     against cft_quant_dynamic (int8 GEMMs, the weights packed once);
 *   - the digits CNN's forward at batch 256 and one 3x3 convolution 32 ->
 *     64 channels on 16x16 at batch 64, f32 against static int8 with 8-
 *     and 7-bit activations;
 * and accuracies on the digits data (MLP 64-128-128-10, same initialisation
 * and data order for every line): trained in f32, trained under bf16
 * autocast, the f32 model quantized after training (PTQ: calibrated on 10
 * training batches) and after 2 epochs of quantization-aware training
 * (with its control, the same 2 epochs in f32: fine-tuning alone moves the
 * accuracy, and what the QAT line loses beyond the control is
 * quantization's; the CNN has the same lines), and
 * pruned to 2:4 (all three weights, along their reduction dims) before and
 * after fine-tuning with the mask fixed.
 *
 *   build/bench/lowbits [--rounds R] [--epochs E] [--threads N] [--shuffles S] [--speed]
 *
 * --speed prints the int8 forward lines alone (the CNN untrained).
 * --shuffles: the accuracy lines over S orders of the data (10, the
 * most), each line's config naming its order ("shuffle").
 *
 * bf16 products pay only where the CPU has bf16 arithmetic (AVX512-BF16,
 * AMX: oneDNN's kernels); elsewhere every bf16 product is computed in f32
 * from rounded operands, and the line shows what the casts cost. */
#include <math.h>
#include <string.h>

#include "../examples/mlp.h"
#include "bench.h"
#include "cnn.h"

/* ---- timing ---- */

#define BIG_NL 4
static const int64_t big_sizes[BIG_NL] = {256, 512, 512, 10};

/* (w1, b1, w2, b2, w3, b3, x) -> logits of the relu MLP */
static cft_status big_logits(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
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

/* (w1, b1, w2, b2, w3, b3, x, y) -> mean cross-entropy of the logits */
static cft_status big_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    cft_array *lg;
    cft_status st = big_logits(env, nin, in, nout, &lg);
    out[0] = cft_mean(cft_cross_entropy(lg, in[7]), NULL, 0, false);
    return st;
}

/* (w1, b1, w2, b2, w3, b3, x, y) -> mean cross-entropy of the QAT logits (env) */
static cft_status qat_big_loss(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)nin, (void)nout;
    cft_array *lg;
    cft_status st = cft_fn_call(env, in, &lg);
    out[0] = cft_mean(cft_cross_entropy(lg, in[7]), NULL, 0, false);
    return st;
}

typedef struct {
    cft_fn *f;
    cft_array **in;
    int nout;
} call_t;

static void call(void *arg) {
    call_t *c = arg;
    cft_array *out[8];
    cft_fn_call(c->f, c->in, out);
    (void)cft_item_at(out[0], 0);
}

typedef struct {
    cft_array *x, *w;
    cft_sparse24 s;
} lin_t;

static void dense_lin(void *arg) {
    lin_t *l = arg;
    (void)cft_item_at(cft_matmul(l->x, cft_mT(l->w)), 0);
}
static void sparse_lin(void *arg) {
    lin_t *l = arg;
    (void)cft_item_at(cft_sparse24_linear(l->x, l->s), 0);
}
static cft_qlinear lin_q;
static void int8_lin(void *arg) {
    lin_t *l = arg;
    (void)cft_item_at(cft_qlinear_apply(l->x, lin_q), 0);
}

/* the big MLP's logits with its weights closed over (constants of the
 * trace: dynamic quantization packs them once) */
static cft_array *big_w[6];
static cft_status big_closed(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin;
    cft_array *a[7];
    memcpy(a, big_w, sizeof big_w);
    a[6] = in[0];
    return big_logits(NULL, 7, a, nout, out);
}

static void line(const char *config, const char *method, const char *baseline, double ms,
                 double base_ms, int rounds) {
    printf("{\"bench\": \"lowbits\", \"config\": {%s, \"threads\": %d, \"rounds\": %d}, "
           "\"method\": \"%s\", \"median_ms\": %.4f, \"baseline\": \"%s\", \"baseline_ms\": "
           "%.4f, \"ratio_to_baseline\": %.3f}\n",
           config, bench_nthreads, rounds, method, ms, baseline, base_ms, ms / base_ms);
    fflush(stdout);
}

/* ---- digits ---- */

#define BATCH 32
#define NTRAIN 1500
static double LR = 0.1;
static int SHUFFLE = 7; /* the data order of the accuracy lines (digits_shuffle's seed) */

/* one SGD step: (params[6], masks[6] or none, x, y) -> params'; the loss
 * sees params * masks (the pruning parametrization) */
typedef struct {
    cft_fn *vg; /* value_and_grad of the masked loss over the 6 params */
} step_env;

static cft_status masked_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin;
    cft_array *p[MLP_NPARAMS + 2];
    for (int l = 0; l < MLP_NPARAMS; l++)
        p[l] = cft_mul(in[l], in[MLP_NPARAMS + l]);
    p[MLP_NPARAMS] = in[2 * MLP_NPARAMS], p[MLP_NPARAMS + 1] = in[2 * MLP_NPARAMS + 1];
    return mlp_loss(NULL, MLP_NPARAMS + 2, p, nout, out);
}

static cft_status sgd_step(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    step_env *s = env;
    cft_array *r[1 + MLP_NPARAMS];
    cft_status st = cft_fn_call(s->vg, in, r);
    for (int l = 0; st == CFT_OK && l < MLP_NPARAMS; l++)
        out[l] = cft_mul(cft_sub(in[l], cft_mul_s(r[1 + l], LR)), in[MLP_NPARAMS + l]);
    return st;
}

static cft_fn *make_step(cft_dtype low) {
    cft_fn *loss = cft_fn_new(masked_loss, NULL, 2 * MLP_NPARAMS + 2, 1);
    if (low != CFT_F32)
        loss = cft_autocast(loss, low);
    const int argn[MLP_NPARAMS] = {0, 1, 2, 3, 4, 5};
    step_env *s = malloc(sizeof *s);
    s->vg = cft_value_and_grad(loss, argn, MLP_NPARAMS, false);
    return cft_jit(cft_fn_new(sgd_step, s, 2 * MLP_NPARAMS + 2, MLP_NPARAMS));
}

static void train(cft_fn *step, const digits *d, cft_array **p, cft_array **masks, int epochs) {
    cft_array *in[2 * MLP_NPARAMS + 2];
    for (int e = 0; e < epochs; e++)
        for (int b = 0; b + BATCH <= NTRAIN; b += BATCH) {
            for (int l = 0; l < MLP_NPARAMS; l++)
                in[l] = p[l], in[MLP_NPARAMS + l] = masks[l];
            in[2 * MLP_NPARAMS] = cft_from_data(d->x + b * 64, CFT_F32, (int64_t[]){BATCH, 64}, 2);
            in[2 * MLP_NPARAMS + 1] = cft_from_data(d->y + b, CFT_I32, (int64_t[]){BATCH}, 1);
            cft_array *np[MLP_NPARAMS];
            cft_fn_call(step, in, np);
            memcpy(p, np, sizeof np);
        }
}

static double test_acc(const digits *d, cft_array **p) {
    int nt = d->n - NTRAIN;
    cft_array *x = cft_from_data(d->x + NTRAIN * 64, CFT_F32, (int64_t[]){nt, 64}, 2);
    cft_array *y = cft_from_data(d->y + NTRAIN, CFT_I32, (int64_t[]){nt}, 1);
    return mlp_accuracy(mlp_logits(p, x), y);
}

/* 2:4 along a weight's reduction dim (axis 0 of W in x W): mask of W */
static cft_array *mask24(cft_array *w) {
    cft_array *wt = cft_mT(w);
    cft_array *ones = cft_ones_like(cft_sparse24_compress(wt).values);
    return cft_mT(cft_sparse24_to_dense((cft_sparse24){ones, cft_sparse24_meta(wt)}));
}

static void acc_line(const char *method, double acc, double base);

/* (params[6], x) -> logits of the digits MLP */
static cft_status digits_logits(void *env, int nin, cft_array *const *in, int nout,
                                cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = mlp_logits(in, in[MLP_NPARAMS]);
    return CFT_OK;
}

/* (params[6], x, y) -> mean cross-entropy of the QAT logits (env) */
static cft_status qat_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *lg;
    cft_status st = cft_fn_call(env, in, &lg);
    out[0] = cft_mean(cft_cross_entropy(lg, in[MLP_NPARAMS + 1]), NULL, 0, false);
    return st;
}

static double fn_acc(cft_fn *f, const digits *d, cft_array **p) {
    int nt = d->n - NTRAIN;
    cft_array *in[MLP_NPARAMS + 1];
    memcpy(in, p, sizeof(cft_array *) * MLP_NPARAMS);
    in[MLP_NPARAMS] = cft_from_data(d->x + NTRAIN * 64, CFT_F32, (int64_t[]){nt, 64}, 2);
    cft_array *y = cft_from_data(d->y + NTRAIN, CFT_I32, (int64_t[]){nt}, 1);
    cft_array *lg = cft_fn_call1(f, in);
    if (cft_failed(lg))
        fprintf(stderr, "lowbits: %s\n", cft_error_message(lg));
    return mlp_accuracy(lg, y);
}

static cft_array *batch_x(const digits *d, int b) {
    return cft_from_data(d->x + b * 64, CFT_F32, (int64_t[]){BATCH, 64}, 2);
}

/* 2 epochs of SGD (rate 0.02, eagerly) on the loss of logits function lf */
static bool sgd_epochs(cft_fn *lf, const digits *d, cft_array **w) {
    const int argn[MLP_NPARAMS] = {0, 1, 2, 3, 4, 5};
    cft_fn *vg =
        cft_value_and_grad(cft_fn_new(qat_loss, lf, MLP_NPARAMS + 2, 1), argn, MLP_NPARAMS, false);
    cft_array *in[MLP_NPARAMS + 2];
    for (int e = 0; e < 2; e++)
        for (int b = 0; b + BATCH <= NTRAIN; b += BATCH) {
            memcpy(in, w, sizeof(cft_array *) * MLP_NPARAMS);
            in[MLP_NPARAMS] = batch_x(d, b);
            in[MLP_NPARAMS + 1] = cft_from_data(d->y + b, CFT_I32, (int64_t[]){BATCH}, 1);
            cft_array *r[1 + MLP_NPARAMS];
            if (cft_fn_call(vg, in, r) != CFT_OK) {
                fprintf(stderr, "lowbits: QAT step: %s\n", cft_error_message(r[0]));
                return false;
            }
            for (int l = 0; l < MLP_NPARAMS; l++)
                w[l] = cft_sub(w[l], cft_mul_s(r[1 + l], 0.02));
        }
    return true;
}

/* PTQ and QAT of the trained f32 model p */
static void quant_lines(const digits *d, cft_array **p, double a32) {
    cft_quantizer qz = cft_quantizer_x86();
    cft_fn *lf = cft_fn_new(digits_logits, NULL, MLP_NPARAMS + 1, 1);
    cft_quant *q = cft_quant_prepare(lf, &qz);
    cft_array *in[MLP_NPARAMS + 2];
    memcpy(in, p, sizeof(cft_array *) * MLP_NPARAMS);
    for (int b = 0; b < 10; b++) {
        in[MLP_NPARAMS] = batch_x(d, b * BATCH);
        cft_fn_call1(cft_quant_observer_fn(q), in);
    }
    acc_line("int8_ptq", fn_acc(cft_quant_convert(q), d, p), a32);
    acc_line("int8_dynamic", fn_acc(cft_quant_dynamic(lf), d, p), a32);
    /* QAT: 2 epochs of SGD through the fake-quantized model, eagerly (the
     * observers follow the activations), then convert; and the control:
     * the same epochs in f32 (the QAT line's points beyond its are what
     * quantization costs) */
    cft_quant *qa = cft_quant_prepare(lf, &qz);
    cft_array *w[MLP_NPARAMS], *wf[MLP_NPARAMS];
    memcpy(w, p, sizeof w);
    memcpy(wf, p, sizeof wf);
    if (!sgd_epochs(cft_quant_qat_fn(qa), d, w) || !sgd_epochs(lf, d, wf))
        return;
    acc_line("f32_finetuned_as_qat", fn_acc(lf, d, wf), a32);
    acc_line("int8_qat", fn_acc(cft_quant_convert(qa), d, w), a32);
}

/* ---- the digits CNN (cnn.h): f32, bf16 autocast, PTQ, QAT; int8 speed ---- */

static cft_array *images(const digits *d, int from, int n) {
    return cft_from_data(d->x + from * 64, CFT_F32, (int64_t[]){n, 1, 8, 8}, 4);
}

/* (params[4], x [B,1,8,8]) -> logits */
static cft_status cnn_fwd(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cnn_logits(in, in[CNN_NPARAMS]);
    return CFT_OK;
}

/* (params[4], x, y) -> mean CE of env's logits */
static cft_status cnn_env_loss(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)nin, (void)nout;
    cft_array *lg;
    cft_status st = cft_fn_call(env, in, &lg);
    out[0] = cft_mean(cft_cross_entropy(lg, in[CNN_NPARAMS + 1]), NULL, 0, false);
    return st;
}

/* epochs of SGD (lr) on the loss of logits function lf, jitted unless eager */
static void cnn_train(cft_fn *lf, bool eager, const digits *d, cft_array **p, int epochs,
                      double lr) {
    const int argn[CNN_NPARAMS] = {0, 1, 2, 3};
    cft_fn *vg = cft_value_and_grad(cft_fn_new(cnn_env_loss, lf, CNN_NPARAMS + 2, 1), argn,
                                    CNN_NPARAMS, false);
    if (!eager)
        vg = cft_jit(vg);
    cft_array *in[CNN_NPARAMS + 2];
    for (int e = 0; e < epochs; e++)
        for (int b = 0; b + BATCH <= NTRAIN; b += BATCH) {
            memcpy(in, p, sizeof(cft_array *) * CNN_NPARAMS);
            in[CNN_NPARAMS] = images(d, b, BATCH);
            in[CNN_NPARAMS + 1] = cft_from_data(d->y + b, CFT_I32, (int64_t[]){BATCH}, 1);
            cft_array *r[1 + CNN_NPARAMS];
            if (cft_fn_call(vg, in, r) != CFT_OK) {
                fprintf(stderr, "lowbits: CNN step: %s\n", cft_error_message(r[0]));
                return;
            }
            for (int l = 0; l < CNN_NPARAMS; l++)
                p[l] = cft_sub(p[l], cft_mul_s(r[1 + l], lr));
        }
}

static double cnn_acc(cft_fn *lf, const digits *d, cft_array **p) {
    int nt = d->n - NTRAIN;
    cft_array *in[CNN_NPARAMS + 1];
    memcpy(in, p, sizeof(cft_array *) * CNN_NPARAMS);
    in[CNN_NPARAMS] = images(d, NTRAIN, nt);
    cft_array *lg = cft_fn_call1(lf, in);
    if (cft_failed(lg))
        fprintf(stderr, "lowbits: %s\n", cft_error_message(lg));
    return mlp_accuracy(lg, cft_from_data(d->y + NTRAIN, CFT_I32, (int64_t[]){nt}, 1));
}

static void cnn_line(const char *method, double acc, double base) {
    printf("{\"bench\": \"lowbits\", \"config\": {\"model\": \"digits cnn conv3x3(1->8)-288-10\", "
           "\"train\": %d, \"shuffle\": %d}, \"method\": \"%s\", \"test_accuracy\": %.4f, "
           "\"baseline\": \"f32\", \"points_vs_baseline\": %.2f}\n",
           NTRAIN, SHUFFLE, method, acc, 100 * (acc - base));
    fflush(stdout);
}

/* the CNN's forward at batch 256 with its weights closed over */
static cft_array *cnn_w[CNN_NPARAMS];
static cft_status cnn_closed(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cnn_logits(cnn_w, in[0]);
    return CFT_OK;
}

static void cnn_speed(cft_array **p, cft_array *x, int rounds);
static void conv_speed(cft_fn *closed, cft_array *x, const char *what, int rounds);

static void cnn_lines(const digits *d, int epochs, int rounds, bool speed) {
    cft_array *p[CNN_NPARAMS], *pb[CNN_NPARAMS];
    cnn_init(p);
    memcpy(pb, p, sizeof pb);
    cft_fn *lf = cft_fn_new(cnn_fwd, NULL, CNN_NPARAMS + 1, 1);
    cnn_train(lf, false, d, p, epochs, 0.1);
    double a32 = cnn_acc(lf, d, p);
    cnn_line("f32", a32, a32);
    cnn_train(cft_autocast(lf, CFT_BF16), false, d, pb, epochs, 0.1);
    cnn_line("bf16_autocast", cnn_acc(lf, d, pb), a32);
    cft_quantizer qz = cft_quantizer_x86();
    cft_quant *q = cft_quant_prepare(lf, &qz);
    cft_array *in[CNN_NPARAMS + 1];
    memcpy(in, p, sizeof p);
    for (int b = 0; b < 10; b++) {
        in[CNN_NPARAMS] = images(d, b * BATCH, BATCH);
        cft_fn_call1(cft_quant_observer_fn(q), in);
    }
    cnn_line("int8_ptq", cnn_acc(cft_quant_convert(q), d, p), a32);
    /* QAT: 2 epochs eagerly (the observers follow the activations) */
    cft_quant *qa = cft_quant_prepare(lf, &qz);
    cft_array *w[CNN_NPARAMS];
    memcpy(w, p, sizeof w);
    cnn_train(cft_quant_qat_fn(qa), true, d, w, 2, 0.02);
    cnn_line("int8_qat", cnn_acc(cft_quant_convert(qa), d, w), a32);
    /* the control: the same 2 epochs at the same rate in f32 (without
     * quantization); the QAT line's points beyond this line's are what
     * quantization costs */
    memcpy(w, p, sizeof w);
    cnn_train(lf, true, d, w, 2, 0.02);
    cnn_line("f32_finetuned_as_qat", cnn_acc(lf, d, w), a32);
    if (speed)
        cnn_speed(p, images(d, 0, 256), rounds);
}

/* the CNN p's forward at batch 256 (x), weights constant: f32 against the
 * converted int8 program */
static void cnn_speed(cft_array **p, cft_array *x, int rounds) {
    memcpy(cnn_w, p, sizeof cnn_w);
    conv_speed(cft_fn_new(cnn_closed, NULL, 1, 1), x,
               "\"model\": \"digits cnn conv3x3(1->8)-288-10\", \"batch\": 256", rounds);
}

/* one larger convolution, 3x3 32 -> 64 channels on 16x16, padding 1 */
static cft_array *conv_big_w;
static cft_status conv_big(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_conv2d(in[0], conv_big_w, NULL, (int64_t[]){1, 1}, NULL, 1);
    return CFT_OK;
}

static void conv_layer_speed(int rounds) {
    conv_big_w = cft_mul_s(
        cft_random_normal(cft_random_key(21), CFT_F32, (int64_t[]){64, 32, 3, 3}, 4), 0.06);
    cft_array *x =
        cft_relu(cft_random_normal(cft_random_key(22), CFT_F32, (int64_t[]){64, 32, 16, 16}, 4));
    conv_speed(cft_fn_new(conv_big, NULL, 1, 1), x,
               "\"layer\": \"conv3x3 32->64 on 16x16, padding 1\", \"batch\": 64", rounds);
}

/* the forward of `closed` (weights constant) on x: f32 against the
 * converted int8 program, with 8-bit activations (on a CPU without VNNI
 * an f32 convolution of the integers) and 7-bit ones (oneDNN's int8
 * convolution on every CPU) */
static void conv_speed(cft_fn *closed, cft_array *x, const char *what, int rounds) {
    call_t f32 = {cft_jit(closed), &x, 1};
    for (int bits = 8; bits >= 7; bits--) {
        cft_quantizer qz = cft_quantizer_x86();
        qz.activation.bits = bits;
        cft_quant *qc = cft_quant_prepare(closed, &qz);
        cft_fn_call1(cft_quant_observer_fn(qc), &x);
        call_t i8 = {cft_jit(cft_quant_convert(qc)), &x, 1};
        double mf, mq;
        bench_alternate(call, &f32, call, &i8, rounds, &mf, &mq);
        bench_profile_pair(call, &f32, call, &i8, what, "f32", "int8", 50);
        char cfg[256];
        snprintf(cfg, sizeof cfg, "%s, \"step\": \"fwd\", \"activation_bits\": %d", what, bits);
        line(cfg, "int8_static", "f32", mq, mf, rounds);
    }
}

static void acc_line(const char *method, double acc, double base) {
    printf("{\"bench\": \"lowbits\", \"config\": {\"model\": \"digits mlp 64-128-128-10\", "
           "\"train\": %d, \"shuffle\": %d}, \"method\": \"%s\", \"test_accuracy\": %.4f, "
           "\"baseline\": \"f32\", \"points_vs_baseline\": %.2f}\n",
           NTRAIN, SHUFFLE, method, acc, 100 * (acc - base));
    fflush(stdout);
}

int main(int argc, char **argv) {
    bench_threads(argc, argv);
    int rounds = 15, epochs = 10, shuffles = 10;
    bool speed = false; /* --speed: the int8 forward lines alone (the CNN untrained) */
    for (int i = 1; i < argc; i++)
        speed |= !strcmp(argv[i], "--speed");
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : rounds;
        if (!strcmp(argv[i], "--epochs"))
            epochs = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : epochs;
        if (!strcmp(argv[i], "--shuffles")) {
            int v = atoi(argv[i + 1]);
            shuffles = v < 1 ? 1 : v > 10 ? 10 : v;
        }
    }

    /* the big MLP's training step, f32 and bf16 autocast */
    cft_array *in[8];
    const char *cfg = "\"model\": \"mlp 256-512-512-10\", \"batch\": 256, \"step\": \"fwd+bwd\"";
    cft_array *keys = cft_random_split(cft_random_key(1), 8);
    for (int l = 0; l < 3; l++) {
        double bd = 1 / sqrt((double)big_sizes[l]);
        in[2 * l] = cft_random_uniform(cft_index(keys, 2 * l), CFT_F32,
                                       (int64_t[]){big_sizes[l], big_sizes[l + 1]}, 2, -bd, bd);
        in[2 * l + 1] = cft_zeros(CFT_F32, &big_sizes[l + 1], 1);
    }
    in[6] = cft_random_normal(cft_index(keys, 6), CFT_F32, (int64_t[]){256, 256}, 2);
    in[7] = cft_random_randint(cft_index(keys, 7), (int64_t[]){256}, 1, 0, 10, CFT_I32);
    const int argn[6] = {0, 1, 2, 3, 4, 5};
    if (!speed) {
        cft_fn *loss = cft_fn_new(big_loss, NULL, 8, 1);
        call_t f32 = {cft_jit(cft_value_and_grad(loss, argn, 6, false)), in, 7};
        call_t bf = {cft_jit(cft_value_and_grad(cft_autocast(loss, CFT_BF16), argn, 6, false)), in,
                     7};
        double m32, mbf;
        bench_alternate(call, &f32, call, &bf, rounds, &m32, &mbf);
        line(cfg, "bf16_autocast", "f32", mbf, m32, rounds);
        /* the same step under quantization-aware training: fake-quantized
         * operands of every product (observers in the step, as in training) */
        {
            cft_quantizer qz = cft_quantizer_x86();
            cft_quant *qa = cft_quant_prepare(cft_fn_new(big_logits, NULL, 7, 1), &qz);
            cft_fn_call1(cft_quant_observer_fn(qa), in);
            cft_fn *ql = cft_fn_new(qat_big_loss, cft_quant_qat_fn(qa), 8, 1);
            call_t qs = {cft_jit(cft_value_and_grad(ql, argn, 6, false)), in, 7};
            double mf, mq;
            bench_alternate(call, &f32, call, &qs, rounds, &mf, &mq);
            line(cfg, "int8_qat", "f32", mq, mf, rounds);
        }
    }

    /* one linear layer, dense against 2:4 */
    lin_t lt;
    lt.x = cft_random_normal(cft_index(keys, 6), CFT_F32, (int64_t[]){256, 512}, 2);
    lt.w = cft_random_normal(cft_index(keys, 0), CFT_F32, (int64_t[]){512, 512}, 2);
    lt.s = cft_sparse24_compress(lt.w);
    double md, ms;
    bench_alternate(dense_lin, &lt, sparse_lin, &lt, rounds, &md, &ms);
    line("\"layer\": \"linear 256-512-512\", \"dtype\": \"f32\"", "sparse24", "dense", ms, md,
         rounds);
    lin_q = cft_qlinear_pack(lt.w);
    double mi;
    bench_alternate(dense_lin, &lt, int8_lin, &lt, rounds, &md, &mi);
    line("\"layer\": \"linear 256-512-512\", \"dtype\": \"f32\"", "int8_dynamic", "dense", mi, md,
         rounds);

    /* the big MLP's forward with its weights closed over (frozen, as a
     * deployed model's: the jit quantizes and packs them once): f32
     * against dynamic int8 and the converted (static) int8 program, with
     * 8-bit activations (the u8 GEMM where the CPU has VNNI or AMX, else
     * the integers on an f32 GEMM) and 7-bit ones (torch's reduce_range:
     * the u8 GEMM on every CPU) */
    memcpy(big_w, in, sizeof big_w);
    cft_fn *closed = cft_fn_new(big_closed, NULL, 1, 1);
    call_t cf = {cft_jit(closed), &in[6], 1};
    for (int bits = 8; bits >= 7; bits--) {
        cft_quantizer qz = cft_quantizer_x86();
        qz.activation.bits = bits;
        cft_quant *q = cft_quant_prepare(closed, &qz);
        cft_fn_call1(cft_quant_observer_fn(q), &in[6]);
        call_t i8f = {cft_jit(cft_quant_convert(q)), &in[6], 1};
        double mf, mq;
        bench_alternate(call, &cf, call, &i8f, rounds, &mf, &mq);
        char cfg8[160];
        snprintf(cfg8, sizeof cfg8,
                 "\"model\": \"mlp 256-512-512-10\", \"batch\": 256, \"step\": \"fwd\", "
                 "\"activation_bits\": %d",
                 bits);
        line(cfg8, "int8_static", "f32", mq, mf, rounds);
    }
    call_t cq = {cft_jit(cft_quant_dynamic(closed)), &in[6], 1};
    double mc, md8;
    bench_alternate(call, &cf, call, &cq, rounds, &mc, &md8);
    bench_profile_pair(call, &cf, call, &cq, "mlp 256-512-512-10 dynamic", "f32", "int8", 50);
    line("\"model\": \"mlp 256-512-512-10\", \"batch\": 256, \"step\": \"fwd\"", "int8_dynamic",
         "f32", md8, mc, rounds);

    if (speed) { /* the CNN's int8 line alone, on untrained weights */
        cft_array *p[CNN_NPARAMS];
        cnn_init(p);
        cnn_speed(
            p, cft_random_uniform(cft_random_key(3), CFT_F32, (int64_t[]){256, 1, 8, 8}, 4, 0, 16),
            rounds);
        conv_layer_speed(rounds);
        return 0;
    }
    /* digits accuracies, over several orders of the data (the split into
     * training and test rows moves with it): one order's test set is 297
     * images, a point is 3 of them, and fine-tuning alone moves an order's
     * accuracy by a point either way (the QAT control); the first order
     * (7) is the peer's (bench/peers/quant_torch.py), and the CNN's int8
     * forward is timed on its trained weights */
    static const int order[] = {7, 1, 2, 3, 4, 5, 6, 8, 9, 10};
    for (int k = 0; k < shuffles; k++) {
        digits d;
        if (digits_load(&d) != 0)
            return 1;
        SHUFFLE = order[k];
        digits_shuffle(&d, (uint64_t)SHUFFLE);
        LR = 0.1;
        cft_array *p0[MLP_NPARAMS], *p[MLP_NPARAMS], *pb[MLP_NPARAMS], *ones[MLP_NPARAMS],
            *masks[MLP_NPARAMS];
        mlp_init(3, p0);
        for (int l = 0; l < MLP_NPARAMS; l++)
            ones[l] = cft_ones_like(p0[l]), p[l] = pb[l] = p0[l];
        train(make_step(CFT_F32), &d, p, ones, epochs);
        double a32 = test_acc(&d, p);
        acc_line("f32", a32, a32);
        train(make_step(CFT_BF16), &d, pb, ones, epochs);
        acc_line("bf16_autocast", test_acc(&d, pb), a32);
        quant_lines(&d, p, a32);
        for (int l = 0; l < MLP_NPARAMS; l++) {
            masks[l] = l % 2 == 0 ? mask24(p[l]) : ones[l];
            p[l] = cft_mul(p[l], masks[l]);
        }
        acc_line("sparse24_pruned", test_acc(&d, p), a32);
        LR = 0.05;
        train(make_step(CFT_F32), &d, p, masks, epochs);
        acc_line("sparse24_finetuned", test_acc(&d, p), a32);
        cnn_lines(&d, epochs, rounds, k == 0);
        free(d.x), free(d.y);
    }
    conv_layer_speed(rounds);
    return 0;
}
