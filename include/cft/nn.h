/** @file
 * cft/nn.h: neural-network building blocks, pure and functional.
 *
 * Nothing here holds state: parameters, running statistics, optimizer
 * moments and random keys are values passed in and returned, as in
 * functorch's functional_call or JAX's Equinox. So every function below is
 * written with public cft ops and works unchanged under every transform
 * (grad, vmap(grad), jacrev, ...).
 *
 *  - Parameter trees (cft_tree): ordered maps from dotted names
 *    ("layers.0.weight", as in a PyTorch state_dict) to arrays. Immutable:
 *    "set" returns a new tree. Flatten to / unflatten from the flat array
 *    lists that transforms take; map over leaves; stack K trees along a new
 *    leading axis (functorch's stack_module_state) for ensembles.
 *  - Layers as functions of arrays (cft_linear, cft_layer_norm, ...) and
 *    modules (cft_module): a description plus init(key) -> params (+ state)
 *    and apply(params, state, x, train, key) -> y (+ new state).
 *  - Activations, losses, parametrizations (weight_norm, orthogonal,
 *    spectral_norm), optimizers over trees (SGD, Adam, AdamW, RMSprop),
 *    learning-rate schedules, and safetensors files.
 *
 * A training step:
 *
 *     cft_module *mlp = cft_nn_mlp((int64_t[]){64, 128, 10}, 3, CFT_ACT_RELU, 0);
 *     cft_tree *p = cft_module_init(mlp, cft_random_key(0), NULL);
 *     cft_optim opt = cft_adam(1e-3);
 *     cft_tree *s = cft_optim_init(&opt, p);
 *     // loss: a cft_tree_fn over (params..., x, y); g = cft_grad(loss, argnums 0..n-1)
 *     cft_array *flat[n]; cft_fn_call(g, inputs, flat);
 *     cft_tree *grads = cft_tree_unflatten(p, flat);
 *     cft_optim_update(&opt, grads, s, p, cft_scalar(t, CFT_F32), NULL, &p, &s);
 *
 * Errors follow core.h: calls that return arrays return error arrays; calls
 * that return trees return *error trees* (cft_tree_failed), which every tree
 * call passes through unchanged; a tree set with an error array becomes an
 * error tree. Nothing aborts, nothing returns NULL, nothing is freed by hand.
 */
#ifndef CFT_NN_H
#define CFT_NN_H

/** @addtogroup nn
 *  @{ */

#include <stdio.h>

#include "core.h"
#include "fn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * Parameter trees
 * ====================================================================== */

/** An immutable ordered map from names to arrays (or an error). Opaque, GC-managed. */
typedef struct cft_tree cft_tree;

/** The empty tree. */
cft_tree *cft_tree_new(void);
/** A tree of n (name, array) pairs in that order; names must be distinct. */
cft_tree *cft_tree_from(const char *const *names, cft_array *const *xs, int n);
/** A new tree with `name` bound to x: replaces an existing entry in place,
 *  else appends. An error array x gives an error tree. */
cft_tree *cft_tree_set(const cft_tree *t, const char *name, cft_array *x);
/** The array bound to `name`; an error array naming it if absent. */
cft_array *cft_tree_get(const cft_tree *t, const char *name);
/** True if `name` is bound in t. */
bool cft_tree_has(const cft_tree *t, const char *name);
/** A new tree without `name` (unchanged if absent). */
cft_tree *cft_tree_remove(const cft_tree *t, const char *name);
/** Number of entries (0 for an error tree). */
int cft_tree_size(const cft_tree *t);
/** @{ */
/** Name / array of entry i in order (NULL / an error array if out of range). */
const char *cft_tree_name(const cft_tree *t, int i);
cft_array *cft_tree_at(const cft_tree *t, int i);
/** @} */
/** True for an error tree (or NULL). */
bool cft_tree_failed(const cft_tree *t);
/** The error array of an error tree (a plain error array for NULL); NULL
 *  for a good tree. Its message names the failing call. */
cft_array *cft_tree_error(const cft_tree *t);
/** The error tree carrying error array e (for callbacks that fail). */
cft_tree *cft_tree_fail(cft_array *e);

/** The entries named "prefix.rest", renamed "rest" (a submodule's params);
 *  prefix "" is the whole tree, NULL an error tree. */
cft_tree *cft_tree_subtree(const cft_tree *t, const char *prefix);
/** t with every entry of sub added as "prefix.name" (prefix NULL or "":
 *  as is); entries already in t are replaced. */
