/* ir.c: the closure IR: finishing (dense renumbering, last uses), the text
 * printer, the type checker, the interpreter, DCE and CSE. The interpreter
 * binds every equation, so evaluating an IR under a transform transforms it;
 * values are dropped after their last use so a long IR holds little. */
#include <stdlib.h>
#include <string.h>

#include "array/dim.h"
#include "core/error.h"
#include "core/mem.h"
#include "trace/ir.h"

/* ---- finishing ---- */

typedef struct {
    cft_irvar **map; /* old id -> new var */
    int n;
    cft_ir *ir;
} renum;

static cft_irvar *re(renum *r, cft_irvar *v) {
    if (!r->map[v->id]) {
        cft_irvar *nv = CFT_NEW(cft_irvar);
        nv->id = r->n++;
        nv->aval = v->aval;
        r->map[v->id] = nv;
    }
    return r->map[v->id];
}

static int max_id(const cft_ir *ir) {
    int m = -1;
#define UPD(v)                                                                                     \
    if ((v)->id > m)                                                                               \
    m = (v)->id
    for (int i = 0; i < ir->nconst; i++)
        UPD(ir->constvars[i]);
    for (int i = 0; i < ir->nin; i++)
        UPD(ir->invars[i]);
    for (int k = 0; k < ir->neqn; k++) {
        for (int i = 0; i < ir->eqns[k].nin; i++)
            UPD(ir->eqns[k].in[i]);
        for (int i = 0; i < ir->eqns[k].nout; i++)
            UPD(ir->eqns[k].out[i]);
    }
    for (int i = 0; i < ir->nout; i++)
        UPD(ir->outvars[i]);
#undef UPD
    return m;
}

cft_ir *cft__ir_finish(cft_ir *src) {
    renum r = {0};
    int m = max_id(src) + 1;
    r.map = CFT_NEWN(cft_irvar *, m > 0 ? m : 1);
    cft_ir *ir = CFT_NEW(cft_ir);
    *ir = *src;
    ir->constvars = CFT_NEWN(cft_irvar *, src->nconst + 1);
    ir->constvals = CFT_NEWN(cft_array *, src->nconst + 1);
    ir->invars = CFT_NEWN(cft_irvar *, src->nin + 1);
    ir->eqns = CFT_NEWN(cft_eqn, src->neqn + 1);
    ir->outvars = CFT_NEWN(cft_irvar *, src->nout + 1);
    for (int i = 0; i < src->nconst; i++) {
        ir->constvars[i] = re(&r, src->constvars[i]);
        ir->constvals[i] = src->constvals ? src->constvals[i] : NULL;
    }
    for (int i = 0; i < src->nin; i++)
        ir->invars[i] = re(&r, src->invars[i]);
    for (int k = 0; k < src->neqn; k++) {
        const cft_eqn *q = &src->eqns[k];
        cft_eqn *d = &ir->eqns[k];
        *d = *q;
        d->in = CFT_NEWN(cft_irvar *, q->nin + 1);
        d->out = CFT_NEWN(cft_irvar *, q->nout + 1);
        for (int i = 0; i < q->nin; i++)
            d->in[i] = re(&r, q->in[i]);
        for (int i = 0; i < q->nout; i++)
            d->out[i] = re(&r, q->out[i]);
    }
    for (int i = 0; i < src->nout; i++)
        ir->outvars[i] = re(&r, src->outvars[i]);
    ir->nvars = r.n;
    ir->last_use = CFT_NEWN(int, r.n + 1);
    for (int i = 0; i < r.n; i++)
        ir->last_use[i] = -1;
    for (int k = 0; k < ir->neqn; k++)
        for (int i = 0; i < ir->eqns[k].nin; i++)
            ir->last_use[ir->eqns[k].in[i]->id] = k;
    for (int i = 0; i < ir->nout; i++)
        ir->last_use[ir->outvars[i]->id] = ir->neqn;
    cft__ir_roundtrip_check(ir);
    return ir;
}

