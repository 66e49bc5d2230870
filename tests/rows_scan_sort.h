/* rows_scan_sort.h: a fragment of test_prims.c (included twice there, not a
 * header of its own): the rows of the scan, sort and extra elementwise
 * primitives (scan.c, sort.c, ew_extra.c and their unary.def/binary.def
 * rows). Included once before the table for the row functions and
 * references (ROWS_SCAN_SORT_DEFS), once inside it for the rows. It uses
 * test_prims.c's row type, FN, DEF_* and ROW_* macros and index helpers. */
#ifndef ROWS_SCAN_SORT_DEFS_DONE
#define ROWS_SCAN_SORT_DEFS_DONE

/* ---- elementwise rows ---- */

static double ss_shl(double a, double b) {
    return b < 0 || b >= 32 ? 0 : (double)(int32_t)((uint32_t)(int32_t)a << (int)b);
}
static double ss_shrl(double a, double b) {
    return b < 0 || b >= 32 ? 0 : (double)(int32_t)((uint32_t)(int32_t)a >> (int)b);
}
static double ss_shra(double a, double b) { /* floor division by 2^b; the sign fill past 31 */
    return b < 0 || b >= 32 ? (a < 0 ? -1 : 0) : floor(a / ldexp(1, (int)b));
}
static double ss_popcount(double a) {
    uint32_t u = (uint32_t)(int32_t)a;
    int c = 0;
    for (; u; u &= u - 1)
        c++;
    return c;
}

/* name, kind, op of x, reference of a, domain, input flags, row flags */
#define SS_UNARY_ROWS(X)                                                                           \
    X(is_finite, F, cft_is_finite(x), isfinite(a) != 0, -2, 2, 0, NONDIFF)                         \
    X(bitwise_not, I, cft_bitwise_not(x), (double)~(int32_t)a, -100, 100, 0, NONDIFF)              \
    X(population_count, I, cft_population_count(x), ss_popcount(a), -1000, 1000, 0, NONDIFF)
/* name, kind, op of x y, reference of a b, domain of a, of b, row flags */
#define SS_BINARY_ROWS(X)                                                                          \
    X(rem, F, cft_rem(x, y), fmod(a, b), -7, 7, 0, 1.3, 2, SIGNED, O2)                             \
    X(nextafter, F, cft_nextafter(x, y), nextafter(a, b), -2, 2, 0, -2, 2, 0, O2)                  \
    X(xor, B, cft_bitwise_xor(x, y), (double)((int)a ^ (int)b), 0, 1, 0, 0, 1, 0, NONDIFF)         \
    X(shift_left, I, cft_shift_left(x, y), ss_shl(a, b), -100, 100, 0, -2, 40, 0, NONDIFF)         \
    X(shift_right_logical, I, cft_shift_right_logical(x, y), ss_shrl(a, b), -100, 100, 0, -2, 40,  \
      0, NONDIFF)                                                                                  \
    X(shift_right_arithmetic, I, cft_shift_right_arithmetic(x, y), ss_shra(a, b), -100, 100, 0,    \
      -2, 40, 0, NONDIFF)
SS_UNARY_ROWS(DEF_UNARY)
SS_BINARY_ROWS(DEF_BINARY)

FN(fn_not_bool) {
    UNUSED_FN;
    out[0] = cft_bitwise_not(in[0]);
    return CFT_OK;
}
static double ref_not_bool(const double *v) {
    return !v[0];
}
FN(fn_band) {
    UNUSED_FN;
    out[0] = cft_bitwise_and(in[0], in[1]);
    return CFT_OK;
}
static double ref_band(const double *v) {
    return (double)((int32_t)v[0] & (int32_t)v[1]);
}
FN(fn_bor) {
    UNUSED_FN;
    out[0] = cft_bitwise_or(in[0], in[1]);
    return CFT_OK;
}
static double ref_bor(const double *v) {
    return (double)((int32_t)v[0] | (int32_t)v[1]);
}
static double ref_ixor(const double *v) {
    return (double)((int32_t)v[0] ^ (int32_t)v[1]);
}
static double ref_irem(const double *v) { /* C %: the sign of the dividend */
    return fmod(v[0], v[1]);
}