cft_tree *cft_tree_merge(const cft_tree *t, const char *prefix, const cft_tree *sub);
/** Write the arrays in order to out[0 .. cft_tree_size(t)). */
cft_status cft_tree_flatten(const cft_tree *t, cft_array **out);
/** A tree with like's names, in like's order, bound to leaves[i]. */
cft_tree *cft_tree_unflatten(const cft_tree *like, cft_array *const *leaves);

/** Callbacks of the tree maps: return the new leaf (an error array fails the map). */
typedef cft_array *(*cft_tree_map_cb)(void *env, const char *name, cft_array *x);
/** Callback of cft_tree_zip: a and b are the leaves of one name. */
typedef cft_array *(*cft_tree_zip_cb)(void *env, const char *name, cft_array *a, cft_array *b);
/** Callback of cft_tree_map_n: xs[n] are the n trees' leaves of one name. */
typedef cft_array *(*cft_tree_map_n_cb)(void *env, const char *name, cft_array *const *xs, int n);
/** f applied to every leaf; same names. */
cft_tree *cft_tree_map(const cft_tree *t, cft_tree_map_cb f, void *env);
/** f(a[name], b[name]) for every name of a, in a's order; b must have
 *  every name of a (extra names in b are ignored). */
cft_tree *cft_tree_zip_map(const cft_tree *a, const cft_tree *b, cft_tree_zip_cb f, void *env);
/** f over the leaves of n trees matched by name (trees[0]'s names and order). */
cft_tree *cft_tree_map_n(const cft_tree *const *trees, int n, cft_tree_map_n_cb f, void *env);
/** Every float leaf converted to the float dtype `dt`; other leaves kept. */
cft_tree *cft_tree_astype(const cft_tree *t, cft_dtype dt);

/** K trees with the same names and shapes stacked into one tree whose leaves
 *  have a new leading axis of size K (functorch's stack_module_state): vmap
 *  over it with in_axes 0 runs an ensemble. */
cft_tree *cft_tree_stack(const cft_tree *const *trees, int k);
/** Entry i along the leading axis of every leaf. */
cft_tree *cft_tree_index(const cft_tree *t, int64_t i);
/** The inverse of cft_tree_stack: out[0 .. k) where k must equal every
 *  leaf's leading dim. */
cft_status cft_tree_unstack(const cft_tree *t, int k, cft_tree **out);
/** Print "name: f32[3,4]" lines (or the error) to f. */
void cft_tree_print(const cft_tree *t, FILE *f);

/** Callback of a tree function: the parameters arrive as a tree. */
typedef cft_status (*cft_tree_fn_cb)(void *env, const cft_tree *params, int nin,
                                     cft_array *const *in, int nout, cft_array **out);
/** functional_call: a cft_fn whose inputs are like's leaves (flattened, in
 *  order) followed by `nin` more arrays; cb receives the leaves rebuilt into a
 *  tree with like's names. Gradients with argnums 0 .. cft_tree_size(like)-1
 *  come back flat: cft_tree_unflatten(like, grads). */
cft_fn *cft_tree_fn_new(cft_tree_fn_cb cb, void *env, const cft_tree *like, int nin, int nout);
/** grad over every leaf of a tree function's tree (like: the tree it was
 *  made with): the argnums are built for you. Outputs: the leaves'
 *  gradients in order (cft_tree_call gives them back as a tree), then with
 *  has_aux the auxiliary outputs (as cft_grad_with_aux). */
cft_fn *cft_tree_grad(cft_fn *tree_fn, const cft_tree *like, bool has_aux);
/** value_and_grad over every leaf: outputs (value, aux..., gradients...),
 *  as cft_value_and_grad. */
cft_fn *cft_tree_value_and_grad(cft_fn *tree_fn, const cft_tree *like, bool has_aux);
/** vmap with one axis for the whole tree: every leaf batched along
 *  tree_axis (CFT_NOT_BATCHED: shared by all, as per-sample gradients want;
 *  0 over stacked models, as an ensemble wants), the inputs after the tree
 *  along rest_axes (NULL: 0 for all); out_axes as cft_vmap. */
cft_fn *cft_tree_vmap(cft_fn *f, const cft_tree *like, int tree_axis, const int *rest_axes,
                      const int *out_axes);
/** cft_tree_vmap with an axis per subtree, as JAX's in_axes given as a
 *  prefix of the parameter tree. Nested trees are dotted names
 *  ("encoder.layer0.w", cft_tree_merge): rule k gives axes[k] to every leaf
 *  in the subtree prefixes[k] (the leaf of that name, or those named
 *  "prefixes[k].…"); the longest matching prefix wins; other leaves get
 *  default_axis. Example, a shared encoder and an ensemble of heads whose
 *  biases are shared: prefixes {"encoder", "head", "head.b"}, axes
 *  {CFT_NOT_BATCHED, 0, CFT_NOT_BATCHED}. A prefix that names no leaf is an
 *  error (a misspelt rule never silently does nothing). */
