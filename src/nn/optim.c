/* optim.c: optimizers as pure functions over parameter trees (SGD with
 * momentum / Nesterov / weight decay, Adam, AdamW, RMSprop), following
 * PyTorch's update equations and state buffer names, and gradient clipping
 * by global norm. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "nn/nn_internal.h"

cft_optim cft_sgd(double lr, double momentum, double weight_decay, bool nesterov) {
    CFT_API("cft_sgd");
    return (cft_optim){.kind = CFT_OPTIM_SGD,
                       .lr = lr,
                       .momentum = momentum,
                       .weight_decay = weight_decay,
                       .nesterov = nesterov};
}

cft_optim cft_adam(double lr) {
    CFT_API("cft_adam");
    return (cft_optim){.kind = CFT_OPTIM_ADAM, .lr = lr, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

cft_optim cft_adamw(double lr, double weight_decay) {
    CFT_API("cft_adamw");
    return (cft_optim){.kind = CFT_OPTIM_ADAMW,
                       .lr = lr,
                       .beta1 = 0.9,
                       .beta2 = 0.999,
                       .eps = 1e-8,
                       .weight_decay = weight_decay};
}

cft_optim cft_rmsprop(double lr) {
    CFT_API("cft_rmsprop");
    return (cft_optim){.kind = CFT_OPTIM_RMSPROP, .lr = lr, .alpha = 0.99, .eps = 1e-8};
}

/* the state buffers of o, in order; returns their number */
static int buffers(const cft_optim *o, const char **names) {
    int n = 0;
    switch (o->kind) {
    case CFT_OPTIM_SGD:
        if (o->momentum != 0)
            names[n++] = "momentum_buffer";
        break;
    case CFT_OPTIM_ADAM:
    case CFT_OPTIM_ADAMW:
        names[n++] = "exp_avg";
        names[n++] = "exp_avg_sq";
        if (o->amsgrad)
            names[n++] = "max_exp_avg_sq";
        break;
    case CFT_OPTIM_RMSPROP:
        names[n++] = "square_avg";
        if (o->momentum > 0)
            names[n++] = "momentum_buffer";
        if (o->centered)
            names[n++] = "grad_avg";
        break;
    }
    return n;
}

static cft_array *check_optim(const char *op, const cft_optim *o) {
    if (!o)
        return cft__fail(CFT_E_ARG, "%s: NULL optimizer", op);
    bool ok = (unsigned)o->kind <= CFT_OPTIM_RMSPROP && o->lr >= 0 && o->weight_decay >= 0 &&
              o->momentum >= 0;
    if (ok && o->kind == CFT_OPTIM_SGD)
        ok = !o->nesterov || (o->momentum > 0 && o->dampening == 0);
    if (ok && (o->kind == CFT_OPTIM_ADAM || o->kind == CFT_OPTIM_ADAMW))
        ok = o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1 && o->eps >= 0;
    if (ok && o->kind == CFT_OPTIM_RMSPROP)
        ok = o->alpha >= 0 && o->eps >= 0;
    if (!ok)
        return cft__fail(CFT_E_ARG,
                         "%s: bad hyperparameters (kind %d, lr %g; Nesterov needs momentum > 0 and "
                         "dampening 0)",
                         op, (int)o->kind, o->lr);
    return NULL;
}

cft_tree *cft_optim_init(const cft_optim *o, const cft_tree *params) {
    CFT_API("cft_optim_init");
    cft_array *e = check_optim("cft_optim_init", o);
    if (!e && !params)
        e = cft__fail(CFT_E_ARG, "cft_optim_init: NULL params");
    if (!e && params->err)
        e = params->err;
    if (e)
        return cft__tree_err(e);
    const char *bufs[3];
    int nb = buffers(o, bufs), n = params->n;
    cft_tree *s = cft__tree_alloc(nb * n);
    if (s->err)
        return s;
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < n; i++) {
            s->names[b * n + i] = cft__nn_join(bufs[b], params->names[i]);
            s->xs[b * n + i] = cft_zeros_like(params->xs[i]);
            if (!s->names[b * n + i])
                return cft__tree_err(cft__oom());
            if (cft_failed(s->xs[b * n + i]))
                return cft__tree_err(s->xs[b * n + i]);
        }
    return s;
}

/* hyperparameter scalars in a leaf's dtype */
typedef struct {
    cft_array *lr, *step;
} step_consts;

static cft_array *sc(cft_array *p, double v) {
    return cft__nn_sc(p, v);
}

