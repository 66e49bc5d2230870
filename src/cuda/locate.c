/* locate.c: finding the CUDA toolkit's libraries (cuBLAS, cuFFT, cuSOLVER,
 * NCCL, NVRTC) where this machine has them, not where the backend was
 * built. Each library is looked for by its sonames in, in order:
 *
 *   CFT_CUDA_LIBDIR (directories, ':'-separated: the user's say),
 *   LD_LIBRARY_PATH,
 *   $CUDA_HOME, $CUDA_PATH, $CUDA_ROOT: lib64, lib, targets/<arch>/lib,
 *   the dynamic loader's configured directories (/etc/ld.so.conf and the
 *   files it includes),
 *   /usr/local/cuda and /usr/local/cuda-* (newest first), the same
 *   subdirectories, then the system library directories,
 *   the lib folders of NVIDIA's Python wheels (nvidia/<package>/lib in the
 *   site-packages of $VIRTUAL_ENV, ~/.local and the system pythons),
 *   and last the file found when the backend was built.
 *
 * Every candidate goes through the core's trust check before it is opened
 * (no file or directory another user can change). NVRTC's builtins library
 * is opened from NVRTC's own directory first, so NVRTC finds it even where
 * the loader would not. A library found nowhere is one error that says
 * which names it looked for, how many places, and the first of them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cuda/cuda_plugin.h"

#if defined(__x86_64__)
#define TARGET "x86_64-linux"
#elif defined(__aarch64__)
#define TARGET "sbsa-linux"
#else
#define TARGET "linux"
#endif

enum { MAX_DIRS = 256 };
typedef struct {
    char *d[MAX_DIRS];
    int n;
} dirs;

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void add(dirs *s, const char *d) {
    if (!d || !*d || s->n >= MAX_DIRS || !is_dir(d))
        return;
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->d[i], d))
            return;
    char *copy = strdup(d);
    if (copy)
        s->d[s->n++] = copy;
}

static void add_list(dirs *s, const char *list) {
    if (!list)
        return;
    char *copy = strdup(list), *save = NULL;
    for (char *t = strtok_r(copy, ":", &save); t; t = strtok_r(NULL, ":", &save))
        add(s, t);
    free(copy);
}

/* root/lib64, root/lib and root/targets/<arch>/lib */
static void add_root(dirs *s, const char *root) {
    if (!root || !*root)
        return;
    char p[1100];
    const char *sub[3] = {"lib64", "lib", "targets/" TARGET "/lib"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", root, sub[i]);
        add(s, p);
    }
}

static void add_glob(dirs *s, const char *pattern, bool newest_first) {
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0)
        return;
    for (size_t i = 0; i < g.gl_pathc; i++)
        add(s, g.gl_pathv[newest_first ? g.gl_pathc - 1 - i : i]);
    globfree(&g);
}

/* the directories of an ld.so.conf file and the files it includes */
static void add_ld_conf(dirs *s, const char *file, int depth) {
    FILE *f = depth < 4 ? fopen(file, "r") : NULL;
    if (!f)
        return;
    char line[1100];
    while (fgets(line, sizeof line, f)) {
        char *p = line + strspn(line, " \t");
        p[strcspn(p, "#\r\n")] = 0;
        for (size_t l = strlen(p); l && (p[l - 1] == ' ' || p[l - 1] == '\t'); l--)
            p[l - 1] = 0;
        if (!*p)
            continue;
        if (!strncmp(p, "include", 7) && (p[7] == ' ' || p[7] == '\t')) {
            glob_t g;
            if (glob(p + 8 + strspn(p + 8, " \t"), 0, NULL, &g) == 0) {
                for (size_t i = 0; i < g.gl_pathc; i++)
                    add_ld_conf(s, g.gl_pathv[i], depth + 1);
                globfree(&g);
            }
        } else if (*p == '/') {
            add(s, p);
        }
    }
    fclose(f);
}

static void add_wheels(dirs *s, const char *prefix) {
    if (!prefix || !*prefix)
        return;
    char pat[1100];
    snprintf(pat, sizeof pat, "%s/lib/python3*/site-packages/nvidia/*/lib", prefix);
    add_glob(s, pat, false);
    snprintf(pat, sizeof pat, "%s/lib/python3*/dist-packages/nvidia/*/lib", prefix);
    add_glob(s, pat, false);
}

static void search_dirs(dirs *s) {
    add_list(s, getenv("CFT_CUDA_LIBDIR"));
    add_list(s, getenv("LD_LIBRARY_PATH"));
    add_root(s, getenv("CUDA_HOME"));
    add_root(s, getenv("CUDA_PATH"));
    add_root(s, getenv("CUDA_ROOT"));
    add_ld_conf(s, "/etc/ld.so.conf", 0);
    add_root(s, "/usr/local/cuda");
    glob_t g;
    if (glob("/usr/local/cuda-*", 0, NULL, &g) == 0) {
        for (size_t i = g.gl_pathc; i-- > 0;) /* cuda-13.0 before cuda-12.8 */
            add_root(s, g.gl_pathv[i]);
        globfree(&g);
    }
    add(s, "/usr/lib/" TARGET "-gnu");
    add(s, "/usr/lib/x86_64-linux-gnu");
    add(s, "/usr/lib/aarch64-linux-gnu");
    add(s, "/usr/lib64");
    add(s, "/usr/lib");
    add_wheels(s, getenv("VIRTUAL_ENV"));
    const char *home = getenv("HOME");
    if (home) {
        char p[1100];
        snprintf(p, sizeof p, "%s/.local", home);
        add_wheels(s, p);
    }
    add_wheels(s, "/usr/local");
    add_wheels(s, "/usr");
}

