/* make_seeds.c: writes the fuzzers' seed corpora with the library itself
 * (files cft writes, so the fuzzer starts from valid inputs and mutates
 * them), plus a few hostile headers that once broke the loader.
 * Usage: make_seeds <corpus-dir-for-safetensors> <corpus-dir-for-bool>
 *        [<corpus-dir-for-rpc-headers> [<corpus-dir-for-checkpoint-metadata>
 *        [<corpus-dir-for-ir-texts> [<corpus-dir-for-exported-programs>
 *        [<corpus-dir-for-whole-checkpoints>]]]]]
 * The IR texts and exported programs include those of the low-bit
 * transforms (int8, QAT, dynamic int8, 2:4 sparse, bf16 autocast). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"
#include "dist/rpc/wire.h"
#include "nn/checkpoint.h"

static void put(const char *dir, const char *name, const void *data, size_t n) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

/* a file of a hand-written header and n data bytes (0, 1, 2, ...) */
static void raw_data(const char *dir, const char *name, const char *header, size_t n) {
    unsigned char b[1024];
    size_t h = strlen(header);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < n; i++)
        b[8 + h + i] = (unsigned char)(i * 41 + 7);
    put(dir, name, b, 8 + h + n);
}
static void raw(const char *dir, const char *name, const char *header) {
    raw_data(dir, name, header, 0);
}

/* a whole checkpoint as fuzz_checkpoint_load reads one: a 4-byte length,
 * the metadata text, then the bytes of rank0.safetensors holding tree t
 * (written through a scratch file in dir) */
static void whole_seed(const char *dir, const char *name, const char *meta, const cft_tree *t) {
    char sp[1100];
    snprintf(sp, sizeof sp, "%s/.shard.safetensors", dir);
    if (!meta || cft_save_safetensors(sp, t, NULL, 0) != CFT_OK)
        return;
    FILE *f = fopen(sp, "rb");
    char *buf = malloc(1 << 16);
    size_t ml = strlen(meta), sn = f && buf ? fread(buf + 4 + ml, 1, (1 << 16) - 4 - ml, f) : 0;
    if (buf && ml + 4 < (1 << 16)) {
        buf[0] = (char)(ml & 255), buf[1] = (char)(ml >> 8 & 255);
        buf[2] = (char)(ml >> 16 & 255), buf[3] = (char)(ml >> 24 & 255);
        memcpy(buf + 4, meta, ml);
        put(dir, name, buf, 4 + ml + sn);
    }
    if (f)
        fclose(f);
    free(buf);
    remove(sp);
}

/* IR seeds: programs over many primitives, with a constant f32[3] (the
 * fuzz target offers f32[3] and f32[] values, in that order) */
static cft_array *seed_c;
static cft_status seed_fn(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *x = in[0]; /* f32[2,3] */
    cft_array *h =
        cft_tanh(cft_add(cft_matmul(x, cft_transpose(x, NULL)), cft_sum(seed_c, NULL, 0, false)));
    cft_array *s = cft_sort(cft_cumsum(cft_reshape(h, (int64_t[]){4}, 1), 0, false), 0, true);
    cft_array *t = cft_take(cft_concatenate((cft_array *[]){s, seed_c}, 2, 0),
                            cft_arange(0, 3, 1, CFT_I32), 0);
    out[0] = cft_sum(cft_mul(t, seed_c), NULL, 0, false);
    return CFT_OK;
}
static cft_status seed_body(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_add(cft_mul(in[0], in[1]), cft_sin(in[1]));
    out[1] = cft_exp(in[0]);
    return CFT_OK;
}
static cft_status seed_scan(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *args[2] = {in[0], in[1]}, *r[2];
    cft_status st = cft_scan(cft_fn_new(seed_body, NULL, 2, 2), 0, 1, 4, false, args, r);
    out[0] = cft_sum(r[1], NULL, 0, false);
    return st;
}
/* constants of every dtype a program may hold (f16, bf16, f64, i32, i64,
 * bool, complex): the exported program stores each in its safetensors */
