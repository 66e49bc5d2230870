/* Internal error helpers: every error in cft is made by cft__fail. */
#ifndef CFT_ERROR_H
#define CFT_ERROR_H

#include "cft/core.h"

/* Make an error array with `code` and a printf-style message (which should
 * start with the call's name), and record it as the thread's last error. */
cft_array *cft__fail(cft_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The static out-of-memory error array. */
cft_array *cft__oom(void);
/* Record `x`'s error as the thread's last error and return its code. */
cft_status cft__set_last(const cft_array *x);

/* Concretization: reading the value of tracer x (cft_item, cft_copy_to,
 * ...) is an error, like JAX's ConcretizationTypeError. Returns the error
 * naming `call`, and records it so that the traced function being applied
 * fails with it (the read itself can only return NaN). */
cft_array *cft__concretization_error(const char *call, const cft_array *x);
/* Swap this thread's pending concretization error (cft__fn_apply saves
 * it, runs the callback, and fails the call if one was recorded). */
cft_array *cft__poison_swap(cft_array *p);
/* The public call being served: CFT_API("cft_sum") at the top of a public
 * function records its name for the rest of the call (the outermost one
 * wins, and user callbacks start afresh), and every error made meanwhile
 * names it first, e.g. "cft_softmax: cft_max: axis 2 out of range". */
int cft__api_enter(const char *name);
void cft__api_leave(int *tok);
/* save / restore around a user callback (its calls are public calls again) */
typedef struct {
    const char *name;
    int depth;
} cft_api_state;
cft_api_state cft__api_suspend(void);
void cft__api_resume(cft_api_state s);
#define CFT_API_CAT2(a, b) a##b
#define CFT_API_CAT(a, b) CFT_API_CAT2(a, b)
#define CFT_API(name)                                                                              \
    int CFT_API_CAT(cft__api_tok, __LINE__) __attribute__((cleanup(cft__api_leave), unused)) =     \
        cft__api_enter(name)

/* Return the first error among the listed arrays (NULL arrays count as
 * errors naming `op`); also names `op` as the public call (CFT_API). */
#define CFT_PROPAGATE(op, ...)                                                                     \
    CFT_API(op);                                                                                   \
    do {                                                                                           \
        cft_array *const cft__pa[] = {__VA_ARGS__};                                                \
        for (size_t cft__i = 0; cft__i < sizeof cft__pa / sizeof cft__pa[0]; cft__i++) {           \
            if (!cft__pa[cft__i])                                                                  \
                return cft__fail(CFT_E_ARG, "%s: argument %zu is NULL", op, cft__i);               \
            if (cft_failed(cft__pa[cft__i]))                                                       \
                return cft__pa[cft__i];                                                            \
        }                                                                                          \
    } while (0)

#endif
