/* rows_linalg.h: a fragment of test_prims.c (included twice there, not a
 * header of its own): the rows of the linear-algebra primitives (linalg.c)
 * and their composites. Row functions make their inputs valid (A A^T + nI
 * for cholesky, x + 3I for solves, x + x^T for eigh); outputs with a sign
 * ambiguity (eigenvectors, QR, SVD factors) are normalised with sign(), whose
 * derivative is zero. References are plain double loops: Cholesky, Gaussian
 * elimination with partial pivoting, cyclic Jacobi, modified Gram-Schmidt.
 * It uses test_prims.c's row type and FN macros. */
#ifndef ROWS_LINALG_DEFS_DONE
#define ROWS_LINALG_DEFS_DONE

/* ---- references (n x n row-major doubles) ---- */

static void la_chol(const double *A, int n, double *L) {
    memset(L, 0, sizeof(double) * (size_t)(n * n));
    for (int j = 0; j < n; j++) {
        double s = A[j * n + j];
        for (int k = 0; k < j; k++)
            s -= L[j * n + k] * L[j * n + k];
        L[j * n + j] = sqrt(s);
        for (int i = j + 1; i < n; i++) {
            double t = A[i * n + j];
            for (int k = 0; k < j; k++)
                t -= L[i * n + k] * L[j * n + k];
            L[i * n + j] = t / L[j * n + j];
        }
    }
}
/* solve A X = B (n x n, n x k) by Gaussian elimination with partial
 * pivoting; returns log|det A| and writes its sign */
static double la_gauss(const double *A0, int n, double *B, int k, double *sign) {
    double A[64], lad = 0;
    memcpy(A, A0, sizeof(double) * (size_t)(n * n));
    *sign = 1;
    for (int c = 0; c < n; c++) {
        int p = c;
        for (int i = c + 1; i < n; i++)
            if (fabs(A[i * n + c]) > fabs(A[p * n + c]))
                p = i;
        if (p != c) {
            *sign = -*sign;
            for (int j = 0; j < n; j++) {
                double t = A[c * n + j];
                A[c * n + j] = A[p * n + j];
                A[p * n + j] = t;
            }
            for (int j = 0; j < k; j++) {
                double t = B[c * k + j];
                B[c * k + j] = B[p * k + j];
                B[p * k + j] = t;
            }
        }
        double d = A[c * n + c];
        if (d < 0)
            *sign = -*sign;
        lad += log(fabs(d));
        for (int i = c + 1; i < n; i++) {
            double f = A[i * n + c] / d;
            for (int j = c; j < n; j++)
                A[i * n + j] -= f * A[c * n + j];
            for (int j = 0; j < k; j++)
                B[i * k + j] -= f * B[c * k + j];
        }
    }
    for (int c = n - 1; c >= 0; c--)
        for (int j = 0; j < k; j++) {
            double s = B[c * k + j];
            for (int i = c + 1; i < n; i++)
                s -= A[c * n + i] * B[i * k + j];
            B[c * k + j] = s / A[c * n + c];
        }
    return lad;
}
/* eigenvalues (ascending) and eigenvectors (columns) of symmetric A, by
 * cyclic Jacobi rotations */
static void la_jacobi(const double *A0, int n, double *w, double *V) {
    double A[64];
    memcpy(A, A0, sizeof(double) * (size_t)(n * n));
    for (int i = 0; i < n * n; i++)
        V[i] = i % (n + 1) == 0;
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                off += A[i * n + j] * A[i * n + j];
        if (off < 1e-300)
            break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                if (fabs(A[p * n + q]) < 1e-300)
                    continue;
                double th = (A[q * n + q] - A[p * n + p]) / (2 * A[p * n + q]);
                double t = (th >= 0 ? 1 : -1) / (fabs(th) + sqrt(th * th + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; k++) { /* A <- A J */
                    double akp = A[k * n + p], akq = A[k * n + q];
                    A[k * n + p] = c * akp - s * akq, A[k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; k++) { /* A <- J^T A */
                    double apk = A[p * n + k], aqk = A[q * n + k];
                    A[p * n + k] = c * apk - s * aqk, A[q * n + k] = s * apk + c * aqk;
                }
                for (int k = 0; k < n; k++) {
                    double vkp = V[k * n + p], vkq = V[k * n + q];
                    V[k * n + p] = c * vkp - s * vkq, V[k * n + q] = s * vkp + c * vkq;
                }
            }
    }
    int idx[8];
    for (int i = 0; i < n; i++)
        idx[i] = i;
    for (int i = 0; i < n; i++) /* sort ascending */
        for (int j = i + 1; j < n; j++)
            if (A[idx[j] * n + idx[j]] < A[idx[i] * n + idx[i]]) {
                int t = idx[i];
                idx[i] = idx[j];
                idx[j] = t;
            }
    double Vs[64];
    for (int j = 0; j < n; j++) {
        w[j] = A[idx[j] * n + idx[j]];
        for (int i = 0; i < n; i++)
            Vs[i * n + j] = V[i * n + idx[j]];
    }
    memcpy(V, Vs, sizeof(double) * (size_t)(n * n));
}

