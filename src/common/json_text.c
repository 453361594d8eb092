/* Compact JSON text, fast on long strings (common.h: json_text). Strings go out in runs
 * of bytes that need no escape; jansson's strings are valid UTF-8, so a run is copied
 * as it is. Reals are left to jansson, so that their text is exactly its own. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

struct text {
    char *p;
    size_t n, cap;
    bool oom;
};

static void put(struct text *t, const char *s, size_t n)
{
    if (t->oom || n == 0) return;
    if (t->cap - t->n <= n) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap - t->n <= n)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->oom = true;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
}

/* The escape json_dumps writes for a byte that may not go out as it is. */
static const char *escape(unsigned char c, char buf[8])
{
    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        snprintf(buf, 8, "\\u%04X", c);
        return buf;
    }
}

static void put_string(struct text *t, const char *s, size_t n)
{
    put(t, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue; /* the run goes on */
        char buf[8];
        const char *e = escape(c, buf);
        put(t, s + run, i - run);
        put(t, e, strlen(e));
        run = i + 1;
    }
    put(t, s + run, n - run);
    put(t, "\"", 1);
}

static void put_value(struct text *t, const json_t *v);

static void put_object(struct text *t, const json_t *v)
{
    put(t, "{", 1);
    const char *key;
    size_t key_len;
    json_t *m;
    bool first = true;
    json_object_keylen_foreach((json_t *)v, key, key_len, m)
    {
        if (!first) put(t, ",", 1);
        first = false;
        put_string(t, key, key_len);
        put(t, ":", 1);
        put_value(t, m);
    }
    put(t, "}", 1);
}

static void put_array(struct text *t, const json_t *v)
{
    put(t, "[", 1);
    for (size_t i = 0; i < json_array_size(v); i++) {
        if (i) put(t, ",", 1);
        put_value(t, json_array_get(v, i));
    }
    put(t, "]", 1);
}

static void put_value(struct text *t, const json_t *v)
{
    char num[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return put_object(t, v);
    case JSON_ARRAY:
        return put_array(t, v);
    case JSON_STRING:
        return put_string(t, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return put(t, num, strlen(num));
    case JSON_TRUE:
        return put(t, "true", 4);
    case JSON_FALSE:
        return put(t, "false", 5);
    case JSON_NULL:
        return put(t, "null", 4);
    case JSON_REAL:
        break;
    }
    char *real = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!real) {
        t->oom = true;
        return;
    }
    put(t, real, strlen(real));
    free(real);
}

char *json_text(const json_t *v, size_t *len)
{
    struct text t = {0};
    if (v) put_value(&t, v);
    put(&t, "", 1); /* the NUL */
    if (t.oom || !v) {
        free(t.p);
        return NULL;
    }
    if (len) *len = t.n - 1;
    return t.p;
}
