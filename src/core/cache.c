/* cache.c: cft's private on-disk cache (the jit's compiled kernels, the
 * CUDA backend's CUBINs). Its directory is $CFT_CACHE_DIR, else
 * $XDG_CACHE_HOME/cft, else ~/.cache/cft (the passwd entry's home when
 * HOME is unset), and it is private, as ssh treats ~/.ssh: a directory
 * that is not ours or that others can write is refused (one warning, then
 * a private mkdtemp directory for this process). Files are created with
 * O_CREAT|O_EXCL|O_NOFOLLOW under random temporary names and renamed, so
 * processes writing at once never see a partial file. Beside each entry,
 * <entry>.sum records its size and content hash at write time; a reader
 * opens the entry with O_NOFOLLOW and checks it (ours, regular, not
 * writable by others, hash matching the record) before using it, and
 * removes an entry that does not match. The cache is bounded
 * (CFT_CACHE_MAX_MB, default 2048: the least recently used entries go),
 * and a temporary directory is removed when its process exits. */
#include "core/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* the directory's state */

uint64_t cft__fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

void cft__cache_why(char *buf, size_t n, const char *fmt, ...) {
    if (!buf || !n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}
#define why cft__cache_why

/* ---- the cache directory ---- */

/* 0: dir is a directory owned by us that nobody else can write; else -1
 * with the reason */
static int private_dir(const char *dir, char *err, size_t n) {
    struct stat st;
    if (lstat(dir, &st) != 0) {
        why(err, n, "cannot stat %s: %s", dir, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode) && stat(dir, &st) != 0) {
        why(err, n, "%s is a dangling symlink", dir);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        why(err, n, "%s is not a directory", dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        why(err, n, "%s is owned by uid %u, not by this user (uid %u)", dir, (unsigned)st.st_uid,
            (unsigned)geteuid());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        why(err, n, "%s is writable by group or others (mode %03o)", dir,
            (unsigned)(st.st_mode & 0777));
        return -1;
    }
    return 0;
}

/* mkdir -p with mode 0700 for the directories it creates */
static int mkdirs(const char *dir, char *err, size_t n) {
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) {
        why(err, n, "cache path too long");
        return -1;
    }
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0700);
            *p = '/';
        }
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST) {
        why(err, n, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

static char cache_dir[1024];
static bool cache_ready;

/* The default location, as the XDG base directory spec says. */
static void default_dir(char *dir, size_t n) {
    const char *cd = getenv("CFT_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    if (cd && *cd) {
        snprintf(dir, n, "%s", cd);
        return;
    }
    if (xdg && xdg[0] == '/') {
        snprintf(dir, n, "%s/cft", xdg);
        return;
    }
    if (!home || !*home) {
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &res) == 0 && res && res->pw_dir &&
            res->pw_dir[0] == '/' && strcmp(res->pw_dir, "/") != 0)
            home = res->pw_dir;
    }
    if (home && *home)
        snprintf(dir, n, "%s/.cache/cft", home);
    else
        dir[0] = 0; /* no home: a private temporary directory */
}

/* the files of directory dir (one level: the cache has no subdirectories),
 * then dir itself */
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[1400];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(dir);
}

static char temp_made[1024]; /* this process's temporary cache, removed at exit */
static void remove_temp(void) {
    if (temp_made[0])
        remove_dir(temp_made);
}

/* A private directory for this process only: mkdtemp makes it 0700 and
 * fails if the name exists, so nobody can have planted anything in it.
 * Removed at exit (each process made one and left it behind). */
static int temp_dir(char *dir, size_t n, char *err, size_t en) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, n, "%s/cft-%u-XXXXXX", t && t[0] == '/' ? t : "/tmp", (unsigned)geteuid());
    if (!mkdtemp(dir)) {
        why(err, en, "cannot create a private temporary directory: %s", strerror(errno));
        return -1;
    }
    snprintf(temp_made, sizeof temp_made, "%s", dir);
    atexit(remove_temp);
    return 0;
}

/* ---- a size bound: CFT_CACHE_MAX_MB (default 2048), least recently
 * used entries evicted down to 3/4 of it; checked when the cache is
 * opened and every 64 entries written ---- */

typedef struct {
    char name[256];
    time_t t;
    off_t size;
} cache_file;

