/* maml_sinusoid.c: MAML on sinusoid regression (Finn et al. 2017) with
 * second-order gradients: cft_grad through cft_grad, under cft_vmap.
 *
 * A task is y = A sin(x - phase) with A ~ U[0.1, 5], phase ~ U[0, pi] and
 * x ~ U[-5, 5]; it gives K = 10 support points to adapt on and 10 query
 * points to score the adapted model. The model is an MLP 1 -> 40 -> 40 -> 1
 * with ReLU. The meta-objective of a batch of 25 tasks is the mean query loss
 * after a few inner SGD steps (lr 0.01) on each task's support points:
 *
 *     task_loss(params, task) = mse(adapt(params, support), query)
 *     meta_loss(params, tasks) = mean(vmap(task_loss)(params, tasks))
 *
 * and the outer Adam step (lr 1e-3) uses cft_value_and_grad(meta_loss),
 * which differentiates through the inner cft_grad steps (full MAML, not the
 * first-order approximation). Tasks are drawn by cft_vmap over a batch of
 * cft_random keys. A baseline MLP is trained on the same task distribution
 * by plain joint regression; both are then adapted on held-out tasks with the
 * same inner steps and their query MSEs compared.
 *
 * Before training it checks the meta-gradient against finite differences.
 *
 *   build/examples/maml_sinusoid [--quick] [--iters N] [--inner N] [--seed S]
 *
 * --quick (for ctest) trains 2000 meta-steps instead of 20000 (a few seconds);
 * --log FILE.csv writes the query loss of both methods at 200 meta-steps
 * (scripts/plot.sh draws it)
 * and still requires MAML to beat the baseline after adaptation. The training
 * steps are compiled by cft_jit (CFT_JIT=0 interprets them instead).
 */
#define _XOPEN_SOURCE 700 /* M_PI under -std=c11 */
#include "csv_log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cft/cft.h>

#include "maml.h"

/* ---- tasks ---- */

/* (key) -> (x_support [K,1], y_support, x_query [Q,1], y_query); env: &Q */
static cft_status sample_task(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    int64_t nq = *(const int64_t *)env, n = K_SHOT + nq;
    cft_array *k = cft_random_split(in[0], 3);
    cft_array *amp = cft_random_uniform(cft_index(k, 0), CFT_F32, NULL, 0, 0.1, 5.0);
    cft_array *phase = cft_random_uniform(cft_index(k, 1), CFT_F32, NULL, 0, 0.0, M_PI);
    cft_array *x = cft_random_uniform(cft_index(k, 2), CFT_F32, (int64_t[]){n, 1}, 2, -5.0, 5.0);
    cft_array *y = cft_mul(amp, cft_sin(cft_sub(x, phase)));
    int64_t lo[2] = {0, 0}, mid[2] = {K_SHOT, 1}, hi[2] = {n, 1}, mid0[2] = {K_SHOT, 0};
    out[0] = cft_slice(x, lo, mid, NULL);
    out[1] = cft_slice(y, lo, mid, NULL);
    out[2] = cft_slice(x, mid0, hi, NULL);
    out[3] = cft_slice(y, mid0, hi, NULL);
    return CFT_OK;
}

/* Samplers of tasks with nq query points, made once (so traced once):
 * keys [T,2] -> 4 arrays [T, ...]. */
static int64_t NQ_TRAIN = K_SHOT, NQ_EVAL = 100;
static cft_fn *task_sampler(int64_t *nq) {
    return cft_vmap(cft_fn_new(sample_task, nq, 1, 4), NULL, NULL);
}

/* T tasks from one key */
static cft_status sample_tasks(cft_fn *sampler, cft_array *key, int64_t T, cft_array **tasks) {
    return cft_fn_call(sampler, (cft_array *[]){cft_random_split(key, T)}, tasks);
}

/* The baseline's objective: ordinary regression on all points of all tasks
 * (support and query sets have the same size, so this is the pooled MSE). */
static cft_status joint_objective(void *env, int nin, cft_array *const *in, int nout,
                                  cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *a[NP + 2];
    memcpy(a, in, sizeof(cft_array *) * NP);
    a[NP] = in[NP], a[NP + 1] = in[NP + 1];
    cft_array *ls;
    mse_loss(NULL, NP + 2, a, 1, &ls);
    a[NP] = in[NP + 2], a[NP + 1] = in[NP + 3];
    cft_array *lq;
    mse_loss(NULL, NP + 2, a, 1, &lq);
    out[0] = cft_mul_s(cft_add(ls, lq), 0.5);
    return CFT_OK;
}

/* Train params with Adam on objective `obj` for `iters` meta-batches drawn
 * from `seed`; prints the loss every `every` steps. Returns 0 on success. */
