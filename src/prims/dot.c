/* dot.c: dot_general[lc, rc, lb, rb], the one contraction primitive
 * (jax.lax.dot_general): contract lhs dims lc with rhs dims rc, batch over
 * lb/rb. Output dims: batch, lhs free, rhs free. The eager kernel views each
 * operand as [batch, rows, contract] or [batch, contract, cols], passes a
 * transposed layout to OpenBLAS as a transpose flag instead of copying, and
 * loops GEMM over the batch. Then matmul, the NumPy-style public op. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "core/par.h"
#include "core/vec.h"
#include "prims/gemm_xsmm.h"
#include "prims/matmul_dnnl.h"
#include "prims/rules.h"
#include "trace/ir.h"

enum { LC, RC, LB, RB };

static void free_dims(int nd, const cft_params *p, int ck, int bk, int *out, int *n) {
    bool used[CFT_MAX_NDIM] = {0};
    for (int i = 0; i < p->n[ck]; i++)
        used[p->v[ck][i]] = true;
    for (int i = 0; i < p->n[bk]; i++)
        used[p->v[bk][i]] = true;
    *n = 0;
    for (int i = 0; i < nd; i++)
        if (!used[i])
            out[(*n)++] = i;
}

static cft_array *dot_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin;
    const cft_aval *a = &in[0], *b = &in[1];
    if (a->dtype != b->dtype)
        return cft__fail(CFT_E_DTYPE, "dot_general: dtypes differ: %s . %s", cft__av(a),
                         cft__av(b));
    if (a->dtype == CFT_BOOL)
        return cft__fail(CFT_E_DTYPE, "dot_general: bool operands %s . %s", cft__av(a), cft__av(b));
    if (p->n[LC] != p->n[RC] || p->n[LB] != p->n[RB])
        return cft__fail(CFT_E_ARG,
                         "dot_general: contracting/batch dim lists differ in length: %s . %s",
                         cft__av(a), cft__av(b));
    bool ua[CFT_MAX_NDIM] = {0}, ub[CFT_MAX_NDIM] = {0};
    for (int k = 0; k < 4; k++) {
        const cft_aval *s = k % 2 ? b : a;
        bool *u = k % 2 ? ub : ua;
        for (int i = 0; i < p->n[k]; i++) {
            int64_t d = p->v[k][i];
            if (d < 0 || d >= s->ndim || u[d])
                return cft__fail(CFT_E_ARG, "dot_general: bad or repeated dim %lld for %s",
                                 (long long)d, cft__av(s));
            u[d] = true;
        }
    }
    for (int i = 0; i < p->n[LC]; i++)
        if (a->shape[p->v[LC][i]] != b->shape[p->v[RC][i]])
            return cft__fail(
                CFT_E_SHAPE, "dot_general: contracting dims differ: %s . %s (%s != %s)", cft__av(a),
                cft__av(b), cft__dim_s(a->shape[p->v[LC][i]]), cft__dim_s(b->shape[p->v[RC][i]]));
    for (int i = 0; i < p->n[LB]; i++)
        if (a->shape[p->v[LB][i]] != b->shape[p->v[RB][i]])
            return cft__fail(CFT_E_SHAPE, "dot_general: batch dims differ: %s . %s", cft__av(a),
                             cft__av(b));
    int fa[CFT_MAX_NDIM], fb[CFT_MAX_NDIM], na, nb;
    free_dims(a->ndim, p, LC, LB, fa, &na);
    free_dims(b->ndim, p, RC, RB, fb, &nb);
    int nd = p->n[LB] + na + nb;
    if (nd > CFT_MAX_NDIM)
        return cft__fail(CFT_E_SHAPE, "dot_general: result rank %d too large", nd);
    *out = cft__aval(a->dtype, NULL, 0);
    for (int i = 0; i < p->n[LB]; i++)
        out->shape[out->ndim++] = a->shape[p->v[LB][i]];
    for (int i = 0; i < na; i++)
        out->shape[out->ndim++] = a->shape[fa[i]];
    for (int i = 0; i < nb; i++)
        out->shape[out->ndim++] = b->shape[fb[i]];
    return NULL;
}

/* A group of dims (free or contracting) of an operand, read as one index:
 * its size and its stride, if consecutive non-unit dims nest row-major. */
static bool collapse(const cft_array *x, const int64_t *dims, int n, int64_t *size,
                     int64_t *stride) {
    *size = 1;
    *stride = 0;
    int64_t prev = -1;
    for (int i = 0; i < n; i++) {
        int64_t d = dims[i], len = x->aval.shape[d];
        *size *= len;
        if (len == 1)
            continue;
        if (prev >= 0 && x->strides[prev] != x->strides[d] * len)
            return false;
        prev = d;
        *stride = x->strides[d];
    }
    return true;
}

/* rows x cols with element (i, j) at i*rs + j*cs as a BLAS matrix: row-major
 * with leading dim ld, or (trans) the row-major transpose */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans,
                        int64_t *ld) {
    int64_t mc = cols > 1 ? cols : 1, mr = rows > 1 ? rows : 1;
    if (cols <= 1 || cs == 1) {
        int64_t l = rows <= 1 ? mc : rs;
        if (l >= mc)
            return *trans = false, *ld = l, true;
    }
    if (rows <= 1 || rs == 1) {
        int64_t l = cols <= 1 ? mr : cs;
        if (l >= mr)
            return *trans = true, *ld = l, true;
    }
    return false;
}

/* A GEMM operand: per batch element a rows x cols matrix (lhs: free x
 * contract; rhs: contract x free) read in place through its strides, or a
 * contiguous copy when the dims do not allow that. */
typedef struct {
    const cft_array *arr;
    int64_t rows, cols, rs, cs, ld;
    bool trans;
    int nb;
    int64_t bshape[CFT_MAX_NDIM], bstr[CFT_MAX_NDIM];
    /* rhs whose free dims do not collapse but whose first free dim is an
     * outer loop over the rest (a vmapped operand, [K, contract, n], met by
     * an unbatched lhs): cols = split * split_n; column block s reads from
     * offset s * split_stride. 0: not split. */
    int64_t split_n, split_stride;
} operand;

