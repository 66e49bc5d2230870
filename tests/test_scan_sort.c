/* test_scan_sort.c: scans, sorting and the extra elementwise ops beyond
 * their test_prims rows: sort stability (ascending and descending), sort
 * of several arrays by the first, argsort / sort / top_k on larger random
 * arrays of every dtype against qsort references (index as tie-break),
 * NaN placement (last ascending, first descending and in top_k, as
 * NumPy / torch.topk), -0.0 == 0.0, grad of top_k values (eager, jit,
 * vmap, hessian through sort), cumsum reverse and its transpose, cumprod's
 * exact derivative at zeros, cummax tie rule, cumlogsumexp stability at
 * large inputs, is_finite / rem / div / shifts / bit ops / integer_pow
 * edge cases, and error messages that name the call and the shapes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define UNUSED_ARGS (void)env, (void)nin, (void)nout
#define FN(name)                                                                                   \
    static cft_status name(void *env, int nin, cft_array *const *in, int nout, cft_array **out)

static cft_array *v64(const double *v, int64_t n) {
    return cft_from_f64(v, &n, 1);
}
static cft_array *vi32(const int32_t *v, int64_t n) {
    return cft_from_i32(v, &n, 1);
}
static double *values(const cft_array *x) {
    int64_t n = cft_failed(x) ? 0 : cft_array_size(x);
    double *v = calloc((size_t)n + 1, sizeof(double));
    if (n)
        cft_copy_to(x, CFT_F64, v);
    return v;
}
static bool has(const cft_array *e, const char *needle) {
    return cft_failed(e) && strstr(cft_error_message(e), needle) != NULL;
}

/* ---- qsort references: (value, index), NaN largest, index breaks ties ---- */

typedef struct {
    double v;
    int64_t i;
    int desc;
} item;
static int cmp_item(const void *pa, const void *pb) {
    const item *a = pa, *b = pb;
    int c = 0, an = isnan(a->v), bn = isnan(b->v);
    if (an || bn)
        c = an - bn; /* NaN after numbers */
    else
        c = (a->v > b->v) - (a->v < b->v);
    if (a->desc)
        c = -c;
    return c ? c : (a->i > b->i) - (a->i < b->i);
}
/* perm of line v[0..n) (stride s), stable, ascending or descending */
static void ref_order(const double *v, int64_t n, int64_t s, bool desc, int64_t *perm) {
    item *it = malloc(sizeof(item) * (size_t)(n + 1));
    for (int64_t j = 0; j < n; j++)
        it[j] = (item){v[j * s], j, desc};
    qsort(it, (size_t)n, sizeof(item), cmp_item);
    for (int64_t j = 0; j < n; j++)
        perm[j] = it[j].i;
    free(it);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double unit(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}
/* m x n values: integers in [0, 9] when `ties`, else continuous */
static cft_array *random_matrix(int64_t m, int64_t n, cft_dtype dt, bool ties) {
    double *v = malloc(sizeof(double) * (size_t)(m * n));
    for (int64_t i = 0; i < m * n; i++)
        v[i] = ties ? floor(unit() * 10) : (double)(float)(unit() * 4 - 2);
    cft_array *x = cft_astype(cft_from_f64(v, (int64_t[]){m, n}, 2), dt);
    free(v);
    return x;
}

/* sort, argsort and top_k of x [m, n] along `axis` against the reference */
static void check_against_qsort(cft_array *x, int axis, bool desc) {
    cft_aval a = cft_array_aval(x);
    int64_t m = a.shape[0], n = a.shape[1], lines = axis ? m : n, len = axis ? n : m;
    int64_t s = axis ? 1 : n, step = axis ? n : 1;
    double *xv = values(x), *sv = values(cft_sort(x, axis, desc)),
           *iv = values(cft_argsort(x, axis, desc));
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)len);
    int bad = 0;
    for (int64_t l = 0; l < lines; l++) {
        ref_order(xv + l * step, len, s, desc, perm);
        for (int64_t j = 0; j < len; j++) {
            int64_t at = l * step + j * s;
            double want = xv[l * step + perm[j] * s];
            bad += iv[at] != (double)perm[j];
            bad += !(sv[at] == want || (isnan(sv[at]) && isnan(want)));
        }
    }
    CHECK_MSG(bad == 0, "%d mismatches (%s, axis %d, %s)", bad, cft_dtype_name(a.dtype), axis,
              desc ? "descending" : "ascending");
    if (axis == 1 && desc) {              /* top_k is the descending order's head */
        int64_t ks[4] = {1, 5, n / 3, n}; /* heap selection for k <= n/8, else a sort */
        for (int t = 0; t < 4; t++) {
            cft_array *tv, *ti;
            CHECK_EQ(cft_top_k(x, ks[t], &tv, &ti), CFT_OK);
            double *tvv = values(tv), *tiv = values(ti);
            int tbad = 0;
            for (int64_t l = 0; l < m; l++)
                for (int64_t j = 0; j < ks[t]; j++) {
                    tbad += tiv[l * ks[t] + j] != iv[l * n + j];
                    double w = sv[l * n + j], g = tvv[l * ks[t] + j];
                    tbad += !(g == w || (isnan(g) && isnan(w)));
                }
            CHECK_MSG(tbad == 0, "top_k k=%lld: %d mismatches", (long long)ks[t], tbad);
            free(tvv), free(tiv);
        }
    }
    free(xv), free(sv), free(iv), free(perm);
}

