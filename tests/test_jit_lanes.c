/* test_jit_lanes.c: cft_jit of a vmap run as a loop over its lanes (the
 * jitted mapped function once per lane) when a lane's work is large and
 * the batch's intermediates would not stay in cache (lower/jit.c). The
 * loop gives the vmap's values (f32, a lane's GEMMs in another blocking:
 * 1e-5) for batched and shared inputs, several outputs, an output that
 * does not depend on the lane; the choice follows the sizes (an ensemble
 * of MLPs loops, per-sample gradients of a small model stay batched) and
 * CFT_JIT_VMAP_LOOP forces either; with 2 and 3 threads the lanes are
 * shared among threads and the values are one thread's (odd splits, fewer
 * lanes than threads; to a few ulps, rtol 1e-6: the first lane runs
 * outside the team, in a kernel's serial loop, which the compiler may
 * contract into FMAs otherwise than the parallel one; GEMMs are cut by
 * their shape alone, the same at any thread count); under grad the jitted vmap is
 * traced as usual. A lane's outputs are written straight into their rows of
 * the stacked results where a kernel or a product makes them; outputs that
 * are inputs or views are copied there. */
#include <stdlib.h>

#include "cft/cft.h"
#include "check.h"

enum { K = 16, B = 256, D = 64, H = 256 };

/* (w1 [D,H], w2 [H,10], x [B,D]) -> (mean square of logits, logits, w2 * 2 (lane-free)) */
static cft_status member(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_matmul(in[2], in[0]));
    cft_array *z = cft_matmul(h, in[1]);
    out[0] = cft_mean(cft_mul(z, z), NULL, 0, false);
    out[1] = z;
    out[2] = cft_mul_s(cft_ones_like(cft_index(in[1], 0)), 2);
    return CFT_OK;
}

/* (w1, w2, x) -> (w2 as passed, a view of the logits (reshaped), the logits):
 * outputs a lane cannot write in place into its rows, and one it can */
static cft_status views(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *z = cft_matmul(cft_tanh(cft_matmul(in[2], in[0])), in[1]);
    out[0] = in[1];
    out[1] = cft_reshape(z, (int64_t[]){B * 10}, 1);
    out[2] = z;
    return CFT_OK;
}

/* the sum over lanes of a vmap's (env) first output */
static cft_status sum_lanes(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *o[3];
    cft_status st = cft_fn_call((cft_fn *)env, in, o);
    out[0] = cft_sum(o[0], NULL, 0, false);
    return st;
}

