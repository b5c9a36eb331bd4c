/*
 * jobs_out.c — the outputs of a job's run going back to its processes (see jobs_int.h).
 *
 * A process that asked stream_outputs gets its replicas' rows of every output as the
 * micro-batch steps holding them are final: the run's threads tell the feed, the feed's
 * notify wakes the loop (run->out_ev), and the loop sends the rows of the steps final
 * since the last frame in one RunOutputs frame (All and EveryN outputs; Final and Sum ones
 * at the run's end), then the RunReply with the time and the cost and no payload. The loop
 * is woken once per chunk of steps (a quarter of the run, at most STREAM_CHUNK bytes of
 * rows), not per step: a wake-up and a frame cost more than a few small rows gain. Rows are
 * read from the executable's output buffers, which hold the whole call anyway: nothing is
 * buffered per step. What waits in the connection's output queue is bounded: a frame goes
 * out only while less than stream_window() bytes are queued, and only while what is queued
 * plus all that is still unsent fits max_output_bytes (the rest waits in the output
 * buffers for the next wake-up, or for the run's end, when what is left goes in one frame
 * as the whole reply did before, so streaming never drops a client the whole reply would
 * not have), so a client that reads slowly holds the stream back, not the daemon's
 * memory. A run that ends before any rows went out is answered as without
 * the flag: one RunReply carrying every output (the client takes either).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "ipuof/status.h"
#include "jobs.h"
#include "jobs_int.h"
#include "models.h"
#include "srv_state.h"
#include "slices.h"

/* Bytes of rows a wake-up of the loop waits for (at most: a small run's quarter is less). */
#define STREAM_CHUNK (256u << 10)

/* Room kept in max_output_bytes for frame heads and headers. */
#define STREAM_HEADER_SLACK (64u << 10)

/* D x A: the micro-batch steps of one run of w's model. */
static uint64_t
run_steps_of(const struct run *w)
{
    const struct sim_exe *exe = w->m->entry->exe;

    return (uint64_t)sim_exe_device_iterations(exe) * sim_exe_gradient_accumulation(exe);
}

struct slice_plan
job_slice_plan(const struct job_proc *q, const struct model *m)
{
    struct slice_plan pl = {m->nproc, q->id - m->proc0, m->group > 1 ? m->group : 1,
                            m->group_orthogonal};

    return pl;
}

/* Bytes a stream may leave queued on a connection before it waits: a quarter of
 * max_output_bytes, at most 8 MiB (enough to keep a socket busy). */
static size_t
stream_window(const struct srv *s)
{
    uint64_t w = s->cfg.max_output_bytes / 4;

    return w > (8u << 20) ? (8u << 20) : (size_t)w;
}

/* Blocks of output io (a device iteration's or micro-batch's rows, as the run buffer holds
 * them) final once steps [0, s) have run (all of them once ended): All returns step k as
 * block k; EveryN(n) returns iterations n-1, 2n-1, .. (all A steps of each); Final and Sum
 * are complete only at the end. */
static uint64_t
final_blocks(const struct sim_io_info *io, uint64_t A, uint64_t s, int ended)
{
    uint64_t done = 0;

    if (ended)
        return io->iterations;
    switch (io->mode.kind) {
    case SIM_OUTPUT_ALL:
        return s < io->iterations ? s : io->iterations;
    case SIM_OUTPUT_EVERYN:
        for (uint64_t j = 0; j * A < io->iterations; j++) {
            uint64_t first = ((j + 1) * io->mode.n - 1) * A; /* step of its block j*A */
            if (first >= s)
                break;
            done += s - first < A ? s - first : A;
        }
        return done;
    default:
        return 0;
    }
}

int
job_out_prepare(struct run *w)
{
    struct sim_exe *exe = w->m->entry->exe;
    size_t no = sim_exe_output_count(exe), cap = 0;

    for (size_t i = 0; i < no; i++) {
        struct sim_io_info io;
        sim_exe_output_info(exe, i, &io);
        cap += io.iterations;
    }
    w->iov = calloc(cap + 1, sizeof *w->iov);
    w->ti = calloc(no + 1, sizeof *w->ti);
    w->tp = calloc(no + 1, sizeof *w->tp);
    w->dims = calloc(no + 1, sizeof *w->dims);
    w->pieces = calloc(no + 1, sizeof *w->pieces);
    w->pp = calloc(no + 1, sizeof *w->pp);
    return w->iov && w->ti && w->tp && w->dims && w->pieces && w->pp ? 0 : -1;
}

void
job_out_release(struct run *w)
{
    free(w->iov);
    free(w->ti);
    free(w->tp);
    free(w->dims);
    free(w->pieces);
    free(w->pp);
    w->iov = NULL;
    w->ti = NULL;
    w->tp = NULL;
    w->dims = NULL;
    w->pieces = NULL;
    w->pp = NULL;
}

