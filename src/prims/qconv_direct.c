/* qconv_direct.c: the int8 convolution of statically quantized programs
 * (qconv.c) for few input channels at stride 1, computed directly on each
 * sample rather than through rows of windows or a library's kernel.
 *
 * Each sample's integers xq - zp are laid out in f32 with the padding
 * around them (0: the zero point's own value), in a buffer of the thread.
 * At stride 1, output position (o_0, ...) and tap (t_0, ...) read the
 * padded sample at flat index sum o_i st_i + sum t_i d_i st_i (st: the
 * padded sample's strides), so the sums for a run of consecutive flat
 * indices are one multiply-add of a contiguous slice per tap: every output
 * row is computed across the padded width and the columns past the output
 * are dropped: the kept sums reach y VW at a time, picked from two blocks
 * by one permute (GCC's __builtin_shuffle; one by one under clang). Eight
 * output channels are summed at once, each slice read once for the eight,
 * which gives the multiply-adds eight independent chains. Every partial
 * sum is an integer below 2^24 (qconv.c keeps C * taps within
 * F32_EXACT_K), so the sums are exact and the bits of y are those of the
 * window gather on the integer GEMM: an f32 y is g * acc in f32, g = xs
 * sc[o] rounded to f32 once (qconv.c's rule; an f64 y is computed in
 * double). The digits CNN's 1 -> 8 channels at batch 256, the kernel
 * alone on one thread (fastest of 2000 calls, Zen 4): 88 us with the kept
 * sums copied one by one, 54 us with the permute, 42 us once its loops
 * were vectorized at O3 (core/vec.h's CFT_VEC_NO_DISTRIBUTE), 33 us with
 * the f32 scaling rule (42-44 us for the double one in the same runs;
 * docs/implementation.md). */
#include "prims/qconv_direct.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/par.h"
#include "core/vec.h"

enum {
    VW = 16,     /* floats a block of sums */
    OB = 8,      /* output channels summed at once */
    XMAX = 4096, /* floats of a padded sample (16 KiB on the stack) */
    SEG = 512,   /* flat positions summed before they are stored */
    KMAX = 1024, /* taps (qconv.c: at most 514) */
};

/* VW output positions q.. of a channel (or fewer: n) that are the sums at
 * flat indices base[q + i] of a segment: where those indices span at most
 * 2 VW from src (the start of the block of base[q], relative to the
 * segment), idx[i] = base[q + i] - segment - src
 * picks them from two blocks in one permute */
typedef struct {
    int64_t q;
    int32_t n, src, perm;
    int32_t idx[VW];
} piece;

typedef struct {
    const cft__qdirect *g;
    const float *wf;     /* [ceil(O / OB)][K][OB], zero past O */
    const int64_t *off;  /* [K] each tap's flat offset in the padded sample */
    const int64_t *base; /* [P] each output position's flat index */
    const int64_t *run;  /* [2 runs]: where each run of x's values starts in x and in
                            the padded sample (rows adjacent in both, merged) */
    const int64_t *rlen; /* [runs] its values */
    int64_t runs;
    const piece *pc;      /* how each segment's sums reach y */
    const int64_t *segpc; /* [segments + 1] each segment's first piece */
    int64_t S, K, L, P;   /* padded sample, taps, flat span, positions */
    int64_t per;          /* values of a sample */
} direct;

/* a block of VW floats (GCC's and clang's vector extension: one register
 * in the AVX-512 clone, two in the AVX2 one, four SSE ones otherwise) */
typedef float vblock __attribute__((vector_size(VW * sizeof(float))));
typedef int32_t vidx __attribute__((vector_size(VW * sizeof(int32_t))));

/* The sums of OB output channels over VW flat positions from x, each
 * tap's slice loaded once for OB independent chains of multiply-adds,
 * stored at acc[o * lda]: times s[o] (the scale rounded to f32) where s
 * is given, as they are otherwise */
static CFT_VEC_FMA void block(const float *x, const int64_t *off, const float *w, int64_t K,
                              const float *s, float *acc, int64_t lda) {
    vblock a[OB], v; /* the first tap sets the sums (K >= 1): no zeroing through memory */
    memcpy(&v, x + off[0], sizeof v);
    for (int o = 0; o < OB; o++)
        a[o] = w[o] * v;
    for (int64_t t = 1; t < K; t++) {
        memcpy(&v, x + off[t], sizeof v);
        const float *wt = w + t * OB;
        for (int o = 0; o < OB; o++)
            a[o] += wt[o] * v;
    }
    for (int o = 0; o < OB; o++) {
        vblock r = a[o];
        if (s)
            r = r * s[o];
        memcpy(acc + o * lda, &r, sizeof r);
    }
}

