/* test_jit.c: cft_jit behaviour beyond single primitives: the flagship
 * computations (per-sample gradients, a MAML-style inner loop, an ensemble
 * over stacked parameters) give the interpreter's results; kernels are
 * reused across batch sizes (their source holds no sizes); a second process
 * finds them in the disk cache and compiles nothing; CFT_JIT=0 runs the
 * interpreter; jit inside transforms and transforms of jit compose. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cft/cft.h"
#include "check.h"

static char cache_dir[200];

static int count_so(void) {
    DIR *d = opendir(cache_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".so") && !strstr(e->d_name, ".tmp");
    if (d)
        closedir(d);
    return n;
}

/* (w1 [4,8], b1 [8], w2 [8,3], x [4], y []) -> cross-entropy of one example */
/* (buf, g) -> (buf' = 0.9 buf + g, p-like update -0.1 buf') */
static cft_status momentum_step(void *env, int nin, cft_array *const *in, int nout,
                                cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(cft_mul_s(in[0], 0.9), in[1]);
    out[1] = cft_mul_s(out[0], -0.1);
    return CFT_OK;
}

static cft_status mlp(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[3], in[0]), in[1]));
    out[0] = cft_mean(cft_cross_entropy(cft_matmul(h, in[2]), in[4]), NULL, 0, false);
    return CFT_OK;
}

static cft_status mlp_free_chain(void *env, int nin, cft_array *const *in, int nout,
                                 cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul(cft_tanh(in[0]), cft_exp(cft_neg(cft_square(in[0]))));
    return CFT_OK;
}

static cft_array *randn(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd);
}

static void same_results(cft_fn *f, cft_array *const *in, int nout, double tol) {
    cft_array *a[8], *b[8];
    CHECK_EQ(cft_fn_call(f, in, a), CFT_OK);
    cft_fn *j = cft_jit(f);
    for (int call = 0; call < 3; call++) { /* first call plans, later ones run compiled */
        CHECK_EQ(cft_fn_call(j, in, b), CFT_OK);
        for (int k = 0; k < nout; k++)
            CHECK_ARRAY_CLOSE(b[k], a[k], tol, tol);
    }
}

/* row and column max / min of 2x (fused: the elementwise op and the
 * reduction in one kernel) */
static cft_status extremes(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = cft_mul_s(in[0], 2);
    out[0] = cft_max(y, (int[]){1}, 1, false);
    out[1] = cft_min(y, (int[]){1}, 1, false);
    out[2] = cft_max(y, (int[]){0}, 1, false);
    out[3] = cft_min(y, (int[]){0}, 1, false);
    return CFT_OK;
}

/* sums and maxima of each row of 2 x, over all of it, and of x's rows */
static cft_status row_folds(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = cft_mul_s(in[0], 2);
    out[0] = cft_sum(y, (int[]){1}, 1, false);
    out[1] = cft_max(y, (int[]){1}, 1, false);
    out[2] = cft_sum(y, NULL, 0, false);
    out[3] = cft_max(in[0], (int[]){1}, 1, false);
    return CFT_OK;
}

/* views of intermediates (reshape, broadcast, transpose, expand_dims)
 * between kernels: an arena keeps such views from call to call */
static cft_status viewed(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *m = cft_max(cft_exp(in[0]), (int[]){1}, 1, false);        /* [6] */
    cft_array *r = cft_reshape(m, (int64_t[]){2, 3}, 2);                 /* a view */
    cft_array *t = cft_transpose(cft_mul_s(r, 2), NULL);                 /* a view */
    cft_array *e = cft_expand_dims(cft_sum(t, (int[]){1}, 1, false), 0); /* [1,3] */
    out[0] = cft_sum(cft_mul(cft_broadcast_to(e, (int64_t[]){4, 3}, 2), in[1]), NULL, 0, false);
    return CFT_OK;
}

