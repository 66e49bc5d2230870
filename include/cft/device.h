/** @file
 * cft/device.h: devices, and the backend table a device plugs in by.
 *
 * Arrays live on the host ("cpu") unless put on a device:
 *
 *     cft_dev *d = cft_device("cuda:0");          // or "test:1", "cpu"
 *     if (cft_device_error(d)) ...                // no driver, no device, ...
 *     cft_array *w = cft_device_put(w_host, d);   // a copy on d
 *     cft_array *y = cft_matmul(x_on_d, w);       // runs on d, y lives on d
 *     cft_array *back = cft_device_put(y, cft_device("cpu"));
 *
 * As in JAX, an array put on a device is committed to it; results of ops
 * on committed arrays are committed to the same device. Arrays made
 * without a device (cft_zeros, cft_scalar, constants inside a traced
 * function) are uncommitted and move to the device of the committed
 * inputs they meet (each such move is a transfer through the backend).
 * Two committed inputs on different devices are an error naming both.
 * Reading values (cft_copy_to, cft_item, printing) copies to the host.
 * Transforms (grad, vmap, jvp, ...) and cft_jit work on any device: they
 * are made of primitive operations, and every primitive on a device runs
 * through its backend's table.
 *
 * A backend is a table of functions registered by name at run time
 * (cft_register_backend), from the program or a shared library of its
 * own; devices are then "<name>:<index>". The core reaches device memory
 * only through the table. A backend that lacks an operation can run it on
 * the host (cft_dev_op_run_on_host), which moves the operands through the
 * same table. "cuda" is loaded on first use from the installed
 * libcft_cuda.so (never from a directory another user can write). */
#ifndef CFT_DEVICE_H
#define CFT_DEVICE_H

/** @addtogroup devices
 *  @{ */

#include <stddef.h>
#include <stdint.h>

#include "array.h"
#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A device: the host ("cpu") or one of a backend's devices. Never freed. */
typedef struct cft_dev cft_dev;

/** One primitive operation for a backend to run (opaque; see the
 * cft_dev_op_* accessors). Its outputs are already allocated on the
 * device. */
typedef struct cft_dev_op cft_dev_op;

/** What a backend sees of an operand: contiguous row-major device memory. */
typedef struct {
    cft_aval aval; /**< dtype and shape */
    void *ptr;     /**< device memory (the backend's own pointer) */
    size_t bytes;  /**< numel * dtype size */
} cft_dev_buf;

/** A fused kernel of the jit for a backend to run (cft_backend.run_kernel):
 * CUDA C, as src/lower/emit_cuda.c writes it. Kernel `entry`
 * ("cft_g<k>") of `source` takes one argument, a struct of the operands'
 * device pointers, the collapsed loop's dims and each operand's strides
 * (in elements); `args` holds it. Its threads share out `nslot` slots in
 * a grid-stride loop, so any grid computes the same result. */
typedef struct {
    const char *source; /**< CUDA C of the kernel (and its helpers) */
    const char *entry;  /**< the kernel's name in source */
    const void *args;   /**< the kernel's one argument (a struct) */
    size_t args_size;   /**< its size in bytes */
    int64_t nslot;      /**< slots the threads share out */
    int nptrs;          /**< the operands' device pointers, also in args */
    void *const *ptrs;  /**< those pointers (nptrs of them) */
} cft_dev_kernel;

/** The version of cft_backend below; tables of abi 1 (without run_kernel),
 * 2 (without the graph functions), 3 (without the communicators) and 4
 * (without the markers) are accepted too, any other is refused. */
#define CFT_BACKEND_ABI 5

/** cft_backend.collective: what to do */
enum { CFT_COLL_ALL_REDUCE, CFT_COLL_BROADCAST, CFT_COLL_ALL_GATHER, CFT_COLL_REDUCE_SCATTER };
/** ... and how to reduce */
enum { CFT_COLL_SUM, CFT_COLL_PROD, CFT_COLL_MAX, CFT_COLL_MIN };
/** the most bytes of a communicator's id */
#define CFT_COMM_ID_BYTES 256

