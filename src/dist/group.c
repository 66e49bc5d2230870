/* group.c: starting and stopping the distributed layer, process groups and
 * the settings (timeout, abort or return on timeout, debug mode). MPI is
 * initialised with MPI_THREAD_SERIALIZED: after cft_dist_init only the
 * communication thread (engine.c) calls MPI. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "core/error.h"
#include "core/par.h"
#include "core/mem.h"
#include "dist/dist.h"

static cft_dist_group *groups[CFT_DIST_MAX_GROUPS]; /* static root: the GC sees them */
static _Atomic int ngroups;
static pthread_mutex_t groups_mu = PTHREAD_MUTEX_INITIALIZER; /* new_group from threads */
static bool inited, we_init_mpi;
static _Atomic double timeout_s = 0; /* 0: from the environment */
static _Atomic int abort_job = 1;
static _Atomic int debug = -1;

static _Atomic double env_timeout = -1; /* CFT_DIST_TIMEOUT, read once */

double cft__dist_timeout(void) {
    double t = atomic_load(&timeout_s);
    if (t > 0)
        return t;
    double v = atomic_load(&env_timeout);
    if (v < 0) {
        const char *e = getenv("CFT_DIST_TIMEOUT");
        v = e && atof(e) > 0 ? atof(e) : 300;
        atomic_store(&env_timeout, v);
    }
    return v;
}

/* a peer failure seen in this process (a timed-out collective or call):
 * the rendezvous at the end wait a grace of 0.5 s (or the deadline, if
 * shorter), since a peer that did not answer then will not come now;
 * a deadline set after it (cft_dist_set_timeout, cft_rpc_set_timeout)
 * says the program expects a slow peer: the full wait again */
static atomic_bool peer_failed;
#define END_GRACE 0.5
void cft__dist_note_peer_failure(void) {
    atomic_store(&peer_failed, true);
}
void cft__dist_rearm(void) {
    atomic_store(&peer_failed, false);
}
double cft__dist_end_wait(double t) {
    return atomic_load(&peer_failed) && t > END_GRACE ? END_GRACE : t;
}
void cft_dist_set_timeout(double seconds) {
    atomic_store(&timeout_s, seconds > 0 ? seconds : 0);
    cft__dist_rearm();
}
void cft_dist_set_abort_on_timeout(bool a) {
    atomic_store(&abort_job, a);
}
bool cft_dist_abort_on_timeout(void) {
    return atomic_load(&abort_job);
}
bool cft__dist_debug(void) {
    int d = atomic_load(&debug);
    if (d < 0) {
        const char *e = getenv("CFT_DIST_DEBUG");
        d = e && (!strcmp(e, "detail") || !strcmp(e, "DETAIL") || !strcmp(e, "1"));
        atomic_store(&debug, d);
    }
    return d;
}
void cft_dist_set_debug(bool on) {
    atomic_store(&debug, on);
}

MPI_Datatype cft__dist_mpi_type(cft_dtype dt) {
    switch (dt) {
    case CFT_BOOL:
        return MPI_UINT8_T;
    case CFT_I32:
        return MPI_INT32_T;
    case CFT_I64:
        return MPI_INT64_T;
    case CFT_F32:
        return MPI_FLOAT;
    case CFT_F64:
        return MPI_DOUBLE;
    case CFT_F16:
    case CFT_BF16:
        return MPI_UINT16_T;
    case CFT_C64:
        return MPI_C_FLOAT_COMPLEX;
    case CFT_C128:
        return MPI_C_DOUBLE_COMPLEX;
    default:
        return MPI_DATATYPE_NULL;
    }
}

/* the arrival barrier of cft_dist_new_group runs here, not on the world
 * group, so that a failed world (a sticky error) can still make groups */
static cft_dist_group *maker;
/* a communicator of its own for cft_dist_finalize's rendezvous: a
 * collective abandoned after a timeout leaves the others' order broken */
static MPI_Comm fin_comm = MPI_COMM_NULL;

static cft_dist_group *new_group_record(MPI_Comm comm, const int *world, int n) {
    cft_dist_group *g = CFT_NEW(cft_dist_group);
    if (!g)
        return NULL;
    g->comm = comm;
    g->size = n;
    g->rank = -1;
    g->id = -1;
    g->world = cft__new(sizeof(int) * (size_t)(n > 0 ? n : 1));
    memcpy(g->world, world, sizeof(int) * (size_t)n);
    if (comm != MPI_COMM_NULL)
        MPI_Comm_rank(comm, &g->rank);
    return g;
}

