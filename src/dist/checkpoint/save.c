/* save.c: collective save of a sharded checkpoint. Every rank describes
 * what it holds (name, dtype, global shape, its rows); the descriptions go
 * to every rank (two all_gathers), and each rank derives the same metadata
 * from them (a whole value is written by the lowest rank holding it,
 * pieces by their holders; the metadata checker of the loader vets the
 * result, so a save is refused on every rank alike). The files are written
 * in parallel into <dir>.partial; then rank 0 writes metadata.json last and
 * swaps the new directory in for the old one in one step (renameat2
 * RENAME_EXCHANGE), so an interrupted save leaves the previous checkpoint
 * as it was. The asynchronous form writes the files on a background thread
 * (arrays are immutable: nothing is copied) and commits in its wait. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "array/array.h"
#include "core/error.h"
#include "core/mem.h"
#include "dist/dist.h"
#include "nn/checkpoint.h"
#include "prims/rules.h"

struct cft_checkpoint_job {
    cft_dist_group *g;
    char *dir, *partial;
    cft_tree *mine; /* what this rank writes */
    ckpt_meta meta; /* everyone's, the same on every rank */
    cft_array *err; /* a failure before the writing */
    cft_status write_status;
    char write_err[600];
    pthread_t writer;
    bool threaded, waited;
    cft_status result;
};

/* ---- the descriptions: "name\tdtype\tbegin\tend\tndim\tdims...\n" ---- */

static cft_array *describe(const char *call, const cft_tree *t, const cft_shard *sh, int nsh,
                           char **text, size_t *len) {
    size_t cap = 256, n = 0;
    char *s = malloc(cap);
    if (!s)
        return cft__oom();
    for (int i = 0; i < cft_tree_size(t); i++) {
        const char *name = cft_tree_name(t, i);
        cft_array *x = cft_tree_at(t, i);
        for (const char *c = name; *c; c++)
            if ((unsigned char)*c < 32) {
                free(s);
                return cft__fail(CFT_E_ARG, "%s: the name '%s' has a control character", call,
                                 name);
            }
        if (strlen(name) > CKPT_MAX_NAME || x->kind != CFT_K_CONCRETE) {
            free(s);
            return cft__fail(CFT_E_ARG,
                             "%s: '%.80s' is not a concrete array with a name of at "
                             "most %d bytes",
                             call, name, CKPT_MAX_NAME);
        }
        const cft_aval *a = &x->aval;
        int64_t rows = a->ndim ? a->shape[0] : 1, begin = 0, global = rows;
        for (int k = 0; k < nsh; k++)
            if (sh[k].name && !strcmp(sh[k].name, name)) {
                if (!a->ndim || sh[k].offset < 0 || sh[k].global_rows < sh[k].offset + rows) {
                    free(s);
                    return cft__fail(CFT_E_ARG,
                                     "%s: shard '%s' (%s): rows %lld..%lld do not fit %lld "
                                     "global rows",
                                     call, name, cft__av(a), (long long)sh[k].offset,
                                     (long long)(sh[k].offset + rows),
                                     (long long)sh[k].global_rows);
                }
                begin = sh[k].offset, global = sh[k].global_rows;
            }
        char line[CKPT_MAX_NAME + 400];
        int k = snprintf(line, sizeof line, "%s\t%d\t%lld\t%lld\t%d", name, (int)a->dtype,
                         (long long)begin, (long long)(begin + rows), a->ndim);
        for (int d = 0; d < a->ndim; d++)
            k += snprintf(line + k, sizeof line - (size_t)k, "\t%lld",
                          (long long)(d ? a->shape[d] : global));
        k += snprintf(line + k, sizeof line - (size_t)k, "\n");
        while (n + (size_t)k + 1 > cap) {
            char *t2 = realloc(s, cap *= 2);
            if (!t2) {
                free(s);
                return cft__oom();
            }
            s = t2;
        }
        memcpy(s + n, line, (size_t)k);
        n += (size_t)k;
    }
    s[n] = 0;
    *text = s, *len = n;
    return NULL;
}

