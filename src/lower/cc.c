/* cc.c: compiling generated C into cft's private kernel cache.
 *
 * The source goes to the system C compiler (gcc -O3 -march=native
 * -fno-math-errno -fopenmp, or the CPU named by CFT_JIT_TARGET, libmvec for
 * vector libm), started with posix_spawnp and an argument
 * vector: no shell ever sees a path. Objects go to the private cache of
 * core/cache.c (its directory rules, exclusive temporary files renamed into
 * place, a hash record beside each object), named by a hash of the source,
 * the compiler, its flags and the CPU, so a second process compiles
 * nothing. An object is loaded only after its record vouches for it
 * (nobody else can write the directory, so nothing can swap it between
 * the check and dlopen); a mismatch (truncated or corrupt object) is
 * rebuilt, never loaded. When nothing can be compiled, the reason goes
 * back to the jit, which says so once on stderr and interprets. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cache.h"
#include "core/error.h"
#include "core/mem.h"
#include "lower/lower.h"

extern char **environ;

/* -fno-math-errno: kernels never read errno, and with it sqrt is one
 * vector instruction instead of a scalar call per element (a jitted Adam
 * step: 4x). -fno-trapping-math: kernels never read the floating-point
 * flags, and without it GCC keeps the branches of the half conversions'
 * selects (array/half_fns.h, written branch-free) and their loops scalar,
 * as in half_cast.c; neither changes a value. */
static const char *FLAGS[] = {"-O3",      "-march=native", "-fno-math-errno", "-fno-trapping-math",
                              "-fopenmp", "-fPIC",         "-shared",         "-w"};
#define NFLAGS (int)(sizeof FLAGS / sizeof FLAGS[0])

/* CFT_JIT_TARGET: the CPU the kernels are compiled for, gcc's -march
 * (default native: this CPU's features; x86-64-v3 builds AVX2 kernels that
 * run on any x86-64 CPU of the last ten years, as a CI pass checks). A
 * name of letters, digits and '-', '_', '.' only; anything else is
 * refused with one line on stderr and native used. */
static char march[80] = "-march=native";
static void read_target(void) {
    const char *t = getenv("CFT_JIT_TARGET");
    if (!t || !*t)
        return;
    bool ok = strlen(t) < sizeof march - 8;
    for (const char *c = t; ok && *c; c++)
        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
             *c == '-' || *c == '_' || *c == '.';
    if (!ok) {
        fprintf(stderr,
                "cft: CFT_JIT_TARGET='%.40s' is not a CPU name; kernels use -march=native\n", t);
        return;
    }
    snprintf(march, sizeof march, "-march=%s", t);
    FLAGS[1] = march;
}
static void target_once(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_target);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* the loaded objects */
#define why cft__cache_why

/* what the compiled code depends on besides its source */
static uint64_t env_hash(const char *cc) {
    target_once();
    uint64_t h = cft__fnv(CFT_FNV0, cc, strlen(cc));
    for (int i = 0; i < NFLAGS; i++)
        h = cft__fnv(h, FLAGS[i], strlen(FLAGS[i]));
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) || !strncmp(line, "flags", 5)) {
            h = cft__fnv(h, line, strlen(line));
            if (!strncmp(line, "flags", 5))
                break;
        }
    if (f)
        fclose(f);
    struct stat st; /* a new compiler binary gives new objects */
    char path[512];
    snprintf(path, sizeof path, "%s%s", cc[0] == '/' ? "" : "/usr/bin/", cc);
    if (stat(path, &st) == 0)
        h = cft__fnv(h, &st.st_mtime, sizeof st.st_mtime);
    return h;
}

/* ---- compiling ---- */

/* run cc on csrc into out, its stderr into log; 0 on success */
static int run_cc(const char *cc, const char *csrc, const char *out, const char *log, bool cxx,
                  char *err, size_t n) {
    const char *argv[NFLAGS + 12];
    int a = 0;
    target_once();
    argv[a++] = cc;
    for (int i = 0; i < NFLAGS; i++)
        argv[a++] = FLAGS[i];
    argv[a++] = "-o";
    argv[a++] = out;
    if (cxx) /* the CUDA kernels' host shim (emit_cuda.c) */
        argv[a++] = "-x", argv[a++] = "c++";
    argv[a++] = csrc;
    if (cxx)
        argv[a++] = "-x", argv[a++] = "none";
    argv[a++] = "-lmvec";
    argv[a++] = "-lm";
    argv[a] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, cc, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        why(err, n, "cannot start the C compiler '%s': %s", cc, strerror(rc));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            why(err, n, "waiting for the C compiler '%s': %s", cc, strerror(errno));
            return -1;
        }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        why(err, n, "the C compiler '%s' was not found", cc);
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        why(err, n, "the C compiler '%s' failed (exit status %d; log: %s)", cc,
            WIFEXITED(status) ? WEXITSTATUS(status) : -1, log);
        return -1;
    }
    return 0;
}

