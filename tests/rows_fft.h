/* rows_fft.h: a fragment of test_prims.c (included twice there, not a
 * header of its own): the rows of the fft primitive (fft.c), one per
 * transform type plus a 3-d and a 2-d real one. Rows are real in, real out
 * (test_prims compares doubles): complex inputs are made with cft_complex
 * and complex outputs are read as re + im / 2. References are naive DFTs
 * over separate real and imaginary parts (test_fft.c checks every function
 * of fft.h in depth). It uses test_prims.c's row type and FN macros. */
#ifndef ROWS_FFT_DEFS_DONE
#define ROWS_FFT_DEFS_DONE

/* naive DFT of the complex array (re, im) of `shape` along `axis`, in
 * place, exponent sign * 2 pi i jk / n */
static void fr_dft(double *re, double *im, const int64_t *shape, int nd, int axis, int sign) {
    int64_t inner = 1, n = shape[axis], outer = 1;
    for (int d = axis + 1; d < nd; d++)
        inner *= shape[d];
    for (int d = 0; d < axis; d++)
        outer *= shape[d];
    double lr[64], li[64];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t b = o * n * inner + i;
            for (int64_t k = 0; k < n; k++) {
                double sr = 0, si = 0;
                for (int64_t j = 0; j < n; j++) {
                    double a = sign * 2 * M_PI * (double)((j * k) % n) / (double)n;
                    double xr = re[b + j * inner], xi = im[b + j * inner];
                    sr += xr * cos(a) - xi * sin(a);
                    si += xr * sin(a) + xi * cos(a);
                }
                lr[k] = sr, li[k] = si;
            }
            for (int64_t k = 0; k < n; k++)
                re[b + k * inner] = lr[k], im[b + k * inner] = li[k];
        }
}
/* out = re + im / 2, times s */
static void fr_out(const double *re, const double *im, int64_t n, double s, double *y) {
    for (int64_t i = 0; i < n; i++)
        y[i] = s * (re[i] + 0.5 * im[i]);
}
/* c2r of rows of m = n/2+1 bins (re, im) [rows, m] into y [rows, n] */
static void fr_c2r(const double *re, const double *im, int64_t rows, int64_t n, double s,
                   double *y) {
    int64_t m = n / 2 + 1;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            double v = re[r * m];
            for (int64_t k = 1; k < m; k++) {
                double w = (n % 2 == 0 && k == n / 2) ? 1 : 2,
                       a = 2 * M_PI * (double)((j * k) % n) / (double)n;
                v += w * (re[r * m + k] * cos(a) - im[r * m + k] * sin(a));
            }
            y[r * n + j] = s * v;
        }
}
static cft_array *fr_half(cft_array *z) { /* re + im / 2 */
    return cft_add(cft_real(z), cft_mul_s(cft_imag(z), 0.5));
}

