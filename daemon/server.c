/*
 * server.c — see server.h.
 *
 * Accepting: a connection over max_connections is told so with an error frame and closed
 * (rejected_connections counts them). When accept() fails for want of descriptors the
 * listener pauses for 100 ms instead of spinning.
 *
 * Shutdown: stop listening, tell every holder and waiter, let queued output drain, then
 * leave the loop; drain_timeout bounds the wait. A second SIGTERM/SIGINT leaves at once.
 */
#include "server.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "dispatch.h"
#include "errbuf.h"
#include "fault_fire.h"
#include "frame.h"
#include "freshfile.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "log.h"
#include "notify.h"
#include "pod.h"
#include "pod_kv.h"
#include "metrics.h"
#include "tls.h"


int
srv_build_config(const struct srv *s, struct cfg *out, char *err, size_t errlen)
{
    cfg_defaults(out);
    if (s->config_path != NULL && cfg_load_file(out, s->config_path, err, errlen) < 0)
        return -1;
    for (int i = 0; i < s->nov; i++) {
        char detail[512];
        if (cfg_set(out, s->ov[i].section, s->ov[i].key, s->ov[i].value, detail,
                    sizeof detail) < 0) {
            errbuf_set(err, errlen, "command line: %s", detail);
            return -1;
        }
    }
    return cfg_validate(out, err, errlen);
}

/* ---- sending a refusal on a socket we will not keep ---------------------------------- */

static void
refuse_fd(int fd, int code, const char *msg)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__Error e = IPUOF__ERROR__INIT;
    uint8_t *buf;
    size_t len;

    e.code = (uint32_t)code;
    e.component = (char *)"daemon";
    e.message = (char *)msg;
    e.error_class = IPUOF__ERROR_CLASS__ERROR_CLASS_RECOVERABLE;
    e.recovery = IPUOF__RECOVERY_ACTION__RECOVERY_RETRY;
    h.body_case = IPUOF__HEADER__BODY_ERROR;
    h.error = &e;
    if (ipuof_frame_pack(&h, 0, &buf, &len) == IPUOF_OK) {
        ssize_t n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n;
        free(buf);
    }
    close(fd);
}

/* ---- listeners ------------------------------------------------------------------------- */

/* Where a connection was accepted: each kind has its own limit. */
enum accept_kind { ACCEPT_CLIENT, ACCEPT_ADMIN, ACCEPT_POD };

/* The new connection, or NULL when it was refused (or out of memory). Client-port,
 * admin-socket and Pod-port connections are limited apart (max_connections,
 * admin_connections, [pod] max_connections), so no kind can lock another out. */
static struct conn *
accept_common(struct srv *s, evutil_socket_t fd, struct sockaddr *sa, int salen,
              enum accept_kind kind)
{
    static const char *const where[] = {"TCP address", "admin socket", "Pod port"};
    static const char *const keys[] = {"max_connections", "admin_connections",
                                       "[pod] max_connections"};
    unsigned open[] = {s->nconns - s->nadmin - s->npod, s->nadmin, s->npod};
    unsigned limit[] = {s->cfg.max_connections, s->cfg.admin_connections,
                        s->cfg.pod_max_connections};
    struct conn *c;
    char msg[160];

    if (s->stopping) {
        refuse_fd(fd, IPUOF_E_SHUTDOWN, "ipuofd is shutting down");
        return NULL;
    }
    if (open[kind] >= limit[kind]) {
        s->rejected++;
        snprintf(msg, sizeof msg,
                 "too many connections: ipuofd serves at most %u on its %s (%s); retry later",
                 limit[kind], where[kind], keys[kind]);
        log_warn("rejected a connection: %u connections open on the %s (%s)", limit[kind],
                 where[kind], keys[kind]);
        refuse_fd(fd, IPUOF_E_TOO_MANY, msg);
        return NULL;
    }
    s->accepted++;
    c = conn_new(s, fd, sa, salen, kind == ACCEPT_ADMIN);
    if (c != NULL && kind == ACCEPT_POD) {
        c->pod = 1;
        s->npod++;
    }
    return c;
}

