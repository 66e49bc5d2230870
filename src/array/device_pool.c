/* device_pool.c: the caching allocator of device memory (what PyTorch's
 * CUDA caching allocator does, in its simplest form). Freed blocks are
 * kept per device in bins of one size class each and handed out again
 * for a request of the same class, so a jitted function called in a loop
 * stops asking the backend (cudaMalloc synchronises the device) after its
 * first calls. Classes: multiples of 512 bytes up to 1 MiB, above that
 * four per power of two (at most 25% more than asked). A block is reused
 * only after the array owning it was released (collected, or an
 * intermediate of a jitted plan at the end of its call); device work is
 * ordered on one stream per device, so work queued before the reuse has
 * read it first. Blocks of up to 1 MiB are carved from 2 MiB segments of
 * the backend's memory instead of being allocations of their own. An
 * allocation the backend refuses empties the device's cache and is tried
 * once more. CFT_DEVICE_CACHE=0 turns caching off.
 *
 * Device arrays die when the collector finds them, but their bytes are
 * not the collector's, so nothing would make it look: a loop whose calls
 * return 1.6 GB of per-sample gradients filled the device (or, on the
 * test backend, the host until the kernel killed the process) before an
 * allocation failed and a collection ran, and until then every call's
 * outputs were fresh backend allocations. So the bytes handed out (from
 * the cache or the backend) since the last collection are counted, and
 * past max(512 MiB, twice the bytes in use after it) the allocator asks
 * for one (cft__pool_pressure): the device holds about three times its
 * live bytes at most, and at steady state a loop's outputs come from the
 * cache. */
#include "array/device_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

/* a segment of the backend's memory that small blocks are carved from */
typedef struct segment {
    char *base;
    size_t used; /* carved so far, from base up */
    long live;   /* its blocks handed out and not back in the cache */
    struct segment *next;
} segment;

typedef struct block {
    void *ptr;
    segment *seg; /* NULL: an allocation of the backend's own */
    struct block *next;
} block;

typedef struct {
    size_t size;
    block *head;
} bin;

typedef struct pool {
    const cft_dev *d;
    bin *bins;
    int nbins, capbins;
    segment *segs, *cur; /* every segment; the one being carved */
    cft_device_memory_stats st;
    struct pool *next;
} pool;

/* malloc memory (it holds no collected pointers); one lock for all */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pool *pools;
static block *spare; /* unused block records */

static bool caching(void) {
    static _Atomic int on = -1;
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("CFT_DEVICE_CACHE");
        v = !(e && !strcmp(e, "0"));
        atomic_store_explicit(&on, v, memory_order_relaxed);
    }
    return v;
}

/* blocks up to SMALL_MAX bytes are carved from segments of SEGMENT bytes
 * (PyTorch's small pool), so a loop's small results stop costing a
 * backend allocation (cuMemAlloc) each once their segments exist; a
 * segment goes back to the backend (empty_cache) when all its blocks are
 * in the cache */
#define SMALL_MAX ((size_t)1 << 20)
#define SEGMENT ((size_t)2 << 20)

static size_t size_class(size_t n) {
    if (n <= ((size_t)1 << 20))
        return (n + 511) & ~(size_t)511;
    int top = 63 - __builtin_clzll((unsigned long long)n);
    size_t step = (size_t)1 << (top - 2);
    return n > SIZE_MAX - step ? n : (n + step - 1) & ~(step - 1);
}

/* d's pool, made on first use; under mu. NULL: out of memory */
static pool *pool_of(const cft_dev *d) {
    for (pool *p = pools; p; p = p->next)
        if (p->d == d)
            return p;
    pool *p = calloc(1, sizeof *p);
    if (p) {
        p->d = d, p->next = pools;
        pools = p;
    }
    return p;
}

