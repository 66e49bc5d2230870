/* conv_device.c: conv_general_dilated as one CUDA C kernel, for backends
 * that run kernels (cft_backend.run_kernel: the CUDA backend, and the
 * test backend, which compiles the same source for the host). Before, a
 * convolution on a device went through the host: its operands copied out,
 * the host's convolution, the result copied back (the DP-SGD CNN made two
 * such round trips a step). The kernel is direct: each output element is
 * the sum over its group's input channels and the kernel's taps, the
 * input position of each tap found from the stride, padding and both
 * dilations as the host's tap tables do. Outputs and their sums are tiled
 * over blocks of 256 threads as the jit's reductions are (core/coop_fns.h):
 * a weight gradient's few outputs of tens of thousands of products each
 * get a block apiece. Sums in double, rounded once; f32 and f64 (other
 * dtypes keep the backend's way). The source is fixed per dtype, the
 * problem comes in the kernel's argument. */
#include "core/coop_fns.h"
#include "core/mem.h"
#include "prims/conv_geom.h"

/* the spatial dim d's (dilated) input index v<d> of output o<d> and tap
 * k<d>; a tap on padding or between dilated inputs is skipped */
#define TAP(d)                                                                                     \
    "        const long long v" #d " = o" #d " * a.s[" #d "] + k" #d " * a.rd[" #d "] - a.lo[" #d  \
    "];\n"                                                                                         \
    "        if (v" #d " < 0 || v" #d " % a.ld[" #d "] || v" #d " / a.ld[" #d "] >= a.in[" #d      \
    "]) continue;\n"

#define CONV_KERNEL(T, t)                                                                          \
    "struct cft_conv_" #t " { const " #T " *x; const " #T " *w; " #T " *y;\n"                      \
    "    long long n, C, O, Ig, G, B, Oq, Nq, R, in[3], k[3], out[3], s[3], lo[3], ld[3], rd[3]; " \
    "};\n"                                                                                         \
    "extern \"C\" __global__ void cft_conv_" #t "(const struct cft_conv_" #t " a) {\n"             \
    "    const long long ny = cft_coop_shares(a.R), nx = 256 / ny;\n"                              \
    "    const long long ntile = (a.n + nx - 1) / nx;\n"                                           \
    "#if CFT_CONV_SERIAL\n"                                                                        \
    "    double part[256];\n"                                                                      \
    "    if (blockIdx.x != 0 || threadIdx.x != 0) return;\n"                                       \
    "    for (long long tile = 0; tile < ntile; tile++) {\n"                                       \
    "        for (long long tx = 0; tx < 256; tx++) {\n"                                           \
    "#else\n"                                                                                      \
    "    __shared__ double part[256];\n"                                                           \
    "    for (long long tile = blockIdx.x; tile < ntile; tile += gridDim.x) {\n"                   \
    "        for (long long tx = threadIdx.x; tx < 256; tx += blockDim.x) {\n"                     \
    "#endif\n"                                                                                     \
    "        const long long i = tile * nx + tx % nx;\n"                                           \
    "        double acc = 0;\n"                                                                    \
    "        if (i < a.n) {\n"                                                                     \
    "        long long r = i;\n"                                                                   \
    "        const long long o2 = r % a.out[2]; r /= a.out[2];\n"                                  \
    "        const long long o1 = r % a.out[1]; r /= a.out[1];\n"                                  \
    "        const long long o0 = r % a.out[0]; r /= a.out[0];\n"                                  \
    "        const long long oc = r % a.O, n = r / a.O, q = oc / a.Oq;\n"                          \
    "        const long long ni = (a.B > 1 ? q * a.Nq : 0) + n, c0 = a.G > 1 ? q * a.Ig : 0;\n"    \
    "        for (long long j = tx / nx; j < a.R; j += ny) {\n"                                    \
    "        long long u = j;\n"                                                                   \
    "        const long long k2 = u % a.k[2]; u /= a.k[2];\n"                                      \
    "        const long long k1 = u % a.k[1]; u /= a.k[1];\n"                                      \
    "        const long long k0 = u % a.k[0], ci = u / a.k[0];\n" TAP(0) TAP(1)                    \
        TAP(2) "        const long long xi = (((ni * a.C + c0 + ci) * a.in[0] + v0 / a.ld[0]) * "  \
               "a.in[1] +\n"                                                                       \
               "                              v1 / a.ld[1]) * a.in[2] + v2 / a.ld[2];\n"           \
               "        acc += (double)a.x[xi] * (double)a.w[oc * a.R + j];\n"                     \
               "        }\n"                                                                       \
               "        }\n"                                                                       \
               "        part[tx] = acc;\n"                                                         \
               "        }\n"                                                                       \
               "        __syncthreads();\n"                                                        \
               "#if CFT_CONV_SERIAL\n"                                                             \
               "        for (long long lane = 0; lane < nx; lane++) {\n"                           \
               "#else\n"                                                                           \
               "        for (long long lane = threadIdx.x; lane < nx; lane += blockDim.x) {\n"     \
               "#endif\n"                                                                          \
               "        const long long i = tile * nx + lane;\n"                                   \
               "        if (i >= a.n) continue;\n"                                                 \
               "        double acc = part[lane];\n"                                                \
               "        for (long long y = 1; y < ny; y++) acc += part[y * nx + lane];\n"          \
               "        a.y[i] = (" #T ")acc;\n"                                                   \
               "        }\n"                                                                       \
               "        __syncthreads();\n"                                                        \
               "    }\n"                                                                           \
               "}\n"

