/*
 * faults.c — see faults.h.
 */
#include "faults.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "ipuof/status.h"

static const char *const at_names[FAULT_AT_COUNT] = {"attach", "compile", "weights", "run"};

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
    "recoverable:PARTITION_RESET, recoverable:FULL_RESET, unrecoverable, host-sync-timeout, " \
    "fabric-disconnect"

void
faults_init(struct fault_table *t)
{
    memset(t, 0, sizeof *t);
    t->next_id = 1;
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
    case FAULT_RECOVERABLE:
        for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++)
            if (actions[i].recovery == f->recovery)
                snprintf(buf, len, "recoverable:%s", actions[i].name);
        return buf;
    case FAULT_UNRECOVERABLE:
        return "unrecoverable";
    case FAULT_HOST_SYNC_TIMEOUT:
        return "host-sync-timeout";
    case FAULT_FABRIC_DISCONNECT:
        return "fabric-disconnect";
    }
    return "?";
}

/* Parses kind into f's kind and recovery. 0 or -1 with err set. */
static int
parse_kind(struct fault *f, const char *kind, char *err, size_t errlen)
{
    if (kind == NULL || kind[0] == '\0') {
        errbuf_set(err, errlen, "a fault needs a kind: one of " KINDS_HELP);
        return -1;
    }
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
    if (strcmp(kind, "unrecoverable") == 0) {
        f->kind = FAULT_UNRECOVERABLE;
        f->recovery = IPUOF_RECOVERY_FULL_RESET; /* the emulator's power cycle: reset --all */
        return 0;
    }
    if (strcmp(kind, "host-sync-timeout") == 0) {
        f->kind = FAULT_HOST_SYNC_TIMEOUT;
        f->recovery = IPUOF_RECOVERY_IPU_RESET;
        return 0;
    }
    if (strcmp(kind, "fabric-disconnect") == 0) {
        f->kind = FAULT_FABRIC_DISCONNECT;
        f->recovery = IPUOF_RECOVERY_NONE; /* the IPUs are fine; the connection is gone */
        return 0;
    }
    errbuf_set(err, errlen, "fault kind '%.80s' is not known; give one of " KINDS_HELP, kind);
    return -1;
}

