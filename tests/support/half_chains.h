/* half_chains.h: what the half-precision jit tests (test_jit_bf16,
 * test_jit_f16) share: elementwise chains through a half dtype (passed
 * as env: a const cft_dtype *) and the plan's kernel groups, read from its
 * DOT (each equation in a kernel carries xlabel="group N"). */
#ifndef CFT_TEST_HALF_CHAINS_H
#define CFT_TEST_HALF_CHAINS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"

/* y = f32(half(x) * w + 1) * 2, w of the half dtype; and the half value */
static inline cft_status half_chain(void *env, int nin, cft_array *const *in, int nout,
                                    cft_array **out) {
    (void)nin, (void)nout;
    cft_array *h = cft_add_s(cft_mul(cft_astype(in[0], *(const cft_dtype *)env), in[1]), 1);
    out[0] = cft_mul_s(cft_astype(h, CFT_F32), 2);
    out[1] = h;
    return cft_failed(out[0]) ? cft_error_code(out[0]) : CFT_OK;
}

/* tanh(exp(w / 4)) in w's dtype */
static inline cft_status half_transc(void *env, int nin, cft_array *const *in, int nout,
                                     cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_tanh(cft_exp(cft_mul_s(in[1], 0.25)));
    return cft_failed(out[0]) ? cft_error_code(out[0]) : CFT_OK;
}

/* the DOT of the plan's last call, as text (free it) */
static inline char *half_plan_dot(cft_fn *j) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return NULL;
    cft_status s = cft_jit_to_dot(j, f);
    fclose(f);
    if (s != CFT_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* equations of the plan in kernel group 0, and in other groups */
static inline void half_plan_groups(cft_fn *j, int *in0, int *other) {
    char *dot = half_plan_dot(j);
    *in0 = *other = 0;
    for (const char *p = dot; p && (p = strstr(p, "xlabel=\"group ")); p++) {
        if (strncmp(p, "xlabel=\"group 0\"", 16) == 0)
            ++*in0;
        else
            ++*other;
    }
    free(dot);
}

#endif
