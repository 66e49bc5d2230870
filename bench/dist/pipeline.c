/* bench/dist/pipeline.c (mpirun -np 2, one stage per rank, one thread per
 * rank): the pipeline's bubble, the share of a step a stage waits instead
 * of computing, 1 - compute / step (averaged over the stages, median of 5
 * steps), against the theory (p - 1) / (m + p - 1) for m = 4, 8 and 16
 * micro-batches, with GPipe and 1F1B; and the micro-batches of activations
 * each schedule keeps alive on stage 0 (with their bytes). Stages: three
 * tanh layers of width 512 on micro-batches of 64 rows; the last one ends
 * with a cheap loss (mean of squares), so the stages are balanced as the
 * theory assumes (a cross-entropy there made the last stage 10% slower,
 * and the first waited for it). waiting_share: the part of the step spent
 * in receives. CFT_BENCH_VERBOSE=1 prints each rank's times. JSON lines;
 * ratio_to_baseline = measured bubble / theoretical bubble. The theory
 * takes messages as free; hop_us is what one activation-sized message costs
 * with raw MPI (ping-pong, MPI_Send/MPI_Recv, half the round trip), and
 * with_hops_bubble is the theory with 2m such hops added to the step (the
 * 1F1B / GPipe steady state has no slack to hide them in):
 * ratio_to_hops_baseline = measured / that.
 *
 * With "--peak-rss gpipe|1f1b" it runs only that schedule, m = 16
 * micro-batches of 256 rows (GPipe's activations on stage 0: 24 MB), three
 * steps, and prints each rank's peak RSS (VmHWM) and its growth over the
 * RSS before the first step; run once per schedule, as separate jobs, since
 * the peak of a process never goes down. A limit in MB after the schedule
 * makes it exit 1 when a rank grows more (the pipeline_peak_rss ctest). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench.h"
#include "cft/cft.h"
#include "cft/pipeline.h"

enum { W = 512, LAYERS = 3, MB_ROWS = 64 };
static const char *const names[LAYERS] = {"l0", "l1", "l2"};

static cft_status body(const cft_tree *p, cft_array *x, cft_array **h) {
    for (int l = 0; l < LAYERS; l++)
        x = cft_tanh(cft_matmul(x, cft_tree_at(p, l)));
    *h = x;
    return CFT_OK;
}
static cft_status mid(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                      cft_array **out) {
    (void)env, (void)nin, (void)nout;
    return body(p, in[0], out);
}
static cft_status last(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                       cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h;
    body(p, in[0], &h);
    (void)in[1]; /* the same work as the other stages, plus a cheap loss */
    out[0] = cft_mean(cft_mul(h, h), NULL, 0, false);
    return CFT_OK;
}

/* VmHWM or VmRSS of this process, MB */
static double status_mb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double mb = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n))
            mb = strtod(line + n, NULL) / 1024.0;
    if (f)
        fclose(f);
    return mb;
}

