/* bench/optim_step.c: an optimizer step over a model's parameters, eager
 * (cft_optim_update: a dozen operations per parameter, one at a time)
 * against the jitted step (cft_optim_step: one call of fused kernels), with
 * and without donation, in the same process, timed in alternating rounds.
 * The model: an MLP whose layer sizes are given (default 784-512-512-10,
 * 670K f32 parameters), Adam and SGD with momentum. bench/peers/optim_torch.py
 * times torch's optimizers on the same shapes; bench/optim_vs_torch.sh runs
 * both alternately and prints the ratio.
 *
 *     build/bench/optim_step [--threads N] [--sizes 784,512,512,10] [--rounds R]
 *
 * One JSON line per optimizer and method: median ms per step over the
 * rounds, ratio_to_baseline = method / eager (medians). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cft/cft.h"

typedef struct {
    const cft_optim *o;
    cft_optim_step *st;
    cft_tree *p, *s, *g;
    bool donated;
    int t;
} run_t;

static void eager(void *arg) {
    run_t *r = arg;
    cft_tree *np, *ns;
    cft_optim_update(r->o, r->g, r->s, r->p, cft_scalar(++r->t, CFT_F32), NULL, &np, &ns);
    r->p = np, r->s = ns;
    (void)cft_item_at(cft_tree_at(np, 0), 0); /* the values exist (device arrays: waits) */
}

static void jitted(void *arg) {
    run_t *r = arg;
    cft_tree *np, *ns;
    cft_optim_step_apply(r->st, r->g, r->s, r->p, cft_scalar(++r->t, CFT_F32), NULL, &np, &ns);
    r->p = np, r->s = ns; /* donated: the old trees are spent, the new ones carry on */
    (void)cft_item_at(cft_tree_at(np, 0), 0);
}

static cft_tree *mlp_params(const int64_t *sizes, int nl) {
    const char *names[32];
    cft_array *xs[32];
    int n = 0;
    cft_array *k = cft_random_key(0);
    for (int l = 0; l + 1 < nl; l++) {
        char *w = malloc(32), *b = malloc(32);
        snprintf(w, 32, "layers.%d.weight", l);
        snprintf(b, 32, "layers.%d.bias", l);
        names[n] = w;
        xs[n++] = cft_mul_s(cft_random_normal(cft_random_fold_in(k, 2 * l), CFT_F32,
                                              (int64_t[]){sizes[l + 1], sizes[l]}, 2),
                            0.05);
        names[n] = b;
        xs[n++] = cft_zeros(CFT_F32, (int64_t[]){sizes[l + 1]}, 1);
    }
    return cft_tree_from(names, xs, n);
}

static cft_tree *like(const cft_tree *p, double scale) {
    const char *names[32];
    cft_array *xs[32];
    for (int i = 0; i < cft_tree_size(p); i++) {
        names[i] = cft_tree_name(p, i);
        cft_aval a = cft_array_aval(cft_tree_at(p, i));
        xs[i] =
            cft_mul_s(cft_random_normal(cft_random_key(100 + i), a.dtype, a.shape, a.ndim), scale);
    }
    return cft_tree_from(names, xs, cft_tree_size(p));
}

int main(int argc, char **argv) {
    bench_threads(argc, argv);
    int64_t sizes[16] = {784, 512, 512, 10};
    int nl = 4, rounds = 30;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--sizes")) {
            nl = 0;
            for (char *s = argv[i + 1]; *s && nl < 16; s += strspn(s, ","))
                sizes[nl++] = strtoll(s, &s, 10);
        }
        if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 30;
    }
    char sz[128] = "";
    for (int l = 0; l < nl; l++)
        snprintf(sz + strlen(sz), sizeof sz - strlen(sz), "%s%lld", l ? "-" : "",
                 (long long)sizes[l]);
    int64_t nparam = 0;
    for (int l = 0; l + 1 < nl; l++)
        nparam += sizes[l] * sizes[l + 1] + sizes[l + 1];

    cft_optim opts[2] = {cft_adam(1e-3), cft_sgd(1e-2, 0.9, 0, false)};
    const char *onames[2] = {"adam", "sgd_momentum"};
    for (int k = 0; k < 2; k++) {
        const cft_optim *o = &opts[k];
        cft_tree *p = mlp_params(sizes, nl), *g = like(p, 1e-3);
        run_t r[3];
        for (int m = 0; m < 3; m++) {
            r[m] = (run_t){o, NULL, like(p, 1.0), cft_optim_init(o, p), g, m == 2, 0};
            if (m > 0)
                r[m].st = cft_optim_step_new(
                    o, r[m].p, m == 2 ? CFT_OPTIM_DONATE_PARAMS | CFT_OPTIM_DONATE_STATE : 0);
        }
        work_fn f[3] = {eager, jitted, jitted};
        const char *method[3] = {"eager_optim_update", "jitted_optim_step",
                                 "jitted_optim_step_donated"};
        enum { CALLS = 10 };
        double *t[3];
        for (int m = 0; m < 3; m++) {
            t[m] = calloc((size_t)rounds, sizeof(double));
            for (int w = 0; w < 5; w++) /* compile, warm the caches */
                f[m](&r[m]);
        }
        for (int q = 0; q < rounds; q++)
            for (int m = 0; m < 3; m++) {
                double t0 = now_ms();
                for (int c = 0; c < CALLS; c++)
                    f[m](&r[m]);
                t[m][q] = (now_ms() - t0) / CALLS;
            }
        double med[3], mn[3];
        for (int m = 0; m < 3; m++)
            bench_stats(t[m], rounds, &med[m], &mn[m]);
        for (int m = 0; m < 3; m++)
            printf("{\"bench\": \"optim_step\", \"config\": {\"model\": \"mlp %s\", \"params\": "
                   "%lld, \"optimizer\": \"%s\", \"threads\": %d, \"rounds\": %d}, \"method\": "
                   "\"%s\", \"ms\": %.4f, \"min_ms\": %.4f, \"baseline\": \"%s\", "
                   "\"ratio_to_baseline\": %.3f}\n",
                   sz, (long long)nparam, onames[k], bench_nthreads, rounds, method[m], med[m],
                   mn[m], method[0], med[m] / med[0]);
        fflush(stdout);
    }
    return 0;
}