static CFT_VEC_NO_DISTRIBUTE void direct_body(void *ctx, int64_t lo, int64_t hi) {
    const direct *c = ctx;
    const cft__qdirect *g = c->g;
    const int64_t C = g->C, O = g->O, S = c->S, P = c->P, per = c->per;
    const float zp = (float)g->zp, xsf = (float)g->xs, xlo = (float)g->lo, xhi = (float)g->hi;
    const bool dbl = g->dbl;
    float *const yf = dbl ? NULL : (float *)g->y;
    double *const yd = dbl ? (double *)g->y : NULL;
    float x[XMAX + VW], acc[OB][SEG + 2 * VW];
    for (int64_t n = lo; n < hi; n++) {
        /* the padded sample */
        memset(x, 0, sizeof(float) * (size_t)(C * S + VW));
        int bad = 0;
        if (g->xf) /* x in f32: rounded onto the grid here (qkernels.c's arithmetic) */
            for (int64_t r = 0; r < c->runs; r++) {
                const float *restrict src = g->xf + n * per + c->run[2 * r];
                float *restrict dst = x + c->run[2 * r + 1];
                const int64_t len = c->rlen[r];
                for (int64_t j = 0; j < len; j++) {
                    float v = g->grid ? nearbyintf(src[j]) : nearbyintf(src[j] / xsf) + zp;
                    bad |= v != v;
                    v = v < xhi ? v : xhi;
                    v = v > xlo ? v : xlo;
                    dst[j] = v - zp;
                }
            }
        else {
            const uint8_t *xs = g->xq + n * per;
            for (int64_t r = 0; r < c->runs; r++) { /* adjacent rows: one run */
                const uint8_t *restrict src = xs + c->run[2 * r];
                float *restrict dst = x + c->run[2 * r + 1];
                const int64_t len = c->rlen[r];
                for (int64_t j = 0; j < len; j++) /* vpmovzxbd, vcvtdq2ps */
                    dst[j] = (float)src[j] - zp;
            }
            bad = g->nan[n];
        }
        double f = bad ? NAN : g->xs;
        for (int64_t o0 = 0; o0 < O; o0 += OB) {
            const float *wb = c->wf + o0 * c->K;
            int64_t no = O - o0 < OB ? O - o0 : OB;
            double s[OB] = {0};
            float sf[OB] = {0}; /* f32 y: the scale rounded once, then f32 products */
            for (int64_t o = 0; o < no; o++)
                s[o] = f * g->sc[o0 + o], sf[o] = (float)s[o];
            /* segments of flat indices summed by blocks; then the output
             * positions among them, by pieces (setup below) */
            for (int64_t j0 = 0, sg = 0; j0 < c->L; j0 += SEG, sg++) {
                int64_t j1 = j0 + SEG < c->L ? j0 + SEG : c->L;
                for (int64_t b = j0; b < j1; b += VW) /* f32: scaled here */
                    block(x + b, c->off, wb, c->K, dbl ? NULL : sf, &acc[0][b - j0], SEG + 2 * VW);
                for (int64_t k = c->segpc[sg]; k < c->segpc[sg + 1]; k++) {
                    const piece pk = c->pc[k]; /* locals: not reloaded after each store */
                    const int64_t *bq = c->base + pk.q;
                    const int64_t at0 = (n * O + o0) * P + pk.q;
                    if (dbl) {
                        for (int64_t o = 0; o < no; o++)
                            for (int64_t i = 0; i < pk.n; i++)
                                yd[at0 + o * P + i] = s[o] * (double)acc[o][bq[i] - j0];
                        continue;
                    }
#if defined(__GNUC__) && !defined(__clang__)
                    if (pk.perm) {
                        vidx ix;
                        memcpy(&ix, pk.idx, sizeof ix);
                        for (int64_t o = 0; o < no; o++) {
                            vblock v0, v1;
                            memcpy(&v0, &acc[o][pk.src], sizeof v0);
                            memcpy(&v1, &acc[o][pk.src + VW], sizeof v1);
                            vblock r = __builtin_shuffle(v0, v1, ix);
                            memcpy(yf + at0 + o * P, &r, sizeof r);
                        }
                        continue;
                    }
#endif
                    for (int64_t o = 0; o < no; o++)
                        for (int64_t i = 0; i < pk.n; i++)
                            yf[at0 + o * P + i] = acc[o][bq[i] - j0];
                }
            }
        }
        if (g->ep) /* the sample's rows, still in cache */
            cft__qepi_span(g->ep, n, 0, yf + n * O * P, O * P);
    }
}

/* The pieces of each segment's output positions (base ascends): VW at a
 * time, the last VW of the segment's positions overlapping the one before
 * (writing the same values twice) rather than a short piece; fewer than VW
 * positions, or VW whose indices spread past 2 VW, are copied one by one */
