/* dim.c: symbolic dims. A symbolic dim is a polynomial over named symbols
 * with integer coefficients, kept in canonical form (terms sorted by
 * monomial, equal monomials merged, no zero coefficients) in one interned
 * table, so two dims are equal expressions exactly when they are equal
 * integers. A table entry's id is encoded as
 *
 *     SYM_BASE - id * SYM_STRIDE      (SYM_BASE = -(2^44 + 12345))
 *
 * a negative value far from every size, on a sparse odd grid: C arithmetic
 * done on one by mistake (B * 4, B + 1) lands off the grid or out of the
 * size range, so cft_dim_valid rejects it instead of it passing as a
 * plausible size. The codes stay within about 2^44.3 in magnitude, so such
 * a slip (a product by up to 2^18) does not overflow int64_t, which would
 * be undefined behaviour in the user's code. The table is process-wide, guarded by a mutex, and
 * never shrinks (expressions are few: those the traced shapes produce). */
#include "array/dim.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cft/array.h"
#include "core/error.h"
#include "core/mem.h"

#define SYM_BASE (-(INT64_C(1) << 44) - 12345)
#define SYM_STRIDE ((INT64_C(1) << 20) + 1)
#define MAX_EXPR (1 << 22)
#define MAX_ATOMS 32767 /* atoms are int16 in a term */
#define MAXDEG 4
#define MAXTERMS 6
#define CHUNK 1024

typedef struct {
    int64_t c;
    int16_t deg;
    int16_t atom[MAXDEG]; /* sorted */
} term;

typedef struct {
    int64_t k; /* the constant */
    int nt;
    term t[MAXTERMS];
} poly;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static poly *chunks[MAX_EXPR / CHUNK];
static int nexpr;
static int *htab; /* expression ids, -1 empty */
static size_t hcap;
static char atom_names[MAX_ATOMS][32];
static int natoms;

/* ---- polynomials ---- */

static int mono_cmp(const term *a, const term *b) {
    if (a->deg != b->deg)
        return a->deg < b->deg ? -1 : 1;
    for (int i = 0; i < a->deg; i++)
        if (a->atom[i] != b->atom[i])
            return a->atom[i] < b->atom[i] ? -1 : 1;
    return 0;
}

/* sort, merge and drop zero terms of n raw terms into p (false: too many) */
static bool canon(poly *p, int64_t k, term *raw, int n) {
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && mono_cmp(&raw[j - 1], &raw[j]) > 0; j--) {
            term t = raw[j];
            raw[j] = raw[j - 1];
            raw[j - 1] = t;
        }
    memset(p, 0, sizeof *p);
    p->k = k;
    for (int i = 0; i < n; i++) {
        if (p->nt && !mono_cmp(&p->t[p->nt - 1], &raw[i])) {
            if (__builtin_add_overflow(p->t[p->nt - 1].c, raw[i].c, &p->t[p->nt - 1].c))
                return false;
        } else {
            if (p->nt && p->t[p->nt - 1].c == 0)
                p->nt--;
            if (p->nt == MAXTERMS)
                return false;
            memset(&p->t[p->nt], 0, sizeof(term));
            p->t[p->nt] = raw[i];
            p->nt++;
        }
    }
    if (p->nt && p->t[p->nt - 1].c == 0)
        p->nt--;
    for (int i = p->nt; i < MAXTERMS; i++)
        memset(&p->t[i], 0, sizeof(term));
    return true;
}

static int decode(int64_t d) { /* expression id, -1: not symbolic */
    if (d > SYM_BASE)
        return -1;
    int64_t delta = SYM_BASE - d;
    if (delta % SYM_STRIDE)
        return -1;
    int64_t id = delta / SYM_STRIDE;
    return id < __atomic_load_n(&nexpr, __ATOMIC_ACQUIRE) ? (int)id : -1;
}

static const poly *entry(int id) {
    return &chunks[id / CHUNK][id % CHUNK];
}

/* d as a polynomial (false: not a dim) */
static bool to_poly(int64_t d, poly *p) {
    if (d >= 0 && d < CFT_DIM_MAX_CONCRETE) {
        memset(p, 0, sizeof *p);
        p->k = d;
        return true;
    }
    int id = decode(d);
    if (id < 0)
        return false;
    *p = *entry(id);
    return true;
}

