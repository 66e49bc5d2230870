/* tree.c: the parameter tree record (an immutable ordered map from names to
 * arrays) and its basic calls: make, set, get, remove, size, access, error
 * trees; plus the small helpers the nn layer shares (nn_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "nn/nn_internal.h"

cft_tree *cft__tree_err(cft_array *e) {
    cft_tree *t = CFT_NEW(cft_tree);
    static cft_tree oom_tree;
    if (!t) {
        oom_tree.err = cft__oom();
        return &oom_tree;
    }
    t->err = e ? e : cft__fail(CFT_E_ARG, "cft_tree: NULL error");
    return t;
}

cft_tree *cft__tree_alloc(int n) {
    cft_tree *t = CFT_NEW(cft_tree);
    if (!t)
        return cft__tree_err(cft__oom());
    t->n = n;
    t->names = CFT_NEWN(const char *, n > 0 ? n : 1);
    t->xs = CFT_NEWN(cft_array *, n > 0 ? n : 1);
    if (!t->names || !t->xs)
        return cft__tree_err(cft__oom());
    return t;
}

int cft__tree_find(const cft_tree *t, const char *name) {
    if (!t || !name)
        return -1;
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->names[i], name) == 0)
            return i;
    return -1;
}

const char *cft__nn_av(const cft_array *x) {
    static _Thread_local char buf[8][96];
    static _Thread_local int next;
    char *b = buf[next++ & 7];
    if (cft_failed(x))
        return "error";
    cft_aval a = cft_array_aval(x);
    return cft_aval_str(&a, b);
}

cft_array *cft__nn_sc(const cft_array *x, double v) {
    return cft_scalar(v, cft_array_dtype(x));
}

char *cft__nn_join(const char *prefix, const char *name) {
    if (!prefix || !*prefix)
        return cft__strdup(name);
    size_t a = strlen(prefix), b = strlen(name);
    char *s = cft__new_data(a + b + 2);
    if (!s)
        return NULL;
    memcpy(s, prefix, a);
    s[a] = '.';
    memcpy(s + a + 1, name, b + 1);
    return s;
}

/* ---- public ---- */

cft_tree *cft_tree_new(void) {
    CFT_API("cft_tree_new");
    return cft__tree_alloc(0);
}

cft_tree *cft_tree_fail(cft_array *e) {
    CFT_API("cft_tree_fail");
    if (e && !cft_failed(e))
        e = cft__fail(CFT_E_ARG, "cft_tree_fail: not an error array");
    return cft__tree_err(e);
}

bool cft_tree_failed(const cft_tree *t) {
    return !t || t->err != NULL;
}

cft_array *cft_tree_error(const cft_tree *t) {
    if (!t)
        return cft__fail(CFT_E_ARG, "cft_tree: NULL tree");
    return t->err;
}

