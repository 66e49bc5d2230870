/* Internal: what cft's oneDNN kernels share (dnnl_rt.c): one CPU engine,
 * a stream and growing scratch buffers per thread, and oneDNN's OpenMP
 * team set to cft's thread count around a call. Only for files built with
 * CFT_HAVE_DNNL. */
#ifndef CFT_DNNL_RT_H
#define CFT_DNNL_RT_H

#ifdef CFT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* The CPU engine, made once; NULL when oneDNN could not make one. */
dnnl_engine_t cft__dnnl_engine(void);

/* This thread's stream (made on first use, destroyed at thread exit);
 * NULL on failure. */
dnnl_stream_t cft__dnnl_stream(void);

/* This thread's scratch buffer `slot` (0 <= slot < CFT_DNNL_SLOTS) of at
 * least n bytes, 64-byte aligned; it only grows and is freed at thread
 * exit. NULL when out of memory. */
enum { CFT_DNNL_SLOTS = 6 };
void *cft__dnnl_buffer(int slot, size_t n);

/* A memory object of md over buf (NULL on failure). */
dnnl_memory_t cft__dnnl_mem(const dnnl_memory_desc_t *md, void *buf);

/* Sets oneDNN's OpenMP team to cft's thread count, or fewer for a call of
 * `work` multiply-adds: one thread a CFT_DNNL_GRAIN of them, since waking
 * a team costs more than a small product (a 250x40x40 one took 38 us on
 * two threads, 9 us on one). Primitives are built for a team size:
 * callers key their caches by it. Returns what to pass to
 * cft__dnnl_threads_end, which restores the team's size. */
#define CFT_DNNL_GRAIN 1048576.0
int cft__dnnl_threads_begin(int *nth, double work);
void cft__dnnl_threads_end(int before);

/* A bounded cache of built primitives, keyed by up to CFT_DNNL_NKEY
 * integers (unused ones zero). Each kernel's entry struct starts with a
 * cft__dnnl_entry; build makes one for a key (NULL: out of memory). */
enum { CFT_DNNL_NKEY = 28, CFT_DNNL_MAX_ENTRIES = 512 };
typedef struct cft__dnnl_entry {
    int64_t key[CFT_DNNL_NKEY];
    struct cft__dnnl_entry *next;
} cft__dnnl_entry;
typedef struct {
    pthread_mutex_t mu;
    cft__dnnl_entry *head;
    int n;
    cft__dnnl_entry *(*build)(const int64_t *key);
} cft__dnnl_cache;

/* The entry for key: found, or built under the cache's lock and kept;
 * *owned when the cache was full, and the caller destroys it after use. */
cft__dnnl_entry *cft__dnnl_lookup(cft__dnnl_cache *c, const int64_t *key, bool *owned);

static inline bool cft__dnnl_ok(dnnl_status_t s) {
    return s == dnnl_success;
}

/* Whether pd is oneDNN's scalar reference kernel (slower than cft's own
 * paths, so the kernels decline it). */
bool cft__dnnl_reference(const_dnnl_primitive_desc_t pd);

/* The end of a primitive's build: where good, *prim (made from pd) stays
 * and *scratch is its scratchpad's desc; else *prim is destroyed and set
 * to NULL. pd and attr (either may be NULL) are destroyed. */
void cft__dnnl_built(bool good, dnnl_primitive_desc_t pd, dnnl_primitive_attr_t attr,
                     dnnl_primitive_t *prim, dnnl_memory_desc_t *scratch);

/* Runs prim on this thread's stream with n arguments (arg[i] over buf[i],
 * described by md[i]) and its scratchpad (scratch, in this thread's buffer
 * `slot`), and waits; false on any failure. */
bool cft__dnnl_run(dnnl_primitive_t prim, int n, const int *arg, const dnnl_memory_desc_t *md,
                   void *const *buf, const dnnl_memory_desc_t *scratch, int slot);
#endif

#endif
