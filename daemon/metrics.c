/*
 * metrics.c — see metrics.h. The counters below and the exposition of /metrics.
 */
#include "metrics.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "errbuf.h"
#include "ipuof/status.h"
#include "log.h"
#include "pod.h"
#include "sim.h"
#include "srv_state.h"


/* ---- the exposition ---------------------------------------------------------------------- */

/* HELP and TYPE lines of one metric family. */
static void
family(struct evbuffer *b, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
put_hist(struct evbuffer *b, const char *name, const struct met_hist *h)
{
    uint64_t cum = 0;

    for (unsigned i = 0; i < MET_NBUCKETS; i++) {
        cum += h->bucket[i];
        evbuffer_add_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, metrics_bounds[i],
                            (unsigned long long)cum);
    }
    evbuffer_add_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name,
                        (unsigned long long)h->count, name, h->sum, name,
                        (unsigned long long)h->count);
}

static const char *const state_names[] = {"free", "attached", "busy", "error"};

/* Per IPU: state, memory, steps, busy time. */
static void
render_ipus(struct evbuffer *b, const struct srv *s, const struct metrics *m)
{
    const struct dev_inventory *inv = s->inv;

    family(b, "ipuofd_ipu_state", "gauge", "1 for the state each IPU is in (free, attached, "
           "busy, error), 0 for the others");
    for (unsigned i = 0; i < inv->n; i++)
        for (unsigned k = 0; k < 4; k++)
            evbuffer_add_printf(b, "ipuofd_ipu_state{ipu=\"%u\",state=\"%s\"} %d\n", i,
                                state_names[k], (unsigned)inv->ipus[i].state == k);
    family(b, "ipuofd_ipu_memory_used_bytes", "gauge", "IPU memory the loaded models use");
    for (unsigned i = 0; i < inv->n; i++)
        evbuffer_add_printf(b, "ipuofd_ipu_memory_used_bytes{ipu=\"%u\"} %llu\n", i,
                            (unsigned long long)inv->ipus[i].memory_used);
    family(b, "ipuofd_ipu_memory_capacity_bytes", "gauge", "IPU memory in all");
    for (unsigned i = 0; i < inv->n; i++)
        evbuffer_add_printf(b, "ipuofd_ipu_memory_capacity_bytes{ipu=\"%u\"} %llu\n", i,
                            (unsigned long long)inv->ipus[i].memory_capacity);
    family(b, "ipuofd_ipu_host_memory_used_bytes", "gauge",
           "run buffers in host memory of the partition starting at the IPU");
    for (unsigned i = 0; i < inv->n; i++)
        evbuffer_add_printf(b, "ipuofd_ipu_host_memory_used_bytes{ipu=\"%u\"} %llu\n", i,
                            (unsigned long long)inv->ipus[i].host_used);
    family(b, "ipuofd_ipu_steps_total", "counter",
           "device iterations run on the IPU (a reset of the IPU starts it again at 0)");
    for (unsigned i = 0; i < inv->n; i++)
        evbuffer_add_printf(b, "ipuofd_ipu_steps_total{ipu=\"%u\"} %llu\n", i,
                            (unsigned long long)inv->ipus[i].steps_run);
    family(b, "ipuofd_ipu_busy_seconds_total", "counter", "time the IPU ran models: "
           "clock=\"host\" the simulator's time on this machine, clock=\"simulated\" the "
           "time the cost model says an IPU would take");
    for (unsigned i = 0; i < inv->n && i < CFG_MAX_IPUS; i++)
        evbuffer_add_printf(b, "ipuofd_ipu_busy_seconds_total{ipu=\"%u\",clock=\"host\"} %.9g\n"
                            "ipuofd_ipu_busy_seconds_total{ipu=\"%u\",clock=\"simulated\"} %.9g\n",
                            i, m->busy_host[i], i, m->busy_sim[i]);
}

