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
 * docs/implementation.md).
 *
 * Where the CPU has AVX512-VNNI and VBMI (Ice Lake and later, Zen 4) and
 * x's integers are bytes, the sums run in integers instead: the sample is
 * kept as bytes (padding: the zero point), each group of four taps becomes
 * one register of four bytes a position (one 64-byte load and a byte
 * permute where the four offsets lie within 48, else four 16-byte loads),
 * and one vpdpbusd a channel sums the group: 3 instructions for the 9 taps
 * of a 3x3 kernel where the f32 form has 9 multiply-adds. The sums start
 * at -zp * (the weights' sum), so they end as the same integers and y has
 * the same bits (test_qconv_dnnl compares both forms). The digits CNN's
 * int8 forward (2 threads, steady state): 37.6 -> 33.2 us. */
#include "prims/qconv_direct.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/par.h"
#include "core/vec.h"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define CFT_QDIRECT_VNNI 1
#endif

_Atomic int cft__qdirect_vnni = 1;
_Atomic long cft__qdirect_vnni_runs;

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

/* a group of four taps for the VNNI form: its four offsets, and where its
 * four bytes per position come from: near (the four offsets within 48 of
 * the first), one 64-byte load at off[0] and the byte permute idx; else
 * four 16-byte loads side by side, permuted by a fixed index */
typedef struct {
    int64_t off[4];
    int32_t near;
    uint8_t idx[64];
} quad;

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
    /* the VNNI form (set after the rest): x as bytes, taps in fours */
    bool vnni;
    const quad *qd;      /* [KG] */
    const int32_t *w4;   /* [ceil(O / OB)][KG][OB] four weights a word, zero past K and O */
    const int32_t *corr; /* [ceil(O / OB) OB] zp * the channel's weight sum */
    int64_t KG;
    uint8_t zb; /* zp as a byte: the padding's value */
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

/* the sample's integers xq - zp in f32, padding 0; returns whether it held
 * a NaN */
static CFT_VEC_NO_DISTRIBUTE int sample_f32(const direct *c, int64_t n, float *x) {
    const cft__qdirect *g = c->g;
    const int64_t per = c->per;
    const float zp = (float)g->zp, xsf = (float)g->xs, xlo = (float)g->lo, xhi = (float)g->hi;
    int bad = 0;
    memset(x, 0, sizeof(float) * (size_t)(g->C * c->S + VW));
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
    return bad;
}

#ifdef CFT_QDIRECT_VNNI
#define CFT_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi")))

/* block's sums in integers, four taps an instruction (vpdpbusd: u8 x s8,
 * four products summed into each 32-bit lane, no saturation): the bytes of
 * the sample xb (xq itself, padding zp) at the four taps of a group are
 * gathered into one register by a byte permute, then OB multiply-adds of
 * it by the channels' four weights. The sums start at -zp * (the weights'
 * sum), so they end at sum (xq - zp) w, the same integers as block's, and
 * are converted (exact below 2^24) and scaled as block scales its own */
CFT_VNNI_TARGET static void block_vnni(const uint8_t *xb, const quad *qd, const int32_t *w4,
                                       int64_t KG, const int32_t *corr, const float *s, float *acc,
                                       int64_t lda) {
    /* byte 4 p + i of the result is byte p of the i-th 16-byte load */
    const __m512i far = _mm512_set_epi8(
        63, 47, 31, 15, 62, 46, 30, 14, 61, 45, 29, 13, 60, 44, 28, 12, 59, 43, 27, 11, 58, 42, 26,
        10, 57, 41, 25, 9, 56, 40, 24, 8, 55, 39, 23, 7, 54, 38, 22, 6, 53, 37, 21, 5, 52, 36, 20,
        4, 51, 35, 19, 3, 50, 34, 18, 2, 49, 33, 17, 1, 48, 32, 16, 0);
    __m512i a[OB]; /* unrolled: in registers, not the stack */
#pragma GCC unroll 8
    for (int o = 0; o < OB; o++)
        a[o] = _mm512_set1_epi32(-corr[o]);
    for (int64_t g = 0; g < KG; g++) {
        const quad *q = &qd[g];
        __m512i v;
        if (q->near)
            v = _mm512_permutexvar_epi8(_mm512_loadu_si512(q->idx),
                                        _mm512_loadu_si512(xb + q->off[0]));
        else {
            __m512i r = _mm512_castsi128_si512(_mm_loadu_si128((const void *)(xb + q->off[0])));
            r = _mm512_inserti32x4(r, _mm_loadu_si128((const void *)(xb + q->off[1])), 1);
            r = _mm512_inserti32x4(r, _mm_loadu_si128((const void *)(xb + q->off[2])), 2);
            r = _mm512_inserti32x4(r, _mm_loadu_si128((const void *)(xb + q->off[3])), 3);
            v = _mm512_permutexvar_epi8(far, r);
        }
        const int32_t *wg = w4 + g * OB;
#pragma GCC unroll 8
        for (int o = 0; o < OB; o++)
            a[o] = _mm512_dpbusd_epi32(a[o], v, _mm512_set1_epi32(wg[o]));
    }
#pragma GCC unroll 8
    for (int o = 0; o < OB; o++) {
        __m512 r = _mm512_cvtepi32_ps(a[o]);
        if (s)
            r = _mm512_mul_ps(r, _mm512_set1_ps(s[o]));
        _mm512_storeu_ps(acc + o * lda, r);
    }
}

/* x's f32 values onto the grid as bytes, VW at a time: the f32 form's
 * rounding (to nearest even, as nearbyintf; min and max as its selects, a
 * NaN becoming hi), then truncated to bytes (integers in [lo, hi], within
 * 0..255). Returns whether a value was NaN. (GCC 12 leaves this
 * mixed-width loop scalar under the optimize attribute.) */
CFT_VNNI_TARGET static int round_bytes(const float *src, uint8_t *dst, int64_t len, bool grid,
                                       float xs, float zp, float lo, float hi) {
    const __m512 vxs = _mm512_set1_ps(xs), vzp = _mm512_set1_ps(zp), vlo = _mm512_set1_ps(lo),
                 vhi = _mm512_set1_ps(hi);
    __mmask16 bad = 0;
    for (int64_t j = 0; j < len; j += VW) {
        __mmask16 m = len - j >= VW ? (__mmask16)0xffff : (__mmask16)((1u << (len - j)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, src + j);
        if (grid)
            v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        else
            v = _mm512_add_ps(_mm512_roundscale_ps(_mm512_div_ps(v, vxs),
                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                              vzp);
        bad |= _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
        v = _mm512_max_ps(_mm512_min_ps(v, vhi), vlo);
        _mm512_mask_cvtepi32_storeu_epi8(dst + j, m, _mm512_cvttps_epi32(v));
    }
    return bad != 0;
}

/* the sample as bytes, padding zp; returns whether it held a NaN */
static int sample_bytes(const direct *c, int64_t n, uint8_t *xb) {
    const cft__qdirect *g = c->g;
    const int64_t per = c->per;
    int bad = 0;
    memset(xb, c->zb, (size_t)(g->C * c->S + 128));
    if (g->xf)
        for (int64_t r = 0; r < c->runs; r++)
            bad |= round_bytes(g->xf + n * per + c->run[2 * r], xb + c->run[2 * r + 1], c->rlen[r],
                               g->grid, (float)g->xs, (float)g->zp, (float)g->lo, (float)g->hi);
    else {
        for (int64_t r = 0; r < c->runs; r++)
            memcpy(xb + c->run[2 * r + 1], g->xq + n * per + c->run[2 * r], (size_t)c->rlen[r]);
        bad = g->nan[n];
    }
    return bad;
}

static bool vnni_cpu(void) {
    static _Atomic int v = -1; /* two threads asking first store the same answer */
    int r = v;
    if (r < 0) {
        __builtin_cpu_init();
        r = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
        v = r;
    }
    return r;
}
#else
static bool vnni_cpu(void) {
    return false;
}
#endif

static CFT_VEC_NO_DISTRIBUTE void direct_body(void *ctx, int64_t lo, int64_t hi) {
    const direct *c = ctx;
    const cft__qdirect *g = c->g;
    const int64_t O = g->O, P = c->P;
    const bool dbl = g->dbl;
    float *const yf = dbl ? NULL : (float *)g->y;
    double *const yd = dbl ? (double *)g->y : NULL;
    float x[XMAX + VW], acc[OB][SEG + 2 * VW];
#ifdef CFT_QDIRECT_VNNI
    uint8_t xb[XMAX + 128]; /* the VNNI form's sample: 64-byte loads past its last block */
#endif
    for (int64_t n = lo; n < hi; n++) {
        /* the padded sample */
        int bad;
#ifdef CFT_QDIRECT_VNNI
        if (c->vnni)
            bad = sample_bytes(c, n, xb);
        else
#endif
            bad = sample_f32(c, n, x);
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
#ifdef CFT_QDIRECT_VNNI
                if (c->vnni)
                    for (int64_t b = j0; b < j1; b += VW)
                        block_vnni(xb + b, c->qd, c->w4 + o0 * c->KG, c->KG, c->corr + o0,
                                   dbl ? NULL : sf, &acc[0][b - j0], SEG + 2 * VW);
                else
#endif
                    for (int64_t b = j0; b < j1; b += VW) /* f32: scaled here */
                        block(x + b, c->off, wb, c->K, dbl ? NULL : sf, &acc[0][b - j0],
                              SEG + 2 * VW);
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
    direct c = {g, wf, off, base, run,   rlen, runs, pc,   segpc, S,
                K, L,  P,   per,  false, NULL, NULL, NULL, 0,     0};
    /* the VNNI form where the CPU has it and x's integers are bytes with
     * the zero point among them (the padding's byte) */
    int64_t KG = (K + 3) / 4;
    quad *qd = NULL;
    int32_t *w4 = NULL;
    if (cft__qdirect_vnni && vnni_cpu() && g->zp >= 0 && g->zp <= 255 && g->zp == floor(g->zp) &&
        (g->xq || (g->lo >= 0 && g->hi <= 255))) {
        qd = malloc(sizeof(quad) * (size_t)KG);
        w4 = calloc((size_t)(OP * KG + OP), sizeof(int32_t));
    }
    if (qd && w4) {
        int32_t *corr = w4 + OP * KG;
        for (int64_t q = 0; q < KG; q++) {
            int64_t o0 = off[4 * q], spread = 0;
            for (int i = 0; i < 4; i++) { /* taps past K: the first's offset, weight 0 */
                qd[q].off[i] = 4 * q + i < K ? off[4 * q + i] : o0;
                int64_t d = qd[q].off[i] - o0;
                spread = d < 0 ? 64 : (d > spread ? d : spread);
            }
            qd[q].near = spread <= 64 - VW;
            for (int p = 0; p < 64; p++)
                qd[q].idx[p] = qd[q].near ? (uint8_t)(p / 4 + qd[q].off[p % 4] - o0) : 0;
        }
        for (int64_t o = 0; o < g->O; o++) {
            int32_t sum = 0;
            for (int64_t t = 0; t < K; t++) {
                uint32_t b = (uint8_t)g->wq[o * g->ldw + t];
                ((uint32_t *)w4)[(o / OB * KG + t / 4) * OB + o % OB] |= b << (8 * (t % 4));
                sum += g->wq[o * g->ldw + t];
            }
            corr[o] = (int32_t)g->zp * sum;
        }
        c.vnni = true, c.qd = qd, c.w4 = w4, c.corr = corr, c.KG = KG, c.zb = (uint8_t)g->zp;
        cft__qdirect_vnni_runs++;
    }
    cft__par_for(g->N, 2.0 * (double)(OP * K * L), direct_body, &c);
    free(wf), free(off), free(pc), free(segpc), free(qd), free(w4);
    return true;
}
