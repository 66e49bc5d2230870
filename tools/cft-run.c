/* cft-run: runs an exported program (cft/export.h) without its source.
 *
 *   cft-run PROGRAM.cftx INPUTS.safetensors OUTPUTS.safetensors [--jit]
 *           [--expect EXPECTED.safetensors] [--print]
 *
 * The input file's tensors are the program's inputs, in file order (their
 * names do not matter); the outputs are written as "out.0", "out.1", ...
 * --jit compiles the program first; --expect compares the outputs with
 * those of a file bit for bit (exit status 1 on a difference); --print
 * prints the program's IR. Exit status 2 on any error, with its message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"

static int usage(void) {
    fprintf(stderr, "usage: cft-run PROGRAM.cftx INPUTS.safetensors OUTPUTS.safetensors [--jit] "
                    "[--expect EXPECTED.safetensors] [--print]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL}, *expect = NULL;
    int npos = 0;
    bool jit = false, print = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--jit") == 0)
            jit = true;
        else if (strcmp(argv[i], "--print") == 0)
            print = true;
        else if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc)
            expect = argv[++i];
        else if (argv[i][0] != '-' && npos < 3)
            pos[npos++] = argv[i];
        else
            return usage();
    }
    if (npos != 3)
        return usage();
    cft_init();
    cft_ir *ir = NULL;
    if (cft_load_exported_ir(pos[0], &ir) != CFT_OK) {
        fprintf(stderr, "cft-run: %s\n", cft_last_error_message());
        return 2;
    }
    if (print)
        cft_ir_print(ir, stdout);
    cft_tree *in = cft_load_safetensors(pos[1], NULL, NULL);
    if (cft_tree_error(in)) {
        fprintf(stderr, "cft-run: %s\n", cft_error_message(cft_tree_error(in)));
        return 2;
    }
    int nin = cft_ir_num_inputs(ir), nout = cft_ir_num_outputs(ir);
    if (cft_tree_size(in) != nin) {
        fprintf(stderr, "cft-run: %s has %d tensors; the program takes %d inputs\n", pos[1],
                cft_tree_size(in), nin);
        return 2;
    }
    /* GC memory: the collector must see the arrays these hold (malloc'd
     * arrays of pointers are not scanned: outputs were collected while the
     * output tree was built) */
    cft_array **x = cft_alloc(sizeof *x * (size_t)(nin + 1)),
              **y = cft_alloc(sizeof *y * (size_t)(nout + 1));
    if (!x || !y) {
        fprintf(stderr, "cft-run: out of memory\n");
        return 2;
    }
    for (int i = 0; i < nin; i++)
        x[i] = cft_tree_get(in, cft_tree_name(in, i));
    cft_fn *f = cft_ir_fn(ir);
    if (jit)
        f = cft_jit(f);
    if (cft_fn_call(f, x, y) != CFT_OK) {
        fprintf(stderr, "cft-run: %s\n", cft_last_error_message());
        return 2;
    }
    cft_tree *out = cft_tree_new();
    for (int j = 0; j < nout; j++) {
        char name[32];
        snprintf(name, sizeof name, "out.%d", j);
        out = cft_tree_set(out, name, y[j]);
    }
    if (cft_save_safetensors(pos[2], out, NULL, 0) != CFT_OK) {
        fprintf(stderr, "cft-run: %s\n", cft_last_error_message());
        return 2;
    }
    if (expect) {
        cft_tree *want = cft_load_safetensors(expect, NULL, NULL);
        if (cft_tree_error(want) || cft_tree_size(want) != nout) {
            fprintf(stderr, "cft-run: %s: %s\n", expect,
                    cft_tree_error(want) ? cft_error_message(cft_tree_error(want))
                                         : "not one tensor per output");
            return 2;
        }
        for (int j = 0; j < nout; j++) {
            cft_array *w = cft_tree_get(want, cft_tree_name(want, j));
            if (!cft_allclose(y[j], w, 0, 0, true)) {
                fprintf(stderr, "cft-run: output %d differs from %s's tensor \"%s\"\n", j, expect,
                        cft_tree_name(want, j));
                return 1;
            }
        }
        printf("cft-run: %d outputs equal to %s\n", nout, expect);
    }
    return 0;
}
