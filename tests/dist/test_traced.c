// np: 2 3
/* test_traced.c (mpirun, 2 and 3 ranks): collectives inside traced
 * functions. Each primitive is checked eagerly against the array
 * collectives; its jvp against finite differences (every rank moves its
 * input together); its transpose by the dot-product test summed over ranks,
 * sum_r <ct_r, J t_r> = sum_r <J^T ct_r, t_r>; its vmap against a loop; the
 * jit against the interpreter; and grad of a loss that communicates against
 * the single-process formula. f64, so 1e-10 holds except for finite
 * differences (h = 1e-6: 1e-6 relative). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cft/cft.h"
#include "cft/dist.h"
#include "check.h"

static cft_dist_group *w;
static int rank, size;
static int perm[16];

static cft_array *randn(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F64, shape, nd);
}
/* the same on every rank, or different per rank */
static cft_array *per_rank(uint64_t seed, const int64_t *shape, int nd) {
    return randn(seed * 131 + (uint64_t)rank, shape, nd);
}

typedef cft_array *(*op_fn)(cft_array *x);
static cft_array *op_psum(cft_array *x) {
    return cft_psum(x, w);
}
static cft_array *op_pmean(cft_array *x) {
    return cft_pmean(x, w);
}
static cft_array *op_gather(cft_array *x) {
    return cft_all_gather(x, w);
}
static cft_array *op_scatter(cft_array *x) {
    return cft_psum_scatter(x, w);
}
static cft_array *op_perm(cft_array *x) {
    return cft_ppermute(x, w, perm);
}

static op_fn current;
static cft_status op_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = current(in[0]);
    return CFT_OK;
}
/* a nonlinear function around the collective, so chain rules are exercised */
static cft_status loss_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_sin(current(cft_tanh(in[0]))), NULL, 0, false);
    return CFT_OK;
}

static double dot(cft_array *a, cft_array *b) {
    return cft_item(cft_sum(cft_mul(a, b), NULL, 0, false));
}
static double allsum(double v) {
    return cft_item(cft_dist_all_reduce(w, cft_scalar(v, CFT_F64), CFT_DIST_SUM));
}

