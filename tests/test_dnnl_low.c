/* test_dnnl_low.c: autocast's bf16 / f16 products on oneDNN
 * (prims/matmul_dnnl.c, dot.c's and conv.c's low-precision rules).
 *
 * The layout logic (operands of any dim order, batch dims anywhere,
 * several contracting and free dims, transposed views, copied to
 * [batch, M, K] x [batch, K, N] or read as they lie where each matrix is
 * turned) is checked in f32 on every CPU, through
 * the same call dot_general's bf16 rule makes, against cft's OpenBLAS path
 * (rtol 1e-5, atol 1e-6 * K: the two sum in other orders), from several
 * threads at once and at two thread counts. Public bf16 / f16 products
 * and convolutions are checked against the widened path (the operands
 * converted to f32, the f32 product rounded once): on a CPU with oneDNN's
 * bf16 kernels the two sum the same rounded operands in f32 in other
 * orders, so an element may round the other way: within one bf16 ulp
 * (2^-7 relative, f16 2^-10) plus 1e-6 * K absolute for cancellation; on a
 * CPU without them, the library says so once and the results are the
 * widened path's. Skipped (77) where oneDNN is not built in. */
#include <pthread.h>
#include <stdio.h>

#include "check.h"
#include "prims/matmul_dnnl.h"
#include "prims/rules.h"

static cft_array *rnd(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd);
}

typedef struct {
    int64_t as[4], bs[4];
    int and, bnd;
    int lc[2], rc[2], nc, lb[2], rb[2], nb;
    bool ta;  /* lhs given as a transposed view of its reverse */
    int turn; /* 1: lhs, 2: rhs given as a view with its last two dims swapped */
} dcase;