static cft_array *as_matrix(const cft_array *x, const int64_t *bd, int nbd, const int *fr, int nfr,
                            const int64_t *cd, int ncd, bool lhs, operand *o) {
    /* the dim lists of the copy outlive the iteration that makes them */
    int64_t frd[CFT_MAX_NDIM], nbd2[CFT_MAX_NDIM], nfr2[CFT_MAX_NDIM], ncd2[CFT_MAX_NDIM];
    for (int i = 0; i < nfr; i++)
        frd[i] = fr[i];
    for (int attempt = 0; attempt < 2; attempt++) {
        int64_t fs, fst, cs, cst;
        bool ok = collapse(x, frd, nfr, &fs, &fst) && collapse(x, cd, ncd, &cs, &cst);
        if (ok) {
            o->arr = x;
            o->rows = lhs ? fs : cs;
            o->cols = lhs ? cs : fs;
            o->rs = lhs ? fst : cst;
            o->cs = lhs ? cst : fst;
            ok = blas_layout(o->rows, o->cols, o->rs, o->cs, &o->trans, &o->ld);
        }
        o->split_n = 0;
        if (!ok && nfr >= 2 && !x->conj) { /* the outer free dim as a loop */
            int64_t n, st, ks, kst, outer = x->aval.shape[frd[0]];
            if (outer > 1 && collapse(x, frd + 1, nfr - 1, &n, &st) && n > 1 &&
                collapse(x, cd, ncd, &ks, &kst) &&
                (lhs ? blas_layout(n, ks, st, kst, &o->trans, &o->ld)
                     : blas_layout(ks, n, kst, st, &o->trans, &o->ld))) {
                o->arr = x;
                o->rows = lhs ? outer * n : ks, o->cols = lhs ? ks : outer * n;
                o->rs = lhs ? st : kst, o->cs = lhs ? kst : st;
                o->split_n = n, o->split_stride = x->strides[frd[0]];
                ok = true;
            }
        }
        if (ok && x->conj && !o->trans) /* no conjugate-only GEMM flag: copy */
            ok = false;
        if (ok) {
            o->nb = nbd;
            for (int i = 0; i < nbd; i++)
                o->bshape[i] = x->aval.shape[bd[i]], o->bstr[i] = x->strides[bd[i]];
            return NULL;
        }
        /* copy into [batch, rows, cols] order and look again */
        int64_t shape[CFT_MAX_NDIM], st[CFT_MAX_NDIM];
        int k = 0;
        for (int i = 0; i < nbd; i++, k++)
            shape[k] = x->aval.shape[bd[i]], st[k] = x->strides[bd[i]], nbd2[i] = k;
        const int64_t *g1 = lhs ? frd : cd, *g2 = lhs ? cd : frd;
        int n1 = lhs ? nfr : ncd, n2 = lhs ? ncd : nfr;
        int64_t *o1 = lhs ? nfr2 : ncd2, *o2 = lhs ? ncd2 : nfr2;
        for (int i = 0; i < n1; i++, k++)
            shape[k] = x->aval.shape[g1[i]], st[k] = x->strides[g1[i]], o1[i] = k;
        for (int i = 0; i < n2; i++, k++)
            shape[k] = x->aval.shape[g2[i]], st[k] = x->strides[g2[i]], o2[i] = k;
        cft_array *c = cft__contig(cft__view(x, shape, k, st, x->offset));
        if (cft_failed(c))
            return c;
        x = c;
        bd = nbd2;
        memcpy(frd, nfr2, sizeof(int64_t) * (size_t)nfr);
        cd = ncd2;
    }
    return cft__fail(CFT_E_SHAPE, "dot_general: internal layout error");
}

/* z = x y^T; vectorised (the library builds at -O2, which would not) */
CFT_VEC static void outer_f32(const float *restrict x, const float *restrict y, float *restrict z,
                              int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            z[i * N + j] = x[i] * y[j];
}

/* A product with one row or one column and little arithmetic (M N K <=
 * THIN_MAX) whose long side is contiguous: C (m x n) by a direct loop,
 * each element a sum over k in order (so the same for any block of the
 * product). A library call costs more than the arithmetic there: MAML's
 * 100 products [1x10][10x40] took 17.6 us through libxsmm, 8.9 this way. */
enum { THIN_MAX = 16384 };
static bool thin(const operand *A, const operand *B, int64_t M, int64_t N, int64_t K) {
    return M * N * K <= THIN_MAX && ((M == 1 && B->cs == 1) || (N == 1 && A->rs == 1)) &&
           !A->arr->conj && !B->arr->conj;
}
CFT_VEC static void thin_f32(const float *restrict A, int64_t acs, const float *restrict B,
                             int64_t brs, float *restrict C, int64_t m, int64_t n, int64_t K) {
    /* m == 1: C[j] = sum_k A[k] B[k, j]; n == 1: C[i] = sum_k A[i, k] B[k]
     * (the long side's stride is 1) */
    const float *v = m == 1 ? A : B, *mat = m == 1 ? B : A;
    int64_t vs = m == 1 ? acs : brs, ms = m == 1 ? brs : acs, len = m == 1 ? n : m;
    for (int64_t j = 0; j < len; j++)
        C[j] = 0;
    for (int64_t k = 0; k < K; k++) {
        float a = v[k * vs];
        const float *row = mat + k * ms;
        for (int64_t j = 0; j < len; j++)
            C[j] += a * row[j];
    }
}

/* an M x N block of C (row stride ldc) */
static void gemm_int(const operand *A, const operand *B, int64_t M, int64_t N, int64_t K,
                     const char *Ap, const char *Bp, void *C, int64_t ldc, cft_dtype dt) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            int64_t acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (int64_t)cft__get(Ap, dt, i * A->rs + k * A->cs) *
                       (int64_t)cft__get(Bp, dt, k * B->rs + j * B->cs);
            cft__set(C, dt, i * ldc + j, (double)acc);
        }
}

/* One GEMM job: the batch of products C[t] = A[t] B[t], each optionally cut
 * into blocks of rows (or of columns when there are few rows), so that
 * cft__par_for can share out either many small products or one large one. */
typedef struct {
    operand A, B;
    int nbt;
    int64_t M, N, K, Bt;
    int64_t rblk, cblk, nr, nc; /* block sizes and counts per product */
    cft_dtype dt;
    size_t es;
    const char *pa, *pb;
    char *pc;
    void *xk; /* a libxsmm kernel for every whole product of the batch, or NULL */
} gemm_job;

