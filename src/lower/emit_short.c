/* emit_short.c: the short-row path of a kernel over rows of a few
 * elements (a softmax's max and sum over 10 classes, a cross-entropy's
 * pick, a bias over 10 classes and its gradient). Row by row, such a row
 * is one partial vector, a horizontal reduction and a scalar remainder
 * (exp called one element at a time): ~40 cycles a row whatever its work.
 * This path runs up to SHORT_TILE elements of consecutive rows as one
 * flat simd loop (each operand read by how it lies: a vector, a scalar, a
 * row laid out once, a value per row stored over its row, or a gather
 * through a table of offsets; the values to reduce kept in a buffer),
 * then reduces each row from the buffer in one vector of 16 or 32 lanes,
 * adds the rows in order into one row, or (elementwise) stops there. It
 * is emitted for two-dim loops with rows of at most SHORT_MAX elements
 * whose stored outputs lay out their rows contiguously when the kernel is
 * made, and taken at run time when the rows and strides still allow it.
 * Half operands are read into floats where they are read (laid out in the
 * tables as floats) and stored packed, as in the row loop. */
#include <stdio.h>
#include <string.h>

#include "core/mem.h"
#include "lower/lower.h"

enum { SHORT_MAX = 32, SHORT_TILE = 512, SHORT_BLOCK = 16 };

/* how the flat loop reads an operand of a two-dim loop: contiguous over
 * rows (inner stride 1, rows one after another: a vector load); one value
 * for the whole tile (a scalar); a row repeated (a bias: its values laid
 * out once per call over a tile, then vector loads); one value per row (a
 * row's max, a label: laid out per tile, each value stored over its row,
 * ~3x cheaper than gathering them); or anything else through a table of
 * offsets (a gather: a transposed operand) */
typedef enum { K_FLAT, K_CONST, K_COL, K_ROW, K_TABLE } kind;

static kind kind_at_plan(const cft_loop *lp, int k, char cls) {
    if (cls == '1' && lp->st[k][0] == lp->dims[1])
        return K_FLAT;
    if (lp->st[k][0] == 0)
        return cls == '0' ? K_CONST : cls == '1' ? K_COL : K_TABLE;
    return cls == '0' ? K_ROW : K_TABLE;
}

/* the reduction of each row (within), of the rows into one row (across:
 * a bias gradient over 10 classes), or none (each: an elementwise kernel
 * whose operands keep it two-dim, a bias added to logits) */
typedef enum { WITHIN, ACROSS, EACH } mode;

static void reduce_within(const cft_eqn *red, int red_out, const char *acc_t, bool nan_apart, int w,
                          char **b, size_t *l, size_t *c);
static void reduce_across(const cft_eqn *red, int w, char **b, size_t *l, size_t *c);