/* Fills w->ti/tp with process q's view of every output of the run (its replicas' rows). */
static void
describe(const struct job_proc *q, struct run *w)
{
    struct sim_exe *exe = w->m->entry->exe;
    struct slice_plan pl = job_slice_plan(q, w->m);
    size_t no = sim_exe_output_count(exe);

    for (size_t i = 0; i < no; i++) {
        struct sim_io_info io;
        sim_exe_output_info(exe, i, &io);
        models_tensor_info(&w->ti[i], &io, w->dims[i], w->dims[i] + SIM_MAX_RANK, NULL);
        if (w->ti[i].n_dims > 0)
            w->dims[i][0] /= pl.nproc;
        w->ti[i].bytes /= pl.nproc;
        w->tp[i] = &w->ti[i];
    }
}

/* Appends to w->iov (niov entries so far) process q's rows of blocks [b0, b1) of output i:
 * block k holds R steps, q's are proc*Rl .. (proc+1)*Rl-1. Adjacent pieces go as one. */
static size_t
add_rows(const struct job_proc *q, struct run *w, size_t i, uint64_t b0, uint64_t b1,
         size_t niov)
{
    struct sim_exe *exe = w->m->entry->exe;
    struct slice_plan pl = job_slice_plan(q, w->m);
    const uint8_t *buf = sim_exe_output_buffer(exe, i);
    size_t R = sim_exe_replicas(exe), Rl = R / pl.nproc;
    struct sim_io_info io;

    sim_exe_output_info(exe, i, &io);
    for (uint64_t k = b0; k < b1 && io.step_bytes > 0; k++) {
        const uint8_t *base = buf + (k * R + (size_t)pl.proc * Rl) * io.step_bytes;
        size_t len = Rl * io.step_bytes;
        if (niov > 0 && (const uint8_t *)w->iov[niov - 1].base + w->iov[niov - 1].len == base) {
            w->iov[niov - 1].len += len;
            continue;
        }
        w->iov[niov].base = base;
        w->iov[niov++].len = len;
    }
    return niov;
}

/* Bytes of q's rows final between steps s0 and s1 (ended: every block by s1). */
static uint64_t
rows_bytes(const struct job_proc *q, struct run *w, uint64_t s0, uint64_t s1, int ended)
{
    struct sim_exe *exe = w->m->entry->exe;
    uint64_t A = sim_exe_gradient_accumulation(exe), sum = 0;
    size_t no = sim_exe_output_count(exe);
    size_t Rl = sim_exe_replicas(exe) / job_slice_plan(q, w->m).nproc;

    for (size_t i = 0; i < no; i++) {
        struct sim_io_info io;
        sim_exe_output_info(exe, i, &io);
        sum += (final_blocks(&io, A, s1, ended) - final_blocks(&io, A, s0, 0)) * Rl *
               io.step_bytes;
    }
    return sum;
}

/* Sends q one RunOutputs frame: its rows of every output final between q->sent and s1
 * (ended: all the rest). The first frame of the run also describes the outputs. */
static void
send_rows(struct job_proc *q, struct run *w, uint64_t s1, int ended)
{
    struct sim_exe *exe = w->m->entry->exe;
    uint64_t A = sim_exe_gradient_accumulation(exe);
    size_t no = sim_exe_output_count(exe), niov = 0, np = 0;
    size_t Rl = sim_exe_replicas(exe) / job_slice_plan(q, w->m).nproc;
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunOutputs ro = IPUOF__RUN_OUTPUTS__INIT;

    for (size_t i = 0; i < no; i++) {
        struct sim_io_info io;
        uint64_t b0, b1;
        sim_exe_output_info(exe, i, &io);
        b0 = final_blocks(&io, A, q->sent, 0);
        b1 = final_blocks(&io, A, s1, ended);
        if (b1 <= b0 || io.step_bytes == 0)
            continue;
        ipuof__output_piece__init(&w->pieces[np]);
        w->pieces[np].output = (uint32_t)i;
        w->pieces[np].offset = b0 * Rl * io.step_bytes;
        w->pieces[np].length = (b1 - b0) * Rl * io.step_bytes;
        w->pp[np] = &w->pieces[np];
        np++;
        niov = add_rows(q, w, i, b0, b1, niov);
    }
    q->sent = s1;
    if (np == 0 && q->stream_begun)
        return;
    if (!q->stream_begun) {
        describe(q, w);
        ro.n_outputs = no;
        ro.outputs = w->tp;
        q->stream_begun = 1;
    }
    ro.n_pieces = np;
    ro.pieces = w->pp;
    h.request_id = q->run_req;
    h.body_case = IPUOF__HEADER__BODY_RUN_OUTPUTS;
    h.run_outputs = &ro;
    conn_sendv(q->conn, &h, w->iov, (int)niov);
}

/* Sends q the rows of the steps final since its last frame, as many as the window lets
 * wait in its connection's output queue (at least one step when the queue is under it). */
