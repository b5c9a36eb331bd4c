/*
 * req_pod.c — the requests of the Pod port: a peer's hello (PodHello) and the rendezvous
 * store (KvSet, KvGet with a wait, KvDrop) over pod_kv.c. Served only to connections
 * accepted on the Pod port whose hello carried the Pod's token (dispatch.c, req_session.c).
 *
 * A get of a key not yet set waits (a kv_waiter with a timer) until a set of that key, its
 * timeout, or its connection going away; at most POD_KV_MAX_WAITERS wait at once, of them
 * at most POD_KV_MAX_WAITERS / [pod] max_connections per connection and kv_max_keys per job.
 * A set answers its waiters with one shared copy of the value (evbuffer references, freed
 * when the last of them is written), counted against kv_max_bytes until then.
 *
 * Only hosts of the Pod use the store: a connection whose hello named no host of the Pod
 * (this daemon or a peer), or whose PodHello was refused, is refused.
 *
 * Sending to a connection other than the one being served (a waiter's) holds it with
 * conn_enter/conn_leave around the send and the bookkeeping (docs/architecture.md).
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "ipuof/status.h"
#include "log.h"
#include "pod.h"
#include "pod_kv.h"
#include "srv_state.h"

#define POD_KV_MAX_WAITERS 4096
#define POD_KV_MAX_WAIT_MS 3600000u

struct kv_waiter {
    struct conn *c;
    uint64_t req_id;
    char job[POD_KV_JOB_MAX + 1];
    char key[POD_KV_KEY_MAX + 1];
    uint32_t timeout_ms;
    struct event *timer;
    struct kv_waiter *next;
};

/* The store's limits from the config, with held bytes counted beside the table. */
static void
limits_of(const struct srv *s, struct pod_kv_limits *lim, uint64_t held)
{
    lim->max_keys = s->cfg.pod_kv_max_keys;
    lim->max_value = s->cfg.pod_kv_max_value_bytes;
    lim->max_bytes = s->cfg.pod_kv_max_bytes;
    lim->held = held;
}

/* One copy of a value shared by the replies to every get it answers. */
struct kv_shared {
    struct srv *s;
    unsigned refs;
    size_t n;
    uint8_t data[];
};

/* Bytes a shared value counts against kv_max_bytes while replies hold it. */
static size_t
shared_cost(size_t n)
{
    return sizeof(struct kv_shared) + n + 16;
}

/* A reply's reference to sh is written or dropped (libevent's cleanup callback). */
static void
shared_unref(const void *data, size_t len, void *arg)
{
    struct kv_shared *sh = arg;

    (void)data;
    (void)len;
    if (--sh->refs > 0)
        return;
    sh->s->kv_held -= shared_cost(sh->n);
    free(sh);
}

/* The most gets one connection may have waiting: its share of POD_KV_MAX_WAITERS. */
static unsigned
waiter_share(const struct srv *s)
{
    unsigned max = s->cfg.pod_max_connections > 0 ? s->cfg.pod_max_connections : 1;

    return POD_KV_MAX_WAITERS / max > 0 ? POD_KV_MAX_WAITERS / max : 1;
}

/* Unlinks w from s's waiters and frees it. */
static void
waiter_free(struct srv *s, struct kv_waiter *w)
{
    for (struct kv_waiter **pp = &s->kv_waiters; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            s->nkv_waiters--;
            w->c->kv_waiting--;
            break;
        }
    }
    if (w->timer != NULL)
        event_free(w->timer);
    free(w);
}

/* Answers a get with the value v[0..n), copied, or with a reference to sh when not NULL
 * (v is then sh's data; the reference is dropped once written). */
static void
send_value(struct conn *c, uint64_t req_id, const void *v, size_t n, struct kv_shared *sh)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__KvGetReply gr = IPUOF__KV_GET_REPLY__INIT;

    gr.bytes = n;
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_KV_GET_REPLY;
    r.kv_get_reply = &gr;
    if (sh == NULL || n == 0) {
        conn_send(c, &r, v, (uint32_t)n);
        return;
    }
    sh->refs++;
    conn_send_ref(c, &r, sh->data, n, shared_unref, sh);
}

/* A get's wait ran out: answered with a timeout. c is held (conn_enter) around the reply,
 * which may take it over its output limit: then it is freed at conn_leave, after w is. */
static void
on_wait_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct kv_waiter *w = arg;
    struct conn *c = w->c;

    (void)fd;
    (void)what;
    conn_enter(c);
    conn_send_error(c, w->req_id, IPUOF_E_TIMEOUT, IPUOF_ERROR_RECOVERABLE,
                    IPUOF_RECOVERY_RETRY, "pod",
                    "rendezvous key '%s' of job '%s' was not set within %u ms: a daemon of "
                    "the partition has not come (or has gone)", w->key, w->job, w->timeout_ms);
    waiter_free(c->srv, w);
    conn_leave(c);
}

