/* Internal to libcft_cuda.so: what its files share. */
#ifndef CFT_CUDA_PLUGIN_H
#define CFT_CUDA_PLUGIN_H

#include "array/device_plugin.h"

/* the core functions cft handed over at registration */
extern const cft_plugin_core *cft_cuda_core;

/* makes device dev's context current on this thread; 0, or -1 with the
 * error set (naming `what`) */
int cft_cuda_on(int dev, const char *what);
/* sets this thread's error message (the table's last_error) */
void cft_cuda_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* dot_general on cuBLAS (blas.c): 1 done, 0 when cuBLAS does not apply
 * (the caller runs it another way), -1 failed with the error set */
int cft_cuda_gemm(int dev, const cft_dev_op *op);

#endif
