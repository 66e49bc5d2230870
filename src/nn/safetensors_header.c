/* safetensors_header.c: the parser of a safetensors header, the JSON text
 * that names each tensor's dtype, shape and byte range. The header comes
 * from outside and is hostile until proven otherwise, so this is a single
 * pass over its bytes for exactly the format's schema, not a general JSON
 * tree: time is linear in the header (duplicate names are found through a
 * hash set, not by comparing pairs), and memory is one entry per tensor
 * plus the decoded names, a small multiple of the header's size (a generic
 * JSON tree took 40x). Every JSON rule that matters is enforced: strings
 * with escapes and surrogate pairs decoded to UTF-8, no control characters,
 * integers only where the format wants counts, no duplicate keys at any
 * level (`__metadata__` included), nothing after the object but spaces.
 * The format's dtype table lives here too (the loader and saver use it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/safetensors.h"

/* the format's dtypes: name, element size, the cft dtype each loads as
 * (and as when widening) */
const cft_st_type cft__st_types[] = {
    {"BOOL", 1, CFT_BOOL, CFT_BOOL}, {"I32", 4, CFT_I32, CFT_I32},     {"I64", 8, CFT_I64, CFT_I64},
    {"F32", 4, CFT_F32, CFT_F32},    {"F64", 8, CFT_F64, CFT_F64},     {"F16", 2, CFT_F16, CFT_F32},
    {"BF16", 2, CFT_BF16, CFT_F32},  {"I8", 1, CFT_I32, CFT_I32},      {"U8", 1, CFT_I32, CFT_I32},
    {"I16", 2, CFT_I32, CFT_I32},    {"U16", 2, CFT_I32, CFT_I32},     {"U32", 4, CFT_I64, CFT_I64},
    {"C64", 8, CFT_C64, CFT_C64},    {"C128", 16, CFT_C128, CFT_C128}, {NULL, 0, 0, 0},
};

int cft__st_dtype_of(const char *name) {
    for (int i = 0; cft__st_types[i].name; i++)
        if (!strcmp(name, cft__st_types[i].name))
            return i;
    return -1;
}

const char *cft__st_name_of(cft_dtype dt) {
    for (int i = 0; cft__st_types[i].name; i++)
        if (cft__st_types[i].as == dt && cft__st_types[i].size == (int)cft_dtype_size(dt))
            return cft__st_types[i].name;
    return NULL;
}

typedef struct {
    const char *p, *end, *start;
    char *names; /* decoded strings, one after another */
    size_t nlen, ncap;
    char *err;
    size_t errn;
} parser;

static bool fail(parser *P, const char *fmt, const char *detail) {
    if (P->err && !P->err[0]) {
        char msg[200];
        snprintf(msg, sizeof msg, fmt, detail ? detail : "");
        snprintf(P->err, P->errn, "%s (header byte %zu)", msg, (size_t)(P->p - P->start));
    }
    return false;
}

static void ws(parser *P) {
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r'))
        P->p++;
}

static bool expect(parser *P, char c) {
    ws(P);
    if (P->p >= P->end || *P->p != c) {
        char want[2] = {c, 0};
        return fail(P, "expected '%s'", want);
    }
    P->p++;
    return true;
}

static bool put(parser *P, const char *s, size_t n) {
    if (P->nlen + n + 1 > P->ncap) {
        size_t cap = P->ncap ? P->ncap : 256;
        while (cap < P->nlen + n + 1)
            cap *= 2;
        char *q = realloc(P->names, cap);
        if (!q)
            return fail(P, "out of memory%s", "");
        P->names = q, P->ncap = cap;
    }
    memcpy(P->names + P->nlen, s, n);
    P->nlen += n;
    return true;
}

