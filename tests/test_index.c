/* test_index.c: the indexing ops beyond the per-primitive table of
 * test_prims: the conveniences (take, take_along_axis, at_set, at_add) on
 * known answers; out-of-range behaviour of every op and mode (clip, fill,
 * drop, clamped dynamic slices); immutability; errors (named, never a
 * crash); vmap with batched indices only / operand only / both, nested,
 * against loops, and that the batched IR holds one gather or scatter; grad
 * of an embedding lookup and of at_set with repeated indices against finite
 * differences and closed forms; per-example gradients; jacfwd = jacrev;
 * the compiled path. Everything is f64; results that are the same
 * arithmetic are compared exactly, finite differences at 1e-7. */
#include <math.h>
#include <string.h>

#include "check.h"

#define UNUSED_ARGS (void)env, (void)nin, (void)nout
#define FN(name)                                                                                   \
    static cft_status name(void *env, int nin, cft_array *const *in, int nout, cft_array **out)

static cft_array *v64(const double *v, int64_t n) {
    return cft_from_f64(v, &n, 1);
}
static cft_array *m64(const double *v, int64_t r, int64_t c) {
    return cft_from_f64(v, (int64_t[]){r, c}, 2);
}
static cft_array *vi(const int32_t *v, int64_t n) {
    return cft_from_i32(v, &n, 1);
}
static cft_array *mi(const int32_t *v, int64_t r, int64_t c) {
    return cft_from_i32(v, (int64_t[]){r, c}, 2);
}
static cft_array *arange2(int64_t r, int64_t c) { /* 0, 1, ... as f64 [r, c] */
    return cft_reshape(cft_arange(0, (double)(r * c), 1, CFT_F64), (int64_t[]){r, c}, 2);
}
static cft_array *randn(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F64, shape, nd);
}
static cft_array *randi(uint64_t seed, const int64_t *shape, int nd, int lo, int hi) {
    cft_array *u = cft_random_uniform(cft_random_key(seed), CFT_F64, shape, nd, lo, hi + 1);
    return cft_astype(cft_floor(u), CFT_I32);
}
static bool has_error(const cft_array *y, cft_status code, const char *needle) {
    return cft_failed(y) && cft_error_code(y) == code && strstr(cft_error_message(y), needle);
}
/* number of equations of primitive `name` in f's IR at these avals */
static int count_prim(cft_fn *f, const cft_aval *av, const char *name) {
    cft_ir *ir = cft_make_ir(f, av);
    if (!ir)
        return -1;
    int n = 0;
    for (int k = 0; k < cft_ir_num_eqns(ir); k++)
        n += !strcmp(cft_ir_eqn_prim(ir, k), name);
    return n;
}

/* ---------------- functions ---------------- */

FN(f_take0) {
    UNUSED_ARGS;
    out[0] = cft_take(in[0], in[1], 0);
    return CFT_OK;
}
FN(f_at_add0) {
    UNUSED_ARGS;
    out[0] = cft_at_add(in[0], in[1], in[2], 0);
    return CFT_OK;
}
FN(f_at_set0) {
    UNUSED_ARGS;
    out[0] = cft_at_set(in[0], in[1], in[2], 0);
    return CFT_OK;
}
FN(f_dyn_slice) { /* sizes 2x2 */
    UNUSED_ARGS;
    out[0] = cft_dynamic_slice(in[0], in[1], (int64_t[]){2, 2});
    return CFT_OK;
}
FN(f_dyn_update) {
    UNUSED_ARGS;
    out[0] = cft_dynamic_update_slice(in[0], in[1], in[2]);
    return CFT_OK;
}
/* an embedding model: sum(tanh(table[ids]) * w); ids is a closure input */
FN(f_embed_loss) {
    UNUSED_ARGS;
    cft_array *e = cft_take(in[0], in[1], 0);
    out[0] = cft_sum(cft_mul(cft_tanh(e), in[2]), NULL, 0, false);
    return CFT_OK;
}
/* sum(at_set(x, idx, v) * w): gradient w where not overwritten (x), w at the winner (v) */
FN(f_set_loss) {
    UNUSED_ARGS;
    out[0] = cft_sum(cft_mul(cft_at_set(in[0], in[1], in[2], 0), in[3]), NULL, 0, false);
    return CFT_OK;
}
/* sum(sin(take_along_axis(x, idx, 1))) */
FN(f_along_loss) {
    UNUSED_ARGS;
    out[0] = cft_sum(cft_sin(cft_take_along_axis(in[0], in[1], 1)), NULL, 0, false);
    return CFT_OK;
}

