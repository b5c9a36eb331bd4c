/*
 * devices.c — the device requests: attach, detach, health and reset.
 *
 * Each public function clears the handle's last error, checks its arguments, builds one
 * request, lets conn.c run the exchange, and copies what it needs out of the reply before
 * freeing it; no protobuf message outlives the call. The partition a connection holds is
 * kept on the handle; a notice from the daemon (partition reset, shutdown) drops it and its
 * error is returned by the next call that needs the partition.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"

/* Copies n ids into out[0..max) (out may be NULL) and stores n in *n_out (may be NULL). */
static void
copy_ids(const uint32_t *ids, size_t n, unsigned *out, size_t max, size_t *n_out)
{
    if (out != NULL) {
        for (size_t i = 0; i < n && i < max; i++)
            out[i] = ids[i];
    }
    if (n_out != NULL)
        *n_out = n;
}

/* The request timeout for an attach: a wait must not be cut shorter than wait_timeout_ms,
 * and waiting for ever means no request timeout either. */
static int
attach_timeout(const ipuof_client *c, const struct ipuof_attach_opts *opts)
{
    int64_t t;

    if (!opts->wait)
        return c->request_ms;
    if (opts->wait_timeout_ms == 0 || c->request_ms == 0)
        return 0;
    t = (int64_t)opts->wait_timeout_ms + c->request_ms;
    return t > INT32_MAX ? 0 : (int)t;
}

#define POD_HOSTS_MAX IPUOF_POD_HOSTS_MAX

/*
 * IPUOF_POD_HOSTS: the daemons of a partition that spans a Pod, by their [pod] names in
 * rank order ("host-a,host-b"), split into names[0..POD_HOSTS_MAX) pointing into buf. The
 * count (0 when unset or empty), or -1 with a sentence in err.
 */
static int
pod_hosts_env(char *buf, size_t len, char **names, char *err, size_t errlen)
{
    const char *v = getenv("IPUOF_POD_HOSTS");
    int n = 0;

    if (v == NULL || v[0] == '\0')
        return 0;
    if (strlen(v) >= len) {
        snprintf(err, errlen, "IPUOF_POD_HOSTS is %zu bytes long; at most %zu are read",
                 strlen(v), len - 1);
        return -1;
    }
    snprintf(buf, len, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t != NULL;
         t = strtok_r(NULL, ", ", &save)) {
        if (n == POD_HOSTS_MAX || strlen(t) > 63) {
            snprintf(err, errlen, "IPUOF_POD_HOSTS='%s': a partition spans at most %d hosts "
                     "whose names have at most 63 bytes (e.g. host-a,host-b)", v, POD_HOSTS_MAX);
            return -1;
        }
        names[n++] = t;
    }
    return n;
}

/* The partition a config file or PopRun's variables name (the connect's lookup), unless
 * the program names one (a->partition_name not "") or a job is given IPUOF_PARTITION: it
 * must be one the partition service made (an attach would otherwise make an ad hoc
 * partition of that name and hide a stale file or a typo), holding the file's GCD. Sets
 * a->partition_name (borrowed from c) and *from_file. IPUOF_OK, or the error set on c. */
