/* ensemble.c (bench): K = 32 MLPs 64 -> 128 -> 10 with B = 256 examples per
 * model, single-threaded: cft_vmap over stacked parameters ([K, ...]) against
 * a C loop over the 32 models, measured in the same process.
 *   data "same": one minibatch shared by all models (x not batched);
 *   data "diff": each model its own minibatch (x [K, B, 64]);
 *   pass "fwd": the logits; "fwd_bwd": loss and gradient of every model.
 * Methods cft_jit_vmap / loop_over_models_jit: the same with the function
 * compiled by cft_jit (compared with the jitted loop). gemm_floor (and
 * gemm_floor_xsmm where the build has libxsmm): the pass's GEMMs alone,
 * per model, called on OpenBLAS (libxsmm) directly; gemm_floor_best: each
 * GEMM on whichever of the two measured faster for it in this run;
 * cft_jit_vmap is printed against the fastest of them too, and
 * cft_jit_vmap_alternating against gemm_floor_best_alternating: the two
 * timed in alternation, best of 200 rounds each.
 * One JSON object per line (the per_sample_grads format). functorch 1.13 on
 * this machine, one thread: fwd 2.37 ms, fwd+bwd 6.79 ms (loop over models
 * 2.02 / 7.27 ms). */
#include <cblas.h>
#include <string.h>
#ifdef CFT_HAVE_XSMM
#include <libxsmm.h>
#endif
#include <sys/resource.h>
#include <time.h>

#include "../examples/mlp.h"
#include "bench.h"

#define K 32
#define B 256
#define NP 4 /* w1 [64,128], b1, w2 [128,10], b2 */

static cft_array *logits(cft_array *const *p, cft_array *x) {
    cft_array *h = cft_relu(cft_add(cft_matmul(x, p[0]), p[1]));
    return cft_add(cft_matmul(h, p[2]), p[3]);
}

/* (w1, b1, w2, b2, x [B,64]) -> logits [B,10] */
static cft_status fwd(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = logits(in, in[NP]);
    return CFT_OK;
}

/* (w1, b1, w2, b2, x, y) -> mean cross-entropy */
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mean(cft_cross_entropy(logits(in, in[NP]), in[NP + 1]), NULL, 0, false);
    return CFT_OK;
}

typedef struct {
    cft_fn *f;
    cft_array *in[NP + 2];      /* stacked params, x, y (vmap) */
    cft_array *each[K][NP + 2]; /* per-model params, x, y (loop) */
} job;

static void run_vmap(void *p) {
    job *j = p;
    cft_array *out[1 + NP];
    cft_fn_call(j->f, j->in, out);
}
static void run_loop(void *p) {
    job *j = p;
    cft_array *out[1 + NP];
    for (int k = 0; k < K; k++)
        cft_fn_call(j->f, j->each[k], out);
}

/* the floor: the GEMMs of the pass alone, per model, on buffers allocated
 * once (fwd: x W1, h W2; bwd also dlogits W2^T, h^T dlogits, x^T dh),
 * straight to OpenBLAS, or (xsmm, where the build has libxsmm) to libxsmm's
 * kernels where it has one for the shape. Each model has its own weights;
 * with different data ("diff") each model also reads its own minibatch,
 * as the pass does (with one x for all, the floor read it hot from cache
 * where the pass reads 64 KB a model from memory). What the pass returns
 * goes to each model's own slot, allocated once: the logits (fwd) or the
 * weight gradients (fwd_bwd; earlier the 32 models' gradients overwrote
 * one buffer, hot in L1, which no ensemble step can do) */
typedef struct {
    float *x, *w1, *h, *w2, *z, *dz, *dh, *dw1, *dw2;
    bool bwd, xsmm, diff;
    bool best;   /* each GEMM on the library faster for its shape (lib) */
    bool lib[5]; /* per GEMM of the pass: libxsmm (true) or OpenBLAS */
    int only;    /* >= 0: that GEMM alone (to choose lib) */
} floor_job;

