/*
 * jobs_pod.c — a job whose partition spans the daemons of a Pod (issue 20). Each daemon
 * holds the processes of its rank (AttachRequest.pod_hosts) as a local job of its own, with
 * its share of the IPUs, and compiles their replicas; the daemons of the partition form one
 * communicator of pod/coll.h (gloo) through the rendezvous store of the partition's first
 * daemon (req_pod.c), once every local process has attached. Then, per training run of a
 * model the processes share: what changed on rank 0 since the last run is broadcast (every
 * weight and buffer after a compile; the weights, buffers and optimizer state written
 * since after writes), the REDUCE step all-reduces the local replicas' summed gradients
 * (sim's xreduce hook) before the mean over every replica of the partition, rank 0's
 * replica 0's buffers are broadcast for the other daemons to show their processes (their
 * replicas keep their own), and a barrier ends the call. A daemon, process or link that
 * goes away fails the call on every daemon within [pod] timeout_ms; each ends its local
 * job with PARTITION_RESET naming the host, so every process is told, the IPUs return to
 * the pool and a new partition (a new rendezvous) can be formed.
 *
 * The communicator is used on worker threads only (the rendezvous, the runs), one at a
 * time: a job runs one call at a time.
 */
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "coll.h"
#include "conn.h"
#include "errbuf.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "jobs_int.h"
#include "jobs_pod_int.h"
#include "log.h"
#include "pod.h"
#include "pod_kv.h"
#include "pod_store.h"
#include "srv_state.h"
#include "metrics_count.h"

/* The rendezvous of j's daemons on a worker. */
struct pod_rdv {
    struct work_item item;
    struct job *j;
    void (*ready)(struct job *j);
    int rc;
};

int
job_pod_plan(struct srv *s, const Ipuof__AttachRequest *a, struct pod_job **out, char *err,
             size_t errlen)
{
    struct pod_job *pj;
    size_t n = a->n_pod_hosts;

    *out = NULL;
    if (s->pod == NULL) {
        errbuf_set(err, errlen, "the partition spans the Pod hosts %s%s..., but this daemon "
                   "has no [pod] section; give it [pod] peers, or attach without "
                   "IPUOF_POD_HOSTS", a->pod_hosts[0], n > 1 ? "," : "");
        return IPUOF_E_INVAL;
    }
    if (n > POD_MAX_HOSTS) {
        errbuf_set(err, errlen, "the partition names %zu Pod hosts; at most %d", n,
                   POD_MAX_HOSTS);
        return IPUOF_E_INVAL;
    }
    pj = calloc(1, sizeof *pj);
    if (pj == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return IPUOF_E_NOMEM;
    }
    pj->rank = -1;
    pj->size = (int)n;
    for (size_t i = 0; i < n; i++) {
        const char *h = a->pod_hosts[i];
        if (strlen(h) == 0 || strlen(h) >= CFG_POD_NAME_MAX) {
            errbuf_set(err, errlen, "Pod host %zu of the partition has a name of %zu bytes; "
                       "names have 1 to %d", i, strlen(h), CFG_POD_NAME_MAX - 1);
            goto fail;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(pj->hosts[k], h) == 0) {
                errbuf_set(err, errlen, "the partition names Pod host '%s' twice; each "
                           "daemon holds one share of it", h);
                goto fail;
            }
        }
        snprintf(pj->hosts[i], sizeof pj->hosts[i], "%s", h);
        if (strcmp(h, s->cfg.pod_name) == 0) {
            pj->rank = (int)i;
        } else if (!pod_is_peer(s->pod, h)) {
            errbuf_set(err, errlen, "the partition's Pod host '%s' is not a peer of this "
                       "daemon (host '%s'); add it to [pod] peers on every host", h,
                       s->cfg.pod_name);
            goto fail;
        }
    }
    if (pj->rank < 0) {
        errbuf_set(err, errlen, "this daemon is Pod host '%s', which is not one of the "
                   "partition's hosts (IPUOF_POD_HOSTS); attach each process to the daemon "
                   "that holds its replicas", s->cfg.pod_name);
        goto fail;
    }
    if (a->num_processes % n != 0) {
        errbuf_set(err, errlen, "%u processes cannot be shared evenly by the partition's %zu "
                   "Pod hosts; give a multiple of %zu", a->num_processes, n, n);
        goto fail;
    }
    pj->nglobal = a->num_processes;
    pj->nlocal = a->num_processes / (unsigned)n;
    pj->first = (unsigned)pj->rank * pj->nlocal;
    if (a->process_id < pj->first || a->process_id >= pj->first + pj->nlocal) {
        unsigned owner = a->process_id / pj->nlocal;
        errbuf_set(err, errlen, "process %u of %u belongs to Pod host '%s' (processes %u-%u), "
                   "not to this daemon ('%s', processes %u-%u); attach it there",
                   a->process_id, a->num_processes, pj->hosts[owner], owner * pj->nlocal,
                   (owner + 1) * pj->nlocal - 1, s->cfg.pod_name, pj->first,
                   pj->first + pj->nlocal - 1);
        goto fail;
    }
    if (pj->rank == 0)
        snprintf(pj->rdv, sizeof pj->rdv, "%s", s->pod_addr);
    else
        pod_peer_addr(s->pod, pj->hosts[0], pj->rdv, sizeof pj->rdv);
    {   /* gloo listens on the Pod port's host */
        const char *addr = s->pod_addr, *end;
        if (addr[0] == '[') {
            addr++;
            end = strchr(addr, ']');
        } else {
            end = strrchr(addr, ':');
        }
        snprintf(pj->bind, sizeof pj->bind, "%.*s", end ? (int)(end - addr) : 0, addr);
    }
    snprintf(pj->self, sizeof pj->self, "%s", s->cfg.pod_name);
    snprintf(pj->token, sizeof pj->token, "%s", s->cfg.pod_token);
    snprintf(pj->job, sizeof pj->job, "%s", a->partition_name);
    pj->timeout_ms = (int)s->cfg.pod_timeout_ms;
    pj->sum_daemons = s->cfg.pod_sum_daemons;
    pj->wait_ms = (int)s->cfg.job_timeout * 1000;
    *out = pj;
    return IPUOF_OK;
