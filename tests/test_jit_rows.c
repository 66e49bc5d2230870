/* test_jit_rows.c: the jit's row-parallel segments (lower/jit_rows.c): a
 * batched plan's run of steps that compute rows of axis 0 from the same
 * rows (fused kernels, batched GEMMs, views) runs on each thread's own
 * rows at once. A second-order MAML meta-gradient (T tasks, 2 inner
 * steps), an ensemble's value_and_grad, per-sample gradients and a
 * program whose segment values are read after it (through a view, a
 * transpose, a sum over the rows) must equal the interpreter at 1, 2 and
 * 3 threads and with segments turned off (CFT_JIT_ROWS=0), for row counts
 * that split evenly and not (T = 7, 64). f32: rtol 1e-5, atol 1e-6 (a
 * product's rows may go through another GEMM kernel when a thread holds
 * fewer of them). The MAML plan must run in segments (the profiler names
 * them), and four threads calling one jitted function at once get their
 * own values. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../examples/maml.h"
#include "check.h"

static cft_array *rnd(uint64_t seed, const int64_t *shape, int nd, double scale) {
    return cft_mul_s(cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd), scale);
}

/* value_and_grad of the MAML objective: (params[6], xs, ys, xq, yq) */
static cft_fn *maml_vg(void) {
    cft_fn *meta = cft_fn_new(maml_objective, per_task_losses(2, false), NP + 4, 1);
    int argnums[NP] = {0, 1, 2, 3, 4, 5};
    return cft_value_and_grad(meta, argnums, NP, false);
}

static void maml_inputs(int T, uint64_t seed, cft_array **in) {
    mlp_init(seed, in);
    for (int i = 0; i < 4; i++)
        in[NP + i] = rnd(seed + 10 + (uint64_t)i, (int64_t[]){T, K_SHOT, 1}, 3, 2.0);
}

/* (w [D,H], xs [T,N,D]) -> (the sum over tasks of h = tanh(xs @ w) * 2 +
 * 1, the max over tasks of a transpose of r (a view of a segment's value
 * read after it), the sum of r), r a product through reshapes, expand_dims
 * and squeeze of the rows */
static cft_status rows_prog(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    const int64_t *xs = cft_array_shape(in[1]);
    int64_t T = xs[0], N = xs[1], D = xs[2];
    cft_array *h = cft_add_s(cft_mul_s(cft_tanh(cft_matmul(in[1], in[0])), 2), 1);
    cft_array *g = cft_matmul(h, cft_transpose(in[0], NULL)); /* [T,N,D] */
    cft_array *gx = cft_reshape(cft_mul(g, in[1]), (int64_t[]){T, N * D}, 2);
    gx = cft_squeeze(cft_expand_dims(cft_tanh(gx), 1), (int[]){1}, 1);
    cft_array *r = cft_relu(cft_reshape(gx, (int64_t[]){T, N, D}, 3));
    out[0] = cft_sum(h, (int[]){0}, 1, false);
    out[1] = cft_max(cft_transpose(r, (int[]){0, 2, 1}), (int[]){0}, 1, false);
    out[2] = cft_sum(r, NULL, 0, false);
    return CFT_OK;
}

/* sum(tanh(y * a + b) chained CHAIN times, axis 1): a segment whose
 * fused kernels' outputs the arena does not hold (it crashed in rows_of on
 * a NULL array from K = 38 on, on the first or the second call) */
enum { CHAIN = 76 };
static cft_status chain_prog(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = in[0];
    for (int k = 0; k < CHAIN; k++)
        y = cft_tanh(cft_add(cft_mul(y, in[1]), in[2]));
    out[0] = cft_sum(y, (int[]){1}, 1, false);
    return CFT_OK;
}

/* f interpreted, then jitted at 1, 2 and 3 threads (three calls each):
 * every output close to the interpreter's */
static void same_at_threads(cft_fn *f, cft_array *const *in, int nout) {
    cft_array *want[16], *got[16];
    CHECK_EQ(cft_fn_call(f, in, want), CFT_OK);
    cft_fn *j = cft_jit(f);
    for (int nth = 1; nth <= 3; nth++) {
        cft_set_num_threads(nth);
        for (int call = 0; call < 3; call++) {
            CHECK_EQ(cft_fn_call(j, in, got), CFT_OK);
            for (int k = 0; k < nout; k++)
                CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-6);
        }
    }
    cft_set_num_threads(2);
}

