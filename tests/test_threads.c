/* test_threads.c: every public call is safe from several threads. Threads
 * made with plain pthread_create (unknown to the GC until their first cft
 * call) call the same jitted function, the same vmap(grad) and different
 * functions hundreds of times at once, while the collector runs; every
 * result must equal the serial interpreter's to f32 rounding (rtol 1e-5,
 * atol 1e-6: a compiled kernel may round differently from the eager one,
 * while a race gives garbage, far outside that). Built with
 * -DCFT_SANITIZE=thread, ThreadSanitizer checks the same run for races. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

#define NTHREADS 6
static int ncalls = 200;

/* (w1 [4,8], b1 [8], w2 [8,3], x [4], y []) -> cross-entropy of one example */
static cft_status mlp(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[3], in[0]), in[1]));
    out[0] = cft_mean(cft_cross_entropy(cft_matmul(h, in[2]), in[4]), NULL, 0, false);
    return CFT_OK;
}

static cft_status chain(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = in[0];
    for (int k = 0; k < 6; k++)
        y = cft_tanh(cft_add(cft_mul(y, in[1]), cft_scalar(0.1 * k, CFT_F32)));
    out[0] = cft_sum(cft_mul(y, y), (int[]){1}, 1, false);
    return CFT_OK;
}

static cft_status chain_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    chain(env, nin, in, nout, out);
    out[0] = cft_sum(out[0], NULL, 0, false);
    return CFT_OK;
}

static cft_array *randn(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd);
}

typedef struct {
    cft_fn *f;
    cft_array **in;
    int nout;
    cft_array **want; /* the serial results */
    int bad, calls;
    char msg[256];
} job;

static bool equal(cft_array *a, cft_array *b) {
    if (cft_failed(a) || cft_failed(b))
        return false;
    cft_aval x = cft_array_aval(a), y = cft_array_aval(b);
    if (x.ndim != y.ndim || x.dtype != y.dtype)
        return false;
    int64_t n = 1;
    for (int d = 0; d < x.ndim; d++) {
        if (x.shape[d] != y.shape[d])
            return false;
        n *= x.shape[d];
    }
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1)),
          *q = malloc(sizeof(float) * (size_t)(n ? n : 1));
    bool same = cft_copy_to(a, CFT_F32, p) == CFT_OK && cft_copy_to(b, CFT_F32, q) == CFT_OK;
    for (int64_t i = 0; i < n && same; i++)
        same = fabsf(p[i] - q[i]) <= 1e-6f + 1e-5f * fabsf(q[i]);
    free(p);
    free(q);
    return same;
}

static void *worker(void *arg) {
    job *jb = arg;
    for (int c = 0; c < ncalls; c++) {
        cft_array *out[4];
        cft_status st = cft_fn_call(jb->f, jb->in, out);
        jb->calls++;
        for (int k = 0; k < jb->nout; k++)
            if (st != CFT_OK || !equal(out[k], jb->want[k])) {
                if (!jb->bad++)
                    snprintf(jb->msg, sizeof jb->msg, "call %d output %d: %s", c, k,
                             st != CFT_OK ? cft_last_error_message() : "differs from serial");
            }
        if (c % 50 == 0) /* garbage, so the collector runs while others compute */
            for (int g = 0; g < 20; g++)
                cft_zeros(CFT_F32, (int64_t[]){256, 256}, 2);
    }
    return NULL;
}