/* compile src into the cache as so (with its .sum); 0 on success */
static int build(const char *cc, const char *src, const char *base, bool cxx, char *err, size_t n) {
    char csrc[1200], tmpso[1200], log[1200], so[1200], sum[1200], tmpsum[1200];
    unsigned long long r = cft__cache_rnd();
    snprintf(csrc, sizeof csrc, "%s.%llx.c", base, r);
    snprintf(tmpso, sizeof tmpso, "%s.%llx.so.tmp", base, r);
    snprintf(log, sizeof log, "%s.%llx.log", base, r);
    snprintf(so, sizeof so, "%s.so", base);
    snprintf(sum, sizeof sum, "%s.sum", base);
    snprintf(tmpsum, sizeof tmpsum, "%s.%llx.sum.tmp", base, r);
    if (cft__cache_write_new(csrc, src, strlen(src)) != 0) {
        why(err, n, "cannot write %s: %s", csrc, strerror(errno));
        return -1;
    }
    int rc = run_cc(cc, csrc, tmpso, log, cxx, err, n);
    if (rc == 0 && cft__cache_commit(tmpso, so, sum, tmpsum) != 0) {
        why(err, n, "cannot record the kernel's hash and rename it into %s: %s", so,
            strerror(errno));
        rc = -1;
    }
    unlink(tmpso);
    if (rc == 0 || !cft__debug())
        unlink(log);
    if (!getenv("CFT_KEEP_SOURCE"))
        unlink(csrc);
    return rc;
}

/* load base.so if its record vouches for it; NULL otherwise */
static void *load_checked(const char *base) {
    char so[1200], sum[1200];
    snprintf(so, sizeof so, "%s.so", base);
    snprintf(sum, sizeof sum, "%s.sum", base);
    int fd = cft__cache_vouched(so, sum);
    if (fd < 0) {
        if (cft__debug())
            fprintf(stderr, "cft: no cached kernel %s that matches its record: building\n", so);
        return NULL;
    }
    void *handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!handle && cft__debug())
        fprintf(stderr, "cft: dlopen %s: %s\n", so, dlerror());
    close(fd);
    return handle;
}

typedef struct loaded {
    uint64_t key;
    void *handle;
    struct loaded *next;
} loaded;
static loaded *loaded_list; /* static root: the GC sees it */

static bool compile_locked(const char *src, int n, bool cxx, cft_kernel_fn *out, char *err,
                           size_t en) {
    const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    if (strchr(cc, ' ') || strchr(cc, '\t')) {
        why(err, en, "CC='%s' is not a program name (cft runs it without a shell)", cc);
        return false;
    }
    static uint64_t eh;
    static char eh_cc[256];
    if (!eh || strcmp(eh_cc, cc)) {
        eh = env_hash(cc);
        snprintf(eh_cc, sizeof eh_cc, "%s", cc);
    }
    uint64_t key = cft__fnv(cft__fnv(eh, src, strlen(src)), cxx ? "c++" : "c", cxx ? 3 : 1);
    void *h = NULL;
    for (loaded *l = loaded_list; l; l = l->next)
        if (l->key == key)
            h = l->handle;
    if (!h) {
        const char *cache_dir = cft__cache_dir_why(err, en);
        if (!cache_dir)
            return false;
        char base[1100];
        snprintf(base, sizeof base, "%s/%016llx", cache_dir, (unsigned long long)key);
        h = load_checked(base);
        if (!h) {
            char so[1200];
            snprintf(so, sizeof so, "%s.so", base);
            if (build(cc, src, base, cxx, err, en) != 0)
                return false;
            h = load_checked(base);
            if (!h) {
                why(err, en, "the freshly compiled %s could not be loaded", so);
                return false;
            }
        }
        loaded *l = CFT_NEW(loaded);
        if (!l) {
            why(err, en, "out of memory");
            return false;
        }
        l->key = key;
        l->handle = h;
        l->next = loaded_list;
        loaded_list = l;
    }
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "cft_k%d", i);
        *(void **)&out[i] = dlsym(h, name);
        if (!out[i]) {
            why(err, en, "kernel %s missing from the compiled object", name);
            return false;
        }
    }
    return true;
}

bool cft__compile(const char *src, int n, bool cxx, cft_kernel_fn *out, char *err, size_t en) {
    const char *jit = getenv("CFT_JIT");
    if (jit && !strcmp(jit, "0")) {
        why(err, en, "CFT_JIT=0");
        return false;
    }
    pthread_mutex_lock(&mu);
    bool ok = compile_locked(src, n, cxx, out, err, en);
    pthread_mutex_unlock(&mu);
    return ok;
}
