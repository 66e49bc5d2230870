/* test_subgradients.c: where torch and JAX differ at non-differentiable
 * points, cft follows torch (what users port from), and says so here:
 *   - a norm's gradient at the origin is 0 (JAX: NaN), for vector 2- and
 *     p-norms and the Frobenius norm;
 *   - cummax / cummin route the gradient to the last of tied elements;
 *   - where(x > 0, sqrt(x), 0) at 0 has gradient 0 (no NaN leaks from the
 *     untaken side when it is written with a safe inner where);
 *   - relu's gradient at 0 is 0, abs's is 0 (sign(0)). */
#include <math.h>
#include <stdio.h>

#include "cft/cft.h"
#include "check.h"

static int which;
static cft_status f(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *x = in[0];
    switch (which) {
    case 0:
        out[0] = cft_linalg_vector_norm(x, 2, NULL, 0, false);
        break;
    case 1:
        out[0] = cft_linalg_vector_norm(x, 3, NULL, 0, false);
        break;
    case 2:
        out[0] = cft_linalg_matrix_norm(cft_reshape(x, (int64_t[]){2, 2}, 2), CFT_NORM_FRO, false);
        break;
    case 3:
        out[0] = cft_sum(cft_cummax(x, 0, false), NULL, 0, false);
        break;
    case 4:
        out[0] = cft_sum(cft_cummin(x, 0, false), NULL, 0, false);
        break;
    case 5: {
        cft_array *pos = cft_gt(x, cft_zeros_like(x));
        cft_array *safe = cft_where(pos, x, cft_ones_like(x));
        out[0] = cft_sum(cft_where(pos, cft_sqrt(safe), cft_zeros_like(x)), NULL, 0, false);
        break;
    }
    default:
        out[0] = cft_sum(cft_add(cft_relu(x), cft_abs(x)), NULL, 0, false);
    }
    return CFT_OK;
}

static cft_array *grad_at(int w, const double *v, int64_t n) {
    which = w;
    cft_array *x = cft_from_data(v, CFT_F64, &n, 1);
    return cft_fn_call1(cft_grad(cft_fn_new(f, NULL, 1, 1), NULL, 0), &x);
}
static void expect(cft_array *g, const double *want, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        CHECK_MSG(cft_item_at(g, i) == want[i], "element %lld: %g, want %g", (long long)i,
                  cft_item_at(g, i), want[i]);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    double zero[4] = {0, 0, 0, 0};
    TEST("a norm's gradient at the origin is 0 (2-norm, 3-norm, Frobenius)") {
        for (int w = 0; w < 3; w++)
            expect(grad_at(w, zero, 4), zero, 4);
        double v[4] = {3, 4, 0, 0}, want[4] = {0.6, 0.8, 0, 0}; /* and elsewhere as usual */
        cft_array *g = grad_at(0, v, 4);
        for (int i = 0; i < 4; i++)
            CHECK_CLOSE(cft_item_at(g, i), want[i], 1e-15, 1e-15);
    }
    TEST("cummax and cummin route to the last tied element") {
        expect(grad_at(3, (double[]){1, 3, 3, 2}, 4), (double[]){1, 1, 2, 0}, 4);
        expect(grad_at(4, (double[]){3, 1, 1, 2}, 4), (double[]){1, 1, 2, 0}, 4);
    }
    TEST("where(x > 0, sqrt(x), 0) at 0: gradient 0; relu and abs at 0: 0") {
        expect(grad_at(5, zero, 2), zero, 2);
        expect(grad_at(6, zero, 3), zero, 3);
    }
    return check_summary();
}
