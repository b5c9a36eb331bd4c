/*
 * jobs.c — jobs (see jobs.h): a single process's own job, and jobs of several host
 * processes sharing one partition: gathering the processes' attaches and compiles,
 * receiving each process's slice of a run straight into its replicas' rows, running once,
 * answering each process with its own replicas' outputs, and ending the job cleanly when a
 * process leaves.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "dispatch.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "jobs_int.h"
#include "log.h"
#include "models.h"
#include "server.h"
#include "slices.h"

/* Frees j when it has ended and nothing refers to it any more. */
void
djob_maybe_free(struct djob *j)
{
    if (!j->dead || j->inflight != NULL || j->arriving > 0 || j->hold > 0)
        return;
    while (j->models != NULL) {
        struct model *m = j->models;
        j->models = m->next;
        model_free(j->srv, m);
    }
    if (j->timer != NULL)
        event_free(j->timer);
    free(j);
}

/* A job of nproc processes (fields zeroed, the processes numbered), or NULL. */
static struct djob *
job_alloc(struct srv *s, const char *name, unsigned nproc, unsigned count)
{
    struct djob *j = calloc(1, sizeof *j + nproc * sizeof j->proc[0]);

    if (j == NULL)
        return NULL;
    j->srv = s;
    snprintf(j->name, sizeof j->name, "%s", name);
    j->nproc = nproc;
    j->count = count;
    for (unsigned p = 0; p < nproc; p++) {
        j->proc[p].job = j;
        j->proc[p].id = p;
    }
    return j;
}

int
djob_solo(struct conn *c, struct dev_partition *p)
{
    struct djob *j = job_alloc(c->srv, p->name, 1, p->count);

    if (j == NULL)
        return -1;
    j->part = p;
    j->started = 1;
    j->nattached = 1;
    j->proc[0].conn = c;
    j->proc[0].pid = c->pid;
    snprintf(j->proc[0].peer, sizeof j->proc[0].peer, "%s", c->peer);
    c->djob = j;
    c->djob_pid = 0;
    return 0;
}

void
djob_solo_end(struct conn *c, int cancel_code, int conn_dying)
{
    struct djob *j = c->djob;

    models_release_all(c, cancel_code, conn_dying);
    dev_release(c->srv->inv, j->part);
    c->djob = NULL;
    free(j); /* a run in flight refers to its model and connection, never to the job */
}

int
djob_shared(const struct conn *c)
{
    return c->djob != NULL && c->djob->nproc > 1;
}

struct dev_partition *
conn_part(const struct conn *c)
{
    return c->djob != NULL ? c->djob->part : NULL;
}

struct model **
djob_models(const struct conn *c)
{
    return c->djob != NULL ? &c->djob->models : NULL;
}

/* Brackets a loop that talks to the processes' connections: a connection freed meanwhile
 * may end the job, which is then freed at djob_unhold(). job_unhold returns 1 when the job
 * has ended (it may be gone: do not touch it). */
void
djob_hold(struct djob *j)
{
    j->hold++;
}

int
djob_unhold(struct djob *j)
{
    int dead = j->dead;

    j->hold--;
    djob_maybe_free(j);
    return dead;
}

/* The process ids (", "-separated) that have not done what the phase waits for. */
static void
missing(const struct djob *j, int phase, char *out, size_t len)
{
    size_t used = 0;

    out[0] = '\0';
    for (unsigned p = 0; p < j->nproc && used + 16 < len; p++) {
        const struct djob_proc *q = &j->proc[p];
        int absent = phase == 0 ? q->conn == NULL
                     : phase == 1 ? q->cj == NULL
                                  : q->run_req == 0 || q->run_arriving;
        if (absent)
            used += (size_t)snprintf(out + used, len - used, "%s%u", used ? ", " : "", p);
    }
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct djob *j = arg;
    char who[256];
    int phase = !j->started ? 0 : j->ncompile > 0 ? 1 : 2;

    (void)fd;
    (void)what;
    missing(j, phase, who, sizeof who);
    djob_end(j, IPUOF_E_TIMEOUT,
            "the job on partition '%s' waited %u s (job_timeout) for process%s %s of %u to %s; "
            "start every process with the same partition name and process count, and let "
            "each one make the same calls", j->name, j->srv->cfg.job_timeout,
            strchr(who, ',') ? "es" : "", who, j->nproc,
            phase == 0 ? "attach" : phase == 1 ? "send its compile" : "send its slice of the run");
}

