/*
 * table.c — boxed text tables. Cells are sanitised to valid UTF-8 without control
 * characters, and widths count characters: right for the ASCII and most text the daemon
 * reports; a double-width (CJK) name only shifts its own row's border.
 */
#include "table.h"

#include <stdlib.h>
#include <string.h>

#include "human.h"

void
table_init(struct table *t, size_t ncols, const char *const *heads, const int *right)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols < TABLE_MAX_COLS ? ncols : TABLE_MAX_COLS;
    for (size_t i = 0; i < t->ncols; i++) {
        t->heads[i] = heads[i];
        t->right[i] = right != NULL ? right[i] : 0;
    }
}

int
table_add_row(struct table *t, const char *const *cells)
{
    char *row[TABLE_MAX_COLS] = {0};
    size_t i;

    if (t->nrows == t->cap) {
        size_t cap = t->cap != 0 ? t->cap * 2 : 16;
        char **grown = realloc(t->cells, cap * t->ncols * sizeof *grown);
        if (grown == NULL)
            return -1;
        t->cells = grown;
        t->cap = cap;
    }
    for (i = 0; i < t->ncols; i++) {
        size_t n = strlen(cells[i] != NULL ? cells[i] : "") + 1;
        row[i] = malloc(n);
        if (row[i] == NULL)
            goto fail;
        human_sanitize(row[i], n, cells[i]);
    }
    memcpy(t->cells + t->nrows * t->ncols, row, t->ncols * sizeof row[0]);
    t->nrows++;
    return 0;
fail:
    for (i = 0; i < t->ncols; i++)
        free(row[i]);
    return -1;
}

/* Writes a +----+ border line for columns of the given widths. */
static void
print_rule(const size_t *width, size_t ncols, FILE *f)
{
    for (size_t i = 0; i < ncols; i++) {
        putc('+', f);
        for (size_t k = 0; k < width[i] + 2; k++)
            putc('-', f);
    }
    fputs("+\n", f);
}

/* Writes one row, each cell padded to its column's width (in characters). */
static void
print_row(const char *const *cells, const size_t *width, const int *right, size_t ncols,
          FILE *f)
{
    for (size_t i = 0; i < ncols; i++) {
        size_t pad = width[i] - human_width(cells[i]);

        fputs("| ", f);
        for (size_t k = 0; right[i] && k < pad; k++)
            putc(' ', f);
        fputs(cells[i], f);
        for (size_t k = 0; !right[i] && k < pad; k++)
            putc(' ', f);
        putc(' ', f);
    }
    fputs("|\n", f);
}

void
table_print(const struct table *t, FILE *f)
{
    size_t width[TABLE_MAX_COLS];
    int left[TABLE_MAX_COLS] = {0};

    for (size_t i = 0; i < t->ncols; i++) {
        width[i] = human_width(t->heads[i]);
        for (size_t r = 0; r < t->nrows; r++) {
            size_t n = human_width(t->cells[r * t->ncols + i]);
            if (n > width[i])
                width[i] = n;
        }
    }
    print_rule(width, t->ncols, f);
    print_row(t->heads, width, left, t->ncols, f);
    print_rule(width, t->ncols, f);
    for (size_t r = 0; r < t->nrows; r++)
        print_row((const char *const *)(t->cells + r * t->ncols), width, t->right, t->ncols,
                  f);
    if (t->nrows > 0)
        print_rule(width, t->ncols, f);
}

void
table_free(struct table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    t->cells = NULL;
    t->nrows = 0;
    t->cap = 0;
}
