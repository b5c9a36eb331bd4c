/*
 * req_vipu.c — the partition service: V-IPU's verbs (create, list, get, reset, remove) on
 * this daemon's IPUs, for tools/vipu.c, poprun and the client library's partition check.
 *
 * A V-IPU partition (devices.c's dev_vpart) reserves an aligned group of IPUs by name; an
 * attach giving the name takes them. It lives until it is removed or the daemon stops: the
 * inventory is in memory only, as everything a partition holds (models, weights) is, and a
 * partition surviving a restart would promise state that is gone. Rights: create and
 * remove need admin rights (the admin socket or the admin token); list and get need none;
 * reset needs none while nobody holds the partition (it only clears its IPUs) and admin
 * rights with force while somebody does (the holder's job is told, as by ipuctl reset).
 * An error's sentence says what is wrong, not which request it answers: the tools name
 * the request ("vipu: create partition x: --size 3: ..."), so it is not said twice.
 */
#include <stdio.h>
#include <string.h>

#include "dispatch.h"
#include "ipuof/status.h"
#include "log.h"
#include "jobs.h"
#include "pod.h"
#include "srv_state.h"
#include "wiremap.h"

#define VIPU_MAX_LIST CFG_MAX_IPUS /* at most one partition per IPU */

/* Fills *out (with *ho for its holder) from v. */
static void
describe(const struct dev_inventory *inv, const struct dev_vpart *v, Ipuof__VipuPartition *out,
         Ipuof__Holder *ho)
{
    const struct dev_partition *p = dev_vpart_holder(inv, v);

    ipuof__vipu_partition__init(out);
    out->name = (char *)v->name;
    out->size = v->count;
    out->num_gcds = v->num_gcds;
    out->reconfigurable = v->reconfigurable != 0;
    out->state = dev_vpart_failed(inv, v) ? IPUOF__VIPU_STATE__PS_FAILED
                                          : IPUOF__VIPU_STATE__PS_ACTIVE;
    out->first_ipu = v->first;
    if (p != NULL) {
        ipuof__holder__init(ho);
        ho->client_id = p->holder.client_id;
        ho->client_name = (char *)p->holder.name;
        ho->pid = p->holder.pid;
        ho->peer = (char *)p->holder.peer;
        out->holder = ho;
    }
}

/* LIST's agents: the hosts of this daemon's Pod (itself first), each with the address its
 * clients reach it at, into vr (ph and pp have room for CFG_POD_MAX_PEERS + 1). */
static void
pod_agents(struct srv *s, Ipuof__VipuReply *vr, struct pod_host *hosts, Ipuof__PodHost *ph,
           Ipuof__PodHost **pp)
{
    int n = pod_hosts(s->pod, hosts, CFG_POD_MAX_PEERS + 1);

    for (int i = 0; i < n; i++) {
        ipuof__pod_host__init(&ph[i]);
        ph[i].name = hosts[i].name;
        ph[i].address = hosts[i].addr;
        ph[i].state = (Ipuof__PodHostState)wiremap_to_wire(&wiremap_pod_host_state,
                                                           hosts[i].state, 0);
        if (i == 0) {
            hosts[0].num_ipus = s->inv->n;
            hosts[0].free_ipus = dev_free_count(s->inv);
            pod_client_address(s->cfg.listen, s->bound_port, hosts[0].client_addr,
                               sizeof hosts[0].client_addr);
        }
        ph[i].num_ipus = hosts[i].num_ipus;
        ph[i].free_ipus = hosts[i].free_ipus;
        ph[i].error = hosts[i].error;
        ph[i].client_address = hosts[i].client_addr;
        pp[i] = &ph[i];
    }
    vr->n_pod_hosts = (size_t)(n > 0 ? n : 0);
    vr->pod_hosts = pp;
}

/* Sends the reply: the partitions vs[0..n), and with_agents, the Pod's hosts. */
static void
reply(struct conn *c, uint64_t req_id, struct dev_vpart *const *vs, size_t n, int with_agents)
{
    struct pod_host hosts[CFG_POD_MAX_PEERS + 1];
    Ipuof__PodHost ph[CFG_POD_MAX_PEERS + 1], *php[CFG_POD_MAX_PEERS + 1];
    struct dev_inventory *inv = c->srv->inv;
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__VipuReply vr = IPUOF__VIPU_REPLY__INIT;
    Ipuof__VipuPartition parts[VIPU_MAX_LIST], *pp[VIPU_MAX_LIST];
    Ipuof__Holder holders[VIPU_MAX_LIST];

    for (size_t i = 0; i < n && i < VIPU_MAX_LIST; i++) {
        describe(inv, vs[i], &parts[i], &holders[i]);
        pp[i] = &parts[i];
    }
    vr.n_partitions = n < VIPU_MAX_LIST ? n : VIPU_MAX_LIST;
    vr.partitions = pp;
    vr.num_ipus = inv->n;
    if (with_agents)
        pod_agents(c->srv, &vr, hosts, ph, php);
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_VIPU_REPLY;
    r.vipu_reply = &vr;
    conn_send(c, &r, NULL, 0);
}

