/* prune.c: torch.nn.utils.prune as functions returning masks. A method
 * scores the entries (or slices) that the previous mask still keeps and
 * zeros the `amount` lowest of them (PruningContainer's rule: amount is
 * relative to what is left); masks are ordinary arrays of the weight's
 * dtype, applied by multiplying (cft_prune_apply, the parametrization) or
 * made permanent (cft_prune_remove). Scores are read from concrete arrays:
 * choosing what to prune is done between training steps, not traced. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

/* torch's _compute_nparams_toprune: a fraction rounds half to even, a
 * count must be an integer; either may not exceed n */
static cft_array *count_of(const char *op, double amount, int64_t n, int64_t *k) {
    if (!(amount >= 0) || !isfinite(amount))
        return cft__fail(CFT_E_ARG, "%s: amount %g must be a fraction in [0, 1) or a count", op,
                         amount);
    if (amount < 1) {
        *k = (int64_t)nearbyint(amount * (double)n);
        return NULL;
    }
    if (amount != floor(amount))
        return cft__fail(CFT_E_ARG, "%s: amount %g above 1 must be a whole count", op, amount);
    if (amount > (double)n)
        return cft__fail(CFT_E_ARG, "%s: amount %g is more than the %lld entries left to prune", op,
                         amount, (long long)n);
    *k = (int64_t)amount;
    return NULL;
}

/* w's values as doubles (concrete), or NULL with *err set */
static double *values_of(const char *op, cft_array *w, int64_t *n, cft_array **err) {
    *err = NULL;
    if (cft_failed(w)) {
        *err = w;
        return NULL;
    }
    if (!cft_dtype_is_float(cft_array_dtype(w))) {
        *err = cft__fail(CFT_E_DTYPE, "%s: %s is not a float weight", op, cft__nn_av(w));
        return NULL;
    }
    *n = cft_array_size(w);
    double *v = cft__new_data(sizeof(double) * (size_t)(*n > 0 ? *n : 1));
    if (!v) {
        *err = cft__oom();
        return NULL;
    }
    cft_status s = cft_copy_to(w, CFT_F64, v);
    if (s != CFT_OK)
        *err = cft__fail(s, "%s: cannot read %s (a traced value? pruning reads concrete weights)",
                         op, cft__nn_av(w));
    return *err ? NULL : v;
}

/* prev as 0/1 doubles of w's shape (all ones when NULL) */
static double *prev_of(const char *op, cft_array *w, cft_array *prev, cft_array **err) {
    int64_t n = cft_array_size(w), np;
    if (!prev) {
        double *one = cft__new_data(sizeof(double) * (size_t)(n > 0 ? n : 1));
        if (!one)
            *err = cft__oom();
        for (int64_t i = 0; one && i < n; i++)
            one[i] = 1;
        return one;
    }
    cft_aval a = cft_array_aval(w), b = cft_array_aval(prev);
    if (!cft_failed(prev) &&
        (a.ndim != b.ndim || memcmp(a.shape, b.shape, sizeof(int64_t) * (size_t)a.ndim))) {
        *err = cft__fail(CFT_E_SHAPE, "%s: the previous mask %s does not fit %s", op,
                         cft__nn_av(prev), cft__nn_av(w));
        return NULL;
    }
    if (!cft_failed(prev) && !cft_dtype_is_float(b.dtype) && b.dtype != CFT_BOOL) {
        *err = cft__fail(CFT_E_DTYPE, "%s: the previous mask %s must be float or bool", op,
                         cft__nn_av(prev));
        return NULL;
    }
    return values_of(op, prev, &np, err);
}

typedef struct {
    double s;
    int64_t i;
} scored;

static int by_score(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->s != y->s)
        return x->s < y->s ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* zero, in keep (0/1 per entry), the k lowest scores among kept entries */
static cft_array *prune_lowest(const char *op, const double *score, double *keep, int64_t n,
                               double amount) {
    scored *c = cft__new_data(sizeof(scored) * (size_t)(n > 0 ? n : 1));
    if (!c)
        return cft__oom();
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (keep[i] != 0)
            c[m++] = (scored){score[i], i};
    int64_t k = 0;
    cft_array *e = count_of(op, amount, m, &k);
    if (e)
        return e;
    qsort(c, (size_t)m, sizeof *c, by_score);
    for (int64_t j = 0; j < k; j++)
        keep[c[j].i] = 0;
    return NULL;
}

