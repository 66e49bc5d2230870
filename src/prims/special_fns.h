/* special_fns.h: scalar special functions in double (erfcx, erfinv,
 * erfcinv, ndtr, ndtri, log_ndtr, digamma, Hurwitz zeta, polygamma, the
 * regularized incomplete gammas, modified Bessel I0/I1 and their scaled
 * forms, sinc) as static inline C. They serve three users: the kernels of
 * the special rows of unary.def / binary.def, the tests, and the jit's
 * generated C. For the last, the whole body is one argument of the macro
 * CFT_SF_EMIT: compiled normally it expands to the code; lower/emit.c
 * defines CFT_SF_EMIT to stringify it and pastes the text into the prelude
 * of every generated file, so fused kernels call the very same code.
 * Constraints that follow: no preprocessor directives inside the body
 * (commas are fine: the macro is variadic); only libm names (the jit
 * prelude includes <math.h> and <tgmath.h>; all arithmetic is in double).
 * f32 rows evaluate in double and round once. Methods and accuracy are in
 * docs/implementation.md ("special functions"). */
#ifndef CFT_SPECIAL_FNS_H
#define CFT_SPECIAL_FNS_H
#ifndef CFT_SF_EMIT
#include <math.h>
#define CFT_SF_EMIT(...) __VA_ARGS__
#endif

