/* test_graph.c: recordings for the test backend, what CUDA's stream
 * capture and graphs are to the CUDA backend. While a thread records, the
 * backend hands its kernels (source, entry, a copy of the argument struct
 * and of the operand pointers), its operations (name, operands and the
 * parameters the mappings read, copied: the operation itself lives only
 * for the call) and its device-to-device copies here instead of running
 * them; a copy to or from the host, or an operation only the host can run,
 * spoils the recording, as they break a CUDA capture. A replay runs the
 * steps in order on the same device pointers, so a recording whose memory
 * was freed or reused behind it computes wrong values: what the jit's
 * graphs must never do, and what test_device_graph checks. */
#include "test_graph.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KERNEL, OP, COPY };
enum { MAX_PARAMS = 13, MAX_BUFS = 4 };

static const char *const param_names[MAX_PARAMS] = {
    "lc",       "rc",        "lb",    "rb",          "fft_type",      "fft_lengths",
    "scale",    "left_side", "lower", "transpose_a", "unit_diagonal", "axes",
    "precision"}; /* the matrix products' cft_matmul_precision, as issued */

typedef struct {
    char name[32];
    int nin, nout;
    cft_dev_buf in[MAX_BUFS], out[MAX_BUFS];
    int np[MAX_PARAMS]; /* -1: the operation has none of that name */
    int64_t pv[MAX_PARAMS][8];
} snap;

typedef struct step {
    int kind;
    cft_dev_kernel k; /* its source, entry, args and ptrs are copies */
    snap op;
    void *dst;
    const void *src;
    size_t bytes;
    struct step *next;
} step;

typedef struct {
    step *head, **tail;
    int dev;
    const char *spoiled;
} recording;

static _Thread_local recording *rec;
static _Thread_local char why[128];

int test_graph_begin(int dev) {
    if (rec)
        return -1;
    rec = calloc(1, sizeof *rec);
    if (!rec)
        return -1;
    rec->tail = &rec->head, rec->dev = dev;
    return 0;
}

bool test_graph_recording(void) {
    return rec != NULL;
}

void test_graph_spoil(const char *what) {
    if (rec && !rec->spoiled)
        rec->spoiled = what;
}

static step *add(int kind) {
    step *s = calloc(1, sizeof *s);
    if (!s) {
        test_graph_spoil("out of memory");
        return NULL;
    }
    s->kind = kind;
    *rec->tail = s, rec->tail = &s->next;
    return s;
}

int test_graph_kernel(const cft_dev_kernel *k) {
    step *s = add(KERNEL);
    if (!s)
        return -1;
    s->k = *k;
    char *src = strdup(k->source), *entry = strdup(k->entry);
    void *args = malloc(k->args_size ? k->args_size : 1);
    void **ptrs = malloc(sizeof(void *) * (size_t)(k->nptrs > 0 ? k->nptrs : 1));
    if (!src || !entry || !args || !ptrs) {
        test_graph_spoil("out of memory");
        return -1;
    }
    memcpy(args, k->args, k->args_size);
    memcpy(ptrs, k->ptrs, sizeof(void *) * (size_t)k->nptrs);
    s->k.source = src, s->k.entry = entry, s->k.args = args, s->k.ptrs = ptrs;
    return 0;
}

int test_graph_op(const cft_dev_op_api *api, const cft_dev_op *op) {
    int nin = api->nin(op), nout = 1;
    if (nin > MAX_BUFS) {
        test_graph_spoil("an operation of too many operands");
        return -1;
    }
    step *s = add(OP);
    if (!s)
        return -1;
    snprintf(s->op.name, sizeof s->op.name, "%s", api->name(op));
    s->op.nin = nin, s->op.nout = nout;
    for (int i = 0; i < nin; i++)
        s->op.in[i] = api->in(op, i);
    s->op.out[0] = api->out(op, 0);
    for (int p = 0; p < MAX_PARAMS; p++)
        s->op.np[p] = api->param(op, param_names[p], s->op.pv[p], 8);
    return 0;
}

int test_graph_copy(void *dst, const void *src, size_t bytes) {
    step *s = add(COPY);
    if (!s)
        return -1;
    s->dst = dst, s->src = src, s->bytes = bytes;
    return 0;
}

const char *test_graph_why(void) {
    return why;
}

static void free_steps(step *s) {
    while (s) {
        step *n = s->next;
        if (s->kind == KERNEL) {
            free((void *)s->k.source), free((void *)s->k.entry);
            free((void *)s->k.args), free((void *)s->k.ptrs);
        }
        free(s);
        s = n;
    }
}

int test_graph_end(void **graph) {
    recording *r = rec;
    rec = NULL;
    *graph = NULL;
    if (!r) {
        snprintf(why, sizeof why, "no recording");
        return -1;
    }
    if (r->spoiled) {
        snprintf(why, sizeof why, "%s", r->spoiled);
        free_steps(r->head);
        free(r);
        return -1;
    }
    *graph = r;
    return 0;
}

/* the snapshot read as an operation */
static const char *s_name(const cft_dev_op *o) {
    return ((const snap *)o)->name;
}
static int s_nin(const cft_dev_op *o) {
    return ((const snap *)o)->nin;
}
static cft_dev_buf s_in(const cft_dev_op *o, int i) {
    return ((const snap *)o)->in[i];
}
static cft_dev_buf s_out(const cft_dev_op *o, int j) {
    return ((const snap *)o)->out[j];
}
static int s_param(const cft_dev_op *o, const char *name, int64_t *vals, int cap) {
    const snap *s = (const snap *)o;
    if (name[0] == '#')
        name++;
    for (int p = 0; p < MAX_PARAMS; p++)
        if (!strcmp(param_names[p], name)) {
            for (int i = 0; i < s->np[p] && i < cap && i < 8; i++)
                vals[i] = s->pv[p][i];
            return s->np[p];
        }
    return -1;
}
static const cft_dev_op_api snap_api = {s_name, s_nin, s_in, s_out, s_param};

int test_graph_launch(void *graph, const test_graph_exec *x) {
    const recording *r = graph;
    for (const step *s = r ? r->head : NULL; s; s = s->next) {
        int rc = s->kind == KERNEL ? x->kernel(&s->k)
                 : s->kind == COPY ? x->copy(s->dst, s->src, s->bytes)
                                   : (x->op(&snap_api, (const cft_dev_op *)&s->op) == 1 ? 0 : -1);
        if (rc)
            return -1;
    }
    return r ? 0 : -1;
}

void test_graph_release(void *graph) {
    recording *r = graph;
    if (r) {
        free_steps(r->head);
        free(r);
    }
}
