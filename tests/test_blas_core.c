/* test_blas_core.c: OpenBLAS's kernels follow the CPU (core/blas_core.c).
 * A fallback is simulated by making OpenBLAS load its SSE3 "Prescott"
 * kernels (what Debian's 0.3.21 picks on a model it does not know, such as
 * Emerald Rapids) on this CPU, which has AVX at least; cft then switches it
 * back to kernels of the CPU's level and says so once on stderr, and a
 * product is right before and after (to f32 tolerance against a double
 * reference: rtol 1e-5, atol 1e-6 * K, the kernels sum in other orders).
 * OPENBLAS_CORETYPE (the user's choice) and CFT_BLAS_CORE=keep leave
 * OpenBLAS alone. Skipped (77) where the BLAS is not a DYNAMIC_ARCH
 * OpenBLAS or the CPU has no AVX. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"
#include "core/blas_core.h"

static cft_array *product(cft_array *a, cft_array *b) {
    return cft_matmul(a, b);
}

static void check_product(cft_array *a, cft_array *b, cft_array *want, int64_t K) {
    cft_array *got = product(a, b);
    CHECK(!cft_failed(got));
    CHECK_ARRAY_CLOSE(cft_astype(got, CFT_F64), want, 1e-5, 1e-6 * (double)K);
}

int main(void) {
    const char *core = cft__blas_core();
    if (!core || !__builtin_cpu_supports("avx")) {
        printf("SKIP: %s\n", core ? "no AVX on this CPU" : "not a DYNAMIC_ARCH OpenBLAS");
        return 77;
    }
    /* a CI pass sets OPENBLAS_CORETYPE (Haswell, in the AVX2 pass); OpenBLAS
     * has read it by now and cft left its choice alone. The checks below
     * set it themselves where they need it; without it, the core cft picks
     * for this CPU is the reference (on an AVX-512 CPU not Haswell: the
     * test failed there, and passed where AVX2 is the top level) */
    bool forced = getenv("OPENBLAS_CORETYPE") != NULL;
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("CFT_BLAS_CORE");
    if (forced)
        (void)cft__blas_match_cpu();
    char native[64];
    snprintf(native, sizeof native, "%s", cft__blas_core());
    printf("OpenBLAS runs its %s kernels here\n", native);
    enum { M = 200, K = 300, N = 150 };
    cft_array *a = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){M, K}, 2),
              *b = cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){K, N}, 2);
    cft_array *want = cft_matmul(cft_astype(a, CFT_F64), cft_astype(b, CFT_F64));

    TEST("the core OpenBLAS picked fits the CPU: nothing to do") {
        CHECK(cft__blas_match_cpu() == NULL);
        CHECK(!strcmp(cft__blas_core(), native));
        check_product(a, b, want, K);
    }
    TEST("a fallback to SSE3 kernels is switched back, with one line on stderr") {
        CHECK(cft__blas_force_core("Prescott"));
        CHECK(!strcasecmp(cft__blas_core(), "Prescott"));
        check_product(a, b, want, K); /* the slow kernels are right, too */
        const char *note = cft__blas_match_cpu();
        CHECK_MSG(note && strstr(note, "Prescott") && strstr(note, "switched"), "note: %s",
                  note ? note : "(none)");
        CHECK_MSG(strcasecmp(cft__blas_core(), "Prescott") != 0, "still %s", cft__blas_core());
        check_product(a, b, want, K);
        CHECK(cft__blas_match_cpu() == NULL); /* once: now it fits */
    }
    TEST("OPENBLAS_CORETYPE set by the user is left alone") {
        CHECK(cft__blas_force_core("Prescott"));
        setenv("OPENBLAS_CORETYPE", "Prescott", 1);
        CHECK(cft__blas_match_cpu() == NULL);
        CHECK(!strcasecmp(cft__blas_core(), "Prescott"));
        unsetenv("OPENBLAS_CORETYPE");
        setenv("CFT_BLAS_CORE", "keep", 1);
        CHECK(cft__blas_match_cpu() == NULL);
        CHECK(!strcasecmp(cft__blas_core(), "Prescott"));
        unsetenv("CFT_BLAS_CORE");
        CHECK(cft__blas_match_cpu() != NULL);
        CHECK(!strcmp(cft__blas_core(), native) || strcasecmp(cft__blas_core(), "Prescott"));
    }
    TEST("an unknown core name is refused: OpenBLAS keeps a working core") {
        CHECK(!cft__blas_force_core("NoSuchCore"));
        CHECK(cft__blas_core() != NULL);
        check_product(a, b, want, K);
    }
    return check_summary();
}
