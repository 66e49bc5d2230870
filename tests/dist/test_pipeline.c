// np: 2 4
/* test_pipeline.c (mpirun, 2 and 4 ranks): a pipeline of one stage per
 * rank (tanh layers, then a linear layer with the mean cross-entropy)
 * against the whole model in one process: the loss and every stage's
 * gradients, with GPipe and 1F1B, with and without recomputation, and 1F1B
 * keeping at most S - s micro-batches alive on stage s. Tolerance: 1e-6
 * absolute and 1e-5 relative in f32 (micro-batch sums in another order). */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cft/cft.h"
#include "cft/pipeline.h"
#include "check.h"

static int S;
enum { IN = 8, HID = 16, OUT = 10, B = 24 };

static int64_t width(int s) { /* stage s: width(s) -> width(s + 1) */
    return s == 0 ? IN : s == S ? OUT : HID;
}
static const char *const names[2] = {"w", "b"};

/* stage s < S-1: tanh(x @ w + b); last: mean CE(x @ w + b, t) */
static cft_status hidden(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                         cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_tanh(cft_add(cft_matmul(in[0], cft_tree_get(p, "w")), cft_tree_get(p, "b")));
    return CFT_OK;
}
static cft_status last(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                       cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *logits = cft_add(cft_matmul(in[0], cft_tree_get(p, "w")), cft_tree_get(p, "b"));
    out[0] = cft_mean(cft_cross_entropy(logits, in[1]), NULL, 0, false);
    return CFT_OK;
}
static cft_tree *stage_params(int s) {
    cft_array *k = cft_random_split(cft_random_key(10 + (uint64_t)s), 2);
    cft_array *w =
        cft_random_normal(cft_index(k, 0), CFT_F32, (int64_t[]){width(s), width(s + 1)}, 2);
    cft_array *b = cft_random_normal(cft_index(k, 1), CFT_F32, (int64_t[]){width(s + 1)}, 1);
    return cft_tree_from(names, (cft_array *[]){cft_mul_s(w, 0.5), b}, 2);
}

