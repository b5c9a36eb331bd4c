/*
 * podfuzz.c — see podfuzz.h.
 *
 * The input: byte 0 sets max_output_bytes (2 KiB + 64 bytes a step: a few values take a
 * connection over it); then ops, each one byte (bit 0: which connection; the rest: what)
 * and its operands' bytes. Missing bytes read as 0. At the end the loop runs until every
 * get has stopped waiting, the client ends are freed, then the server: a leak, a double
 * free, a use after free or a count left non-zero (waiters, bytes of shared replies) is a
 * report.
 */
#include "podfuzz.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "dpair.h"
#include "frame.h"
#include "pod_kv.h"
#include "srv_state.h"

struct pf {
    const uint8_t *p, *end;
    struct srv *s;
    struct bufferevent *b[2];
    int reading[2];
    uint64_t id;
};

static const char *const jobs[] = {"job", "j2", "a-rather-longer-job-name-of-a-partition"};
static const char *const keys[] = {"k", "rank0", "rank1", "x"};
static const char *const names[] = {"unit", "peer", "evil", ""};
static uint8_t value[12000];

/* The next byte of the input, 0 past its end. */
static unsigned
next(struct pf *f)
{
    return f->p < f->end ? *f->p++ : 0;
}

/* Runs the loop without blocking, n times. */
static void
spin(struct pf *f, int n)
{
    for (int i = 0; i < n; i++)
        event_base_loop(f->s->base, EVLOOP_NONBLOCK);
}

/* Sends one Pod request on connection i from the next bytes (kind 0..3). */
static void
request(struct pf *f, int i, unsigned kind)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__PodHello ph = IPUOF__POD_HELLO__INIT;
    Ipuof__KvSetRequest sq = IPUOF__KV_SET_REQUEST__INIT;
    Ipuof__KvGetRequest gq = IPUOF__KV_GET_REQUEST__INIT;
    Ipuof__KvDropRequest dq = IPUOF__KV_DROP_REQUEST__INIT;
    size_t n = 0;

    h.request_id = ++f->id;
    switch (kind) {
    case 0:
        ph.name = (char *)names[next(f) % 4];
        h.body_case = IPUOF__HEADER__BODY_POD_HELLO;
        h.pod_hello = &ph;
        break;
    case 1:
        sq.job = (char *)jobs[next(f) % 3];
        sq.key = (char *)keys[next(f) % 4];
        n = (size_t)next(f) * 47; /* to 11 985: some over kv_max_value_bytes */
        h.body_case = IPUOF__HEADER__BODY_KV_SET;
        h.kv_set = &sq;
        break;
    case 2:
        gq.job = (char *)jobs[next(f) % 3];
        gq.key = (char *)keys[next(f) % 4];
        gq.timeout_ms = next(f) % 4; /* 0: no wait */
        h.body_case = IPUOF__HEADER__BODY_KV_GET;
        h.kv_get = &gq;
        break;
    default:
        dq.job = (char *)jobs[next(f) % 3];
        h.body_case = IPUOF__HEADER__BODY_KV_DROP;
        h.kv_drop = &dq;
        break;
    }
    dpair_send(f->b[i], &h, value, n);
}

/* Runs one op from the next bytes. */
static void
op(struct pf *f)
{
    unsigned o = next(f), i = o & 1, kind = (o >> 1) % 7;

    switch (kind) {
    case 0: case 1: case 2: case 3:
        request(f, (int)i, kind);
        break;
    case 4: /* the peer starts or stops reading (what it read is dropped) */
        f->reading[i] = !f->reading[i];
        if (f->reading[i])
            bufferevent_enable(f->b[i], EV_READ);
        else
            bufferevent_disable(f->b[i], EV_READ);
        evbuffer_drain(bufferevent_get_input(f->b[i]),
                       evbuffer_get_length(bufferevent_get_input(f->b[i])));
        break;
    case 5:
        spin(f, 1 + (int)(next(f) % 8));
        break;
    default: { /* raw bytes: a frame cut short, garbage */
        uint8_t raw[32];
        unsigned n = next(f) % sizeof raw;
        for (unsigned k = 0; k < n; k++)
            raw[k] = (uint8_t)next(f);
        bufferevent_write(f->b[i], raw, n);
        break;
    }
    }
}

int
podfuzz_one(const uint8_t *data, size_t len)
{
    struct pf f = {.p = data, .end = data + len};
    struct timespec ms = {0, 1000000};
    int rc = 0;

    memset(value, 'v', sizeof value);
    f.s = calloc(1, sizeof *f.s);
    if (f.s == NULL || dpair_srv_init(f.s, 1, 1) != 0 || (f.s->kv = pod_kv_new()) == NULL) {
        rc = -1;
        goto out;
    }
    snprintf(f.s->cfg.pod_name, sizeof f.s->cfg.pod_name, "unit"); /* dpair's hello name */
    f.s->cfg.max_output_bytes = 2048 + (uint64_t)next(&f) * 64;
    f.s->cfg.pod_kv_max_value_bytes = 8192;
    f.s->cfg.pod_kv_max_bytes = 32768;
    f.s->cfg.pod_kv_max_keys = 4;
    f.s->cfg.pod_max_connections = 1024; /* a share of 4 waiting gets */
    for (int i = 0; i < 2; i++) {
        struct conn *c;
        f.b[i] = dpair_connect(f.s, 0, &c);
        if (f.b[i] == NULL) {
            rc = -1;
            goto out;
        }
        c->pod = 1; /* as on_accept_pod */
        f.s->npod++;
        if (dpair_session(f.s, f.b[i], 0) != 0)
            abort(); /* a hello on the Pod port without a token must be served */
        f.reading[i] = 1;
    }
    while (f.p < f.end)
        op(&f);
    for (int t = 0; t < 20 && f.s->nkv_waiters > 0; t++) {
        spin(&f, 2);
        nanosleep(&ms, NULL);
    }
    spin(&f, 4);
out:
    for (int i = 0; i < 2; i++)
        if (f.b[i] != NULL)
            bufferevent_free(f.b[i]);
    if (f.s != NULL) {
        struct pod_kv *kv = f.s->kv;
        if (f.s->base != NULL) {
            while (f.s->conns != NULL)
                conn_free(f.s->conns);
            spin(&f, 3); /* the bufferevents' finalizers drop their shared replies */
            if (f.s->nkv_waiters != 0 || f.s->kv_waiters != NULL || f.s->kv_held != 0 ||
                f.s->npod != 0) {
                fprintf(stderr, "podfuzz: left %u waiters, %llu shared bytes, %u Pod "
                        "connections\n", f.s->nkv_waiters,
                        (unsigned long long)f.s->kv_held, f.s->npod);
                abort();
            }
            dpair_srv_free(f.s);
        }
        pod_kv_free(kv);
        free(f.s);
    }
    return rc;
}
