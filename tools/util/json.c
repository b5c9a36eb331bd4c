/*
 * json.c — JSON string escaping (RFC 8259 section 7) for ipuctl's --json output.
 */
#include "json.h"

#include <stddef.h>

#include "human.h"

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
            n = human_utf8_len(p);
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
