/* fuzz_checkpoint_load.c: libFuzzer target for the sharded checkpoint
 * loader as a whole (cft_checkpoint_list and cft_checkpoint_load over a
 * directory), not only its metadata parser. An input is a checkpoint in
 * one buffer: a 4-byte little-endian length, that many bytes of
 * metadata.json, then the bytes of rank0.safetensors; both are written as
 * real files into a private directory. The loader must give a tree or an
 * error naming the call, never crash or read out of bounds, and a tree it
 * gives must have as many arrays as the listing says. Pieces are asked
 * for by name too: rows of the first listed array, and a name that is not
 * there (an error). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cft/checkpoint.h"
#include "cft/cft.h"

static char dir[64], meta[96], shard[96];

static int put(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = n ? fwrite(p, 1, n, f) : 0;
    fclose(f);
    return w == n ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/cft-fuzz-ckpt-XXXXXX");
        if (!mkdtemp(dir))
            abort();
        snprintf(meta, sizeof meta, "%s/metadata.json", dir);
        snprintf(shard, sizeof shard, "%s/rank0.safetensors", dir);
    }
    if (size < 4)
        return 0;
    uint32_t ml = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                  (uint32_t)data[3] << 24;
    if (ml > size - 4)
        ml = (uint32_t)(size - 4);
    if (put(meta, data + 4, ml) || put(shard, data + 4 + ml, size - 4 - ml))
        return 0;
    int n = cft_checkpoint_list(dir, NULL, NULL);
    if (n < 0 && !strstr(cft_last_error_message(), "cft_checkpoint_list"))
        __builtin_trap(); /* every error names the public call */
    /* pieces by name: rows of the first listed array, and a name not there */
    const char **names = NULL;
    cft_aval *avals = NULL;
    if (cft_checkpoint_list(dir, &names, &avals) > 0) {
        int64_t rows = avals[0].ndim > 0 ? avals[0].shape[0] : -1;
        cft_checkpoint_piece want[2] = {{names[0], rows > 1 ? 1 : 0, rows > 1 ? rows - 1 : -1},
                                        {"(not there)", 0, 1}};
        for (int k = 1; k <= 2; k++) {
            cft_tree *p = cft_checkpoint_load(dir, want, k);
            if (cft_tree_failed(p) &&
                !strstr(cft_error_message(cft_tree_error(p)), "cft_checkpoint_load"))
                __builtin_trap();
            if (k == 2 && !cft_tree_failed(p))
                __builtin_trap(); /* the missing name is an error */
        }
    }
    cft_tree *t = cft_checkpoint_load(dir, NULL, 0);
    if (cft_tree_failed(t)) {
        if (!strstr(cft_error_message(cft_tree_error(t)), "cft_checkpoint_load"))
            __builtin_trap();
        return 0;
    }
    if (cft_tree_size(t) != n)
        __builtin_trap();
    for (int i = 0; i < cft_tree_size(t); i++) /* the values are usable */
        cft_sum(cft_astype(cft_tree_at(t, i), CFT_F64), NULL, 0, false);
    return 0;
}
