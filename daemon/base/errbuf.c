/*
 * errbuf.c — the daemon's error-buffer helper (see errbuf.h).
 */
#include "errbuf.h"

#include <stdarg.h>
#include <stdio.h>

void
errbuf_set(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