static bool emit_short(const cft_ir *ir, const cft_group *g, const cft_loop *lp, int red_out,
                       const char *acc_t, mode m, char **b, size_t *l, size_t *c) {
    int nops = g->nin + g->nout;
    /* emitted only for kernels planned with short rows (the path is code
     * to compile: the sizes come at run time, but a loop planned with long
     * rows keeps them, a batch being an outer dim) */
    if (lp->nd != 2 || lp->dims[1] > SHORT_MAX || (m != EACH && (red_out < 0 || !g->reduce)))
        return false;
    const cft_eqn *red = m == EACH ? NULL : &ir->eqns[g->eqns[g->neqn - 1]];
    /* the lanes a row's vectors take: 16, or 32 for rows planned longer
     * than 16 (one width in the source; other rows take the row loop) */
    const int w = lp->dims[1] <= 16 ? 16 : SHORT_MAX;
    /* each operand's stored dtype: halves are read into floats and stored
     * packed (emit.c), a half reduction's output is the f32 array the
     * executor hands in (cft__half_acc) */
    cft_dtype sdt[CFT_KMAX_OPS];
    for (int k = 0; k < nops; k++)
        sdt[k] = k == red_out && g->half_acc
                     ? CFT_F32
                     : cft__emit_var_dtype(ir, k < g->nin ? g->in[k] : g->out[k - g->nin]);
    const char *cls = strchr(lp->sig, ':') + 1;
    kind kd[CFT_KMAX_OPS];
    for (int k = 0; k < nops; k++) {
        kd[k] = k == red_out ? K_TABLE : kind_at_plan(lp, k, cls[k]);
        if (k >= g->nin && k != red_out && kd[k] != K_FLAT)
            return false; /* a stored output the flat loop could not write */
    }
    /* at run time: short rows, each its own output (within) or all into
     * one row of the output (across), the operands still of their kinds,
     * the tables' offsets within a tile in 32 bits. Rows [lo, hi): the
     * run's, or (across) the unit's */
    const char *lo = m == ACROSS ? "rlo" : "ulo", *hi = m == ACROSS ? "rhi" : "uhi";
    if (m == WITHIN)
        cft__emit_put(b, l, c, "    if (own");
    else if (m == EACH)
        cft__emit_put(b, l, c, "    if (own && chunks == 1");
    else
        cft__emit_put(b, l, c, "    if (!own && chunks == 1 && st[%d] == 0 && st[%d] == 1",
                      2 * red_out, 2 * red_out + 1);
    cft__emit_put(b, l, c, " && inner > 0 && inner <= %d && (%s - %s) * inner >= %d", w, hi, lo,
                  SHORT_BLOCK);
    for (int k = 0; k < nops; k++) {
        if (kd[k] == K_FLAT)
            cft__emit_put(b, l, c, " && st[%d] == inner", 2 * k);
        else if (kd[k] == K_CONST || kd[k] == K_COL) /* (the inner stride is the class's) */
            cft__emit_put(b, l, c, " && st[%d] == 0", 2 * k);
        else if (k != red_out)
            cft__emit_put(b, l, c, " && llabs(st[%d]) < (1 << 20) && llabs(st[%d]) < (1 << 20)",
                          2 * k, 2 * k + 1);
    }
    cft__emit_put(b, l, c, ") { /* short rows (emit_short.c) */\n");
    cft__emit_put(b, l, c,
                  "        const int64_t tr = %d / inner < %s - %s ? %d / inner : %s - %s;\n",
                  SHORT_TILE, hi, lo, SHORT_TILE, hi, lo);
    if (m != EACH)
        cft__emit_put(b, l, c, "        %s tx[%d];\n", acc_t, SHORT_TILE + SHORT_MAX);
    if (m == ACROSS) /* the row summed into, in lanes past it the identity */
        cft__emit_put(b, l, c,
                      "        __typeof__(*rp) ra[%d];\n"
                      "        for (int j = 0; j < %d; j++) ra[j] = j < inner ? rp[j] : (%s);\n",
                      w, w, red->prim->c_init);
    for (int k = 0; k < g->nin; k++) {
        cft_dtype dt = cft__emit_var_dtype(ir, g->in[k]);
        if (kd[k] == K_TABLE)
            cft__emit_put(b, l, c, "        int32_t t%d[%d];\n", k, SHORT_TILE);
        else if (kd[k] == K_COL || kd[k] == K_ROW) /* (a row's value spills past it) */
            cft__emit_put(b, l, c, "        %s t%d[%d];\n", cft__emit_ctype(dt), k,
                          SHORT_TILE + SHORT_MAX);
    }
    bool per_call = false; /* tables and repeated rows, laid out once per call */
    for (int k = 0; k < g->nin; k++)
        per_call |= kd[k] == K_TABLE || kd[k] == K_COL;
    if (per_call) {
        cft__emit_put(b, l, c,
                      "        for (int64_t rr = 0, e = 0; rr < tr; rr++)\n"
                      "            for (int64_t j = 0; j < inner; j++, e++) {");
        for (int k = 0; k < g->nin; k++)
            if (kd[k] == K_TABLE)
                cft__emit_put(b, l, c, " t%d[e] = (int32_t)(rr * st[%d] + j * st[%d]);", k, 2 * k,
                              2 * k + 1);
            else if (kd[k] == K_COL) {
                char ref[32];
                snprintf(ref, sizeof ref, "o%d[j]", k);
                cft__emit_put(b, l, c, " t%d[e] = %s;", k, cft__emit_ld(sdt[k], ref));
            }
        cft__emit_put(b, l, c, " }\n");
    }
    /* tiles of rows evenly cut (each of 16 elements or more), and in a
     * tile blocks of 16 elements, the last one moved back to end with the
     * tile: every element is computed by the same vector code, whichever
     * rows a call (a thread) runs */
    cft__emit_put(
        b, l, c,
        "        const int64_t nt = (%s - %s + tr - 1) / tr;\n"
        "        for (int64_t tk = 0; tk < nt; tk++) {\n"
        "            const int64_t r0 = %s + (%s - %s) * tk / nt,\n"
        "                          n = %s + (%s - %s) * (tk + 1) / nt - r0, te = n * inner;\n",
        hi, lo, lo, hi, lo, lo, hi, lo);
    for (int k = 0; k < nops; k++)
        cft__emit_put(b, l, c, "            %s%s *restrict b%d = o%d + r0 * st[%d];\n",
                      k < g->nin ? "const " : "", cft__emit_stype(sdt[k]), k, k, 2 * k);
    for (int k = 0; k < g->nin; k++)
        if (kd[k] == K_ROW) { /* each row's value stored over w slots from its row's start (one
                                 vector store), the next row overwriting the spill */
            char ref[48];
            snprintf(ref, sizeof ref, "b%d[rr * st[%d]]", k, 2 * k);
            cft__emit_put(b, l, c,
                          "            for (int64_t rr = 0; rr < n; rr++) { const %s v = %s; for "
                          "(int j = 0; j < %d; j++) t%d[rr * inner + j] = v; }\n",
                          cft__emit_ctype(sdt[k]), cft__emit_ld(sdt[k], ref), w, k);
        }
    bool nan_apart =
        m == WITHIN && red->prim->c_iexpr && cft_dtype_is_float(red->in[0]->aval.dtype);
    if (nan_apart)
        cft__emit_put(b, l, c, "            int nan_t = 0;\n");
    cft__emit_put(b, l, c,
                  "            for (int64_t e0 = 0;; e0 += %d) {\n"
                  "            if (e0 > te - %d) e0 = te - %d;\n"
                  "            #pragma omp simd%s\n"
                  "            for (int64_t e = e0; e < e0 + %d; e++) {\n",
                  SHORT_BLOCK, SHORT_BLOCK, SHORT_BLOCK, nan_apart ? " reduction(|:nan_t)" : "",
                  SHORT_BLOCK);
    char **name = CFT_NEWN(char *, ir->nvars + 1);
    for (int k = 0; k < g->nin; k++) {
        char tmp[48];
        if (kd[k] == K_FLAT)
            snprintf(tmp, sizeof tmp, "b%d[e]", k);
        else if (kd[k] == K_CONST)
            snprintf(tmp, sizeof tmp, "b%d[0]", k);
        else if (kd[k] == K_COL || kd[k] == K_ROW)
            snprintf(tmp, sizeof tmp, "t%d[e]", k);
        else
            snprintf(tmp, sizeof tmp, "b%d[t%d[e]]", k, k);
        /* (the tables hold floats already) */
        name[g->in[k]] = (char *)(kd[k] == K_COL || kd[k] == K_ROW ? cft__strdup(tmp)
                                                                   : cft__emit_ld(sdt[k], tmp));
    }
    cft__emit_chain(b, l, c, ir, g, name);
    for (int k = g->nin; k < nops; k++)
        if (k != red_out)
            cft__emit_put(b, l, c, "            b%d[e] = %s%s%s;\n", k, cft__emit_st(sdt[k], true),
                          name[g->out[k - g->nin]], cft__emit_st(sdt[k], false));
    if (m != EACH)
        cft__emit_put(b, l, c, "            tx[e] = (%s)(%s);\n", acc_t, name[red->in[0]->id]);
    if (nan_apart)
        cft__emit_put(b, l, c, "            nan_t |= tx[e] != tx[e];\n");
    cft__emit_put(b, l, c, "            }\n            if (e0 == te - %d) break;\n            }\n",
                  SHORT_BLOCK);
    if (m != EACH) /* the lanes a row's vector reads past the tile: defined (and unused) */
        cft__emit_put(b, l, c, "            for (int j = 0; j < %d; j++) tx[te + j] = 0;\n", w);
    if (m == WITHIN)
        reduce_within(red, red_out, acc_t, nan_apart, w, b, l, c);
    else if (m == ACROSS)
        reduce_across(red, w, b, l, c);
    else
        cft__emit_put(b, l, c, "        }\n        return;\n    }\n");
    return true;
}

