/* tree_ops.c: whole-tree operations: subtrees and merging by name prefix,
 * flatten / unflatten to the flat array lists transforms take, maps over
 * leaves (one, two or n trees matched by name), dtype conversion, and
 * stacking K trees along a new leading axis (and back). */
#include <string.h>

#include "core/error.h"
#include "nn/nn_internal.h"

static cft_array *check(const char *op, const cft_tree *t) {
    if (!t)
        return cft__fail(CFT_E_ARG, "%s: NULL tree", op);
    return t->err;
}

cft_tree *cft_tree_subtree(const cft_tree *t, const char *prefix) {
    CFT_API("cft_tree_subtree");
    cft_array *e = check("cft_tree_subtree", t);
    if (e)
        return cft__tree_err(e);
    if (!prefix)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_subtree: the prefix is NULL (\"\" "
                                                  "names the whole tree)"));
    if (!*prefix)
        return (cft_tree *)t;
    size_t lp = strlen(prefix);
    int n = 0;
    for (int i = 0; i < t->n; i++)
        n += strncmp(t->names[i], prefix, lp) == 0 && t->names[i][lp] == '.' && t->names[i][lp + 1];
    cft_tree *r = cft__tree_alloc(n);
    if (r->err)
        return r;
    for (int i = 0, k = 0; i < t->n; i++)
        if (strncmp(t->names[i], prefix, lp) == 0 && t->names[i][lp] == '.' &&
            t->names[i][lp + 1]) {
            r->names[k] = cft__strdup(t->names[i] + lp + 1);
            if (!r->names[k])
                return cft__tree_err(cft__oom());
            r->xs[k++] = t->xs[i];
        }
    return r;
}

cft_tree *cft_tree_merge(const cft_tree *t, const char *prefix, const cft_tree *sub) {
    CFT_API("cft_tree_merge");
    cft_array *e = check("cft_tree_merge", t);
    if (!e)
        e = check("cft_tree_merge", sub);
    if (e)
        return cft__tree_err(e);
    cft_tree *r = (cft_tree *)t;
    for (int i = 0; i < sub->n && !r->err; i++) {
        char *name = cft__nn_join(prefix, sub->names[i]);
        if (!name)
            return cft__tree_err(cft__oom());
        r = cft_tree_set(r, name, sub->xs[i]);
    }
    return r;
}

cft_status cft_tree_flatten(const cft_tree *t, cft_array **out) {
    CFT_API("cft_tree_flatten");
    cft_array *e = check("cft_tree_flatten", t);
    if (!e && !out && t->n)
        e = cft__fail(CFT_E_ARG, "cft_tree_flatten: NULL output");
    if (e)
        return cft__set_last(e);
    memcpy(out, t->xs, sizeof(cft_array *) * (size_t)t->n);
    return CFT_OK;
}

cft_tree *cft_tree_unflatten(const cft_tree *like, cft_array *const *leaves) {
    CFT_API("cft_tree_unflatten");
    cft_array *e = check("cft_tree_unflatten", like);
    if (e)
        return cft__tree_err(e);
    if (!leaves && like->n)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_unflatten: NULL leaves"));
    cft_tree *r = cft__tree_alloc(like->n);
    if (r->err)
        return r;
    for (int i = 0; i < like->n; i++) {
        cft_array *x = leaves[i];
        if (!x)
            return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_unflatten: leaf %d ('%s') is NULL",
                                           i, like->names[i]));
        if (cft_failed(x))
            return cft__tree_err(x);
        r->names[i] = like->names[i];
        r->xs[i] = x;
    }
    return r;
}

/* ---- maps ---- */

typedef struct {
    cft_tree_map_cb f1;
    cft_tree_zip_cb f2;
    void *env;
} adapt_env;

static cft_array *adapt1(void *env, const char *name, cft_array *const *xs, int n) {
    (void)n;
    adapt_env *a = env;
    return a->f1(a->env, name, xs[0]);
}
static cft_array *adapt2(void *env, const char *name, cft_array *const *xs, int n) {
    (void)n;
    adapt_env *a = env;
    return a->f2(a->env, name, xs[0], xs[1]);
}

cft_tree *cft_tree_map_n(const cft_tree *const *trees, int n, cft_tree_map_n_cb f, void *env) {
    CFT_API("cft_tree_map_n");
    if (!trees || n < 1 || !f)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_map_n: bad arguments"));
    for (int j = 0; j < n; j++) {
        cft_array *e = check("cft_tree_map_n", trees[j]);
        if (e)
            return cft__tree_err(e);
    }
    const cft_tree *t0 = trees[0];
    cft_tree *r = cft__tree_alloc(t0->n);
    cft_array **xs = CFT_NEWN(cft_array *, n);
    if (r->err || !xs)
        return r->err ? r : cft__tree_err(cft__oom());
    for (int i = 0; i < t0->n; i++) {
        xs[0] = t0->xs[i];
        for (int j = 1; j < n; j++) {
            const cft_tree *tj = trees[j];
            int k = i < tj->n && strcmp(tj->names[i], t0->names[i]) == 0
                        ? i
                        : cft__tree_find(tj, t0->names[i]);
            if (k < 0)
                return cft__tree_err(cft__fail(
                    CFT_E_ARG, "cft_tree_map: entry '%s' of tree 0 is missing from tree %d",
                    t0->names[i], j));
            xs[j] = tj->xs[k];
        }
        cft_array *y = f(env, t0->names[i], xs, n);
        if (!y)
            return cft__tree_err(cft__fail(
                CFT_E_ARG, "cft_tree_map: callback returned NULL for '%s'", t0->names[i]));
        if (cft_failed(y))
            return cft__tree_err(y);
        r->names[i] = t0->names[i];
        r->xs[i] = y;
    }
    return r;
}

