/* devices.c: arrays on a device and a jitted function run there, as JAX's
 * device_put and jit. The device is the first argument (default cuda:0);
 * where it cannot run (no GPU, no driver, no CUDA backend built) the
 * program says why, as cft_device_error does, and runs on the host
 * instead, so it runs everywhere. The per-sample gradients of the digits
 * MLP are computed on the device and on the host and compared; then the
 * device's memory counters show the caching allocator at work.
 *
 *     build/examples/devices [cuda:0|cpu]
 * Exits 1 on a mismatch. */
#include <stdio.h>

#include "cft/cft.h"
#include "mlp.h"

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "cuda:0";
    //! [device]
    const cft_dev *dev = cft_device(name);
    cft_array *why = cft_device_error(dev);
    if (why) { /* never NULL: a device that cannot run says why */
        printf("%s cannot run here: %s\nusing the host instead\n", name, cft_error_message(why));
        dev = cft_device("cpu");
    }
    printf("device: %s\n", cft_device_name(dev));
    //! [device]

    //! [put]
    cft_array *host[MLP_NPARAMS + 2], *on_dev[MLP_NPARAMS + 2];
    mlp_init(0, host);
    host[MLP_NPARAMS] =
        cft_random_uniform(cft_random_key(1), CFT_F32, (int64_t[]){256, 64}, 2, 0, 16);
    host[MLP_NPARAMS + 1] = cft_astype(
        cft_mul_s(cft_random_uniform(cft_random_key(2), CFT_F32, (int64_t[]){256}, 1, 0, 1), 9.99),
        CFT_I32);
    for (int i = 0; i < MLP_NPARAMS + 2; i++)
        on_dev[i] = cft_device_put(host[i], dev); /* committed to dev */
    //! [put]

    //! [jit]
    int argnums[MLP_NPARAMS], axes[MLP_NPARAMS + 2];
    for (int i = 0; i < MLP_NPARAMS; i++)
        argnums[i] = i, axes[i] = CFT_NOT_BATCHED;
    axes[MLP_NPARAMS] = axes[MLP_NPARAMS + 1] = 0;
    cft_fn *psg = cft_jit(
        cft_vmap(cft_grad(cft_fn_new(mlp_loss, NULL, MLP_NPARAMS + 2, 1), argnums, MLP_NPARAMS),
                 axes, NULL));
    cft_array *g_dev[MLP_NPARAMS], *g_host[MLP_NPARAMS];
    for (int call = 0; call < 3; call++) /* the third call on a GPU replays a CUDA graph */
        cft_fn_call(psg, on_dev, g_dev);
    cft_fn_call(psg, host, g_host);
    //! [jit]

    int bad = 0;
    for (int l = 0; l < MLP_NPARAMS; l++) {
        /* f32 products in another order (cuBLAS against OpenBLAS): 1e-4 relative */
        bool same = cft_allclose(g_dev[l], g_host[l], 1e-4, 1e-5, false);
        char av[96];
        cft_aval a = cft_array_aval(g_dev[l]);
        printf("%-3s %-16s on %s, equal to the host's: %s\n", mlp_names[l], cft_aval_str(&a, av),
               cft_device_name(cft_device_of(g_dev[l])), same ? "yes" : "NO");
        bad |= !same;
    }

    //! [counters]
    /* what one more call asks of the device: launches, copies, waits */
    cft_device_counters c0, c1;
    cft_device_counters_of(dev, &c0);
    cft_fn_call(psg, on_dev, g_dev);
    cft_device_counters_of(dev, &c1);
    printf("one warm call on %s: %llu kernels, %llu graph replays, %llu primitives one by one, "
           "%llu copies to the device, %llu to the host, %llu allocations\n",
           cft_device_name(dev), (unsigned long long)(c1.kernels - c0.kernels),
           (unsigned long long)(c1.graphs - c0.graphs), (unsigned long long)(c1.ops - c0.ops),
           (unsigned long long)(c1.h2d - c0.h2d), (unsigned long long)(c1.d2h - c0.d2h),
           (unsigned long long)(c1.allocs - c0.allocs));
    //! [counters]

    //! [memory]
    cft_device_memory_stats ms;
    cft_device_memory(dev, &ms);
    printf("memory on %s: %zu bytes in use, peak %zu, %zu cached; %llu allocations asked of "
           "the backend, %llu served from the cache\n",
           cft_device_name(dev), ms.in_use, ms.peak_in_use, ms.cached,
           (unsigned long long)ms.allocs, (unsigned long long)ms.reuses);
    //! [memory]
    return bad;
}