/* rows [i0, i0 + m) and columns [j0, j0 + n) of product t */
static void gemm_block(const gemm_job *j, int64_t t, int64_t i0, int64_t m, int64_t j0, int64_t n) {
    const operand *A = &j->A, *B = &j->B;
    int64_t oa = 0, ob = 0, rem = t;
    for (int i = j->nbt - 1; i >= 0; i--) {
        int64_t k = rem % A->bshape[i];
        rem /= A->bshape[i];
        oa += k * A->bstr[i], ob += k * B->bstr[i];
    }
    oa += A->split_n ? (i0 / A->split_n) * A->split_stride + (i0 % A->split_n) * A->rs : i0 * A->rs;
    ob += B->split_n ? (j0 / B->split_n) * B->split_stride + (j0 % B->split_n) * B->cs : j0 * B->cs;
    size_t es = j->es;
    int64_t M = j->M, N = j->N, K = j->K;
    cft_dtype dt = j->dt;
    const char *Ap = j->pa + oa * (int64_t)es, *Bp = j->pb + ob * (int64_t)es;
    char *Cp = j->pc + (size_t)(t * M * N + i0 * N + j0) * es;
    if (K == 0) {
        for (int64_t i = 0; i < m; i++)
            memset(Cp + (size_t)(i * N) * es, 0, (size_t)n * es);
        return;
    }
    if (j->xk && m == M && n == N) { /* dispatched once for the batch (dot_into) */
        cft__sgemm_small_run(j->xk, (const float *)Ap, (const float *)Bp, (float *)Cp);
        return;
    }
    /* a conjugate view read in place is conjugated by the GEMM itself */
    CBLAS_TRANSPOSE ta = A->trans ? (A->arr->conj ? CblasConjTrans : CblasTrans) : CblasNoTrans,
                    tb = B->trans ? (B->arr->conj ? CblasConjTrans : CblasTrans) : CblasNoTrans;
    if (K == 1 && dt == CFT_F32 && (m == 1 || A->rs == 1) && (n == 1 || B->cs == 1) && n == N) {
        outer_f32((const float *)Ap, (const float *)Bp, (float *)Cp, m,
                  n);                                  /* per-sample outer products */
    } else if (dt == CFT_F32 && thin(A, B, M, N, K)) { /* C's block is contiguous */
        thin_f32((const float *)Ap, A->cs, (const float *)Bp, B->rs, (float *)Cp, m, n, K);
    } else if (dt == CFT_F32) {
        if (!A->arr->conj && !B->arr->conj && cft__sgemm_small_fits(A->trans, M, N, K) &&
            cft__sgemm_small(A->trans, B->trans, (int)m, (int)n, (int)K, (const float *)Ap,
                             (int)A->ld, (const float *)Bp, (int)B->ld, (float *)Cp, (int)N))
            return;
        cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)K, 1.0f, (const float *)Ap,
                    (int)A->ld, (const float *)Bp, (int)B->ld, 0.0f, (float *)Cp, (int)N);
    } else if (dt == CFT_F64) {
        cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)K, 1.0, (const double *)Ap,
                    (int)A->ld, (const double *)Bp, (int)B->ld, 0.0, (double *)Cp, (int)N);
    } else if (dt == CFT_C64) {
        static const float one[2] = {1, 0}, zero[2] = {0, 0};
        cblas_cgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)K, one, Ap, (int)A->ld, Bp,
                    (int)B->ld, zero, Cp, (int)N);
    } else if (dt == CFT_C128) {
        static const double one[2] = {1, 0}, zero[2] = {0, 0};
        cblas_zgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)K, one, Ap, (int)A->ld, Bp,
                    (int)B->ld, zero, Cp, (int)N);
    } else {
        gemm_int(A, B, m, n, K, Ap, Bp, Cp, N, dt);
    }
}

static void gemm_range(void *ctx, int64_t lo, int64_t hi) {
    const gemm_job *j = ctx;
    int64_t per = j->nr * j->nc;
    for (int64_t u = lo; u < hi; u++) {
        int64_t t = u / per, b = u % per, r = b / j->nc, c = b % j->nc;
        int64_t i0 = r * j->rblk, j0 = c * j->cblk;
        int64_t m = j->M - i0 < j->rblk ? j->M - i0 : j->rblk;
        int64_t n = j->N - j0 < j->cblk ? j->N - j0 : j->cblk;
        gemm_block(j, t, i0, m, j0, n);
    }
}

/* One product with a long sum and a small result (a weight gradient,
 * x^T g over a batch: 128 x 128 from K = 1024) gains little from cutting
 * its rows among threads: each thread packs the whole other operand. It
 * is cut along K instead into KPIECES fixed halves, whatever the thread
 * count, the second into a scratch buffer added after: the same sums on
 * one thread as on several. (On 2 threads the row blocks ran 1.46x faster
 * than one thread.) */
enum { KPIECES = 2 };
static void kpiece(void *ctx, int64_t lo, int64_t hi) {
    gemm_job *jobs = ctx;
    for (int64_t u = lo; u < hi; u++)
        gemm_range(&jobs[u], 0, 1);
}
static bool ksplit(const gemm_job *j) {
    int64_t big = j->M > j->N ? j->M : j->N;
    if (j->Bt != 1 || j->A.split_n || j->B.split_n || j->K < 512 || j->K < 4 * big ||
        j->M * j->N < 256 || (j->dt != CFT_F32 && j->dt != CFT_F64) || j->A.arr->conj ||
        j->B.arr->conj)
        return false;
    size_t bytes = (size_t)(j->M * j->N) * j->es;
    char *scratch = malloc(bytes);
    if (!scratch)
        return false;
    gemm_job jobs[KPIECES] = {*j, *j};
    int64_t k0 = j->K / 2;
    jobs[0].K = k0;
    jobs[1].K = j->K - k0; /* A's columns and B's rows from k0 */
    jobs[1].pa += k0 * j->A.cs * (int64_t)j->es;
    jobs[1].pb += k0 * j->B.rs * (int64_t)j->es;
    jobs[1].pc = scratch;
    cft__par_for(KPIECES, 2.0 * (double)(j->M * j->N) * (double)k0, kpiece, jobs);
    int64_t n = j->M * j->N;
    if (j->dt == CFT_F32)
        for (int64_t i = 0; i < n; i++)
            ((float *)j->pc)[i] += ((const float *)scratch)[i];
    else
        for (int64_t i = 0; i < n; i++)
            ((double *)j->pc)[i] += ((const double *)scratch)[i];
    free(scratch);
    return true;
}

/* Few large products are cut into blocks of rows (or of columns when
 * there are few rows) so that threads can share them. The cut depends on
 * the shape alone, never on the thread count: a block of a product is not
 * the whole product's bits in every library (OpenBLAS's AVX2 kernels gave
 * other sums for the last rows of a block than for the same rows of the
 * whole product; its AVX-512 ones did not), so one thread runs the same
 * blocks as several, and results do not depend on the thread count on any
 * CPU. At most GEMM_MAX_BLOCKS units a call, blocks of at least
 * GEMM_MIN_SIDE rows or columns and GEMM_MIN_WORK flops: cutting a 512^3
 * product into 4 row blocks cost a single thread 0-5% (each block packs
 * the other operand again), 16 blocks 25%. */
enum { GEMM_MAX_BLOCKS = 8, GEMM_MIN_SIDE = 128 };
#define GEMM_MIN_WORK (double)(1 << 22)
static void cut_blocks(gemm_job *j, double flops) {
    if (j->Bt >= GEMM_MAX_BLOCKS)
        return;
    int64_t want = (GEMM_MAX_BLOCKS + j->Bt - 1) / j->Bt;
    if ((double)want > flops / GEMM_MIN_WORK)
        want = (int64_t)(flops / GEMM_MIN_WORK);
    bool rows = j->M >= j->N;
    int64_t side = rows ? j->M : j->N;
    if (want > side / GEMM_MIN_SIDE)
        want = side / GEMM_MIN_SIDE;
    if (want < 2)
        return;
    int64_t blk = (side + want - 1) / want;
    blk = (blk + 15) / 16 * 16; /* whole vectors of the library's kernels */
    if (rows)
        j->rblk = blk, j->nr = (j->M + blk - 1) / blk;
    else
        j->cblk = blk, j->nc = (j->N + blk - 1) / blk;
}

