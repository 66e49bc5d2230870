/** @file
 * cft/timer.h: measuring C calls the way torch.utils.benchmark.Timer does.
 *
 *     cft_measurement m;
 *     cft_timer_blocked_autorange(step, &job, 0.2, &m);   // warm-up, then blocks
 *     m.label = "per-sample grads"; m.sub_label = "B=256"; m.description = "jit";
 *     cft_measurement_print(&m, stdout);
 *     cft_timer_compare(ms, n, stdout);                   // several side by side
 *
 * A measurement is a number of blocks ("runs"), each a fixed number of
 * calls, timed with CLOCK_MONOTONIC; its statistics are over the per-call
 * time of each block (median, interquartile range, mean, min, max), as
 * torch's Measurement. The thread count (cft_get_num_threads) is recorded.
 */
#ifndef CFT_TIMER_H
#define CFT_TIMER_H

/** @addtogroup profiling
 *  @{ */

#include <stdint.h>
#include <stdio.h>

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The work to time: called with the same argument every time. */
typedef void (*cft_timer_fn)(void *arg);

/** A measurement (all times in seconds per call). label / sub_label /
 *  description are the caller's, for printing and cft_timer_compare
 *  (rows: label + sub_label, columns: description). */
typedef struct cft_measurement {
    const char *label;       /**< the row's name */
    const char *sub_label;   /**< the row's second name */
    const char *description; /**< the column's name */
    int64_t runs;            /**< timed blocks */
    int64_t number;          /**< calls per block */
    double median;           /**< median per-call time of the blocks */
    double iqr;              /**< q75 - q25 */
    double mean;             /**< mean per-call time */
    double min;              /**< fastest block's per-call time */
    double max;              /**< slowest block's per-call time */
    double q25;              /**< the lower quartile */
    double q75;              /**< the upper quartile */
    double total;            /**< seconds spent in the timed blocks */
    int threads;             /**< cft_get_num_threads() when measured */
    double *times;           /**< per-call time of each block (runs values; cft_alloc'd) */
} cft_measurement;

/** torch's blocked_autorange: one warm-up call, then the number of calls per
 *  block is doubled until a block takes at least 10 us (the clock's
 *  resolution times 1000, as torch), then blocks run until min_run_time
 *  seconds (<= 0: 0.2) have been spent in them (at least 3 blocks). */
cft_status cft_timer_blocked_autorange(cft_timer_fn fn, void *arg, double min_run_time,
                                       cft_measurement *out);
/** torch's timeit(number) repeated: `runs` blocks of `number` calls each,
 *  after one warm-up call. CFT_E_ARG for number or runs below 1, number
 *  above 1e9, runs above 1e8 or number * runs above 1e10. */
cft_status cft_timer_timeit(cft_timer_fn fn, void *arg, int64_t number, int64_t runs,
                            cft_measurement *out);
/** One measurement as torch prints it: labels, median and IQR with units,
 *  the number of measurements, runs and calls per run, threads. */
void cft_measurement_print(const cft_measurement *m, FILE *f);
/** torch.utils.benchmark.Compare: a table of medians, one row per
 *  (label, sub_label) in order of first appearance, one column per
 *  description, each cell in the table's common unit, with the
 *  measurement's IQR as a percentage when it is over 2% of the median. */
void cft_timer_compare(const cft_measurement *ms, int n, FILE *f);

#ifdef __cplusplus
}
#endif

/** @} */

#endif
