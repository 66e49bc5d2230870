/* test_einsum.c: einsum, tensordot, outer, matrix_trace and swapaxes. Every spec
 * against a naive evaluator (a loop over every assignment of the labels,
 * in f64: 1e-12 relative), then for a three-operand spec with a diagonal:
 * jvp against central differences (1e-7), the vjp's dot-product test
 * (1e-12), vmap against a loop and the jit against the interpreter. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include "cft/cft.h"
#include "check.h"

/* the naive einsum of n f64 operands (spec with "->"), into out */
static void naive(const char *spec, int n, double *const *v, cft_array *const *xs, double *out,
                  int64_t *outn) {
    char lab[8][9], outl[9] = {0}, all[27] = {0};
    int nl[8], na = 0;
    int64_t size[128] = {0};
    const char *p = spec;
    for (int k = 0; k < n; k++) {
        nl[k] = 0;
        while (*p >= 'A' && *p <= 'z' && *p != ',')
            lab[k][nl[k]++] = *p++;
        if (*p == ',')
            p++;
        cft_aval a = cft_array_aval(xs[k]);
        for (int i = 0; i < nl[k]; i++) {
            size[(int)lab[k][i]] = a.shape[i];
            if (!strchr(all, lab[k][i]))
                all[na++] = lab[k][i];
        }
    }
    p += 2; /* "->" */
    snprintf(outl, sizeof outl, "%s", p);
    int no = (int)strlen(outl);
    int64_t total = 1, on = 1;
    for (int i = 0; i < na; i++)
        total *= size[(int)all[i]];
    for (int i = 0; i < no; i++)
        on *= size[(int)outl[i]];
    *outn = on;
    memset(out, 0, sizeof(double) * (size_t)on);
    int64_t idx[128];
    for (int64_t it = 0; it < total; it++) {
        int64_t r = it;
        for (int i = na - 1; i >= 0; i--)
            idx[(int)all[i]] = r % size[(int)all[i]], r /= size[(int)all[i]];
        double prod = 1;
        for (int k = 0; k < n; k++) {
            int64_t off = 0;
            for (int i = 0; i < nl[k]; i++)
                off = off * size[(int)lab[k][i]] + idx[(int)lab[k][i]];
            prod *= v[k][off];
        }
        int64_t o = 0;
        for (int i = 0; i < no; i++)
            o = o * size[(int)outl[i]] + idx[(int)outl[i]];
        out[o] += prod;
    }
}

static cft_array *rnd(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F64, shape, nd);
}

typedef struct {
    const char *spec, *explicit_spec; /* the spec, and with its implied "->" */
    int n;
    int nd[3];
    int64_t shape[3][4];
} row;

static const row rows[] = {
    {"ij,jk->ik", NULL, 2, {2, 2}, {{3, 4}, {4, 5}}},
    {"ij,jk", "ij,jk->ik", 2, {2, 2}, {{3, 4}, {4, 5}}},
    {"ii->i", NULL, 1, {2}, {{4, 4}}},
    {"ii", "ii->", 1, {2}, {{4, 4}}},
    {"ij->ji", NULL, 1, {2}, {{3, 5}}},
    {"bij,bjk->bik", NULL, 2, {3, 3}, {{2, 3, 4}, {2, 4, 3}}},
    {"Naf,Mbf->NMab", NULL, 2, {3, 3}, {{3, 2, 4}, {2, 3, 4}}},
    {"i,i->", NULL, 2, {1, 1}, {{5}, {5}}},
    {"i,j->ij", NULL, 2, {1, 1}, {{3}, {4}}},
    {"abc,cd,de->abe", NULL, 3, {3, 2, 2}, {{2, 3, 4}, {4, 3}, {3, 2}}},
    {"ij,ij->ij", NULL, 2, {2, 2}, {{3, 4}, {3, 4}}},
    {"iij,jk,k->i", NULL, 3, {3, 2, 1}, {{3, 3, 2}, {2, 4}, {4}}},
    {"ab,bc,ca->", NULL, 3, {2, 2, 2}, {{2, 3}, {3, 4}, {4, 2}}},
};

static const row *cur;
static cft_status ein(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nout;
    out[0] = cft_einsum(cur->spec, nin, in);
    return cft_failed(out[0]) ? cft_last_error() : CFT_OK;
}

