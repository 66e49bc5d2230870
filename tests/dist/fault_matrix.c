/* fault_matrix.c: one case of the distributed layer's fault matrix, run by
 * scripts/fault-matrix.sh under mpirun with 2 ranks and CFT_FAULT set, so
 * that rank 1 kills (SIGKILL) or stops (SIGSTOP) itself at a chosen point
 * of a workload: DDP steps, ZeRO steps, RPC (sync, async, RRef), pipeline
 * steps or checkpoint saves. Rank 0 survives: it prints one line per
 * event ("FM" lines: the failed call and its error, how long each of its
 * ending calls took, and when it ended, CLOCK_REALTIME) and then kills
 * the peer if it is still there (a stopped rank would hold mpirun). With
 * "verify DIR": the checkpoint in DIR loads whole (a killed save left the
 * previous one in place).
 *
 *   fault_matrix ddp|zero|rpc_sync|rpc_async|rref|pipeline|checkpoint abort|noabort [DIR] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "cft/cft.h"
#include "cft/checkpoint.h"
#include "cft/dist.h"
#include "cft/pipeline.h"
#include "cft/rpc.h"

enum { B = 16, D = 8, H = 16, C = 4, STEPS = 12 };

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static cft_status mlp_loss(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                           cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h =
        cft_tanh(cft_add(cft_matmul(in[0], cft_tree_get(p, "w1")), cft_tree_get(p, "b1")));
    cft_array *z = cft_add(cft_matmul(h, cft_tree_get(p, "w2")), cft_tree_get(p, "b2"));
    out[0] = cft_mean(cft_cross_entropy(z, in[1]), NULL, 0, false);
    return CFT_OK;
}

static cft_tree *params(void) {
    cft_tree *t = cft_tree_new();
    t = cft_tree_set(t, "w1", cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){D, H}, 2));
    t = cft_tree_set(t, "b1", cft_zeros(CFT_F32, (int64_t[]){H}, 1));
    t = cft_tree_set(t, "w2", cft_random_normal(cft_random_key(2), CFT_F32, (int64_t[]){H, C}, 2));
    return cft_tree_set(t, "b2", cft_zeros(CFT_F32, (int64_t[]){C}, 1));
}

static cft_status twice(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul_s(in[0], 2);
    return CFT_OK;
}

/* pipeline stages: a tanh layer, then a linear layer and the loss */
static cft_status stage0(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                         cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_tanh(cft_add(cft_matmul(in[0], cft_tree_get(p, "w1")), cft_tree_get(p, "b1")));
    return CFT_OK;
}
static cft_status stage1(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                         cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *z = cft_add(cft_matmul(in[0], cft_tree_get(p, "w2")), cft_tree_get(p, "b2"));
    out[0] = cft_mean(cft_cross_entropy(z, in[1]), NULL, 0, false);
    return CFT_OK;
}

static const char *mode;
static int rank;
static pid_t peer;

/* rank 0 after its failed call: the ending calls, timed, then the end */
static int survive(int step, const char *what, double t0, const char *msg) {
    double t1 = wall();
    printf("FM %s rank 0: step %d: %s failed after %.2f s: %s\n", mode, step, what, t1 - t0, msg);
    fflush(stdout);
    if (!strncmp(mode, "rpc", 3) || !strcmp(mode, "rref")) {
        double a = wall();
        cft_status st = cft_rpc_shutdown();
        printf("FM %s rank 0: cft_rpc_shutdown returned after %.2f s: %s\n", mode, wall() - a,
               st == CFT_OK ? "ok" : cft_last_error_message());
    }
    double a = wall();
    cft_status st = cft_dist_finalize();
    printf("FM %s rank 0: cft_dist_finalize returned after %.2f s: %s\n", mode, wall() - a,
           st == CFT_OK ? "ok" : cft_last_error_message());
    printf("FM %s rank 0: ended at %.3f\n", mode, wall());
    fflush(stdout);
    if (peer > 0)
        kill(peer, SIGKILL); /* a stopped peer would hold mpirun */
    _exit(0);
}

