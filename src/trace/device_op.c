/* device_op.c: primitives on devices (cft/device.h). cft__run_impl sends
 * here every primitive that has a committed input or one on a device.
 * The target is the device of the committed inputs (two different ones
 * are an error naming both); uncommitted host inputs are copied there;
 * the outputs are allocated there (committed) and the backend's run
 * computes them, or the primitive's own kernel where it has one
 * (dev_kernel: conv_general_dilated) and the backend runs kernels.
 * cft_dev_op_run_on_host is the fallback a backend may
 * call for an operation it lacks: operands out with to_host, the host
 * implementation, results in with to_device. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "array/device.h"
#include "core/error.h"
#include "core/mem.h"
#include "trace/prim.h"
#include "trace/trace.h"

struct cft_dev_op {
    const cft_prim *p;
    const cft_params *par;
    const cft_dev *dev;
    int nin, nout;
    cft_array *const *in;
    cft_array **out;
    int precision; /* cft_matmul_precision when issued */
};

static _Atomic cft_dev_eager_fn eager_hook;

static _Atomic cft_dev_contig_fn contig_hook;

void cft__dev_set_contig(cft_dev_contig_fn f) {
    atomic_store(&contig_hook, f);
}

/* a contiguous copy of device view x on its device: by a kernel where the
 * backend runs them, else through the host */
static cft_array *dev_contig(cft_array *x, const char *call) {
    cft_dev_contig_fn f = atomic_load(&contig_hook);
    cft_array *y = NULL;
    int done = f && x->dev->b->run_kernel ? f(x, &y) : 0;
    if (done)
        return y;
    return cft__dev_from_host(x->dev, cft__dev_to_host(x, call), call);
}

void cft__dev_set_eager(cft_dev_eager_fn f) {
    atomic_store(&eager_hook, f);
}

bool cft__dev_involved(int nin, cft_array *const *in) {
    for (int i = 0; i < nin; i++)
        if (in[i] && in[i]->kind == CFT_K_CONCRETE && (in[i]->dev || in[i]->committed))
            return true;
    return false;
}

static cft_dev_buf buf_of(const cft_array *x) {
    cft_dev_buf b = {x->aval, cft__ptr(x),
                     (size_t)cft__numel(x->aval.shape, x->aval.ndim) *
                         cft_dtype_size(x->aval.dtype)};
    return b;
}

const char *cft_dev_op_name(const cft_dev_op *op) {
    return op ? op->p->name : "(null)";
}
int cft_dev_op_nin(const cft_dev_op *op) {
    return op ? op->nin : 0;
}
int cft_dev_op_nout(const cft_dev_op *op) {
    return op ? op->nout : 0;
}
static _Atomic int matmul_precision; /* CFT_MATMUL_HIGHEST */

cft_status cft_set_float32_matmul_precision(cft_matmul_precision p) {
    CFT_API("cft_set_float32_matmul_precision");
    if ((int)p < CFT_MATMUL_HIGHEST || (int)p > CFT_MATMUL_MEDIUM)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_set_float32_matmul_precision: %d is not a "
                                       "cft_matmul_precision (0 highest, 1 high, 2 medium)",
                                       (int)p));
    atomic_store(&matmul_precision, (int)p);
    return CFT_OK;
}

cft_matmul_precision cft_float32_matmul_precision(void) {
    return (cft_matmul_precision)atomic_load(&matmul_precision);
}

int cft_dev_op_param(const cft_dev_op *op, const char *name, int64_t *vals, int cap) {
    if (!op || !name)
        return -1;
    /* the matrix products' (autocast's list): the setting they were issued under */
    if ((op->p->flags & CFT_PRIM_AMP_LOW) && !strcmp(name, "precision")) {
        if (vals && cap > 0)
            vals[0] = op->precision;
        return 1;
    }
    for (int k = 0; k < CFT_NPARAM; k++)
        if (op->p->pnames[k] &&
            (!strcmp(op->p->pnames[k], name) ||
             (op->p->pnames[k][0] == '#' && !strcmp(op->p->pnames[k] + 1, name)))) {
            int n = op->par->n[k];
            for (int i = 0; i < n && i < cap && vals; i++)
                vals[i] = op->par->v[k][i];
            return n;
        }
    return -1;
}
cft_dev_buf cft_dev_op_in(const cft_dev_op *op, int i) {
    cft_dev_buf z = {0};
    return op && i >= 0 && i < op->nin ? buf_of(op->in[i]) : z;
}
cft_dev_buf cft_dev_op_out(const cft_dev_op *op, int j) {
    cft_dev_buf z = {0};
    return op && j >= 0 && j < op->nout ? buf_of(op->out[j]) : z;
}

cft_status cft_dev_op_run_on_host(const cft_dev_op *op) {
    CFT_API("cft_dev_op_run_on_host");
    if (!op)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_dev_op_run_on_host: the op is NULL"));
    const char *call = op->p->name;
    cft_array *h[op->nin > 0 ? op->nin : 1], *r[op->nout > 0 ? op->nout : 1];
    cft_aval oav[op->nout > 0 ? op->nout : 1];
    for (int i = 0; i < op->nin; i++) {
        h[i] = cft__on_device(op->in[i]) ? cft__dev_to_host(op->in[i], call) : op->in[i];
        if (cft_failed(h[i]))
            return cft__set_last(h[i]);
    }
    for (int j = 0; j < op->nout; j++)
        oav[j] = op->out[j]->aval;
    cft_array *e = cft__run_impl(op->p, op->par, op->nin, h, op->nout, oav, r);
    for (int j = 0; j < op->nout && !e; j++) {
        cft_array *c = cft_failed(r[j]) ? r[j] : cft__contig(r[j]);
        if (cft_failed(c))
            e = c;
        else if (!cft__aval_eq(&c->aval, &op->out[j]->aval)) {
            char a[96], b[96];
            e = cft__fail(CFT_E_ARG, "%s: the host gave %s where %s expects %s", call,
                          cft_aval_str(&c->aval, a), op->dev->name,
                          cft_aval_str(&op->out[j]->aval, b));
        } else {
            cft_array *w = cft__dev_write(op->out[j], cft__ptr(c), call);
            if (cft_failed(w))
                e = w;
        }
        cft__keep(c);
    }
    return e ? cft__set_last(e) : CFT_OK;
}

