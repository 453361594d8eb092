/* The scan of a tool list: every string and key of every tool (the model reads them all:
 * names, titles, descriptions, parameter descriptions, enum values, defaults, examples),
 * each checked against patterns of known attacks on the model and for characters the
 * reviewer cannot see. A tripwire, not a proof: whatever passes here was still reviewed by
 * its hash. */
#include "review_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- patterns ---- */

/* Pattern text is lowercase ASCII and matches case-insensitively; ' ' matches any run of
 * white space, '\'' a straight or curly apostrophe. */
enum {
    P_START = 1, /* not preceded by a letter or digit */
    P_END = 2,   /* not followed by a letter or digit */
    P_NEXT = 4,  /* followed by something other than white space (a scheme: "data:x") */
};
struct pattern {
    const char *text;
    unsigned char flags;
};

static const struct pattern model_text[] = {
    {"<important", 0},
    {"</important", 0},
    {"<system", 0},
    {"</system", 0},
    {"<instruction", 0},
    {"</instruction", 0},
    {"<critical", 0},
    {"<hidden", 0},
    {"<secret", 0},
    {"<admin", 0},
    {"<assistant", 0},
    {"<|", 0},
    {"[inst]", 0},
    {"[system]", 0},
    {"ignore previous", P_START},
    {"ignore all", P_START},
    {"ignore any previous", P_START},
    {"ignore prior", P_START},
    {"ignore the above", P_START},
    {"ignore your", P_START},
    {"disregard previous", P_START},
    {"disregard all", P_START},
    {"disregard the above", P_START},
    {"disregard your", P_START},
    {"forget previous", P_START},
    {"forget all", P_START},
    {"forget your", P_START},
    {"you must", P_START},
    {"you are now", P_START},
    {"you will now", P_START},
    {"new instructions", P_START},
    {"system prompt", P_START},
    {"system message", P_START},
    {"note to the ai", P_START},
    {"note to the assistant", P_START},
    {"note to the model", P_START},
    {"the assistant must", P_START},
    {"the assistant should", P_START},
    {"as an ai", P_START | P_END},
    {"ai assistant", P_START},
    {"language model", P_START},
};

static const struct pattern hide[] = {
    {"do not mention", P_START},
    {"don't mention", P_START},
    {"do not tell", P_START},
    {"don't tell", P_START},
    {"do not show", P_START},
    {"don't show", P_START},
    {"do not reveal", P_START},
    {"don't reveal", P_START},
    {"do not disclose", P_START},
    {"don't disclose", P_START},
    {"do not inform", P_START},
    {"don't inform", P_START},
    {"do not notify", P_START},
    {"don't notify", P_START},
    {"do not alert", P_START},
    {"do not let the user", P_START},
    {"don't let the user", P_START},
    {"never mention", P_START},
    {"never tell", P_START},
    {"never reveal", P_START},
    {"never show", P_START},
    {"never disclose", P_START},
    {"without telling", P_START},
    {"without informing", P_START},
    {"without mentioning", P_START},
    {"without notifying", P_START},
    {"without asking", P_START},
    {"without the user", P_START},
    {"secretly", P_START},
    {"covertly", P_START},
    {"keep this secret", P_START},
    {"keep it secret", P_START},
    {"keep this hidden", P_START},
    {"keep it hidden", P_START},
    {"hide this", P_START},
    {"hide it from", P_START},
    {"hidden from the user", P_START},
    {"not visible to the user", P_START},
    {"user must not know", P_START},
    {"user should not know", P_START},
    {"user does not need to know", P_START},
    {"user doesn't need to know", P_START},
    {"no need to mention", P_START},
    {"no need to tell", P_START},
};

static const struct pattern secret_path[] = {
    {"~/", 0},
    {"~\\", 0},
    {"$home", P_END},
    {"%userprofile%", 0},
    {"%appdata%", 0},
    {".ssh", P_START | P_END},
    {"id_rsa", P_START},
    {"id_dsa", P_START},
    {"id_ecdsa", P_START},
    {"id_ed25519", P_START},
    {"authorized_keys", P_START},
    {".aws", P_START | P_END},
    {".env", P_START | P_END},
    {".npmrc", P_START | P_END},
    {".netrc", P_START | P_END},
    {".pypirc", P_START | P_END},
    {".pgpass", P_START | P_END},
    {".git-credentials", P_START},
    {".gnupg", P_START | P_END},
    {".kube/config", P_START},
    {".docker/config", P_START},
    {"credentials", P_START},
    {"mcp.json", P_START},
    {"claude_desktop_config", P_START},
    {"/etc/passwd", 0},
    {"/etc/shadow", 0},
    {"/etc/sudoers", 0},
    {"/proc/self/environ", 0},
    {"private key", P_START},
    {"private_key", P_START},
    {"wallet.dat", P_START},
    {".bash_history", P_START},
    {".zsh_history", P_START},
};

