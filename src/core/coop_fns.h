/* coop_fns.h: how the threads of a CUDA kernel share a reduction. A
 * kernel's reduction keeps nslot output elements and folds nred input
 * elements into each. One thread per output is fine while an output's
 * elements are few; a column sum such as a bias gradient ([1024, 128]
 * summed over its rows: 128 outputs of 1,024 elements) would leave the
 * device with 128 threads walking 1,024 dependent loads each. So the
 * kernel's blocks of CFT_COOP_THREADS (256) threads are tiles of
 * nx = 256 / ny outputs by ny shares: thread t of a tile takes output
 * t % nx (neighbouring threads, neighbouring outputs: a column sum's
 * loads are coalesced) and that output's elements t / nx, t / nx + ny,
 * ...; the ny partial sums are then folded in share order. ny is the
 * smallest power of two that leaves each thread at most 32 elements, up
 * to 256 (one block per output, each thread a strided share: a sum of
 * 2^29 elements on one thread never finished); ny = 1 is a thread per
 * output. The shares depend on nred alone, never on the launch,
 * so a result is the same on every run and every grid. The launchers
 * (lower/jit_device.c, prims/conv_device.c) and the kernels (emit_cuda.c
 * and conv_device.c stringify the body into their sources) use this one
 * function, and cft_coop_threads for the launch. */
#ifndef CFT_COOP_FNS_H
#define CFT_COOP_FNS_H
#ifndef CFT_COOP_EMIT
#include <stdint.h>
#define CFT_COOP_EMIT(...) __VA_ARGS__
#endif

/* clang-format off */
CFT_COOP_EMIT(
static inline int64_t cft_coop_shares(int64_t nred) {
    int64_t ny = 1;
    while (ny < 256 && nred > 32 * ny)
        ny *= 2;
    return ny;
}
/* the threads a launch asks for: every output's shares, in whole tiles */
static inline int64_t cft_coop_threads(int64_t nslot, int64_t nred) {
    int64_t ny = cft_coop_shares(nred), nx = 256 / ny;
    return ny > 1 ? (nslot + nx - 1) / nx * 256 : nslot;
}
)
/* clang-format on */
#endif
