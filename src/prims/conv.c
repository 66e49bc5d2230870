/* conv.c: conv_general_dilated, the convolution primitive of jax.lax, and
 * rev (reverse dims), which its lhs transpose needs to flip the kernel.
 *
 * Dimension numbers are fixed: lhs [N, C, spatial...], rhs [O, I, spatial...],
 * out [N / batch_group_count, O, spatial...], 0 to 3 spatial dims. Parameters:
 * window strides, lo/hi padding per spatial dim (negative crops), lhs
 * dilation (holes between input elements: a transposed convolution), rhs
 * dilation (holes between kernel taps: atrous), feature_group_count G (C =
 * G*I, O split into G groups) and batch_group_count B (N split into B groups
 * of N/B samples, group-major; O split likewise; C = I). The rules are
 * jax.lax's: jvp by linearity in each operand, transposes that are
 * convolutions again (flipped kernel with the strides as lhs dilation for
 * the lhs; lhs with the cotangent as kernel, groups becoming batch groups
 * and back, for the rhs), batching that folds the vmapped dim into N, O or
 * the feature / batch groups.
 *
 * Eager kernel (floats): per group, im2col into a per-thread scratch buffer
 * (reading the lhs through its strides, so transposed views cost nothing)
 * and OpenBLAS GEMM of the group's kernel rows [O/groups, I*taps] with the
 * columns: one GEMM per sample straight into the output when a sample has
 * ROW_GEMM output positions or more, else one per chunk of samples,
 * unpacked after. Short rows gather through a precomputed offset map,
 * long ones copy runs. A direct loop measured slower than this at every
 * size down to 288 multiply-adds (docs/implementation.md), so only the
 * integer dtypes use one (accumulating in int64). */
#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "array/device.h"
#include "core/error.h"
#include "core/par.h"
#include "core/vec.h"
#include "prims/conv_dnnl.h"
#include "prims/conv_geom.h"
#include "prims/conv_dp.h"
#include "prims/matmul_dnnl.h"
#include "prims/rules.h"

enum { CS, CP, CLD, CRD, CFG, CBG }; /* parameter slots */
enum { MAXSP = CFT_CONV_MAXSP };
typedef cft_conv_geom geom;

static int64_t dilate(int64_t n, int64_t d) {
    return n == 0 ? 0 : (n - 1) * d + 1;
}

/* Group counts and N, C, O may be symbolic (vmap folds a symbolic batch
 * into them); a symbolic count stands for one >= 2, so "> 1" holds for it
 * (the grouped code paths are right for one group too). */
static bool gt1(int64_t n) {
    return n > 1 || cft_dim_is_symbolic(n);
}

/* the non-spatial part of cft__conv_geometry() when a dim or count is symbolic */
static cft_array *geometry_sym(const cft_aval *a, const cft_aval *b, geom *g) {
    const char *nm = "conv_general_dilated";
    bool okG = cft_dim_valid(g->G) && g->G != 0, okB = cft_dim_valid(g->B) && g->B != 0;
    if (!okG || !okB || (gt1(g->G) && gt1(g->B)))
        return cft__fail(CFT_E_ARG,
                         "%s: feature_group_count %s and batch_group_count %s must be "
                         ">= 1, not both > 1 (%s * %s)",
                         nm, cft__dim_s(g->G), cft__dim_s(g->B), cft__av(a), cft__av(b));
    g->K = cft_dim_mul(g->G, g->B);
    g->Oq = cft_dim_div(g->O, g->K);
    g->Nq = cft_dim_div(g->N, g->B);
    if (cft_dim_mul(g->G, g->Ig) != g->C || g->Oq == CFT_DIM_INVALID || g->Nq == CFT_DIM_INVALID ||
        cft_dim_div(g->O, g->G) == CFT_DIM_INVALID)
        return cft__fail(
            CFT_E_SHAPE,
            "%s: lhs %s and rhs %s do not fit feature_group_count %s, "
            "batch_group_count %s (need C = groups*I, O and N divisible by the groups)",
            nm, cft__av(a), cft__av(b), cft__dim_s(g->G), cft__dim_s(g->B));
    return NULL;
}

cft_array *cft__conv_geometry(const cft_aval *a, const cft_aval *b, const cft_params *p, geom *g) {
    const char *nm = "conv_general_dilated";
    int nsp = p->n[CS];
    if (a->dtype != b->dtype)
        return cft__fail(CFT_E_DTYPE, "%s: dtypes differ: %s * %s", nm, cft__av(a), cft__av(b));
    if (a->dtype == CFT_BOOL)
        return cft__fail(CFT_E_DTYPE, "%s: bool operands %s * %s", nm, cft__av(a), cft__av(b));
    if (cft_dtype_is_complex(a->dtype))
        return cft__fail(CFT_E_DTYPE, "%s: complex operands are not supported: %s * %s", nm,
                         cft__av(a), cft__av(b));
    if (nsp < 0 || nsp > MAXSP || a->ndim != nsp + 2 || b->ndim != nsp + 2 || p->n[CP] != 2 * nsp ||
        p->n[CLD] != nsp || p->n[CRD] != nsp || p->n[CFG] != 1 || p->n[CBG] != 1)
        return cft__fail(CFT_E_SHAPE,
                         "%s: lhs %s and rhs %s need rank %d (N C spatial / O I spatial, "
                         "0 to 3 spatial dims) and parameters for %d spatial dims",
                         nm, cft__av(a), cft__av(b), nsp + 2, nsp);
    memset(g, 0, sizeof *g);
    g->nsp = nsp;
    g->N = a->shape[0], g->C = a->shape[1], g->O = b->shape[0], g->Ig = b->shape[1];
    g->G = p->v[CFG][0], g->B = p->v[CBG][0];
    for (int i = 2; i < nsp + 2; i++)
        if (cft_dim_is_symbolic(a->shape[i]) || cft_dim_is_symbolic(b->shape[i]))
            return cft__fail(CFT_E_SHAPE,
                             "%s: symbolic spatial dims are not supported (%s * %s): "
                             "output sizes would need floor division",
                             nm, cft__av(a), cft__av(b));
    bool sym = cft_dim_is_symbolic(g->N) || cft_dim_is_symbolic(g->C) ||
               cft_dim_is_symbolic(g->O) || cft_dim_is_symbolic(g->Ig) ||
               cft_dim_is_symbolic(g->G) || cft_dim_is_symbolic(g->B);
    if (sym) {
        cft_array *e = geometry_sym(a, b, g);
        if (e)
            return e;
    } else {
        if (g->G < 1 || g->B < 1 || (g->G > 1 && g->B > 1))
            return cft__fail(CFT_E_ARG,
                             "%s: feature_group_count %lld and batch_group_count %lld must be "
                             ">= 1, not both > 1 (%s * %s)",
                             nm, (long long)g->G, (long long)g->B, cft__av(a), cft__av(b));
        if (g->C != g->G * g->Ig || g->O % g->G || g->O % g->B || g->N % g->B)
            return cft__fail(
                CFT_E_SHAPE,
                "%s: lhs %s and rhs %s do not fit feature_group_count %lld, "
                "batch_group_count %lld (need C = groups*I, O and N divisible by the groups)",
                nm, cft__av(a), cft__av(b), (long long)g->G, (long long)g->B);
        g->K = g->G * g->B, g->Oq = g->O / g->K, g->Nq = g->N / g->B;
    }
    g->P = g->KK = 1;
    for (int j = 0; j < MAXSP; j++) {
        int i = j - (MAXSP - nsp); /* spatial dim, or < 0 for a padding dim */
        if (i < 0) {
            g->in[j] = g->k[j] = g->out[j] = g->s[j] = g->ld[j] = g->rd[j] = 1;
            continue;
        }
        g->in[j] = a->shape[2 + i], g->k[j] = b->shape[2 + i];
        g->s[j] = p->v[CS][i], g->ld[j] = p->v[CLD][i], g->rd[j] = p->v[CRD][i];
        g->lo[j] = p->v[CP][2 * i], g->hi[j] = p->v[CP][2 * i + 1];
        if (g->s[j] < 1 || g->ld[j] < 1 || g->rd[j] < 1)
            return cft__fail(CFT_E_ARG,
                             "%s: strides and dilations must be >= 1 (spatial dim %d; "
                             "%s * %s)",
                             nm, i, cft__av(a), cft__av(b));
        int64_t padded = dilate(g->in[j], g->ld[j]) + g->lo[j] + g->hi[j],
                kd = dilate(g->k[j], g->rd[j]);
        if (padded < 0)
            return cft__fail(CFT_E_SHAPE,
                             "%s: negative padding %lld,%lld larger than spatial dim %d "
                             "of %s",
                             nm, (long long)g->lo[j], (long long)g->hi[j], i, cft__av(a));
        g->out[j] = padded >= kd ? (padded - kd) / g->s[j] + 1 : 0;
        g->P *= g->out[j], g->KK *= g->k[j];
    }
    return NULL;
}

