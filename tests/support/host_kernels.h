/* host_kernels.h: CUDA C kernels run on the host (host_kernels.c), for the
 * test backend's run_kernel. */
#ifndef HOST_KERNELS_H
#define HOST_KERNELS_H

/* Runs kernel `entry` ("cft_g<k>", or any kernel taking one struct) of CUDA C `source` on the host
 * with its argument struct: the source is compiled once (C++ compiler, the prelude's host shim, a
 * launcher per kernel) and kept for the process. 0, or -1 with the reason in err. */
int host_kernel_run(const char *source, const char *entry, const void *args, char *err,
                    unsigned long n);

#endif
