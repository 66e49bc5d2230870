/* device.c: devices (cft/device.h). Backends register a table of
 * functions by name; cft_device("name:index") finds or loads the backend
 * ("cuda" from the installed libcft_cuda.so, checked to be writable by no
 * other user before it is loaded) and checks the index. Device arrays
 * keep the backend's pointer in data; their memory is released when the
 * array that allocated it is collected: the collector's finalizer only
 * queues the pointer, and the queue is drained by the next allocation or
 * synchronisation (DESIGN.md "Memory"). Every byte moved between the host
 * and a device goes through the table's to_host / to_device. */
#include "array/device.h"

#include <dlfcn.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "array/device_plugin.h"
#include "array/device_pool.h"
#include "core/cache.h"
#include "core/error.h"
#include "core/mem.h"

enum { MAX_BACKENDS = 16, MAX_DEVICES = 64 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static cft_backend backends[MAX_BACKENDS];
static int nbackends;
/* device handles, made once per (backend, index) and kept (never freed) */
static cft_dev *devices[MAX_BACKENDS][MAX_DEVICES];

static const cft_dev cpu = {NULL, 0, "cpu", NULL};

const cft_dev *cft__dev_cpu(void) {
    return &cpu;
}

static bool name_ok(const char *s) {
    if (!s || !*s || strlen(s) > 31)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

cft_status cft_register_backend(const cft_backend *b) {
    CFT_API("cft_register_backend");
    if (!b)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_register_backend: the table is NULL"));
    if (b->abi < 1 || b->abi > CFT_BACKEND_ABI)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_register_backend: table of abi %d, this cft takes 1 "
                                       "to %d",
                                       b->abi, CFT_BACKEND_ABI));
    if (!name_ok(b->name))
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_register_backend: a backend's name is 1 to 31 "
                                       "letters, digits or '_' (\"%.40s\")",
                                       b->name ? b->name : "(null)"));
    if (!strcmp(b->name, "cpu") || !b->device_count || !b->alloc || !b->release || !b->to_device ||
        !b->to_host || !b->copy || !b->run || !b->synchronize)
        return cft__set_last(cft__fail(CFT_E_ARG,
                                       "cft_register_backend: \"%s\": the name cpu is the "
                                       "host's, and every function but last_error is needed",
                                       b->name));
    pthread_mutex_lock(&mu);
    cft_array *e = NULL;
    for (int i = 0; i < nbackends && !e; i++)
        if (!strcmp(backends[i].name, b->name))
            e = cft__fail(CFT_E_ARG, "cft_register_backend: a backend named \"%s\" exists",
                          b->name);
    if (!e && nbackends == MAX_BACKENDS)
        e = cft__fail(CFT_E_ARG, "cft_register_backend: %d backends registered already",
                      MAX_BACKENDS);
    if (!e) {
        /* a table of abi 1 ends before run_kernel, 2 before begin_capture, 3 before
         * comm_id, 4 before mark */
        memset(&backends[nbackends], 0, sizeof backends[nbackends]);
        static const size_t ends[CFT_BACKEND_ABI + 1] = {0,
                                                         offsetof(cft_backend, run_kernel),
                                                         offsetof(cft_backend, begin_capture),
                                                         offsetof(cft_backend, comm_id),
                                                         offsetof(cft_backend, mark),
                                                         sizeof(cft_backend)};
        memcpy(&backends[nbackends], b, ends[b->abi]);
        cft_backend *nb = &backends[nbackends];
        if (!nb->begin_capture || !nb->end_capture || !nb->launch_graph || !nb->release_graph)
            nb->begin_capture = NULL, nb->end_capture = NULL, nb->launch_graph = NULL,
            nb->release_graph = NULL; /* all four or none */
        if (!nb->comm_id || !nb->comm_init || !nb->comm_poll || !nb->comm_abort || !nb->collective)
            nb->comm_id = NULL, nb->comm_init = NULL, nb->comm_poll = NULL, nb->comm_abort = NULL,
            nb->collective = NULL; /* all five or none */
        if (!nb->mark || !nb->elapsed || !nb->drop_mark)
            nb->mark = NULL, nb->elapsed = NULL, nb->drop_mark = NULL; /* all three or none */
        backends[nbackends].name = cft__strdup(b->name);
        cft__dev_wrap(&backends[nbackends], nbackends); /* counted, profiled */
        nbackends++;
    }
    pthread_mutex_unlock(&mu);
    return e ? cft__set_last(e) : CFT_OK;
}

static int find_backend(const char *name) {
    for (int i = 0; i < nbackends; i++)
        if (!strcmp(backends[i].name, name))
            return i;
    return -1;
}

