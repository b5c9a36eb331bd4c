/*
 * feed.h — the run side of a feed (feed.c; the contract is sim.h's "Transfers overlapped
 * with computing"): what an IPU thread's host-input and host-output steps call.
 */
#ifndef SIM_FEED_H
#define SIM_FEED_H

#include <stdbool.h>
#include <stdint.h>

struct sim_feed;
struct sim_err;

/* Host input of step k: returns 0 once the rows of step k are present, IPUOF_E_CLOSED
 * with err set when the feed was closed before they came, or IPUOF_E_CANCELLED when
 * cancelled(ud) says so (asked about every 10 ms while waiting). */
int sim_feed_wait_in(struct sim_feed *f, uint64_t k, bool (*cancelled)(void *ud), void *ud,
                     struct sim_err *err);

/* Host output of one stage of one replica for step k is done. */
void sim_feed_out_done(struct sim_feed *f, uint64_t k);

/* The run returned: output waiters wake. */
void sim_feed_end(struct sim_feed *f);

#endif /* SIM_FEED_H */