/* GEMM per batch element into c, a contiguous array of the output aval;
 * the batch shared among threads, or one large product cut into blocks */
static cft_array *dot_into_half(cft_array *const *in, int nin, const cft_params *p, cft_array *c);

static cft_array *dot_into(cft_array *const *in, int nin, const cft_params *p, cft_array *c) {
    if (cft_dtype_is_half(c->aval.dtype) || cft_dtype_is_half(in[0]->aval.dtype) ||
        cft_dtype_is_half(in[1]->aval.dtype))
        return dot_into_half(in, nin, p, c);
    const cft_array *a = in[0], *b = in[1];
    int fa[CFT_MAX_NDIM], fb[CFT_MAX_NDIM], na, nb, nbt = p->n[LB], nc = p->n[LC];
    free_dims(a->aval.ndim, p, LC, LB, fa, &na);
    free_dims(b->aval.ndim, p, RC, RB, fb, &nb);
    gemm_job j = {.nbt = nbt, .dt = c->aval.dtype};
    cft_array *e = as_matrix(a, p->v[LB], nbt, fa, na, p->v[LC], nc, true, &j.A);
    if (e)
        return e;
    e = as_matrix(b, p->v[RB], nbt, fb, nb, p->v[RC], nc, false, &j.B);
    if (e)
        return e;
    j.Bt = 1, j.M = j.A.rows, j.N = j.B.cols, j.K = j.A.cols;
    for (int i = 0; i < nbt; i++)
        j.Bt *= j.A.bshape[i];
    j.es = cft_dtype_size(j.dt);
    j.pa = cft__ptr(j.A.arr), j.pb = cft__ptr(j.B.arr), j.pc = cft__ptr(c);
    j.rblk = j.M, j.cblk = j.N, j.nr = 1, j.nc = 1;
    if (j.M * j.N == 0 || j.Bt == 0)
        return NULL;
    double flops = 2.0 * (double)j.M * (double)j.N * (double)(j.K ? j.K : 1);
    if (ksplit(&j)) {
        cft__keep(j.A.arr);
        cft__keep(j.B.arr);
        return NULL;
    }
    /* the work that decides on threads: arithmetic, bytes moved, and a
     * library call per product (about 4096 flops' time: MAML's batches of
     * 100 tiny products took 5-9 us each, worth sharing out) */
    double bytes = (double)((j.M + j.N) * j.K + j.M * j.N) * (double)j.es;
    int nth = cft__par_threads_for((flops + bytes + 4096.0) * (double)j.Bt);
    if (j.A.split_n || j.B.split_n) { /* one block per outer index of a split operand */
        if (j.A.split_n)
            j.rblk = j.A.split_n, j.nr = j.M / j.A.split_n;
        if (j.B.split_n)
            j.cblk = j.B.split_n, j.nc = j.N / j.B.split_n;
    } else {
        cut_blocks(&j, flops);
    }
    /* a batch of whole f32 products that gemm_block would send to libxsmm one by one:
     * the kernel dispatched once here */
    bool outer = j.K == 1 && (j.M == 1 || j.A.rs == 1) && (j.N == 1 || j.B.cs == 1);
    if (j.dt == CFT_F32 && j.Bt > 1 && j.nr == 1 && j.nc == 1 && !outer &&
        !thin(&j.A, &j.B, j.M, j.N, j.K) && !j.A.arr->conj && !j.B.arr->conj && !j.B.trans &&
        !j.A.split_n && !j.B.split_n)
        j.xk = cft__sgemm_small_kernel(j.A.trans, (int)j.M, (int)j.N, (int)j.K, (int)j.A.ld,
                                       (int)j.B.ld, (int)j.N);
    int64_t units = j.Bt * j.nr * j.nc;
    cft__par_for(units, nth > 1 ? 1e12 : 0, gemm_range, &j);
    cft__keep(j.A.arr);
    cft__keep(j.B.arr);
    return NULL;
}

static cft_array *dot_impl(cft_array *const *in, int nin, const cft_params *p, cft_array **out) {
    return cft__impl_by_into(&cft_p_dot_general, in, nin, p, out);
}

static cft_array *dot_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                          const cft_params *p, cft_array **ty) {
    (void)y, (void)nin;
    cft_array *r = NULL;
    if (t[0])
        r = cft__bind1(&cft_p_dot_general, p, 2, (cft_array *[]){t[0], x[1]});
    if (t[1])
        r = cft__tadd(r, cft__bind1(&cft_p_dot_general, p, 2, (cft_array *[]){x[0], t[1]}));
    ty[0] = r;
    return NULL;
}

/* The cotangent of one operand: contract ct with the other operand over the
 * other's free dims, batch over the batch dims, then permute the result
 * (batch, own free, own contracting dims in the other's order) back into the
 * operand's dim order. `side` 0: lhs, 1: rhs. */
static cft_array *dot_ct(cft_array *ct, cft_array *other, const cft_aval *self_av,
                         const cft_aval *other_av, const cft_params *p, int side) {
    int sc = side ? RC : LC, oc = side ? LC : RC, sb = side ? RB : LB, ob = side ? LB : RB;
    int fs[CFT_MAX_NDIM], fo[CFT_MAX_NDIM], ns, no, nbt = p->n[LB];
    free_dims(self_av->ndim, p, sc, sb, fs, &ns);
    free_dims(other_av->ndim, p, oc, ob, fo, &no);
    /* ct dims: [batch (nbt), lhs free, rhs free] */
    int64_t cc[CFT_MAX_NDIM], co[CFT_MAX_NDIM], bc[CFT_MAX_NDIM], bo[CFT_MAX_NDIM];
    int ct_other0 = side ? nbt : nbt + ns; /* where the other operand's free dims sit in ct */
    for (int i = 0; i < no; i++)
        cc[i] = ct_other0 + i, co[i] = fo[i];
    for (int i = 0; i < nbt; i++)
        bc[i] = i, bo[i] = p->v[ob][i];
    /* result: [batch, ct's remaining (self free), other's remaining (its contracting dims,
     * ascending)] */
    cft_params q = {0};
    cft__param_set(&q, LC, cc, no);
    cft__param_set(&q, RC, co, no);
    cft__param_set(&q, LB, bc, nbt);
    cft__param_set(&q, RB, bo, nbt);
    /* src[j]: the self dim that result dim j corresponds to; srcw: the same
     * for the operands swapped, dot(other, ct) = [batch, other's remaining,
     * self free] */
    int src[CFT_MAX_NDIM], srcw[CFT_MAX_NDIM], k = 0, kw = nbt;
    for (int i = 0; i < nbt; i++)
        src[k++] = srcw[i] = (int)p->v[sb][i];
    for (int i = 0; i < ns; i++)
        src[k++] = fs[i];
    for (int d = 0; d < other_av->ndim; d++) /* other's contracting dims in ascending order */
        for (int i = 0; i < p->n[oc]; i++)
            if (p->v[oc][i] == d)
                src[k++] = srcw[kw++] = (int)p->v[sc][i];
    for (int i = 0; i < ns; i++)
        srcw[kw++] = fs[i];
    bool ident = true, identw = true;
    for (int j = 0; j < k; j++)
        ident = ident && src[j] == j, identw = identw && srcw[j] == j;
    if (!ident && identw) { /* the swapped product is already in self's order (a weight's
                             * cotangent x^T g): no transposed view for its users to copy */
        cft_params w = {0};
        cft__param_set(&w, LC, co, no);
        cft__param_set(&w, RC, cc, no);
        cft__param_set(&w, LB, bo, nbt);
        cft__param_set(&w, RB, bc, nbt);
        return cft__bind1(&cft_p_dot_general, &w, 2, (cft_array *[]){other, ct});
    }
    cft_array *r = cft__bind1(&cft_p_dot_general, &q, 2, (cft_array *[]){ct, other});
    if (cft_failed(r))
        return r;
    int perm[CFT_MAX_NDIM];
    for (int j = 0; j < k; j++)
        perm[src[j]] = j;
    return cft_transpose(r, perm);
}

