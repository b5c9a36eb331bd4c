/*
 * metrics_count.c — see metrics_count.h: the counters, and the check of metrics_listen.
 */
#include "metrics_count.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "sim.h"

/* Upper bounds (seconds) of the run latency and attach wait histograms' buckets. */
const double metrics_bounds[MET_NBUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                            0.25,  0.5,    1,     2.5,  5,     10,   30};

/* Pod all-reduces of every job of this process (workers add; the loop reads). */
static _Atomic uint64_t coll_calls, coll_ns;

static void
hist_add(struct met_hist *h, double v)
{
    unsigned i = 0;

    while (i < MET_NBUCKETS && v > metrics_bounds[i])
        i++;
    if (i < MET_NBUCKETS)
        h->bucket[i]++;
    h->count++;
    h->sum += v;
}

void
metrics_request(struct metrics *m, const char *name)
{
    if (m == NULL)
        return;
    for (unsigned i = 0; i < m->nreq; i++) {
        if (m->req[i].name == name) {
            m->req[i].n++;
            return;
        }
    }
    if (m->nreq < MET_MAX_REQS) {
        m->req[m->nreq].name = name;
        m->req[m->nreq++].n = 1;
    }
}

void
metrics_error(struct metrics *m, int code)
{
    if (m != NULL)
        m->errors[code >= 0 && code < MET_MAX_CODES ? code : MET_MAX_CODES]++;
}

void
metrics_bytes(struct metrics *m, uint64_t in, uint64_t out)
{
    if (m == NULL)
        return;
    m->bytes_in += in;
    m->bytes_out += out;
}

void
metrics_run(struct metrics *m, unsigned first, unsigned count, uint64_t host_us,
            const struct sim_cost_report *cost)
{
    if (m == NULL)
        return;
    m->runs++;
    hist_add(&m->run_seconds, (double)host_us / 1e6);
    for (unsigned i = 0; i < count && first + i < CFG_MAX_IPUS; i++) {
        m->busy_host[first + i] += (double)host_us / 1e6;
        if (cost != NULL && i < cost->n_ipus)
            m->busy_sim[first + i] += cost->device_seconds * cost->busy[i];
    }
}

void
metrics_ipu_busy(const struct metrics *m, unsigned id, uint64_t *host_us, uint64_t *sim_us)
{
    int in = m != NULL && id < CFG_MAX_IPUS;

    *host_us = in ? (uint64_t)(m->busy_host[id] * 1e6 + 0.5) : 0;
    *sim_us = in ? (uint64_t)(m->busy_sim[id] * 1e6 + 0.5) : 0;
}

void
metrics_attach(struct metrics *m, uint32_t waited_ms)
{
    if (m == NULL)
        return;
    m->attaches++;
    hist_add(&m->attach_wait, (double)waited_ms / 1e3);
}

void
metrics_collective(uint64_t ns)
{
    atomic_fetch_add(&coll_calls, 1);
    atomic_fetch_add(&coll_ns, ns);
}

void
metrics_collective_totals(uint64_t *calls, uint64_t *ns)
{
    *calls = atomic_load(&coll_calls);
    *ns = atomic_load(&coll_ns);
}

int
metrics_split_addr(const char *in, char *host, size_t hlen, unsigned *port)
{
    const char *colon = strrchr(in, ':');
    const char *p = colon ? colon + 1 : in;
    char *end;
    unsigned long v = strtoul(p, &end, 10);

    if (*p == '\0' || *end != '\0' || v > 65535)
        return -1;
    *port = (unsigned)v;
    if (colon == NULL) {
        snprintf(host, hlen, "127.0.0.1");
        return 0;
    }
    if (in[0] == '[' && colon > in + 1 && colon[-1] == ']')
        snprintf(host, hlen, "%.*s", (int)(colon - in - 2), in + 1);
    else
        snprintf(host, hlen, "%.*s", (int)(colon - in), in);
    return host[0] != '\0' && strlen(host) < hlen - 1 ? 0 : -1;
}

int
metrics_listen_check(const char *addr, char *err, size_t errlen)
{
    char host[256];
    unsigned port;

    if (addr[0] == '\0' || metrics_split_addr(addr, host, sizeof host, &port) == 0)
        return 0;
    errbuf_set(err, errlen, "[server] metrics_listen = %s is not HOST:PORT or PORT; give e.g. "
               "127.0.0.1:9464 (or 9464, which listens on 127.0.0.1), or leave it empty for "
               "no metrics", addr);
    return -1;
}
