/* test_qconv_dnnl.c: the int8 convolutions of converted programs
 * (conv_qstatic, conv_qint) on oneDNN's own int8 convolution
 * (prims/qconv.c, conv_dnnl.c) against the window gather on the integer
 * GEMM, which the same primitives run with the oneDNN path off.
 *
 * Both compute the same int32 sums (oneDNN reads padding as 0 and the
 * kernel subtracts each position's zero point times its weights inside;
 * the gather pads with the zero point), then the same scaling: the results
 * must agree bitwise. Geometries: 1, 2 and 3 spatial dims, strides,
 * asymmetric padding, rhs dilation, weights whose row of taps is not a
 * multiple of 4 bytes, a zero point of 0 and in the middle, x given on
 * the grid (conv_qint), a NaN in one sample, calls from several threads.
 * Under 4 input channels (one: the digits CNN's; two) the kernel takes
 * conv_general_dilated's f32 convolution of the integers instead (exact:
 * every partial sum below 2^24; oneDNN's int8 kernels, which sum 4
 * channels an instruction, took 222 us there against the f32 one's 63),
 * with the same bits; at stride 1 the direct kernel of qconv_direct.c
 * (1 to 3 dims, padding, dilation, output channels past its block of 8,
 * rows across its segments, f64). Each result is also checked against the f32
 * convolution of the dequantized operands (f32 sums of exact products of
 * grid values in another order: 1e-5 relative, 2^-22 K max|y| absolute).
 * 7-bit activations take oneDNN on every CPU (no 16-bit pair sum can
 * saturate); 8-bit ones only where the CPU has VNNI or AMX, elsewhere the
 * f32 convolution of the integers (or the direct kernel), which the test
 * checks by counting each kernel's runs. Without oneDNN, the gather runs
 * where oneDNN would, and the rest as here. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "prims/qconv_direct.h"
#include "prims/qlinear.h"

typedef struct {
    int nsp;
    int64_t N, C, O, in[3], k[3], s[3], pad[6], d[3];
} geom;

static const geom cases[] = {
    {2, 3, 5, 5, {8, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, /* rows of 45 taps */
    {2, 2, 4, 6, {11, 9}, {3, 2}, {2, 1}, {0, 2, 1, 0}, {2, 1}},
    {2, 5, 1, 8, {8, 8}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}}, /* the digits CNN's */
    {1, 2, 4, 6, {17}, {5}, {2}, {2, 1}, {1}},
    {3, 2, 2, 3, {5, 4, 6}, {3, 2, 2}, {1, 1, 2}, {1, 1, 0, 1, 1, 0}, {1, 1, 1}},
    {2, 4, 16, 32, {12, 12}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
    /* stride 1 under 4 channels: the direct kernel, over 1 to 3 dims,
     * asymmetric padding, dilation, output channels past a block of 8 */
    {1, 3, 3, 11, {20}, {4}, {1}, {3, 0}, {2}},
    {2, 2, 3, 17, {9, 10}, {3, 3}, {1, 1}, {2, 0, 1, 2}, {1, 2}},
    {3, 2, 2, 5, {4, 5, 6}, {2, 3, 2}, {1, 1, 1}, {0, 1, 2, 0, 1, 1}, {1, 2, 1}},
    /* rows of 31 across the kernel's segments of 512 sums */
    {2, 2, 1, 9, {30, 30}, {3, 3}, {1, 1}, {1, 0, 1, 0}, {1, 1}},
    /* rows of 62: the VNNI form's groups of four taps spread past one
     * 64-byte load (its four-load gather); 5x5 taps, 25 (a group of one) */
    {2, 2, 1, 8, {7, 60}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
    {2, 3, 2, 4, {9, 9}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

typedef struct {
    cft_array *x, *w, *ws, *words, *xs, *zp;
} operands;

static operands make(const geom *g, uint64_t seed, double zp) {
    operands o;
    int64_t xs_[5] = {g->N, g->C}, ws_[5] = {g->O, g->C}, K = g->C;
    for (int i = 0; i < g->nsp; i++)
        xs_[2 + i] = g->in[i], ws_[2 + i] = g->k[i], K *= g->k[i];
    o.x = cft_random_normal(cft_random_key(seed), CFT_F32, xs_, 2 + g->nsp);
    o.w = cft_random_normal(cft_random_key(seed + 1), CFT_F32, ws_, 2 + g->nsp);
    cft_array *w2 = cft_reshape(o.w, (int64_t[]){g->O, K}, 2);
    o.ws = cft_mul_s(cft_max(cft_abs(w2), (int[]){1}, 1, false), 1.0 / 127);
    o.words = cft__qstatic_quantize(w2, o.ws, -127, 127);
    /* x in about [-zp, 127 - zp] scale units: some values clamp */
    o.xs = cft_scalar(2.5 / 64, CFT_F32);
    o.zp = cft_scalar(zp, CFT_F32);
    return o;
}

static cft_array *qconv(const geom *g, const operands *o, cft_array *x, int64_t xhi, bool grid) {
    return cft__qconv_bind(x, o->words, o->ws, o->xs, o->zp, 0, xhi,
                           (int64_t[]){g->C, g->k[0], g->k[1], g->k[2]}, g->nsp, g->s, g->pad, g->d,
                           grid);
}

static cft_array *clampv(cft_array *x, double lo, double hi) {
    return cft_clamp(x, cft_scalar(lo, CFT_F32), cft_scalar(hi, CFT_F32));
}

/* the f32 convolution of the dequantized operands */
static cft_array *reference(const geom *g, const operands *o, int64_t xhi) {
    cft_array *xq = cft_fake_quantize(o->x, o->xs, o->zp, 0, 0, xhi);
    int64_t sh[5] = {g->O, 1, 1, 1, 1};
    cft_array *ws = cft_reshape(o->ws, sh, 2 + g->nsp);
    cft_array *wq = cft_mul(clampv(cft_rint(cft_div(o->w, ws)), -127, 127), ws);
    return cft_conv_general_dilated(xq, wq, g->s, g->pad, NULL, g->d, 1, 1);
}

/* y within f32's rounding of K-term sums in another order of the
 * dequantized convolution: 1e-5 relative, and 2^-22 K max|y| absolute for
 * cancellation */
static void near_reference(const geom *g, const operands *o, cft_array *y, int64_t xhi) {
    cft_array *r = reference(g, o, xhi);
    double K = (double)g->C;
    for (int i = 0; i < g->nsp; i++)
        K *= (double)g->k[i];
    double big = cft_item(cft_max(cft_abs(r), NULL, 0, false));
    CHECK_ARRAY_CLOSE(y, r, 1e-5, ldexp(K * big, -22));
}

static long runs32, runsd; /* the f32 convolution's and the direct kernel's runs in both's
                             last call */
static bool have_dnnl;     /* oneDNN has an int8 convolution here */

/* the kernel g takes where oneDNN may run (dn: its sums cannot saturate):
 * 0 oneDNN, 1 the direct kernel (under 4 channels, stride 1), 2 the f32
 * convolution, 3 the gather (oneDNN declined: not built in) */
static int kernel_of(const geom *g, bool dn) {
    if (g->C >= 4)
        return dn ? (have_dnnl ? 0 : 3) : 2;
    for (int i = 0; i < g->nsp; i++)
        if (g->s[i] != 1)
            return 2;
    return 1;
}

static void check_kernel(const geom *g, bool dn, long runs, int c) {
    int k = kernel_of(g, dn);
    CHECK_MSG(runs == (k == 0) && runsd == (k == 1) && runs32 == (k == 2),
              "case %d: expected kernel %d, ran oneDNN %ld, direct %ld, f32 %ld", c, k, runs, runsd,
              runs32);
}

static cft_array *both(const geom *g, const operands *o, cft_array *x, int64_t xhi, bool grid,
                       long *runs) {
    cft__qconv_dnnl_on = false;
    cft_array *gather = qconv(g, o, x, xhi, grid);
    cft__qconv_dnnl_on = true;
    long before = cft__qconv_dnnl_runs, before32 = cft__qconv_f32_runs,
         befored = cft__qconv_direct_runs;
    cft_array *y = qconv(g, o, x, xhi, grid);
    *runs = cft__qconv_dnnl_runs - before;
    runs32 = cft__qconv_f32_runs - before32;
    runsd = cft__qconv_direct_runs - befored;
    CHECK_ARRAY_CLOSE(y, gather, 0, 0);
    if (runsd) { /* the direct kernel: its f32 sums too, where it took the VNNI form */
        cft__qdirect_vnni = 0;
        long bv = cft__qdirect_vnni_runs;
        cft_array *f = qconv(g, o, x, xhi, grid);
        cft__qdirect_vnni = 1;
        CHECK_EQ(cft__qdirect_vnni_runs, bv);
        CHECK_ARRAY_CLOSE(f, gather, 0, 0);
    }
    return y;
}

typedef struct {
    const geom *g;
    const operands *o;
    cft_array *want;
    int bad;
} job;

static void *worker(void *arg) {
    job *j = arg;
    for (int r = 0; r < 20; r++) {
        cft_array *y = qconv(j->g, j->o, j->o->x, 127, false);
        cft_array *d = cft_sum(cft_abs(cft_sub(y, j->want)), NULL, 0, false);
        j->bad += cft_failed(y) || cft_item(d) != 0;
    }
    return NULL;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    {
        operands o = make(&cases[5], 1, 60);
        long runs;
        both(&cases[5], &o, o.x, 127, false, &runs);
        have_dnnl = runs != 0;
        printf("oneDNN's int8 convolution here: %s\n", have_dnnl ? "yes" : "no");
    }
    printf("8-bit activations exact on oneDNN here (VNNI / AMX): %s\n",
           cft__qgemm_exact_u8() ? "yes" : "no");

    TEST("7-bit activations: oneDNN's sums (under 4 input channels the direct kernel's at "
         "stride 1, else the f32 convolution's) are the gather's, bitwise, over 1-3 spatial "
         "dims, strides, asymmetric padding, dilation; near the dequantized f32 convolution") {
        for (int c = 0; c < NCASES; c++)
            for (int z = 0; z < 2; z++) {
                const geom *g = &cases[c];
                operands o = make(g, 10 + 2 * c, z ? 61 : 0);
                long runs;
                cft_array *y = both(g, &o, o.x, 127, false, &runs);
                check_kernel(g, true, runs, c);
                near_reference(g, &o, y, 127);
            }
    }

    TEST("the direct kernel's VNNI form runs where the CPU has AVX512-VNNI and VBMI") {
        bool cpu = false;
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
        cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
#endif
        const geom *g = &cases[2];
        operands o = make(g, 30, 61);
        long runs, bv = cft__qdirect_vnni_runs;
        both(g, &o, o.x, 127, false, &runs);
        printf("VNNI form here: %s\n", cpu ? "yes" : "no");
        CHECK_EQ(cft__qdirect_vnni_runs - bv, (long)cpu);
    }

    TEST("8-bit activations: oneDNN only where it cannot saturate (VNNI, AMX), else the f32 "
         "convolution of the integers or the direct kernel; the same bits either way") {
        for (int c = 0; c < NCASES; c++) {
            const geom *g = &cases[c];
            operands o = make(g, 40 + 2 * c, 128);
            long runs;
            cft_array *y = both(g, &o, cft_mul_s(o.x, 2), 255, false, &runs);
            check_kernel(g, cft__qgemm_exact_u8(), runs, c);
            o.x = cft_mul_s(o.x, 2);
            near_reference(g, &o, y, 255);
        }
    }

    TEST("80 random geometries under 4 channels at stride 1 (the direct kernel, its VNNI "
         "form and its f32 sums): the gather's bits; 7- and 8-bit x, x on the grid") {
        uint64_t r = 0x9e3779b97f4a7c15u;
#define NEXT() (r = r * 6364136223846793005u + 1442695040888963407u, (int64_t)(r >> 33))
        for (int it = 0; it < 80; it++) {
            geom g = {0};
            g.nsp = 1 + (int)(NEXT() % 3);
            g.N = 1 + NEXT() % 3, g.C = 1 + NEXT() % 3, g.O = 1 + NEXT() % 12;
            for (int i = 0; i < 3; i++) {
                g.k[i] = g.d[i] = g.s[i] = 1, g.in[i] = 1;
                if (i >= g.nsp)
                    continue;
                g.k[i] = 1 + NEXT() % (g.nsp == 3 ? 3 : 5), g.d[i] = 1 + NEXT() % 2;
                g.pad[2 * i] = NEXT() % 3, g.pad[2 * i + 1] = NEXT() % 3;
                int64_t span = (g.k[i] - 1) * g.d[i] + 1,
                        need = span - g.pad[2 * i] - g.pad[2 * i + 1];
                g.in[i] = (need > 1 ? need : 1) + NEXT() % (g.nsp == 1 ? 70 : g.nsp == 2 ? 16 : 6);
            }
            int bits8 = (int)(NEXT() % 2), grid = NEXT() % 4 == 0;
            double zp = NEXT() % 3 ? (double)(NEXT() % (bits8 ? 200 : 100)) : 0;
            operands o = make(&g, 300 + (uint64_t)it, zp);
            int64_t xhi = bits8 ? 255 : 127;
            cft_array *x = bits8 ? cft_mul_s(o.x, 2) : o.x;
            if (grid)
                x = clampv(cft_add(cft_rint(cft_div(x, o.xs)), o.zp), 0, (double)xhi);
            long runs;
            both(&g, &o, x, xhi, grid, &runs);
            CHECK_MSG(runsd == 1, "geometry %d: nsp %d C %lld, the direct kernel did not run", it,
                      g.nsp, (long long)g.C);
        }
#undef NEXT
    }

    TEST("conv_qint (x on the grid), a NaN in one sample, x in f64: the gather's bits") {
        const geom *g = &cases[1];
        operands o = make(g, 70, 61);
        cft_array *grid = clampv(cft_add(cft_rint(cft_div(o.x, o.xs)), o.zp), 0, 127);
        long runs;
        both(g, &o, grid, 127, true, &runs);
        CHECK_EQ(runs, have_dnnl);
        static float one[2 * 4 * 11 * 9];
        one[1 * 4 * 11 * 9 + 2 * 9 + 3] = 1; /* sample 1, channel 0, (2, 3) */
        cft_array *at = cft_from_data(one, CFT_F32, cft_array_shape(o.x), 4);
        cft_array *xn =
            cft_where(cft_gt(at, cft_scalar(0.5, CFT_F32)), cft_scalar(NAN, CFT_F32), o.x);
        cft_array *y = both(g, &o, xn, 127, false, &runs);
        CHECK_EQ(runs, have_dnnl);
        CHECK(isnan(cft_item(cft_sum(cft_index(y, 1), NULL, 0, false))));
        CHECK(!isnan(cft_item(cft_sum(cft_index(y, 0), NULL, 0, false))));
        /* the same in the direct kernel (the digits CNN's geometry) */
        g = &cases[2];
        o = make(g, 72, 61);
        static float d[5 * 64];
        cft_copy_to(o.x, CFT_F32, d);
        d[3 * 64 + 10] = NAN; /* sample 3 */
        xn = cft_from_data(d, CFT_F32, cft_array_shape(o.x), 4);
        y = both(g, &o, xn, 127, false, &runs);
        CHECK_EQ(runsd, 1);
        for (int n = 0; n < 5; n++)
            CHECK_EQ(isnan(cft_item(cft_sum(cft_index(y, n), NULL, 0, false))), n == 3);
        /* and x in f64 (y in f64), the gather's bits */
        y = both(g, &o, cft_astype(o.x, CFT_F64), 127, false, &runs);
        CHECK_EQ(runsd, 1);
        CHECK_EQ(cft_array_dtype(y), CFT_F64);
    }

    TEST("from 4 threads at once: each call the single-threaded bits (oneDNN's kernel, the "
         "direct one)") {
        for (int c = 5; c <= 7; c += 2) {
            const geom *g = &cases[c];
            operands o = make(g, 90, 33);
            long runs;
            cft_array *want = both(g, &o, o.x, 127, false, &runs);
            job jobs[4];
            pthread_t th[4];
            for (int i = 0; i < 4; i++) {
                jobs[i] = (job){g, &o, want, 0};
                pthread_create(&th[i], NULL, worker, &jobs[i]);
            }
            for (int i = 0; i < 4; i++) {
                pthread_join(th[i], NULL);
                CHECK_EQ(jobs[i].bad, 0);
            }
        }
    }
    return check_summary();
}
