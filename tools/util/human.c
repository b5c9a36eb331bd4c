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

void
human_sanitize(char *dst, size_t len, const char *src)
{
    size_t i = 0;

    if (len == 0)
        return;
    for (; src != NULL && src[i] != '\0' && i + 1 < len; i++) {
        unsigned char ch = (unsigned char)src[i];
        dst[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    dst[i] = '\0';
}
