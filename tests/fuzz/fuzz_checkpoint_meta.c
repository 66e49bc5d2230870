/* fuzz_checkpoint_meta.c: libFuzzer target for the sharded checkpoint's
 * metadata.json parser (src/nn/checkpoint_meta.c). Any bytes must either
 * parse or give an error; parsed metadata must satisfy what the loader
 * relies on (plain file names, pieces tiling each array's rows), and must
 * format back to text that parses to the same arrays. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"
#include "nn/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ckpt_meta m;
    cft_array *e = cft__ckpt_parse((const char *)data, size, &m);
    if (e)
        return cft_failed(e) ? 0 : (__builtin_trap(), 0);
    for (int i = 0; i < m.n; i++) {
        const ckpt_tensor *t = &m.t[i];
        int64_t at = 0;
        for (int k = 0; k < t->npieces; k++) {
            if (!cft__ckpt_file_ok(t->pieces[k].file) || t->pieces[k].begin != at)
                __builtin_trap();
            at = t->pieces[k].end;
        }
        if (at != cft__ckpt_rows(t))
            __builtin_trap();
    }
    char *text = cft__ckpt_format(&m);
    ckpt_meta back;
    if (!text || cft__ckpt_parse(text, strlen(text), &back) || back.n != m.n)
        __builtin_trap();
    free(text);
    return 0;
}
