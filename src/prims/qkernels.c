/* qkernels.c: the kernels the static int8 primitives share (qstatic.c,
 * qconv.c): rows of activations rounded to u8 (from floats, or from
 * floats already on the activation's grid), the activation's scale and
 * zero point checked, and the integer product through an f32 GEMM where
 * oneDNN's u8 GEMM would saturate. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/par.h"
#include "core/vec.h"
#include "prims/qlinear.h"
#include "prims/rules.h"

typedef struct {
    const void *x;
    bool dbl;
    int64_t k;
    double xs, zp, lo, hi;
    bool grid;    /* x is on the grid already: round and clamp only */
    uint8_t *xq;  /* [M, K] */
    uint8_t *nan; /* [M]: the row held a NaN */
} qrows;

/* q = clamp(round(x / xs) + zp, lo, hi), half to even (the default
 * rounding mode), the division in x's dtype as cft_fake_quantize's (or
 * clamp(round(x), lo, hi) for x on the grid: V); a row's NaNs are noted */
#define QROW(T, V)                                                                                 \
    const int64_t k = c->k; /* a local: the u8 stores could alias c->k, keeping the loop scalar */ \
    for (int64_t m = lo; m < hi; m++) {                                                            \
        const T *restrict xr = (const T *)c->x + m * k;                                            \
        uint8_t *restrict q = c->xq + m * k;                                                       \
        int bad = 0;                                                                               \
        for (int64_t j = 0; j < k; j++) {                                                          \
            T v = V;                                                                               \
            bad |= v != v;                                                                         \
            v = v < b ? v : b;                                                                     \
            v = v > a ? v : a;                                                                     \
            q[j] = (uint8_t)(int32_t)v;                                                            \
        }                                                                                          \
        c->nan[m] = (uint8_t)bad;                                                                  \
    }
static CFT_VEC void qrows_f32(qrows *c, int64_t lo, int64_t hi) {
    const float xs = (float)c->xs, zp = (float)c->zp, a = (float)c->lo, b = (float)c->hi;
    QROW(float, nearbyintf(xr[j] / xs) + zp)
}
static CFT_VEC void grows_f32(qrows *c, int64_t lo, int64_t hi) {
    const float a = (float)c->lo, b = (float)c->hi;
    QROW(float, nearbyintf(xr[j]))
}
static CFT_VEC void qrows_f64(qrows *c, int64_t lo, int64_t hi) {
    const double xs = c->xs, zp = c->zp, a = c->lo, b = c->hi;
    QROW(double, nearbyint(xr[j] / xs) + zp)
}
static CFT_VEC void grows_f64(qrows *c, int64_t lo, int64_t hi) {
    const double a = c->lo, b = c->hi;
    QROW(double, nearbyint(xr[j]))
}
static void qrows_body(void *ctx, int64_t lo, int64_t hi) {
    qrows *c = ctx;
    if (c->grid && c->dbl)
        grows_f64(c, lo, hi);
    else if (c->grid)
        grows_f32(c, lo, hi);
    else if (c->dbl)
        qrows_f64(c, lo, hi);
    else
        qrows_f32(c, lo, hi);
}

/* acc = (xq - zp) wq^T through an f32 GEMM of the integers (where oneDNN's
 * u8 GEMM could saturate), in a block of rows per thread (each block packs
 * the weight again: few large blocks), in per-thread scratch (fresh blocks
 * cost more in page faults than their work). The sums are exact, whatever the
 * blocks, while they stay below 2^24 (K <= 514 always). */
typedef struct {
    int64_t M, N, K, rows;
    const uint8_t *xq;
    float zp;
    const float *b; /* [N, K] */
    int32_t *acc;
    bool oom;
} fgemm;

static CFT_VEC void to_float(const uint8_t *q, float zp, float *a, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)q[i] - zp;
}
static CFT_VEC void s8_to_float(const int8_t *q, float *a, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)q[i];
}
/* the sums are integers (exact in f32 below 2^24; rounded beyond, where
 * any order of sums rounds) */
static CFT_VEC void to_int(const float *c, int32_t *acc, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        acc[i] = (int32_t)c[i];
}

