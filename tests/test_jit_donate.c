/* test_jit_donate.c: cft_jit_donate. An SGD step with the parameters
 * donated gives the same values as without donation, step after step
 * (exactly: the same plan), writes its new parameters into the donated
 * buffers once the plan has an arena (cft_jit_donated_count), and leaves
 * each donated input an error array naming the donation. A donated input
 * that an output returns or views, or that is passed twice, keeps its
 * buffer; inside another transform the function is f. */
#include <string.h>

#include "cft/cft.h"
#include "check.h"

/* (w, g, lr) -> w - lr * g */
static cft_status sgd(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sub(in[0], cft_mul(in[2], in[1]));
    return CFT_OK;
}
/* (w, x) -> tanh(w @ x + w): the GEMM reads w while its output (w's aval)
 * is written, and the sum reads w again after */
static cft_status gemm_step(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_tanh(cft_add(cft_matmul(in[0], in[1]), in[0]));
    return CFT_OK;
}

/* (w, v) -> (reshape(w), w * v) */
static cft_status view_and_new(void *env, int nin, cft_array *const *in, int nout,
                               cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_reshape(in[0], (int64_t[]){-1}, 1);
    out[1] = cft_mul(in[0], in[1]);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_fn *f = cft_fn_new(sgd, NULL, 3, 1);
    cft_array *g = cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){256, 128}, 2),
              *lr = cft_scalar(0.1, CFT_F32);
    TEST("an SGD step with the parameters donated") {
        cft_fn *d = cft_jit_donate(f, (int[]){0}, 1), *plain = cft_jit(f);
        cft_array *w = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){256, 128}, 2);
        cft_array *wref = cft_add_s(w, 0); /* its own copy for the plain path */
        for (int step = 0; step < 5; step++) {
            cft_array *in[3] = {w, g, lr}, *ref_in[3] = {wref, g, lr}, *o[1], *r[1];
            CHECK_EQ(cft_fn_call(d, in, o), CFT_OK);
            CHECK_EQ(cft_fn_call(plain, ref_in, r), CFT_OK);
            CHECK_ARRAY_CLOSE(o[0], r[0], 0, 0);
            CHECK(cft_failed(w) && strstr(cft_error_message(w), "donated"));
            CHECK(!cft_failed(wref)); /* not donated */
            w = o[0], wref = r[0];
        }
        CHECK_MSG(cft_jit_donated_count(d) >= 3, "%lld reused",
                  (long long)cft_jit_donated_count(d));
        CHECK_EQ(cft_jit_donated_count(plain), 0);
    }
    TEST("an input an output views, or one passed twice, keeps its buffer") {
        cft_fn *d = cft_jit_donate(cft_fn_new(view_and_new, NULL, 2, 2), (int[]){0}, 1);
        cft_array *w = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){64, 32}, 2);
        cft_array *v = cft_random_normal(cft_random_key(4), CFT_F32, (int64_t[]){64, 32}, 2);
        for (int k = 0; k < 3; k++) {
            cft_array *wc = cft_add_s(w, 0), *in[2] = {wc, v}, *o[2];
            CHECK_EQ(cft_fn_call(d, in, o), CFT_OK);
            /* the view still reads w's values: its buffer was not reused */
            CHECK_ARRAY_CLOSE(cft_reshape(o[0], (int64_t[]){64, 32}, 2), w, 0, 0);
            CHECK_ARRAY_CLOSE(o[1], cft_mul(w, v), 0, 0);
            CHECK(!cft_failed(wc)); /* an output views it: it stays valid */
        }
        cft_array *wv = cft_slice(cft_add_s(w, 0), (int64_t[]){1, 0}, (int64_t[]){64, 32}, NULL);
        cft_array *o2[1];
        cft_fn *dv = cft_jit_donate(f, (int[]){0}, 1);
        cft_array *gv = cft_zeros(CFT_F32, (int64_t[]){63, 32}, 2);
        for (int k = 0; k < 3; k++) { /* a view (offset 1 row): never taken, stays valid */
            CHECK_EQ(cft_fn_call(dv, (cft_array *[]){wv, gv, lr}, o2), CFT_OK);
            CHECK(!cft_failed(wv));
        }
        CHECK_EQ(cft_jit_donated_count(d), 0);
        cft_fn *twice = cft_jit_donate(f, (int[]){0}, 1);
        cft_array *w2 = cft_random_normal(cft_random_key(5), CFT_F32, (int64_t[]){256, 128}, 2);
        for (int k = 0; k < 3; k++) {
            cft_array *in[3] = {w2, w2, lr}, *o[1]; /* w - lr * w */
            CHECK_EQ(cft_fn_call(twice, in, o), CFT_OK);
            CHECK(!cft_failed(w2));
        }
    }
    TEST("a GEMM that reads the donated input while writing an output of its aval") {
        cft_fn *d = cft_jit_donate(cft_fn_new(gemm_step, NULL, 2, 1), (int[]){0}, 1),
               *plain = cft_jit(cft_fn_new(gemm_step, NULL, 2, 1));
        cft_array *w = cft_random_normal(cft_random_key(7), CFT_F32, (int64_t[]){64, 64}, 2),
                  *x = cft_mul_s(
                      cft_random_normal(cft_random_key(8), CFT_F32, (int64_t[]){64, 64}, 2), 0.1),
                  *wr = cft_add_s(w, 0);
        for (int k = 0; k < 4; k++) {
            cft_array *o[1], *r[1];
            CHECK_EQ(cft_fn_call(d, (cft_array *[]){w, x}, o), CFT_OK);
            CHECK_EQ(cft_fn_call(plain, (cft_array *[]){wr, x}, r), CFT_OK);
            CHECK_ARRAY_CLOSE(o[0], r[0], 0, 0);
            w = o[0], wr = r[0];
        }
    }
    TEST("inside a transform it is f; bad argnums") {
        cft_fn *d = cft_jit_donate(f, (int[]){0}, 1);
        cft_array *w = cft_random_normal(cft_random_key(6), CFT_F32, (int64_t[]){4, 3}, 2);
        cft_array *gs[1];
        cft_fn *loss = cft_fn_new(sgd, NULL, 3, 1);
        (void)loss;
        CHECK_EQ(cft_fn_call(cft_jacfwd(d, NULL, 0),
                             (cft_array *[]){w, cft_ones(CFT_F32, (int64_t[]){4, 3}, 2), lr}, gs),
                 CFT_OK);
        CHECK(!cft_failed(w));
        CHECK(cft_fn_failed(cft_jit_donate(f, (int[]){5}, 1)));
        CHECK(cft_fn_failed(cft_jit_donate(f, NULL, 2)));
        CHECK_EQ(cft_jit_donated_count(f), -1);
    }
    return check_summary();
}
