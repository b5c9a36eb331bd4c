/*
 * ipuctl_fault.c — ipuctl fault inject|list|clear (issue 22, docs/faults.md): the options
 * into a struct ipuof_fault, the library's call, the faults as a table or JSON.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "ipuctl.h"
#include "json.h"
#include "table.h"

#define FAULT_USAGE \
    "usage: ipuctl fault inject (--ipu N | --partition NAME | --host H) --kind KIND [--at POINT]\n" \
    "                           (--host H with --ipu or --partition: that host's; only\n" \
    "                           host H's own daemon arms it)\n" \
    "                           [--after-runs K] [--count N] [--probability P --seed S]\n" \
    "                           [--duration TIME] [--rearm-on-reset] [--wait TIME]\n" \
    "       ipuctl fault list [--json]\n" \
    "       ipuctl fault clear [--id ID]\n" \
    "KIND: recoverable:IPU_RESET|LINK_RESET|PARTITION_RESET|FULL_RESET, unrecoverable,\n" \
    "      soc-error, host-sync-timeout, hang, tile-oom, stream-oom, fabric-disconnect,\n" \
    "      daemon-kill, link:partition:PEER, link:latency=MS:PEER, link:reset-peer:PEER\n" \
    "      (a link fault needs no target: PEER is the other Pod host); POINT: attach, compile, load, weights, run, collective (a Pod\n" \
    "      job's, with recoverable:PARTITION_RESET); TIME: N[ms|s|m]\n"

/* Parses a time "N", "Nms", "Ns" or "Nm" (N a non-negative integer; bare N: milliseconds)
 * into *ms; 0 or -1. */
static int
parse_time_ms(const char *s, uint64_t *ms)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}};
    char *end;
    unsigned long long v;

    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].unit) == 0 && v <= (1ull << 53) / units[i].mult) {
            *ms = v * units[i].mult;
            return 0;
        }
    }
    return -1;
}

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
        {"host", required_argument, NULL, 'H'},
        {"kind", required_argument, NULL, 'k'},
        {"at", required_argument, NULL, 'a'},
        {"after-runs", required_argument, NULL, 'A'},
        {"count", required_argument, NULL, 'c'},
        {"probability", required_argument, NULL, 'P'},
        {"seed", required_argument, NULL, 's'},
        {"duration", required_argument, NULL, 'd'},
        {"wait", required_argument, NULL, 'w'},
        {"rearm-on-reset", no_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int has_seed = 0, ch;
    uint64_t v;
    char *end;

    memset(f, 0, sizeof *f);
    optind = 0;
    while ((ch = getopt_long(argc, argv, "+i:p:H:k:a:A:c:P:s:d:w:rh", longopts, NULL)) != -1) {
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
        case 'H':
        case 'k':
        case 'a': {
            char *dst = ch == 'p' ? f->partition : ch == 'H' ? f->host : ch == 'k' ? f->kind
                                                                                  : f->at;
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
        case 'd':
        case 'w':
            if (parse_time_ms(optarg, &v) != 0 || (ch == 'w' && v > 0xffffffffULL)) {
                fprintf(stderr, "ipuctl: fault: --%s wants a time such as 500ms, 30s or 2m, "
                        "not '%s'\n", ch == 'd' ? "duration" : "wait", optarg);
                return EX_USAGE;
            }
            if (ch == 'd')
                f->duration_ms = v;
            else
                f->wait_ms = (unsigned)v;
            break;
        case 'r':
            f->rearm_on_reset = 1;
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
        (!f->has_ipu && f->partition[0] == '\0' && f->host[0] == '\0' &&
         strncmp(f->kind, "link:", 5) != 0)) { /* a link fault's target is in its kind */
        fprintf(stderr, "ipuctl: fault inject: give --kind and --host H, or exactly one of "
                "--ipu N, --partition NAME (with --host H or not)\n" FAULT_USAGE);
        return EX_USAGE;
    }
    if (f->probability > 0.0 && f->probability < 1.0 && !has_seed) {
        fprintf(stderr, "ipuctl: fault inject: --probability below 1 needs --seed S, so the "
                "faults come the same way every run\n");
        return EX_USAGE;
    }
    return EX_OK;
}

/* "armed", "fired" (spent), or "expired" (its duration passed). */
static const char *
fault_state(const struct ipuof_fault *f)
{
    return f->fired >= f->count ? "fired" : f->expired ? "expired" : "armed";
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
            snprintf(target, sizeof target, "%s%sipu %u", f->host, f->host[0] ? " " : "", f->ipu);
        else if (f->partition[0])
            snprintf(target, sizeof target, "%s%s%s", f->host, f->host[0] ? " " : "",
                     f->partition);
        else
            snprintf(target, sizeof target, "%s", f->host[0] ? f->host : "any");
        if (json) {
            printf("%s{\"id\":%u,\"ipu\":", i > 0 ? "," : "", f->id);
            if (f->has_ipu)
                printf("%u", f->ipu);
            else
                fputs("null", stdout);
            fputs(",\"partition\":", stdout);
            json_string_or_null(stdout, f->partition);
            fputs(",\"host\":", stdout);
            json_string_or_null(stdout, f->host);
            fputs(",\"kind\":", stdout);
            json_string(stdout, f->kind);
            fputs(",\"at\":", stdout);
            json_string(stdout, f->at);
            printf(",\"after_runs\":%u,\"count\":%u,\"probability\":%g,\"seed\":%" PRIu64
                   ",\"duration_ms\":%" PRIu64 ",\"wait_ms\":%u,\"rearm_on_reset\":%s,"
                   "\"rearmed\":%u,\"fired\":%u,\"seen\":%u,\"state\":\"%s\"}", f->after_runs,
                   f->count, f->probability, f->seed, f->duration_ms, f->wait_ms,
                   f->rearm_on_reset ? "true" : "false", f->rearmed, f->fired, f->seen,
                   fault_state(f));
        } else {
            printf("%4u  %-12s %-28s %-8s %6u %6u %7g %6u %5u  %s%s\n", f->id, target, f->kind,
                   f->at, f->after_runs, f->count, f->probability, f->fired, f->seen,
                   fault_state(f), f->rearm_on_reset ? " (rearms on reset)" : "");
        }
    }
    if (json)
        fputs("]\n", stdout);
}

/* ipuctl fault inject|list|clear. Returns the exit status. */
int
ipuctl_fault(const struct ipuctl_opts *o, int argc, char **argv)
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
    ex = ipuctl_open_client(o, &c);
    if (ex != EX_OK)
        goto out;
    if (verb[0] == 'i')
        rc = ipuof_fault_inject(c, &f, &id);
    else if (verb[0] == 'l')
        rc = ipuof_fault_list(c, fs, sizeof fs / sizeof fs[0], &n);
    else
        rc = ipuof_fault_clear(c, id, &n);
    if (rc != IPUOF_OK) {
        ipuctl_report(c, rc, verb[0] == 'i' ? "fault inject" : verb[0] == 'l' ? "fault list"
                                                                        : "fault clear");
        if (rc == IPUOF_E_AUTH && strstr(ipuof_client_errmsg(c), "admin") == NULL)
            fprintf(stderr, "ipuctl: fault: needs admin rights: use --admin-socket PATH or "
                    "--admin-token TOKEN\n");
        ex = rc == IPUOF_E_INVAL ? EX_USAGE : ipuctl_exit_code(rc, 0); /* the daemon refused the spec */
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