/* clamp: inputs (x, lo, hi) */
FN(fn_clamp) {
    UNUSED_FN;
    out[0] = cft_clamp(in[0], in[1], in[2]);
    return CFT_OK;
}
static double ref_clamp(const double *v) {
    return fmin(fmax(v[0], v[1]), v[2]);
}
FN(fn_clamp_scalar_bounds) {
    UNUSED_FN;
    out[0] = cft_clamp(in[0], cft_scalar(-0.5, CFT_F32), cft_scalar(0.75, CFT_F32));
    return CFT_OK;
}
static double ref_clamp_scalar_bounds(const double *v) {
    return fmin(fmax(v[0], -0.5), 0.75);
}

/* integer_pow: p[0] = n */
FN(fn_integer_pow) {
    UNUSED_FN;
    ENV_ROW;
    out[0] = cft_integer_pow(in[0], r->p[0]);
    return CFT_OK;
}
static void ref_integer_pow(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                            double *y) {
    (void)o;
    for (int64_t i = 0; i < numel(av[0].shape, av[0].ndim); i++)
        y[i] = pow(x[0][i], r->p[0]);
}

/* ---- scans: p[0] axis, p[1] reverse, p[9] which ---- */

enum { CSUM, CPROD, CMAX, CMIN, CLSE };
FN(fn_cum) {
    UNUSED_FN;
    ENV_ROW;
    cft_array *(*op[])(cft_array *, int, bool) = {cft_cumsum, cft_cumprod, cft_cummax, cft_cummin,
                                                  cft_cumlogsumexp};
    out[0] = op[r->p[9]](in[0], r->p[0], r->p[1]);
    return CFT_OK;
}
/* O(n^2): every output sums its prefix (in scan order) afresh */
static void ref_cum(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                    double *y) {
    (void)o;
    int nd = av[0].ndim, ax = r->p[0] < 0 ? r->p[0] + nd : r->p[0];
    int64_t n = av[0].shape[ax], idx[8] = {0};
    for (int64_t i = 0; i < numel(av[0].shape, nd); i++) {
        unravel(i, av[0].shape, nd, idx);
        int64_t k = idx[ax];
        double acc = r->p[9] == CSUM    ? 0
                     : r->p[9] == CPROD ? 1
                     : r->p[9] == CMAX  ? -INFINITY
                                        : INFINITY;
        for (int64_t j = r->p[1] ? n - 1 : 0; r->p[1] ? j >= k : j <= k; j += r->p[1] ? -1 : 1) {
            idx[ax] = j;
            double v = x[0][ravel(idx, av[0].shape, nd)];
            switch (r->p[9]) {
            case CSUM:
                acc += v;
                break;
            case CPROD:
                acc *= v;
                break;
            case CMAX:
                acc = fmax(acc, v);
                break;
            case CMIN:
                acc = fmin(acc, v);
                break;
            default:
                acc += exp(v);
            }
        }
        y[i] = r->p[9] == CLSE ? log(acc) : acc;
    }
}

/* ---- sorting ---- */

/* the stable order of line v[0..n) (insertion sort), written to perm */
static void ss_stable_order(const double *v, int64_t n, bool desc, int64_t *perm) {
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i;
        for (; j > 0 && (desc ? v[i] > v[perm[j - 1]] : v[i] < v[perm[j - 1]]); j--)
            perm[j] = perm[j - 1];
        perm[j] = i;
    }
}

