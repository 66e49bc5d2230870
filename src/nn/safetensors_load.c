/* safetensors_load.c: reading a safetensors file into a parameter tree. The
 * file is treated as hostile: the header length is checked against the
 * file, the JSON (parsed with cJSON) against the format, every tensor's
 * byte range against the data and against its dtype and shape, and the
 * ranges against each other (they must tile the data exactly, as the
 * reference implementation requires). Any problem gives an error tree that
 * says what is wrong; nothing is read out of bounds. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nn/nn_internal.h"
#include "nn/safetensors.h"

/* file dtypes: size in bytes and the cft dtype they load as */
typedef struct {
    const char *name;
    int size;
    cft_dtype as;
} st_type;

static const st_type types[] = {
    {"BOOL", 1, CFT_BOOL}, {"I32", 4, CFT_I32}, {"I64", 8, CFT_I64},  {"F32", 4, CFT_F32},
    {"F64", 8, CFT_F64},   {"F16", 2, CFT_F32}, {"BF16", 2, CFT_F32}, {"I8", 1, CFT_I32},
    {"U8", 1, CFT_I32},    {"I16", 2, CFT_I32}, {"U16", 2, CFT_I32},  {"U32", 4, CFT_I64},
};

typedef struct {
    const char *name;
    const st_type *type;
    int ndim;
    int64_t shape[CFT_MAX_NDIM];
    uint64_t begin, end;
} entry;

static cft_tree *fail(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cft_tree *fail(const char *path, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cft__tree_err(cft__fail(CFT_E_IO, "cft_load_safetensors: %s: %s", path, msg));
}

/* a JSON number that is a non-negative integer below 2^53 */
static bool as_count(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j))
        return false;
    double v = j->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || v != floor(v))
        return false;
    *out = (uint64_t)v;
    return true;
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

/* decode n little-endian elements of type t from p into the cft dtype t->as */
static void *decode(const st_type *t, const unsigned char *p, size_t n) {
    void *out = malloc(n ? n * cft_dtype_size(t->as) : 1);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *q = p + i * (size_t)t->size;
        const char *k = t->name;
        if (!strcmp(k, "BOOL"))
            ((bool *)out)[i] = q[0] != 0;
        else if (!strcmp(k, "I32") || !strcmp(k, "F32")) {
            uint32_t v = rd_u32(q);
            memcpy((char *)out + 4 * i, &v, 4);
        } else if (!strcmp(k, "I64") || !strcmp(k, "F64")) {
            uint64_t v = rd_u64(q);
            memcpy((char *)out + 8 * i, &v, 8);
        } else if (!strcmp(k, "F16"))
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
    return out;
}

/* parse one tensor's header entry; NULL on success, else a message */
static const char *parse_entry(const cJSON *j, entry *e, uint64_t data_len, char *buf, size_t cap) {
    if (!cJSON_IsObject(j))
        return "is not an object";
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs))
        return "needs a string \"dtype\", an array \"shape\" and an array \"data_offsets\"";
    e->type = NULL;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(dt->valuestring, types[i].name))
            e->type = &types[i];
    if (!e->type) {
        snprintf(buf, cap, "has unsupported dtype \"%.32s\"", dt->valuestring);
        return buf;
    }
    int nd = cJSON_GetArraySize(shape);
    if (nd > CFT_MAX_NDIM) {
        snprintf(buf, cap, "has %d dims, more than %d", nd, CFT_MAX_NDIM);
        return buf;
    }
    e->ndim = nd;
    uint64_t numel = 1, v;
    bool zero = false;
    for (int d = 0; d < nd; d++) {
        if (!as_count(cJSON_GetArrayItem(shape, d), &v))
            return "has a shape entry that is not a non-negative integer";
        e->shape[d] = (int64_t)v;
        if (v == 0)
            zero = true;
        else if (!zero && numel > (UINT64_MAX / 16) / v)
            return "has a shape too large to address";
        else if (!zero)
            numel *= v;
    }
    if (zero)
        numel = 0;
    if (cJSON_GetArraySize(offs) != 2 || !as_count(cJSON_GetArrayItem(offs, 0), &e->begin) ||
        !as_count(cJSON_GetArrayItem(offs, 1), &e->end))
        return "has data_offsets that are not two non-negative integers";
    if (e->begin > e->end || e->end > data_len) {
        snprintf(buf, cap, "has data_offsets [%llu, %llu] out of range for %llu data bytes",
                 (unsigned long long)e->begin, (unsigned long long)e->end,
                 (unsigned long long)data_len);
        return buf;
    }
    if (e->end - e->begin != numel * (uint64_t)e->type->size) {
        snprintf(buf, cap, "has %llu data bytes but dtype %s and shape need %llu",
                 (unsigned long long)(e->end - e->begin), e->type->name,
                 (unsigned long long)(numel * (uint64_t)e->type->size));
        return buf;
    }
    return NULL;
}

