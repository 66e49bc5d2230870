/* conv_dnnl.c: conv_general_dilated's f32, bf16 and f16 kernels on oneDNN (Debian's
 * libdnnl-dev; built when CMake finds it, CFT_HAVE_DNNL), used where it
 * measured faster than im2col + GEMM (bench/onednn/conv.c, reorders
 * included): larger layers (2.3x forward) and weight gradients (2.6-6x);
 * conv.c decides which convolutions come here. oneDNN chooses its blocked
 * layouts ("any"); the operands are reordered into them and the output
 * back to cft's row-major [N, O, spatial...]. Primitives are built once
 * per geometry and thread count and kept (a bounded cache, built under a
 * lock); they run concurrently, each thread with its own stream, blocked
 * buffers and scratchpad (dnnl_rt.c). bf16 and f16 convolutions (autocast)
 * come here from conv.c's low-precision rule and accumulate in f32; a CPU
 * without oneDNN's kernels for them declines, and they run widened. A weight
 * gradient, which the transpose rule writes as a convolution of the
 * transposed input with the transposed output cotangent, runs as oneDNN's
 * backward-weights primitive (conv.c recognises it by its operands'
 * strides). What oneDNN declines returns false and goes to conv.c's im2col
 * kernel, as everything does with CFT_CONV_DNNL=0. The int8 convolutions of
 * quantized programs (qconv.c) come here too: u8 x, s8 w, s32 sums written
 * [N, O, spatial...] (oneDNN's kernel writes them channels last, and its
 * reorder turns them: 0.30 ms for 4 MB into memory not yet in the cache,
 * where cft's transposing loop took 0.45), on VNNI / AMX where the CPU
 * has them. */
#include "prims/conv_dnnl.h"

#ifdef CFT_HAVE_DNNL
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "prims/dnnl_rt.h"

typedef struct entry {
    cft__dnnl_entry head;         /* key: the geometry, dtype, threads */
    dnnl_primitive_t conv, re[3]; /* reorders: src in, weights in, dst out (NULL: none) */
    dnnl_memory_desc_t md[3], plain[3], scratch; /* src, weights, dst */
    int out;                                     /* the one written: 2, or 1 (wgrad) */
    bool wgrad;
} entry;

static dnnl_engine_t eng;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool enabled; /* not off (env) and an engine made */

static const dnnl_format_tag_t src_tags[4] = {dnnl_format_tag_undef, dnnl_ncw, dnnl_nchw,
                                              dnnl_ncdhw},
                               w_tags[4] = {dnnl_format_tag_undef, dnnl_oiw, dnnl_oihw, dnnl_oidhw},
                               gw_tags[4] = {dnnl_format_tag_undef, dnnl_goiw, dnnl_goihw,
                                             dnnl_goidhw},
                               iw_tags[4] = {dnnl_format_tag_undef, dnnl_bac, dnnl_iohw,
                                             dnnl_iodhw}; /* weights [I, O, k...] */

#define ok cft__dnnl_ok
/* each dtype's src, weights, dst: f32, bf16, f16, and int8 (u8 x s8 -> s32) */
static const dnnl_data_type_t dtypes[4][3] = {{dnnl_f32, dnnl_f32, dnnl_f32},
                                              {dnnl_bf16, dnnl_bf16, dnnl_bf16},
                                              {dnnl_f16, dnnl_f16, dnnl_f16},
                                              {dnnl_u8, dnnl_s8, dnnl_s32}};

static void destroy(entry *e) {
    if (e->conv)
        dnnl_primitive_destroy(e->conv);
    for (int i = 0; i < 3; i++)
        if (e->re[i])
            dnnl_primitive_destroy(e->re[i]);
    free(e);
}

/* the primitive and the reorders for one geometry (key[24]: 1 for a weight
 * gradient, whose weights are the output, in [I, O, k...] order; key[25]:
 * the dtype); NULL if oneDNN declines */
