/* timer.c: cft_timer_*, torch.utils.benchmark.Timer's shape in C: blocks
 * of calls timed with CLOCK_MONOTONIC, statistics over the blocks' per-call
 * times, a printout and a comparison table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cft/timer.h"
#include "core/error.h"
#include "core/mem.h"
#include "core/par.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double block(cft_timer_fn fn, void *arg, int64_t number) {
    double t0 = now_s();
    for (int64_t i = 0; i < number; i++)
        fn(arg);
    return now_s() - t0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* linear interpolation between order statistics (numpy's default) */
static double quantile(const double *sorted, int64_t n, double q) {
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)pos;
    double f = pos - (double)i;
    return i + 1 < n ? sorted[i] * (1 - f) + sorted[i + 1] * f : sorted[n - 1];
}

static cft_status finish(double *per_call, int64_t runs, int64_t number, double total,
                         cft_measurement *out) {
    double *sorted = malloc(sizeof(double) * (size_t)runs);
    if (!sorted)
        return cft__set_last(cft__oom());
    memcpy(sorted, per_call, sizeof(double) * (size_t)runs);
    qsort(sorted, (size_t)runs, sizeof(double), cmp_double);
    double sum = 0;
    for (int64_t i = 0; i < runs; i++)
        sum += per_call[i];
    *out = (cft_measurement){.label = out->label,
                             .sub_label = out->sub_label,
                             .description = out->description,
                             .runs = runs,
                             .number = number,
                             .median = quantile(sorted, runs, 0.5),
                             .iqr = quantile(sorted, runs, 0.75) - quantile(sorted, runs, 0.25),
                             .q25 = quantile(sorted, runs, 0.25),
                             .q75 = quantile(sorted, runs, 0.75),
                             .mean = sum / (double)runs,
                             .min = sorted[0],
                             .max = sorted[runs - 1],
                             .total = total,
                             .threads = cft__num_threads_set(),
                             .times = per_call};
    free(sorted);
    return CFT_OK;
}

static cft_status check(const char *call, cft_timer_fn fn, cft_measurement *out) {
    if (!fn || !out)
        return cft__set_last(cft__fail(CFT_E_ARG, "%s: %s is NULL", call, fn ? "out" : "fn"));
    return CFT_OK;
}

#define TIMEIT_MAX_NUMBER INT64_C(1000000000)
#define TIMEIT_MAX_CALLS 1e10
cft_status cft_timer_timeit(cft_timer_fn fn, void *arg, int64_t number, int64_t runs,
                            cft_measurement *out) {
    CFT_API("cft_timer_timeit");
    cft_status st = check("cft_timer_timeit", fn, out);
    if (st != CFT_OK)
        return st;
    /* bounded: a billion calls a block, ten billion in all (number = 2^62
     * ran for ever) */
    if (number < 1 || runs < 1 || runs > 100000000 || number > TIMEIT_MAX_NUMBER ||
        (double)number * (double)runs > TIMEIT_MAX_CALLS)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_timer_timeit: number %lld, runs %lld (each at least "
                                       "1; number at most %.0e, number * runs at most %.0e)",
                                       (long long)number, (long long)runs,
                                       (double)TIMEIT_MAX_NUMBER, TIMEIT_MAX_CALLS));
    double *t = cft_alloc(sizeof(double) * (size_t)runs), total = 0;
    if (!t)
        return cft__set_last(cft__oom());
    fn(arg); /* warm-up: traces, compiles, first-touch */
    for (int64_t r = 0; r < runs; r++) {
        double b = block(fn, arg, number);
        t[r] = b / (double)number, total += b;
    }
    return finish(t, runs, number, total, out);
}

cft_status cft_timer_blocked_autorange(cft_timer_fn fn, void *arg, double min_run_time,
                                       cft_measurement *out) {
    CFT_API("cft_timer_blocked_autorange");
    cft_status st = check("cft_timer_blocked_autorange", fn, out);
    if (st != CFT_OK)
        return st;
    if (!(min_run_time > 0) || min_run_time > 1e6)
        min_run_time = 0.2;
    fn(arg); /* warm-up */
    int64_t number = 1;
    while (number < ((int64_t)1 << 40) && block(fn, arg, number) < 1e-5)
        number *= 2;
    int64_t cap = 64, runs = 0;
    double *t = malloc(sizeof(double) * (size_t)cap), total = 0;
    if (!t)
        return cft__set_last(cft__oom());
    while (total < min_run_time || runs < 3) {
        if (runs == cap) {
            double *g = realloc(t, sizeof(double) * (size_t)(cap *= 2));
            if (!g) {
                free(t);
                return cft__set_last(cft__oom());
            }
            t = g;
        }
        double b = block(fn, arg, number);
        t[runs++] = b / (double)number, total += b;
    }
    double *keep = cft_alloc(sizeof(double) * (size_t)runs);
    if (!keep) {
        free(t);
        return cft__set_last(cft__oom());
    }
    memcpy(keep, t, sizeof(double) * (size_t)runs);
    free(t);
    return finish(keep, runs, number, total, out);
}

