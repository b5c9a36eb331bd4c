/*
 * fault_fire.c — what a fired fault does (see fault_fire.h): fault_at.c fires and answers
 * through it; the requests a hung IPU holds wait here until a reset or their timer.
 */
#include "fault_fire.h"

#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "ipuof/status.h"
#include "log.h"
#include "pod.h"
#include "srv_state.h"

/* The reset that clears an error needing recovery, as ipuctl says it, for IPU ipu of
 * partition part. */
static void
reset_cmd(char *out, size_t len, int recovery, unsigned ipu, const char *part)
{
    switch (recovery) {
    case IPUOF_RECOVERY_IPU_RESET:
        snprintf(out, len, "ipuctl reset --ipu %u", ipu);
        break;
    case IPUOF_RECOVERY_LINK_RESET:
    case IPUOF_RECOVERY_PARTITION_RESET:
        snprintf(out, len, "ipuctl reset --partition %s", part);
        break;
    default:
        snprintf(out, len, "ipuctl reset --all");
        break;
    }
}

/* Sends c the error for IPU ipu (in error) of partition part, for request req_id. */
void
fault_send_ipu_error(struct conn *c, uint64_t req_id, const struct dev_ipu *d,
                     const char *part)
{
    char cmd[128];

    reset_cmd(cmd, sizeof cmd, d->recovery, d->id, part);
    conn_send_error(c, req_id, IPUOF_E_DEVICE_FAULT,
                    d->unrecoverable ? IPUOF_ERROR_UNRECOVERABLE : IPUOF_ERROR_RECOVERABLE,
                    d->unrecoverable ? IPUOF_RECOVERY_NONE : d->recovery, "device",
                    "%s; IPU %u stays in error until %s", d->error, d->id, cmd);
}

/* A request left unanswered by a hung IPU, or a host sync waiting out its time: answered
 * when the IPU is reset (fault_ipu_reset), when the wait ends, or never when its client
 * went away first (found by id, so a freed connection is never touched). */
struct fault_park {
    struct fault_park *next;
    struct srv *srv;
    uint32_t conn_id;
    uint64_t req_id;
    unsigned ipu;                /* the IPU in error it waits on */
    char part[DEV_NAME_MAX];
    struct event *timer;         /* NULL: until a reset */
    uint64_t since_ms;
};

/* The connection whose id is id, alive, or NULL. */
static struct conn *
find_conn(struct srv *s, uint32_t id)
{
    for (struct conn *c = s->conns; c != NULL; c = c->next)
        if (c->id == id && !c->dead)
            return c;
    return NULL;
}

static void
park_unlink_free(struct fault_park *k)
{
    struct fault_park **pp;

    for (pp = &k->srv->parked; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    }
    if (k->timer != NULL)
        event_free(k->timer);
    free(k);
}

/* The wait of a host-sync-timeout is over: the request gets the IPU's error. */
static void
on_park_timer(evutil_socket_t fd, short what, void *arg)
{
    struct fault_park *k = arg;
    struct conn *c = find_conn(k->srv, k->conn_id);

    (void)fd;
    (void)what;
    if (c != NULL) {
        const struct dev_ipu *d = &k->srv->inv->ipus[k->ipu];
        conn_enter(c);
        if (d->state == DEV_ERROR)
            fault_send_ipu_error(c, k->req_id, d, k->part);
        else /* cleared meanwhile (fault_ipu_reset answers first, so not by a reset) */
            conn_send_error(c, k->req_id, IPUOF_E_DEVICE_RESET, IPUOF_ERROR_RECOVERABLE,
                            IPUOF_RECOVERY_REATTACH, "device", "IPU %u was reset while the "
                            "host sync waited; attach again", k->ipu);
        conn_release_frames(c);
        conn_leave(c);
    }
    park_unlink_free(k);
}

/* Leaves c's request req_id unanswered on IPU ipu (frames held: c sends nothing more until
 * it is answered); wait_ms > 0 answers it then. 0, or -1 when out of memory. */