/* ---- functions for the transforms ---- */

static int64_t topk_k = 3;
FN(topk_dot) { /* sum(top_k(x).values * w) */
    UNUSED_ARGS;
    cft_array *v;
    cft_top_k(in[0], topk_k, &v, NULL);
    out[0] = cft_sum(cft_mul(v, in[1]), NULL, 0, false);
    return CFT_OK;
}
FN(sorted_weighted_sq) { /* sum(w * sort(x)^2): hessian 2 diag(w[rank]) */
    UNUSED_ARGS;
    out[0] = cft_sum(cft_mul(in[1], cft_square(cft_sort(in[0], 0, false))), NULL, 0, false);
    return CFT_OK;
}
static bool rev_flag;
FN(cumsum_dot) { /* sum(cumsum(x) * w) */
    UNUSED_ARGS;
    out[0] = cft_sum(cft_mul(cft_cumsum(in[0], 0, rev_flag), in[1]), NULL, 0, false);
    return CFT_OK;
}
FN(cumprod_sum) {
    UNUSED_ARGS;
    out[0] = cft_sum(cft_cumprod(in[0], 0, false), NULL, 0, false);
    return CFT_OK;
}
FN(cummax_f) {
    UNUSED_ARGS;
    out[0] = cft_cummax(in[0], 0, false);
    return CFT_OK;
}
FN(cumlse_f) {
    UNUSED_ARGS;
    out[0] = cft_cumlogsumexp(in[0], 0, false);
    return CFT_OK;
}
FN(sort_f) {
    UNUSED_ARGS;
    out[0] = cft_sort(in[0], -1, false);
    return CFT_OK;
}

FN(scans_f) { /* a mix of scans and sorts, elementwise ops between them */
    UNUSED_ARGS;
    cft_array *x = cft_tanh(in[0]), *v;
    cft_top_k(cft_mul_s(x, 2), 10, &v, NULL);
    cft_array *a = cft_add(cft_cumsum(x, 1, true), cft_cummax(cft_sort(x, 1, true), 1, false));
    cft_array *b = cft_sub(cft_cumlogsumexp(x, 1, true), cft_exp(x));
    out[0] =
        cft_add(cft_sum(cft_mul(a, b), (int[]){1}, 1, false), cft_sum(v, (int[]){1}, 1, false));
    return CFT_OK;
}

