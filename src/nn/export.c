/* export.c: exported programs (cft/export.h). A program is its IR's text
 * form plus the constants it closes over, in one safetensors file: the
 * constants as tensors "const.<k>" in the order cft_ir_consts gives them,
 * the text and the avals in the metadata. Loading parses the text with
 * cft_ir_parse, which checks every equation; nothing but data comes from
 * the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/export.h"
#include "cft/nn.h"
#include "core/error.h"
#include "core/mem.h"
#include "trace/fn.h"

#define FORMAT_NAME "cft-exported-program"

/* "f32[B,64] i32[B]": the avals of the IR's inputs or outputs */
static char *avals_text(const cft_ir *ir, bool inputs) {
    int n = inputs ? cft_ir_num_inputs(ir) : cft_ir_num_outputs(ir);
    char *s = cft__new((size_t)n * 100 + 1);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        cft_aval a;
        char b[96];
        if (inputs)
            cft_ir_input_aval(ir, i, &a);
        else
            cft_ir_output_aval(ir, i, &a);
        k += (size_t)sprintf(s + k, "%s%s", i ? " " : "", cft_aval_str(&a, b));
    }
    s[k] = 0;
    return s;
}

cft_status cft_export_ir(const cft_ir *ir, const char *path) {
    CFT_API("cft_export_ir");
    if (!ir || !path)
        return cft__set_last(cft__fail(CFT_E_ARG, "the IR and the path must not be NULL"));
    int nc = cft_ir_consts(ir, NULL);
    cft_array **cv = CFT_NEWN(cft_array *, nc + 1);
    cft_ir_consts(ir, cv);
    cft_tree *t = cft_tree_new();
    for (int i = 0; i < nc; i++) {
        if (!cv[i] || !cft_is_concrete(cv[i]))
            return cft__set_last(cft__fail(CFT_E_ARG,
                                           "constant %d of the program is not data (a value "
                                           "being traced by an enclosing transform, or an error)",
                                           i));
        char name[32];
        snprintf(name, sizeof name, "const.%d", i);
        t = cft_tree_set(t, name, cv[i]);
    }
    const char *text = cft_ir_str(ir);
    /* what cannot be read back is refused now, not when loading */
    cft_ir *back = NULL;
    if (cft_ir_parse(text, nc, cv, &back) != CFT_OK)
        return cft__set_last(cft__fail(CFT_E_ARG, "%s: the program cannot be exported: %s", path,
                                       cft_last_error_message()));
    char version[16];
    snprintf(version, sizeof version, "%d", CFT_EXPORT_VERSION);
    const char *meta[] = {"format",
                          FORMAT_NAME,
                          "format_version",
                          version,
                          "inputs",
                          avals_text(ir, true),
                          "outputs",
                          avals_text(ir, false),
                          "ir",
                          text};
    cft_status st = cft_save_safetensors(path, t, meta, 5);
    if (st != CFT_OK)
        return cft__set_last(cft__fail(st, "%s", cft_last_error_message()));
    return CFT_OK;
}

cft_status cft_export(cft_fn *f, const cft_aval *in_avals, const char *path) {
    CFT_API("cft_export");
    if (cft_fn_failed(f) || !in_avals || !path)
        return cft__set_last(cft__fail(CFT_E_ARG, "%s",
                                       cft_fn_failed(f)
                                           ? (f ? cft_fn_error_message(f) : "NULL function")
                                           : "the avals and the path must not be NULL"));
    cft_ir *ir = cft_make_ir(f, in_avals);
    if (!ir)
        return cft__set_last(
            cft__fail(cft_last_error(), "tracing the program: %s", cft_last_error_message()));
    return cft_export_ir(ir, path);
}

static const char *meta_get(const char **meta, int nmeta, const char *key) {
    for (int i = 0; i < nmeta; i++)
        if (strcmp(meta[2 * i], key) == 0)
            return meta[2 * i + 1];
    return NULL;
}

