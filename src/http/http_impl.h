/* Shared between the files of src/http; not part of the interface. */
#ifndef RUNTIME_HTTP_IMPL_H
#define RUNTIME_HTTP_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "../sniff/sniff.h"
#include "http.h"

/* tchar and a field value's bytes: sniff_tchar, sniff_field_char (sniff.h). */
/* ALPHA / DIGIT / "-" / "." / "_" / "~" (RFC 3986 2.3). */
bool http_unreserved(unsigned char c);
#define HTTP_NOT_HEX (-1)
/* The value of a hex digit (0..15), or HTTP_NOT_HEX. */
int http_hex(unsigned char c);
unsigned char http_lower(unsigned char c);
/* Case-insensitive comparison of p[0..n) with the lower-case NUL-terminated s. */
bool http_name_is(const unsigned char *p, size_t n, const char *s);

/* The path for matching (see http_request.path) from the raw path p[0..n),
 * which starts with '/' and excludes the query. */
bool http_path_normalize(const unsigned char *p, size_t n, char out[HTTP_PATH_MAX],
                         const char **why);

#endif