/* ---- row functions (inputs made valid inside) ---- */

static cft_array *la_shift(cft_array *x, double s) { /* x + s I */
    return cft_add(x, cft_mul_s(cft_eye(cft_array_aval(x).shape[0], cft_array_dtype(x)), s));
}
static cft_array *la_sgn_cols(cft_array *M, cft_array *ref) { /* M * sign(ref) per column */
    return cft_mul(M, cft_sign(ref));
}
static cft_array *la_row0(cft_array *M) { /* M[0:1, :] */
    cft_aval a = cft_array_aval(M);
    return cft_slice(M, (int64_t[]){0, 0}, (int64_t[]){1, a.shape[1]}, NULL);
}

FN(fn_la_cholesky) {
    UNUSED_FN;
    out[0] = cft_linalg_cholesky(la_shift(cft_matmul(in[0], cft_mT(in[0])), 3));
    return CFT_OK;
}
static void ref_la_cholesky(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                            double *y) {
    (void)r, (void)o;
    int n = (int)av[0].shape[0];
    double A[64];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = i == j ? 3 : 0;
            for (int k = 0; k < n; k++)
                s += x[0][i * n + k] * x[0][j * n + k];
            A[i * n + j] = s;
        }
    la_chol(A, n, y);
}

/* triangular_solve: p = upper, left, transpose, unit */
FN(fn_la_trisolve) {
    UNUSED_FN;
    ENV_ROW;
    out[0] =
        cft_linalg_solve_triangular(la_shift(in[0], 3), in[1], r->p[0], r->p[1], r->p[2], r->p[3]);
    return CFT_OK;
}
static void ref_la_trisolve(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                            double *y) {
    (void)o;
    int n = (int)av[0].shape[0], M = (int)av[1].shape[0], N = (int)av[1].shape[1];
    double T[64], opT[64], B[64];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            bool in_tri = r->p[0] ? j >= i : j <= i;
            double v = in_tri ? x[0][i * n + j] + (i == j ? 3 : 0) : 0;
            if (i == j && r->p[3])
                v = 1;
            T[i * n + j] = v;
        }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            opT[i * n + j] = r->p[2] ? T[j * n + i] : T[i * n + j];
    double sg;
    if (r->p[1]) { /* op(T) X = B */
        memcpy(B, x[1], sizeof(double) * (size_t)(M * N));
        la_gauss(opT, n, B, N, &sg);
        memcpy(y, B, sizeof(double) * (size_t)(M * N));
    } else { /* X op(T) = B: op(T)^T X^T = B^T */
        double TT[64];
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                TT[i * n + j] = opT[j * n + i];
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                B[j * M + i] = x[1][i * N + j];
        la_gauss(TT, n, B, M, &sg);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                y[i * N + j] = B[j * M + i];
    }
}

FN(fn_la_solve) {
    UNUSED_FN;
    out[0] = cft_linalg_solve(la_shift(in[0], 3), in[1]);
    return CFT_OK;
}
static void ref_la_solve(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                         double *y) {
    (void)r, (void)o;
    int n = (int)av[0].shape[0], k = (int)av[1].shape[1];
    double A[64], sg;
    for (int i = 0; i < n * n; i++)
        A[i] = x[0][i] + (i % (n + 1) == 0 ? 3 : 0);
    memcpy(y, x[1], sizeof(double) * (size_t)(n * k));
    la_gauss(A, n, y, k, &sg);
}
FN(fn_la_inv) {
    UNUSED_FN;
    out[0] = cft_linalg_inv(la_shift(in[0], 3));
    return CFT_OK;
}
static void ref_la_inv(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                       double *y) {
    (void)r, (void)o;
    int n = (int)av[0].shape[0];
    double A[64], sg;
    for (int i = 0; i < n * n; i++)
        A[i] = x[0][i] + (i % (n + 1) == 0 ? 3 : 0), y[i] = i % (n + 1) == 0;
    la_gauss(A, n, y, n, &sg);
}

