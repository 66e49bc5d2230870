/* custom_kernel.c: bringing a hand-written C kernel into the transforms.
 *
 * softplus(x) = log(1 + e^x), computed by a plain C loop that cft cannot
 * trace, becomes a primitive with cft_custom_op. Its derivative is given
 * once, as a custom_jvp written with cft ops (d softplus = sigmoid(x) dx),
 * and the kernel is rank-polymorphic (elementwise), so vmap calls it on
 * whole batches. Then grad, vmap(grad) and even the Hessian work through
 * it. A second definition gives the same op a custom_vjp instead (forward
 * saves sigmoid(x), backward multiplies by it), as one would for a kernel
 * with a hand-written backward pass.
 *
 *   build/examples/custom_kernel
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cft/cft.h>

/* the kernel: any shape of f32 or f64, stable for large |x| */
static cft_status softplus_kernel(void *env, cft_array *const *in, cft_array **out) {
    (void)env;
    int64_t n = cft_array_size(in[0]);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    cft_status st = cft_copy_to(in[0], CFT_F64, v);
    for (int64_t i = 0; st == CFT_OK && i < n; i++)
        v[i] = fmax(v[i], 0) + log1p(exp(-fabs(v[i])));
    if (st == CFT_OK)
        out[0] = cft_astype(cft_from_f64(v, cft_array_shape(in[0]), cft_array_ndim(in[0])),
                            cft_array_dtype(in[0]));
    free(v);
    return st;
}

static cft_status same_shape(void *env, const cft_aval *in, cft_aval *out) {
    (void)env;
    if (!cft_dtype_is_float(in[0].dtype))
        return CFT_E_DTYPE;
    out[0] = in[0];
    return CFT_OK;
}

/* custom_jvp: (x, t) -> t * sigmoid(x), with cft ops, so it differentiates again */
static cft_status softplus_jvp(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul(in[1], cft_logistic(in[0]));
    return CFT_OK;
}

/* custom_vjp: forward returns (y, sigmoid(x)); backward (s, ct) -> ct * s */
static cft_fn *softplus_op;
static cft_status softplus_fwd(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_fn_call1(softplus_op, in);
    out[1] = cft_logistic(in[0]);
    return CFT_OK;
}
static cft_status softplus_bwd(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul(in[1], in[0]);
    return CFT_OK;
}

static cft_custom_def jvp_def = {.name = "softplus_c",
                                 .nin = 1,
                                 .nout = 1,
                                 .shape = same_shape,
                                 .impl = softplus_kernel,
                                 .rank_polymorphic = true};
static cft_custom_def vjp_def = {.name = "softplus_c_vjp",
                                 .nin = 1,
                                 .nout = 1,
                                 .shape = same_shape,
                                 .impl = softplus_kernel,
                                 .nres = 1,
                                 .rank_polymorphic = true};

/* loss(x) = sum(softplus(x)^2) */
static cft_fn *op_for_loss;
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = cft_fn_call1(op_for_loss, in);
    out[0] = cft_sum(cft_square(y), NULL, 0, false);
    return CFT_OK;
}

int main(void) {
    cft_init();
    jvp_def.jvp = cft_fn_new(softplus_jvp, NULL, 2, 1);
    cft_fn *sp = cft_custom_op(&jvp_def);
    softplus_op = sp;
    vjp_def.vjp_fwd = cft_fn_new(softplus_fwd, NULL, 1, 2);
    vjp_def.vjp_bwd = cft_fn_new(softplus_bwd, NULL, 2, 1);
    cft_fn *sp_vjp = cft_custom_op(&vjp_def);

    double xs[4] = {-2.0, -0.5, 0.5, 3.0};
    cft_array *x = cft_from_f64(xs, (int64_t[]){4}, 1);
    cft_print_named("softplus(x)", cft_fn_call1(sp, &x), stdout);

    op_for_loss = sp;
    cft_fn *L = cft_fn_new(loss, NULL, 1, 1);
    cft_array *g = cft_fn_call1(cft_grad(L, NULL, 0), &x);
    cft_print_named("grad sum(softplus^2) via custom_jvp", g, stdout);
    cft_array *H = cft_fn_call1(cft_hessian(L, 0), &x);
    cft_print_named("hessian via custom_jvp", H, stdout);

    /* per-example gradients of the loss over a batch of rows */
    double rows[6] = {-1, 0, 1, 2, -3, 0.25};
    cft_array *X = cft_from_f64(rows, (int64_t[]){3, 2}, 2);
    cft_array *pg = cft_fn_call1(cft_vmap(cft_grad(L, NULL, 0), NULL, NULL), &X);
    cft_print_named("vmap(grad) over 3 rows", pg, stdout);

    op_for_loss = sp_vjp; /* the same loss through the custom_vjp definition */
    cft_fn *L2 = cft_fn_new(loss, NULL, 1, 1);
    cft_array *g2 = cft_fn_call1(cft_grad(L2, NULL, 0), &x);
    cft_print_named("grad via custom_vjp", g2, stdout);
    printf("custom_jvp and custom_vjp gradients agree: %s\n",
           cft_allclose(g, g2, 1e-12, 0, false) ? "yes" : "NO");
    cft_fn_print_ir(cft_grad(L2, NULL, 0), (cft_aval[]){cft_array_aval(x)}, stdout);
    return cft_allclose(g, g2, 1e-12, 0, false) && !cft_failed(H) && !cft_failed(pg) ? 0 : 1;
}
