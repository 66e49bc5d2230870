/* test_device_big.c: arrays of more than 2^31 bytes on a device, on the
 * "test" backend (tests/support/test_backend.c), whose fused kernels are the
 * CUDA kernels compiled for the host: f32[2^29 + 3] (2 GiB + 12 bytes) put
 * on the device, summed eagerly and under the jit, and copied back; on a
 * GPU the same sum never finished. Every size, offset and index on the
 * device path (copies, launch geometry, the kernels' slots) must be 64-bit.
 * Skipped (77) where the machine has under 12 GiB of memory available.
 * CFT_TEST_DEVICE names another device: ctest's gpu_big runs it on
 * cuda:0 (skipped, 77, without one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cft/cft.h"
#include "cft/device.h"
#include "check.h"
#include "support/test_backend.h"

static cft_status total(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_mul_s(in[0], 2.0), NULL, 0, false);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && (double)pages * (double)page < 12.0 * (1 << 30)) {
        printf("skipped: under 12 GiB of memory available\n");
        return 77;
    }
    const char *name = getenv("CFT_TEST_DEVICE") ? getenv("CFT_TEST_DEVICE") : "test:1";
    if (!strncmp(name, "test", 4) && test_backend_register() != 0)
        return 1;
    const cft_dev *d = cft_device(name);
    if (cft_device_error(d)) {
        printf("test_device_big on %s: skipped: %s\n", name,
               cft_error_message(cft_device_error(d)));
        return 77;
    }
    const int64_t n = (INT64_C(1) << 29) + 3;
    cft_array *x = cft_ones(CFT_F32, (int64_t[]){n}, 1);
    TEST("f32[2^29+3] on %s: put, sum (eager and jitted), back", name) {
        cft_array *xd = cft_device_put(x, d);
        CHECK(!cft_failed(xd));
        cft_array *s = cft_device_put(cft_sum(xd, NULL, 0, false), cft_device("cpu"));
        CHECK_MSG(!cft_failed(s), "%s", cft_error_message(s));
        /* accumulated in double: 2^29 + 3, rounded once to f32 (2^29) */
        CHECK_EQ(cft_item(s), (double)(float)(double)n);
        cft_fn *j = cft_jit(cft_fn_new(total, NULL, 1, 1));
        for (int k = 0; k < 2; k++) {
            cft_array *o[1];
            CHECK_EQ(cft_fn_call(j, &xd, o), CFT_OK);
            CHECK_EQ(cft_item(cft_device_put(o[0], cft_device("cpu"))),
                     (double)(float)(2.0 * (double)n));
        }
        cft_array *back = cft_device_put(cft_mul_s(xd, 3.0), cft_device("cpu"));
        CHECK(!cft_failed(back));
        CHECK_EQ(cft_item(cft_index(back, 0)), 3.0);
        CHECK_EQ(cft_item(cft_index(back, (INT64_C(1) << 29) + 1)), 3.0); /* past 2^31 bytes */
        CHECK_EQ(cft_item(cft_index(back, n - 1)), 3.0);
        CHECK_EQ(cft_item(cft_sum(back, NULL, 0, false)), (double)(float)(3.0 * (double)n));
    }
    return check_summary();
}
