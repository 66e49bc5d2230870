/* test_ir_parse.c: the IR's text form read back (cft_ir_parse).
 *
 * For IRs with constants, nested IRs (scan, while, cond, checkpoint) and
 * symbolic dims: print -> parse -> print is the identity, the parsed IR
 * evaluates bit for bit as the original, and a parsed IR is an ordinary
 * function again (its gradient equals the original's gradient). Then the
 * errors: every malformed text is an error naming line and column and what
 * was expected, never a crash. (CFT_IR_ROUNDTRIP=1 runs the same check on
 * every IR of the whole suite; .ci/run sets it for one pass.) */
#include <math.h>
#include <string.h>

#include "array/dim.h"
#include "check.h"

static cft_array *bias; /* a captured constant */

static cft_status mlp(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[1], in[0]), bias));
    out[0] = cft_sum(cft_mul(h, h), NULL, 0, false);
    return CFT_OK;
}

static cft_status sc_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(cft_mul(in[0], in[1]), cft_sin(in[1]));
    out[1] = cft_mul(in[0], in[0]);
    return CFT_OK;
}
static cft_status scan_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_fn *b = cft_fn_new(sc_body, NULL, 2, 2);
    cft_array *args[2] = {in[0], in[1]}, *res[2];
    cft_status st = cft_scan(b, 0, 1, cft_array_dim(in[1], 0), false, args, res);
    out[0] = cft_add(cft_sum(res[1], NULL, 0, false), cft_sum(res[0], NULL, 0, false));
    return st;
}

static cft_status w_cond(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_lt(in[2], cft_scalar(7, CFT_I32));
    return CFT_OK;
}
static cft_status w_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(in[1], cft_mul(in[0], cft_cos(in[1])));
    out[1] = cft_add(in[2], cft_ones_like(in[2]));
    return CFT_OK;
}
static cft_status while_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_fn *c = cft_fn_new(w_cond, NULL, 3, 1), *b = cft_fn_new(w_body, NULL, 3, 2);
    cft_array *args[3] = {in[0], in[1], cft_scalar(0, CFT_I32)}, *res[2];
    cft_status st = cft_while_loop_bounded(c, b, 1, 2, 10, args, res);
    out[0] = cft_sum(res[0], NULL, 0, false);
    return st;
}

static cft_status br_t(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul(cft_exp(in[0]), in[1]);
    return CFT_OK;
}
static cft_status br_f(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *m = cft_transpose(cft_reshape(in[0], (int64_t[]){2, 3}, 2), (int[]){1, 0});
    out[0] = cft_sub(in[1], cft_reshape(m, (int64_t[]){6}, 1));
    return CFT_OK;
}
static cft_status cond_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_fn *t = cft_checkpoint(cft_fn_new(br_t, NULL, 2, 1), CFT_SAVE_NOTHING);
    cft_fn *f = cft_fn_new(br_f, NULL, 2, 1);
    cft_array *pred = cft_gt(cft_sum(in[0], NULL, 0, false), cft_scalar(0, CFT_F32)), *r[1];
    cft_status st = cft_cond(pred, t, f, 2, in, r);
    out[0] = cft_sum(cft_mul(r[0], r[0]), NULL, 0, false);
    return st;
}

/* print, parse, print again; evaluate both on `in` (bitwise) */
static cft_ir *roundtrip(cft_ir *ir, cft_array *const *in) {
    CHECK(ir != NULL);
    int nc = cft_ir_consts(ir, NULL);
    cft_array *cv[64];
    CHECK(nc < 64);
    CHECK_EQ(cft_ir_consts(ir, cv), nc);
    const char *text = cft_ir_str(ir);
    cft_ir *back = NULL;
    CHECK_MSG(cft_ir_parse(text, nc, cv, &back) == CFT_OK, "parse: %s\n%s",
              cft_last_error_message(), text);
    if (!back)
        return NULL;
    CHECK_MSG(strcmp(text, cft_ir_str(back)) == 0, "texts differ:\n%s\n%s", text, cft_ir_str(back));
    CHECK_EQ(cft_ir_num_eqns(back), cft_ir_num_eqns(ir));
    if (in) {
        cft_array *a[8], *b[8];
        int no = cft_ir_num_outputs(ir);
        CHECK_EQ(cft_ir_eval(ir, in, a), CFT_OK);
        CHECK_EQ(cft_ir_eval(back, in, b), CFT_OK);
        for (int j = 0; j < no; j++)
            CHECK(cft_allclose(a[j], b[j], 0, 0, true));
    }
    return back;
}

