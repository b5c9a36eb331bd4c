/*
 * vipu — V-IPU's command line for ipuofd's partition service (daemon/requests/req_vipu.c), so the
 * operator's scripts run unchanged: create, list, get, reset and remove partitions, list
 * the allocation (the daemon as its agent), write the IPUoF config file of a GCD.
 *
 *   vipu [global options] create partition NAME --size N [--num-gcds G] [--num-ilds M]
 *                                                    [--reconfigurable]
 *   vipu [global options] list partitions | list allocations
 *   vipu [global options] get partition NAME [--gcd N --ipuof-configs | --ipuof-configs-dir D]
 *   vipu [global options] reset partition NAME [--force]
 *   vipu [global options] remove partition NAME [--force]
 *
 * In a Pod, a partition may span several of its daemons (tools/launch/vipu_pod.c).
 * Installed also as vipu-admin. Create and remove need admin rights: --admin-socket, or
 * the admin token (--admin-token, IPUOF_ADMIN_TOKEN). Connecting and exit status
 * (sysexits.h) are ipuctl's (tools/ipuctl/ipuctl_conn.c), but the daemon refusing a request as
 * invalid is a usage error (64).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "human.h"
#include "ipuctl.h"
#include "ipuof/client.h"
#include "json.h"
#include "table.h"
#include "vipu_pod.h"

#define MAX_PARTS 256

struct opts {
    const char *server;       /* --server, or --api-host[:--api-port] */
    char api[300];            /* --api-host H --api-port P as "H:P" */
    const char *api_host, *api_port;
    const char *admin_socket;
    const char *admin_token;
    int showjson;
    int timeout_ms;
};

/* Prints "vipu: WHAT: SENTENCE" and returns the exit status for rc: ipuctl's, but a request
 * the daemon refused as invalid (a bad size, GCD count or name) is a usage error. */
static int
fail(const ipuof_client *c, int rc, const char *what)
{
    ipuctl_report_as("vipu", c, rc, what);
    return rc == IPUOF_E_INVAL ? EX_USAGE : ipuctl_exit_code(rc, 0);
}

static int
usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "vipu: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "; see vipu --help\n");
    return EX_USAGE;
}

/* The address of the daemon as programs reach it: what the IPUoF config file lists. */
static const char *
client_address(const struct opts *o)
{
    const char *s = getenv("IPUOF_SERVER");

    if (o->server != NULL)
        return o->server;
    return s != NULL && s[0] != '\0' ? s : "127.0.0.1:50052";
}

/* Connects as the options say (ipuctl's connecting, under vipu's name): EX_OK with *out
 * (caller frees), or an exit status after saying why. */
static int
connect_daemon(const struct opts *o, struct ipuctl_opts *co, ipuof_client **out)
{
    /* The V-IPU server's address, never the IPUoF config files' lookup: those are what
     * this command writes (vipu get partition ... --ipuof-configs > ~/.ipuof.conf.d/f.conf
     * creates the file before vipu runs). co is kept for the other daemons of a Pod. */
    *co = (struct ipuctl_opts){.server = client_address(o), .admin_socket = o->admin_socket,
                               .admin_token = o->admin_token, .timeout_ms = o->timeout_ms,
                               .prog = "vipu"};

    return ipuctl_open_client(co, out);
}

static const char *
state_name(int state)
{
    return state == IPUOF_VIPU_PS_FAILED ? "PS_FAILED" : "PS_ACTIVE";
}

/* One partition as --showjson prints it. */
static void
json_partition(FILE *f, const struct ipuof_vipu_partition *p)
{
    fprintf(f, "{\"partition\":{\"id\":");
    json_string(f, p->name);
    fprintf(f, ",\"spec\":{\"ipus\":%u,\"num_gcds\":%u,\"reconfigurable\":%s,\"allocation\":"
            "\"ipuofd\"},\"status\":{\"state\":\"%s\",\"first_ipu\":%u,\"holder\":", p->size,
            p->num_gcds, p->reconfigurable ? "true" : "false", state_name(p->state),
            p->first_ipu);
    if (p->held) {
        fprintf(f, "{\"name\":");
        json_string(f, p->holder_name);
        fprintf(f, ",\"pid\":%u,\"peer\":", p->holder_pid);
        json_string(f, p->holder_peer);
        fprintf(f, "}");
    } else {
        fprintf(f, "null");
    }
    fprintf(f, "}}}");
}

