/*
 * poprun_part.c — see poprun_part.h.
 */
#include "poprun_part.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sysexits.h>

#include "ipuof/client.h"

void
poprun_part_init(struct poprun_part *p)
{
    memset(p, 0, sizeof *p);
    p->timeout_s = 120;
    p->reset = -1;
    p->remove = 1;
    p->num_gcds = 1;
}

int
poprun_part_set_name(struct poprun_part *p, const char *v)
{
    size_t n = strlen(v);

    if (n == 0 || n >= sizeof p->name) {
        fprintf(stderr, "poprun: --vipu-partition is %zu characters long; a partition name "
                "has 1 to %zu\n", n, sizeof p->name - 1);
        return -1;
    }
    for (const char *c = v; *c; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || *c == '.')) {
            fprintf(stderr, "poprun: --vipu-partition '%s' has the character '%c'; a partition "
                    "name has letters, digits, '-', '_' and '.'\n", v,
                    *c > ' ' && *c < 0x7f ? *c : '?');
            return -1;
        }
    }
    memcpy(p->name, v, n + 1);
    p->named = 1;
    return 0;
}

int
poprun_part_server(struct poprun_part *p)
{
    const char *s = getenv("IPUOF_SERVER");
    const char *colon;
    unsigned port = IPUOF_DEFAULT_PORT;

    snprintf(p->host_buf, sizeof p->host_buf, "localhost");
    if (s != NULL && s[0] != '\0' && strncmp(s, "unix:", 5) != 0) {
        if (s[0] == '[') { /* [v6]:port */
            const char *close = strchr(s, ']');
            if (close != NULL) {
                snprintf(p->host_buf, sizeof p->host_buf, "%.*s", (int)(close - s - 1), s + 1);
                if (close[1] == ':')
                    port = (unsigned)strtoul(close + 2, NULL, 10);
            }
        } else if ((colon = strrchr(s, ':')) != NULL && strchr(s, ':') == colon) {
            snprintf(p->host_buf, sizeof p->host_buf, "%.*s", (int)(colon - s), s);
            port = (unsigned)strtoul(colon + 1, NULL, 10);
        } else {
            snprintf(p->host_buf, sizeof p->host_buf, "%s", s);
        }
    }
    if (p->server_host == NULL)
        p->server_host = p->host_buf;
    if (p->server_port == 0)
        p->server_port = port;
    if (p->server_port == 0 || p->server_port > 65535 || p->server_host[0] == '\0') {
        fprintf(stderr, "poprun: IPUOF_SERVER is '%s'; give the V-IPU server with "
                "--vipu-server-host and --vipu-server-port\n", s ? s : "");
        return -1;
    }
    return 0;
}

/* A name for a partition poprun makes: "poprun-" and 8 random hex digits. */
static int
make_name(struct poprun_part *p)
{
    unsigned char b[4];

    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        fprintf(stderr, "poprun: cannot draw a partition name\n");
        return -1;
    }
    snprintf(p->name, sizeof p->name, "poprun-%02x%02x%02x%02x", b[0], b[1], b[2], b[3]);
    return 0;
}

/* A client connected to the V-IPU server (ipuofd), with the admin token of
 * IPUOF_ADMIN_TOKEN when set (creating and removing partitions need it). NULL after
 * printing why; *ex then holds poprun's exit status. */
