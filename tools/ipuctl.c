/*
 * ipuctl — look at and administer an ipuofd daemon.
 *
 *   ipuctl [--server HOST:PORT | --admin-socket PATH] [--token T] [--admin-token T]
 *          [--timeout MS] COMMAND [ARGS]
 *
 * Commands come from one table of {name, usage, summary, handler}; each handler parses its
 * own options and returns the process exit status (sysexits.h). Results go to stdout,
 * errors to stderr as "ipuctl: <what failed>: <sentence>"; with --json stdout carries one
 * JSON document and nothing else. Only main() exits.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "human.h"
#include "ipuof/client.h"
#include "json.h"
#include "table.h"

#define MAX_RESET_IDS 4096

/* Global options, shared by every command. */
struct opts {
    const char *server;        /* NULL: IPUOF_SERVER, else 127.0.0.1:50052 */
    const char *admin_socket;  /* NULL: use server */
    const char *token;
    const char *admin_token;
    int timeout_ms;            /* -1: the library's defaults */
};

struct cmd {
    const char *name;
    const char *usage;
    const char *summary;
    int (*handler)(const struct opts *o, int argc, char **argv);
};

/* ---- errors and exit codes -------------------------------------------------------------- */

/* The exit status for a failed call: connecting says whether the failure came while
 * connecting (a timeout or a dropped connection there means the daemon is unreachable). */
static int
exit_code(int status, int connecting)
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

/* Prints "ipuctl: WHAT: SENTENCE" with the handle's sentence made terminal-safe. */
static void
report(const ipuof_client *c, int status, const char *what)
{
    char msg[4608];
    const char *text = ipuof_client_errmsg(c);

    human_sanitize(msg, sizeof msg, text[0] != '\0' ? text : ipuof_strerror(status));
    fprintf(stderr, "ipuctl: %s: %s\n", what, msg);
}

/* ---- connecting ------------------------------------------------------------------------- */

/* Connects as the global options say. Returns EX_OK with *out (caller frees with
 * ipuof_client_free()), or the exit status after printing why. */
static int
open_client_as(const struct opts *o, ipuof_client **out, int probe)
{
    char address[4200];
    const char *addr = o->server;
    ipuof_client *c;
    int rc;

    *out = NULL;
    c = ipuof_client_new();
    if (c == NULL) {
        fprintf(stderr, "ipuctl: out of memory\n");
        return EX_OSERR;
    }
    if (o->admin_socket != NULL) {
        snprintf(address, sizeof address, "unix:%s", o->admin_socket);
        addr = address;
    }
    rc = ipuof_client_set_name(c, "ipuctl");
    if (rc == IPUOF_OK && o->token != NULL)
        rc = ipuof_client_set_auth_token(c, o->token);
    if (rc == IPUOF_OK && o->admin_token != NULL)
        rc = ipuof_client_set_admin_token(c, o->admin_token);
    if (rc == IPUOF_OK && o->timeout_ms >= 0)
        rc = ipuof_client_set_timeouts(c, o->timeout_ms, o->timeout_ms);
    if (rc == IPUOF_OK)
        rc = probe ? ipuof_client_connect_probe(c, addr) : ipuof_client_connect(c, addr);
    if (rc != IPUOF_OK) {
        report(c, rc, "connect");
        ipuof_client_free(c);
        return exit_code(rc, 1);
    }
    *out = c;
    return EX_OK;
}

/* A client connected (with its hello) to the daemon o names; EX_OK or an exit code. */
static int
open_client(const struct opts *o, ipuof_client **out)
{
    return open_client_as(o, out, 0);
}

/* ---- status ----------------------------------------------------------------------------- */

/* Writes r to stdout as one JSON object and a newline (the format of ipuctl(8)). */
/* The daemon's V-IPU partitions (vipu create partition), for status. */
static struct ipuof_vipu_partition vparts[256];

/* The V-IPU partitions vparts[0..n) as JSON members (,"vipu_partitions":[...]). */
static void
print_vipu_json(size_t n)
{
    fputs(",\"vipu_partitions\":[", stdout);
    for (size_t i = 0; i < n; i++) {
        const struct ipuof_vipu_partition *v = &vparts[i];
        printf("%s{\"name\":", i > 0 ? "," : "");
        json_string(stdout, v->name);
        printf(",\"ipus\":%u,\"num_gcds\":%u,\"first_ipu\":%u,\"reconfigurable\":%s,"
               "\"state\":\"%s\",\"held\":%s}", v->size, v->num_gcds, v->first_ipu,
               v->reconfigurable ? "true" : "false",
               v->state == IPUOF_VIPU_PS_FAILED ? "PS_FAILED" : "PS_ACTIVE",
               v->held ? "true" : "false");
    }
    putchar(']');
}

