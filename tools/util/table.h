/*
 * table.h — a boxed text table in the style of gc-monitor, for ipuctl status.
 */
#ifndef IPUCTL_TABLE_H
#define IPUCTL_TABLE_H

#include <stddef.h>
#include <stdio.h>

#define TABLE_MAX_COLS 8

struct table {
    size_t ncols;
    const char *heads[TABLE_MAX_COLS];   /* borrowed: static strings */
    int right[TABLE_MAX_COLS];           /* 1: right-aligned (numbers) */
    size_t nrows;
    size_t cap;
    char **cells;                        /* owned: nrows * ncols copies */
};

/* Starts an empty table of ncols (<= TABLE_MAX_COLS) columns; heads must outlive it. */
void table_init(struct table *t, size_t ncols, const char *const *heads, const int *right);

/* Appends a row of t->ncols cells, copied with control characters replaced by '?'.
 * Returns 0, or -1 when out of memory (the table is unchanged). */
int table_add_row(struct table *t, const char *const *cells);

/* Prints the table with a border; columns are as wide as their widest cell. */
void table_print(const struct table *t, FILE *f);

/* Frees the cells; t may be initialised again. */
void table_free(struct table *t);

#endif /* IPUCTL_TABLE_H */
