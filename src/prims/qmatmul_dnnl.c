/* qmatmul_dnnl.c: the u8 x s8 -> s32 product of the int8 primitives
 * (dot_qstatic, dot_qint, the dynamic linear, conv_qstatic's windows) on
 * oneDNN's matmul primitive rather than its dnnl_gemm_u8s8s32 call, for
 * products of few outputs (cft__qgemm sends N <= 64 here). The primitive
 * takes oneDNN's brgemm kernels and is built once per geometry and team
 * size. The GEMM alone (Zen 4, 2 threads, M = 256): by 10 outputs of
 * K = 288, 5.1 us against the call's 9.6; by 64, 14.5 against 16.6; by
 * 128 and up the call is faster (the primitive packs the weight on every
 * call). The same integers. The zero point is a run-time argument, so one
 * primitive serves every activation range. It runs on cft's whole team:
 * cutting oneDNN's team to the product's size around the call (as
 * dnnl_rt.c's cft__dnnl_threads_begin does) cost more here than it saved
 * (the digits CNN's classifier op, fastest of 100: 36 us on the whole
 * team, 43 us cut to one thread, 46 us on the GEMM call). Primitives are
 * kept in a bounded cache (built under a lock; geometries oneDNN declines
 * are kept too, asked once) and run concurrently, each thread with its own
 * stream and scratchpad (dnnl_rt.c). */
#include "prims/qmatmul_dnnl.h"

#ifdef CFT_HAVE_DNNL
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "core/par.h"
#include "prims/dnnl_rt.h"

enum { SCRATCH_SLOT = 5 };

typedef struct entry {
    cft__dnnl_entry head;              /* key: M, N, K, ldw, team size */
    dnnl_primitive_t prim;             /* NULL: oneDNN declined */
    dnnl_memory_desc_t md[4], scratch; /* x, w, acc, the zero point */
} entry;

static cft__dnnl_entry *build(const int64_t *k) {
    entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    memcpy(e->head.key, k, sizeof e->head.key);
    int64_t M = k[0], N = k[1], K = k[2], ldw = k[3];
    dnnl_engine_t eng = cft__dnnl_engine();
    dnnl_matmul_desc_t mdesc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    /* w [K, N] over wq's rows: element (k, n) at n ldw + k */
    bool good =
        eng &&
        cft__dnnl_ok(dnnl_memory_desc_init_by_strides(&e->md[0], 2, (dnnl_dims_t){M, K}, dnnl_u8,
                                                      (dnnl_dims_t){K, 1})) &&
        cft__dnnl_ok(dnnl_memory_desc_init_by_strides(&e->md[1], 2, (dnnl_dims_t){K, N}, dnnl_s8,
                                                      (dnnl_dims_t){1, ldw})) &&
        cft__dnnl_ok(dnnl_memory_desc_init_by_strides(&e->md[2], 2, (dnnl_dims_t){M, N}, dnnl_s32,
                                                      (dnnl_dims_t){N, 1})) &&
        cft__dnnl_ok(
            dnnl_memory_desc_init_by_tag(&e->md[3], 1, (dnnl_dims_t){1}, dnnl_s32, dnnl_x)) &&
        cft__dnnl_ok(dnnl_matmul_desc_init(&mdesc, &e->md[0], &e->md[1], NULL, &e->md[2])) &&
        cft__dnnl_ok(dnnl_primitive_attr_create(&attr)) &&
        cft__dnnl_ok(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)) &&
        cft__dnnl_ok(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0,
                                                         (int32_t[]){DNNL_RUNTIME_S32_VAL})) &&
        cft__dnnl_ok(dnnl_primitive_desc_create(&pd, &mdesc, attr, eng, NULL)) &&
        !cft__dnnl_reference(pd) && cft__dnnl_ok(dnnl_primitive_create(&e->prim, pd));
    cft__dnnl_built(good, pd, attr, &e->prim, &e->scratch);
    return &e->head;
}

static cft__dnnl_cache cache = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, build};

static bool run(const entry *e, const uint8_t *xq, int32_t ao, const int8_t *wq, int32_t *acc) {
    static const int arg[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST,
                               DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC};
    void *const buf[4] = {(void *)xq, (void *)wq, acc, &ao};
    return cft__dnnl_run(e->prim, 4, arg, e->md, buf, &e->scratch, SCRATCH_SLOT);
}

bool cft__qmatmul_dnnl(int64_t M, int64_t N, int64_t K, const uint8_t *xq, int32_t ao,
                       const int8_t *wq, int64_t ldw, int32_t *acc) {
    if (M < 1 || N < 1 || K < 1 || ldw < K)
        return false;
    int nth = cft__num_threads(), before = omp_get_max_threads();
    if (before != nth) /* cft's team (CFT_NUM_THREADS, cft_set_num_threads) */
        omp_set_num_threads(nth);
    int64_t key[CFT_DNNL_NKEY] = {M, N, K, ldw, nth};
    bool owned, good = false;
    entry *e = (entry *)cft__dnnl_lookup(&cache, key, &owned);
    if (e && e->prim)
        good = run(e, xq, ao, wq, acc);
    if (before != nth)
        omp_set_num_threads(before);
    if (owned && e) {
        if (e->prim)
            dnnl_primitive_destroy(e->prim);
        free(e);
    }
    return good;
}

#else

bool cft__qmatmul_dnnl(int64_t M, int64_t N, int64_t K, const uint8_t *xq, int32_t ao,
                       const int8_t *wq, int64_t ldw, int32_t *acc) {
    (void)M, (void)N, (void)K, (void)xq, (void)ao, (void)wq, (void)ldw, (void)acc;
    return false;
}

#endif
