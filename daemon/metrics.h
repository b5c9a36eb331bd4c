/*
 * metrics.h — the daemon's Prometheus metrics: an HTTP listener of its own (libevent's
 * evhttp on [server] metrics_listen) serving GET /metrics in the Prometheus text format
 * (version 0.0.4). docs/service.md lists every metric.
 *
 * What the daemon already holds (IPU states and memory, steps run, the cache's hits and
 * bytes, the attach queue, the connections, the faults, the Pod's peers) is read at scrape
 * time. What it does not keep is counted here, each at one place: requests by type in the
 * dispatch table, errors by code in conn_send_error, wire bytes in the frame reader and
 * writer, a run's host and simulated time in run_done, attach waits where the attach
 * reply is sent, the Pod's all-reduce time where it runs.
 *
 * Threading: everything runs on the event-loop thread except metrics_collective(), which
 * workers call (an atomic, process-wide counter: one daemon per process).
 */
#ifndef IPUOFD_METRICS_H
#define IPUOFD_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct srv;
struct metrics;
struct sim_cost_report;

/*
 * Starts the listener of s->cfg.metrics_listen ("HOST:PORT", or "PORT" for 127.0.0.1;
 * port 0 picks a free one) on s->base and sets s->metrics. With metrics_listen empty only
 * the counters are made (nothing listens). 0, or -1 with a sentence in err.
 */
int metrics_start(struct srv *s, char *err, size_t errlen);

/* 0 when addr is a metrics_listen value metrics_start takes ("" included), else -1 with a
 * sentence saying what is accepted. */
int metrics_listen_check(const char *addr, char *err, size_t errlen);

/* Stops the listener and frees the counters. NULL is a no-op. */
void metrics_free(struct metrics *m);

/* The bound "HOST:PORT" of the listener ("" when off); borrowed until metrics_free. */
const char *metrics_address(const struct metrics *m);

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

/*
 * Writes the whole exposition of s into a new buffer: *out is caller-owned (free()),
 * *len its length. 0, or -1 when out of memory. (The HTTP handler's body; tests call it.)
 */
int metrics_render(struct srv *s, char **out, size_t *len);

#endif
