/** @file
 * cft/export.h: a traced program saved with its weights, and loaded and run
 * without the code that produced it (torch.export and JAX's export).
 *
 *     cft_export(psg, avals, "psg.cftx");          // f32[B,64] ... symbolic dims kept
 *     ...                                          // in another program, another process:
 *     cft_fn *psg = cft_load_exported("psg.cftx");
 *     cft_fn_call(psg, in, out);                   // or cft_jit(psg), cft_grad(psg, ...)
 *
 * The file is a safetensors file: the constants the program closes over
 * (weights) as tensors "const.0", "const.1", ... and, in its metadata, the
 * IR's text form (cft_ir_print), the input and output avals, and a format
 * version. Any safetensors reader opens it; `cft-run` (tools/) runs one on
 * inputs from a safetensors file. Programs that call custom_jvp/custom_vjp
 * functions, debug prints or collectives cannot be exported (they refer to
 * the process that traced them): cft_export says which. */
#ifndef CFT_EXPORT_H
#define CFT_EXPORT_H

/** @addtogroup jit
 *  @{ */

#include "core.h"
#include "fn.h"
#include "ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The newest format version cft_export writes; cft_load_exported reads it
 *  and every earlier one. Version 2 stores a constant that is a broadcast
 *  (a scalar spread over a shape, as x * 2.0 makes) at its compact shape,
 *  with the shape to spread it to in the "broadcast" metadata (80 scalars
 *  of a chain over f32[512,512] took 84 MB at full shape); a program
 *  without such constants is written as version 1, which earlier cft
 *  reads. */
#define CFT_EXPORT_VERSION 2

/** Trace f at in_avals (f's input count of them; symbolic dims allowed)
 *  and write the program to path (written to a temporary name and renamed,
 *  as cft_save_safetensors). Errors name cft_export: a trace error, a
 *  primitive that cannot be exported, a constant that is not concrete. */
cft_status cft_export(cft_fn *f, const cft_aval *in_avals, const char *path);
/** Export an IR already made (cft_make_ir). */
cft_status cft_export_ir(const cft_ir *ir, const char *path);
/** Read an exported program: *out gets its IR (print it, evaluate it).
 *  A file that is not an exported program, of a newer format version, or
 *  whose IR or constants do not match is an error naming the file. */
cft_status cft_load_exported_ir(const char *path, cft_ir **out);
/** Limits of what cft_load_exported_ir / cft_load_exported read, so that
 *  the work and memory of a load stay in proportion to the file: an IR text
 *  of at most CFT_EXPORT_MAX_IR_BYTES bytes and CFT_EXPORT_MAX_EQNS lines
 *  (equations, nested bodies included; as many constants at most), nesting
 *  (scan, while, cond, checkpoint bodies) at most 32 deep (the IR parser's
 *  limit), constants no larger than the file holds. A larger program is an
 *  error naming the limit. */
#define CFT_EXPORT_MAX_IR_BYTES (16 << 20)
/** The most equations an exported program may hold (see above). */
#define CFT_EXPORT_MAX_EQNS 20000
/** Read an exported program as a function that can be called, jitted and
 *  transformed again (its gradient is the gradient of the original). On
 *  error, an error function carrying the message (cft_fn_failed). */
cft_fn *cft_load_exported(const char *path);

#ifdef __cplusplus
}
#endif
/** @} */

#endif