static cft_array *randn(int seed, cft_dtype dt, int64_t a, int64_t b, int nd) {
    int64_t sh[2] = {a, b};
    return cft_random_normal(cft_random_key((uint64_t)seed), dt, sh, nd);
}

static void test_plain_and_grad(void) {
    bias = randn(1, CFT_F32, 3, 0, 1);
    cft_fn *f = cft_fn_new(mlp, NULL, 2, 1);
    cft_aval av[2] = {{CFT_F32, 2, {4, 3}}, {CFT_F32, 2, {5, 4}}};
    cft_array *in[2] = {randn(2, CFT_F32, 4, 3, 2), randn(3, CFT_F32, 5, 4, 2)};
    cft_ir *ir = cft_make_ir(f, av);
    CHECK_EQ(cft_ir_num_consts(ir), 1);
    cft_ir *back = roundtrip(ir, in);
    roundtrip(cft_make_ir(cft_grad(f, (int[]){0, 1}, 2), av), in);
    /* the parsed IR is a function again: its gradient is the original's */
    if (back) {
        cft_array *g1[1], *g2[1];
        CHECK_EQ(cft_fn_call(cft_grad(f, NULL, 0), in, g1), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_grad(cft_ir_fn(back), NULL, 0), in, g2), CFT_OK);
        CHECK(cft_allclose(g1[0], g2[0], 0, 0, false));
    }
}

static void test_nested(void) {
    cft_array *sin_[2] = {randn(4, CFT_F32, 3, 0, 1), randn(5, CFT_F32, 6, 3, 2)};
    cft_aval sav[2] = {{CFT_F32, 1, {3}}, {CFT_F32, 2, {6, 3}}};
    cft_fn *s = cft_fn_new(scan_loss, NULL, 2, 1);
    roundtrip(cft_make_ir(s, sav), sin_);
    roundtrip(cft_make_ir(cft_grad(s, (int[]){0, 1}, 2), sav), sin_);

    cft_array *win[2] = {cft_full(0.3, CFT_F64, (int64_t[]){4}, 1), randn(6, CFT_F64, 4, 0, 1)};
    cft_aval wav[2] = {{CFT_F64, 1, {4}}, {CFT_F64, 1, {4}}};
    cft_fn *w = cft_fn_new(while_fn, NULL, 2, 1);
    roundtrip(cft_make_ir(w, wav), win);
    roundtrip(cft_make_ir(cft_grad(w, (int[]){1}, 1), wav), win);

    cft_array *cin[2] = {randn(7, CFT_F32, 6, 0, 1), randn(8, CFT_F32, 6, 0, 1)};
    cft_aval cav[2] = {{CFT_F32, 1, {6}}, {CFT_F32, 1, {6}}};
    cft_fn *c = cft_fn_new(cond_fn, NULL, 2, 1);
    roundtrip(cft_make_ir(c, cav), cin);
    cft_ir *g = cft_make_ir(cft_grad(c, (int[]){0, 1}, 2), cav);
    CHECK(strstr(cft_ir_str(g), "branches=(") != NULL);
    roundtrip(g, cin);
}

static void test_symbolic(void) {
    bias = randn(1, CFT_F32, 3, 0, 1);
    int64_t B = cft_dim_sym("B");
    cft_fn *f = cft_fn_new(mlp, NULL, 2, 1);
    cft_fn *psg = cft_vmap(cft_grad(f, NULL, 0), (int[]){CFT_NOT_BATCHED, 0}, NULL);
    /* x: [B, 1, 4] so each example is a [1, 4] batch of one */
    cft_aval av[2] = {{CFT_F32, 2, {4, 3}}, {CFT_F32, 3, {B, 1, 4}}};
    cft_ir *ir = cft_make_ir(psg, av);
    CHECK(strstr(cft_ir_str(ir), "f32[B,4,3]") != NULL);
    cft_array *x = cft_reshape(randn(9, CFT_F32, 7, 4, 2), (int64_t[]){7, 1, 4}, 3);
    roundtrip(ir, (cft_array *[]){randn(2, CFT_F32, 4, 3, 2), x});
    /* expressions over symbols, in avals and parameters */
    const char *t = "{ lambda a:f32[B,N] .\n"
                    "  let b:f32[N,B] = transpose[perm=(1,0)] a\n"
                    "      c:f32[N*B] = reshape[shape=(N*B)] b\n"
                    "      d:f32[N*B*2-N*B] = reshape[shape=(B * N)] c\n"
                    "  in (d) }\n";
    cft_ir *p = NULL;
    CHECK_EQ(cft_ir_parse(t, 0, NULL, &p), CFT_OK);
    if (p) {
        cft_array *y[1];
        cft_array *a = cft_reshape(cft_arange(0, 20, 1, CFT_F32), (int64_t[]){5, 4}, 2);
        CHECK_MSG(cft_ir_eval(p, &a, y) == CFT_OK, "%s", cft_last_error_message());
        CHECK(cft_allclose(y[0], cft_reshape(cft_transpose(a, NULL), (int64_t[]){20}, 1), 0, 0,
                           false));
    }
}

