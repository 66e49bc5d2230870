/* gemm_map.h: dot_general on contiguous row-major operands as one strided
 * batched GEMM, the call a GEMM library (cuBLAS's
 * cublas<t>gemmStridedBatched, or a loop of cblas_<t>gemm) makes. Shared
 * by the CUDA backend and the test backend (tests/support), which runs
 * the same mapping with OpenBLAS on its own memory, so every dot_general
 * of the per-primitive tests checks the mapping without a GPU.
 *
 * It applies when the batch dims lead both operands in order, and each
 * operand's other dims are its free dims (in order) then its contracted
 * dims (in the order of lc / rc), or the contracted dims then the free
 * ones (a transposed operand). The output, [batch, lhs free, rhs free],
 * is then C[t] = op(A[t]) op(B[t]) with C row-major [m, n]. Without batch
 * dims, the first free dim of one operand may be the batch instead, the
 * other operand shared (a zero stride): see cft_gemm_map. An f32
 * product's "precision" parameter (cft_matmul_precision) says whether
 * its operands may be rounded to TF32 or bf16 (cft_gemm_precision). */
#ifndef CFT_GEMM_MAP_H
#define CFT_GEMM_MAP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "array/device_plugin.h"
#include "cft/core.h"

typedef struct {
    bool ta, tb;            /* A stored [k, m] / B stored [n, k] (row-major) */
    int64_t m, n, k, batch; /* C[t] is [m, n]; t < batch */
    int64_t lda, ldb, ldc;  /* row-major leading dims */
    int64_t sa, sb, sc;     /* elements between consecutive products */
} cft_gemm_desc;

/* whether the non-batch dims of x (from nb on) are `first` then `second` */
static inline bool cft_gemm_dims_are(int nd, int nb, const int64_t *first, int nf,
                                     const int64_t *second, int ns) {
    if (nb + nf + ns != nd)
        return false;
    for (int i = 0; i < nf; i++)
        if (first[i] != nb + i)
            return false;
    for (int i = 0; i < ns; i++)
        if (second[i] != nb + nf + i)
            return false;
    return true;
}

/* the dims of an operand neither batch nor contracted, ascending, and the
 * product of their sizes */
static inline int cft_gemm_free(const cft_aval *x, const int64_t *c, int nc, int nb, int64_t *out,
                                int64_t *size) {
    int n = 0;
    *size = 1;
    for (int d = nb; d < x->ndim; d++) {
        bool contracted = false;
        for (int i = 0; i < nc; i++)
            contracted |= c[i] == d;
        if (!contracted)
            out[n++] = d, *size *= x->shape[d];
    }
    return n;
}

/* the mapping of dot_general[lc, rc, lb, rb] of a and b; false when it
 * does not apply (or a size is 0, or exceeds an int) */
