/* bench/dist/dist_allreduce.c (mpirun -np 2): cft_dist_all_reduce's bus
 * bandwidth from 4 KB to 64 MB against MPI_Allreduce of the same buffer in
 * the same run, for the form that returns a new array and for the donated
 * (in-place) form, which is what torch.distributed.all_reduce does (the baseline is called from the
 * main thread while cft's communication thread is idle). busbw = bytes / time * 2 (p - 1) / p, the
 * nccl-tests convention. JSON lines; ratio_to_baseline = cft time / MPI
 * time (medians). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "../bench.h"
#include "cft/cft.h"
#include "cft/dist.h"

static cft_dist_group *w;
static cft_array *x, *xd;
static float *buf, *out;
static int n;

static void with_cft(void *arg) {
    (void)arg;
    cft_array *y = cft_dist_all_reduce(w, x, CFT_DIST_SUM);
    if (cft_failed(y)) {
        fprintf(stderr, "%s\n", cft_error_message(y));
        exit(1);
    }
}
static void with_cft_donated(void *arg) {
    (void)arg;
    xd = cft_dist_all_reduce_donated(w, xd, CFT_DIST_SUM); /* zeros: stays finite */
    if (cft_failed(xd)) {
        fprintf(stderr, "%s\n", cft_error_message(xd));
        exit(1);
    }
}
static void with_mpi(void *arg) {
    (void)arg;
    MPI_Allreduce(buf, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK)
        return 1;
    w = cft_dist_world();
    int rank = cft_dist_rank(w), p = cft_dist_size(w);
    for (int64_t bytes = 4096; bytes <= (64 << 20); bytes *= 4) {
        n = (int)(bytes / 4);
        x = cft_full(1, CFT_F32, (int64_t[]){n}, 1);
        x = cft_add_s(x, rank); /* a real buffer, not a broadcast view */
        xd = cft_mul_s(x, 0.0);
        buf = malloc((size_t)bytes), out = malloc((size_t)bytes);
        for (int i = 0; i < n; i++)
            buf[i] = 1.0f + (float)rank;
        double mc, nc, mm, nm;
        /* warm up until results reuse collected memory (the steady state of
         * a training loop; fresh pages would cost page faults),
         * then a fixed count on every rank, interleaved */
        int64_t warm = (int64_t)(96 << 20) / bytes; /* past the GC's first heap */
        for (int64_t k = 0; k < (warm > 40 ? warm : 40); k++)
            with_mpi(NULL), with_cft(NULL), with_cft_donated(NULL);
        double t[3][15];
        for (int k = 0; k < 15; k++) {
            double t0 = now_ms();
            with_mpi(NULL);
            t[0][k] = now_ms() - t0;
            t0 = now_ms();
            with_cft(NULL);
            t[1][k] = now_ms() - t0;
            t0 = now_ms();
            with_cft_donated(NULL);
            t[2][k] = now_ms() - t0;
        }
        bench_stats(t[0], 15, &mm, &nm);
        double busm = (double)bytes / (mm * 1e-3) * 2 * (p - 1) / p / 1e9;
        for (int m = 1; m <= 2; m++) {
            bench_stats(t[m], 15, &mc, &nc);
            double bus = (double)bytes / (mc * 1e-3) * 2 * (p - 1) / p / 1e9;
            if (rank == 0)
                printf("{\"bench\": \"dist_allreduce\", \"config\": {\"bytes\": %lld, "
                       "\"ranks\": %d}, \"method\": \"%s\", \"median_ms\": %.4f, "
                       "\"min_ms\": %.4f, \"threads\": 1, \"busbw_gbs\": %.2f, \"baseline\": "
                       "\"MPI_Allreduce\", \"baseline_median_ms\": %.4f, "
                       "\"baseline_busbw_gbs\": %.2f, \"ratio_to_baseline\": %.3f}\n",
                       (long long)bytes, p,
                       m == 1 ? "cft_dist_all_reduce" : "cft_dist_all_reduce_donated", mc, nc, bus,
                       mm, busm, mc / mm);
        }
        free(buf), free(out);
    }
    cft_dist_finalize();
    return 0;
}