/* the whole model: (w0, b0, ..., w_{S-1}, b_{S-1}, x, t) -> loss */
static cft_status whole(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = in[2 * S];
    for (int s = 0; s < S; s++) {
        cft_tree *p = cft_tree_from(names, in + 2 * s, 2);
        cft_array *o[1];
        if (s < S - 1)
            hidden(NULL, p, 1, &h, 1, o);
        else
            last(NULL, p, 2, (cft_array *[]){h, in[2 * S + 1]}, 1, o);
        h = o[0];
    }
    out[0] = h;
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    cft_dist_group *w = cft_dist_world();
    int r = cft_dist_rank(w);
    S = cft_dist_size(w);
    cft_array *x = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){B, IN}, 2);
    cft_array *t = cft_astype(
        cft_mul_s(cft_random_uniform(cft_random_key(2), CFT_F32, (int64_t[]){B}, 1, 0, 1), 9.99),
        CFT_I32);
    /* the reference, on every rank */
    cft_array *all[2 * 8 + 2], *ref[2 * 8 + 1];
    int argn[2 * 8];
    for (int s = 0; s < S; s++)
        cft_tree_flatten(stage_params(s), all + 2 * s);
    all[2 * S] = x, all[2 * S + 1] = t;
    for (int i = 0; i < 2 * S; i++)
        argn[i] = i;
    cft_fn *vg = cft_value_and_grad(cft_fn_new(whole, NULL, 2 * S + 2, 1), argn, 2 * S, false);
    CHECK_EQ(cft_fn_call(vg, all, ref), CFT_OK);
    cft_tree *mine = stage_params(r);
    cft_fn *f = r < S - 1 ? cft_tree_fn_new(hidden, NULL, mine, 1, 1)
                          : cft_tree_fn_new(last, NULL, mine, 2, 1);
    const char *sched[2] = {"GPipe", "1F1B"};
    for (int k = 0; k < 2; k++)
        for (int rc = 0; rc < 2; rc++)
            for (int M = 1; M <= 6; M *= (M == 1 ? 2 : 3)) {
                TEST("rank %d of %d: %s, %d micro-batches%s", r, S, sched[k], M,
                     rc ? ", recomputed" : "") {
                    cft_pipeline_options o = {M, (cft_pipe_schedule)k, rc};
                    cft_pipeline *p = cft_pipeline_new(w, f, mine, &o);
                    cft_array *loss;
                    cft_tree *g;
                    CHECK_EQ(cft_pipeline_step(p, mine, r == 0 ? x : NULL, r == S - 1 ? t : NULL,
                                               &loss, &g),
                             CFT_OK);
                    if (r == S - 1)
                        CHECK_ARRAY_CLOSE(loss, ref[0], 1e-5, 1e-6);
                    CHECK_ARRAY_CLOSE(cft_tree_get(g, "w"), ref[1 + 2 * r], 1e-5, 1e-6);
                    CHECK_ARRAY_CLOSE(cft_tree_get(g, "b"), ref[2 + 2 * r], 1e-5, 1e-6);
                    int peak = cft_pipeline_last_stats(p).peak_live;
                    if (k == 1)
                        CHECK_MSG(peak <= S - r, "1F1B kept %d micro-batches on stage %d", peak, r);
                    else
                        CHECK_EQ(peak, M);
                }
            }
    TEST("rank %d: bad arguments are errors, on every rank", r) {
        cft_pipeline_options o = {5, CFT_PIPE_GPIPE, false}; /* 24 rows do not divide by 5 */
        cft_pipeline *p = cft_pipeline_new(w, f, mine, &o);
        cft_tree *g;
        cft_status st = CFT_OK;
        if (r == 0 || r == S - 1) /* the ranks that hold the batch find out at once */
            st = cft_pipeline_step(p, mine, r == 0 ? x : NULL, r == S - 1 ? t : NULL, NULL, &g);
        if (r == 0 || r == S - 1)
            CHECK(st != CFT_OK && strstr(cft_last_error_message(), "divides by 5"));
        CHECK(cft_pipeline_step(cft_pipeline_new(w, NULL, mine, &o), mine, x, t, NULL, &g) !=
              CFT_OK);
    }
    TEST("rank %d: pipeline x data parallel (2 stages x 2 replicas, a 2-D grid)", r) {
        if (S == 4) {
            /* pipelines {0,1} and {2,3}; replicas of a stage {0,2} and {1,3} */
            cft_dist_group *pipe[2] = {cft_dist_new_group((int[]){0, 1}, 2),
                                       cft_dist_new_group((int[]){2, 3}, 2)};
            cft_dist_group *data[2] = {cft_dist_new_group((int[]){0, 2}, 2),
                                       cft_dist_new_group((int[]){1, 3}, 2)};
            int replica = r / 2, stage = r % 2;
            S = 2; /* the model of two stages, for this test */
            cft_array *ref2[2 * 2 + 1], *all2[2 * 2 + 2];
            for (int s2 = 0; s2 < 2; s2++)
                cft_tree_flatten(stage_params(s2), all2 + 2 * s2);
            all2[4] = x, all2[5] = t;
            CHECK_EQ(cft_fn_call(cft_value_and_grad(cft_fn_new(whole, NULL, 6, 1),
                                                    (int[]){0, 1, 2, 3}, 4, false),
                                 all2, ref2),
                     CFT_OK);
            cft_tree *pm = stage_params(stage);
            cft_fn *sf = stage == 0 ? cft_tree_fn_new(hidden, NULL, pm, 1, 1)
                                    : cft_tree_fn_new(last, NULL, pm, 2, 1);
            cft_pipeline_options o = {2, CFT_PIPE_1F1B, false};
            cft_pipeline *p = cft_pipeline_new(pipe[replica], sf, pm, &o);
            /* replica k takes rows [12k, 12k + 12) of the batch */
            cft_array *xs = cft_slice(x, (int64_t[]){12 * replica, 0},
                                      (int64_t[]){12 * replica + 12, IN}, NULL);
            cft_array *ts =
                cft_slice(t, (int64_t[]){12 * replica}, (int64_t[]){12 * replica + 12}, NULL);
            cft_tree *g;
            CHECK_EQ(
                cft_pipeline_step(p, pm, stage == 0 ? xs : NULL, stage == 1 ? ts : NULL, NULL, &g),
                CFT_OK);
            for (int i = 0; i < 2; i++) /* averaged over the replicas of this stage */
                CHECK_ARRAY_CLOSE(
                    cft_dist_all_reduce(data[stage], cft_tree_at(g, i), CFT_DIST_MEAN),
                    ref2[1 + 2 * stage + i], 1e-5, 1e-6);
            S = 4;
        }
    }
    TEST("rank %d: a stalled stage is a timeout error within the deadline", r) {
        /* every rank: errors instead of aborts (the same on all), 1 s */
        cft_dist_set_abort_on_timeout(false);
        cft_dist_set_timeout(1.0);
        cft_pipeline_options o = {4, CFT_PIPE_1F1B, false};
        cft_pipeline *p = cft_pipeline_new(w, f, mine, &o);
        if (r == 1)
            usleep(2500000); /* stage 1 never comes */
        else {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            cft_tree *g;
            cft_array *loss;
            cft_status st =
                cft_pipeline_step(p, mine, r == 0 ? x : NULL, r == S - 1 ? t : NULL, &loss, &g);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
            CHECK(st != CFT_OK);
            CHECK(strstr(cft_last_error_message(), "did not complete within") != NULL);
            CHECK_MSG(dt < 2.5, "gave up after %.2f s", dt);
        }
    }
    /* finalize meets every rank within the deadline: rank 1 above stalls
     * 2.5 s, past the 1 s of the test */
    cft_dist_set_timeout(20);
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    return check_summary();
}