static bin *bin_of(pool *p, size_t size, bool make) {
    for (int i = 0; i < p->nbins; i++)
        if (p->bins[i].size == size)
            return &p->bins[i];
    if (!make)
        return NULL;
    if (p->nbins == p->capbins) {
        int c = p->capbins ? 2 * p->capbins : 16;
        bin *nb = realloc(p->bins, (size_t)c * sizeof *nb);
        if (!nb)
            return NULL;
        p->bins = nb, p->capbins = c;
    }
    p->bins[p->nbins] = (bin){size, NULL};
    return &p->bins[p->nbins++];
}

/* under mu: unlinks every cached block of p that the backend can take
 * back into a list for it: blocks of its own, and whole segments whose
 * carved blocks are all in the cache (their blocks leave the bins, the
 * segment goes as one block) */
static block *take_cache(pool *p) {
    block *all = NULL;
    for (int i = 0; i < p->nbins; i++)
        for (block **at = &p->bins[i].head; *at;) {
            block *b = *at;
            if (b->seg && b->seg->live > 0) { /* its segment still has blocks out */
                at = &b->next;
                continue;
            }
            *at = b->next;
            p->st.cached -= p->bins[i].size;
            if (b->seg) { /* a block of a free segment: the segment goes below */
                b->next = spare, spare = b;
                continue;
            }
            b->next = all, all = b;
            p->st.releases++;
        }
    for (segment **at = &p->segs; *at;) {
        segment *sg = *at;
        block *b = spare;
        if (sg->live > 0 || !b) {
            at = &sg->next;
            continue;
        }
        spare = b->next;
        *at = sg->next;
        if (p->cur == sg)
            p->cur = NULL;
        b->ptr = sg->base, b->seg = NULL, b->next = all, all = b;
        p->st.releases++;
        free(sg);
    }
    return all;
}

/* outside mu: the backend releases the list's blocks; the records are kept */
static void give_back(const cft_dev *d, block *all) {
    block *last = NULL;
    for (block *b = all; b; b = b->next) {
        d->b->release(d->b->ctx, d->index, b->ptr);
        last = b;
    }
    if (last) {
        pthread_mutex_lock(&mu);
        last->next = spare, spare = all;
        pthread_mutex_unlock(&mu);
    }
}

static void *backend_alloc(const cft_dev *d, size_t size) {
    void *ptr = d->b->alloc(d->b->ctx, d->index, size);
    pthread_mutex_lock(&mu);
    pool *p = pool_of(d);
    if (p && ptr)
        p->st.allocs++;
    pthread_mutex_unlock(&mu);
    return ptr;
}

/* under mu: size bytes carved from p's current segment, or NULL */
static void *carve(pool *p, size_t size) {
    segment *sg = p->cur;
    if (!sg || SEGMENT - sg->used < size)
        return NULL;
    void *ptr = sg->base + sg->used;
    sg->used += size, sg->live++;
    return ptr;
}

/* a small block: carved from the current segment, else from a new one
 * (the old one's tail stays unused); NULL when no segment can be had */
static void *carve_new(const cft_dev *d, size_t size) {
    pthread_mutex_lock(&mu);
    pool *p = pool_of(d);
    void *ptr = p ? carve(p, size) : NULL;
    pthread_mutex_unlock(&mu);
    if (ptr || !p)
        return ptr;
    char *base = backend_alloc(d, SEGMENT);
    segment *sg = base ? calloc(1, sizeof *sg) : NULL;
    if (!sg) {
        if (base)
            d->b->release(d->b->ctx, d->index, base);
        return NULL;
    }
    sg->base = base;
    pthread_mutex_lock(&mu);
    sg->next = p->segs, p->segs = sg, p->cur = sg;
    ptr = carve(p, size);
    pthread_mutex_unlock(&mu);
    return ptr;
}

