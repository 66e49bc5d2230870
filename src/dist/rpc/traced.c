/* traced.c: remote calls inside traced functions. cft_rpc_call binds the
 * primitive rpc_call, whose target is a spec (wire.h): a registered
 * function under transforms, "op/.../name". Its rules rewrite the spec, and
 * the worker that owns the function runs the transformed function there:
 *
 *   jvp        rpc S (x) -> tangents = rpc "jvp/S" (x, t)     linear in t
 *   transpose  "jvp/S" (x, t) -> ct_t = rpc "vjp/S" (x, ct)   linear in ct
 *              "vjp/S" (x, ct) -> ct_ct = rpc "jvp/S" (x, c)
 *   vmap       rpc S -> rpc "vmap:axes/S", batched along 0
 *
 * so grad, vjp, jvp, vmap and jit of a program that calls remote functions
 * give what the single-process program gives, and compose (vmap of grad:
 * "vmap:../vjp/S"; a second derivative: "jvp/vjp/S"). Nothing is kept on
 * the owner between calls: the backward pass's "vjp/S" recomputes S's
 * forward there (rematerialization), at the cost of one more forward, the
 * same count as keeping residuals after a separate primal call.
 *
 * Shapes come from the same function registered on the calling worker
 * (every worker registers the same functions, as torch.distributed.rpc
 * programs define them in the one script), traced at the input avals. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "core/error.h"
#include "core/mem.h"
#include "dist/rpc/rpc.h"
#include "prims/rules.h"
#include "trace/fn.h"
#include "trace/ir.h"

/* ---- the function of a spec (both sides), cached by spec text ---- */

#define NSPEC 512
static pthread_mutex_t spec_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char text[RPC_MAX_NAME + 1];
    cft_fn *fn; /* NULL until built here */
} specs[NSPEC]; /* static: the GC keeps the functions */
static int nspecs;

/* the id of spec text s (interned; -1 when the table is full) */
static int spec_id(const char *s) {
    pthread_mutex_lock(&spec_mu);
    int i = 0;
    while (i < nspecs && strcmp(specs[i].text, s) != 0)
        i++;
    if (i == nspecs && nspecs < NSPEC)
        snprintf(specs[nspecs++].text, sizeof specs[i].text, "%s", s);
    pthread_mutex_unlock(&spec_mu);
    return i < NSPEC ? i : -1;
}
static const char *spec_text(int id) {
    return specs[id].text;
}

typedef struct {
    cft_fn *inner; /* cft_jvp(g), or g for vjp */
    int n, m;      /* g's inputs and outputs */
} wrap;

/* jvp: (x, t) -> output tangents only (the primal outputs come from the
 * call itself) */
static cft_status jvp_tangents(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    wrap *w = env;
    (void)nin, (void)nout;
    cft_array *all[2 * RPC_MAX_ARGS];
    cft_status st = cft_fn_call(w->inner, in, all);
    for (int j = 0; j < w->m; j++)
        out[j] = all[w->m + j];
    return st;
}
/* vjp: (x, output cotangents) -> input cotangents */
static cft_status vjp_cotangents(void *env, int nin, cft_array *const *in, int nout,
                                 cft_array **out) {
    wrap *w = env;
    (void)nin, (void)nout;
    cft_array *outs[RPC_MAX_ARGS];
    cft_fn *pb = NULL;
    cft_status st = cft_vjp(w->inner, in, outs, &pb);
    if (st != CFT_OK)
        return cft__fail_outs(cft__fail(st, "%s", cft_last_error_message()), w->n, out);
    return cft_fn_call(pb, in + w->n, out);
}

static cft_fn *build(const rpc_spec *sp, int level, char *err, size_t errn) {
    if (level == sp->nops) {
        cft_fn *f = cft__rpc_lookup(sp->fname);
        if (!f)
            snprintf(err, errn, "no function '%s' is registered on worker %d", sp->fname,
                     cft_rpc_worker_id());
        return f;
    }
    cft_fn *g = build(sp, level + 1, err, errn);
    if (!g)
        return NULL;
    int n = cft_fn_nin(g), m = cft_fn_nout(g);
    wrap *w = CFT_NEW(wrap);
    if (!w) {
        snprintf(err, errn, "out of memory");
        return NULL;
    }
    w->n = n, w->m = m;
    cft_fn *f = NULL;
    switch (sp->op[level]) {
    case SPEC_JVP:
        if (2 * n > RPC_MAX_ARGS) {
            snprintf(err, errn, "jvp of a function of %d inputs: too many arguments", n);
            return NULL;
        }
        w->inner = cft_jvp(g);
        f = cft_fn_named(cft_fn_new(jvp_tangents, w, 2 * n, m), "rpc_jvp");
        break;
    case SPEC_VJP:
        if (n + m > RPC_MAX_ARGS) {
            snprintf(err, errn, "vjp of a function of %d inputs and %d outputs: too many", n, m);
            return NULL;
        }
        w->inner = g;
        f = cft_fn_named(cft_fn_new(vjp_cotangents, w, n + m, n), "rpc_vjp");
        break;
    default: /* SPEC_VMAP */
        if (sp->naxes[level] != n) {
            snprintf(err, errn, "vmap with %d axes of a function of %d inputs", sp->naxes[level],
                     n);
            return NULL;
        }
        int axes[RPC_MAX_ARGS];
        for (int i = 0; i < n; i++)
            axes[i] = sp->axes[level][i] < 0 ? CFT_NOT_BATCHED : sp->axes[level][i];
        f = cft_vmap(g, axes, NULL);
        break;
    }
    if (cft_fn_failed(f)) {
        snprintf(err, errn, "%s", cft_fn_error_message(f));
        return NULL;
    }
    if (!strncmp(sp->fname, "__", 2)) { /* a remote module: its parameters change */
        f = cft_fn_uncached(f);
        if (w->inner)
            w->inner = cft_fn_uncached(w->inner);
    }
    return f;
}