/* The V-IPU partitions vparts[0..n) as a table after the IPUs' (nothing when none). */
static int
print_vipu_table(size_t n)
{
    static const char *const heads[] = {"V-IPU PARTITION", "IPUS", "GCDS", "RECONFIG", "STATE",
                                        "HELD"};
    static const int right[] = {0, 0, 1, 0, 0, 0};
    struct table t;

    if (n == 0)
        return EX_OK;
    table_init(&t, 6, heads, right);
    for (size_t i = 0; i < n; i++) {
        const struct ipuof_vipu_partition *v = &vparts[i];
        char ipus[32], gcds[16];
        const char *cells[6] = {v->name, ipus, gcds, v->reconfigurable ? "yes" : "no",
                                v->state == IPUOF_VIPU_PS_FAILED ? "PS_FAILED" : "PS_ACTIVE",
                                v->held ? "yes" : "no"};
        if (v->size == 1)
            snprintf(ipus, sizeof ipus, "%u", v->first_ipu);
        else
            snprintf(ipus, sizeof ipus, "%u-%u", v->first_ipu, v->first_ipu + v->size - 1);
        snprintf(gcds, sizeof gcds, "%u", v->num_gcds);
        if (table_add_row(&t, cells) < 0) {
            table_free(&t);
            fprintf(stderr, "ipuctl: out of memory\n");
            return EX_OSERR;
        }
    }
    table_print(&t, stdout);
    table_free(&t);
    return EX_OK;
}

static void
print_status_json(const ipuof_status_report *r, size_t nvparts)
{
    size_t n = ipuof_status_report_ipu_count(r);

    fputs("{\"server_version\":", stdout);
    json_string(stdout, ipuof_status_report_server_version(r));
    printf(",\"uptime_ms\":%" PRIu64 ",\"clients\":%u,\"waiting\":%u,"
           "\"host_memory_bytes\":%" PRIu64 ",\"ipus\":[",
           ipuof_status_report_uptime_ms(r), ipuof_status_report_clients(r),
           ipuof_status_report_waiting(r), ipuof_status_report_host_memory(r));
    for (size_t i = 0; i < n; i++) {
        struct ipuof_ipu_info in;

        if (ipuof_status_report_ipu(r, i, &in) != IPUOF_OK)
            continue;
        printf("%s{\"id\":%u,\"state\":", i > 0 ? "," : "", in.id);
        json_string(stdout, ipuof_ipu_state_name(in.state));
        printf(",\"tiles\":%u,\"memory_capacity_bytes\":%" PRIu64
               ",\"memory_used_bytes\":%" PRIu64 ",\"memory_stash_bytes\":%" PRIu64
               ",\"memory_offchip_bytes\":%" PRIu64 ",\"partition\":",
               in.tiles, in.memory_capacity_bytes, in.memory_used_bytes,
               in.memory_stash_bytes, in.memory_offchip_bytes);
        json_string_or_null(stdout, in.partition);
        fputs(",\"holder\":", stdout);
        if (in.held) {
            printf("{\"client_id\":%u,\"name\":", in.holder_client_id);
            json_string(stdout, in.holder_name);
            printf(",\"pid\":%u,\"peer\":", in.holder_pid);
            json_string(stdout, in.holder_peer);
            putchar('}');
        } else {
            fputs("null", stdout);
        }
        fputs(",\"loaded\":", stdout);
        json_string_or_null(stdout, in.loaded);
        printf(",\"steps_run\":%" PRIu64 ",\"host_memory_used_bytes\":%" PRIu64
               ",\"error\":", in.steps_run, in.host_memory_used_bytes);
        json_string_or_null(stdout, in.error);
        {
            int unrec = 0;
            int rec = ipuof_status_report_ipu_recovery(r, i, &unrec);
            fputs(",\"recovery\":", stdout);
            if (rec != IPUOF_RECOVERY_NONE)
                json_string(stdout, ipuof_recovery_name(rec));
            else
                fputs("null", stdout);
            printf(",\"unrecoverable\":%s", unrec ? "true" : "false");
        }
        putchar('}');
    }
    fputs("],\"job_processes\":[", stdout);
    for (size_t i = 0; i < ipuof_status_report_process_count(r); i++) {
        struct ipuof_job_process p;

        if (ipuof_status_report_process(r, i, &p) != IPUOF_OK)
            continue;
        printf("%s{\"partition\":", i > 0 ? "," : "");
        json_string(stdout, p.partition);
        printf(",\"process_id\":%u,\"num_processes\":%u,\"state\":", p.process_id,
               p.num_processes);
        json_string(stdout, p.state);
        fputs(",\"holder\":", stdout);
        if (p.present) {
            printf("{\"client_id\":%u,\"name\":", p.client_id);
            json_string(stdout, p.name);
            printf(",\"pid\":%u,\"peer\":", p.pid);
            json_string(stdout, p.peer);
            putchar('}');
        } else {
            fputs("null", stdout);
        }
        putchar('}');
    }
    fputs("],\"pod_hosts\":[", stdout);
    for (size_t i = 0; i < ipuof_status_report_pod_host_count(r); i++) {
        struct ipuof_pod_host h;

        if (ipuof_status_report_pod_host(r, i, &h) != IPUOF_OK)
            continue;
        printf("%s{\"name\":", i > 0 ? "," : "");
        json_string(stdout, h.name);
        fputs(",\"address\":", stdout);
        json_string(stdout, h.address);
        fputs(",\"state\":", stdout);
        json_string(stdout, ipuof_pod_host_state_name(h.state));
        printf(",\"ipus\":%u,\"free_ipus\":%u,\"seen_ms_ago\":%" PRIu64 ",\"error\":",
               h.num_ipus, h.free_ipus, h.seen_ms_ago);
        json_string_or_null(stdout, h.error);
        putchar('}');
    }
    putchar(']');
    print_vipu_json(nvparts);
    fputs("}\n", stdout);
}