void
djob_arm_timer(struct djob *j)
{
    struct timeval tv = {.tv_sec = j->srv->cfg.job_timeout, .tv_usec = 0};

    evtimer_add(j->timer, &tv);
}

/* Sends a Notice that the partition is gone to c. */
static void
send_notice(struct conn *c, const struct djob *j, int code, const char *msg)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__Notice n = IPUOF__NOTICE__INIT;
    Ipuof__Error e = IPUOF__ERROR__INIT;
    uint32_t ids[CFG_MAX_IPUS];

    n.n_ipu_ids = j->part ? dev_partition_ids(j->part, ids) : 0;
    n.ipu_ids = ids;
    e.code = (uint32_t)code;
    e.component = (char *)"device";
    e.message = (char *)msg;
    e.error_class = IPUOF__ERROR_CLASS__ERROR_CLASS_RECOVERABLE;
    e.recovery = code == IPUOF_E_SHUTDOWN ? IPUOF__RECOVERY_ACTION__RECOVERY_RETRY
                                          : IPUOF__RECOVERY_ACTION__RECOVERY_REATTACH;
    n.error = &e;
    r.body_case = IPUOF__HEADER__BODY_NOTICE;
    r.notice = &n;
    conn_send(c, &r, NULL, 0);
}

/*
 * Ends the job: every process still there gets an error for what it waits for (and a
 * Notice when it had its partition), the models and the partition are released, and the
 * job is freed once its run in flight and arriving slices are done.
 */
void
djob_end(struct djob *j, int code, const char *fmt, ...)
{
    struct srv *s = j->srv;
    struct djob **pp;
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_info("job '%s': ended: %s", j->name, msg);
    evtimer_del(j->timer);
    for (pp = &s->jobs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    }
    j->dead = 1;
    if (j->inflight != NULL)
        sim_exe_cancel(j->inflight->m->entry->exe);
    djob_hold(j);
    for (unsigned p = 0; p < j->nproc; p++) {
        struct djob_proc *q = &j->proc[p];
        struct conn *c = q->conn;
        int recovery = code == IPUOF_E_TIMEOUT || code == IPUOF_E_SHUTDOWN
                           ? IPUOF_RECOVERY_RETRY : IPUOF_RECOVERY_REATTACH;

        compile_job_discard(q->cj);
        q->cj = NULL;
        if (c == NULL)
            continue;
        conn_enter(c);
        if (q->attach_req != 0) {
            conn_send_error(c, q->attach_req, code, IPUOF_ERROR_RECOVERABLE, recovery,
                            "device", "%s", msg);
            conn_job_end(c);
        } else {
            send_notice(c, j, code, msg);
        }
        if (q->compile_req != 0) {
            conn_send_error(c, q->compile_req, code, IPUOF_ERROR_RECOVERABLE, recovery,
                            "device", "%s", msg);
            if (!q->compile_submitter) /* the submitter's compile_done ends its wait */
                conn_job_end(c);
        }
        if (q->run_req != 0 && !q->run_arriving) {
            conn_send_error(c, q->run_req, code, IPUOF_ERROR_RECOVERABLE, recovery, "device",
                            "%s", msg);
            conn_job_end(c);
        }
        /* A slice still arriving is answered when its last byte is in (on_slice). */
        c->djob = NULL;
        q->conn = q->run_arriving ? c : NULL;
        conn_leave(c);
    }
    /* The IPUs go back to the pool now; the models themselves are freed with the job. */
    for (struct model *m = j->models; m != NULL; m = m->next) {
        model_unplace(s, m);
        m->owner = NULL;
    }
    dev_release(s->inv, j->part);
    j->part = NULL;
    djob_unhold(j);
    srv_serve_waiters(s);
}

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

static struct djob *
job_find(const struct srv *s, const char *name)
{
    for (struct djob *j = s->jobs; j != NULL; j = j->next)
        if (strcmp(j->name, name) == 0)
            return j;
    return NULL;
}

/* A new job named name of nproc processes on count IPUs, holding a new partition; NULL
 * with an error sent to c. */
