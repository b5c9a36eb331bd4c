/*
 * pod_peers.c — see pod.h. The hello thread owns the connections to the peers; the
 * table of hosts is shared with the loop thread under mu.
 */
#include "pod.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errbuf.h"
#include "frame.h"
#include "ipuof/status.h"
#include "log.h"
#include "pod_client.h"

_Static_assert(sizeof(((struct pod_host *)0)->name) == sizeof(((struct cfg_pod_peer *)0)->name) &&
                   sizeof(((struct pod_host *)0)->addr) == sizeof(((struct cfg_pod_peer *)0)->addr),
               "pod_start copies peer names and addresses whole");

struct pod {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    int stop;
    /* fixed from the start */
    int npeers;
    struct pod_host host[CFG_POD_MAX_PEERS + 1]; /* [0] self, under mu */
    char token[CFG_TOKEN_MAX];
    unsigned interval_s;
    int timeout_ms;
    unsigned link_cut[CFG_POD_MAX_PEERS + 1]; /* pod_set_link's, under mu */
    unsigned link_ms[CFG_POD_MAX_PEERS + 1];
    /* the thread's own */
    struct pod_client *conn[CFG_POD_MAX_PEERS + 1];
};

static uint64_t
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The end of a "HOST:PORT" or "[V6]:PORT" address's host (its ':' before the port), or NULL. */
static const char *
host_end(const char *a)
{
    if (a[0] == '[') {
        const char *close = strchr(a, ']');
        return close != NULL && close[1] == ':' ? close + 1 : NULL;
    }
    return strrchr(a, ':');
}

void
pod_client_address(const char *listen, int bound_port, char *out, size_t len)
{
    const char *colon = host_end(listen);

    snprintf(out, len, "%.*s:%d", colon ? (int)(colon - listen) : 0, listen, bound_port);
}

/* A peer's client address as its hello reply said (said; "" from a daemon that does not
 * say), into out: a wildcard host (0.0.0.0, [::], or none) is the host of pod_addr, the
 * address this daemon reaches the peer's Pod port at. */
static void
peer_client_addr(const char *said, const char *pod_addr, char *out, size_t len)
{
    const char *colon = host_end(said), *pcolon = host_end(pod_addr);
    size_t hl = colon ? (size_t)(colon - said) : 0;

    if (colon == NULL || pcolon == NULL) {
        snprintf(out, len, "%s", colon ? said : "");
        return;
    }
    if (hl == 0 || (hl == 7 && memcmp(said, "0.0.0.0", 7) == 0) ||
        (hl == 4 && memcmp(said, "[::]", 4) == 0))
        snprintf(out, len, "%.*s%s", (int)(pcolon - pod_addr), pod_addr, colon);
    else
        snprintf(out, len, "%s", said);
}

/* One hello to peer i (index into host[]); records the answer. Runs on the thread. */
static void
hello_peer(struct pod *p, int i)
{
    Ipuof__Header req = IPUOF__HEADER__INIT, *reply = NULL;
    Ipuof__PodHello ph = IPUOF__POD_HELLO__INIT;
    char self[CFG_POD_NAME_MAX], addr[256], err[512];
    int rc = IPUOF_OK;
    unsigned cut, delay;

    pthread_mutex_lock(&p->mu);
    cut = p->link_cut[i];
    delay = p->link_ms[i];
    if (delay != 0 && cut == 0) { /* link:latency: the hello is slow (a stop ends the wait) */
        struct timespec until;
        uint64_t end = mono_ms() + delay;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)(delay / 1000);
        until.tv_nsec += (long)(delay % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!p->stop && mono_ms() < end &&
               pthread_cond_timedwait(&p->wake, &p->mu, &until) == 0)
            ;
    }
    snprintf(self, sizeof self, "%s", p->host[0].name);
    snprintf(addr, sizeof addr, "%s", p->host[i].addr);
    ph.num_ipus = p->host[0].num_ipus;
    ph.free_ipus = p->host[0].free_ipus;
    pthread_mutex_unlock(&p->mu);
    ph.name = self;
    err[0] = '\0';
    if (cut != 0) {
        rc = IPUOF_E_CLOSED;
        errbuf_set(err, sizeof err, "the link to it is partitioned by injected fault %u "
                   "(link:partition:%s; ipuctl fault clear %u heals it)", cut,
                   p->host[i].name, cut);
    } else if (p->conn[i] == NULL)
        rc = pod_client_open(&p->conn[i], addr, p->token, self, p->timeout_ms, err, sizeof err);
    if (rc == IPUOF_OK) {
        req.body_case = IPUOF__HEADER__BODY_POD_HELLO;
        req.pod_hello = &ph;
        rc = pod_client_call(p->conn[i], &req, NULL, 0, IPUOF__HEADER__BODY_POD_HELLO_REPLY,
                             &reply, NULL, NULL, p->timeout_ms, err, sizeof err);
    }
    pthread_mutex_lock(&p->mu);
    if (rc == IPUOF_OK && strcmp(reply->pod_hello_reply->name, p->host[i].name) != 0) {
        rc = IPUOF_E_AUTH;
        errbuf_set(err, sizeof err, "the daemon at %s is host '%s' of its Pod, not '%s' as "
                   "[pod] peers says", addr, reply->pod_hello_reply->name, p->host[i].name);
    }
    if (rc == IPUOF_OK &&
        reply->pod_hello_reply->free_ipus > reply->pod_hello_reply->num_ipus) {
        rc = IPUOF_E_PROTO;
        errbuf_set(err, sizeof err, "the daemon at %s says %u of its %u IPUs are free: more "
                   "than it has", addr, reply->pod_hello_reply->free_ipus,
                   reply->pod_hello_reply->num_ipus);
    }
    if (rc == IPUOF_OK) {
        if (p->host[i].state != POD_REACHABLE)
            log_info("pod: peer %s (%s) is reachable: %u IPUs, %u free", p->host[i].name, addr,
                     reply->pod_hello_reply->num_ipus, reply->pod_hello_reply->free_ipus);
        p->host[i].state = POD_REACHABLE;
        p->host[i].num_ipus = reply->pod_hello_reply->num_ipus;
        p->host[i].free_ipus = reply->pod_hello_reply->free_ipus;
        p->host[i].seen_ms = mono_ms();
        p->host[i].error[0] = '\0';
        peer_client_addr(reply->pod_hello_reply->client_address, addr, p->host[i].client_addr,
                         sizeof p->host[i].client_addr);
    } else {
        if (p->host[i].state != POD_UNREACHABLE)
            log_warn("pod: peer %s (%s) is unreachable: %s", p->host[i].name, addr, err);
        p->host[i].state = POD_UNREACHABLE;
        snprintf(p->host[i].error, sizeof p->host[i].error, "%s", err);
    }
    pthread_mutex_unlock(&p->mu);
    if (rc != IPUOF_OK) { /* the next hello opens a new connection */
        pod_client_close(p->conn[i]);
        p->conn[i] = NULL;
    }
    ipuof_frame_header_free(reply);
}

