/* test_autocast.c: mixed precision (cft/amp.h). Autocast's placement is
 * checked on the IR (products and convolutions in the low dtype, sums and
 * exp/log in f32, f64 left alone); its values against f32; its composition
 * with grad (both orders), vmap (against a loop), jit (against the
 * interpreter, twice), export (a round trip) and threads; bad dtypes. The
 * loss scaler against cft_optim_update on unscaled gradients, its skip,
 * growth and backoff, jitted against eager, and bad hyperparameters.
 *
 * Tolerances: bf16 keeps 8 significant bits (relative rounding 2^-9 =
 * 2e-3), f16 11 (2^-12 = 2.4e-4). A product of K = 32 terms whose inputs
 * were rounded has a relative error of a few 2^-9 on sums without
 * cancellation; the tests compare norms of whole results (rel 3e-2 for
 * bf16, 4e-3 for f16), not single elements, where cancellation could make
 * any bound on one element meaningless. Casting is exact and deterministic,
 * so autocast under jit and export is compared with f32's own tolerances
 * for those paths (1e-5 relative: fused kernels may contract a*b + c);
 * under vmap, whose batched product may run on another kernel than a
 * member's, with 2e-3 on the mean loss. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define B 16
#define D 32
#define H 24
#define C 10

static cft_array *rnd(uint64_t seed, cft_dtype dt, const int64_t *shape, int nd, double scale) {
    return cft_mul_s(cft_random_normal(cft_random_key(seed), dt, shape, nd), scale);
}

/* an MLP's loss: mean cross-entropy of relu(x W1 + b1) W2 */
static cft_status mlp_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_relu(cft_add(cft_matmul(in[4], in[0]), in[1]));
    cft_array *logits = cft_add(cft_matmul(h, in[2]), in[3]);
    out[0] = cft_mean(cft_cross_entropy(logits, in[5]), NULL, 0, false);
    return cft_failed(out[0]) ? cft_error_code(out[0]) : CFT_OK;
}

/* the logits alone (an output in the low dtype) */
static cft_status mlp_logits(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_matmul(in[1], in[0]));
    out[0] = cft_log_softmax(cft_matmul(h, in[2]), -1);
    return CFT_OK;
}

/* sum of squares of a convolution */
static cft_status conv_loss(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_square(cft_conv2d(in[0], in[1], NULL, NULL, NULL, 1)), NULL, 0, false);
    return CFT_OK;
}

static cft_array *params[6];

static void make_params(cft_dtype dt) {
    params[0] = rnd(1, dt, (int64_t[]){D, H}, 2, 0.3);
    params[1] = rnd(2, dt, (int64_t[]){H}, 1, 0.1);
    params[2] = rnd(3, dt, (int64_t[]){H, C}, 2, 0.3);
    params[3] = rnd(4, dt, (int64_t[]){C}, 1, 0.1);
    params[4] = rnd(5, dt, (int64_t[]){B, D}, 2, 1.0);
    params[5] = cft_random_randint(cft_random_key(6), (int64_t[]){B}, 1, 0, C, CFT_I32);
}

static double rel_err(cft_array *x, cft_array *ref) {
    cft_array *d = cft_sub(cft_astype(x, CFT_F64), cft_astype(ref, CFT_F64));
    double num = cft_item(cft_sqrt(cft_sum(cft_square(d), NULL, 0, false)));
    double den = cft_item(cft_sqrt(cft_sum(cft_square(cft_astype(ref, CFT_F64)), NULL, 0, false)));
    return num / (den > 0 ? den : 1);
}

/* how many equations of prim `name` the IR has, and how many of them
 * output `dt` */
static int count_eqns(const cft_ir *ir, const char *name, cft_dtype dt, int *with_dt) {
    int n = 0;
    *with_dt = 0;
    for (int i = 0; i < cft_ir_num_eqns(ir); i++) {
        if (strcmp(cft_ir_eqn_prim(ir, i), name))
            continue;
        cft_aval a;
        n++;
        if (cft_ir_eqn_out_aval(ir, i, 0, &a) == CFT_OK && a.dtype == dt)
            (*with_dt)++;
    }
    return n;
}

static cft_aval av_of(cft_array *x) {
    return cft_array_aval(x);
}

