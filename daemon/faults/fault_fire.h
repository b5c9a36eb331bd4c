/*
 * fault_fire.h — what an injected fault does when it fires (the table and its matching
 * are faults.c): the IPUs it hits go into error, the request that met it gets PopTorch's
 * error class and recovery action, or the client's connection is cut. fault_at.c (the one
 * entry from a program's path) fires and answers through it; a reset unparks
 * (fault_ipu_reset), the daemon's tick and the fault request sync the link faults.
 */
#ifndef IPUOFD_FAULT_FIRE_H
#define IPUOFD_FAULT_FIRE_H

#include <stddef.h>
#include <stdint.h>

#include "devices.h"
#include "faults.h"

struct conn;
struct srv;

/*
 * Fires f on partition IPUs first .. first + count - 1 named part: the IPUs it hits go
 * into error (dev_set_error, with the time; f remembers them for --rearm-on-reset), with
 * the sentence it makes (also written to msg[0..len)). Kinds that leave the IPUs alone
 * (tile-oom, stream-oom, fabric-disconnect) only write the sentence; daemon-kill does not
 * return (SIGKILL). The IPUs: the fault's own IPU, or the partition's first, for an IPU-level
 * error; the whole partition for link, partition and full resets and for an unrecoverable
 * error not aimed at one IPU.
 */
void fault_fire(struct srv *s, struct fault *f, unsigned first, unsigned count,
                const char *part, char *msg, size_t len);

/*
 * Answers c's request req_id as f (fired by fault_fire, whose sentence is msg) says: the
 * IPU's error (its class, recovery and reset), Poplar's out-of-memory error (tile-oom,
 * stream-oom: plain, the IPU is fine), the connection cut (fabric-disconnect), or no
 * answer yet (hang: until the IPU is reset; host-sync-timeout with a wait: after it), with
 * c's frames held meanwhile. Returns 1 when the request was left waiting so (the caller
 * must not release c's frames), else 0.
 */
int fault_answer(struct conn *c, uint64_t req_id, const struct fault *f, unsigned first,
                 unsigned count, const char *part, const char *msg);

/* IPU ipu was reset (its error cleared): requests left waiting on it are answered
 * (IPUOF_E_DEVICE_RESET), and a fault armed with --rearm-on-reset whose IPUs are all reset
 * now is armed again (faults_rearm; logged). */
void fault_ipu_reset(struct srv *s, unsigned ipu);

/* Frees every waiting request without answering (the daemon is stopping). */
void fault_park_free_all(struct srv *s);

/* Answers c's request req_id with IPU d's error (d in error; part its partition's name):
 * IPUOF_E_DEVICE_FAULT, its class and recovery, and the reset that clears it. */
void fault_send_ipu_error(struct conn *c, uint64_t req_id, const struct dev_ipu *d,
                          const char *part);

/* Loop thread: tells the Pod's hello thread the link faults armed now on the link to each
 * peer (pod_set_link), after the table changed and at each Pod tick (so a --duration ends
 * them there too). No-op outside a Pod. */
void fault_links_sync(struct srv *s);

#endif
