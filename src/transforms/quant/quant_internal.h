/* Internal: the quantization record, its sites' observer state, and the
 * two primitives through which traced functions reach it
 * (transforms/quant/observe.c), shared with the transform (quant.c). */
#ifndef CFT_QUANT_INTERNAL_H
#define CFT_QUANT_INTERNAL_H

#include <pthread.h>

#include "cft/quant.h"
#include "trace/prim.h"

/* one quantized operand: its observers' state, one per member of an
 * ensemble record (guarded by the record's mu) */
typedef struct {
    const char *prim;
    bool weight;
    int axis;        /* channel axis of the operand (per-channel specs), else -1 */
    int64_t nch;     /* channels (1 per tensor) */
    bool *seen;      /* [members] */
    double *mn, *mx; /* [members, nch] */
    double *absmax;  /* [members] percentile: the histogram's range [0, absmax] */
    double *hist;    /* [members, NBINS] */
} cft__qsite;

struct cft_quant {
    cft_fn *f;
    cft_quantizer qz;
    cft_array *err;
    pthread_mutex_t mu;
    int n, cap;
    cft__qsite *s;
    int id;             /* the primitives' handle on the record, -1 until first needed */
    bool paused;        /* observers keep their ranges (cft_quant_set_observing) */
    int members;        /* observers per site: 1, or an ensemble's (cft_quant_prepare_ensemble) */
    cft_array *member0; /* the member index a plain record's primitives take: i32 0 */
};

/* the integer range of a spec */
int64_t cft__qlo(const cft_quant_spec *s);
int64_t cft__qhi(const cft_quant_spec *s);
/* torch's _calculate_qparams for one channel's range */
void cft__qparams_d(double mn, double mx, const cft_quant_spec *s, double *scale, double *zp);
/* the spec of a site */
const cft_quant_spec *cft__qspec(const cft_quant *q, const cft__qsite *s);
/* site k (made on first sight: k == q->n) for an operand of `prim`; an
 * error when site k was made for something else. Caller holds q->mu. */
cft_array *cft__qsite_at(cft_quant *q, int k, const char *prim, bool weight, int axis, int64_t nch,
                         cft__qsite **out);
/* member m's parameters of a site now, nch doubles each (sc, zp). Caller
 * holds q->mu. */
void cft__qparams_vals(const cft_quant *q, const cft__qsite *s, int64_t m, double *sc, double *zp);
/* those as arrays: scalars (axis < 0) or [nch] f32; no lock needed */
void cft__qparams_arrays(int axis, int64_t nch, const double *sc, const double *zp,
                         cft_array **scale, cft_array **zpa);
/* x, through the observer of site k of the member(s) `member` (an i32
 * scalar; vmapped, one per member along the batch): an effect primitive,
 * recording whenever the function runs, eagerly, staged or jitted */
cft_array *cft__qobserve(cft_quant *q, int k, cft_array *x, cft_array *member, int axis);
/* site k's parameters for `member` when the function runs (an effect
 * primitive ordered after x): *scale, *zp scalars (nch 0) or [nch];
 * vmapped over the member index, one per member */
cft_array *cft__qparams_of(cft_quant *q, int k, int64_t nch, cft_array *x, cft_array *member,
                           cft_array **scale, cft_array **zp);

#endif
