/* struct_returns.c: the functions of several outputs (slogdet, eigh, qr,
 * svd, top_k) returned by value, so they read inside expressions:
 * cft_matmul(cft_linalg_qr_of(A).q, B). The out-pointer forms do the work. */
#include "cft/linalg.h"
#include "prims/rules.h"

cft_slogdet_result cft_linalg_slogdet_of(cft_array *A) {
    cft_slogdet_result r;
    cft_linalg_slogdet(A, &r.sign, &r.logabsdet);
    return r;
}
cft_eigh_result cft_linalg_eigh_of(cft_array *A) {
    cft_eigh_result r;
    cft_linalg_eigh(A, &r.w, &r.v);
    return r;
}
cft_qr_result cft_linalg_qr_of(cft_array *A) {
    cft_qr_result r;
    cft_linalg_qr(A, &r.q, &r.r);
    return r;
}
cft_svd_result cft_linalg_svd_of(cft_array *A) {
    cft_svd_result r;
    cft_linalg_svd(A, &r.u, &r.s, &r.vh);
    return r;
}
cft_top_k_result cft_top_k_of(cft_array *x, int64_t k) {
    cft_top_k_result r;
    cft_top_k(x, k, &r.values, &r.indices);
    return r;
}
