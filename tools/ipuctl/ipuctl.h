/*
 * ipuctl.h — what ipuctl's command files share (tools/ipuctl.c has the table and main;
 * tools/ipuctl/ipuctl_fault.c the fault command): the global options, connecting as they
 * say, and the exit status and message of a failed call. vipu (tools/vipu.c) connects and
 * reports through them too, under its own name.
 */
#ifndef IPUCTL_H
#define IPUCTL_H

#include "ipuof/client.h"

/* Global options, shared by every command. */
struct ipuctl_opts {
    const char *server;        /* NULL: IPUOF_SERVER, else 127.0.0.1:50052 */
    const char *admin_socket;  /* NULL: use server */
    const char *token;
    const char *admin_token;
    int timeout_ms;            /* -1: the library's defaults */
    const char *prog;          /* NULL: "ipuctl"; the client's name and messages' prefix */
};

/* The exit status (sysexits.h) for a failed call: connecting says whether the failure came
 * while connecting (a timeout or a dropped connection there means the daemon is
 * unreachable). */
int ipuctl_exit_code(int status, int connecting);

/* Prints "ipuctl: WHAT: SENTENCE" to stderr with the handle's sentence made terminal-safe. */
void ipuctl_report(const ipuof_client *c, int status, const char *what);

/* ipuctl_report for program prog ("PROG: WHAT: SENTENCE"); c may be NULL (then the
 * sentence is ipuof_strerror's). */
void ipuctl_report_as(const char *prog, const ipuof_client *c, int status, const char *what);

/* Connects as o says (probe: without the hello's version check, for health). Returns EX_OK
 * with *out (caller frees with ipuof_client_free()), or the exit status after printing
 * why. */
int ipuctl_open_client_as(const struct ipuctl_opts *o, ipuof_client **out, int probe);

/* ipuctl_open_client_as without probe. */
int ipuctl_open_client(const struct ipuctl_opts *o, ipuof_client **out);

/* ipuctl top [--once] [--interval S] [--count N] (argv[0] is "top"): the live view
 * (ipuctl_top.c). Returns the exit status. */
int ipuctl_top(const struct ipuctl_opts *o, int argc, char **argv);

/* ipuctl fault inject|list|clear ARGS (argv[0] is "fault"). Returns the exit status. */
int ipuctl_fault(const struct ipuctl_opts *o, int argc, char **argv);

#endif /* IPUCTL_H */
