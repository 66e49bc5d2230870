/* test_device_memory.c: device memory and its caching allocator
 * (cft_device_memory, cft_device_empty_cache), on the "test" backend
 * (tests/support/test_backend.c), which counts every allocation and
 * release and can be given a memory limit.
 *
 * Checked: memory of collected arrays goes to the cache and is reused by
 * the next allocation of the same size class, and empty_cache hands it
 * back to the backend; a jitted function called in a loop on a device
 * releases its intermediates at the end of each call, so the backend
 * allocates only what the calls return (their values still the host's),
 * and moves nothing through the host;
 * small blocks are carved from 2 MiB segments, which go back whole;
 * an allocation over the device's limit is served after collecting
 * garbage and emptying the cache, and one that cannot fit at all is an
 * error naming the call and the device; four threads allocating and
 * releasing at once keep the counts consistent; outputs dropped in a loop
 * are collected on the device's bytes alone (3 GiB of 64 MiB outputs
 * peak under 1 GiB); "cpu" has no counts. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/mem.h" /* cft__gc_count, cft__collect */
#include "support/test_backend.h"

static cft_status doubled(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul_s(in[0], 2.0);
    return CFT_OK;
}

/* sum(tanh(x @ w + b)^2) over a few steps: intermediates of several sizes */
static cft_status net(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *h = cft_tanh(cft_add(cft_matmul(in[2], in[0]), in[1]));
    out[0] = cft_sum(cft_square(h), NULL, 0, false);
    return CFT_OK;
}

static cft_array *rnd(uint64_t seed, const int64_t *shape, int nd) {
    return cft_random_normal(cft_random_key(seed), CFT_F32, shape, nd);
}

static cft_device_memory_stats stats(const cft_dev *d) {
    cft_device_memory_stats s;
    CHECK_EQ(cft_device_memory(d, &s), CFT_OK);
    return s;
}

