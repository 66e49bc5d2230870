/* nvrtc.c: the CUDA backend's own kernels. CUDA C (the jit's fused groups,
 * lower/emit_cuda.c) is compiled by NVRTC to a CUBIN for the device's
 * architecture and kept in cft's private cache (core/cache.c, reached
 * through array/device_plugin.h) under a name made of a hash of the
 * source, NVRTC's version and the architecture, so a second process
 * compiles nothing; a cached CUBIN is used only when its record vouches
 * for it. NVRTC is opened at run time from the toolkit the backend was
 * built with, after checking that no other user can change it (the
 * plugin links nothing of CUDA). Modules are loaded once per device and
 * source; a kernel gets its argument struct as the parameter buffer and
 * a grid of 256-thread blocks, at most 65535 of them (the kernels loop
 * over their slots). Written against NVRTC and the driver of CUDA 13;
 * compiling runs in CI (test_cuda_plugin), launching has not yet run on a
 * GPU. */
#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_plugin.h"

static struct {
    void *lib;
    nvrtcResult (*version)(int *, int *);
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                          const char *const *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*log_size)(nvrtcProgram, size_t *);
    nvrtcResult (*log)(nvrtcProgram, char *);
    nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
    nvrtcResult (*cubin)(nvrtcProgram, char *);
    nvrtcResult (*destroy)(nvrtcProgram *);
    const char *(*error)(nvrtcResult);
    int major, minor;
} nv;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_err[1200];

static void load(void) {
    static const char *const sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", NULL};
#ifdef CFT_NVRTC_PATH
    const char *built = CFT_NVRTC_PATH; /* the build machine's, tried last */
#else
    const char *built = NULL;
#endif
    void **const slots[] = {(void **)&nv.version,  (void **)&nv.create,  (void **)&nv.compile,
                            (void **)&nv.log_size, (void **)&nv.log,     (void **)&nv.cubin_size,
                            (void **)&nv.cubin,    (void **)&nv.destroy, (void **)&nv.error};
    static const char *const names[] = {
        "nvrtcVersion",           "nvrtcCreateProgram",  "nvrtcCompileProgram",
        "nvrtcGetProgramLogSize", "nvrtcGetProgramLog",  "nvrtcGetCUBINSize",
        "nvrtcGetCUBIN",          "nvrtcDestroyProgram", "nvrtcGetErrorString"};
    nv.lib = cft_cuda_find_lib(sonames, built, "NVRTC", slots, names,
                               (int)(sizeof names / sizeof *names), load_err, sizeof load_err);
    if (nv.lib && nv.version(&nv.major, &nv.minor) != NVRTC_SUCCESS)
        snprintf(load_err, sizeof load_err, "nvrtcVersion failed");
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

/* NVRTC's compilation of src for arch into a malloc'd CUBIN */
static int compile(const char *src, const char *arch, void **cubin, size_t *n) {
    nvrtcProgram prog;
    nvrtcResult r = nv.create(&prog, src, "cft_kernels.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        cft_cuda_fail("NVRTC: nvrtcCreateProgram: %s", nv.error(r));
        return -1;
    }
    char opt_arch[64];
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
    const char *opts[] = {opt_arch, "-default-device", "--std=c++17", "-w"};
    r = nv.compile(prog, 4, opts);
    if (r != NVRTC_SUCCESS) {
        size_t ln = 0;
        char log[700] = "";
        if (nv.log_size(prog, &ln) == NVRTC_SUCCESS && ln > 1) {
            char *full = malloc(ln);
            if (full && nv.log(prog, full) == NVRTC_SUCCESS)
                snprintf(log, sizeof log, "%s", full);
            free(full);
        }
        nv.destroy(&prog);
        cft_cuda_fail("NVRTC could not compile a kernel for %s (%s): %s", arch, nv.error(r), log);
        return -1;
    }
    size_t size = 0;
    char *bin = NULL;
    if ((r = nv.cubin_size(prog, &size)) != NVRTC_SUCCESS || !(bin = malloc(size ? size : 1)) ||
        (r = nv.cubin(prog, bin)) != NVRTC_SUCCESS) {
        free(bin);
        nv.destroy(&prog);
        cft_cuda_fail("NVRTC: no CUBIN for %s: %s", arch,
                      r != NVRTC_SUCCESS ? nv.error(r) : "out of memory");
        return -1;
    }
    nv.destroy(&prog);
    *cubin = bin, *n = size;
    return 0;
}

int cft_cuda_cubin(const char *src, int major, int minor, void **cubin, size_t *n, int *hit) {
    pthread_once(&once, load);
    if (load_err[0]) {
        cft_cuda_fail("%s", load_err);
        return -1;
    }
    if (major < 1 || major > 99 || minor < 0 || minor > 9) {
        cft_cuda_fail("NVRTC: no architecture sm_%d%d", major, minor);
        return -1;
    }
    char arch[16], name[96];
    snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
    uint64_t h = fnv(1469598103934665603ull, src, strlen(src));
    snprintf(name, sizeof name, "cuda-%016llx-nvrtc%d.%d-%s.cubin", (unsigned long long)h, nv.major,
             nv.minor, arch);
    *hit = 0;
    if ((*cubin = cft_cuda_core->cache_get(name, n))) {
        *hit = 1;
        return 0;
    }
    if (compile(src, arch, cubin, n))
        return -1;
    cft_cuda_core->cache_put(name, *cubin, *n); /* a failed store only costs a recompile */
    return 0;
}

/* loaded modules: (device, source hash) -> module, under mu */
typedef struct module {
    int dev;
    uint64_t hash;
    CUmodule mod;
    struct module *next;
} module;
static module *modules;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static CUmodule module_of(int dev, const char *src) {
    uint64_t h = fnv(1469598103934665603ull, src, strlen(src));
    pthread_mutex_lock(&mu);
    CUmodule m = NULL;
    for (module *p = modules; p && !m; p = p->next)
        if (p->dev == dev && p->hash == h)
            m = p->mod;
    if (!m) {
        int major = 0, minor = 0;
        CUresult r =
            cft_cu.attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cft_cu.dev[dev]);
        if (r == CUDA_SUCCESS)
            r = cft_cu.attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cft_cu.dev[dev]);
        void *bin = NULL;
        size_t n = 0;
        int hit;
        module *p = malloc(sizeof *p);
        if (r != CUDA_SUCCESS)
            cft_cuda_fail("cuda:%d: its compute capability: %s", dev, cft_cuda_error_name(r));
        else if (!p)
            cft_cuda_fail("cuda:%d: out of memory", dev);
        else if (!cft_cuda_cubin(src, major, minor, &bin, &n, &hit)) {
            if ((r = cft_cu.load_data(&m, bin)) != CUDA_SUCCESS) {
                cft_cuda_fail("cuda:%d: cuModuleLoadData (sm_%d%d): %s", dev, major, minor,
                              cft_cuda_error_name(r));
                m = NULL;
            } else {
                p->dev = dev, p->hash = h, p->mod = m, p->next = modules;
                modules = p, p = NULL;
            }
        }
        free(bin);
        free(p);
    }
    pthread_mutex_unlock(&mu);
    return m;
}

