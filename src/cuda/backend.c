/* backend.c: the CUDA device backend, libcft_cuda.so. cft loads it with
 * dlopen on the first cft_device("cuda[:n]") and calls
 * cft_cuda_backend_register with the core functions it needs
 * (array/device_plugin.h), so the plugin links nothing of cft (a program
 * may link cft statically) and nothing of CUDA: the driver (libcuda.so.1)
 * is opened at run time, and its absence is the error "no CUDA driver",
 * never a crash or a link failure. Memory is the driver's (cuMemAlloc on
 * each device's primary context), copies are cuMemcpy*, dot_general runs
 * on cuBLAS (blas.c) where it maps to a strided batched GEMM, fft on cuFFT
 * (fft.c), cholesky on cuSOLVER (solver.c) and triangular_solve on cuBLAS's
 * batched trsm (blas.c), a jitted
 * function's fused groups, and eager elementwise operations and
 * reductions, run as NVRTC-compiled kernels (nvrtc.c, run_kernel), and the
 * other operations run on the host through cft_dev_op_run_on_host. Written against the driver API
 * of CUDA 13; not yet run on a GPU. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <stdarg.h>

#include "cuda/cuda_plugin.h"

cft_cuda_driver cft_cu;
#define cu cft_cu

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char init_err[512];
static _Thread_local char err[512];
const cft_plugin_core *cft_cuda_core;

void *cft_cuda_open_lib(const char *path, const char *what, void **const *slots,
                        const char *const *names, int count, char *err, size_t n) {
    char why[1100];
    if (!cft_cuda_core->trusted(path, why, sizeof why)) {
        snprintf(err, n, "%s not loaded: %s", what, why);
        return NULL;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, n, "%s not loaded: %s", what, dlerror());
        return NULL;
    }
    for (int i = 0; i < count; i++)
        if (!(*slots[i] = dlsym(lib, names[i]))) {
            snprintf(err, n, "%s lacks %s", path, names[i]);
            return NULL;
        }
    return lib;
}

const char *cft_cuda_message(void) {
    return err;
}

void cft_cuda_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, sizeof err, fmt, ap);
    va_end(ap);
}

const char *cft_cuda_error_name(CUresult r) {
    const char *s = NULL;
    if (cu.name)
        cu.name(r, &s);
    return s ? s : "an unknown CUDA error";
}

static void load(void) {
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) {
        snprintf(init_err, sizeof init_err, "no CUDA driver (libcuda.so.1: %s)", dlerror());
        return;
    }
#define SYM(f, n)                                                                                  \
    if (!(*(void **)&cu.f = dlsym(cu.lib, n))) {                                                   \
        snprintf(init_err, sizeof init_err, "the CUDA driver lacks %s", n);                        \
        return;                                                                                    \
    }
    SYM(init, "cuInit") SYM(count, "cuDeviceGetCount") SYM(get, "cuDeviceGet");
    SYM(retain, "cuDevicePrimaryCtxRetain") SYM(set, "cuCtxSetCurrent");
    SYM(alloc, "cuMemAlloc_v2") SYM(free, "cuMemFree_v2") SYM(htod, "cuMemcpyHtoD_v2");
    SYM(dtoh, "cuMemcpyDtoH_v2") SYM(dtod, "cuMemcpyDtoD_v2") SYM(sync, "cuCtxSynchronize");
    SYM(name, "cuGetErrorName") SYM(attr, "cuDeviceGetAttribute");
    SYM(load_data, "cuModuleLoadData") SYM(function, "cuModuleGetFunction");
    SYM(launch, "cuLaunchKernel");
#undef SYM
    CUresult r = cu.init(0);
    if (r != CUDA_SUCCESS) {
        snprintf(init_err, sizeof init_err, "no usable CUDA device (cuInit: %s)",
                 cft_cuda_error_name(r));
        return;
    }
    if ((r = cu.count(&cu.ndev)) != CUDA_SUCCESS) {
        snprintf(init_err, sizeof init_err, "cuDeviceGetCount: %s", cft_cuda_error_name(r));
        return;
    }
    if (cu.ndev > CFT_CUDA_MAX_DEV)
        cu.ndev = CFT_CUDA_MAX_DEV;
    for (int i = 0; i < cu.ndev; i++) {
        CUdevice d;
        if ((r = cu.get(&d, i)) != CUDA_SUCCESS || (r = cu.retain(&cu.ctx[i], d)) != CUDA_SUCCESS) {
            snprintf(init_err, sizeof init_err, "device %d: %s", i, cft_cuda_error_name(r));
            return;
        }
        cu.dev[i] = d;
    }
}

int cft_cuda_on(int dev, const char *what) {
    CUresult r = cu.set(cu.ctx[dev]);
    if (r != CUDA_SUCCESS) {
        snprintf(err, sizeof err, "%s: cuCtxSetCurrent: %s", what, cft_cuda_error_name(r));
        return -1;
    }
    return 0;
}

static int check(CUresult r, const char *what) {
    if (r == CUDA_SUCCESS)
        return 0;
    snprintf(err, sizeof err, "%s: %s", what, cft_cuda_error_name(r));
    return -1;
}

static int device_count(void *ctx) {
    (void)ctx;
    pthread_once(&once, load);
    if (init_err[0]) {
        snprintf(err, sizeof err, "%s", init_err);
        return -1;
    }
    return cu.ndev;
}

static void *alloc(void *ctx, int dev, size_t bytes) {
    (void)ctx;
    CUdeviceptr p = 0;
    if (cft_cuda_on(dev, "cuMemAlloc") || check(cu.alloc(&p, bytes), "cuMemAlloc"))
        return NULL;
    return (void *)(uintptr_t)p;
}

static void release(void *ctx, int dev, void *ptr) {
    (void)ctx;
    if (!cft_cuda_on(dev, "cuMemFree"))
        check(cu.free((CUdeviceptr)(uintptr_t)ptr), "cuMemFree");
}

static int to_device(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    return cft_cuda_on(dev, "cuMemcpyHtoD")
               ? -1
               : check(cu.htod((CUdeviceptr)(uintptr_t)dst, src, bytes), "cuMemcpyHtoD");
}

static int to_host(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    return cft_cuda_on(dev, "cuMemcpyDtoH")
               ? -1
               : check(cu.dtoh(dst, (CUdeviceptr)(uintptr_t)src, bytes), "cuMemcpyDtoH");
}

static int copy(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    return cft_cuda_on(dev, "cuMemcpyDtoD")
               ? -1
               : check(cu.dtod((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes),
                       "cuMemcpyDtoD");
}

static int run(void *ctx, int dev, const cft_dev_op *op) {
    (void)ctx;
    int done = cft_cuda_gemm(dev, op);
    if (!done)
        done = cft_cuda_fft(dev, op);
    if (!done)
        done = cft_cuda_cholesky(dev, op);
    if (!done)
        done = cft_cuda_trsm(dev, op);
    if (done)
        return done > 0 ? 0 : -1;
    if (cft_cuda_core->run_on_host(op) != CFT_OK) {
        snprintf(err, sizeof err, "%s", cft_cuda_core->last_error_message());
        return -1;
    }
    return 0;
}

static int run_kernel(void *ctx, int dev, const cft_dev_kernel *k) {
    (void)ctx;
    return cft_cuda_launch(dev, k->source, k->entry, k->args, k->args_size, k->nslot);
}

static int synchronize(void *ctx, int dev) {
    (void)ctx;
    return cft_cuda_on(dev, "cuCtxSynchronize") ? -1 : check(cu.sync(), "cuCtxSynchronize");
}

static const char *last_error(void *ctx) {
    (void)ctx;
    return err[0] ? err : NULL;
}

/* called by cft (array/device.c) once, with the core functions the
 * backend uses (array/device_plugin.h) */
__attribute__((visibility("default"))) int cft_cuda_backend_register(const cft_plugin_core *core) {
    cft_cuda_core = core;
    cft_backend b = {CFT_BACKEND_ABI,
                     "cuda",
                     NULL,
                     device_count,
                     alloc,
                     release,
                     to_device,
                     to_host,
                     copy,
                     run,
                     synchronize,
                     last_error,
                     run_kernel,
                     CFT_BACKEND_EAGER_KERNELS};
    return core->register_backend(&b) == CFT_OK ? 0 : -1;
}