/* a unit for seconds value v: the largest of s, ms, us, ns below it */
static const char *unit_of(double v, double *scale) {
    static const char *names[4] = {"s", "ms", "us", "ns"};
    static const double f[4] = {1, 1e3, 1e6, 1e9};
    int i = 0;
    while (i < 3 && v * f[i] < 1)
        i++;
    *scale = f[i];
    return names[i];
}

void cft_measurement_print(const cft_measurement *m, FILE *f) {
    if (!m || !f)
        return;
    double sc;
    const char *u = unit_of(m->median, &sc);
    fprintf(f, "%s%s%s%s%s\n", m->label ? m->label : "", m->sub_label ? ": " : "",
            m->sub_label ? m->sub_label : "", m->description ? "  " : "",
            m->description ? m->description : "");
    fprintf(f, "  Median: %.2f %s\n  IQR:    %.2f %s (%.2f to %.2f)\n", m->median * sc, u,
            m->iqr * sc, u, m->q25 * sc, m->q75 * sc);
    fprintf(f, "  %lld measurements, %lld runs per measurement, %d thread%s\n", (long long)m->runs,
            (long long)m->number, m->threads, m->threads == 1 ? "" : "s");
}

static bool same_str(const char *a, const char *b) {
    return (!a && !b) || (a && b && !strcmp(a, b));
}

void cft_timer_compare(const cft_measurement *ms, int n, FILE *f) {
    if (!ms || !f || n <= 0)
        return;
    int *row = calloc((size_t)n, sizeof(int)), *col = calloc((size_t)n, sizeof(int));
    int nr = 0, nc = 0, *rfirst = calloc((size_t)n, sizeof(int)),
        *cfirst = calloc((size_t)n, sizeof(int));
    if (!row || !col || !rfirst || !cfirst) {
        free(row), free(col), free(rfirst), free(cfirst);
        return;
    }
    double smallest = INFINITY;
    for (int i = 0; i < n; i++) { /* rows: (label, sub_label); columns: description */
        int r = 0, c = 0;
        while (r < nr && !(same_str(ms[rfirst[r]].label, ms[i].label) &&
                           same_str(ms[rfirst[r]].sub_label, ms[i].sub_label)))
            r++;
        if (r == nr)
            rfirst[nr++] = i;
        while (c < nc && !same_str(ms[cfirst[c]].description, ms[i].description))
            c++;
        if (c == nc)
            cfirst[nc++] = i;
        row[i] = r, col[i] = c;
        if (ms[i].median > 0 && ms[i].median < smallest)
            smallest = ms[i].median;
    }
    double sc;
    const char *u = unit_of(smallest < INFINITY ? smallest : 1, &sc);
    fprintf(f, "[------------------------ times in %s (median) ------------------------]\n", u);
    fprintf(f, "%-36s", "");
    for (int c = 0; c < nc; c++)
        fprintf(f, " | %16.16s", ms[cfirst[c]].description ? ms[cfirst[c]].description : "");
    fprintf(f, "\n");
    for (int r = 0; r < nr; r++) {
        char name[256];
        const cft_measurement *m0 = &ms[rfirst[r]];
        snprintf(name, sizeof name, "%s%s%s", m0->label ? m0->label : "", m0->sub_label ? ": " : "",
                 m0->sub_label ? m0->sub_label : "");
        fprintf(f, "%-36.36s", name);
        for (int c = 0; c < nc; c++) {
            int k = -1;
            for (int i = 0; i < n; i++)
                if (row[i] == r && col[i] == c)
                    k = i;
            if (k < 0) {
                fprintf(f, " | %16s", "");
                continue;
            }
            char cell[48];
            double rel = ms[k].median > 0 ? ms[k].iqr / ms[k].median : 0;
            if (rel > 0.02)
                snprintf(cell, sizeof cell, "%.1f (+-%.0f%%)", ms[k].median * sc, 100 * rel);
            else
                snprintf(cell, sizeof cell, "%.1f", ms[k].median * sc);
            fprintf(f, " | %16s", cell);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "threads: %d\n", ms[0].threads);
    free(row), free(col), free(rfirst), free(cfirst);
}
