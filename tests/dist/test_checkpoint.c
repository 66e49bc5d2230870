// np: 2 4
/* test_checkpoint.c (mpirun, 2 and 4 ranks): sharded checkpoints. Every
 * rank builds the same global arrays and keeps its rows of the sharded
 * ones; after a save, every load (whole; another sharding; a single
 * process; a save by a sub-group of 2 ranks loaded by 1, 3 and 4) must give
 * bitwise the global values. Also: overwriting, the asynchronous save,
 * shards that do not tile, and corrupt, missing or mismatched files.
 *
 * With the argument "kill DIR" (run by the test_checkpoint_killed ctest):
 * save a first checkpoint to DIR, then start a second save and SIGKILL
 * rank 1 while it writes; "verify DIR" (one process, no mpirun) then loads
 * DIR and checks it is the first checkpoint, whole. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cft/cft.h"
#include "cft/checkpoint.h"
#include "cft/dist.h"
#include "check.h"

/* the global arrays, the same on every rank (v: a version, to tell saves apart) */
static cft_tree *global(double v) {
    cft_tree *t = cft_tree_new();
    t = cft_tree_set(
        t, "emb",
        cft_add_s(cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){10, 3}, 2), v));
    t = cft_tree_set(
        t, "w", cft_add_s(cft_random_normal(cft_random_key(2), CFT_F64, (int64_t[]){4, 5}, 2), v));
    t = cft_tree_set(t, "step", cft_scalar(7 + v, CFT_I64));
    t = cft_tree_set(t, "half", cft_astype(cft_arange(v, v + 7, 1, CFT_F32), CFT_BF16));
    t = cft_tree_set(t, "c",
                     cft_complex(cft_full(v, CFT_F32, (int64_t[]){2, 2}, 2),
                                 cft_full(-1, CFT_F32, (int64_t[]){2, 2}, 2)));
    t = cft_tree_set(t, "opt.m", cft_full(v * 3, CFT_F32, (int64_t[]){6}, 1));
    return t;
}

/* rows [lo, hi) of a [rows, ...] array */
static cft_array *rows(cft_array *x, int64_t lo, int64_t hi) {
    int nd = cft_array_ndim(x);
    int64_t start[8] = {lo}, stop[8];
    cft_aval a = cft_array_aval(x);
    memcpy(stop, a.shape, sizeof(int64_t) * (size_t)nd);
    stop[0] = hi;
    return cft_slice(x, start, stop, NULL);
}
static int64_t split(int64_t n, int p, int r) { /* uneven on purpose */
    return n * r / p;
}

/* this rank's part of the global tree: emb and half sharded (p ways), opt.m
 * held whole by the last rank only (as ZeRO state), the rest replicated */
static cft_tree *local(cft_tree *g, int p, int r, cft_shard *sh) {
    cft_tree *t = cft_tree_new();
    t = cft_tree_set(t, "emb", rows(cft_tree_get(g, "emb"), split(10, p, r), split(10, p, r + 1)));
    t = cft_tree_set(t, "half", rows(cft_tree_get(g, "half"), split(7, p, r), split(7, p, r + 1)));
    t = cft_tree_set(t, "w", cft_tree_get(g, "w"));
    t = cft_tree_set(t, "step", cft_tree_get(g, "step"));
    t = cft_tree_set(t, "c", cft_tree_get(g, "c"));
    if (r == p - 1)
        t = cft_tree_set(t, "opt.m", cft_tree_get(g, "opt.m"));
    sh[0] = (cft_shard){"emb", split(10, p, r), 10};
    sh[1] = (cft_shard){"half", split(7, p, r), 7};
    return t;
}

