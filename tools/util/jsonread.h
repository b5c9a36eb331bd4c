/*
 * jsonread.h — a small JSON reader for the tools: parses a document into a tree of values
 * held in one allocation per document (freed at once), with a nesting limit, and finds
 * members by name. Numbers are doubles; strings are unescaped to UTF-8 (\uXXXX included,
 * surrogate pairs joined, a lone surrogate becomes U+FFFD).
 */
#ifndef IPUOF_TOOLS_JSONREAD_H
#define IPUOF_TOOLS_JSONREAD_H

#include <stddef.h>

#define JR_MAX_DEPTH 64

enum jr_type { JR_NULL, JR_BOOL, JR_NUMBER, JR_STRING, JR_ARRAY, JR_OBJECT };

/* One value. Arrays and objects hold n children in kids (objects: keys[i] names kids[i]). */
struct jr_value {
    enum jr_type type;
    double num;                 /* JR_NUMBER; JR_BOOL: 0 or 1 */
    const char *str;            /* JR_STRING, NUL-terminated (may hold NULs: len) */
    size_t len;
    size_t n;
    struct jr_value **kids;
    const char **keys;
};

struct jr_doc;

/*
 * Parses text[0..len) (borrowed for the call). On success *doc is caller-owned (free with
 * jr_free()) and *root points into it. On failure returns -1 with a sentence naming the
 * byte offset and what was expected in err[0..errlen).
 */
int jr_parse(const char *text, size_t len, struct jr_doc **doc, const struct jr_value **root,
             char *err, size_t errlen);

/* Frees a document; NULL is a no-op. */
void jr_free(struct jr_doc *doc);

/* The member called key of object v, or NULL (also when v is NULL or not an object). */
const struct jr_value *jr_get(const struct jr_value *v, const char *key);

/* The number of v when it is one, else dflt. */
double jr_num(const struct jr_value *v, double dflt);

/* The string of v when it is one, else NULL. */
const char *jr_str(const struct jr_value *v);

#endif /* IPUOF_TOOLS_JSONREAD_H */
