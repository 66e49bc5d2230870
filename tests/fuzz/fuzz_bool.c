/* fuzz_bool.c: libFuzzer target for cft_from_data of bool, the other way
 * outside bytes become an array: any byte is a valid bool (nonzero is
 * true), so every element must read back as 0 or 1 and the sum must count
 * the nonzero input bytes, whatever the bytes and the shape they fill. */
#include <stdint.h>
#include <string.h>

#include "cft/cft.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    /* the first byte picks a shape: rank 1..3 over the remaining bytes */
    size_t n = size - 1;
    int rank = 1 + data[0] % 3;
    int64_t shape[3] = {(int64_t)n, 1, 1};
    if (rank > 1 && n % 2 == 0)
        shape[0] = (int64_t)n / 2, shape[1] = 2;
    cft_array *x = cft_from_data(data + 1, CFT_BOOL, shape, rank);
    if (cft_failed(x))
        __builtin_trap();
    int64_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += data[1 + i] != 0;
    double got = cft_item(cft_sum(cft_astype(x, CFT_I64), NULL, 0, false));
    if (got != (double)want)
        __builtin_trap();
    uint8_t back[4096];
    if (n <= sizeof back) {
        if (cft_copy_to(x, CFT_BOOL, back) != CFT_OK)
            __builtin_trap();
        for (size_t i = 0; i < n; i++)
            if (back[i] != (data[1 + i] != 0))
                __builtin_trap();
    }
    cft_array *y = cft_logical_not(cft_logical_not(x));
    if (cft_failed(y))
        __builtin_trap();
    return 0;
}
