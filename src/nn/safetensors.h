/* Internal: what the safetensors writer and reader share: the header size
 * limit and byte-order helpers (the format is little-endian). */
#ifndef CFT_NN_SAFETENSORS_H
#define CFT_NN_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the reference implementation rejects headers above 100 MB */
#define CFT_ST_MAX_HEADER (100u * 1000u * 1000u)

static inline bool cft__host_le(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* reverse the bytes of each of n elements of `size` bytes, in place */
static inline void cft__bswap(void *p, size_t size, size_t n) {
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++, b += size)
        for (size_t j = 0; j < size / 2; j++) {
            unsigned char t = b[j];
            b[j] = b[size - 1 - j];
            b[size - 1 - j] = t;
        }
}

#endif