static cft_array *conv_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    geom g;
    cft_array *e = cft__conv_geometry(&in[0], &in[1], p, &g);
    if (e)
        return e;
    *out = cft__aval(in[0].dtype, NULL, 0);
    out->ndim = g.nsp + 2;
    out->shape[0] = g.Nq, out->shape[1] = g.O;
    for (int i = 0; i < g.nsp; i++)
        out->shape[2 + i] = g.out[MAXSP - g.nsp + i];
    return NULL;
}

/* ---- kernels ---- */

/* tab[d][kk * out[d] + o]: the input index that output o reads at tap kk of
 * spatial dim d, or -1 (padding or a dilation hole) */
typedef struct {
    int64_t *tab[MAXSP];
    int64_t st[MAXSP]; /* lhs element strides of the normalised spatial dims */
} taps;

static bool make_taps(const geom *g, const cft_array *x, taps *t) {
    for (int d = 0; d < MAXSP; d++) {
        int64_t n = g->k[d] * g->out[d];
        t->tab[d] = cft__new_data(sizeof(int64_t) * (size_t)(n ? n : 1));
        if (!t->tab[d])
            return false;
        for (int64_t kk = 0; kk < g->k[d]; kk++)
            for (int64_t o = 0; o < g->out[d]; o++) {
                int64_t v = o * g->s[d] + kk * g->rd[d] - g->lo[d], r = -1;
                if (v >= 0 && v % g->ld[d] == 0 && v / g->ld[d] < g->in[d])
                    r = v / g->ld[d];
                t->tab[d][kk * g->out[d] + o] = r;
            }
        int i = d - (MAXSP - g->nsp);
        t->st[d] = i < 0 ? 0 : x->strides[2 + i];
    }
    return true;
}

/* the lhs sample and channel a group reads from */
static int64_t group_n0(const geom *g, int64_t q) {
    return g->B > 1 ? q * g->Nq : 0;
}
static int64_t group_c0(const geom *g, int64_t q) {
    return g->G > 1 ? q * g->Ig : 0;
}

/* Direct loop (integer dtypes): out[n, q*Oq + o, p] = sum_{ci, tap} x[...] w[q*Oq + o, ci, tap]. */
#define DEF_DIRECT(NAME, T, ACC)                                                                   \
    static void NAME(const geom *g, const taps *t, const T *x, const int64_t *xs, const T *w,      \
                     T *y, ACC *acc) {                                                             \
        int64_t o0n = g->out[0], o1n = g->out[1], o2n = g->out[2];                                 \
        for (int64_t q = 0; q < g->K; q++)                                                         \
            for (int64_t n = 0; n < g->Nq; n++)                                                    \
                for (int64_t o = 0; o < g->Oq; o++) {                                              \
                    int64_t oc = q * g->Oq + o;                                                    \
                    for (int64_t p = 0; p < g->P; p++)                                             \
                        acc[p] = 0;                                                                \
                    for (int64_t ci = 0; ci < g->Ig; ci++) {                                       \
                        const T *xc =                                                              \
                            x + (group_n0(g, q) + n) * xs[0] + (group_c0(g, q) + ci) * xs[1];      \
                        const T *wc = w + (oc * g->Ig + ci) * g->KK;                               \
                        for (int64_t k0 = 0; k0 < g->k[0]; k0++)                                   \
                            for (int64_t k1 = 0; k1 < g->k[1]; k1++)                               \
                                for (int64_t k2 = 0; k2 < g->k[2]; k2++) {                         \
                                    ACC wv = (ACC)wc[(k0 * g->k[1] + k1) * g->k[2] + k2];          \
                                    const int64_t *t0 = t->tab[0] + k0 * o0n,                      \
                                                  *t1 = t->tab[1] + k1 * o1n,                      \
                                                  *t2 = t->tab[2] + k2 * o2n;                      \
                                    ACC *a = acc;                                                  \
                                    for (int64_t i0 = 0; i0 < o0n; i0++)                           \
                                        for (int64_t i1 = 0; i1 < o1n; i1++, a += o2n) {           \
                                            if (t0[i0] < 0 || t1[i1] < 0)                          \
                                                continue;                                          \
                                            const T *xr =                                          \
                                                xc + t0[i0] * t->st[0] + t1[i1] * t->st[1];        \
                                            for (int64_t i2 = 0; i2 < o2n; i2++)                   \
                                                if (t2[i2] >= 0)                                   \
                                                    a[i2] += wv * (ACC)xr[t2[i2] * t->st[2]];      \
                                        }                                                          \
                                }                                                                  \
                    }                                                                              \
                    T *yr = y + (n * g->O + oc) * g->P;                                            \
                    for (int64_t p = 0; p < g->P; p++)                                             \
                        yr[p] = (T)acc[p];                                                         \
                }                                                                                  \
    }
