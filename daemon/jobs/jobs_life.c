/*
 * jobs_life.c — a job's life (see jobs.h): made for a process attaching alone (at once or
 * through the attach wait queue, which is here because a job ending serves it), held while
 * something refers to it, timed out, ended, and left by its processes (detach, disconnect,
 * revoke). Attaching as one of several processes is jobs_attach.c; compiles
 * jobs_compile.c; runs jobs_run.c; the status reply jobs_status.c.
 */
#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_int.h"
#include "conn.h"
#include "errbuf.h"
#include "fault_at.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "jobs_int.h"
#include "log.h"
#include "models.h"
#include "srv_state.h"
#include "metrics_count.h"

/* Frees j when it has ended and nothing refers to it any more. */
void
job_maybe_free(struct job *j)
{
    if (!job_ended(j) || j->inflight != NULL || j->arriving > 0 || j->hold > 0)
        return;
    while (j->models != NULL) {
        struct model *m = j->models;
        j->models = m->next;
        model_free(j->srv->inv, &j->srv->cache, m);
    }
    j->scope->free(j);
    if (j->timer != NULL)
        event_free(j->timer);
    free(j);
}

static void on_timer(evutil_socket_t fd, short what, void *arg);

/* A job on this daemon alone: formed as soon as its processes attached. */
static int
local_start(struct job *j, void (*formed)(struct job *j))
{
    formed(j);
    return 0;
}

static void
local_nothing(struct job *j)
{
    (void)j;
}

const struct job_scope job_scope_local = {"local", local_start, local_nothing, local_nothing};

/* A job of nproc processes (fields zeroed, the processes numbered, its timer made), or
 * NULL when out of memory. */
struct job *
job_alloc(struct srv *s, const char *name, unsigned nproc, unsigned count)
{
    struct job *j = calloc(1, sizeof *j + nproc * sizeof j->proc[0]);

    if (j == NULL)
        return NULL;
    j->timer = evtimer_new(s->base, on_timer, j);
    if (j->timer == NULL) {
        free(j);
        return NULL;
    }
    j->srv = s;
    j->scope = &job_scope_local;
    j->phase = JOB_GATHER_ATTACH;
    job_gather_begin(&j->gather, 0, nproc);
    snprintf(j->name, sizeof j->name, "%s", name);
    j->nproc = nproc;
    j->nproc_all = nproc;
    j->count = count;
    for (unsigned p = 0; p < nproc; p++) {
        j->proc[p].job = j;
        j->proc[p].id = p;
    }
    return j;
}

void
job_update_loaded(struct job *j)
{
    models_update_loaded(j->srv->inv, j->part, j->models);
}

/* Makes c (attached alone to partition p, taken) the one process of a job of its own. 0,
 * or -1 when out of memory (p is then still the caller's). */
static int
job_of_one(struct conn *c, struct dev_partition *p)
{
    struct job *j = job_alloc(c->srv, p->name, 1, p->count);

    if (j == NULL)
        return -1;
    j->part = p;
    j->phase = JOB_READY; /* its one process attached */
    job_gather_arrive(&j->gather, 0);
    j->proc[0].conn = c;
    j->proc[0].pid = c->pid;
    snprintf(j->proc[0].peer, sizeof j->proc[0].peer, "%s", c->peer);
    c->job = j;
    c->proc_id = 0;
    c->revoked_code = 0;
    return 0;
}

enum job_action
job_step(struct job *j, enum job_event ev)
{
    enum job_action act;
    int next = job_sm_next(j->phase, ev, &act);

    if (next < 0) {
        log_error("job '%s': event %s cannot happen in phase %s; ignored", j->name,
                  job_event_name(ev), job_phase_name(j->phase));
        return JOB_ACT_NONE;
    }
    if (next != (int)j->phase)
        log_debug("job '%s': %s -> %s (%s)", j->name, job_phase_name(j->phase),
                  job_phase_name(next), job_event_name(ev));
    j->phase = (enum job_phase)next;
    if (act == JOB_ACT_ARM && j->gather.n > 1 && j->gather.deadline_ms == 0) {
        struct timeval tv = {.tv_sec = j->srv->cfg.job_timeout, .tv_usec = 0};
        j->gather.deadline_ms = srv_now_ms() + (uint64_t)j->srv->cfg.job_timeout * 1000;
        evtimer_add(j->timer, &tv);
    } else if (act == JOB_ACT_DISARM || next == JOB_ENDED) {
        j->gather.deadline_ms = 0;
        evtimer_del(j->timer);
    }
    return act;
}

