/* Internal helpers shared by the nn layer (src/nn): the tree record, error
 * and formatting helpers, and scalars matching an array's dtype. */
#ifndef CFT_NN_INTERNAL_H
#define CFT_NN_INTERNAL_H

#include "cft/cft.h"
#include "core/error.h"
#include "core/mem.h"

/* A tree: n entries (names[i], xs[i]) in order, or an error (err != NULL,
 * n == 0). Never mutated after it is returned to the caller. */
struct cft_tree {
    int n;
    const char **names;
    cft_array **xs;
    cft_array *err;
};

/* A tree with room for n entries (n set, entries to fill), or an error tree
 * on allocation failure. */
cft_tree *cft__tree_alloc(int n);
/* The error tree of an error array. */
cft_tree *cft__tree_err(cft_array *e);
/* Index of `name` in t, -1 if absent. */
int cft__tree_find(const cft_tree *t, const char *name);

/* x's aval as text in one of 8 rotating static buffers (for messages). */
const char *cft__nn_av(const cft_array *x);
/* A 0-d array of value v with x's dtype (so ops do not promote). */
cft_array *cft__nn_sc(const cft_array *x, double v);
/* "prefix.name" as a GC string ("name" when prefix is NULL or ""). */
char *cft__nn_join(const char *prefix, const char *name);
/* Reduce per-element losses as `red` says (in nn/losses.c). */
cft_array *cft__nn_reduce(const char *op, cft_array *l, cft_reduction red);

#endif
