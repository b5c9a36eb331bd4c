/*
 * faults.c — see faults.h.
 */
#include "faults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "ipuof/status.h"
#include "jsonparse.h"

static const char *const at_names[FAULT_AT_COUNT] = {"attach", "compile", "weights", "run",
                                                      "load", "collective"};

/* The simple kinds: name, kind, recovery (for the recoverable:ACTION family see actions). */
static const struct {
    const char *name;
    enum fault_kind kind;
    int recovery;
} simple_kinds[] = {
    {"unrecoverable", FAULT_UNRECOVERABLE, IPUOF_RECOVERY_FULL_RESET}, /* power cycle: --all */
    {"host-sync-timeout", FAULT_HOST_SYNC_TIMEOUT, IPUOF_RECOVERY_IPU_RESET},
    {"fabric-disconnect", FAULT_FABRIC_DISCONNECT, IPUOF_RECOVERY_NONE}, /* IPUs are fine */
    {"soc-error", FAULT_SOC_ERROR, IPUOF_RECOVERY_IPU_RESET},
    {"soc-error:IPUSOFTERR", FAULT_SOC_ERROR, IPUOF_RECOVERY_IPU_RESET},
    {"hang", FAULT_HANG, IPUOF_RECOVERY_IPU_RESET},
    {"tile-oom", FAULT_TILE_OOM, IPUOF_RECOVERY_NONE},
    {"stream-oom", FAULT_STREAM_OOM, IPUOF_RECOVERY_NONE},
    {"daemon-kill", FAULT_DAEMON_KILL, IPUOF_RECOVERY_NONE},
};

static const struct {
    const char *name;
    int recovery;
} actions[] = {
    {"IPU_RESET", IPUOF_RECOVERY_IPU_RESET},
    {"LINK_RESET", IPUOF_RECOVERY_LINK_RESET},
    {"PARTITION_RESET", IPUOF_RECOVERY_PARTITION_RESET},
    {"FULL_RESET", IPUOF_RECOVERY_FULL_RESET},
};

#define KINDS_HELP "recoverable:IPU_RESET, recoverable:LINK_RESET, " \
    "recoverable:PARTITION_RESET, recoverable:FULL_RESET, unrecoverable, soc-error, " \
    "host-sync-timeout, hang, tile-oom, stream-oom, fabric-disconnect, daemon-kill, " \
    "link:partition:PEER, link:latency=MS:PEER, link:reset-peer:PEER"

void
faults_init(struct fault_table *t)
{
    memset(t, 0, sizeof *t);
    t->next_id = 1;
}

void
faults_set_pod(struct fault_table *t, const char *self, const char *const *peers, unsigned n)
{
    size_t used = 0;

    snprintf(t->self, sizeof t->self, "%s", self != NULL ? self : "");
    t->peers[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        size_t len = strlen(peers[i]);
        if (len == 0 || used + len + 2 > sizeof t->peers)
            continue;
        memcpy(t->peers + used, peers[i], len);
        used += len;
        t->peers[used++] = ' ';
        t->peers[used] = '\0';
    }
}

/* 1 when name is one of t's other Pod hosts. */
static int
is_peer(const struct fault_table *t, const char *name)
{
    size_t len = strlen(name);

    for (const char *p = t->peers; *p != '\0';) {
        const char *sp = strchr(p, ' ');
        if ((size_t)(sp - p) == len && memcmp(p, name, len) == 0)
            return 1;
        p = sp + 1;
    }
    return 0;
}

/* Checks a --host target: this daemon's own Pod name, else a sentence saying which daemon
 * takes it (another Pod host's) or that no such host is known. 0 or -1. */
static int
check_host(const struct fault_table *t, const char *host, char *err, size_t errlen)
{
    if (host[0] == '\0' || strcmp(host, t->self) == 0)
        return 0;
    if (is_peer(t, host)) {
        errbuf_set(err, errlen, "Pod host '%.63s' is not this daemon's (this is host '%s'): a "
                   "daemon arms faults on its own IPUs only; give the fault to host '%.63s''s "
                   "daemon (ipuctl --admin-socket there, or IPUOF_FAULTS in its environment)",
                   host, t->self, host);
        return -1;
    }
    if (t->self[0] == '\0')
        errbuf_set(err, errlen, "--host '%.63s': this daemon is in no Pod; leave --host out",
                   host);
    else
        errbuf_set(err, errlen, "no Pod host '%.63s': this daemon is host '%s'%s%.*s", host,
                   t->self, t->peers[0] != '\0' ? ", its peers are " : " and has no peers",
                   t->peers[0] != '\0' ? (int)strlen(t->peers) - 1 : 0, t->peers);
    return -1;
}