static ipuof_client *
connect_server(const struct poprun_part *p, int *ex)
{
    ipuof_client *c = ipuof_client_new();
    const char *tok = getenv("IPUOF_ADMIN_TOKEN");
    char addr[300];
    int rc;

    if (c == NULL) {
        fprintf(stderr, "poprun: out of memory\n");
        *ex = EX_OSERR;
        return NULL;
    }
    if (strchr(p->server_host, ':') != NULL)
        snprintf(addr, sizeof addr, "[%.255s]:%u", p->server_host, p->server_port);
    else
        snprintf(addr, sizeof addr, "%.255s:%u", p->server_host, p->server_port);
    rc = ipuof_client_set_name(c, "poprun");
    if (rc == IPUOF_OK && tok != NULL && tok[0] != '\0')
        rc = ipuof_client_set_admin_token(c, tok);
    if (rc == IPUOF_OK)
        rc = ipuof_client_set_timeouts(c, 5000, (int)p->timeout_s * 1000);
    if (rc == IPUOF_OK)
        rc = ipuof_client_connect(c, addr);
    if (rc != IPUOF_OK) {
        if (p->pod_host)
            fprintf(stderr, "poprun: the ipuofd of Pod host %s (-H/--host, at the V-IPU server's "
                    "port %u, --vipu-server-port): %s\n", p->server_host, p->server_port,
                    ipuof_client_errmsg(c));
        else
            fprintf(stderr, "poprun: the V-IPU server (--vipu-server-host/--vipu-server-port): "
                    "%s\n", ipuof_client_errmsg(c));
        *ex = rc == IPUOF_E_IO || rc == IPUOF_E_TIMEOUT ? EX_UNAVAILABLE : 1;
        ipuof_client_free(c);
        return NULL;
    }
    return c;
}

/* Prints "poprun: WHAT: the server's sentence" (and how to get a partition without admin
 * rights when that was the refusal); returns poprun's exit status. */
static int
refused(ipuof_client *c, int rc, const char *what, const struct poprun_part *p, unsigned ipus)
{
    if (p->pod_host)
        fprintf(stderr, "poprun: %s (the ipuofd of Pod host %s): %s\n", what, p->server_host,
                ipuof_client_errmsg(c));
    else
        fprintf(stderr, "poprun: %s: %s\n", what, ipuof_client_errmsg(c));
    if (rc == IPUOF_E_AUTH)
        fprintf(stderr, "poprun: without admin rights, ask the operator for a partition (vipu "
                "create partition %s --size %u) and give it with --vipu-partition %s, or set "
                "IPUOF_ADMIN_TOKEN\n", p->name, ipus, p->name);
    return rc == IPUOF_E_IO || rc == IPUOF_E_CLOSED ? EX_UNAVAILABLE : 1;
}

int
poprun_part_prepare(struct poprun_part *p, unsigned ipus, unsigned num_instances, int verbose)
{
    struct ipuof_vipu_partition v;
    ipuof_client *c;
    char what[160];
    int ex = 0, rc, reset, recreated = 0;

    if (!p->named && make_name(p) < 0)
        return EX_SOFTWARE;
    c = connect_server(p, &ex);
    if (c == NULL)
        return ex;
    rc = p->named ? ipuof_vipu_get(c, p->name, &v) : IPUOF_E_NOTFOUND;
    if (rc == IPUOF_OK && v.size != ipus) {
        if (!p->update) {
            fprintf(stderr, "poprun: partition '%s' has %u IPUs but --num-replicas x "
                    "--ipus-per-replica is %u; give --update-partition yes to recreate it with "
                    "%u, or use another partition\n", p->name, v.size, ipus, ipus);
            ex = EX_USAGE;
            goto out;
        }
        snprintf(what, sizeof what, "--update-partition: remove partition %s", p->name);
        rc = ipuof_vipu_remove(c, p->name, 0);
        if (rc != IPUOF_OK) {
            ex = refused(c, rc, what, p, ipus);
            goto out;
        }
        if (verbose)
            fprintf(stderr, "poprun: removed partition '%s' (%u IPUs) to recreate it with %u\n",
                    p->name, v.size, ipus);
        rc = IPUOF_E_NOTFOUND;
        recreated = 1;
    }
    if (rc == IPUOF_E_NOTFOUND) {
        snprintf(what, sizeof what, "create partition %s --size %u", p->name, ipus);
        rc = ipuof_vipu_create(c, p->name, ipus, 1, 0, &v);
        if (rc != IPUOF_OK) {
            ex = refused(c, rc, what, p, ipus);
            goto out;
        }
        p->created = !recreated; /* an updated partition stays: it was the user's */
        if (verbose)
            fprintf(stderr, "poprun: created partition '%s' (%u IPUs)\n", p->name, ipus);
    } else if (rc != IPUOF_OK) {
        snprintf(what, sizeof what, "get partition %s", p->name);
        ex = refused(c, rc, what, p, ipus);
        goto out;
    }
    p->num_gcds = v.num_gcds ? v.num_gcds : 1;
    if (num_instances % p->num_gcds != 0) {
        fprintf(stderr, "poprun: partition '%s' has %u GCDs; --num-instances (%u) must be a "
                "multiple of them: each instance uses one GCD\n", p->name, p->num_gcds,
                num_instances);
        ex = EX_USAGE;
        goto out;
    }
    /* PopRun: non-reconfigurable partitions are reset by default, reconfigurable ones not. */
    reset = p->reset >= 0 ? p->reset : !v.reconfigurable;
    if (reset || v.state == IPUOF_VIPU_PS_FAILED) {
        if (!reset) {
            fprintf(stderr, "poprun: partition '%s' is PS_FAILED; give --reset-partition yes\n",
                    p->name);
            ex = 1;
            goto out;
        }
        snprintf(what, sizeof what, "reset partition %s", p->name);
        rc = ipuof_vipu_reset(c, p->name, 0);
        if (rc != IPUOF_OK) {
            ex = refused(c, rc, what, p, ipus);
            goto out;
        }
    }
    if (verbose)
        fprintf(stderr, "poprun: final state of %s: PS_ACTIVE (%u IPUs, %u GCD%s) on the V-IPU "
                "server %s:%u\n", p->name, ipus, p->num_gcds, p->num_gcds == 1 ? "" : "s",
                p->server_host, p->server_port);
out:
    ipuof_client_free(c);
    if (ex != 0 && p->created) {
        (void)poprun_part_finish(p, verbose); /* do not leave a partition made for nothing */
    }
    return ex;
}

