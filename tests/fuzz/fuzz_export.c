/* fuzz_export.c: libFuzzer target for cft_load_exported_ir, the loader of
 * exported programs (a safetensors file holding the IR's text, its
 * constants, its avals and a format version), given any bytes as a real
 * file (a memfd, opened by its /proc/self/fd path). It must return an IR
 * or an error naming the call, never crash; an IR it returns must print,
 * typecheck and export again to a file that loads to the same text. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cft/cft.h"

static int fd = -1;
static char path[64], again[96];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fd < 0) {
        fd = memfd_create("cft-fuzz-export", 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        snprintf(again, sizeof again, "/tmp/cft-fuzz-export-%d.cftx", (int)getpid());
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        return 0;
    cft_fn *f = cft_load_exported(path); /* the same loader, as a function */
    if (!f || (cft_fn_failed(f) && !strstr(cft_fn_error_message(f), "cft_load_exported")))
        __builtin_trap();
    cft_ir *ir = NULL;
    cft_status st = cft_load_exported_ir(path, &ir);
    if (st != CFT_OK) {
        if (ir || !strstr(cft_last_error_message(), "cft_load_exported"))
            __builtin_trap(); /* every error names the public call */
        return 0;
    }
    const char *t1 = cft_ir_str(ir);
    if (cft_ir_typecheck(ir) != CFT_OK)
        __builtin_trap(); /* the loader checks what it returns */
    if (cft_export_ir(ir, again) == CFT_OK) {
        cft_ir *back = NULL;
        if (cft_load_exported_ir(again, &back) != CFT_OK || strcmp(t1, cft_ir_str(back)) != 0)
            __builtin_trap();
    }
    return 0;
}