int
faults_level(int recovery)
{
    switch (recovery) {
    case IPUOF_RECOVERY_IPU_RESET:
        return 1;
    case IPUOF_RECOVERY_LINK_RESET:
        return 2;
    case IPUOF_RECOVERY_PARTITION_RESET:
        return 3;
    case IPUOF_RECOVERY_FULL_RESET:
        return 4;
    default:
        return 0;
    }
}

const char *
faults_at_name(enum fault_at at)
{
    return (unsigned)at < FAULT_AT_COUNT ? at_names[at] : "?";
}

const char *
faults_kind_name(const struct fault *f, char *buf, size_t len)
{
    switch (f->kind) {
    case FAULT_LINK_PARTITION:
        snprintf(buf, len, "link:partition:%s", f->peer);
        return buf;
    case FAULT_LINK_LATENCY:
        snprintf(buf, len, "link:latency=%u:%s", f->link_ms, f->peer);
        return buf;
    case FAULT_LINK_RESET_PEER:
        snprintf(buf, len, "link:reset-peer:%s", f->peer);
        return buf;
    case FAULT_RECOVERABLE:
        for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++)
            if (actions[i].recovery == f->recovery)
                snprintf(buf, len, "recoverable:%s", actions[i].name);
        return buf;
    default:
        for (size_t i = 0; i < sizeof simple_kinds / sizeof simple_kinds[0]; i++) {
            if (simple_kinds[i].kind == f->kind) {
                snprintf(buf, len, "%s", simple_kinds[i].name);
                return buf;
            }
        }
    }
    snprintf(buf, len, "?");
    return buf;
}

static int
is_link(const struct fault *f)
{
    return f->kind == FAULT_LINK_PARTITION || f->kind == FAULT_LINK_LATENCY ||
           f->kind == FAULT_LINK_RESET_PEER;
}

/* Parses a link kind ("link:" already seen; rest after it) into f: partition, latency=MS
 * or reset-peer, then ':' and one of t's Pod peers. 0 or -1 with err set. */
static int
parse_link(const struct fault_table *t, struct fault *f, const char *kind, const char *rest,
           char *err, size_t errlen)
{
    const char *colon = strchr(rest, ':');
    const char *peer = colon != NULL ? colon + 1 : "";
    size_t wlen = colon != NULL ? (size_t)(colon - rest) : strlen(rest);

    f->recovery = IPUOF_RECOVERY_PARTITION_RESET; /* what a Pod job it fails meets */
    if (wlen == 9 && memcmp(rest, "partition", 9) == 0) {
        f->kind = FAULT_LINK_PARTITION;
    } else if (wlen == 10 && memcmp(rest, "reset-peer", 10) == 0) {
        f->kind = FAULT_LINK_RESET_PEER;
    } else if (wlen > 8 && memcmp(rest, "latency=", 8) == 0) {
        char *end;
        unsigned long ms = strtoul(rest + 8, &end, 10);
        if (end != colon || rest[8] < '0' || rest[8] > '9' || ms == 0 ||
            ms > FAULTS_LINK_MS_MAX) {
            errbuf_set(err, errlen, "fault kind '%.80s': latency=MS wants a whole number of "
                       "milliseconds from 1 to %d, such as link:latency=50:host-b", kind,
                       FAULTS_LINK_MS_MAX);
            return -1;
        }
        f->kind = FAULT_LINK_LATENCY;
        f->link_ms = (unsigned)ms;
    } else {
        errbuf_set(err, errlen, "fault kind '%.80s': a link fault is link:partition:PEER, "
                   "link:latency=MS:PEER or link:reset-peer:PEER (bandwidth=KB/s is not "
                   "emulated)", kind);
        return -1;
    }
    if (t->self[0] == '\0') {
        errbuf_set(err, errlen, "fault kind '%.80s': this daemon is in no Pod, so it has no "
                   "link to a peer host", kind);
        return -1;
    }
    if (!is_peer(t, peer)) {
        errbuf_set(err, errlen, "fault kind '%.80s': '%.63s' is not a peer of this daemon "
                   "(host '%s'); its peers are %.*s; name one after the last ':'", kind,
                   peer, t->self, t->peers[0] != '\0' ? (int)strlen(t->peers) - 1 : 4,
                   t->peers[0] != '\0' ? t->peers : "none");
        return -1;
    }
    snprintf(f->peer, sizeof f->peer, "%s", peer);
    return 0;
}

