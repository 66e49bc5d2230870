/* remote_module.c: RemoteModule, distributed autograd contexts and the
 * distributed optimizer (torch.distributed.nn.RemoteModule,
 * torch.distributed.autograd, DistributedOptimizer).
 *
 * Owner side: modules registered by name (on every worker, like
 * functions); an instance is made on its owner from a key and keeps its
 * parameters (and optimizer state) there. It is served as functions of
 * reserved names: "__new.<module>" (key -> instance index),
 * "__mod.<owner>.<i>" (x -> forward; on other workers, the same module with
 * parameters of the same shapes stands in for shapes), "__p.<i>" (-> parameters), "__g.<i>" (-> its
 * gradients in the caller's context), "__step.<i>" (optimizer fields -> step), and
 * "__drop" (forget the context). A call carries the caller's context id;
 * the backward of a forward ("vjp/__mod.<owner>.<i>") run within a context returns
 * the input's cotangent and adds the parameters' gradients to that context
 * on the owner, where the optimizer step finds them.
 *
 * Caller side: the handles, cft_dist_autograd_grad (cft_grad with the
 * context set for the remote calls it makes) and the optimizer. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "cft/ops.h"
#include "cft/random.h"
#include "core/error.h"
#include "core/mem.h"
#include "dist/rpc/rpc.h"
#include "trace/fn.h"

#define MAX_MODULES 64
#define MAX_INSTANCES 1024

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char name[RPC_MAX_NAME + 1];
    const cft_module *m;
} modules[MAX_MODULES];
static int nmodules;

typedef struct {
    const cft_module *m;
    cft_tree *params, *opt_state;
    int64_t step;
    int np;
} instance;
static instance *inst[MAX_INSTANCES]; /* static roots for the GC */
static int ninst;

typedef struct grads {
    int64_t ctx;
    int idx;
    cft_tree *g;
    struct grads *next;
} grads;
static grads *ctx_grads;

static _Thread_local int64_t serving_ctx = -1; /* the context of the call being served */

/* caller side: instances of other workers known here (for shapes: the
 * module with parameters of the right shapes) */
typedef struct proxy {
    int owner;
    int64_t idx;
    const cft_module *m;
    cft_tree *like;
    struct proxy *next;
} proxy;
static proxy *proxies;

static proxy *proxy_of(int owner, int64_t idx) {
    pthread_mutex_lock(&mu);
    proxy *p = proxies;
    while (p && (p->owner != owner || p->idx != idx))
        p = p->next;
    pthread_mutex_unlock(&mu);
    return p;
}

/* "<owner>.<idx>" at s: true and both set when well formed */
static bool parse_ref(const char *s, int *owner, int64_t *idx) {
    char *end;
    long long o = strtoll(s, &end, 10);
    if (end == s || *end != '.' || o < 0 || o >= cft_rpc_num_workers())
        return false;
    const char *t = end + 1;
    long long i = strtoll(t, &end, 10);
    if (end == t || *end || i < 0)
        return false;
    *owner = (int)o, *idx = i;
    return true;
}

cft_status cft_rpc_register_module(const char *name, const cft_module *m) {
    CFT_API("cft_rpc_register_module");
    if (!name || !m || !*name || strlen(name) > 64 || strpbrk(name, "/:,"))
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_rpc_register_module: needs a module and "
                                                  "a name of 1 to 64 bytes without / : ,"));
    pthread_mutex_lock(&mu);
    int i = 0;
    while (i < nmodules && strcmp(modules[i].name, name) != 0)
        i++;
    if (i == MAX_MODULES) {
        pthread_mutex_unlock(&mu);
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_rpc_register_module: more than %d", MAX_MODULES));
    }
    snprintf(modules[i].name, sizeof modules[i].name, "%s", name);
    modules[i].m = m;
    if (i == nmodules)
        nmodules++;
    pthread_mutex_unlock(&mu);
    return CFT_OK;
}

static const cft_module *module_named(const char *name) {
    const cft_module *m = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nmodules && !m; i++)
        if (strcmp(modules[i].name, name) == 0)
            m = modules[i].m;
    pthread_mutex_unlock(&mu);
    return m;
}

