/* Internal: cft's private on-disk cache (cache.c): its directory, files
 * written whole or not at all, and a hash record beside each entry. Used
 * by the jit's compiler (lower/cc.c) and, through array/device_plugin.h,
 * by the CUDA backend for its CUBINs. */
#ifndef CFT_CORE_CACHE_H
#define CFT_CORE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* FNV-1a */
#define CFT_FNV0 1469598103934665603ull
uint64_t cft__fnv(uint64_t h, const void *p, size_t n);

/* printf into buf (nothing when buf is NULL) */
void cft__cache_why(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The cache directory, chosen and checked once; NULL when not even a
 * private temporary one could be made (err says why). */
const char *cft__cache_dir_why(char *err, size_t n);
const char *cft__cache_dir(void);

/* a random number for temporary names */
unsigned long long cft__cache_rnd(void);
/* creates path exclusively (never through a symlink, mode 0600) holding
 * buf; 0 or -1 (errno set) */
int cft__cache_write_new(const char *path, const void *buf, size_t n);
/* opens path (no symlinks) if it is a regular file of ours nobody else can
 * write, reading it whole for its hash and size; the fd, or -1 */
int cft__cache_open_checked(const char *path, uint64_t *hash, int64_t *size);
/* the hash and size an entry's record says */
bool cft__cache_read_sum(const char *path, uint64_t *hash, int64_t *size);
/* records tmp's hash and size in tmpsum, then renames tmp to final and
 * tmpsum to sum (entry first); 0 or -1. tmp and tmpsum are gone after. */
int cft__cache_commit(const char *tmp, const char *final, const char *sum, const char *tmpsum);
/* path opened and checked against its record sum: the fd, or -1 */
int cft__cache_vouched(const char *path, const char *sum);

/* A blob named `name` (letters, digits, '.', '_', '-'), malloc'd, with its
 * size in *n, when its record vouches for it; NULL otherwise. */
void *cft__cache_get(const char *name, size_t *n);
/* Stores a blob under `name`; 0 or -1. */
int cft__cache_put(const char *name, const void *buf, size_t n);

/* Evict the least recently used entries when the cache is over its bound
 * (CFT_CACHE_MAX_MB, default 2048 MB), down to 3/4 of it. */
void cft__cache_trim(void);

#endif
