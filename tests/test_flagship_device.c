/* test_flagship_device.c: the three flagship programs with their inputs on
 * a device, against the same programs on the host: per-sample gradients
 * (vmap of grad of an MLP loss, 16 examples), a second-order MAML
 * meta-step (value_and_grad through 2 inner SGD steps of 8 tasks, the
 * model of examples/maml.h, then Adam), and an ensemble of 8 MLPs (vmap
 * of value_and_grad over stacked parameters, shared data); each also
 * under cft_jit, called four times: the second call must move nothing
 * between the host and the device, the third and fourth replay the plan's
 * recording (on the test backend). Every output must be on the device and equal the host's
 * (f32: rtol 1e-5, atol 1e-6; on the test backend the same host kernels
 * run, so they agree far closer). The device is CFT_TEST_DEVICE, default
 * test:0 (tests/support/test_backend.c); ctest runs it there and as
 * gpu_flagship on cuda:0, which skips (77) without a GPU. */
#include <string.h>

#include "../examples/maml.h"
#include "check.h"
#include "support/test_backend.h"

/* mean((tanh(x @ w1 + b1) @ w2 - y)^2) */
static cft_status mlp_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[3], in[0]), in[1]));
    out[0] = cft_mean(cft_square(cft_sub(cft_matmul(h, in[2]), in[4])), NULL, 0, false);
    return CFT_OK;
}

static cft_array *rnd(uint64_t seed, const int64_t *shape, int nd, double scale) {
    return cft_mul_s(cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd), scale);
}

