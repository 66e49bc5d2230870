/* rref.c: remote references. The owner keeps each value in a table keyed
 * by the RRef id the creator chose (so cft_rpc_remote returns at once) with
 * a count of the references held anywhere; the creator's reference counts
 * one, and cft_rref_release sends the owner a DELETE. An RRef passed as an
 * argument is resolved to its value on the callee for that call only (the
 * caller's reference keeps it alive meanwhile), so no fork bookkeeping is
 * needed: a value lives exactly until its last reference is released. */
#include <pthread.h>
#include <string.h>

#include "cft/array.h"
#include "core/error.h"
#include "core/mem.h"
#include "dist/rpc/rpc.h"

/* The references are counted by who holds them, so that a worker cannot
 * drop or replace a value it never held: the creator's (the worker whose
 * number the id carries: it chose the id), and those forked to others
 * (whose holders the owner does not learn: any worker's DELETE may take
 * one of them, but never more than were forked). */
typedef struct entry {
    int64_t id;
    cft_array *value;
    int64_t count;  /* all references: the creator's and the forked */
    int64_t forked; /* of them, forked to workers the owner does not know */
    struct entry *next;
} entry;

#define NBUCKETS 1024
static entry *table[NBUCKETS]; /* static roots: the GC keeps the values */
static int64_t owned;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static entry **find(int64_t id) {
    entry **pp = &table[(uint64_t)id % NBUCKETS];
    while (*pp && (*pp)->id != id)
        pp = &(*pp)->next;
    return pp;
}

static int creator_of(int64_t id) {
    return (int)(id >> 40);
}

bool cft__rref_may_make(int64_t id, int src) {
    if (creator_of(id) != src)
        return false;
    pthread_mutex_lock(&mu);
    bool taken = *find(id) != NULL;
    pthread_mutex_unlock(&mu);
    return !taken;
}

bool cft__rref_store(int64_t id, int src, cft_array *value) {
    if (creator_of(id) != src)
        return false;
    pthread_mutex_lock(&mu);
    entry **pp = find(id);
    bool ok = !*pp; /* never another's value replaced */
    if (ok) {
        entry *e = CFT_NEW(entry);
        if (e) {
            e->id = id, e->value = value, e->count = 1;
            *pp = e;
            owned++;
        }
        ok = e != NULL;
    }
    pthread_mutex_unlock(&mu);
    return ok;
}

cft_array *cft__rref_lookup(int64_t id) {
    pthread_mutex_lock(&mu);
    entry *e = *find(id);
    cft_array *v = e ? e->value : NULL;
    pthread_mutex_unlock(&mu);
    return v;
}

bool cft__rref_drop(int64_t id, int src) {
    pthread_mutex_lock(&mu);
    entry **pp = find(id);
    entry *e = *pp;
    /* the creator's own reference, or one of the forked ones */
    bool own = e && creator_of(id) == src && e->count > e->forked;
    bool ok = e && (own || e->forked > 0);
    if (ok && !own)
        e->forked--;
    if (ok && --e->count <= 0) {
        *pp = e->next;
        owned--;
    }
    pthread_mutex_unlock(&mu);
    return ok;
}

void cft__rref_clear(void) {
    pthread_mutex_lock(&mu);
    memset(table, 0, sizeof table);
    owned = 0;
    pthread_mutex_unlock(&mu);
}

int64_t cft_rpc_owned_count(void) {
    pthread_mutex_lock(&mu);
    int64_t n = owned;
    pthread_mutex_unlock(&mu);
    return n;
}

cft_rref *cft_rpc_remote(int to, const char *name, int nin, cft_array *const *in) {
    CFT_API("cft_rpc_remote");
    cft_rref *r = CFT_NEW(cft_rref);
    if (!r)
        return NULL;
    r->owner = to;
    r->id = cft__rpc_new_rref_id();
    cft_rpc_arg args[RPC_MAX_ARGS];
    int n = nin < 0 ? 0 : nin > RPC_MAX_ARGS ? RPC_MAX_ARGS + 1 : nin;
    for (int i = 0; i < n && i < RPC_MAX_ARGS && in; i++)
        args[i] = (cft_rpc_arg){in[i], NULL};
    r->created =
        cft__rpc_request("cft_rpc_remote", RPC_REMOTE, to, name, r->id, n, in || !n ? args : NULL);
    return r;
}

