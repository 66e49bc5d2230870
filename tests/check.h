/* check.h: the tiny test harness every tests/test_*.c uses (header-only).
 *
 *     #include "check.h"
 *     int main(int argc, char **argv) {
 *         check_init(argc, argv);             // argv[1]: run only tests whose name contains it
 *         TEST("add broadcasts a row over a matrix") {
 *             CHECK(cond);                    // any C condition
 *             CHECK_MSG(cond, "fmt %d", x);   // with a printf-style explanation
 *             CHECK_EQ(a, b);                 // integers, both printed on failure
 *             CHECK_CLOSE(a, b, rtol, atol);  // |a-b| <= atol + rtol*|b| (NaN only equals NaN)
 *             CHECK_ARRAY_CLOSE(x, y, rtol, atol); // cft arrays: same shape, elementwise close
 *         }
 *         TEST("%s: jvp", name) { ... }       // names may be printf formats
 *         return check_summary();             // prints "N passed, M failed"; 1 if any failed
 *     }
 *
 * A TEST passes when no CHECK inside it failed; a failing CHECK prints file,
 * line, test name and details, and the test goes on. A CHECK outside any
 * TEST counts as a test of its own. Leaving a TEST body early (break, goto)
 * is harmless: the next TEST or check_summary closes it. CHECK_VERBOSE=1 in
 * the environment prints every test name as it passes. */
#ifndef CFT_TESTS_CHECK_H
#define CFT_TESTS_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"

static const char *check_filter_;
static char check_name_[256];
static int check_open_, check_bad_, check_passed_, check_failed_, check_verbose_;

static inline void check_init(int argc, char **argv) {
    cft_init();
    check_filter_ = argc > 1 ? argv[1] : NULL;
    check_verbose_ = getenv("CHECK_VERBOSE") && atoi(getenv("CHECK_VERBOSE"));
}

static inline int check_end_(void) {
    if (check_open_ && check_bad_)
        check_failed_++, printf("FAIL  %s\n", check_name_);
    if (check_open_ && !check_bad_) {
        check_passed_++;
        if (check_verbose_)
            printf("ok    %s\n", check_name_);
    }
    check_open_ = check_bad_ = 0;
    return 0;
}

static inline int check_begin_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int check_begin_(const char *fmt, ...) {
    check_end_();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(check_name_, sizeof check_name_, fmt, ap);
    va_end(ap);
    if (check_filter_ && !strstr(check_name_, check_filter_))
        return 0;
    check_open_ = 1;
    cft_clear_error();
    return 1;
}

#define TEST(...)                                                                                  \
    for (int check_once_ = check_begin_(__VA_ARGS__); check_once_; check_once_ = check_end_())

/* Record a failure; the message is printed after "file:line: [test] ". */
static inline void check_fail_(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void check_fail_(const char *file, int line, const char *fmt, ...) {
    printf("%s:%d: [%s] ", file, line, check_open_ ? check_name_ : "(no test)");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (check_open_)
        check_bad_ = 1;
    else
        check_failed_++;
}

#define CHECK(c) ((c) ? (void)0 : check_fail_(__FILE__, __LINE__, "CHECK(%s) failed", #c))
#define CHECK_MSG(c, ...) ((c) ? (void)0 : check_fail_(__FILE__, __LINE__, __VA_ARGS__))
#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                            \
        if (check_a_ != check_b_)                                                                  \
            check_fail_(__FILE__, __LINE__, "CHECK_EQ(%s, %s): %lld != %lld", #a, #b, check_a_,    \
                        check_b_);                                                                 \
    } while (0)

static inline int check_close_(double a, double b, double rtol, double atol) {
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return a == b || fabs(a - b) <= atol + rtol * fabs(b); /* a == b: equal infinities */
}
#define CHECK_CLOSE(a, b, rtol, atol)                                                              \
    do {                                                                                           \
        double check_a_ = (a), check_b_ = (b);                                                     \
        if (!check_close_(check_a_, check_b_, (rtol), (atol)))                                     \
            check_fail_(__FILE__, __LINE__, "CHECK_CLOSE(%s, %s): %.17g vs %.17g (diff %.3g)", #a, \
                        #b, check_a_, check_b_, fabs(check_a_ - check_b_));                        \
    } while (0)

/* x and y must be good concrete arrays of the same shape (dtypes may
 * differ: both are compared as doubles). Prints up to 5 mismatches. */
static inline void check_array_close_(const cft_array *x, const cft_array *y, double rtol,
                                      double atol, const char *xs, const char *ys, const char *file,
                                      int line) {
    char bx[96], by[96];
    if (cft_failed(x) || cft_failed(y)) {
        check_fail_(file, line, "CHECK_ARRAY_CLOSE(%s, %s): error array: %s", xs, ys,
                    cft_failed(x) ? cft_error_message(x) : cft_error_message(y));
        return;
    }
    cft_aval ax = cft_array_aval(x), ay = cft_array_aval(y);
    int same = ax.ndim == ay.ndim;
    for (int i = 0; same && i < ax.ndim; i++)
        same = ax.shape[i] == ay.shape[i];
    if (!same) {
        check_fail_(file, line, "CHECK_ARRAY_CLOSE(%s, %s): shapes differ: %s vs %s", xs, ys,
                    cft_aval_str(&ax, bx), cft_aval_str(&ay, by));
        return;
    }
    int64_t n = cft_array_size(x), bad = 0;
    size_t bytes = sizeof(double) * (size_t)(n + 1);
    double *a = malloc(bytes), *b = malloc(bytes), maxd = 0;
    if (!a || !b || cft_copy_to(x, CFT_F64, a) != CFT_OK || cft_copy_to(y, CFT_F64, b) != CFT_OK) {
        check_fail_(file, line, "CHECK_ARRAY_CLOSE(%s, %s): cannot read the values", xs, ys);
        n = 0;
    }
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (d > maxd || isnan(d))
            maxd = d;
        if (check_close_(a[i], b[i], rtol, atol))
            continue;
        if (bad++ == 0)
            check_fail_(file, line, "CHECK_ARRAY_CLOSE(%s, %s) %s (rtol %g, atol %g):", xs, ys,
                        cft_aval_str(&ax, bx), rtol, atol);
        if (bad <= 5)
            printf("    [%lld] %.17g vs %.17g\n", (long long)i, a[i], b[i]);
    }
    if (bad)
        printf("    %lld of %lld differ; max abs diff %.3g\n", (long long)bad, (long long)n, maxd);
    free(a);
    free(b);
}
#define CHECK_ARRAY_CLOSE(x, y, rtol, atol)                                                        \
    check_array_close_((x), (y), (rtol), (atol), #x, #y, __FILE__, __LINE__)

/* Close the last test, print "N passed, M failed", return the exit code. */
static inline int check_summary(void) {
    check_end_();
    printf("%d passed, %d failed\n", check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}

#endif
