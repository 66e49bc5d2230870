/* test_nn_io.c: safetensors files. Round trips of every dtype (f32, f64,
 * i32, i64, bool, empty and 0-d tensors) with metadata; the bytes on disk
 * follow the format (little-endian length, 8-byte aligned JSON header,
 * contiguous offsets); hand-made files load, including the converted dtypes
 * (F16, BF16, I8, U8, I16, U16, U32); corrupt files (truncated at every
 * length, bad JSON, offsets out of range, overlapping ranges, gaps, wrong
 * sizes, unknown dtypes, duplicates, bad metadata, random byte flips) give
 * errors, never crashes; a failed save (file-size limit hit mid-write,
 * missing directory, bad tree) leaves an existing file intact and no
 * temporary files behind. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"

static char dir[256];

static const char *path_in(const char *name) {
    static char buf[4][512];
    static int next;
    char *b = buf[next++ & 3];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)size + 1);
    *n = fread(b, 1, (size_t)size, f);
    fclose(f);
    return b;
}

/* a file: 8-byte length, header (unpadded), data */
static void make_file(const char *path, const char *header, const void *data, size_t ndata) {
    size_t h = strlen(header);
    unsigned char *b = malloc(8 + h + ndata + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    if (ndata)
        memcpy(b + 8 + h, data, ndata);
    write_bytes(path, b, 8 + h + ndata);
    free(b);
}

/* the load fails with CFT_E_IO and a message containing `what` */
static void expect_error(const char *path, const char *what, const char *label) {
    cft_tree *t = cft_load_safetensors(path, NULL, NULL);
    const char *msg = cft_tree_failed(t) ? cft_error_message(cft_tree_error(t)) : "(loaded)";
    CHECK_MSG(cft_tree_failed(t) && cft_error_code(cft_tree_error(t)) == CFT_E_IO &&
                  strstr(msg, what),
              "%s: expected an error with \"%s\", got: %s", label, what, msg);
}

static int temp_files_left(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

static cft_tree *sample_tree(void) {
    bool bv[5] = {true, false, true, true, false};
    int64_t iv = -1234567890123LL;
    cft_tree *t = cft_tree_new();
    t = cft_tree_set(t, "layers.0.weight",
                     cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){2, 3}, 2));
    t = cft_tree_set(t, "layers.0.bias",
                     cft_from_f64((double[]){M_PI, -1e300, 1e-300, 0.1}, (int64_t[]){4}, 1));
    t = cft_tree_set(
        t, "ids",
        cft_from_i32((int32_t[]){-7, 0, 2147483647, -2147483647 - 1}, (int64_t[]){2, 2}, 2));
    t = cft_tree_set(t, "count", cft_from_data(&iv, CFT_I64, NULL, 0));
    t = cft_tree_set(t, "mask", cft_from_data(bv, CFT_BOOL, (int64_t[]){5}, 1));
    t = cft_tree_set(t, "empty", cft_zeros(CFT_F32, (int64_t[]){0, 3}, 2));
    return t;
}