/** A backend's table. Every function gets the backend's ctx and the device
 * index. Integer results: 0 on success; on failure last_error(ctx) says
 * why (it may return NULL). */
typedef struct cft_backend {
    int abi;          /**< CFT_BACKEND_ABI */
    const char *name; /**< devices are "<name>:<index>"; letters, digits, '_' */
    void *ctx;        /**< passed to every function of the table */
    /** how many devices there are (>= 0), or < 0 when the backend cannot
     * run here (no driver): last_error says why */
    int (*device_count)(void *ctx);
    /** bytes of device memory (NULL: out of memory) and its release */
    void *(*alloc)(void *ctx, int dev, size_t bytes);
    void (*release)(void *ctx, int dev, void *ptr); /**< frees what alloc gave */
    /** copies: host to device, device to host, device to device */
    int (*to_device)(void *ctx, int dev, void *dst, const void *src, size_t bytes);
    /** device to host */
    int (*to_host)(void *ctx, int dev, void *dst, const void *src, size_t bytes);
    /** device to device */
    int (*copy)(void *ctx, int dev, void *dst, const void *src, size_t bytes);
    /** run one primitive: read the inputs, write the outputs */
    int (*run)(void *ctx, int dev, const cft_dev_op *op);
    /** wait for everything queued on the device */
    int (*synchronize)(void *ctx, int dev);
    /** the message of the last failure (thread-local or static storage) */
    const char *(*last_error)(void *ctx);
    /** abi 2, optional (NULL: cft_jit runs its plans on this backend one
     * primitive at a time): run one of the jit's fused kernels */
    int (*run_kernel)(void *ctx, int dev, const cft_dev_kernel *k);
    /** abi 2: CFT_BACKEND_* flags */
    unsigned flags;
    /** abi 3, optional (NULL: no graphs), all four or none. Between
     * begin_capture and end_capture, what the calling thread asks of
     * device dev (kernels, operations, copies between device buffers) is
     * recorded, not run; allocations still happen at once. end_capture
     * gives the recording (a CUDA graph), or fails when something could
     * not be recorded (a copy to or from the host, an operation run on the
     * host); either way capture ends. launch_graph replays a recording on
     * the same device memory; release_graph frees it. The jit captures a
     * plan's steps on a device once and replays them (cft_jit). */
    int (*begin_capture)(void *ctx, int dev);
    /** abi 3: ends a capture, writing the recording to *graph */
    int (*end_capture)(void *ctx, int dev, void **graph);
    /** abi 3: replays a recording */
    int (*launch_graph)(void *ctx, int dev, void *graph);
    /** abi 3: frees a recording */
    void (*release_graph)(void *ctx, int dev, void *graph);
    /** abi 4, optional (NULL: collectives of this backend's arrays go
     * through host copies and MPI), all five or none: communicators among
     * processes for collectives on device memory (NCCL's, on cuda).
     * comm_id writes a fresh id (*size bytes, at most CFT_COMM_ID_BYTES),
     * made by one process and handed to the others by cft (over MPI).
     * comm_init starts joining the communicator of nranks processes as
     * `rank` without waiting for the others. comm_poll: 1 when it has
     * formed and everything queued on it has finished, 0 not yet, -1 it
     * failed (last_error says why). comm_abort ends it at once and frees
     * it (a peer missed the deadline). collective queues one collective
     * (CFT_COLL_*) of `count` elements per rank on the device's stream:
     * reductions by op (CFT_COLL_SUM...), broadcast from root; all_gather
     * and reduce_scatter as MPI's (count: each rank's part). */
    int (*comm_id)(void *ctx, void *id, size_t *size);
    /** abi 4: starts joining a communicator (see comm_id) */
    int (*comm_init)(void *ctx, int dev, const void *id, size_t size, int nranks, int rank,
                     void **comm);
    /** abi 4: 1 formed and idle, 0 not yet, -1 failed (see comm_id) */
    int (*comm_poll)(void *ctx, int dev, void *comm);
    /** abi 4: ends and frees a communicator at once (see comm_id) */
    void (*comm_abort)(void *ctx, int dev, void *comm);
    /** abi 4: queues one collective (see comm_id) */
    int (*collective)(void *ctx, int dev, void *comm, int kind, const void *send, void *recv,
                      size_t count, cft_dtype dt, int op, int root);
    /** abi 5, optional (NULL: the profiler waits for the device after each
     * step to give it its device time), all three or none: markers of
     * device time (CUDA events). mark queues a marker on the device's
     * queue of work and returns it (NULL: none could be made); elapsed
     * waits for both markers and writes the milliseconds between them;
     * drop_mark frees one. While the profiler records, each kernel,
     * primitive and graph replay is bracketed by two markers, and the
     * device is not waited for. */
    void *(*mark)(void *ctx, int dev);
    /** abi 5: the device time between two markers, in ms (see mark) */
    int (*elapsed)(void *ctx, int dev, void *from, void *to, double *ms);
    /** abi 5: frees a marker (see mark) */
    void (*drop_mark)(void *ctx, int dev, void *m);
} cft_backend;

