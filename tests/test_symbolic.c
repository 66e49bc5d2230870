/* test_symbolic.c: symbolic dims (cft/shape.h). Dim expressions; tracing
 * an MLP's per-sample gradients at f32[B,64] into one IR that prints with
 * B and evaluates at every batch size; shape errors that name symbols;
 * reshape, concatenate, constants and means over symbolic dims; cft_jit's
 * automatic dynamic shapes: specialise first, retrace once with the
 * changed dim symbolic, never again for it (counted by cft_jit_stats_of),
 * with the interpreter's results; the fallback to per-shape tracing when a
 * function cannot take a symbol; CFT_DEBUG's explanation. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cft/cft.h"
#include "check.h"

static cft_array *randn(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd);
}
static cft_array *labels(int64_t n, int classes) {
    int32_t y[1024];
    for (int64_t i = 0; i < n; i++)
        y[i] = (int32_t)((i * 7 + 3) % classes);
    return cft_from_i32(y, &n, 1);
}

/* (w1 [64,32], b1 [32], w2 [32,10], x [64], y []) -> cross-entropy of one
 * example; with x [B,64], y [B] the batch mean */
static cft_status mlp(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_relu(cft_add(cft_matmul(in[3], in[0]), in[1]));
    out[0] = cft_mean(cft_cross_entropy(cft_matmul(h, in[2]), in[4]), NULL, 0, false);
    return CFT_OK;
}

static cft_fn *per_sample(void) {
    cft_fn *loss = cft_fn_named(cft_fn_new(mlp, NULL, 5, 1), "loss");
    cft_fn *g = cft_grad(loss, (int[]){0, 1, 2}, 3);
    return cft_fn_named(
        cft_vmap(g, (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL),
        "per_sample_grads");
}
static cft_fn *batch_grad(void) {
    return cft_fn_named(cft_grad(cft_fn_new(mlp, NULL, 5, 1), (int[]){0, 1, 2}, 3), "loss_grad");
}

static cft_array *W1, *B1, *W2;

static void inputs(int64_t B, uint64_t seed, cft_array **in) {
    in[0] = W1, in[1] = B1, in[2] = W2;
    in[3] = randn(seed, (int64_t[]){B, 64}, 2);
    in[4] = labels(B, 10);
}

static cft_aval aval_of(const cft_array *x) {
    return cft_array_aval(x);
}

/* x [B,4,16] -> reshape to [B,64] and to [-1], concatenate [x; x] along
 * the batch, sum of squares of each: three outputs */
static cft_status shapes_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *x = in[0];
    int64_t B = cft_array_shape(x)[0];
    cft_array *r = cft_reshape(x, (int64_t[]){B, 64}, 2);
    cft_array *flat = cft_reshape(x, (int64_t[]){-1}, 1);
    cft_array *cat = cft_concatenate((cft_array *[]){r, cft_mul_s(r, 2.0)}, 2, 0);
    out[0] = cft_sum(cft_square(cat), (int[]){1}, 1, false); /* [2B] */
    out[1] = cft_add(flat, cft_ones_like(flat));             /* [B*64] */
    out[2] = cft_add(cft_mean(r, (int[]){0}, 1, false), cft_zeros(CFT_F32, (int64_t[]){64}, 1));
    return CFT_OK;
}

/* (x [n], y [m]) -> sum(x^2) + sum(y) * mean(x): the two dims are independent */
static cft_status two_dims_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *sx = cft_sum(cft_square(in[0]), NULL, 0, false);
    out[0] = cft_add(sx, cft_mul(cft_sum(in[1], NULL, 0, false), cft_mean(in[0], NULL, 0, false)));
    return CFT_OK;
}

/* uses a dim in C arithmetic (not through cft_dim_*): cannot be traced with
 * a symbol, so cft_jit falls back to one trace per shape */
static cft_status c_arith_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    int64_t n = cft_array_shape(in[0])[0];
    out[0] = cft_sum(cft_reshape(in[0], (int64_t[]){n * 2, 32}, 2), (int[]){1}, 1, false);
    return CFT_OK;
}

/* ---- a sweep of ops: each maps one example x (of the row's shape) to an
 * array; traced under vmap (forward) and vmap(grad(sum of squares)) at
 * f32[B, ...] and compared with direct calls at two batch sizes, then
 * jitted over four batch sizes (one symbolic trace, no fallback) ---- */

