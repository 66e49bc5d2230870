/* bench/dist/ddp_train.c (mpirun -np 2): a whole data-parallel training
 * step as a new user writes it: cft_ddp_step (forward, backward, gradients
 * averaged over the ranks in buckets) followed by the optimizer, for an MLP
 * (default 784-512-512-10, ReLU, mean cross-entropy) on random data, Adam.
 * The optimizer three ways, timed in alternating rounds in the same run:
 * eager cft_optim_update (what the program did before), the jitted
 * cft_optim_step, and the jitted step with donation. Also the optimizer
 * alone. bench/peers/ddp_torch.py is the same step with torch DDP (gloo);
 * bench/ddp_vs_torch.sh runs both alternately.
 *
 *     mpirun -np 2 build/bench/ddp_train [--threads N] [--batch B] [--sizes 784,512,512,10]
 *
 * JSON lines from rank 0: median ms per step; ratio_to_baseline = step with
 * the method's optimizer / step with the eager update. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench.h"
#include "cft/dist.h"

static int64_t sizes[16] = {784, 512, 512, 10};
static int nl = 4;

static cft_status mlp_loss(void *env, const cft_tree *t, int nin, cft_array *const *in, int nout,
                           cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = in[0];
    for (int l = 0; l + 1 < nl; l++) {
        h = cft_add(cft_matmul(h, cft_mT(cft_tree_at(t, 2 * l))), cft_tree_at(t, 2 * l + 1));
        if (l + 2 < nl)
            h = cft_relu(h);
    }
    out[0] = cft_mean(cft_cross_entropy(h, in[1]), NULL, 0, false);
    return CFT_OK;
}

typedef struct {
    cft_ddp *ddp;
    const cft_optim *o;
    cft_optim_step *st; /* NULL: eager */
    cft_tree *p, *s;
    cft_array **batch;
    cft_tree *grads; /* for the optimizer alone */
    int t;
} run_t;

static void train_step(void *arg) {
    run_t *r = arg;
    cft_tree *g, *np, *ns;
    cft_ddp_step(r->ddp, r->p, r->batch, NULL, NULL, &g);
    cft_array *step = cft_scalar(++r->t, CFT_F32);
    if (r->st)
        cft_optim_step_apply(r->st, g, r->s, r->p, step, NULL, &np, &ns);
    else
        cft_optim_update(r->o, g, r->s, r->p, step, NULL, &np, &ns);
    r->p = np, r->s = ns;
    (void)cft_item_at(cft_tree_at(np, 0), 0);
}

static void optim_only(void *arg) {
    run_t *r = arg;
    cft_tree *np, *ns;
    cft_array *step = cft_scalar(++r->t, CFT_F32);
    if (r->st)
        cft_optim_step_apply(r->st, r->grads, r->s, r->p, step, NULL, &np, &ns);
    else
        cft_optim_update(r->o, r->grads, r->s, r->p, step, NULL, &np, &ns);
    r->p = np, r->s = ns;
    (void)cft_item_at(cft_tree_at(np, 0), 0);
}

