/* ir_parse.c: the IR's text form read back (cft_ir_parse), so that what
 * cft_ir_print writes can be saved, edited and loaded again (export.c).
 * A hand-written recursive-descent reader over the grammar of the printer:
 *
 *   ir    := '{' 'lambda' decl* [';' decl*] '.' ['let' eqn*] 'in' '(' names ')' '}'
 *   decl  := name ':' aval              aval := dtype '[' dim (',' dim)* ']'
 *   eqn   := decl+ '=' prim ['[' param* ']'] name*
 *   param := pname '=' ( '(' pval,* ')' | pval | dtype | ir | '(' ir,* ')' )
 *   dim, pval := integer | a polynomial over symbol names ("B*64+1")
 *
 * Only primitives of the registry parse (those whose parameters are plain
 * values; ones that name state of the tracing process, such as a process
 * group or a print label, do not); every equation is checked by its shape
 * rule, so a hostile text is an error, never a bad IR. Errors give line,
 * column, and what was expected. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array/dim.h"
#include "core/error.h"
#include "core/mem.h"
#include "trace/ir.h"
#include "trace/prim.h"

#define MAX_DEPTH 32    /* nested IRs */
#define MAX_NEW_SYMS 64 /* symbol names one text may add */
#define MAX_NAME 12     /* letters of a var name (ids below 26^12) */
#define MAX_OUTS 1024   /* outputs of one equation */
#define MAX_INS 4096    /* inputs of one equation */

typedef struct {
    int64_t key; /* decoded name + 1; 0: empty */
    cft_irvar *v;
} slot;

/* names of one IR's scope: open addressing on the decoded name */
typedef struct {
    slot *s;
    int cap, n, next_id;
} scope;

typedef struct {
    const char *text, *p;
    cft_array *err;
    cft_array *const *consts;
    int nconst, used;
    int depth;
    int new_syms; /* symbol names this text added to the process's table */
} parser;

static bool failed(const parser *P) {
    return P->err != NULL;
}

static void pos_of(const parser *P, const char *at, int *line, int *col) {
    *line = 1, *col = 1;
    for (const char *c = P->text; c < at; c++) {
        if (*c == '\n')
            (*line)++, *col = 1;
        else
            (*col)++;
    }
}

/* an error at the cursor: "line L, column C: expected X, found 'tok'" */
static void expected(parser *P, const char *what) {
    if (P->err)
        return;
    int line, col;
    pos_of(P, P->p, &line, &col);
    char tok[24];
    int n = 0;
    for (const char *c = P->p; *c && n < 20 && *c != '\n'; c++)
        tok[n++] = *c;
    tok[n] = 0;
    P->err = cft__fail(CFT_E_ARG, "cft_ir_parse: line %d, column %d: expected %s, found %s%s%s",
                       line, col, what, *P->p ? "'" : "the end of the text", tok, *P->p ? "'" : "");
}

static void fail_at(parser *P, const char *at, const char *msg, const char *arg) {
    if (P->err)
        return;
    int line, col;
    pos_of(P, at, &line, &col);
    P->err = cft__fail(CFT_E_ARG, "cft_ir_parse: line %d, column %d: %s%s", line, col, msg,
                       arg ? arg : "");
}

static void ws(parser *P) {
    while (*P->p == ' ' || *P->p == '\n' || *P->p == '\t' || *P->p == '\r')
        P->p++;
}

static bool is_alpha(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* a word (letters, digits, '_') at the cursor, after spaces; length 0: none */
static int word(parser *P, const char **start) {
    ws(P);
    *start = P->p;
    int n = 0;
    if (is_alpha(P->p[0]))
        while (is_alpha(P->p[n]) || is_digit(P->p[n]))
            n++;
    return n;
}

static bool accept(parser *P, char c) {
    ws(P);
    if (*P->p == c) {
        P->p++;
        return true;
    }
    return false;
}

static bool expect(parser *P, char c, const char *what) {
    if (accept(P, c))
        return true;
    expected(P, what);
    return false;
}

/* the next word, without consuming it, is `kw` followed (after spaces) by `after` */
static bool peek_kw(parser *P, const char *kw, char after) {
    const char *s;
    int n = word(P, &s);
    if (n != (int)strlen(kw) || memcmp(s, kw, (size_t)n))
        return false;
    const char *c = s + n;
    while (*c == ' ' || *c == '\n' || *c == '\t' || *c == '\r')
        c++;
    return after ? *c == after : *c != ':';
}

/* ---- names and scopes ---- */

/* a var name (lowercase letters, as the printer writes them) decoded to an
 * integer key, one per name: bijective base 26 ('a' is 1, so "a", "aa"
 * and "aaa" differ: with 'a' as 0 they were one variable); -1 if there is
 * none at the cursor */
static int64_t var_key(parser *P) {
    const char *s;
    int n = word(P, &s);
    if (n == 0 || n > MAX_NAME)
        return -1;
    int64_t k = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < 'a' || s[i] > 'z')
            return -1;
        k = k * 26 + (s[i] - 'a' + 1);
    }
    P->p = s + n;
    return k;
}

