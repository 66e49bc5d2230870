/* amp_scaler.c: dynamic loss scaling for f16 training (GradScaler) as pure
 * functions over trees. The state is two arrays, so a whole step (unscale,
 * the finite check, the optimizer update or its skip, the scale's growth or
 * backoff) is array arithmetic that traces and jits like any other. */
#include <math.h>

#include "nn/nn_internal.h"

cft_loss_scaler cft_loss_scaler_default(void) {
    return (cft_loss_scaler){65536.0, 2.0, 0.5, 2000};
}

static cft_array *check_scaler(const char *op, const cft_loss_scaler *s) {
    if (!s)
        return cft__fail(CFT_E_ARG, "%s: NULL scaler", op);
    if (!(s->init_scale > 0) || !isfinite(s->init_scale))
        return cft__fail(CFT_E_ARG, "%s: init_scale %g must be positive and finite", op,
                         s->init_scale);
    if (!(s->growth_factor > 1) || !isfinite(s->growth_factor))
        return cft__fail(CFT_E_ARG, "%s: growth_factor %g must be above 1", op, s->growth_factor);
    if (!(s->backoff_factor > 0 && s->backoff_factor < 1))
        return cft__fail(CFT_E_ARG, "%s: backoff_factor %g must be in (0, 1)", op,
                         s->backoff_factor);
    if (s->growth_interval < 1)
        return cft__fail(CFT_E_ARG, "%s: growth_interval %d must be at least 1", op,
                         s->growth_interval);
    return NULL;
}

cft_tree *cft_loss_scaler_init(const cft_loss_scaler *s) {
    CFT_API("cft_loss_scaler_init");
    cft_array *e = check_scaler("cft_loss_scaler_init", s);
    if (e)
        return cft__tree_err(e);
    const char *names[2] = {"scale", "growth_tracker"};
    cft_array *xs[2] = {cft_scalar(s->init_scale, CFT_F32), cft_scalar(0, CFT_I32)};
    return cft_tree_from(names, xs, 2);
}

/* the state's scale (f32[]) and tracker (i32[]), or an error */
static cft_array *state_of(const char *op, const cft_tree *st, cft_array **scale,
                           cft_array **tracker) {
    if (!st)
        return cft__fail(CFT_E_ARG, "%s: NULL scaler state", op);
    if (st->err)
        return st->err;
    int i = cft__tree_find(st, "scale"), j = cft__tree_find(st, "growth_tracker");
    if (i < 0 || j < 0)
        return cft__fail(CFT_E_ARG,
                         "%s: the scaler state has no '%s' (make it with cft_loss_scaler_init)", op,
                         i < 0 ? "scale" : "growth_tracker");
    *scale = st->xs[i], *tracker = st->xs[j];
    if (cft_failed(*scale))
        return *scale;
    if (cft_failed(*tracker))
        return *tracker;
    if (cft_array_ndim(*scale) != 0 || cft_array_dtype(*scale) != CFT_F32 ||
        cft_array_ndim(*tracker) != 0 || cft_array_dtype(*tracker) != CFT_I32)
        return cft__fail(CFT_E_SHAPE, "%s: scale %s and growth_tracker %s must be f32[] and i32[]",
                         op, cft__nn_av(*scale), cft__nn_av(*tracker));
    return NULL;
}

cft_array *cft_loss_scale(const cft_tree *state, cft_array *loss) {
    CFT_API("cft_loss_scale");
    CFT_PROPAGATE("cft_loss_scale", loss);
    cft_array *scale, *tracker;
    cft_array *e = state_of("cft_loss_scale", state, &scale, &tracker);
    if (e)
        return e;
    if (!cft_dtype_is_float(cft_array_dtype(loss)))
        return cft__fail(CFT_E_DTYPE, "cft_loss_scale: the loss is %s, not float",
                         cft__nn_av(loss));
    cft_dtype dt = cft_array_dtype(loss) == CFT_F64 ? CFT_F64 : CFT_F32;
    return cft_mul(cft_astype(loss, dt), cft_astype(scale, dt));
}

/* grads / scale per leaf, and whether any is not finite: the sum over
 * every leaf of g * 0 is NaN exactly when some element is inf or NaN */
static cft_tree *unscale(const char *op, cft_array *scale, const cft_tree *grads,
                         cft_array **found_inf) {
    if (!grads)
        return cft__tree_err(cft__fail(CFT_E_ARG, "%s: NULL gradients", op));
    if (grads->err)
        return (cft_tree *)grads;
    cft_tree *out = cft__tree_alloc(grads->n);
    if (out->err)
        return out;
    cft_array *inv = cft_reciprocal(scale), *probe = cft_scalar(0, CFT_F32);
    for (int i = 0; i < grads->n; i++) {
        cft_array *g = grads->xs[i];
        if (cft_failed(g))
            return cft__tree_err(g);
        if (!cft_dtype_is_float(cft_array_dtype(g)))
            return cft__tree_err(cft__fail(CFT_E_DTYPE, "%s: gradient '%s' is %s, not float", op,
                                           grads->names[i], cft__nn_av(g)));
        cft_array *g32 = cft_astype(g, cft_array_dtype(g) == CFT_F64 ? CFT_F64 : CFT_F32);
        out->names[i] = grads->names[i];
        out->xs[i] =
            cft_astype(cft_mul(g32, cft_astype(inv, cft_array_dtype(g32))), cft_array_dtype(g));
        cft_array *z = cft_sum(cft_mul_s(g32, 0.0), NULL, 0, false);
        probe = cft_add(probe, cft_astype(z, CFT_F32));
        if (cft_failed(out->xs[i]) || cft_failed(probe))
            return cft__tree_err(cft_failed(out->xs[i]) ? out->xs[i] : probe);
    }
    if (found_inf)
        *found_inf = cft_logical_not(cft_is_finite(probe));
    return out;
}

