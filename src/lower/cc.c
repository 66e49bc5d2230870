/* cc.c: compiling generated C, and the private on-disk kernel cache.
 *
 * The source goes to the system C compiler (gcc -O3 -march=native -fopenmp,
 * libmvec for vector libm), started with posix_spawnp and an argument
 * vector: no shell ever sees a path. Objects are cached under
 * $CFT_CACHE_DIR, else $XDG_CACHE_HOME/cft, else ~/.cache/cft (the passwd
 * entry's home when HOME is unset), named by a hash of the source, the
 * compiler, its flags and the CPU, so a second process compiles nothing.
 *
 * The cache is private, as ssh treats ~/.ssh: a directory that is not
 * ours or that others can write is refused (one warning, then a private
 * mkdtemp directory for this process). Files are created with
 * O_CREAT|O_EXCL|O_NOFOLLOW under random temporary names and renamed, so
 * processes compiling at once never see a partial file. Next to each
 * object, <key>.sum records its size and content hash at write time;
 * before loading, the object is opened with O_NOFOLLOW and checked (ours,
 * regular, not writable by others, hash matches); only then is it loaded
 * (nobody else can write the directory, so nothing can swap it between
 * the check and dlopen). A mismatch
 * (truncated or corrupt object) is removed and rebuilt, never loaded.
 * When nothing can be compiled, the reason goes back to the jit, which
 * says so once on stderr and interprets. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/mem.h"
#include "lower/lower.h"

extern char **environ;

static const char *const FLAGS[] = {"-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-w"};
#define NFLAGS (int)(sizeof FLAGS / sizeof FLAGS[0])

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* everything below */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}
#define FNV0 1469598103934665603ull

static void why(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why(char *buf, size_t n, const char *fmt, ...) {
    if (!buf || !n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

/* what the compiled code depends on besides its source */
static uint64_t env_hash(const char *cc) {
    uint64_t h = fnv(FNV0, cc, strlen(cc));
    for (int i = 0; i < NFLAGS; i++)
        h = fnv(h, FLAGS[i], strlen(FLAGS[i]));
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) || !strncmp(line, "flags", 5)) {
            h = fnv(h, line, strlen(line));
            if (!strncmp(line, "flags", 5))
                break;
        }
    if (f)
        fclose(f);
    struct stat st; /* a new compiler binary gives new objects */
    char path[512];
    snprintf(path, sizeof path, "%s%s", cc[0] == '/' ? "" : "/usr/bin/", cc);
    if (stat(path, &st) == 0)
        h = fnv(h, &st.st_mtime, sizeof st.st_mtime);
    return h;
}

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

/* A private directory for this process only: mkdtemp makes it 0700 and
 * fails if the name exists, so nobody can have planted anything in it. */
static int temp_dir(char *dir, size_t n, char *err, size_t en) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, n, "%s/cft-%u-XXXXXX", t && t[0] == '/' ? t : "/tmp", (unsigned)geteuid());
    if (!mkdtemp(dir)) {
        why(err, en, "cannot create a private temporary directory: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static int open_cache(char *err, size_t n) {
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

const char *cft__cache_dir(void) {
    pthread_mutex_lock(&mu);
    int rc = open_cache(NULL, 0);
    pthread_mutex_unlock(&mu);
    return rc == 0 ? cache_dir : NULL;
}

/* ---- files ---- */

static unsigned long long rnd(void) {
    static _Thread_local uint64_t s;
    if (!s) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        s = fnv(FNV0, &t, sizeof t) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&s;
    }
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return (unsigned long long)s;
}

/* create a new file exclusively (never through a symlink) and write buf */
static int write_new(const char *path, const void *buf, size_t n) {
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
static int open_checked(const char *path, uint64_t *hash, int64_t *size) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & (S_IWGRP | S_IWOTH)) || st.st_size > ((int64_t)1 << 30)) {
        close(fd);
        return -1;
    }
    uint64_t h = FNV0;
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
        h = fnv(h, buf, (size_t)r);
        total += r;
    }
    *hash = h;
    *size = total;
    return fd;
}

/* the record written beside an object at write time */
static bool read_sum(const char *path, uint64_t *hash, int64_t *size) {
    uint64_t h;
    int64_t n;
    int fd = open_checked(path, &h, &n);
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

/* ---- compiling ---- */

/* run cc on csrc into out, its stderr into log; 0 on success */
static int run_cc(const char *cc, const char *csrc, const char *out, const char *log, bool cxx,
                  char *err, size_t n) {
    const char *argv[NFLAGS + 12];
    int a = 0;
    argv[a++] = cc;
    for (int i = 0; i < NFLAGS; i++)
        argv[a++] = FLAGS[i];
    argv[a++] = "-o";
    argv[a++] = out;
    if (cxx) /* the CUDA kernels' host shim (emit_cuda.c) */
        argv[a++] = "-x", argv[a++] = "c++";
    argv[a++] = csrc;
    if (cxx)
        argv[a++] = "-x", argv[a++] = "none";
    argv[a++] = "-lmvec";
    argv[a++] = "-lm";
    argv[a] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, cc, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        why(err, n, "cannot start the C compiler '%s': %s", cc, strerror(rc));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            why(err, n, "waiting for the C compiler '%s': %s", cc, strerror(errno));
            return -1;
        }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        why(err, n, "the C compiler '%s' was not found", cc);
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        why(err, n, "the C compiler '%s' failed (exit status %d; log: %s)", cc,
            WIFEXITED(status) ? WEXITSTATUS(status) : -1, log);
        return -1;
    }
    return 0;
}

