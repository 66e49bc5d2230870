/* safetensors_save.c: writing a parameter tree as a safetensors file (an
 * 8-byte little-endian header length, a space-padded JSON header made with
 * cJSON, the little-endian data in tree order). The file is written under a
 * temporary name in the same directory, flushed to disk and renamed over the
 * target, so a failure never destroys an existing file. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nn/nn_internal.h"
#include "nn/safetensors.h"

static const char *st_dtype(cft_dtype dt) {
    switch (dt) {
    case CFT_BOOL:
        return "BOOL";
    case CFT_I32:
        return "I32";
    case CFT_I64:
        return "I64";
    case CFT_F32:
        return "F32";
    case CFT_F64:
        return "F64";
    default:
        return NULL;
    }
}

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
        cJSON *offs = e && cJSON_AddStringToObject(e, "dtype", st_dtype(a.dtype))
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

/* open a new file next to path, honouring the umask; its name in tmp */
static FILE *open_temp(const char *path, char *tmp, size_t cap) {
    static _Thread_local unsigned counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp, cap, "%s.tmp-%ld-%u-%ld", path, (long)getpid(), counter++, (long)clock());
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd >= 0) {
            FILE *f = fdopen(fd, "wb");
            if (!f) {
                close(fd);
                unlink(tmp);
            }
            return f;
        }
        if (errno != EEXIST)
            return NULL;
    }
    return NULL;
}

cft_status cft_save_safetensors(const char *path, const cft_tree *t, const char *const *meta,
                                int nmeta) {
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
    size_t cap = strlen(path) + 64;
    char *tmp = malloc(cap);
    FILE *f = tmp ? open_temp(path, tmp, cap) : NULL;
    if (!f) {
        int err = errno;
        free(header);
        free(tmp);
        return fail(path, CFT_E_IO, "cannot create a temporary file: %s", strerror(err));
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(header, 1, hlen, f) == hlen && write_data(f, t);
    int err = errno;
    free(header);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (!ok && !err)
        err = errno;
    if (fclose(f) != 0 && ok)
        ok = false, err = errno;
    if (ok && rename(tmp, path) != 0)
        ok = false, err = errno;
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return fail(path, CFT_E_IO, "write failed: %s", strerror(err ? err : EIO));
    }
    free(tmp);
    return CFT_OK;
}
