/* nccl.c: the CUDA backend's communicators (cft_backend.comm_*) on NCCL,
 * for collectives of device arrays (src/dist/device_coll.c). NCCL is
 * opened at run time from the toolkit the backend was built with
 * (CFT_NCCL_PATH), after the trust check. Communicators are made
 * non-blocking (ncclCommInitRankConfig with config.blocking = 0), so cft
 * polls them under its deadline: comm_poll is ncclCommGetAsyncError (in
 * progress, failed, or formed) and, once formed, whether the device's
 * stream has drained (cuStreamQuery); comm_abort is ncclCommAbort. The
 * collectives are queued on the device's stream. Written against NCCL 2
 * of CUDA 13; not yet run (no GPU here): test_cuda_plugin opens NCCL with
 * every function used, and the protocol itself runs in
 * tests/dist/test_device_dist on the test backend's communicators. */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_plugin.h"

static struct {
    void *lib;
    ncclResult_t (*unique_id)(ncclUniqueId *);
    ncclResult_t (*init)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*async_error)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*abort)(ncclComm_t);
    const char *(*error_string)(ncclResult_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t, cudaStream_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                               cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                   ncclComm_t, cudaStream_t);
} nc;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_err[1200];

static void load(void) {
    static const char *const sonames[] = {"libnccl.so.2", NULL};
#ifdef CFT_NCCL_PATH
    const char *built = CFT_NCCL_PATH; /* the build machine's, tried last */
#else
    const char *built = NULL;
#endif
    void **const slots[] = {
        (void **)&nc.unique_id, (void **)&nc.init,         (void **)&nc.async_error,
        (void **)&nc.abort,     (void **)&nc.error_string, (void **)&nc.all_reduce,
        (void **)&nc.broadcast, (void **)&nc.all_gather,   (void **)&nc.reduce_scatter};
    static const char *const names[] = {
        "ncclGetUniqueId", "ncclCommInitRankConfig", "ncclCommGetAsyncError",
        "ncclCommAbort",   "ncclGetErrorString",     "ncclAllReduce",
        "ncclBroadcast",   "ncclAllGather",          "ncclReduceScatter"};
    nc.lib = cft_cuda_find_lib(sonames, built, "NCCL", slots, names,
                               (int)(sizeof names / sizeof *names), load_err, sizeof load_err);
}

static bool loaded(void) {
    pthread_once(&once, load);
    if (load_err[0])
        cft_cuda_fail("%s", load_err);
    return !load_err[0];
}

static int nccl_fail(const char *what, ncclResult_t r) {
    cft_cuda_fail("%s: %s", what, nc.error_string ? nc.error_string(r) : "NCCL error");
    return -1;
}

int cft_cuda_comm_id(void *ctx, void *id, size_t *size) {
    (void)ctx;
    ncclUniqueId u;
    if (!loaded() || *size < sizeof u)
        return -1;
    ncclResult_t r = nc.unique_id(&u);
    if (r != ncclSuccess)
        return nccl_fail("ncclGetUniqueId", r);
    memcpy(id, &u, sizeof u);
    *size = sizeof u;
    return 0;
}

int cft_cuda_comm_init(void *ctx, int dev, const void *id, size_t size, int nranks, int rank,
                       void **comm) {
    (void)ctx;
    ncclUniqueId u;
    if (!loaded() || size != sizeof u || cft_cuda_on(dev, "ncclCommInitRankConfig"))
        return -1;
    memcpy(&u, id, sizeof u);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; /* cft polls it under its deadline */
    ncclComm_t c = NULL;
    ncclResult_t r = nc.init(&c, nranks, u, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_fail("ncclCommInitRankConfig", r);
    *comm = c;
    return 0;
}

int cft_cuda_comm_poll(void *ctx, int dev, void *comm) {
    (void)ctx;
    ncclResult_t state = ncclSuccess, r = nc.async_error((ncclComm_t)comm, &state);
    if (r != ncclSuccess)
        return nccl_fail("ncclCommGetAsyncError", r);
    if (state == ncclInProgress)
        return 0;
    if (state != ncclSuccess)
        return nccl_fail("the NCCL communicator", state);
    if (cft_cuda_on(dev, "cuStreamQuery"))
        return -1;
    CUresult q = cft_cu.stream_query(cft_cuda_stream(dev));
    if (q == CUDA_ERROR_NOT_READY)
        return 0;
    if (q != CUDA_SUCCESS) {
        cft_cuda_fail("cuda:%d: the stream of a collective: %s", dev, cft_cuda_error_name(q));
        return -1;
    }
    return 1;
}

void cft_cuda_comm_abort(void *ctx, int dev, void *comm) {
    (void)ctx, (void)dev;
    if (comm)
        nc.abort((ncclComm_t)comm);
}

int cft_cuda_collective(void *ctx, int dev, void *comm, int kind, const void *send, void *recv,
                        size_t count, cft_dtype dt, int op, int root) {
    (void)ctx;
    bool red = kind == CFT_COLL_ALL_REDUCE || kind == CFT_COLL_REDUCE_SCATTER;
    ncclDataType_t t;
    switch ((int)dt) {
    case CFT_F32:
        t = ncclFloat32;
        break;
    case CFT_F64:
        t = ncclFloat64;
        break;
    case CFT_F16:
        t = ncclFloat16;
        break;
    case CFT_BF16:
        t = ncclBfloat16;
        break;
    case CFT_I32:
        t = ncclInt32;
        break;
    case CFT_I64:
        t = ncclInt64;
        break;
    default:
        if (red || dt != CFT_BOOL) {
            cft_cuda_fail("cuda:%d: no NCCL collective of this dtype (%d)", dev, (int)dt);
            return -1;
        }
        t = ncclUint8;
    }
    static const ncclRedOp_t ops[] = {[CFT_COLL_SUM] = ncclSum,
                                      [CFT_COLL_PROD] = ncclProd,
                                      [CFT_COLL_MAX] = ncclMax,
                                      [CFT_COLL_MIN] = ncclMin};
    if (op < 0 || op > CFT_COLL_MIN || cft_cuda_on(dev, "an NCCL collective"))
        return -1;
    cudaStream_t s = (cudaStream_t)cft_cuda_stream(dev);
    ncclComm_t c = comm;
    ncclResult_t r =
        kind == CFT_COLL_ALL_REDUCE   ? nc.all_reduce(send, recv, count, t, ops[op], c, s)
        : kind == CFT_COLL_BROADCAST  ? nc.broadcast(send, recv, count, t, root, c, s)
        : kind == CFT_COLL_ALL_GATHER ? nc.all_gather(send, recv, count, t, c, s)
                                      : nc.reduce_scatter(send, recv, count, t, ops[op], c, s);
    if (r != ncclSuccess && r != ncclInProgress) /* (in progress: comm_poll follows it) */
        return nccl_fail("an NCCL collective", r);
    return 0;
}

/* for test_cuda_plugin: 0 when NCCL is loaded with every function used */
__attribute__((visibility("default"))) int cft_cuda_nccl_check(char *err, size_t en) {
    pthread_once(&once, load);
    if (load_err[0])
        snprintf(err, en, "%s", load_err);
    return load_err[0] ? -1 : 0;
}
