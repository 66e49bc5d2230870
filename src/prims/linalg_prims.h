/* Internal: the linear-algebra primitives of linalg.c and the helpers that
 * linalg_ops.c (the public torch.linalg-style composites) shares with them.
 * Every primitive takes matrices with leading batch dims, equal across its
 * operands. */
#ifndef CFT_LINALG_PRIMS_H
#define CFT_LINALG_PRIMS_H

#include "prims/rules.h"

extern const cft_prim cft_p_cholesky, cft_p_triangular_solve, cft_p_solve, cft_p_slogdet,
    cft_p_eigh, cft_p_qr, cft_p_svd;

/* binders (strict: same batch dims, same float dtype) */
cft_array *cft__cholesky(cft_array *a);
cft_array *cft__triangular_solve(cft_array *a, cft_array *b, bool left, bool lower, bool trans,
                                 bool unit);
cft_array *cft__solve(cft_array *a, cft_array *b, bool trans);
/* writes sign and logabsdet; returns NULL or the error */
cft_array *cft__slogdet(cft_array *a, cft_array **sign, cft_array **logabsdet);
cft_array *cft__eigh(cft_array *a, cft_array **w, cft_array **v);
cft_array *cft__qr(cft_array *a, cft_array **q, cft_array **r);
cft_array *cft__svd(cft_array *a, cft_array **u, cft_array **s, cft_array **vh);

/* ops helpers on [..., m, n] (traced like user code) */
cft_array *cft__tril(cft_array *x, int k); /* zero above diagonal k (triu: cft__triu) */
cft_array *cft__triu(cft_array *x, int k);
cft_array *cft__diagonal(cft_array *x);   /* [..., n, n] -> [..., n] */
cft_array *cft__diag_embed(cft_array *v); /* [..., n] -> [..., n, n] */
cft_array *cft__eye_like(cft_array *x);   /* identity of x's last dim, x's dtype */

#endif
