/* control_flow.c: loops and branches that stay one primitive under every
 * transform (JAX's lax.scan / cond / while_loop, functorch's control-flow
 * notes), and what happens when a traced value is read as a C value.
 *
 *  1. a recurrent cell unrolled by cft_scan: its gradient through all
 *     steps, checked against central differences, and the IR (one scan);
 *  2. a piecewise function by cft_cond: grad, and vmap over a batch whose
 *     lanes take different branches;
 *  3. Newton's method for sqrt by cft_while_loop, vmapped over inputs that
 *     need different numbers of steps;
 *  4. a C `if` on a traced value: the error that says what to use instead.
 * Exits 1 on a mismatch.
 *
 *     build/examples/control_flow */
#include <math.h>
#include <stdio.h>

#include "cft/cft.h"

enum { H = 4, T = 6 };

//! [scan]
/* one step: (W, h, x_t) -> (h' = tanh(W h + x_t), y_t = sum(h')) */
static cft_status cell(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[0], in[1]), in[2]));
    out[0] = h;
    out[1] = cft_sum(h, NULL, 0, false);
    return CFT_OK;
}

/* (W, h0, xs [T, H]) -> the sum of every step's output */
static cft_status rnn_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *res[2]; /* the final carry, the stacked y_t */
    cft_status st = cft_scan(cft_fn_new(cell, NULL, 3, 2), 1, 1, T, false, in, res);
    out[0] = cft_sum(res[1], NULL, 0, false);
    return st;
}
//! [scan]

//! [cond]
static cft_status square(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_square(in[0]);
    return CFT_OK;
}
static cft_status negate(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_neg(in[0]);
    return CFT_OK;
}
/* f(x) = x > 0 ? x^2 : -x, for a scalar x */
static cft_status piecewise(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *pred = cft_gt(in[0], cft_scalar(0, CFT_F64));
    return cft_cond(pred, cft_fn_new(square, NULL, 1, 1), cft_fn_new(negate, NULL, 1, 1), 1, in,
                    out);
}
//! [cond]

//! [while]
/* carry (a, y, steps): continue while |y^2 - a| > 1e-12 a */
static cft_status not_done(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *err = cft_abs(cft_sub(cft_square(in[1]), in[0]));
    out[0] = cft_gt(err, cft_mul_s(in[0], 1e-12));
    return CFT_OK;
}
/* one Newton step y' = (y + a / y) / 2, counting steps */
static cft_status newton(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = in[0];
    out[1] = cft_mul_s(cft_add(in[1], cft_div(in[0], in[1])), 0.5);
    out[2] = cft_add_s(in[2], 1);
    return CFT_OK;
}
static cft_status newton_sqrt(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *carry[3] = {in[0], in[0], cft_scalar(0, CFT_I32)}, *res[3];
    cft_status st = cft_while_loop(cft_fn_new(not_done, NULL, 3, 1), cft_fn_new(newton, NULL, 3, 3),
                                   0, 3, carry, res);
    out[0] = res[1];
    out[1] = res[2];
    return st;
}
//! [while]

//! [concrete]
/* a C branch on a traced value: wrong under any transform */
static cft_status c_branch(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_item(in[0]) > 0 ? cft_square(in[0]) : cft_neg(in[0]);
    return CFT_OK;
}
//! [concrete]

