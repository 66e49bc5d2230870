/* test_ir.c: the closure IR (ir.h) and the trace cache (fn.c).
 *
 * Golden-text tests of cft_ir_str for small functions (an MLP layer, a
 * function closing over a concrete array, a gradient), kept in
 * tests/golden/<name>.txt; run with CFT_UPDATE_GOLDEN=1 to rewrite them after an
 * intended change of the printer or of a rule. Then: cft_ir_typecheck,
 * cft_ir_eval against an eager run of the callback, DCE and CSE (equation
 * counts and unchanged values), closure conversion of concrete arrays and of
 * an enclosing transform's tracers (nested grad / vmap over a function whose
 * env holds the outer tracer, including the perturbation-confusion case),
 * and "traced once per input signature" counted through the callback. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "trace/ir.h" /* only to corrupt an IR for the negative typecheck test */

/* ---------------- golden files ---------------- */

static void golden_path(const char *name, char *out, size_t n) {
    const char *here = __FILE__, *slash = strrchr(here, '/');
    int dir = slash ? (int)(slash - here) : 1;
    snprintf(out, n, "%.*s/golden/%s.txt", dir, slash ? here : ".", name);
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (buf)
        buf[n] = 0;
    return buf;
}

/* Compare text with tests/golden/<name>.txt, or rewrite it when
 * CFT_UPDATE_GOLDEN=1. */
static void check_golden(const char *name, const char *text, const char *file, int line) {
    char path[4096];
    golden_path(name, path, sizeof path);
    const char *upd = getenv("CFT_UPDATE_GOLDEN");
    if (upd && atoi(upd) == 1) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        *strrchr(dir, '/') = 0;
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            check_fail_(file, line, "cannot create %s", dir);
        FILE *f = fopen(path, "wb");
        if (!f || fputs(text, f) < 0)
            check_fail_(file, line, "cannot write %s", path);
        if (f)
            fclose(f);
        printf("updated %s\n", path);
        return;
    }
    char *want = read_all(path);
    if (!want)
        check_fail_(file, line, "missing golden file %s (run with CFT_UPDATE_GOLDEN=1)", path);
    else if (strcmp(want, text) != 0)
        check_fail_(file, line, "IR differs from %s\n--- want\n%s--- got\n%s---", path, want, text);
    free(want);
}
#define CHECK_GOLDEN(name, text) check_golden((name), (text), __FILE__, __LINE__)

/* ---------------- functions ---------------- */

/* tanh(x @ w + b) */
static cft_status mlp_layer(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_tanh(cft_add(cft_matmul(in[0], in[1]), in[2]));
    return CFT_OK;
}

/* sum(x * c), c the concrete array in env */
static cft_status captured(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul(in[0], (cft_array *)env), NULL, 0, false);
    return CFT_OK;
}

/* sum(sin(x) * x) */
static cft_status sin_x(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul(cft_sin(in[0]), in[0]), NULL, 0, false);
    return CFT_OK;
}

/* sin(x), computing two values it never uses, one from a captured constant */
static cft_status with_dead(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *unused1 = cft_exp(in[0]);
    cft_array *unused2 = cft_mul(cft_cos(in[0]), (cft_array *)env);
    (void)unused1, (void)unused2;
    out[0] = cft_sin(in[0]);
    return CFT_OK;
}

/* exp(sin x) * exp(sin x) + sum over axis 0 and axis 1 (different params) */
static cft_status with_dups(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *a = cft_exp(cft_sin(in[0]));
    cft_array *b = cft_exp(cft_sin(in[0]));
    cft_array *s0 = cft_sum(cft_mul(a, b), (int[]){0}, 1, false);
    cft_array *s1 = cft_sum(cft_mul(a, b), (int[]){1}, 1, false);
    out[0] = cft_add(cft_sum(s0, NULL, 0, false), cft_sum(s1, NULL, 0, false));
    out[1] = cft_add(cft_sin(in[0]), cft_sin(in[0]));
    return CFT_OK;
}

