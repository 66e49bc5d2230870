/* half_into.c: a primitive's impl_into with bf16 / f16 operands or output
 * (CFT_PRIM_INTO_HALF: the jit's plans and row segments call impl_into
 * then too) by its own f32 path over per-thread scratch: the float
 * operands widened, the f32 result rounded once into the output. The
 * arithmetic of cft__run_impl's widening path, without its fresh arrays
 * (the widened operands, an f32 result, a half result), which cost tiny
 * products more in allocation and collection than in arithmetic. Also
 * the same with the result left in f32, each value rounded to the half
 * dtype (cft__into_widened_wide: the jit's fold of a product and its
 * conversion back to f32). */
#include <string.h>

#include "core/mem.h"
#include "prims/rules.h"

/* a contiguous f32 array over scratch memory, shaped as av */
static cft_array *f32_over(const cft_aval *av, float *data) {
    cft_array *h = CFT_NEW(cft_array);
    if (!h)
        return NULL;
    h->kind = CFT_K_CONCRETE;
    h->aval = *av;
    h->aval.dtype = CFT_F32;
    cft__row_major(h->aval.shape, h->aval.ndim, h->strides);
    h->data = (char *)data;
    return h;
}

/* p's impl_into on the half operands widened into scratch, into out, or
 * (out a half array) into scratch rounded once into out; then, when
 * `round` is a half dtype, out's f32 values rounded to it in place */
static cft_array *run_widened(const cft_prim *p, cft_array *const *in, int nin,
                              const cft_params *par, cft_array *out, cft_dtype round) {
    int64_t n[nin + 1], total = 1;
    for (int i = 0; i <= nin; i++) {
        const cft_array *x = i < nin ? in[i] : out;
        n[i] = cft_dtype_is_half(x->aval.dtype) ? cft__numel(x->aval.shape, x->aval.ndim) : 0;
        total += n[i];
    }
    float *buf = cft__scratch(CFT_SCRATCH_HALF, sizeof(float) * (size_t)total, (size_t)1 << 30);
    if (!buf)
        return cft__oom();
    cft_array *w[nin + 1];
    int64_t off = 0;
    for (int i = 0; i <= nin; i++) {
        cft_array *x = i < nin ? in[i] : out;
        w[i] = x;
        if (!n[i])
            continue;
        if (!(w[i] = f32_over(&x->aval, buf + off)))
            return cft__oom();
        if (i < nin) {
            cft_array *xc = cft__contig(x);
            if (cft_failed(xc))
                return xc;
            cft__cast(cft__ptr(xc), xc->aval.dtype, buf + off, CFT_F32, n[i]);
            cft__keep(xc);
        }
        off += n[i];
    }
    cft_array *e = p->impl_into(w, nin, par, w[nin]);
    if (!e && n[nin])
        cft__cast(buf + off - n[nin], CFT_F32, cft__ptr(out), out->aval.dtype, n[nin]);
    if (!e && cft_dtype_is_half(round))
        cft__round_half(cft__ptr(out), round, cft__numel(out->aval.shape, out->aval.ndim));
    return e;
}

cft_array *cft__into_widened(const cft_prim *p, cft_array *const *in, int nin,
                             const cft_params *par, cft_array *out) {
    if (!cft__is_contig(out))
        return cft__fail(CFT_E_ARG, "%s: a strided half output %s", p->name, cft__av(&out->aval));
    return run_widened(p, in, nin, par, out, CFT_F32);
}

cft_array *cft__into_widened_wide(const cft_prim *p, cft_array *const *in, int nin,
                                  const cft_params *par, cft_dtype half, cft_array *out) {
    if (!cft__is_contig(out) || out->aval.dtype != CFT_F32 || !cft_dtype_is_half(half))
        return cft__fail(CFT_E_ARG, "%s: a widened half output %s", p->name, cft__av(&out->aval));
    return run_widened(p, in, nin, par, out, half);
}