cft_fn *cft_tree_vmap_prefix(cft_fn *f, const cft_tree *like, int nrules,
                             const char *const *prefixes, const int *axes, int default_axis,
                             const int *rest_axes, const int *out_axes);
/** Call f with a tree's leaves and then the arrays in rest; f's first
 *  leaves-of-out_like outputs come back as a tree named like out_like (in
 *  *out_tree; NULL out_like: none), the others in out_rest (may be NULL).
 *  For gradients: cft_tree_call(cft_tree_grad(f, p, false), p, batch, p,
 *  &grads, NULL). */
cft_status cft_tree_call(cft_fn *f, const cft_tree *params, cft_array *const *rest,
                         const cft_tree *out_like, cft_tree **out_tree, cft_array **out_rest);

/* ======================================================================
 * Activations (elementwise, float)
 * ====================================================================== */

/** Activation kinds, for cft_activation and cft_nn_activation. */
typedef enum cft_activation_kind {
    CFT_ACT_IDENTITY = 0,
    CFT_ACT_RELU,
    CFT_ACT_GELU,      /**< exact, with erf */
    CFT_ACT_GELU_TANH, /**< tanh approximation */
    CFT_ACT_SILU,
    CFT_ACT_TANH,
    CFT_ACT_SIGMOID,
    CFT_ACT_SOFTPLUS
} cft_activation_kind;

/** x * sigmoid(x) (SiLU / swish). */
cft_array *cft_silu(cft_array *x);
/** 1 / (1 + e^-x); same as cft_logistic. */
cft_array *cft_sigmoid(cft_array *x);
/** log(1 + e^x) computed stably as max(x, 0) + log1p(e^-|x|) (no overflow;
 *  derivative sigmoid(x), 0.5 at 0). */
cft_array *cft_softplus(cft_array *x);
/** The activation `kind` applied to x (relu and gelu are cft_relu, cft_gelu). */
cft_array *cft_activation(cft_array *x, cft_activation_kind kind);

/* ======================================================================
 * Layers as functions of arrays (torch.nn.functional)
 * ====================================================================== */

/** x [..., in] @ weight^T + bias: weight [out, in] (PyTorch layout), bias
 *  [out] or NULL. */
cft_array *cft_linear(cft_array *x, cft_array *weight, cft_array *bias);
/** Layer normalisation over the last `nnorm` dims of x: (x - mean) /
 *  sqrt(var + eps) (biased variance), then * weight + bias (each of the
 *  normalised shape, or NULL). */
cft_array *cft_layer_norm(cft_array *x, int nnorm, cft_array *weight, cft_array *bias, double eps);
/** Batch normalisation of x [N, C, ...] over every axis but 1 (channels).
 *  train: normalise with the batch mean and biased variance, and return the
 *  running statistics updated as (1-momentum)*running + momentum*batch (the
 *  variance unbiased, without gradient) in *new_mean / *new_var. Eval:
 *  normalise with running_mean / running_var, which are returned unchanged.
 *  weight, bias [C] or NULL; new_mean / new_var may be NULL. */
cft_array *cft_batch_norm(cft_array *x, cft_array *running_mean, cft_array *running_var,
                          cft_array *weight, cft_array *bias, bool train, double momentum,
                          double eps, cft_array **new_mean, cft_array **new_var);
/** Inverted dropout: in training, each element is zeroed with probability p
 *  and the rest scaled by 1/(1-p), with a mask drawn from `key` (explicit;
 *  under vmap an unbatched key gives every example the same mask, a batch of
 *  keys gives each its own). Not training, or p == 0: x. */
cft_array *cft_dropout(cft_array *x, double p, bool train, cft_array *key);
/** Rows of table [num, dim] for integer ids [...]: [..., dim]. One gather
 *  (cft_gather, CFT_INDEX_FILL_OR_DROP): an id outside [0, num) gives a
 *  zero row (no error: values are not visible under tracing); the gradient
 *  is a scatter_add of the rows' cotangents. */
cft_array *cft_embedding(cft_array *ids, cft_array *table);
/** torch.flatten: dims start_dim .. end_dim (inclusive; negative count from
 *  the end) of x merged into one; a 0-d x gives [1]. A view when x is
 *  contiguous. (Convolution and pooling are ops: cft_conv2d, cft_max_pool2d,
 *  cft_avg_pool2d in ops.h.) */