static int hex(int c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static bool u4(parser *P, unsigned *out) {
    if (P->end - P->p < 4)
        return fail(P, "truncated \\u escape%s", "");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex((unsigned char)P->p[i]);
        if (h < 0)
            return fail(P, "bad \\u escape%s", "");
        v = v * 16 + (unsigned)h;
    }
    P->p += 4;
    *out = v;
    return true;
}

/* a JSON string, decoded (NUL-terminated) into P->names; *off: its start */
static bool string(parser *P, size_t *off, size_t *len) {
    ws(P);
    if (P->p >= P->end || *P->p != '"')
        return fail(P, "expected a string%s", "");
    P->p++;
    *off = P->nlen;
    for (;;) {
        const char *run = P->p; /* copy plain runs at once */
        while (P->p < P->end && *P->p != '"' && *P->p != '\\' && (unsigned char)*P->p >= 0x20)
            P->p++;
        if (!put(P, run, (size_t)(P->p - run)))
            return false;
        if (P->p >= P->end)
            return fail(P, "unterminated string%s", "");
        char c = *P->p++;
        if (c == '"')
            break;
        if (c != '\\')
            return fail(P, "control character in a string%s", "");
        if (P->p >= P->end)
            return fail(P, "unterminated string%s", "");
        char e = *P->p++, one;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            one = e;
            break;
        case 'b':
            one = '\b';
            break;
        case 'f':
            one = '\f';
            break;
        case 'n':
            one = '\n';
            break;
        case 'r':
            one = '\r';
            break;
        case 't':
            one = '\t';
            break;
        case 'u': {
            unsigned cp, lo;
            if (!u4(P, &cp))
                return false;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return fail(P, "lone low surrogate in a string%s", "");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (P->end - P->p < 2 || P->p[0] != '\\' || P->p[1] != 'u')
                    return fail(P, "lone high surrogate in a string%s", "");
                P->p += 2;
                if (!u4(P, &lo))
                    return false;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail(P, "bad surrogate pair in a string%s", "");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp == 0)
                return fail(P, "NUL character in a string%s", "");
            char u[4];
            size_t n;
            if (cp < 0x80)
                u[0] = (char)cp, n = 1;
            else if (cp < 0x800)
                u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
            else if (cp < 0x10000)
                u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
                u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
            else
                u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
                u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
            if (!put(P, u, n))
                return false;
            continue;
        }
        default:
            return fail(P, "bad escape in a string%s", "");
        }
        if (!put(P, &one, 1))
            return false;
    }
    *len = P->nlen - *off;
    if (memchr(P->names + *off, 0, *len))
        return fail(P, "NUL character in a string%s", "");
    char z = 0;
    return put(P, &z, 1);
}

/* a non-negative integer below 2^62 (no sign, fraction or exponent) */
static bool count(parser *P, uint64_t *out, const char *what) {
    ws(P);
    if (P->p >= P->end || *P->p < '0' || *P->p > '9')
        return fail(P, "%s must be a non-negative integer", what);
    if (*P->p == '0' && P->end - P->p > 1 && P->p[1] >= '0' && P->p[1] <= '9')
        return fail(P, "%s has a leading zero", what);
    uint64_t v = 0;
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9') {
        v = v * 10 + (uint64_t)(*P->p++ - '0');
        if (v >= ((uint64_t)1 << 62))
            return fail(P, "%s is too large", what);
    }
    if (P->p < P->end && (*P->p == '.' || *P->p == 'e' || *P->p == 'E'))
        return fail(P, "%s must be an integer", what);
    *out = v;
    return true;
}

/* ---- the set of names seen (open addressing over the decoded names) ---- */

typedef struct {
    size_t *slot; /* name offset + 1; 0: empty */
    size_t cap, n;
} nameset;