/* ---- printing ---- */

typedef struct {
    char *buf;
    size_t n, cap;
} sbuf;

static void put(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void put(sbuf *s, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(s->buf + s->n, s->cap - s->n, fmt, ap);
        va_end(ap);
        if (k >= 0 && s->n + (size_t)k < s->cap) {
            s->n += (size_t)k;
            return;
        }
        s->cap = s->cap * 2 + (size_t)k + 64;
        s->buf = cft__realloc(s->buf, s->cap);
    }
}

static void var_name(int id, char *out) {
    char tmp[16];
    int n = 0;
    do {
        tmp[n++] = (char)('a' + id % 26);
        id /= 26;
    } while (id > 0 && n < 15);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = 0;
}

static void put_var(sbuf *s, const cft_irvar *v, bool typed) {
    char name[16], d[256];
    var_name(v->id, name);
    put(s, "%s", name);
    if (!typed)
        return;
    /* not cft_aval_str, which shortens long shapes: the text must parse back */
    put(s, ":%s[", cft_dtype_name(v->aval.dtype));
    for (int i = 0; i < v->aval.ndim; i++)
        put(s, i ? ",%s" : "%s", cft_dim_str(v->aval.shape[i], d, sizeof d));
    put(s, "]");
}

/* a parameter value: symbolic dims by name */
static void put_pval(sbuf *s, int64_t v) {
    char d[64];
    if (cft__dim_maybe_sym(v) && cft_dim_is_symbolic(v))
        put(s, "%s", cft_dim_str(v, d, sizeof d));
    else
        put(s, "%lld", (long long)v);
}

static void put_params(sbuf *s, const cft_eqn *q) {
    bool any = false;
    for (int k = 0; k < CFT_NPARAM; k++) {
        const char *nm = q->prim->pnames[k];
        if (!nm)
            continue;
        put(s, any ? " " : "[");
        any = true;
        bool scalar = nm[0] == '#', sub = nm[0] == '@';
        if (scalar || sub)
            nm++;
        put(s, "%s=", nm);
        if (sub) { /* nested IRs, indented */
            if (q->params.n[k] > 1)
                put(s, "(");
            for (int b = 0; b < q->params.n[k]; b++) {
                if (b)
                    put(s, ",\n        ");
                const char *t = cft_ir_str((const cft_ir *)(uintptr_t)q->params.v[k][b]);
                for (; *t; t++) {
                    put(s, "%c", *t);
                    if (*t == '\n' && t[1])
                        put(s, "        ");
                }
                s->n--; /* drop the nested IR's final newline */
            }
            if (q->params.n[k] > 1)
                put(s, ")");
        } else if (strcmp(nm, "dtype") == 0) {
            put(s, "%s", cft_dtype_name((cft_dtype)q->params.v[k][0]));
        } else if (scalar) {
            put_pval(s, q->params.v[k][0]);
        } else {
            put(s, "(");
            for (int i = 0; i < q->params.n[k]; i++) {
                if (i)
                    put(s, ",");
                put_pval(s, q->params.v[k][i]);
            }
            put(s, ")");
        }
    }
    if (any)
        put(s, "]");
}

const char *cft_ir_str(const cft_ir *ir) {
    CFT_API("cft_ir_str");
    if (!ir)
        return "<null ir>";
    sbuf s = {cft__new(256), 0, 256};
    put(&s, "{ lambda ");
    for (int i = 0; i < ir->nconst; i++) {
        put_var(&s, ir->constvars[i], true);
        put(&s, " ");
    }
    if (ir->nconst)
        put(&s, "; ");
    for (int i = 0; i < ir->nin; i++) {
        put_var(&s, ir->invars[i], true);
        put(&s, " ");
    }
    put(&s, ".\n");
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        put(&s, k ? "      " : "  let ");
        for (int i = 0; i < q->nout; i++) {
            if (i)
                put(&s, " ");
            put_var(&s, q->out[i], true);
        }
        put(&s, " = %s", q->prim->name);
        put_params(&s, q);
        for (int i = 0; i < q->nin; i++) {
            put(&s, " ");
            put_var(&s, q->in[i], false);
        }
        put(&s, "\n");
    }
    put(&s, "  in (");
    for (int i = 0; i < ir->nout; i++) {
        if (i)
            put(&s, ", ");
        put_var(&s, ir->outvars[i], false);
    }
    put(&s, ") }\n");
    return s.buf;
}