static void
on_accept_tcp(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
              void *arg)
{
    (void)l;
    if (((struct srv *)arg)->tls != NULL)
        tls_accept(arg, fd, sa, salen); /* the handshake first (tls.c) */
    else
        accept_common(arg, fd, sa, salen, ACCEPT_CLIENT);
}

/* A peer daemon on the Pod port: a connection of its own kind (limited by [pod]
 * max_connections), which may only say hello with the Pod token and make Pod requests. */
static void
on_accept_pod(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
              void *arg)
{
    (void)l;
    accept_common(arg, fd, sa, salen, ACCEPT_POD);
}

static void
on_accept_admin(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                void *arg)
{
    (void)l;
    accept_common(arg, fd, sa, salen, ACCEPT_ADMIN);
}

static void
on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
    struct srv *s = arg;

    (void)fd;
    (void)what;
    if (s->stopping)
        return;
    if (s->tcp)
        evconnlistener_enable(s->tcp);
    if (s->admin)
        evconnlistener_enable(s->admin);
    if (s->podl)
        evconnlistener_enable(s->podl);
}

static void
on_accept_error(struct evconnlistener *l, void *arg)
{
    struct srv *s = arg;
    struct timeval tv = {0, 100000};
    int e = EVUTIL_SOCKET_ERROR();

    log_warn("accept failed: %s; pausing new connections for 100 ms",
             evutil_socket_error_to_string(e));
    evconnlistener_disable(l);
    evtimer_add(s->ev_accept_retry, &tv);
}

/* Splits "HOST:PORT" or "[V6]:PORT" into host and port strings. 0 or -1. */
static int
split_hostport(const char *in, char *host, size_t hlen, char *port, size_t plen)
{
    const char *colon;

    if (in[0] == '[') {
        const char *end = strchr(in, ']');
        if (end == NULL || end[1] != ':' || (size_t)(end - in - 1) >= hlen)
            return -1;
        memcpy(host, in + 1, (size_t)(end - in - 1));
        host[end - in - 1] = '\0';
        colon = end + 1;
    } else {
        colon = strrchr(in, ':');
        if (colon == NULL || (size_t)(colon - in) >= hlen)
            return -1;
        memcpy(host, in, (size_t)(colon - in));
        host[colon - in] = '\0';
    }
    if (colon[1] == '\0' || strlen(colon + 1) >= plen)
        return -1;
    snprintf(port, plen, "%s", colon + 1);
    return 0;
}

/* Binds a listener on ADDR (HOST:PORT, [V6]:PORT; port 0 picks one) with callback CB:
 * *out gets it, *bound the port it got, host (hlen bytes) the host part. WHAT names the
 * address in error sentences ("listen address" or "[pod] listen ="), EXAMPLE a right one,
 * PORTNAME what the port is ("" or "the Pod port "). 0, or -1 with err. */
