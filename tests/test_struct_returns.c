/* test_struct_returns.c: the by-value forms of slogdet, eigh, qr, svd and
 * top_k equal the out-pointer forms (bit for bit), read inside
 * expressions, and carry errors in their fields. */
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_array *A = cft_random_normal(cft_random_key(1), CFT_F64, (int64_t[]){4, 4}, 2);
    cft_array *S = cft_add(cft_matmul(A, cft_transpose(A, NULL)), cft_eye(4, CFT_F64));
    TEST("by value equals the out-pointer forms") {
        cft_array *a, *b, *c;
        cft_linalg_qr(A, &a, &b);
        CHECK_ARRAY_CLOSE(cft_linalg_qr_of(A).q, a, 0, 0);
        CHECK_ARRAY_CLOSE(cft_linalg_qr_of(A).r, b, 0, 0);
        cft_linalg_eigh(S, &a, &b);
        CHECK_ARRAY_CLOSE(cft_linalg_eigh_of(S).w, a, 0, 0);
        cft_linalg_svd(A, &a, &b, &c);
        CHECK_ARRAY_CLOSE(cft_linalg_svd_of(A).s, b, 0, 0);
        cft_linalg_slogdet(S, &a, &b);
        CHECK_ARRAY_CLOSE(cft_linalg_slogdet_of(S).logabsdet, b, 0, 0);
        cft_top_k(cft_arange(0, 9, 1, CFT_F64), 3, &a, &b);
        CHECK_ARRAY_CLOSE(cft_top_k_of(cft_arange(0, 9, 1, CFT_F64), 3).values, a, 0, 0);
    }
    TEST("inside expressions, and errors in the fields") {
        /* Q R = A */
        cft_qr_result qr = cft_linalg_qr_of(A);
        CHECK_ARRAY_CLOSE(cft_matmul(qr.q, qr.r), A, 1e-12, 1e-12);
        cft_array *r = cft_sum(cft_linalg_svd_of(A).s, NULL, 0, false);
        CHECK(!cft_failed(r));
        cft_eigh_result bad = cft_linalg_eigh_of(cft_arange(0, 3, 1, CFT_F64));
        CHECK(cft_failed(bad.w) && cft_failed(bad.v));
    }
    return check_summary();
}
