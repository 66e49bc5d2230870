/* tree_transforms.c: transforms addressed by parameter tree instead of by
 * argnums and in_axes arrays built by hand: grad / value_and_grad over all
 * of a tree function's leaves, vmap with one axis for the whole tree or one
 * per subtree (JAX's in_axes given as a prefix of the tree), and
 * a call that takes a tree and gives the gradients back as one. */
#include <string.h>

#include "core/error.h"
#include "nn/nn_internal.h"
#include "trace/fn.h"

/* 0 .. np-1: the tree's leaves, which come first in a tree function */
static int *leaf_argnums(const char *call, cft_fn *f, const cft_tree *like, int *np, cft_fn **bad) {
    *bad = cft__fn_check(call, f);
    if (*bad)
        return NULL;
    if (!like || like->err || like->n < 1 || like->n > f->nin) {
        *bad = cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                            "%s: the tree %s (a tree function takes the tree's leaves first; "
                            "the function has %d inputs)",
                            call,
                            !like         ? "is NULL"
                            : like->err   ? cft_error_message(like->err)
                            : like->n < 1 ? "is empty"
                                          : "has more leaves than the function has inputs",
                            f->nin);
        return NULL;
    }
    *np = like->n;
    int *a = CFT_NEWN(int, like->n);
    for (int i = 0; a && i < like->n; i++)
        a[i] = i;
    return a;
}

cft_fn *cft_tree_grad(cft_fn *tree_fn, const cft_tree *like, bool has_aux) {
    CFT_API("cft_tree_grad");
    int np = 0;
    cft_fn *bad;
    int *a = leaf_argnums("cft_tree_grad", tree_fn, like, &np, &bad);
    if (!a)
        return bad ? bad : cft__fn_error(cft__oom(), tree_fn->nin, tree_fn->nout);
    return has_aux ? cft_grad_with_aux(tree_fn, a, np) : cft_grad(tree_fn, a, np);
}

cft_fn *cft_tree_value_and_grad(cft_fn *tree_fn, const cft_tree *like, bool has_aux) {
    CFT_API("cft_tree_value_and_grad");
    int np = 0;
    cft_fn *bad;
    int *a = leaf_argnums("cft_tree_value_and_grad", tree_fn, like, &np, &bad);
    if (!a)
        return bad ? bad : cft__fn_error(cft__oom(), tree_fn->nin, tree_fn->nout);
    return cft_value_and_grad(tree_fn, a, np, has_aux);
}

cft_fn *cft_tree_vmap(cft_fn *f, const cft_tree *like, int tree_axis, const int *rest_axes,
                      const int *out_axes) {
    CFT_API("cft_tree_vmap");
    int np = 0;
    cft_fn *bad;
    int *unused = leaf_argnums("cft_tree_vmap", f, like, &np, &bad);
    if (!unused)
        return bad ? bad : cft__fn_error(cft__oom(), f->nin, f->nout);
    int *axes = CFT_NEWN(int, f->nin + 1);
    if (!axes)
        return cft__fn_error(cft__oom(), f->nin, f->nout);
    for (int i = 0; i < f->nin; i++)
        axes[i] = i < np ? tree_axis : rest_axes ? rest_axes[i - np] : 0;
    return cft_vmap(f, axes, out_axes);
}

/* does the leaf `name` lie in the subtree `prefix` (itself, or "prefix.…")? */
static bool in_subtree(const char *name, const char *prefix) {
    size_t n = strlen(prefix);
    return strncmp(name, prefix, n) == 0 && (name[n] == 0 || name[n] == '.');
}

cft_fn *cft_tree_vmap_prefix(cft_fn *f, const cft_tree *like, int nrules,
                             const char *const *prefixes, const int *axes, int default_axis,
                             const int *rest_axes, const int *out_axes) {
    CFT_API("cft_tree_vmap_prefix");
    const char *call = "cft_tree_vmap_prefix";
    int np = 0;
    cft_fn *bad;
    int *unused = leaf_argnums(call, f, like, &np, &bad);
    if (!unused)
        return bad ? bad : cft__fn_error(cft__oom(), f->nin, f->nout);
    if (nrules < 0 || (nrules > 0 && (!prefixes || !axes)))
        return cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                            "%s: %d rules need their prefixes and axes (not NULL)", call, nrules);
    int *ax = CFT_NEWN(int, f->nin + 1);
    if (!ax)
        return cft__fn_error(cft__oom(), f->nin, f->nout);
    bool *used = CFT_NEWN(bool, nrules + 1);
    for (int i = 0; i < np; i++) {
        const char *name = like->names[i];
        int best = -1;
        for (int r = 0; r < nrules; r++) {
            if (!prefixes[r])
                return cft__fn_fail(f->nin, f->nout, CFT_E_ARG, "%s: prefix %d is NULL", call, r);
            if (in_subtree(name, prefixes[r]) &&
                (best < 0 || strlen(prefixes[r]) > strlen(prefixes[best])))
                best = r;
        }
        if (best >= 0)
            used[best] = true;
        ax[i] = best >= 0 ? axes[best] : default_axis;
    }
    for (int r = 0; r < nrules; r++)
        if (!used[r])
            return cft__fn_fail(f->nin, f->nout, CFT_E_ARG,
                                "%s: the prefix \"%s\" names no leaf of the tree (leaves are "
                                "named like \"%s\"; a prefix is a leaf's name or the part of it "
                                "before a '.')",
                                call, prefixes[r], like->names[0]);
    for (int i = np; i < f->nin; i++)
        ax[i] = rest_axes ? rest_axes[i - np] : 0;
    return cft_vmap(f, ax, out_axes);
}

cft_status cft_tree_call(cft_fn *f, const cft_tree *params, cft_array *const *rest,
                         const cft_tree *out_like, cft_tree **out_tree, cft_array **out_rest) {
    CFT_API("cft_tree_call");
    const char *call = "cft_tree_call";
    cft_array *e = NULL;
    if (!f || !params || (out_like && !out_tree))
        e = cft__fail(CFT_E_ARG, "%s: NULL %s", call,
                      !f        ? "function"
                      : !params ? "tree"
                                : "out_tree");
    else if (params->err)
        e = params->err;
    else if (out_like && out_like->err)
        e = out_like->err;
    else if (params->n > f->nin || (out_like && out_like->n > f->nout))
        e = cft__fail(CFT_E_ARG,
                      "%s: a tree of %d leaves for a function of %d inputs, or an output tree "
                      "of %d leaves for its %d outputs",
                      call, params->n, f->nin, out_like ? out_like->n : 0, f->nout);
    if (e) {
        if (out_tree)
            *out_tree = cft__tree_err(e);
        return cft__set_last(e);
    }
    cft_array **in = CFT_NEWN(cft_array *, f->nin + 1), **out = CFT_NEWN(cft_array *, f->nout + 1);
    if (!in || !out)
        return cft__set_last(cft__oom());
    cft_tree_flatten(params, in);
    for (int i = params->n; i < f->nin; i++)
        in[i] = rest ? rest[i - params->n] : NULL;
    cft_status st = cft_fn_call(f, in, out);
    int nt = out_like ? out_like->n : 0;
    if (out_like)
        *out_tree = st == CFT_OK ? cft_tree_unflatten(out_like, out) : cft__tree_err(out[0]);
    for (int j = nt; j < f->nout && out_rest; j++)
        out_rest[j - nt] = out[j];
    return st;
}
