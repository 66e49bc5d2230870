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
 * are dropped. Eight output channels are summed at once, each slice read
 * once for the eight, which gives the multiply-adds eight independent
 * chains. Every partial sum is an integer below 2^24 (qconv.c keeps
 * C * taps within F32_EXACT_K), so the sums are exact and the bits of y
 * are those of the window gather on the integer GEMM: y = (xs sc[o]) acc,
 * in double, rounded once. The digits CNN's 1 -> 8 channels at batch 256
 * (in the jit, 2 threads, Zen 4): 83 us through conv_general_dilated's
 * f32 convolution of the integers with its conversions, 57 us here, 42 us
 * for the f32 program's own convolution (perf: 38% of the kernel's time in
 * the sums, 15% in storing the f32 output; docs/implementation.md). */
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

typedef struct {
    const cft__qdirect *g;
    const float *wf;       /* [ceil(O / OB)][K][OB], zero past O */
    const int64_t *off;    /* [K] each tap's flat offset in the padded sample */
    const int64_t *base;   /* [P] each output position's flat index */
    const int64_t *rowdst; /* [rows] where each row of x starts in the padded sample */
    int64_t rows;          /* rows of x: C times its sizes but the last */
    int64_t S, K, L, P;    /* padded sample, taps, flat span, positions */
    int64_t per;           /* values of a sample */
} direct;

/* a block of VW floats (GCC's and clang's vector extension: one register
 * in the AVX-512 clone, two in the AVX2 one, four SSE ones otherwise),
 * and of VW doubles */
typedef float vblock __attribute__((vector_size(VW * sizeof(float))));
typedef double vdouble __attribute__((vector_size(VW * sizeof(double))));

/* The sums of OB output channels over VW flat positions from x, each
 * tap's slice loaded once for OB independent chains of multiply-adds,
 * stored at acc[o * lda]: scaled by s[o] in double and rounded once where
 * s is given, as they are otherwise */
static CFT_VEC_FMA void block(const float *x, const int64_t *off, const float *w, int64_t K,
                              const double *s, float *acc, int64_t lda) {
    vblock a[OB] = {0};
    for (int64_t t = 0; t < K; t++) {
        vblock v;
        memcpy(&v, x + off[t], sizeof v);
        const float *wt = w + t * OB;
        for (int o = 0; o < OB; o++)
            a[o] += wt[o] * v;
    }
    for (int o = 0; o < OB; o++) {
        vblock r = a[o];
        if (s)
            r = __builtin_convertvector(__builtin_convertvector(r, vdouble) * s[o], vblock);
        memcpy(acc + o * lda, &r, sizeof r);
    }
}

static CFT_VEC CFT_NO_DISTRIBUTE void direct_body(void *ctx, int64_t lo, int64_t hi) {
    const direct *c = ctx;
    const cft__qdirect *g = c->g;
    const int nsp = g->nsp;
    const int64_t C = g->C, O = g->O, S = c->S, P = c->P, per = c->per;
    const float zp = (float)g->zp;
    float x[XMAX + VW], acc[OB][SEG + VW];
    for (int64_t n = lo; n < hi; n++) {
        /* the padded sample */
        memset(x, 0, sizeof(float) * (size_t)(C * S + VW));
        const uint8_t *xs = g->xq + n * per;
        const int64_t w = g->in[nsp - 1];
        for (int64_t r = 0; r < c->rows; r++) {
            const uint8_t *src = xs + r * w;
            float *dst = x + c->rowdst[r];
            for (int64_t j = 0; j < w; j++)
                dst[j] = (float)src[j] - zp;
        }
        double f = g->nan[n] ? NAN : g->xs;
        for (int64_t o0 = 0; o0 < O; o0 += OB) {
            const float *wb = c->wf + o0 * c->K;
            int64_t no = O - o0 < OB ? O - o0 : OB, q = 0;
            double s[OB] = {0};
            for (int64_t o = 0; o < no; o++)
                s[o] = f * g->sc[o0 + o];
            /* segments of flat indices summed by blocks; then the output
             * positions among them (base ascends), by runs of consecutive
             * indices (an output row, or its part in the segment) */
            for (int64_t j0 = 0; j0 < c->L; j0 += SEG) {
                int64_t j1 = j0 + SEG < c->L ? j0 + SEG : c->L;
                for (int64_t b = j0; b < j1; b += VW) /* f32: scaled here */
                    block(x + b, c->off, wb, c->K, g->dbl ? NULL : s, &acc[0][b - j0], SEG + VW);
                while (q < P && c->base[q] < j1) {
                    int64_t r = q + 1;
                    while (r < P && c->base[r] == c->base[r - 1] + 1 && c->base[r] < j1)
                        r++;
                    for (int64_t o = 0; o < no; o++) {
                        const float *src = &acc[o][c->base[q] - j0];
                        int64_t at = (n * O + o0 + o) * P + q;
                        if (g->dbl)
                            for (int64_t i = 0; i < r - q; i++)
                                ((double *)g->y)[at + i] = s[o] * (double)src[i];
                        else
                            for (int64_t i = 0; i < r - q; i++)
                                ((float *)g->y)[at + i] = src[i];
                    }
                    q = r;
                }
            }
        }
    }
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
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(K + P + rows));
    if (!wf || !off) {
        free(wf), free(off);
        return false;
    }
    int64_t *base = off + K, *rowdst = base + P;
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r, v = g->pad[2 * (nsp - 1)];
        for (int i = nsp - 2; i >= 0; i--)
            v += (rem % g->in[i] + g->pad[2 * i]) * pst[i], rem /= g->in[i];
        rowdst[r] = v + rem * S; /* rem: the channel */
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
    direct c = {g, wf, off, base, rowdst, rows, S, K, L, P, per};
    cft__par_for(g->N, 2.0 * (double)(OP * K * L), direct_body, &c);
    free(wf), free(off);
    return true;
}