fail:
    free(pj);
    return IPUOF_E_INVAL;
}

int
job_pod_same(const struct pod_job *a, const struct pod_job *b)
{
    if (a->size != b->size || a->nglobal != b->nglobal)
        return 0;
    for (int i = 0; i < a->size; i++)
        if (strcmp(a->hosts[i], b->hosts[i]) != 0)
            return 0;
    return 1;
}

unsigned
job_pod_first(const struct pod_job *pj)
{
    return pj->first;
}

unsigned
job_pod_nlocal(const struct pod_job *pj)
{
    return pj->nlocal;
}

unsigned
job_pod_nglobal(const struct pod_job *pj)
{
    return pj->nglobal;
}

int
job_pod_size(const struct pod_job *pj)
{
    return pj->size;
}

static void
rdv_run(struct work_item *it)
{
    struct pod_rdv *w = (struct pod_rdv *)it;
    struct pod_job *pj = w->j->pod;
    struct pod_store st;
    char err[512], prefix[64];
    void *v = NULL;
    size_t n = 0;
    int rc;

    if (pj->rank == 0) {
        /* A fresh generation in its own store (over its own Pod port, as the others reach
         * it): a rendezvous never meets an earlier one's keys. */
        uint64_t gen = 0;
        char g[32];
        if (getrandom(&gen, sizeof gen, 0) != (ssize_t)sizeof gen)
            gen = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)pj << 16);
        snprintf(g, sizeof g, "%016" PRIx64, gen);
        if (pod_kvc_drop(pj->kvc, err, sizeof err) < 0 ||
            pod_kvc_set(pj->kvc, "gen", g, strlen(g), err, sizeof err) != 0) {
            pod_fail(pj, "the rendezvous", err, -1);
            w->rc = IPUOF_E_IO;
            return;
        }
    }
    /* The others wait for rank 0's generation. */
    rc = pod_kvc_get(pj->kvc, "gen", &v, &n, pj->wait_ms, err, sizeof err);
    if (rc != 0 || n == 0 || n >= 32) {
        char why[700];
        errbuf_set(why, sizeof why, "%s", rc == 1 ? "its processes did not attach in time "
                 "(job_timeout)" : rc != 0 ? err : "a malformed generation");
        errbuf_set(pj->why, sizeof pj->why, "Pod host '%s' (the partition's first, at %s) did "
                 "not open partition '%s': %s", pj->hosts[0], pj->rdv, pj->job, why);
        pj->broken = 1;
        free(v);
        w->rc = rc == 1 ? IPUOF_E_TIMEOUT : IPUOF_E_CLOSED;
        return;
    }
    snprintf(prefix, sizeof prefix, "g%.*s", (int)n, (const char *)v);
    free(v);
    /* Every daemon says it is here, and waits up to job_timeout for the others (whose
     * processes may attach later); the communicator itself then waits at most timeout_ms,
     * at its opening as in every collective. */
    {
        char key[96];
        snprintf(key, sizeof key, "%s/here/%d", prefix, pj->rank);
        if (pod_kvc_set(pj->kvc, key, "1", 1, err, sizeof err) != 0) {
            pod_fail(pj, "the rendezvous", err, -1);
            w->rc = IPUOF_E_IO;
            return;
        }
        for (int k = 0; k < pj->size; k++) {
            snprintf(key, sizeof key, "%s/here/%d", prefix, k);
            rc = pod_kvc_get(pj->kvc, key, &v, &n, pj->wait_ms, err, sizeof err);
            free(v);
            v = NULL;
            if (rc != 0) {
                errbuf_set(pj->why, sizeof pj->why, "Pod host '%s' did not join partition "
                           "'%s': %s", pj->hosts[k], pj->job, rc == 1 ? "its processes did "
                           "not attach in time (job_timeout)" : err);
                pj->broken = 1;
                w->rc = rc == 1 ? IPUOF_E_TIMEOUT : IPUOF_E_CLOSED;
                return;
            }
        }
    }
    st.ctx = pj->kvc;
    st.set = pod_kvc_set;
    st.get = pod_kvc_get;
    rc = pod_coll_open(&pj->coll, &st, prefix, pj->rank, pj->size, pj->bind, pj->timeout_ms,
                       err, sizeof err);
    if (rc != 0) {
        pod_fail(pj, "the rendezvous", err, -1);
        w->rc = IPUOF_E_TIMEOUT;
        return;
    }
    w->rc = IPUOF_OK;
}