/* p[0] axis, p[1] descending, p[9]: 0 values, 1 indices, 2 second operand */
FN(fn_sort) {
    UNUSED_FN;
    ENV_ROW;
    if (r->p[9] == 0)
        out[0] = cft_sort(in[0], r->p[0], r->p[1]);
    else if (r->p[9] == 1)
        out[0] = cft_argsort(in[0], r->p[0], r->p[1]);
    else {
        cft_array *o[2];
        cft_sort_multi(in, 2, r->p[0], r->p[1], o);
        out[0] = o[1];
    }
    return CFT_OK;
}
static void ref_sort(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                     double *y) {
    (void)o;
    int nd = av[0].ndim, ax = r->p[0] < 0 ? r->p[0] + nd : r->p[0];
    int64_t n = av[0].shape[ax], idx[8] = {0}, line[64], perm[64];
    double v[64];
    for (int64_t i = 0; i < numel(av[0].shape, nd); i++) {
        unravel(i, av[0].shape, nd, idx);
        if (idx[ax])
            continue; /* one pass per line, from its first element */
        for (int64_t j = 0; j < n; j++) {
            idx[ax] = j;
            line[j] = ravel(idx, av[0].shape, nd);
            v[j] = x[0][line[j]];
        }
        ss_stable_order(v, n, r->p[1], perm);
        for (int64_t j = 0; j < n; j++)
            y[line[j]] = r->p[9] == 0   ? v[perm[j]]
                         : r->p[9] == 1 ? (double)perm[j]
                                        : x[1][line[perm[j]]];
    }
}

/* top_k along the last axis: p[0] k, p[9]: 0 values, 1 indices */
FN(fn_top_k) {
    UNUSED_FN;
    ENV_ROW;
    cft_array *v, *ix;
    cft_top_k(in[0], r->p[0], &v, &ix);
    out[0] = r->p[9] ? ix : v;
    return CFT_OK;
}
static void ref_top_k(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                      double *y) {
    (void)o;
    int64_t n = av[0].shape[av[0].ndim - 1], k = r->p[0], perm[64];
    for (int64_t l = 0; l < numel(av[0].shape, av[0].ndim) / n; l++) {
        ss_stable_order(x[0] + l * n, n, true, perm);
        for (int64_t j = 0; j < k; j++)
            y[l * k + j] = r->p[9] ? (double)perm[j] : x[0][l * n + perm[j]];
    }
}

/* the gradient of <top_k(x).values, c> in x: c scattered to the top-k
 * positions (scatter_add_along, the transpose of gather_along) */
FN(fn_top_k_dot) {
    UNUSED_FN;
    ENV_ROW;
    cft_array *v;
    cft_top_k(in[0], r->p[0], &v, NULL);
    out[0] = cft_sum(cft_mul(v, in[1]), NULL, 0, false);
    return CFT_OK;
}
FN(fn_top_k_grad) {
    UNUSED_FN;
    ENV_ROW;
    cft_fn *g = cft_grad(cft_fn_new(fn_top_k_dot, (void *)r, 2, 1), NULL, 0);
    out[0] = cft_fn_call1(g, in);
    return CFT_OK;
}
static void ref_top_k_grad(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                           double *y) {
    (void)o;
    int64_t n = av[0].shape[av[0].ndim - 1], k = r->p[0], perm[64];
    for (int64_t i = 0; i < numel(av[0].shape, av[0].ndim); i++)
        y[i] = 0;
    for (int64_t l = 0; l < numel(av[0].shape, av[0].ndim) / n; l++) {
        ss_stable_order(x[0] + l * n, n, true, perm);
        for (int64_t j = 0; j < k; j++)
            y[l * n + perm[j]] += x[1][l * k + j];
    }
}

/* the tangent of top_k(x).values along t: t at the top-k positions */
FN(fn_top_k_values) {
    UNUSED_FN;
    ENV_ROW;
    cft_top_k(in[0], r->p[0], &out[0], NULL);
    return CFT_OK;
}
FN(fn_top_k_jvp) {
    UNUSED_FN;
    ENV_ROW;
    cft_array *o[2];
    cft_fn_call(cft_jvp(cft_fn_new(fn_top_k_values, (void *)r, 1, 1)), in, o);
    out[0] = o[1];
    return CFT_OK;
}
static void ref_top_k_jvp(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                          double *y) {
    (void)o;
    int64_t n = av[0].shape[av[0].ndim - 1], k = r->p[0], perm[64];
    for (int64_t l = 0; l < numel(av[0].shape, av[0].ndim) / n; l++) {
        ss_stable_order(x[0] + l * n, n, true, perm);
        for (int64_t j = 0; j < k; j++)
            y[l * k + j] = x[1][l * n + perm[j]];
    }
}

