/* shape_composite.c: jax.numpy's shape and index helpers built from
 * primitives (slice, concatenate, broadcast, reshape, transpose, iota,
 * select, take), so they need no rules of their own: tril / triu, roll,
 * tile, repeat, split / array_split, diagonal, kron and meshgrid. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "core/error.h"
#include "core/mem.h"
#include "prims/rules.h"

static int norm_axis(int axis, int nd) {
    return axis < 0 ? axis + nd : axis;
}

/* keep x where (col - row) is below/above k along the last two dims */
static cft_array *tri(const char *call, cft_array *x, int k, bool lower) {
    CFT_PROPAGATE(call, x);
    cft_aval a = cft_array_aval(x);
    if (a.ndim < 2)
        return cft__fail(CFT_E_SHAPE, "%s: needs at least 2 dims, got %s", call, cft__av(&a));
    int64_t sh[2] = {a.shape[a.ndim - 2], a.shape[a.ndim - 1]};
    cft_array *row = cft_iota(CFT_I64, sh, 2, 0), *col = cft_iota(CFT_I64, sh, 2, 1);
    cft_array *d = cft_sub(col, row), *kk = cft_scalar(k, CFT_I64);
    cft_array *keep = lower ? cft_le(d, kk) : cft_ge(d, kk);
    return cft_where(keep, x, cft_zeros_like(x));
}

cft_array *cft_tril(cft_array *x, int k) {
    return tri("cft_tril", x, k, true);
}
cft_array *cft_triu(cft_array *x, int k) {
    return tri("cft_triu", x, k, false);
}

cft_array *cft_roll(cft_array *x, int64_t shift, int axis) {
    CFT_PROPAGATE("cft_roll", x);
    cft_aval a = cft_array_aval(x);
    int ax = norm_axis(axis, a.ndim);
    if (ax < 0 || ax >= a.ndim)
        return cft__fail(CFT_E_ARG, "cft_roll: axis %d of %s", axis, cft__av(&a));
    int64_t n = a.shape[ax];
    if (n == 0)
        return x;
    int64_t s = ((shift % n) + n) % n;
    if (s == 0)
        return x;
    int64_t lo[CFT_MAX_NDIM] = {0}, hi[CFT_MAX_NDIM];
    memcpy(hi, a.shape, sizeof hi);
    int64_t lo2[CFT_MAX_NDIM] = {0}, hi2[CFT_MAX_NDIM];
    memcpy(hi2, a.shape, sizeof hi2);
    lo[ax] = n - s;  /* the last s elements come first */
    hi2[ax] = n - s; /* then the first n - s */
    cft_array *parts[2] = {cft_slice(x, lo, hi, NULL), cft_slice(x, lo2, hi2, NULL)};
    return cft_concatenate(parts, 2, ax);
}

cft_array *cft_tile(cft_array *x, const int64_t *reps, int nreps) {
    CFT_PROPAGATE("cft_tile", x);
    cft_aval a = cft_array_aval(x);
    int nd = a.ndim > nreps ? a.ndim : nreps;
    if (nreps < 0 || (nreps && !reps) || 2 * nd > CFT_MAX_NDIM)
        return cft__fail(CFT_E_ARG, "cft_tile: %d reps of a %d-dim array (at most %d dims in all)",
                         nreps, a.ndim, CFT_MAX_NDIM / 2);
    int64_t r[CFT_MAX_NDIM], s[CFT_MAX_NDIM];
    for (int d = 0; d < nd; d++) { /* right-aligned, as numpy */
        int dr = d - (nd - nreps), dx = d - (nd - a.ndim);
        r[d] = dr >= 0 ? reps[dr] : 1;
        s[d] = dx >= 0 ? a.shape[dx] : 1;
        if (r[d] < 0)
            return cft__fail(CFT_E_ARG, "cft_tile: a negative repetition (%lld)", (long long)r[d]);
    }
    /* [s0, .., sn] -> [1, s0, 1, s1, ...] broadcast to [r0, s0, r1, s1, ...] */
    int64_t in[2 * CFT_MAX_NDIM], big[2 * CFT_MAX_NDIM], out[CFT_MAX_NDIM];
    for (int d = 0; d < nd; d++) {
        in[2 * d] = 1, in[2 * d + 1] = s[d];
        big[2 * d] = r[d], big[2 * d + 1] = s[d];
        out[d] = r[d] * s[d];
    }
    cft_array *y = cft_broadcast_to(cft_reshape(x, in, 2 * nd), big, 2 * nd);
    return cft_reshape(y, out, nd);
}