/* p[0]: 0 logabsdet, 1 det */
FN(fn_la_slogdet) {
    UNUSED_FN;
    ENV_ROW;
    cft_array *A = la_shift(in[0], 1), *s, *l;
    cft_linalg_slogdet(A, &s, &l);
    out[0] = r->p[0] ? cft_linalg_det(A) : l;
    return CFT_OK;
}
static void ref_la_slogdet(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                           double *y) {
    (void)o;
    int n = (int)av[0].shape[0];
    double A[64], B[8] = {0}, sg;
    for (int i = 0; i < n * n; i++)
        A[i] = x[0][i] + (i % (n + 1) == 0 ? 1 : 0);
    double lad = la_gauss(A, n, B, 1, &sg);
    y[0] = r->p[0] ? sg * exp(lad) : lad;
}

/* eigh: [w; V with each column's first entry made positive] */
FN(fn_la_eigh) {
    UNUSED_FN;
    cft_array *w, *V;
    cft_linalg_eigh(cft_add(in[0], cft_mT(in[0])), &w, &V);
    out[0] =
        cft_concatenate((cft_array *[]){cft_expand_dims(w, 0), la_sgn_cols(V, la_row0(V))}, 2, 0);
    return CFT_OK;
}
static void ref_la_eigh(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                        double *y) {
    (void)r, (void)o;
    int n = (int)av[0].shape[0];
    double A[64] = {0}, V[64];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            A[i * n + j] = x[0][i * n + j] + x[0][j * n + i];
    la_jacobi(A, n, y, V);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            y[n + i * n + j] = V[i * n + j] * (V[j] < 0 ? -1 : 1);
}

/* qr of [m, n], m >= n: [Q D; D R] with D = sign(diag R) (positive diagonal) */
FN(fn_la_qr) {
    UNUSED_FN;
    cft_array *Q, *R;
    cft_linalg_qr(in[0], &Q, &R);
    cft_array *d =
        cft_sign(cft_sum(cft_mul(R, cft_eye(cft_array_aval(R).shape[0], cft_array_dtype(R))),
                         (int[]){-1}, 1, false));
    out[0] =
        cft_concatenate((cft_array *[]){cft_mul(Q, d), cft_mul(cft_expand_dims(d, 1), R)}, 2, 0);
    return CFT_OK;
}
static void ref_la_qr(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                      double *y) {
    (void)r, (void)o;
    int m = (int)av[0].shape[0], n = (int)av[0].shape[1];
    double Q[64], R[64] = {0};
    memcpy(Q, x[0], sizeof(double) * (size_t)(m * n));
    for (int j = 0; j < n; j++) { /* modified Gram-Schmidt */
        double nr = 0;
        for (int i = 0; i < m; i++)
            nr += Q[i * n + j] * Q[i * n + j];
        nr = sqrt(nr);
        R[j * n + j] = nr;
        for (int i = 0; i < m; i++)
            Q[i * n + j] /= nr;
        for (int k = j + 1; k < n; k++) {
            double d = 0;
            for (int i = 0; i < m; i++)
                d += Q[i * n + j] * Q[i * n + k];
            R[j * n + k] = d;
            for (int i = 0; i < m; i++)
                Q[i * n + k] -= d * Q[i * n + j];
        }
    }
    memcpy(y, Q, sizeof(double) * (size_t)(m * n));
    memcpy(y + m * n, R, sizeof(double) * (size_t)(n * n));
}

/* svd of A = x + C, [m, n], m >= n, C = diag(1.5, 3, 4.5, ...) to keep the
 * singular values apart (f32 singular vectors are accurate to eps / gap):
 * [U D; S; (D Vh)^T] with D = sign(Vh[:, 0]) */
static double la_svd_c(int i, int j) {
    return i == j ? 1.5 * (j + 1) : 0;
}
FN(fn_la_svd) {
    UNUSED_FN;
    cft_aval a = cft_array_aval(in[0]);
    double c[64];
    for (int i = 0; i < a.shape[0]; i++)
        for (int j = 0; j < a.shape[1]; j++)
            c[i * a.shape[1] + j] = la_svd_c(i, j);
    cft_array *U, *S, *Vh, *A = cft_add(in[0], cft_astype(cft_from_f64(c, a.shape, 2), a.dtype));
    cft_linalg_svd(A, &U, &S, &Vh);
    cft_array *V = cft_mT(Vh), *d = la_row0(V);
    out[0] = cft_concatenate(
        (cft_array *[]){la_sgn_cols(U, d), cft_expand_dims(S, 0), la_sgn_cols(V, d)}, 3, 0);
    return CFT_OK;
}
static void ref_la_svd(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                       double *y) {
    (void)r, (void)o;
    int m = (int)av[0].shape[0], n = (int)av[0].shape[1];
    double G[64] = {0}, w[8], V[64], X[64];
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            X[i * n + j] = x[0][i * n + j] + la_svd_c(i, j);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < m; k++)
                s += X[k * n + i] * X[k * n + j];
            G[i * n + j] = s;
        }
    la_jacobi(G, n, w, V);
    for (int jj = 0; jj < n; jj++) { /* descending */
        int j = n - 1 - jj;
        double s = sqrt(w[j]), sg = V[j] < 0 ? -1 : 1;
        y[m * n + jj] = s;
        for (int i = 0; i < n; i++)
            y[m * n + n + i * n + jj] = V[i * n + j] * sg;
        for (int i = 0; i < m; i++) {
            double u = 0;
            for (int k = 0; k < n; k++)
                u += X[i * n + k] * V[k * n + j];
            y[i * n + jj] = u / s * sg;
        }
    }
}

