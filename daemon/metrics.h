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

#include "metrics_count.h"

struct srv;
struct metrics;
struct sim_cost_report;

/*
 * Starts the listener of s->cfg.metrics_listen ("HOST:PORT", or "PORT" for 127.0.0.1;
 * port 0 picks a free one) on s->base and sets s->metrics. With metrics_listen empty only
 * the counters are made (nothing listens). 0, or -1 with a sentence in err.
 */
int metrics_start(struct srv *s, char *err, size_t errlen);

/* Stops the listener and frees the counters. NULL is a no-op. */
void metrics_free(struct metrics *m);

/* The bound "HOST:PORT" of the listener ("" when off); borrowed until metrics_free. */
const char *metrics_address(const struct metrics *m);

/*
 * Writes the whole exposition of s into a new buffer: *out is caller-owned (free()),
 * *len its length. 0, or -1 when out of memory. (The HTTP handler's body; tests call it.)
 */
int metrics_render(struct srv *s, char **out, size_t *len);

#endif