static void
rdv_done(struct work_item *it)
{
    struct pod_rdv *w = (struct pod_rdv *)it;
    struct job *j = w->j;

    if (it->dropped && w->rc == IPUOF_OK)
        w->rc = IPUOF_E_SHUTDOWN;
    if (!job_ended(j)) {
        if (w->rc == IPUOF_OK) {
            log_info("job '%s': Pod partition formed: rank %d of %d, processes %u-%u of %u",
                     j->name, j->pod->rank, j->pod->size, j->pod->first,
                     j->pod->first + j->pod->nlocal - 1, j->pod->nglobal);
            w->ready(j);
        } else {
            job_end_reset(j, w->rc, "%s", j->pod->why[0] ? j->pod->why : "ipuofd is stopping");
        }
    }
    free(w);
    job_unhold(j);
}

/* job_scope_pod's start: every local process of j has attached: forms the Pod partition on
 * a worker (rendezvous at rank 0's store, pod_coll_open), then calls ready(j) on the loop
 * thread, or ends j with PARTITION_RESET naming the host that did not come. 0, or -1 when
 * it cannot be started. */
static int
pod_scope_start(struct job *j, void (*ready)(struct job *j))
{
    struct pod_job *pj = j->pod;
    struct pod_rdv *w = calloc(1, sizeof *w);

    char err[256];

    if (w == NULL)
        return -1;
    /* Made here, so that an end of the job meanwhile can cancel its waits (pod_scope_end). */
    if (pod_kvc_new(&pj->kvc, pj->rdv, pj->token, pj->self, pj->job, pj->timeout_ms, err,
                    sizeof err) != IPUOF_OK) {
        log_warn("job '%s': %s", j->name, err);
        free(w);
        return -1;
    }
    w->j = j;
    w->ready = ready;
    w->item.run = rdv_run;
    w->item.done = rdv_done;
    job_hold(j);
    if (work_submit(j->srv->pod_work, &w->item) < 0) {
        job_unhold(j);
        free(w);
        return -1;
    }
    log_info("job '%s': all %u local processes attached; forming the Pod partition with %d "
             "host%s (store at %s)", j->name, pj->nlocal, pj->size - 1,
             pj->size == 2 ? "" : "s", pj->rdv);
    return 0;
}