static const struct pattern url[] = {
    {"http://", 0},
    {"https://", 0},
    {"ftp://", 0},
    {"file://", 0},
    {"ws://", 0},
    {"wss://", 0},
    {"data:", P_START | P_NEXT},
    {"javascript:", P_START | P_NEXT},
};

static const struct pattern call_order[] = {
    {"before calling", P_START},
    {"before using", P_START},
    {"before you call", P_START},
    {"before you use", P_START},
    {"before invoking", P_START},
    {"before any other tool", P_START},
    {"after calling", P_START},
    {"instead of", P_START},
    {"rather than calling", P_START},
    {"rather than using", P_START},
    {"in place of", P_START},
    {"always call", P_START},
    {"always use", P_START},
    {"always invoke", P_START},
    {"always run", P_START},
    {"must call", P_START},
    {"must use", P_START},
    {"must invoke", P_START},
    {"must be called", P_START},
    {"must first", P_START},
    {"first call", P_START},
    {"call this tool first", P_START},
    {"call this first", P_START},
    {"whenever", P_START},
    {"every time", P_START},
    {"each time you", P_START},
    {"do not use", P_START},
    {"don't use", P_START},
    {"never use", P_START},
    {"do not call", P_START},
    {"don't call", P_START},
    {"never call", P_START},
    {"prefer this tool", P_START},
    {"use this tool instead", P_START},
    {"only use this tool", P_START},
};

static const struct {
    enum review_kind kind;
    const struct pattern *list;
    size_t n;
} groups[] = {
    {REVIEW_MODEL_TEXT, model_text, ARRAY_LEN(model_text)},    {REVIEW_HIDE, hide, ARRAY_LEN(hide)},
    {REVIEW_SECRET_PATH, secret_path, ARRAY_LEN(secret_path)}, {REVIEW_URL, url, ARRAY_LEN(url)},
    {REVIEW_CALL_ORDER, call_order, ARRAY_LEN(call_order)},
};

const char *review_kind_text(enum review_kind k)
{
    static const char *const text[REVIEW_KIND_COUNT] = {
        [REVIEW_MODEL_TEXT] = "text aimed at the model",
        [REVIEW_HIDE] = "request to hide",
        [REVIEW_SECRET_PATH] = "secret file path",
        [REVIEW_URL] = "URL",
        [REVIEW_CALL_ORDER] = "order about when to call",
        [REVIEW_INVISIBLE] = "invisible characters",
        [REVIEW_BIDI] = "direction-changing characters",
        [REVIEW_TAG_TEXT] = "hidden text in tag characters",
        [REVIEW_NAME_CHARS] = "non-ASCII letters in a name",
        [REVIEW_DUP_TOOL] = "two tools of this name",
        [REVIEW_DUP_KEY] = "duplicate key",
    };
    return (unsigned)k < REVIEW_KIND_COUNT ? text[k] : "?";
}

static bool word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static size_t skip_space(const unsigned char *t, size_t j, size_t n)
{
    for (;;) {
        if (j < n && (t[j] == ' ' || t[j] == '\t' || t[j] == '\n' || t[j] == '\r'))
            j++;
        else if (n - j >= 2 && t[j] == 0xC2 && t[j + 1] == 0xA0) /* no-break space */
            j += 2;
        else
            return j;
    }
}

/* Bytes of text matched by pattern p at t[i..n), or 0. */
static size_t match_at(const char *p, const unsigned char *t, size_t i, size_t n)
{
    size_t j = i;
    for (; *p; p++) {
        if (*p == ' ') {
            size_t k = skip_space(t, j, n);
            if (k == j) return 0;
            j = k;
        } else if (*p == '\'' && j < n && t[j] == '\'') {
            j++;
        } else if (*p == '\'') { /* U+2018, U+2019, U+02BC */
            if (n - j >= 3 && t[j] == 0xE2 && t[j + 1] == 0x80 &&
                (t[j + 2] == 0x98 || t[j + 2] == 0x99))
                j += 3;
            else if (n - j >= 2 && t[j] == 0xCA && t[j + 1] == 0xBC)
                j += 2;
            else
                return 0;
        } else {
            unsigned char c = j < n ? t[j] : 0;
            if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
            if (j >= n || c != (unsigned char)*p) return 0;
            j++;
        }
    }
    return j - i;
}

