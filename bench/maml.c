/* maml.c (bench): one second-order MAML meta-step on sinusoid regression
 * (the model and tasks of examples/maml_sinusoid.c: MLP 1-40-40-1, K = 10
 * support and 10 query points per task, inner SGD lr 0.01) for T = 5, 25,
 * 100 tasks and 5 or 1 inner steps, single-threaded. Methods, measured in
 * the same process:
 *   cft_vmap: value_and_grad of mean(vmap(task_loss)) + Adam, one cft_fn;
 *   loop_of_task_grads: a C loop over tasks calling value_and_grad(task_loss)
 *     per task, summing the gradients, then the same Adam update;
 *   cft_jit_vmap, loop_of_task_grads_jit: the same with every cft_fn the
 *     method calls compiled by cft_jit (compared with the jitted loop).
 * The interpreted methods are compared with the interpreted loop.
 * One JSON object per line (the per_sample_grads format). functorch 1.13 on
 * this machine, one thread: T = 5/25/100 with 5 inner steps 5.9/9.3/22.9 ms,
 * with 1 inner step 1.6/2.4/4.8 ms. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cft/cft.h>

#include "../examples/maml.h"
#include "bench.h"

#define KS K_SHOT

/* the loop baseline's Adam step: (params, m, v, c1, c2, mean grads[6]) -> (params, m, v) */
static cft_status adam(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    adam_update(in, in + 3 * NP + 2, out);
    return CFT_OK;
}

typedef struct {
    int T;
    cft_fn *step;                                 /* vmap method: the whole meta-step */
    cft_fn *task_vg, *adam_fn;                    /* loop method */
    cft_array *state[3 * NP + 6];                 /* params, m, v, c1, c2, xs, ys, xq, yq */
    cft_array *task[100][4];                      /* per-task views for the loop */
    cft_array *out_v[3 * NP + 1], *out_l[3 * NP]; /* last results of each method */
} job;

static void run_vmap(void *p) {
    job *j = p;
    cft_fn_call(j->step, j->state, j->out_v);
}

