/* cft-cuda-check: compile generated CUDA kernels with NVRTC, no GPU needed.
 *
 *   cft-cuda-check [--arch sm_XX]... DIR_OR_FILE...
 *
 * The .cu files (as CFT_CUDA_DUMP=dir writes them: one per jit plan, see
 * src/lower/emit_cuda.c) are split into their kernels; the distinct ones
 * (plans share many) are renumbered and compiled in batches of BATCH under
 * one copy of the prelude, to a CUBIN for each architecture (default sm_80
 * and sm_90), with the options the CUDA backend uses. When a batch fails,
 * its kernels are compiled one by one, and each failing one is reported
 * with its file, the architecture and NVRTC's log; the exit status is then
 * 1; 0 when everything compiled, 2 on bad arguments or when there was
 * nothing to compile. Built only when CMake finds the CUDA toolkit; links
 * NVRTC alone (no driver, no runtime). */
#define _GNU_SOURCE
#include <dirent.h>
#include <nvrtc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAXARCH = 8, BATCH = 400 };

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf)
        buf[n] = 0;
    return buf;
}

/* compile src for arch; 0 on success (every cft_g<k> present) */
static int check(const char *path, const char *src, const char *arch, bool quiet) {
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, src, path, 0, NULL, NULL) != NVRTC_SUCCESS) {
        fprintf(stderr, "%s: nvrtcCreateProgram failed\n", path);
        return 1;
    }
    char opt_arch[64];
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
    const char *opts[] = {opt_arch, "-default-device", "--std=c++17", "-w"};
    nvrtcResult r = nvrtcCompileProgram(prog, 4, opts);
    int bad = r != NVRTC_SUCCESS;
    if (bad && !quiet) {
        size_t n = 0;
        nvrtcGetProgramLogSize(prog, &n);
        char *log = malloc(n + 1);
        if (log && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS)
            fprintf(stderr, "%s (%s): %s\n%s\n", path, arch, nvrtcGetErrorString(r), log);
        free(log);
    } else {
        size_t cubin = 0;
        if (nvrtcGetCUBINSize(prog, &cubin) != NVRTC_SUCCESS || cubin == 0) {
            if (!quiet)
                fprintf(stderr, "%s (%s): no CUBIN\n", path, arch);
            bad = 1;
        }
    }
    nvrtcDestroyProgram(&prog);
    return bad;
}

static int files, failures, nkern;
static const char *archs[MAXARCH];
static int narch;
static char *prelude;
typedef struct {
    char *text; /* the kernel with its number replaced by '@' */
    const char *file;
} kernel;
static kernel *kern;
static int kcap;

/* s with every cft_a<digits> / cft_g<digits> written as cft_a@ / cft_g@,
 * and its values v<id> renumbered by first appearance (the same kernel
 * made from other IR var ids is then the same text) */
static char *normalise(const char *s, size_t n) {
    char *o = malloc(3 * n + 16), *w = o; /* "v5" may become "v1023" */
    long ids[1024];
    int nid = 0;
    for (size_t i = 0; o && i < n;) {
        bool word =
            i > 0 && (s[i - 1] == '_' || (s[i - 1] >= 'a' && s[i - 1] <= 'z') ||
                      (s[i - 1] >= 'A' && s[i - 1] <= 'Z') || (s[i - 1] >= '0' && s[i - 1] <= '9'));
        if (i + 5 < n && !strncmp(s + i, "cft_", 4) && (s[i + 4] == 'a' || s[i + 4] == 'g') &&
            s[i + 5] >= '0' && s[i + 5] <= '9') {
            memcpy(w, s + i, 5), w += 5, *w++ = '@', i += 5;
            while (i < n && s[i] >= '0' && s[i] <= '9')
                i++;
        } else if (!word && s[i] == 'v' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9') {
            long id = strtol(s + i + 1, NULL, 10);
            int k = 0;
            while (k < nid && ids[k] != id)
                k++;
            if (k == nid && nid < 1024)
                ids[nid++] = id;
            w += sprintf(w, "v%d", k);
            for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
                ;
        } else
            *w++ = s[i++];
    }
    if (o)
        *w = 0;
    return o;
}