#else /* the rows, inside the table */

/* clang-format off */
#define LA23 {F, 2, {3, 2}, -1, 1, 0}
    {.prim = "cholesky", .fn = fn_la_cholesky, .nin = 1, .in = {{F, 2, {3, 3}, -1, 1, 0}}, .out_nd = -1,
     .ref = ref_la_cholesky, .flags = O2 | BLAS_SHAPES},
    {.prim = "triangular_solve", .label = "triangular_solve (left, lower)", .fn = fn_la_trisolve, .nin = 2,
     .in = {{F, 2, {3, 3}, -1, 1, 0}, LA23}, .out_nd = 2, .out_shape = {3, 2}, .ref = ref_la_trisolve,
     .p = {0, 1, 0, 0}, .flags = O2 | BLAS_SHAPES},
    {.prim = "triangular_solve", .label = "triangular_solve (right, upper, transposed)", .fn = fn_la_trisolve,
     .nin = 2, .in = {{F, 2, {3, 3}, -1, 1, 0}, {F, 2, {2, 3}, -1, 1, 0}}, .out_nd = 2, .out_shape = {2, 3},
     .ref = ref_la_trisolve, .p = {1, 0, 1, 0}, .flags = O2 | BLAS_SHAPES},
    {.prim = "triangular_solve", .label = "triangular_solve (left, lower, transposed, unit)",
     .fn = fn_la_trisolve, .nin = 2, .in = {{F, 2, {3, 3}, -1, 1, 0}, LA23}, .out_nd = 2, .out_shape = {3, 2},
     .ref = ref_la_trisolve, .p = {0, 1, 1, 1}, .flags = O2 | BLAS_SHAPES},
    {.prim = "solve", .fn = fn_la_solve, .nin = 2, .in = {{F, 2, {3, 3}, -1, 1, 0}, LA23}, .out_nd = 2,
     .out_shape = {3, 2}, .ref = ref_la_solve, .flags = O2 | BLAS_SHAPES},
    {.prim = "solve", .label = "solve (inv)", .fn = fn_la_inv, .nin = 1, .in = {{F, 2, {3, 3}, -1, 1, 0}},
     .out_nd = -1, .ref = ref_la_inv, .flags = O2 | BLAS_SHAPES},
    {.prim = "slogdet", .fn = fn_la_slogdet, .nin = 1, .in = {{F, 2, {3, 3}, -1, 1, 0}}, .out_nd = 0,
     .ref = ref_la_slogdet, .p = {0}, .flags = O2 | BLAS_SHAPES},
    {.prim = "slogdet", .label = "slogdet (det)", .fn = fn_la_slogdet, .nin = 1,
     .in = {{F, 2, {3, 3}, -1, 1, 0}}, .out_nd = 0, .ref = ref_la_slogdet, .p = {1}, .flags = O2 | BLAS_SHAPES},
    {.prim = "eigh", .fn = fn_la_eigh, .nin = 1, .in = {{F, 2, {3, 3}, -1, 1, 0}}, .out_nd = 2,
     .out_shape = {4, 3}, .ref = ref_la_eigh, .flags = O2 | BLAS_SHAPES},
    {.prim = "qr", .fn = fn_la_qr, .nin = 1, .in = {{F, 2, {4, 3}, -1, 1, 0}}, .out_nd = 2,
     .out_shape = {7, 3}, .ref = ref_la_qr, .flags = O2 | BLAS_SHAPES},
    {.prim = "svd", .fn = fn_la_svd, .nin = 1, .in = {{F, 2, {4, 3}, -1, 1, 0}}, .out_nd = 2,
     .out_shape = {8, 3}, .ref = ref_la_svd, .flags = O2 | BLAS_SHAPES},
#undef LA23
/* clang-format on */

#endif