cft_array *cft_flatten(cft_array *x, int start_dim, int end_dim);
/** softmax(q k^T / sqrt(E) + mask) v for q [..., L, E], k [..., S, E],
 *  v [..., S, Ev] -> [..., L, Ev]; batch dims broadcast. mask (NULL for none)
 *  broadcasts to [..., L, S]: bool, true = may attend (PyTorch's
 *  scaled_dot_product_attention convention, the opposite of
 *  nn.MultiheadAttention's bool masks), or float, added to the scores.
 *  causal: position i attends to j <= i (combined with mask if both given).
 *  A row with nothing to attend to gives zeros (not NaN) and zero gradients.
 *  No attention dropout. */
cft_array *cft_scaled_dot_product_attention(cft_array *q, cft_array *k, cft_array *v,
                                            cft_array *mask, bool causal);

/* ======================================================================
 * Losses
 * ====================================================================== */

/** How a loss reduces its per-element values (PyTorch's `reduction`). */
typedef enum cft_reduction { CFT_REDUCE_MEAN = 0, CFT_REDUCE_SUM, CFT_REDUCE_NONE } cft_reduction;

/** Softmax cross-entropy of logits [..., C] (classes last) with integer labels
 *  [...]; label_smoothing e in [0, 1] mixes the target with the uniform
 *  distribution: (1-e) * nll + e * mean_c(-log_softmax). */
cft_array *cft_loss_cross_entropy(cft_array *logits, cft_array *labels, double label_smoothing,
                                  cft_reduction red);
/** Negative log-likelihood -logp[label] of log-probabilities [..., C];
 *  labels out of range as cft_cross_entropy. */
cft_array *cft_loss_nll(cft_array *logp, cft_array *labels, cft_reduction red);
/** (pred - target)^2 (broadcasting). */
cft_array *cft_loss_mse(cft_array *pred, cft_array *target, cft_reduction red);
/** |pred - target|. */
cft_array *cft_loss_l1(cft_array *pred, cft_array *target, cft_reduction red);
/** Huber: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); d = pred - target. */
cft_array *cft_loss_huber(cft_array *pred, cft_array *target, double delta, cft_reduction red);
/** Binary cross-entropy on logits, stable for any logit:
 *  (1-y) x + (1 + (pw-1) y) (log1p(e^-|x|) + max(-x, 0)); pos_weight (pw,
 *  broadcast over the classes) may be NULL (1). */
cft_array *cft_loss_bce_with_logits(cft_array *logits, cft_array *targets, cft_array *pos_weight,
                                    cft_reduction red);

/* ======================================================================
 * Modules
 * ====================================================================== */

/** A layer description: its kind and hyperparameters, no arrays. Immutable,
 *  opaque, GC-managed; a bad configuration gives a module whose init and
 *  apply return the error. */
typedef struct cft_module cft_module;

/** Linear: params weight [out, in], bias [out]; both U(-1/sqrt(in),
 *  1/sqrt(in)) (PyTorch's kaiming_uniform(a=sqrt(5)) and its bias rule). */
cft_module *cft_nn_linear(int64_t in, int64_t out, bool bias);
/** LayerNorm over trailing dims `shape` (nshape of them): params weight
 *  (ones) and bias (zeros) of that shape when affine. */
cft_module *cft_nn_layer_norm(const int64_t *shape, int nshape, double eps, bool affine);
/** BatchNorm over channel axis 1 of [N, C, ...] (BatchNorm1d/2d/3d): params
 *  weight (ones), bias (zeros) [C] when affine; state running_mean (zeros),
 *  running_var (ones) [C] and num_batches_tracked (i64 scalar), as in a
 *  PyTorch state_dict. PyTorch defaults: eps 1e-5, momentum 0.1 (momentum
 *  None, the cumulative average, is not supported). */
cft_module *cft_nn_batch_norm(int64_t num_features, double eps, double momentum, bool affine);
/** Dropout with probability p (needs a key when applied in training). */
cft_module *cft_nn_dropout(double p);
/** Embedding: param weight [num, dim] ~ N(0, 1) (see cft_embedding). */
cft_module *cft_nn_embedding(int64_t num, int64_t dim);
/** An activation as a layer (no params). */
cft_module *cft_nn_activation(cft_activation_kind kind);
/** Multi-head attention (nn.MultiheadAttention, batch first): params
 *  in_proj_weight [3E, E] (xavier_uniform), in_proj_bias [3E] (zeros),
 *  out_proj.weight [E, E] (Linear's init), out_proj.bias [E] (zeros); bias
 *  false drops both biases. E must be divisible by num_heads. */
