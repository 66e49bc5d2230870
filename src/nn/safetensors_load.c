/* safetensors_load.c: reading a safetensors file into a parameter tree. The
 * file is treated as hostile: only a regular file is opened (a FIFO never
 * blocks the call), the header length is checked against the file, the
 * header parsed in one linear pass (safetensors_header.c), every shape
 * through the one size check, every tensor's byte range against the data
 * and against its dtype and shape, and the ranges against each other (they
 * must tile the data exactly, as the reference implementation requires).
 * Each tensor is read once, with pread, straight into its final array (or
 * through a scratch buffer when its dtype is converted), so loading costs
 * what a plain read does and a file shrinking underneath is an error, not
 * a SIGBUS. Any problem gives an error tree that
 * says what is wrong; nothing is read out of bounds. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "array/array.h"
#include "nn/nn_internal.h"
#include "nn/safetensors.h"

static cft_tree *fail(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cft_tree *fail(const char *path, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cft__tree_err(cft__fail(CFT_E_IO, "cft_load_safetensors: %s: %s", path, msg));
}

static uint32_t rd_u16(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}
static uint32_t rd_u32(const unsigned char *p) {
    return rd_u16(p) | rd_u16(p + 2) << 16;
}
static uint64_t rd_u64(const unsigned char *p) {
    return (uint64_t)rd_u32(p) | (uint64_t)rd_u32(p + 4) << 32;
}

static float half_to_float(uint32_t h) {
    uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f)
        bits = sign | 0x7f800000u | man << 13; /* inf, nan */
    else if (exp != 0)
        bits = sign | (exp + 112) << 23 | man << 13;
    else if (man == 0)
        bits = sign;
    else { /* subnormal: normalise */
        int e = -1;
        do
            man <<= 1, e++;
        while (!(man & 0x400));
        bits = sign | (uint32_t)(112 - e) << 23 | (man & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* read exactly n bytes at off; false on a short read */
static bool read_at(int fd, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r, n -= (size_t)r, off += (uint64_t)r;
    }
    return true;
}

/* is file type t stored exactly as cft dtype dt (a plain copy)? */
static bool native(const cft_st_type *t, cft_dtype dt) {
    return t->as == dt && t->size == (int)cft_dtype_size(dt) && dt != CFT_BOOL;
}

/* decode n little-endian elements of file type t from p into out, as dt */
static void decode(const cft_st_type *t, cft_dtype dt, const unsigned char *p, size_t n,
                   void *out) {
    const char *k = t->name;
    (void)dt;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *q = p + i * (size_t)t->size;
        if (!strcmp(k, "BOOL"))
            ((uint8_t *)out)[i] = q[0] != 0; /* any nonzero byte is true */
        else if (!strcmp(k, "F16"))
            ((float *)out)[i] = half_to_float(rd_u16(q));
        else if (!strcmp(k, "BF16")) {
            uint32_t v = rd_u16(q) << 16;
            memcpy((char *)out + 4 * i, &v, 4);
        } else if (!strcmp(k, "I8"))
            ((int32_t *)out)[i] = (int8_t)q[0];
        else if (!strcmp(k, "U8"))
            ((int32_t *)out)[i] = q[0];
        else if (!strcmp(k, "I16"))
            ((int32_t *)out)[i] = (int16_t)rd_u16(q);
        else if (!strcmp(k, "U16"))
            ((int32_t *)out)[i] = (int32_t)rd_u16(q);
        else if (!strcmp(k, "U32"))
            ((int64_t *)out)[i] = rd_u32(q);
    }
}

