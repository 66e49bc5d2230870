/* test_index_composite.c: searchsorted, bincount, histogram, nonzero,
 * argwhere and unique against numpy's definitions on small inputs (exact),
 * with padding, out-of-range values and weights; and vmap of bincount
 * against a loop. */
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

static cft_array *vec(const double *v, int64_t n, cft_dtype dt) {
    return cft_astype(cft_from_data(v, CFT_F64, &n, 1), dt);
}
static void expect(cft_array *x, const double *want, int64_t n) {
    CHECK_EQ(cft_array_size(x), n);
    for (int64_t i = 0; i < n && i < cft_array_size(x); i++)
        CHECK_MSG(cft_item_at(x, i) == want[i], "element %lld: %g, want %g", (long long)i,
                  cft_item_at(x, i), want[i]);
}
static cft_status count5(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_bincount(in[0], NULL, 5);
    return CFT_OK;
}

static cft_array *along_idx;
static int put_mode;
static cft_status along_f(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = put_mode ? cft_put_along_axis(in[0], along_idx, in[1], 1)
                            : cft_scatter_add_along_axis(in[0], along_idx, in[1], 1);
    out[0] = cft_sum(cft_mul(cft_sin(y), y), NULL, 0, false);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    TEST("searchsorted, left and right") {
        cft_array *a = vec((double[]){1, 2, 2, 3, 5}, 5, CFT_F64);
        cft_array *v = vec((double[]){0, 2, 4, 6}, 4, CFT_F64);
        expect(cft_searchsorted(a, v, false), (double[]){0, 1, 4, 5}, 4);
        expect(cft_searchsorted(a, v, true), (double[]){0, 3, 4, 5}, 4);
    }
    TEST("bincount with a length, weights, and values out of range") {
        cft_array *x = vec((double[]){0, 1, 1, 3, 7, -1}, 6, CFT_I32);
        expect(cft_bincount(x, NULL, 4), (double[]){1, 2, 0, 1}, 4);
        cft_array *w = vec((double[]){0.5, 1, 2, 4, 8, 16}, 6, CFT_F64);
        expect(cft_bincount(x, w, 4), (double[]){0.5, 3, 0, 4}, 4);
        CHECK(cft_failed(cft_bincount(vec((double[]){1}, 1, CFT_F64), NULL, 2)));
    }
    TEST("histogram: bins, the closed last bin, values outside") {
        cft_array *x = vec((double[]){0, 0.1, 0.5, 0.99, 1, 1.5, -0.2}, 7, CFT_F64);
        expect(cft_histogram(x, 4, 0, 1, NULL), (double[]){2, 0, 1, 2}, 4);
    }
    TEST("nonzero and argwhere, padded") {
        cft_array *x = vec((double[]){0, 3, 0, 0, 5, 1}, 6, CFT_F64);
        expect(cft_nonzero(x, 5, -1), (double[]){1, 4, 5, -1, -1}, 5);
        expect(cft_nonzero(x, 2, -1), (double[]){1, 4}, 2);
        cft_array *m = cft_reshape(x, (int64_t[]){2, 3}, 2);
        cft_array *w = cft_argwhere(m, 4, -9); /* (0,1) (1,1) (1,2) pad */
        CHECK_EQ(cft_array_aval(w).shape[1], 2);
        expect(cft_reshape(w, (int64_t[]){8}, 1), (double[]){0, 1, 1, 1, 1, 2, -9, -9}, 8);
    }
    TEST("unique, sorted and padded") {
        cft_array *x = vec((double[]){3, 1, 3, 2, 1, 7}, 6, CFT_F64);
        expect(cft_unique(x, 6, -1), (double[]){1, 2, 3, 7, -1, -1}, 6);
        expect(cft_unique(x, 2, -1), (double[]){1, 2}, 2);
    }
    TEST("put_along_axis and scatter_add along an axis (torch's scatter_add_)") {
        cft_array *x = cft_zeros(CFT_F64, (int64_t[]){2, 4}, 2);
        cft_array *idx = cft_astype(
            cft_reshape(vec((double[]){1, 3, 0, -1}, 4, CFT_F64), (int64_t[]){2, 2}, 2), CFT_I64);
        cft_array *src = cft_reshape(vec((double[]){1, 2, 3, 4}, 4, CFT_F64), (int64_t[]){2, 2}, 2);
        cft_array *p = cft_put_along_axis(x, idx, src, 1);
        expect(cft_reshape(p, (int64_t[]){8}, 1), (double[]){0, 1, 0, 2, 3, 0, 0, 4}, 8);
        cft_array *same = cft_astype(
            cft_reshape(vec((double[]){2, 2, 0, 0}, 4, CFT_F64), (int64_t[]){2, 2}, 2), CFT_I64);
        cft_array *s = cft_scatter_add_along_axis(cft_ones_like(x), same, src, 1);
        expect(cft_reshape(s, (int64_t[]){8}, 1), (double[]){1, 1, 4, 1, 8, 1, 1, 1}, 8);
        /* derivatives in x and src, forward and reverse (cft_check_grads) */
        along_idx = same;
        cft_array *xs[2] = {cft_random_normal(cft_random_key(1), CFT_F64, (int64_t[]){2, 4}, 2),
                            cft_random_normal(cft_random_key(2), CFT_F64, (int64_t[]){2, 2}, 2)};
        for (put_mode = 0; put_mode < 2; put_mode++)
            CHECK_MSG(cft_check_grads(cft_fn_new(along_f, NULL, 2, 1), xs, 2,
                                      CFT_CHECK_FWD | CFT_CHECK_REV, 0, 0, 0) == CFT_OK,
                      "%s", cft_last_error_message());
        CHECK(cft_failed(cft_put_along_axis(x, cft_astype(src, CFT_F32), src, 1)));
    }
    TEST("vmap of bincount equals a loop") {
        cft_array *xs = cft_astype(
            cft_reshape(vec((double[]){0, 1, 1, 4, 2, 2, 2, 0}, 8, CFT_F64), (int64_t[]){2, 4}, 2),
            CFT_I32);
        cft_array *v = cft_fn_call1(cft_vmap(cft_fn_new(count5, NULL, 1, 1), NULL, NULL), &xs);
        for (int64_t b = 0; b < 2; b++) {
            cft_array *xb = cft_index(xs, b), *o[1];
            count5(NULL, 1, &xb, 1, o);
            CHECK_ARRAY_CLOSE(cft_index(v, b), o[0], 0, 0);
        }
    }
    return check_summary();
}
