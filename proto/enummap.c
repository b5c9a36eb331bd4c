/*
 * enummap.c — lookups in the enum tables of enummap.h.
 */
#include "enummap.h"

#include <stdio.h>

int
enummap_a_to_b(const struct enummap *m, int a, int *b)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->rows[i].a == a) {
            *b = m->rows[i].b;
            return 0;
        }
    }
    return -1;
}

int
enummap_b_to_a(const struct enummap *m, int b, int *a)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->rows[i].b == b) {
            *a = m->rows[i].a;
            return 0;
        }
    }
    return -1;
}

const char *
enummap_known(const struct enummap *m, char *buf, size_t len)
{
    size_t used = 0;

    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < m->n && used < len; i++) {
        int k = snprintf(buf + used, len - used, "%s%s (%d)", i ? ", " : "", m->rows[i].name,
                         m->rows[i].a);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    return buf;
}
