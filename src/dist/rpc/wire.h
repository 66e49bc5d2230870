/* Internal: the RPC wire header (wire.c). A message is one header, then
 * one data message per array argument or result, in order. The header is
 * outside bytes: decoding checks every field. No MPI here. */
#ifndef CFT_RPC_WIRE_H
#define CFT_RPC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "cft/core.h"

#define RPC_MAGIC 0x52544643u /* "CFTR" */
#define RPC_VERSION 1
#define RPC_MAX_ARGS 64
#define RPC_MAX_NAME 127
#define RPC_MAX_MSG 1023

typedef enum {
    RPC_CALL = 1, /* run a function, reply with its results */
    RPC_REMOTE,   /* run a function, keep result 0 as RRef `rref` */
    RPC_FETCH,    /* reply with the value of RRef `rref` */
    RPC_DELETE,   /* a user reference to `rref` is gone (no reply) */
    RPC_REPLY,    /* results of call `id` */
    RPC_ERROR,    /* call `id` failed: msg */
    RPC_KINDS
} rpc_kind;

typedef struct {
    int kind;
    uint64_t id;  /* the caller's call id (replies name it) */
    int64_t rref; /* RPC_REMOTE / FETCH / DELETE: the RRef id, else -1 */
    char name[RPC_MAX_NAME + 1];
    char msg[RPC_MAX_MSG + 1];
    int nargs;
    cft_aval avals[RPC_MAX_ARGS];   /* argument i's shape and dtype, when sent */
    int64_t arg_rref[RPC_MAX_ARGS]; /* >= 0: argument i is that RRef's value (not sent) */
    int arg_owner[RPC_MAX_ARGS];    /* and its owner */
    int inline_data;                /* 1: the arrays' bytes follow the header in its message */
    size_t data_off;                /* decoded with inline_data: where they start */
} rpc_header;

/* Arrays whose bytes together are at most this travel inside the header's
 * message (one message per call and reply instead of 1 + arrays). */
#define RPC_INLINE_MAX 3072
/* The bytes of h's sent arrays (not RRefs). */
size_t cft__rpc_data_bytes(const rpc_header *h);

/* A call's target: a registered function under transforms, written
 * outermost first as "op/op/.../name" with op one of "jvp" (inputs x, t ->
 * output tangents), "vjp" (inputs x, output cotangents -> input
 * cotangents) and "vmap:a,b,..." (input i batched along axis a_i, -1 for
 * none; outputs batched along 0). */
#define RPC_MAX_OPS 8
enum { SPEC_JVP = 1, SPEC_VJP, SPEC_VMAP };
typedef struct {
    int nops;
    int op[RPC_MAX_OPS];
    int naxes[RPC_MAX_OPS];
    int axes[RPC_MAX_OPS][RPC_MAX_ARGS];
    char fname[RPC_MAX_NAME + 1];
} rpc_spec;
/* Parse a spec (outside bytes: every part checked): NULL or an error. */
cft_array *cft__rpc_parse_spec(const char *s, rpc_spec *out);

/* Bytes the header takes on the wire (an upper bound for the buffer). */
size_t cft__rpc_header_size(const rpc_header *h);
/* Write h to buf (cap bytes); the bytes written, 0 if it does not fit. */
size_t cft__rpc_encode(const rpc_header *h, uint8_t *buf, size_t cap);
/* Read a header from n outside bytes into *h: NULL, or an error array
 * saying what is wrong (never reads past n). With inline data, the bytes
 * after the header must be exactly the arrays' bytes (from h->data_off). */
cft_array *cft__rpc_decode(const uint8_t *buf, size_t n, rpc_header *h);

#endif