static bool trees_equal(const cft_tree *a, const cft_tree *b) {
    if (cft_tree_size(a) != cft_tree_size(b))
        return false;
    for (int i = 0; i < cft_tree_size(a); i++) {
        cft_array *x = cft_tree_at(a, i), *y = cft_tree_at(b, i);
        cft_aval ax = cft_array_aval(x), ay = cft_array_aval(y);
        if (strcmp(cft_tree_name(a, i), cft_tree_name(b, i)) || ax.dtype != ay.dtype ||
            ax.ndim != ay.ndim)
            return false;
        for (int d = 0; d < ax.ndim; d++)
            if (ax.shape[d] != ay.shape[d])
                return false;
        size_t bytes = (size_t)cft_array_size(x) * cft_dtype_size(ax.dtype);
        char *bx = malloc(bytes + 1), *by = malloc(bytes + 1);
        bool same = cft_copy_to(x, ax.dtype, bx) == CFT_OK &&
                    cft_copy_to(y, ay.dtype, by) == CFT_OK && memcmp(bx, by, bytes) == 0;
        free(bx), free(by);
        if (!same)
            return false;
    }
    return true;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    snprintf(dir, sizeof dir, "/tmp/cft_test_nn_io_XXXXXX");
    if (!mkdtemp(dir)) {
        printf("cannot make a temporary directory\n");
        return 1;
    }

    TEST("round trip of every dtype, with metadata") {
        cft_tree *t = sample_tree();
        const char *meta[4] = {"format", "pt", "note", "\"quoted\" \\ text"};
        CHECK_EQ(cft_save_safetensors(path_in("a.safetensors"), t, meta, 2), CFT_OK);
        const char **m = NULL;
        int nm = -1;
        cft_tree *r = cft_load_safetensors(path_in("a.safetensors"), &m, &nm);
        CHECK_MSG(!cft_tree_failed(r), "%s", cft_error_message(cft_tree_error(r)));
        CHECK(trees_equal(t, r));
        CHECK_EQ(nm, 2);
        if (nm == 2) {
            CHECK(!strcmp(m[0], "format") && !strcmp(m[1], "pt"));
            CHECK(!strcmp(m[2], "note") && !strcmp(m[3], "\"quoted\" \\ text"));
        }
        CHECK_EQ(cft_save_safetensors(path_in("b.safetensors"), cft_tree_new(), NULL, 0), CFT_OK);
        cft_tree *e = cft_load_safetensors(path_in("b.safetensors"), &m, &nm);
        CHECK(!cft_tree_failed(e) && cft_tree_size(e) == 0 && nm == 0);
        /* a module's params */
        cft_tree *p = cft_module_init(cft_nn_mlp((int64_t[]){5, 7, 2}, 3, CFT_ACT_RELU, 0),
                                      cft_random_key(3), NULL);
        CHECK_EQ(cft_save_safetensors(path_in("mlp.safetensors"), p, NULL, 0), CFT_OK);
        CHECK(trees_equal(p, cft_load_safetensors(path_in("mlp.safetensors"), NULL, NULL)));
        CHECK_EQ(temp_files_left(), 0);
    }

    TEST("the bytes on disk follow the format") {
        size_t n;
        unsigned char *b = read_bytes(path_in("a.safetensors"), &n);
        CHECK(b != NULL && n > 8);
        uint64_t h = 0;
        for (int i = 0; b && i < 8; i++)
            h |= (uint64_t)b[i] << (8 * i);
        CHECK_EQ(h % 8, 0);
        CHECK(b && b[8] == '{');
        cJSON *j = b ? cJSON_ParseWithLength((const char *)b + 8, (size_t)h) : NULL;
        CHECK(j != NULL);
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "layers.0.weight");
        CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(w, "dtype")), "F32"));
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(w, "data_offsets");
        CHECK_EQ(cJSON_GetArrayItem(offs, 0)->valuedouble, 0);
        CHECK_EQ(cJSON_GetArrayItem(offs, 1)->valuedouble, 24);
        const cJSON *mask = cJSON_GetObjectItemCaseSensitive(j, "mask");
        CHECK(
            !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(mask, "dtype")), "BOOL"));
        const cJSON *cnt = cJSON_GetObjectItemCaseSensitive(j, "count");
        CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cnt, "dtype")), "I64"));
        CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cnt, "shape")), 0);
        CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                          cJSON_GetObjectItemCaseSensitive(j, "__metadata__"), "format")),
                      "pt"));
        /* data: 24 + 32 + 16 + 8 + 5 + 0 bytes after the header; f32 weight little-endian */
        CHECK_EQ(n, 8 + h + 24 + 32 + 16 + 8 + 5);
        float w0;
        if (b) {
            uint32_t u = (uint32_t)b[8 + h] | (uint32_t)b[9 + h] << 8 | (uint32_t)b[10 + h] << 16 |
                         (uint32_t)b[11 + h] << 24;
            memcpy(&w0, &u, 4);
            CHECK_CLOSE(w0, cft_item_at(cft_tree_get(sample_tree(), "layers.0.weight"), 0), 0, 0);
        }
        cJSON_Delete(j);
        free(b);
    }

    TEST("hand-made files load, with converted dtypes") {
        unsigned char d[64];
        size_t k = 0;
        const float f[2] = {1.5f, -2};
        memcpy(d, f, 8); /* the test host is little-endian (checked below) */
        k = 8;
        const uint16_t f16[4] = {0x3C00, 0xC000, 0x0001, 0x7C00}, bf16[2] = {0x3F80, 0xC040};
        for (int i = 0; i < 4; i++)
            d[k++] = (unsigned char)f16[i], d[k++] = (unsigned char)(f16[i] >> 8);
        for (int i = 0; i < 2; i++)
            d[k++] = (unsigned char)bf16[i], d[k++] = (unsigned char)(bf16[i] >> 8);
        d[k++] = 0xFF, d[k++] = 0x07;                               /* U8: 255, 7 */
        d[k++] = 0xFF, d[k++] = 0x80;                               /* I8: -1, -128 */
        d[k++] = 0xFE, d[k++] = 0xFF;                               /* I16: -2 */
        d[k++] = 0xFF, d[k++] = 0xFF;                               /* U16: 65535 */
        d[k++] = 0xFF, d[k++] = 0xFF, d[k++] = 0xFF, d[k++] = 0xFF; /* U32 */
        const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                          "\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[8,16]},"
                          "\"bf\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[16,20]},"
                          "\"u8\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[20,22]},"
                          "\"i8\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[22,24]},"
                          "\"i16\":{\"dtype\":\"I16\",\"shape\":[],\"data_offsets\":[24,26]},"
                          "\"u16\":{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[26,28]},"
                          "\"u32\":{\"dtype\":\"U32\",\"shape\":[1,1],\"data_offsets\":[28,32]},"
                          "\"__metadata__\":{\"k\":\"v\"}}   ";
        make_file(path_in("hand.safetensors"), hdr, d, k);
        cft_tree *t = cft_load_safetensors(path_in("hand.safetensors"), NULL, NULL);
        CHECK_MSG(!cft_tree_failed(t), "%s", cft_error_message(cft_tree_error(t)));
        const uint16_t one = 1;
        CHECK(*(const unsigned char *)&one == 1);
        CHECK_ARRAY_CLOSE(cft_tree_get(t, "a"),
                          cft_from_f64((double[]){1.5, -2}, (int64_t[]){2}, 1), 0, 0);
        cft_array *h = cft_tree_get(t, "h");
        CHECK_EQ(cft_array_dtype(h), CFT_F16); /* kept as stored */
        CHECK_EQ(cft_array_dtype(cft_tree_get(t, "bf")), CFT_BF16);
        cft_tree *wide =
            cft_load_safetensors_ex(path_in("hand.safetensors"), CFT_ST_WIDEN, NULL, NULL);
        CHECK_EQ(cft_array_dtype(cft_tree_get(wide, "h")), CFT_F32);
        CHECK_EQ(cft_array_dtype(cft_tree_get(wide, "bf")), CFT_F32);
        CHECK_ARRAY_CLOSE(cft_astype(cft_tree_get(wide, "h"), CFT_F64), cft_astype(h, CFT_F64), 0,
                          0);
        CHECK_CLOSE(cft_item_at(h, 0), 1, 0, 0);
        CHECK_CLOSE(cft_item_at(h, 1), -2, 0, 0);
        CHECK_CLOSE(cft_item_at(h, 2), ldexp(1, -24), 0, 0);
        CHECK(isinf(cft_item_at(h, 3)) && cft_item_at(h, 3) > 0);
        CHECK_ARRAY_CLOSE(cft_tree_get(t, "bf"), cft_from_f64((double[]){1, -3}, (int64_t[]){2}, 1),
                          0, 0);
        CHECK_ARRAY_CLOSE(cft_tree_get(t, "u8"),
                          cft_from_f64((double[]){255, 7}, (int64_t[]){2}, 1), 0, 0);
        CHECK_ARRAY_CLOSE(cft_tree_get(t, "i8"),
                          cft_from_f64((double[]){-1, -128}, (int64_t[]){2}, 1), 0, 0);
        CHECK_EQ(cft_array_dtype(cft_tree_get(t, "i8")), CFT_I32);
        CHECK_CLOSE(cft_item(cft_tree_get(t, "i16")), -2, 0, 0);
        CHECK_CLOSE(cft_item(cft_tree_get(t, "u16")), 65535, 0, 0);
        CHECK_EQ(cft_array_dtype(cft_tree_get(t, "u32")), CFT_I64);
        CHECK_CLOSE(cft_item(cft_tree_get(t, "u32")), 4294967295.0, 0, 0);
        CHECK(!strcmp(cft_tree_name(t, 7), "u32"));
    }

    TEST("corrupt files give clear errors") {
        const float f[3] = {1, 2, 3};
        write_bytes(path_in("c0"), "", 0);
        expect_error(path_in("c0"), "truncated", "empty file");
        write_bytes(path_in("c1"), "\x10\x00\x00", 3);
        expect_error(path_in("c1"), "truncated", "3-byte file");
        write_bytes(path_in("c2"), "\x40\x00\x00\x00\x00\x00\x00\x00{}", 10);
        expect_error(path_in("c2"), "truncated", "header longer than the file");
        write_bytes(path_in("c3"), "\x00\x00\x00\x40\x00\x00\x00\x00{}", 10);
        expect_error(path_in("c3"), "implausible", "huge header length");
        make_file(path_in("c4"), "{\"a\":{\"dtype\":\"F32\",", f, 12);
        expect_error(path_in("c4"), "bad header", "bad JSON");
        make_file(path_in("c5"), "[1,2]", NULL, 0);
        expect_error(path_in("c5"), "not a JSON object", "JSON array");
        make_file(path_in("c6"),
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", f, 12);
        expect_error(path_in("c6"), "out of range", "offsets past the data");
        make_file(path_in("c7"),
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", f, 12);
        expect_error(path_in("c7"), "need 8", "size does not match the shape");
        make_file(path_in("c8"),
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                  f, 8);
        expect_error(path_in("c8"), "overlap", "overlapping ranges");
        make_file(path_in("c9"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                  f, 8);
        expect_error(path_in("c9"), "gap", "a gap before the first tensor");
        make_file(path_in("c10"),
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", f, 12);
        expect_error(path_in("c10"), "cover 4 data bytes but the file holds 12", "trailing data");
        make_file(path_in("c11"),
                  "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[8],\"data_offsets\":[0,8]}}", f, 8);
        expect_error(path_in("c11"), "unsupported dtype \"F8_E4M3\"", "unknown dtype");
        make_file(path_in("c12"),
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                  f, 8);
        expect_error(path_in("c12"), "duplicate name 'a'", "duplicate names");
        make_file(path_in("c13"),
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", f, 4);
        expect_error(path_in("c13"), "must be a non-negative integer", "negative dim");
        make_file(path_in("c14"),
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0.5,4]}}", f, 4);
        expect_error(path_in("c14"), "must be an integer", "fractional offset");
        make_file(path_in("c15"), "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", f, 4);
        expect_error(path_in("c15"), "needs \"dtype\"", "missing dtype");
        make_file(path_in("c16"), "{\"__metadata__\":{\"k\":1}}", NULL, 0);
        expect_error(path_in("c16"), "not a string", "non-string metadata");
        make_file(path_in("c17"),
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                  "\"data_offsets\":[0,4]}}",
                  f, 4);
        expect_error(path_in("c17"), "too large", "overflowing shape");
        make_file(path_in("c18"), "{} x", NULL, 0);
        expect_error(path_in("c18"), "trailing bytes", "bytes after the JSON");
        make_file(path_in("c19"), "{\"a\":[1]}", NULL, 0);
        expect_error(path_in("c19"), "must be a JSON object", "entry not an object");
        make_file(
            path_in("c20"),
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", f,
            4);
        expect_error(path_in("c20"), "more than 8", "too many dims");
        expect_error(path_in("does-not-exist"), "cannot open", "missing file");
        expect_error(dir, "not a regular file", "a directory");
        CHECK(cft_tree_failed(cft_load_safetensors(NULL, NULL, NULL)));
    }

    TEST("every truncation and random byte flips of a valid file: errors, never crashes") {
        size_t n;
        unsigned char *b = read_bytes(path_in("a.safetensors"), &n);
        int loaded = 0, failed = 0;
        for (size_t len = 0; b && len < n; len++) {
            write_bytes(path_in("trunc"), b, len);
            cft_tree *t = cft_load_safetensors(path_in("trunc"), NULL, NULL);
            failed += cft_tree_failed(t);
        }
        CHECK_EQ(failed, (int)n);
        uint64_t s = 12345;
        for (int k = 0; b && k < 400; k++) {
            unsigned char *c = malloc(n);
            memcpy(c, b, n);
            for (int j = 0; j < 3; j++) {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                c[s % (k % 2 ? n : 8 + 120)] ^= (unsigned char)(1u << (s >> 40) % 8);
            }
            write_bytes(path_in("flip"), c, n);
            cft_tree *t = cft_load_safetensors(path_in("flip"), NULL, NULL);
            if (cft_tree_failed(t))
                failed++;
            else
                loaded++;
            free(c);
        }
        CHECK(loaded + failed > 0);
        free(b);
    }

    TEST("halves and complex values are written and read back as stored") {
        cft_array *x = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){3, 4}, 2);
        cft_tree *t = cft_tree_new();
        t = cft_tree_set(t, "h", cft_astype(x, CFT_F16));
        t = cft_tree_set(t, "bf", cft_astype(x, CFT_BF16));
        t = cft_tree_set(t, "c", cft_complex(x, cft_neg(x)));
        t = cft_tree_set(t, "z", cft_astype(cft_complex(x, x), CFT_C128));
        CHECK_EQ(cft_save_safetensors(path_in("halves.safetensors"), t, NULL, 0), CFT_OK);
        cft_tree *r = cft_load_safetensors(path_in("halves.safetensors"), NULL, NULL);
        CHECK_MSG(!cft_tree_failed(r), "%s", cft_error_message(cft_tree_error(r)));
        CHECK(trees_equal(t, r));
    }
    TEST("hostile headers: duplicate __metadata__, zero-leading huge shapes, FIFOs") {
        make_file(path_in("m2"), "{\"__metadata__\":{\"a\":\"b\"},\"__metadata__\":{\"c\":\"d\"}}",
                  NULL, 0);
        expect_error(path_in("m2"), "duplicate name '__metadata__'", "metadata twice");
        make_file(path_in("mk"), "{\"__metadata__\":{\"a\":\"b\",\"a\":\"c\"}}", NULL, 0);
        expect_error(path_in("mk"), "duplicate __metadata__ key 'a'", "metadata key twice");
        make_file(path_in("z0"),
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296],"
                  "\"data_offsets\":[0,0]}}",
                  NULL, 0);
        expect_error(path_in("z0"), "too large", "[0, 2^32, 2^32]");
        make_file(path_in("big"),
                  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1099511627776],\"data_offsets\":[0,0]}}",
                  NULL, 0);
        expect_error(path_in("big"), "[0, 2^40)", "a dim of 2^40");
        make_file(
            path_in("key2"),
            "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}",
            "abcd", 4);
        expect_error(path_in("key2"), "duplicate key 'dtype'", "a key twice in an entry");
        make_file(path_in("esc"), "{\"a\\ud800\":{}}", NULL, 0);
        expect_error(path_in("esc"), "surrogate", "a lone surrogate");
        CHECK_EQ(mkfifo(path_in("fifo"), 0600), 0);
        expect_error(path_in("fifo"), "not a regular file", "a FIFO (must not block)");
        expect_error(dir, "not a regular file", "a directory");
    }
    TEST("bool bytes other than 0 and 1 load as true") {
        unsigned char b[4] = {0, 1, 2, 255};
        make_file(path_in("bool"),
                  "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[0,4]}}", b, 4);
        cft_tree *t = cft_load_safetensors(path_in("bool"), NULL, NULL);
        cft_array *m = cft_tree_get(t, "m");
        CHECK(!cft_failed(m));
        CHECK_ARRAY_CLOSE(cft_astype(m, CFT_I32),
                          cft_from_i32((int32_t[]){0, 1, 1, 1}, (int64_t[]){4}, 1), 0, 0);
        /* and from memory: cft_from_data normalises bool bytes too */
        cft_array *fm = cft_from_data(b, CFT_BOOL, (int64_t[]){4}, 1);
        CHECK_ARRAY_CLOSE(cft_astype(fm, CFT_I32),
                          cft_from_i32((int32_t[]){0, 1, 1, 1}, (int64_t[]){4}, 1), 0, 0);
        CHECK_CLOSE(cft_item(cft_sum(cft_astype(fm, CFT_I32), NULL, 0, false)), 3, 0, 0);
    }
    TEST("80000 names load in linear time (a quadratic check took 16 s)") {
        int n = 80000;
        size_t cap = (size_t)n * 80 + 64, k = 0;
        char *h = malloc(cap);
        k += (size_t)snprintf(h + k, cap - k, "{");
        for (int i = 0; i < n; i++)
            k += (size_t)snprintf(
                h + k, cap - k,
                "%s\"p%d\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[%d,%d]}", i ? "," : "",
                i, 4 * i, 4 * i + 4);
        k += (size_t)snprintf(h + k, cap - k, "}");
        float *d = calloc((size_t)n, sizeof(float));
        make_file(path_in("many"), h, d, sizeof(float) * (size_t)n);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cft_tree *t = cft_load_safetensors(path_in("many"), NULL, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CHECK(!cft_tree_failed(t) && cft_tree_size(t) == n);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("  80000 names: %.3f s\n", sec);
        free(h), free(d);
    }
    TEST("save keeps the file's mode, writes through a symlink, leaves no temp files") {
        cft_tree *t = sample_tree();
        const char *p = path_in("private.safetensors");
        CHECK_EQ(cft_save_safetensors(p, t, NULL, 0), CFT_OK);
        CHECK_EQ(chmod(p, 0600), 0);
        CHECK_EQ(cft_save_safetensors(p, t, NULL, 0), CFT_OK);
        struct stat st;
        CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
        CHECK_EQ(chmod(p, 0640), 0);
        CHECK_EQ(cft_save_safetensors(p, t, NULL, 0), CFT_OK);
        CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0640);
        /* a symlink: the target is rewritten, the link stays a link */
        const char *link = path_in("link.safetensors");
        CHECK_EQ(symlink("private.safetensors", link), 0);
        cft_tree *t2 = cft_tree_set(cft_tree_new(), "only", cft_arange(0, 5, 1, CFT_F32));
        CHECK_EQ(cft_save_safetensors(link, t2, NULL, 0), CFT_OK);
        CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
        cft_tree *r = cft_load_safetensors(path_in("private.safetensors"), NULL, NULL);
        CHECK(trees_equal(r, t2));
        CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0640);
        CHECK_EQ(temp_files_left(), 0);
    }
    TEST("a failed save leaves the existing file intact and no temporary files") {
        const char *p = path_in("keep.safetensors");
        cft_tree *small = cft_tree_set(cft_tree_new(), "x", cft_ones(CFT_F32, (int64_t[]){4}, 1));
        CHECK_EQ(cft_save_safetensors(p, small, NULL, 0), CFT_OK);
        size_t n0, n1;
        unsigned char *before = read_bytes(p, &n0);
        /* a file-size limit makes the write of a large tree fail half way */
        struct rlimit old, lim;
        getrlimit(RLIMIT_FSIZE, &old);
        lim = old;
        lim.rlim_cur = 4096;
        signal(SIGXFSZ, SIG_IGN);
        CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
        cft_tree *big =
            cft_tree_set(cft_tree_new(), "x", cft_ones(CFT_F32, (int64_t[]){100000}, 1));
        cft_status st = cft_save_safetensors(p, big, NULL, 0);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECK_EQ(st, CFT_E_IO);
        CHECK(strstr(cft_last_error_message(), "cft_save_safetensors") &&
              strstr(cft_last_error_message(), "keep.safetensors"));
        unsigned char *after = read_bytes(p, &n1);
        CHECK(after && n1 == n0 && memcmp(before, after, n0) == 0);
        CHECK(trees_equal(small, cft_load_safetensors(p, NULL, NULL)));
        CHECK_EQ(temp_files_left(), 0);
        free(before), free(after);
        /* other failures: missing directory, error tree, reserved name, bad metadata */
        CHECK_EQ(cft_save_safetensors(path_in("no/such/dir.safetensors"), small, NULL, 0),
                 CFT_E_IO);
        cft_tree *et = cft_tree_set(
            small, "y", cft_matmul(cft_ones(CFT_F32, (int64_t[]){2}, 1), cft_eye(3, CFT_F32)));
        CHECK(cft_save_safetensors(p, et, NULL, 0) != CFT_OK);
        CHECK(cft_save_safetensors(p, cft_tree_set(small, "__metadata__", cft_scalar(1, CFT_F32)),
                                   NULL, 0) != CFT_OK);
        CHECK(cft_save_safetensors(p, small, (const char *[]){"k", NULL}, 1) != CFT_OK);
        CHECK(cft_save_safetensors(p, small, (const char *[]){"k", "a", "k", "b"}, 2) != CFT_OK);
        CHECK(trees_equal(small, cft_load_safetensors(p, NULL, NULL)));
        /* a successful save replaces the file */
        CHECK_EQ(cft_save_safetensors(p, sample_tree(), NULL, 0), CFT_OK);
        CHECK(trees_equal(sample_tree(), cft_load_safetensors(p, NULL, NULL)));
        CHECK_EQ(temp_files_left(), 0);
    }

    /* clean up */
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.')
            unlink(path_in(e->d_name));
    if (d)
        closedir(d);
    rmdir(dir);
    return check_summary();
}
