/* quantize_digits.c: int8 quantization of the digits MLP (64-128-128-10),
 * as torch's post-training quantization and quantization-aware training.
 *
 *   1. train in f32 (jitted SGD steps);
 *   2. PTQ: cft_quant_prepare with the X86 quantizer, calibrate on ten
 *      training batches (the observers record as the function runs),
 *      cft_quant_convert, test accuracy;
 *   3. QAT: two epochs of jitted SGD through the fake-quantized model (the
 *      observers keep following the activations inside the jitted step),
 *      convert, test accuracy;
 *   4. dynamic quantization (torch's quantize_dynamic): the f32 model with
 *      every product on int8 weights and rows of activations quantized on
 *      the fly, multiplied by oneDNN's integer GEMM;
 *   5. export the converted model (the weights inside, a symbolic batch
 *      dim) and write its inputs and expected outputs for cft-run:
 *
 *     build/examples/quantize_digits [--quick] [DIR]
 *     build/cft-run DIR/digits_int8.cftx DIR/digits_int8_in.safetensors \
 *         DIR/out.safetensors --jit --expect DIR/digits_int8_expected.safetensors
 *
 * The converted program (static quantization) rounds every product's
 * operands to the int8 grid and computes on f32 kernels: its accuracy is
 * the int8 model's, its speed is not an int8 kernel's. The dynamic one
 * runs int8 GEMMs. The program prints both speeds against f32.
 * Exits 1 when PTQ, QAT or dynamic quantization loses more than 2 points
 * of test accuracy. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mlp.h"

#define BATCH 32
#define NTRAIN 1500

static cft_array *weights[MLP_NPARAMS];

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* (params[6], x) -> logits */
static cft_status logits_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = mlp_logits(in, in[MLP_NPARAMS]);
    return CFT_OK;
}

/* (params[6], x, y) -> mean cross-entropy of the logits of env */
static cft_status loss_of(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *lg;
    cft_status st = cft_fn_call(env, in, &lg);
    out[0] = cft_mean(cft_cross_entropy(lg, in[MLP_NPARAMS + 1]), NULL, 0, false);
    return st;
}

/* (params[6], x, y) -> params after one SGD step on the loss env */
typedef struct {
    cft_fn *vg;
    double lr;
} sgd_env;
static cft_status sgd(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    const sgd_env *s = env;
    cft_array *r[1 + MLP_NPARAMS];
    cft_status st = cft_fn_call(s->vg, in, r);
    for (int l = 0; st == CFT_OK && l < MLP_NPARAMS; l++)
        out[l] = cft_sub(in[l], cft_mul_s(r[1 + l], s->lr));
    return st;
}

static cft_fn *sgd_step(cft_fn *logits, double lr) {
    static const int argn[MLP_NPARAMS] = {0, 1, 2, 3, 4, 5};
    sgd_env *s = cft_alloc(sizeof *s);
    s->vg = cft_value_and_grad(cft_fn_new(loss_of, logits, MLP_NPARAMS + 2, 1), argn, MLP_NPARAMS,
                               false);
    s->lr = lr;
    return cft_jit(cft_fn_new(sgd, s, MLP_NPARAMS + 2, MLP_NPARAMS));
}

static void epochs(cft_fn *step, const digits *d, cft_array **p, int n) {
    for (int e = 0; e < n; e++)
        for (int b = 0; b + BATCH <= NTRAIN; b += BATCH) {
            cft_array *in[MLP_NPARAMS + 2], *np[MLP_NPARAMS];
            memcpy(in, p, sizeof(cft_array *) * MLP_NPARAMS);
            in[MLP_NPARAMS] = cft_from_data(d->x + b * 64, CFT_F32, (int64_t[]){BATCH, 64}, 2);
            in[MLP_NPARAMS + 1] = cft_from_data(d->y + b, CFT_I32, (int64_t[]){BATCH}, 1);
            cft_fn_call(step, in, np);
            memcpy(p, np, sizeof np);
        }
}

static double accuracy(cft_fn *logits, const digits *d, cft_array **p) {
    int nt = d->n - NTRAIN;
    cft_array *in[MLP_NPARAMS + 1];
    memcpy(in, p, sizeof(cft_array *) * MLP_NPARAMS);
    in[MLP_NPARAMS] = cft_from_data(d->x + NTRAIN * 64, CFT_F32, (int64_t[]){nt, 64}, 2);
    return mlp_accuracy(cft_fn_call1(logits, in),
                        cft_from_data(d->y + NTRAIN, CFT_I32, (int64_t[]){nt}, 1));
}

/* x -> logits of the converted model, its weights closed over */
static cft_status deployed(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *a[MLP_NPARAMS + 1];
    memcpy(a, weights, sizeof weights);
    a[MLP_NPARAMS] = in[0];
    return cft_fn_call(env, a, out);
}

