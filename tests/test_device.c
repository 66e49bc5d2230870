/* test_device.c: devices and the backend table (cft/device.h), on the
 * "test" backend (tests/support/test_backend.c): its memory is unreadable
 * to the host except inside its own copies, so every check here that
 * completes shows that no host code read or wrote device memory behind
 * the table's back, and the backend counts every transfer.
 *
 * Checked: device names and their errors (unknown backend, index out of
 * range, the CUDA backend unavailable here, a failed device refused by
 * every call); cft_device_put both ways and cft_device_of; eager ops on a
 * device giving the host's values (exactly: the same host kernels run, so
 * tolerance 0) with results on the device; uncommitted host arrays (a
 * scalar, constants) moving to the device, two committed devices in one
 * op refused with both named; grad, vmap of grad (per-sample gradients),
 * jvp, jacrev, hessian and cft_jit on device inputs against the host
 * (1e-6 f32: the same kernels, but a transform may order sums
 * differently on the host path through the jit's fused kernels), the jit
 * running its fused groups as the backend's kernels, and primitive by
 * primitive on a backend of the first abi (no run_kernel); the
 * transfers of one op counted; shape operations on a device as device
 * views, a reshape of a transposed view copied by a kernel (no host
 * transfer); and a read of device memory by the host crashing (in a
 * child process), the guarantee the rest rests on. */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "array/array.h" /* the payload pointer, for the one read that must crash */
#include "check.h"
#include "support/test_backend.h"

/* mean((tanh(x @ w + b) - y)^2): w [4, 3], b [3], x [5, 4] (or [4]), y [5, 3] */
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[2], in[0]), in[1]));
    out[0] = cft_mean(cft_square(cft_sub(h, in[3])), NULL, 0, false);
    return CFT_OK;
}

/* sum(sin(v) * v^2) */
static cft_status scalar_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul(cft_sin(in[0]), cft_square(in[0])), NULL, 0, false);
    return CFT_OK;
}

static cft_array *rnd(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd);
}

/* (x, values, meta, ct) -> <ct, x W^T>, W the 2:4 weight of (values, meta) */
static cft_status s24_dot(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_sparse24 s = {in[1], in[2]};
    out[0] = cft_sum(cft_mul(cft_sparse24_linear(in[0], s), in[3]), NULL, 0, false);
    return CFT_OK;
}

/* the gradients of that with respect to x and the values, in g[0], g[1] */
static void s24_grads(cft_array *x, cft_sparse24 s, cft_array *ct, cft_array **g) {
    cft_fn *gf = cft_grad(cft_fn_new(s24_dot, NULL, 4, 1), (int[]){0, 1}, 2);
    cft_fn_call(gf, (cft_array *[]){x, s.values, s.meta, ct}, g);
}

/* long reductions of a fused chain, with an elementwise output beside
 * them: sums, maxima (one row with a NaN), minima and products over rows
 * of 5000 (a block per output on a GPU), over 3 rows of 2 (a thread per
 * output) and over everything */
static cft_status long_red(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *t = cft_tanh(cft_mul_s(in[0], 0.5));
    out[0] = cft_sum(t, (int[]){1}, 1, false);
    out[1] = cft_max(t, (int[]){1}, 1, false);
    out[2] = cft_min(cft_mul(t, in[0]), (int[]){1}, 1, false);
    out[3] = cft_prod(cft_add_s(cft_mul_s(t, 1e-4), 1.0), (int[]){1}, 1, false);
    out[4] = cft_sum(t, NULL, 0, false);
    out[5] = cft_sum(t, (int[]){0}, 1, false);
    out[6] = cft_exp(t);
    return CFT_OK;
}

/* reductions over leading, trailing and split dims of [a, 3, 37] (tiles
 * of outputs by shares on a GPU, coop_fns.h; two reduced dims take the
 * dividing path) */
static cft_status tiled_red(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *t = cft_sin(cft_mul_s(in[0], 0.5));
    out[0] = cft_sum(t, (int[]){0}, 1, false);
    out[1] = cft_max(t, (int[]){0}, 1, false);
    out[2] = cft_sum(t, (int[]){0, 2}, 2, false);
    out[3] = cft_min(t, (int[]){2}, 1, true);
    out[4] = cft_prod(cft_add_s(cft_mul_s(t, 1e-3), 1.0), (int[]){0, 1}, 2, false);
    return CFT_OK;
}

static cft_status col_sum(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul_s(in[0], 2.0), (int[]){0}, 1, false);
    return CFT_OK;
}

/* the Chrome trace of one call of f (with a read of its first output
 * when read_back), as text */
static char *traced_call(cft_fn *f, cft_array *const *in, cft_array **out, bool read_back) {
    char path[] = "/tmp/cft-device-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    cft_profile_start();
    CHECK_EQ(cft_fn_call(f, in, out), CFT_OK);
    if (read_back)
        (void)cft_item_at(out[0], 0);
    CHECK_EQ(cft_profile_stop(path), CFT_OK);
    FILE *tf = fopen(path, "r");
    char *text = calloc(1, 1 << 20);
    size_t n = tf ? fread(text, 1, (1 << 20) - 1, tf) : 0;
    if (tf)
        fclose(tf);
    text[n] = 0;
    unlink(path);
    return text;
}

static cft_status matmul2(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_matmul(in[0], in[1]);
    return CFT_OK;
}

/* (w [5, 2, 3, 3], x [8, 2, 12, 13]) -> sum(relu(conv(x, w))^2) */
static cft_status conv_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = cft_conv_general_dilated(in[1], in[0], (int64_t[]){1, 1},
                                            (int64_t[]){0, 0, 0, 0}, NULL, NULL, 1, 1);
    out[0] = cft_sum(cft_square(cft_relu(y)), NULL, 0, false);
    return CFT_OK;
}

static bool on(const cft_array *x, const char *dev) {
    return !strcmp(cft_device_name(cft_device_of(x)), dev);
}

