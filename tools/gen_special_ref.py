#!/usr/bin/python3
"""gen_special_ref.py: writes tests/special_ref.h, the reference values of
tests/test_special.c, from mpmath at 256 bits (more where a function needs
it), each rounded once to the nearest double. Run once, by hand, with
Debian's python3-mpmath (apt-get install python3-mpmath; the table in the
repository was made with mpmath 1.2.1 under /usr/bin/python3):

    /usr/bin/python3 tools/gen_special_ref.py > tests/special_ref.h

The build and the tests never run it. Inputs are doubles (most of them
exact in f32 too); mpmath sees each input exactly.
Tables: VALUE rows {x, y, f(x[, y])}; D2 rows {x, y, d^2 f / dx^2} (y the
fixed first operand of binary functions, the derivative in the second)."""
import math
import sys

import mpmath as mp
from mpmath import mpf

mp.mp.prec = 256


def lin(a, b, n):
    return [a + (b - a) * i / (n - 1) for i in range(n)]


def q64(v):  # round to a value exact in f32 and f64 (most inputs)
    return float(math_f32(v))


def math_f32(v):
    import struct
    return struct.unpack('f', struct.pack('f', v))[0]


def lgam(x):
    return mp.log(abs(mp.gamma(x)))


def ndtri(p):
    with mp.workprec(1400):
        return mp.sqrt(2) * mp.erfinv(2 * mpf(p) - 1)


def erfcx(x):
    with mp.workprec(512):
        x = mpf(x)
        return mp.erfc(x) * mp.exp(x * x)


def erfcx_d(x):  # at the working precision (mp.diff picks its step from it)
    return mp.erfc(x) * mp.exp(x * x)


def ndtri_d(p):
    return mp.sqrt(2) * mp.erfinv(2 * p - 1)


def pos(v):
    return [q64(t) for t in v]


def sym(v):
    return sorted(set([q64(t) for t in v] + [-q64(t) for t in v]))


SMALL = [1e-300, 1e-20, 1e-8, 1e-3]
UNARY = {
    'erf': (mp.erf, sym(SMALL + lin(0.05, 6, 40))),
    'erfc': (mp.erfc, pos(lin(-6, 27, 60) + SMALL)),
    'erfcx': (erfcx, pos(lin(-26, 30, 57) + [50, 100, 1e3, 1e5, 1e8, 1e20] + SMALL)),
    'erfinv': (mp.erfinv, sym(lin(0.01, 0.99, 40) + [1e-30, 1e-8, 0.999, 0.99999, 1 - 2.0**-20])
               + [1 - 2.0**-40, -(1 - 2.0**-52), 1 - 1e-12]),
    'lgamma': (lgam, pos(lin(0.05, 10, 40) + [1e-8, 20.5, 100.25, 1e4, 1e10]) + [-0.5, -2.5, -10.25, -0.125]),
    'digamma': (mp.digamma, pos(lin(0.05, 10, 40) + [1e-8, 1.25, 1.375, 1.5, 1.625, 20.5, 100.25, 1e4, 1e10])
                + [-0.5, -2.5, -10.25, -0.125, -3.75]),
    'i0': (lambda x: mp.besseli(0, x), sym(SMALL + lin(0.1, 30, 50) + [50, 100, 300, 700])),
    'i0e': (lambda x: mp.besseli(0, x) * mp.exp(-abs(x)), sym(SMALL + lin(0.1, 30, 50) + [50, 100, 1e3, 1e6])),
    'i1': (lambda x: mp.besseli(1, x), sym(SMALL + lin(0.1, 30, 50) + [50, 100, 300, 700])),
    'i1e': (lambda x: mp.besseli(1, x) * mp.exp(-abs(x)), sym(SMALL + lin(0.1, 30, 50) + [50, 100, 1e3, 1e6])),
    'ndtr': (mp.ncdf, pos(lin(-38, 9, 48) + SMALL)),
    'ndtri': (ndtri, pos(lin(0.01, 0.99, 40)) + [1e-300, 1e-100, 1e-20, 1e-10, 1e-5, 1e-3, 1 - 1e-3, 1 - 1e-10,
                                                  1 - 2.0**-40, 2.0**-1074 * 5]),
    'log_ndtr': (lambda x: mp.log1p(-mp.ncdf(-x)) if x > 0 else mp.log(mp.ncdf(x)), pos(lin(-40, 10, 51) + [-100, -1e3, -1e5, 20, 30, 38] + SMALL)),
    'expit': (lambda x: 1 / (1 + mp.exp(-x)), pos(lin(-30, 30, 41))),
    'logit': (lambda x: mp.log(x / (1 - x)), pos(lin(0.01, 0.99, 30) + [1e-10, 1e-30])),
    'sinc': (lambda x: mp.sinpi(x) / (mp.pi * x) if x != 0 else mpf(1), pos(lin(-4.3, 4.3, 31) + [0.0, 1e-10])),
    'entr': (lambda x: -x * mp.log(x) if x > 0 else mpf(0), pos(lin(0, 5, 21) + [1e-20, 1e-5])),
    'exp2': (lambda x: mp.power(2, x), pos(lin(-60, 60, 41) + [0.5, -1000.5, 1000.25])),
    'expm1': (mp.expm1, pos(lin(-10, 10, 41) + SMALL)),
    'log1p': (mp.log1p, pos(lin(-0.99, 10, 41) + SMALL)),
    'bessel_j0': (mp.j0, pos(lin(0, 50, 51) + SMALL)),
    'bessel_j1': (mp.j1, pos(lin(0, 50, 51) + SMALL)),
    'multigammaln3': (lambda x: 3 * 2 / 4 * mp.log(mp.pi) + sum(lgam(x - mpf(i) / 2) for i in range(3)),
                      pos(lin(1.5, 20, 20))),
}

