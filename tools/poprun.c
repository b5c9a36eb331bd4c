/*
 * poprun — Graphcore PopRun's launcher for ipuofd: PopRun's flags and checks, the topology
 * table, then Debian's mpirun (Open MPI) with one app context per instance carrying exactly
 * PopRun's -x variables (POPDIST_*, IPUOF_VIPU_API_*), plus IPUOF_JOB_KEY, the launch's
 * job key (docs/pod-tools.md).
 *
 *   poprun [options] PROGRAM [ARGS...]
 *
 * Options take "--name value" or "--name=value"; yes/no options also take true/false,
 * on/off and 1/0. The first word that is not an option (or everything after "--") is the
 * program. Exit status: the program's (mpirun's), or 64 for a bad command line or a check
 * that fails, 69 when the partition service (the V-IPU server's ipuofd, or a Pod host's)
 * cannot be reached, 70 when mpirun cannot be started, 1 when the partition service refuses.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <unistd.h>

#include "ipuof/client.h"
#include "poprun_part.h"

#define MAX_HOSTS 64
#define MAX_HOST_NAME 253     /* a DNS name's longest */
#define MAX_HOST_INDEX 999999 /* host[a-b]'s numbers */
#define MAX_INSTANCES 256
#define MAX_WORDS 128         /* words of --mpi-global-args, of --mpi-local-args */
#define MAX_PROGRAM_WORDS 4096 /* PROGRAM and its ARGS */
#define CTX_WORDS 40          /* poprun's own words of one app context (launch) */

static const char *prog = "poprun";

struct opts {
    unsigned num_instances, num_replicas, ipus_per_replica;
    char *hosts[MAX_HOSTS];       /* expanded -H, owned */
    unsigned nhosts;
    struct poprun_part part;      /* the partition and the V-IPU server (poprun_part.h) */
    struct poprun_part *pod;      /* a Pod: host h's share of the partition on its ipuofd */
    char pod_hosts[MAX_HOSTS * 64]; /* a Pod: the hosts' [pod] names in -H order */
    char *mpi_global, *mpi_local; /* borrowed from argv */
    int only_output;              /* -1: every instance's output */
    int print_topology, offline, verbose;
    char **program;               /* borrowed from argv, NULL-terminated */
};

/* Prints "poprun: SENTENCE" to stderr and returns EX_USAGE. */
__attribute__((format(printf, 1, 2))) static int
bad(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EX_USAGE;
}

/* A count option's value: 0 or EX_USAGE after saying what is wrong. */
static int
count(const char *opt, const char *v, unsigned min, unsigned max, unsigned *out)
{
    char *end;
    unsigned long x;

    errno = 0;
    x = strtoul(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || x < min || x > max)
        return bad("%s expects a whole number from %u to %u, not '%s'", opt, min, max, v);
    *out = (unsigned)x;
    return 0;
}

/* A yes/no option's value into *out: 0 or EX_USAGE. */
static int
yesno(const char *opt, const char *v, int *out)
{
    static const char *const yes[] = {"yes", "true", "on", "1"}, *const no[] = {"no", "false",
                                                                                 "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(v, yes[i]) == 0)
            return *out = 1, 0;
        if (strcmp(v, no[i]) == 0)
            return *out = 0, 0;
    }
    return bad("%s expects yes or no (true/false, on/off, 1/0), not '%s'", opt, v);
}