/* hash and equality over the fields (never the padding) */
static uint64_t phash(const poly *p) {
    uint64_t h = 1469598103934665603ull;
#define MIX(v) h = (h ^ (uint64_t)(v)) * 1099511628211ull
    MIX(p->k);
    MIX(p->nt);
    for (int i = 0; i < p->nt; i++) {
        MIX(p->t[i].c);
        for (int j = 0; j < p->t[i].deg; j++)
            MIX(p->t[i].atom[j] + 1);
        MIX(0x5a);
    }
#undef MIX
    return h;
}
static bool peq(const poly *a, const poly *b) {
    if (a->k != b->k || a->nt != b->nt)
        return false;
    for (int i = 0; i < a->nt; i++)
        if (a->t[i].c != b->t[i].c || mono_cmp(&a->t[i], &b->t[i]))
            return false;
    return true;
}

static void hinsert(int id) {
    size_t s = phash(entry(id)) & (hcap - 1);
    while (htab[s] >= 0)
        s = (s + 1) & (hcap - 1);
    htab[s] = id;
}

/* the dim of a canonical polynomial: its constant if it has no terms,
 * else the interned entry */
static int64_t from_poly(const poly *p) {
    if (p->nt == 0)
        return p->k;
    pthread_mutex_lock(&mu);
    if ((size_t)(nexpr + 1) * 2 > hcap) {
        size_t ncap = hcap ? hcap * 2 : 1024;
        int *nt = malloc(sizeof(int) * ncap);
        if (!nt) {
            pthread_mutex_unlock(&mu);
            return CFT_DIM_INVALID;
        }
        free(htab);
        htab = nt;
        hcap = ncap;
        for (size_t i = 0; i < hcap; i++)
            htab[i] = -1;
        for (int i = 0; i < nexpr; i++)
            hinsert(i);
    }
    size_t s = phash(p) & (hcap - 1);
    for (; htab[s] >= 0; s = (s + 1) & (hcap - 1))
        if (peq(entry(htab[s]), p)) {
            int id = htab[s];
            pthread_mutex_unlock(&mu);
            return SYM_BASE - (int64_t)id * SYM_STRIDE;
        }
    if (nexpr == MAX_EXPR) {
        pthread_mutex_unlock(&mu);
        return CFT_DIM_INVALID;
    }
    int id = nexpr;
    if (!chunks[id / CHUNK] && !(chunks[id / CHUNK] = calloc(CHUNK, sizeof(poly)))) {
        pthread_mutex_unlock(&mu);
        return CFT_DIM_INVALID;
    }
    chunks[id / CHUNK][id % CHUNK] = *p;
    __atomic_store_n(&nexpr, id + 1, __ATOMIC_RELEASE);
    htab[s] = id;
    pthread_mutex_unlock(&mu);
    return SYM_BASE - (int64_t)id * SYM_STRIDE;
}

static bool padd(const poly *a, const poly *b, int sign, poly *out) {
    term raw[2 * MAXTERMS];
    int n = 0;
    for (int i = 0; i < a->nt; i++)
        raw[n++] = a->t[i];
    for (int i = 0; i < b->nt; i++) {
        raw[n] = b->t[i];
        if (sign < 0 && __builtin_mul_overflow(raw[n].c, -1, &raw[n].c))
            return false;
        n++;
    }
    int64_t k;
    if (sign > 0 ? __builtin_add_overflow(a->k, b->k, &k) : __builtin_sub_overflow(a->k, b->k, &k))
        return false;
    return canon(out, k, raw, n);
}

/* product of two terms (false: degree too high or overflow) */
static bool tmul(const term *a, const term *b, term *out) {
    if (a->deg + b->deg > MAXDEG)
        return false;
    memset(out, 0, sizeof *out);
    if (__builtin_mul_overflow(a->c, b->c, &out->c))
        return false;
    int i = 0, j = 0;
    while (i < a->deg || j < b->deg)
        out->atom[out->deg++] =
            j >= b->deg || (i < a->deg && a->atom[i] <= b->atom[j]) ? a->atom[i++] : b->atom[j++];
    return true;
}

