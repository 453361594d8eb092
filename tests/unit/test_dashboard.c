/* The dashboard's sign-in sessions (src/dashboard/sessions.c): tokens found only by
 * themselves, the CSRF token apart from them, the per-account cap, the idle and the
 * absolute lifetime, sign-out. */
#include <string.h>

#include "common/common.h"
#include "dashboard/dashboard.h"
#include "unit.h"

TEST(dashboard_session_is_found_by_its_token_only)
{
    struct dashboard_sessions *ds = dashboard_sessions_new(&(struct dashboard_limits){0});
    char token[DASHBOARD_TOKEN_LEN + 1];
    const struct dashboard_session *s = dashboard_session_open(ds, "rtk_key", "acme", token);
    CHECK(s && strlen(token) == DASHBOARD_TOKEN_LEN &&
          strspn(token, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
              DASHBOARD_TOKEN_LEN);
    CHECK(strcmp(s->csrf, token) != 0 && strlen(s->csrf) == DASHBOARD_TOKEN_LEN);
    int64_t now = now_unix_ms();
    struct dashboard_session *found = dashboard_session_find(ds, token, now);
    CHECK(found == s && strcmp(found->key, "rtk_key") == 0);
    char other[DASHBOARD_TOKEN_LEN + 1];
    memcpy(other, token, sizeof other);
    other[0] = other[0] == 'A' ? 'B' : 'A';
    CHECK(dashboard_session_find(ds, other, now) == NULL);
    CHECK(dashboard_session_find(ds, s->csrf, now) == NULL); /* the CSRF token is no session */
    CHECK(dashboard_session_find(ds, "short", now) == NULL);
    dashboard_session_close(ds, found);
    CHECK(dashboard_session_find(ds, token, now) == NULL);
    CHECK(dashboard_sessions_count(ds) == 0);
    dashboard_sessions_free(ds);
}

TEST(dashboard_sessions_end_idle_and_at_their_age)
{
    struct dashboard_sessions *ds =
        dashboard_sessions_new(&(struct dashboard_limits){.idle_s = 60, .max_s = 100});
    char token[DASHBOARD_TOKEN_LEN + 1];
    const struct dashboard_session *s = dashboard_session_open(ds, "k", "acme", token);
    int64_t t0 = s->created_ms;
    CHECK(dashboard_session_expires_ms(ds, s) == t0 + 60000);
    CHECK(dashboard_session_find(ds, token, t0 + 59000) != NULL); /* used: idle from here */
    CHECK(dashboard_session_find(ds, token, t0 + 99000) != NULL);
    CHECK(dashboard_session_find(ds, token, t0 + 100000) == NULL); /* its age, used or not */
    s = dashboard_session_open(ds, "k", "acme", token);
    t0 = s->created_ms;
    CHECK(dashboard_session_find(ds, token, t0 + 60000) == NULL); /* unused for 60 s */
    CHECK(dashboard_sessions_count(ds) == 0);
    dashboard_sessions_free(ds);
}

TEST(dashboard_sessions_per_account_are_capped_oldest_first)
{
    struct dashboard_sessions *ds = dashboard_sessions_new(&(struct dashboard_limits){0});
    char first[DASHBOARD_TOKEN_LEN + 1], token[DASHBOARD_TOKEN_LEN + 1],
        theirs[DASHBOARD_TOKEN_LEN + 1];
    dashboard_session_open(ds, "k", "acme", first);
    dashboard_session_open(ds, "other", "globex", theirs);
    for (int i = 1; i < DASHBOARD_SESSIONS_PER_ACCOUNT; i++)
        dashboard_session_open(ds, "k", "acme", token);
    int64_t now = now_unix_ms();
    CHECK(dashboard_session_find(ds, first, now) != NULL);   /* 32 of acme's: all kept */
    for (int i = 0; i < DASHBOARD_SESSIONS_PER_ACCOUNT; i++) /* every one used after the first */
        dashboard_session_open(ds, "k", "acme", token);
    CHECK(dashboard_session_find(ds, token, now) != NULL);
    CHECK(dashboard_sessions_count(ds) == DASHBOARD_SESSIONS_PER_ACCOUNT + 1);
    CHECK(dashboard_session_find(ds, theirs, now) != NULL); /* another account's untouched */
    dashboard_sessions_free(ds);
}
