/* test_conv_transpose.c: conv1d/conv3d and conv_transpose1d/2d/3d.
 * conv_transpose is checked (f64) two ways: against a direct scatter loop
 * written here from PyTorch's definition (y[n, g*Og + o, i*s - p + k*d] +=
 * x[n, g*Cg + c, i] * w[g*Cg + c, o, k]; rtol 1e-12), and as the adjoint of
 * the convolution with the same parameters: <conv(u, w), x> = <u,
 * conv_transpose(x, w)> for random u (1e-12 relative), in 1, 2 and 3 dims
 * with strides, padding, dilation, groups and output_padding. Gradients
 * by cft_check_grads (f64, orders 1 and 2); conv1d/3d against
 * conv_general_dilated; unbatched inputs; errors name the call. */
#include <math.h>
#include <stdlib.h>

#include "cft/cft.h"
#include "check.h"

static cft_array *randn(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F64, shape, nd);
}

static double dot(cft_array *a, cft_array *b) {
    return cft_item(cft_sum(cft_mul(a, b), NULL, 0, false));
}

/* PyTorch's conv_transpose1d by its definition */
static cft_array *scatter_1d(cft_array *x, cft_array *w, int64_t s, int64_t p, int64_t op,
                             int64_t d, int64_t G) {
    int64_t N = cft_array_dim(x, 0), C = cft_array_dim(x, 1), L = cft_array_dim(x, 2);
    int64_t Og = cft_array_dim(w, 1), K = cft_array_dim(w, 2), Cg = C / G;
    int64_t Lo = (L - 1) * s - 2 * p + d * (K - 1) + op + 1;
    double *xv = malloc(sizeof(double) * (size_t)(N * C * L)),
           *wv = malloc(sizeof(double) * (size_t)(C * Og * K)),
           *yv = calloc((size_t)(N * G * Og * Lo), sizeof(double));
    cft_copy_to(x, CFT_F64, xv);
    cft_copy_to(w, CFT_F64, wv);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t c = 0; c < Cg; c++)
                for (int64_t o = 0; o < Og; o++)
                    for (int64_t i = 0; i < L; i++)
                        for (int64_t k = 0; k < K; k++) {
                            int64_t at = i * s - p + k * d;
                            if (at >= 0 && at < Lo)
                                yv[(n * G * Og + g * Og + o) * Lo + at] +=
                                    xv[(n * C + g * Cg + c) * L + i] *
                                    wv[((g * Cg + c) * Og + o) * K + k];
                        }
    cft_array *y = cft_from_f64(yv, (int64_t[]){N, G * Og, Lo}, 3);
    free(xv), free(wv), free(yv);
    return y;
}

typedef struct {
    int nsp;
    int64_t s, p, d, g, op;
} cfg;

static cft_array *ct(int nsp, cft_array *x, cft_array *w, const int64_t *s, const int64_t *p,
                     const int64_t *op, const int64_t *d, int64_t g) {
    return nsp == 1   ? cft_conv_transpose1d(x, w, s, p, op, d, g)
           : nsp == 2 ? cft_conv_transpose2d(x, w, s, p, op, d, g)
                      : cft_conv_transpose3d(x, w, s, p, op, d, g);
}