static cft_status bij_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_einsum2("bi,ij->bj", in[0], in[1]);
    return CFT_OK;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const row *w = &rows[r];
        TEST("einsum '%s' against the naive sum", w->spec) {
            cft_array *xs[3];
            double *v[3];
            for (int k = 0; k < w->n; k++) {
                xs[k] = rnd(r * 10 + (uint64_t)k, w->shape[k], w->nd[k]);
                v[k] = malloc(sizeof(double) * (size_t)cft_array_size(xs[k]));
                cft_copy_to(xs[k], CFT_F64, v[k]);
            }
            cft_array *y = cft_einsum(w->spec, w->n, xs);
            CHECK(!cft_failed(y));
            double want[256];
            int64_t on;
            naive(w->explicit_spec ? w->explicit_spec : w->spec, w->n, v, xs, want, &on);
            CHECK_EQ(cft_array_size(y), on);
            double got[256];
            cft_copy_to(y, CFT_F64, got);
            for (int64_t i = 0; i < on; i++)
                CHECK_CLOSE(got[i], want[i], 1e-12, 1e-12);
            for (int k = 0; k < w->n; k++)
                free(v[k]);
        }
    }
    TEST("einsum's jvp, vjp, vmap and jit ('iij,jk,k->i')") {
        cur = &rows[11];
        cft_fn *f = cft_fn_new(ein, NULL, 3, 1);
        cft_array *x[3], *t[3];
        for (int k = 0; k < 3; k++) {
            x[k] = rnd(100 + (uint64_t)k, cur->shape[k], cur->nd[k]);
            t[k] = rnd(200 + (uint64_t)k, cur->shape[k], cur->nd[k]);
        }
        cft_array *in[6] = {x[0], x[1], x[2], t[0], t[1], t[2]}, *out[2];
        CHECK_EQ(cft_fn_call(cft_jvp(f), in, out), CFT_OK);
        double h = 1e-5;
        cft_array *xp[3], *xm[3];
        for (int k = 0; k < 3; k++)
            xp[k] = cft_add(x[k], cft_mul_s(t[k], h)), xm[k] = cft_sub(x[k], cft_mul_s(t[k], h));
        cft_array *fd = cft_mul_s(cft_sub(cft_fn_call1(f, xp), cft_fn_call1(f, xm)), 0.5 / h);
        CHECK_ARRAY_CLOSE(out[1], fd, 1e-7, 1e-7);
        cft_array *ys[1], *ct = rnd(300, (int64_t[]){3}, 1), *cts[3];
        cft_fn *pb;
        CHECK_EQ(cft_vjp(f, x, ys, &pb), CFT_OK);
        CHECK_EQ(cft_fn_call(pb, &ct, cts), CFT_OK);
        double lhs = cft_item(cft_sum(cft_mul(ct, out[1]), NULL, 0, false)), rhs = 0;
        for (int k = 0; k < 3; k++)
            rhs += cft_item(cft_sum(cft_mul(cts[k], t[k]), NULL, 0, false));
        CHECK_CLOSE(lhs, rhs, 1e-12, 1e-12);
        cft_array *xb = rnd(400, (int64_t[]){5, 3, 3, 2}, 4); /* vmap over operand 0 */
        cft_array *vy =
            cft_fn_call1(cft_vmap(f, (int[]){0, CFT_NOT_BATCHED, CFT_NOT_BATCHED}, NULL),
                         (cft_array *[]){xb, x[1], x[2]});
        for (int64_t b = 0; b < 5; b++)
            CHECK_ARRAY_CLOSE(cft_index(vy, b),
                              cft_fn_call1(f, (cft_array *[]){cft_index(xb, b), x[1], x[2]}), 1e-13,
                              1e-13);
        CHECK_ARRAY_CLOSE(cft_fn_call1(cft_jit(f), x), ys[0], 1e-13, 1e-13);
    }
    TEST("tensordot, outer, matrix_trace, swapaxes") {
        cft_array *a = rnd(1, (int64_t[]){2, 3, 4}, 3), *b = rnd(2, (int64_t[]){3, 4, 5}, 3);
        CHECK_ARRAY_CLOSE(cft_tensordot_n(a, b, 2), cft_einsum2("ijk,jkl->il", a, b), 1e-13, 1e-13);
        CHECK_ARRAY_CLOSE(cft_tensordot(a, b, (int[]){1}, (int[]){0}, 1),
                          cft_einsum2("ijk,jlm->iklm", a, b), 1e-13, 1e-13);
        cft_array *u = rnd(3, (int64_t[]){3}, 1), *v = rnd(4, (int64_t[]){2, 2}, 2);
        CHECK_ARRAY_CLOSE(cft_outer(u, v),
                          cft_einsum2("i,j->ij", u, cft_reshape(v, (int64_t[]){4}, 1)), 0, 0);
        cft_array *m = rnd(5, (int64_t[]){4, 4}, 2);
        double d[16], tr = 0;
        cft_copy_to(m, CFT_F64, d);
        for (int i = 0; i < 4; i++)
            tr += d[5 * i];
        CHECK_CLOSE(cft_item(cft_matrix_trace(m)), tr, 1e-14, 1e-14);
        CHECK_ARRAY_CLOSE(cft_swapaxes(a, 0, -1), cft_transpose(a, (int[]){2, 1, 0}), 0, 0);
    }
    TEST("einsum with '...': batched, broadcast, implicit output, diagonal, reduction") {
        cft_array *a = cft_random_normal(cft_random_key(31), CFT_F64, (int64_t[]){5, 3, 4}, 3),
                  *b = cft_random_normal(cft_random_key(32), CFT_F64, (int64_t[]){5, 4, 2}, 3),
                  *c = cft_random_normal(cft_random_key(33), CFT_F64, (int64_t[]){4, 2}, 2),
                  *one = cft_random_normal(cft_random_key(34), CFT_F64, (int64_t[]){1, 3, 4}, 3),
                  *sq = cft_random_normal(cft_random_key(35), CFT_F64, (int64_t[]){2, 5, 3, 3}, 4);
        /* batched matmul, with the batch under '...', and the same with names */
        CHECK_ARRAY_CLOSE(cft_einsum2("...ij,...jk->...ik", a, b), cft_matmul(a, b), 1e-12, 1e-14);
        CHECK_ARRAY_CLOSE(cft_einsum2("...ij,...jk->...ik", a, b),
                          cft_einsum2("zij,zjk->zik", a, b), 1e-12, 1e-14);
        /* an operand with no '...' dims, and the implicit output ('...' first) */
        CHECK_ARRAY_CLOSE(cft_einsum2("...ij,jk", a, c), cft_matmul(a, c), 1e-12, 1e-14);
        /* a size-1 '...' dim broadcasts against 5 */
        CHECK_ARRAY_CLOSE(cft_einsum2("...ij,...jk->...ik", one, b), cft_matmul(one, b), 1e-12,
                          1e-14);
        /* diagonals and sums under '...' */
        CHECK_ARRAY_CLOSE(cft_einsum("...ii->...i", 1, &sq), cft_diagonal(sq, 0, -2, -1), 1e-12,
                          1e-14);
        CHECK_ARRAY_CLOSE(cft_einsum("i...->...", 1, &a), cft_sum(a, (int[]){0}, 1, false), 1e-12,
                          1e-14);
        CHECK_ARRAY_CLOSE(cft_einsum("...->", 1, &a), cft_sum(a, NULL, 0, false), 1e-12, 1e-14);
        /* '...' in the middle */
        CHECK_ARRAY_CLOSE(cft_einsum("i...j->j...i", 1, &a), cft_transpose(a, (int[]){2, 1, 0}), 0,
                          0);
        cft_array *e =
            cft_einsum2("...ij,...jk->...ik", a,
                        cft_random_normal(cft_random_key(36), CFT_F64, (int64_t[]){3, 4, 2}, 3));
        CHECK_MSG(cft_failed(e) && strstr(cft_error_message(e), "broadcast"), "%s",
                  cft_error_message(e));
    }
    TEST("einsum errors name the spec and what is wrong") {
        cft_array *a = rnd(1, (int64_t[]){2, 3}, 2), *b = rnd(2, (int64_t[]){4, 5}, 2);
        cft_array *e = cft_einsum2("ij,jk->ik", a, b);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "label 'j'"));
        e = cft_einsum2("ij,jk->iz", a, rnd(3, (int64_t[]){3, 4}, 2));
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "'z'"));
        e = cft_einsum2("ij->ij", a, a);
        CHECK(cft_failed(e));
        e = cft_einsum2("...i,i->", a, a);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "cft_einsum"));
        CHECK(cft_failed(cft_matrix_trace(a)));
        /* two ellipses in one operand (was accepted) */
        e = cft_einsum2("...i...,i->i", a, rnd(4, (int64_t[]){3}, 1));
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "two '...'"));
        e = cft_einsum("...i->......", 1, &a);
        CHECK(cft_failed(e) && strstr(cft_error_message(e), "two '...'"));
    }
    TEST("a symbolic batch dim: traced, exported, loaded and run at two sizes") {
        /* a symbolic size is negative: it was taken for an absent label
         * ("output label 'b' repeated or in no operand") */
        int64_t B = cft_dim_sym("B");
        cft_aval av[2] = {{CFT_F64, 2, {B, 4}}, {CFT_F64, 2, {4, 5}}};
        cft_fn *f = cft_fn_new(bij_cb, NULL, 2, 1);
        cft_ir *ir = cft_make_ir(f, av);
        CHECK_MSG(ir != NULL, "%s", cft_last_error_message());
        char path[64];
        snprintf(path, sizeof path, "/tmp/cft-einsum-%d.cftx", (int)getpid());
        CHECK_EQ(cft_export(f, av, path), CFT_OK);
        cft_fn *g = cft_load_exported(path);
        unlink(path);
        for (int64_t b = 3; b <= 7; b += 4) {
            cft_array *x = rnd(5, (int64_t[]){b, 4}, 2), *w = rnd(6, (int64_t[]){4, 5}, 2), *y[1];
            CHECK_EQ(cft_fn_call(g, (cft_array *[]){x, w}, y), CFT_OK);
            CHECK_ARRAY_CLOSE(y[0], cft_matmul(x, w), 1e-12, 1e-12);
        }
    }
    return check_summary();
}