cft_module *cft_nn_mha(int64_t embed_dim, int64_t num_heads, bool bias);
/** Conv2d (nn.Conv2d): input [N, in, H, W] or [in, H, W]; params weight
 *  [out, in/groups, kernel[0], kernel[1]] and bias [out] (when bias), both
 *  U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in/groups * kH * kW
 *  (PyTorch's kaiming_uniform(a=sqrt(5)) and its bias rule). stride,
 *  padding (symmetric, zeros), dilation: 2 values each, NULL for PyTorch's
 *  defaults 1, 0, 1; in and out must be divisible by groups. Applies
 *  cft_conv2d and adds the bias per channel. */
cft_module *cft_nn_conv2d(int64_t in, int64_t out, const int64_t *kernel, const int64_t *stride,
                          const int64_t *padding, const int64_t *dilation, int64_t groups,
                          bool bias);
/** @{ */
/** Conv1d and Conv3d (nn.Conv1d / nn.Conv3d): as cft_nn_conv2d with 1 or 3
 *  spatial dims (kernel, stride, padding, dilation: 1 or 3 values each). */
cft_module *cft_nn_conv1d(int64_t in, int64_t out, const int64_t *kernel, const int64_t *stride,
                          const int64_t *padding, const int64_t *dilation, int64_t groups,
                          bool bias);
cft_module *cft_nn_conv3d(int64_t in, int64_t out, const int64_t *kernel, const int64_t *stride,
                          const int64_t *padding, const int64_t *dilation, int64_t groups,
                          bool bias);
/** @} */
/** @{ */
/** ConvTranspose1d/2d/3d (nn.ConvTranspose*d): input [N, in, *spatial] or
 *  [in, *spatial]; params weight [in, out/groups, *kernel] (PyTorch's layout)
 *  and bias [out], U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in =
 *  out/groups * prod(kernel) (PyTorch's rule for this layout). stride,
 *  padding, output_padding, dilation: one value per spatial dim, NULL for
 *  1, 0, 0, 1; output_padding smaller than the stride or the dilation.
 *  Applies cft_conv_transpose*d and adds the bias per channel. */
cft_module *cft_nn_conv_transpose1d(int64_t in, int64_t out, const int64_t *kernel,
                                    const int64_t *stride, const int64_t *padding,
                                    const int64_t *output_padding, const int64_t *dilation,
                                    int64_t groups, bool bias);
cft_module *cft_nn_conv_transpose2d(int64_t in, int64_t out, const int64_t *kernel,
                                    const int64_t *stride, const int64_t *padding,
                                    const int64_t *output_padding, const int64_t *dilation,
                                    int64_t groups, bool bias);
cft_module *cft_nn_conv_transpose3d(int64_t in, int64_t out, const int64_t *kernel,
                                    const int64_t *stride, const int64_t *padding,
                                    const int64_t *output_padding, const int64_t *dilation,
                                    int64_t groups, bool bias);
/** @} */
/** MaxPool2d over [N, C, H, W] or [C, H, W] (no params): kernel[2]; stride
 *  NULL = kernel; padding NULL = 0 (at most kernel/2; padding never wins);
 *  dilation NULL = 1. Floor mode (no ceil_mode), no indices. */
cft_module *cft_nn_max_pool2d(const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                              const int64_t *dilation);
/** AvgPool2d (no params): as MaxPool2d without dilation; count_include_pad
 *  divides by kH*kW (PyTorch's default true), else by the number of
 *  non-padding elements. No divisor_override. */
cft_module *cft_nn_avg_pool2d(const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                              bool count_include_pad);
/** Flatten (nn.Flatten, no params): cft_flatten(x, start_dim, end_dim);
 *  PyTorch's defaults are 1, -1 (keep the batch dim). The dims count x's
 *  own axes: under vmap over examples, give each example a batch of one
 *  ([1, C, H, W]) or use start_dim 0. */
cft_module *cft_nn_flatten(int start_dim, int end_dim);
/** Layers applied in order; layer i's params and state are named "i.<name>"
 *  (as nn.Sequential). The array of layers is copied. */
cft_module *cft_nn_sequential(cft_module *const *layers, int n);
/** A Sequential of Linear(sizes[i], sizes[i+1]) layers with `act` (and
 *  Dropout(dropout) when dropout > 0) between them, none after the last:
 *  nn.Sequential(Linear, ReLU, Linear, ...) names ("0.weight", "2.weight"). */
cft_module *cft_nn_mlp(const int64_t *sizes, int nsizes, cft_activation_kind act, double dropout);
/** A short description, e.g. "Linear(in=3, out=2, bias=true)". */
const char *cft_module_describe(const cft_module *m);

/** Fresh parameters from `key` (PyTorch's default initialisations, f32;
 *  convert with cft_tree_astype). *state (if state is not NULL) gets the
 *  module's initial state, an empty tree for stateless modules. */
