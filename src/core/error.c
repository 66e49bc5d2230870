/* error.c: error arrays and the thread's last error. cft__fail is the one
 * place every error is made: set a breakpoint here, or run with
 * CFT_ERRORS=abort to stop at the first error with a core dump. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "core/mem.h"

static _Thread_local cft_status last_code;
static _Thread_local char last_msg[1024];

static cft_array oom_error = {
    .kind = CFT_K_ERROR, .err_code = CFT_E_NOMEM, .err_msg = "cft: out of memory"};

cft_array *cft__oom(void) {
    last_code = CFT_E_NOMEM;
    snprintf(last_msg, sizeof last_msg, "%s", oom_error.err_msg);
    return &oom_error;
}

static _Thread_local const char *api_name;
static _Thread_local int api_depth;

int cft__api_enter(const char *name) {
    if (api_depth++ == 0)
        api_name = name;
    return 0;
}
void cft__api_leave(int *tok) {
    (void)tok;
    if (--api_depth == 0)
        api_name = NULL;
}
cft_api_state cft__api_suspend(void) {
    cft_api_state s = {api_name, api_depth};
    api_name = NULL, api_depth = 0;
    return s;
}
void cft__api_resume(cft_api_state s) {
    api_name = s.name, api_depth = s.depth;
}

cft_array *cft__fail(cft_status code, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    size_t at = 0;
    if (api_name) { /* name the public call first, unless the message does */
        size_t n = strlen(api_name);
        char head[128];
        va_list cp;
        va_copy(cp, ap);
        vsnprintf(head, sizeof head, fmt, cp);
        va_end(cp);
        if (strncmp(head, api_name, n) != 0 || head[n] != ':')
            at = (size_t)snprintf(buf, sizeof buf, "%s: ", api_name);
        if (at >= sizeof buf)
            at = 0;
    }
    vsnprintf(buf + at, sizeof buf - at, fmt, ap);
    va_end(ap);
    last_code = code;
    snprintf(last_msg, sizeof last_msg, "%s", buf);
    const char *mode = getenv("CFT_ERRORS");
    if (mode && strcmp(mode, "abort") == 0) {
        fprintf(stderr, "cft error (CFT_ERRORS=abort): %s\n", buf);
        abort();
    }
    cft_array *e = CFT_NEW(cft_array);
    if (!e)
        return cft__oom();
    e->kind = CFT_K_ERROR;
    e->err_code = code;
    e->err_msg = cft__strdup(buf);
    if (!e->err_msg)
        return cft__oom();
    return e;
}

cft_status cft__set_last(const cft_array *x) {
    if (!x) {
        last_code = CFT_E_ARG;
        snprintf(last_msg, sizeof last_msg, "cft: NULL array");
        return CFT_E_ARG;
    }
    if (x->kind != CFT_K_ERROR)
        return CFT_OK;
    last_code = x->err_code;
    snprintf(last_msg, sizeof last_msg, "%s", x->err_msg);
    return x->err_code;
}

bool cft_failed(const cft_array *x) {
    return !x || x->kind == CFT_K_ERROR;
}

cft_status cft_error_code(const cft_array *x) {
    if (!x)
        return CFT_E_ARG;
    return x->kind == CFT_K_ERROR ? x->err_code : CFT_OK;
}

const char *cft_error_message(const cft_array *x) {
    if (!x)
        return "cft: NULL array";
    return x->kind == CFT_K_ERROR ? x->err_msg : "";
}

cft_status cft_last_error(void) {
    return last_code;
}
const char *cft_last_error_message(void) {
    return last_msg;
}
void cft_clear_error(void) {
    last_code = CFT_OK;
    last_msg[0] = 0;
}

/* ---- concretization: reading a tracer's value ---- */

static _Thread_local cft_array *poison;

cft_array *cft__poison_swap(cft_array *p) {
    cft_array *old = poison;
    poison = p;
    return old;
}

cft_array *cft__concretization_error(const char *call, const cft_array *x) {
    char b[96];
    cft_array *e = cft__fail(
        CFT_E_TRACE,
        "%s: the value of a traced array (%s) is not known while tracing (inside a transform, "
        "cft_jit or a staged call): branch with cft_where / cft_cond / cft_switch, loop with "
        "cft_while_loop, or run a plain call op by op with cft_fn_uncached",
        call, cft_aval_str(&x->aval, b));
    if (!poison)
        poison = e;
    return e;
}
