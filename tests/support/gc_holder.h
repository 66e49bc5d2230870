/* gc_holder.h: pointers kept in a shared library's static data (test_gc_roots). */
#ifndef GC_HOLDER_H
#define GC_HOLDER_H

enum { GC_HOLDER_SLOTS = 4 };

/* Keep p in slot i of the library's static array. */
void gc_holder_set(int i, void *p);
/* The pointer kept in slot i. */
void *gc_holder_get(int i);

#endif