/* central differences of a scalar f(in[0], rest...) in every element of in[0] */
static cft_array *fd_grad(cft_fn *f, cft_array *const *in, int nin) {
    const double h = 1e-6;
    int64_t n = cft_array_size(in[0]);
    double *x = calloc((size_t)n, sizeof(double)), *g = calloc((size_t)n, sizeof(double));
    cft_copy_to(in[0], CFT_F64, x);
    cft_aval a = cft_array_aval(in[0]);
    cft_array *args[8];
    for (int i = 1; i < nin; i++)
        args[i] = in[i];
    for (int64_t k = 0; k < n; k++) {
        double v = x[k], fp, fm;
        x[k] = v + h;
        args[0] = cft_from_f64(x, a.shape, a.ndim);
        fp = cft_item(cft_fn_call1(f, args));
        x[k] = v - h;
        args[0] = cft_from_f64(x, a.shape, a.ndim);
        fm = cft_item(cft_fn_call1(f, args));
        x[k] = v;
        g[k] = (fp - fm) / (2 * h);
    }
    cft_array *r = cft_from_f64(g, a.shape, a.ndim);
    free(x);
    free(g);
    return r;
}

/* ---------------- tests ---------------- */

static void convenience_tests(void) {
    TEST("take: rows of a matrix, negative indices from the end") {
        cft_array *x = arange2(4, 3), *y = cft_take(x, vi((int32_t[]){2, 0, -1}, 3), 0);
        CHECK_ARRAY_CLOSE(y, m64((double[]){6, 7, 8, 0, 1, 2, 9, 10, 11}, 3, 3), 0, 0);
    }
    TEST("take: 2-d indices along axis 1 give x.shape[:1] + indices.shape") {
        cft_array *x = arange2(2, 4), *y = cft_take(x, mi((int32_t[]){3, 0, 1, 1}, 2, 2), 1);
        int64_t s[3] = {2, 2, 2};
        CHECK_ARRAY_CLOSE(y, cft_from_f64((double[]){3, 0, 1, 1, 7, 4, 5, 5}, s, 3), 0, 0);
    }
    TEST("take: a 0-d index drops the axis; i64 indices; empty indices") {
        cft_array *x = arange2(3, 2);
        CHECK_ARRAY_CLOSE(cft_take(x, cft_scalar(1, CFT_I32), 0), v64((double[]){2, 3}, 2), 0, 0);
        CHECK_ARRAY_CLOSE(cft_take(x, cft_scalar(-1, CFT_I64), 1), v64((double[]){1, 3, 5}, 3), 0,
                          0);
        cft_array *e = cft_take(x, cft_zeros(CFT_I32, (int64_t[]){0}, 1), 0);
        CHECK(!cft_failed(e));
        CHECK_EQ(cft_array_dim(e, 0), 0);
        CHECK_EQ(cft_array_dim(e, 1), 2);
    }
    TEST("take: out-of-range indices are clamped (CLIP)") {
        cft_array *x = v64((double[]){10, 11, 12, 13}, 4);
        cft_array *y = cft_take(x, vi((int32_t[]){4, 100, -5, -100, -4}, 5), 0);
        CHECK_ARRAY_CLOSE(y, v64((double[]){13, 13, 10, 10, 10}, 5), 0, 0);
    }
    TEST("take_along_axis: picks per row; with argmax it gives the max") {
        cft_array *x = m64((double[]){5, 1, 7, 2, 9, 4}, 2, 3);
        cft_array *y = cft_take_along_axis(x, mi((int32_t[]){2, 0, 1, 1}, 2, 2), 1);
        CHECK_ARRAY_CLOSE(y, m64((double[]){7, 5, 9, 9}, 2, 2), 0, 0);
        cft_array *am = cft_argmax(x, 1, true);
        CHECK_ARRAY_CLOSE(cft_take_along_axis(x, am, 1), cft_max(x, (int[]){1}, 1, true), 0, 0);
        CHECK_ARRAY_CLOSE(cft_take_along_axis(x, cft_argmin(x, 0, true), 0),
                          cft_min(x, (int[]){0}, 1, true), 0, 0);
    }
    TEST("take_along_axis: indices broadcast against x; clamped") {
        cft_array *x = m64((double[]){5, 1, 7, 2, 9, 4}, 2, 3);
        cft_array *y = cft_take_along_axis(x, mi((int32_t[]){-1, 9}, 1, 2), 1);
        CHECK_ARRAY_CLOSE(y, m64((double[]){7, 7, 4, 4}, 2, 2), 0, 0);
        cft_array *col = cft_from_f64((double[]){1, 2}, (int64_t[]){2, 1}, 2);
        cft_array *z = cft_take_along_axis(col, mi((int32_t[]){0, 0, 0, 0, 0, 0}, 2, 3), 1);
        CHECK_ARRAY_CLOSE(z, m64((double[]){1, 1, 1, 2, 2, 2}, 2, 3), 0, 0);
    }
    TEST("at_add: repeated indices accumulate; negative wrap; out of range dropped") {
        cft_array *x = cft_zeros(CFT_F64, (int64_t[]){5}, 1);
        cft_array *y =
            cft_at_add(x, vi((int32_t[]){1, 1, 3, 7, -1, -6}, 6), cft_scalar(1, CFT_F64), 0);
        CHECK_ARRAY_CLOSE(y, v64((double[]){0, 2, 0, 1, 1}, 5), 0, 0);
    }
    TEST("at_set: last of repeated indices wins; rows; x is not changed") {
        cft_array *x = arange2(3, 2);
        cft_array *y = cft_at_set(x, vi((int32_t[]){2, 0, 2}, 3),
                                  m64((double[]){-1, -2, -3, -4, -5, -6}, 3, 2), 0);
        CHECK_ARRAY_CLOSE(y, m64((double[]){-3, -4, 2, 3, -5, -6}, 3, 2), 0, 0);
        CHECK_ARRAY_CLOSE(x, arange2(3, 2), 0, 0);
        cft_array *z =
            cft_at_set(x, cft_scalar(1, CFT_I32), cft_scalar(9, CFT_I32), 1); /* column 1 */
        CHECK_ARRAY_CLOSE(z, m64((double[]){0, 9, 2, 9, 4, 9}, 3, 2), 0, 0);
        CHECK(cft_array_dtype(z) == CFT_F64);
    }
    TEST("at_set / at_add on integer arrays (adds wrap)") {
        cft_array *x = vi((int32_t[]){1, 2, 3}, 3);
        CHECK_ARRAY_CLOSE(cft_at_add(x, vi((int32_t[]){0, 0}, 2), vi((int32_t[]){5, 6}, 2), 0),
                          vi((int32_t[]){12, 2, 3}, 3), 0, 0);
        CHECK(cft_array_dtype(cft_at_set(x, vi((int32_t[]){2}, 1), v64((double[]){7.9}, 1), 0)) ==
              CFT_I32);
        cft_array *big = cft_at_add(vi((int32_t[]){INT32_MAX}, 1), vi((int32_t[]){0}, 1),
                                    vi((int32_t[]){1}, 1), 0);
        CHECK_EQ(cft_item(big), INT32_MIN); /* integer adds wrap, as in JAX */
    }
}

