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

int
poprun_part_prepare(struct poprun_part *p, unsigned ipus, unsigned num_instances, int verbose)
{
    (void)ipus;
    (void)num_instances;
    if (!p->named && make_name(p) < 0)
        return EX_SOFTWARE;
    if (verbose)
        fprintf(stderr, "poprun: partition '%s' on the V-IPU server %s:%u\n", p->name,
                p->server_host, p->server_port);
    return 0;
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
    (void)p;
    (void)verbose;
    return 0;
}
