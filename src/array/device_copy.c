/* device_copy.c: a strided view of device memory copied into a contiguous
 * buffer as one kernel of the backend (CUDA C, compiled as the jit's
 * kernels are, and run on the host by the test backend): element i of the
 * copy reads the view's element at the offset of i's index, moved as raw
 * bytes of the element's size. Strides may be negative (rev's flipped
 * dims). The jit's contiguous copies of device views (lower/jit_device.c)
 * and rev on a device (prims/conv.c) use it. */
#include "array/device.h"
#include "core/mem.h"

#define COPY_KERNEL(T, t)                                                                          \
    "struct cft_copy_" #t " { " #T " *y; const " #T " *x; long long n, nd, dims[8], st[8]; };\n"   \
    "extern \"C\" __global__ void cft_copy_" #t "(const struct cft_copy_" #t " a) {\n"             \
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n;\n"          \
    "         i += (long long)gridDim.x * blockDim.x) {\n"                                         \
    "        long long r = i, off = 0;\n"                                                          \
    "        for (long long d = a.nd - 1; d >= 0; d--) {\n"                                        \
    "            off += r % a.dims[d] * a.st[d];\n            r /= a.dims[d];\n        }\n"        \
    "        a.y[i] = a.x[off];\n    }\n}\n"
static const char *copy_src =
    "struct cft_b16 { unsigned long long lo, hi; };\n" COPY_KERNEL(unsigned char, 1)
        COPY_KERNEL(unsigned short, 2) COPY_KERNEL(unsigned int, 4)
            COPY_KERNEL(unsigned long long, 8) COPY_KERNEL(struct cft_b16, 16);
_Static_assert(CFT_MAX_NDIM == 8, "the copy kernel's struct holds 8 dims");

typedef struct {
    void *y;
    const void *x;
    long long n, nd, dims[8], st[8];
} copy_args;

bool cft__dev_copy_kernel(void *y, const void *x, size_t es, const int64_t *dims, const int64_t *st,
                          int nd, cft_dev_kernel *k) {
    if ((es != 1 && es != 2 && es != 4 && es != 8 && es != 16) || nd > CFT_MAX_NDIM)
        return false;
    copy_args *a = CFT_NEW(copy_args);
    void **ptrs = CFT_NEWN(void *, 2);
    if (!a || !ptrs)
        return false;
    a->y = y, a->x = x, a->n = (long long)cft__numel(dims, nd), a->nd = nd;
    for (int i = 0; i < nd; i++)
        a->dims[i] = dims[i], a->st[i] = st[i];
    ptrs[0] = y, ptrs[1] = (void *)x;
    static const char *const entry[17] = {[1] = "cft_copy_1",
                                          [2] = "cft_copy_2",
                                          [4] = "cft_copy_4",
                                          [8] = "cft_copy_8",
                                          [16] = "cft_copy_16"};
    *k = (cft_dev_kernel){copy_src, entry[es], a, sizeof *a, a->n, 2, ptrs};
    return true;
}
