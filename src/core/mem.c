/* mem.c: the allocator. All of cft's allocation goes through here and
 * nothing else includes gc.h. Payloads are atomic (never scanned) and, when
 * large, ignore-off-page, so stray integers do not retain big buffers; see
 * DESIGN.md "Memory". With CFT_GC_OFF (sanitizer builds) everything is
 * malloc and is never freed.
 *
 * Threads: the collector must scan every thread that holds library memory.
 * A thread is registered with the GC the first time it allocates through
 * here (and unregistered when it exits), so threads made with plain
 * pthread_create work without any call; cft_thread_register() does it
 * explicitly, for a thread that holds arrays before its first cft call. */
#include "core/mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/core.h"
#include "core/profile.h"

#ifndef CFT_GC_OFF
#include <gc.h>
#endif

#ifndef CFT_GC_OFF
static pthread_once_t gc_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;
static _Thread_local int registered; /* 1: known to the GC (main thread or registered here) */

static void unregister(void *arg) {
    (void)arg;
    if (registered == 2)
        GC_unregister_my_thread();
    registered = 0;
}

/* The libraries cft calls (BLAS, LAPACK, FFTW, oneDNN, libxsmm, MPI and its
 * plug-ins, the C and C++ runtimes, the collector itself) never keep a
 * pointer to cft's collected objects in their static data: they are
 * handed payloads, which the caller keeps reachable (cft__keep). Their data
 * sections are megabytes that every collection would scan as roots, so
 * they are left out; the program's own and every other library's data
 * (a user's plug-in holding arrays in a global) are still scanned. */
static int scan_library(const char *path, void *start, size_t size) {
    (void)start, (void)size;
    static const char *const skip[] = {
        "libc.so",     "libm.so",     "libgcc_s.",  "libstdc++.",   "libgomp.",    "libopenblas",
        "libblas.",    "liblapack",   "libtmglib.", "libgfortran",  "libquadmath", "libfftw3",
        "libdnnl.",    "libxsmm",     "libgc.",     "libcord.",     "libcjson.",   "libmpi",
        "libopen-pal", "libopen-rte", "libpmix.",   "libhwloc.",    "libevent",    "libudev.",
        "libz.",       "ld-linux",    "libnvrtc",   "libltdl.",     "libnl-",      "libibverbs",
        "libuc",       "libfabric.",  "libpsm",     "libmunge.",    "libcap.",     "libgcrypt.",
        "liblzma.",    "libzstd.",    "liblz4.",    "libgpg-error", "libsystemd.", "mca_",
        "libdl.",      "libpthread.", "librt.",     "libcrypto.",   "libssl."};
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    if (!base || !*base)
        return 1;
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (!strncmp(base, skip[i], strlen(skip[i])))
            return 0;
    return 1;
}

/* While the profiler records, each collection is an event ("GC collect",
 * category "gc") on the thread whose allocation ran it: a collection
 * between a program's calls is then time the table accounts for, not a
 * gap. The collector calls this with its lock held and the world running
 * (START before it stops the world, END after it restarts it); collections
 * are serialised by that lock, so one start time suffices. */
static double gc_t0 = -1;
static void on_collection(GC_EventType ev) {
    if (ev == GC_EVENT_START)
        gc_t0 = cft__prof() ? cft__prof_now() : -1;
    else if (ev == GC_EVENT_END && gc_t0 >= 0 && cft__prof()) {
        char args[64];
        snprintf(args, sizeof args, "\"heap_mb\": %.1f", (double)GC_get_heap_size() / 1048576.0);
        cft__prof_event("GC collect", "gc", gc_t0, args);
        gc_t0 = -1;
    }
}

/* static data that holds no pointer to collected memory, left out of the
 * roots (cft__gc_unscanned): kept until the collector starts */
enum { MAX_UNSCANNED = 8 };
static struct {
    void *start;
    size_t bytes;
} unscanned[MAX_UNSCANNED];
static _Atomic int nunscanned;
static _Atomic bool gc_started;

static void gc_start(void) {
    /* One marker thread unless the user asks for more (GC_MARKERS): payloads
     * are never scanned, so the marked heap is small, and parallel markers
     * measured 2-3x slower steps with 2 threads, waiting for cores that
     * OpenMP's team holds (DESIGN.md "Threads"). */
    if (!getenv("GC_MARKERS") && !getenv("GC_NPROCS"))
        GC_set_markers_count(1);
    if (!getenv("CFT_GC_SCAN_ALL_LIBS"))
        GC_register_has_static_roots_callback(scan_library);
    GC_INIT();
    GC_set_on_collection_event(on_collection);
    /* Start with a 32 MiB heap: from Boehm's tiny default, the
     * interpreter's stream of small arrays triggers a collection every
     * ~2 MB, which measured as half of interpreted MAML's time. */
    if (!getenv("GC_INITIAL_HEAP_SIZE") && GC_get_heap_size() < ((size_t)32 << 20))
        GC_expand_hp(((size_t)32 << 20) - GC_get_heap_size());
    GC_allow_register_threads();
    for (int i = 0; i < nunscanned; i++)
        GC_exclude_static_roots(unscanned[i].start,
                                (char *)unscanned[i].start + unscanned[i].bytes);
    gc_started = true;
    pthread_key_create(&thread_key, unregister);
}