void cft_ir_print(const cft_ir *ir, FILE *f) {
    CFT_API("cft_ir_print");
    fputs(cft_ir_str(ir), f);
}

/* ---- symbolic dims ---- */

static bool params_sym(const cft_eqn *q) {
    for (int k = 0; k < CFT_NPARAM; k++) {
        const char *nm = q->prim->pnames[k];
        if (nm && nm[0] == '@') {
            for (int b = 0; b < q->params.n[k]; b++)
                if (cft__ir_symbolic((const cft_ir *)(uintptr_t)q->params.v[k][b]))
                    return true;
            continue;
        }
        for (int i = 0; i < q->params.n[k] && i < CFT_PARAM_LEN; i++)
            if (cft__dim_maybe_sym(q->params.v[k][i]) && cft_dim_is_symbolic(q->params.v[k][i]))
                return true;
    }
    return false;
}

bool cft__eqn_symbolic(const cft_eqn *q) {
    for (int i = 0; i < q->nout; i++)
        if (cft_aval_is_symbolic(&q->out[i]->aval))
            return true;
    for (int i = 0; i < q->nin; i++)
        if (cft_aval_is_symbolic(&q->in[i]->aval))
            return true;
    return params_sym(q);
}

bool cft__ir_symbolic(const cft_ir *ir) {
    if (!ir)
        return false;
    for (int i = 0; i < ir->nin; i++)
        if (cft_aval_is_symbolic(&ir->invars[i]->aval))
            return true;
    for (int k = 0; k < ir->neqn; k++)
        if (cft__eqn_symbolic(&ir->eqns[k]))
            return true;
    for (int i = 0; i < ir->nout; i++)
        if (cft_aval_is_symbolic(&ir->outvars[i]->aval))
            return true;
    return false;
}

typedef struct {
    const cft_dimenv *env;
    cft_irvar **vars;
    bool ok;
    int64_t bad; /* the dim that could not be evaluated */
} conc;

static cft_irvar *conc_var(conc *c, const cft_irvar *v) {
    if (!c->vars[v->id]) {
        cft_irvar *n = CFT_NEW(cft_irvar);
        n->id = v->id;
        n->aval = v->aval;
        for (int d = 0; d < v->aval.ndim; d++) {
            int64_t x = cft__dim_eval(v->aval.shape[d], c->env);
            if (x == CFT_DIM_INVALID || x < 0) {
                c->ok = false;
                c->bad = v->aval.shape[d];
                x = 0;
            }
            n->aval.shape[d] = x;
        }
        c->vars[v->id] = n;
    }
    return c->vars[v->id];
}