/* clang-format off */
CFT_SF_EMIT(
/* declared here: glibc declares them only with _DEFAULT_SOURCE */
double j0(double); double j1(double);

/* exp(x*x) with x*x split exactly (fma), so large |x| loses no bits */
static inline double cft_sf_expx2(double x) {
    double h = x * x, l = fma(x, x, -h), e = exp(h);
    return e + e * l;
}

/* erfcx(x) = exp(x^2) erfc(x): direct product below 10 (x^2 split), the
 * asymptotic series sum (-1)^k (2k-1)!! / (2x^2)^k / (x sqrt(pi)) above,
 * and erfcx(x) = 2 exp(x^2) - erfcx(-x) for negative x */
static inline double cft_sf_erfcx(double x) {
    if (x != x) return x;
    if (x < 0) {
        if (x < -26.7) return INFINITY;
        double ax = -x, r;
        if (ax < 10) r = cft_sf_expx2(ax) * erfc(ax);
        else {
            double z = 0.5 / (ax * ax), t = 1, s = 1;
            for (int k = 1; k < 60; k++) {
                t *= -(2 * k - 1) * z;
                s += t;
                if (fabs(t) < 1e-17 * s) break;
            }
            r = s / (ax * 1.7724538509055160273);
        }
        return 2 * cft_sf_expx2(x) - r;
    }
    if (x < 10) return cft_sf_expx2(x) * erfc(x);
    if (x > 1e150) return 0.56418958354775628695 / x;
    double z = 0.5 / (x * x), t = 1, s = 1;
    for (int k = 1; k < 60; k++) {
        t *= -(2 * k - 1) * z;
        s += t;
        if (fabs(t) < 1e-17 * s) break;
    }
    return s / (x * 1.7724538509055160273);
}

/* Giles' single-precision erfinv polynomial in w = -log((1-x)(1+x)),
 * without the factor x; good to ~1e-7 for w < 16 */
static inline double cft_sf_giles(double w) {
    double p;
    if (w < 5) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    return p;
}

/* erfinv(x) for |x| <= 0.5: Giles' guess, then Newton on erf(y) - x */
static inline double cft_sf_erfinv_mid(double x) {
    if (x == 0) return x;
    double y = x * cft_sf_giles(-log((1 - x) * (1 + x)));
    for (int i = 0; i < 4; i++) {
        double d = (erf(y) - x) / (1.1283791670955126 * exp(-y * y));
        y -= d;
        if (fabs(d) <= 1e-17 * fabs(y)) break;
    }
    return y;
}

/* erfcinv(z), the y with erfc(y) = z, for 0 < z < 2. Near z = 1 it solves
 * erf(y) = 1 - z (exact there); for z < 0.5 Newton runs on
 * log(erfc(y) / z), whose slope is -2 / (sqrt(pi) erfcx(y)), from Giles'
 * guess or, in the far tail, from the fixed point of
 * y^2 = -log(z) - log(sqrt(pi) y) */
static inline double cft_sf_erfcinv(double z) {
    if (!(z > 0 && z < 2)) return z == 0 ? INFINITY : z == 2 ? -INFINITY : NAN;
    if (z > 1) return -cft_sf_erfcinv(2 - z);
    if (z >= 0.5) return cft_sf_erfinv_mid(1 - z);
    double w = -log(z * (2 - z)), y;
    if (w < 16) y = (1 - z) * cft_sf_giles(w);
    else {
        double t = -log(z);
        y = sqrt(t);
        for (int i = 0; i < 4; i++) y = sqrt(t - log(1.7724538509055160273 * y));
    }
    for (int i = 0; i < 12; i++) {
        double e = erfc(y), h;
        if (e > 1e-290) h = log(e / z);
        else {
            double hh = y * y, hl = fma(y, y, -hh);
            h = log(cft_sf_erfcx(y)) - hh - hl - log(z);
        }
        double d = h * cft_sf_erfcx(y) / 1.1283791670955126;
        y += d;
        if (fabs(d) <= 1e-17 * y) break;
    }
    return y;
}

/* erfinv(x) = erfcinv(1 - x), taken where each form is exact */
static inline double cft_sf_erfinv(double x) {
    if (x != x) return x;
    if (fabs(x) <= 0.5) return cft_sf_erfinv_mid(x);
    if (fabs(x) > 1) return NAN;
    double r = cft_sf_erfcinv(1 - fabs(x));
    return x < 0 ? -r : r;
}

/* ndtr(x) = erfc(-x / sqrt 2) / 2, the rounding of -x / sqrt 2 corrected
 * to first order (it would cost ~x^2 ulp in the tails) */
static inline double cft_sf_ndtr(double x) {
    /* 1/sqrt 2 = 0.70710678118654757 - 4.833646656726457e-17 */
    double u = -x * 0.70710678118654757;
    double l = fma(-x, 0.70710678118654757, -u) + x * 4.833646656726457e-17;
    double e = erfc(u);
    if (l != 0 && fabs(u) < 27) e -= l * 1.1283791670955126 * exp(-u * u);
    return 0.5 * e;
}

/* log ndtr(x): log1p(-ndtr(-x)) above 0; log ndtr(x) down to -5; below,
 * log(erfcx(t) / 2) - t^2 with t = -x / sqrt 2 and t^2 = x^2 / 2 exact */
static inline double cft_sf_log_ndtr(double x) {
    if (x != x) return x;
    if (x > 0) return log1p(-cft_sf_ndtr(-x));
    if (x > -5) return log(cft_sf_ndtr(x));
    double h = x * x, l = fma(x, x, -h);
    return log(0.5 * cft_sf_erfcx(-x * 0.70710678118654757)) - 0.5 * h - 0.5 * l;
}

/* ndtri(p) = -sqrt 2 erfcinv(2p) (2p exact) */
static inline double cft_sf_ndtri(double p) {
    if (!(p > 0 && p < 1)) return p == 0 ? -INFINITY : p == 1 ? INFINITY : NAN;
    return -1.4142135623730951 * cft_sf_erfcinv(2 * p);
}

/* Hurwitz zeta(s, q) = sum_k (q + k)^-s by Euler-Maclaurin (as Cephes):
 * direct terms until q + N > 9, the integral and half-term, then up to 12
 * Bernoulli corrections. s < 1 (and s = 1) is outside the series: NaN
 * (inf at s = 1); q a non-positive integer gives inf; q < 0 needs an
 * integer s (q^-s), else NaN. */
static inline double cft_sf_zeta(double s, double q) {
    static const double A[12] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0,
        -1.8924375803183791606e9, 7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
        -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
    if (s != s || q != q) return s + q;
    if (s == 1) return INFINITY;
    if (s < 1) return NAN;
    if (q <= 0) {
        if (q == floor(q)) return INFINITY;
        if (s != floor(s)) return NAN;
    }
    double sum = pow(q, -s), a = q, b = 0;
    int i = 0;
    while (i < 9 || a <= 9) {
        i++;
        a += 1;
        b = pow(a, -s);
        sum += b;
        if (fabs(b / sum) < 1e-17) return sum;
    }
    double w = a, f = 1, t;
    sum += b * w / (s - 1);
    sum -= 0.5 * b;
    double k = 0;
    for (i = 0; i < 12; i++) {
        f *= s + k;
        b /= w;
        t = f * b / A[i];
        sum += t;
        if (fabs(t / sum) < 1e-17) break;
        k += 1;
        f *= s + k;
        b /= w;
        k += 1;
    }
    return sum;
}

/* digamma: 0 -> -inf, negative integers -> NaN; reflection
 * psi(x) = psi(1 - x) - pi / tan(pi x) below 0 (tan of the exact fractional
 * part); a Taylor series about the positive root x0 within 0.1 of it (the
 * coefficients (-1)^(k+1) zeta(k+1, x0) from mpmath); else recurrence up to
 * 10 and the asymptotic series log x - 1/2x - sum B2k / (2k x^2k). */
static inline double cft_sf_digamma(double x) {
    static const double C[21] = {0.9676722454476212, -0.4427631689835921, 0.258499760955651,
        -0.16394270544240652, 0.10782405069126237, -0.07219956125645471, 0.04880428816414311,
        -0.03316112647484736, 0.022597648232218104, -0.01542476590494896, 0.010538791616612175,
        -0.007204534386356869, 0.004926781395729853, -0.003369801655439328, 0.002305126326734928,
        -0.0015769367714301972, 0.0010788252019162967, -0.0007380709389960052, 0.000504953265834602,
        -0.0003454680251063077, 0.00023635601564027053};
    if (x != x || x == INFINITY) return x;
    if (x <= 0) {
        if (x == floor(x)) return x == 0 ? -INFINITY : NAN;
        double r = x - floor(x);
        return cft_sf_digamma(1 - x) - 3.14159265358979323846 / tan(3.14159265358979323846 * r);
    }
    double h = (x - 1.4616321449683622) - 9.549995429965697e-17;
    if (fabs(h) < 0.1) {
        double p = 0;
        for (int k = 20; k >= 0; k--) p = p * h + C[k];
        return p * h;
    }
    double r = 0;
    while (x < 10) {
        r -= 1 / x;
        x += 1;
    }
    double z = 1 / (x * x);
    double p = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132 -
               z * (691.0 / 32760 - z * (1.0 / 12 - z * 3617.0 / 8160)))))));
    return r + log(x) - 0.5 / x - p;
}