/* the error of t, or an error naming `op` for NULL; NULL for a good tree */
static cft_array *tree_check(const char *op, const cft_tree *t) {
    if (!t)
        return cft__fail(CFT_E_ARG, "%s: NULL tree", op);
    return t->err;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

cft_tree *cft_tree_from(const char *const *names, cft_array *const *xs, int n) {
    CFT_API("cft_tree_from");
    if (n < 0 || (n > 0 && (!names || !xs)))
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_from: bad arguments (n=%d)", n));
    /* built at once, duplicates found by sorting (adding entries one by one
     * copied the tree each time and searched it by name: quadratic, 22-37 s
     * for a checkpoint of 50,000 arrays) */
    for (int i = 0; i < n; i++) {
        if (!names[i] || !*names[i])
            return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_from: empty or NULL name %d", i));
        if (!xs[i])
            return cft__tree_err(
                cft__fail(CFT_E_ARG, "cft_tree_from: NULL array for '%s'", names[i]));
        if (cft_failed(xs[i]))
            return cft__tree_err(xs[i]);
    }
    const char **sorted = malloc(sizeof(char *) * (size_t)(n + 1));
    if (!sorted)
        return cft__tree_err(cft__oom());
    memcpy(sorted, names, sizeof(char *) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(char *), by_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) {
            cft_array *e = cft__fail(CFT_E_ARG, "cft_tree_from: duplicate name '%s'", sorted[i]);
            free(sorted);
            return cft__tree_err(e);
        }
    free(sorted);
    cft_tree *t = cft__tree_alloc(n);
    if (t->err)
        return t;
    for (int i = 0; i < n; i++) {
        if (!(t->names[i] = cft__strdup(names[i])))
            return cft__tree_err(cft__oom());
        t->xs[i] = xs[i];
    }
    return t;
}

cft_tree *cft_tree_set(const cft_tree *t, const char *name, cft_array *x) {
    CFT_API("cft_tree_set");
    cft_array *e = tree_check("cft_tree_set", t);
    if (e)
        return cft__tree_err(e);
    if (!name || !*name)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_set: empty or NULL name"));
    if (!x)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_set: NULL array for '%s'", name));
    if (cft_failed(x))
        return cft__tree_err(x);
    int at = cft__tree_find(t, name);
    cft_tree *r = cft__tree_alloc(at >= 0 ? t->n : t->n + 1);
    if (r->err)
        return r;
    memcpy(r->names, t->names, sizeof(char *) * (size_t)t->n);
    memcpy(r->xs, t->xs, sizeof(cft_array *) * (size_t)t->n);
    if (at < 0) {
        at = t->n;
        r->names[at] = cft__strdup(name);
        if (!r->names[at])
            return cft__tree_err(cft__oom());
    }
    r->xs[at] = x;
    return r;
}

cft_array *cft_tree_get(const cft_tree *t, const char *name) {
    CFT_API("cft_tree_get");
    cft_array *e = tree_check("cft_tree_get", t);
    if (e)
        return e;
    int i = cft__tree_find(t, name);
    if (i < 0)
        return cft__fail(CFT_E_ARG, "cft_tree_get: no entry '%s'", name ? name : "(NULL)");
    return t->xs[i];
}

bool cft_tree_has(const cft_tree *t, const char *name) {
    return t && !t->err && cft__tree_find(t, name) >= 0;
}

cft_tree *cft_tree_remove(const cft_tree *t, const char *name) {
    CFT_API("cft_tree_remove");
    cft_array *e = tree_check("cft_tree_remove", t);
    if (e)
        return cft__tree_err(e);
    if (!name)
        return cft__tree_err(cft__fail(CFT_E_ARG, "cft_tree_remove: the name is NULL"));
    int at = cft__tree_find(t, name);
    if (at < 0) /* documented: removing an absent name returns t */
        return (cft_tree *)t;
    cft_tree *r = cft__tree_alloc(t->n - 1);
    if (r->err)
        return r;
    for (int i = 0, k = 0; i < t->n; i++) {
        if (i == at)
            continue;
        r->names[k] = t->names[i];
        r->xs[k++] = t->xs[i];
    }
    return r;
}

int cft_tree_size(const cft_tree *t) {
    return t && !t->err ? t->n : 0;
}

const char *cft_tree_name(const cft_tree *t, int i) {
    if (!t || t->err || i < 0 || i >= t->n)
        return NULL;
    return t->names[i];
}

cft_array *cft_tree_at(const cft_tree *t, int i) {
    CFT_API("cft_tree_at");
    cft_array *e = tree_check("cft_tree_at", t);
    if (e)
        return e;
    if (i < 0 || i >= t->n)
        return cft__fail(CFT_E_ARG, "cft_tree_at: index %d out of range for a tree of %d", i, t->n);
    return t->xs[i];
}

void cft_tree_print(const cft_tree *t, FILE *f) {
    CFT_API("cft_tree_print");
    if (!f)
        return;
    cft_array *e = tree_check("cft_tree_print", t);
    if (e) {
        fprintf(f, "error: %s\n", cft_error_message(e));
        return;
    }
    for (int i = 0; i < t->n; i++)
        fprintf(f, "%s: %s\n", t->names[i], cft__nn_av(t->xs[i]));
}
