/* cc.c: compiling generated C. The source goes to the system C compiler
 * (gcc -O3 -march=native -fopenmp, libmvec for vector libm), and the shared
 * object is cached on disk under $CFT_CACHE_DIR (default ~/.cache/cft),
 * named by a hash of the source, the compiler, its flags and the CPU, so a
 * second process compiles nothing. Files are written under temporary names
 * and renamed, so processes compiling at once never see a partial file.
 * CFT_JIT=0, or no working compiler, disables compilation (the interpreter
 * runs instead, with the same results). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/mem.h"
#include "lower/lower.h"

static const char *FLAGS = "-O3 -march=native -fopenmp -fPIC -shared -w";

static uint64_t fnv(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* what the compiled code depends on besides its source */
static uint64_t env_hash(const char *cc) {
    static uint64_t h;
    if (h)
        return h;
    h = fnv(1469598103934665603ull, cc, strlen(cc));
    h = fnv(h, FLAGS, strlen(FLAGS));
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) || !strncmp(line, "flags", 5)) {
            h = fnv(h, line, strlen(line));
            if (!strncmp(line, "flags", 5))
                break;
        }
    if (f)
        fclose(f);
    struct stat st; /* a new compiler binary gives new objects */
    char path[256];
    snprintf(path, sizeof path, "/usr/bin/%s", cc);
    if (stat(path, &st) == 0)
        h = fnv(h, (const char *)&st.st_mtime, sizeof st.st_mtime);
    return h;
}

static int mkdirs(const char *dir) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
    return mkdir(tmp, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

typedef struct loaded {
    uint64_t key;
    void *handle;
    struct loaded *next;
} loaded;
static loaded *loaded_list; /* static root: the GC sees it */

bool cft__compile(const char *src, int n, cft_kernel_fn *out) {
    const char *jit = getenv("CFT_JIT");
    if (jit && !strcmp(jit, "0"))
        return false;
    const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    uint64_t key = fnv(env_hash(cc), src, strlen(src));
    void *h = NULL;
    for (loaded *l = loaded_list; l; l = l->next)
        if (l->key == key)
            h = l->handle;
    if (!h) {
        char dir[1024], so[1200];
        const char *cd = getenv("CFT_CACHE_DIR"), *home = getenv("HOME");
        if (cd && *cd)
            snprintf(dir, sizeof dir, "%s", cd);
        else
            snprintf(dir, sizeof dir, "%s/.cache/cft", home && *home ? home : "/tmp");
        if (mkdirs(dir))
            return false;
        snprintf(so, sizeof so, "%s/%016llx.so", dir, (unsigned long long)key);
        if (access(so, R_OK) != 0) {
            char csrc[1300], tmpso[1300], cmd[4096];
            static int counter;
            int id = counter++;
            snprintf(csrc, sizeof csrc, "%s/%016llx.%d.%d.c", dir, (unsigned long long)key,
                     (int)getpid(), id);
            snprintf(tmpso, sizeof tmpso, "%s/%016llx.%d.%d.so.tmp", dir, (unsigned long long)key,
                     (int)getpid(), id);
            FILE *f = fopen(csrc, "w");
            if (!f)
                return false;
            fputs(src, f);
            if (fclose(f) != 0)
                return false;
            snprintf(cmd, sizeof cmd, "%s %s -o '%s' '%s' -lmvec -lm 2> '%s.log'", cc, FLAGS, tmpso,
                     csrc, csrc);
            int rc = system(cmd);
            if (rc != 0 || rename(tmpso, so) != 0) {
                if (cft__debug())
                    fprintf(stderr, "cft: kernel compile failed (%s); see %s.log\n", cmd, csrc);
                unlink(tmpso);
                return false;
            }
            char log[1320];
            snprintf(log, sizeof log, "%s.log", csrc);
            unlink(log);
            if (!getenv("CFT_KEEP_SOURCE"))
                unlink(csrc);
        }
        h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            if (cft__debug())
                fprintf(stderr, "cft: dlopen %s: %s\n", so, dlerror());
            return false;
        }
        loaded *l = CFT_NEW(loaded);
        l->key = key;
        l->handle = h;
        l->next = loaded_list;
        loaded_list = l;
    }
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "cft_k%d", i);
        *(void **)&out[i] = dlsym(h, name);
        if (!out[i])
            return false;
    }
    return true;
}