cft_tree *cft_loss_unscale(const cft_tree *state, const cft_tree *grads, cft_array **found_inf) {
    CFT_API("cft_loss_unscale");
    cft_array *scale, *tracker;
    cft_array *e = state_of("cft_loss_unscale", state, &scale, &tracker);
    if (e) {
        if (found_inf)
            *found_inf = e;
        return cft__tree_err(e);
    }
    cft_array *fi = NULL;
    cft_tree *out = unscale("cft_loss_unscale", scale, grads, &fi);
    if (found_inf)
        *found_inf = out->err ? out->err : fi;
    return out;
}

/* keep[i] ? old : new, leaf by leaf (both trees have the same names) */
static cft_tree *select_tree(cft_array *keep, const cft_tree *old, const cft_tree *nw) {
    cft_tree *out = cft__tree_alloc(nw->n);
    if (out->err)
        return out;
    for (int i = 0; i < nw->n; i++) {
        int k = cft__tree_find(old, nw->names[i]);
        out->names[i] = nw->names[i];
        out->xs[i] = k < 0 ? nw->xs[i] : cft_where(keep, old->xs[k], nw->xs[i]);
        if (cft_failed(out->xs[i]))
            return cft__tree_err(out->xs[i]);
    }
    return out;
}

static cft_status fail_step(cft_array *e, cft_tree **np, cft_tree **ns, cft_tree **nsc,
                            cft_array **skipped) {
    if (np)
        *np = cft__tree_err(e);
    if (ns)
        *ns = cft__tree_err(e);
    if (nsc)
        *nsc = cft__tree_err(e);
    if (skipped)
        *skipped = e;
    return cft__set_last(e);
}

cft_status cft_loss_scaler_step(const cft_loss_scaler *s, const cft_optim *o,
                                const cft_tree *scaled_grads, const cft_tree *scaler_state,
                                const cft_tree *opt_state, const cft_tree *params, cft_array *step,
                                cft_array *lr, cft_tree **new_params, cft_tree **new_opt_state,
                                cft_tree **new_scaler_state, cft_array **skipped) {
    CFT_API("cft_loss_scaler_step");
    const char *op = "cft_loss_scaler_step";
    cft_array *scale, *tracker;
    cft_array *e = check_scaler(op, s);
    if (!e && (!new_params || !new_opt_state || !new_scaler_state || !params || !opt_state))
        e = cft__fail(CFT_E_ARG, "%s: NULL argument", op);
    if (!e)
        e = state_of(op, scaler_state, &scale, &tracker);
    if (e)
        return fail_step(e, new_params, new_opt_state, new_scaler_state, skipped);
    cft_array *inf = NULL;
    cft_tree *g = unscale(op, scale, scaled_grads, &inf);
    if (g->err)
        return fail_step(g->err, new_params, new_opt_state, new_scaler_state, skipped);
    cft_tree *np, *ns;
    cft_status st = cft_optim_update(o, g, opt_state, params, step, lr, &np, &ns);
    if (st != CFT_OK)
        return fail_step(np->err, new_params, new_opt_state, new_scaler_state, skipped);
    np = select_tree(inf, params, np);
    ns = select_tree(inf, opt_state, ns);
    if (np->err || ns->err)
        return fail_step(np->err ? np->err : ns->err, new_params, new_opt_state, new_scaler_state,
                         skipped);
    /* torch's update: inf -> scale * backoff, tracker 0; else tracker + 1,
     * and at growth_interval scale * growth (kept only if finite), tracker 0 */
    cft_array *t1 = cft_add(tracker, cft_scalar(1, CFT_I32));
    cft_array *grow = cft_ge(t1, cft_scalar(s->growth_interval, CFT_I32));
    cft_array *grown = cft_mul(scale, cft_scalar(s->growth_factor, CFT_F32));
    grown = cft_where(cft_is_finite(grown), grown, scale);
    cft_array *sc = cft_where(inf, cft_mul(scale, cft_scalar(s->backoff_factor, CFT_F32)),
                              cft_where(grow, grown, scale));
    cft_array *tr = cft_where(cft_logical_or(inf, grow), cft_scalar(0, CFT_I32), t1);
    const char *names[2] = {"scale", "growth_tracker"};
    cft_array *xs[2] = {sc, tr};
    cft_tree *nsc = cft_tree_from(names, xs, 2);
    if (nsc->err)
        return fail_step(nsc->err, new_params, new_opt_state, new_scaler_state, skipped);
    *new_params = np, *new_opt_state = ns, *new_scaler_state = nsc;
    if (skipped)
        *skipped = inf;
    return CFT_OK;
}