#ifdef CFT_CUDA_PLUGIN_PATHS
/* a file fit to load: a regular file in a directory that neither it nor
 * the directory can be changed by another user */
static bool trusted(const char *path, char *why, size_t n) {
    struct stat st;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    const char *what[2] = {path, slash ? dir : "."};
    for (int k = 0; k < 2; k++) {
        if (stat(what[k], &st) != 0) {
            snprintf(why, n, "%s does not exist", what[k]);
            return false;
        }
        if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
            snprintf(why, n, "%s can be changed by another user (owner uid %u, mode %03o)", what[k],
                     (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
            return false;
        }
    }
    return true;
}
#endif

/* Where libcft_cuda.so may be, each still to pass `trusted`: the file
 * CFT_CUDA_PLUGIN names, else beside the binary that holds this code
 * (libcft.so in its library directory, or a program linked with libcft.a),
 * in the library directory of the prefix a program in bin/ belongs to
 * (CFT_CUDA_PLUGIN_PATHS: bin's relative path to lib), and one directory
 * up (the build tree's examples/ and bench/), and last the library
 * directory of the install prefix (CFT_CUDA_PLUGIN_LIBDIR: what a program
 * linked with libcft.a outside the prefix can find; never a build path).
 * Found from this binary's own place (dladdr), so a moved prefix finds its
 * plug-in. */
#ifdef CFT_CUDA_PLUGIN_PATHS
enum { MAX_PLUGIN_PATHS = 5 };
static int plugin_paths(char (*out)[1024]) {
    const char *env = getenv("CFT_CUDA_PLUGIN");
    if (env && *env) {
        snprintf(out[0], 1024, "%s", env);
        return 1;
    }
    Dl_info info;
    char dir[900] = ".";
    if (dladdr((void *)plugin_paths, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        char *real = realpath(info.dli_fname, NULL);
        snprintf(dir, sizeof dir, "%s", real ? real : info.dli_fname);
        free(real);
        *strrchr(dir, '/') = 0;
    }
    int n = 0;
    snprintf(out[n++], 1024, "%s/libcft_cuda.so", dir);
    snprintf(out[n++], 1024, "%s/%s/libcft_cuda.so", dir, CFT_CUDA_PLUGIN_PATHS);
    snprintf(out[n++], 1024, "%s/../libcft_cuda.so", dir);
#ifdef CFT_CUDA_PLUGIN_LIBDIR
    snprintf(out[n++], 1024, "%s/libcft_cuda.so", CFT_CUDA_PLUGIN_LIBDIR);
#endif
    return n;
}
#endif

/* "cuda": libcft_cuda.so from where this cft was built or installed; its
 * cft_cuda_backend_register() registers the table. Under mu. */
static cft_array *load_plugin(const char *name) {
    if (strcmp(name, "cuda")) {
        char known[MAX_BACKENDS * 34] = "cpu";
        for (int i = 0; i < nbackends; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), ", %s", backends[i].name);
        return cft__fail(CFT_E_ARG,
                         "cft_device: no backend named \"%s\" (registered: %s; "
                         "cft_register_backend adds one)",
                         name, known);
    }
#ifdef CFT_CUDA_PLUGIN_PATHS
    char paths[MAX_PLUGIN_PATHS][1024];
    int npaths = plugin_paths(paths);
    char why[2400] = "";
    for (int i = 0; i < npaths; i++) {
        char w[1100];
        if (!trusted(paths[i], w, sizeof w)) {
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%s", *why ? "; " : "", w);
            continue;
        }
        void *h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%s", *why ? "; " : "",
                     dlerror());
            continue;
        }
        cft_plugin_register_fn reg;
        *(void **)&reg = dlsym(h, "cft_cuda_backend_register");
        if (!reg)
            return cft__fail(CFT_E_ARG, "cft_device: %s has no cft_cuda_backend_register",
                             paths[i]);
        pthread_mutex_unlock(&mu); /* it calls cft_register_backend */
        static const cft_plugin_core core = {
            cft_register_backend,
            cft_dev_op_run_on_host,
            cft_last_error_message,
            trusted,
            cft__cache_get,
            cft__cache_put,
            {cft_dev_op_name, cft_dev_op_nin, cft_dev_op_in, cft_dev_op_out, cft_dev_op_param}};
        int rc = reg(&core);
        pthread_mutex_lock(&mu);
        if (rc != 0 && find_backend(name) >= 0) /* another thread registered it meanwhile */
            rc = 0;
        if (rc != 0)
            return cft__fail(CFT_E_ARG, "cft_device: %s could not register the CUDA backend: %s",
                             paths[i], cft_last_error_message());
        return NULL;
    }
    return cft__fail(
        CFT_E_ARG,
        "cft_device: the CUDA backend (libcft_cuda.so) cannot be loaded: %s (CFT_CUDA_PLUGIN "
        "names its file)",
        why);