/* Which fields of a KvSet/KvGet are wrong, as a sentence; NULL when none. */
static const char *
bad_names(const char *job, const char *key, char *buf, size_t len)
{
    size_t jl = strlen(job), kl = strlen(key);

    if (jl >= 1 && jl <= POD_KV_JOB_MAX && kl >= 1 && kl <= POD_KV_KEY_MAX)
        return NULL;
    snprintf(buf, len, "a rendezvous request needs a job of 1 to %d bytes and a key of 1 to "
             "%d bytes (got %zu and %zu)", POD_KV_JOB_MAX, POD_KV_KEY_MAX, jl, kl);
    return buf;
}

void
req_pod_hello(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    struct srv *s = c->srv;
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__PodHelloReply pr = IPUOF__POD_HELLO_REPLY__INIT;
    char caddr[300];

    (void)payload_len;
    if (strcmp(h->pod_hello->name, s->cfg.pod_name) == 0) {
        log_warn("pod: hello at %s names this daemon's own host '%s'", c->peer,
                 s->cfg.pod_name);
        c->pod_refused = 1;
        conn_send_error(c, req_id, IPUOF_E_AUTH, 0, 0, "pod",
                        "host '%s' is this daemon's own [pod] name: the hello comes from "
                        "another daemon configured with the same name (each host of a Pod "
                        "needs a name of its own in [pod] name) or from this daemon itself",
                        s->cfg.pod_name);
        return;
    }
    if (!pod_is_peer(s->pod, h->pod_hello->name)) {
        log_warn("pod: hello from '%s' at %s, which is not a peer in [pod] peers",
                 h->pod_hello->name, c->peer);
        c->pod_refused = 1;
        conn_send_error(c, req_id, IPUOF_E_AUTH, 0, 0, "pod",
                        "host '%s' is not a peer of this daemon's Pod; add NAME=HOST:PORT for "
                        "it to [pod] peers of host '%s'", h->pod_hello->name, s->cfg.pod_name);
        return;
    }
    {   /* a link:partition to that peer armed here cuts both ways */
        unsigned ms, cut = faults_link(&s->faults, h->pod_hello->name, srv_now_ms(), &ms);
        if (cut != 0) {
            conn_send_error(c, req_id, IPUOF_E_CLOSED, 0, 0, "pod", "the link between "
                            "hosts '%s' and '%s' is partitioned by injected fault %u on "
                            "host '%s' (link:partition:%s)", s->cfg.pod_name,
                            h->pod_hello->name, cut, s->cfg.pod_name, h->pod_hello->name);
            return;
        }
    }
    pr.name = s->cfg.pod_name;
    pr.num_ipus = s->inv->n;
    pr.free_ipus = dev_free_count(s->inv);
    pod_client_address(s->cfg.listen, s->bound_port, caddr, sizeof caddr);
    pr.client_address = caddr; /* where vipu reaches this daemon (pod_peers.c) */
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_POD_HELLO_REPLY;
    r.pod_hello_reply = &pr;
    conn_send(c, &r, NULL, 0);
}

/*
 * Answers every get waiting for job's key with v[0..n). The waiters are taken off the list
 * first and each one's connection is held (conn_enter) until every reply is queued: a reply
 * that takes a connection over max_output_bytes kills it, and it is freed (with whatever
 * else it waits for, req_pod_forget) only at its last conn_leave, after its waiters here.
 */
static void
answer_waiters(struct srv *s, const char *job, const char *key, const void *v, size_t n)
{
    struct kv_waiter *ready = NULL, *w, *next, **pp = &s->kv_waiters;
    struct kv_shared *sh = NULL;

    while ((w = *pp) != NULL) {
        if (strcmp(w->job, job) != 0 || strcmp(w->key, key) != 0) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        s->nkv_waiters--;
        w->c->kv_waiting--;
        w->next = ready;
        ready = w;
        conn_enter(w->c);
    }
    if (ready != NULL && n > 0 && (sh = malloc(sizeof *sh + n)) != NULL) {
        sh->s = s;
        sh->refs = 1; /* this function's, dropped below */
        sh->n = n;
        memcpy(sh->data, v, n);
        s->kv_held += shared_cost(n);
    }
    for (w = ready; w != NULL; w = w->next) {
        if (sh == NULL && n > 0)
            conn_send_error(w->c, w->req_id, IPUOF_E_NOMEM, 0, 0, "pod", "out of memory "
                            "answering the wait for rendezvous key '%s'", key);
        else
            send_value(w->c, w->req_id, sh != NULL ? sh->data : v, n, sh);
    }
    if (sh != NULL)
        shared_unref(sh->data, n, sh);
    for (w = ready; w != NULL; w = next) {
        struct conn *c = w->c;
        next = w->next;
        event_free(w->timer);
        free(w);
        conn_leave(c);
    }
}

