/* bench/blis/gemm.c (built when CMake finds BLIS, Debian's libblis-dev, and
 * libxsmm): the small GEMMs of the flagship programs on the three
 * libraries that could sit behind dot_general: OpenBLAS (cblas), libxsmm
 * (what cft uses for small f32 products, src/prims/gemm_xsmm.c) and BLIS
 * (its typed API, bli_sgemm), one thread, same process, same buffers.
 * Shapes: the ensemble's per-model products (K = 32 MLPs 64 -> 128 -> 10,
 * B = 256: forward, input and weight gradients) and the per-sample MLP's
 * batched layer (64 -> 128 -> 128 -> 10, B = 1024). JSON lines, one per
 * shape and library; ratio_to_baseline = that library's time / the time of
 * the one cft uses for the shape (libxsmm, or OpenBLAS where libxsmm has no
 * kernel), medians of the same run.
 *
 * BLIS also exports the BLAS and CBLAS symbols. So that the OpenBLAS rows
 * really run OpenBLAS, BLIS is opened with dlopen (RTLD_LOCAL |
 * RTLD_DEEPBIND) and only bli_sgemm is taken from it. */
#include <blis.h>
#include <dlfcn.h>
#include <libxsmm.h>
#include <stdio.h>
#include <stdlib.h>

static __typeof__(bli_sgemm) *blis_sgemm;
static __typeof__(bli_thread_set_num_threads) *blis_set_threads;

#include "../bench.h"

typedef struct {
    const char *what;
    int m, n, k;
    bool ta, tb; /* row-major C[m x n] = op(A) op(B) */
} shape;

static const shape shapes[] = {
    {"ensemble fwd x@W1", 256, 128, 64, false, false},
    {"ensemble fwd h@W2", 256, 10, 128, false, false},
    {"ensemble bwd g2@W2^T", 256, 128, 10, false, true},
    {"ensemble bwd h^T@g2", 128, 10, 256, true, false},
    {"ensemble bwd x^T@g1", 64, 128, 256, true, false},
    {"mlp B=1024 x@W1", 1024, 128, 64, false, false},
    {"mlp B=1024 h@W2", 1024, 128, 128, false, false},
    {"mlp B=1024 h^T@g", 128, 128, 1024, true, false},
};

typedef struct {
    int lib; /* 0 OpenBLAS, 1 libxsmm, 2 BLIS */
    const shape *s;
    float *A, *B, *C;
    libxsmm_smmfunction f;
} job;

static void run(void *p) {
    job *j = p;
    const shape *s = j->s;
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n, ldc = s->n;
    if (j->lib == 0)
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                    s->tb ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1, j->A, lda, j->B, ldb, 0,
                    j->C, ldc); /* declared by blis.h's CBLAS, linked to OpenBLAS (cft's) */
    else if (j->lib == 1)       /* column-major: C' = op(B)' op(A)' */
        j->f(j->B, j->A, j->C);
    else {
        float one = 1, zero = 0;
        blis_sgemm(s->ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                   s->tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, s->m, s->n, s->k, &one, j->A, lda, 1,
                   j->B, ldb, 1, &zero, j->C, ldc, 1);
    }
}

int main(int argc, char **argv) {
    cft_init();
    (void)bench_threads(argc, argv);
    cft_set_num_threads(1);
    void *h = dlopen(CFT_BLIS_PATH, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    blis_sgemm = h ? dlsym(h, "bli_sgemm") : NULL;
    blis_set_threads = h ? dlsym(h, "bli_thread_set_num_threads") : NULL;
    if (!blis_sgemm || !blis_set_threads) {
        fprintf(stderr, "gemm_libraries: cannot load BLIS from %s: %s\n", CFT_BLIS_PATH, dlerror());
        return 1;
    }
    blis_set_threads(1);
    libxsmm_init();
    const char *lib[3] = {"openblas", "libxsmm", "blis"};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const shape *s = &shapes[i];
        size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
        float *A = malloc(na * 4), *B = malloc(nb * 4), *C[3];
        for (size_t e = 0; e < na; e++)
            A[e] = (float)((e * 7 % 13) - 6) / 8;
        for (size_t e = 0; e < nb; e++)
            B[e] = (float)((e * 5 % 11) - 5) / 8;
        job j[3];
        double med[3], mn;
        for (int l = 0; l < 3; l++) {
            C[l] = calloc(nc, 4);
            j[l] = (job){l, s, A, B, C[l], NULL};
            if (l == 1) {
                const float alpha = 1, beta = 0;
                int flags = (s->tb ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) |
                            (s->ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
                libxsmm_blasint M = s->n, N = s->m, K = s->k, la = s->tb ? s->k : s->n,
                                lb = s->ta ? s->m : s->k, lc = s->n;
                j[l].f = libxsmm_smmdispatch(M, N, K, &la, &lb, &lc, &alpha, &beta, &flags, NULL);
                if (!j[l].f) {
                    med[l] = -1;
                    continue;
                }
            }
            timeit(run, &j[l], &med[l], &mn);
        }
        /* the three agree (same inputs; sums of exact eighths up to rounding) */
        double worst = 0;
        for (int l = 1; l < 3; l++)
            for (size_t e = 0; e < nc && med[l] > 0; e++) {
                double d = C[l][e] - C[0][e];
                worst = d * d > worst * worst ? (d < 0 ? -d : d) : worst;
            }
        /* the baseline is what cft runs: libxsmm, or OpenBLAS where libxsmm 1.17 has no
         * kernel (a transposed right-hand side, row-major) */
        int base = med[1] > 0 ? 1 : 0;
        for (int l = 0; l < 3; l++) {
            if (med[l] <= 0)
                continue;
            printf("{\"bench\": \"gemm_libraries\", \"config\": {\"shape\": \"%s\", \"m\": %d, "
                   "\"n\": %d, \"k\": %d}, \"method\": \"%s\", \"median_ms\": %.5f, "
                   "\"gflops\": %.1f, \"threads\": 1, \"baseline\": \"%s\", "
                   "\"baseline_median_ms\": %.5f, \"ratio_to_baseline\": %.3f, "
                   "\"max_abs_diff_vs_openblas\": %.2g}\n",
                   s->what, s->m, s->n, s->k, lib[l], med[l],
                   2.0 * s->m * s->n * s->k / (med[l] * 1e6),
                   base ? "libxsmm" : "openblas (no libxsmm kernel)", med[base], med[l] / med[base],
                   worst);
        }
        free(A), free(B);
        for (int l = 0; l < 3; l++)
            free(C[l]);
    }
    return 0;
}
