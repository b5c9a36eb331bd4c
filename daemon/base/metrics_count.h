/*
 * metrics_count.h — the counters behind the daemon's Prometheus page (metrics.h): what the
 * daemon does not keep itself, each counted at one place (requests in the dispatch table,
 * errors in conn_send_error, wire bytes in the frame reader and writer, runs in run_done,
 * attach waits where the attach reply is sent, the Pod's all-reduce time where it runs).
 * A leaf: it calls nothing of the daemon, so conn.c and the request code count without
 * depending on the page (metrics.c), which reads connections, IPUs and the Pod at scrape
 * time. The struct is shown for metrics.c's page; everyone else uses the functions.
 *
 * Threading: everything runs on the event-loop thread except metrics_collective(), which
 * workers call (an atomic, process-wide counter: one daemon per process).
 */
#ifndef IPUOFD_METRICS_COUNT_H
#define IPUOFD_METRICS_COUNT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct srv;
struct evhttp;
struct sim_cost_report;

#define MET_MAX_REQS 64          /* request types (the dispatch table has fewer) */
#define MET_MAX_CODES 64         /* status codes counted by number; others under "other" */
#define MET_NBUCKETS 14

struct met_hist {
    uint64_t bucket[MET_NBUCKETS]; /* not cumulative: observations in (bounds[i-1], bounds[i]] */
    uint64_t count;
    double sum;
};

struct metrics {
    struct srv *srv;
    struct evhttp *http;
    char addr[300];
    struct {
        const char *name;
        uint64_t n;
    } req[MET_MAX_REQS];
    unsigned nreq;
    uint64_t errors[MET_MAX_CODES + 1]; /* [MET_MAX_CODES]: codes beyond */
    uint64_t bytes_in, bytes_out;
    uint64_t runs;
    struct met_hist run_seconds, attach_wait;
    double busy_host[CFG_MAX_IPUS], busy_sim[CFG_MAX_IPUS]; /* seconds */
    uint64_t attaches;
};

/* Upper bounds (seconds) of the run latency and attach wait histograms' buckets. */
extern const double metrics_bounds[MET_NBUCKETS];

/* One request of the dispatch table's entry name (a static string) was served. NULL m:
 * no-op (as for every counter below). */
void metrics_request(struct metrics *m, const char *name);

/* An error reply of status code was sent. */
void metrics_error(struct metrics *m, int code);

/* Frame bytes read from (in) or queued to (out) a client or peer. */
void metrics_bytes(struct metrics *m, uint64_t in, uint64_t out);

/* A run of a model on IPUs first .. first + count - 1 ended well: host_us the time the
 * workers took, cost the simulated clock's figures (NULL when it has none). */
void metrics_run(struct metrics *m, unsigned first, unsigned count, uint64_t host_us,
                 const struct sim_cost_report *cost);

/* An attach was granted after waiting waited_ms in the queue (0: at once). */
void metrics_attach(struct metrics *m, uint32_t waited_ms);

/* IPU id's busy time so far, in microseconds: on the host and on the simulated clock
 * (0 for an id out of range, or m NULL). */
void metrics_ipu_busy(const struct metrics *m, unsigned id, uint64_t *host_us,
                      uint64_t *sim_us);

/* A Pod all-reduce took ns nanoseconds (any thread). */
void metrics_collective(uint64_t ns);

/* The Pod all-reduces counted so far by metrics_collective (any thread). */
void metrics_collective_totals(uint64_t *calls, uint64_t *ns);

/* 0 when addr is a metrics_listen value metrics_start takes ("" included), else -1 with a
 * sentence saying what is accepted. */
int metrics_listen_check(const char *addr, char *err, size_t errlen);

/* Splits "HOST:PORT", "[V6]:PORT" or "PORT" (host 127.0.0.1) into host (hlen bytes) and
 * port. 0 or -1. */
int metrics_split_addr(const char *in, char *host, size_t hlen, unsigned *port);

#endif
