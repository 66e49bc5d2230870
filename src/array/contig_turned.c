/* contig_turned.c: cft__contig's copy of an array whose next-to-last dim
 * is contiguous and whose last dim is strided: a transposed matrix, or a
 * batch of them, as the operands a product gets from the backward pass
 * (x^T, W^T) are. The element-by-element copy reads one element a cache
 * line there; this one goes by square tiles on cft's threads, each by 8 x 8
 * blocks turned in registers (a 1024 x 1024 bf16 matrix: 189 us, where
 * 32 x 32 tiles element by element took 550: rows of a power-of-two
 * length fall in the same cache sets, and only a block's 8 lines a side
 * stay). */
#include "array/array.h"
#include "core/par.h"
#include "core/vec.h"

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

/* a TILE x TILE tile, by 8 x 8 blocks through a local block (the loads
 * along the contiguous dim, the stores along the rows), then the edges */
#define TURN_TILE(T)                                                                               \
    for (int64_t c0 = 0; c0 < j->Cn; c0 += TILE) {                                                 \
        int64_t c1 = c0 + TILE < j->Cn ? c0 + TILE : j->Cn;                                        \
        const T *s = (const T *)src;                                                               \
        T *d = (T *)dst;                                                                           \
        int64_t rb = r0 + (r1 - r0) / 8 * 8, cb = c0 + (c1 - c0) / 8 * 8;                          \
        for (int64_t r = r0; r < rb; r += 8)                                                       \
            for (int64_t c = c0; c < cb; c += 8) {                                                 \
                T v[8][8];                                                                         \
                for (int k = 0; k < 8; k++)                                                        \
                    for (int i = 0; i < 8; i++)                                                    \
                        v[k][i] = s[r + i + (c + k) * j->istr];                                    \
                for (int i = 0; i < 8; i++)                                                        \
                    for (int k = 0; k < 8; k++)                                                    \
                        d[(r + i) * j->Cn + c + k] = v[k][i];                                      \
            }                                                                                      \
        for (int64_t r = r0; r < r1; r++)                                                          \
            for (int64_t c = r < rb ? cb : c0; c < c1; c++)                                        \
                d[r * j->Cn + c] = s[r + c * j->istr];                                             \
    }

static CFT_VEC void turn_body(void *ctx, int64_t lo, int64_t hi) {
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
