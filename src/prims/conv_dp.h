/* Internal: conv_general_dilated's DP-SGD rules (conv_dp.c), the
 * batch_sqnorm / batch_wsum of trace/prim.h for per-example weight
 * gradients (examples as feature groups). */
#ifndef CFT_CONV_DP_H
#define CFT_CONV_DP_H

#include "trace/prim.h"

bool cft__conv_batch_sqnorm(const struct cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                            cft_array **out);
bool cft__conv_batch_wsum(const struct cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                          cft_array *w, cft_array **out);

#endif