static slot *lookup(scope *S, int64_t key) {
    uint64_t h = (uint64_t)(key + 1) * 0x9E3779B97F4A7C15ull;
    for (int i = (int)(h >> 40) & (S->cap - 1);; i = (i + 1) & (S->cap - 1))
        if (S->s[i].key == key + 1 || S->s[i].key == 0)
            return &S->s[i];
}

static cft_irvar *find(scope *S, int64_t key) {
    slot *s = lookup(S, key);
    return s->key ? s->v : NULL;
}

static cft_irvar *define(parser *P, scope *S, int64_t key, const char *at, const cft_aval *aval) {
    if (2 * (S->n + 1) > S->cap) {
        scope g = {CFT_NEWN(slot, S->cap * 2), S->cap * 2, 0, S->next_id};
        for (int i = 0; i < S->cap; i++)
            if (S->s[i].key)
                *lookup(&g, S->s[i].key - 1) = S->s[i], g.n++;
        *S = g;
    }
    slot *s = lookup(S, key);
    if (s->key) {
        fail_at(P, at, "a variable defined twice", NULL);
        return NULL;
    }
    cft_irvar *v = CFT_NEW(cft_irvar);
    v->id = S->next_id++;
    v->aval = *aval;
    s->key = key + 1, s->v = v;
    S->n++;
    return v;
}

/* ---- dims, dtypes, avals ---- */

/* a plain integer (optional '-'), when the token is one; false otherwise */
static bool plain_int(parser *P, int64_t *out) {
    ws(P);
    const char *c = P->p;
    if (*c == '-')
        c++;
    if (!is_digit(*c))
        return false;
    while (is_digit(*c))
        c++;
    if (*c == '*' || *c == '+' || (*c == '-' && c != P->p) || is_alpha(*c))
        return false; /* part of an expression */
    errno = 0;
    char *end;
    long long v = strtoll(P->p, &end, 10);
    if (errno == ERANGE || end != c) {
        fail_at(P, P->p, "an integer out of range", NULL);
        return false;
    }
    P->p = c;
    *out = v;
    return true;
}

/* factor := digits | symbol name */
static int64_t dim_factor(parser *P) {
    ws(P);
    if (is_digit(*P->p)) {
        int64_t v = 0;
        const char *at = P->p;
        while (is_digit(*P->p)) {
            v = v * 10 + (*P->p++ - '0');
            if (v >= CFT_DIM_MAX_CONCRETE) {
                fail_at(P, at, "a size too large for a dim", NULL);
                return CFT_DIM_INVALID;
            }
        }
        return v;
    }
    const char *s;
    int n = word(P, &s);
    if (n == 0 || n > 31) {
        expected(P, "a size or a symbol name");
        return CFT_DIM_INVALID;
    }
    char name[32];
    memcpy(name, s, (size_t)n);
    name[n] = 0;
    P->p = s + n;
    /* symbol names are process-wide and never freed: a text may add at
     * most MAX_NEW_SYMS of them (one of 5000 names filled the table, and
     * every later program needing a new symbol failed) */
    int64_t d = cft__dim_sym_known(name);
    if (d == CFT_DIM_INVALID) {
        if (++P->new_syms > MAX_NEW_SYMS) {
            fail_at(P, s, "more new symbol names than a text may add (64): ", name);
            return CFT_DIM_INVALID;
        }
        d = cft_dim_sym(name);
    }
    if (d == CFT_DIM_INVALID)
        fail_at(P, s, "a bad symbol name: ", name);
    return d;
}