int cft_cuda_launch(int dev, const char *src, const char *entry, const void *args, size_t size,
                    int64_t nslot) {
    if (cft_cuda_on(dev, entry))
        return -1;
    CUmodule m = module_of(dev, src);
    if (!m)
        return -1;
    CUfunction f;
    CUresult r = cft_cu.function(&f, m, entry);
    if (r != CUDA_SUCCESS) {
        cft_cuda_fail("cuda:%d: kernel %s: %s", dev, entry, cft_cuda_error_name(r));
        return -1;
    }
    int64_t blocks = (nslot + 255) / 256;
    if (blocks < 1)
        blocks = 1;
    if (blocks > 65535)
        blocks = 65535;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)args, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &size, CU_LAUNCH_PARAM_END};
    r = cft_cu.launch(f, (unsigned)blocks, 1, 1, 256, 1, 1, 0, cft_cuda_stream(dev), NULL, extra);
    if (r != CUDA_SUCCESS) {
        cft_cuda_fail("cuda:%d: launching %s (%lld blocks of 256): %s", dev, entry,
                      (long long)blocks, cft_cuda_error_name(r));
        return -1;
    }
    return 0;
}

/* for test_cuda_plugin (no GPU needed): compile src for "sm_XY" through
 * the cache; whether it came from there; 0, or -1 with the message */
__attribute__((visibility("default"))) int cft_cuda_compile_check(const char *src, const char *arch,
                                                                  size_t *n, int *hit, char *err,
                                                                  size_t en) {
    int v = 0;
    void *bin = NULL;
    int rc = -1;
    if (!arch || sscanf(arch, "sm_%d", &v) != 1 || v < 10)
        cft_cuda_fail("no architecture \"%s\" (sm_XY)", arch ? arch : "(null)");
    else
        rc = cft_cuda_cubin(src, v / 10, v % 10, &bin, n, hit);
    if (rc == 0 && (*n < 4 || memcmp(bin,
                                     "\x7f"
                                     "ELF",
                                     4))) {
        cft_cuda_fail("the CUBIN for %s is not an ELF image", arch);
        rc = -1;
    }
    free(bin);
    if (rc && err)
        snprintf(err, en, "%s", cft_cuda_message());
    return rc;
}

int cft_cuda_lib_kernel_check(const char *load_err, const char *src, char *err, size_t en) {
    if (load_err && load_err[0]) {
        snprintf(err, en, "%s", load_err);
        return -1;
    }
    size_t n = 0;
    int hit = 0;
    return cft_cuda_compile_check(src, "sm_90", &n, &hit, err, en);
}