/* Writes the processes of the daemon's jobs as a table (nothing when there are none).
 * Returns EX_OK, or EX_OSERR when out of memory (after saying so on stderr). */
static int
print_jobs_table(const ipuof_status_report *r)
{
    static const char *const heads[5] = {"PARTITION", "PROCESS", "STATE", "HOLDER", "CLIENT"};
    static const int right[5] = {0, 1, 0, 0, 1};
    size_t n = ipuof_status_report_process_count(r);
    struct table t;
    int rc = EX_OK;

    if (n == 0)
        return EX_OK;
    table_init(&t, 5, heads, right);
    for (size_t i = 0; i < n; i++) {
        struct ipuof_job_process p;
        char bufs[3][256];
        const char *cells[5];

        if (ipuof_status_report_process(r, i, &p) != IPUOF_OK)
            continue;
        cells[0] = p.partition;
        snprintf(bufs[0], 256, "%u of %u", p.process_id, p.num_processes);
        cells[1] = bufs[0];
        cells[2] = p.state;
        if (p.present)
            snprintf(bufs[1], 256, "%s[%u]@%s", p.name, p.pid, p.peer[0] ? p.peer : "?");
        else
            snprintf(bufs[1], 256, "-");
        cells[3] = bufs[1];
        if (p.present)
            snprintf(bufs[2], 256, "%u", p.client_id);
        else
            snprintf(bufs[2], 256, "-");
        cells[4] = bufs[2];
        if (table_add_row(&t, cells) != 0) {
            fprintf(stderr, "ipuctl: status: out of memory\n");
            rc = EX_OSERR;
            goto out;
        }
    }
    printf("jobs of several processes:\n");
    table_print(&t, stdout);
out:
    table_free(&t);
    return rc;
}

/* The hosts of the daemon's Pod as a table, then why each unreachable one is (nothing
 * without a Pod). EX_OK, or EX_OSERR when out of memory (said on stderr). */
static int
print_pod_table(const ipuof_status_report *r)
{
    static const char *const heads[5] = {"POD HOST", "ADDRESS", "STATE", "IPUS", "FREE"};
    static const int right[5] = {0, 0, 0, 1, 1};
    size_t n = ipuof_status_report_pod_host_count(r);
    struct table t;
    int rc = EX_OK;

    if (n == 0)
        return EX_OK;
    table_init(&t, 5, heads, right);
    for (size_t i = 0; i < n; i++) {
        struct ipuof_pod_host h;
        char ipus[16], freeb[16];
        const char *cells[5];

        if (ipuof_status_report_pod_host(r, i, &h) != IPUOF_OK)
            continue;
        snprintf(ipus, sizeof ipus, "%u", h.num_ipus);
        snprintf(freeb, sizeof freeb, "%u", h.free_ipus);
        cells[0] = h.name;
        cells[1] = h.address;
        cells[2] = ipuof_pod_host_state_name(h.state);
        cells[3] = h.state == IPUOF_POD_HOST_UNKNOWN ? "-" : ipus;
        cells[4] = h.state == IPUOF_POD_HOST_UNKNOWN ? "-" : freeb;
        if (table_add_row(&t, cells) != 0) {
            fprintf(stderr, "ipuctl: status: out of memory\n");
            rc = EX_OSERR;
            goto out;
        }
    }
    printf("pod:\n");
    table_print(&t, stdout);
    for (size_t i = 0; i < n; i++) {
        struct ipuof_pod_host h;
        char err[1024];

        if (ipuof_status_report_pod_host(r, i, &h) != IPUOF_OK || h.error[0] == '\0')
            continue;
        human_sanitize(err, sizeof err, h.error);
        printf("host %s: %s\n", h.name, err);
    }
out:
    table_free(&t);
    return rc;
}

