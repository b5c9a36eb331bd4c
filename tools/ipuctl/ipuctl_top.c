/*
 * ipuctl_top.c — ipuctl top: a live view of the daemon, refreshed every interval as
 * Graphcore's gc-monitor does: each IPU's state, holder, utilisation (host and simulated
 * clock), memory, steps per second, and the Pod's hosts. Rates are the difference of two
 * status reports over the time between them (ipuof_status_report_ipu_busy, steps_run).
 * --once prints one frame (two reports an interval apart) without clearing the screen.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "human.h"
#include "ipuctl.h"

#define TOP_USAGE "usage: ipuctl top [--once] [--interval SECONDS] [--count N]\n"
#define TOP_MAX_IPUS 256

/* One sample: the report and when it was taken (monotonic seconds). */
struct top_sample {
    ipuof_status_report *r;
    double t;
};

static volatile sig_atomic_t top_stop;

static void
on_signal(int sig)
{
    (void)sig;
    top_stop = 1;
}

static double
mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleeps s seconds, or less when a signal asks to stop. */
static void
nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

    while (!top_stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The IPU of id in r (by id, as IPUs keep their ids between reports), or -1. */
static long
find_ipu(const ipuof_status_report *r, unsigned id)
{
    struct ipuof_ipu_info x;

    for (size_t i = 0; r != NULL && i < ipuof_status_report_ipu_count(r); i++)
        if (ipuof_status_report_ipu(r, i, &x) == IPUOF_OK && x.id == id)
            return (long)i;
    return -1;
}

/* The summary lines: the daemon, its clients, its queue and cache. */
static void
print_head(const char *where, const ipuof_status_report *r)
{
    char up[32], used[32], budget[32];
    uint64_t cap = 0, cache = ipuof_status_report_cache_bytes(r, &cap);

    human_duration(up, sizeof up, ipuof_status_report_uptime_ms(r));
    human_bytes(used, sizeof used, cache);
    human_bytes(budget, sizeof budget, cap);
    printf("ipuofd %s at %s, up %s: %u client%s, %u waiting, cache %s of %s\n\n",
           ipuof_status_report_server_version(r), where, up, ipuof_status_report_clients(r),
           ipuof_status_report_clients(r) == 1 ? "" : "s", ipuof_status_report_waiting(r),
           used, budget);
}

/* One line per IPU: rates over cur - prev (prev may be NULL: rates shown as "-"). */
static void
print_ipus(const struct top_sample *prev, const struct top_sample *cur)
{
    size_t n = ipuof_status_report_ipu_count(cur->r);
    double dt = prev != NULL ? cur->t - prev->t : 0;

    printf("%-4s %-9s %-10s %-28s %6s %6s %-21s %8s %10s\n", "IPU", "STATE", "PARTITION",
           "HOLDER", "HOST%", "SIM%", "MEMORY", "STEPS/S", "STEPS");
    for (size_t i = 0; i < n; i++) {
        struct ipuof_ipu_info x, px;
        uint64_t bh = 0, bs = 0, pbh = 0, pbs = 0;
        char holder[64] = "-", part[32], mem[64], a[24], b[24], uh[16] = "-", us[16] = "-",
             sps[24] = "-";
        long j;

        if (ipuof_status_report_ipu(cur->r, i, &x) != IPUOF_OK)
            continue;
        ipuof_status_report_ipu_busy(cur->r, i, &bh, &bs);
        j = prev != NULL ? find_ipu(prev->r, x.id) : -1;
        if (j >= 0 && dt > 0 && ipuof_status_report_ipu(prev->r, (size_t)j, &px) == IPUOF_OK) {
            ipuof_status_report_ipu_busy(prev->r, (size_t)j, &pbh, &pbs);
            if (bh >= pbh)
                snprintf(uh, sizeof uh, "%.1f", (double)(bh - pbh) / 1e4 / dt);
            if (bs >= pbs)
                snprintf(us, sizeof us, "%.1f", (double)(bs - pbs) / 1e4 / dt);
            /* A reset starts steps at 0 again: no rate across it. */
            if (x.steps_run >= px.steps_run)
                snprintf(sps, sizeof sps, "%.1f", (double)(x.steps_run - px.steps_run) / dt);
        }
        if (x.held) {
            char name[40];
            human_sanitize(name, sizeof name, x.holder_name);
            snprintf(holder, sizeof holder, "%s[%u]", name, x.holder_pid);
        }
        human_sanitize(part, sizeof part, x.partition[0] ? x.partition : "-");
        human_bytes(a, sizeof a, x.memory_used_bytes);
        human_bytes(b, sizeof b, x.memory_capacity_bytes);
        snprintf(mem, sizeof mem, "%s / %s", a, b);
        printf("%-4u %-9s %-10.10s %-28.28s %6s %6s %-21s %8s %10llu\n", x.id,
               ipuof_ipu_state_name(x.state), part, holder, uh, us, mem, sps,
               (unsigned long long)x.steps_run);
    }
}

/* The Pod's hosts, when the daemon has a Pod. */
static void
print_pod(const ipuof_status_report *r)
{
    size_t n = ipuof_status_report_pod_host_count(r);

    if (n == 0)
        return;
    printf("\n%-16s %-12s %-24s %10s\n", "POD HOST", "STATE", "ADDRESS", "FREE IPUS");
    for (size_t i = 0; i < n; i++) {
        struct ipuof_pod_host h;
        char name[32], addr[64], ipus[24];
        if (ipuof_status_report_pod_host(r, i, &h) != IPUOF_OK)
            continue;
        human_sanitize(name, sizeof name, h.name);
        human_sanitize(addr, sizeof addr, h.address);
        snprintf(ipus, sizeof ipus, "%u of %u", h.free_ipus, h.num_ipus);
        printf("%-16s %-12s %-24s %10s\n", name, ipuof_pod_host_state_name(h.state), addr,
               h.state == IPUOF_POD_HOST_UNKNOWN ? "-" : ipus);
    }
}

/* Parses the options; -1 to go on, or the exit status (--help, a bad option). */
static int
top_args(int argc, char **argv, int *once, double *interval, long *count)
{
    static const struct option longopts[] = {
        {"once", no_argument, NULL, '1'},
        {"interval", required_argument, NULL, 'i'},
        {"count", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char *end;
    int ch;

    optind = 0;
    while ((ch = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        if (ch == '1') {
            *once = 1;
        } else if (ch == 'i') {
            *interval = strtod(optarg, &end);
            if (*end != '\0' || !(*interval >= 0.1 && *interval <= 3600)) {
                fprintf(stderr, "ipuctl: top: --interval wants seconds from 0.1 to 3600, "
                        "not '%s'\n", optarg);
                return EX_USAGE;
            }
        } else if (ch == 'n') {
            *count = strtol(optarg, &end, 10);
            if (*end != '\0' || *count < 1) {
                fprintf(stderr, "ipuctl: top: --count wants a number of frames >= 1, "
                        "not '%s'\n", optarg);
                return EX_USAGE;
            }
        } else if (ch == 'h') {
            printf(TOP_USAGE);
            return EX_OK;
        } else {
            fprintf(stderr, "ipuctl: top: bad option '%s'\n" TOP_USAGE, argv[optind - 1]);
            return EX_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ipuctl: top: unexpected argument '%s'\n" TOP_USAGE, argv[optind]);
        return EX_USAGE;
    }
    return -1;
}

/* Takes one sample into *s (its old report freed); the status or the daemon's error. */
static int
take(ipuof_client *c, struct top_sample *s)
{
    ipuof_status_report_free(s->r);
    s->r = NULL;
    s->t = mono_s();
    return ipuof_status(c, &s->r);
}

int
ipuctl_top(const struct ipuctl_opts *o, int argc, char **argv)
{
    struct top_sample prev = {NULL, 0}, cur = {NULL, 0};
    const char *where = o->admin_socket ? o->admin_socket
                        : o->server     ? o->server
                        : getenv("IPUOF_SERVER") ? getenv("IPUOF_SERVER")
                                                 : "127.0.0.1:50052";
    ipuof_client *c = NULL;
    double interval = 1.0;
    long count = 0, frames = 0;
    int once = 0, ex, rc;

    ex = top_args(argc, argv, &once, &interval, &count);
    if (ex >= 0)
        return ex;
    ex = ipuctl_open_client(o, &c);
    if (ex != EX_OK)
        return ex;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    rc = take(c, &prev);
    while (rc == IPUOF_OK && !top_stop) {
        nap(interval);
        if (top_stop)
            break;
        rc = take(c, &cur);
        if (rc != IPUOF_OK)
            break;
        if (!once)
            fputs("\033[H\033[2J", stdout); /* home, clear: one frame per screen */
        print_head(where, cur.r);
        print_ipus(&prev, &cur);
        print_pod(cur.r);
        fflush(stdout);
        if (once || (count > 0 && ++frames >= count))
            break;
        struct top_sample t = prev;
        prev = cur;
        cur = t;
    }
    if (rc != IPUOF_OK) {
        ipuctl_report(c, rc, "top");
        ex = ipuctl_exit_code(rc, 0);
    }
    ipuof_status_report_free(prev.r);
    ipuof_status_report_free(cur.r);
    ipuof_client_free(c);
    return ex;
}
