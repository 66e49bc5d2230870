/* Internal: the caching allocator in front of every backend's alloc and
 * release (array/device_pool.c). */
#ifndef CFT_ARRAY_DEVICE_POOL_H
#define CFT_ARRAY_DEVICE_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "array/device.h"

/* `bytes` of device memory on d: a cached block of the same size class,
 * else the backend's (on failure, the cache of d is handed back to the
 * backend and the allocation tried once more). NULL: out of memory. */
void *cft__pool_alloc(const cft_dev *d, size_t bytes);
/* ptr (from cft__pool_alloc(d, bytes)) is free: kept for reuse, or given
 * back to the backend when caching is off (CFT_DEVICE_CACHE=0) */
void cft__pool_release(const cft_dev *d, void *ptr, size_t bytes);
/* hands every cached block of d back to the backend */
void cft__pool_trim(const cft_dev *d);
/* counts `bytes` about to be handed out on any device: true when the
 * bytes handed out since the last collection call for one (then collect,
 * release what it found, and say so with cft__pool_collected) */
bool cft__pool_pressure(size_t bytes);
void cft__pool_collected(void);
/* the counts of d */
void cft__pool_stats(const cft_dev *d, cft_device_memory_stats *out);

#endif