static cft_array *seed_h, *seed_bf; /* f16 and bf16 constants of the program */
static cft_status seed_dtypes(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *x =
        cft_add(cft_mul(in[0], cft_astype(seed_h, CFT_F32)), cft_astype(seed_bf, CFT_F32));
    cft_array *k = cft_arange(1, 4, 1, CFT_F32);
    cft_array *h = cft_astype(cft_mul(x, cft_astype(cft_astype(k, CFT_F16), CFT_F32)), CFT_F16);
    cft_array *b = cft_astype(cft_add(x, cft_astype(cft_astype(k, CFT_BF16), CFT_F32)), CFT_BF16);
    cft_array *d = cft_mul(cft_astype(x, CFT_F64), cft_astype(k, CFT_F64));
    cft_array *i = cft_add(cft_astype(x, CFT_I32), cft_arange(0, 3, 1, CFT_I32));
    cft_array *l = cft_add(cft_astype(x, CFT_I64), cft_arange(5, 8, 1, CFT_I64));
    cft_array *m = cft_where(cft_gt(k, cft_scalar(1.5, CFT_F32)), x, cft_neg(x));
    cft_array *c = cft_real(cft_mul(cft_complex(x, x), cft_complex(k, k)));
    out[0] = cft_add(
        cft_add(cft_add(cft_astype(h, CFT_F32), cft_astype(b, CFT_F32)),
                cft_astype(cft_add(d, cft_astype(cft_add(cft_astype(i, CFT_I64), l), CFT_F64)),
                           CFT_F32)),
        cft_add(m, c));
    return CFT_OK;
}

static cft_status seed_conv(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = cft_conv2d(in[0], in[1], (int64_t[]){1, 1}, (int64_t[]){1, 1}, NULL, 1);
    out[0] = cft_sum(cft_relu(y), NULL, 0, false);
    return CFT_OK;
}
/* the low-bit programs' ingredients: a matrix product and a convolution
 * over closed-over weights (quantized, 2:4 sparse, under autocast) */
static cft_array *seed_w, *seed_k;
static cft_sparse24 seed_s;
static cft_status seed_qnet(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *y = cft_relu(cft_matmul(in[0], seed_w));
    cft_array *z = cft_conv2d(in[1], seed_k, (int64_t[]){1, 1}, (int64_t[]){1, 1}, NULL, 1);
    out[0] = cft_add(cft_sum(y, NULL, 0, false), cft_sum(cft_relu(z), NULL, 0, false));
    return CFT_OK;
}
static cft_status seed_linear(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_matmul(in[0], seed_w);
    return CFT_OK;
}
static cft_status seed_sparse(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_sum(cft_square(cft_sparse24_linear(in[0], seed_s)), NULL, 0, false);
    return CFT_OK;
}

static void ir_seed(const char *dir, const char *name, cft_fn *f, const cft_aval *av) {
    cft_ir *ir = cft_make_ir(f, av);
    if (ir) {
        const char *t = cft_ir_str(ir);
        put(dir, name, t, strlen(t));
    }
}

/* exported programs of the low-bit transforms, and their IR texts: int8
 * products and convolutions (cft_quant_convert), their QAT form
 * (fake-quantized), dynamic int8, a 2:4 sparse product and its gradient,
 * bf16 autocast and its gradient */
