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
#include "cft/ops.h"
#include "cft/shape.h"
#include "cft/nn.h"
#include "array/dim.h"
#include "core/error.h"
#include "array/array.h"
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
    const char **names = CFT_NEWN(const char *, nc + 1);
    cft_array **stored = CFT_NEWN(cft_array *, nc + 1);
    /* "broadcast" metadata: "<i>:<d0>,<d1>,...;" for each constant stored
     * at its compact shape */
    size_t bcap = 64, blen = 0;
    char *bcast = cft__new(bcap);
    if (!names || !stored || !bcast)
        return cft__set_last(cft__oom());
    bcast[0] = 0;
    for (int i = 0; i < nc; i++) {
        if (!cv[i] || !cft_is_concrete(cv[i]))
            return cft__set_last(cft__fail(CFT_E_ARG,
                                           "constant %d of the program is not data (a value "
                                           "being traced by an enclosing transform, or an error)",
                                           i));
        char *name = cft__new(32);
        if (!name)
            return cft__set_last(cft__oom());
        snprintf(name, 32, "const.%d", i);
        names[i] = name;
        stored[i] = cv[i];
        const cft_aval *a = &cv[i]->aval;
        int64_t compact[CFT_MAX_NDIM];
        bool spread = false;
        for (int d = 0; d < a->ndim; d++) {
            compact[d] = cv[i]->strides[d] == 0 && a->shape[d] > 1 ? 1 : a->shape[d];
            spread |= compact[d] != a->shape[d];
        }
        if (!spread)
            continue;
        stored[i] = cft__view(cv[i], compact, a->ndim, cv[i]->strides, cv[i]->offset);
        char ent[40 + 24 * CFT_MAX_NDIM];
        int k = snprintf(ent, sizeof ent, "%d:", i);
        for (int d = 0; d < a->ndim; d++)
            k += snprintf(ent + k, sizeof ent - (size_t)k, "%s%lld", d ? "," : "",
                          (long long)a->shape[d]);
        snprintf(ent + k, sizeof ent - (size_t)k, ";");
        size_t el = strlen(ent);
        if (blen + el + 1 > bcap) {
            char *nb = cft__new(bcap = 2 * (blen + el + 1));
            if (!nb)
                return cft__set_last(cft__oom());
            memcpy(nb, bcast, blen + 1);
            bcast = nb;
        }
        memcpy(bcast + blen, ent, el + 1);
        blen += el;
    }
    cft_tree *t = cft_tree_from(names, stored, nc);
    const char *text = cft_ir_str(ir);
    /* what cannot be read back is refused now, not when loading */
    cft_ir *back = NULL;
    if (cft_ir_parse(text, nc, cv, &back) != CFT_OK)
        return cft__set_last(cft__fail(CFT_E_ARG, "%s: the program cannot be exported: %s", path,
                                       cft_last_error_message()));
    char version[16];
    snprintf(version, sizeof version, "%d", blen ? CFT_EXPORT_VERSION : 1);
    const char *meta[] = {"format",
                          FORMAT_NAME,
                          "format_version",
                          version,
                          "inputs",
                          avals_text(ir, true),
                          "outputs",
                          avals_text(ir, false),
                          "ir",
                          text,
                          "broadcast",
                          bcast};
    cft_status st = cft_save_safetensors(path, t, meta, blen ? 6 : 5);
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
    /* version 2: constants stored compact, spread to their shapes again
     * (views: no memory per element) */
    const char *bc = meta_get(meta, nmeta, "broadcast");
    for (const char *p = bc; p && *p;) {
        char *end;
        long i = strtol(p, &end, 10);
        int64_t shape[CFT_MAX_NDIM];
        int nd = 0;
        bool ok = end != p && *end == ':' && i >= 0 && i < nc;
        for (p = end + 1; ok && *p && *p != ';';) {
            long long v = strtoll(p, &end, 10);
            ok = end != p && v >= 0 && v < CFT_DIM_MAX_CONCRETE && nd < CFT_MAX_NDIM &&
                 (*end == ',' || *end == ';');
            if (ok)
                shape[nd++] = v, p = *end == ',' ? end + 1 : end;
        }
        if (!ok || *p != ';')
            return cft__set_last(cft__fail(CFT_E_ARG,
                                           "%s: its \"broadcast\" metadata is not a list of "
                                           "\"<constant>:<dims>;\"",
                                           path));
        p++;
        cft_array *b = cft_broadcast_to(cv[i], shape, nd);
        if (cft_failed(b))
            return cft__set_last(cft__fail(CFT_E_ARG,
                                           "%s: constant %ld does not spread to its "
                                           "shape: %s",
                                           path, i, cft_error_message(b)));
        cv[i] = b;
    }
    cft_ir *ir = NULL;
    cft__dim_txn_begin(); /* a load that fails leaves no symbol names behind */
    if (cft_ir_parse(text, nc, cv, &ir) != CFT_OK) {
        cft__dim_txn_end(false);
        return cft__set_last(cft__fail(CFT_E_ARG, "%s: %s", path, cft_last_error_message()));
    }
    const char *ins = meta_get(meta, nmeta, "inputs"), *outs = meta_get(meta, nmeta, "outputs");
    bool same = !(ins && strcmp(ins, avals_text(ir, true)) != 0) &&
                !(outs && strcmp(outs, avals_text(ir, false)) != 0);
    cft__dim_txn_end(same);
    if (!same)
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
