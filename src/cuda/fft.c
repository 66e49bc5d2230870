/* fft.c: the fft primitive on cuFFT in the CUDA backend. A transform of
 * contiguous operands (cuda/fft_map.h: the trailing axes transformed, the
 * leading ones a batch) is one cufftPlanMany plan, executed on the
 * device's memory and destroyed (a plan cache is the obvious next step
 * once a GPU can time it); a c2r transform, which cuFFT may let overwrite
 * its input, reads a device copy of it. The scale N^(-k/2) is a small
 * kernel of its own (NVRTC, nvrtc.c). cuFFT is opened at run time from
 * the toolkit the backend was built with, after the trust check. Written
 * against cuFFT 12 (CUDA 13); not yet run on a GPU (the mapping runs in
 * every fft of the per-primitive tests, through the test backend). */
#include <cufft.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "cuda/cuda_plugin.h"
#include "cuda/fft_map.h"

static struct {
    void *lib;
    cufftResult (*plan)(cufftHandle *, int, int *, int *, int, int, int *, int, int, cufftType,
                        int);
    cufftResult (*c2c)(cufftHandle, cufftComplex *, cufftComplex *, int);
    cufftResult (*r2c)(cufftHandle, cufftReal *, cufftComplex *);
    cufftResult (*c2r)(cufftHandle, cufftComplex *, cufftReal *);
    cufftResult (*z2z)(cufftHandle, cufftDoubleComplex *, cufftDoubleComplex *, int);
    cufftResult (*d2z)(cufftHandle, cufftDoubleReal *, cufftDoubleComplex *);
    cufftResult (*z2d)(cufftHandle, cufftDoubleComplex *, cufftDoubleReal *);
    cufftResult (*destroy)(cufftHandle);
    cufftResult (*set_stream)(cufftHandle, cudaStream_t);
} ff;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_err[1200];

static void load(void) {
    static const char *const sonames[] = {"libcufft.so.12", "libcufft.so.11", NULL};
#ifdef CFT_CUFFT_PATH
    const char *built = CFT_CUFFT_PATH; /* the build machine's, tried last */
#else
    const char *built = NULL;
#endif
    void **const slots[] = {(void **)&ff.plan, (void **)&ff.c2c,     (void **)&ff.r2c,
                            (void **)&ff.c2r,  (void **)&ff.z2z,     (void **)&ff.d2z,
                            (void **)&ff.z2d,  (void **)&ff.destroy, (void **)&ff.set_stream};
    static const char *const names[] = {"cufftPlanMany", "cufftExecC2C", "cufftExecR2C",
                                        "cufftExecC2R",  "cufftExecZ2Z", "cufftExecD2Z",
                                        "cufftExecZ2D",  "cufftDestroy", "cufftSetStream"};
    ff.lib = cft_cuda_find_lib(sonames, built, "cuFFT", slots, names,
                               (int)(sizeof names / sizeof *names), load_err, sizeof load_err);
}

/* y *= s over n reals, on the device */
static const char *scale_src =
    "struct cft_sf { float *x; long long n; float s; };\n"
    "struct cft_sd { double *x; long long n; double s; };\n"
    "extern \"C\" __global__ void cft_scale_f(const struct cft_sf a) {\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n;\n"
    "         i += (long long)gridDim.x * blockDim.x) a.x[i] *= a.s;\n}\n"
    "extern \"C\" __global__ void cft_scale_d(const struct cft_sd a) {\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n;\n"
    "         i += (long long)gridDim.x * blockDim.x) a.x[i] *= a.s;\n}\n";

static int scale(int dev, void *y, int64_t n, double s, bool dbl) {
    if (dbl) {
        struct {
            double *x;
            long long n;
            double s;
        } a = {y, (long long)n, s};
        return cft_cuda_launch(dev, scale_src, "cft_scale_d", &a, sizeof a, n);
    }
    struct {
        float *x;
        long long n;
        float s;
    } a = {y, (long long)n, (float)s};
    return cft_cuda_launch(dev, scale_src, "cft_scale_f", &a, sizeof a, n);
}

