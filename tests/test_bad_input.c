/* test_bad_input.c: the bad-input table. Each row is one bad call of the
 * public API (wrong shapes, dtypes, axes, counts, sizes that overflow,
 * NULLs, reading a tracer's value, ...), run in a forked child with a time
 * limit. Every row must come back with an error that names the public call
 * (an error array, a failed status with cft_last_error set, an error
 * function or tree, or NaN with cft_last_error set); none may crash,
 * abort, hang, return NULL or return a value. The table is data: add a row
 * per new call. Run with a row number to run just that row in-process
 * (for a debugger). */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cft/cft.h"
#include "check.h"

typedef enum { ARR, ST, FN, TREE, NUM, FNCALL } kind;
typedef struct {
    kind k;
    const char *name; /* the public call the error must name */
    cft_array *a;
    cft_status s;
    cft_fn *f;
    cft_tree *t;
    double d;
} result;

/* shared inputs, made before forking */
static cft_array *m23, *m33, *v3, *v2, *sc, *i3, *b3, *i64s, *key, *c3, *big0, *t4;
static cft_array *o1[4], *o2[4], *o3[4];
static cft_fn *sq, *two, *bad_cb;
static cft_tree *tr;
static int64_t huge = (int64_t)1 << 61;

static cft_status sq_cb(void *e, int n, cft_array *const *in, int no, cft_array **out) {
    (void)e, (void)n, (void)no;
    out[0] = cft_sum(cft_square(in[0]), NULL, 0, false);
    return CFT_OK;
}
static cft_status two_cb(void *e, int n, cft_array *const *in, int no, cft_array **out) {
    (void)e, (void)n, (void)no;
    out[0] = in[0], out[1] = in[0];
    return CFT_OK;
}
/* reads a tracer's value: a concretization error */
static cft_status item_cb(void *e, int n, cft_array *const *in, int no, cft_array **out) {
    (void)e, (void)n, (void)no;
    double v = cft_item(cft_sum(in[0], NULL, 0, false));
    out[0] = v > 0 ? cft_exp(in[0]) : cft_neg(in[0]);
    return CFT_OK;
}
static cft_status copy_cb(void *e, int n, cft_array *const *in, int no, cft_array **out) {
    (void)e, (void)n, (void)no;
    float buf[16];
    cft_copy_to(in[0], CFT_F32, buf);
    out[0] = in[0];
    return CFT_OK;
}
static cft_status itemat_cb(void *e, int n, cft_array *const *in, int no, cft_array **out) {
    (void)e, (void)n, (void)no;
    out[0] = cft_add_s(in[0], cft_item_at(in[0], 1));
    return CFT_OK;
}

static cft_status print_cb(void *e, int n, cft_array *const *in, int no, cft_array **out) {
    (void)e, (void)n, (void)no;
    FILE *f = fopen("/dev/null", "w");
    cft_print(in[0], f);
    fclose(f);
    out[0] = in[0];
    return CFT_OK;
}

static cft_array *call1(cft_fn *f, cft_array *x) {
    return cft_fn_call1(f, (cft_array *[]){x});
}

static const int AX00[2] = {0, 0}, AX5[1] = {5}, AXN3[1] = {-3}, PERM_BAD[2] = {0, 0};
static const int64_t SH_NEG[2] = {2, -1}, SH_61[1] = {(int64_t)1 << 61},
                     SH_32[2] = {(int64_t)1 << 32, (int64_t)1 << 32},
                     SH_0_32[3] = {0, (int64_t)1 << 32, (int64_t)1 << 32}, SH_7[1] = {7},
                     SH_40[1] = {(int64_t)1 << 40};

static cft_array *zip_first(void *env, const char *name, cft_array *a, cft_array *b) {
    (void)env, (void)name, (void)b;
    return a;
}
static cft_array *map_n_first(void *env, const char *name, cft_array *const *xs, int n) {
    (void)env, (void)name, (void)n;
    return xs[0];
}
static void noop(void *arg) {
    (void)arg;
}
static cft_measurement meas;
static cft_ir *irp;
static cft_aval av_f32_3 = {CFT_F32, 1, {3}};
/* labels for 2 examples of 3 classes, one out of range */
static cft_array *lab_hi, *lab_neg, *nan33, *inf33;
static char bad_file[64];

enum { BASE = __COUNTER__ + 1 };
#define R(K, NAME, EXPR)                                                                           \
    case __COUNTER__ - BASE:                                                                       \
        r->k = K, r->name = NAME;                                                                  \
        set_##K(r, (EXPR));                                                                        \
        return;
static void set_ARR(result *r, cft_array *a) {
    r->a = a;
}
static void set_ST(result *r, cft_status s) {
    r->s = s;
}
static void set_FN(result *r, cft_fn *f) {
    r->f = f;
}
static void set_FNCALL(result *r, cft_array *a) {
    r->a = a;
}
static void set_TREE(result *r, cft_tree *t) {
    r->t = t;
}
static void set_NUM(result *r, double d) {
    r->d = d;
}