/* run jobs[0..n) on n threads at once; all must match the serial results */
static void run_jobs(job *jobs, int n) {
    pthread_t th[NTHREADS];
    for (int t = 0; t < n; t++)
        CHECK_EQ(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
    for (int t = 0; t < n; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < n; t++) {
        CHECK_MSG(jobs[t].bad == 0, "thread %d: %d of %d calls wrong; first: %s", t, jobs[t].bad,
                  jobs[t].calls, jobs[t].msg);
        CHECK_EQ(jobs[t].calls, ncalls);
    }
}

static job make_job(cft_fn *f, cft_array **in, int nout) {
    job j = {.f = f, .in = in, .nout = nout};
    j.want = cft_alloc(sizeof(cft_array *) * (size_t)nout);
    return j;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    if (getenv("CFT_THREADS_CALLS"))
        ncalls = atoi(getenv("CFT_THREADS_CALLS"));
    const int B = 16;
    cft_array *w1 = randn(1, (int64_t[]){4, 8}, 2), *b1 = randn(2, (int64_t[]){8}, 1),
              *w2 = randn(3, (int64_t[]){8, 3}, 2), *xs = randn(4, (int64_t[]){B, 4}, 2),
              *ys = cft_from_data((int32_t[]){0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0},
                                  CFT_I32, (int64_t[]){B}, 1);
    static cft_array *in_psg[5];
    in_psg[0] = w1, in_psg[1] = b1, in_psg[2] = w2, in_psg[3] = xs, in_psg[4] = ys;
    cft_fn *g = cft_grad(cft_fn_new(mlp, NULL, 5, 1), (int[]){0, 1, 2}, 3);
    cft_fn *psg =
        cft_vmap(g, (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL);

    TEST("%d threads x %d calls of one jitted vmap(grad): equal to serial", NTHREADS, ncalls) {
        cft_fn *j = cft_jit(psg);
        job jobs[NTHREADS];
        for (int t = 0; t < NTHREADS; t++) {
            jobs[t] = make_job(j, in_psg, 3);
            CHECK_EQ(cft_fn_call(psg, in_psg, jobs[t].want), CFT_OK); /* interpreter */
        }
        run_jobs(jobs, NTHREADS); /* the first calls race to trace and compile */
    }
    TEST("%d threads x %d calls of one (unjitted) vmap(grad): equal to serial", NTHREADS, ncalls) {
        cft_fn *f =
            cft_vmap(g, (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0}, NULL);
        job jobs[NTHREADS];
        for (int t = 0; t < NTHREADS; t++) {
            jobs[t] = make_job(f, in_psg, 3);
            CHECK_EQ(cft_fn_call(psg, in_psg, jobs[t].want), CFT_OK);
        }
        run_jobs(jobs, NTHREADS);
    }
    TEST("different jitted functions and sizes on each thread") {
        job jobs[NTHREADS];
        for (int t = 0; t < NTHREADS; t++) {
            cft_array **in = cft_alloc(sizeof(cft_array *) * 2);
            in[0] = randn(10 + (uint64_t)t, (int64_t[]){8 + t, 33}, 2);
            in[1] = randn(20 + (uint64_t)t, (int64_t[]){33}, 1);
            cft_fn *f = cft_fn_new(chain, NULL, 2, 1);
            jobs[t] = make_job(
                cft_jit(t % 2 ? f : cft_grad(cft_fn_new(chain_loss, NULL, 2, 1), (int[]){1}, 1)),
                in, 1);
            cft_fn *ref = t % 2 ? f : cft_grad(cft_fn_new(chain_loss, NULL, 2, 1), (int[]){1}, 1);
            jobs[t].want[0] = cft_fn_call1(ref, in);
        }
        run_jobs(jobs, NTHREADS);
    }
    TEST("one jitted function at a new size on every thread (symbolic retrace under threads)") {
        cft_fn *j = cft_jit(cft_fn_new(chain, NULL, 2, 1));
        job jobs[NTHREADS];
        cft_array *w = randn(30, (int64_t[]){40}, 1);
        for (int t = 0; t < NTHREADS; t++) {
            cft_array **in = cft_alloc(sizeof(cft_array *) * 2);
            in[0] = randn(40 + (uint64_t)t, (int64_t[]){3 + 5 * t, 40}, 2), in[1] = w;
            jobs[t] = make_job(j, in, 1);
            jobs[t].want[0] = cft_fn_call1(cft_fn_new(chain, NULL, 2, 1), in);
        }
        run_jobs(jobs, NTHREADS);
    }
    return check_summary();
}