cft_fn *cft__rpc_spec_fn(const char *text, char *err, size_t errn) {
    rpc_spec sp;
    cft_array *e = cft__rpc_parse_spec(text, &sp);
    if (e) {
        snprintf(err, errn, "%s", cft_error_message(e));
        return NULL;
    }
    int id = spec_id(text);
    pthread_mutex_lock(&spec_mu);
    cft_fn *f = id >= 0 ? specs[id].fn : NULL;
    pthread_mutex_unlock(&spec_mu);
    if (f)
        return f;
    f = build(&sp, 0, err, errn);
    if (f && id >= 0) {
        pthread_mutex_lock(&spec_mu);
        specs[id].fn = f;
        pthread_mutex_unlock(&spec_mu);
    }
    return f;
}

void cft__rpc_spec_forget(void) {
    pthread_mutex_lock(&spec_mu);
    for (int i = 0; i < nspecs; i++)
        specs[i].fn = NULL;
    pthread_mutex_unlock(&spec_mu);
}

/* ---- the primitive ----
 * params: slot 0 worker, 1 spec id, 2 nout, 3 nprimal (inputs before the
 * linear ones of a jvp/vjp spec; all inputs otherwise) */

extern const cft_prim cft_p_rpc_call;

static int rpc_nout(const cft_params *p, int nin) {
    (void)nin;
    return (int)p->v[2][0];
}

static cft_array *rpc_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    char err[512];
    const char *text = spec_text((int)p->v[1][0]);
    cft_fn *f = cft__rpc_spec_fn(text, err, sizeof err);
    if (!f)
        return cft__fail(CFT_E_ARG,
                         "rpc_call '%s': %s (shapes are computed on the calling worker: register "
                         "the function there too)",
                         text, err);
    if (cft_fn_nin(f) != nin || cft_fn_nout(f) != (int)p->v[2][0])
        return cft__fail(CFT_E_ARG,
                         "rpc_call '%s': takes %d inputs and gives %d outputs, called "
                         "with %d and %d",
                         text, cft_fn_nin(f), cft_fn_nout(f), nin, (int)p->v[2][0]);
    cft_ir *ir = cft_make_ir(f, in);
    if (!ir)
        return cft__fail(cft_last_error(), "rpc_call '%s': %s", text, cft_last_error_message());
    for (int j = 0; j < ir->nout; j++)
        out[j] = ir->outvars[j]->aval;
    return NULL;
}

static cft_array *rpc_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    int nout = (int)p->v[2][0];
    cft_status st = cft_rpc_sync((int)p->v[0][0], spec_text((int)p->v[1][0]), nin, x, nout, y);
    return st == CFT_OK ? NULL : y[0];
}

/* bind rpc_call with spec `text` (a new spec id) on worker `to` */
static cft_array *bind_spec(int to, const char *text, int nprimal, int nin, cft_array *const *in,
                            int nout, cft_array **out) {
    if (strlen(text) > RPC_MAX_NAME)
        return cft__fail(CFT_E_ARG,
                         "rpc_call: the transformed call '%.60s...' is longer than %d "
                         "bytes (too many nested transforms)",
                         text, RPC_MAX_NAME);
    int id = spec_id(text);
    if (id < 0)
        return cft__fail(CFT_E_ARG, "rpc_call: more than %d distinct remote calls", NSPEC);
    cft_params q = {0};
    cft__param_set1(&q, 0, to);
    cft__param_set1(&q, 1, id);
    cft__param_set1(&q, 2, nout);
    cft__param_set1(&q, 3, nprimal);
    return cft__bind(&cft_p_rpc_call, &q, nin, in, nout, out);
}

