/*
 * jobs_compile.c — a job's compiles and models: each process's compile is held until every
 * process has sent one, then compared (compile_diff.c) and compiled once for all of them on a
 * worker (compile_task.c); the reply goes to each process with the shapes of its own slice.
 * Also an inference model made here from a training model for one process, and the lookup
 * and freeing of the job's models.
 */
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_int.h"
#include "conn.h"
#include "fault_at.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "jobs_int.h"
#include "log.h"
#include "models.h"
#include "srv_state.h"

/* Answers every process's held compile with the error code and msg. */
static void
compile_refuse(struct job *j, int code, const char *msg)
{
    job_hold(j);
    job_step(j, JOB_EV_COMPILE_FAIL);
    for (unsigned k = 0; k < j->nproc && !job_ended(j); k++) {
        struct job_proc *r = &j->proc[k];
        struct conn *o = r->conn;
        uint64_t id = r->compile_req;
        compile_task_free(r->ct);
        r->ct = NULL;
        r->compile_req = 0;
        conn_enter(o);
        conn_send_error(o, id, code, 0, 0, "compiler", "%s", msg);
        conn_release_frames(o);
        conn_leave(o);
    }
    job_unhold(j);
}

/* j's compile for processes proc0 .. proc0+nproc-1 finished (j alive): m (NULL on
 * failure; taken, with proc0 and nproc set) is the job's model; rc/msg the failure. Replies
 * to those processes; a model whose reply could not be sent (too large to describe) is freed.
 * The compile task's reference (compile_finish lets go of it after this) keeps j while a
 * process leaving in the loop ends the job. */
static void
job_compiled(struct job *j, unsigned proc0, unsigned nproc, struct model *m, int rc,
             const char *msg, int cached, uint64_t us)
{
    struct srv *s = j->srv;
    struct fault_hit hit = {.what = FAULT_HIT_NONE};
    int refused = 0;

    if (m != NULL && j->part != NULL) { /* the executable is loaded: trigger point load */
        struct fault_point pt = {.at = FAULT_AT_LOAD, .first = j->part->first,
                                 .count = j->part->count, .part = j->name, .model = m->name};
        if (fault_at(s, &pt, &hit) != FAULT_HIT_NONE) { /* a fault fired: it is not loaded */
            model_free(s->inv, &s->cache, m);
            m = NULL;
        }
    }
    if (m != NULL) {
        m->next = j->models;
        j->models = m;
        job_update_loaded(j);
        if (j->pod != NULL)
            job_pod_model(j, m);
        log_info("job '%s': model %u '%s' %s for %u process%s x %u replicas in %.1f ms on IPUs "
                 "%u-%u", j->name, m->id, m->name, cached ? "from the cache" : "compiled",
                 m->nproc, m->nproc == 1 ? "" : "es", sim_exe_replicas(m->entry->exe) / m->nproc,
                 (double)us / 1000.0, m->first_ipu, m->first_ipu + m->nipus - 1);
    }
    for (unsigned p = proc0; p < proc0 + nproc && !job_ended(j); p++) {
        struct job_proc *q = &j->proc[p];
        struct conn *o = q->conn;
        uint64_t id = q->compile_req;
        if (o == NULL || id == 0)
            continue;
        q->compile_req = 0;
        conn_enter(o);
        if (hit.what != FAULT_HIT_NONE) { /* every process of the job meets the fault */
            if (!fault_reply(o, id, &hit))
                conn_release_frames(o);
            conn_leave(o);
            continue;
        }
        if (m == NULL)
            conn_send_error(o, id, rc, 0, 0, "compiler", "%s", msg);
        else if (compile_reply_send(o, id, m, cached, cached ? 0 : us) < 0)
            refused = 1;
        conn_release_frames(o);
        conn_leave(o);
    }
    if (refused && !job_ended(j)) { /* a reply could not be sent: the model is nobody's */
        struct model **pp;
        for (pp = &j->models; *pp != m; pp = &(*pp)->next)
            ;
        *pp = m->next;
        model_free(j->srv->inv, &j->srv->cache, m);
        job_update_loaded(j);
    }
}

/* j's compile reports progress p: every process waiting for the compile gets it under its
 * own request id (a client's wait for a long compile is kept alive by progress, so every
 * process needs it). The compile task on the worker refers to j until compile_finish, so
 * a connection dropped in the loop may end j but not free it. */