/* 2x, counting its traces in *(int *)env */
static cft_status counted(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    (*(int *)env)++;
    out[0] = cft_mul_s(in[0], 2);
    return CFT_OK;
}
/* sum(x^2), counting */
static cft_status counted_sq(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    (*(int *)env)++;
    out[0] = cft_sum(cft_square(in[0]), NULL, 0, false);
    return CFT_OK;
}

/* Nested differentiation through closures. inner(x) = sin(x * y) with y
 * (the env) a tracer of the outer transform; outer(y) = d inner/dx at X0
 * = y cos(X0 y). */
#define X0 0.7
static int inner_nconst = -1;
static cft_status inner_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_sin(cft_mul(in[0], (cft_array *)env));
    return CFT_OK;
}
static cft_status outer_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_fn *h = cft_fn_new(inner_fn, in[0], 1, 1);
    cft_array *x = cft_scalar(X0, cft_array_dtype(in[0]));
    out[0] = cft_fn_call1(cft_grad(h, NULL, 0), &x);
    /* the IR of h, made here, closes over the outer tracer */
    cft_aval a = cft_array_aval(x);
    cft_ir *ir = cft_make_ir(h, &a);
    inner_nconst = ir ? cft_ir_num_consts(ir) : -1;
    return CFT_OK;
}

/* Perturbation confusion (Siskind & Pearlmutter): f(x) = x * d/dy (x + y)
 * at y = 1. d/dy (x + y) = 1, so f(x) = x and f'(x) = 1; mixing the two
 * derivatives' perturbations would give 2. */
static cft_status pc_inner(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_add((cft_array *)env, in[0]);
    return CFT_OK;
}
static cft_status pc_outer(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *one = cft_scalar(1, CFT_F64);
    cft_array *d = cft_fn_call1(cft_grad(cft_fn_new(pc_inner, in[0], 1, 1), NULL, 0), &one);
    out[0] = cft_mul(in[0], d);
    return CFT_OK;
}