int
faults_add(struct fault_table *t, const struct fault_spec *spec, unsigned n_ipus, unsigned *id,
           char *err, size_t errlen)
{
    struct fault f;
    const char *part = spec->partition != NULL ? spec->partition : "";
    const char *at = spec->at != NULL && spec->at[0] != '\0' ? spec->at : "run";

    memset(&f, 0, sizeof f);
    if (parse_kind(&f, spec->kind, err, errlen) < 0)
        return -1;
    f.at = FAULT_AT_COUNT;
    for (unsigned i = 0; i < FAULT_AT_COUNT; i++)
        if (strcmp(at, at_names[i]) == 0)
            f.at = (enum fault_at)i;
    if (f.at == FAULT_AT_COUNT) {
        errbuf_set(err, errlen, "fault trigger '%.80s' is not known; give --at attach, "
                   "compile, weights or run", at);
        return -1;
    }
    if (spec->has_ipu && part[0] != '\0') {
        errbuf_set(err, errlen, "a fault targets an IPU or a partition, not both "
                   "(IPU %u and partition '%.64s')", spec->ipu, part);
        return -1;
    }
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
    f.after = spec->after;
    f.count = spec->count ? spec->count : 1;
    f.probability = spec->probability > 0.0 ? spec->probability : 1.0;
    f.seed = spec->seed;
    f.rng = spec->seed ^ 0x9e3779b97f4a7c15ull; /* xorshift's state must not be 0 */
    if (f.rng == 0)
        f.rng = 1;
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

struct fault *
faults_match(struct fault_table *t, enum fault_at at, unsigned first, unsigned count,
             const char *part)
{
    for (unsigned i = 0; i < t->n; i++) {
        struct fault *f = &t->f[i];
        if (f->at != at || faults_spent(f))
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
        return f;
    }
    return NULL;
}

/* ---- IPUOF_FAULTS: a flat JSON reader for an array of flat objects ---------------------- */

struct jr {
    const char *start, *p;
    char *err;
    size_t errlen;
};

static void
skip_ws(struct jr *r)
{
    while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')
        r->p++;
}

/* Reads a JSON string without escapes other than \" and \\ into out (len bytes). */
static int
read_string(struct jr *r, char *out, size_t len)
{
    size_t n = 0;

    if (*r->p != '"')
        return -1;
    r->p++;
    while (*r->p != '"') {
        char ch = *r->p;
        if (ch == '\0' || (unsigned char)ch < 0x20)
            return -1;
        if (ch == '\\') {
            r->p++;
            if (*r->p != '"' && *r->p != '\\')
                return -1;
            ch = *r->p;
        }
        if (n + 1 >= len)
            return -1;
        out[n++] = ch;
        r->p++;
    }
    r->p++;
    out[n] = '\0';
    return 0;
}

/* One object {"key": value, ...} into spec (strings kept in kind/at/part). */
static int
read_object(struct jr *r, struct fault_spec *spec, char *kind, char *at, char *part,
            unsigned idx)
{
    if (*r->p != '{')
        goto bad;
    r->p++;
    skip_ws(r);
    if (*r->p == '}') {
        r->p++;
        return 0;
    }
    for (;;) {
        char key[32];
        skip_ws(r);
        if (read_string(r, key, sizeof key) < 0)
            goto bad;
        skip_ws(r);
        if (*r->p++ != ':')
            goto bad;
        skip_ws(r);
        if (strcmp(key, "kind") == 0 || strcmp(key, "at") == 0 ||
            strcmp(key, "partition") == 0) {
            char *dst = key[0] == 'k' ? kind : key[0] == 'a' ? at : part;
            if (read_string(r, dst, FAULTS_NAME_MAX) < 0)
                goto bad;
        } else if (strcmp(key, "ipu") == 0 || strcmp(key, "after_runs") == 0 ||
                   strcmp(key, "count") == 0 || strcmp(key, "probability") == 0 ||
                   strcmp(key, "seed") == 0) {
            char *end;
            double v = strtod(r->p, &end);
            if (end == r->p || !isfinite(v) || v < 0 || v > 18446744073709551615.0 ||
                (key[0] != 'p' && v != floor(v)) ||
                ((key[0] == 'i' || key[0] == 'a' || key[0] == 'c') && v > 4294967295.0)) {
                errbuf_set(r->err, r->errlen, "IPUOF_FAULTS entry %u: \"%s\" wants a "
                           "non-negative %s", idx, key, key[0] == 'p' ? "number" : "integer");
                return -1;
            }
            r->p = end;
            if (key[0] == 'i') {
                spec->has_ipu = 1;
                spec->ipu = (unsigned)v;
            } else if (key[0] == 'a') {
                spec->after = (unsigned)v;
            } else if (key[0] == 'c') {
                spec->count = (unsigned)v;
            } else if (key[0] == 'p') {
                spec->probability = v;
            } else {
                spec->seed = (uint64_t)v;
            }
        } else {
            errbuf_set(r->err, r->errlen, "IPUOF_FAULTS entry %u: unknown key \"%s\"; the "
                       "keys are ipu, partition, kind, at, after_runs, count, probability, "
                       "seed", idx, key);
            return -1;
        }
        skip_ws(r);
        if (*r->p == '}') {
            r->p++;
            return 0;
        }
        if (*r->p++ != ',')
            goto bad;
    }
bad:
    errbuf_set(r->err, r->errlen, "IPUOF_FAULTS entry %u is not a flat JSON object of "
               "strings and numbers (at byte %zu)", idx, (size_t)(r->p - r->start));
    return -1;
}

int
faults_parse_json(struct fault_table *t, const char *json, unsigned n_ipus, char *err,
                  size_t errlen)
{
    struct jr r = {json, json, err, errlen};
    int array;
    unsigned idx = 0;

    skip_ws(&r);
    array = *r.p == '[';
    if (array) {
        r.p++;
        skip_ws(&r);
        if (*r.p == ']') {
            r.p++;
            goto end;
        }
    }
    for (;;) {
        struct fault_spec spec = {0};
        char kind[FAULTS_NAME_MAX] = "", at[FAULTS_NAME_MAX] = "", part[FAULTS_NAME_MAX] = "";
        char why[512];

        skip_ws(&r);
        if (read_object(&r, &spec, kind, at, part, idx) < 0)
            return -1;
        spec.kind = kind;
        spec.at = at;
        spec.partition = part;
        if (faults_add(t, &spec, n_ipus, NULL, why, sizeof why) < 0) {
            errbuf_set(err, errlen, "IPUOF_FAULTS entry %u: %s", idx, why);
            return -1;
        }
        idx++;
        skip_ws(&r);
        if (!array)
            break;
        if (*r.p == ']') {
            r.p++;
            break;
        }
        if (*r.p++ != ',') {
            errbuf_set(err, errlen, "IPUOF_FAULTS: entry %u is followed by neither ',' nor "
                       "']'", idx - 1);
            return -1;
        }
    }
end:
    skip_ws(&r);
    if (*r.p != '\0') {
        errbuf_set(err, errlen, "IPUOF_FAULTS: text after the %s; give one JSON array of "
                   "objects", array ? "array" : "object");
        return -1;
    }
    return 0;
}
