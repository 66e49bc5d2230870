/* checkpoint_load.c: reading a sharded checkpoint at any world size, with
 * no MPI and no other process. The metadata says which files hold which
 * rows of each array; for every piece asked for, only the files whose rows
 * overlap it are opened (each once), their safetensors headers parsed and
 * checked (safetensors_load.c), the entry's dtype and shape compared with
 * the metadata, and exactly the overlapping rows read with pread straight
 * into the result. Errors name the directory, file and array. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "array/array.h"
#include "core/error.h"
#include "core/mem.h"
#include "nn/checkpoint.h"
#include "nn/nn_internal.h"
#include "nn/safetensors.h"

static cft_array *fail(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cft_array *fail(const char *dir, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cft__fail(CFT_E_IO, "cft_checkpoint_load: %s: %s", dir, msg);
}

/* the metadata of dir */
static cft_array *read_meta(const char *dir, ckpt_meta *m) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_META);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return fail(dir, "cannot open %s: %s", CKPT_META, strerror(errno));
    struct stat sb;
    cft_array *e = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        e = fail(dir, "%s is not a regular file", CKPT_META);
    else if ((uint64_t)sb.st_size > CKPT_MAX_META_BYTES)
        e = fail(dir, "%s has %lld bytes (at most %u)", CKPT_META, (long long)sb.st_size,
                 CKPT_MAX_META_BYTES);
    char *text = e ? NULL : malloc((size_t)sb.st_size + 1);
    if (!e && !text)
        e = cft__oom();
    if (!e && !cft__st_read_at(fd, text, (size_t)sb.st_size, 0))
        e = fail(dir, "cannot read %s", CKPT_META);
    close(fd);
    if (!e) {
        cft_array *pe = cft__ckpt_parse(text, (size_t)sb.st_size, m);
        if (pe)
            e = fail(dir, "%s", cft_error_message(pe));
    }
    free(text);
    return e;
}

/* an open shard file with its parsed header */
typedef struct shard_file {
    char name[CKPT_MAX_FILE + 1];
    int fd;
    cft_st_header H;
    uint64_t data_at, data_len;
    int *order; /* entries by name, for a binary search (malloc'd) */
    struct shard_file *next;
} shard_file;

static int entry_cmp(const void *a, const void *b, void *ctx) {
    const cft_st_header *H = ctx;
    return strcmp(H->names + H->e[*(const int *)a].name, H->names + H->e[*(const int *)b].name);
}

/* t's entry in f, found by name in O(log n) (a scan per array was
 * quadratic over a shard of many arrays) */
static const cft_st_entry *entry_named(const shard_file *f, const char *name) {
    int lo = 0, hi = f->H.n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(f->H.names + f->H.e[f->order[mid]].name, name);
        if (c == 0)
            return &f->H.e[f->order[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static cft_array *open_file(const char *dir, const char *name, shard_file **files,
                            shard_file **out) {
    for (shard_file *f = *files; f; f = f->next)
        if (!strcmp(f->name, name)) {
            *out = f;
            return NULL;
        }
    shard_file *f = calloc(1, sizeof *f);
    if (!f)
        return cft__oom();
    snprintf(f->name, sizeof f->name, "%s", name);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f->fd < 0) {
        cft_array *e = fail(dir, "cannot open %s: %s", name, strerror(errno));
        free(f);
        return e;
    }
    cft_array *e = cft__st_open(path, f->fd, &f->H, &f->data_at, &f->data_len);
    if (e) {
        close(f->fd);
        free(f);
        return e;
    }
    if (!(f->order = malloc(sizeof(int) * (size_t)(f->H.n + 1)))) {
        close(f->fd);
        cft__st_header_free(&f->H);
        free(f);
        return cft__oom();
    }
    for (int i = 0; i < f->H.n; i++)
        f->order[i] = i;
    qsort_r(f->order, (size_t)f->H.n, sizeof(int), entry_cmp, &f->H);
    f->next = *files;
    *files = f;
    *out = f;
    return NULL;
}

static void close_files(shard_file *f) {
    while (f) {
        shard_file *n = f->next;
        close(f->fd);
        cft__st_header_free(&f->H);
        free(f->order);
        free(f);
        f = n;
    }
}

/* rows [lo, hi) of t from piece p into dst (the result's row `at0` = lo) */
static cft_array *copy_rows(const char *dir, const ckpt_tensor *t, const ckpt_piece *p, int64_t lo,
                            int64_t hi, shard_file **files, char *dst) {
    shard_file *f = NULL;
    cft_array *e = open_file(dir, p->file, files, &f);
    if (e)
        return e;
    const cft_st_entry *en = entry_named(f, t->name);
    if (!en)
        return fail(dir, "%s has no '%s' (rows %lld..%lld)", p->file, t->name, (long long)p->begin,
                    (long long)p->end);
    char buf[512];
    const char *why = cft__st_check_entry(en, f->data_len, buf, sizeof buf);
    if (why)
        return fail(dir, "%s: '%s' %s", p->file, t->name, why);
    bool shape_ok = cft__st_types[en->dtype].as == t->dtype &&
                    !strcmp(cft__st_types[en->dtype].name, cft__st_name_of(t->dtype)) &&
                    en->ndim == t->ndim;
    for (int d = 0; shape_ok && d < t->ndim; d++)
        shape_ok = en->shape[d] == (d ? t->shape[d] : p->end - p->begin);
    if (!shape_ok)
        return fail(dir, "%s: '%s' is not the %s piece of rows %lld..%lld the metadata says",
                    p->file, t->name, cft_dtype_name(t->dtype), (long long)p->begin,
                    (long long)p->end);
    size_t row = cft_dtype_size(t->dtype); /* bytes of one row */
    for (int d = 1; d < t->ndim; d++)
        row *= (size_t)t->shape[d];
    size_t n = (size_t)(hi - lo) * row;
    uint64_t off = f->data_at + en->begin + (uint64_t)(lo - p->begin) * row;
    if (n && !cft__st_read_at(f->fd, dst, n, off))
        return fail(dir, "%s: cannot read rows %lld..%lld of '%s' (truncated?)", p->file,
                    (long long)lo, (long long)hi, t->name);
    if (!cft__host_le() && cft_dtype_size(t->dtype) > 1) { /* the file is little-endian */
        size_t es = cft_dtype_is_complex(t->dtype) ? cft_dtype_size(t->dtype) / 2
                                                   : cft_dtype_size(t->dtype);
        cft__bswap(dst, es, n / es);
    }
    return NULL;
}

/* rows [off, off + rows) of t, assembled from the pieces that hold them */
static cft_array *load_piece(const char *dir, const ckpt_tensor *t, int64_t off, int64_t rows,
                             shard_file **files) {
    int64_t shape[CFT_MAX_NDIM];
    memcpy(shape, t->shape, sizeof shape);
    if (t->ndim)
        shape[0] = rows;
    cft_array *y = cft__alloc(t->dtype, shape, t->ndim);
    if (cft_failed(y))
        return y;
    size_t row = cft_dtype_size(t->dtype);
    for (int d = 1; d < t->ndim; d++)
        row *= (size_t)t->shape[d];
    for (int k = 0; k < t->npieces; k++) {
        const ckpt_piece *p = &t->pieces[k];
        int64_t lo = p->begin > off ? p->begin : off;
        int64_t hi = p->end < off + rows ? p->end : off + rows;
        if (lo >= hi)
            continue;
        cft_array *e =
            copy_rows(dir, t, p, lo, hi, files, (char *)cft__ptr(y) + (size_t)(lo - off) * row);
        if (e)
            return e;
    }
    return y;
}

static const ckpt_tensor *find(const ckpt_meta *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name))
            return &m->t[i];
    return NULL;
}

