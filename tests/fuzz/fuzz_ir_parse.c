/* fuzz_ir_parse.c: libFuzzer target for cft_ir_parse, the reader of the
 * IR's text form (exported programs carry it). Any bytes must give an IR or
 * an error naming a line and column; an IR that parses must print back to
 * a text that parses to the same text, and must evaluate (on zeros, when
 * its inputs are small and concrete) to outputs or an error, never a
 * crash: the shape rules, not the parser, guard the implementations. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    /* two constants the text may declare, in this order */
    cft_array *consts[2] = {cft_arange(0, 3, 1, CFT_F32), cft_scalar(2, CFT_F32)};
    cft_ir *ir = NULL;
    cft_status st = CFT_E_ARG;
    for (int nc = 0; nc <= 2 && st != CFT_OK; nc++)
        st = cft_ir_parse(text, nc, consts, &ir);
    free(text);
    if (st != CFT_OK) {
        if (ir || !strstr(cft_last_error_message(), "cft_ir_parse"))
            __builtin_trap();
        return 0;
    }
    const char *t1 = cft_ir_str(ir);
    int nc = cft_ir_consts(ir, NULL);
    cft_array *cv[64];
    if (nc > 64)
        return 0;
    cft_ir_consts(ir, cv);
    cft_ir *back = NULL;
    if (cft_ir_parse(t1, nc, cv, &back) != CFT_OK || strcmp(t1, cft_ir_str(back)) != 0)
        __builtin_trap();
    int nin = cft_ir_num_inputs(ir), nout = cft_ir_num_outputs(ir);
    if (nin > 8 || nout > 64 || strstr(t1, "while["))
        return 0; /* a loop that never ends is a valid program */
    for (const char *l = strstr(t1, "length="); l; l = strstr(l + 1, "length="))
        if (atoll(l + 7) > 1024)
            return 0;
    for (int e = 0; e < cft_ir_num_eqns(ir); e++) /* room for every value */
        for (int k = 0;; k++) {
            cft_aval a;
            if (cft_ir_eqn_out_aval(ir, e, k, &a) != CFT_OK)
                break;
            int64_t n = 1;
            for (int d = 0; d < a.ndim; d++)
                n = cft_dim_is_symbolic(a.shape[d]) || a.shape[d] > (1 << 20) ? 1 << 30
                                                                              : n * a.shape[d];
            if (n > (1 << 20))
                return 0;
        }
    cft_array *in[8], *out[64];
    for (int i = 0; i < nin; i++) {
        cft_aval a;
        if (cft_ir_input_aval(ir, i, &a) != CFT_OK)
            __builtin_trap();
        int64_t n = 1;
        for (int d = 0; d < a.ndim; d++) {
            if (cft_dim_is_symbolic(a.shape[d]) || a.shape[d] > 4096)
                return 0;
            n *= a.shape[d];
        }
        if (n > 65536)
            return 0;
        in[i] = cft_zeros(a.dtype, a.shape, a.ndim);
    }
    (void)cft_ir_eval(ir, in, out);
    return 0;
}
