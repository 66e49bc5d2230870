/* dot_device.c: dot_general products with nothing to sum (every
 * contracted size 1, or none: outer products, a batch of them in
 * per-sample gradients) as one elementwise CUDA C kernel on a backend
 * that runs kernels. A GEMM library given K = 1 runs tiles built for long
 * sums and writes the output at a fraction of the device's bandwidth;
 * XLA turns such a dot into a multiply for that reason. Each thread writes
 * one element C[t, i, j] = A[t, i] * B[t, j], neighbouring threads
 * neighbouring j (coalesced stores): the very product the GEMM would
 * round, so results are the same bits. The layouts are cuda/gemm_map.h's
 * (the CUDA backend's cuBLAS mapping), which every other product keeps.
 * f32 and f64. */
#include "array/device.h"
#include "core/mem.h"
#include "cuda/gemm_map.h"
#include "prims/rules.h"

#define OUTER_KERNEL(T, t)                                                                         \
    "struct cft_outer_" #t " { const " #T " *a; const " #T " *b; " #T " *c;\n"                     \
    "    long long n, m, nc, sa, sb, sc, ai, bj, ldc; };\n"                                        \
    "extern \"C\" __global__ void cft_outer_" #t "(const struct cft_outer_" #t " a) {\n"           \
    "    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < a.n;\n"          \
    "         e += (long long)gridDim.x * blockDim.x) {\n"                                         \
    "        const long long j = e % a.nc, r = e / a.nc, i = r % a.m, t = r / a.m;\n"              \
    "        a.c[t * a.sc + i * a.ldc + j] = a.a[t * a.sa + i * a.ai] * a.b[t * a.sb + j * "       \
    "a.bj];\n"                                                                                     \
    "    }\n}\n"
static const char *outer_src = OUTER_KERNEL(float, f32) OUTER_KERNEL(double, f64);

typedef struct {
    const void *a, *b;
    void *c;
    long long n, m, nc, sa, sb, sc, ai, bj, ldc;
} outer_args;

bool cft__dot_dev_kernel(cft_array *const *in, int nin, const cft_params *p, cft_array *const *out,
                         cft_dev_kernel *k) {
    cft_dtype dt = out[0]->aval.dtype;
    cft_gemm_desc d;
    if (nin != 2 || (dt != CFT_F32 && dt != CFT_F64) || in[0]->aval.dtype != dt ||
        in[1]->aval.dtype != dt || in[0]->conj || in[1]->conj ||
        !cft_gemm_map(&in[0]->aval, &in[1]->aval, p->v[0], p->v[1], p->n[0], p->v[2], p->v[3],
                      p->n[2], &d) ||
        d.k != 1)
        return false;
    outer_args *a = CFT_NEW(outer_args);
    void **ptrs = CFT_NEWN(void *, 3);
    if (!a || !ptrs)
        return false;
    a->a = cft__ptr(in[0]), a->b = cft__ptr(in[1]), a->c = cft__ptr(out[0]);
    a->n = (long long)(d.batch * d.m * d.n), a->m = d.m, a->nc = d.n;
    a->sa = d.sa, a->sb = d.sb, a->sc = d.sc, a->ldc = d.ldc;
    a->ai = d.ta ? 1 : d.lda, a->bj = d.tb ? d.ldb : 1;
    ptrs[0] = (void *)a->a, ptrs[1] = (void *)a->b, ptrs[2] = a->c;
    *k = (cft_dev_kernel){
        outer_src, dt == CFT_F32 ? "cft_outer_f32" : "cft_outer_f64", a, sizeof *a, a->n, 3, ptrs};
    return true;
}

const char *cft__dot_kernel_source(void) {
    return outer_src;
}