static cft_array *rpc_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)y;
    if (2 * nin > RPC_MAX_ARGS)
        return cft__fail(CFT_E_ARG, "rpc_call: jvp of a call of %d inputs: too many", nin);
    char text[2 * RPC_MAX_NAME];
    snprintf(text, sizeof text, "jvp/%s", spec_text((int)p->v[1][0]));
    cft_array *in[2 * RPC_MAX_ARGS];
    for (int i = 0; i < nin; i++) {
        in[i] = x[i];
        in[nin + i] = cft__inst(t[i], &x[i]->aval);
    }
    return bind_spec((int)p->v[0][0], text, nin, 2 * nin, in, (int)p->v[2][0], ty);
}

static cft_array *rpc_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    const char *text = spec_text((int)p->v[1][0]);
    int np = (int)p->v[3][0], nout = (int)p->v[2][0];
    bool jvp = !strncmp(text, "jvp/", 4), vjp = !strncmp(text, "vjp/", 4);
    if (!jvp && !vjp)
        return cft__fail(CFT_E_TRACE, "rpc_call '%s': not linear in any input (no transpose)",
                         text);
    for (int i = 0; i < np; i++)
        if (!x[i])
            return cft__fail(CFT_E_TRACE,
                             "rpc_call '%s': transposed with respect to its primal input %d "
                             "(the result is not linear in it)",
                             text, i);
    char t2[2 * RPC_MAX_NAME];
    snprintf(t2, sizeof t2, "%s/%s", jvp ? "vjp" : "jvp", text + 4);
    cft_array *args[2 * RPC_MAX_ARGS];
    for (int i = 0; i < np; i++)
        args[i] = x[i];
    for (int j = 0; j < nout; j++) { /* the output cotangents (zeros if NULL) */
        cft_aval a;
        if (ct[j])
            a = ct[j]->aval;
        else if (jvp) /* jvp/S's outputs: S's output tangents; take the aval from a trace */
            return cft__fail(CFT_E_TRACE, "rpc_call '%s': a zero cotangent", text);
        else
            a = in[j]; /* vjp/S's outputs are cotangents of S's inputs x */
        args[np + j] = cft__inst(ct[j], &a);
    }
    /* the result: cotangents of the linear inputs (nin - np of them) */
    cft_array *res[RPC_MAX_ARGS];
    cft_array *e = bind_spec((int)p->v[0][0], t2, np, np + nout, args, nin - np, res);
    if (e)
        return e;
    for (int i = 0; i < nin; i++)
        ct_in[i] = i < np ? NULL : res[i - np];
    return NULL;
}

static cft_array *rpc_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)size;
    char text[2 * RPC_MAX_NAME];
    int k = snprintf(text, sizeof text, "vmap:");
    for (int i = 0; i < nin && k < (int)sizeof text - 8; i++)
        k += snprintf(text + k, sizeof text - (size_t)k, "%s%d", i ? "," : "",
                      bdim[i] < 0 ? -1 : bdim[i]);
    snprintf(text + k, sizeof text - (size_t)k, "/%s", spec_text((int)p->v[1][0]));
    int nout = (int)p->v[2][0];
    /* a batched jvp/vjp spec is no longer linear in the transposer's sense:
     * every input counts as primal */
    cft_array *e = bind_spec((int)p->v[0][0], text, nin, nin, x, nout, y);
    for (int j = 0; j < nout; j++)
        ybdim[j] = 0;
    return e;
}

const cft_prim cft_p_rpc_call = {
    .name = "rpc_call",
    .nin = -1,
    .nout = -1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"worker", "spec", "nout", "nprimal"},
    .shape = rpc_shape,
    .impl = rpc_impl,
    .jvp = rpc_jvp,
    .transpose = rpc_transpose,
    .vmap = rpc_vmap,
    .nout_of = rpc_nout,
};

cft_status cft_rpc_call(int to, const char *name, int nin, cft_array *const *in, int nout,
                        cft_array **out) {
    CFT_API("cft_rpc_call");
    cft_array *e = NULL;
    if (!name || !*name || strchr(name, '/') || strlen(name) > RPC_MAX_NAME)
        e = cft__fail(CFT_E_ARG, "cft_rpc_call: a registered function's name (no '/')");
    else if (to < 0 || to >= cft_rpc_num_workers())
        e = cft__fail(CFT_E_ARG, "cft_rpc_call: worker %d does not exist (%d workers)", to,
                      cft_rpc_num_workers());
    else if (nin < 0 || nin > RPC_MAX_ARGS || nout < 1 || nout > RPC_MAX_ARGS || (nin && !in) ||
             !out)
        e = cft__fail(CFT_E_ARG, "cft_rpc_call: %d inputs and %d outputs (1 to %d)", nin, nout,
                      RPC_MAX_ARGS);
    for (int i = 0; !e && i < nin; i++)
        if (!in[i])
            e = cft__fail(CFT_E_ARG, "cft_rpc_call: input %d is NULL", i);
    if (!e)
        e = bind_spec(to, name, nin, nin, in, nout, out);
    if (e) {
        for (int j = 0; out && j < nout && j < RPC_MAX_ARGS; j++)
            out[j] = e;
        return cft__set_last(e);
    }
    return CFT_OK;
}