static void add_kernel(const char *file, const char *s, size_t n) {
    char *t = normalise(s, n);
    if (!t)
        return;
    for (int i = 0; i < nkern; i++)
        if (!strcmp(kern[i].text, t)) {
            free(t);
            return;
        }
    if (nkern == kcap) {
        kcap = kcap ? 2 * kcap : 256;
        kern = realloc(kern, sizeof *kern * (size_t)kcap);
    }
    kern[nkern++] = (kernel){t, file};
}

static void read_file(const char *path) {
    char *src = slurp(path);
    const char *first = src ? strstr(src, "\nstruct cft_a") : NULL; /* at a line start */
    if (!first) {
        fprintf(stderr, "%s: cannot read, or no kernels in it\n", path);
        failures++;
        free(src);
        return;
    }
    files++;
    if (!prelude)
        prelude = strndup(src, (size_t)(++first - src));
    else
        first++;
    const char *file = strdup(path);
    for (const char *p = first; p;) {
        const char *next = strstr(p, "\nstruct cft_a");
        add_kernel(file, p, next ? (size_t)(next + 1 - p) : strlen(p));
        p = next ? next + 1 : NULL;
    }
    free(src);
}

/* the prelude and kernels [lo, hi), numbered 0.. */
static char *program(int lo, int hi) {
    size_t cap = strlen(prelude) + 1;
    for (int i = lo; i < hi; i++)
        cap += strlen(kern[i].text) + 64;
    char *p = malloc(cap), *w = p;
    w += sprintf(w, "%s", prelude);
    for (int i = lo; i < hi; i++)
        for (const char *t = kern[i].text; *t; t++)
            w += *t == '@' ? sprintf(w, "%d", i - lo) : (*w = *t, 1);
    *w = 0;
    return p;
}

static void check_range(int lo, int hi, const char *arch) {
    char *src = program(lo, hi), name[64];
    snprintf(name, sizeof name, "kernels_%d_%d.cu", lo, hi);
    int bad = check(hi - lo == 1 ? kern[lo].file : name, src, arch, hi - lo > 1);
    free(src);
    if (!bad)
        return;
    if (hi - lo == 1) {
        failures++;
        return;
    }
    for (int i = lo; i < hi; i++) /* find the failing ones */
        check_range(i, i + 1, arch);
}

int main(int argc, char **argv) {
    int nargs = 0;
    const char *args[256];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc && narch < MAXARCH)
            archs[narch++] = argv[++i];
        else if (nargs < 256)
            args[nargs++] = argv[i];
    }
    if (!nargs) {
        fprintf(stderr, "usage: cft-cuda-check [--arch sm_XX]... DIR_OR_FILE...\n");
        return 2;
    }
    if (!narch)
        archs[narch++] = "sm_80", archs[narch++] = "sm_90";
    for (int i = 0; i < nargs; i++) {
        DIR *d = opendir(args[i]);
        if (!d) {
            read_file(args[i]);
            continue;
        }
        for (struct dirent *e; (e = readdir(d));) {
            size_t n = strlen(e->d_name);
            if (n > 3 && !strcmp(e->d_name + n - 3, ".cu")) {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", args[i], e->d_name);
                read_file(path);
            }
        }
        closedir(d);
    }
    for (int a = 0; a < narch && prelude; a++)
        for (int lo = 0; lo < nkern; lo += BATCH)
            check_range(lo, lo + BATCH < nkern ? lo + BATCH : nkern, archs[a]);
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    printf("cft-cuda-check: NVRTC %d.%d, %d files, %d distinct kernels, %d architectures, %d "
           "failures\n",
           major, minor, files, nkern, narch, failures);
    return failures ? 1 : files ? 0 : 2;
}
