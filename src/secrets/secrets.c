#include "secrets.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define NONCE_LEN 12
#define TAG_LEN 16

int secrets_key_load(const char *path, uint8_t key[SECRETS_KEY_LEN], err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        random_bytes(key, SECRETS_KEY_LEN);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) return err_set(err, errno, "cannot create %s: %s", path, strerror(errno));
        int r = write_all(fd, key, SECRETS_KEY_LEN);
        if (r == 0 && fsync(fd) < 0) r = -errno;
        close(fd);
        return r < 0 ? err_set(err, r, "cannot write %s: %s", path, strerror(-r)) : 0;
    }
    if (fd < 0) return err_set(err, errno, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && (st.st_mode & 077) == 0) n = read(fd, key, SECRETS_KEY_LEN);
    close(fd);
    if ((st.st_mode & 077) != 0)
        return err_set(err, -EPERM,
                       "%s is readable by others; chmod 600 it (and consider "
                       "the secrets in it exposed)",
                       path);
    if (n != SECRETS_KEY_LEN)
        return err_set(err, -EINVAL,
                       "%s is not a %d-byte key; restore it from a backup (the "
                       "secrets sealed with it cannot be opened without it)",
                       path, SECRETS_KEY_LEN);
    return 0;
}

/* One AES-256-GCM pass; encrypt or decrypt according to enc. */
static int gcm(int enc, const uint8_t *key, const uint8_t *nonce, const char *aad,
               const uint8_t *in, size_t len, uint8_t *out, uint8_t *tag)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int ok = ctx && EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce, enc) == 1;
    int n = 0;
    ok = ok && EVP_CipherUpdate(ctx, NULL, &n, (const uint8_t *)aad, (int)strlen(aad)) == 1;
    ok = ok && (len == 0 || EVP_CipherUpdate(ctx, out, &n, in, (int)len) == 1);
    if (ok && !enc) ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) == 1;
    ok = ok && EVP_CipherFinal_ex(ctx, out + n, &n) == 1;
    if (ok && enc) ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) == 1;
    EVP_CIPHER_CTX_free(ctx);
    return ok ? 0 : -EBADMSG;
}

int secrets_seal(const uint8_t key[SECRETS_KEY_LEN], const char *name, const void *value,
                 size_t len, uint8_t **sealed, size_t *sealed_len, err_t *err)
{
    size_t total = NONCE_LEN + len + TAG_LEN;
    uint8_t *buf = malloc(total);
    if (!buf) return err_set(err, -ENOMEM, "out of memory");
    random_bytes(buf, NONCE_LEN);
    if (gcm(1, key, buf, name, value, len, buf + NONCE_LEN, buf + NONCE_LEN + len) < 0) {
        free(buf);
        return err_set(err, -EIO, "cannot seal the secret %s", name);
    }
    *sealed = buf;
    *sealed_len = total;
    return 0;
}

int secrets_open(const uint8_t key[SECRETS_KEY_LEN], const char *name, const uint8_t *sealed,
                 size_t sealed_len, char **value, size_t *len, err_t *err)
{
    if (sealed_len < NONCE_LEN + TAG_LEN)
        return err_set(err, -EBADMSG, "secret %s is damaged", name);
    size_t n = sealed_len - NONCE_LEN - TAG_LEN;
    char *out = malloc(n + 1);
    if (!out) return err_set(err, -ENOMEM, "out of memory");
    uint8_t tag[TAG_LEN];
    memcpy(tag, sealed + NONCE_LEN + n, TAG_LEN);
    if (gcm(0, key, sealed, name, sealed + NONCE_LEN, n, (uint8_t *)out, tag) < 0) {
        secrets_release(out, n);
        return err_set(err, -EBADMSG,
                       "secret %s cannot be opened: the key file is not the one "
                       "it was sealed with, or the store was altered",
                       name);
    }
    out[n] = '\0';
    *value = out;
    *len = n;
    return 0;
}

void secrets_release(char *value, size_t len)
{
    if (!value) return;
    explicit_bzero(value, len + 1);
    free(value);
}

/* Environment variables the sandbox's programs depend on: a secret is put in
 * every program's environment under its name (its placeholder as the value),
 * so one named after these replaced them everywhere. Three kinds, compared
 * without regard to case: what runtime itself sets in a sandbox; what the
 * dynamic loader, libc and the shells read before a program's own code runs
 * (glibc drops the same ones, LD_* and its "unsecure" list, for setuid
 * programs); and what an interpreter loads code or trust from. */
