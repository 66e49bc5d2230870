/* host_kernels.c: the jit's CUDA C kernels run on the host, as the test
 * backend's run_kernel, and the CUDA backend's own kernels (cholesky's
 * steps, cuda/solver_map.h). The source (lower/emit_cuda.c: its prelude
 * has a host branch where blockIdx / threadIdx are thread-local variables;
 * a source without it gets the same) gets a launcher per kernel
 * `__global__ void <name>(const struct <tag> a)` that runs a grid of 3
 * blocks of 32 threads as
 * loops, so every grid-stride loop wraps; it is compiled by the C++
 * compiler (spawned without a shell) into a private temporary directory,
 * loaded, and kept for the process under a hash of the source. */
#include "host_kernels.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct built {
    uint64_t hash;
    void *so;
    struct built *next;
} built;
static built *done;
static char dir[64];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* the host's stand-ins for CUDA's launch indices, for a source without
 * the jit's prelude (which has its own) */
static const char *shim = "struct cft_dim3 { unsigned x, y, z; };\n"
                          "static thread_local cft_dim3 threadIdx, blockIdx, blockDim, gridDim;\n"
                          "#define __global__\n#define __device__\n";

/* the source with a launcher cft_launch_<name> for each kernel
 * `__global__ void <name>(const struct <tag> a)` */
static char *with_launchers(const char *src) {
    size_t cap = strlen(src) * 2 + 4096, len = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    len += (size_t)snprintf(out, cap, "#include <math.h>\n#include <string.h>\n%s%s\n",
                            strstr(src, "struct cft_dim3") ? "" : shim, src);
    for (const char *p = src; (p = strstr(p, "__global__ void "));) {
        p += strlen("__global__ void ");
        char name[64], tag[64];
        if (sscanf(p, "%63[A-Za-z0-9_](const struct %63[A-Za-z0-9_]", name, tag) != 2)
            continue;
        char l[640];
        int n =
            snprintf(l, sizeof l,
                     "extern \"C\" void cft_launch_%s(const void *args) {\n"
                     "    struct %s a;\n    memcpy(&a, args, sizeof a);\n"
                     "    gridDim = cft_dim3{3, 1, 1}, blockDim = cft_dim3{32, 1, 1};\n"
                     "    for (unsigned b = 0; b < 3; b++)\n"
                     "        for (unsigned t = 0; t < 32; t++) {\n"
                     "            blockIdx = cft_dim3{b, 0, 0}, threadIdx = cft_dim3{t, 0, 0};\n"
                     "            %s(a);\n        }\n}\n",
                     name, tag, name);
        if (len + (size_t)n + 1 > cap) {
            char *grown = realloc(out, cap = cap * 2 + (size_t)n);
            if (!grown) {
                free(out);
                return NULL;
            }
            out = grown;
        }
        memcpy(out + len, l, (size_t)n + 1);
        len += (size_t)n;
    }
    return out;
}

static void *build(const char *src, uint64_t h, char *err, unsigned long en) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/cft-host-kernels-XXXXXX");
        if (!mkdtemp(dir)) {
            snprintf(err, en, "host kernels: no temporary directory");
            dir[0] = 0;
            return NULL;
        }
    }
    char cc[128], so[128];
    snprintf(cc, sizeof cc, "%s/%016llx.cc", dir, (unsigned long long)h);
    snprintf(so, sizeof so, "%s/%016llx.so", dir, (unsigned long long)h);
    char *text = with_launchers(src);
    FILE *f = text ? fopen(cc, "wx") : NULL;
    if (!f) {
        free(text);
        snprintf(err, en, "host kernels: cannot write %s", cc);
        return NULL;
    }
    fputs(text, f);
    fclose(f);
    free(text);
    const char *argv[] = {"c++", "-O1", "-std=c++17", "-shared", "-fPIC", "-w",
                          "-o",  so,    cc,           "-lm",     NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, "c++", &fa, NULL, (char *const *)argv, environ), status = 1;
    posix_spawn_file_actions_destroy(&fa);
    while (rc == 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    void *h2 = rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0
                   ? dlopen(so, RTLD_NOW | RTLD_LOCAL)
                   : NULL;
    if (!h2)
        snprintf(err, en, "host kernels: c++ could not build %s", cc);
    unlink(cc);
    unlink(so);
    return h2;
}

int host_kernel_run(const char *source, const char *entry, const void *args, char *err,
                    unsigned long n) {
    uint64_t h = fnv(source);
    pthread_mutex_lock(&mu);
    void *so = NULL;
    for (built *b = done; b && !so; b = b->next)
        if (b->hash == h)
            so = b->so;
    if (!so && (so = build(source, h, err, n))) {
        built *b = malloc(sizeof *b);
        if (b) {
            b->hash = h, b->so = so, b->next = done;
            done = b;
        }
    }
    pthread_mutex_unlock(&mu);
    if (!so)
        return -1;
    char name[128];
    snprintf(name, sizeof name, "cft_launch_%s", entry);
    void (*launch)(const void *);
    *(void **)&launch = dlsym(so, name);
    if (!launch) {
        snprintf(err, n, "host kernels: no launcher %s", name);
        return -1;
    }
    launch(args);
    return 0;
}
