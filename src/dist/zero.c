/* zero.c: ZeRO stage 1 (PyTorch 1.8/1.10's ZeroRedundancyOptimizer). The
 * parameters are partitioned over the group, greedily by size (largest
 * first to the least loaded rank), so each rank holds the optimizer state
 * of its parameters only and runs any nn.h optimizer on them (as one
 * jitted step, cft_optim_step); the updated
 * parameters are then broadcast from their owners (all broadcasts in
 * flight at once). The whole state can be gathered on one rank. */
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "cft/cft.h"
#include "core/error.h"
#include "core/mem.h"
#include "dist/dist.h"
#include "nn/nn_internal.h"

struct cft_zero {
    cft_dist_group *g;
    cft_optim opt;
    int np;
    int *owner;
    const char **names;
    cft_aval *avals;        /* the parameters' shapes: what other shards look like */
    cft_tree *state;        /* this rank's shard */
    cft_optim_step *update; /* the jitted step over the owned parameters */
};

/* the parameters this rank owns, as a tree */
static cft_tree *owned(const cft_zero *z, const cft_tree *t) {
    int n = 0;
    for (int i = 0; i < z->np; i++)
        n += z->owner[i] == z->g->rank;
    const char **names = CFT_NEWN(const char *, n + 1);
    cft_array **xs = CFT_NEWN(cft_array *, n + 1);
    for (int i = 0, k = 0; i < z->np; i++)
        if (z->owner[i] == z->g->rank)
            names[k] = t->names[i], xs[k++] = t->xs[i];
    return cft_tree_from(names, xs, n);
}

cft_zero *cft_zero_new(cft_dist_group *g, const cft_optim *o, const cft_tree *params) {
    CFT_API("cft_zero_new");
    cft_array *e = cft__dist_check("cft_zero_new", g);
    if (!e && (!o || !params))
        e = cft__fail(CFT_E_ARG, "cft_zero_new: NULL argument");
    if (!e && params->err)
        e = params->err;
    if (e) {
        cft__set_last(e);
        return NULL;
    }
    cft_zero *z = CFT_NEW(cft_zero);
    z->g = g;
    z->opt = *o;
    z->np = params->n;
    z->owner = CFT_NEWN(int, z->np + 1);
    z->names = CFT_NEWN(const char *, z->np + 1);
    double *load = CFT_NEWN(double, g->size);
    bool *done = CFT_NEWN(bool, z->np + 1);
    for (int k = 0; k < z->np; k++) { /* largest first, to the least loaded rank */
        int best = -1;
        double bb = -1;
        for (int i = 0; i < z->np; i++) {
            double b = (double)cft_array_size(params->xs[i]);
            if (!done[i] && b > bb)
                best = i, bb = b;
        }
        int r = 0;
        for (int q = 1; q < g->size; q++)
            if (load[q] < load[r])
                r = q;
        z->owner[best] = r;
        load[r] += bb;
        done[best] = true;
    }
    z->avals = CFT_NEWN(cft_aval, z->np + 1);
    for (int i = 0; i < z->np; i++)
        z->names[i] = params->names[i], z->avals[i] = cft_array_aval(params->xs[i]);
    cft_tree *mine = owned(z, params);
    z->state = cft_optim_init(&z->opt, mine);
    if (z->state->err) {
        cft__set_last(z->state->err);
        return NULL;
    }
    /* not donated: the caller's parameters and the state it may hold
     * (cft_zero_local_state) stay valid */
    z->update = cft_optim_step_new(&z->opt, mine, 0);
    return z;
}

int cft_zero_owner(const cft_zero *z, int i) {
    return z && i >= 0 && i < z->np ? z->owner[i] : -1;
}
cft_tree *cft_zero_local_state(const cft_zero *z) {
    return z ? z->state : cft__tree_err(cft__fail(CFT_E_ARG, "cft_zero_local_state: NULL"));
}

