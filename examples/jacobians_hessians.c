/* jacobians_hessians.c: functorch's "Jacobians, Hessians, hvp, vhp, and
 * more" tutorial in C. A small network f(x) = tanh(W x + b) of 16 inputs
 * and 16 outputs; its Jacobian by reverse and by forward mode (they must
 * agree, and match central differences), the Jacobian of a batch by vmap
 * of jacrev, the Hessian of a scalar loss, and a Hessian-vector product as
 * the jvp of the gradient (equal to the Hessian times the vector). Exits 1
 * on any mismatch.
 *
 *     build/examples/jacobians_hessians */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"

enum { D = 16 };
static cft_array *W, *b;

static cft_status predict(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_tanh(cft_add(cft_matmul(W, in[0]), b));
    return CFT_OK;
}
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_square(cft_tanh(cft_add(cft_matmul(W, in[0]), b))), NULL, 0, false);
    return CFT_OK;
}

static double maxdiff(cft_array *a, cft_array *c) {
    return cft_item(cft_max(cft_abs(cft_sub(a, c)), NULL, 0, false));
}

int main(void) {
    W = cft_mul_s(cft_random_normal(cft_random_key(0), CFT_F64, (int64_t[]){D, D}, 2), 0.3);
    b = cft_random_normal(cft_random_key(1), CFT_F64, (int64_t[]){D}, 1);
    cft_array *x = cft_random_normal(cft_random_key(2), CFT_F64, (int64_t[]){D}, 1);
    cft_fn *f = cft_fn_new(predict, NULL, 1, 1);
    int bad = 0;

    /* the Jacobian both ways, and by central differences column by column */
    cft_array *jr = cft_fn_call1(cft_jacrev(f, NULL, 0), &x);
    cft_array *jf = cft_fn_call1(cft_jacfwd(f, NULL, 0), &x);
    cft_array *cols[D];
    for (int j = 0; j < D; j++) {
        cft_array *e = cft_mul_s(cft_index(cft_eye(D, CFT_F64), j), 1e-6);
        cft_array *xp = cft_add(x, e), *xm = cft_sub(x, e);
        cols[j] = cft_mul_s(cft_sub(cft_fn_call1(f, &xp), cft_fn_call1(f, &xm)), 0.5e6);
    }
    cft_array *jd = cft_stack(cols, D, 1);
    printf("jacrev vs jacfwd: %.2e, vs central differences: %.2e\n", maxdiff(jr, jf),
           maxdiff(jr, jd));
    bad |= maxdiff(jr, jf) > 1e-12 || maxdiff(jr, jd) > 1e-8;

    /* a batch of Jacobians: vmap(jacrev) against one at a time */
    cft_array *xs = cft_random_normal(cft_random_key(3), CFT_F64, (int64_t[]){5, D}, 2);
    cft_array *jb = cft_fn_call1(cft_vmap(cft_jacrev(f, NULL, 0), NULL, NULL), &xs);
    double worst = 0;
    for (int k = 0; k < 5; k++) {
        cft_array *xk = cft_index(xs, k);
        double d = maxdiff(cft_index(jb, k), cft_fn_call1(cft_jacrev(f, NULL, 0), &xk));
        worst = d > worst ? d : worst;
    }
    printf("vmap(jacrev) over 5 inputs vs one by one: %.2e\n", worst);
    bad |= worst > 1e-12;

    /* the Hessian of a scalar loss, and hvp = jvp of the gradient */
    cft_fn *l = cft_fn_new(loss, NULL, 1, 1);
    cft_array *H = cft_fn_call1(cft_hessian(l, 0), &x);
    cft_array *v = cft_random_normal(cft_random_key(4), CFT_F64, (int64_t[]){D}, 1), *o[2];
    cft_fn_call(cft_jvp(cft_grad(l, NULL, 0)), (cft_array *[]){x, v}, o);
    double hv = maxdiff(o[1], cft_matmul(H, v)), sym = maxdiff(H, cft_transpose(H, NULL));
    printf("hvp vs H v: %.2e, H - H^T: %.2e\n", hv, sym);
    bad |= hv > 1e-12 || sym > 1e-12;
    printf("%s\n", bad ? "MISMATCH" : "all agree");
    return bad;
}