DEF_DIRECT(direct_i32, int32_t, int64_t)
DEF_DIRECT(direct_i64, int64_t, int64_t)

/* the library builds at -O2; these copy loops want vectorising */
#define VEC CFT_VEC

/* im2col of samples [n0, n0 + nc) of group q: row (ci, tap), column
 * (sample, output position); zeros for padding and dilation holes. The
 * innermost dim copies its valid range [a, b) as a strided (or contiguous)
 * run when it has no lhs dilation, else goes through its tap table. */
#define DEF_IM2COL(NAME, T)                                                                        \
    VEC static void NAME(const geom *g, const taps *t, const T *x, const int64_t *xs, int64_t q,   \
                         int64_t n0, int64_t nc, T *cols) {                                        \
        int64_t o0n = g->out[0], o1n = g->out[1], o2n = g->out[2], ncols = nc * g->P;              \
        int64_t s2 = g->s[2], st2 = t->st[2], in2 = g->in[2];                                      \
        bool run = g->ld[2] == 1;                                                                  \
        const T *xg = x + (group_n0(g, q) + n0) * xs[0] + group_c0(g, q) * xs[1];                  \
        for (int64_t ci = 0; ci < g->Ig; ci++)                                                     \
            for (int64_t k0 = 0; k0 < g->k[0]; k0++)                                               \
                for (int64_t k1 = 0; k1 < g->k[1]; k1++)                                           \
                    for (int64_t k2 = 0; k2 < g->k[2]; k2++) {                                     \
                        int64_t row = ((ci * g->k[0] + k0) * g->k[1] + k1) * g->k[2] + k2;         \
                        const int64_t *t0 = t->tab[0] + k0 * o0n, *t1 = t->tab[1] + k1 * o1n,      \
                                      *t2 = t->tab[2] + k2 * o2n;                                  \
                        /* the run: output i2 in [a, b) reads input i2*s2 + base */                \
                        int64_t base = k2 * g->rd[2] - g->lo[2], a = 0, b = 0;                     \
                        if (run) {                                                                 \
                            a = base >= 0 ? 0 : (-base + s2 - 1) / s2;                             \
                            b = in2 - 1 - base >= 0 ? (in2 - 1 - base) / s2 + 1 : 0;               \
                            if (b > o2n)                                                           \
                                b = o2n;                                                           \
                            if (a > b)                                                             \
                                a = b;                                                             \
                        }                                                                          \
                        T *dst = cols + row * ncols;                                               \
                        for (int64_t n = 0; n < nc; n++) {                                         \
                            const T *xc = xg + n * xs[0] + ci * xs[1];                             \
                            for (int64_t i0 = 0; i0 < o0n; i0++)                                   \
                                for (int64_t i1 = 0; i1 < o1n; i1++, dst += o2n) {                 \
                                    if (t0[i0] < 0 || t1[i1] < 0) {                                \
                                        memset(dst, 0, sizeof(T) * (size_t)o2n);                   \
                                        continue;                                                  \
                                    }                                                              \
                                    const T *xr = xc + t0[i0] * t->st[0] + t1[i1] * t->st[1];      \
                                    if (!run) {                                                    \
                                        for (int64_t i2 = 0; i2 < o2n; i2++)                       \
                                            dst[i2] = t2[i2] >= 0 ? xr[t2[i2] * st2] : (T)0;       \
                                        continue;                                                  \
                                    }                                                              \
                                    for (int64_t i2 = 0; i2 < a; i2++)                             \
                                        dst[i2] = 0;                                               \
                                    const T *src = xr + base * st2;                                \
                                    if (s2 * st2 == 1)                                             \
                                        for (int64_t i2 = a; i2 < b; i2++)                         \
                                            dst[i2] = src[i2];                                     \
                                    else                                                           \
                                        for (int64_t i2 = a; i2 < b; i2++)                         \
                                            dst[i2] = src[i2 * s2 * st2];                          \
                                    for (int64_t i2 = b; i2 < o2n; i2++)                           \
                                        dst[i2] = 0;                                               \
                                }                                                                  \
                        }                                                                          \
                    }                                                                              \
    }
DEF_IM2COL(im2col_f32, float)
DEF_IM2COL(im2col_f64, double)

/* Output positions per sample from which each sample gets its own GEMM. */
#define ROW_GEMM 32
/* Column buffer budget per GEMM (elements). */
#define COLS_BUDGET (1 << 18)
/* Rows shorter than this go through the gather map. */
#define MAP_BELOW 16

static void gemm(cft_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                 const void *B, int64_t ldb, void *C, int64_t ldc) {
    if (dt == CFT_F32)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, A,
                    (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0, A,
                    (int)lda, B, (int)ldb, 0.0, C, (int)ldc);
}

/* im2col + GEMM per group and sample chunk, into y (contiguous) */
/* im2col through a map: off[k * P + p], the offset (lhs strides) of tap k
 * for output position p within one sample and channel, or -1. Built once
 * per call; one gather per (sample, channel), with no per-run overhead,
 * which wins when rows are short. */