static int by_age(const void *a, const void *b) {
    const cache_file *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static double cache_max_bytes(void) {
    const char *s = getenv("CFT_CACHE_MAX_MB");
    double mb = s && *s ? atof(s) : 2048;
    return (mb > 0 ? mb : 2048) * 1048576.0;
}

/* under mu: evict the oldest entries (an entry and its .sum go together;
 * age is the later of its mtime and atime, and a hit touches it) */
static void trim_locked(void) {
    DIR *d = opendir(cache_dir);
    if (!d)
        return;
    int cap = 256, n = 0;
    cache_file *f = malloc(sizeof *f * (size_t)cap);
    double total = 0;
    struct dirent *e;
    while (f && (e = readdir(d))) {
        struct stat st;
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof f->name || lstat(p, &st) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        total += (double)st.st_size;
        size_t l = strlen(e->d_name);
        if (l > 4 && !strcmp(e->d_name + l - 4, ".sum"))
            continue; /* removed with its entry */
        if (n == cap) {
            cache_file *g = realloc(f, sizeof *f * (size_t)(cap *= 2));
            if (!g)
                break;
            f = g;
        }
        snprintf(f[n].name, sizeof f[n].name, "%s", e->d_name);
        f[n].t = st.st_mtime > st.st_atime ? st.st_mtime : st.st_atime;
        f[n].size = st.st_size;
        n++;
    }
    closedir(d);
    double max = cache_max_bytes();
    if (f && total > max) {
        qsort(f, (size_t)n, sizeof *f, by_age);
        for (int i = 0; i < n && total > 0.75 * max; i++) {
            char p[1400];
            snprintf(p, sizeof p, "%s/%s", cache_dir, f[i].name);
            if (unlink(p) == 0)
                total -= (double)f[i].size;
            snprintf(p, sizeof p, "%s/%s.sum", cache_dir, f[i].name);
            unlink(p);
        }
    }
    free(f);
}

void cft__cache_trim(void) {
    pthread_mutex_lock(&mu);
    if (cache_ready)
        trim_locked();
    pthread_mutex_unlock(&mu);
}

static int open_cache(char *err, size_t n) { /* under mu */
    if (cache_ready)
        return 0;
    char dir[1024], e[768] = "";
    default_dir(dir, sizeof dir);
    bool usable = dir[0] && mkdirs(dir, e, sizeof e) == 0 && private_dir(dir, e, sizeof e) == 0;
    if (usable && access(dir, W_OK | X_OK) != 0) { /* ours, but read-only */
        why(e, sizeof e, "%s is not writable: %s", dir, strerror(errno));
        usable = false;
    }
    if (usable) {
        snprintf(cache_dir, sizeof cache_dir, "%s", dir);
        cache_ready = true;
        trim_locked();
        return 0;
    }
    if (dir[0] && !getenv("CFT_JIT_QUIET"))
        fprintf(stderr,
                "cft: cannot use the kernel cache directory: %s; using a private temporary "
                "directory instead (set CFT_CACHE_DIR to a directory only you can write)\n",
                e);
    if (temp_dir(cache_dir, sizeof cache_dir, err, n) != 0)
        return -1;
    cache_ready = true;
    return 0;
}

const char *cft__cache_dir_why(char *err, size_t n) {
    pthread_mutex_lock(&mu);
    int rc = open_cache(err, n);
    pthread_mutex_unlock(&mu);
    return rc == 0 ? cache_dir : NULL;
}

const char *cft__cache_dir(void) {
    return cft__cache_dir_why(NULL, 0);
}

/* ---- files ---- */

unsigned long long cft__cache_rnd(void) {
    static _Thread_local uint64_t s;
    if (!s) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        s = cft__fnv(CFT_FNV0, &t, sizeof t) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&s;
    }
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return (unsigned long long)s;
}

/* create a new file exclusively (never through a symlink) and write buf */
int cft__cache_write_new(const char *path, const void *buf, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            unlink(path);
            return -1;
        }
        p += w, n -= (size_t)w;
    }
    if (close(fd) != 0) {
        unlink(path);
        return -1;
    }
    return 0;
}

/* Open path (no symlinks) and check it is a regular file of ours that
 * nobody else can write; read it whole and hash it. -1 on any doubt. */
