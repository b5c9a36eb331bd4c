/*
 * dl_workers.h — the data loader's worker threads for the rebatched mode
 * (IPUOF_DATALOADER_ASYNC_REBATCHED, PopTorch's AsyncRebatched): n threads each produce
 * single samples of the batches being built, worker w taking the samples whose number in
 * the stream of samples is w, w + n, w + 2n, ... (across batches), so every worker works
 * and no per-worker remainder is dropped. Internal to libipuof-client.
 *
 * Threading: one caller (the loader's producer thread) at a time runs a batch; the workers
 * call fn concurrently, each with its own worker index.
 */
#ifndef IPUOF_DL_WORKERS_H
#define IPUOF_DL_WORKERS_H

#include <stddef.h>

struct dl_workers;

/* Produces sample k of the current batch on worker w. 0, or a non-zero code that stops
 * the batch (the other workers stop at their next sample). */
typedef int (*dl_sample_fn)(void *ctx, unsigned w, size_t k);

/* Starts n (>= 1) worker threads. 0, or -1 when a thread or memory is missing (nothing is
 * left running). */
int dl_workers_new(unsigned n, struct dl_workers **out);

/* Runs fn for samples 0..count-1 on the workers, sample k being number base + k of the
 * stream (worker (base + k) mod n makes it), and waits for them all. Returns 0, or the code
 * of the failed sample with the lowest k (in *failed_k) when any failed. */
int dl_workers_run(struct dl_workers *ws, dl_sample_fn fn, void *ctx, size_t base,
                   size_t count, size_t *failed_k);

/* Stops and joins the workers (none may be running a batch). NULL is a no-op. */
void dl_workers_free(struct dl_workers *ws);

#endif