/*
 * sim's xreduce: g holds this daemon's R replicas' gradients (n floats each); g[0..n)
 * becomes the sum over every replica of the partition. [pod] sum = replicas (default):
 * every replica's buffer in one left-to-right sum in rank-major order
 * (pod_coll_allreduce_f32_multi), the bits one daemon with all the replicas gets; sum =
 * daemons: this daemon's replicas summed left to right here, then gloo's ring over the
 * daemons' sums. Worker thread.
 */
static int
pod_xreduce(void *ctx, float *g, unsigned R, size_t n, struct sim_err *err)
{
    struct pod_job *pj = ctx;
    const float *in[POD_COLL_MAX_INPUTS];
    char why[512];
    struct timespec t0, t1;
    int rc;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (pj->broken) {
        rc = -1;
    } else if (!pj->sum_daemons && R <= POD_COLL_MAX_INPUTS) {
        for (unsigned r = 0; r < R; r++)
            in[r] = g + (size_t)r * n;
        rc = pod_coll_allreduce_f32_multi(pj->coll, in, (int)R, g, n, why, sizeof why);
    } else {
        for (unsigned r = 1; r < R; r++)
            for (size_t i = 0; i < n; i++)
                g[i] += g[(size_t)r * n + i];
        rc = pod_coll_allreduce_f32(pj->coll, g, n, why, sizeof why);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pj->xr_calls++;
    pj->xr_floats += n;
    pj->xr_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec));
    metrics_collective((uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000L +
                                  (t1.tv_nsec - t0.tv_nsec)));
    if (rc != 0) {
        if (!pj->broken)
            pod_fail(pj, "the gradient all-reduce", why, pod_coll_failed_rank(pj->coll));
        return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
    }
    return 0;
}

void
job_pod_model(struct job *j, struct model *m)
{
    struct sim_exe *e = m->entry->exe;
    struct sim_xreduce x = {pod_xreduce, j->pod, sim_exe_replicas(e) * (unsigned)j->pod->size,
                            j->srv->cfg.cost_gw_link_bytes_per_s};
    struct sim_err err;

    if (!sim_exe_is_training(e) || m->nproc != j->nproc)
        return; /* an inference model, or one process's own: no collective */
    if (sim_exe_set_xreduce(e, &x, &err) != 0)
        log_warn("job '%s': model %u: %s", j->name, m->id, err.msg);
    m->pod_sync |= MODEL_POD_COMPILED;
}

int
job_pod_collective(const struct job *j, const struct model *m)
{
    return j->pod != NULL && !j->pod->broken && m->nproc == j->nproc &&
           sim_exe_is_training(m->entry->exe);
}

int
job_pod_cut(struct job *j, const char *why, struct sim_err *err)
{
    struct pod_job *pj = j->pod;

    if (!pj->broken) {
        errbuf_set(pj->why, sizeof pj->why, "Pod host '%s' of partition '%s' went away "
                   "during the start of a call: %s", pj->self, pj->job, why);
        pj->broken = 1;
        pj->code = IPUOF_E_CLOSED;
    }
    pod_coll_close(pj->coll); /* the others see this rank go away at once */
    pj->coll = NULL;
    return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
}

const char *
job_pod_peer(const struct pod_job *pj, int i)
{
    if (i < 0 || i >= pj->size)
        return NULL;
    return i == pj->rank ? "" : pj->hosts[i];
}