int cft__cache_open_checked(const char *path, uint64_t *hash, int64_t *size) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & (S_IWGRP | S_IWOTH)) || st.st_size > ((int64_t)1 << 30)) {
        close(fd);
        return -1;
    }
    uint64_t h = CFT_FNV0;
    char buf[65536];
    int64_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        h = cft__fnv(h, buf, (size_t)r);
        total += r;
    }
    *hash = h;
    *size = total;
    return fd;
}

/* the record written beside an object at write time */
bool cft__cache_read_sum(const char *path, uint64_t *hash, int64_t *size) {
    uint64_t h;
    int64_t n;
    int fd = cft__cache_open_checked(path, &h, &n);
    if (fd < 0)
        return false;
    char buf[80] = {0};
    ssize_t r = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    unsigned long long hh;
    long long sz;
    if (r <= 0 || sscanf(buf, "cft-kernel %llx %lld", &hh, &sz) != 2)
        return false;
    *hash = hh, *size = sz;
    return true;
}

int cft__cache_commit(const char *tmp, const char *final, const char *sum, const char *tmpsum) {
    uint64_t h;
    int64_t size;
    int fd = cft__cache_open_checked(tmp, &h, &size);
    char rec[80];
    int len = snprintf(rec, sizeof rec, "cft-kernel %016llx %lld\n", (unsigned long long)h,
                       (long long)size);
    int rc = fd >= 0 && cft__cache_write_new(tmpsum, rec, (size_t)len) == 0 ? 0 : -1;
    if (fd >= 0)
        close(fd);
    /* the entry first, then its record: a reader that sees the new record
     * sees the entry it describes */
    if (rc == 0 && (rename(tmp, final) != 0 || rename(tmpsum, sum) != 0))
        rc = -1;
    unlink(tmp);
    unlink(tmpsum);
    static _Atomic unsigned commits;
    if (rc == 0 && ++commits % 64 == 0)
        cft__cache_trim();
    return rc;
}

int cft__cache_vouched(const char *path, const char *sum) {
    uint64_t want_h, h;
    int64_t want_n, size;
    if (!cft__cache_read_sum(sum, &want_h, &want_n))
        return -1;
    int fd = cft__cache_open_checked(path, &h, &size);
    if (fd >= 0 && (h != want_h || size != want_n)) {
        close(fd);
        return -1;
    }
    if (fd >= 0) /* used: the last to be evicted */
        futimens(fd, NULL);
    return fd;
}

/* names of a blob's files: letters, digits, '.', '_', '-' only */
static int blob_paths(const char *name, char *path, char *sum, size_t n) {
    if (!name || !*name || strlen(name) > 200 || name[0] == '.')
        return -1;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            return -1;
    const char *dir = cft__cache_dir();
    if (!dir)
        return -1;
    snprintf(path, n, "%s/%s", dir, name);
    snprintf(sum, n, "%s/%s.sum", dir, name);
    return 0;
}

void *cft__cache_get(const char *name, size_t *n) {
    char path[1400], sum[1400];
    if (blob_paths(name, path, sum, sizeof path) != 0)
        return NULL;
    int fd = cft__cache_vouched(path, sum);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && (buf = malloc((size_t)st.st_size))) {
        ssize_t r = pread(fd, buf, (size_t)st.st_size, 0);
        if (r != st.st_size) {
            free(buf);
            buf = NULL;
        } else {
            *n = (size_t)st.st_size;
        }
    }
    close(fd);
    if (!buf) /* changed since it was checked: the next put replaces it */
        return NULL;
    /* checked again, now that the bytes are in memory */
    uint64_t want_h;
    int64_t want_n;
    if (!cft__cache_read_sum(sum, &want_h, &want_n) || (int64_t)*n != want_n ||
        cft__fnv(CFT_FNV0, buf, *n) != want_h) {
        free(buf);
        return NULL;
    }
    return buf;
}

int cft__cache_put(const char *name, const void *buf, size_t n) {
    char path[1400], sum[1400], tmp[1500], tmpsum[1500];
    if (blob_paths(name, path, sum, sizeof path) != 0)
        return -1;
    unsigned long long r = cft__cache_rnd();
    snprintf(tmp, sizeof tmp, "%s.%llx.tmp", path, r);
    snprintf(tmpsum, sizeof tmpsum, "%s.%llx.sum.tmp", path, r);
    if (cft__cache_write_new(tmp, buf, n) != 0)
        return -1;
    return cft__cache_commit(tmp, path, sum, tmpsum);
}