static int
attach_file_partition(ipuof_client *c, const struct ipuof_attach_opts *opts,
                      Ipuof__AttachRequest *a, int *from_file)
{
    char why[IPUOF_ERRMSG_MAX];
    struct ipuof_vipu_partition vp;
    const char *pod_env = getenv("IPUOF_POD_HOSTS");
    int rc;

    *from_file = 0;
    if (a->partition_name[0] != '\0' || c->target.partition[0] == '\0' ||
        (opts->num_processes != 1 && getenv("IPUOF_PARTITION") != NULL &&
         getenv("IPUOF_PARTITION")[0] != '\0'))
        return IPUOF_OK;
    rc = ipuof_vipu_get(c, c->target.partition, &vp);
    if (rc != IPUOF_OK) {
        snprintf(why, sizeof why, "%s", c->err.msg);
        rc = ipuof_err_set(c, rc, "client", "partition '%s' (from %s): %s",
                           c->target.partition, c->target.source, why);
        return rc;
    }
    /* Its GCD must be one of the partition's (on one daemon; across a Pod's daemons
     * GCD d is daemon d, each holding a one-GCD share). */
    if (c->target.gcd > 0 && c->target.n_pod_hosts == 0 &&
        (pod_env == NULL || pod_env[0] == '\0') && vp.num_gcds > 0 &&
        (unsigned)c->target.gcd >= vp.num_gcds) {
        return ipuof_err_set(c, IPUOF_E_INVAL, "client", "partition '%s' (from %s): GCD %d "
                           "(IPUOF_VIPU_API_GCD_ID or the config file's \"GCD Id\") is "
                           "not one of its %u GCD%s: give 0%s%u", c->target.partition,
                           c->target.source, c->target.gcd, vp.num_gcds,
                           vp.num_gcds == 1 ? "" : "s", vp.num_gcds == 1 ? "" : " to ",
                           vp.num_gcds == 1 ? 0 : vp.num_gcds - 1);
    }
    a->partition_name = c->target.partition;
    *from_file = 1;
    return IPUOF_OK;
}

/* The names a job of several processes attaches under, borrowed by the request. */
struct attach_job_names {
    char jobname[64], jobkey[IPUOF_JOB_KEY_MAX + 1];
    char hostbuf[POD_HOSTS_MAX * 64 + 1], *hosts[POD_HOSTS_MAX];
};

/* This process of how many (opts, else the launcher's environment) into a; for a job of
 * several, its name and key (ipuof_job_identity) and its Pod hosts (IPUOF_POD_HOSTS, else
 * the config file's when the partition is the file's: from_file), kept in jn. IPUOF_OK,
 * or the error set on c. */
static int
attach_job(ipuof_client *c, const struct ipuof_attach_opts *opts, Ipuof__AttachRequest *a,
           int from_file, struct attach_job_names *jn)
{
    char errbuf[512];
    int rc, nhosts;

    a->process_id = opts->process_id;
    a->num_processes = opts->num_processes;
    if (opts->num_processes == 0) { /* from the launcher's environment */
        rc = ipuof_process_env(&a->process_id, &a->num_processes, errbuf, sizeof errbuf);
        if (rc != IPUOF_OK)
            return ipuof_err_set(c, rc, "client", "%s", errbuf);
    }
    if (a->num_processes > 1) {
        rc = ipuof_job_identity(a->partition_name, c->job_key, a->process_id,
                                a->num_processes, jn->jobname, sizeof jn->jobname, jn->jobkey,
                                sizeof jn->jobkey, errbuf, sizeof errbuf);
        if (rc != IPUOF_OK)
            return ipuof_err_set(c, rc, "client", "%s", errbuf);
        a->partition_name = jn->jobname;
        a->job_key = jn->jobkey;
        nhosts = pod_hosts_env(jn->hostbuf, sizeof jn->hostbuf, jn->hosts, errbuf,
                               sizeof errbuf);
        if (nhosts < 0)
            return ipuof_err_set(c, IPUOF_E_INVAL, "client", "%s", errbuf);
        /* Else the config file's, when the partition is the file's. */
        if (nhosts == 0 && from_file) {
            for (int i = 0; i < c->target.n_pod_hosts; i++)
                jn->hosts[i] = c->target.pod_hosts[i];
            nhosts = c->target.n_pod_hosts;
        }
        a->n_pod_hosts = (size_t)nhosts;
        a->pod_hosts = nhosts > 0 ? jn->hosts : NULL;
    }
    return IPUOF_OK;
}