cft_tree *cft_tree_map(const cft_tree *t, cft_tree_map_cb f, void *env) {
    CFT_API("cft_tree_map");
    if (!f)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_map: NULL callback"));
    adapt_env a = {.f1 = f, .env = env};
    return cft_tree_map_n(&t, 1, adapt1, &a);
}

cft_tree *cft_tree_zip_map(const cft_tree *a, const cft_tree *b, cft_tree_zip_cb f, void *env) {
    CFT_API("cft_tree_zip_map");
    if (!f)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_zip_map: NULL callback"));
    adapt_env ad = {.f2 = f, .env = env};
    const cft_tree *ts[2] = {a, b};
    return cft_tree_map_n(ts, 2, adapt2, &ad);
}

static cft_array *astype_leaf(void *env, const char *name, cft_array *x) {
    (void)name;
    cft_dtype dt = *(cft_dtype *)env;
    return cft_dtype_is_float(cft_array_dtype(x)) ? cft_astype(x, dt) : x;
}

cft_tree *cft_tree_astype(const cft_tree *t, cft_dtype dt) {
    CFT_API("cft_tree_astype");
    if (!cft_dtype_is_float(dt))
        return cft__tree_err(
            cft__fail(CFT_E_DTYPE, "cft_tree_astype: %s is not a float dtype", cft_dtype_name(dt)));
    return cft_tree_map(t, astype_leaf, &dt);
}

/* ---- stacking ---- */

cft_tree *cft_tree_stack(const cft_tree *const *trees, int k) {
    CFT_API("cft_tree_stack");
    if (!trees || k < 1)
        return cft__tree_err(
            cft__fail(CFT_E_ARG, "cft_tree_stack: need at least one tree (k=%d)", k));
    for (int j = 0; j < k; j++) {
        cft_array *e = check("cft_tree_stack", trees[j]);
        if (e)
            return cft__tree_err(e);
        if (trees[j]->n != trees[0]->n)
            return cft__tree_err(cft__fail(CFT_E_ARG,
                                           "cft_tree_stack: tree %d has %d entries, tree 0 has %d",
                                           j, trees[j]->n, trees[0]->n));
    }
    const cft_tree *t0 = trees[0];
    cft_tree *r = cft__tree_alloc(t0->n);
    cft_array **xs = CFT_NEWN(cft_array *, k);
    if (r->err || !xs)
        return r->err ? r : cft__tree_err(cft__oom());
    for (int i = 0; i < t0->n; i++) {
        for (int j = 0; j < k; j++) {
            int at = cft__tree_find(trees[j], t0->names[i]);
            if (at < 0)
                return cft__tree_err(cft__fail(CFT_E_ARG,
                                               "cft_tree_stack: entry '%s' is missing from tree %d",
                                               t0->names[i], j));
            xs[j] = trees[j]->xs[at];
        }
        cft_array *y = cft_stack(xs, k, 0);
        if (cft_failed(y))
            return cft__tree_err(cft__fail(cft_error_code(y), "cft_tree_stack: entry '%s': %s",
                                           t0->names[i], cft_error_message(y)));
        r->names[i] = t0->names[i];
        r->xs[i] = y;
    }
    return r;
}

cft_tree *cft_tree_index(const cft_tree *t, int64_t i) {
    CFT_API("cft_tree_index");
    cft_array *e = check("cft_tree_index", t);
    if (e)
        return cft__tree_err(e);
    cft_tree *r = cft__tree_alloc(t->n);
    if (r->err)
        return r;
    for (int j = 0; j < t->n; j++) {
        cft_array *y = cft_index(t->xs[j], i);
        if (cft_failed(y))
            return cft__tree_err(cft__fail(cft_error_code(y), "cft_tree_index: entry '%s': %s",
                                           t->names[j], cft_error_message(y)));
        r->names[j] = t->names[j];
        r->xs[j] = y;
    }
    return r;
}

cft_status cft_tree_unstack(const cft_tree *t, int k, cft_tree **out) {
    CFT_API("cft_tree_unstack");
    cft_array *e = check("cft_tree_unstack", t);
    if (!e && (!out || k < 1))
        e = cft__fail(CFT_E_ARG, "cft_tree_unstack: bad arguments (k=%d)", k);
    for (int j = 0; !e && j < t->n; j++)
        if (cft_array_ndim(t->xs[j]) < 1 || cft_array_dim(t->xs[j], 0) != k)
            e = cft__fail(CFT_E_SHAPE, "cft_tree_unstack: entry '%s' is %s, not stacked %d times",
                          t->names[j], cft__nn_av(t->xs[j]), k);
    if (e) {
        for (int j = 0; out && j < k; j++)
            out[j] = cft__tree_err(e);
        return cft__set_last(e);
    }
    for (int j = 0; j < k; j++)
        out[j] = cft_tree_index(t, j);
    return CFT_OK;
}
