/* Internal: what the safetensors writer and reader share: the header size
 * limit and byte-order helpers (the format is little-endian). */
#ifndef CFT_NN_SAFETENSORS_H
#define CFT_NN_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cft/core.h"

/* the reference implementation rejects headers above 100 MB */
#define CFT_ST_MAX_HEADER (100u * 1000u * 1000u)
#define CFT_ST_MAX_NDIM CFT_MAX_NDIM

/* a dtype of the file format: its name, element size, the cft dtype it
 * loads as, and the one it loads as when widening is asked for */
typedef struct {
    const char *name;
    int size;
    cft_dtype as, widened;
} cft_st_type;
extern const cft_st_type cft__st_types[];
/* index into cft__st_types of a dtype name; -1 if unknown */
int cft__st_dtype_of(const char *name);
/* the file dtype name cft writes for dt (NULL: none) */
const char *cft__st_name_of(cft_dtype dt);

/* one tensor of a parsed header; name: offset into the header's names */
typedef struct {
    size_t name;
    int dtype; /* index into cft__st_types */
    int ndim;
    int64_t shape[CFT_ST_MAX_NDIM];
    uint64_t begin, end;
} cft_st_entry;

/* a parsed header: tensors in file order, metadata as (key, value) name
 * offsets, and the decoded strings they point into (malloc memory) */
typedef struct {
    cft_st_entry *e;
    int n, cap;
    size_t *meta;
    int nmeta, capmeta;
    char *names;
} cft_st_header;

/* Parse a header of len bytes (safetensors_header.c): linear time, memory
 * a small multiple of len. False with a message in err on any problem. */
bool cft__st_parse_header(const char *buf, size_t len, cft_st_header *h, char *err, size_t errn);
void cft__st_header_free(cft_st_header *h);

/* Open an already opened fd of `path` (a regular file, checked) and parse
 * its header (safetensors_load.c): NULL and H (free it), where the data
 * start and their length; or an error naming the path. */
cft_array *cft__st_open(const char *path, int fd, cft_st_header *H, uint64_t *data_at,
                        uint64_t *data_len);
/* exactly n bytes at off; false on a short read */
bool cft__st_read_at(int fd, void *buf, size_t n, uint64_t off);
/* entry e against data_len bytes of data (its size and byte range): NULL
 * or a message in buf */
const char *cft__st_check_entry(const cft_st_entry *e, uint64_t data_len, char *buf, size_t cap);

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