/** cft_backend.flags: eager elementwise operations and reductions run as
 * kernels too (each compiled once, as a one-operation jitted function),
 * not through run */
#define CFT_BACKEND_EAGER_KERNELS 1u

/** Registers a backend (the table is copied; its ctx must outlive the
 *  program). CFT_E_ARG for a bad table, a wrong abi or a name taken. */
cft_status cft_register_backend(const cft_backend *b);

/** The device named `name`: "cpu", "<backend>" (index 0) or
 *  "<backend>:<index>". Never NULL: an unknown backend, an index out of
 *  range or a backend that cannot run here ("no CUDA driver") gives a
 *  device whose cft_device_error says so, and which every call refuses. */
cft_dev *cft_device(const char *name);

/** NULL when d is usable, else the error array explaining why not. */
cft_array *cft_device_error(const cft_dev *d);

/** "cpu", "cuda:0", ... (the name given, for a failed device). */
const char *cft_device_name(const cft_dev *d);

/** A copy of x on d, committed to d (x itself when it is already there
 *  and committed). Putting on "cpu" brings an array back to the host. */
cft_array *cft_device_put(cft_array *x, const cft_dev *d);

/** The device x lives on ("cpu" for host arrays, tracers and errors). */
const cft_dev *cft_device_of(const cft_array *x);

/** Waits until everything queued on d has finished. */
cft_status cft_device_synchronize(const cft_dev *d);

/** Device memory goes through a caching allocator (as in PyTorch): memory
 * of a released array (collected by the GC, or an intermediate of a
 * jitted function at the end of its call) is kept and handed to the next
 * allocation of the same size class, so a loop of calls stops asking the
 * backend after its first iterations. CFT_DEVICE_CACHE=0 turns it off. */
typedef struct {
    size_t in_use;      /**< bytes held by live arrays (as rounded by the cache) */
    size_t peak_in_use; /**< the most in_use has been */
    size_t cached;      /**< bytes released by arrays and kept for reuse */
    uint64_t allocs;    /**< allocations asked of the backend */
    uint64_t releases;  /**< blocks handed back to the backend */
    uint64_t reuses;    /**< allocations served from the cache */
} cft_device_memory_stats;

/** What cft has asked of a device's backend since the program started,
 *  counted for every backend (the CUDA plugin, the test backend, one of
 *  your own): the difference around some calls is what they cost in
 *  launches, copies and waits. While the profiler records
 *  (cft/profile.h), each of these is also an event on the device's own
 *  track: kernels, primitives and graph replays last their device time,
 *  read from the backend's markers (cft_backend.mark: CUDA events) when
 *  the recording stops, or, on a backend without them, by waiting for
 *  the device after each. */
