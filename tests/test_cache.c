/* test_cache.c: the kernel cache cannot be used to run someone else's code,
 * and the jit never falls back silently. Each case runs this program again
 * as a child (a fresh process: the cache directory is chosen once per
 * process) with a prepared environment and a planted directory or file:
 * a world-writable or foreign-owned cache directory is refused; a
 * truncated or corrupt object is rebuilt, never loaded; quotes and `;` in
 * CFT_CACHE_DIR reach no shell; a missing compiler gives one stderr line
 * (none with CFT_JIT_QUIET=1) and correct, interpreted results; a
 * private temporary directory goes with its process; the cache is bounded
 * (CFT_CACHE_MAX_MB: least recently used entries evicted). Also: a
 * fused group of more than 24 operands compiles and runs (it crashed the
 * emitter). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cft/cft.h"
#include "check.h"

static cft_status kern(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul(cft_tanh(cft_add(cft_mul(in[0], in[1]), in[1])), in[0]);
    return CFT_OK;
}

/* the child: jit a function, check it against the interpreter, report */
static int child(void) {
    cft_array *x = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){64, 32}, 2);
    cft_array *a = cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){32}, 1);
    cft_fn *f = cft_fn_new(kern, NULL, 2, 1), *j = cft_jit(f);
    cft_array *want = cft_fn_call1(f, (cft_array *[]){x, a}), *got = NULL;
    for (int i = 0; i < 3; i++)
        got = cft_fn_call1(j, (cft_array *[]){x, a});
    cft_jit_stats st;
    cft_jit_stats_of(j, &st);
    printf("compiles=%d interpreted=%d\n", st.compiles, st.interpreted);
    return cft_allclose(got, want, 1e-5, 1e-6, false) ? 0 : 3;
}

static char self[512], tmp[256];

/* run the child with env "K=V" pairs (V NULL: unset); its stdout and
 * stderr into buffers; returns its exit status */