/* a dim: a polynomial with integer coefficients over symbols */
static int64_t dim_expr(parser *P) {
    int64_t v = CFT_DIM_INVALID;
    if (!plain_int(P, &v))
        v = CFT_DIM_INVALID;
    if (failed(P))
        return CFT_DIM_INVALID;
    if (v != CFT_DIM_INVALID || P->p[0] == ',' || P->p[0] == ')' || P->p[0] == ']') {
        if (v == CFT_DIM_INVALID)
            expected(P, "a dim");
        return v;
    }
    const char *at = P->p;
    int64_t sum = 0;
    bool first = true;
    for (;;) {
        ws(P);
        int sign = 1;
        if (*P->p == '-')
            sign = -1, P->p++;
        else if (*P->p == '+' && !first)
            P->p++;
        else if (!first)
            break;
        int64_t term = dim_factor(P);
        while (!failed(P) && accept(P, '*'))
            term = cft_dim_mul(term, dim_factor(P));
        if (failed(P))
            return CFT_DIM_INVALID;
        sum = sign > 0 ? cft_dim_add(sum, term) : cft_dim_sub(sum, term);
        if (!cft_dim_valid(sum)) {
            fail_at(P, at, "a dim that cannot be expressed (negative or too large)", NULL);
            return CFT_DIM_INVALID;
        }
        first = false;
    }
    return sum;
}

static bool dtype_named(const char *s, int n, cft_dtype *dt) {
    for (int d = 0; d < CFT_NDTYPES; d++) {
        const char *nm = cft_dtype_name((cft_dtype)d);
        if ((int)strlen(nm) == n && memcmp(nm, s, (size_t)n) == 0) {
            *dt = (cft_dtype)d;
            return true;
        }
    }
    return false;
}

static bool parse_dtype(parser *P, cft_dtype *dt) {
    const char *s;
    int n = word(P, &s);
    if (n == 0 || !dtype_named(s, n, dt)) {
        expected(P, "a dtype (f32, i32, ...)");
        return false;
    }
    P->p = s + n;
    return true;
}

static bool parse_aval(parser *P, cft_aval *a) {
    memset(a, 0, sizeof *a);
    if (!parse_dtype(P, &a->dtype) || !expect(P, '[', "'[' after the dtype"))
        return false;
    if (accept(P, ']'))
        return true;
    do {
        if (a->ndim == CFT_MAX_NDIM) {
            fail_at(P, P->p, "too many dims", NULL);
            return false;
        }
        const char *at = P->p;
        int64_t d = dim_expr(P);
        if (failed(P))
            return false;
        if (!cft_dim_valid(d)) {
            fail_at(P, at, "a dim that is not a size", NULL);
            return false;
        }
        a->shape[a->ndim++] = d;
    } while (accept(P, ','));
    return expect(P, ']', "',' or ']' in a shape");
}

/* a var name: its key and where it starts (false: error set) */
static bool var_name(parser *P, const char **at, int64_t *key) {
    ws(P);
    *at = P->p;
    *key = var_key(P);
    if (*key < 0)
        expected(P, "a variable name");
    return *key >= 0;
}

/* name ':' aval */
static bool typed_name(parser *P, const char **at, int64_t *key, cft_aval *a) {
    return var_name(P, at, key) && expect(P, ':', "':' and a type after the variable") &&
           parse_aval(P, a);
}

/* name ':' aval, defined in S */
static cft_irvar *parse_decl(parser *P, scope *S) {
    const char *at;
    int64_t key;
    cft_aval a;
    return typed_name(P, &at, &key, &a) ? define(P, S, key, at, &a) : NULL;
}

static cft_irvar *parse_use(parser *P, scope *S) {
    const char *at;
    int64_t key;
    if (!var_name(P, &at, &key))
        return NULL;
    cft_irvar *v = find(S, key);
    if (!v) {
        char nm[MAX_NAME + 1];
        int n = (int)(P->p - at);
        memcpy(nm, at, (size_t)n);
        nm[n] = 0;
        fail_at(P, at, "an undefined variable: ", nm);
    }
    return v;
}

/* ---- parameters ---- */

static cft_ir *parse_ir(parser *P);

const cft_prim *cft__prim_named(const char *s, int n) {
    for (int i = 0; cft__prims[i]; i++)
        if ((int)strlen(cft__prims[i]->name) == n && memcmp(cft__prims[i]->name, s, (size_t)n) == 0)
            return cft__prims[i];
    return NULL;
}

