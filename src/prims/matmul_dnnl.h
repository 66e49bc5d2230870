/* Internal: batched matrix products in bf16 / f16 (and f32) on oneDNN
 * (matmul_dnnl.c), for autocast's products. */
#ifndef CFT_MATMUL_DNNL_H
#define CFT_MATMUL_DNNL_H

#include <stdbool.h>
#include <stdint.h>

/* c[t] = a[t] b[t] for t < batch: row-major contiguous a [batch, M, K]
 * (ta: each matrix turned, a stored as [batch, K, M]), b [batch, K, N]
 * (tb: stored as [batch, N, K]) and c [batch, M, N], all of one dtype:
 * 0 f32, 1 bf16, 2 f16 (those two accumulate in f32 and round c on
 * store). False (nothing written) when oneDNN is not built in, is turned
 * off (CFT_DNNL_LOW=0), or has no kernel for the dtype on this CPU. */
bool cft__matmul_dnnl(int dtype, int64_t batch, int64_t M, int64_t N, int64_t K, const void *a,
                      bool ta, const void *b, bool tb, void *c);
/* products cft__matmul_dnnl ran with an operand turned (ta or tb), for
 * tests that check the layout is read as it lies */
extern _Atomic long cft__dnnl_turned_runs;

/* Whether oneDNN has products in this dtype (1 bf16, 2 f16) on this CPU:
 * AVX-512 (AVX512-BF16, AMX make them fast). Asked once per dtype; when
 * not, says once on stderr that such products and convolutions run in f32
 * (rounded to the dtype on store). False without oneDNN. */
bool cft__dnnl_low_ok(int dtype);

#endif
