/* dp_sgd.c (bench): one DP-SGD clipped gradient sum (per-example gradients
 * each clipped to norm C, summed) for the MLP 64-128-128-10 of
 * examples/mlp.h and the CNN of cnn.h, at B = 256 and 1024, against the
 * plain batched gradient of the same loss (grad of the batch mean, jitted)
 * in the same run. Methods:
 *   cft_jit_dp_clipped_grad_sum: the library call; the jit's rewrite pass
 *     computes dense layers' norms and sums from their factors;
 *   cft_jit_dp_materialised: the same program with the rewrite off
 *     (CFT_JIT_REWRITE=0 while it compiles): [B, P] per-sample gradients.
 * Also the largest difference between the two (f32). JSON lines;
 * ratio_to_baseline = method / batched gradient (medians). Threads: --threads N.
 * --device NAME: the clipped sum and the batched gradient on that device
 * instead (bench_on_device: against the host, with per-call counters). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../examples/mlp.h"
#include "bench.h"
#include "cnn.h"

typedef struct {
    cft_fn *f;
    cft_array **in;
    int nout;
} job;

static void run(void *p) {
    job *j = p;
    cft_array *out[8];
    cft_fn_call(j->f, j->in, out);
}

static double median_of(cft_fn *f, cft_array **in, int nout) {
    job j = {f, in, nout};
    double med, mn;
    timeit(run, &j, &med, &mn);
    return med;
}

static void bench_model(const char *model,
                        cft_status (*loss_cb)(void *, int, cft_array *const *, int, cft_array **),
                        int np, cft_array **params, const digits *d, int B, bool image,
                        const cft_dev *dev) {
    cft_array *in[8];
    memcpy(in, params, sizeof(cft_array *) * (size_t)np);
    float *x = malloc(sizeof(float) * 64 * (size_t)B);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)B);
    for (int i = 0; i < B; i++) {
        memcpy(x + i * 64, d->x + (i % d->n) * 64, sizeof(float) * 64);
        y[i] = d->y[i % d->n];
    }
    in[np] = image ? cft_from_f32(x, (int64_t[]){B, 1, 8, 8}, 4)
                   : cft_from_f32(x, (int64_t[]){B, 64}, 2);
    in[np + 1] = cft_from_i32(y, (int64_t[]){B}, 1);
    cft_fn *loss = cft_fn_new(loss_cb, NULL, np + 2, 1);
    int argnums[8];
    for (int i = 0; i < np; i++)
        argnums[i] = i;
    if (dev) { /* --device: the clipped sum and the batched gradient there */
        char cfg[96];
        snprintf(cfg, sizeof cfg, "\"model\": \"%s\", \"B\": %d", model, B);
        bench_on_device("dp_sgd", cfg, "cft_dp_clipped_grad_sum",
                        cft_dp_clipped_grad_sum(loss, np, 1.0), np + 2, in, np, dev);
        bench_on_device("dp_sgd", cfg, "cft_jit_batched_grad", cft_grad(loss, argnums, np), np + 2,
                        in, np, dev);
        free(x);
        free(y);
        return;
    }
    cft_fn *batched = cft_jit(cft_grad(loss, argnums, np));
    cft_fn *dp = cft_dp_clipped_grad_sum(loss, np, 1.0);
    cft_fn *mat = cft_dp_clipped_grad_sum(loss, np, 1.0);
    cft_array *a[8], *b[8];
    cft_fn_call(dp, in, a);
    setenv("CFT_JIT_REWRITE", "0", 1); /* read when the first call compiles */
    cft_fn_call(mat, in, b);
    unsetenv("CFT_JIT_REWRITE");
    double diff = 0;
    for (int l = 0; l < np; l++)
        diff = fmax(diff, cft_max_abs_diff(a[l], b[l]));
    double tb = median_of(batched, in, np), td = median_of(dp, in, np), tm = median_of(mat, in, np);
    const char *fmt = "{\"bench\": \"dp_sgd\", \"config\": {\"model\": \"%s\", \"B\": %d}, "
                      "\"method\": \"%s\", \"median_ms\": %.4f, \"threads\": %d, \"baseline\": "
                      "\"cft_jit_batched_grad\", \"baseline_median_ms\": %.4f, "
                      "\"ratio_to_baseline\": %.3f, \"max_abs_diff_fused_vs_materialised\": "
                      "%.2e}\n";
    printf(fmt, model, B, "cft_jit_dp_clipped_grad_sum", td, bench_nthreads, tb, td / tb, diff);
    printf(fmt, model, B, "cft_jit_dp_materialised", tm, bench_nthreads, tb, tm / tb, diff);
    fflush(stdout);
    char cfg[96];
    snprintf(cfg, sizeof cfg, "\"model\": \"%s\", \"B\": %d", model, B);
    job j = {dp, in, np};
    bench_scaling("dp_sgd", cfg, "cft_jit_dp_clipped_grad_sum", run, &j, 40);
    free(x);
    free(y);
}

int main(int argc, char **argv) {
    bench_threads(argc, argv); /* and cft_init */
    digits d;
    if (digits_load(&d))
        return 1;
    cft_array *mlp[MLP_NPARAMS], *cnn[CNN_NPARAMS];
    mlp_init(1, mlp);
    cnn_init(cnn);
    const int Bs[2] = {256, 1024};
    const cft_dev *dev = bench_device(argc, argv);
    for (int k = 0; k < 2; k++) {
        bench_model("mlp 64-128-128-10", mlp_loss, MLP_NPARAMS, mlp, &d, Bs[k], false, dev);
        bench_model("cnn conv3x3x8-relu-linear", cnn_loss, CNN_NPARAMS, cnn, &d, Bs[k], true, dev);
    }
    return 0;
}