static bool parse_params(parser *P, const cft_prim *pr, cft_params *par) {
    memset(par, 0, sizeof *par);
    bool any = false;
    for (int k = 0; k < CFT_NPARAM; k++)
        any |= pr->pnames[k] != NULL;
    ws(P);
    if (!any)
        return true;
    if (!expect(P, '[', "'[' and the parameters"))
        return false;
    for (int k = 0; k < CFT_NPARAM; k++) {
        const char *nm = pr->pnames[k];
        if (!nm)
            continue;
        bool scalar = nm[0] == '#', sub = nm[0] == '@';
        nm += scalar || sub;
        const char *s;
        int n = word(P, &s);
        if (n != (int)strlen(nm) || memcmp(s, nm, (size_t)n)) {
            char what[64];
            snprintf(what, sizeof what, "parameter '%s' of %s", nm, pr->name);
            expected(P, what);
            return false;
        }
        P->p = s + n;
        if (!expect(P, '=', "'=' after the parameter name"))
            return false;
        ws(P);
        if (sub) {
            bool list = accept(P, '(');
            ws(P);
            while (*P->p == '{') {
                if (par->n[k] == CFT_PARAM_LEN) {
                    fail_at(P, P->p, "too many nested IRs", NULL);
                    return false;
                }
                cft_ir *ir = parse_ir(P);
                if (!ir)
                    return false;
                par->v[k][par->n[k]++] = (int64_t)(uintptr_t)ir;
                if (!list || !accept(P, ','))
                    break;
                ws(P);
            }
            if (list && !expect(P, ')', "')' after the nested IRs"))
                return false;
        } else if (strcmp(nm, "dtype") == 0) {
            cft_dtype dt;
            if (!parse_dtype(P, &dt))
                return false;
            par->n[k] = 1, par->v[k][0] = dt;
        } else if (scalar) {
            par->v[k][0] = dim_expr(P);
            par->n[k] = 1;
        } else {
            if (!expect(P, '(', "'(' and a list of values"))
                return false;
            if (!accept(P, ')')) {
                do {
                    if (par->n[k] == CFT_PARAM_LEN) {
                        fail_at(P, P->p, "too many values in a parameter", NULL);
                        return false;
                    }
                    par->v[k][par->n[k]++] = dim_expr(P);
                } while (!failed(P) && accept(P, ','));
                if (!expect(P, ')', "',' or ')' in a list of values"))
                    return false;
            }
        }
        if (failed(P))
            return false;
    }
    return expect(P, ']', "']' after the parameters");
}

/* ---- equations and IRs ---- */

/* an output declared before '=' (defined once the inputs are read) */
typedef struct {
    const char *at;
    int64_t key;
    cft_aval aval;
} out_decl;