static void check_op(const char *name, op_fn op, const int64_t *shape, int nd) {
    current = op;
    cft_fn *f = cft_fn_new(op_cb, NULL, 1, 1);
    cft_array *x = per_rank(1, shape, nd), *t = per_rank(2, shape, nd);
    TEST("rank %d of %d: %s: traced call equals eager, jit equals interpreter", rank, size, name) {
        cft_array *eager = op(x), *traced = cft_fn_call1(f, &x), *jit = NULL;
        CHECK_ARRAY_CLOSE(traced, eager, 1e-12, 1e-12);
        cft_fn *j = cft_jit(f);
        for (int i = 0; i < 3; i++)
            jit = cft_fn_call1(j, &x);
        CHECK_ARRAY_CLOSE(jit, eager, 1e-12, 1e-12);
    }
    TEST("rank %d: %s: jvp against finite differences", rank, name) {
        cft_array *out[2];
        CHECK_EQ(cft_fn_call(cft_jvp(f), (cft_array *[]){x, t}, out), CFT_OK);
        double h = 1e-6;
        cft_array *fd =
            cft_mul_s(cft_sub(cft_fn_call1(f, (cft_array *[]){cft_add(x, cft_mul_s(t, h))}),
                              cft_fn_call1(f, (cft_array *[]){cft_sub(x, cft_mul_s(t, h))})),
                      0.5 / h);
        CHECK_ARRAY_CLOSE(out[1], fd, 1e-6, 1e-8);
    }
    TEST("rank %d: %s: transpose by the dot-product test over ranks", rank, name) {
        cft_array *y = cft_fn_call1(f, &x),
                  *ct = per_rank(3, cft_array_aval(y).shape, cft_array_ndim(y));
        cft_array *outs[1];
        cft_fn *pb = NULL;
        CHECK_EQ(cft_vjp(f, (cft_array *[]){x}, outs, &pb), CFT_OK);
        cft_array *jt = cft_fn_call1(pb, &ct);
        cft_array *jv[2];
        CHECK_EQ(cft_fn_call(cft_jvp(f), (cft_array *[]){x, t}, jv), CFT_OK);
        double lhs = allsum(dot(ct, jv[1])), rhs = allsum(dot(jt, t));
        CHECK_CLOSE(lhs, rhs, 1e-10, 1e-10);
    }
    TEST("rank %d: %s: vmap equals a loop over the batch", rank, name) {
        int64_t bs[CFT_MAX_NDIM + 1] = {3};
        memcpy(bs + 1, shape, sizeof(int64_t) * (size_t)nd);
        cft_array *xb = per_rank(4, bs, nd + 1);
        cft_array *got = cft_fn_call1(cft_vmap(f, NULL, NULL), &xb), *rows[3];
        for (int b = 0; b < 3; b++)
            rows[b] = op(cft_index(xb, b));
        CHECK_ARRAY_CLOSE(got, cft_stack(rows, 3, 0), 1e-12, 1e-12);
        /* batched along another axis (in_axes 1 when there is one) */
        if (nd >= 1) {
            cft_array *xt = cft_moveaxis(xb, 0, 1);
            got = cft_fn_call1(cft_vmap(f, (int[]){1}, NULL), &xt);
            CHECK_ARRAY_CLOSE(got, cft_stack(rows, 3, 0), 1e-12, 1e-12);
        }
    }
    TEST("rank %d: %s: grad of a loss through it, jitted and vmapped", rank, name) {
        current = op;
        cft_fn *loss = cft_fn_new(loss_cb, NULL, 1, 1);
        cft_array *g = cft_fn_call1(cft_grad(loss, NULL, 0), &x);
        /* finite differences of the global objective: each rank's x moves
         * along t, and the derivative of this rank's loss comes from every
         * rank's move: compare <g, t> summed over ranks with the change of
         * the sum of the losses */
        double h = 1e-6;
        double lp = cft_item(cft_fn_call1(loss, (cft_array *[]){cft_add(x, cft_mul_s(t, h))}));
        double lm = cft_item(cft_fn_call1(loss, (cft_array *[]){cft_sub(x, cft_mul_s(t, h))}));
        double fd = allsum((lp - lm) / (2 * h)), an = allsum(dot(g, t));
        CHECK_CLOSE(an, fd, 1e-6, 1e-8);
        cft_array *gj = cft_fn_call1(cft_jit(cft_grad(loss, NULL, 0)), &x);
        gj = cft_fn_call1(cft_jit(cft_grad(loss, NULL, 0)), &x);
        CHECK_ARRAY_CLOSE(gj, g, 1e-10, 1e-12);
    }
}

int main(int argc, char **argv) {
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    w = cft_dist_world();
    rank = cft_dist_rank(w), size = cft_dist_size(w);
    for (int r = 0; r < size; r++)
        perm[r] = (r + 1) % size; /* a ring */
    const int64_t s23[2] = {2, 3}, sp3[2] = {size, 3};
    check_op("psum", op_psum, s23, 2);
    check_op("pmean", op_pmean, s23, 2);
    check_op("all_gather", op_gather, s23, 2);
    check_op("psum_scatter", op_scatter, sp3, 2);
    check_op("ppermute (ring)", op_perm, s23, 2);
    if (size > 2) { /* a partial permutation: rank 0 -> 1 only; others get zeros */
        for (int r = 0; r < size; r++)
            perm[r] = r == 0 ? 1 : -1;
        check_op("ppermute (partial)", op_perm, s23, 2);
    }
    TEST("rank %d: the values: psum is the sum, all_gather the stack, psum_scatter a block", rank) {
        cft_array *x = per_rank(9, s23, 2), *parts[16];
        for (int r = 0; r < size; r++)
            parts[r] = randn(9 * 131 + (uint64_t)r, s23, 2);
        cft_array *sum = parts[0];
        for (int r = 1; r < size; r++)
            sum = cft_add(sum, parts[r]);
        CHECK_ARRAY_CLOSE(cft_psum(x, w), sum, 1e-12, 1e-12);
        CHECK_ARRAY_CLOSE(cft_all_gather(x, w), cft_stack(parts, size, 0), 0, 0);
        CHECK_ARRAY_CLOSE(cft_psum_scatter(cft_stack(parts, size, 0), w),
                          cft_mul_s(parts[rank], size), 1e-12, 1e-12);
        /* a destination twice is not a permutation */
        cft_array *e = cft_ppermute(x, w, (int[]){0, 0, 0, 0});
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_ppermute"));
    }
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    return check_summary();
}
