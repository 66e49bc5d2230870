/* test_device_graph.c: a jitted function's plan on a device recorded once
 * and replayed (lower/jit_graph.c), on the test backend, whose recordings
 * (tests/support/test_graph.c) replay the recorded kernels, operations and
 * copies on the recorded device pointers, as a CUDA graph does: a buffer
 * the jit let go of while a recording still points at it gives wrong
 * values here.
 *
 * Checked, every value against the host (f32: 1e-5; the same kernels
 * run): the third call of a jitted function captures and each later call
 * replays, with new input values every call (inputs are copied in, not
 * baked in); an earlier call's outputs keep their values after later
 * calls (outputs are copied out); per-sample gradients replayed; a plan
 * with an operation the host must run (a sort) is not captured and runs
 * step by step; a view as input runs step by step for that call; four
 * threads replaying one plan at once, each with its own inputs; a
 * recording released once its plan is collected. The
 * device is CFT_TEST_DEVICE (default test:0); ctest also runs it as
 * gpu_graph on cuda:0, which skips (77) without a GPU, the counts then
 * unchecked. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/mem.h" /* cft__collect */
#include "support/test_backend.h"

/* (sum(tanh(x @ w + b)^2), its gradient in w and b) */
static cft_status net(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[2], in[0]), in[1]));
    out[0] = cft_sum(cft_square(h), NULL, 0, false);
    return CFT_OK;
}

/* sort(x) * 2 (a sort runs on the test backend's host fallback) */
static cft_status big_exp(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_exp(in[0]);
    return CFT_OK;
}

static cft_status sorted(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul_s(cft_sort(in[0], -1, false), 2.0);
    return CFT_OK;
}

static cft_array *rnd(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd);
}

static cft_fn *vg;
static const cft_dev *dev;

typedef struct {
    int seed, bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int it = 0; it < 10; it++) {
        cft_array *host[3] = {rnd(100 + (uint64_t)w->seed, (int64_t[]){16, 8}, 2),
                              rnd(200 + (uint64_t)it, (int64_t[]){8}, 1),
                              rnd(300 + (uint64_t)(w->seed * 10 + it), (int64_t[]){32, 16}, 2)};
        cft_array *din[3], *want[3], *got[3];
        for (int i = 0; i < 3; i++)
            din[i] = cft_device_put(host[i], dev);
        if (cft_fn_call(vg, host, want) != CFT_OK || cft_fn_call(vg, din, got) != CFT_OK) {
            w->bad++;
            continue;
        }
        for (int k = 0; k < 3; k++)
            w->bad += cft_max_abs_diff(got[k], want[k]) > 1e-4;
    }
    return NULL;
}

/* a fresh jitted function called three times on d (the third records),
 * then dropped */
