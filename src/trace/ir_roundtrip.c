/* ir_roundtrip.c: a self-check of the IR's text form. With the environment
 * variable CFT_IR_ROUNDTRIP=1, every IR the library finishes (traced,
 * transformed, rewritten, nested) is printed, parsed back and compared:
 * the two texts must be equal and the two IRs equal field by field
 * (primitives, every parameter slot, avals, var ids, nested IRs). A
 * difference is a bug in the printer or the parser: it is reported on
 * stderr and the process aborts, so any test run with the variable set
 * checks every IR it produces. Off (the default), it costs a pthread_once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "core/error.h"
#include "core/mem.h"
#include "trace/ir.h"
#include "trace/prim.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool enabled;
static _Thread_local bool busy;

static void read_env(void) {
    const char *e = getenv("CFT_IR_ROUNDTRIP");
    enabled = e && e[0] == '1';
}

static bool parseable(const cft_ir *ir) {
    for (int e = 0; e < ir->neqn; e++) {
        const cft_prim *p = ir->eqns[e].prim;
        if (cft__prim_named(p->name, (int)strlen(p->name)) != p)
            return false;
        for (int s = 0; s < CFT_NPARAM; s++)
            if (p->pnames[s] && p->pnames[s][0] == '@')
                for (int b = 0; b < ir->eqns[e].params.n[s]; b++)
                    if (!parseable((const cft_ir *)(uintptr_t)ir->eqns[e].params.v[s][b]))
                        return false;
    }
    for (int i = 0; i < ir->nconst; i++)
        if (!ir->constvals || !ir->constvals[i])
            return false;
    return true;
}

static bool var_eq(const cft_irvar *a, const cft_irvar *b) {
    return a->id == b->id && cft__aval_eq(&a->aval, &b->aval);
}

/* field-by-field equality; a scalar or dtype slot written with no value
 * reads back as one value, 0 (the same meaning) */
static bool ir_eq(const cft_ir *a, const cft_ir *b, char *why, size_t n) {
    if (a->nconst != b->nconst || a->nin != b->nin || a->neqn != b->neqn || a->nout != b->nout ||
        a->nvars != b->nvars)
        return snprintf(why, n, "counts differ"), false;
    for (int i = 0; i < a->nconst; i++)
        if (!var_eq(a->constvars[i], b->constvars[i]) || a->constvals[i] != b->constvals[i])
            return snprintf(why, n, "constant %d differs", i), false;
    for (int i = 0; i < a->nin; i++)
        if (!var_eq(a->invars[i], b->invars[i]))
            return snprintf(why, n, "input %d differs", i), false;
    for (int i = 0; i < a->nout; i++)
        if (!var_eq(a->outvars[i], b->outvars[i]))
            return snprintf(why, n, "output %d differs", i), false;
    for (int e = 0; e < a->neqn; e++) {
        const cft_eqn *p = &a->eqns[e], *q = &b->eqns[e];
        if (p->prim != q->prim || p->nin != q->nin || p->nout != q->nout)
            return snprintf(why, n, "eqn %d (%s): primitive or arity differs", e, p->prim->name),
                   false;
        for (int i = 0; i < p->nin; i++)
            if (!var_eq(p->in[i], q->in[i]))
                return snprintf(why, n, "eqn %d (%s): input %d differs", e, p->prim->name, i),
                       false;
        for (int i = 0; i < p->nout; i++)
            if (!var_eq(p->out[i], q->out[i]))
                return snprintf(why, n, "eqn %d (%s): output %d differs", e, p->prim->name, i),
                       false;
        for (int s = 0; s < CFT_NPARAM; s++) {
            const char *nm = p->prim->pnames[s];
            int pn = p->params.n[s], qn = q->params.n[s];
            if (nm && (nm[0] == '#' || strcmp(nm, "dtype") == 0) && pn == 0 && qn == 1 &&
                p->params.v[s][0] == 0 && q->params.v[s][0] == 0)
                continue;
            bool ok = pn == qn;
            for (int i = 0; ok && i < pn; i++) {
                if (nm && nm[0] == '@')
                    ok = ir_eq((const cft_ir *)(uintptr_t)p->params.v[s][i],
                               (const cft_ir *)(uintptr_t)q->params.v[s][i], why, n);
                else
                    ok = p->params.v[s][i] == q->params.v[s][i];
            }
            for (int i = pn; ok && i < CFT_PARAM_LEN; i++) /* values nobody prints */
                ok = p->params.v[s][i] == 0 || (nm && nm[0] == '@');
            if (!ok)
                return snprintf(why + strlen(why), n - strlen(why),
                                " eqn %d (%s): parameter %d (%s) differs", e, p->prim->name, s,
                                nm ? nm : "unnamed"),
                       false;
        }
    }
    return true;
}

bool cft__ir_roundtrip_suspend(void) {
    bool was = busy;
    busy = true;
    return was;
}
void cft__ir_roundtrip_restore(bool was) {
    busy = was;
}

void cft__ir_roundtrip_check(const cft_ir *ir) {
    pthread_once(&once, read_env);
    if (!enabled || busy || !parseable(ir))
        return;
    busy = true;
    int nc = cft_ir_consts(ir, NULL);
    cft_array **cv = CFT_NEWN(cft_array *, nc + 1);
    cft_ir_consts(ir, cv);
    const char *text = cft_ir_str(ir);
    cft_ir *back = NULL;
    char why[512] = "";
    bool ok = cft_ir_parse(text, nc, cv, &back) == CFT_OK;
    if (!ok)
        snprintf(why, sizeof why, "%s", cft_last_error_message());
    else if (strcmp(text, cft_ir_str(back)) != 0)
        snprintf(why, sizeof why, "the texts differ:\n%s", cft_ir_str(back)), ok = false;
    else
        ok = ir_eq(ir, back, why, sizeof why);
    if (!ok) {
        fprintf(stderr, "cft: CFT_IR_ROUNDTRIP: the IR\n%sdoes not read back: %s\n", text, why);
        abort();
    }
    busy = false;
}
