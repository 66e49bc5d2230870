/* test_gc_roots.c: arrays reachable only from static data survive
 * collections. The collector leaves the data sections of the libraries cft
 * calls (BLAS, MPI, libc, ...) out of its roots (core/mem.c); this checks
 * that what must stay in does: the program's own globals and a user
 * library's globals (tests/support/gc_holder.c, a shared library). Each
 * kept array is a 1 MiB buffer of a known value, reachable only from there;
 * then 400 MiB of other 1 MiB arrays are made, with a different value, so
 * a wrongly reclaimed buffer would be reused and read back changed. With
 * CFT_GC_OFF (sanitizer builds) nothing is ever freed: the test skips. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/mem.h"
#include "support/gc_holder.h"

#ifndef CFT_GC_OFF
static cft_array *global_kept[2];

enum { N = 1 << 18 }; /* floats: 1 MiB */

static cft_array *filled(double v) {
    return cft_add_s(cft_zeros(CFT_F32, (int64_t[]){N}, 1), v);
}

static double sum_of(cft_array *x) {
    return cft_item(cft_sum(x, NULL, 0, false));
}

/* made in a function of their own, and its stack overwritten after, so no
 * stale copy on the stack keeps them alive: only the static data does */
__attribute__((noinline)) static void keep_all(void) {
    for (int i = 0; i < 2; i++) {
        global_kept[i] = filled(1.0 + i);
        gc_holder_set(i, filled(3.0 + i));
    }
}

__attribute__((noinline)) static void scrub_stack(void) {
    volatile char buf[1 << 16];
    memset((char *)buf, 0, sizeof buf);
}

__attribute__((noinline)) static double churn(void) {
    double junk = 0;
    for (int i = 0; i < 400; i++)
        junk += cft_item(cft_index(filled(-5.0), 0));
    return junk;
}

#endif

int main(int argc, char **argv) {
#ifdef CFT_GC_OFF
    (void)argc, (void)argv;
    puts("test_gc_roots: skipped (built without the collector)");
    return 77;
#else
    check_init(argc, argv);
    TEST("arrays held only by static data survive collections") {
        keep_all();
        scrub_stack();
        size_t gc0 = cft__gc_count();
        CHECK(churn() == -2000.0);
        CHECK_MSG(cft__gc_count() > gc0 + 3, "only %zu collections", cft__gc_count() - gc0);
        for (int i = 0; i < 2; i++) {
            CHECK_MSG(sum_of(global_kept[i]) == (1.0 + i) * N, "program global %d changed", i);
            CHECK_MSG(sum_of((cft_array *)gc_holder_get(i)) == (3.0 + i) * N,
                      "user library global %d changed", i);
        }
    }
    return check_summary();
#endif
}