/* The first match of any pattern of the list: its start and end, or false. */
static bool find_any(const struct pattern *list, size_t np, const unsigned char *t, size_t n,
                     size_t *ms, size_t *me)
{
    for (size_t i = 0; i < n; i++) {
        bool after_word = i > 0 && word_byte(t[i - 1]);
        for (size_t k = 0; k < np; k++) {
            const struct pattern *p = &list[k];
            if ((p->flags & P_START) && after_word) continue;
            size_t m = match_at(p->text, t, i, n);
            if (!m) continue;
            if ((p->flags & P_END) && i + m < n && word_byte(t[i + m])) continue;
            if ((p->flags & P_NEXT) &&
                (i + m >= n || t[i + m] == ' ' || t[i + m] == '\n' || t[i + m] == '\t'))
                continue;
            *ms = i, *me = i + m;
            return true;
        }
    }
    return false;
}

/* ---- characters ---- */

static uint32_t decode(const unsigned char *s, size_t n, size_t *len)
{
    unsigned char c = s[0];
    size_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (k > n) k = 1;
    uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1Fu : k == 3 ? c & 0x0Fu : c & 0x07u;
    for (size_t i = 1; i < k; i++)
        cp = cp << 6 | (s[i] & 0x3Fu);
    *len = k;
    return cp;
}

