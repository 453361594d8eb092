/* Unknown fields of a JSON object, all named at once (json_known_fields). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

#define SHOWN_KEY_MAX 64 /* bytes of one unknown key in the message */

static bool is_known(const char *key, const char *const *known)
{
    for (; *known; known++)
        if (strcmp(key, *known) == 0) return true;
    return false;
}

/* Appends ", text" (or text first) to buf when it fits with room for the tail; false
 * when it does not (buf is left as it was). */
static bool append(char *buf, size_t size, size_t *len, const char *text, int text_max)
{
    int n = snprintf(buf + *len, size - *len, "%s%.*s", *len ? ", " : "", text_max, text);
    if (n < 0 || *len + (size_t)n >= size) {
        buf[*len] = '\0';
        return false;
    }
    *len += (size_t)n;
    return true;
}

int json_known_fields(const struct json_t *obj, const char *where, const char *const *known,
                      err_t *err)
{
    json_t *o = (json_t *)obj; /* jansson's iteration takes no const */
    if (!json_is_object(o)) return 0;
    /* The unknown keys as they came, as many as the message holds; the rest counted. */
    char unknown[300] = "", names[200] = "";
    size_t len = 0, n_unknown = 0, n_shown = 0, names_len = 0;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (is_known(k, known)) continue;
        n_unknown++;
        if (n_shown == n_unknown - 1 && append(unknown, sizeof unknown, &len, k, SHOWN_KEY_MAX))
            n_shown++;
    }
    if (n_unknown == 0) return 0;
    for (; *known; known++)
        append(names, sizeof names, &names_len, *known, INT_MAX);
    char more[40] = "";
    if (n_shown < n_unknown) snprintf(more, sizeof more, " and %zu more", n_unknown - n_shown);
    bool named = where && *where;
    return err_set(err, -EINVAL, "%s%sunknown field%s: %s%s; known: %s", named ? where : "",
                   named ? ": " : "", n_unknown > 1 ? "s" : "", unknown, more, names);
}