static cft_dist_group *add_group(MPI_Comm comm, const int *world, int n) {
    if (atomic_load(&ngroups) == CFT_DIST_MAX_GROUPS)
        return NULL;
    cft_dist_group *g = new_group_record(comm, world, n);
    if (!g)
        return NULL;
    int id = atomic_load(&ngroups);
    g->id = id;
    groups[id] = g; /* the slot first, then the count that publishes it */
    atomic_store(&ngroups, id + 1);
    return g;
}

cft_dist_group *cft__dist_group_by_id(int id) {
    return id >= 0 && id < ngroups ? groups[id] : NULL;
}

cft_status cft_dist_init(int *argc, char ***argv) {
    CFT_API("cft_dist_init");
    if (inited)
        return CFT_OK;
    /* A 64 MiB heap from the start, where a single process starts with 32:
     * a collection pauses its rank, and in a pipeline or a collective the
     * other ranks wait out every pause. bench/pipeline, m = 16 (bubble over
     * theory): 1.20-1.54x with 32 MiB, 1.09-1.17x with 64. */
    cft__gc_reserve((size_t)64 << 20);
    int have = 0;
    MPI_Initialized(&have);
    if (!have) {
        int provided = 0;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return cft__set_last(cft__fail(CFT_E_FOREIGN, "cft_dist_init: MPI_Init_thread failed"));
        if (provided < MPI_THREAD_SERIALIZED)
            return cft__set_last(cft__fail(CFT_E_FOREIGN,
                                           "cft_dist_init: MPI gives thread level %d, cft needs "
                                           "MPI_THREAD_SERIALIZED",
                                           provided));
        we_init_mpi = true;
    }
    int size, rank;
    MPI_Comm dup;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* the ranks on this machine share its cores: each gets cores / ranks
     * threads, unless a count was chosen (cft_set_num_threads, CFT_NUM_THREADS) */
    MPI_Comm node;
    int local = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    cft__share_cores(local);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup); /* cft's own traffic never meets the user's */
    MPI_Comm mk;
    MPI_Comm_dup(MPI_COMM_WORLD, &mk);
    MPI_Comm_dup(MPI_COMM_WORLD, &fin_comm);
    int *all = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++)
        all[i] = i;
    ngroups = 0;
    cft_dist_group *w = add_group(dup, all, size);
    maker = new_group_record(mk, all, size);
    free(all);
    if (!w || !maker || cft__dist_engine_start() != 0)
        return cft__set_last(
            cft__fail(CFT_E_FOREIGN, "cft_dist_init: cannot start the communication thread"));
    inited = true;
    return CFT_OK;
}

typedef struct {
    double seconds;
    bool met;
} fin_args;

/* on the communication thread: a barrier of all ranks on fin_comm, given
 * up after the deadline */
static void meet_on_comm(void *arg) {
    fin_args *a = arg;
    MPI_Request req;
    if (fin_comm == MPI_COMM_NULL || MPI_Ibarrier(fin_comm, &req) != MPI_SUCCESS)
        return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int flag = 0;
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            a->met = true;
            return;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > a->seconds)
            return; /* the request stays MPI's: MPI is not finalized */
        struct timespec nap = {0, 200000};
        nanosleep(&nap, NULL);
    }
}

static void finalize_on_comm(void *arg) {
    (void)arg;
    for (int i = 0; i < ngroups; i++)
        if (groups[i]->comm != MPI_COMM_NULL)
            MPI_Comm_free(&groups[i]->comm);
    if (maker && maker->comm != MPI_COMM_NULL)
        MPI_Comm_free(&maker->comm);
    if (fin_comm != MPI_COMM_NULL)
        MPI_Comm_free(&fin_comm);
}

cft_status cft_dist_finalize(void) {
    CFT_API("cft_dist_finalize");
    if (!inited)
        return CFT_OK;
    cft__ckpt_reap_wait(); /* asynchronous saves end first (their steps have deadlines) */
    /* then every rank meets, with a deadline: MPI_Finalize waits for
     * all ranks, and a peer that is stalled (or dead, and MPI not yet told)
     * would hold it for ever (after a timed-out collective with errors
     * returned, it hung). A rank that does not come within the deadline
     * leaves MPI as it is, and the caller is told; the process may exit
     * (mpirun then ends the job). */
    fin_args fa = {cft__dist_end_wait(cft__dist_timeout()), false};
    cft__dist_run_on_comm(meet_on_comm, &fa);
    if (!fa.met) {
        cft__dist_engine_stop();
        inited = false;
        ngroups = 0;
        return cft__set_last(
            cft__fail(CFT_E_FOREIGN,
                      "cft_dist_finalize: not every rank reached cft_dist_finalize within %.1f s "
                      "(CFT_DIST_TIMEOUT, or 0.5 s once a peer timed out): a peer is stalled or "
                      "dead; MPI is not finalized, since "
                      "MPI_Finalize would wait for it for ever: exit the process",
                      fa.seconds));
    }
    cft__dist_run_on_comm(finalize_on_comm, NULL);
    cft__dist_engine_stop();
    inited = false;
    ngroups = 0;
    cft__dist_rearm();
    if (we_init_mpi)
        MPI_Finalize();
    return CFT_OK;
}