static int
bind_hostport(struct srv *s, const char *addr, const char *what, const char *example,
              const char *portname, evconnlistener_cb cb, int backlog, struct evconnlistener **out, int *bound,
              char *host, size_t hlen, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char port[16];
    int rc;

    *bound = 0;
    if (split_hostport(addr, host, hlen, port, sizeof port) < 0) {
        errbuf_set(err, errlen, "%s '%s' is not HOST:PORT (e.g. %s)", what, addr, example);
        return -1;
    }
    rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (rc != 0) {
        errbuf_set(err, errlen, "cannot resolve %s '%s': %s", what, addr, gai_strerror(rc));
        return -1;
    }
    *out = evconnlistener_new_bind(s->base, cb, s,
                                   LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
                                       LEV_OPT_CLOSE_ON_EXEC,
                                   backlog, res->ai_addr, (int)res->ai_addrlen);
    freeaddrinfo(res);
    if (*out == NULL) {
        errbuf_set(err, errlen, "cannot listen on %s%s: %s", portname, addr, strerror(errno));
        return -1;
    }
    evconnlistener_set_error_cb(*out, on_accept_error);
    if (getsockname(evconnlistener_get_fd(*out), (struct sockaddr *)&ss, &sl) == 0)
        *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

static int
listen_tcp(struct srv *s, char *err, size_t errlen)
{
    char host[256];
    int bound;

    if (bind_hostport(s, s->cfg.listen, "listen address", "127.0.0.1:50052 or [::1]:0", "",
                      on_accept_tcp, 1024, &s->tcp, &bound, host, sizeof host, err,
                      errlen) < 0)
        return -1;
    s->bound_port = bound;
    if (!cfg_listen_is_loopback(s->cfg.listen) && s->cfg.auth_token[0] == '\0')
        log_warn("listening on %s without an auth_token (allow_unauthenticated = yes): "
                 "anyone who can reach this address can use the IPUs", s->cfg.listen);
    return 0;
}

/* The Pod port ([pod] listen), when the config names peers: where peer daemons say hello
 * and the rendezvous store is served. 0 or -1 with err. */
static int
listen_pod(struct srv *s, char *err, size_t errlen)
{
    char host[256];
    int bound, v6;

    if (bind_hostport(s, s->cfg.pod_listen, "[pod] listen =", "127.0.0.1:50053",
                      "the Pod port ", on_accept_pod, 128, &s->podl, &bound, host, sizeof host, err, errlen) < 0)
        return -1;
    v6 = strchr(host, ':') != NULL;
    snprintf(s->pod_addr, sizeof s->pod_addr, "%s%.200s%s:%d", v6 ? "[" : "", host,
             v6 ? "]" : "", bound);
    if (!cfg_listen_is_loopback(s->cfg.pod_listen) && s->cfg.pod_token[0] == '\0')
        log_warn("Pod port %s without a [pod] token (allow_unauthenticated = yes): any host "
                 "that can reach it can join this daemon's partitions", s->pod_addr);
    return 0;
}

/* Every hello_interval: this daemon's free IPUs, for the hellos to its peers. */
static void
on_pod_tick(evutil_socket_t fd, short what, void *arg)
{
    struct srv *s = arg;

    (void)fd;
    (void)what;
    pod_set_free(s->pod, dev_free_count(s->inv));
    fault_links_sync(s); /* a link fault's --duration ends */
}

/* Partitions of this daemon forming at once (each waits up to job_timeout for its other
 * hosts); a fifth waits for a thread. */
#define POD_RENDEZVOUS_THREADS 4

/* The Pod of a config with [pod] peers: its port, the rendezvous store, the hellos, the
 * rendezvous threads. */
static int
start_pod(struct srv *s, char *err, size_t errlen)
{
    struct cfg_pod_peer peers[CFG_POD_MAX_PEERS];
    struct timeval tv = {(time_t)s->cfg.pod_hello_interval, 0};
    int n = cfg_pod_peers(&s->cfg, peers, err, errlen);

    if (n <= 0)
        return n;
    if (listen_pod(s, err, errlen) < 0)
        return -1;
    s->kv = pod_kv_new();
    s->ev_pod_tick = event_new(s->base, -1, EV_PERSIST, on_pod_tick, s);
    s->pod_work = work_new(s->base, POD_RENDEZVOUS_THREADS);
    if (s->kv == NULL || s->ev_pod_tick == NULL || s->pod_work == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    evtimer_add(s->ev_pod_tick, &tv);
    if (pod_start(&s->pod, &s->cfg, s->pod_addr, s->inv->n, err, errlen) < 0)
        return -1;
    fault_links_sync(s); /* IPUOF_FAULTS' and the config's link faults */
    log_info("pod: host %s, Pod port %s, %d peer%s", s->cfg.pod_name, s->pod_addr, n,
             n == 1 ? "" : "s");
    return 0;
}

/* 1 when a daemon answers on the Unix socket at path. */
static int
socket_is_live(const struct sockaddr_un *sa)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int live;

    if (fd < 0)
        return 0;
    live = connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0;
    close(fd);
    return live;
}

static int listen_admin_at(struct srv *s, char *err, size_t errlen);

/* The admin socket: a failure is fatal when it was configured, a warning for the default. */
static int
listen_admin(struct srv *s, char *err, size_t errlen)
{
    char dir[sizeof s->cfg.admin_socket];
    char *slash;

    if (s->cfg.admin_socket[0] == '\0')
        return 0;
    if (s->cfg.admin_socket_default) {
        snprintf(dir, sizeof dir, "%s", s->cfg.admin_socket);
        slash = strrchr(dir, '/');
        if (slash != NULL && slash != dir) {
            *slash = '\0';
            if (mkdir(dir, 0750) < 0 && errno != EEXIST)
                log_debug("cannot create %s: %s", dir, strerror(errno));
        }
    }
    if (listen_admin_at(s, err, errlen) == 0)
        return 0;
    if (!s->cfg.admin_socket_default)
        return -1;
    log_warn("no admin socket: %s (give --admin-socket PATH to choose one)", err);
    s->cfg.admin_socket[0] = '\0';
    return 0;
}

static int
listen_admin_at(struct srv *s, char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    const char *path = s->cfg.admin_socket;
    struct stat st;

    if (strlen(path) >= sizeof sa.sun_path) {
        errbuf_set(err, errlen, "admin socket path '%s' is longer than %zu bytes", path,
               sizeof sa.sun_path - 1);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path));
    /* A stale socket from an earlier run is replaced; any other file is left alone. */
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            errbuf_set(err, errlen, "admin socket path '%s' exists and is not a socket", path);
            return -1;
        }
        if (socket_is_live(&sa)) {
            errbuf_set(err, errlen, "admin socket %s is in use by another running ipuofd", path);
            return -1;
        }
        unlink(path);
    }
    s->admin = evconnlistener_new_bind(s->base, on_accept_admin, s,
                                       LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 64,
                                       (struct sockaddr *)&sa, (int)sizeof sa);
    if (s->admin == NULL) {
        errbuf_set(err, errlen, "cannot listen on admin socket %s: %s", path, strerror(errno));
        return -1;
    }
    /* Whoever may open this file is an administrator: owner and group only. */
    if (chmod(path, 0660) < 0) {
        errbuf_set(err, errlen, "cannot set permissions of admin socket %s: %s", path,
               strerror(errno));
        return -1;
    }
    evconnlistener_set_error_cb(s->admin, on_accept_error);
    return 0;
}

