/* wire.c: the RPC header on the wire and back. Layout (native byte order:
 * the ranks of one job share an architecture):
 *   u32 magic, u16 version, u16 kind, u64 id, i64 rref,
 *   u16 name_len, u16 msg_len, u16 nargs, u16 flags (1: inline data),
 *   name, msg,
 *   per argument: u8 dtype, u8 ndim, u8 is_rref, u8 reserved, then
 *   i32 owner + i64 rref id (an RRef) or ndim i64 dims; with inline data,
 *   the arrays' bytes in order.
 * The decoder treats the bytes as hostile: every length, kind, dtype, rank
 * and dim is checked, and the element count of every array goes through
 * cft__check_size before anything is allocated for it. */
#include "dist/rpc/wire.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "core/error.h"

#define FIXED 32 /* the bytes before the name */

size_t cft__rpc_data_bytes(const rpc_header *h) {
    size_t n = 0; /* saturating: each array is checked, their sum is not */
    for (int i = 0; i < h->nargs; i++)
        if (h->arg_rref[i] < 0) {
            size_t k = (size_t)cft__numel(h->avals[i].shape, h->avals[i].ndim) *
                       cft_dtype_size(h->avals[i].dtype);
            n = n + k < n ? SIZE_MAX : n + k;
        }
    return n;
}

size_t cft__rpc_header_size(const rpc_header *h) {
    size_t n = FIXED + strlen(h->name) + strlen(h->msg);
    for (int i = 0; i < h->nargs; i++)
        n += 4 + (h->arg_rref[i] >= 0 ? 12 : 8 * (size_t)h->avals[i].ndim);
    return n;
}

static void put(uint8_t **p, const void *v, size_t n) {
    memcpy(*p, v, n);
    *p += n;
}

size_t cft__rpc_encode(const rpc_header *h, uint8_t *buf, size_t cap) {
    size_t need = cft__rpc_header_size(h);
    if (need > cap || h->nargs < 0 || h->nargs > RPC_MAX_ARGS)
        return 0;
    uint8_t *p = buf;
    uint32_t magic = RPC_MAGIC;
    uint16_t ver = RPC_VERSION, kind = (uint16_t)h->kind, flags = h->inline_data ? 1 : 0;
    uint16_t nl = (uint16_t)strlen(h->name), ml = (uint16_t)strlen(h->msg);
    uint16_t na = (uint16_t)h->nargs;
    put(&p, &magic, 4), put(&p, &ver, 2), put(&p, &kind, 2);
    put(&p, &h->id, 8), put(&p, &h->rref, 8);
    put(&p, &nl, 2), put(&p, &ml, 2), put(&p, &na, 2), put(&p, &flags, 2);
    put(&p, h->name, nl), put(&p, h->msg, ml);
    for (int i = 0; i < h->nargs; i++) {
        bool r = h->arg_rref[i] >= 0;
        uint8_t b[4] = {(uint8_t)h->avals[i].dtype, (uint8_t)(r ? 0 : h->avals[i].ndim), r, 0};
        put(&p, b, 4);
        if (r) {
            int32_t owner = h->arg_owner[i];
            put(&p, &owner, 4), put(&p, &h->arg_rref[i], 8);
        } else
            put(&p, h->avals[i].shape, 8 * (size_t)h->avals[i].ndim);
    }
    return (size_t)(p - buf);
}

/* the next n bytes, or false at the end */
static bool take(const uint8_t **p, const uint8_t *end, void *v, size_t n) {
    if ((size_t)(end - *p) < n)
        return false;
    memcpy(v, *p, n);
    *p += n;
    return true;
}

#define BAD(...) cft__fail(CFT_E_IO, "RPC message: " __VA_ARGS__)