static void mode_tests(void) {
    TEST("gather FILL_OR_DROP: windows not inside read zeros; CLIP clamps the window") {
        cft_array *x = arange2(3, 4);
        cft_gather_dnums dn = {.offset_dims = {1},
                               .n_offset_dims = 1,
                               .collapsed_slice_dims = {0},
                               .n_collapsed_slice_dims = 1,
                               .start_index_map = {0, 1},
                               .n_start_index_map = 2,
                               .index_vector_dim = 1};
        cft_array *ix = mi((int32_t[]){1, 1, 2, 3, -1, 0}, 3, 2); /* windows 1x2 at (r, c) */
        cft_array *f = cft_gather(x, ix, &dn, (int64_t[]){1, 2}, CFT_INDEX_FILL_OR_DROP);
        CHECK_ARRAY_CLOSE(f, m64((double[]){5, 6, 0, 0, 0, 0}, 3, 2), 0, 0);
        cft_array *c = cft_gather(x, ix, &dn, (int64_t[]){1, 2}, CFT_INDEX_CLIP);
        CHECK_ARRAY_CLOSE(c, m64((double[]){5, 6, 10, 11, 0, 1}, 3, 2), 0, 0);
    }
    TEST("scatter FILL_OR_DROP drops whole windows; CLIP moves them inside") {
        cft_array *x = cft_zeros(CFT_F64, (int64_t[]){2, 4}, 2);
        cft_scatter_dnums dn = {.update_window_dims = {1},
                                .n_update_window_dims = 1,
                                .inserted_window_dims = {0},
                                .n_inserted_window_dims = 1,
                                .scatter_dims_to_operand_dims = {0, 1},
                                .n_scatter_dims_to_operand_dims = 2,
                                .index_vector_dim = 1};
        cft_array *ix = mi((int32_t[]){0, 1, 1, 3, 5, 0}, 3, 2);
        cft_array *u = m64((double[]){1, 2, 3, 4, 5, 6}, 3, 2);
        cft_array *d = cft_scatter_add(x, ix, u, &dn, CFT_INDEX_FILL_OR_DROP);
        CHECK_ARRAY_CLOSE(d, m64((double[]){0, 1, 2, 0, 0, 0, 0, 0}, 2, 4), 0, 0);
        cft_array *c = cft_scatter_add(x, ix, u, &dn, CFT_INDEX_CLIP);
        CHECK_ARRAY_CLOSE(c, m64((double[]){0, 1, 2, 0, 5, 6, 3, 4}, 2, 4), 0, 0);
        cft_array *s = cft_scatter(cft_ones(CFT_F64, (int64_t[]){2, 4}, 2), ix, u, &dn,
                                   CFT_INDEX_FILL_OR_DROP);
        CHECK_ARRAY_CLOSE(s, m64((double[]){1, 1, 2, 1, 1, 1, 1, 1}, 2, 4), 0, 0);
    }
    TEST("dynamic_slice / dynamic_update_slice clamp the start like JAX") {
        cft_array *x = arange2(4, 5);
        cft_array *y = cft_dynamic_slice(x, vi((int32_t[]){3, -2}, 2), (int64_t[]){2, 2});
        CHECK_ARRAY_CLOSE(y, m64((double[]){10, 11, 15, 16}, 2, 2), 0, 0);
        cft_array *z =
            cft_dynamic_update_slice(cft_zeros(CFT_F64, (int64_t[]){3, 3}, 2),
                                     m64((double[]){1, 2, 3, 4}, 2, 2), vi((int32_t[]){9, 9}, 2));
        CHECK_ARRAY_CLOSE(z, m64((double[]){0, 0, 0, 0, 1, 2, 0, 3, 4}, 3, 3), 0, 0);
        int64_t st[2] = {1, 2};
        CHECK_ARRAY_CLOSE(
            cft_dynamic_slice(x, cft_from_data(st, CFT_I64, (int64_t[]){2}, 1), (int64_t[]){3, 3}),
            cft_slice(x, (int64_t[]){1, 2}, (int64_t[]){4, 5}, NULL), 0, 0);
    }
    TEST("extreme index values (INT32_MIN / INT32_MAX) do not crash") {
        cft_array *x = v64((double[]){1, 2, 3}, 3);
        cft_array *ix = vi((int32_t[]){INT32_MIN, INT32_MAX}, 2);
        CHECK_ARRAY_CLOSE(cft_take(x, ix, 0), v64((double[]){1, 3}, 2), 0, 0);
        CHECK_ARRAY_CLOSE(cft_at_add(x, ix, cft_scalar(1, CFT_F64), 0), x, 0, 0);
        CHECK_ARRAY_CLOSE(cft_dynamic_slice(x, vi((int32_t[]){INT32_MAX}, 1), (int64_t[]){2}),
                          v64((double[]){2, 3}, 2), 0, 0);
    }
}

