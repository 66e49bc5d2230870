/* checkpoint_meta.c: the metadata.json of a sharded checkpoint, written and
 * read back. Reading treats the text as hostile: every field is checked
 * (format and version, dtype names, shapes through the one size check,
 * file names plain, names unique, and each array's pieces tiling its rows
 * exactly), so a loader can trust what it gets. It has a libFuzzer target. */
#include "nn/checkpoint.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "core/error.h"
#include "core/mem.h"
#include "nn/safetensors.h"

#define BAD(...) cft__fail(CFT_E_IO, "checkpoint metadata: " __VA_ARGS__)

int64_t cft__ckpt_rows(const ckpt_tensor *t) {
    return t->ndim ? t->shape[0] : 1;
}

bool cft__ckpt_file_ok(const char *f) {
    size_t n = strlen(f);
    if (n == 0 || n > CKPT_MAX_FILE || !strcmp(f, ".") || !strcmp(f, ".."))
        return false;
    for (const char *c = f; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_' || *c == '-'))
            return false;
    return true;
}

static int by_begin(const void *a, const void *b) {
    const ckpt_piece *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}
static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* an integer JSON number in [lo, hi] */
static bool get_int(const cJSON *j, int64_t lo, int64_t hi, int64_t *v) {
    if (!cJSON_IsNumber(j))
        return false;
    double d = j->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(int64_t)d)
        return false;
    *v = (int64_t)d;
    return true;
}

static cft_array *parse_tensor(const cJSON *j, ckpt_tensor *t) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
    const cJSON *pieces = cJSON_GetObjectItemCaseSensitive(j, "pieces");
    if (!cJSON_IsString(name) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) ||
        !cJSON_IsArray(pieces))
        return BAD("an array entry needs name, dtype, shape and pieces");
    size_t nl = strlen(name->valuestring);
    if (nl == 0 || nl > CKPT_MAX_NAME)
        return BAD("a name of %zu bytes (1 to %d)", nl, CKPT_MAX_NAME);
    t->name = cft__strdup(name->valuestring);
    int k = cft__st_dtype_of(dtype->valuestring);
    if (k < 0 || !cft__st_name_of(cft__st_types[k].as) ||
        strcmp(cft__st_name_of(cft__st_types[k].as), dtype->valuestring) != 0)
        return BAD("'%s': dtype '%.16s' is not one cft writes", t->name, dtype->valuestring);
    t->dtype = cft__st_types[k].as;
    int nd = cJSON_GetArraySize(shape);
    if (nd > CFT_MAX_NDIM)
        return BAD("'%s': %d dims", t->name, nd);
    t->ndim = nd;
    int d = 0;
    const cJSON *sd;
    cJSON_ArrayForEach(sd, shape) {
        if (!get_int(sd, 0, INT64_MAX, &t->shape[d]))
            return BAD("'%s': dim %d is not a size", t->name, d);
        d++;
    }
    cft_array *e = cft__check_size("checkpoint metadata", t->dtype, t->shape, nd, NULL, NULL);
    if (e)
        return e;
    int np = cJSON_GetArraySize(pieces);
    int64_t rows = cft__ckpt_rows(t);
    if (np < 1 || np > CKPT_MAX_PIECES)
        return BAD("'%s': %d pieces (1 to %d)", t->name, np, CKPT_MAX_PIECES);
    t->npieces = np;
    t->pieces = CFT_NEWN(ckpt_piece, np);
    if (!t->pieces)
        return cft__oom();
    /* (walked in order: cJSON_GetArrayItem walks the list from its head
     * each time, quadratic in the items) */
    int i = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, pieces) {
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(p, "file");
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "rows");
        if (!cJSON_IsString(file) || !cft__ckpt_file_ok(file->valuestring) || !cJSON_IsArray(r) ||
            cJSON_GetArraySize(r) != 2 ||
            !get_int(cJSON_GetArrayItem(r, 0), 0, rows, &t->pieces[i].begin) ||
            !get_int(cJSON_GetArrayItem(r, 1), 0, rows, &t->pieces[i].end) ||
            (t->pieces[i].begin >= t->pieces[i].end && rows > 0))
            return BAD("'%s': piece %d needs a plain file name and rows [begin, end) within %lld",
                       t->name, i, (long long)rows);
        snprintf(t->pieces[i].file, sizeof t->pieces[i].file, "%s", file->valuestring);
        i++;
    }
    qsort(t->pieces, (size_t)np, sizeof *t->pieces, by_begin);
    int64_t at = 0; /* the pieces tile [0, rows) */
    for (i = 0; i < np; i++) {
        if (t->pieces[i].begin != at)
            return BAD("'%s': rows %lld.. are %s", t->name, (long long)at,
                       t->pieces[i].begin > at ? "missing" : "in two pieces");
        at = t->pieces[i].end;
    }
    if (at != rows || (rows == 0 && np != 1))
        return BAD("'%s': rows %lld..%lld are missing", t->name, (long long)at, (long long)rows);
    return NULL;
}