static int peak_rss(cft_dist_group *g, cft_fn *f, cft_tree *params, int r, int S, const char *which,
                    double limit_mb) {
    int s = !strcmp(which, "1f1b"), m = 16;
    int64_t rows = (int64_t)m * 256;
    cft_array *x = cft_random_normal(cft_random_key(5), CFT_F32, (int64_t[]){rows, W}, 2);
    cft_array *t = cft_zeros(CFT_I32, (int64_t[]){rows}, 1);
    cft_pipeline_options o = {m, (cft_pipe_schedule)s, false};
    cft_pipeline *p = cft_pipeline_new(g, f, params, &o);
    double before = status_mb("VmRSS:");
    int live = 0;
    for (int it = 0; it < 3; it++) {
        cft_tree *gr;
        if (cft_pipeline_step(p, params, r == 0 ? x : NULL, r == S - 1 ? t : NULL, NULL, &gr) !=
            CFT_OK) {
            fprintf(stderr, "%s\n", cft_last_error_message());
            return 1;
        }
        live = cft_pipeline_last_stats(p).peak_live;
    }
    double peak = status_mb("VmHWM:");
    for (int q = 0; q < S; q++) {
        if (q == r)
            printf("{\"bench\": \"pipeline_peak_rss\", \"config\": {\"ranks\": %d, "
                   "\"micro_batches\": %d, \"schedule\": \"%s\", \"rows_per_micro_batch\": 256}, "
                   "\"rank\": %d, \"live_micro_batches\": %d, \"activation_mb\": %.1f, "
                   "\"rss_before_mb\": %.1f, \"peak_rss_mb\": %.1f, \"growth_mb\": %.1f}\n",
                   S, m, which, r, live, live * 256.0 * W * 4 * LAYERS / (1 << 20), before, peak,
                   peak - before);
        fflush(stdout);
        cft_dist_barrier(g);
    }
    cft_array *worst = cft_dist_all_reduce(g, cft_scalar(peak - before, CFT_F64), CFT_DIST_MAX);
    cft_dist_finalize();
    if (limit_mb > 0 && cft_item(worst) > limit_mb) {
        if (r == 0)
            fprintf(stderr, "peak RSS grew %.1f MB on some rank, over the limit of %.1f MB\n",
                    cft_item(worst), limit_mb);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK)
        return 1;
    cft_set_num_threads(1);
    cft_dist_group *g = cft_dist_world();
    int r = cft_dist_rank(g), S = cft_dist_size(g);
    cft_array *k = cft_random_split(cft_random_key(3 + (uint64_t)r), LAYERS), *ws[LAYERS];
    for (int l = 0; l < LAYERS; l++)
        ws[l] = cft_mul_s(cft_random_normal(cft_index(k, l), CFT_F32, (int64_t[]){W, W}, 2), 0.04);
    cft_tree *params = cft_tree_from(names, ws, LAYERS);
    cft_fn *f = r < S - 1 ? cft_tree_fn_new(mid, NULL, params, 1, 1)
                          : cft_tree_fn_new(last, NULL, params, 2, 1);
    if (argc > 2 && !strcmp(argv[1], "--peak-rss"))
        return peak_rss(g, f, params, r, S, argv[2], argc > 3 ? atof(argv[3]) : 0);
    /* raw MPI: one activation-sized message, one way */
    double hop_us = 0;
    if (S >= 2 && r < 2) {
        float *buf = calloc((size_t)MB_ROWS * W, sizeof(float));
        int n = MB_ROWS * W, reps = 200;
        for (int it = -20; it < reps; it++) {
            double t0 = it == 0 ? MPI_Wtime() : 0;
            if (it == 0)
                hop_us = t0;
            if (r == 0) {
                MPI_Send(buf, n, MPI_FLOAT, 1, 9, MPI_COMM_WORLD);
                MPI_Recv(buf, n, MPI_FLOAT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, n, MPI_FLOAT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, n, MPI_FLOAT, 0, 9, MPI_COMM_WORLD);
            }
        }
        hop_us = (MPI_Wtime() - hop_us) / (2.0 * reps) * 1e6;
        free(buf);
    }
    const char *sched[2] = {"gpipe", "1f1b"};
    for (int m = 4; m <= 16; m *= 2)
        for (int s = 0; s < 2; s++) {
            int64_t rows = (int64_t)m * MB_ROWS;
            cft_array *x = cft_random_normal(cft_random_key(5), CFT_F32, (int64_t[]){rows, W}, 2);
            cft_array *t = cft_astype(cft_mul_s(cft_random_uniform(cft_random_key(6), CFT_F32,
                                                                   (int64_t[]){rows}, 1, 0, 1),
                                                W - 0.01),
                                      CFT_I32);
            cft_pipeline_options o = {m, (cft_pipe_schedule)s, false};
            cft_pipeline *p = cft_pipeline_new(g, f, params, &o);
            double bub[5], wait[5], comp[5], stepm[5];
            int peak = 0;
            for (int it = -2; it < 5; it++) {
                cft_tree *gr;
                if (cft_pipeline_step(p, params, r == 0 ? x : NULL, r == S - 1 ? t : NULL, NULL,
                                      &gr) != CFT_OK) {
                    fprintf(stderr, "%s\n", cft_last_error_message());
                    return 1;
                }
                cft_pipeline_stats st = cft_pipeline_last_stats(p);
                /* the stages' mean bubble */
                cft_array *b = cft_dist_all_reduce(
                    g, cft_scalar(1 - st.compute_s / st.step_s, CFT_F64), CFT_DIST_MEAN);
                cft_array *wt = cft_dist_all_reduce(g, cft_scalar(st.wait_s / st.step_s, CFT_F64),
                                                    CFT_DIST_MEAN);
                cft_array *cs =
                    cft_dist_all_reduce(g, cft_scalar(st.compute_s, CFT_F64), CFT_DIST_MEAN);
                if (it >= 0)
                    bub[it] = cft_item(b), wait[it] = cft_item(wt), comp[it] = cft_item(cs),
                    stepm[it] = st.step_s;
                peak = st.peak_live;
                if (getenv("CFT_BENCH_VERBOSE") && it == 4)
                    fprintf(stderr, "rank %d m %d %s: compute %.2f ms wait %.2f ms step %.2f ms\n",
                            r, m, sched[s], st.compute_s * 1e3, st.wait_s * 1e3, st.step_s * 1e3);
            }
            double med, mn, wmed, wmn;
            bench_stats(bub, 5, &med, &mn);
            bench_stats(wait, 5, &wmed, &wmn);
            double theory = (double)(S - 1) / (m + S - 1), cmed, cmn, smed, smn;
            bench_stats(comp, 5, &cmed, &cmn);
            bench_stats(stepm, 5, &smed, &smn);
            /* the ideal step (compute / (1 - theory)) plus 2m hops */
            double with_hops = 1 - cmed / (cmed / (1 - theory) + 2.0 * m * hop_us * 1e-6);
            if (r == 0)
                printf("{\"bench\": \"pipeline\", \"config\": {\"ranks\": %d, \"micro_batches\": "
                       "%d, \"schedule\": \"%s\", \"rows_per_micro_batch\": %d}, \"method\": "
                       "\"cft_pipeline_step\", \"bubble\": %.3f, \"threads\": 1, \"baseline\": "
                       "\"theoretical bubble (p-1)/(m+p-1)\", \"baseline_bubble\": %.3f, "
                       "\"ratio_to_baseline\": %.3f, \"waiting_share\": %.3f, "
                       "\"stage0_live_micro_batches\": %d, "
                       "\"stage0_activation_mb\": %.1f, \"hop_us\": %.1f, "
                       "\"with_hops_bubble\": %.3f, \"ratio_to_hops_baseline\": %.3f}\n",
                       S, m, sched[s], MB_ROWS, med, theory, med / theory, wmed, peak,
                       peak * (double)MB_ROWS * W * 4 * LAYERS / (1 << 20), hop_us, with_hops,
                       med / with_hops);
        }
    cft_dist_finalize();
    return 0;
}