FN(rem_f) {
    UNUSED_ARGS;
    out[0] = cft_rem(in[0], in[1]);
    return CFT_OK;
}

static cft_array *jvp1(cft_fn_cb cb, cft_array *x, cft_array *t) {
    cft_array *args[2] = {x, t}, *o[2];
    if (cft_fn_call(cft_jvp(cft_fn_new(cb, NULL, 1, 1)), args, o) != CFT_OK)
        return o[0];
    return o[1];
}

int main(int argc, char **argv) {
    check_init(argc, argv);

    /* ---------------- sort ---------------- */
    TEST("sort is stable: equal keys keep their order (argsort, ascending and descending)") {
        int32_t k[10] = {2, 1, 2, 0, 1, 2, 0, 1, 1, 2};
        cft_array *x = vi32(k, 10);
        double *a = values(cft_argsort(x, 0, false)), *d = values(cft_argsort(x, 0, true));
        double wa[10] = {3, 6, 1, 4, 7, 8, 0, 2, 5, 9}, wd[10] = {0, 2, 5, 9, 1, 4, 7, 8, 3, 6};
        for (int i = 0; i < 10; i++) {
            CHECK_EQ(a[i], wa[i]);
            CHECK_EQ(d[i], wd[i]);
        }
        free(a), free(d);
    }
    TEST("sort_multi: several arrays (f64, i32, bool) sorted by the first along axis 0") {
        double kv[8] = {3, 1, 2, 1, 0, 5, 2, 4}; /* [4, 2]: columns sorted independently */
        int32_t pv[8] = {10, 11, 12, 13, 14, 15, 16, 17};
        cft_array *keys = cft_from_f64(kv, (int64_t[]){4, 2}, 2);
        cft_array *pay = cft_from_i32(pv, (int64_t[]){4, 2}, 2);
        cft_array *flag = cft_gt(keys, cft_scalar(1.5, CFT_F64));
        cft_array *xs[3] = {keys, pay, flag}, *o[3];
        CHECK_EQ(cft_sort_multi(xs, 3, 0, false, o), CFT_OK);
        /* column 0: 3 2 0 2 -> 0 2 2 3 (rows 2 1 3 0); column 1: 1 1 5 4 -> 1 1 4 5 (0 1 3 2) */
        double wk[8] = {0, 1, 2, 1, 2, 4, 3, 5}, wp[8] = {14, 11, 12, 13, 16, 17, 10, 15};
        CHECK_ARRAY_CLOSE(o[0], cft_from_f64(wk, (int64_t[]){4, 2}, 2), 0, 0);
        CHECK_ARRAY_CLOSE(o[1], cft_from_f64(wp, (int64_t[]){4, 2}, 2), 0, 0);
        CHECK(cft_array_dtype(o[1]) == CFT_I32);
        CHECK(cft_array_dtype(o[2]) == CFT_BOOL);
        CHECK_ARRAY_CLOSE(o[2], cft_gt(o[0], cft_scalar(1.5, CFT_F64)), 0, 0);
    }
    TEST("sort / argsort / top_k vs qsort: f64, f32, i32, i64, with and without ties, both axes") {
        cft_dtype dts[4] = {CFT_F64, CFT_F32, CFT_I32, CFT_I64};
        for (int d = 0; d < 4; d++)
            for (int ties = 0; ties < 2; ties++) {
                if (!ties && (dts[d] == CFT_I32 || dts[d] == CFT_I64))
                    continue;
                cft_array *x = random_matrix(37, 101, dts[d], ties);
                for (int axis = 0; axis < 2; axis++)
                    for (int desc = 0; desc < 2; desc++)
                        check_against_qsort(x, axis, desc);
            }
    }
    TEST("sort of a strided view (a transpose) matches the contiguous copy") {
        cft_array *x = random_matrix(17, 23, CFT_F64, true);
        cft_array *xt = cft_transpose(x, NULL);
        CHECK_ARRAY_CLOSE(cft_argsort(xt, 1, false), cft_transpose(cft_argsort(x, 0, false), NULL),
                          0, 0);
        cft_array *v, *i;
        cft_top_k(xt, 5, &v, &i);
        CHECK_ARRAY_CLOSE(
            i, cft_slice(cft_argsort(xt, 1, true), (int64_t[]){0, 0}, (int64_t[]){23, 5}, NULL), 0,
            0);
    }
    TEST("NaN placement: last ascending (as NumPy), first descending and in top_k") {
        double xv[7] = {3, NAN, 1, -INFINITY, NAN, 0, INFINITY};
        cft_array *x = v64(xv, 7);
        double *s = values(cft_sort(x, 0, false)), *a = values(cft_argsort(x, 0, false));
        double ws[5] = {-INFINITY, 0, 1, 3, INFINITY}, wa[7] = {3, 5, 2, 0, 6, 1, 4};
        for (int i = 0; i < 5; i++)
            CHECK_EQ(s[i], ws[i]);
        CHECK(isnan(s[5]) && isnan(s[6]));
        for (int i = 0; i < 7; i++)
            CHECK_EQ(a[i], wa[i]);
        double *d = values(cft_argsort(x, 0, true)), wd[7] = {1, 4, 6, 0, 2, 5, 3};
        for (int i = 0; i < 7; i++)
            CHECK_EQ(d[i], wd[i]);
        cft_array *tv, *ti;
        CHECK_EQ(cft_top_k(cft_astype(x, CFT_F32), 3, &tv, &ti), CFT_OK);
        double *t = values(ti), *tvv = values(tv);
        CHECK_EQ(t[0], 1);
        CHECK_EQ(t[1], 4);
        CHECK_EQ(t[2], 6);
        CHECK(isnan(tvv[0]) && isnan(tvv[1]) && tvv[2] == INFINITY);
        free(s), free(a), free(d), free(t), free(tvv);
    }
    TEST("-0.0 and 0.0 compare equal: the sort keeps their order") {
        double xv[4] = {0.0, -0.0, -1, -0.0};
        double *a = values(cft_argsort(v64(xv, 4), 0, false));
        CHECK_EQ(a[0], 2);
        CHECK_EQ(a[1], 0);
        CHECK_EQ(a[2], 1);
        CHECK_EQ(a[3], 3);
        free(a);
    }
    TEST("sort: empty axis and length-1 axis") {
        cft_array *e = cft_zeros(CFT_F64, (int64_t[]){3, 0}, 2);
        cft_array *s = cft_sort(e, 1, false);
        CHECK(!cft_failed(s) && cft_array_size(s) == 0);
        cft_array *one = cft_ones(CFT_F32, (int64_t[]){4, 1}, 2);
        CHECK_ARRAY_CLOSE(cft_argsort(one, 1, true), cft_zeros(CFT_I32, (int64_t[]){4, 1}, 2), 0,
                          0);
        cft_array *v, *i;
        CHECK_EQ(cft_top_k(cft_ones(CFT_F64, (int64_t[]){2, 3}, 2), 0, &v, &i), CFT_OK);
        CHECK_EQ(cft_array_size(v), 0);
    }

    /* ---------------- derivatives of sort / top_k ---------------- */
    TEST("grad of top_k values: the weights scattered to the top-k positions") {
        double xv[6] = {0.5, 2, -1, 3, 2.5, 0}, wv[3] = {1, 10, 100};
        cft_array *args[2] = {v64(xv, 6), v64(wv, 3)};
        cft_fn *g = cft_grad(cft_fn_new(topk_dot, NULL, 2, 1), NULL, 0);
        double want[6] = {0, 100, 0, 1, 10, 0}; /* top 3: 3 (i3), 2.5 (i4), 2 (i1) */
        CHECK_ARRAY_CLOSE(cft_fn_call1(g, args), v64(want, 6), 0, 0);
        cft_fn *j = cft_jit(g);
        for (int call = 0; call < 2; call++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, args), v64(want, 6), 0, 0);
        /* vmap over rows of x (weights shared) against per-row grads */
        cft_array *xb = random_matrix(5, 6, CFT_F64, false);
        cft_array *gb = cft_fn_call1(cft_vmap(g, (int[]){0, CFT_NOT_BATCHED}, NULL),
                                     (cft_array *[]){xb, args[1]});
        for (int64_t r = 0; r < 5; r++) {
            cft_array *ar[2] = {cft_index(xb, r), args[1]};
            CHECK_ARRAY_CLOSE(cft_index(gb, r), cft_fn_call1(g, ar), 0, 0);
        }
    }
    TEST("hessian through sort: 2 diag(w[rank of x_i])") {
        double xv[4] = {0.3, -1, 2, 0.1}, wv[4] = {1, 2, 3, 4};
        cft_array *args[2] = {v64(xv, 4), v64(wv, 4)};
        cft_array *h =
            cft_fn_call1(cft_hessian(cft_fn_new(sorted_weighted_sq, NULL, 2, 1), 0), args);
        double want[16] = {0}; /* ranks: x0 -> 2, x1 -> 0, x2 -> 3, x3 -> 1 */
        int rank[4] = {2, 0, 3, 1};
        for (int i = 0; i < 4; i++)
            want[i * 4 + i] = 2 * wv[rank[i]];
        CHECK_ARRAY_CLOSE(h, cft_from_f64(want, (int64_t[]){4, 4}, 2), 1e-15, 0);
    }
    TEST("jvp of sort permutes the tangent") {
        double xv[4] = {2, -1, 3, 0}, tv[4] = {10, 20, 30, 40}, want[4] = {20, 40, 10, 30};
        CHECK_ARRAY_CLOSE(jvp1(sort_f, v64(xv, 4), v64(tv, 4)), v64(want, 4), 0, 0);
    }

    /* ---------------- scans ---------------- */
    TEST("cumsum reverse: values, and reverse mode is the opposite-direction cumsum") {
        double xv[5] = {1, 2, 3, 4, 5}, fwd[5] = {1, 3, 6, 10, 15}, rev[5] = {15, 14, 12, 9, 5};
        CHECK_ARRAY_CLOSE(cft_cumsum(v64(xv, 5), 0, false), v64(fwd, 5), 0, 0);
        CHECK_ARRAY_CLOSE(cft_cumsum(v64(xv, 5), 0, true), v64(rev, 5), 0, 0);
        CHECK_ARRAY_CLOSE(cft_cumsum(v64(xv, 5), -1, true), v64(rev, 5), 0, 0);
        double wv[5] = {1, 10, 100, 1000, 10000};
        cft_array *args[2] = {v64(xv, 5), v64(wv, 5)};
        for (int r = 0; r < 2; r++) {
            rev_flag = r;
            cft_array *g =
                cft_fn_call1(cft_grad(cft_fn_new(cumsum_dot, NULL, 2, 1), NULL, 0), args);
            /* d/dx_j sum_i w_i cumsum_i = sum of w over the outputs that include x_j */
            CHECK_ARRAY_CLOSE(g, cft_cumsum(v64(wv, 5), 0, !r), 0, 0);
        }
        rev_flag = false;
    }
    TEST("cumsum of bool counts as i32; cumsum of a strided view") {
        cft_array *b = cft_gt(v64((double[]){1, 0, 2, 3}, 4), cft_scalar(0.5, CFT_F64));
        cft_array *c = cft_cumsum(b, 0, false);
        CHECK(cft_array_dtype(c) == CFT_I32);
        CHECK_ARRAY_CLOSE(c, v64((double[]){1, 1, 2, 3}, 4), 0, 0);
        cft_array *x = random_matrix(6, 7, CFT_F64, false);
        CHECK_ARRAY_CLOSE(cft_cumsum(cft_transpose(x, NULL), 1, false),
                          cft_transpose(cft_cumsum(x, 0, false), NULL), 1e-15, 0);
    }
    TEST("cumprod: the derivative is exact at zeros (one and two zeros)") {
        double x1[4] = {2, 0, 3, 5}, x2[4] = {2, 0, 3, 0};
        cft_fn *g = cft_grad(cft_fn_new(cumprod_sum, NULL, 1, 1), NULL, 0);
        /* sum(cumprod) = x0 + x0x1 + x0x1x2 + x0x1x2x3 */
        double w1[4] = {1, 2 + 6 + 30, 0, 0}, w2[4] = {1, 2 + 6, 0, 0};
        CHECK_ARRAY_CLOSE(cft_fn_call1(g, (cft_array *[]){v64(x1, 4)}), v64(w1, 4), 1e-15, 0);
        CHECK_ARRAY_CLOSE(cft_fn_call1(g, (cft_array *[]){v64(x2, 4)}), v64(w2, 4), 1e-15, 0);
    }
    TEST("cummax: ties take the tangent of the last element in scan order (torch's "
         "convention); NaN propagates") {
        double xv[5] = {1, 3, 3, 2, 4}, tv[5] = {1, 10, 100, 1000, 10000};
        double want[5] = {1, 10, 100, 100, 10000};
        CHECK_ARRAY_CLOSE(jvp1(cummax_f, v64(xv, 5), v64(tv, 5)), v64(want, 5), 0, 0);
        double nv[4] = {1, NAN, 5, 0};
        double *y = values(cft_cummax(v64(nv, 4), 0, false));
        CHECK_EQ(y[0], 1);
        CHECK(isnan(y[1]) && isnan(y[2]) && isnan(y[3]));
        free(y);
        double *m = values(cft_cummin(v64((double[]){3, 1, 2, 0}, 4), 0, true));
        CHECK_EQ(m[0], 0);
        CHECK_EQ(m[1], 0);
        CHECK_EQ(m[2], 0);
        CHECK_EQ(m[3], 0);
        free(m);
    }
    TEST("cumlogsumexp: stable at large inputs, and its jvp too") {
        double xv[3] = {1000, 1000, -1000}, tv[3] = {1, 3, 5};
        double want[3] = {1000, 1000 + log(2), 1000 + log(2)};
        CHECK_ARRAY_CLOSE(cft_cumlogsumexp(v64(xv, 3), 0, false), v64(want, 3), 1e-15, 0);
        double wt[3] = {1, 2, 2}; /* softmax-weighted prefixes of t */
        CHECK_ARRAY_CLOSE(jvp1(cumlse_f, v64(xv, 3), v64(tv, 3)), v64(wt, 3), 1e-12,
                          0); /* ulp(1000) in y */
        double lv[2] = {-INFINITY, 0};
        CHECK_ARRAY_CLOSE(cft_cumlogsumexp(v64(lv, 2), 0, false), v64(lv, 2), 0, 0);
        CHECK(cft_array_dtype(cft_cumlogsumexp(vi32((int32_t[]){1, 2}, 2), 0, false)) == CFT_F32);
    }
    TEST("scans, sort and top_k under jit on a large array match eager") {
        cft_array *x = random_matrix(64, 1000, CFT_F32, false);
        cft_fn *f = cft_fn_new(scans_f, NULL, 1, 1), *j = cft_jit(f);
        cft_array *want = cft_fn_call1(f, &x);
        for (int call = 0; call < 2; call++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, &x), want, 1e-5, 1e-5);
    }

    /* ---------------- elementwise extras ---------------- */
    TEST("is_finite: inf and NaN are not finite") {
        double xv[5] = {0, INFINITY, -INFINITY, NAN, -3e300};
        double *f = values(cft_is_finite(v64(xv, 5)));
        CHECK_EQ(f[0], 1);
        CHECK_EQ(f[1], 0);
        CHECK_EQ(f[2], 0);
        CHECK_EQ(f[3], 0);
        CHECK_EQ(f[4], 1);
        free(f);
        CHECK(cft_array_dtype(cft_is_finite(cft_astype(v64(xv, 5), CFT_F32))) == CFT_BOOL);
        CHECK(has(cft_is_finite(vi32((int32_t[]){1}, 1)), "is_finite"));
    }
    TEST("rem: sign of the dividend; ints: x %% 0 = x, INT_MIN %% -1 = 0 (and div does not trap)") {
        double a[4] = {5.5, -5.5, 5.5, -5.5}, b[4] = {2, 2, -2, -2}, w[4] = {1.5, -1.5, 1.5, -1.5};
        CHECK_ARRAY_CLOSE(cft_rem(v64(a, 4), v64(b, 4)), v64(w, 4), 0, 0);
        int32_t ia[4] = {7, -7, 7, INT32_MIN}, ib[4] = {3, 3, 0, -1};
        double iw[4] = {1, -1, 7, 0};
        CHECK_ARRAY_CLOSE(cft_rem(vi32(ia, 4), vi32(ib, 4)), v64(iw, 4), 0, 0);
        /* div traps neither: INT_MIN / -1 wraps to INT_MIN (as XLA), x / 0 = 0 */
        double dw[4] = {2, -2, 0, INT32_MIN};
        CHECK_ARRAY_CLOSE(cft_div(vi32(ia, 4), vi32(ib, 4)), v64(dw, 4), 0, 0);
        cft_fn *j = cft_jit(cft_fn_new(rem_f, NULL, 2, 1)); /* the generated kernel too */
        for (int call = 0; call < 2; call++)
            CHECK_ARRAY_CLOSE(cft_fn_call1(j, (cft_array *[]){vi32(ia, 4), vi32(ib, 4)}),
                              v64(iw, 4), 0, 0);
    }
    TEST("shifts: out-of-range amounts, logical vs arithmetic, i64") {
        int32_t a[4] = {-8, -8, 1, -1}, b[4] = {1, 32, 31, 100};
        double sra[4] = {-4, -1, 0, -1}, srl[4] = {2147483644.0, 0, 0, 0},
               sl[4] = {-16, 0, -2147483648.0, 0};
        CHECK_ARRAY_CLOSE(cft_shift_right_arithmetic(vi32(a, 4), vi32(b, 4)), v64(sra, 4), 0, 0);
        CHECK_ARRAY_CLOSE(cft_shift_right_logical(vi32(a, 4), vi32(b, 4)), v64(srl, 4), 0, 0);
        CHECK_ARRAY_CLOSE(cft_shift_left(vi32(a, 4), vi32(b, 4)), v64(sl, 4), 0, 0);
        cft_array *x64 = cft_astype(vi32((int32_t[]){-1}, 1), CFT_I64);
        cft_array *s40 = cft_astype(vi32((int32_t[]){40}, 1), CFT_I64);
        CHECK_EQ(cft_item(cft_shift_right_logical(x64, s40)), 16777215);
        CHECK_EQ(cft_item(cft_population_count(x64)), 64);
        CHECK(has(cft_shift_left(v64((double[]){1}, 1), v64((double[]){1}, 1)), "shift_left"));
    }
    TEST("bit ops on bools are logical; logical_and still rejects ints") {
        cft_array *t = cft_gt(v64((double[]){1, 1, 0, 0}, 4), cft_scalar(0.5, CFT_F64));
        cft_array *u = cft_gt(v64((double[]){1, 0, 1, 0}, 4), cft_scalar(0.5, CFT_F64));
        CHECK_ARRAY_CLOSE(cft_bitwise_and(t, u), v64((double[]){1, 0, 0, 0}, 4), 0, 0);
        CHECK_ARRAY_CLOSE(cft_bitwise_or(t, u), v64((double[]){1, 1, 1, 0}, 4), 0, 0);
        CHECK_ARRAY_CLOSE(cft_bitwise_xor(t, u), v64((double[]){0, 1, 1, 0}, 4), 0, 0);
        CHECK_ARRAY_CLOSE(cft_bitwise_not(t), v64((double[]){0, 0, 1, 1}, 4), 0, 0);
        CHECK(cft_array_dtype(cft_bitwise_not(t)) == CFT_BOOL);
        CHECK(has(cft_logical_and(vi32((int32_t[]){1}, 1), vi32((int32_t[]){1}, 1)),
                  "cft_logical_and"));
        CHECK(has(cft_bitwise_not(v64((double[]){1}, 1)), "bitwise_not"));
    }
    TEST("integer_pow: negative exponents, ints wrap, negative exponent on ints is an error") {
        CHECK_CLOSE(cft_item(cft_integer_pow(cft_scalar(2, CFT_F64), -3)), 0.125, 0, 0);
        CHECK_CLOSE(cft_item(cft_integer_pow(cft_scalar(-3, CFT_F32), 3)), -27, 0, 0);
        CHECK_EQ(cft_item(cft_integer_pow(cft_scalar(65536, CFT_I32), 2)), 0);
        CHECK(has(cft_integer_pow(cft_scalar(2, CFT_I32), -1), "negative exponent -1"));
    }
    TEST("clamp: NaN stays, lo > hi gives hi (min(max(x, lo), hi)), broadcasting") {
        double xv[4] = {NAN, -5, 0.5, 5};
        double *c = values(cft_clamp(v64(xv, 4), cft_scalar(-1, CFT_F64), cft_scalar(1, CFT_F64)));
        CHECK(isnan(c[0]));
        CHECK_EQ(c[1], -1);
        CHECK_EQ(c[2], 0.5);
        CHECK_EQ(c[3], 1);
        free(c);
        double *h =
            values(cft_clamp(v64(xv + 1, 3), cft_scalar(2, CFT_F64), cft_scalar(1, CFT_F64)));
        CHECK_EQ(h[0], 1);
        CHECK_EQ(h[1], 1);
        CHECK_EQ(h[2], 1);
        free(h);
        cft_array *m = cft_clamp(cft_zeros(CFT_F32, (int64_t[]){2, 3}, 2),
                                 v64((double[]){-1, 1, 2}, 3), cft_scalar(1.5, CFT_F32));
        CHECK_ARRAY_CLOSE(m, cft_broadcast_to(v64((double[]){0, 1, 1.5}, 3), (int64_t[]){2, 3}, 2),
                          0, 0);
    }

    /* ---------------- errors ---------------- */
    TEST("errors name the call and the shapes") {
        cft_array *x = cft_zeros(CFT_F32, (int64_t[]){2, 3}, 2);
        CHECK(has(cft_sort(x, 2, false), "cft_sort: axis 2 out of range for f32[2,3]"));
        CHECK(has(cft_cumsum(x, -3, false), "cft_cumsum: axis -3 out of range for f32[2,3]"));
        cft_array *v, *i;
        CHECK_EQ(cft_top_k(x, 4, &v, &i), CFT_E_ARG);
        CHECK(has(v, "cft_top_k: k = 4 does not fit f32[2,3]") && v == i);
        cft_array *xs[2] = {x, cft_zeros(CFT_F32, (int64_t[]){3, 2}, 2)}, *o[2];
        CHECK_EQ(cft_sort_multi(xs, 2, 0, false, o), CFT_E_SHAPE);
        CHECK(has(o[1], "cft_sort_multi: array 1 is f32[3,2], the keys are f32[2,3]"));
        CHECK(has(cft_clamp(x, cft_zeros(CFT_F32, (int64_t[]){4}, 1), cft_scalar(1, CFT_F32)),
                  "cft_clamp: shapes do not broadcast"));
        CHECK(has(cft_cumsum(cft_cumsum(x, 5, false), 0, false), "axis 5"));
    }

    return check_summary();
}
