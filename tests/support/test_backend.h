/* test_backend.h: the "test" device backend of tests/support/test_backend.c. */
#ifndef TEST_BACKEND_H
#define TEST_BACKEND_H

/* what went through the backend's table */
typedef struct {
    long allocs, releases, to_device, to_host, copies, runs;
    long gemms;   /* dot_generals the backend ran itself (gemm_map.h + OpenBLAS) */
    long dots;    /* every dot_general (the others ran on the host) */
    long kernels; /* the jit's fused kernels run (run_kernel) */
    long ffts;    /* ffts the backend ran itself (fft_map.h + FFTW) */
    long solvers; /* cholesky / triangular_solve it ran itself (solver_map.h + LAPACK) */
    long graphs;  /* recordings replayed (launch_graph) */
    long graphs_released;
    long collectives; /* on its communicators (built with TEST_BACKEND_MPI) */
    long bytes_to_device, bytes_to_host;
    long syncs; /* waits for the device */
    long marks; /* markers of device time made (abi 5; TEST_BACKEND_MARKS=0: none) */
} test_backend_counts;

/* Registers the backend "test" (devices test:0 and test:1); 0 on success. */
int test_backend_register(void);
/* Registers the same backend as `name` with these CFT_BACKEND_* flags. */
int test_backend_register_as(const char *name, unsigned flags);
/* Registers the same backend as `name`, through a table of abi 1 (the
 * first: it ends before run_kernel); 0 on success. */
int test_backend_register_abi1(const char *name);
/* The counts so far. */
test_backend_counts test_backend_counts_now(void);
/* Bytes allocated and not yet released. */
long test_backend_live_bytes(void);
/* Allocations that would take the live bytes above `bytes` fail (out of
 * device memory); 0: no limit. */
void test_backend_set_limit(long bytes);

#endif