static int64_t *make_map(const geom *g, const taps *t) {
    int64_t *off = cft__new_data(sizeof(int64_t) * (size_t)(g->KK * g->P));
    if (!off)
        return NULL;
    int64_t *o = off;
    for (int64_t k0 = 0; k0 < g->k[0]; k0++)
        for (int64_t k1 = 0; k1 < g->k[1]; k1++)
            for (int64_t k2 = 0; k2 < g->k[2]; k2++) {
                const int64_t *t0 = t->tab[0] + k0 * g->out[0], *t1 = t->tab[1] + k1 * g->out[1],
                              *t2 = t->tab[2] + k2 * g->out[2];
                for (int64_t i0 = 0; i0 < g->out[0]; i0++)
                    for (int64_t i1 = 0; i1 < g->out[1]; i1++)
                        for (int64_t i2 = 0; i2 < g->out[2]; i2++)
                            *o++ = t0[i0] < 0 || t1[i1] < 0 || t2[i2] < 0
                                       ? -1
                                       : t0[i0] * t->st[0] + t1[i1] * t->st[1] + t2[i2] * t->st[2];
            }
    return off;
}
#define DEF_IM2COL_MAP(NAME, T)                                                                    \
    VEC static void NAME(const geom *g, const int64_t *restrict map, const T *x,                   \
                         const int64_t *xs, int64_t q, int64_t n0, int64_t nc, T *restrict cols) { \
        int64_t P = g->P, KK = g->KK, ncols = nc * P;                                              \
        const T *xg = x + (group_n0(g, q) + n0) * xs[0] + group_c0(g, q) * xs[1];                  \
        for (int64_t ci = 0; ci < g->Ig; ci++)                                                     \
            for (int64_t n = 0; n < nc; n++) {                                                     \
                const T *restrict xc = xg + n * xs[0] + ci * xs[1];                                \
                for (int64_t k = 0; k < KK; k++) {                                                 \
                    T *restrict dst = cols + (ci * KK + k) * ncols + n * P;                        \
                    const int64_t *restrict m = map + k * P;                                       \
                    for (int64_t p = 0; p < P; p++) {                                              \
                        int64_t o = m[p];                                                          \
                        T v = xc[o < 0 ? 0 : o];                                                   \
                        dst[p] = o < 0 ? (T)0 : v;                                                 \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
    }
DEF_IM2COL_MAP(im2col_map_f32, float)
DEF_IM2COL_MAP(im2col_map_f64, double)

/* [Oq, m, P] (the GEMM's result) -> the rows of [m, O, P] at channel o0 */
#define DEF_UNPACK(NAME, T)                                                                        \
    CFT_VEC_NO_DISTRIBUTE static void NAME(const T *restrict src, T *restrict y, int64_t Oq,       \
                                           int64_t m, int64_t P, int64_t O, int64_t o0) {          \
        for (int64_t n = 0; n < m; n++)                                                            \
            for (int64_t o = 0; o < Oq; o++) {                                                     \
                const T *s = src + (o * m + n) * P;                                                \
                T *d = y + (n * O + o0 + o) * P;                                                   \
                for (int64_t i = 0; i < P; i++)                                                    \
                    d[i] = s[i];                                                                   \
            }                                                                                      \
    }
DEF_UNPACK(unpack_f32, float)
DEF_UNPACK(unpack_f64, double)

/* A per-thread scratch buffer for the columns and the GEMM result, grown as
 * needed and kept: fresh GC blocks of this size cost more in page faults
 * and cold cache than the copies into them. Past SCRATCH_MAX bytes a GC
 * block serves one call instead, so one large conv does not pin memory. */
#define SCRATCH_MAX ((size_t)32 << 20)
static void *scratch(size_t bytes) {
    return cft__scratch(CFT_SCRATCH_CONV, bytes, SCRATCH_MAX);
}

/* One convolution as chunks of work: group q, samples [n0, n0 + nc) */
typedef struct {
    const geom *g;
    const taps *t;
    const cft_array *x;
    cft_dtype dt;
    size_t es, cbytes, bytes;
    int64_t rows, nc, nchunks;
    const int64_t *map;
    const char *xp, *wp;
    char *yp;
    _Atomic int oom;
} conv_job;

/* im2col + GEMM for chunks [lo, hi), in this thread's scratch buffer */
static void conv_range(void *ctx, int64_t lo, int64_t hi) {
    conv_job *j = ctx;
    const geom *g = j->g;
    cft_dtype dt = j->dt;
    size_t es = j->es;
    int64_t rows = j->rows;
    char *cols = scratch(j->bytes);
    if (!cols) {
        j->oom = 1;
        return;
    }
    char *tmp = cols + j->cbytes;
    for (int64_t u = lo; u < hi; u++) {
        int64_t q = u / j->nchunks, n0 = u % j->nchunks * j->nc;
        int64_t m = g->Nq - n0 < j->nc ? g->Nq - n0 : j->nc, ncols = m * g->P;
        if (j->map && dt == CFT_F32)
            im2col_map_f32(g, j->map, (const float *)j->xp, j->x->strides, q, n0, m, (float *)cols);
        else if (j->map)
            im2col_map_f64(g, j->map, (const double *)j->xp, j->x->strides, q, n0, m,
                           (double *)cols);
        else if (dt == CFT_F32)
            im2col_f32(g, j->t, (const float *)j->xp, j->x->strides, q, n0, m, (float *)cols);
        else
            im2col_f64(g, j->t, (const double *)j->xp, j->x->strides, q, n0, m, (double *)cols);
        const char *A = j->wp + es * (size_t)(q * g->Oq * rows);
        char *yq = j->yp + es * (size_t)(n0 * g->O * g->P);
        if (m == 1) { /* straight into the output: rows o of sample n0 */
            gemm(dt, g->Oq, g->P, rows, A, rows, cols, ncols, yq + es * (size_t)(q * g->Oq * g->P),
                 g->P);
            continue;
        }
        gemm(dt, g->Oq, ncols, rows, A, rows, cols, ncols, tmp, ncols);
        if (dt == CFT_F32)
            unpack_f32((const float *)tmp, (float *)yq, g->Oq, m, g->P, g->O, q * g->Oq);
        else
            unpack_f64((const double *)tmp, (double *)yq, g->Oq, m, g->P, g->O, q * g->Oq);
    }
}

/* im2col + GEMM per group and sample chunk, into y (contiguous); chunks
 * are shared among threads, each with its own column buffer */
static cft_array *conv_gemm(const geom *g, const taps *t, const cft_array *x, const cft_array *w,
                            cft_array *y) {
    conv_job j = {.g = g, .t = t, .x = x, .dt = y->aval.dtype};
    j.es = cft_dtype_size(j.dt);
    j.rows = g->Ig * g->KK;
    int64_t per = j.rows * g->P;
    /* one GEMM per sample straight into the output when its rows are long
     * enough; else chunks of samples, whose GEMM result is then unpacked */
    int64_t nc = g->P >= ROW_GEMM ? 1 : ROW_GEMM * 16 / (g->P ? g->P : 1);
    if (nc * per > COLS_BUDGET)
        nc = COLS_BUDGET / per;
    if (nc < 1)
        nc = 1;
    if (nc > g->Nq)
        nc = g->Nq;
    j.nc = nc;
    j.nchunks = g->Nq ? (g->Nq + nc - 1) / nc : 0;
    size_t ncols_max = (size_t)(nc * g->P);
    j.cbytes = (j.es * (size_t)j.rows * ncols_max + 63) / 64 * 64;
    j.bytes = j.cbytes + (nc > 1 ? j.es * (size_t)g->Oq * ncols_max : 0);
    bool use_map = g->out[2] < MAP_BELOW;
    j.map = use_map ? make_map(g, t) : NULL;
    if (use_map && !j.map)
        return cft__oom();
    j.xp = cft__ptr(x), j.wp = cft__ptr(w), j.yp = cft__ptr(y);
    int64_t chunks = g->K * j.nchunks;
    double work = 2.0 * (double)g->Oq * (double)(nc * g->P) * (double)j.rows;
    if (j.bytes > SCRATCH_MAX) /* a GC block per call: allocated on this thread only */
        conv_range(&j, 0, chunks);
    else
        cft__par_for(chunks, work, conv_range, &j);
    return j.oom ? cft__oom() : NULL;
}

/* w as a contiguous [O, I, taps]: w itself, or a copy that moves whole
 * kernels at a time when their taps are contiguous (the transposed
 * cotangent that the weight gradient uses as its kernel) */
static cft_array *pack_rhs(cft_array *w) {
    if (cft__is_contig(w))
        return w;
    const cft_aval *a = &w->aval;
    int nd = a->ndim;
    bool taps_contig = true;
    for (int d = nd - 1, want = 1; d >= 2; d--) {
        taps_contig &= a->shape[d] == 1 || w->strides[d] == want;
        want *= (int)a->shape[d];
    }
    if (!taps_contig)
        return cft__contig(w);
    cft_array *y = cft__alloc(a->dtype, a->shape, nd);
    if (cft_failed(y))
        return y;
    size_t es = cft_dtype_size(a->dtype), kk = (size_t)cft__numel(a->shape + 2, nd - 2);
    const char *src = cft__ptr(w);
    char *dst = y->data;
    for (int64_t o = 0; o < a->shape[0]; o++)
        for (int64_t i = 0; i < a->shape[1]; i++, dst += kk * es)
            memcpy(dst, src + (o * w->strides[0] + i * w->strides[1]) * (int64_t)es, kk * es);
    cft__keep(w);
    return y;
}

/* is x a swap of axes 0 and 1 of a row-major array (what the transpose
 * rule's swap() makes)? */
static bool swapped_rowmajor(const cft_array *x) {
    const cft_aval *a = &x->aval;
    int64_t s = 1;
    for (int i = a->ndim - 1; i >= 2; i--) {
        if (a->shape[i] != 1 && x->strides[i] != s)
            return false;
        s *= a->shape[i];
    }
    return !x->conj && x->strides[0] == s && x->strides[1] == a->shape[0] * s;
}

/* The weight gradient as the transpose rule writes it (conv_ct_rhs):
 * lhs = swap(x) [C, N, in], rhs = swap(ct) [O, N, out], one group; on
 * oneDNN's backward-weights primitive, from the forward's geometry. */
static bool try_dnnl_wgrad(const geom *g, cft_array *const *in, cft_array *y, int dtype) {
    if (g->B != 1 || g->G != 1 || !swapped_rowmajor(in[0]) || !swapped_rowmajor(in[1]) ||
        2.0 * (double)g->N * (double)g->O * (double)g->P * (double)g->C * (double)g->KK < 1e5)
        return false;
    /* forward: N = g->C, C = g->N, O = g->O, kernel = g->out, out = g->k,
     * strides = g->rd, rhs dilation = g->s */
    int64_t k[26] = {g->nsp, g->C, g->N, g->O, g->N, 1};
    for (int i = 0; i < g->nsp; i++) {
        int j = MAXSP - g->nsp + i;
        int64_t hi = (g->k[j] - 1) * g->rd[j] + (g->out[j] - 1) * g->s[j] + 1 - g->in[j] - g->lo[j];
        if (g->ld[j] != 1 || g->lo[j] < 0 || hi < 0 || hi > g->hi[j])
            return false;
        k[6 + i] = g->in[j], k[9 + i] = g->out[j], k[12 + i] = g->rd[j];
        k[15 + i] = g->lo[j], k[18 + i] = hi, k[21 + i] = g->s[j];
    }
    k[24] = 1;
    return cft__conv_dnnl(k, dtype, cft__ptr(in[0]), cft__ptr(y), cft__ptr(in[1]));
}

/* oneDNN, for what it takes (no batch groups or lhs dilation, padding >=
 * 0) and where it measured faster (bench/onednn/conv.c): one group, a
 * reduction of 64 or more per output (C * taps; the digits' 1 x 3x3 runs
 * as fast on im2col, and vmap's many groups faster), a megaflop or more;
 * and weight gradients */
static bool try_dnnl(const geom *g, cft_array *const *in, cft_array *y, int dtype) {
    if (g->nsp < 1 || in[0]->conj || in[1]->conj)
        return false;
    if (try_dnnl_wgrad(g, in, y, dtype))
        return true;
    double flops = 2.0 * (double)g->N * (double)g->O * (double)g->P * (double)g->C * (double)g->KK;
    if (g->B != 1 || g->G != 1 || (dtype == 0 && (g->C * g->KK < 64 || flops < 1e6)))
        return false;
    int64_t k[26] = {g->nsp, g->N, g->C, g->O, g->Ig, g->G};
    for (int i = 0; i < g->nsp; i++) {
        int j = MAXSP - g->nsp + i;
        if (g->ld[j] != 1 || g->lo[j] < 0 || g->hi[j] < 0 || g->out[j] < 1)
            return false;
        k[6 + i] = g->in[j], k[9 + i] = g->k[j], k[12 + i] = g->s[j];
        k[15 + i] = g->lo[j], k[18 + i] = g->hi[j], k[21 + i] = g->rd[j];
    }
    cft_array *x = cft__contig(in[0]), *w = cft__contig(in[1]);
    if (cft_failed(x) || cft_failed(w))
        return false;
    bool done = cft__conv_dnnl(k, dtype, cft__ptr(x), cft__ptr(w), cft__ptr(y));
    cft__keep(x);
    cft__keep(w);
    return done;
}

/* half operands of dtype dt into y on oneDNN's kernels for them, which
 * accumulate in f32; false where oneDNN declines: a CPU without them, a
 * geometry it does not take, nothing to sum */
static bool half_dnnl(const geom *g, cft_array *const *in, cft_array *y, cft_dtype dt) {
    return g->Ig * g->KK > 0 && cft__numel(y->aval.shape, y->aval.ndim) > 0 &&
           cft__numel(in[0]->aval.shape, in[0]->aval.ndim) > 0 &&
           cft__dnnl_low_ok(dt == CFT_BF16 ? 1 : 2) && try_dnnl(g, in, y, dt == CFT_BF16 ? 1 : 2);
}

static cft_array *conv_into(cft_array *const *in, int nin, const cft_params *p, cft_array *y) {
    geom g;
    cft_array *e = cft__conv_geometry(&in[0]->aval, &in[1]->aval, p, &g);
    if (e)
        return e;
    cft_dtype dt = y->aval.dtype;
    if (cft_dtype_is_half(dt) && in[0]->aval.dtype == dt && in[1]->aval.dtype == dt) {
        /* the jit's half path (CFT_PRIM_INTO_HALF): oneDNN's kernel into
         * y where the CPU has one, else the f32 path over scratch */
        if (cft__is_contig(y) && half_dnnl(&g, in, y, dt))
            return NULL;
        return cft__into_widened(&cft_p_conv_general_dilated, in, nin, p, y);
    }
    if (cft_dtype_is_half(dt) || in[0]->aval.dtype != dt) /* mixed: cft__run_impl widens */
        return cft__fail(CFT_E_DTYPE, "conv_general_dilated: no kernel for %s into %s",
                         cft__av(&in[0]->aval), cft__av(&y->aval));
    size_t es = cft_dtype_size(dt);
    int64_t ny = cft__numel(y->aval.shape, y->aval.ndim);
    if (ny == 0)
        return NULL;
    if (g.Ig * g.KK == 0 ||
        cft__numel(in[0]->aval.shape, in[0]->aval.ndim) == 0) { /* nothing to sum */
        memset(cft__ptr(y), 0, es * (size_t)ny);
        return NULL;
    }
    if (dt == CFT_F32 && try_dnnl(&g, in, y, 0))
        return NULL;
    cft_array *x = in[0], *w = pack_rhs(in[1]);
    if (cft_failed(w))
        return w;
    taps t;
    if (!make_taps(&g, x, &t))
        return cft__oom();
    int64_t xs[2] = {x->strides[0], x->strides[1]};
    const void *xp = cft__ptr(x), *wp = cft__ptr(w);
    void *yp = cft__ptr(y);
    if (cft_dtype_is_float(dt)) {
        e = conv_gemm(&g, &t, x, w, y);
    } else {
        int64_t *acc = cft__new_data(sizeof(int64_t) * (size_t)(g.P ? g.P : 1));
        if (!acc)
            return cft__oom();
        if (dt == CFT_I32)
            direct_i32(&g, &t, xp, xs, wp, yp, acc);
        else
            direct_i64(&g, &t, xp, xs, wp, yp, acc);
    }
    cft__keep(x);
    cft__keep(w);
    return e;
}

/* bf16 / f16 operands (autocast) on oneDNN's kernels (half_dnnl); false
 * (cft__run_impl widens them) where oneDNN declines */
static bool conv_low(cft_array *const *in, int nin, const cft_params *p, const cft_aval *oav,
                     cft_array **out) {
    (void)nin;
    cft_dtype dt = oav[0].dtype;
    geom g;
    if (!cft_dtype_is_half(dt) || in[0]->aval.dtype != dt || in[1]->aval.dtype != dt ||
        cft__conv_geometry(&in[0]->aval, &in[1]->aval, p, &g) ||
        !cft__dnnl_low_ok(dt == CFT_BF16 ? 1 : 2))
        return false;
    cft_array *y = cft__alloc(dt, oav[0].shape, oav[0].ndim);
    if (cft_failed(y) || !half_dnnl(&g, in, y, dt))
        return false;
    out[0] = y;
    return true;
}

static cft_array *conv_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    return cft__impl_by_into(&cft_p_conv_general_dilated, in, nin, p, out);
}

/* ---- rules ---- */

static cft_array *conv_bind(cft_array *lhs, cft_array *rhs, const cft_params *p) {
    return cft__bind1(&cft_p_conv_general_dilated, p, 2, (cft_array *[]){lhs, rhs});
}

static cft_array *conv_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                           const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    cft_array *r = NULL;
    if (t[0])
        r = conv_bind(t[0], x[1], p);
    if (t[1])
        r = cft__tadd(r, conv_bind(x[0], t[1], p));
    ty[0] = r;
    return NULL;
}

/* shape helpers over the fixed layouts */
static cft_array *reshape_v(cft_array *x, const int64_t *lead, int nlead, int keep_from) {
    /* x's dims from keep_from on, after the dims `lead` */
    if (cft_failed(x))
        return x;
    int64_t s[CFT_MAX_NDIM];
    int k = 0;
    for (int i = 0; i < nlead; i++)
        s[k++] = lead[i];
    for (int i = keep_from; i < x->aval.ndim; i++)
        s[k++] = x->aval.shape[i];
    return cft__reshape(x, s, k);
}
/* swap dims a and b */
static cft_array *swap(cft_array *x, int a, int b) {
    if (cft_failed(x))
        return x;
    int perm[CFT_MAX_NDIM];
    for (int i = 0; i < x->aval.ndim; i++)
        perm[i] = i;
    perm[a] = b, perm[b] = a;
    return cft_transpose(x, perm);
}
static cft_params conv_params(int nsp, const int64_t *s, const int64_t *pad, const int64_t *ld,
                              const int64_t *rd, int64_t G, int64_t B) {
    cft_params q = {0};
    cft__param_set(&q, CS, s, nsp);
    cft__param_set(&q, CP, pad, 2 * nsp);
    cft__param_set(&q, CLD, ld, nsp);
    cft__param_set(&q, CRD, rd, nsp);
    cft__param_set1(&q, CFG, G);
    cft__param_set1(&q, CBG, B);
    return q;
}

/* lhs cotangent: ct convolved with the flipped kernel (O and I swapped,
 * groups moved into the new output features), the strides as lhs dilation */
static cft_array *conv_ct_lhs(cft_array *ct, cft_array *rhs, const cft_aval *lhs_av,
                              const cft_params *p) {
    geom g;
    cft_array *e = cft__conv_geometry(lhs_av, &rhs->aval, p, &g);
    if (e)
        return e;
    int nsp = g.nsp, sp[MAXSP];
    int64_t K = g.K, pad[2 * MAXSP];
    cft_array *w;
    if (gt1(K)) /* [O, I, k] -> [K, O/K, I, k] -> [K, I, O/K, k] -> [K*I, O/K, k] */
        w = reshape_v(swap(reshape_v(rhs, (int64_t[]){K, g.Oq}, 2, 1), 1, 2),
                      (int64_t[]){cft_dim_mul(K, g.Ig), g.Oq}, 2, 3);
    else
        w = swap(rhs, 0, 1);
    for (int i = 0; i < nsp; i++) {
        int j = MAXSP - nsp + i;
        sp[i] = 2 + i;
        int64_t kd = dilate(g.k[j], g.rd[j]), ind = dilate(g.in[j], g.ld[j]),
                od = dilate(g.out[j], g.s[j]);
        pad[2 * i] = kd - g.lo[j] - 1;
        pad[2 * i + 1] = ind + kd - 1 - od - pad[2 * i];
    }
    w = cft_flip(w, sp, nsp);
    cft_params q = conv_params(nsp, p->v[CLD], pad, p->v[CS], p->v[CRD], K, 1);
    cft_array *r = conv_bind(ct, w, &q); /* [N/B, K*I (= C, or B*C), sp] */
    if (gt1(g.B))                        /* [N/B, B, C, sp] -> [B, N/B, C, sp] -> [N, C, sp] */
        r = reshape_v(swap(reshape_v(r, (int64_t[]){g.Nq, g.B, g.C}, 3, 2), 0, 1), (int64_t[]){g.N},
                      1, 2);
    return r;
}

/* rhs cotangent: lhs (C as the batch) convolved with ct (as the kernel);
 * feature groups become batch groups and batch groups feature groups */
static cft_array *conv_ct_rhs(cft_array *ct, cft_array *lhs, const cft_aval *rhs_av,
                              const cft_params *p) {
    geom g;
    cft_array *e = cft__conv_geometry(&lhs->aval, rhs_av, p, &g);
    if (e)
        return e;
    if (cft__numel(ct->aval.shape, ct->aval.ndim) == 0)
        return cft__zeros_aval(rhs_av);
    int nsp = g.nsp;
    int64_t pad[2 * MAXSP];
    for (int i = 0; i < nsp; i++) {
        int j = MAXSP - nsp + i;
        int64_t kd = dilate(g.k[j], g.rd[j]), ind = dilate(g.in[j], g.ld[j]),
                od = dilate(g.out[j], g.s[j]);
        pad[2 * i] = g.lo[j];
        pad[2 * i + 1] = (od - ind) + (kd - g.lo[j] - 1);
    }
    cft_params q = conv_params(nsp, p->v[CRD], pad, p->v[CLD], p->v[CS], g.B, g.G);
    cft_array *r = conv_bind(swap(lhs, 0, 1), swap(ct, 0, 1), &q); /* [C / G, O, k] */
    return swap(r, 0, 1);
}

static cft_array *conv_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                 int nin, const cft_params *p, cft_array **ct_in) {
    (void)nin;
    if (!x[0] && !x[1])
        return cft__fail(CFT_E_TRACE,
                         "conv_general_dilated: transpose of a product of two linear values");
    ct_in[0] = x[0] ? NULL : conv_ct_lhs(ct[0], x[1], &in[0], p);
    ct_in[1] = x[1] ? NULL : conv_ct_rhs(ct[0], x[0], &in[1], p);
    return NULL;
}

