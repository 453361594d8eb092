/* The saved connection of a login, where Runtime Cloud's official SDKs look for it
 * (docs/login.md): ${XDG_CONFIG_HOME:-$HOME/.config}/runtime-cloud/
 * <sha256hex(authOrigin "\n" apiOrigin)>.json, a private directory and file. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SAVED_MAX 4096 /* what the official readers take */

int saved_origin(const char *url, char *out, size_t size)
{
    const char *sep = url ? strstr(url, "://") : NULL;
    if (!sep || sep == url) return -EINVAL;
    char scheme[8];
    size_t sn = (size_t)(sep - url);
    if (sn >= sizeof scheme) return -EINVAL;
    for (size_t i = 0; i < sn; i++)
        scheme[i] = (char)tolower((unsigned char)url[i]);
    scheme[sn] = '\0';
    bool https = strcmp(scheme, "https") == 0;
    if (!https && strcmp(scheme, "http") != 0) return -EINVAL;
    const char *host = sep + 3;
    size_t hn = strcspn(host, "/?#");
    if (hn == 0 || memchr(host, '@', hn)) return -EINVAL; /* no user:password@ */
    char authority[300];
    if (hn >= sizeof authority) return -EINVAL;
    for (size_t i = 0; i < hn; i++)
        authority[i] = (char)tolower((unsigned char)host[i]);
    authority[hn] = '\0';
    /* The port the scheme implies is dropped, as a browser's URL.origin does. */
    char *colon = strrchr(authority, ':');
    if (colon && !strchr(colon, ']')) {
        if (strcmp(colon + 1, https ? "443" : "80") == 0 || colon[1] == '\0') *colon = '\0';
    }
    int n = snprintf(out, size, "%s://%s", scheme, authority);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int saved_origins(const struct cli *c, char *api, char *auth, size_t size)
{
    const char *a = getenv("RUNTIME_AUTH_URL");
    if (!c->api_url || saved_origin(c->api_url, api, size) < 0) return -EINVAL;
    return saved_origin(a && *a ? a : SAVED_DEFAULT_AUTH, auth, size);
}

void saved_name(const char *auth, const char *api, char out[65 + 5])
{
    char *text = NULL;
    unsigned char md[32];
    unsigned int len = 0;
    if (asprintf(&text, "%s\n%s", auth, api) < 0) text = NULL;
    EVP_Digest(text ? text : "", text ? strlen(text) : 0, md, &len, EVP_sha256(), NULL);
    free(text);
    hex_encode(out, md, sizeof md);
    strcat(out, ".json");
}

int saved_dir(char *out, size_t size)
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') /* relative: ignored, as the spec says */
        n = snprintf(out, size, "%s/runtime-cloud", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, size, "%s/.config/runtime-cloud", home);
    else
        return -ENOENT;
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* Owned by us, nobody else may read or write it, and of the type expected. */
static bool private_to_us(const struct stat *st, mode_t type)
{
    return (st->st_mode & S_IFMT) == type && st->st_uid == getuid() && (st->st_mode & 077) == 0;
}

/* The directory, opened without following a link, if it is private. */
static int open_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return -errno;
    if (fstat(fd, &st) < 0 || !private_to_us(&st, S_IFDIR)) {
        close(fd);
        return -EPERM;
    }
    return fd;
}

int saved_read(const char *dir, const char *name, char *buf, size_t size)
{
    int dfd = open_dir(dir);
    if (dfd < 0) return dfd;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    close(dfd);
    if (fd < 0) return -errno;
    struct stat st;
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && private_to_us(&st, S_IFREG) && st.st_size <= SAVED_MAX &&
        (size_t)st.st_size < size)
        n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0) return -EPERM;
    buf[n] = '\0';
    return 0;
}

int saved_key(const struct cli *c, char *key, size_t size)
{
    char api[300], auth[300], dir[4096], name[72], text[SAVED_MAX + 1];
    if (saved_origins(c, api, auth, sizeof api) < 0 || saved_dir(dir, sizeof dir) < 0)
        return -ENOENT;
    saved_name(auth, api, name);
    int r = saved_read(dir, name, text, sizeof text);
    if (r < 0) return r;
    json_t *j = json_loads(text, 0, NULL);
    explicit_bzero(text, sizeof text);
    const char *k = json_string_value(json_object_get(j, "key"));
    const char *origin = json_string_value(json_object_get(j, "apiOrigin"));
    /* As the official readers: only a key of the login's shape, saved for this API. */
    r = k && origin && strcmp(origin, api) == 0 && login_key_ok(k) ? str_copy(key, size, k)
                                                                   : -EINVAL;
    json_decref(j);
    return r;
}

/* mkdir of the last component only when missing; the parents as mkdir -p. */
static int make_dir(const char *dir)
{
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        if (mkdir_p(parent, 0700) < 0) return -errno;
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) return -errno;
    return 0;
}

int saved_write(const char *dir, const char *name, const char *text)
{
    int r = make_dir(dir);
    int dfd = r < 0 ? r : open_dir(dir);
    if (dfd < 0) return dfd;
    char tmp[128];
    snprintf(tmp, sizeof tmp, ".%s.%d.tmp", name, (int)getpid());
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    r = fd < 0 ? -errno : 0;
    if (r == 0) r = write_all(fd, text, strlen(text));
    if (r == 0 && fsync(fd) < 0) r = -errno;
    if (fd >= 0) close(fd);
    if (r == 0 && renameat(dfd, tmp, dfd, name) < 0) r = -errno;
    if (r < 0 && fd >= 0) unlinkat(dfd, tmp, 0);
    if (r == 0) fsync(dfd); /* the rename itself, durable */
    close(dfd);
    return r;
}

int saved_remove(const char *dir, const char *name)
{
    int dfd = open_dir(dir);
    if (dfd < 0) return dfd;
    int r = unlinkat(dfd, name, 0) < 0 ? -errno : 0;
    close(dfd);
    return r;
}

bool login_key_ok(const char *s)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    if (!s || strlen(s) != 8 + 36 + 1 + 43 || strncmp(s, "rtcloud_", 8) != 0) return false;
    for (int i = 8; i < 44; i++)
        if (!strchr("0123456789abcdef-", s[i])) return false;
    if (s[44] != '_') return false;
    for (int i = 45; i < 88; i++)
        if (!strchr(b64, s[i])) return false;
    return true;
}
