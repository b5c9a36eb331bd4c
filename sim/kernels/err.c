/*
 * err.c — the library's error sentences (struct sim_err, sim_int.h): set one, or put
 * context in front of one. At the bottom of sim/: it uses nothing of the library, so every
 * file, isa.c and util.c included, may call it without an import cycle.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sim_int.h"

int
sim_err_set(struct sim_err *err, int code, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}

void
sim_err_prefix(struct sim_err *err, const char *fmt, ...)
{
    char out[sizeof(err->msg)];
    size_t hl, ol;
    va_list ap;

    if (err == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(out, sizeof(out), fmt, ap);
    va_end(ap);
    hl = strlen(out);
    ol = strnlen(err->msg, sizeof(err->msg));
    if (ol > sizeof(out) - 1 - hl)
        ol = sizeof(out) - 1 - hl;
    memcpy(out + hl, err->msg, ol);
    out[hl + ol] = '\0';
    memcpy(err->msg, out, hl + ol + 1);
}
