/* Internal to libcft_cuda.so: what its files share. */
#ifndef CFT_CUDA_PLUGIN_H
#define CFT_CUDA_PLUGIN_H

#include <pthread.h>
#include <cuda.h>

#include "array/device_plugin.h"

enum { CFT_CUDA_MAX_DEV = 64 };

/* the driver's functions, opened at run time (backend.c) */
typedef struct {
    void *lib;
    CUresult (*init)(unsigned);
    CUresult (*count)(int *);
    CUresult (*get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*dtod)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*sync)(void);
    CUresult (*name)(CUresult, const char **);
    CUresult (*attr)(int *, CUdevice_attribute, CUdevice);
    CUresult (*load_data)(CUmodule *, const void *);
    CUresult (*function)(CUfunction *, CUmodule, const char *);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_sync)(CUstream);
    CUresult (*htod_async)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*begin_capture)(CUstream, CUstreamCaptureMode);
    CUresult (*end_capture)(CUstream, CUgraph *);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*graph_launch)(CUgraphExec, CUstream);
    CUresult (*exec_destroy)(CUgraphExec);
    CUresult (*graph_destroy)(CUgraph);
    CUresult (*stream_query)(CUstream);
    CUcontext ctx[CFT_CUDA_MAX_DEV];
    CUdevice dev[CFT_CUDA_MAX_DEV];
    /* each device's one stream: every kernel, library call and copy of the
     * backend is ordered on it (and a plan's graph is captured from it) */
    CUstream stream[CFT_CUDA_MAX_DEV];
    int ndev;
} cft_cuda_driver;
extern cft_cuda_driver cft_cu;
/* the driver's name of a result code */
const char *cft_cuda_error_name(CUresult r);

/* the core functions cft handed over at registration */
extern const cft_plugin_core *cft_cuda_core;

/* the stream this thread's work on device dev goes to: the device's own
 * stream, or, while this thread captures a graph for dev, a capture stream
 * of the thread's own (other threads' work is never captured) */
CUstream cft_cuda_stream(int dev);
/* makes device dev's context current on this thread; 0, or -1 with the
 * error set (naming `what`) */
int cft_cuda_on(int dev, const char *what);
/* a library's operation on dev: the library loaded once (pthread_once with
 * load, which sets load_err when it cannot), then 1 (go on), 0 (not loaded:
 * the caller's way) or -1 (dev's context failed, the error set) */
int cft_cuda_lib_ready(pthread_once_t *once, void (*load)(void), const char *load_err, int dev,
                       const char *what);
/* sets this thread's error message (the table's last_error) */
void cft_cuda_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A library of the toolkit (cuBLAS, cuFFT, NVRTC) opened from path after
 * the trust check, with its functions names[i] into *slots[i]; NULL with
 * err set ("<what> not loaded: ...", or the first function missing). */
void *cft_cuda_open_lib(const char *path, const char *what, void **const *slots,
                        const char *const *names, int count, char *err, size_t n);
/* A library of the toolkit found by one of its sonames (NULL-terminated
 * list, newest first) where this machine has it (locate.c: CFT_CUDA_LIBDIR,
 * LD_LIBRARY_PATH, CUDA_HOME, the loader's directories, /usr/local/cuda*,
 * NVIDIA's Python wheels, then `built`, the build machine's file, may be
 * NULL), opened as cft_cuda_open_lib does; NULL with err naming where it
 * looked. */
void *cft_cuda_find_lib(const char *const *sonames, const char *built, const char *what,
                        void **const *slots, const char *const *names, int count, char *err,
                        size_t n);
/* this thread's error message ("" when none) */
const char *cft_cuda_message(void);

/* dot_general on cuBLAS (blas.c): 1 done, 0 when cuBLAS does not apply
 * (the caller runs it another way), -1 failed with the error set */
int cft_cuda_gemm(int dev, const cft_dev_op *op);
/* fft on cuFFT (fft.c): the same convention */
int cft_cuda_fft(int dev, const cft_dev_op *op);
/* triangular_solve on cuBLAS's trsmBatched (blas.c): the same convention */
int cft_cuda_trsm(int dev, const cft_dev_op *op);
/* solve on cuBLAS's getrfBatched and trsmBatched (blas.c): the same convention */
int cft_cuda_lu(int dev, const cft_dev_op *op);
int cft_cuda_slogdet(int dev, const cft_dev_op *op);
/* cholesky on cuSOLVER's potrfBatched, eigh on its syevjBatched (solver.c):
 * the same convention */
int cft_cuda_cholesky(int dev, const cft_dev_op *op);
int cft_cuda_eigh(int dev, const cft_dev_op *op);
/* qr on cuSOLVER's geqrf and orgqr (solver.c): the same convention */
int cft_cuda_qr(int dev, const cft_dev_op *op);
/* svd on cuSOLVER's gesvd (solver.c): the same convention */
int cft_cuda_svd(int dev, const cft_dev_op *op);
/* the communicators on NCCL (nccl.c): cft_backend's comm_id, comm_init,
 * comm_poll, comm_abort and collective */
int cft_cuda_comm_id(void *ctx, void *id, size_t *size);
int cft_cuda_comm_init(void *ctx, int dev, const void *id, size_t size, int nranks, int rank,
                       void **comm);
int cft_cuda_comm_poll(void *ctx, int dev, void *comm);
void cft_cuda_comm_abort(void *ctx, int dev, void *comm);
int cft_cuda_collective(void *ctx, int dev, void *comm, int kind, const void *send, void *recv,
                        size_t count, cft_dtype dt, int op, int root);
/* device memory holding the pointers base + k * stride * elem, k < batch
 * (for the batched calls); 0 when out of memory */
CUdeviceptr cft_cuda_ptr_array(void *base, int64_t stride, size_t elem, int64_t batch);

/* CUDA C compiled by NVRTC for sm_<major><minor>, through cft's private
 * cache (nvrtc.c): the CUBIN (malloc'd) and its size; *hit says whether
 * it came from the cache. 0, or -1 with the error set. */
int cft_cuda_cubin(const char *src, int major, int minor, void **cubin, size_t *n, int *hit);
/* src compiled for arch ("sm_XY") through the cache (for test_cuda_plugin:
 * no GPU needed); whether it came from there; 0, or -1 with the message */
int cft_cuda_compile_check(const char *src, const char *arch, size_t *n, int *hit, char *err,
                           size_t en);
/* for test_cuda_plugin: load_err (a library's loading error, "" or NULL
 * when it loaded) as the error, else src compiled for sm_90 */
int cft_cuda_lib_kernel_check(const char *load_err, const char *src, char *err, size_t en);
/* launches kernel `entry` of src on device dev with its argument struct
 * (args, size bytes) as the parameter buffer, over nslot threads' work
 * (a grid-stride loop); 0, or -1 with the error set */
int cft_cuda_launch(int dev, const char *src, const char *entry, const void *args, size_t size,
                    int64_t nslot);

#endif