static int
park(struct conn *c, uint64_t req_id, unsigned ipu, const char *part, unsigned wait_ms)
{
    struct srv *s = c->srv;
    struct fault_park *k = calloc(1, sizeof *k);

    if (k == NULL)
        return -1;
    k->srv = s;
    k->conn_id = c->id;
    k->req_id = req_id;
    k->ipu = ipu;
    k->since_ms = srv_now_ms();
    snprintf(k->part, sizeof k->part, "%s", part);
    if (wait_ms > 0) {
        struct timeval tv = {(time_t)(wait_ms / 1000), (suseconds_t)(wait_ms % 1000) * 1000};
        k->timer = evtimer_new(s->base, on_park_timer, k);
        if (k->timer == NULL) {
            free(k);
            return -1;
        }
        evtimer_add(k->timer, &tv);
    }
    k->next = s->parked;
    s->parked = k;
    conn_hold_frames(c);
    return 0;
}

void
fault_ipu_reset(struct srv *s, unsigned ipu)
{
    struct fault_park *k = s->parked, *next;

    for (; k != NULL; k = next) {
        struct conn *c;
        next = k->next;
        if (k->ipu != ipu)
            continue;
        c = find_conn(s, k->conn_id);
        if (c != NULL) {
            conn_enter(c);
            conn_send_error(c, k->req_id, IPUOF_E_DEVICE_RESET, IPUOF_ERROR_RECOVERABLE,
                            IPUOF_RECOVERY_REATTACH, "device", "IPU %u was reset after %llu ms "
                            "without an answer (hung); its partition '%s' is gone: attach "
                            "again", ipu, (unsigned long long)(srv_now_ms() - k->since_ms),
                            k->part);
            conn_release_frames(c);
            conn_leave(c);
        }
        park_unlink_free(k);
    }
    if (faults_rearm(&s->faults, ipu) > 0)
        log_warn("IPU %u reset: a fault armed with --rearm-on-reset is armed again", ipu);
}

void
fault_park_free_all(struct srv *s)
{
    while (s->parked != NULL)
        park_unlink_free(s->parked);
}

/*
 * Fires f on partition IPUs first .. first + count - 1 named part: the IPUs it hits go
 * into error (with the sentence it makes, also written to msg). The IPUs: the fault's own
 * IPU, or the partition's first, for an IPU-level error; the whole partition for link,
 * partition and full resets and an unrecoverable error not aimed at one IPU.
 */