static void *churn(void *arg) {
    const cft_dev *d = arg;
    for (int i = 0; i < 200; i++) {
        cft_array *x = cft_device_put(cft_full(i, CFT_F32, (int64_t[]){256 + i % 7}, 1), d);
        if (cft_failed(x) || cft_item_at(x, 3) != i)
            return (void *)1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    check_init(argc, argv);
    setenv("TEST_BACKEND_GRAPHS", "0", 1); /* plans run step by step (graphs: test_device_graph) */
    CHECK_EQ(test_backend_register(), 0);
    const cft_dev *d0 = cft_device("test:0"), *d1 = cft_device("test:1");
    TEST("\"cpu\" has no device memory; bad arguments are errors") {
        cft_device_memory_stats s;
        CHECK_EQ(cft_device_memory(cft_device("cpu"), &s), CFT_OK);
        CHECK_EQ(s.in_use + s.cached + s.allocs, 0);
        CHECK(cft_device_memory(NULL, &s) != CFT_OK);
        CHECK(cft_device_memory(d0, NULL) != CFT_OK);
        CHECK(cft_device_memory(cft_device("test:9"), &s) != CFT_OK);
        CHECK(cft_device_empty_cache(NULL) != CFT_OK);
        CHECK_EQ(cft_device_empty_cache(cft_device("cpu")), CFT_OK);
    }
#ifndef CFT_GC_OFF
    TEST("collected arrays' memory is cached, reused, and handed back by empty_cache") {
        cft_device_synchronize(d0);
        long live0 = test_backend_live_bytes();
        test_backend_counts c0 = test_backend_counts_now();
        cft_device_memory_stats s0 = stats(d0);
        for (int i = 0; i < 200; i++)
            (void)cft_device_put(cft_zeros(CFT_F32, (int64_t[]){1024}, 1), d0);
        size_t gc0 = cft__gc_count();
        cft__collect();
        CHECK(cft__gc_count() > gc0);
        cft_device_memory_stats s1 = stats(d0); /* drains the release queue */
        CHECK_MSG(s1.cached - s0.cached >= 150 * 4096, "%zu bytes cached, %zu before", s1.cached,
                  s0.cached);
        CHECK_MSG(s1.in_use < s0.in_use + 50 * 4096, "%zu in use, %zu before", s1.in_use,
                  s0.in_use);
        test_backend_counts c1 = test_backend_counts_now();
        CHECK_EQ(c1.releases, c0.releases); /* cached, not released */
        /* the same size class again: served by the cache */
        for (int i = 0; i < 100; i++)
            (void)cft_device_put(cft_zeros(CFT_F32, (int64_t[]){1000 + i % 24}, 1), d0);
        test_backend_counts c2 = test_backend_counts_now();
        cft_device_memory_stats s2 = stats(d0);
        CHECK_MSG(c2.allocs == c1.allocs, "%ld backend allocations", c2.allocs - c1.allocs);
        CHECK_EQ(s2.reuses - s1.reuses, 100);
        cft__collect();
        CHECK_EQ(cft_device_empty_cache(d0), CFT_OK);
        test_backend_counts c3 = test_backend_counts_now();
        cft_device_memory_stats s3 = stats(d0);
        CHECK_EQ(s3.cached, 0);
        /* 4 KiB blocks are carved from 2 MiB segments: a segment goes back
         * whole once all its blocks are in the cache */
        CHECK_MSG(c3.releases - c0.releases >= 1, "%ld released", c3.releases - c0.releases);
        CHECK_EQ(s3.releases - s0.releases, (uint64_t)(c3.releases - c0.releases));
        CHECK_MSG(test_backend_live_bytes() < live0 + 64 * 4096, "%ld live bytes, %ld before",
                  test_backend_live_bytes(), live0);
        CHECK(s3.peak_in_use >= 200 * 4096);
    }
#endif
    cft_array *w = rnd(1, (int64_t[]){64, 32}, 2), *b = rnd(2, (int64_t[]){32}, 1),
              *x = rnd(3, (int64_t[]){128, 64}, 2);
    TEST("a jitted function in a loop: intermediates reused, the backend allocates the results") {
        cft_fn *f = cft_jit(cft_fn_new(net, NULL, 3, 1));
        cft_array *host[3] = {w, b, x}, *dev[3], *want, *got;
        for (int i = 0; i < 3; i++)
            dev[i] = cft_device_put(host[i], d1);
        CHECK_EQ(cft_fn_call(f, host, &want), CFT_OK);
        for (int i = 0; i < 3; i++) /* compile, first calls */
            CHECK_EQ(cft_fn_call(f, dev, &got), CFT_OK);
        test_backend_counts c0 = test_backend_counts_now();
        cft_device_memory_stats s0 = stats(d1);
        enum { N = 20 };
        for (int i = 0; i < N; i++) {
            CHECK_EQ(cft_fn_call(f, dev, &got), CFT_OK);
            CHECK_ARRAY_CLOSE(cft_device_put(got, cft_device("cpu")), want, 1e-4, 1e-5);
        }
        test_backend_counts c1 = test_backend_counts_now();
        cft_device_memory_stats s1 = stats(d1);
        /* at most the one output per call (until the GC finds old ones) */
        CHECK_MSG(c1.allocs - c0.allocs <= N, "%ld backend allocations in %d calls",
                  c1.allocs - c0.allocs, N);
        CHECK_MSG(s1.reuses - s0.reuses >= N, "%lu reuses in %d calls",
                  (unsigned long)(s1.reuses - s0.reuses), N);
        /* nothing through the host but the results this test reads: the
         * constants and the reduction's initial values stay on the device
         * from the first call, the broadcast of b is a device view */
        CHECK_MSG(c1.to_device == c0.to_device, "%ld copies to the device in %d calls",
                  c1.to_device - c0.to_device, N);
        CHECK_MSG(c1.to_host - c0.to_host == N, "%ld copies to the host in %d calls",
                  c1.to_host - c0.to_host, N);
        CHECK_MSG(s1.in_use - s0.in_use <= (size_t)N * 512, "%zu more bytes in use",
                  s1.in_use - s0.in_use);
        /* the fused group runs as the backend's kernel although its
         * broadcast operand is a contiguous copy on the device (the kernel
         * was made for a broadcast view): its loop is merged less */
        CHECK_MSG(c1.kernels - c0.kernels >= N, "%ld kernels in %d calls", c1.kernels - c0.kernels,
                  N);
    }
#ifndef CFT_GC_OFF
    TEST("over the device's limit: garbage collected and the cache emptied, then served") {
        cft__collect();
        cft_device_empty_cache(d0);
        long live = test_backend_live_bytes();
        test_backend_set_limit(live + 16 * 65536); /* room for 16 arrays of 64 KiB */
        int bad = 0;
        for (int i = 0; i < 200; i++) { /* 200 of them, each garbage at once */
            cft_array *y = cft_device_put(cft_full(2.0, CFT_F32, (int64_t[]){16384}, 1), d0);
            bad += cft_failed(y);
        }
        CHECK_MSG(bad == 0, "%d of 200 refused", bad);
        cft_array *huge = cft_device_put(cft_zeros(CFT_F32, (int64_t[]){1 << 22}, 1), d0);
        CHECK(cft_failed(huge));
        const char *m = cft_error_message(huge);
        CHECK_MSG(strstr(m, "cft_device_put") && strstr(m, "test:0") && strstr(m, "16777216"), "%s",
                  m);
        test_backend_set_limit(0);
    }
#endif
#ifndef CFT_GC_OFF /* dropped outputs die only when collected */
    TEST("outputs dropped in a loop: the device's own bytes ask for collections") {
        /* 48 outputs of 64 MiB (3 GiB), each garbage at once and nothing
         * else allocated: without the device's bytes counted, no collection
         * would run until the device were full; with them the device holds
         * at most max(512 MiB, twice what is live) more than is live, and
         * the later outputs come from the cache */
        cft__collect();
        cft_device_empty_cache(d1);
        cft_device_memory_stats s0 = stats(d1);
        test_backend_counts c0 = test_backend_counts_now();
        cft_array *x = cft_device_put(cft_ones(CFT_F32, (int64_t[]){1 << 24}, 1), d1), *y;
        cft_fn *twice = cft_jit(cft_fn_new(doubled, NULL, 1, 1));
        for (int i = 0; i < 48; i++) /* a kernel on the device: no host memory at all */
            CHECK_EQ(cft_fn_call(twice, &x, &y), CFT_OK);
        cft_device_memory_stats s1 = stats(d1);
        CHECK_MSG(s1.peak_in_use - s0.in_use < ((size_t)1 << 30), "peak %zu MiB over %zu MiB",
                  (s1.peak_in_use - s0.in_use) >> 20, s0.in_use >> 20);
        CHECK_MSG(test_backend_counts_now().allocs - c0.allocs < 24, "%ld backend allocations",
                  test_backend_counts_now().allocs - c0.allocs);
    }
#endif
    TEST("four threads allocating and releasing on one device") {
        cft_device_memory_stats s0 = stats(d1);
        pthread_t th[4];
        for (int t = 0; t < 4; t++)
            pthread_create(&th[t], NULL, churn, (void *)d1);
        for (int t = 0; t < 4; t++) {
            void *r;
            pthread_join(th[t], &r);
            CHECK_MSG(r == NULL, "thread %d read a wrong value", t);
        }
        cft__collect();
        cft_device_memory_stats s1 = stats(d1);
#ifndef CFT_GC_OFF /* the 800 blocks, counted in and out across threads */
        CHECK_MSG(s1.in_use <= s0.in_use + 64 * 1024, "%zu bytes in use, %zu before", s1.in_use,
                  s0.in_use);
#endif
        CHECK_EQ(cft_device_empty_cache(d1), CFT_OK);
        /* what stays cached is the free part of segments that still hold
         * a live array's block (other tests' arrays on d1) */
        CHECK_MSG(stats(d1).cached < ((size_t)16 << 20), "%zu bytes still cached",
                  stats(d1).cached);
    }
    return check_summary();
}
