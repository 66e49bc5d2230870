/* ir_dot.c: an IR as a Graphviz DOT graph: inputs, constants and outputs
 * as ellipses, each equation a box (primitive and parameters), an edge per
 * value with its aval on it, nested IRs (loop and branch bodies) as
 * clusters beside the equation that holds them; given each equation's
 * fusion group (cft_jit_to_dot), the members of a group share a colour. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "array/dim.h"
#include "cft/shape.h"
#include "core/error.h"
#include "core/mem.h"
#include "trace/ir.h"

static const char *const palette[] = {"#fde2e4", "#e2ece9", "#dfe7fd", "#fff1c1", "#e8dff5",
                                      "#d8f3dc", "#ffd6a5", "#cddafd", "#f1c0e8", "#caffbf"};
#define NPAL (sizeof palette / sizeof palette[0])

/* the equation's parameters as text, without nested IRs, escaped for DOT */
static void params_text(const cft_eqn *q, char *buf, size_t cap) {
    size_t w = 0;
    buf[0] = 0;
    for (int k = 0; k < CFT_NPARAM && w + 32 < cap; k++) {
        const char *nm = q->prim->pnames[k];
        if (!nm || nm[0] == '@')
            continue;
        if (nm[0] == '#')
            nm++;
        w += (size_t)snprintf(buf + w, cap - w, "%s%s=", w ? " " : "", nm);
        if (!strcmp(nm, "dtype")) {
            w += (size_t)snprintf(buf + w, cap - w, "%s",
                                  cft_dtype_name((cft_dtype)q->params.v[k][0]));
            continue;
        }
        for (int i = 0; i < q->params.n[k] && w + 24 < cap; i++) {
            char d[48];
            int64_t v = q->params.v[k][i];
            if (cft__dim_maybe_sym(v) && cft_dim_is_symbolic(v))
                cft_dim_str(v, d, sizeof d);
            else
                snprintf(d, sizeof d, "%lld", (long long)v);
            w += (size_t)snprintf(buf + w, cap - w, "%s%s", i ? "," : "(", d);
        }
        if (w + 3 < cap)
            w += (size_t)snprintf(buf + w, cap - w, q->params.n[k] > 0 ? ")" : "()");
    }
}

/* one IR's nodes and edges, node names prefixed (nested IRs get their own) */
static void write_ir(const cft_ir *ir, const char *pre, const int *group, FILE *f, int depth) {
    char av[96];
    for (int i = 0; i < ir->nconst; i++)
        fprintf(f, "  %sv%d [shape=note, label=\"const %s\"];\n", pre, ir->constvars[i]->id,
                cft_aval_str(&ir->constvars[i]->aval, av));
    for (int i = 0; i < ir->nin; i++)
        fprintf(
            f,
            "  %sv%d [shape=ellipse, style=filled, fillcolor=\"#cfe8fc\", label=\"in %d\\n%s\"];\n",
            pre, ir->invars[i]->id, i, cft_aval_str(&ir->invars[i]->aval, av));
    int *producer = CFT_NEWN(int, ir->nvars + 1); /* var -> eqn, -1: input or constant */
    for (int v = 0; v <= ir->nvars; v++)
        producer[v] = -1;
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        char par[512];
        params_text(q, par, sizeof par);
        int g = group ? group[k] : -1;
        fprintf(f, "  %se%d [shape=box, style=\"rounded%s\"%s%s%s, label=\"%s%s%s%s\"];\n", pre, k,
                g >= 0 ? ",filled" : "", g >= 0 ? ", fillcolor=\"" : "",
                g >= 0 ? palette[(size_t)g % NPAL] : "", g >= 0 ? "\"" : "", q->prim->name,
                par[0] ? "\\n" : "", par, "");
        if (g >= 0)
            fprintf(f, "  %se%d [xlabel=\"group %d\"];\n", pre, k, g);
        for (int i = 0; i < q->nin; i++) {
            int v = q->in[i]->id, p = producer[v];
            const char *ax = cft_aval_str(&q->in[i]->aval, av);
            if (p >= 0)
                fprintf(f, "  %se%d -> %se%d [label=\"%s\"];\n", pre, p, pre, k, ax);
            else
                fprintf(f, "  %sv%d -> %se%d [label=\"%s\"];\n", pre, v, pre, k, ax);
        }
        for (int o = 0; o < q->nout; o++)
            producer[q->out[o]->id] = k;
        for (int s = 0; s < CFT_NPARAM && depth < 8; s++) { /* nested IRs: clusters */
            const char *nm = q->prim->pnames[s];
            if (!nm || nm[0] != '@')
                continue;
            for (int b = 0; b < q->params.n[s]; b++) {
                const cft_ir *sub = (const cft_ir *)(uintptr_t)q->params.v[s][b];
                char sp[96];
                snprintf(sp, sizeof sp, "%se%d_%s%d_", pre, k, nm + 1, b);
                fprintf(f, "  subgraph cluster_%s {\n  label=\"%s %s\";\n  style=dashed;\n", sp,
                        q->prim->name, nm + 1);
                write_ir(sub, sp, NULL, f, depth + 1);
                fprintf(f, "  }\n");
                if (sub->neqn > 0)
                    fprintf(f, "  %se%d -> %se0 [style=dotted, arrowhead=none];\n", pre, k, sp);
            }
        }
    }
    for (int i = 0; i < ir->nout; i++) {
        int v = ir->outvars[i]->id, p = producer[v];
        fprintf(
            f,
            "  %sout%d [shape=ellipse, style=filled, fillcolor=\"#d8f3dc\", label=\"out %d\"];\n",
            pre, i, i);
        const char *ax = cft_aval_str(&ir->outvars[i]->aval, av);
        if (p >= 0)
            fprintf(f, "  %se%d -> %sout%d [label=\"%s\"];\n", pre, p, pre, i, ax);
        else
            fprintf(f, "  %sv%d -> %sout%d [label=\"%s\"];\n", pre, v, pre, i, ax);
    }
}

cft_status cft__ir_dot(const cft_ir *ir, const int *group, FILE *f) {
    if (!ir || !f)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_ir_to_dot: %s is NULL", ir ? "f" : "ir"));
    fprintf(f, "digraph cft_ir {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n"
               "  edge [fontname=\"monospace\", fontsize=8];\n");
    write_ir(ir, "", group, f, 0);
    fprintf(f, "}\n");
    return ferror(f) ? cft__set_last(cft__fail(CFT_E_IO, "cft_ir_to_dot: write error")) : CFT_OK;
}

cft_status cft_ir_to_dot(const cft_ir *ir, FILE *f) {
    CFT_API("cft_ir_to_dot");
    return cft__ir_dot(ir, NULL, f);
}
