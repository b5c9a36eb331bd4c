/*
 * engine_opts.c — POPLAR_ENGINE_OPTIONS as Poplar reads it, by one rule that the Python
 * package (python/ipuof/profiling.py, engine_options) follows too; the cases both test are
 * in tests/data/engine_options.tsv.
 *
 * The rule:
 *   - the value is UTF-8 JSON text (RFC 8259) of at most IPUOF_ENGINE_OPTIONS_MAX bytes: one
 *     object whose values are strings, numbers or true / false (no nesting, no null, no
 *     NaN or Infinity); strings are decoded whole (every escape, \uXXXX and surrogate pairs
 *     included); a key or string holding U+0000 or a lone surrogate is refused;
 *   - a key given twice takes its last value;
 *   - profiling is on when autoReport.all or autoReport.outputExecutionProfile is true;
 *     those two take true / false or "true" / "false" and nothing else (as Poplar's boolean
 *     options: "True", "1" and 1 are refused, with what would be right);
 *   - autoReport.directory, when given, is a non-empty string shorter than the directory
 *     buffer; the default is ".";
 *   - every other key is Poplar's business and is accepted and ignored.
 *
 * Strings and numbers are spelled by jsonparse.c's lexical pieces (ipuof_json_hex4, _put_utf8,
 * _utf8_at, _number_end); the object itself is read here, not by ipuof_json_parse, because
 * this rule differs from the config files' one: a key given twice is allowed (its last value
 * counts), each member is judged as it is read (the first fault in the text is the one
 * reported, as Python's reader reports it), and numbers are Poplar's business (no limit on
 * their length or size).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "jsonparse.h"
#include "model_internal.h"

struct eo_reader {
    const unsigned char *s, *end; /* the value, NUL-terminated at end */
    char *why;
    size_t why_len;
};

/* Sets the reason (the sentence after "POPLAR_ENGINE_OPTIONS ") and returns -1. */
static int
eo_fail(struct eo_reader *r, const char *what)
{
    snprintf(r->why, r->why_len, "%s", what);
    return -1;
}

