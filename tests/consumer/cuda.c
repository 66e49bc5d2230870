/* cuda.c: the CUDA backend of an installed cft is found next to the
 * libcft that loads it (scripts/test-consumer.sh, from a moved prefix):
 * cft_device("cuda:0") either works or fails with the plug-in's own
 * reason (no driver, no device), never "cannot be loaded". Prints the
 * outcome; exits 1 when the plug-in itself was not found or loaded. */
#include <cft/cft.h>
#include <cft/device.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    cft_dev *d = cft_device("cuda:0");
    cft_array *e = cft_device_error(d);
    if (!e) {
        printf("cuda consumer: %s works\n", cft_device_name(d));
        return 0;
    }
    const char *why = cft_error_message(e);
    printf("cuda consumer: %s\n", why);
    return strstr(why, "cannot be loaded") || strstr(why, "built without") ? 1 : 0;
}
