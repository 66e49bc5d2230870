/* Internal: the attribute for hot loops that want vectorising beyond the
 * library's -O2, cloned for AVX-512, AVX2 and baseline CPUs. Under
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
#define CFT_VEC __attribute__((optimize("O3"), target_clones("avx512f", "avx2", "default")))
#define CFT_VEC_FMA                                                                                \
    __attribute__((optimize("O3", "fp-contract=fast"), target_clones("avx512f", "avx2", "default")))
/* the clones alone, for files compiled at -O3 (array/half_cast.c: under the
 * optimize attribute GCC 12 leaves mixed-width loops scalar) */
#define CFT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

/* gcc: keep a copy loop a loop (not a memcpy call per row) */
#if defined(__clang__)
#define CFT_NO_DISTRIBUTE
#else
#define CFT_NO_DISTRIBUTE __attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif

#endif