static void error_tests(void) {
    cft_array *x = arange2(3, 4);
    TEST("errors name the call and the shapes") {
        cft_array *fi = v64((double[]){0, 1}, 2);
        CHECK(has_error(cft_take(x, fi, 0), CFT_E_DTYPE, "cft_take"));
        CHECK(has_error(cft_take(x, fi, 0), CFT_E_DTYPE, "f64[2]"));
        CHECK(has_error(cft_take(x, vi((int32_t[]){0}, 1), 2), CFT_E_ARG, "cft_take: axis 2"));
        CHECK(has_error(cft_take(x, cft_ones(CFT_BOOL, (int64_t[]){2}, 1), 0), CFT_E_DTYPE,
                        "cft_take"));
        CHECK(has_error(cft_take_along_axis(x, vi((int32_t[]){0}, 1), 0), CFT_E_SHAPE,
                        "cft_take_along_axis"));
        CHECK(has_error(cft_take_along_axis(x, mi((int32_t[]){0, 0}, 1, 2), 0), CFT_E_SHAPE,
                        "broadcast"));
        CHECK(has_error(cft_at_set(x, vi((int32_t[]){0, 1}, 2), m64((double[]){1, 2, 3}, 1, 3), 0),
                        CFT_E_SHAPE, "cft_at_set: values f64[1,3]"));
        CHECK(has_error(cft_at_add(x, fi, cft_scalar(1, CFT_F64), 0), CFT_E_DTYPE, "cft_at_add"));
        CHECK(has_error(cft_dynamic_slice(x, vi((int32_t[]){0}, 1), (int64_t[]){1, 1}), CFT_E_SHAPE,
                        "cft_dynamic_slice: start indices must be i32 or i64 of shape [2]"));
        CHECK(has_error(cft_dynamic_slice(x, vi((int32_t[]){0, 0}, 2), (int64_t[]){4, 1}),
                        CFT_E_SHAPE, "dynamic_slice: slice size 4"));
        CHECK(has_error(cft_dynamic_update_slice(x, arange2(4, 1), vi((int32_t[]){0, 0}, 2)),
                        CFT_E_SHAPE, "does not fit"));
    }
    TEST("bad dimension numbers are errors, not crashes") {
        cft_gather_dnums g = {.offset_dims = {1},
                              .n_offset_dims = 1,
                              .collapsed_slice_dims = {0},
                              .n_collapsed_slice_dims = 1,
                              .start_index_map = {0},
                              .n_start_index_map = 1,
                              .index_vector_dim = 1};
        cft_array *ix = mi((int32_t[]){0, 1}, 2, 1);
        CHECK(!cft_failed(cft_gather(x, ix, &g, (int64_t[]){1, 4}, CFT_INDEX_CLIP)));
        CHECK(has_error(cft_gather(x, ix, &g, (int64_t[]){2, 4}, CFT_INDEX_CLIP), CFT_E_SHAPE,
                        "collapsed"));
        CHECK(has_error(cft_gather(x, ix, &g, (int64_t[]){1, 5}, CFT_INDEX_CLIP), CFT_E_SHAPE,
                        "gather: slice size 5"));
        CHECK(has_error(cft_gather(x, ix, &g, (int64_t[]){1, 4}, (cft_index_mode)7), CFT_E_ARG,
                        "mode"));
        cft_gather_dnums b = g;
        b.offset_dims[0] = 5;
        CHECK(has_error(cft_gather(x, ix, &b, (int64_t[]){1, 4}, CFT_INDEX_CLIP), CFT_E_ARG,
                        "offset_dims"));
        b = g;
        b.n_start_index_map = 2, b.start_index_map[1] = 0;
        CHECK(has_error(cft_gather(x, ix, &b, (int64_t[]){1, 4}, CFT_INDEX_CLIP), CFT_E_ARG,
                        "start_index_map"));
        b = g;
        b.index_vector_dim = 3;
        CHECK(has_error(cft_gather(x, ix, &b, (int64_t[]){1, 4}, CFT_INDEX_CLIP), CFT_E_ARG,
                        "index_vector_dim"));
        b = g;
        b.n_offset_dims = 100;
        CHECK(has_error(cft_gather(x, ix, &b, (int64_t[]){1, 4}, CFT_INDEX_CLIP), CFT_E_ARG,
                        "cft_gather"));
        CHECK(has_error(cft_gather(x, ix, NULL, (int64_t[]){1, 4}, CFT_INDEX_CLIP), CFT_E_ARG,
                        "cft_gather"));
        cft_scatter_dnums s = {.update_window_dims = {1},
                               .n_update_window_dims = 1,
                               .inserted_window_dims = {0},
                               .n_inserted_window_dims = 1,
                               .scatter_dims_to_operand_dims = {0},
                               .n_scatter_dims_to_operand_dims = 1,
                               .index_vector_dim = 1};
        CHECK(!cft_failed(cft_scatter(x, ix, arange2(2, 4), &s, CFT_INDEX_CLIP)));
        CHECK(has_error(cft_scatter(x, ix, arange2(3, 4), &s, CFT_INDEX_CLIP), CFT_E_SHAPE,
                        "scatter: updates f64[3,4]"));
        CHECK(has_error(cft_scatter_add(x, ix, arange2(2, 5), &s, CFT_INDEX_CLIP), CFT_E_SHAPE,
                        "exceeds"));
    }
    TEST("error arrays pass through; NULL arguments are errors") {
        cft_array *e = cft_take(x, v64((double[]){0}, 1), 0);
        CHECK(cft_take(e, vi((int32_t[]){0}, 1), 0) == e);
        CHECK(cft_at_add(x, vi((int32_t[]){0}, 1), e, 0) == e);
        CHECK(has_error(cft_take(x, NULL, 0), CFT_E_ARG, "cft_take"));
        CHECK(has_error(cft_dynamic_slice(x, vi((int32_t[]){0, 0}, 2), NULL), CFT_E_ARG,
                        "cft_dynamic_slice"));
    }
}