int main(void) {
    int bad = 0;
    /* 1. scan */
    cft_array *W =
        cft_mul_s(cft_random_normal(cft_random_key(0), CFT_F64, (int64_t[]){H, H}, 2), 0.5);
    cft_array *h0 = cft_zeros(CFT_F64, (int64_t[]){H}, 1);
    cft_array *xs = cft_random_normal(cft_random_key(1), CFT_F64, (int64_t[]){T, H}, 2);
    cft_fn *loss = cft_fn_new(rnn_loss, NULL, 3, 1);
    cft_array *dW = cft_fn_call1(cft_grad(loss, (int[]){0}, 1), (cft_array *[]){W, h0, xs});
    double eps = 1e-6, worst = 0; /* central differences in every entry of W */
    for (int i = 0; i < H * H; i++) {
        cft_array *e =
            cft_reshape(cft_one_hot(cft_scalar(i, CFT_I32), H * H, CFT_F64), (int64_t[]){H, H}, 2);
        double up =
            cft_item(cft_fn_call1(loss, (cft_array *[]){cft_add(W, cft_mul_s(e, eps)), h0, xs}));
        double dn =
            cft_item(cft_fn_call1(loss, (cft_array *[]){cft_sub(W, cft_mul_s(e, eps)), h0, xs}));
        worst = fmax(worst, fabs((up - dn) / (2 * eps) - cft_item_at(dW, i)));
    }
    printf("scan: loss %.6f, |dloss/dW - central differences| <= %.1e\n",
           cft_item(cft_fn_call1(loss, (cft_array *[]){W, h0, xs})), worst);
    bad |= !(worst < 1e-7);
    printf("the gradient's IR: the loop stays a scan (forward scans, then a reverse scan of the\n"
           "transposed body), whatever T is:\n");
    cft_fn_print_ir(cft_grad(loss, (int[]){0}, 1),
                    (cft_aval[]){{CFT_F64, 2, {H, H}}, {CFT_F64, 1, {H}}, {CFT_F64, 2, {T, H}}},
                    stdout);

    /* 2. cond: grad, and vmap with lanes on both sides */
    cft_fn *f = cft_fn_new(piecewise, NULL, 1, 1);
    cft_fn *df = cft_grad(f, NULL, 0);
    cft_array *pts = cft_from_data((double[]){-2, -0.5, 0.5, 3}, CFT_F64, (int64_t[]){4}, 1);
    cft_array *ys = cft_fn_call1(cft_vmap(f, NULL, NULL), &pts);
    cft_array *ds = cft_fn_call1(cft_vmap(df, NULL, NULL), &pts);
    printf("\ncond: f(x) = x > 0 ? x^2 : -x\n");
    for (int i = 0; i < 4; i++) {
        double x = cft_item_at(pts, i), y = cft_item_at(ys, i), d = cft_item_at(ds, i);
        printf("  x = %5.2f  f = %6.3f  f' = %6.3f\n", x, y, d);
        bad |= fabs(y - (x > 0 ? x * x : -x)) > 1e-15 || fabs(d - (x > 0 ? 2 * x : -1)) > 1e-15;
    }

    /* 3. while_loop under vmap: each lane stops when it has converged */
    cft_fn *sq = cft_fn_new(newton_sqrt, NULL, 1, 2);
    cft_array *as = cft_from_data((double[]){2, 100, 1e6, 0.25}, CFT_F64, (int64_t[]){4}, 1);
    cft_array *res[2];
    cft_fn_call(cft_jit(cft_vmap(sq, NULL, NULL)), &as, res);
    printf("\nwhile_loop: Newton's sqrt, vmapped and jitted\n");
    for (int i = 0; i < 4; i++) {
        double a = cft_item_at(as, i), r = cft_item_at(res[0], i);
        printf("  sqrt(%g) = %.12g after %d steps\n", a, r, (int)cft_item_at(res[1], i));
        bad |= fabs(r - sqrt(a)) > 1e-9 * sqrt(a);
    }

    /* 4. reading a traced value */
    cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(c_branch, NULL, 1, 1), NULL, 0),
                                (cft_array *[]){cft_scalar(2, CFT_F64)});
    printf("\na C branch on a traced value, under grad:\n  %s\n",
           cft_failed(g) ? cft_error_message(g) : "(no error?)");
    bad |= !cft_failed(g);
    printf("\n%s\n", bad ? "MISMATCH" : "all checks passed");
    return bad;
}
