/* dp_sgd_digits.c: differentially private training (DP-SGD, Abadi et al.
 * 2016) of an nn-layer model on the sklearn digits data set, with the
 * privacy spent counted by an RDP accountant.
 *
 * The model is a cft_module: an MLP (Linear 64->128, ReLU, Linear 128->10)
 * or a small CNN (Conv2d 1->8 3x3 pad 1, ReLU, MaxPool2d 2, Flatten,
 * Linear 128->10), picked by --model. Its loss for ONE example is a tree
 * function (cft_tree_fn_new: functional_call over the parameter tree), and
 * cft_vmap(cft_value_and_grad(loss)) gives every example's loss and
 * gradient in one call. Each training step then
 *
 *   1. clips every example's gradient to L2 norm C (over all parameters),
 *   2. sums them and adds Gaussian noise N(0, (sigma C)^2) per coordinate,
 *   3. divides by the batch size and takes an optimizer step (nn's Adam),
 *
 * all inside one cft_fn compiled with cft_jit (traced once, then replayed
 * with fused kernels on every batch).
 *
 * Privacy: each batch is drawn by Poisson sampling (cft_dp_poisson_sample:
 * every training example independently with probability q = B/N, so batch
 * sizes vary around B and the noisy sum is divided by B), and the run is
 * counted by the library's Renyi-DP accountant for the sampled Gaussian
 * mechanism (cft_dp_epsilon: Mironov, Talwar and Zhang 2019, converted to
 * (epsilon, delta) by Balle et al. 2020 as Google's dp_accounting and Opacus
 * do), so the printed budget is a guarantee for the batches used. With
 * --shuffle the training set is shuffled every epoch and cut into fixed
 * batches of B, as most DP-SGD code does; the same number is then the
 * customary approximation, not a proof, and the program says so. The
 * printed training loss is a diagnostic and is not itself private. With
 * --bf16 the loss runs under cft_autocast(loss, CFT_BF16): its products on
 * bf16 operands, the gradients f32 (bench/lowbits compares accuracies).
 *
 *   build/examples/dp_sgd_digits [--model mlp|cnn] [--quick] [--epochs N]
 *                                [--batch B] [--sigma S] [--clip C] [--lr LR] [--seed K]
 *                                [--shuffle] [--bf16] [--log FILE.csv]
 *
 * Defaults: B = 128, sigma = 2, C = 1, Adam with lr 0.02 annealed by a
 * cosine schedule, 60 epochs: epsilon = 6.2 at delta = 1e-5; test accuracy
 * 0.93 to 0.95 for either model over --seed 0..5, checked to be at least
 * 0.90. --quick (ctest) trains 10 epochs (epsilon 2.4) and checks at least
 * 0.80 (0.86 to 0.93 seen). Before training, the program checks the
 * per-sample gradients against a loop of single-example gradients.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include "csv_log.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mlp.h" /* the digits loader (digits_load, digits_shuffle) */

#define MAX_LEAVES 32
static const double DELTA = 1e-5;

typedef struct {
    bool cnn;
    cft_module *model;
    cft_tree *params_like, *state_like; /* names and order of the leaves */
    cft_fn *psg;                        /* vmap(value_and_grad(example loss)) */
    cft_optim opt;
    double clip, sigma;
    double expected_batch; /* the noisy sum's divisor: B (q N under Poisson sampling) */
} dp_env;

/* ---------------------------------------------------------------------
 * The model and the DP step
 * --------------------------------------------------------------------- */

/* the model, and its layers described one per line into desc[n] */
static cft_module *make_model(bool cnn, char *desc, size_t n) {
    cft_module *layers[5];
    int k;
    if (!cnn) {
        k = 3;
        layers[0] = cft_nn_linear(64, 128, true);
        layers[1] = cft_nn_activation(CFT_ACT_RELU);
        layers[2] = cft_nn_linear(128, 10, true);
    } else {
        k = 5;
        layers[0] = cft_nn_conv2d(1, 8, (int64_t[]){3, 3}, NULL, (int64_t[]){1, 1}, NULL, 1, true);
        layers[1] = cft_nn_activation(CFT_ACT_RELU);
        layers[2] = cft_nn_max_pool2d((int64_t[]){2, 2}, NULL, NULL, NULL); /* 8x8 -> 4x4 */
        layers[3] = cft_nn_flatten(1, -1);                                  /* [N, 8*4*4] */
        layers[4] = cft_nn_linear(8 * 4 * 4, 10, true);
    }
    size_t len = 0;
    desc[0] = 0;
    for (int i = 0; i < k && len < n; i++)
        len +=
            (size_t)snprintf(desc + len, n - len, "  %d: %s\n", i, cft_module_describe(layers[i]));
    return cft_nn_sequential(layers, k);
}

