/* parametrize.c: parametrizations as functions from raw parameters to a
 * weight (nn.utils.parametrize): weight_norm, orthogonal by Householder
 * products, and spectral_norm by power iteration with explicit u, v state. */
#include <math.h>

#include "core/error.h"
#include "nn/nn_internal.h"

static int norm_axis(int dim, int nd) {
    return dim < 0 ? dim + nd : dim;
}

/* sqrt(sum(x^2)) over every axis but `dim`, keeping dims */
static cft_array *norm_except(cft_array *x, int dim) {
    int nd = cft_array_ndim(x), axes[CFT_MAX_NDIM], na = 0;
    for (int i = 0; i < nd; i++)
        if (i != dim)
            axes[na++] = i;
    if (na == 0)
        return cft_abs(x);
    return cft_sqrt(cft_sum(cft_square(x), axes, na, true));
}

cft_array *cft_weight_norm(cft_array *v, cft_array *g, int dim) {
    CFT_PROPAGATE("cft_weight_norm", v, g);
    int nd = cft_array_ndim(v), d = norm_axis(dim, nd);
    if (nd < 1 || d < 0 || d >= nd || !cft_dtype_is_float(cft_array_dtype(v)))
        return cft__fail(CFT_E_ARG, "cft_weight_norm: dim %d does not fit float %s", dim,
                         cft__nn_av(v));
    if (cft_array_ndim(g) == 1 && nd > 1 && cft_array_dim(g, 0) == cft_array_dim(v, d)) {
        int64_t shape[CFT_MAX_NDIM];
        for (int i = 0; i < nd; i++)
            shape[i] = i == d ? cft_array_dim(v, d) : 1;
        g = cft_reshape(g, shape, nd);
    }
    bool ok = cft_array_ndim(g) == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = cft_array_dim(g, i) == (i == d ? cft_array_dim(v, d) : 1);
    if (!ok)
        return cft__fail(CFT_E_SHAPE, "cft_weight_norm: g %s does not fit v %s at dim %d",
                         cft__nn_av(g), cft__nn_av(v), dim);
    return cft_mul(v, cft_div(g, norm_except(v, d)));
}

cft_status cft_weight_norm_init(cft_array *w, int dim, cft_array **v, cft_array **g) {
    CFT_API("cft_weight_norm_init");
    int nd = cft_array_ndim(w), d = norm_axis(dim, nd);
    cft_array *e = NULL;
    if (!w || !v || !g)
        e = cft__fail(CFT_E_ARG, "cft_weight_norm_init: NULL argument");
    else if (cft_failed(w))
        e = w;
    else if (nd < 1 || d < 0 || d >= nd || !cft_dtype_is_float(cft_array_dtype(w)))
        e = cft__fail(CFT_E_ARG, "cft_weight_norm_init: dim %d does not fit float %s", dim,
                      cft__nn_av(w));
    if (e) {
        if (v)
            *v = e;
        if (g)
            *g = e;
        return cft__set_last(e);
    }
    *v = w;
    *g = norm_except(w, d);
    return cft__set_last(*g);
}

/* ---- orthogonal ---- */

/* bool [n, k]: row `op` col */
static cft_array *tri(int64_t n, int64_t k, int op) {
    int64_t shape[2] = {n, k};
    cft_array *r = cft_iota(CFT_I32, shape, 2, 0), *c = cft_iota(CFT_I32, shape, 2, 1);
    return op > 0 ? cft_gt(r, c) : cft_eq(r, c);
}

/* x[..., :, i:i+1] of an [..., n, k] array */
static cft_array *column(cft_array *x, int64_t i) {
    int nd = cft_array_ndim(x);
    int64_t start[CFT_MAX_NDIM] = {0}, limit[CFT_MAX_NDIM];
    for (int d = 0; d < nd; d++)
        limit[d] = cft_array_dim(x, d);
    start[nd - 1] = i;
    limit[nd - 1] = i + 1;
    return cft_slice(x, start, limit, NULL);
}

