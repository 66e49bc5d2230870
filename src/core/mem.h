/* Internal allocation API: the only way cft allocates. Everything is GC
 * memory (Boehm GC) unless built with CFT_GC_OFF, where it maps to malloc
 * and leaks by design (sanitizer builds). */
#ifndef CFT_MEM_H
#define CFT_MEM_H

#include <stddef.h>

/* Scanned, zeroed memory: headers, IR, closures. */
void *cft__new(size_t size);
/* Unscanned, uninitialised memory for array payloads. */
void *cft__new_data(size_t nbytes);
/* Scratch memory for one kernel call: a per-thread malloc buffer per slot,
 * grown as needed and kept, since fresh blocks of several MB cost more in
 * page faults and cold cache than the work done in them. Requests over
 * `max` bytes get a fresh GC block instead, so one huge call does not pin
 * memory. Valid until the next call with the same slot on the thread; it
 * must hold no pointers to GC memory. NULL when out of memory. */
enum {
    CFT_SCRATCH_CONV,
    CFT_SCRATCH_FFT,
    CFT_SCRATCH_GEMM,
    CFT_SCRATCH_QIN,  /* the int8 products' quantized rows and sums (qlinear, qstatic, qconv.c) */
    CFT_SCRATCH_QW,   /* qkernels.c: the weight's integers as floats */
    CFT_SCRATCH_QBLK, /* qkernels.c: a block of rows as floats, and its sums */
    CFT_SCRATCH_S24,  /* sparse24.c: a weight's magnitudes */
    CFT_SCRATCH_QOBS, /* quant/observe.c: an observed operand as doubles */
    CFT_SCRATCH_HALF, /* dot.c: a half product's operands and result widened to f32 */
    CFT_SCRATCH_HACC, /* lower/plan_ops.c: a half reduction's f32 accumulator */
    CFT_SCRATCH_QY,   /* qconv_act.c: the bias laid out per row; a packed output's f32 values */
    CFT_NSCRATCH
};
void *cft__scratch(int slot, size_t bytes, size_t max);
/* A GC copy of a string. */
char *cft__strdup(const char *s);
/* Grow a scanned array (realloc semantics). */
void *cft__realloc(void *p, size_t size);
/* Keep `p` reachable up to this point (after handing raw pointers into its
 * payload to foreign code). */
void cft__keep(const void *p);
/* Call fn(obj, arg) once obj (the start of a cft__new block) is found
 * unreachable, from whichever thread is collecting: fn must only queue
 * work (DESIGN.md "Memory"). Nothing happens without the GC. */
void cft__on_collect(void *obj, void (*fn)(void *obj, void *arg), void *arg);
/* Run the cft__on_collect callbacks of objects found unreachable so far. */
void cft__run_collected(void);
/* A full collection now, then the callbacks (for memory the GC does not
 * see running out: a device's). */
void cft__collect(void);
/* [start, start + bytes) is static data that holds no pointer to
 * collected memory: every collection leaves it out of the roots it scans
 * (conservatively, a word at a time: a megabyte of names cost half a
 * millisecond a collection). For a library's constructors, before the
 * collector starts (applied when it does), or after. Up to 8 before. */
void cft__gc_unscanned(void *start, size_t bytes);
/* Grow the collected heap to at least `bytes` now (unless the user chose
 * GC_INITIAL_HEAP_SIZE): fewer, later collections, for processes where a
 * pause costs more than the memory (ranks of a distributed job, where one
 * rank's pause stalls the others). */
void cft__gc_reserve(size_t bytes);
/* The GC heap's size in bytes (0 without the GC). */
size_t cft__gc_heap_bytes(void);
/* Number of collections so far (for tests). */
size_t cft__gc_count(void);

#define CFT_NEW(T) ((T *)cft__new(sizeof(T)))
#define CFT_NEWN(T, n) ((T *)cft__new(sizeof(T) * (size_t)(n)))

#endif
