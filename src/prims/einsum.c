/* einsum.c: einsum and tensordot, built on dot_general, reductions and
 * transposes (so every transform sees primitives). An einsum is done in
 * steps: each operand first takes its repeated labels' diagonals and sums
 * out the labels no one else uses; then, while several operands remain,
 * the pair whose contraction makes the smallest result is contracted with
 * one dot_general (labels the pair shares and nothing else needs are
 * contracted, shared labels still needed are batch dims), which never
 * builds an outer product a contraction could avoid; last, the remaining
 * labels are summed or transposed into the output's order. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "prims/rules.h"

#define MAXOP 32
#define MAXL 52

typedef struct {
    cft_array *x;
    char lab[CFT_MAX_NDIM + 1]; /* one label per dim, no repeats after prepare */
    int n;
} term;

static int label_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* does label c occur in another term than `skip1`/`skip2`, or the output */
static bool used_elsewhere(char c, const term *t, int nt, int skip1, int skip2, const char *out) {
    if (strchr(out, c))
        return true;
    for (int k = 0; k < nt; k++)
        if (k != skip1 && k != skip2 && t[k].x && memchr(t[k].lab, c, (size_t)t[k].n))
            return true;
    return false;
}

/* a repeated label in one operand: its diagonal (x times the identity on the
 * two dims, summed over the second) */
static cft_array *take_diagonal(cft_array *x, int i, int j, int64_t n) {
    int nd = cft_array_ndim(x);
    int64_t shape[CFT_MAX_NDIM];
    for (int d = 0; d < nd; d++)
        shape[d] = d == i || d == j ? n : 1;
    cft_array *eye = cft_eye(n, cft_array_dtype(x));
    if (i > j) /* the eye's dims in order i, j */
        eye = cft_transpose(eye, (int[]){1, 0});
    return cft_sum(cft_mul(x, cft_reshape(eye, shape, nd)), (int[]){j}, 1, false);
}

static cft_array *prepare(term *t, const term *all, int nt, int self, const char *out) {
    for (bool again = true; again;) { /* repeated labels */
        again = false;
        for (int i = 0; i < t->n && !again; i++)
            for (int j = i + 1; j < t->n && !again; j++)
                if (t->lab[i] == t->lab[j]) {
                    cft_aval a = cft_array_aval(t->x);
                    if (a.shape[i] != a.shape[j])
                        return cft__fail(CFT_E_SHAPE,
                                         "cft_einsum: label '%c' repeated with sizes %lld and %lld",
                                         t->lab[i], (long long)a.shape[i], (long long)a.shape[j]);
                    t->x = take_diagonal(t->x, i, j, a.shape[i]);
                    memmove(t->lab + j, t->lab + j + 1, (size_t)(t->n - j));
                    t->n--;
                    again = true;
                }
    }
    int axes[CFT_MAX_NDIM], na = 0; /* labels only this operand has: summed now */
    char keep[CFT_MAX_NDIM + 1];
    int nk = 0;
    for (int i = 0; i < t->n; i++) {
        if (!used_elsewhere(t->lab[i], all, nt, self, self, out))
            axes[na++] = i;
        else
            keep[nk++] = t->lab[i];
    }
    if (na) {
        t->x = cft_sum(t->x, axes, na, false);
        memcpy(t->lab, keep, (size_t)nk);
        t->n = nk;
        t->lab[nk] = 0;
    }
    return cft_failed(t->x) ? t->x : NULL;
}