/* Runs, requests, errors, bytes. */
static void
render_traffic(struct evbuffer *b, const struct metrics *m)
{
    family(b, "ipuofd_runs_total", "counter", "model runs that ended well");
    evbuffer_add_printf(b, "ipuofd_runs_total %llu\n", (unsigned long long)m->runs);
    family(b, "ipuofd_run_duration_seconds", "histogram",
           "host time of a run on the simulator's workers");
    put_hist(b, "ipuofd_run_duration_seconds", &m->run_seconds);
    family(b, "ipuofd_requests_total", "counter", "requests served, by type");
    for (unsigned i = 0; i < m->nreq; i++)
        evbuffer_add_printf(b, "ipuofd_requests_total{request=\"%s\"} %llu\n", m->req[i].name,
                            (unsigned long long)m->req[i].n);
    family(b, "ipuofd_errors_total", "counter", "error replies sent, by status code");
    /* Every known code (0 until it is sent, so rates work from the start), then others. */
    for (int c = 1; c < MET_MAX_CODES; c++) {
        char name[32];
        if (c >= IPUOF_STATUS_COUNT && m->errors[c] == 0)
            continue;
        snprintf(name, sizeof name, "%s", ipuof_status_name(c));
        if (c >= IPUOF_STATUS_COUNT)
            snprintf(name, sizeof name, "%d", c); /* a code newer than this table */
        evbuffer_add_printf(b, "ipuofd_errors_total{code=\"%s\"} %llu\n", name,
                            (unsigned long long)m->errors[c]);
    }
    if (m->errors[MET_MAX_CODES] > 0)
        evbuffer_add_printf(b, "ipuofd_errors_total{code=\"beyond\"} %llu\n",
                            (unsigned long long)m->errors[MET_MAX_CODES]);
    family(b, "ipuofd_received_bytes_total", "counter", "frame bytes read from clients and peers");
    evbuffer_add_printf(b, "ipuofd_received_bytes_total %llu\n", (unsigned long long)m->bytes_in);
    family(b, "ipuofd_sent_bytes_total", "counter", "frame bytes sent to clients and peers");
    evbuffer_add_printf(b, "ipuofd_sent_bytes_total %llu\n", (unsigned long long)m->bytes_out);
}

/* The executable cache (read under its lock), attaches and the queue. */
static void
render_cache_attach(struct evbuffer *b, struct srv *s, const struct metrics *m)
{
    struct cache *k = &s->cache;
    uint64_t hits, inserted, evictions, bytes, max_bytes, arena, max_arena;
    unsigned n;

    pthread_mutex_lock(&k->mu);
    hits = k->hits, inserted = k->inserted, evictions = k->evictions;
    bytes = k->bytes, max_bytes = k->max_bytes, n = k->n;
    arena = k->arena, max_arena = k->max_arena;
    pthread_mutex_unlock(&k->mu);
    family(b, "ipuofd_compiles_total", "counter",
           "executables compiled (compile requests the cache did not serve)");
    evbuffer_add_printf(b, "ipuofd_compiles_total %llu\n", (unsigned long long)inserted);
    family(b, "ipuofd_compile_cache_hits_total", "counter",
           "compile requests served from the executable cache");
    evbuffer_add_printf(b, "ipuofd_compile_cache_hits_total %llu\n", (unsigned long long)hits);
    family(b, "ipuofd_compile_cache_evictions_total", "counter", "executables evicted");
    evbuffer_add_printf(b, "ipuofd_compile_cache_evictions_total %llu\n",
                        (unsigned long long)evictions);
    family(b, "ipuofd_compile_cache_entries", "gauge", "executables in the cache");
    evbuffer_add_printf(b, "ipuofd_compile_cache_entries %u\n", n);
    family(b, "ipuofd_compile_cache_bytes", "gauge", "bytes the cache's executables hold");
    evbuffer_add_printf(b, "ipuofd_compile_cache_bytes %llu\n", (unsigned long long)bytes);
    family(b, "ipuofd_compile_cache_limit_bytes", "gauge", "what they may hold (cache_bytes)");
    evbuffer_add_printf(b, "ipuofd_compile_cache_limit_bytes %llu\n",
                        (unsigned long long)max_bytes);
    family(b, "ipuofd_compile_cache_arena_bytes", "gauge",
           "host memory the cache's executables' arenas may take");
    evbuffer_add_printf(b, "ipuofd_compile_cache_arena_bytes %llu\n", (unsigned long long)arena);
    family(b, "ipuofd_compile_cache_arena_limit_bytes", "gauge",
           "what they may take (arena_memory)");
    evbuffer_add_printf(b, "ipuofd_compile_cache_arena_limit_bytes %llu\n",
                        (unsigned long long)max_arena);
    family(b, "ipuofd_attach_queue_length", "gauge", "attach requests waiting for IPUs");
    evbuffer_add_printf(b, "ipuofd_attach_queue_length %u\n", s->nwaiting);
    family(b, "ipuofd_attach_wait_seconds", "histogram",
           "time granted attaches waited in the queue (0 for those granted at once)");
    put_hist(b, "ipuofd_attach_wait_seconds", &m->attach_wait);
}

