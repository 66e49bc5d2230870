/* contig_turned.c: cft__contig's copy of an array whose next-to-last dim
 * is contiguous and whose last dim is strided: a transposed matrix, or a
 * batch of them, as the operands a product gets from the backward pass
 * (x^T, W^T) are. The element-by-element copy reads one element a cache
 * line there; this one goes by square tiles, read along the contiguous
 * dim and written along the rows within each, on cft's threads. */
#include "array/array.h"
#include "core/par.h"

enum { TILE = 32 };

typedef struct {
    const char *src; /* element 0 of x */
    char *dst;
    int64_t R, Cn, istr; /* per matrix: rows R (stride 1 in x), columns Cn (stride istr) */
    int64_t nrt;         /* row tiles a matrix */
    int nb;              /* batch dims: shape and strides */
    int64_t bshape[CFT_MAX_NDIM], bstr[CFT_MAX_NDIM];
    size_t es;
} turn;

#define TURN_TILE(T)                                                                               \
    for (int64_t c0 = 0; c0 < j->Cn; c0 += TILE) {                                                 \
        int64_t c1 = c0 + TILE < j->Cn ? c0 + TILE : j->Cn;                                        \
        for (int64_t c = c0; c < c1; c++)                                                          \
            for (int64_t r = r0; r < r1; r++)                                                      \
                ((T *)dst)[r * j->Cn + c] = ((const T *)src)[r + c * j->istr];                     \
    }

static void turn_body(void *ctx, int64_t lo, int64_t hi) {
    const turn *j = ctx;
    for (int64_t it = lo; it < hi; it++) {
        int64_t b = it / j->nrt, r0 = it % j->nrt * TILE, r1 = r0 + TILE < j->R ? r0 + TILE : j->R;
        int64_t off = 0, rem = b;
        for (int d = j->nb - 1; d >= 0; d--)
            off += rem % j->bshape[d] * j->bstr[d], rem /= j->bshape[d];
        const char *src = j->src + off * (int64_t)j->es;
        char *dst = j->dst + b * j->R * j->Cn * (int64_t)j->es;
        switch (j->es) {
        case 1:
            TURN_TILE(uint8_t)
            break;
        case 2:
            TURN_TILE(uint16_t)
            break;
        case 4:
            TURN_TILE(uint32_t)
            break;
        default:
            TURN_TILE(uint64_t)
        }
    }
}

bool cft__contig_turned(const cft_array *x, void *dst) {
    int nd = x->aval.ndim;
    size_t es = cft_dtype_size(x->aval.dtype);
    if (nd < 2 || x->strides[nd - 2] != 1 || x->strides[nd - 1] == 1 || es > 8 ||
        x->aval.shape[nd - 2] < 2)
        return false;
    turn j = {cft__ptr(x),
              dst,
              x->aval.shape[nd - 2],
              x->aval.shape[nd - 1],
              x->strides[nd - 1],
              0,
              nd - 2,
              {0},
              {0},
              es};
    j.nrt = (j.R + TILE - 1) / TILE;
    int64_t nb = 1;
    for (int d = 0; d < nd - 2; d++)
        j.bshape[d] = x->aval.shape[d], j.bstr[d] = x->strides[d], nb *= x->aval.shape[d];
    cft__par_for(nb * j.nrt, (double)(TILE * j.Cn * (int64_t)es), turn_body, &j);
    return true;
}
