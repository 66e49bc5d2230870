/* test_export.c: exported programs (cft/export.h) and the cft-run runner.
 *
 * The three flagship programs (per-sample gradients with a symbolic batch,
 * a batched MAML meta-gradient, an ensemble whose stacked weights are
 * constants of the program) are exported with their inputs and outputs;
 * a fresh process (this program run again with "load DIR") loads them and
 * must reproduce the outputs bit for bit, interpreted and jitted; cft-run
 * must reproduce them from the files alone. A loaded program is
 * differentiable again. The golden file of format version 1 in
 * tests/golden/ keeps loading (CFT_UPDATE_GOLDEN=1 rewrites it). Bad
 * files (missing, not a program, a newer version, a corrupt IR, mismatched
 * constants) are errors naming the file; programs that refer to the
 * tracing process are refused by cft_export. */
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

extern char **environ;

/* ---- the programs ---- */

/* MLP loss (w1 [8,16], b1 [16], w2 [16,4], b2 [4], x [N,8], y i32 [N]) */
static cft_status mlp_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[4], in[0]), in[1]));
    out[0] =
        cft_mean(cft_cross_entropy(cft_add(cft_matmul(h, in[2]), in[3]), in[5]), NULL, 0, false);
    return CFT_OK;
}

/* MAML on linear regression: theta [4,1]; support xs [5,4], ys [5,1]; query xq, yq */
static cft_status reg_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mse(cft_matmul(in[1], in[0]), in[2]);
    return CFT_OK;
}
static cft_status maml_task(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_fn *g = cft_grad((cft_fn *)env, NULL, 0);
    cft_array *theta = in[0];
    for (int step = 0; step < 3; step++) {
        cft_array *gr[1];
        cft_status st = cft_fn_call(g, (cft_array *[]){theta, in[1], in[2]}, gr);
        if (st != CFT_OK)
            return st;
        theta = cft_sub(theta, cft_mul(cft_scalar(0.1, CFT_F32), gr[0]));
    }
    return cft_fn_call((cft_fn *)env, (cft_array *[]){theta, in[3], in[4]}, out);
}

/* ensemble: x [N,8] -> logits [E,N,4] with stacked weights as constants */
static cft_array *ens_w1, *ens_w2;
static cft_status member(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_matmul(cft_relu(cft_matmul(in[2], in[0])), in[1]);
    return CFT_OK;
}
static cft_status ensemble(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    return cft_fn_call((cft_fn *)env, (cft_array *[]){ens_w1, ens_w2, in[0]}, out);
}

static cft_array *randn(uint64_t seed, cft_dtype dt, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), dt, shape, nd);
}

typedef struct {
    const char *name;
    cft_fn *f;
    int nin;
    cft_aval av[8];
    cft_array *in[8];
} program;

/* sum of f's single output (grad needs a scalar) */
static cft_status sum_out(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *o[1];
    cft_status st = cft_fn_call((cft_fn *)env, in, o);
    out[0] = cft_sum(o[0], NULL, 0, false);
    return st;
}

