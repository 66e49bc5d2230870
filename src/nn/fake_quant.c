/* fake_quant.c: the fake-quantize operation (quantize to an integer grid
 * and back in one step) and PT2E's X86 quantizer as data. The operation
 * is a composite of public ops, so it is differentiable (the straight-
 * through estimator: stop_gradient around the rounding), batchable, fused
 * by the jit and exported as plain primitives. */
#include "cft/quant.h"
#include "nn/nn_internal.h"
#include "prims/rules.h"

cft_quantizer cft_quantizer_x86(void) {
    cft_quantizer q = {0};
    q.nops = 2;
    q.ops[0] = (cft_quant_op){"dot_general", 1, -1};
    q.ops[1] = (cft_quant_op){"conv_general_dilated", 1, 0};
    q.activation = (cft_quant_spec){8, false, false, CFT_OBS_MOVING_AVERAGE, 0.01, 99.99};
    q.weight = (cft_quant_spec){8, true, true, CFT_OBS_MINMAX, 0.01, 99.99};
    return q;
}

/* s (a scalar, or [n] along x's axis) shaped to broadcast against x */
static cft_array *along(const char *op, cft_array *s, cft_array *x, int axis) {
    int nd = cft_array_ndim(x);
    if (cft_array_ndim(s) == 0)
        return s;
    int a = axis < 0 ? axis + nd : axis;
    if (cft_array_ndim(s) != 1 || a < 0 || a >= nd ||
        cft_array_shape(s)[0] != cft_array_shape(x)[a])
        return cft__fail(CFT_E_SHAPE, "%s: per-channel %s does not fit axis %d of %s", op,
                         cft__nn_av(s), axis, cft__nn_av(x));
    int64_t shape[CFT_MAX_NDIM];
    for (int d = 0; d < nd; d++)
        shape[d] = d == a ? cft_array_shape(x)[a] : 1;
    return cft_reshape(s, shape, nd);
}

cft_array *cft_fake_quantize(cft_array *x, cft_array *scale, cft_array *zero_point, int axis,
                             int64_t qmin, int64_t qmax) {
    const char *op = "cft_fake_quantize";
    CFT_PROPAGATE(op, x, scale, zero_point);
    if (qmin > qmax)
        return cft__fail(CFT_E_ARG, "%s: qmin %lld above qmax %lld", op, (long long)qmin,
                         (long long)qmax);
    if (!cft_dtype_is_float(cft_array_dtype(x)))
        return cft__fail(CFT_E_DTYPE, "%s: %s is not float", op, cft__nn_av(x));
    cft_dtype dt = cft_array_dtype(x);
    cft_array *s = along(op, cft_astype(scale, dt), x, axis);
    cft_array *z = along(op, cft_astype(zero_point, dt), x, axis);
    if (cft_failed(s) || cft_failed(z))
        return cft_failed(s) ? s : z;
    cft_array *q = cft_add(cft__round_half_even(cft_div(x, s)), z);
    cft_array *lo = cft__nn_sc(x, (double)qmin), *hi = cft__nn_sc(x, (double)qmax);
    cft_array *fq = cft_mul(cft_sub(cft_clamp(q, lo, hi), z), s);
    cft_array *inside = cft_logical_and(cft_ge(q, lo), cft_le(q, hi));
    /* fq's value exactly (x - x is 0), with derivative 1 inside the grid's
     * range and 0 outside: the straight-through estimator */
    cft_array *m = cft_stop_gradient(cft_astype(inside, dt));
    return cft_add(cft_stop_gradient(fq), cft_mul(cft_sub(x, cft_stop_gradient(x)), m));
}
