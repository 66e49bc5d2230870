/* test_nn_losses.c: the losses of nn.h against hand-computed values with
 * every reduction: cross-entropy (with label smoothing, gradient softmax -
 * one_hot), NLL, MSE, L1, Huber at and around delta, and BCE-with-logits
 * (stable at +-1000, pos_weight, gradient sigmoid - y); bad inputs give
 * errors naming the loss. */
#include <math.h>
#include <string.h>

#include "check.h"

static cft_array *vec(const double *v, int64_t n) {
    return cft_from_f64(v, &n, 1);
}

static cft_status ce_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_loss_cross_entropy(in[0], in[1], 0, CFT_REDUCE_SUM);
    return CFT_OK;
}
static cft_status bce_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_loss_bce_with_logits(in[0], in[1], NULL, CFT_REDUCE_SUM);
    return CFT_OK;
}

static cft_status xent_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_cross_entropy(in[0], in[1]);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    TEST("cross-entropy: by hand, label smoothing, reductions") {
        cft_array *logits = cft_from_f64((double[]){1, 2, 3, 0, 0, 0}, (int64_t[]){2, 3}, 2);
        int32_t yv[2] = {2, 0};
        cft_array *y = cft_from_i32(yv, (int64_t[]){2}, 1);
        double lse0 = log(exp(1) + exp(2) + exp(3)), l0 = lse0 - 3, l1 = log(3.0);
        CHECK_ARRAY_CLOSE(cft_loss_cross_entropy(logits, y, 0, CFT_REDUCE_NONE),
                          vec((double[]){l0, l1}, 2), 1e-15, 0);
        CHECK_CLOSE(cft_item(cft_loss_cross_entropy(logits, y, 0, CFT_REDUCE_MEAN)), (l0 + l1) / 2,
                    1e-15, 0);
        CHECK_CLOSE(cft_item(cft_loss_cross_entropy(logits, y, 0, CFT_REDUCE_SUM)), l0 + l1, 1e-15,
                    0);
        /* smoothing 0.1 over 3 classes: 0.9 * nll + 0.1 * mean(-log p) */
        double s0 = 0.9 * l0 + 0.1 * ((lse0 - 1) + (lse0 - 2) + (lse0 - 3)) / 3, s1 = l1;
        CHECK_ARRAY_CLOSE(cft_loss_cross_entropy(logits, y, 0.1, CFT_REDUCE_NONE),
                          vec((double[]){s0, s1}, 2), 1e-15, 0);
        CHECK_CLOSE(s0, 0.50760596444438, 0, 1e-13);
        /* the old per-example composite agrees */
        CHECK_ARRAY_CLOSE(cft_loss_cross_entropy(logits, y, 0, CFT_REDUCE_NONE),
                          cft_cross_entropy(logits, y), 1e-15, 0);
        /* gradient: softmax - one_hot */
        cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(ce_cb, NULL, 2, 1), NULL, 0),
                                    (cft_array *[]){logits, y});
        CHECK_ARRAY_CLOSE(g, cft_sub(cft_softmax(logits, -1), cft_one_hot(y, 3, CFT_F64)), 1e-15,
                          1e-16);
        cft_array *e =
            cft_loss_cross_entropy(logits, cft_from_i32(yv, (int64_t[]){1}, 1), 0, CFT_REDUCE_MEAN);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_loss_cross_entropy"));
        CHECK(
            cft_failed(cft_loss_cross_entropy(logits, cft_astype(y, CFT_F32), 0, CFT_REDUCE_MEAN)));
        CHECK(cft_failed(cft_loss_cross_entropy(logits, y, 1.5, CFT_REDUCE_MEAN)));
        CHECK(cft_failed(cft_loss_cross_entropy(logits, y, 0, (cft_reduction)7)));
    }

    TEST("nll: picks -logp[label]") {
        cft_array *lp = cft_from_f64((double[]){-0.5, -1, -2, -3, -0.1, -4}, (int64_t[]){2, 3}, 2);
        int32_t yv[2] = {1, 1};
        cft_array *y = cft_from_i32(yv, (int64_t[]){2}, 1);
        CHECK_ARRAY_CLOSE(cft_loss_nll(lp, y, CFT_REDUCE_NONE), vec((double[]){1, 0.1}, 2), 0, 0);
        CHECK_CLOSE(cft_item(cft_loss_nll(lp, y, CFT_REDUCE_MEAN)), 0.55, 1e-15, 0);
        CHECK(cft_failed(cft_loss_nll(lp, cft_scalar(2, CFT_I32), CFT_REDUCE_SUM)));
    }

    TEST("mse and l1: by hand, broadcasting") {
        cft_array *p = vec((double[]){1, 2, 3}, 3), *t = vec((double[]){1, 1, 1}, 3);
        CHECK_CLOSE(cft_item(cft_loss_mse(p, t, CFT_REDUCE_MEAN)), 5 / 3.0, 1e-15, 0);
        CHECK_CLOSE(cft_item(cft_loss_mse(p, t, CFT_REDUCE_SUM)), 5, 0, 0);
        CHECK_ARRAY_CLOSE(cft_loss_mse(p, t, CFT_REDUCE_NONE), vec((double[]){0, 1, 4}, 3), 0, 0);
        CHECK_CLOSE(cft_item(cft_loss_mse(p, t, CFT_REDUCE_MEAN)), cft_item(cft_mse(p, t)), 1e-15,
                    0);
        CHECK_CLOSE(cft_item(cft_loss_l1(p, t, CFT_REDUCE_MEAN)), 1, 0, 0);
        CHECK_CLOSE(cft_item(cft_loss_l1(p, cft_scalar(2, CFT_F64), CFT_REDUCE_SUM)), 2, 0, 0);
        cft_array *e = cft_loss_mse(p, vec((double[]){1, 2}, 2), CFT_REDUCE_MEAN);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_loss_mse"));
        CHECK(cft_failed(cft_loss_l1(cft_arange(0, 3, 1, CFT_I32), cft_arange(0, 3, 1, CFT_I32),
                                     CFT_REDUCE_MEAN)));
    }

    TEST("huber: quadratic below delta, linear from delta") {
        cft_array *p = vec((double[]){0, 0.5, 1, 3, -3}, 5),
                  *t = cft_zeros(CFT_F64, (int64_t[]){5}, 1);
        CHECK_ARRAY_CLOSE(cft_loss_huber(p, t, 1, CFT_REDUCE_NONE),
                          vec((double[]){0, 0.125, 0.5, 2.5, 2.5}, 5), 0, 0);
        CHECK_ARRAY_CLOSE(cft_loss_huber(p, t, 2, CFT_REDUCE_NONE),
                          vec((double[]){0, 0.125, 0.5, 4, 4}, 5), 0, 0);
        CHECK_CLOSE(cft_item(cft_loss_huber(p, t, 1, CFT_REDUCE_MEAN)), 5.625 / 5, 1e-15, 0);
        CHECK(cft_failed(cft_loss_huber(p, t, 0, CFT_REDUCE_MEAN)));
    }

    TEST("bce with logits: stable at +-1000, pos_weight, gradient sigmoid - y") {
        cft_array *x = vec((double[]){-1000, -1, 0, 2, 1000}, 5),
                  *y = vec((double[]){0, 1, 1, 0, 1}, 5);
        double want[5] = {0, log(1 + exp(1.0)), log(2.0), log(1 + exp(2.0)), 0};
        CHECK_ARRAY_CLOSE(cft_loss_bce_with_logits(x, y, NULL, CFT_REDUCE_NONE), vec(want, 5),
                          1e-15, 0);
        CHECK_ARRAY_CLOSE(
            cft_loss_bce_with_logits(cft_astype(x, CFT_F32), y, NULL, CFT_REDUCE_NONE),
            vec(want, 5), 1e-6, 0);
        double wpw[5] = {0, 3 * want[1], 3 * want[2], want[3], 0};
        CHECK_ARRAY_CLOSE(cft_loss_bce_with_logits(x, y, cft_scalar(3, CFT_F64), CFT_REDUCE_NONE),
                          vec(wpw, 5), 1e-15, 0);
        /* fractional targets: the cross-entropy of Bernoulli distributions */
        cft_array *yf = vec((double[]){0.25, 0.25, 0.25, 0.25, 0.25}, 5);
        cft_array *lf = cft_loss_bce_with_logits(x, yf, NULL, CFT_REDUCE_NONE);
        double s = 1 / (1 + exp(-2.0));
        CHECK_CLOSE(cft_item_at(lf, 3), -(0.25 * log(s) + 0.75 * log(1 - s)), 1e-14, 0);
        CHECK_CLOSE(cft_item_at(lf, 4), 0.75 * 1000, 1e-15, 0);
        cft_array *g =
            cft_fn_call1(cft_grad(cft_fn_new(bce_cb, NULL, 2, 1), NULL, 0), (cft_array *[]){x, y});
        double gw[5];
        for (int i = 0; i < 5; i++) {
            const double xv[5] = {-1000, -1, 0, 2, 1000}, yv[5] = {0, 1, 1, 0, 1};
            gw[i] = 1 / (1 + exp(-xv[i])) - yv[i];
        }
        CHECK_ARRAY_CLOSE(g, vec(gw, 5), 1e-15, 1e-16);
        CHECK_CLOSE(cft_item(cft_loss_bce_with_logits(x, y, NULL, CFT_REDUCE_MEAN)),
                    (want[1] + want[2] + want[3]) / 5, 1e-15, 0);
        CHECK(cft_failed(
            cft_loss_bce_with_logits(cft_arange(0, 3, 1, CFT_I32), y, NULL, CFT_REDUCE_MEAN)));
        CHECK(cft_failed(
            cft_loss_bce_with_logits(x, vec((double[]){1, 2}, 2), NULL, CFT_REDUCE_MEAN)));
    }

    TEST("labels out of range: an error when known, NaN for that example when traced") {
        /* a label of 99 of 3 classes had an all-zero one-hot row: loss 0, no word */
        cft_array *logits = cft_from_f64((double[]){1, 2, 3, 0, 0, 0}, (int64_t[]){2, 3}, 2);
        cft_array *bad = cft_from_i32((int32_t[]){1, 99}, (int64_t[]){2}, 1),
                  *good = cft_from_i32((int32_t[]){1, 2}, (int64_t[]){2}, 1);
        cft_array *e = cft_cross_entropy(logits, bad);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "label 99 is out of range"));
        e = cft_loss_cross_entropy(logits, bad, 0, CFT_REDUCE_NONE);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_loss_cross_entropy"));
        e = cft_loss_nll(cft_log_softmax(logits, -1), cft_neg(good), CFT_REDUCE_NONE);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "label -2 is out of range"));
        /* jitted, the labels are traced: the bad example's loss is NaN, the other's exact */
        cft_fn *j = cft_jit(cft_fn_new(xent_cb, NULL, 2, 1));
        for (int call = 0; call < 3; call++) {
            cft_array *y[1];
            CHECK_EQ(cft_fn_call(j, (cft_array *[]){logits, bad}, y), CFT_OK);
            CHECK(isnan(cft_item_at(y[0], 1)));
            CHECK_ARRAY_CLOSE(cft_index(y[0], 0), cft_index(cft_cross_entropy(logits, good), 0),
                              1e-12, 1e-12);
            CHECK_EQ(cft_fn_call(j, (cft_array *[]){logits, good}, y), CFT_OK);
            CHECK_ARRAY_CLOSE(y[0], cft_cross_entropy(logits, good), 1e-12, 1e-12);
        }
    }
    return check_summary();
}