cft_status cft_zero_step(cft_zero *z, const cft_tree *grads, const cft_tree *params,
                         cft_array *step, cft_array *lr, cft_tree **new_params) {
    CFT_API("cft_zero_step");
    cft_array *e = NULL;
    if (!z || !grads || !params || !new_params)
        e = cft__fail(CFT_E_ARG, "cft_zero_step: NULL argument");
    else if (grads->err || params->err)
        e = grads->err ? grads->err : params->err;
    else if (grads->n != z->np || params->n != z->np)
        e = cft__fail(CFT_E_ARG, "cft_zero_step: %d grads and %d params for %d parameters",
                      grads->n, params->n, z->np);
    if (e) {
        if (new_params)
            *new_params = cft__tree_err(e);
        return cft__set_last(e);
    }
    cft_tree *np = NULL, *ns = NULL;
    cft_status st = cft_optim_step_apply(z->update, owned(z, grads), z->state, owned(z, params),
                                         step, lr, &np, &ns);
    if (st != CFT_OK) {
        *new_params = np;
        return st;
    }
    z->state = ns;
    /* every parameter from its owner; all broadcasts in flight at once */
    cft_dist_work **w = CFT_NEWN(cft_dist_work *, z->np + 1);
    for (int i = 0, k = 0; i < z->np; i++) {
        cft_array *mine = z->owner[i] == z->g->rank ? np->xs[k++] : params->xs[i];
        w[i] = cft_dist_broadcast_async(z->g, mine, z->owner[i]);
    }
    cft_array **xs = CFT_NEWN(cft_array *, z->np + 1);
    for (int i = 0; i < z->np; i++) {
        xs[i] = cft_dist_wait(w[i]);
        if (cft_failed(xs[i])) {
            *new_params = cft__tree_err(xs[i]);
            return cft__set_last(xs[i]);
        }
    }
    *new_params = cft_tree_from(params->names, xs, z->np);
    return CFT_OK;
}

cft_tree *cft_zero_state_dict(cft_zero *z, int to) {
    CFT_API("cft_zero_state_dict");
    if (!z || to < 0 || to >= z->g->size)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_zero_state_dict: bad rank %d", to));
    /* every rank's shard goes to `to` by send/recv, leaf by leaf in order;
     * `to` knows their shapes from the parameters' */
    if (z->g->rank != to) {
        for (int i = 0; i < z->state->n; i++)
            if (cft_dist_send(z->g, z->state->xs[i], to, 100 + i) != CFT_OK)
                return cft__tree_err(cft__fail(cft_last_error(), "%s", cft_last_error_message()));
        return cft_tree_new();
    }
    cft_tree *all = cft_tree_new();
    for (int r = 0; r < z->g->size; r++) {
        if (r == to) {
            for (int i = 0; i < z->state->n; i++)
                all = cft_tree_set(all, z->state->names[i], z->state->xs[i]);
            continue;
        }
        /* rank r's shard looks like the state of its parameters */
        int n = 0;
        for (int i = 0; i < z->np; i++)
            n += z->owner[i] == r;
        const char **names = CFT_NEWN(const char *, n + 1);
        cft_array **xs = CFT_NEWN(cft_array *, n + 1);
        for (int i = 0, k = 0; i < z->np; i++)
            if (z->owner[i] == r) {
                names[k] = z->names[i];
                xs[k++] = cft_zeros(z->avals[i].dtype, z->avals[i].shape, z->avals[i].ndim);
            }
        cft_tree *like = cft_optim_init(&z->opt, cft_tree_from(names, xs, n));
        for (int i = 0; !like->err && i < like->n; i++) {
            cft_aval a = cft_array_aval(like->xs[i]);
            cft_array *got = cft_dist_recv(z->g, a.dtype, a.shape, a.ndim, r, 100 + i);
            if (cft_failed(got))
                return cft__tree_err(got);
            all = cft_tree_set(all, like->names[i], got);
        }
    }
    return all;
}