/* every leaf of got equals want's leaf of the same name, bit for bit */
static bool same(const cft_tree *got, const cft_tree *want) {
    if (cft_tree_failed(got)) {
        fprintf(stderr, "%s\n", cft_error_message(cft_tree_error(got)));
        return false;
    }
    for (int i = 0; i < cft_tree_size(got); i++) {
        cft_array *a = cft_tree_at(got, i), *b = cft_tree_get(want, cft_tree_name(got, i));
        cft_aval x = cft_array_aval(a), y = cft_array_aval(b);
        if (x.dtype != y.dtype || x.ndim != y.ndim ||
            memcmp(x.shape, y.shape, sizeof(int64_t) * (size_t)x.ndim))
            return false;
        size_t n = (size_t)cft_array_size(a) * cft_dtype_size(x.dtype);
        char *p = malloc(n + 1), *q = malloc(n + 1);
        cft_copy_to(a, x.dtype, p), cft_copy_to(b, x.dtype, q);
        bool eq = !memcmp(p, q, n);
        free(p), free(q);
        if (!eq)
            return false;
    }
    return true;
}

/* a directory of files, gone */
static void remove_flat(const char *d) {
    const char *names[] = {"metadata.json", "rank0.safetensors", "rank1.safetensors",
                           "rank2.safetensors", "rank3.safetensors"};
    char f[400];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(f, sizeof f, "%s/%s", d, names[i]);
        unlink(f);
    }
    rmdir(d);
}

static int kill_mode(int argc, char **argv) {
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    cft_dist_group *w = cft_dist_world();
    int r = cft_dist_rank(w), p = cft_dist_size(w);
    cft_shard sh[2];
    CHECK_EQ(cft_checkpoint_save(w, argv[2], local(global(1), p, r, sh), sh, 2), CFT_OK);
    /* a bigger second save: rank 1 dies while writing it */
    cft_tree *g2 =
        cft_tree_set(global(2), "big", cft_full(5, CFT_F64, (int64_t[]){4 << 20}, 1)); /* 32 MB */
    cft_tree *t2 = cft_tree_set(local(g2, p, r, sh), "big", cft_tree_get(g2, "big"));
    cft_checkpoint_job *job = cft_checkpoint_save_async(w, argv[2], t2, sh, 2);
    if (r == 1) {
        usleep(2000);
        raise(SIGKILL);
    }
    cft_checkpoint_wait(job); /* never returns: the job is taken down */
    return 1;
}