static void *
hello_thread(void *arg)
{
    struct pod *p = arg;

    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i <= p->npeers; i++)
            hello_peer(p, i);
        pthread_mutex_lock(&p->mu);
        if (p->stop)
            break;
        {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += (time_t)p->interval_s;
            pthread_cond_timedwait(&p->wake, &p->mu, &until);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int
pod_start(struct pod **out, const struct cfg *c, const char *listen_addr,
          unsigned num_ipus, char *err, size_t errlen)
{
    struct cfg_pod_peer peers[CFG_POD_MAX_PEERS];
    struct pod *p;
    int n;

    *out = NULL;
    n = cfg_pod_peers(c, peers, err, errlen);
    if (n <= 0)
        return n;
    p = calloc(1, sizeof *p);
    if (p == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->npeers = n;
    snprintf(p->host[0].name, sizeof p->host[0].name, "%s", c->pod_name);
    snprintf(p->host[0].addr, sizeof p->host[0].addr, "%s", listen_addr);
    p->host[0].state = POD_SELF;
    p->host[0].num_ipus = num_ipus;
    p->host[0].free_ipus = num_ipus;
    for (int i = 0; i < n; i++) {
        /* same sizes, both terminated (cfg_pod_peers) */
        memcpy(p->host[i + 1].name, peers[i].name, sizeof p->host[i + 1].name);
        memcpy(p->host[i + 1].addr, peers[i].addr, sizeof p->host[i + 1].addr);
    }
    snprintf(p->token, sizeof p->token, "%s", c->pod_token);
    p->interval_s = c->pod_hello_interval;
    /* A hello takes at most timeout_ms, and never much longer than the interval: the
     * thread says hello to each peer in turn, and a stop waits for it. */
    p->timeout_ms = (int)c->pod_timeout_ms;
    if (p->timeout_ms > (int)p->interval_s * 1000 + 1000)
        p->timeout_ms = (int)p->interval_s * 1000 + 1000;
    if (pthread_create(&p->thread, NULL, hello_thread, p) != 0) {
        errbuf_set(err, errlen, "cannot start the Pod's hello thread");
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->wake);
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void
pod_set_free(struct pod *p, unsigned free_ipus)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->host[0].free_ipus = free_ipus;
    pthread_mutex_unlock(&p->mu);
}

void
pod_set_link(struct pod *p, const char *name, unsigned cut_id, unsigned latency_ms)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    for (int i = 1; i <= p->npeers; i++) {
        if (strcmp(p->host[i].name, name) != 0)
            continue;
        if (p->link_cut[i] != cut_id || p->link_ms[i] != latency_ms) {
            p->link_cut[i] = cut_id;
            p->link_ms[i] = latency_ms;
            pthread_cond_signal(&p->wake);
        }
    }
    pthread_mutex_unlock(&p->mu);
}

int
pod_hosts(struct pod *p, struct pod_host *out, int max)
{
    int n = 0;

    if (p == NULL)
        return 0;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i <= p->npeers && n < max; i++)
        out[n++] = p->host[i];
    pthread_mutex_unlock(&p->mu);
    return n;
}

int
pod_is_peer(const struct pod *p, const char *name)
{
    if (p == NULL)
        return 0;
    for (int i = 1; i <= p->npeers; i++) /* names are fixed from the start: no lock */
        if (strcmp(p->host[i].name, name) == 0)
            return 1;
    return 0;
}

int
pod_peer_addr(const struct pod *p, const char *name, char *addr, size_t len)
{
    if (p == NULL)
        return 0;
    for (int i = 1; i <= p->npeers; i++) { /* fixed from the start: no lock */
        if (strcmp(p->host[i].name, name) == 0) {
            snprintf(addr, len, "%s", p->host[i].addr);
            return 1;
        }
    }
    return 0;
}

void
pod_stop(struct pod *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    for (int i = 0; i <= p->npeers; i++)
        pod_client_close(p->conn[i]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p);
}