cft_status cft_load_exported_ir(const char *path, cft_ir **out) {
    CFT_API("cft_load_exported_ir");
    if (out)
        *out = NULL;
    if (!path || !out)
        return cft__set_last(cft__fail(CFT_E_ARG, "the path and out must not be NULL"));
    const char **meta = NULL;
    int nmeta = 0;
    cft_tree *t = cft_load_safetensors(path, &meta, &nmeta);
    cft_array *e = cft_tree_error(t);
    if (e)
        return cft__set_last(cft__fail(cft_error_code(e), "%s", cft_error_message(e)));
    const char *fmt = meta_get(meta, nmeta, "format"),
               *ver = meta_get(meta, nmeta, "format_version");
    const char *text = meta_get(meta, nmeta, "ir");
    if (!fmt || strcmp(fmt, FORMAT_NAME) != 0 || !ver || !text)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "%s is not an exported program (its "
                                       "metadata lacks format \"" FORMAT_NAME
                                       "\", a format_version "
                                       "or the ir)",
                                       path));
    char *end;
    long v = strtol(ver, &end, 10);
    if (*ver < '1' || *ver > '9' || *end || v < 1 || v > CFT_EXPORT_VERSION)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "%s has format version \"%.20s\"; this cft "
                                       "reads versions 1 to %d",
                                       path, ver, CFT_EXPORT_VERSION));
    /* bounded work per loaded byte: the IR text and its equations (one per
     * line as the printer writes them; nested bodies count) are capped
     * before parsing (a 2.2 MB file of 100,000 equations took 498 MB to
     * load and 52 s to jit) */
    size_t tl = strlen(text), lines = 1;
    for (const char *c = text; *c; c++)
        lines += *c == '\n';
    if (tl > CFT_EXPORT_MAX_IR_BYTES || lines > CFT_EXPORT_MAX_EQNS)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "%s: its program is %zu bytes in %zu lines; exported "
                                       "programs are read up to %d bytes and %d equations "
                                       "(CFT_EXPORT_MAX_IR_BYTES, CFT_EXPORT_MAX_EQNS)",
                                       path, tl, lines, CFT_EXPORT_MAX_IR_BYTES,
                                       CFT_EXPORT_MAX_EQNS));
    int nc = cft_tree_size(t);
    if (nc > CFT_EXPORT_MAX_EQNS)
        return cft__set_last(
            cft__fail(CFT_E_ARG, "%s: %d constants (at most %d)", path, nc, CFT_EXPORT_MAX_EQNS));
    cft_array **cv = CFT_NEWN(cft_array *, nc + 1);
    for (int i = 0; i < nc; i++) {
        char name[32];
        snprintf(name, sizeof name, "const.%d", i);
        if (strcmp(cft_tree_name(t, i), name) != 0)
            return cft__set_last(cft__fail(CFT_E_ARG,
                                           "%s: tensor %d is named \"%.40s\", "
                                           "expected \"%s\"",
                                           path, i, cft_tree_name(t, i), name));
        cv[i] = cft_tree_get(t, name);
    }
    cft_ir *ir = NULL;
    if (cft_ir_parse(text, nc, cv, &ir) != CFT_OK)
        return cft__set_last(cft__fail(CFT_E_ARG, "%s: %s", path, cft_last_error_message()));
    const char *ins = meta_get(meta, nmeta, "inputs"), *outs = meta_get(meta, nmeta, "outputs");
    if ((ins && strcmp(ins, avals_text(ir, true)) != 0) ||
        (outs && strcmp(outs, avals_text(ir, false)) != 0))
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "%s: the inputs/outputs in its metadata "
                                       "(%.200s / %.200s) are not those of its IR",
                                       path, ins ? ins : "", outs ? outs : ""));
    *out = ir;
    return CFT_OK;
}

cft_fn *cft_load_exported(const char *path) {
    CFT_API("cft_load_exported");
    cft_ir *ir = NULL;
    if (cft_load_exported_ir(path, &ir) != CFT_OK)
        return cft__fn_error(cft__fail(cft_last_error(), "%s", cft_last_error_message()), 1, 1);
    const char *base = strrchr(path, '/');
    return cft_fn_named(cft_ir_fn(ir), base ? base + 1 : path);
}