#else
    return cft__fail(CFT_E_ARG,
                     "cft_device: this cft was built without the CUDA backend (CMake found no "
                     "CUDA toolkit, or CFT_CUDA=OFF)");
#endif
}

static cft_dev *failed(const char *name, cft_array *e) {
    static cft_dev oom = {NULL, 0, "(out of memory)", NULL};
    cft_dev *d = CFT_NEW(cft_dev);
    if (!d) { /* a failed device all the same, with the preallocated error */
        oom.err = cft__oom();
        return &oom;
    }
    snprintf(d->name, sizeof d->name, "%s", name);
    d->err = e;
    return d;
}

cft_dev *cft_device(const char *name) {
    CFT_API("cft_device");
    if (!name)
        return failed("(null)", cft__fail(CFT_E_ARG, "cft_device: the name is NULL"));
    if (!strcmp(name, "cpu") || !strcmp(name, "cpu:0"))
        return (cft_dev *)&cpu;
    char bname[32];
    const char *colon = strchr(name, ':');
    size_t bl = colon ? (size_t)(colon - name) : strlen(name);
    long idx = 0;
    if (bl == 0 || bl >= sizeof bname)
        return failed(name, cft__fail(CFT_E_ARG,
                                      "cft_device: \"%.60s\" is not a device name "
                                      "(\"cpu\", \"<backend>\" or \"<backend>:<n>\")",
                                      name));
    memcpy(bname, name, bl);
    bname[bl] = 0;
    if (colon) {
        char *end;
        idx = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || idx < 0 || idx >= MAX_DEVICES)
            return failed(name, cft__fail(CFT_E_ARG,
                                          "cft_device: \"%.60s\": the index is a number in "
                                          "[0, %d)",
                                          name, MAX_DEVICES));
    }
    if (!name_ok(bname))
        return failed(name,
                      cft__fail(CFT_E_ARG, "cft_device: \"%.60s\" is not a device name", name));
    pthread_mutex_lock(&mu);
    int bi = find_backend(bname);
    cft_array *e = NULL;
    if (bi < 0) {
        e = load_plugin(bname);
        bi = e ? -1 : find_backend(bname);
        if (!e && bi < 0)
            e = cft__fail(CFT_E_ARG, "cft_device: the plugin did not register \"%s\"", bname);
    }
    cft_dev *d = NULL;
    if (!e && !(d = devices[bi][idx])) {
        const cft_backend *b = &backends[bi];
        int n = b->device_count(b->ctx);
        if (n < 0)
            e = cft__fail(CFT_E_ARG, "cft_device: %s: %s", name,
                          b->last_error && b->last_error(b->ctx) ? b->last_error(b->ctx)
                                                                 : "the backend cannot run here");
        else if (idx >= n)
            e = cft__fail(CFT_E_ARG, "cft_device: %s: no such device (%s has %d)", name, bname, n);
        else if ((d = CFT_NEW(cft_dev))) {
            d->b = b, d->index = (int)idx;
            snprintf(d->name, sizeof d->name, "%s:%ld", bname, idx);
            devices[bi][idx] = d;
        } else
            e = cft__oom();
    }
    pthread_mutex_unlock(&mu);
    return e ? failed(name, e) : d;
}

cft_array *cft_device_error(const cft_dev *d) {
    return d ? d->err : cft__fail(CFT_E_ARG, "cft_device_error: the device is NULL");
}

const char *cft_device_name(const cft_dev *d) {
    return d ? d->name : "(null)";
}

const cft_dev *cft_device_of(const cft_array *x) {
    return cft__on_device(x) ? x->dev : &cpu;
}

cft_array *cft__dev_fail(const cft_dev *d, const char *call, const char *what) {
    const char *m = d->b && d->b->last_error ? d->b->last_error(d->b->ctx) : NULL;
    return cft__fail(CFT_E_FOREIGN, "%s: %s on %s failed%s%s", call, what, d->name, m ? ": " : "",
                     m ? m : "");
}

/* ---- memory: released when collected, through a queue ---- */

typedef struct {
    const cft_dev *d;
    void *ptr;
    size_t bytes; /* 0: ptr is a graph of the backend's (release_graph) */
} pending;
static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static pending *queue;
static size_t nqueue, capqueue;