static void reduce_within(const cft_eqn *red, int red_out, const char *acc_t, bool nan_apart, int w,
                          char **b, size_t *l, size_t *c) {
    /* each row from the buffer, combined with the identity into its output
     * as the row loop does (each row its own output: the executor does not
     * fill it): w lanes a row, the lanes past the row holding the identity, combined pairwise in
     * halves (one row's scalar chain of adds is latency-bound, ~4 cycles an element, and gcc ends
     * an `omp simd` reduction with such a chain over the lanes); max / min by their NaN-free form,
     * and a tile that holds NaN reduced again in order by the NaN-keeping one */
    const char *iex = nan_apart ? red->prim->c_iexpr : red->prim->c_expr;
    cft__emit_put(b, l, c,
                  "            for (int64_t rr = 0; rr < n; rr++) {\n"
                  "                const %s *restrict xr = tx + rr * inner;\n"
                  "                %s acc = (%s)(%s);\n",
                  acc_t, acc_t, acc_t, red->prim->c_init);
    cft__emit_put(
        b, l, c,
        "                %s v_[%d];\n"
        "                for (int j = 0; j < %d; j++) v_[j] = j < inner ? xr[j] : (%s)(%s);\n",
        acc_t, w, w, acc_t, red->prim->c_init);
    for (int h = w / 2; h >= 1; h /= 2)
        cft__emit_put(
            b, l, c,
            "                for (int j = 0; j < %d; j++) { const %s acc = v_[j], x = v_[j + "
            "%d]; v_[j] = (%s); }\n",
            h, acc_t, h, iex);
    cft__emit_put(b, l, c, "                acc = v_[0];\n");
    if (nan_apart)
        cft__emit_put(b, l, c,
                      "                if (nan_t) { acc = (%s)(%s); for (int64_t j = 0; j < inner; "
                      "j++) { const double x = xr[j]; acc = (%s); } }\n",
                      acc_t, red->prim->c_init, red->prim->c_expr);
    cft__emit_put(
        b, l, c,
        "                { const double x = acc; __typeof__(*b%d) *p = b%d + rr * st[%d];\n"
        "                  const double acc = (%s); *p = (%s); }\n"
        "            }\n        }\n        return;\n    }\n",
        red_out, red_out, 2 * red_out, red->prim->c_init, red->prim->c_expr);
}