cft_array *cft__rpc_decode(const uint8_t *buf, size_t n, rpc_header *h) {
    const uint8_t *p = buf, *end = buf + n;
    uint32_t magic;
    uint16_t ver, kind, nl, ml, na, flags;
    h->name[0] = h->msg[0] = 0, h->nargs = 0, h->inline_data = 0, h->data_off = 0;
    if (!take(&p, end, &magic, 4) || !take(&p, end, &ver, 2) || !take(&p, end, &kind, 2) ||
        !take(&p, end, &h->id, 8) || !take(&p, end, &h->rref, 8) || !take(&p, end, &nl, 2) ||
        !take(&p, end, &ml, 2) || !take(&p, end, &na, 2) || !take(&p, end, &flags, 2))
        return BAD("%zu bytes, shorter than a header (%d)", n, FIXED);
    if (magic != RPC_MAGIC || ver != RPC_VERSION)
        return BAD("not a cft RPC header (magic %#x, version %u)", magic, ver);
    if (flags > 1)
        return BAD("flags %#x", flags);
    h->inline_data = flags;
    if (kind < RPC_CALL || kind >= RPC_KINDS)
        return BAD("unknown kind %u", kind);
    h->kind = kind;
    if (nl > RPC_MAX_NAME || ml > RPC_MAX_MSG || na > RPC_MAX_ARGS)
        return BAD("name of %u, message of %u bytes or %u arguments (at most %d, %d, %d)", nl, ml,
                   na, RPC_MAX_NAME, RPC_MAX_MSG, RPC_MAX_ARGS);
    if (!take(&p, end, h->name, nl) || !take(&p, end, h->msg, ml))
        return BAD("the name or message runs past the end");
    h->name[nl] = h->msg[ml] = 0;
    if (memchr(h->name, 0, nl) || memchr(h->msg, 0, ml))
        return BAD("a NUL byte inside the name or message");
    h->nargs = na;
    for (int i = 0; i < na; i++) {
        uint8_t b[4];
        if (!take(&p, end, b, 4))
            return BAD("argument %d runs past the end", i);
        h->arg_rref[i] = -1;
        h->avals[i].dtype = (cft_dtype)b[0];
        h->avals[i].ndim = b[1];
        if (b[2] > 1 || b[3] || (b[2] && b[1]))
            return BAD("argument %d: flags %u %u, %u dims", i, b[2], b[3], b[1]);
        if (b[2]) {
            int32_t owner;
            if (!take(&p, end, &owner, 4) || !take(&p, end, &h->arg_rref[i], 8))
                return BAD("argument %d runs past the end", i);
            if (owner < 0 || h->arg_rref[i] < 0)
                return BAD("argument %d: RRef %lld on worker %d", i, (long long)h->arg_rref[i],
                           owner);
            h->arg_owner[i] = owner;
            continue;
        }
        if (b[0] >= CFT_NDTYPES || b[1] > CFT_MAX_NDIM)
            return BAD("argument %d: dtype %u, %u dims", i, b[0], b[1]);
        if (!take(&p, end, h->avals[i].shape, 8 * (size_t)b[1]))
            return BAD("argument %d's shape runs past the end", i);
        cft_array *e = cft__check_size("RPC message", h->avals[i].dtype, h->avals[i].shape,
                                       h->avals[i].ndim, NULL, NULL);
        if (e)
            return e;
    }
    h->data_off = (size_t)(p - buf);
    size_t rest = (size_t)(end - p);
    if (h->inline_data ? rest != cft__rpc_data_bytes(h) : rest != 0)
        return BAD("%zu bytes after the header%s", rest,
                   h->inline_data ? ", not the arrays' bytes" : "");
    return NULL;
}

cft_array *cft__rpc_parse_spec(const char *s, rpc_spec *out) {
    memset(out, 0, sizeof *out);
    size_t n = strlen(s);
    if (n == 0 || n > RPC_MAX_NAME)
        return BAD("a function name of %zu bytes (1 to %d)", n, RPC_MAX_NAME);
    const char *p = s;
    for (const char *slash; (slash = strchr(p, '/')); p = slash + 1) {
        if (out->nops == RPC_MAX_OPS)
            return BAD("'%s': more than %d transforms", s, RPC_MAX_OPS);
        size_t k = (size_t)(slash - p);
        int i = out->nops++;
        if (k == 3 && !strncmp(p, "jvp", 3))
            out->op[i] = SPEC_JVP;
        else if (k == 3 && !strncmp(p, "vjp", 3))
            out->op[i] = SPEC_VJP;
        else if (k > 5 && !strncmp(p, "vmap:", 5)) {
            out->op[i] = SPEC_VMAP;
            const char *q = p + 5;
            while (q < slash) {
                if (out->naxes[i] == RPC_MAX_ARGS)
                    return BAD("'%s': more than %d vmap axes", s, RPC_MAX_ARGS);
                int sign = 1, v = 0, digits = 0;
                if (*q == '-')
                    sign = -1, q++;
                for (; q < slash && *q >= '0' && *q <= '9' && digits < 3; q++, digits++)
                    v = v * 10 + (*q - '0');
                if (!digits || (sign < 0 && v != 1) || v >= CFT_MAX_NDIM + 1)
                    return BAD("'%s': a vmap axis is not -1 or 0..%d", s, CFT_MAX_NDIM);
                out->axes[i][out->naxes[i]++] = sign * v;
                if (q < slash && *q++ != ',')
                    return BAD("'%s': vmap axes are separated by commas", s);
            }
        } else
            return BAD("'%s': unknown transform '%.*s'", s, (int)(k < 16 ? k : 16), p);
    }
    if (!*p)
        return BAD("'%s': no function name", s);
    for (const char *c = p; *c; c++)
        if (*c == ':' || *c == ',' || (unsigned char)*c < 32)
            return BAD("'%s': the function name has a '%c'", s, *c < 32 ? '?' : *c);
    snprintf(out->fname, sizeof out->fname, "%s", p);
    return NULL;
}