cft_array *cft_orthogonal(cft_array *x) {
    CFT_PROPAGATE("cft_orthogonal", x);
    int nd = cft_array_ndim(x);
    if (nd < 2 || !cft_dtype_is_float(cft_array_dtype(x)))
        return cft__fail(CFT_E_ARG, "cft_orthogonal: need a float [..., n, k] matrix, got %s",
                         cft__nn_av(x));
    bool transposed = cft_array_dim(x, -2) < cft_array_dim(x, -1);
    if (transposed)
        x = cft_mT(x);
    int64_t n = cft_array_dim(x, -2), k = cft_array_dim(x, -1);
    cft_array *zero = cft__nn_sc(x, 0);
    cft_array *eye = cft_astype(tri(n, k, 0), cft_array_dtype(x));
    cft_array *A = cft_where(tri(n, k, 1), x, zero); /* strictly lower part */
    int rows = -2;
    cft_array *tau = cft_div(
        cft__nn_sc(x, 2), cft_add_s(cft_sum(cft_square(A), &rows, 1, true), 1)); /* [..., 1, k] */
    cft_array *V = cft_add(A, eye);
    cft_array *Q = cft_add(eye, cft_zeros_like(x)); /* I[:, :k] with x's batch dims */
    for (int64_t i = k - 1; i >= 0; i--) {          /* Q = H_i Q, H_i = I - tau_i v_i v_i^T */
        cft_array *vi = column(V, i);
        cft_array *proj = cft_matmul(cft_mT(vi), Q); /* [..., 1, k] */
        Q = cft_sub(Q, cft_mul(cft_mul(vi, column(tau, i)), proj));
    }
    /* columns times the sign of x's diagonal (PyTorch: the diagonal cast to
     * int, the same for the +-1 diagonals it makes, degenerate otherwise) */
    cft_array *diag = cft_sum(cft_where(tri(n, k, 0), cft_stop_gradient(x), zero), &rows, 1, true);
    Q = cft_mul(Q, cft_where(cft_lt(diag, zero), cft__nn_sc(x, -1), cft__nn_sc(x, 1)));
    return transposed ? cft_mT(Q) : Q;
}

cft_array *cft_orthogonal_init(cft_array *key, int64_t n, int64_t k, cft_dtype dtype) {
    CFT_PROPAGATE("cft_orthogonal_init", key);
    if (n < 1 || k < 1 || !cft_dtype_is_float(dtype))
        return cft__fail(CFT_E_ARG, "cft_orthogonal_init: bad shape [%lld, %lld] or dtype %s",
                         (long long)n, (long long)k, cft_dtype_name(dtype));
    cft_array *x = cft_random_normal(key, dtype, (int64_t[]){n, k}, 2);
    cft_array *one = cft_scalar(1, dtype), *zero = cft_scalar(0, dtype);
    return cft_where(tri(n, k, 1), x, cft_where(tri(n, k, 0), one, zero));
}

/* ---- spectral norm ---- */

static cft_array *normalize(cft_array *x, double eps) {
    cft_array *n = cft_sqrt(cft_sum(cft_square(x), NULL, 0, false));
    return cft_div(x, cft_maximum(n, cft__nn_sc(n, eps)));
}

/* w as [w.shape[dim], rest] */
static cft_array *as_matrix(cft_array *w, int dim) {
    cft_array *m = cft_moveaxis(w, dim, 0);
    return cft_reshape(m, (int64_t[]){cft_array_dim(w, dim), -1}, 2);
}

static void power_iterations(cft_array *W, cft_array **u, cft_array **v, int n_iter, double eps) {
    cft_array *Wd = cft_stop_gradient(W), *uu = cft_stop_gradient(*u), *vv = cft_stop_gradient(*v);
    for (int i = 0; i < n_iter; i++) {
        uu = normalize(cft_matmul(Wd, vv), eps);
        vv = normalize(cft_matmul(cft_mT(Wd), uu), eps);
    }
    *u = uu, *v = vv;
}

