/*
 * req_admin.c — status, health and reset: what an operator sees and does (the partition
 * service's verbs are in req_vipu.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "fault_fire.h"
#include "faults.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "log.h"
#include "pod.h"
#include "srv_state.h"
#include "sim.h"
#include "wiremap.h"
#include "metrics_count.h"

/* The clock of the configuration's device type ([cost] ipu_type, checked at load). */
static double
ipu_clock_hz(const struct cfg *cfg)
{
    struct sim_cost_cfg k;
    int t = sim_ipu_type_parse(cfg->cost_ipu_type);

    sim_cost_cfg_init(&k);
    sim_cost_cfg_type(&k, t >= 0 ? t : SIM_IPU_GC200);
    return k.clock_hz;
}

void
req_status(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    struct srv *s = c->srv;
    struct dev_inventory *inv = s->inv;
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__StatusReply sr = IPUOF__STATUS_REPLY__INIT;
    Ipuof__IpuInfo info[CFG_MAX_IPUS];
    Ipuof__IpuInfo *infop[CFG_MAX_IPUS];
    Ipuof__Holder holders[CFG_MAX_IPUS];
    struct pod_host hosts[CFG_POD_MAX_PEERS + 1];
    Ipuof__PodHost ph[CFG_POD_MAX_PEERS + 1];
    Ipuof__PodHost *php[CFG_POD_MAX_PEERS + 1];
    uint64_t now = srv_now_ms();
    int nhosts;

    (void)payload_len;
    (void)h;
    for (unsigned i = 0; i < inv->n; i++) {
        const struct dev_ipu *d = &inv->ipus[i];
        Ipuof__IpuInfo *x = &info[i];

        ipuof__ipu_info__init(x);
        x->id = d->id;
        x->state = (Ipuof__IpuState)wiremap_to_wire(&wiremap_ipu_state, d->state,
                                                    IPUOF__IPU_STATE__IPU_ERROR);
        x->tiles = d->tiles;
        x->ipu_type = s->cfg.cost_ipu_type;
        x->clock_hz = ipu_clock_hz(&s->cfg);
        x->memory_capacity_bytes = d->memory_capacity;
        x->memory_used_bytes = d->memory_used;
        x->stash_bytes = d->memory_stash;
        x->offchip_bytes = d->memory_offchip;
        x->loaded = (char *)d->loaded;
        x->steps_run = d->steps_run;
        x->host_memory_used_bytes = d->host_used;
        metrics_ipu_busy(s->metrics, d->id, &x->busy_host_us, &x->busy_sim_us);
        x->error = (char *)d->error;
        if (d->state == DEV_ERROR) {
            x->recovery = (Ipuof__RecoveryAction)wiremap_to_wire(&wiremap_recovery, d->recovery,
                                                                 0);
            x->unrecoverable = d->unrecoverable;
        }
        if (d->part != NULL) {
            Ipuof__Holder *ho = &holders[i];
            ipuof__holder__init(ho);
            ho->client_id = d->part->holder.client_id;
            ho->client_name = d->part->holder.name;
            ho->pid = d->part->holder.pid;
            ho->peer = d->part->holder.peer;
            x->partition = d->part->name;
            x->holder = ho;
        }
        infop[i] = x;
    }
    sr.server_version = (char *)IPUOF_VERSION_STR;
    sr.uptime_ms = srv_now_ms() - s->started_ms;
    sr.clients = s->nconns;
    sr.waiting = s->nwaiting;
    sr.n_ipus = inv->n;
    sr.ipus = infop;
    sr.rejected_connections = s->rejected;
    sr.host_memory_bytes = s->cfg.host_memory;
    nhosts = pod_hosts(s->pod, hosts, CFG_POD_MAX_PEERS + 1);
    for (int i = 0; i < nhosts; i++) {
        ipuof__pod_host__init(&ph[i]);
        ph[i].name = hosts[i].name;
        ph[i].address = hosts[i].addr;
        ph[i].state = (Ipuof__PodHostState)wiremap_to_wire(&wiremap_pod_host_state,
                                                           hosts[i].state, 0);
        if (hosts[i].state == POD_SELF) {
            ph[i].num_ipus = inv->n;
            ph[i].free_ipus = dev_free_count(inv);
        } else {
            ph[i].num_ipus = hosts[i].num_ipus;
            ph[i].free_ipus = hosts[i].free_ipus;
            ph[i].seen_ms_ago = hosts[i].seen_ms != 0 && now > hosts[i].seen_ms
                                    ? now - hosts[i].seen_ms : 0;
        }
        ph[i].error = hosts[i].error;
        php[i] = &ph[i];
    }
    sr.n_pod_hosts = (size_t)nhosts;
    sr.pod_hosts = php;
    sr.sim_isa = (char *)sim_isa_name(sim_isa_current());
    pthread_mutex_lock(&s->cache.mu);
    sr.cache_used_bytes = s->cache.bytes;
    sr.cache_bytes = s->cache.max_bytes;
    sr.arena_used_bytes = s->cache.arena;
    sr.arena_bytes = s->cache.max_arena;
    pthread_mutex_unlock(&s->cache.mu);
    if (job_status(s, &sr.job_processes, &sr.n_job_processes) < 0) {
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        return;
    }
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_STATUS_REPLY;
    r.status_reply = &sr;
    conn_send(c, &r, NULL, 0);
    free(sr.job_processes);
}