/* names that share a prefix of 'a's are different variables ("a", "aa",
 * "aaa" were one key: the second definition was "defined twice", and uses
 * read the wrong value) */
static void test_names(void) {
    cft_ir *ir = NULL;
    cft_status st = cft_ir_parse("{ lambda a:f32[3] aa:f32[3] .\n"
                                 "  let aaa:f32[3] = sub aa a\n"
                                 "  in (aaa) }",
                                 0, NULL, &ir);
    CHECK_MSG(st == CFT_OK, "%s", cft_last_error_message());
    if (st != CFT_OK)
        return;
    cft_array *x[2] = {cft_arange(0, 3, 1, CFT_F32), cft_full(10, CFT_F32, (int64_t[]){3}, 1)},
              *y[1];
    CHECK_EQ(cft_ir_eval(ir, x, y), CFT_OK);
    CHECK_ARRAY_CLOSE(y[0], cft_sub(x[1], x[0]), 0, 0);
}

/* a text may add at most 64 symbol names to the process-wide table: one
 * with 104 is refused, and programs with new symbols still load after it
 * (5000 names once filled the table for good) */
static void test_symbol_budget(void) {
    char *text = malloc(13 * 8 * 16 + 64), *w = text; /* 13 inputs of 8 new dims each */
    w += sprintf(w, "{ lambda");
    for (int v = 0; v < 13; v++) {
        w += sprintf(w, " %c:f32[", 'a' + v);
        for (int d = 0; d < 8; d++)
            w += sprintf(w, "%sZz%d", d ? "," : "", v * 8 + d);
        w += sprintf(w, "]");
    }
    sprintf(w, " .\n  in (a) }");
    cft_ir *ir = NULL;
    CHECK_EQ(cft_ir_parse(text, 0, NULL, &ir), CFT_E_ARG);
    CHECK_MSG(strstr(cft_last_error_message(), "more new symbol names"), "%s",
              cft_last_error_message());
    free(text);
    CHECK(cft_dim_sym("Zafter") != CFT_DIM_INVALID);
    CHECK_EQ(cft_ir_parse("{ lambda a:f32[Zlater,3] .\n  in (a) }", 0, NULL, &ir), CFT_OK);
    /* a text that fails leaves no names behind: 2000 failing texts of 56
     * new names each (112,000 names, more than the table holds) change
     * nothing, and the names of one that loads stay */
    int before = cft__dim_live_symbols();
    char bad[2048];
    for (int k = 0; k < 2000; k++) {
        char *b = bad + sprintf(bad, "{ lambda");
        for (int v = 0; v < 7; v++) {
            b += sprintf(b, " %c:f32[", 'a' + v);
            for (int d = 0; d < 8; d++)
                b += sprintf(b, "%sQ%d_%d", d ? "," : "", k, v * 8 + d);
            b += sprintf(b, "]");
        }
        sprintf(b, " .\n  in (nothere) }");
        CHECK_EQ(cft_ir_parse(bad, 0, NULL, &ir), CFT_E_ARG);
    }
    CHECK_EQ(cft__dim_live_symbols(), before);
    CHECK(cft__dim_sym_known("Q0_0") == CFT_DIM_INVALID);
    CHECK_EQ(cft_ir_parse("{ lambda a:f32[Zkept] .\n  in (a) }", 0, NULL, &ir), CFT_OK);
    CHECK_EQ(cft__dim_live_symbols(), before + 1);
    CHECK(cft__dim_sym_known("Zkept") != CFT_DIM_INVALID);
}

