/*
 * conv_dnnl.h — 2-D convolution forward and backward through oneDNN (Debian's libdnnl, C
 * API), for the layer shapes where it beats op_conv.c's im2col + OpenBLAS (the rules are in
 * op_conv.c). The forward is conv_dnnl.c, the backward conv_dnnl_bwd.c.
 *
 * A shape's primitives (the convolution in the layout oneDNN prefers for it, and the
 * reorders from and to plain NCHW / OIHW, less those the layout plan of layout.c drops
 * where a neighbour keeps the blocked layout) are built once, when a model is compiled,
 * and kept in a process-wide table keyed by the shape: compiling the same layer again reuses them, so
 * the table grows with distinct shapes only (at most SIM_DNNL_MAX_SHAPES; past that the
 * caller keeps its own kernel). A run needs no allocation: the blocked copies and oneDNN's
 * scratchpad live in the op's plan scratch, and each entry keeps a few sets of memory
 * objects that concurrent callers take in turn. Every calling thread has its own stream.
 */
#ifndef SIM_CONV_DNNL_H
#define SIM_CONV_DNNL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act.h"

#define SIM_DNNL_MAX_SHAPES 1024

/* One 2-D convolution: plain NCHW input (n, c, h, w), OIHW weights, (n, m, oh, ow) output. */
struct sim_dnnl_conv {
    int64_t n, c, h, w, m, oh, ow;
    int64_t kh, kw, sh, sw, dh, dw, ph, pw;  /* dilations as ONNX counts them (1: none) */
    int64_t group;
    bool bias;
    /* forward, inference: x is already in the layout the convolution reads (a producer
     * that chains to it wrote it so: sim_dnnl_conv_chains), y stays in the layout it
     * writes; false: plain NCHW (the backward takes both false) */
    bool x_blocked, y_blocked;
};

/*
 * The pieces a convolution's batch is cut into (at most; fewer when the batch is smaller),
 * whatever the pool's size: the cut decides the bits (the weight gradient is summed piece
 * by piece, and oneDNN may pick another kernel for another sub-batch), so it must not
 * depend on the machine. The pool's threads take pieces in turn: up to 8 threads gain, and
 * on 2 a descheduled thread holds the other up by a quarter of the work at most.
 */
#define SIM_DNNL_PIECES 8

/*
 * Builds (or finds) the primitives for d with its batch split into up to `pieces` pieces
 * (SIM_DNNL_PIECES; each a one-thread oneDNN primitive, run on the simulator's pool, so
 * the same shape gives the same bits whatever the pool's size); *id gets their handle
 * and *scratch the bytes of plan scratch a run needs. Returns 0, or -1 when oneDNN cannot
 * serve the shape or the table is full (the caller then uses its own kernel). Thread-safe.
 */
int sim_dnnl_conv_prepare(const struct sim_dnnl_conv *d, int pieces, int *id,
                          size_t *scratch);

/*
 * y = act(conv(x, w) + bias) for the shape prepared as id (w_blocked: w is already in the
 * layout the convolution reads, from sim_dnnl_conv_weights; act NULL: no activation; else
 * applied to each piece of y right after oneDNN wrote it); scratch has the bytes prepare
 * asked for (64-byte aligned). The pieces run through sim_pool_for, so concurrent
 * simulated IPUs share the pool's threads and oneDNN adds none. Returns 0, or -1 when
 * oneDNN failed (y is then undefined).
 */
int sim_dnnl_conv_run(int id, const float *x, const float *w, bool w_blocked,
                      const float *bias, float *y, const struct sim_act *act, void *scratch);

/*
 * The weights w (OIHW) of the shape prepared as id, reordered once into the layout its
 * convolution reads: *bw gets a new 64-byte aligned buffer (caller-owned, free()), or NULL
 * when that layout is plain OIHW (w serves as it is). For weights that never change (an
 * inference executable's constants), so that sim_dnnl_conv_run(..., *bw, true, ...) skips
 * the reorder it does every run otherwise; *bytes gets the buffer's size (0 with NULL).
 * Returns 0, or -1 (out of memory, oneDNN failed).
 */
int sim_dnnl_conv_weights(int id, const float *w, float **bw, size_t *bytes);

/*
 * Whether the convolution prepared as `from` can hand its output to the one prepared as
 * `to` in oneDNN's blocked layout, with no reorder between: the layout from writes is the
 * one to reads, for every piece (the same batch split), and it takes the same bytes as
 * plain NCHW (channels a multiple of the block), so the memory plan needs no change.
 * Thread-safe.
 */
bool sim_dnnl_conv_chains(int from, int to);

/*
 * op_conv.c's side of the layout plan (layout.c): params are a 2-D or 1-D Conv node's
 * (never a 3-D one's). sim_conv_dnnl_id gives the oneDNN forward it runs, or -1 when its
 * own kernels run it. sim_conv_dnnl_relayout prepares that forward again with x and/or y
 * blocked (sim_dnnl_conv), *scratch the node's new scratch bytes. Returns 0, or -1 with
 * the node unchanged.
 */
int sim_conv_dnnl_id(const void *params);
/* sim_conv_dnnl_promotable: a 1x1 Conv (any stride, one group, 2-D) that op_conv.c's rule
 * gave its own kernels, which oneDNN can run instead when both its sides keep the blocked
 * layout (its rule measured it with reorders on both sides). sim_conv_dnnl_set moves the
 * forward to oneDNN's plain-layout primitive (on; *scratch its bytes) or back to the own
 * kernels (off; the caller restores the scratch it had). Returns 0, or -1 with p as it
 * was. */
bool sim_conv_dnnl_promotable(const void *params);
int sim_conv_dnnl_set(void *params, bool on, size_t *scratch);
/* sim_conv_dnnl_weights: the Conv's forward (on oneDNN) reads w, which never changes, from
 * *owned, w reordered once now (sim_dnnl_conv_weights; the caller owns *owned, NULL when w
 * serves as it is; *bytes its size). Valid until the next relayout or set. Returns 0 or
 * -1 (unchanged). */
int sim_conv_dnnl_weights(void *params, const float *w, float **owned, size_t *bytes);
int sim_conv_dnnl_relayout(void *params, bool x_blocked, bool y_blocked, size_t *scratch);

/*
 * The backward of d (both gradients; a run computes the ones it is given buffers for), made
 * like the forward's: batch split into up to `pieces` one-thread pieces, primitives in a
 * process-wide table keyed by shape, *scratch the plan scratch a run needs. Returns 0, or -1
 * when oneDNN cannot serve the shape or the table is full (the caller keeps its own
 * kernels). Thread-safe.
 */
int sim_dnnl_conv_bwd_prepare(const struct sim_dnnl_conv *d, int pieces, int *id,
                              size_t *scratch);

/*
 * dx += dX and dw += dW of the shape prepared as id, from the forward's input x, weights w
 * and the output's gradient dy (all plain NCHW / OIHW); dx or dw NULL: not wanted. oneDNN
 * writes both into the scratch (bytes the prepare asked for, 64-byte aligned) and a reorder
 * with a sum post-op adds them, so several writers of a gradient accumulate as the gradient
 * rules do. The bias gradient is not computed here. Returns 0, or -1 when oneDNN failed
 * (dx and dw are then undefined).
 */
int sim_dnnl_conv_bwd_run(int id, const float *x, const float *w, const float *dy, float *dx,
                          float *dw, void *scratch);

#endif