void
job_gather_for(struct job *j, enum job_phase from, unsigned first, unsigned n)
{
    if (j->phase == from)
        job_gather_begin(&j->gather, first, n);
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

int
job_begin_step(struct conn *c, uint64_t req_id, enum job_req_step step)
{
    static const enum fault_at at[] = {[JOB_STEP_COMPILE] = FAULT_AT_COMPILE,
                                       [JOB_STEP_WEIGHTS] = FAULT_AT_WEIGHTS,
                                       [JOB_STEP_RUN] = FAULT_AT_RUN};
    const struct dev_partition *p = conn_part(c);
    struct fault_point pt = {.c = c};
    struct fault_hit hit;

    if (p == NULL)
        return 0; /* not attached: the handler says so */
    pt.at = at[step];
    pt.first = p->first;
    pt.count = p->count;
    pt.part = p->name;
    if (fault_at(c->srv, &pt, &hit) == FAULT_HIT_NONE)
        return 0;
    fault_reply(c, req_id, &hit);
    return 1;
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
    int dead = job_ended(j);

    j->hold--;
    job_maybe_free(j);
    return dead;
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct job *j = arg;
    enum job_phase phase = j->phase;
    char who[256];

    (void)fd;
    (void)what;
    job_gather_missing(&j->gather, j->proc_base, who, sizeof who);
    if (job_step(j, JOB_EV_TIMEOUT) != JOB_ACT_END)
        return;
    job_end(j, IPUOF_E_TIMEOUT,
            "the job on partition '%s' waited %u s (job_timeout) for process%s %s of %u to %s; "
            "start every process with the same partition name and process count, and let "
            "each one make the same calls", j->name, j->srv->cfg.job_timeout,
            strchr(who, ',') ? "es" : "", who, j->nproc_all,
            phase == JOB_GATHER_ATTACH ? "attach" : phase == JOB_GATHER_COMPILE
            ? "send its compile" : "send its slice of the run");
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
    e.recovery = j->end.reset
                     ? IPUOF__RECOVERY_ACTION__RECOVERY_PARTITION_RESET
                 : code == IPUOF_E_SHUTDOWN ? IPUOF__RECOVERY_ACTION__RECOVERY_RETRY
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
static void
end_v(struct job *j, int code, int reset, const char *fmt, va_list ap)
{
    struct srv *s = j->srv;
    struct job **pp;
    const char *msg = j->end.msg;
    int recovery;

    if (j->phase != JOB_ENDED)
        job_step(j, JOB_EV_END);
    j->end.code = code;
    j->end.reset = reset;
    j->end.recovery = recovery = reset ? IPUOF_RECOVERY_PARTITION_RESET : job_recovery(code);
    vsnprintf(j->end.msg, sizeof j->end.msg, fmt, ap);
    log_info("job '%s': ended: %s", j->name, msg);
    for (pp = &s->jobs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    }
    if (j->inflight != NULL) {
        sim_exe_cancel(j->inflight->m->entry->exe);
        sim_feed_close(j->inflight->feed); /* its input will not all come */
    }
    j->scope->end(j);
    /* Nothing in the loop reaches j: each connection is taken out of it (c->job = NULL)
     * before conn_leave may free it. j is freed below unless something still refers to it
     * (a loop or task of a caller, the run in flight, slices arriving). */
    for (unsigned p = 0; p < j->nproc; p++) {
        struct job_proc *q = &j->proc[p];
        struct conn *c = q->conn;

        compile_task_free(q->ct);
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
        /* A slice still arriving is answered when its last byte is in (on_slice). Requests
         * already on their way name models the end frees: they are answered with this
         * reason, not "no such model" (the Notice may reach the client after them). */
        c->revoked_code = code;
        snprintf(c->revoked_msg, sizeof c->revoked_msg, "%s", msg);
        c->job = NULL;
        q->conn = q->run_arriving ? c : NULL;
        conn_leave(c);
    }
    /* The IPUs go back to the pool now; the models themselves are freed with the job. */
    for (struct model *m = j->models; m != NULL; m = m->next)
        model_unplace(s->inv, m);
    dev_release(s->inv, j->part);
    j->part = NULL;
    job_maybe_free(j);
    job_serve_waiters(s);
}

void
job_end(struct job *j, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    end_v(j, code, 0, fmt, ap);
    va_end(ap);
}

void
job_end_reset(struct job *j, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    end_v(j, code, 1, fmt, ap);
    va_end(ap);
}

int
job_recovery(int code)
{
    return code == IPUOF_E_TIMEOUT || code == IPUOF_E_SHUTDOWN ? IPUOF_RECOVERY_RETRY
                                                               : IPUOF_RECOVERY_REATTACH;
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
                    q->id + j->proc_base, j->name, q->pid, q->peer, q->left);
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
    int shared = run != NULL && q->id - run->proc0 < run->nproc; /* a run it is one of */
    unsigned live = 0;
    enum job_action act;

    act = job_step(j, JOB_EV_LEAVE);
    snprintf(q->left, sizeof q->left, "%s", how);
    q->conn = NULL;
    compile_task_free(q->ct);
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
    if (act == JOB_ACT_END || (act == JOB_ACT_END_SHARED && shared)) /* the others wait */
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
    job_end(c->job, code, "%s", msg);   /* which tells each process's later requests why */
}

/* A connection waiting for IPUs to attach alone (the queue is in struct srv). */
struct waiter {
    struct conn *conn;
    uint64_t req_id;
    unsigned count;
    char name[DEV_NAME_MAX];
    uint64_t since_ms;
    struct event *timer;
    struct waiter *prev, *next;
};

/* ---- the attach wait queue ------------------------------------------------------------------- */

static void
waiter_unlink(struct srv *s, struct waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        s->wait_head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        s->wait_tail = w->prev;
    s->nwaiting--;
    w->conn->waiter = NULL;
    if (w->timer)
        event_free(w->timer);
    free(w);
}

/*
 * Why w got no IPUs, into out: when enough IPUs are free for it, the requests ahead of it in
 * the first-come queue (it is served only after them; the head is named); else who holds
 * the IPUs (dev_describe_busy).
 */
static void
describe_wait(const struct srv *s, const struct waiter *w, char *out, size_t len)
{
    const struct waiter *h = s->wait_head;
    unsigned ahead = 0;

    for (const struct waiter *p = w->prev; p != NULL; p = p->prev)
        ahead++;
    if (ahead == 0 || !dev_can_attach(s->inv, w->count)) {
        dev_describe_busy(s->inv, w->count, out, len);
        return;
    }
    snprintf(out, len, "%u of %u IPUs are free, enough for this request, but %u earlier "
             "request%s in the first-come queue came first and could not be served yet: the "
             "first, client %u (%s, pid %u), has waited %llu ms for %u IPU%s; requests are "
             "served in the order they came, so this one waited behind %s",
             dev_free_count(s->inv), s->inv->n, ahead, ahead == 1 ? "" : "s", h->conn->id, h->conn->name, h->conn->pid,
             (unsigned long long)(srv_now_ms() - h->since_ms), h->count,
             h->count == 1 ? "" : "s", ahead == 1 ? "it" : "them");
}

static void
on_wait_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct waiter *w = arg;
    struct conn *c = w->conn;
    struct srv *s = c->srv;
    uint64_t req = w->req_id;
    unsigned count = w->count;
    uint64_t waited = srv_now_ms() - w->since_ms;
    char busy[900];

    (void)fd;
    (void)what;
    describe_wait(s, w, busy, sizeof busy);
    waiter_unlink(s, w);
    conn_enter(c);
    conn_send_error(c, req, IPUOF_E_TIMEOUT, IPUOF_ERROR_RECOVERABLE, IPUOF_RECOVERY_RETRY,
                    "device", "waited %llu ms for %u IPU%s without getting them: %s",
                    (unsigned long long)waited, count, count == 1 ? "" : "s", busy);
    conn_leave(c);
    job_serve_waiters(s); /* the head may have blocked smaller requests behind it */
}