static void row(int i, result *r) {
    switch (i) {
        /* ---- constructors and sizes ---- */
        R(ARR, "cft_from_data", cft_from_data(NULL, CFT_F32, (int64_t[]){3}, 1))
        R(ARR, "cft_from_data", cft_from_data("x", CFT_F32, SH_NEG, 2))
        R(ARR, "cft_from_data", cft_from_data("x", (cft_dtype)200, (int64_t[]){1}, 1))
        R(ARR, "cft_from_data", cft_from_data("x", CFT_F32, SH_61, 1))
        R(ARR, "cft_from_data", cft_from_data("x", CFT_F32, SH_32, 2))
        R(ARR, "cft_from_data", cft_from_data("x", CFT_F32, SH_0_32, 3))
        R(ARR, "cft_from_data", cft_from_data("x", CFT_F32, NULL, 2))
        R(ARR, "cft_from_data", cft_from_data("x", CFT_F32, (int64_t[]){1}, 9))
        R(ARR, "cft_from_data", cft_from_data("x", CFT_F32, (int64_t[]){1}, -1))
        R(ARR, "cft_from_f32", cft_from_f32(NULL, (int64_t[]){2}, 1))
        R(ARR, "cft_from_f64", cft_from_f64(NULL, (int64_t[]){2}, 1))
        R(ARR, "cft_from_i32", cft_from_i32(NULL, (int64_t[]){2}, 1))
        R(ARR, "cft_full", cft_full(1, CFT_F32, SH_32, 2))
        R(ARR, "cft_full", cft_full(1, CFT_F32, SH_40, 1))
        R(ARR, "cft_full", cft_full(1, (cft_dtype)99, SH_7, 1))
        R(ARR, "cft_zeros", cft_zeros(CFT_F32, SH_NEG, 2))
        R(ARR, "cft_zeros", cft_zeros(CFT_F64, SH_0_32, 3))
        R(ARR, "cft_ones", cft_ones(CFT_F32, SH_61, 1))
        R(ARR, "cft_scalar", cft_scalar(1, (cft_dtype)-1))
        R(ARR, "cft_zeros_like", cft_zeros_like(NULL))
        R(ARR, "cft_ones_like", cft_ones_like(NULL))
        R(ARR, "cft_full_like", cft_full_like(NULL, 2))
        R(ARR, "cft_arange", cft_arange(0, 1, 0, CFT_F32))
        R(ARR, "cft_arange", cft_arange(0, (double)huge, 1, CFT_F32))
        R(ARR, "cft_arange", cft_arange(0, 1e300, 1e-300, CFT_F64))
        R(ARR, "cft_arange", cft_arange(NAN, 1, 1, CFT_F32))
        R(ARR, "cft_arange", cft_arange(0, 10, 1, (cft_dtype)42))
        R(ARR, "cft_linspace", cft_linspace(0, 1, huge, CFT_F32))
        R(ARR, "cft_linspace", cft_linspace(0, 1, -2, CFT_F32))
        R(ARR, "cft_linspace", cft_linspace(0, 1, 4, (cft_dtype)42))
        R(ARR, "cft_eye", cft_eye((int64_t)1 << 32, CFT_F32))
        R(ARR, "cft_eye", cft_eye(-3, CFT_F32))
        R(ARR, "cft_iota", cft_iota(CFT_I32, (int64_t[]){3}, 1, 2))
        R(ARR, "cft_iota", cft_iota(CFT_I32, SH_32, 2, 0))
        R(ST, "cft_copy_to", cft_copy_to(m23, (cft_dtype)77, (float[6]){0}))
        R(ST, "cft_copy_to", cft_copy_to(m23, CFT_F32, NULL))
        R(NUM, "cft_item", cft_item(m23))
        R(NUM, "cft_item_at", cft_item_at(v3, 3))
        R(NUM, "cft_item_at", cft_item_at(v3, -1))
        R(NUM, "cft_item", cft_item(NULL))
        /* ---- reading a traced value fails the traced call ---- */
        R(FNCALL, "cft_item", call1(cft_fn_new(item_cb, NULL, 1, 1), v3))
        R(FNCALL, "cft_item", call1(cft_grad(cft_fn_new(item_cb, NULL, 1, 1), NULL, 0), v3))
        R(FNCALL, "cft_item", call1(cft_vmap(cft_fn_new(item_cb, NULL, 1, 1), NULL, NULL), m23))
        R(FNCALL, "cft_item", call1(cft_jit(cft_fn_new(item_cb, NULL, 1, 1)), v3))
        R(FNCALL, "cft_copy_to", call1(cft_fn_new(copy_cb, NULL, 1, 1), v3))
        R(FNCALL, "cft_item_at", call1(cft_fn_new(itemat_cb, NULL, 1, 1), v3))
        R(FNCALL, "cft_print", call1(cft_vmap(cft_fn_new(print_cb, NULL, 1, 1), NULL, NULL), m23))
        /* ---- elementwise: dtypes and broadcasting ---- */
        R(ARR, "cft_add", cft_add(m23, m33))
        R(ARR, "cft_add", cft_add(m23, NULL))
        R(ARR, "cft_add", cft_add(NULL, m23))
        R(ARR, "cft_sub", cft_sub(m23, v2))
        R(ARR, "cft_mul", cft_mul(v3, v2))
        R(ARR, "cft_div", cft_div(m33, m23))
        R(ARR, "cft_pow", cft_pow(m23, v2))
        R(ARR, "cft_maximum", cft_maximum(m23, m33))
        R(ARR, "cft_minimum", cft_minimum(m23, m33))
        R(ARR, "cft_atan2", cft_atan2(m23, m33))
        R(ARR, "cft_eq", cft_eq(m23, v2))
        R(ARR, "cft_ne", cft_ne(m23, v2))
        R(ARR, "cft_lt", cft_lt(m23, v2))
        R(ARR, "cft_le", cft_le(m23, v2))
        R(ARR, "cft_gt", cft_gt(m23, v2))
        R(ARR, "cft_ge", cft_ge(m23, v2))
        R(ARR, "cft_logical_and", cft_logical_and(b3, m23))
        R(ARR, "cft_logical_or", cft_logical_or(b3, v2))
        R(ARR, "cft_logical_not", cft_logical_not(NULL))
        R(ARR, "cft_rem", cft_rem(m23, v2))
        R(ARR, "cft_nextafter", cft_nextafter(i3, i3))
        R(ARR, "cft_bitwise_and", cft_bitwise_and(v3, v3))
        R(ARR, "cft_bitwise_or", cft_bitwise_or(v3, i3))
        R(ARR, "cft_bitwise_xor", cft_bitwise_xor(m23, m23))
        R(ARR, "cft_bitwise_not", cft_bitwise_not(v3))
        R(ARR, "cft_shift_left", cft_shift_left(v3, v3))
        R(ARR, "cft_shift_right_logical", cft_shift_right_logical(v3, i3))
        R(ARR, "cft_shift_right_arithmetic", cft_shift_right_arithmetic(i3, v2))
        R(ARR, "cft_population_count", cft_population_count(v3))
        R(ARR, "cft_integer_pow", cft_integer_pow(NULL, 2))
        R(ARR, "cft_clamp", cft_clamp(m23, m33, v3))
        R(ARR, "cft_clamp", cft_clamp(m23, NULL, v3))
        R(ARR, "cft_where", cft_where(v3, v3, v3))
        R(ARR, "cft_where", cft_where(b3, m33, v2))
        R(ARR, "cft_where", cft_where(NULL, v3, v3))
        R(ARR, "cft_astype", cft_astype(v3, (cft_dtype)55))
        R(ARR, "cft_astype", cft_astype(NULL, CFT_F32))
        R(ARR, "cft_add_s", cft_add_s(NULL, 1))
        R(ARR, "cft_mul_s", cft_mul_s(NULL, 1))
        R(ARR, "cft_neg", cft_neg(NULL))
        R(ARR, "cft_exp", cft_exp(NULL))
        R(ARR, "cft_log", cft_log(b3))
        R(ARR, "cft_log1p", cft_log1p(NULL))
        R(ARR, "cft_expm1", cft_expm1(NULL))
        R(ARR, "cft_sin", cft_sin(NULL))
        R(ARR, "cft_cos", cft_cos(NULL))
        R(ARR, "cft_tan", cft_tan(NULL))
        R(ARR, "cft_tanh", cft_tanh(NULL))
        R(ARR, "cft_logistic", cft_logistic(NULL))
        R(ARR, "cft_sqrt", cft_sqrt(NULL))
        R(ARR, "cft_rsqrt", cft_rsqrt(NULL))
        R(ARR, "cft_abs", cft_abs(NULL))
        R(ARR, "cft_sign", cft_sign(NULL))
        R(ARR, "cft_floor", cft_floor(c3))
        R(ARR, "cft_ceil", cft_ceil(c3))
        R(ARR, "cft_round", cft_round(c3))
        R(ARR, "cft_erf", cft_erf(NULL))
        R(ARR, "cft_square", cft_square(NULL))
        R(ARR, "cft_reciprocal", cft_reciprocal(NULL))
        R(ARR, "cft_is_finite", cft_is_finite(NULL))
        /* ---- shapes ---- */
        R(ARR, "cft_reshape", cft_reshape(m23, (int64_t[]){4}, 1))
        R(ARR, "cft_reshape", cft_reshape(m23, (int64_t[]){-1, -1}, 2))
        R(ARR, "cft_reshape", cft_reshape(m23, NULL, 2))
        R(ARR, "cft_reshape", cft_reshape(big0, SH_0_32, 3))
        R(ARR, "cft_reshape", cft_reshape(m23, (int64_t[]){2, 3}, 12))
        R(ARR, "cft_broadcast_to", cft_broadcast_to(m23, (int64_t[]){4, 3}, 2))
        R(ARR, "cft_broadcast_to", cft_broadcast_to(v3, SH_32, 2))
        R(ARR, "cft_broadcast_to", cft_broadcast_to(v3, NULL, 2))
        R(ARR, "cft_broadcast_in_dim", cft_broadcast_in_dim(v3, (int64_t[]){3, 2}, 2, (int[]){1}))
        R(ARR, "cft_broadcast_in_dim", cft_broadcast_in_dim(v3, (int64_t[]){3, 2}, 2, (int[]){7}))
        R(ARR, "cft_transpose", cft_transpose(m23, PERM_BAD))
        R(ARR, "cft_transpose", cft_transpose(m23, (int[]){0, 5}))
        R(ARR, "cft_moveaxis", cft_moveaxis(m23, 0, 4))
        R(ARR, "cft_moveaxis", cft_moveaxis(m23, -5, 0))
        R(ARR, "cft_squeeze", cft_squeeze(m23, (int[]){0}, 1))
        R(ARR, "cft_squeeze", cft_squeeze(m23, (int[]){9}, 1))
        R(ARR, "cft_expand_dims", cft_expand_dims(m23, 5))
        R(ARR, "cft_expand_dims", cft_expand_dims(t4, 0) /* past 8 dims below */)
        R(ARR, "cft_slice", cft_slice(v3, (int64_t[]){2}, (int64_t[]){1}, NULL))
        R(ARR, "cft_slice", cft_slice(v3, (int64_t[]){0}, (int64_t[]){5}, NULL))
        R(ARR, "cft_slice", cft_slice(v3, (int64_t[]){0}, (int64_t[]){3}, (int64_t[]){0}))
        R(ARR, "cft_slice", cft_slice(v3, NULL, (int64_t[]){3}, NULL))
        R(ARR, "cft_index", cft_index(v3, 3))
        R(ARR, "cft_index", cft_index(sc, 0))
        R(ARR, "cft_pad", cft_pad(v3, v3, (int64_t[]){1}, (int64_t[]){1}, NULL))
        R(ARR, "cft_pad", cft_pad(v3, sc, (int64_t[]){-5}, (int64_t[]){0}, NULL))
        R(ARR, "cft_pad", cft_pad(v3, sc, (int64_t[]){0}, (int64_t[]){0}, (int64_t[]){-1}))
        R(ARR, "cft_pad", cft_pad(v3, sc, (int64_t[]){0}, SH_61, NULL))
        R(ARR, "cft_concatenate", cft_concatenate((cft_array *[]){m23, v3}, 2, 0))
        R(ARR, "cft_concatenate", cft_concatenate((cft_array *[]){m23, m33}, 2, 1))
        R(ARR, "cft_concatenate", cft_concatenate((cft_array *[]){m23, m23}, 2, 3))
        R(ARR, "cft_concatenate", cft_concatenate(NULL, 2, 0))
        R(ARR, "cft_concatenate", cft_concatenate((cft_array *[]){m23}, 0, 0))
        R(ARR, "cft_concatenate", cft_concatenate((cft_array *[]){m23, NULL}, 2, 0))
        R(ARR, "cft_stack", cft_stack((cft_array *[]){m23, m33}, 2, 0))
        R(ARR, "cft_stack", cft_stack((cft_array *[]){v3, v3}, 2, 4))
        R(ARR, "cft_stack", cft_stack((cft_array *[]){v3}, -1, 0))
        R(ARR, "cft_stop_gradient", cft_stop_gradient(NULL))
        R(ARR, "cft_flip", cft_flip(m23, AX00, 2))
        R(ARR, "cft_flip", cft_flip(m23, AX5, 1))
        /* ---- indexing ---- */
        R(ARR, "cft_take", cft_take(v3, v3, 0))
        R(ARR, "cft_take", cft_take(v3, i3, 3))
        R(ARR, "cft_take", cft_take(NULL, i3, 0))
        R(ARR, "cft_take_along_axis", cft_take_along_axis(m23, i3, 0))
        R(ARR, "cft_take_along_axis", cft_take_along_axis(m23, m23, 0))
        R(ARR, "cft_at_set", cft_at_set(v3, v3, v3, 0))
        R(ARR, "cft_at_set", cft_at_set(v3, i3, m33, 0))
        R(ARR, "cft_at_add", cft_at_add(v3, i3, v3, 4))
        R(ARR, "cft_at_add", cft_at_add(v3, NULL, v3, 0))
        R(ARR, "cft_dynamic_slice", cft_dynamic_slice(m23, v2, (int64_t[]){1, 1}))
        R(ARR, "cft_dynamic_slice", cft_dynamic_slice(m23, i3, (int64_t[]){1, 1}))
        R(ARR, "cft_dynamic_slice",
          cft_dynamic_slice(m23, cft_from_i32((int32_t[]){0, 0}, (int64_t[]){2}, 1),
                            (int64_t[]){5, 1}))
        R(ARR, "cft_dynamic_slice",
          cft_dynamic_slice(m23, cft_from_i32((int32_t[]){0, 0}, (int64_t[]){2}, 1), NULL))
        R(ARR, "cft_dynamic_update_slice",
          cft_dynamic_update_slice(m23, m33, cft_from_i32((int32_t[]){0, 0}, (int64_t[]){2}, 1)))
        R(ARR, "cft_dynamic_update_slice", cft_dynamic_update_slice(m23, m23, v2))
        R(ARR, "cft_gather", cft_gather(m23, i3, NULL, (int64_t[]){1, 1}, CFT_INDEX_CLIP))
        R(ARR, "cft_gather",
          cft_gather(m23, v3, &(cft_gather_dnums){.n_offset_dims = 0, .index_vector_dim = 1},
                     (int64_t[]){1, 1}, CFT_INDEX_CLIP))
        R(ARR, "cft_gather",
          cft_gather(m23, i3, &(cft_gather_dnums){.n_offset_dims = 9}, (int64_t[]){1, 1},
                     CFT_INDEX_CLIP))
        R(ARR, "cft_scatter", cft_scatter(m23, i3, NULL, NULL, CFT_INDEX_CLIP))
        R(ARR, "cft_scatter_add",
          cft_scatter_add(m23, v3, m23, &(cft_scatter_dnums){.n_update_window_dims = 9},
                          CFT_INDEX_CLIP))
        /* ---- reductions ---- */
        R(ARR, "cft_sum", cft_sum(m23, AX00, 2, false))
        R(ARR, "cft_sum", cft_sum(m23, AX00, -1, false))
        R(ARR, "cft_sum", cft_sum(m23, AX5, 1, false))
        R(ARR, "cft_sum", cft_sum(m23, AXN3, 1, false))
        R(ARR, "cft_sum", cft_sum(m23, NULL, 2, false))
        R(ARR, "cft_sum", cft_sum(m23, AX00, 9, false))
        R(ARR, "cft_sum", cft_sum(NULL, NULL, 0, false))
        R(ARR, "cft_prod", cft_prod(m23, AX00, 2, false))
        R(ARR, "cft_prod", cft_prod(m23, AX5, 1, true))
        R(ARR, "cft_max", cft_max(m23, AX00, 2, false))
        R(ARR, "cft_max", cft_max(c3, NULL, 0, false))
        R(ARR, "cft_min", cft_min(m23, AX5, 1, false))
        R(ARR, "cft_mean", cft_mean(m23, AX00, 2, false))
        R(ARR, "cft_mean", cft_mean(m23, AX5, 1, false))
        R(ARR, "cft_mean", cft_mean(m23, AX00, -2, false))
        R(ARR, "cft_var", cft_var(m23, NULL, 0, 6, false))
        R(ARR, "cft_var", cft_var(m23, (int[]){1}, 1, 3, false))
        R(ARR, "cft_var", cft_var(m23, NULL, 0, -1, false))
        R(ARR, "cft_var", cft_var(m23, AX00, 2, 0, false))
        R(ARR, "cft_argmax", cft_argmax(m23, 2, false))
        R(ARR, "cft_argmax", cft_argmax(big0, 0, false))
        R(ARR, "cft_argmin", cft_argmin(m23, -3, false))
        R(ARR, "cft_logsumexp", cft_logsumexp(m23, AX00, 2, false))
        R(ARR, "cft_logsumexp", cft_logsumexp(m23, AX5, 1, false))
        R(ARR, "cft_cumsum", cft_cumsum(m23, 2, false))
        R(ARR, "cft_cumprod", cft_cumprod(m23, -3, false))
        R(ARR, "cft_cummax", cft_cummax(m23, 7, false))
        R(ARR, "cft_cummin", cft_cummin(c3, 0, false))
        R(ARR, "cft_cumlogsumexp", cft_cumlogsumexp(m23, 2, true))
        R(ARR, "cft_sort", cft_sort(m23, 2, false))
        R(ARR, "cft_sort", cft_sort(c3, 0, false))
        R(ARR, "cft_argsort", cft_argsort(m23, -4, false))
        R(ST, "cft_sort_multi", cft_sort_multi((cft_array *[]){m23, v3}, 2, 0, false, o2))
        R(ST, "cft_sort_multi", cft_sort_multi(NULL, 2, 0, false, o2))
        R(ST, "cft_sort_multi", cft_sort_multi((cft_array *[]){m23}, 1, 5, false, o2))
        R(ST, "cft_top_k", cft_top_k(v3, 4, &o1[0], &o1[1]))
        R(ST, "cft_top_k", cft_top_k(v3, -1, &o1[0], &o1[1]))
        R(ST, "cft_top_k", cft_top_k(sc, 1, &o1[0], &o1[1]))
        R(ST, "cft_top_k",
          cft_top_k(m23, 0, &o1[0], NULL) == CFT_OK ? cft_top_k(c3, 1, &o1[0], &o1[1]) : CFT_OK)
        /* ---- contractions ---- */
        R(ARR, "cft_matmul", cft_matmul(m23, m23))
        R(ARR, "cft_matmul", cft_matmul(sc, m23))
        R(ARR, "cft_matmul", cft_matmul(m23, NULL))
        R(ARR, "cft_matmul", cft_matmul(m23, v2))
        R(ARR, "cft_dot_general",
          cft_dot_general(m23, m23, (int[]){0}, (int[]){1}, 1, NULL, NULL, 0))
        R(ARR, "cft_dot_general",
          cft_dot_general(m23, m23, (int[]){5}, (int[]){1}, 1, NULL, NULL, 0))
        R(ARR, "cft_dot_general", cft_dot_general(m23, m23, NULL, NULL, 1, NULL, NULL, 0))
        R(ARR, "cft_dot_general",
          cft_dot_general(m23, m33, (int[]){0, 0}, (int[]){0, 1}, 2, NULL, NULL, 0))
        R(ARR, "cft_conv2d", cft_conv2d(m23, m23, NULL, NULL, NULL, 1))
        R(ARR, "cft_conv2d", cft_conv2d(t4, t4, (int64_t[]){0, 1}, NULL, NULL, 1))
        R(ARR, "cft_conv2d", cft_conv2d(t4, t4, NULL, NULL, NULL, 0))
        R(ARR, "cft_conv2d", cft_conv2d(t4, t4, NULL, NULL, NULL, 7))
        R(ARR, "cft_conv2d", cft_conv2d(t4, t4, NULL, (int64_t[]){-4, -4}, NULL, 1))
        R(ARR, "cft_conv_general_dilated",
          cft_conv_general_dilated(m23, m23, NULL, NULL, NULL, NULL, 1, 1))
        R(ARR, "cft_max_pool2d", cft_max_pool2d(t4, (int64_t[]){0, 1}, NULL, NULL, NULL))
        R(ARR, "cft_max_pool2d", cft_max_pool2d(v3, (int64_t[]){1, 1}, NULL, NULL, NULL))
        R(ARR, "cft_max_pool2d", cft_max_pool2d(t4, NULL, NULL, NULL, NULL))
        R(ARR, "cft_avg_pool2d", cft_avg_pool2d(t4, (int64_t[]){9, 9}, NULL, NULL, false))
        R(ARR, "cft_avg_pool2d", cft_avg_pool2d(m23, (int64_t[]){1, 1}, NULL, NULL, false))
        R(ARR, "cft_reduce_window_sum", cft_reduce_window_sum(v3, (int64_t[]){0}, NULL, NULL, NULL))
        R(ARR, "cft_reduce_window_max", cft_reduce_window_max(v3, NULL, NULL, NULL, NULL))
        R(ST, "cft_conv_padding",
          cft_conv_padding((cft_pad_mode)9, 1, (int64_t[]){3}, (int64_t[]){1}, (int64_t[]){1}, NULL,
                           (int64_t[2]){0}))
        R(ST, "cft_conv_padding",
          cft_conv_padding(CFT_PAD_SAME, 1, (int64_t[]){3}, (int64_t[]){1}, (int64_t[]){0}, NULL,
                           (int64_t[2]){0}))
        /* ---- composites ---- */
        R(ARR, "cft_relu", cft_relu(NULL))
        R(ARR, "cft_gelu", cft_gelu(b3, false))
        R(ARR, "cft_softmax", cft_softmax(m23, 2))
        R(ARR, "cft_softmax", cft_softmax(i3, 0))
        R(ARR, "cft_log_softmax", cft_log_softmax(m23, -3))
        R(ARR, "cft_one_hot", cft_one_hot(v3, 3, CFT_F32))
        R(ARR, "cft_one_hot", cft_one_hot(i3, -1, CFT_F32))
        R(ARR, "cft_one_hot", cft_one_hot(i3, huge, CFT_F32))
        R(ARR, "cft_cross_entropy", cft_cross_entropy(m23, v3))
        R(ARR, "cft_cross_entropy", cft_cross_entropy(m23, i3))
        R(ARR, "cft_mse", cft_mse(m23, m33))
        /* ---- random ---- */
        R(ARR, "cft_random_split", cft_random_split(v3, 2))
        R(ARR, "cft_random_split", cft_random_split(key, -1))
        R(ARR, "cft_random_split", cft_random_split(key, huge))
        R(ARR, "cft_random_fold_in", cft_random_fold_in(m23, 1))
        R(ARR, "cft_random_uniform", cft_random_uniform(key, CFT_I32, SH_7, 1, 0, 1))
        R(ARR, "cft_random_uniform", cft_random_uniform(key, CFT_F32, SH_7, 1, 1, 0))
        R(ARR, "cft_random_uniform", cft_random_uniform(key, CFT_F32, SH_32, 2, 0, 1))
        R(ARR, "cft_random_uniform", cft_random_uniform(v3, CFT_F32, SH_7, 1, 0, 1))
        R(ARR, "cft_random_normal", cft_random_normal(key, CFT_BOOL, SH_7, 1))
        R(ARR, "cft_random_normal", cft_random_normal(NULL, CFT_F32, SH_7, 1))
        R(ARR, "cft_random_normal", cft_random_normal(key, CFT_F32, SH_NEG, 2))
        R(ARR, "cft_random_bernoulli", cft_random_bernoulli(key, 2, SH_7, 1))
        R(ARR, "cft_random_bernoulli", cft_random_bernoulli(key, -0.5, SH_7, 1))
        R(ARR, "cft_random_bernoulli", cft_random_bernoulli(key, NAN, SH_7, 1))
        /* ---- transforms and functions ---- */
        R(FN, "cft_fn_new", cft_fn_new(NULL, NULL, 1, 1))
        R(FN, "cft_fn_new", cft_fn_new(sq_cb, NULL, -1, 1))
        R(FN, "cft_fn_new", cft_fn_new(sq_cb, NULL, 1, 0))
        R(FN, "cft_fn_new", cft_fn_new(sq_cb, NULL, 1 << 30, 1))
        R(FN, "cft_grad", cft_grad(sq, (int[]){5}, 1))
        R(FN, "cft_grad", cft_grad(sq, (int[]){-2}, 1))
        R(FN, "cft_grad", cft_grad(NULL, NULL, 0))
        R(FN, "cft_grad", cft_grad(two, NULL, 0))
        R(FN, "cft_grad", cft_grad(sq, NULL, 3))
        R(FN, "cft_grad", cft_grad(sq, (int[]){0, 0}, 2))
        R(FN, "cft_grad_ex", cft_grad_ex(NULL, NULL, 0, 0))
        R(FN, "cft_value_and_grad", cft_value_and_grad(sq, (int[]){3}, 1, false))
        R(FN, "cft_value_and_grad", cft_value_and_grad(NULL, NULL, 0, true))
        R(FN, "cft_vmap", cft_vmap(NULL, NULL, NULL))
        R(FN, "cft_vmap", cft_vmap(sq, (int[]){CFT_NOT_BATCHED}, NULL))
        R(FN, "cft_vmap", cft_vmap(sq, (int[]){99}, NULL))
        R(FN, "cft_vmap", cft_vmap(sq, NULL, (int[]){-99}))
        R(FN, "cft_jvp", cft_jvp(NULL))
        R(FN, "cft_jacrev", cft_jacrev(NULL, NULL, 0))
        R(FN, "cft_jacrev", cft_jacrev(sq, (int[]){1}, 1))
        R(FN, "cft_jacfwd", cft_jacfwd(sq, (int[]){-5}, 1))
        R(FN, "cft_jacfwd", cft_jacfwd(sq, NULL, 4))
        R(FN, "cft_jacrev_ex", cft_jacrev_ex(NULL, NULL, 0, 0))
        R(FN, "cft_jacfwd_ex", cft_jacfwd_ex(NULL, NULL, 0, 0))
        R(FN, "cft_hessian", cft_hessian(sq, 4))
        R(FN, "cft_hessian", cft_hessian(NULL, 0))
        R(FN, "cft_jit", cft_jit(NULL))
        R(FN, "cft_checkpoint", cft_checkpoint(NULL, 0))
        R(FN, "cft_fn_named", cft_fn_named(NULL, "x"))
        R(FN, "cft_fn_uncached", cft_fn_uncached(NULL))
        R(FN, "cft_ir_fn", cft_ir_fn(NULL))
        R(FN, "cft_custom_op", cft_custom_op(NULL))
        R(FN, "cft_tree_fn_new", cft_tree_fn_new(NULL, NULL, tr, 1, 1))
        R(FNCALL, "cft_grad", call1(cft_grad(sq, (int[]){5}, 1), v3))
        R(FNCALL, "cft_vmap", call1(cft_vmap(sq, NULL, NULL), sc))
        R(FNCALL, "cft_vmap", call1(cft_jit(cft_vmap(sq, NULL, NULL)), sc))
        R(FNCALL, "cft_hessian", call1(cft_jit(cft_hessian(sq, 7)), v3))
        R(ST, "cft_fn_call", cft_fn_call(NULL, (cft_array *[]){v3}, o1))
        R(ST, "cft_fn_call", cft_fn_call(sq, (cft_array *[]){v3}, NULL))
        R(ST, "cft_fn_call", cft_fn_call(sq, NULL, o1))
        R(ARR, "cft_fn_call1", cft_fn_call1(NULL, (cft_array *[]){v3}))
        R(ST, "cft_vjp", cft_vjp(NULL, (cft_array *[]){v3}, o1, NULL))
        R(ST, "cft_vjp", cft_vjp(sq, NULL, o1, NULL))
        R(ST, "cft_jit_stats_of", cft_jit_stats_of(sq, NULL))
        R(ST, "cft_fn_print_ir", cft_fn_print_ir(sq, NULL, stdout))
        R(ST, "cft_fn_print_ir", cft_fn_print_ir(NULL, NULL, stdout))
        R(ST, "cft_make_ir", cft_make_ir(sq, NULL) ? CFT_OK : cft_last_error())
        R(ST, "cft_make_ir", cft_make_ir(NULL, NULL) ? CFT_OK : cft_last_error())
        R(ST, "cft_make_ir",
          cft_make_ir(sq, (cft_aval[]){{.dtype = CFT_F32, .ndim = 20}}) ? CFT_OK : cft_last_error())
        R(ST, "cft_make_ir",
          cft_make_ir(sq, (cft_aval[]){{.dtype = (cft_dtype)70, .ndim = 1}}) ? CFT_OK
                                                                             : cft_last_error())
        R(ST, "cft_ir_typecheck", cft_ir_typecheck(NULL))
        R(ST, "cft_ir_eval", cft_ir_eval(NULL, (cft_array *[]){v3}, o1))
        /* ---- control flow ---- */
        R(ST, "cft_cond", cft_cond(v3, sq, sq, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_cond", cft_cond(NULL, sq, sq, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_cond", cft_cond(cft_scalar(1, CFT_BOOL), NULL, sq, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_cond", cft_cond(b3, sq, sq, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_switch",
          cft_switch(cft_scalar(0.5, CFT_F32), (cft_fn *[]){sq, sq}, 2, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_switch", cft_switch(cft_scalar(0, CFT_I32), NULL, 2, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_switch",
          cft_switch(cft_scalar(0, CFT_I32), (cft_fn *[]){sq}, 0, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_switch", cft_switch(i3, (cft_fn *[]){sq, sq}, 2, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_scan", cft_scan(NULL, 0, 1, 3, false, (cft_array *[]){v3}, o1))
        R(ST, "cft_scan", cft_scan(sq, 0, 1, -3, false, (cft_array *[]){v3}, o1))
        R(ST, "cft_scan", cft_scan(sq, -1, 1, 3, false, (cft_array *[]){v3}, o1))
        R(ST, "cft_scan", cft_scan(sq, 0, 1, 3, false, NULL, o1))
        R(ST, "cft_fori_loop", cft_fori_loop(NULL, 0, 1, 0, 3, (cft_array *[]){v3}, o1))
        R(ST, "cft_fori_loop", cft_fori_loop(sq, 0, -1, 0, 3, (cft_array *[]){v3}, o1))
        R(ST, "cft_while_loop", cft_while_loop(NULL, sq, 0, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_while_loop", cft_while_loop(sq, sq, 0, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_while_loop", cft_while_loop(sq, NULL, 0, 1, (cft_array *[]){v3}, o1))
        R(ST, "cft_while_loop_bounded",
          cft_while_loop_bounded(NULL, sq, 0, 1, 5, (cft_array *[]){v3}, o1))
        R(ST, "cft_while_loop_bounded",
          cft_while_loop_bounded(sq, sq, 0, 1, -5, (cft_array *[]){v3}, o1))
        /* ---- linear algebra ---- */
        R(ARR, "cft_linalg_solve", cft_linalg_solve(cft_eye(2, CFT_F32), v3))
        R(ARR, "cft_linalg_solve", cft_linalg_solve(m23, v2))
        R(ARR, "cft_linalg_solve", cft_linalg_solve(v3, v3))
        R(ARR, "cft_linalg_solve", cft_linalg_solve(m33, m23))
        R(ARR, "cft_linalg_solve", cft_linalg_solve(NULL, v3))
        R(ARR, "cft_linalg_cholesky", cft_linalg_cholesky(m23))
        R(ARR, "cft_linalg_cholesky", cft_linalg_cholesky(v3))
        R(ARR, "cft_linalg_cholesky", cft_linalg_cholesky(i3))
        R(ARR, "cft_linalg_inv", cft_linalg_inv(m23))
        R(ARR, "cft_linalg_inv", cft_linalg_inv(sc))
        R(ARR, "cft_linalg_det", cft_linalg_det(m23))
        R(ST, "cft_linalg_slogdet", cft_linalg_slogdet(m23, &o1[0], &o1[1]))
        R(ST, "cft_linalg_slogdet", cft_linalg_slogdet(v3, NULL, &o1[1]))
        R(ST, "cft_linalg_eigh", cft_linalg_eigh(m23, &o1[0], &o1[1]))
        R(ARR, "cft_linalg_eigvalsh", cft_linalg_eigvalsh(v3))
        R(ST, "cft_linalg_qr", cft_linalg_qr(v3, &o1[0], &o1[1]))
        R(ST, "cft_linalg_svd", cft_linalg_svd(v3, &o1[0], &o1[1], &o1[2]))
        R(ARR, "cft_linalg_svdvals", cft_linalg_svdvals(sc))
        R(ARR, "cft_linalg_pinv", cft_linalg_pinv(v3, 1e-15))
        R(ARR, "cft_linalg_lstsq", cft_linalg_lstsq(m23, m33))
        R(ARR, "cft_linalg_solve_triangular",
          cft_linalg_solve_triangular(m23, v3, false, true, false, false))
        R(ARR, "cft_linalg_solve_triangular",
          cft_linalg_solve_triangular(m33, v2, false, true, false, false))
        R(ARR, "cft_linalg_vector_norm", cft_linalg_vector_norm(m23, 2, AX00, 2, false))
        R(ARR, "cft_linalg_vector_norm", cft_linalg_vector_norm(m23, 2, AX5, 1, false))
        R(ARR, "cft_linalg_matrix_norm", cft_linalg_matrix_norm(v3, CFT_NORM_FRO, false))
        R(ARR, "cft_linalg_matrix_norm",
          cft_linalg_matrix_norm(m33, (cft_matrix_norm_ord)40, false))
        R(ARR, "cft_linalg_matrix_power", cft_linalg_matrix_power(m23, 2))
        R(ARR, "cft_linalg_cross", cft_linalg_cross(v2, v2, 0))
        R(ARR, "cft_linalg_cross", cft_linalg_cross(v3, v3, 4))
        R(ARR, "cft_linalg_matrix_exp", cft_linalg_matrix_exp(m23))
        /* ---- FFT ---- */
        R(ARR, "cft_fft_fft", cft_fft_fft(v3, 0, 0, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_fft", cft_fft_fft(v3, -1, 3, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_fft", cft_fft_fft(v3, -1, 0, (cft_fft_norm)9))
        R(ARR, "cft_fft_fft", cft_fft_fft(i3, huge, 0, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_ifft", cft_fft_ifft(NULL, -1, 0, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_rfft", cft_fft_rfft(c3, -1, 0, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_irfft", cft_fft_irfft(v3, -5, 0, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_hfft", cft_fft_hfft(v3, -1, 9, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_ihfft", cft_fft_ihfft(c3, -1, 0, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_fft2", cft_fft_fft2(v3, NULL, NULL, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_rfft2", cft_fft_rfft2(m23, NULL, (int[]){0, 0}, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_irfft2", cft_fft_irfft2(m23, (int64_t[]){0, 0}, NULL, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_ifft2", cft_fft_ifft2(sc, NULL, NULL, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_fftn", cft_fft_fftn(m23, NULL, (int[]){0, 5}, 2, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_fftn", cft_fft_fftn(m23, NULL, NULL, 9, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_ifftn", cft_fft_ifftn(m23, NULL, (int[]){0}, -1, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_rfftn", cft_fft_rfftn(c3, NULL, NULL, 0, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_irfftn", cft_fft_irfftn(m23, (int64_t[]){-2, 2}, NULL, 2, CFT_FFT_BACKWARD))
        R(ARR, "cft_fft_fftfreq", cft_fft_fftfreq(0, 1, CFT_F32))
        R(ARR, "cft_fft_fftfreq", cft_fft_fftfreq(huge, 1, CFT_F32))
        R(ARR, "cft_fft_rfftfreq", cft_fft_rfftfreq(4, 0, CFT_F32))
        R(ARR, "cft_fft_rfftfreq", cft_fft_rfftfreq(4, 1, CFT_I32))
        R(ARR, "cft_fft_fftshift", cft_fft_fftshift(m23, AX5, 1))
        R(ARR, "cft_fft_ifftshift", cft_fft_ifftshift(m23, AX00, 2))
        /* ---- special and complex ---- */
        R(ARR, "cft_erfc", cft_erfc(c3))
        R(ARR, "cft_erfinv", cft_erfinv(NULL))
        R(ARR, "cft_lgamma", cft_lgamma(c3))
        R(ARR, "cft_digamma", cft_digamma(b3))
        R(ARR, "cft_i0", cft_i0(c3))
        R(ARR, "cft_real", cft_real(NULL))
        R(ARR, "cft_complex", cft_complex(v3, v2))
        R(ARR, "cft_complex", cft_complex(c3, c3))
        /* ---- nn ---- */
        R(ARR, "cft_linear", cft_linear(m23, cft_zeros(CFT_F32, (int64_t[]){4, 2}, 2), NULL))
        R(ARR, "cft_linear", cft_linear(m23, m33, v2))
        R(ARR, "cft_layer_norm", cft_layer_norm(m23, 3, NULL, NULL, 1e-5))
        R(ARR, "cft_layer_norm", cft_layer_norm(m23, 1, v2, NULL, 1e-5))
        R(ARR, "cft_layer_norm", cft_layer_norm(m23, 1, NULL, NULL, -1))
        R(ARR, "cft_batch_norm",
          cft_batch_norm(m23, v2, v2, NULL, NULL, true, 0.1, 1e-5, &o1[0], &o1[1]))
        R(ARR, "cft_batch_norm",
          cft_batch_norm(v3, NULL, NULL, NULL, NULL, true, 0.1, 1e-5, NULL, NULL))
        R(ARR, "cft_dropout", cft_dropout(m23, 1.5, true, key))
        R(ARR, "cft_dropout", cft_dropout(m23, -0.1, true, key))
        R(ARR, "cft_dropout", cft_dropout(m23, 0.5, true, NULL))
        R(ARR, "cft_embedding", cft_embedding(v3, m33))
        R(ARR, "cft_embedding", cft_embedding(i3, v3))
        R(ARR, "cft_flatten", cft_flatten(m23, 1, 0))
        R(ARR, "cft_flatten", cft_flatten(m23, 0, 5))
        R(ARR, "cft_scaled_dot_product_attention",
          cft_scaled_dot_product_attention(m23, m23, m33, NULL, false))
        R(ARR, "cft_scaled_dot_product_attention",
          cft_scaled_dot_product_attention(v3, v3, v3, NULL, false))
        R(ARR, "cft_loss_cross_entropy", cft_loss_cross_entropy(m23, v3, 0, CFT_REDUCE_MEAN))
        R(ARR, "cft_loss_cross_entropy",
          cft_loss_cross_entropy(m23, cft_from_i32((int32_t[]){0, 1}, (int64_t[]){2}, 1), 2.0,
                                 CFT_REDUCE_MEAN))
        R(ARR, "cft_loss_cross_entropy",
          cft_loss_cross_entropy(m23, cft_from_i32((int32_t[]){0, 1}, (int64_t[]){2}, 1), 0,
                                 (cft_reduction)9))
        R(ARR, "cft_loss_nll", cft_loss_nll(m23, v2, CFT_REDUCE_SUM))
        R(ARR, "cft_loss_mse", cft_loss_mse(m23, m33, CFT_REDUCE_MEAN))
        R(ARR, "cft_loss_l1", cft_loss_l1(m23, v2, CFT_REDUCE_MEAN))
        R(ARR, "cft_loss_huber", cft_loss_huber(m23, m23, -1, CFT_REDUCE_MEAN))
        R(ARR, "cft_loss_bce_with_logits",
          cft_loss_bce_with_logits(m23, m33, NULL, CFT_REDUCE_MEAN))
        R(ARR, "cft_silu", cft_silu(NULL))
        R(ARR, "cft_softplus", cft_softplus(b3))
        R(ARR, "cft_activation", cft_activation(v3, (cft_activation_kind)99))
        R(TREE, "cft_nn_linear", cft_module_init(cft_nn_linear(-1, 3, true), key, NULL))
        R(TREE, "cft_nn_linear", cft_module_init(cft_nn_linear(huge, huge, true), key, NULL))
        R(TREE, "cft_nn_embedding", cft_module_init(cft_nn_embedding(0, -4), key, NULL))
        R(TREE, "cft_nn_dropout", cft_module_init(cft_nn_dropout(3), key, NULL))
        R(TREE, "cft_nn_mha", cft_module_init(cft_nn_mha(10, 3, true), key, NULL))
        R(TREE, "cft_nn_layer_norm",
          cft_module_init(cft_nn_layer_norm(NULL, 1, 1e-5, true), key, NULL))
        R(TREE, "cft_nn_conv2d",
          cft_module_init(cft_nn_conv2d(3, 4, (int64_t[]){0, 3}, NULL, NULL, NULL, 1, true), key,
                          NULL))
        R(TREE, "cft_nn_conv2d",
          cft_module_init(cft_nn_conv2d(3, 4, (int64_t[]){3, 3}, NULL, NULL, NULL, 2, true), key,
                          NULL))
        R(TREE, "cft_nn_mlp",
          cft_module_init(cft_nn_mlp((int64_t[]){4}, 1, CFT_ACT_RELU, 0), key, NULL))
        R(TREE, "cft_nn_sequential", cft_module_init(cft_nn_sequential(NULL, 2), key, NULL))
        R(TREE, "cft_module_init", cft_module_init(NULL, key, NULL))
        R(TREE, "cft_module_init", cft_module_init(cft_nn_linear(2, 3, true), v3, NULL))
        R(ARR, "cft_module_apply",
          cft_module_apply(cft_nn_linear(2, 3, true), tr, NULL, m33, false, NULL, NULL))
        R(ARR, "cft_module_apply", cft_module_apply(NULL, tr, NULL, m33, false, NULL, NULL))
        /* ---- trees, optimizers, schedules, files ---- */
        R(TREE, "cft_tree_set", cft_tree_set(tr, NULL, v3))
        R(TREE, "cft_tree_set", cft_tree_set(tr, "x", NULL))
        R(TREE, "cft_tree_set", cft_tree_set(NULL, "x", v3))
        R(ARR, "cft_tree_get", cft_tree_get(tr, "nope"))
        R(TREE, "cft_tree_from",
          cft_tree_from((const char *[]){"a", "a"}, (cft_array *[]){v3, v3}, 2))
        R(TREE, "cft_tree_from", cft_tree_from(NULL, NULL, 2))
        R(TREE, "cft_tree_remove", cft_tree_remove(tr, NULL))
        R(ARR, "cft_tree_at", cft_tree_at(tr, 99))
        R(TREE, "cft_tree_unflatten", cft_tree_unflatten(tr, NULL))
        R(TREE, "cft_tree_stack", cft_tree_stack(NULL, 2))
        R(TREE, "cft_tree_stack", cft_tree_stack((const cft_tree *[]){tr, cft_tree_new()}, 2))
        R(TREE, "cft_tree_index", cft_tree_index(tr, 5))
        R(TREE, "cft_tree_astype", cft_tree_astype(tr, (cft_dtype)33))
        R(TREE, "cft_tree_map", cft_tree_map(tr, NULL, NULL))
        R(ST, "cft_tree_unstack", cft_tree_unstack(tr, 0, NULL))
        R(ST, "cft_tree_flatten", cft_tree_flatten(tr, NULL))
        R(TREE, "cft_optim_init", cft_optim_init(NULL, tr))
        R(TREE, "cft_optim_init", cft_optim_init(&(cft_optim){0}, NULL))
        R(ST, "cft_optim_update", cft_optim_update(NULL, tr, tr, tr, sc, NULL, NULL, NULL))
        R(TREE, "cft_clip_grad_norm", cft_clip_grad_norm(tr, -1, NULL))
        R(ARR, "cft_tree_global_norm", cft_tree_global_norm(NULL))
        R(ST, "cft_lr_values", cft_lr_values(cft_lr_step(0, 0.5), 0.1, 3, (double[3]){0}))
        R(ST, "cft_lr_values",
          cft_lr_values(cft_lr_multistep(NULL, 2, 0.5), 0.1, 3, (double[3]){0}))
        R(ST, "cft_lr_values", cft_lr_values(cft_lr_cosine(-1, 0), 0.1, 3, (double[3]){0}))
        R(ST, "cft_lr_values", cft_lr_values(cft_lr_linear(1, 0, -3), 0.1, 3, (double[3]){0}))
        R(ST, "cft_lr_values", cft_lr_values(cft_lr_chain(NULL, 2), 0.1, 3, (double[3]){0}))
        R(ST, "cft_lr_values", cft_lr_values(cft_lr_exponential(0.5), 0.1, -3, (double[3]){0}))
        R(ST, "cft_lr_values", cft_lr_values(cft_lr_exponential(0.5), 0.1, 3, NULL))
        R(ST, "cft_save_safetensors", cft_save_safetensors(NULL, tr, NULL, 0))
        R(ST, "cft_save_safetensors",
          cft_save_safetensors("/nonexistent-dir/x.safetensors", tr, NULL, 0))
        R(ST, "cft_save_safetensors",
          cft_save_safetensors("/tmp/cft-bad.safetensors", tr, NULL, -1))
        R(ST, "cft_save_safetensors",
          cft_save_safetensors("/tmp/cft-bad.safetensors", NULL, NULL, 0))
        R(ST, "cft_save_safetensors", cft_save_safetensors("/tmp", tr, NULL, 0))
        R(TREE, "cft_load_safetensors", cft_load_safetensors(NULL, NULL, NULL))
        R(TREE, "cft_load_safetensors", cft_load_safetensors("/nonexistent", NULL, NULL))
        R(TREE, "cft_load_safetensors", cft_load_safetensors("/tmp", NULL, NULL))
        R(TREE, "cft_load_safetensors", cft_load_safetensors("/dev/null", NULL, NULL))
        R(TREE, "cft_load_safetensors", cft_load_safetensors("/proc/self/status", NULL, NULL))
        R(TREE, "cft_load_safetensors", cft_load_safetensors_ex("/dev/null", 77, NULL, NULL))
        /* ---- added with Trust II: trees, timer, IR text, losses, linalg, einsum,
         * export, profile, devices ---- */
        R(TREE, "cft_tree_subtree", cft_tree_subtree(tr, NULL))
        R(TREE, "cft_tree_subtree", cft_tree_subtree(NULL, "w"))
        R(ST, "cft_timer_timeit", cft_timer_timeit(noop, NULL, (int64_t)1 << 62, 1, &meas))
        R(ST, "cft_timer_timeit", cft_timer_timeit(noop, NULL, 1000000, 1000000, &meas))
        R(ST, "cft_timer_timeit", cft_timer_timeit(noop, NULL, 0, 1, &meas))
        R(ST, "cft_timer_timeit", cft_timer_timeit(noop, NULL, 1, 0, &meas))
        R(ST, "cft_timer_timeit", cft_timer_timeit(NULL, NULL, 1, 1, &meas))
        R(ST, "cft_timer_timeit", cft_timer_timeit(noop, NULL, 1, 1, NULL))
        R(ST, "cft_timer_blocked_autorange", cft_timer_blocked_autorange(NULL, NULL, 0.1, &meas))
        R(ST, "cft_timer_blocked_autorange", cft_timer_blocked_autorange(noop, NULL, 0.1, NULL))
        R(ST, "cft_ir_parse",
          cft_ir_parse("{ lambda a:f32[4294967296*4294967296] .\n  in (a) }", 0, NULL, &irp))
        R(ST, "cft_ir_parse",
          cft_ir_parse("{ lambda a:f32[1048576*1048576*1048576] .\n  in (a) }", 0, NULL, &irp))
        R(ST, "cft_ir_parse",
          cft_ir_parse("{ lambda a:f32[3] aa:f32[3] a:f32[3] .\n  in (a) }", 0, NULL, &irp))
        R(ST, "cft_ir_parse", cft_ir_parse("{ lambda a:f32[3] .\n  in (aa) }", 0, NULL, &irp))
        R(ST, "cft_ir_parse", cft_ir_parse(NULL, 0, NULL, &irp))
        R(ST, "cft_ir_parse", cft_ir_parse("{ lambda a:f32[3] .\n  in (a) }", 0, NULL, NULL))
        R(ARR, "cft_cross_entropy", cft_cross_entropy(m23, lab_hi))
        R(ARR, "cft_cross_entropy", cft_cross_entropy(m23, lab_neg))
        R(ARR, "cft_loss_cross_entropy", cft_loss_cross_entropy(m23, lab_hi, 0, CFT_REDUCE_MEAN))
        R(ARR, "cft_linalg_cholesky", cft_linalg_cholesky(nan33))
        R(ARR, "cft_linalg_cholesky", cft_linalg_cholesky(inf33))
        R(ARR, "cft_einsum", cft_einsum(NULL, 1, &m23))
        R(ARR, "cft_einsum", cft_einsum("ij->ji", 0, NULL))
        R(ARR, "cft_einsum", cft_einsum("ij->ji", 1, NULL))
        R(ARR, "cft_einsum", cft_einsum("ijk->i", 1, &m23))
        R(ARR, "cft_einsum", cft_einsum("ij,jk->ik", 2, (cft_array *[]){m23, m23}))
        R(ARR, "cft_einsum", cft_einsum("ij->k", 1, &m23))
        R(ARR, "cft_einsum", cft_einsum("ij->ii", 1, &m23))
        R(ARR, "cft_einsum", cft_einsum("i$->i", 1, &m23))
        R(ARR, "cft_einsum", cft_einsum("...i...,i->i", 2, (cft_array *[]){m23, v3}))
        R(ARR, "cft_einsum", cft_einsum("ij,ij->", 1, &m23))
        R(ARR, "cft_einsum2", cft_einsum2("ij,jk->ik", m23, NULL))
        R(ST, "cft_export", cft_export(NULL, &av_f32_3, bad_file))
        R(ST, "cft_export", cft_export(sq, NULL, bad_file))
        R(ST, "cft_export", cft_export(sq, &av_f32_3, NULL))
        R(ST, "cft_export", cft_export(sq, &av_f32_3, "/nonexistent-dir/x.cftx"))
        R(ST, "cft_export", cft_export(sq, &(cft_aval){(cft_dtype)99, 1, {3}}, bad_file))
        R(ST, "cft_export", cft_export(sq, &(cft_aval){CFT_F32, -1, {3}}, bad_file))
        R(ST, "cft_export_ir", cft_export_ir(NULL, bad_file))
        R(ST, "cft_load_exported_ir", cft_load_exported_ir(NULL, &irp))
        R(ST, "cft_load_exported_ir", cft_load_exported_ir("/nonexistent.cftx", &irp))
        R(ST, "cft_load_exported_ir", cft_load_exported_ir("/dev/null", &irp))
        R(ST, "cft_load_exported_ir", cft_load_exported_ir("/proc/self/status", &irp))
        R(ST, "cft_load_exported_ir", cft_load_exported_ir("/tmp", &irp))
        R(FN, "cft_load_exported", cft_load_exported(NULL))
        R(FN, "cft_load_exported", cft_load_exported("/nonexistent.cftx"))
        R(FN, "cft_load_exported", cft_load_exported("/dev/null"))
        R(ST, "cft_profile_stop", cft_profile_stop("/nonexistent-dir/trace.json"))
        R(ARR, "cft_device_put", cft_device_put(m23, NULL))
        R(ARR, "cft_device_put", cft_device_put(NULL, cft_device("cpu")))
        R(ARR, "cft_device_put", cft_device_put(m23, cft_device("nosuchbackend:0")))
        R(ARR, "cft_device_put", cft_device_put(m23, cft_device("cpu:7")))
        R(ARR, "cft_device_put", cft_device_put(m23, cft_device("")))
        R(ARR, "cft_device_put", cft_device_put(m23, cft_device(NULL)))
        R(ST, "cft_device_synchronize", cft_device_synchronize(NULL))
        R(ST, "cft_device_synchronize", cft_device_synchronize(cft_device("nosuch")))
        R(ST, "cft_device_memory", cft_device_memory(cft_device("cpu"), NULL))
        R(ST, "cft_device_empty_cache", cft_device_empty_cache(NULL))
        R(ST, "cft_register_backend", cft_register_backend(NULL))
        R(ST, "cft_register_backend", cft_register_backend(&(cft_backend){0}))
        /* trees and transforms by tree */
        R(TREE, "cft_tree_merge", cft_tree_merge(tr, "enc", NULL))
        R(TREE, "cft_tree_merge", cft_tree_merge(NULL, "enc", tr))
        R(TREE, "cft_tree_zip_map", cft_tree_zip_map(tr, tr, NULL, NULL))
        R(TREE, "cft_tree_zip_map", cft_tree_zip_map(tr, cft_tree_new(), zip_first, NULL))
        R(TREE, "cft_tree_zip_map", cft_tree_zip_map(NULL, tr, zip_first, NULL))
        R(TREE, "cft_tree_map_n", cft_tree_map_n(NULL, 2, map_n_first, NULL))
        R(TREE, "cft_tree_map_n", cft_tree_map_n((const cft_tree *[]){tr}, 0, map_n_first, NULL))
        R(TREE, "cft_tree_map_n", cft_tree_map_n((const cft_tree *[]){tr, tr}, 2, NULL, NULL))
        R(TREE, "cft_tree_unflatten", cft_tree_unflatten(NULL, o1))
        R(ST, "cft_tree_flatten", cft_tree_flatten(NULL, o1))
        R(TREE, "cft_tree_stack", cft_tree_stack((const cft_tree *[]){tr, tr}, 0))
        R(TREE, "cft_tree_index", cft_tree_index(tr, -1))
        R(ST, "cft_tree_unstack", cft_tree_unstack(NULL, 2, NULL))
        R(FN, "cft_tree_grad", cft_tree_grad(NULL, tr, false))
        R(FN, "cft_tree_grad", cft_tree_grad(sq, NULL, false))
        R(FN, "cft_tree_value_and_grad", cft_tree_value_and_grad(NULL, tr, false))
        R(FN, "cft_tree_vmap", cft_tree_vmap(NULL, tr, 0, NULL, NULL))
        R(FN, "cft_tree_vmap", cft_tree_vmap(sq, NULL, 0, NULL, NULL))
        R(FN, "cft_tree_vmap_prefix",
          cft_tree_vmap_prefix(sq, tr, 1, NULL, (int[]){0}, 0, NULL, NULL))
        R(FN, "cft_tree_vmap_prefix",
          cft_tree_vmap_prefix(NULL, tr, 1, (const char *[]){"w"}, (int[]){0}, 0, NULL, NULL))
        R(ST, "cft_tree_call", cft_tree_call(NULL, tr, NULL, NULL, NULL, NULL))
        R(ST, "cft_tree_call", cft_tree_call(sq, NULL, NULL, NULL, NULL, NULL))
        R(FN, "cft_tree_fn_new", cft_tree_fn_new(NULL, NULL, NULL, 1, 1))
        /* dims, parametrizations, einsum relatives, fft frequencies */
        R(ARR, "cft_dim_value", cft_dim_value(CFT_DIM_INVALID, CFT_I64))
        R(ARR, "cft_dim_value", cft_dim_value(-5, CFT_I64))
        R(ARR, "cft_weight_norm", cft_weight_norm(m23, v3, 0))
        R(ARR, "cft_weight_norm", cft_weight_norm(m23, v2, 9))
        R(ST, "cft_weight_norm_init", cft_weight_norm_init(m23, 7, o1, o2))
        R(ARR, "cft_orthogonal", cft_orthogonal(v3))
        R(ARR, "cft_orthogonal_init", cft_orthogonal_init(key, -1, 2, CFT_F32))
        R(ARR, "cft_orthogonal_init", cft_orthogonal_init(key, 2, 3, CFT_I32))
        R(ARR, "cft_spectral_norm", cft_spectral_norm(m23, v3, v3, 1, 0, 1e-12, true, NULL, NULL))
        R(ARR, "cft_tensordot",
          cft_tensordot(m23, m23, (int[]){0, 1, 0, 1, 0}, (int[]){0, 1, 0, 1, 0}, 5))
        R(ARR, "cft_tensordot", cft_tensordot(m23, m33, (int[]){0}, (int[]){0}, 1))
        R(ARR, "cft_tensordot_n", cft_tensordot_n(m23, m33, 3))
        R(ARR, "cft_matrix_trace", cft_matrix_trace(v3))
        R(ARR, "cft_fft_fftfreq", cft_fft_fftfreq(-4, 1.0, CFT_F32))
        R(ARR, "cft_fft_fftfreq", cft_fft_fftfreq(4, 0.0, CFT_F32))
        R(ARR, "cft_fft_rfftfreq", cft_fft_rfftfreq(4, 1.0, CFT_I32))
    }
    r->k = NUM, r->name = NULL;
}
enum { NROWS = __COUNTER__ - BASE };

/* 0 when r is a proper error naming its call; else a reason in why */
static int judge(const result *r, char *why, size_t n) {
    const char *msg = NULL;
    switch (r->k) {
    case ARR:
    case FNCALL:
        if (!r->a)
            return snprintf(why, n, "returned NULL"), 1;
        if (!cft_failed(r->a))
            return snprintf(why, n, "returned a value, not an error"), 1;
        msg = cft_error_message(r->a);
        break;
    case ST:
        if (r->s == CFT_OK)
            return snprintf(why, n, "returned CFT_OK"), 1;
        msg = cft_last_error_message();
        break;
    case FN:
        if (!r->f)
            return snprintf(why, n, "returned NULL"), 1;
        if (!cft_fn_failed(r->f))
            return snprintf(why, n, "returned a usable function"), 1;
        msg = cft_fn_error_message(r->f);
        break;
    case TREE:
        if (!r->t)
            return snprintf(why, n, "returned NULL"), 1;
        if (!cft_tree_failed(r->t))
            return snprintf(why, n, "returned a tree, not an error"), 1;
        msg = cft_error_message(cft_tree_error(r->t));
        break;
    case NUM:
        if (!isnan(r->d))
            return snprintf(why, n, "returned %g, not NaN", r->d), 1;
        if (cft_last_error() == CFT_OK)
            return snprintf(why, n, "NaN without cft_last_error"), 1;
        msg = cft_last_error_message();
        break;
    }
    if (!msg || !strstr(msg, r->name))
        return snprintf(why, n, "the error does not name %s: \"%s\"", r->name,
                        msg ? msg : "(none)"),
               1;
    return 0;
}

static void setup(void) {
    m23 = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){2, 3}, 2);
    m33 = cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){3, 3}, 2);
    v3 = cft_from_f32((float[]){1, 2, 3}, (int64_t[]){3}, 1);
    v2 = cft_from_f32((float[]){1, 2}, (int64_t[]){2}, 1);
    sc = cft_scalar(2, CFT_F32);
    i3 = cft_from_i32((int32_t[]){0, 1, 2}, (int64_t[]){3}, 1);
    b3 = cft_gt(v3, cft_scalar(1.5, CFT_F32));
    i64s = cft_scalar(3, CFT_I64);
    key = cft_random_key(7);
    c3 = cft_complex(v3, v3);
    big0 = cft_zeros(CFT_F32, (int64_t[]){0}, 1);
    t4 = cft_zeros(CFT_F32, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1}, 8);
    sq = cft_fn_new(sq_cb, NULL, 1, 1);
    two = cft_fn_new(two_cb, NULL, 1, 2);
    tr = cft_tree_set(cft_tree_set(cft_tree_new(), "w", m23), "b", v2);
    lab_hi = cft_from_i32((int32_t[]){1, 99}, (int64_t[]){2}, 1);
    lab_neg = cft_from_i32((int32_t[]){-1, 0}, (int64_t[]){2}, 1);
    nan33 = cft_add(m33, cft_full(NAN, CFT_F32, (int64_t[]){3, 3}, 2));
    inf33 = cft_mul_s(cft_eye(3, CFT_F32), INFINITY);
    snprintf(bad_file, sizeof bad_file, "/tmp/cft-bad-%d.cftx", (int)getpid());
    (void)i64s, (void)o3, (void)bad_cb;
}

int main(int argc, char **argv) {
    if (argc > 1 && argv[1][0] >= '0' && argv[1][0] <= '9') { /* one row, in-process */
        cft_init();
        setup();
        result r = {0};
        char why[600];
        row(atoi(argv[1]), &r);
        int bad = judge(&r, why, sizeof why);
        printf("row %s (%s): %s\n", argv[1], r.name, bad ? why : "ok");
        return bad;
    }
    check_init(argc, argv);
    setup();
    int failed = 0, timeouts = 0, crashes = 0;
    TEST("%d bad calls: each an error naming its public call; no crash, hang, NULL or value",
         NROWS) {
        for (int i = 0; i < NROWS; i++) {
            int pipefd[2];
            if (pipe(pipefd) != 0)
                break;
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                close(pipefd[0]);
                alarm(20); /* a hang is a failure, never a stuck test */
                int devnull = open("/dev/null", 1);
                dup2(devnull, 1); /* rows that print (cft_fn_print_ir) stay quiet */
                result r = {0};
                char why[600] = "";
                cft_clear_error();
                row(i, &r);
                int bad = judge(&r, why, sizeof why);
                if (bad) {
                    char line[700];
                    int k = snprintf(line, sizeof line, "%s: %s", r.name, why);
                    if (write(pipefd[1], line, (size_t)k) < 0)
                        _exit(3);
                }
                _exit(bad);
            }
            close(pipefd[1]);
            char buf[700] = "";
            ssize_t k = read(pipefd[0], buf, sizeof buf - 1);
            buf[k > 0 ? k : 0] = 0;
            close(pipefd[0]);
            int status = 0;
            waitpid(pid, &status, 0);
            if (WIFSIGNALED(status)) {
                int sig = WTERMSIG(status);
                sig == SIGALRM ? timeouts++ : crashes++;
                CHECK_MSG(0, "row %d: %s (signal %d)", i, sig == SIGALRM ? "hung" : "crashed", sig);
                failed++;
            } else if (WEXITSTATUS(status) != 0) {
                CHECK_MSG(0, "row %d: %s", i, buf);
                failed++;
            }
        }
        printf("  bad-input table: %d rows, %d failed (%d crashes, %d hangs)\n", NROWS, failed,
               crashes, timeouts);
    }
    return check_summary();
}
