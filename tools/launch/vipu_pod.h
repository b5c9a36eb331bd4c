/*
 * vipu_pod.h — vipu's partitions across the daemons of a Pod (docs/pod-tools.md): a
 * partition of N IPUs over M daemons is a V-IPU partition of N / M IPUs of the same name
 * on each (its shares), GCD d on the d-th of them in the order of their [pod] names. The
 * daemon vipu talks to tells where the others' clients reach them (ipuof_vipu_agents, from
 * the Pod's hellos); vipu connects to each with the same tokens.
 */
#ifndef VIPU_POD_H
#define VIPU_POD_H

#include <stddef.h>
#include <stdio.h>

#include "ipuctl.h"
#include "ipuof/client.h"

#define VIPU_POD_MAX 17 /* a daemon and its 16 peers (CFG_POD_MAX_PEERS) */

/* The agents of the allocation of the daemon vipu is connected to: its Pod's hosts, itself
 * first. n is 1 (itself, name "") when it is in no Pod. */
struct vipu_pod {
    struct ipuof_vipu_agent agent[VIPU_POD_MAX];
    size_t n;
    const struct ipuctl_opts *conn; /* how to reach the others (server replaced), borrowed */
};

/* One share of a partition: the host holding it and its V-IPU partition there. */
struct vipu_share {
    size_t agent;                   /* index into vipu_pod.agent */
    struct ipuof_vipu_partition p;
};

/* Fills pod from the daemon c is connected to. 0, or an exit status after saying why. */
int vipu_pod_load(struct vipu_pod *pod, ipuof_client *c, const struct ipuctl_opts *conn);

/*
 * The hosts of partition name across the Pod: each agent asked (c for the first), the ones
 * holding it written to sh (room for VIPU_POD_MAX) in the order of their [pod] names, the
 * count to *n. An unreachable host is reported on stderr and skipped. 0, or an exit status.
 */
int vipu_pod_find(struct vipu_pod *pod, ipuof_client *c, const char *name,
                  struct vipu_share *sh, size_t *n);

/*
 * Creates partition name of size IPUs over ilds daemons of the Pod (c's first, then the
 * other reachable hosts in [pod] name order), size / ilds IPUs and one GCD on each; on a
 * refusal by one, the shares made are removed again. Prints V-IPU's success line (or
 * json). 0, or an exit status after saying why.
 */
int vipu_pod_create(struct vipu_pod *pod, ipuof_client *c, const char *name, unsigned size,
                    unsigned ilds, int reconfigurable, int showjson);

/* Resets (remove 0) or removes (remove 1) every share sh[0..n), c for the first agent's.
 * 0, or the first failure's exit status (the others are still tried). */
int vipu_pod_each(struct vipu_pod *pod, ipuof_client *c, const char *name,
                  const struct vipu_share *sh, size_t n, int remove, int force);

/* GCD gcd's IPUoF config file of the partition of shares sh[0..n) (docs/pod-tools.md). */
void vipu_pod_print_config(FILE *f, const struct vipu_pod *pod, const struct vipu_share *sh,
                           size_t n, unsigned gcd);

#endif