static struct djob *
job_new(struct conn *c, uint64_t req_id, const char *name, unsigned nproc, unsigned count)
{
    struct srv *s = c->srv;
    struct dev_holder holder;
    struct djob *j = job_alloc(s, name, nproc, count);
    char err[1024];
    int rc;

    if (j == NULL || (j->timer = evtimer_new(s->base, on_timer, j)) == NULL) {
        free(j);
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
    s->jobs = j;
    djob_arm_timer(j);
    log_info("job '%s': %u processes on IPUs %u-%u; waiting for them to attach", name, nproc,
             j->part->first, j->part->first + count - 1);
    return j;
}

void
djob_attach(struct conn *c, uint64_t req_id, const Ipuof__AttachRequest *a, unsigned count)
{
    struct djob *j;
    struct djob_proc *q;

    if (a->partition_name[0] == '\0') {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "process %u of %u attaches without a partition name; the processes "
                        "of a job find each other by the name they all give", a->process_id,
                        a->num_processes);
        return;
    }
    if (strlen(a->job_key) > DJOB_KEY_MAX) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "the job key is %zu bytes long; at most %d are accepted",
                        strlen(a->job_key), DJOB_KEY_MAX);
        return;
    }
    if (a->job_key[0] == '\0' && strcmp(a->partition_name, DJOB_DEFAULT_NAME) == 0) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "process %u of %u has no job key and no job name of its own: "
                        "unrelated programs would join each other's job under the default "
                        "name '%s'; start the processes with mpirun (its job id is the key), "
                        "or give every process of this launch the same IPUOF_JOB_KEY (e.g. "
                        "IPUOF_JOB_KEY=$(od -An -N16 -tx1 /dev/urandom | tr -d ' ')) or the "
                        "same name with IPUOF_PARTITION", a->process_id, a->num_processes,
                        DJOB_DEFAULT_NAME);
        return;
    }
    if (a->num_processes > DJOB_MAX_PROCS) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "%u processes asked for; a job has at most %d", a->num_processes,
                        DJOB_MAX_PROCS);
        return;
    }
    j = job_find(c->srv, a->partition_name);
    if (j == NULL) {
        if (dev_find_partition(c->srv->inv, a->partition_name) != NULL) {
            conn_send_error(c, req_id, IPUOF_E_BUSY, 0, 0, "device",
                            "partition '%s' is held by a single process, not by a job of %u "
                            "processes; choose another name", a->partition_name,
                            a->num_processes);
            return;
        }
        j = job_new(c, req_id, a->partition_name, a->num_processes, count);
        if (j == NULL)
            return;
        snprintf(j->key, sizeof j->key, "%s", a->job_key);
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
    } else if (j->started) {
        conn_send_error(c, req_id, IPUOF_E_BUSY, 0, 0, "device",
                        "the job on partition '%s' already has all its %u processes",
                        j->name, j->nproc);
        return;
    } else if (a->num_processes != j->nproc) {
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
    } else if (j->proc[a->process_id].conn != NULL) {
        const struct djob_proc *o = &j->proc[a->process_id];
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "process id %u of the job on partition '%s' is already attached "
                        "(pid %u, %s); give each process its own id 0..%u", a->process_id,
                        j->name, o->pid, o->peer, j->nproc - 1);
        return;
    }
    q = &j->proc[a->process_id];
    q->conn = c;
    q->pid = c->pid;
    snprintf(q->peer, sizeof q->peer, "%s", c->peer);
    q->attach_req = req_id;
    c->djob = j;
    c->djob_pid = q->id;
    conn_job_begin(c); /* its frames wait for the attach reply */
    if (++j->nattached < j->nproc)
        return;
    j->started = 1;
    evtimer_del(j->timer);
    log_info("job '%s': all %u processes attached", j->name, j->nproc);
    djob_hold(j);
    for (unsigned p = 0; p < j->nproc && !j->dead; p++) {
        struct djob_proc *r = &j->proc[p];
        struct conn *o = r->conn;
        uint64_t id = r->attach_req;
        r->attach_req = 0;
        conn_enter(o);
        reply_attached(o, id, j->part, 0);
        conn_job_end(o);
        conn_leave(o); /* a kill here ends the job through djob_leave */
    }
    djob_unhold(j);
}

/* Ends j when a process has left: the others cannot make a collective call without it.
 * 1 when it ended. */
int
djob_end_if_left(struct djob *j)
{
    for (unsigned p = 0; p < j->nproc; p++) {
        const struct djob_proc *q = &j->proc[p];
        if (q->left[0] != '\0') {
            djob_end(j, IPUOF_E_CLOSED, "process %u of the job on partition '%s' (pid %u, %s) "
                    "%s; the job has ended and its IPUs are free: start every process again",
                    q->id, j->name, q->pid, q->peer, q->left);
            return 1;
        }
    }
    return 0;
}

/*
 * Takes c out of its job. When the others wait for it (attaching, compiling, a run's
 * slices) or it was the last, the job ends now: every process still there gets an error
 * naming c's process. Otherwise the job ends at the next call that needs every process,
 * and the others may meanwhile finish what they do alone (process 0's test, say).
 */