cft_ir *cft__ir_concretize(const cft_ir *ir, const cft_dimenv *env) {
    conc c = {env, CFT_NEWN(cft_irvar *, ir->nvars + 1), true, 0};
    cft_ir *d = CFT_NEW(cft_ir);
    *d = *ir; /* same numbering, so last_use is shared */
    d->constvars = CFT_NEWN(cft_irvar *, ir->nconst + 1);
    d->invars = CFT_NEWN(cft_irvar *, ir->nin + 1);
    d->eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    d->outvars = CFT_NEWN(cft_irvar *, ir->nout + 1);
    for (int i = 0; i < ir->nconst; i++)
        d->constvars[i] = conc_var(&c, ir->constvars[i]);
    for (int i = 0; i < ir->nin; i++)
        d->invars[i] = conc_var(&c, ir->invars[i]);
    for (int k = 0; k < ir->neqn && c.ok; k++) {
        const cft_eqn *q = &ir->eqns[k];
        cft_eqn *e = &d->eqns[k];
        *e = *q;
        e->in = CFT_NEWN(cft_irvar *, q->nin + 1);
        e->out = CFT_NEWN(cft_irvar *, q->nout + 1);
        for (int i = 0; i < q->nin; i++)
            e->in[i] = conc_var(&c, q->in[i]);
        for (int i = 0; i < q->nout; i++)
            e->out[i] = conc_var(&c, q->out[i]);
        for (int j = 0; j < CFT_NPARAM && c.ok; j++) {
            const char *nm = q->prim->pnames[j];
            for (int i = 0; i < q->params.n[j] && i < CFT_PARAM_LEN && c.ok; i++) {
                int64_t v = q->params.v[j][i];
                if (nm && nm[0] == '@') { /* nested IRs (loop bodies) */
                    const cft_ir *sub = (const cft_ir *)(uintptr_t)v;
                    if (cft__ir_symbolic(sub)) {
                        cft_ir *cs = cft__ir_concretize(sub, env);
                        if (!cs)
                            return NULL;
                        e->params.v[j][i] = (int64_t)(uintptr_t)cs;
                    }
                } else if (cft__dim_maybe_sym(v) && cft_dim_is_symbolic(v)) {
                    int64_t x = cft__dim_eval(v, env);
                    if (x == CFT_DIM_INVALID)
                        c.ok = false, c.bad = v;
                    e->params.v[j][i] = x;
                }
            }
        }
    }
    for (int i = 0; i < ir->nout && c.ok; i++)
        d->outvars[i] = conc_var(&c, ir->outvars[i]);
    if (!c.ok) {
        cft__set_last(cft__fail(CFT_E_SHAPE,
                                "cft_ir_eval: the symbolic dim %s has no value for these inputs "
                                "(a symbol not bound by an input shape, or a negative size)",
                                cft__dim_s(c.bad)));
        return NULL;
    }
    return d;
}

/* ---- typecheck ---- */

cft_status cft_ir_typecheck(const cft_ir *ir) {
    CFT_API("cft_ir_typecheck");
    if (!ir)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_ir_typecheck: NULL ir"));
    bool *def = CFT_NEWN(bool, ir->nvars + 1);
    char a[96], b[96];
    for (int i = 0; i < ir->nconst; i++)
        def[ir->constvars[i]->id] = true;
    for (int i = 0; i < ir->nin; i++)
        def[ir->invars[i]->id] = true;
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        cft_aval in[q->nin > 0 ? q->nin : 1], out[q->nout];
        for (int i = 0; i < q->nin; i++) {
            if (!def[q->in[i]->id])
                return cft__set_last(cft__fail(CFT_E_TRACE,
                                               "cft_ir_typecheck: eqn %d (%s) reads "
                                               "an undefined var",
                                               k, q->prim->name));
            in[i] = q->in[i]->aval;
        }
        cft_array *e = cft__abstract_eval(q->prim, &q->params, q->nin, in, out);
        if (e)
            return cft__set_last(e);
        for (int i = 0; i < q->nout; i++) {
            if (!cft__aval_eq(&out[i], &q->out[i]->aval))
                return cft__set_last(cft__fail(
                    CFT_E_TRACE, "cft_ir_typecheck: eqn %d (%s) declares %s, its rule gives %s", k,
                    q->prim->name, cft_aval_str(&q->out[i]->aval, a), cft_aval_str(&out[i], b)));
            if (def[q->out[i]->id])
                return cft__set_last(cft__fail(CFT_E_TRACE,
                                               "cft_ir_typecheck: eqn %d (%s) "
                                               "redefines a var",
                                               k, q->prim->name));
            def[q->out[i]->id] = true;
        }
    }
    for (int i = 0; i < ir->nout; i++)
        if (!def[ir->outvars[i]->id])
            return cft__set_last(
                cft__fail(CFT_E_TRACE, "cft_ir_typecheck: output %d undefined", i));
    return CFT_OK;
}