cft_array *cft_repeat(cft_array *x, const int64_t *counts, int ncounts, int axis, int64_t total) {
    CFT_PROPAGATE("cft_repeat", x);
    cft_aval a = cft_array_aval(x);
    int ax = norm_axis(axis, a.ndim);
    if (ax < 0 || ax >= a.ndim || a.ndim >= CFT_MAX_NDIM || !counts)
        return cft__fail(CFT_E_ARG, "cft_repeat: axis %d of %s, counts %s", axis, cft__av(&a),
                         counts ? "given" : "NULL");
    int64_t n = a.shape[ax];
    if (ncounts == 1) { /* every element `counts[0]` times: broadcast, reshape */
        int64_t c = counts[0];
        if (c < 0)
            return cft__fail(CFT_E_ARG, "cft_repeat: a negative count (%lld)", (long long)c);
        int64_t sh[CFT_MAX_NDIM], big[CFT_MAX_NDIM], out[CFT_MAX_NDIM];
        for (int d = 0, k = 0; d < a.ndim; d++) {
            sh[k] = a.shape[d], big[k] = a.shape[d], k++;
            if (d == ax)
                sh[k] = 1, big[k] = c, k++;
            out[d] = d == ax ? n * c : a.shape[d];
        }
        cft_array *y = cft_broadcast_to(cft_reshape(x, sh, a.ndim + 1), big, a.ndim + 1);
        return cft_reshape(y, out, a.ndim);
    }
    if (ncounts != n)
        return cft__fail(CFT_E_ARG, "cft_repeat: %d counts for %lld elements along axis %d",
                         ncounts, (long long)n, ax);
    int64_t sum = 0;
    for (int i = 0; i < ncounts; i++) {
        if (counts[i] < 0)
            return cft__fail(CFT_E_ARG, "cft_repeat: a negative count (%lld)",
                             (long long)counts[i]);
        if (counts[i] > INT64_MAX - sum)
            return cft__fail(CFT_E_ARG, "cft_repeat: the counts add up past 2^63");
        sum += counts[i];
    }
    int64_t out_shape[CFT_MAX_NDIM]; /* the one size check, before any allocation */
    memcpy(out_shape, a.shape, sizeof(int64_t) * (size_t)a.ndim);
    out_shape[ax] = sum;
    cft_array *big = cft__check_size("cft_repeat", a.dtype, out_shape, a.ndim, NULL, NULL);
    if (big)
        return big;
    if (total >= 0 && total != sum)
        return cft__fail(CFT_E_ARG, "cft_repeat: the counts add up to %lld, not %lld",
                         (long long)sum, (long long)total);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(sum ? sum : 1)), k = 0;
    if (!idx)
        return cft__oom();
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < counts[i]; c++)
            idx[k++] = i;
    cft_array *ix = cft_from_data(idx, CFT_I64, &sum, 1);
    free(idx);
    return cft_take(x, ix, ax);
}

cft_status cft_array_split(cft_array *x, int sections, int axis, cft_array **out) {
    CFT_API("cft_array_split");
    cft_array *e = !x              ? cft__fail(CFT_E_ARG, "cft_array_split: x is NULL")
                   : cft_failed(x) ? x
                                   : NULL;
    cft_aval a = x && !e ? cft_array_aval(x) : (cft_aval){0};
    int ax = norm_axis(axis, a.ndim);
    if (!e && (sections < 1 || ax < 0 || ax >= a.ndim || !out))
        e = cft__fail(CFT_E_ARG, "cft_array_split: %d sections along axis %d of %s", sections, axis,
                      cft__av(&a));
    if (e) {
        for (int i = 0; out && i < sections; i++)
            out[i] = e;
        return cft__set_last(e);
    }
    int64_t n = a.shape[ax], q = n / sections, rem = n % sections, at = 0;
    for (int i = 0; i < sections; i++) { /* the first n % sections get one more */
        int64_t lo[CFT_MAX_NDIM] = {0}, hi[CFT_MAX_NDIM];
        memcpy(hi, a.shape, sizeof hi);
        lo[ax] = at;
        at += q + (i < rem);
        hi[ax] = at;
        out[i] = cft_slice(x, lo, hi, NULL);
    }
    return CFT_OK;
}

cft_status cft_split(cft_array *x, int sections, int axis, cft_array **out) {
    CFT_API("cft_split");
    if (x && !cft_failed(x) && sections > 0) {
        cft_aval a = cft_array_aval(x);
        int ax = norm_axis(axis, a.ndim);
        if (ax >= 0 && ax < a.ndim && a.shape[ax] % sections) {
            cft_array *e = cft__fail(CFT_E_SHAPE,
                                     "cft_split: %lld elements along axis %d do not split into "
                                     "%d equal sections (cft_array_split allows unequal ones)",
                                     (long long)a.shape[ax], ax, sections);
            for (int i = 0; out && i < sections; i++)
                out[i] = e;
            return cft__set_last(e);
        }
    }
    return cft_array_split(x, sections, axis, out);
}

