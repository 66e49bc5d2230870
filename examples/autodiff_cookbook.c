/* autodiff_cookbook.c: the JAX autodiff cookbook's main recipes in C, on
 * its logistic-regression example: grad with respect to several
 * arguments, value_and_grad, checking derivatives numerically
 * (cft_check_grads), Hessian-vector products two ways (forward over
 * reverse, reverse over reverse) against the full Hessian, Jacobians by jacfwd and jacrev, and the
 * jvp / vjp duality. Exits 1 on any mismatch.
 *
 *     build/examples/autodiff_cookbook */
#include <math.h>
#include <stdio.h>

#include "cft/cft.h"

enum { N = 4, D = 3 };
static cft_array *X, *T; /* inputs [N, D], targets [N] (0 or 1) */

/* (W [D], b []) -> negative log-likelihood of the logistic model */
static cft_status nll(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *p = cft_logistic(cft_add(cft_matmul(X, in[0]), in[1]));
    cft_array *lik =
        cft_add(cft_mul(p, T), cft_mul(cft_add_s(cft_neg(p), 1), cft_add_s(cft_neg(T), 1)));
    out[0] = cft_neg(cft_sum(cft_log(lik), NULL, 0, false));
    return CFT_OK;
}
/* W -> the loss, for the Hessian recipes */
static cft_status nll_w(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    return nll(NULL, 2, (cft_array *[]){in[0], env}, 1, out);
}

static double diff(cft_array *a, cft_array *b) {
    return cft_item(cft_max(cft_abs(cft_sub(a, b)), NULL, 0, false));
}

int main(void) {
    double xv[N * D] = {0.52, 1.12, 0.77, 0.88, -1.08, 0.15, 0.52, 0.06, -1.30, 0.74, -2.49, 1.39};
    double tv[N] = {1, 1, 0, 1};
    X = cft_from_data(xv, CFT_F64, (int64_t[]){N, D}, 2);
    T = cft_from_data(tv, CFT_F64, (int64_t[]){N}, 1);
    cft_array *W = cft_random_normal(cft_random_key(0), CFT_F64, (int64_t[]){D}, 1);
    cft_array *b = cft_scalar(0.1, CFT_F64), *in[2] = {W, b}, *out[3];
    cft_fn *f = cft_fn_new(nll, NULL, 2, 1);
    int bad = 0;

    /* grad with respect to both arguments, and value_and_grad */
    cft_fn_call(cft_value_and_grad(f, (int[]){0, 1}, 2, false), in, out);
    printf("loss %.6f, dW %s, db %.6f\n", cft_item(out[0]),
           cft_array_size(out[1]) == D ? "[3]" : "?", cft_item(out[2]));
    /* numerical checks of first and second derivatives, both modes */
    cft_status st = cft_check_grads(f, in, 2, CFT_CHECK_FWD | CFT_CHECK_REV, 0, 0, 0);
    printf("check_grads (order 2, fwd and rev): %s\n",
           st == CFT_OK ? "ok" : cft_last_error_message());
    bad |= st != CFT_OK;

    /* Hessian-vector products two ways against H v */
    cft_fn *l = cft_fn_new(nll_w, b, 1, 1);
    cft_array *H = cft_fn_call1(cft_hessian(l, 0), &W);
    cft_array *v = cft_random_normal(cft_random_key(1), CFT_F64, (int64_t[]){D}, 1), *o[2];
    cft_array *Hv = cft_matmul(H, v);
    cft_fn_call(cft_jvp(cft_grad(l, NULL, 0)), (cft_array *[]){W, v}, o); /* forward over reverse */
    double fwd_rev = diff(o[1], Hv);
    cft_array *ys[1], *r[1];
    cft_fn *pb;
    cft_vjp(cft_grad(l, NULL, 0), &W, ys, &pb); /* reverse over reverse */
    cft_fn_call(pb, &v, r);
    double rev_rev = diff(r[0], Hv);
    printf("hvp: forward-over-reverse %.1e, reverse-over-reverse %.1e from H v\n", fwd_rev,
           rev_rev);
    bad |= fwd_rev > 1e-12 || rev_rev > 1e-12;

    /* Jacobians of the predictions: jacfwd = jacrev; jvp / vjp duality */
    cft_fn *probs = cft_grad(f, NULL, 0); /* a vector function of W: the gradient */
    cft_array *jf = cft_fn_call1(cft_jacfwd(probs, NULL, 0), in);
    cft_array *jr = cft_fn_call1(cft_jacrev(probs, NULL, 0), in);
    cft_array *u = cft_random_normal(cft_random_key(2), CFT_F64, (int64_t[]){D}, 1), *jv[2], *g[2];
    cft_fn_call(cft_jvp(probs), (cft_array *[]){W, b, v, cft_zeros_like(b)}, jv);
    cft_vjp(probs, in, ys, &pb);
    cft_fn_call(pb, &u, g);
    double dual = fabs(cft_item(cft_sum(cft_mul(u, jv[1]), NULL, 0, false)) -
                       cft_item(cft_sum(cft_mul(g[0], v), NULL, 0, false)));
    printf("jacfwd vs jacrev %.1e, <u, J v> - <J^T u, v> %.1e\n", diff(jf, jr), dual);
    bad |= diff(jf, jr) > 1e-12 || dual > 1e-12;
    printf("%s\n", bad ? "MISMATCH" : "all recipes agree");
    return bad;
}