/* make sure the calling thread is known to the collector */
static void ensure_thread(void) {
    if (registered)
        return;
    pthread_once(&gc_once, gc_start);
    if (GC_thread_is_registered()) {
        registered = 1; /* the thread that initialised the GC, or made by GC_pthread_create */
        return;
    }
    struct GC_stack_base sb;
    if (GC_get_stack_base(&sb) != GC_SUCCESS) {
        fprintf(stderr, "cft: cannot find this thread's stack to register it with the GC; "
                        "call cft_thread_register() at the top of the thread\n");
        return;
    }
    GC_register_my_thread(&sb);
    registered = 2;
    pthread_setspecific(thread_key, &registered); /* unregister at thread exit */
}
#endif

void cft_init(void) {
#ifndef CFT_GC_OFF
    ensure_thread();
#endif
}

void cft_thread_register(void) {
    cft_init();
}

static void *oom(void) {
    return NULL; /* callers map NULL to the static out-of-memory error */
}

void *cft__new(size_t size) {
#ifdef CFT_GC_OFF
    void *p = calloc(1, size ? size : 1);
#else
    ensure_thread();
    void *p = GC_MALLOC(size ? size : 1);
#endif
    return p ? p : oom();
}

#ifndef CFT_GC_OFF
/* Collect more eagerly once the heap is large: payloads are never scanned,
 * so a collection costs little, while Boehm's default (collect after
 * allocating a third of the heap) lets a loop that makes 100 MB of results
 * per call grow the heap to nearly twice what is live. Small heaps keep the
 * default, where collections would be a visible share of short calls. */
static void tune_heap(void) {
    static _Atomic int divisor = 3;
    int want = GC_get_heap_size() > ((size_t)64 << 20) ? 10 : 3;
    if (want != divisor && !getenv("GC_FREE_SPACE_DIVISOR")) {
        GC_set_free_space_divisor((GC_word)want);
        divisor = want;
    }
}
#endif

void *cft__new_data(size_t nbytes) {
    if (nbytes == 0)
        nbytes = 1;
#ifdef CFT_GC_OFF
    void *p = malloc(nbytes);
#else
    ensure_thread();
    if (nbytes >= ((size_t)1 << 20))
        tune_heap();
    void *p = nbytes >= 65536 ? GC_MALLOC_ATOMIC_IGNORE_OFF_PAGE(nbytes) : GC_MALLOC_ATOMIC(nbytes);
#endif
    return p ? p : oom();
}

void *cft__realloc(void *p, size_t size) {
#ifdef CFT_GC_OFF
    return realloc(p, size);
#else
    ensure_thread();
    return GC_REALLOC(p, size);
#endif
}

char *cft__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = cft__new(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void cft__keep(const void *p) {
#ifndef CFT_GC_OFF
    GC_reachable_here(p);
#else
    (void)p;
#endif
}

void cft__on_collect(void *obj, void (*fn)(void *obj, void *arg), void *arg) {
#ifndef CFT_GC_OFF
    GC_register_finalizer_no_order(obj, fn, arg, NULL, NULL);
#else
    (void)obj, (void)fn, (void)arg;
#endif
}

void cft__gc_unscanned(void *start, size_t bytes) {
#ifndef CFT_GC_OFF
    if (gc_started) {
        GC_exclude_static_roots(start, (char *)start + bytes);
        return;
    }
    int i = nunscanned++;
    if (i < MAX_UNSCANNED)
        unscanned[i].start = start, unscanned[i].bytes = bytes;
    else
        nunscanned = MAX_UNSCANNED; /* more: scanned, as before */
#else
    (void)start, (void)bytes;
#endif
}

void cft__gc_reserve(size_t bytes) {
#ifndef CFT_GC_OFF
    ensure_thread();
    if (!getenv("GC_INITIAL_HEAP_SIZE") && GC_get_heap_size() < bytes)
        GC_expand_hp(bytes - GC_get_heap_size());
#else
    (void)bytes;
#endif
}

void cft__run_collected(void) {
#ifndef CFT_GC_OFF
    if (GC_should_invoke_finalizers())
        GC_invoke_finalizers();
#endif
}

void cft__collect(void) {
#ifndef CFT_GC_OFF
    GC_gcollect();
#endif
    cft__run_collected();
}

void *cft_alloc(size_t size) {
    return cft__new(size);
}

size_t cft__gc_count(void) {
#ifndef CFT_GC_OFF
    return (size_t)GC_get_gc_no();
#else
    return 0;
#endif
}

void *cft__scratch(int slot, size_t bytes, size_t max) {
    static _Thread_local void *buf[CFT_NSCRATCH];
    static _Thread_local size_t cap[CFT_NSCRATCH];
    if (bytes > max)
        return cft__new_data(bytes);
    if (bytes > cap[slot]) {
        void *p = realloc(buf[slot], bytes);
        if (!p)
            return NULL;
        buf[slot] = p, cap[slot] = bytes;
    }
    return buf[slot];
}

size_t cft__gc_heap_bytes(void) {
#ifdef CFT_GC_OFF
    return 0;
#else
    return GC_get_heap_size();
#endif
}