static cft_array *mask_array(const double *keep, cft_array *w) {
    cft_aval a = cft_array_aval(w);
    return cft_astype(cft_from_data(keep, CFT_F64, a.shape, a.ndim), a.dtype);
}

static cft_array *unstructured(const char *op, cft_array *w, const double *score, double amount,
                               cft_array *prev) {
    cft_array *e = NULL;
    double *keep = prev_of(op, w, prev, &e);
    if (!e)
        e = prune_lowest(op, score, keep, cft_array_size(w), amount);
    return e ? e : mask_array(keep, w);
}

cft_array *cft_prune_l1_unstructured(cft_array *w, double amount, cft_array *prev) {
    CFT_API("cft_prune_l1_unstructured");
    const char *op = "cft_prune_l1_unstructured";
    int64_t n;
    cft_array *e;
    double *v = values_of(op, w, &n, &e);
    if (e)
        return e;
    for (int64_t i = 0; i < n; i++)
        v[i] = fabs(v[i]);
    return unstructured(op, w, v, amount, prev);
}

cft_array *cft_prune_random_unstructured(cft_array *key, cft_array *w, double amount,
                                         cft_array *prev) {
    CFT_API("cft_prune_random_unstructured");
    const char *op = "cft_prune_random_unstructured";
    CFT_PROPAGATE(op, key, w);
    cft_aval a = cft_array_aval(w);
    if (!cft_dtype_is_float(a.dtype))
        return cft__fail(CFT_E_DTYPE, "%s: %s is not a float weight", op, cft__nn_av(w));
    int64_t n;
    cft_array *e;
    double *s = values_of(op, cft_random_uniform(key, CFT_F64, a.shape, a.ndim, 0, 1), &n, &e);
    if (e)
        return e;
    return unstructured(op, w, s, amount, prev);
}

cft_array *cft_prune_ln_structured(cft_array *w, double amount, double nrm, int dim,
                                   cft_array *prev) {
    CFT_API("cft_prune_ln_structured");
    const char *op = "cft_prune_ln_structured";
    int64_t n;
    cft_array *e;
    double *v = values_of(op, w, &n, &e);
    if (e)
        return e;
    cft_aval a = cft_array_aval(w);
    int d = dim < 0 ? dim + a.ndim : dim;
    if (a.ndim == 0 || d < 0 || d >= a.ndim)
        return cft__fail(CFT_E_ARG, "%s: dim %d out of range for %s", op, dim, cft__nn_av(w));
    if (!(nrm > 0))
        return cft__fail(CFT_E_ARG, "%s: the norm's order %g must be positive", op, nrm);
    double *keep = prev_of(op, w, prev, &e);
    if (e)
        return e;
    int64_t c = a.shape[d], inner = 1;
    for (int k = d + 1; k < a.ndim; k++)
        inner *= a.shape[k];
    double *norm = cft__new_data(sizeof(double) * (size_t)(c > 0 ? c : 1));
    double *alive = cft__new_data(sizeof(double) * (size_t)(c > 0 ? c : 1));
    if (!norm || !alive)
        return cft__oom();
    memset(norm, 0, sizeof(double) * (size_t)c);
    memset(alive, 0, sizeof(double) * (size_t)c);
    for (int64_t i = 0; i < n; i++) { /* slice (i / inner) % c */
        int64_t s = (i / inner) % c;
        double x = fabs(v[i]);
        norm[s] = isinf(nrm) ? fmax(norm[s], x) : norm[s] + pow(x, nrm);
        if (keep[i] != 0)
            alive[s] = 1;
    }
    e = prune_lowest(op, norm, alive, c, amount);
    if (e)
        return e;
    for (int64_t i = 0; i < n; i++)
        keep[i] *= alive[(i / inner) % c];
    return mask_array(keep, w);
}

