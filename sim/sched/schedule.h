/*
 * schedule.h — the schedule of a run and its simulated clock, shared by schedule.c (the per-stage
 * costs, the schedule walk) and cost.c (FLOPs per node, the cost report, the trace JSON).
 *
 * A run is a sequence of bulk-synchronous steps ("ticks"). In a tick every IPU of a replica
 * runs its items one after another (host-in, a forward or backward of one stage for one
 * micro-batch, the send of its results to other IPUs, host-out), then all IPUs sync. Which
 * micro-batch each stage works on in each tick is the strategy: each IPU's program of steps
 * (program.h), which the walk replays with durations in place of kernels. Replicas run
 * the same schedule on their own IPUs at the same time; after the micro-batches of a device
 * iteration of a training run come the gradient reduction across replicas and the weight
 * update (with off-chip state streamed on and off around it).
 * Every figure depends only on shapes, placement and the cost rates, never on data.
 */
#ifndef SIM_SCHEDULE_H
#define SIM_SCHEDULE_H

#include "exe.h"

enum sim_ev_kind {
    SIM_EV_FWD = 0,
    SIM_EV_BWD = 1,
    SIM_EV_EXCHANGE = 2,
    SIM_EV_HOST_IN = 3,
    SIM_EV_HOST_OUT = 4,
    SIM_EV_UPDATE = 5,
    SIM_EV_REDUCE = 6,
    SIM_EV_STREAM = 7,          /* off-chip tensors streamed on or off */
    SIM_EV_KINDS = 8
};

/* One span of the simulated clock, on IPU `ipu` of replica 0 (replicas are identical). */
struct sim_ev {
    double t0, dur;             /* seconds */
    int ipu;
    int kind;                   /* enum sim_ev_kind */
    int stage;                  /* -1 when not a stage's work */
    long long mb;               /* micro-batch within the device iteration (training) or
                                 * the run (inference), -1 when none */
    long long iter;             /* device iteration (training), else 0 */
};

/* Per-stage and per-IPU costs of one micro-batch, in seconds. */
struct sim_clock {
    int n_stages;
    unsigned n_ipus;            /* per replica */
    double *fwd, *bwd;          /* n_stages: compute of one micro-batch */
    double *xfwd, *xbwd;        /* n_stages: sending activations / gradients to other IPUs */
    double *hin, *hout;         /* n_stages: host input / output streams of a micro-batch */
    double *wload;              /* n_stages: phased: loading the stage's weights */
    double *update;             /* n_ipus: the weight update of one device iteration */
    double *stream;             /* n_ipus: off-chip state streamed on and off around it */
    double *reduce;             /* n_ipus: the gradient all-reduce across replicas */
    double hout_final;          /* outputs returned once per run (Final, Sum) */
    double device_seconds;      /* the whole run */
    double *busy;               /* n_ipus: compute seconds in the run */
    /* since issue 28 (cost_node.c's parts; docs/cost-model.md) */
    double (*fpart)[3], (*bpart)[3];    /* n_stages: fwd / bwd split: compute, exchange,
                                         * sync, summing to fwd[s] / bwd[s] */
    double *part;               /* n_ipus x SIM_PARTS: seconds of the run by part */
    double *io;                 /* n_ipus: host I/O of the current tick when it overlaps
                                 * (IO tiles) */
    double flops;               /* FLOPs of one micro-batch (forward, and backward in
                                 * training), for the % of peak */
    double peak_flops_per_s;    /* the rate of the op class with the most FLOPs */
    unsigned R;                 /* replicas the costs are for */
    double fixed;               /* the fixed cost of a run (cost.step_s) */
};

/* Called for each span; returns false to stop the walk early. */
typedef bool (*sim_ev_fn)(const struct sim_ev *ev, void *ud);

/* Builds c (zeroed, caller-freed with sim_clock_free) for executable e as if it ran R
 * replicas (the compile's own: e->R), and walks it: c->device_seconds, c->busy, c->part. */
int sim_clock_build(const struct sim_exe *e, unsigned R, struct sim_clock *c);

/* Walks the schedule of one run, calling fn (may be NULL) for each span in time order
 * per tick, and returns the run's simulated duration; c->busy is filled when fn is NULL. */
double sim_sched_walk(const struct sim_exe *e, struct sim_clock *c, sim_ev_fn fn, void *ud);

/* The bytes of one tile's memory (624 KiB; docs/cost-model.md). */
#define SIM_TILE_BYTES (624.0 * 1024.0)

/* The time of a node for one micro-batch, in seconds: [0] compute, [1] exchange, [2] sync
 * (compute sets), of its forward and of its backward (cost_node.c). */
struct sim_node_cost {
    double fwd[3], bwd[3];
};

/* cost_node.c: the time of node s, the nodes fused into it included. */
void sim_cost_node_time(const struct sim_exe *e, int s, struct sim_node_cost *t);

/* cost.c: FLOPs and memory bytes of the forward of node s for one micro-batch. */
void sim_cost_node(const struct sim_exe *e, int s, double *flops, double *bytes);

#endif /* SIM_SCHEDULE_H */