static bool is_bidi(uint32_t cp)
{
    return cp == 0x61C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

static bool is_vs(uint32_t cp)
{
    return (cp >= 0xFE00 && cp <= 0xFE0F) || (cp >= 0xE0100 && cp <= 0xE01EF);
}

/* Characters that show as nothing. One variation selector after a character is how emoji
 * are written (U+FE0F); a run of them, or one of the supplement, can carry hidden bytes. */
static bool is_invisible(uint32_t cp, uint32_t prev)
{
    if (cp == '\t' || cp == '\n' || cp == '\r') return false;
    if (is_vs(cp)) return is_vs(prev) || cp >= 0xE0100;
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0xAD || cp == 0x34F || cp == 0x115F ||
           cp == 0x1160 || cp == 0x17B4 || cp == 0x17B5 || (cp >= 0x180B && cp <= 0x180F) ||
           (cp >= 0x200B && cp <= 0x200D) || (cp >= 0x2060 && cp <= 0x2064) ||
           (cp >= 0x206A && cp <= 0x206F) || cp == 0x3164 || (cp >= 0xD800 && cp <= 0xDFFF) ||
           cp == 0xFEFF || cp == 0xFFA0 || (cp >= 0xFFF9 && cp <= 0xFFFB) ||
           (cp >= 0x1D173 && cp <= 0x1D17A) || (cp >= 0xE0000 && cp <= 0xE007F);
}

/* ---- the walk ---- */

/* A string of OLD, to tell which findings of NEW were there before. */
struct seen {
    char *path;
    const char *text;
    size_t len;
    bool is_key;
};

enum ctx {
    CTX_PLAIN,
    CTX_TOOL,       /* the tool object itself */
    CTX_TOOL_NAME,  /* its "name" */
    CTX_PROPERTIES, /* a "properties" object: its keys are parameter names */
    CTX_SCHEMA_URI, /* the value of "$schema" */
};

struct walk {
    struct review *r;
    struct sbuf path;
    bool collect; /* OLD: remember strings; NEW: check them */
    struct seen *seen;
    size_t n_seen, cap_seen;
    int err;
};

static int seen_cmp(const void *a, const void *b)
{
    const struct seen *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : (int)x->is_key - (int)y->is_key;
}

static bool was_seen(const struct walk *w, const char *text, size_t len, bool is_key)
{
    struct seen key = {.path = w->path.p ? w->path.p : "", .is_key = is_key};
    size_t lo = 0, hi = w->n_seen;
    while (lo < hi) { /* the first entry not below key */
        size_t mid = lo + (hi - lo) / 2;
        if (seen_cmp(&w->seen[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < w->n_seen && seen_cmp(&w->seen[lo], &key) == 0; lo++)
        if (w->seen[lo].len == len && memcmp(w->seen[lo].text, text, len) == 0) return true;
    return false;
}

static void remember(struct walk *w, const char *text, size_t len, bool is_key)
{
    if (w->n_seen == w->cap_seen) {
        size_t cap = w->cap_seen ? w->cap_seen * 2 : 256;
        struct seen *ns = realloc(w->seen, cap * sizeof *ns);
        if (!ns) {
            w->err = -ENOMEM;
            return;
        }
        w->seen = ns, w->cap_seen = cap;
    }
    char *path = strdup(w->path.p ? w->path.p : "");
    if (!path) {
        w->err = -ENOMEM;
        return;
    }
    w->seen[w->n_seen++] = (struct seen){path, text, len, is_key};
}

static void add_finding(struct walk *w, enum review_kind kind, struct sbuf *excerpt, bool in_old)
{
    struct review *r = w->r;
    char *path = strdup(w->path.p ? w->path.p : "");
    char *text = sb_take(excerpt);
    struct review_finding *nf =
        path && text ? realloc(r->findings, (r->n_findings + 1) * sizeof *nf) : NULL;
    if (!nf) {
        free(path);
        free(text);
        w->err = -ENOMEM;
        return;
    }
    r->findings = nf;
    r->findings[r->n_findings++] = (struct review_finding){path, kind, text, in_old};
}

/* Backs i up (or forward) to the start of a character. */
static size_t char_start(const unsigned char *t, size_t n, size_t i)
{
    while (i > 0 && i < n && (t[i] & 0xC0) == 0x80)
        i--;
    return i;
}

/* The text around [ms, me): some context on either side, "..." where it was cut. */
static void excerpt_put(struct sbuf *b, const char *text, size_t n, size_t ms, size_t me)
{
    const unsigned char *t = (const unsigned char *)text;
    size_t from = ms > 40 ? char_start(t, n, ms - 40) : 0;
    size_t to = n - me > 60 ? char_start(t, n, me + 60) : n;
    if (from > 0) sb_puts(b, "...");
    display_put(b, text + from, to - from, false);
    if (to < n) sb_puts(b, "...");
}

static void check_patterns(struct walk *w, const char *text, size_t n, enum ctx ctx, bool in_old)
{
    const unsigned char *t = (const unsigned char *)text;
    for (size_t g = 0; g < ARRAY_LEN(groups); g++) {
        size_t ms, me;
        if (!find_any(groups[g].list, groups[g].n, t, n, &ms, &me)) continue;
        /* Every schema names its meta-schema; that URL is not news. */
        if (groups[g].kind == REVIEW_URL && ctx == CTX_SCHEMA_URI &&
            (strncmp(text, "http://json-schema.org/", 23) == 0 ||
             strncmp(text, "https://json-schema.org/", 24) == 0))
            continue;
        struct sbuf ex = {0};
        excerpt_put(&ex, text, n, ms, me);
        add_finding(w, groups[g].kind, &ex, in_old);
    }
}

static void check_chars(struct walk *w, const char *text, size_t n, enum ctx ctx, bool in_old)
{
    const unsigned char *t = (const unsigned char *)text;
    size_t first_inv = SIZE_MAX, first_bidi = SIZE_MAX, len;
    bool non_ascii = false;
    uint32_t prev = 0;
    struct sbuf tags = {0};
    for (size_t i = 0; i < n; i += len) {
        uint32_t cp = decode(t + i, n - i, &len);
        if (is_invisible(cp, prev) && first_inv == SIZE_MAX) first_inv = i;
        if (is_bidi(cp) && first_bidi == SIZE_MAX) first_bidi = i;
        if (cp >= 0xE0020 && cp <= 0xE007E && tags.len < 400) {
            char c = (char)(cp - 0xE0000);
            sb_put(&tags, &c, 1);
        }
        non_ascii |= cp >= 0x80;
        prev = cp;
    }
    struct sbuf ex = {0};
    if (first_inv != SIZE_MAX) {
        excerpt_put(&ex, text, n, first_inv, first_inv + 1);
        add_finding(w, REVIEW_INVISIBLE, &ex, in_old);
    }
    if (first_bidi != SIZE_MAX) {
        excerpt_put(&ex, text, n, first_bidi, first_bidi + 1);
        add_finding(w, REVIEW_BIDI, &ex, in_old);
    }
    if (tags.len) {
        display_put(&ex, tags.p, tags.len, true);
        add_finding(w, REVIEW_TAG_TEXT, &ex, in_old);
    }
    free(tags.p);
    if (non_ascii && (ctx == CTX_TOOL_NAME || ctx == CTX_PROPERTIES)) {
        display_put(&ex, text, n, true);
        add_finding(w, REVIEW_NAME_CHARS, &ex, in_old);
    }
}

/* A string, or a key (ctx CTX_PROPERTIES for a parameter name), at the current path. */
static void visit_text(struct walk *w, const char *text, size_t n, enum ctx ctx, bool is_key)
{
    if (w->collect) {
        remember(w, text, n, is_key);
        return;
    }
    bool in_old = was_seen(w, text, n, is_key);
    check_patterns(w, text, n, ctx, in_old);
    check_chars(w, text, n, ctx, in_old);
}

static enum ctx member_ctx(enum ctx parent, const char *key, size_t n)
{
    if (parent == CTX_TOOL && n == 4 && memcmp(key, "name", 4) == 0) return CTX_TOOL_NAME;
    if (parent == CTX_PROPERTIES) return CTX_PLAIN; /* a parameter's schema */
    if (n == 10 && memcmp(key, "properties", 10) == 0) return CTX_PROPERTIES;
    if (n == 7 && memcmp(key, "$schema", 7) == 0) return CTX_SCHEMA_URI;
    return CTX_PLAIN;
}

static void walk_value(struct walk *w, const struct fp_value *v, enum ctx ctx);

static void walk_object(struct walk *w, const struct fp_value *v, enum ctx ctx)
{
    size_t mark = w->path.len;
    if (v->dups && !w->collect) {
        struct sbuf ex = {0};
        display_put(&ex, v->dup_key, v->dup_key_len, true);
        add_finding(w, REVIEW_DUP_KEY, &ex, false);
    }
    for (size_t i = 0; i < v->len && !w->err; i++) {
        const struct fp_member *m = &v->members[i];
        path_put(&w->path, m->key, m->key_len, w->path.len == 0);
        /* Keys are read too: a parameter's name is its first description. */
        visit_text(w, m->key, m->key_len, ctx == CTX_PROPERTIES ? CTX_PROPERTIES : CTX_PLAIN, true);
        walk_value(w, m->val, member_ctx(ctx, m->key, m->key_len));
        sb_cut(&w->path, mark);
    }
}

static void walk_value(struct walk *w, const struct fp_value *v, enum ctx ctx)
{
    size_t mark = w->path.len;
    if (w->path.oom) w->err = -ENOMEM;
    if (w->err) return;
    switch (v->type) {
    case FP_STRING:
        visit_text(w, v->text, v->len, ctx == CTX_PROPERTIES ? CTX_PLAIN : ctx, false);
        break;
    case FP_ARRAY:
        for (size_t i = 0; i < v->len && !w->err; i++) {
            sb_printf(&w->path, "[%zu]", i);
            walk_value(w, v->items[i], CTX_PLAIN);
            sb_cut(&w->path, mark);
        }
        break;
    case FP_OBJECT:
        walk_object(w, v, ctx);
        break;
    case FP_NULL:
    case FP_FALSE:
    case FP_TRUE:
    case FP_NUMBER: /* no text in them */
        break;
    }
}

static void walk_tools(struct walk *w, const struct fp_value *const *tools, size_t n)
{
    for (size_t i = 0; i < n && !w->err; i++) {
        const struct fp_value *name = fp_get(tools[i], "name");
        sb_cut(&w->path, 0);
        path_put(&w->path, name->text, name->len, true);
        if (!w->collect && i > 0) {
            const struct fp_value *prev = fp_get(tools[i - 1], "name");
            if (fp_text_cmp(prev->text, prev->len, name->text, name->len) == 0) {
                struct sbuf ex = {0};
                display_put(&ex, name->text, name->len, true);
                add_finding(w, REVIEW_DUP_TOOL, &ex, false);
            }
        }
        /* The tool's own path is its name: members come after it with a dot. */
        walk_value(w, tools[i], CTX_TOOL);
    }
}

int review_scan(struct review *r, const struct fp_value *const *new_tools, size_t n_new,
                const struct fp_value *const *old_tools, size_t n_old)
{
    struct walk w = {.r = r, .collect = true};
    walk_tools(&w, old_tools, n_old);
    if (!w.err && w.n_seen) qsort(w.seen, w.n_seen, sizeof *w.seen, seen_cmp);
    w.collect = false;
    if (!w.err) walk_tools(&w, new_tools, n_new);
    for (size_t i = 0; i < w.n_seen; i++)
        free(w.seen[i].path);
    free(w.seen);
    free(w.path.p);
    return w.err;
}
