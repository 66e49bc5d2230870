/* profiling.c: where the time of a training step goes, and how fast it is.
 * The digits MLP's DP-SGD step (per-sample gradients by vmap(grad),
 * clipped and summed) eager and jitted: the Timer (torch.utils.benchmark's
 * blocked_autorange and Compare) times both, the profiler (torch.profiler)
 * records the jitted one: a table of kernels and a Chrome trace to open in
 * Perfetto (https://ui.perfetto.dev) or chrome://tracing.
 *
 *     build/examples/profiling [TRACE.json]     (default: trace.json)
 * Exits 1 when a step fails. */
#include <stdio.h>

#include "cft/cft.h"
#include "mlp.h"

enum { B = 128 };

/* (params..., x [B,64], y [B]) -> per-example gradients clipped to norm 1, summed */
static cft_status clipped_sum(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *g[MLP_NPARAMS];
    cft_status st = cft_fn_call(env, in, g);
    cft_array *sq = cft_zeros(CFT_F32, (int64_t[]){B}, 1);
    for (int l = 0; l < MLP_NPARAMS; l++) {
        int axes[3] = {1, 2};
        sq = cft_add(sq, cft_sum(cft_square(g[l]), axes, cft_array_ndim(g[l]) - 1, false));
    }
    cft_array *scale = cft_minimum(cft_scalar(1, CFT_F32), cft_rsqrt(cft_add_s(sq, 1e-12)));
    for (int l = 0; l < MLP_NPARAMS; l++) {
        int64_t shape[4] = {B, 1, 1, 1};
        cft_array *s = cft_reshape(scale, shape, cft_array_ndim(g[l]));
        out[l] = cft_sum(cft_mul(g[l], s), (int[]){0}, 1, false);
    }
    return st;
}

typedef struct {
    cft_fn *f;
    cft_array **in;
} call_t;

static void run(void *arg) {
    call_t *c = arg;
    cft_array *out[MLP_NPARAMS];
    cft_fn_call(c->f, c->in, out);
}

int main(int argc, char **argv) {
    const char *trace = argc > 1 ? argv[1] : "trace.json";
    cft_array *in[MLP_NPARAMS + 2];
    mlp_init(0, in);
    in[MLP_NPARAMS] = cft_random_uniform(cft_random_key(1), CFT_F32, (int64_t[]){B, 64}, 2, 0, 16);
    in[MLP_NPARAMS + 1] = cft_astype(
        cft_mul_s(cft_random_uniform(cft_random_key(2), CFT_F32, (int64_t[]){B}, 1, 0, 1), 9.99),
        CFT_I32);
    int argnums[MLP_NPARAMS], axes[MLP_NPARAMS + 2];
    for (int i = 0; i < MLP_NPARAMS; i++)
        argnums[i] = i, axes[i] = CFT_NOT_BATCHED;
    axes[MLP_NPARAMS] = axes[MLP_NPARAMS + 1] = 0;
    cft_fn *loss = cft_fn_new(mlp_loss, NULL, MLP_NPARAMS + 2, 1);
    cft_fn *psg = cft_vmap(cft_grad(loss, argnums, MLP_NPARAMS), axes, NULL);
    cft_fn *step =
        cft_fn_named(cft_fn_new(clipped_sum, psg, MLP_NPARAMS + 2, MLP_NPARAMS), "dp_sgd_step");
    cft_fn *jitted = cft_jit(step);

    //! [timer]
    cft_measurement m[2];
    call_t eager = {step, in}, fast = {jitted, in};
    cft_timer_blocked_autorange(run, &eager, 0.3, &m[0]);
    cft_timer_blocked_autorange(run, &fast, 0.3, &m[1]);
    m[0].label = m[1].label = "DP-SGD step";
    m[0].sub_label = m[1].sub_label = "MLP, B = 128";
    m[0].description = "eager";
    m[1].description = "cft_jit";
    cft_measurement_print(&m[1], stdout);
    cft_timer_compare(m, 2, stdout);
    //! [timer]

    //! [profile]
    cft_profile_start();
    for (int i = 0; i < 20; i++)
        run(&fast);
    cft_profile_stop(trace);
    cft_profile_table(stdout, 8);
    //! [profile]
    printf("\ntrace written to %s\n", trace);

    cft_array *out[MLP_NPARAMS];
    return cft_fn_call(jitted, in, out) != CFT_OK;
}
