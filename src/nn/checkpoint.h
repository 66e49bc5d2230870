/* Internal: the metadata of a sharded checkpoint (checkpoint_meta.c), what
 * the loader (checkpoint_load.c, no MPI) and the collective save
 * (src/dist/checkpoint) share. */
#ifndef CFT_NN_CHECKPOINT_H
#define CFT_NN_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cft/checkpoint.h"

#define CKPT_FORMAT "cft-sharded-checkpoint"
#define CKPT_META "metadata.json"
#define CKPT_MAX_FILE 63
#define CKPT_MAX_NAME 1024
#define CKPT_MAX_PIECES 65536
#define CKPT_MAX_TENSORS 1000000
#define CKPT_MAX_META_BYTES (256u << 20)

typedef struct {
    char file[CKPT_MAX_FILE + 1];
    int64_t begin, end; /* rows along axis 0 (0-d arrays: [0, 1)) */
} ckpt_piece;
typedef struct {
    const char *name;
    cft_dtype dtype;
    int ndim;
    int64_t shape[CFT_MAX_NDIM];
    int npieces;
    ckpt_piece *pieces; /* sorted by rows, tiling them exactly */
} ckpt_tensor;
typedef struct {
    int n;
    ckpt_tensor *t;
} ckpt_meta;

/* Parse and check metadata text (hostile bytes): NULL, or an error. */
cft_array *cft__ckpt_parse(const char *text, size_t len, ckpt_meta *m);
/* The JSON text of m (malloc'd; NULL when out of memory). */
char *cft__ckpt_format(const ckpt_meta *m);
/* Rows of t along axis 0 (1 for a 0-d array). */
int64_t cft__ckpt_rows(const ckpt_tensor *t);
/* A file name a checkpoint may hold: plain, [A-Za-z0-9._-], not . or .. */
bool cft__ckpt_file_ok(const char *f);

#endif
