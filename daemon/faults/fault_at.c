/*
 * fault_at.c — a trigger point met: match, log, fire, and the answer to give (fault_at.h).
 * Reads top-down: fault_at -> the table (state/faults.c) -> what a fired fault does
 * (fault_fire.c); nothing here calls back into the jobs that met the point.
 */
#include "fault_at.h"

#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "fault_fire.h"
#include "ipuof/status.h"
#include "log.h"
#include "srv_state.h"

/* Logs that f fired at pt, naming who met it as the point says. */
static void
log_fired(const struct fault_point *pt, const struct fault *f)
{
    char kind[FAULTS_KIND_MAX];
    const char *at = faults_at_name(f->at);

    faults_kind_name(f, kind, sizeof kind);
    if (pt->c != NULL)
        log_warn("fault %u (%s at %s) fired on client %u (%s, pid %u, %s), partition '%s' "
                 "(%u of %u)", f->id, kind, at, pt->c->id, pt->c->name, pt->c->pid,
                 pt->c->peer, pt->part, f->fired, f->count);
    else if (pt->at == FAULT_AT_COLLECTIVE)
        log_warn("fault %u (%s at %s) fired on the Pod job of partition '%s' (%u of %u): "
                 "this daemon leaves it", f->id, kind, at, pt->part, f->fired, f->count);
    else if (pt->model != NULL)
        log_warn("fault %u (%s at %s) fired on job '%s' loading model '%s' (%u of %u)", f->id,
                 kind, at, pt->part, pt->model, f->fired, f->count);
    else
        log_warn("fault %u (%s at %s) fired on job '%s' of %u processes (%u of %u)", f->id,
                 kind, at, pt->part, pt->nproc, f->fired, f->count);
}

/* Collective: the link faults on the links to pt's peers. A link:partition, or a
 * link:reset-peer that fires, cuts (hit->msg naming the peer; 1); link:latency raises
 * hit->delay_ms to the slowest link's (a collective waits for every peer). */
static int
link_cut(struct srv *s, const struct fault_point *pt, struct fault_hit *hit, uint64_t now)
{
    for (unsigned i = 0; i < pt->npeers; i++) {
        const char *peer = pt->peers[i];
        unsigned ms = 0, cut;
        struct fault *f;
        if (peer == NULL || peer[0] == '\0')
            continue;
        cut = faults_link(&s->faults, peer, now, &ms);
        if (ms > hit->delay_ms)
            hit->delay_ms = ms;
        f = cut != 0 ? NULL : faults_link_reset(&s->faults, peer, now);
        if (cut == 0 && f == NULL)
            continue;
        if (cut != 0)
            snprintf(hit->msg, sizeof hit->msg, "its link to Pod host '%s' is partitioned "
                     "(injected fault %u, link:partition:%s)", peer, cut, peer);
        else
            snprintf(hit->msg, sizeof hit->msg, "its link to Pod host '%s' was reset "
                     "(injected fault %u, link:reset-peer:%s, %u of %u)", peer, f->id, peer,
                     f->fired, f->count);
        log_warn("Pod job of partition '%s': %s: this daemon leaves it", pt->part, hit->msg);
        return 1;
    }
    if (hit->delay_ms != 0)
        log_info("Pod job of partition '%s': link latency %u ms before its collective run",
                 pt->part, hit->delay_ms);
    return 0;
}

/* The triggers a process's request meets: an IPU already in error answers them first. */
static int
is_request_trigger(enum fault_at at)
{
    return at == FAULT_AT_COMPILE || at == FAULT_AT_WEIGHTS || at == FAULT_AT_RUN;
}

int
fault_at(struct srv *s, const struct fault_point *pt, struct fault_hit *hit)
{
    uint64_t now = srv_now_ms();
    struct fault *f;

    memset(hit, 0, sizeof *hit);
    hit->first = pt->first;
    hit->count = pt->count;
    snprintf(hit->part, sizeof hit->part, "%s", pt->part != NULL ? pt->part : "");
    if (is_request_trigger(pt->at) &&
        dev_error_need(s->inv, pt->first, pt->count, &hit->bad) != IPUOF_RECOVERY_NONE)
        return hit->what = FAULT_HIT_IPU_ERROR;
    if (pt->at == FAULT_AT_COLLECTIVE && link_cut(s, pt, hit, now))
        return hit->what = FAULT_HIT_CUT;
    f = faults_match(&s->faults, pt->at, pt->first, pt->count, pt->part, now);
    if (f == NULL)
        return hit->what = FAULT_HIT_NONE;
    log_fired(pt, f);
    if (pt->at == FAULT_AT_COLLECTIVE) { /* the run leaves the Pod job: no IPU in error */
        char kind[FAULTS_KIND_MAX];
        snprintf(hit->msg, sizeof hit->msg, "injected fault %u (%s at collective) on this "
                 "host", f->id, faults_kind_name(f, kind, sizeof kind));
        hit->f = *f;
        return hit->what = FAULT_HIT_CUT;
    }
    fault_fire(s, f, pt->first, pt->count, hit->part, hit->msg, sizeof hit->msg);
    hit->f = *f;
    return hit->what = FAULT_HIT_FIRED;
}

int
fault_reply(struct conn *c, uint64_t req_id, const struct fault_hit *hit)
{
    switch (hit->what) {
    case FAULT_HIT_IPU_ERROR:
        fault_send_ipu_error(c, req_id, &c->srv->inv->ipus[hit->bad], hit->part);
        return 0;
    case FAULT_HIT_FIRED:
        return fault_answer(c, req_id, &hit->f, hit->first, hit->count, hit->part, hit->msg);
    default: /* nothing to answer (NONE; CUT answers through the job's end) */
        return 0;
    }
}