static void
leave(struct conn *c, const char *how)
{
    struct djob *j = c->djob;
    struct djob_proc *q = &j->proc[c->djob_pid];
    int waiting = !j->started || j->ncompile > 0 || j->nrun > 0 || j->arriving > 0 ||
                  j->inflight != NULL || j->proc[0].compile_submitter;
    unsigned live = 0;

    snprintf(q->left, sizeof q->left, "%s", how);
    q->conn = NULL;
    compile_job_discard(q->cj);
    q->cj = NULL;
    if (q->run_arriving) { /* its sink's abort or done is called no more for the job */
        q->run_arriving = 0;
        j->arriving--;
    }
    q->run_req = q->compile_req = q->attach_req = 0;
    c->djob = NULL;
    for (unsigned p = 0; p < j->nproc; p++) {
        struct conn *o = j->proc[p].conn;
        if (o == NULL)
            continue;
        if (live++ == 0 && j->part->owner == c) { /* a reset goes to a process still here */
            j->part->owner = o;
            conn_holder(o, &j->part->holder);
        }
    }
    if (waiting)
        djob_end_if_left(j);
    else if (live == 0)
        djob_end(j, IPUOF_E_CLOSED, "all %u processes have left", j->nproc);
}

void
djob_detach(struct conn *c, uint64_t req_id)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__DetachReply dr = IPUOF__DETACH_REPLY__INIT;
    uint32_t ids[CFG_MAX_IPUS];

    dr.n_ipu_ids = dev_partition_ids(c->djob->part, ids);
    dr.ipu_ids = ids;
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_DETACH_REPLY;
    r.detach_reply = &dr;
    leave(c, "detached");
    conn_send(c, &r, NULL, 0);
}

void
djob_leave(struct conn *c)
{
    leave(c, "disconnected");
}

void
djob_revoke(struct conn *c, int code, const char *msg)
{
    djob_end(c->djob, code, "%s", msg);
}

/* ---- compile ---------------------------------------------------------------------------- */

/* Answers every process's held compile with the error code and msg. */
static void
compile_refuse(struct djob *j, int code, const char *msg)
{
    djob_hold(j);
    for (unsigned k = 0; k < j->nproc && !j->dead; k++) {
        struct djob_proc *r = &j->proc[k];
        struct conn *o = r->conn;
        uint64_t id = r->compile_req;
        compile_job_discard(r->cj);
        r->cj = NULL;
        r->compile_req = 0;
        conn_enter(o);
        conn_send_error(o, id, code, 0, 0, "compiler", "%s", msg);
        conn_job_end(o);
        conn_leave(o);
    }
    djob_unhold(j);
}

void
djob_compile_ready(struct conn *c, struct compile_job *cj)
{
    struct djob *j = c->djob;
    struct djob_proc *q = &j->proc[c->djob_pid], *p0 = &j->proc[0];
    char msg[768];
    int rc;

    if (q->cj != NULL || q->compile_req != 0) {
        conn_send_error(c, compile_job_req_id(cj), IPUOF_E_STATE, 0, 0, "protocol",
                        "process %u already has a compile waiting for the job's other "
                        "processes", q->id);
        compile_job_discard(cj);
        return;
    }
    q->cj = cj;
    q->compile_req = compile_job_req_id(cj);
    conn_job_begin(c);
    if (djob_end_if_left(j)) /* answers this compile too */
        return;
    if (j->ncompile++ == 0)
        djob_arm_timer(j);
    if (j->ncompile < j->nproc)
        return;
    evtimer_del(j->timer);
    j->ncompile = 0;
    for (unsigned p = 1; p < j->nproc; p++) {
        if (compile_job_diff(p0->cj, 0, j->proc[p].cj, p, msg, sizeof msg)) {
            compile_refuse(j, IPUOF_E_INVAL, msg);
            return;
        }
    }
    rc = compile_job_submit(p0->conn, p0->cj, j->nproc, msg, sizeof msg);
    if (rc != IPUOF_OK) {
        compile_refuse(j, rc, msg);
        return;
    }
    p0->cj = NULL; /* the worker has it */
    p0->compile_submitter = 1;
    for (unsigned p = 1; p < j->nproc; p++) {
        compile_job_discard(j->proc[p].cj);
        j->proc[p].cj = NULL;
    }
}

