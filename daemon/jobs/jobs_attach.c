/*
 * jobs_attach.c — attaching as one of the several processes of a job (job_attach): the
 * job is found by its name and key, or made with its partition by the first process, and
 * every process is answered once all have come.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "fault_at.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "jobs_int.h"
#include "log.h"
#include "srv_state.h"

/* Compares job keys in time independent of where they differ. 1 when equal. */
static int
keys_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);

    for (size_t i = 0; i < la; i++)
        diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return diff == 0;
}

static struct job *
job_find(const struct srv *s, const char *name)
{
    for (struct job *j = s->jobs; j != NULL; j = j->next)
        if (strcmp(j->name, name) == 0)
            return j;
    return NULL;
}

/* A new job named name of nproc processes on count IPUs, holding a new partition; NULL
 * with an error sent to c. */
static struct job *
job_new(struct conn *c, uint64_t req_id, const char *name, unsigned nproc, unsigned count)
{
    struct srv *s = c->srv;
    struct dev_holder holder;
    struct job *j = job_alloc(s, name, nproc, count);
    char err[1024];
    int rc;

    if (j == NULL) {
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
        return NULL;
    }
    conn_holder(c, &holder);
    rc = dev_attach(s->inv, count, name, &holder, c, &j->part, err, sizeof err);
    if (rc != IPUOF_OK) {
        conn_send_error(c, req_id, rc, rc == IPUOF_E_BUSY ? IPUOF_ERROR_RECOVERABLE : 0,
                        rc == IPUOF_E_BUSY ? IPUOF_RECOVERY_RETRY : 0, "device", "%s%s", err,
                        rc == IPUOF_E_BUSY ? "; retry later" : "");
        event_free(j->timer);
        free(j);
        return NULL;
    }
    j->next = s->jobs;
    s->jobs = j; /* its job_timeout is armed as its first process attaches */
    log_info("job '%s': %u processes on IPUs %u-%u; waiting for them to attach", name, nproc,
             j->part->first, j->part->first + count - 1);
    return j;
}

/* Every process has come (and, across a Pod, the partition is formed): each gets its
 * attach reply. */
static void
job_attach_answer(struct job *j)
{
    job_hold(j);
    job_step(j, JOB_EV_FORMED);
    for (unsigned p = 0; p < j->nproc && !job_ended(j); p++) {
        struct job_proc *r = &j->proc[p];
        struct conn *o = r->conn;
        uint64_t id = r->attach_req;
        r->attach_req = 0;
        conn_enter(o);
        job_reply_attached(o, id, j->part, 0);
        conn_release_frames(o);
        conn_leave(o); /* a kill here ends the job through job_leave */
    }
    job_unhold(j);
}

/*
 * Every process of j has attached (JOB_EV_ATTACH_ALL), meeting the trigger point attach:
 * when a fault armed for attach fires on its partition, the IPUs go into error as it says,
 * every process's attach gets the fault's error (or its connection is cut) and the job
 * ends, its IPUs released. 1 when it fired (j is gone).
 */
static int
job_attach_fault(struct job *j)
{
    struct fault_point pt = {.at = FAULT_AT_ATTACH, .first = j->part->first,
                             .count = j->part->count, .part = j->name, .nproc = j->nproc};
    struct fault_hit hit;

    if (fault_at(j->srv, &pt, &hit) == FAULT_HIT_NONE)
        return 0;
    /* Each connection is taken out of the job before conn_leave may free it, so nothing in
     * the loop reaches j: it ends below, once. */
    for (unsigned p = 0; p < j->nproc; p++) {
        struct job_proc *r = &j->proc[p];
        struct conn *o = r->conn;
        uint64_t id = r->attach_req;
        if (o == NULL)
            continue;
        r->attach_req = 0;
        r->conn = NULL; /* answered here: job_end tells it nothing more */
        o->job = NULL;
        conn_enter(o);
        fault_reply(o, id, &hit); /* no hang at attach */
        conn_release_frames(o);
        conn_leave(o);
    }
    if (!job_ended(j))
        job_end(j, IPUOF_E_DEVICE_FAULT, "%s", hit.msg);
    return 1;
}