/* Fills the cells of one table row from in; the strings live in bufs. */
static void
status_row(const struct ipuof_ipu_info *in, uint64_t host_limit, char bufs[][256],
           const char *cells[8])
{
    char used[32], cap[32], stash[32], off[32];
    size_t len;

    snprintf(bufs[0], 256, "%u", in->id);
    cells[0] = bufs[0];
    cells[1] = ipuof_ipu_state_name(in->state);
    cells[2] = in->partition[0] != '\0' ? in->partition : "-";
    if (in->held)
        snprintf(bufs[1], 256, "%s[%u]@%s", in->holder_name, in->holder_pid,
                 in->holder_peer[0] != '\0' ? in->holder_peer : "?");
    else
        snprintf(bufs[1], 256, "-");
    cells[3] = bufs[1];
    human_bytes(used, sizeof used, in->memory_used_bytes);
    human_bytes(cap, sizeof cap, in->memory_capacity_bytes);
    len = (size_t)snprintf(bufs[2], 256, "%s / %s", used, cap);
    if (in->memory_stash_bytes > 0 || in->memory_offchip_bytes > 0) {
        human_bytes(stash, sizeof stash, in->memory_stash_bytes);
        human_bytes(off, sizeof off, in->memory_offchip_bytes);
        snprintf(bufs[2] + len, 256 - len, " (stash %s, off chip %s)", stash, off);
    }
    cells[4] = bufs[2];
    cells[5] = in->loaded[0] != '\0' ? in->loaded : "-";
    snprintf(bufs[3], 256, "%" PRIu64, in->steps_run);
    cells[6] = bufs[3];
    if (in->host_memory_used_bytes > 0) {
        human_bytes(used, sizeof used, in->host_memory_used_bytes);
        human_bytes(cap, sizeof cap, host_limit);
        snprintf(bufs[4], 256, "%s / %s", used, cap);
    } else {
        snprintf(bufs[4], 256, "-");
    }
    cells[7] = bufs[4];
}

/* Writes r to stdout as a summary line, a table and one line per IPU in error. Returns
 * EX_OK, or EX_OSERR when out of memory (after saying so on stderr). */
static int
print_status_table(const ipuof_status_report *r)
{
    static const char *const heads[8] = {"IPU", "STATE", "PARTITION", "HOLDER",
                                         "MEMORY", "LOADED", "STEPS", "HOST"};
    static const int right[8] = {1, 0, 0, 0, 1, 0, 1, 1};
    size_t n = ipuof_status_report_ipu_count(r);
    struct table t;
    char uptime[32];
    char version[64];
    int rc = EX_OK;

    human_duration(uptime, sizeof uptime, ipuof_status_report_uptime_ms(r));
    human_sanitize(version, sizeof version, ipuof_status_report_server_version(r));
    printf("ipuofd %s, up %s, %u client%s, %u waiting attach%s\n", version, uptime,
           ipuof_status_report_clients(r), ipuof_status_report_clients(r) == 1 ? "" : "s",
           ipuof_status_report_waiting(r), ipuof_status_report_waiting(r) == 1 ? "" : "es");
    table_init(&t, 8, heads, right);
    for (size_t i = 0; i < n; i++) {
        struct ipuof_ipu_info in;
        char bufs[5][256];
        const char *cells[8];

        if (ipuof_status_report_ipu(r, i, &in) != IPUOF_OK)
            continue;
        status_row(&in, ipuof_status_report_host_memory(r), bufs, cells);
        if (table_add_row(&t, cells) != 0) {
            fprintf(stderr, "ipuctl: status: out of memory\n");
            rc = EX_OSERR;
            goto out;
        }
    }
    table_print(&t, stdout);
    for (size_t i = 0; i < n; i++) {
        struct ipuof_ipu_info in;
        char err[1024];
        int rec, unrec = 0;

        if (ipuof_status_report_ipu(r, i, &in) != IPUOF_OK || in.error[0] == '\0')
            continue;
        human_sanitize(err, sizeof err, in.error);
        rec = ipuof_status_report_ipu_recovery(r, i, &unrec);
        if (rec != IPUOF_RECOVERY_NONE)
            printf("IPU %u: %s\n  %s; needs %s (%s)\n", in.id, err,
                   unrec ? "unrecoverable" : "recoverable", ipuof_recovery_name(rec),
                   rec == IPUOF_RECOVERY_IPU_RESET ? "ipuctl reset --ipu, --partition or --all"
                   : rec == IPUOF_RECOVERY_FULL_RESET ? "ipuctl reset --all"
                   : "ipuctl reset --partition or --all");
        else
            printf("IPU %u: %s\n", in.id, err);
    }
    rc = print_jobs_table(r);
    if (rc == EX_OK)
        rc = print_pod_table(r);
out:
    table_free(&t);
    return rc;
}

/* ipuctl status [--json]. Returns the exit status. */
static int
cmd_status(const struct opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ipuof_client *c = NULL;
    ipuof_status_report *r = NULL;
    size_t nvparts = 0;
    int json = 0;
    int ch;
    int ex;
    int rc;

    optind = 0;
    while ((ch = getopt_long(argc, argv, "+jh", longopts, NULL)) != -1) {
        if (ch == 'j') {
            json = 1;
        } else if (ch == 'h') {
            printf("usage: ipuctl status [--json]\n");
            return EX_OK;
        } else {
            fprintf(stderr, "ipuctl: status: bad option '%s'\nusage: ipuctl status [--json]\n",
                    argv[optind - 1]);
            return EX_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ipuctl: status: unexpected argument '%s'\n"
                "usage: ipuctl status [--json]\n", argv[optind]);
        return EX_USAGE;
    }
    ex = open_client(o, &c);
    if (ex != EX_OK)
        goto out;
    rc = ipuof_status(c, &r);
    if (rc != IPUOF_OK) {
        report(c, rc, "status");
        ex = exit_code(rc, 0);
        goto out;
    }
    rc = ipuof_vipu_list(c, vparts, sizeof vparts / sizeof vparts[0], &nvparts, NULL);
    if (rc != IPUOF_OK) {
        report(c, rc, "status (V-IPU partitions)");
        ex = exit_code(rc, 0);
        goto out;
    }
    if (nvparts > sizeof vparts / sizeof vparts[0])
        nvparts = sizeof vparts / sizeof vparts[0];
    if (json)
        print_status_json(r, nvparts);
    else if ((ex = print_status_table(r)) == EX_OK)
        ex = print_vipu_table(nvparts);
    if (fflush(stdout) != 0) {
        perror("ipuctl: status: writing the output");
        ex = EX_IOERR;
    }
out:
    ipuof_status_report_free(r);
    ipuof_client_free(c);
    return ex;
}

