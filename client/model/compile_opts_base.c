/*
 * compile_opts_base.c — what the setters of the compile options handle share, below both
 * compile_opts.c (the options) and compile_opts_optim.c (the optimizer): begin a setter
 * (clearing the handle's last refusal), copy a name with its length checked, make room in
 * a capped array. A leaf: it calls only err.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* Records a refusal on h (when not NULL) and returns code. */
#define fail(h, code, ...) \
    ((h) != NULL ? ipuof_err_info_set(&(h)->err, (code), "client", __VA_ARGS__) : (code))

/* IPUOF_OK when h can be set (clearing its last refusal), else IPUOF_E_INVAL. */
int
ipuof_copts_begin(ipuof_compile_opts *h)
{
    if (h == NULL)
        return IPUOF_E_INVAL;
    memset(&h->err, 0, sizeof h->err);
    return IPUOF_OK;
}

/* A copy of s (1 to IPUOF_DEFAULT_MAX_STRING bytes) in *out, caller-owned; what names it. */
int
ipuof_copts_copy_name(ipuof_compile_opts *h, const char *s, const char *what, char **out)
{
    size_t n = s != NULL ? strlen(s) : 0;

    if (n == 0)
        return fail(h, IPUOF_E_INVAL, "%s needs a name of 1 to %u bytes, not %s", what,
                    IPUOF_DEFAULT_MAX_STRING, s == NULL ? "NULL" : "\"\"");
    if (n > IPUOF_DEFAULT_MAX_STRING)
        return fail(h, IPUOF_E_INVAL, "%s is %zu bytes long; the limit is %u", what, n,
                    IPUOF_DEFAULT_MAX_STRING);
    *out = strdup(s);
    return *out != NULL ? IPUOF_OK : fail(h, IPUOF_E_NOMEM, "out of memory for %s", what);
}

/* Makes room for one more entry of an array of *n entries of size bytes, at most max. */
int
ipuof_copts_grow(ipuof_compile_opts *h, void **arr, size_t n, size_t size, size_t max,
                 const char *what)
{
    void *p;

    if (n >= max)
        return fail(h, IPUOF_E_INVAL, "%zu %s given; the limit is %zu", n + 1, what, max);
    p = realloc(*arr, (n + 1) * size);
    if (p == NULL)
        return fail(h, IPUOF_E_NOMEM, "out of memory for %zu %s", n + 1, what);
    *arr = p;
    return IPUOF_OK;
}
