/* blas_core.c: OpenBLAS's kernels matched to the CPU cft runs on.
 *
 * Debian's OpenBLAS (DYNAMIC_ARCH) picks its kernels by the CPU model at
 * load time, and a model newer than the library falls back to its oldest
 * kernels: 0.3.21 runs its SSE3 "Prescott" kernels on Intel Emerald Rapids
 * (family 6 model 207), 4.8x slower on a 512^3 SGEMM than its AVX-512
 * ones. OpenBLAS chooses again when asked (gotoblas_dynamic_quit, then
 * gotoblas_dynamic_init, which honours OPENBLAS_CORETYPE), so at load time
 * cft compares the core OpenBLAS named with the vector units the CPU
 * reports (cpuid, the OS's register state included) and, when OpenBLAS
 * chose a core older than the CPU (no AVX2 kernels on a CPU with AVX2, no
 * AVX-512 kernels on a CPU with AVX-512), makes it load the newest kernels
 * the CPU can run, and says so once on stderr. Nothing happens when the
 * user set OPENBLAS_CORETYPE (their choice stands), when the BLAS is not a
 * DYNAMIC_ARCH OpenBLAS (the symbols are looked up, not linked), or with
 * CFT_BLAS_CORE=keep. */
#include "core/blas_core.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* the vector level of an OpenBLAS core name: 0 SSE only, 1 AVX, 2 AVX2
 * and FMA, 3 AVX-512; -1 for a name this table does not know (left alone) */
static int core_level(const char *name) {
    static const struct {
        const char *name;
        int level;
    } cores[] = {
        {"Katmai", 0},       {"Coppermine", 0},     {"Northwood", 0},  {"Prescott", 0},
        {"Banias", 0},       {"Atom", 0},           {"Core2", 0},      {"Penryn", 0},
        {"Dunnington", 0},   {"Nehalem", 0},        {"Athlon", 0},     {"Opteron", 0},
        {"Opteron_SSE3", 0}, {"Barcelona", 0},      {"Nano", 0},       {"Bobcat", 0},
        {"Sandybridge", 1},  {"Bulldozer", 1},      {"Piledriver", 1}, {"Steamroller", 1},
        {"Excavator", 1},    {"Haswell", 2},        {"Zen", 2},        {"SkylakeX", 3},
        {"Cooperlake", 3},   {"SapphireRapids", 3},
    };
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
        if (!strcasecmp(name, cores[i].name))
            return cores[i].level;
    return -1;
}

/* the CPU's level, as core_level counts (what OpenBLAS's kernels of that
 * level need: SkylakeX's use AVX-512 F, BW, DQ and VL) */
static int cpu_level(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return 3;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 2;
    if (__builtin_cpu_supports("avx"))
        return 1;
    return 0;
}

/* OpenBLAS's core for a level on this CPU */
static const char *core_for(int level) {
    switch (level) {
    case 3:
        return "SkylakeX";
    case 2:
        return __builtin_cpu_is("amd") ? "Zen" : "Haswell";
    case 1:
        return "Sandybridge";
    default:
        return "Prescott";
    }
}

const char *cft__blas_cpu_core(void) {
    return core_for(cpu_level());
}

typedef char *(*corename_fn)(void);
typedef void (*dyn_fn)(void);

static struct {
    corename_fn corename;
    dyn_fn init, quit;
} ob;

static void find_openblas(void) {
    *(void **)&ob.corename = dlsym(RTLD_DEFAULT, "openblas_get_corename");
    *(void **)&ob.init = dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
    *(void **)&ob.quit = dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char done_note[200];

const char *cft__blas_core(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, find_openblas);
    return ob.corename ? ob.corename() : NULL;
}

bool cft__blas_force_core(const char *name) {
    cft__blas_core();
    if (!ob.init || !ob.quit || !name)
        return false;
    pthread_mutex_lock(&mu);
    /* gotoblas_dynamic_init reads the name from the environment only */
    const char *old = getenv("OPENBLAS_CORETYPE");
    char *saved = old ? strdup(old) : NULL;
    setenv("OPENBLAS_CORETYPE", name, 1);
    ob.quit();
    ob.init();
    if (saved) {
        setenv("OPENBLAS_CORETYPE", saved, 1);
        free(saved);
    } else {
        unsetenv("OPENBLAS_CORETYPE");
    }
    pthread_mutex_unlock(&mu);
    const char *now = ob.corename ? ob.corename() : NULL;
    return now && !strcasecmp(now, name);
}

const char *cft__blas_match_cpu(void) {
    const char *env = getenv("CFT_BLAS_CORE");
    if ((env && !strcmp(env, "keep")) || getenv("OPENBLAS_CORETYPE"))
        return NULL;
    const char *cur = cft__blas_core();
    if (!cur || !ob.init || !ob.quit)
        return NULL;
    int have = core_level(cur), can = cpu_level();
    if (have < 0 || have >= can)
        return NULL;
    char was[64];
    snprintf(was, sizeof was, "%s", cur);
    const char *want = core_for(can);
    bool ok = cft__blas_force_core(want);
    snprintf(done_note, sizeof done_note,
             ok ? "cft: OpenBLAS chose its %s kernels on a CPU with %s (it does not know this "
                  "model); switched it to its %s kernels (OPENBLAS_CORETYPE chooses; "
                  "CFT_BLAS_CORE=keep keeps OpenBLAS's choice)\n"
                : "cft: OpenBLAS chose its %s kernels on a CPU with %s and could not be "
                  "switched to %s; matrix products run slower than this CPU allows "
                  "(set OPENBLAS_CORETYPE)\n",
             was,
             can == 3   ? "AVX-512"
             : can == 2 ? "AVX2"
                        : "AVX",
             want);
    fputs(done_note, stderr);
    return done_note;
}

/* at load time, before any product: libopenblas (a dependency) has run its
 * own constructor by now */
__attribute__((constructor)) static void match_at_load(void) {
    cft__blas_match_cpu();
}
