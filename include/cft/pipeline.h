/** @file
 * cft/pipeline.h: pipeline parallelism (torch.distributed.pipeline's Pipe,
 * GPipe and 1F1B schedules), library cft::dist.
 *
 * A model split by layers into stages, one per rank of a group (rank s runs
 * stage s). Every rank makes its own pipeline with its stage's function:
 *
 *     stage s < last:  f(params, x) -> y             (a cft_tree_fn, nin 1, nout 1)
 *     last stage:      f(params, x, target) -> loss  (nin 2, nout 1: the mean
 *                                                     loss of its micro-batch)
 *
 * cft_pipeline_step splits the batch (given to rank 0; the targets to the
 * last rank) into micro-batches of equal size, sends activations forward
 * and their cotangents back between neighbouring stages, and returns each
 * stage's gradients of the mean loss over the whole batch (the loss itself
 * on the last rank): the same as one process running the whole model. */
#ifndef CFT_PIPELINE_H
#define CFT_PIPELINE_H

/** @addtogroup pipeline
 *  @{ */

#include <stdbool.h>

#include "cft/dist.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The order a stage runs its micro-batches in. */
typedef enum cft_pipe_schedule {
    CFT_PIPE_GPIPE = 0, /**< every forward, then every backward */
    CFT_PIPE_1F1B       /**< one forward one backward: at most (stages - s)
                             micro-batches of activations alive on stage s */
} cft_pipe_schedule;

/** Pipeline options (zero-initialised: one micro-batch, GPipe). */
typedef struct cft_pipeline_options {
    int micro_batches;          /**< the batch's leading dim must divide by it */
    cft_pipe_schedule schedule; /**< GPipe (default) or 1F1B */
    bool recompute;             /**< keep only stage inputs, recompute in backward */
} cft_pipeline_options;

/** This rank's stage of a pipeline (opaque, GC-managed). */
typedef struct cft_pipeline cft_pipeline;
/** This rank's stage of a pipeline over group g (stage = rank in g). stage
 *  is a tree function (cft_tree_fn_new) over params' names, as above. */
cft_pipeline *cft_pipeline_new(cft_dist_group *g, cft_fn *stage, const cft_tree *params,
                               const cft_pipeline_options *opt);
/** One step (collective over the group): x is the batch on rank 0 (NULL
 *  elsewhere), target the targets on the last rank (NULL elsewhere). *grads
 *  gets this stage's gradients (a tree like params), *loss (last rank) the
 *  mean loss. */
cft_status cft_pipeline_step(cft_pipeline *p, const cft_tree *params, cft_array *x,
                             cft_array *target, cft_array **loss, cft_tree **grads);

/** Measurements of the last step on this rank: seconds computing (forward
 *  and backward), waiting for neighbours' messages, and in the whole step,
 *  and the most micro-batches whose activations were kept at once. */
typedef struct cft_pipeline_stats {
    double compute_s; /**< seconds computing */
    double wait_s;    /**< seconds waiting for neighbours */
    double step_s;    /**< seconds in the whole step */
    int peak_live;    /**< most micro-batches' activations kept at once */
} cft_pipeline_stats;
/** This rank's measurements of its last step. */
cft_pipeline_stats cft_pipeline_last_stats(const cft_pipeline *p);

#ifdef __cplusplus
}
#endif

/** @} */

#endif