/* 1 when a get waits for job's key. */
static int
has_waiter(const struct srv *s, const char *job, const char *key)
{
    for (const struct kv_waiter *w = s->kv_waiters; w != NULL; w = w->next)
        if (strcmp(w->key, key) == 0 && strcmp(w->job, job) == 0)
            return 1;
    return 0;
}

/* Gets waiting for keys of job. */
static unsigned
job_waiters(const struct srv *s, const char *job)
{
    unsigned n = 0;

    for (const struct kv_waiter *w = s->kv_waiters; w != NULL; w = w->next)
        n += strcmp(w->job, job) == 0;
    return n;
}

/*
 * 1 (and the refusal sent) when c may not use the rendezvous store: its PodHello was
 * refused, or its hello named no host of the Pod (this daemon or one of its [pod] peers;
 * ipuofd.conf(5): a rendezvous from a host not in peers is refused).
 */
static int
store_refused(struct conn *c, uint64_t req_id)
{
    const struct srv *s = c->srv;

    if (c->pod_refused) {
        conn_send_error(c, req_id, IPUOF_E_AUTH, 0, 0, "pod", "this connection's PodHello "
                        "was refused; the rendezvous store serves only the hosts of this "
                        "daemon's Pod");
        return 1;
    }
    if (strcmp(c->name, s->cfg.pod_name) != 0 && !pod_is_peer(s->pod, c->name)) {
        conn_send_error(c, req_id, IPUOF_E_AUTH, 0, 0, "pod", "the rendezvous store serves "
                        "only the hosts of this daemon's Pod (host '%s' and its [pod] peers); "
                        "this connection's hello named '%s': name the sending host's [pod] "
                        "name in the hello", s->cfg.pod_name, c->name);
        return 1;
    }
    return 0;
}

/* The state of one KvSet whose value is arriving. */
struct kv_set {
    uint64_t req_id;
    char job[POD_KV_JOB_MAX + 1];
    char key[POD_KV_KEY_MAX + 1];
    uint8_t *buf;
    size_t len;
    uint8_t *seg[1];
    size_t seg_len[1];
};

/* Stores the value and answers the set and every get waiting for that key. */
static void
kv_set_store(struct conn *c, struct kv_set *ks)
{
    struct srv *s = c->srv;
    struct pod_kv_limits lim;
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__KvSetReply sr = IPUOF__KV_SET_REPLY__INIT;
    char err[512];
    int rc;

    limits_of(s, &lim, s->kv_held + (has_waiter(s, ks->job, ks->key) && ks->len > 0
                                         ? shared_cost(ks->len) : 0));
    rc = pod_kv_set(s->kv, &lim, ks->job, ks->key, ks->buf, ks->len, err, sizeof err);
    if (rc != IPUOF_OK) {
        conn_send_error(c, ks->req_id, rc, 0, 0, "pod", "%s", err);
        return;
    }
    r.request_id = ks->req_id;
    r.body_case = IPUOF__HEADER__BODY_KV_SET_REPLY;
    r.kv_set_reply = &sr;
    conn_send(c, &r, NULL, 0);
    answer_waiters(s, ks->job, ks->key, ks->buf, ks->len);
}

static void
kv_set_done(struct conn *c, void *arg)
{
    struct kv_set *ks = arg;

    kv_set_store(c, ks);
    free(ks->buf);
    free(ks);
}

static void
kv_set_abort(struct conn *c, void *arg)
{
    struct kv_set *ks = arg;

    (void)c;
    free(ks->buf);
    free(ks);
}

void
req_kv_set(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__KvSetRequest *q = h->kv_set;
    struct srv *s = c->srv;
    struct kv_set *ks = NULL;
    struct conn_sink sink = {0};
    char buf[256];
    const char *bad = bad_names(q->job, q->key, buf, sizeof buf);

    if (store_refused(c, req_id))
        return; /* the payload is discarded */
    if (bad != NULL) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "pod", "%s", bad);
        return;
    }
    /* Checked before a byte is stored: the payload is discarded on a refusal. */
    if (payload_len > s->cfg.pod_kv_max_value_bytes) {
        conn_send_error(c, req_id, IPUOF_E_TOO_LARGE, 0, 0, "pod",
                        "rendezvous value of key '%s' is %u bytes; at most %u are stored "
                        "([pod] kv_max_value_bytes)", q->key, payload_len,
                        s->cfg.pod_kv_max_value_bytes);
        return;
    }
    ks = calloc(1, sizeof *ks);
    if (ks == NULL || (ks->buf = malloc(payload_len ? payload_len : 1)) == NULL) {
        free(ks);
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "pod", "out of memory");
        return;
    }
    ks->req_id = req_id;
    snprintf(ks->job, sizeof ks->job, "%s", q->job);
    snprintf(ks->key, sizeof ks->key, "%s", q->key);
    ks->len = payload_len;
    if (payload_len == 0) {
        kv_set_done(c, ks);
        return;
    }
    ks->seg[0] = ks->buf;
    ks->seg_len[0] = payload_len;
    sink.seg = ks->seg;
    sink.seg_len = ks->seg_len;
    sink.nseg = 1;
    sink.done = kv_set_done;
    sink.abort = kv_set_abort;
    sink.arg = ks;
    conn_set_sink(c, &sink);
}

