/* export_run.c: a program saved with its weights and run without its
 * source (torch.export, jax.export). The per-sample gradients of the
 * digits MLP (vmap of grad, the weights closed over as constants) are
 * exported with a symbolic batch dim B, loaded back, called at two batch
 * sizes, jitted and differentiated again; the inputs and the jitted
 * outputs are written as safetensors files for `cft-run` to replay.
 *
 *     build/examples/export_run [DIR]      (default: the current directory)
 *     build/cft-run DIR/psg.cftx DIR/psg_in.safetensors DIR/out.safetensors \
 *         --jit --expect DIR/psg_expected.safetensors
 * Exits 1 on a mismatch. */
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "mlp.h"

static cft_array *weights[MLP_NPARAMS];

/* (x [64], y []) -> gradients of one example's loss w.r.t. w1 and w3,
 * the weights captured from the enclosing program as constants */
static cft_status example_grads(void *env, int nin, cft_array *const *in, int nout,
                                cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *a[MLP_NPARAMS + 2];
    memcpy(a, weights, sizeof weights);
    a[MLP_NPARAMS] = cft_reshape(in[0], (int64_t[]){1, 64}, 2);
    a[MLP_NPARAMS + 1] = cft_reshape(in[1], (int64_t[]){1}, 1);
    cft_fn *g = cft_grad(cft_fn_new(mlp_loss, NULL, MLP_NPARAMS + 2, 1), (int[]){0, 4}, 2);
    return cft_fn_call(g, a, out);
}

/* (x, y) -> the sum of the squares of f(x, y)'s two outputs; env: f */
static cft_status norm_sq(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *g[2];
    cft_status st = cft_fn_call(env, in, g);
    out[0] = cft_add(cft_sum(cft_square(g[0]), NULL, 0, false),
                     cft_sum(cft_square(g[1]), NULL, 0, false));
    return st;
}

static cft_array *batch_x(int64_t B) {
    return cft_random_uniform(cft_random_key((uint64_t)B), CFT_F32, (int64_t[]){B, 64}, 2, 0, 16);
}
static cft_array *batch_y(int64_t B) {
    return cft_astype(cft_mul_s(cft_random_uniform(cft_random_key(100 + (uint64_t)B), CFT_F32,
                                                   (int64_t[]){B}, 1, 0, 1),
                                9.99),
                      CFT_I32);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    char prog[1024], in_path[1024], exp_path[1024];
    snprintf(prog, sizeof prog, "%s/psg.cftx", dir);
    snprintf(in_path, sizeof in_path, "%s/psg_in.safetensors", dir);
    snprintf(exp_path, sizeof exp_path, "%s/psg_expected.safetensors", dir);
    mlp_init(0, weights);
    int bad = 0;

    //! [export]
    cft_fn *psg = cft_vmap(cft_fn_new(example_grads, NULL, 2, 2), NULL, NULL);
    int64_t B = cft_dim_sym("B"); /* any batch size */
    cft_aval avals[2] = {{CFT_F32, 2, {B, 64}}, {CFT_I32, 1, {B}}};
    if (cft_export(psg, avals, prog) != CFT_OK) {
        fprintf(stderr, "%s\n", cft_last_error_message());
        return 1;
    }
    //! [export]

    //! [load]
    cft_fn *loaded = cft_load_exported(prog); /* no source needed from here on */
    if (cft_fn_failed(loaded)) {
        fprintf(stderr, "%s\n", cft_fn_error_message(loaded));
        return 1;
    }
    cft_ir *ir;
    cft_load_exported_ir(prog, &ir);
    printf("%s: %d equations, %d constants (the weights among them), inputs f32[B,64] i32[B]\n",
           prog, cft_ir_num_eqns(ir), cft_ir_num_consts(ir));
    for (int64_t b = 3; b <= 32; b += 29) { /* one program, two batch sizes */
        cft_array *in[2] = {batch_x(b), batch_y(b)}, *want[2], *got[2];
        cft_fn_call(psg, in, want);
        cft_fn_call(loaded, in, got);
        bool same = cft_allclose(got[0], want[0], 1e-6, 1e-7, false) &&
                    cft_allclose(got[1], want[1], 1e-6, 1e-7, false);
        char av[96];
        cft_aval a = cft_array_aval(got[0]);
        printf("B = %2lld: per-sample gradient of w1 %s, equal to the original's: %s\n",
               (long long)b, cft_aval_str(&a, av), same ? "yes" : "NO");
        bad |= !same;
    }
    //! [load]

    //! [again]
    /* transformed again: the gradient, with respect to the inputs, of the
     * per-sample gradients' total squared norm, through the loaded program
     * and through the original; and the loaded program jitted */
    cft_array *in[2] = {batch_x(8), batch_y(8)}, *out[2];
    cft_array *d_loaded = cft_fn_call1(cft_grad(cft_fn_new(norm_sq, loaded, 2, 1), NULL, 0), in);
    cft_array *d_source = cft_fn_call1(cft_grad(cft_fn_new(norm_sq, psg, 2, 1), NULL, 0), in);
    bool same = cft_allclose(d_loaded, d_source, 1e-5, 1e-6, false);
    printf("grad of the squared norms w.r.t. x through the loaded program: equal: %s\n",
           same ? "yes" : "NO");
    bad |= !same;
    cft_fn_call(cft_jit(loaded), in, out);
    //! [again]

    //! [files]
    const char *in_names[2] = {"x", "y"}, *out_names[2] = {"out.0", "out.1"};
    cft_save_safetensors(in_path, cft_tree_from(in_names, in, 2), NULL, 0);
    cft_save_safetensors(exp_path, cft_tree_from(out_names, out, 2), NULL, 0);
    printf("wrote %s and %s for cft-run\n", in_path, exp_path);
    //! [files]
    return bad;
}