static int verify(const char *dir) {
    cft_init();
    cft_tree *t = cft_checkpoint_load(dir, NULL, 0);
    bool ok = !cft_tree_failed(t) && cft_tree_size(t) == 4;
    for (int i = 0; ok && i < 4; i++)
        ok = cft_allclose(cft_tree_at(t, i), cft_tree_get(params(), cft_tree_name(t, i)), 0, 0,
                          false);
    printf("FM verify %s: %s\n", dir, ok ? "the previous checkpoint loads whole" : "BROKEN");
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "verify"))
        return verify(argv[2]);
    if (argc < 3) {
        fprintf(stderr, "usage: fault_matrix <workload> abort|noabort [dir]\n");
        return 2;
    }
    mode = argv[1];
    const char *dir = argc > 3 ? argv[3] : "fault_ckpt";
    if (cft_dist_init(&argc, &argv) != CFT_OK)
        return 2;
    cft_dist_set_abort_on_timeout(!strcmp(argv[2], "abort"));
    cft_dist_group *w = cft_dist_world();
    rank = cft_dist_rank(w);
    cft_array *pids = cft_dist_all_gather(w, cft_scalar((double)getpid(), CFT_I64), true);
    peer = (pid_t)cft_item(cft_index(pids, 1 - rank));
    cft_tree *p = params();
    cft_array *x = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){B, D}, 2);
    cft_array *y = cft_astype(
        cft_mul_s(cft_random_uniform(cft_random_key(4), CFT_F32, (int64_t[]){B}, 1, 0, 1), 3.99),
        CFT_I32);
    bool rpc = !strncmp(mode, "rpc", 3) || !strcmp(mode, "rref");
    if (rpc) {
        cft_rpc_register("twice", cft_fn_new(twice, NULL, 1, 1));
        if (cft_rpc_init(NULL) != CFT_OK)
            return 2;
    }
    cft_fn *loss = cft_tree_fn_new(mlp_loss, NULL, p, 2, 1);
    cft_optim adam = cft_adam(1e-3);
    cft_ddp *ddp = !strcmp(mode, "ddp") ? cft_ddp_new(w, loss, p, NULL) : NULL;
    cft_zero *zero = !strcmp(mode, "zero") ? cft_zero_new(w, &adam, p) : NULL;
    cft_pipeline *pipe = NULL;
    cft_tree *mine = p;
    if (!strcmp(mode, "pipeline")) {
        const char *n0[] = {"w1", "b1"}, *n1[] = {"w2", "b2"};
        const char **nm = rank ? n1 : n0;
        mine =
            cft_tree_from(nm, (cft_array *[]){cft_tree_get(p, nm[0]), cft_tree_get(p, nm[1])}, 2);
        pipe = cft_pipeline_new(w,
                                rank ? cft_tree_fn_new(stage1, NULL, mine, 2, 1)
                                     : cft_tree_fn_new(stage0, NULL, mine, 1, 1),
                                mine, &(cft_pipeline_options){4, CFT_PIPE_1F1B, false});
    }
    /* a checkpoint: w1 in two halves of rows, one per rank; the rest on rank 0 */
    cft_shard sh = {"w1", 4 * rank, D};
    cft_tree *ck = cft_tree_set(rank ? cft_tree_new() : p, "w1",
                                cft_slice(cft_tree_get(p, "w1"), (int64_t[]){4 * rank, 0},
                                          (int64_t[]){4 * rank + 4, H}, NULL));
    if (rank == 1 && rpc) { /* serves until the fault (or 30 s) */
        sleep(30);
        return 1;
    }
    for (int step = 1; step <= STEPS; step++) {
        double t0 = wall();
        cft_tree *g = NULL;
        if (ddp) {
            if (cft_ddp_step(ddp, p, (cft_array *[]){x, y}, NULL, NULL, &g) != CFT_OK)
                return survive(step, "cft_ddp_step", t0, cft_last_error_message());
        } else if (zero) { /* the gradients: any tree of the parameters' shapes */
            if (cft_zero_step(zero, p, p, cft_scalar(step, CFT_F32), NULL, &p) != CFT_OK)
                return survive(step, "cft_zero_step", t0, cft_last_error_message());
        } else if (pipe) {
            cft_status st =
                cft_pipeline_step(pipe, mine, rank ? NULL : x, rank ? y : NULL, NULL, &g);
            if (st != CFT_OK && rank == 0)
                return survive(step, "cft_pipeline_step", t0, cft_last_error_message());
        } else if (!strcmp(mode, "checkpoint")) {
            if (cft_checkpoint_save(w, dir, ck, &sh, 1) != CFT_OK && rank == 0)
                return survive(step, "cft_checkpoint_save", t0, cft_last_error_message());
        } else if (!strcmp(mode, "rpc_sync")) {
            cft_array *o[1];
            if (cft_rpc_sync(1, "twice", 1, &x, 1, o) != CFT_OK)
                return survive(step, "cft_rpc_sync", t0, cft_last_error_message());
        } else if (!strcmp(mode, "rpc_async")) {
            cft_array *o[1];
            cft_future *f = cft_rpc_async(1, "twice", 1, &x);
            if (cft_future_wait(f, 1, o) != CFT_OK)
                return survive(step, "cft_future_wait (cft_rpc_async)", t0,
                               cft_last_error_message());
        } else if (!strcmp(mode, "rref")) {
            cft_rref *r = cft_rpc_remote(1, "twice", 1, &x);
            cft_array *v = cft_rref_to_here(r);
            if (cft_failed(v))
                return survive(step, "cft_rref_to_here (cft_rpc_remote)", t0, cft_error_message(v));
            cft_rref_release(r);
        } else {
            fprintf(stderr, "fault_matrix: no workload '%s'\n", mode);
            return 2;
        }
        (void)g;
    }
    printf("FM %s rank %d: no fault seen in %d steps\n", mode, rank, STEPS);
    fflush(stdout);
    if (rpc)
        cft_rpc_shutdown();
    cft_dist_finalize();
    return rank == 0 ? 3 : 0;
}