void
djob_compiled(struct conn *c, struct model *m, int rc, const char *msg, int cached, uint64_t us)
{
    struct djob *j = c->djob;

    j->proc[0].compile_submitter = 0;
    if (m != NULL) {
        m->nproc = j->nproc;
        m->next = j->models;
        j->models = m;
        models_update_loaded(j->srv, c);
        log_info("job '%s': model %u '%s' %s for %u processes x %u replicas", j->name, m->id,
                 m->name, cached ? "from the cache" : "compiled", j->nproc,
                 sim_exe_replicas(m->entry->exe) / j->nproc);
    }
    djob_hold(j);
    for (unsigned p = 0; p < j->nproc && !j->dead; p++) {
        struct djob_proc *q = &j->proc[p];
        struct conn *o = q->conn;
        uint64_t id = q->compile_req;
        q->compile_req = 0;
        conn_enter(o);
        if (m != NULL)
            compile_reply_send(o, id, m, cached, us);
        else
            conn_send_error(o, id, rc, 0, 0, "compiler", "%s", msg);
        if (p != 0) /* process 0's compile_done ends its own wait */
            conn_job_end(o);
        conn_leave(o);
    }
    djob_unhold(j);
}

void
djob_compile_progress(struct conn *c, const Ipuof__CompileProgress *p)
{
    struct djob *j = c->djob;
    Ipuof__Header h = IPUOF__HEADER__INIT;

    h.body_case = IPUOF__HEADER__BODY_COMPILE_PROGRESS;
    h.compile_progress = (Ipuof__CompileProgress *)p;
    djob_hold(j);
    for (unsigned k = 0; k < j->nproc && !j->dead; k++) {
        struct djob_proc *q = &j->proc[k];
        if (q->conn == NULL || q->compile_req == 0)
            continue;
        h.request_id = q->compile_req;
        conn_enter(q->conn);
        conn_send(q->conn, &h, NULL, 0);
        conn_leave(q->conn); /* a connection dropped for its backlog ends the job */
    }
    djob_unhold(j);
}

struct model *
djob_find_model(const struct conn *c, uint32_t id)
{
    for (struct model *m = c->djob->models; m != NULL; m = m->next)
        if (m->id == id && !(m->freed_by & ((uint64_t)1 << c->djob_pid)))
            return m;
    return NULL;
}

int
djob_free_model(struct conn *c, uint32_t id)
{
    struct djob *j = c->djob;
    struct model *m = djob_find_model(c, id), **pp;

    if (m == NULL)
        return -1;
    m->freed_by |= (uint64_t)1 << c->djob_pid;
    if (m->busy || m->freed_by != (j->nproc == 64 ? UINT64_MAX : ((uint64_t)1 << j->nproc) - 1))
        return 0;
    for (pp = &j->models; *pp != m; pp = &(*pp)->next)
        ;
    *pp = m->next;
    model_free(c->srv, m);
    return 0;
}

/* ---- status ----------------------------------------------------------------------------- */

int
djob_status(const struct srv *s, Ipuof__JobProcess ***out, size_t *n)
{
    size_t total = 0, k = 0;
    Ipuof__JobProcess **pp;
    Ipuof__JobProcess *jp;
    Ipuof__Holder *ho;
    void *block;

    for (const struct djob *j = s->jobs; j != NULL; j = j->next)
        total += j->nproc;
    /* one block: the pointers, the messages, the holders */
    block = calloc(1, total * (sizeof *pp + sizeof *jp + sizeof *ho) + 1);
    if (block == NULL)
        return -1;
    pp = block;
    jp = (Ipuof__JobProcess *)(pp + total);
    ho = (Ipuof__Holder *)(jp + total);
    for (struct djob *j = s->jobs; j != NULL; j = j->next) {
        for (unsigned p = 0; p < j->nproc; p++, k++) {
            struct djob_proc *q = &j->proc[p];
            ipuof__job_process__init(&jp[k]);
            jp[k].partition = j->name;
            jp[k].process_id = p;
            jp[k].num_processes = j->nproc;
            jp[k].state = (char *)(q->left[0] ? q->left
                                   : q->conn == NULL ? "absent"
                                   : q->attach_req ? "attaching" : "attached");
            if (q->conn != NULL) {
                ipuof__holder__init(&ho[k]);
                ho[k].client_id = q->conn->id;
                ho[k].client_name = q->conn->name;
                ho[k].pid = q->pid;
                ho[k].peer = q->peer;
                jp[k].holder = &ho[k];
            }
            pp[k] = &jp[k];
        }
    }
    *out = pp;
    *n = total;
    return 0;
}
