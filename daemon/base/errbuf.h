/*
 * errbuf.h — the daemon's one way to fill a caller's error buffer.
 *
 * Functions of the daemon that can fail without a connection to answer (configuration,
 * devices, the listeners) take `char *err, size_t errlen` and write one sentence there;
 * this is the helper they share.
 */
#ifndef IPUOFD_ERRBUF_H
#define IPUOFD_ERRBUF_H

#include <stddef.h>

/* Formats one sentence into err (truncated to errlen, always terminated). A NULL err or
 * a zero errlen writes nothing. */
void errbuf_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