static bool parse_eqn(parser *P, scope *S, cft_eqn *q) {
    /* on the heap, growing: the parser recurses through nested IRs */
    int nout = 0, ocap = 4;
    out_decl *od = CFT_NEWN(out_decl, ocap);
    /* outputs are defined after the inputs are read (a var cannot feed the
     * equation that defines it) */
    do {
        if (nout == MAX_OUTS) {
            fail_at(P, P->p, "too many outputs", NULL);
            return false;
        }
        if (nout == ocap) {
            ocap *= 2;
            out_decl *g = CFT_NEWN(out_decl, ocap);
            memcpy(g, od, sizeof *od * (size_t)nout);
            od = g;
        }
        if (!typed_name(P, &od[nout].at, &od[nout].key, &od[nout].aval))
            return false;
        nout++;
        ws(P);
    } while (*P->p != '=');
    P->p++;
    const char *s;
    int n = word(P, &s);
    const cft_prim *pr = n ? cft__prim_named(s, n) : NULL;
    if (!pr) {
        char nm[40];
        snprintf(nm, sizeof nm, "%.*s", n < 32 ? n : 32, s);
        if (n)
            fail_at(P, s,
                    "unknown primitive (or one whose parameters name state of the process "
                    "that traced it, which cannot be parsed): ",
                    nm);
        else
            expected(P, "a primitive name");
        return false;
    }
    P->p = s + n;
    memset(q, 0, sizeof *q);
    q->prim = pr;
    if (!parse_params(P, pr, &q->params))
        return false;
    cft_irvar **in = CFT_NEWN(cft_irvar *, 8);
    int nin = 0, cap = 8;
    for (;;) {
        ws(P);
        if (peek_kw(P, "in", '(') || !(*P->p >= 'a' && *P->p <= 'z'))
            break;
        const char *w;
        int wn = word(P, &w);
        const char *c = w + wn;
        while (*c == ' ' || *c == '\n' || *c == '\t' || *c == '\r')
            c++;
        if (*c == ':') /* the next equation's first output */
            break;
        if (nin == MAX_INS) {
            fail_at(P, P->p, "too many inputs", NULL);
            return false;
        }
        if (nin == cap) {
            cap *= 2;
            cft_irvar **g = CFT_NEWN(cft_irvar *, cap);
            memcpy(g, in, sizeof *in * (size_t)nin);
            in = g;
        }
        if (!(in[nin++] = parse_use(P, S)))
            return false;
    }
    if (pr->nin >= 0 && nin != pr->nin) {
        char m[80];
        snprintf(m, sizeof m, "%s takes %d inputs, the text gives %d", pr->name, pr->nin, nin);
        fail_at(P, s, m, NULL);
        return false;
    }
    int want = cft__nout(pr, &q->params, nin);
    if (want != nout) {
        char m[80];
        snprintf(m, sizeof m, "%s has %d outputs here, the text declares %d", pr->name, want, nout);
        fail_at(P, s, m, NULL);
        return false;
    }
    q->nin = nin, q->nout = nout;
    q->in = in;
    q->out = CFT_NEWN(cft_irvar *, nout + 1);
    for (int i = 0; i < nout; i++)
        if (!(q->out[i] = define(P, S, od[i].key, od[i].at, &od[i].aval)))
            return false;
    return true;
}

static cft_array *const_value(parser *P, const char *at, const cft_aval *a) {
    if (P->used >= P->nconst) {
        char m[80];
        snprintf(m, sizeof m, "constant %d has no value (%d given)", P->used, P->nconst);
        fail_at(P, at, m, NULL);
        return NULL;
    }
    cft_array *x = P->consts[P->used];
    char b1[96], b2[96];
    if (!x || cft_failed(x) || !cft__aval_eq(&x->aval, a)) {
        char m[240];
        snprintf(m, sizeof m, "constant %d is declared %s, its value is %s", P->used,
                 cft_aval_str(a, b1),
                 !x              ? "NULL"
                 : cft_failed(x) ? "an error"
                                 : cft_aval_str(&x->aval, b2));
        fail_at(P, at, m, NULL);
        return NULL;
    }
    P->used++;
    return x;
}

