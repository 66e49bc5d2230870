// np: 2 3
/* test_ddp.c (mpirun, 2 and 3 ranks): DDP with p ranks x B/p examples gives
 * the gradients of one process with B examples (f32: rtol 1e-5, atol 1e-6,
 * sums in another order), for an MLP and a CNN, with one bucket or many,
 * with no_sync gradient
 * accumulation, with the fp16 hook (to f16 precision) and PowerSGD (fewer
 * bytes); ZeRO-sharded Adam gives the parameters and the state of
 * single-process Adam after 10 steps. Every rank builds the same global
 * batch and takes its slice, so it can compute the reference itself. */
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "cft/dist.h"
#include "check.h"

enum { B = 24, D = 8, H = 16, C = 4 };
static int rank, size;

/* params w1 [D,H], b1 [H], w2 [H,C], b2 [C]; batch x [n,D], y [n] */
static cft_status mlp_loss(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                           cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h =
        cft_tanh(cft_add(cft_matmul(in[0], cft_tree_get(p, "w1")), cft_tree_get(p, "b1")));
    cft_array *z = cft_add(cft_matmul(h, cft_tree_get(p, "w2")), cft_tree_get(p, "b2"));
    out[0] = cft_mean(cft_cross_entropy(z, in[1]), NULL, 0, false);
    return CFT_OK;
}

/* a CNN: conv 2x2 (4 channels) -> relu -> flatten -> linear; x [n, 8] as 2x4 */
static cft_status cnn_loss(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                           cft_array **out) {
    (void)env, (void)nin, (void)nout;
    int64_t n = cft_array_dim(in[0], 0);
    cft_array *img = cft_reshape(in[0], (int64_t[]){n, 1, 2, 4}, 4);
    cft_array *h = cft_conv2d(img, cft_tree_get(p, "conv.weight"), NULL, NULL, NULL, 1);
    h = cft_relu(cft_add(h, cft_reshape(cft_tree_get(p, "conv.bias"), (int64_t[]){1, 4, 1, 1}, 4)));
    cft_array *z =
        cft_add(cft_matmul(cft_reshape(h, (int64_t[]){n, 4 * 3}, 2), cft_tree_get(p, "fc.weight")),
                cft_tree_get(p, "fc.bias"));
    out[0] = cft_mean(cft_cross_entropy(z, in[1]), NULL, 0, false);
    return CFT_OK;
}

static cft_tree *init(uint64_t seed) {
    cft_tree *t = cft_tree_new();
    t = cft_tree_set(
        t, "w1",
        cft_mul_s(cft_random_normal(cft_random_key(seed), CFT_F32, (int64_t[]){D, H}, 2), 0.3));
    t = cft_tree_set(t, "b1", cft_zeros(CFT_F32, (int64_t[]){H}, 1));
    t = cft_tree_set(
        t, "w2",
        cft_mul_s(cft_random_normal(cft_random_key(seed + 1), CFT_F32, (int64_t[]){H, C}, 2), 0.3));
    t = cft_tree_set(t, "b2", cft_full(0.1, CFT_F32, (int64_t[]){C}, 1));
    return t;
}

static cft_array *rows(cft_array *x, int64_t lo, int64_t hi) {
    cft_aval a = cft_array_aval(x);
    int64_t s[2] = {lo, 0}, l[2] = {hi, a.ndim > 1 ? a.shape[1] : 0};
    return cft_slice(x, s, l, NULL);
}

static bool trees_close(const cft_tree *a, const cft_tree *b, double rtol, double atol) {
    bool ok = cft_tree_size(a) == cft_tree_size(b);
    for (int i = 0; ok && i < cft_tree_size(a); i++)
        ok = cft_allclose(cft_tree_at(a, i), cft_tree_get(b, cft_tree_name(a, i)), rtol, atol,
                          false);
    return ok;
}