static cft_array *dot_transpose(cft_array *const *ct, cft_array *const *x, const cft_aval *in,
                                int nin, const cft_params *p, cft_array **ct_in) {
    (void)nin;
    if (!x[0] && !x[1])
        return cft__fail(CFT_E_TRACE, "dot_general: transpose of a product of two linear values");
    ct_in[0] = x[0] ? NULL : dot_ct(ct[0], x[1], &in[0], &in[1], p, 0);
    ct_in[1] = x[1] ? NULL : dot_ct(ct[0], x[0], &in[1], &in[0], p, 1);
    return NULL;
}

/* Move batched axes to the front. Both batched: a new batch dim, out axis 0.
 * One batched: it becomes that operand's first free dim. */
static cft_array *dot_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                           const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    cft_params q = *p;
    cft_array *a = x[0], *b = x[1];
    for (int s = 0; s < 2; s++) {
        if (bdim[s] < 0)
            continue;
        if (s == 0)
            a = cft__moveaxis_b(a, bdim[0], 0);
        else
            b = cft__moveaxis_b(b, bdim[1], 0);
        int kc = s ? RC : LC, kb = s ? RB : LB;
        for (int i = 0; i < q.n[kc]; i++)
            q.v[kc][i]++;
        for (int i = 0; i < q.n[kb]; i++)
            q.v[kb][i]++;
    }
    int nbt = p->n[LB];
    if (bdim[0] >= 0 && bdim[1] >= 0) {
        for (int k = LB; k <= RB; k++) {
            memmove(&q.v[k][1], &q.v[k][0], sizeof(int64_t) * (size_t)q.n[k]);
            q.v[k][0] = 0;
            q.n[k]++;
        }
        ybdim[0] = 0;
    } else if (bdim[0] >= 0) {
        ybdim[0] = nbt;
    } else {
        int fa[CFT_MAX_NDIM], na;
        free_dims(a->aval.ndim, p, LC, LB, fa, &na);
        ybdim[0] = nbt + na;
    }
    y[0] = cft__bind1(&cft_p_dot_general, &q, 2, (cft_array *[]){a, b});
    return NULL;
}

/* transpose(dot(a, b)) with perm = (batch, rhs free, lhs free) is dot(b, a) */
static bool dot_fold_transpose(const cft_params *p, const int64_t *perm, int ndim,
                               const cft_aval *in, cft_params *out, bool *swap) {
    int fa[CFT_MAX_NDIM], fb[CFT_MAX_NDIM], na, nb, nbt = p->n[LB];
    free_dims(in[0].ndim, p, LC, LB, fa, &na);
    free_dims(in[1].ndim, p, RC, RB, fb, &nb);
    if (ndim != nbt + na + nb)
        return false;
    for (int i = 0; i < nbt; i++)
        if (perm[i] != i)
            return false;
    for (int i = 0; i < nb; i++)
        if (perm[nbt + i] != nbt + na + i)
            return false;
    for (int i = 0; i < na; i++)
        if (perm[nbt + nb + i] != nbt + i)
            return false;
    memset(out, 0, sizeof *out);
    cft__param_set(out, LC, p->v[RC], p->n[RC]);
    cft__param_set(out, RC, p->v[LC], p->n[LC]);
    cft__param_set(out, LB, p->v[RB], p->n[RB]);
    cft__param_set(out, RB, p->v[LB], p->n[LB]);
    *swap = true;
    return true;
}

/* One outer product per example: batch axis 0 of both operands, every
 * contracted dim of size 1, real floats. Then out[b] = lhs[b] (x) rhs[b]
 * (their free dims), so ||out[b]||^2 = ||lhs[b]||^2 ||rhs[b]||^2 and
 * sum_b w[b] out[b] = (w lhs)^T rhs, one GEMM over the batch. Half
 * operands (autocast's products) answer in f32, from their values widened:
 * the question reaches them through the conversion to f32 above them
 * (convert_element_type's rules), which sums in f32 too. */
static bool per_example_outer(const cft_eqn *q, int axis, int64_t nb) {
    const cft_params *p = &q->params;
    if (axis != 0 || nb != q->out[0]->aval.shape[0])
        return false;
    const cft_aval *a = &q->in[0]->aval, *b = &q->in[1]->aval;
    if (p->n[LB] != 1 || p->v[LB][0] != 0 || p->v[RB][0] != 0 || a->ndim < 1 || b->ndim < 1)
        return false;
    if ((a->dtype != CFT_F32 && a->dtype != CFT_F64 && !cft_dtype_is_half(a->dtype)) ||
        b->dtype != a->dtype)
        return false;
    for (int i = 0; i < p->n[LC]; i++)
        if (a->shape[p->v[LC][i]] != 1)
            return false;
    return true;
}

/* the sum of squares of x over every axis but the batch axis 0: [B] */
static cft_array *sq_per_example(cft_array *x) {
    int nd = cft_array_ndim(x), axes[CFT_MAX_NDIM];
    for (int i = 1; i < nd; i++)
        axes[i - 1] = i;
    return cft_sum(cft_square(x), axes, nd - 1, false);
}

static bool dot_batch_sqnorm(const cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                             cft_array **out) {
    if (!per_example_outer(q, axis, nb))
        return false;
    if (c->value)
        *out = cft_mul(sq_per_example(cft__rewrite_value_f32(c, q->in[0]->id)),
                       sq_per_example(cft__rewrite_value_f32(c, q->in[1]->id)));
    return true;
}