int main(int argc, char **argv) {
    cft_dist_init(&argc, &argv);
    cft_dist_group *world = cft_dist_world();
    if (!world) {
        fprintf(stderr, "ddp_train: %s\n", cft_last_error_message());
        return 1;
    }
    bench_threads(argc, argv);
    int64_t B = 64;
    int rounds = 30;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--batch"))
            B = atoll(argv[i + 1]) > 0 ? atoll(argv[i + 1]) : 64;
        if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 30;
        if (!strcmp(argv[i], "--sizes")) {
            nl = 0;
            for (char *s = argv[i + 1]; *s && nl < 16; s += strspn(s, ","))
                sizes[nl++] = strtoll(s, &s, 10);
        }
    }
    int rank = cft_dist_rank(world), p = cft_dist_size(world);
    const char *names[32];
    cft_array *w[32];
    int np = 0;
    cft_array *key = cft_random_key(0);
    for (int l = 0; l + 1 < nl; l++) { /* torch's Linear init: U(-1/sqrt(fan_in), ..) */
        char *wn = malloc(32), *bn = malloc(32);
        snprintf(wn, 32, "%d.weight", 2 * l);
        snprintf(bn, 32, "%d.bias", 2 * l);
        double b = 1.0 / sqrt((double)sizes[l]);
        names[np] = wn;
        w[np++] = cft_random_uniform(cft_random_fold_in(key, 2 * l), CFT_F32,
                                     (int64_t[]){sizes[l + 1], sizes[l]}, 2, -b, b);
        names[np] = bn;
        w[np++] = cft_random_uniform(cft_random_fold_in(key, 2 * l + 1), CFT_F32,
                                     (int64_t[]){sizes[l + 1]}, 1, -b, b);
    }
    cft_tree *params = cft_tree_from(names, w, np);
    cft_fn *loss = cft_tree_fn_new(mlp_loss, NULL, params, 2, 1);
    cft_ddp *ddp = cft_ddp_new(world, cft_jit(loss), params, NULL);
    cft_array *batch[2] = {
        cft_random_uniform(cft_random_key(10 + (uint64_t)rank), CFT_F32, (int64_t[]){B, sizes[0]},
                           2, 0, 1),
        cft_astype(cft_mul_s(cft_random_uniform(cft_random_key(20 + (uint64_t)rank), CFT_F32,
                                                (int64_t[]){B}, 1, 0, 1),
                             (double)sizes[nl - 1] - 0.01),
                   CFT_I32)};
    cft_optim adam = cft_adam(1e-3);
    run_t r[3];
    const char *method[3] = {"eager_optim_update", "jitted_optim_step",
                             "jitted_optim_step_donated"};
    cft_tree *g0;
    cft_ddp_step(ddp, params, batch, NULL, NULL, &g0);
    for (int m = 0; m < 3; m++) {
        r[m] = (run_t){ddp, &adam, NULL, params, cft_optim_init(&adam, params), batch, g0, 0};
        if (m > 0)
            r[m].st = cft_optim_step_new(
                &adam, params, m == 2 ? CFT_OPTIM_DONATE_PARAMS | CFT_OPTIM_DONATE_STATE : 0);
    }
    /* donation spends the arrays passed in: each method starts from its own copy */
    for (int m = 0; m < 3; m++) {
        cft_array *c[32];
        for (int i = 0; i < np; i++)
            c[i] = cft_add_s(w[i], 0);
        r[m].p = cft_tree_from(names, c, np);
    }
    enum { CALLS = 5 };
    double *t[2][3];
    for (int kind = 0; kind < 2; kind++) {
        work_fn f = kind ? optim_only : train_step;
        for (int m = 0; m < 3; m++) {
            t[kind][m] = calloc((size_t)rounds, sizeof(double));
            for (int k = 0; k < 5; k++)
                f(&r[m]);
        }
        for (int q = 0; q < rounds; q++)
            for (int m = 0; m < 3; m++) {
                cft_dist_barrier(world);
                double t0 = now_ms();
                for (int c = 0; c < CALLS; c++)
                    f(&r[m]);
                t[kind][m][q] = (now_ms() - t0) / CALLS;
            }
    }
    char sz[128] = "";
    for (int l = 0; l < nl; l++)
        snprintf(sz + strlen(sz), sizeof sz - strlen(sz), "%s%lld", l ? "-" : "",
                 (long long)sizes[l]);
    for (int kind = 0; kind < 2; kind++) {
        double med[3], mn[3];
        for (int m = 0; m < 3; m++)
            bench_stats(t[kind][m], rounds, &med[m], &mn[m]);
        for (int m = 0; m < 3 && rank == 0; m++)
            printf("{\"bench\": \"ddp_train\", \"config\": {\"model\": \"mlp %s\", "
                   "\"batch_per_rank\": "
                   "%lld, \"ranks\": %d, \"threads\": %d, \"optimizer\": \"adam\", \"what\": "
                   "\"%s\"}, \"method\": \"%s\", \"ms\": %.4f, \"min_ms\": %.4f, \"baseline\": "
                   "\"%s\", \"ratio_to_baseline\": %.3f}\n",
                   sz, (long long)B, p, bench_nthreads, kind ? "optimizer step" : "training step",
                   method[m], med[m], mn[m], method[0], med[m] / med[0]);
    }
    fflush(stdout);
    cft_dist_finalize();
    return 0;
}
