/* dashboard: what the browser dashboard is made of on the daemon's side, with no HTTP
 * of its own (the API serves it, src/api/dashboard.c): the page's files, built from
 * ui/ and carried in the binary, and the sign-in sessions a key is exchanged for.
 *
 * A session is the browser's stand-in for an API key: the key is given once, at
 * sign-in, and the browser then holds only a random token in an HttpOnly cookie. The
 * session keeps a copy of the key so that every request is checked against the
 * accounts exactly as the key would be: a key rotated away, an account removed, ends
 * its sessions at their next request. Only SHA-256 of a token is kept. */
#ifndef RUNTIME_DASHBOARD_H
#define RUNTIME_DASHBOARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the page's files (ui/dist) ---- */

struct dashboard_file {
    const char *name; /* "index.html", "app.js", "app.css" */
    const char *type; /* its Content-Type */
    const unsigned char *data;
    size_t len;
    char etag[24]; /* "\"" + 16 hex digits of its SHA-256 + "\"" */
};
/* The file of that name, or NULL. */
const struct dashboard_file *dashboard_file(const char *name);

/* ---- sessions ---- */

#define DASHBOARD_TOKEN_LEN 43 /* 32 random bytes, base64url without padding */
#define DASHBOARD_KEY_MAX 128  /* the longest API key a session may hold */
#define DASHBOARD_SESSIONS_MAX 1024
#define DASHBOARD_SESSIONS_PER_ACCOUNT 32 /* past it, the one unused the longest goes */

struct dashboard_limits {
    uint32_t idle_s; /* unused this long, a session ends (default 12 h) */
    uint32_t max_s;  /* and at most this long after sign-in (default 7 days) */
};

struct dashboard_session {
    char key[DASHBOARD_KEY_MAX];        /* the API key it stands for (wiped when it ends) */
    char account[64];                   /* whom the key named at sign-in, to cap sessions */
    char csrf[DASHBOARD_TOKEN_LEN + 1]; /* sent back in X-CSRF-Token on every call */
    int64_t created_ms, used_ms;        /* wall clock */
};

struct dashboard_sessions;
struct dashboard_sessions *dashboard_sessions_new(const struct dashboard_limits *limits);
void dashboard_sessions_free(struct dashboard_sessions *ds);

/* A new session for key (checked by the caller) of account: its token (to send once,
 * in the cookie) in token_out, and the session. NULL only when out of memory. */
const struct dashboard_session *dashboard_session_open(struct dashboard_sessions *ds,
                                                       const char *key, const char *account,
                                                       char token_out[DASHBOARD_TOKEN_LEN + 1]);
/* The live session of a token, its use noted, or NULL (unknown, or expired: it then
 * ends). Every session is compared, each in constant time. */
struct dashboard_session *dashboard_session_find(struct dashboard_sessions *ds, const char *token,
                                                 int64_t now_ms);
/* Ends it (sign-out, or its key no longer valid). */
void dashboard_session_close(struct dashboard_sessions *ds, struct dashboard_session *s);
/* When it ends if unused, wall clock ms. */
int64_t dashboard_session_expires_ms(const struct dashboard_sessions *ds,
                                     const struct dashboard_session *s);
size_t dashboard_sessions_count(const struct dashboard_sessions *ds);

#endif
