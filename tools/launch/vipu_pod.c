/*
 * vipu_pod.c — see vipu_pod.h.
 */
#include "vipu_pod.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "json.h"

/* 1 when address a ("HOST:PORT") has no host or a wildcard one (0.0.0.0, [::]). */
static int
wildcard(const char *a)
{
    return a[0] == ':' || strncmp(a, "0.0.0.0:", 8) == 0 || strncmp(a, "[::]:", 5) == 0;
}

int
vipu_pod_load(struct vipu_pod *pod, ipuof_client *c, const struct ipuctl_opts *conn)
{
    int rc;

    memset(pod, 0, sizeof *pod);
    pod->conn = conn;
    rc = ipuof_vipu_agents(c, pod->agent, VIPU_POD_MAX, &pod->n);
    if (rc != IPUOF_OK) {
        ipuctl_report_as("vipu", c, rc, "list allocations");
        return ipuctl_exit_code(rc, 0);
    }
    if (pod->n > VIPU_POD_MAX)
        pod->n = VIPU_POD_MAX;
    /* The daemon asked is reached as vipu reached it when its listen host is a wildcard. */
    if (pod->n > 0 && (pod->agent[0].address[0] == '\0' || wildcard(pod->agent[0].address)) &&
        conn->server != NULL && strncmp(conn->server, "unix:", 5) != 0)
        snprintf(pod->agent[0].address, sizeof pod->agent[0].address, "%s", conn->server);
    return 0;
}

/* A connection to agent i's daemon (c itself for agent 0): EX_OK with *out, or an exit
 * status after saying why. *mine is 1 when the caller must free *out. */
static int
open_agent(const struct vipu_pod *pod, ipuof_client *c, size_t i, ipuof_client **out,
           int *mine)
{
    struct ipuctl_opts o = *pod->conn;
    const struct ipuof_vipu_agent *a = &pod->agent[i];
    int ex;

    *mine = 0;
    *out = c;
    if (i == 0)
        return EX_OK;
    if (a->address[0] == '\0') {
        fprintf(stderr, "vipu: Pod host '%s' has not said where its clients reach it yet (its "
                "hello reply has no client address: an older ipuofd, or no hello answered "
                "yet); try again after its hello_interval\n", a->name);
        return EX_UNAVAILABLE;
    }
    o.server = a->address;
    o.admin_socket = NULL; /* the admin socket reaches the local daemon only */
    ex = ipuctl_open_client(&o, out);
    if (ex != EX_OK) {
        fprintf(stderr, "vipu: (that is the ipuofd of Pod host '%s', at the client address its "
                "hellos give)\n", a->name);
        *out = NULL;
        return ex;
    }
    *mine = 1;
    return EX_OK;
}

/* Orders shares by their host's [pod] name (qsort). */
static const struct vipu_pod *sort_pod;
static int
by_name(const void *x, const void *y)
{
    const struct vipu_share *a = x, *b = y;

    return strcmp(sort_pod->agent[a->agent].name, sort_pod->agent[b->agent].name);
}

int
vipu_pod_find(struct vipu_pod *pod, ipuof_client *c, const char *name, struct vipu_share *sh,
              size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < pod->n; i++) {
        ipuof_client *ac;
        int mine, rc, ex;
        if (i > 0 && !pod->agent[i].reachable) {
            fprintf(stderr, "vipu: Pod host '%s' is unreachable (%s): a share of partition %s "
                    "there is not shown\n", pod->agent[i].name, pod->agent[i].error, name);
            continue;
        }
        ex = open_agent(pod, c, i, &ac, &mine);
        if (ex != EX_OK)
            continue;
        rc = ipuof_vipu_get(ac, name, &sh[*n].p);
        if (rc == IPUOF_OK)
            sh[(*n)++].agent = i;
        else if (rc != IPUOF_E_NOTFOUND)
            ipuctl_report_as("vipu", ac, rc, pod->agent[i].name);
        if (mine)
            ipuof_client_free(ac);
    }
    sort_pod = pod;
    qsort(sh, *n, sizeof *sh, by_name);
    return 0;
}

/* The agents a partition over ilds daemons goes to: 0 (c's daemon), then the other
 * reachable ones in name order, into pick; 0, or EX_UNAVAILABLE after saying why. */
static int
pick_hosts(const struct vipu_pod *pod, unsigned ilds, unsigned share, size_t *pick)
{
    size_t k = 1;

    pick[0] = 0;
    while (k < ilds) {
        size_t best = 0;
        for (size_t i = 1; i < pod->n; i++) {
            int taken = 0;
            for (size_t j = 0; j < k; j++)
                taken |= pick[j] == i;
            if (taken || !pod->agent[i].reachable || pod->agent[i].num_ipus < share)
                continue;
            if (best == 0 || strcmp(pod->agent[i].name, pod->agent[best].name) < 0)
                best = i;
        }
        if (best == 0)
            break;
        pick[k++] = best;
    }
    if (k == ilds)
        return 0;
    fprintf(stderr, "vipu: a partition over %u daemons of %u IPUs each needs %u hosts of the Pod "
            "that are reachable with %u IPUs or more; there %s %zu:", ilds, share, ilds, share,
            k == 1 ? "is" : "are", k);
    for (size_t i = 0; i < pod->n; i++)
        fprintf(stderr, "%s %s (%s, %u IPUs%s%s)", i ? "," : "", pod->agent[i].name,
                pod->agent[i].reachable ? "reachable" : "unreachable", pod->agent[i].num_ipus,
                pod->agent[i].error[0] ? ": " : "", pod->agent[i].error);
    fputc('\n', stderr);
    return EX_UNAVAILABLE;
}