static int by_begin(const void *a, const void *b) {
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* the parsed header -> tree (and metadata); data: data_len bytes */
static cft_tree *build(const char *path, const cJSON *root, const unsigned char *data,
                       uint64_t data_len, const char ***meta, int *nmeta) {
    int n = 0, nm = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        if (!it->string)
            return fail(path, "header entry without a name");
        if (strcmp(it->string, "__metadata__"))
            n++;
        else if (!cJSON_IsObject(it))
            return fail(path, "__metadata__ is not an object");
        else
            nm = cJSON_GetArraySize(it);
    }
    entry *es = CFT_NEWN(entry, n + 1);
    entry **order = CFT_NEWN(entry *, n + 1);
    const char **mv = CFT_NEWN(const char *, 2 * nm + 1);
    if (!es || !order || !mv)
        return cft__tree_err(cft__oom());
    int k = 0, m = 0;
    char buf[256];
    cJSON_ArrayForEach(it, root) {
        if (!strcmp(it->string, "__metadata__")) {
            const cJSON *kv;
            cJSON_ArrayForEach(kv, it) {
                if (!cJSON_IsString(kv))
                    return fail(path, "__metadata__ value of '%.64s' is not a string", kv->string);
                mv[m++] = cft__strdup(kv->string);
                mv[m++] = cft__strdup(kv->valuestring);
            }
            continue;
        }
        for (int j = 0; j < k; j++)
            if (!strcmp(es[j].name, it->string))
                return fail(path, "duplicate tensor name '%.128s'", it->string);
        const char *why = parse_entry(it, &es[k], data_len, buf, sizeof buf);
        if (why)
            return fail(path, "tensor '%.128s' %s", it->string, why);
        es[k].name = it->string;
        order[k] = &es[k];
        k++;
    }
    /* the ranges must tile [0, data_len) with no gap or overlap */
    qsort(order, (size_t)n, sizeof *order, by_begin);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (order[i]->begin != at)
            return fail(path,
                        "tensor '%.128s' starts at byte %llu, expected %llu (ranges overlap or "
                        "leave a gap)",
                        order[i]->name, (unsigned long long)order[i]->begin,
                        (unsigned long long)at);
        at = order[i]->end;
    }
    if (at != data_len)
        return fail(path, "the tensors cover %llu data bytes but the file holds %llu",
                    (unsigned long long)at, (unsigned long long)data_len);
    cft_tree *t = cft__tree_alloc(n);
    if (t->err)
        return t;
    for (int i = 0; i < n; i++) {
        entry *e = &es[i];
        size_t count = (size_t)((e->end - e->begin) / (uint64_t)e->type->size);
        void *vals = decode(e->type, data + e->begin, count);
        if (!vals)
            return cft__tree_err(cft__oom());
        t->names[i] = cft__strdup(e->name);
        t->xs[i] = cft_from_data(vals, e->type->as, e->shape, e->ndim);
        free(vals);
        if (!t->names[i])
            return cft__tree_err(cft__oom());
        if (cft_failed(t->xs[i]))
            return cft__tree_err(t->xs[i]);
    }
    for (int i = 0; i < m; i++)
        if (!mv[i])
            return cft__tree_err(cft__oom());
    if (meta)
        *meta = mv;
    if (nmeta)
        *nmeta = m / 2;
    return t;
}

static cft_tree *load(const char *path, FILE *f, const char ***meta, int *nmeta) {
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
        return fail(path, "not a regular file");
    if (fseek(f, 0, SEEK_END) != 0)
        return fail(path, "cannot seek");
    long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0)
        return fail(path, "cannot tell the file size");
    unsigned char len8[8];
    if (size < 8 || fread(len8, 1, 8, f) != 8)
        return fail(path, "truncated: %ld bytes, shorter than the 8-byte header length", size);
    uint64_t hlen = rd_u64(len8), rest = (uint64_t)size - 8;
    if (hlen > CFT_ST_MAX_HEADER)
        return fail(path, "header length %llu is implausible (over 100 MB)",
                    (unsigned long long)hlen);
    if (hlen > rest)
        return fail(path, "truncated: the header claims %llu bytes but only %llu follow the length",
                    (unsigned long long)hlen, (unsigned long long)rest);
    unsigned char *bytes = malloc((size_t)rest + 1);
    if (!bytes)
        return cft__tree_err(cft__oom());
    if (fread(bytes, 1, (size_t)rest, f) != (size_t)rest) {
        free(bytes);
        return fail(path, "read error");
    }
    const char *end = NULL;
    cJSON *root =
        hlen ? cJSON_ParseWithLengthOpts((const char *)bytes, (size_t)hlen, &end, 0) : NULL;
    cft_tree *t = NULL;
    if (!root) {
        size_t at = end ? (size_t)(end - (const char *)bytes) : 0;
        const char *err = cJSON_GetErrorPtr();
        if (err && err >= (const char *)bytes && err <= (const char *)bytes + hlen)
            at = (size_t)(err - (const char *)bytes);
        t = fail(path, "the %llu-byte header is not valid JSON (error near byte %zu)",
                 (unsigned long long)hlen, at);
    } else if (!cJSON_IsObject(root) || bytes[0] != '{') {
        t = fail(path, "the header is not a JSON object");
    } else {
        for (const char *p = end; p && p < (const char *)bytes + hlen && !t; p++)
            if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
                t = fail(path, "the header has trailing bytes after its JSON object");
        if (!t)
            t = build(path, root, bytes + hlen, rest - hlen, meta, nmeta);
    }
    cJSON_Delete(root);
    free(bytes);
    return t;
}

cft_tree *cft_load_safetensors(const char *path, const char ***meta, int *nmeta) {
    if (meta)
        *meta = NULL;
    if (nmeta)
        *nmeta = 0;
    if (!path || !*path)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_load_safetensors: empty or NULL path"));
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(path, "cannot open: %s", strerror(errno));
    cft_tree *t = load(path, f, meta, nmeta);
    fclose(f);
    return t;
}