static uint64_t hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* add the name at off; false if present (or out of memory: *oom) */
static bool set_add(nameset *S, const parser *P, size_t off, size_t len, bool *oom) {
    if (2 * (S->n + 1) > S->cap) {
        size_t cap = S->cap ? 2 * S->cap : 64;
        size_t *slot = calloc(cap, sizeof *slot);
        if (!slot) {
            *oom = true;
            return false;
        }
        for (size_t i = 0; i < S->cap; i++)
            if (S->slot[i]) {
                const char *s = P->names + S->slot[i] - 1;
                size_t j = hash(s, strlen(s)) & (cap - 1);
                while (slot[j])
                    j = (j + 1) & (cap - 1);
                slot[j] = S->slot[i];
            }
        free(S->slot);
        S->slot = slot, S->cap = cap;
    }
    const char *name = P->names + off;
    size_t j = hash(name, len) & (S->cap - 1);
    while (S->slot[j]) {
        const char *s = P->names + S->slot[j] - 1;
        if (!strcmp(s, name))
            return false;
        j = (j + 1) & (S->cap - 1);
    }
    S->slot[j] = off + 1;
    S->n++;
    return true;
}

/* ---- the schema ---- */

static bool metadata(parser *P, cft_st_header *H) {
    if (!expect(P, '{'))
        return false;
    nameset keys = {0};
    bool ok = true, first = true, oom = false;
    ws(P);
    if (P->p < P->end && *P->p == '}') {
        P->p++;
        return true;
    }
    while (ok) {
        if (!first && !expect(P, ','))
            break;
        first = false;
        size_t ko, kl, vo, vl;
        if (!string(P, &ko, &kl) || !expect(P, ':'))
            break;
        ws(P);
        if (P->p >= P->end || *P->p != '"') {
            fail(P, "__metadata__ value of '%.64s' is not a string", P->names + ko);
            break;
        }
        if (!string(P, &vo, &vl))
            break;
        if (!set_add(&keys, P, ko, kl, &oom)) {
            fail(P, oom ? "out of memory%s" : "duplicate __metadata__ key '%.64s'",
                 oom ? "" : P->names + ko);
            break;
        }
        if (H->nmeta == H->capmeta) {
            int cap = H->capmeta ? 2 * H->capmeta : 8;
            size_t *m = realloc(H->meta, sizeof(size_t) * 2 * (size_t)cap);
            if (!m) {
                fail(P, "out of memory%s", "");
                break;
            }
            H->meta = m, H->capmeta = cap;
        }
        H->meta[2 * H->nmeta] = ko, H->meta[2 * H->nmeta + 1] = vo;
        H->nmeta++;
        ws(P);
        if (P->p < P->end && *P->p == '}') {
            P->p++;
            free(keys.slot);
            return true;
        }
    }
    free(keys.slot);
    return false;
}

static bool tensor(parser *P, cft_st_entry *e) {
    ws(P);
    if (P->p >= P->end || *P->p != '{')
        return fail(P, "a tensor entry must be a JSON object%s", "");
    P->p++;
    bool have[3] = {false, false, false};
    for (bool first = true;; first = false) {
        ws(P);
        if (P->p < P->end && *P->p == '}' && !first) {
            P->p++;
            break;
        }
        if (!first && !expect(P, ','))
            return false;
        size_t ko, kl;
        if (!string(P, &ko, &kl) || !expect(P, ':'))
            return false;
        const char *k = P->names + ko;
        int which = !strcmp(k, "dtype")          ? 0
                    : !strcmp(k, "shape")        ? 1
                    : !strcmp(k, "data_offsets") ? 2
                                                 : -1;
        P->nlen = ko; /* the key is not kept */
        if (which < 0)
            return fail(P, "unknown key '%.64s' in a tensor entry", k);
        if (have[which])
            return fail(P, "duplicate key '%s' in a tensor entry",
                        which == 0   ? "dtype"
                        : which == 1 ? "shape"
                                     : "data_offsets");
        have[which] = true;
        if (which == 0) {
            size_t vo, vl;
            if (!string(P, &vo, &vl))
                return false;
            e->dtype = cft__st_dtype_of(P->names + vo);
            if (e->dtype < 0)
                return fail(P, "unsupported dtype \"%.32s\"", P->names + vo);
            P->nlen = vo;
        } else if (which == 1) {
            if (!expect(P, '['))
                return false;
            e->ndim = 0;
            ws(P);
            if (P->p < P->end && *P->p == ']') {
                P->p++;
                continue;
            }
            for (;;) {
                uint64_t v;
                if (e->ndim == CFT_ST_MAX_NDIM)
                    return fail(P, "a shape has more than %s dims", "8");
                if (!count(P, &v, "a shape entry"))
                    return false;
                e->shape[e->ndim++] = (int64_t)v;
                ws(P);
                if (P->p < P->end && *P->p == ']') {
                    P->p++;
                    break;
                }
                if (!expect(P, ','))
                    return false;
            }
        } else {
            uint64_t b, en;
            if (!expect(P, '[') || !count(P, &b, "data_offsets") || !expect(P, ',') ||
                !count(P, &en, "data_offsets") || !expect(P, ']'))
                return fail(P, "data_offsets must be two non-negative integers%s", "");
            e->begin = b, e->end = en;
        }
    }
    if (!have[0] || !have[1] || !have[2])
        return fail(P, "a tensor entry needs \"dtype\", \"shape\" and \"data_offsets\"%s", "");
    return true;
}

