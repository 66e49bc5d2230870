/* test_registry.c: every primitive in the registry (cft__prims) carries the
 * rules its flags promise: shape, impl and vmap always; jvp unless it is
 * CFT_PRIM_NONDIFF (and then none); transpose exactly when it is
 * CFT_PRIM_LINEAR; c_expr when it is CFT_PRIM_ELEMENTWISE. Names are unique.
 * Prints the table of primitives and their rules. That every primitive also
 * has a row in the per-primitive table is checked by test_prims. */
#include <string.h>

#include "check.h"
#include "trace/prim.h"

int main(int argc, char **argv) {
    check_init(argc, argv);
    int n = 0;
    while (cft__prims[n])
        n++;

    printf("%-22s %4s %4s  %-9s %s\n", "primitive", "nin", "nout", "flags", "rules");
    for (int i = 0; i < n; i++) {
        const cft_prim *p = cft__prims[i];
        char flags[8] = "---", rules[8] = "------";
        if (p->flags & CFT_PRIM_LINEAR)
            flags[0] = 'L';
        if (p->flags & CFT_PRIM_NONDIFF)
            flags[1] = 'N';
        if (p->flags & CFT_PRIM_ELEMENTWISE)
            flags[2] = 'E';
        if (p->shape)
            rules[0] = 'S';
        if (p->impl)
            rules[1] = 'I';
        if (p->jvp)
            rules[2] = 'J';
        if (p->transpose)
            rules[3] = 'T';
        if (p->vmap)
            rules[4] = 'V';
        if (p->c_expr)
            rules[5] = 'C';
        printf("%-22s %4d %4d  %-9s %s%s%s\n", p->name ? p->name : "(null)", p->nin, p->nout, flags,
               rules, p->c_expr ? "  " : "", p->c_expr ? p->c_expr : "");
    }
    printf("flags: L linear, N nondifferentiable, E elementwise; rules: S shape, I impl, J jvp, "
           "T transpose, V vmap, C c_expr\n");

    TEST("the registry is not empty") CHECK(n > 0);

    for (int i = 0; i < n; i++) {
        const cft_prim *p = cft__prims[i];
        const char *name = p->name ? p->name : "(unnamed)";
        TEST("%s: has the rules its flags promise", name) {
            CHECK_MSG(p->name && *p->name, "primitive %d has no name", i);
            CHECK_MSG(p->nout >= 1 || (p->nout == -1 && p->nout_of), "nout = %d without nout_of",
                      p->nout);
            CHECK_MSG(p->nin >= -1, "nin = %d", p->nin);
            CHECK_MSG(p->shape, "no shape rule");
            CHECK_MSG(p->impl, "no impl");
            CHECK_MSG(p->vmap, "no vmap rule");
            if (p->flags & CFT_PRIM_NONDIFF)
                CHECK_MSG(!p->jvp, "CFT_PRIM_NONDIFF but has a jvp rule (it would never run)");
            else
                CHECK_MSG(p->jvp, "no jvp rule (and not CFT_PRIM_NONDIFF)");
            if (p->flags & CFT_PRIM_LINEAR)
                CHECK_MSG(p->transpose, "CFT_PRIM_LINEAR but no transpose rule");
            else
                CHECK_MSG(!p->transpose, "a transpose rule but not CFT_PRIM_LINEAR");
            if (p->flags & CFT_PRIM_ELEMENTWISE) {
                CHECK_MSG(p->c_expr && *p->c_expr, "CFT_PRIM_ELEMENTWISE but no c_expr");
                CHECK_MSG(p->nin >= 1, "elementwise with nin = %d", p->nin);
            }
            for (int j = 0; j < i; j++)
                CHECK_MSG(!p->name || !cft__prims[j]->name || strcmp(p->name, cft__prims[j]->name),
                          "name also used by primitive %d", j);
        }
    }
    return check_summary();
}