static inline bool cft_gemm_map(const cft_aval *a, const cft_aval *b, const int64_t *lc,
                                const int64_t *rc, int nc, const int64_t *lb, const int64_t *rb,
                                int nb, cft_gemm_desc *d) {
    if (nb < 0 || nc < 0 || nb + nc > a->ndim || nb + nc > b->ndim || a->ndim > CFT_MAX_NDIM ||
        b->ndim > CFT_MAX_NDIM)
        return false;
    int64_t batch = 1, k = 1;
    for (int i = 0; i < nb; i++) {
        if (lb[i] != i || rb[i] != i || a->shape[i] != b->shape[i])
            return false;
        batch *= a->shape[i];
    }
    for (int i = 0; i < nc; i++) {
        if (lc[i] < nb || lc[i] >= a->ndim || rc[i] < nb || rc[i] >= b->ndim ||
            a->shape[lc[i]] != b->shape[rc[i]])
            return false;
        k *= a->shape[lc[i]];
    }
    int64_t fa[CFT_MAX_NDIM], fb[CFT_MAX_NDIM], m, n;
    int nfa = cft_gemm_free(a, lc, nc, nb, fa, &m), nfb = cft_gemm_free(b, rc, nc, nb, fb, &n);
    bool a_plain = cft_gemm_dims_are(a->ndim, nb, fa, nfa, lc, nc),
         a_trans = cft_gemm_dims_are(a->ndim, nb, lc, nc, fa, nfa),
         b_plain = cft_gemm_dims_are(b->ndim, nb, rc, nc, fb, nfb),
         b_trans = cft_gemm_dims_are(b->ndim, nb, fb, nfb, rc, nc);
    /* Without batch dims, one operand's first free dim may lead it as the
     * loop of a batch, the other operand shared (stride 0): vmap of a
     * product with one batched operand. Its products land interleaved in
     * the output ([a free, L, b free] or [L, a free, b free]). */
    int loop = 0; /* 1: a's first free dim, 2: b's */
    int64_t nl = 1;
    if ((!a_plain && !a_trans) || (!b_plain && !b_trans)) {
        if (nb != 0 || nfa < 1 || nfb < 1)
            return false;
        bool al_plain = fa[0] == 0 && cft_gemm_dims_are(a->ndim, 1, fa + 1, nfa - 1, lc, nc),
             al_trans = fa[0] == 0 && cft_gemm_dims_are(a->ndim, 1, lc, nc, fa + 1, nfa - 1),
             bl_plain = fb[0] == 0 && cft_gemm_dims_are(b->ndim, 1, rc, nc, fb + 1, nfb - 1),
             bl_trans = fb[0] == 0 && cft_gemm_dims_are(b->ndim, 1, fb + 1, nfb - 1, rc, nc);
        if ((al_plain || al_trans) && (b_plain || b_trans) && !a_plain && !a_trans)
            loop = 1, nl = a->shape[0], a_plain = al_plain, m /= nl > 0 ? nl : 1;
        else if ((bl_plain || bl_trans) && (a_plain || a_trans))
            loop = 2, nl = b->shape[0], b_plain = bl_plain, n /= nl > 0 ? nl : 1;
        else
            return false;
        batch = nl;
    }
    if (m <= 0 || n <= 0 || k <= 0 || batch <= 0 || m > INT_MAX || n > INT_MAX || k > INT_MAX ||
        batch > INT_MAX)
        return false;
    d->ta = !a_plain, d->tb = !b_plain;
    d->m = m, d->n = n, d->k = k, d->batch = batch;
    d->lda = d->ta ? m : k, d->ldb = d->tb ? k : n, d->ldc = n;
    d->sa = m * k, d->sb = k * n, d->sc = m * n;
    if (loop == 1) /* C [L, m, n]: A[t] = a[t], B shared */
        d->sb = 0;
    if (loop == 2) /* C [m, L, n]: A shared, B[t] = b[t], rows of C nl * n apart */
        d->sa = 0, d->ldc = nl * n, d->sc = n;
    return true;
}

/* the mapping of a backend's dot_general operation in f32, f64, f16 or
 * bf16 (operands and output of one dtype; a half product sums in f32),
 * read through api (the plugin links nothing of cft: it gets the
 * accessors) */
static inline bool cft_gemm_map_op(const cft_dev_op_api *api, const cft_dev_op *op,
                                   cft_gemm_desc *d) {
    int64_t lc[CFT_MAX_NDIM], rc[CFT_MAX_NDIM], lb[CFT_MAX_NDIM], rb[CFT_MAX_NDIM];
    if (strcmp(api->name(op), "dot_general") || api->nin(op) != 2)
        return false;
    int nc = api->param(op, "lc", lc, CFT_MAX_NDIM), nb = api->param(op, "lb", lb, CFT_MAX_NDIM);
    if (nc < 0 || nb < 0 || nc > CFT_MAX_NDIM || nb > CFT_MAX_NDIM ||
        api->param(op, "rc", rc, CFT_MAX_NDIM) != nc ||
        api->param(op, "rb", rb, CFT_MAX_NDIM) != nb)
        return false;
    cft_dev_buf a = api->in(op, 0), b = api->in(op, 1), c = api->out(op, 0);
    cft_dtype dt = c.aval.dtype;
    return (dt == CFT_F32 || dt == CFT_F64 || dt == CFT_F16 || dt == CFT_BF16) &&
           a.aval.dtype == dt && b.aval.dtype == dt &&
           cft_gemm_map(&a.aval, &b.aval, lc, rc, nc, lb, rb, nb, d);
}

/* the cft_matmul_precision an f32 product was issued under (0 when the
 * operation does not say) */
static inline int cft_gemm_precision(const cft_dev_op_api *api, const cft_dev_op *op) {
    int64_t p = 0;
    return api->param(op, "precision", &p, 1) == 1 && p > 0 && p <= 2 ? (int)p : 0;
}

#endif
