/** @file
 * cft/profile.h: where the time goes, as torch.profiler shows it.
 *
 *     cft_profile_start();
 *     for (int i = 0; i < 10; i++) cft_fn_call(step, in, out);
 *     cft_profile_stop("trace.json");      // open in Perfetto or chrome://tracing
 *     cft_profile_table(stdout, 20);      // key_averages().table()
 *
 * While recording, every cft_fn_call (named by cft_fn_named or the
 * function's callback), every step of a jitted plan (a fused kernel named
 * by its primitives, a GEMM, an FFT, a LAPACK call... with its input
 * avals), every eager primitive outside a jitted plan, each trace and
 * kernel compile, each blocking collective, each cft_rpc_sync and each
 * garbage collection ("GC collect") is an event with its start and
 * duration on its thread; what a device's backend is asked to do (each
 * kernel, primitive, graph replay, copy, allocation and wait: "device:
 * kernel", "device: copy to host", ...) is an event on that device's own
 * track ("cuda:0"), and while recording the profiler waits for the device
 * after each kernel, primitive and replay, so their events span their
 * device time (the device's work is serialised meanwhile); the GC heap and the
 * jit's arena sizes are counters. Off (the default), the cost is one
 * predictable branch per call and per step.
 */
#ifndef CFT_PROFILE_H
#define CFT_PROFILE_H

/** @addtogroup profiling
 *  @{ */

#include <stdio.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Start recording, dropping any earlier recording. */
cft_status cft_profile_start(void);
/** Stop recording; with a path, write the events as Chrome trace JSON
 *  ({"traceEvents": [...]}, times in microseconds) to a temporary name
 *  and rename it into place. The recording stays for cft_profile_table
 *  until the next start. */
cft_status cft_profile_stop(const char *path);
/** The recording aggregated by event name (torch.profiler's
 *  key_averages().table()): calls, total and mean time, and share of the
 *  recorded wall time, largest total first, at most max_rows rows (<= 0:
 *  all); then the recorded wall time and the total of the outermost
 *  events of each thread. */
void cft_profile_table(FILE *f, int max_rows);

#ifdef __cplusplus
}
#endif

/** @} */

#endif