static void lowbit_seeds(const char *irdir, const char *exdir) {
    seed_w = cft_random_normal(cft_random_key(31), CFT_F32, (int64_t[]){4, 6}, 2);
    seed_k = cft_random_normal(cft_random_key(32), CFT_F32, (int64_t[]){3, 2, 3, 3}, 4);
    seed_s =
        cft_sparse24_compress(cft_random_normal(cft_random_key(33), CFT_F32, (int64_t[]){6, 8}, 2));
    cft_aval av[2] = {{CFT_F32, 2, {2, 4}}, {CFT_F32, 4, {1, 2, 5, 5}}};
    cft_array *data[2] = {cft_random_normal(cft_random_key(34), CFT_F32, av[0].shape, 2),
                          cft_random_normal(cft_random_key(35), CFT_F32, av[1].shape, 4)};
    cft_fn *net = cft_fn_new(seed_qnet, NULL, 2, 1);
    cft_quantizer qz = cft_quantizer_x86();
    cft_quant *q = cft_quant_prepare(net, &qz);
    cft_array *r[1];
    if (!q || cft_fn_call(cft_quant_observer_fn(q), data, r) != CFT_OK)
        return;
    cft_aval a8[1] = {{CFT_F32, 2, {3, 8}}};
    struct {
        const char *name;
        cft_fn *f;
        const cft_aval *av;
    } progs[] = {
        {"quant-int8", cft_quant_convert(q), av},
        {"quant-qat", cft_quant_qat_fn(q), av},
        {"quant-qat-grad", cft_grad(cft_quant_qat_fn(q), (int[]){0, 1}, 2), av},
        {"quant-dynamic", cft_quant_dynamic(cft_fn_new(seed_linear, NULL, 1, 1)), av},
        {"sparse24", cft_fn_new(seed_sparse, NULL, 1, 1), a8},
        {"sparse24-grad", cft_grad(cft_fn_new(seed_sparse, NULL, 1, 1), NULL, 0), a8},
        {"autocast-bf16", cft_autocast(net, CFT_BF16), av},
        {"autocast-bf16-grad", cft_grad(cft_autocast(net, CFT_BF16), (int[]){0, 1}, 2), av},
    };
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        ir_seed(irdir, progs[i].name, progs[i].f, progs[i].av);
        if (exdir) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s.cftx", exdir, progs[i].name);
            cft_export(progs[i].f, progs[i].av, path);
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    cft_init();
    const char *st = argv[1];
    cft_array *x = cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){3, 4}, 2);
    cft_tree *t = cft_tree_new();
    t = cft_tree_set(t, "layer.weight", x);
    t = cft_tree_set(t, "layer.bias", cft_astype(cft_arange(0, 4, 1, CFT_F32), CFT_F64));
    t = cft_tree_set(t, "ids", cft_arange(0, 5, 1, CFT_I32));
    t = cft_tree_set(t, "n", cft_scalar(7, CFT_I64));
    t = cft_tree_set(t, "mask", cft_gt(x, cft_scalar(0, CFT_F32)));
    t = cft_tree_set(t, "h", cft_astype(x, CFT_F16));
    t = cft_tree_set(t, "bf", cft_astype(x, CFT_BF16));
    t = cft_tree_set(t, "c", cft_complex(x, x));
    t = cft_tree_set(t, "empty", cft_zeros(CFT_F32, (int64_t[]){0, 3}, 2));
    const char *meta[4] = {"format", "pt", "note", "\"quoted\" \\u00e9"};
    char p[1024];
    snprintf(p, sizeof p, "%s/full.safetensors", st);
    if (cft_save_safetensors(p, t, meta, 2) != CFT_OK)
        return 1;
    snprintf(p, sizeof p, "%s/one.safetensors", st);
    cft_save_safetensors(p, cft_tree_set(cft_tree_new(), "w", cft_scalar(1, CFT_F32)), NULL, 0);
    snprintf(p, sizeof p, "%s/empty.safetensors", st);
    cft_save_safetensors(p, cft_tree_new(), NULL, 0);
    raw(st, "meta-twice", "{\"__metadata__\":{\"a\":\"b\"},\"__metadata__\":{}}");
    raw(st, "zero-huge",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296],"
        "\"data_offsets\":[0,0]}}");
    raw(st, "escapes",
        "{\"\\ud83d\\ude00\\n\":{\"dtype\":\"U8\",\"shape\":[0],"
        "\"data_offsets\":[0,0]}}");
    raw_data(st, "small-ints",
             "{\"a\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]},"
             "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},"
             "\"c\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[4,8]},"
             "\"d\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[8,12]},"
             "\"e\":{\"dtype\":\"U32\",\"shape\":[2],\"data_offsets\":[12,20]},"
             "\"f\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[20,28]},"
             "\"g\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[28,32]},"
             "\"h\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[32,36]},"
             "\"i\":{\"dtype\":\"C128\",\"shape\":[],\"data_offsets\":[36,52]}}",
             52);
    unsigned char b[64];
    for (int i = 0; i < 64; i++)
        b[i] = (unsigned char)(i * 37);
    put(argv[2], "bytes", b, sizeof b);
    put(argv[2], "ones", "\x01\x01\x01\x01\x01", 5);
    if (argc > 3) { /* RPC headers as the agent writes them */
        rpc_header h = {.kind = RPC_CALL, .id = 42, .rref = -1, .nargs = 3};
        snprintf(h.name, sizeof h.name, "affine");
        h.avals[0] = (cft_aval){CFT_F32, 2, {5, 7}};
        h.avals[1] = (cft_aval){CFT_C128, 0, {0}};
        h.arg_rref[0] = h.arg_rref[1] = -1;
        h.arg_rref[2] = 1099511627776LL, h.arg_owner[2] = 1;
        uint8_t w[4096];
        put(argv[3], "call", w, cft__rpc_encode(&h, w, sizeof w));
        rpc_header e = {.kind = RPC_ERROR, .id = 7, .rref = -1};
        snprintf(e.msg, sizeof e.msg, "worker 'ps' (0), function 'f': no such function");
        put(argv[3], "error", w, cft__rpc_encode(&e, w, sizeof w));
        rpc_header r = {.kind = RPC_REMOTE, .id = 8, .rref = 5, .nargs = 1};
        snprintf(r.name, sizeof r.name, "make");
        r.avals[0] = (cft_aval){CFT_BF16, 8, {1, 2, 3, 4, 5, 6, 7, 8}};
        r.arg_rref[0] = -1;
        put(argv[3], "remote", w, cft__rpc_encode(&r, w, sizeof w));
    }
    if (argc > 4) { /* checkpoint metadata as the saver writes it */
        ckpt_piece pe[2] = {{"rank0.safetensors", 0, 4}, {"rank1.safetensors", 4, 10}};
        ckpt_piece ps[1] = {{"rank0.safetensors", 0, 1}};
        ckpt_tensor ts[2] = {{"emb", CFT_F32, 2, {10, 3}, 2, pe}, {"step", CFT_I64, 0, {0}, 1, ps}};
        ckpt_meta m = {2, ts};
        char *text = cft__ckpt_format(&m);
        if (text)
            put(argv[4], "meta", text, strlen(text));
        free(text);
        const char *gaps = "{\"format\":\"cft-sharded-checkpoint\",\"version\":1,\"tensors\":"
                           "[{\"name\":\"a\",\"dtype\":\"BF16\",\"shape\":[5,2],\"pieces\":"
                           "[{\"file\":\"r.safetensors\",\"rows\":[0,2]},"
                           "{\"file\":\"s.safetensors\",\"rows\":[3,5]}]}]}";
        put(argv[4], "gaps", gaps, strlen(gaps));
        if (argc > 7) { /* whole checkpoints: length, metadata.json, rank0.safetensors */
            ckpt_piece p1[1] = {{"rank0.safetensors", 0, 10}};
            ckpt_tensor t1[2] = {{"emb", CFT_F32, 2, {10, 3}, 1, p1},
                                 {"step", CFT_I64, 0, {0}, 1, ps}};
            ckpt_meta m1 = {2, t1};
            char *mt = cft__ckpt_format(&m1);
            cft_tree *tr = cft_tree_set(
                cft_tree_set(cft_tree_new(), "emb",
                             cft_reshape(cft_arange(0, 30, 1, CFT_F32), (int64_t[]){10, 3}, 2)),
                "step", cft_scalar(7, CFT_I64));
            whole_seed(argv[7], "whole", mt, tr);
            free(mt);
            /* low-bit dtypes (a file holds one piece of each array) */
            ckpt_piece q2[1] = {{"rank0.safetensors", 0, 4}};
            ckpt_tensor t2[3] = {{"h", CFT_F16, 2, {4, 2}, 1, q2},
                                 {"bf", CFT_BF16, 1, {4}, 1, q2},
                                 {"mask", CFT_BOOL, 1, {4}, 1, q2}};
            ckpt_meta m2 = {3, t2};
            char *mt2 = cft__ckpt_format(&m2);
            cft_array *hv = cft_astype(
                cft_reshape(cft_arange(0, 8, 1, CFT_F32), (int64_t[]){4, 2}, 2), CFT_F16);
            cft_tree *tr2 = cft_tree_new();
            tr2 = cft_tree_set(tr2, "h", hv);
            tr2 = cft_tree_set(tr2, "bf", cft_astype(cft_arange(0, 4, 1, CFT_F32), CFT_BF16));
            tr2 = cft_tree_set(tr2, "mask",
                               cft_gt(cft_arange(0, 4, 1, CFT_F32), cft_scalar(1, CFT_F32)));
            whole_seed(argv[7], "lowbits", mt2, tr2);
            free(mt2);
            /* a shard whose header has a metadata block and a name written
             * with \u escapes (U+00E9, and U+1F600 as a surrogate pair) */
            ckpt_piece q3[1] = {{"rank0.safetensors", 0, 1}};
            ckpt_tensor t3[1] = {{"\xc3\xa9\xf0\x9f\x98\x80", CFT_F32, 1, {1}, 1, q3}};
            ckpt_meta m3 = {1, t3};
            char *mt3 = cft__ckpt_format(&m3);
            const char *hdr = "{\"__metadata__\":{\"note\":\"\\u00e9\\t\\\"q\\\"\"},"
                              "\"\\u00e9\\ud83d\\ude00\":{\"dtype\":\"F32\",\"shape\":[1],"
                              "\"data_offsets\":[0,4]}}";
            if (mt3) {
                size_t ml = strlen(mt3), hl = strlen(hdr), n = 4 + ml + 8 + hl + 4;
                unsigned char *buf = malloc(n);
                if (buf) {
                    for (int i = 0; i < 4; i++)
                        buf[i] = (unsigned char)(ml >> (8 * i));
                    memcpy(buf + 4, mt3, ml);
                    for (int i = 0; i < 8; i++)
                        buf[4 + ml + i] = (unsigned char)((uint64_t)hl >> (8 * i));
                    memcpy(buf + 4 + ml + 8, hdr, hl);
                    memcpy(buf + 4 + ml + 8 + hl, "\0\0\x80\x3f", 4); /* 1.0f */
                    put(argv[7], "escapes", buf, n);
                    free(buf);
                }
            }
            free(mt3);
        }
    }
    if (argc > 5) { /* IR texts as cft_ir_print writes them */
        seed_c = cft_arange(0, 3, 1, CFT_F32);
        cft_aval a1[1] = {{CFT_F32, 2, {2, 3}}};
        cft_fn *f = cft_fn_new(seed_fn, NULL, 1, 1);
        ir_seed(argv[5], "mixed", f, a1);
        ir_seed(argv[5], "mixed-grad", cft_grad(f, NULL, 0), a1);
        cft_aval a2[2] = {{CFT_F32, 1, {3}}, {CFT_F32, 2, {4, 3}}};
        cft_fn *s = cft_fn_new(seed_scan, NULL, 2, 1);
        ir_seed(argv[5], "scan-grad", cft_grad(s, (int[]){0, 1}, 2), a2);
        cft_aval a3[2] = {{CFT_F32, 4, {1, 2, 5, 5}}, {CFT_F32, 4, {3, 2, 3, 3}}};
        cft_fn *c = cft_fn_new(seed_conv, NULL, 2, 1);
        ir_seed(argv[5], "conv-grad", cft_grad(c, (int[]){0, 1}, 2), a3);
        cft_aval a4[2] = {{CFT_F32, 4, {cft_dim_sym("B"), 2, 5, 5}}, {CFT_F32, 4, {3, 2, 3, 3}}};
        ir_seed(argv[5], "conv-symbolic", c, a4);
        if (argc > 6 && argv[6][0]) { /* exported programs as cft_export writes them */
            char path[600];
            snprintf(path, sizeof path, "%s/mixed-grad.cftx", argv[6]);
            cft_export(cft_grad(f, NULL, 0), a1, path);
            snprintf(path, sizeof path, "%s/scan-grad.cftx", argv[6]);
            cft_export(cft_grad(s, (int[]){0, 1}, 2), a2, path);
            snprintf(path, sizeof path, "%s/conv-symbolic.cftx", argv[6]);
            cft_export(c, a4, path);
            cft_aval a5[1] = {{CFT_F32, 1, {3}}};
            seed_h = cft_astype(cft_arange(1, 4, 1, CFT_F32), CFT_F16);
            seed_bf = cft_astype(cft_arange(-2, 1, 1, CFT_F32), CFT_BF16);
            snprintf(path, sizeof path, "%s/dtypes.cftx", argv[6]);
            cft_export(cft_fn_new(seed_dtypes, NULL, 1, 1), a5, path);
        }
        lowbit_seeds(argv[5], argc > 6 && argv[6][0] ? argv[6] : NULL);
    }
    return 0;
}