/* compile src into the cache as so (with its .sum); 0 on success */
static int build(const char *cc, const char *src, const char *base, bool cxx, char *err, size_t n) {
    char csrc[1200], tmpso[1200], log[1200], so[1200], sum[1200], tmpsum[1200];
    unsigned long long r = rnd();
    snprintf(csrc, sizeof csrc, "%s.%llx.c", base, r);
    snprintf(tmpso, sizeof tmpso, "%s.%llx.so.tmp", base, r);
    snprintf(log, sizeof log, "%s.%llx.log", base, r);
    snprintf(so, sizeof so, "%s.so", base);
    snprintf(sum, sizeof sum, "%s.sum", base);
    snprintf(tmpsum, sizeof tmpsum, "%s.%llx.sum.tmp", base, r);
    if (write_new(csrc, src, strlen(src)) != 0) {
        why(err, n, "cannot write %s: %s", csrc, strerror(errno));
        return -1;
    }
    int rc = run_cc(cc, csrc, tmpso, log, cxx, err, n);
    if (rc == 0) {
        uint64_t h;
        int64_t size;
        int fd = open_checked(tmpso, &h, &size);
        char rec[80];
        int len = snprintf(rec, sizeof rec, "cft-kernel %016llx %lld\n", (unsigned long long)h,
                           (long long)size);
        if (fd < 0 || write_new(tmpsum, rec, (size_t)len) != 0) {
            why(err, n, "cannot record the kernel's hash beside %s", so);
            rc = -1;
        }
        if (fd >= 0)
            close(fd);
        /* the object first, then its record: a reader that sees the new
         * record sees the object it describes */
        if (rc == 0 && (rename(tmpso, so) != 0 || rename(tmpsum, sum) != 0)) {
            why(err, n, "cannot rename into %s: %s", so, strerror(errno));
            rc = -1;
        }
    }
    unlink(tmpso);
    unlink(tmpsum);
    if (rc == 0 || !cft__debug())
        unlink(log);
    if (!getenv("CFT_KEEP_SOURCE"))
        unlink(csrc);
    return rc;
}

/* load base.so if its record vouches for it; NULL otherwise */
static void *load_checked(const char *base) {
    char so[1200], sum[1200];
    snprintf(so, sizeof so, "%s.so", base);
    snprintf(sum, sizeof sum, "%s.sum", base);
    uint64_t want_h, h;
    int64_t want_n, size;
    if (!read_sum(sum, &want_h, &want_n))
        return NULL;
    int fd = open_checked(so, &h, &size);
    if (fd < 0)
        return NULL;
    void *handle = NULL;
    if (h == want_h && size == want_n) {
        handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        if (!handle && cft__debug())
            fprintf(stderr, "cft: dlopen %s: %s\n", so, dlerror());
    } else if (cft__debug()) {
        fprintf(stderr, "cft: cached kernel %s does not match its record: rebuilding\n", so);
    }
    close(fd);
    return handle;
}

typedef struct loaded {
    uint64_t key;
    void *handle;
    struct loaded *next;
} loaded;
static loaded *loaded_list; /* static root: the GC sees it */

static bool compile_locked(const char *src, int n, bool cxx, cft_kernel_fn *out, char *err,
                           size_t en) {
    const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    if (strchr(cc, ' ') || strchr(cc, '\t')) {
        why(err, en, "CC='%s' is not a program name (cft runs it without a shell)", cc);
        return false;
    }
    static uint64_t eh;
    static char eh_cc[256];
    if (!eh || strcmp(eh_cc, cc)) {
        eh = env_hash(cc);
        snprintf(eh_cc, sizeof eh_cc, "%s", cc);
    }
    uint64_t key = fnv(fnv(eh, src, strlen(src)), cxx ? "c++" : "c", cxx ? 3 : 1);
    void *h = NULL;
    for (loaded *l = loaded_list; l; l = l->next)
        if (l->key == key)
            h = l->handle;
    if (!h) {
        if (open_cache(err, en) != 0)
            return false;
        char base[1100];
        snprintf(base, sizeof base, "%s/%016llx", cache_dir, (unsigned long long)key);
        h = load_checked(base);
        if (!h) {
            char so[1200];
            snprintf(so, sizeof so, "%s.so", base);
            if (build(cc, src, base, cxx, err, en) != 0)
                return false;
            h = load_checked(base);
            if (!h) {
                why(err, en, "the freshly compiled %s could not be loaded", so);
                return false;
            }
        }
        loaded *l = CFT_NEW(loaded);
        if (!l) {
            why(err, en, "out of memory");
            return false;
        }
        l->key = key;
        l->handle = h;
        l->next = loaded_list;
        loaded_list = l;
    }
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "cft_k%d", i);
        *(void **)&out[i] = dlsym(h, name);
        if (!out[i]) {
            why(err, en, "kernel %s missing from the compiled object", name);
            return false;
        }
    }
    return true;
}

bool cft__compile(const char *src, int n, bool cxx, cft_kernel_fn *out, char *err, size_t en) {
    const char *jit = getenv("CFT_JIT");
    if (jit && !strcmp(jit, "0")) {
        why(err, en, "CFT_JIT=0");
        return false;
    }
    pthread_mutex_lock(&mu);
    bool ok = compile_locked(src, n, cxx, out, err, en);
    pthread_mutex_unlock(&mu);
    return ok;
}
