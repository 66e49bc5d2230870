/* test_debug_print.c: cft_debug_print prints values where a tracer stands:
 * eagerly, inside a traced function at every call (not at trace time
 * only), inside a jitted plan at every call, under vmap (the batch), under
 * grad (the primal), and even when its result is unused; and it changes
 * nothing: values, gradients and vmap equal the same function without it.
 * Output is captured with open_memstream. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"
#include "check.h"

static bool print_it = true;
static cft_status f(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_sin(in[0]);
    if (print_it) {
        h = cft_debug_print("h", h);
        cft_debug_print("unused", cft_mul_s(h, 2)); /* result dropped: still printed */
    }
    out[0] = cft_sum(cft_mul(h, h), NULL, 0, false);
    return CFT_OK;
}

static char *buf;
static size_t len;
static FILE *mem;
static void capture(void) {
    if (mem)
        fclose(mem);
    free(buf);
    buf = NULL;
    mem = open_memstream(&buf, &len);
    cft_debug_set_stream(mem);
}
static int count(const char *needle) {
    fflush(mem);
    int n = 0;
    for (const char *p = buf; p && (p = strstr(p, needle)); p++)
        n++;
    return n;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    cft_fn *fn = cft_fn_new(f, NULL, 1, 1);
    cft_array *x = cft_arange(0, 3, 1, CFT_F64);
    TEST("printed at every call: eager, traced, jitted") {
        capture();
        cft_fn_call1(fn, &x);
        cft_fn_call1(fn, &x); /* the second call runs the cached trace */
        CHECK_EQ(count("h: "), 2);
        CHECK_EQ(count("unused: "), 2);
        cft_fn *j = cft_jit(fn);
        capture();
        for (int k = 0; k < 3; k++)
            cft_fn_call1(j, &x);
        CHECK_EQ(count("h: "), 3);
        CHECK_EQ(count("unused: "), 3);
    }
    TEST("under grad the primal, under vmap the batch; results unchanged") {
        cft_fn *plain = cft_fn_new(f, NULL, 1, 1);
        capture();
        cft_array *g = cft_fn_call1(cft_grad(fn, NULL, 0), &x);
        CHECK(count("h: ") >= 1);
        print_it = false;
        cft_array *g0 = cft_fn_call1(cft_grad(plain, NULL, 0), &x);
        print_it = true;
        CHECK_ARRAY_CLOSE(g, g0, 0, 0);
        capture();
        cft_array *xb = cft_reshape(cft_arange(0, 6, 1, CFT_F64), (int64_t[]){2, 3}, 2);
        cft_array *v = cft_fn_call1(cft_vmap(fn, NULL, NULL), &xb);
        CHECK(count("h: array([[") >= 1); /* the whole [2, 3] batch, one print */
        CHECK(count("-0.756802") >= 1);   /* sin(4), from the batch's second row */
        print_it = false;
        cft_array *v0 = cft_fn_call1(cft_vmap(plain, NULL, NULL), &xb);
        print_it = true;
        CHECK_ARRAY_CLOSE(v, v0, 0, 0);
    }
    cft_debug_set_stream(NULL);
    if (mem)
        fclose(mem);
    free(buf);
    return check_summary();
}