static void
stream_rows(struct job_proc *q, struct run *w, uint64_t n)
{
    size_t win = stream_window(q->job->srv), queued = conn_queued(q->conn);
    uint64_t s1 = q->sent, bytes = 0, steps = run_steps_of(w);

    if (n <= q->sent || queued >= win)
        return;
    /* What is still unsent goes at the end in one frame: the queue then must not pass
     * max_output_bytes, which would drop the client (the whole reply would not have). */
    if (queued + rows_bytes(q, w, q->sent, steps, 1) + STREAM_HEADER_SLACK >
        q->job->srv->cfg.max_output_bytes)
        return;
    while (s1 < n) { /* rows_bytes adds up: [sent, s1 + 1) = [sent, s1) + [s1, s1 + 1) */
        uint64_t more = rows_bytes(q, w, s1, s1 + 1, 0);
        if (s1 > q->sent && bytes + more > win - queued)
            break;
        bytes += more;
        s1++;
    }
    if (bytes == 0 && !q->stream_begun) {
        q->sent = s1; /* nothing final yet (Final or Sum outputs): no frame */
        return;
    }
    send_rows(q, w, s1, 0);
}

/* Loop thread: the run's feed says more steps' outputs are final (sim_feed_notify wakes
 * this through w->out_ev). */
static void
on_rows(evutil_socket_t fd, short what, void *arg)
{
    struct run *w = arg;
    struct job *j = w->j;
    struct model *m = w->m;
    uint64_t n;

    (void)fd;
    (void)what;
    if (job_ended(j))
        return; /* every process had its error from job_end */
    n = sim_feed_outputs(w->feed);
    atomic_store(&w->wake_at, n + w->chunk);
    /* j->inflight is w until run_done (which frees this event first): a process leaving
     * in the loop may end j, not free it. */
    for (unsigned p = m->proc0; p < m->proc0 + m->nproc && !job_ended(j); p++) {
        struct job_proc *q = &j->proc[p];
        struct conn *c = q->conn;
        if (!q->stream || q->run_req == 0 || c == NULL || c->dead)
            continue;
        conn_enter(c);
        stream_rows(q, w, n);
        conn_leave(c); /* a kill here ends the job through job_leave */
    }
}

/* Run threads: steps [0, out) have run; wakes the loop once a chunk of them is new (the
 * last steps go with the reply, which run_done sends). */
static void
rows_ready(void *arg, uint64_t out)
{
    struct run *w = arg;

    if (out >= atomic_load(&w->wake_at) && out < run_steps_of(w))
        event_active(w->out_ev, 0, 0);
}

int
job_out_stream_start(struct run *w)
{
    struct job *j = w->j;
    struct sim_exe *exe = w->m->entry->exe;
    uint64_t steps = run_steps_of(w), per_step = 0;
    size_t no = sim_exe_output_count(exe), Rl = sim_exe_replicas(exe) / w->m->nproc;
    int any = 0;

    for (unsigned p = w->m->proc0; p < w->m->proc0 + w->m->nproc; p++)
        any |= j->proc[p].stream;
    if (!any)
        return 0;
    for (size_t i = 0; i < no; i++) { /* a process's bytes of one step (All outputs) */
        struct sim_io_info io;
        sim_exe_output_info(exe, i, &io);
        if (io.mode.kind == SIM_OUTPUT_ALL)
            per_step += Rl * io.step_bytes;
    }
    /* A quarter of the run, and at most STREAM_CHUNK bytes, per wake-up: a wake-up and a
     * frame per step would cost the loop more than small rows gain. */
    w->chunk = (steps + 3) / 4;
    if (per_step > 0 && w->chunk * per_step > STREAM_CHUNK)
        w->chunk = STREAM_CHUNK / per_step > 0 ? STREAM_CHUNK / per_step : 1;
    if (w->chunk == 0)
        w->chunk = 1;
    atomic_store(&w->wake_at, w->chunk);
    w->out_ev = event_new(j->srv->base, -1, 0, on_rows, w);
    if (w->out_ev == NULL)
        return -1;
    sim_feed_notify(w->feed, rows_ready, w);
    return 0;
}

void
job_out_reply(struct job_proc *q, struct run *w)
{
    struct sim_exe *exe = w->m->entry->exe;
    size_t no = sim_exe_output_count(exe), niov = 0;
    Ipuof__Header h = IPUOF__HEADER__INIT;
    Ipuof__RunReply r = IPUOF__RUN_REPLY__INIT;
    Ipuof__RunCost cost;
    double busy[SIM_MAX_IPUS];

    if (q->stream_begun) {
        uint64_t steps = (uint64_t)sim_exe_device_iterations(exe) *
                         sim_exe_gradient_accumulation(exe);
        send_rows(q, w, steps, 1); /* what is left, and the Final and Sum outputs */
    } else {
        for (size_t i = 0; i < no; i++) {
            struct sim_io_info io;
            sim_exe_output_info(exe, i, &io);
            niov = add_rows(q, w, i, 0, io.iterations, niov);
        }
    }
    describe(q, w);
    r.n_outputs = no;
    r.outputs = w->tp;
    r.run_us = w->us;
    models_run_cost(exe, &cost, busy);
    r.cost = &cost;
    h.request_id = q->run_req;
    h.body_case = IPUOF__HEADER__BODY_RUN_REPLY;
    h.run_reply = &r;
    conn_sendv(q->conn, &h, w->iov, (int)niov);
}