/* 1 when a and b come from the same process: the same pid in their hello and the same
 * peer address apart from the port ("unix" for the admin socket). */
static int
same_client(const struct conn *a, const struct conn *b)
{
    const char *ca = strrchr(a->peer, ':'), *cb = strrchr(b->peer, ':');
    size_t la = ca != NULL ? (size_t)(ca - a->peer) : strlen(a->peer);
    size_t lb = cb != NULL ? (size_t)(cb - b->peer) : strlen(b->peer);

    return a->pid == b->pid && la == lb && memcmp(a->peer, b->peer, la) == 0;
}

int
job_wait_enqueue(struct srv *s, struct conn *c, uint64_t req_id, unsigned count,
                 const char *name, unsigned timeout_ms, char *err, size_t errlen)
{
    struct waiter *w;

    unsigned mine = 0;

    if (s->nwaiting >= s->cfg.max_waiters) {
        errbuf_set(err, errlen, "cannot wait for IPUs: %u clients are already waiting "
               "(max_waiters); retry later", s->nwaiting);
        return -1;
    }
    for (const struct waiter *p = s->wait_head; p != NULL; p = p->next)
        mine += same_client(p->conn, c);
    if (mine >= s->cfg.max_waiters_per_client) {
        errbuf_set(err, errlen, "cannot wait for IPUs: process %u at %s already has %u "
                   "connection%s waiting (max_waiters_per_client = %u, so one client cannot "
                   "fill the queue of %u); wait for those, or ask the operator to raise it",
                   c->pid, c->peer, mine, mine == 1 ? "" : "s", s->cfg.max_waiters_per_client,
                   s->cfg.max_waiters);
        return -1;
    }
    w = calloc(1, sizeof *w);
    if (w == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    w->conn = c;
    w->req_id = req_id;
    w->count = count;
    snprintf(w->name, sizeof w->name, "%s", name ? name : "");
    w->since_ms = srv_now_ms();
    if (timeout_ms > 0) {
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        w->timer = evtimer_new(s->base, on_wait_timeout, w);
        if (w->timer == NULL) {
            free(w);
            errbuf_set(err, errlen, "out of memory");
            return -1;
        }
        evtimer_add(w->timer, &tv);
    }
    w->prev = s->wait_tail;
    if (s->wait_tail)
        s->wait_tail->next = w;
    else
        s->wait_head = w;
    s->wait_tail = w;
    s->nwaiting++;
    c->waiter = w;
    log_info("client %u (%s, pid %u) waits for %u IPU%s (%u in queue)", c->id, c->name, c->pid,
             count, count == 1 ? "" : "s", s->nwaiting);
    return 0;
}

void
job_wait_cancel(struct srv *s, struct conn *c)
{
    if (c->waiter != NULL)
        waiter_unlink(s, c->waiter);
}

void
job_wait_shutdown(struct srv *s)
{
    while (s->wait_head != NULL) {
        struct waiter *w = s->wait_head;
        struct conn *c = w->conn;
        uint64_t req = w->req_id;
        job_wait_cancel(s, c);
        conn_send_error(c, req, IPUOF_E_SHUTDOWN, IPUOF_ERROR_RECOVERABLE, IPUOF_RECOVERY_RETRY,
                        "daemon", "ipuofd is shutting down; the attach request was not served");
    }
}

void
job_attached_one(struct conn *c, uint64_t req_id, struct dev_partition *p, uint32_t waited_ms)
{
    struct fault_point pt = {.at = FAULT_AT_ATTACH, .first = p->first, .count = p->count,
                             .part = p->name, .c = c};
    struct fault_hit hit;

    if (fault_at(c->srv, &pt, &hit) != FAULT_HIT_NONE) {
        dev_release(c->srv->inv, p); /* the attach met a fault: no job is made */
        fault_reply(c, req_id, &hit); /* no hang at attach: never parks */
    } else if (job_of_one(c, p) < 0) {
        dev_release(c->srv->inv, p);
        conn_send_error(c, req_id, IPUOF_E_NOMEM, 0, 0, "daemon", "out of memory");
    } else {
        job_reply_attached(c, req_id, p, waited_ms);
    }
}

void
job_serve_waiters(struct srv *s)
{
    /* Strictly first come, first served: a large request at the head is not overtaken. */
    while (s->wait_head != NULL && !s->stopping && !s->hold_waiters) {
        struct waiter *w = s->wait_head;
        struct conn *c = w->conn;
        struct dev_holder holder;
        struct dev_partition *p;
        uint64_t req = w->req_id;
        uint32_t waited;
        char err[900];
        int rc;

        if (!dev_can_attach(s->inv, w->count))
            return;
        conn_holder(c, &holder);
        rc = dev_attach(s->inv, w->count, w->name, &holder, c, &p, err, sizeof err);
        waited = (uint32_t)(srv_now_ms() - w->since_ms);
        waiter_unlink(s, w);
        conn_enter(c);
        if (rc == IPUOF_OK)
            job_attached_one(c, req, p, waited ? waited : 1);
        else
            conn_send_error(c, req, rc, 0, 0, "device", "%s", err);
        conn_leave(c);
    }
}

void
job_reply_attached(struct conn *c, uint64_t req_id, const struct dev_partition *p, uint32_t waited_ms)
{
    Ipuof__Header r = IPUOF__HEADER__INIT;
    Ipuof__AttachReply ar = IPUOF__ATTACH_REPLY__INIT;
    uint32_t ids[CFG_MAX_IPUS];

    ar.partition_name = (char *)p->name;
    ar.n_ipu_ids = dev_partition_ids(p, ids);
    ar.ipu_ids = ids;
    ar.waited_ms = waited_ms;
    r.request_id = req_id;
    r.body_case = IPUOF__HEADER__BODY_ATTACH_REPLY;
    r.attach_reply = &ar;
    log_info("client %u (%s, pid %u) attached partition '%s' (IPUs %u-%u)%s", c->id, c->name,
             c->pid, p->name, p->first, p->first + p->count - 1, waited_ms ? " after waiting" : "");
    metrics_attach(c->srv->metrics, waited_ms);
    conn_send(c, &r, NULL, 0);
}