/* every output of f on the device's inputs is on the device and equals the host's */
static void same_on_device(cft_fn *f, int nin, cft_array *const *host, int nout, const cft_dev *d,
                           double tol) {
    cft_array *dev_in[8], *want[8], *got[8];
    for (int i = 0; i < nin; i++)
        dev_in[i] = cft_device_put(host[i], d);
    CHECK_EQ(cft_fn_call(f, host, want), CFT_OK);
    CHECK_EQ(cft_fn_call(f, dev_in, got), CFT_OK);
    for (int k = 0; k < nout; k++) {
        CHECK_MSG(on(got[k], cft_device_name(d)), "output %d on %s", k,
                  cft_device_name(cft_device_of(got[k])));
        CHECK_ARRAY_CLOSE(got[k], want[k], tol, tol);
    }
}

/* several threads, each on a device of its own parity: grads equal the host's */
typedef struct {
    cft_fn *g;
    cft_array *const *in;
    cft_array *want[2];
    const char *dev;
    int bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    const cft_dev *d = cft_device(w->dev);
    for (int it = 0; it < 20; it++) {
        cft_array *din[4], *got[2];
        for (int i = 0; i < 4; i++)
            din[i] = cft_device_put(w->in[i], d);
        if (cft_fn_call(w->g, din, got) != CFT_OK)
            w->bad++;
        for (int k = 0; k < 2; k++)
            if (!on(got[k], w->dev) || cft_max_abs_diff(got[k], w->want[k]) > 1e-6)
                w->bad++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_array *w = rnd(1, (int64_t[]){4, 3}, 2), *b = rnd(2, (int64_t[]){3}, 1),
              *x = rnd(3, (int64_t[]){5, 4}, 2), *y = rnd(4, (int64_t[]){5, 3}, 2);
    TEST("device names: unknown backends, indices, the CUDA backend here") {
        cft_dev *d = cft_device("test:0");
        CHECK(cft_device_error(d) != NULL); /* not registered yet */
        CHECK(strstr(cft_error_message(cft_device_error(d)), "test") != NULL);
        CHECK_EQ(test_backend_register(), 0);
        CHECK(test_backend_register() != 0); /* the name is taken */
        CHECK(cft_device_error(cft_device("test:0")) == NULL);
        CHECK(cft_device("test:1") == cft_device("test:1")); /* one handle per device */
        CHECK(cft_device("test") == cft_device("test:0"));
        CHECK(!strcmp(cft_device_name(cft_device("test:1")), "test:1"));
        cft_array *e = cft_device_error(cft_device("test:2"));
        CHECK(e && strstr(cft_error_message(e), "no such device (test has 2)"));
        CHECK(cft_device_error(cft_device("test:x")) != NULL);
        CHECK(cft_device_error(cft_device("bad name")) != NULL);
        CHECK(cft_device_error(cft_device(NULL)) != NULL);
        CHECK(cft_device_error(cft_device("cpu")) == NULL);
        cft_dev *cuda = cft_device("cuda:0"); /* no GPU driver on the machines the tests run on */
        if (cft_device_error(cuda)) {
            const char *m = cft_error_message(cft_device_error(cuda));
            CHECK_MSG(strstr(m, "CUDA") || strstr(m, "cuda"), "%s", m);
            cft_array *r = cft_device_put(x, cuda); /* refused, not a crash */
            CHECK(cft_failed(r));
        }
        cft_backend bad;
        memset(&bad, 0, sizeof bad);
        bad.abi = CFT_BACKEND_ABI + 1, bad.name = "other";
        CHECK(cft_register_backend(&bad) != CFT_OK);
        CHECK(cft_register_backend(NULL) != CFT_OK);
    }
    const cft_dev *d0 = cft_device("test:0"), *d1 = cft_device("test:1"), *cpu = cft_device("cpu");
    TEST("cft_device_put both ways; reading values goes through the host") {
        cft_array *xd = cft_device_put(x, d0);
        CHECK(on(xd, "test:0") && on(x, "cpu"));
        CHECK(cft_device_put(xd, d0) == xd);
        CHECK_ARRAY_CLOSE(xd, x, 0, 0); /* read through to_host */
        cft_array *back = cft_device_put(xd, cpu);
        CHECK(on(back, "cpu"));
        CHECK_ARRAY_CLOSE(back, x, 0, 0);
        float v[20];
        CHECK_EQ(cft_copy_to(xd, CFT_F32, v), CFT_OK);
        CHECK(v[7] == (float)cft_item_at(x, 7));
        test_backend_counts c0 = test_backend_counts_now();
        CHECK(cft_item_at(xd, 19) == cft_item_at(x, 19));
        test_backend_counts c1 = test_backend_counts_now(); /* one element, not the array */
        CHECK_EQ(c1.bytes_to_host - c0.bytes_to_host, 4);
        CHECK(on(cft_device_put(cft_device_put(x, d0), d1), "test:1"));
    }
    TEST("ops on a device: the host's values, results on the device, transfers counted") {
        cft_array *wd = cft_device_put(w, d0), *bd = cft_device_put(b, d0),
                  *xd = cft_device_put(x, d0);
        cft_array *hd = cft_tanh(cft_add(cft_matmul(xd, wd), bd)),
                  *h = cft_tanh(cft_add(cft_matmul(x, w), b));
        CHECK(on(hd, "test:0"));
        CHECK_ARRAY_CLOSE(hd, h, 0, 0);
        test_backend_counts c0 = test_backend_counts_now();
        cft_array *s = cft_add(hd, hd);
        test_backend_counts c1 = test_backend_counts_now();
        CHECK(!cft_failed(s));
        CHECK_EQ(c1.runs - c0.runs, 1);
        CHECK_EQ(c1.to_host - c0.to_host, 2);     /* each operand, out */
        CHECK_EQ(c1.to_device - c0.to_device, 1); /* the result, in */
        CHECK(c1.allocs - c0.allocs <= 1);        /* the result: carved, or a new segment */
        /* an uncommitted host scalar moves to the device */
        cft_array *t = cft_mul_s(hd, 2.0);
        CHECK(on(t, "test:0"));
        CHECK_ARRAY_CLOSE(t, cft_mul_s(h, 2.0), 0, 0);
        CHECK(on(cft_add(hd, b), "test:0")); /* b: uncommitted host array */
    }
    TEST("shape operations on a device: views, or a copy by the device's kernel") {
        cft_array *xd = cft_device_put(x, d0), *bd = cft_device_put(b, d0);
        test_backend_counts c0 = test_backend_counts_now();
        cft_array *t = cft_mT(xd), *e = cft_expand_dims(bd, 0),
                  *bc = cft_broadcast_to(bd, (int64_t[]){5, 3}, 2),
                  *r = cft_reshape(xd, (int64_t[]){2, 10}, 2);
        test_backend_counts c1 = test_backend_counts_now();
        CHECK(on(t, "test:0") && on(e, "test:0") && on(bc, "test:0") && on(r, "test:0"));
        CHECK_EQ(c1.runs - c0.runs, 0); /* views: the backend did nothing */
        CHECK_EQ(c1.allocs - c0.allocs, 0);
        /* a reshape of a transposed view needs its elements in order: a
         * kernel copies them on the device, not the host (after the copy's
         * first call, which compiles it on host copies) */
        (void)cft_reshape(t, (int64_t[]){20}, 1);
        c1 = test_backend_counts_now();
        cft_array *rt = cft_reshape(t, (int64_t[]){20}, 1);
        test_backend_counts c2 = test_backend_counts_now();
        CHECK(on(rt, "test:0"));
        CHECK_EQ(c2.to_host - c1.to_host, 0);
        CHECK_EQ(c2.to_device - c1.to_device, 0);
        CHECK(c2.kernels - c1.kernels >= 1);
        CHECK_ARRAY_CLOSE(t, cft_mT(x), 0, 0);
        CHECK_ARRAY_CLOSE(e, cft_expand_dims(b, 0), 0, 0);
        CHECK_ARRAY_CLOSE(bc, cft_broadcast_to(b, (int64_t[]){5, 3}, 2), 0, 0);
        CHECK_ARRAY_CLOSE(r, cft_reshape(x, (int64_t[]){2, 10}, 2), 0, 0);
        CHECK_ARRAY_CLOSE(rt, cft_reshape(cft_mT(x), (int64_t[]){20}, 1), 0, 0);
    }
    TEST("a product with one batched operand: one strided batched GEMM, the other shared") {
        /* (vmap of a product over one operand) [a free, L, b free] and
         * [L, a free, b free], plain and transposed inside the loop */
        cft_array *a2 = rnd(41, (int64_t[]){5, 4}, 2), *bl = rnd(42, (int64_t[]){3, 4, 6}, 3),
                  *blt = rnd(43, (int64_t[]){3, 6, 4}, 3), *al = rnd(44, (int64_t[]){3, 4, 5}, 3),
                  *b2 = rnd(45, (int64_t[]){4, 6}, 2);
        struct {
            cft_array *a, *b;
            int lc, rc;
        } cases[3] = {{a2, bl, 1, 1}, {a2, blt, 1, 2}, {al, b2, 1, 0}};
        for (int c = 0; c < 3; c++) {
            cft_array *want = cft_dot_general(cases[c].a, cases[c].b, &cases[c].lc, &cases[c].rc, 1,
                                              NULL, NULL, 0);
            test_backend_counts c0 = test_backend_counts_now();
            cft_array *got =
                cft_dot_general(cft_device_put(cases[c].a, d0), cft_device_put(cases[c].b, d0),
                                &cases[c].lc, &cases[c].rc, 1, NULL, NULL, 0);
            test_backend_counts c1 = test_backend_counts_now();
            CHECK_MSG(c1.gemms - c0.gemms == 1, "case %d: not one of the backend's GEMMs", c);
            CHECK(on(got, "test:0"));
            CHECK_ARRAY_CLOSE(got, want, 1e-5, 1e-6);
        }
    }
    TEST("two devices in one op are an error naming both") {
        cft_array *a = cft_device_put(x, d0), *c = cft_device_put(x, d1);
        cft_array *r = cft_add(a, c);
        CHECK(cft_failed(r));
        const char *m = cft_error_message(r);
        CHECK_MSG(strstr(m, "test:0") && strstr(m, "test:1") && strstr(m, "add"), "%s", m);
        cft_array *hc = cft_device_put(x, cpu); /* committed to the host */
        r = cft_mul(hc, a);
        CHECK(cft_failed(r));
        CHECK_MSG(strstr(cft_error_message(r), "cpu") != NULL, "%s", cft_error_message(r));
        CHECK(!cft_failed(cft_mul(hc, x))); /* committed host with uncommitted: fine */
    }
    cft_fn *f = cft_fn_new(loss, NULL, 4, 1);
    cft_array *in[4] = {w, b, x, y};
    TEST("grad on a device") {
        same_on_device(cft_grad(f, (int[]){0, 1}, 2), 4, in, 2, d0, 1e-6);
    }
    TEST("vmap of grad (per-sample gradients) on a device") {
        cft_fn *psg = cft_vmap(cft_grad(f, (int[]){0, 1}, 2),
                               (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL);
        same_on_device(psg, 4, in, 2, d1, 1e-6);
    }
    TEST("jvp, jacrev and hessian on a device") {
        cft_fn *g = cft_fn_new(scalar_fn, NULL, 1, 1);
        cft_array *v = rnd(9, (int64_t[]){6}, 1), *tv = rnd(10, (int64_t[]){6}, 1);
        same_on_device(cft_jvp(g), 2, (cft_array *[]){v, tv}, 2, d0, 1e-6);
        same_on_device(cft_jacrev(f, (int[]){0}, 1), 4, in, 1, d0, 1e-6);
        same_on_device(cft_hessian(g, 0), 1, &v, 1, d0, 1e-6);
    }
    TEST("cft_jit on a device: the device's results, the host's values") {
        cft_fn *j = cft_jit(cft_value_and_grad(f, (int[]){0, 1}, 2, false));
        cft_array *dev_in[4], *want[3], *got[3];
        for (int i = 0; i < 4; i++)
            dev_in[i] = cft_device_put(in[i], d0);
        CHECK_EQ(cft_fn_call(j, in, want), CFT_OK);
        for (int call = 0; call < 2; call++) {
            test_backend_counts c0 = test_backend_counts_now();
            CHECK_EQ(cft_fn_call(j, dev_in, got), CFT_OK);
            test_backend_counts c1 = test_backend_counts_now();
            for (int k = 0; k < 3; k++) {
                CHECK(on(got[k], "test:0"));
                CHECK_ARRAY_CLOSE(got[k], want[k], 1e-6, 1e-6);
            }
            /* its fused groups ran as the backend's kernels (run_kernel) */
            CHECK_MSG(c1.kernels - c0.kernels >= 1, "%ld kernels", c1.kernels - c0.kernels);
        }
    }
    TEST("device counters: what the backend itself counted; a warm jitted call moves nothing "
         "through the host and allocates only its outputs; the profiler's device track") {
        cft_fn *j = cft_jit(cft_value_and_grad(f, (int[]){0, 1}, 2, false));
        cft_array *dev_in[4], *got[3];
        for (int i = 0; i < 4; i++)
            dev_in[i] = cft_device_put(in[i], d0);
        cft_device_counters k0, k1, t0, t1, w0, w1;
        cft_device_counters_of(d0, &k0), cft_device_counters_of(d1, &t0);
        test_backend_counts c0 = test_backend_counts_now();
        for (int call = 0; call < 4; call++) {
            if (call == 3)
                cft_device_counters_of(d0, &w0);
            CHECK_EQ(cft_fn_call(j, dev_in, got), CFT_OK);
        }
        (void)cft_item_at(got[0], 0); /* a copy to the host */
        test_backend_counts c1 = test_backend_counts_now();
        cft_device_counters_of(d0, &k1), cft_device_counters_of(d1, &t1);
        cft_device_counters_of(d0, &w1);
#define DELTA(f) ((long)((k1.f - k0.f) + (t1.f - t0.f)))
        /* a replayed recording runs its kernels and copies inside the
         * backend: cft counts one replay, the backend each step */
        if (DELTA(graphs) == 0)
            CHECK_EQ(DELTA(kernels), c1.kernels - c0.kernels);
        else
            CHECK(DELTA(kernels) < c1.kernels - c0.kernels);
        CHECK_EQ(DELTA(ops), c1.runs - c0.runs);
        CHECK_EQ(DELTA(graphs), c1.graphs - c0.graphs);
        CHECK_EQ(DELTA(h2d), c1.to_device - c0.to_device);
        CHECK_EQ(DELTA(h2d_bytes), c1.bytes_to_device - c0.bytes_to_device);
        CHECK_EQ(DELTA(d2h), c1.to_host - c0.to_host);
        CHECK_EQ(DELTA(d2h_bytes), c1.bytes_to_host - c0.bytes_to_host);
        CHECK(DELTA(d2d) <= c1.copies - c0.copies);
        CHECK(DELTA(graphs) > 0 || DELTA(d2d) == c1.copies - c0.copies);
        CHECK_EQ(DELTA(allocs), c1.allocs - c0.allocs);
        CHECK_EQ(DELTA(releases), c1.releases - c0.releases);
#undef DELTA
        CHECK_EQ((long)(w1.d2h - w0.d2h), 1); /* only cft_item's copy */
        CHECK_EQ((long)(w1.h2d - w0.h2d), 0);
        /* the intermediates live in the plan's arena: what a warm call
         * asks of the backend is at most its 3 outputs (until the GC hands
         * earlier outputs back to the cache) */
        CHECK_MSG((long)(w1.allocs - w0.allocs) <= 3, "%ld allocations",
                  (long)(w1.allocs - w0.allocs));
        CHECK_MSG(w1.kernels > w0.kernels || w1.graphs > w0.graphs, "no kernel, no replay");
        cft_device_counters host;
        CHECK_EQ(cft_device_counters_of(cpu, &host), CFT_OK);
        CHECK_EQ((long)host.kernels, 0);
        CHECK_EQ(cft_device_counters_of(NULL, &host), CFT_E_ARG);
        CHECK(cft_device_counters_of(cft_device("test:9"), &host) != CFT_OK);

        test_backend_counts b0 = test_backend_counts_now();
        char *text = traced_call(j, dev_in, got, true);
        test_backend_counts b1 = test_backend_counts_now();
        CHECK_MSG(strstr(text, "\"device: kernel\"") || strstr(text, "\"device: graph replay\""),
                  "no device step in the trace");
        CHECK(strstr(text, "\"device: copy to host\"") != NULL);
        CHECK_MSG(strstr(text, "\"thread_name\"") && strstr(text, "\"test:0\""),
                  "no named device track");
        /* the test backend has markers (abi 5): each step is timed by two of
         * them, read when the recording stops, and the device is not waited
         * for after each step */
        CHECK_MSG(strstr(text, "\"device_us\"") != NULL, "no step timed by markers");
        CHECK_MSG(b1.marks - b0.marks >= 2 && b1.syncs == b0.syncs, "%ld markers, %ld waits",
                  b1.marks - b0.marks, b1.syncs - b0.syncs);
        free(text);
    }
    TEST("a backend without markers: the profiler waits for each step instead") {
        setenv("TEST_BACKEND_MARKS", "0", 1);
        CHECK_EQ(test_backend_register_as("unmarked", 0), 0);
        unsetenv("TEST_BACKEND_MARKS");
        const cft_dev *u = cft_device("unmarked:0");
        cft_fn *j = cft_jit(cft_value_and_grad(f, (int[]){0, 1}, 2, false));
        cft_array *dev_in[4], *got[3];
        for (int i = 0; i < 4; i++)
            dev_in[i] = cft_device_put(in[i], u);
        test_backend_counts b0 = test_backend_counts_now();
        char *text = traced_call(j, dev_in, got, true);
        test_backend_counts b1 = test_backend_counts_now();
        CHECK_MSG(strstr(text, "\"unmarked:0\"") && !strstr(text, "\"device_us\""),
                  "the unmarked device's track, without markers");
        CHECK_MSG(b1.marks == b0.marks && b1.syncs > b0.syncs, "%ld markers, %ld waits",
                  b1.marks - b0.marks, b1.syncs - b0.syncs);
        free(text);
    }
    TEST("long reductions on a device (a block per output), jitted, against the host") {
        cft_array *x =
            cft_concatenate((cft_array *[]){rnd(21, (int64_t[]){2, 5000}, 2),
                                            cft_full(NAN, CFT_F32, (int64_t[]){1, 5000}, 2)},
                            2, 0);
        for (int dt = 0; dt < 2; dt++) {
            cft_array *xs = dt ? cft_astype(x, CFT_F64) : x;
            cft_fn *j = cft_jit(cft_fn_new(long_red, NULL, 1, 7));
            cft_array *want[7], *got[7], *xd = cft_device_put(xs, d0);
            CHECK_EQ(cft_fn_call(cft_fn_new(long_red, NULL, 1, 7), &xs, want), CFT_OK);
            for (int call = 0; call < 3; call++) {
                CHECK_EQ(cft_fn_call(j, &xd, got), CFT_OK);
                for (int k = 0; k < 7; k++) {
                    CHECK(on(got[k], "test:0"));
                    /* other orders of addition: f32 / f64 rounding of 5000 terms */
                    double tol = dt ? 1e-12 : 1e-5;
                    CHECK_MSG(cft_allclose(got[k], want[k], tol, tol * 100, true), "output %d, %s",
                              k, dt ? "f64" : "f32");
                }
            }
        }
    }
    TEST("reductions as tiles of outputs by shares, jitted, against the host (f32, f64, bf16, "
         "f16)") {
        /* 1 to 1030 elements per output: one thread per output up to 32,
         * then 2 to 64 shares; 111 outputs fill no tile exactly */
        const int64_t rows[] = {1, 2, 31, 33, 64, 100, 1030};
        const cft_dtype dts[4] = {CFT_F32, CFT_F64, CFT_BF16, CFT_F16};
        /* sums of up to 1030 * 37 terms in other orders: f32 and f64 by
         * their rounding; halves (reduced in f32 on the host, in double
         * here, rounded once) one half ulp apart, four allowed (2^-5, 2^-8)
         * for a sine that libm and the kernel may round apart */
        const double tols[4] = {1e-5, 1e-12, 1.0 / 32, 1.0 / 256};
        for (int r = 0; r < 7; r++)
            for (int dt = 0; dt < 4; dt++) {
                cft_array *x = rnd(40 + (uint64_t)r, (int64_t[]){rows[r], 3, 37}, 3);
                if (dt)
                    x = cft_astype(x, dts[dt]);
                cft_fn *j = cft_jit(cft_fn_new(tiled_red, NULL, 1, 5));
                cft_array *want[5], *got[5], *xd = cft_device_put(x, d0);
                CHECK_EQ(cft_fn_call(cft_fn_new(tiled_red, NULL, 1, 5), &x, want), CFT_OK);
                for (int call = 0; call < 2; call++) {
                    CHECK_EQ(cft_fn_call(j, &xd, got), CFT_OK);
                    for (int k = 0; k < 5; k++) {
                        CHECK(on(got[k], "test:0"));
                        CHECK_MSG(cft_allclose(got[k], want[k], tols[dt], tols[dt], true),
                                  "output %d, %lld rows, %s", k, (long long)rows[r],
                                  cft_dtype_name(dts[dt]));
                    }
                }
            }
        /* the launch of a bias gradient's column sum: [1024, 128] over its
         * rows is 16 tiles of 8 outputs by 32 shares (4,096 threads), not
         * 128 threads of 1,024 elements each */
        cft_array *xd = cft_device_put(rnd(50, (int64_t[]){1024, 128}, 2), d0), *got;
        char *text = traced_call(cft_jit(cft_fn_new(col_sum, NULL, 1, 1)), &xd, &got, false);
        CHECK_MSG(strstr(text, "\"slots\": 4096") != NULL, "no kernel of 4096 threads");
        free(text);
    }
    TEST("matrix precision: f32 products in TF32 or bf16 on a device when asked, f16 / bf16 "
         "products there") {
        CHECK_EQ((int)cft_float32_matmul_precision(), CFT_MATMUL_HIGHEST);
        CHECK_EQ(cft_set_float32_matmul_precision((cft_matmul_precision)3), CFT_E_ARG);
        CHECK_EQ(cft_set_float32_matmul_precision((cft_matmul_precision)-1), CFT_E_ARG);
        CHECK_EQ((int)cft_float32_matmul_precision(), CFT_MATMUL_HIGHEST);
        cft_array *x = rnd(60, (int64_t[]){33, 70}, 2), *w = rnd(61, (int64_t[]){70, 20}, 2);
        cft_array *xd = cft_device_put(x, d0), *wd = cft_device_put(w, d0);
        cft_array *exact = cft_matmul(x, w),
                  *bf = cft_matmul(cft_astype(cft_astype(x, CFT_BF16), CFT_F32),
                                   cft_astype(cft_astype(w, CFT_BF16), CFT_F32));
        long g0 = test_backend_counts_now().gemms;
        cft_array *full = cft_matmul(xd, wd);
        CHECK(cft_max_abs_diff(full, exact) < 1e-5);
        CHECK_EQ(cft_set_float32_matmul_precision(CFT_MATMUL_MEDIUM), CFT_OK);
        cft_array *medium = cft_matmul(xd, wd);
        CHECK_EQ(cft_set_float32_matmul_precision(CFT_MATMUL_HIGH), CFT_OK);
        cft_array *high = cft_matmul(xd, wd);
        CHECK_EQ(cft_set_float32_matmul_precision(CFT_MATMUL_HIGHEST), CFT_OK);
        CHECK_EQ(test_backend_counts_now().gemms - g0, 3); /* each on the backend's GEMM */
        /* bf16 operands: about 2^-9 relative per product, sums of 70 in f32 */
        double em = cft_max_abs_diff(medium, exact), eh = cft_max_abs_diff(high, exact);
        CHECK_MSG(cft_max_abs_diff(medium, bf) < 1e-5, "medium is not the bf16 product: %g",
                  cft_max_abs_diff(medium, bf));
        CHECK_MSG(em > 1e-3 && eh > 0 && eh < em / 4, "exact vs bf16 %g, vs tf32 %g", em, eh);
        /* a jitted product: its device graph replays only under the precision it was
         * recorded with */
        cft_fn *j = cft_jit(cft_fn_new(matmul2, NULL, 2, 1));
        cft_array *in[2] = {xd, wd}, *got;
        for (int call = 0; call < 4; call++) {
            CHECK_EQ(cft_fn_call(j, in, &got), CFT_OK);
            CHECK(cft_max_abs_diff(got, exact) < 1e-5);
        }
        CHECK_EQ(cft_set_float32_matmul_precision(CFT_MATMUL_MEDIUM), CFT_OK);
        CHECK_EQ(cft_fn_call(j, in, &got), CFT_OK);
        CHECK_MSG(cft_max_abs_diff(got, bf) < 1e-5, "jitted under medium: %g from bf16",
                  cft_max_abs_diff(got, bf));
        cft_fn *jm = cft_jit(cft_fn_new(matmul2, NULL, 2, 1)); /* recorded under medium */
        for (int call = 0; call < 5; call++) {
            CHECK_EQ(cft_fn_call(jm, in, &got), CFT_OK);
            CHECK_MSG(cft_max_abs_diff(got, bf) < 1e-5, "call %d under medium: %g from bf16", call,
                      cft_max_abs_diff(got, bf));
        }
        CHECK_EQ(cft_set_float32_matmul_precision(CFT_MATMUL_HIGHEST), CFT_OK);
        CHECK_EQ(cft_fn_call(j, in, &got), CFT_OK);
        CHECK(cft_max_abs_diff(got, exact) < 1e-5);
        /* half products on the backend's GEMM, summed in f32 as on the host:
         * the two differ by the order of sums, within a half ulp or so */
        for (int h = 0; h < 2; h++) {
            cft_dtype dt = h ? CFT_F16 : CFT_BF16;
            cft_array *xh = cft_astype(x, dt), *wh = cft_astype(w, dt);
            long g1 = test_backend_counts_now().gemms;
            cft_array *dev = cft_matmul(cft_device_put(xh, d0), cft_device_put(wh, d0));
            CHECK_EQ(test_backend_counts_now().gemms - g1, 1);
            CHECK(on(dev, "test:0") && cft_array_dtype(dev) == dt);
            double tol = h ? 1e-2 : 1e-1; /* |y| up to about 25: 2^-11 / 2^-8 of it */
            CHECK_MSG(cft_max_abs_diff(dev, cft_matmul(xh, wh)) <= tol, "%s: %g",
                      h ? "f16" : "bf16", cft_max_abs_diff(dev, cft_matmul(xh, wh)));
        }
    }
    TEST("convolutions on a device are one kernel there (no host copies), as the host's") {
        /* strides 2x1, padding, lhs and rhs dilation, 2 feature groups; then
         * 2 batch groups; f32 and f64; and the gradient of a conv-relu loss
         * (whose weight gradient sums 8 samples' 10x11 positions) */
        for (int f = 0; f < 2; f++) {
            cft_dtype dt = f ? CFT_F64 : CFT_F32;
            double tol = f ? 1e-12 : 1e-5;
            for (int bg = 0; bg < 2; bg++) {
                cft_array *x = cft_astype(rnd(70, (int64_t[]){4, 4, 9, 7}, 4), dt),
                          *w = cft_astype(rnd(71, (int64_t[]){6, bg ? 4 : 2, 3, 2}, 4), dt);
                const int64_t st[2] = {2, 1}, pad[4] = {1, 2, 0, 1}, ld[2] = {1, 2}, rd[2] = {2, 1};
                cft_array *want =
                    cft_conv_general_dilated(x, w, st, pad, ld, rd, bg ? 1 : 2, bg ? 2 : 1);
                cft_device_counters c0, c1;
                cft_device_counters_of(d0, &c0);
                cft_array *got =
                    cft_conv_general_dilated(cft_device_put(x, d0), cft_device_put(w, d0), st, pad,
                                             ld, rd, bg ? 1 : 2, bg ? 2 : 1);
                cft_device_counters_of(d0, &c1);
                CHECK(on(got, "test:0"));
                CHECK_MSG(c1.kernels - c0.kernels == 1 && c1.ops == c0.ops && c1.d2h == c0.d2h,
                          "kernels %d, ops %d, copies to the host %d",
                          (int)(c1.kernels - c0.kernels), (int)(c1.ops - c0.ops),
                          (int)(c1.d2h - c0.d2h));
                CHECK_MSG(cft_allclose(got, want, tol, tol, false), "%s, %s groups: %g",
                          f ? "f64" : "f32", bg ? "batch" : "feature", cft_max_abs_diff(got, want));
            }
        }
        cft_array *in[2] = {rnd(72, (int64_t[]){5, 2, 3, 3}, 4),
                            rnd(73, (int64_t[]){8, 2, 12, 13}, 4)};
        cft_fn *g = cft_jit(cft_grad(cft_fn_new(conv_loss, NULL, 2, 1), (int[]){0, 1}, 2));
        cft_array *want[2], *got[2],
            *din[2] = {cft_device_put(in[0], d0), cft_device_put(in[1], d0)};
        CHECK_EQ(
            cft_fn_call(cft_grad(cft_fn_new(conv_loss, NULL, 2, 1), (int[]){0, 1}, 2), in, want),
            CFT_OK);
        for (int call = 0; call < 3; call++) {
            cft_device_counters c0, c1;
            cft_device_counters_of(d0, &c0);
            CHECK_EQ(cft_fn_call(g, din, got), CFT_OK);
            cft_device_counters_of(d0, &c1);
            if (call > 0) /* warm: nothing through the host */
                CHECK_EQ((long)(c1.d2h - c0.d2h), 0);
            for (int k = 0; k < 2; k++)
                CHECK_MSG(on(got[k], "test:0") && cft_allclose(got[k], want[k], 1e-4, 1e-5, false),
                          "grad %d, call %d: %g", k, call, cft_max_abs_diff(got[k], want[k]));
        }
    }
    TEST("products with nothing to sum (outer products) are one elementwise kernel, "
         "bitwise the host's") {
        /* per-sample outer products [B, 7] x [B, 5] -> [B, 7, 5]; a column
         * times a row; a batch of them with a transposed operand; f32, f64
         * (one rounded multiply per element: the same bits anywhere) */
        for (int f = 0; f < 2; f++) {
            cft_dtype dt = f ? CFT_F64 : CFT_F32;
            cft_array *x = cft_astype(rnd(80, (int64_t[]){6, 7}, 2), dt),
                      *y = cft_astype(rnd(81, (int64_t[]){6, 5}, 2), dt);
            cft_array *xd = cft_device_put(x, d0), *yd = cft_device_put(y, d0);
            cft_array *want[3] = {cft_dot_general(x, y, NULL, NULL, 0, (int[]){0}, (int[]){0}, 1),
                                  cft_matmul(cft_reshape(x, (int64_t[]){42, 1}, 2),
                                             cft_reshape(y, (int64_t[]){1, 30}, 2)),
                                  cft_dot_general(cft_reshape(x, (int64_t[]){6, 1, 7}, 3),
                                                  cft_reshape(y, (int64_t[]){6, 1, 5}, 3),
                                                  (int[]){1}, (int[]){1}, 1, (int[]){0}, (int[]){0},
                                                  1)};
            cft_device_counters c0, c1;
            cft_device_counters_of(d0, &c0);
            cft_array *got[3] = {cft_dot_general(xd, yd, NULL, NULL, 0, (int[]){0}, (int[]){0}, 1),
                                 cft_matmul(cft_reshape(xd, (int64_t[]){42, 1}, 2),
                                            cft_reshape(yd, (int64_t[]){1, 30}, 2)),
                                 cft_dot_general(cft_reshape(xd, (int64_t[]){6, 1, 7}, 3),
                                                 cft_reshape(yd, (int64_t[]){6, 1, 5}, 3),
                                                 (int[]){1}, (int[]){1}, 1, (int[]){0}, (int[]){0},
                                                 1)};
            cft_device_counters_of(d0, &c1);
            CHECK_MSG(c1.kernels - c0.kernels == 3 && c1.ops == c0.ops, "kernels %d, ops %d",
                      (int)(c1.kernels - c0.kernels), (int)(c1.ops - c0.ops));
            for (int k = 0; k < 3; k++)
                CHECK_MSG(on(got[k], "test:0") && cft_max_abs_diff(got[k], want[k]) == 0,
                          "%s product %d: %g", f ? "f64" : "f32", k,
                          cft_max_abs_diff(got[k], want[k]));
        }
    }
    TEST("2:4 sparsity on the device (f32, f64, bf16, f16): the product, the densified weight and "
         "compression (meta, gather) run as one kernel each (no operation through the host, "
         "nothing copied back); "
         "those and the gradients are the host's results") {
        const cft_dev *d0 = cft_device("test:0");
        const cft_dtype dts[4] = {CFT_F32, CFT_F64, CFT_BF16, CFT_F16};
        /* the product's sums: f32 and f64 in their rounding; a half
         * product is summed in f32 (host) or double (device) and rounded
         * once, one half ulp apart at most, and its gradients are chains of
         * such products and roundings (four ulps: 2^-5 for bf16, 2^-8 f16) */
        const double tols[4] = {1e-5, 1e-12, 1.0 / 32, 1.0 / 256};
        for (int f = 0; f < 4; f++) {
            cft_dtype dt = dts[f];
            cft_array *w = cft_astype(rnd(31, (int64_t[]){6, 40}, 2), dt),
                      *x = cft_astype(rnd(32, (int64_t[]){5, 40}, 2), dt),
                      *ct = cft_astype(rnd(33, (int64_t[]){5, 6}, 2), dt);
            cft_sparse24 s = cft_sparse24_compress(w); /* the choice, on the host */
            cft_sparse24 sd = {cft_device_put(s.values, d0), cft_device_put(s.meta, d0)};
            cft_array *xd = cft_device_put(x, d0), *ctd = cft_device_put(ct, d0);
            cft_array *want[4], *got[4];
            cft_device_counters c0, c1;
            cft_device_counters_of(d0, &c0);
            got[0] = cft_sparse24_linear(xd, sd);
            got[1] = cft_sparse24_to_dense(sd);
            cft_sparse24 cd = cft_sparse24_compress(cft_device_put(w, d0)); /* meta, gather */
            cft_device_counters_of(d0, &c1);
            CHECK_MSG(c1.ops == c0.ops && c1.d2h == c0.d2h && c1.kernels - c0.kernels == 4,
                      "%s: ops %d, copies back %d, kernels %d", cft_dtype_name(dt),
                      (int)(c1.ops - c0.ops), (int)(c1.d2h - c0.d2h),
                      (int)(c1.kernels - c0.kernels));
            want[0] = cft_sparse24_linear(x, s), want[1] = cft_sparse24_to_dense(s);
            CHECK(on(cd.meta, "test:0") && cft_max_abs_diff(cd.meta, s.meta) == 0 &&
                  cft_max_abs_diff(cd.values, s.values) == 0);
            /* the gradients of <ct, x W^T> in x and in the kept values */
            s24_grads(x, s, ct, want + 2);
            s24_grads(xd, sd, ctd, got + 2);
            double tol = tols[f];
            for (int k = 0; k < 4; k++) {
                double big = cft_item(cft_max(cft_abs(want[k]), NULL, 0, false));
                CHECK_MSG(on(got[k], "test:0") &&
                              cft_max_abs_diff(got[k], want[k]) <= (k == 1 ? 0 : tol * (1 + big)),
                          "%s result %d: %g", cft_dtype_name(dt), k,
                          cft_max_abs_diff(got[k], want[k]));
            }
        }
    }
    TEST("a backend asking for eager kernels: eager ops and grad run as kernels there") {
        CHECK_EQ(test_backend_register_as("eager", CFT_BACKEND_EAGER_KERNELS), 0);
        const cft_dev *ed = cft_device("eager:0");
        CHECK(cft_device_error(ed) == NULL);
        cft_array *a = rnd(11, (int64_t[]){8, 16}, 2), *b = rnd(12, (int64_t[]){8, 16}, 2);
        cft_array *ad = cft_device_put(a, ed), *bd = cft_device_put(b, ed);
        for (int round = 0; round < 2; round++) { /* the second: each op compiled already */
            test_backend_counts c0 = test_backend_counts_now();
            cft_array *h = cft_sum(cft_mul(cft_tanh(cft_add(a, b)), a), (int[]){1}, 1, false),
                      *g = cft_sum(cft_mul(cft_tanh(cft_add(ad, bd)), ad), (int[]){1}, 1, false);
            test_backend_counts c1 = test_backend_counts_now();
            CHECK(on(g, "eager:0"));
            CHECK_ARRAY_CLOSE(g, h, 1e-6, 1e-6);
            CHECK_MSG(c1.kernels - c0.kernels >= 4, "%ld kernels for 4 ops",
                      c1.kernels - c0.kernels);
        }
        cft_array *wd = cft_device_put(in[0], ed), *gin[4] = {wd, in[1], in[2], in[3]};
        cft_fn *gf = cft_grad(f, (int[]){0}, 1);
        cft_array *want[1], *got[1];
        CHECK_EQ(cft_fn_call(gf, in, want), CFT_OK);
        test_backend_counts c0 = test_backend_counts_now();
        CHECK_EQ(cft_fn_call(gf, gin, got), CFT_OK);
        test_backend_counts c1 = test_backend_counts_now();
        CHECK(on(got[0], "eager:0"));
        CHECK_ARRAY_CLOSE(got[0], want[0], 1e-6, 1e-6);
        CHECK(c1.kernels - c0.kernels > 0);
    }
    TEST("a backend of abi 1 (no run_kernel): the jit runs there primitive by primitive") {
        /* the test backend's table, as a table of the first abi */
        CHECK_EQ(test_backend_register_abi1("old"), 0);
        const cft_dev *od = cft_device("old:0");
        CHECK(cft_device_error(od) == NULL);
        cft_fn *j = cft_jit(cft_value_and_grad(f, (int[]){0, 1}, 2, false));
        cft_array *dev_in[4], *want[3], *got[3];
        for (int i = 0; i < 4; i++)
            dev_in[i] = cft_device_put(in[i], od);
        CHECK_EQ(cft_fn_call(j, in, want), CFT_OK);
        test_backend_counts c0 = test_backend_counts_now();
        CHECK_EQ(cft_fn_call(j, dev_in, got), CFT_OK);
        test_backend_counts c1 = test_backend_counts_now();
        for (int k = 0; k < 3; k++) {
            CHECK(on(got[k], "old:0"));
            CHECK_ARRAY_CLOSE(got[k], want[k], 1e-6, 1e-6);
        }
        CHECK_EQ(c1.kernels - c0.kernels, 0);
        CHECK(c1.runs - c0.runs > 5);
    }
    TEST("four threads on two devices at once") {
        cft_fn *g = cft_grad(f, (int[]){0, 1}, 2);
        worker ws[4];
        pthread_t th[4];
        for (int t = 0; t < 4; t++) {
            ws[t] = (worker){g, in, {NULL, NULL}, t % 2 ? "test:1" : "test:0", 0};
            CHECK_EQ(cft_fn_call(g, in, ws[t].want), CFT_OK);
            CHECK_EQ(pthread_create(&th[t], NULL, work, &ws[t]), 0);
        }
        for (int t = 0; t < 4; t++) {
            pthread_join(th[t], NULL);
            CHECK_MSG(ws[t].bad == 0, "thread %d: %d wrong", t, ws[t].bad);
        }
    }
    TEST("the host cannot read device memory (what the checks above rest on)") {
        cft_array *xd = cft_device_put(x, d0);
        pid_t pid = fork();
        if (pid == 0) { /* a read behind the table's back (array/array.h: the payload) */
            volatile float v = *(volatile const float *)xd->data;
            (void)v;
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        /* SIGSEGV; under AddressSanitizer, its report and exit code 1 */
        CHECK_MSG((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) ||
                      (WIFEXITED(status) && WEXITSTATUS(status) != 0),
                  "status %d: the read went through", status);
    }
    return check_summary();
}