int main(int argc, char **argv) {
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    cft_dist_group *w = cft_dist_world();
    rank = cft_dist_rank(w), size = cft_dist_size(w);
    cft_array *X = cft_random_normal(cft_random_key(100), CFT_F32, (int64_t[]){B, D}, 2);
    int32_t ys[B];
    for (int i = 0; i < B; i++)
        ys[i] = (i * 7) % C;
    cft_array *Y = cft_from_i32(ys, (int64_t[]){B}, 1);
    int64_t lo = B / size * rank, hi = lo + B / size;
    cft_array *xl = rows(X, lo, hi), *yl = cft_slice(Y, &lo, &hi, NULL);
    cft_tree *params = init(1);
    cft_fn *loss = cft_tree_fn_new(mlp_loss, NULL, params, 2, 1);
    /* the single-process reference: the whole batch */
    int argn[4] = {0, 1, 2, 3};
    cft_array *ref_out[5];
    cft_fn_call(cft_value_and_grad(loss, argn, 4, false),
                (cft_array *[]){cft_tree_at(params, 0), cft_tree_at(params, 1),
                                cft_tree_at(params, 2), cft_tree_at(params, 3), X, Y},
                ref_out);
    cft_tree *ref = cft_tree_unflatten(params, ref_out + 1);

    TEST("rank %d of %d: broadcast_params gives rank 0's parameters everywhere", rank, size) {
        cft_ddp *d = cft_ddp_new(w, loss, params, NULL);
        cft_tree *mine = init(50 + (uint64_t)rank), *got = cft_ddp_broadcast_params(d, mine);
        CHECK(trees_close(got, init(50), 0, 0));
    }
    TEST("rank %d: DDP of %d x %d examples = one process with %d (one bucket and many)", rank, size,
         B / size, B) {
        double mbs[2] = {0, 1e-4}; /* 25 MiB: one bucket; 100 bytes: one per tensor */
        for (int k = 0; k < 2; k++) {
            cft_ddp *d = cft_ddp_new(w, loss, params, &(cft_ddp_options){.bucket_mb = mbs[k]});
            CHECK_EQ(cft_ddp_num_buckets(d), k ? 4 : 1);
            cft_tree *g = NULL;
            cft_array *l = NULL;
            CHECK_EQ(cft_ddp_step(d, params, (cft_array *[]){xl, yl}, NULL, &l, &g), CFT_OK);
            CHECK_MSG(trees_close(g, ref, 1e-5, 1e-6), "bucket_mb %g", mbs[k]);
            /* the mean of the local losses is the global loss */
            CHECK_CLOSE(cft_item(cft_dist_all_reduce(w, l, CFT_DIST_MEAN)), cft_item(ref_out[0]),
                        1e-5, 1e-6);
        }
    }
    TEST("rank %d: the same for a CNN (conv 2x2, relu, linear)", rank) {
        cft_tree *cp = cft_tree_new();
        cp = cft_tree_set(
            cp, "conv.weight",
            cft_mul_s(cft_random_normal(cft_random_key(7), CFT_F32, (int64_t[]){4, 1, 2, 2}, 4),
                      0.3));
        cp = cft_tree_set(cp, "conv.bias", cft_full(0.05, CFT_F32, (int64_t[]){4}, 1));
        cp = cft_tree_set(
            cp, "fc.weight",
            cft_mul_s(cft_random_normal(cft_random_key(8), CFT_F32, (int64_t[]){4 * 3, C}, 2),
                      0.1));
        cp = cft_tree_set(cp, "fc.bias", cft_zeros(CFT_F32, (int64_t[]){C}, 1));
        cft_fn *closs = cft_tree_fn_new(cnn_loss, NULL, cp, 2, 1);
        cft_array *o[5];
        cft_fn_call(cft_value_and_grad(closs, argn, 4, false),
                    (cft_array *[]){cft_tree_at(cp, 0), cft_tree_at(cp, 1), cft_tree_at(cp, 2),
                                    cft_tree_at(cp, 3), X, Y},
                    o);
        cft_tree *cref = cft_tree_unflatten(cp, o + 1);
        for (int k = 0; k < 2; k++) {
            cft_ddp *d = cft_ddp_new(w, closs, cp, &(cft_ddp_options){.bucket_mb = k ? 1e-3 : 0});
            cft_tree *g = NULL;
            cft_status st = cft_ddp_step(d, cp, (cft_array *[]){xl, yl}, NULL, NULL, &g);
            CHECK_MSG(st == CFT_OK, "%s", cft_last_error_message());
            CHECK_MSG(trees_close(g, cref, 1e-5, 1e-6), "CNN, %d buckets", cft_ddp_num_buckets(d));
        }
    }
    TEST("rank %d: no_sync accumulates two micro-batches, then one all_reduce", rank) {
        cft_ddp *d = cft_ddp_new(w, loss, params, NULL);
        int64_t mid = lo + (hi - lo) / 2;
        cft_tree *g1 = NULL, *g2 = NULL;
        cft_ddp_no_sync(d, true);
        CHECK_EQ(cft_ddp_step(d, params,
                              (cft_array *[]){rows(X, lo, mid), cft_slice(Y, &lo, &mid, NULL)},
                              NULL, NULL, &g1),
                 CFT_OK);
        CHECK(cft_ddp_bytes_sent(d) == 0);
        cft_ddp_no_sync(d, false);
        CHECK_EQ(cft_ddp_step(d, params,
                              (cft_array *[]){rows(X, mid, hi), cft_slice(Y, &mid, &hi, NULL)}, g1,
                              NULL, &g2),
                 CFT_OK);
        /* each micro-batch's mean: their sum is twice the local mean */
        for (int i = 0; i < 4; i++)
            CHECK_ARRAY_CLOSE(cft_mul_s(cft_tree_at(g2, i), 0.5), cft_tree_at(ref, i), 1e-5, 1e-6);
    }
    TEST("rank %d: the fp16 and bf16 hooks approximate the average", rank) {
        cft_ddp_hook hooks[2] = {cft_ddp_hook_fp16, cft_ddp_hook_bf16};
        double tol[2] = {2e-3, 2e-2};
        for (int k = 0; k < 2; k++) {
            cft_ddp *d = cft_ddp_new(w, loss, params, &(cft_ddp_options){.hook = hooks[k]});
            cft_tree *g = NULL;
            CHECK_EQ(cft_ddp_step(d, params, (cft_array *[]){xl, yl}, NULL, NULL, &g), CFT_OK);
            CHECK_MSG(trees_close(g, ref, tol[k], tol[k]), "hook %d", k);
        }
    }
    TEST("rank %d: PowerSGD: exact all_reduce before start_iter, then fewer bytes", rank) {
        cft_powersgd *ps = cft_powersgd_new(2, 1, 42);
        cft_ddp *d = cft_ddp_new(
            w, loss, params, &(cft_ddp_options){.hook = cft_ddp_hook_powersgd, .hook_state = ps});
        cft_tree *g = NULL;
        CHECK_EQ(cft_ddp_step(d, params, (cft_array *[]){xl, yl}, NULL, NULL, &g), CFT_OK);
        CHECK(trees_close(g, ref, 1e-5, 1e-6)); /* iteration 1 <= start_iter */
        for (int it = 0; it < 3; it++)
            CHECK_EQ(cft_ddp_step(d, params, (cft_array *[]){xl, yl}, NULL, NULL, &g), CFT_OK);
        double plain, sent = cft_powersgd_bytes(ps, &plain);
        CHECK_MSG(sent < 0.75 * plain, "sent %g of %g bytes", sent, plain);
        /* a rank-2 approximation with error feedback: bounded, and the bias
         * vectors (not compressed) still exact */
        CHECK_ARRAY_CLOSE(cft_tree_get(g, "b2"), cft_tree_get(ref, "b2"), 1e-5, 1e-6);
        if (rank == 0)
            printf("  PowerSGD rank 2: %.0f bytes sent for %.0f uncompressed (%.2fx)\n", sent,
                   plain, sent / plain);
    }
    TEST("rank %d: ZeRO-sharded Adam = single-process Adam after 10 steps", rank) {
        cft_optim adam = cft_adam(0.01);
        cft_zero *z = cft_zero_new(w, &adam, params);
        CHECK(z != NULL);
        int owned = 0;
        for (int i = 0; i < 4; i++)
            owned += cft_zero_owner(z, i) == rank;
        CHECK_EQ(cft_tree_size(cft_zero_local_state(z)), 2 * owned); /* exp_avg, exp_avg_sq */
        cft_ddp *d = cft_ddp_new(w, loss, params, NULL);
        cft_tree *p = params, *q = params, *state = cft_optim_init(&adam, params);
        for (int step = 1; step <= 10; step++) {
            cft_tree *g = NULL;
            CHECK_EQ(cft_ddp_step(d, p, (cft_array *[]){xl, yl}, NULL, NULL, &g), CFT_OK);
            CHECK_EQ(cft_zero_step(z, g, p, cft_scalar(step, CFT_F32), NULL, &p), CFT_OK);
            /* the reference: one process, the whole batch, unsharded Adam */
            cft_array *o[5];
            cft_fn_call(cft_value_and_grad(loss, argn, 4, false),
                        (cft_array *[]){cft_tree_at(q, 0), cft_tree_at(q, 1), cft_tree_at(q, 2),
                                        cft_tree_at(q, 3), X, Y},
                        o);
            cft_optim_update(&adam, cft_tree_unflatten(q, o + 1), state, q,
                             cft_scalar(step, CFT_F32), NULL, &q, &state);
        }
        CHECK(trees_close(p, q, 1e-5, 1e-6));
        cft_tree *full = cft_zero_state_dict(z, 0);
        if (rank == 0)
            CHECK(trees_close(full, state, 1e-4, 1e-7));
        else
            CHECK_EQ(cft_tree_size(full), 0);
    }
    TEST("rank %d: ZeRO with SGD (momentum, Nesterov), AdamW and RMSprop = unsharded", rank) {
        cft_optim opts[3] = {cft_sgd(0.05, 0.9, 1e-4, true), cft_adamw(0.01, 0.01),
                             cft_rmsprop(0.01)};
        for (int k = 0; k < 3; k++) {
            cft_zero *z = cft_zero_new(w, &opts[k], params);
            cft_tree *p = params, *q = params, *state = cft_optim_init(&opts[k], params);
            for (int step = 1; step <= 5; step++) {
                cft_array *o[5];
                cft_fn_call(cft_value_and_grad(loss, argn, 4, false),
                            (cft_array *[]){cft_tree_at(q, 0), cft_tree_at(q, 1), cft_tree_at(q, 2),
                                            cft_tree_at(q, 3), X, Y},
                            o);
                cft_tree *g = cft_tree_unflatten(q, o + 1); /* the same grads everywhere */
                CHECK_EQ(cft_zero_step(z, g, p, cft_scalar(step, CFT_F32), NULL, &p), CFT_OK);
                cft_optim_update(&opts[k], g, state, q, cft_scalar(step, CFT_F32), NULL, &q,
                                 &state);
            }
            CHECK_MSG(trees_close(p, q, 1e-6, 1e-7), "optimizer %d", k);
        }
    }
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    return check_summary();
}