/* The partitions ps[0..n) as a table (or JSON). */
static void
print_partitions(const struct opts *o, const struct ipuof_vipu_partition *ps, size_t n)
{
    static const char *const heads[] = {"ID", "ALLOCATION", "IPUS", "GCDS", "RECONFIG",
                                        "STATE", "HELD BY"};
    static const int right[] = {0, 0, 1, 1, 0, 0, 0};
    struct table t;

    if (o->showjson) {
        printf("{\"partitions\":[");
        for (size_t i = 0; i < n; i++) {
            if (i)
                putchar(',');
            json_partition(stdout, &ps[i]);
        }
        printf("]}\n");
        return;
    }
    table_init(&t, 7, heads, right);
    for (size_t i = 0; i < n; i++) {
        char ipus[16], gcds[16], held[160];
        const char *cells[7] = {ps[i].name, "ipuofd", ipus, gcds,
                                ps[i].reconfigurable ? "true" : "false",
                                ps[i].state == IPUOF_VIPU_PS_FAILED ? "FAILED" : "ACTIVE", held};
        snprintf(ipus, sizeof ipus, "%u", ps[i].size);
        snprintf(gcds, sizeof gcds, "%u", ps[i].num_gcds);
        if (ps[i].held)
            snprintf(held, sizeof held, "%s[%u]@%s", ps[i].holder_name, ps[i].holder_pid,
                     ps[i].holder_peer);
        else
            snprintf(held, sizeof held, "-");
        if (table_add_row(&t, cells) < 0)
            fprintf(stderr, "vipu: out of memory; the table is incomplete\n");
    }
    table_print(&t, stdout);
    table_free(&t);
}

/* The IPUoF config file of GCD gcd of p (docs/pod-tools.md), to f. */
static void
print_ipuof_config(FILE *f, const struct opts *o, const struct ipuof_vipu_partition *p,
                   unsigned gcd)
{
    unsigned per = p->size / (p->num_gcds ? p->num_gcds : 1);

    fprintf(f, "{\n  \"attributes\": {\n    \"Partition Id\": ");
    json_string(f, p->name);
    fprintf(f, ",\n    \"GCD Id\": %u,\n    \"Num GCDs\": %u,\n    \"IPUs\": %u\n  },\n"
            "  \"servers\": [\n    {\"address\": ", gcd, p->num_gcds, per);
    json_string(f, client_address(o));
    fprintf(f, ", \"ipus\": [");
    for (unsigned i = 0; i < per; i++)
        fprintf(f, "%s%u", i ? ", " : "", p->first_ipu + gcd * per + i);
    fprintf(f, "]}\n  ]\n}\n");
}

/* Writes every GCD's IPUoF config file of partition name into dir as NAME_gcdN.conf, by
 * print(f, gcd) (each replaced whole: written to a temporary file, then renamed), and
 * lists them on stdout. 0, or EX_CANTCREAT after saying why. */
static int
write_configs(const char *dir, const char *name, unsigned num_gcds,
              void (*print)(FILE *f, unsigned gcd, const void *arg), const void *arg)
{
    for (unsigned g = 0; g < num_gcds; g++) {
        char path[4200], tmp[4300];
        FILE *f;
        int bad;
        snprintf(path, sizeof path, "%s/%s_gcd%u.conf", dir, name, g);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        f = fopen(tmp, "w");
        if (f == NULL) {
            fprintf(stderr, "vipu: --ipuof-configs-dir: cannot write %s: %s\n", tmp,
                    strerror(errno));
            return EX_CANTCREAT;
        }
        print(f, g, arg);
        bad = ferror(f);
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, path) != 0) {
            fprintf(stderr, "vipu: --ipuof-configs-dir: cannot write %s: %s\n", path,
                    strerror(errno));
            unlink(tmp);
            return EX_CANTCREAT;
        }
        printf("%s\n", path);
    }
    return 0;
}