bool cft_dist_initialized(void) {
    return inited;
}

cft_dist_group *cft_dist_world(void) {
    if (inited && ngroups > 0)
        return groups[0];
    cft__set_last(cft__fail(CFT_E_ARG, "cft_dist_world: call cft_dist_init first (or it was "
                                       "finalized): there is no world group"));
    return NULL;
}

typedef struct {
    const int *ranks;
    int n;
    MPI_Comm out;
} split_args;

static void split_on_comm(void *arg) {
    split_args *a = arg;
    int me;
    MPI_Comm_rank(groups[0]->comm, &me);
    int key = -1;
    for (int i = 0; i < a->n; i++)
        if (a->ranks[i] == me)
            key = i;
    MPI_Comm_split(groups[0]->comm, key >= 0 ? 0 : MPI_UNDEFINED, key, &a->out);
}

cft_dist_group *cft_dist_new_group(const int *ranks, int n) {
    CFT_API("cft_dist_new_group");
    if (!inited) {
        cft__set_last(cft__fail(CFT_E_ARG, "cft_dist_new_group: call cft_dist_init first"));
        return NULL;
    }
    int size = groups[0]->size;
    if (!ranks || n < 1 || n > size) {
        cft__set_last(
            cft__fail(CFT_E_ARG, "cft_dist_new_group: %d ranks of a world of %d", n, size));
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= size) {
            cft__set_last(
                cft__fail(CFT_E_ARG, "cft_dist_new_group: rank %d not in [0, %d)", ranks[i], size));
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i]) {
                cft__set_last(
                    cft__fail(CFT_E_ARG, "cft_dist_new_group: rank %d repeated", ranks[i]));
                return NULL;
            }
    }
    if (ngroups == CFT_DIST_MAX_GROUPS) {
        cft__set_last(
            cft__fail(CFT_E_ARG, "cft_dist_new_group: more than %d groups", CFT_DIST_MAX_GROUPS));
        return NULL;
    }
    /* MPI_Comm_split has no deadline: first every rank must arrive, within
     * CFT_DIST_TIMEOUT (a timeout aborts, or is returned as an error) */
    if (cft__dist_arrival(maker, "cft_dist_new_group") != CFT_OK) {
        cft__set_last(cft__fail(CFT_E_FOREIGN, "cft_dist_new_group: %s", cft_last_error_message()));
        return NULL;
    }
    split_args a = {ranks, n, MPI_COMM_NULL};
    pthread_mutex_lock(&groups_mu);
    cft__dist_run_on_comm(split_on_comm, &a);
    cft_dist_group *g = add_group(a.out, ranks, n);
    pthread_mutex_unlock(&groups_mu);
    if (g && a.out == MPI_COMM_NULL)
        g->rank = -1;
    return g;
}

int cft_dist_rank(const cft_dist_group *g) {
    return g ? g->rank : -1;
}
int cft_dist_size(const cft_dist_group *g) {
    return g ? g->size : 0;
}
int cft_dist_local_rank(void) {
    const char *v[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
                       "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (getenv(v[i]))
            return atoi(getenv(v[i]));
    return 0;
}

cft_status cft_dist_group_status(const cft_dist_group *g) {
    if (!g)
        return CFT_E_ARG;
    return atomic_load(&((cft_dist_group *)g)->failed) ? CFT_E_FOREIGN : CFT_OK;
}

cft_array *cft__dist_check(const char *call, const cft_dist_group *g) {
    if (!inited)
        return cft__fail(CFT_E_ARG, "%s: the distributed layer is not started (cft_dist_init)",
                         call);
    if (!g)
        return cft__fail(CFT_E_ARG, "%s: the group is NULL", call);
    if (g->rank < 0)
        return cft__fail(CFT_E_ARG, "%s: this rank is not a member of group %d", call, g->id);
    if (atomic_load(&((cft_dist_group *)g)->failed))
        return cft__fail(CFT_E_FOREIGN, "%s: group %d failed before: %s", call, g->id, g->err);
    return NULL;
}
