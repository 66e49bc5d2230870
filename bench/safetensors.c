/* bench/safetensors.c: loading safetensors files, against the baseline of
 * reading the same file into one buffer with read() in the same process
 * (what a minimal reader does before it views the bytes as arrays). Two
 * files: 64 f32 tensors of 1 MiB each plus 4 of 32 MiB (192 MiB of data),
 * and a header-heavy one (200000 tiny tensors, a 16.7 MB header) whose
 * peak-memory growth (on stderr) shows what parsing takes beside the
 * header. The baseline's buffer is reused between calls (its best case).
 * Prints JSON lines like the other benchmarks. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cft/cft.h"

static const char *path;

static void load(void *arg) {
    (void)arg;
    cft_tree *t = cft_load_safetensors(path, NULL, NULL);
    if (cft_tree_failed(t)) {
        fprintf(stderr, "load failed: %s\n", cft_error_message(cft_tree_error(t)));
        exit(1);
    }
}

static char *rbuf; /* the baseline's buffer, reused: its best case */
static size_t rcap;

static void read_all(void *arg) {
    (void)arg;
    int fd = open(path, O_RDONLY);
    off_t n = lseek(fd, 0, SEEK_END);
    if ((size_t)n > rcap)
        rbuf = realloc(rbuf, (size_t)n), rcap = (size_t)n;
    char *buf = rbuf;
    size_t at = 0;
    while (at < (size_t)n) {
        ssize_t r = pread(fd, buf + at, (size_t)n - at, (off_t)at);
        if (r <= 0)
            break;
        at += (size_t)r;
    }
    close(fd);
    volatile char sink = buf[n / 2];
    (void)sink;
}

static long max_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void report(const char *config, long header_bytes, double data_mb) {
    double mc, nc, mr, nr;
    timeit(read_all, NULL, &mr, &nr);
    timeit(load, NULL, &mc, &nc);
    printf(
        "{\"bench\": \"safetensors_load\", \"config\": {\"file\": \"%s\", \"header_bytes\": %ld, "
        "\"data_mib\": %.0f}, \"method\": \"cft_load_safetensors\", \"median_ms\": %.3f, "
        "\"min_ms\": %.3f, \"threads\": 1, \"baseline\": \"read() of the whole file into a reused "
        "buffer\", "
        "\"baseline_median_ms\": %.3f, \"ratio_to_baseline\": %.3f, \"peak_rss_mib\": %.1f}\n",
        config, header_bytes, data_mb, mc, nc, mr, mc / mr, (double)max_rss_kb() / 1024);
}

/* peak RSS (KiB) of a child that loads `file` (NULL: only starts cft) */
static long child_rss(const char *file, const char *self) {
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "--load", file ? file : "", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru); /* the largest child so far: run the smaller first */
    return ru.ru_maxrss;
}

int main(int argc, char **argv) {
    cft_init();
    if (argc > 2 && !strcmp(argv[1], "--load")) { /* the child of child_rss */
        if (argv[2][0]) {
            path = argv[2];
            load(NULL);
        }
        return 0;
    }
    char self[512];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = 0;
    char tmpl[] = "/tmp/cft-bench-st-XXXXXX";
    if (!mkdtemp(tmpl))
        return 1;
    char p1[128], p2[128];
    snprintf(p1, sizeof p1, "%s/weights.safetensors", tmpl);
    snprintf(p2, sizeof p2, "%s/many.safetensors", tmpl);
    /* many tiny tensors: the header dominates */
    int n = 200000;
    const char **names = malloc(sizeof(char *) * (size_t)n);
    cft_array **xs = malloc(sizeof(cft_array *) * (size_t)n);
    cft_array *one = cft_scalar(1, CFT_F32);
    for (int i = 0; i < n; i++) {
        char *s = malloc(32);
        snprintf(s, 32, "model.block%06d.scale", i);
        names[i] = s, xs[i] = one;
    }
    cft_tree *t = cft_tree_from(names, xs, n);
    if (cft_save_safetensors(p2, t, NULL, 0) != CFT_OK)
        return 1;
    unsigned char len8[8];
    FILE *f = fopen(p2, "rb");
    if (!f || fread(len8, 1, 8, f) != 8)
        return 1;
    fclose(f);
    long hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen * 256 + len8[i];
    path = p2;
    long idle = child_rss(NULL, self), loading = child_rss(p2, self);
    fprintf(stderr,
            "header %.1f MB: a process that loads it peaks %.1f MB above one that does not "
            "(%.1fx the header, with the 200000 arrays and names)\n",
            (double)hlen / 1e6, (double)(loading - idle) / 1024,
            (double)(loading - idle) * 1024 / (double)hlen);
    report("200000 scalar tensors", hlen, 0.8);
    /* weights: 64 x 1 MiB + 4 x 32 MiB of f32 */
    t = cft_tree_new();
    char name[64];
    for (int i = 0; i < 64; i++) {
        snprintf(name, sizeof name, "layers.%d.weight", i);
        t = cft_tree_set(t, name, cft_full(0.5 + i, CFT_F32, (int64_t[]){512, 512}, 2));
    }
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "embed.%d", i);
        t = cft_tree_set(t, name, cft_full(1.5, CFT_F32, (int64_t[]){8192, 1024}, 2));
    }
    if (cft_save_safetensors(p1, t, NULL, 0) != CFT_OK)
        return 1;
    path = p1;
    report("64 x 1 MiB + 4 x 32 MiB f32", 0, 192);
    unlink(p1), unlink(p2), rmdir(tmpl);
    return 0;
}
