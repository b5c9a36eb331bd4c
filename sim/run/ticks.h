/*
 * ticks.h — the exchanges between the IPU threads of one run (ticks.c): each transfer of a
 * replica (struct sim_xfer) counts the micro-batches sent and received in each direction,
 * and a thread waits only for the count its next step needs (its input arrived, or the
 * exchange buffer it writes was read), woken by the one thread that moved that count.
 * Knows nothing of what is copied (ipus.c copies; the count picks the buffer).
 */
#ifndef SIM_TICKS_H
#define SIM_TICKS_H

#include <stdbool.h>
#include <stdint.h>

/* The four counts of a transfer: activations sent (by its src IPU) and received (by dst),
 * gradients sent (by dst) and received (by src). */
enum sim_tick_count { SIM_TK_SENT, SIM_TK_RECVD, SIM_TK_GSENT, SIM_TK_GRECVD, SIM_TK_N };

struct sim_ticks;

/* The counts of n_xfer transfers for R replicas of ipr IPUs (threads u = r x ipr + p),
 * all zero; NULL when out of memory. */
struct sim_ticks *sim_ticks_new(unsigned R, unsigned ipr, int n_xfer);
void sim_ticks_free(struct sim_ticks *t);

/* Count c of transfer x of replica r, as its only writer reads it. */
uint64_t sim_ticks_get(const struct sim_ticks *t, unsigned r, int x, int c);

/* Thread u waits until count c of transfer x of replica r is at least need: 0, or -1 when
 * stop(ud) said so (asked at each wake and every 20 ms, for a cancel nobody signals).
 * Adds the times it was woken by another thread to *wakes, its timeouts to *polls. */
int sim_ticks_wait(struct sim_ticks *t, unsigned u, unsigned r, int x, int c, uint64_t need,
                   bool (*stop)(void *ud), void *ud, unsigned *wakes, unsigned *polls);

/* Sets count c of transfer x of replica r to v (release: the bytes written before are
 * visible to whoever sees v) and wakes thread u when it waits. */
void sim_ticks_post(struct sim_ticks *t, unsigned r, int x, int c, uint64_t v, unsigned u);

/* Wakes every waiting thread (a thread stopped: the others look at their stop). */
void sim_ticks_wake_all(struct sim_ticks *t);

#endif /* SIM_TICKS_H */