static void run_loop(void *p) {
    job *j = p;
    cft_array *in[NP + 4], *vg[1 + NP], *sum[NP], *ad[4 * NP + 2];
    memcpy(in, j->state, sizeof(cft_array *) * NP);
    for (int t = 0; t < j->T; t++) {
        memcpy(in + NP, j->task[t], sizeof(cft_array *) * 4);
        cft_fn_call(j->task_vg, in, vg);
        for (int l = 0; l < NP; l++)
            sum[l] = t ? cft_add(sum[l], vg[1 + l]) : vg[1 + l];
    }
    memcpy(ad, j->state, sizeof(cft_array *) * (3 * NP + 2));
    for (int l = 0; l < NP; l++)
        ad[3 * NP + 2 + l] = cft_mul_s(sum[l], 1.0 / j->T);
    cft_fn_call(j->adam_fn, ad, j->out_l);
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static void emit(int T, int n_inner, const char *method, double med, double mn, const char *base,
                 double base_med, double diff) {
    printf("{\"bench\": \"maml\", \"config\": {\"T\": %d, \"n_inner\": %d, \"K\": %d}, \"method\": "
           "\"%s\", "
           "\"median_ms\": %.4f, \"min_ms\": %.4f, \"threads\": %d, \"baseline\": \"%s\", "
           "\"baseline_median_ms\": %.4f, \"speedup_vs_baseline\": %.2f, "
           "\"ratio_to_baseline\": %.3f, \"max_abs_diff_vs_interpreted_loop\": %.2e, "
           "\"peak_rss_mb\": %.1f}\n",
           T, n_inner, KS, method, med, mn, bench_nthreads, base, base_med, base_med / med,
           med / base_med, diff, peak_rss_mb());
    fflush(stdout);
}

/* T tasks on the host: amplitude U[0.1,5], phase U[0,pi], x U[-5,5] */
static void make_tasks(int T, uint64_t seed, cft_array **out) {
    cft_array *k = cft_random_split(cft_random_key(seed), 3);
    cft_array *amp =
        cft_random_uniform(cft_index(k, 0), CFT_F32, (int64_t[]){T, 1, 1}, 3, 0.1, 5.0);
    cft_array *ph =
        cft_random_uniform(cft_index(k, 1), CFT_F32, (int64_t[]){T, 1, 1}, 3, 0.0, M_PI);
    cft_array *x =
        cft_random_uniform(cft_index(k, 2), CFT_F32, (int64_t[]){T, 2 * KS, 1}, 3, -5.0, 5.0);
    cft_array *y = cft_mul(amp, cft_sin(cft_sub(x, ph)));
    int64_t lo[3] = {0, 0, 0}, mid[3] = {T, KS, 1}, mid0[3] = {0, KS, 0}, hi[3] = {T, 2 * KS, 1};
    out[0] = cft_slice(x, lo, mid, NULL), out[1] = cft_slice(y, lo, mid, NULL);
    out[2] = cft_slice(x, mid0, hi, NULL), out[3] = cft_slice(y, mid0, hi, NULL);
}

int main(int argc, char **argv) {
    bench_threads(argc, argv); /* and cft_init */
    cft_array *params[NP];
    mlp_init(1, params);
    int argnums[NP] = {0, 1, 2, 3, 4, 5};
    cft_fn *adam_fn = cft_fn_new(adam, NULL, 4 * NP + 2, 3 * NP);
    int inners[2] = {5, 1}, Ts[3] = {5, 25, 100};
    const cft_dev *dev = bench_device(argc, argv);
    for (int a = 0; a < 2 && dev; a++) /* --device: the jitted meta-step there, T = 100 */ {
        static cft_array *state[3 * NP + 6];
        for (int l = 0; l < NP; l++) {
            state[l] = params[l];
            state[NP + l] = state[2 * NP + l] = cft_zeros_like(params[l]);
        }
        state[3 * NP] = cft_scalar(1 / (1 - BETA1), CFT_F32);
        state[3 * NP + 1] = cft_scalar(1 / (1 - BETA2), CFT_F32);
        make_tasks(100, 7, state + 3 * NP + 2);
        cft_fn *meta = cft_fn_new(maml_objective, per_task_losses(inners[a], false), NP + 4, 1);
        char cfg[64];
        snprintf(cfg, sizeof cfg, "\"T\": 100, \"n_inner\": %d, \"K\": %d", inners[a], KS);
        bench_on_device("maml", cfg, "cft_jit_vmap",
                        cft_fn_new(adam_step, cft_value_and_grad(meta, argnums, NP, false),
                                   3 * NP + 6, 3 * NP + 1),
                        3 * NP + 6, state, 3 * NP + 1, dev);
    }
    if (dev)
        return 0;
    for (int a = 0; a < 2; a++) {
        int n = inners[a];
        for (int b = 0; b < 3; b++) {
            static job j;
            j.T = Ts[b];
            for (int l = 0; l < NP; l++) {
                j.state[l] = params[l];
                j.state[NP + l] = j.state[2 * NP + l] = cft_zeros_like(params[l]);
            }
            j.state[3 * NP] = cft_scalar(1 / (1 - BETA1), CFT_F32);
            j.state[3 * NP + 1] = cft_scalar(1 / (1 - BETA2), CFT_F32);
            make_tasks(j.T, 7, j.state + 3 * NP + 2);
            for (int t = 0; t < j.T; t++)
                for (int i = 0; i < 4; i++)
                    j.task[t][i] = cft_index(j.state[3 * NP + 2 + i], t);
            /* fresh functions per config, so the first call (trace) can be timed */
            cft_fn *meta = cft_fn_new(maml_objective, per_task_losses(n, false), NP + 4, 1);
            j.step = cft_fn_new(adam_step, cft_value_and_grad(meta, argnums, NP, false), 3 * NP + 6,
                                3 * NP + 1);
            j.task_vg = cft_value_and_grad(task_fn(n, false), argnums, NP, false);
            j.adam_fn = adam_fn;
            double t0 = now_ms();
            run_vmap(&j);
            double first = now_ms() - t0;
            double vm, vmin, lm, lmin, jvm, jvmin, jlm, jlmin;
            timeit(run_vmap, &j, &vm, &vmin);
            timeit(run_loop, &j, &lm, &lmin);
            static job jj; /* the same, compiled */
            jj = j;
            jj.step = cft_jit(j.step), jj.task_vg = cft_jit(j.task_vg),
            jj.adam_fn = cft_jit(adam_fn);
            timeit(run_vmap, &jj, &jvm, &jvmin);
            timeit(run_loop, &jj, &jlm, &jlmin);
            /* updated params and Adam moments, against the interpreted loop */
            double diff = 0, jdiff = 0, jldiff = 0;
            for (int i = 0; i < 3 * NP; i++) {
                diff = fmax(diff, cft_max_abs_diff(j.out_v[i], j.out_l[i]));
                jdiff = fmax(jdiff, cft_max_abs_diff(jj.out_v[i], j.out_l[i]));
                jldiff = fmax(jldiff, cft_max_abs_diff(jj.out_l[i], j.out_l[i]));
            }
            emit(j.T, n, "loop_of_task_grads", lm, lmin, "loop_of_task_grads", lm, 0);
            emit(j.T, n, "cft_vmap", vm, vmin, "loop_of_task_grads", lm, diff);
            emit(j.T, n, "loop_of_task_grads_jit", jlm, jlmin, "loop_of_task_grads_jit", jlm,
                 jldiff);
            emit(j.T, n, "cft_jit_vmap", jvm, jvmin, "loop_of_task_grads_jit", jlm, jdiff);
            char cfg[80];
            snprintf(cfg, sizeof cfg, "\"T\": %d, \"n_inner\": %d, \"K\": %d", j.T, n, KS);
            bench_scaling("maml", cfg, "cft_jit_vmap", run_vmap, &jj, 40);
            printf("{\"bench\": \"maml\", \"config\": {\"T\": %d, \"n_inner\": %d, \"K\": %d}, "
                   "\"method\": "
                   "\"cft_vmap_first_call\", \"median_ms\": %.3f, \"min_ms\": %.3f, \"threads\": "
                   "%d}\n",
                   j.T, n, KS, first, first, bench_nthreads);
        }
    }
    return 0;
}