void
fault_fire(struct srv *s, struct fault *f, unsigned first, unsigned count,
           const char *part, char *msg, size_t len)
{
    char kind[FAULTS_KIND_MAX], tail[160];
    int whole = faults_level(f->recovery) >= 2 && f->kind != FAULT_UNRECOVERABLE;
    unsigned lo = f->has_ipu ? f->ipu : first, n = 1;

    if (whole || (f->kind == FAULT_UNRECOVERABLE && !f->has_ipu)) {
        lo = first;
        n = count;
    }
    faults_kind_name(f, kind, sizeof kind);
    snprintf(tail, sizeof tail, "(injected fault %u, %s at %s)", f->id, kind,
             faults_at_name(f->at));
    switch (f->kind) {
    case FAULT_DAEMON_KILL:
        /* What the fault is: the daemon dies as a SIGKILL (OOM killer, kill -9) kills it, with
         * no cleanup; systemd's Restart= brings it back. Logged first, as nothing else is. */
        log_error("fault %u (daemon-kill at %s): ipuofd dies now as if killed (SIGKILL)",
                  f->id, faults_at_name(f->at));
        raise(SIGKILL);
        return;
    case FAULT_FABRIC_DISCONNECT:
        snprintf(msg, len, "fabric disconnect %s", tail);
        return; /* the IPUs are fine */
    case FAULT_TILE_OOM: {
        uint64_t tile = s->inv->ipus[lo].tiles ? s->inv->ipus[lo].memory_capacity /
                                                   s->inv->ipus[lo].tiles : 638976;
        /* Poplar's graph_memory_allocation_error, as PopTorch shows its type. */
        snprintf(msg, len, "poplar_graph_memory_allocation_error: Out of memory on tile 0: "
                 "%llu bytes used but tiles only have %llu bytes of memory on IPU %u %s",
                 (unsigned long long)(tile + tile / 18), (unsigned long long)tile, lo, tail);
        return; /* the IPU is fine: the program is too big */
    }
    case FAULT_STREAM_OOM:
        snprintf(msg, len, "poplar_stream_memory_allocation_error: Out of memory. Single "
                 "stream of length 149766584 in bufferIndex 1 on IPU %u %s", lo, tail);
        return;
    case FAULT_HOST_SYNC_TIMEOUT:
        snprintf(msg, len, "recoverable_runtime_error: [Recovery action: IPU_RESET] IPUDevice: "
                 "still waiting for host sync after: %u seconds on IPU %u %s",
                 (f->wait_ms + 999) / 1000, lo, tail); /* short: an IPU keeps 255 bytes */
        break;
    case FAULT_SOC_ERROR:
        snprintf(msg, len, "recoverable_runtime_error: [Recovery action: IPU_RESET] "
                 "CIUERRVR.IPUSOFTERR error on IPU %u of partition '%s' %s", lo, part, tail);
        break;
    case FAULT_HANG:
        snprintf(msg, len, "recoverable_runtime_error: [Recovery action: IPU_RESET] IPU %u of "
                 "partition '%s' does not answer (hung) %s", lo, part, tail);
        break;
    case FAULT_UNRECOVERABLE:
        snprintf(msg, len, "unrecoverable_runtime_error: IPU %u of partition '%s' is out of "
                 "service %s", lo, part, tail);
        break;
    default:
        snprintf(msg, len, "recoverable_runtime_error: [Recovery action: %s] error on IPU %u "
                 "of partition '%s' %s", ipuof_recovery_name(f->recovery), lo, part, tail);
        break;
    }
    for (unsigned i = lo; i < lo + n && i < s->inv->n; i++) {
        dev_set_error(s->inv, i, f->recovery, f->kind == FAULT_UNRECOVERABLE, part, msg);
        s->inv->ipus[i].error_ms = srv_now_ms();
        if (i < 64)
            f->hit |= 1ull << i;
    }
}

int
fault_answer(struct conn *c, uint64_t req_id, const struct fault *f, unsigned first,
             unsigned count, const char *part, const char *msg)
{
    struct srv *s = c->srv;
    unsigned bad = first;

    switch (f->kind) {
    case FAULT_FABRIC_DISCONNECT:
        conn_kill(c, "injected fabric-disconnect");
        return 0;
    case FAULT_TILE_OOM:
    case FAULT_STREAM_OOM:
        conn_send_error(c, req_id, IPUOF_E_DEVICE_OOM, IPUOF_ERROR_PLAIN, IPUOF_RECOVERY_NONE,
                        "poplar", "%s", msg);
        return 0;
    default:
        break;
    }
    dev_error_need(s->inv, first, count, &bad);
    if ((f->kind == FAULT_HANG || (f->kind == FAULT_HOST_SYNC_TIMEOUT && f->wait_ms > 0)) &&
        park(c, req_id, bad, part, f->kind == FAULT_HANG ? 0 : f->wait_ms) == 0)
        return 1;
    fault_send_ipu_error(c, req_id, &s->inv->ipus[bad], part);
    return 0;
}

void
fault_links_sync(struct srv *s)
{
    struct pod_host hosts[CFG_POD_MAX_PEERS + 1];
    int n = pod_hosts(s->pod, hosts, CFG_POD_MAX_PEERS + 1);
    uint64_t now = srv_now_ms();

    for (int i = 0; i < n; i++) {
        unsigned ms = 0, cut;
        if (hosts[i].state == POD_SELF)
            continue;
        cut = faults_link(&s->faults, hosts[i].name, now, &ms);
        pod_set_link(s->pod, hosts[i].name, cut, ms);
    }
}
