/* test_errors.c: the error model of core.h. Every kind of bad input gives a
 * non-NULL error array whose code and message name the call and the shapes;
 * errors are absorbing (the same object comes back out); calls that return
 * no array report through cft_last_error(); errors raised while tracing
 * under transforms name the op and the transform stack; leaked tracers,
 * inconsistent vmap batches, non-scalar grads and failing callbacks are
 * errors, never crashes. Nothing here may abort: CFT_ERRORS is cleared. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* The message of e contains every listed fragment. */
#define CHECK_MSG_HAS(e, ...)                                                                      \
    do {                                                                                           \
        const char *check_frags_[] = {__VA_ARGS__};                                                \
        const char *check_m_ = cft_error_message(e);                                               \
        for (size_t check_i_ = 0; check_i_ < sizeof check_frags_ / sizeof *check_frags_;           \
             check_i_++)                                                                           \
            CHECK_MSG(strstr(check_m_, check_frags_[check_i_]) != NULL,                            \
                      "message \"%s\" lacks \"%s\"", check_m_, check_frags_[check_i_]);            \
    } while (0)

static cft_array *f32m(int64_t r, int64_t c) {
    return cft_ones(CFT_F32, (int64_t[]){r, c}, 2);
}

/* ---- callbacks ---- */

/* sum(x @ ones[4,3]): a shape error for x of width 3 */
static cft_status matmul_bad(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_matmul(in[0], f32m(4, 3)), NULL, 0, false);
    return CFT_OK;
}

/* sum(reshape(x, [5])): an error raised by a primitive's shape rule */
static cft_status reshape_bad(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_reshape(in[0], (int64_t[]){5}, 1), NULL, 0, false);
    return CFT_OK;
}

static cft_array *leaked;
/* stores its input tracer in a static: the classic leak */
static cft_status leak_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    leaked = in[0];
    out[0] = cft_sum(cft_square(in[0]), NULL, 0, false);
    return CFT_OK;
}
/* uses the leaked tracer */
static cft_status use_leak(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul(in[0], leaked), NULL, 0, false);
    return CFT_OK;
}

static cft_status sum_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(in[0], NULL, 0, false);
    return CFT_OK;
}
static cft_status add_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(in[0], in[1]);
    return CFT_OK;
}
static cft_status square_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_square(in[0]);
    return CFT_OK;
}
/* returns an error status without setting its output */
static cft_status fail_unset(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)in, (void)nout, (void)out;
    return CFT_E_FOREIGN;
}
/* sets its output and still returns an error status */
static cft_status fail_set(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(in[0], NULL, 0, false);
    return CFT_E_IO;
}
/* two outputs: (sum x, x) */
static cft_status two_out(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(in[0], NULL, 0, false);
    out[1] = in[0];
    return CFT_OK;
}
/* (x, y) -> sum(y): does not depend on x */
static cft_status const_out(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(in[1], NULL, 0, false);
    return CFT_OK;
}

/* branches on a value: impossible while tracing */
static cft_status branchy(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_item(cft_sum(in[0], NULL, 0, false)) > 0 ? cft_exp(in[0]) : cft_neg(in[0]);
    return CFT_OK;
}

