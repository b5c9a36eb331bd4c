/*
 * pbar.c — tqdm's bar: label, percentage, ten cells of U+2588 FULL BLOCK, steps, elapsed
 * and remaining time, and a postfix.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pbar.h"

#define CELLS 10
#define BLOCK "\xe2\x96\x88" /* U+2588 in UTF-8 */

/* CLOCK_MONOTONIC in seconds. */
static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void
pbar_start(struct pbar *b, FILE *f, const char *label, size_t total)
{
    memset(b, 0, sizeof *b);
    b->f = f;
    snprintf(b->label, sizeof b->label, "%s", label);
    b->total = total;
    b->t0 = now_s();
}

double
pbar_elapsed(const struct pbar *b)
{
    return now_s() - b->t0;
}

/* Writes s seconds as "mm:ss" (or "h:mm:ss") into buf[0..len). */
static void
clock_text(char *buf, size_t len, double s)
{
    long t = s > 0 ? (long)(s + 0.5) : 0;

    if (t >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%02ld:%02ld", t / 60, t % 60);
}

void
pbar_draw(const struct pbar *b, size_t done, const char *postfix)
{
    double elapsed = pbar_elapsed(b);
    double left = done > 0 && done < b->total ? elapsed / (double)done * (double)(b->total - done)
                                              : 0;
    size_t fill = b->total > 0 ? done * CELLS / b->total : 0;
    int pct = b->total > 0 ? (int)(done * 100 / b->total) : 0;
    char el[64], lt[64], cells[CELLS * 3 + 1];
    size_t used = 0;

    if (fill > CELLS)
        fill = CELLS;
    for (size_t i = 0; i < CELLS; i++) {
        const char *cell = i < fill ? BLOCK : " ";
        size_t n = strlen(cell);

        memcpy(cells + used, cell, n);
        used += n;
    }
    cells[used] = '\0';
    clock_text(el, sizeof el, elapsed);
    clock_text(lt, sizeof lt, left);
    fprintf(b->f, "\r%s: %3d%%|%s| %zu/%zu [%s<%s%s%s]\x1b[K", b->label, pct, cells, done,
            b->total, el, lt, postfix != NULL ? ", " : "", postfix != NULL ? postfix : "");
    fflush(b->f);
}

void
pbar_end(const struct pbar *b)
{
    fputc('\n', b->f);
    fflush(b->f);
}