cft_tree *cft_prune_global_unstructured(const cft_tree *params, const char *const *names, int n,
                                        double amount, const cft_tree *prev_masks) {
    CFT_API("cft_prune_global_unstructured");
    const char *op = "cft_prune_global_unstructured";
    if (!params || !names || n < 1)
        return cft__tree_err(cft__fail(CFT_E_ARG, "%s: no parameters to prune", op));
    if (params->err)
        return (cft_tree *)params;
    if (prev_masks && prev_masks->err)
        return (cft_tree *)prev_masks;
    int64_t total = 0, off[n + 1];
    cft_array *w[n];
    for (int j = 0; j < n; j++) {
        int i = cft__tree_find(params, names[j]);
        if (i < 0)
            return cft__tree_err(cft__fail(CFT_E_ARG, "%s: no parameter '%s'", op, names[j]));
        w[j] = params->xs[i];
        off[j] = total;
        total += cft_array_size(w[j]);
    }
    off[n] = total;
    double *score = cft__new_data(sizeof(double) * (size_t)(total > 0 ? total : 1));
    double *keep = cft__new_data(sizeof(double) * (size_t)(total > 0 ? total : 1));
    if (!score || !keep)
        return cft__tree_err(cft__oom());
    for (int j = 0; j < n; j++) {
        int64_t m;
        cft_array *e;
        double *v = values_of(op, w[j], &m, &e);
        int pi = prev_masks ? cft__tree_find(prev_masks, names[j]) : -1;
        double *k = e ? NULL : prev_of(op, w[j], pi < 0 ? NULL : prev_masks->xs[pi], &e);
        if (e)
            return cft__tree_err(e);
        for (int64_t i = 0; i < m; i++)
            score[off[j] + i] = fabs(v[i]), keep[off[j] + i] = k[i];
    }
    cft_array *e = prune_lowest(op, score, keep, total, amount);
    if (e)
        return cft__tree_err(e);
    cft_tree *out = cft__tree_alloc(n);
    for (int j = 0; !out->err && j < n; j++) {
        out->names[j] = names[j];
        out->xs[j] = mask_array(keep + off[j], w[j]);
        if (cft_failed(out->xs[j]))
            return cft__tree_err(out->xs[j]);
    }
    return out;
}

cft_tree *cft_prune_apply(const cft_tree *params, const cft_tree *masks) {
    CFT_API("cft_prune_apply");
    if (!params || !masks)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_prune_apply: NULL tree"));
    if (params->err || masks->err)
        return (cft_tree *)(params->err ? params : masks);
    for (int j = 0; j < masks->n; j++)
        if (cft__tree_find(params, masks->names[j]) < 0)
            return cft__tree_err(cft__fail(CFT_E_ARG,
                                           "cft_prune_apply: a mask for '%s', which "
                                           "params do not have",
                                           masks->names[j]));
    cft_tree *out = cft__tree_alloc(params->n);
    for (int i = 0; !out->err && i < params->n; i++) {
        int j = cft__tree_find(masks, params->names[i]);
        cft_array *x = params->xs[i];
        out->names[i] = params->names[i];
        out->xs[i] = j < 0 ? x : cft_mul(x, cft_astype(masks->xs[j], cft_array_dtype(x)));
        if (cft_failed(out->xs[i]))
            return cft__tree_err(out->xs[i]);
    }
    return out;
}

cft_tree *cft_prune_remove(const cft_tree *params, const cft_tree *masks, const char *name,
                           cft_tree **masks_left) {
    CFT_API("cft_prune_remove");
    const char *op = "cft_prune_remove";
    cft_tree *bad = NULL;
    if (!params || !masks || !name)
        bad = cft__tree_err(cft__fail(CFT_E_ARG, "%s: NULL argument", op));
    else if (params->err || masks->err)
        bad = (cft_tree *)(params->err ? params : masks);
    else if (cft__tree_find(masks, name) < 0 || cft__tree_find(params, name) < 0)
        bad = cft__tree_err(
            cft__fail(CFT_E_ARG, "%s: '%s' is not pruned (no mask or no parameter)", op, name));
    if (bad) {
        if (masks_left)
            *masks_left = bad;
        return bad;
    }
    cft_array *m = masks->xs[cft__tree_find(masks, name)];
    cft_array *w = params->xs[cft__tree_find(params, name)];
    cft_tree *out = cft_tree_set(params, name, cft_mul(w, cft_astype(m, cft_array_dtype(w))));
    if (masks_left)
        *masks_left = out->err ? out : cft_tree_remove(masks, name);
    return out;
}