int cft_rref_owner(const cft_rref *r) {
    return r ? r->owner : -1;
}

bool cft_rref_is_owner(const cft_rref *r) {
    return r && r->owner == cft_rpc_worker_id();
}

/* wait for the creating call; NULL or its error */
static cft_array *confirmed(const char *call, cft_rref *r) {
    if (!r)
        return cft__fail(CFT_E_ARG, "%s: the RRef is NULL", call);
    if (r->released)
        return cft__fail(CFT_E_ARG, "%s: the RRef was released", call);
    if (r->created && cft_future_wait(r->created, 0, NULL) != CFT_OK)
        return cft__fail(CFT_E_FOREIGN, "%s: the RRef's value was never made: %s", call,
                         cft_error_message(r->created->err));
    return NULL;
}

cft_array *cft_rref_local_value(cft_rref *r) {
    CFT_API("cft_rref_local_value");
    cft_array *e = confirmed("cft_rref_local_value", r);
    if (e)
        return e;
    if (!cft_rref_is_owner(r))
        return cft__fail(CFT_E_ARG,
                         "cft_rref_local_value: the value is on worker %d, not here (%d); use "
                         "cft_rref_to_here",
                         r->owner, cft_rpc_worker_id());
    cft_array *v = cft__rref_lookup(r->id);
    return v ? v
             : cft__fail(CFT_E_ARG, "cft_rref_local_value: RRef %lld is gone", (long long)r->id);
}

cft_array *cft_rref_to_here(cft_rref *r) {
    CFT_API("cft_rref_to_here");
    cft_array *e = confirmed("cft_rref_to_here", r);
    if (e)
        return e;
    if (cft_rref_is_owner(r))
        return cft_rref_local_value(r);
    cft_future *f = cft__rpc_request("cft_rref_to_here", RPC_FETCH, r->owner, "", r->id, 0, NULL);
    cft_array *v[1];
    cft_future_wait(f, 1, v);
    return v[0];
}

cft_status cft_rref_release(cft_rref *r) {
    CFT_API("cft_rref_release");
    if (!r || r->released)
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_rref_release: the RRef is NULL or was released"));
    /* no wait for the creation: the owner handles this worker's requests
     * in the order they were sent, so the DELETE comes after the REMOTE
     * (and is nothing if the creation failed) */
    r->released = true;
    cft_future *f = cft__rpc_request("cft_rref_release", RPC_DELETE, r->owner, "", r->id, 0, NULL);
    return f->err ? cft__set_last(f->err) : CFT_OK;
}

/* the owner's side of a fork: one more reference to the RRef in[0] */
static cft_status fork_cb(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    int64_t id = (int64_t)cft_item(in[0]);
    pthread_mutex_lock(&mu);
    entry *e = *find(id);
    if (e)
        e->count++, e->forked++;
    pthread_mutex_unlock(&mu);
    out[0] = e ? cft_scalar(0, CFT_I64)
               : cft__fail(CFT_E_ARG, "RRef %lld is not held here (released?)", (long long)id);
    return e ? CFT_OK : cft__set_last(out[0]);
}

static cft_fn *fork_fn; /* static root */

cft_fn *cft__rref_fork_fn(void) {
    pthread_mutex_lock(&mu);
    if (!fork_fn)
        fork_fn = cft_fn_uncached(cft_fn_new(fork_cb, NULL, 1, 1));
    cft_fn *f = fork_fn;
    pthread_mutex_unlock(&mu);
    return f;
}

cft_status cft_rref_fork(cft_rref *r) {
    CFT_API("cft_rref_fork");
    cft_array *e = confirmed("cft_rref_fork", r);
    if (e)
        return cft__set_last(e);
    cft_array *out[1];
    return cft_rpc_sync(r->owner, "__rref_fork", 1,
                        (cft_array *[]){cft_scalar((double)r->id, CFT_I64)}, 1, out);
}

int64_t cft_rref_id(const cft_rref *r) {
    return r ? r->id : -1;
}

cft_rref *cft_rref_from_fork(int owner, int64_t id) {
    cft_rref *r = CFT_NEW(cft_rref);
    if (r)
        r->owner = owner, r->id = id;
    return r;
}