static const char *reserved_why(const char *name)
{
    static const struct {
        const char *name, *why; /* a final '*': every name that begins so */
    } reserved[] = {
        {"PATH", "where commands are found"},
        {"HOME", "the home directory"},
        {"USER", "the user's name"},
        {"LOGNAME", "the user's name"},
        {"SHELL", "the shell"},
        {"PWD", "the working directory"},
        {"OLDPWD", "the working directory"},
        {"TERM", "the terminal"},
        {"LANG", "the locale"},
        {"LANGUAGE", "the locale"},
        {"LC_*", "the locale"},
        {"TZ", "the time zone"},
        {"TZDIR", "the time zone"},
        {"TMPDIR", "where temporary files go"},
        {"HOSTNAME", "the host name"},
        {"IFS", "how the shell splits words"},
        {"ENV", "a file the shell runs at start"},
        {"BASH_ENV", "a file the shell runs at start"},
        {"SHLVL", "the shell"},
        {"LD_*", "the dynamic loader"},
        {"GLIBC_TUNABLES", "libc"},
        {"MALLOC_*", "libc's allocator"},
        {"GCONV_PATH", "libc"},
        {"GETCONF_DIR", "libc"},
        {"HOSTALIASES", "the resolver"},
        {"LOCALDOMAIN", "the resolver"},
        {"RES_OPTIONS", "the resolver"},
        {"RESOLV_HOST_CONF", "the resolver"},
        {"LOCPATH", "libc"},
        {"NLSPATH", "libc"},
        {"NIS_PATH", "libc"},
        {"NODE_EXTRA_CA_CERTS", "the CA bundle runtime points it at"},
        {"SSL_CERT_FILE", "the CA bundle runtime points it at"},
        {"SSL_CERT_DIR", "the CA certificates"},
        {"REQUESTS_CA_BUNDLE", "the CA bundle runtime points it at"},
        {"GIT_SSL_CAINFO", "the CA bundle runtime points it at"},
        {"CURL_CA_BUNDLE", "the CA certificates"},
        {"NODE_OPTIONS", "node's options (it loads code from them)"},
        {"NODE_PATH", "where node finds modules"},
        {"PYTHONPATH", "where python finds modules"},
        {"PYTHONHOME", "python's own modules"},
        {"PYTHONSTARTUP", "a file python runs at start"},
        {"PERL5LIB", "where perl finds modules"},
        {"PERL5OPT", "perl's options"},
        {"RUBYLIB", "where ruby finds code"},
        {"RUBYOPT", "ruby's options"},
        {"JAVA_TOOL_OPTIONS", "the JVM's options"},
        {"_JAVA_OPTIONS", "the JVM's options"},
        {"HTTP_PROXY", "the proxy programs send through"},
        {"HTTPS_PROXY", "the proxy programs send through"},
        {"ALL_PROXY", "the proxy programs send through"},
        {"NO_PROXY", "the proxy programs send through"},
    };
    for (size_t i = 0; i < ARRAY_LEN(reserved); i++) {
        const char *r = reserved[i].name;
        size_t k = strlen(r);
        if (r[k - 1] == '*' ? strncasecmp(name, r, k - 1) == 0 : strcasecmp(name, r) == 0)
            return reserved[i].why;
    }
    return NULL;
}

bool secrets_name_reserved(const char *name)
{
    return reserved_why(name) != NULL;
}

int secrets_check_name(const char *name, err_t *err)
{
    size_t n = strlen(name);
    bool ok = n > 0 && n <= SECRET_NAME_MAX && !isdigit((unsigned char)name[0]);
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)name[i]) || name[i] == '_';
    if (!ok)
        return err_set(err, -EINVAL,
                       "secret name \"%.64s\" must be an environment variable "
                       "name: letters, digits and '_', not starting with a digit, at most %d",
                       name, SECRET_NAME_MAX);
    const char *why = reserved_why(name);
    if (why)
        return err_set(err, -EINVAL,
                       "secret name %s is reserved: a secret is put in every program's "
                       "environment under its name, and %s is the variable for %s, which the "
                       "sandbox's programs depend on; choose another name (the variable the "
                       "program reads its key from, such as GITHUB_TOKEN)",
                       name, name, why);
    return 0;
}

void secrets_placeholder(char out[PLACEHOLDER_LEN + 1])
{
    memcpy(out, PLACEHOLDER_PREFIX, sizeof PLACEHOLDER_PREFIX - 1);
    random_hex(out + sizeof PLACEHOLDER_PREFIX - 1, 16);
}

bool secrets_is_placeholder(const char *s, size_t n)
{
    const size_t p = sizeof PLACEHOLDER_PREFIX - 1;
    if (n < PLACEHOLDER_LEN || memcmp(s, PLACEHOLDER_PREFIX, p) != 0) return false;
    for (size_t i = p; i < PLACEHOLDER_LEN; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) return false;
    return true;
}
