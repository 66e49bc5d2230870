/* Internal: symbolic dims (see cft/shape.h for the encoding and the public
 * functions). Symbols are "atoms" numbered from 0; an environment binds
 * some of them to sizes. Comparisons assume every symbol is >= 1. */
#ifndef CFT_DIM_H
#define CFT_DIM_H

#include "cft/shape.h"

/* symbols one environment binds (one plan, one IR evaluation) */
#define CFT_DIM_MAXSYMS 16

typedef struct cft_dimenv {
    int n;
    int atom[CFT_DIM_MAXSYMS];
    int64_t val[CFT_DIM_MAXSYMS];
} cft_dimenv;

/* True if d < 0 could be symbolic: the cheap test before the real one. */
static inline bool cft__dim_maybe_sym(int64_t d) {
    return d < 0;
}
/* The atom of a dim that is a bare symbol, -1 for anything else. */
int cft__dim_atom(int64_t d);
/* The dim of atom a (a bare symbol), and its name. */
int64_t cft__dim_of_atom(int a);
const char *cft__dim_atom_name(int a);
/* The distinct atoms d uses (up to max written), returns their count. */
int cft__dim_atoms(int64_t d, int *atoms, int max);
/* d's value under env; CFT_DIM_INVALID if it uses an unbound symbol or
 * overflows. A concrete d is itself. */
int64_t cft__dim_eval(int64_t d, const cft_dimenv *env);
/* Bind atom a to v in env (false: env full, or a bound to another value). */
bool cft__dimenv_bind(cft_dimenv *env, int a, int64_t v);
/* Provably a >= b (resp. a > b) for every value >= 1 of the symbols. */
bool cft__dim_ge(int64_t a, int64_t b);
bool cft__dim_gt(int64_t a, int64_t b);
/* True if some dim of the shape is symbolic. */
bool cft__shape_symbolic(const int64_t *shape, int ndim);
/* The shape with every dim evaluated under env into out; false if a dim
 * cannot be evaluated. */
bool cft__shape_eval(const int64_t *shape, int ndim, const cft_dimenv *env, int64_t *out);
/* Bind the symbols of n formal avals (an IR's inputs) from actual ones:
 * bare symbols bind to the actual sizes, every other dim must then
 * evaluate to its actual size. NULL, or an error naming `who`. */
cft_array *cft__dims_bind(const cft_aval *formal, const cft_aval *actual, int n, cft_dimenv *env,
                          const char *who);
/* For error messages: the text of a dim in one of 8 per-thread buffers. */
const char *cft__dim_s(int64_t d);

/* The dim of symbol `name` if it exists already, else CFT_DIM_INVALID
 * (nothing is added: readers of outside text count new names first). */
int64_t cft__dim_sym_known(const char *name);
/* A load of outside text (cft_ir_parse, cft_export_load): symbols it makes
 * are provisional until cft__dim_txn_end(true); with false they are freed
 * again (unless another thread has found them meanwhile). Nests: the
 * outermost end decides. */
void cft__dim_txn_begin(void);
void cft__dim_txn_end(bool ok);
/* Symbols in the table (made and not freed), for tests. */
int cft__dim_live_symbols(void);

#endif
