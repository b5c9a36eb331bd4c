/*
 * jsonparse.h — a small bounded JSON reader (RFC 8259 text into a tree, hostile input first)
 * for what the library and the daemon read: IPUoF config files (client/wire/ipuof_conf.c),
 * POPLAR_ENGINE_OPTIONS's lexical pieces (client/model/engine_opts.c), IPUOF_FAULTS and the
 * daemon config's faults (daemon/state/faults.c), and, with larger limits, execution traces
 * (tools/util/timeline.c: ipuof-trace).
 *
 * Limits, checked as the text is read (these are ipuof_json_parse's; a caller reading larger
 * documents passes its own to ipuof_json_parse_limits): at most IPUOF_JSON_MAX_BYTES of
 * text, nesting at most IPUOF_JSON_MAX_DEPTH deep, at most IPUOF_JSON_MAX_ITEMS members or
 * elements in one object or array, strings at most IPUOF_JSON_MAX_STRING bytes once decoded.
 * A key given twice in one object is refused (a config file that says two things is a
 * mistake). Strings are decoded whole (every escape, \uXXXX with surrogate pairs); U+0000,
 * lone surrogates and malformed UTF-8 are refused. Numbers keep their double value and, when
 * they are whole and within +-2^53, is_int.
 *
 * Not installed, not exported: in libipuofproto (linked by the daemon) and in
 * libipuof-client (its .sym exports none of it). No I/O.
 */
#ifndef IPUOF_JSON_H
#define IPUOF_JSON_H

#include <stddef.h>

#define IPUOF_JSON_MAX_BYTES (64 * 1024)
#define IPUOF_JSON_MAX_DEPTH 16
#define IPUOF_JSON_MAX_ITEMS 4096
#define IPUOF_JSON_MAX_STRING 4096

enum ipuof_json_type {
    IPUOF_JSON_NULL,
    IPUOF_JSON_BOOL,
    IPUOF_JSON_NUMBER,
    IPUOF_JSON_STRING,
    IPUOF_JSON_ARRAY,
    IPUOF_JSON_OBJECT,
};

struct ipuof_json {
    enum ipuof_json_type type;
    int boolean;                 /* BOOL */
    double number;               /* NUMBER */
    int is_int;                  /* NUMBER: whole and |number| <= 2^53 */
    char *string;                /* STRING: NUL-terminated (no NUL inside) */
    size_t n;                    /* ARRAY / OBJECT: count of items */
    struct ipuof_json **items;   /* ARRAY / OBJECT: the values */
    char **keys;                 /* OBJECT: the keys, in file order */
    unsigned line, col;          /* where the value starts (1-based), for messages */
};

/*
 * Parses text[0..len) (not NUL-terminated necessarily) into *out: one value, surrounded
 * only by whitespace. Returns 0 with *out caller-owned (ipuof_json_free), or -1 with *out
 * NULL and a sentence in err[0..errlen) saying where ("line L, column C: ...") and what is
 * wrong. text is only read.
 */
int ipuof_json_parse(const char *text, size_t len, struct ipuof_json **out, char *err,
                     size_t errlen);

/* A reader's limits: text bytes, nesting depth, items in one array or object, and the
 * decoded bytes of one string. Memory stays bounded by the text: a string's copy is sized
 * by its raw length, never by max_string. */
struct ipuof_json_limits {
    size_t max_bytes;
    unsigned max_depth;
    size_t max_items;
    size_t max_string;
};

/* The limits above (IPUOF_JSON_MAX_*), those ipuof_json_parse applies. */
extern const struct ipuof_json_limits ipuof_json_config_limits;

/* ipuof_json_parse with the caller's limits (borrowed for the call; every field > 0). */
int ipuof_json_parse_limits(const char *text, size_t len, const struct ipuof_json_limits *lim,
                            struct ipuof_json **out, char *err, size_t errlen);

/* Frees a tree from ipuof_json_parse. NULL is a no-op. */
void ipuof_json_free(struct ipuof_json *j);

/* The value of key in object obj (borrowed from obj), or NULL when obj is not an object or
 * has no such key. */
const struct ipuof_json *ipuof_json_get(const struct ipuof_json *obj, const char *key);

/* "an object", "a string", ...: the type's name for messages. */
const char *ipuof_json_type_name(enum ipuof_json_type t);

/*
 * The lexical pieces of the reader, shared with the POPLAR_ENGINE_OPTIONS reader
 * (engine_opts.c), which reads its flat object by its own rule but spells strings and
 * numbers as this one does. Each reads only s[0..end).
 */

/* The character a one-letter escape \c stands for (c is one of " \\ / b f n r t) into
 * *cp: 0, or -1 for any other c (\u is read by the caller). */
int ipuof_json_escape(unsigned char c, unsigned *cp);

/* Four hex digits at s into *v: 0, or -1 when fewer than four or one is not hex. */
int ipuof_json_hex4(const unsigned char *s, const unsigned char *end, unsigned *v);

/* Appends code point cp as UTF-8 to out[*n..cap) and advances *n: 0, or -1 (nothing
 * written) when it would leave no room for a terminating NUL. */
int ipuof_json_put_utf8(char *out, size_t cap, size_t *n, unsigned cp);

/* One UTF-8 sequence at s (s[0] >= 0x80): its code point with its length in *len, or -1
 * when malformed (a bad lead or continuation byte, overlong, beyond U+10FFFF, a surrogate,
 * or cut short by end). */
long ipuof_json_utf8_at(const unsigned char *s, const unsigned char *end, unsigned *len);

/* The end of the RFC 8259 number at p, or NULL with *why saying what is wrong. */
const unsigned char *ipuof_json_number_end(const unsigned char *p, const unsigned char *end,
                                           const char **why);

#endif /* IPUOF_JSON_H */