/* one parameter's update: p, g, buffers buf[nb] -> new p, new buffers */
static cft_array *update_one(const cft_optim *o, cft_array *p, cft_array *g, cft_array **buf,
                             const step_consts *k) {
    cft_dtype dt = cft_array_dtype(p);
    cft_array *lr = cft_astype(k->lr, dt), *t = cft_astype(k->step, dt);
    switch (o->kind) {
    case CFT_OPTIM_SGD:
        if (o->weight_decay != 0)
            g = cft_add(g, cft_mul_s(p, o->weight_decay));
        if (o->momentum != 0) {
            cft_array *later =
                cft_add(cft_mul_s(buf[0], o->momentum), cft_mul_s(g, 1 - o->dampening));
            buf[0] =
                cft_where(cft_le(t, sc(t, 1)), g, later); /* PyTorch: the first step copies g */
            g = o->nesterov ? cft_add(g, cft_mul_s(buf[0], o->momentum)) : buf[0];
        }
        return cft_sub(p, cft_mul(lr, g));
    case CFT_OPTIM_ADAM:
    case CFT_OPTIM_ADAMW: {
        if (o->kind == CFT_OPTIM_ADAMW)
            p = cft_mul(p, cft_sub(sc(p, 1), cft_mul_s(lr, o->weight_decay)));
        else if (o->weight_decay != 0)
            g = cft_add(g, cft_mul_s(p, o->weight_decay));
        buf[0] = cft_add(cft_mul_s(buf[0], o->beta1), cft_mul_s(g, 1 - o->beta1));
        buf[1] = cft_add(cft_mul_s(buf[1], o->beta2), cft_mul_s(cft_square(g), 1 - o->beta2));
        cft_array *bc1 = cft_sub(sc(p, 1), cft_pow(sc(p, o->beta1), t));
        cft_array *bc2 = cft_sub(sc(p, 1), cft_pow(sc(p, o->beta2), t));
        cft_array *v = buf[1];
        if (o->amsgrad)
            v = buf[2] = cft_maximum(buf[2], buf[1]);
        cft_array *denom = cft_add_s(cft_div(cft_sqrt(v), cft_sqrt(bc2)), o->eps);
        return cft_sub(p, cft_mul(cft_div(lr, bc1), cft_div(buf[0], denom)));
    }
    case CFT_OPTIM_RMSPROP: {
        if (o->weight_decay != 0)
            g = cft_add(g, cft_mul_s(p, o->weight_decay));
        buf[0] = cft_add(cft_mul_s(buf[0], o->alpha), cft_mul_s(cft_square(g), 1 - o->alpha));
        int next = 1;
        cft_array *avg;
        int mom = o->momentum > 0 ? next++ : -1, cen = o->centered ? next++ : -1;
        if (cen >= 0) {
            buf[cen] = cft_add(cft_mul_s(buf[cen], o->alpha), cft_mul_s(g, 1 - o->alpha));
            avg = cft_add_s(cft_sqrt(cft_sub(buf[0], cft_square(buf[cen]))), o->eps);
        } else {
            avg = cft_add_s(cft_sqrt(buf[0]), o->eps);
        }
        if (mom >= 0) {
            buf[mom] = cft_add(cft_mul_s(buf[mom], o->momentum), cft_div(g, avg));
            return cft_sub(p, cft_mul(lr, buf[mom]));
        }
        return cft_sub(p, cft_mul(lr, cft_div(g, avg)));
    }
    }
    return cft__fail(CFT_E_ARG, "cft_optim_update: unknown optimizer kind %d", (int)o->kind);
}

static cft_status fail_update(cft_array *e, cft_tree **np, cft_tree **ns) {
    if (np)
        *np = cft__tree_err(e);
    if (ns)
        *ns = cft__tree_err(e);
    return cft__set_last(e);
}