/* elements of contracting a with b (result labels in *lab) */
static double pair_size(const term *a, const term *b, const term *all, int nt, int ia, int ib,
                        const char *out, const int64_t *size, char *lab, int *nl, char *con,
                        int *nc, char *bat, int *nbt) {
    double e = 1;
    *nl = *nc = *nbt = 0;
    for (int i = 0; i < a->n; i++) {
        char c = a->lab[i];
        bool in_b = memchr(b->lab, c, (size_t)b->n) != NULL;
        if (in_b && !used_elsewhere(c, all, nt, ia, ib, out))
            con[(*nc)++] = c;
        else if (in_b)
            bat[(*nbt)++] = c;
    }
    for (int i = 0; i < *nbt; i++) /* dot_general: batch, lhs free, rhs free */
        lab[(*nl)++] = bat[i];
    for (int i = 0; i < a->n; i++)
        if (!memchr(b->lab, a->lab[i], (size_t)b->n))
            lab[(*nl)++] = a->lab[i];
    for (int i = 0; i < b->n; i++)
        if (!memchr(a->lab, b->lab[i], (size_t)a->n))
            lab[(*nl)++] = b->lab[i];
    for (int i = 0; i < *nl; i++) { /* a symbolic size (negative) counts as 64 */
        int64_t sz = size[(unsigned char)lab[i]];
        e *= sz >= 0 ? (double)sz : 64.0;
    }
    return e;
}

static int pos(const term *t, char c) {
    const char *p = memchr(t->lab, c, (size_t)t->n);
    return p ? (int)(p - t->lab) : -1;
}

/* numpy's "...": each operand's ellipsis becomes labels of its own (the
 * unused letters, right-aligned across operands as broadcasting aligns
 * them); an operand whose ellipsis dim is 1 where another's is larger
 * drops that dim (broadcast). Writes an explicit spec (with "->") and the
 * operands to use; NULL, or the error. */
static cft_array *expand_ellipsis(const char *spec, int n, cft_array *const *xs, char *res,
                                  size_t cap, cft_array **ops) {
    char used[128] = {0};
    for (const char *q = spec; *q; q++)
        used[(unsigned char)*q & 127] = 1;
    char fresh[MAXL + 1];
    int nf = 0;
    for (int c = 'A'; c <= 'z' && nf < MAXL; c++)
        if (label_ok((char)c) && !used[c])
            fresh[nf++] = (char)c;
    const char *arrow = strstr(spec, "->");
    size_t inlen = arrow ? (size_t)(arrow - spec) : strlen(spec);
    /* the operands' parts, their ellipsis lengths, the longest */
    char part[MAXOP][2 * CFT_MAX_NDIM + 8];
    int ell[MAXOP], L = 0;
    const char *q = spec;
    for (int k = 0; k < n; k++) {
        const char *end = memchr(q, ',', inlen - (size_t)(q - spec));
        size_t len = end ? (size_t)(end - q) : inlen - (size_t)(q - spec);
        if ((!end && k < n - 1) || len >= sizeof part[k])
            return cft__fail(CFT_E_ARG, "cft_einsum: '%s' does not have %d operands", spec, n);
        memcpy(part[k], q, len);
        part[k][len] = 0;
        q = end ? end + 1 : q + len;
        int named = 0;
        for (char *c = part[k]; *c; c++)
            named += label_ok(*c);
        ell[k] = strstr(part[k], "...") ? cft_array_ndim(xs[k]) - named : 0;
        if (ell[k] < 0)
            return cft__fail(CFT_E_SHAPE,
                             "cft_einsum: '%s': operand %d has %d dims, fewer than "
                             "its %d labels",
                             spec, k, cft_array_ndim(xs[k]), named);
        L = ell[k] > L ? ell[k] : L;
    }
    if (L > nf)
        return cft__fail(CFT_E_ARG, "cft_einsum: '%s': too many dims under '...'", spec);
    int64_t bsize[CFT_MAX_NDIM];
    for (int d = 0; d < L; d++)
        bsize[d] = 1;
    for (int k = 0; k < n; k++) { /* the broadcast size of each ellipsis position */
        int at = (int)(strstr(part[k], "...") ? strstr(part[k], "...") - part[k] : 0);
        int before = 0;
        for (int c = 0; c < at; c++)
            before += label_ok(part[k][c]);
        for (int d = 0; d < ell[k]; d++) {
            int64_t sz = cft_array_dim(xs[k], before + d);
            int pos = L - ell[k] + d;
            if (sz != 1 && bsize[pos] != 1 && sz != bsize[pos])
                return cft__fail(CFT_E_SHAPE,
                                 "cft_einsum: '%s': the '...' dims do not broadcast (%lld and "
                                 "%lld)",
                                 spec, (long long)sz, (long long)bsize[pos]);
            if (sz != 1)
                bsize[pos] = sz;
        }
    }
    size_t w = 0;
    for (int k = 0; k < n; k++) {
        ops[k] = xs[k];
        char *dots = strstr(part[k], "...");
        int before = 0;
        for (char *c = part[k]; dots && c < dots; c++)
            before += label_ok(*c);
        int drop[CFT_MAX_NDIM], nd = 0;
        for (char *c = part[k]; *c && w + 8 < cap; c++) {
            if (c == dots) {
                for (int d = 0; d < ell[k]; d++) {
                    int pos = L - ell[k] + d;
                    if (cft_array_dim(xs[k], before + d) == 1 && bsize[pos] != 1)
                        drop[nd++] = before + d; /* broadcast: the dim goes */
                    else
                        res[w++] = fresh[pos];
                }
                c += 2;
            } else
                res[w++] = *c;
        }
        if (nd)
            ops[k] = cft_squeeze(xs[k], drop, nd);
        res[w++] = k < n - 1 ? ',' : 0;
    }
    w--; /* over the terminator */
    if (w + 4 + (size_t)L + MAXL >= cap)
        return cft__fail(CFT_E_ARG, "cft_einsum: '%s' is too long", spec);
    res[w++] = '-', res[w++] = '>';
    if (arrow) {
        for (const char *c = arrow + 2; *c; c++) {
            if (!strncmp(c, "...", 3)) {
                for (int d = 0; d < L; d++)
                    res[w++] = fresh[d];
                c += 2;
            } else if (*c != ' ')
                res[w++] = *c;
        }
    } else { /* implicit: the '...' dims, then the labels used once, sorted */
        for (int d = 0; d < L; d++)
            res[w++] = fresh[d];
        int count[128] = {0};
        for (size_t c = 0; c < inlen; c++)
            count[(unsigned char)spec[c] & 127]++;
        for (int c = 'A'; c <= 'z'; c++)
            if (label_ok((char)c) && count[c] == 1)
                res[w++] = (char)c;
    }
    res[w] = 0;
    return NULL;
}