/* Connections, faults, the Pod. */
static void
render_conns_pod(struct evbuffer *b, struct srv *s)
{
    uint64_t coll_calls, coll_ns;
    struct pod_host hosts[CFG_POD_MAX_PEERS + 1];
    unsigned pod_conns = 0, armed = 0;
    uint64_t now = srv_now_ms();
    int nh;

    for (const struct conn *c = s->conns; c != NULL; c = c->next)
        pod_conns += c->pod ? 1 : 0;
    family(b, "ipuofd_connections", "gauge", "open connections by kind: client (the client "
           "port), admin (the admin socket), pod (peer daemons on the Pod port)");
    evbuffer_add_printf(b, "ipuofd_connections{kind=\"client\"} %u\n"
                        "ipuofd_connections{kind=\"admin\"} %u\n"
                        "ipuofd_connections{kind=\"pod\"} %u\n",
                        s->nconns - s->nadmin - pod_conns, s->nadmin, pod_conns);
    family(b, "ipuofd_connections_accepted_total", "counter", "connections accepted");
    evbuffer_add_printf(b, "ipuofd_connections_accepted_total %llu\n",
                        (unsigned long long)s->accepted);
    family(b, "ipuofd_connections_rejected_total", "counter",
           "connections refused (max_connections, admin_connections)");
    evbuffer_add_printf(b, "ipuofd_connections_rejected_total %llu\n",
                        (unsigned long long)s->rejected);
    for (unsigned i = 0; i < s->faults.n; i++)
        armed += faults_spent(&s->faults.f[i]) ? 0 : 1;
    family(b, "ipuofd_faults_injected_total", "counter",
           "faults injected (ipuctl fault inject, [faults], IPUOF_FAULTS)");
    evbuffer_add_printf(b, "ipuofd_faults_injected_total %u\n",
                        s->faults.next_id > 0 ? s->faults.next_id - 1 : 0);
    family(b, "ipuofd_faults_fired_total", "counter", "times an injected fault fired");
    evbuffer_add_printf(b, "ipuofd_faults_fired_total %llu\n",
                        (unsigned long long)s->faults.fired_total);
    family(b, "ipuofd_faults_armed", "gauge", "injected faults that may still fire");
    evbuffer_add_printf(b, "ipuofd_faults_armed %u\n", armed);
    nh = pod_hosts(s->pod, hosts, CFG_POD_MAX_PEERS + 1);
    family(b, "ipuofd_pod_peer_up", "gauge",
           "1 when the Pod peer answered its last hello, 0 when not (or not yet)");
    family(b, "ipuofd_pod_peer_last_seen_seconds", "gauge",
           "since the Pod peer last answered a hello (absent: never)");
    for (int i = 0; i < nh; i++) {
        if (hosts[i].state == POD_SELF)
            continue;
        evbuffer_add_printf(b, "ipuofd_pod_peer_up{peer=\"%s\"} %d\n", hosts[i].name,
                            hosts[i].state == POD_REACHABLE);
        if (hosts[i].seen_ms > 0)
            evbuffer_add_printf(b, "ipuofd_pod_peer_last_seen_seconds{peer=\"%s\"} %.3f\n",
                                hosts[i].name,
                                (double)(now - hosts[i].seen_ms) / 1e3);
    }
    metrics_collective_totals(&coll_calls, &coll_ns);
    family(b, "ipuofd_pod_collectives_total", "counter",
           "gradient all-reduces with the Pod's other daemons");
    evbuffer_add_printf(b, "ipuofd_pod_collectives_total %llu\n",
                        (unsigned long long)coll_calls);
    family(b, "ipuofd_pod_collective_seconds_total", "counter", "host time they took");
    evbuffer_add_printf(b, "ipuofd_pod_collective_seconds_total %.9g\n",
                        (double)coll_ns / 1e9);
}

