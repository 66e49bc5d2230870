/* app.c: a program outside the source tree that uses an installed cft:
 * the gradient of sum(sin(x)^2) is sin(2x). Built by
 * scripts/test-consumer.sh with find_package and with pkg-config, shared
 * and static; exits 0 when the gradient is right. */
#include <cft/cft.h>
#include <math.h>
#include <stdio.h>

static cft_status f(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *s = cft_sin(in[0]);
    out[0] = cft_sum(cft_mul(s, s), NULL, 0, false);
    return CFT_OK;
}

int main(void) {
    cft_array *x = cft_arange(0, 4, 1, CFT_F64);
    cft_array *g = cft_fn_call1(cft_jit(cft_grad(cft_fn_new(f, NULL, 1, 1), NULL, 0)), &x);
    for (int i = 0; i < 4; i++)
        if (fabs(cft_item_at(g, i) - sin(2.0 * i)) > 1e-12) {
            fprintf(stderr, "gradient %d: %g, want %g\n", i, cft_item_at(g, i), sin(2.0 * i));
            return 1;
        }
    printf("consumer ok\n");
    return 0;
}
