/*
 * pbar.h — a progress bar drawn as tqdm draws one, for tools that loop over batches:
 *
 *   Epoch 1/3: 100%|██████████| 15/15 [00:12<00:00, loss=0.5100, acc=81.20%]
 *
 * It redraws one line with a carriage return; the caller draws it only on a terminal.
 */
#ifndef IPUOF_TOOLS_PBAR_H
#define IPUOF_TOOLS_PBAR_H

#include <stddef.h>
#include <stdio.h>

struct pbar {
    FILE *f;                    /* borrowed */
    char label[64];
    size_t total;
    double t0;                  /* CLOCK_MONOTONIC seconds at pbar_start() */
};

/* Starts a bar of total steps labelled label (copied, cut to fit) on f. Draws nothing. */
void pbar_start(struct pbar *b, FILE *f, const char *label, size_t total);

/* Redraws the bar at done steps, with postfix (may be NULL) inside the brackets after the
 * times: elapsed and the estimate of what remains, as mm:ss. */
void pbar_draw(const struct pbar *b, size_t done, const char *postfix);

/* Ends the bar's line. */
void pbar_end(const struct pbar *b);

/* Seconds since pbar_start(). */
double pbar_elapsed(const struct pbar *b);

#endif /* IPUOF_TOOLS_PBAR_H */
