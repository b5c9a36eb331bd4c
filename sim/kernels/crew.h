/*
 * crew.h — the threads of a run (crew.c): n threads that run a job together, and the
 * per-replica barriers of the IPU threads. Knows nothing of what a job does (ipus.c gives
 * each thread its simulated IPUs' programs); struct sim_exe is only passed through.
 */
#ifndef SIM_CREW_H
#define SIM_CREW_H

#include <stdbool.h>

struct sim_exe;

/* crew.c: n threads that run a job together; sim_crew_run returns when all n have run it
 * (the caller is none of them). */
typedef void (*sim_crew_job)(struct sim_exe *e, unsigned idx, unsigned n, void *ud);
struct sim_crew *sim_crew_new(unsigned n);
void sim_crew_free(struct sim_crew *c);
void sim_crew_run(struct sim_crew *c, struct sim_exe *e, sim_crew_job job, void *ud);
unsigned sim_crew_barrier(struct sim_crew *c);  /* the times the caller was woken */
unsigned sim_crew_size(const struct sim_crew *c);

/* crew.c: a barrier of n threads that also agrees on stopping: sim_bar_wait returns true
 * for every thread when any of them passed stop = true in that round. */
struct sim_bar;
struct sim_bar *sim_bar_new(unsigned R, unsigned n);    /* R barriers of n threads */
void sim_bar_free(struct sim_bar *b, unsigned R);
bool sim_bar_wait(struct sim_bar *b, bool stop, unsigned *wakes);
struct sim_bar *sim_bar_at(struct sim_bar *b, unsigned r);     /* barrier r of R */

#endif /* SIM_CREW_H */