static int make_programs(program *p) {
    int64_t B = cft_dim_sym("B"), T = cft_dim_sym("T");
    cft_fn *loss = cft_fn_new(mlp_loss, NULL, 6, 1);
    int ax[6] = {CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0};
    cft_fn *psg = cft_vmap(cft_grad(loss, (int[]){0, 1, 2, 3}, 4), ax, NULL);
    p[0] = (program){"psg",
                     psg,
                     6,
                     {{CFT_F32, 2, {8, 16}},
                      {CFT_F32, 1, {16}},
                      {CFT_F32, 2, {16, 4}},
                      {CFT_F32, 1, {4}},
                      {CFT_F32, 3, {B, 1, 8}},
                      {CFT_I32, 2, {B, 1}}},
                     {0}};
    int64_t s[6][3] = {{8, 16}, {16}, {16, 4}, {4}, {10, 1, 8}, {10, 1}};
    for (int i = 0; i < 4; i++)
        p[0].in[i] = randn(10 + (uint64_t)i, CFT_F32, s[i], p[0].av[i].ndim);
    p[0].in[4] = randn(20, CFT_F32, s[4], 3);
    int32_t labels[10] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1};
    p[0].in[5] = cft_from_data(labels, CFT_I32, s[5], 2);

    cft_fn *task = cft_fn_new(maml_task, cft_fn_new(reg_loss, NULL, 3, 1), 5, 1);
    /* the meta-loss is the sum over tasks */
    cft_fn *vt = cft_vmap(task, (int[]){CFT_NOT_BATCHED, 0, 0, 0, 0}, NULL);
    cft_fn *meta = cft_grad(cft_fn_new(sum_out, vt, 5, 1), NULL, 0);
    p[1] = (program){"maml",
                     meta,
                     5,
                     {{CFT_F32, 2, {4, 1}},
                      {CFT_F32, 3, {T, 5, 4}},
                      {CFT_F32, 3, {T, 5, 1}},
                      {CFT_F32, 3, {T, 5, 4}},
                      {CFT_F32, 3, {T, 5, 1}}},
                     {0}};
    p[1].in[0] = randn(30, CFT_F32, (int64_t[]){4, 1}, 2);
    for (int i = 1; i < 5; i++)
        p[1].in[i] = randn(30 + (uint64_t)i, CFT_F32, (int64_t[]){6, 5, i % 2 ? 4 : 1}, 3);

    ens_w1 = randn(40, CFT_F32, (int64_t[]){5, 8, 16}, 3);
    ens_w2 = randn(41, CFT_F32, (int64_t[]){5, 16, 4}, 3);
    cft_fn *vm = cft_vmap(cft_fn_new(member, NULL, 3, 1), (int[]){0, 0, CFT_NOT_BATCHED}, NULL);
    p[2] = (program){"ensemble", cft_fn_new(ensemble, vm, 1, 1), 1, {{CFT_F32, 2, {B, 8}}}, {0}};
    p[2].in[0] = randn(42, CFT_F32, (int64_t[]){12, 8}, 2);
    return 3;
}

static void path(char *out, const char *dir, const char *name, const char *ext) {
    snprintf(out, 512, "%s/%s.%s", dir, name, ext);
}

static cft_tree *tree_of(cft_array *const *x, int n, const char *prefix) {
    cft_tree *t = cft_tree_new();
    for (int i = 0; i < n; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "%s.%d", prefix, i);
        t = cft_tree_set(t, nm, x[i]);
    }
    return t;
}

static void same_as_file(cft_array *const *y, int n, const char *file) {
    cft_tree *t = cft_load_safetensors(file, NULL, NULL);
    CHECK_MSG(!cft_tree_error(t) && cft_tree_size(t) == n, "%s", file);
    for (int j = 0; j < n && j < cft_tree_size(t); j++)
        CHECK_MSG(cft_allclose(y[j], cft_tree_get(t, cft_tree_name(t, j)), 0, 0, true),
                  "%s: output %d differs", file, j);
}

static int run(char *const *argv) {
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
        return -1;
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- save in this process ---- */

static void save_all(const char *dir) {
    program p[3];
    int n = make_programs(p);
    for (int k = 0; k < n; k++) {
        char f[512];
        path(f, dir, p[k].name, "cftx");
        cft_fn *fn = p[k].f;
        CHECK_MSG(cft_export(fn, p[k].av, f) == CFT_OK, "%s: %s", p[k].name,
                  cft_last_error_message());
        int no = cft_fn_nout(fn);
        cft_array *y[8], *yj[8];
        CHECK_EQ(cft_fn_call(fn, p[k].in, y), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_jit(fn), p[k].in, yj), CFT_OK);
        path(f, dir, p[k].name, "in");
        CHECK_EQ(cft_save_safetensors(f, tree_of(p[k].in, p[k].nin, "in"), NULL, 0), CFT_OK);
        path(f, dir, p[k].name, "out");
        CHECK_EQ(cft_save_safetensors(f, tree_of(y, no, "out"), NULL, 0), CFT_OK);
        path(f, dir, p[k].name, "jit");
        CHECK_EQ(cft_save_safetensors(f, tree_of(yj, no, "out"), NULL, 0), CFT_OK);
    }
}

/* ---- load in a fresh process ---- */

static void load_all(const char *dir) {
    const char *names[3] = {"psg", "maml", "ensemble"};
    for (int k = 0; k < 3; k++) {
        char f[512];
        path(f, dir, names[k], "cftx");
        cft_fn *fn = cft_load_exported(f);
        CHECK_MSG(!cft_fn_failed(fn), "%s", cft_fn_error_message(fn));
        path(f, dir, names[k], "in");
        cft_tree *in = cft_load_safetensors(f, NULL, NULL);
        cft_array *x[8], *y[8];
        for (int i = 0; i < cft_tree_size(in); i++)
            x[i] = cft_tree_get(in, cft_tree_name(in, i));
        CHECK_EQ(cft_fn_call(fn, x, y), CFT_OK);
        path(f, dir, names[k], "out");
        same_as_file(y, cft_fn_nout(fn), f);
        CHECK_EQ(cft_fn_call(cft_jit(fn), x, y), CFT_OK);
        path(f, dir, names[k], "jit");
        same_as_file(y, cft_fn_nout(fn), f);
    }
}