/* Batching as jax.lax: the vmapped dim S goes into N (lhs), O (rhs), or,
 * both batched, into the feature groups (or the batch groups). */
static cft_array *conv_vmap(int64_t S, cft_array *const *x, const int *bdim, int nin,
                            const cft_params *p, cft_array **y, int *ybdim) {
    (void)nin;
    cft_array *lhs = x[0], *rhs = x[1];
    int64_t G = p->v[CFG][0], B = p->v[CBG][0];
    cft_params q = *p;
    if (bdim[0] >= 0)
        lhs = cft__moveaxis_b(lhs, bdim[0], 0); /* [S, N, C, sp] */
    if (bdim[1] >= 0)
        rhs = cft__moveaxis_b(rhs, bdim[1], 0); /* [S, O, I, k] */
    if (cft_failed(lhs))
        return lhs;
    if (cft_failed(rhs))
        return rhs;
    const int64_t *ls = lhs->aval.shape, *rs = rhs->aval.shape;
    cft_array *r;
    /* sizes through the dim functions: S (and N, ...) may be symbolic */
#define MUL cft_dim_mul
#define DIV cft_dim_div
    if (bdim[0] >= 0 && bdim[1] >= 0) {
        int64_t N = ls[1], C = ls[2], O = rs[1];
        if (gt1(B)) {
            lhs = reshape_v(lhs, (int64_t[]){MUL(S, N)}, 1, 2);
            q.v[CBG][0] = MUL(B, S);
        } else {
            lhs = reshape_v(swap(lhs, 0, 1), (int64_t[]){N, MUL(S, C)}, 2, 3);
            q.v[CFG][0] = MUL(G, S);
        }
        r = conv_bind(lhs, reshape_v(rhs, (int64_t[]){MUL(S, O)}, 1, 2), &q); /* [N', S*O, sp] */
        if (cft_failed(r))
            return r;
        y[0] = reshape_v(r, (int64_t[]){r->aval.shape[0], S, O}, 3, 2);
        ybdim[0] = 1;
    } else if (bdim[0] >= 0) {
        int64_t N = ls[1], C = ls[2];
        if (!gt1(B)) {
            r = conv_bind(reshape_v(lhs, (int64_t[]){MUL(S, N)}, 1, 2), rhs, &q);
        } else { /* [S, N, C] -> [S, B, N/B, C] -> [B, S, N/B, C] -> [S*N, C] */
            cft_array *l = reshape_v(lhs, (int64_t[]){S, B, DIV(N, B), C}, 4, 3);
            r = conv_bind(reshape_v(swap(l, 0, 1), (int64_t[]){MUL(S, N)}, 1, 3), rhs, &q);
        }
        if (cft_failed(r))
            return r;
        y[0] = reshape_v(r, (int64_t[]){S, DIV(r->aval.shape[0], S)}, 2, 1);
        ybdim[0] = 0;
    } else {
        int64_t O = rs[1], Iw = rs[2], K = MUL(G, B);
        cft_array *w =
            !gt1(K) ? reshape_v(rhs, (int64_t[]){MUL(S, O)}, 1, 2)
                    : reshape_v(swap(reshape_v(rhs, (int64_t[]){S, K, DIV(O, K)}, 3, 2), 0, 1),
                                (int64_t[]){MUL(S, O), Iw}, 2, 4);
        r = conv_bind(lhs, w, &q); /* [N', S*O, sp] (K-major when grouped) */
        if (cft_failed(r))
            return r;
        int64_t Np = r->aval.shape[0];
        if (!gt1(K))
            y[0] = reshape_v(r, (int64_t[]){Np, S, O}, 3, 2);
        else
            y[0] = reshape_v(swap(reshape_v(r, (int64_t[]){Np, K, S, DIV(O, K)}, 4, 2), 1, 2),
                             (int64_t[]){Np, S, O}, 3, 4);
        ybdim[0] = 1;
    }
#undef MUL
#undef DIV
    return NULL;
}

