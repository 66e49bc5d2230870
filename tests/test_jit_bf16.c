/* test_jit_bf16.c: bf16 in the jit's fused kernels (lower/fuse.c,
 * emit.c, emit_cuda.c). Elementwise chains that read or write bf16 fuse
 * into one kernel, which reads bf16 into floats, computes in f32, rounds
 * each bf16 value to nearest-even as an eager op rounds its output, and
 * stores bf16; reductions of halves join them, accumulate in f32 and round
 * once (f16 and bf16 both here; the rest of f16: test_jit_f16). Checked
 * against the interpreter, called twice: conversions, products and sums are single
 * f32 operations rounded once, the same on both sides, so they compare
 * bitwise (ties to even, NaN, infinities, overflow, subnormals included);
 * exp and tanh may differ by an f32 ulp between libm and the kernels'
 * vector library, which can move the bf16 result by one bf16 ulp
 * (rtol 2^-7). Fusion is checked on the plan's DOT (each equation's
 * group). Half products run in the jit's own path (dot_general's
 * impl_into over per-thread scratch, in plans and row segments): the
 * interpreter's bits unbatched, within one half ulp vmapped. A half
 * product read only by its conversion back to f32 writes the f32 values
 * itself (jit.c's fold): the interpreter's bits, and the conversion
 * kernels that still run are counted in the profile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "support/half_chains.h"

/* half reductions of a half chain h = half(x) * w (env: the half dtype):
 * over rows into one row (h stored too), within each row (a sum and a
 * max), of h's f32 conversion, and of every element */
static cft_status half_reds(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    cft_array *h = cft_mul(cft_astype(in[0], *(const cft_dtype *)env), in[1]);
    out[0] = cft_sum(h, (int[]){0}, 1, false);
    out[1] = h;
    out[2] = cft_sum(h, (int[]){1}, 1, false);
    out[3] = cft_max(h, (int[]){1}, 1, true);
    out[4] = cft_sum(cft_astype(h, CFT_F32), (int[]){1}, 1, false);
    out[5] = cft_sum(h, (int[]){0, 1}, 2, false);
    return cft_failed(out[5]) ? cft_error_code(out[5]) : CFT_OK;
}

/* a softmax of h = half(x) * w over each row, in the half dtype (env),
 * sharpened by the sum of its squares: four kernels, each ending in a
 * half reduction (batched, a row-parallel segment of the plan) */
static cft_status half_softmax(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)nin, (void)nout;
    cft_array *h = cft_mul(cft_astype(in[0], *(const cft_dtype *)env), in[1]);
    cft_array *e = cft_exp(cft_sub(h, cft_max(h, (int[]){-1}, 1, true)));
    cft_array *p = cft_div(e, cft_sum(e, (int[]){-1}, 1, true));
    cft_array *q = cft_div(p, cft_sum(cft_mul(p, p), (int[]){-1}, 1, true));
    out[0] = cft_astype(cft_mul(q, cft_sum(q, (int[]){-1}, 1, true)), CFT_F32);
    return cft_failed(out[0]) ? cft_error_code(out[0]) : CFT_OK;
}

/* products in the half dtype (env) converted back to f32, as autocast
 * writes them: per-example outer products of a [B, m] and b [B, n] (a
 * per-sample weight gradient), a matrix product a c ([m, k]), and the same
 * product of b (with a 2 x 1 shape) also returned as the half value (read
 * twice: not folded) */
static cft_status wide_products(void *env, int nin, cft_array *const *in, int nout,
                                cft_array **out) {
    (void)nin, (void)nout;
    cft_dtype h = *(const cft_dtype *)env;
    cft_array *a = cft_astype(in[0], h), *b = cft_astype(in[1], h), *c = cft_astype(in[2], h);
    out[0] = cft_astype(cft_dot_general(a, b, NULL, NULL, 0, (int[]){0}, (int[]){0}, 1), CFT_F32);
    out[1] = cft_astype(cft_matmul(a, c), CFT_F32);
    out[2] = cft_matmul(cft_mul_s(b, 2), cft_transpose(b, NULL));
    out[3] = cft_astype(out[2], CFT_F32);
    return cft_failed(out[3]) ? cft_error_code(out[3]) : CFT_OK;
}