cft_tree *cft_module_init(const cft_module *m, cft_array *key, cft_tree **state);
/** Apply m to x. state may be NULL for stateless modules; train selects batch
 *  statistics and dropout; key feeds dropout (NULL when none is needed; a
 *  Sequential folds in the layer index). *new_state (if not NULL) gets the
 *  updated state (the same state when not training). MHA applied here is
 *  self-attention without a mask; use cft_mha_apply for the general case. */
cft_array *cft_module_apply(const cft_module *m, const cft_tree *params, const cft_tree *state,
                            cft_array *x, bool train, cft_array *key, cft_tree **new_state);
/** Multi-head attention of an MHA module: q [..., L, E], k and v [..., S, E]
 *  -> [..., L, E]; mask broadcasts to [..., H, L, S] (see
 *  cft_scaled_dot_product_attention: a key-padding mask [B, S] goes in as
 *  [B, 1, 1, S]). */
cft_array *cft_mha_apply(const cft_module *m, const cft_tree *params, cft_array *q, cft_array *k,
                         cft_array *v, cft_array *mask, bool causal);

/* ======================================================================
 * Parametrizations (nn.utils.parametrize): raw parameters -> weight
 * ====================================================================== */

/** Weight normalisation w = g * v / ||v||, the norm taken over every axis
 *  but `dim` (negative counts from the end); g has v's rank with size 1
 *  except at dim (PyTorch's weight_g), or is 1-d of v's size at dim. */
cft_array *cft_weight_norm(cft_array *v, cft_array *g, int dim);
/** The raw (v, g) that reproduce w: v = w, g = ||w|| over every axis but dim. */
cft_status cft_weight_norm_init(cft_array *w, int dim, cft_array **v, cft_array **g);
/** Orthogonal parametrization by Householder reflections (PyTorch's
 *  orthogonal_map="householder"): for raw x [..., n, k] (n >= k; a wide
 *  matrix is handled transposed), Q = first k columns of H_1 ... H_k with
 *  H_i = I - tau_i v_i v_i^T, v_i = e_i + column i of the strictly lower
 *  part of x, tau_i = 2 / ||v_i||^2; column i is then multiplied by the sign
 *  of x's diagonal entry (+1 for 0; no gradient). PyTorch multiplies by the
 *  diagonal cast to int: the same for the +-1 diagonals it makes, while a
 *  diagonal that drifted (weight decay) would zero columns there; here Q^T Q
 *  = I for every x. The Cayley and
 *  matrix-exponential maps are left out: the core has no linear solve and
 *  no matrix exponential. */
cft_array *cft_orthogonal(cft_array *x);
/** A raw [n, k] matrix for cft_orthogonal: strictly lower part N(0, 1) from
 *  key, diagonal 1, upper part 0 (a random orthogonal Q, not Haar-uniform). */
cft_array *cft_orthogonal_init(cft_array *key, int64_t n, int64_t k, cft_dtype dtype);
/** Spectral normalisation w / sigma (torch.nn.utils.parametrizations.
 *  spectral_norm). w is viewed as a matrix W [w.shape[dim], rest]; u [rows]
 *  and v [cols] are the explicit power-iteration state. train: n_iter
 *  iterations u = normalize(W v), v = normalize(W^T u) run without
 *  gradient (normalize(x) = x / max(||x||, eps)); sigma = u^T W v with the
 *  new u, v; *u_out / *v_out (may be NULL) get them. Eval: u, v are used
 *  and returned as given. A 1-d w is just normalized (u, v unused: they may
 *  be NULL and are passed through). */
cft_array *cft_spectral_norm(cft_array *w, cft_array *u, cft_array *v, int n_iter, int dim,
                             double eps, bool train, cft_array **u_out, cft_array **v_out);
/** Initial (u, v) for w, as PyTorch: normal draws from key, normalized, then
 *  15 power iterations. */
cft_status cft_spectral_norm_init(cft_array *key, cft_array *w, int dim, double eps, cft_array **u,
                                  cft_array **v);

/* ======================================================================
 * Optimizers: pure functions over trees
 * ====================================================================== */

/** Optimizer kinds. */
typedef enum cft_optim_kind {
    CFT_OPTIM_SGD = 0,
    CFT_OPTIM_ADAM,
    CFT_OPTIM_ADAMW,
    CFT_OPTIM_RMSPROP
} cft_optim_kind;

/** Optimizer hyperparameters (a plain value: make one with cft_sgd, cft_adam,
 *  ... and adjust fields). Fields unused by a kind are ignored. */
