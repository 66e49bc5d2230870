/* safetensors_save.c: writing a parameter tree as a safetensors file (an
 * 8-byte little-endian header length, a space-padded JSON header made with
 * cJSON, the little-endian data in tree order; every cft dtype is written as
 * stored: BOOL, I32, I64, F16, BF16, F32, F64, C64, C128). The user's data
 * is never lost: the file is written as an unnamed file (O_TMPFILE) in the
 * target's directory, so a save killed half-way leaves nothing behind,
 * flushed to disk, given a name and renamed over the target. A symlink is
 * followed (its target is updated, the link kept), and an existing file's
 * mode (and, where allowed, owner) carries over: private weights stay
 * private. Where O_TMPFILE is not supported, a named temporary file is
 * used and removed on every failure. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "array/array.h"
#include "core/error.h"
#include "nn/nn_internal.h"
#include "nn/safetensors.h"

static cft_status fail(const char *path, cft_status code, const char *fmt, const char *detail) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, detail);
    cft__fail(code, "cft_save_safetensors: %s: %s", path ? path : "(NULL path)", msg);
    return code;
}

/* the JSON header, padded with spaces so the data starts 8-byte aligned */
static char *make_header(const cft_tree *t, const char *const *meta, int nmeta, size_t *len) {
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    if (nmeta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; m && i < nmeta; i++)
            if (!cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1]))
                m = NULL;
        if (!m)
            goto oom;
    }
    size_t off = 0;
    for (int i = 0; i < t->n; i++) {
        cft_aval a = cft_array_aval(t->xs[i]);
        size_t bytes = (size_t)cft_array_size(t->xs[i]) * cft_dtype_size(a.dtype);
        cJSON *e = cJSON_AddObjectToObject(root, t->names[i]);
        cJSON *shape = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
        cJSON *offs = e && cJSON_AddStringToObject(e, "dtype", cft__st_name_of(a.dtype))
                          ? cJSON_CreateArray()
                          : NULL;
        if (!shape || !offs)
            goto oom;
        for (int d = 0; d < a.ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)a.shape[d]));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + bytes)));
        cJSON_AddItemToObject(e, "data_offsets", offs);
        off += bytes;
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text)
        return NULL;
    size_t n = strlen(text), padded = (n + 7) / 8 * 8;
    char *h = realloc(text, padded + 1);
    if (!h) {
        free(text);
        return NULL;
    }
    memset(h + n, ' ', padded - n);
    h[padded] = 0;
    *len = padded;
    return h;
oom:
    cJSON_Delete(root);
    return NULL;
}

/* write the leaves' bytes, little-endian */
static bool write_data(FILE *f, const cft_tree *t) {
    for (int i = 0; i < t->n; i++) {
        cft_dtype dt = cft_array_dtype(t->xs[i]);
        size_t n = (size_t)cft_array_size(t->xs[i]), size = cft_dtype_size(dt);
        if (n == 0)
            continue;
        cft_array *x = t->xs[i];
        if (cft__host_le() && x->kind == CFT_K_CONCRETE && cft__is_contig(x)) {
            if (fwrite(cft__ptr(x), size, n, f) != n) /* straight from the array */
                return false;
            continue;
        }
        void *buf = malloc(n * size);
        if (!buf)
            return false;
        bool ok = cft_copy_to(t->xs[i], dt, buf) == CFT_OK;
        if (ok && !cft__host_le())
            cft__bswap(buf, size, n);
        ok = ok && fwrite(buf, size, n, f) == n;
        free(buf);
        if (!ok)
            return false;
    }
    return true;
}

static char *dir_of(const char *path);

/* The file to write: path, or the target of the symlink path (one level at
 * a time, up to 40, as the kernel does). A GC string; NULL with why set
 * when a link may not be followed, NULL with why empty when out of memory.
 * Links are followed under the kernel's protected_symlinks rule, applied
 * here since it is read in user space (and the sysctl may be off): a link
 * in a sticky world-writable directory (/tmp) is followed only when its
 * owner is this user or the directory's owner, so a link another user
 * planted there cannot turn a save into an overwrite of the victim's
 * files. */
static char *resolve(const char *path, char *why, size_t n) {
    why[0] = 0;
    char *cur = cft__strdup(path);
    for (int hops = 0; cur && hops < 40; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur;
        char *dir = dir_of(cur);
        struct stat ds;
        if (!dir)
            return NULL;
        if (stat(dir, &ds) == 0 && (ds.st_mode & S_ISVTX) && (ds.st_mode & S_IWOTH) &&
            st.st_uid != geteuid() && st.st_uid != ds.st_uid) {
            snprintf(why, n,
                     "%s is a symbolic link owned by uid %u in the sticky world-writable "
                     "directory %s (owned by uid %u): not followed (another user may have "
                     "planted it)",
                     cur, (unsigned)st.st_uid, dir, (unsigned)ds.st_uid);
            return NULL;
        }
        char link[4096];
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0)
            return cur;
        link[n] = 0;
        if (link[0] == '/') {
            cur = cft__strdup(link);
        } else { /* relative to the link's directory */
            const char *slash = strrchr(cur, '/');
            size_t d = slash ? (size_t)(slash - cur) + 1 : 0;
            char *next = cft__new(d + (size_t)n + 1);
            if (!next)
                return NULL;
            memcpy(next, cur, d);
            memcpy(next + d, link, (size_t)n + 1);
            cur = next;
        }
    }
    return cur;
}