/* Appends host to o->hosts (copied): 0 or EX_USAGE. */
static int
add_host(struct opts *o, const char *host, size_t len)
{
    if (len == 0)
        return bad("-H/--host has an empty host name; give host0,host1 or host[0-2,4]");
    if (host[0] == '-')
        return bad("-H/--host: host name '%.*s' starts with '-'; a host name starts with a "
                   "letter or a digit (mpirun and ssh would take it for an option)",
                   (int)(len > 64 ? 64 : len), host);
    if (len > MAX_HOST_NAME)
        return bad("-H/--host: host name '%.40s...' has %zu characters; a host name has at "
                   "most %d", host, len, MAX_HOST_NAME);
    if (o->nhosts >= MAX_HOSTS)
        return bad("-H/--host names more than %d hosts", MAX_HOSTS);
    for (size_t i = 0; i < len; i++)
        if (host[i] <= ' ' || host[i] == ':' || host[i] == '\'' || host[i] == '"')
            return bad("-H/--host: bad character in host name '%.*s'", (int)len, host);
    for (unsigned i = 0; i < o->nhosts; i++)
        if (strlen(o->hosts[i]) == len && memcmp(o->hosts[i], host, len) == 0)
            return bad("-H/--host names host '%s' twice", o->hosts[i]);
    o->hosts[o->nhosts] = strndup(host, len);
    if (o->hosts[o->nhosts] == NULL)
        return bad("out of memory");
    o->nhosts++;
    return 0;
}

/* One number of -H's host[a-b] range at r (v is the whole value, for the error): 0 with
 * *x and *end after it, or EX_USAGE when there is no number or it is above MAX_HOST_INDEX. */
static int
index_of(const char *v, const char *r, char **end, unsigned long *x)
{
    size_t digits = 0;

    while (r[digits] >= '0' && r[digits] <= '9')
        digits++;
    if (digits == 0)
        return bad("-H/--host: expected a number in '%s'; write host[0-2,4]", v);
    errno = 0;
    *x = strtoul(r, end, 10);
    if (digits > 6 || errno != 0 || *x > MAX_HOST_INDEX)
        return bad("-H/--host: the number '%.*s' in '%s' is too large; host[a-b] numbers are "
                   "0 to %d", (int)(digits > 24 ? 24 : digits), r, v, MAX_HOST_INDEX);
    return 0;
}

/* Expands -H's value: "host0,host1" or "host[0-2,4]" (PopRun's syntax): 0 or EX_USAGE. */
static int
parse_hosts(struct opts *o, const char *v)
{
    const char *p = v;

    while (*p) {
        const char *comma = strchr(p, ','), *br = strchr(p, '[');
        if (br != NULL && (comma == NULL || br < comma)) {
            const char *close = strchr(br, ']');
            char prefix[256];
            const char *r = br + 1;
            if (close == NULL)
                return bad("-H/--host: '[' without ']' in '%s'", v);
            if ((size_t)(br - p) >= sizeof prefix)
                return bad("-H/--host: host name too long in '%s'", v);
            memcpy(prefix, p, (size_t)(br - p));
            prefix[br - p] = '\0';
            while (r < close) {
                char *end;
                unsigned long a, b;
                if (index_of(v, r, &end, &a) != 0)
                    return EX_USAGE;
                b = a;
                if (*end == '-') {
                    if (index_of(v, end + 1, &end, &b) != 0)
                        return EX_USAGE;
                    if (b < a)
                        return bad("-H/--host: bad range in '%s'; write host[0-2,4]", v);
                }
                if (*end != ',' && end != close)
                    return bad("-H/--host: unexpected '%c' in '%s'", *end, v);
                if (b - a >= MAX_HOSTS || o->nhosts + (b - a) >= MAX_HOSTS)
                    return bad("-H/--host names more than %d hosts ('%s' names %lu)", MAX_HOSTS,
                               v, o->nhosts + (b - a) + 1);
                for (unsigned long k = a; k <= b; k++) { /* b <= MAX_HOST_INDEX: no wrap */
                    char name[300];
                    int n = snprintf(name, sizeof name, "%s%lu", prefix, k);
                    int rc = add_host(o, name, (size_t)n);
                    if (rc != 0)
                        return rc;
                }
                r = *end == ',' ? end + 1 : end;
            }
            p = close + 1;
            if (*p == ',')
                p++;
            else if (*p != '\0')
                return bad("-H/--host: unexpected text after ']' in '%s'", v);
            continue;
        }
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int rc = add_host(o, p, len);
        if (rc != 0)
            return rc;
        p += len;
        if (*p == ',')
            p++;
    }
    return o->nhosts ? 0 : bad("-H/--host is empty; give host0,host1 or host[0-2,4]");
}

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: poprun [options] PROGRAM [ARGS...]\n\n"
            "  -H, --host LIST              hosts for the instances: host0,host1 or host[0-2,4]\n"
            "                               (default: localhost); instances divide evenly\n"
            "  --num-instances N            instances (host processes) (default 1)\n"
            "  --num-replicas N             replicas of all instances (default 1)\n"
            "  --ipus-per-replica N         IPUs per replica (default 1)\n"
            "  --vipu-partition NAME        use (or create) this partition\n"
            "  --vipu-server-host HOST      the V-IPU server: ipuofd (default: the host of\n"
            "                               $IPUOF_SERVER, else localhost)\n"
            "  --vipu-server-port PORT      (default: the port of $IPUOF_SERVER, else 50052)\n"
            "  --vipu-server-timeout S      seconds for its requests (default 120)\n"
            "  --update-partition yes|no    recreate the partition if it has the wrong size\n"
            "                               (default no)\n"
            "  --reset-partition yes|no     reset it before the run (default: yes for a\n"
            "                               non-reconfigurable partition, no otherwise)\n"
            "  --remove-partition yes|no    remove a partition poprun created (default yes)\n"
            "  --mpi-global-args 'ARGS'     options for mpirun itself\n"
            "  --mpi-local-args 'ARGS'      options for every instance's app context\n"
            "  --only-output-from-instance I  suppress the other instances' output\n"
            "  --print-topology yes|no      print the topology table (default no)\n"
            "  --offline-mode yes|no        contact no V-IPU server (default no)\n"
            "  -v, --verbose                print the mpirun command\n"
            "  -h, --help, --version\n\n"
            "exit status: the program's; 64 bad options or a failed check, 69 the V-IPU\n"
            "server (ipuofd) or a Pod host's ipuofd unreachable, 70 mpirun could not be\n"
            "started, 1 the V-IPU server refused\n");
}

