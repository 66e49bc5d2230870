/* backend.c: the CUDA device backend, libcft_cuda.so. cft loads it with
 * dlopen on the first cft_device("cuda[:n]") and calls
 * cft_cuda_backend_register with the core functions it needs
 * (array/device_plugin.h), so the plugin links nothing of cft (a program
 * may link cft statically) and nothing of CUDA: the driver (libcuda.so.1)
 * is opened at run time, and its absence is the error "no CUDA driver",
 * never a crash or a link failure. Memory is the driver's (cuMemAlloc on
 * each device's primary context), copies are cuMemcpy*, dot_general runs
 * on cuBLAS (blas.c) where it maps to a strided batched GEMM, fft on cuFFT
 * (fft.c), cholesky on cuSOLVER (solver.c), triangular_solve and solve on
 * cuBLAS's batched trsm and getrf (blas.c), a jitted
 * function's fused groups, and eager elementwise operations and
 * reductions, run as NVRTC-compiled kernels (nvrtc.c, run_kernel), and the
 * other operations run on the host through cft_dev_op_run_on_host. Written against the driver API
 * of CUDA 13; not yet run on a GPU. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
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

/* the driver's functions the backend calls: slot in cft_cuda_driver, name */
#define DRV(f, n)                                                                                  \
    { offsetof(cft_cuda_driver, f), n }
static const struct {
    size_t off;
    const char *name;
} driver_syms[] = {
    DRV(init, "cuInit"),
    DRV(count, "cuDeviceGetCount"),
    DRV(get, "cuDeviceGet"),
    DRV(retain, "cuDevicePrimaryCtxRetain"),
    DRV(set, "cuCtxSetCurrent"),
    DRV(alloc, "cuMemAlloc_v2"),
    DRV(free, "cuMemFree_v2"),
    DRV(htod, "cuMemcpyHtoD_v2"),
    DRV(dtoh, "cuMemcpyDtoH_v2"),
    DRV(dtod, "cuMemcpyDtoD_v2"),
    DRV(sync, "cuCtxSynchronize"),
    DRV(name, "cuGetErrorName"),
    DRV(attr, "cuDeviceGetAttribute"),
    DRV(load_data, "cuModuleLoadData"),
    DRV(function, "cuModuleGetFunction"),
    DRV(launch, "cuLaunchKernel"),
    DRV(stream_create, "cuStreamCreate"),
    DRV(stream_sync, "cuStreamSynchronize"),
    DRV(htod_async, "cuMemcpyHtoDAsync_v2"),
    DRV(dtoh_async, "cuMemcpyDtoHAsync_v2"),
    DRV(dtod_async, "cuMemcpyDtoDAsync_v2"),
    DRV(begin_capture, "cuStreamBeginCapture_v2"),
    DRV(end_capture, "cuStreamEndCapture"),
    DRV(instantiate, "cuGraphInstantiateWithFlags"),
    DRV(graph_launch, "cuGraphLaunch"),
    DRV(exec_destroy, "cuGraphExecDestroy"),
    DRV(graph_destroy, "cuGraphDestroy"),
    DRV(stream_query, "cuStreamQuery"),
};
#undef DRV

/* every function of driver_syms from lib into *t: NULL, or the first missing */
static const char *resolve(void *lib, cft_cuda_driver *t) {
    for (size_t i = 0; i < sizeof driver_syms / sizeof *driver_syms; i++) {
        void *f = dlsym(lib, driver_syms[i].name);
        if (!f)
            return driver_syms[i].name;
        memcpy((char *)t + driver_syms[i].off, &f, sizeof f);
    }
    return NULL;
}

/* Markers of device time for the profiler (abi 5): CUDA events, whose
 * functions are optional in the driver's table (a driver without them
 * leaves the profiler waiting after each step instead) */
typedef struct {
    CUresult (*create)(CUevent *, unsigned);
    CUresult (*record)(CUevent, CUstream);
    CUresult (*wait)(CUevent);
    CUresult (*elapsed)(float *, CUevent, CUevent);
    CUresult (*destroy)(CUevent);
} event_fns;
static event_fns ev;

/* the event functions from lib into *e (all, or e->create NULL); NULL,
 * or the first missing */
