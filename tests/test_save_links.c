/* test_save_links.c: cft_save_safetensors (so cft_export and cft-run too)
 * under the kernel's protected_symlinks rule, applied by cft itself (it
 * reads links in user space, and the sysctl may be off). In a sticky
 * world-writable directory, a link planted by a second user (uid 65534,
 * made by a child that gave up root) is not followed: the save fails with
 * an error naming the link, and the file it points to keeps its bytes. A
 * link the saving user made there, and a link in a directory of its own,
 * are followed as before (the target is replaced). Skipped (77) when not
 * run as root: the second user needs setuid. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cft/cft.h"
#include "check.h"

static char *slurp(const char *path) {
    static char buf[256];
    memset(buf, 0, sizeof buf);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n >= 0 ? buf : NULL;
}

static cft_status twice(void *env, int nin, cft_array *const *in, int nout, cft_array **out) {
    (void)env, (void)nin, (void)nout;
    out[0] = cft_mul_s(in[0], 2);
    return CFT_OK;
}

int main(void) {
    if (geteuid() != 0) {
        printf("SKIP: needs root to act as a second user\n");
        return 77;
    }
    char base[] = "/tmp/cft-links-XXXXXX";
    if (!mkdtemp(base))
        return 1;
    char sticky[100], victim[100], planted[200], own_link[200], priv[100], priv_link[100];
    snprintf(sticky, sizeof sticky, "%s/shared", base);
    snprintf(victim, sizeof victim, "%s/victim.txt", base);
    snprintf(planted, sizeof planted, "%s/model.safetensors", sticky);
    snprintf(own_link, sizeof own_link, "%s/mine.safetensors", sticky);
    snprintf(priv, sizeof priv, "%s/private.safetensors", base);
    snprintf(priv_link, sizeof priv_link, "%s/link.safetensors", base);
    mkdir(sticky, 0777);
    chmod(sticky, 01777); /* like /tmp */
    chmod(base, 0755);
    FILE *f = fopen(victim, "w");
    fputs("the victim's data", f);
    fclose(f);
    cft_tree *t = cft_tree_set(cft_tree_new(), "w", cft_ones(CFT_F32, (int64_t[]){4}, 1));

    TEST("a link planted by another user in a sticky directory is not followed") {
        pid_t pid = fork();
        if (pid == 0) { /* the second user plants the link */
            if (setgid(65534) || setuid(65534))
                _exit(2);
            _exit(symlink(victim, planted) ? 3 : 0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the second user could not plant it");
        struct stat ls;
        CHECK(lstat(planted, &ls) == 0 && S_ISLNK(ls.st_mode) && ls.st_uid == 65534);
        CHECK(cft_save_safetensors(planted, t, NULL, 0) != CFT_OK);
        CHECK_MSG(strstr(cft_last_error_message(), "cft_save_safetensors") &&
                      strstr(cft_last_error_message(), "not followed"),
                  "%s", cft_last_error_message());
        const char *now = slurp(victim);
        CHECK(now && !strcmp(now, "the victim's data"));
        /* cft_export writes through the same call */
        cft_aval av = {CFT_F32, 1, {4}};
        CHECK(cft_export(cft_fn_new(twice, NULL, 1, 1), &av, planted) != CFT_OK);
        now = slurp(victim);
        CHECK(now && !strcmp(now, "the victim's data"));
    }
    TEST("this user's own link there, and a link in a private directory, are followed") {
        CHECK_EQ(symlink(priv, own_link), 0);
        CHECK_EQ(cft_save_safetensors(own_link, t, NULL, 0), CFT_OK);
        cft_tree *back = cft_load_safetensors(priv, NULL, NULL);
        CHECK(!cft_tree_failed(back) && cft_tree_size(back) == 1);
        CHECK_EQ(symlink(priv, priv_link), 0);
        CHECK_EQ(cft_save_safetensors(priv_link, t, NULL, 0), CFT_OK);
        struct stat ls;
        CHECK(lstat(priv_link, &ls) == 0 && S_ISLNK(ls.st_mode)); /* the link stays a link */
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        return 1;
    return check_summary();
}
