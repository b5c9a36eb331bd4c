/*
 * jsonread.c — see jsonread.h. A recursive-descent parser (RFC 8259) whose depth is bounded
 * by JR_MAX_DEPTH; every value, string and child array comes from one growing list of
 * blocks owned by the document.
 */
#include "jsonread.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One allocation of the document (a singly linked list freed by jr_free()). */
struct jr_block {
    struct jr_block *next;
    max_align_t data[];
};

struct jr_doc {
    struct jr_block *blocks;
};

struct parser {
    const char *s, *end, *start;
    struct jr_doc *doc;
    char *err;
    size_t errlen;
    int failed;
};

static int
fail(struct parser *p, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (p->failed)
        return -1;
    p->failed = 1;
    n = snprintf(p->err, p->errlen, "at byte %zu: ", (size_t)(p->s - p->start));
    if (n < 0 || (size_t)n >= p->errlen)
        return -1;
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* size bytes owned by the document, or NULL. */
static void *
take(struct parser *p, size_t size)
{
    struct jr_block *b = malloc(sizeof *b + size + 1);

    if (b == NULL) {
        fail(p, "out of memory");
        return NULL;
    }
    b->next = p->doc->blocks;
    p->doc->blocks = b;
    return b->data;
}

static void
skip_ws(struct parser *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static int
hex4(struct parser *p, unsigned *out)
{
    unsigned v = 0;

    if (p->end - p->s < 4)
        return fail(p, "a \\u escape needs four hex digits");
    for (int i = 0; i < 4; i++) {
        char c = *p->s++;
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return fail(p, "'%c' is not a hex digit of a \\u escape", c);
    }
    *out = v;
    return 0;
}

/* Appends code point cp as UTF-8 to out[*n]. */
static void
put_utf8(char *out, size_t *n, unsigned cp)
{
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xc0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xe0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*n)++] = (char)(0xf0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* Reads a string after its opening quote into a document-owned buffer. */
static int
string(struct parser *p, const char **out, size_t *outlen)
{
    const char *q = p->s;
    size_t n = 0;
    char *buf;

    while (q < p->end && *q != '"')
        q += *q == '\\' && q + 1 < p->end ? 2 : 1;
    if (q >= p->end)
        return fail(p, "a string is not closed");
    /* unescaping never grows the text (\uXXXX: 6 bytes -> at most 3, pairs 12 -> 4) */
    buf = take(p, (size_t)(q - p->s) + 1);
    if (buf == NULL)
        return -1;
    while (*p->s != '"') {
        unsigned char c = (unsigned char)*p->s++;
        unsigned cp, lo;

        if (c < 0x20)
            return fail(p, "a control character inside a string must be escaped");
        if (c != '\\') {
            buf[n++] = (char)c;
            continue;
        }
        c = (unsigned char)*p->s++;
        switch (c) {
        case '"': case '\\': case '/': buf[n++] = (char)c; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u':
            if (hex4(p, &cp) < 0)
                return -1;
            if (cp >= 0xd800 && cp < 0xdc00 && p->end - p->s >= 6 && p->s[0] == '\\' &&
                p->s[1] == 'u') {
                p->s += 2;
                if (hex4(p, &lo) < 0)
                    return -1;
                cp = lo >= 0xdc00 && lo < 0xe000 ? 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00)
                                                 : 0xfffd;
            } else if (cp >= 0xd800 && cp < 0xe000) {
                cp = 0xfffd;
            }
            put_utf8(buf, &n, cp);
            break;
        default:
            return fail(p, "'\\%c' is not a JSON escape", c);
        }
    }
    p->s++;
    buf[n] = '\0';
    *out = buf;
    *outlen = n;
    return 0;
}

static struct jr_value *value(struct parser *p, int depth);

/* Reads an array or object after its opening bracket; kids (and keys) in document blocks. */
static int
container(struct parser *p, struct jr_value *v, int depth)
{
    char close = v->type == JR_ARRAY ? ']' : '}';
    size_t cap = 0;

    skip_ws(p);
    if (p->s < p->end && *p->s == close) {
        p->s++;
        return 0;
    }
    for (;;) {
        const char *key = NULL;
        size_t keylen;
        struct jr_value *kid;

        skip_ws(p);
        if (v->type == JR_OBJECT) {
            if (p->s >= p->end || *p->s != '"')
                return fail(p, "an object member must start with a quoted name");
            p->s++;
            if (string(p, &key, &keylen) < 0)
                return -1;
            skip_ws(p);
            if (p->s >= p->end || *p->s != ':')
                return fail(p, "':' must follow the member name '%.40s'", key);
            p->s++;
        }
        kid = value(p, depth + 1);
        if (kid == NULL)
            return -1;
        if (v->n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            struct jr_value **nk = take(p, ncap * sizeof *nk);
            const char **nkeys = v->type == JR_OBJECT ? take(p, ncap * sizeof *nkeys) : NULL;

            if (nk == NULL || (v->type == JR_OBJECT && nkeys == NULL))
                return -1;
            if (v->n > 0) {
                memcpy(nk, v->kids, v->n * sizeof *nk);
                if (nkeys != NULL)
                    memcpy(nkeys, v->keys, v->n * sizeof *nkeys);
            }
            v->kids = nk;
            v->keys = nkeys;
            cap = ncap;
        }
        if (v->keys != NULL)
            v->keys[v->n] = key;
        v->kids[v->n++] = kid;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == close) {
            p->s++;
            return 0;
        }
        return fail(p, "',' or '%c' expected", close);
    }
}

