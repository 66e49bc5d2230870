/* test_cuda_plugin.c: what libcft_cuda.so does without a GPU. cft loads
 * it on cft_device("cuda:0") (here the device is the error "no CUDA
 * driver"; on a GPU machine a device); the plugin then opens cuBLAS,
 * cuFFT and cuSOLVER from the toolkit it was built with (with every
 * function it calls), and compiles CUDA C with NVRTC to CUBINs
 * for sm_80 and sm_90 through cft's private cache: a second compile is a
 * cache hit, a corrupted CUBIN is compiled again (never used), a kernel
 * that does not compile is an error carrying NVRTC's log, and four
 * threads compiling at once all get their CUBIN.
 *
 * With CFT_TEST_LOCATE=1 (ctest test_cuda_locate, a process of its own):
 * the toolkit's libraries are found where this machine has them, not only
 * at the build's paths: NVRTC is put (as a link) under a fresh
 * CUDA_HOME's targets/<arch>/lib, the layout the toolkit has on GPU
 * machines, and must be loaded from there; a library that is nowhere is
 * one error naming where it looked. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "cft/device.h"
#include "prims/conv_geom.h" /* cft__conv_kernel_source */
#include "prims/rules.h"     /* cft__dot_kernel_source, cft__sparse24_kernel_source */

typedef int (*compile_fn)(const char *src, const char *arch, size_t *n, int *hit, char *err,
                          size_t en);
static compile_fn compile;
static char dir[256];

static const char *kernel =
    "extern \"C\" __global__ void cft_g0(float *y, const float *x, long long n) {\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "         i += (long long)gridDim.x * blockDim.x)\n"
    "        y[i] = tanhf(x[i]) * 2.0f;\n"
    "}\n";

/* the cached CUBIN for arch, by its name's ending */
static int cached(const char *arch, char *path, size_t n) {
    DIR *d = opendir(dir);
    int found = 0;
    struct dirent *e;
    char tail[32];
    snprintf(tail, sizeof tail, "-%s.cubin", arch);
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name), t = strlen(tail);
        if (!strncmp(e->d_name, "cuda-", 5) && l > t && !strcmp(e->d_name + l - t, tail)) {
            snprintf(path, n, "%s/%s", dir, e->d_name);
            found++;
        }
    }
    if (d)
        closedir(d);
    return found;
}

static void *racer(void *arg) {
    char src[512], err[256];
    snprintf(src, sizeof src, "%s// variant %d\n", kernel, 7);
    size_t n = 0;
    int hit = 0;
    (void)arg;
    return (void *)(long)compile(src, "sm_90", &n, &hit, err, sizeof err);
}