static void
job_compile_progress(struct job *j, const Ipuof__CompileProgress *p)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;

    h.body_case = IPUOF__HEADER__BODY_COMPILE_PROGRESS;
    h.compile_progress = (Ipuof__CompileProgress *)p;
    for (unsigned k = 0; k < j->nproc && !job_ended(j); k++) {
        struct job_proc *q = &j->proc[k];
        if (q->conn == NULL || q->compile_req == 0)
            continue;
        h.request_id = q->compile_req;
        conn_enter(q->conn);
        conn_send(q->conn, &h, NULL, 0);
        conn_leave(q->conn); /* a connection dropped for its backlog ends the job */
    }
}

static void
on_progress_ev(evutil_socket_t fd, short what, void *arg)
{
    struct compile_task *ct = arg;
    Ipuof__CompileProgress p = IPUOF__COMPILE_PROGRESS__INIT;

    (void)fd;
    (void)what;
    p.done = (uint32_t)atomic_load(&ct->prog_done);
    p.total = (uint32_t)atomic_load(&ct->prog_total);
    if (!job_ended(ct->job)) /* every process of the job waits for this compile */
        job_compile_progress(ct->job, &p);
}

/* Loop thread: the compile finished (or was dropped by a stopping daemon before it
 * started). Answers the job's processes unless the job ended meanwhile (they had their
 * error then). gathered: the job's compile for all its processes (JOB_COMPILING), not one
 * made at once for one process (job_compile_here). */
static void
compile_finish(struct compile_task *ct, int gathered)
{
    struct work_item *it = &ct->item;
    struct job *j = ct->job;
    struct model *m = NULL;

    if (ct->prog_ev != NULL) /* it went to a worker (see compile_start) */
        dev_set_busy(ct->srv->inv, ct->first_ipu, ct->part_count, 0);
    if (job_ended(j)) {
        cache_release(&ct->srv->cache, ct->entry);
        goto out;
    }
    if (it->dropped) {
        ct->rc = IPUOF_E_SHUTDOWN;
        snprintf(ct->err.msg, sizeof ct->err.msg,
                 "the compile of '%s' was not started: ipuofd is stopping", ct->name);
    }
    if (ct->rc == IPUOF_OK)
        m = compile_task_model(ct);
    if (m == NULL)
        log_info("job '%s': compile of '%s' failed: %s", j->name, ct->name, ct->err.msg);
    if (gathered)
        job_step(j, JOB_EV_COMPILED);
    job_compiled(j, ct->proc0, ct->nproc, m, ct->rc, ct->err.msg, ct->cached, ct->us);
out:
    job_unhold(j);
    compile_task_free(ct);
}

static void
compile_done(struct work_item *it)
{
    compile_finish((struct compile_task *)it, 1);
}

/* Hands ct to a worker for job j, held until compile_done. 0, or -1 when out of memory (ct
 * is then still the caller's). */
static int
compile_start(struct job *j, struct compile_task *ct)
{
    if (compile_task_queue(ct, compile_done, on_progress_ev) < 0)
        return -1;
    ct->job = j;
    job_hold(j); /* until compile_done */
    dev_set_busy(ct->srv->inv, ct->first_ipu, ct->part_count, 1);
    return 0;
}

/* Compiles ct for every process of j (replicas x j->nproc) on a worker; the job is held
 * until the compile ends, which then calls job_compiled unless the job ended. 0, or an
 * IPUOF_E_* code with a sentence in msg (ct is then still the caller's). */
static int
compile_submit(struct job *j, struct compile_task *ct, char *msg, size_t len)
{
    unsigned nproc = j->nproc, R = ct->replicas_per_process * nproc;
    char *key;

    if (R > ct->part_count) {
        snprintf(msg, len, "%u processes x %u replicas need %u IPUs, but partition '%s' has "
                 "%u; attach a partition of %u IPUs or lower the replication factor", nproc,
                 ct->replicas_per_process, R, j->name, ct->part_count, dev_round_pow2(R));
        return IPUOF_E_INVAL;
    }
    ct->opts.replicas = R; /* the shared compile: the replicas of all its processes */
    ct->proc0 = 0;
    ct->nproc = nproc;
    for (unsigned i = 0; i < R; i++)
        if (ct->remaining[i] < ct->opts.ipu_memory_bytes)
            ct->opts.ipu_memory_bytes = ct->remaining[i];
    key = compile_options_key(ct);
    if (key == NULL) {
        snprintf(msg, len, "out of memory");
        return IPUOF_E_NOMEM;
    }
    free(ct->key);
    ct->key = key;
    if (compile_start(j, ct) < 0) {
        snprintf(msg, len, "out of memory");
        return IPUOF_E_NOMEM;
    }
    return IPUOF_OK;
}

