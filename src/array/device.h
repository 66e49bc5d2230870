/* Internal: devices (cft/device.h). The registry of backends, device
 * handles, device arrays (allocation, release when collected) and copies
 * between the host and a device, all through the backend's table. The
 * dispatch of primitives onto devices is in trace/device_op.c. */
#ifndef CFT_ARRAY_DEVICE_H
#define CFT_ARRAY_DEVICE_H

#include "array/array.h"
#include "cft/device.h"

struct cft_dev {
    const cft_backend *b; /* NULL: the host */
    int index;
    char name[64];
    cft_array *err; /* set: this device cannot be used, and why */
};

/* replaces registered table t's functions and ctx by counting and
 * profiling shims around the backend's own (device_count.c) */
void cft__dev_wrap(cft_backend *t, int slot);
/* the host device */
const cft_dev *cft__dev_cpu(void);
/* x is concrete and lives on a device (not the host) */
static inline bool cft__on_device(const cft_array *x) {
    return x && x->kind == CFT_K_CONCRETE && x->dev;
}
/* a fresh contiguous array on d (committed), payload unset */
/* a contiguous copy into y of the view of device memory at x (dims and
 * strides in elements of size es; strides may be negative) as one kernel
 * of the backend (array/device_copy.c, GC-allocated args); false for an
 * element size it has no kernel for */
bool cft__dev_copy_kernel(void *y, const void *x, size_t es, const int64_t *dims, const int64_t *st,
                          int nd, cft_dev_kernel *k);
cft_array *cft__dev_alloc(const cft_dev *d, const char *call, cft_dtype dt, const int64_t *shape,
                          int ndim);
/* x (on a device) copied to a host array (uncommitted, contiguous view of
 * x's elements); errors name `call` */
cft_array *cft__dev_to_host(const cft_array *x, const char *call);
/* element `off` (in elements, from x->data) of device array x into `out`
 * (its dtype's size in bytes): NULL, or the error */
cft_array *cft__dev_read(const cft_array *x, int64_t off, void *out, const char *call);
/* host array x copied onto d (committed, contiguous) */
cft_array *cft__dev_from_host(const cft_dev *d, cft_array *x, const char *call);
/* contiguous host bytes into a device array's buffer (dst fresh from cft__dev_alloc) */
cft_array *cft__dev_write(cft_array *dst, const void *src, const char *call);
/* releases x's device memory now (to the caching allocator), for an
 * array nothing else can reach (an intermediate of a jitted plan): x must
 * own its buffer; anything else is left alone */
void cft__dev_release(cft_array *x);
/* While a jitted plan is captured on this thread (lower/jit_device.c):
 * every device array allocated is appended to c, which the caller keeps
 * (the recording points at their memory), and cft__dev_release does
 * nothing. NULL ends it. */
typedef struct {
    cft_array **arrs; /* collected memory */
    int n, cap;
    bool failed; /* an allocation could not be recorded */
} cft_dev_capture;
void cft__dev_capture(cft_dev_capture *c);
/* graph (from d's end_capture) released at the next drain of the release
 * queue: for a finalizer, which must only queue work */
void cft__dev_release_graph_later(const cft_dev *d, void *graph);
/* an error naming `call`, the device and the backend's message */
cft_array *cft__dev_fail(const cft_dev *d, const char *call, const char *what);

#endif
