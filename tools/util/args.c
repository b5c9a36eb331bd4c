/*
 * args.c — command-line helpers shared by the tools (see args.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sysexits.h>

#include "args.h"
#include "human.h"

int
args_count(const char *prog, const char *opt, const char *s, unsigned min, unsigned *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min ||
        v > ARGS_COUNT_MAX) {
        fprintf(stderr, "%s: %s expects a number from %u to %u, not '%s'\n", prog, opt, min,
                ARGS_COUNT_MAX, s);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

int
args_fail(const char *prog, const ipuof_client *c, const char *what, int rc, int connecting)
{
    char msg[4608];
    const char *text = c != NULL ? ipuof_client_errmsg(c) : "";

    human_sanitize(msg, sizeof msg, text[0] != '\0' ? text : ipuof_strerror(rc));
    fprintf(stderr, "%s: %s: %s (%s)\n", prog, what, msg, ipuof_status_name(rc));
    if (rc == IPUOF_E_IO || (connecting && (rc == IPUOF_E_TIMEOUT || rc == IPUOF_E_CLOSED)))
        return EX_UNAVAILABLE;
    return 1;
}
