/* bench/dist/rpc.c (mpirun -np 2): RPC round trips from worker 0 to worker
 * 1 of an "echo" function (the payload goes both ways) for 64 B, 1 KiB,
 * 64 KiB and 1 MiB, p50 and p99 over 2000 calls (200 for 1 MiB), against a
 * raw MPI ping-pong of the same bytes between the same ranks in the same run
 * (before RPC starts: MPI is then free for the main thread). Then the
 * throughput of rpc_async with 64 calls in flight (64 B). JSON lines;
 * ratio_to_baseline = RPC p50 / ping-pong p50. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "../bench.h"
#include "cft/cft.h"
#include "cft/dist.h"
#include "cft/rpc.h"

static cft_status echo(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = in[0];
    return CFT_OK;
}

static const int64_t sizes[4] = {64, 1024, 65536, 1 << 20};
static int reps(int64_t bytes) {
    return bytes >= (1 << 20) ? 200 : 2000;
}
static void pct(double *t, int n, double *p50, double *p99) {
    qsort(t, (size_t)n, sizeof *t, bench_cmp);
    *p50 = t[n / 2], *p99 = t[(n * 99) / 100];
}

int main(int argc, char **argv) {
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK)
        return 1;
    int rank = cft_dist_rank(cft_dist_world());
    static double t[2000];
    double base50[4], base99[4];
    for (int s = 0; s < 4; s++) { /* the baseline: MPI alone */
        int n = reps(sizes[s]);
        char *buf = calloc(1, (size_t)sizes[s]);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int k = -50; k < n; k++) {
            double t0 = now_ms();
            if (rank == 0) {
                MPI_Send(buf, (int)sizes[s], MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)sizes[s], MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, (int)sizes[s], MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)sizes[s], MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
            if (k >= 0)
                t[k] = (now_ms() - t0) * 1e3;
        }
        pct(t, n, &base50[s], &base99[s]);
        free(buf);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (cft_rpc_init(NULL) != CFT_OK ||
        cft_rpc_register("echo", cft_fn_new(echo, NULL, 1, 1)) != CFT_OK)
        return 1;
    cft_dist_barrier(cft_dist_world());
    if (rank == 0) {
        for (int s = 0; s < 4; s++) {
            int n = reps(sizes[s]);
            cft_array *x = cft_zeros(CFT_F32, (int64_t[]){sizes[s] / 4}, 1);
            x = cft_add_s(x, 1); /* a real buffer */
            for (int k = -50; k < n; k++) {
                cft_array *y[1];
                double t0 = now_ms();
                if (cft_rpc_sync(1, "echo", 1, &x, 1, y) != CFT_OK) {
                    fprintf(stderr, "%s\n", cft_last_error_message());
                    return 1;
                }
                if (k >= 0)
                    t[k] = (now_ms() - t0) * 1e3;
            }
            double p50, p99;
            pct(t, n, &p50, &p99);
            printf("{\"bench\": \"rpc\", \"config\": {\"payload_bytes\": %lld, \"ranks\": 2}, "
                   "\"method\": \"cft_rpc_sync round trip\", \"p50_us\": %.2f, \"p99_us\": %.2f, "
                   "\"baseline\": \"MPI_Send/MPI_Recv ping-pong\", \"baseline_p50_us\": %.2f, "
                   "\"baseline_p99_us\": %.2f, \"ratio_to_baseline\": %.3f, "
                   "\"target_p50_us\": %.2f}\n",
                   (long long)sizes[s], p50, p99, base50[s], base99[s], p50 / base50[s],
                   1.5 * base50[s] + 3);
        }
        cft_array *x = cft_add_s(cft_zeros(CFT_F32, (int64_t[]){16}, 1), 1);
        cft_future *fs[64];
        int total = 0;
        double t0 = now_ms();
        for (int round = 0; round < 200; round++) {
            for (int i = 0; i < 64; i++)
                fs[i] = cft_rpc_async(1, "echo", 1, &x);
            cft_future_wait_all(fs, 64);
            total += 64;
        }
        double ms = now_ms() - t0;
        printf("{\"bench\": \"rpc\", \"config\": {\"payload_bytes\": 64, \"ranks\": 2, "
               "\"in_flight\": 64}, \"method\": \"cft_rpc_async throughput\", "
               "\"calls_per_s\": %.0f, \"us_per_call\": %.2f, \"baseline\": "
               "\"MPI_Send/MPI_Recv ping-pong\", \"baseline_p50_us\": %.2f, "
               "\"ratio_to_baseline\": %.3f}\n",
               total / (ms * 1e-3), ms * 1e3 / total, base50[0], ms * 1e3 / total / base50[0]);
    }
    cft_rpc_shutdown();
    cft_dist_finalize();
    return 0;
}
