/** @file
 * cft/checkpoint.h: sharded checkpoints (torch.distributed.checkpoint).
 *
 * A checkpoint is a directory: one safetensors file per rank that wrote
 * something (rank<r>.safetensors) and metadata.json, which maps each name
 * to its global dtype and shape and to the pieces (file, rows along axis 0)
 * that hold it. Saving is collective (cft_checkpoint_save, in cft::dist);
 * loading needs no MPI and no other rank: each process reads exactly the
 * rows it asks for, whatever sharding and world size wrote them.
 *
 *     // every rank: its rows [off, off + n) of "emb.weight" (global rows R),
 *     // and the replicated rest of the model
 *     cft_shard sh = {"emb.weight", off, R};
 *     cft_checkpoint_save(world, "ckpt", local_tree, &sh, 1);
 *     // later, at any world size
 *     cft_checkpoint_piece want = {"emb.weight", my_off, my_rows};
 *     cft_tree *t = cft_checkpoint_load("ckpt", &want, 1);   // + nothing else
 *     cft_tree *all = cft_checkpoint_load("ckpt", NULL, 0);  // everything, whole */
#ifndef CFT_CHECKPOINT_H
#define CFT_CHECKPOINT_H

/** @addtogroup checkpoint
 *  @{ */

#include <stdint.h>

#include "cft/core.h"
#include "cft/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A rank's piece of a global array: its local array holds rows
 *  [offset, offset + local rows) of an array of global_rows rows (the other
 *  dims as the local array's). Entries of a saved tree not named in the
 *  shards are whole values (written once, by the lowest rank holding one). */
typedef struct cft_shard {
    const char *name;    /**< the entry of the saved tree */
    int64_t offset;      /**< the global row of the local array's first row */
    int64_t global_rows; /**< rows of the whole array */
} cft_shard;

/** What to load: rows [offset, offset + rows) of `name` along axis 0
 *  (rows -1: the whole array, as for 0-d arrays). */
typedef struct cft_checkpoint_piece {
    const char *name; /**< the entry to load */
    int64_t offset;   /**< the first global row wanted */
    int64_t rows;     /**< how many rows (-1: the whole array) */
} cft_checkpoint_piece;

/** Load pieces from checkpoint directory `dir` into a tree (names as
 *  asked); want NULL: every array whole. A missing, corrupt or mismatched
 *  file or entry is an error tree naming the file and the array. */
cft_tree *cft_checkpoint_load(const char *dir, const cft_checkpoint_piece *want, int nwant);
/** The arrays of a checkpoint: their count (-1 on error, cft_last_error),
 *  names and global avals (GC memory). */
int cft_checkpoint_list(const char *dir, const char ***names, cft_aval **avals);

#ifdef __cplusplus
}
#endif

/** @} */

#endif