const cft_prim cft_p_conv_general_dilated = {
    .name = "conv_general_dilated",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_CONTRACTION | CFT_PRIM_AMP_LOW | CFT_PRIM_INTO_HALF,
    .pnames = {"strides", "padding", "lhs_dilation", "rhs_dilation", "#feature_group_count",
               "#batch_group_count"},
    .shape = conv_shape,
    .impl = conv_impl,
    .jvp = conv_jvp,
    .transpose = conv_transpose,
    .vmap = conv_vmap,
    .impl_into = conv_into,
    .impl_low = conv_low,
    .batch_sqnorm = cft__conv_batch_sqnorm,
    .batch_wsum = cft__conv_batch_wsum,
    .dev_kernel = cft__conv_dev_kernel,
};

/* ======== rev[dims] ======== */

static cft_array *rev_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    bool seen[CFT_MAX_NDIM] = {0};
    for (int i = 0; i < p->n[0]; i++) {
        int64_t d = p->v[0][i];
        if (d < 0 || d >= in[0].ndim || seen[d])
            return cft__fail(CFT_E_ARG, "rev: bad or repeated dim %lld for %s", (long long)d,
                             cft__av(&in[0]));
        seen[d] = true;
    }
    *out = in[0];
    return NULL;
}
static cft_array *rev_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    (void)nin;
    const cft_array *x = in[0];
    int nd = x->aval.ndim;
    int64_t st[CFT_MAX_NDIM], off = x->offset;
    for (int i = 0; i < nd; i++)
        st[i] = x->strides[i];
    for (int i = 0; i < p->n[0]; i++) { /* a view with negative strides, copied at once */
        int d = (int)p->v[0][i];
        if (x->aval.shape[d] > 0)
            off += (x->aval.shape[d] - 1) * st[d];
        st[d] = -st[d];
    }
    cft_array *v = cft__view(x, x->aval.shape, nd, st, off);
    if (cft_failed(v))
        return v;
    cft_array *y = cft__contig(v); /* the shared strided copy */
    if (cft_failed(y))
        return y;
    cft__keep(x);
    out[0] = y;
    return NULL;
}
/* on a device that runs kernels: the same negative-stride view, copied by
 * one kernel there (a kernel's transpose flips it: a convolution's
 * gradient went through the host for it) */