static cft_array *rnd(uint64_t seed, const int64_t *shape, int nd) {
    return cft_mul_s(cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd), 0.1);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_array *w1 = rnd(1, (int64_t[]){K, D, H}, 3), *w2 = rnd(2, (int64_t[]){K, H, 10}, 3);
    cft_array *xs = rnd(3, (int64_t[]){K, B, D}, 3), *x = rnd(4, (int64_t[]){B, D}, 2);
    cft_fn *f = cft_fn_new(member, NULL, 3, 3);
    int diff[3] = {0, 0, 0}, same[3] = {0, 0, CFT_NOT_BATCHED};
    for (int mode = 0; mode < 2; mode++) {
        const int *ax = mode ? same : diff;
        cft_array *in[3] = {w1, w2, mode ? x : xs}, *want[3], *got[3], *batched[3];
        cft_fn *v = cft_vmap(f, ax, NULL);
        CHECK_EQ(cft_fn_call(v, in, want), CFT_OK);
        TEST("%s data: the loop over lanes equals the vmap", mode ? "shared" : "per-lane") {
            setenv("CFT_JIT_VMAP_LOOP", "1", 1);
            cft_fn *j = cft_jit(v);
            CHECK_EQ(cft_fn_call(j, in, got), CFT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-6);
            CHECK_EQ(cft_array_dim(got[2], 0), K);
            cft_jit_stats st;
            CHECK_EQ(cft_jit_stats_of(j, &st), CFT_OK);
            CHECK_EQ(st.traces, 0); /* the batched function was never lowered */
            setenv("CFT_JIT_VMAP_LOOP", "0", 1);
            CHECK_EQ(cft_fn_call(j, in, batched), CFT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(batched[k], want[k], 1e-5, 1e-6);
            CHECK_EQ(cft_jit_stats_of(j, &st), CFT_OK);
            CHECK_EQ(st.traces, 1);
            unsetenv("CFT_JIT_VMAP_LOOP");
        }
    }
    TEST("outputs that are inputs or views are copied into their rows; others written in place") {
        cft_fn *v = cft_vmap(cft_fn_new(views, NULL, 3, 3), diff, NULL);
        cft_array *in[3] = {w1, w2, xs}, *want[3], *got[3];
        CHECK_EQ(cft_fn_call(v, in, want), CFT_OK);
        setenv("CFT_JIT_VMAP_LOOP", "1", 1);
        cft_fn *j = cft_jit(v);
        for (int call = 0; call < 3; call++) { /* cold and warm lane plans */
            CHECK_EQ(cft_fn_call(j, in, got), CFT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-6);
            CHECK_ARRAY_CLOSE(got[0], w2, 0, 0);
        }
        unsetenv("CFT_JIT_VMAP_LOOP");
    }
    TEST("the sizes choose: a large lane loops, a small one stays batched") {
        cft_fn *j = cft_jit(cft_vmap(f, diff, NULL));
        cft_array *out[3];
        CHECK_EQ(cft_fn_call(j, (cft_array *[]){w1, w2, xs}, out), CFT_OK);
        cft_jit_stats st;
        CHECK_EQ(cft_jit_stats_of(j, &st), CFT_OK);
        CHECK_EQ(st.traces, 0);
        /* 64 lanes of a hidden width 8: a lane of a few KB */
        cft_fn *j2 = cft_jit(cft_vmap(f, same, NULL));
        cft_array *w1s = rnd(6, (int64_t[]){64, D, 8}, 3), *w2s = rnd(7, (int64_t[]){64, 8, 10}, 3);
        CHECK_EQ(cft_fn_call(j2, (cft_array *[]){w1s, w2s, x}, out), CFT_OK);
        CHECK_EQ(cft_jit_stats_of(j2, &st), CFT_OK);
        CHECK_EQ(st.traces, 1);
    }
    TEST("with more threads the lanes are shared among them, with one thread's values") {
        setenv("CFT_JIT_VMAP_LOOP", "1", 1);
        cft_fn *v = cft_vmap(f, diff, NULL);
        cft_array *one[3], *more[3];
        cft_set_num_threads(1);
        CHECK_EQ(cft_fn_call(cft_jit(v), (cft_array *[]){w1, w2, xs}, one), CFT_OK);
        for (int nth = 2; nth <= 3; nth++) { /* 15 lanes after the first: 8 + 7, 5 + 5 + 5 */
            cft_set_num_threads(nth);
            cft_fn *j = cft_jit(v);
            for (int rep = 0; rep < 2; rep++) {
                CHECK_EQ(cft_fn_call(j, (cft_array *[]){w1, w2, xs}, more), CFT_OK);
                for (int k = 0; k < 3; k++)
                    CHECK_ARRAY_CLOSE(more[k], one[k], 1e-6, 1e-7);
            }
        }
        /* two lanes, three threads: one lane each for two of them */
        cft_array *w1t = cft_slice(w1, (int64_t[]){0, 0, 0}, (int64_t[]){2, D, H}, NULL),
                  *w2t = cft_slice(w2, (int64_t[]){0, 0, 0}, (int64_t[]){2, H, 10}, NULL),
                  *xt = cft_slice(xs, (int64_t[]){0, 0, 0}, (int64_t[]){2, B, D}, NULL);
        CHECK_EQ(cft_fn_call(cft_jit(v), (cft_array *[]){w1t, w2t, xt}, more), CFT_OK);
        for (int k = 0; k < 2; k++)
            CHECK_ARRAY_CLOSE(cft_index(more[1], k), cft_index(one[1], k), 1e-6, 1e-7);
        cft_set_num_threads(1);
        unsetenv("CFT_JIT_VMAP_LOOP");
    }
    TEST("under grad the jitted vmap is traced (no loop), and differentiates") {
        setenv("CFT_JIT_VMAP_LOOP", "1", 1);
        cft_fn *v = cft_vmap(f, diff, NULL);
        cft_fn *gj = cft_grad(cft_fn_new(sum_lanes, cft_jit(v), 3, 1), NULL, 0);
        cft_fn *ge = cft_grad(cft_fn_new(sum_lanes, v, 3, 1), NULL, 0);
        cft_array *a[1], *b[1];
        CHECK_EQ(cft_fn_call(gj, (cft_array *[]){w1, w2, xs}, a), CFT_OK);
        CHECK_EQ(cft_fn_call(ge, (cft_array *[]){w1, w2, xs}, b), CFT_OK);
        CHECK_ARRAY_CLOSE(a[0], b[0], 1e-5, 1e-7);
        unsetenv("CFT_JIT_VMAP_LOOP");
    }
    return check_summary();
}