cft_array *cft__ckpt_parse(const char *text, size_t len, ckpt_meta *m) {
    memset(m, 0, sizeof *m);
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root)
        return BAD("not JSON");
    cft_array *e = NULL;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    int64_t v = 0;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CKPT_FORMAT) != 0 ||
        !get_int(ver, 1, 1, &v) || !cJSON_IsArray(ts))
        e = BAD("not a cft checkpoint (format \"%s\" version 1 with tensors)", CKPT_FORMAT);
    int n = e ? 0 : cJSON_GetArraySize(ts);
    if (!e && n > CKPT_MAX_TENSORS)
        e = BAD("%d arrays (at most %d)", n, CKPT_MAX_TENSORS);
    if (!e && !(m->t = CFT_NEWN(ckpt_tensor, n + 1)))
        e = cft__oom();
    int i = 0;
    const cJSON *tj;
    if (!e)
        cJSON_ArrayForEach(tj, ts) {
            if ((e = parse_tensor(tj, &m->t[i++])))
                break;
        }
    cJSON_Delete(root);
    if (e)
        return e;
    m->n = n;
    const char **names = CFT_NEWN(const char *, n + 1); /* unique names */
    if (!names)
        return cft__oom();
    for (i = 0; i < n; i++)
        names[i] = m->t[i].name;
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i]))
            return BAD("'%s' is there twice", names[i]);
    return NULL;
}

char *cft__ckpt_format(const ckpt_meta *m) {
    cJSON *root = cJSON_CreateObject(), *ts;
    if (!root || !cJSON_AddStringToObject(root, "format", CKPT_FORMAT) ||
        !cJSON_AddNumberToObject(root, "version", 1) ||
        !(ts = cJSON_AddArrayToObject(root, "tensors"))) {
        cJSON_Delete(root);
        return NULL;
    }
    bool ok = true;
    for (int i = 0; ok && i < m->n; i++) {
        const ckpt_tensor *t = &m->t[i];
        cJSON *j = cJSON_CreateObject(), *shape, *pieces;
        ok = j && cJSON_AddItemToArray(ts, j) && cJSON_AddStringToObject(j, "name", t->name) &&
             cJSON_AddStringToObject(j, "dtype", cft__st_name_of(t->dtype)) &&
             (shape = cJSON_AddArrayToObject(j, "shape")) &&
             (pieces = cJSON_AddArrayToObject(j, "pieces"));
        for (int d = 0; ok && d < t->ndim; d++)
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        for (int k = 0; ok && k < t->npieces; k++) {
            cJSON *p = cJSON_CreateObject(), *r;
            ok = p && cJSON_AddItemToArray(pieces, p) &&
                 cJSON_AddStringToObject(p, "file", t->pieces[k].file) &&
                 (r = cJSON_AddArrayToObject(p, "rows")) &&
                 cJSON_AddItemToArray(r, cJSON_CreateNumber((double)t->pieces[k].begin)) &&
                 cJSON_AddItemToArray(r, cJSON_CreateNumber((double)t->pieces[k].end));
        }
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}