/* polygamma(n, x): digamma for n = 0, else (-1)^(n+1) n! zeta(n+1, x);
 * n must be a non-negative integer (else NaN) */
static inline double cft_sf_polygamma(double n, double x) {
    if (n != floor(n) || n < 0) return NAN;
    if (n == 0) return cft_sf_digamma(x);
    double f = tgamma(n + 1) * cft_sf_zeta(n + 1, x);
    return fmod(n, 2) == 1 ? f : -f;
}

/* x^a e^-x / Gamma(a), the prefactor of the incomplete gamma functions:
 * pow, exp and tgamma (a few ulp) while all three stay in range; else below
 * a = 10 as exp(a log x - x - lgamma(a)); above, as exp(a (log1p(d) - d) - c(a)) sqrt(a / 2pi)
 * with d = (x - a) / a and c(a) Stirling's correction of lgamma, which
 * avoids the cancellation of a log x - x - lgamma(a) (~a ulp) */
static inline double cft_sf_igam_fac(double a, double x) {
    double lx = a * log(x);
    if (a < 170 && x < 700 && fabs(lx) < 700) return pow(x, a) * exp(-x) / tgamma(a);
    if (a < 10) return exp(lx - x - lgamma(a));
    double d = (x - a) / a, l;
    if (fabs(d) < 0.3) {
        double p = d * d, t = 0;
        l = 0;
        for (int k = 2; k < 60; k++) {
            t = p / k;
            l += (k % 2 == 0) ? -t : t;
            p *= d;
            if (fabs(t) < 1e-17 * fabs(l)) break;
        }
    } else l = log1p(d) - d;
    double z = 1 / (a * a);
    double c = (1.0 / 12 - z * (1.0 / 360 - z * (1.0 / 1260 - z * (1.0 / 1680 - z * (1.0 / 1188 -
               z * (691.0 / 360360 - z * (1.0 / 156 - z * 3617.0 / 122400))))))) / a;
    return exp(a * l - c) * sqrt(a / 6.283185307179586477);
}

/* regularized lower incomplete gamma P(a, x) (upper = 0) or upper Q(a, x)
 * (upper = 1): the series for P when x < a + 1, else the continued
 * fraction for Q (its depth found by modified Lentz, then evaluated
 * bottom-up); the other by 1 - . For Q with a <= 1 the fraction runs
 * from x = 1 and below it a series of its own avoids 1 - P. a <= 0 or x < 0 give NaN. */