#define X234P                                                                                      \
    { F, 3, {2, 3, 4}, 0.5, 1.5, SIGNED }

/* the rows, inside the table */
/* clang-format off */
#define ROWS_SCAN_SORT                                                                             \
    SS_UNARY_ROWS(ROW_UNARY)                                                                       \
    SS_BINARY_ROWS(ROW_BINARY)                                                                     \
    {.prim = "bitwise_not", .label = "bitwise_not (bool)", .fn = fn_not_bool, .nin = 1,            \
     .in = {{B, 2, {2, 3}, 0, 1, 0}}, EW23, .ew = ref_not_bool, .flags = NONDIFF},                 \
    {.prim = "and", .label = "and (i32, bitwise)", .fn = fn_band, .nin = 2,                        \
     .in = {{I, 2, {2, 3}, -100, 100, 0}, {I, 2, {2, 3}, -100, 100, 0}}, EW23, .ew = ref_band,     \
     .flags = NONDIFF},                                                                            \
    {.prim = "or", .label = "or (i32, bitwise)", .fn = fn_bor, .nin = 2,                           \
     .in = {{I, 2, {2, 3}, -100, 100, 0}, {I, 2, {2, 3}, -100, 100, 0}}, EW23, .ew = ref_bor,      \
     .flags = NONDIFF},                                                                            \
    {.prim = "xor", .label = "xor (i32)", .fn = fn_xor, .nin = 2,                                  \
     .in = {{I, 2, {2, 3}, -100, 100, 0}, {I, 2, {2, 3}, -100, 100, 0}}, EW23, .ew = ref_ixor,     \
     .flags = NONDIFF},                                                                            \
    {.prim = "rem", .label = "rem (i32)", .fn = fn_rem, .nin = 2,                                  \
     .in = {{I, 2, {2, 3}, -20, 20, 0}, {I, 2, {2, 3}, 1, 5, SIGNED}}, EW23, .ew = ref_irem,       \
     .flags = NONDIFF},                                                                            \
    {.prim = "clamp", .fn = fn_clamp, .nin = 3,                                                    \
     .in = {F23(-2, 2), F23(-1.5, 0.5), F23(-0.5, 1.5)}, EW23, .ew = ref_clamp, .flags = O2},      \
    {.prim = "clamp", .label = "clamp (scalar bounds)", .fn = fn_clamp_scalar_bounds, .nin = 1,    \
     .in = {F23(-2, 2)}, EW23, .ew = ref_clamp_scalar_bounds, .flags = O2},                        \
    {.prim = "clamp", .label = "clamp (i32)", .fn = fn_clamp, .nin = 3,                            \
     .in = {{I, 2, {2, 3}, -9, 9, 0}, {I, 2, {2, 3}, -5, 1, 0}, {I, 2, {2, 3}, -1, 5, 0}}, EW23,   \
     .ew = ref_clamp, .flags = NONDIFF},                                                           \
    {.prim = "integer_pow", .label = "integer_pow (n = 3)", .fn = fn_integer_pow, .nin = 1,        \
     .in = {F23(-2, 2)}, EW23, .ref = ref_integer_pow, .p = {3}, .flags = O2},                     \
    {.prim = "integer_pow", .label = "integer_pow (n = -2)", .fn = fn_integer_pow, .nin = 1,       \
     .in = {{F, 2, {2, 3}, 0.5, 2, SIGNED}}, EW23, .ref = ref_integer_pow, .p = {-2}, .flags = O2}, \
    {.prim = "integer_pow", .label = "integer_pow (n = 0)", .fn = fn_integer_pow, .nin = 1,        \
     .in = {F23(-2, 2)}, EW23, .ref = ref_integer_pow, .p = {0}, .flags = O2},                     \
    {.prim = "integer_pow", .label = "integer_pow (i32, n = 5)", .fn = fn_integer_pow, .nin = 1,   \
     .in = {{I, 2, {2, 3}, -6, 6, 0}}, EW23, .ref = ref_integer_pow, .p = {5}, .flags = NONDIFF},  \
    /* scans: p = axis, reverse, [9] which */                                                      \
    {.prim = "cumsum", .label = "cumsum (axis 1)", .fn = fn_cum, .nin = 1, .in = {X234}, EW23,     \
     .ref = ref_cum, .p = {1, 0, [9] = CSUM}, .flags = O2},                                        \
    {.prim = "cumsum", .label = "cumsum (axis -1, reverse)", .fn = fn_cum, .nin = 1, .in = {X234}, \
     EW23, .ref = ref_cum, .p = {-1, 1, [9] = CSUM}, .flags = O2},                                 \
    {.prim = "cumsum", .label = "cumsum (i32, axis 0)", .fn = fn_cum, .nin = 1,                    \
     .in = {{I, 2, {4, 3}, -9, 9, 0}}, EW23, .ref = ref_cum, .p = {0, 0, [9] = CSUM},              \
     .flags = NONDIFF},                                                                            \
    {.prim = "cumprod", .label = "cumprod (axis 1)", .fn = fn_cum, .nin = 1, .in = {X234P}, EW23,  \
     .ref = ref_cum, .p = {1, 0, [9] = CPROD}, .flags = O2},                                       \
    {.prim = "cumprod", .label = "cumprod (with zeros, axis 2, reverse)", .fn = fn_cum, .nin = 1,  \
     .in = {{F, 3, {2, 3, 4}, -1, 1, DISCRETE}}, EW23, .ref = ref_cum, .p = {2, 1, [9] = CPROD},   \
     .flags = O2},                                                                                 \
    {.prim = "cummax", .label = "cummax (axis 1)", .fn = fn_cum, .nin = 1, .in = {X234}, EW23,     \
     .ref = ref_cum, .p = {1, 0, [9] = CMAX}, .flags = O2},                                        \
    {.prim = "cummax", .label = "cummax (axis 2, reverse)", .fn = fn_cum, .nin = 1, .in = {X234},  \
     EW23, .ref = ref_cum, .p = {2, 1, [9] = CMAX}, .flags = O2},                                  \
    {.prim = "cummax", .label = "cummax (i32, ties)", .fn = fn_cum, .nin = 1,                      \
     .in = {{I, 2, {3, 5}, -3, 3, 0}}, EW23, .ref = ref_cum, .p = {1, 0, [9] = CMAX},              \
     .flags = NONDIFF},                                                                            \
    {.prim = "cummin", .label = "cummin (axis 0, reverse)", .fn = fn_cum, .nin = 1, .in = {X234},  \
     EW23, .ref = ref_cum, .p = {0, 1, [9] = CMIN}, .flags = O2},                                  \
    {.prim = "cumlogsumexp", .label = "cumlogsumexp (axis 2)", .fn = fn_cum, .nin = 1,             \
     .in = {X234}, EW23, .ref = ref_cum, .p = {2, 0, [9] = CLSE}, .flags = O2},                    \
    {.prim = "cumlogsumexp", .label = "cumlogsumexp (axis 1, reverse)", .fn = fn_cum, .nin = 1,    \
     .in = {X234}, EW23, .ref = ref_cum, .p = {1, 1, [9] = CLSE}, .flags = O2},                    \
    /* sorting: p = axis, descending, [9] which output */                                          \
    {.prim = "sort", .label = "sort (axis 1)", .fn = fn_sort, .nin = 1, .in = {X234}, EW23,        \
     .ref = ref_sort, .p = {1, 0, [9] = 0}, .flags = O2},                                          \
    {.prim = "sort", .label = "sort (axis 0, descending)", .fn = fn_sort, .nin = 1,                \
     .in = {{F, 2, {5, 3}, -2, 2, 0}}, EW23, .ref = ref_sort, .p = {0, 1, [9] = 0}, .flags = O2},  \
    {.prim = "sort", .label = "sort (i32, ties)", .fn = fn_sort, .nin = 1,                         \
     .in = {{I, 2, {3, 7}, 0, 3, 0}}, EW23, .ref = ref_sort, .p = {-1, 0, [9] = 0},                \
     .flags = NONDIFF},                                                                            \
    {.prim = "sort", .label = "argsort (i32 ties: stable)", .fn = fn_sort, .nin = 1,               \
     .in = {{I, 2, {3, 9}, 0, 3, 0}}, EW23, .ref = ref_sort, .p = {1, 0, [9] = 1},                 \
     .flags = NONDIFF | ANY_DTYPE},                                                                \
    {.prim = "sort", .label = "argsort (descending, i32 ties: stable)", .fn = fn_sort, .nin = 1,   \
     .in = {{I, 2, {9, 3}, 0, 3, 0}}, EW23, .ref = ref_sort, .p = {0, 1, [9] = 1},                 \
     .flags = NONDIFF | ANY_DTYPE},                                                                \
    {.prim = "sort", .label = "argsort (axis 2)", .fn = fn_sort, .nin = 1, .in = {X234}, EW23,     \
     .ref = ref_sort, .p = {2, 0, [9] = 1}, .flags = NONDIFF | ANY_DTYPE},                         \
    {.prim = "sort", .label = "sort (multi-operand: y sorted by x)", .fn = fn_sort, .nin = 2,      \
     .in = {X234, X234}, EW23, .ref = ref_sort, .p = {1, 0, [9] = 2}, .flags = O2},                \
    {.prim = "sort", .label = "sort (multi-operand, descending, i32 keys with ties)",              \
     .fn = fn_sort, .nin = 2, .in = {{I, 2, {3, 8}, 0, 2, 0}, {F, 2, {3, 8}, -2, 2, 0}}, EW23,     \
     .ref = ref_sort, .p = {1, 1, [9] = 2}, .flags = O2},                                          \
    {.prim = "gather_along", .label = "gather_along (jvp of top_k values)", .fn = fn_top_k_jvp,    \
     .nin = 2, .in = {{F, 2, {2, 6}, -2, 2, 0}, {F, 2, {2, 6}, -2, 2, 0}}, .out_nd = 2,            \
     .out_shape = {2, 3}, .ref = ref_top_k_jvp, .p = {3}, .flags = O2},                            \
    {.prim = "top_k", .label = "top_k (k = 3)", .fn = fn_top_k, .nin = 1,                          \
     .in = {{F, 3, {2, 3, 6}, -2, 2, 0}}, .out_nd = 3, .out_shape = {2, 3, 3}, .ref = ref_top_k,   \
     .p = {3, [9] = 0}, .flags = O2},                                                              \
    {.prim = "top_k", .label = "top_k (k = n)", .fn = fn_top_k, .nin = 1,                          \
     .in = {{F, 2, {2, 5}, -2, 2, 0}}, .out_nd = 2, .out_shape = {2, 5}, .ref = ref_top_k,         \
     .p = {5, [9] = 0}, .flags = O2},                                                              \
    {.prim = "top_k", .label = "top_k indices (i32 ties: lower index first)", .fn = fn_top_k,      \
     .nin = 1, .in = {{I, 2, {3, 9}, 0, 3, 0}}, .out_nd = 2, .out_shape = {3, 4},                  \
     .ref = ref_top_k, .p = {4, [9] = 1}, .flags = NONDIFF | ANY_DTYPE},                           \
    {.prim = "scatter_add_along", .label = "scatter_add_along (grad of top_k values)",             \
     .fn = fn_top_k_grad, .nin = 2, .in = {{F, 2, {2, 6}, -2, 2, 0}, F23(-2, 2)}, .out_nd = 2,     \
     .out_shape = {2, 6}, .ref = ref_top_k_grad, .p = {3}, .flags = O2},
/* clang-format on */

#endif