/* ---- interpreter ---- */

static cft_status cft__fail_outs_(cft_array *e, int nout, cft_array **out) {
    for (int i = 0; i < nout; i++)
        out[i] = e;
    return cft__set_last(e);
}

cft_status cft__ir_eval_with(const cft_ir *ir, cft_array *const *consts, cft_array *const *in,
                             cft_array **out) {
    cft_array **env = CFT_NEWN(cft_array *, ir->nvars + 1);
    if (!env) {
        for (int i = 0; i < ir->nout; i++)
            out[i] = cft__oom();
        return CFT_E_NOMEM;
    }
    for (int i = 0; i < ir->nconst; i++)
        env[ir->constvars[i]->id] = consts[i];
    for (int i = 0; i < ir->nin; i++)
        env[ir->invars[i]->id] = in[i];
    for (int k = 0; k < ir->neqn; k++) {
        const cft_eqn *q = &ir->eqns[k];
        cft_array *args[q->nin > 0 ? q->nin : 1], *res[q->nout];
        for (int i = 0; i < q->nin; i++)
            args[i] = env[q->in[i]->id];
        cft_array *e = cft__bind(q->prim, &q->params, q->nin, args, q->nout, res);
        if (e) {
            for (int i = 0; i < ir->nout; i++)
                out[i] = e;
            return cft__set_last(e);
        }
        for (int i = 0; i < q->nout; i++)
            env[q->out[i]->id] = res[i];
        for (int i = 0; i < q->nin; i++) /* free what is no longer needed */
            if (ir->last_use[q->in[i]->id] == k)
                env[q->in[i]->id] = NULL;
    }
    for (int i = 0; i < ir->nout; i++)
        out[i] = env[ir->outvars[i]->id];
    return CFT_OK;
}

/* An IR traced with symbolic dims, evaluated on inputs of concrete shapes
 * (arrays, or tracers of a transform applied to the IR's function): bind
 * the symbols from the input shapes, then evaluate the IR with every dim
 * and parameter made concrete. */
static cft_status eval_symbolic(const cft_ir *ir, cft_array *const *in, cft_array **out) {
    cft_aval formal[ir->nin > 0 ? ir->nin : 1], actual[ir->nin > 0 ? ir->nin : 1];
    for (int i = 0; i < ir->nin; i++) {
        formal[i] = ir->invars[i]->aval;
        actual[i] = in[i]->aval;
    }
    cft_dimenv env = {0};
    cft_array *e = cft__dims_bind(formal, actual, ir->nin, &env, "cft_ir_eval");
    if (e)
        return cft__fail_outs_(e, ir->nout, out);
    cft_ir *c = cft__ir_concretize(ir, &env);
    if (!c)
        return cft__fail_outs_(cft__fail(cft_last_error(), "%s", cft_last_error_message()),
                               ir->nout, out);
    return cft__ir_eval_with(c, ir->constvals, in, out);
}

cft_status cft_ir_eval(const cft_ir *ir, cft_array *const *in, cft_array **out) {
    CFT_API("cft_ir_eval");
    if (!ir)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_ir_eval: NULL ir"));
    /* inputs of concrete shapes for an IR with symbolic input dims bind the
     * symbols; inputs with symbolic shapes (tracers of the trace the IR
     * was made in) must match as they are */
    bool ir_sym = false, in_sym = false;
    for (int i = 0; i < ir->nin; i++) {
        ir_sym |= cft_aval_is_symbolic(&ir->invars[i]->aval);
        in_sym |= in[i] && !cft_failed(in[i]) && cft_aval_is_symbolic(&in[i]->aval);
    }
    if (ir_sym && !in_sym) {
        for (int i = 0; i < ir->nin; i++)
            if (cft_failed(in[i]))
                return cft__fail_outs_(
                    in[i] ? in[i] : cft__fail(CFT_E_ARG, "cft_ir_eval: input %d is NULL", i),
                    ir->nout, out);
        return eval_symbolic(ir, in, out);
    }
    for (int i = 0; i < ir->nin; i++) {
        if (cft_failed(in[i])) {
            cft_array *e = in[i] ? in[i] : cft__fail(CFT_E_ARG, "cft_ir_eval: input %d is NULL", i);
            for (int j = 0; j < ir->nout; j++)
                out[j] = e;
            return cft__set_last(e);
        }
        if (!cft__aval_eq(&in[i]->aval, &ir->invars[i]->aval)) {
            char a[96], b[96];
            cft_array *e =
                cft__fail(CFT_E_SHAPE, "cft_ir_eval: input %d is %s, the IR takes %s", i,
                          cft_aval_str(&in[i]->aval, a), cft_aval_str(&ir->invars[i]->aval, b));
            for (int j = 0; j < ir->nout; j++)
                out[j] = e;
            return cft__set_last(e);
        }
    }
    return cft__ir_eval_with(ir, ir->constvals, in, out);
}

