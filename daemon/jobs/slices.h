/*
 * slices.h — which rows of an executable's input run buffers one connection's run bytes
 * fill, and how: a process of a job of several fills its own replicas' rows (jobs_run.c), and
 * with input replica grouping (PopTorch's inputReplicaGrouping) one row per group of
 * replicas, copied to the group's other replicas before the run.
 *
 * The run layout is [steps][R][step] per input (steps = D x A, see sim/sim.h): process p of
 * n owns replicas p*Rl .. (p+1)*Rl-1 (Rl = R / n); with groups of g replicas it sends
 * Rl / g steps per step of the run. Consecutive groups are {0..g-1}, {g..2g-1}, ...;
 * orthogonal groups hold replicas Rl / g apart: {0, Rl/g, ...}, {1, Rl/g + 1, ...}.
 * Group s's row is its first replica's.
 */
#ifndef IPUOFD_SLICES_H
#define IPUOFD_SLICES_H

#include <stddef.h>

#include "conn.h"
#include "sim.h"

struct slice_plan {
    unsigned nproc, proc;        /* processes of the job and this one (1, 0: no job) */
    unsigned group;              /* replicas per input group (1: none) */
    int orthogonal;              /* the groups' type */
};

#define SLICE_SEGS 64              /* segments handed to the connection at a time */

/* Where the next segments come from (input, step, group), and the segments last handed
 * out (the sink borrows them until its next refill). */
struct slice_cursor {
    size_t in, step, grp;
    uint8_t *seg[SLICE_SEGS];
    size_t seg_len[SLICE_SEGS];
};

/* Rows to fill with contiguous receives, one segment per (input, step) without groups
 * (adjacent ones joined: a process alone fills each input but the last at once), one per
 * (input, step, group) with them. The last input goes one step at a time, so that each
 * refill knows the steps wholly received (slice_steps_in) while the run computes them.
 * Points sink's segments at up to SLICE_SEGS of cur's, from cur's position, and advances
 * it; 0, or -1 when every row is filled. */
int slice_fill(struct sim_exe *exe, const struct slice_plan *pl, struct slice_cursor *cur,
               struct conn_sink *sink);

/* The micro-batch steps (D x A of them) whose rows of every input are in when every
 * segment slice_fill handed out before cur's position has been filled. */
uint64_t slice_steps_in(struct sim_exe *exe, const struct slice_cursor *cur);

/* Copies each group's row of steps [k0, k1) to the group's other replicas of pl's process.
 * The rows must be in and the run not reading those steps yet. No-op without groups. */
void slice_replicate(struct sim_exe *exe, const struct slice_plan *pl, uint64_t k0,
                     uint64_t k1);

/* The share of the run buffer's dim 0 (and bytes) a connection sends: divided by nproc x
 * group. */
unsigned slice_divisor(const struct slice_plan *pl);

/*
 * Checks run request inputs (dtype, rank, dims, names) against the shapes of pl's share of
 * exe's inputs. IPUOF_OK with *total set to the payload bytes they take, or the IPUOF_E_*
 * code with a sentence in msg. A whole run (one process, no groups) is checked by the
 * simulator, input by input.
 */
int slice_check(struct sim_exe *exe, const struct slice_plan *pl, Ipuof__TensorInfo **inputs,
                size_t n_inputs, const char *model, uint64_t *total, char *msg, size_t len);

#endif
