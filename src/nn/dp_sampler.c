/* dp_sampler.c: Poisson sampling of DP-SGD batches (include/cft/privacy.h):
 * each of n examples kept independently with probability q, decided by one
 * f64 uniform draw per example from the caller's key, so the privacy
 * analysis of the sampled Gaussian mechanism holds for the batches used. */
#include <stdint.h>

#include "cft/cft.h"
#include "cft/privacy.h"
#include "core/error.h"
#include "core/mem.h"

cft_array *cft_dp_poisson_sample(cft_array *key, int64_t n, double q) {
    CFT_PROPAGATE("cft_dp_poisson_sample", key);
    if (n < 0 || n > INT32_MAX)
        return cft__fail(CFT_E_ARG, "cft_dp_poisson_sample: n = %lld is outside [0, 2^31 - 1]",
                         (long long)n);
    if (!(q >= 0 && q <= 1))
        return cft__fail(CFT_E_ARG, "cft_dp_poisson_sample: q = %g is outside [0, 1]", q);
    cft_array *u = cft_random_uniform(key, CFT_F64, (int64_t[]){n}, 1, 0, 1);
    if (cft_failed(u))
        return u;
    double *v = cft__new_data(sizeof(double) * (size_t)(n ? n : 1));
    int32_t *idx = cft__new_data(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!v || !idx)
        return cft__fail(CFT_E_NOMEM, "cft_dp_poisson_sample: out of memory for n = %lld",
                         (long long)n);
    if (cft_copy_to(u, CFT_F64, v) != CFT_OK)
        return cft__fail(cft_last_error(), "%s", cft_last_error_message());
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (v[i] < q)
            idx[m++] = (int32_t)i;
    return cft_from_i32(idx, (int64_t[]){m}, 1);
}