void
req_health(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__HealthReply hr = IPUOF__HEALTH_REPLY__INIT;

    (void)payload_len;
    (void)h;
    hr.live = 1;
    hr.ready = !c->srv->stopping && c->srv->inv != NULL;
    hr.reason = (char *)(c->srv->stopping ? "shutting down" : "");
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_HEALTH_REPLY;
    r.health_reply = &hr;
    conn_send(c, &r, NULL, 0);
    if (!c->hello_done)
        conn_close_after_write(c); /* a probe: answer and hang up */
}

/* Marks in sel[] the IPUs a reset request names; 0 or an error already sent. */
static int
select_ipus(struct conn *c, uint64_t req_id, const Ipuof__ResetRequest *rq, unsigned char *sel)
{
    struct dev_inventory *inv = c->srv->inv;
    int kinds = (rq->all != 0) + (rq->n_ipu_ids > 0) + (rq->partition[0] != '\0');

    if (kinds != 1) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "daemon",
                        "reset names %s; give exactly one of: all IPUs, IPU ids, a partition",
                        kinds ? "more than one target" : "no target");
        return -1;
    }
    if (rq->all) {
        memset(sel, 1, inv->n);
        return 0;
    }
    if (rq->partition[0] != '\0') {
        struct dev_partition *p = dev_find_partition(inv, rq->partition);
        struct dev_vpart *v = dev_vpart_find(inv, rq->partition);
        int errored = 0;
        if (p == NULL && v == NULL) { /* IPUs in error remember the partition they were in */
            for (unsigned i = 0; i < inv->n; i++)
                if (inv->ipus[i].state == DEV_ERROR && inv->ipus[i].part == NULL &&
                    strcmp(inv->ipus[i].error_part, rq->partition) == 0)
                    sel[i] = 1, errored = 1;
            if (errored)
                return 0;
        }
        if (p == NULL && v == NULL) {
            conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "daemon",
                            "no partition named '%s'; ipuctl status lists the partitions",
                            rq->partition);
            return -1;
        }
        if (p != NULL)
            memset(sel + p->first, 1, p->count);
        else
            memset(sel + v->first, 1, v->count); /* a V-IPU partition nobody holds */
        return 0;
    }
    for (size_t i = 0; i < rq->n_ipu_ids; i++) {
        if (rq->ipu_ids[i] >= inv->n) {
            conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "daemon",
                            "no IPU %u: this daemon has IPUs 0 to %u", rq->ipu_ids[i], inv->n - 1);
            return -1;
        }
        sel[rq->ipu_ids[i]] = 1;
    }
    return 0;
}

/* The reset a recovery action names, as ipuctl says it. */
static const char *
reset_hint(int recovery)
{
    switch (recovery) {
    case IPUOF_RECOVERY_IPU_RESET:
        return "ipuctl reset --ipu, --partition or --all";
    case IPUOF_RECOVERY_LINK_RESET:
    case IPUOF_RECOVERY_PARTITION_RESET:
        return "ipuctl reset --partition or --all (vipu reset partition)";
    default:
        return "ipuctl reset --all";
    }
}

/* IPUOF_OK when a reset at level clears every IPU in error that sel[] marks, else
 * IPUOF_E_STATE with a sentence naming the first IPU and the reset it needs. */
