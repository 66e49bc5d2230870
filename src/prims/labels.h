/* labels.h: the negative log-likelihood of integer class labels, shared by
 * cft_cross_entropy (prims/nn_ops.c) and the nn losses (nn/losses.c). */
#ifndef CFT_PRIMS_LABELS_H
#define CFT_PRIMS_LABELS_H

#include "cft/cft.h"

/* -log p[label] over the last axis of logp, per example. Known labels
 * outside [0, classes) are an error naming `op`; traced ones, and ones on
 * a device, make their example's value NaN (a one-hot row of zeros gave 0
 * without a word). */
cft_array *cft__label_nll(const char *op, cft_array *logp, cft_array *labels);

#endif