/* the calls of the kernel `name` in the profile of one call of j */
static int kernel_calls(cft_fn *j, cft_array *const *in, const char *name) {
    cft_array *o[8];
    char *buf = NULL;
    size_t n = 0;
    int calls = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return -1;
    cft_profile_start();
    cft_fn_call(j, in, o);
    cft_profile_stop(NULL);
    cft_profile_table(f, 50);
    fclose(f);
    const char *p = buf ? strstr(buf, name) : NULL;
    if (p) /* the table's row: the name, then its calls */
        sscanf(p + strlen(name), "%d", &calls);
    free(buf);
    return calls;
}

static cft_status to_bf16(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_astype(cft_mul_s(in[0], 1), CFT_BF16);
    return cft_failed(out[0]) ? cft_error_code(out[0]) : CFT_OK;
}

/* a task's tiny bf16 MLP 1-40-40-1 on 10 points: (w1, w2, w3, x [10, 1]) */
static cft_status tiny_mlp(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_relu(cft_matmul(in[3], in[0]));
    h = cft_relu(cft_matmul(h, in[1]));
    out[0] = cft_matmul(h, in[2]);
    return cft_failed(out[0]) ? cft_error_code(out[0]) : CFT_OK;
}

/* conv(relu(conv(x, w)), w^T): (w [6, 2, 3, 3], x [N, 2, 7, 7]) */
static cft_status conv_net(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_relu(cft_conv2d(in[1], in[0], NULL, (int64_t[]){1, 1}, NULL, 1));
    out[0] = cft_conv2d(h, cft_transpose(in[0], (int[]){1, 0, 2, 3}), NULL, NULL, NULL, 1);
    return cft_failed(out[0]) ? cft_error_code(out[0]) : CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    const cft_dtype BF16 = CFT_BF16;
    cft_array *x = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){96, 200}, 2);
    cft_array *w = cft_astype(
        cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){96, 200}, 2), CFT_BF16);

    TEST("a bf16 chain: the interpreter's bits, twice, and one kernel") {
        cft_fn *f = cft_fn_new(half_chain, (void *)&BF16, 2, 2), *j = cft_jit(f);
        cft_array *e[2], *g[2];
        CHECK(cft_fn_call(f, (cft_array *[]){x, w}, e) == CFT_OK);
        for (int r = 0; r < 2; r++) {
            CHECK(cft_fn_call(j, (cft_array *[]){x, w}, g) == CFT_OK);
            CHECK(cft_array_dtype(g[1]) == CFT_BF16);
            CHECK_ARRAY_CLOSE(g[0], e[0], 0, 0);
            CHECK_ARRAY_CLOSE(g[1], e[1], 0, 0);
        }
        /* the plan on new inputs */
        cft_array *x2 = cft_mul_s(x, -1.5),
                  *w2 = cft_astype(cft_mul_s(cft_astype(w, CFT_F32), 0.7), CFT_BF16);
        cft_array *e2[2], *g2[2];
        CHECK(cft_fn_call(f, (cft_array *[]){x2, w2}, e2) == CFT_OK);
        CHECK(cft_fn_call(j, (cft_array *[]){x2, w2}, g2) == CFT_OK);
        CHECK_ARRAY_CLOSE(g2[0], e2[0], 0, 0);
        CHECK_ARRAY_CLOSE(g2[1], e2[1], 0, 0);
        char *dot = half_plan_dot(j);
        CHECK(dot != NULL);
        if (dot) {
            /* one kernel (group 0) holds the conversions, the product and the sums:
             * all five equations */
            int in0 = 0, other = 0;
            for (const char *p = dot; (p = strstr(p, "xlabel=\"group ")); p++) {
                if (strncmp(p, "xlabel=\"group 0\"", 16) == 0)
                    in0++;
                else
                    other++;
            }
            CHECK_MSG(in0 == 5 && other == 0, "%d equations in group 0, %d elsewhere:\n%s", in0,
                      other, dot);
            free(dot);
        }
    }

    TEST("exp and tanh of bf16 in a kernel: within one bf16 ulp of the interpreter") {
        cft_fn *f = cft_fn_new(half_transc, NULL, 2, 1), *j = cft_jit(f);
        cft_array *e = cft_fn_call1(f, (cft_array *[]){x, w});
        for (int r = 0; r < 2; r++) {
            cft_array *g = cft_fn_call1(j, (cft_array *[]){x, w});
            CHECK(cft_array_dtype(g) == CFT_BF16);
            CHECK_ARRAY_CLOSE(g, e, 1.0 / 128, 0);
        }
    }

    TEST("bf16 and f16 reductions in kernels (f32 sums, rounded once): within one half ulp "
         "of the interpreter, twice, vmapped too; no equation eager") {
        const cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        for (int d = 0; d < 2; d++) {
            cft_array *wd = cft_astype(w, dts[d]);
            cft_fn *f = cft_fn_new(half_reds, (void *)&dts[d], 2, 6), *j = cft_jit(f);
            cft_array *e[6], *g[6];
            CHECK(cft_fn_call(f, (cft_array *[]){x, wd}, e) == CFT_OK);
            /* the interpreter sums the f32 values in f32 and rounds once; a
             * kernel sums them in its own order (f32 or double) and rounds
             * once: the rounding may differ by one half ulp (2^-7 of the
             * value for bf16, 2^-10 for f16), the f32 sums by f32 rounding
             * (|h| < 8 here, 200 terms a row, 19200 in all) */
            const double rtol = d ? 1.0 / 1024 : 1.0 / 128;
            for (int r = 0; r < 2; r++) {
                CHECK(cft_fn_call(j, (cft_array *[]){x, wd}, g) == CFT_OK);
                for (int o = 0; o < 6; o++)
                    CHECK_MSG(o == 4 || cft_array_dtype(g[o]) == dts[d], "output %d", o);
                CHECK_ARRAY_CLOSE(g[1], e[1], 0, 0); /* stored beside a reduction: bits */
                CHECK_ARRAY_CLOSE(g[3], e[3], 0, 0); /* a max is exact */
                CHECK_ARRAY_CLOSE(g[0], e[0], rtol, 1e-4);
                CHECK_ARRAY_CLOSE(g[2], e[2], rtol, 1e-4);
                CHECK_ARRAY_CLOSE(g[4], e[4], 1e-5, 1e-4);
                CHECK_ARRAY_CLOSE(g[5], e[5], rtol, 1e-2);
            }
            /* every equation in a kernel: the first reduction in h's own */
            int in0 = 0, other = 0;
            half_plan_groups(j, &in0, &other);
            CHECK_MSG(in0 == 3 && in0 + other == 8, "%d equations in group 0, %d in others", in0,
                      other);
            /* vmapped over 6 tasks (rows of tasks share the threads) */
            cft_array *xs =
                cft_random_normal(cft_random_key(9), CFT_F32, (int64_t[]){6, 96, 200}, 3);
            cft_fn *v = cft_vmap(f, (int[]){0, CFT_NOT_BATCHED}, NULL), *jv = cft_jit(v);
            CHECK(cft_fn_call(v, (cft_array *[]){xs, wd}, e) == CFT_OK);
            for (int r = 0; r < 2; r++) {
                CHECK(cft_fn_call(jv, (cft_array *[]){xs, wd}, g) == CFT_OK);
                CHECK_ARRAY_CLOSE(g[1], e[1], 0, 0);
                CHECK_ARRAY_CLOSE(g[3], e[3], 0, 0);
                CHECK_ARRAY_CLOSE(g[0], e[0], rtol, 1e-4);
                CHECK_ARRAY_CLOSE(g[2], e[2], rtol, 1e-4);
                CHECK_ARRAY_CLOSE(g[4], e[4], 1e-5, 1e-4);
                CHECK_ARRAY_CLOSE(g[5], e[5], rtol, 1e-2);
            }
        }
    }

    TEST("a bf16 / f16 softmax vmapped over 16 tasks: its half reductions in a row-parallel "
         "segment, within four half ulps of the interpreter, twice") {
        const cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        cft_array *xs = cft_random_normal(cft_random_key(11), CFT_F32, (int64_t[]){16, 96, 200}, 3);
        for (int d = 0; d < 2; d++) {
            cft_array *wd = cft_astype(w, dts[d]);
            cft_fn *f = cft_fn_new(half_softmax, (void *)&dts[d], 2, 1);
            cft_fn *v = cft_vmap(f, (int[]){0, CFT_NOT_BATCHED}, NULL), *jv = cft_jit(v);
            cft_array *e = cft_fn_call1(v, (cft_array *[]){xs, wd});
            /* four half values in a chain (exp, a sum, two quotients) may
             * each round one ulp apart (exp: libm against the kernels'
             * vector library; sums: another order) */
            for (int r = 0; r < 2; r++)
                CHECK_ARRAY_CLOSE(cft_fn_call1(jv, (cft_array *[]){xs, wd}), e,
                                  d ? 4.0 / 1024 : 4.0 / 128, 1e-6);
        }
    }

    TEST("a half product read only by its conversion to f32 writes the f32 result itself "
         "(outer products, a GEMM): the interpreter's bits, three calls, no convert kernel") {
        const cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        cft_array *in[3] = {cft_random_normal(cft_random_key(51), CFT_F32, (int64_t[]){64, 48}, 2),
                            cft_random_normal(cft_random_key(52), CFT_F32, (int64_t[]){64, 40}, 2),
                            cft_random_normal(cft_random_key(53), CFT_F32, (int64_t[]){48, 24}, 2)};
        for (int d = 0; d < 2; d++) {
            cft_fn *f = cft_fn_new(wide_products, (void *)&dts[d], 3, 4), *j = cft_jit(f);
            cft_array *e[4], *g[4];
            CHECK(cft_fn_call(f, in, e) == CFT_OK);
            for (int r = 0; r < 3; r++) {
                CHECK(cft_fn_call(j, in, g) == CFT_OK);
                for (int k = 0; k < 4; k++)
                    CHECK_MSG(cft_max_abs_diff(g[k], e[k]) == 0, "%s output %d, call %d: %g",
                              cft_dtype_name(dts[d]), k, r, cft_max_abs_diff(g[k], e[k]));
            }
            /* conversions as kernels: the three inputs' to the half dtype
             * and the product's that is returned as a half too (without the
             * fold: six); CFT_JIT_REPEAT=1 runs each plan three times */
            const char *rep = getenv("CFT_JIT_REPEAT");
            int runs = rep && atoi(rep) > 0 ? 3 : 1,
                calls = kernel_calls(j, in, "kernel[convert_element_type]");
            CHECK_MSG(calls == 4 * runs,
                      "%s: %d conversions ran as kernels in %d runs, %d expected",
                      cft_dtype_name(dts[d]), calls, runs, 4 * runs);
        }
    }

    TEST("bf16 and f16 products in a jitted plan and vmapped over 25 tasks (the jit's own "
         "product path, no widened arrays): the interpreter's bits, twice") {
        const cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        for (int d = 0; d < 2; d++) {
            cft_array *in[4];
            const int64_t shapes[4][3] = {{1, 40}, {40, 40}, {40, 1}, {25, 10, 1}};
            for (int i = 0; i < 4; i++)
                in[i] = cft_astype(cft_mul_s(cft_random_normal(cft_random_key(30 + (uint64_t)i),
                                                               CFT_F32, shapes[i], i < 3 ? 2 : 3),
                                             i < 3 ? 0.3 : 2),
                                   dts[d]);
            cft_fn *f = cft_fn_new(tiny_mlp, NULL, 4, 1);
            cft_fn *v =
                cft_vmap(f, (int[]){CFT_NOT_BATCHED, CFT_NOT_BATCHED, CFT_NOT_BATCHED, 0}, NULL);
            cft_array *one[4] = {in[0], in[1], in[2], cft_index(in[3], 4)};
            cft_array *e1 = cft_fn_call1(f, one), *ev = cft_fn_call1(v, in);
            cft_fn *j1 = cft_jit(f), *jv = cft_jit(v);
            for (int r = 0; r < 2; r++) {
                cft_array *g1 = cft_fn_call1(j1, one), *gv = cft_fn_call1(jv, in);
                CHECK(cft_array_dtype(gv) == dts[d]);
                CHECK_ARRAY_CLOSE(g1, e1, 0, 0);
                /* vmapped, the jit shares the tasks out to threads, whose
                 * batches of products may go to another GEMM library than
                 * the whole batch's: an f32 ulp of a sum may move a half
                 * result by one of its ulps (bitwise on this project's
                 * machines so far) */
                CHECK_ARRAY_CLOSE(gv, ev, d ? 1.0 / 1024 : 1.0 / 128, 1e-3);
            }
        }
    }

    TEST("bf16 and f16 convolutions in a jitted plan (the jit's own path): the interpreter's "
         "bits, twice") {
        const cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        for (int d = 0; d < 2; d++) {
            cft_array *in[2] = {cft_astype(cft_mul_s(cft_random_normal(cft_random_key(40), CFT_F32,
                                                                       (int64_t[]){6, 2, 3, 3}, 4),
                                                     0.3),
                                           dts[d]),
                                cft_astype(cft_random_normal(cft_random_key(41), CFT_F32,
                                                             (int64_t[]){5, 2, 7, 7}, 4),
                                           dts[d])};
            cft_fn *f = cft_fn_new(conv_net, NULL, 2, 1), *j = cft_jit(f);
            cft_array *e = cft_fn_call1(f, in);
            CHECK(!cft_failed(e) && cft_array_dtype(e) == dts[d]);
            for (int r = 0; r < 2; r++)
                CHECK_ARRAY_CLOSE(cft_fn_call1(j, in), e, 0, 0);
        }
    }

    TEST("rounding to bf16 in a kernel: ties to even, NaN, infinities, overflow, subnormals") {
        float v[16] = {1 + 1.0f / 256, 1 + 3.0f / 256, 1 + 1.5f / 256, -1 - 1.0f / 256, NAN,
                       -NAN,           INFINITY,       -INFINITY,      3.4e38f,         -3.4e38f,
                       1e-39f,         -1e-40f,        0.0f,           -0.0f,           65504.0f,
                       1.00390625f};
        float big[4096];
        for (int i = 0; i < 4096; i++) /* enough to take the vector loop */
            big[i] = v[i % 16] * (i < 16 ? 1.0f : 1.0f + (float)(i % 7) / 8);
        cft_array *a = cft_from_data(big, CFT_F32, (int64_t[]){4096}, 1);
        cft_fn *f = cft_fn_new(to_bf16, NULL, 1, 1), *j = cft_jit(f);
        cft_array *e = cft_fn_call1(f, &a);
        for (int r = 0; r < 2; r++) {
            cft_array *g = cft_fn_call1(j, &a);
            CHECK(cft_array_dtype(g) == CFT_BF16);
            /* compare the stored bits (NaN != NaN as values) */
            uint16_t ge[4096], gg[4096];
            CHECK(cft_copy_to(e, CFT_BF16, ge) == CFT_OK);
            CHECK(cft_copy_to(g, CFT_BF16, gg) == CFT_OK);
            CHECK(memcmp(ge, gg, sizeof ge) == 0);
        }
    }
    return check_summary();
}
