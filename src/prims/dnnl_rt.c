/* dnnl_rt.c: the runtime cft's oneDNN kernels share (conv_dnnl.c,
 * matmul_dnnl.c, qmatmul_dnnl.c): one CPU engine, and per thread a stream and scratch
 * buffers that only grow (blocked operands, scratchpads), freed when the
 * thread exits; the end of a primitive's build and a run on the
 * thread's stream. oneDNN runs on OpenMP, the team of src/core/par.c, at
 * cft_set_num_threads' count. */
#include "prims/dnnl_rt.h"

#ifdef CFT_HAVE_DNNL
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/par.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static dnnl_engine_t eng;
static pthread_key_t tl_key; /* its destructor frees a thread's stream and buffers */
static bool have_key;

static _Thread_local dnnl_stream_t tl_stream;
static _Thread_local void *tl_buf[CFT_DNNL_SLOTS];
static _Thread_local size_t tl_cap[CFT_DNNL_SLOTS];

static void thread_done(void *unused) {
    (void)unused;
    for (int i = 0; i < CFT_DNNL_SLOTS; i++)
        free(tl_buf[i]), tl_buf[i] = NULL, tl_cap[i] = 0;
    if (tl_stream)
        dnnl_stream_destroy(tl_stream), tl_stream = NULL;
}

static void init_once(void) {
    have_key = pthread_key_create(&tl_key, thread_done) == 0;
    if (!have_key || !cft__dnnl_ok(dnnl_engine_create(&eng, dnnl_cpu, 0)))
        eng = NULL;
}

dnnl_engine_t cft__dnnl_engine(void) {
    pthread_once(&once, init_once);
    return eng;
}

dnnl_stream_t cft__dnnl_stream(void) {
    if (!tl_stream) {
        dnnl_engine_t e = cft__dnnl_engine();
        if (!e || !cft__dnnl_ok(dnnl_stream_create(&tl_stream, e, dnnl_stream_default_flags)))
            return tl_stream = NULL;
        pthread_setspecific(tl_key, &tl_stream); /* non-NULL: thread_done runs at exit */
    }
    return tl_stream;
}

void *cft__dnnl_buffer(int slot, size_t n) {
    if (n > tl_cap[slot]) {
        free(tl_buf[slot]);
        tl_buf[slot] = aligned_alloc(64, (n + 63) / 64 * 64);
        tl_cap[slot] = tl_buf[slot] ? n : 0;
        if (tl_buf[slot])
            pthread_setspecific(tl_key, &tl_stream); /* freed at exit, stream or not */
    }
    return tl_buf[slot];
}

dnnl_memory_t cft__dnnl_mem(const dnnl_memory_desc_t *md, void *buf) {
    dnnl_memory_t m = NULL;
    if (!cft__dnnl_ok(dnnl_memory_create(&m, md, cft__dnnl_engine(), buf)))
        return NULL;
    return m;
}

cft__dnnl_entry *cft__dnnl_lookup(cft__dnnl_cache *c, const int64_t *key, bool *owned) {
    *owned = false;
    pthread_mutex_lock(&c->mu);
    for (cft__dnnl_entry *e = c->head; e; e = e->next)
        if (memcmp(e->key, key, sizeof e->key) == 0) {
            pthread_mutex_unlock(&c->mu);
            return e;
        }
    cft__dnnl_entry *e = c->build(key);
    if (e && c->n < CFT_DNNL_MAX_ENTRIES)
        e->next = c->head, c->head = e, c->n++;
    else if (e)
        *owned = true; /* cache full: used once, then destroyed */
    pthread_mutex_unlock(&c->mu);
    return e;
}

bool cft__dnnl_reference(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    return cft__dnnl_ok(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl)) &&
           impl && strncmp(impl, "ref", 3) == 0;
}

void cft__dnnl_built(bool good, dnnl_primitive_desc_t pd, dnnl_primitive_attr_t attr,
                     dnnl_primitive_t *prim, dnnl_memory_desc_t *scratch) {
    if (good)
        *scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    else if (*prim)
        dnnl_primitive_destroy(*prim), *prim = NULL;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
}

enum { RUN_MAX_ARGS = 8 };

bool cft__dnnl_run(dnnl_primitive_t prim, int n, const int *arg, const dnnl_memory_desc_t *md,
                   void *const *buf, const dnnl_memory_desc_t *scratch, int slot) {
    dnnl_stream_t st = cft__dnnl_stream();
    if (!st || n < 0 || n >= RUN_MAX_ARGS)
        return false;
    size_t sn = dnnl_memory_desc_get_size(scratch);
    void *sp = sn ? cft__dnnl_buffer(slot, sn) : DNNL_MEMORY_NONE;
    if (sn && !sp)
        return false;
    dnnl_memory_t m[RUN_MAX_ARGS];
    dnnl_exec_arg_t args[RUN_MAX_ARGS];
    bool good = true;
    for (int i = 0; i <= n; i++) { /* the last one: the scratchpad */
        m[i] = i < n ? cft__dnnl_mem(&md[i], buf[i]) : cft__dnnl_mem(scratch, sp);
        args[i] = (dnnl_exec_arg_t){i < n ? arg[i] : DNNL_ARG_SCRATCHPAD, m[i]};
        good = good && m[i];
    }
    good = good && cft__dnnl_ok(dnnl_primitive_execute(prim, st, n + 1, args)) &&
           cft__dnnl_ok(dnnl_stream_wait(st));
    for (int i = 0; i <= n; i++)
        if (m[i])
            dnnl_memory_destroy(m[i]);
    return good;
}

int cft__dnnl_threads_begin(int *nth, double work) {
    *nth = cft__num_threads();
    double per = work / CFT_DNNL_GRAIN;
    if (per < *nth)
        *nth = per < 1 ? 1 : (int)per;
    int before = omp_get_max_threads();
    omp_set_num_threads(*nth);
    return before;
}

void cft__dnnl_threads_end(int before) {
    omp_set_num_threads(before);
}
#else
typedef int cft__dnnl_rt_unused; /* an empty file is not C */
#endif
