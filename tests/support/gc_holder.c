/* gc_holder.c: a tiny shared library for test_gc_roots that keeps pointers
 * in its own static data, as a user's plug-in keeping arrays in a global
 * would. It knows nothing of cft. */
#include "gc_holder.h"

static void *held[GC_HOLDER_SLOTS];

void gc_holder_set(int i, void *p) {
    held[i] = p;
}

void *gc_holder_get(int i) {
    return held[i];
}
