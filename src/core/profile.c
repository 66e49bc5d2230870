/* profile.c: the profiler's recording (events and counters in one array
 * under a mutex, with the thread of each), its Chrome trace writer and its
 * aggregated table. The hooks are in the layers that do the work (fn
 * calls, jit steps, traces, compiles, collectives). */
#include "core/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cft/profile.h"
#include "core/error.h"

_Atomic int cft__prof_on = 0;
_Thread_local int cft__prof_in_plan = 0;

typedef struct {
    char *name, *args;
    const char *cat;
    double ts, dur, value;
    int tid;
    char ph; /* 'X' complete event, 'C' counter */
} event;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static event *evs;
static size_t nev, cap;
static double t_start, t_stop;

double cft__prof_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int tid(void) {
    static _Thread_local int id;
    if (!id)
        id = (int)syscall(SYS_gettid);
    return id;
}

static void add(event e) {
    pthread_mutex_lock(&mu);
    if (nev == cap) {
        size_t nc = cap ? 2 * cap : 4096;
        event *g = realloc(evs, sizeof(event) * nc);
        if (!g) {
            pthread_mutex_unlock(&mu);
            free(e.name), free(e.args);
            return;
        }
        evs = g, cap = nc;
    }
    evs[nev++] = e;
    pthread_mutex_unlock(&mu);
}

void cft__prof_event(const char *name, const char *cat, double t0, const char *args) {
    double t1 = cft__prof_now();
    add((event){strdup(name ? name : "?"), args ? strdup(args) : NULL, cat, t0, t1 - t0, 0, tid(),
                'X'});
}

void cft__prof_event_on(int track, const char *name, const char *cat, double t0, const char *args) {
    double t1 = cft__prof_now();
    add((event){strdup(name ? name : "?"), args ? strdup(args) : NULL, cat, t0, t1 - t0, 0, track,
                'X'});
}

void cft__prof_event_span(int track, const char *name, const char *cat, double ts, double dur,
                          const char *args) {
    add((event){strdup(name ? name : "?"), args ? strdup(args) : NULL, cat, ts, dur, 0, track,
                'X'});
}

static _Atomic(void (*)(void)) flush_hook;

void cft__prof_set_flush(void (*f)(void)) {
    atomic_store(&flush_hook, f);
}

/* named tracks (devices): kept across recordings, written as metadata */
static struct {
    int tid;
    char name[64];
} tracks[64];
static int ntracks;

void cft__prof_track_name(int track, const char *name) {
    pthread_mutex_lock(&mu);
    if (ntracks < 64) {
        tracks[ntracks].tid = track;
        snprintf(tracks[ntracks].name, sizeof tracks[ntracks].name, "%s", name);
        ntracks++;
    }
    pthread_mutex_unlock(&mu);
}

void cft__prof_counter(const char *name, double value) {
    add((event){strdup(name), NULL, "memory", cft__prof_now(), 0, value, tid(), 'C'});
}

static void clear(void) {
    for (size_t i = 0; i < nev; i++)
        free(evs[i].name), free(evs[i].args);
    nev = 0;
}

cft_status cft_profile_start(void) {
    CFT_API("cft_profile_start");
    pthread_mutex_lock(&mu);
    clear();
    t_start = cft__prof_now(), t_stop = 0;
    pthread_mutex_unlock(&mu);
    atomic_store(&cft__prof_on, 1);
    return CFT_OK;
}

static void put_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static int write_trace(FILE *f) {
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    int pid = (int)getpid();
    for (size_t i = 0; i < nev; i++) {
        const event *e = &evs[i];
        fprintf(f, "%s{\"name\": ", i ? ",\n" : "");
        put_json_str(f, e->name);
        fprintf(f, ", \"cat\": \"%s\", \"ph\": \"%c\", \"ts\": %.3f, \"pid\": %d, \"tid\": %d",
                e->cat, e->ph, e->ts - t_start, pid, e->tid);
        if (e->ph == 'X')
            fprintf(f, ", \"dur\": %.3f, \"args\": {%s}", e->dur, e->args ? e->args : "");
        else
            fprintf(f, ", \"args\": {\"MB\": %.3f}", e->value);
        fputc('}', f);
    }
    for (int t = 0; t < ntracks; t++) {
        fprintf(f,
                "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                "\"args\": {\"name\": ",
                nev || t ? ",\n" : "", pid, tracks[t].tid);
        put_json_str(f, tracks[t].name);
        fprintf(f, "}}");
    }
    fprintf(f, "\n]}\n");
    return ferror(f) ? -1 : 0;
}