bool cft__st_parse_header(const char *buf, size_t len, cft_st_header *H, char *err, size_t errn) {
    memset(H, 0, sizeof *H);
    parser P = {.p = buf, .end = buf + len, .start = buf, .err = err, .errn = errn};
    if (err && errn)
        err[0] = 0;
    nameset names = {0};
    bool ok = false, oom = false;
    ws(&P);
    if (P.p >= P.end || *P.p != '{') {
        fail(&P, "the header is not a JSON object%s", "");
        goto done;
    }
    P.p++;
    ws(&P);
    if (P.p < P.end && *P.p == '}') {
        P.p++;
        ok = true;
    }
    for (bool first = true; !ok; first = false) {
        if (!first && !expect(&P, ','))
            goto done;
        size_t ko, kl;
        if (!string(&P, &ko, &kl) || !expect(&P, ':'))
            goto done;
        if (!set_add(&names, &P, ko, kl, &oom)) {
            fail(&P, oom ? "out of memory%s" : "duplicate name '%.128s'", oom ? "" : P.names + ko);
            goto done;
        }
        if (!strcmp(P.names + ko, "__metadata__")) {
            if (!metadata(&P, H))
                goto done;
        } else {
            if (H->n == H->cap) {
                int cap = H->cap ? 2 * H->cap : 16;
                cft_st_entry *es = realloc(H->e, sizeof *es * (size_t)cap);
                if (!es) {
                    fail(&P, "out of memory%s", "");
                    goto done;
                }
                H->e = es, H->cap = cap;
            }
            cft_st_entry *e = &H->e[H->n];
            memset(e, 0, sizeof *e);
            e->name = ko;
            if (!tensor(&P, e)) {
                char msg[300];
                snprintf(msg, sizeof msg, "tensor '%.128s': %s", P.names + ko, err ? err : "");
                if (err)
                    snprintf(err, errn, "%s", msg);
                goto done;
            }
            H->n++;
        }
        ws(&P);
        if (P.p < P.end && *P.p == '}') {
            P.p++;
            ok = true;
        }
    }
    ws(&P);
    if (P.p != P.end) {
        fail(&P, "the header has trailing bytes after its JSON object%s", "");
        ok = false;
    }
done:
    free(names.slot);
    H->names = P.names;
    if (!ok) {
        if (err && errn && !err[0])
            snprintf(err, errn, "the header is not valid JSON");
        cft__st_header_free(H);
    }
    return ok;
}

void cft__st_header_free(cft_st_header *H) {
    free(H->e);
    free(H->meta);
    free(H->names);
    memset(H, 0, sizeof *H);
}
