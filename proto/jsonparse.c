/*
 * jsonparse.c — see jsonparse.h. A recursive-descent reader whose depth is bounded before it
 * recurses, and whose every allocation is bounded by the text's size.
 */
#include "jsonparse.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jr {
    const unsigned char *s, *end, *line_start;
    unsigned line;
    char *err;
    size_t errlen;
    int failed;
    const struct ipuof_json_limits *lim;
};

const struct ipuof_json_limits ipuof_json_config_limits = {
    IPUOF_JSON_MAX_BYTES, IPUOF_JSON_MAX_DEPTH, IPUOF_JSON_MAX_ITEMS, IPUOF_JSON_MAX_STRING};

/* Records the first failure at the reader's position; returns NULL for the callers. */
__attribute__((format(printf, 2, 3))) static struct ipuof_json *
jr_fail(struct jr *r, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (r->failed)
        return NULL;
    r->failed = 1;
    n = snprintf(r->err, r->errlen, "line %u, column %u: ", r->line,
                 (unsigned)(r->s - r->line_start) + 1);
    if (n >= 0 && (size_t)n < r->errlen) {
        va_start(ap, fmt);
        vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return NULL;
}

static void
jr_ws(struct jr *r)
{
    while (r->s < r->end && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r')) {
        if (*r->s == '\n') {
            r->line++;
            r->line_start = r->s + 1;
        }
        r->s++;
    }
}

/* A new node of type t at the reader's position, or NULL (failure recorded). */
static struct ipuof_json *
jr_node(struct jr *r, enum ipuof_json_type t)
{
    struct ipuof_json *j = calloc(1, sizeof *j);

    if (j == NULL)
        return jr_fail(r, "out of memory");
    j->type = t;
    j->line = r->line;
    j->col = (unsigned)(r->s - r->line_start) + 1;
    return j;
}

/* What is at the reader's position, for "found ..." in messages. */
static const char *
jr_found(const struct jr *r)
{
    if (r->s >= r->end)
        return "the end of the text";
    if (*r->s < 0x20)
        return "a control character";
    return "a byte that starts no value";
}

int
ipuof_json_hex4(const unsigned char *s, const unsigned char *end, unsigned *v)
{
    *v = 0;
    if (end - s < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        unsigned ch = s[i];
        unsigned d = ch >= '0' && ch <= '9'   ? ch - '0'
                     : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10u
                     : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10u
                                              : 16u;
        if (d == 16)
            return -1;
        *v = *v * 16 + d;
    }
    return 0;
}

int
ipuof_json_put_utf8(char *out, size_t cap, size_t *n, unsigned cp)
{
    unsigned char b[4];
    size_t k;

    if (cp < 0x80) {
        b[0] = (unsigned char)cp, k = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xc0 | cp >> 6), b[1] = (unsigned char)(0x80 | (cp & 0x3f));
        k = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xe0 | cp >> 12);
        b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        b[2] = (unsigned char)(0x80 | (cp & 0x3f));
        k = 3;
    } else {
        b[0] = (unsigned char)(0xf0 | cp >> 18);
        b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
        b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        b[3] = (unsigned char)(0x80 | (cp & 0x3f));
        k = 4;
    }
    if (*n + k >= cap)
        return -1;
    memcpy(out + *n, b, k);
    *n += k;
    return 0;
}

