/*
 * human.c — byte counts, durations and terminal-safe text for ipuctl.
 */
#include "human.h"

#include <inttypes.h>
#include <stdio.h>

void
human_bytes(char *buf, size_t len, uint64_t n)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    size_t u = 0;
    uint64_t div = 1;

    while (u + 1 < sizeof units / sizeof units[0] && n / div >= 1024) {
        div *= 1024;
        u++;
    }
    if (n % div == 0)
        snprintf(buf, len, "%" PRIu64 " %s", n / div, units[u]);
    else
        snprintf(buf, len, "%.1f %s", (double)n / (double)div, units[u]);
}

void
human_duration(char *buf, size_t len, uint64_t ms)
{
    uint64_t s = ms / 1000;

    if (ms < 1000)
        snprintf(buf, len, "%" PRIu64 "ms", ms);
    else if (s < 60)
        snprintf(buf, len, "%" PRIu64 "s", s);
    else if (s < 3600)
        snprintf(buf, len, "%" PRIu64 "m %02" PRIu64 "s", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, len, "%" PRIu64 "h %02" PRIu64 "m", s / 3600, s / 60 % 60);
    else
        snprintf(buf, len, "%" PRIu64 "d %02" PRIu64 "h", s / 86400, s / 3600 % 24);
}

size_t
human_utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t n;
    unsigned cp;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1fu;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0fu;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07u;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0; /* also stops at the terminating NUL */
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0; /* overlong, out of range, or a surrogate */
    return n;
}

void
human_sanitize(char *dst, size_t len, const char *src)
{
    const unsigned char *p = (const unsigned char *)(src != NULL ? src : "");
    size_t i = 0;

    if (len == 0)
        return;
    while (*p != '\0' && i + 1 < len) {
        size_t n = human_utf8_len(p);

        if (n == 0 || *p < 0x20 || *p == 0x7f) {
            dst[i++] = '?';
            p++;
            continue;
        }
        if (i + n >= len)
            break; /* never cut a character in half */
        for (size_t k = 0; k < n; k++)
            dst[i++] = (char)p[k];
        p += n;
    }
    dst[i] = '\0';
}

size_t
human_width(const char *s)
{
    size_t w = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
        w += (*p & 0xc0) != 0x80; /* count every byte that starts a character */
    return w;
}
