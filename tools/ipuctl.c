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
#include "ipuctl.h"
#include "json.h"
#include "table.h"

#define MAX_RESET_IDS 4096
/* The global options, connecting and the exit codes: tools/ipuctl/ipuctl_conn.c (ipuctl.h);
 * the fault command: tools/ipuctl/ipuctl_fault.c. */

struct cmd {
    const char *name;
    const char *usage;
    const char *summary;
    int (*handler)(const struct ipuctl_opts *o, int argc, char **argv);
};

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

/* The simulator's level and the executable cache against its budget, as JSON members each
 * followed by a comma: "sim_isa" (null from a daemon that does not say), "cache_bytes",
 * "cache_budget_bytes", "arena_bytes", "arena_budget_bytes". */
static void
print_engine_json(const ipuof_status_report *r)
{
    uint64_t budget, used = ipuof_status_report_cache_bytes(r, &budget);

    fputs("\"sim_isa\":", stdout);
    json_string_or_null(stdout, ipuof_status_report_sim_isa(r));
    printf(",\"cache_bytes\":%" PRIu64 ",\"cache_budget_bytes\":%" PRIu64 ",", used, budget);
    used = ipuof_status_report_arena_bytes(r, &budget);
    printf("\"arena_bytes\":%" PRIu64 ",\"arena_budget_bytes\":%" PRIu64 ",", used, budget);
    {
        double hz;
        const char *t = ipuof_status_report_ipu_type(r, &hz);
        fputs("\"ipu_type\":", stdout);
        json_string_or_null(stdout, t[0] != '\0' ? t : NULL);
        printf(",\"clock_hz\":%.17g,", hz);
    }
}

/* The same as a line of the summary: "simulator kernels avx2, executable cache 12.0 MiB
 * of 1.0 GiB, arenas 4.0 MiB of 17.7 GiB" (nothing from a daemon that says neither). */
static void
print_engine_line(const ipuof_status_report *r)
{
    uint64_t budget, used = ipuof_status_report_cache_bytes(r, &budget);
    char isa[32], u[32], b[32];

    if (ipuof_status_report_sim_isa(r)[0] == '\0' && budget == 0)
        return;
    human_sanitize(isa, sizeof isa, ipuof_status_report_sim_isa(r));
    human_bytes(u, sizeof u, used);
    human_bytes(b, sizeof b, budget);
    printf("simulator kernels %s, executable cache %s of %s", isa[0] ? isa : "?", u, b);
    used = ipuof_status_report_arena_bytes(r, &budget);
    if (budget != 0) {
        human_bytes(u, sizeof u, used);
        human_bytes(b, sizeof b, budget);
        printf(", arenas %s of %s", u, b);
    }
    putchar('\n');
    {
        double hz;
        char t[32];
        human_sanitize(t, sizeof t, ipuof_status_report_ipu_type(r, &hz));
        if (t[0] != '\0')
            printf("simulated clock: %s IPUs at %.2f GHz (docs/cost-model.md)\n", t, hz / 1e9);
    }
}

static void
print_status_json(const ipuof_status_report *r, size_t nvparts)
{
    size_t n = ipuof_status_report_ipu_count(r);

    fputs("{\"server_version\":", stdout);
    json_string(stdout, ipuof_status_report_server_version(r));
    printf(",\"uptime_ms\":%" PRIu64 ",\"clients\":%u,\"waiting\":%u,"
           "\"host_memory_bytes\":%" PRIu64 ",", ipuof_status_report_uptime_ms(r),
           ipuof_status_report_clients(r), ipuof_status_report_waiting(r),
           ipuof_status_report_host_memory(r));
    print_engine_json(r);
    fputs("\"ipus\":[", stdout);
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
        fputs(",\"job_phase\":", stdout);
        json_string_or_null(stdout, ipuof_status_report_process_phase(r, i));
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
    static const char *const heads[6] = {"PARTITION", "PROCESS", "STATE", "HOLDER", "CLIENT",
                                         "JOB PHASE"};
    static const int right[6] = {0, 1, 0, 0, 1, 0};
    size_t n = ipuof_status_report_process_count(r);
    struct table t;
    int rc = EX_OK;

    if (n == 0)
        return EX_OK;
    table_init(&t, 6, heads, right);
    for (size_t i = 0; i < n; i++) {
        struct ipuof_job_process p;
        char bufs[3][256];
        const char *cells[6];
        const char *phase = ipuof_status_report_process_phase(r, i);

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
        cells[5] = phase[0] != '\0' ? phase : "?"; /* "?": a daemon that does not say */
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
    print_engine_line(r);
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
cmd_status(const struct ipuctl_opts *o, int argc, char **argv)
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
    ex = ipuctl_open_client(o, &c);
    if (ex != EX_OK)
        goto out;
    rc = ipuof_status(c, &r);
    if (rc != IPUOF_OK) {
        ipuctl_report(c, rc, "status");
        ex = ipuctl_exit_code(rc, 0);
        goto out;
    }
    rc = ipuof_vipu_list(c, vparts, sizeof vparts / sizeof vparts[0], &nvparts, NULL);
    if (rc != IPUOF_OK) {
        ipuctl_report(c, rc, "status (V-IPU partitions)");
        ex = ipuctl_exit_code(rc, 0);
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
cmd_reset(const struct ipuctl_opts *o, int argc, char **argv)
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
    ex = ipuctl_open_client(o, &c);
    if (ex != EX_OK)
        goto out;
    rc = ipuof_reset_ids(c, scope, ipu, partition, force, ids, MAX_RESET_IDS, &n);
    if (rc != IPUOF_OK) {
        ipuctl_report(c, rc, "reset");
        /* Hints only where the daemon's own sentence does not already give them. */
        if (rc == IPUOF_E_BUSY && !force && strstr(ipuof_client_errmsg(c), "--force") == NULL)
            fprintf(stderr, "ipuctl: reset: the IPUs are in use; add --force to reset them "
                    "anyway (their holders get IPUOF_E_DEVICE_RESET)\n");
        else if (rc == IPUOF_E_AUTH && strstr(ipuof_client_errmsg(c), "admin") == NULL)
            fprintf(stderr, "ipuctl: reset: resetting needs admin rights: use "
                    "--admin-socket PATH or --admin-token TOKEN\n");
        ex = ipuctl_exit_code(rc, 0);
        goto out;
    }
    print_reset(ids, n);
out:
    ipuof_client_free(c);
    return ex;
}


/* ---- health ----------------------------------------------------------------------------- */

/* ipuctl health: EX_OK when ready, EX_TEMPFAIL when live but not ready. */
static int
cmd_health(const struct ipuctl_opts *o, int argc, char **argv)
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
    ex = ipuctl_open_client_as(o, &c, 1); /* health comes before the hello: no token needed */
    if (ex != EX_OK)
        goto out;
    rc = ipuof_health(c, &ready);
    if (rc != IPUOF_OK) {
        ipuctl_report(c, rc, "health");
        ex = ipuctl_exit_code(rc, 0);
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
     "inject faults into IPUs (admin): errors PopTorch programs recover from", ipuctl_fault},
    {"health", "health", "say whether the daemon is live and ready (exit 0 when ready)",
     cmd_health},
    {"top", "top [--once] [--interval SECONDS] [--count N]",
     "a live view refreshed every second: IPUs, holders, utilisation, memory, steps/s, the "
     "Pod", ipuctl_top},
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
    struct ipuctl_opts o = {.timeout_ms = -1};
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