long
ipuof_json_utf8_at(const unsigned char *s, const unsigned char *end, unsigned *len)
{
    unsigned cp, k;

    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        cp = s[0] & 0x1fu, k = 1;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        cp = s[0] & 0x0fu, k = 2;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        cp = s[0] & 0x07u, k = 3;
    else
        return -1;
    if (end - s <= (long)k)
        return -1;
    for (unsigned i = 1; i <= k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return -1;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return -1;
    *len = k + 1;
    return (long)cp;
}

int
ipuof_json_escape(unsigned char c, unsigned *cp)
{
    static const char letters[] = "\"\\/bfnrt", chars[] = "\"\\/\b\f\n\r\t";
    const char *at = c != '\0' ? strchr(letters, c) : NULL;

    if (at == NULL)
        return -1;
    *cp = (unsigned char)chars[at - letters];
    return 0;
}

/* The raw bytes from s (after an opening quote) to the closing quote or the end: no string
 * decodes to more bytes than it takes in the text. */
static size_t
jr_raw_len(const unsigned char *s, const unsigned char *end)
{
    const unsigned char *p = s;

    while (p < end && *p != '"')
        p += *p == '\\' && p + 1 < end ? 2 : 1;
    return (size_t)(p - s);
}

/* A string at r->s (the opening quote) into a new malloc'ed NUL-terminated copy, or NULL
 * (failure recorded). The copy is sized by the string's raw length, capped at the limit
 * (so a string longer than the limit still fails with its own message). */
static char *
jr_string(struct jr *r)
{
    size_t raw = jr_raw_len(r->s + 1, r->end);
    size_t cap = (raw < r->lim->max_string ? raw : r->lim->max_string) + 1;
    char *out = malloc(cap);
    size_t n = 0;

    if (out == NULL) {
        jr_fail(r, "out of memory");
        return NULL;
    }
    r->s++;
    for (;;) {
        unsigned cp, len;
        long u;

        if (r->s >= r->end) {
            jr_fail(r, "a string is not closed: expected '\"' before the end of the text");
            goto error;
        }
        if (*r->s == '"') {
            r->s++;
            break;
        }
        if (*r->s < 0x20) {
            jr_fail(r, "a control character (0x%02x) inside a string; write it as an escape "
                    "such as \\n or \\u00XX", *r->s);
            goto error;
        }
        if (*r->s == '\\') {
            const unsigned char *at = r->s;
            if (r->end - r->s < 2) {
                jr_fail(r, "a string ends inside an escape");
                goto error;
            }
            switch (r->s[1]) {
            case 'u':
                if (ipuof_json_hex4(r->s + 2, r->end, &cp) < 0) {
                    jr_fail(r, "\\u must be followed by four hex digits");
                    goto error;
                }
                r->s += 4;
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    unsigned lo;
                    if (r->end - r->s < 8 || r->s[2] != '\\' || r->s[3] != 'u' ||
                        ipuof_json_hex4(r->s + 4, r->end, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff) {
                        r->s = at;
                        jr_fail(r, "a lone UTF-16 surrogate \\u%04X in a string", cp);
                        goto error;
                    }
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    r->s += 6;
                } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                    r->s = at;
                    jr_fail(r, "a lone UTF-16 surrogate \\u%04X in a string", cp);
                    goto error;
                }
                if (cp == 0) {
                    r->s = at;
                    jr_fail(r, "\\u0000 (NUL) inside a string is not accepted");
                    goto error;
                }
                break;
            default:
                if (ipuof_json_escape(r->s[1], &cp) == 0)
                    break;
                r->s++;
                jr_fail(r, "unknown escape '\\%c' in a string; the escapes are \\\" \\\\ \\/ "
                        "\\b \\f \\n \\r \\t \\uXXXX", *r->s >= 0x20 && *r->s < 0x7f ? *r->s : '?');
                goto error;
            }
            r->s += 2;
        } else if (*r->s < 0x80) {
            cp = *r->s++;
        } else {
            u = ipuof_json_utf8_at(r->s, r->end, &len);
            if (u < 0) {
                jr_fail(r, "malformed UTF-8 (byte 0x%02x) in a string", *r->s);
                goto error;
            }
            cp = (unsigned)u;
            r->s += len;
        }
        if (ipuof_json_put_utf8(out, cap, &n, cp) < 0) {
            jr_fail(r, "a string is longer than %zu bytes", r->lim->max_string);
            goto error;
        }
    }
    out[n] = '\0';
    return out;
error:
    free(out);
    return NULL;
}

const unsigned char *
ipuof_json_number_end(const unsigned char *p, const unsigned char *end, const char **why)
{
    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0') {
        p++;
    } else if (p < end && *p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    } else {
        *why = "a number must start with a digit or '-' and a digit";
        return NULL;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') {
            *why = "a number's '.' must be followed by a digit";
            return NULL;
        }
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || *p < '0' || *p > '9') {
            *why = "a number's exponent must have a digit";
            return NULL;
        }
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    return p;
}