/* n rows of 64 pixels in [0, 1] -> the model's input, scaled to [-1, 1]
 * (a fixed map, so it costs no privacy; centred inputs train the CNN much
 * better): [n, 64] or [n, 1, 8, 8] */
static cft_array *as_input(const dp_env *e, cft_array *x, int64_t n) {
    x = cft_add_s(cft_mul_s(x, 2.0), -1.0);
    return e->cnn ? cft_reshape(x, (int64_t[]){n, 1, 8, 8}, 4)
                  : cft_reshape(x, (int64_t[]){n, 64}, 2);
}

/* (params..., x [64], y []) -> the cross-entropy of this one example (the
 * model sees a batch of one, so Flatten keeps its batch dim) */
static cft_status example_loss(void *env, const cft_tree *p, int nin, cft_array *const *in,
                               int nout, cft_array **out) {
    (void)nin, (void)nout;
    dp_env *e = env;
    cft_array *logits =
        cft_module_apply(e->model, p, NULL, as_input(e, in[0], 1), false, NULL, NULL);
    out[0] =
        cft_loss_cross_entropy(logits, cft_reshape(in[1], (int64_t[]){1}, 1), 0, CFT_REDUCE_MEAN);
    return CFT_OK;
}

/* (params..., optimizer state..., x [B, 64], y [B], key, step, lr)
 *   -> (new params..., new optimizer state..., mean loss of the batch) */
static cft_status dp_step(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    dp_env *e = env;
    int np = cft_tree_size(e->params_like), ns = cft_tree_size(e->state_like);
    cft_array *x = in[np + ns], *y = in[np + ns + 1], *key = in[np + ns + 2],
              *step = in[np + ns + 3], *lr = in[np + ns + 4];
    cft_array *psg_in[MAX_LEAVES + 2], *r[1 + MAX_LEAVES], *grads[MAX_LEAVES];
    memcpy(psg_in, in, sizeof(cft_array *) * (size_t)np);
    psg_in[np] = x, psg_in[np + 1] = y;
    cft_status st = cft_fn_call(e->psg, psg_in, r); /* r[0]: losses [B]; r[1 + l]: [B, ...] */
    if (st != CFT_OK)
        return st;
    int64_t B = cft_array_dim(x, 0);

    /* each example's gradient norm over all parameters, and its clip factor */
    cft_array *sq = NULL;
    for (int l = 0; l < np; l++) {
        int nd = cft_array_ndim(r[1 + l]), axes[CFT_MAX_NDIM];
        for (int i = 1; i < nd; i++)
            axes[i - 1] = i;
        cft_array *s = cft_sum(cft_square(r[1 + l]), axes, nd - 1, false);
        sq = sq ? cft_add(sq, s) : s;
    }
    cft_array *scale = cft_minimum(cft_scalar(1, CFT_F32), cft_div(cft_scalar(e->clip, CFT_F32),
                                                                   cft_add_s(cft_sqrt(sq), 1e-6)));

    /* clipped sum + noise, averaged */
    cft_array *keys = cft_random_split(key, np);
    for (int l = 0; l < np; l++) {
        cft_array *g = r[1 + l];
        int nd = cft_array_ndim(g);
        int64_t bshape[CFT_MAX_NDIM];
        bshape[0] = B;
        for (int i = 1; i < nd; i++)
            bshape[i] = 1;
        cft_array *sum = cft_sum(cft_mul(g, cft_reshape(scale, bshape, nd)), (int[]){0}, 1, false);
        cft_array *noise = cft_random_normal(cft_index(keys, l), CFT_F32, cft_array_shape(in[l]),
                                             cft_array_ndim(in[l]));
        grads[l] =
            cft_mul_s(cft_add(sum, cft_mul_s(noise, e->sigma * e->clip)), 1.0 / e->expected_batch);
    }

    /* the optimizer step over the trees */
    cft_tree *p = cft_tree_unflatten(e->params_like, in),
             *s = cft_tree_unflatten(e->state_like, in + np);
    cft_tree *new_p, *new_s;
    st = cft_optim_update(&e->opt, cft_tree_unflatten(e->params_like, grads), s, p, step, lr,
                          &new_p, &new_s);
    if (st != CFT_OK)
        return st;
    cft_tree_flatten(new_p, out);
    cft_tree_flatten(new_s, out + np);
    out[np + ns] = cft_mean(r[0], NULL, 0, false);
    return CFT_OK;
}