int
srv_write_port_file(const struct srv *s, const char *path, char *err, size_t errlen)
{
    char buf[16];
    const char *step = NULL;
    int n = snprintf(buf, sizeof buf, "%d\n", s->bound_port);

    /* A new file made beside path (O_EXCL | O_NOFOLLOW, a random name) renamed over it: a
     * symlink planted at either name is never followed. */
    if (freshfile_write(path, buf, (size_t)n, &step) != 0) {
        errbuf_set(err, errlen, "cannot %s port file %s: %s", step ? step : "write", path,
                   strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- signals ----------------------------------------------------------------------------- */

static void
on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
    struct srv *s = arg;

    (void)what;
    if (s->stopping) {
        log_warn("second %s: exiting now", sig == SIGINT ? "SIGINT" : "SIGTERM");
        event_base_loopexit(s->base, NULL);
        return;
    }
    log_info("%s: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    srv_shutdown_begin(s);
}

static void
on_hup(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    srv_reload(arg);
}

void
srv_reload(struct srv *s)
{
    struct cfg next, eff;
    char err[1024], ignored[512];
    char mono[64];

    snprintf(mono, sizeof mono, "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)srv_now_ms() * 1000);
    notify_send(mono);
    if (srv_build_config(s, &next, err, sizeof err) < 0) {
        log_error("reload failed, keeping the running configuration: %s", err);
        notify_send("READY=1");
        return;
    }
    /* What would run: the keys a reload may change over the ones only a restart changes,
     * checked as a whole against the listeners actually open (their addresses are not
     * reloadable), so no reload can leave them less protected than a start would. */
    eff = s->cfg;
    cfg_apply_reload(&eff, &next, ignored, sizeof ignored);
    if (cfg_validate(&eff, err, sizeof err) < 0) {
        log_error("reload refused, keeping the running configuration: with the new file's "
                  "reloadable keys and the settings only a restart changes (listen = %s "
                  "stays open%s%s), %s; restart ipuofd to change the listen address, or keep "
                  "the token until then", s->cfg.listen, ignored[0] ? "; not reloadable: " : "",
                  ignored, err);
        notify_send("READY=1");
        return;
    }
    if (tls_reload(s, &eff, err, sizeof err) < 0) {
        log_error("reload refused, keeping the running configuration: %s", err);
        notify_send("READY=1");
        return;
    }
    if (!cfg_listen_is_loopback(eff.listen) && eff.auth_token[0] == '\0' &&
        s->cfg.auth_token[0] != '\0')
        log_warn("reload: listen = %s now serves without an auth_token "
                 "(allow_unauthenticated = yes): anyone who can reach it can use the IPUs",
                 eff.listen);
    s->cfg = eff;
    log_set_level(s->cfg.log_level);
    cache_set_limits(&s->cache, s->cfg.host_memory, s->cfg.cache_bytes);
    cache_set_arena_limit(&s->cache, s->cfg.arena_memory);
    for (struct conn *c = s->conns; c != NULL; c = c->next)
        conn_apply_timeouts(c);
    if (ignored[0] != '\0')
        log_warn("reload: changes to %s need a restart and were not applied", ignored);
    log_info("configuration reloaded%s", s->config_path ? "" : " (no config file: flags only)");
    notify_send("READY=1");
}

/* ---- shutdown ---------------------------------------------------------------------------- */

static void
on_drain_tick(evutil_socket_t fd, short what, void *arg)
{
    struct srv *s = arg;
    struct timeval tick = {0, 50000};
    int pending = 0;

    (void)fd;
    (void)what;
    for (struct conn *c = s->conns; c != NULL; c = c->next)
        pending += evbuffer_get_length(bufferevent_get_output(c->bev)) > 0;
    pending += (int)work_pending(s->work);
    if (pending == 0 || srv_now_ms() >= s->stop_deadline_ms) {
        if (pending)
            log_warn("drain_timeout reached with %d client(s) or job(s) unfinished", pending);
        event_base_loopexit(s->base, NULL);
        return;
    }
    evtimer_add(s->ev_drain, &tick);
}

/*
 * Shutdown for one connection: the request in flight gets its own answer, then the
 * connection closes. A compile or run on a worker answers when it ends (interrupted: its
 * partition was revoked) and conn_release_frames() closes; an upload or run input still arriving
 * is answered now.
 */
static void
shutdown_answer(struct conn *c)
{
    static const char why[] = "ipuofd is shutting down";

    if (c->trace != NULL)
        return;
    if (!req_compile_refuse_upload(c, IPUOF_E_SHUTDOWN, why) && c->payload_left > 0 &&
        c->sink.done != NULL)
        conn_send_error(c, c->payload_req, IPUOF_E_SHUTDOWN, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_RETRY, "daemon", "%s; request %llu was not served", why,
                        (unsigned long long)c->payload_req);
    conn_close_after_write(c);
}

void
srv_shutdown_begin(struct srv *s)
{
    struct timeval now = {0, 0};
    struct conn *next;

    if (s->stopping)
        return;
    s->stopping = 1;
    notify_send("STOPPING=1");
    if (s->tcp)
        evconnlistener_disable(s->tcp);
    if (s->admin)
        evconnlistener_disable(s->admin);
    if (s->podl)
        evconnlistener_disable(s->podl);
    job_wait_shutdown(s);
    for (struct conn *c = s->conns; c != NULL; c = next) {
        next = c->next;
        conn_enter(c);
        if (conn_part(c) != NULL)
            revoke_partition(c, IPUOF_E_SHUTDOWN,
                             "ipuofd is shutting down; partition '%s' is released",
                             conn_part(c)->name);
        shutdown_answer(c);
        conn_leave(c);
    }
    s->stop_deadline_ms = srv_now_ms() + (uint64_t)s->cfg.drain_timeout * 1000;
    evtimer_add(s->ev_drain, &now);
}

/* ---- what a connection calls (conn.c knows no layer above it) ------------------------- */

/* c is being freed: its trace on a worker is dropped when done, its upload is dropped, its
 * job decides what its leaving means, and its queued attach is cancelled. 1 when it held a
 * partition (then conn_freed serves the wait queue once c is gone). */
static int
conn_gone(struct conn *c)
{
    int released = c->job != NULL;

    req_trace_forget(c);
    req_compile_drop_upload(c);
    req_pod_forget(c);
    if (c->job != NULL)
        job_leave(c); /* the job decides what its process leaving means */
    job_wait_cancel(c->srv, c);
    return released;
}

static void
conn_freed(struct srv *s)
{
    job_serve_waiters(s);
}

/* Holding IPUs, waiting for them, uploading a model, or waiting for a rendezvous key is not
 * idleness. */
static int
conn_holds(const struct conn *c)
{
    return c->job != NULL || c->waiter != NULL || c->upload != NULL || c->kv_waiting > 0;
}

const struct conn_hooks srv_conn_hooks = {
    .frame = dispatch,
    .gone = conn_gone,
    .freed = conn_freed,
    .holds = conn_holds,
};

/* ---- life cycle -------------------------------------------------------------------------- */

int
srv_init(struct srv *s, char *err, size_t errlen)
{
    evthread_use_pthreads();
    s->conn_hooks = &srv_conn_hooks;
    s->base = event_base_new();
    if (s->base == NULL) {
        errbuf_set(err, errlen, "cannot create the event loop");
        return -1;
    }
    s->started_ms = srv_now_ms();
    s->inv = dev_inventory_new(s->cfg.ipus, s->cfg.ipu_memory, s->cfg.tiles);
    cache_init(&s->cache, s->cfg.cache_entries, s->cfg.host_memory, s->cfg.cache_bytes);
    cache_set_arena_limit(&s->cache, s->cfg.arena_memory);
    s->work = work_new(s->base, s->cfg.worker_threads ? s->cfg.worker_threads
                                                      : (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
    if (s->work == NULL) {
        errbuf_set(err, errlen, "cannot start worker threads");
        return -1;
    }
    s->ev_term = evsignal_new(s->base, SIGTERM, on_stop_signal, s);
    s->ev_int = evsignal_new(s->base, SIGINT, on_stop_signal, s);
    s->ev_hup = evsignal_new(s->base, SIGHUP, on_hup, s);
    s->ev_drain = evtimer_new(s->base, on_drain_tick, s);
    s->ev_accept_retry = evtimer_new(s->base, on_accept_retry, s);
    if (s->inv == NULL || !s->ev_term || !s->ev_int || !s->ev_hup || !s->ev_drain ||
        !s->ev_accept_retry) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    evsignal_add(s->ev_term, NULL);
    evsignal_add(s->ev_int, NULL);
    evsignal_add(s->ev_hup, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (s->faults.n > 0)    /* [faults] inject and IPUOF_FAULTS, read by main() */
        log_warn("[faults] and IPUOF_FAULTS armed %u fault%s (ipuctl fault list shows them)",
                 s->faults.n, s->faults.n == 1 ? "" : "s");
    if (tls_start(s, err, errlen) < 0 || listen_tcp(s, err, errlen) < 0 || listen_admin(s, err, errlen) < 0 ||
        start_pod(s, err, errlen) < 0 || metrics_start(s, err, errlen) < 0)
        return -1;
    return 0;
}

void
srv_run(struct srv *s)
{
    event_base_dispatch(s->base);
}

void
srv_cleanup(struct srv *s)
{
    pod_stop(s->pod); /* first: its thread reads nothing of s, but stop it before the rest */
    s->pod = NULL;
    while (s->conns != NULL)
        conn_free(s->conns);
    fault_park_free_all(s);
    req_pod_free_all(s);
    pod_kv_free(s->kv);
    s->kv = NULL;
    if (s->podl)
        evconnlistener_free(s->podl);
    if (s->ev_pod_tick)
        event_free(s->ev_pod_tick);
    if (s->tcp)
        evconnlistener_free(s->tcp);
    if (s->admin) {
        evconnlistener_free(s->admin);
        unlink(s->cfg.admin_socket);
    }
    if (s->ev_term)
        event_free(s->ev_term);
    if (s->ev_int)
        event_free(s->ev_int);
    if (s->ev_hup)
        event_free(s->ev_hup);
    if (s->ev_drain)
        event_free(s->ev_drain);
    if (s->ev_accept_retry)
        event_free(s->ev_accept_retry);
    work_free(s->pod_work); /* a rendezvous not done ends its job (shutdown) */
    s->pod_work = NULL;
    work_free(s->work);
    s->work = NULL;
    metrics_free(s->metrics);
    s->metrics = NULL;
    tls_stop(s);
    cache_destroy(&s->cache);
    dev_inventory_free(s->inv);
    if (s->base)
        event_base_free(s->base);
    libevent_global_shutdown();
}