int
vipu_pod_create(struct vipu_pod *pod, ipuof_client *c, const char *name, unsigned size,
                unsigned ilds, int reconfigurable, int showjson)
{
    size_t pick[VIPU_POD_MAX], made = 0;
    struct vipu_share sh[VIPU_POD_MAX];
    unsigned share = size / ilds;
    int ex;

    if (ilds > pod->n) {
        fprintf(stderr, "vipu: create partition %s: --num-ilds %u, but the Pod of this ipuofd "
                "has %zu host%s; give at most %zu\n", name, ilds, pod->n,
                pod->n == 1 ? "" : "s", pod->n);
        return EX_USAGE;
    }
    if (pod->conn->admin_token == NULL) {
        fprintf(stderr, "vipu: create partition %s: a partition over %u daemons needs the admin "
                "token (--admin-token or IPUOF_ADMIN_TOKEN): the admin socket reaches this "
                "host's daemon only\n", name, ilds);
        return EX_NOPERM;
    }
    ex = pick_hosts(pod, ilds, share, pick);
    for (size_t k = 0; ex == 0 && k < ilds; k++) {
        ipuof_client *ac;
        int mine, rc;
        ex = open_agent(pod, c, pick[k], &ac, &mine);
        if (ex != EX_OK)
            break;
        rc = ipuof_vipu_create(ac, name, share, 1, reconfigurable, &sh[made].p);
        if (rc != IPUOF_OK) {
            char what[160];
            snprintf(what, sizeof what, "create partition %s on Pod host '%s'", name,
                     pod->agent[pick[k]].name);
            ipuctl_report_as("vipu", ac, rc, what);
            ex = rc == IPUOF_E_INVAL ? EX_USAGE : ipuctl_exit_code(rc, 0);
        } else {
            sh[made++].agent = pick[k];
        }
        if (mine)
            ipuof_client_free(ac);
    }
    if (ex != 0) { /* all or nothing: remove the shares made */
        if (made > 0)
            fprintf(stderr, "vipu: removing the %zu share%s made\n", made, made == 1 ? "" : "s");
        (void)vipu_pod_each(pod, c, name, sh, made, 1, 0);
        return ex;
    }
    sort_pod = pod;
    qsort(sh, made, sizeof *sh, by_name);
    if (showjson) {
        printf("{\"partition\":{\"id\":");
        json_string(stdout, name);
        printf(",\"spec\":{\"ipus\":%u,\"num_gcds\":%u,\"num_ilds\":%u,\"reconfigurable\":%s},"
               "\"hosts\":[", size, ilds, ilds, reconfigurable ? "true" : "false");
        for (size_t k = 0; k < made; k++) {
            printf("%s{\"name\":", k ? "," : "");
            json_string(stdout, pod->agent[sh[k].agent].name);
            printf(",\"address\":");
            json_string(stdout, pod->agent[sh[k].agent].address);
            printf(",\"gcd\":%zu,\"first_ipu\":%u,\"ipus\":%u}", k, sh[k].p.first_ipu, share);
        }
        printf("]}}\n");
        return 0;
    }
    printf("create partition (%s): success. State: PS_ACTIVE, %u IPUs over %u hosts of the Pod, "
           "%u GCDs:", name, size, ilds, ilds);
    for (size_t k = 0; k < made; k++)
        printf("%s GCD %zu on %s (IPUs %u-%u)", k ? "," : "", k, pod->agent[sh[k].agent].name,
               sh[k].p.first_ipu, sh[k].p.first_ipu + share - 1);
    printf(".\n");
    return 0;
}

int
vipu_pod_each(struct vipu_pod *pod, ipuof_client *c, const char *name,
              const struct vipu_share *sh, size_t n, int remove, int force)
{
    int first = 0;

    for (size_t k = 0; k < n; k++) {
        ipuof_client *ac;
        int mine, rc, ex = open_agent(pod, c, sh[k].agent, &ac, &mine);
        if (ex == EX_OK) {
            rc = remove ? ipuof_vipu_remove(ac, name, force) : ipuof_vipu_reset(ac, name, force);
            if (rc != IPUOF_OK) {
                char what[160];
                snprintf(what, sizeof what, "%s partition %s on Pod host '%s'",
                         remove ? "remove" : "reset", name, pod->agent[sh[k].agent].name);
                ipuctl_report_as("vipu", ac, rc, what);
                ex = ipuctl_exit_code(rc, 0);
            }
            if (mine)
                ipuof_client_free(ac);
        }
        if (first == 0)
            first = ex;
    }
    return first;
}

void
vipu_pod_print_config(FILE *f, const struct vipu_pod *pod, const struct vipu_share *sh, size_t n,
                      unsigned gcd)
{
    const struct vipu_share *s = &sh[gcd];

    fprintf(f, "{\n  \"attributes\": {\n    \"Partition Id\": ");
    json_string(f, s->p.name);
    fprintf(f, ",\n    \"GCD Id\": %u,\n    \"Num GCDs\": %zu,\n    \"IPUs\": %u,\n"
            "    \"Pod hosts\": [", gcd, n, s->p.size);
    for (size_t k = 0; k < n; k++) {
        fprintf(f, "%s", k ? ", " : "");
        json_string(f, pod->agent[sh[k].agent].name);
    }
    fprintf(f, "]\n  },\n  \"servers\": [\n    {\"address\": ");
    json_string(f, pod->agent[s->agent].address);
    fprintf(f, ", \"ipus\": [");
    for (unsigned i = 0; i < s->p.size; i++)
        fprintf(f, "%s%u", i ? ", " : "", s->p.first_ipu + i);
    fprintf(f, "]}\n  ]\n}\n");
}
