/* dp_clip.c: cft_dp_clipped_grad_sum, DP-SGD's sum of per-example
 * gradients each clipped to a total L2 norm, written the obvious way
 * (vmap(grad), per-example norms over every parameter, clip factors, a
 * weighted sum over the batch) and compiled by cft_jit, whose rewrite pass
 * turns it into the norms and sums of the factors for dense layers (and
 * for convolutions where that pays, prims/conv_dp.c), so the [B,
 * parameters] gradients are never formed there. */
#include <stdlib.h>

#include "cft/cft.h"
#include "core/error.h"
#include "core/mem.h"
#include "trace/fn.h"

typedef struct {
    cft_fn *psg; /* vmap(grad(loss)) over the batch inputs */
    int np, nb;
    double clip;
} clip_env;

/* (params..., batch...) -> (sum_i clip(g_i) per parameter...) */
static cft_status clipped_sum(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    clip_env *e = env;
    cft_array **g = CFT_NEWN(cft_array *, e->np + 1);
    cft_status st = cft_fn_call(e->psg, in, g);
    if (st != CFT_OK)
        return st;
    int64_t B = cft_array_dim(g[0], 0);
    cft_array *sq = NULL;
    for (int l = 0; l < e->np; l++) {
        int nd = cft_array_ndim(g[l]), axes[CFT_MAX_NDIM];
        for (int i = 1; i < nd; i++)
            axes[i - 1] = i;
        cft_array *s = nd > 1 ? cft_sum(cft_square(g[l]), axes, nd - 1, false) : cft_square(g[l]);
        sq = sq ? cft_add(sq, s) : s;
    }
    cft_dtype dt = cft_array_dtype(sq);
    cft_array *scale = cft_minimum(cft_scalar(1, dt),
                                   cft_div(cft_scalar(e->clip, dt), cft_add_s(cft_sqrt(sq), 1e-6)));
    for (int l = 0; l < e->np; l++) {
        int nd = cft_array_ndim(g[l]);
        int64_t bs[CFT_MAX_NDIM] = {B};
        for (int i = 1; i < nd; i++)
            bs[i] = 1;
        cft_array *w = cft_reshape(cft_astype(scale, cft_array_dtype(g[l])), bs, nd);
        out[l] = cft_sum(cft_mul(g[l], w), (int[]){0}, 1, false);
    }
    return CFT_OK;
}

cft_fn *cft_dp_clipped_grad_sum(cft_fn *loss, int nparams, double clip) {
    CFT_API("cft_dp_clipped_grad_sum");
    cft_fn *bad = cft__fn_check("cft_dp_clipped_grad_sum", loss);
    if (bad)
        return bad;
    int nin = cft_fn_nin(loss);
    if (nparams < 1 || nparams >= nin || nparams > 4096)
        return cft__fn_fail(nin, nparams > 0 ? nparams : 1, CFT_E_ARG,
                            "cft_dp_clipped_grad_sum: nparams = %d, but the loss takes %d inputs "
                            "(parameters first, then at least one batch input)",
                            nparams, nin);
    if (cft_fn_nout(loss) != 1)
        return cft__fn_fail(nin, nparams, CFT_E_ARG,
                            "cft_dp_clipped_grad_sum: the loss has %d outputs, not one scalar",
                            cft_fn_nout(loss));
    if (!(clip > 0) || clip > 1e300)
        return cft__fn_fail(nin, nparams, CFT_E_ARG,
                            "cft_dp_clipped_grad_sum: the clipping norm %g is not a finite "
                            "number > 0",
                            clip);
    clip_env *e = CFT_NEW(clip_env);
    int *argnums = CFT_NEWN(int, nparams + 1), *in_axes = CFT_NEWN(int, nin + 1);
    for (int i = 0; i < nin; i++)
        in_axes[i] = i < nparams ? CFT_NOT_BATCHED : 0;
    for (int i = 0; i < nparams; i++)
        argnums[i] = i;
    e->psg = cft_vmap(cft_grad(loss, argnums, nparams), in_axes, NULL);
    e->np = nparams, e->nb = nin - nparams, e->clip = clip;
    return cft_jit(cft_fn_named(cft_fn_new(clipped_sum, e, nin, nparams), "dp_clipped_grad_sum"));
}