/* the bytes of a device array's buffer (x owns it) */
static size_t dev_bytes(const cft_array *x) {
    size_t n = (size_t)cft__numel(x->aval.shape, x->aval.ndim) * cft_dtype_size(x->aval.dtype);
    return n ? n : 1;
}

static void enqueue(pending p) {
    pthread_mutex_lock(&qmu);
    if (nqueue == capqueue) { /* malloc, not the collector's heap, inside a finalizer */
        size_t c = capqueue ? 2 * capqueue : 64;
        pending *q = realloc(queue, c * sizeof *q);
        if (!q) { /* cannot even queue it: the memory stays allocated */
            pthread_mutex_unlock(&qmu);
            return;
        }
        queue = q, capqueue = c;
    }
    queue[nqueue++] = p;
    pthread_mutex_unlock(&qmu);
}

static void on_collect(void *obj, void *arg) {
    (void)arg;
    cft_array *x = obj;
    if (x->data) /* NULL: released already (cft__dev_release) */
        enqueue((pending){x->dev, x->data, dev_bytes(x)});
}

void cft__dev_release_graph_later(const cft_dev *d, void *graph) {
    if (graph && d->b->release_graph)
        enqueue((pending){d, graph, 0});
}

static void drain(void) {
    cft__run_collected();
    for (;;) {
        pthread_mutex_lock(&qmu);
        if (!nqueue) {
            pthread_mutex_unlock(&qmu);
            return;
        }
        pending p = queue[--nqueue];
        pthread_mutex_unlock(&qmu);
        if (p.bytes)
            cft__pool_release(p.d, p.ptr, p.bytes);
        else
            p.d->b->release_graph(p.d->b->ctx, p.d->index, p.ptr);
    }
}

static _Thread_local cft_dev_capture *capture;

void cft__dev_capture(cft_dev_capture *c) {
    capture = c;
}

static void captured(cft_array *x) {
    cft_dev_capture *c = capture;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        cft_array **a = cft__realloc(c->arrs, sizeof *a * (size_t)cap);
        if (!a) {
            c->failed = true;
            return;
        }
        c->arrs = a, c->cap = cap;
    }
    c->arrs[c->n++] = x;
}

/* a failed device given to `call`: an error naming the call, the device
 * and why it cannot be used */
static cft_array *unusable(const char *call, const cft_dev *d) {
    return cft__fail(d->err->err_code, "%s: the device \"%s\" cannot be used: %s", call, d->name,
                     cft_error_message(d->err));
}

cft_array *cft__dev_alloc(const cft_dev *d, const char *call, cft_dtype dt, const int64_t *shape,
                          int ndim) {
    size_t bytes;
    cft_array *e = cft__check_size(call, dt, shape, ndim, NULL, &bytes);
    if (e)
        return e;
    if (d->err)
        return unusable(call, d);
    drain();
    if (cft__pool_pressure(bytes)) { /* device bytes the collector does not see */
        cft__collect();
        drain();
        cft__pool_collected();
    }
    cft_array *x = CFT_NEW(cft_array);
    if (!x)
        return cft__oom();
    x->kind = CFT_K_CONCRETE;
    x->aval = cft__aval(dt, shape, ndim);
    cft__row_major(shape, ndim, x->strides);
    x->data = cft__pool_alloc(d, bytes ? bytes : 1);
    if (!x->data) { /* garbage may hold what is missing: collect it, and try again */
        cft__collect();
        drain();
        x->data = cft__pool_alloc(d, bytes ? bytes : 1);
    }
    if (!x->data)
        return cft__fail(CFT_E_NOMEM, "%s: out of memory on %s (%zu bytes)", call, d->name, bytes);
    x->dev = d, x->owner = x, x->committed = true;
    cft__on_collect(x, on_collect, NULL);
    if (capture)
        captured(x);
    return x;
}

cft_status cft_device_synchronize(const cft_dev *d) {
    CFT_API("cft_device_synchronize");
    if (!d)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_device_synchronize: the device is NULL"));
    if (d->err)
        return cft__set_last(unusable("cft_device_synchronize", d));
    drain();
    if (d->b && d->b->synchronize(d->b->ctx, d->index) != 0)
        return cft__set_last(cft__dev_fail(d, "cft_device_synchronize", "synchronising"));
    return CFT_OK;
}

void cft__dev_release(cft_array *x) {
    if (!cft__on_device(x) || x->owner != x || !x->data || capture)
        return;
    void *ptr = x->data;
    x->data = NULL; /* its finalizer then has nothing to queue */
    cft__pool_release(x->dev, ptr, dev_bytes(x));
}

