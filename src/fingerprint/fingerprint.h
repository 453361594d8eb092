/* fingerprint: the fingerprint of an MCP server's tools (docs/catalog.md, "Fingerprints"):
 * sha256(canonical(tools sorted by name)), where canonical is exactly Python's
 * json.dumps(v, sort_keys=True, separators=(",", ":")).
 *
 * The JSON reader follows Python's json.loads, not jansson: numbers are kept as their
 * source text (so big integers stay exact and 1.0 stays a float), duplicate keys are
 * allowed (the last one wins), lone surrogate escapes are kept, NaN and Infinity are
 * read. A fingerprint taken by a Python program therefore checks here. */
#ifndef RUNTIME_FINGERPRINT_H
#define RUNTIME_FINGERPRINT_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/common.h"

/* Digits shown to users; all 64 are stored and compared. */
#define FINGERPRINT_SHORT 16
/* Nesting deeper than this is refused (Python's own limit is near 1000). */
#define FP_MAX_DEPTH 512
/* Integers longer than this are refused, as Python (3.11 and later) refuses them. */
#define FP_MAX_INT_DIGITS 4300

enum fp_type { FP_NULL, FP_FALSE, FP_TRUE, FP_NUMBER, FP_STRING, FP_ARRAY, FP_OBJECT };

struct fp_value;
struct fp_member {
    const char *key; /* like a string's text */
    size_t key_len;
    struct fp_value *val;
};

/* A parsed value; every pointer is owned by the fp_doc it came from. */
struct fp_value {
    enum fp_type type;
    size_t len; /* bytes of text; items of an array; members of an object */
    union {
        /* FP_NUMBER: the source spelling ("1E-7", "-0", "NaN"). FP_STRING: the decoded text,
         * UTF-8 except that a lone surrogate escape (\ud800) is kept as its 3-byte form, so
         * comparing bytes compares code points. NUL-terminated; may contain NULs. */
        const char *text;
        struct fp_value **items;
        /* Sorted by key in code point order; of equal keys only the last was kept. */
        struct fp_member *members;
    };
    /* FP_OBJECT: how many members were dropped because a later one had the same key, and
     * the first such key (a client that keeps the first one would read other text). */
    size_t dups;
    const char *dup_key;
    size_t dup_key_len;
};

struct fp_doc;

/* Parses len bytes of JSON text (UTF-8, an optional BOM). 0 and *doc, or -EINVAL with a
 * message that says where the text is bad; -ENOMEM. */
int fp_parse(const char *json, size_t len, struct fp_doc **doc, err_t *err);
const struct fp_value *fp_doc_root(const struct fp_doc *doc);
void fp_doc_free(struct fp_doc *doc);

/* The member key of an object, or NULL (also when obj is not an object). */
const struct fp_value *fp_get(const struct fp_value *obj, const char *key);
/* A string value's text, or NULL when v is not a string. */
const char *fp_string(const struct fp_value *v);
/* Code point order of two keys or strings (bytes, then length). */
int fp_text_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* Canonical text of v: malloc'd, NUL-terminated, ASCII. 0, or -ENOMEM. */
int fp_canonical(const struct fp_value *v, char **out, size_t *len, err_t *err);
/* Python's repr of the double d ("100.0", "1e-07", "1e+16", "NaN"); out holds >= 32. */
void fp_format_double(double d, char *out, size_t size);

/* The tools of a document: the array itself, a tools/list result {"tools": [...]} or a
 * JSON-RPC response {"result": {"tools": [...]}}, sorted by name (stable) into a malloc'd
 * array of pointers into the document. -EINVAL when it is none of these, when a tool is
 * not an object with a string name, or when it is one page of several (nextCursor). */
int fp_tools_sorted(const struct fp_value *root, const struct fp_value ***tools, size_t *n,
                    err_t *err);
/* The same over the pages of a paged tools/list (each a result or a JSON-RPC response;
 * nextCursor allowed): all their tools, sorted by name. */
int fp_tools_sorted_pages(const struct fp_value *const *pages, size_t npages,
                          const struct fp_value ***tools, size_t *n, err_t *err);

/* The fingerprint of a parsed document: hex (64 digits and NUL) and, when wanted, the
 * canonical text (malloc'd) and the number of tools. */
int fingerprint_doc(const struct fp_value *root, char **canonical, size_t *canonical_len,
                    char hex[65], size_t *ntools, err_t *err);
/* The same from JSON text. */
int fingerprint_tools(const char *json, size_t len, char **canonical, char hex[65], err_t *err);
/* Lowercase hex SHA-256 of len bytes. */
void fingerprint_sha256_hex(const void *data, size_t len, char hex[65]);
/* Whether a fingerprint a user gave (at least FINGERPRINT_SHORT hex digits, any case, a
 * prefix of the full one) names sha256_hex. */
bool fingerprint_matches(const char *given, const char *sha256_hex);

#endif