/* every rank's description (all_gather of the lengths, then of the texts) */
static cft_array *exchange(cft_dist_group *g, const char *text, size_t len, char ***all) {
    int p = g->size;
    cft_array *lens = cft_dist_all_gather(g, cft_scalar((double)len, CFT_I64), true);
    if (cft_failed(lens))
        return lens;
    int64_t maxlen = 0;
    for (int r = 0; r < p; r++) {
        int64_t l = (int64_t)cft_item_at(lens, r);
        maxlen = l > maxlen ? l : maxlen;
    }
    int64_t words = maxlen / 4 + 1;
    int32_t *buf = calloc((size_t)words, 4);
    if (!buf)
        return cft__oom();
    memcpy(buf, text, len);
    cft_array *x = cft_from_data(buf, CFT_I32, &words, 1);
    free(buf);
    cft_array *got = cft_dist_all_gather(g, x, true);
    if (cft_failed(got))
        return got;
    *all = CFT_NEWN(char *, p);
    if (!*all)
        return cft__oom();
    for (int r = 0; r < p; r++) {
        int64_t l = (int64_t)cft_item_at(lens, r);
        (*all)[r] = cft__new((size_t)l + 1);
        if (!(*all)[r])
            return cft__oom();
        memcpy((*all)[r], (const char *)cft__ptr(got) + (size_t)r * (size_t)words * 4, (size_t)l);
    }
    return NULL;
}

/* names -> their index in t, by open addressing (a scan per name was
 * quadratic: 50,000 arrays took half a minute to save) */
typedef struct {
    int *slot; /* index + 1, 0: empty */
    size_t cap;
} name_index;