static cft_array *CW, *MW, *IDX, *IDX2;

static cft_array *op_ew(cft_array *x) {
    cft_array *y = cft_mul(cft_tanh(x), cft_exp(cft_neg(cft_square(x))));
    return cft_add(
        y, cft_div(cft_maximum(x, cft_scalar(0.1, CFT_F32)), cft_add_s(cft_square(x), 1.0)));
}
static cft_array *op_softmax(cft_array *x) { /* [2,5] */
    return cft_add(cft_log_softmax(x, 1), cft_softmax(x, 0));
}
static cft_array *op_stats(cft_array *x) { /* [2,5] */
    cft_array *l = cft_logsumexp(x, (int[]){1}, 1, true);
    cft_array *v = cft_var(x, (int[]){0}, 1, 1, true);
    return cft_add(cft_add(l, v), cft_mean(x, NULL, 0, false));
}
static cft_array *op_matmul(cft_array *x) { /* [4] @ [4,3] */
    return cft_relu(cft_matmul(x, MW));
}
static cft_array *op_movement(cft_array *x) { /* [2,3] */
    cft_array *t = cft_reshape(cft_transpose(x, (int[]){1, 0}), (int64_t[]){6}, 1);
    return cft_mul(t, cft_flatten(cft_expand_dims(x, 0), 0, -1));
}
static cft_array *op_concat(cft_array *x) { /* [5] */
    cft_array *s = cft_slice(x, (int64_t[]){1}, (int64_t[]){4}, NULL);
    cft_array *c = cft_concatenate((cft_array *[]){x, cft_square(s)}, 2, 0);
    return cft_pad(c, cft_scalar(0.5, CFT_F32), (int64_t[]){2}, (int64_t[]){1}, (int64_t[]){1});
}
static cft_array *op_take(cft_array *x) { /* [5] */
    return cft_mul(cft_take(x, IDX, 0), cft_index(x, 1));
}
static cft_array *op_take_along(cft_array *x) { /* [2,5] */
    return cft_take_along_axis(x, IDX2, 1);
}
static cft_array *op_cumsum(cft_array *x) { /* [5] */
    return cft_add(cft_cumsum(x, 0, false), cft_sort(x, 0, false));
}
static cft_array *op_conv(cft_array *x) { /* [1,6,6] * [2,1,3,3] */
    return cft_tanh(cft_conv2d(x, CW, NULL, (int64_t[]){1, 1}, NULL, 1));
}
static cft_array *op_pool(cft_array *x) { /* [2,4,4] */
    cft_array *m = cft_max_pool2d(x, (int64_t[]){2, 2}, NULL, NULL, NULL);
    cft_array *a = cft_avg_pool2d(x, (int64_t[]){2, 2}, NULL, (int64_t[]){1, 1}, false);
    return cft_add(cft_reshape(m, (int64_t[]){-1}, 1), cft_sum(a, NULL, 0, false));
}
static cft_array *op_norm(cft_array *x) { /* [2,5] */
    return cft_layer_norm(x, 1, NULL, NULL, 1e-5);
}
static cft_array *op_select(cft_array *x) { /* [6] */
    cft_array *c = cft_clamp(cft_scalar(-0.5, CFT_F32), x, cft_scalar(0.7, CFT_F32));
    return cft_where(cft_gt(x, cft_zeros_like(x)), c, cft_mul_s(x, 0.1));
}
static cft_array *op_attention(cft_array *x) { /* [3,4] */
    return cft_scaled_dot_product_attention(x, x, x, NULL, false);
}

typedef struct {
    const char *name;
    cft_array *(*f)(cft_array *);
    int nd;
    int64_t shape[4];
} op_row;

static const op_row op_rows[] = {
    {"elementwise", op_ew, 1, {6}},
    {"softmax", op_softmax, 2, {2, 5}},
    {"logsumexp/var/mean", op_stats, 2, {2, 5}},
    {"matmul", op_matmul, 1, {4}},
    {"transpose/reshape/flatten", op_movement, 2, {2, 3}},
    {"slice/concatenate/pad", op_concat, 1, {5}},
    {"take/index", op_take, 1, {5}},
    {"take_along_axis", op_take_along, 2, {2, 5}},
    {"cumsum/sort", op_cumsum, 1, {5}},
    {"conv2d", op_conv, 3, {1, 6, 6}},
    {"max_pool2d/avg_pool2d", op_pool, 3, {2, 4, 4}},
    {"layer_norm", op_norm, 2, {2, 5}},
    {"clamp/where", op_select, 1, {6}},
    {"attention", op_attention, 2, {3, 4}},
};