/* Parses kind into f's kind and recovery. 0 or -1 with err set. */
static int
parse_kind(const struct fault_table *t, struct fault *f, const char *kind, char *err,
           size_t errlen)
{
    if (kind == NULL || kind[0] == '\0') {
        errbuf_set(err, errlen, "a fault needs a kind: one of " KINDS_HELP);
        return -1;
    }
    if (strncmp(kind, "link:", 5) == 0)
        return parse_link(t, f, kind, kind + 5, err, errlen);
    if (strncmp(kind, "recoverable:", 12) == 0) {
        for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
            if (strcmp(kind + 12, actions[i].name) == 0) {
                f->kind = FAULT_RECOVERABLE;
                f->recovery = actions[i].recovery;
                return 0;
            }
        }
        errbuf_set(err, errlen, "fault kind '%.80s': the recovery action is one of IPU_RESET, "
                   "LINK_RESET, PARTITION_RESET, FULL_RESET", kind);
        return -1;
    }
    for (size_t i = 0; i < sizeof simple_kinds / sizeof simple_kinds[0]; i++) {
        if (strcmp(kind, simple_kinds[i].name) == 0) {
            f->kind = simple_kinds[i].kind;
            f->recovery = simple_kinds[i].recovery;
            return 0;
        }
    }
    errbuf_set(err, errlen, "fault kind '%.80s' is not known; give one of " KINDS_HELP, kind);
    return -1;
}

