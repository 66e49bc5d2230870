/* pipeline_digits.c: a 4-layer MLP on digits trained with pipeline
 * parallelism (1F1B, 4 micro-batches), one stage per rank, each stage
 * holding its share of the layers; the layers and their Adam state go to a
 * sharded checkpoint, from which training resumes at another rank count
 * (the stages then hold other layers: each loads its own by name).
 *
 *     mpirun -np 4 build/examples/pipeline_digits --epochs 3 --save ckpt
 *     mpirun -np 2 build/examples/pipeline_digits --epochs 3 --resume ckpt --save ckpt
 *
 * Rank 0 prints the loss per epoch (from the last stage) and, after a
 * save, the test accuracy of the saved model (read back from the
 * checkpoint); the program fails below 85% when it ends. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/checkpoint.h"
#include "cft/dist.h"
#include "cft/pipeline.h"
#include "mlp.h"

enum { L = 4 };
static const int64_t widths[L + 1] = {64, 96, 96, 96, 10};
static int first, count, S, me;

static void layer_names(int l, char *w, char *b) {
    sprintf(w, "layer%d.w", l), sprintf(b, "layer%d.b", l);
}

/* layers [first, first + count) of params; the last stage adds the loss */
static cft_array *apply_layers(const cft_tree *p, int from, int n, cft_array *h) {
    for (int l = from; l < from + n; l++) {
        char wn[32], bn[32];
        layer_names(l, wn, bn);
        h = cft_add(cft_matmul(h, cft_tree_get(p, wn)), cft_tree_get(p, bn));
        if (l < L - 1)
            h = cft_tanh(h);
    }
    return h;
}
static cft_status stage_fn(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                           cft_array **out) {
    (void)env, (void)nout;
    cft_array *h = apply_layers(p, first, count, in[0]);
    out[0] = nin == 2 ? cft_mean(cft_cross_entropy(h, in[1]), NULL, 0, false) : h;
    return CFT_OK;
}

static cft_tree *init_layers(void) {
    cft_tree *t = cft_tree_new();
    for (int l = first; l < first + count; l++) {
        char wn[32], bn[32];
        layer_names(l, wn, bn);
        double bound = 1 / sqrt((double)widths[l]);
        cft_array *k = cft_random_split(cft_random_key(100 + (uint64_t)l), 2);
        t = cft_tree_set(t, wn,
                         cft_random_uniform(cft_index(k, 0), CFT_F32,
                                            (int64_t[]){widths[l], widths[l + 1]}, 2, -bound,
                                            bound));
        t = cft_tree_set(
            t, bn, cft_random_uniform(cft_index(k, 1), CFT_F32, &widths[l + 1], 1, -bound, bound));
    }
    return t;
}

/* the pieces of a checkpoint this stage needs: its layers and their state */
static cft_tree *load_stage(const char *dir, const cft_tree *params, const cft_tree *state,
                            cft_array **step) {
    int n = cft_tree_size(params), k = cft_tree_size(state);
    cft_checkpoint_piece *want = calloc((size_t)(n + k + 1), sizeof *want);
    for (int i = 0; i < n; i++)
        want[i] = (cft_checkpoint_piece){cft_tree_name(params, i), 0, -1};
    for (int i = 0; i < k; i++)
        want[n + i] = (cft_checkpoint_piece){cft_tree_name(state, i), 0, -1};
    want[n + k] = (cft_checkpoint_piece){"step", 0, -1};
    cft_tree *t = cft_checkpoint_load(dir, want, n + k + 1);
    free(want);
    if (!cft_tree_failed(t))
        *step = cft_tree_get(t, "step");
    return t;
}

