/* test_jit_short_rows.c: kernels that reduce rows of at most 32 elements
 * run them as one flat loop over many rows (src/lower/emit_short.c). The
 * jit must give the interpreter's results for every row length around the
 * vector widths and the tile (1 .. 33 elements; row counts that do not
 * fill a tile), for operands read flat and through offset tables
 * (transposed, broadcast along rows or along columns), for sum, max, min
 * and prod, NaN in max / min rows, f32, f64, bf16, f16 and int32, on one and two
 * threads; and the generated source must hold the path. Longer rows summed
 * into one row run two rows at a time in the row loop (emit.c): rows of
 * 33..130 elements, odd and even row counts, NaN, 2 threads. Tolerances: f32
 * 1e-5 relative (sums of up to 33 terms accumulated in double, exp within
 * a few ulps of libm's scalar one), f64 1e-12, bf16 and f16 a few of
 * their ulps (stated where used), int32 and max / min exact. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cft/cft.h"
#include "check.h"

static char cache_dir[200];

static cft_array *randn(uint64_t seed, cft_dtype dt, const int64_t *shape, int nd) {
    if (cft_dtype_is_half(dt)) /* drawn in f32, rounded */
        return cft_astype(cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd), dt);
    return cft_random_normal(cft_random_key(seed), dt, shape, nd);
}

static void same_results(cft_fn *f, cft_array *const *in, int nout, double tol) {
    cft_array *a[8], *b[8];
    CHECK_EQ(cft_fn_call(f, in, a), CFT_OK);
    cft_fn *j = cft_jit(f);
    for (int call = 0; call < 3; call++) {
        CHECK_EQ(cft_fn_call(j, in, b), CFT_OK);
        for (int k = 0; k < nout; k++)
            CHECK_ARRAY_CLOSE(b[k], a[k], tol, tol);
    }
}

/* (x [B,n], bias [n], shift [B,1], scale []) -> log-sum-exp of rows of
 * (x + bias - shift) * scale, their max, min, prod of a bounded map, and
 * the softmax (operands read flat, as a repeated row, one per row, and one
 * for all) */
static cft_status rows(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *z = cft_mul(cft_sub(cft_add(in[0], in[1]), in[2]), in[3]);
    cft_array *m = cft_stop_gradient(cft_max(z, (int[]){1}, 1, true));
    cft_array *e = cft_exp(cft_sub(z, m));
    cft_array *s = cft_sum(e, (int[]){1}, 1, true);
    out[0] = cft_add(cft_log(s), m);
    out[1] = cft_div(e, s);
    out[2] = cft_min(cft_mul_s(z, 3), (int[]){1}, 1, false);
    out[3] = cft_prod(cft_add_s(cft_tanh(z), 1.5), (int[]){1}, 1, false);
    return CFT_OK;
}

/* the same over x given transposed ([n,B]: read through an offset table) */
static cft_status rows_t(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    cft_array *x[4] = {cft_transpose(in[0], NULL), in[1], in[2], in[3]};
    return rows(env, nin, x, nout, out);
}

/* (x [B,n], bias [n], shift [B,1]) -> the rows summed into one row (a
 * bias gradient), their max and min per column, and the elementwise value */
static cft_status cols(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *z = cft_mul(cft_add(in[0], in[1]), in[2]);
    out[0] = cft_sum(z, (int[]){0}, 1, false);
    out[1] = cft_max(cft_exp(z), (int[]){0}, 1, false);
    out[2] = cft_min(cft_neg(z), (int[]){0}, 1, false);
    out[3] = cft_tanh(z);
    return CFT_OK;
}

/* elementwise only: (x [B,n], bias [n], shift [B,1], scale []) -> a chain
 * over x + bias, and a comparison as a float (operands flat, a repeated
 * row, one per row, one for all) */
static cft_status each(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *z = cft_add(in[0], in[1]);
    out[0] = cft_add(cft_mul(cft_tanh(z), in[2]), in[3]);
    out[1] = cft_astype(cft_gt(z, in[2]), cft_array_dtype(in[0]));
    return CFT_OK;
}
static cft_status each_t(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    cft_array *x[4] = {cft_transpose(in[0], NULL), in[1], in[2], in[3]};
    return each(env, nin, x, nout, out);
}