static bool dot_batch_wsum(const cft_eqn *q, const cft_rewrite_ctx *c, int axis, int64_t nb,
                           cft_array *w, cft_array **out) {
    if (!per_example_outer(q, axis, nb))
        return false;
    if (!c->value)
        return true;
    cft_array *a = cft__rewrite_value_f32(c, q->in[0]->id),
              *b = cft__rewrite_value_f32(c, q->in[1]->id);
    int nd = cft_array_ndim(a), nc = q->params.n[LC] + 1, lc[CFT_PARAM_LEN + 1],
        rc[CFT_PARAM_LEN + 1];
    int64_t ws[CFT_MAX_NDIM];
    ws[0] = cft_array_dim(a, 0);
    for (int i = 1; i < nd; i++)
        ws[i] = 1;
    lc[0] = rc[0] = 0; /* the batch axis is contracted, with the size-1 dims */
    for (int i = 1; i < nc; i++)
        lc[i] = (int)q->params.v[LC][i - 1], rc[i] = (int)q->params.v[RC][i - 1];
    cft_array *r =
        cft_dot_general(cft_mul(a, cft_reshape(w, ws, nd)), b, lc, rc, nc, NULL, NULL, 0);
    const cft_aval *o = &q->out[0]->aval; /* [free...] -> [1, free...] */
    int64_t os[CFT_MAX_NDIM];
    memcpy(os, o->shape, sizeof(int64_t) * (size_t)o->ndim);
    os[0] = 1;
    *out = cft_reshape(r, os, o->ndim);
    return true;
}

/* a view of x with its dims in the order of the lists g[0], g[1], g[2]
 * (n[k] dims each), or, turned, g[0], g[2], g[1] */
static cft_array *in_order(cft_array *x, const int64_t *const g[3], const int n[3], bool turned) {
    int64_t shape[CFT_MAX_NDIM], st[CFT_MAX_NDIM];
    int k = 0;
    for (int m = 0; m < 3; m++) {
        int l = turned && m ? 3 - m : m;
        for (int i = 0; i < n[l]; i++, k++)
            shape[k] = x->aval.shape[g[l][i]], st[k] = x->strides[g[l][i]];
    }
    return cft__view(x, shape, k, st, x->offset);
}

/* x's dims in the order of the lists g[0], g[1], g[2] as they lie, when
 * that is contiguous, or, when the order g[0], g[2], g[1] is (each matrix
 * turned: a transposed operand of a backward pass), as they lie in that
 * order with *turned set; else a contiguous copy in the first order */
static cft_array *ordered_or_turned(cft_array *x, const int64_t *const g[3], const int n[3],
                                    bool *turned) {
    cft_array *v = in_order(x, g, n, false);
    *turned = false;
    if (cft_failed(v) || cft__is_contig(v))
        return v;
    cft_array *w = in_order(x, g, n, true);
    if (cft_failed(w) || cft__is_contig(w)) {
        *turned = !cft_failed(w);
        return w;
    }
    return cft__contig(v);
}

/* the product into dst (contiguous, the output's shape, a's dtype):
 * false where oneDNN declines or each matrix product (M N K) is under
 * min_work multiply-adds; nothing allocated but the operands' copies where
 * they lie neither as [batch, M, K] and [batch, K, N] nor with their
 * matrices turned */
static bool dnnl_to(cft_array *a, cft_array *b, const cft_params *p, int code, double min_work,
                    void *dst) {
    int fa[CFT_MAX_NDIM], fb[CFT_MAX_NDIM], na, nb, nbt = p->n[LB], nc = p->n[LC];
    free_dims(a->aval.ndim, p, LC, LB, fa, &na);
    free_dims(b->aval.ndim, p, RC, RB, fb, &nb);
    int64_t Bt = 1, M = 1, N = 1, K = 1, fa64[CFT_MAX_NDIM], fb64[CFT_MAX_NDIM];
    for (int i = 0; i < nbt; i++)
        Bt *= a->aval.shape[p->v[LB][i]];
    for (int i = 0; i < na; i++)
        M *= a->aval.shape[fa[i]], fa64[i] = fa[i];
    for (int i = 0; i < nb; i++)
        N *= b->aval.shape[fb[i]], fb64[i] = fb[i];
    for (int i = 0; i < nc; i++)
        K *= a->aval.shape[p->v[LC][i]];
    if (a->conj || b->conj || (double)M * (double)N * (double)K < min_work)
        return false;
    bool ta, tb;
    cft_array *ac = ordered_or_turned(a, (const int64_t *const[3]){p->v[LB], fa64, p->v[LC]},
                                      (const int[3]){nbt, na, nc}, &ta);
    cft_array *bc = ordered_or_turned(b, (const int64_t *const[3]){p->v[RB], p->v[RC], fb64},
                                      (const int[3]){nbt, nc, nb}, &tb);
    if (cft_failed(ac) || cft_failed(bc) ||
        !cft__matmul_dnnl(code, Bt, M, N, K, cft__ptr(ac), ta, cft__ptr(bc), tb, dst))
        return false;
    cft__keep(ac);
    cft__keep(bc);
    return true;
}

cft_array *cft__dot_dnnl(cft_array *a, cft_array *b, const cft_params *p, int code,
                         double min_work) {
    cft_aval o;
    if (dot_shape((const cft_aval[]){a->aval, b->aval}, 2, p, &o))
        return NULL;
    cft_array *c = cft__alloc(o.dtype, o.shape, o.ndim);
    if (cft_failed(c) || !dnnl_to(a, b, p, code, min_work, cft__ptr(c)))
        return NULL;
    return c;
}

/* per-example outer products in a half dtype (autocast's per-sample
 * gradients: batch dims leading in both operands, every contracted dim of
 * size 1): one pass that reads the halves and writes the rounded products,
 * where the widened path wrote an f32 product and rounded it in a second
 * pass. Each product is exact in f32 and rounds once, as a GEMM's would. */
typedef struct {
    int code;
    const uint16_t *a, *b;
    uint16_t *c;
    int64_t m, n, rows; /* per example: m x n; rows: of all examples */
} outer_job;

static void outer_rows(void *ctx, int64_t lo, int64_t hi) {
    const outer_job *j = ctx;
    for (int64_t r = lo; r < hi;) { /* runs of rows within one example */
        int64_t t = r / j->m, i = r % j->m, k = j->m - i < hi - r ? j->m - i : hi - r;
        cft__outer_half(j->code, j->a + t * j->m + i, j->b + t * j->n, j->c + r * j->n, k, j->n);
        r += k;
    }
}

/* the same rows stored widened (dot_into_wide) */
typedef struct {
    int code;
    const uint16_t *a, *b;
    float *c;
    int64_t m, n;
} outer_wide_job;