/* vmap of f with the given in_axes against a loop over examples
 * (args[i] batched along axis 0 when in_axes[i] is 0) */
static void check_vmap_loop(cft_fn *f, cft_array *const *args, const int *axes, int nin,
                            int64_t nb) {
    cft_array *got = cft_fn_call1(cft_vmap(f, axes, NULL), args), *ys[16], *ex[4];
    for (int64_t k = 0; k < nb; k++) {
        for (int i = 0; i < nin; i++)
            ex[i] = axes[i] == CFT_NOT_BATCHED ? args[i] : cft_index(args[i], k);
        ys[k] = cft_fn_call1(f, ex);
    }
    CHECK_ARRAY_CLOSE(got, cft_stack(ys, (int)nb, 0), 0, 0);
}

static void vmap_tests(void) {
    const int NB = CFT_NOT_BATCHED;
    cft_fn *take = cft_fn_new(f_take0, NULL, 2, 1);
    cft_array *tab = randn(1, (int64_t[]){6, 3}, 2), *tabs = randn(2, (int64_t[]){4, 6, 3}, 3);
    cft_array *ids = randi(3, (int64_t[]){5}, 1, -8, 7),
              *idss = randi(4, (int64_t[]){4, 5}, 2, -8, 7);
    TEST("vmap take: batched indices only, one gather") {
        check_vmap_loop(take, (cft_array *[]){tab, idss}, (int[]){NB, 0}, 2, 4);
        cft_aval av[2] = {cft_array_aval(tab), cft_array_aval(idss)};
        CHECK_EQ(count_prim(cft_vmap(take, (int[]){NB, 0}, NULL), av, "gather"), 1);
    }
    TEST("vmap take: batched operand only, one gather") {
        check_vmap_loop(take, (cft_array *[]){tabs, ids}, (int[]){0, NB}, 2, 4);
        cft_aval av[2] = {cft_array_aval(tabs), cft_array_aval(ids)};
        CHECK_EQ(count_prim(cft_vmap(take, (int[]){0, NB}, NULL), av, "gather"), 1);
    }
    TEST("vmap take: both batched, one gather") {
        check_vmap_loop(take, (cft_array *[]){tabs, idss}, (int[]){0, 0}, 2, 4);
        cft_aval av[2] = {cft_array_aval(tabs), cft_array_aval(idss)};
        CHECK_EQ(count_prim(cft_vmap(take, (int[]){0, 0}, NULL), av, "gather"), 1);
    }
    TEST("vmap of vmap take, both batched at both levels") {
        cft_array *t2 = randn(5, (int64_t[]){2, 3, 6, 3}, 4),
                  *i2 = randi(6, (int64_t[]){2, 3, 5}, 3, -8, 7);
        cft_fn *vv = cft_vmap(cft_vmap(take, (int[]){0, 0}, NULL), (int[]){0, 0}, NULL);
        cft_array *got = cft_fn_call1(vv, (cft_array *[]){t2, i2}), *ys[6];
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 3; b++)
                ys[a * 3 + b] =
                    cft_take(cft_index(cft_index(t2, a), b), cft_index(cft_index(i2, a), b), 0);
        CHECK_ARRAY_CLOSE(got, cft_reshape(cft_stack(ys, 6, 0), (int64_t[]){2, 3, 5, 3}, 4), 0, 0);
        cft_aval av[2] = {cft_array_aval(t2), cft_array_aval(i2)};
        CHECK_EQ(count_prim(vv, av, "gather"), 1);
    }
    TEST("vmap take: batch dims not leading, empty batch") {
        cft_array *tb = cft_moveaxis(tabs, 0, 2), *ib = cft_moveaxis(idss, 0, 1);
        cft_array *got = cft_fn_call1(cft_vmap(take, (int[]){2, 1}, NULL), (cft_array *[]){tb, ib});
        CHECK_ARRAY_CLOSE(
            got, cft_fn_call1(cft_vmap(take, (int[]){0, 0}, NULL), (cft_array *[]){tabs, idss}), 0,
            0);
        cft_array *t0 = cft_zeros(CFT_F64, (int64_t[]){0, 6, 3}, 3),
                  *i0 = cft_zeros(CFT_I32, (int64_t[]){0, 5}, 2);
        cft_array *e = cft_fn_call1(cft_vmap(take, (int[]){0, 0}, NULL), (cft_array *[]){t0, i0});
        CHECK(!cft_failed(e));
        CHECK_EQ(cft_array_size(e), 0);
        CHECK_EQ(cft_array_ndim(e), 3);
    }
    cft_fn *add = cft_fn_new(f_at_add0, NULL, 3, 1), *set = cft_fn_new(f_at_set0, NULL, 3, 1);
    cft_array *upd = randn(7, (int64_t[]){5, 3}, 2), *upds = randn(8, (int64_t[]){4, 5, 3}, 3);
    TEST("vmap at_add / at_set: every mix of batched operand, indices, updates") {
        for (int mask = 1; mask < 8; mask++) {
            int ax[3] = {mask & 1 ? 0 : NB, mask & 2 ? 0 : NB, mask & 4 ? 0 : NB};
            cft_array *args[3] = {mask & 1 ? tabs : tab, mask & 2 ? idss : ids,
                                  mask & 4 ? upds : upd};
            check_vmap_loop(add, args, ax, 3, 4);
            check_vmap_loop(set, args, ax, 3, 4);
            cft_aval av[3] = {cft_array_aval(args[0]), cft_array_aval(args[1]),
                              cft_array_aval(args[2])};
            CHECK_EQ(count_prim(cft_vmap(add, ax, NULL), av, "scatter_add"), 1);
            CHECK_EQ(count_prim(cft_vmap(set, ax, NULL), av, "scatter"), 1);
        }
    }
    TEST("vmap dynamic_slice / dynamic_update_slice with batched starts (gather / scatter)") {
        cft_fn *ds = cft_fn_new(f_dyn_slice, NULL, 2, 1),
               *dus = cft_fn_new(f_dyn_update, NULL, 3, 1);
        cft_array *x = randn(9, (int64_t[]){4, 5}, 2), *xs = randn(10, (int64_t[]){4, 4, 5}, 3);
        cft_array *st = vi((int32_t[]){1, 4}, 2), *sts = randi(11, (int64_t[]){4, 2}, 2, -2, 6);
        cft_array *u = randn(12, (int64_t[]){2, 2}, 2), *us = randn(13, (int64_t[]){4, 2, 2}, 3);
        check_vmap_loop(ds, (cft_array *[]){x, sts}, (int[]){NB, 0}, 2, 4);
        check_vmap_loop(ds, (cft_array *[]){xs, st}, (int[]){0, NB}, 2, 4);
        check_vmap_loop(ds, (cft_array *[]){xs, sts}, (int[]){0, 0}, 2, 4);
        cft_aval av[3] = {cft_array_aval(xs), cft_array_aval(sts)};
        CHECK_EQ(count_prim(cft_vmap(ds, (int[]){0, 0}, NULL), av, "gather"), 1);
        for (int mask = 1; mask < 8; mask++) {
            int ax[3] = {mask & 1 ? 0 : NB, mask & 2 ? 0 : NB, mask & 4 ? 0 : NB};
            check_vmap_loop(
                dus, (cft_array *[]){mask & 1 ? xs : x, mask & 2 ? us : u, mask & 4 ? sts : st}, ax,
                3, 4);
        }
    }
}