int
ipuof_attach(ipuof_client *c, const struct ipuof_attach_opts *opts, unsigned *ipu_ids,
             size_t max_ids, size_t *n_ids)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__AttachRequest a = IPUOF__ATTACH_REQUEST__INIT;
    Ipuof__Header *reply = NULL;
    const Ipuof__AttachReply *ar;
    char *name = NULL;
    struct attach_job_names jn;
    int rc, from_file = 0;

    if (n_ids != NULL)
        *n_ids = 0;
    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    if (opts == NULL) {
        rc = ipuof_err_set(c, IPUOF_E_INVAL, "client", "ipuof_attach() needs attach options");
        goto out;
    }
    rc = ipuof_require_connection(c);
    if (rc != IPUOF_OK)
        goto out;
    /* A partition reset while idle must not block attaching again. */
    rc = ipuof_conn_poll_notices(c);
    if (rc != IPUOF_OK)
        goto out;
    if (c->attached) {
        rc = ipuof_err_set(c, IPUOF_E_ALREADY_ATTACHED, "client",
                           "this connection already holds partition '%s'; detach first",
                           c->partition);
        goto out;
    }
    c->notice_pending = 0; /* a notice about an earlier partition is moot now */

    a.num_ipus = opts->num_ipus;
    a.partition_name = (char *)(opts->partition_name != NULL ? opts->partition_name : "");
    rc = attach_file_partition(c, opts, &a, &from_file);
    if (rc == IPUOF_OK)
        rc = attach_job(c, opts, &a, from_file, &jn);
    if (rc != IPUOF_OK)
        goto out;
    a.wait = opts->wait != 0;
    a.wait_timeout_ms = opts->wait_timeout_ms;
    a.auto_round = opts->auto_round != 0;
    req.body_case = IPUOF__HEADER__BODY_ATTACH;
    req.attach = &a;
    rc = ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_ATTACH_REPLY, attach_timeout(c, opts),
                         NULL, NULL, &reply);
    if (rc != IPUOF_OK)
        goto out;
    ar = reply->attach_reply;
    name = strdup(ar->partition_name != NULL ? ar->partition_name : "");
    if (name == NULL) {
        rc = ipuof_err_set(c, IPUOF_E_NOMEM, "client", "out of memory copying the partition "
                           "name; the partition stays held until the connection closes");
        goto out;
    }
    free(c->partition);
    c->partition = name;
    c->attached = 1;
    c->attach_gen++; /* models compiled for an earlier partition are gone */
    c->notice_pending = 0; /* notices before the reply were about an earlier partition */
    copy_ids(ar->ipu_ids, ar->n_ipu_ids, ipu_ids, max_ids, n_ids);
out:
    ipuof_frame_header_free(reply);
    return rc;
}

const char *
ipuof_partition_name(const ipuof_client *c)
{
    if (c == NULL || !c->attached)
        return NULL;
    return c->partition;
}

int
ipuof_take_notice(ipuof_client *c)
{
    if (!c->notice_pending)
        return IPUOF_OK;
    c->notice_pending = 0;
    return ipuof_err_report(c, &c->notice);
}

int
ipuof_detach(ipuof_client *c)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__DetachRequest d = IPUOF__DETACH_REQUEST__INIT;
    Ipuof__Header *reply = NULL;
    int poll_rc;
    int rc;

    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    poll_rc = c->fd >= 0 ? ipuof_conn_poll_notices(c) : IPUOF_OK;
    /* Why the partition went away matters more than a closed socket. */
    rc = ipuof_take_notice(c);
    if (rc != IPUOF_OK)
        goto out;
    rc = poll_rc != IPUOF_OK ? poll_rc : ipuof_require_connection(c);
    if (rc != IPUOF_OK)
        goto out;
    if (!c->attached) {
        rc = ipuof_err_set(c, IPUOF_E_NOT_ATTACHED, "client",
                           "this connection holds no partition; nothing to detach");
        goto out;
    }
    req.body_case = IPUOF__HEADER__BODY_DETACH;
    req.detach = &d;
    rc = ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_DETACH_REPLY, c->request_ms, NULL, NULL,
                         &reply);
    if (rc != IPUOF_OK && c->notice_pending) {
        /* The partition went away while the detach was in flight: say why. */
        rc = ipuof_take_notice(c);
        goto out;
    }
    if (rc != IPUOF_OK)
        goto out;
    c->attached = 0;
    free(c->partition);
    c->partition = NULL;