static cft_ir *parse_ir(parser *P) {
    if (++P->depth > MAX_DEPTH) {
        fail_at(P, P->p, "IRs nested too deeply", NULL);
        return NULL;
    }
    scope S = {CFT_NEWN(slot, 64), 64, 0, 0};
    if (!expect(P, '{', "'{' opening an IR") || !peek_kw(P, "lambda", 0)) {
        expected(P, "'lambda'");
        return NULL;
    }
    const char *w;
    P->p += word(P, &w);
    /* declarations up to ';' (constants) or '.' (inputs) */
    int nd = 0, cap = 8, nconst = 0;
    bool semi = false;
    cft_irvar **decl = CFT_NEWN(cft_irvar *, cap);
    const char **decl_at = CFT_NEWN(const char *, cap);
    for (;;) {
        ws(P);
        if (*P->p == ';' && !semi) {
            semi = true;
            nconst = nd;
            P->p++;
            continue;
        }
        if (*P->p == '.') {
            P->p++;
            break;
        }
        if (nd == cap) {
            cap *= 2;
            cft_irvar **g = CFT_NEWN(cft_irvar *, cap);
            const char **ga = CFT_NEWN(const char *, cap);
            memcpy(g, decl, sizeof *g * (size_t)nd);
            memcpy(ga, decl_at, sizeof *ga * (size_t)nd);
            decl = g, decl_at = ga;
        }
        decl_at[nd] = P->p;
        if (!(decl[nd] = parse_decl(P, &S)))
            return NULL;
        nd++;
    }
    cft_ir *ir = CFT_NEW(cft_ir);
    ir->nconst = nconst;
    ir->nin = nd - nconst;
    ir->constvars = decl;
    ir->invars = decl + nconst;
    ir->constvals = CFT_NEWN(cft_array *, nconst + 1);
    for (int i = 0; i < nconst; i++)
        if (!(ir->constvals[i] = const_value(P, decl_at[i], &decl[i]->aval)))
            return NULL;
    if (peek_kw(P, "let", 0))
        P->p += word(P, &w);
    int ecap = 16;
    ir->eqns = CFT_NEWN(cft_eqn, ecap);
    for (;;) {
        ws(P);
        if (peek_kw(P, "in", '('))
            break;
        if (!(*P->p >= 'a' && *P->p <= 'z')) {
            expected(P, "an equation or 'in'");
            return NULL;
        }
        if (ir->neqn == ecap) {
            ecap *= 2;
            cft_eqn *g = CFT_NEWN(cft_eqn, ecap);
            memcpy(g, ir->eqns, sizeof *g * (size_t)ir->neqn);
            ir->eqns = g;
        }
        if (!parse_eqn(P, &S, &ir->eqns[ir->neqn]))
            return NULL;
        ir->neqn++;
    }
    P->p += word(P, &w);
    expect(P, '(', "'(' and the outputs");
    int ocap = 8;
    ir->outvars = CFT_NEWN(cft_irvar *, ocap);
    if (!failed(P) && !accept(P, ')')) {
        do {
            if (ir->nout == ocap) {
                ocap *= 2;
                cft_irvar **g = CFT_NEWN(cft_irvar *, ocap);
                memcpy(g, ir->outvars, sizeof *g * (size_t)ir->nout);
                ir->outvars = g;
            }
            if (!(ir->outvars[ir->nout++] = parse_use(P, &S)))
                return NULL;
        } while (accept(P, ','));
        expect(P, ')', "',' or ')' in the outputs");
    }
    if (failed(P) || !expect(P, '}', "'}' closing the IR"))
        return NULL;
    P->depth--;
    ir = cft__ir_finish(ir);
    if (cft_ir_typecheck(ir) != CFT_OK) {
        int line, col;
        pos_of(P, P->p, &line, &col);
        P->err =
            cft__fail(CFT_E_ARG, "cft_ir_parse: the IR ending at line %d does not typecheck: %s",
                      line, cft_last_error_message());
        return NULL;
    }
    return ir;
}

cft_status cft_ir_parse(const char *text, int nconst, cft_array *const *consts, cft_ir **out) {
    CFT_API("cft_ir_parse");
    if (out)
        *out = NULL;
    if (!text || !out || nconst < 0 || (nconst > 0 && !consts))
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_ir_parse: text, out and (for %d constants) consts "
                                       "must not be NULL",
                                       nconst));
    parser P = {text, text, NULL, consts, nconst, 0, 0, 0};
    bool was = cft__ir_roundtrip_suspend();
    cft__dim_txn_begin(); /* a text that fails leaves no symbol names behind */
    cft_ir *ir = parse_ir(&P);
    cft__ir_roundtrip_restore(was);
    if (ir) {
        ws(&P);
        if (*P.p)
            expected(&P, "the end of the text after the IR");
        else if (P.used != nconst)
            P.err = cft__fail(CFT_E_ARG, "cft_ir_parse: the text has %d constants, %d values given",
                              P.used, nconst);
    }
    cft__dim_txn_end(!P.err && ir);
    if (P.err || !ir)
        return cft__set_last(P.err ? P.err : cft__fail(CFT_E_ARG, "cft_ir_parse: no IR"));
    *out = ir;
    return CFT_OK;
}

/* constants in text order: the IR's own, then each equation's nested IRs' */
static int consts_of(const cft_ir *ir, cft_array **out, int k) {
    for (int i = 0; i < ir->nconst; i++, k++)
        if (out)
            out[k] = ir->constvals ? ir->constvals[i] : NULL;
    for (int e = 0; e < ir->neqn; e++) {
        const cft_eqn *q = &ir->eqns[e];
        for (int s = 0; s < CFT_NPARAM; s++)
            if (q->prim->pnames[s] && q->prim->pnames[s][0] == '@')
                for (int b = 0; b < q->params.n[s]; b++)
                    k = consts_of((const cft_ir *)(uintptr_t)q->params.v[s][b], out, k);
    }
    return k;
}

int cft_ir_consts(const cft_ir *ir, cft_array **out) {
    CFT_API("cft_ir_consts");
    return ir ? consts_of(ir, out, 0) : 0;
}
