/* debug.c: cft_debug_print, printing an array's values from inside traced
 * and jitted functions (jax.debug.print): a primitive with an effect whose
 * output is its input. Its impl prints "label: values" when it runs, so a
 * jitted plan prints on every call (not when traced); dead-code
 * elimination keeps it even when the result is unused. Under jvp it prints
 * the primal (the tangent passes through); under vmap, the whole batch;
 * its transpose never runs it (the tangent does not go through it). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/mem.h"
#include "prims/rules.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *stream;             /* NULL: stderr */
static const char *labels[1024]; /* by id (static root) */
static int nlabels;

void cft_debug_set_stream(FILE *f) {
    pthread_mutex_lock(&mu);
    stream = f;
    pthread_mutex_unlock(&mu);
}

static int label_id(const char *s) {
    pthread_mutex_lock(&mu);
    int i = 0;
    while (i < nlabels && strcmp(labels[i], s) != 0)
        i++;
    if (i == nlabels && nlabels < 1024)
        labels[nlabels++] = cft__strdup(s);
    pthread_mutex_unlock(&mu);
    return i < 1024 ? i : 1023;
}

extern const cft_prim cft_p_debug_print;

static cft_array *dp_shape(const cft_aval *in, int nin, const cft_params *p, cft_aval *out) {
    (void)nin, (void)p;
    out[0] = in[0];
    return NULL;
}
static cft_array *dp_impl(cft_array *const *x, int nin, const cft_params *p, cft_array **y) {
    (void)nin;
    pthread_mutex_lock(&mu);
    FILE *f = stream ? stream : stderr;
    fprintf(f, "%s: ", labels[p->v[0][0]]);
    cft_print(x[0], f);
    fflush(f);
    pthread_mutex_unlock(&mu);
    y[0] = x[0];
    return NULL;
}
static cft_array *dp_jvp(cft_array *const *x, cft_array *const *y, cft_array *const *t, int nin,
                         const cft_params *p, cft_array **ty) {
    (void)x, (void)y, (void)nin, (void)p;
    ty[0] = t[0]; /* the primal was printed by the primal bind */
    return NULL;
}
static cft_array *dp_vmap(int64_t size, cft_array *const *x, const int *bdim, int nin,
                          const cft_params *p, cft_array **y, int *ybdim) {
    (void)size, (void)nin;
    y[0] = cft__bind1(&cft_p_debug_print, p, 1, x);
    ybdim[0] = bdim[0];
    return cft_failed(y[0]) ? y[0] : NULL;
}

const cft_prim cft_p_debug_print = {
    .name = "debug_print",
    .nin = 1,
    .nout = 1,
    .flags = CFT_PRIM_EFFECT,
    .pnames = {"label"},
    .shape = dp_shape,
    .impl = dp_impl,
    .jvp = dp_jvp,
    .vmap = dp_vmap,
};

cft_array *cft_debug_print(const char *label, cft_array *x) {
    CFT_PROPAGATE("cft_debug_print", x);
    cft_params p = {0};
    cft__param_set1(&p, 0, label_id(label ? label : ""));
    return cft__bind1(&cft_p_debug_print, &p, 1, &x);
}