/* Parses argv into o: 0, EX_USAGE, or -1 for --help/--version (printed; exit 0). */
static int
parse(int argc, char **argv, struct opts *o)
{
    int i;

    for (i = 1; i < argc; i++) {
        char *a = argv[i], *v = NULL, name[64];
        char *eq;
        int rc = 0;

        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return -1;
        }
        if (strcmp(a, "--version") == 0) {
            printf("poprun (ipuofd %s, libipuof-client %s)\n", IPUOF_VERSION_STR,
                   ipuof_version());
            return -1;
        }
        if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            o->verbose = 1;
            continue;
        }
        eq = strchr(a, '=');
        if (strlen(a) >= sizeof name)
            return bad("unknown option '%.40s...'; see poprun --help", a);
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        if (strcmp(name, "-H") == 0)
            snprintf(name, sizeof name, "--host");
        if (eq != NULL) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            return bad("%s needs a value; see poprun --help", name);
        }
        if (strcmp(name, "--num-instances") == 0)
            rc = count(name, v, 1, MAX_INSTANCES, &o->num_instances);
        else if (strcmp(name, "--num-replicas") == 0)
            rc = count(name, v, 1, 1u << 16, &o->num_replicas);
        else if (strcmp(name, "--ipus-per-replica") == 0)
            rc = count(name, v, 1, 1u << 16, &o->ipus_per_replica);
        else if (strcmp(name, "--host") == 0)
            rc = o->nhosts ? bad("-H/--host given twice; give one list") : parse_hosts(o, v);
        else if (strcmp(name, "--vipu-partition") == 0)
            rc = poprun_part_set_name(&o->part, v) < 0 ? EX_USAGE : 0;
        else if (strcmp(name, "--vipu-server-host") == 0)
            o->part.server_host = v;
        else if (strcmp(name, "--vipu-server-port") == 0)
            rc = count(name, v, 1, 65535, &o->part.server_port);
        else if (strcmp(name, "--vipu-server-timeout") == 0)
            rc = count(name, v, 1, 86400, &o->part.timeout_s);
        else if (strcmp(name, "--update-partition") == 0)
            rc = yesno(name, v, &o->part.update);
        else if (strcmp(name, "--reset-partition") == 0)
            rc = yesno(name, v, &o->part.reset);
        else if (strcmp(name, "--remove-partition") == 0)
            rc = yesno(name, v, &o->part.remove);
        else if (strcmp(name, "--mpi-global-args") == 0)
            o->mpi_global = v;
        else if (strcmp(name, "--mpi-local-args") == 0)
            o->mpi_local = v;
        else if (strcmp(name, "--only-output-from-instance") == 0) {
            unsigned x;
            rc = count(name, v, 0, MAX_INSTANCES - 1, &x);
            o->only_output = (int)x;
        } else if (strcmp(name, "--print-topology") == 0)
            rc = yesno(name, v, &o->print_topology);
        else if (strcmp(name, "--offline-mode") == 0)
            rc = yesno(name, v, &o->offline);
        else
            return bad("unknown option '%s'; see poprun --help", name);
        if (rc != 0)
            return rc;
    }
    if (i >= argc)
        return bad("no program to launch; usage: poprun [options] PROGRAM [ARGS...]");
    o->program = argv + i;
    return 0;
}

