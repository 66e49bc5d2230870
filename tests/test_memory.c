/* test_memory.c: memory stays bounded under the garbage collector. Runs
 * 10,000 SGD steps of a small MLP (cft_fn_call of a cft_grad function, then
 * an update that makes new parameter arrays) and requires the peak RSS
 * (VmHWM) after 10,000 steps to exceed the peak after the first 1,000 by
 * less than 20 MiB.
 *
 * Why 20 MiB: a step allocates about 200 KB (arrays, IR environments,
 * parameter records; measured with GC_get_total_bytes), i.e. ~1.7 GiB over
 * the 9,000 measured steps if nothing were reclaimed. Retaining as little as
 * one w1-sized gradient (16x64 f32) per step was measured to grow the peak
 * by ~84 MiB, four times the bound, while the collected heap grows by well
 * under 1 MiB (the GC's heap-growth increments are a few MiB at most). So
 * the bound separates "bounded" from any per-step leak with room on both
 * sides. The whole run takes ~2 s. With CFT_GC_OFF (sanitizer builds)
 * nothing is ever freed by design: the test skips (exit code 77). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "check.h"
#include "core/mem.h" /* cft__gc_count: collections so far */

#ifndef CFT_GC_OFF
enum { NX = 16, NH = 64, NB = 64, STEPS = 10000, WARM = 1000 };
#define LR 0.05
#define BOUND_MIB 20.0

/* mean((tanh(x @ w1 + b1) @ w2 + b2 - y)^2); w1[NX,NH] b1[NH] w2[NH,1] b2[1] x[NB,NX] y[NB,1] */
static cft_status loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[4], in[0]), in[1]));
    cft_array *pred = cft_add(cft_matmul(h, in[2]), in[3]);
    out[0] = cft_mse(pred, in[5]);
    return CFT_OK;
}

/* Peak resident set size in KiB: VmHWM, or ru_maxrss if /proc is absent. */
static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    if (kib < 0) {
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0)
            kib = ru.ru_maxrss;
    }
    return kib;
}

#endif

int main(int argc, char **argv) {
#ifdef CFT_GC_OFF
    (void)argc, (void)argv;
    printf("skipped: CFT_GC_OFF build (memory is never freed by design)\n");
    return 77;
#else
    check_init(argc, argv);
    TEST("10,000 traced SGD steps keep the peak RSS bounded") {
        cft_array *p[4] = {
            cft_mul_s(cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){NX, NH}, 2), 0.3),
            cft_zeros(CFT_F32, (int64_t[]){NH}, 1),
            cft_mul_s(cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){NH, 1}, 2), 0.3),
            cft_zeros(CFT_F32, (int64_t[]){1}, 1),
        };
        cft_array *x = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){NB, NX}, 2);
        cft_array *y = cft_sin(cft_sum(x, (int[]){1}, 1, true)); /* [NB,1] */
        cft_fn *f = cft_fn_new(loss, NULL, 6, 1);
        cft_fn *g = cft_grad(f, (int[]){0, 1, 2, 3}, 4);
        double loss0 = cft_item(cft_fn_call1(f, (cft_array *[]){p[0], p[1], p[2], p[3], x, y}));
        long rss_warm = 0;
        size_t gc_warm = 0;
        int failed_step = -1;
        for (int step = 0; step < STEPS && failed_step < 0; step++) {
            cft_array *grads[4];
            if (cft_fn_call(g, (cft_array *[]){p[0], p[1], p[2], p[3], x, y}, grads) != CFT_OK) {
                failed_step = step;
                break;
            }
            for (int k = 0; k < 4; k++)
                p[k] = cft_sub(p[k], cft_mul_s(grads[k], LR));
            if (step + 1 == WARM) {
                rss_warm = peak_rss_kib();
                gc_warm = cft__gc_count();
            }
        }
        CHECK_MSG(failed_step < 0, "step %d failed: %s", failed_step, cft_last_error_message());
        long rss_end = peak_rss_kib();
        size_t gc_end = cft__gc_count();
        double loss1 = cft_item(cft_fn_call1(f, (cft_array *[]){p[0], p[1], p[2], p[3], x, y}));
        double growth_mib = (double)(rss_end - rss_warm) / 1024.0;
        printf("peak RSS after %d steps: %.1f MiB, after %d: %.1f MiB (growth %.2f MiB); "
               "collections %zu -> %zu; loss %.4f -> %.4f\n",
               WARM, rss_warm / 1024.0, STEPS, rss_end / 1024.0, growth_mib, gc_warm, gc_end, loss0,
               loss1);
        CHECK(rss_warm > 0 && rss_end > 0);
        CHECK_MSG(growth_mib < BOUND_MIB, "peak RSS grew by %.2f MiB (bound %.0f MiB)", growth_mib,
                  BOUND_MIB);
        /* the collector ran during the steady state */
        CHECK(gc_end > gc_warm);
        /* and the steps trained the model (they computed real gradients) */
        CHECK(loss1 < 0.5 * loss0);
    }
    return check_summary();
#endif
}