static void test_fresh_process(const char *self, const char *dir) {
    save_all(dir);
    char *argv[] = {(char *)self, "load", (char *)dir, NULL};
    CHECK_EQ(run(argv), 0);
}

/* x -> x * 1, x * 2, ..., x * MANY_OUT: an output tree larger than the
 * collector's first heap (cft-run kept the outputs in malloc'd memory and
 * some were collected while the tree was built) */
enum { MANY_OUT = 2000 };
static cft_status many_outputs(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)env, (void)nin;
    for (int j = 0; j < nout; j++)
        out[j] = cft_mul_s(in[0], (double)(j + 1));
    return CFT_OK;
}

static void test_runner_many(const char *dir) {
    char prog[512], in[512], out[512], want[512];
    path(prog, dir, "many", "cftx");
    path(in, dir, "many", "in");
    path(out, dir, "many", "run");
    path(want, dir, "many", "out");
    cft_fn *f = cft_fn_new(many_outputs, NULL, 1, MANY_OUT);
    cft_aval av[1] = {{CFT_F32, 1, {64}}};
    CHECK_EQ(cft_export(f, av, prog), CFT_OK);
    cft_array *x = cft_random_normal(cft_random_key(9), CFT_F32, (int64_t[]){64}, 1);
    cft_array **y = cft_alloc(sizeof *y * MANY_OUT);
    CHECK_EQ(cft_fn_call(f, &x, y), CFT_OK);
    CHECK_EQ(cft_save_safetensors(in, tree_of(&x, 1, "in"), NULL, 0), CFT_OK);
    CHECK_EQ(cft_save_safetensors(want, tree_of(y, MANY_OUT, "out"), NULL, 0), CFT_OK);
    for (int jit = 0; jit < 2; jit++) {
        char *a[] = {CFT_RUN_PATH, prog, in, out, "--expect", want, jit ? "--jit" : NULL, NULL};
        CHECK_MSG(run(a) == 0, "cft-run%s with %d outputs", jit ? " --jit" : "", MANY_OUT);
    }
}

/* x -> ((x * s1 + 0.5) * s2 + 0.5) ... 80 times: 160 scalar constants,
 * each a broadcast over x's shape in the IR */
static cft_status chain80(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = in[0];
    for (int k = 0; k < 80; k++)
        y = cft_add_s(cft_mul_s(y, 1.0 + 0.001 * k), 0.5);
    out[0] = y;
    return CFT_OK;
}

static void test_scalar_constants(const char *dir) {
    char prog[512];
    path(prog, dir, "chain80", "cftx");
    cft_aval av = {CFT_F32, 2, {512, 512}};
    cft_fn *f = cft_fn_new(chain80, NULL, 1, 1);
    CHECK_EQ(cft_export(f, &av, prog), CFT_OK);
    struct stat st;
    CHECK_EQ(stat(prog, &st), 0);
    /* 160 constants of 1 MB each at full shape: 168 MB; compact, a few KB */
    CHECK_MSG(st.st_size < (1 << 20), "%lld bytes", (long long)st.st_size);
    cft_fn *g = cft_load_exported(prog);
    CHECK(!cft_fn_failed(g));
    cft_array *x = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){512, 512}, 2), *y[1],
              *w[1];
    CHECK_EQ(cft_fn_call(f, &x, w), CFT_OK);
    for (int jit = 0; jit < 2; jit++) {
        CHECK_EQ(cft_fn_call(jit ? cft_jit(g) : g, &x, y), CFT_OK);
        CHECK_ARRAY_CLOSE(y[0], w[0], 1e-5, 1e-5);
    }
}

