/*
 * ipuctl_conn.c — see ipuctl.h: connecting as ipuctl's global options say, and the exit
 * status and message of a failed call.
 */
#include <stdio.h>
#include <sysexits.h>

#include "human.h"
#include "ipuctl.h"

/* ---- errors and exit codes -------------------------------------------------------------- */

/* The exit status for a failed call: connecting says whether the failure came while
 * connecting (a timeout or a dropped connection there means the daemon is unreachable). */
int
ipuctl_exit_code(int status, int connecting)
{
    switch (status) {
    case IPUOF_OK:
        return EX_OK;
    case IPUOF_E_IO:
    case IPUOF_E_SHUTDOWN:
        return EX_UNAVAILABLE;
    case IPUOF_E_TIMEOUT:
        return connecting ? EX_UNAVAILABLE : EX_SOFTWARE;
    case IPUOF_E_CLOSED:
        return connecting ? EX_UNAVAILABLE : EX_PROTOCOL;
    case IPUOF_E_INVAL:
        return connecting ? EX_USAGE : EX_SOFTWARE;
    case IPUOF_E_AUTH:
        return EX_NOPERM;
    case IPUOF_E_NOTFOUND:
        return EX_DATAERR;
    case IPUOF_E_BUSY:
    case IPUOF_E_TOO_MANY:
        return EX_TEMPFAIL;
    case IPUOF_E_PROTO:
    case IPUOF_E_VERSION:
        return EX_PROTOCOL;
    default:
        return EX_SOFTWARE;
    }
}

/* Prints "PROG: WHAT: SENTENCE" with the handle's sentence (if any) made terminal-safe. */
void
ipuctl_report_as(const char *prog, const ipuof_client *c, int status, const char *what)
{
    char msg[4608];
    const char *text = c != NULL ? ipuof_client_errmsg(c) : "";

    human_sanitize(msg, sizeof msg, text[0] != '\0' ? text : ipuof_strerror(status));
    fprintf(stderr, "%s: %s: %s\n", prog, what, msg);
}

void
ipuctl_report(const ipuof_client *c, int status, const char *what)
{
    ipuctl_report_as("ipuctl", c, status, what);
}

/* ---- connecting ------------------------------------------------------------------------- */

/* Connects as the global options say. Returns EX_OK with *out (caller frees with
 * ipuof_client_free()), or the exit status after printing why. */
int
ipuctl_open_client_as(const struct ipuctl_opts *o, ipuof_client **out, int probe)
{
    char address[4200];
    const char *addr = o->server;
    const char *prog = o->prog != NULL ? o->prog : "ipuctl";
    ipuof_client *c;
    int rc;

    *out = NULL;
    c = ipuof_client_new();
    if (c == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return EX_OSERR;
    }
    if (o->admin_socket != NULL) {
        snprintf(address, sizeof address, "unix:%s", o->admin_socket);
        addr = address;
    }
    rc = ipuof_client_set_name(c, prog);
    if (rc == IPUOF_OK && o->token != NULL)
        rc = ipuof_client_set_auth_token(c, o->token);
    if (rc == IPUOF_OK && o->admin_token != NULL)
        rc = ipuof_client_set_admin_token(c, o->admin_token);
    if (rc == IPUOF_OK && o->timeout_ms >= 0)
        rc = ipuof_client_set_timeouts(c, o->timeout_ms, o->timeout_ms);
    if (rc == IPUOF_OK)
        rc = probe ? ipuof_client_connect_probe(c, addr) : ipuof_client_connect(c, addr);
    if (rc != IPUOF_OK) {
        ipuctl_report_as(prog, c, rc, "connect");
        ipuof_client_free(c);
        return ipuctl_exit_code(rc, 1);
    }
    *out = c;
    return EX_OK;
}

/* A client connected (with its hello) to the daemon o names; EX_OK or an exit code. */
int
ipuctl_open_client(const struct ipuctl_opts *o, ipuof_client **out)
{
    return ipuctl_open_client_as(o, out, 0);
}