/* The partition the request names, or NULL after an error naming the partitions there are. */
static struct dev_vpart *
named(struct conn *c, uint64_t req_id, const char *name, const char *verb)
{
    struct dev_inventory *inv = c->srv->inv;
    struct dev_vpart *v;
    char have[512] = "";
    size_t used = 0;

    if (name[0] == '\0') {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "vipu",
                        "%s partition needs the partition's name", verb);
        return NULL;
    }
    v = dev_vpart_find(inv, name);
    if (v != NULL)
        return v;
    for (const struct dev_vpart *w = inv->vparts; w != NULL && used < sizeof have; w = w->next)
        used += (size_t)snprintf(have + used, sizeof have - used, "%s'%s'", used ? ", " : "",
                                 w->name);
    conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "vipu",
                    "no partition '%s' on this ipuofd (partitions: %s); vipu create partition "
                    "%s --size N makes one", name, have[0] ? have : "none", name);
    return NULL;
}

/* 0 when c may do verb; else -1 after an error saying how to get admin rights. */
static int
need_admin(struct conn *c, uint64_t req_id, const char *what)
{
    if (c->admin)
        return 0;
    conn_send_error(c, req_id, IPUOF_E_AUTH, 0, 0, "vipu",
                    "%s needs admin rights: connect through the admin socket%s%s or present the "
                    "admin token (IPUOF_ADMIN_TOKEN)", what, c->srv->cfg.admin_socket[0] ? " " : "",
                    c->srv->cfg.admin_socket);
    return -1;
}

/* Marks v's IPUs in sel[]. */
static void
select_vpart(const struct dev_vpart *v, unsigned char *sel)
{
    memset(sel, 0, CFG_MAX_IPUS);
    memset(sel + v->first, 1, v->count);
}

void
req_vipu(struct conn *c, uint64_t req_id, const Ipuof__Header *h, uint32_t payload_len)
{
    const Ipuof__VipuRequest *rq = h->vipu;
    struct dev_inventory *inv = c->srv->inv;
    struct dev_vpart *v, *list[VIPU_MAX_LIST];
    unsigned char sel[CFG_MAX_IPUS];
    char err[1024];
    size_t n = 0;
    int rc;

    (void)payload_len;
    switch (rq->verb) {
    case IPUOF__VIPU_VERB__VIPU_LIST:
        for (v = inv->vparts; v != NULL && n < VIPU_MAX_LIST; v = v->next)
            list[n++] = v;
        /* Oldest first, as they were created. */
        for (size_t i = 0; i < n / 2; i++) {
            struct dev_vpart *t = list[i];
            list[i] = list[n - 1 - i];
            list[n - 1 - i] = t;
        }
        reply(c, req_id, list, n, 1);
        return;
    case IPUOF__VIPU_VERB__VIPU_GET:
        v = named(c, req_id, rq->name, "get");
        if (v != NULL)
            reply(c, req_id, &v, 1, 0);
        return;
    case IPUOF__VIPU_VERB__VIPU_CREATE:
        if (need_admin(c, req_id, "create partition") < 0)
            return;
        rc = dev_vpart_create(inv, rq->name, rq->size, rq->num_gcds ? rq->num_gcds : 1,
                              rq->reconfigurable, &v, err, sizeof err);
        if (rc != IPUOF_OK) {
            conn_send_error(c, req_id, rc, rc == IPUOF_E_BUSY ? IPUOF_ERROR_RECOVERABLE : 0,
                            rc == IPUOF_E_BUSY ? IPUOF_RECOVERY_RETRY : 0, "vipu",
                            "%s", err);
            return;
        }
        log_info("client %u (%s, %s) created partition '%s': IPUs %u-%u, %u GCD%s%s", c->id,
                 c->name, c->peer, v->name, v->first, v->first + v->count - 1, v->num_gcds,
                 v->num_gcds == 1 ? "" : "s", v->reconfigurable ? ", reconfigurable" : "");
        reply(c, req_id, &v, 1, 0);
        return;
    case IPUOF__VIPU_VERB__VIPU_RESET:
        v = named(c, req_id, rq->name, "reset");
        if (v == NULL)
            return;
        if (dev_vpart_holder(inv, v) != NULL &&
            need_admin(c, req_id, "reset partition of a partition somebody holds") < 0)
            return;
        select_vpart(v, sel);
        if ((rc = admin_reset_ipus(c, sel, rq->force, IPUOF_RECOVERY_PARTITION_RESET, NULL,
                                   NULL, err, sizeof err)) != IPUOF_OK) {
            conn_send_error(c, req_id, rc, 0, 0, "vipu", "%s", err);
            return;
        }
        reply(c, req_id, &v, 1, 0);
        job_serve_waiters(c->srv);
        return;
    case IPUOF__VIPU_VERB__VIPU_REMOVE:
        if (need_admin(c, req_id, "remove partition") < 0)
            return;
        v = named(c, req_id, rq->name, "remove");
        if (v == NULL)
            return;
        if (dev_vpart_holder(inv, v) != NULL) {
            select_vpart(v, sel);
            if ((rc = admin_reset_ipus(c, sel, rq->force, IPUOF_RECOVERY_PARTITION_RESET, NULL,
                                       NULL, err, sizeof err)) != IPUOF_OK) {
                conn_send_error(c, req_id, rc, 0, 0, "vipu", "%s", err);
                return;
            }
        }
        log_info("client %u (%s, %s) removed partition '%s' (IPUs %u-%u)", c->id, c->name,
                 c->peer, v->name, v->first, v->first + v->count - 1);
        dev_vpart_remove(inv, v);
        reply(c, req_id, NULL, 0, 0);
        job_serve_waiters(c->srv); /* its IPUs are anybody's now */
        return;
    default:
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "vipu",
                        "unknown partition verb %d; the verbs are list, get, create, reset and "
                        "remove", (int)rq->verb);
        return;
    }
}