static cft_array *check_sn(const char *op, cft_array *w, int dim) {
    int nd = cft_array_ndim(w), d = norm_axis(dim, nd);
    if (nd < 1 || d < 0 || d >= nd || !cft_dtype_is_float(cft_array_dtype(w)))
        return cft__fail(CFT_E_ARG, "%s: dim %d does not fit float %s", op, dim, cft__nn_av(w));
    return NULL;
}

cft_array *cft_spectral_norm(cft_array *w, cft_array *u, cft_array *v, int n_iter, int dim,
                             double eps, bool train, cft_array **u_out, cft_array **v_out) {
    CFT_API("cft_spectral_norm");
    cft_array *e = NULL, *y = NULL;
    if (!w)
        e = cft__fail(CFT_E_ARG, "cft_spectral_norm: NULL weight");
    else if (cft_failed(w))
        e = w;
    else
        e = check_sn("cft_spectral_norm", w, dim);
    if (!e && cft_array_ndim(w) == 1) {
        y = normalize(w, eps);
    } else if (!e) {
        if (!u || !v)
            e = cft__fail(CFT_E_ARG, "cft_spectral_norm: NULL u or v");
        else if (cft_failed(u) || cft_failed(v))
            e = cft_failed(u) ? u : v;
        else if (n_iter < 0)
            e = cft__fail(CFT_E_ARG, "cft_spectral_norm: negative n_iter %d", n_iter);
        if (!e) {
            cft_array *W = as_matrix(w, norm_axis(dim, cft_array_ndim(w)));
            if (cft_array_ndim(u) != 1 || cft_array_ndim(v) != 1 ||
                cft_array_dim(u, 0) != cft_array_dim(W, 0) ||
                cft_array_dim(v, 0) != cft_array_dim(W, 1))
                e = cft__fail(CFT_E_SHAPE,
                              "cft_spectral_norm: u %s and v %s do not fit %s as a %s matrix",
                              cft__nn_av(u), cft__nn_av(v), cft__nn_av(w), cft__nn_av(W));
            else {
                if (train)
                    power_iterations(W, &u, &v, n_iter, eps);
                cft_array *sigma = cft_sum(cft_mul(u, cft_matmul(W, v)), NULL, 0, false);
                y = cft_div(w, sigma);
            }
        }
    }
    if (e)
        y = u = v = e;
    if (u_out)
        *u_out = u;
    if (v_out)
        *v_out = v;
    return y;
}

cft_status cft_spectral_norm_init(cft_array *key, cft_array *w, int dim, double eps, cft_array **u,
                                  cft_array **v) {
    CFT_API("cft_spectral_norm_init");
    cft_array *e = NULL;
    if (!key || !w || !u || !v)
        e = cft__fail(CFT_E_ARG, "cft_spectral_norm_init: NULL argument");
    else if (cft_failed(key) || cft_failed(w))
        e = cft_failed(key) ? key : w;
    else if (!(e = check_sn("cft_spectral_norm_init", w, dim)) && cft_array_ndim(w) < 2)
        e = cft__fail(CFT_E_ARG, "cft_spectral_norm_init: a 1-d weight needs no u, v");
    if (e) {
        if (u)
            *u = e;
        if (v)
            *v = e;
        return cft__set_last(e);
    }
    cft_array *W = as_matrix(w, norm_axis(dim, cft_array_ndim(w)));
    cft_array *keys = cft_random_split(key, 2);
    cft_dtype dt = cft_array_dtype(w);
    cft_array *uu = normalize(
        cft_random_normal(cft_index(keys, 0), dt, (int64_t[]){cft_array_dim(W, 0)}, 1), eps);
    cft_array *vv = normalize(
        cft_random_normal(cft_index(keys, 1), dt, (int64_t[]){cft_array_dim(W, 1)}, 1), eps);
    power_iterations(W, &uu, &vv, 15, eps);
    *u = uu, *v = vv;
    cft_status st = cft__set_last(uu);
    return st != CFT_OK ? st : cft__set_last(vv);
}