/* --log: meta-step, method, mean query loss over the last log_every steps */
static csv_log mlog;
static int log_every = 1;

static int train(const char *name, cft_fn *obj, cft_array **params, int iters, int every,
                 uint64_t seed) {
    cft_fn *sampler = task_sampler(&NQ_TRAIN);
    cft_fn *vg = cft_value_and_grad(obj, (int[]){0, 1, 2, 3, 4, 5}, NP, false);
    cft_fn *step = cft_jit(cft_fn_new(adam_step, vg, 3 * NP + 6, 3 * NP + 1)); /* compiled */
    cft_array *st[3 * NP + 6], *out[3 * NP + 1];
    for (int l = 0; l < NP; l++) {
        st[l] = params[l];
        st[NP + l] = st[2 * NP + l] = cft_zeros_like(params[l]);
    }
    cft_array *key = cft_random_key(seed);
    double sum = 0, lsum = 0;
    for (int t = 1; t <= iters; t++) {
        st[3 * NP] = cft_scalar(1 / (1 - pow(BETA1, t)), CFT_F32);
        st[3 * NP + 1] = cft_scalar(1 / (1 - pow(BETA2, t)), CFT_F32);
        if (sample_tasks(sampler, cft_random_fold_in(key, t), META_BATCH, st + 3 * NP + 2) !=
                CFT_OK ||
            cft_fn_call(step, st, out) != CFT_OK) {
            fprintf(stderr, "%s: step %d failed: %s\n", name, t, cft_last_error_message());
            return -1;
        }
        memcpy(st, out, sizeof(cft_array *) * 3 * NP);
        double loss = cft_item(out[3 * NP]);
        sum += loss, lsum += loss;
        if (t % log_every == 0) {
            csv_log_row(&mlog, "%d,%s,%.6f", t, name, lsum / log_every);
            lsum = 0;
        }
        if (t % every == 0) {
            printf("  %-8s step %5d  loss %.4f\n", name, t, sum / every);
            fflush(stdout);
            sum = 0;
        }
    }
    memcpy(params, st, sizeof(cft_array *) * NP);
    return 0;
}

/* mean and standard error of the query MSE after n_inner steps on tasks */
static int evaluate(cft_array *const *params, int n_inner, cft_array *const *tasks, double *mean,
                    double *sem) {
    cft_array *in[NP + 4], *losses;
    memcpy(in, params, sizeof(cft_array *) * NP);
    memcpy(in + NP, tasks, sizeof(cft_array *) * 4);
    if (cft_fn_call(per_task_losses(n_inner, false), in, &losses) != CFT_OK)
        return -1;
    int64_t T = cft_array_size(losses);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < T; i++) {
        double l = cft_item_at(losses, i);
        s += l, s2 += l * l;
    }
    *mean = s / T;
    *sem = sqrt(fmax(s2 / T - *mean * *mean, 0) / (T - 1));
    return 0;
}

/* The outer gradient really is second order: its derivative along a random
 * direction matches central finite differences of the meta-objective (in
 * f64, where they are accurate), and the first-order approximation does not. */
static int check_meta_grad(cft_array *const *params, int n_inner, uint64_t seed) {
    cft_array *in[NP + 4], *dir[NP], *g[NP], *gfo[NP];
    cft_array *keys = cft_random_split(cft_random_key(seed), NP + 1);
    if (sample_tasks(task_sampler(&NQ_TRAIN), cft_index(keys, NP), META_BATCH, in + NP) != CFT_OK)
        return -1;
    for (int i = 0; i < 4; i++)
        in[NP + i] = cft_astype(in[NP + i], CFT_F64);
    for (int l = 0; l < NP; l++) {
        in[l] = cft_astype(params[l], CFT_F64);
        dir[l] = cft_random_normal(cft_index(keys, l), CFT_F64, cft_array_shape(params[l]),
                                   cft_array_ndim(params[l]));
    }
    int argnums[NP] = {0, 1, 2, 3, 4, 5};
    cft_fn *meta = cft_fn_new(maml_objective, per_task_losses(n_inner, false), NP + 4, 1);
    cft_fn *meta_fo = cft_fn_new(maml_objective, per_task_losses(n_inner, true), NP + 4, 1);
    if (cft_fn_call(cft_grad(meta, argnums, NP), in, g) != CFT_OK ||
        cft_fn_call(cft_grad(meta_fo, argnums, NP), in, gfo) != CFT_OK)
        return -1;
    double h = 1e-6, dot = 0, dot_fo = 0, f[2];
    for (int l = 0; l < NP; l++) {
        dot += cft_item(cft_sum(cft_mul(g[l], dir[l]), NULL, 0, false));
        dot_fo += cft_item(cft_sum(cft_mul(gfo[l], dir[l]), NULL, 0, false));
    }
    for (int sgn = 0; sgn < 2; sgn++) {
        cft_array *x[NP + 4];
        memcpy(x, in, sizeof x);
        for (int l = 0; l < NP; l++)
            x[l] = cft_add(in[l], cft_mul_s(dir[l], sgn ? -h : h));
        f[sgn] = cft_item(cft_fn_call1(meta, x));
    }
    double fd = (f[0] - f[1]) / (2 * h);
    double err = fabs(dot - fd) / fabs(fd), err_fo = fabs(dot_fo - fd) / fabs(fd);
    printf("meta-gradient along a random direction: finite differences %.6f, second-order %.6f "
           "(rel. err %.1e), first-order MAML %.6f (rel. err %.1e)\n",
           fd, dot, err, dot_fo, err_fo);
    return err < 1e-5 ? 0 : -1;
}

