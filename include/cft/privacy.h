/** @file
 * cft/privacy.h: privacy accounting and sampling for DP-SGD.
 *
 * A DP-SGD step with sampling rate q (each example in the batch with
 * probability q) and noise multiplier sigma (noise std / clipping norm) is
 * the sampled Gaussian mechanism. Its Renyi DP at order alpha (Mironov,
 * Talwar and Zhang 2019) adds up over steps, and the sum converts to
 * (epsilon, delta)-DP by Balle et al. (2020)'s bound, minimised over the
 * orders 1.1, 1.2, ..., 10.9, 11, 12, ..., 64, 128, 256 (Opacus and Google's
 * dp_accounting use the same analysis and similar orders).
 *
 *     double eps, order;
 *     cft_dp_epsilon(256.0 / 60000, 1.1, 60 * 234, 1e-5, &eps, &order);
 *
 * The guarantee holds for Poisson sampling (cft_dp_poisson_sample): batches
 * of random size. For shuffled batches of a fixed size it is the customary
 * approximation, not a proof; programs should say which one they print.
 * Errors (q outside [0, 1], a negative sigma or step count, delta outside
 * (0, 1)) return CFT_E_ARG naming the call and the value, and set the last
 * error.
 */
#ifndef CFT_PRIVACY_H
#define CFT_PRIVACY_H

/** @addtogroup nn
 *  @{ */

#include "core.h"
#include "fn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Renyi DP at order alpha (> 1, integer or not) of one step of the sampled
 *  Gaussian mechanism with sampling rate q and noise multiplier sigma; +inf
 *  when sigma is 0 and q > 0. NaN (and the last error set) on bad input. */
double cft_dp_rdp(double q, double sigma, double alpha);

/** (epsilon, delta) after `steps` steps at rate q and noise sigma: *epsilon
 *  and the order that gives it (*order may be NULL). */
cft_status cft_dp_epsilon(double q, double sigma, int64_t steps, double delta, double *epsilon,
                          double *order);

/** The same for a run made of n phases, phase i being steps[i] steps at
 *  rate q[i] with noise sigma[i] (changing batch sizes or noise). */
cft_status cft_dp_epsilon_phases(int n, const double *q, const double *sigma, const int64_t *steps,
                                 double delta, double *epsilon, double *order);

/** The smallest noise multiplier (to 0.1%) for which `steps` steps at rate q
 *  stay within (epsilon, delta); CFT_E_ARG if none up to 1e4 does. */
cft_status cft_dp_noise_multiplier(double q, int64_t steps, double epsilon, double delta,
                                   double *sigma);

/** DP-SGD's clipped gradient sum as one compiled function: for `loss` taking
 *  (params... [nparams], one example's inputs...) to a scalar, returns a
 *  function (params..., batched inputs (examples along axis 0)...) ->
 *  (sum over the examples of each example's gradient scaled to total L2
 *  norm at most `clip`, one per parameter). It is vmap(grad(loss)) with
 *  the norms, clip factors and weighted sum written out, compiled by
 *  cft_jit, whose rewrite pass computes dense layers' norms and sums from
 *  their factors (||a (x) g||^2 = ||a||^2 ||g||^2, sum_i c_i a_i (x) g_i =
 *  A^T diag(c) G), so their [B, ...] per-example gradients are never
 *  formed; convolutions' too where that pays (ghost norms, or norms over
 *  chunks of examples, and one convolution for the sum: see
 *  docs/implementation.md); other layers' are formed. Add the noise and
 *  divide by the (expected) batch size yourself. Errors give a function
 *  that fails when called. */
cft_fn *cft_dp_clipped_grad_sum(cft_fn *loss, int nparams, double clip);

/** Poisson sampling: the indices (i32, ascending) of the examples among n
 *  that a draw keeps, each independently with probability q. The count
 *  varies from draw to draw (binomial(n, q)), which is what the privacy
 *  analysis assumes; it may be 0. Pure in `key`. */
cft_array *cft_dp_poisson_sample(cft_array *key, int64_t n, double q);

#ifdef __cplusplus
}
#endif

/** @} */

#endif
