/* test_qgemm.c: cft__qgemm, the integer product under the int8 linear and
 * convolution primitives (prims/qlinear.c), on both of its oneDNN paths:
 * the matmul primitive that takes products of up to 64 outputs
 * (qmatmul_dnnl.c) and the dnnl_gemm_u8s8s32 call that takes the rest (and
 * what the primitive declines). Each must give the exact int32 sums of a
 * plain C loop, (xq - ao) wq^T, over shapes around the path's limit (64
 * and 65 outputs), one row, one column, reductions not a multiple of 4,
 * weight rows padded past K (ldw > K, as the packed words are), zero
 * points 0, 128 and 255, and u8 values up to 255 where oneDNN's sums are
 * exact for them (VNNI, AMX: cft__qgemm_exact_u8), below 128 elsewhere;
 * and from four threads at once, each call the serial bits. Without
 * oneDNN both paths are the C loop. Also dot_qstatic / dot_qint of few
 * outputs, whose rows qstatic.c rounds, multiplies and scales by blocks in
 * one parallel region: the bits of its three passes. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "prims/qlinear.h"

typedef struct {
    int64_t M, N, K, ldw;
    int32_t ao;
} shape;

static const shape shapes[] = {
    {256, 10, 288, 288, 3}, /* the digits CNN's classifier */
    {297, 10, 128, 128, 0}, /* the digits MLP's last layer at its test rows */
    {7, 64, 33, 36, 200},   /* 64 outputs: the primitive's last; rows padded */
    {7, 65, 33, 36, 200},   /* 65: the GEMM call */
    {1, 1, 1, 4, 255},      /* one of each */
    {3, 2, 513, 516, 128},  /* a long reduction */
    {40, 48, 7, 8, 17},     /* a short one */
};
enum { NSHAPES = sizeof shapes / sizeof shapes[0] };

typedef struct {
    const shape *s;
    uint8_t *x;
    int8_t *w;
    int32_t *want;
    int bad;
} job;

static void make(job *j, const shape *s, unsigned seed, int xmax) {
    j->s = s;
    j->x = malloc((size_t)(s->M * s->K));
    j->w = malloc((size_t)(s->N * s->ldw));
    j->want = malloc(sizeof(int32_t) * (size_t)(s->M * s->N));
    j->bad = 0;
    srand(seed);
    for (int64_t i = 0; i < s->M * s->K; i++)
        j->x[i] = (uint8_t)(rand() % (xmax + 1));
    for (int64_t i = 0; i < s->N * s->ldw; i++) /* the padding past K too: never read */
        j->w[i] = (int8_t)(rand() % 255 - 127);
    for (int64_t m = 0; m < s->M; m++)
        for (int64_t n = 0; n < s->N; n++) {
            int64_t a = 0;
            for (int64_t k = 0; k < s->K; k++)
                a += ((int64_t)j->x[m * s->K + k] - s->ao) * j->w[n * s->ldw + k];
            j->want[m * s->N + n] = (int32_t)a;
        }
}

static int64_t mismatches(const job *j, const int32_t *acc) {
    int64_t bad = 0;
    for (int64_t i = 0; i < j->s->M * j->s->N; i++)
        bad += acc[i] != j->want[i];
    return bad;
}

static int32_t *run(const job *j) {
    const shape *s = j->s;
    int32_t *acc = malloc(sizeof(int32_t) * (size_t)(s->M * s->N));
    memset(acc, 0x5a, sizeof(int32_t) * (size_t)(s->M * s->N));
    cft__qgemm(s->M, s->N, s->K, j->x, s->ao, j->w, s->ldw, acc);
    return acc;
}

