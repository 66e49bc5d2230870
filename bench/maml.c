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

#include "bench.h"

#define NP 6
#define KS 10
static const double INNER_LR = 0.01, LR = 1e-3, B1 = 0.9, B2 = 0.999, EPS = 1e-8;

/* ---- model, task loss, meta-objective, Adam (as in the example) ---- */

static cft_array *mlp(cft_array *const *p, cft_array *x) {
    cft_array *h = cft_relu(cft_add(cft_matmul(x, p[0]), p[1]));
    h = cft_relu(cft_add(cft_matmul(h, p[2]), p[3]));
    return cft_add(cft_matmul(h, p[4]), p[5]);
}

static cft_status mse_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mse(mlp(in, in[NP]), in[NP + 1]);
    return CFT_OK;
}

typedef struct {
    cft_fn *grad;
    int n_inner;
} inner_cfg;
static inner_cfg cfgs[6]; /* env of task_loss, by n_inner (static: GC-visible) */

/* (params[6], xs, ys, xq, yq) -> query loss after n_inner SGD steps */
static cft_status task_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    const inner_cfg *c = env;
    (void)nin, (void)nout;
    cft_array *a[NP + 2], *g[NP];
    memcpy(a, in, sizeof(cft_array *) * (NP + 2));
    for (int s = 0; s < c->n_inner; s++) {
        cft_status st = cft_fn_call(c->grad, a, g);
        if (st != CFT_OK)
            return st;
        for (int l = 0; l < NP; l++)
            a[l] = cft_sub(a[l], cft_mul_s(g[l], INNER_LR));
    }
    a[NP] = in[NP + 2], a[NP + 1] = in[NP + 3];
    return mse_loss(NULL, NP + 2, a, 1, out);
}

/* (params[6], xs, ys, xq, yq [T, ...]) -> mean of the per-task losses */
static cft_status meta_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *l;
    cft_status st = cft_fn_call(env, in, &l);
    out[0] = cft_mean(l, NULL, 0, false);
    return st;
}

/* (params[6], m[6], v[6], c1, c2, grads[6]) -> (params, m, v) */
static cft_status adam(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *c1 = in[3 * NP], *c2 = in[3 * NP + 1];
    for (int l = 0; l < NP; l++) {
        cft_array *g = in[3 * NP + 2 + l];
        cft_array *m = cft_add(cft_mul_s(in[NP + l], B1), cft_mul_s(g, 1 - B1));
        cft_array *v = cft_add(cft_mul_s(in[2 * NP + l], B2), cft_mul_s(cft_square(g), 1 - B2));
        out[l] = cft_sub(
            in[l],
            cft_mul_s(cft_div(cft_mul(m, c1), cft_add_s(cft_sqrt(cft_mul(v, c2)), EPS)), LR));
        out[NP + l] = m, out[2 * NP + l] = v;
    }
    return CFT_OK;
}

/* the vmapped meta-step: (params, m, v, c1, c2, xs, ys, xq, yq) -> (params, m, v, loss) */
static cft_status meta_step(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *a[NP + 4], *vg[1 + NP], *ad[3 * NP + 2 + NP];
    memcpy(a, in, sizeof(cft_array *) * NP);
    memcpy(a + NP, in + 3 * NP + 2, sizeof(cft_array *) * 4);
    cft_status st = cft_fn_call(env, a, vg);
    if (st != CFT_OK)
        return st;
    memcpy(ad, in, sizeof(cft_array *) * (3 * NP + 2));
    memcpy(ad + 3 * NP + 2, vg + 1, sizeof(cft_array *) * NP);
    adam(NULL, 4 * NP + 2, ad, 3 * NP, out);
    out[3 * NP] = vg[0];
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
           "\"median_ms\": %.4f, \"min_ms\": %.4f, \"threads\": 1, \"baseline\": \"%s\", "
           "\"baseline_median_ms\": %.4f, \"speedup_vs_baseline\": %.2f, "
           "\"max_abs_diff_vs_interpreted_loop\": %.2e, "
           "\"peak_rss_mb\": %.1f}\n",
           T, n_inner, KS, method, med, mn, base, base_med, base_med / med, diff, peak_rss_mb());
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

int main(void) {
    openblas_set_num_threads(1);
    cft_init();
    static const int64_t sz[4] = {1, 40, 40, 1};
    cft_array *params[NP];
    cft_array *keys = cft_random_split(cft_random_key(1), NP);
    for (int l = 0; l < 3; l++) {
        double bound = 1.0 / sqrt((double)sz[l]);
        int64_t ws[2] = {sz[l], sz[l + 1]};
        params[2 * l] = cft_random_uniform(cft_index(keys, 2 * l), CFT_F32, ws, 2, -bound, bound);
        params[2 * l + 1] =
            cft_random_uniform(cft_index(keys, 2 * l + 1), CFT_F32, ws + 1, 1, -bound, bound);
    }
    int argnums[NP] = {0, 1, 2, 3, 4, 5};
    int in_axes[NP + 4] = {CFT_NOT_BATCHED,
                           CFT_NOT_BATCHED,
                           CFT_NOT_BATCHED,
                           CFT_NOT_BATCHED,
                           CFT_NOT_BATCHED,
                           CFT_NOT_BATCHED,
                           0,
                           0,
                           0,
                           0};
    cft_fn *mse_grad = cft_grad(cft_fn_new(mse_loss, NULL, NP + 2, 1), argnums, NP);
    cft_fn *adam_fn = cft_fn_new(adam, NULL, 4 * NP + 2, 3 * NP);
    int inners[2] = {5, 1}, Ts[3] = {5, 25, 100};
    for (int a = 0; a < 2; a++) {
        int n = inners[a];
        cfgs[n] = (inner_cfg){mse_grad, n};
        cft_fn *task = cft_fn_new(task_loss, &cfgs[n], NP + 4, 1);
        for (int b = 0; b < 3; b++) {
            static job j;
            j.T = Ts[b];
            for (int l = 0; l < NP; l++) {
                j.state[l] = params[l];
                j.state[NP + l] = j.state[2 * NP + l] = cft_zeros_like(params[l]);
            }
            j.state[3 * NP] = cft_scalar(1 / (1 - B1), CFT_F32);
            j.state[3 * NP + 1] = cft_scalar(1 / (1 - B2), CFT_F32);
            make_tasks(j.T, 7, j.state + 3 * NP + 2);
            for (int t = 0; t < j.T; t++)
                for (int i = 0; i < 4; i++)
                    j.task[t][i] = cft_index(j.state[3 * NP + 2 + i], t);
            /* fresh functions per config, so the first call (trace) can be timed */
            cft_fn *meta = cft_fn_new(meta_loss, cft_vmap(task, in_axes, NULL), NP + 4, 1);
            j.step = cft_fn_new(meta_step, cft_value_and_grad(meta, argnums, NP, false), 3 * NP + 6,
                                3 * NP + 1);
            j.task_vg = cft_value_and_grad(task, argnums, NP, false);
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
            printf(
                "{\"bench\": \"maml\", \"config\": {\"T\": %d, \"n_inner\": %d, \"K\": %d}, "
                "\"method\": "
                "\"cft_vmap_first_call\", \"median_ms\": %.3f, \"min_ms\": %.3f, \"threads\": 1}\n",
                j.T, n, KS, first, first);
        }
    }
    return 0;
}
