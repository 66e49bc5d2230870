/* powersgd.c: the PowerSGD communication hook (Vogels, Karimireddy and
 * Jaggi 2019; PyTorch 1.10's powerSGD_hook). Each gradient of two or more
 * dims, viewed as M [n, m] (first dim by the rest), is replaced by a
 * rank-r approximation P Q^T found by one step of power iteration:
 *   M += e (error feedback); P = M Q; P = mean over ranks; P = orth(P);
 *   Q = M^T P; Q = mean over ranks; approx = P Q^T; e = M - approx.
 * Q is warm-started from the previous step (same random start on every
 * rank); vectors and the first start_iter steps use plain all_reduce. It
 * counts the bytes it sends against what all_reduce would send. */
#include <string.h>

#include "array/array.h"
#include "cft/cft.h"
#include "core/error.h"
#include "core/mem.h"
#include "dist/dist.h"

typedef struct entry {
    const char *name;
    cft_array *q, *err; /* warm start, error feedback */
    struct entry *next;
} entry;

struct cft_powersgd {
    int rank, start_iter;
    uint64_t seed;
    int64_t iter;
    entry *entries;
    double sent, plain;
};

cft_powersgd *cft_powersgd_new(int rank, int start_iter, uint64_t seed) {
    CFT_API("cft_powersgd_new");
    if (rank < 1) {
        cft__set_last(cft__fail(CFT_E_ARG, "cft_powersgd_new: rank %d (must be >= 1)", rank));
        return NULL;
    }
    cft_powersgd *p = CFT_NEW(cft_powersgd);
    p->rank = rank;
    p->start_iter = start_iter < 0 ? 0 : start_iter;
    p->seed = seed;
    return p;
}

double cft_powersgd_bytes(const cft_powersgd *p, double *uncompressed) {
    if (uncompressed)
        *uncompressed = p ? p->plain : 0;
    return p ? p->sent : 0;
}

static entry *find(cft_powersgd *p, const char *name) {
    for (entry *e = p->entries; e; e = e->next)
        if (!strcmp(e->name, name))
            return e;
    entry *e = CFT_NEW(entry);
    e->name = cft__strdup(name);
    e->next = p->entries;
    p->entries = e;
    return e;
}

static double bytes_of(cft_array *x) {
    return (double)cft_array_size(x) * (double)cft_dtype_size(cft_array_dtype(x));
}

cft_status cft_ddp_hook_powersgd(void *state, cft_dist_group *g, const cft_ddp_bucket *b,
                                 cft_array **out) {
    CFT_API("cft_ddp_hook_powersgd");
    cft_powersgd *p = state;
    if (!p)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_ddp_hook_powersgd: no state "
                                                  "(cft_powersgd_new)"));
    if (b->index == 0)
        p->iter++;
    for (int k = 0; k < b->n; k++) {
        cft_array *grad = b->grads[k];
        cft_aval a = cft_array_aval(grad);
        p->plain += bytes_of(grad);
        int64_t n = a.ndim >= 2 ? a.shape[0] : 0, m = n ? cft_array_size(grad) / n : 0;
        int64_t r = p->rank < n ? p->rank : n;
        r = r < m ? r : m;
        if (p->iter <= p->start_iter || a.ndim < 2 || r < 1 || (n + m) * r >= n * m) {
            out[k] = cft_dist_all_reduce(g, grad, CFT_DIST_MEAN); /* not worth compressing */
            p->sent += bytes_of(grad);
            if (cft_failed(out[k]))
                return cft__set_last(out[k]);
            continue;
        }
        entry *e = find(p, b->names[k]);
        cft_array *M = cft_reshape(grad, (int64_t[]){n, m}, 2);
        if (e->err)
            M = cft_add(M, e->err);
        if (!e->q) /* the same start on every rank: a shared seed */
            e->q = cft_astype(cft_random_normal(cft_random_fold_in(cft_random_key(p->seed),
                                                                   (int64_t)k + 7919 * b->index),
                                                CFT_F64, (int64_t[]){m, r}, 2),
                              a.dtype);
        cft_array *P = cft_dist_all_reduce(g, cft_matmul(M, e->q), CFT_DIST_MEAN);
        cft_array *Qr = NULL, *R = NULL;
        cft_linalg_qr(P, &Qr, &R); /* orthogonalise the columns of P */
        P = Qr;
        cft_array *Q =
            cft_dist_all_reduce(g, cft_matmul(cft_transpose(M, (int[]){1, 0}), P), CFT_DIST_MEAN);
        if (cft_failed(Q))
            return cft__set_last(Q);
        p->sent += bytes_of(P) + bytes_of(Q);
        cft_array *approx = cft_matmul(P, cft_transpose(Q, (int[]){1, 0}));
        e->err = cft_sub(M, approx);
        e->q = Q;
        out[k] = cft_reshape(approx, a.shape, a.ndim);
        if (cft_failed(out[k]))
            return cft__set_last(out[k]);
    }
    return CFT_OK;
}