AS = [0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0]
XS = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0]
BINARY = {
    'zeta': (mp.zeta, [(s, q) for s in [1.5, 2.0, 3.0, 4.5, 10.0, 30.0] for q in [0.1, 0.5, 1.0, 2.0, 10.0, 100.0]]
             + [(2.0, -0.5), (3.0, -1.25)]),
    'polygamma': (lambda n, x: mp.psi(int(n), x), [(n, x) for n in [1.0, 2.0, 3.0, 4.0] for x in
                                                   [0.1, 0.5, 1.0, 1.5, 3.25, 10.0, 50.0, -0.5, -2.25]]),
    'gammainc': (lambda a, x: mp.gammainc(a, 0, x, regularized=True), [(a, x) for a in AS for x in XS]),
    'gammaincc': (lambda a, x: mp.gammainc(a, x, mp.inf, regularized=True), [(a, x) for a in AS for x in XS]),
    'xlogy': (lambda x, y: x * mp.log(y) if x != 0 else mpf(0), [(x, y) for x in [0.0, 0.5, -2.0, 3.0]
                                                                for y in [1e-10, 0.5, 1.0, 7.0]]),
    'xlog1py': (lambda x, y: x * mp.log1p(y) if x != 0 else mpf(0), [(x, y) for x in [0.0, 0.5, -2.0, 3.0]
                                                                    for y in [-0.5, 1e-10, 1.0, 7.0]]),
}


def d2(f, x):
    return mp.diff(f, mpf(x), 2)


D2U = {
    'lgamma': (lgam, [0.3, 1.5, 2.5, 7.25, -1.5]),
    'digamma': (mp.digamma, [0.3, 1.5, 2.5, 7.25, -1.5]),
    'erfinv': (mp.erfinv, [-0.9, -0.3, 0.1, 0.5, 0.95]),
    'erfc': (mp.erfc, [-1.5, 0.25, 2.0, 4.0]),
    'erfcx': (erfcx_d, [-1.5, 0.25, 2.0, 12.0]),
    'ndtr': (mp.ncdf, [-3.0, -0.5, 1.25]),
    'ndtri': (ndtri_d, [0.01, 0.3, 0.5, 0.8, 0.999]),
    'log_ndtr': (lambda x: mp.log(mp.ncdf(x)), [-30.0, -5.0, -0.5, 1.0, 4.0]),
    'i0': (lambda x: mp.besseli(0, x), [-2.5, 0.5, 3.0, 25.0]),
    'i0e': (lambda x: mp.besseli(0, x) * mp.exp(-abs(x)), [-2.5, 0.5, 3.0, 25.0]),
    'i1': (lambda x: mp.besseli(1, x), [-2.5, 0.5, 3.0, 25.0]),
    'i1e': (lambda x: mp.besseli(1, x) * mp.exp(-abs(x)), [-2.5, 0.5, 3.0, 25.0]),
    'bessel_j0': (mp.j0, [0.5, 2.0, 7.5]),
    'bessel_j1': (mp.j1, [0.5, 2.0, 7.5]),
    'exp2': (lambda x: mp.power(2, x), [-3.0, 0.5, 4.0]),
}
D2B = {
    'polygamma1': (lambda x: mp.psi(1, x), [0.3, 2.5, 7.25]),
    'gammainc2.5': (lambda x: mp.gammainc(mpf(2.5), 0, x, regularized=True), [0.5, 2.0, 6.0]),
    'gammaincc2.5': (lambda x: mp.gammainc(mpf(2.5), x, mp.inf, regularized=True), [0.5, 2.0, 6.0]),
    'zeta3': (lambda q: mp.zeta(3, q), [0.5, 2.0, 10.0]),
}


def c(v):
    v = float(v) if not isinstance(v, float) else v
    if math.isinf(v):
        return '-INFINITY' if v < 0 else 'INFINITY'
    return repr(v)


def main():
    out = sys.stdout
    out.write('/* special_ref.h: reference values for tests/test_special.c, generated by\n'
              ' * tools/gen_special_ref.py from mpmath %s (256+ bits, rounded once to\n'
              ' * double). Do not edit by hand. */\n' % mp.__version__)
    out.write('#ifndef SPECIAL_REF_H\n#define SPECIAL_REF_H\n#include <math.h>\n\n')
    out.write('typedef struct {\n    double x, y, want;\n} sref;\n\n')
    names = []
    for name, (f, xs) in UNARY.items():
        out.write('static const sref REF_%s[] = {\n' % name)
        for x in xs:
            out.write('    {%s, 0, %s},\n' % (c(x), c(f(mpf(x)))))
        out.write('};\n')
        names.append(name)
    for name, (f, ps) in BINARY.items():
        out.write('static const sref REF_%s[] = {\n' % name)
        for a, b in ps:
            out.write('    {%s, %s, %s},\n' % (c(a), c(b), c(f(mpf(a), mpf(b)))))
        out.write('};\n')
    for name, (f, xs) in list(D2U.items()) + list(D2B.items()):
        cname = name.replace('.', '_')
        out.write('static const sref D2_%s[] = {\n' % cname)
        for x in xs:
            out.write('    {%s, 0, %s},\n' % (c(x), c(d2(f, x))))
        out.write('};\n')
    out.write('\n#endif\n')


main()
