/* blas_core.h: OpenBLAS's kernels matched to the CPU (blas_core.c). */
#ifndef CFT_BLAS_CORE_H
#define CFT_BLAS_CORE_H

#include <stdbool.h>

/* The core OpenBLAS runs its kernels for ("Haswell", "SkylakeX", ...), or
 * NULL when the BLAS is not a DYNAMIC_ARCH OpenBLAS. */
const char *cft__blas_core(void);
/* The OpenBLAS core with the newest kernels this CPU runs ("SkylakeX",
 * "Haswell" or "Zen", "Sandybridge", "Prescott"). */
const char *cft__blas_cpu_core(void);
/* Makes OpenBLAS load the kernels of core `name` (an OpenBLAS core name);
 * true when it runs them now. Not while another thread is in a BLAS call. */
bool cft__blas_force_core(const char *name);
/* When OpenBLAS runs kernels older than the CPU's vector units, switches
 * it to the newest the CPU can run and returns the line it wrote on
 * stderr; NULL when nothing was done (OPENBLAS_CORETYPE or
 * CFT_BLAS_CORE=keep set, the core already matches, not OpenBLAS). Run
 * once at load time. */
const char *cft__blas_match_cpu(void);

#endif