typedef struct cft_optim {
    cft_optim_kind kind; /**< which update */
    double lr;           /**< learning rate (a step's lr argument overrides it) */
    double weight_decay; /**< L2 added to the gradient; AdamW: decoupled decay */
    double momentum;     /**< SGD, RMSprop */
    double dampening;    /**< SGD */
    bool nesterov;       /**< SGD */
    double beta1;        /**< Adam, AdamW: the first moment's decay */
    double beta2;        /**< Adam, AdamW: the second moment's decay */
    double eps;          /**< Adam, AdamW, RMSprop */
    bool amsgrad;        /**< Adam, AdamW */
    double alpha;        /**< RMSprop smoothing constant */
    bool centered;       /**< RMSprop */
} cft_optim;

/** SGD (PyTorch defaults: dampening 0). */
cft_optim cft_sgd(double lr, double momentum, double weight_decay, bool nesterov);
/** Adam: betas (0.9, 0.999), eps 1e-8, weight decay 0, no amsgrad. */
cft_optim cft_adam(double lr);
/** AdamW: as Adam with decoupled weight decay (PyTorch default 0.01). */
cft_optim cft_adamw(double lr, double weight_decay);
/** RMSprop: alpha 0.99, eps 1e-8, no momentum, not centered. */
cft_optim cft_rmsprop(double lr);

/** The optimizer state for params: zeros named "<buffer>.<param name>" with
 *  PyTorch's buffer names (momentum_buffer; exp_avg, exp_avg_sq,
 *  max_exp_avg_sq; square_avg, grad_avg): cft_tree_subtree(state, "exp_avg")
 *  mirrors params. */
cft_tree *cft_optim_init(const cft_optim *o, const cft_tree *params);
/** One step of PyTorch's update equations. step: the 1-based step number
 *  (a scalar array, so a traced training step is not re-traced as it
 *  changes; used for Adam's bias correction and SGD's first momentum step).
 *  lr: a scalar array overriding o->lr (from a schedule), or NULL. Writes
 *  *new_params and *new_state (error trees on failure) and returns a status. */
cft_status cft_optim_update(const cft_optim *o, const cft_tree *grads, const cft_tree *state,
                            const cft_tree *params, cft_array *step, cft_array *lr,
                            cft_tree **new_params, cft_tree **new_state);
/** An optimizer step compiled once for one set of parameters (torch's
 *  foreach / fused optimizers): cft_optim_update's equations for every
 *  parameter traced into one function and jitted, so a step is one call of
 *  fused kernels instead of a dozen eager operations per parameter.
 *  Opaque, GC-managed, safe to call from many threads. */
typedef struct cft_optim_step cft_optim_step;
/** Flags of cft_optim_step_new: write the new parameters (the new state)
 *  into the buffers of the ones passed in (cft_jit_donate). After a call
 *  the arrays passed are error arrays ("donated ..."): use the returned
 *  trees, as with torch's in-place step. Without them nothing passed in
 *  changes. */
#define CFT_OPTIM_DONATE_PARAMS 1u
/** See CFT_OPTIM_DONATE_PARAMS. */
#define CFT_OPTIM_DONATE_STATE 2u
/** The jitted step of optimizer o for parameters with params' names,
 *  dtypes and shapes (0 or CFT_OPTIM_DONATE_* flags). Never NULL: bad
 *  hyperparameters, a non-float parameter or unknown flags give a step
 *  whose cft_optim_step_error says so and whose calls fail with it. */
cft_optim_step *cft_optim_step_new(const cft_optim *o, const cft_tree *params, unsigned flags);
/** As cft_optim_update (same arguments, same results to rounding: the
 *  fused kernels may contract a*b+c into one fused multiply-add) in one
 *  jitted call. params must have the names, dtypes and shapes the step was
 *  made for (CFT_E_SHAPE names the first that does not); grads and state
 *  are found by name. lr NULL: o->lr. */
cft_status cft_optim_step_apply(cft_optim_step *s, const cft_tree *grads, const cft_tree *state,
                                const cft_tree *params, cft_array *step, cft_array *lr,
                                cft_tree **new_params, cft_tree **new_state);
/** The jitted function behind s: (params[n], grads[n], state[m], step, lr)
 *  -> (new params[n], new state[m]), in the order of the params given to
 *  cft_optim_step_new and of cft_optim_init's state (for inspecting,
 *  cft_jit_to_dot, export). An error function for a failed step, and for
 *  a step made for no parameters (whose apply gives empty trees). */
cft_fn *cft_optim_step_fn(const cft_optim_step *s);
/** NULL for a usable step, else the error it was made with. */
cft_array *cft_optim_step_error(const cft_optim_step *s);

