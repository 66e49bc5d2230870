// np: 2
/* test_device_dist.c (mpirun, 2 ranks): collectives and DDP with arrays on
 * a device (the "test" backend, tests/support/test_backend.c, one per
 * rank, with communicators of its own: non-blocking MPI collectives on its
 * device memory, what NCCL is to cuda). all_reduce (sum, mean, async),
 * broadcast, all_gather and reduce_scatter of device arrays run on the
 * device's communicator (nothing through the host) and give the right
 * values on the device, and so do psum and all_gather inside a jitted
 * function; all_to_all (no device form) goes through a host
 * copy and comes back to the device; a host array's result stays on the
 * host; DDP with parameters and batches on the device gives gradients on
 * the device equal to one process's over the whole batch, on the
 * communicators and on a device without them (three steps each) (f32: rtol 1e-5,
 * atol 1e-6); a communicator that never forms is aborted after the
 * deadline with an error naming the call, the device and the wait, and
 * the group fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/cft.h"
#include "cft/dist.h"
#include "check.h"
#include "support/test_backend.h"

enum { B = 8, D = 4, C = 3 };

static cft_status loss_fn(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                          cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *z = cft_add(cft_matmul(in[0], cft_tree_get(p, "w")), cft_tree_get(p, "b"));
    out[0] = cft_mean(cft_square(cft_sub(z, in[1])), NULL, 0, false);
    return CFT_OK;
}

/* (psum(2 x), all_gather(x)) over the group in env */
static cft_status psum_twice(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)nin, (void)nout;
    out[0] = cft_psum(cft_mul_s(in[0], 2.0), env);
    out[1] = cft_all_gather(in[0], env);
    return CFT_OK;
}

/* the DDP step's bucket primitives (src/dist/dist.h) */
cft_array *cft__ddp_start(cft_dist_group *g, cft_array *const *grads, int k, bool now);
cft_status cft__ddp_wait(cft_array *h, cft_array *const *grads, int k, cft_array **out);

static bool on(const cft_array *x, const cft_dev *d) {
    return cft_device_of(x) == d;
}

