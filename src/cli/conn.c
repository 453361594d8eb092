/* Finding the daemon and its API key. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SOCKET "/run/runtime/api.sock"
#define DEFAULT_STATE_DIR "/var/lib/runtime"

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void conn_defaults(struct cli *c)
{
    *c = (struct cli){0};
    c->api_url = env_nonempty("RUNTIME_API_URL");
    c->socket = env_nonempty("RUNTIME_SOCKET");
    if (!c->socket) c->socket = DEFAULT_SOCKET;
    c->state_dir = env_nonempty("RUNTIME_STATE_DIR");
    if (!c->state_dir) c->state_dir = DEFAULT_STATE_DIR;
}

const char *conn_where(const struct cli *c)
{
    return c->api_url ? c->api_url : c->socket;
}

/* The key goes into an HTTP header: refuse anything that could break out of it. */
static bool key_ok(const char *k)
{
    if (!*k) return false;
    for (; *k; k++)
        if ((unsigned char)*k <= ' ' || (unsigned char)*k >= 0x7f) return false;
    return true;
}

static void trim_end(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
}

static int key_from_file(struct cli *c)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/admin.key", c->state_dir);
    int r = read_file_small(path, c->key, sizeof c->key);
    if (r < 0) {
        const char *hint = c->state_dir_given ? "" : "RUNTIME_API_KEY is not set and ";
        return cli_error("no API key: %s%s cannot be read (%s); set RUNTIME_API_KEY, or point "
                         "--state-dir or RUNTIME_STATE_DIR at the directory where runtimed "
                         "wrote it on first start, or run as a user who can read it",
                         hint, path, strerror(-r));
    }
    trim_end(c->key);
    snprintf(c->key_source, sizeof c->key_source, "%s", path);
    if (!key_ok(c->key))
        return cli_error("no API key: %s is empty or not a key; set RUNTIME_API_KEY", path);
    return 0;
}

int conn_load_key(struct cli *c)
{
    if (c->key[0]) return 0;
    const char *env = env_nonempty("RUNTIME_API_KEY");
    /* An explicit --state-dir names the daemon to talk to, so its key wins. */
    if (c->state_dir_given) return key_from_file(c);
    /* Then the key a `runtime login` saved for this daemon's origin. */
    if (!env && saved_key(c, c->key, sizeof c->key) == 0) {
        snprintf(c->key_source, sizeof c->key_source, "the connection saved by `runtime login`");
        return 0;
    }
    if (!env) return key_from_file(c);
    if (str_copy(c->key, sizeof c->key, env) < 0 || !key_ok(c->key)) {
        c->key[0] = '\0';
        return cli_error("RUNTIME_API_KEY is not a valid key (spaces, control characters or too "
                         "long); set it to the contents of the daemon's admin.key");
    }
    snprintf(c->key_source, sizeof c->key_source, "RUNTIME_API_KEY");
    return 0;
}