int
job_pod_before_run(struct job *j, struct model *m, struct sim_err *err)
{
    struct pod_job *pj = j->pod;
    unsigned char sync;
    char why[512];
    int rc, flags;

    if (pj == NULL || m->nproc != j->nproc || !sim_exe_is_training(m->entry->exe))
        return 0;
    if (pj->broken)
        return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
    if (!m->pod_checked && (rc = pod_check_model(pj, m, err)) != 0)
        return rc;
    /* Whether rank 0's weights changed since the last call: its word is every daemon's. */
    flags = m->pod_sync;
    sync = (unsigned char)(flags != 0);
    if (pod_coll_broadcast(pj->coll, &sync, 1, 0, why, sizeof why) != 0) {
        pod_fail(pj, "the start of a call", why, pod_coll_failed_rank(pj->coll));
        return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
    }
    m->pod_sync = 0;
    return sync ? pod_sync_weights(pj, m, flags, err) : 0;
}

int
job_pod_after_run(struct job *j, struct model *m, int rc, struct sim_err *err)
{
    struct pod_job *pj = j->pod;
    char why[512];

    if (pj == NULL || m->nproc != j->nproc || !sim_exe_is_training(m->entry->exe) ||
        pj->broken)
        return rc;
    if (rc != 0) {
        /* This daemon's call failed on its own (bad input, cancelled): the others would
         * wait for it in the next collective, so the partition cannot go on. */
        pod_fail(pj, "a call", err->msg, -1);
        pod_coll_close(pj->coll); /* the others see this rank go away at once */
        pj->coll = NULL;
        return rc;
    }
    if ((rc = pod_show_buffers(pj, m->entry->exe, err)) != 0)
        return pj->broken ? rc : pod_self_fail(pj, "the sharing of replica 0's buffers", rc,
                                               err);
    if (pod_coll_barrier(pj->coll, why, sizeof why) != 0) {
        pod_fail(pj, "the barrier ending a call", why, pod_coll_failed_rank(pj->coll));
        return pod_xerr(err, IPUOF_E_CLOSED, "%s", pj->why);
    }
    return 0;
}

int
job_pod_check(struct job *j)
{
    if (j->pod == NULL || !j->pod->broken || job_ended(j))
        return 0;
    job_end_reset(j, j->pod->code ? j->pod->code : IPUOF_E_CLOSED, "%s; the partition is "
                  "released: attach again to form a new one", j->pod->why);
    return 1;
}

/* job_scope_pod's end: the rendezvous still waiting stops, and the partition's first
 * daemon drops its entries. */
static void
pod_scope_end(struct job *j)
{
    if (j->pod == NULL)
        return;
    pod_kvc_cancel(j->pod->kvc); /* a rendezvous still waiting stops now */
    if (j->pod->rank == 0 && j->srv->kv != NULL)
        pod_kv_drop(j->srv->kv, j->pod->job);
}

void
job_pod_free(struct pod_job *pj)
{
    if (pj == NULL)
        return;
    if (pj->xr_calls > 0) /* bench/pod_train.sh reads this line */
        log_info("job '%s': %" PRIu64 " gradient all-reduces across %d Pod hosts, %" PRIu64
                 " floats each, %.3f ms in all, %.3f ms each", pj->job, pj->xr_calls,
                 pj->size, pj->xr_floats / pj->xr_calls, (double)pj->xr_ns / 1e6,
                 (double)pj->xr_ns / 1e6 / (double)pj->xr_calls);
    pod_coll_close(pj->coll);
    pod_kvc_free(pj->kvc);
    free(pj);
}

int
job_pod_rank(const struct conn *c)
{
    return c->job != NULL && c->job->pod != NULL ? c->job->pod->rank : -1;
}

int
job_pod_ranks(const struct conn *c)
{
    return c->job != NULL && c->job->pod != NULL ? c->job->pod->size : 1;
}

int
job_pod_shared(const struct conn *c, const struct model *m)
{
    return c->job != NULL && c->job->pod != NULL && m->nproc == c->job->nproc &&
           sim_exe_is_training(m->entry->exe);
}

unsigned
job_pod_process_base(const struct conn *c)
{
    return c->job != NULL && c->job->pod != NULL ? c->job->pod->first : 0;
}

static void
pod_scope_free(struct job *j)
{
    job_pod_free(j->pod);
}

const struct job_scope job_scope_pod = {"pod", pod_scope_start, pod_scope_end, pod_scope_free};