void
job_compile_ready(struct conn *c, struct compile_task *ct)
{
    struct job *j = c->job;
    struct job_proc *q = &j->proc[c->proc_id], *p0 = &j->proc[0];
    char msg[768];
    int rc;

    if (q->ct != NULL || q->compile_req != 0) {
        conn_send_error(c, ct->req_id, IPUOF_E_STATE, 0, 0, "protocol",
                        "process %u already has a compile waiting for the job's other "
                        "processes", q->id);
        compile_task_free(ct);
        return;
    }
    if (j->phase != JOB_READY && j->phase != JOB_GATHER_COMPILE) {
        conn_send_error(c, ct->req_id, IPUOF_E_STATE, 0, 0, "protocol",
                        "process %u sends a compile while the job on partition '%s' is %s "
                        "(model %u); every process makes the same calls in the same order",
                        q->id + j->proc_base, j->name, job_phase_name(j->phase),
                        j->run_model != NULL ? j->run_model->id : 0);
        compile_task_free(ct);
        return;
    }
    q->ct = ct;
    q->compile_req = ct->req_id;
    conn_hold_frames(c);
    if (job_end_if_left(j, 0, j->nproc)) /* answers this compile too */
        return;
    job_gather_for(j, JOB_READY, 0, j->nproc);
    if (job_gather_arrive(&j->gather, q->id) == 0) {
        job_step(j, JOB_EV_COMPILE); /* the first arms job_timeout: wait for the others */
        return;
    }
    job_step(j, JOB_EV_COMPILE_ALL);
    for (unsigned p = 1; p < j->nproc; p++) {
        if (compile_task_diff(p0->ct, 0, j->proc[p].ct, p, msg, sizeof msg)) {
            compile_refuse(j, IPUOF_E_INVAL, msg);
            return;
        }
    }
    rc = compile_submit(j, p0->ct, msg, sizeof msg);
    if (rc != IPUOF_OK) {
        compile_refuse(j, rc, msg);
        return;
    }
    p0->ct = NULL; /* the worker has it */
    for (unsigned p = 1; p < j->nproc; p++) {
        compile_task_free(j->proc[p].ct);
        j->proc[p].ct = NULL;
    }
}

void
job_compile_here(struct conn *c, uint64_t req_id, struct compile_task *ct)
{
    c->job->proc[c->proc_id].compile_req = req_id;
    conn_hold_frames(c);
    ct->proc0 = c->proc_id; /* this process's own model */
    ct->nproc = 1;
    ct->job = c->job;
    job_hold(c->job); /* compile_finish lets go */
    compile_finish(ct, 0); /* replies, and frees ct */
}

struct model *
job_find_model(const struct conn *c, uint32_t id)
{
    if (c->job == NULL)
        return NULL;
    for (struct model *m = c->job->models; m != NULL; m = m->next)
        if (m->id == id && c->proc_id - m->proc0 < m->nproc &&
            !(m->freed_by & ((uint64_t)1 << c->proc_id)))
            return m;
    return NULL;
}

void
job_send_missing(struct conn *c, uint64_t req_id, uint32_t id, const char *what)
{
    if (c->revoked_code != 0) {
        conn_send_error(c, req_id, c->revoked_code, IPUOF_ERROR_RECOVERABLE,
                        c->revoked_code == IPUOF_E_SHUTDOWN ? IPUOF_RECOVERY_RETRY
                                                             : IPUOF_RECOVERY_REATTACH,
                        "device", "model %u is gone: %s", id, c->revoked_msg);
        return;
    }
    conn_send_error(c, req_id, IPUOF_E_NOTFOUND, 0, 0, "executor",
                    "no model %u on this connection%s", id, what);
}

int
job_free_model(struct conn *c, uint32_t id)
{
    struct job *j = c->job;
    struct model *m = job_find_model(c, id), **pp;

    if (m == NULL)
        return -1;
    m->freed_by |= (uint64_t)1 << c->proc_id;
    if (m->busy || m->freed_by != (m->nproc == 64 ? UINT64_MAX
                                   : (((uint64_t)1 << m->nproc) - 1) << m->proc0))
        return 0;
    for (pp = &j->models; *pp != m; pp = &(*pp)->next)
        ;
    *pp = m->next;
    model_free(c->srv->inv, &c->srv->cache, m);
    job_update_loaded(j);
    return 0;
}