cft_status cft_device_memory(const cft_dev *d, cft_device_memory_stats *out) {
    CFT_API("cft_device_memory");
    if (!d || !out)
        return cft__set_last(
            cft__fail(CFT_E_ARG, "cft_device_memory: the %s is NULL", d ? "output" : "device"));
    if (d->err)
        return cft__set_last(unusable("cft_device_memory", d));
    *out = (cft_device_memory_stats){0};
    if (d->b) {
        drain();
        cft__pool_stats(d, out);
    }
    return CFT_OK;
}

cft_status cft_device_empty_cache(const cft_dev *d) {
    CFT_API("cft_device_empty_cache");
    if (!d)
        return cft__set_last(cft__fail(CFT_E_ARG, "cft_device_empty_cache: the device is NULL"));
    if (d->err)
        return cft__set_last(unusable("cft_device_empty_cache", d));
    if (d->b) {
        drain();
        cft__pool_trim(d);
    }
    return CFT_OK;
}

/* ---- copies ---- */

cft_array *cft__dev_to_host(const cft_array *x, const char *call) {
    const cft_array *o = x->owner; /* contiguous from offset 0: its whole buffer */
    const cft_dev *d = x->dev;
    cft_array *h = cft__alloc(o->aval.dtype, o->aval.shape, o->aval.ndim);
    if (cft_failed(h))
        return h;
    size_t bytes = (size_t)cft__numel(o->aval.shape, o->aval.ndim) * cft_dtype_size(o->aval.dtype);
    if (bytes && d->b->to_host(d->b->ctx, d->index, h->data, o->data, bytes) != 0)
        return cft__dev_fail(d, call, "copying to the host");
    cft__keep(o);
    cft_array *v = cft__view(h, x->aval.shape, x->aval.ndim, x->strides, x->offset);
    if (!cft_failed(v))
        v->conj = x->conj, v->dev = NULL, v->owner = NULL, v->committed = false;
    return v;
}

cft_array *cft__dev_read(const cft_array *x, int64_t off, void *out, const char *call) {
    const cft_dev *d = x->dev;
    size_t es = cft_dtype_size(x->aval.dtype);
    if (d->b->to_host(d->b->ctx, d->index, out, x->data + (size_t)off * es, es) != 0)
        return cft__dev_fail(d, call, "copying to the host");
    cft__keep(x);
    return NULL;
}

cft_array *cft__dev_write(cft_array *dst, const void *src, const char *call) {
    const cft_dev *d = dst->dev;
    size_t bytes =
        (size_t)cft__numel(dst->aval.shape, dst->aval.ndim) * cft_dtype_size(dst->aval.dtype);
    if (bytes && d->b->to_device(d->b->ctx, d->index, dst->data, src, bytes) != 0)
        return cft__dev_fail(d, call, "copying from the host");
    return dst;
}

cft_array *cft__dev_from_host(const cft_dev *d, cft_array *x, const char *call) {
    cft_array *c = cft__contig(x), *y;
    if (cft_failed(c))
        return c;
    y = cft__dev_alloc(d, call, c->aval.dtype, c->aval.shape, c->aval.ndim);
    if (cft_failed(y))
        return y;
    y = cft__dev_write(y, cft__ptr(c), call);
    cft__keep(c);
    return y;
}

cft_array *cft_device_put(cft_array *x, const cft_dev *d) {
    CFT_API("cft_device_put");
    if (!d)
        return cft__fail(CFT_E_ARG, "cft_device_put: the device is NULL");
    if (d->err)
        return unusable("cft_device_put", d);
    if (!x)
        return cft__fail(CFT_E_ARG, "cft_device_put: the array is NULL");
    if (cft_failed(x))
        return x;
    if (x->kind != CFT_K_CONCRETE)
        return cft__fail(CFT_E_TRACE,
                         "cft_device_put: a traced array (inside a transform or a jit, arrays "
                         "follow their inputs' devices)");
    const cft_dev *from = cft_device_of(x);
    if (from == d && x->committed)
        return x;
    if (!d->b) { /* to the host */
        cft_array *h = cft__on_device(x) ? cft__dev_to_host(x, "cft_device_put") : x;
        if (cft_failed(h))
            return h;
        cft_array *v = cft__view(h, h->aval.shape, h->aval.ndim, h->strides, h->offset);
        if (!cft_failed(v))
            v->committed = true;
        return v;
    }
    if (cft__on_device(x)) { /* device to device: through the host */
        cft_array *h = cft__dev_to_host(x, "cft_device_put");
        return cft_failed(h) ? h : cft__dev_from_host(d, h, "cft_device_put");
    }
    return cft__dev_from_host(d, x, "cft_device_put");
}