static cft_status op_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = ((const op_row *)env)->f(in[0]);
    return CFT_OK;
}
static cft_status op_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_sum(cft_square(((const op_row *)env)->f(in[0])), NULL, 0, false);
    return CFT_OK;
}

static cft_array *batch_of(const op_row *r, int64_t b, uint64_t seed) {
    int64_t shape[5] = {b};
    for (int i = 0; i < r->nd; i++)
        shape[i + 1] = r->shape[i];
    return randn(seed, shape, r->nd + 1);
}

static void op_sweep(void) {
    CW = randn(11, (int64_t[]){2, 1, 3, 3}, 4);
    MW = randn(12, (int64_t[]){4, 3}, 2);
    IDX = cft_from_i32((int32_t[]){4, 0, -2}, (int64_t[]){3}, 1);
    IDX2 = cft_from_i32((int32_t[]){1, 4, 0, 2}, (int64_t[]){2, 2}, 2);
    int64_t B = cft_dim_sym("B");
    for (size_t k = 0; k < sizeof op_rows / sizeof *op_rows; k++) {
        const op_row *r = &op_rows[k];
        void *env = (void *)r;
        cft_fn *fwd = cft_vmap(cft_fn_new(op_cb, env, 1, 1), NULL, NULL);
        cft_fn *psg = cft_vmap(cft_grad(cft_fn_new(op_loss, env, 1, 1), NULL, 0), NULL, NULL);
        cft_aval av = {CFT_F32, r->nd + 1, {B}};
        for (int i = 0; i < r->nd; i++)
            av.shape[i + 1] = r->shape[i];
        TEST("symbolic sweep: %s: vmap and vmap(grad) traced at B, evaluated at 3 and 5", r->name) {
            cft_fn *fs[2] = {fwd, psg};
            for (int w = 0; w < 2; w++) {
                cft_ir *ir = cft_make_ir(fs[w], &av);
                CHECK_MSG(ir, "%s: %s", w ? "vmap(grad)" : "vmap", cft_last_error_message());
                if (!ir)
                    continue;
                for (int64_t b = 3; b <= 5; b += 2) {
                    cft_array *x = batch_of(r, b, 80 + (uint64_t)b), *want, *got;
                    want = cft_fn_call1(fs[w], &x);
                    CHECK_EQ(cft_ir_eval(ir, &x, &got), CFT_OK);
                    CHECK_ARRAY_CLOSE(got, want, 1e-5, 1e-5);
                }
            }
        }
        TEST("symbolic sweep: %s: jit over B = 3, 4, 5, 6 traces twice", r->name) {
            cft_fn *j = cft_jit(psg);
            for (int64_t b = 3; b <= 6; b++) {
                cft_array *x = batch_of(r, b, 90 + (uint64_t)b);
                CHECK_ARRAY_CLOSE(cft_fn_call1(j, &x), cft_fn_call1(psg, &x), 1e-5, 1e-5);
            }
            cft_jit_stats st;
            cft_jit_stats_of(j, &st);
            CHECK_EQ(st.traces, 2);
            CHECK_EQ(st.symbolic_traces, 1);
        }
    }
}

/* (w1 [4,1,3,3], w2 [64,3], x [1,6,6] or [B,1,6,6], y [] or [B]) -> mean
 * cross-entropy of conv -> relu -> flatten (-1) -> linear */
static cft_status cnn_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *x = in[2];
    bool single = cft_array_ndim(x) == 3;
    cft_array *h = cft_relu(cft_conv2d(x, in[0], NULL, NULL, NULL, 1));
    h = single ? cft_reshape(h, (int64_t[]){64}, 1) : cft_reshape(h, (int64_t[]){-1, 64}, 2);
    out[0] = cft_mean(cft_cross_entropy(cft_matmul(h, in[1]), in[3]), NULL, 0, false);
    return CFT_OK;
}

