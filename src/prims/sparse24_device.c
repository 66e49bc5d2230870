/* sparse24_device.c: the 2:4 primitives' device kernels (sparse24.c's
 * dev_kernel), CUDA C for a backend that runs kernels (the CUDA backend
 * through NVRTC; the test backend compiles the same source for the host).
 * Before, dot_sparse24, sparse24_gather, sparse24_densify and
 * sparse24_meta on a device went through the host: operands copied out,
 * the host's kernel, the result copied back, at every product of a pruned
 * layer and of its gradient. The product's kernel skips the zeros as the
 * host's does: each thread computes one y[m, n] from the K/2 kept weights
 * of row n and the entries of x their metadata names, summing in double
 * in the order of the kept weights and rounding once (the host sums in
 * the dtype: results agree within its rounding). gather and densify move
 * values and are the host's bits (densify adds the two values of a group
 * whose positions coincide in the same order); meta, one thread per
 * metadata word, makes the host's choice with the host's comparisons
 * (magnitudes in double, ties to the lower index, NaNs where the host's
 * comparisons put them). cuSPARSELt's sparse tensor cores would be faster
 * for large products; it is not a dependency (not in Debian), and these
 * kernels are what runs without it. f32, f64, bf16 and f16 (autocast's
 * 2:4 products): a half is read into a float with the library's own
 * conversions (array/half_fns.h, in the source), the product summed in
 * double and rounded once (the host sums the widened values in f32: one
 * half ulp apart at most), gather's values moved as bits, densify's and
 * meta's the host's. Every kernel is a grid-stride loop over its outputs,
 * so any grid computes the same result. */
#include "array/array.h"
#include "core/mem.h"
#include "prims/rules.h"

/* group g's position j (0 or 1) in the metadata row mr */
/* clang-format off */
#define S24_POS                                                                                    \
    "#define CFT_S24_POS(mr, g, j) \\\n"                                                           \
    "    ((int)(((unsigned int)(mr)[(g) / 8] >> (4 * ((g) % 8) + 2 * (j))) & 3u))\n"