/* The checks of an attach that need no job: refused (an error sent to c) with 1, else 0. */
static int
attach_refused(struct conn *c, uint64_t req_id, const Ipuof__AttachRequest *a)
{
    if (a->partition_name[0] == '\0') {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "process %u of %u attaches without a partition name; the processes "
                        "of a job find each other by the name they all give", a->process_id,
                        a->num_processes);
        return 1;
    }
    if (strlen(a->job_key) > JOB_KEY_MAX) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "the job key is %zu bytes long; at most %d are accepted",
                        strlen(a->job_key), JOB_KEY_MAX);
        return 1;
    }
    if (a->job_key[0] == '\0' && strcmp(a->partition_name, JOB_DEFAULT_NAME) == 0) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "process %u of %u has no job key and no job name of its own: "
                        "unrelated programs would join each other's job under the default "
                        "name '%s'; start the processes with mpirun (its job id is the key), "
                        "or give every process of this launch the same IPUOF_JOB_KEY (e.g. "
                        "IPUOF_JOB_KEY=$(od -An -N16 -tx1 /dev/urandom | tr -d ' ')) or the "
                        "same name with IPUOF_PARTITION", a->process_id, a->num_processes,
                        JOB_DEFAULT_NAME);
        return 1;
    }
    if (a->num_processes > JOB_MAX_PROCS) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "%u processes asked for; a job has at most %d", a->num_processes,
                        JOB_MAX_PROCS);
        return 1;
    }
    return 0;
}

/* Plans this daemon's share of a partition spanning a Pod (a->n_pod_hosts > 0): *pj (the
 * caller frees it) and *count, this daemon's IPUs of the partition. -1 when refused (an
 * error sent to c, nothing to free). */
static int
attach_pod_plan(struct conn *c, uint64_t req_id, const Ipuof__AttachRequest *a,
                unsigned *count, struct pod_job **pj)
{
    char err[1024];
    int rc = job_pod_plan(c->srv, a, pj, err, sizeof err);

    if (rc != IPUOF_OK) {
        conn_send_error(c, req_id, rc, 0, 0, "pod", "%s", err);
        return -1;
    }
    if (*count % (unsigned)job_pod_size(*pj) != 0) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "pod",
                        "the partition's %u IPUs cannot be shared evenly by its %d Pod "
                        "hosts; ask for a multiple of %d", *count, job_pod_size(*pj),
                        job_pod_size(*pj));
        job_pod_free(*pj);
        *pj = NULL;
        return -1;
    }
    *count /= (unsigned)job_pod_size(*pj);
    return 0;
}

/* Whether process a->process_id's Pod plan pj (NULL: none) fits the job j it joins: 1 when
 * refused (an error sent to c), else 0. */
static int
attach_pod_differs(struct conn *c, uint64_t req_id, const Ipuof__AttachRequest *a,
                   const struct job *j, const struct pod_job *pj)
{
    if ((j->pod != NULL) != (pj != NULL)) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "pod",
                        "process %u %s IPUOF_POD_HOSTS but the job on partition '%s' was "
                        "started %s; give every process the same", a->process_id,
                        pj ? "gives" : "gives no", a->partition_name, pj ? "without" : "with");
        return 1;
    }
    if (pj != NULL && job_pod_nglobal(j->pod) != a->num_processes) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "num_processes differs: process %u says %u, the job on partition '%s' "
                        "has %u; give every process the same count", a->process_id,
                        a->num_processes, j->name, job_pod_nglobal(j->pod));
        return 1;
    }
    if (pj != NULL && !job_pod_same(j->pod, pj)) {
        /* Its place would be computed from other hosts: refused before it is used. */
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "pod",
                        "process %u names other Pod hosts (IPUOF_POD_HOSTS or the config "
                        "file's \"Pod hosts\") than the job on partition '%s' was started "
                        "with; give every process the same hosts in the same order",
                        a->process_id, j->name);
        return 1;
    }
    return 0;
}