static int by_begin(const void *a, const void *b) {
    const cft_st_entry *x = *(const cft_st_entry *const *)a, *y = *(const cft_st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* check one entry against the data: its size (the one size check) and
 * byte range; NULL or a message */
static const char *check_entry(const cft_st_header *H, const cft_st_entry *e, uint64_t data_len,
                               unsigned flags, char *buf, size_t cap) {
    const cft_st_type *t = &cft__st_types[e->dtype];
    int64_t numel; /* the size check on the dtype it loads as */
    cft_array *err = cft__check_size("shape", flags & CFT_ST_WIDEN ? t->widened : t->as, e->shape,
                                     e->ndim, &numel, NULL);
    if (err) {
        snprintf(buf, cap, "%s", cft_error_message(err));
        return buf;
    }
    (void)H;
    if (e->begin > e->end || e->end > data_len) {
        snprintf(buf, cap, "has data_offsets [%llu, %llu] out of range for %llu data bytes",
                 (unsigned long long)e->begin, (unsigned long long)e->end,
                 (unsigned long long)data_len);
        return buf;
    }
    uint64_t need = (uint64_t)numel * (uint64_t)t->size; /* < 2^62 * 16: checked above */
    if (e->end - e->begin != need) {
        snprintf(buf, cap, "has %llu data bytes but dtype %s and shape need %llu",
                 (unsigned long long)(e->end - e->begin), t->name, (unsigned long long)need);
        return buf;
    }
    return NULL;
}

/* the parsed header -> tree (and metadata); data: data_len bytes */
static cft_tree *build(const char *path, const cft_st_header *H, int fd, uint64_t data_at,
                       uint64_t data_len, unsigned flags, const char ***meta, int *nmeta) {
    int n = H->n;
    char buf[512];
    for (int i = 0; i < n; i++) {
        const char *why = check_entry(H, &H->e[i], data_len, flags, buf, sizeof buf);
        if (why)
            return fail(path, "tensor '%.128s' %s", H->names + H->e[i].name, why);
    }
    /* the ranges must tile [0, data_len) with no gap or overlap */
    const cft_st_entry **order = malloc(sizeof *order * (size_t)(n + 1));
    if (!order)
        return cft__tree_err(cft__oom());
    for (int i = 0; i < n; i++)
        order[i] = &H->e[i];
    qsort(order, (size_t)n, sizeof *order, by_begin);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (order[i]->begin != at) {
            cft_tree *t = fail(path,
                               "tensor '%.128s' starts at byte %llu, expected %llu (ranges "
                               "overlap or leave a gap)",
                               H->names + order[i]->name, (unsigned long long)order[i]->begin,
                               (unsigned long long)at);
            free(order);
            return t;
        }
        at = order[i]->end;
    }
    free(order);
    if (at != data_len)
        return fail(path, "the tensors cover %llu data bytes but the file holds %llu",
                    (unsigned long long)at, (unsigned long long)data_len);
    cft_tree *t = cft__tree_alloc(n);
    if (t->err)
        return t;
    for (int i = 0; i < n; i++) {
        const cft_st_entry *e = &H->e[i];
        const cft_st_type *ty = &cft__st_types[e->dtype];
        cft_dtype dt = flags & CFT_ST_WIDEN ? ty->widened : ty->as;
        cft_array *x = cft__alloc(dt, e->shape, e->ndim); /* the final buffer */
        if (cft_failed(x))
            return cft__tree_err(x);
        size_t count = (size_t)((e->end - e->begin) / (uint64_t)ty->size);
        size_t bytes = (size_t)(e->end - e->begin);
        if (count && native(ty, dt)) {
            if (!read_at(fd, cft__ptr(x), bytes, data_at + e->begin))
                return fail(path, "tensor '%.128s': short read (did the file change?)",
                            H->names + e->name);
            if (!cft__host_le())
                cft__bswap(cft__ptr(x),
                           dt == CFT_C64    ? 4
                           : dt == CFT_C128 ? 8
                                            : (size_t)ty->size,
                           dt == CFT_C64 || dt == CFT_C128 ? 2 * count : count);
        } else if (count) {
            unsigned char *raw = malloc(bytes);
            if (!raw)
                return cft__tree_err(cft__oom());
            bool ok = read_at(fd, raw, bytes, data_at + e->begin);
            if (ok)
                decode(ty, dt, raw, count, cft__ptr(x));
            free(raw);
            if (!ok)
                return fail(path, "tensor '%.128s': short read (did the file change?)",
                            H->names + e->name);
        }
        t->names[i] = cft__strdup(H->names + e->name);
        t->xs[i] = x;
        if (!t->names[i])
            return cft__tree_err(cft__oom());
    }
    const char **mv = CFT_NEWN(const char *, 2 * H->nmeta + 1);
    if (!mv)
        return cft__tree_err(cft__oom());
    for (int i = 0; i < 2 * H->nmeta; i++)
        if (!(mv[i] = cft__strdup(H->names + H->meta[i])))
            return cft__tree_err(cft__oom());
    if (meta)
        *meta = mv;
    if (nmeta)
        *nmeta = H->nmeta;
    return t;
}

cft_array *cft__st_open(const char *path, int fd, cft_st_header *H, uint64_t *data_at,
                        uint64_t *data_len) {
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return cft_tree_error(fail(path, "cannot stat: %s", strerror(errno)));
    if (!S_ISREG(sb.st_mode))
        return cft_tree_error(fail(path, "not a regular file (a %s)",
                                   S_ISFIFO(sb.st_mode)   ? "FIFO"
                                   : S_ISDIR(sb.st_mode)  ? "directory"
                                   : S_ISCHR(sb.st_mode)  ? "character device"
                                   : S_ISSOCK(sb.st_mode) ? "socket"
                                                          : "special file"));
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8)
        return cft_tree_error(fail(path,
                                   "truncated: %llu bytes, shorter than the 8-byte header length",
                                   (unsigned long long)size));
    unsigned char len8[8];
    if (!read_at(fd, len8, 8, 0))
        return cft_tree_error(fail(path, "cannot read the header length"));
    uint64_t hlen = rd_u64(len8), rest = size - 8;
    if (hlen > CFT_ST_MAX_HEADER)
        return cft_tree_error(fail(path, "header length %llu is implausible (over 100 MB)",
                                   (unsigned long long)hlen));
    if (hlen > rest)
        return cft_tree_error(
            fail(path, "truncated: the header claims %llu bytes but only %llu follow the length",
                 (unsigned long long)hlen, (unsigned long long)rest));
    if (hlen == 0)
        return cft_tree_error(fail(path, "the header is empty (not a JSON object)"));
    char err[512];
    char *text = malloc((size_t)hlen);
    if (!text)
        return cft__oom();
    cft_array *e = NULL;
    if (!read_at(fd, text, (size_t)hlen, 8))
        e = cft_tree_error(
            fail(path, "cannot read the %llu-byte header", (unsigned long long)hlen));
    else if (!cft__st_parse_header(text, (size_t)hlen, H, err, sizeof err))
        e = cft_tree_error(fail(path, "bad header: %s", err));
    free(text);
    *data_at = 8 + hlen, *data_len = rest - hlen;
    return e;
}