/* whether the profile of one call of f names a row segment */
static bool runs_in_rows(cft_fn *f, cft_array *const *in) {
    cft_array *out[16];
    cft_profile_start();
    cft_fn_call(f, in, out);
    cft_profile_stop(NULL);
    FILE *t = tmpfile();
    cft_profile_table(t, 50);
    rewind(t);
    char line[512];
    bool found = false;
    while (fgets(line, sizeof line, t))
        found |= strstr(line, "rows[") != NULL;
    fclose(t);
    return found;
}

typedef struct {
    cft_fn *j;
    int seed;
    bool ok;
} worker;

static void *work(void *p) {
    worker *w = p;
    cft_thread_register();
    cft_array *in[NP + 4], *got[NP + 1], *want[NP + 1];
    maml_inputs(64, (uint64_t)w->seed, in);
    w->ok = cft_fn_call(w->j, in, got) == CFT_OK && cft_fn_call(maml_vg(), in, want) == CFT_OK;
    for (int k = 0; w->ok && k < NP + 1; k++)
        w->ok = cft_max_abs_diff(got[k], want[k]) <= 1e-5;
    return NULL;
}

int main(int argc, char **argv) {
    /* what runs in segments on how many threads is the claim here: the
     * thread count must not follow the load (this test itself runs 3
     * threads and 4 callers at once on 2 cores; test_threads_load covers
     * the adaptation) */
    setenv("CFT_ADAPTIVE_THREADS", "0", 1);
    check_init(argc, argv);
    for (int T = 7; T <= 64; T += 57) {
        TEST("MAML meta-gradient, %d tasks", T) {
            cft_array *in[NP + 4];
            maml_inputs(T, 3, in);
            same_at_threads(maml_vg(), in, NP + 1);
        }
        TEST("values read after a segment, %d rows", T) {
            cft_array *in[2] = {rnd(5, (int64_t[]){16, 48}, 2, 0.3),
                                rnd(6, (int64_t[]){T, 24, 16}, 3, 1.0)};
            same_at_threads(cft_fn_new(rows_prog, NULL, 2, 3), in, 3);
        }
    }
    TEST("the MAML plan runs in row segments on 2 threads") {
        cft_array *in[NP + 4];
        maml_inputs(64, 4, in);
        cft_set_num_threads(2);
        cft_fn *j = cft_jit(maml_vg());
        cft_array *out[NP + 1];
        for (int i = 0; i < 2; i++)
            CHECK_EQ(cft_fn_call(j, in, out), CFT_OK);
        CHECK(runs_in_rows(j, in));
    }
    TEST("a chain of %d elementwise steps summed over rows: three calls, 1-3 threads", CHAIN) {
        cft_array *in[3];
        for (int i = 0; i < 3; i++)
            in[i] = cft_random_normal(cft_random_key(40 + (uint64_t)i), CFT_F32,
                                      (int64_t[]){512, 512}, i ? 0 : 2);
        same_at_threads(cft_fn_new(chain_prog, NULL, 3, 1), in, 1);
    }
    TEST("CFT_JIT_ROWS=0: no segments, the same values") {
        setenv("CFT_JIT_ROWS", "0", 1);
        cft_array *in[NP + 4];
        maml_inputs(64, 4, in);
        cft_fn *j = cft_jit(maml_vg());
        cft_array *out[NP + 1];
        for (int i = 0; i < 2; i++)
            CHECK_EQ(cft_fn_call(j, in, out), CFT_OK);
        CHECK(!runs_in_rows(j, in));
        same_at_threads(maml_vg(), in, NP + 1);
        unsetenv("CFT_JIT_ROWS");
    }
    TEST("four threads call one jitted meta-gradient at once") {
        cft_set_num_threads(2);
        cft_fn *j = cft_jit(maml_vg());
        pthread_t th[4];
        worker w[4];
        for (int i = 0; i < 4; i++) {
            w[i] = (worker){j, 20 + i, false};
            pthread_create(&th[i], NULL, work, &w[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            CHECK_MSG(w[i].ok, "thread %d", i);
        }
    }
    return check_summary();
}