/* PopRun's checks of the topology: 0 or EX_USAGE with PopRun's sentence. */
static int
check(struct opts *o)
{
    /* Both are at most 65536: their product needs 64 bits (65536 x 65536 is 0 in 32). */
    unsigned long long ipus = (unsigned long long)o->num_replicas * o->ipus_per_replica;

    if (o->nhosts == 0 && add_host(o, "localhost", 9) != 0)
        return EX_USAGE;
    if (o->num_replicas % o->num_instances != 0)
        return bad("--num-replicas must be divisible by --num-instances (--num-replicas %u, "
                   "--num-instances %u): every instance drives the same number of replicas",
                   o->num_replicas, o->num_instances);
    if (o->num_instances % o->nhosts != 0)
        return bad("--num-instances must be divisible by the number of hosts (--num-instances "
                   "%u, %u host%s in -H/--host): the instances are divided evenly among the "
                   "hosts", o->num_instances, o->nhosts, o->nhosts == 1 ? "" : "s");
    if (ipus == 0 || (ipus & (ipus - 1)) != 0 || ipus > 1024)
        return bad("--num-replicas x --ipus-per-replica must be a power of two of at most 1024 "
                   "(%u x %u = %llu): a V-IPU partition is a power of two IPUs", o->num_replicas,
                   o->ipus_per_replica, ipus);
    if (o->only_output >= 0 && (unsigned)o->only_output >= o->num_instances)
        return bad("--only-output-from-instance must be less than --num-instances "
                   "(--only-output-from-instance %d, --num-instances %u)", o->only_output,
                   o->num_instances);
    if (o->offline && o->part.name[0] != '\0')
        return bad("--offline-mode and --vipu-partition exclude each other: offline mode "
                   "contacts no V-IPU server and attaches no partition");
    return 0;
}

/* Prints one row of the topology table: label, then ncells cells of span columns each
 * (a column is w wide, columns are separated by '|'), each cell's text centred. */
static void
row(const char *label, unsigned ncells, unsigned span, unsigned w, const char *const *cells)
{
    printf("| %-9s |", label);
    for (unsigned k = 0; k < ncells; k++) {
        char cell[32];
        unsigned width = span * w + (span - 1), len, left;

        if (cells != NULL)
            snprintf(cell, sizeof cell, "%.31s", cells[k]);
        else
            snprintf(cell, sizeof cell, "%u", k);
        len = (unsigned)strlen(cell);
        if (len > width)
            len = width;
        left = (width - len) / 2;
        printf("%*s%.*s%*s|", (int)left, "", (int)len, cell, (int)(width - len - left), "");
    }
    putchar('\n');
}

/* Prints c n times. */
static void
rule(char c, unsigned n)
{
    while (n-- > 0)
        putchar(c);
}

/* PopRun's topology table: the hosts, the IPU-Link domains (one: one daemon), the instances
 * and the replicas, each spanning the replicas it holds. */