int main(int argc, char **argv) {
    int iters = 20000, n_inner = 1;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            iters = 2000; /* ctest */
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        if (!strcmp(argv[i], "--inner") && i + 1 < argc)
            n_inner = atoi(argv[++i]);
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        if (!strcmp(argv[i], "--log") && i + 1 < argc)
            i++; /* csv_log_arg */
    }
    if (n_inner < 1 || n_inner > MAX_INNER || iters < 1) {
        fprintf(stderr, "--inner must be in 1..%d, --iters positive\n", MAX_INNER);
        return 2;
    }
    cft_init();
    cft_set_num_threads(1);                     /* small matrices: one thread is fastest */
    int every = iters >= 10 ? iters / 10 : 1;   /* print 10 times */
    log_every = iters >= 200 ? iters / 200 : 1; /* log 200 points */
    if (csv_log_open(&mlog, csv_log_arg(argc, argv), "meta_step,method,query_loss"))
        return 2;
    printf("MAML, sinusoid regression: MLP 1-40-40-1, K=%d support + %d query points, %d tasks per "
           "meta-batch,\n%d inner SGD step(s) (lr %.2g), Adam lr %.0e, %d meta-steps\n",
           K_SHOT, K_SHOT, META_BATCH, n_inner, INNER_LR, OUTER_LR, iters);

    cft_array *maml[NP], *base[NP];
    mlp_init(seed, maml);
    mlp_init(seed, base); /* same start: only the training objective differs */
    cft_fn *meta = cft_fn_new(maml_objective, per_task_losses(n_inner, false), NP + 4, 1);
    cft_fn *joint = cft_fn_new(joint_objective, NULL, NP + 4, 1);
    if (check_meta_grad(maml, n_inner, 7 + seed)) {
        fprintf(stderr, "meta-gradient check failed %s\n", cft_last_error_message());
        return 1;
    }
    printf("meta-training (query loss after adaptation):\n");
    if (train("maml", meta, maml, iters, every, 100 + seed))
        return 1;
    printf("baseline: joint regression on the same tasks, same steps (pooled MSE):\n");
    if (train("pretrain", joint, base, iters, every, 100 + seed))
        return 1;

    /* held-out tasks: 100 tasks, K support points, 100 query points each */
    cft_array *tasks[4];
    if (sample_tasks(task_sampler(&NQ_EVAL), cft_random_key(999 + seed), 100, tasks) != CFT_OK) {
        fprintf(stderr, "sampling failed: %s\n", cft_last_error_message());
        return 1;
    }
    printf("held-out: 100 tasks, adapt on K=%d points, MSE on 100 query points (mean +- s.e.)\n",
           K_SHOT);
    printf("  inner steps   %-20s %-20s\n", "MAML", "pretrained baseline");
    double mm[11], bm[11];
    int steps[3] = {0, 1, 10};
    for (int i = 0; i < 3; i++) {
        int k = steps[i];
        double ms, bs;
        if (evaluate(maml, k, tasks, &mm[k], &ms) || evaluate(base, k, tasks, &bm[k], &bs)) {
            fprintf(stderr, "evaluation failed: %s\n", cft_last_error_message());
            return 1;
        }
        printf("  %11d   %7.3f +- %-9.3f %7.3f +- %-9.3f\n", k, mm[k], ms, bm[k], bs);
    }
    /* MAML wins when, after the same adaptation, its MSE is clearly below
     * the baseline's (0.7x is the bar; it is 0.4x or less after 2000 meta-steps) */
    bool ok = mm[1] < 0.7 * bm[1] && mm[10] < 0.7 * bm[10];
    printf("MAML after adaptation: %.3f (1 step), %.3f (10 steps) vs baseline %.3f, %.3f: %s\n",
           mm[1], mm[10], bm[1], bm[10], ok ? "MAML wins" : "MAML does NOT win");
    if (csv_log_close(&mlog))
        return 1;
    return ok ? 0 : 1;
}