void
req_kv_get(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__KvGetRequest *q = h->kv_get;
    struct srv *s = c->srv;
    struct kv_waiter *w;
    const void *v;
    size_t n;
    struct timeval tv;
    char buf[256];
    const char *bad = bad_names(q->job, q->key, buf, sizeof buf);

    (void)payload_len;
    if (store_refused(c, req_id))
        return;
    if (bad != NULL) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "pod", "%s", bad);
        return;
    }
    if (pod_kv_get(s->kv, q->job, q->key, &v, &n)) {
        send_value(c, req_id, v, n, NULL);
        return;
    }
    if (q->timeout_ms == 0) {
        conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "pod",
                        "rendezvous key '%s' of job '%s' is not set", q->key, q->job);
        return;
    }
    if (q->timeout_ms > POD_KV_MAX_WAIT_MS) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "pod",
                        "a rendezvous get waits at most %u ms; %u ms were asked",
                        POD_KV_MAX_WAIT_MS, q->timeout_ms);
        return;
    }
    if (s->nkv_waiters >= POD_KV_MAX_WAITERS) {
        conn_send_error(c, req_id, IPUOF_E_TOO_MANY, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_RETRY, "pod",
                        "%u rendezvous gets already wait, the most this daemon keeps; retry "
                        "later", s->nkv_waiters);
        return;
    }
    if (c->kv_waiting >= waiter_share(s)) {
        conn_send_error(c, req_id, IPUOF_E_TOO_MANY, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_RETRY, "pod",
                        "this connection already has %u rendezvous gets waiting, its share of "
                        "the %u this daemon keeps (%u / [pod] max_connections); retry later",
                        c->kv_waiting, POD_KV_MAX_WAITERS, POD_KV_MAX_WAITERS);
        return;
    }
    if (job_waiters(s, q->job) >= s->cfg.pod_kv_max_keys) {
        conn_send_error(c, req_id, IPUOF_E_TOO_MANY, IPUOF_ERROR_RECOVERABLE,
                        IPUOF_RECOVERY_RETRY, "pod",
                        "job '%s' already has %u rendezvous gets waiting, as many as it may "
                        "hold keys ([pod] kv_max_keys); retry later", q->job,
                        s->cfg.pod_kv_max_keys);
        return;
    }
    w = calloc(1, sizeof *w);
    if (w == NULL || (w->timer = evtimer_new(s->base, on_wait_timeout, w)) == NULL) {
        free(w);
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "pod", "out of memory");
        return;
    }
    w->c = c;
    w->req_id = req_id;
    w->timeout_ms = q->timeout_ms;
    snprintf(w->job, sizeof w->job, "%s", q->job);
    snprintf(w->key, sizeof w->key, "%s", q->key);
    tv.tv_sec = q->timeout_ms / 1000;
    tv.tv_usec = (q->timeout_ms % 1000) * 1000;
    evtimer_add(w->timer, &tv);
    w->next = s->kv_waiters;
    s->kv_waiters = w;
    s->nkv_waiters++;
    c->kv_waiting++;
}

void
req_kv_drop(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__KvDropReply dr = IPUOF__KV_DROP_REPLY__INIT;

    (void)payload_len;
    if (store_refused(c, req_id))
        return;
    dr.dropped = pod_kv_drop(c->srv->kv, h->kv_drop->job);
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_KV_DROP_REPLY;
    r.kv_drop_reply = &dr;
    conn_send(c, &r, NULL, 0);
}

void
req_pod_forget(struct conn *c)
{
    struct srv *s = c->srv;
    struct kv_waiter *next;

    for (struct kv_waiter *w = s->kv_waiters; w != NULL; w = next) {
        next = w->next;
        if (w->c == c)
            waiter_free(s, w);
    }
}

void
req_pod_free_all(struct srv *s)
{
    while (s->kv_waiters != NULL)
        waiter_free(s, s->kv_waiters);
}