static bool contains(const char *s, const char *sub) {
    return strstr(s, sub) != NULL;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    /* a private kernel cache, shared with the child process the CFT_DEBUG
     * test starts (it may be stopped by a closed pipe before cleaning up) */
    bool child = getenv("CFT_TEST_SYMBOLIC_CHILD") != NULL;
    char cache_dir[200];
    snprintf(cache_dir, sizeof cache_dir, "/tmp/cft-test-symbolic-%d", (int)getpid());
    if (!child)
        setenv("CFT_CACHE_DIR", cache_dir, 1);
    W1 = cft_mul_s(randn(1, (int64_t[]){64, 32}, 2), 0.2);
    B1 = cft_mul_s(randn(2, (int64_t[]){32}, 1), 0.1);
    W2 = cft_mul_s(randn(3, (int64_t[]){32, 10}, 2), 0.2);
    int64_t B = cft_dim_sym("B"), N = cft_dim_sym("N");

    TEST("dim expressions: interned, arithmetic, text, evaluation") {
        char buf[64];
        CHECK(cft_dim_is_symbolic(B) && cft_dim_valid(B) && !cft_dim_is_symbolic(64));
        CHECK_EQ(cft_dim_sym("B"), B);
        CHECK(B != N);
        CHECK_EQ(cft_dim_mul(B, 64), cft_dim_mul(64, B));
        CHECK_EQ(cft_dim_mul(cft_dim_mul(B, 8), 8), cft_dim_mul(B, 64));
        CHECK_EQ(cft_dim_add(B, B), cft_dim_mul(B, 2));
        CHECK_EQ(cft_dim_sub(cft_dim_add(B, 5), B), 5);
        CHECK_EQ(cft_dim_div(cft_dim_mul(B, 64), 64), B);
        CHECK_EQ(cft_dim_div(cft_dim_mul(B, N), N), B);
        CHECK_EQ(cft_dim_div(cft_dim_mul(B, 64), 3), CFT_DIM_INVALID);
        CHECK_EQ(cft_dim_div(cft_dim_add(B, 1), B), CFT_DIM_INVALID);
        CHECK(!strcmp(cft_dim_str(cft_dim_mul(B, 64), buf, sizeof buf), "B*64"));
        CHECK(!strcmp(cft_dim_str(cft_dim_add(cft_dim_mul(B, N), 1), buf, sizeof buf), "B*N+1"));
        CHECK(!strcmp(cft_dim_str(cft_dim_sub(B, 1), buf, sizeof buf), "B-1"));
        CHECK_EQ(cft_dim_eval(cft_dim_add(cft_dim_mul(B, N), 1), 2, (const char *[]){"B", "N"},
                              (int64_t[]){3, 5}),
                 16);
        CHECK_EQ(cft_dim_eval(B, 0, NULL, NULL), CFT_DIM_INVALID);
        /* C arithmetic on a symbol does not give a dim */
        CHECK(!cft_dim_valid(B * 4) && !cft_dim_valid(B + 1) && !cft_dim_valid(B * 64));
        CHECK_EQ(cft_dim_sym("2bad"), CFT_DIM_INVALID);
        cft_aval a = {CFT_F32, 2, {B, 64}};
        CHECK(!strcmp(cft_aval_str(&a, (char[96]){0}), "f32[B,64]"));
    }

    TEST("per-sample gradients traced at f32[B,64]: one IR, printed with B") {
        cft_aval av[5] = {
            aval_of(W1), aval_of(B1), aval_of(W2), {CFT_F32, 2, {B, 64}}, {CFT_I32, 1, {B}}};
        cft_ir *ir = cft_make_ir(per_sample(), av);
        CHECK_MSG(ir, "%s", cft_last_error_message());
        if (!ir)
            break;
        const char *txt = cft_ir_str(ir);
        CHECK_MSG(contains(txt, "x:f32[B,64]") || contains(txt, ":f32[B,64] "), "%s", txt);
        CHECK_MSG(contains(txt, "f32[B,64,32]"), "no per-sample grad of w1 in\n%s", txt);
        CHECK_MSG(contains(txt, "shape=(B,"), "no symbolic shape parameter in\n%s", txt);
        CHECK_EQ(cft_ir_typecheck(ir), CFT_OK);
        if (getenv("CHECK_VERBOSE"))
            cft_ir_print(cft_ir_cse(cft_ir_dce(ir)), stdout);
        /* the same IR at several batch sizes equals the function itself */
        for (int64_t b = 3; b <= 24; b *= 2) {
            cft_array *in[5], *want[3], *got[3];
            inputs(b, 100 + (uint64_t)b, in);
            CHECK_EQ(cft_fn_call(per_sample(), in, want), CFT_OK);
            CHECK_EQ(cft_ir_eval(ir, in, got), CFT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(got[k], want[k], 1e-6, 1e-6);
        }
        /* inputs that disagree about B */
        cft_array *in[5], *got[3];
        inputs(4, 7, in);
        in[4] = labels(5, 10);
        CHECK(cft_ir_eval(ir, in, got) != CFT_OK);
        CHECK_MSG(contains(cft_error_message(got[0]), "B is already 4"), "%s",
                  cft_error_message(got[0]));
    }

    TEST("batched gradient (mean over B) traced symbolically") {
        cft_aval av[5] = {
            aval_of(W1), aval_of(B1), aval_of(W2), {CFT_F32, 2, {B, 64}}, {CFT_I32, 1, {B}}};
        cft_ir *ir = cft_make_ir(batch_grad(), av);
        CHECK_MSG(ir, "%s", cft_last_error_message());
        if (!ir)
            break;
        for (int64_t b = 2; b <= 40; b = b * 3 + 1) {
            cft_array *in[5], *want[3], *got[3];
            inputs(b, 200 + (uint64_t)b, in);
            CHECK_EQ(cft_fn_call(batch_grad(), in, want), CFT_OK);
            CHECK_EQ(cft_ir_eval(ir, in, got), CFT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-6);
        }
    }

    TEST("transforms of a symbolic IR's function bind B from their tracers") {
        cft_aval av[5] = {
            aval_of(W1), aval_of(B1), aval_of(W2), {CFT_F32, 2, {B, 64}}, {CFT_I32, 1, {B}}};
        cft_ir *loss_ir = cft_make_ir(cft_fn_new(mlp, NULL, 5, 1), av);
        CHECK_MSG(loss_ir, "%s", cft_last_error_message());
        if (!loss_ir)
            break;
        cft_fn *g = cft_grad(cft_ir_fn(loss_ir), (int[]){0, 1, 2}, 3);
        for (int64_t b = 4; b <= 9; b += 5) {
            cft_array *in[5], *want[3], *got[3];
            inputs(b, 500 + (uint64_t)b, in);
            CHECK_EQ(cft_fn_call(batch_grad(), in, want), CFT_OK);
            CHECK_EQ(cft_fn_call(g, in, got), CFT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-6);
        }
    }

    TEST("shape errors name the symbols") {
        cft_aval av[5] = {{CFT_F32, 2, {32, 10}},
                          aval_of(B1),
                          aval_of(W2),
                          {CFT_F32, 2, {B, 64}},
                          {CFT_I32, 1, {B}}};
        CHECK(!cft_make_ir(cft_fn_new(mlp, NULL, 5, 1), av));
        const char *m = cft_last_error_message();
        CHECK_MSG(contains(m, "f32[B,64]") && contains(m, "f32[32,10]"), "%s", m);
        /* per-example labels of another size */
        cft_aval av2[5] = {
            aval_of(W1), aval_of(B1), aval_of(W2), {CFT_F32, 2, {B, 64}}, {CFT_I32, 1, {N}}};
        CHECK(!cft_make_ir(per_sample(), av2));
        m = cft_last_error_message();
        CHECK_MSG(contains(m, "B") && contains(m, "N"), "%s", m);
        /* an eager constant of symbolic shape is an error, not an allocation */
        cft_array *z = cft_zeros(CFT_F32, (int64_t[]){B, 3}, 2);
        CHECK(cft_failed(z) && contains(cft_error_message(z), "f32[B,3]"));
    }

    TEST("reshape, concatenate, constants and means over symbolic dims") {
        cft_fn *f = cft_fn_new(shapes_fn, NULL, 1, 3);
        cft_aval av = {CFT_F32, 3, {B, 4, 16}};
        cft_ir *ir = cft_make_ir(f, &av);
        CHECK_MSG(ir, "%s", cft_last_error_message());
        if (!ir)
            break;
        const char *txt = cft_ir_str(ir);
        CHECK_MSG(contains(txt, "f32[B*2]") && contains(txt, "f32[B*64]"), "%s", txt);
        for (int64_t b = 2; b <= 9; b += 7) {
            cft_array *x = randn(50 + (uint64_t)b, (int64_t[]){b, 4, 16}, 3), *want[3], *got[3];
            CHECK_EQ(cft_fn_call(f, &x, want), CFT_OK);
            CHECK_EQ(cft_ir_eval(ir, &x, got), CFT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(got[k], want[k], 1e-6, 1e-6);
        }
    }

    TEST("jit: B = 8, 16, 32, 64 traces twice (specialised, then symbolic), then never") {
        cft_fn *psg = per_sample(), *j = cft_jit(psg);
        for (int rep = 0; rep < 2; rep++)
            for (int64_t b = 8; b <= 64; b *= 2) {
                cft_array *in[5], *want[3], *got[3];
                inputs(b, 300 + (uint64_t)b, in);
                CHECK_EQ(cft_fn_call(psg, in, want), CFT_OK);
                CHECK_EQ(cft_fn_call(j, in, got), CFT_OK);
                for (int k = 0; k < 3; k++)
                    CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-5);
            }
        cft_jit_stats st;
        CHECK_EQ(cft_jit_stats_of(j, &st), CFT_OK);
        CHECK_EQ(st.traces, 2);
        CHECK_EQ(st.symbolic_traces, 1);
        CHECK_EQ(st.instances, 5); /* B=8 concrete, then B=16,32,64 and 8 symbolic */
        CHECK(!st.fallback);
        /* a new size later: no trace */
        cft_array *in[5], *got[3];
        inputs(100, 9, in);
        CHECK_EQ(cft_fn_call(j, in, got), CFT_OK);
        CHECK_EQ(cft_jit_stats_of(j, &st), CFT_OK);
        CHECK_EQ(st.traces, 2);
        /* sizes 1 get their own trace (never symbolic) */
        inputs(1, 10, in);
        cft_array *want[3];
        CHECK_EQ(cft_fn_call(psg, in, want), CFT_OK);
        CHECK_EQ(cft_fn_call(j, in, got), CFT_OK);
        for (int k = 0; k < 3; k++)
            CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-5);
        CHECK_EQ(cft_jit_stats_of(j, &st), CFT_OK);
        CHECK_EQ(st.traces, 3);
        CHECK_EQ(cft_jit_stats_of(psg, &st), CFT_E_ARG);
    }

    TEST("jit of the batched gradient (mean over B): symbolic, equal to the interpreter") {
        cft_fn *g = batch_grad(), *j = cft_jit(g);
        for (int64_t b = 5; b <= 80; b = b * 2 + 1) {
            cft_array *in[5], *want[3], *got[3];
            inputs(b, 400 + (uint64_t)b, in);
            CHECK_EQ(cft_fn_call(g, in, want), CFT_OK);
            for (int call = 0; call < 2; call++) {
                CHECK_EQ(cft_fn_call(j, in, got), CFT_OK);
                for (int k = 0; k < 3; k++)
                    CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-6);
            }
        }
        cft_jit_stats st;
        cft_jit_stats_of(j, &st);
        CHECK_EQ(st.traces, 2);
        CHECK_EQ(st.symbolic_traces, 1);
    }

    TEST("jit: dims equal in both calls share a symbol; others get their own") {
        cft_fn *f = cft_jit(cft_fn_new(shapes_fn, NULL, 1, 3));
        cft_array *out[3];
        for (int64_t b = 2; b <= 16; b *= 2) {
            cft_array *x = randn(60 + (uint64_t)b, (int64_t[]){b, 4, 16}, 3), *want[3];
            CHECK_EQ(cft_fn_call(cft_fn_new(shapes_fn, NULL, 1, 3), &x, want), CFT_OK);
            CHECK_EQ(cft_fn_call(f, &x, out), CFT_OK);
            for (int k = 0; k < 3; k++)
                CHECK_ARRAY_CLOSE(out[k], want[k], 1e-6, 1e-6);
        }
        cft_jit_stats st;
        cft_jit_stats_of(f, &st);
        CHECK_EQ(st.traces, 2);
        CHECK_EQ(st.symbolic_traces, 1);
    }

    TEST("jit: a shared symbol splits when its dims part ways, then serves every size") {
        cft_fn *f = cft_fn_new(two_dims_fn, NULL, 2, 1), *j = cft_jit(f);
        int64_t sizes[5][2] = {{8, 8}, {16, 16}, {32, 24}, {40, 48}, {9, 7}};
        for (int k = 0; k < 5; k++) {
            cft_array *in[2] = {randn(40 + (uint64_t)k, &sizes[k][0], 1),
                                randn(50 + (uint64_t)k, &sizes[k][1], 1)};
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, in), cft_fn_call1(f, in), 1e-5, 1e-5);
        }
        cft_jit_stats st;
        cft_jit_stats_of(j, &st);
        CHECK_EQ(st.traces, 3); /* [8],[8]; [B],[B]; [B],[N] */
        CHECK_EQ(st.symbolic_traces, 2);
        CHECK(!st.fallback);
    }

    TEST("jit: a function that cannot take a symbol falls back to one trace per shape") {
        cft_fn *f = cft_fn_new(c_arith_fn, NULL, 1, 1), *j = cft_jit(f);
        for (int64_t b = 4; b <= 16; b *= 2) {
            cft_array *x = randn(70 + (uint64_t)b, (int64_t[]){b, 64}, 2), *want, *got;
            want = cft_fn_call1(f, &x);
            got = cft_fn_call1(j, &x);
            CHECK_ARRAY_CLOSE(got, want, 1e-6, 1e-6);
        }
        cft_jit_stats st;
        cft_jit_stats_of(j, &st);
        CHECK(st.fallback);
        CHECK_EQ(st.symbolic_traces, 0);
        CHECK_EQ(st.traces, 3);
    }

    op_sweep();

    TEST("CNN: batched and per-sample gradients, jitted over B = 4..7, one symbolic trace each") {
        cft_array *w1 = randn(21, (int64_t[]){4, 1, 3, 3}, 4),
                  *w2 = randn(22, (int64_t[]){64, 3}, 2);
        cft_fn *loss = cft_fn_new(cnn_loss, NULL, 4, 1);
        cft_fn *fs[2] = {cft_grad(loss, (int[]){0, 1}, 2),
                         cft_vmap(cft_grad(loss, (int[]){0, 1}, 2),
                                  (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL)};
        for (int w = 0; w < 2; w++) {
            cft_fn *j = cft_jit(fs[w]);
            for (int64_t b = 4; b <= 7; b++) {
                cft_array *in[4] = {w1, w2, randn(30 + (uint64_t)b, (int64_t[]){b, 1, 6, 6}, 4),
                                    labels(b, 3)},
                          *want[2], *got[2];
                CHECK_EQ(cft_fn_call(fs[w], in, want), CFT_OK);
                CHECK_EQ(cft_fn_call(j, in, got), CFT_OK);
                for (int k = 0; k < 2; k++)
                    CHECK_ARRAY_CLOSE(got[k], want[k], 1e-5, 1e-5);
            }
            cft_jit_stats st;
            cft_jit_stats_of(j, &st);
            CHECK_EQ(st.traces, 2);
            CHECK_EQ(st.symbolic_traces, 1);
        }
    }

    TEST("CFT_DEBUG=1 explains each retrace") {
        char cmd[1400];
        snprintf(cmd, sizeof cmd,
                 "CFT_TEST_SYMBOLIC_CHILD=1 CFT_DEBUG=1 %s 'debug child' 2>&1 | grep -q "
                 "'cft_jit(per_sample_grads): input 3 dim 0 changed 8 -> 16: retracing with dim "
                 "symbolic (B)'",
                 argv[0]);
        CHECK_EQ(system(cmd), 0);
        snprintf(cmd, sizeof cmd,
                 "CFT_TEST_SYMBOLIC_CHILD=1 CFT_DEBUG=1 %s 'debug child' 2>&1 | grep -q 'input 4 "
                 "dim 0 changed 8 -> 16: retracing with dim symbolic (B)'",
                 argv[0]);
        CHECK_EQ(system(cmd), 0);
    }
    if (argc > 1 && !strcmp(argv[1], "debug child")) {
        cft_fn *j = cft_jit(per_sample());
        for (int64_t b = 8; b <= 32; b *= 2) {
            cft_array *in[5], *out[3];
            inputs(b, 1, in);
            cft_fn_call(j, in, out);
        }
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    if (!child && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache_dir);
    return check_summary();
}
