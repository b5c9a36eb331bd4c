/*
 * json.h — the little JSON output ipuctl needs: strings escaped by hand, no JSON library.
 */
#ifndef IPUCTL_JSON_H
#define IPUCTL_JSON_H

#include <stdio.h>

/*
 * Writes s to f as a JSON string literal: quotes, backslash and control characters are
 * escaped, and bytes that are not valid UTF-8 become U+FFFD, so the output is valid JSON
 * whatever the daemon sent. NULL is written as null. s is only read.
 */
void json_string(FILE *f, const char *s);

/* As json_string(), but an empty string is written as null. */
void json_string_or_null(FILE *f, const char *s);

#endif /* IPUCTL_JSON_H */
