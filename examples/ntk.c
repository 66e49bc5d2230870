/* ntk.c: functorch's "Neural Tangent Kernels" tutorial in C. The empirical
 * NTK of a small MLP between two batches, NTK[n, m] = J(x_n) J(x_m)^T with
 * J the Jacobian of the outputs with respect to all parameters: by
 * vmap(jacrev) over each batch and one einsum per parameter
 * ("Naf,Mbf->NMab", as the tutorial writes it), against the same products
 * formed one pair of examples at a time. Exits 1 on a mismatch.
 *
 *     build/examples/ntk */
#include <math.h>
#include <stdio.h>

#include "cft/cft.h"

enum { D = 8, H = 16, O = 3, N = 5, M = 4, NP = 4 };

/* (w1 [D,H], b1 [H], w2 [H,O], b2 [O], x [D]) -> outputs [O] */
static cft_status mlp(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[4], in[0]), in[1]));
    out[0] = cft_add(cft_matmul(h, in[2]), in[3]);
    return CFT_OK;
}

/* per example the Jacobian of each parameter, flattened: [batch, O, size] */
static void jacobians(cft_fn *jac, cft_array *const *p, cft_array *x, cft_array **j) {
    cft_array *in[NP + 1] = {p[0], p[1], p[2], p[3], x}, *out[NP];
    int axes[NP + 1] = {CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0};
    cft_fn_call(cft_vmap(jac, axes, NULL), in, out);
    for (int k = 0; k < NP; k++) {
        cft_aval a = cft_array_aval(out[k]);
        j[k] = cft_reshape(out[k], (int64_t[]){a.shape[0], O, -1}, 3);
    }
}

int main(void) {
    cft_array *keys = cft_random_split(cft_random_key(0), 6), *p[NP];
    p[0] = cft_mul_s(cft_random_normal(cft_index(keys, 0), CFT_F64, (int64_t[]){D, H}, 2), 0.4);
    p[1] = cft_random_normal(cft_index(keys, 1), CFT_F64, (int64_t[]){H}, 1);
    p[2] = cft_mul_s(cft_random_normal(cft_index(keys, 2), CFT_F64, (int64_t[]){H, O}, 2), 0.3);
    p[3] = cft_random_normal(cft_index(keys, 3), CFT_F64, (int64_t[]){O}, 1);
    cft_array *x1 = cft_random_normal(cft_index(keys, 4), CFT_F64, (int64_t[]){N, D}, 2);
    cft_array *x2 = cft_random_normal(cft_index(keys, 5), CFT_F64, (int64_t[]){M, D}, 2);
    cft_fn *jac = cft_jacrev(cft_fn_new(mlp, NULL, NP + 1, 1), (int[]){0, 1, 2, 3}, NP);

    /* the kernel: sum over parameters of einsum("Naf,Mbf->NMab") */
    cft_array *j1[NP], *j2[NP], *ntk = NULL;
    jacobians(jac, p, x1, j1);
    jacobians(jac, p, x2, j2);
    for (int k = 0; k < NP; k++) {
        cft_array *t = cft_einsum2("Naf,Mbf->NMab", j1[k], j2[k]);
        ntk = ntk ? cft_add(ntk, t) : t;
    }
    /* the same, one pair of examples at a time */
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++) {
            cft_array *a = NULL;
            for (int k = 0; k < NP; k++) {
                cft_array *u = cft_index(j1[k], n), *v = cft_index(j2[k], m);
                cft_array *t = cft_matmul(u, cft_transpose(v, NULL));
                a = a ? cft_add(a, t) : t;
            }
            double d = cft_item(
                cft_max(cft_abs(cft_sub(a, cft_index(cft_index(ntk, n), m))), NULL, 0, false));
            worst = d > worst ? d : worst;
        }
    cft_aval s = cft_array_aval(ntk);
    printf("empirical NTK [%lld, %lld, %lld, %lld]; against pairwise products: %.2e\n",
           (long long)s.shape[0], (long long)s.shape[1], (long long)s.shape[2],
           (long long)s.shape[3], worst);
    return worst > 1e-12;
}
