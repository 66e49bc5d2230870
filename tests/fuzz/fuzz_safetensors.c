/* fuzz_safetensors.c: libFuzzer target for cft_load_safetensors, the parser
 * of outside bytes with the most surface. Each input is a whole file,
 * handed to the loader as a real file (a memfd, opened by its
 * /proc/self/fd path, so open/fstat/pread run as for a file on disk). The
 * loader must return a tree or an error tree, never crash or read out of
 * bounds; a tree it returns must be usable (each leaf reduced) and save
 * back to a file that loads to the same tree. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cft/cft.h"

static int fd = -1, out = -1;
static char path[64], out_path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fd < 0) {
        fd = memfd_create("cft-fuzz-in", 0);
        out = memfd_create("cft-fuzz-out", 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        snprintf(out_path, sizeof out_path, "/tmp/cft-fuzz-out-%d.safetensors", (int)getpid());
        (void)out;
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        return 0;
    const char **meta = NULL;
    int nmeta = 0;
    cft_tree *t = cft_load_safetensors(path, &meta, &nmeta);
    if (cft_tree_failed(t)) {
        const char *msg = cft_error_message(cft_tree_error(t));
        if (!msg || strncmp(msg, "cft_load_safetensors", 20) != 0)
            __builtin_trap(); /* every error names the public call */
        return 0;
    }
    for (int i = 0; i < cft_tree_size(t); i++) {
        cft_array *x = cft_tree_at(t, i);
        if (cft_failed(x))
            __builtin_trap();
        (void)cft_sum(cft_astype(x, CFT_F64), NULL, 0, false);
    }
    for (int i = 0; i < 2 * nmeta; i++)
        if (!meta[i])
            __builtin_trap();
    /* widened, halves become f32: same names, same element counts (or, for a
     * shape only the 2-byte dtype could hold, a size error) */
    cft_tree *w = cft_load_safetensors_ex(path, CFT_ST_WIDEN, NULL, NULL);
    if (cft_tree_failed(w)) {
        if (!strstr(cft_error_message(cft_tree_error(w)), "too large"))
            __builtin_trap();
        return 0;
    }
    if (cft_tree_size(w) != cft_tree_size(t))
        __builtin_trap();
    for (int i = 0; i < cft_tree_size(w); i++)
        if (cft_array_size(cft_tree_at(w, i)) != cft_array_size(cft_tree_at(t, i)))
            __builtin_trap();
    /* a loaded tree saves and loads back (metadata included) */
    if (cft_save_safetensors(out_path, t, meta, nmeta) != CFT_OK)
        __builtin_trap();
    cft_tree *r = cft_load_safetensors(out_path, NULL, NULL);
    if (cft_tree_failed(r) || cft_tree_size(r) != cft_tree_size(t))
        __builtin_trap();
    unlink(out_path);
    return 0;
}