unsigned
poprun_part_gcd(const struct poprun_part *p, unsigned instance, unsigned num_instances)
{
    if (p->num_gcds <= 1 || num_instances == 0)
        return 0;
    return instance * p->num_gcds / num_instances;
}

int
poprun_part_finish(struct poprun_part *p, int verbose)
{
    ipuof_client *c;
    int ex = 0, rc;

    if (!p->created || !p->remove)
        return 0;
    p->created = 0;
    c = connect_server(p, &ex);
    if (c == NULL)
        return ex;
    rc = ipuof_vipu_remove(c, p->name, 0);
    if (rc != IPUOF_OK)
        ex = refused(c, rc, "--remove-partition: remove partition", p, 0);
    else if (verbose)
        fprintf(stderr, "poprun: removed partition '%s'\n", p->name);
    ipuof_client_free(c);
    return ex;
}

int
poprun_part_pod_name(const struct poprun_part *p, const char *host, char *name, size_t len)
{
    struct poprun_part at = *p;
    ipuof_status_report *r = NULL;
    struct ipuof_pod_host h;
    ipuof_client *c;
    int ex = 0, rc;

    at.server_host = host;
    at.pod_host = strcmp(host, p->server_host) != 0;
    c = connect_server(&at, &ex);
    if (c == NULL)
        return ex;
    rc = ipuof_status(c, &r);
    if (rc != IPUOF_OK) {
        fprintf(stderr, "poprun: status of the ipuofd at %s:%u: %s\n", host, p->server_port,
                ipuof_client_errmsg(c));
        ex = 1;
    } else if (ipuof_status_report_pod_host_count(r) == 0 ||
               ipuof_status_report_pod_host(r, 0, &h) != IPUOF_OK) {
        ex = -1;
    } else if (snprintf(name, len, "%s", h.name) >= (int)len) {
        fprintf(stderr, "poprun: the ipuofd at %s:%u has a [pod] name longer than %zu bytes\n",
                host, p->server_port, len - 1);
        ex = EX_SOFTWARE;
    }
    ipuof_status_report_free(r);
    ipuof_client_free(c);
    return ex;
}