static bool rev_dev_kernel(cft_array *const *in, int nin, const cft_params *p,
                           cft_array *const *out, cft_dev_kernel *k) {
    (void)nin;
    const cft_array *x = in[0];
    int nd = x->aval.ndim;
    int64_t st[CFT_MAX_NDIM], off = 0;
    size_t es = cft_dtype_size(x->aval.dtype);
    for (int i = 0; i < nd; i++)
        st[i] = x->strides[i];
    for (int i = 0; i < p->n[0]; i++) {
        int d = (int)p->v[0][i];
        if (x->aval.shape[d] > 0)
            off += (x->aval.shape[d] - 1) * st[d];
        st[d] = -st[d];
    }
    return !x->conj &&
           cft__dev_copy_kernel(cft__ptr(out[0]), (char *)cft__ptr(x) + off * (int64_t)es, es,
                                x->aval.shape, st, nd, k);
}
static cft_array *rev_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin;
    ty[0] = t[0] ? cft__bind1(&cft_p_rev, p, 1, t) : NULL;
    return NULL;
}
static cft_array *rev_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)x, (void)in, (void)nin;
    ct_in[0] = cft__bind1(&cft_p_rev, p, 1, ct);
    return NULL;
}
static cft_array *rev_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    cft_params q = *p;
    for (int i = 0; i < q.n[0]; i++)
        if (q.v[0][i] >= bdim[0])
            q.v[0][i]++;
    y[0] = cft__bind1(&cft_p_rev, &q, 1, x);
    ybdim[0] = bdim[0];
    return NULL;
}
const cft_prim cft_p_rev = {
    .name = "rev",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR,
    .pnames = {"dims"},
    .shape = rev_shape,
    .impl = rev_impl,
    .jvp = rev_jvp,
    .transpose = rev_transpose,
    .vmap = rev_vmap,
    .dev_kernel = rev_dev_kernel,
};

