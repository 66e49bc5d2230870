/* test_cache_blob.c: the private cache's blobs (core/cache.c), what the
 * CUDA backend keeps its CUBINs in. A blob comes back only as it was
 * written: a changed, truncated or symlinked entry, or one whose record is
 * gone, reads as absent (and the next put replaces it); names that could
 * leave the directory are refused; four threads putting and getting the
 * same names at once never see a partial blob. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "core/cache.h"

static char dir[256];

static void path_of(const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/%s", dir, name);
}

static bool blob_is(const char *name, const void *want, size_t wn) {
    size_t n = 0;
    void *b = cft__cache_get(name, &n);
    bool ok = b && n == wn && !memcmp(b, want, wn);
    free(b);
    return ok;
}

static void *hammer(void *arg) {
    long id = (long)arg;
    char big[20000];
    for (int r = 0; r < 50; r++) {
        memset(big, 'a' + (int)((id + r) % 3), sizeof big);
        cft__cache_put("shared.bin", big, sizeof big);
        size_t n = 0;
        char *b = cft__cache_get("shared.bin", &n);
        if (b) { /* whole, and one writer's bytes throughout */
            bool whole = n == sizeof big;
            for (size_t i = 1; i < n && whole; i++)
                whole = b[i] == b[0];
            free(b);
            if (!whole)
                return (void *)1;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    snprintf(dir, sizeof dir, "/tmp/cft-blob-test-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    setenv("CFT_CACHE_DIR", dir, 1); /* read once, at the first use */
    check_init(argc, argv);
    const char msg[] = "a cubin's bytes \x00\x7f\xff";
    TEST("a blob put comes back whole; an absent one is NULL") {
        CHECK_EQ(cft__cache_put("k1.sm_90.cubin", msg, sizeof msg), 0);
        CHECK(blob_is("k1.sm_90.cubin", msg, sizeof msg));
        size_t n = 7;
        CHECK(cft__cache_get("nothing.here", &n) == NULL);
        struct stat st;
        char p[512];
        path_of("k1.sm_90.cubin", p, sizeof p);
        CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
    }
    TEST("a changed, truncated or unrecorded entry reads as absent; a new put replaces it") {
        char p[512], s[600];
        path_of("k1.sm_90.cubin", p, sizeof p);
        snprintf(s, sizeof s, "%s.sum", p);
        FILE *f = fopen(p, "r+b");
        CHECK(f != NULL);
        if (f) {
            fputc('X', f);
            fclose(f);
        }
        CHECK(!blob_is("k1.sm_90.cubin", msg, sizeof msg));
        size_t n;
        CHECK(cft__cache_get("k1.sm_90.cubin", &n) == NULL);
        CHECK_EQ(cft__cache_put("k1.sm_90.cubin", msg, sizeof msg), 0);
        CHECK(blob_is("k1.sm_90.cubin", msg, sizeof msg));
        CHECK_EQ(truncate(p, 5), 0);
        CHECK(cft__cache_get("k1.sm_90.cubin", &n) == NULL);
        CHECK_EQ(cft__cache_put("k1.sm_90.cubin", msg, sizeof msg), 0);
        CHECK_EQ(unlink(s), 0);
        CHECK(cft__cache_get("k1.sm_90.cubin", &n) == NULL);
    }
    TEST("an entry that is a symlink is never read") {
        char p[512], s[600], target[512];
        CHECK_EQ(cft__cache_put("real.bin", msg, sizeof msg), 0);
        CHECK_EQ(cft__cache_put("link.bin", msg, sizeof msg), 0);
        path_of("link.bin", p, sizeof p);
        path_of("real.bin", target, sizeof target);
        snprintf(s, sizeof s, "%s.sum", p);
        CHECK_EQ(unlink(p), 0);
        CHECK_EQ(symlink(target, p), 0);
        size_t n;
        CHECK(cft__cache_get("link.bin", &n) == NULL);
    }
    TEST("names that could leave the directory are refused") {
        const char *bad[] = {"../x", "a/b", "", ".hidden", "sp ace", "semi;colon"};
        for (int i = 0; i < 6; i++) {
            size_t n;
            CHECK_MSG(cft__cache_put(bad[i], msg, sizeof msg) == -1, "put \"%s\"", bad[i]);
            CHECK_MSG(cft__cache_get(bad[i], &n) == NULL, "get \"%s\"", bad[i]);
        }
    }
    TEST("four threads putting and getting one name never see a partial blob") {
        pthread_t t[4];
        for (long i = 0; i < 4; i++)
            pthread_create(&t[i], NULL, hammer, (void *)i);
        for (int i = 0; i < 4; i++) {
            void *r;
            pthread_join(t[i], &r);
            CHECK(r == NULL);
        }
    }
    /* leave nothing behind */
    char p[512];
    const char *names[] = {"k1.sm_90.cubin", "real.bin", "link.bin", "shared.bin"};
    for (int i = 0; i < 4; i++) {
        path_of(names[i], p, sizeof p);
        unlink(p);
        strcat(p, ".sum");
        unlink(p);
    }
    rmdir(dir);
    return check_summary();
}