static bool use_bf16; /* --bf16: the loss under cft_autocast */

/* per-sample gradients against a loop of single-example gradients */
static int check_per_sample(dp_env *e, cft_tree *params, const digits *d) {
    int np = cft_tree_size(params);
    const int n = 8;
    int argnums[MAX_LEAVES];
    for (int i = 0; i < np; i++)
        argnums[i] = i;
    cft_fn *one = cft_tree_fn_new(example_loss, e, params, 2, 1);
    cft_fn *grad = cft_grad(use_bf16 ? cft_autocast(one, CFT_BF16) : one, argnums, np);
    cft_array *in[MAX_LEAVES + 2], *r[1 + MAX_LEAVES], *gi[MAX_LEAVES];
    cft_tree_flatten(params, in);
    in[np] = cft_from_f32(d->x, (int64_t[]){n, 64}, 2);
    in[np + 1] = cft_from_i32(d->y, (int64_t[]){n}, 1);
    if (cft_fn_call(e->psg, in, r) != CFT_OK) {
        fprintf(stderr, "per-sample gradients failed: %s\n", cft_last_error_message());
        return -1;
    }
    double worst = 0;
    for (int i = 0; i < n; i++) {
        in[np] = cft_from_f32(d->x + i * 64, (int64_t[]){64}, 1);
        in[np + 1] = cft_from_i32(d->y + i, NULL, 0);
        if (cft_fn_call(grad, in, gi) != CFT_OK)
            return -1;
        for (int l = 0; l < np; l++) {
            double scale = fmax(cft_item(cft_max(cft_abs(gi[l]), NULL, 0, false)), 1e-3);
            double diff = cft_max_abs_diff(cft_index(r[1 + l], i), gi[l]) / scale;
            if (!(diff <= worst))
                worst = diff;
        }
    }
    /* f32, the same work in other orders: a few 1e-7 is rounding */
    printf("per-sample gradients vs a loop of %d single-example gradients: max rel diff %.1e %s\n",
           n, worst, worst < 1e-5 ? "(ok)" : "(MISMATCH)");
    return worst < 1e-5 ? 0 : -1;
}