void *cft__pool_alloc(const cft_dev *d, size_t bytes) {
    bool cache = caching();
    size_t size = cache ? size_class(bytes) : bytes;
    void *ptr = NULL;
    pthread_mutex_lock(&mu);
    pool *p = pool_of(d);
    bin *bn = p ? bin_of(p, size, false) : NULL;
    if (bn && bn->head) {
        block *b = bn->head;
        bn->head = b->next;
        ptr = b->ptr;
        if (b->seg)
            b->seg->live++;
        b->next = spare, spare = b;
        p->st.cached -= size, p->st.reuses++;
    }
    pthread_mutex_unlock(&mu);
    if (!ptr && cache && size <= SMALL_MAX)
        ptr = carve_new(d, size);
    if (!ptr && !(ptr = backend_alloc(d, size))) {
        cft__pool_trim(d); /* the cache back to the backend, and once more */
        ptr = backend_alloc(d, size);
    }
    if (ptr) {
        pthread_mutex_lock(&mu);
        if ((p = pool_of(d))) {
            p->st.in_use += size;
            if (p->st.in_use > p->st.peak_in_use)
                p->st.peak_in_use = p->st.in_use;
        }
        pthread_mutex_unlock(&mu);
    }
    return ptr;
}

void cft__pool_release(const cft_dev *d, void *ptr, size_t bytes) {
    bool cache = caching();
    size_t size = cache ? size_class(bytes) : bytes;
    pthread_mutex_lock(&mu);
    pool *p = pool_of(d);
    if (p)
        p->st.in_use -= p->st.in_use < size ? p->st.in_use : size;
    segment *sg = NULL;
    for (segment *g = p && cache && size <= SMALL_MAX ? p->segs : NULL; g && !sg; g = g->next)
        if ((char *)ptr >= g->base && (char *)ptr < g->base + SEGMENT)
            sg = g;
    bin *bn = cache && p ? bin_of(p, size, true) : NULL;
    block *b = bn ? spare : NULL;
    if (b)
        spare = b->next;
    else if (bn)
        b = malloc(sizeof *b);
    if (b) {
        b->ptr = ptr, b->seg = sg, b->next = bn->head, bn->head = b;
        p->st.cached += size;
        if (sg)
            sg->live--;
    } else if (p && !sg)
        p->st.releases++;
    pthread_mutex_unlock(&mu);
    if (!b && !sg) /* not cached (off, or no memory for the record): straight back */
        d->b->release(d->b->ctx, d->index, ptr);
    /* (a carved block without a record stays out: its segment is kept) */
}

void cft__pool_trim(const cft_dev *d) {
    pthread_mutex_lock(&mu);
    pool *p = pool_of(d);
    block *all = p ? take_cache(p) : NULL;
    pthread_mutex_unlock(&mu);
    give_back(d, all);
}

void cft__pool_stats(const cft_dev *d, cft_device_memory_stats *out) {
    pthread_mutex_lock(&mu);
    pool *p = pool_of(d);
    *out = p ? p->st : (cft_device_memory_stats){0};
    pthread_mutex_unlock(&mu);
}

/* the bytes handed out since the last collection, and in use after it */
static size_t handed, live_after, gc_seen;
#define PRESSURE_MIN ((size_t)512 << 20)

static size_t in_use_all(void) { /* under mu */
    size_t n = 0;
    for (pool *p = pools; p; p = p->next)
        n += p->st.in_use;
    return n;
}

bool cft__pool_pressure(size_t bytes) {
    size_t gc = cft__gc_count();
    pthread_mutex_lock(&mu);
    if (gc != gc_seen) /* a collection ran meanwhile */
        gc_seen = gc, handed = 0, live_after = in_use_all();
    handed += bytes;
    size_t limit = 2 * live_after > PRESSURE_MIN ? 2 * live_after : PRESSURE_MIN;
    bool due = handed > limit;
    pthread_mutex_unlock(&mu);
    return due;
}

void cft__pool_collected(void) {
    size_t gc = cft__gc_count();
    pthread_mutex_lock(&mu);
    gc_seen = gc, handed = 0, live_after = in_use_all();
    pthread_mutex_unlock(&mu);
}
