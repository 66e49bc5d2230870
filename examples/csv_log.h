/* csv_log.h: the examples' --log FILE: one CSV row per epoch or step, a
 * header first, for scripts/plot.sh. Written to a temporary name beside
 * FILE and renamed over it when the run ends (an interrupted run leaves an
 * earlier log as it was; the old file's mode is kept). */
#ifndef CFT_EXAMPLE_CSV_LOG_H
#define CFT_EXAMPLE_CSV_LOG_H

#ifndef _POSIX_C_SOURCE /* mkstemp, fdopen, fsync under -std=c11: include this first */
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    FILE *f;
    char *path, *tmp;
} csv_log;

/* the path after --log in argv, or NULL */
static inline const char *csv_log_arg(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--log"))
            return argv[i + 1];
    return NULL;
}

/* open the log (a no-op log when path is NULL); the header is the columns */
static inline int csv_log_open(csv_log *l, const char *path, const char *header) {
    memset(l, 0, sizeof *l);
    if (!path)
        return 0;
    size_t n = strlen(path) + 16;
    l->path = strdup(path), l->tmp = malloc(n);
    snprintf(l->tmp, n, "%s.XXXXXX", path);
    int fd = mkstemp(l->tmp);
    l->f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!l->f) {
        fprintf(stderr, "--log %s: cannot create a file beside it\n", path);
        return -1;
    }
    struct stat old;
    if (stat(path, &old) == 0)
        fchmod(fd, old.st_mode & 07777);
    else
        fchmod(fd, 0644);
    fprintf(l->f, "%s\n", header);
    return 0;
}

static inline void csv_log_row(csv_log *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void csv_log_row(csv_log *l, const char *fmt, ...) {
    if (!l->f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(l->f, fmt, ap);
    va_end(ap);
    fputc('\n', l->f);
}

/* finish: the log replaces FILE */
static inline int csv_log_close(csv_log *l) {
    if (!l->f)
        return 0;
    int bad = fflush(l->f) != 0 || fsync(fileno(l->f)) != 0;
    bad |= fclose(l->f) != 0;
    if (bad || rename(l->tmp, l->path) != 0) {
        fprintf(stderr, "--log %s: cannot write it\n", l->path);
        unlink(l->tmp);
        bad = 1;
    }
    free(l->path), free(l->tmp);
    l->f = NULL;
    return bad ? -1 : 0;
}

#endif
