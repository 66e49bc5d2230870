/* Internal: what cft hands a device plugin it loads itself (libcft_cuda.so:
 * array/device.c loads it, src/cuda/backend.c receives this). The plugin
 * links nothing of cft (a program may link cft statically), so the core
 * functions it uses come as pointers, through the plugin's one entry
 * point: int cft_cuda_backend_register(const cft_plugin_core *core). */
#ifndef CFT_ARRAY_DEVICE_PLUGIN_H
#define CFT_ARRAY_DEVICE_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "cft/device.h"

typedef struct {
    cft_status (*register_backend)(const cft_backend *b);
    cft_status (*run_on_host)(const cft_dev_op *op);
    const char *(*last_error_message)(void);
    /* whether a library may be loaded from path: neither the file nor its
     * directory can be changed by another user (else why says so) */
    bool (*trusted)(const char *path, char *why, size_t n);
} cft_plugin_core;

/* the plugin's entry point */
typedef int (*cft_plugin_register_fn)(const cft_plugin_core *core);

#endif
