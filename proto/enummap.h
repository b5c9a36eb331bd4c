/*
 * enummap.h — a table that maps one layer's enum onto another's (the wire's protobuf enums
 * onto the simulator's, the client's onto the wire's), looked up both ways. Each layer
 * keeps its tables in one place (daemon/state/wiremap.c, client/wire/wiremap.c) with _Static_asserts
 * on their sizes and values; no layer casts another layer's enum into its own.
 */
#ifndef IPUOF_ENUMMAP_H
#define IPUOF_ENUMMAP_H

#include <stddef.h>

/* One value: a on the "from" side (the wire for the daemon, the client for the client
 * library), b on the other, and the name errors use. */
struct enummap_row {
    int a;
    int b;
    const char *name;
};

struct enummap {
    const char *what;              /* "dtype", "output kind", ... for error sentences */
    const struct enummap_row *rows;
    size_t n;
};

#define ENUMMAP_LEN(rows) (sizeof(rows) / sizeof((rows)[0]))

/* The b value of a (0 and *b set), or -1 when m has no row for a (*b untouched). */
int enummap_a_to_b(const struct enummap *m, int a, int *b);
/* The a value of b (0 and *a set), or -1 when m has no row for b (*a untouched). */
int enummap_b_to_a(const struct enummap *m, int b, int *a);

/* Writes the a side's known values into buf[0..len) as "name (a), name (a), ..." for an
 * error sentence, and returns buf. */
const char *enummap_known(const struct enummap *m, char *buf, size_t len);

#endif