cft_tree *cft_checkpoint_load(const char *dir, const cft_checkpoint_piece *want, int nwant) {
    CFT_API("cft_checkpoint_load");
    if (!dir || !*dir || nwant < 0 || (nwant && !want))
        return cft__tree_err(
            cft__fail(CFT_E_ARG, "cft_checkpoint_load: a directory and 0 or more pieces"));
    ckpt_meta m;
    cft_array *e = read_meta(dir, &m);
    if (e)
        return cft__tree_err(e);
    int n = want ? nwant : m.n;
    const char **names = CFT_NEWN(const char *, n + 1);
    cft_array **xs = CFT_NEWN(cft_array *, n + 1);
    if (!names || !xs)
        return cft__tree_err(cft__oom());
    shard_file *files = NULL;
    for (int i = 0; i < n && !e; i++) {
        const ckpt_tensor *t = want ? find(&m, want[i].name ? want[i].name : "") : &m.t[i];
        if (!t) {
            e = fail(dir, "has no array '%s'", want[i].name ? want[i].name : "(null)");
            break;
        }
        int64_t total = cft__ckpt_rows(t), off = 0, rows = total;
        if (want && want[i].rows >= 0) {
            off = want[i].offset, rows = want[i].rows;
            if (!t->ndim || off < 0 || off > total || rows > total - off)
                e = fail(dir, "'%s' has %lld rows; rows %lld..%lld asked for", t->name,
                         (long long)total, (long long)off, (long long)(off + rows));
        }
        if (!e) {
            names[i] = t->name;
            xs[i] = load_piece(dir, t, off, rows, &files);
            if (cft_failed(xs[i]))
                e = xs[i];
        }
    }
    close_files(files);
    return e ? cft__tree_err(e) : cft_tree_from(names, xs, n);
}

int cft_checkpoint_list(const char *dir, const char ***names, cft_aval **avals) {
    CFT_API("cft_checkpoint_list");
    ckpt_meta m;
    cft_array *e = dir ? read_meta(dir, &m)
                       : cft__fail(CFT_E_ARG, "cft_checkpoint_list: the directory is NULL");
    if (e) {
        cft__set_last(e);
        return -1;
    }
    const char **nm = CFT_NEWN(const char *, m.n + 1);
    cft_aval *av = CFT_NEWN(cft_aval, m.n + 1);
    if (!nm || !av) {
        cft__set_last(cft__oom());
        return -1;
    }
    for (int i = 0; i < m.n; i++) {
        nm[i] = m.t[i].name;
        av[i] = cft__aval(m.t[i].dtype, m.t[i].shape, m.t[i].ndim);
    }
    if (names)
        *names = nm;
    if (avals)
        *avals = av;
    return m.n;
}