/* ======== public ops ======== */

cft_array *cft_flip(cft_array *x, const int *axes, int naxes) {
    CFT_PROPAGATE("cft_flip", x);
    int nd = x->aval.ndim;
    if (naxes < 0 || naxes > nd || (naxes && !axes))
        return cft__fail(CFT_E_ARG, "cft_flip: bad axis list (%d axes) for %s", naxes,
                         cft__av(&x->aval));
    int64_t d[CFT_MAX_NDIM];
    bool seen[CFT_MAX_NDIM] = {0};
    int n = 0;
    for (int i = 0; i < (naxes ? naxes : nd); i++) {
        int a = naxes ? axes[i] : i;
        if (a < 0)
            a += nd;
        if (a < 0 || a >= nd || seen[a])
            return cft__fail(CFT_E_ARG, "cft_flip: bad or repeated axis %d for %s",
                             naxes ? axes[i] : i, cft__av(&x->aval));
        seen[a] = true;
        if (gt1(x->aval.shape[a]))
            d[n++] = a;
    }
    if (n == 0)
        return x;
    cft_params p = {0};
    cft__param_set(&p, 0, d, n);
    return cft__bind1(&cft_p_rev, &p, 1, &x);
}

cft_status cft_conv_padding(cft_pad_mode mode, int nsp, const int64_t *in, const int64_t *window,
                            const int64_t *strides, const int64_t *dilation, int64_t *pads) {
    CFT_API("cft_conv_padding");
    if (nsp < 0 || nsp > CFT_MAX_NDIM || (nsp && (!in || !window || !pads)) ||
        (mode != CFT_PAD_VALID && mode != CFT_PAD_SAME && mode != CFT_PAD_SAME_LOWER)) {
        cft__fail(CFT_E_ARG, "cft_conv_padding: bad mode %d or arguments for %d spatial dims",
                  (int)mode, nsp);
        return CFT_E_ARG;
    }
    for (int i = 0; i < nsp; i++) {
        int64_t s = strides ? strides[i] : 1, d = dilation ? dilation[i] : 1;
        if (s < 1 || d < 1 || in[i] < 0 || window[i] < 0) {
            cft__fail(CFT_E_ARG,
                      "cft_conv_padding: dim %d: size %lld, window %lld, stride %lld, "
                      "dilation %lld",
                      i, (long long)in[i], (long long)window[i], (long long)s, (long long)d);
            return CFT_E_ARG;
        }
        pads[2 * i] = pads[2 * i + 1] = 0;
        if (mode == CFT_PAD_VALID)
            continue;
        int64_t out = (in[i] + s - 1) / s, need = (out - 1) * s + dilate(window[i], d) - in[i];
        if (need < 0)
            need = 0;
        pads[2 * i] = mode == CFT_PAD_SAME ? need / 2 : need - need / 2;
        pads[2 * i + 1] = need - pads[2 * i];
    }
    return CFT_OK;
}

cft_array *cft_conv_general_dilated(cft_array *lhs, cft_array *rhs, const int64_t *strides,
                                    const int64_t *padding, const int64_t *lhs_dilation,
                                    const int64_t *rhs_dilation, int64_t feature_group_count,
                                    int64_t batch_group_count) {
    CFT_PROPAGATE("cft_conv_general_dilated", lhs, rhs);
    int nsp = rhs->aval.ndim - 2;
    if (nsp < 1 || nsp > MAXSP || lhs->aval.ndim != rhs->aval.ndim)
        return cft__fail(CFT_E_SHAPE,
                         "cft_conv_general_dilated: lhs %s [N, C, spatial] and rhs %s "
                         "[O, I, spatial] need the same rank, 3 to 5",
                         cft__av(&lhs->aval), cft__av(&rhs->aval));
    int64_t s[MAXSP], pad[2 * MAXSP], ld[MAXSP], rd[MAXSP];
    for (int i = 0; i < nsp; i++) {
        s[i] = strides ? strides[i] : 1;
        ld[i] = lhs_dilation ? lhs_dilation[i] : 1;
        rd[i] = rhs_dilation ? rhs_dilation[i] : 1;
        pad[2 * i] = padding ? padding[2 * i] : 0;
        pad[2 * i + 1] = padding ? padding[2 * i + 1] : 0;
    }
    cft_dtype dt = cft_promote(lhs->aval.dtype, rhs->aval.dtype);
    cft_params p = conv_params(nsp, s, pad, ld, rd, feature_group_count, batch_group_count);
    return conv_bind(cft__convert(lhs, dt), cft__convert(rhs, dt), &p);
}
