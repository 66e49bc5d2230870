/* test_ir_dot.c: IRs as Graphviz DOT. An MLP loss's IR and its gradient's
 * have a node per equation (its primitive named), input and output nodes,
 * and edges labelled with avals; a scan's body becomes a cluster; a jitted
 * function's plan colours its fusion groups (and asking before the first
 * call is an error). When Graphviz's `dot` is installed (.ci/run installs
 * it), every file is rendered to SVG (started without a shell) and must
 * render without errors. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cft/cft.h"
#include "check.h"

extern char **environ;

static cft_status mlp(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[2], in[0]), in[1]));
    out[0] = cft_sum(cft_mul(h, h), NULL, 0, false);
    return CFT_OK;
}

static cft_status body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(cft_mul(in[0], in[1]), cft_sin(in[1])); /* carry, x -> carry, y */
    out[1] = cft_cos(in[1]);
    return CFT_OK;
}
static cft_status scanner(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_fn *b = cft_fn_new(body, NULL, 2, 2);
    cft_array *args[2] = {cft_scalar(1, CFT_F32), in[0]}, *res[2];
    cft_status st = cft_scan(b, 0, 1, 5, false, args, res);
    out[0] = cft_add(res[0], cft_sum(res[1], NULL, 0, false));
    return st;
}

/* the DOT text of write(f) */
static char *dot_of(cft_status (*write)(void *, FILE *), void *arg, cft_status *st) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    *st = write(arg, f);
    fclose(f);
    return buf;
}
static cft_status write_ir(void *ir, FILE *f) {
    return cft_ir_to_dot(ir, f);
}
static cft_status write_jit(void *fn, FILE *f) {
    return cft_jit_to_dot(fn, f);
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++)
        n++;
    return n;
}

/* render with dot when installed: 1 rendered, 0 no dot, -1 failed */
static int render(const char *text, const char *name) {
    char in[256], out[256];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(in, sizeof in, "%s/cft_dot_%d_%s.dot", tmp, (int)getpid(), name);
    snprintf(out, sizeof out, "%s/cft_dot_%d_%s.svg", tmp, (int)getpid(), name);
    FILE *f = fopen(in, "w");
    if (!f)
        return -1;
    fputs(text, f);
    fclose(f);
    pid_t pid;
    char *argv[] = {"dot", "-Tsvg", "-o", out, in, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int r = posix_spawnp(&pid, "dot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0) {
        unlink(in);
        return 0;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    FILE *o = fopen(out, "r");
    long size = 0;
    if (o) {
        fseek(o, 0, SEEK_END);
        size = ftell(o);
        fclose(o);
    }
    unlink(in), unlink(out);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return 0; /* no dot on the PATH */
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && size > 100 ? 1 : -1;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_aval av[3] = {{CFT_F32, 2, {4, 8}}, {CFT_F32, 1, {8}}, {CFT_F32, 2, {16, 4}}};
    cft_fn *f = cft_fn_new(mlp, NULL, 3, 1);
    TEST("an MLP and its gradient: a node per equation, avals on edges") {
        cft_ir *irs[2] = {cft_make_ir(f, av), cft_make_ir(cft_grad(f, (int[]){0, 1}, 2), av)};
        for (int k = 0; k < 2; k++) {
            cft_status st;
            char *d = dot_of(write_ir, irs[k], &st);
            CHECK_EQ(st, CFT_OK);
            CHECK(strstr(d, "digraph cft_ir {") && strstr(d, "in 0\\nf32[4,8]"));
            CHECK(strstr(d, "dot_general") && strstr(d, "tanh") && strstr(d, "label=\"out 0\""));
            CHECK(strstr(d, "-> e") && strstr(d, "[label=\"f32[16,8]\"]"));
            CHECK_EQ(count(d, "[shape=box"), cft_ir_num_eqns(irs[k]));
            CHECK_EQ(count(d, "{"), count(d, "}"));
            int r = render(d, k ? "grad" : "mlp");
            CHECK(r >= 0);
            if (k == 1)
                printf("  %s\n",
                       r ? "rendered with Graphviz" : "Graphviz not installed: not rendered");
            free(d);
        }
    }
    TEST("a scan's body is a cluster") {
        cft_aval xs = {CFT_F32, 1, {5}};
        cft_ir *ir = cft_make_ir(cft_fn_new(scanner, NULL, 1, 1), &xs);
        cft_status st;
        char *d = dot_of(write_ir, ir, &st);
        CHECK_EQ(st, CFT_OK);
        CHECK_MSG(strstr(d, "subgraph cluster_") && strstr(d, "label=\"scan") && strstr(d, "sin"),
                  "%s", d);
        CHECK(render(d, "scan") >= 0);
        free(d);
    }
    TEST("a jitted function's plan: fusion groups coloured; none before the first call") {
        cft_fn *j = cft_jit(cft_grad(f, (int[]){0, 1}, 2));
        cft_status st;
        char *d = dot_of(write_jit, j, &st);
        CHECK_EQ(st, CFT_E_ARG);
        CHECK(strstr(cft_last_error_message(), "not been called"));
        free(d);
        cft_array *in[3], *out[2];
        for (int i = 0; i < 3; i++)
            in[i] =
                cft_random_normal(cft_random_key((uint64_t)i), CFT_F32, av[i].shape, av[i].ndim);
        CHECK_EQ(cft_fn_call(j, in, out), CFT_OK);
        d = dot_of(write_jit, j, &st);
        CHECK_EQ(st, CFT_OK);
        CHECK_MSG(strstr(d, "group 0") && strstr(d, "fillcolor=\"#"), "%s", d);
        CHECK(render(d, "jit") >= 0);
        free(d);
        CHECK_EQ(cft_jit_to_dot(f, stdout), CFT_E_ARG); /* not jitted */
        CHECK_EQ(cft_ir_to_dot(NULL, stdout), CFT_E_ARG);
    }
    return check_summary();
}