/* instance i, or NULL */
static instance *instance_at(int64_t i) {
    pthread_mutex_lock(&mu);
    instance *r = i >= 0 && i < ninst ? inst[i] : NULL;
    pthread_mutex_unlock(&mu);
    return r;
}

/* the context's gradients of instance idx (a slot to fill if absent) */
static grads *grads_of(int64_t ctx, int idx, bool make) {
    for (grads *g = ctx_grads; g; g = g->next)
        if (g->ctx == ctx && g->idx == idx)
            return g;
    if (!make)
        return NULL;
    grads *g = CFT_NEW(grads);
    if (g) {
        g->ctx = ctx, g->idx = idx;
        g->next = ctx_grads;
        ctx_grads = g;
    }
    return g;
}

/* ---- the service's functions (owner side) ---- */

typedef struct {
    int kind; /* 0 new, 1 forward, 2 params, 3 grads, 4 step, 5 drop, 6 one param */
    int64_t idx;
    int k; /* kind 6: which parameter */
    const cft_module *m;
    proxy *px; /* forward of another worker's instance: shapes only */
} service;

static cft_status fail(int nout, cft_array **out, const char *fmt, const char *what) {
    return cft__fail_outs(cft__fail(CFT_E_ARG, fmt, what), nout, out);
}

static cft_array *zeros_like_cb(void *env, const char *name, cft_array *x) {
    (void)env, (void)name;
    return cft_zeros_like(x);
}
static cft_array *add_cb(void *env, const char *name, cft_array *a, cft_array *b) {
    (void)env, (void)name;
    return cft_add(a, b);
}

static cft_status serve_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    service *s = env;
    (void)nin;
    if (s->px) { /* traced here for shapes; never run (the owner runs it) */
        out[0] = cft_module_apply(s->px->m, s->px->like, NULL, in[0], false, NULL, NULL);
        return cft_failed(out[0]) ? cft_last_error() : CFT_OK;
    }
    instance *it = s->kind ? instance_at(s->idx) : NULL;
    if (s->kind && s->kind != 5 && !it)
        return fail(nout, out, "remote module: %s", "no such instance here");
    switch (s->kind) {
    case 0: { /* new */
        instance *n = CFT_NEW(instance);
        if (!n)
            return cft__fail_outs(cft__oom(), nout, out);
        n->m = s->m;
        n->params = cft_module_init(s->m, in[0], NULL);
        if (cft_tree_failed(n->params))
            return cft__fail_outs(cft_tree_error(n->params), nout, out);
        n->np = cft_tree_size(n->params);
        pthread_mutex_lock(&mu);
        int64_t i = ninst < MAX_INSTANCES ? ninst : -1;
        if (i >= 0)
            inst[ninst++] = n;
        pthread_mutex_unlock(&mu);
        if (i < 0)
            return fail(nout, out, "remote module: %s", "too many instances on this worker");
        out[0] = cft_scalar((double)i, CFT_I64);
        return CFT_OK;
    }
    case 1: /* forward with the current parameters */
        out[0] = cft_module_apply(it->m, it->params, NULL, in[0], false, NULL, NULL);
        return cft_failed(out[0]) ? cft_last_error() : CFT_OK;
    case 2: /* parameters */
        return cft_tree_flatten(it->params, out);
    case 3: { /* gradients in the context (zeros if none) */
        pthread_mutex_lock(&mu);
        grads *g = grads_of(serving_ctx, (int)s->idx, false);
        cft_tree *t = g ? g->g : NULL;
        pthread_mutex_unlock(&mu);
        return cft_tree_flatten(t ? t : cft_tree_map(it->params, zeros_like_cb, NULL), out);
    }
    case 4: { /* an optimizer step with the context's gradients */
        double f[12];
        if (cft_array_size(in[0]) != 12 || cft_copy_to(in[0], CFT_F64, f) != CFT_OK)
            return fail(nout, out, "remote module: %s", "bad optimizer fields");
        cft_optim o = {.kind = (cft_optim_kind)f[0],
                       .lr = f[1],
                       .weight_decay = f[2],
                       .momentum = f[3],
                       .dampening = f[4],
                       .nesterov = f[5] != 0,
                       .beta1 = f[6],
                       .beta2 = f[7],
                       .eps = f[8],
                       .amsgrad = f[9] != 0,
                       .alpha = f[10],
                       .centered = f[11] != 0};
        if (o.kind > CFT_OPTIM_RMSPROP)
            return fail(nout, out, "remote module: %s", "unknown optimizer");
        pthread_mutex_lock(&mu);
        grads *g = grads_of(serving_ctx, (int)s->idx, false);
        cft_tree *gt = g ? g->g : NULL;
        if (g) /* used once */
            g->g = NULL;
        pthread_mutex_unlock(&mu);
        if (gt) {
            if (!it->opt_state)
                it->opt_state = cft_optim_init(&o, it->params);
            it->step++;
            cft_tree *np, *ns;
            cft_status st = cft_optim_update(&o, gt, it->opt_state, it->params,
                                             cft_scalar((double)it->step, CFT_F32), NULL, &np, &ns);
            if (st != CFT_OK)
                return cft__fail_outs(cft_tree_error(np), nout, out);
            it->params = np, it->opt_state = ns;
        }
        out[0] = cft_scalar((double)it->step, CFT_I64);
        return CFT_OK;
    }
    case 6: /* parameter k (a value for an RRef: cft_remote_module_parameter_rrefs) */
        out[0] = cft_tree_at(it->params, s->k);
        return cft_failed(out[0]) ? cft__set_last(out[0]) : CFT_OK;
    default: /* drop the context's gradients */
        pthread_mutex_lock(&mu);
        for (grads **pp = &ctx_grads; *pp;)
            if ((*pp)->ctx == serving_ctx)
                *pp = (*pp)->next;
            else
                pp = &(*pp)->next;
        pthread_mutex_unlock(&mu);
        out[0] = cft_scalar(0, CFT_I64);
        return CFT_OK;
    }
}