cft_array *cft_diagonal(cft_array *x, int offset, int axis1, int axis2) {
    CFT_PROPAGATE("cft_diagonal", x);
    cft_aval a = cft_array_aval(x);
    int a1 = norm_axis(axis1, a.ndim), a2 = norm_axis(axis2, a.ndim);
    if (a.ndim < 2 || a1 < 0 || a1 >= a.ndim || a2 < 0 || a2 >= a.ndim || a1 == a2)
        return cft__fail(CFT_E_ARG, "cft_diagonal: axes %d, %d of %s", axis1, axis2, cft__av(&a));
    /* the two axes last, then row i, column i + offset, picked with take */
    int perm[CFT_MAX_NDIM], k = 0;
    for (int d = 0; d < a.ndim; d++)
        if (d != a1 && d != a2)
            perm[k++] = d;
    perm[k++] = a1, perm[k++] = a2;
    cft_array *y = cft_transpose(x, perm);
    int64_t r = a.shape[a1], c = a.shape[a2];
    int64_t lo = offset >= 0 ? 0 : -offset, n = 0;
    if (offset >= 0)
        n = r < c - offset ? r : c - offset;
    else
        n = r + offset < c ? r + offset : c;
    if (n < 0)
        n = 0;
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)),
            *cols = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!rows || !cols) {
        free(rows), free(cols);
        return cft__oom();
    }
    for (int64_t i = 0; i < n; i++)
        rows[i] = lo + i, cols[i] = lo + i + offset;
    cft_array *ri = cft_from_data(rows, CFT_I64, &n, 1), *ci = cft_from_data(cols, CFT_I64, &n, 1);
    free(rows), free(cols);
    /* y[..., rows, :] then the matching column of each: take along the last
     * axis with the column index per row, as a one-hot sum */
    cft_array *picked = cft_take(y, ri, a.ndim - 2); /* [..., n, c] */
    int64_t sh[2] = {n, c};
    cft_array *onehot = cft_eq(cft_iota(CFT_I64, sh, 2, 1), cft_reshape(ci, (int64_t[]){n, 1}, 2));
    cft_array *zero = cft_zeros_like(picked);
    return cft_sum(cft_where(onehot, picked, zero), (int[]){a.ndim - 1}, 1, false);
}

cft_array *cft_kron(cft_array *a, cft_array *b) {
    CFT_PROPAGATE("cft_kron", a, b);
    if (cft_array_ndim(a) != 2 || cft_array_ndim(b) != 2)
        return cft__fail(CFT_E_SHAPE, "cft_kron: two matrices (got %d and %d dims)",
                         cft_array_ndim(a), cft_array_ndim(b));
    cft_aval x = cft_array_aval(a), y = cft_array_aval(b);
    cft_array *k = cft_einsum2("ij,kl->ikjl", a, b);
    return cft_reshape(k, (int64_t[]){x.shape[0] * y.shape[0], x.shape[1] * y.shape[1]}, 2);
}

cft_status cft_meshgrid(cft_array *x, cft_array *y, bool ij, cft_array **gx, cft_array **gy) {
    CFT_API("cft_meshgrid");
    cft_array *e = !x || !y        ? cft__fail(CFT_E_ARG, "cft_meshgrid: NULL input")
                   : cft_failed(x) ? x
                   : cft_failed(y) ? y
                   : cft_array_ndim(x) != 1 || cft_array_ndim(y) != 1
                       ? cft__fail(CFT_E_SHAPE, "cft_meshgrid: two vectors (got %d and %d dims)",
                                   cft_array_ndim(x), cft_array_ndim(y))
                       : NULL;
    if (e) {
        *gx = *gy = e;
        return cft__set_last(e);
    }
    int64_t n = cft_array_size(x), m = cft_array_size(y);
    if (ij) { /* [n, m] */
        *gx = cft_broadcast_to(cft_reshape(x, (int64_t[]){n, 1}, 2), (int64_t[]){n, m}, 2);
        *gy = cft_broadcast_to(cft_reshape(y, (int64_t[]){1, m}, 2), (int64_t[]){n, m}, 2);
    } else { /* "xy": [m, n] */
        *gx = cft_broadcast_to(cft_reshape(x, (int64_t[]){1, n}, 2), (int64_t[]){m, n}, 2);
        *gy = cft_broadcast_to(cft_reshape(y, (int64_t[]){m, 1}, 2), (int64_t[]){m, n}, 2);
    }
    return CFT_OK;
}