/** The L2 norm of all leaves together (a scalar). */
cft_array *cft_tree_global_norm(const cft_tree *t);
/** Gradient clipping by global norm (clip_grad_norm_): every leaf times
 *  min(1, max_norm / (norm + 1e-6)); *total_norm (may be NULL) gets the norm
 *  before clipping. */
cft_tree *cft_clip_grad_norm(const cft_tree *grads, double max_norm, cft_array **total_norm);

/* ======================================================================
 * Learning-rate schedules (PyTorch's chainable forms, reproduced exactly)
 * ====================================================================== */

/** A learning-rate schedule. Immutable, opaque, GC-managed; bad arguments
 *  give a schedule whose values are NaN (and set cft_last_error). */
typedef struct cft_lr_schedule cft_lr_schedule;

/** StepLR: times gamma every step_size epochs. */
cft_lr_schedule *cft_lr_step(int64_t step_size, double gamma);
/** MultiStepLR: times gamma at each milestone epoch. */
cft_lr_schedule *cft_lr_multistep(const int64_t *milestones, int n, double gamma);
/** ExponentialLR: times gamma every epoch. */
cft_lr_schedule *cft_lr_exponential(double gamma);
/** ConstantLR: times factor (in [0, 1]) until epoch total_iters. */
cft_lr_schedule *cft_lr_constant(double factor, int64_t total_iters);
/** LinearLR (warm-up): factor from start_factor (in (0, 1]) to end_factor
 *  (in [0, 1]) over total_iters epochs. */
cft_lr_schedule *cft_lr_linear(double start_factor, double end_factor, int64_t total_iters);
/** CosineAnnealingLR: from the base lr down to eta_min over t_max epochs
 *  (PyTorch's recursive form, so it also composes in chains). */
cft_lr_schedule *cft_lr_cosine(int64_t t_max, double eta_min);
/** ChainedScheduler: every schedule steps the lr the previous one left, in
 *  order, each epoch (multiplicative composition for the factor kinds). */
cft_lr_schedule *cft_lr_chain(cft_lr_schedule *const *s, int n);
/** The lr in effect during epoch `epoch` (0-based: after `epoch` calls of
 *  PyTorch's scheduler.step()) for initial lr base_lr. NaN on error. */
double cft_lr_at(const cft_lr_schedule *s, double base_lr, int64_t epoch);
/** The lrs of epochs 0 .. n-1 into out[n] (one pass). */
cft_status cft_lr_values(const cft_lr_schedule *s, double base_lr, int64_t n, double *out);

/* ======================================================================
 * safetensors files
 * ====================================================================== */

/** Save t as a safetensors file: an 8-byte little-endian header length, a
 *  JSON header {"name": {"dtype", "shape", "data_offsets"}, "__metadata__":
 *  {...}} padded with spaces to 8 bytes, then the little-endian data in tree
 *  order. meta: nmeta (key, value) string pairs (2*nmeta strings), may be
 *  NULL. Every dtype is written as stored (BOOL, I32, I64, F16, BF16, F32,
 *  F64, C64, C128). Written to an unnamed temporary file in the same
 *  directory and renamed over `path`, so an existing file survives any
 *  failure and a killed save leaves no file behind; a symlink's target is
 *  updated (the link kept), except a link in a sticky world-writable
 *  directory (/tmp) owned by neither this user nor the directory's owner,
 *  which is refused (the kernel's protected_symlinks rule); an existing
 *  file keeps its mode (and owner, where allowed). Leaves must be concrete. */
cft_status cft_save_safetensors(const char *path, const cft_tree *t, const char *const *meta,
                                int nmeta);
/** Load a safetensors file into a tree (names in header order). Dtypes cft
 *  has load as stored: BOOL, I32, I64, F16, BF16, F32, F64, C64, C128 (any
 *  nonzero BOOL byte is true); I8, U8, I16, U16 load as i32, U32 as i64. A
 *  bad file (not a regular file, truncated, bad JSON, duplicate names or
 *  keys, shapes over the size limits, offsets out of range or overlapping,
 *  sizes that do not match shapes, unknown dtypes) gives an error tree
 *  saying what is wrong. *meta / *nmeta (may be NULL) get the __metadata__
 *  pairs (2*nmeta GC strings). Time is linear in the header; memory a small
 *  multiple of it plus the arrays. */
cft_tree *cft_load_safetensors(const char *path, const char ***meta, int *nmeta);
/** Flags of cft_load_safetensors_ex: widen F16 and BF16 to f32. */
#define CFT_ST_WIDEN 1u
/** cft_load_safetensors with flags (0 or CFT_ST_WIDEN). */
cft_tree *cft_load_safetensors_ex(const char *path, unsigned flags, const char ***meta, int *nmeta);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