static void test_runner(const char *dir) {
    const char *names[3] = {"psg", "maml", "ensemble"};
    for (int k = 0; k < 3; k++) {
        char prog[512], in[512], out[512], want[512], wantj[512];
        path(prog, dir, names[k], "cftx");
        path(in, dir, names[k], "in");
        path(out, dir, names[k], "run");
        path(want, dir, names[k], "out");
        path(wantj, dir, names[k], "jit");
        char *a1[] = {CFT_RUN_PATH, prog, in, out, "--expect", want, NULL};
        CHECK_MSG(run(a1) == 0, "cft-run %s", names[k]);
        char *a2[] = {CFT_RUN_PATH, prog, in, out, "--jit", "--expect", wantj, NULL};
        CHECK_MSG(run(a2) == 0, "cft-run --jit %s", names[k]);
    }
    /* a wrong expectation is exit status 1, a missing file 2 */
    char prog[512], in[512], out[512], other[512];
    path(prog, dir, "ensemble", "cftx");
    path(in, dir, "ensemble", "in");
    path(out, dir, "ensemble", "run");
    path(other, dir, "ensemble", "in");
    char *a3[] = {CFT_RUN_PATH, prog, in, out, "--expect", other, NULL};
    CHECK_EQ(run(a3), 1); /* in.0 is [12,8]: one tensor for one output, of another shape */
    char *a4[] = {CFT_RUN_PATH, "/nonexistent.cftx", in, out, NULL};
    CHECK_EQ(run(a4), 2);
}

static void test_transform_loaded(const char *dir) {
    program p[3];
    make_programs(p);
    char f[512];
    path(f, dir, "maml", "cftx");
    cft_fn *meta = cft_load_exported(f);
    /* grad of the loaded meta-gradient's sum: second-order through the export */
    cft_fn *g1 = cft_grad(cft_fn_new(sum_out, p[1].f, 5, 1), NULL, 0);
    cft_fn *g2 = cft_grad(cft_fn_new(sum_out, meta, 5, 1), NULL, 0);
    cft_array *a[1], *b[1];
    CHECK_EQ(cft_fn_call(g1, p[1].in, a), CFT_OK);
    CHECK_EQ(cft_fn_call(g2, p[1].in, b), CFT_OK);
    CHECK(cft_allclose(a[0], b[0], 1e-6, 1e-6, false));
    /* vmap of the loaded per-sample gradients over a leading axis of w1 */
    path(f, dir, "psg", "cftx");
    cft_fn *psg = cft_load_exported(f);
    CHECK_EQ(cft_fn_nin(psg), 6);
    CHECK_EQ(cft_fn_nout(psg), 4);
}

/* ---- format version 1 golden file ---- */

static void test_golden(const char *dir) {
    (void)dir;
    const char *gprog = "tests/golden/exported_v1.cftx",
               *gio = "tests/golden/exported_v1_io.safetensors";
    const char *upd = getenv("CFT_UPDATE_GOLDEN");
    if (upd && atoi(upd) == 1) {
        program p[3];
        make_programs(p);
        CHECK_EQ(cft_export(p[0].f, p[0].av, gprog), CFT_OK);
        cft_array *y[4];
        CHECK_EQ(cft_fn_call(p[0].f, p[0].in, y), CFT_OK);
        cft_tree *t = tree_of(p[0].in, 6, "in");
        for (int j = 0; j < 4; j++) {
            char nm[16];
            snprintf(nm, sizeof nm, "out.%d", j);
            t = cft_tree_set(t, nm, y[j]);
        }
        CHECK_EQ(cft_save_safetensors(gio, t, NULL, 0), CFT_OK);
    }
    cft_fn *f = cft_load_exported(gprog);
    CHECK_MSG(!cft_fn_failed(f), "%s", cft_fn_error_message(f));
    cft_tree *io = cft_load_safetensors(gio, NULL, NULL);
    CHECK(!cft_tree_error(io) && cft_tree_size(io) == 10);
    if (cft_fn_failed(f) || cft_tree_error(io))
        return;
    cft_array *x[6], *y[4], *yj[4];
    for (int i = 0; i < 6; i++)
        x[i] = cft_tree_get(io, cft_tree_name(io, i));
    CHECK_EQ(cft_fn_call(f, x, y), CFT_OK);
    CHECK_EQ(cft_fn_call(cft_jit(f), x, yj), CFT_OK);
    for (int j = 0; j < 4; j++) {
        cft_array *want = cft_tree_get(io, cft_tree_name(io, 6 + j));
        /* written by another build, maybe with other GEMM kernels (OpenBLAS or
         * libxsmm sum in other orders): f32 sums of ~16 products, 1e-5 */
        CHECK(cft_allclose(y[j], want, 1e-5, 1e-6, false));
        CHECK(cft_allclose(yj[j], want, 1e-5, 1e-6, false));
    }
}

/* ---- errors ---- */

