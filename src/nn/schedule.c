/* schedule.c: learning-rate schedules as pure functions of the epoch,
 * reproducing PyTorch's chainable (recursive) forms exactly: StepLR,
 * MultiStepLR, ExponentialLR, ConstantLR, LinearLR, CosineAnnealingLR and
 * ChainedScheduler. An lr is computed by replaying the steps from epoch 0,
 * as PyTorch's scheduler.step() does. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/error.h"
#include "nn/nn_internal.h"

enum { S_STEP, S_MULTISTEP, S_EXP, S_CONST, S_LINEAR, S_COSINE, S_CHAIN };

struct cft_lr_schedule {
    int kind;
    const char *err; /* a bad configuration */
    int64_t n;       /* step_size, total_iters, t_max, number of milestones / chained */
    double gamma, a, b;
    int64_t *milestones;
    cft_lr_schedule **chain;
};

static cft_lr_schedule *make(int kind, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static cft_lr_schedule *make(int kind, bool ok, const char *fmt, ...) {
    static cft_lr_schedule oom = {.err = "cft_lr: out of memory"};
    cft_lr_schedule *s = CFT_NEW(cft_lr_schedule);
    if (!s)
        return &oom;
    s->kind = kind;
    if (!ok) {
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        s->err = cft__strdup(buf);
        if (!s->err)
            s->err = "cft_lr: bad arguments";
    }
    return s;
}

cft_lr_schedule *cft_lr_step(int64_t step_size, double gamma) {
    CFT_API("cft_lr_step");
    cft_lr_schedule *s = make(S_STEP, step_size > 0, "cft_lr_step: step_size %lld must be positive",
                              (long long)step_size);
    s->n = step_size, s->gamma = gamma;
    return s;
}

cft_lr_schedule *cft_lr_multistep(const int64_t *milestones, int n, double gamma) {
    CFT_API("cft_lr_multistep");
    bool ok = n >= 0 && (n == 0 || milestones);
    for (int i = 1; ok && i < n; i++)
        ok = milestones[i] >= milestones[i - 1];
    cft_lr_schedule *s =
        make(S_MULTISTEP, ok, "cft_lr_multistep: milestones must be %d non-decreasing epochs", n);
    if (ok && n > 0) {
        s->milestones = CFT_NEWN(int64_t, n);
        if (!s->milestones)
            return make(S_MULTISTEP, false, "cft_lr_multistep: out of memory");
        for (int i = 0; i < n; i++)
            s->milestones[i] = milestones[i];
    }
    s->n = ok ? n : 0, s->gamma = gamma;
    return s;
}

cft_lr_schedule *cft_lr_exponential(double gamma) {
    CFT_API("cft_lr_exponential");
    cft_lr_schedule *s = make(S_EXP, true, "%s", "");
    s->gamma = gamma;
    return s;
}

cft_lr_schedule *cft_lr_constant(double factor, int64_t total_iters) {
    CFT_API("cft_lr_constant");
    cft_lr_schedule *s =
        make(S_CONST, factor >= 0 && factor <= 1 && total_iters >= 0,
             "cft_lr_constant: factor %g must be in [0, 1] and total_iters %lld >= 0", factor,
             (long long)total_iters);
    s->a = factor, s->n = total_iters;
    return s;
}

cft_lr_schedule *cft_lr_linear(double start_factor, double end_factor, int64_t total_iters) {
    CFT_API("cft_lr_linear");
    cft_lr_schedule *s =
        make(S_LINEAR,
             start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1 &&
                 total_iters > 0,
             "cft_lr_linear: need start_factor in (0, 1] (got %g), end_factor in [0, 1] (got %g), "
             "total_iters > 0 (got %lld)",
             start_factor, end_factor, (long long)total_iters);
    s->a = start_factor, s->b = end_factor, s->n = total_iters;
    return s;
}

cft_lr_schedule *cft_lr_cosine(int64_t t_max, double eta_min) {
    CFT_API("cft_lr_cosine");
    cft_lr_schedule *s =
        make(S_COSINE, t_max > 0, "cft_lr_cosine: t_max %lld must be positive", (long long)t_max);
    s->n = t_max, s->a = eta_min;
    return s;
}

cft_lr_schedule *cft_lr_chain(cft_lr_schedule *const *list, int n) {
    CFT_API("cft_lr_chain");
    bool ok = list && n >= 1;
    for (int i = 0; ok && i < n; i++)
        ok = list[i] != NULL;
    cft_lr_schedule *s = make(S_CHAIN, ok, "cft_lr_chain: need %d non-NULL schedules", n);
    if (!ok)
        return s;
    s->chain = CFT_NEWN(cft_lr_schedule *, n);
    if (!s->chain)
        return make(S_CHAIN, false, "cft_lr_chain: out of memory");
    s->n = n;
    for (int i = 0; i < n; i++) {
        s->chain[i] = list[i];
        if (list[i]->err && !s->err)
            s->err = list[i]->err;
    }
    return s;
}

/* the first error in s (chains included) */
static const char *find_err(const cft_lr_schedule *s) {
    return s ? s->err : "cft_lr: NULL schedule";
}

/* PyTorch's get_lr(): the lr at epoch t (>= 0) from the current lr (the
 * one the previous epoch ended with; for t == 0 the initial lr) */
static double step_lr(const cft_lr_schedule *s, int64_t t, double lr, double base) {
    switch (s->kind) {
    case S_STEP:
        return t == 0 || t % s->n != 0 ? lr : lr * s->gamma;
    case S_MULTISTEP: {
        double f = 1;
        for (int64_t i = 0; i < s->n; i++)
            if (s->milestones[i] == t)
                f *= s->gamma; /* repeated milestones count repeatedly */
        return lr * f;
    }
    case S_EXP:
        return t == 0 ? lr : lr * s->gamma;
    case S_CONST:
        if (t == 0)
            return lr * s->a;
        return t != s->n ? lr : lr * (1.0 / s->a);
    case S_LINEAR:
        if (t == 0)
            return lr * s->a;
        if (t > s->n)
            return lr;
        return lr * (1.0 + (s->b - s->a) / ((double)s->n * s->a + (double)(t - 1) * (s->b - s->a)));
    case S_COSINE: {
        double T = (double)s->n, eta = s->a;
        if (t == 0)
            return lr;
        if ((t - 1 - s->n) % (2 * s->n) == 0)
            return lr + (base - eta) * (1 - cos(M_PI / T)) / 2;
        return (1 + cos(M_PI * (double)t / T)) / (1 + cos(M_PI * (double)(t - 1) / T)) *
                   (lr - eta) +
               eta;
    }
    case S_CHAIN:
        for (int64_t i = 0; i < s->n; i++)
            lr = step_lr(s->chain[i], t, lr, base);
        return lr;
    }
    return NAN;
}

cft_status cft_lr_values(const cft_lr_schedule *s, double base_lr, int64_t n, double *out) {
    CFT_API("cft_lr_values");
    const char *err = find_err(s);
    if (!err && (n < 0 || (n > 0 && !out)))
        err = "cft_lr_values: bad output";
    if (err) {
        for (int64_t i = 0; out && i < n; i++)
            out[i] = NAN;
        cft__fail(CFT_E_ARG, "%s", err);
        return CFT_E_ARG;
    }
    double lr = base_lr;
    for (int64_t t = 0; t < n; t++)
        out[t] = lr = step_lr(s, t, lr, base_lr);
    return CFT_OK;
}

double cft_lr_at(const cft_lr_schedule *s, double base_lr, int64_t epoch) {
    CFT_API("cft_lr_at");
    const char *err = find_err(s);
    if (!err && epoch < 0)
        err = "cft_lr_at: negative epoch";
    if (err) {
        cft__fail(CFT_E_ARG, "%s", err);
        return NAN;
    }
    double lr = base_lr;
    for (int64_t t = 0; t <= epoch; t++)
        lr = step_lr(s, t, lr, base_lr);
    return lr;
}