/* row-major C[m x n] = op(A) op(B) */
static void gemm(bool xsmm, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                 const float *Bm, int ldb, float *C, int ldc) {
#ifdef CFT_HAVE_XSMM
    if (xsmm) { /* column-major: C' = op(B)' op(A)' */
        static float bt[128 * 128];
        if (tb && n * k <= 128 * 128) { /* no libxsmm kernel for it: B^T copied (as cft does) */
            for (int i = 0; i < n; i++)
                for (int j = 0; j < k; j++)
                    bt[j * n + i] = Bm[i * ldb + j];
            Bm = bt, ldb = n, tb = false;
        }
        const float alpha = 1, beta = 0;
        int flags = (tb ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
        libxsmm_blasint M = n, N = m, Kk = k, la = ldb, lb = lda, lc = ldc;
        libxsmm_smmfunction f =
            libxsmm_smmdispatch(M, N, Kk, &la, &lb, &lc, &alpha, &beta, &flags, NULL);
        if (f) {
            f(Bm, A, C);
            return;
        }
    }
#else
    (void)xsmm;
#endif
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, 1, A, lda, Bm, ldb, 0, C, ldc);
}

static void run_floor(void *p) {
    floor_job *f = p;
    bool x[5];
    for (int g = 0; g < 5; g++)
        x[g] = f->best ? f->lib[g] : f->xsmm;
    for (int k = 0; k < K; k++) {
        float *w1 = f->w1 + (size_t)k * 64 * 128, *w2 = f->w2 + (size_t)k * 128 * 10,
              *xk = f->x + (f->diff ? (size_t)k * B * 64 : 0),
              *z = f->z + (f->bwd ? 0 : (size_t)k * B * 10), *dw1 = f->dw1 + (size_t)k * 64 * 128,
              *dw2 = f->dw2 + (size_t)k * 128 * 10;
        if (f->only < 0 || f->only == 0)
            gemm(x[0], false, false, B, 128, 64, xk, 64, w1, 128, f->h, 128);
        if (f->only < 0 || f->only == 1)
            gemm(x[1], false, false, B, 10, 128, f->h, 128, w2, 10, z, 10);
        if (!f->bwd)
            continue;
        if (f->only < 0 || f->only == 2)
            gemm(x[2], false, true, B, 128, 10, f->dz, 10, w2, 10, f->dh, 128);
        if (f->only < 0 || f->only == 3)
            gemm(x[3], true, false, 128, 10, B, f->h, 128, f->dz, 10, dw2, 10);
        if (f->only < 0 || f->only == 4)
            gemm(x[4], true, false, 64, 128, B, xk, 64, f->dh, 128, dw1, 128);
    }
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static void emit(const char *data, const char *pass, const char *method, double med, double mn,
                 const char *base, double base_med) {
    printf(
        "{\"bench\": \"ensemble\", \"config\": {\"K\": %d, \"B\": %d, \"data\": \"%s\", \"pass\": "
        "\"%s\"}, \"method\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, \"threads\": %d, "
        "\"baseline\": \"%s\", \"baseline_median_ms\": %.4f, "
        "\"speedup_vs_baseline\": %.2f, \"ratio_to_baseline\": %.3f, \"peak_rss_mb\": %.1f}\n",
        K, B, data, pass, method, med, mn, bench_nthreads, base, base_med, base_med / med,
        med / base_med, peak_rss_mb());
    fflush(stdout);
}

int main(int argc, char **argv) {
    bench_threads(argc, argv); /* and cft_init */
    digits d;
    if (digits_load(&d))
        return 1;
    /* K models: PyTorch-style init with one key each, stacked on axis 0 */
    static const int64_t sz[3] = {64, 128, 10};
    cft_array *stacked[NP], *model[K][NP];
    for (int k = 0; k < K; k++) {
        cft_array *keys = cft_random_split(cft_random_key(100 + (uint64_t)k), NP);
        for (int l = 0; l < 2; l++) {
            double bound = 1.0 / sqrt((double)sz[l]);
            int64_t ws[2] = {sz[l], sz[l + 1]};
            model[k][2 * l] =
                cft_random_uniform(cft_index(keys, 2 * l), CFT_F32, ws, 2, -bound, bound);
            model[k][2 * l + 1] =
                cft_random_uniform(cft_index(keys, 2 * l + 1), CFT_F32, ws + 1, 1, -bound, bound);
        }
    }
    for (int l = 0; l < NP; l++) {
        cft_array *layer[K];
        for (int k = 0; k < K; k++)
            layer[k] = model[k][l];
        stacked[l] = cft_stack(layer, K, 0);
    }
    /* K * B rows of digits (repeating), as [K, B, 64] and [K, B] */
    float *x = malloc(sizeof(float) * K * B * 64);
    int32_t *y = malloc(sizeof(int32_t) * K * B);
    for (int i = 0; i < K * B; i++) {
        memcpy(x + i * 64, d.x + (i % d.n) * 64, sizeof(float) * 64);
        y[i] = d.y[i % d.n];
    }
    cft_array *xk = cft_from_f32(x, (int64_t[]){K, B, 64}, 3),
              *yk = cft_from_i32(y, (int64_t[]){K, B}, 2);

    cft_fn *f_fwd = cft_fn_new(fwd, NULL, NP + 1, 1);
    cft_fn *f_vg =
        cft_value_and_grad(cft_fn_new(loss, NULL, NP + 2, 1), (int[]){0, 1, 2, 3}, NP, false);
    const cft_dev *dev = bench_device(argc, argv);
    for (int diff = 0; diff < 2 && dev; diff++) { /* --device: the jitted vmap's fwd+bwd there */
        int in_axes[NP + 2] = {0, 0, 0, 0, diff ? 0 : CFT_NOT_BATCHED, diff ? 0 : CFT_NOT_BATCHED};
        cft_array *in[NP + 2];
        memcpy(in, stacked, sizeof stacked);
        in[NP] = diff ? xk : cft_index(xk, 0);
        in[NP + 1] = diff ? yk : cft_index(yk, 0);
        char cfg[96];
        snprintf(cfg, sizeof cfg, "\"K\": %d, \"B\": %d, \"data\": \"%s\", \"pass\": \"fwd_bwd\"",
                 K, B, diff ? "diff" : "same");
        bench_on_device("ensemble", cfg, "cft_jit_vmap", cft_vmap(f_vg, in_axes, NULL), NP + 2, in,
                        NP + 1, dev);
    }
    if (dev)
        return 0;
    for (int diff = 0; diff < 2; diff++) {
        for (int bwd = 0; bwd < 2; bwd++) {
            const char *data = diff ? "diff" : "same", *pass = bwd ? "fwd_bwd" : "fwd";
            static job j; /* big: keep it off the stack */
            int in_axes[NP + 2] = {
                0, 0, 0, 0, diff ? 0 : CFT_NOT_BATCHED, diff ? 0 : CFT_NOT_BATCHED};
            cft_fn *base = bwd ? f_vg : f_fwd;
            memcpy(j.in, stacked, sizeof stacked);
            j.in[NP] = diff ? xk : cft_index(xk, 0);
            j.in[NP + 1] = diff ? yk : cft_index(yk, 0);
            for (int k = 0; k < K; k++) {
                memcpy(j.each[k], model[k], sizeof(cft_array *) * NP);
                j.each[k][NP] = cft_index(xk, diff ? k : 0);
                j.each[k][NP + 1] = cft_index(yk, diff ? k : 0);
            }
            /* a fresh vmap per config, so its first call (trace) can be timed */
            j.f = cft_vmap(base, in_axes, NULL);
            double t0 = now_ms();
            run_vmap(&j);
            double first = now_ms() - t0;
            double vm, vmin, lm, lmin, jvm, jvmin, jlm, jlmin;
            cft_fn *vmapped = j.f;
            timeit(run_vmap, &j, &vm, &vmin);
            cft_fn *jitted = cft_jit(vmapped);
            j.f = jitted;
            timeit(run_vmap, &j, &jvm, &jvmin);
            j.f = base;
            timeit(run_loop, &j, &lm, &lmin);
            j.f = cft_jit(base);
            timeit(run_loop, &j, &jlm, &jlmin);
            static floor_job fj;
            if (!fj.x) {
                size_t n[9] = {K * B * 64, K * 64 * 128, B * 128,      K * 128 * 10, K * B * 10,
                               B * 10,     B * 128,      K * 64 * 128, K * 128 * 10};
                float **bufs[9] = {&fj.x,  &fj.w1, &fj.h,   &fj.w2, &fj.z,
                                   &fj.dz, &fj.dh, &fj.dw1, &fj.dw2};
                for (int b = 0; b < 9; b++) {
                    *bufs[b] = malloc(sizeof(float) * n[b]);
                    for (size_t e = 0; e < n[b]; e++)
                        (*bufs[b])[e] = 0.01f * (float)(e % 13);
                }
            }
            fj.bwd = bwd, fj.xsmm = false, fj.diff = diff, fj.best = false, fj.only = -1;
            double fm, fmin, xm = 1e30, xmin, bm = 1e30, bmin;
            timeit(run_floor, &fj, &fm, &fmin);
            emit(data, pass, "gemm_floor", fm, fmin, "gemm_floor", fm);
#ifdef CFT_HAVE_XSMM
            fj.xsmm = true;
            timeit(run_floor, &fj, &xm, &xmin);
            emit(data, pass, "gemm_floor_xsmm", xm, xmin, "gemm_floor", fm);
            /* each GEMM on the library measured faster for it here, the
             * strictest floor (cft chooses by shape class, gemm_xsmm.c) */
            for (int g = 0; g < (bwd ? 5 : 2); g++) {
                double t[2], tmin;
                fj.only = g;
                for (int lib = 0; lib < 2; lib++) {
                    fj.xsmm = lib;
                    timeit(run_floor, &fj, &t[lib], &tmin);
                }
                fj.lib[g] = t[1] < t[0];
            }
            fj.only = -1, fj.best = true;
            timeit(run_floor, &fj, &bm, &bmin);
            fj.best = false;
            emit(data, pass, "gemm_floor_best", bm, bmin, "gemm_floor", fm);
#endif
            /* against the fastest floor */
            double fl = fm < xm ? fm : xm;
            const char *fname = fm < xm ? "gemm_floor" : "gemm_floor_xsmm";
            if (bm < fl)
                fl = bm, fname = "gemm_floor_best";
            emit(data, pass, "cft_jit_vmap", jvm, jvmin, fname, fl);
#ifdef CFT_HAVE_XSMM
            /* the same two alternating, 200 rounds of 5 calls each, the best
             * round of each (on a shared machine, load that comes and goes
             * falls on both alike; with 40 rounds the ratio still moved by
             * 5% from run to run, with 200 by 1-2%) */
            double ba = 1e30, bf = 1e30;
            j.f = jitted, fj.best = true;
            for (int r = 0; r < 200; r++) {
                double t0 = now_ms();
                for (int i = 0; i < 5; i++)
                    run_vmap(&j);
                double t1 = now_ms();
                for (int i = 0; i < 5; i++)
                    run_floor(&fj);
                double t2 = now_ms();
                ba = (t1 - t0) / 5 < ba ? (t1 - t0) / 5 : ba;
                bf = (t2 - t1) / 5 < bf ? (t2 - t1) / 5 : bf;
            }
            fj.best = false;
            emit(data, pass, "gemm_floor_best_alternating", bf, bf, "gemm_floor_best_alternating",
                 bf);
            emit(data, pass, "cft_jit_vmap_alternating", ba, ba, "gemm_floor_best_alternating", bf);
#endif
            emit(data, pass, "loop_over_models", lm, lmin, "loop_over_models", lm);
            emit(data, pass, "cft_vmap", vm, vmin, "loop_over_models", lm);
            emit(data, pass, "loop_over_models_jit", jlm, jlmin, "loop_over_models_jit", jlm);
            emit(data, pass, "cft_jit_vmap", jvm, jvmin, "loop_over_models_jit", jlm);
            char cfg[96];
            snprintf(cfg, sizeof cfg, "\"K\": %d, \"B\": %d, \"data\": \"%s\", \"pass\": \"%s\"", K,
                     B, data, pass);
            j.f = jitted;
            bench_scaling("ensemble", cfg, "cft_jit_vmap", run_vmap, &j, 40);
            printf("{\"bench\": \"ensemble\", \"config\": {\"K\": %d, \"B\": %d, \"data\": \"%s\", "
                   "\"pass\": \"%s\"}, \"method\": \"cft_vmap_first_call\", \"median_ms\": %.3f, "
                   "\"min_ms\": %.3f, \"threads\": %d}\n",
                   K, B, data, pass, first, first, bench_nthreads);
        }
    }
    free(x);
    free(y);
    return 0;
}
