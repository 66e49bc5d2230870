/* Internal: small f32 GEMMs on libxsmm (gemm_xsmm.c). */
#ifndef CFT_GEMM_XSMM_H
#define CFT_GEMM_XSMM_H

#include <stdbool.h>
#include <stdint.h>

/* Whether a whole m x n x k product (op(A) = A^T when ta) goes to
 * libxsmm: decided per product, not per block, so that cutting it among
 * threads never mixes libraries (and results stay those of one thread);
 * by size, and by the shapes where OpenBLAS measured faster. */
bool cft__sgemm_small_fits(bool ta, int64_t m, int64_t n, int64_t k);

/* Row-major C[m x n] (row stride ldc) = op(A) op(B), op a transpose when
 * ta / tb, with libxsmm's JIT kernels. False (nothing written) when
 * libxsmm is not built in, is turned off (CFT_XSMM=0), or has no kernel
 * for the shape; the caller then uses BLAS. */
bool cft__sgemm_small(bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                      const float *B, int ldb, float *C, int ldc);

/* The libxsmm kernel for row-major C[m x n] (row stride ldc) = op(A) B,
 * dispatched once for a batch of products of one shape and layout (a
 * dispatch costs about 120 ns, MAML's 10x40x40 product 195), or NULL (no
 * libxsmm, turned off, a shape it has no kernel for). */
void *cft__sgemm_small_kernel(bool ta, int m, int n, int k, int lda, int ldb, int ldc);
/* One product with a kernel from cft__sgemm_small_kernel. */
void cft__sgemm_small_run(void *kernel, const float *A, const float *B, float *C);

#endif