static void
print_topology(const struct opts *o)
{
    unsigned r = o->num_replicas, w = 3, inner;
    const char *ild = "0";

    /* Wide enough for every host name over its replicas. */
    for (unsigned h = 0; h < o->nhosts; h++) {
        unsigned per = r / o->nhosts, need = (unsigned)strlen(o->hosts[h]) + 2;
        while (per * w + per - 1 < need)
            w++;
    }
    while (r * w + r - 1 < 17)
        w++;
    inner = r * w + (r - 1);
    putchar(' ');
    rule('=', inner + 12);
    printf("\n|%*s%*s|\n", (int)(inner + 12 + 15) / 2, "poprun topology",
           (int)(inner + 12 - (inner + 12 + 15) / 2), "");
    putchar('|');
    rule('=', inner + 12);
    printf("|\n");
    row("hosts", o->nhosts, r / o->nhosts, w, (const char *const *)o->hosts);
    printf("|-----------|");
    rule('-', inner);
    printf("|\n");
    row("ILDs", 1, r, w, &ild);
    printf("|-----------|");
    rule('-', inner);
    printf("|\n");
    row("instances", o->num_instances, r / o->num_instances, w, NULL);
    printf("|-----------|");
    rule('-', inner);
    printf("|\n");
    row("replicas", r, 1, w, NULL);
    putchar(' ');
    rule('-', inner + 12);
    putchar('\n');
    fflush(stdout);
}

/* Splits s at whitespace (single and double quotes group, backslash escapes) into at most
 * max words appended to argv at *n (the caller has room for max more), copied into buf
 * (room for strlen(s) + 1 per call, owned by the caller). 0 or EX_USAGE. */
static int
split_words(const char *opt, const char *s, char **argv, size_t *n, size_t max, char *buf)
{
    char quote = 0;
    int in_word = 0;
    size_t start = *n;

    for (const char *p = s;; p++) {
        if (*p == '\0' || (!quote && (*p == ' ' || *p == '\t' || *p == '\n'))) {
            if (quote && *p == '\0')
                return bad("%s has an unclosed %c quote: '%s'", opt, quote, s);
            if (in_word) {
                *buf++ = '\0';
                in_word = 0;
            }
            if (*p == '\0')
                return 0;
            continue;
        }
        if (!in_word) {
            if (*n - start >= max)
                return bad("%s has more than %zu words; give at most %zu", opt, max, max);
            argv[(*n)++] = buf;
            in_word = 1;
        }
        if (!quote && (*p == '\'' || *p == '"')) {
            quote = *p;
        } else if (quote && *p == quote) {
            quote = 0;
        } else if (*p == '\\' && quote != '\'' && p[1] != '\0') {
            *buf++ = *++p;
        } else {
            *buf++ = *p;
        }
    }
}

static pid_t child = -1;

static void
forward(int sig)
{
    if (child > 0)
        kill(child, sig);
}

/* Runs mpirun with argv (NULL-terminated), forwarding SIGTERM and SIGHUP to it; returns its
 * exit status (128 + the signal that ended it), or EX_SOFTWARE after saying why it did not
 * start. */
