/* test_optim_step.c: the jitted optimizer step (cft_optim_step) against the
 * eager cft_optim_update, itself checked against PyTorch's equations in
 * test_nn_optim: every optimizer and option, five steps, parameters of
 * several shapes in f32 and f64, with and without donation; an lr override;
 * a vmap of the step over an ensemble against a loop; many threads on one
 * step; and bad inputs.
 *
 * Tolerances: the jit compiles the same equations, but its fused kernels
 * may contract a*b + c into one fused multiply-add and keep intermediates in
 * registers, so results may differ in the last bits each step. Over five
 * steps of Adam (a division by sqrt(v) + eps) that stays within a few ulps
 * relative: f32 rtol 1e-5 (about 80 ulp), f64 1e-12. */
#include <pthread.h>
#include <string.h>

#include "check.h"

#define STEPS 5
#define NP 4

static const char *names[NP] = {"layer.weight", "layer.bias", "scale", "w64"};

static cft_tree *make_params(uint64_t seed) {
    cft_array *k = cft_random_key(seed);
    cft_array *xs[NP] = {
        cft_random_normal(cft_random_fold_in(k, 0), CFT_F32, (int64_t[]){17, 33}, 2),
        cft_random_normal(cft_random_fold_in(k, 1), CFT_F32, (int64_t[]){33}, 1),
        cft_random_normal(cft_random_fold_in(k, 2), CFT_F32, NULL, 0),
        cft_random_normal(cft_random_fold_in(k, 3), CFT_F64, (int64_t[]){5, 3}, 2),
    };
    return cft_tree_from(names, xs, NP);
}

static cft_tree *make_grads(const cft_tree *p, uint64_t seed) {
    cft_array *k = cft_random_key(seed), *xs[NP];
    for (int i = 0; i < NP; i++) {
        cft_array *x = cft_tree_at(p, i);
        cft_aval a = cft_array_aval(x);
        xs[i] = cft_random_normal(cft_random_fold_in(k, i), a.dtype, a.shape, a.ndim);
    }
    return cft_tree_from(names, xs, NP);
}

static double tol(const cft_array *x) {
    return cft_array_dtype(x) == CFT_F64 ? 1e-12 : 1e-5;
}

static void check_trees(const cft_tree *a, const cft_tree *b, const char *what) {
    CHECK_EQ(cft_tree_size(a), cft_tree_size(b));
    for (int i = 0; i < cft_tree_size(a); i++) {
        CHECK_MSG(!strcmp(cft_tree_name(a, i), cft_tree_name(b, i)), "%s: name %s vs %s", what,
                  cft_tree_name(a, i), cft_tree_name(b, i));
        cft_array *x = cft_tree_at(a, i), *y = cft_tree_get(b, cft_tree_name(a, i));
        CHECK_ARRAY_CLOSE(x, y, tol(x), tol(x));
    }
}

/* copies, so donated inputs leave the reference's arrays alone */
static cft_tree *copy_tree(const cft_tree *t) {
    cft_array *xs[16];
    const char *nm[16];
    for (int i = 0; i < cft_tree_size(t); i++) {
        nm[i] = cft_tree_name(t, i);
        xs[i] = cft_add_s(cft_tree_at(t, i), 0) /* a new buffer */;
    }
    return cft_tree_from(nm, xs, cft_tree_size(t));
}

static void run_against_eager(const char *label, cft_optim o, unsigned flags, bool lr_override) {
    TEST("%s%s%s", label, flags ? ", donated" : "", lr_override ? ", lr schedule" : "") {
        cft_tree *p = make_params(1), *s = cft_optim_init(&o, p);
        cft_tree *fp = copy_tree(p), *fs = copy_tree(s);
        cft_optim_step *st = cft_optim_step_new(&o, p, flags);
        CHECK(cft_optim_step_error(st) == NULL);
        for (int t = 1; t <= STEPS; t++) {
            cft_tree *g = make_grads(p, 100 + t);
            cft_array *step = cft_scalar(t, CFT_F32);
            cft_array *lr = lr_override ? cft_scalar(o.lr / t, CFT_F64) : NULL;
            cft_tree *np, *ns, *fnp, *fns;
            CHECK_EQ(cft_optim_update(&o, g, s, p, step, lr, &np, &ns), CFT_OK);
            cft_tree *old = fp;
            CHECK_EQ(cft_optim_step_apply(st, g, fs, fp, step, lr, &fnp, &fns), CFT_OK);
            check_trees(np, fnp, "params");
            check_trees(ns, fns, "state");
            if (flags & CFT_OPTIM_DONATE_PARAMS)
                CHECK(cft_failed(cft_tree_at(old, 0))); /* its buffer now holds the new one */
            else
                CHECK(!cft_failed(cft_tree_at(old, 0)));
            p = np, s = ns, fp = fnp, fs = fns;
        }
        int64_t donated = cft_jit_donated_count(cft_optim_step_fn(st));
        if (flags)
            CHECK_MSG(donated > 0, "donated %lld", (long long)donated);
        else
            CHECK_MSG(donated <= 0, "donated %lld", (long long)donated);
    }
}