static void fgemm_body(void *ctx, int64_t lo, int64_t hi) {
    fgemm *g = ctx;
    size_t oc = ((size_t)(g->rows * g->K) * 4 + 63) / 64 * 64;
    char *buf = cft__qscratch(CFT_SCRATCH_QBLK, oc + (size_t)(g->rows * g->N) * 4);
    if (!buf) {
        g->oom = true;
        return;
    }
    float *a = (float *)buf, *c = (float *)(buf + oc);
    for (int64_t blk = lo; blk < hi; blk++) {
        int64_t m0 = blk * g->rows, m = g->M - m0 < g->rows ? g->M - m0 : g->rows;
        to_float(g->xq + m0 * g->K, g->zp, a, m * g->K);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)g->N, (int)g->K, 1.0f, a,
                    (int)g->K, g->b, (int)g->K, 0.0f, c, (int)g->N);
        to_int(c, g->acc + m0 * g->N, m * g->N);
    }
}

bool cft__qgemm_f32(int64_t M, int64_t N, int64_t K, const uint8_t *xq, int32_t zp,
                    const int8_t *wq, int64_t ldw, int32_t *acc) {
    float *b = cft__qscratch(CFT_SCRATCH_QW, sizeof(float) * (size_t)(N * K > 0 ? N * K : 1));
    if (!b)
        return false;
    for (int64_t n = 0; n < N; n++)
        s8_to_float(wq + n * ldw, b + n * K, K);
    int nth = cft__num_threads();
    int64_t rows = (M + nth - 1) / nth;
    rows = rows < 16 ? 16 : rows;
    fgemm g = {M, N, K, rows, xq, (float)zp, b, acc, false};
    cft__par_for((M + rows - 1) / rows, 2.0 * (double)rows * (double)N * (double)K, fgemm_body, &g);
    return !g.oom;
}

bool cft__qgemm_exact(int64_t M, int64_t N, int64_t K, const uint8_t *xq, int32_t ao,
                      const int8_t *wq, int64_t ldw, int32_t *acc, double xhi) {
    if (xhi > 127 && !cft__qgemm_exact_u8())
        return cft__qgemm_f32(M, N, K, xq, ao, wq, ldw, acc);
    cft__qgemm(M, N, K, xq, ao, wq, ldw, acc);
    return true;
}

cft_array *cft__qact(const char *op, const cft_array *xs_a, const cft_array *zp_a, double lo,
                     double hi, double *xs, double *zp) {
    *xs = cft__get(cft__ptr(xs_a), xs_a->aval.dtype, 0);
    *zp = cft__get(cft__ptr(zp_a), zp_a->aval.dtype, 0);
    if (!(*xs > 0) || isinf(*xs))
        return cft__fail(CFT_E_ARG, "%s: the activation's scale %g is not a positive number", op,
                         *xs);
    if (!(*zp >= lo && *zp <= hi) || *zp != nearbyint(*zp))
        return cft__fail(CFT_E_ARG,
                         "%s: the activation's zero point %g is not an integer in [%g, %g]", op,
                         *zp, lo, hi);
    return NULL;
}

void cft__qrows(const void *x, bool dbl, int64_t rows, int64_t k, double xs, double zp, double lo,
                double hi, bool grid, uint8_t *xq, uint8_t *nan) {
    qrows qr = {x, dbl, k, xs, zp, lo, hi, grid, xq, nan};
    cft__par_for(rows, 4.0 * (double)k, qrows_body, &qr);
}
void cft__qrows_range(const void *x, bool dbl, int64_t k, double xs, double zp, double lo,
                      double hi, bool grid, uint8_t *xq, uint8_t *nan, int64_t r0, int64_t r1) {
    qrows qr = {x, dbl, k, xs, zp, lo, hi, grid, xq, nan};
    qrows_body(&qr, r0, r1);
}

cft_array *cft__qoperands(const cft_prim *prim, cft_array *const *in, const cft_params *p,
                          double lo, double hi, cft_array **xqs, cft_aval *oa, double *xs,
                          double *zp) {
    for (int i = 0; i < 3; i++) {
        xqs[i] = cft__contig(in[i]);
        if (cft_failed(xqs[i]))
            return xqs[i];
    }
    cft_array *e = prim->shape(
        (cft_aval[]){xqs[0]->aval, xqs[1]->aval, xqs[2]->aval, in[3]->aval, in[4]->aval}, 5, p, oa);
    return e ? e : cft__qact(prim->name, in[3], in[4], lo, hi, xs, zp);
}
