/* tree_fn.c: functional_call for C: a cft_fn over a tree's flattened leaves
 * plus more inputs, whose callback receives the leaves rebuilt into a tree,
 * so every transform sees plain arrays while the model code sees names. */
#include "core/error.h"
#include "nn/nn_internal.h"
#include "trace/fn.h"

typedef struct {
    cft_tree_fn_cb cb;
    void *env;
    const cft_tree *like;
    int nin;
} tree_fn_env;

static cft_status tree_fn_call(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    tree_fn_env *te = env;
    int np = te->like->n;
    cft_tree *params = cft_tree_unflatten(te->like, in);
    if (params->err) {
        for (int j = 0; j < nout; j++)
            out[j] = params->err;
        return cft__set_last(params->err);
    }
    return te->cb(te->env, params, nin - np, in + np, nout, out);
}

cft_fn *cft_tree_fn_new(cft_tree_fn_cb cb, void *env, const cft_tree *like, int nin, int nout) {
    CFT_API("cft_tree_fn_new");
    cft_array *e = NULL;
    if (!like)
        e = cft__fail(CFT_E_ARG, "cft_tree_fn_new: NULL tree");
    else if (like->err)
        e = like->err;
    else if (!cb || nin < 0 || nout < 1)
        e = cft__fail(CFT_E_ARG, "cft_tree_fn_new: bad arguments (nin=%d, nout=%d)", nin, nout);
    int np = cft_tree_size(like);
    if (e)
        return cft__fn_error(e, np + (nin > 0 ? nin : 0), nout > 0 ? nout : 1);
    tree_fn_env *te = CFT_NEW(tree_fn_env);
    if (!te)
        return cft__fn_error(cft__oom(), np + nin, nout);
    *te = (tree_fn_env){cb, env, like, nin};
    return cft_fn_new(tree_fn_call, te, np + nin, nout);
}