static cft__dnnl_entry *build(const int64_t *k) {
    int nsp = (int)k[0];
    bool wgrad = k[24] == 1, q8 = k[25] == 3;
    const dnnl_data_type_t *dt = dtypes[k[25]];
    int64_t N = k[1], C = k[2], O = k[3], I = k[4], G = k[5];
    const int64_t *in = k + 6, *ks = k + 9, *s = k + 12, *lo = k + 15, *hi = k + 18, *rd = k + 21;
    dnnl_dims_t sd = {N, C}, dd = {N, O}, wd, st, dil, pl, pr;
    int wn = 2 + nsp + (G > 1);
    int64_t out[3];
    for (int i = 0; i < nsp; i++) {
        int64_t kd = (ks[i] - 1) * rd[i] + 1;
        out[i] = (in[i] + lo[i] + hi[i] - kd) / s[i] + 1;
        sd[2 + i] = in[i], dd[2 + i] = out[i];
        st[i] = s[i], dil[i] = rd[i] - 1, pl[i] = lo[i], pr[i] = hi[i];
    }
    if (G > 1) {
        wd[0] = G, wd[1] = O / G, wd[2] = I;
        for (int i = 0; i < nsp; i++)
            wd[3 + i] = ks[i];
    } else {
        wd[0] = O, wd[1] = I;
        for (int i = 0; i < nsp; i++)
            wd[2 + i] = ks[i];
    }
    entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    memcpy(e->head.key, k, sizeof e->head.key);
    e->wgrad = wgrad;
    dnnl_memory_desc_t any[3];
    bool good =
        !(q8 && (wgrad || G > 1)) &&
        ok(dnnl_memory_desc_init_by_tag(&e->plain[0], 2 + nsp, sd, dt[0], src_tags[nsp])) &&
        ok(dnnl_memory_desc_init_by_tag(&e->plain[1], wn, wd, dt[1],
                                        wgrad   ? iw_tags[nsp]
                                        : G > 1 ? gw_tags[nsp]
                                                : w_tags[nsp])) &&
        ok(dnnl_memory_desc_init_by_tag(&e->plain[2], 2 + nsp, dd, dt[2], src_tags[nsp])) &&
        ok(dnnl_memory_desc_init_by_tag(&any[0], 2 + nsp, sd, dt[0], dnnl_format_tag_any)) &&
        ok(dnnl_memory_desc_init_by_tag(&any[1], wn, wd, dt[1], dnnl_format_tag_any)) &&
        ok(dnnl_memory_desc_init_by_tag(&any[2], 2 + nsp, dd, dt[2], dnnl_format_tag_any));
    dnnl_convolution_desc_t cd, bd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL, fpd = NULL;
    good = good &&
           ok(dnnl_dilated_convolution_forward_desc_init(
               &cd, q8 ? dnnl_forward_inference : dnnl_forward_training, dnnl_convolution_direct,
               &any[0], &any[1], NULL, &any[2], st, dil, pl, pr)) &&
           ok(dnnl_primitive_attr_create(&attr)) &&
           ok(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (good && wgrad) /* the forward is the hint the backward is built from */
        good =
            ok(dnnl_primitive_desc_create(&fpd, &cd, attr, eng, NULL)) &&
            ok(dnnl_dilated_convolution_backward_weights_desc_init(
                &bd, dnnl_convolution_direct, &any[0], &any[1], NULL, &any[2], st, dil, pl, pr)) &&
            ok(dnnl_primitive_desc_create(&pd, &bd, attr, eng, fpd));
    else if (good)
        good = ok(dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL));
    good = good &&
           !(q8 && cft__dnnl_reference(pd)) && /* int8: the gather on the integer GEMM is faster */
           ok(dnnl_primitive_create(&e->conv, pd));
    if (good) {
        dnnl_query_t q[3] = {dnnl_query_src_md,
                             wgrad ? dnnl_query_diff_weights_md : dnnl_query_weights_md,
                             wgrad ? dnnl_query_diff_dst_md : dnnl_query_dst_md};
        for (int a = 0; a < 3; a++)
            e->md[a] = *dnnl_primitive_desc_query_md(pd, q[a], 0);
        e->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        e->out = wgrad ? 1 : 2;
        for (int a = 0; good && a < 3; a++) {
            if (dnnl_memory_desc_equal(&e->md[a], &e->plain[a]))
                continue;
            dnnl_primitive_desc_t rpd = NULL;
            bool back = a == e->out;
            good = ok(dnnl_reorder_primitive_desc_create(&rpd, back ? &e->md[a] : &e->plain[a], eng,
                                                         back ? &e->plain[a] : &e->md[a], eng,
                                                         NULL)) &&
                   ok(dnnl_primitive_create(&e->re[a], rpd));
            if (rpd)
                dnnl_primitive_desc_destroy(rpd);
        }
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (!good) { /* kept as declined (no primitive), not built again */
        for (int i = 0; i < 3; i++)
            if (e->re[i])
                dnnl_primitive_destroy(e->re[i]), e->re[i] = NULL;
        if (e->conv)
            dnnl_primitive_destroy(e->conv), e->conv = NULL;
    }
    return &e->head;
}

static cft__dnnl_cache cache = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, build};