#define S24_LOOP(N)                                                                                \
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < " N ";\n"        \
    "         i += (long long)gridDim.x * blockDim.x) {\n"

/* the kernels of one dtype: T its storage, C the type it computes in, LD
 * and ST the conversions between them (halves: the library's own,
 * array/half_fns.h, in the source's prelude) */
#define S24_KERNELS(T, C, LD, ST, t)                                                               \
    "struct cft_s24dot_" #t " { const " #T " *x; const " #T " *v; const int *m; " #T " *y;\n"      \
    "    long long M, N, K, nw; };\n"                                                              \
    "extern \"C\" __global__ void cft_s24dot_" #t "(const struct cft_s24dot_" #t " a) {\n"         \
    S24_LOOP("a.M * a.N")                                                                          \
    "        const long long r = i / a.N, c = i % a.N, h = a.K / 2;\n"                             \
    "        const " #T " *xr = a.x + r * a.K, *vr = a.v + c * h;\n"                               \
    "        const int *mr = a.m + c * a.nw;\n"                                                    \
    "        double acc = 0;\n"                                                                    \
    "        for (long long g = 0; g < a.K / 4; g++) {\n"                                          \
    "            acc += (double)" #LD "(vr[2 * g]) * (double)" #LD "(xr[4 * g + CFT_S24_POS(mr, g, 0)]);\n" \
    "            acc += (double)" #LD "(vr[2 * g + 1]) * (double)" #LD "(xr[4 * g + CFT_S24_POS(mr, g, 1)]);\n" \
    "        }\n"                                                                                  \
    "        a.y[i] = " #ST "((" #C ")acc);\n"                                                     \
    "    }\n}\n"                                                                                   \
    "struct cft_s24gather_" #t " { const " #T " *w; const int *m; " #T " *v;\n"                    \
    "    long long R, K, nw; };\n"                                                                 \
    "extern \"C\" __global__ void cft_s24gather_" #t "(const struct cft_s24gather_" #t " a) {\n"   \
    S24_LOOP("a.R * (a.K / 2)")                                                                    \
    "        const long long h = a.K / 2, r = i / h, q = i % h, g = q / 2;\n"                      \
    "        a.v[i] = a.w[r * a.K + 4 * g + CFT_S24_POS(a.m + r * a.nw, g, (int)(q % 2))];\n"      \
    "    }\n}\n"                                                                                   \
    "struct cft_s24densify_" #t " { const " #T " *v; const int *m; " #T " *w;\n"                   \
    "    long long R, K, nw; };\n"                                                                 \
    "extern \"C\" __global__ void cft_s24densify_" #t "(const struct cft_s24densify_" #t " a) {\n" \
    S24_LOOP("a.R * (a.K / 4)")                                                                    \
    "        const long long G = a.K / 4, r = i / G, g = i % G;\n"                                 \
    "        const int *mr = a.m + r * a.nw;\n"                                                    \
    "        " #C " o[4] = {0, 0, 0, 0};\n"                                                        \
    "        o[CFT_S24_POS(mr, g, 0)] += " #LD "(a.v[r * (a.K / 2) + 2 * g]);\n"                   \
    "        o[CFT_S24_POS(mr, g, 1)] += " #LD "(a.v[r * (a.K / 2) + 2 * g + 1]);\n"               \
    "        for (int j = 0; j < 4; j++) a.w[r * a.K + 4 * g + j] = " #ST "(o[j]);\n"              \
    "    }\n}\n" \
    "struct cft_s24meta_" #t " { const " #T " *w; int *m; long long R, K, nw; };\n"             \
    "extern \"C\" __global__ void cft_s24meta_" #t "(const struct cft_s24meta_" #t " a) {\n"      \
    S24_LOOP("a.R * a.nw")                                                                         \
    "        const long long r = i / a.nw, wd = i % a.nw, G = a.K / 4;\n"                          \
    "        unsigned int word = 0;\n"                                                             \
    "        for (long long g = 8 * wd; g < 8 * wd + 8 && g < G; g++) {\n"                         \
    "            double q[4];\n"                                                                   \
    "            for (int c = 0; c < 4; c++) {\n"                                                  \
    "                const double v = (double)" #LD "(a.w[r * a.K + 4 * g + c]);\n"                \
    "                q[c] = v < 0 ? -v : v;\n"                                                     \
    "            }\n"                                                                              \
    "            int x = 0, y = 1;\n"                                                              \
    "            if (q[1] > q[0]) x = 1, y = 0;\n"                                                 \
    "            for (int c = 2; c < 4; c++) {\n"                                                  \
    "                if (q[c] > q[x]) y = x, x = c;\n"                                             \
    "                else if (q[c] > q[y]) y = c;\n"                                               \
    "            }\n"                                                                              \
    "            const int lo = x < y ? x : y, hi = x < y ? y : x;\n"                              \
    "            word |= (unsigned int)(lo | hi << 2) << (4 * (g % 8));\n"                         \
    "        }\n"                                                                                  \
    "        a.m[i] = (int)word;\n"                                                                \
    "    }\n}\n"

/* the halves' conversions: the bits of a float on either compiler, then
 * the library's functions (a shim of the test backend's host compiler
 * defines __device__; NVRTC compiles with -default-device) */
#define S24_HALF_PRELUDE                                                                           \
    "#if defined(__CUDACC_RTC__) || defined(__CUDACC__)\n"                                         \
    "typedef unsigned short uint16_t; typedef unsigned int uint32_t; typedef int int32_t;\n"       \
    "static inline float cft_u2f(uint32_t u) { return __uint_as_float(u); }\n"                     \
    "static inline uint32_t cft_f2u(float f) { return __float_as_uint(f); }\n"                     \
    "#else\n#include <stdint.h>\n"                                                                 \
    "static inline float cft_u2f(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }\n"\
    "static inline uint32_t cft_f2u(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }\n"\
    "#endif\n"                                                                                     \
    "#define CFT_S24_ID(x) (x)\n"

static const char *s24_src = "/* generated by cft: 2:4 sparsity, CUDA C */\n" S24_HALF_PRELUDE
#define CFT_HALF_EMIT(...) #__VA_ARGS__
#include "array/half_fns.h"
    "\n" S24_POS
    S24_KERNELS(float, float, CFT_S24_ID, CFT_S24_ID, f32)
    S24_KERNELS(double, double, CFT_S24_ID, CFT_S24_ID, f64)
    S24_KERNELS(uint16_t, float, cft_bf2f, cft_f2bf, bf16)
    S24_KERNELS(uint16_t, float, cft_h2f, cft_f2h, f16);
/* clang-format on */

/* the kernels' arguments, as their structs */
typedef struct {
    const void *x, *v;
    const int32_t *m;
    void *y;
    long long M, N, K, nw;
} dot_args;
typedef struct {
    const void *src;
    const int32_t *m;
    void *dst;
    long long R, K, nw;
} move_args; /* gather (src w, dst v) and densify (src v, dst w) */

/* the entry points' names (static: a backend may keep them) */
enum { DOT, GATHER, DENSIFY, META };
static const char *const entries[4][4] = {
    {"cft_s24dot_f32", "cft_s24dot_f64", "cft_s24dot_bf16", "cft_s24dot_f16"},
    {"cft_s24gather_f32", "cft_s24gather_f64", "cft_s24gather_bf16", "cft_s24gather_f16"},
    {"cft_s24densify_f32", "cft_s24densify_f64", "cft_s24densify_bf16", "cft_s24densify_f16"},
    {"cft_s24meta_f32", "cft_s24meta_f64", "cft_s24meta_bf16", "cft_s24meta_f16"}};
/* the dtypes with kernels */
static bool s24_dtype(cft_dtype dt) {
    return dt == CFT_F32 || dt == CFT_F64 || dt == CFT_BF16 || dt == CFT_F16;
}
static const char *entry_of(int kind, cft_dtype dt) {
    return entries[kind][dt == CFT_F64 ? 1 : dt == CFT_BF16 ? 2 : dt == CFT_F16 ? 3 : 0];
}

bool cft__s24dot_dev_kernel(cft_array *const *in, int nin, const cft_params *p,
                            cft_array *const *out, cft_dev_kernel *k) {
    (void)p;
    const cft_aval *x = &in[0]->aval, *v = &in[1]->aval;
    cft_dtype dt = x->dtype;
    if (nin != 3 || x->ndim != 2 || v->dtype != dt || !s24_dtype(dt))
        return false;
    dot_args *a = CFT_NEW(dot_args);
    void **ptrs = CFT_NEWN(void *, 4);
    const char *entry = entry_of(DOT, dt);
    if (!a || !ptrs)
        return false;
    long long K = x->shape[1];
    *a = (dot_args){cft__ptr(in[0]),
                    cft__ptr(in[1]),
                    cft__ptr(in[2]),
                    cft__ptr(out[0]),
                    x->shape[0],
                    v->shape[0],
                    K,
                    cft__s24_meta_words(K)};
    ptrs[0] = (void *)a->x, ptrs[1] = (void *)a->v, ptrs[2] = (void *)a->m, ptrs[3] = a->y;
    *k = (cft_dev_kernel){s24_src, entry, a, sizeof *a, (int64_t)(a->M * a->N), 4, ptrs};
    return true;
}

/* gather (dense src [..., K] -> kept values dst [..., K/2]) or densify
 * (the reverse): in[0] src, in[1] the metadata; K the dense rows' length */
static bool move_kernel(int kind, cft_array *const *in, int nin, cft_array *const *out, long long K,
                        long long nslot, cft_dev_kernel *k) {
    cft_dtype dt = out[0]->aval.dtype;
    if (nin != 2 || in[0]->aval.dtype != dt || !s24_dtype(dt))
        return false;
    move_args *a = CFT_NEW(move_args);
    void **ptrs = CFT_NEWN(void *, 3);
    const char *entry = entry_of(kind, dt);
    if (!a || !ptrs)
        return false;
    long long R = (long long)cft__numel(out[0]->aval.shape, out[0]->aval.ndim - 1);
    *a = (move_args){cft__ptr(in[0]),       cft__ptr(in[1]), cft__ptr(out[0]), R, K,
                     cft__s24_meta_words(K)};
    ptrs[0] = (void *)a->src, ptrs[1] = (void *)a->m, ptrs[2] = a->dst;
    *k = (cft_dev_kernel){s24_src, entry, a, sizeof *a, (int64_t)(R * nslot), 3, ptrs};
    return true;
}

bool cft__s24gather_dev_kernel(cft_array *const *in, int nin, const cft_params *p,
                               cft_array *const *out, cft_dev_kernel *k) {
    (void)p;
    const cft_aval *w = &in[0]->aval;
    long long K = w->shape[w->ndim - 1];
    return move_kernel(GATHER, in, nin, out, K, K / 2, k);
}

bool cft__s24densify_dev_kernel(cft_array *const *in, int nin, const cft_params *p,
                                cft_array *const *out, cft_dev_kernel *k) {
    (void)p;
    const cft_aval *w = &out[0]->aval;
    long long K = w->shape[w->ndim - 1];
    return move_kernel(DENSIFY, in, nin, out, K, K / 4, k);
}

typedef struct {
    const void *w;
    int32_t *m;
    long long R, K, nw;
} meta_args;

bool cft__s24meta_dev_kernel(cft_array *const *in, int nin, const cft_params *p,
                             cft_array *const *out, cft_dev_kernel *k) {
    (void)p;
    const cft_aval *w = &in[0]->aval;
    cft_dtype dt = w->dtype;
    if (nin != 1 || !s24_dtype(dt))
        return false;
    meta_args *a = CFT_NEW(meta_args);
    void **ptrs = CFT_NEWN(void *, 2);
    if (!a || !ptrs)
        return false;
    long long K = w->shape[w->ndim - 1];
    *a = (meta_args){cft__ptr(in[0]), cft__ptr(out[0]),
                     (long long)cft__numel(w->shape, w->ndim - 1), K, cft__s24_meta_words(K)};
    ptrs[0] = (void *)a->w, ptrs[1] = a->m;
    *k = (cft_dev_kernel){s24_src, entry_of(META, dt), a, sizeof *a, (int64_t)(a->R * a->nw), 2,
                          ptrs};
    return true;
}

const char *cft__sparse24_kernel_source(void) {
    return s24_src;
}