int
faults_add(struct fault_table *t, const struct fault_spec *spec, unsigned n_ipus,
           uint64_t now_ms, unsigned *id, char *err, size_t errlen)
{
    struct fault f;
    const char *part = spec->partition != NULL ? spec->partition : "";
    const char *at = spec->at != NULL && spec->at[0] != '\0' ? spec->at : "run";

    memset(&f, 0, sizeof f);
    if (parse_kind(t, &f, spec->kind, err, errlen) < 0)
        return -1;
    if (is_link(&f)) { /* they act where this daemon talks to the peer: the collective */
        if (spec->at != NULL && spec->at[0] != '\0' && strcmp(spec->at, "collective") != 0) {
            errbuf_set(err, errlen, "fault kind '%.80s' acts on the link to a peer host, at "
                       "the Pod's hellos and collectives; leave --at out or give --at "
                       "collective", spec->kind);
            return -1;
        }
        if (spec->has_ipu || part[0] != '\0' || spec->rearm || spec->wait_ms != 0 ||
            (f.kind != FAULT_LINK_RESET_PEER && (spec->after != 0 || spec->count > 1 ||
                                                 spec->probability != 0.0))) {
            errbuf_set(err, errlen, "fault kind '%.80s' targets the link to a peer host: "
                       "no --ipu, --partition, --rearm-on-reset or --wait%s; its "
                       "--duration bounds it", spec->kind, f.kind == FAULT_LINK_RESET_PEER
                       ? "" : ", --after-runs, --count or --probability (it holds while armed)");
            return -1;
        }
        at = "collective";
    }
    f.at = FAULT_AT_COUNT;
    for (unsigned i = 0; i < FAULT_AT_COUNT; i++)
        if (strcmp(at, at_names[i]) == 0)
            f.at = (enum fault_at)i;
    if (f.at == FAULT_AT_COUNT) {
        errbuf_set(err, errlen, "fault trigger '%.80s' is not known; give --at attach, "
                   "compile, load, weights, run or collective", at);
        return -1;
    }
    /* A Pod job's collective failing is what PARTITION_RESET says: the partition across
     * the daemons is gone, its IPUs go back to the pool (none is in error to re-arm on). */
    if (f.at == FAULT_AT_COLLECTIVE && !is_link(&f) &&
        (f.kind != FAULT_RECOVERABLE || f.recovery != IPUOF_RECOVERY_PARTITION_RESET)) {
        errbuf_set(err, errlen, "fault kind '%.80s' cannot happen at collective: a Pod "
                   "job's collective that fails ends the job on every daemon with "
                   "PARTITION_RESET; give --kind recoverable:PARTITION_RESET", spec->kind);
        return -1;
    }
    if (f.at == FAULT_AT_COLLECTIVE && spec->rearm) {
        errbuf_set(err, errlen, "--rearm-on-reset re-arms a fault when the IPUs it put in "
                   "error are reset; a fault at collective puts none in error (its job ends "
                   "and the IPUs go back to the pool); give --count instead");
        return -1;
    }
    if (f.at == FAULT_AT_ATTACH && (f.kind == FAULT_HANG || f.kind == FAULT_TILE_OOM ||
                                    f.kind == FAULT_STREAM_OOM)) {
        errbuf_set(err, errlen, "fault kind '%.80s' cannot happen at attach (nothing runs on "
                   "the IPU yet); give --at compile, load, weights or run", spec->kind);
        return -1;
    }
    if (spec->rearm && f.recovery == IPUOF_RECOVERY_NONE) {
        errbuf_set(err, errlen, "--rearm-on-reset re-arms a fault when the IPUs it put in "
                   "error are reset; '%.80s' puts none in error", spec->kind);
        return -1;
    }
    if (spec->wait_ms != 0 && f.kind != FAULT_HOST_SYNC_TIMEOUT) {
        errbuf_set(err, errlen, "--wait is how long a host-sync-timeout waits; fault kind "
                   "'%.80s' does not wait (a hang waits for a reset)", spec->kind);
        return -1;
    }
    if (spec->has_ipu && part[0] != '\0') {
        errbuf_set(err, errlen, "a fault targets an IPU or a partition, not both "
                   "(IPU %u and partition '%.64s')", spec->ipu, part);
        return -1;
    }
    if (check_host(t, spec->host != NULL ? spec->host : "", err, errlen) < 0)
        return -1;
    if (spec->has_ipu && spec->ipu >= n_ipus) {
        errbuf_set(err, errlen, "no IPU %u: this daemon has IPUs 0 to %u", spec->ipu,
                   n_ipus - 1);
        return -1;
    }
    if (strlen(part) >= FAULTS_NAME_MAX) {
        errbuf_set(err, errlen, "partition name is %zu bytes long; at most %d are allowed",
                   strlen(part), FAULTS_NAME_MAX - 1);
        return -1;
    }
    if (!(spec->probability >= 0.0 && spec->probability <= 1.0)) {
        errbuf_set(err, errlen, "probability %g is outside 0..1; give a chance in (0, 1] "
                   "(0 or none: every time)", spec->probability);
        return -1;
    }
    if (t->n >= FAULTS_MAX) {
        errbuf_set(err, errlen, "%d faults are armed already, the most this daemon keeps; "
                   "ipuctl fault clear removes them", FAULTS_MAX);
        return -1;
    }
    f.id = t->next_id++;
    f.has_ipu = spec->has_ipu != 0;
    f.ipu = spec->ipu;
    snprintf(f.partition, sizeof f.partition, "%s", part);
    snprintf(f.host, sizeof f.host, "%s", spec->host != NULL ? spec->host : "");
    f.after = spec->after;
    f.count = spec->count ? spec->count : 1;
    f.probability = spec->probability > 0.0 ? spec->probability : 1.0;
    f.seed = spec->seed;
    f.rng = spec->seed ^ 0x9e3779b97f4a7c15ull; /* xorshift's state must not be 0 */
    if (f.rng == 0)
        f.rng = 1;
    f.armed_ms = now_ms;
    f.duration_ms = spec->duration_ms;
    f.wait_ms = spec->wait_ms;
    f.rearm = spec->rearm != 0;
    t->f[t->n++] = f;
    if (id != NULL)
        *id = f.id;
    return 0;
}

unsigned
faults_clear(struct fault_table *t, unsigned id)
{
    unsigned kept = 0, removed = 0;

    for (unsigned i = 0; i < t->n; i++) {
        if (id == 0 || t->f[i].id == id)
            removed++;
        else
            t->f[kept++] = t->f[i];
    }
    t->n = kept;
    return removed;
}

int
faults_spent(const struct fault *f)
{
    return f->fired >= f->count;
}