bool cft__st_read_at(int fd, void *buf, size_t n, uint64_t off) {
    return read_at(fd, buf, n, off);
}

const char *cft__st_check_entry(const cft_st_entry *e, uint64_t data_len, char *buf, size_t cap) {
    return check_entry(NULL, e, data_len, 0, buf, cap);
}

static cft_tree *load(const char *path, int fd, unsigned flags, const char ***meta, int *nmeta) {
    cft_st_header H;
    uint64_t data_at, data_len;
    cft_array *e = cft__st_open(path, fd, &H, &data_at, &data_len);
    if (e)
        return cft__tree_err(e);
    cft_tree *t = build(path, &H, fd, data_at, data_len, flags, meta, nmeta);
    cft__st_header_free(&H);
    return t;
}

cft_tree *cft_load_safetensors_ex(const char *path, unsigned flags, const char ***meta,
                                  int *nmeta) {
    CFT_API("cft_load_safetensors_ex");
    if (meta)
        *meta = NULL;
    if (nmeta)
        *nmeta = 0;
    if (!path || !*path)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_load_safetensors: empty or NULL path"));
    if (flags & ~(unsigned)CFT_ST_WIDEN)
        return cft__tree_err(
            cft__fail(CFT_E_ARG, "cft_load_safetensors: unknown flags 0x%x", flags));
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is then
     * refused as not a regular file) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return fail(path, "cannot open: %s", strerror(errno));
    cft_tree *t = load(path, fd, flags, meta, nmeta);
    close(fd);
    return t;
}

cft_tree *cft_load_safetensors(const char *path, const char ***meta, int *nmeta) {
    CFT_API("cft_load_safetensors");
    return cft_load_safetensors_ex(path, 0, meta, nmeta);
}