static int run(const char *const *env, int n, char *out, size_t on, char *err, size_t en) {
    char fo[300], fe[300];
    snprintf(fo, sizeof fo, "%s/out", tmp);
    snprintf(fe, sizeof fe, "%s/err", tmp);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < n; i += 2) {
            if (env[i + 1])
                setenv(env[i], env[i + 1], 1);
            else
                unsetenv(env[i]);
        }
        int o = open(fo, O_WRONLY | O_CREAT | O_TRUNC, 0600),
            e = open(fe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1), dup2(e, 2);
        execl(self, self, "--child", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    FILE *f = fopen(fo, "r");
    size_t k = f ? fread(out, 1, on - 1, f) : 0;
    out[k] = 0;
    if (f)
        fclose(f);
    f = fopen(fe, "r");
    k = f ? fread(err, 1, en - 1, f) : 0;
    err[k] = 0;
    if (f)
        fclose(f);
    /* the line cft writes when it switches OpenBLAS to the CPU's kernels
     * (core/blas_core.c: on CPU models newer than OpenBLAS) is not the
     * cache's business: dropped before the lines are counted */
    for (char *l; (l = strstr(err, "cft: OpenBLAS ")) && (l == err || l[-1] == '\n');) {
        char *nl = strchr(l, '\n');
        memmove(l, nl ? nl + 1 : l + strlen(l), strlen(nl ? nl + 1 : l + strlen(l)) + 1);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* files in dir whose names end with suffix */
static int count(const char *dir, const char *suffix) {
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        n += l > s && !strcmp(e->d_name + l - s, suffix);
    }
    if (d)
        closedir(d);
    return n;
}

static int lines_with(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* a sum of 30 separately weighted activations: one group of > 24 operands */
static cft_status wide(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nout;
    cft_array *acc = NULL;
    for (int k = 1; k < nin; k++) {
        cft_array *t = cft_tanh(cft_add(cft_mul(in[0], in[k]), in[k]));
        acc = acc ? cft_add(acc, t) : t;
    }
    out[0] = acc;
    return CFT_OK;
}
static cft_status six_acts(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *x = cft_mul(in[0], in[1]);
    out[0] = cft_sum(cft_add(cft_add(cft_add(cft_tanh(x), cft_logistic(x)),
                                     cft_add(cft_exp(cft_neg(cft_square(x))), cft_sin(x))),
                             cft_add(cft_cos(x), cft_log1p(cft_square(x)))),
                     NULL, 0, false);
    return CFT_OK;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--child"))
        return child();
    check_init(argc, argv);
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = 0;
    snprintf(tmp, sizeof tmp, "/tmp/cft-test-cache-XXXXXX");
    if (!mkdtemp(tmp))
        return 1;
    char out[4096], err[8192], dir[400];

    TEST("quotes and ; in CFT_CACHE_DIR reach no shell; the directory is made 0700") {
        snprintf(dir, sizeof dir, "%s/q'uo\"te;touch INJECTED;'x", tmp);
        const char *env[] = {"CFT_CACHE_DIR", dir, "CFT_JIT", NULL};
        chdir(tmp);
        CHECK_EQ(run(env, 4, out, sizeof out, err, sizeof err), 0);
        CHECK(strstr(out, "compiles=1 interpreted=0") != NULL);
        CHECK(access("INJECTED", F_OK) != 0);
        struct stat st;
        CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
        CHECK_EQ(count(dir, ".so"), 1);
        CHECK_EQ(count(dir, ".sum"), 1);
        CHECK_EQ(count(dir, ".c"), 0); /* sources and temporaries are removed */
        CHECK_EQ(count(dir, ".tmp"), 0);
        CHECK_MSG(err[0] == 0, "stderr: %s", err);
    }
    TEST("a truncated cached object is rebuilt, not loaded") {
        char so[700];
        DIR *d = opendir(dir);
        struct dirent *e;
        so[0] = 0;
        while (d && (e = readdir(d)))
            if (strstr(e->d_name, ".so"))
                snprintf(so, sizeof so, "%s/%s", dir, e->d_name);
        if (d)
            closedir(d);
        struct stat before, after;
        CHECK(stat(so, &before) == 0);
        CHECK(truncate(so, 200) == 0);
        const char *env[] = {"CFT_CACHE_DIR", dir, "CFT_JIT", NULL};
        CHECK_EQ(run(env, 4, out, sizeof out, err, sizeof err), 0);
        CHECK(strstr(out, "compiles=1 interpreted=0") != NULL);
        CHECK(stat(so, &after) == 0 && after.st_size == before.st_size);
        /* the same size but other bytes: rebuilt too */
        FILE *f = fopen(so, "r+b");
        fseek(f, 1000, SEEK_SET);
        fputs("garbage", f);
        fclose(f);
        CHECK_EQ(run(env, 4, out, sizeof out, err, sizeof err), 0);
        CHECK(strstr(out, "compiles=1 interpreted=0") != NULL);
    }
    TEST("a world-writable cache directory is refused (one warning, private directory used)") {
        char loose[400];
        snprintf(loose, sizeof loose, "%s/loose", tmp);
        mkdir(loose, 0700);
        chmod(loose, 0777);
        const char *env[] = {"CFT_CACHE_DIR", loose, "CFT_JIT", NULL};
        CHECK_EQ(run(env, 4, out, sizeof out, err, sizeof err), 0);
        CHECK(strstr(out, "compiles=1 interpreted=0") != NULL);
        CHECK_MSG(strstr(err, "cannot use the kernel cache") &&
                      strstr(err, "writable by group or others"),
                  "%s", err);
        CHECK_EQ(lines_with(err, "\n"), 1);
        CHECK_EQ(count(loose, ".so"), 0); /* nothing written or loaded there */
    }
    TEST("a cache directory owned by another user is refused") {
        if (geteuid() != 0) {
            printf("skip: needs root to plant a foreign-owned directory\n");
        } else {
            char foreign[400];
            snprintf(foreign, sizeof foreign, "%s/foreign", tmp);
            mkdir(foreign, 0755);
            CHECK(chown(foreign, 65534, 65534) == 0);
            const char *env[] = {"CFT_CACHE_DIR", foreign, "CFT_JIT", NULL};
            CHECK_EQ(run(env, 4, out, sizeof out, err, sizeof err), 0);
            CHECK(strstr(out, "compiles=1 interpreted=0") != NULL);
            CHECK_MSG(strstr(err, "cannot use the kernel cache") &&
                          strstr(err, "owned by uid 65534"),
                      "%s", err);
            CHECK_EQ(count(foreign, ".so"), 0);
        }
    }
    TEST("an uncreatable cache directory: one warning, a private directory, compiled") {
        const char *env[] = {"CFT_CACHE_DIR", "/proc/cft-no-such-dir/cache", "CFT_JIT", NULL};
        CHECK_EQ(run(env, 4, out, sizeof out, err, sizeof err), 0);
        CHECK(strstr(out, "compiles=1 interpreted=0") != NULL);
        CHECK_MSG(strstr(err, "cannot use the kernel cache") && strstr(err, "cannot create"), "%s",
                  err);
        CHECK_EQ(lines_with(err, "\n"), 1);
    }
    TEST("the private temporary directory is removed when its process exits") {
        /* each process made one and left it behind */
        char tdir[400];
        snprintf(tdir, sizeof tdir, "%s/tmpdir", tmp);
        mkdir(tdir, 0700);
        const char *env[] = {
            "CFT_CACHE_DIR", "/proc/cft-no-such-dir/cache", "TMPDIR", tdir, "CFT_JIT", NULL};
        CHECK_EQ(run(env, 6, out, sizeof out, err, sizeof err), 0);
        CHECK(strstr(out, "compiles=1 interpreted=0") != NULL);
        int left = 0;
        DIR *d = opendir(tdir);
        struct dirent *e;
        while (d && (e = readdir(d)))
            left += !strncmp(e->d_name, "cft-", 4);
        if (d)
            closedir(d);
        CHECK_EQ(left, 0);
    }
    TEST("the cache is bounded: the least recently used entries are evicted") {
        char bounded[400], old[500], oldsum[520];
        snprintf(bounded, sizeof bounded, "%s/bounded", tmp);
        mkdir(bounded, 0700);
        snprintf(old, sizeof old, "%s/0123456789abcdef.so", bounded);
        snprintf(oldsum, sizeof oldsum, "%s.sum", old);
        FILE *f = fopen(old, "w"); /* 3 MB, a day old */
        for (int i = 0; f && i < 3 << 20; i++)
            fputc(0, f);
        if (f)
            fclose(f);
        f = fopen(oldsum, "w");
        if (f)
            fclose(f);
        struct timespec day_ago[2] = {{time(NULL) - 86400, 0}, {time(NULL) - 86400, 0}};
        utimensat(AT_FDCWD, old, day_ago, 0);
        const char *env[] = {"CFT_CACHE_DIR", bounded, "CFT_CACHE_MAX_MB", "1", "CFT_JIT", NULL};
        CHECK_EQ(run(env, 6, out, sizeof out, err, sizeof err), 0);
        CHECK(strstr(out, "compiles=1 interpreted=0") != NULL);
        CHECK(access(old, F_OK) != 0 && access(oldsum, F_OK) != 0); /* evicted */
        CHECK(count(bounded, ".so") >= 1);                          /* the new kernel stays */
    }
    TEST("XDG_CACHE_HOME is used when CFT_CACHE_DIR is unset; never a shared /tmp path") {
        char xdg[400], sub[420];
        snprintf(xdg, sizeof xdg, "%s/xdg", tmp);
        snprintf(sub, sizeof sub, "%s/cft", xdg);
        const char *env[] = {"CFT_CACHE_DIR", NULL, "XDG_CACHE_HOME", xdg,
                             "HOME",          NULL, "CFT_JIT",        NULL};
        CHECK_EQ(run(env, 8, out, sizeof out, err, sizeof err), 0);
        CHECK_EQ(count(sub, ".so"), 1);
    }
    TEST("no C compiler: one line on stderr, correct interpreted results") {
        const char *env[] = {"CFT_CACHE_DIR", dir, "CC", "cft-no-such-compiler", "CFT_JIT", NULL};
        /* a fresh key: the compiler is part of it */
        CHECK_EQ(run(env, 6, out, sizeof out, err, sizeof err), 0);
        CHECK(strstr(out, "compiles=0 interpreted=1") != NULL);
        CHECK_MSG(strstr(err, "cannot compile") && strstr(err, "cft-no-such-compiler") &&
                      strstr(err, "interpreting"),
                  "stderr: %s", err);
        CHECK_EQ(lines_with(err, "\n"), 1);
        const char *quiet[] = {"CFT_CACHE_DIR", dir, "CC",      "cft-no-such-compiler",
                               "CFT_JIT_QUIET", "1", "CFT_JIT", NULL};
        CHECK_EQ(run(quiet, 8, out, sizeof out, err, sizeof err), 0);
        CHECK_MSG(err[0] == 0, "stderr: %s", err);
        const char *spaced[] = {"CFT_CACHE_DIR", dir, "CC", "cc; touch INJECTED2", "CFT_JIT", NULL};
        CHECK_EQ(run(spaced, 6, out, sizeof out, err, sizeof err), 0);
        CHECK(strstr(err, "not a program name") != NULL);
        CHECK(access("INJECTED2", F_OK) != 0);
    }
    TEST("a fused group of more than 24 operands compiles and equals the interpreter") {
        int n = 31;
        cft_array *in[31];
        in[0] = cft_random_normal(cft_random_key(7), CFT_F32, (int64_t[]){16, 8}, 2);
        for (int k = 1; k < n; k++)
            in[k] =
                cft_random_normal(cft_random_key(100 + (uint64_t)k), CFT_F32, (int64_t[]){8}, 1);
        cft_fn *f = cft_fn_new(wide, NULL, n, 1), *j = cft_jit(f);
        cft_array *want = cft_fn_call1(f, in), *got = NULL;
        for (int c = 0; c < 3; c++)
            got = cft_fn_call1(j, in);
        CHECK_ARRAY_CLOSE(got, want, 1e-5, 1e-5);
        cft_jit_stats st;
        cft_jit_stats_of(j, &st);
        CHECK_EQ(st.interpreted, 0);
    }
    TEST("vmap(grad) of six activations and a third derivative under vmap, jitted") {
        cft_array *x = cft_random_normal(cft_random_key(8), CFT_F32, (int64_t[]){12, 5}, 2),
                  *w = cft_random_normal(cft_random_key(9), CFT_F32, (int64_t[]){5}, 1);
        cft_fn *g = cft_vmap(cft_grad(cft_fn_new(six_acts, NULL, 2, 1), (int[]){1}, 1),
                             (int[]){0, CFT_NOT_BATCHED}, NULL);
        cft_array *want = cft_fn_call1(g, (cft_array *[]){x, w}), *got = NULL;
        cft_fn *j = cft_jit(g);
        for (int c = 0; c < 3; c++)
            got = cft_fn_call1(j, (cft_array *[]){x, w});
        CHECK_ARRAY_CLOSE(got, want, 1e-4, 1e-5);
        cft_fn *h3 =
            cft_vmap(cft_jacfwd(cft_hessian(cft_fn_new(six_acts, NULL, 2, 1), 1), (int[]){1}, 1),
                     (int[]){0, CFT_NOT_BATCHED}, NULL);
        want = cft_fn_call1(h3, (cft_array *[]){x, w});
        j = cft_jit(h3);
        for (int c = 0; c < 3; c++)
            got = cft_fn_call1(j, (cft_array *[]){x, w});
        CHECK(!cft_failed(got));
        CHECK_ARRAY_CLOSE(got, want, 1e-3, 1e-4);
    }
    pid_t pid = fork(); /* remove the scratch tree */
    if (pid == 0) {
        execlp("rm", "rm", "-rf", tmp, (char *)NULL);
        _exit(1);
    }
    waitpid(pid, NULL, 0);
    return check_summary();
}
