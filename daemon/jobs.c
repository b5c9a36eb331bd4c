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
job_maybe_free(struct job *j)
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

static void on_timer(evutil_socket_t fd, short what, void *arg);

/* A job of nproc processes (fields zeroed, the processes numbered), or NULL. */
static struct job *
job_alloc(struct srv *s, const char *name, unsigned nproc, unsigned count)
{
    struct job *j = calloc(1, sizeof *j + nproc * sizeof j->proc[0]);

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

/* Rewrites the "loaded" lists of j's IPUs from its models. */
static void
update_loaded(struct job *j)
{
    models_update_loaded(j->srv, j->part, j->models);
}

int
job_of_one(struct conn *c, struct dev_partition *p)
{
    struct job *j = job_alloc(c->srv, p->name, 1, p->count);

    if (j == NULL || (j->timer = evtimer_new(c->srv->base, on_timer, j)) == NULL) {
        free(j);
        return -1;
    }
    j->part = p;
    j->started = 1;
    j->nattached = 1;
    j->proc[0].conn = c;
    j->proc[0].pid = c->pid;
    snprintf(j->proc[0].peer, sizeof j->proc[0].peer, "%s", c->peer);
    c->job = j;
    c->proc_id = 0;
    c->revoked_code = 0;
    return 0;
}

struct dev_partition *
conn_part(const struct conn *c)
{
    return c->job != NULL ? c->job->part : NULL;
}

struct model **
job_models(const struct conn *c)
{
    return c->job != NULL ? &c->job->models : NULL;
}

/* Brackets a loop that talks to the processes' connections: a connection freed meanwhile
 * may end the job, which is then freed at job_unhold(). job_unhold returns 1 when the job
 * has ended (it may be gone: do not touch it). */
void
job_hold(struct job *j)
{
    j->hold++;
}

int
job_unhold(struct job *j)
{
    int dead = j->dead;

    j->hold--;
    job_maybe_free(j);
    return dead;
}

/* The process ids (", "-separated) that have not done what the phase waits for. */
static void
missing(const struct job *j, int phase, char *out, size_t len)
{
    size_t used = 0;

    out[0] = '\0';
    for (unsigned p = 0; p < j->nproc && used + 16 < len; p++) {
        const struct job_proc *q = &j->proc[p];
        int absent = phase == 0 ? q->conn == NULL
                     : phase == 1 ? q->ct == NULL
                                  : q->run_req == 0 || q->run_arriving;
        if (absent)
            used += (size_t)snprintf(out + used, len - used, "%s%u", used ? ", " : "", p);
    }
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct job *j = arg;
    char who[256];
    int phase = !j->started ? 0 : j->ncompile > 0 ? 1 : 2;

    (void)fd;
    (void)what;
    missing(j, phase, who, sizeof who);
    job_end(j, IPUOF_E_TIMEOUT,
            "the job on partition '%s' waited %u s (job_timeout) for process%s %s of %u to %s; "
            "start every process with the same partition name and process count, and let "
            "each one make the same calls", j->name, j->srv->cfg.job_timeout,
            strchr(who, ',') ? "es" : "", who, j->nproc,
            phase == 0 ? "attach" : phase == 1 ? "send its compile" : "send its slice of the run");
}

void
job_arm_timer(struct job *j)
{
    struct timeval tv = {.tv_sec = j->srv->cfg.job_timeout, .tv_usec = 0};

    evtimer_add(j->timer, &tv);
}

/* Sends a Notice that the partition is gone to c. */
static void
send_notice(struct conn *c, const struct job *j, int code, const char *msg)
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
job_end(struct job *j, int code, const char *fmt, ...)
{
    struct srv *s = j->srv;
    struct job **pp;
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_info("job '%s': ended: %s", j->name, msg);
    j->end_code = code;
    snprintf(j->end_msg, sizeof j->end_msg, "%s", msg);
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
    job_hold(j);
    for (unsigned p = 0; p < j->nproc; p++) {
        struct job_proc *q = &j->proc[p];
        struct conn *c = q->conn;
        int recovery = job_recovery(code);

        compile_task_discard(q->ct);
        q->ct = NULL;
        if (c == NULL)
            continue;
        conn_enter(c);
        if (q->attach_req != 0) {
            conn_send_error(c, q->attach_req, code, IPUOF_ERROR_RECOVERABLE, recovery,
                            "device", "%s", msg);
            conn_release_frames(c);
        } else {
            send_notice(c, j, code, msg);
        }
        if (q->compile_req != 0) {
            conn_send_error(c, q->compile_req, code, IPUOF_ERROR_RECOVERABLE, recovery,
                            "device", "%s", msg);
            conn_release_frames(c); /* a compile on a worker is dropped when it ends */
        }
        if (q->run_req != 0 && !q->run_arriving) {
            conn_send_error(c, q->run_req, code, IPUOF_ERROR_RECOVERABLE, recovery, "device",
                            "%s", msg);
            conn_release_frames(c);
        }
        /* A slice still arriving is answered when its last byte is in (on_slice). */
        c->job = NULL;
        q->conn = q->run_arriving ? c : NULL;
        conn_leave(c);
    }
    /* The IPUs go back to the pool now; the models themselves are freed with the job. */
    for (struct model *m = j->models; m != NULL; m = m->next)
        model_unplace(s, m);
    dev_release(s->inv, j->part);
    j->part = NULL;
    job_unhold(j);
    srv_serve_waiters(s);
}

int
job_recovery(int code)
{
    return code == IPUOF_E_TIMEOUT || code == IPUOF_E_SHUTDOWN ? IPUOF_RECOVERY_RETRY
                                                               : IPUOF_RECOVERY_REATTACH;
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
    job_arm_timer(j);
    log_info("job '%s': %u processes on IPUs %u-%u; waiting for them to attach", name, nproc,
             j->part->first, j->part->first + count - 1);
    return j;
}

void
job_attach(struct conn *c, uint64_t req_id, const Ipuof__AttachRequest *a, unsigned count)
{
    struct job *j;
    struct job_proc *q;

    if (a->partition_name[0] == '\0') {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "process %u of %u attaches without a partition name; the processes "
                        "of a job find each other by the name they all give", a->process_id,
                        a->num_processes);
        return;
    }
    if (strlen(a->job_key) > JOB_KEY_MAX) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "the job key is %zu bytes long; at most %d are accepted",
                        strlen(a->job_key), JOB_KEY_MAX);
        return;
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
        return;
    }
    if (a->num_processes > JOB_MAX_PROCS) {
        conn_send_error(c, req_id, IPUOF_E_INVAL, 0, 0, "device",
                        "%u processes asked for; a job has at most %d", a->num_processes,
                        JOB_MAX_PROCS);
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
        const struct job_proc *o = &j->proc[a->process_id];
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
    c->job = j;
    c->proc_id = q->id;
    c->revoked_code = 0;
    conn_hold_frames(c); /* its frames wait for the attach reply */
    if (++j->nattached < j->nproc)
        return;
    j->started = 1;
    evtimer_del(j->timer);
    log_info("job '%s': all %u processes attached", j->name, j->nproc);
    job_hold(j);
    for (unsigned p = 0; p < j->nproc && !j->dead; p++) {
        struct job_proc *r = &j->proc[p];
        struct conn *o = r->conn;
        uint64_t id = r->attach_req;
        r->attach_req = 0;
        conn_enter(o);
        reply_attached(o, id, j->part, 0);
        conn_release_frames(o);
        conn_leave(o); /* a kill here ends the job through job_leave */
    }
    job_unhold(j);
}

