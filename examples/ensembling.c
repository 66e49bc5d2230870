/* ensembling.c: functorch's "Model ensembling" tutorial in C: ten copies
 * of a small CNN (conv 3x3, 1 -> 8 channels, relu, linear 288 -> 10) with
 * their parameters stacked along a leading axis, run on digits by one vmap:
 * option 1 gives each model its own minibatch, option 2 the same minibatch
 * to all. Checked against a loop over the models; exits 1 above 1e-5 (f32).
 *
 *     build/examples/ensembling */
#include <stdio.h>

#include "mlp.h"

enum { M = 10, B = 64, NP = 4 };

/* one model: (conv w [8,1,3,3], conv b [8], fc w [288,10], fc b [10], x [B,1,8,8]) -> logits */
static cft_status model(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_conv2d(in[4], in[0], NULL, NULL, NULL, 1);
    h = cft_relu(cft_add(h, cft_reshape(in[1], (int64_t[]){8, 1, 1}, 3)));
    h = cft_reshape(h, (int64_t[]){cft_array_dim(h, 0), 288}, 2);
    out[0] = cft_add(cft_matmul(h, in[2]), in[3]);
    return CFT_OK;
}

int main(void) {
    digits d;
    if (digits_load(&d) != 0)
        return 77; /* no data: skipped */
    /* the M models' parameters, stacked (combine_state_for_ensemble) */
    int64_t shape[NP][5] = {{M, 8, 1, 3, 3}, {M, 8}, {M, 288, 10}, {M, 10}};
    int nd[NP] = {5, 2, 3, 2};
    double bound[NP] = {1. / 3, 1. / 3, 0.06, 0.06};
    cft_array *k = cft_random_split(cft_random_key(0), NP), *p[NP + 1];
    for (int j = 0; j < NP; j++)
        p[j] = cft_random_uniform(cft_index(k, j), CFT_F32, shape[j], nd[j], -bound[j], bound[j]);
    cft_array *minibatches = cft_from_f32(d.x, (int64_t[]){M, B, 1, 8, 8}, 5);
    cft_array *minibatch = cft_index(minibatches, 0), *y1[1], *y2[1];
    cft_fn *f = cft_fn_new(model, NULL, NP + 1, 1);
    /* option 1: a different minibatch for each model; option 2: the same one */
    p[NP] = minibatches;
    cft_fn_call(cft_vmap(f, NULL, NULL), p, y1);
    p[NP] = minibatch;
    cft_fn_call(cft_vmap(f, (int[]){0, 0, 0, 0, CFT_NOT_BATCHED}, NULL), p, y2);
    double worst = 0;
    for (int m = 0; m < M; m++) /* the loop it replaces */
        for (int opt = 0; opt < 2; opt++) {
            cft_array *pm[NP + 1] = {cft_index(p[0], m), cft_index(p[1], m), cft_index(p[2], m),
                                     cft_index(p[3], m),
                                     opt ? minibatch : cft_index(minibatches, m)};
            cft_array *r[1], *want = cft_index(opt ? y2[0] : y1[0], m);
            cft_fn_call(f, pm, r);
            double dd = cft_item(cft_max(cft_abs(cft_sub(r[0], want)), NULL, 0, false));
            worst = dd > worst ? dd : worst;
        }
    printf("ensemble of %d CNNs by vmap, own and shared minibatches: predictions [%lld,%lld,%lld]; "
           "largest difference from a loop over the models %.1e\n",
           M, (long long)cft_array_dim(y1[0], 0), (long long)cft_array_dim(y1[0], 1),
           (long long)cft_array_dim(y2[0], 2), worst);
    return worst > 1e-5;
}
