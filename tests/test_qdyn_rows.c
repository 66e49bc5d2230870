/* test_qdyn_rows.c: dynamic int8's row quantization (prims/qdyn_rows.c,
 * vector code) against the scalar rule it implements: per row, a = the
 * largest finite-or-infinite |x| with NaNs left out; where 0 < a < inf,
 * xs = a / 63 and xq = clamp(nearbyint(x * 63 / a), -63, 63) + 64, else
 * xs = 1 and xq from x itself; a NaN element gives 127. Exact equality
 * (the rule is integer rounding of one f64 product), for f32 and f64 rows
 * of lengths around the vector widths, with NaNs, infinities, zeros of
 * both signs, subnormals and the largest finite values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "prims/qlinear.h"

static void reference(const double *x, int64_t K, uint8_t *q, double *xs) {
    double a = 0;
    for (int64_t j = 0; j < K; j++)
        if (!isnan(x[j]))
            a = fmax(a, fabs(x[j]));
    bool ok = a > 0 && !isinf(a);
    double inv = ok ? 63 / a : 1;
    *xs = ok ? a / 63 : 1;
    for (int64_t j = 0; j < K; j++) {
        double v = isnan(x[j]) ? 63 : fmax(-63, fmin(63, nearbyint(x[j] * inv)));
        q[j] = (uint8_t)(v + 64);
    }
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    static const double special[] = {NAN,    INFINITY, -INFINITY, 0.0,  -0.0, 1e-45,     -1e-320,
                                     3.4e38, -1.7e308, 0.5,       -0.5, 1.5,  63.0 / 127};
    TEST("f32 and f64 rows of 1 to 67 values, special values included: the scalar rule's "
         "integers and scales") {
        srand(7);
        int bad = 0;
        for (int dbl = 0; dbl < 2; dbl++)
            for (int64_t K = 1; K <= 67; K += (K < 20 ? 1 : 7))
                for (int trial = 0; trial < 12; trial++) {
                    enum { M = 3 };
                    double xd[M * 67];
                    float xf[M * 67];
                    for (int64_t i = 0; i < M * K; i++) {
                        double v = ((double)rand() / RAND_MAX - 0.5) * 8;
                        if (trial >= 4 && rand() % 5 == 0)
                            v = special[rand() % (sizeof special / sizeof special[0])];
                        if (trial == 3)
                            v = 0; /* rows of zeros */
                        xf[i] = (float)v;
                        xd[i] = dbl ? v : (double)xf[i];
                    }
                    uint8_t q[M * 67], qr[67];
                    double xs[M], xsr;
                    cft__qdyn_rows(dbl ? (const void *)xd : (const void *)xf, dbl, M, K, q, xs);
                    for (int m = 0; m < M; m++) {
                        reference(xd + m * K, K, qr, &xsr);
                        bool same = memcmp(q + m * K, qr, (size_t)K) == 0 && xs[m] == xsr;
                        if (!same && bad++ < 3)
                            CHECK_MSG(same, "%s K %lld trial %d row %d: xs %g vs %g",
                                      dbl ? "f64" : "f32", (long long)K, trial, m, xs[m], xsr);
                    }
                }
        CHECK_EQ(bad, 0);
    }
    return check_summary();
}