static void outer_wide_rows(void *ctx, int64_t lo, int64_t hi) {
    const outer_wide_job *j = ctx;
    for (int64_t r = lo; r < hi;) {
        int64_t t = r / j->m, i = r % j->m, k = j->m - i < hi - r ? j->m - i : hi - r;
        cft__outer_half_wide(j->code, j->a + t * j->m + i, j->b + t * j->n, j->c + r * j->n, k,
                             j->n);
        r += k;
    }
}

static bool outer_fits(cft_array *const *in, const cft_params *p) {
    const cft_aval *a = &in[0]->aval, *b = &in[1]->aval;
    int nb = p->n[LB];
    for (int i = 0; i < nb; i++)
        if (p->v[LB][i] != i || p->v[RB][i] != i)
            return false;
    for (int i = 0; i < p->n[LC]; i++)
        if (a->shape[p->v[LC][i]] != 1 || b->shape[p->v[RC][i]] != 1)
            return false;
    return cft__numel(a->shape, nb) > 0;
}

/* the outer products into c (contiguous, the product's shape) */
static bool outer_into(cft_array *const *in, const cft_params *p, int code, cft_array *c) {
    const cft_aval *a = &in[0]->aval, *b = &in[1]->aval;
    int64_t bt = cft__numel(a->shape, p->n[LB]), na = cft__numel(a->shape, a->ndim),
            nbn = cft__numel(b->shape, b->ndim);
    cft_array *ac = cft__contig(in[0]), *bc = cft__contig(in[1]);
    if (cft_failed(ac) || cft_failed(bc))
        return false;
    outer_job j = {code, cft__ptr(ac), cft__ptr(bc), cft__ptr(c), na / bt, nbn / bt, na};
    cft__par_for(j.rows, (double)j.n, outer_rows, &j);
    cft__keep(ac);
    cft__keep(bc);
    return true;
}

static bool outer_low(cft_array *const *in, const cft_params *p, const cft_aval *o, int code,
                      cft_array **out) {
    if (!outer_fits(in, p))
        return false;
    cft_array *c = cft__alloc(o->dtype, o->shape, o->ndim);
    if (cft_failed(c) || !outer_into(in, p, code, c))
        return false;
    *out = c;
    return true;
}

/* bf16 / f16 operands (autocast): outer products per example by the loop
 * above, the rest on oneDNN's matmul, which accumulates in
 * f32 (AMX or AVX512-BF16 where the CPU has them). Products whose
 * matrices have under DNNL_MIN_WORK multiply-adds each, and CPUs without
 * such kernels, decline (false), and cft__run_impl widens the operands to
 * f32: oneDNN's kernels for small matrices cost more than OpenBLAS's f32
 * ones and the conversions (a batch of 25 10x40x40 products, MAML's:
 * 8 us against 6.7 us, and the MAML step 1.6x f32's time where it was
 * 2.5-3x on oneDNN, on an AVX512-BF16 Zen 4), whatever the batch. */
#define DNNL_MIN_WORK 32768.0
static bool dot_low(cft_array *const *in, int nin, const cft_params *p, const cft_aval *oav,
                    cft_array **out) {
    (void)nin;
    cft_dtype dt = oav[0].dtype;
    if (!cft_dtype_is_half(dt) || in[0]->aval.dtype != dt || in[1]->aval.dtype != dt)
        return false;
    int code = dt == CFT_BF16 ? 1 : 2;
    if (outer_low(in, p, &oav[0], code, out))
        return true;
    if (!cft__dnnl_low_ok(code))
        return false;
    cft_array *c = cft__dot_dnnl(in[0], in[1], p, code, DNNL_MIN_WORK);
    if (!c)
        return false;
    out[0] = c;
    return true;
}

/* a product with half operands or output into c (contiguous), for the
 * jit's plans and row segments, which call impl_into (CFT_PRIM_INTO_HALF)
 * where the eager path would widen into fresh arrays: the outer products
 * and oneDNN's products as dot_low's, the rest on the f32 path
 * (cft__into_widened). */
static cft_array *dot_into_half(cft_array *const *in, int nin, const cft_params *p, cft_array *c) {
    cft_dtype dt = c->aval.dtype;
    int code = dt == CFT_BF16 ? 1 : 2;
    if (!cft__is_contig(c))
        return cft__fail(CFT_E_ARG, "dot_general: a strided half output %s", cft__av(&c->aval));
    bool same = in[0]->aval.dtype == dt && in[1]->aval.dtype == dt && cft_dtype_is_half(dt);
    if (same && outer_fits(in, p) && outer_into(in, p, code, c))
        return NULL;
    if (same && cft__dnnl_low_ok(code) &&
        dnnl_to(in[0], in[1], p, code, DNNL_MIN_WORK, cft__ptr(c)))
        return NULL;
    return cft__into_widened(&cft_p_dot_general, in, nin, p, c);
}

/* dot_into_half's product left widened: the outer products stored as
 * f32 values rounded to the half dtype, oneDNN's half product widened,
 * the rest on the f32 path rounded in place (cft__into_widened_wide) */
static cft_array *dot_into_wide(cft_array *const *in, int nin, const cft_params *p, cft_dtype half,
                                cft_array *c) {
    int code = half == CFT_BF16 ? 1 : 2;
    if (!cft__is_contig(c) || c->aval.dtype != CFT_F32 || !cft_dtype_is_half(half))
        return cft__fail(CFT_E_ARG, "dot_general: a widened half output %s", cft__av(&c->aval));
    bool same = in[0]->aval.dtype == half && in[1]->aval.dtype == half;
    if (same && outer_fits(in, p)) {
        const cft_aval *a = &in[0]->aval, *b = &in[1]->aval;
        int64_t bt = cft__numel(a->shape, p->n[LB]);
        cft_array *ac = cft__contig(in[0]), *bc = cft__contig(in[1]);
        if (cft_failed(ac) || cft_failed(bc))
            return cft_failed(ac) ? ac : bc;
        outer_wide_job j = {code,
                            cft__ptr(ac),
                            cft__ptr(bc),
                            cft__ptr(c),
                            cft__numel(a->shape, a->ndim) / bt,
                            cft__numel(b->shape, b->ndim) / bt};
        cft__par_for(cft__numel(a->shape, a->ndim), (double)j.n, outer_wide_rows, &j);
        cft__keep(ac);
        cft__keep(bc);
        return NULL;
    }
    int64_t n = cft_array_size(c);
    uint16_t *h =
        same && cft__dnnl_low_ok(code)
            ? cft__scratch(CFT_SCRATCH_HALF, sizeof(uint16_t) * (size_t)n, (size_t)1 << 30)
            : NULL;
    if (h && dnnl_to(in[0], in[1], p, code, DNNL_MIN_WORK, h)) {
        cft__cast(h, half, cft__ptr(c), CFT_F32, n);
        return NULL;
    }
    return cft__into_widened_wide(&cft_p_dot_general, in, nin, p, half, c);
}