cft_array *cft_einsum(const char *spec, int n, cft_array *const *xs) {
    CFT_API("cft_einsum");
    if (!spec || n < 1 || n > MAXOP || !xs)
        return cft__fail(CFT_E_ARG, "cft_einsum: a spec and 1 to %d operands", MAXOP);
    for (int i = 0; i < n; i++) {
        if (!xs[i])
            return cft__fail(CFT_E_ARG, "cft_einsum: operand %d is NULL", i);
        if (cft_failed(xs[i]))
            return xs[i];
    }
    /* one '...' at most in each operand and in the output */
    for (const char *part = spec; part && *part;) {
        const char *end = strpbrk(part, ",-"), *d = strstr(part, "...");
        if (d && (!end || d < end) && (d = strstr(d + 3, "...")) && (!end || d < end))
            return cft__fail(CFT_E_ARG, "cft_einsum: '%s': two '...' in one operand or output",
                             spec);
        part = end ? end + (*end == '-' && end[1] == '>' ? 2 : 1) : NULL;
    }
    if (strstr(spec, "...")) {
        char full[4 * MAXL + 2 * MAXOP * CFT_MAX_NDIM + 16];
        cft_array *ops[MAXOP];
        cft_array *e = expand_ellipsis(spec, n, xs, full, sizeof full, ops);
        return e ? e : cft_einsum(full, n, ops);
    }
    term t[MAXOP];
    char out[MAXL + 1] = {0};
    int64_t size[128];
    for (int c = 0; c < 128; c++)
        size[c] = -1;
    const char *p = spec;
    int count[128] = {0};
    for (int k = 0; k < n; k++) { /* "ab,bc" */
        t[k].n = 0;
        while (*p == ' ')
            p++;
        while (label_ok(*p)) {
            if (t[k].n == CFT_MAX_NDIM)
                return cft__fail(CFT_E_ARG, "cft_einsum: '%s': operand %d has too many labels",
                                 spec, k);
            t[k].lab[t[k].n++] = *p++;
        }
        t[k].lab[t[k].n] = 0;
        while (*p == ' ')
            p++;
        if (k < n - 1 && *p++ != ',')
            return cft__fail(CFT_E_ARG,
                             "cft_einsum: '%s' does not have %d operands (labels "
                             "a-z, A-Z, and '...')",
                             spec, n);
        cft_aval a = cft_array_aval(xs[k]);
        if (a.ndim != t[k].n)
            return cft__fail(CFT_E_SHAPE, "cft_einsum: '%s': operand %d has %d labels but %s", spec,
                             k, t[k].n, cft__av(&a));
        for (int i = 0; i < t[k].n; i++) {
            unsigned char c = (unsigned char)t[k].lab[i];
            if (count[c] > 0 && size[c] != a.shape[i]) /* (a symbolic size is negative) */
                return cft__fail(CFT_E_SHAPE,
                                 "cft_einsum: '%s': label '%c' is %lld in one place and %lld in "
                                 "another",
                                 spec, c, (long long)size[c], (long long)a.shape[i]);
            size[c] = a.shape[i];
            count[c]++;
        }
        t[k].x = xs[k];
    }
    if (!strncmp(p, "->", 2)) {
        p += 2;
        int no = 0;
        while (*p == ' ')
            p++;
        while (label_ok(*p)) {
            if (strchr(out, *p) || count[(unsigned char)*p] == 0 || no == MAXL)
                return cft__fail(CFT_E_ARG,
                                 "cft_einsum: '%s': output label '%c' repeated or in no operand",
                                 spec, *p);
            out[no++] = *p++;
        }
        while (*p == ' ')
            p++;
    } else { /* implicit: the labels used once, in alphabetical order */
        int no = 0;
        for (int c = 'A'; c <= 'z'; c++)
            if (count[c] == 1)
                out[no++] = (char)c;
    }
    if (*p)
        return cft__fail(CFT_E_ARG, "cft_einsum: '%s': unexpected '%c'", spec, *p);
    cft_array *e;
    for (int k = 0; k < n; k++)
        if ((e = prepare(&t[k], t, n, k, out)))
            return e;
    for (int left = n; left > 1; left--) { /* the cheapest pair first */
        int bi = -1, bj = -1;
        double best = 0;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                if (!t[i].x || !t[j].x)
                    continue;
                char lab[2 * CFT_MAX_NDIM], con[CFT_MAX_NDIM], bat[CFT_MAX_NDIM];
                int nl, nc, nb;
                double s =
                    pair_size(&t[i], &t[j], t, n, i, j, out, size, lab, &nl, con, &nc, bat, &nb);
                if (bi < 0 || s < best)
                    bi = i, bj = j, best = s;
            }
        term *a = &t[bi], *b = &t[bj];
        char lab[2 * CFT_MAX_NDIM], con[CFT_MAX_NDIM], bat[CFT_MAX_NDIM];
        int nl, nc, nb;
        pair_size(a, b, t, n, bi, bj, out, size, lab, &nl, con, &nc, bat, &nb);
        if (nl > CFT_MAX_NDIM)
            return cft__fail(CFT_E_SHAPE, "cft_einsum: '%s': an intermediate needs %d dims", spec,
                             nl);
        int lc[CFT_MAX_NDIM], rc[CFT_MAX_NDIM], lb[CFT_MAX_NDIM], rb[CFT_MAX_NDIM];
        for (int i = 0; i < nc; i++)
            lc[i] = pos(a, con[i]), rc[i] = pos(b, con[i]);
        for (int i = 0; i < nb; i++)
            lb[i] = pos(a, bat[i]), rb[i] = pos(b, bat[i]);
        a->x = cft_dot_general(a->x, b->x, lc, rc, nc, lb, rb, nb);
        if (cft_failed(a->x))
            return a->x;
        memcpy(a->lab, lab, (size_t)nl);
        a->n = nl;
        a->lab[nl] = 0;
        b->x = NULL;
    }
    term *r = NULL;
    for (int i = 0; i < n; i++)
        if (t[i].x)
            r = &t[i];
    /* sum what the output does not keep, then its order */
    int axes[CFT_MAX_NDIM], na = 0;
    char keep[CFT_MAX_NDIM + 1];
    int nk = 0;
    for (int i = 0; i < r->n; i++)
        if (!strchr(out, r->lab[i]))
            axes[na++] = i;
        else
            keep[nk++] = r->lab[i];
    cft_array *y = na ? cft_sum(r->x, axes, na, false) : r->x;
    int no = (int)strlen(out), perm[CFT_MAX_NDIM];
    if (no != nk)
        return cft__fail(CFT_E_ARG, "cft_einsum: '%s': the output needs labels no operand keeps",
                         spec);
    bool same = true;
    for (int i = 0; i < no; i++) {
        perm[i] = (int)((const char *)memchr(keep, out[i], (size_t)nk) - keep);
        same &= perm[i] == i;
    }
    return same ? y : cft_transpose(y, perm);
}

