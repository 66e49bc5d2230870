/* bench/onednn/conv.c (built when CMake finds oneDNN, Debian's
 * libdnnl-dev): cft's convolution (im2col + GEMM, conv_general_dilated)
 * against oneDNN's, what PyTorch runs on CPU, at the shapes of the CNN
 * examples (digits 1x8x8, 3x3, 1 -> 8 channels, B = 64, 256, 1024) and one
 * larger layer (32 -> 32 channels, 16x16, padding 1, B = 64), forward and
 * the weight gradient, one thread. oneDNN runs twice: on cft's layouts
 * (nchw / oihw, no reorders) and on the layouts it prefers ("any";
 * once without the reorders to and from cft's layouts, in its favour, and
 * once with them, which is what cft would run). JSON lines;
 * ratio_to_baseline = cft's time / oneDNN's best time with reorders. */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "../bench.h"
#include "cft/cft.h"

typedef struct {
    int64_t n, c, h, w, o, k, pad;
} shape;

#define CHECK_DNNL(x)                                                                              \
    do {                                                                                           \
        dnnl_status_t s_ = (x);                                                                    \
        if (s_ != dnnl_success) {                                                                  \
            fprintf(stderr, "oneDNN: %s: status %d\n", #x, (int)s_);                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct {
    dnnl_primitive_t prim;
    dnnl_stream_t st;
    dnnl_exec_arg_t args[3];
    /* with reorders: from cft's layouts (inputs) and back (the output) */
    int nre;
    dnnl_primitive_t re[3];
    dnnl_exec_arg_t re_args[3][2];
    bool re_after[3];
} dnnl_job;

static void run_dnnl(void *p) {
    dnnl_job *j = p;
    for (int r = 0; r < j->nre; r++)
        if (!j->re_after[r])
            CHECK_DNNL(dnnl_primitive_execute(j->re[r], j->st, 2, j->re_args[r]));
    CHECK_DNNL(dnnl_primitive_execute(j->prim, j->st, 3, j->args));
    for (int r = 0; r < j->nre; r++)
        if (j->re_after[r])
            CHECK_DNNL(dnnl_primitive_execute(j->re[r], j->st, 2, j->re_args[r]));
    CHECK_DNNL(dnnl_stream_wait(j->st));
}

static dnnl_memory_t mem(dnnl_engine_t eng, const dnnl_memory_desc_t *md) {
    dnnl_memory_t m;
    CHECK_DNNL(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
    void *h;
    CHECK_DNNL(dnnl_memory_get_data_handle(m, &h));
    size_t n = dnnl_memory_desc_get_size(md);
    for (size_t i = 0; i < n / 4; i++)
        ((float *)h)[i] = 0.01f * (float)(i % 17);
    return m;
}

/* oneDNN's forward (bwd: weight gradient) on plain or preferred layouts
 * (any), the latter with the reorders from and to plain ones (reorders) */
static void dnnl_time(dnnl_engine_t eng, dnnl_stream_t st, shape s, bool bwd, bool any,
                      bool reorders, double *med, double *mn) {
    int64_t oh = s.h + 2 * s.pad - s.k + 1, ow = s.w + 2 * s.pad - s.k + 1;
    dnnl_dims_t sd = {s.n, s.c, s.h, s.w}, wd = {s.o, s.c, s.k, s.k}, dd = {s.n, s.o, oh, ow};
    dnnl_dims_t strides = {1, 1}, pad = {s.pad, s.pad};
    dnnl_memory_desc_t smd, wmd, dmd;
    CHECK_DNNL(
        dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_nchw));
    CHECK_DNNL(
        dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_oihw));
    CHECK_DNNL(
        dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_nchw));
    dnnl_convolution_desc_t fd;
    CHECK_DNNL(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                  dnnl_convolution_direct, &smd, &wmd, NULL, &dmd,
                                                  strides, pad, pad));
    dnnl_primitive_desc_t fpd, pd;
    CHECK_DNNL(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
    if (bwd) {
        dnnl_convolution_desc_t bd;
        CHECK_DNNL(dnnl_convolution_backward_weights_desc_init(
            &bd, dnnl_convolution_direct, &smd, &wmd, NULL, &dmd, strides, pad, pad));
        CHECK_DNNL(dnnl_primitive_desc_create(&pd, &bd, NULL, eng, fpd));
    } else
        pd = fpd;
    const dnnl_memory_desc_t *qs = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *qw = dnnl_primitive_desc_query_md(
        pd, bwd ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *qd =
        dnnl_primitive_desc_query_md(pd, bwd ? dnnl_query_diff_dst_md : dnnl_query_dst_md, 0);
    static dnnl_job j;
    j.st = st, j.nre = 0;
    CHECK_DNNL(dnnl_primitive_create(&j.prim, pd));
    const dnnl_memory_desc_t *q[3] = {qs, qw, qd};
    int tags[3] = {dnnl_nchw, dnnl_oihw, dnnl_nchw};
    const int64_t *dims[3] = {sd, wd, dd};
    int ids[3] = {DNNL_ARG_SRC, bwd ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS,
                  bwd ? DNNL_ARG_DIFF_DST : DNNL_ARG_DST};
    for (int a = 0; a < 3; a++) {
        j.args[a] = (dnnl_exec_arg_t){ids[a], mem(eng, q[a])};
        dnnl_memory_desc_t plain;
        CHECK_DNNL(dnnl_memory_desc_init_by_tag(&plain, 4, dims[a], dnnl_f32, tags[a]));
        if (!reorders || dnnl_memory_desc_equal(&plain, q[a]))
            continue;
        bool out = bwd ? a == 1 : a == 2; /* the output goes back to cft's layout */
        dnnl_primitive_desc_t rpd;
        CHECK_DNNL(dnnl_reorder_primitive_desc_create(&rpd, out ? q[a] : &plain, eng,
                                                      out ? &plain : q[a], eng, NULL));
        int r = j.nre++;
        CHECK_DNNL(dnnl_primitive_create(&j.re[r], rpd));
        dnnl_memory_t pm = mem(eng, &plain);
        j.re_args[r][0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, out ? j.args[a].memory : pm};
        j.re_args[r][1] = (dnnl_exec_arg_t){DNNL_ARG_TO, out ? pm : j.args[a].memory};
        j.re_after[r] = out;
    }
    timeit(run_dnnl, &j, med, mn);
}

/* cft: the forward, or the weight gradient as the pullback of w -> conv(x, w) */
typedef struct {
    cft_array *x, *w, *dy;
    int64_t pad;
    cft_fn *pb;
} cft_job;
static cft_job cj;
static cft_status conv_w(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_conv2d(cj.x, in[0], NULL, (int64_t[]){cj.pad, cj.pad}, NULL, 1);
    return CFT_OK;
}
static void run_cft_fwd(void *p) {
    (void)p;
    cft_conv2d(cj.x, cj.w, NULL, (int64_t[]){cj.pad, cj.pad}, NULL, 1);
}
static void run_cft_bwd(void *p) {
    (void)p;
    cft_array *g[1];
    cft_fn_call(cj.pb, &cj.dy, g);
}

int main(int argc, char **argv) {
    bench_threads(argc, argv);
    omp_set_num_threads(bench_nthreads);
    dnnl_engine_t eng;
    dnnl_stream_t st;
    CHECK_DNNL(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK_DNNL(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
    shape shapes[] = {{64, 1, 8, 8, 8, 3, 0},
                      {256, 1, 8, 8, 8, 3, 0},
                      {1024, 1, 8, 8, 8, 3, 0},
                      {64, 32, 16, 16, 32, 3, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int bwd = 0; bwd < 2; bwd++) {
            shape s = shapes[i];
            int64_t oh = s.h + 2 * s.pad - s.k + 1;
            cj.x =
                cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){s.n, s.c, s.h, s.w}, 4);
            cj.w =
                cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){s.o, s.c, s.k, s.k}, 4);
            cj.dy = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){s.n, s.o, oh, oh}, 4);
            cj.pad = s.pad;
            cft_array *y[1];
            cft_vjp(cft_fn_new(conv_w, NULL, 1, 1), &cj.w, y, &cj.pb);
            double cm, cmn, pm, pmn, am, amn, rm, rmn;
            timeit(bwd ? run_cft_bwd : run_cft_fwd, NULL, &cm, &cmn);
            dnnl_time(eng, st, s, bwd, false, false, &pm, &pmn);
            dnnl_time(eng, st, s, bwd, true, false, &am, &amn);
            dnnl_time(eng, st, s, bwd, true, true, &rm, &rmn);
            double best = pm < rm ? pm : rm; /* what cft could use: with the reorders */
            printf("{\"bench\": \"conv\", \"config\": {\"N\": %lld, \"C\": %lld, \"HW\": %lld, "
                   "\"O\": %lld, \"k\": %lld, \"pad\": %lld, \"pass\": \"%s\"}, \"method\": "
                   "\"cft_conv\", \"median_ms\": %.4f, \"threads\": %d, \"onednn_plain_ms\": "
                   "%.4f, \"onednn_any_ms\": %.4f, \"onednn_any_reorders_ms\": %.4f, "
                   "\"baseline\": \"onednn_best_with_reorders\", \"ratio_to_baseline\": %.2f}\n",
                   (long long)s.n, (long long)s.c, (long long)s.h, (long long)s.o, (long long)s.k,
                   (long long)s.pad, bwd ? "weight_grad" : "fwd", cm, bench_nthreads, pm, am, rm,
                   cm / best);
            fflush(stdout);
        }
    return 0;
}