int main(int argc, char **argv) {
    unsetenv("CFT_ERRORS"); /* =abort would turn every check here into a crash */
    check_init(argc, argv);

    /* ---------------- eager errors ---------------- */

    TEST("cft_matmul shape mismatch names the call and both shapes") {
        cft_array *e = cft_matmul(f32m(2, 3), f32m(4, 5));
        CHECK(e != NULL);
        CHECK(cft_failed(e));
        CHECK_EQ(cft_error_code(e), CFT_E_SHAPE);
        CHECK_MSG_HAS(e, "cft_matmul", "f32[2,3]", "f32[4,5]");
        CHECK_EQ(cft_last_error(), CFT_E_SHAPE);
        CHECK(strcmp(cft_last_error_message(), cft_error_message(e)) == 0);
        /* batched operands whose batch dims do not broadcast */
        cft_array *b = cft_matmul(cft_ones(CFT_F32, (int64_t[]){2, 3, 4}, 3),
                                  cft_ones(CFT_F32, (int64_t[]){5, 4, 2}, 3));
        CHECK_EQ(cft_error_code(b), CFT_E_SHAPE);
        CHECK_MSG_HAS(b, "cft_matmul", "f32[2,3,4]", "f32[5,4,2]");
        /* a 0-d operand */
        CHECK_EQ(cft_error_code(cft_matmul(cft_scalar(1, CFT_F32), f32m(2, 2))), CFT_E_SHAPE);
    }

    TEST("broadcast failure in cft_add (and the other binary ops)") {
        cft_array *e = cft_add(f32m(2, 3), cft_ones(CFT_F32, (int64_t[]){4}, 1));
        CHECK_EQ(cft_error_code(e), CFT_E_SHAPE);
        CHECK_MSG_HAS(e, "cft_add", "f32[2,3]", "f32[4]");
        cft_array *m = cft_mul(cft_ones(CFT_I32, (int64_t[]){3, 1}, 2), f32m(2, 5));
        CHECK_EQ(cft_error_code(m), CFT_E_SHAPE);
        CHECK_MSG_HAS(m, "cft_mul", "[3,1]", "f32[2,5]");
        cft_array *w = cft_where(cft_ones(CFT_BOOL, (int64_t[]){3}, 1), f32m(2, 3), f32m(2, 4));
        CHECK_EQ(cft_error_code(w), CFT_E_SHAPE);
        CHECK_MSG_HAS(w, "cft_where", "f32[2,3]", "f32[2,4]");
    }

    TEST("bad axis in cft_sum and friends") {
        cft_array *x = f32m(2, 3);
        cft_array *e = cft_sum(x, (int[]){2}, 1, false);
        CHECK_EQ(cft_error_code(e), CFT_E_ARG);
        CHECK_MSG_HAS(e, "cft_sum", "2", "f32[2,3]");
        CHECK_MSG_HAS(cft_sum(x, (int[]){-3}, 1, false), "cft_sum", "-3");
        CHECK_MSG_HAS(cft_max(x, (int[]){5}, 1, true), "cft_max", "f32[2,3]");
        CHECK_MSG_HAS(cft_mean(x, (int[]){7}, 1, false), "cft_mean", "f32[2,3]");
        CHECK_MSG_HAS(cft_argmax(x, 2, false), "cft_argmax", "f32[2,3]");
        CHECK(cft_failed(cft_softmax(x, 4)));
        CHECK(cft_failed(cft_transpose(x, (int[]){0, 0})));
        CHECK(cft_failed(cft_moveaxis(x, 0, 2)));
    }

    TEST("bad dtype: cft_log on i32, cft_where on a float condition") {
        cft_array *e = cft_log(cft_arange(1, 4, 1, CFT_I32));
        CHECK_EQ(cft_error_code(e), CFT_E_DTYPE);
        CHECK_MSG_HAS(e, "log", "i32[3]");
        cft_array *w = cft_where(f32m(1, 1), f32m(1, 1), f32m(1, 1));
        CHECK_EQ(cft_error_code(w), CFT_E_DTYPE);
        CHECK_MSG_HAS(w, "cft_where", "bool", "f32[1,1]");
        CHECK_EQ(cft_error_code(cft_logical_not(f32m(1, 1))), CFT_E_DTYPE);
        CHECK_EQ(cft_error_code(cft_astype(f32m(1, 1), (cft_dtype)42)), CFT_E_DTYPE);
        CHECK_EQ(cft_error_code(cft_zeros((cft_dtype)-1, NULL, 0)), CFT_E_DTYPE);
        CHECK(cft_failed(cft_random_uniform(cft_random_key(0), CFT_I32, (int64_t[]){2}, 1, 0, 1)));
    }

    TEST("reading a traced value fails the call with a message saying what to use") {
        cft_array *x = cft_from_f32((float[]){1, 2}, (int64_t[]){2}, 1);
        cft_fn *f = cft_fn_new(branchy, NULL, 1, 1);
        cft_array *y = cft_fn_call1(f, &x); /* plain calls are staged: traced */
        CHECK(cft_failed(y) && cft_error_code(y) == CFT_E_TRACE);
        CHECK(strstr(cft_error_message(y), "cft_item") &&
              strstr(cft_error_message(y), "cft_where") &&
              strstr(cft_error_message(y), "cft_fn_uncached"));
        CHECK(cft_failed(cft_fn_call1(cft_grad(cft_fn_new(branchy, NULL, 1, 1), NULL, 0), &x)));
        /* op by op, the value is concrete and the right branch is taken */
        y = cft_fn_call1(cft_fn_uncached(cft_fn_new(branchy, NULL, 1, 1)), &x);
        CHECK(!cft_failed(y));
        CHECK_CLOSE(cft_item_at(y, 1), exp(2.0), 1e-6, 0);
    }
    TEST("solve of A[2,2] with a 1-d B[3] is an error about [3,1], never shape[-1]") {
        cft_array *e = cft_linalg_solve(cft_eye(2, CFT_F32), cft_zeros(CFT_F32, (int64_t[]){3}, 1));
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "f32[3,1]") != NULL);
        CHECK(strstr(cft_error_message(e), "cft_linalg_solve") == cft_error_message(e));
    }
    TEST("NULL arguments are errors, not crashes") {
        cft_array *x = f32m(2, 2);
        cft_array *e = cft_add(NULL, x);
        CHECK(e != NULL);
        CHECK_EQ(cft_error_code(e), CFT_E_ARG);
        CHECK_MSG_HAS(e, "cft_add", "NULL");
        CHECK_EQ(cft_error_code(cft_add(x, NULL)), CFT_E_ARG);
        CHECK_EQ(cft_error_code(cft_exp(NULL)), CFT_E_ARG);
        CHECK_EQ(cft_error_code(cft_sum(NULL, NULL, 0, false)), CFT_E_ARG);
        CHECK_EQ(cft_error_code(cft_matmul(NULL, NULL)), CFT_E_ARG);
        CHECK_EQ(cft_error_code(cft_reshape(NULL, (int64_t[]){1}, 1)), CFT_E_ARG);
        CHECK_EQ(cft_error_code(cft_from_data(NULL, CFT_F32, (int64_t[]){2}, 1)), CFT_E_ARG);
        CHECK_EQ(cft_error_code(cft_from_f32((float[]){1}, NULL, 1)), CFT_E_ARG);
        CHECK_EQ(cft_error_code(cft_concatenate(NULL, 2, 0)), CFT_E_ARG);
        CHECK_EQ(cft_error_code(cft_stack((cft_array *[]){x, NULL}, 2, 0)), CFT_E_ARG);
        CHECK_EQ(cft_error_code(cft_random_split(NULL, 2)), CFT_E_ARG);
        CHECK(cft_failed(NULL));
        CHECK_EQ(cft_error_code(NULL), CFT_E_ARG);
        CHECK(cft_error_message(NULL)[0] != 0);
        CHECK(isnan(cft_item(NULL)));
        CHECK_EQ(cft_array_size(NULL), 0);
        CHECK(!cft_is_concrete(NULL));
        /* NULL functions and NULL inputs to functions */
        cft_array *out[1] = {NULL};
        CHECK_EQ(cft_fn_call(NULL, &x, out), CFT_E_ARG);
        cft_fn *f = cft_fn_new(square_cb, NULL, 1, 1);
        CHECK_EQ(cft_fn_call(f, (cft_array *[]){NULL}, out), CFT_E_ARG);
        CHECK(cft_failed(out[0]));
        CHECK_MSG_HAS(out[0], "input 0 is NULL");
        CHECK_EQ(cft_fn_call(f, NULL, out), CFT_E_ARG);
        CHECK_EQ(cft_fn_call(f, &x, NULL), CFT_E_ARG);
        CHECK(cft_failed(cft_fn_call1(NULL, &x)));
        CHECK(cft_fn_failed(cft_fn_new(NULL, NULL, 1, 1)));
        CHECK_EQ(cft_last_error(), CFT_E_ARG);
        CHECK(cft_fn_failed(cft_fn_new(square_cb, NULL, 1, 0))); /* no outputs */
        /* no function comes back NULL: an error function carries the message */
        cft_fn *eg = cft_grad(NULL, NULL, 0);
        CHECK(eg != NULL && cft_fn_failed(eg));
        CHECK(strstr(cft_fn_error_message(eg), "cft_grad") != NULL);
        CHECK(cft_fn_failed(cft_vmap(NULL, NULL, NULL)));
        CHECK(strstr(cft_last_error_message(), "cft_vmap") != NULL);
        CHECK(cft_fn_failed(cft_jit(NULL)));
        CHECK(strstr(cft_last_error_message(), "cft_jit") != NULL);
        /* transforms of an error function return it; calling it fails */
        cft_fn *ev = cft_jit(cft_vmap(cft_grad(eg, NULL, 0), NULL, NULL));
        CHECK(ev == eg);
        cft_array *eo[1] = {NULL};
        CHECK_EQ(cft_fn_call(ev, &x, eo), CFT_E_ARG);
        CHECK(cft_failed(eo[0]) && strstr(cft_error_message(eo[0]), "cft_grad") != NULL);
        CHECK(cft_make_ir(NULL, NULL) == NULL);
        CHECK_EQ(cft_vjp(NULL, &x, out, NULL), CFT_E_ARG);
        CHECK(cft_ir_typecheck(NULL) != CFT_OK);
        CHECK(cft_ir_eval(NULL, &x, out) != CFT_OK);
    }

    TEST("reshape size mismatch") {
        cft_array *e = cft_reshape(f32m(2, 3), (int64_t[]){4}, 1);
        CHECK_EQ(cft_error_code(e), CFT_E_SHAPE);
        CHECK_MSG_HAS(e, "reshape", "f32[2,3]", "f32[4]");
        CHECK_EQ(cft_error_code(cft_reshape(f32m(2, 3), (int64_t[]){-1, 4}, 2)), CFT_E_SHAPE);
        CHECK(cft_failed(cft_reshape(f32m(2, 3), (int64_t[]){-1, -1}, 2)));
        CHECK(cft_failed(cft_reshape(f32m(2, 3), (int64_t[]){-2, -3}, 2)));
    }

    TEST("other creation and shape errors") {
        CHECK_EQ(cft_error_code(cft_zeros(CFT_F32, (int64_t[]){-1}, 1)), CFT_E_SHAPE);
        CHECK_EQ(cft_error_code(cft_zeros(CFT_F32, (int64_t[]){1}, CFT_MAX_NDIM + 1)), CFT_E_SHAPE);
        CHECK(cft_failed(cft_concatenate((cft_array *[]){f32m(2, 3), f32m(2, 4)}, 2, 0)));
        CHECK(cft_failed(cft_stack((cft_array *[]){f32m(2, 3), f32m(3, 2)}, 2, 0)));
        CHECK(cft_failed(cft_dot_general(f32m(2, 3), f32m(2, 3), (int[]){1}, (int[]){1}, 1, NULL,
                                         NULL, 0)) == false); /* a valid contraction */
        CHECK(cft_failed(
            cft_dot_general(f32m(2, 3), f32m(2, 3), (int[]){0}, (int[]){1}, 1, NULL, NULL, 0)));
        CHECK(cft_failed(cft_random_split(f32m(1, 2), 2))); /* not a key */
        CHECK(cft_failed(cft_one_hot(f32m(2, 2), 3, CFT_F32)));
        CHECK(cft_failed(cft_cross_entropy(f32m(2, 3), cft_zeros(CFT_I32, (int64_t[]){3}, 1))));
    }

    /* ---------------- absorbing ---------------- */

    TEST("absorbing: an error goes through every op unchanged") {
        cft_array *x = f32m(2, 3);
        cft_array *e = cft_matmul(x, x);
        CHECK(cft_failed(e));
        CHECK(cft_sum(e, NULL, 0, false) == e);
        CHECK(cft_sum(cft_matmul(x, x), NULL, 0, false) != NULL);
        CHECK(cft_exp(e) == e);
        CHECK(cft_add(e, x) == e);
        CHECK(cft_add(x, e) == e);
        CHECK(cft_add_s(e, 1) == e);
        CHECK(cft_reshape(e, (int64_t[]){6}, 1) == e);
        CHECK(cft_transpose(e, NULL) == e);
        CHECK(cft_astype(e, CFT_F64) == e);
        CHECK(cft_where(e, x, x) == e);
        CHECK(cft_softmax(e, 0) == e);
        CHECK(cft_mse(e, x) == e);
        CHECK(cft_matmul(x, e) == e);
        CHECK(cft_stack((cft_array *[]){x, e}, 2, 0) == e);
        CHECK(cft_zeros_like(e) == e);
        CHECK(cft_random_normal(e, CFT_F32, (int64_t[]){2}, 1) == e);
        /* a nested expression needs one check, and the first error wins */
        cft_array *e2 = cft_log(cft_zeros(CFT_I32, (int64_t[]){1}, 1));
        CHECK(cft_add(e, e2) == e);
        CHECK(cft_add(e2, e) == e2);
        cft_array *deep = cft_mean(cft_tanh(cft_mul(cft_add_s(e, 1), x)), NULL, 0, false);
        CHECK(deep == e);
        CHECK_EQ(cft_error_code(deep), CFT_E_SHAPE);
        /* functions absorb too: an error input is every output */
        cft_fn *f = cft_fn_new(two_out, NULL, 1, 2);
        cft_array *out[2] = {NULL, NULL};
        CHECK_EQ(cft_fn_call(f, &e, out), CFT_E_SHAPE);
        CHECK(out[0] == e && out[1] == e);
        CHECK(cft_fn_call1(cft_grad(cft_fn_new(sum_cb, NULL, 1, 1), NULL, 0), &e) == e);
    }

    /* ---------------- last error ---------------- */

    TEST("cft_last_error after calls that return no array") {
        cft_array *e = cft_matmul(f32m(2, 3), f32m(2, 3));
        cft_clear_error();
        CHECK_EQ(cft_last_error(), CFT_OK);
        CHECK(cft_last_error_message()[0] == 0);
        float buf[6];
        CHECK_EQ(cft_copy_to(e, CFT_F32, buf), CFT_E_SHAPE);
        CHECK_EQ(cft_last_error(), CFT_E_SHAPE);
        CHECK(strcmp(cft_last_error_message(), cft_error_message(e)) == 0);
        cft_clear_error();
        CHECK_EQ(cft_copy_to(f32m(2, 3), CFT_F32, NULL), CFT_E_ARG);
        CHECK_EQ(cft_last_error(), CFT_E_ARG);
        CHECK(strstr(cft_last_error_message(), "cft_copy_to") != NULL);
        /* a success does not clear it */
        CHECK_EQ(cft_copy_to(f32m(2, 3), CFT_F32, buf), CFT_OK);
        CHECK_EQ(cft_last_error(), CFT_E_ARG);
        cft_clear_error();
        CHECK_EQ(cft_last_error(), CFT_OK);
        /* a failed cft_grad construction: an error function and a last error */
        CHECK(cft_fn_failed(cft_grad(cft_fn_new(two_out, NULL, 1, 2), NULL, 0)));
        CHECK_EQ(cft_last_error(), CFT_E_ARG);
        CHECK(strstr(cft_last_error_message(), "cft_grad") != NULL);
        cft_clear_error();
        cft_fn *g5 = cft_grad(cft_fn_new(sum_cb, NULL, 1, 1), (int[]){5}, 1);
        CHECK(cft_fn_failed(g5) && strstr(cft_fn_error_message(g5), "argnum 5") != NULL);
        CHECK(strstr(cft_last_error_message(), "argnum") != NULL);
        CHECK(cft_fn_failed(cft_jacrev(cft_fn_new(sum_cb, NULL, 1, 1), (int[]){-2}, 1)));
        CHECK_EQ(cft_last_error(), CFT_E_ARG);
        /* hessian names itself, not the jacrev it is built from */
        CHECK(cft_fn_failed(cft_hessian(cft_fn_new(sum_cb, NULL, 1, 1), 4)));
        CHECK(strstr(cft_last_error_message(), "cft_hessian") != NULL);
        /* cft_make_ir of a failing function */
        cft_clear_error();
        cft_aval av = cft_array_aval(f32m(2, 3));
        CHECK(cft_make_ir(cft_fn_new(matmul_bad, NULL, 1, 1), &av) == NULL);
        CHECK_EQ(cft_last_error(), CFT_E_SHAPE);
        CHECK(strstr(cft_last_error_message(), "cft_matmul") != NULL);
        CHECK(cft_fn_print_ir(cft_fn_new(matmul_bad, NULL, 1, 1), &av, stdout) == CFT_E_SHAPE);
    }

    /* ---------------- under transforms ---------------- */

    TEST("a shape error inside vmap(grad(f)) names the op, the function and the transforms") {
        cft_fn *g = cft_vmap(cft_grad(cft_fn_new(matmul_bad, NULL, 1, 1), NULL, 0), NULL, NULL);
        cft_array *x = f32m(5, 3), *out[1];
        CHECK_EQ(cft_fn_call(g, &x, out), CFT_E_SHAPE);
        CHECK(cft_failed(out[0]));
        /* per example x is f32[3] */
        CHECK_MSG_HAS(out[0], "cft_matmul", "f32[3]", "f32[4,3]",
                      "(while tracing 'matmul_bad' under grad under vmap)");
        CHECK_EQ(cft_last_error(), CFT_E_SHAPE);
        CHECK(strstr(cft_last_error_message(), "(while tracing ") != NULL);
        /* the same for an error raised by a primitive's own shape rule */
        cft_fn *h = cft_vmap(cft_grad(cft_fn_new(reshape_bad, NULL, 1, 1), NULL, 0), NULL, NULL);
        CHECK_EQ(cft_fn_call(h, &x, out), CFT_E_SHAPE);
        CHECK_MSG_HAS(out[0], "reshape", "f32[3]", "f32[5]",
                      "(while tracing 'reshape_bad' under grad under vmap)");
        /* an error from jvp and from jacfwd */
        cft_array *jin[2] = {x, x}, *jout[2];
        CHECK(cft_fn_call(cft_jvp(cft_fn_new(matmul_bad, NULL, 1, 1)), jin, jout) != CFT_OK);
        CHECK_MSG_HAS(jout[0], "cft_matmul", "(while tracing 'matmul_bad' under jvp)");
        CHECK(cft_failed(jout[1]));
        CHECK(
            cft_failed(cft_fn_call1(cft_jacfwd(cft_fn_new(matmul_bad, NULL, 1, 1), NULL, 0), &x)));
        /* the annotation is added once, not per level */
        const char *m = cft_error_message(out[0]);
        CHECK(strstr(m, "(while tracing ") &&
              strstr(strstr(m, "(while tracing ") + 1, "(while tracing ") == NULL);
    }

    TEST("a leaked tracer gives an error, not a crash") {
        leaked = NULL;
        cft_array *x = cft_from_f32((float[]){1, 2, 3}, (int64_t[]){3}, 1);
        cft_array *g = cft_fn_call1(cft_grad(cft_fn_new(leak_cb, NULL, 1, 1), NULL, 0), &x);
        CHECK(!cft_failed(g));
        CHECK_ARRAY_CLOSE(g, cft_from_f32((float[]){2, 4, 6}, (int64_t[]){3}, 1), 0, 0);
        CHECK(leaked != NULL);
        CHECK(!cft_is_concrete(leaked));
        cft_array *e = cft_add(leaked, x);
        CHECK_EQ(cft_error_code(e), CFT_E_TRACE);
        CHECK_MSG_HAS(e, "leaked tracer");
        CHECK_EQ(cft_error_code(cft_exp(leaked)), CFT_E_TRACE);
        CHECK_EQ(cft_error_code(cft_sum(leaked, NULL, 0, false)), CFT_E_TRACE);
        float buf[3];
        CHECK_EQ(cft_copy_to(leaked, CFT_F32, buf), CFT_E_TRACE);
        CHECK(isnan(cft_item_at(leaked, 0)));
        CHECK(!cft_allclose(leaked, x, 1, 1, true));
        /* its shape is still readable */
        CHECK_EQ(cft_array_size(leaked), 3);
        /* used inside another transform */
        cft_array *out[1];
        CHECK_EQ(cft_fn_call(cft_grad(cft_fn_new(use_leak, NULL, 1, 1), NULL, 0), &x, out),
                 CFT_E_TRACE);
        CHECK_MSG_HAS(out[0], "leaked tracer");
        CHECK_EQ(cft_fn_call(cft_vmap(cft_fn_new(use_leak, NULL, 1, 1), NULL, NULL),
                             (cft_array *[]){cft_ones(CFT_F32, (int64_t[]){2, 3}, 2)}, out),
                 CFT_E_TRACE);
        /* a tracer leaked out of a plain (staged) call, too; with CFT_EAGER=1
         * the call is not staged and the "leak" is a concrete array */
        leaked = NULL;
        CHECK(!cft_failed(cft_fn_call1(cft_fn_new(leak_cb, NULL, 1, 1), &x)));
        CHECK(leaked != NULL);
        const bool eager = getenv("CFT_EAGER") && atoi(getenv("CFT_EAGER")) != 0;
        CHECK_EQ(cft_error_code(cft_neg(leaked)), eager ? CFT_OK : CFT_E_TRACE);
        /* leaked out of vmap */
        leaked = NULL;
        cft_fn *vf = cft_vmap(cft_fn_new(leak_cb, NULL, 1, 1), NULL, NULL);
        CHECK(!cft_failed(
            cft_fn_call1(vf, (cft_array *[]){cft_ones(CFT_F32, (int64_t[]){4, 3}, 2)})));
        CHECK_EQ(cft_error_code(cft_mul(leaked, leaked)), CFT_E_TRACE);
        leaked = NULL;
    }

    TEST("vmap with inconsistent batch sizes, bad axes, unbatched outputs") {
        cft_fn *f = cft_fn_new(add_cb, NULL, 2, 1);
        cft_array *a = f32m(3, 2), *b = f32m(4, 2), *out[1];
        CHECK_EQ(cft_fn_call(cft_vmap(f, NULL, NULL), (cft_array *[]){a, b}, out), CFT_E_SHAPE);
        CHECK_MSG_HAS(out[0], "cft_vmap", "batch sizes differ", "3", "4");
        /* sizes agree along the chosen axes: per example f32[3] + f32[1] */
        CHECK_EQ(cft_fn_call(cft_vmap(f, (int[]){1, 1}, NULL),
                             (cft_array *[]){f32m(3, 2), f32m(1, 2)}, out),
                 CFT_OK);
        CHECK_EQ(cft_array_dim(out[0], 0), 2);
        CHECK_EQ(cft_array_dim(out[0], 1), 3);
        /* in_axes out of range */
        CHECK_EQ(cft_fn_call(cft_vmap(f, (int[]){2, 0}, NULL), (cft_array *[]){a, a}, out),
                 CFT_E_ARG);
        CHECK_MSG_HAS(out[0], "in_axes", "f32[3,2]");
        CHECK_EQ(cft_fn_call(cft_vmap(f, (int[]){-3, 0}, NULL), (cft_array *[]){a, a}, out),
                 CFT_E_ARG);
        /* nothing batched */
        CHECK_EQ(cft_fn_call(cft_vmap(f, (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED}, NULL),
                             (cft_array *[]){a, a}, out),
                 CFT_E_ARG);
        /* a 0-d input cannot be batched */
        CHECK(cft_fn_call(cft_vmap(f, NULL, NULL), (cft_array *[]){cft_scalar(1, CFT_F32), a},
                          out) != CFT_OK);
        /* an output that depends on the batch cannot be CFT_NOT_BATCHED */
        CHECK_EQ(
            cft_fn_call(cft_vmap(f, NULL, (int[]){CFT_NOT_BATCHED}), (cft_array *[]){a, a}, out),
            CFT_E_ARG);
        CHECK_MSG_HAS(out[0], "out_axes");
        /* out_axes out of range */
        CHECK_EQ(cft_fn_call(cft_vmap(f, NULL, (int[]){3}), (cft_array *[]){a, a}, out), CFT_E_ARG);
        /* ... but one that does not may be */
        cft_fn *c = cft_fn_new(const_out, NULL, 2, 1);
        CHECK_EQ(cft_fn_call(cft_vmap(c, (int[]){0, CFT_NOT_BATCHED}, (int[]){CFT_NOT_BATCHED}),
                             (cft_array *[]){a, b}, out),
                 CFT_OK);
        CHECK_EQ(cft_item(out[0]), 8);
        /* inconsistent sizes deep inside: vmap of grad of vmap */
        cft_fn *inner = cft_vmap(f, (int[]){0, CFT_NOT_BATCHED}, NULL); /* (B,k) + (k) */
        cft_fn *bad = cft_vmap(inner, (int[]){0, 0}, NULL);
        CHECK(cft_fn_call(bad,
                          (cft_array *[]){cft_ones(CFT_F32, (int64_t[]){2, 3, 4}, 3),
                                          cft_ones(CFT_F32, (int64_t[]){2, 5}, 2)},
                          out) != CFT_OK);
        CHECK(cft_failed(out[0]));
    }

    TEST("grad of a non-scalar or non-float output, of an integer input") {
        cft_fn *g = cft_grad(cft_fn_new(square_cb, NULL, 1, 1), NULL, 0);
        cft_array *x = f32m(2, 2), *out[1];
        CHECK_EQ(cft_fn_call(g, &x, out), CFT_E_SHAPE);
        CHECK_MSG_HAS(out[0], "cft_grad", "scalar", "f32[2,2]");
        /* with a scalar input the output is a scalar: fine */
        CHECK_EQ(cft_fn_call(g, (cft_array *[]){cft_scalar(2, CFT_F32)}, out), CFT_OK);
        CHECK_EQ(cft_item(out[0]), 4);
        CHECK_EQ(cft_fn_call(cft_grad(cft_fn_new(sum_cb, NULL, 1, 1), NULL, 0),
                             (cft_array *[]){cft_ones(CFT_I32, (int64_t[]){3}, 1)}, out),
                 CFT_E_DTYPE);
        CHECK_MSG_HAS(out[0], "cft_grad", "i32[3]");
        cft_fn *vg = cft_value_and_grad(cft_fn_new(square_cb, NULL, 1, 1), NULL, 0, false);
        cft_array *o2[2];
        CHECK_EQ(cft_fn_call(vg, &x, o2), CFT_E_SHAPE);
        CHECK(cft_failed(o2[0]) && cft_failed(o2[1]));
        /* under vmap the per-example output must be scalar */
        cft_fn *psg = cft_vmap(g, NULL, NULL);
        CHECK_EQ(cft_fn_call(psg, (cft_array *[]){cft_ones(CFT_F32, (int64_t[]){3, 2}, 2)}, out),
                 CFT_E_SHAPE);
        CHECK_MSG_HAS(out[0], "scalar", "f32[2]");
        /* jacfwd wrt an integer input */
        CHECK_EQ(
            cft_error_code(cft_fn_call1(cft_jacfwd(cft_fn_new(square_cb, NULL, 1, 1), NULL, 0),
                                        (cft_array *[]){cft_ones(CFT_I32, (int64_t[]){2}, 1)})),
            CFT_E_DTYPE);
    }

    TEST("wrong shapes given to jvp tangents, pullback cotangents, IR inputs") {
        cft_fn *f = cft_fn_new(square_cb, NULL, 1, 1);
        cft_array *x = f32m(2, 2), *out[2];
        CHECK_EQ(cft_fn_call(cft_jvp(f), (cft_array *[]){x, f32m(2, 3)}, out), CFT_E_SHAPE);
        CHECK_MSG_HAS(out[0], "cft_jvp", "tangent", "f32[2,3]", "f32[2,2]");
        cft_fn *pb;
        CHECK_EQ(cft_vjp(f, &x, out, &pb), CFT_OK);
        CHECK_EQ(cft_fn_call(pb, (cft_array *[]){f32m(3, 2)}, out), CFT_E_SHAPE);
        CHECK_MSG_HAS(out[0], "pullback", "cotangent", "f32[3,2]", "f32[2,2]");
        cft_aval av = cft_array_aval(x);
        cft_ir *ir = cft_make_ir(f, &av);
        CHECK(ir != NULL);
        CHECK_EQ(cft_ir_eval(ir, (cft_array *[]){f32m(2, 3)}, out), CFT_E_SHAPE);
        CHECK_MSG_HAS(out[0], "cft_ir_eval", "f32[2,3]", "f32[2,2]");
        CHECK_EQ(cft_ir_eval(ir, (cft_array *[]){NULL}, out), CFT_E_ARG);
        /* a cached function called with a new dtype re-traces, no error */
        CHECK_EQ(cft_fn_call(f, (cft_array *[]){cft_ones(CFT_I32, (int64_t[]){2, 2}, 2)}, out),
                 CFT_OK);
        CHECK_EQ(cft_array_dtype(out[0]), CFT_I32);
    }

    TEST("a callback that returns an error status") {
        cft_array *x = f32m(2, 2), *out[1];
        cft_fn *f = cft_fn_named(cft_fn_new(fail_unset, NULL, 1, 1), "my_fn");
        CHECK_EQ(cft_fn_call(f, &x, out), CFT_E_FOREIGN);
        CHECK(out[0] != NULL && cft_failed(out[0]));
        CHECK_EQ(cft_error_code(out[0]), CFT_E_FOREIGN);
        CHECK_MSG_HAS(out[0], "my_fn");
        CHECK_EQ(cft_last_error(), CFT_E_FOREIGN);
        cft_fn *h = cft_fn_named(cft_fn_new(fail_set, NULL, 1, 1), "io_fn");
        CHECK_EQ(cft_fn_call(h, &x, out), CFT_E_IO);
        CHECK_EQ(cft_error_code(out[0]), CFT_E_IO);
        CHECK_MSG_HAS(out[0], "io_fn", "error");
        /* under every transform */
        CHECK_EQ(cft_fn_call(cft_grad(h, NULL, 0), &x, out), CFT_E_IO);
        CHECK_EQ(cft_fn_call(cft_vmap(f, NULL, NULL), &x, out), CFT_E_FOREIGN);
        CHECK_EQ(cft_fn_call(cft_vmap(cft_grad(f, NULL, 0), NULL, NULL), &x, out), CFT_E_FOREIGN);
        CHECK_EQ(cft_error_code(cft_fn_call1(cft_jacrev(h, NULL, 0), &x)), CFT_E_IO);
        CHECK_EQ(cft_error_code(cft_fn_call1(cft_hessian(h, 0), &x)), CFT_E_IO);
        cft_fn *pb;
        CHECK_EQ(cft_vjp(f, &x, out, &pb), CFT_E_FOREIGN);
        CHECK(pb == NULL);
        /* an error array as an output counts as failure with its own code */
        cft_array *jo[2];
        CHECK_EQ(cft_fn_call(cft_jvp(h), (cft_array *[]){x, x}, jo), CFT_E_IO);
        CHECK(cft_failed(jo[0]) && cft_failed(jo[1]));
    }

    return check_summary();
}