static inline double cft_sf_igam(double a, double x, int upper) {
    if (a != a || x != x) return a + x;
    if (!(a > 0) || x < 0) return NAN;
    if (x == 0) return upper ? 1 : 0;
    if (x == INFINITY) return upper ? 0 : 1;
    int cf = x >= a + 1 || (upper && a <= 1 && x >= 1);
    if (!cf && upper && a <= 1) {
        /* Q = -expm1(a log x - lgamma(1 + a)) - x^a / Gamma(1 + a) a sum_n>=1
         * (-x)^n / (n! (a + n)): no 1 - P cancellation for small a */
        double t = 1, s = 0;
        for (int n = 1; n < 200; n++) {
            t *= -x / n;
            s += t / (a + n);
            if (fabs(t / (a + n)) < 1e-17 * fabs(s)) break;
        }
        double e = a * log(x) - lgamma(1 + a);
        return -expm1(e) - exp(e) * a * s;
    }
    if (!cf) {
        double t = 1 / a, s = t;
        for (int n = 1; n < 10000; n++) {
            t *= x / (a + n);
            s += t;
            if (t < s * 1e-17) break;
        }
        double p = s * cft_sf_igam_fac(a, x);
        return upper ? 1 - p : p;
    }
    double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
    for (int i = 1; i < 10000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-17) {
            /* Lentz found the depth; evaluating bottom-up is the more
             * accurate (forward products drift by ~1 ulp per step) */
            double t = 0;
            for (int j = i + 4; j > 0; j--) t = -j * (j - a) / (x + 1 - a + 2 * j + t);
            h = 1 / (x + 1 - a + t);
            break;
        }
    }
    double q = h * cft_sf_igam_fac(a, x);
    return upper ? q : 1 - q;
}
static inline double cft_sf_gammainc(double a, double x) { return cft_sf_igam(a, x, 0); }
static inline double cft_sf_gammaincc(double a, double x) { return cft_sf_igam(a, x, 1); }

/* modified Bessel I_nu (nu = 0, 1), times exp(-|x|) when scaled: the power
 * series (all terms positive) for |x| <= 20, the asymptotic series
 * e^x / sqrt(2 pi x) sum_k (-1)^k prod_j (4nu^2 - (2j-1)^2) / (k! (8x)^k)
 * above (its smallest term there is ~e^-2x); exp(|x|) applied in two halves
 * so I0, I1 overflow only where the value does */
static inline double cft_sf_bessel_i(double x, int nu, int scaled) {
    double ax = fabs(x), r;
    if (x != x) return x;
    if (ax <= 20) {
        double q = 0.25 * ax * ax, t = nu ? 0.5 * ax : 1, s = t;
        for (int k = 1; k < 200; k++) {
            t *= q / (k * (k + nu));
            s += t;
            if (t < 1e-17 * s) break;
        }
        r = scaled ? s * exp(-ax) : s;
    } else {
        if (ax == INFINITY) return scaled ? 0 : (nu && x < 0 ? -INFINITY : INFINITY);
        double mu = 4.0 * nu * nu, t = 1, s = 1;
        for (int k = 1; k < 100; k++) {
            double m = 2 * k - 1;
            t *= -(mu - m * m) / (k * 8 * ax);
            s += t;
            if (fabs(t) < 1e-17 * s) break;
        }
        r = s / sqrt(6.283185307179586477 * ax);
        if (!scaled) {
            double e = exp(0.5 * ax);
            r = (r * e) * e;
        }
    }
    return nu && x < 0 ? -r : r;
}
static inline double cft_sf_i0(double x) { return cft_sf_bessel_i(x, 0, 0); }
static inline double cft_sf_i0e(double x) { return cft_sf_bessel_i(x, 0, 1); }
static inline double cft_sf_i1(double x) { return cft_sf_bessel_i(x, 1, 0); }
static inline double cft_sf_i1e(double x) { return cft_sf_bessel_i(x, 1, 1); }

/* sinc(x) = sin(pi x) / (pi x), 1 at 0 */
static inline double cft_sf_sinc(double x) {
    if (x == 0) return 1;
    double px = 3.14159265358979323846 * x;
    return sin(px) / px;
}
)
/* clang-format on */

#endif