int
metrics_render(struct srv *s, char **out, size_t *len)
{
    struct evbuffer *b = evbuffer_new();
    struct metrics *m = s->metrics;
    int rc = -1;

    if (b == NULL || m == NULL)
        goto end;
    family(b, "ipuofd_build_info", "gauge", "the daemon's version, and 1");
    evbuffer_add_printf(b, "ipuofd_build_info{version=\"%s\"} 1\n", IPUOF_VERSION_STR);
    family(b, "ipuofd_uptime_seconds", "gauge", "since the daemon started");
    evbuffer_add_printf(b, "ipuofd_uptime_seconds %.3f\n",
                        (double)(srv_now_ms() - s->started_ms) / 1e3);
    render_ipus(b, s, m);
    render_traffic(b, m);
    render_cache_attach(b, s, m);
    render_conns_pod(b, s);
    *len = evbuffer_get_length(b);
    *out = malloc(*len + 1);
    if (*out == NULL)
        goto end;
    evbuffer_remove(b, *out, *len);
    (*out)[*len] = '\0';
    rc = 0;
end:
    if (b != NULL)
        evbuffer_free(b);
    return rc;
}

/* ---- the listener ------------------------------------------------------------------------ */

/* GET (or HEAD) /metrics: the exposition; anything else 404 or 405 with a sentence. */
static void
on_request(struct evhttp_request *req, void *arg)
{
    struct metrics *m = arg;
    const char *uri = evhttp_request_get_uri(req);
    struct evbuffer *body = evbuffer_new();
    char *text = NULL;
    size_t len = 0;

    if (body == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
        return;
    }
    if (uri == NULL || (strcmp(uri, "/metrics") != 0 && strncmp(uri, "/metrics?", 9) != 0)) {
        evbuffer_add_printf(body, "ipuofd serves only /metrics here\n");
        evhttp_send_reply(req, HTTP_NOTFOUND, "Not Found", body);
    } else if (evhttp_request_get_command(req) != EVHTTP_REQ_GET &&
               evhttp_request_get_command(req) != EVHTTP_REQ_HEAD) {
        evbuffer_add_printf(body, "/metrics takes GET\n");
        evhttp_send_reply(req, 405, "Method Not Allowed", body);
    } else if (metrics_render(m->srv, &text, &len) < 0) {
        evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
    } else {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "text/plain; version=0.0.4; charset=utf-8");
        evbuffer_add(body, text, len);
        evhttp_send_reply(req, HTTP_OK, "OK", body);
    }
    free(text);
    evbuffer_free(body);
}

int
metrics_start(struct srv *s, char *err, size_t errlen)
{
    struct metrics *m = calloc(1, sizeof *m);
    struct evhttp_bound_socket *bs;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[256], shown[INET6_ADDRSTRLEN];
    unsigned port;

    if (m == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    m->srv = s;
    s->metrics = m;
    if (s->cfg.metrics_listen[0] == '\0')
        return 0;
    if (metrics_split_addr(s->cfg.metrics_listen, host, sizeof host, &port) < 0)
        return metrics_listen_check(s->cfg.metrics_listen, err, errlen);
    m->http = evhttp_new(s->base);
    if (m->http == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    evhttp_set_max_headers_size(m->http, 16384);
    evhttp_set_max_body_size(m->http, 0);
    evhttp_set_timeout(m->http, 10);
    evhttp_set_gencb(m->http, on_request, m);
    bs = evhttp_bind_socket_with_handle(m->http, host, (uint16_t)port);
    if (bs == NULL) {
        errbuf_set(err, errlen, "cannot listen for metrics on %s ([server] metrics_listen): "
                   "the address is in use or not this machine's", s->cfg.metrics_listen);
        return -1;
    }
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl) == 0) {
        const void *a = ss.ss_family == AF_INET6
                            ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                            : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
        unsigned p = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                    : ((struct sockaddr_in *)&ss)->sin_port);
        inet_ntop(ss.ss_family, a, shown, sizeof shown);
        snprintf(m->addr, sizeof m->addr, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u",
                 shown, p);
    }
    log_info("metrics: serving /metrics on http://%s/metrics", m->addr);
    return 0;
}

const char *
metrics_address(const struct metrics *m)
{
    return m != NULL ? m->addr : "";
}

void
metrics_free(struct metrics *m)
{
    if (m == NULL)
        return;
    if (m->http != NULL)
        evhttp_free(m->http);
    free(m);
}