static int
number(struct parser *p, struct jr_value *v)
{
    char buf[64];
    const char *q = p->s;
    char *end;
    size_t n;

    while (q < p->end && (strchr("0123456789+-.eE", *q) != NULL))
        q++;
    n = (size_t)(q - p->s);
    if (n == 0 || n >= sizeof buf)
        return fail(p, "a value expected (a number, string, array, object, true, false or "
                       "null)");
    memcpy(buf, p->s, n);
    buf[n] = '\0';
    errno = 0;
    v->num = strtod(buf, &end);
    if (*end != '\0' || !isfinite(v->num))
        return fail(p, "'%s' is not a finite number", buf);
    p->s = q;
    return 0;
}

static struct jr_value *
value(struct parser *p, int depth)
{
    struct jr_value *v;

    if (depth > JR_MAX_DEPTH) {
        fail(p, "nested deeper than %d", JR_MAX_DEPTH);
        return NULL;
    }
    skip_ws(p);
    if (p->s >= p->end) {
        fail(p, "the document ends where a value was expected");
        return NULL;
    }
    v = take(p, sizeof *v);
    if (v == NULL)
        return NULL;
    memset(v, 0, sizeof *v);
    switch (*p->s) {
    case '{': case '[':
        v->type = *p->s == '{' ? JR_OBJECT : JR_ARRAY;
        p->s++;
        return container(p, v, depth) < 0 ? NULL : v;
    case '"':
        v->type = JR_STRING;
        p->s++;
        return string(p, &v->str, &v->len) < 0 ? NULL : v;
    case 't': case 'f': case 'n': {
        static const char *const words[3] = {"true", "false", "null"};
        for (int i = 0; i < 3; i++) {
            size_t wl = strlen(words[i]);
            if ((size_t)(p->end - p->s) >= wl && memcmp(p->s, words[i], wl) == 0) {
                p->s += wl;
                v->type = i == 2 ? JR_NULL : JR_BOOL;
                v->num = i == 0;
                return v;
            }
        }
        fail(p, "a value expected (true, false or null?)");
        return NULL;
    }
    default:
        v->type = JR_NUMBER;
        return number(p, v) < 0 ? NULL : v;
    }
}

int
jr_parse(const char *text, size_t len, struct jr_doc **doc, const struct jr_value **root,
         char *err, size_t errlen)
{
    struct parser p = {.s = text, .end = text + len, .start = text, .err = err,
                       .errlen = errlen};
    const struct jr_value *v;

    *doc = NULL;
    *root = NULL;
    if (errlen > 0)
        err[0] = '\0';
    p.doc = calloc(1, sizeof *p.doc);
    if (p.doc == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    v = value(&p, 0);
    if (v != NULL) {
        skip_ws(&p);
        if (p.s != p.end) {
            fail(&p, "text after the end of the document");
            v = NULL;
        }
    }
    if (v == NULL) {
        jr_free(p.doc);
        return -1;
    }
    *doc = p.doc;
    *root = v;
    return 0;
}

void
jr_free(struct jr_doc *doc)
{
    if (doc == NULL)
        return;
    while (doc->blocks != NULL) {
        struct jr_block *b = doc->blocks;
        doc->blocks = b->next;
        free(b);
    }
    free(doc);
}

const struct jr_value *
jr_get(const struct jr_value *v, const char *key)
{
    if (v == NULL || v->type != JR_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0)
            return v->kids[i];
    return NULL;
}

double
jr_num(const struct jr_value *v, double dflt)
{
    return v != NULL && v->type == JR_NUMBER ? v->num : dflt;
}

const char *
jr_str(const struct jr_value *v)
{
    return v != NULL && v->type == JR_STRING ? v->str : NULL;
}
