/*
 * vipu.c — the partition service's requests (V-IPU's verbs): list, get, create, reset,
 * remove. Each builds one VipuRequest, lets conn.c run the exchange and copies the reply's
 * partitions into the caller's structs; no protobuf message outlives the call.
 */
#include <string.h>

#include "client_internal.h"

/* The public view of one wire partition. */
static void
from_wire(struct ipuof_vipu_partition *out, const Ipuof__VipuPartition *w)
{
    memset(out, 0, sizeof *out);
    ipuof_copy_str(out->name, sizeof out->name, w->name);
    out->size = w->size;
    out->num_gcds = w->num_gcds;
    out->first_ipu = w->first_ipu;
    out->reconfigurable = w->reconfigurable != 0;
    switch (w->state) {
    case IPUOF__VIPU_STATE__PS_FAILED:
        out->state = IPUOF_VIPU_PS_FAILED;
        break;
    default: /* PS_ACTIVE; a state a newer daemon adds reads as active */
        out->state = IPUOF_VIPU_PS_ACTIVE;
        break;
    }
    if (w->holder != NULL) {
        out->held = 1;
        ipuof_copy_str(out->holder_name, sizeof out->holder_name, w->holder->client_name);
        out->holder_pid = w->holder->pid;
        ipuof_copy_str(out->holder_peer, sizeof out->holder_peer, w->holder->peer);
    }
}

/* Sends a VipuRequest (verb, name, ...) and returns the reply (caller frees) in *reply. */
static int
vipu_call(ipuof_client *c, Ipuof__VipuVerb verb, const char *name, unsigned size,
          unsigned num_gcds, int reconfigurable, int force, Ipuof__Header **reply)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__VipuRequest v = IPUOF__VIPU_REQUEST__INIT;

    *reply = NULL;
    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    if (verb != IPUOF__VIPU_VERB__VIPU_LIST && (name == NULL || name[0] == '\0'))
        return ipuof_err_set(c, IPUOF_E_INVAL, "client", "a partition request needs the "
                             "partition's name");
    v.verb = verb;
    v.name = (char *)(name != NULL ? name : "");
    v.size = size;
    v.num_gcds = num_gcds;
    v.reconfigurable = reconfigurable != 0;
    v.force = force != 0;
    req.body_case = IPUOF__HEADER__BODY_VIPU;
    req.vipu = &v;
    return ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_VIPU_REPLY, c->request_ms, NULL, NULL,
                           reply);
}

/* Copies the reply's first partition into *out (may be NULL). */
static int
first(ipuof_client *c, const Ipuof__Header *reply, struct ipuof_vipu_partition *out)
{
    if (reply->vipu_reply->n_partitions < 1)
        return ipuof_err_set(c, IPUOF_E_PROTO, "protocol", "ipuofd at %s answered a partition "
                             "request without the partition", c->address);
    if (out != NULL)
        from_wire(out, reply->vipu_reply->partitions[0]);
    return IPUOF_OK;
}

int
ipuof_vipu_list(ipuof_client *c, struct ipuof_vipu_partition *out, size_t max, size_t *n,
                unsigned *num_ipus)
{
    Ipuof__Header *reply = NULL;
    int rc = vipu_call(c, IPUOF__VIPU_VERB__VIPU_LIST, NULL, 0, 0, 0, 0, &reply);

    if (n != NULL)
        *n = 0;
    if (rc == IPUOF_OK) {
        const Ipuof__VipuReply *vr = reply->vipu_reply;
        for (size_t i = 0; out != NULL && i < vr->n_partitions && i < max; i++)
            from_wire(&out[i], vr->partitions[i]);
        if (n != NULL)
            *n = vr->n_partitions;
        if (num_ipus != NULL)
            *num_ipus = vr->num_ipus;
    }
    ipuof_frame_header_free(reply);
    return rc;
}

int
ipuof_vipu_get(ipuof_client *c, const char *name, struct ipuof_vipu_partition *out)
{
    Ipuof__Header *reply = NULL;
    int rc = vipu_call(c, IPUOF__VIPU_VERB__VIPU_GET, name, 0, 0, 0, 0, &reply);

    if (rc == IPUOF_OK)
        rc = first(c, reply, out);
    ipuof_frame_header_free(reply);
    return rc;
}

int
ipuof_vipu_create(ipuof_client *c, const char *name, unsigned size, unsigned num_gcds,
                  int reconfigurable, struct ipuof_vipu_partition *out)
{
    Ipuof__Header *reply = NULL;
    int rc = vipu_call(c, IPUOF__VIPU_VERB__VIPU_CREATE, name, size, num_gcds, reconfigurable,
                       0, &reply);

    if (rc == IPUOF_OK)
        rc = first(c, reply, out);
    ipuof_frame_header_free(reply);
    return rc;
}

int
ipuof_vipu_reset(ipuof_client *c, const char *name, int force)
{
    Ipuof__Header *reply = NULL;
    int rc = vipu_call(c, IPUOF__VIPU_VERB__VIPU_RESET, name, 0, 0, 0, force, &reply);

    ipuof_frame_header_free(reply);
    return rc;
}

int
ipuof_vipu_remove(ipuof_client *c, const char *name, int force)
{
    Ipuof__Header *reply = NULL;
    int rc = vipu_call(c, IPUOF__VIPU_VERB__VIPU_REMOVE, name, 0, 0, 0, force, &reply);

    ipuof_frame_header_free(reply);
    return rc;
}

int
ipuof_vipu_agents(ipuof_client *c, struct ipuof_vipu_agent *out, size_t max, size_t *n)
{
    Ipuof__Header *reply = NULL;
    int rc = vipu_call(c, IPUOF__VIPU_VERB__VIPU_LIST, NULL, 0, 0, 0, 0, &reply);
    size_t k = 0;

    if (n != NULL)
        *n = 0;
    if (rc == IPUOF_OK) {
        const Ipuof__VipuReply *vr = reply->vipu_reply;
        size_t count = vr->n_pod_hosts ? vr->n_pod_hosts : 1;
        for (; out != NULL && k < count && k < max; k++) {
            struct ipuof_vipu_agent *a = &out[k];
            memset(a, 0, sizeof *a);
            if (vr->n_pod_hosts == 0) { /* no Pod: the daemon is the one agent */
                ipuof_copy_str(a->address, sizeof a->address, c->address);
                a->num_ipus = vr->num_ipus;
                a->reachable = 1;
                continue;
            }
            const Ipuof__PodHost *h = vr->pod_hosts[k];
            ipuof_copy_str(a->name, sizeof a->name, h->name);
            ipuof_copy_str(a->address, sizeof a->address, h->client_address);
            ipuof_copy_str(a->error, sizeof a->error, h->error);
            a->num_ipus = h->num_ipus;
            a->free_ipus = h->free_ipus;
            a->reachable = h->state == IPUOF__POD_HOST_STATE__POD_HOST_SELF ||
                           h->state == IPUOF__POD_HOST_STATE__POD_HOST_REACHABLE;
        }
        if (n != NULL)
            *n = count;
    }
    ipuof_frame_header_free(reply);
    return rc;
}
