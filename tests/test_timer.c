/* test_timer.c: cft_timer_* against known durations. A 2 ms sleep measured
 * with timeit has a median in [2, 3] ms (sleeps overshoot, never
 * undershoot; the upper end leaves room for a loaded machine); a 200 us
 * spin on the monotonic clock measured with blocked_autorange has a median
 * in [200, 260] us, blocks of at least 10 us, at least 3 of them, and at
 * least min_run_time in all. The statistics are consistent (min <= q25 <=
 * median <= q75 <= max, iqr = q75 - q25). The printout and the comparison
 * table show the labels, units and columns. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cft/cft.h"
#include "check.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_2ms(void *arg) {
    (void)arg;
    nanosleep(&(struct timespec){0, 2000000}, NULL);
}

static void spin(void *arg) {
    double us = *(double *)arg, t0 = now_s();
    while (now_s() - t0 < us * 1e-6)
        ;
}

static void consistent(const cft_measurement *m) {
    CHECK(m->min <= m->q25 && m->q25 <= m->median && m->median <= m->q75 && m->q75 <= m->max);
    CHECK_CLOSE(m->iqr, m->q75 - m->q25, 1e-12, 1e-15);
    CHECK(m->mean >= m->min && m->mean <= m->max);
    CHECK(m->runs >= 1 && m->number >= 1 && m->times != NULL);
    CHECK_EQ(m->threads, cft_get_num_threads());
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_measurement a = {0}, b = {0};
    TEST("timeit of a 2 ms sleep") {
        CHECK_EQ(cft_timer_timeit(sleep_2ms, NULL, 1, 5, &a), CFT_OK);
        CHECK_EQ(a.runs, 5);
        CHECK_MSG(a.median >= 2e-3 && a.median < 3e-3, "median %.3f ms", a.median * 1e3);
        consistent(&a);
    }
    TEST("blocked_autorange of a 200 us spin") {
        double us = 200;
        CHECK_EQ(cft_timer_blocked_autorange(spin, &us, 0.05, &b), CFT_OK);
        CHECK_MSG(b.median >= 200e-6 && b.median < 260e-6, "median %.1f us", b.median * 1e6);
        CHECK(b.runs >= 3 && b.total >= 0.05 && b.median * (double)b.number >= 1e-5);
        consistent(&b);
    }
    TEST("the printout and the comparison table") {
        a.label = "sleep", a.sub_label = "2 ms", a.description = "nanosleep";
        b.label = "spin", b.sub_label = "200 us", b.description = "clock";
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cft_measurement_print(&a, f);
        cft_measurement ms[2] = {a, b};
        cft_timer_compare(ms, 2, f);
        fclose(f);
        CHECK_MSG(strstr(buf, "sleep: 2 ms") && strstr(buf, "Median: 2.") &&
                      strstr(buf, "5 measurements") && strstr(buf, "times in us") &&
                      strstr(buf, "nanosleep") && strstr(buf, "clock") &&
                      strstr(buf, "spin: 200 us"),
                  "%s", buf);
        free(buf);
    }
    TEST("bad arguments") {
        cft_measurement m;
        CHECK_EQ(cft_timer_timeit(NULL, NULL, 1, 1, &m), CFT_E_ARG);
        CHECK(strstr(cft_last_error_message(), "cft_timer_timeit"));
        CHECK_EQ(cft_timer_timeit(sleep_2ms, NULL, 0, 1, &m), CFT_E_ARG);
        CHECK_EQ(cft_timer_blocked_autorange(spin, NULL, 0.1, NULL), CFT_E_ARG);
    }
    return check_summary();
}