/* the inputs' device: that of the committed ones (NULL: the host) */
static cft_array *target(const cft_prim *p, int nin, cft_array *const *in, const cft_dev **dev) {
    int first = -1;
    *dev = NULL;
    for (int i = 0; i < nin; i++) {
        const cft_array *x = in[i];
        if (x->kind != CFT_K_CONCRETE || !x->committed)
            continue;
        if (first < 0) {
            first = i, *dev = x->dev;
            continue;
        }
        if (x->dev != *dev) {
            char a[96], b[96];
            return cft__fail(CFT_E_ARG,
                             "%s: inputs on two devices: input %d (%s) on %s and input %d (%s) "
                             "on %s; move one with cft_device_put",
                             p->name, first, cft_aval_str(&in[first]->aval, a),
                             cft_device_name(cft_device_of(in[first])), i,
                             cft_aval_str(&x->aval, b), cft_device_name(cft_device_of(x)));
        }
    }
    return NULL;
}

cft_array *cft__dev_run(const cft_prim *p, const cft_params *par, int nin, cft_array *const *in,
                        int nout, const cft_aval *oav, cft_array **out) {
    const cft_dev *d;
    cft_array *e = target(p, nin, in, &d);
    if (e)
        return e;
    if (!d) { /* committed to the host: run there, results committed too */
        cft_array *host[nin > 0 ? nin : 1];
        for (int i = 0; i < nin; i++) {
            host[i] = in[i];
            if (in[i]->kind == CFT_K_CONCRETE && in[i]->committed) {
                host[i] = cft__view(in[i], in[i]->aval.shape, in[i]->aval.ndim, in[i]->strides,
                                    in[i]->offset);
                if (cft_failed(host[i]))
                    return host[i];
                host[i]->committed = false;
            }
        }
        e = cft__run_impl(p, par, nin, host, nout, oav, out);
        for (int j = 0; j < nout && !e; j++)
            if (out[j]->kind == CFT_K_CONCRETE) {
                cft_array *v = cft__view(out[j], out[j]->aval.shape, out[j]->aval.ndim,
                                         out[j]->strides, out[j]->offset);
                if (cft_failed(v))
                    return v;
                v->committed = true, out[j] = v;
            }
        return e;
    }
    if (p->flags & CFT_PRIM_DEVICE_IMPL) /* (a collective: its own device path) */
        return p->impl(in, nin, par, out);
    /* a view (broadcast, transpose, reshape of a contiguous array...) of a
     * device array: the host impl makes it without reading data */
    if (nin == 1 && cft__on_device(in[0]) && in[0]->dev == d && !in[0]->conj &&
        (p->flags & (CFT_PRIM_VIEW | CFT_PRIM_VIEW_CONTIG))) {
        cft_array *x = in[0];
        if (!(p->flags & CFT_PRIM_VIEW) && !cft__is_contig(x))
            x = dev_contig(x, p->name);
        return cft_failed(x) ? x : p->impl(&x, 1, par, out);
    }
    cft_array *din[nin > 0 ? nin : 1];
    for (int i = 0; i < nin; i++) {
        cft_array *x = in[i];
        if (x->kind != CFT_K_CONCRETE)
            return cft__fail(CFT_E_TRACE, "%s: input %d is not concrete on %s", p->name, i,
                             d->name);
        if (!x->dev) /* uncommitted host input: moved to d */
            x = cft__dev_from_host(d, x, p->name);
        else if (!cft__is_contig(x)) /* a view of device memory: made contiguous */
            x = dev_contig(x, p->name);
        if (cft_failed(x))
            return x;
        din[i] = x;
    }
    /* a fusable primitive on a backend that asks for eager kernels */
    cft_dev_eager_fn eager = atomic_load(&eager_hook);
    if (eager && d->b->run_kernel && (d->b->flags & CFT_BACKEND_EAGER_KERNELS) &&
        (p->flags & (CFT_PRIM_ELEMENTWISE | CFT_PRIM_REDUCTION)) && p->c_expr) {
        int done = eager(p, par, nin, din, nout, out);
        if (done)
            return done > 0 ? NULL : out[0];
    }
    for (int j = 0; j < nout; j++) {
        out[j] = cft__dev_alloc(d, p->name, oav[j].dtype, oav[j].shape, oav[j].ndim);
        if (cft_failed(out[j]))
            return out[j];
    }
    cft_dev_kernel k; /* an operation with a kernel of its own, where kernels run */
    if (p->dev_kernel && d->b->run_kernel && p->dev_kernel(din, nin, par, out, &k)) {
        if (k.nslot > 0 && d->b->run_kernel(d->b->ctx, d->index, &k) != 0)
            return cft__dev_fail(d, p->name, "running the operation's kernel");
    } else {
        cft_dev_op op = {p, par, d, nin, nout, din, out, atomic_load(&matmul_precision)};
        if (d->b->run(d->b->ctx, d->index, &op) != 0)
            return cft__dev_fail(d, p->name, "running the operation");
    }
    for (int i = 0; i < nin; i++)
        cft__keep(din[i]);
    return NULL;
}