/* the directory part of path ("." if none), a GC string */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        return cft__strdup(".");
    if (slash == path)
        return cft__strdup("/");
    char *d = cft__new((size_t)(slash - path) + 1);
    if (d)
        memcpy(d, path, (size_t)(slash - path));
    return d;
}

/* An unnamed file in target's directory (O_TMPFILE), or a new named one
 * (then its name goes to tmp, else tmp[0] = 0). The mode is 0666 less the
 * umask, as open() makes it. */
static int open_temp(const char *target, char *tmp, size_t cap) {
    tmp[0] = 0;
#ifdef O_TMPFILE
    char *dir = dir_of(target);
    int fd = dir ? open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666) : -1;
    if (fd >= 0)
        return fd;
#endif
    static _Thread_local unsigned counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp, cap, "%s.tmp-%ld-%u-%ld", target, (long)getpid(), counter++, (long)clock());
        int f = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (f >= 0 || errno != EEXIST) {
            if (f < 0)
                tmp[0] = 0;
            return f;
        }
    }
    tmp[0] = 0;
    return -1;
}

/* give the finished temporary file the name target, atomically */
static int publish(int fd, const char *target, char *tmp, size_t cap) {
    if (!tmp[0]) { /* unnamed: link it under a temporary name, then rename */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        static _Thread_local unsigned counter;
        for (int attempt = 0;; attempt++) {
            snprintf(tmp, cap, "%s.tmp-%ld-%u", target, (long)getpid(), counter++);
            if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
                break;
            if (errno != EEXIST || attempt > 100) {
                tmp[0] = 0;
                return -1;
            }
        }
    }
    return rename(tmp, target);
}

cft_status cft_save_safetensors(const char *path, const cft_tree *t, const char *const *meta,
                                int nmeta) {
    CFT_API("cft_save_safetensors");
    if (!path || !*path)
        return fail(path, CFT_E_ARG, "%s", "empty or NULL path");
    if (!t)
        return fail(path, CFT_E_ARG, "%s", "NULL tree");
    if (t->err)
        return fail(path, cft_error_code(t->err), "the tree is an error: %s",
                    cft_error_message(t->err));
    if (nmeta < 0 || (nmeta > 0 && !meta))
        return fail(path, CFT_E_ARG, "%s", "bad metadata arguments");
    for (int i = 0; i < 2 * nmeta; i++) {
        if (!meta[i])
            return fail(path, CFT_E_ARG, "%s", "NULL metadata string");
        for (int j = 0; i % 2 == 0 && j < i; j += 2)
            if (strcmp(meta[i], meta[j]) == 0)
                return fail(path, CFT_E_ARG, "duplicate metadata key '%s'", meta[i]);
    }
    for (int i = 0; i < t->n; i++) {
        if (strcmp(t->names[i], "__metadata__") == 0)
            return fail(path, CFT_E_ARG, "%s", "a tensor may not be named __metadata__");
        if (!cft_is_concrete(t->xs[i]))
            return fail(path, CFT_E_TRACE, "entry '%s' is a tracer, not a concrete array",
                        t->names[i]);
    }
    size_t hlen = 0;
    char *header = make_header(t, meta, nmeta, &hlen);
    if (!header)
        return fail(path, CFT_E_NOMEM, "%s", "out of memory building the header");
    char why[1024];
    char *target = resolve(path, why, sizeof why);
    if (!target) {
        free(header);
        return why[0] ? fail(path, CFT_E_IO, "%s", why)
                      : fail(path, CFT_E_NOMEM, "%s", "out of memory");
    }
    struct stat old;
    bool existed = stat(target, &old) == 0;
    if (existed && !S_ISREG(old.st_mode)) {
        free(header);
        return fail(path, CFT_E_IO, "%s", "exists and is not a regular file");
    }
    size_t cap = strlen(target) + 64;
    char *tmp = malloc(cap);
    int fd = tmp ? open_temp(target, tmp, cap) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        if (tmp && tmp[0])
            unlink(tmp);
        free(header);
        free(tmp);
        return fail(path, CFT_E_IO, "cannot create a temporary file: %s", strerror(err));
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(header, 1, hlen, f) == hlen && write_data(f, t);
    int err = ok ? 0 : (errno ? errno : EIO);
    free(header);
    if (ok && existed) { /* the old file's mode and, where allowed, owner */
        if (fchown(fileno(f), old.st_uid, old.st_gid) != 0) {
            /* not allowed (not root): the file is ours, as any rewrite */
        }
        if (fchmod(fileno(f), old.st_mode & 07777) != 0)
            ok = false, err = errno;
    }
    if (ok && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        ok = false, err = errno;
    if (ok && publish(fileno(f), target, tmp, cap) != 0)
        ok = false, err = errno;
    if (fclose(f) != 0 && ok)
        ok = false, err = errno;
    if (!ok) {
        if (tmp[0])
            unlink(tmp);
        free(tmp);
        return fail(path, CFT_E_IO, "write failed: %s", strerror(err ? err : EIO));
    }
    free(tmp);
    return CFT_OK;
}