int cft_cuda_fft(int dev, const cft_dev_op *op) {
    cft_fft_desc d;
    if (!cft_fft_map_op(&cft_cuda_core->op, op, &d))
        return 0;
    pthread_once(&once, load);
    if (load_err[0])
        return 0; /* no cuFFT: the caller's way */
    if (cft_cuda_on(dev, "fft (cuFFT)"))
        return -1;
    cft_dev_buf x = cft_cuda_core->op.in(op, 0), y = cft_cuda_core->op.out(op, 0);
    static const cufftType types[2][4] = {{CUFFT_C2C, CUFFT_C2C, CUFFT_R2C, CUFFT_C2R},
                                          {CUFFT_Z2Z, CUFFT_Z2Z, CUFFT_D2Z, CUFFT_Z2D}};
    cufftHandle plan;
    cufftResult r = ff.plan(&plan, d.rank, d.n, NULL, 1, (int)d.idist, NULL, 1, (int)d.odist,
                            types[d.dbl][d.type], (int)d.batch);
    if (r == CUFFT_SUCCESS &&
        (r = ff.set_stream(plan, (cudaStream_t)cft_cuda_stream(dev))) != CUFFT_SUCCESS)
        ff.destroy(plan);
    if (r != CUFFT_SUCCESS) {
        cft_cuda_fail("fft on cuda:%d: cufftPlanMany (rank %d, batch %lld): cuFFT error %d", dev,
                      d.rank, (long long)d.batch, (int)r);
        return -1;
    }
    void *in = x.ptr;
    CUdeviceptr copy = 0;
    if (d.type == CFT_FFT_C2R) { /* cuFFT may overwrite a c2r input */
        if (cft_cu.alloc(&copy, x.bytes) != CUDA_SUCCESS ||
            cft_cu.dtod_async(copy, (CUdeviceptr)(uintptr_t)x.ptr, x.bytes, cft_cuda_stream(dev)) !=
                CUDA_SUCCESS) {
            ff.destroy(plan);
            if (copy)
                cft_cu.free(copy);
            cft_cuda_fail("fft on cuda:%d: no device copy of the c2r input (%zu bytes)", dev,
                          x.bytes);
            return -1;
        }
        in = (void *)(uintptr_t)copy;
    }
    int sign = d.type == CFT_FFT_C2C_FWD ? CUFFT_FORWARD : CUFFT_INVERSE;
    if (d.dbl)
        r = d.type == CFT_FFT_R2C   ? ff.d2z(plan, in, y.ptr)
            : d.type == CFT_FFT_C2R ? ff.z2d(plan, in, y.ptr)
                                    : ff.z2z(plan, in, y.ptr, sign);
    else
        r = d.type == CFT_FFT_R2C   ? ff.r2c(plan, in, y.ptr)
            : d.type == CFT_FFT_C2R ? ff.c2r(plan, in, y.ptr)
                                    : ff.c2c(plan, in, y.ptr, sign);
    if (copy) /* (the transform reads it: wait before it goes) */
        cft_cu.stream_sync(cft_cuda_stream(dev));
    ff.destroy(plan);
    if (copy)
        cft_cu.free(copy);
    if (r != CUFFT_SUCCESS) {
        cft_cuda_fail("fft on cuda:%d: executing the transform: cuFFT error %d", dev, (int)r);
        return -1;
    }
    int64_t reals = d.out_numel * (d.type == CFT_FFT_C2R ? 1 : 2);
    if (d.scale != 1.0 && scale(dev, y.ptr, reals, d.scale, d.dbl))
        return -1;
    return 1;
}

/* for test_cuda_plugin: 0 when cuFFT is loaded, else -1 and why; and the
 * scale kernel compiles for sm_90 */
__attribute__((visibility("default"))) int cft_cuda_fft_check(char *err, size_t en) {
    pthread_once(&once, load);
    return cft_cuda_lib_kernel_check(load_err, scale_src, err, en);
}