static int
run_mpirun(char **argv)
{
    int status;

    fflush(NULL);
    child = fork();
    if (child < 0) {
        fprintf(stderr, "%s: cannot fork mpirun: %s\n", prog, strerror(errno));
        return EX_SOFTWARE;
    }
    if (child == 0) {
        execvp("mpirun", argv);
        fprintf(stderr, "%s: cannot run mpirun: %s (Debian package openmpi-bin)\n", prog,
                strerror(errno));
        _exit(EX_SOFTWARE);
    }
    signal(SIGTERM, forward);
    signal(SIGHUP, forward);
    signal(SIGINT, SIG_IGN); /* the terminal's ^C reaches mpirun too */
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A fresh job key: 32 hex digits from getrandom. 0, or -1 when there is no randomness. */
static int
job_key(char *out)
{
    unsigned char b[16];

    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
        return -1;
    for (size_t i = 0; i < sizeof b; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
    return 0;
}

/* Appends instance i's "-x VAR=VALUE" words (PopRun's variables, the job key's name) to
 * argv at n, their text written at *vp (advanced; room for the caller's budget of one
 * instance). gcd is its GCD on one daemon. Returns the new word count. */
static size_t
instance_vars(const struct opts *o, unsigned i, unsigned per_host, unsigned local, unsigned gcd,
              char **argv, size_t n, char **vp)
{
    unsigned host = i / per_host;
    char port[16];

#define XVAR(...)                                                                          \
    do {                                                                                   \
        argv[n++] = (char *)"-x";                                                          \
        argv[n++] = *vp;                                                                   \
        *vp += sprintf(*vp, __VA_ARGS__) + 1;                                              \
    } while (0)
    XVAR("POPDIST_NUM_TOTAL_REPLICAS=%u", o->num_replicas);
    XVAR("POPDIST_NUM_IPUS_PER_REPLICA=%u", o->ipus_per_replica);
    XVAR("POPDIST_NUM_LOCAL_REPLICAS=%u", local);
    XVAR("POPDIST_UNIFORM_REPLICAS_PER_INSTANCE=1");
    XVAR("POPDIST_REPLICA_INDEX_OFFSET=%u", i * local);
    XVAR("POPDIST_LOCAL_INSTANCE_INDEX=%u", i % per_host);
    if (o->pod != NULL) { /* instance i attaches to its host's daemon, GCD 0 of its share */
        gcd = poprun_part_gcd(&o->pod[host], i % per_host, per_host);
        XVAR("IPUOF_POD_HOSTS=%s", o->pod_hosts);
    }
    if (!o->offline) {
        snprintf(port, sizeof port, "%u", o->part.server_port);
        XVAR("IPUOF_VIPU_API_HOST=%.255s",
             o->pod != NULL ? o->hosts[host] : o->part.server_host);
        XVAR("IPUOF_VIPU_API_PORT=%s", port);
        XVAR("IPUOF_VIPU_API_PARTITION_ID=%s", o->part.name);
        XVAR("IPUOF_VIPU_API_TIMEOUT=%u", o->part.timeout_s);
        XVAR("IPUOF_VIPU_API_GCD_ID=%u", gcd);
    }
    XVAR("IPUOF_LOG_LEVEL=WARN");
#undef XVAR
    argv[n++] = (char *)"-x";
    argv[n++] = (char *)"IPUOF_JOB_KEY";
    return n;
}

/* Builds mpirun's command line and runs it; returns poprun's exit status. */
static int
launch(struct opts *o)
{
    size_t nprog = 0, ctx, cap, n = 0;
    char **argv = NULL;
    char *wbuf = malloc(strlen(o->mpi_global ? o->mpi_global : "") + 1 +
                        (strlen(o->mpi_local ? o->mpi_local : "") + 1) * o->num_instances);
    char *vars = malloc((size_t)o->num_instances * (12 * 96 + sizeof o->pod_hosts + 300) +
                        4096), *vp = vars;
    char *wp = wbuf, key[40], hostlist[MAX_HOSTS * 300], slots[MAX_HOSTS][300];
    unsigned per_host = o->num_instances / o->nhosts, local = o->num_replicas / o->num_instances;
    size_t used = 0;
    int ex = EX_SOFTWARE, root = geteuid() == 0, has_root_flag = 0;

    while (o->program[nprog] != NULL)
        nprog++;
    if (nprog > MAX_PROGRAM_WORDS) {
        ex = bad("the program has %zu words with its arguments; poprun passes at most %d",
                 nprog, MAX_PROGRAM_WORDS);
        goto out;
    }
    /* Room for every word: mpirun's own (8 with -H and --allow-run-as-root), then per app
     * context poprun's (CTX_WORDS), --mpi-local-args' and the program's, and the NULL. */
    ctx = CTX_WORDS + MAX_WORDS + nprog;
    cap = 8 + MAX_WORDS + (size_t)o->num_instances * ctx + 1;
    argv = calloc(cap, sizeof *argv);
    if (argv == NULL || wbuf == NULL || vars == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto out;
    }
    if (job_key(key) < 0) {
        fprintf(stderr, "%s: cannot draw a job key: %s\n", prog, strerror(errno));
        goto out;
    }
    /* Variables every instance inherits: the job key (kept off the command line, so ps
     * does not show it); the user's own process id, partition and config file would
     * override what poprun sets, so they are dropped. */
    setenv("IPUOF_JOB_KEY", key, 1);
    unsetenv("IPUOF_PROCESS_ID");
    unsetenv("IPUOF_NUM_PROCESSES");
    unsetenv("IPUOF_PARTITION");
    if (!o->offline)
        unsetenv("IPUOF_CONFIG_PATH");
    /* "host:slots": as many slots on each host as it runs instances, so Open MPI places
     * them whatever the host's core count. */
    for (unsigned h = 0; h < o->nhosts; h++) {
        snprintf(slots[h], sizeof slots[h], "%s:%u", o->hosts[h], per_host);
        used += (size_t)snprintf(hostlist + used, sizeof hostlist - used, "%s%s",
                                 h ? "," : "", slots[h]);
    }
    argv[n++] = (char *)"mpirun";
    argv[n++] = (char *)"--tag-output";
    argv[n++] = (char *)"--bind-to";
    argv[n++] = (char *)"none";
    if (o->mpi_global != NULL) {
        size_t before = n;
        if (split_words("--mpi-global-args", o->mpi_global, argv, &n, MAX_WORDS, wp) != 0) {
            ex = EX_USAGE;
            goto out;
        }
        for (size_t k = before; k < n; k++)
            has_root_flag |= strcmp(argv[k], "--allow-run-as-root") == 0;
        wp += strlen(o->mpi_global) + 1;
    }
    /* Debian's mpirun refuses root without this; PopRun's users pass it in
     * --mpi-global-args, poprun adds it for them. */
    if (root && !has_root_flag)
        argv[n++] = (char *)"--allow-run-as-root";
    argv[n++] = (char *)"-H";
    argv[n++] = hostlist;
    for (unsigned i = 0; i < o->num_instances; i++) {
        unsigned host = i / per_host, gcd = poprun_part_gcd(&o->part, i, o->num_instances);
        if (n + ctx >= cap) { /* cannot happen: cap counts every word */
            ex = bad("internal error: mpirun's command line outgrew its %zu words", cap);
            goto out;
        }
        if (i > 0)
            argv[n++] = (char *)":";
        argv[n++] = (char *)"-np";
        argv[n++] = (char *)"1";
        argv[n++] = (char *)"-host";
        argv[n++] = slots[host];
        if (o->mpi_local != NULL) {
            if (split_words("--mpi-local-args", o->mpi_local, argv, &n, MAX_WORDS, wp) != 0) {
                ex = EX_USAGE;
                goto out;
            }
            wp += strlen(o->mpi_local) + 1;
        }
        n = instance_vars(o, i, per_host, local, gcd, argv, n, &vp);
        if (o->only_output >= 0 && (unsigned)o->only_output != i) {
            argv[n++] = (char *)"sh";
            argv[n++] = (char *)"-c";
            argv[n++] = (char *)"exec \"$@\" >/dev/null 2>&1";
            argv[n++] = (char *)"sh";
        }
        for (char **p = o->program; *p != NULL; p++)
            argv[n++] = *p;
    }
    argv[n] = NULL;
    if (o->verbose) {
        fprintf(stderr, "%s:", prog);
        for (size_t k = 0; k < n; k++)
            fprintf(stderr, " %s", argv[k]);
        fputc('\n', stderr);
    }
    ex = run_mpirun(argv);
out:
    free(argv);
    free(wbuf);
    free(vars);
    return ex;
}

/*
 * A Pod: when -H names several hosts, the V-IPU server's ipuofd has a [pod] section, and
 * so has the ipuofd on each host (at the V-IPU server's port), the partition spans the
 * hosts' daemons. Each daemon gets its share
 * of it, a V-IPU partition of the same name (made, checked or reset as PopRun does, by
 * poprun_part_prepare), and every instance gets IPUOF_POD_HOSTS (the daemons' [pod] names
 * in -H order) with its own host's daemon as IPUOF_VIPU_API_HOST, so that instance i is
 * on the daemon that holds its replicas. 0 (o->pod NULL when not a Pod), or an exit
 * status after printing why.
 */
static int
pod_prepare(struct opts *o)
{
    unsigned ipus = o->num_replicas * o->ipus_per_replica, pods = 0;
    size_t used = 0;
    char name[64];
    int ex;

    if (o->offline || o->nhosts < 2)
        return 0;
    ex = poprun_part_pod_name(&o->part, o->part.server_host, name, sizeof name);
    if (ex != 0)
        return ex < 0 ? 0 : ex; /* the V-IPU server's daemon is in no Pod: it serves all */
    for (unsigned h = 0; h < o->nhosts; h++) {
        ex = poprun_part_pod_name(&o->part, o->hosts[h], name, sizeof name);
        if (ex > 0)
            return ex;
        if (ex == 0) {
            pods++;
            used += (size_t)snprintf(o->pod_hosts + used, sizeof o->pod_hosts - used, "%s%s",
                                     h ? "," : "", name);
        }
    }
    if (pods == 0)
        return 0; /* one daemon (the V-IPU server's) for every host, as before */
    if (pods != o->nhosts)
        return bad("the V-IPU server's ipuofd is in a Pod but the ipuofd of only %u of the "
                   "%u hosts in -H/--host has a [pod] section: a partition spans the daemons "
                   "of a Pod when every host's has one", pods, o->nhosts);
    if (ipus % o->nhosts != 0 || ipus / o->nhosts < o->ipus_per_replica)
        return bad("--num-replicas x --ipus-per-replica (%u) must give every host of the Pod "
                   "whole replicas (%u hosts in -H/--host)", ipus, o->nhosts);
    o->pod = calloc(o->nhosts, sizeof *o->pod);
    if (o->pod == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return EX_OSERR;
    }
    for (unsigned h = 0; h < o->nhosts; h++) {
        o->pod[h] = o->part;
        o->pod[h].server_host = o->hosts[h];
        o->pod[h].pod_host = 1;
        if (h > 0) { /* the name host 0's daemon has (given or made up) */
            memcpy(o->pod[h].name, o->pod[0].name, sizeof o->pod[h].name);
            o->pod[h].named = 1;
        }
        ex = poprun_part_prepare(&o->pod[h], ipus / o->nhosts,
                                 o->num_instances / o->nhosts, o->verbose);
        if (ex != 0) {
            while (h-- > 0)
                (void)poprun_part_finish(&o->pod[h], o->verbose);
            return ex;
        }
    }
    o->part = o->pod[0]; /* the name the instances get */
    o->part.created = 0; /* each host's share is removed through o->pod */
    if (o->verbose)
        fprintf(stderr, "%s: a Pod of %u daemons (%s), %u IPUs on each\n", prog, o->nhosts,
                o->pod_hosts, ipus / o->nhosts);
    return 0;
}

int
main(int argc, char **argv)
{
    struct opts o = {.num_instances = 1, .num_replicas = 1, .ipus_per_replica = 1,
                     .only_output = -1};
    int ex, fin;

    poprun_part_init(&o.part);
    ex = parse(argc, argv, &o);
    if (ex == 0)
        ex = check(&o);
    if (ex == 0 && poprun_part_server(&o.part) < 0)
        ex = EX_USAGE;
    if (ex == 0)
        ex = pod_prepare(&o);
    if (ex == 0 && !o.offline && o.pod == NULL)
        ex = poprun_part_prepare(&o.part, o.num_replicas * o.ipus_per_replica,
                                 o.num_instances, o.verbose);
    if (ex == 0 && o.print_topology)
        print_topology(&o);
    if (ex == 0) {
        ex = launch(&o);
        fin = o.offline ? 0 : poprun_part_finish(&o.part, o.verbose);
        for (unsigned h = 0; o.pod != NULL && h < o.nhosts; h++) {
            int f = poprun_part_finish(&o.pod[h], o.verbose);
            fin = fin ? fin : f;
        }
        if (ex == 0)
            ex = fin;
    }
    free(o.pod);
    for (unsigned h = 0; h < o.nhosts; h++)
        free(o.hosts[h]);
    return ex < 0 ? EX_OK : ex;
}