/* ---- DCE ---- */

cft_ir *cft__ir_dce_outputs(const cft_ir *ir, const bool *keep) {
    bool *live = CFT_NEWN(bool, ir->nvars + 1);
    bool *keq = CFT_NEWN(bool, ir->neqn + 1);
    cft_ir d = *ir;
    d.outvars = CFT_NEWN(cft_irvar *, ir->nout + 1);
    d.nout = 0;
    for (int i = 0; i < ir->nout; i++)
        if (!keep || keep[i]) {
            d.outvars[d.nout++] = ir->outvars[i];
            live[ir->outvars[i]->id] = true;
        }
    for (int k = ir->neqn - 1; k >= 0; k--) {
        const cft_eqn *q = &ir->eqns[k];
        for (int i = 0; i < q->nout; i++)
            keq[k] |= live[q->out[i]->id];
        keq[k] |= (q->prim->flags & CFT_PRIM_EFFECT) != 0; /* effects are kept, used or not */
        if (keq[k])
            for (int i = 0; i < q->nin; i++)
                live[q->in[i]->id] = true;
    }
    d.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    d.neqn = 0;
    for (int k = 0; k < ir->neqn; k++)
        if (keq[k])
            d.eqns[d.neqn++] = ir->eqns[k];
    /* unused constants go too */
    d.constvars = CFT_NEWN(cft_irvar *, ir->nconst + 1);
    d.constvals = CFT_NEWN(cft_array *, ir->nconst + 1);
    d.nconst = 0;
    for (int i = 0; i < ir->nconst; i++)
        if (live[ir->constvars[i]->id]) {
            d.constvars[d.nconst] = ir->constvars[i];
            d.constvals[d.nconst++] = ir->constvals[i];
        }
    return cft__ir_finish(&d);
}

cft_ir *cft_ir_dce(const cft_ir *ir) {
    CFT_API("cft_ir_dce");
    return ir ? cft__ir_dce_outputs(ir, NULL) : NULL;
}

/* ---- CSE ---- */

static uint64_t eqn_hash(const cft_eqn *q, cft_irvar *const *sub) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)q->prim;
    const unsigned char *pb = (const unsigned char *)&q->params;
    for (size_t i = 0; i < sizeof q->params; i++)
        h = (h ^ pb[i]) * 1099511628211ull;
    for (int i = 0; i < q->nin; i++)
        h = (h ^ (uint64_t)sub[q->in[i]->id]->id) * 1099511628211ull;
    return h;
}