static cft_status dbg(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_debug_print("x", in[0]);
    return CFT_OK;
}

static void expect_load_error(const char *file, const char *want) {
    cft_fn *f = cft_load_exported(file);
    CHECK(cft_fn_failed(f));
    CHECK_MSG(strstr(cft_fn_error_message(f), want) != NULL, "want \"%s\", got \"%s\"", want,
              cft_fn_error_message(f));
    CHECK(strstr(cft_fn_error_message(f), "cft_load_exported") != NULL);
}

/* a program file written by hand: constants t, format version, IR text */
static void save_program(const char *f, cft_tree *t, const char *version, const char *ir) {
    const char *meta[] = {"format", "cft-exported-program", "format_version", version, "ir", ir};
    CHECK_EQ(cft_save_safetensors(f, t, meta, 3), CFT_OK);
}

static void test_errors(const char *dir) {
    char f[512];
    path(f, dir, "nothere", "cftx");
    expect_load_error(f, "nothere.cftx");
    path(f, dir, "psg", "in"); /* a safetensors file, not a program */
    expect_load_error(f, "is not an exported program");
    cft_tree *t = cft_tree_set(cft_tree_new(), "const.0", cft_scalar(1, CFT_F32));
    path(f, dir, "newer", "cftx");
    save_program(f, t, "3", "{ lambda a:f32[] ; .\n  in (a) }");
    expect_load_error(f, "format version \"3\"; this cft reads versions 1 to 2");
    save_program(f, t, "1", "{ lambda a:f32[] ; .\n  let b:f32[] = sin a a\n  in (b) }");
    expect_load_error(f, "line 2, column 17: sin takes 1 inputs, the text gives 2");
    save_program(f, t, "1", "{ lambda a:f32[2] ; .\n  in (a) }");
    expect_load_error(f, "constant 0 is declared f32[2], its value is f32[]");
    /* a program over the limits: 20,001 equations (a long chain of sin) */
    {
        size_t cap = 64 + 40 * (size_t)(CFT_EXPORT_MAX_EQNS + 1);
        char *big = malloc(cap), *w = big;
        w += sprintf(w, "{ lambda a:f32[] ; .\n");
        for (int i = 0; i <= CFT_EXPORT_MAX_EQNS; i++)
            w += sprintf(w, "  let b%c%c%c%c:f32[] = sin a\n", 'a' + i / 17576 % 26,
                         'a' + i / 676 % 26, 'a' + i / 26 % 26, 'a' + i % 26);
        sprintf(w, "  in (a) }");
        save_program(f, t, "1", big);
        free(big);
        expect_load_error(f, "exported programs are read up to");
    }
    /* a truncated program file */
    char src[512];
    path(src, dir, "ensemble", "cftx");
    FILE *in = fopen(src, "rb"), *out = fopen(f, "wb");
    char buf[100];
    size_t n = fread(buf, 1, sizeof buf, in);
    fwrite(buf, 1, n, out);
    fclose(in), fclose(out);
    expect_load_error(f, "newer.cftx");
    /* what refers to this process cannot be exported */
    cft_aval av = {CFT_F32, 1, {3}};
    CHECK_EQ(cft_export(cft_fn_new(dbg, NULL, 1, 1), &av, f), CFT_E_ARG);
    CHECK(strstr(cft_last_error_message(), "debug_print") != NULL);
    CHECK(strstr(cft_last_error_message(), "cannot be exported") != NULL);
}

int main(int argc, char **argv) {
    cft_init();
    if (argc == 3 && strcmp(argv[1], "load") == 0) { /* the fresh process */
        check_init(1, argv);
        TEST("load in a fresh process: bit-identical outputs") load_all(argv[2]);
        return check_summary();
    }
    check_init(argc, argv);
    char dir[] = "/tmp/cft-export-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    TEST("export, then load in a fresh process") test_fresh_process("/proc/self/exe", dir);
    TEST("cft-run reproduces the outputs") test_runner(dir);
    TEST("cft-run with %d outputs", MANY_OUT) test_runner_many(dir);
    TEST("scalar constants are stored compact (version 2)") test_scalar_constants(dir);
    TEST("a loaded program is transformed again") test_transform_loaded(dir);
    TEST("format version 1 golden file") test_golden(dir);
    TEST("bad files and unexportable programs") test_errors(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s", dir);
    char *rm[] = {"/bin/rm", "-rf", cmd, NULL};
    run(rm);
    return check_summary();
}