int main(int argc, char **argv) {
    int epochs = 3;
    const char *save = NULL, *resume = NULL;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--epochs"))
            epochs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--save"))
            save = argv[i + 1];
        else if (!strcmp(argv[i], "--resume"))
            resume = argv[i + 1];
    }
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK)
        return 1;
    cft_dist_group *w = cft_dist_world();
    me = cft_dist_rank(w), S = cft_dist_size(w);
    if (L % S) {
        if (me == 0)
            fprintf(stderr, "run with 1, 2 or 4 ranks (%d layers)\n", L);
        return 1;
    }
    first = me * (L / S), count = L / S;
    digits d;
    if (digits_load(&d) != 0)
        return 1;
    digits_shuffle(&d, 3);
    int ntrain = d.n * 4 / 5, B = 64;
    bool last = me == S - 1;
    cft_tree *params = init_layers();
    cft_optim adam = cft_adam(3e-3);
    cft_tree *state = cft_optim_init(&adam, params);
    int step = 0;
    if (resume) { /* this stage's layers, whatever stages wrote them */
        cft_array *st = NULL;
        cft_tree *t = load_stage(resume, params, state, &st);
        if (cft_tree_failed(t)) {
            fprintf(stderr, "rank %d: %s\n", me, cft_error_message(cft_tree_error(t)));
            return 1;
        }
        for (int i = 0; i < cft_tree_size(params); i++)
            params = cft_tree_set(params, cft_tree_name(params, i),
                                  cft_tree_get(t, cft_tree_name(params, i)));
        for (int i = 0; i < cft_tree_size(state); i++)
            state = cft_tree_set(state, cft_tree_name(state, i),
                                 cft_tree_get(t, cft_tree_name(state, i)));
        step = (int)cft_item(st);
        if (me == 0)
            printf("resumed from %s at step %d on %d stages\n", resume, step, S);
    }
    cft_fn *f = cft_tree_fn_new(stage_fn, NULL, params, last ? 2 : 1, 1);
    cft_pipeline_options o = {4, CFT_PIPE_1F1B, false};
    cft_pipeline *p = cft_pipeline_new(w, f, params, &o);
    for (int e = 0; e < epochs; e++) {
        double total = 0;
        int batches = 0;
        for (int i = 0; i + B <= ntrain; i += B, batches++) {
            cft_array *x = cft_from_f32(d.x + (size_t)i * 64, (int64_t[]){B, 64}, 2);
            cft_array *y = cft_from_i32(d.y + i, (int64_t[]){B}, 1);
            cft_array *loss;
            cft_tree *g;
            if (cft_pipeline_step(p, params, me == 0 ? x : NULL, last ? y : NULL, &loss, &g) !=
                CFT_OK) {
                fprintf(stderr, "rank %d: %s\n", me, cft_last_error_message());
                return 1;
            }
            cft_optim_update(&adam, g, state, params, cft_scalar(++step, CFT_F32), NULL, &params,
                             &state);
            if (last)
                total += cft_item(loss);
        }
        cft_array *mean = cft_dist_broadcast(w, cft_scalar(total / batches, CFT_F64), S - 1);
        if (me == 0)
            printf("epoch %d  loss %.4f\n", e + 1, cft_item(mean));
    }
    int status = 0;
    if (save) {
        cft_tree *t = cft_tree_merge(cft_tree_merge(cft_tree_new(), NULL, params), NULL, state);
        t = cft_tree_set(t, "step", cft_scalar(step, CFT_I64));
        if (cft_checkpoint_save(w, save, t, NULL, 0) != CFT_OK) {
            fprintf(stderr, "rank %d: %s\n", me, cft_last_error_message());
            return 1;
        }
        if (me == 0) { /* the whole model, read back from the checkpoint */
            cft_tree *all = cft_checkpoint_load(save, NULL, 0);
            cft_array *x =
                cft_from_f32(d.x + (size_t)ntrain * 64, (int64_t[]){d.n - ntrain, 64}, 2);
            double acc = mlp_accuracy(apply_layers(all, 0, L, x),
                                      cft_from_i32(d.y + ntrain, (int64_t[]){d.n - ntrain}, 1));
            printf("saved %s (%d stages); test accuracy %.3f\n", save, S, acc);
            status = acc < 0.85;
        }
    }
    cft_dist_finalize();
    return status;
}
