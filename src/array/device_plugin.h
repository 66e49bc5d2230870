/* Internal: what cft hands a device plugin it loads itself (libcft_cuda.so:
 * array/device.c loads it, src/cuda/backend.c receives this). The plugin
 * links nothing of cft (a program may link cft statically), so the core
 * functions it uses come as pointers, through the plugin's one entry
 * point: int cft_cuda_backend_register(const cft_plugin_core *core). */
#ifndef CFT_ARRAY_DEVICE_PLUGIN_H
#define CFT_ARRAY_DEVICE_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cft/device.h"

/* cft/device.h's accessors of an operation, as pointers */
typedef struct {
    const char *(*name)(const cft_dev_op *op);
    int (*nin)(const cft_dev_op *op);
    cft_dev_buf (*in)(const cft_dev_op *op, int i);
    cft_dev_buf (*out)(const cft_dev_op *op, int j);
    int (*param)(const cft_dev_op *op, const char *name, int64_t *vals, int cap);
} cft_dev_op_api;

typedef struct {
    cft_status (*register_backend)(const cft_backend *b);
    cft_status (*run_on_host)(const cft_dev_op *op);
    const char *(*last_error_message)(void);
    /* whether a library may be loaded from path: neither the file nor its
     * directory can be changed by another user (else why says so) */
    bool (*trusted)(const char *path, char *why, size_t n);
    /* cft's private on-disk cache (core/cache.h): a blob by name
     * (malloc'd; NULL when absent or not matching its record), and its
     * store (0 or -1) */
    void *(*cache_get)(const char *name, size_t *n);
    int (*cache_put)(const char *name, const void *buf, size_t n);
    cft_dev_op_api op;
} cft_plugin_core;

/* the plugin's entry point */
typedef int (*cft_plugin_register_fn)(const cft_plugin_core *core);

#endif
