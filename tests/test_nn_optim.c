/* test_nn_optim.c: optimizers over trees against PyTorch's published update
 * equations (torch.optim docs' algorithm boxes), re-implemented here per
 * element in plain C: SGD (momentum with dampening and the first-step copy,
 * Nesterov, weight decay), Adam (L2 decay, amsgrad), AdamW (decoupled
 * decay), RMSprop (plain, centered with momentum, weight decay); five steps
 * each in f64. Also: hand-computed first steps, state names, an lr override,
 * an update traced once inside a cft_fn and replayed, a short training run,
 * gradient clipping by global norm, and errors. */
#include <math.h>
#include <string.h>

#include "check.h"

#define N 4
#define STEPS 5

/* the reference: one parameter vector of N elements */
typedef struct {
    double p[N], b0[N], b1[N], b2[N];
} ref_state;

static void ref_step(const cft_optim *o, ref_state *s, const double *g_in, int t, double lr) {
    for (int i = 0; i < N; i++) {
        double g = g_in[i], p = s->p[i];
        switch (o->kind) {
        case CFT_OPTIM_SGD:
            if (o->weight_decay)
                g += o->weight_decay * p;
            if (o->momentum) {
                s->b0[i] = t == 1 ? g : o->momentum * s->b0[i] + (1 - o->dampening) * g;
                g = o->nesterov ? g + o->momentum * s->b0[i] : s->b0[i];
            }
            s->p[i] = p - lr * g;
            break;
        case CFT_OPTIM_ADAM:
        case CFT_OPTIM_ADAMW: {
            if (o->kind == CFT_OPTIM_ADAMW)
                p *= 1 - lr * o->weight_decay;
            else if (o->weight_decay)
                g += o->weight_decay * p;
            s->b0[i] = o->beta1 * s->b0[i] + (1 - o->beta1) * g;
            s->b1[i] = o->beta2 * s->b1[i] + (1 - o->beta2) * g * g;
            double bc1 = 1 - pow(o->beta1, t), bc2 = 1 - pow(o->beta2, t), v = s->b1[i];
            if (o->amsgrad)
                v = s->b2[i] = fmax(s->b2[i], s->b1[i]);
            s->p[i] = p - lr / bc1 * s->b0[i] / (sqrt(v) / sqrt(bc2) + o->eps);
            break;
        }
        case CFT_OPTIM_RMSPROP: {
            if (o->weight_decay)
                g += o->weight_decay * p;
            s->b0[i] = o->alpha * s->b0[i] + (1 - o->alpha) * g * g;
            double avg;
            if (o->centered) {
                s->b2[i] = o->alpha * s->b2[i] + (1 - o->alpha) * g;
                avg = sqrt(s->b0[i] - s->b2[i] * s->b2[i]) + o->eps;
            } else {
                avg = sqrt(s->b0[i]) + o->eps;
            }
            if (o->momentum > 0) {
                s->b1[i] = o->momentum * s->b1[i] + g / avg;
                s->p[i] = p - lr * s->b1[i];
            } else {
                s->p[i] = p - lr * g / avg;
            }
            break;
        }
        }
    }
}

static cft_array *vec(const double *v) {
    return cft_from_f64(v, (int64_t[]){N}, 1);
}

/* five steps of o on {"w": p0} with gradients depending on the step, against the reference */
static void run_against_reference(const cft_optim *o, const char *label) {
    const double p0[N] = {1, -2, 0.5, 3};
    ref_state r = {{1, -2, 0.5, 3}, {0}, {0}, {0}};
    cft_tree *p = cft_tree_set(cft_tree_new(), "w", vec(p0));
    cft_tree *s = cft_optim_init(o, p);
    TEST("%s: five steps match the published equations", label) {
        for (int t = 1; t <= STEPS; t++) {
            double g[N];
            for (int i = 0; i < N; i++)
                g[i] = sin(1.3 * t + i) * (i + 1) + 0.1 * r.p[i];
            double lr = o->lr * (t == 4 ? 0.5 : 1); /* step 4 with an lr override */
            ref_step(o, &r, g, t, lr);
            cft_tree *gt = cft_tree_set(cft_tree_new(), "w", vec(g));
            cft_array *lra = t == 4 ? cft_scalar(lr, CFT_F64) : NULL;
            CHECK_EQ(cft_optim_update(o, gt, s, p, cft_scalar(t, CFT_F64), lra, &p, &s), CFT_OK);
            CHECK_ARRAY_CLOSE(cft_tree_get(p, "w"), vec(r.p), 1e-14, 1e-15);
        }
    }
}