static int
check_level(const struct dev_inventory *inv, const unsigned char *sel, int level, char *err,
            size_t errlen)
{
    for (unsigned i = 0; i < inv->n; i++) {
        const struct dev_ipu *d = &inv->ipus[i];
        if (!sel[i] || d->state != DEV_ERROR || faults_level(d->recovery) <= faults_level(level))
            continue;
        snprintf(err, errlen, "IPU %u needs %s, stronger than this %s, which would not clear "
                 "its error (%s); use %s", i, ipuof_recovery_name(d->recovery),
                 ipuof_recovery_name(level), d->error, reset_hint(d->recovery));
        return IPUOF_E_STATE;
    }
    return IPUOF_OK;
}

int
admin_reset_ipus(struct conn *c, unsigned char *sel, int force, int level, uint32_t *ids,
                 unsigned *n_ids, char *err, size_t errlen)
{
    struct srv *s = c->srv;
    struct dev_inventory *inv = s->inv;
    char held[512] = "";
    size_t used = 0;
    unsigned n = 0;

    /* A held IPU resets its whole partition: the partition cannot run with a hole in it. */
    for (unsigned i = 0; i < inv->n; i++) {
        struct dev_partition *p = inv->ipus[i].part;
        if (!sel[i] || p == NULL)
            continue;
        memset(sel + p->first, 1, p->count);
        if (used < sizeof held && !strstr(held, p->name))
            used += (size_t)snprintf(held + used, sizeof held - used,
                                     "%spartition '%s' (IPUs %u-%u) held by %s (pid %u, %s)",
                                     used ? "; " : "", p->name, p->first, p->first + p->count - 1,
                                     p->holder.name, p->holder.pid, p->holder.peer);
    }
    if (check_level(inv, sel, level, err, errlen) != IPUOF_OK)
        return IPUOF_E_STATE;
    if (held[0] != '\0' && !force) {
        snprintf(err, errlen, "refusing to reset IPUs in use: %s; add --force to reset them "
                 "anyway (the holder is told its partition was reset)", held);
        return IPUOF_E_BUSY;
    }
    s->hold_waiters = 1; /* no IPU may be handed out half-way through the reset */
    for (unsigned i = 0; i < inv->n; i++) {
        struct dev_partition *p = inv->ipus[i].part;
        if (!sel[i])
            continue;
        if (p != NULL) {
            struct conn *holder = p->owner;
            log_warn("client %u (%s) reset partition '%s' held by client %u (%s, pid %u, %s)",
                     c->id, c->peer, p->name, holder->id, holder->name, holder->pid, holder->peer);
            revoke_partition(holder, IPUOF_E_DEVICE_RESET,
                             "partition '%s' (IPUs %u-%u) was reset by an administrator; its "
                             "state is lost: attach again", p->name, p->first,
                             p->first + p->count - 1);
        }
        if (inv->ipus[i].state == DEV_ERROR)
            log_warn("IPU %u recovered by a %s from client %u (%s) after %llu ms in error: %s",
                     i, ipuof_recovery_name(level), c->id, c->peer,
                     (unsigned long long)(srv_now_ms() - inv->ipus[i].error_ms),
                     inv->ipus[i].error);
        dev_clear(inv, i);
        fault_ipu_reset(s, i); /* a request a hung IPU held is answered; rearm-on-reset */
        if (ids != NULL)
            ids[n] = i;
        n++;
    }
    s->hold_waiters = 0;
    log_info("client %u (%s) reset %u IPU%s", c->id, c->peer, n, n == 1 ? "" : "s");
    if (n_ids != NULL)
        *n_ids = n;
    return IPUOF_OK;
}

void
req_reset(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__ResetRequest *rq = h->reset;
    struct srv *s = c->srv;
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__ResetReply rr = IPUOF__RESET_REPLY__INIT;
    unsigned char sel[CFG_MAX_IPUS] = {0};
    uint32_t ids[CFG_MAX_IPUS];
    char err[700];
    unsigned n = 0;
    int level = rq->all ? IPUOF_RECOVERY_FULL_RESET : rq->partition[0] != '\0'
                ? IPUOF_RECOVERY_PARTITION_RESET : IPUOF_RECOVERY_IPU_RESET;
    int rc;

    (void)payload_len;
    if (select_ipus(c, req_id, rq, sel) < 0)
        return;
    rc = admin_reset_ipus(c, sel, rq->force, level, ids, &n, err, sizeof err);
    if (rc != IPUOF_OK) {
        conn_send_error(c, req_id, rc, 0, 0, "daemon", "%s", err);
        return;
    }
    rr.n_ipu_ids = n;
    rr.ipu_ids = ids;
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_RESET_REPLY;
    r.reset_reply = &rr;
    conn_send(c, &r, NULL, 0);
    job_serve_waiters(s);
}