static void grad_tests(void) {
    cft_fn *f = cft_fn_new(f_embed_loss, NULL, 3, 1);
    cft_array *tab = randn(21, (int64_t[]){5, 4}, 2), *w = randn(22, (int64_t[]){6, 4}, 2);
    cft_array *ids = vi((int32_t[]){1, 3, 1, -1, 9, 1}, 6); /* repeats, negative, clamped */
    TEST("grad of an embedding lookup vs finite differences (repeated and clamped ids)") {
        cft_array *g = cft_fn_call1(cft_grad(f, NULL, 0), (cft_array *[]){tab, ids, w});
        CHECK_ARRAY_CLOSE(g, fd_grad(f, (cft_array *[]){tab, ids, w}, 3), 1e-7, 1e-8);
        /* row 0 and row 2 are never read */
        CHECK_ARRAY_CLOSE(cft_index(g, 0), cft_zeros(CFT_F64, (int64_t[]){4}, 1), 0, 0);
        CHECK_ARRAY_CLOSE(cft_index(g, 2), cft_zeros(CFT_F64, (int64_t[]){4}, 1), 0, 0);
    }
    TEST("grad of take under jit, and jacfwd = jacrev") {
        cft_array *g = cft_fn_call1(cft_grad(f, NULL, 0), (cft_array *[]){tab, ids, w});
        cft_fn *jg = cft_jit(cft_grad(f, NULL, 0));
        for (int call = 0; call < 2; call++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(jg, (cft_array *[]){tab, ids, w}), g, 1e-12, 1e-12);
        cft_fn *take = cft_fn_new(f_take0, NULL, 2, 1);
        cft_array *jr = cft_fn_call1(cft_jacrev(take, NULL, 0), (cft_array *[]){tab, ids});
        cft_array *jf = cft_fn_call1(cft_jacfwd(take, NULL, 0), (cft_array *[]){tab, ids});
        CHECK_ARRAY_CLOSE(jr, jf, 0, 0);
    }
    TEST("per-example gradients: vmap(grad) over batched ids vs a loop") {
        cft_array *idb = randi(23, (int64_t[]){3, 6}, 2, -6, 6),
                  *ws = randn(24, (int64_t[]){3, 6, 4}, 3);
        check_vmap_loop(cft_grad(f, NULL, 0), (cft_array *[]){tab, idb, ws},
                        (int[]){CFT_NOT_BATCHED, 0, 0}, 3, 3);
    }
    TEST("grad through at_set with a repeated index: only the winner gets a gradient") {
        cft_fn *g = cft_grad(cft_fn_new(f_set_loss, NULL, 4, 1), (int[]){0, 2}, 2);
        cft_array *x = v64((double[]){1, 2, 3, 4}, 4), *wv = v64((double[]){10, 20, 30, 40}, 4);
        cft_array *ix = vi((int32_t[]){1, 1, 3, 8}, 4), *v = v64((double[]){5, 6, 7, 8}, 4), *o[2];
        CHECK_EQ(cft_fn_call(g, (cft_array *[]){x, ix, v, wv}, o), CFT_OK);
        CHECK_ARRAY_CLOSE(o[0], v64((double[]){10, 0, 30, 0}, 4), 0, 0);
        CHECK_ARRAY_CLOSE(o[1], v64((double[]){0, 20, 40, 0}, 4), 0, 0);
    }
    TEST("grad of take_along_axis vs finite differences; hessian is diagonal") {
        cft_fn *fa = cft_fn_new(f_along_loss, NULL, 2, 1);
        cft_array *x = randn(25, (int64_t[]){3, 4}, 2),
                  *ix = mi((int32_t[]){0, 0, 3, -1, 2, 7}, 3, 2);
        cft_array *g = cft_fn_call1(cft_grad(fa, NULL, 0), (cft_array *[]){x, ix});
        CHECK_ARRAY_CLOSE(g, fd_grad(fa, (cft_array *[]){x, ix}, 2), 1e-7, 1e-8);
        cft_array *h = cft_fn_call1(cft_hessian(fa, 0), (cft_array *[]){x, ix});
        CHECK_EQ(cft_array_ndim(h), 4);
        double hv[144];
        cft_copy_to(h, CFT_F64, hv);
        double off = 0;
        for (int i = 0; i < 12; i++)
            for (int j = 0; j < 12; j++)
                if (i != j)
                    off += fabs(hv[i * 12 + j]);
        CHECK_CLOSE(off, 0, 0, 0);
        /* element (0, 0) is read twice: d2/dx2 of 2 sin(x) */
        CHECK_CLOSE(hv[0], -2 * sin(cft_item_at(x, 0)), 1e-12, 1e-12);
    }
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    convenience_tests();
    mode_tests();
    error_tests();
    vmap_tests();
    grad_tests();
    return check_summary();
}
