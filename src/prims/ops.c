/* ops.c: the public binary ops. They promote dtypes (cft_promote) and
 * broadcast NumPy-style with broadcast_in_dim, then bind the strict
 * elementwise primitives of binary.def. Also the scalar conveniences and
 * where(). */
#include "core/error.h"
#include "prims/rules.h"

#define CFT_BINARY(NAME, FEXPR, IEXPR, CEXPR, CLS, BOOLOUT, FLAGS, TAN, TRANS)                     \
    extern const cft_prim cft_p_##NAME;
#include "prims/binary.def"
#undef CFT_BINARY

/* broadcast the n operands to their common shape; NULL on success */
static cft_array *broadcast_all(const char *op, cft_array **xs, int n) {
    int nd = 0;
    for (int k = 0; k < n; k++)
        if (xs[k]->aval.ndim > nd)
            nd = xs[k]->aval.ndim;
    int64_t shape[CFT_MAX_NDIM];
    for (int i = 0; i < nd; i++)
        shape[i] = 1;
    for (int k = 0; k < n; k++) {
        const cft_aval *a = &xs[k]->aval;
        for (int i = 0; i < a->ndim; i++) {
            int64_t d = a->shape[i], *s = &shape[nd - a->ndim + i];
            if (d == *s || d == 1)
                continue;
            if (*s != 1) {
                if (n == 2)
                    return cft__fail(CFT_E_SHAPE, "%s: shapes do not broadcast: %s and %s", op,
                                     cft__av(&xs[0]->aval), cft__av(&xs[1]->aval));
                return cft__fail(CFT_E_SHAPE, "%s: shapes do not broadcast: %s, %s and %s", op,
                                 cft__av(&xs[0]->aval), cft__av(&xs[1]->aval),
                                 cft__av(&xs[2]->aval));
            }
            *s = d;
        }
    }
    for (int k = 0; k < n; k++)
        xs[k] = cft_broadcast_to(xs[k], shape, nd);
    return NULL;
}
cft_array *cft__broadcast_all(const char *op, cft_array **xs, int n) {
    return broadcast_all(op, xs, n);
}

static cft_array *binop(const char *op, const cft_prim *p, cft_array *a, cft_array *b) {
    CFT_PROPAGATE(op, a, b);
    cft_dtype dt = cft_promote(a->aval.dtype, b->aval.dtype);
    cft_array *xs[2] = {cft__convert(a, dt), cft__convert(b, dt)};
    cft_array *e = broadcast_all(op, xs, 2);
    if (e)
        return e;
    return cft__bind1(p, NULL, 2, xs);
}

#define PUBLIC(NAME, PRIM)                                                                         \
    cft_array *cft_##NAME(cft_array *a, cft_array *b) {                                            \
        return binop("cft_" #NAME, &cft_p_##PRIM, a, b);                                           \
    }
PUBLIC(add, add)
PUBLIC(sub, sub)
PUBLIC(mul, mul)
PUBLIC(div, div)
PUBLIC(pow, pow)
PUBLIC(maximum, max)
PUBLIC(minimum, min)
PUBLIC(atan2, atan2)
PUBLIC(eq, eq)
PUBLIC(ne, ne)
PUBLIC(lt, lt)
PUBLIC(le, le)
PUBLIC(gt, gt)
PUBLIC(ge, ge)
PUBLIC(rem, rem)
PUBLIC(nextafter, nextafter)
PUBLIC(copysign, copysign)
PUBLIC(bitwise_and, and)
PUBLIC(bitwise_or, or)
PUBLIC(bitwise_xor, xor)
PUBLIC(shift_left, shift_left)
PUBLIC(shift_right_logical, shift_right_logical)
PUBLIC(shift_right_arithmetic, shift_right_arithmetic)

/* the and/or primitives are bitwise on ints too; the logical ops keep to bools */
static cft_array *logical(const char *op, const cft_prim *p, cft_array *a, cft_array *b) {
    CFT_PROPAGATE(op, a, b);
    if (a->aval.dtype != CFT_BOOL || b->aval.dtype != CFT_BOOL)
        return cft__fail(CFT_E_DTYPE, "%s: operands must be bool, got %s and %s", op,
                         cft__av(&a->aval), cft__av(&b->aval));
    return binop(op, p, a, b);
}
cft_array *cft_logical_and(cft_array *a, cft_array *b) {
    CFT_API("cft_logical_and");
    return logical("cft_logical_and", &cft_p_and, a, b);
}
cft_array *cft_logical_or(cft_array *a, cft_array *b) {
    CFT_API("cft_logical_or");
    return logical("cft_logical_or", &cft_p_or, a, b);
}

cft_array *cft_add_s(cft_array *a, double s) {
    CFT_PROPAGATE("cft_add_s", a);
    return cft_add(a, cft_scalar(s, a->aval.dtype));
}
cft_array *cft_mul_s(cft_array *a, double s) {
    CFT_PROPAGATE("cft_mul_s", a);
    return cft_mul(a, cft_scalar(s, a->aval.dtype));
}

cft_array *cft_where(cft_array *cond, cft_array *a, cft_array *b) {
    CFT_PROPAGATE("cft_where", cond, a, b);
    if (cond->aval.dtype != CFT_BOOL)
        return cft__fail(CFT_E_DTYPE, "cft_where: condition must be bool, got %s",
                         cft__av(&cond->aval));
    cft_dtype dt = cft_promote(a->aval.dtype, b->aval.dtype);
    cft_array *xs[3] = {cond, cft__convert(a, dt), cft__convert(b, dt)};
    cft_array *e = broadcast_all("cft_where", xs, 3);
    if (e)
        return e;
    return cft__select(xs[0], xs[1], xs[2]);
}