static bool pmul(const poly *a, const poly *b, poly *out) {
    term raw[MAXTERMS * MAXTERMS + 2 * MAXTERMS];
    int n = 0;
    for (int i = 0; i < a->nt; i++)
        for (int j = 0; j < b->nt; j++)
            if (!tmul(&a->t[i], &b->t[j], &raw[n++]))
                return false;
    for (int i = 0; i < a->nt; i++) {
        raw[n] = a->t[i];
        if (__builtin_mul_overflow(raw[n].c, b->k, &raw[n].c))
            return false;
        n++;
    }
    for (int j = 0; j < b->nt; j++) {
        raw[n] = b->t[j];
        if (__builtin_mul_overflow(raw[n].c, a->k, &raw[n].c))
            return false;
        n++;
    }
    int64_t k;
    if (__builtin_mul_overflow(a->k, b->k, &k))
        return false;
    return canon(out, k, raw, n);
}

/* ---- public functions ---- */

/* the atom named name, or natoms when there is none (under mu); a freed
 * atom's name is empty, which no symbol has */
static int find_atom(const char *name) {
    int a = 0;
    while (a < natoms && strcmp(atom_names[a], name))
        a++;
    return a;
}

/* Atoms made inside a load (cft__dim_txn_begin .. _end) are provisional:
 * a failed load frees them again (their slots are reused), so a hostile
 * file leaves no names behind. An atom another thread finds, or any
 * atom once its load succeeds, is permanent. (A freed atom's slot may
 * still appear in interned expressions nobody holds: a reused slot gives
 * them the new name's meaning, the same polynomial over it.) */
enum { ATOM_KEPT, ATOM_PROVISIONAL, ATOM_FREE };
static uint8_t atom_state[MAX_ATOMS];
static int free_atoms[MAX_ATOMS], nfree;

/* the atoms' tables hold names and numbers, no pointers: 1.2 MB the
 * collector need not scan at every collection */
__attribute__((constructor)) static void atoms_unscanned(void) {
    cft__gc_unscanned(atom_names, sizeof atom_names);
    cft__gc_unscanned(atom_state, sizeof atom_state);
    cft__gc_unscanned(free_atoms, sizeof free_atoms);
}
static _Thread_local int txn_depth, txn_n, txn_cap;
static _Thread_local int *txn_atoms; /* malloc'd: the atoms this thread's load made */

static bool mine(int a) {
    for (int i = 0; i < txn_n; i++)
        if (txn_atoms[i] == a)
            return true;
    return false;
}

/* atom a was found by a lookup (under mu): another thread's provisional
 * atom is now in use here, so it stays */
static void found(int a) {
    if (atom_state[a] == ATOM_PROVISIONAL && !mine(a))
        atom_state[a] = ATOM_KEPT;
}

void cft__dim_txn_begin(void) {
    txn_depth++;
}

void cft__dim_txn_end(bool ok) {
    if (txn_depth <= 0 || --txn_depth > 0)
        return;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < txn_n; i++) {
        int a = txn_atoms[i];
        if (atom_state[a] != ATOM_PROVISIONAL)
            continue;
        if (ok)
            atom_state[a] = ATOM_KEPT;
        else {
            atom_state[a] = ATOM_FREE;
            atom_names[a][0] = 0;
            free_atoms[nfree++] = a;
        }
    }
    pthread_mutex_unlock(&mu);
    txn_n = 0;
}

int cft__dim_live_symbols(void) {
    pthread_mutex_lock(&mu);
    int n = natoms - nfree;
    pthread_mutex_unlock(&mu);
    return n;
}

int64_t cft_dim_sym(const char *name) {
    size_t len = name ? strlen(name) : 0;
    bool ok = len > 0 && len < 32 && !(name[0] >= '0' && name[0] <= '9');
    for (size_t i = 0; ok && i < len; i++) {
        char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    }
    if (!ok) {
        cft__set_last(
            cft__fail(CFT_E_ARG, "cft_dim_sym: bad symbol name \"%s\"", name ? name : "(null)"));
        return CFT_DIM_INVALID;
    }
    if (txn_depth > 0 && txn_n == txn_cap) { /* room to record it, before the lock */
        int cap = txn_cap ? 2 * txn_cap : 64;
        int *more = realloc(txn_atoms, sizeof *more * (size_t)cap);
        if (!more) {
            cft__set_last(cft__oom());
            return CFT_DIM_INVALID;
        }
        txn_atoms = more, txn_cap = cap;
    }
    pthread_mutex_lock(&mu);
    int a = find_atom(name);
    if (a < natoms)
        found(a);
    else {
        if (nfree > 0)
            a = free_atoms[--nfree];
        else if (natoms == MAX_ATOMS) {
            pthread_mutex_unlock(&mu);
            cft__set_last(cft__fail(CFT_E_ARG, "cft_dim_sym: too many symbols (%d)", MAX_ATOMS));
            return CFT_DIM_INVALID;
        } else
            a = natoms++;
        memcpy(atom_names[a], name, len + 1);
        atom_state[a] = txn_depth > 0 ? ATOM_PROVISIONAL : ATOM_KEPT;
        if (txn_depth > 0)
            txn_atoms[txn_n++] = a;
    }
    pthread_mutex_unlock(&mu);
    return cft__dim_of_atom(a);
}

