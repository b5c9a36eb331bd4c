/*
 * program.h — the program of each simulated IPU: the one statement of the schedule, built
 * once at compile time (program.c) and read by both of its users:
 *   - the IPU threads (ipus.c) interpret their own IPU's steps, running kernels;
 *   - the simulated clock and the trace (schedule.c) replay the same steps with durations
 *     from the cost rates in place of kernels.
 * So the host run and the simulated clock cannot disagree about which stage works on which
 * micro-batch in which tick.
 *
 * A program covers one device iteration of a training run (the interpreters run it D times,
 * then the run's device iteration d is a parameter of every step) or the whole of an
 * inference run (its micro-batches are the run's D device iterations; a pipeline carries
 * them across device iterations). It is a list of segments shared by every IPU of a
 * replica (replicas run the same program on their own IPUs); a segment is a block of
 * ticks repeated `reps` times, and each IPU has its own steps for the block. In repetition
 * i, a step works on micro-batch mb + i and is logged as schedule step tick + i x
 * tick_stride. Every block ends each of its ticks with a SIM_STEP_TICK in every IPU's
 * steps, so the IPUs of a replica meet at the same ticks.
 *
 * Step formulas (N stages, M = A micro-batches per device iteration when training, D per
 * run for inference; stage k on IPU stage_ipu[k]):
 *   pipelined training  T = M + 2N - 1 ticks; in tick t stage k runs the backward of
 *                       micro-batch t - (2N - 1 - k), then the forward of micro-batch t - k
 *                       (each when in [0, M)): the backward first frees the slot the forward
 *                       uses. Every IPU works at once in the steady state.
 *   pipelined inference T = M + N - 1 ticks; in tick t stage k runs micro-batch t - k.
 *   (both: when T - V > V, V = 2N resp. N, ticks V .. T - V - 1 are all alike and are one
 *   segment of a one-tick block repeated T - 2V times; ticks before and after are their own)
 *   sharded, phased     one micro-batch at a time (a segment of M repetitions): tick k runs
 *                       the forward of stage k (k = 0 .. N-1), then (training) tick 2N-1-k
 *                       its backward (k = N-1 .. 0); one stage works per tick. Logged step
 *                       numbers are m x 2N + the tick (inference too).
 *   training            then the collective segment: every replica meets, the gradients are
 *                       reduced across replicas (a tick of its own when R > 1), off-chip
 *                       state streams on, the optimizer updates, the state streams off.
 * Within a stage's work the steps are: (phased) LOAD, RECV, HOST_IN, FWD, SEND, HOST_OUT for
 * a forward; (phased) LOAD, GRECV, BWD, GSEND for a backward.
 *
 * The clock lays out a tick's work in `key` order across IPUs (forwards by stage, then
 * backwards by stage descending; the collective by IPU), the order it always used; an IPU's
 * own steps may differ in order within a tick (pipelined training runs the backward first).
 * Without a trace callback it times the first repetition of a segment marked `scale` and
 * multiplies (all its repetitions cost the same), as it times one device iteration of D.
 * Does not: choose stages (place.c), slots and memory (plan.c), or costs (schedule.c).
 */
#ifndef SIM_PROGRAM_H
#define SIM_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>

struct sim_exe;
struct sim_err;

enum sim_step_kind {
    SIM_STEP_LOAD = 0,      /* phased: the stage's weights streamed in (clock only: the
                             * simulator keeps every weight resident) */
    SIM_STEP_RECV = 1,      /* receive the activations of the stage's forward: transfers
                             * prog->xi[lo .. hi) from the exchange buffers into the arena */
    SIM_STEP_HOST_IN = 2,   /* point the stage's host-input views at micro-batch mb */
    SIM_STEP_FWD = 3,       /* run the stage's nodes forward */
    SIM_STEP_SEND = 4,      /* send its activations other IPUs read: xi[lo .. hi) */
    SIM_STEP_HOST_OUT = 5,  /* copy the stage's outputs of micro-batch mb to the host */
    SIM_STEP_GRECV = 6,     /* seed the loss gradient, receive gradients: xi[lo .. hi) */
    SIM_STEP_BWD = 7,       /* run the stage's backward steps */
    SIM_STEP_GSEND = 8,     /* send the gradients of the activations it received */
    SIM_STEP_TICK = 9,      /* end of a tick: the replica's IPUs meet (all: every replica) */
    SIM_STEP_SYNC = 10,     /* the collective begins: every replica's IPUs meet */
    SIM_STEP_REDUCE = 11,   /* gradients reduced across replicas (by the crew's thread 0) */
    SIM_STEP_STREAM = 12,   /* off-chip state streamed on or off (clock only) */
    SIM_STEP_UPDATE = 13    /* the optimizer step (by the crew's thread 0) */
};

struct sim_step {
    uint8_t kind;           /* enum sim_step_kind */
    bool all;               /* SIM_STEP_TICK: every replica meets, not one replica's IPUs */
    int16_t stage;          /* -1 when not a stage's work */
    uint16_t key;           /* the clock's order of the step's work within its tick */
    int32_t lo, hi;         /* RECV, SEND, GRECV, GSEND: transfers prog->xi[lo .. hi) */
    uint32_t mb;            /* micro-batch in the segment's first repetition */
    long long tick;         /* the logged schedule step in the segment's first repetition */
};

struct sim_seg {
    unsigned reps;          /* repetitions of the block, >= 1 */
    long long tick_stride;  /* logged steps between repetitions */
    bool scale;             /* the clock may time one repetition and multiply */
    bool collective;        /* training's update: run by every thread, stopped or not */
};

struct sim_prog {
    unsigned n_ipus;        /* per replica */
    int n_seg;
    struct sim_seg *seg;
    struct sim_step *steps; /* every IPU's steps, IPU by IPU, segment by segment */
    int *start;             /* n_ipus x (n_seg + 1): IPU p's steps of segment s are
                             * steps[start[p * (n_seg + 1) + s] .. start[.. + s + 1]) */
    int *xi;                /* indices into e->xfer, in increasing order per list */
    int max_groups;         /* the most works (runs of steps sharing a key) in one tick */
};

/* IPU p's steps of segment s: *n of them. */
static inline const struct sim_step *
sim_prog_steps(const struct sim_prog *g, unsigned p, int s, int *n)
{
    const int *st = &g->start[(size_t)p * (size_t)(g->n_seg + 1)];

    *n = st[s + 1] - st[s];
    return &g->steps[st[s]];
}

/* Builds e->prog from the placement, the strategy and the run's shape (e->D, e->A, e->R,
 * training or not). IPUOF_E_NOMEM. */
int sim_prog_build(struct sim_exe *e, struct sim_err *err);
void sim_prog_free(struct sim_prog *g);

#endif /* SIM_PROGRAM_H */