typedef struct {
    cft_fn *f;
    cft_array *ref;
    int bad;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    for (int r = 0; r < 5; r++) {
        cft_array *g[5];
        if (cft_fn_call(a->f, params, g) != CFT_OK || rel_err(g[0], a->ref) > 1e-6)
            a->bad++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    make_params(CFT_F32);
    cft_fn *loss = cft_fn_new_named(mlp_loss, NULL, 6, 1, "mlp_loss");
    cft_aval avals[6];
    for (int i = 0; i < 6; i++)
        avals[i] = av_of(params[i]);

    TEST("autocast places products in bf16 and the loss's sums and exp/log in f32") {
        cft_ir *ir = cft_make_ir(cft_autocast(loss, CFT_BF16), avals);
        CHECK(ir != NULL);
        int low, n = count_eqns(ir, "dot_general", CFT_BF16, &low);
        CHECK_EQ(n, 2);
        CHECK_EQ(low, 2);
        int f32s, sums = count_eqns(ir, "reduce_sum", CFT_F32, &f32s);
        CHECK(sums >= 1);
        CHECK_EQ(f32s, sums);
        int e32, exps = count_eqns(ir, "exp", CFT_F32, &e32);
        CHECK(exps >= 1);
        CHECK_EQ(e32, exps);
        cft_aval o;
        CHECK(cft_ir_output_aval(ir, 0, &o) == CFT_OK && o.dtype == CFT_F32);
        /* the text form (CFT_DEBUG's) shows the dtypes */
        const char *s = cft_ir_str(ir);
        CHECK(strstr(s, "bf16[16,24] = dot_general") != NULL);
        if (check_verbose_)
            printf("%s\n", s);
    }

    TEST("autocast leaves f64 products alone and f16 casts to f16") {
        cft_array *p64[6];
        cft_aval a64[6];
        for (int i = 0; i < 6; i++) {
            p64[i] = i == 5 ? params[i] : cft_astype(params[i], CFT_F64);
            a64[i] = av_of(p64[i]);
        }
        int low, n;
        cft_ir *ir = cft_make_ir(cft_autocast(loss, CFT_BF16), a64);
        n = count_eqns(ir, "dot_general", CFT_F64, &low);
        CHECK(n == 2 && low == 2);
        ir = cft_make_ir(cft_autocast(loss, CFT_F16), avals);
        n = count_eqns(ir, "dot_general", CFT_F16, &low);
        CHECK(n == 2 && low == 2);
    }

    cft_array *l32 = cft_fn_call1(loss, params);
    TEST("autocast's loss is close to f32's (bf16 3e-2, f16 4e-3)") {
        cft_array *lb = cft_fn_call1(cft_autocast(loss, CFT_BF16), params);
        cft_array *lh = cft_fn_call1(cft_autocast(loss, CFT_F16), params);
        CHECK(cft_array_dtype(lb) == CFT_F32);
        CHECK_CLOSE(cft_item(lb), cft_item(l32), 3e-2, 0);
        CHECK_CLOSE(cft_item(lh), cft_item(l32), 4e-3, 0);
        cft_fn *lg = cft_fn_new(mlp_logits, NULL, 3, 1);
        cft_array *in3[3] = {params[0], params[4], params[2]};
        cft_array *r = cft_fn_call1(lg, in3), *y = cft_fn_call1(cft_autocast(lg, CFT_BF16), in3);
        CHECK(cft_array_dtype(y) ==
              CFT_F32); /* outputs keep the dtypes they have without autocast */
        CHECK(rel_err(y, r) < 3e-2);
    }

    const int argn[4] = {0, 1, 2, 3};
    cft_fn *g32 = cft_grad(loss, argn, 4);
    cft_array *gref[4];
    cft_fn_call(g32, params, gref);
    TEST("grad(autocast(f)): f32 gradients close to f32's") {
        cft_array *g[4];
        CHECK(cft_fn_call(cft_grad(cft_autocast(loss, CFT_BF16), argn, 4), params, g) == CFT_OK);
        for (int i = 0; i < 4; i++) {
            CHECK(cft_array_dtype(g[i]) == CFT_F32);
            double e = rel_err(g[i], gref[i]);
            CHECK_MSG(e < 3e-2, "gradient %d: relative error %g", i, e);
        }
    }

    TEST("autocast(grad(f)): the backward products run in bf16 too") {
        cft_fn *ag = cft_autocast(g32, CFT_BF16);
        cft_ir *ir = cft_make_ir(ag, avals);
        int low, n = count_eqns(ir, "dot_general", CFT_BF16, &low);
        CHECK(n >= 4); /* two forward, at least two for the weights' gradients */
        CHECK_EQ(low, n);
        cft_array *g[4];
        CHECK(cft_fn_call(ag, params, g) == CFT_OK);
        for (int i = 0; i < 4; i++) {
            double e = rel_err(g[i], gref[i]);
            CHECK_MSG(e < 3e-2, "gradient %d: relative error %g", i, e);
        }
    }

    TEST("vmap(autocast(f)) equals a loop of autocast(f)") {
        /* an ensemble of 3 models (W1 batched) on the same data */
        cft_array *W = rnd(11, CFT_F32, (int64_t[]){3, D, H}, 3, 0.3);
        cft_fn *al = cft_autocast(loss, CFT_BF16);
        cft_fn *vm = cft_vmap_n(al,
                                (int[]){0, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED,
                                        CFT_NOT_BATCHED, CFT_NOT_BATCHED},
                                6, (int[]){0}, 1);
        cft_array *in[6];
        memcpy(in, params, sizeof in);
        in[0] = W;
        cft_array *v = cft_fn_call1(vm, in);
        for (int m = 0; m < 3; m++) {
            in[0] = cft_index(W, m);
            cft_array *one = cft_fn_call1(al, in);
            /* the batched product is one larger product, which may run on
             * another kernel than a member's (oneDNN's bf16 matmul above
             * its size threshold, the widened f32 GEMM below it): its f32
             * sums can round to the other bf16 neighbour (2^-8 relative)
             * in a few elements, which moves the mean loss far less */
            CHECK_CLOSE(cft_item(cft_index(v, m)), cft_item(one), 2e-3, 1e-6);
        }
    }

    TEST("jit(grad(autocast(f))) matches the interpreter, twice") {
        cft_fn *ga = cft_grad(cft_autocast(loss, CFT_BF16), argn, 4);
        cft_fn *j = cft_jit(ga);
        cft_array *ge[4], *gj[4];
        CHECK(cft_fn_call(ga, params, ge) == CFT_OK);
        for (int r = 0; r < 2; r++) {
            CHECK(cft_fn_call(j, params, gj) == CFT_OK);
            for (int i = 0; i < 4; i++)
                CHECK_ARRAY_CLOSE(gj[i], ge[i], 1e-5, 1e-7);
        }
    }

    TEST("an autocast program exports and loads") {
        char path[64];
        snprintf(path, sizeof path, "/tmp/cft_autocast_%d.cftx", (int)getpid());
        cft_fn *al = cft_autocast(loss, CFT_BF16);
        CHECK(cft_export(al, avals, path) == CFT_OK);
        cft_fn *back = cft_load_exported(path);
        CHECK(!cft_fn_failed(back));
        cft_array *a = cft_fn_call1(al, params), *b = cft_fn_call1(back, params);
        CHECK_ARRAY_CLOSE(b, a, 0, 0); /* the same operations in the same order */
        cft_ir *ir = NULL;
        CHECK(cft_load_exported_ir(path, &ir) == CFT_OK);
        int low;
        CHECK_EQ(count_eqns(ir, "dot_general", CFT_BF16, &low), 2);
        CHECK_EQ(low, 2);
        unlink(path);
    }

    TEST("autocast from 4 threads gives the same gradients") {
        cft_fn *ga = cft_grad(cft_autocast(loss, CFT_BF16), argn, 4);
        cft_array *ref[4];
        cft_fn_call(ga, params, ref);
        pthread_t th[4];
        thread_arg a[4];
        for (int i = 0; i < 4; i++) {
            a[i] = (thread_arg){ga, ref[0], 0};
            pthread_create(&th[i], NULL, thread_main, &a[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            CHECK_EQ(a[i].bad, 0);
        }
    }

    TEST("autocast places a convolution in bf16 and its gradient comes back f32") {
        cft_array *cin[2] = {rnd(21, CFT_F32, (int64_t[]){2, 3, 8, 8}, 4, 1.0),
                             rnd(22, CFT_F32, (int64_t[]){4, 3, 3, 3}, 4, 0.3)};
        cft_aval ca[2] = {av_of(cin[0]), av_of(cin[1])};
        cft_fn *cf = cft_fn_new(conv_loss, NULL, 2, 1);
        cft_fn *acf = cft_autocast(cf, CFT_BF16);
        int low, n = count_eqns(cft_make_ir(acf, ca), "conv_general_dilated", CFT_BF16, &low);
        CHECK(n == 1 && low == 1);
        CHECK_CLOSE(cft_item(cft_fn_call1(acf, cin)), cft_item(cft_fn_call1(cf, cin)), 3e-2, 0);
        cft_array *gw = cft_fn_call1(cft_grad(acf, (int[]){1}, 1), cin);
        cft_array *gr = cft_fn_call1(cft_grad(cf, (int[]){1}, 1), cin);
        CHECK(cft_array_dtype(gw) == CFT_F32);
        CHECK(rel_err(gw, gr) < 3e-2);
    }

    TEST("half outer products (per-sample gradients under autocast) are the widened product's "
         "bits, batched or not, under vmap(grad(autocast)) jitted twice") {
        /* each product of two halves is exact in f32 and rounds once: the
         * direct loop and the widened path must agree on every CPU */
        const cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        for (int d = 0; d < 2; d++) {
            cft_array *x = cft_astype(
                cft_random_normal(cft_random_key(70), CFT_F32, (int64_t[]){5, 7, 1}, 3), dts[d]);
            cft_array *y = cft_astype(
                cft_random_normal(cft_random_key(71), CFT_F32, (int64_t[]){5, 1, 9}, 3), dts[d]);
            cft_array *got = cft_matmul(x, y); /* [5, 7, 9]: batch 5, K = 1 */
            cft_array *want =
                cft_astype(cft_matmul(cft_astype(x, CFT_F32), cft_astype(y, CFT_F32)), dts[d]);
            CHECK_EQ(cft_array_dtype(got), dts[d]);
            CHECK_ARRAY_CLOSE(got, want, 0, 0);
            /* no batch: [7, 1] x [1, 9]; a contracted dim of size 1 inside */
            cft_array *x2 = cft_index(x, 2), *y2 = cft_index(y, 3);
            CHECK_ARRAY_CLOSE(
                cft_matmul(x2, y2),
                cft_astype(cft_matmul(cft_astype(x2, CFT_F32), cft_astype(y2, CFT_F32)), dts[d]), 0,
                0);
            cft_array *got3 = cft_dot_general(cft_transpose(x, (int[]){0, 2, 1}), y, (int[]){1},
                                              (int[]){1}, 1, (int[]){0}, (int[]){0}, 1);
            CHECK_ARRAY_CLOSE(got3, want, 0, 0);
            /* batch dims not leading: the widened path's bits too */
            cft_array *xt = cft_transpose(x, (int[]){1, 0, 2});
            cft_array *got4 =
                cft_dot_general(xt, y, (int[]){2}, (int[]){1}, 1, (int[]){1}, (int[]){0}, 1);
            CHECK_ARRAY_CLOSE(got4, want, 0, 0);
            /* two rows of 3 (short rows, no store of 16 lanes fits) */
            cft_array *xs = cft_slice(x, (int64_t[]){0, 0, 0}, (int64_t[]){5, 2, 1}, NULL),
                      *ys = cft_slice(y, (int64_t[]){0, 0, 0}, (int64_t[]){5, 1, 3}, NULL);
            CHECK_ARRAY_CLOSE(
                cft_matmul(xs, ys),
                cft_astype(cft_matmul(cft_astype(xs, CFT_F32), cft_astype(ys, CFT_F32)), dts[d]), 0,
                0);
        }
        /* f32 outer products (dot.c's loop) with rows of 1, 9, 15, 16 and
         * 17: each element the one product that a broadcast multiply
         * forms, bitwise; and two rows alone */
        const int64_t ns[5] = {1, 9, 15, 16, 17};
        for (int k = 0; k < 5; k++) {
            cft_array *x = cft_random_normal(cft_random_key(72), CFT_F32, (int64_t[]){5, 7, 1}, 3);
            cft_array *y =
                cft_random_normal(cft_random_key(73), CFT_F32, (int64_t[]){5, 1, ns[k]}, 3);
            CHECK_ARRAY_CLOSE(cft_matmul(x, y), cft_mul(x, y), 0, 0);
            cft_array *z = cft_matmul(
                cft_slice(x, (int64_t[]){0, 0, 0}, (int64_t[]){5, 2, 1}, NULL), y); /* [5, 2, N] */
            CHECK_ARRAY_CLOSE(
                z, cft_mul(cft_slice(x, (int64_t[]){0, 0, 0}, (int64_t[]){5, 2, 1}, NULL), y), 0,
                0);
        }
        /* the per-sample gradients of an autocast loss: jitted twice, the
         * interpreter's bits for the products, f32 tolerance for the rest */
        int axes[6] = {CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0, 0};
        cft_fn *ps =
            cft_vmap(cft_grad(cft_autocast(loss, CFT_BF16), (int[]){0, 1, 2, 3}, 4), axes, NULL);
        cft_array *g[4], *gj[4];
        CHECK_EQ(cft_fn_call(ps, params, g), CFT_OK);
        cft_fn *j = cft_jit(ps);
        for (int r = 0; r < 2; r++) {
            CHECK_EQ(cft_fn_call(j, params, gj), CFT_OK);
            for (int i = 0; i < 4; i++)
                CHECK_ARRAY_CLOSE(gj[i], g[i], 1e-5, 1e-6);
        }
        CHECK_EQ(cft_array_ndim(g[0]), 3); /* [B, D, H] */
        CHECK_EQ(cft_array_dtype(g[0]), CFT_F32);
    }

    TEST("bad dtypes are refused by name") {
        cft_fn *bad = cft_autocast(loss, CFT_I32);
        CHECK(cft_fn_failed(bad));
        cft_array *o = cft_fn_call1(bad, params);
        CHECK(cft_failed(o));
        CHECK(strstr(cft_error_message(o), "cft_autocast") != NULL);
        CHECK(strstr(cft_error_message(o), "i32") != NULL);
        CHECK(cft_fn_failed(cft_autocast(NULL, CFT_BF16)));
    }

    return check_summary();
}
