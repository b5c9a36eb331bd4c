/*
 * human.h — numbers as people read them, for ipuctl's tables.
 */
#ifndef IPUCTL_HUMAN_H
#define IPUCTL_HUMAN_H

#include <stddef.h>
#include <stdint.h>

/* Writes n bytes in binary units into buf[0..len): "512 B", "12.5 MiB", "900 MiB". One
 * decimal unless the value is a whole number of its unit. */
void human_bytes(char *buf, size_t len, uint64_t n);

/* Writes a duration into buf[0..len): "850ms", "42s", "5m 07s", "3h 02m", "2d 04h". */
void human_duration(char *buf, size_t len, uint64_t ms);

/* Copies src into dst[0..len) with control characters (which could drive the terminal)
 * and bytes that are not valid UTF-8 replaced by '?'. src is only read; NULL is copied
 * as "". */
void human_sanitize(char *dst, size_t len, const char *src);

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when s does not start one
 * (overlong forms, surrogates and code points past U+10FFFF are invalid). */
size_t human_utf8_len(const unsigned char *s);

/* Characters in the valid UTF-8 string s: its width in a table, one column each. */
size_t human_width(const char *s);

#endif /* IPUCTL_HUMAN_H */