__attribute__((noinline)) static void recorded_once(const cft_dev *d, cft_array *w, cft_array *b) {
    cft_fn *f = cft_jit(cft_fn_new(net, NULL, 3, 1));
    cft_array *in[3] = {cft_device_put(w, d), cft_device_put(b, d),
                        cft_device_put(rnd(90, (int64_t[]){32, 16}, 2), d)},
              *out;
    for (int i = 0; i < 3; i++)
        cft_fn_call(f, in, &out);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    const char *name = getenv("CFT_TEST_DEVICE") ? getenv("CFT_TEST_DEVICE") : "test:0";
    bool test = !strncmp(name, "test", 4);
    if (test && test_backend_register() != 0)
        return 1;
    const cft_dev *d = dev = cft_device(name);
    if (cft_device_error(d)) {
        printf("test_device_graph on %s: skipped: %s\n", name,
               cft_error_message(cft_device_error(d)));
        return 77;
    }
    vg = cft_jit(cft_value_and_grad(cft_fn_new(net, NULL, 3, 1), (int[]){0, 1}, 2, false));
    cft_array *w = rnd(1, (int64_t[]){16, 8}, 2), *b = rnd(2, (int64_t[]){8}, 1);
    TEST("the third call captures, later calls replay, with new inputs every call") {
        cft_array *keep_out = NULL, *keep_want = NULL;
        for (int call = 0; call < 8; call++) {
            cft_array *x = rnd(10 + (uint64_t)call, (int64_t[]){32, 16}, 2);
            cft_array *host[3] = {w, b, x}, *din[3], *want[3], *got[3];
            for (int i = 0; i < 3; i++)
                din[i] = cft_device_put(host[i], d);
            CHECK_EQ(cft_fn_call(vg, host, want), CFT_OK);
            test_backend_counts c0 = test_backend_counts_now();
            CHECK_EQ(cft_fn_call(vg, din, got), CFT_OK);
            test_backend_counts c1 = test_backend_counts_now();
            CHECK_MSG(!test || c1.graphs - c0.graphs == (call >= 2), "call %d: %ld replays", call,
                      c1.graphs - c0.graphs);
            if (test && call >= 3) /* a replay: no operation dispatched, no host copies */
                CHECK_MSG(c1.runs == c0.runs && c1.to_host == c0.to_host &&
                              c1.to_device == c0.to_device,
                          "call %d: %ld operations, %ld copies out, %ld in", call,
                          c1.runs - c0.runs, c1.to_host - c0.to_host, c1.to_device - c0.to_device);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-5);
            if (call == 3)
                keep_out = got[1], keep_want = want[1];
        }
        /* an output of the fourth call, after four more replays */
        CHECK_ARRAY_CLOSE(keep_out, keep_want, 1e-5, 1e-5);
    }
    TEST("per-sample gradients replayed") {
        cft_fn *psg = cft_jit(cft_vmap(cft_grad(cft_fn_new(net, NULL, 3, 1), (int[]){0, 1}, 2),
                                       (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0}, NULL));
        test_backend_counts c0 = test_backend_counts_now();
        for (int call = 0; call < 5; call++) {
            cft_array *x = rnd(40 + (uint64_t)call, (int64_t[]){12, 4, 16}, 3);
            cft_array *host[3] = {w, b, x}, *din[3], *want[2], *got[2];
            for (int i = 0; i < 3; i++)
                din[i] = cft_device_put(host[i], d);
            CHECK_EQ(cft_fn_call(psg, host, want), CFT_OK);
            CHECK_EQ(cft_fn_call(psg, din, got), CFT_OK);
            for (int k = 0; k < 2; k++)
                CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-5);
        }
        if (test)
            CHECK_EQ(test_backend_counts_now().graphs - c0.graphs, 3);
    }
    TEST("a plan that would copy more than 4 MiB a step in and out is not replayed") {
        /* exp over 2M floats: one step, 8 MB in and 8 MB out; the copies
         * in and out of a recording would cost more than the launch saved */
        cft_fn *f = cft_jit(cft_fn_new(big_exp, NULL, 1, 1));
        cft_array *x = cft_mul_s(rnd(70, (int64_t[]){2048, 1024}, 2), 0.1);
        cft_array *dx = cft_device_put(x, d), *want = cft_exp(x);
        cft_device_counters k0, k1;
        for (int call = 0; call < 5; call++) {
            if (call == 4)
                cft_device_counters_of(d, &k0);
            cft_array *got = NULL;
            CHECK_EQ(cft_fn_call(f, &dx, &got), CFT_OK);
            if (call == 4)
                cft_device_counters_of(d, &k1);
            CHECK_ARRAY_CLOSE(got, want, 1e-6, 1e-6);
        }
        CHECK_EQ((long)(k1.graphs - k0.graphs), 0);
        CHECK_EQ((long)(k1.d2d - k0.d2d), 0); /* nothing copied in or out */
        CHECK_EQ((long)(k1.kernels - k0.kernels), 1);
    }
    TEST("an operation the host must run: not captured, step by step, right values") {
        cft_fn *f = cft_jit(cft_fn_new(sorted, NULL, 1, 1));
        test_backend_counts c0 = test_backend_counts_now();
        for (int call = 0; call < 5; call++) {
            cft_array *x = rnd(60 + (uint64_t)call, (int64_t[]){4, 9}, 2), *got;
            CHECK_EQ(cft_fn_call(f, (cft_array *[]){cft_device_put(x, d)}, &got), CFT_OK);
            CHECK_ARRAY_CLOSE(got, cft_mul_s(cft_sort(x, -1, false), 2.0), 0, 0);
        }
        if (test)
            CHECK_EQ(test_backend_counts_now().graphs - c0.graphs, 0);
    }
    TEST("a view as input: that call runs step by step") {
        cft_array *x = rnd(70, (int64_t[]){16, 32}, 2);
        cft_array *host[3] = {w, b, cft_mT(x)}, *want[3], *got[3];
        cft_array *din[3] = {cft_device_put(w, d), cft_device_put(b, d),
                             cft_mT(cft_device_put(x, d))};
        test_backend_counts c0 = test_backend_counts_now();
        CHECK_EQ(cft_fn_call(vg, din, got), CFT_OK);
        if (test)
            CHECK_EQ(test_backend_counts_now().graphs - c0.graphs, 0);
        CHECK_EQ(cft_fn_call(vg, host, want), CFT_OK);
        for (int k = 0; k < 3; k++)
            CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-5);
    }
#ifndef CFT_GC_OFF
    if (test)
        TEST("a recording goes when its plan is collected") {
            test_backend_counts c0 = test_backend_counts_now();
            for (int k = 0; k < 6; k++)
                recorded_once(d, w, b);
            CHECK_EQ(test_backend_counts_now().graphs - c0.graphs, 6);
            for (int i = 0; i < 5; i++)
                cft__collect();
            cft_device_synchronize(d); /* drains the release queue */
            CHECK_MSG(test_backend_counts_now().graphs_released - c0.graphs_released >= 3,
                      "%ld of 6 recordings released",
                      test_backend_counts_now().graphs_released - c0.graphs_released);
        }
#endif
    TEST("four threads replaying one plan at once, each its own inputs") {
        pthread_t th[4];
        worker ws[4];
        for (int t = 0; t < 4; t++) {
            ws[t] = (worker){t, 0};
            pthread_create(&th[t], NULL, work, &ws[t]);
        }
        for (int t = 0; t < 4; t++) {
            pthread_join(th[t], NULL);
            CHECK_MSG(ws[t].bad == 0, "thread %d: %d wrong", t, ws[t].bad);
        }
    }
    return check_summary();
}
