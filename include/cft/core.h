/** @file
 * cft/core.h: dtypes, array handles, errors and library set-up.
 *
 * Every array-returning call in cft returns a non-NULL cft_array. When a call
 * fails it returns an *error array* instead: it carries a code and a message
 * naming the call and the shapes involved. Error arrays are absorbing: an op
 * given one returns it unchanged, so a nested expression needs one check:
 *
 *     cft_array *y = cft_sum(cft_matmul(x, w), NULL, 0, false);
 *     if (cft_failed(y)) fprintf(stderr, "%s\n", cft_error_message(y));
 *
 * All memory is garbage collected (Boehm GC): nothing is ever freed by hand.
 */
#ifndef CFT_CORE_H
#define CFT_CORE_H

/** @addtogroup arrays
 *  @{ */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Largest number of dimensions an array may have. */
#define CFT_MAX_NDIM 8

/** Element types. Type promotion (cft_promote) follows JAX's lattice:
 *  bool < i32 < i64 < {f16, bf16} < f32 < f64, with f16 and bf16 joining
 *  to f32 (so i64 with f32 gives f32, as in JAX, not f64 as in NumPy).
 *  f16 (IEEE half) and bf16 (bfloat16) are storage types: every operation
 *  computes in f32 and rounds its result to nearest-even on store.
 *  The complex types sit on top: c64 above f32, c128 above f64 and c64, so
 *  f64 with c64 gives c128 (as JAX). Complex values are stored as C99's
 *  float _Complex / double _Complex (re, im interleaved). */
typedef enum cft_dtype {
    CFT_BOOL = 0,
    CFT_I32,
    CFT_I64,
    CFT_F32,
    CFT_F64,
    CFT_F16,
    CFT_BF16,
    CFT_C64,  /**< complex: two f32 (re, im), C's float _Complex */
    CFT_C128, /**< complex: two f64, C's double _Complex */
    CFT_NDTYPES
} cft_dtype;

/** Error codes carried by error arrays and cft_last_error(). */
typedef enum cft_status {
    CFT_OK = 0,
    CFT_E_ARG,    /**< a bad argument: NULL, out-of-range axis, bad count */
    CFT_E_SHAPE,  /**< shapes that do not fit the operation */
    CFT_E_DTYPE,  /**< a dtype the operation does not accept */
    CFT_E_NOMEM,  /**< out of memory */
    CFT_E_TRACE,  /**< misuse of tracing: a leaked tracer, a missing rule */
    CFT_E_IO,     /**< a file could not be read or written */
    CFT_E_FOREIGN /**< a failure reported by a foreign library */
} cft_status;

/** An immutable n-d array, a tracer inside a transform, or an error. Opaque;
 *  GC-managed. */
typedef struct cft_array cft_array;

/** The abstract value of an array: its dtype and shape. */
typedef struct cft_aval {
    cft_dtype dtype;             /**< element type */
    int ndim;                    /**< number of dims, 0 to CFT_MAX_NDIM */
    int64_t shape[CFT_MAX_NDIM]; /**< the first ndim entries are the dims */
} cft_aval;

/** Initialise the library (the GC). Called implicitly by every constructor;
 *  calling it first from main() is recommended (before starting threads). */
void cft_init(void);
/** Register the calling thread with the garbage collector. Every public
 *  call may be made from any thread: a thread is registered automatically
 *  at its first cft call that allocates (and unregistered when it exits).
 *  Call this at the top of a thread that receives arrays from another
 *  thread and keeps them only in its own locals across a long time before
 *  its first cft call; otherwise it is never needed. */
void cft_thread_register(void);

/** Zeroed memory that the garbage collector scans and frees when it is no
 *  longer reachable: use it for a cft_fn's environment when the environment
 *  holds arrays or functions (malloc'd memory is invisible to the GC, so
 *  what it alone points to would be collected). NULL when out of memory. */
void *cft_alloc(size_t size);

/** Name of a dtype ("f32", ...). */
const char *cft_dtype_name(cft_dtype dt);
/** Size in bytes of one element of `dt`. */
size_t cft_dtype_size(cft_dtype dt);
/** True for f16, bf16, f32 and f64. */
bool cft_dtype_is_float(cft_dtype dt);
/** True for c64 and c128. */
bool cft_dtype_is_complex(cft_dtype dt);
/** True for float and complex dtypes: the ones that carry derivatives. */
bool cft_dtype_is_inexact(cft_dtype dt);
/** The real dtype of the same precision: f32 for c64, f64 for c128; other
 *  dtypes are their own real dtype. */
cft_dtype cft_dtype_real(cft_dtype dt);
/** The complex dtype of the same precision: c128 for f64 (and c128), c64
 *  for every other dtype. */
cft_dtype cft_dtype_complex(cft_dtype dt);
/** True for the storage-only half types f16 and bf16. */
bool cft_dtype_is_half(cft_dtype dt);
/** The promoted dtype of a and b (see cft_dtype). */
cft_dtype cft_promote(cft_dtype a, cft_dtype b);

/** True if `x` is an error array (or NULL). */
bool cft_failed(const cft_array *x);
/** Error code of `x`, CFT_OK for a good array. */
cft_status cft_error_code(const cft_array *x);
/** Message of an error array ("cft_matmul: ..."), "" for a good array. */
const char *cft_error_message(const cft_array *x);
/** Code of the last error raised on this thread by a call that returns no
 *  array (or by any call); CFT_OK after cft_clear_error(). */
cft_status cft_last_error(void);
/** Message of the last error raised on this thread. */
const char *cft_last_error_message(void);
/** Reset the thread's last error. */
void cft_clear_error(void);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