/* views of the inputs themselves (a bias broadcast over rows, labels
 * expanded), then a kernel and a view of the input again as an output:
 * an arena re-points such a view at each call's input when it is laid out
 * alike, and makes it again when it is not */
static cft_status input_views(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *b = cft_broadcast_to(in[0], (int64_t[]){4, 3}, 2);
    cft_array *e = cft_expand_dims(in[0], 0);
    out[0] = cft_relu(cft_add(cft_mul(in[1], b), cft_broadcast_to(e, (int64_t[]){4, 3}, 2)));
    out[1] = cft_reshape(in[0], (int64_t[]){3, 1}, 2);
    return CFT_OK;
}

/* stop_gradient inside and as the result: a plan reads its input */
static cft_status held(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *s = cft_stop_gradient(cft_max(in[0], (int[]){1}, 1, true));
    out[0] = cft_sum(cft_mul(in[0], cft_stop_gradient(in[0])), NULL, 0, false);
    out[1] = cft_stop_gradient(cft_sub(in[0], s));
    out[2] = cft_stop_gradient(in[0]);
    return CFT_OK;
}

static cft_status held_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul(in[0], cft_stop_gradient(in[0])), NULL, 0, false);
    return CFT_OK;
}

static cft_fn *per_sample(void) {
    cft_fn *g = cft_grad(cft_fn_new(mlp, NULL, 5, 1), (int[]){0, 1, 2}, 3);
    return cft_vmap(g, (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL);
}

static cft_array *labels(int64_t B) {
    int32_t y[1024];
    for (int64_t i = 0; i < B; i++)
        y[i] = (int32_t)(i % 3);
    return cft_from_i32(y, &B, 1);
}

/* two inner SGD steps on a task, then the query loss (MAML's inner loop) */
static cft_status adapt(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_fn *g = cft_grad(cft_fn_new(mlp, NULL, 5, 1), (int[]){0, 1, 2}, 3);
    cft_array *p[5] = {in[0], in[1], in[2], in[3], in[4]}, *gr[3];
    for (int s = 0; s < 2; s++) {
        cft_status st = cft_fn_call(g, p, gr);
        if (st)
            return st;
        for (int k = 0; k < 3; k++)
            p[k] = cft_sub(p[k], cft_mul_s(gr[k], 0.1));
    }
    return mlp(NULL, 5, p, 1, out);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    snprintf(cache_dir, sizeof cache_dir, "/tmp/cft-test-jit-%d", (int)getpid());
    setenv("CFT_CACHE_DIR", cache_dir, 1);
    cft_array *w1 = randn(1, (int64_t[]){4, 8}, 2), *b1 = randn(2, (int64_t[]){8}, 1),
              *w2 = randn(3, (int64_t[]){8, 3}, 2);

    TEST("per-sample gradients: jit equals the interpreter (f32: 1e-5)") {
        int64_t B = 16;
        cft_array *in[5] = {w1, b1, w2, randn(4, (int64_t[]){B, 4}, 2), labels(B)};
        same_results(per_sample(), in, 3, 1e-5);
    }
    TEST("MAML-style: vmap over tasks of 2 inner steps, then grad through them") {
        cft_fn *meta =
            cft_vmap(cft_fn_new(adapt, NULL, 5, 1),
                     (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL);
        cft_array *xs = randn(5, (int64_t[]){6, 4}, 2), *ys = labels(6);
        cft_array *in[5] = {w1, b1, w2, xs, ys};
        same_results(meta, in, 1, 1e-5);
    }
    TEST("ensemble: vmap over stacked parameters") {
        int64_t K = 5;
        cft_array *W1 = randn(6, (int64_t[]){K, 4, 8}, 3), *B1 = randn(7, (int64_t[]){K, 8}, 2),
                  *W2 = randn(8, (int64_t[]){K, 8, 3}, 3);
        cft_fn *ens = cft_vmap(cft_fn_new(mlp, NULL, 5, 1),
                               (int[]){0, 0, 0, CFT_NOT_BATCHED, CFT_NOT_BATCHED}, NULL);
        cft_array *in[5] = {W1, B1, W2, randn(9, (int64_t[]){4}, 1), cft_scalar(1, CFT_I32)};
        same_results(ens, in, 1, 1e-5);
    }
    TEST("one compiled kernel serves every batch size (once B is symbolic)") {
        cft_fn *j = cft_jit(per_sample());
        cft_array *out[3];
        int before = -1;
        for (int64_t B = 8; B <= 64; B *= 2) {
            cft_array *in[5] = {w1, b1, w2, randn(10 + (uint64_t)B, (int64_t[]){B, 4}, 2),
                                labels(B)};
            for (int call = 0; call < 2; call++)
                CHECK_EQ(cft_fn_call(j, in, out), CFT_OK);
            if (B == 16) /* the first call specialised; the second retraced with B symbolic */
                before = count_so();
        }
        CHECK_MSG(before > 0, "no kernel was compiled (is a C compiler installed?)");
        CHECK_EQ(count_so(), before);
    }
    TEST("a second process finds the kernels in the disk cache") {
        int before = count_so();
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "CFT_CACHE_DIR=%s %s 'per-sample gradients' > /dev/null",
                 cache_dir, argv[0]);
        CHECK_EQ(system(cmd), 0);
        CHECK_EQ(count_so(), before);
    }
    TEST("CFT_JIT=0 runs the interpreter with the same results") {
        char cmd[1400];
        snprintf(cmd, sizeof cmd,
                 "CFT_JIT=0 CFT_CACHE_DIR=%s-nojit %s 'per-sample gradients' > /dev/null",
                 cache_dir, argv[0]);
        CHECK_EQ(system(cmd), 0);
        snprintf(cmd, sizeof cmd, "test ! -e %s-nojit || test -z \"$(ls %s-nojit)\"", cache_dir,
                 cache_dir);
        CHECK_EQ(system(cmd), 0);
    }
    TEST("transforms of a jitted function, and jit of transforms, compose") {
        int64_t B = 4;
        cft_array *x = randn(11, (int64_t[]){B, 4}, 2), *y = labels(B);
        cft_fn *f = cft_fn_new(mlp, NULL, 5, 1);
        cft_fn *psg_of_jit =
            cft_vmap(cft_grad(cft_jit(f), (int[]){0, 1, 2}, 3),
                     (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL);
        cft_array *in[5] = {w1, b1, w2, x, y}, *a[3], *b[3];
        CHECK_EQ(cft_fn_call(per_sample(), in, a), CFT_OK);
        CHECK_EQ(cft_fn_call(psg_of_jit, in, b), CFT_OK);
        for (int k = 0; k < 3; k++)
            CHECK_ARRAY_CLOSE(b[k], a[k], 1e-6, 1e-6);
    }
    TEST("two threads give the single-threaded results") {
        int64_t n = 300000; /* above the kernels' threshold for threads */
        cft_array *x = randn(13, (int64_t[]){n / 100, 100}, 2);
        cft_fn *j = cft_jit(cft_fn_new(mlp_free_chain, NULL, 1, 1));
        cft_array *a = cft_fn_call1(j, &x);
        a = cft_fn_call1(j, &x);
        cft_set_num_threads(2);
        CHECK_EQ(cft_get_num_threads(), 2);
        cft_array *b = cft_fn_call1(j, &x);
        cft_set_num_threads(1);
        CHECK_ARRAY_CLOSE(b, a, 0, 0);
    }
    TEST("views kept by the arena from call to call: every call's own values") {
        cft_fn *f = cft_fn_new(viewed, NULL, 2, 1), *j = cft_jit(f);
        for (int call = 0; call < 5; call++) {
            cft_array *in[2] = {randn(40 + (uint64_t)call, (int64_t[]){6, 5}, 2),
                                randn(50 + (uint64_t)call, (int64_t[]){4, 3}, 2)};
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, in), cft_fn_call1(f, in), 1e-5, 1e-5);
        }
    }
    TEST("views of the inputs: each call's own values, re-pointed or made again") {
        cft_fn *f = cft_fn_new(input_views, NULL, 2, 2), *j = cft_jit(f);
        cft_array *stack = randn(60, (int64_t[]){5, 3}, 2), *wide = randn(61, (int64_t[]){3, 2}, 2);
        for (int call = 0; call < 8; call++) {
            /* rows of one stacked array (offsets move), a fresh array, a
             * column of a wider one (other strides), then rows again */
            cft_array *b = call < 4    ? cft_index(stack, call)
                           : call == 4 ? randn(70, (int64_t[]){3}, 1)
                           : call == 5 ? cft_index(cft_transpose(wide, NULL), 1)
                                       : cft_index(stack, call - 3);
            cft_array *in[2] = {b, randn(80 + (uint64_t)call, (int64_t[]){4, 3}, 2)}, *a[2], *c[2];
            CHECK_EQ(cft_fn_call(j, in, a), CFT_OK);
            CHECK_EQ(cft_fn_call(f, in, c), CFT_OK);
            CHECK_ARRAY_CLOSE(a[0], c[0], 1e-6, 1e-6);
            CHECK_ARRAY_CLOSE(a[1], c[1], 0, 0);
            /* an output that views an input keeps that call's values */
            if (call == 1) {
                cft_array *kept = a[1],
                          *want = cft_reshape(cft_index(stack, 1), (int64_t[]){3, 1}, 2);
                CHECK_EQ(cft_fn_call(j, (cft_array *[]){cft_index(stack, 2), in[1]}, a), CFT_OK);
                CHECK_ARRAY_CLOSE(kept, want, 0, 0);
            }
        }
    }
    TEST("first called with broadcast zeros (an optimizer's initial state), later calls still run "
         "the compiled kernel") {
        cft_fn *f = cft_fn_new(momentum_step, NULL, 2, 2), *j = cft_jit(f);
        cft_array *g = randn(90, (int64_t[]){64, 33}, 2);
        cft_array *in[2] = {cft_zeros(CFT_F32, (int64_t[]){64, 33}, 2), g}, *a[2], *c[2];
        for (int call = 0; call < 4; call++) {
            CHECK_EQ(cft_fn_call(j, in, a), CFT_OK);
            CHECK_EQ(cft_fn_call(f, in, c), CFT_OK);
            CHECK_ARRAY_CLOSE(a[0], c[0], 1e-6, 1e-6);
            CHECK_ARRAY_CLOSE(a[1], c[1], 1e-6, 1e-6);
            in[0] = a[0]; /* dense from now on */
        }
        /* the profile of a warm call: its chain is one kernel, not op by op */
        char path[] = "/tmp/cft-jit-trace-XXXXXX";
        int fd = mkstemp(path);
        close(fd);
        cft_profile_start();
        CHECK_EQ(cft_fn_call(j, in, a), CFT_OK);
        cft_profile_stop(path);
        FILE *tf = fopen(path, "r");
        char text[1 << 14] = "";
        size_t n = tf ? fread(text, 1, sizeof text - 1, tf) : 0;
        if (tf)
            fclose(tf);
        text[n] = 0;
        unlink(path);
        CHECK_MSG(!strstr(text, "op by op"), "the warm call ran op by op:\n%s", text);
    }
    TEST("stop_gradient in a plan: its input read, gradients still stopped") {
        cft_fn *f = cft_fn_new(held, NULL, 1, 3), *j = cft_jit(f);
        cft_array *x = randn(90, (int64_t[]){4, 5}, 2), *a[3], *b[3];
        for (int call = 0; call < 2; call++) {
            CHECK_EQ(cft_fn_call(j, &x, a), CFT_OK);
            CHECK_EQ(cft_fn_call(f, &x, b), CFT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(a[k], b[k], 1e-6, 1e-6);
        }
        /* d/dx sum(x * stop(x)) = stop(x) = x, jitted either way round */
        cft_fn *l = cft_fn_new(held_loss, NULL, 1, 1), *jg = cft_jit(cft_grad(l, (int[]){0}, 1)),
               *gj = cft_grad(cft_jit(l), (int[]){0}, 1);
        for (int call = 0; call < 2; call++) {
            CHECK_ARRAY_CLOSE(cft_fn_call1(jg, &x), x, 1e-6, 1e-6);
            CHECK_ARRAY_CLOSE(cft_fn_call1(gj, &x), x, 1e-6, 1e-6);
        }
    }
    TEST("max and min keep NaN in compiled kernels (vectorised rows, NaN tracked apart)") {
        /* rows of 21: a simd body and a remainder; NaN in the body (row 1),
         * in the remainder (row 4), and at the start (row 6) */
        float v[8 * 21];
        for (int i = 0; i < 8 * 21; i++)
            v[i] = (float)((i * 37) % 101) - 50.0f;
        v[1 * 21 + 3] = v[4 * 21 + 20] = v[6 * 21] = NAN;
        cft_array *x = cft_from_f32(v, (int64_t[]){8, 21}, 2);
        same_results(cft_fn_new(extremes, NULL, 1, 4), &x, 4, 0);
        cft_array *out[4];
        CHECK_EQ(cft_fn_call(cft_jit(cft_fn_new(extremes, NULL, 1, 4)), &x, out), CFT_OK);
        for (int r = 0; r < 8; r++) {
            bool nan = r == 1 || r == 4 || r == 6;
            CHECK_MSG(isnan(cft_item_at(out[0], r)) == nan, "row %d max", r);
            CHECK_MSG(isnan(cft_item_at(out[1], r)) == nan, "row %d min", r);
        }
        CHECK(isnan(cft_item_at(out[2], 3)) && isnan(cft_item_at(out[3], 20)));
        CHECK(!isnan(cft_item_at(out[2], 5)) && cft_item_at(out[2], 5) > cft_item_at(out[3], 5));
    }
    TEST("reductions of empty rows in kernels: the identity on every call (f32, bf16, f16)") {
        const cft_dtype dts[3] = {CFT_F32, CFT_BF16, CFT_F16};
        for (int d = 0; d < 3; d++) {
            cft_array *x = cft_astype(cft_zeros(CFT_F32, (int64_t[]){5, 0}, 2), dts[d]);
            cft_fn *j = cft_jit(cft_fn_new(row_folds, NULL, 1, 4));
            for (int call = 0; call < 3; call++) {
                cft_array *out[4];
                CHECK_EQ(cft_fn_call(j, &x, out), CFT_OK);
                for (int r = 0; r < 5; r++)
                    CHECK_MSG(cft_item_at(out[0], r) == 0 && cft_item_at(out[1], r) == -INFINITY &&
                                  cft_item_at(out[3], r) == -INFINITY,
                              "%s, call %d, row %d: %g %g %g", cft_dtype_name(dts[d]), call, r,
                              cft_item_at(out[0], r), cft_item_at(out[1], r),
                              cft_item_at(out[3], r));
                CHECK(cft_item(out[2]) == 0);
            }
        }
    }
    TEST("errors pass through a jitted function") {
        cft_fn *j = cft_jit(cft_fn_new(mlp, NULL, 5, 1));
        cft_array *in[5] = {w1, b1, w2, randn(12, (int64_t[]){5}, 1), cft_scalar(0, CFT_I32)},
                  *out[1];
        CHECK(cft_fn_call(j, in, out) != CFT_OK);
        CHECK(cft_failed(out[0]));
        CHECK(strstr(cft_error_message(out[0]), "matmul") != NULL);
    }
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s-nojit", cache_dir, cache_dir);
    if (system(cmd))
        fprintf(stderr, "could not remove %s\n", cache_dir);
    return check_summary();
}