/* malformed texts: an error with line and column and the expected thing */
static void test_errors(void) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "line 1, column 1: expected '{'"},
        {"{ lambda a:f32[3] .\n  in (b) }", "line 2, column 7: an undefined variable: b"},
        {"{ lambda a:f33[3] .\n  in (a) }", "line 1, column 12: expected a dtype"},
        {"{ lambda a:f32[3 .\n  in (a) }", "expected ',' or ']' in a shape"},
        {"{ lambda a:f32[3] .\n  let b:f32[3] = frobnicate a\n  in (b) }",
         "line 2, column 18: unknown primitive"},
        {"{ lambda a:f32[3] .\n  let b:f32[3] = debug_print[label=0] a\n  in (b) }",
         "unknown primitive (or one whose parameters name state"},
        {"{ lambda a:f32[3] .\n  let b:f32[3] = sin a a\n  in (b) }", "sin takes 1 inputs"},
        {"{ lambda a:f32[3] .\n  let b:f32[4] = sin a\n  in (b) }", "does not typecheck"},
        {"{ lambda a:f32[3] .\n  let b:f32[3] = reduce_sum[axis=(0)] a\n  in (b) }",
         "expected parameter 'axes' of reduce_sum"},
        {"{ lambda a:f32[3] .\n  let b:f32[] = reduce_sum[axes=(7)] a\n  in (b) }",
         "does not typecheck"},
        {"{ lambda a:f32[3] .\n  let a:f32[3] = sin a\n  in (a) }", "a variable defined twice"},
        {"{ lambda a:f32[3] ; b:f32[3] .\n  in (b) }", "constant 0 has no value (0 given)"},
        {"{ lambda a:f32[3] .\n  in (a) } x", "expected the end of the text"},
        {"{ lambda a:f32[99999999999999] .\n  in (a) }", "column 16: a dim that is not a size"},
        {"{ lambda a:f32[-3] .\n  in (a) }", "not a size"},
        {"{ lambda a:f32[3] .\n  let b:f32[3] = integer_pow[y=99999999999999999999] a\n  in (b) }",
         "an integer out of range"},
        {"{ lambda a:f32[3] .\n  in (a", "expected ',' or ')' in the outputs"},
        {"{ lambda a:f32[3] .\n  let b:f32[3] c:f32[3] = sin a\n  in (b) }",
         "sin has 1 outputs here, the text declares 2"},
        /* 2^32 * 2^32 wrapped to 0 in int64 (UBSan): now a dim that cannot be expressed */
        {"{ lambda a:f32[4294967296*4294967296] .\n  in (a) }", "cannot be expressed"},
        {"{ lambda a:f32[1048576*1048576] .\n  in (a) }", "cannot be expressed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cft_ir *ir = (cft_ir *)1;
        cft_status st = cft_ir_parse(cases[i].text, 0, NULL, &ir);
        CHECK_MSG(st == CFT_E_ARG && ir == NULL, "case %zu parsed", i);
        CHECK_MSG(strstr(cft_last_error_message(), cases[i].want) != NULL,
                  "case %zu: want \"%s\", got \"%s\"", i, cases[i].want, cft_last_error_message());
        CHECK(strstr(cft_last_error_message(), "cft_ir_parse") != NULL);
    }
    /* a constant of the wrong aval */
    cft_ir *ir = NULL;
    cft_array *c = cft_zeros(CFT_F32, (int64_t[]){4}, 1);
    CHECK_EQ(cft_ir_parse("{ lambda a:f32[3] ; .\n  in (a) }", 1, &c, &ir), CFT_E_ARG);
    CHECK(strstr(cft_last_error_message(), "declared f32[3], its value is f32[4]") != NULL);
    /* a declared aval longer than an error message's buffer for it (found by
     * fuzz_ir_parse: cft_aval_str wrote past its buffer) */
    CHECK_EQ(cft_ir_parse("{ lambda a:f32[abcdefghij*klmnopqrst*uvwxyzabcd*efghijklmn,abcdefghij*"
                          "klmnopqrst*uvwxyzabcd,abcdefghij*klmnopqrst] ; .\n  in (a) }",
                          1, &c, &ir),
             CFT_E_ARG);
    CHECK(strstr(cft_last_error_message(), "...], its value is f32[4]") != NULL);
    /* nesting deeper than the limit */
    char deep[4096] = "";
    for (int i = 0; i < 40; i++)
        strcat(deep, "{ lambda a:f32[] .\n let b:f32[] = checkpoint[body=");
    CHECK_EQ(cft_ir_parse(deep, 0, NULL, &ir), CFT_E_ARG);
    CHECK(strstr(cft_last_error_message(), "nested too deeply") != NULL);
    CHECK_EQ(cft_ir_parse(NULL, 0, NULL, &ir), CFT_E_ARG);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_init();
    TEST("plain IR with a constant, and its gradient") test_plain_and_grad();
    TEST("nested IRs: scan, while, cond, checkpoint") test_nested();
    TEST("symbolic dims") test_symbolic();
    TEST("errors name line and column") test_errors();
    TEST("names with a common prefix are different variables") test_names();
    TEST("a text adds at most 64 symbol names") test_symbol_budget();
    return check_summary();
}