/* path written whole or not at all: a temporary name in its directory,
 * the old file's mode kept, then rename */
static cft_status write_file(const char *path) {
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp)
        return cft__set_last(cft__oom());
    snprintf(tmp, n, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int err = errno;
        if (fd >= 0)
            close(fd), unlink(tmp);
        free(tmp);
        return cft__set_last(cft__fail(
            CFT_E_IO, "cft_profile_stop: cannot create a file beside %s: %s", path, strerror(err)));
    }
    struct stat old;
    mode_t mode = 0644;
    if (stat(path, &old) == 0)
        mode = old.st_mode & 07777;
    else {
        mode_t um = umask(0);
        umask(um);
        mode = 0666 & ~um;
    }
    bool ok = write_trace(f) == 0 && fchmod(fd, mode) == 0 && fflush(f) == 0 && fsync(fd) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        free(tmp);
        return cft__set_last(
            cft__fail(CFT_E_IO, "cft_profile_stop: cannot write %s: %s", path, strerror(err)));
    }
    free(tmp);
    return CFT_OK;
}

cft_status cft_profile_stop(const char *path) {
    CFT_API("cft_profile_stop");
    void (*flush)(void) = atomic_load(&flush_hook);
    if (flush && atomic_load(&cft__prof_on)) /* events resolved late (device markers) */
        flush();
    atomic_store(&cft__prof_on, 0);
    pthread_mutex_lock(&mu);
    if (t_stop == 0)
        t_stop = cft__prof_now();
    cft_status st = path ? write_file(path) : CFT_OK;
    pthread_mutex_unlock(&mu);
    return st;
}

typedef struct {
    const char *name;
    long calls;
    double total;
} row;

static int by_total(const void *a, const void *b) {
    double x = ((const row *)a)->total, y = ((const row *)b)->total;
    return (x < y) - (x > y);
}
static int by_tid_ts(const void *a, const void *b) {
    const event *x = *(event *const *)a, *y = *(event *const *)b;
    if (x->tid != y->tid)
        return (x->tid > y->tid) - (x->tid < y->tid);
    if (x->ts != y->ts)
        return (x->ts > y->ts) - (x->ts < y->ts);
    return (x->dur < y->dur) - (x->dur > y->dur); /* the enclosing one first */
}

void cft_profile_table(FILE *f, int max_rows) {
    if (!f)
        return;
    pthread_mutex_lock(&mu);
    row *rows = calloc(nev + 1, sizeof(row));
    event **order = calloc(nev + 1, sizeof(event *));
    size_t nr = 0, no = 0;
    for (size_t i = 0; rows && order && i < nev; i++) {
        if (evs[i].ph != 'X')
            continue;
        order[no++] = &evs[i];
        size_t r = 0;
        while (r < nr && strcmp(rows[r].name, evs[i].name))
            r++;
        if (r == nr)
            rows[nr++] = (row){evs[i].name, 0, 0};
        rows[r].calls++, rows[r].total += evs[i].dur;
    }
    double wall = ((t_stop ? t_stop : cft__prof_now()) - t_start), outer = 0;
    if (order) { /* the outermost events of each thread */
        qsort(order, no, sizeof(event *), by_tid_ts);
        double end = -INFINITY;
        int cur = -1;
        for (size_t i = 0; i < no; i++) {
            if (order[i]->tid != cur)
                cur = order[i]->tid, end = -INFINITY;
            if (order[i]->ts >= end) {
                outer += order[i]->dur;
                end = order[i]->ts + order[i]->dur;
            }
        }
    }
    if (rows) {
        qsort(rows, nr, sizeof(row), by_total);
        fprintf(f, "%-48s %8s %12s %12s %8s\n", "Name", "Calls", "Total (ms)", "Mean (us)",
                "% wall");
        for (size_t r = 0; r < nr && (max_rows <= 0 || (int)r < max_rows); r++)
            fprintf(f, "%-48.48s %8ld %12.3f %12.2f %7.1f%%\n", rows[r].name, rows[r].calls,
                    rows[r].total * 1e-3, rows[r].total / (double)rows[r].calls,
                    wall > 0 ? 100 * rows[r].total / wall : 0);
    }
    fprintf(f, "Recorded wall time: %.3f ms; outermost events: %.3f ms\n", wall * 1e-3,
            outer * 1e-3);
    free(rows), free(order);
    pthread_mutex_unlock(&mu);
}
