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

/* Return the first error among the listed arrays (NULL arrays count as
 * errors naming `op`). */
#define CFT_PROPAGATE(op, ...)                                                                     \
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