static int verify_mode(char **argv) {
    cft_init();
    TEST("after a killed save, %s holds the previous checkpoint, whole", argv[2]) {
        cft_tree *t = cft_checkpoint_load(argv[2], NULL, 0);
        CHECK(same(t, global(1)));
        CHECK(cft_failed(cft_tree_get(t, "big")));
    }
    return check_summary();
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "kill"))
        return kill_mode(argc, argv);
    if (argc > 2 && !strcmp(argv[1], "verify"))
        return verify_mode(argv);
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    cft_dist_group *w = cft_dist_world();
    int r = cft_dist_rank(w), p = cft_dist_size(w);
    /* a directory of this run (rank 0's pid, shared) */
    cft_array *id = cft_dist_broadcast(w, cft_scalar(getpid(), CFT_I64), 0);
    char dir[200], dir2[256];
    snprintf(dir, sizeof dir, "%s/cft_ckpt_%lld", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (long long)cft_item(id));
    snprintf(dir2, sizeof dir2, "%s_sub", dir);
    cft_tree *g1 = global(1);
    cft_shard sh[2];

    TEST("rank %d of %d: save, then load whole, resharded and as one process", r, p) {
        CHECK_EQ(cft_checkpoint_save(w, dir, local(g1, p, r, sh), sh, 2), CFT_OK);
        CHECK(same(cft_checkpoint_load(dir, NULL, 0), g1));
        /* another sharding: p + 1 ways, rank r takes part r */
        cft_checkpoint_piece want[3] = {
            {"emb", split(10, p + 1, r), 0}, {"w", 0, -1}, {"opt.m", 0, -1}};
        want[0].rows = split(10, p + 1, r + 1) - split(10, p + 1, r);
        cft_tree *t = cft_checkpoint_load(dir, want, 3);
        CHECK_EQ(cft_tree_size(t), 3);
        CHECK(same(cft_tree_remove(t, "emb"), g1));
        cft_tree *ref = cft_tree_set(
            g1, "emb", rows(cft_tree_get(g1, "emb"), split(10, p + 1, r), split(10, p + 1, r + 1)));
        CHECK(same(t, ref));
        const char **names;
        cft_aval *avals;
        CHECK_EQ(cft_checkpoint_list(dir, &names, &avals), 6);
        for (int i = 0; i < 6; i++)
            if (!strcmp(names[i], "emb"))
                CHECK_EQ(avals[i].shape[0], 10);
        /* the files are ordinary safetensors: rank 0's holds its rows of emb */
        char f[300];
        snprintf(f, sizeof f, "%s/rank0.safetensors", dir);
        cft_tree *raw = cft_load_safetensors(f, NULL, NULL);
        CHECK(!cft_tree_failed(raw));
        CHECK_EQ(cft_array_aval(cft_tree_get(raw, "emb")).shape[0], split(10, p, 1));
    }
    TEST("rank %d: many arrays saved, listed and loaded whole", r) {
        /* parsing the metadata, finding each array's entry in its shard and
         * building the tree were quadratic: 22-37 s for 50,000 arrays (a
         * sanitizer build, 10-20x slower, saves 5,000 within the deadline) */
#ifdef CFT_GC_OFF
        enum { MANY = 5000 };
#else
        enum { MANY = 50000 };
#endif
        const char **nm = cft_alloc(sizeof(char *) * MANY);
        cft_array **xs = cft_alloc(sizeof(cft_array *) * MANY);
        for (int i = 0; i < MANY; i++) {
            char b[32];
            snprintf(b, sizeof b, "layer%d.w", i);
            nm[i] = cft_alloc(strlen(b) + 1);
            strcpy((char *)nm[i], b);
            xs[i] = cft_scalar(i, CFT_F32);
        }
        cft_tree *big = cft_tree_from(nm, xs, MANY);
        CHECK_EQ(cft_tree_size(big), MANY);
        char d3[300];
        snprintf(d3, sizeof d3, "%s_many", dir);
        struct timespec t0, t1, t2;
        CHECK_EQ(cft_checkpoint_save(w, d3, big, NULL, 0), CFT_OK);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK_EQ(cft_checkpoint_list(d3, NULL, NULL), MANY);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        cft_tree *back = cft_checkpoint_load(d3, NULL, 0);
        clock_gettime(CLOCK_MONOTONIC, &t2);
        CHECK_EQ(cft_tree_size(back), MANY);
        char lastname[32];
        snprintf(lastname, sizeof lastname, "layer%d.w", MANY - 1);
        CHECK_EQ(cft_item(cft_tree_get(back, lastname)), MANY - 1);
        printf("  rank %d: %d arrays listed in %.2f s, loaded in %.2f s\n", r, (int)MANY,
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
               (double)(t2.tv_sec - t1.tv_sec) + 1e-9 * (double)(t2.tv_nsec - t1.tv_nsec));
        cft_dist_barrier(w);
        if (r == 0) {
            char cmd[400];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", d3);
            CHECK_EQ(system(cmd), 0);
        }
    }
    TEST("rank %d: a save by 2 ranks loads at 1, 3 and 4 ranks", r) {
        if (p >= 2) {
            int two[2] = {0, 1};
            cft_dist_group *sub = cft_dist_new_group(two, 2);
            if (cft_dist_rank(sub) >= 0)
                CHECK_EQ(cft_checkpoint_save(sub, dir2, local(g1, 2, r, sh), sh, 2), CFT_OK);
            cft_dist_barrier(w);
            for (int q = 1; q <= 4; q++)
                for (int k = 0; k < q; k++) { /* rank r plays part k of q where it can */
                    if (k % p != r)
                        continue;
                    cft_checkpoint_piece want[2] = {
                        {"emb", split(10, q, k), split(10, q, k + 1) - split(10, q, k)},
                        {"half", split(7, q, k), split(7, q, k + 1) - split(7, q, k)}};
                    cft_tree *t = cft_checkpoint_load(dir2, want, 2);
                    CHECK(!cft_tree_failed(t));
                    cft_tree *ref = cft_tree_new();
                    ref = cft_tree_set(ref, "emb",
                                       rows(cft_tree_get(g1, "emb"), want[0].offset,
                                            want[0].offset + want[0].rows));
                    ref = cft_tree_set(ref, "half",
                                       rows(cft_tree_get(g1, "half"), want[1].offset,
                                            want[1].offset + want[1].rows));
                    CHECK_MSG(same(t, ref), "part %d of %d", k, q);
                }
        }
    }
    TEST("rank %d: overwriting, asynchronously; nothing left behind", r) {
        cft_tree *g2 = global(2);
        cft_checkpoint_job *job = cft_checkpoint_save_async(w, dir, local(g2, p, r, sh), sh, 2);
        CHECK(same(cft_checkpoint_load(dir, NULL, 0), g1)); /* not committed yet */
        CHECK_EQ(cft_checkpoint_wait(job), CFT_OK);
        CHECK_EQ(cft_checkpoint_wait(job), CFT_OK);
        CHECK(same(cft_checkpoint_load(dir, NULL, 0), g2));
        char partial[300];
        snprintf(partial, sizeof partial, "%s.partial", dir);
        struct stat sb;
        CHECK(stat(partial, &sb) != 0);
    }
    TEST("rank %d: pieces that do not tile are refused on every rank", r) {
        cft_shard bad[2];
        cft_tree *t = local(g1, p, r, bad);
        bad[0].offset = 0; /* everyone claims rows 0.. */
        cft_status st = cft_checkpoint_save(w, dir, t, bad, 2);
        CHECK(st != CFT_OK);
        CHECK(strstr(cft_last_error_message(), "emb") != NULL);
        CHECK(same(cft_checkpoint_load(dir, NULL, 0), global(2))); /* untouched */
    }
    TEST("rank %d: corrupt, missing and mismatched files are errors naming them", r) {
        cft_dist_barrier(w);
        if (r == 0) {
            char f[300];
            snprintf(f, sizeof f, "%s/rank%d.safetensors", dir2, 1);
            CHECK_EQ(truncate(f, 100), 0);
            cft_tree *t = cft_checkpoint_load(dir2, NULL, 0);
            CHECK(cft_tree_failed(t));
            CHECK(strstr(cft_error_message(cft_tree_error(t)), "rank1.safetensors") != NULL);
            unlink(f);
            t = cft_checkpoint_load(dir2, NULL, 0);
            CHECK(strstr(cft_error_message(cft_tree_error(t)), "rank1.safetensors") != NULL);
            /* rows of emb only in rank 0's file load; a missing name is named */
            cft_tree *ok = cft_checkpoint_load(dir2, &(cft_checkpoint_piece){"emb", 0, 2}, 1);
            CHECK(!cft_tree_failed(ok));
            t = cft_checkpoint_load(dir2, &(cft_checkpoint_piece){"nope", 0, -1}, 1);
            CHECK(strstr(cft_error_message(cft_tree_error(t)), "'nope'") != NULL);
            t = cft_checkpoint_load(dir2, &(cft_checkpoint_piece){"emb", 8, 5}, 1);
            CHECK(cft_tree_failed(t));
            snprintf(f, sizeof f, "%s/metadata.json", dir2);
            FILE *m = fopen(f, "w");
            fputs("{\"format\": \"cft-sharded-checkpoint\", \"version\": 1, \"tensors\": "
                  "[{\"name\": \"a\", \"dtype\": \"F32\", \"shape\": [4], \"pieces\": "
                  "[{\"file\": \"../x\", \"rows\": [0, 4]}]}]}",
                  m);
            fclose(m);
            t = cft_checkpoint_load(dir2, NULL, 0);
            CHECK(strstr(cft_error_message(cft_tree_error(t)), "plain file name") != NULL);
            CHECK(cft_tree_failed(cft_checkpoint_load("/nonexistent/ckpt", NULL, 0)));
            remove_flat(dir), remove_flat(dir2);
        }
    }
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    /* the checkpoints swapped out are removed in the background; finalize
     * waited for that: nothing of <dir>.partial is left */
    TEST("rank %d: no swapped-out checkpoint is left after finalize", r) {
        char part[300];
        snprintf(part, sizeof part, "%s.partial", strrchr(dir, '/') + 1);
        DIR *d = opendir(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        int left = 0;
        for (struct dirent *e; d && (e = readdir(d));)
            left += !strncmp(e->d_name, part, strlen(part));
        if (d)
            closedir(d);
        CHECK_EQ(left, 0);
    }
    return check_summary();
}
