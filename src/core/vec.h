/* Internal: the attribute for hot loops that want vectorising beyond the
 * library's -O2, cloned for AVX-512, AVX2 and baseline CPUs. The AVX-512
 * clone is x86-64-v4 (F, BW, CD, DQ, VL: Skylake-X, Zen 4 and later), not
 * AVX512F alone: without BW, GCC packs bytes through 256-bit halves and
 * spills (an int8 activation's f32 -> u8 rows: 8.9 us over the digits
 * CNN's 256 x 288 values against 6.7 with v4; the CNN's int8 forward
 * 51 -> 49 us, its f32 one faster too). Under
 * ThreadSanitizer the clones' ifunc resolvers would run instrumented code
 * before the sanitizer starts (a crash at load), so they are left out. */
#ifndef CFT_VEC_H
#define CFT_VEC_H

/* CFT_VEC_FMA: the same with a * b + c fused into one multiply-add (only
 * where that rounding is no promise broken: sums of integers exact in
 * f32, say) */
#if defined(__clang__)
#define CFT_VEC /* clang: no per-function optimize; the build's level applies */
#define CFT_VEC_FMA
#define CFT_CLONES
#elif defined(__SANITIZE_THREAD__)
#define CFT_VEC __attribute__((optimize("O3")))
#define CFT_VEC_FMA __attribute__((optimize("O3", "fp-contract=fast")))
#define CFT_CLONES
#else
#define CFT_VEC __attribute__((optimize("O3"), target_clones("arch=x86-64-v4", "avx2", "default")))
#define CFT_VEC_FMA                                                                                \
    __attribute__((optimize("O3", "fp-contract=fast"),                                             \
                   target_clones("arch=x86-64-v4", "avx2", "default")))
/* the clones alone, for files compiled at -O3 (array/half_cast.c: under the
 * optimize attribute GCC 12 leaves mixed-width loops scalar) */
#define CFT_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif

/* CFT_VEC_NO_DISTRIBUTE: CFT_VEC that also keeps a copy loop a loop (gcc:
 * not a memcpy call per short row). One optimize attribute for both: a
 * second one replaces the first's options, and the function fell back to
 * the command line's -O2, whose cheap vectorizer left a u8 -> f32 loop
 * of unknown length scalar ("no vectype") */
#if defined(__clang__)
#define CFT_VEC_NO_DISTRIBUTE
#elif defined(__SANITIZE_THREAD__)
#define CFT_VEC_NO_DISTRIBUTE __attribute__((optimize("O3", "no-tree-loop-distribute-patterns")))
#else
#define CFT_VEC_NO_DISTRIBUTE                                                                      \
    __attribute__((optimize("O3", "no-tree-loop-distribute-patterns"),                             \
                   target_clones("arch=x86-64-v4", "avx2", "default")))
#endif

#endif