/* Ends j when one of processes p0 .. p0+n-1 has left: the others cannot make a call they
 * share with it. 1 when it ended. */
int
job_end_if_left(struct job *j, unsigned p0, unsigned n)
{
    for (unsigned p = p0; p < p0 + n; p++) {
        const struct job_proc *q = &j->proc[p];
        if (q->left[0] != '\0') {
            job_end(j, IPUOF_E_CLOSED, "process %u of the job on partition '%s' (pid %u, %s) "
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
    struct job *j = c->job;
    struct job_proc *q = &j->proc[c->proc_id];
    const struct model *run = j->inflight != NULL ? j->inflight->m : j->run_model;
    int waiting = !j->started || j->ncompile > 0 || j->compiling ||
                  (run != NULL && q->id - run->proc0 < run->nproc); /* a run it shares */
    unsigned live = 0;

    snprintf(q->left, sizeof q->left, "%s", how);
    q->conn = NULL;
    compile_task_discard(q->ct);
    q->ct = NULL;
    if (q->run_arriving) { /* its sink's abort or done is called no more for the job */
        q->run_arriving = 0;
        j->arriving--;
    }
    q->run_req = q->compile_req = q->attach_req = 0;
    c->job = NULL;
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
        job_end_if_left(j, 0, j->nproc);
    else if (live == 0)
        job_end(j, IPUOF_E_CLOSED, "its %u process%s left", j->nproc, j->nproc == 1 ? "" : "es");
}

void
job_detach(struct conn *c, uint64_t req_id)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__DetachReply dr = IPUOF__DETACH_REPLY__INIT;
    uint32_t ids[CFG_MAX_IPUS];

    dr.n_ipu_ids = dev_partition_ids(c->job->part, ids);
    dr.ipu_ids = ids;
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_DETACH_REPLY;
    r.detach_reply = &dr;
    leave(c, "detached");
    conn_send(c, &r, NULL, 0);
}

void
job_leave(struct conn *c)
{
    leave(c, "disconnected");
}

void
job_revoke(struct conn *c, int code, const char *msg)
{
    struct job *j = c->job;

    /* Requests already on their way name models the end frees: they are answered with
     * this reason, not "no such model" (the Notice may reach the client after them). */
    for (unsigned p = 0; p < j->nproc; p++) {
        struct conn *o = j->proc[p].conn;
        if (o == NULL)
            continue;
        o->revoked_code = code;
        snprintf(o->revoked_msg, sizeof o->revoked_msg, "%s", msg);
    }
    job_end(j, code, "%s", msg);
}

int
job_ended(const struct job *j)
{
    return j->dead;
}

const char *
job_name(const struct job *j)
{
    return j->name;
}

unsigned
job_processes(const struct job *j)
{
    return j->nproc;
}

/* ---- compile ---------------------------------------------------------------------------- */

/* Answers every process's held compile with the error code and msg. */
static void
compile_refuse(struct job *j, int code, const char *msg)
{
    job_hold(j);
    for (unsigned k = 0; k < j->nproc && !j->dead; k++) {
        struct job_proc *r = &j->proc[k];
        struct conn *o = r->conn;
        uint64_t id = r->compile_req;
        compile_task_discard(r->ct);
        r->ct = NULL;
        r->compile_req = 0;
        conn_enter(o);
        conn_send_error(o, id, code, 0, 0, "compiler", "%s", msg);
        conn_release_frames(o);
        conn_leave(o);
    }
    job_unhold(j);
}

void
job_compile_ready(struct conn *c, struct compile_task *ct)
{
    struct job *j = c->job;
    struct job_proc *q = &j->proc[c->proc_id], *p0 = &j->proc[0];
    char msg[768];
    int rc;

    if (q->ct != NULL || q->compile_req != 0) {
        conn_send_error(c, compile_task_req_id(ct), IPUOF_E_STATE, 0, 0, "protocol",
                        "process %u already has a compile waiting for the job's other "
                        "processes", q->id);
        compile_task_discard(ct);
        return;
    }
    q->ct = ct;
    q->compile_req = compile_task_req_id(ct);
    conn_hold_frames(c);
    if (job_end_if_left(j, 0, j->nproc)) /* answers this compile too */
        return;
    if (++j->ncompile < j->nproc) {
        if (j->ncompile == 1) /* the first: wait for the others */
            job_arm_timer(j);
        return;
    }
    evtimer_del(j->timer);
    j->ncompile = 0;
    for (unsigned p = 1; p < j->nproc; p++) {
        if (compile_task_diff(p0->ct, 0, j->proc[p].ct, p, msg, sizeof msg)) {
            compile_refuse(j, IPUOF_E_INVAL, msg);
            return;
        }
    }
    rc = compile_task_submit(j, p0->ct, msg, sizeof msg);
    if (rc != IPUOF_OK) {
        compile_refuse(j, rc, msg);
        return;
    }
    p0->ct = NULL; /* the worker has it */
    for (unsigned p = 1; p < j->nproc; p++) {
        compile_task_discard(j->proc[p].ct);
        j->proc[p].ct = NULL;
    }
}

void
job_compile_begin(struct job *j)
{
    job_hold(j);
    j->compiling = 1;
}

void
job_compile_end(struct job *j)
{
    j->compiling = 0;
}

void
job_compile_here(struct conn *c, uint64_t req_id)
{
    c->job->proc[c->proc_id].compile_req = req_id;
    conn_hold_frames(c);
}

void
job_compiled(struct job *j, unsigned proc0, unsigned nproc, struct model *m, int rc,
             const char *msg, int cached, uint64_t us)
{
    int refused = 0;

    if (m != NULL) {
        m->next = j->models;
        j->models = m;
        update_loaded(j);
        log_info("job '%s': model %u '%s' %s for %u process%s x %u replicas in %.1f ms on IPUs "
                 "%u-%u", j->name, m->id, m->name, cached ? "from the cache" : "compiled",
                 m->nproc, m->nproc == 1 ? "" : "es", sim_exe_replicas(m->entry->exe) / m->nproc,
                 (double)us / 1000.0, m->first_ipu, m->first_ipu + m->nipus - 1);
    }
    job_hold(j);
    for (unsigned p = proc0; p < proc0 + nproc && !j->dead; p++) {
        struct job_proc *q = &j->proc[p];
        struct conn *o = q->conn;
        uint64_t id = q->compile_req;
        if (o == NULL || id == 0)
            continue;
        q->compile_req = 0;
        conn_enter(o);
        if (m == NULL)
            conn_send_error(o, id, rc, 0, 0, "compiler", "%s", msg);
        else if (compile_reply_send(o, id, m, cached, cached ? 0 : us) < 0)
            refused = 1;
        conn_release_frames(o);
        conn_leave(o);
    }
    if (refused && !j->dead) { /* a reply could not be sent: the model is nobody's */
        struct model **pp;
        for (pp = &j->models; *pp != m; pp = &(*pp)->next)
            ;
        *pp = m->next;
        model_free(j->srv, m);
        update_loaded(j);
    }
    job_unhold(j);
}

void
job_compile_progress(struct job *j, const Ipuof__CompileProgress *p)
{
    Ipuof__Header h = IPUOF__HEADER__INIT;

    h.body_case = IPUOF__HEADER__BODY_COMPILE_PROGRESS;
    h.compile_progress = (Ipuof__CompileProgress *)p;
    job_hold(j);
    for (unsigned k = 0; k < j->nproc && !j->dead; k++) {
        struct job_proc *q = &j->proc[k];
        if (q->conn == NULL || q->compile_req == 0)
            continue;
        h.request_id = q->compile_req;
        conn_enter(q->conn);
        conn_send(q->conn, &h, NULL, 0);
        conn_leave(q->conn); /* a connection dropped for its backlog ends the job */
    }
    job_unhold(j);
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
    model_free(c->srv, m);
    update_loaded(j);
    return 0;
}

/* ---- status ----------------------------------------------------------------------------- */

int
job_status(const struct srv *s, Ipuof__JobProcess ***out, size_t *n)
{
    size_t total = 0, k = 0;
    Ipuof__JobProcess **pp;
    Ipuof__JobProcess *jp;
    Ipuof__Holder *ho;
    void *block;

    for (const struct job *j = s->jobs; j != NULL; j = j->next)
        total += j->nproc;
    /* one block: the pointers, the messages, the holders */
    block = calloc(1, total * (sizeof *pp + sizeof *jp + sizeof *ho) + 1);
    if (block == NULL)
        return -1;
    pp = block;
    jp = (Ipuof__JobProcess *)(pp + total);
    ho = (Ipuof__Holder *)(jp + total);
    for (struct job *j = s->jobs; j != NULL; j = j->next) {
        for (unsigned p = 0; p < j->nproc; p++, k++) {
            struct job_proc *q = &j->proc[p];
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