cft_ir *cft_ir_cse(const cft_ir *ir) {
    CFT_API("cft_ir_cse");
    if (!ir)
        return NULL;
    cft_irvar **sub = CFT_NEWN(cft_irvar *, ir->nvars + 1); /* var -> representative */
    for (int i = 0; i < ir->nconst; i++)
        sub[ir->constvars[i]->id] = ir->constvars[i];
    for (int i = 0; i < ir->nin; i++)
        sub[ir->invars[i]->id] = ir->invars[i];
    size_t cap = 16;
    while (cap < (size_t)ir->neqn * 2)
        cap *= 2;
    int *table = malloc(sizeof(int) * cap);
    for (size_t i = 0; i < cap; i++)
        table[i] = -1;
    cft_ir d = *ir;
    d.eqns = CFT_NEWN(cft_eqn, ir->neqn + 1);
    d.neqn = 0;
    for (int k = 0; k < ir->neqn; k++) {
        cft_eqn q = ir->eqns[k];
        cft_irvar **nin = CFT_NEWN(cft_irvar *, q.nin + 1);
        for (int i = 0; i < q.nin; i++)
            nin[i] = sub[q.in[i]->id];
        q.in = nin;
        uint64_t h = eqn_hash(&q, sub);
        size_t slot = h & (cap - 1);
        int found = -1;
        if (q.prim->flags & CFT_PRIM_EFFECT) { /* two sends are two sends */
            for (int i = 0; i < q.nout; i++)
                sub[q.out[i]->id] = q.out[i];
            d.eqns[d.neqn++] = q;
            continue;
        }
        for (; table[slot] >= 0; slot = (slot + 1) & (cap - 1)) {
            const cft_eqn *o = &d.eqns[table[slot]];
            if (o->prim != q.prim || o->nin != q.nin ||
                memcmp(&o->params, &q.params, sizeof q.params))
                continue;
            bool same = true;
            for (int i = 0; i < q.nin && same; i++)
                same = o->in[i] == q.in[i];
            if (same) {
                found = table[slot];
                break;
            }
        }
        if (found >= 0) {
            for (int i = 0; i < q.nout; i++)
                sub[q.out[i]->id] = d.eqns[found].out[i];
            continue;
        }
        for (int i = 0; i < q.nout; i++)
            sub[q.out[i]->id] = q.out[i];
        table[slot] = d.neqn;
        d.eqns[d.neqn++] = q;
    }
    free(table);
    d.outvars = CFT_NEWN(cft_irvar *, ir->nout + 1);
    for (int i = 0; i < ir->nout; i++)
        d.outvars[i] = sub[ir->outvars[i]->id];
    return cft__ir_finish(&d);
}

/* ---- accessors ---- */

static cft_status io_aval(const char *who, const cft_ir *ir, int i, bool input, cft_aval *out) {
    int n = !ir ? 0 : input ? ir->nin : ir->nout;
    if (!out || i < 0 || i >= n)
        return cft__set_last(cft__fail(CFT_E_ARG, "%s: no %s %d (the IR has %d)", who,
                                       input ? "input" : "output", i, n));
    *out = (input ? ir->invars : ir->outvars)[i]->aval;
    return CFT_OK;
}
cft_status cft_ir_input_aval(const cft_ir *ir, int i, cft_aval *out) {
    CFT_API("cft_ir_input_aval");
    return io_aval("cft_ir_input_aval", ir, i, true, out);
}
cft_status cft_ir_output_aval(const cft_ir *ir, int i, cft_aval *out) {
    CFT_API("cft_ir_output_aval");
    return io_aval("cft_ir_output_aval", ir, i, false, out);
}

int cft_ir_num_inputs(const cft_ir *ir) {
    CFT_API("cft_ir_num_inputs");
    return ir ? ir->nin : 0;
}
int cft_ir_num_outputs(const cft_ir *ir) {
    CFT_API("cft_ir_num_outputs");
    return ir ? ir->nout : 0;
}
int cft_ir_num_consts(const cft_ir *ir) {
    CFT_API("cft_ir_num_consts");
    return ir ? ir->nconst : 0;
}
int cft_ir_num_eqns(const cft_ir *ir) {
    CFT_API("cft_ir_num_eqns");
    return ir ? ir->neqn : 0;
}
const char *cft_ir_eqn_prim(const cft_ir *ir, int i) {
    CFT_API("cft_ir_eqn_prim");
    return ir && i >= 0 && i < ir->neqn ? ir->eqns[i].prim->name : NULL;
}