cft_status cft_optim_update(const cft_optim *o, const cft_tree *grads, const cft_tree *state,
                            const cft_tree *params, cft_array *step, cft_array *lr,
                            cft_tree **new_params, cft_tree **new_state) {
    CFT_API("cft_optim_update");
    const char *op = "cft_optim_update";
    cft_array *e = check_optim(op, o);
    if (!e && (!grads || !state || !params || !step || !new_params || !new_state))
        e = cft__fail(CFT_E_ARG, "%s: NULL argument", op);
    if (!e)
        e = grads->err ? grads->err : state->err ? state->err : params->err;
    if (!e && cft_failed(step))
        e = step;
    if (!e && lr && cft_failed(lr))
        e = lr;
    if (!e && (cft_array_ndim(step) != 0 || (lr && cft_array_ndim(lr) != 0)))
        e = cft__fail(CFT_E_SHAPE, "%s: step %s and lr %s must be scalars", op, cft__nn_av(step),
                      lr ? cft__nn_av(lr) : "-");
    if (e)
        return fail_update(e, new_params, new_state);
    step_consts k = {lr ? lr : cft_scalar(o->lr, CFT_F64), step};
    const char *bufs[3];
    int nb = buffers(o, bufs), n = params->n;
    cft_tree *np = cft__tree_alloc(n), *ns = cft__tree_alloc(nb * n);
    if (np->err || ns->err)
        return fail_update(np->err ? np->err : ns->err, new_params, new_state);
    for (int i = 0; i < n; i++) {
        const char *name = params->names[i];
        cft_array *p = params->xs[i], *b[3];
        int gi = cft__tree_find(grads, name);
        if (gi < 0)
            return fail_update(cft__fail(CFT_E_ARG, "%s: no gradient for '%s'", op, name),
                               new_params, new_state);
        cft_array *g = grads->xs[gi];
        if (!cft_dtype_is_float(cft_array_dtype(p)))
            return fail_update(cft__fail(CFT_E_DTYPE, "%s: parameter '%s' is %s, not float", op,
                                         name, cft__nn_av(p)),
                               new_params, new_state);
        for (int j = 0; j < nb; j++) {
            char *bn = cft__nn_join(bufs[j], name);
            int si = bn ? cft__tree_find(state, bn) : -1;
            if (si < 0)
                return fail_update(cft__fail(CFT_E_ARG,
                                             "%s: state has no '%s' (made by cft_optim_init for "
                                             "another optimizer or other params?)",
                                             op, bn ? bn : name),
                                   new_params, new_state);
            b[j] = state->xs[si];
            ns->names[j * n + i] = bn;
        }
        cft_array *y = update_one(o, p, g, b, &k);
        for (int j = 0; j < nb && !cft_failed(y); j++)
            if (cft_failed(b[j]))
                y = b[j];
        if (cft_failed(y))
            return fail_update(cft__fail(cft_error_code(y),
                                         "%s: parameter '%s' %s, gradient %s: %s", op, name,
                                         cft__nn_av(p), cft__nn_av(g), cft_error_message(y)),
                               new_params, new_state);
        np->names[i] = name;
        np->xs[i] = cft_astype(y, cft_array_dtype(p));
        for (int j = 0; j < nb; j++)
            ns->xs[j * n + i] = cft_astype(b[j], cft_array_dtype(p));
    }
    *new_params = np;
    *new_state = ns;
    return CFT_OK;
}

/* ---- clipping ---- */

cft_array *cft_tree_global_norm(const cft_tree *t) {
    CFT_API("cft_tree_global_norm");
    if (!t)
        return cft__fail(CFT_E_ARG, "cft_tree_global_norm: NULL tree");
    if (t->err)
        return t->err;
    cft_array *sq = cft_scalar(0, CFT_F32);
    for (int i = 0; i < t->n; i++)
        sq = cft_add(sq, cft_sum(cft_square(t->xs[i]), NULL, 0, false));
    return cft_sqrt(sq);
}

typedef struct {
    cft_array *coef;
} clip_env;

static cft_array *clip_leaf(void *env, const char *name, cft_array *g) {
    (void)name;
    clip_env *c = env;
    return cft_mul(g, cft_astype(c->coef, cft_array_dtype(g)));
}

cft_tree *cft_clip_grad_norm(const cft_tree *grads, double max_norm, cft_array **total_norm) {
    CFT_API("cft_clip_grad_norm");
    cft_array *norm = cft_tree_global_norm(grads);
    if (!cft_failed(norm) && !(max_norm >= 0))
        norm = cft__fail(CFT_E_ARG, "cft_clip_grad_norm: max_norm %g must be >= 0", max_norm);
    if (total_norm)
        *total_norm = norm;
    if (cft_failed(norm))
        return cft__tree_err(norm);
    cft_array *coef = cft_div(cft__nn_sc(norm, max_norm), cft_add_s(norm, 1e-6));
    clip_env c = {cft_minimum(coef, cft__nn_sc(norm, 1))};
    return cft_tree_map(grads, clip_leaf, &c);
}
