/* quickstart.c: per-sample gradients in 20 lines (the README's example). */
#include <cft/cft.h>
#include <stdio.h>

/* the loss of one example: (w [3], x [3], y []) -> (w . x - y)^2 */
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_square(cft_sub(cft_sum(cft_mul(in[0], in[1]), NULL, 0, false), in[2]));
    return CFT_OK;
}

int main(void) {
    cft_array *w = cft_from_data((float[]){1, 2, 3}, CFT_F32, (int64_t[]){3}, 1);
    cft_array *xs = cft_arange(0, 12, 1, CFT_F32), *ys = cft_zeros(CFT_F32, (int64_t[]){4}, 1);
    xs = cft_reshape(xs, (int64_t[]){4, 3}, 2); /* a batch of 4 examples */
    cft_fn *grad = cft_grad(cft_fn_new(loss, NULL, 3, 1), (int[]){0}, 1);        /* d loss / d w */
    cft_fn *psg = cft_jit(cft_vmap(grad, (int[]){CFT_NOT_BATCHED, 0, 0}, NULL)); /* per example */
    cft_array *g = cft_fn_call1(psg, (cft_array *[]){w, xs, ys});
    cft_print(g, stdout); /* [4, 3]: one gradient per example */
    return cft_failed(g);
}