cft_array *cft_einsum2(const char *spec, cft_array *a, cft_array *b) {
    CFT_API("cft_einsum2");
    if (!a || !b)
        return cft__fail(CFT_E_ARG, "cft_einsum2: operand %d is NULL", a ? 1 : 0);
    return cft_einsum(spec, 2, (cft_array *[]){a, b});
}

cft_array *cft_tensordot(cft_array *a, cft_array *b, const int *a_axes, const int *b_axes,
                         int naxes) {
    CFT_PROPAGATE("cft_tensordot", a, b);
    if (naxes < 0 || naxes > CFT_MAX_NDIM || (naxes && (!a_axes || !b_axes)))
        return cft__fail(CFT_E_ARG, "cft_tensordot: %d axes", naxes);
    return cft_dot_general(a, b, a_axes, b_axes, naxes, NULL, NULL, 0);
}

cft_array *cft_tensordot_n(cft_array *a, cft_array *b, int n) {
    CFT_PROPAGATE("cft_tensordot_n", a, b);
    int na = cft_array_ndim(a), la[CFT_MAX_NDIM], lb[CFT_MAX_NDIM];
    if (n < 0 || n > na || n > cft_array_ndim(b))
        return cft__fail(CFT_E_ARG, "cft_tensordot_n: %d axes of %d- and %d-dim operands", n, na,
                         cft_array_ndim(b));
    for (int i = 0; i < n; i++) /* a's last n with b's first n */
        la[i] = na - n + i, lb[i] = i;
    return cft_dot_general(a, b, la, lb, n, NULL, NULL, 0);
}