int64_t cft__dim_sym_known(const char *name) {
    if (!name || !*name)
        return CFT_DIM_INVALID;
    pthread_mutex_lock(&mu);
    int a = find_atom(name);
    bool got = a < natoms;
    if (got)
        found(a);
    pthread_mutex_unlock(&mu);
    return got ? cft__dim_of_atom(a) : CFT_DIM_INVALID;
}

int64_t cft__dim_of_atom(int a) {
    poly p;
    memset(&p, 0, sizeof p);
    p.nt = 1;
    p.t[0].c = 1;
    p.t[0].deg = 1;
    p.t[0].atom[0] = (int16_t)a;
    return from_poly(&p);
}

const char *cft__dim_atom_name(int a) {
    return a >= 0 && a < natoms && atom_names[a][0] ? atom_names[a] : "?";
}

bool cft_dim_is_symbolic(int64_t d) {
    return d < 0 && decode(d) >= 0;
}

bool cft_dim_valid(int64_t d) {
    return (d >= 0 && d < CFT_DIM_MAX_CONCRETE) || decode(d) >= 0;
}

bool cft__shape_symbolic(const int64_t *shape, int ndim) {
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 && decode(shape[i]) >= 0)
            return true;
    return false;
}

bool cft_aval_is_symbolic(const cft_aval *a) {
    CFT_API("cft_aval_is_symbolic");
    return a && cft__shape_symbolic(a->shape, a->ndim);
}

static int64_t binop(int64_t a, int64_t b, int op) {
    if (a >= 0 && b >= 0 && a < CFT_DIM_MAX_CONCRETE && b < CFT_DIM_MAX_CONCRETE) {
        /* a product of two concrete sizes overflows int64 from 2^63 (2^32 *
         * 2^32 wrapped to 0); a size of 2^40 or more is no concrete dim */
        int64_t r;
        if (op == 2 ? __builtin_mul_overflow(a, b, &r) : (r = op == 0 ? a + b : a - b, false))
            return CFT_DIM_INVALID;
        return r >= CFT_DIM_MAX_CONCRETE ? CFT_DIM_INVALID : r;
    }
    poly p, q, r;
    if (!to_poly(a, &p) || !to_poly(b, &q))
        return CFT_DIM_INVALID;
    bool ok = op == 2 ? pmul(&p, &q, &r) : padd(&p, &q, op == 0 ? 1 : -1, &r);
    return ok ? from_poly(&r) : CFT_DIM_INVALID;
}
int64_t cft_dim_add(int64_t a, int64_t b) {
    return binop(a, b, 0);
}
int64_t cft_dim_sub(int64_t a, int64_t b) {
    return binop(a, b, 1);
}
int64_t cft_dim_mul(int64_t a, int64_t b) {
    return binop(a, b, 2);
}

/* does monomial m contain the multiset d? writes the rest */
static bool mono_div(const term *m, const term *d, term *rest) {
    memset(rest, 0, sizeof *rest);
    int j = 0;
    for (int i = 0; i < m->deg; i++) {
        if (j < d->deg && m->atom[i] == d->atom[j])
            j++;
        else
            rest->atom[rest->deg++] = m->atom[i];
    }
    return j == d->deg;
}