int main(int argc, char **argv) {
    check_init(1, argv);
    CHECK_EQ(cft_dist_init(&argc, &argv), CFT_OK);
    CHECK_EQ(test_backend_register(), 0);
    const cft_dev *d = cft_device("test:0");
    cft_dist_group *w = cft_dist_world();
    int rank = cft_dist_rank(w), size = cft_dist_size(w);
    cft_array *mine = cft_full(rank + 1, CFT_F32, (int64_t[]){size * 2, 3}, 2);
    cft_array *md = cft_device_put(mine, d);
    TEST("rank %d: collectives of device arrays come back on the device", rank) {
        test_backend_counts c0 = test_backend_counts_now();
        cft_array *s = cft_dist_all_reduce(w, md, CFT_DIST_SUM);
        cft_array *bc = cft_dist_broadcast(w, md, 1);
        cft_array *ag = cft_dist_all_gather(w, md, true);
        cft_array *rs = cft_dist_reduce_scatter(w, md, CFT_DIST_SUM);
        test_backend_counts c1 = test_backend_counts_now();
        /* four on the device's communicator, nothing through the host */
        CHECK_MSG(c1.collectives - c0.collectives == 4, "%ld on the device",
                  c1.collectives - c0.collectives);
        CHECK_MSG(c1.to_host == c0.to_host && c1.to_device == c0.to_device,
                  "%ld copies out, %ld in", c1.to_host - c0.to_host, c1.to_device - c0.to_device);
        CHECK(on(s, d) && on(bc, d) && on(ag, d) && on(rs, d));
        CHECK_ARRAY_CLOSE(s, cft_full(size * (size + 1) / 2, CFT_F32, (int64_t[]){size * 2, 3}, 2),
                          0, 0);
        CHECK_ARRAY_CLOSE(bc, cft_full(2, CFT_F32, (int64_t[]){size * 2, 3}, 2), 0, 0);
        CHECK_EQ(cft_array_dim(ag, 0), size);
        for (int r = 0; r < size; r++)
            CHECK_CLOSE(cft_item_at(ag, r * size * 6 + 5), r + 1, 0, 0);
        CHECK_EQ(cft_array_dim(rs, 0), 2);
        CHECK_ARRAY_CLOSE(rs, cft_full(size * (size + 1) / 2, CFT_F32, (int64_t[]){2, 3}, 2), 0, 0);
        /* the mean (a sum, scaled on the device) and its asynchronous form */
        cft_array *m = cft_dist_wait(cft_dist_all_reduce_async(w, md, CFT_DIST_MEAN));
        CHECK(on(m, d));
        CHECK_CLOSE(cft_item_at(m, 0), (size + 1) / 2.0, 1e-6, 0);
        cft_array *aa = cft_dist_all_to_all(w, md); /* (no device all_to_all: the host's) */
        CHECK(on(aa, d));
        CHECK_CLOSE(cft_item_at(aa, cft_array_size(aa) - 1), size, 0, 0);
        /* a host array stays on the host */
        CHECK(on(cft_dist_all_reduce(w, mine, CFT_DIST_SUM), cft_device("cpu")));
    }
    TEST("rank %d: psum and all_gather in a jitted function on the device", rank) {
        cft_fn *f = cft_jit(cft_fn_new(psum_twice, w, 1, 2));
        for (int call = 0; call < 4; call++) {
            cft_array *out[2];
            test_backend_counts c0 = test_backend_counts_now();
            CHECK_EQ(cft_fn_call(f, (cft_array *[]){md}, out), CFT_OK);
            test_backend_counts c1 = test_backend_counts_now();
            CHECK_MSG(c1.collectives - c0.collectives == 2, "call %d: %ld on the device", call,
                      c1.collectives - c0.collectives);
            CHECK(on(out[0], d) && on(out[1], d));
            CHECK_ARRAY_CLOSE(
                out[0], cft_full(size * (size + 1), CFT_F32, (int64_t[]){size * 2, 3}, 2), 0, 0);
            CHECK_EQ(cft_array_dim(out[1], 0), size);
        }
    }
    TEST("rank %d: a DDP bucket of three gradients on the device is one collective", rank) {
        /* gradients (rank + 1) * [1, 2, ...]: their mean over the ranks is
         * (size + 1) / 2 times that; views of one reduced bucket, on the
         * device */
        cft_array *g = cft_mul_s(cft_arange(1, 22, 1, CFT_F32), rank + 1), *gd[3], *want[3];
        const int64_t shapes[3][2] = {{4, 3}, {2, 3}, {3, 1}};
        for (int i = 0, at = 0; i < 3; at += (int)(shapes[i][0] * shapes[i][1]), i++) {
            want[i] = cft_reshape(
                cft_slice(g, (int64_t[]){at}, (int64_t[]){at + shapes[i][0] * shapes[i][1]}, NULL),
                shapes[i], 2);
            gd[i] = cft_device_put(want[i], d);
        }
        test_backend_counts c0 = test_backend_counts_now();
        cft_array *h = cft__ddp_start(w, gd, 3, false), *out[3];
        cft_status st = cft__ddp_wait(h, gd, 3, out);
        test_backend_counts c1 = test_backend_counts_now();
        CHECK_MSG(st == CFT_OK, "%s", cft_last_error_message());
        CHECK_MSG(c1.collectives - c0.collectives == 1, "%ld collectives",
                  c1.collectives - c0.collectives);
        for (int i = 0; st == CFT_OK && i < 3; i++) {
            CHECK(on(out[i], d));
            CHECK_ARRAY_CLOSE(out[i], cft_mul_s(want[i], (size + 1) / 2.0 / (rank + 1)), 1e-6, 0);
        }
    }
    TEST("rank %d: DDP with parameters and batch on the device", rank) {
        cft_array *X = cft_random_normal(cft_random_key(3), CFT_F32, (int64_t[]){B, D}, 2),
                  *Y = cft_random_normal(cft_random_key(4), CFT_F32, (int64_t[]){B, C}, 2);
        cft_tree *p = cft_tree_new();
        p = cft_tree_set(p, "w",
                         cft_random_normal(cft_random_key(1), CFT_F32, (int64_t[]){D, C}, 2));
        p = cft_tree_set(p, "b", cft_full(0.1, CFT_F32, (int64_t[]){C}, 1));
        cft_fn *loss = cft_tree_fn_new(loss_fn, NULL, p, 2, 1);
        cft_array *ref[3];
        CHECK_EQ(cft_fn_call(cft_value_and_grad(loss, (int[]){0, 1}, 2, false),
                             (cft_array *[]){cft_tree_at(p, 0), cft_tree_at(p, 1), X, Y}, ref),
                 CFT_OK);
        int64_t lo = B / size * rank, hi = lo + B / size;
        cft_array *xl = cft_slice(X, (int64_t[]){lo, 0}, (int64_t[]){hi, D}, NULL),
                  *yl = cft_slice(Y, (int64_t[]){lo, 0}, (int64_t[]){hi, C}, NULL);
        /* on test:0 (communicators: each gradient's mean there) and on a
         * device without them (the bucket through the host) */
        setenv("TEST_BACKEND_COMMS", "0", 1);
        CHECK_EQ(test_backend_register_as("plain", 0), 0);
        unsetenv("TEST_BACKEND_COMMS");
        const cft_dev *devs[2] = {d, cft_device("plain:0")};
        for (int k = 0; k < 2; k++) {
            const cft_dev *dv = devs[k];
            cft_tree *pk = cft_tree_new();
            for (int i = 0; i < cft_tree_size(p); i++)
                pk = cft_tree_set(pk, cft_tree_name(p, i), cft_device_put(cft_tree_at(p, i), dv));
            cft_ddp *dd = cft_ddp_new(w, cft_tree_fn_new(loss_fn, NULL, pk, 2, 1), pk, NULL);
            for (int step = 0; step < 3; step++) { /* (the jitted step: later calls replay) */
                cft_tree *g = NULL;
                test_backend_counts c0 = test_backend_counts_now();
                cft_status st = cft_ddp_step(
                    dd, pk, (cft_array *[]){cft_device_put(xl, dv), cft_device_put(yl, dv)}, NULL,
                    NULL, &g);
                test_backend_counts c1 = test_backend_counts_now();
                CHECK_MSG(st == CFT_OK, "%s", cft_last_error_message());
                CHECK_MSG(c1.collectives - c0.collectives == (k == 0 ? 1 : 0), /* one bucket */
                          "%s: %ld on the device's communicator", cft_device_name(dv),
                          c1.collectives - c0.collectives);
                for (int i = 0; st == CFT_OK && i < 2; i++) {
                    cft_array *gi = cft_tree_get(g, cft_tree_name(p, i));
                    CHECK_MSG(on(gi, dv), "gradient %s on %s", cft_tree_name(p, i),
                              cft_device_name(cft_device_of(gi)));
                    CHECK_ARRAY_CLOSE(gi, ref[1 + i], 1e-5, 1e-6);
                }
            }
        }
    }
    TEST("rank %d: a device communicator that does not form: an error after the deadline", rank) {
        setenv("TEST_BACKEND_COMM_STALL", "1", 1);
        cft_dist_set_abort_on_timeout(false);
        cft_dist_set_timeout(1.0);
        const cft_dev *d1 = cft_device("test:1"); /* a new communicator */
        cft_array *r = cft_dist_all_reduce(w, cft_device_put(mine, d1), CFT_DIST_SUM);
        CHECK(cft_failed(r));
        const char *m = cft_error_message(r);
        CHECK_MSG(strstr(m, "cft_dist_all_reduce") && strstr(m, "test:1") &&
                      strstr(m, "did not form within 1 s"),
                  "%s", m);
        /* the group has failed: later collectives say so at once */
        CHECK(cft_failed(cft_dist_all_reduce(w, mine, CFT_DIST_SUM)));
    }
    CHECK_EQ(cft_dist_finalize(), CFT_OK);
    return check_summary();
}