FN(fn_fft_c2c) {
    UNUSED_FN;
    out[0] = fr_half(cft_fft_fft(cft_complex(in[0], in[1]), -1, -1, CFT_FFT_ORTHO));
    return CFT_OK;
}
static void ref_fft_c2c(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                        double *y) {
    (void)r, (void)o;
    double re[64], im[64];
    memcpy(re, x[0], sizeof(double) * 10), memcpy(im, x[1], sizeof(double) * 10);
    fr_dft(re, im, av[0].shape, 2, 1, -1);
    fr_out(re, im, 10, 1 / sqrt(5.0), y);
}
FN(fn_fft_ifft) { /* along axis 0, padded from 5 to 6 */
    UNUSED_FN;
    out[0] = fr_half(cft_fft_ifft(cft_complex(in[0], in[1]), 6, 0, CFT_FFT_BACKWARD));
    return CFT_OK;
}
static void ref_fft_ifft(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                         double *y) {
    (void)r, (void)av, (void)o;
    double re[64] = {0}, im[64] = {0};
    memcpy(re, x[0], sizeof(double) * 15), memcpy(im, x[1], sizeof(double) * 15);
    fr_dft(re, im, (int64_t[]){6, 3}, 2, 0, 1);
    fr_out(re, im, 18, 1 / 6.0, y);
}
FN(fn_fft_rfft) {
    UNUSED_FN;
    out[0] = fr_half(cft_fft_rfft(in[0], -1, -1, CFT_FFT_FORWARD));
    return CFT_OK;
}
static void ref_fft_rfft(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                         double *y) {
    (void)r, (void)o;
    double re[64], im[64] = {0}, hr[64], hi[64];
    memcpy(re, x[0], sizeof(double) * 14);
    fr_dft(re, im, av[0].shape, 2, 1, -1);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++)
            hr[i * 4 + k] = re[i * 7 + k], hi[i * 4 + k] = im[i * 7 + k];
    fr_out(hr, hi, 8, 1 / 7.0, y);
}
FN(fn_fft_irfft) {
    UNUSED_FN;
    out[0] = cft_fft_irfft(cft_complex(in[0], in[1]), 6, -1, CFT_FFT_BACKWARD);
    return CFT_OK;
}
static void ref_fft_irfft(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                          double *y) {
    (void)r, (void)av, (void)o;
    fr_c2r(x[0], x[1], 2, 6, 1 / 6.0, y);
}
FN(fn_fft_fftn) {
    UNUSED_FN;
    out[0] = fr_half(cft_fft_fftn(cft_complex(in[0], in[1]), NULL, NULL, -1, CFT_FFT_BACKWARD));
    return CFT_OK;
}
static void ref_fft_fftn(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                         double *y) {
    (void)r, (void)o;
    double re[64], im[64];
    memcpy(re, x[0], sizeof(double) * 24), memcpy(im, x[1], sizeof(double) * 24);
    for (int a = 0; a < 3; a++)
        fr_dft(re, im, av[0].shape, 3, a, -1);
    fr_out(re, im, 24, 1, y);
}
FN(fn_fft_irfft2) { /* [3, 3] bins -> [3, 4] */
    UNUSED_FN;
    out[0] = cft_fft_irfft2(cft_complex(in[0], in[1]), NULL, NULL, CFT_FFT_ORTHO);
    return CFT_OK;
}
static void ref_fft_irfft2(const row *r, double *const *x, const cft_aval *av, const cft_aval *o,
                           double *y) {
    (void)r, (void)o;
    double re[64], im[64];
    memcpy(re, x[0], sizeof(double) * 9), memcpy(im, x[1], sizeof(double) * 9);
    fr_dft(re, im, av[0].shape, 2, 0, 1);
    fr_c2r(re, im, 3, 4, 1 / sqrt(12.0), y);
}

#else /* the rows, inside the table */

/* clang-format off */
#define FR(r, c) {F, 2, {r, c}, -1, 1, 0}
    {.prim = "fft", .label = "fft (c2c, ortho)", .fn = fn_fft_c2c, .nin = 2, .in = {FR(2, 5), FR(2, 5)},
     .out_nd = 2, .out_shape = {2, 5}, .ref = ref_fft_c2c, .flags = O2 | BLAS_SHAPES},
    {.prim = "fft", .label = "fft (ifft along axis 0, padded)", .fn = fn_fft_ifft, .nin = 2,
     .in = {FR(5, 3), FR(5, 3)}, .out_nd = 2, .out_shape = {6, 3}, .ref = ref_fft_ifft,
     .flags = O2 | BLAS_SHAPES},
    {.prim = "fft", .label = "fft (rfft, forward norm)", .fn = fn_fft_rfft, .nin = 1, .in = {FR(2, 7)},
     .out_nd = 2, .out_shape = {2, 4}, .ref = ref_fft_rfft, .flags = O2 | BLAS_SHAPES},
    {.prim = "fft", .label = "fft (irfft, n=6)", .fn = fn_fft_irfft, .nin = 2, .in = {FR(2, 4), FR(2, 4)},
     .out_nd = 2, .out_shape = {2, 6}, .ref = ref_fft_irfft, .flags = O2 | BLAS_SHAPES},
    {.prim = "fft", .label = "fft (fftn, 3-d)", .fn = fn_fft_fftn, .nin = 2,
     .in = {{F, 3, {2, 3, 4}, -1, 1, 0}, {F, 3, {2, 3, 4}, -1, 1, 0}}, .out_nd = 3,
     .out_shape = {2, 3, 4}, .ref = ref_fft_fftn, .flags = O2 | BLAS_SHAPES},
    {.prim = "fft", .label = "fft (irfft2, ortho)", .fn = fn_fft_irfft2, .nin = 2, .in = {FR(3, 3), FR(3, 3)},
     .out_nd = 2, .out_shape = {3, 4}, .ref = ref_fft_irfft2, .flags = O2 | BLAS_SHAPES},
#undef FR
/* clang-format on */

#endif