static size_t name_hash(const char *s) {
    size_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* t's index of name, or n when it is not there */
static int find_name(const name_index *ix, const ckpt_tensor *t, const char *name, int n) {
    if (!ix->cap)
        return n;
    for (size_t k = name_hash(name) & (ix->cap - 1); ix->slot[k]; k = (k + 1) & (ix->cap - 1))
        if (!strcmp(t[ix->slot[k] - 1].name, name))
            return ix->slot[k] - 1;
    return n;
}

static bool index_add(name_index *ix, const ckpt_tensor *t, int i) {
    if ((size_t)(i + 1) * 2 > ix->cap) { /* grow: rehash every name so far */
        size_t cap = ix->cap ? ix->cap * 2 : 64;
        while ((size_t)(i + 1) * 2 > cap)
            cap *= 2;
        int *slot = CFT_NEWN(int, cap);
        if (!slot)
            return false;
        ix->slot = slot, ix->cap = cap;
        for (int j = 0; j < i; j++) {
            size_t k = name_hash(t[j].name) & (cap - 1);
            while (slot[k])
                k = (k + 1) & (cap - 1);
            slot[k] = j + 1;
        }
    }
    size_t k = name_hash(t[i].name) & (ix->cap - 1);
    while (ix->slot[k])
        k = (k + 1) & (ix->cap - 1);
    ix->slot[k] = i + 1;
    return true;
}

/* the global metadata from everyone's descriptions, checked by the
 * loader's checker; writes[r] lines: *mine gets this rank's names */
static cft_array *plan(const char *call, char **all, int p, int me, ckpt_meta *m,
                       const char ***mine, int *nmine) {
    name_index ix = {NULL, 0};
    int cap = 16, n = 0, nm = 0, capm = 16;
    ckpt_tensor *t = CFT_NEWN(ckpt_tensor, cap);
    const char **w = CFT_NEWN(const char *, capm);
    if (!t || !w)
        return cft__oom();
    for (int r = 0; r < p; r++)
        for (char *line = all[r]; *line;) {
            char *end = strchr(line, '\n');
            *end = 0;
            char *f[4 + CFT_MAX_NDIM + 1];
            int nf = 0;
            for (char *q = line; nf < 5 + CFT_MAX_NDIM && q;) {
                f[nf++] = q;
                q = strchr(q, '\t');
                if (q)
                    *q++ = 0;
            }
            const char *name = f[0];
            int dtype = atoi(f[1]), ndim = atoi(f[4]);
            int64_t begin = atoll(f[2]), stop = atoll(f[3]), shape[CFT_MAX_NDIM];
            for (int d = 0; d < ndim; d++)
                shape[d] = atoll(f[5 + d]);
            int i = find_name(&ix, t, name, n);
            bool whole = begin == 0 && stop == (ndim ? shape[0] : 1);
            if (i == n) {
                if (n == cap) {
                    ckpt_tensor *t2 = CFT_NEWN(ckpt_tensor, cap * 2);
                    if (!t2)
                        return cft__oom();
                    memcpy(t2, t, sizeof *t * (size_t)n);
                    t = t2, cap *= 2;
                }
                t[n].name = cft__strdup(name), t[n].dtype = (cft_dtype)dtype, t[n].ndim = ndim;
                memcpy(t[n].shape, shape, sizeof shape);
                t[n].pieces = CFT_NEWN(ckpt_piece, p);
                t[n].npieces = 0;
                if (!t[n].name || !t[n].pieces || !index_add(&ix, t, n))
                    return cft__oom();
                n++;
            } else if (t[i].dtype != (cft_dtype)dtype || t[i].ndim != ndim ||
                       memcmp(t[i].shape, shape, sizeof(int64_t) * (size_t)ndim))
                return cft__fail(CFT_E_SHAPE,
                                 "%s: '%s' differs between ranks (dtype or global "
                                 "shape; rank %d)",
                                 call, name, r);
            /* a whole value: only its first holder's copy is written */
            bool written = !(whole && t[i].npieces > 0);
            if (written) {
                ckpt_piece *pc = &t[i].pieces[t[i].npieces++];
                snprintf(pc->file, sizeof pc->file, "rank%d.safetensors", r);
                pc->begin = begin, pc->end = stop;
                if (r == me) {
                    if (nm == capm) {
                        const char **w2 = CFT_NEWN(const char *, capm * 2);
                        if (!w2)
                            return cft__oom();
                        memcpy(w2, w, sizeof *w * (size_t)nm);
                        w = w2, capm *= 2;
                    }
                    w[nm++] = t[i].name;
                }
            }
            line = end + 1;
        }
    m->n = n, m->t = t;
    char *text = cft__ckpt_format(m); /* the loader's checks, on the plan */
    if (!text)
        return cft__oom();
    ckpt_meta back;
    cft_array *e = cft__ckpt_parse(text, strlen(text), &back);
    free(text);
    if (e)
        return cft__fail(CFT_E_SHAPE, "%s: the pieces do not make a checkpoint: %s", call,
                         cft_error_message(e));
    *mine = w, *nmine = nm;
    return NULL;
}

/* ---- the directory ---- */

static void remove_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(path);
}

/* The previous checkpoint, once swapped out, is removed on a thread of its
 * own: freeing its blocks took ~25 ms of a ~100 ms save here, and nothing
 * needs to wait for it. It first gets a unique name (a rename, instant), so
 * the next save can use <dir>.partial at once; cft_dist_finalize waits for
 * the removals still running. */
static pthread_mutex_t reap_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reap_cv = PTHREAD_COND_INITIALIZER;
static int reaping;
static unsigned reap_seq;

static void *reap(void *arg) {
    remove_dir(arg);
    free(arg);
    pthread_mutex_lock(&reap_mu);
    reaping--;
    pthread_cond_broadcast(&reap_cv);
    pthread_mutex_unlock(&reap_mu);
    return NULL;
}