#undef CFT_COOP_EMIT
#define CFT_COOP_EMIT(...) #__VA_ARGS__
static const char *conv_src = "/* generated by cft: conv_general_dilated, CUDA C */\n"
                              "#if defined(__CUDACC_RTC__) || defined(__CUDACC__)\n"
                              "typedef long long int64_t;\n"
                              "#define CFT_CONV_SERIAL 0\n"
                              "#else /* the host: a block's threads run one after another */\n"
                              "#include <stdint.h>\n"
                              "#define CFT_CONV_SERIAL 1\n"
                              "#define __syncthreads()\n"
                              "#endif\n"
#undef CFT_COOP_FNS_H
#include "core/coop_fns.h"
                              "\n" CONV_KERNEL(float, f32) CONV_KERNEL(double, f64);

/* the kernel's argument (the struct of CONV_KERNEL) */
typedef struct {
    const void *x, *w;
    void *y;
    long long n, C, O, Ig, G, B, Oq, Nq, R, in[3], k[3], out[3], s[3], lo[3], ld[3], rd[3];
} conv_args;

bool cft__conv_dev_kernel(cft_array *const *in, int nin, const cft_params *p, cft_array *const *out,
                          cft_dev_kernel *k) {
    cft_conv_geom g;
    cft_dtype dt = in[0]->aval.dtype;
    if (nin != 2 || (dt != CFT_F32 && dt != CFT_F64) ||
        cft__conv_geometry(&in[0]->aval, &in[1]->aval, p, &g))
        return false;
    conv_args *a = CFT_NEW(conv_args);
    void **ptrs = CFT_NEWN(void *, 3);
    if (!a || !ptrs)
        return false;
    a->x = cft__ptr(in[0]), a->w = cft__ptr(in[1]), a->y = cft__ptr(out[0]);
    a->n = (long long)cft__numel(out[0]->aval.shape, out[0]->aval.ndim);
    a->C = g.C, a->O = g.O, a->Ig = g.Ig, a->G = g.G, a->B = g.B, a->Oq = g.Oq, a->Nq = g.Nq;
    a->R = g.Ig * g.KK;
    for (int d = 0; d < 3; d++) {
        a->in[d] = g.in[d], a->k[d] = g.k[d], a->out[d] = g.out[d], a->s[d] = g.s[d];
        a->lo[d] = g.lo[d], a->ld[d] = g.ld[d], a->rd[d] = g.rd[d];
    }
    ptrs[0] = (void *)a->x, ptrs[1] = (void *)a->w, ptrs[2] = a->y;
    *k = (cft_dev_kernel){conv_src,
                          dt == CFT_F32 ? "cft_conv_f32" : "cft_conv_f64",
                          a,
                          sizeof *a,
                          cft_coop_threads(a->n, a->R),
                          3,
                          ptrs};
    return true;
}

const char *cft__conv_kernel_source(void) {
    return conv_src;
}
