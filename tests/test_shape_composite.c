/* test_shape_composite.c: tril/triu, roll, tile, repeat, split and
 * array_split, diagonal, kron and meshgrid against element-by-element
 * references (numpy's definitions, exact), then the transform checks on
 * the ones with derivatives: the vjp's dot-product test against the jvp
 * (linear maps: 1e-12), vmap against a loop and jit against the
 * interpreter (exact). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

static cft_array *seq(const int64_t *shape, int nd) { /* 0, 1, 2, ... */
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return cft_reshape(cft_arange(0, (double)n, 1, CFT_F64), shape, nd);
}
static double at(cft_array *x, int64_t i) {
    return cft_item_at(x, i);
}

typedef struct {
    const char *name;
    cft_array *(*f)(cft_array *);
    int64_t shape[3];
    int nd;
} lin;

static cft_array *f_tril(cft_array *x) {
    return cft_tril(x, -1);
}
static cft_array *f_triu(cft_array *x) {
    return cft_triu(x, 1);
}
static cft_array *f_roll(cft_array *x) {
    return cft_roll(x, -2, 1);
}
static cft_array *f_tile(cft_array *x) {
    return cft_tile(x, (int64_t[]){2, 1, 3}, 3);
}
static cft_array *f_repeat(cft_array *x) {
    return cft_repeat(x, (int64_t[]){2, 0, 1, 3}, 4, 1, 6);
}
static cft_array *f_diag(cft_array *x) {
    return cft_diagonal(x, 1, 0, 1);
}
static cft_array *f_kron(cft_array *x) {
    return cft_kron(x, cft_add_s(x, 1));
}
static const lin lins[] = {
    {"tril", f_tril, {3, 4}, 2}, {"triu", f_triu, {3, 4}, 2},     {"roll", f_roll, {3, 4}, 2},
    {"tile", f_tile, {3, 4}, 2}, {"repeat", f_repeat, {3, 4}, 2}, {"diagonal", f_diag, {3, 4}, 2},
    {"kron", f_kron, {3, 4}, 2},
};
static cft_status call(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = ((const lin *)env)->f(in[0]);
    return cft_failed(out[0]) ? cft_last_error() : CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_array *m = seq((int64_t[]){3, 4}, 2); /* m[i][j] = 4i + j */
    TEST("tril / triu keep the right triangle") {
        cft_array *l = cft_tril(m, 0), *u = cft_triu(m, 1), *l1 = cft_tril(m, -1);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                CHECK_EQ(at(l, 4 * i + j), j <= i ? 4 * i + j : 0);
                CHECK_EQ(at(u, 4 * i + j), j >= i + 1 ? 4 * i + j : 0);
                CHECK_EQ(at(l1, 4 * i + j), j <= i - 1 ? 4 * i + j : 0);
            }
        CHECK(cft_failed(cft_tril(cft_arange(0, 3, 1, CFT_F64), 0)));
    }
    TEST("roll wraps around, either way, on any axis") {
        cft_array *r = cft_roll(m, 1, 1), *r2 = cft_roll(m, -4, 0), *r3 = cft_roll(m, 7, -1);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                CHECK_EQ(at(r, 4 * i + j), 4 * i + (j + 3) % 4);
                CHECK_EQ(at(r2, 4 * i + j), 4 * ((i + 1) % 3) + j);
                CHECK_EQ(at(r3, 4 * i + j), 4 * i + (j + 1) % 4);
            }
    }
    TEST("tile repeats the whole array, right-aligned") {
        cft_array *t = cft_tile(m, (int64_t[]){2, 1, 3}, 3); /* [2, 3, 12] */
        cft_aval a = cft_array_aval(t);
        CHECK_EQ(a.ndim, 3);
        CHECK_EQ(a.shape[2], 12);
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 12; j++)
                    CHECK_EQ(at(t, 36 * r + 12 * i + j), 4 * i + j % 4);
    }
    TEST("repeat, by one count and by per-element counts") {
        cft_array *r = cft_repeat(m, (int64_t[]){2}, 1, 0, -1); /* [6, 4] */
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 4; j++)
                CHECK_EQ(at(r, 4 * i + j), 4 * (i / 2) + j);
        cft_array *q = cft_repeat(m, (int64_t[]){2, 0, 1, 3}, 4, 1, 6); /* columns 0 0 2 3 3 3 */
        int cols[6] = {0, 0, 2, 3, 3, 3};
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 6; j++)
                CHECK_EQ(at(q, 6 * i + j), 4 * i + cols[j]);
        CHECK(cft_failed(cft_repeat(m, (int64_t[]){1, 1, 1, 1}, 4, 1, 5)));
        /* counts whose sum overflows, or makes an array past the size limit */
        cft_array *e = cft_repeat(m, (int64_t[]){INT64_MAX, 1, 1, 1}, 4, 1, -1);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_repeat"));
        e = cft_repeat(m, (int64_t[]){(int64_t)1 << 50, 1, 1, 1}, 4, 1, -1);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_repeat"));
    }
    TEST("split and array_split") {
        cft_array *p[4];
        CHECK_EQ(cft_split(m, 2, 1, p), CFT_OK);
        CHECK_EQ(at(p[1], 0), 2);
        CHECK(cft_split(m, 3, 1, p) != CFT_OK);
        CHECK_EQ(cft_array_split(m, 3, 1, p), CFT_OK); /* 2, 1, 1 columns */
        CHECK_EQ(cft_array_aval(p[0]).shape[1], 2);
        CHECK_EQ(cft_array_aval(p[2]).shape[1], 1);
        CHECK_EQ(at(p[2], 0), 3);
    }
    TEST("diagonal with offsets, on chosen axes") {
        cft_array *d0 = cft_diagonal(m, 0, 0, 1), *d1 = cft_diagonal(m, 1, 0, 1),
                  *dn = cft_diagonal(m, -1, 0, 1), *dt = cft_diagonal(m, 0, 1, 0);
        CHECK_EQ(cft_array_size(d0), 3);
        for (int i = 0; i < 3; i++) {
            CHECK_EQ(at(d0, i), 5 * i);
            CHECK_EQ(at(d1, i), 5 * i + 1);
            CHECK_EQ(at(dt, i), 5 * i);
        }
        CHECK_EQ(cft_array_size(dn), 2);
        CHECK_EQ(at(dn, 1), 9);
        cft_array *b = seq((int64_t[]){2, 3, 3}, 3), *db = cft_diagonal(b, 0, 1, 2); /* [2, 3] */
        CHECK_EQ(at(db, 4), 9 + 4);
    }
    TEST("kron and meshgrid") {
        cft_array *a = cft_reshape(cft_arange(1, 5, 1, CFT_F64), (int64_t[]){2, 2}, 2);
        cft_array *k = cft_kron(a, cft_eye(2, CFT_F64)); /* [[1 0 2 0] [0 1 0 2] ...] */
        CHECK_EQ(at(k, 0), 1);
        CHECK_EQ(at(k, 2), 2);
        CHECK_EQ(at(k, 5), 1);
        CHECK_EQ(at(k, 15), 4);
        cft_array *gx, *gy;
        CHECK_EQ(cft_meshgrid(cft_arange(0, 3, 1, CFT_F64), cft_arange(0, 2, 1, CFT_F64), false,
                              &gx, &gy),
                 CFT_OK);
        CHECK_EQ(cft_array_aval(gx).shape[0], 2);
        CHECK_EQ(at(gx, 4), 1);
        CHECK_EQ(at(gy, 4), 1);
    }
    for (size_t i = 0; i < sizeof lins / sizeof lins[0]; i++) {
        const lin *l = &lins[i];
        TEST("%s: vjp dot-product test, vmap against a loop, jit", l->name) {
            cft_fn *f = cft_fn_new(call, (void *)l, 1, 1);
            cft_array *x = cft_random_normal(cft_random_key(1 + i), CFT_F64, l->shape, l->nd);
            cft_array *t = cft_random_normal(cft_random_key(20 + i), CFT_F64, l->shape, l->nd);
            cft_array *o[2];
            CHECK_EQ(cft_fn_call(cft_jvp(f), (cft_array *[]){x, t}, o), CFT_OK);
            cft_array *ys[1], *ct, *cts[1];
            cft_fn *pb;
            CHECK_EQ(cft_vjp(f, &x, ys, &pb), CFT_OK);
            cft_aval ya = cft_array_aval(ys[0]);
            ct = cft_random_normal(cft_random_key(40 + i), CFT_F64, ya.shape, ya.ndim);
            CHECK_EQ(cft_fn_call(pb, &ct, cts), CFT_OK);
            double lhs = cft_item(cft_sum(cft_mul(ct, o[1]), NULL, 0, false));
            double rhs = cft_item(cft_sum(cft_mul(cts[0], t), NULL, 0, false));
            CHECK_CLOSE(lhs, rhs, 1e-12, 1e-12);
            cft_array *xb = cft_random_normal(cft_random_key(60 + i), CFT_F64,
                                              (int64_t[]){4, l->shape[0], l->shape[1]}, 3);
            cft_array *vy = cft_fn_call1(cft_vmap(f, NULL, NULL), &xb);
            for (int64_t b = 0; b < 4; b++) {
                cft_array *xi = cft_index(xb, b);
                CHECK_ARRAY_CLOSE(cft_index(vy, b), cft_fn_call1(f, &xi), 0, 0);
            }
            CHECK_ARRAY_CLOSE(cft_fn_call1(cft_jit(f), &x), ys[0], 0, 0);
        }
    }
    return check_summary();
}
