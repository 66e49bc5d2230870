/* matmul_dnnl.c: autocast's bf16 / f16 matrix products on oneDNN's matmul
 * primitive (AMX or AVX512-BF16 where the CPU has them, AVX-512 otherwise),
 * accumulating in f32 and rounding the result once, as the f32 path that
 * cft__run_impl falls back to does. Operands arrive as contiguous
 * [batch, M, K] and [batch, K, N], or with each matrix turned (stored
 * [batch, K, M], [batch, N, K]: the transposed operands of a backward
 * pass, which oneDNN reads as they lie); dot.c copies other layouts to
 * the plain ones. So one geometry and layout is one primitive and one
 * order of sums: the jit and the interpreter, which hand a product the
 * same layouts, get the same bits.
 * Primitives are built once per geometry, dtype and thread count, kept in
 * a bounded cache (built under a lock; geometries oneDNN declines are kept
 * too, so they are asked once) and run concurrently, each thread with its
 * own stream and scratchpad (dnnl_rt.c). f32 goes through here only for
 * tests of this file: cft's f32 products stay on OpenBLAS / libxsmm. */
#include "prims/matmul_dnnl.h"

#ifdef CFT_HAVE_DNNL
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prims/dnnl_rt.h"

enum { SCRATCH_SLOT = 4 };

typedef struct entry {
    cft__dnnl_entry head;              /* key: dtype, batch, M, N, K, threads */
    dnnl_primitive_t prim;             /* NULL: oneDNN declined */
    dnnl_memory_desc_t md[3], scratch; /* a, b, c */
} entry;

static const dnnl_data_type_t dtypes[3] = {dnnl_f32, dnnl_bf16, dnnl_f16};
static const char *const names[3] = {"f32", "bf16", "f16"};

/* [batch, r, c], each matrix stored row-major or (turned) column-major */
static bool desc(dnnl_memory_desc_t *md, dnnl_data_type_t dt, int64_t batch, int64_t r, int64_t c,
                 bool turned) {
    dnnl_dims_t d3 = {batch, r, c}, d2 = {r, c};
    return cft__dnnl_ok(
        batch == 1 ? dnnl_memory_desc_init_by_tag(md, 2, d2, dt, turned ? dnnl_ba : dnnl_ab)
                   : dnnl_memory_desc_init_by_tag(md, 3, d3, dt, turned ? dnnl_acb : dnnl_abc));
}

/* the primitive for one key; prim NULL when oneDNN declines; NULL when out
 * of memory */
static cft__dnnl_entry *build(const int64_t *k) {
    entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    memcpy(e->head.key, k, sizeof e->head.key);
    dnnl_data_type_t dt = dtypes[k[0] & 3];
    bool ta = k[0] & 4, tb = k[0] & 8;
    int64_t batch = k[1], M = k[2], N = k[3], K = k[4];
    dnnl_engine_t eng = cft__dnnl_engine();
    dnnl_matmul_desc_t mdesc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool good =
        eng && desc(&e->md[0], dt, batch, M, K, ta) && desc(&e->md[1], dt, batch, K, N, tb) &&
        desc(&e->md[2], dt, batch, M, N, false) &&
        cft__dnnl_ok(dnnl_matmul_desc_init(&mdesc, &e->md[0], &e->md[1], NULL, &e->md[2])) &&
        cft__dnnl_ok(dnnl_primitive_attr_create(&attr)) &&
        cft__dnnl_ok(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)) &&
        cft__dnnl_ok(dnnl_primitive_desc_create(&pd, &mdesc, attr, eng, NULL)) &&
        (k[0] == 0 || !cft__dnnl_reference(pd)) &&
        cft__dnnl_ok(dnnl_primitive_create(&e->prim, pd));
    cft__dnnl_built(good, pd, attr, &e->prim, &e->scratch);
    return &e->head;
}

static cft__dnnl_cache cache = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, build};
_Atomic long cft__dnnl_turned_runs;

static bool run(const entry *e, const void *a, const void *b, void *c) {
    static const int arg[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    void *const buf[3] = {(void *)a, (void *)b, c};
    return cft__dnnl_run(e->prim, 3, arg, e->md, buf, &e->scratch, SCRATCH_SLOT);
}

static bool off(void) {
    const char *v = getenv("CFT_DNNL_LOW");
    return v && v[0] == '0';
}

bool cft__matmul_dnnl(int dtype, int64_t batch, int64_t M, int64_t N, int64_t K, const void *a,
                      bool ta, const void *b, bool tb, void *c) {
    if (dtype < 0 || dtype > 2 || batch < 1 || M < 1 || N < 1 || K < 1 || off() ||
        (dtype && !cft__dnnl_low_ok(dtype)))
        return false;
    int nth,
        before = cft__dnnl_threads_begin(&nth, (double)batch * (double)M * (double)N * (double)K);
    int64_t key[CFT_DNNL_NKEY] = {dtype | (ta ? 4 : 0) | (tb ? 8 : 0), batch, M, N, K, nth};
    bool owned, good = false;
    entry *e = (entry *)cft__dnnl_lookup(&cache, key, &owned);
    if (e && e->prim)
        good = run(e, a, b, c);
    if (good && (ta || tb))
        cft__dnnl_turned_runs++;
    cft__dnnl_threads_end(before);
    if (owned) {
        if (e->prim)
            dnnl_primitive_destroy(e->prim);
        free(e);
    }
    return good;
}

/* ---- does this CPU have them? ---- */

static pthread_once_t probe_once[3] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};
static bool have[3];

static void probe(int dtype) {
    int64_t key[CFT_DNNL_NKEY] = {dtype, 1, 64, 64, 64, 1};
    entry *e = off() ? NULL : (entry *)build(key);
    have[dtype] = e && e->prim;
    if (e) {
        if (e->prim)
            dnnl_primitive_destroy(e->prim);
        free(e);
    }
    if (!have[dtype] && !off())
        fprintf(stderr,
                "cft: oneDNN has no %s matrix-product kernels on this CPU (%s): %s products and "
                "convolutions run in f32, rounded to %s on store\n",
                names[dtype],
                dtype == 1 ? "they need AVX-512; AVX512-BF16 or AMX make them fast"
                           : "they need AVX512-FP16 or AMX-FP16",
                names[dtype], names[dtype]);
}
static void probe_bf16(void) {
    probe(1);
}
static void probe_f16(void) {
    probe(2);
}

bool cft__dnnl_low_ok(int dtype) {
    if (dtype != 1 && dtype != 2)
        return false;
    pthread_once(&probe_once[dtype], dtype == 1 ? probe_bf16 : probe_f16);
    return have[dtype] && !off();
}

#else

_Atomic long cft__dnnl_turned_runs;

bool cft__matmul_dnnl(int dtype, int64_t batch, int64_t M, int64_t N, int64_t K, const void *a,
                      bool ta, const void *b, bool tb, void *c) {
    (void)dtype, (void)batch, (void)M, (void)N, (void)K, (void)a, (void)ta, (void)b, (void)tb,
        (void)c;
    return false;
}

bool cft__dnnl_low_ok(int dtype) {
    (void)dtype;
    return false;
}

#endif
