/* blas_core.c: a 512^3 f32 cft_matmul on one thread with the kernels cft
 * left OpenBLAS at after load (its own pick, or the switch of
 * core/blas_core.c when the pick was older than the CPU), against OpenBLAS
 * forced to the newest kernels this CPU runs (SkylakeX with AVX-512,
 * Haswell/Zen with AVX2) and to the SSE3 fallback (Prescott) that an
 * unknown model gets. The cores are switched between rounds in this
 * process (40 rounds of 5 products each, after 20 ms of untimed ones; the
 * best round and the median round of each). One JSON line per side, with
 * ratio_to_baseline against the forced newest core. Usage: blas_core
 * [--size N] [--rounds R] */
#include <strings.h>

#include "bench.h"

const char *cft__blas_core(void);
bool cft__blas_force_core(const char *name);
const char *cft__blas_cpu_core(void);

static cft_array *A, *B;
static void product(void *arg) {
    (void)arg;
    cft_array *c = cft_matmul(A, B);
    if (cft_failed(c))
        abort();
}

int main(int argc, char **argv) {
    cft_init();
    cft_set_num_threads(1);
    int n = 512, rounds = 40;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--size"))
            n = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
    }
    const char *c = cft__blas_core();
    if (!c) {
        printf("{\"bench\": \"blas_core\", \"skipped\": \"not a DYNAMIC_ARCH OpenBLAS\"}\n");
        return 0;
    }
    char def[64];
    snprintf(def, sizeof def, "%s", c);
    const char *cores[3] = {def, cft__blas_cpu_core(), "Prescott"};
    const char *names[3] = {"cft_default", "openblas_forced", "openblas_fallback"};
    A = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){n, n}, 2);
    B = cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){n, n}, 2);
    double *t[3];
    for (int s = 0; s < 3; s++)
        t[s] = malloc(sizeof(double) * (size_t)rounds);
    for (int r = 0; r < rounds; r++)
        for (int s = 0; s < 3; s++) {
            if (!cft__blas_force_core(cores[s])) {
                fprintf(stderr, "blas_core: OpenBLAS cannot run %s here\n", cores[s]);
                return 1;
            }
            double t0 = now_ms();
            do
                product(NULL);
            while (now_ms() - t0 < 20);
            t0 = now_ms();
            for (int i = 0; i < 5; i++)
                product(NULL);
            t[s][r] = (now_ms() - t0) / 5;
        }
    cft__blas_force_core(def);
    double med[3], mn[3];
    for (int s = 0; s < 3; s++)
        bench_stats(t[s], rounds, &med[s], &mn[s]);
    for (int s = 0; s < 3; s++)
        printf("{\"bench\": \"blas_core\", \"config\": {\"m\": %d, \"n\": %d, \"k\": %d, "
               "\"dtype\": \"f32\"}, \"method\": \"%s\", \"core\": \"%s\", \"median_ms\": %.4f, "
               "\"min_ms\": %.4f, \"threads\": 1, \"baseline\": \"openblas_forced\", "
               "\"baseline_core\": \"%s\", \"baseline_median_ms\": %.4f, "
               "\"ratio_to_baseline\": %.3f, \"rounds\": %d}\n",
               n, n, n, names[s], cores[s], med[s], mn[s], cores[1], med[1], med[s] / med[1],
               rounds);
    return 0;
}