/* f on the host and on d (plain and jitted): every output on d, equal */
static void same(cft_fn *f, int nin, cft_array *const *in, int nout, const cft_dev *d) {
    cft_array *din[32], *want[32], *got[32];
    for (int i = 0; i < nin; i++)
        din[i] = cft_device_put(in[i], d);
    CHECK_EQ(cft_fn_call(f, in, want), CFT_OK);
    for (int pass = 0; pass < 5; pass++) { /* plain; jitted 4 times (the third captures) */
        static cft_fn *g;
        g = pass == 0 ? f : pass == 1 ? cft_jit(f) : g;
        bool test = !strncmp(cft_device_name(d), "test", 4);
        test_backend_counts c0 = test ? test_backend_counts_now() : (test_backend_counts){0};
        CHECK_EQ(cft_fn_call(g, din, got), CFT_OK);
        if (pass == 4 && test)
            printf("  the fourth jitted call: %ld replays\n",
                   test_backend_counts_now().graphs - c0.graphs);
        if (pass == 2 && test) { /* the jitted program again: all on the device */
            test_backend_counts c1 = test_backend_counts_now();
            printf("  a second jitted call: %ld copies in, %ld out, %ld kernels, %ld runs\n",
                   c1.to_device - c0.to_device, c1.to_host - c0.to_host, c1.kernels - c0.kernels,
                   c1.runs - c0.runs);
            const char *kern = getenv("TEST_BACKEND_KERNELS");
            if (!kern || strcmp(kern, "0")) /* constants kept there, views, GEMMs, kernels */
                CHECK_MSG(c1.to_device == c0.to_device && c1.to_host == c0.to_host,
                          "%ld copies to the device and %ld to the host in one call",
                          c1.to_device - c0.to_device, c1.to_host - c0.to_host);
        }
        for (int k = 0; k < nout; k++) {
            CHECK_MSG(!strcmp(cft_device_name(cft_device_of(got[k])), cft_device_name(d)),
                      "%s output %d on %s", pass ? "jit" : "plain", k,
                      cft_device_name(cft_device_of(got[k])));
            CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-6);
        }
    }
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    const char *name = getenv("CFT_TEST_DEVICE") ? getenv("CFT_TEST_DEVICE") : "test:0";
    if (!strncmp(name, "test", 4) && test_backend_register() != 0)
        return 1;
    cft_dev *d = cft_device(name);
    if (cft_device_error(d)) {
        printf("test_flagship_device on %s: skipped: %s\n", name,
               cft_error_message(cft_device_error(d)));
        return 77;
    }
    TEST("per-sample gradients on %s", name) {
        cft_array *in[5] = {rnd(1, (int64_t[]){8, 16}, 2, 0.3), rnd(2, (int64_t[]){16}, 1, 0.1),
                            rnd(3, (int64_t[]){16, 2}, 2, 0.3), rnd(4, (int64_t[]){16, 8}, 2, 1),
                            rnd(5, (int64_t[]){16, 2}, 2, 1)};
        cft_fn *psg =
            cft_vmap(cft_grad(cft_fn_new(mlp_loss, NULL, 5, 1), (int[]){0, 1, 2}, 3),
                     (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL);
        same(psg, 5, in, 3, d);
    }
    TEST("a MAML meta-step (2 inner steps, 8 tasks, Adam) on %s", name) {
        enum { T = 8 };
        cft_array *in[3 * NP + 6];
        mlp_init(1, in);
        for (int l = 0; l < NP; l++)
            in[NP + l] = in[2 * NP + l] = cft_zeros_like(in[l]);
        in[3 * NP] = cft_scalar(1 / (1 - BETA1), CFT_F32);
        in[3 * NP + 1] = cft_scalar(1 / (1 - BETA2), CFT_F32);
        for (int k = 0; k < 4; k++) /* xs, ys, xq, yq: [T, K_SHOT, 1] */
            in[3 * NP + 2 + k] = rnd(10 + (uint64_t)k, (int64_t[]){T, K_SHOT, 1}, 3, 2);
        int argnums[NP] = {0, 1, 2, 3, 4, 5};
        cft_fn *meta = cft_fn_new(maml_objective, per_task_losses(2, false), NP + 4, 1);
        cft_fn *step = cft_fn_new(adam_step, cft_value_and_grad(meta, argnums, NP, false),
                                  3 * NP + 6, 3 * NP + 1);
        same(step, 3 * NP + 6, in, 3 * NP + 1, d);
    }
    TEST("an ensemble of 8 MLPs, forward and backward, on %s", name) {
        enum { M = 8 };
        cft_array *in[5] = {rnd(21, (int64_t[]){M, 8, 16}, 3, 0.3),
                            rnd(22, (int64_t[]){M, 16}, 2, 0.1),
                            rnd(23, (int64_t[]){M, 16, 2}, 3, 0.3),
                            rnd(24, (int64_t[]){32, 8}, 2, 1), rnd(25, (int64_t[]){32, 2}, 2, 1)};
        cft_fn *vg =
            cft_value_and_grad(cft_fn_new(mlp_loss, NULL, 5, 1), (int[]){0, 1, 2}, 3, false);
        cft_fn *ens = cft_vmap(vg, (int[]){0, 0, 0, CFT_NOT_BATCHED, CFT_NOT_BATCHED}, NULL);
        same(ens, 5, in, 4, d);
    }
    if (!strncmp(name, "test", 4)) /* it did run there: operations went through the table */
        TEST("the programs ran on %s (the backend's counts)", name) {
            test_backend_counts c = test_backend_counts_now();
            CHECK_MSG(c.runs > 300 && c.to_device > 300, "%ld runs, %ld copies in", c.runs,
                      c.to_device);
            printf("  %ld of %ld dot_generals ran as the backend's GEMMs; %ld fused kernels ran "
                   "there\n",
                   c.gemms, c.dots, c.kernels);
            const char *k = getenv("TEST_BACKEND_KERNELS");
            if (!k || strcmp(k, "0"))
                CHECK_MSG(c.kernels > 20, "%ld fused kernels", c.kernels);
            CHECK_MSG(c.gemms > 50, "%ld products ran as the backend's GEMMs", c.gemms);
            const char *gr = getenv("TEST_BACKEND_GRAPHS");
            if ((!k || strcmp(k, "0")) && (!gr || strcmp(gr, "0"))) /* each program replayed */
                CHECK_MSG(c.graphs >= 6, "%ld graph replays", c.graphs);
        }
    return check_summary();
}
