/*
 * args.h — command-line helpers shared by the tools that talk to ipuofd: option values
 * and the message and exit status of a failed client call.
 *
 * prog is the tool's name as its messages start ("ipuof-run"); messages go to stderr.
 */
#ifndef IPUOF_TOOLS_ARGS_H
#define IPUOF_TOOLS_ARGS_H

#include "ipuof/client.h"

/* The largest count args_count() accepts. */
#define ARGS_COUNT_MAX (1u << 24)

/*
 * Parses s, the value of option opt, as a decimal count from min to ARGS_COUNT_MAX into
 * *out. 0, or -1 after printing "PROG: OPT expects a number from MIN to MAX, not 'S'"
 * (*out is then unchanged).
 */
int args_count(const char *prog, const char *opt, const char *s, unsigned min, unsigned *out);

/*
 * Prints "PROG: WHAT: SENTENCE (CODE)", SENTENCE being c's last error made terminal-safe
 * (rc's generic sentence when c is NULL or has none), and returns the exit status:
 * EX_UNAVAILABLE when the daemon could not be reached (IPUOF_E_IO, or a timeout or a
 * closed connection while connecting says so), else 1.
 */
int args_fail(const char *prog, const ipuof_client *c, const char *what, int rc,
              int connecting);

#endif /* IPUOF_TOOLS_ARGS_H */