typedef struct {
    cft_optim_step *st;
    const cft_tree *g, *s, *p;
    cft_tree *np;
} thread_arg;

static void *thread_main(void *arg) {
    thread_arg *a = arg;
    cft_tree *ns;
    for (int k = 0; k < 20; k++)
        cft_optim_step_apply(a->st, a->g, a->s, a->p, cft_scalar(3, CFT_F32), NULL, &a->np, &ns);
    return NULL;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_optim sgdm = cft_sgd(0.1, 0.9, 0.01, true), sgdd = cft_sgd(0.05, 0.8, 0, false);
    sgdd.dampening = 0.3;
    cft_optim ams = cft_adam(1e-2);
    ams.amsgrad = true, ams.weight_decay = 0.1;
    cft_optim rms = cft_rmsprop(1e-2);
    rms.centered = true, rms.momentum = 0.5, rms.weight_decay = 0.02;
    struct {
        const char *label;
        cft_optim o;
    } cases[] = {
        {"sgd", cft_sgd(0.1, 0, 0, false)}, {"sgd momentum nesterov weight decay", sgdm},
        {"sgd momentum dampening", sgdd},   {"adam", cft_adam(1e-2)},
        {"adam amsgrad L2", ams},           {"adamw", cft_adamw(1e-2, 0.05)},
        {"rmsprop", cft_rmsprop(1e-2)},     {"rmsprop centered momentum decay", rms},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        run_against_eager(cases[c].label, cases[c].o, 0, false);
        run_against_eager(cases[c].label, cases[c].o,
                          CFT_OPTIM_DONATE_PARAMS | CFT_OPTIM_DONATE_STATE, false);
    }
    run_against_eager("adam", cft_adam(1e-2), 0, true);
    run_against_eager("adam", cft_adam(1e-2), CFT_OPTIM_DONATE_STATE, true);

    TEST("vmap of the step over an ensemble of 3 against a loop") {
        cft_optim o = cft_adam(1e-2);
        cft_array *w[3], *g[3], *m[3], *v[3];
        for (int k = 0; k < 3; k++) {
            w[k] = cft_random_normal(cft_random_key(10 + k), CFT_F32, (int64_t[]){4, 6}, 2);
            g[k] = cft_random_normal(cft_random_key(20 + k), CFT_F32, (int64_t[]){4, 6}, 2);
            m[k] = cft_mul_s(g[k], 0.1);
            v[k] = cft_mul_s(cft_square(g[k]), 0.01);
        }
        const char *wn[1] = {"w"};
        cft_optim_step *st = cft_optim_step_new(&o, cft_tree_from(wn, w, 1), 0);
        cft_fn *batched =
            cft_vmap(cft_optim_step_fn(st), (int[]){0, 0, 0, 0, CFT_NOT_BATCHED, CFT_NOT_BATCHED},
                     (int[]){0, 0, 0});
        cft_array *in[6] = {cft_stack(w, 3, 0), cft_stack(g, 3, 0),     cft_stack(m, 3, 0),
                            cft_stack(v, 3, 0), cft_scalar(2, CFT_F32), cft_scalar(1e-2, CFT_F64)};
        cft_array *out[3];
        CHECK_EQ(cft_fn_call(batched, in, out), CFT_OK);
        for (int k = 0; k < 3; k++) {
            cft_array *one[6] = {w[k], g[k], m[k], v[k], in[4], in[5]}, *ref[3];
            CHECK_EQ(cft_fn_call(cft_optim_step_fn(st), one, ref), CFT_OK);
            for (int j = 0; j < 3; j++)
                CHECK_ARRAY_CLOSE(cft_index(out[j], k), ref[j], 1e-6, 1e-7);
        }
    }

    TEST("4 threads on one step") {
        cft_optim o = cft_adamw(1e-2, 0.01);
        cft_tree *p = make_params(3), *s = cft_optim_init(&o, p), *g = make_grads(p, 4);
        cft_optim_step *st = cft_optim_step_new(&o, p, 0);
        cft_tree *ref, *rs;
        CHECK_EQ(cft_optim_update(&o, g, s, p, cft_scalar(3, CFT_F32), NULL, &ref, &rs), CFT_OK);
        pthread_t th[4];
        thread_arg a[4];
        for (int k = 0; k < 4; k++) {
            a[k] = (thread_arg){st, g, s, p, NULL};
            pthread_create(&th[k], NULL, thread_main, &a[k]);
        }
        for (int k = 0; k < 4; k++) {
            pthread_join(th[k], NULL);
            check_trees(ref, a[k].np, "threaded params");
        }
    }

    TEST("bad inputs: clear errors naming the call, never NULL") {
        cft_optim o = cft_adam(1e-2);
        cft_tree *p = make_params(5), *s = cft_optim_init(&o, p), *g = make_grads(p, 6);
        cft_tree *np, *ns;
        cft_optim bad = cft_adam(-1);
        cft_optim_step *st = cft_optim_step_new(&bad, p, 0);
        CHECK(st && cft_optim_step_error(st));
        CHECK_EQ(cft_optim_step_apply(st, g, s, p, cft_scalar(1, CFT_F32), NULL, &np, &ns),
                 CFT_E_ARG);
        CHECK(cft_tree_failed(np) && cft_tree_failed(ns));
        CHECK(cft_failed(cft_fn_call1(cft_optim_step_fn(st), NULL)));

        st = cft_optim_step_new(&o, p, 8);
        CHECK(strstr(cft_error_message(cft_optim_step_error(st)), "cft_optim_step_new"));

        const char *in[1] = {"i"};
        cft_array *ix[1] = {cft_arange(0, 4, 1, CFT_I32)};
        st = cft_optim_step_new(&o, cft_tree_from(in, ix, 1), 0);
        CHECK_EQ(cft_error_code(cft_optim_step_error(st)), CFT_E_DTYPE);

        st = cft_optim_step_new(&o, p, 0);
        cft_tree *wrong = cft_tree_set(p, "layer.bias", cft_zeros(CFT_F32, (int64_t[]){34}, 1));
        CHECK_EQ(cft_optim_step_apply(st, g, s, wrong, cft_scalar(1, CFT_F32), NULL, &np, &ns),
                 CFT_E_SHAPE);
        const char *msg = cft_error_message(cft_tree_error(np));
        CHECK_MSG(strstr(msg, "cft_optim_step_apply") && strstr(msg, "layer.bias"), "%s", msg);

        cft_tree *nog = cft_tree_remove(g, "scale");
        CHECK_EQ(cft_optim_step_apply(st, nog, s, p, cft_scalar(1, CFT_F32), NULL, &np, &ns),
                 CFT_E_ARG);
        CHECK(strstr(cft_error_message(cft_tree_error(np)), "scale"));

        CHECK_EQ(cft_optim_step_apply(st, g, s, p, cft_zeros(CFT_F32, (int64_t[]){2}, 1), NULL, &np,
                                      &ns),
                 CFT_E_SHAPE);
        CHECK_EQ(cft_optim_step_apply(NULL, g, s, p, cft_scalar(1, CFT_F32), NULL, &np, &ns),
                 CFT_E_ARG);
        CHECK(cft_optim_step_error(cft_optim_step_new(&o, NULL, 0)) != NULL);
        /* no parameters: nothing to do, empty trees */
        cft_tree *none = cft_tree_new();
        cft_optim_step *empty = cft_optim_step_new(&o, none, 0);
        CHECK_EQ(cft_optim_step_apply(empty, none, cft_optim_init(&o, none), none,
                                      cft_scalar(1, CFT_F32), NULL, &np, &ns),
                 CFT_OK);
        CHECK(cft_tree_size(np) == 0 && cft_tree_size(ns) == 0 && !cft_tree_failed(np));
        CHECK(cft_optim_step_error(empty) == NULL && cft_fn_failed(cft_optim_step_fn(empty)));
        /* and the step still works after all that */
        CHECK_EQ(cft_optim_step_apply(st, g, s, p, cft_scalar(1, CFT_F32), NULL, &np, &ns), CFT_OK);
    }
    return check_summary();
}