typedef struct {
    cft_optim o;
    cft_tree *like;
} traced_env;

/* (w, g, state..., step, lr) -> (w', state'...) for a one-leaf tree */
static cft_status traced_update(void *env, int nin, cft_array *const *in, int nout,
                                cft_array **out) {
    (void)nin;
    traced_env *e = env;
    int ns = nout - 1;
    cft_tree *p = cft_tree_set(cft_tree_new(), "w", in[0]),
             *g = cft_tree_set(cft_tree_new(), "w", in[1]);
    cft_tree *s = cft_tree_unflatten(e->like, in + 2), *np, *nst;
    cft_status st = cft_optim_update(&e->o, g, s, p, in[2 + ns], in[3 + ns], &np, &nst);
    out[0] = cft_tree_get(np, "w");
    for (int j = 0; j < ns; j++)
        out[1 + j] = cft_tree_at(nst, j);
    return st;
}

typedef struct {
    cft_module *m;
} fit_env;
static cft_status fit_loss(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                           cft_array **out) {
    (void)nin, (void)nout;
    fit_env *e = env;
    out[0] = cft_loss_mse(cft_module_apply(e->m, p, NULL, in[0], false, NULL, NULL), in[1],
                          CFT_REDUCE_MEAN);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    cft_optim o;
    o = cft_sgd(0.1, 0, 0, false);
    run_against_reference(&o, "SGD");
    o = cft_sgd(0.1, 0.9, 0.01, false);
    o.dampening = 0.1;
    run_against_reference(&o, "SGD momentum, dampening, weight decay");
    o = cft_sgd(0.05, 0.8, 0.001, true);
    run_against_reference(&o, "SGD Nesterov");
    o = cft_adam(0.01);
    run_against_reference(&o, "Adam");
    o = cft_adam(0.02);
    o.weight_decay = 0.1, o.amsgrad = true, o.beta1 = 0.8, o.beta2 = 0.9;
    run_against_reference(&o, "Adam L2 + amsgrad");
    o = cft_adamw(0.01, 0.05);
    run_against_reference(&o, "AdamW");
    o = cft_adamw(0.01, 0.05);
    o.amsgrad = true;
    run_against_reference(&o, "AdamW amsgrad");
    o = cft_rmsprop(0.01);
    run_against_reference(&o, "RMSprop");
    o = cft_rmsprop(0.01);
    o.centered = true, o.momentum = 0.9, o.weight_decay = 0.01;
    run_against_reference(&o, "RMSprop centered + momentum + weight decay");

    TEST("hand-computed first steps") {
        cft_tree *p = cft_tree_set(cft_tree_new(), "w", cft_scalar(1, CFT_F64));
        cft_tree *g = cft_tree_set(cft_tree_new(), "w", cft_scalar(0.5, CFT_F64)), *np, *ns;
        cft_optim sgd = cft_sgd(0.1, 0.9, 0, false);
        cft_tree *s = cft_optim_init(&sgd, p);
        cft_optim_update(&sgd, g, s, p, cft_scalar(1, CFT_F64), NULL, &np, &ns);
        CHECK_CLOSE(cft_item(cft_tree_get(np, "w")), 0.95, 1e-15, 0);
        cft_optim_update(&sgd, g, ns, np, cft_scalar(2, CFT_F64), NULL, &np, &ns);
        CHECK_CLOSE(cft_item(cft_tree_get(np, "w")), 0.855, 1e-15, 0); /* buf 0.95 */
        cft_optim adam = cft_adam(0.1);
        cft_optim_update(&adam, g, cft_optim_init(&adam, p), p, cft_scalar(1, CFT_F64), NULL, &np,
                         &ns);
        CHECK_CLOSE(cft_item(cft_tree_get(np, "w")), 1 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15,
                    0); /* ~ lr * sign(g) */
        cft_optim adamw = cft_adamw(0.1, 0.01);
        cft_optim_update(&adamw, g, cft_optim_init(&adamw, p), p, cft_scalar(1, CFT_F64), NULL, &np,
                         &ns);
        CHECK_CLOSE(cft_item(cft_tree_get(np, "w")),
                    1 * (1 - 0.1 * 0.01) - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15, 0);
        cft_optim rms = cft_rmsprop(0.01);
        cft_optim_update(&rms, g, cft_optim_init(&rms, p), p, cft_scalar(1, CFT_F64), NULL, &np,
                         &ns);
        CHECK_CLOSE(cft_item(cft_tree_get(np, "w")), 1 - 0.01 * 0.5 / (sqrt(0.01 * 0.25) + 1e-8),
                    1e-15, 0);
    }

    TEST("state names mirror params; f32 params stay f32") {
        cft_module *mlp = cft_nn_mlp((int64_t[]){3, 4, 2}, 3, CFT_ACT_RELU, 0);
        cft_tree *p = cft_module_init(mlp, cft_random_key(1), NULL);
        cft_optim adam = cft_adam(1e-3);
        adam.amsgrad = true;
        cft_tree *s = cft_optim_init(&adam, p);
        CHECK_EQ(cft_tree_size(s), 3 * cft_tree_size(p));
        CHECK(!strcmp(cft_tree_name(s, 0), "exp_avg.0.weight"));
        CHECK(cft_tree_has(s, "exp_avg_sq.2.bias") && cft_tree_has(s, "max_exp_avg_sq.0.bias"));
        cft_tree *ea = cft_tree_subtree(s, "exp_avg");
        CHECK_EQ(cft_tree_size(ea), cft_tree_size(p));
        CHECK(!strcmp(cft_tree_name(ea, 1), cft_tree_name(p, 1)));
        cft_optim sgd0 = cft_sgd(0.1, 0, 0, false);
        CHECK_EQ(cft_tree_size(cft_optim_init(&sgd0, p)), 0);
        cft_tree *np, *ns;
        CHECK_EQ(cft_optim_update(&adam, p, s, p, cft_scalar(1, CFT_I32), NULL, &np, &ns), CFT_OK);
        CHECK_EQ(cft_array_dtype(cft_tree_get(np, "0.weight")), CFT_F32);
        CHECK_EQ(cft_array_dtype(cft_tree_get(ns, "exp_avg.0.weight")), CFT_F32);
    }

    TEST("an update traced once inside a cft_fn replays for later steps") {
        traced_env env = {cft_adam(0.05), NULL};
        env.o.amsgrad = true;
        double p0[N] = {1, 2, 3, 4};
        cft_tree *p = cft_tree_set(cft_tree_new(), "w", vec(p0));
        cft_tree *s = cft_optim_init(&env.o, p), *pe = p, *se = s;
        env.like = s;
        int ns = cft_tree_size(s);
        cft_fn *f = cft_fn_new(traced_update, &env, 2 + ns + 2, 1 + ns);
        cft_array *w = cft_tree_get(p, "w"), *in[8], *out[8];
        cft_array *state[3];
        cft_tree_flatten(s, state);
        for (int t = 1; t <= 4; t++) {
            double g[N];
            for (int i = 0; i < N; i++)
                g[i] = cos(t + 2.0 * i);
            cft_tree *gt = cft_tree_set(cft_tree_new(), "w", vec(g));
            in[0] = w, in[1] = vec(g);
            for (int j = 0; j < ns; j++)
                in[2 + j] = state[j];
            in[2 + ns] = cft_scalar(t, CFT_F64), in[3 + ns] = cft_scalar(0.05 / t, CFT_F64);
            CHECK_EQ(cft_fn_call(f, in, out), CFT_OK);
            w = out[0];
            for (int j = 0; j < ns; j++)
                state[j] = out[1 + j];
            cft_optim_update(&env.o, gt, se, pe, cft_scalar(t, CFT_F64),
                             cft_scalar(0.05 / t, CFT_F64), &pe, &se);
            CHECK_ARRAY_CLOSE(w, cft_tree_get(pe, "w"), 1e-15, 1e-16);
        }
    }

    TEST("a short Adam run fits a linear map") {
        fit_env e = {cft_nn_linear(3, 2, true)};
        cft_tree *p = cft_tree_astype(cft_module_init(e.m, cft_random_key(2), NULL), CFT_F64);
        cft_array *x = cft_random_normal(cft_random_key(3), CFT_F64, (int64_t[]){32, 3}, 2);
        cft_array *wt = cft_from_f64((double[]){1, -2, 0.5, 0, 3, -1}, (int64_t[]){2, 3}, 2);
        cft_array *y = cft_add(cft_linear(x, wt, NULL),
                               cft_from_f64((double[]){0.3, -0.7}, (int64_t[]){2}, 1));
        cft_fn *vg =
            cft_value_and_grad(cft_tree_fn_new(fit_loss, &e, p, 2, 1), (int[]){0, 1}, 2, false);
        cft_optim adam = cft_adam(0.05);
        cft_tree *s = cft_optim_init(&adam, p);
        double first = 0, last = 0;
        for (int t = 1; t <= 300; t++) {
            cft_array *in[4], *out[3];
            cft_tree_flatten(p, in);
            in[2] = x, in[3] = y;
            if (cft_fn_call(vg, in, out) != CFT_OK)
                break;
            if (t == 1)
                first = cft_item(out[0]);
            last = cft_item(out[0]);
            cft_optim_update(&adam, cft_tree_unflatten(p, out + 1), s, p, cft_scalar(t, CFT_F64),
                             NULL, &p, &s);
        }
        CHECK_MSG(last < 1e-4 * first, "loss %g -> %g", first, last);
        CHECK_ARRAY_CLOSE(cft_tree_get(p, "weight"), wt, 0, 1e-2);
    }

    TEST("clip_grad_norm: global norm and clamped coefficient") {
        cft_tree *g = cft_tree_set(
            cft_tree_set(cft_tree_new(), "a", cft_from_f64((double[]){3, 4}, (int64_t[]){2}, 1)),
            "b", cft_scalar(12, CFT_F64));
        CHECK_CLOSE(cft_item(cft_tree_global_norm(g)), 13, 1e-15, 0);
        cft_array *norm;
        cft_tree *c = cft_clip_grad_norm(g, 6.5, &norm);
        CHECK_CLOSE(cft_item(norm), 13, 1e-15, 0);
        double k = 6.5 / (13 + 1e-6);
        CHECK_ARRAY_CLOSE(cft_tree_get(c, "a"),
                          cft_from_f64((double[]){3 * k, 4 * k}, (int64_t[]){2}, 1), 1e-15, 0);
        CHECK_CLOSE(cft_item(cft_tree_get(c, "b")), 12 * k, 1e-15, 0);
        CHECK_CLOSE(cft_item(cft_tree_global_norm(c)), 6.5, 1e-6, 0);
        cft_tree *u = cft_clip_grad_norm(g, 100, NULL);
        CHECK_ARRAY_CLOSE(cft_tree_get(u, "a"), cft_tree_get(g, "a"), 0, 0);
        cft_tree *f32 = cft_clip_grad_norm(cft_tree_astype(g, CFT_F32), 1, NULL);
        CHECK_EQ(cft_array_dtype(cft_tree_get(f32, "a")), CFT_F32);
        CHECK(cft_tree_failed(cft_clip_grad_norm(g, -1, NULL)));
        CHECK_CLOSE(cft_item(cft_tree_global_norm(cft_tree_new())), 0, 0, 0);
    }

    TEST("errors: missing gradients, foreign state, bad hyperparameters") {
        cft_tree *p = cft_tree_set(cft_tree_set(cft_tree_new(), "a", cft_scalar(1, CFT_F64)), "b",
                                   cft_scalar(2, CFT_F64));
        cft_tree *g = cft_tree_remove(p, "b"), *np, *ns;
        cft_optim adam = cft_adam(0.1), sgd = cft_sgd(0.1, 0.9, 0, false);
        cft_tree *s = cft_optim_init(&adam, p);
        CHECK(cft_optim_update(&adam, g, s, p, cft_scalar(1, CFT_F64), NULL, &np, &ns) != CFT_OK);
        CHECK(cft_tree_failed(np) &&
              strstr(cft_error_message(cft_tree_error(np)), "no gradient for 'b'"));
        CHECK(cft_optim_update(&sgd, p, s, p, cft_scalar(1, CFT_F64), NULL, &np, &ns) != CFT_OK);
        CHECK(strstr(cft_last_error_message(), "momentum_buffer.a") != NULL);
        cft_optim bad = cft_sgd(0.1, 0, 0, true);
        CHECK(cft_tree_failed(cft_optim_init(&bad, p)));
        CHECK(cft_optim_update(&adam, p, s, p, cft_ones(CFT_F64, (int64_t[]){2}, 1), NULL, &np,
                               &ns) != CFT_OK);
        cft_tree *pi = cft_tree_set(cft_tree_new(), "i", cft_scalar(1, CFT_I32));
        CHECK(cft_optim_update(&sgd, pi, cft_optim_init(&sgd, pi), pi, cft_scalar(1, CFT_F64), NULL,
                               &np, &ns) != CFT_OK);
        CHECK(cft_optim_update(NULL, p, s, p, cft_scalar(1, CFT_F64), NULL, &np, &ns) != CFT_OK);
    }

    return check_summary();
}