static cft_status ct2_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] =
        cft_sum(cft_square(cft_conv_transpose2d(in[0], in[1], (int64_t[]){2, 1}, (int64_t[]){1, 0},
                                                (int64_t[]){1, 0}, NULL, 1)),
                NULL, 0, false);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    TEST("conv_transpose1d against the scatter loop") {
        const cfg cs[4] = {
            {1, 1, 0, 1, 1, 0}, {1, 2, 1, 1, 2, 1}, {1, 3, 2, 2, 1, 2}, {1, 2, 0, 3, 3, 0}};
        for (int t = 0; t < 4; t++) {
            const cfg *c = &cs[t];
            cft_array *x = randn(1 + (uint64_t)t, (int64_t[]){2, 3 * c->g, 7}, 3),
                      *w = randn(11 + (uint64_t)t, (int64_t[]){3 * c->g, 2, 3}, 3);
            cft_array *y = cft_conv_transpose1d(x, w, &c->s, &c->p, &c->op, &c->d, c->g);
            CHECK_MSG(!cft_failed(y), "%s", cft_error_message(y));
            CHECK_ARRAY_CLOSE(y, scatter_1d(x, w, c->s, c->p, c->op, c->d, c->g), 1e-12, 1e-12);
        }
    }
    TEST("conv_transpose is the adjoint of conv in 1, 2 and 3 dims") {
        const cfg cs[5] = {{1, 2, 1, 1, 1, 0},
                           {2, 2, 1, 1, 2, 0},
                           {2, 3, 0, 2, 1, 0},
                           {3, 2, 1, 1, 1, 0},
                           {2, 1, 2, 1, 3, 0}};
        for (int t = 0; t < 5; t++) {
            const cfg *c = &cs[t];
            int nsp = c->nsp;
            int64_t ushape[5] = {2, 2 * c->g}, wshape[5] = {3 * c->g, 2, 0};
            for (int i = 0; i < nsp; i++)
                ushape[2 + i] = nsp == 3 ? 6 : 9, wshape[2 + i] = 3;
            cft_array *u = randn(21 + (uint64_t)t, ushape, nsp + 2),
                      *w = randn(31 + (uint64_t)t, wshape, nsp + 2); /* conv: [O, C/g, k] */
            int64_t s[3] = {c->s, c->s, c->s}, p[3] = {c->p, c->p, c->p}, d[3] = {c->d, c->d, c->d};
            int64_t pad[6];
            for (int i = 0; i < nsp; i++)
                pad[2 * i] = pad[2 * i + 1] = p[i];
            cft_array *y = cft_conv_general_dilated(u, w, s, pad, NULL, d, c->g, 1);
            /* output_padding that brings conv_transpose back to u's size */
            int64_t op[3];
            for (int i = 0; i < nsp; i++)
                op[i] = ushape[2 + i] - ((cft_array_dim(y, 2 + i) - 1) * s[i] - 2 * p[i] +
                                         d[i] * (wshape[2 + i] - 1) + 1);
            cft_array *x = randn(41 + (uint64_t)t, cft_array_shape(y), nsp + 2);
            /* conv_transpose's weight layout [C_in, C_out/g, k] is conv's [O, C/g, k] */
            cft_array *v = ct(nsp, x, w, s, p, op, d, c->g);
            CHECK_MSG(!cft_failed(v), "case %d: %s", t, cft_error_message(v));
            double lhs = dot(y, x), rhs = dot(u, v);
            CHECK_CLOSE(rhs, lhs, 1e-12, 1e-12);
        }
    }
    TEST("gradients of conv_transpose2d (check_grads, f64, orders 1 and 2)") {
        cft_fn *f = cft_fn_new(ct2_fn, NULL, 2, 1);
        cft_array *in[2] = {randn(51, (int64_t[]){1, 2, 4, 3}, 4),
                            randn(52, (int64_t[]){2, 3, 2, 2}, 4)};
        CHECK_EQ(cft_check_grads(f, in, 2, CFT_CHECK_FWD | CFT_CHECK_REV, 0, 0, 0), CFT_OK);
    }
    TEST("conv1d and conv3d against conv_general_dilated; unbatched inputs") {
        cft_array *x1 = randn(61, (int64_t[]){2, 4, 10}, 3),
                  *w1 = randn(62, (int64_t[]){6, 2, 3}, 3);
        cft_array *a = cft_conv1d(x1, w1, (int64_t[]){2}, (int64_t[]){1}, NULL, 2);
        cft_array *b =
            cft_conv_general_dilated(x1, w1, (int64_t[]){2}, (int64_t[]){1, 1}, NULL, NULL, 2, 1);
        CHECK_ARRAY_CLOSE(a, b, 0, 0);
        cft_array *x3 = randn(63, (int64_t[]){3, 5, 5, 5}, 4),
                  *w3 = randn(64, (int64_t[]){2, 3, 3, 3, 3}, 5);
        cft_array *c3 = cft_conv3d(x3, w3, NULL, (int64_t[]){1, 1, 1}, NULL, 1);
        CHECK_EQ(cft_array_ndim(c3), 4); /* unbatched in, unbatched out */
        CHECK_ARRAY_CLOSE(
            c3,
            cft_squeeze(cft_conv_general_dilated(cft_expand_dims(x3, 0), w3, NULL,
                                                 (int64_t[]){1, 1, 1, 1, 1, 1}, NULL, NULL, 1, 1),
                        (int[]){0}, 1),
            0, 0);
        cft_array *u = cft_conv_transpose1d(cft_index(x1, 0), randn(65, (int64_t[]){4, 3, 2}, 3),
                                            NULL, NULL, NULL, NULL, 1);
        CHECK_EQ(cft_array_ndim(u), 2);
        CHECK_EQ(cft_array_dim(u, 1), 11);
    }
    TEST("errors name the call and the values") {
        cft_array *x = randn(71, (int64_t[]){1, 4, 6, 6}, 4),
                  *w = randn(72, (int64_t[]){4, 2, 3, 3}, 4);
        cft_array *e =
            cft_conv_transpose2d(x, w, (int64_t[]){2, 2}, NULL, (int64_t[]){2, 0}, NULL, 1);
        CHECK_MSG(cft_failed(e) && strstr(cft_error_message(e), "cft_conv_transpose2d") &&
                      strstr(cft_error_message(e), "output_padding 2"),
                  "%s", cft_error_message(e));
        e = cft_conv_transpose2d(x, randn(73, (int64_t[]){3, 2, 3, 3}, 4), NULL, NULL, NULL, NULL,
                                 1);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "C = 4"));
        e = cft_conv1d(x, w, NULL, NULL, NULL, 1);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_conv1d"));
    }
    return check_summary();
}