/* A uniform draw in [0, 1) from f's own xorshift64* stream (reproducible from its seed). */
static double
draw(struct fault *f)
{
    uint64_t x = f->rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    f->rng = x;
    return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

int
faults_expired(const struct fault *f, uint64_t now_ms)
{
    return f->duration_ms != 0 && now_ms - f->armed_ms >= f->duration_ms;
}

unsigned
faults_rearm(struct fault_table *t, unsigned ipu)
{
    unsigned n = 0;

    if (ipu >= 64)
        return 0;
    for (unsigned i = 0; i < t->n; i++) {
        struct fault *f = &t->f[i];
        if (!(f->hit & (1ull << ipu)))
            continue;
        f->hit &= ~(1ull << ipu);
        if (f->rearm && f->hit == 0) {
            f->fired = 0;
            f->seen = 0;
            f->rearmed++;
            n++;
        }
    }
    return n;
}

struct fault *
faults_match(struct fault_table *t, enum fault_at at, unsigned first, unsigned count,
             const char *part, uint64_t now_ms)
{
    for (unsigned i = 0; i < t->n; i++) {
        struct fault *f = &t->f[i];
        if (f->at != at || is_link(f) || faults_spent(f) || faults_expired(f, now_ms))
            continue;
        if (f->has_ipu && (f->ipu < first || f->ipu - first >= count))
            continue;
        if (f->partition[0] != '\0' && (part == NULL || strcmp(f->partition, part) != 0))
            continue;
        if (f->seen++ < f->after)
            continue;
        if (f->probability < 1.0 && draw(f) >= f->probability)
            continue;
        f->fired++;
        t->fired_total++;
        return f;
    }
    return NULL;
}

unsigned
faults_link(struct fault_table *t, const char *peer, uint64_t now_ms, unsigned *latency_ms)
{
    unsigned cut = 0, ms = 0;

    for (unsigned i = 0; i < t->n; i++) {
        struct fault *f = &t->f[i];
        if (faults_expired(f, now_ms) || strcmp(f->peer, peer) != 0)
            continue;
        if (f->kind == FAULT_LINK_PARTITION && cut == 0)
            cut = f->id;
        else if (f->kind == FAULT_LINK_LATENCY && ms + f->link_ms <= FAULTS_LINK_MS_MAX)
            ms += f->link_ms;
    }
    *latency_ms = ms;
    return cut;
}

struct fault *
faults_link_reset(struct fault_table *t, const char *peer, uint64_t now_ms)
{
    for (unsigned i = 0; i < t->n; i++) {
        struct fault *f = &t->f[i];
        if (f->kind != FAULT_LINK_RESET_PEER || faults_spent(f) || faults_expired(f, now_ms) ||
            strcmp(f->peer, peer) != 0)
            continue;
        if (f->seen++ < f->after)
            continue;
        if (f->probability < 1.0 && draw(f) >= f->probability)
            continue;
        f->fired++;
        return f;
    }
    return NULL;
}

/* ---- IPUOF_FAULTS and the config's faults: JSON read by proto/jsonparse.c --------------- */

/* The numeric keys of an entry: name, whether a fraction is allowed, the largest value. */
static const struct {
    const char *key;
    int fraction;
    double max;
} num_keys[] = {
    {"ipu", 0, 4294967295.0},        {"after_runs", 0, 4294967295.0},
    {"count", 0, 4294967295.0},      {"probability", 1, 1.0},
    {"seed", 0, 9007199254740992.0}, /* 2^53: a JSON number is a double */
    {"duration_ms", 0, 9007199254740992.0}, {"wait_ms", 0, 4294967295.0},
};

/* Reads one entry (an object) into spec; its strings stay borrowed from o. 0, or -1 with
 * err naming the entry (what) and the member. */
static int
read_entry(const struct ipuof_json *o, struct fault_spec *spec, const char *what,
           unsigned idx, char *err, size_t errlen)
{
    if (o->type != IPUOF_JSON_OBJECT) {
        errbuf_set(err, errlen, "%s entry %u is %s; give an object such as {\"ipu\": 0, "
                   "\"kind\": \"recoverable:IPU_RESET\", \"at\": \"run\"}", what, idx,
                   ipuof_json_type_name(o->type));
        return -1;
    }
    for (size_t i = 0; i < o->n; i++) {
        const char *key = o->keys[i];
        const struct ipuof_json *v = o->items[i];
        size_t k;

        if (strcmp(key, "kind") == 0 || strcmp(key, "at") == 0 ||
            strcmp(key, "partition") == 0 || strcmp(key, "host") == 0) {
            if (v->type != IPUOF_JSON_STRING) {
                errbuf_set(err, errlen, "%s entry %u: \"%s\" is %s; give a string", what,
                           idx, key, ipuof_json_type_name(v->type));
                return -1;
            }
            if (key[0] == 'k')
                spec->kind = v->string;
            else if (key[0] == 'a')
                spec->at = v->string;
            else if (key[0] == 'h')
                spec->host = v->string;
            else
                spec->partition = v->string;
            continue;
        }
        if (strcmp(key, "rearm_on_reset") == 0) {
            if (v->type != IPUOF_JSON_BOOL) {
                errbuf_set(err, errlen, "%s entry %u: \"rearm_on_reset\" is %s; give true or "
                           "false", what, idx, ipuof_json_type_name(v->type));
                return -1;
            }
            spec->rearm = v->boolean;
            continue;
        }
        for (k = 0; k < sizeof num_keys / sizeof num_keys[0]; k++)
            if (strcmp(key, num_keys[k].key) == 0)
                break;
        if (k == sizeof num_keys / sizeof num_keys[0]) {
            errbuf_set(err, errlen, "%s entry %u: unknown key \"%.40s\"; the keys are ipu, "
                       "partition, host, kind, at, after_runs, count, probability, seed, "
                       "duration_ms, wait_ms, rearm_on_reset", what, idx, key);
            return -1;
        }
        if (v->type != IPUOF_JSON_NUMBER || v->number < 0 || v->number > num_keys[k].max ||
            (!num_keys[k].fraction && !v->is_int)) {
            errbuf_set(err, errlen, "%s entry %u: \"%s\" wants a %s from 0 to %.17g", what,
                       idx, key, num_keys[k].fraction ? "number" : "whole number",
                       num_keys[k].max);
            return -1;
        }
        if (strcmp(key, "duration_ms") == 0) {
            spec->duration_ms = (uint64_t)v->number;
            continue;
        }
        if (strcmp(key, "wait_ms") == 0) {
            spec->wait_ms = (unsigned)v->number;
            continue;
        }
        switch (key[0] == 'a' ? 'A' : key[0]) {
        case 'i':
            spec->has_ipu = 1;
            spec->ipu = (unsigned)v->number;
            break;
        case 'A':
            spec->after = (unsigned)v->number;
            break;
        case 'c':
            spec->count = (unsigned)v->number;
            break;
        case 'p':
            spec->probability = v->number;
            break;
        default:
            spec->seed = (uint64_t)v->number;
            break;
        }
    }
    return 0;
}

int
faults_parse_json(struct fault_table *t, const char *json, const char *what, unsigned n_ipus,
                  uint64_t now_ms, char *err, size_t errlen)
{
    struct ipuof_json *root = NULL;
    char why[512];
    int rc = -1;

    if (ipuof_json_parse(json, strlen(json), &root, why, sizeof why) < 0) {
        errbuf_set(err, errlen, "%s is not JSON: %s; give an array of objects", what, why);
        return -1;
    }
    if (root->type != IPUOF_JSON_ARRAY && root->type != IPUOF_JSON_OBJECT) {
        errbuf_set(err, errlen, "%s is %s; give an array of objects (or one object)", what,
                   ipuof_json_type_name(root->type));
        goto end;
    }
    for (size_t i = 0; i < (root->type == IPUOF_JSON_ARRAY ? root->n : 1); i++) {
        const struct ipuof_json *o = root->type == IPUOF_JSON_ARRAY ? root->items[i] : root;
        struct fault_spec spec = {0};
        if (read_entry(o, &spec, what, (unsigned)i, err, errlen) < 0)
            goto end;
        if (faults_add(t, &spec, n_ipus, now_ms, NULL, why, sizeof why) < 0) {
            errbuf_set(err, errlen, "%s entry %zu: %s", what, i, why);
            goto end;
        }
    }
    rc = 0;
end:
    ipuof_json_free(root);
    return rc;
}

int
faults_load(struct fault_table *t, const char *cfg_lines, const char *env, unsigned n_ipus,
            uint64_t now_ms, char *err, size_t errlen)
{
    const char *p = cfg_lines != NULL ? cfg_lines : "";
    unsigned line = 0;

    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        char what[64], text[FAULTS_LINE_MAX];
        line++;
        if (n >= sizeof text) {
            errbuf_set(err, errlen, "the config's [faults] inject number %u is %zu bytes; at "
                       "most %d are read", line, n, FAULTS_LINE_MAX - 1);
            return -1;
        }
        memcpy(text, p, n);
        text[n] = '\0';
        snprintf(what, sizeof what, "the config's [faults] inject number %u", line);
        if (faults_parse_json(t, text, what, n_ipus, now_ms, err, errlen) < 0)
            return -1;
        p += n + (nl != NULL);
    }
    if (env != NULL && env[0] != '\0')
        return faults_parse_json(t, env, "IPUOF_FAULTS", n_ipus, now_ms, err, errlen);
    return 0;
}