/* (params..., x) -> forward: what the backward differentiates */
static cft_status full_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    instance *it = env;
    (void)nout;
    cft_tree *p = cft_tree_unflatten(it->params, in);
    out[0] = cft_module_apply(it->m, p, NULL, in[nin - 1], false, NULL, NULL);
    return cft_failed(out[0]) ? cft_last_error() : CFT_OK;
}

/* "__new.<module>", "__mod.<i>", ...: the service function, or NULL */
cft_fn *cft__rpc_module_fn(const char *name) {
    static const char *const prefix[] = {"__new.",  "__mod.", "__p.", "__g.",
                                         "__step.", "__drop", "__pk."};
    for (int k = 0; k < 7; k++) {
        size_t n = strlen(prefix[k]);
        if (strncmp(name, prefix[k], n) != 0)
            continue;
        service *s = CFT_NEW(service);
        if (!s)
            return NULL;
        s->kind = k;
        int nin = k == 0 || k == 1 || k == 4, nout = 1;
        if (k == 0) {
            if (!(s->m = module_named(name + n)))
                return NULL;
        } else if (k == 1) { /* "__mod.<owner>.<idx>" */
            int owner;
            if (!parse_ref(name + n, &owner, &s->idx))
                return NULL;
            if (owner != cft_rpc_worker_id() && !(s->px = proxy_of(owner, s->idx)))
                return NULL;
            if (!s->px && !instance_at(s->idx))
                return NULL;
        } else if (k == 6) { /* "__pk.<idx>.<k>" */
            char *end, *end2;
            long long i = strtoll(name + n, &end, 10);
            long long j = *end == '.' ? strtoll(end + 1, &end2, 10) : -1;
            instance *it = end == name + n || j < 0 || *end2 ? NULL : instance_at(i);
            if (!it || j >= it->np)
                return NULL;
            s->idx = i, s->k = (int)j;
        } else if (k < 5) {
            char *end;
            long long i = strtoll(name + n, &end, 10);
            instance *it = *end || end == name + n ? NULL : instance_at(i);
            if (!it)
                return NULL;
            s->idx = i;
            if (k == 2 || k == 3)
                nout = it->np;
        } else if (name[n])
            return NULL;
        return cft_fn_uncached(cft_fn_named(cft_fn_new(serve_cb, s, nin, nout), prefix[k]));
    }
    return NULL;
}