/* A number at r->s, as RFC 8259 spells it. */
static struct ipuof_json *
jr_number(struct jr *r)
{
    const char *why = NULL;
    const unsigned char *p = ipuof_json_number_end(r->s, r->end, &why);
    char buf[64];
    struct ipuof_json *j;
    size_t k;

    if (p == NULL)
        return jr_fail(r, "%s", why);
    k = (size_t)(p - r->s);
    if (k >= sizeof buf)
        return jr_fail(r, "a number of %zu characters; at most %zu are accepted", k,
                       sizeof buf - 1);
    j = jr_node(r, IPUOF_JSON_NUMBER);
    if (j == NULL)
        return NULL;
    memcpy(buf, r->s, k);
    buf[k] = '\0';
    j->number = strtod(buf, NULL);
    if (!isfinite(j->number)) {
        free(j);
        return jr_fail(r, "the number %s is too large", buf);
    }
    j->is_int = fabs(j->number) <= 9007199254740992.0 && floor(j->number) == j->number;
    r->s = p;
    return j;
}

static struct ipuof_json *jr_value(struct jr *r, unsigned depth);

/* Appends v (and key, for an object) to container j. 0, or -1 (failure recorded; v and
 * key freed). */
static int
jr_append(struct jr *r, struct ipuof_json *j, struct ipuof_json *v, char *key)
{
    if (j->n >= r->lim->max_items) {
        jr_fail(r, "more than %zu items in one %s", r->lim->max_items,
                j->type == IPUOF_JSON_OBJECT ? "object" : "array");
        goto error;
    }
    if ((j->n & (j->n - 1)) == 0) { /* grow at 0, 1, 2, 4, ... */
        size_t cap = j->n ? j->n * 2 : 1;
        struct ipuof_json **items = realloc(j->items, cap * sizeof *items);
        if (items == NULL)
            goto oom;
        j->items = items;
        if (j->type == IPUOF_JSON_OBJECT) {
            char **keys = realloc(j->keys, cap * sizeof *keys);
            if (keys == NULL)
                goto oom;
            j->keys = keys;
        }
    }
    j->items[j->n] = v;
    if (j->type == IPUOF_JSON_OBJECT)
        j->keys[j->n] = key;
    j->n++;
    return 0;
oom:
    jr_fail(r, "out of memory");
error:
    ipuof_json_free(v);
    free(key);
    return -1;
}

/* An array or object at r->s ('[' or '{'). */
static struct ipuof_json *
jr_container(struct jr *r, unsigned depth)
{
    int obj = *r->s == '{';
    char close = obj ? '}' : ']';
    struct ipuof_json *j = jr_node(r, obj ? IPUOF_JSON_OBJECT : IPUOF_JSON_ARRAY);

    if (j == NULL)
        return NULL;
    if (depth >= r->lim->max_depth) {
        free(j);
        return jr_fail(r, "values nested more than %u deep", r->lim->max_depth);
    }
    r->s++;
    jr_ws(r);
    if (r->s < r->end && *r->s == close) {
        r->s++;
        return j;
    }
    for (;;) {
        char *key = NULL;
        struct ipuof_json *v;

        jr_ws(r);
        if (obj) {
            if (r->s >= r->end || *r->s != '"') {
                if (r->s < r->end && *r->s >= 0x20 && *r->s < 0x7f)
                    jr_fail(r, "expected a member name in double quotes, found '%c'", *r->s);
                else
                    jr_fail(r, "expected a member name in double quotes, found %s",
                            jr_found(r));
                goto error;
            }
            key = jr_string(r);
            if (key == NULL)
                goto error;
            for (size_t i = 0; i < j->n; i++) {
                if (strcmp(j->keys[i], key) == 0) {
                    jr_fail(r, "the member \"%.64s\" appears twice in one object", key);
                    free(key);
                    goto error;
                }
            }
            jr_ws(r);
            if (r->s >= r->end || *r->s != ':') {
                jr_fail(r, "expected ':' after the member name \"%.64s\"", key);
                free(key);
                goto error;
            }
            r->s++;
        }
        v = jr_value(r, depth + 1);
        if (v == NULL) {
            free(key);
            goto error;
        }
        if (jr_append(r, j, v, key) < 0)
            goto error;
        jr_ws(r);
        if (r->s < r->end && *r->s == ',') {
            r->s++;
            continue;
        }
        if (r->s < r->end && *r->s == close) {
            r->s++;
            return j;
        }
        jr_fail(r, "expected ',' or '%c' after %s", close, obj ? "a member" : "an element");
        goto error;
    }
error:
    ipuof_json_free(j);
    return NULL;
}