int main(int argc, char **argv) {
    cft_init();
    bool quick = false;
    const char *dir = ".";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else
            dir = argv[i];
    }
    digits d;
    if (digits_load(&d) != 0)
        return 1;
    digits_shuffle(&d, 7);
    cft_array *p[MLP_NPARAMS];
    mlp_init(3, p);
    cft_fn *logits = cft_fn_new(logits_fn, NULL, MLP_NPARAMS + 1, 1);

    //! [train]
    epochs(sgd_step(logits, 0.1), &d, p, quick ? 6 : 10);
    double a32 = accuracy(logits, &d, p);
    printf("f32 model:       test accuracy %.4f\n", a32);
    //! [train]

    //! [ptq]
    cft_quantizer qz = cft_quantizer_x86(); /* u8 activations, s8 per-channel weights */
    cft_quant *ptq = cft_quant_prepare(logits, &qz);
    cft_fn *observe = cft_quant_observer_fn(ptq);
    for (int b = 0; b < 10; b++) { /* calibration: ten training batches */
        cft_array *in[MLP_NPARAMS + 1];
        memcpy(in, p, sizeof(cft_array *) * MLP_NPARAMS);
        in[MLP_NPARAMS] = cft_from_data(d.x + b * BATCH * 64, CFT_F32, (int64_t[]){BATCH, 64}, 2);
        cft_fn_call1(observe, in);
    }
    cft_fn *int8 = cft_quant_convert(ptq);
    double aptq = accuracy(int8, &d, p);
    printf("int8 after PTQ:  test accuracy %.4f (%+.2f points), %d quantized operands\n", aptq,
           100 * (aptq - a32), cft_quant_num_sites(ptq));
    //! [ptq]

    //! [qat]
    cft_quant *qat = cft_quant_prepare(logits, &qz);
    cft_array *pq[MLP_NPARAMS];
    memcpy(pq, p, sizeof pq);
    epochs(sgd_step(cft_quant_qat_fn(qat), 0.02), &d, pq, 2);
    cft_fn *int8q = cft_quant_convert(qat);
    double aqat = accuracy(int8q, &d, pq);
    printf("int8 after QAT:  test accuracy %.4f (%+.2f points)\n", aqat, 100 * (aqat - a32));
    //! [qat]

    //! [dynamic]
    memcpy(weights, p, sizeof weights);
    cft_fn *f32_model = cft_fn_new(deployed, logits, 1, 1);
    cft_fn *dyn = cft_quant_dynamic(f32_model); /* the weights pack once, when traced */
    int nt = d.n - NTRAIN;
    cft_array *x = cft_from_data(d.x + NTRAIN * 64, CFT_F32, (int64_t[]){nt, 64}, 2);
    cft_array *yt = cft_from_data(d.y + NTRAIN, CFT_I32, (int64_t[]){nt}, 1);
    double adyn = mlp_accuracy(cft_fn_call1(dyn, &x), yt);
    printf("int8 dynamic:    test accuracy %.4f (%+.2f points)\n", adyn, 100 * (adyn - a32));
    //! [dynamic]

    //! [export]
    memcpy(weights, pq, sizeof weights);
    cft_fn *model = cft_fn_new(deployed, int8q, 1, 1);
    char path[1024], in_path[1024], exp_path[1024];
    snprintf(path, sizeof path, "%s/digits_int8.cftx", dir);
    snprintf(in_path, sizeof in_path, "%s/digits_int8_in.safetensors", dir);
    snprintf(exp_path, sizeof exp_path, "%s/digits_int8_expected.safetensors", dir);
    cft_aval av = {CFT_F32, 2, {cft_dim_sym("B"), 64}};
    if (cft_export(model, &av, path) != CFT_OK) {
        printf("export failed: %s\n", cft_last_error_message());
        return 1;
    }
    cft_array *y = cft_fn_call1(cft_jit(cft_load_exported(path)), &x);
    const char *xn = "x", *yn = "out.0";
    cft_save_safetensors(in_path, cft_tree_from(&xn, &x, 1), NULL, 0);
    cft_save_safetensors(exp_path, cft_tree_from(&yn, &y, 1), NULL, 0);
    printf("exported %s (batch dim B); wrote %s and %s for cft-run\n", path, in_path, exp_path);
    //! [export]

    //! [speed]
    /* f32, the static int8 program, the dynamic one: rounds alternated,
     * the best round of each kept */
    memcpy(weights, p, sizeof weights);
    cft_fn *jf = cft_jit(f32_model), *jq = cft_jit(cft_fn_new(deployed, int8, 1, 1)),
           *jd = cft_jit(dyn);
    cft_fn *fs[3] = {jf, jq, jd};
    double best[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < (quick ? 3 : 20); r++)
        for (int k = 0; k < 3; k++) {
            double t0 = now_ms();
            for (int i = 0; i < 20; i++)
                cft_item_at(cft_fn_call1(fs[k], &x), 0);
            double t = (now_ms() - t0) / 20;
            best[k] = t < best[k] ? t : best[k];
        }
    printf("forward of %d rows: f32 %.3f ms; static int8 program %.3f ms (%.2fx); dynamic int8 "
           "%.3f ms (%.2fx)\n",
           nt, best[0], best[1], best[1] / best[0], best[2], best[2] / best[0]);
    //! [speed]
    return aptq < a32 - 0.02 || aqat < a32 - 0.02 || adyn < a32 - 0.02;
}