static double accuracy(const dp_env *e, cft_tree *params, const digits *d, int from, int to) {
    int64_t n = to - from;
    cft_array *x = as_input(e, cft_from_f32(d->x + (size_t)from * 64, (int64_t[]){n, 64}, 2), n);
    cft_array *pred =
        cft_argmax(cft_module_apply(e->model, params, NULL, x, false, NULL, NULL), -1, false);
    int32_t *pv = malloc(sizeof(int32_t) * (size_t)n);
    if (!pv || cft_copy_to(pred, CFT_I32, pv) != CFT_OK) {
        fprintf(stderr, "evaluation failed: %s\n", cft_failed(pred) ? cft_error_message(pred) : "");
        free(pv);
        return -1;
    }
    int ok = 0;
    for (int64_t i = 0; i < n; i++)
        ok += pv[i] == d->y[from + i];
    free(pv);
    return (double)ok / (double)n;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    bool cnn = false, quick = false, custom = false, shuffle = false;
    bool bf16 = false;
    int epochs = -1, batch = 128, seed = 0;
    double sigma = 2.0, clip = 1.0, lr = 0.02;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            const char *m = argv[++i];
            if (strcmp(m, "mlp") && strcmp(m, "cnn")) {
                fprintf(stderr, "--model must be mlp or cnn\n");
                return 2;
            }
            cnn = !strcmp(m, "cnn");
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
            epochs = atoi(argv[++i]), custom = true;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]), custom = true;
        else if (!strcmp(argv[i], "--sigma") && i + 1 < argc)
            sigma = atof(argv[++i]), custom = true;
        else if (!strcmp(argv[i], "--clip") && i + 1 < argc)
            clip = atof(argv[++i]), custom = true;
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc)
            lr = atof(argv[++i]), custom = true;
        else if (!strcmp(argv[i], "--shuffle"))
            shuffle = true;
        else if (!strcmp(argv[i], "--bf16"))
            bf16 = use_bf16 = true;
        else if (!strcmp(argv[i], "--log") && i + 1 < argc)
            i++; /* csv_log_arg */
        else {
            fprintf(stderr,
                    "usage: %s [--model mlp|cnn] [--quick] [--epochs N] [--batch B] "
                    "[--sigma S] [--clip C] [--lr LR] [--seed K] [--shuffle] [--bf16] "
                    "[--log FILE.csv]\n",
                    argv[0]);
            return 2;
        }
    }
    if (epochs < 0)
        epochs = quick ? 10 : 60;
    if (epochs < 1 || batch < 1 || batch > 1000 || !(sigma >= 0) || !(clip > 0) || !(lr > 0)) {
        fprintf(stderr, "--epochs, --clip and --lr must be positive, --batch in 1..1000, --sigma "
                        "non-negative\n");
        return 2;
    }
    cft_init();
    cft_set_num_threads(1); /* small matrices: one thread is fastest */

    digits d;
    if (digits_load(&d))
        return 1;
    digits_shuffle(&d, 7);
    int ntest = d.n / 5, ntrain = d.n - ntest, steps_per_epoch = ntrain / batch;
    digits train = {ntrain, d.x, d.y};
    if (steps_per_epoch < 1) {
        fprintf(stderr, "--batch %d is larger than the %d training examples\n", batch, ntrain);
        return 2;
    }

    char desc[1024];
    dp_env e = {.cnn = cnn,
                .model = make_model(cnn, desc, sizeof desc),
                .opt = cft_adam(lr),
                .clip = clip,
                .sigma = sigma,
                .expected_batch = batch};
    cft_tree *params = cft_module_init(e.model, cft_random_key(42 + (uint64_t)seed), NULL);
    cft_tree *state = cft_optim_init(&e.opt, params);
    if (cft_tree_failed(params) || cft_tree_failed(state)) {
        fprintf(stderr, "init failed: %s\n",
                cft_error_message(cft_tree_error(cft_tree_failed(params) ? params : state)));
        return 1;
    }
    int np = cft_tree_size(params), ns = cft_tree_size(state);
    if (np > MAX_LEAVES || ns > 2 * MAX_LEAVES)
        return 1;
    e.params_like = params, e.state_like = state;

    /* per-sample losses and gradients: vmap over (x, y), not over the params */
    int argnums[MAX_LEAVES], in_axes[MAX_LEAVES + 2];
    for (int i = 0; i < np; i++)
        argnums[i] = i, in_axes[i] = CFT_NOT_BATCHED;
    in_axes[np] = in_axes[np + 1] = 0;
    cft_fn *loss = cft_tree_fn_new(example_loss, &e, params, 2, 1);
    if (bf16)
        loss = cft_autocast(loss, CFT_BF16);
    e.psg = cft_vmap(cft_value_and_grad(loss, argnums, np, false), in_axes, NULL);

    int64_t nparams = 0;
    for (int i = 0; i < np; i++)
        nparams += cft_array_size(cft_tree_at(params, i));
    printf("digits: %d train, %d test examples; the %s:\n%s  %lld parameters:\n", ntrain, ntest,
           cnn ? "CNN" : "MLP", desc, (long long)nparams);
    for (int i = 0; i < np; i++) {
        char buf[96];
        cft_aval av = cft_array_aval(cft_tree_at(params, i));
        printf("    %-10s %s\n", cft_tree_name(params, i), cft_aval_str(&av, buf));
    }
    if (check_per_sample(&e, params, &train))
        return 1;

    double q = (double)batch / ntrain;
    long total_steps = (long)epochs * steps_per_epoch;
    double eps, order;
    if (cft_dp_epsilon(q, sigma, total_steps, DELTA, &eps, &order) != CFT_OK) {
        fprintf(stderr, "accountant: %s\n", cft_last_error_message());
        return 2;
    }
    const char *holds = shuffle ? "the customary approximation for shuffled fixed batches, not a "
                                  "guarantee"
                                : "a guarantee for the Poisson-sampled batches used";
    printf("DP-SGD: noise multiplier sigma = %.2f, clip norm C = %.2f, %s B = %d, sampling rate "
           "q = B/N = %d/%d = %.4f,\n        %d epochs x %d steps = %ld steps, Adam lr %g\n",
           sigma, clip, shuffle ? "shuffled fixed batches of" : "Poisson-sampled batches of mean",
           batch, batch, ntrain, q, epochs, steps_per_epoch, total_steps, lr);
    printf("privacy budget of the run: (epsilon = %.2f, delta = %g) (RDP accountant, order %g): "
           "%s\n",
           eps, DELTA, order, holds);

    csv_log log;
    if (csv_log_open(&log, csv_log_arg(argc, argv), "epoch,train_loss,test_accuracy,epsilon"))
        return 2;
    cft_fn *step = cft_jit(cft_fn_new(dp_step, &e, np + ns + 5, np + ns + 1));
    cft_array *key = cft_random_key(2024 + (uint64_t)seed),
              *sample_key = cft_random_key(4048 + (uint64_t)seed);
    cft_array *xs = cft_from_f32(train.x, (int64_t[]){ntrain, 64}, 2),
              *ys = cft_from_i32(train.y, (int64_t[]){ntrain}, 1);
    cft_array *in[3 * MAX_LEAVES + 5], *out[3 * MAX_LEAVES + 1];
    /* cosine annealing of the lr over the epochs (nn's CosineAnnealingLR) */
    cft_lr_schedule *sched = cft_lr_cosine(epochs, 0);
    long steps = 0;
    double acc = 0;
    for (int ep = 0; ep < epochs; ep++) {
        double t0 = now_s(), loss_sum = 0;
        int64_t seen = 0;
        if (shuffle) /* batches by shuffling; see the top */
            digits_shuffle(&train, 100 + (uint64_t)ep);
        cft_array *lr_now = cft_scalar(cft_lr_at(sched, lr, ep), CFT_F32);
        for (int s = 0; s < steps_per_epoch; s++, steps++) {
            cft_tree_flatten(params, in);
            cft_tree_flatten(state, in + np);
            if (shuffle) {
                in[np + ns] =
                    cft_from_f32(train.x + (size_t)s * batch * 64, (int64_t[]){batch, 64}, 2);
                in[np + ns + 1] = cft_from_i32(train.y + (size_t)s * batch, (int64_t[]){batch}, 1);
            } else { /* each example with probability q: batches of varying size */
                cft_array *idx =
                    cft_dp_poisson_sample(cft_random_fold_in(sample_key, steps), ntrain, q);
                in[np + ns] = cft_take(xs, idx, 0);
                in[np + ns + 1] = cft_take(ys, idx, 0);
            }
            in[np + ns + 2] = cft_random_fold_in(key, (int64_t)steps);
            in[np + ns + 3] = cft_scalar((double)(steps + 1), CFT_F32);
            in[np + ns + 4] = lr_now;
            if (cft_fn_call(step, in, out) != CFT_OK) {
                fprintf(stderr, "step failed: %s\n", cft_last_error_message());
                return 1;
            }
            params = cft_tree_unflatten(e.params_like, out);
            state = cft_tree_unflatten(e.state_like, out + np);
            int64_t b = cft_array_dim(in[np + ns], 0);
            if (b > 0)
                loss_sum += cft_item(out[np + ns]) * (double)b, seen += b;
        }
        acc = accuracy(&e, params, &d, ntrain, d.n);
        double eps_now = 0;
        cft_dp_epsilon(q, sigma, steps, DELTA, &eps_now, NULL);
        csv_log_row(&log, "%d,%.6f,%.6f,%.6f", ep + 1, loss_sum / (double)(seen ? seen : 1), acc,
                    eps_now);
        printf("epoch %2d  train loss %.4f  test accuracy %.3f  epsilon %.2f  (%.2f s)\n", ep + 1,
               loss_sum / (double)(seen ? seen : 1), acc, eps_now, now_s() - t0);
    }
    /* floors for the stated settings: --quick (10 epochs) 0.80, the
     * defaults (60 epochs) 0.90; other settings are not checked */
    double floor = quick && !custom ? 0.8 : !custom ? 0.9 : 0;
    printf("final: test accuracy %.3f, (epsilon = %.2f, delta = %g)-DP: %s\n", acc, eps, DELTA,
           holds);
    if (csv_log_close(&log))
        return 1;
    if (!(acc >= floor)) {
        fprintf(stderr, "test accuracy %.3f is below the expected floor %.2f\n", acc, floor);
        return 1;
    }
    return 0;
}