static struct ipuof_json *
jr_value(struct jr *r, unsigned depth)
{
    struct ipuof_json *j;
    static const struct {
        const char *word;
        enum ipuof_json_type t;
        int b;
    } words[] = {{"true", IPUOF_JSON_BOOL, 1}, {"false", IPUOF_JSON_BOOL, 0},
                 {"null", IPUOF_JSON_NULL, 0}};

    jr_ws(r);
    if (r->s >= r->end)
        return jr_fail(r, "expected a value, found the end of the text");
    if (*r->s == '{' || *r->s == '[')
        return jr_container(r, depth);
    if (*r->s == '"') {
        j = jr_node(r, IPUOF_JSON_STRING);
        if (j == NULL)
            return NULL;
        j->string = jr_string(r);
        if (j->string == NULL) {
            free(j);
            return NULL;
        }
        return j;
    }
    if (*r->s == '-' || (*r->s >= '0' && *r->s <= '9'))
        return jr_number(r);
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t k = strlen(words[i].word);
        if ((size_t)(r->end - r->s) >= k && memcmp(r->s, words[i].word, k) == 0) {
            j = jr_node(r, words[i].t);
            if (j != NULL)
                j->boolean = words[i].b;
            r->s += k;
            return j;
        }
    }
    if (*r->s >= 0x20 && *r->s < 0x7f)
        return jr_fail(r, "expected a value (an object, array, string, number, true, false "
                       "or null), found '%c'", *r->s);
    return jr_fail(r, "expected a value, found %s (byte 0x%02x)", jr_found(r), *r->s);
}

int
ipuof_json_parse(const char *text, size_t len, struct ipuof_json **out, char *err,
                 size_t errlen)
{
    return ipuof_json_parse_limits(text, len, &ipuof_json_config_limits, out, err, errlen);
}

int
ipuof_json_parse_limits(const char *text, size_t len, const struct ipuof_json_limits *lim,
                        struct ipuof_json **out, char *err, size_t errlen)
{
    struct jr r = {(const unsigned char *)text, (const unsigned char *)text + len,
                   (const unsigned char *)text, 1, err, errlen, 0, lim};
    struct ipuof_json *j;

    *out = NULL;
    if (errlen > 0)
        err[0] = '\0';
    if (len > lim->max_bytes) {
        snprintf(err, errlen, "%zu bytes of JSON; at most %zu are accepted", len,
                 lim->max_bytes);
        return -1;
    }
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) /* a UTF-8 byte order mark */
        r.s += 3, r.line_start += 3;
    j = jr_value(&r, 0);
    if (j == NULL)
        return -1;
    jr_ws(&r);
    if (r.s < r.end) {
        jr_fail(&r, "unexpected text after the value (a second value, or a trailing comma?)");
        ipuof_json_free(j);
        return -1;
    }
    *out = j;
    return 0;
}

void
ipuof_json_free(struct ipuof_json *j)
{
    if (j == NULL)
        return;
    for (size_t i = 0; i < j->n; i++) {
        ipuof_json_free(j->items[i]);
        if (j->keys != NULL)
            free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->string);
    free(j);
}

const struct ipuof_json *
ipuof_json_get(const struct ipuof_json *obj, const char *key)
{
    if (obj == NULL || obj->type != IPUOF_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}

const char *
ipuof_json_type_name(enum ipuof_json_type t)
{
    switch (t) {
    case IPUOF_JSON_NULL: return "null";
    case IPUOF_JSON_BOOL: return "a boolean";
    case IPUOF_JSON_NUMBER: return "a number";
    case IPUOF_JSON_STRING: return "a string";
    case IPUOF_JSON_ARRAY: return "an array";
    case IPUOF_JSON_OBJECT: return "an object";
    }
    return "a value";
}
