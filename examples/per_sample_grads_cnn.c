/* per_sample_grads_cnn.c: functorch's "Per-sample-gradients" tutorial
 * (its CNN) in C: the gradient of each example's loss with respect to the
 * parameters of a small CNN (conv 3x3, 1 -> 8 channels, relu, linear
 * 288 -> 10) on digits, by vmap(grad) over the batch, against a loop of
 * grad over the examples one at a time. Prints both times and the largest
 * difference; exits 1 above 1e-5 (f32).
 *
 *     build/examples/per_sample_grads_cnn */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "mlp.h"

enum { B = 64, NP = 4 };

/* (conv w [8,1,3,3], conv b [8], fc w [288,10], fc b [10], x [1,8,8], y []) -> loss */
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *x = cft_reshape(in[4], (int64_t[]){1, 1, 8, 8}, 4); /* a batch of one */
    cft_array *h = cft_conv2d(x, in[0], NULL, NULL, NULL, 1);
    h = cft_relu(cft_add(h, cft_reshape(in[1], (int64_t[]){8, 1, 1}, 3)));
    cft_array *logits = cft_add(cft_matmul(cft_reshape(h, (int64_t[]){288}, 1), in[2]), in[3]);
    out[0] = cft_cross_entropy(logits, in[5]);
    return CFT_OK;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
    digits d;
    if (digits_load(&d) != 0)
        return 77; /* no data: skipped */
    cft_array *k = cft_random_split(cft_random_key(7), NP), *p[NP];
    p[0] =
        cft_random_uniform(cft_index(k, 0), CFT_F32, (int64_t[]){8, 1, 3, 3}, 4, -1. / 3, 1. / 3);
    p[1] = cft_random_uniform(cft_index(k, 1), CFT_F32, (int64_t[]){8}, 1, -1. / 3, 1. / 3);
    p[2] = cft_random_uniform(cft_index(k, 2), CFT_F32, (int64_t[]){288, 10}, 2, -0.06, 0.06);
    p[3] = cft_random_uniform(cft_index(k, 3), CFT_F32, (int64_t[]){10}, 1, -0.06, 0.06);
    cft_array *x = cft_from_f32(d.x, (int64_t[]){B, 1, 8, 8}, 4);
    cft_array *y = cft_from_i32(d.y, (int64_t[]){B}, 1);
    cft_fn *g = cft_grad(cft_fn_new(loss, NULL, NP + 2, 1), (int[]){0, 1, 2, 3}, NP);
    /* per-sample gradients: vmap over the examples, the parameters shared */
    int axes[NP + 2] = {CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0};
    cft_fn *psg = cft_jit(cft_vmap(g, axes, NULL));
    cft_array *in[NP + 2] = {p[0], p[1], p[2], p[3], x, y}, *grads[NP];
    cft_fn_call(psg, in, grads); /* compile */
    double t0 = now();
    cft_fn_call(psg, in, grads);
    double tv = now() - t0, worst = 0;
    t0 = now();
    for (int i = 0; i < B; i++) { /* the loop it replaces */
        cft_array *one[NP + 2] = {p[0], p[1], p[2], p[3], cft_index(x, i), cft_index(y, i)},
                            *gi[NP];
        cft_fn_call(g, one, gi);
        for (int j = 0; j < NP; j++) {
            double dd =
                cft_item(cft_max(cft_abs(cft_sub(gi[j], cft_index(grads[j], i))), NULL, 0, false));
            worst = dd > worst ? dd : worst;
        }
    }
    double tl = now() - t0;
    printf("per-sample gradients of %d examples: vmap(grad) %.2f ms, loop of grad %.2f ms; "
           "largest difference %.1e\n",
           B, 1e3 * tv, 1e3 * tl, worst);
    return worst > 1e-5;
}
