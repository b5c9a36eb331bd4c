/*
 * ipuof-hello — the smallest complete libipuof-client program: connect, attach a
 * partition, show the devices, detach. It is also the example README.md points to.
 *
 *   ipuof-hello [--server HOST:PORT] [--ipus N] [--partition NAME] [--wait MS] [--hold MS]
 *
 * --wait queues for IPUs up to MS milliseconds when too few are free; --hold keeps the
 * partition MS milliseconds before detaching. Exit status: 0 on success, 75 when the IPUs
 * are busy, a --wait ran out or the partition was reset, 69 when the daemon cannot be
 * reached, 77 when it refuses us (token, socket permissions), 1 otherwise.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>

#include "ipuof/client.h"

/* Reports a failed call and returns the exit status. A timeout is the daemon being
 * unreachable (69) only while connecting; a --wait for IPUs that ran out is 75, as busy. */
static int
fail(ipuof_client *c, const char *what, int rc)
{
    int connecting = strcmp(what, "connect") == 0;

    fprintf(stderr, "ipuof-hello: %s: %s (%s)\n", what, ipuof_client_errmsg(c),
            ipuof_status_name(rc));
    ipuof_client_free(c);
    if (rc == IPUOF_E_IO || (connecting && rc == IPUOF_E_TIMEOUT))
        return EX_UNAVAILABLE;
    if (rc == IPUOF_E_BUSY || rc == IPUOF_E_DEVICE_RESET || rc == IPUOF_E_TIMEOUT)
        return EX_TEMPFAIL;
    if (rc == IPUOF_E_AUTH)
        return EX_NOPERM;
    return 1;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'}, {"ipus", required_argument, NULL, 'n'},
        {"partition", required_argument, NULL, 'p'}, {"wait", required_argument, NULL, 'w'},
        {"hold", required_argument, NULL, 'H'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct ipuof_attach_opts ao = {.num_ipus = 1};
    const char *server = NULL;
    unsigned ids[64];
    size_t nids = 0;
    long hold_ms = 0;
    ipuof_client *c;
    ipuof_status_report *rep;
    int opt, rc;

    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 's': server = optarg; break;
        case 'n': ao.num_ipus = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'p': ao.partition_name = optarg; break;
        case 'w': ao.wait = 1; ao.wait_timeout_ms = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'H': hold_ms = strtol(optarg, NULL, 10); break;
        case 'h':
            printf("usage: ipuof-hello [--server HOST:PORT] [--ipus N] [--partition NAME] "
                   "[--wait MS] [--hold MS]\n");
            return 0;
        default: return EX_USAGE;
        }
    }

    c = ipuof_client_new();
    if (c == NULL)
        return 1;
    ipuof_client_set_name(c, "ipuof-hello");
    rc = ipuof_client_connect(c, server);
    if (rc != IPUOF_OK)
        return fail(c, "connect", rc);
    rc = ipuof_attach(c, &ao, ids, 64, &nids);
    if (rc != IPUOF_OK)
        return fail(c, "attach", rc);
    printf("attached partition '%s':", ipuof_partition_name(c));
    for (size_t i = 0; i < nids; i++)
        printf(" IPU %u", ids[i]);
    printf("\n");

    rc = ipuof_status(c, &rep);
    if (rc != IPUOF_OK)
        return fail(c, "status", rc);
    for (size_t i = 0; i < ipuof_status_report_ipu_count(rep); i++) {
        struct ipuof_ipu_info in;
        ipuof_status_report_ipu(rep, i, &in);
        printf("  IPU %u  %-8s %-10s %s\n", in.id, ipuof_ipu_state_name(in.state),
               in.partition, in.held ? in.holder_name : "");
    }
    ipuof_status_report_free(rep);
    fflush(stdout);

    if (hold_ms > 0) {
        struct timespec ts = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    rc = ipuof_detach(c);
    if (rc != IPUOF_OK)
        return fail(c, "detach", rc);
    printf("detached\n");
    ipuof_client_free(c);
    return 0;
}
