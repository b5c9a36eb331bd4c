/*
 * poprun_part.h — poprun's partition: its name, the V-IPU server (ipuofd) it lives on, and
 * what poprun does with it before and after the run (PopRun's --vipu-partition,
 * --update-partition, --reset-partition, --remove-partition).
 */
#ifndef POPRUN_PART_H
#define POPRUN_PART_H

#include <stddef.h>

struct poprun_part {
    char name[64];              /* --vipu-partition, or one poprun makes up */
    int named;                  /* 1: given by --vipu-partition */
    const char *server_host;    /* --vipu-server-host (borrowed), NULL: the default */
    char host_buf[256];         /* the default host */
    unsigned server_port;       /* --vipu-server-port, 0: the default */
    unsigned timeout_s;         /* --vipu-server-timeout (120) */
    int update;                 /* --update-partition (0) */
    int reset;                  /* --reset-partition, -1: by the partition's kind */
    int remove;                 /* --remove-partition (1): only what poprun created */
    int created;                /* poprun created the partition for this run */
    unsigned num_gcds;          /* the partition's GCDs (1 until the server says) */
    int pod_host;               /* 1: server_host is a Pod host of -H (its ipuofd holds a
                                 * share), not the V-IPU server: messages name it so */
};

/* Defaults: no name, default server, timeout 120, update 0, reset -1, remove 1. */
void poprun_part_init(struct poprun_part *p);

/* --vipu-partition's value: 0, or -1 after printing why it is not a partition name. */
int poprun_part_set_name(struct poprun_part *p, const char *v);

/* Fills in the default server: IPUOF_SERVER's host and port when it names a TCP address,
 * else localhost and 50052. 0, or -1 after printing what is wrong. */
int poprun_part_server(struct poprun_part *p);

/*
 * Before the run (not in offline mode): makes up a name when none was given, and brings
 * the partition of ipus IPUs to PS_ACTIVE on the server as PopRun does (uses it, creates
 * it, recreates it with --update-partition, resets it). Returns 0 or poprun's exit status
 * after printing why (EX_UNAVAILABLE: server unreachable, EX_USAGE: the partition does not
 * fit the topology, 1: the server refused).
 */
int poprun_part_prepare(struct poprun_part *p, unsigned ipus, unsigned num_instances,
                        int verbose);

/* The GCD instance i of num_instances uses: the partition's GCDs divided evenly among
 * the instances in order (0 when it has one). */
unsigned poprun_part_gcd(const struct poprun_part *p, unsigned instance,
                         unsigned num_instances);

/* After the run: removes a partition poprun created, unless --remove-partition no. 0, or
 * an exit status after printing why. */
int poprun_part_finish(struct poprun_part *p, int verbose);

/* The [pod] name of the ipuofd at host (p's port, timeout and admin token), in name: 0,
 * -1 when that daemon has no [pod] section, or an exit status after printing why. */
int poprun_part_pod_name(const struct poprun_part *p, const char *host, char *name,
                         size_t len);

#endif