cft_array *cft_outer(cft_array *a, cft_array *b) {
    CFT_PROPAGATE("cft_outer", a, b);
    int64_t n = cft_array_size(a), m = cft_array_size(b);
    return cft_mul(cft_reshape(a, (int64_t[]){n, 1}, 2), cft_reshape(b, (int64_t[]){1, m}, 2));
}

cft_array *cft_matrix_trace(cft_array *x) {
    CFT_PROPAGATE("cft_matrix_trace", x);
    if (cft_array_ndim(x) != 2)
        return cft__fail(CFT_E_SHAPE, "cft_matrix_trace: needs a matrix, got %d dims",
                         cft_array_ndim(x));
    cft_aval a = cft_array_aval(x);
    if (a.shape[0] != a.shape[1])
        return cft__fail(CFT_E_SHAPE, "cft_matrix_trace: needs a square matrix, got %s",
                         cft__av(&a));
    return cft_einsum("ii->", 1, &x);
}

cft_array *cft_swapaxes(cft_array *x, int a, int b) {
    CFT_PROPAGATE("cft_swapaxes", x);
    int nd = cft_array_ndim(x), perm[CFT_MAX_NDIM];
    if (a < 0)
        a += nd;
    if (b < 0)
        b += nd;
    if (a < 0 || a >= nd || b < 0 || b >= nd)
        return cft__fail(CFT_E_ARG, "cft_swapaxes: axes %d, %d of a %d-dim array", a, b, nd);
    for (int i = 0; i < nd; i++)
        perm[i] = i == a ? b : i == b ? a : i;
    return cft_transpose(x, perm);
}