out:
    ipuof_frame_header_free(reply);
    return rc;
}

int
ipuof_health(ipuof_client *c, int *ready)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__HealthRequest hq = IPUOF__HEALTH_REQUEST__INIT;
    Ipuof__Header *reply = NULL;
    const Ipuof__HealthReply *hr;
    int rc;

    if (ready != NULL)
        *ready = 0;
    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    c->health_reason[0] = '\0';
    req.body_case = IPUOF__HEADER__BODY_HEALTH;
    req.health = &hq;
    rc = ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_HEALTH_REPLY, c->request_ms, NULL, NULL,
                         &reply);
    if (rc != IPUOF_OK)
        goto out;
    hr = reply->health_reply;
    if (!hr->live || !hr->ready) {
        const char *why = hr->reason != NULL && hr->reason[0] != '\0'
                              ? hr->reason
                              : (hr->live ? "ipuofd did not say why it is not ready"
                                          : "ipuofd reports itself not live");
        size_t n = strlen(why);

        if (n >= sizeof c->health_reason)
            n = sizeof c->health_reason - 1;
        memcpy(c->health_reason, why, n);
        c->health_reason[n] = '\0';
    }
    if (ready != NULL)
        *ready = hr->live && hr->ready;
out:
    ipuof_frame_header_free(reply);
    return rc;
}

const char *
ipuof_health_reason(const ipuof_client *c)
{
    if (c == NULL)
        return "";
    return c->health_reason;
}

int
ipuof_reset_ids(ipuof_client *c, int scope, unsigned ipu_id, const char *partition, int force,
                unsigned *ipu_ids, size_t max_ids, size_t *n_reset)
{
    Ipuof__Header req = IPUOF__HEADER__INIT;
    Ipuof__ResetRequest r = IPUOF__RESET_REQUEST__INIT;
    Ipuof__Header *reply = NULL;
    uint32_t one_id = ipu_id;
    const Ipuof__ResetReply *rr;
    int rc;

    if (n_reset != NULL)
        *n_reset = 0;
    if (c == NULL)
        return IPUOF_E_INVAL;
    ipuof_err_clear(c);
    switch (scope) {
    case IPUOF_RESET_ALL:
        r.all = 1;
        break;
    case IPUOF_RESET_IPU:
        r.n_ipu_ids = 1;
        r.ipu_ids = &one_id;
        break;
    case IPUOF_RESET_PARTITION:
        if (partition == NULL || partition[0] == '\0') {
            rc = ipuof_err_set(c, IPUOF_E_INVAL, "client",
                               "resetting a partition needs the partition's name");
            goto out;
        }
        r.partition = (char *)partition;
        break;
    default:
        rc = ipuof_err_set(c, IPUOF_E_INVAL, "client",
                           "reset scope %d is not IPUOF_RESET_ALL, _IPU or _PARTITION", scope);
        goto out;
    }
    r.force = force != 0;
    req.body_case = IPUOF__HEADER__BODY_RESET;
    req.reset = &r;
    rc = ipuof_conn_call(c, &req, IPUOF__HEADER__BODY_RESET_REPLY, c->request_ms, NULL, NULL,
                         &reply);
    if (rc != IPUOF_OK)
        goto out;
    rr = reply->reset_reply;
    copy_ids(rr->ipu_ids, rr->n_ipu_ids, ipu_ids, max_ids, n_reset);
out:
    ipuof_frame_header_free(reply);
    return rc;
}

int
ipuof_reset(ipuof_client *c, int scope, unsigned ipu_id, const char *partition, int force,
            size_t *n_reset)
{
    return ipuof_reset_ids(c, scope, ipu_id, partition, force, NULL, 0, n_reset);
}
