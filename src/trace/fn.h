/* Internal: the function record. */
#ifndef CFT_FN_IMPL_H
#define CFT_FN_IMPL_H

#include "cft/fn.h"
#include "trace/ir.h"

typedef struct fn_cache {
    cft_aval *avals;
    cft_ir *ir;
    struct fn_cache *next;
} fn_cache;

struct cft_fn {
    cft_fn_cb cb;
    void *env;
    int nin, nout;
    const char *name;
    const char *label; /* the profiler's name when not `name` (cft_jit: "jit(f)") */
    fn_cache *cache;
    bool direct;    /* never staged by cft_fn_call (cft_jit manages its own plans) */
    cft_array *err; /* an error function: every call fails with this */
};

/* An error function (as error arrays are for arrays): calling it fails
 * every output with err; transforms of it return it unchanged. */
cft_fn *cft__fn_error(cft_array *err, int nin, int nout);
/* NULL when f is usable by `call`; else the function `call` must return
 * (f itself when it is an error function, or a new one for NULL) */
cft_fn *cft__fn_check(const char *call, cft_fn *f);
/* an error function for `call` with a printf-style message */
cft_fn *cft__fn_fail(int nin, int nout, cft_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Run f's callback directly (no staging), checking its outputs. */
cft_status cft__fn_apply(cft_fn *f, cft_array *const *in, cft_array **out);

/* Set every output to e and record it as the last error. */
cft_status cft__fail_outs(cft_array *e, int nout, cft_array **out);

#endif