void
job_attach(struct conn *c, uint64_t req_id, const Ipuof__AttachRequest *a, unsigned count)
{
    struct job *j;
    struct job_proc *q;
    struct pod_job *pj = NULL;
    unsigned nproc = a->num_processes, idx = a->process_id, first = 0;

    if (attach_refused(c, req_id, a))
        return;
    if (a->n_pod_hosts > 0) {
        /* A partition spanning a Pod: this daemon holds its rank's processes, with its
         * share of the IPUs (num_ipus is the whole partition's). */
        if (attach_pod_plan(c, req_id, a, &count, &pj) < 0)
            return;
        first = job_pod_first(pj);
        nproc = job_pod_nlocal(pj);
        idx = a->process_id - first;
    }
    j = job_find(c->srv, a->partition_name);
    if (j != NULL && attach_pod_differs(c, req_id, a, j, pj)) {
        job_pod_free(pj);
        return;
    }
    if (j != NULL) {
        job_pod_free(pj); /* the job has its own plan; this one only checked the attach */
        pj = NULL;
    }
    if (j == NULL) {
        if (dev_find_partition(c->srv->inv, a->partition_name) != NULL) {
            conn_send_error(c, req_id, IPUOF_E_BUSY, 0, 0, "device",
                            "partition '%s' is held by a single process, not by a job of %u "
                            "processes; choose another name", a->partition_name,
                            a->num_processes);
            return;
        }
        j = job_new(c, req_id, a->partition_name, nproc, count);
        if (j == NULL) {
            job_pod_free(pj);
            return;
        }
        snprintf(j->key, sizeof j->key, "%s", a->job_key);
        if (pj != NULL) {
            j->proc_base = first;
            j->nproc_all = a->num_processes;
            j->pod = pj;
            j->scope = &job_scope_pod;
        }
    } else if (!keys_equal(a->job_key, j->key)) {
        /* Nothing of the job is told: not its processes, count or who holds it. */
        log_warn("client %u (%s, pid %u): refused joining job '%s' with a different job key",
                 c->id, c->name, c->pid, j->name);
        conn_send_error(c, req_id, IPUOF_E_BUSY, 0, 0, "device",
                        "partition '%s' is taken by another job (its processes share a job "
                        "key this process does not have); processes of one launch share the "
                        "key of their launcher (mpirun) or IPUOF_JOB_KEY: start them together, "
                        "or choose another name with IPUOF_PARTITION", a->partition_name);
        return;
    } else if (j->phase != JOB_GATHER_ATTACH || job_gather_complete(&j->gather)) {
        conn_send_error(c, req_id, IPUOF_E_BUSY, 0, 0, "device",
                        "the job on partition '%s' already has all its %u processes",
                        j->name, j->nproc);
        return;
    } else if (j->pod == NULL && a->num_processes != j->nproc) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "num_processes differs: process %u says %u, the job on partition '%s' "
                        "has %u; give every process the same count", a->process_id,
                        a->num_processes, j->name, j->nproc);
        return;
    } else if (count != j->count) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "num_ipus differs: process %u asks for %u, the job on partition '%s' "
                        "has %u; every process asks for the whole partition", a->process_id,
                        count, j->name, j->count);
        return;
    } else if (j->proc[idx].conn != NULL) {
        const struct job_proc *o = &j->proc[idx];
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "process id %u of the job on partition '%s' is already attached "
                        "(pid %u, %s); give each process its own id 0..%u", a->process_id,
                        j->name, o->pid, o->peer, a->num_processes - 1);
        return;
    }
    q = &j->proc[idx];
    q->conn = c;
    q->pid = c->pid;
    snprintf(q->peer, sizeof q->peer, "%s", c->peer);
    q->attach_req = req_id;
    c->job = j;
    c->proc_id = q->id;
    c->revoked_code = 0;
    conn_hold_frames(c); /* its frames wait for the attach reply */
    if (job_gather_arrive(&j->gather, idx) == 0) {
        job_step(j, JOB_EV_ATTACH); /* the first arms job_timeout: wait for the others */
        return;
    }
    job_step(j, JOB_EV_ATTACH_ALL);
    log_info("job '%s': all %u processes attached", j->name, j->nproc);
    if (job_attach_fault(j))
        return;
    if (j->scope->start(j, job_attach_answer) < 0) /* answers once the partition formed */
        job_end_reset(j, IPUOF_E_NOMEM, "out of memory forming the Pod partition '%s'",
                      j->name);
}