typedef struct cft_device_counters {
    uint64_t kernels;     /**< fused kernels launched (run_kernel) */
    uint64_t ops;         /**< primitives run one at a time (run) */
    uint64_t graphs;      /**< recorded plans replayed (launch_graph) */
    uint64_t h2d;         /**< copies host to device */
    uint64_t h2d_bytes;   /**< their bytes */
    uint64_t d2h;         /**< copies device to host */
    uint64_t d2h_bytes;   /**< their bytes */
    uint64_t d2d;         /**< copies on the device */
    uint64_t d2d_bytes;   /**< their bytes */
    uint64_t syncs;       /**< waits for the device (synchronize) */
    uint64_t allocs;      /**< allocations asked of the backend (cache misses) */
    uint64_t alloc_bytes; /**< their bytes */
    uint64_t releases;    /**< blocks handed back to the backend */
    uint64_t collectives; /**< collectives queued on the device's communicators */
} cft_device_counters;

/** d's counters; all zero for "cpu"; CFT_E_ARG for NULL, a failed device
 *  gives its error. */
cft_status cft_device_counters_of(const cft_dev *d, cft_device_counters *out);

/** d's memory counts (torch.cuda.memory_stats); all zero for "cpu". */
cft_status cft_device_memory(const cft_dev *d, cft_device_memory_stats *out);

/** Hands d's cached memory back to the backend (torch.cuda.empty_cache),
 *  after releasing the memory of arrays already collected. Memory of live
 *  arrays stays, and so does the rest of a 2 MiB segment that small
 *  blocks (up to 1 MiB) of live arrays are carved from. */
cft_status cft_device_empty_cache(const cft_dev *d);

/** How f32 matrix products may run on a device (torch's
 *  set_float32_matmul_precision, JAX's default_matmul_precision). */
typedef enum {
    CFT_MATMUL_HIGHEST = 0, /**< in f32 (the default; torch "highest", JAX "float32") */
    CFT_MATMUL_HIGH = 1,    /**< operands rounded to TF32 on tensor cores, sums in f32
                                 (torch "high", allow_tf32; JAX "tensorfloat32") */
    CFT_MATMUL_MEDIUM = 2,  /**< operands rounded to bf16, sums in f32 (torch "medium",
                                 JAX "bfloat16") */
} cft_matmul_precision;

/** Sets, for the whole process, how f32 dot_general may run on a device
 *  whose backend offers faster, less precise products: the CUDA backend
 *  runs them on cuBLAS with TF32 (HIGH) or bf16 (MEDIUM) tensor-core
 *  math. Read when an operation is issued: a jitted plan's recorded
 *  device graph is replayed only under the precision it was recorded
 *  with (else the plan runs its steps). On the host, f32 products are
 *  always computed in f32. CFT_E_ARG for a value not in the enum. Safe
 *  from any thread. */
cft_status cft_set_float32_matmul_precision(cft_matmul_precision p);
/** The current setting (CFT_MATMUL_HIGHEST unless set). */
cft_matmul_precision cft_float32_matmul_precision(void);

/** The operation's primitive name ("add", "dot_general", ...). */
const char *cft_dev_op_name(const cft_dev_op *op);
/** Its number of inputs. */
int cft_dev_op_nin(const cft_dev_op *op);
/** Its number of outputs. */
int cft_dev_op_nout(const cft_dev_op *op);
/** The operation's integer parameter `name`, as the IR prints it
 *  ("lc", "rc", "lb", "rb" for dot_general, "axes" for the reductions,
 *  "fft_type", "fft_lengths", "scale" for fft; a scalar's leading '#' may
 *  be left out; the matrix products' (dot_general, conv_general_dilated,
 *  dot_sparse24) "precision" is the cft_matmul_precision in force when
 *  they were issued): up to cap values written to vals; returns how many it has, or -1
 *  when the primitive has no parameter of that name. For backends that
 *  run an operation themselves (a GEMM library for dot_general). */
int cft_dev_op_param(const cft_dev_op *op, const char *name, int64_t *vals, int cap);
/** Input i (device memory). */
cft_dev_buf cft_dev_op_in(const cft_dev_op *op, int i);
/** Output j (device memory, to be written). */
cft_dev_buf cft_dev_op_out(const cft_dev_op *op, int j);
/** Runs the operation on the host: its inputs are copied out with the
 *  backend's to_host, the host implementation runs, and its outputs are
 *  copied in with to_device. For backends that lack an operation. */
cft_status cft_dev_op_run_on_host(const cft_dev_op *op);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