cft_status cft__rpc_module_call(const char *spec, int64_t ctx, cft_fn *f, cft_array *const *in,
                                cft_array **out) {
    int64_t old = serving_ctx;
    serving_ctx = ctx;
    cft_status st;
    int owner = -1;
    int64_t i = -1;
    if (!strncmp(spec, "vjp/__mod.", 10) && parse_ref(spec + 10, &owner, &i) &&
        owner == cft_rpc_worker_id() && instance_at(i)) {
        /* the backward of a forward: the input's cotangent back, the
         * parameters' gradients added to the context here */
        instance *it = instance_at(i);
        cft_array *args[RPC_MAX_ARGS + 1], *y[1], *cts[RPC_MAX_ARGS + 1];
        if (it->np + 1 > RPC_MAX_ARGS) {
            serving_ctx = old;
            return cft__fail_outs(
                cft__fail(CFT_E_ARG, "remote module: too many parameters (%d)", it->np), 1, out);
        }
        cft_tree_flatten(it->params, args);
        args[it->np] = in[0];
        cft_fn *pb = NULL;
        st = cft_vjp(cft_fn_new(full_cb, it, it->np + 1, 1), args, y, &pb);
        if (st == CFT_OK)
            st = cft_fn_call(pb, &in[1], cts);
        if (st == CFT_OK) {
            cft_tree *g = cft_tree_unflatten(it->params, cts);
            pthread_mutex_lock(&mu);
            grads *slot = grads_of(ctx, (int)i, true);
            if (slot)
                slot->g = slot->g ? cft_tree_zip_map(slot->g, g, add_cb, NULL) : g;
            pthread_mutex_unlock(&mu);
            out[0] = cts[it->np];
        } else
            out[0] = cft__fail(st, "%s", cft_last_error_message());
    } else
        st = cft_fn_call(f, in, out);
    serving_ctx = old;
    return st;
}

/* ---- caller side ---- */

struct cft_remote_module {
    int owner;
    int64_t idx;
    cft_tree *like; /* names and shapes of the parameters */
    cft_array *err;
};

struct cft_dist_autograd_ctx {
    int64_t id;
};

cft_remote_module *cft_remote_module_new(int to, const char *name, cft_array *key) {
    CFT_API("cft_remote_module_new");
    cft_remote_module *rm = CFT_NEW(cft_remote_module);
    if (!rm)
        return NULL;
    const cft_module *m = name ? module_named(name) : NULL;
    if (!m) {
        rm->err = cft__fail(CFT_E_ARG,
                            "cft_remote_module_new: module '%s' is not registered on this worker "
                            "(register it on every worker)",
                            name ? name : "(null)");
        return rm;
    }
    rm->like = cft_module_init(m, key, NULL); /* here only for names and shapes */
    if (cft_tree_failed(rm->like)) {
        rm->err = cft_tree_error(rm->like);
        return rm;
    }
    char fn[RPC_MAX_NAME + 1];
    snprintf(fn, sizeof fn, "__new.%s", name);
    cft_array *idx[1];
    if (cft_rpc_sync(to, fn, 1, &key, 1, idx) != CFT_OK) {
        rm->err = idx[0];
        return rm;
    }
    return cft_remote_module_attach(to, name, (int64_t)cft_item(idx[0]));
}

cft_remote_module *cft_remote_module_attach(int owner, const char *name, int64_t index) {
    CFT_API("cft_remote_module_attach");
    cft_remote_module *rm = CFT_NEW(cft_remote_module);
    if (!rm)
        return NULL;
    const cft_module *m = name ? module_named(name) : NULL;
    if (!m || owner < 0 || owner >= cft_rpc_num_workers() || index < 0) {
        rm->err = cft__fail(CFT_E_ARG,
                            "cft_remote_module_attach: module '%s' (registered here?) of worker "
                            "%d, instance %lld",
                            name ? name : "(null)", owner, (long long)index);
        return rm;
    }
    rm->like = cft_module_init(m, cft_random_key(0), NULL); /* names and shapes */
    if (cft_tree_failed(rm->like)) {
        rm->err = cft_tree_error(rm->like);
        return rm;
    }
    rm->owner = owner, rm->idx = index;
    proxy *px = CFT_NEW(proxy);
    if (px) {
        px->owner = owner, px->idx = index, px->m = m, px->like = rm->like;
        pthread_mutex_lock(&mu);
        px->next = proxies;
        proxies = px;
        pthread_mutex_unlock(&mu);
    }
    return rm;
}

