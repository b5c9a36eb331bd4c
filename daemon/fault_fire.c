/*
 * fault_fire.c — what a fired fault does (see fault_fire.h), below the jobs so that every
 * attach path (req_session.c's at once, jobs_life.c's wait queue) can fire one.
 */
#include "fault_fire.h"

#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "ipuof/status.h"
#include "log.h"
#include "srv_state.h"

/* The reset that clears an error needing recovery, as ipuctl says it, for IPU ipu of
 * partition part. */
static void
reset_cmd(char *out, size_t len, int recovery, unsigned ipu, const char *part)
{
    switch (recovery) {
    case IPUOF_RECOVERY_IPU_RESET:
        snprintf(out, len, "ipuctl reset --ipu %u", ipu);
        break;
    case IPUOF_RECOVERY_LINK_RESET:
    case IPUOF_RECOVERY_PARTITION_RESET:
        snprintf(out, len, "ipuctl reset --partition %s", part);
        break;
    default:
        snprintf(out, len, "ipuctl reset --all");
        break;
    }
}

/* Sends c the error for IPU ipu (in error) of partition part, for request req_id. */
void
fault_send_ipu_error(struct conn *c, uint64_t req_id, const struct dev_ipu *d,
                     const char *part)
{
    char cmd[128];

    reset_cmd(cmd, sizeof cmd, d->recovery, d->id, part);
    conn_send_error(c, req_id, IPUOF_E_DEVICE_FAULT,
                    d->unrecoverable ? IPUOF_ERROR_UNRECOVERABLE : IPUOF_ERROR_RECOVERABLE,
                    d->unrecoverable ? IPUOF_RECOVERY_NONE : d->recovery, "device",
                    "%s; IPU %u stays in error until %s", d->error, d->id, cmd);
}

/*
 * Fires f on partition IPUs first .. first + count - 1 named part: the IPUs it hits go
 * into error (with the sentence it makes, also written to msg). The IPUs: the fault's own
 * IPU, or the partition's first, for an IPU-level error; the whole partition for link,
 * partition and full resets and an unrecoverable error not aimed at one IPU.
 */
void
fault_fire(struct srv *s, const struct fault *f, unsigned first, unsigned count,
           const char *part, char *msg, size_t len)
{
    char kind[48];
    int whole = faults_level(f->recovery) >= 2 && f->kind != FAULT_UNRECOVERABLE;
    unsigned lo = f->has_ipu ? f->ipu : first, n = 1;

    if (whole || (f->kind == FAULT_UNRECOVERABLE && !f->has_ipu)) {
        lo = first;
        n = count;
    }
    faults_kind_name(f, kind, sizeof kind);
    if (f->kind == FAULT_HOST_SYNC_TIMEOUT)
        snprintf(msg, len, "recoverable_runtime_error: [Recovery action: IPU_RESET] timed out "
                 "waiting for host sync on IPU %u (injected fault %u, %s at %s)", lo, f->id,
                 kind, faults_at_name(f->at));
    else if (f->kind == FAULT_UNRECOVERABLE)
        snprintf(msg, len, "unrecoverable_runtime_error: IPU %u of partition '%s' is out of "
                 "service (injected fault %u, %s at %s)", lo, part, f->id, kind,
                 faults_at_name(f->at));
    else
        snprintf(msg, len, "recoverable_runtime_error: [Recovery action: %s] error on IPU %u "
                 "of partition '%s' (injected fault %u, %s at %s)",
                 ipuof_recovery_name(f->recovery), lo, part, f->id, kind,
                 faults_at_name(f->at));
    for (unsigned i = lo; i < lo + n && i < s->inv->n; i++) {
        dev_set_error(s->inv, i, f->recovery, f->kind == FAULT_UNRECOVERABLE, part, msg);
        s->inv->ipus[i].error_ms = srv_now_ms();
    }
}

/* Logs that f fired on c's request at partition part. */
void
fault_log_fired(const struct conn *c, const struct fault *f, const char *part)
{
    char kind[48];

    log_warn("fault %u (%s at %s) fired on client %u (%s, pid %u, %s), partition '%s' "
             "(%u of %u)", f->id, faults_kind_name(f, kind, sizeof kind), faults_at_name(f->at),
             c->id, c->name, c->pid, c->peer, part, f->fired, f->count);
}

int
fault_attach_hook(struct conn *c, uint64_t req_id, struct dev_partition *p)
{
    struct srv *s = c->srv;
    struct fault *f = faults_match(&s->faults, FAULT_AT_ATTACH, p->first, p->count, p->name);
    char msg[256], name[DEV_NAME_MAX];
    unsigned first = p->first, count = p->count, bad = first;

    if (f == NULL)
        return 0;
    snprintf(name, sizeof name, "%s", p->name);
    fault_log_fired(c, f, name);
    dev_release(s->inv, p);
    if (f->kind == FAULT_FABRIC_DISCONNECT) {
        conn_kill(c, "injected fabric-disconnect");
        return 1;
    }
    fault_fire(s, f, first, count, name, msg, sizeof msg);
    dev_error_need(s->inv, first, count, &bad);
    fault_send_ipu_error(c, req_id, &s->inv->ipus[bad], name);
    return 1;
}

