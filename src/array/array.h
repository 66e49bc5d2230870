/* Internal: the array record and the helpers the layers above use to make
 * and read concrete arrays. A cft_array is a tagged value: a concrete array
 * (GC buffer + offset + element strides), a tracer owned by a trace of the
 * interpreter stack (src/trace), or an error. */
#ifndef CFT_ARRAY_IMPL_H
#define CFT_ARRAY_IMPL_H

#include "cft/array.h"
#include "cft/core.h"

enum { CFT_K_CONCRETE = 0, CFT_K_TRACER = 1, CFT_K_ERROR = 2 };

struct cft_trace;
struct cft_irvar;

struct cft_array {
    int kind;
    cft_aval aval;
    /* concrete */
    char *data;                    /* start of the GC block: keeps it alive */
    int64_t offset;                /* in elements */
    int64_t strides[CFT_MAX_NDIM]; /* in elements; 0 for broadcast dims */
    bool conj;                     /* complex views made by cft_conj: elements read conjugated */
    /* devices (cft/device.h): NULL for the host; data is then the
     * backend's memory, released when owner (the array that allocated it,
     * kept alive by its views) is collected. committed: put on its device
     * (cft_device_put) or made there by an op on committed arrays */
    const struct cft_dev *dev;
    struct cft_array *owner;
    bool committed;
    /* tracer: its trace and the trace's payload */
    struct cft_trace *trace;
    union {
        struct {
            cft_array *primal, *tangent;
        } jvp; /* tangent NULL: symbolic zero */
        struct {
            cft_array *val;
            int bdim;
        } batch; /* bdim < 0: not batched */
        struct {
            struct cft_irvar *var;
        } stage;
        struct {
            cft_array *val;
        } cast; /* autocast, quant: the value below */
    } u;
    /* error */
    cft_status err_code;
    const char *err_msg;
};

/* the most bytes one array may hold */
#define CFT_MAX_BYTES (INT64_C(1) << 62)
/* The one size check of every constructor, reshape, shape rule and file
 * loader: dtype known, 0 <= ndim <= CFT_MAX_NDIM, every concrete dim in
 * [0, 2^40), and the element and byte counts free of overflow (the
 * product of the nonzero dims too, so [0, 2^32, 2^32] is refused) and at
 * most CFT_MAX_BYTES. NULL when fine (numel, bytes set when not NULL;
 * numel -1 for a symbolic shape), else an error naming `call` and the
 * shape. */
cft_array *cft__check_size(const char *call, cft_dtype dt, const int64_t *shape, int ndim,
                           int64_t *numel, size_t *bytes);
/* numel of an aval / shape (a symbolic product if a dim is symbolic) */
int64_t cft__numel(const int64_t *shape, int ndim);
/* aval equality */
bool cft__aval_eq(const cft_aval *a, const cft_aval *b);
/* build an aval */
cft_aval cft__aval(cft_dtype dt, const int64_t *shape, int ndim);
/* a fresh contiguous concrete array (payload uninitialised); an error for
 * a symbolic shape */
cft_array *cft__alloc(cft_dtype dt, const int64_t *shape, int ndim);
/* cft_full of a symbolic shape: set by the primitive layer (a staged
 * broadcast of the scalar); NULL: an error */
extern cft_array *(*cft__full_sym)(double value, cft_dtype dt, const int64_t *shape, int ndim);
/* a view of x's buffer */
cft_array *cft__view(const cft_array *x, const int64_t *shape, int ndim, const int64_t *strides,
                     int64_t offset);
/* true when x's elements are row-major contiguous from its offset (and not
 * a pending conjugate) */
bool cft__is_contig(const cft_array *x);
/* x if contiguous, else a contiguous copy (conjugated when x->conj) */
cft_array *cft__contig(cft_array *x);
/* x's elements row-major into dst, by tiles (contig_turned.c), where x's
 * next-to-last dim has stride 1 and its last another (a transposed
 * matrix, or a batch of them); false (nothing written) otherwise. No
 * conjugation. */
bool cft__contig_turned(const cft_array *x, void *dst);
/* pointer to element 0 */
static inline void *cft__ptr(const cft_array *x) {
    return x->data + (size_t)x->offset * cft_dtype_size(x->aval.dtype);
}
/* row-major strides for a shape */
void cft__row_major(const int64_t *shape, int ndim, int64_t *strides);
/* f32 <-> f16 and f32 <-> bf16 over n elements (half_cast.c: vector loops) */
void cft__f32_to_f16(const float *s, uint16_t *d, int64_t n);
void cft__f16_to_f32(const uint16_t *s, float *d, int64_t n);
void cft__f32_to_bf16(const float *s, uint16_t *d, int64_t n);
void cft__bf16_to_f32(const uint16_t *s, float *d, int64_t n);
/* z [M, N] = x [M] (x) y [N] in a half dtype (bf16: 1, f16: 2): each
 * product of two halves, exact in f32, rounded once (half_cast.c) */
void cft__outer_half(int code, const uint16_t *x, const uint16_t *y, uint16_t *z, int64_t M,
                     int64_t N);
/* the same products, each rounded to the half dtype and stored as an f32
 * (the bits cft__outer_half's results widen to) */
void cft__outer_half_wide(int code, const uint16_t *x, const uint16_t *y, float *z, int64_t M,
                          int64_t N);
/* each of n f32 values rounded to the values of the half dtype, in place */
void cft__round_half(float *x, cft_dtype half, int64_t n);
/* convert n elements between dtypes (contiguous buffers) */
void cft__cast(const void *src, cft_dtype sdt, void *dst, cft_dtype ddt, int64_t n);
/* read element i (contiguous buffer) as double / write from double */
double cft__get(const void *p, cft_dtype dt, int64_t i);
void cft__set(void *p, cft_dtype dt, int64_t i, double v);

#endif