/* A whole number option's value in lo..hi: 0 or EX_USAGE. */
static int
number(const char *opt, const char *v, unsigned lo, unsigned hi, unsigned *out)
{
    char *end;
    unsigned long x = strtoul(v, &end, 10);

    if (v[0] < '0' || v[0] > '9' || *end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "vipu: %s expects a whole number from %u to %u, not '%s'\n", opt, lo,
                hi, v);
        return EX_USAGE;
    }
    *out = (unsigned)x;
    return 0;
}

/* The verb's arguments after "VERB partition NAME": --size, --num-gcds, --reconfigurable,
 * --gcd, --ipuof-configs, --force (which ones a verb takes is in allowed). */
struct verb_args {
    unsigned size, num_gcds, gcd, num_ilds;
    int reconfigurable, ipuof_configs, force, have_size, have_gcds, have_gcd;
    const char *configs_dir;     /* --ipuof-configs-dir */
};

static int
parse_verb_args(int argc, char **argv, const char *allowed, struct verb_args *a)
{
    for (int i = 0; i < argc; i++) {
        const char *k = argv[i];
        char key[40];
        int rc = 0;

        snprintf(key, sizeof key, " %.36s ", k);
        if (strncmp(k, "--", 2) != 0 || strstr(allowed, key) == NULL)
            return usage_error("unexpected argument '%s' for this command", k);
        if (strcmp(k, "--reconfigurable") == 0)
            a->reconfigurable = 1;
        else if (strcmp(k, "--ipuof-configs") == 0)
            a->ipuof_configs = 1;
        else if (strcmp(k, "--force") == 0)
            a->force = 1;
        else if (i + 1 >= argc)
            return usage_error("%s needs a value", k);
        else if (strcmp(k, "--size") == 0)
            rc = number(k, argv[++i], 1, 1024, &a->size), a->have_size = 1;
        else if (strcmp(k, "--num-gcds") == 0)
            rc = number(k, argv[++i], 1, 1024, &a->num_gcds), a->have_gcds = 1;
        else if (strcmp(k, "--num-ilds") == 0)
            rc = number(k, argv[++i], 1, VIPU_POD_MAX, &a->num_ilds);
        else if (strcmp(k, "--gcd") == 0)
            rc = number(k, argv[++i], 0, 1023, &a->gcd), a->have_gcd = 1;
        else if (strcmp(k, "--ipuof-configs-dir") == 0)
            a->configs_dir = argv[++i];
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The exit status of a failed request rc on c, after "vipu: VERB partition NAME: ...". */
static int
failed(ipuof_client *c, int rc, const char *verb, const char *object, const char *name)
{
    char what[128];

    snprintf(what, sizeof what, "%s %s%s%.64s", verb, object, name ? " " : "", name ? name : "");
    return fail(c, rc, what);
}

/* list partitions | list allocations (allocations: 1): the allocation's agents are the
 * daemon and, in a Pod, the other hosts with the addresses their clients use. */
static int
do_list(const struct opts *o, const struct ipuctl_opts *co, ipuof_client *c, int allocations)
{
    static struct ipuof_vipu_partition ps[MAX_PARTS];
    static const char *const heads[] = {"Allocation ID", "Agent", "Address", "IPUs", "Free",
                                        "State", "Partitions"};
    static const int right[] = {0, 0, 0, 1, 1, 0, 1};
    struct vipu_pod pod;
    struct table t;
    size_t n = 0;
    unsigned nipus = 0;
    int rc = ipuof_vipu_list(c, ps, MAX_PARTS, &n, &nipus), ex;

    if (rc != IPUOF_OK)
        return failed(c, rc, "list", allocations ? "allocations" : "partitions", NULL);
    if (!allocations) {
        print_partitions(o, ps, n < MAX_PARTS ? n : MAX_PARTS);
        return EX_OK;
    }
    ex = vipu_pod_load(&pod, c, co);
    if (ex != 0)
        return ex;
    if (o->showjson) {
        printf("{\"allocations\":[{\"id\":\"ipuofd\",\"agents\":[");
        for (size_t i = 0; i < pod.n; i++) {
            const struct ipuof_vipu_agent *g = &pod.agent[i];
            printf("%s{\"id\":", i ? "," : "");
            json_string(stdout, i == 0 ? client_address(o) : g->address);
            printf(",\"name\":");
            json_string(stdout, g->name);
            printf(",\"ipus\":%u,\"reachable\":%s}", i == 0 ? nipus : g->num_ipus,
                   g->reachable ? "true" : "false");
        }
        printf("],\"partitions\":%zu}]}\n", n);
        return EX_OK;
    }
    table_init(&t, 7, heads, right);
    for (size_t i = 0; i < pod.n; i++) {
        const struct ipuof_vipu_agent *g = &pod.agent[i];
        char ipus[16], fr[16], np[16];
        const char *cells[7] = {i == 0 ? "ipuofd" : "", g->name[0] ? g->name : "-",
                                i == 0 ? client_address(o) : g->address[0] ? g->address : "?",
                                ipus, fr, i == 0 ? "self" : g->reachable ? "reachable"
                                                                           : "unreachable",
                                i == 0 ? np : ""};
        snprintf(ipus, sizeof ipus, "%u", i == 0 ? nipus : g->num_ipus);
        snprintf(fr, sizeof fr, "%u", g->free_ipus);
        if (i == 0 && g->name[0] == '\0')
            snprintf(fr, sizeof fr, "-");
        snprintf(np, sizeof np, "%zu", n);
        table_add_row(&t, cells);
    }
    table_print(&t, stdout);
    table_free(&t);
    return EX_OK;
}

/* create partition NAME --size N ...: on this daemon, or over --num-ilds daemons of its
 * Pod (by default as many as the size needs: each takes the largest power of two of IPUs
 * that this daemon has, up to the size). */
static int
do_create(const struct opts *o, const struct ipuctl_opts *co, ipuof_client *c,
          const char *name, const struct verb_args *a)
{
    struct ipuof_vipu_partition p;
    struct vipu_pod pod;
    unsigned ilds = a->num_ilds, own;
    int rc, ex;

    ex = vipu_pod_load(&pod, c, co);
    if (ex != 0)
        return ex;
    own = pod.agent[0].num_ipus;
    if (ilds == 0 && pod.n > 1 && a->size > own && own > 0) {
        unsigned share = 1;
        while (share * 2 <= own)
            share *= 2;
        ilds = a->size / share ? a->size / share : 1;
    }
    if (ilds > 1) {
        if (a->size % ilds != 0 || ((a->size / ilds) & (a->size / ilds - 1)) != 0) {
            fprintf(stderr, "vipu: create partition %s: --size %u over %u daemons: each gets "
                    "size / daemons IPUs, which must be a power of two\n", name, a->size, ilds);
            return EX_USAGE;
        }
        if (a->have_gcds && a->num_gcds != ilds) {
            fprintf(stderr, "vipu: create partition %s: --num-gcds %u over %u daemons: a "
                    "partition over daemons has one GCD per daemon; give --num-gcds %u or "
                    "leave it out\n", name, a->num_gcds, ilds, ilds);
            return EX_USAGE;
        }
        return vipu_pod_create(&pod, c, name, a->size, ilds, a->reconfigurable, o->showjson);
    }
    rc = ipuof_vipu_create(c, name, a->size, a->num_gcds, a->reconfigurable, &p);
    if (rc != IPUOF_OK)
        return failed(c, rc, "create", "partition", name);
    if (o->showjson) {
        print_partitions(o, &p, 1);
    } else {
        char ipus[32];
        if (p.size == 1)
            snprintf(ipus, sizeof ipus, "IPU %u", p.first_ipu);
        else
            snprintf(ipus, sizeof ipus, "IPUs %u-%u", p.first_ipu, p.first_ipu + p.size - 1);
        printf("create partition (%s): success. State: %s, %s, %u GCD%s.\n", name,
               state_name(p.state), ipus, p.num_gcds, p.num_gcds == 1 ? "" : "s");
    }
    return EX_OK;
}

/* print_ipuof_config for write_configs: arg is {opts, partition}. */
struct one_conf {
    const struct opts *o;
    const struct ipuof_vipu_partition *p;
};
static void
print_one(FILE *f, unsigned gcd, const void *arg)
{
    const struct one_conf *oc = arg;

    print_ipuof_config(f, oc->o, oc->p, gcd);
}

/* vipu_pod_print_config for write_configs: arg is {pod, shares, n}. */
struct pod_conf {
    const struct vipu_pod *pod;
    const struct vipu_share *sh;
    size_t n;
};
static void
print_pod(FILE *f, unsigned gcd, const void *arg)
{
    const struct pod_conf *pc = arg;

    vipu_pod_print_config(f, pc->pod, pc->sh, pc->n, gcd);
}

/* get partition NAME [--gcd N --ipuof-configs | --ipuof-configs-dir DIR]: a partition on
 * this daemon, or one whose shares are on several daemons of its Pod (one row each). */
static int
do_get(const struct opts *o, const struct ipuctl_opts *co, ipuof_client *c, const char *name,
       const struct verb_args *a)
{
    static struct vipu_share sh[VIPU_POD_MAX];
    struct ipuof_vipu_partition p, rows[VIPU_POD_MAX];
    struct vipu_pod pod;
    size_t n = 0;
    unsigned gcds;
    int rc = ipuof_vipu_get(c, name, &p), ex;

    if (rc != IPUOF_OK)
        return failed(c, rc, "get", "partition", name);
    ex = vipu_pod_load(&pod, c, co);
    if (ex != 0)
        return ex;
    if (pod.n > 1)
        vipu_pod_find(&pod, c, name, sh, &n);
    gcds = n > 1 ? (unsigned)n : p.num_gcds;
    if ((a->ipuof_configs || a->configs_dir != NULL) && a->gcd >= gcds) {
        fprintf(stderr, "vipu: get partition %s --gcd %u: the partition has %u GCD%s (0 to "
                "%u)\n", name, a->gcd, gcds, gcds == 1 ? "" : "s", gcds - 1);
        return EX_USAGE;
    }
    if (n > 1) { /* over daemons: GCD d is the d-th share */
        struct pod_conf pc = {&pod, sh, n};
        if (a->configs_dir != NULL)
            return write_configs(a->configs_dir, name, gcds, print_pod, &pc);
        if (a->ipuof_configs) {
            vipu_pod_print_config(stdout, &pod, sh, n, a->gcd);
            return EX_OK;
        }
        for (size_t k = 0; k < n; k++) {
            rows[k] = sh[k].p;
            snprintf(rows[k].name, sizeof rows[k].name, "%.30s@%.30s", name,
                     pod.agent[sh[k].agent].name);
        }
        print_partitions(o, rows, n);
        return EX_OK;
    }
    if (a->configs_dir != NULL) {
        struct one_conf oc = {o, &p};
        return write_configs(a->configs_dir, name, gcds, print_one, &oc);
    }
    if (a->ipuof_configs)
        print_ipuof_config(stdout, o, &p, a->gcd);
    else
        print_partitions(o, &p, 1);
    return EX_OK;
}

/* reset|remove partition NAME [--force]: on this daemon, and on every other daemon of its
 * Pod that holds a share of it. */
static int
do_reset_remove(const struct ipuctl_opts *co, ipuof_client *c, const char *verb,
                const char *name, int force)
{
    static struct vipu_share sh[VIPU_POD_MAX];
    struct vipu_pod pod;
    size_t n = 0;
    int remove = strcmp(verb, "remove") == 0, rc, ex;

    ex = vipu_pod_load(&pod, c, co);
    if (ex != 0)
        return ex;
    if (pod.n > 1)
        vipu_pod_find(&pod, c, name, sh, &n);
    if (n > 1) {
        if (remove && co->admin_token == NULL) {
            fprintf(stderr, "vipu: remove partition %s: its shares are on %zu daemons of the "
                    "Pod; removing them needs the admin token (--admin-token or "
                    "IPUOF_ADMIN_TOKEN): the admin socket reaches this host's daemon only\n",
                    name, n);
            return EX_NOPERM;
        }
        ex = vipu_pod_each(&pod, c, name, sh, n, remove, force);
        if (ex == 0)
            printf("%s partition (%s): success (%zu hosts of the Pod).\n", verb, name, n);
        return ex;
    }
    rc = remove ? ipuof_vipu_remove(c, name, force) : ipuof_vipu_reset(c, name, force);
    if (rc != IPUOF_OK)
        return failed(c, rc, verb, "partition", name);
    printf("%s partition (%s): success.\n", verb, name);
    return EX_OK;
}

/* Runs "VERB OBJECT [NAME] [ARGS]" (argv[0] is VERB). */
static int
run(const struct opts *o, int argc, char **argv)
{
    struct verb_args a = {.num_gcds = 1};
    const char *verb = argv[0], *object = argc > 1 ? argv[1] : "", *name = NULL;
    struct ipuctl_opts co;
    ipuof_client *c = NULL;
    int ex;

    if (strcmp(verb, "list") == 0) {
        if (strcmp(object, "partitions") != 0 && strcmp(object, "partition") != 0 &&
            strcmp(object, "allocations") != 0 && strcmp(object, "allocation") != 0)
            return usage_error("list what? 'list partitions' or 'list allocations', not '%s'",
                               object);
        if (argc > 2)
            return usage_error("unexpected argument '%s'", argv[2]);
    } else if (strcmp(verb, "create") == 0 || strcmp(verb, "get") == 0 ||
               strcmp(verb, "reset") == 0 || strcmp(verb, "remove") == 0) {
        const char *allowed = strcmp(verb, "create") == 0
                                  ? " --size --num-gcds --num-ilds --reconfigurable "
                              : strcmp(verb, "get") == 0 ? " --gcd --ipuof-configs --ipuof-configs-dir "
                                                         : " --force ";
        if (strcmp(object, "partition") != 0)
            return usage_error("'%s' works on a partition: VERB partition NAME", verb);
        if (argc < 3 || argv[2][0] == '-')
            return usage_error("%s partition needs the partition's name", verb);
        name = argv[2];
        ex = parse_verb_args(argc - 3, argv + 3, allowed, &a);
        if (ex != 0)
            return ex;
        if (strcmp(verb, "create") == 0 && !a.have_size)
            return usage_error("create partition %s needs --size N (a power of two)", name);
        if (a.configs_dir != NULL && (a.ipuof_configs || a.have_gcd))
            return usage_error("%s: --ipuof-configs-dir writes every GCD's file; give it without "
                               "--ipuof-configs and --gcd", "get partition");
    } else {
        return usage_error("unknown command '%s'; the commands are create, list, get, reset, "
                           "remove", verb);
    }
    ex = connect_daemon(o, &co, &c);
    if (ex != EX_OK)
        return ex;
    if (strcmp(verb, "list") == 0)
        ex = do_list(o, &co, c, object[1] == 'l');
    else if (strcmp(verb, "create") == 0)
        ex = do_create(o, &co, c, name, &a);
    else if (strcmp(verb, "get") == 0)
        ex = do_get(o, &co, c, name, &a);
    else
        ex = do_reset_remove(&co, c, verb, name, a.force);
    ipuof_client_free(c);
    return ex;
}

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: vipu [--api-host HOST] [--api-port PORT | --server HOST:PORT]\n"
            "            [--admin-socket PATH] [--admin-token T] [--showjson] [--timeout MS]\n"
            "            COMMAND\n\n"
            "commands:\n"
            "  create partition NAME --size N [--num-gcds G] [--num-ilds M] [--reconfigurable]\n"
            "                                                                      (admin)\n"
            "  list partitions\n"
            "  list allocations\n"
            "  get partition NAME [--gcd N --ipuof-configs | --ipuof-configs-dir DIR]\n"
            "  reset partition NAME [--force]\n"
            "  remove partition NAME [--force]                                     (admin)\n\n"
            "The V-IPU server is ipuofd (default: $IPUOF_SERVER, else 127.0.0.1:50052; never the\n"
            "IPUoF config files). --ipuof-configs writes GCD N's IPUoF config file (to keep in\n"
            "~/.ipuof.conf.d/NAME_gcdN.conf or name with IPUOF_CONFIG_PATH); it lists\n"
            "--server, else $IPUOF_SERVER, else 127.0.0.1:50052 as the partition's server;\n"
            "--ipuof-configs-dir writes every GCD's file there as NAME_gcdN.conf.\n\n"
            "In a Pod (the daemon has a [pod] section), --num-ilds M makes the partition over M\n"
            "of its daemons (size / M IPUs and one GCD on each; by default as many as the size\n"
            "needs), with the admin token; get, reset and remove then act on every daemon\n"
            "holding it, and list allocations shows the Pod's hosts and their addresses.\n\n"
            "exit status: 0 ok, 64 usage, 65 no such partition, 69 daemon unreachable, 70 other\n"
            "  failure, 75 in use / no room, 76 protocol, 77 not authorised\n");
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"api-host", required_argument, NULL, 'a'},
        {"api-port", required_argument, NULL, 'p'},
        {"server", required_argument, NULL, 's'},
        {"admin-socket", required_argument, NULL, 'S'},
        {"admin-token", required_argument, NULL, 'T'},
        {"showjson", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {.timeout_ms = -1};
    unsigned v;
    int ch;

    opterr = 0;
    while ((ch = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'a': o.api_host = optarg; break;
        case 'p':
            if (number("--api-port", optarg, 1, 65535, &v) != 0)
                return EX_USAGE;
            o.api_port = optarg;
            break;
        case 's': o.server = optarg; break;
        case 'S': o.admin_socket = optarg; break;
        case 'T': o.admin_token = optarg; break;
        case 'j': o.showjson = 1; break;
        case 'w':
            if (number("--timeout", optarg, 0, 86400000, &v) != 0)
                return EX_USAGE;
            o.timeout_ms = (int)v;
            break;
        case 'h': usage(stdout); return EX_OK;
        case 'V':
            printf("vipu (ipuofd %s, libipuof-client %s)\n", IPUOF_VERSION_STR, ipuof_version());
            return EX_OK;
        default:
            fprintf(stderr, "vipu: bad option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return EX_USAGE;
        }
    }
    if (o.api_host != NULL || o.api_port != NULL) {
        if (o.server != NULL) {
            fprintf(stderr, "vipu: give --api-host/--api-port or --server, not both\n");
            return EX_USAGE;
        }
        snprintf(o.api, sizeof o.api, "%s:%s", o.api_host ? o.api_host : "127.0.0.1",
                 o.api_port ? o.api_port : "50052");
        o.server = o.api;
    }
    if (o.admin_token == NULL) {
        o.admin_token = getenv("IPUOF_ADMIN_TOKEN");
        if (o.admin_token != NULL && o.admin_token[0] == '\0')
            o.admin_token = NULL;
    }
    if (optind >= argc) {
        fprintf(stderr, "vipu: no command given\n");
        usage(stderr);
        return EX_USAGE;
    }
    return run(&o, argc - optind, argv + optind);
}