int64_t cft_dim_div(int64_t a, int64_t b) {
    if (a == b && cft_dim_valid(a) && a != 0)
        return 1;
    poly p, q;
    if (!to_poly(a, &p) || !to_poly(b, &q))
        return CFT_DIM_INVALID;
    if (q.nt == 0) { /* by a constant */
        if (q.k == 0 || p.k % q.k)
            return CFT_DIM_INVALID;
        term raw[MAXTERMS];
        for (int i = 0; i < p.nt; i++) {
            if (p.t[i].c % q.k)
                return CFT_DIM_INVALID;
            raw[i] = p.t[i];
            raw[i].c /= q.k;
        }
        poly r;
        return canon(&r, p.k / q.k, raw, p.nt) ? from_poly(&r) : CFT_DIM_INVALID;
    }
    if (q.nt != 1 || q.k != 0 || p.k != 0) /* only by one term */
        return CFT_DIM_INVALID;
    term raw[MAXTERMS];
    for (int i = 0; i < p.nt; i++) {
        if (p.t[i].c % q.t[0].c || !mono_div(&p.t[i], &q.t[0], &raw[i]))
            return CFT_DIM_INVALID;
        raw[i].c = p.t[i].c / q.t[0].c;
    }
    /* terms that became constants fold into k */
    int64_t k = 0;
    int n = 0;
    for (int i = 0; i < p.nt; i++) {
        if (raw[i].deg == 0)
            k += raw[i].c;
        else
            raw[n++] = raw[i];
    }
    poly r;
    return canon(&r, k, raw, n) ? from_poly(&r) : CFT_DIM_INVALID;
}

int cft__dim_atom(int64_t d) {
    int id = d < 0 ? decode(d) : -1;
    if (id < 0)
        return -1;
    const poly *p = entry(id);
    return p->nt == 1 && p->k == 0 && p->t[0].c == 1 && p->t[0].deg == 1 ? p->t[0].atom[0] : -1;
}

int cft__dim_atoms(int64_t d, int *atoms, int max) {
    poly p;
    if (d >= 0 || !to_poly(d, &p))
        return 0;
    int n = 0;
    for (int i = 0; i < p.nt; i++)
        for (int j = 0; j < p.t[i].deg; j++) {
            bool have = false;
            for (int k = 0; k < n && k < max; k++)
                have |= atoms[k] == p.t[i].atom[j];
            if (!have) {
                if (n < max)
                    atoms[n] = p.t[i].atom[j];
                n++;
            }
        }
    return n;
}

bool cft__dimenv_bind(cft_dimenv *env, int a, int64_t v) {
    for (int i = 0; i < env->n; i++)
        if (env->atom[i] == a)
            return env->val[i] == v;
    if (env->n == CFT_DIM_MAXSYMS)
        return false;
    env->atom[env->n] = a;
    env->val[env->n++] = v;
    return true;
}

int64_t cft__dim_eval(int64_t d, const cft_dimenv *env) {
    if (d >= 0)
        return d;
    poly p;
    if (!to_poly(d, &p))
        return CFT_DIM_INVALID;
    int64_t r = p.k;
    for (int i = 0; i < p.nt; i++) {
        int64_t t = p.t[i].c;
        for (int j = 0; j < p.t[i].deg; j++) {
            int k = 0;
            while (k < env->n && env->atom[k] != p.t[i].atom[j])
                k++;
            if (k == env->n || __builtin_mul_overflow(t, env->val[k], &t))
                return CFT_DIM_INVALID;
        }
        if (__builtin_add_overflow(r, t, &r))
            return CFT_DIM_INVALID;
    }
    return r;
}

bool cft__shape_eval(const int64_t *shape, int ndim, const cft_dimenv *env, int64_t *out) {
    for (int i = 0; i < ndim; i++) {
        out[i] = cft__dim_eval(shape[i], env);
        if (out[i] == CFT_DIM_INVALID)
            return false;
    }
    return true;
}

int64_t cft_dim_eval(int64_t d, int n, const char *const *names, const int64_t *values) {
    cft_dimenv env = {0};
    for (int i = 0; i < n && names && values; i++) {
        int64_t s = cft_dim_sym(names[i]);
        if (s == CFT_DIM_INVALID || !cft__dimenv_bind(&env, cft__dim_atom(s), values[i]))
            return CFT_DIM_INVALID;
    }
    return cft__dim_eval(d, &env);
}

/* the lowest value of a - b over symbols >= 1, if every term's coefficient
 * is >= 0 (then it is reached with every symbol at 1) */
static bool diff_min(int64_t a, int64_t b, int64_t *min) {
    poly p, q, r;
    if (!to_poly(a, &p) || !to_poly(b, &q) || !padd(&p, &q, -1, &r))
        return false;
    int64_t m = r.k;
    for (int i = 0; i < r.nt; i++)
        if (r.t[i].c < 0 || __builtin_add_overflow(m, r.t[i].c, &m))
            return false;
    *min = m;
    return true;
}
bool cft__dim_ge(int64_t a, int64_t b) {
    int64_t m;
    return a == b || (diff_min(a, b, &m) && m >= 0);
}
bool cft__dim_gt(int64_t a, int64_t b) {
    int64_t m;
    return diff_min(a, b, &m) && m > 0;
}

