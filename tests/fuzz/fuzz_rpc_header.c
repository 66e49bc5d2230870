/* fuzz_rpc_header.c: libFuzzer target for the RPC header decoder
 * (src/dist/rpc/wire.c), the parser of the bytes other workers send. Any
 * input must either decode or give an error, never read past its end; a
 * header that decodes must encode back to the same bytes (followed by
 * exactly its arrays' bytes when they travel inline). The same bytes
 * also go to the parser of call targets (transform specs). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"
#include "dist/rpc/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a copy of exactly `size` bytes, so ASan sees any read past the end */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    rpc_header h;
    cft_array *e = cft__rpc_decode(buf, size, &h);
    if (e) {
        if (!cft_failed(e) || !cft_error_message(e))
            __builtin_trap();
    } else {
        size_t n = cft__rpc_header_size(&h);
        size_t data = h.inline_data ? cft__rpc_data_bytes(&h) : 0;
        uint8_t *back = malloc(n ? n : 1);
        if (!back || cft__rpc_encode(&h, back, n) != n || n + data != size || h.data_off != n ||
            memcmp(back, buf, n))
            __builtin_trap();
        free(back);
    }
    /* the same bytes as a call's target spec ("jvp/vmap:0,-1/name") */
    char spec[RPC_MAX_NAME + 2];
    size_t k = size < sizeof spec - 1 ? size : sizeof spec - 1;
    memcpy(spec, data, k);
    spec[k] = 0;
    rpc_spec sp;
    e = cft__rpc_parse_spec(spec, &sp);
    if (!e && (sp.nops > RPC_MAX_OPS || !sp.fname[0] || strchr(sp.fname, '/')))
        __builtin_trap();
    free(buf);
    return 0;
}