static void init_once(void) {
    const char *v = getenv("CFT_CONV_DNNL");
    enabled = !(v && v[0] == '0') && (eng = cft__dnnl_engine()) != NULL;
}

static bool init(void) {
    pthread_once(&once, init_once);
    return enabled;
}

static bool run(const entry *e, void *x, void *w, void *y) {
    dnnl_stream_t st = cft__dnnl_stream();
    if (!st)
        return false;
    void *bufs[3] = {x, w, y}, *sp = NULL;
    size_t sn = dnnl_memory_desc_get_size(&e->scratch);
    dnnl_memory_t plain[3] = {0}, used[3] = {0}, scratch = NULL;
    bool good = !sn || (sp = cft__dnnl_buffer(3, sn)) != NULL;
    if (good)
        good = (scratch = cft__dnnl_mem(&e->scratch, sn ? sp : DNNL_MEMORY_NONE)) != NULL;
    for (int a = 0; good && a < 3; a++) {
        plain[a] = cft__dnnl_mem(&e->plain[a], bufs[a]);
        void *b = e->re[a] ? cft__dnnl_buffer(a, dnnl_memory_desc_get_size(&e->md[a])) : NULL;
        used[a] = e->re[a] ? (b ? cft__dnnl_mem(&e->md[a], b) : NULL) : plain[a];
        good = plain[a] && used[a];
    }
    for (int a = 0; good && a < 3; a++)
        if (e->re[a] && a != e->out) {
            dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, plain[a]}, {DNNL_ARG_TO, used[a]}};
            good = ok(dnnl_primitive_execute(e->re[a], st, 2, r));
        }
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, used[0]},
                               {e->wgrad ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS, used[1]},
                               {e->wgrad ? DNNL_ARG_DIFF_DST : DNNL_ARG_DST, used[2]},
                               {DNNL_ARG_SCRATCHPAD, scratch}};
    good = good && ok(dnnl_primitive_execute(e->conv, st, 4, args));
    int o = e->out;
    if (good && e->re[o]) {
        dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, used[o]}, {DNNL_ARG_TO, plain[o]}};
        good = ok(dnnl_primitive_execute(e->re[o], st, 2, r));
    }
    good = good && ok(dnnl_stream_wait(st));
    for (int a = 0; a < 3; a++) {
        if (used[a] && used[a] != plain[a])
            dnnl_memory_destroy(used[a]);
        if (plain[a])
            dnnl_memory_destroy(plain[a]);
    }
    if (scratch)
        dnnl_memory_destroy(scratch);
    return good;
}

bool cft__conv_dnnl(const int64_t *geometry, int dtype, void *x, void *w, void *y) {
    if (!init() || dtype < 0 || dtype > 3)
        return false;
    /* oneDNN's team is cft's thread count (fewer for a small convolution),
     * which its primitives are built for (their work split is fixed
     * then): part of the key */
    const int64_t *g = geometry;
    double work = (double)g[1] * (double)g[3] * (double)g[4]; /* N O I: times out and k */
    for (int i = 0; i < g[0]; i++) {
        int64_t kd = (g[9 + i] - 1) * g[21 + i] + 1, s = g[12 + i] > 0 ? g[12 + i] : 1;
        work *= (double)(g[6 + i] + g[15 + i] + g[18 + i] - kd) / (double)s + 1;
        work *= (double)g[9 + i];
    }
    int nth, before = cft__dnnl_threads_begin(&nth, work);
    int64_t key[CFT_DNNL_NKEY] = {0};
    memcpy(key, geometry, sizeof(int64_t) * 25);
    key[25] = dtype;
    key[26] = nth;
    bool owned, good = false;
    entry *e = (entry *)cft__dnnl_lookup(&cache, key, &owned);
    if (e && e->conv)
        good = run(e, x, w, y);
    cft__dnnl_threads_end(before);
    if (!e)
        return false;
    if (owned)
        destroy(e);
    return good;
}

#else

bool cft__conv_dnnl(const int64_t *geometry, int dtype, void *x, void *w, void *y) {
    (void)geometry, (void)dtype, (void)x, (void)w, (void)y;
    return false;
}

#endif