/* ---- text ---- */

const char *cft_dim_str(int64_t d, char *buf, size_t n) {
    if (!buf || n == 0)
        return buf;
    poly p;
    if (d >= 0 || !to_poly(d, &p)) {
        if (d == CFT_DIM_INVALID || (d < 0 && !to_poly(d, &p)))
            snprintf(buf, n, d == CFT_DIM_INVALID ? "<invalid>" : "%lld", (long long)d);
        else
            snprintf(buf, n, "%lld", (long long)d);
        return buf;
    }
    size_t k = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (k < n) {                                                                               \
            int w = snprintf(buf + k, n - k, __VA_ARGS__);                                         \
            k += w > 0 ? (size_t)w : 0;                                                            \
        }                                                                                          \
    } while (0)
    for (int i = 0; i < p.nt; i++) {
        int64_t c = p.t[i].c;
        if (c < 0)
            PUT("-");
        else if (i)
            PUT("+");
        for (int j = 0; j < p.t[i].deg; j++)
            PUT(j ? "*%s" : "%s", cft__dim_atom_name(p.t[i].atom[j]));
        if (c != 1 && c != -1)
            PUT("*%lld", (long long)(c < 0 ? -c : c));
    }
    if (p.k)
        PUT("%s%lld", p.k < 0 ? "-" : "+", (long long)(p.k < 0 ? -p.k : p.k));
#undef PUT
    return buf;
}

const char *cft__dim_s(int64_t d) {
    static _Thread_local char bufs[8][64];
    static _Thread_local int k;
    k = (k + 1) & 7;
    return cft_dim_str(d, bufs[k], sizeof bufs[k]);
}

/* ---- binding the symbols of formal avals to actual sizes ---- */

cft_array *cft__dims_bind(const cft_aval *formal, const cft_aval *actual, int n, cft_dimenv *env,
                          const char *who) {
    char a[96], b[96];
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            const cft_aval *f = &formal[i], *x = &actual[i];
            if (f->dtype != x->dtype || f->ndim != x->ndim)
                return cft__fail(CFT_E_SHAPE, "%s: input %d is %s, the IR takes %s", who, i,
                                 cft_aval_str(x, a), cft_aval_str(f, b));
            for (int d = 0; d < f->ndim; d++) {
                int64_t fd = f->shape[d], xd = x->shape[d];
                if (!cft__dim_maybe_sym(fd)) {
                    if (fd != xd)
                        return cft__fail(CFT_E_SHAPE, "%s: input %d is %s, the IR takes %s", who, i,
                                         cft_aval_str(x, a), cft_aval_str(f, b));
                    continue;
                }
                int at = cft__dim_atom(fd);
                if (pass == 0 && at >= 0 && !cft__dimenv_bind(env, at, xd)) {
                    int64_t was = cft__dim_eval(fd, env);
                    if (was == CFT_DIM_INVALID)
                        return cft__fail(CFT_E_SHAPE, "%s: more than %d symbols", who,
                                         CFT_DIM_MAXSYMS);
                    return cft__fail(CFT_E_SHAPE,
                                     "%s: input %d is %s, the IR takes %s, but %s is already %lld",
                                     who, i, cft_aval_str(x, a), cft_aval_str(f, b),
                                     cft__dim_atom_name(at), (long long)was);
                }
                if (pass == 1 && cft__dim_eval(fd, env) != xd) {
                    int64_t v = cft__dim_eval(fd, env);
                    if (v == CFT_DIM_INVALID)
                        return cft__fail(CFT_E_SHAPE,
                                         "%s: input %d is %s, the IR takes %s: %s cannot be "
                                         "bound from the inputs",
                                         who, i, cft_aval_str(x, a), cft_aval_str(f, b),
                                         cft__dim_s(fd));
                    return cft__fail(
                        CFT_E_SHAPE, "%s: input %d is %s, the IR takes %s (%s = %lld there)", who,
                        i, cft_aval_str(x, a), cft_aval_str(f, b), cft__dim_s(fd), (long long)v);
                }
            }
        }
    return NULL;
}