static void pieces(const int64_t *base, int64_t P, int64_t L, piece *pc, int64_t *segpc) {
    int64_t np = 0, q = 0, sg = 0;
    for (int64_t j0 = 0; j0 < L; j0 += SEG, sg++) {
        int64_t qe = q;
        while (qe < P && base[qe] < j0 + SEG)
            qe++;
        segpc[sg] = np;
        for (int64_t a = q; a < qe; a += VW) {
            piece *p = &pc[np++];
            p->q = qe - a >= VW ? a : (qe - q >= VW ? qe - VW : a);
            p->n = (int32_t)(qe - p->q < VW ? qe - p->q : VW);
            /* from the block the first index is in: loads of whole blocks
             * just stored, which the CPU forwards from its store buffer
             * (a load across two stores waits for both to reach the cache) */
            p->src = (int32_t)((base[p->q] - j0) / VW * VW);
            p->perm = p->n == VW && base[p->q + VW - 1] - j0 - p->src < 2 * VW;
            for (int i = 0; i < VW; i++)
                p->idx[i] = i < p->n ? (int32_t)(base[p->q + i] - j0 - p->src) : 0;
        }
        q = qe;
    }
    segpc[sg] = np;
}

bool cft__qconv_direct(const cft__qdirect *g) {
    const int nsp = g->nsp;
    if (nsp < 1 || nsp > 3 || g->C < 1 || g->C >= 4 || g->O < 1)
        return false;
    int64_t ip[3], pst[3], S = 1, T = 1, L = 1, P = 1, per = g->C;
    for (int i = 0; i < nsp; i++) {
        if (g->s[i] != 1 || g->pad[2 * i] < 0 || g->pad[2 * i + 1] < 0 || g->d[i] < 1)
            return false;
        ip[i] = g->in[i] + g->pad[2 * i] + g->pad[2 * i + 1];
        if (ip[i] > XMAX || g->out[i] < 1)
            return false;
    }
    for (int i = nsp - 1; i >= 0; i--) {
        pst[i] = S, S *= ip[i];
        if (S > XMAX)
            return false;
    }
    for (int i = 0; i < nsp; i++) {
        T *= g->k[i], L += (g->out[i] - 1) * pst[i], P *= g->out[i], per *= g->in[i];
        if (T > KMAX)
            return false;
    }
    int64_t K = g->C * T;
    if (g->C * S > XMAX || K > KMAX)
        return false;
    int64_t OP = (g->O + OB - 1) / OB * OB;
    float *wf = calloc((size_t)(OP * K), sizeof(float));
    int64_t rows = per / g->in[nsp - 1];
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(K + P + 3 * rows));
    if (!wf || !off) {
        free(wf), free(off);
        return false;
    }
    int64_t *base = off + K, *run = base + P, *rlen = run + 2 * rows, runs = 0;
    const int64_t w = g->in[nsp - 1];
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r, v = g->pad[2 * (nsp - 1)];
        for (int i = nsp - 2; i >= 0; i--)
            v += (rem % g->in[i] + g->pad[2 * i]) * pst[i], rem /= g->in[i];
        v += rem * S; /* rem: the channel */
        if (runs && run[2 * (runs - 1) + 1] + rlen[runs - 1] == v)
            rlen[runs - 1] += w; /* adjacent in the padded sample too: no padding between */
        else
            run[2 * runs] = r * w, run[2 * runs + 1] = v, rlen[runs++] = w;
    }
    for (int64_t o = 0; o < g->O; o++)
        for (int64_t t = 0; t < K; t++)
            wf[(o / OB * K + t) * OB + o % OB] = (float)g->wq[o * g->ldw + t];
    for (int64_t ch = 0; ch < g->C; ch++)
        for (int64_t t = 0; t < T; t++) {
            int64_t rem = t, v = ch * S;
            for (int i = nsp - 1; i >= 0; i--)
                v += (rem % g->k[i]) * g->d[i] * pst[i], rem /= g->k[i];
            off[ch * T + t] = v;
        }
    for (int64_t pos = 0; pos < P; pos++) {
        int64_t rem = pos, v = 0;
        for (int i = nsp - 1; i >= 0; i--)
            v += (rem % g->out[i]) * pst[i], rem /= g->out[i];
        base[pos] = v;
    }
    int64_t nseg = (L + SEG - 1) / SEG;
    piece *pc = malloc(sizeof(piece) * (size_t)(P / VW + 2 * nseg));
    int64_t *segpc = malloc(sizeof(int64_t) * (size_t)(nseg + 1));
    if (!pc || !segpc) {
        free(wf), free(off), free(pc), free(segpc);
        return false;
    }
    pieces(base, P, L, pc, segpc);
    direct c = {g, wf, off, base, run, rlen, runs, pc, segpc, S, K, L, P, per};
    cft__par_for(g->N, 2.0 * (double)(OP * K * L), direct_body, &c);
    free(wf), free(off), free(pc), free(segpc);
    return true;
}