static const dcase cases[] = {
    {{5, 7}, {7, 9}, 2, 2, {1}, {0}, 1, {0}, {0}, 0, false, 0},
    {{17, 33}, {33, 65}, 2, 2, {1}, {0}, 1, {0}, {0}, 0, true, 0},
    {{3, 5, 7}, {3, 7, 9}, 3, 3, {2}, {1}, 1, {0}, {0}, 1, false, 0},
    {{5, 3, 7}, {7, 3, 9}, 3, 3, {2}, {0}, 1, {1}, {1}, 1, false, 0},
    {{4, 6, 5}, {6, 5, 3, 2}, 3, 4, {1, 2}, {0, 1}, 2, {0}, {0}, 0, false, 0},
    {{2, 4, 6, 5}, {2, 6, 3}, 4, 3, {2}, {1}, 1, {0}, {0}, 1, false, 0},
    {{64, 1}, {1, 48}, 2, 2, {1}, {0}, 1, {0}, {0}, 0, false, 0},
    /* operands oneDNN reads as they lie, their matrices turned (x^T, W^T
     * of a backward pass): batched and not, either or both */
    {{20, 30}, {30, 40}, 2, 2, {1}, {0}, 1, {0}, {0}, 0, false, 2},
    {{20, 30}, {30, 40}, 2, 2, {1}, {0}, 1, {0}, {0}, 0, false, 3},
    {{3, 5, 7}, {3, 7, 9}, 3, 3, {2}, {1}, 1, {0}, {0}, 1, false, 1},
    {{4, 9, 6}, {4, 6, 11}, 3, 3, {2}, {1}, 1, {0}, {0}, 1, false, 2},
    {{2, 3, 8, 5}, {2, 3, 5, 6}, 4, 4, {3}, {2}, 1, {0, 1}, {0, 1}, 2, false, 3},
    /* x^T dy: the sum over the batch rows (lhs's axis 0 contracted) */
    {{64, 12}, {64, 10}, 2, 2, {0}, {0}, 1, {0}, {0}, 0, false, 0},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* random values of shape s (nd dims), as a view with its last two dims
 * swapped when turned */
static cft_array *rnd_turned(uint64_t seed, const int64_t *s, int nd, bool turned) {
    if (!turned)
        return rnd(seed, s, nd);
    int64_t t[4];
    int perm[4];
    for (int i = 0; i < nd; i++)
        t[i] = s[i], perm[i] = i;
    t[nd - 2] = s[nd - 1], t[nd - 1] = s[nd - 2];
    perm[nd - 2] = nd - 1, perm[nd - 1] = nd - 2;
    return cft_transpose(rnd(seed, t, nd), perm);
}

static cft_array *lhs_of(const dcase *c, uint64_t seed) {
    if (!c->ta)
        return rnd_turned(seed, c->as, c->and, c->turn & 1);
    int64_t rev[4];
    for (int i = 0; i < c->and; i++)
        rev[i] = c->as[c->and -1 - i];
    return cft_transpose(rnd(seed, rev, c->and), NULL);
}

static int64_t contracted(const dcase *c) {
    int64_t K = 1;
    for (int i = 0; i < c->nc; i++)
        K *= c->as[c->lc[i]];
    return K;
}

static cft_params params_of(const dcase *c) {
    cft_params p = {0};
    cft__param_set_int(&p, 0, c->lc, c->nc);
    cft__param_set_int(&p, 1, c->rc, c->nc);
    cft__param_set_int(&p, 2, c->lb, c->nb);
    cft__param_set_int(&p, 3, c->rb, c->nb);
    return p;
}

/* every case through oneDNN's f32 matmul against cft_dot_general */
static int check_cases(uint64_t seed) {
    int bad = 0;
    for (int k = 0; k < NCASES; k++) {
        const dcase *c = &cases[k];
        cft_array *a = lhs_of(c, seed + (uint64_t)k),
                  *b = rnd_turned(seed + 100 + (uint64_t)k, c->bs, c->bnd, c->turn & 2);
        cft_params p = params_of(c);
        cft_array *got = cft__dot_dnnl(a, b, &p, 0, 0);
        cft_array *want = cft_dot_general(a, b, c->lc, c->rc, c->nc, c->lb, c->rb, c->nb);
        if (!got || cft_failed(want)) {
            bad++;
            continue;
        }
        double K = (double)contracted(c);
        cft_array *d = cft_max(cft_abs(cft_sub(got, want)), NULL, 0, false);
        cft_array *lim = cft_add_s(cft_mul_s(cft_abs(want), 1e-5), 1e-6 * K);
        if (cft_array_ndim(got) != cft_array_ndim(want) || cft_item(d) < 0 ||
            cft_item(cft_sum(cft_astype(cft_gt(cft_abs(cft_sub(got, want)), lim), CFT_F32), NULL, 0,
                             false)) != 0)
            bad++;
    }
    return bad;
}

static void *thread_cases(void *arg) {
    return (void *)(intptr_t)check_cases((uint64_t)(intptr_t)arg);
}

/* got within one ulp of dtype (relative ulp) of want, plus 1e-6 * K */
static void check_low(cft_array *got, cft_array *want, double ulp, double K) {
    CHECK(cft_array_dtype(got) == cft_array_dtype(want));
    cft_array *g = cft_astype(got, CFT_F64), *w = cft_astype(want, CFT_F64);
    cft_array *over =
        cft_gt(cft_abs(cft_sub(g, w)), cft_add_s(cft_mul_s(cft_abs(w), ulp), 1e-6 * K));
    CHECK_EQ(cft_item(cft_sum(cft_astype(over, CFT_F32), NULL, 0, false)), 0);
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    {
        cft_array *a = rnd(1, (int64_t[]){4, 4}, 2), *b = rnd(2, (int64_t[]){4, 4}, 2);
        cft_params p = params_of(&cases[0]);
        p.v[0][0] = 1, p.v[1][0] = 0;
        if (!cft__dot_dnnl(a, b, &p, 0, 0)) {
            printf("SKIP: oneDNN is not built in\n");
            return 77;
        }
    }
    printf("oneDNN bf16 kernels on this CPU: %s; f16: %s\n", cft__dnnl_low_ok(1) ? "yes" : "no",
           cft__dnnl_low_ok(2) ? "yes" : "no");

    TEST("dot_general's layouts on oneDNN's matmul equal OpenBLAS's products (f32)") {
        long turned = cft__dnnl_turned_runs;
        CHECK_EQ(check_cases(10), 0);
        /* the cases with turned operands (and the transposed lhs) read
         * them as they lie: no copy */
        CHECK(cft__dnnl_turned_runs - turned >= 6);
    }

    TEST("at one thread and at two") {
        int before = cft_get_num_threads();
        cft_set_num_threads(1);
        CHECK_EQ(check_cases(20), 0);
        cft_set_num_threads(2);
        CHECK_EQ(check_cases(30), 0);
        cft_set_num_threads(before);
    }

    TEST("from four threads at once") {
        pthread_t th[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&th[i], NULL, thread_cases, (void *)(intptr_t)(40 + 10 * i));
        for (int i = 0; i < 4; i++) {
            void *r;
            pthread_join(th[i], &r);
            CHECK_EQ((int)(intptr_t)r, 0);
        }
    }

    TEST("bf16 and f16 products: the widened product, to an ulp") {
        cft_dtype dts[2] = {CFT_BF16, CFT_F16};
        double ulp[2] = {1.0 / 128, 1.0 / 1024};
        for (int d = 0; d < 2; d++) {
            cft_array *a = cft_astype(rnd(3, (int64_t[]){64, 96}, 2), dts[d]);
            cft_array *b = cft_astype(rnd(4, (int64_t[]){96, 80}, 2), dts[d]);
            cft_array *want =
                cft_astype(cft_matmul(cft_astype(a, CFT_F32), cft_astype(b, CFT_F32)), dts[d]);
            check_low(cft_matmul(a, b), want, ulp[d], 96);
            /* a transposed operand and a batch */
            cft_array *at = cft_transpose(cft_astype(rnd(5, (int64_t[]){96, 64}, 2), dts[d]), NULL);
            want = cft_astype(cft_matmul(cft_astype(at, CFT_F32), cft_astype(b, CFT_F32)), dts[d]);
            check_low(cft_matmul(at, b), want, ulp[d], 96);
            cft_array *x = cft_astype(rnd(6, (int64_t[]){3, 40, 32}, 3), dts[d]);
            cft_array *y = cft_astype(rnd(7, (int64_t[]){3, 32, 48}, 3), dts[d]);
            want = cft_astype(cft_matmul(cft_astype(x, CFT_F32), cft_astype(y, CFT_F32)), dts[d]);
            check_low(cft_matmul(x, y), want, ulp[d], 32);
        }
    }

    TEST("bf16 convolutions and their weight gradients: the widened ones, to an ulp") {
        cft_array *x = cft_astype(rnd(8, (int64_t[]){4, 8, 12, 12}, 4), CFT_BF16);
        cft_array *w = cft_astype(rnd(9, (int64_t[]){16, 8, 3, 3}, 4), CFT_BF16);
        int64_t pad[4] = {1, 1, 1, 1};
        cft_array *got = cft_conv_general_dilated(x, w, NULL, pad, NULL, NULL, 1, 1);
        cft_array *want =
            cft_astype(cft_conv_general_dilated(cft_astype(x, CFT_F32), cft_astype(w, CFT_F32),
                                                NULL, pad, NULL, NULL, 1, 1),
                       CFT_BF16);
        check_low(got, want, 1.0 / 128, 72);
        /* vjp: the weight gradient is a convolution of swapped operands */
        cft_array *ct = cft_astype(rnd(10, (int64_t[]){4, 16, 12, 12}, 4), CFT_BF16);
        cft_array *swx = cft_transpose(x, (int[]){1, 0, 2, 3}),
                  *swc = cft_transpose(ct, (int[]){1, 0, 2, 3});
        got = cft_conv_general_dilated(swx, swc, NULL, pad, NULL, NULL, 1, 1);
        want =
            cft_astype(cft_conv_general_dilated(cft_astype(swx, CFT_F32), cft_astype(swc, CFT_F32),
                                                NULL, pad, NULL, NULL, 1, 1),
                       CFT_BF16);
        check_low(got, want, 1.0 / 128, 4 * 144);
    }

    TEST("CFT_DNNL_LOW=0 gives the widened path's bits") {
        /* read on every call, so it can be set here */
        setenv("CFT_DNNL_LOW", "0", 1);
        cft_array *a = cft_astype(rnd(11, (int64_t[]){64, 96}, 2), CFT_BF16);
        cft_array *b = cft_astype(rnd(12, (int64_t[]){96, 80}, 2), CFT_BF16);
        cft_array *want =
            cft_astype(cft_matmul(cft_astype(a, CFT_F32), cft_astype(b, CFT_F32)), CFT_BF16);
        CHECK_ARRAY_CLOSE(cft_matmul(a, b), want, 0, 0);
        unsetenv("CFT_DNNL_LOW");
    }
    return check_summary();
}