/* rows of the output's axis 0: a batch dim that is axis 0 of both
 * operands (both cut), or, with no batch dims, lhs's axis 0 as its first
 * free dim (lhs cut, rhs whole and not split); or a sum over the rows:
 * axis 0 of both contracted (both cut) */
static int dot_split_rows(const cft_params *p, const cft_aval *in, int nin, const bool *split,
                          int64_t T, int64_t n, bool *slice, cft_params *q) {
    (void)nin, (void)n;
    *q = *p;
    if (p->n[LB] > 0) {
        if (p->v[LB][0] != 0 || p->v[RB][0] != 0 || in[0].shape[0] != T || in[1].shape[0] != T)
            return -1;
        slice[0] = slice[1] = true;
        return 1;
    }
    for (int i = 0; i < p->n[LC]; i++)
        if (p->v[LC][i] == 0) { /* summed over the rows: each thread's share, added after */
            if (p->v[RC][i] != 0 || in[0].shape[0] != T || in[1].shape[0] != T)
                return -1;
            slice[0] = slice[1] = true;
            return 2;
        }
    if (in[0].ndim < 1 || in[0].shape[0] != T || split[1])
        return -1;
    slice[0] = true, slice[1] = false;
    return 1;
}

const cft_prim cft_p_dot_general = {
    .name = "dot_general",
    .nin = 2,
    .nout = 1,
    .flags = CFT_PRIM_LINEAR | CFT_PRIM_CONTRACTION | CFT_PRIM_CONJ_AWARE | CFT_PRIM_AMP_LOW |
             CFT_PRIM_INTO_HALF,
    .pnames = {"lc", "rc", "lb", "rb"},
    .shape = dot_shape,
    .impl = dot_impl,
    .jvp = dot_jvp,
    .transpose = dot_transpose,
    .vmap = dot_vmap,
    .impl_into = dot_into,
    .impl_into_wide = dot_into_wide,
    .impl_low = dot_low,
    .fold_transpose = dot_fold_transpose,
    .batch_sqnorm = dot_batch_sqnorm,
    .batch_wsum = dot_batch_wsum,
    .split_rows = dot_split_rows,
    .dev_kernel = cft__dot_dev_kernel,
};

cft_array *cft_dot_general(cft_array *a, cft_array *b, const int *lc, const int *rc, int nc,
                           const int *lb, const int *rb, int nb) {
    CFT_PROPAGATE("cft_dot_general", a, b);
    if (nc < 0 || nb < 0 || nc > CFT_PARAM_LEN || nb > CFT_PARAM_LEN || (nc && (!lc || !rc)) ||
        (nb && (!lb || !rb)))
        return cft__fail(CFT_E_ARG, "cft_dot_general: bad dim lists for %s . %s", cft__av(&a->aval),
                         cft__av(&b->aval));
    cft_dtype dt = cft_promote(a->aval.dtype, b->aval.dtype);
    cft_params p = {0};
    cft__param_set_int(&p, LC, lc, nc);
    cft__param_set_int(&p, RC, rc, nc);
    cft__param_set_int(&p, LB, lb, nb);
    cft__param_set_int(&p, RB, rb, nb);
    return cft__bind1(&cft_p_dot_general, &p, 2,
                      (cft_array *[]){cft__convert(a, dt), cft__convert(b, dt)});
}

/* NumPy matmul: promote 1-d operands, broadcast batch dims, one dot_general */
bool cft__is_matmul(const cft_prim *p, const cft_params *par, const cft_aval *a,
                    const cft_aval *b) {
    return p == &cft_p_dot_general && a->ndim == 2 && b->ndim == 2 && par->n[LC] == 1 &&
           par->v[LC][0] == 1 && par->n[RC] == 1 && par->v[RC][0] == 0 && par->n[LB] == 0 &&
           par->n[RB] == 0;
}

cft_array *cft_matmul(cft_array *a, cft_array *b) {
    CFT_PROPAGATE("cft_matmul", a, b);
    int ra = a->aval.ndim, rb = b->aval.ndim;
    if (ra == 0 || rb == 0)
        return cft__fail(CFT_E_SHAPE, "cft_matmul: scalar operand: %s @ %s", cft__av(&a->aval),
                         cft__av(&b->aval));
    cft_array *A = ra == 1 ? cft_expand_dims(a, 0) : a, *B = rb == 1 ? cft_expand_dims(b, 1) : b;
    int na = A->aval.ndim, nb = B->aval.ndim, nbt = (na > nb ? na : nb) - 2;
    if (A->aval.shape[na - 1] != B->aval.shape[nb - 2])
        return cft__fail(CFT_E_SHAPE, "cft_matmul: contracting dims differ: %s @ %s (%s != %s)",
                         cft__av(&a->aval), cft__av(&b->aval), cft__dim_s(A->aval.shape[na - 1]),
                         cft__dim_s(B->aval.shape[nb - 2]));
    int64_t bs[CFT_MAX_NDIM];
    for (int i = 0; i < nbt; i++) {
        int ia = i - (nbt - (na - 2)), ib = i - (nbt - (nb - 2));
        int64_t da = ia >= 0 ? A->aval.shape[ia] : 1, db = ib >= 0 ? B->aval.shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return cft__fail(CFT_E_SHAPE, "cft_matmul: batch dims do not broadcast: %s @ %s",
                             cft__av(&a->aval), cft__av(&b->aval));
        bs[i] = da == 1 ? db : da; /* da may be symbolic */
    }
    cft_array *y;
    if (nb == 2) { /* [..., M, K] @ [K, N]: contract directly, no broadcast of B */
        y = cft_dot_general(A, B, (int[]){na - 1}, (int[]){0}, 1, NULL, NULL, 0);
    } else {
        int64_t sa[CFT_MAX_NDIM], sb[CFT_MAX_NDIM];
        memcpy(sa, bs, sizeof(int64_t) * (size_t)nbt);
        memcpy(sb, bs, sizeof(int64_t) * (size_t)nbt);
        sa[nbt] = A->aval.shape[na - 2], sa[nbt + 1] = A->aval.shape[na - 1];
        sb[nbt] = B->aval.shape[nb - 2], sb[nbt + 1] = B->aval.shape[nb - 1];
        A = cft_broadcast_to(A, sa, nbt + 2);
        B = cft_broadcast_to(B, sb, nbt + 2);
        int bd[CFT_MAX_NDIM];
        for (int i = 0; i < nbt; i++)
            bd[i] = i;
        y = cft_dot_general(A, B, (int[]){nbt + 1}, (int[]){nbt}, 1, bd, bd, nbt);
    }
    if (ra == 1)
        y = cft_squeeze(y, (int[]){-2}, 1);
    if (rb == 1)
        y = cft_squeeze(y, (int[]){-1}, 1);
    return y;
}