int64_t cft_remote_module_index(const cft_remote_module *rm) {
    return rm && !rm->err ? rm->idx : -1;
}

/* Within cft_dist_autograd_grad: a zero scalar that the gradient is also
 * taken for. A forward adds it to its input, so the backward reaches every
 * remote module (and accumulates its parameters' gradients on the owner)
 * even when the module's input needs no gradient here. */
static _Thread_local cft_array *grad_token;

cft_status cft_remote_module_forward(cft_remote_module *rm, cft_array *x, cft_array **y) {
    CFT_API("cft_remote_module_forward");
    if (!rm || rm->err) {
        *y = rm ? rm->err : cft__fail(CFT_E_ARG, "cft_remote_module_forward: NULL module");
        return cft__set_last(*y);
    }
    if (grad_token && x && !cft_failed(x))
        x = cft_add(x, cft_astype(grad_token, cft_array_dtype(x)));
    char fn[48];
    snprintf(fn, sizeof fn, "__mod.%d.%lld", rm->owner, (long long)rm->idx);
    return cft_rpc_call(rm->owner, fn, 1, &x, 1, y);
}

int cft_remote_module_owner(const cft_remote_module *rm) {
    return rm && !rm->err ? rm->owner : -1;
}

/* the owner's "__p.<i>" or "__g.<i>" as a tree */
static cft_tree *fetch_tree(cft_remote_module *rm, const char *what, int64_t ctx) {
    if (!rm || rm->err)
        return cft_tree_fail(rm ? rm->err : cft__fail(CFT_E_ARG, "NULL remote module"));
    int n = cft_tree_size(rm->like);
    cft_array **out = CFT_NEWN(cft_array *, n + 1);
    char fn[32];
    snprintf(fn, sizeof fn, "%s%lld", what, (long long)rm->idx);
    int64_t old = cft__rpc_set_context(ctx);
    cft_status st = cft_rpc_sync(rm->owner, fn, 0, NULL, n, out);
    cft__rpc_set_context(old);
    return st == CFT_OK ? cft_tree_unflatten(rm->like, out) : cft_tree_fail(out[0]);
}

cft_status cft_remote_module_parameter_rrefs(cft_remote_module *rm, cft_rref **out) {
    CFT_API("cft_remote_module_parameter_rrefs");
    if (!rm || rm->err || !out)
        return cft__set_last(rm && rm->err ? rm->err
                                           : cft__fail(CFT_E_ARG, "NULL module or output"));
    for (int k = 0; k < cft_tree_size(rm->like); k++) {
        char fn[64];
        snprintf(fn, sizeof fn, "__pk.%lld.%d", (long long)rm->idx, k);
        out[k] = cft_rpc_remote(rm->owner, fn, 0, NULL);
    }
    return CFT_OK;
}

cft_tree *cft_remote_module_parameters(cft_remote_module *rm) {
    CFT_API("cft_remote_module_parameters");
    return fetch_tree(rm, "__p.", -1);
}

cft_dist_autograd_ctx *cft_dist_autograd_ctx_new(void) {
    cft_dist_autograd_ctx *c = CFT_NEW(cft_dist_autograd_ctx);
    if (c)
        c->id = cft__rpc_new_rref_id();
    return c;
}

/* loss(in[0..n)) with grad_token = in[n] while it runs */
static cft_status token_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nout;
    cft_array *saved = grad_token;
    grad_token = in[nin - 1];
    cft_status st = cft_fn_call(env, in, out);
    grad_token = saved;
    return st;
}