/* NVRTC under a made-up CUDA_HOME (before the plugin loads anything) */
static int locate_tests(void) {
    char home[300], lib[400], link[500];
    snprintf(home, sizeof home, "%s/toolkit", dir);
    snprintf(lib, sizeof lib, "%s/targets", home);
    mkdir(home, 0755);
    mkdir(lib, 0755);
#if defined(__x86_64__)
    snprintf(lib, sizeof lib, "%s/targets/x86_64-linux", home);
#else
    snprintf(lib, sizeof lib, "%s/targets/sbsa-linux", home);
#endif
    mkdir(lib, 0755);
    strncat(lib, "/lib", sizeof lib - strlen(lib) - 1);
    mkdir(lib, 0755);
    snprintf(link, sizeof link, "%s/libnvrtc.so.13", lib);
    if (symlink(CFT_NVRTC_REAL, link) != 0)
        return 1;
    setenv("CUDA_HOME", home, 1);
    unsetenv("CFT_CUDA_LIBDIR");
    unsetenv("LD_LIBRARY_PATH");
    void *h = NULL;
    TEST("the plugin loads") {
        cft_device("cuda:0");
        h = dlopen(CFT_CUDA_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
        CHECK(h != NULL);
    }
    if (!h)
        return check_summary();
    *(void **)&compile = dlsym(h, "cft_cuda_compile_check");
    int (*found)(const char *, char *, size_t), (*find)(const char *, char *, size_t);
    *(void **)&found = dlsym(h, "cft_cuda_found_path");
    *(void **)&find = dlsym(h, "cft_cuda_find_check");
    TEST("NVRTC is found under CUDA_HOME/targets/<arch>/lib, and compiles there") {
        size_t n = 0;
        int hit = -1;
        char err[1300] = "", path[1200] = "";
        CHECK(compile && found);
        CHECK_MSG(compile && compile(kernel, "sm_90", &n, &hit, err, sizeof err) == 0, "%s", err);
        CHECK_MSG(found && found("NVRTC", path, sizeof path) == 0 && !strcmp(path, link),
                  "NVRTC from %s, not %s", path, link);
        printf("  NVRTC: %s\n", path);
    }
    TEST("a library that is nowhere: one error naming the names and where it looked") {
        char err[1300] = "";
        CHECK(find != NULL);
        CHECK(find && find("libcft-not-a-cuda-library.so.1", err, sizeof err) != 0);
        printf("  %s\n", err);
        CHECK_MSG(strstr(err, "libcft-not-a-cuda-library.so.1") && strstr(err, "not found") &&
                      strstr(err, lib) && strstr(err, "CUDA_HOME"),
                  "%s", err);
    }
    unlink(link);
    return check_summary();
}

int main(int argc, char **argv) {
    snprintf(dir, sizeof dir, "/tmp/cft-cuda-plugin-test-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    setenv("CFT_CACHE_DIR", dir, 1);
    check_init(argc, argv);
    if (getenv("CFT_TEST_LOCATE"))
        return locate_tests();
    void *h = NULL;
    TEST("cft_device(\"cuda:0\") loads the plugin: a device, or a clear error") {
        cft_dev *d = cft_device("cuda:0");
        cft_array *e = cft_device_error(d);
        if (e)
            printf("  cuda:0: %s\n", cft_error_message(e));
        CHECK_MSG(!e || !strstr(cft_error_message(e), "cannot be loaded"), "%s",
                  cft_error_message(e));
        h = dlopen(CFT_CUDA_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
        CHECK_MSG(h != NULL, "%s is not loaded", CFT_CUDA_PLUGIN);
    }
    if (!h)
        return check_summary();
    *(void **)&compile = dlsym(h, "cft_cuda_compile_check");
    int (*blas)(char *, size_t);
    *(void **)&blas = dlsym(h, "cft_cuda_blas_check");
    TEST("cuBLAS opens from the toolkit, with every function the backend calls") {
        char err[1300] = "";
        CHECK(blas != NULL);
        CHECK_MSG(blas && blas(err, sizeof err) == 0, "%s", err);
    }
    TEST("NVRTC compiles a kernel for sm_80 and sm_90; the second time it is cached") {
        CHECK(compile != NULL);
        const char *arch[2] = {"sm_80", "sm_90"};
        for (int a = 0; a < 2 && compile; a++) {
            size_t n = 0, n2 = 0;
            int hit = -1;
            char err[1300] = "";
            CHECK_MSG(compile(kernel, arch[a], &n, &hit, err, sizeof err) == 0, "%s", err);
            CHECK(n > 100 && hit == 0);
            CHECK_MSG(compile(kernel, arch[a], &n2, &hit, err, sizeof err) == 0, "%s", err);
            CHECK(n2 == n && hit == 1);
            char path[600];
            CHECK_EQ(cached(arch[a], path, sizeof path), 1);
        }
    }
    TEST("a corrupted cached CUBIN is compiled again, never used") {
        char path[600], err[1300] = "";
        if (compile && cached("sm_80", path, sizeof path) == 1) {
            FILE *f = fopen(path, "r+b");
            CHECK(f != NULL);
            if (f) {
                fseek(f, 64, SEEK_SET);
                fputc(0x5a, f);
                fclose(f);
            }
            size_t n = 0;
            int hit = -1;
            CHECK_MSG(compile(kernel, "sm_80", &n, &hit, err, sizeof err) == 0, "%s", err);
            CHECK_EQ(hit, 0);
            CHECK_MSG(compile(kernel, "sm_80", &n, &hit, err, sizeof err) == 0, "%s", err);
            CHECK_EQ(hit, 1);
        } else {
            CHECK(false);
        }
    }
    TEST("cuFFT opens from the toolkit; its scale kernel compiles (after the cache checks: it adds "
         "a CUBIN)") {
        int (*fft)(char *, size_t);
        *(void **)&fft = dlsym(h, "cft_cuda_fft_check");
        char err[1300] = "";
        CHECK(fft != NULL);
        CHECK_MSG(fft && fft(err, sizeof err) == 0, "%s", err);
    }
#ifdef CFT_CUDA_STUB
    if (access(CFT_CUDA_STUB, R_OK) != 0) /* built elsewhere: the stub is not here */
        printf("  (the build's stub %s is absent: the driver-symbol check is skipped)\n",
               CFT_CUDA_STUB);
    else
        TEST("every CUDA driver function the backend calls exists (the toolkit's stub libcuda)") {
            int (*drv)(const char *, char *, size_t);
            *(void **)&drv = dlsym(h, "cft_cuda_driver_check");
            char err[1300] = "";
            CHECK(drv != NULL);
            CHECK_MSG(drv && drv(CFT_CUDA_STUB, err, sizeof err) == 0, "%s", err);
        }
#endif
    TEST("NCCL opens from the toolkit with every function the communicators use") {
        int (*nccl)(char *, size_t);
        *(void **)&nccl = dlsym(h, "cft_cuda_nccl_check");
        char err[1300] = "";
        CHECK(nccl != NULL);
        CHECK_MSG(nccl && nccl(err, sizeof err) == 0, "%s", err);
    }
    TEST("cuSOLVER opens from the toolkit (and cuBLAS has trsmBatched); cholesky's kernels "
         "compile") {
        int (*solver)(char *, size_t);
        *(void **)&solver = dlsym(h, "cft_cuda_solver_check");
        char err[1300] = "";
        CHECK(solver != NULL);
        CHECK_MSG(solver && solver(err, sizeof err) == 0, "%s", err);
        int (*lu)(char *, size_t);
        *(void **)&lu = dlsym(h, "cft_cuda_lu_check");
        CHECK(lu != NULL);
        CHECK_MSG(lu && lu(err, sizeof err) == 0, "%s", err);
    }
    TEST("a kernel that does not compile: an error with NVRTC's log; a bad arch is refused") {
        size_t n = 0;
        int hit = 0;
        char err[1300] = "";
        const char *bad = "extern \"C\" __global__ void k(float *y) { y[0] = undefined_name; }\n";
        CHECK(compile && compile(bad, "sm_90", &n, &hit, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, "NVRTC could not compile") && strstr(err, "undefined_name"), "%s",
                  err);
        CHECK(compile && compile(kernel, "gfx90a", &n, &hit, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, "gfx90a") != NULL, "%s", err);
    }
    TEST("four threads compiling one new kernel at once all get it") {
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&t[i], NULL, racer, NULL);
        for (int i = 0; i < 4; i++) {
            void *r;
            pthread_join(t[i], &r);
            CHECK(r == NULL);
        }
    }
    /* leave nothing behind */
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
    TEST("the convolution's, outer products' and 2:4 kernels (prims/conv_device.c, "
         "dot_device.c, sparse24_device.c) compile for sm_80 and sm_90 (after the "
         "cache checks: it adds CUBINs)") {
        const char *arch[2] = {"sm_80", "sm_90"};
        for (int a = 0; a < 2 && compile; a++) {
            size_t n = 0;
            int hit = -1;
            char err[1300] = "";
            CHECK_MSG(compile(cft__conv_kernel_source(), arch[a], &n, &hit, err, sizeof err) == 0,
                      "%s: %s", arch[a], err);
            CHECK_MSG(compile(cft__dot_kernel_source(), arch[a], &n, &hit, err, sizeof err) == 0,
                      "outer products, %s: %s", arch[a], err);
            CHECK_MSG(compile(cft__sparse24_kernel_source(), arch[a], &n, &hit, err, sizeof err) ==
                          0,
                      "2:4 sparsity, %s: %s", arch[a], err);
        }
    }
    return check_summary();
}
