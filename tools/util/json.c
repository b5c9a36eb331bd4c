/*
 * json.c — JSON string escaping (RFC 8259 section 7) for ipuctl's --json output.
 */
#include "json.h"

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when s does not start one. */
static size_t
utf8_len(const unsigned char *s)
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
json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    if (s == NULL) {
        fputs("null", f);
        return;
    }
    putc('"', f);
    while (*p != '\0') {
        size_t n;

        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\b':
            fputs("\\b", f);
            break;
        case '\f':
            fputs("\\f", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                fprintf(f, "\\u%04x", *p);
                break;
            }
            n = utf8_len(p);
            if (n == 0) {
                fputs("\\ufffd", f);
                break;
            }
            fwrite(p, 1, n, f);
            p += n;
            continue;
        }
        p++;
    }
    putc('"', f);
}

void
json_string_or_null(FILE *f, const char *s)
{
    json_string(f, s != NULL && s[0] != '\0' ? s : NULL);
}
