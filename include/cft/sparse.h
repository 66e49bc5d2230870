/** @file
 * cft/sparse.h: 2:4 semi-structured sparsity and pruning.
 *
 * A 2:4 weight keeps at most two of every four consecutive entries along
 * its last dim (the reduction dim of x W^T, torch's
 * to_sparse_semi_structured layout for a linear layer's weight [out, in]).
 * cft stores it compressed: the kept values [..., N, K/2] and their
 * positions, two 2-bit indices per group of four, packed eight groups to
 * an i32 word ([..., N, ceil(K/32)]). Compressing is differentiable in the
 * values with the mask fixed, so a pruned layer fine-tunes with cft_grad:
 *
 *     cft_sparse24 s = cft_sparse24_compress(w);     // w [512, 256] f32
 *     cft_array *y = cft_sparse24_linear(x, s);      // x [B, 256] -> [B, 512]
 *     // in a loss: grad with respect to s.values keeps the zeros zero
 *
 * Every operation here is made of primitives with all their rules (jvp,
 * vjp, vmap, jit, export). The product's CPU kernel skips the zeros (half
 * the multiply-adds of the dense product); whether that beats a dense
 * BLAS GEMM on a CPU depends on the CPU (bench/lowbits.c measures it: the
 * format pays on GPUs with sparse tensor cores). K must be a multiple of 4
 * (CFT_E_SHAPE names the call and the dim otherwise).
 *
 * Pruning (torch.nn.utils.prune) is functional: a pruning method returns a
 * mask (1 keeps, 0 prunes) of the weight's shape and dtype, computed from
 * concrete values; cft_prune_apply multiplies parameters by their masks
 * inside a loss (the parametrization: gradients of pruned entries are
 * zero), and cft_prune_remove makes one parameter's pruning permanent.
 * Masks combine as torch's PruningContainer does: a new method prunes
 * `amount` of the entries the previous mask still keeps.
 */
#ifndef CFT_SPARSE_H
#define CFT_SPARSE_H

/** @addtogroup lowbits
 *  @{ */

#include "core.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A compressed 2:4 weight: kept values and their packed positions. */
typedef struct cft_sparse24 {
    cft_array *values; /**< [..., N, K/2], the weight's float dtype */
    cft_array *meta;   /**< [..., N, ceil(K/32)] i32: two 2-bit positions per group of 4 */
} cft_sparse24;

/** The positions of the two largest magnitudes in every group of four
 *  along w's last dim (ties: the lower index), packed as cft_sparse24's
 *  meta. No derivative. */
cft_array *cft_sparse24_meta(cft_array *w);
/** w compressed to 2:4: its two largest magnitudes per group of four and
 *  their positions. The values are differentiable in w (the kept entries'
 *  derivatives; the choice of entries is fixed). On error both fields are
 *  the error. */
cft_sparse24 cft_sparse24_compress(cft_array *w);
/** The dense weight of s (zeros where pruned). */
cft_array *cft_sparse24_to_dense(cft_sparse24 s);
/** w pruned to 2:4 in place of a mask: cft_sparse24_to_dense of
 *  cft_sparse24_compress(w). */
cft_array *cft_prune_24(cft_array *w);
/** x [..., K] times the 2:4 weight's transpose: [..., N] (F.linear without
 *  bias), by a kernel that skips the pruned entries; dtypes promote. */
cft_array *cft_sparse24_linear(cft_array *x, cft_sparse24 s);

/** A mask pruning the `amount` smallest-magnitude entries of w that prev
 *  keeps (prev NULL: all of them). amount in [0, 1) is a fraction of those
 *  entries (rounded as torch rounds), amount >= 1 a count (an integer). The
 *  mask has w's shape and dtype. CFT_E_ARG names the call for an amount
 *  that is negative, not an integer above 1, or more than the entries. */
cft_array *cft_prune_l1_unstructured(cft_array *w, double amount, cft_array *prev);
/** As cft_prune_l1_unstructured, the entries chosen at random (uniform
 *  scores drawn from key). */
cft_array *cft_prune_random_unstructured(cft_array *key, cft_array *w, double amount,
                                         cft_array *prev);
/** A mask pruning whole slices of w along `dim` (negative counts from the
 *  end): the `amount` slices of smallest L-n norm (n = 1, 2, ... or
 *  INFINITY), the norm taken over every other dim of w times prev. */
cft_array *cft_prune_ln_structured(cft_array *w, double amount, double n, int dim, cft_array *prev);
/** Global magnitude pruning (prune.global_unstructured with L1): the
 *  `amount` smallest magnitudes among all the named leaves of params
 *  together. prev_masks (NULL, or a tree with some of those names) holds
 *  earlier masks. Returns a tree of masks, one per name. */
cft_tree *cft_prune_global_unstructured(const cft_tree *params, const char *const *names, int n,
                                        double amount, const cft_tree *prev_masks);
/** params with every leaf that masks names multiplied by its mask (the
 *  pruning parametrization: call it inside the loss). */
cft_tree *cft_prune_apply(const cft_tree *params, const cft_tree *masks);
/** prune.remove: params with `name` replaced by its masked value for good;
 *  *masks_left (may be NULL) gets masks without `name`. */
cft_tree *cft_prune_remove(const cft_tree *params, const cft_tree *masks, const char *name,
                           cft_tree **masks_left);

#ifdef __cplusplus
}
#endif

/** @} */

#endif