/* ---- reset ------------------------------------------------------------------------------ */

#define RESET_USAGE "usage: ipuctl reset (--all | --ipu N | --partition NAME) [--force]\n"

/* Prints the ids a reset touched: "reset IPU 2" / "reset 4 IPUs: 0, 1, 2, 3". */
static void
print_reset(const unsigned *ids, size_t n)
{
    if (n == 0) {
        printf("nothing to reset\n");
        return;
    }
    if (n == 1) {
        printf("reset IPU %u\n", ids[0]);
        return;
    }
    printf("reset %zu IPUs:", n);
    for (size_t i = 0; i < n && i < MAX_RESET_IDS; i++)
        printf("%s %u", i > 0 ? "," : "", ids[i]);
    if (n > MAX_RESET_IDS)
        printf(" and %zu more", n - MAX_RESET_IDS);
    putchar('\n');
}

/* Parses a non-negative decimal IPU id; returns 0 on success. */
static int
parse_id(const char *s, unsigned *out)
{
    char *end;
    unsigned long v;

    if (s[0] < '0' || s[0] > '9')
        return -1;
    v = strtoul(s, &end, 10);
    if (*end != '\0' || v > 0xffffffffUL)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* ipuctl reset (--all | --ipu N | --partition NAME) [--force]. Returns the exit status. */
static int
cmd_reset(const struct opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"all", no_argument, NULL, 'a'},
        {"ipu", required_argument, NULL, 'i'},
        {"partition", required_argument, NULL, 'p'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    unsigned ids[MAX_RESET_IDS];
    ipuof_client *c = NULL;
    const char *partition = NULL;
    unsigned ipu = 0;
    int scope = -1;
    int scopes = 0;
    int force = 0;
    size_t n = 0;
    int ch;
    int ex;
    int rc;

    optind = 0;
    while ((ch = getopt_long(argc, argv, "+ai:p:fh", longopts, NULL)) != -1) {
        switch (ch) {
        case 'a':
            scope = IPUOF_RESET_ALL;
            scopes++;
            break;
        case 'i':
            if (parse_id(optarg, &ipu) != 0) {
                fprintf(stderr, "ipuctl: reset: --ipu wants an IPU id, not '%s'\n", optarg);
                return EX_USAGE;
            }
            scope = IPUOF_RESET_IPU;
            scopes++;
            break;
        case 'p':
            partition = optarg;
            scope = IPUOF_RESET_PARTITION;
            scopes++;
            break;
        case 'f':
            force = 1;
            break;
        case 'h':
            fputs(RESET_USAGE, stdout);
            return EX_OK;
        default:
            fprintf(stderr, "ipuctl: reset: bad option '%s'\n" RESET_USAGE, argv[optind - 1]);
            return EX_USAGE;
        }
    }
    if (optind != argc || scopes != 1) {
        fprintf(stderr, "ipuctl: reset: give exactly one of --all, --ipu N, --partition NAME\n"
                RESET_USAGE);
        return EX_USAGE;
    }
    ex = open_client(o, &c);
    if (ex != EX_OK)
        goto out;
    rc = ipuof_reset_ids(c, scope, ipu, partition, force, ids, MAX_RESET_IDS, &n);
    if (rc != IPUOF_OK) {
        report(c, rc, "reset");
        /* Hints only where the daemon's own sentence does not already give them. */
        if (rc == IPUOF_E_BUSY && !force && strstr(ipuof_client_errmsg(c), "--force") == NULL)
            fprintf(stderr, "ipuctl: reset: the IPUs are in use; add --force to reset them "
                    "anyway (their holders get IPUOF_E_DEVICE_RESET)\n");
        else if (rc == IPUOF_E_AUTH && strstr(ipuof_client_errmsg(c), "admin") == NULL)
            fprintf(stderr, "ipuctl: reset: resetting needs admin rights: use "
                    "--admin-socket PATH or --admin-token TOKEN\n");
        ex = exit_code(rc, 0);
        goto out;
    }
    print_reset(ids, n);
out:
    ipuof_client_free(c);
    return ex;
}

/* ---- fault ------------------------------------------------------------------------------ */

#define FAULT_USAGE \
    "usage: ipuctl fault inject (--ipu N | --partition NAME) --kind KIND [--at POINT]\n" \
    "                           [--after-runs K] [--count N] [--probability P --seed S]\n" \
    "       ipuctl fault list [--json]\n" \
    "       ipuctl fault clear [--id ID]\n" \
    "KIND: recoverable:IPU_RESET|LINK_RESET|PARTITION_RESET|FULL_RESET, unrecoverable,\n" \
    "      host-sync-timeout, fabric-disconnect; POINT: attach, compile, weights, run\n"

/* Parses a non-negative decimal below 2^32 (or 2^64 when wide) into *out; 0 or -1. */
static int
parse_num(const char *s, uint64_t *out, int wide)
{
    char *end;
    unsigned long long v;

    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (*end != '\0' || errno != 0 || (!wide && v > 0xffffffffULL))
        return -1;
    *out = v;
    return 0;
}

/* ipuctl fault inject ...: the options into *f. EX_OK or EX_USAGE (after saying why). */
static int
parse_inject(int argc, char **argv, struct ipuof_fault *f)
{
    static const struct option longopts[] = {
        {"ipu", required_argument, NULL, 'i'},
        {"partition", required_argument, NULL, 'p'},
        {"kind", required_argument, NULL, 'k'},
        {"at", required_argument, NULL, 'a'},
        {"after-runs", required_argument, NULL, 'A'},
        {"count", required_argument, NULL, 'c'},
        {"probability", required_argument, NULL, 'P'},
        {"seed", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int has_seed = 0, ch;
    uint64_t v;
    char *end;

    memset(f, 0, sizeof *f);
    optind = 0;
    while ((ch = getopt_long(argc, argv, "+i:p:k:a:A:c:P:s:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'i':
            if (parse_num(optarg, &v, 0) != 0) {
                fprintf(stderr, "ipuctl: fault: --ipu wants an IPU id, not '%s'\n", optarg);
                return EX_USAGE;
            }
            f->has_ipu = 1;
            f->ipu = (unsigned)v;
            break;
        case 'p':
        case 'k':
        case 'a': {
            char *dst = ch == 'p' ? f->partition : ch == 'k' ? f->kind : f->at;
            size_t len = ch == 'a' ? sizeof f->at : sizeof f->kind;
            if (strlen(optarg) >= len) {
                fprintf(stderr, "ipuctl: fault: '%s' is too long (at most %zu bytes)\n",
                        optarg, len - 1);
                return EX_USAGE;
            }
            memcpy(dst, optarg, strlen(optarg) + 1);
            break;
        }
        case 'A':
        case 'c':
            if (parse_num(optarg, &v, 0) != 0) {
                fprintf(stderr, "ipuctl: fault: --%s wants a count, not '%s'\n",
                        ch == 'A' ? "after-runs" : "count", optarg);
                return EX_USAGE;
            }
            if (ch == 'A')
                f->after_runs = (unsigned)v;
            else
                f->count = (unsigned)v;
            break;
        case 'P':
            f->probability = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(f->probability > 0.0 &&
                                                   f->probability <= 1.0)) {
                fprintf(stderr, "ipuctl: fault: --probability wants a chance in (0, 1], not "
                        "'%s'\n", optarg);
                return EX_USAGE;
            }
            break;
        case 's':
            if (parse_num(optarg, &v, 1) != 0) {
                fprintf(stderr, "ipuctl: fault: --seed wants a non-negative integer, not "
                        "'%s'\n", optarg);
                return EX_USAGE;
            }
            f->seed = v;
            has_seed = 1;
            break;
        case 'h':
            fputs(FAULT_USAGE, stdout);
            return -1;
        default:
            fprintf(stderr, "ipuctl: fault inject: bad option '%s'\n" FAULT_USAGE,
                    argv[optind - 1]);
            return EX_USAGE;
        }
    }
    if (optind != argc || f->kind[0] == '\0' || (f->has_ipu && f->partition[0] != '\0') ||
        (!f->has_ipu && f->partition[0] == '\0')) {
        fprintf(stderr, "ipuctl: fault inject: give --kind and exactly one of --ipu N, "
                "--partition NAME\n" FAULT_USAGE);
        return EX_USAGE;
    }
    if (f->probability > 0.0 && f->probability < 1.0 && !has_seed) {
        fprintf(stderr, "ipuctl: fault inject: --probability below 1 needs --seed S, so the "
                "faults come the same way every run\n");
        return EX_USAGE;
    }
    return EX_OK;
}

/* Prints the faults as a table, or as one JSON array. */
static void
print_faults(const struct ipuof_fault *fs, size_t n, int json)
{
    if (json)
        putchar('[');
    else if (n == 0)
        printf("no faults\n");
    else
        printf("%4s  %-12s %-28s %-8s %6s %6s %7s %6s %5s\n", "ID", "TARGET", "KIND", "AT",
               "AFTER", "COUNT", "PROB", "FIRED", "SEEN");
    for (size_t i = 0; i < n; i++) {
        const struct ipuof_fault *f = &fs[i];
        char target[96];
        if (f->has_ipu)
            snprintf(target, sizeof target, "ipu %u", f->ipu);
        else
            snprintf(target, sizeof target, "%s", f->partition[0] ? f->partition : "any");
        if (json) {
            printf("%s{\"id\":%u,\"ipu\":", i > 0 ? "," : "", f->id);
            if (f->has_ipu)
                printf("%u", f->ipu);
            else
                fputs("null", stdout);
            fputs(",\"partition\":", stdout);
            json_string_or_null(stdout, f->partition);
            fputs(",\"kind\":", stdout);
            json_string(stdout, f->kind);
            fputs(",\"at\":", stdout);
            json_string(stdout, f->at);
            printf(",\"after_runs\":%u,\"count\":%u,\"probability\":%g,\"seed\":%" PRIu64
                   ",\"fired\":%u,\"seen\":%u,\"state\":\"%s\"}", f->after_runs, f->count,
                   f->probability, f->seed, f->fired, f->seen,
                   f->fired >= f->count ? "fired" : "armed");
        } else {
            printf("%4u  %-12s %-28s %-8s %6u %6u %7g %6u %5u  %s\n", f->id, target, f->kind,
                   f->at, f->after_runs, f->count, f->probability, f->fired, f->seen,
                   f->fired >= f->count ? "fired" : "armed");
        }
    }
    if (json)
        fputs("]\n", stdout);
}

/* ipuctl fault inject|list|clear. Returns the exit status. */
static int
cmd_fault(const struct opts *o, int argc, char **argv)
{
    static struct ipuof_fault fs[256];
    struct ipuof_fault f;
    ipuof_client *c = NULL;
    const char *verb = argc > 1 ? argv[1] : "";
    unsigned id = 0;
    size_t n = 0;
    int json = 0;
    int ex, rc;

    if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0) {
        fputs(FAULT_USAGE, stdout);
        return EX_OK;
    }
    if (strcmp(verb, "inject") == 0) {
        ex = parse_inject(argc - 1, argv + 1, &f);
        if (ex != EX_OK)
            return ex < 0 ? EX_OK : ex;
    } else if (strcmp(verb, "list") == 0) {
        if (argc > 3 || (argc == 3 && strcmp(argv[2], "--json") != 0)) {
            fprintf(stderr, "ipuctl: fault list: unexpected argument '%s'\n" FAULT_USAGE,
                    argv[2]);
            return EX_USAGE;
        }
        json = argc == 3;
    } else if (strcmp(verb, "clear") == 0) {
        uint64_t v = 0;
        if (argc != 2 && (argc != 4 || strcmp(argv[2], "--id") != 0 ||
                          parse_num(argv[3], &v, 0) != 0 || v == 0)) {
            fprintf(stderr, "ipuctl: fault clear: give nothing (every fault) or --id ID (an id "
                    "ipuctl fault list shows)\n" FAULT_USAGE);
            return EX_USAGE;
        }
        id = (unsigned)v;
    } else {
        fprintf(stderr, "ipuctl: fault: %s '%s'; give inject, list or clear\n" FAULT_USAGE,
                verb[0] ? "unknown verb" : "no verb", verb);
        return EX_USAGE;
    }
    ex = open_client(o, &c);
    if (ex != EX_OK)
        goto out;
    if (verb[0] == 'i')
        rc = ipuof_fault_inject(c, &f, &id);
    else if (verb[0] == 'l')
        rc = ipuof_fault_list(c, fs, sizeof fs / sizeof fs[0], &n);
    else
        rc = ipuof_fault_clear(c, id, &n);
    if (rc != IPUOF_OK) {
        report(c, rc, verb[0] == 'i' ? "fault inject" : verb[0] == 'l' ? "fault list"
                                                                        : "fault clear");
        if (rc == IPUOF_E_AUTH && strstr(ipuof_client_errmsg(c), "admin") == NULL)
            fprintf(stderr, "ipuctl: fault: needs admin rights: use --admin-socket PATH or "
                    "--admin-token TOKEN\n");
        ex = rc == IPUOF_E_INVAL ? EX_USAGE : exit_code(rc, 0); /* the daemon refused the spec */
        goto out;
    }
    if (verb[0] == 'i')
        printf("armed fault %u: %s at %s\n", id, f.kind, f.at[0] ? f.at : "run");
    else if (verb[0] == 'l')
        print_faults(fs, n < sizeof fs / sizeof fs[0] ? n : sizeof fs / sizeof fs[0], json);
    else
        printf("cleared %zu fault%s\n", n, n == 1 ? "" : "s");
    if (fflush(stdout) != 0) {
        perror("ipuctl: fault: writing the output");
        ex = EX_IOERR;
    }
out:
    ipuof_client_free(c);
    return ex;
}

/* ---- health ----------------------------------------------------------------------------- */

/* ipuctl health: EX_OK when ready, EX_TEMPFAIL when live but not ready. */
static int
cmd_health(const struct opts *o, int argc, char **argv)
{
    ipuof_client *c = NULL;
    char reason[4200];
    int ready = 0;
    int ex;
    int rc;

    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        printf("usage: ipuctl health\n");
        return EX_OK;
    }
    if (argc != 1) {
        fprintf(stderr, "ipuctl: health: unexpected argument '%s'\nusage: ipuctl health\n",
                argv[1]);
        return EX_USAGE;
    }
    ex = open_client_as(o, &c, 1); /* health comes before the hello: no token needed */
    if (ex != EX_OK)
        goto out;
    rc = ipuof_health(c, &ready);
    if (rc != IPUOF_OK) {
        report(c, rc, "health");
        ex = exit_code(rc, 0);
        goto out;
    }
    if (ready) {
        printf("live, ready\n");
    } else {
        human_sanitize(reason, sizeof reason, ipuof_health_reason(c));
        printf("live, not ready: %s\n", reason);
        ex = EX_TEMPFAIL;
    }
out:
    ipuof_client_free(c);
    return ex;
}

/* ---- main ------------------------------------------------------------------------------- */

static const struct cmd cmds[] = {
    {"status", "status [--json]", "show every IPU, its state and who holds it", cmd_status},
    {"reset", "reset (--all | --ipu N | --partition NAME) [--force]",
     "return IPUs to free (admin); --force takes them from their holders", cmd_reset},
    {"fault", "fault (inject ... | list [--json] | clear [--id ID])",
     "inject faults into IPUs (admin): errors PopTorch programs recover from", cmd_fault},
    {"health", "health", "say whether the daemon is live and ready (exit 0 when ready)",
     cmd_health},
};

/* Writes the full usage, built from the command table, to f. */
static void
usage(FILE *f)
{
    fprintf(f, "usage: ipuctl [--server HOST:PORT | --admin-socket PATH] [--token T]\n"
               "              [--admin-token T] [--timeout MS] COMMAND [ARGS]\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(f, "  %s\n      %s\n", cmds[i].usage, cmds[i].summary);
    fprintf(f, "\noptions:\n"
               "  --server HOST:PORT   daemon address (default: $IPUOF_SERVER, else "
               "127.0.0.1:50052)\n"
               "  --admin-socket PATH  connect to the daemon's local admin socket\n"
               "  --token T            auth token, when the daemon requires one (default:\n"
               "                       $IPUOF_AUTH_TOKEN)\n"
               "  --admin-token T      admin token: allows reset over TCP (default:\n"
               "                       $IPUOF_ADMIN_TOKEN)\n"
               "  --timeout MS         connect and request timeout in ms (0: none)\n"
               "  --help, --version\n\n"
               "exit status: 0 ok, 64 usage, 65 no such IPU or partition, 69 daemon "
               "unreachable,\n"
               "  70 other failure, 75 IPU in use / not ready / too many connections, "
               "76 protocol\n"
               "  or version mismatch, 77 not authorised\n");
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"server", required_argument, NULL, 's'},
        {"admin-socket", required_argument, NULL, 'S'},
        {"token", required_argument, NULL, 't'},
        {"admin-token", required_argument, NULL, 'T'},
        {"timeout", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {.timeout_ms = -1};
    char *end;
    long v;
    int ch;

    opterr = 0;
    while ((ch = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            o.server = optarg;
            break;
        case 'S':
            o.admin_socket = optarg;
            break;
        case 't':
            o.token = optarg;
            break;
        case 'T':
            o.admin_token = optarg;
            break;
        case 'w':
            v = strtol(optarg, &end, 10);
            if (optarg[0] < '0' || optarg[0] > '9' || *end != '\0' || v > 86400000L) {
                fprintf(stderr, "ipuctl: --timeout wants milliseconds (0..86400000), "
                        "not '%s'\n", optarg);
                return EX_USAGE;
            }
            o.timeout_ms = (int)v;
            break;
        case 'h':
            usage(stdout);
            return EX_OK;
        case 'V':
            printf("ipuctl %s (libipuof-client %s)\n", IPUOF_VERSION_STR, ipuof_version());
            return EX_OK;
        default:
            fprintf(stderr, "ipuctl: bad option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return EX_USAGE;
        }
    }
    /* Tokens from the environment keep them out of ps(1); the auth token is read by the
     * library itself (IPUOF_AUTH_TOKEN). */
    if (o.admin_token == NULL) {
        o.admin_token = getenv("IPUOF_ADMIN_TOKEN");
        if (o.admin_token != NULL && o.admin_token[0] == '\0')
            o.admin_token = NULL;
    }
    if (o.server != NULL && o.admin_socket != NULL) {
        fprintf(stderr, "ipuctl: give --server or --admin-socket, not both\n");
        return EX_USAGE;
    }
    if (optind >= argc) {
        fprintf(stderr, "ipuctl: no command given\n");
        usage(stderr);
        return EX_USAGE;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(argv[optind], cmds[i].name) == 0)
            return cmds[i].handler(&o, argc - optind, argv + optind);
    }
    fprintf(stderr, "ipuctl: unknown command '%s'\n", argv[optind]);
    usage(stderr);
    return EX_USAGE;
}
