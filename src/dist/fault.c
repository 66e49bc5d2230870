/* fault.c: fault injection for the distributed layer's fault tests (built
 * with CFT_FAULT_INJECTION, on in test builds). CFT_FAULT=<op>:<n>[:<how>[:<rank>]]
 * makes world rank <rank> (default 1) kill itself (how = kill: SIGKILL,
 * the default) or stop itself (stop: SIGSTOP) when it reaches the n-th
 * fault point named <op> ("*": any). The points are every collective and
 * point-to-point operation, by its public call ("cft_dist_all_reduce",
 * "cft_dist_recv", ...; counted when it is enqueued), each request an RPC
 * worker serves ("rpc_call", "rpc_remote", "rpc_fetch", "rpc_delete";
 * counted before it runs) and each checkpoint piece a rank writes
 * ("checkpoint_write"). Before the signal, one line on stderr says what
 * and when (CLOCK_REALTIME), so that a test can time the survivors. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"

#ifdef CFT_FAULT_INJECTION
static struct {
    char op[64];
    long n;
    int sig, rank;
} knob;
static atomic_int parsed; /* 0 not yet, 1 parsing, 2 set, 3 none */
static atomic_long hits;

static void parse(void) {
    int want = 0;
    if (!atomic_compare_exchange_strong(&parsed, &want, 1)) {
        while (atomic_load(&parsed) == 1)
            ;
        return;
    }
    const char *s = getenv("CFT_FAULT");
    char how[16] = "kill";
    int rank = 1, k = 0;
    knob.n = 0;
    if (s)
        k = sscanf(s, "%63[^:]:%ld:%15[^:]:%d", knob.op, &knob.n, how, &rank);
    bool ok = k >= 2 && knob.n > 0 && rank >= 0 && (!strcmp(how, "kill") || !strcmp(how, "stop"));
    if (s && !ok)
        fprintf(stderr, "cft: CFT_FAULT=%s is not <op>:<n>[:kill|stop[:<rank>]]: ignored\n", s);
    knob.sig = strcmp(how, "stop") ? SIGKILL : SIGSTOP;
    knob.rank = rank;
    atomic_store(&parsed, ok ? 2 : 3);
}

void cft__fault_point(const char *op) {
    if (atomic_load(&parsed) != 2) {
        if (atomic_load(&parsed) == 3)
            return;
        parse();
        if (atomic_load(&parsed) != 2)
            return;
    }
    if (strcmp(knob.op, "*") && strcmp(knob.op, op))
        return;
    int rank = cft_dist_initialized() ? cft_dist_rank(cft_dist_world()) : -1;
    if (rank != knob.rank)
        return;
    if (atomic_fetch_add(&hits, 1) + 1 != knob.n)
        return;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    fprintf(stderr, "cft: CFT_FAULT: rank %d pid %ld: %s #%ld: %s at %.3f\n", rank, (long)getpid(),
            op, knob.n, knob.sig == SIGKILL ? "SIGKILL" : "SIGSTOP",
            (double)t.tv_sec + 1e-9 * (double)t.tv_nsec);
    fflush(stderr);
    raise(knob.sig);
}
#else
void cft__fault_point(const char *op) {
    (void)op;
}
#endif