static void *worker(void *arg) {
    job *j = arg;
    for (int r = 0; r < 20; r++) {
        int32_t *acc = run(j);
        j->bad += mismatches(j, acc) != 0;
        free(acc);
    }
    return NULL;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    int xmax = cft__qgemm_exact_u8() ? 255 : 127;
    printf("u8 values up to %d (8-bit sums exact on oneDNN here: %s)\n", xmax,
           xmax == 255 ? "yes" : "no");

    TEST("cft__qgemm's two paths (oneDNN's matmul primitive up to 64 outputs, its GEMM call "
         "beyond) give a C loop's exact sums") {
        for (int i = 0; i < NSHAPES; i++)
            for (int on = 0; on < 2; on++) {
                job j;
                make(&j, &shapes[i], 7 + (unsigned)i, xmax);
                cft__qmatmul_dnnl_on = on;
                int32_t *acc = run(&j);
                CHECK_MSG(mismatches(&j, acc) == 0,
                          "shape %d (%lldx%lld by %lld, ao %d), matmul path %s: %lld sums differ",
                          i, (long long)j.s->M, (long long)j.s->K, (long long)j.s->N, j.s->ao,
                          on ? "on" : "off", (long long)mismatches(&j, acc));
                free(acc), free(j.x), free(j.w), free(j.want);
            }
        cft__qmatmul_dnnl_on = true;
    }

    TEST("from 4 threads at once (one primitive per geometry, shared): each call the exact sums") {
        for (int i = 0; i < 3; i += 2) {
            job jobs[4];
            pthread_t th[4];
            for (int t = 0; t < 4; t++) {
                make(&jobs[t], &shapes[i], 100 + (unsigned)t, xmax);
                pthread_create(&th[t], NULL, worker, &jobs[t]);
            }
            for (int t = 0; t < 4; t++) {
                pthread_join(th[t], NULL);
                CHECK_EQ(jobs[t].bad, 0);
                free(jobs[t].x), free(jobs[t].w), free(jobs[t].want);
            }
        }
    }
    TEST("dot_qint / dot_qstatic of few outputs in one region (each thread's rows rounded, "
         "multiplied and scaled: qstatic.c's blocks) give the three passes' bits, NaN rows "
         "included") {
        cft_array *x = cft_mul_s(
            cft_random_uniform(cft_random_key(3), CFT_F32, (int64_t[]){256, 288}, 2, 0, 1), 200);
        static float xv[256 * 288];
        cft_copy_to(x, CFT_F32, xv);
        xv[5 * 288 + 7] = NAN, xv[200 * 288] = NAN; /* rows 5 and 200 */
        x = cft_from_data(xv, CFT_F32, (int64_t[]){256, 288}, 2);
        cft_array *w = cft_random_normal(cft_random_key(4), CFT_F32, (int64_t[]){10, 288}, 2);
        cft_array *ws = cft_mul_s(cft_max(cft_abs(w), (int[]){1}, 1, false), 1.0 / 127);
        cft_array *words = cft__qstatic_quantize(w, ws, -127, 127);
        cft_array *xs = cft_scalar(0.8, CFT_F32), *zp = cft_scalar(7, CFT_F32);
        int64_t xhi = xmax;
        for (int grid = 0; grid < 2; grid++) {
            cft_array *xg = grid ? cft_rint(cft_mul_s(x, 1.0 / 0.8)) : x;
            cft__qmatmul_dnnl_on = false; /* the three passes on the GEMM call */
            cft_array *want = cft__qdot_bind(xg, words, ws, xs, zp, 288, 0, xhi, grid != 0);
            cft__qmatmul_dnnl_on = true;
            cft_array *got = cft__qdot_bind(xg, words, ws, xs, zp, 288, 0, xhi, grid != 0);
            CHECK_ARRAY_CLOSE(got, want, 0, 0);
            CHECK(isnan(cft_item(cft_sum(cft_index(got, 5), NULL, 0, false))));
            CHECK(isnan(cft_item(cft_sum(cft_index(got, 200), NULL, 0, false))));
            CHECK(!isnan(cft_item(cft_sum(cft_index(got, 6), NULL, 0, false))));
        }
    }
    return check_summary();
}
