/* bench/dist/checkpoint.c (mpirun -np 2): sharded checkpoint save and
 * load throughput against writing and reading the same bytes with plain
 * write/read calls in the same run. Each rank holds its rows of a sharded
 * f32 array (64 MB per rank) and a replicated 4 MB one (written once). The
 * save is timed from a barrier to the end of the collective save (files
 * fsynced, metadata written, directory swapped); the baseline writes each
 * rank's bytes to its own file and fsyncs, between the same barriers.
 * Loads: each rank reads its rows back (page cache warm for both). Two
 * untimed rounds first, then medians of 9, the two methods in turn.
 * JSON lines; ratio_to_baseline = baseline bandwidth / cft bandwidth (time
 * ratio; >= 0.8x bandwidth means a ratio <= 1.25). */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench.h"
#include "cft/cft.h"
#include "cft/checkpoint.h"
#include "cft/dist.h"

#define REPS 9
#define WARM 2 /* untimed rounds first: the disk settles from the last run */
static double median(double *t) {
    double s[REPS];
    memcpy(s, t, sizeof s);
    qsort(s, REPS, sizeof *s, bench_cmp);
    return s[REPS / 2];
}

int main(int argc, char **argv) {
    cft_init();
    if (cft_dist_init(&argc, &argv) != CFT_OK)
        return 1;
    cft_dist_group *w = cft_dist_world();
    int r = cft_dist_rank(w), p = cft_dist_size(w);
    const int64_t cols = 1024, rows_per = (64 << 20) / (cols * 4), R = rows_per * p;
    cft_array *mine = cft_add_s(cft_zeros(CFT_F32, (int64_t[]){rows_per, cols}, 2), r + 1);
    cft_array *rep = cft_add_s(cft_zeros(CFT_F32, (int64_t[]){1 << 20}, 1), 3);
    cft_tree *t = cft_tree_set(cft_tree_set(cft_tree_new(), "emb", mine), "w", rep);
    cft_shard sh = {"emb", rows_per * r, R};
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    cft_array *id = cft_dist_broadcast(w, cft_scalar(getpid(), CFT_I64), 0);
    char dir[300], plain[300];
    snprintf(dir, sizeof dir, "%s/cft_bench_ckpt_%lld", base, (long long)cft_item(id));
    snprintf(plain, sizeof plain, "%s/cft_bench_plain_%lld_%d", base, (long long)cft_item(id), r);
    size_t bytes = (size_t)rows_per * (size_t)cols * 4 + (r == 0 ? (size_t)4 << 20 : 0);
    char *buf = malloc(bytes);
    cft_copy_to(mine, CFT_F32, buf);
    double ts[REPS + WARM], tb[REPS + WARM], ls[REPS + WARM], lb[REPS + WARM];
    for (int k = 0; k < REPS + WARM; k++) {
        for (int m = 0; m < 2; m++) { /* the two in turn, each first every other time */
            bool cft_now = (m == 0) == (k % 2 == 0);
            cft_dist_barrier(w);
            double t0 = now_ms();
            if (cft_now) {
                if (cft_checkpoint_save(w, dir, t, &sh, 1) != CFT_OK) {
                    fprintf(stderr, "%s\n", cft_last_error_message());
                    return 1;
                }
            } else {
                int fd = open(plain, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                for (size_t at = 0; at < bytes;) {
                    ssize_t n = write(fd, buf + at, bytes - at);
                    if (n <= 0)
                        return 1;
                    at += (size_t)n;
                }
                fsync(fd);
                close(fd);
            }
            cft_dist_barrier(w);
            (cft_now ? ts : tb)[k] = now_ms() - t0;
        }
        double t0;
        int fd;
        /* loads: my rows (and the replicated array on rank 0) */
        t0 = now_ms();
        cft_checkpoint_piece want[2] = {{"emb", rows_per * r, rows_per}, {"w", 0, -1}};
        cft_tree *back = cft_checkpoint_load(dir, want, r == 0 ? 2 : 1);
        if (cft_tree_failed(back))
            return 1;
        ls[k] = now_ms() - t0;
        t0 = now_ms();
        fd = open(plain, O_RDONLY);
        for (size_t at = 0; at < bytes;) {
            ssize_t n = read(fd, buf + at, bytes - at);
            if (n <= 0)
                return 1;
            at += (size_t)n;
        }
        close(fd);
        lb[k] = now_ms() - t0;
    }
    if (r == 0) {
        double s = median(ts + WARM), b = median(tb + WARM), l = median(ls + WARM),
               bl = median(lb + WARM);
        double mb = (double)bytes / (1 << 20);
        printf("{\"bench\": \"checkpoint\", \"config\": {\"ranks\": %d, \"mb_per_rank\": %.0f}, "
               "\"method\": \"cft_checkpoint_save\", \"median_ms\": %.1f, \"mb_per_s\": %.0f, "
               "\"baseline\": \"write + fsync of the same bytes\", \"baseline_median_ms\": %.1f, "
               "\"ratio_to_baseline\": %.3f}\n",
               p, mb, s, mb / (s * 1e-3), b, s / b);
        printf("{\"bench\": \"checkpoint\", \"config\": {\"ranks\": %d, \"mb_per_rank\": %.0f}, "
               "\"method\": \"cft_checkpoint_load (own rows)\", \"median_ms\": %.1f, "
               "\"mb_per_s\": %.0f, \"baseline\": \"read of the same bytes\", "
               "\"baseline_median_ms\": %.1f, \"ratio_to_baseline\": %.3f}\n",
               p, mb, l, mb / (l * 1e-3), bl, l / bl);
    }
    unlink(plain);
    cft_dist_barrier(w);
    if (r == 0) {
        char f[400];
        const char *names[] = {"metadata.json", "rank0.safetensors", "rank1.safetensors",
                               "rank2.safetensors", "rank3.safetensors"};
        for (int i = 0; i < 5; i++) {
            snprintf(f, sizeof f, "%s/%s", dir, names[i]);
            unlink(f);
        }
        rmdir(dir);
    }
    free(buf);
    cft_dist_finalize();
    return 0;
}