cft_status cft_dist_autograd_grad(cft_dist_autograd_ctx *ctx, cft_fn *loss, cft_array *const *in,
                                  const int *argnums, int nargnums, cft_array **grads) {
    CFT_API("cft_dist_autograd_grad");
    if (!ctx || !loss)
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_dist_autograd_grad: NULL context or function"));
    int nin = cft_fn_nin(loss);
    if (nin + 1 > RPC_MAX_ARGS || nargnums < 0 || nargnums > nin)
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_dist_autograd_grad: %d inputs, %d argnums", nin, nargnums));
    int an[RPC_MAX_ARGS + 1];
    int na = nargnums > 0 && argnums ? nargnums : 1;
    for (int i = 0; i < na; i++)
        an[i] = nargnums > 0 && argnums ? argnums[i] : 0;
    an[na] = nin; /* the token */
    cft_array *args[RPC_MAX_ARGS + 1], *g[RPC_MAX_ARGS + 1];
    for (int i = 0; i < nin; i++)
        args[i] = in[i];
    args[nin] = cft_scalar(0, CFT_F32);
    int64_t old = cft__rpc_set_context(ctx->id);
    cft_fn *with_token = cft_fn_new(token_cb, loss, nin + 1, 1);
    cft_status st = cft_fn_call(cft_grad(with_token, an, na + 1), args, g);
    cft__rpc_set_context(old);
    for (int i = 0; i < na; i++)
        grads[i] = g[i];
    return st;
}

cft_tree *cft_dist_autograd_get_gradients(cft_dist_autograd_ctx *ctx, cft_remote_module *rm) {
    CFT_API("cft_dist_autograd_get_gradients");
    if (!ctx)
        return cft_tree_fail(cft__fail(CFT_E_ARG, "NULL context"));
    return fetch_tree(rm, "__g.", ctx->id);
}

cft_status cft_dist_autograd_release(cft_dist_autograd_ctx *ctx) {
    CFT_API("cft_dist_autograd_release");
    if (!ctx)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_dist_autograd_release: NULL context"));
    int n = cft_rpc_num_workers();
    cft_future **fs = CFT_NEWN(cft_future *, n + 1);
    int64_t old = cft__rpc_set_context(ctx->id);
    for (int w = 0; w < n; w++)
        fs[w] = cft_rpc_async(w, "__drop", 0, NULL);
    cft__rpc_set_context(old);
    return cft_future_wait_all(fs, n);
}

struct cft_dist_optimizer {
    cft_optim o;
    int n;
    cft_remote_module **mods;
};

cft_dist_optimizer *cft_dist_optimizer_new(const cft_optim *o, cft_remote_module *const *mods,
                                           int n) {
    cft_dist_optimizer *d = CFT_NEW(cft_dist_optimizer);
    if (!d || !o || n < 0)
        return d;
    d->o = *o;
    d->n = n;
    d->mods = CFT_NEWN(cft_remote_module *, n + 1);
    for (int i = 0; i < n && d->mods; i++)
        d->mods[i] = mods[i];
    return d;
}

cft_status cft_dist_optimizer_step(cft_dist_optimizer *d, cft_dist_autograd_ctx *ctx) {
    CFT_API("cft_dist_optimizer_step");
    if (!d || !ctx || !d->mods)
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_dist_optimizer_step: NULL optimizer or context"));
    const cft_optim *o = &d->o;
    double f[12] = {o->kind,  o->lr,    o->weight_decay, o->momentum, o->dampening, o->nesterov,
                    o->beta1, o->beta2, o->eps,          o->amsgrad,  o->alpha,     o->centered};
    cft_array *fields = cft_from_data(f, CFT_F64, (int64_t[]){12}, 1);
    cft_future **fs = CFT_NEWN(cft_future *, d->n + 1);
    int64_t old = cft__rpc_set_context(ctx->id);
    for (int i = 0; i < d->n; i++) {
        cft_remote_module *rm = d->mods[i];
        char fn[32];
        snprintf(fn, sizeof fn, "__step.%lld", (long long)(rm && !rm->err ? rm->idx : -1));
        fs[i] = rm && !rm->err ? cft_rpc_async(rm->owner, fn, 1, &fields)
                               : cft_rpc_async(-1, fn, 1, &fields);
    }
    cft__rpc_set_context(old);
    return cft_future_wait_all(fs, d->n);
}