static cft_status int_rows(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = cft_add(cft_mul(in[0], in[0]), in[1]);
    out[0] = cft_sum(y, (int[]){1}, 1, false);
    out[1] = cft_max(y, (int[]){1}, 1, false);
    out[2] = cft_min(cft_neg(y), (int[]){1}, 1, false);
    return CFT_OK;
}

static cft_status extremes(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = cft_mul_s(in[0], 2);
    out[0] = cft_max(y, (int[]){1}, 1, false);
    out[1] = cft_min(y, (int[]){1}, 1, false);
    return CFT_OK;
}

/* generated sources in the cache that hold the short-row path */
static int short_sources(void) {
    DIR *d = opendir(cache_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 2, ".c"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
        FILE *f = fopen(path, "r");
        char line[4096];
        while (f && fgets(line, sizeof line, f))
            if (strstr(line, "short rows (emit_short.c)")) {
                n++;
                break;
            }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    snprintf(cache_dir, sizeof cache_dir, "/tmp/cft-test-short-%d", (int)getpid());
    setenv("CFT_CACHE_DIR", cache_dir, 1);
    setenv("CFT_KEEP_SOURCE", "1", 1);
    static const int64_t ns[] = {1, 3, 7, 10, 16, 17, 31, 32, 33};
    static const int64_t bs[] = {1, 5, 50, 200};

    const cft_dtype dts[4] = {CFT_F32, CFT_F64, CFT_BF16, CFT_F16};
    /* halves: each value rounded on both sides; exp, tanh and log may
     * differ by an f32 ulp and a sum or product by its order, each moving a
     * half result by one of its ulps, and the log-sum-exp and softmax chain
     * up to four of them (2^-5 bf16, 2^-8 f16) */
    const double tols[4] = {1e-5, 1e-12, 1.0 / 32, 1.0 / 256};
    for (int t = 0; t < 4; t++) {
        cft_dtype dt = dts[t];
        double tol = tols[t];
        TEST("%s rows of 1..33 elements, B = 1..200, reduced and elementwise: jit equals the "
             "interpreter",
             cft_dtype_name(dt)) {
            for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
                for (size_t k = 0; k < sizeof bs / sizeof *bs; k++) {
                    int64_t B = bs[k], n = ns[i];
                    cft_array *in[4] = {randn(1 + (uint64_t)(n * 7 + B), dt, (int64_t[]){B, n}, 2),
                                        randn(2, dt, &n, 1), randn(3, dt, (int64_t[]){B, 1}, 2),
                                        cft_astype(cft_scalar(0.75, CFT_F64), dt)};
                    same_results(cft_fn_new(rows, NULL, 4, 4), in, 4, tol);
                    cft_array *tin[4] = {randn(4 + (uint64_t)n, dt, (int64_t[]){n, B}, 2), in[1],
                                         in[2], in[3]};
                    same_results(cft_fn_new(rows_t, NULL, 4, 4), tin, 4, tol);
                    same_results(cft_fn_new(each, NULL, 4, 2), in, 2, tol);
                    same_results(cft_fn_new(each_t, NULL, 4, 2), tin, 2, tol);
                }
        }
    }
    TEST("rows of 1..33 elements summed into one row, B = 1..2000: jit equals the "
         "interpreter (f32, and bf16 / f16 within two of their ulps)") {
        static const int64_t cb[] = {1, 5, 50, 300, 2000};
        const cft_dtype cdt[3] = {CFT_F32, CFT_BF16, CFT_F16};
        const double ctol[3] = {1e-5, 1.0 / 64, 1.0 / 512};
        for (int t = 0; t < 3; t++)
            for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
                for (size_t k = 0; k < sizeof cb / sizeof *cb; k++) {
                    int64_t B = cb[k], n = ns[i];
                    cft_array *in[3] = {
                        randn(8 + (uint64_t)(n * 3 + B), cdt[t], (int64_t[]){B, n}, 2),
                        randn(9, cdt[t], &n, 1), randn(10, cdt[t], (int64_t[]){B, 1}, 2)};
                    same_results(cft_fn_new(cols, NULL, 3, 4), in, 4, ctol[t]);
                }
        /* NaN in a column's max and min */
        float v[40 * 10];
        for (int e = 0; e < 40 * 10; e++)
            v[e] = (float)((e * 37) % 101) / 50.0f - 1.0f;
        v[3 * 10 + 2] = v[39 * 10 + 9] = NAN;
        int64_t n = 10;
        cft_array *in[3] = {cft_from_f32(v, (int64_t[]){40, 10}, 2), cft_zeros(CFT_F32, &n, 1),
                            cft_ones(CFT_F32, (int64_t[]){40, 1}, 2)},
                  *out[4];
        CHECK_EQ(cft_fn_call(cft_jit(cft_fn_new(cols, NULL, 3, 4)), in, out), CFT_OK);
        CHECK_EQ(cft_fn_call(cft_jit(cft_fn_new(cols, NULL, 3, 4)), in, out), CFT_OK);
        for (int j = 0; j < 10; j++) {
            bool nan = j == 2 || j == 9;
            CHECK_MSG(isnan(cft_item_at(out[1], j)) == nan, "column %d max", j);
            CHECK_MSG(isnan(cft_item_at(out[2], j)) == nan, "column %d min", j);
        }
    }
    TEST("longer rows summed into one row two at a time (the row loop): B = 1..2001 odd and "
         "even, NaN, 2 threads bitwise") {
        static const int64_t lb[] = {1, 2, 3, 16, 17, 300, 2001}, ln[] = {33, 64, 100, 130};
        for (size_t i = 0; i < sizeof ln / sizeof *ln; i++)
            for (size_t k = 0; k < sizeof lb / sizeof *lb; k++) {
                int64_t B = lb[k], n = ln[i];
                cft_array *in[3] = {
                    randn(30 + (uint64_t)(n * 7 + B), CFT_F32, (int64_t[]){B, n}, 2),
                    randn(31, CFT_F32, &n, 1), randn(32, CFT_F32, (int64_t[]){B, 1}, 2)};
                /* f32 sums of up to 250 rows a piece, summed in f32 (the
                 * interpreter's order differs): partial sums of up to ~50
                 * round by ~sqrt(250) 2^-24 50 = 5e-5; 2e-4 */
                same_results(cft_fn_new(cols, NULL, 3, 4), in, 4, 2e-4);
            }
        /* NaN in rows 2 and 3 of one pair, and in the last (odd) row */
        int64_t B = 41, n = 40;
        float *v = malloc(sizeof(float) * (size_t)(B * n));
        for (int64_t e = 0; e < B * n; e++)
            v[e] = (float)((e * 37) % 101) / 50.0f - 1.0f;
        v[2 * n + 5] = v[3 * n + 6] = v[40 * n + 39] = NAN;
        cft_array *in[3] = {cft_from_f32(v, (int64_t[]){B, n}, 2), cft_zeros(CFT_F32, &n, 1),
                            cft_ones(CFT_F32, (int64_t[]){B, 1}, 2)},
                  *out[4];
        cft_fn *j = cft_jit(cft_fn_new(cols, NULL, 3, 4));
        CHECK_EQ(cft_fn_call(j, in, out), CFT_OK);
        CHECK_EQ(cft_fn_call(j, in, out), CFT_OK);
        for (int c = 0; c < n; c++) {
            bool nan = c == 5 || c == 6 || c == 39;
            CHECK_MSG(isnan(cft_item_at(out[0], c)) == nan, "column %d sum", c);
            CHECK_MSG(isnan(cft_item_at(out[1], c)) == nan, "column %d max", c);
            CHECK_MSG(isnan(cft_item_at(out[2], c)) == nan, "column %d min", c);
        }
        free(v);
        /* rows shared among 2 threads (8 fixed pieces): one thread's sums */
        int64_t Bt = 4001, nt = 128;
        cft_array *it[3] = {randn(33, CFT_F32, (int64_t[]){Bt, nt}, 2), randn(34, CFT_F32, &nt, 1),
                            randn(35, CFT_F32, (int64_t[]){Bt, 1}, 2)},
                  *a[4], *b[4];
        cft_fn *jt = cft_jit(cft_fn_new(cols, NULL, 3, 4));
        CHECK_EQ(cft_fn_call(jt, it, a), CFT_OK);
        CHECK_EQ(cft_fn_call(jt, it, a), CFT_OK);
        cft_set_num_threads(2);
        CHECK_EQ(cft_fn_call(jt, it, b), CFT_OK);
        cft_set_num_threads(1);
        for (int k = 0; k < 4; k++)
            CHECK_ARRAY_CLOSE(b[k], a[k], 0, 0);
    }
    TEST("the generated kernels hold the short-row path") {
        /* (CFT_JIT_KERNELS=cuda-host runs the CUDA kernels, which have none) */
        const char *kern = getenv("CFT_JIT_KERNELS");
        if (!kern || strcmp(kern, "cuda-host"))
            CHECK_MSG(short_sources() > 0, "no kernel source in %s has the short-row path",
                      cache_dir);
    }
    TEST("int32 rows: sum, max and min exact") {
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
            int64_t B = 37, n = ns[i];
            int32_t *v = malloc(sizeof(int32_t) * (size_t)(B * n)), w[33];
            for (int64_t e = 0; e < B * n; e++)
                v[e] = (int32_t)((e * 7919) % 201) - 100;
            for (int64_t e = 0; e < n; e++)
                w[e] = (int32_t)(e * 3 - 20);
            cft_array *in[2] = {cft_from_i32(v, (int64_t[]){B, n}, 2), cft_from_i32(w, &n, 1)};
            same_results(cft_fn_new(int_rows, NULL, 2, 3), in, 3, 0);
            free(v);
        }
    }
    TEST("max and min keep NaN in short rows, wherever it lies") {
        /* rows of 10: NaN first, in the middle, last; rows without NaN */
        float v[60 * 10];
        for (int i = 0; i < 60 * 10; i++)
            v[i] = (float)((i * 37) % 101) - 50.0f;
        v[1 * 10] = v[4 * 10 + 5] = v[6 * 10 + 9] = v[59 * 10 + 9] = NAN;
        cft_array *x = cft_from_f32(v, (int64_t[]){60, 10}, 2), *out[2];
        same_results(cft_fn_new(extremes, NULL, 1, 2), &x, 2, 0);
        CHECK_EQ(cft_fn_call(cft_jit(cft_fn_new(extremes, NULL, 1, 2)), &x, out), CFT_OK);
        for (int r = 0; r < 60; r++) {
            bool nan = r == 1 || r == 4 || r == 6 || r == 59;
            CHECK_MSG(isnan(cft_item_at(out[0], r)) == nan, "row %d max", r);
            CHECK_MSG(isnan(cft_item_at(out[1], r)) == nan, "row %d min", r);
        }
    }
    TEST("two threads share the rows and give one thread's results") {
        int64_t B = 4000, n = 10; /* above the kernels' threshold for threads */
        cft_array *in[4] = {randn(5, CFT_F32, (int64_t[]){B, n}, 2), randn(6, CFT_F32, &n, 1),
                            randn(7, CFT_F32, (int64_t[]){B, 1}, 2), cft_scalar(0.75, CFT_F32)};
        cft_fn *j = cft_jit(cft_fn_new(rows, NULL, 4, 4)),
               *jc = cft_jit(cft_fn_new(cols, NULL, 3, 4));
        cft_array *a[4], *b[4], *r[4], *ca[4], *cb[4];
        CHECK_EQ(cft_fn_call(cft_fn_new(rows, NULL, 4, 4), in, r), CFT_OK);
        for (int call = 0; call < 2; call++) { /* the first call plans */
            CHECK_EQ(cft_fn_call(j, in, a), CFT_OK);
            CHECK_EQ(cft_fn_call(jc, in, ca), CFT_OK);
        }
        cft_set_num_threads(2);
        CHECK_EQ(cft_fn_call(j, in, b), CFT_OK);
        CHECK_EQ(cft_fn_call(jc, in, cb), CFT_OK);
        cft_set_num_threads(1);
        for (int k = 0; k < 4; k++) /* rows into a row: pieces of rows in a fixed order */
            CHECK_ARRAY_CLOSE(cb[k], ca[k], 0, 0);
        for (int k = 0; k < 4; k++) {
            CHECK_ARRAY_CLOSE(b[k], a[k], 0, 0);
            CHECK_ARRAY_CLOSE(a[k], r[k], 1e-5, 1e-5);
        }
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    if (!getenv("CFT_TEST_KEEP") && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache_dir);
    return check_summary();
}