static const char *resolve_events(void *lib, event_fns *e) {
    *(void **)&e->create = dlsym(lib, "cuEventCreate");
    *(void **)&e->record = dlsym(lib, "cuEventRecord");
    *(void **)&e->wait = dlsym(lib, "cuEventSynchronize");
    *(void **)&e->elapsed = dlsym(lib, "cuEventElapsedTime_v2");
    if (!e->elapsed)
        *(void **)&e->elapsed = dlsym(lib, "cuEventElapsedTime");
    *(void **)&e->destroy = dlsym(lib, "cuEventDestroy_v2");
    const char *missing = !e->create    ? "cuEventCreate"
                          : !e->record  ? "cuEventRecord"
                          : !e->wait    ? "cuEventSynchronize"
                          : !e->elapsed ? "cuEventElapsedTime"
                          : !e->destroy ? "cuEventDestroy_v2"
                                        : NULL;
    if (missing)
        e->create = NULL;
    return missing;
}

static void load(void) {
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) {
        snprintf(init_err, sizeof init_err, "no CUDA driver (libcuda.so.1: %s)", dlerror());
        return;
    }
    const char *missing = resolve(cu.lib, &cu);
    if (missing) {
        snprintf(init_err, sizeof init_err, "the CUDA driver lacks %s", missing);
        return;
    }
    resolve_events(cu.lib, &ev);
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
        if ((r = cu.get(&d, i)) != CUDA_SUCCESS || (r = cu.retain(&cu.ctx[i], d)) != CUDA_SUCCESS ||
            (r = cu.set(cu.ctx[i])) != CUDA_SUCCESS ||
            (r = cu.stream_create(&cu.stream[i], CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
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

int cft_cuda_lib_ready(pthread_once_t *once, void (*load)(void), const char *load_err, int dev,
                       const char *what) {
    pthread_once(once, load);
    if (load_err[0])
        return 0;
    return cft_cuda_on(dev, what) ? -1 : 1;
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

/* copies with the host are ordered on the device's stream and waited for
 * (the host's memory may go as soon as they return) */
static int to_device(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    return cft_cuda_on(dev, "cuMemcpyHtoDAsync") ||
                   check(
                       cu.htod_async((CUdeviceptr)(uintptr_t)dst, src, bytes, cft_cuda_stream(dev)),
                       "cuMemcpyHtoDAsync")
               ? -1
               : check(cu.stream_sync(cft_cuda_stream(dev)), "cuStreamSynchronize");
}

static int to_host(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    return cft_cuda_on(dev, "cuMemcpyDtoHAsync") ||
                   check(
                       cu.dtoh_async(dst, (CUdeviceptr)(uintptr_t)src, bytes, cft_cuda_stream(dev)),
                       "cuMemcpyDtoHAsync")
               ? -1
               : check(cu.stream_sync(cft_cuda_stream(dev)), "cuStreamSynchronize");
}

static int copy(void *ctx, int dev, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    return cft_cuda_on(dev, "cuMemcpyDtoDAsync")
               ? -1
               : check(cu.dtod_async((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                     bytes, cft_cuda_stream(dev)),
                       "cuMemcpyDtoDAsync");
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
    if (!done)
        done = cft_cuda_lu(dev, op);
    if (!done)
        done = cft_cuda_slogdet(dev, op);
    if (!done)
        done = cft_cuda_eigh(dev, op);
    if (!done)
        done = cft_cuda_qr(dev, op);
    if (!done)
        done = cft_cuda_svd(dev, op);
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

static void *mark(void *ctx, int dev) {
    (void)ctx;
    CUevent e = NULL;
    if (!ev.create || cft_cuda_on(dev, "cuEventRecord") || ev.create(&e, 0) != CUDA_SUCCESS)
        return NULL;
    if (ev.record(e, cft_cuda_stream(dev)) != CUDA_SUCCESS) {
        ev.destroy(e);
        return NULL;
    }
    return e;
}

static int elapsed(void *ctx, int dev, void *from, void *to, double *ms) {
    (void)ctx;
    float f = 0;
    if (cft_cuda_on(dev, "cuEventElapsedTime") ||
        check(ev.wait((CUevent)to), "cuEventSynchronize") ||
        check(ev.elapsed(&f, (CUevent)from, (CUevent)to), "cuEventElapsedTime"))
        return -1;
    *ms = f;
    return 0;
}

static void drop_mark(void *ctx, int dev, void *m) {
    (void)ctx;
    if (m && !cft_cuda_on(dev, "cuEventDestroy"))
        ev.destroy((CUevent)m);
}

static int synchronize(void *ctx, int dev) {
    (void)ctx;
    return cft_cuda_on(dev, "cuStreamSynchronize")
               ? -1
               : check(cu.stream_sync(cft_cuda_stream(dev)), "cuStreamSynchronize");
}

/* CUDA graphs: the capturing thread's work goes to a stream of its own
 * (other threads' work on the device stays out of the graph), captured in
 * relaxed mode (allocations may happen meanwhile); the graph is
 * instantiated once and launched on the device's stream */
static _Thread_local int capture_dev = -1;
static _Thread_local CUstream capture_stream;

CUstream cft_cuda_stream(int dev) {
    return dev == capture_dev ? capture_stream : cu.stream[dev];
}

static int begin_capture(void *ctx, int dev) {
    (void)ctx;
    if (capture_dev >= 0 || cft_cuda_on(dev, "cuStreamBeginCapture"))
        return -1;
    if (!capture_stream &&
        check(cu.stream_create(&capture_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
        return -1;
    if (check(cu.begin_capture(capture_stream, CU_STREAM_CAPTURE_MODE_RELAXED),
              "cuStreamBeginCapture"))
        return -1;
    capture_dev = dev;
    return 0;
}

static int end_capture(void *ctx, int dev, void **graph) {
    (void)ctx;
    CUgraph g = NULL;
    CUgraphExec x = NULL;
    *graph = NULL;
    bool mine = capture_dev == dev;
    capture_dev = -1;
    if (!mine || cft_cuda_on(dev, "cuStreamEndCapture") ||
        check(cu.end_capture(capture_stream, &g), "cuStreamEndCapture (the capture failed)"))
        return -1;
    int rc = check(cu.instantiate(&x, g, 0), "cuGraphInstantiateWithFlags");
    cu.graph_destroy(g);
    *graph = x;
    return rc;
}

static int launch_graph(void *ctx, int dev, void *graph) {
    (void)ctx;
    return cft_cuda_on(dev, "cuGraphLaunch")
               ? -1
               : check(cu.graph_launch((CUgraphExec)graph, cu.stream[dev]), "cuGraphLaunch");
}

static void release_graph(void *ctx, int dev, void *graph) {
    (void)ctx;
    if (!cft_cuda_on(dev, "cuGraphExecDestroy"))
        check(cu.exec_destroy((CUgraphExec)graph), "cuGraphExecDestroy");
}

static const char *last_error(void *ctx) {
    (void)ctx;
    return err[0] ? err : NULL;
}

/* for test_cuda_plugin: every driver function the backend calls resolves
 * in the library at path (the toolkit's stub libcuda.so: no GPU needed);
 * 0, or -1 and why */
__attribute__((visibility("default"))) int cft_cuda_driver_check(const char *path, char *e,
                                                                 size_t n) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(e, n, "%s: %s", path, dlerror());
        return -1;
    }
    cft_cuda_driver t;
    const char *missing = resolve(lib, &t);
    event_fns stub_ev;
    if (!missing) /* optional, but the stub has them */
        missing = resolve_events(lib, &stub_ev);
    if (missing)
        snprintf(e, n, "%s lacks %s", path, missing);
    dlclose(lib);
    return missing ? -1 : 0;
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
                     CFT_BACKEND_EAGER_KERNELS,
                     begin_capture,
                     end_capture,
                     launch_graph,
                     release_graph,
                     cft_cuda_comm_id,
                     cft_cuda_comm_init,
                     cft_cuda_comm_poll,
                     cft_cuda_comm_abort,
                     cft_cuda_collective,
                     mark,
                     elapsed,
                     drop_mark};
    return core->register_backend(&b) == CFT_OK ? 0 : -1;
}
