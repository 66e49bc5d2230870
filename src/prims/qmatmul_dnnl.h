/* Internal: the integer product of the int8 primitives on oneDNN's matmul
 * primitive (qmatmul_dnnl.c), for qlinear.c's cft__qgemm. */
#ifndef CFT_QMATMUL_DNNL_H
#define CFT_QMATMUL_DNNL_H

#include <stdbool.h>
#include <stdint.h>

/* acc [M, N] = (xq - ao) [M, K] times wq^T in int32, wq [N, K] in rows ldw
 * bytes apart (ldw >= K), ao in [0, 255], on oneDNN's u8 x s8 -> s32
 * matmul (VNNI or AMX where the CPU has them): cft__qgemm's integers, with
 * the same saturation rule on a CPU without VNNI (the caller keeps xq
 * below 128 there). False (nothing written) without oneDNN, where it
 * declines or has only its reference kernel, or when out of memory. */
bool cft__qmatmul_dnnl(int64_t M, int64_t N, int64_t K, const uint8_t *xq, int32_t ao,
                       const int8_t *wq, int64_t ldw, int32_t *acc);

#endif
