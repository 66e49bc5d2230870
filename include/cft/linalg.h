/** @file
 * cft/linalg.h: linear algebra with torch.linalg's names, differentiable
 * and batchable.
 *
 * Matrices are the last two dims of an array; leading dims are batch dims
 * (broadcast between operands where two are taken). Inputs are f32 or f64
 * (f16/bf16 compute in f32). Every function works eagerly and under every
 * transform (jvp, grad, vmap, jit, hessian). Factorisations run LAPACK per
 * matrix. Bad input gives an error array naming the call, the shapes and,
 * for a numerical failure (a matrix that is not positive definite, a
 * singular one), the batch element. Derivatives follow JAX's rules; those of
 * eigh, svd and the ops built on them assume distinct eigen/singular values
 * (degenerate pairs get a zero coupling term instead of a division by 0).
 */
#ifndef CFT_LINALG_H
#define CFT_LINALG_H

/** @addtogroup numerics
 *  @{ */

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Lower Cholesky factor L of symmetric positive-definite A (A = L L^T).
 *  A is symmetrised first, (A + A^T)/2, so gradients are symmetric (as
 *  JAX). Not positive definite, or holding a NaN or an infinity: an error
 *  naming the batch element. */
cft_array *cft_linalg_cholesky(cft_array *A);
/** X with op(A) X = B (left) or X op(A) = B (!left), A triangular (upper or
 *  lower: only that triangle is read; unitriangular: its diagonal is taken
 *  as 1), op(A) = A^T if transpose. Batch dims broadcast. */
cft_array *cft_linalg_solve_triangular(cft_array *A, cft_array *B, bool upper, bool left,
                                       bool transpose, bool unitriangular);
/** X with A X = B (LU with partial pivoting). B is [..., n, k], or a vector
 *  [n] / [..., n] when it is 1-d or has A's shape without the last dim (as
 *  torch; the result alike). Batch dims broadcast.
 *  Singular A: an error naming the batch element. */
cft_array *cft_linalg_solve(cft_array *A, cft_array *B);
/** A^-1 (a solve against the identity). */
cft_array *cft_linalg_inv(cft_array *A);
/** sign and log|det| of A (sign 0, logabsdet -inf for a singular matrix).
 *  Derivative of logabsdet: tr(A^-1 dA). Either output may be NULL. */
cft_status cft_linalg_slogdet(cft_array *A, cft_array **sign, cft_array **logabsdet);
/** det(A) = sign * exp(logabsdet). */
cft_array *cft_linalg_det(cft_array *A);
/** Eigenvalues w [..., n] (ascending) and eigenvectors V [..., n, n]
 *  (columns) of symmetric A (symmetrised first). Either output may be NULL. */
cft_status cft_linalg_eigh(cft_array *A, cft_array **w, cft_array **V);
/** Eigenvalues of symmetric A, ascending. */
cft_array *cft_linalg_eigvalsh(cft_array *A);
/** Reduced QR: Q [..., m, k], R [..., k, n], k = min(m, n). The derivative
 *  needs m >= n. Either output may be NULL. */
cft_status cft_linalg_qr(cft_array *A, cft_array **Q, cft_array **R);
/** Reduced SVD A = U diag(S) Vh: U [..., m, k], S [..., k] (descending), Vh
 *  [..., k, n]. Any output may be NULL. */
cft_status cft_linalg_svd(cft_array *A, cft_array **U, cft_array **S, cft_array **Vh);

/** The same, returned by value, for use inside expressions
 * (e.g. cft_linalg_qr_of(A).r); fields are error arrays on failure. */
typedef struct cft_slogdet_result {
    cft_array *sign;      /**< the sign of the determinant */
    cft_array *logabsdet; /**< log |det| */
} cft_slogdet_result;
/** cft_linalg_eigh's outputs by value. */
typedef struct cft_eigh_result {
    cft_array *w; /**< eigenvalues, ascending */
    cft_array *v; /**< eigenvectors, as columns */
} cft_eigh_result;
/** cft_linalg_qr's outputs by value. */
typedef struct cft_qr_result {
    cft_array *q; /**< orthonormal columns */
    cft_array *r; /**< upper triangular */
} cft_qr_result;
/** cft_linalg_svd's outputs by value. */
typedef struct cft_svd_result {
    cft_array *u;  /**< left singular vectors */
    cft_array *s;  /**< singular values, descending */
    cft_array *vh; /**< right singular vectors, transposed */
} cft_svd_result;
/** cft_linalg_slogdet by value. */
cft_slogdet_result cft_linalg_slogdet_of(cft_array *A);
/** cft_linalg_eigh by value. */
cft_eigh_result cft_linalg_eigh_of(cft_array *A);
/** cft_linalg_qr by value. */
cft_qr_result cft_linalg_qr_of(cft_array *A);
/** cft_linalg_svd by value. */
cft_svd_result cft_linalg_svd_of(cft_array *A);
/** Singular values, descending. */
cft_array *cft_linalg_svdvals(cft_array *A);
/** Moore-Penrose pseudo-inverse via the SVD; singular values at or below
 *  rcond * max(S) are dropped (rcond <= 0: max(m, n) * eps). */
cft_array *cft_linalg_pinv(cft_array *A, double rcond);
/** Least-squares solution of A X = B (pinv(A) B; B a matrix or a vector). */
cft_array *cft_linalg_lstsq(cft_array *A, cft_array *B);
/** Vector norm over axes (NULL/0: all): ord 2 (and any p > 0: sum |x|^p ^
 *  1/p), INFINITY (max |x|), -INFINITY (min |x|), 0 (count of nonzeros). */
cft_array *cft_linalg_vector_norm(cft_array *x, double ord, const int *axes, int naxes,
                                  bool keepdims);
/** Matrix norms of the last two dims. */
typedef enum cft_matrix_norm_ord {
    CFT_NORM_FRO = 0, /**< Frobenius */
    CFT_NORM_NUC,     /**< nuclear: sum of singular values */
    CFT_NORM_2,       /**< largest singular value */
    CFT_NORM_NEG2,    /**< smallest singular value */
    CFT_NORM_1,       /**< max column sum of |A| */
    CFT_NORM_NEG1,    /**< min column sum of |A| */
    CFT_NORM_INF,     /**< max row sum of |A| */
    CFT_NORM_NEGINF,  /**< min row sum of |A| */
} cft_matrix_norm_ord;
/** Matrix norm of [..., m, n] (result [...], or [..., 1, 1] with keepdims). */
cft_array *cft_linalg_matrix_norm(cft_array *A, cft_matrix_norm_ord ord, bool keepdims);
/** A^n for an integer n by repeated squaring (n < 0: inv(A)^-n; n = 0: I). */
cft_array *cft_linalg_matrix_power(cft_array *A, int n);
/** Cross product of 3-vectors along `dim` (a and b broadcast). */
cft_array *cft_linalg_cross(cft_array *a, cft_array *b, int dim);
/** Matrix exponential: scaling and squaring with the [13/13] Pade
 *  approximant (Higham 2005), built from ops so every transform applies.
 *  The squarings are data dependent but traced as a fixed 24 masked steps,
 *  enough for norms up to 5.4 * 2^24. */
cft_array *cft_linalg_matrix_exp(cft_array *A);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