static void free_dirs(dirs *s) {
    for (int i = 0; i < s->n; i++)
        free(s->d[i]);
    s->n = 0;
}

/* where each library was found: "NVRTC" -> path (for the checks) */
static struct { char what[32], path[1400]; } found[8];
static int nfound;
static pthread_mutex_t found_mu = PTHREAD_MUTEX_INITIALIZER;

static void remember(const char *what, const char *path) {
    pthread_mutex_lock(&found_mu);
    if (nfound < 8) {
        snprintf(found[nfound].what, sizeof found[nfound].what, "%s", what);
        snprintf(found[nfound].path, sizeof found[nfound].path, "%s", path);
        nfound++;
    }
    pthread_mutex_unlock(&found_mu);
}

/* NVRTC opens its builtins library by soname when it compiles: opened from
 * NVRTC's directory here (trusted), the loader then finds it loaded */
static void open_companions(const char *path) {
    const char *base = strrchr(path, '/');
    if (!base || strncmp(base + 1, "libnvrtc.so", 11))
        return;
    char pat[1200];
    snprintf(pat, sizeof pat, "%.*s/libnvrtc-builtins.so.*", (int)(base - path), path);
    glob_t g;
    if (glob(pat, 0, NULL, &g) != 0)
        return;
    char why[1100];
    for (size_t i = 0; i < g.gl_pathc; i++)
        if (cft_cuda_core->trusted(g.gl_pathv[i], why, sizeof why))
            dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_LOCAL);
    globfree(&g);
}

void *cft_cuda_find_lib(const char *const *sonames, const char *built, const char *what,
                        void **const *slots, const char *const *names, int count, char *err,
                        size_t n) {
    dirs s = {.n = 0};
    search_dirs(&s);
    char untrusted[600] = "", failed[600] = "", p[1400];
    for (int i = 0; i <= s.n; i++)
        for (int k = 0; sonames[k]; k++) {
            if (i == s.n) { /* last: the build machine's file */
                if (k > 0 || !built || !*built)
                    break;
                snprintf(p, sizeof p, "%s", built);
            } else {
                snprintf(p, sizeof p, "%s/%s", s.d[i], sonames[k]);
            }
            struct stat st;
            if (stat(p, &st) != 0)
                continue;
            char why[1100];
            if (!cft_cuda_core->trusted(p, why, sizeof why)) {
                if (!*untrusted)
                    snprintf(untrusted, sizeof untrusted, "; passed over %.500s", why);
                continue;
            }
            void *lib = cft_cuda_open_lib(p, what, slots, names, count, err, n);
            if (!lib && !*failed)
                snprintf(failed, sizeof failed, "; %.500s", err);
            if (lib) {
                open_companions(p);
                remember(what, p);
                free_dirs(&s);
                err[0] = 0;
                return lib;
            }
        }
    char looked[700] = "";
    for (int i = 0; i < s.n && i < 4; i++)
        snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "%s%s", i ? ", " : "",
                 s.d[i]);
    char names_tried[200] = "";
    for (int k = 0; sonames[k]; k++)
        snprintf(names_tried + strlen(names_tried), sizeof names_tried - strlen(names_tried),
                 "%s%s", k ? " or " : "", sonames[k]);
    snprintf(err, n,
             "%s not found: no usable %s in %d directories (%s%s%s) nor at the build's %s%s%s; "
             "set CUDA_HOME or CFT_CUDA_LIBDIR to where the toolkit's libraries are",
             what, names_tried, s.n, looked, s.n > 4 ? ", ..." : "", s.n ? "" : "none",
             built && *built ? built : "(none)", untrusted, failed);
    free_dirs(&s);
    return NULL;
}

/* for tests: where `what` ("NVRTC", "cuBLAS", ...) was loaded from, after
 * its first use; and a search for made-up sonames, to see the error */
__attribute__((visibility("default"))) int cft_cuda_found_path(const char *what, char *out,
                                                               size_t n) {
    int rc = -1;
    pthread_mutex_lock(&found_mu);
    for (int i = 0; i < nfound; i++)
        if (!strcmp(found[i].what, what)) {
            snprintf(out, n, "%s", found[i].path);
            rc = 0;
        }
    pthread_mutex_unlock(&found_mu);
    return rc;
}

__attribute__((visibility("default"))) int cft_cuda_find_check(const char *soname, char *err,
                                                               size_t n) {
    const char *const sonames[2] = {soname, NULL};
    void *dummy;
    void **const slots[1] = {&dummy};
    const char *const names[1] = {"cft_never_a_symbol"};
    return cft_cuda_find_lib(sonames, NULL, "the test's library", slots, names, 1, err, n) ? 0 : -1;
}