static void remove_later(const char *path) {
    size_t n = strlen(path) + 64;
    char *trash = malloc(n);
    pthread_mutex_lock(&reap_mu);
    unsigned k = reap_seq++;
    pthread_mutex_unlock(&reap_mu);
    if (trash)
        snprintf(trash, n, "%s.old-%d-%u", path, (int)getpid(), k);
    if (!trash || rename(path, trash) != 0) {
        remove_dir(path);
        free(trash);
        return;
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    pthread_mutex_lock(&reap_mu);
    reaping++;
    pthread_mutex_unlock(&reap_mu);
    if (pthread_create(&t, &at, reap, trash) != 0)
        reap(trash);
    pthread_attr_destroy(&at);
}

void cft__ckpt_reap_wait(void) {
    pthread_mutex_lock(&reap_mu);
    while (reaping > 0)
        pthread_cond_wait(&reap_cv, &reap_mu);
    pthread_mutex_unlock(&reap_mu);
}

static void sync_path(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* rank 0: metadata last, then the new directory in place of the old */
static cft_array *commit(cft_checkpoint_job *s) {
    char *text = cft__ckpt_format(&s->meta);
    if (!text)
        return cft__oom();
    char tmp[4200], final[4200];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", s->partial, CKPT_META);
    snprintf(final, sizeof final, "%s/%s", s->partial, CKPT_META);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    size_t n = strlen(text);
    bool ok = fd >= 0 && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    free(text);
    if (!ok || rename(tmp, final) != 0)
        return cft__fail(CFT_E_IO, "cft_checkpoint_save: cannot write %s: %s", final,
                         strerror(errno));
    sync_path(s->partial);
    struct stat old;
    if (stat(s->dir, &old) == 0) {
        if (!S_ISDIR(old.st_mode))
            return cft__fail(CFT_E_IO, "cft_checkpoint_save: %s exists and is not a directory",
                             s->dir);
        chmod(s->partial, old.st_mode & 07777); /* keep the old directory's mode */
        if (renameat2(AT_FDCWD, s->partial, AT_FDCWD, s->dir, RENAME_EXCHANGE) != 0)
            return cft__fail(CFT_E_IO, "cft_checkpoint_save: cannot swap %s in: %s", s->dir,
                             strerror(errno));
        remove_later(s->partial); /* the previous checkpoint, now here */
    } else if (rename(s->partial, s->dir) != 0)
        return cft__fail(CFT_E_IO, "cft_checkpoint_save: cannot rename %s to %s: %s", s->partial,
                         s->dir, strerror(errno));
    char parent[4200];
    snprintf(parent, sizeof parent, "%s", s->dir);
    char *slash = strrchr(parent, '/');
    if (slash)
        *slash = 0;
    sync_path(slash ? parent : ".");
    return NULL;
}

/* ---- writing ---- */

static void *write_mine(void *arg) {
    cft_checkpoint_job *s = arg;
    cft_init();
    s->write_status = CFT_OK;
    if (cft_tree_size(s->mine) > 0) {
        cft__fault_point("checkpoint_write");
        char path[4200];
        snprintf(path, sizeof path, "%s/rank%d.safetensors", s->partial, s->g->rank);
        s->write_status = cft_save_safetensors(path, s->mine, NULL, 0);
        if (s->write_status != CFT_OK)
            snprintf(s->write_err, sizeof s->write_err, "%s", cft_last_error_message());
    }
    return NULL;
}

/* everyone agrees on failure: the largest flag. When the agreement itself
 * fails (a peer dead or stalled), *why (if still NULL) says so: the
 * collective's error names the rank and the deadline. */
static bool any_failed(cft_dist_group *g, bool mine, cft_array **why) {
    cft_array *f = cft_dist_all_reduce(g, cft_scalar(mine ? 1 : 0, CFT_I32), CFT_DIST_MAX);
    if (cft_failed(f) && why && !*why)
        *why = f; /* "cft_checkpoint_save: cft_dist_all_reduce: rank ..." */
    return cft_failed(f) || cft_item(f) != 0;
}

cft_checkpoint_job *cft_checkpoint_save_async(cft_dist_group *g, const char *dir,
                                              const cft_tree *local, const cft_shard *shards,
                                              int nshards) {
    CFT_API("cft_checkpoint_save");
    const char *call = "cft_checkpoint_save";
    cft_checkpoint_job *s = CFT_NEW(cft_checkpoint_job);
    if (!s)
        return NULL;
    s->g = g;
    cft_array *e = cft__dist_check(call, g);
    if (!e && (!dir || !*dir || strlen(dir) > 4000 || !local || cft_tree_failed(local) ||
               nshards < 0 || (nshards && !shards)))
        e = cft__fail(CFT_E_ARG, "%s: needs a directory, a tree and 0 or more shards", call);
    char *text = NULL;
    size_t len = 0;
    if (!e)
        e = describe(call, local, shards, nshards, &text, &len);
    /* every rank goes through the same collectives, failed or not */
    if (any_failed(g, e != NULL, &e)) {
        free(text);
        s->err = e ? e : cft__fail(CFT_E_ARG, "%s: another rank's arguments are bad", call);
        s->waited = true, s->result = cft__set_last(s->err);
        return s;
    }
    char **all = NULL;
    e = exchange(g, text, len, &all);
    free(text);
    const char **names = NULL;
    int nnames = 0;
    if (!e)
        e = plan(call, all, g->size, g->rank, &s->meta, &names, &nnames);
    if (!e) {
        s->dir = cft__strdup(dir);
        s->partial = cft__new(strlen(dir) + 16);
        if (!s->dir || !s->partial)
            e = cft__oom();
        else
            snprintf(s->partial, strlen(dir) + 16, "%s.partial", dir);
    }
    if (!e && g->rank == 0) { /* a fresh staging directory */
        remove_dir(s->partial);
        if (mkdir(s->partial, 0777) != 0)
            e = cft__fail(CFT_E_IO, "%s: cannot make %s: %s", call, s->partial, strerror(errno));
    }
    if (any_failed(g, e != NULL, &e)) { /* the plan is the same everywhere: so is e */
        s->err = e ? e : cft__fail(CFT_E_IO, "%s: rank 0 could not prepare %s.partial", call, dir);
        s->waited = true, s->result = cft__set_last(s->err);
        return s;
    }
    /* this rank's names are its tree's, in the tree's order (describe walks
     * the tree, plan keeps the lines this rank writes): one pass finds them
     * (cft_tree_get per name scanned the tree: quadratic) */
    int nl = cft_tree_size(local);
    cft_array **xs = CFT_NEWN(cft_array *, nnames + 1);
    for (int i = 0, j = 0; xs && i < nnames; i++) {
        while (j < nl && strcmp(cft_tree_name(local, j), names[i]))
            j++;
        xs[i] = j < nl ? cft_tree_at(local, j++) : cft_tree_get(local, names[i]);
    }
    s->mine = xs ? cft_tree_from(names, xs, nnames) : cft_tree_fail(cft__oom());
    s->threaded = pthread_create(&s->writer, NULL, write_mine, s) == 0;
    if (!s->threaded)
        write_mine(s);
    return s;
}

cft_status cft_checkpoint_wait(cft_checkpoint_job *s) {
    CFT_API("cft_checkpoint_wait");
    if (!s)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_checkpoint_wait: the handle is NULL"));
    if (s->waited)
        return s->result;
    s->waited = true;
    if (s->threaded)
        pthread_join(s->writer, NULL);
    cft_array *e = NULL;
    if (s->write_status != CFT_OK)
        e = cft__fail(CFT_E_IO, "cft_checkpoint_save: rank %d: %s", s->g->rank, s->write_err);
    if (any_failed(s->g, e != NULL, &e)) {
        if (!e)
            e = cft__fail(CFT_E_IO, "cft_checkpoint_save: another rank could not write its file");
    } else if (s->g->rank == 0)
        e = commit(s);
    if (any_failed(s->g, e != NULL, &e) && !e)
        e = cft__fail(CFT_E_IO, "cft_checkpoint_save: rank 0 could not commit %s", s->dir);
    if (e && s->g->rank == 0)
        remove_dir(s->partial); /* the previous checkpoint stays as it was */
    return s->result = e ? cft__set_last(e) : CFT_OK;
}

cft_status cft_checkpoint_save(cft_dist_group *g, const char *dir, const cft_tree *local,
                               const cft_shard *shards, int nshards) {
    CFT_API("cft_checkpoint_save");
    return cft_checkpoint_wait(cft_checkpoint_save_async(g, dir, local, shards, nshards));
}