static cft_array *vec64(const double *v, int64_t n) {
    return cft_from_f64(v, &n, 1);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_aval mlp_av[3] = {cft_array_aval(cft_zeros(CFT_F32, (int64_t[]){8, 4}, 2)),
                          cft_array_aval(cft_zeros(CFT_F32, (int64_t[]){4, 3}, 2)),
                          cft_array_aval(cft_zeros(CFT_F32, (int64_t[]){3}, 1))};
    cft_aval v3 = mlp_av[2];

    /* ---------------- golden text ---------------- */

    TEST("golden: an MLP layer") {
        cft_ir *ir = cft_make_ir(cft_fn_new(mlp_layer, NULL, 3, 1), mlp_av);
        CHECK(ir != NULL);
        CHECK_GOLDEN("mlp_layer", cft_ir_str(ir));
        CHECK_EQ(cft_ir_num_inputs(ir), 3);
        CHECK_EQ(cft_ir_num_outputs(ir), 1);
        CHECK_EQ(cft_ir_num_consts(ir), 0);
        CHECK_EQ(cft_ir_num_eqns(ir), 4);
        const char *prims[4] = {"dot_general", "broadcast_in_dim", "add", "tanh"};
        for (int i = 0; i < 4; i++)
            CHECK(strcmp(cft_ir_eqn_prim(ir, i), prims[i]) == 0);
        CHECK(cft_ir_eqn_prim(ir, 4) == NULL);
        CHECK(cft_ir_eqn_prim(ir, -1) == NULL);
        /* cft_ir_print and cft_fn_print_ir print the same text */
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cft_ir_print(ir, f);
        CHECK_EQ(cft_fn_print_ir(cft_fn_new(mlp_layer, NULL, 3, 1), mlp_av, f), CFT_OK);
        fclose(f);
        size_t n1 = strlen(cft_ir_str(ir));
        CHECK(len == 2 * n1 && memcmp(buf, cft_ir_str(ir), n1) == 0 &&
              memcmp(buf + n1, buf, n1) == 0);
        free(buf);
    }

    TEST("golden: a captured concrete constant") {
        cft_array *c = cft_arange(0, 3, 1, CFT_F32);
        cft_ir *ir = cft_make_ir(cft_fn_new(captured, c, 1, 1), &v3);
        CHECK(ir != NULL);
        CHECK_GOLDEN("captured_const", cft_ir_str(ir));
        CHECK_EQ(cft_ir_num_consts(ir), 1);
        CHECK_EQ(cft_ir_num_inputs(ir), 1);
    }

    TEST("golden: grad of sum(sin(x) * x), raw and after DCE + CSE") {
        cft_fn *g = cft_grad(cft_fn_new(sin_x, NULL, 1, 1), NULL, 0);
        cft_ir *ir = cft_make_ir(g, &v3);
        CHECK(ir != NULL);
        CHECK_GOLDEN("grad_sin_x", cft_ir_str(ir));
        cft_ir *opt = cft_ir_cse(cft_ir_dce(ir));
        CHECK_GOLDEN("grad_sin_x_opt", cft_ir_str(opt));
        /* the loss value is not an output of grad: its equations are dead */
        CHECK(cft_ir_num_eqns(opt) < cft_ir_num_eqns(ir));
    }

    /* ---------------- typecheck and eval ---------------- */

    TEST("cft_ir_typecheck accepts traced IRs and their DCE / CSE copies") {
        cft_fn *fs[4] = {cft_fn_new(mlp_layer, NULL, 3, 1),
                         cft_fn_new(captured, cft_ones(CFT_F32, (int64_t[]){3}, 1), 1, 1),
                         cft_grad(cft_fn_new(sin_x, NULL, 1, 1), NULL, 0),
                         cft_hessian(cft_fn_new(sin_x, NULL, 1, 1), 0)};
        for (int k = 0; k < 4; k++) {
            cft_ir *ir = cft_make_ir(fs[k], k == 0 ? mlp_av : &v3);
            CHECK(ir != NULL);
            CHECK_EQ(cft_ir_typecheck(ir), CFT_OK);
            CHECK_EQ(cft_ir_typecheck(cft_ir_dce(ir)), CFT_OK);
            CHECK_EQ(cft_ir_typecheck(cft_ir_cse(ir)), CFT_OK);
        }
    }

    TEST("cft_ir_typecheck rejects a wrong declared aval") {
        cft_ir *ir = cft_make_ir(cft_fn_new(mlp_layer, NULL, 3, 1), mlp_av);
        CHECK(ir != NULL && ir->neqn == 4);
        /* a copy whose tanh claims f32[8,4] */
        cft_ir bad = *ir;
        bad.eqns = malloc(sizeof(cft_eqn) * 4);
        memcpy(bad.eqns, ir->eqns, sizeof(cft_eqn) * 4);
        cft_irvar *v = malloc(sizeof *v), **outs = malloc(sizeof *outs);
        *v = *ir->eqns[3].out[0];
        v->aval.shape[1] = 4;
        outs[0] = v;
        bad.eqns[3].out = outs;
        CHECK_EQ(cft_ir_typecheck(&bad), CFT_E_TRACE);
        CHECK(strstr(cft_last_error_message(), "tanh") != NULL);
        CHECK_EQ(cft_ir_typecheck(ir), CFT_OK); /* the original is untouched */
        free(v), free(outs), free(bad.eqns);
    }

    TEST("cft_ir_eval equals an eager run of the callback") {
        cft_array *x = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){8, 4}, 2);
        cft_array *w = cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){4, 3}, 2);
        cft_array *b = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){3}, 1);
        cft_array *in[3] = {x, w, b}, *eager[1], *via_ir[1], *via_fn[1], *via_irfn[1];
        CHECK_EQ(mlp_layer(NULL, 3, in, 1, eager), CFT_OK); /* no trace: eager */
        CHECK(cft_is_concrete(eager[0]));
        cft_ir *ir = cft_make_ir(cft_fn_new(mlp_layer, NULL, 3, 1), mlp_av);
        CHECK_EQ(cft_ir_eval(ir, in, via_ir), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_fn_new(mlp_layer, NULL, 3, 1), in, via_fn), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_ir_fn(ir), in, via_irfn), CFT_OK);
        /* the same primitives on the same inputs in the same order: bitwise */
        CHECK_ARRAY_CLOSE(via_ir[0], eager[0], 0, 0);
        CHECK_ARRAY_CLOSE(via_fn[0], eager[0], 0, 0);
        CHECK_ARRAY_CLOSE(via_irfn[0], eager[0], 0, 0);
        /* with a captured constant */
        cft_array *c = cft_from_f32((float[]){1, -2, 3}, (int64_t[]){3}, 1);
        cft_array *v = cft_from_f32((float[]){4, 5, 6}, (int64_t[]){3}, 1);
        cft_ir *cir = cft_make_ir(cft_fn_new(captured, c, 1, 1), &v3);
        cft_array *r[1];
        CHECK_EQ(cft_ir_eval(cir, &v, r), CFT_OK);
        CHECK_EQ(cft_item(r[0]), 4 - 10 + 18);
        /* the IR as a function is transformable: grad of it is c */
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_grad(cft_ir_fn(cir), NULL, 0), &v), c, 0, 0);
        /* an IR of a gradient evaluates to the gradient */
        cft_fn *g = cft_grad(cft_fn_new(sin_x, NULL, 1, 1), NULL, 0);
        cft_ir *gir = cft_make_ir(g, &v3);
        CHECK_EQ(cft_ir_eval(gir, &v, r), CFT_OK);
        CHECK_ARRAY_CLOSE(r[0], cft_fn_call1(g, &v), 0, 0);
        for (int i = 0; i < 3; i++) {
            double t = 4 + i;
            CHECK_CLOSE(cft_item_at(r[0], i), sin(t) + t * cos(t), 1e-5, 1e-6);
        }
    }

    /* ---------------- DCE and CSE ---------------- */

    TEST("DCE removes unused equations and constants") {
        cft_array *c = cft_ones(CFT_F32, (int64_t[]){3}, 1);
        cft_ir *ir = cft_make_ir(cft_fn_new(with_dead, c, 1, 1), &v3);
        CHECK(ir != NULL);
        CHECK_EQ(cft_ir_num_eqns(ir), 4); /* exp, cos, mul, sin */
        CHECK_EQ(cft_ir_num_consts(ir), 1);
        cft_ir *d = cft_ir_dce(ir);
        CHECK_EQ(cft_ir_num_eqns(d), 1);
        CHECK(strcmp(cft_ir_eqn_prim(d, 0), "sin") == 0);
        CHECK_EQ(cft_ir_num_consts(d), 0);
        CHECK_EQ(cft_ir_num_inputs(d), 1); /* inputs stay, used or not */
        CHECK_EQ(cft_ir_typecheck(d), CFT_OK);
        CHECK_EQ(cft_ir_num_eqns(cft_ir_dce(d)), 1); /* idempotent */
        cft_array *x = cft_from_f32((float[]){0.1f, 0.2f, 0.3f}, (int64_t[]){3}, 1), *a[1], *b[1];
        CHECK_EQ(cft_ir_eval(ir, &x, a), CFT_OK);
        CHECK_EQ(cft_ir_eval(d, &x, b), CFT_OK);
        CHECK_ARRAY_CLOSE(a[0], b[0], 0, 0);
        /* the original is immutable */
        CHECK_EQ(cft_ir_num_eqns(ir), 4);
    }

    TEST("CSE merges equal equations, not equal-looking ones") {
        cft_aval m = cft_array_aval(cft_zeros(CFT_F32, (int64_t[]){2, 3}, 2));
        cft_fn *f = cft_fn_new(with_dups, NULL, 1, 2);
        cft_ir *ir = cft_make_ir(f, &m);
        CHECK(ir != NULL);
        int n0 = cft_ir_num_eqns(ir), nsum0 = 0, nsin0 = 0;
        for (int i = 0; i < n0; i++) {
            nsin0 += strcmp(cft_ir_eqn_prim(ir, i), "sin") == 0;
            nsum0 += strcmp(cft_ir_eqn_prim(ir, i), "reduce_sum") == 0;
        }
        CHECK_EQ(nsin0, 4);
        cft_ir *c = cft_ir_cse(ir);
        int n1 = cft_ir_num_eqns(c), nsin = 0, nexp = 0, nmul = 0, nsum = 0;
        for (int i = 0; i < n1; i++) {
            const char *p = cft_ir_eqn_prim(c, i);
            nsin += strcmp(p, "sin") == 0;
            nexp += strcmp(p, "exp") == 0;
            nmul += strcmp(p, "mul") == 0;
            nsum += strcmp(p, "reduce_sum") == 0;
        }
        CHECK_EQ(nsin, 1);
        CHECK_EQ(nexp, 1);
        CHECK_EQ(nmul, 1);
        /* sums over different axes have different params: kept apart */
        CHECK_EQ(nsum, nsum0);
        CHECK_EQ(n0 - n1, 3 + 1 + 1); /* 3 sins, 1 exp, 1 mul */
        CHECK_EQ(cft_ir_typecheck(c), CFT_OK);
        CHECK_EQ(cft_ir_num_eqns(cft_ir_cse(c)), n1); /* idempotent */
        cft_array *x = cft_reshape(cft_linspace(-1, 1, 6, CFT_F32), (int64_t[]){2, 3}, 2);
        cft_array *a[2], *b[2];
        CHECK_EQ(cft_ir_eval(ir, &x, a), CFT_OK);
        CHECK_EQ(cft_ir_eval(c, &x, b), CFT_OK);
        CHECK_ARRAY_CLOSE(a[0], b[0], 0, 0);
        CHECK_ARRAY_CLOSE(a[1], b[1], 0, 0);
    }

    /* ---------------- closure conversion ---------------- */

    TEST("closure conversion: a captured concrete array is a constant") {
        cft_array *c = cft_from_f32((float[]){2, 3, 4}, (int64_t[]){3}, 1);
        cft_ir *ir = cft_make_ir(cft_fn_new(captured, c, 1, 1), &v3);
        CHECK_EQ(cft_ir_num_consts(ir), 1);
        const char *s = cft_ir_str(ir);
        CHECK(strncmp(s, "{ lambda a:f32[3] ; b:f32[3] .", 30) == 0);
        /* the same value captured twice is one constant */
        cft_array *in = cft_ones(CFT_F32, (int64_t[]){3}, 1);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_fn_new(captured, c, 1, 1), &in), cft_scalar(9, CFT_F32),
                          0, 0);
        /* a constant used only by dead code does not survive a call's DCE */
        cft_ir *d = cft_make_ir(cft_fn_new(with_dead, c, 1, 1), &v3);
        CHECK_EQ(cft_ir_num_consts(d), 1);
        CHECK_EQ(cft_ir_num_consts(cft_ir_dce(d)), 0);
    }

    TEST("closure over an outer tracer: outer(y) = d/dx sin(x y) at x0, transformed over y") {
        double ys[5] = {-1.5, -0.3, 0.0, 0.8, 2.1};
        cft_fn *outer = cft_fn_new(outer_fn, NULL, 1, 1);
        /* plain call (staged at top level: y is a staging tracer) */
        inner_nconst = -1;
        cft_array *y = cft_scalar(1.3, CFT_F64);
        CHECK_CLOSE(cft_item(cft_fn_call1(outer, &y)), 1.3 * cos(X0 * 1.3), 1e-14, 1e-14);
        CHECK_EQ(inner_nconst, 1); /* y became the inner IR's one constant */
        /* vmap over y */
        cft_array *yv = vec64(ys, 5);
        cft_array *g = cft_fn_call1(cft_vmap(outer, NULL, NULL), &yv);
        CHECK(!cft_failed(g));
        for (int i = 0; i < 5; i++)
            CHECK_CLOSE(cft_item_at(g, i), ys[i] * cos(X0 * ys[i]), 1e-14, 1e-14);
        CHECK_EQ(inner_nconst, 1);
        /* grad over y: g'(y) = cos(x0 y) - x0 y sin(x0 y) */
        cft_fn *dg = cft_grad(outer, NULL, 0);
        for (int i = 0; i < 5; i++) {
            cft_array *yi = cft_scalar(ys[i], CFT_F64);
            double t = X0 * ys[i];
            CHECK_CLOSE(cft_item(cft_fn_call1(dg, &yi)), cos(t) - t * sin(t), 1e-13, 1e-13);
        }
        /* vmap(grad) and grad(grad): g''(y) = -2 x0 sin(x0 y) - x0^2 y cos(x0 y) */
        cft_array *dgv = cft_fn_call1(cft_vmap(dg, NULL, NULL), &yv);
        cft_fn *ddg = cft_grad(dg, NULL, 0);
        for (int i = 0; i < 5; i++) {
            double t = X0 * ys[i];
            CHECK_CLOSE(cft_item_at(dgv, i), cos(t) - t * sin(t), 1e-13, 1e-13);
            cft_array *yi = cft_scalar(ys[i], CFT_F64);
            CHECK_CLOSE(cft_item(cft_fn_call1(ddg, &yi)), -2 * X0 * sin(t) - X0 * t * cos(t), 1e-12,
                        1e-12);
        }
        /* jvp over y agrees with grad */
        cft_array *io[2], *jin[2] = {cft_scalar(0.8, CFT_F64), cft_scalar(1, CFT_F64)};
        CHECK_EQ(cft_fn_call(cft_jvp(outer), jin, io), CFT_OK);
        CHECK_CLOSE(cft_item(io[1]), cos(X0 * 0.8) - X0 * 0.8 * sin(X0 * 0.8), 1e-13, 1e-13);
    }

    TEST("perturbation confusion: d/dx [x * d/dy (x + y)] = 1, not 2") {
        cft_fn *f = cft_fn_new(pc_outer, NULL, 1, 1);
        cft_array *x = cft_scalar(3.0, CFT_F64);
        CHECK_CLOSE(cft_item(cft_fn_call1(f, &x)), 3.0, 0, 0);
        CHECK_CLOSE(cft_item(cft_fn_call1(cft_grad(f, NULL, 0), &x)), 1.0, 0, 0);
        cft_array *io[2], *jin[2] = {x, cft_scalar(1, CFT_F64)};
        CHECK_EQ(cft_fn_call(cft_jvp(f), jin, io), CFT_OK);
        CHECK_CLOSE(cft_item(io[1]), 1.0, 0, 0);
        cft_array *xs = vec64((double[]){1, 2, 3}, 3);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_vmap(cft_grad(f, NULL, 0), NULL, NULL), &xs),
                          cft_ones(CFT_F64, (int64_t[]){3}, 1), 0, 0);
    }

    /* ---------------- the trace cache ---------------- */

    /* CFT_EAGER=1 (a debugging mode) turns staging, and so the cache, off */
    const bool eager = getenv("CFT_EAGER") && atoi(getenv("CFT_EAGER")) != 0;
    if (eager)
        printf("CFT_EAGER set: the trace-cache tests are skipped\n");
    if (!eager) {
        TEST("cft_fn_uncached: every call runs the callback (environment changes take effect)") {
            int n = 0;
            cft_fn *f = cft_fn_uncached(cft_fn_new(counted, &n, 1, 1));
            cft_array *a = cft_from_f32((float[]){1, 2, 3}, (int64_t[]){3}, 1);
            cft_fn_call1(f, &a);
            cft_fn_call1(f, &a);
            CHECK_EQ(n, 2);
        }
        TEST("a function is traced once per input signature") {
            int n = 0;
            cft_fn *f = cft_fn_new(counted, &n, 1, 1);
            cft_array *a = cft_from_f32((float[]){1, 2, 3}, (int64_t[]){3}, 1);
            cft_array *b = cft_from_f32((float[]){4, 5, 6}, (int64_t[]){3}, 1);
            cft_array *r1 = cft_fn_call1(f, &a), *r2 = cft_fn_call1(f, &b);
            CHECK_EQ(n, 1);
            CHECK_ARRAY_CLOSE(r1, cft_from_f32((float[]){2, 4, 6}, (int64_t[]){3}, 1), 0, 0);
            CHECK_ARRAY_CLOSE(r2, cft_from_f32((float[]){8, 10, 12}, (int64_t[]){3}, 1), 0, 0);
            cft_array *c = cft_ones(CFT_F32, (int64_t[]){4}, 1);
            CHECK_EQ(cft_item_at(cft_fn_call1(f, &c), 3), 2);
            CHECK_EQ(n, 2); /* a new shape: traced again */
            cft_fn_call1(f, &a);
            cft_fn_call1(f, &c);
            CHECK_EQ(n, 2); /* both signatures are cached */
            cft_array *d = cft_ones(CFT_F64, (int64_t[]){3}, 1);
            CHECK_EQ(cft_array_dtype(cft_fn_call1(f, &d)), CFT_F64);
            CHECK_EQ(n, 3); /* a new dtype: traced again */
            /* a view (transposed, strided) with a cached signature hits the cache */
            cft_array *m = cft_transpose(cft_ones(CFT_F32, (int64_t[]){3, 2}, 2), NULL);
            cft_fn_call1(f, &m);
            cft_fn_call1(f, &m);
            CHECK_EQ(n, 4);
        }

        TEST("a transformed function is traced once, too") {
            int n = 0;
            cft_fn *g = cft_grad(cft_fn_new(counted_sq, &n, 1, 1), NULL, 0);
            cft_array *a = cft_from_f32((float[]){1, 2, 3}, (int64_t[]){3}, 1);
            cft_array *b = cft_from_f32((float[]){-1, 0, 5}, (int64_t[]){3}, 1);
            CHECK_ARRAY_CLOSE(cft_fn_call1(g, &a),
                              cft_from_f32((float[]){2, 4, 6}, (int64_t[]){3}, 1), 0, 0);
            CHECK_ARRAY_CLOSE(cft_fn_call1(g, &b),
                              cft_from_f32((float[]){-2, 0, 10}, (int64_t[]){3}, 1), 0, 0);
            CHECK_EQ(n, 1);
            int m = 0;
            cft_fn *v = cft_vmap(cft_fn_new(counted, &m, 1, 1), NULL, NULL);
            cft_array *x = cft_ones(CFT_F32, (int64_t[]){5, 2}, 2);
            cft_fn_call1(v, &x);
            cft_fn_call1(v, &x);
            CHECK_EQ(m, 1);
            int k = 0;
            cft_fn *vg = cft_vmap(cft_grad(cft_fn_new(counted_sq, &k, 1, 1), NULL, 0), NULL, NULL);
            cft_array *out = NULL;
            for (int i = 0; i < 5; i++)
                out = cft_fn_call1(vg, &x);
            CHECK_EQ(k, 1);
            CHECK_ARRAY_CLOSE(out, cft_full(2, CFT_F32, (int64_t[]){5, 2}, 2), 0, 0);
        }
    }

    return check_summary();
}
