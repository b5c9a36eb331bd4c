/*
 * dpair.c — see dpair.h.
 */
#include "dpair.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "frame.h"
#include "ipuof/client.h"
#include "log.h"

static void
on_drain_noop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

int
dpair_srv_init(struct srv *s, unsigned ipus, unsigned workers)
{
    memset(s, 0, sizeof *s);
    evthread_use_pthreads();
    log_set_level(0);
    cfg_defaults(&s->cfg);
    s->cfg.ipus = ipus;
    s->cfg.admin_socket[0] = '\0';
    s->base = event_base_new();
    if (s->base == NULL)
        return -1;
    s->conn_hooks = &srv_conn_hooks;
    s->started_ms = srv_now_ms();
    s->inv = dev_inventory_new(ipus, s->cfg.ipu_memory, s->cfg.tiles);
    cache_init(&s->cache, s->cfg.cache_entries, s->cfg.host_memory, s->cfg.cache_bytes);
    s->work = work_new(s->base, workers);
    s->ev_drain = evtimer_new(s->base, on_drain_noop, s);
    return s->inv != NULL && s->work != NULL && s->ev_drain != NULL ? 0 : -1;
}

void
dpair_srv_free(struct srv *s)
{
    while (s->conns != NULL)
        conn_free(s->conns);
    work_free(s->work);
    s->work = NULL;
    /* Bufferevents freed with deferred callbacks are finalized by the loop: let it run. */
    for (int i = 0; i < 3; i++)
        event_base_loop(s->base, EVLOOP_NONBLOCK);
    cache_destroy(&s->cache);
    dev_inventory_free(s->inv);
    if (s->ev_drain != NULL)
        event_free(s->ev_drain);
    event_base_free(s->base);
    memset(s, 0, sizeof *s);
}

struct bufferevent *
dpair_connect(struct srv *s, int via_admin, struct conn **conn)
{
    struct bufferevent *pair[2];

    if (bufferevent_pair_new(s->base, BEV_OPT_DEFER_CALLBACKS, pair) != 0)
        return NULL;
    *conn = conn_new_bev(s, pair[0], "pair", via_admin);
    if (*conn == NULL) {
        bufferevent_free(pair[1]);
        return NULL;
    }
    bufferevent_enable(pair[1], EV_READ | EV_WRITE);
    return pair[1];
}

int
dpair_send_partial(struct bufferevent *b, const Ipuof__Header *h, const void *payload,
                   size_t payload_len, size_t sent)
{
    uint8_t *buf;
    size_t len;
    int rc;

    if (ipuof_frame_pack(h, (uint32_t)payload_len, &buf, &len) != IPUOF_OK)
        return -1;
    rc = bufferevent_write(b, buf, len);
    free(buf);
    if (rc == 0 && sent > 0)
        rc = bufferevent_write(b, payload, sent);
    return rc == 0 ? 0 : -1;
}

int
dpair_send(struct bufferevent *b, const Ipuof__Header *h, const void *payload, size_t len)
{
    return dpair_send_partial(b, h, payload, len, len);
}

void
dpair_pump(struct srv *s, int ms)
{
    struct timespec ts = {0, 1000000};

    for (int i = 0; i < ms; i++) {
        event_base_loop(s->base, EVLOOP_NONBLOCK);
        nanosleep(&ts, NULL);
    }
}

Ipuof__Header *
dpair_recv(struct srv *s, struct bufferevent *b, int timeout_ms, void **payload, size_t *len)
{
    struct evbuffer *in = bufferevent_get_input(b);
    struct ipuof_frame_limits lim;
    struct ipuof_frame_head head;
    struct timespec ts = {0, 1000000};
    char err[256];

    ipuof_frame_limits_default(&lim);
    lim.max_payload = 1u << 30;
    if (payload != NULL)
        *payload = NULL;
    for (int waited = 0; waited <= timeout_ms; waited++) {
        size_t avail = evbuffer_get_length(in);
        uint8_t *p;
        Ipuof__Header *h;

        if (avail >= IPUOF_FRAME_HEAD_LEN) {
            p = evbuffer_pullup(in, IPUOF_FRAME_HEAD_LEN);
            if (ipuof_frame_head_decode(p, IPUOF_FRAME_HEAD_LEN, &lim, &head, err,
                                        sizeof err) != IPUOF_OK)
                return NULL;
            if (avail >= IPUOF_FRAME_HEAD_LEN + (size_t)head.header_len + head.payload_len) {
                p = evbuffer_pullup(in, IPUOF_FRAME_HEAD_LEN + (ssize_t)head.header_len);
                h = ipuof_frame_header_unpack(p + IPUOF_FRAME_HEAD_LEN, head.header_len, &lim,
                                              err, sizeof err);
                evbuffer_drain(in, IPUOF_FRAME_HEAD_LEN + (size_t)head.header_len);
                if (payload != NULL && head.payload_len > 0) {
                    *payload = malloc(head.payload_len);
                    evbuffer_remove(in, *payload, head.payload_len);
                } else {
                    evbuffer_drain(in, head.payload_len);
                }
                if (len != NULL)
                    *len = head.payload_len;
                return h;
            }
        }
        event_base_loop(s->base, EVLOOP_NONBLOCK);
        if (evbuffer_get_length(in) == avail)
            nanosleep(&ts, NULL);
    }
    return NULL;
}

int
dpair_session(struct srv *s, struct bufferevent *b, unsigned nipus)
{
    Ipuof__Header h = IPUOF__HEADER__INIT, *r;
    Ipuof__Hello hi = IPUOF__HELLO__INIT;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;
    int ok;

    hi.protocol_version = IPUOF_PROTOCOL_VERSION;
    hi.client_name = (char *)"unit";
    h.request_id = 1;
    h.body_case = IPUOF__HEADER__BODY_HELLO;
    h.hello = &hi;
    r = dpair_send(b, &h, NULL, 0) == 0 ? dpair_recv(s, b, 5000, NULL, NULL) : NULL;
    ok = r != NULL && r->body_case == IPUOF__HEADER__BODY_HELLO_REPLY;
    ipuof_frame_header_free(r);
    if (ok && nipus > 0) {
        a.num_ipus = nipus;
        h.request_id = 2;
        h.body_case = IPUOF__HEADER__BODY_ATTACH;
        h.attach = &a;
        r = dpair_send(b, &h, NULL, 0) == 0 ? dpair_recv(s, b, 5000, NULL, NULL) : NULL;
        ok = r != NULL && r->body_case == IPUOF__HEADER__BODY_ATTACH_REPLY;
        ipuof_frame_header_free(r);
    }
    return ok ? 0 : -1;
}