/* across: the tile's rows added in order into the row, one vector of 16
 * or 32 lanes a row (the same sums, in the same order, as the row loop's);
 * the row stored back after the unit's last tile */
static void reduce_across(const cft_eqn *red, int w, char **b, size_t *l, size_t *c) {
    cft__emit_put(
        b, l, c,
        "            for (int64_t rr = 0; rr < n; rr++)\n"
        "                for (int j = 0; j < %d; j++) { const __typeof__(*rp) acc = ra[j], "
        "x = j < inner ? tx[rr * inner + j] : (%s); ra[j] = (%s); }\n"
        "        }\n"
        "        for (int64_t j = 0; j < inner; j++) rp[j] = ra[j];\n"
        "        continue;\n    }\n",
        w, red->prim->c_init, red->prim->c_expr);
}

bool cft__emit_short_rows(const cft_ir *ir, const cft_group *g, const cft_loop *lp, int red_out,
                          const char *acc_t, char **b, size_t *l, size_t *c) {
    return emit_short(ir, g, lp, red_out, acc_t, WITHIN, b, l, c);
}

bool cft__emit_short_cols(const cft_ir *ir, const cft_group *g, const cft_loop *lp, int red_out,
                          char **b, size_t *l, size_t *c) {
    char acc_t[64];
    snprintf(acc_t, sizeof acc_t, "__typeof__(*o%d)", red_out);
    return emit_short(ir, g, lp, red_out, acc_t, ACROSS, b, l, c);
}

bool cft__emit_short_each(const cft_ir *ir, const cft_group *g, const cft_loop *lp, char **b,
                          size_t *l, size_t *c) {
    return emit_short(ir, g, lp, -1, NULL, EACH, b, l, c);
}