static void
eo_ws(struct eo_reader *r)
{
    while (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r')
        r->s++;
}

/* Four hex digits at r->s into *v, past them; 0 or -1. */
static int
eo_hex4(struct eo_reader *r, unsigned *v)
{
    if (ipuof_json_hex4(r->s, r->end, v) < 0)
        return -1;
    r->s += 4;
    return 0;
}

/* Appends code point cp as UTF-8 to out (n used of len; a string that does not fit is
 * marked by *n = len, so it compares unequal to everything and a directory is refused). */
static void
eo_put(char *out, size_t len, size_t *n, unsigned cp)
{
    if (ipuof_json_put_utf8(out, len, n, cp) < 0)
        *n = len;
    else
        out[*n] = '\0';
}

/* One UTF-8 sequence at r->s (not ASCII), past it: its code point, or -1 when malformed. */
static long
eo_utf8(struct eo_reader *r)
{
    unsigned k;
    long cp = ipuof_json_utf8_at(r->s, r->end, &k);

    if (cp >= 0)
        r->s += k;
    return cp;
}

/* A JSON string at r->s (its opening quote) decoded into out[0..len) (UTF-8). 0 or -1. */
static int
eo_string(struct eo_reader *r, char *out, size_t len)
{
    size_t n = 0;

    out[0] = '\0';
    r->s++;
    for (;;) {
        unsigned char ch = *r->s;
        unsigned cp, lo;

        if (ch == '"') {
            r->s++;
            return 0;
        }
        if (ch == '\0')
            return eo_fail(r, "has a string without its closing quote");
        if (ch < 0x20)
            return eo_fail(r, "has a control character inside a string (write it as \\n, "
                              "\\t or \\u00XX)");
        if (ch >= 0x80) {
            long c = eo_utf8(r);
            if (c < 0)
                return eo_fail(r, "is not valid UTF-8");
            eo_put(out, len, &n, (unsigned)c);
            continue;
        }
        r->s++;
        if (ch != '\\') {
            eo_put(out, len, &n, ch);
            continue;
        }
        ch = *r->s++;
        switch (ch) {
        case 'u':
            if (eo_hex4(r, &cp) < 0)
                return eo_fail(r, "has a \\u escape without four hex digits");
            if (cp >= 0xdc00 && cp <= 0xdfff)
                return eo_fail(r, "has a lone low surrogate (\\uDC00-\\uDFFF) in a string");
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (r->s[0] != '\\' || r->s[1] != 'u')
                    return eo_fail(r, "has a lone high surrogate (\\uD800-\\uDBFF) in a string");
                r->s += 2;
                if (eo_hex4(r, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
                    return eo_fail(r, "has a lone high surrogate (\\uD800-\\uDBFF) in a string");
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (cp == 0)
                return eo_fail(r, "has \\u0000 in a string");
            break;
        default:
            if (ipuof_json_escape(ch, &cp) == 0)
                break;
            return eo_fail(r, "has an escape JSON does not know (\\\" \\\\ \\/ \\b \\f \\n "
                              "\\r \\t \\uXXXX)");
        }
        eo_put(out, len, &n, cp);
    }
}

/* A JSON number at r->s, its text into out[0..len). 0 or -1. */
static int
eo_number(struct eo_reader *r, char *out, size_t len)
{
    const char *why;
    const unsigned char *end = ipuof_json_number_end(r->s, r->end, &why);

    if (end == NULL)
        return -1;
    snprintf(out, len, "%.*s", (int)(end - r->s), (const char *)r->s);
    r->s = end;
    return 0;
}

/* ipuof_engine_options without the sentence around the reason why[0..why_len). */
static int
eo_parse(const char *v, int *profile, char *dir, size_t dir_len, char *why, size_t why_len)
{
    struct eo_reader r = {(const unsigned char *)v, (const unsigned char *)v + strlen(v), why,
                          why_len};
    char key[128], val[IPUOF_ENGINE_OPTIONS_MAX + 1];
    int all = 0, oep = 0;

    *profile = 0;
    snprintf(dir, dir_len, ".");
    if (strlen(v) > IPUOF_ENGINE_OPTIONS_MAX)
        return eo_fail(&r, "is longer than 4096 bytes");
    eo_ws(&r);
    if (*r.s != '{')
        return eo_fail(&r, "is not a JSON object (it must start with '{')");
    r.s++;
    eo_ws(&r);
    if (*r.s == '}') {
        r.s++;
        goto end;
    }
    for (;;) {
        int is_string = 0, *flag = NULL;

        eo_ws(&r);
        if (*r.s != '"')
            return eo_fail(&r, "has a key that is not a string");
        if (eo_string(&r, key, sizeof key) < 0)
            return -1;
        eo_ws(&r);
        if (*r.s++ != ':')
            return eo_fail(&r, "has a key without ':' and a value");
        eo_ws(&r);
        if (*r.s == '"') {
            if (eo_string(&r, val, sizeof val) < 0)
                return -1;
            is_string = 1;
        } else if (strncmp((const char *)r.s, "true", 4) == 0) {
            snprintf(val, sizeof val, "true");
            r.s += 4;
        } else if (strncmp((const char *)r.s, "false", 5) == 0) {
            snprintf(val, sizeof val, "false");
            r.s += 5;
        } else if (eo_number(&r, val, sizeof val) < 0) {
            return eo_fail(&r, "has a value that is not a string, a number, true or false "
                               "(objects, arrays, null, NaN and Infinity are not options)");
        }
        if (strcmp(key, "autoReport.all") == 0)
            flag = &all;
        else if (strcmp(key, "autoReport.outputExecutionProfile") == 0)
            flag = &oep;
        if (flag != NULL) {
            if (strcmp(val, "true") != 0 && strcmp(val, "false") != 0) {
                snprintf(why, why_len, "sets %s to %s%.60s%s; it takes true or false (or the "
                         "strings \"true\" and \"false\", as Poplar's boolean options)", key,
                         is_string ? "\"" : "", val, is_string ? "\"" : "");
                return -1;
            }
            *flag = strcmp(val, "true") == 0;
        }
        if (strcmp(key, "autoReport.directory") == 0) {
            if (!is_string || val[0] == '\0' || strlen(val) >= dir_len)
                return eo_fail(&r, "sets autoReport.directory to something other than a "
                                   "directory name (a non-empty JSON string shorter than "
                                   "4096 bytes)");
            snprintf(dir, dir_len, "%s", val);
        }
        eo_ws(&r);
        if (*r.s == '}') {
            r.s++;
            break;
        }
        if (*r.s++ != ',')
            return eo_fail(&r, "has a value not followed by ',' or '}'");
    }
end:
    eo_ws(&r);
    if (*r.s != '\0')
        return eo_fail(&r, "has text after its closing '}'");
    *profile = all || oep;
    return 0;
}

int
ipuof_engine_options(const char *v, int *profile, char *dir, size_t dir_len, char *why,
                     size_t why_len)
{
    char reason[300];

    if (eo_parse(v, profile, dir, dir_len, reason, sizeof reason) == 0)
        return 0;
    *profile = 0;
    snprintf(why, why_len, "POPLAR_ENGINE_OPTIONS %s: expected a flat JSON object of strings, "
             "numbers and true/false of at most %d bytes, such as {\"autoReport.all\":"
             "\"true\", \"autoReport.directory\":\"./report\"}", reason,
             IPUOF_ENGINE_OPTIONS_MAX);
    return -1;
}
